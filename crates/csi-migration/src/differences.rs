//! Where this translation deliberately gives another answer than k8s.io/csi-translation-lib,
//! the library kube-controller-manager, the kubelet and the external-provisioner use. Every
//! [`Note`](super::Note) that comes from one of these carries it, and
//! `storage-operator migration translate` marks it in its output comments, so a reader can tell
//! "Kubernetes does this too" from "Kubernetes would do otherwise".
//!
//! The list, with upstream's behaviour, ours and the reason, is [`Difference::ALL`] (and the
//! crate docs of [`crate`]); a test keeps both in step.

use std::fmt;

/// One deliberate difference from csi-translation-lib.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Difference {
    /// A translated StorageClass names the CSI driver as its provisioner.
    ClassProvisioner,
    /// Empty volume IDs are refused.
    EmptyVolumeId,
    /// Azure Disk URIs are checked, case-insensitively, in both directions.
    AzureDiskUri,
    /// GCE PD handles must have the `projects/<p>/zones|regions/<z>/disks/<name>` shape.
    GcePdHandle,
    /// Azure File volumes need a share and a Secret name.
    AzureFileShare,
    /// A vSphere CSI volume without `initialvolumefilepath` has no in-tree form.
    VsphereInitialPath,
    /// vSphere inline volumes with a storage policy name translate (upstream panics).
    VsphereInlinePolicy,
    /// vSphere zone labels holding several zones (`a__b`) are split.
    VsphereZoneLabel,
    /// Spaces around the zones of a `zones` parameter are trimmed.
    ZonesTrimmed,
    /// A node affinity term without zones is left alone when a region is derived.
    TermWithoutZones,
    /// A partition attribute outside the 32-bit range is refused.
    PartitionRange,
    /// Two parameters that set the same thing: one is chosen by a written rule.
    MapOrder,
}

impl Difference {
    /// Every difference.
    pub const ALL: [Difference; 12] = [
        Difference::ClassProvisioner,
        Difference::EmptyVolumeId,
        Difference::AzureDiskUri,
        Difference::GcePdHandle,
        Difference::AzureFileShare,
        Difference::VsphereInitialPath,
        Difference::VsphereInlinePolicy,
        Difference::VsphereZoneLabel,
        Difference::ZonesTrimmed,
        Difference::TermWithoutZones,
        Difference::PartitionRange,
        Difference::MapOrder,
    ];

    /// The short name printed in output comments and used in the docs.
    pub fn id(self) -> &'static str {
        match self {
            Difference::ClassProvisioner => "class-provisioner",
            Difference::EmptyVolumeId => "empty-volume-id",
            Difference::AzureDiskUri => "azure-disk-uri",
            Difference::GcePdHandle => "gce-pd-handle",
            Difference::AzureFileShare => "azure-file-share",
            Difference::VsphereInitialPath => "vsphere-initial-path",
            Difference::VsphereInlinePolicy => "vsphere-inline-policy",
            Difference::VsphereZoneLabel => "vsphere-zone-label",
            Difference::ZonesTrimmed => "zones-trimmed",
            Difference::TermWithoutZones => "term-without-zones",
            Difference::PartitionRange => "partition-range",
            Difference::MapOrder => "map-order",
        }
    }

    /// What csi-translation-lib does.
    pub fn upstream(self) -> &'static str {
        match self {
            Difference::ClassProvisioner => {
                "translates the parameters and topologies of a StorageClass and leaves its \
                 provisioner as it was (Portworx excepted)"
            }
            Difference::EmptyVolumeId => {
                "translates an empty volumeID, pdName, diskURI or volumePath into an empty \
                 volume handle"
            }
            Difference::AzureDiskUri => {
                "passes any diskURI to the CSI driver; translating back, accepts only the \
                 exact-case managed disk path (`.../resourceGroups/.../providers/\
                 Microsoft.Compute/disks/<name>`) or a blob URL"
            }
            Difference::GcePdHandle => {
                "translating back, takes the sixth `/`-separated part of any handle with six \
                 or more parts as the disk name"
            }
            Difference::AzureFileShare => {
                "builds a volume handle with an empty share or account when shareName or \
                 secretName is empty"
            }
            Difference::VsphereInitialPath => {
                "translates a CSI volume without the `initialvolumefilepath` attribute to an \
                 in-tree volume with an empty volumePath"
            }
            Difference::VsphereInlinePolicy => {
                "dereferences a nil pointer (the process panics) when an inline vsphereVolume \
                 has a storagePolicyName"
            }
            Difference::VsphereZoneLabel => {
                "takes a vSphere PV's zone label as one zone, `zone-a__zone-b` included"
            }
            Difference::ZonesTrimmed => {
                "splits `zones` at commas and keeps the spaces: `a, b` gives the zones `a` \
                 and ` b`"
            }
            Difference::TermWithoutZones => {
                "translating an AWS EBS or GCE PD volume back, fails with `no zones specified` \
                 when a node affinity term has no zone requirement"
            }
            Difference::PartitionRange => {
                "reads the `partition` attribute as a 64-bit integer and truncates it to 32 bits"
            }
            Difference::MapOrder => {
                "when two StorageClass parameters set the same thing (`zone` and `zones`, \
                 `fstype` and `csi.storage.k8s.io/fstype`, `fsType` and `fstype`, ...), keeps \
                 whichever Go's randomised map iteration visits last"
            }
        }
    }

    /// What this translation does instead.
    pub fn ours(self) -> &'static str {
        match self {
            Difference::ClassProvisioner => "sets the provisioner to the CSI driver",
            Difference::EmptyVolumeId => "refuses the object, naming the empty field",
            Difference::AzureDiskUri => {
                "refuses a diskURI that is neither a managed disk path nor a blob URL in both \
                 directions, and matches the path's words in any case"
            }
            Difference::GcePdHandle => {
                "refuses a handle that is not projects/<project>/zones|regions/<zone or \
                 region>/disks/<name>"
            }
            Difference::AzureFileShare => "refuses the object, naming the empty field",
            Difference::VsphereInitialPath => "refuses the volume, naming the attribute",
            Difference::VsphereInlinePolicy => {
                "translates it, with the policy name as the `storagepolicyname` attribute as for \
                 a PersistentVolume"
            }
            Difference::VsphereZoneLabel => {
                "splits the label at `__`, as the in-tree plugin wrote several zones, and \
                 requires any of them"
            }
            Difference::ZonesTrimmed => "trims each zone",
            Difference::TermWithoutZones => "leaves that term without a region requirement",
            Difference::PartitionRange => "refuses the volume, naming the attribute",
            Difference::MapOrder => {
                "always keeps the same one and says which in a note: an explicit CSI \
                 parameter over one renamed into it, `zones` over `zone`, and among spellings \
                 of one key the last in byte order"
            }
        }
    }

    /// Why.
    pub fn why(self) -> &'static str {
        match self {
            Difference::ClassProvisioner => {
                "the output is meant to be applied as the class that replaces the in-tree one"
            }
            Difference::EmptyVolumeId
            | Difference::AzureDiskUri
            | Difference::GcePdHandle
            | Difference::AzureFileShare => {
                "the CSI driver would refuse the volume at attach or mount time, where the \
                 cause is much harder to find"
            }
            Difference::VsphereInitialPath => {
                "an in-tree volume without a path cannot be attached; only volumes provisioned \
                 for a migrated class (csimigration=true) have an in-tree form"
            }
            Difference::VsphereInlinePolicy => "a translation must never crash its caller",
            Difference::VsphereZoneLabel => {
                "a volume on a datastore shared by several zones is usable from any of them"
            }
            Difference::ZonesTrimmed => "no zone name starts or ends with a space",
            Difference::TermWithoutZones => {
                "a term without zones constrains no zone, so there is no region to derive; \
                 failing would leave the volume untranslatable"
            }
            Difference::PartitionRange => "a truncated partition number names another partition",
            Difference::MapOrder => "the same input must always give the same class",
        }
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}
