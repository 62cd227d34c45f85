//! In-tree to CSI migration: the in-memory translation Kubernetes applies to the objects of a
//! migrated in-tree volume plugin (k8s.io/csi-translation-lib's behaviour), as pure functions.
//!
//! For each migrated plugin ([`Plugin`]) this translates an in-tree StorageClass, an in-tree
//! PersistentVolume and an inline pod volume to the CSI form the cluster actually runs, and a
//! CSI PersistentVolume of the replacing driver back to its in-tree form. Every translation
//! returns the object with a list of [`Note`]s: each parameter or field that was dropped,
//! renamed, added or rewritten, and why. Malformed input is a [`TranslateError`] naming the field.
//!
//! Where this gives another answer than csi-translation-lib, on purpose (each is a
//! [`Difference`]; a note carrying it is marked `[differs from csi-translation-lib: <id>]` in
//! `migration translate`'s output):
//! - `class-provisioner`: upstream translates a StorageClass's parameters and topologies and
//!   keeps its provisioner (Portworx excepted); ours names the CSI driver, as the output is
//!   meant to be applied as the replacing class.
//! - `empty-volume-id`: upstream turns an empty volumeID, pdName, diskURI or volumePath into an
//!   empty handle; ours refuses it, naming the field (the driver would refuse it at attach time).
//! - `azure-disk-uri`: upstream passes any diskURI to the driver and, going back, accepts only
//!   the exact-case managed disk path; ours checks it both ways, in any case, as the driver does.
//! - `gce-pd-handle`: upstream takes the sixth part of any handle of six or more `/`-parts as the
//!   disk name; ours requires `projects/<p>/zones|regions/<z>/disks/<name>`.
//! - `azure-file-share`: upstream builds a handle with an empty share or account; ours refuses.
//! - `vsphere-initial-path`: upstream gives an in-tree volume with an empty path to a CSI volume
//!   without `initialvolumefilepath`; ours refuses (only volumes provisioned for a migrated class
//!   have an in-tree form).
//! - `vsphere-inline-policy`: upstream panics (nil pointer) on an inline vsphereVolume with a
//!   storagePolicyName; ours translates it as it does a PersistentVolume's.
//! - `vsphere-zone-label`: upstream takes a vSphere PV's zone label `a__b` as one zone; ours
//!   splits it, as the in-tree plugin wrote several zones that way.
//! - `zones-trimmed`: upstream keeps the spaces of `zones: a, b` (zone ` b`); ours trims.
//! - `term-without-zones`: going back, upstream fails (`no zones specified`) when an AWS EBS or
//!   GCE PD node affinity term has no zone; ours leaves that term without a region.
//! - `partition-range`: upstream truncates a `partition` attribute to 32 bits; ours refuses it.
//! - `map-order`: where two StorageClass parameters set the same thing (`zone` and `zones`,
//!   `fstype` and `csi.storage.k8s.io/fstype`, two spellings of one key), or two spellings of
//!   one volume attribute are read back (Azure Disk and File), upstream keeps whichever Go's
//!   random map order visits last; ours keeps an explicit CSI parameter over one renamed into
//!   it, `zones` over `zone`, and otherwise the key last in byte order, and says so in a note
//!   on the object.
//!
//! Everything else follows upstream, including its quirks: StorageClasses translate one way only
//! (in-tree to CSI), Portworx PersistentVolumes lose `readOnly`, an Azure Disk inline volume's
//! PersistentVolume is named by its disk URI, and Azure Disk zones that are numbers (fault
//! domains) become the empty zone. The tables in `crates/csi-migration/tests/migration/` pin the output,
//! object by object, for every parameter and field upstream handles.

mod aws_ebs;
mod azure_disk;
mod azure_file;
mod cinder;
mod differences;
mod gce_pd;
mod portworx;
mod topology;
mod vsphere;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use differences::Difference;

/// CSINode annotation listing (comma-separated) the in-tree plugins the node's kubelet migrated.
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";
/// Annotation the PV controller sets on PVs and PVCs of a migrated plugin: the CSI driver name.
pub const MIGRATED_TO_ANNOTATION: &str = "pv.kubernetes.io/migrated-to";
/// The StorageClass annotation marking the default class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The fsType StorageClass parameter the external-provisioner reads.
pub const CSI_FSTYPE_PARAMETER: &str = "csi.storage.k8s.io/fstype";

/// An in-tree volume plugin that Kubernetes migrates to a CSI driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plugin {
    /// `kubernetes.io/aws-ebs` -> `ebs.csi.aws.com`.
    AwsEbs,
    /// `kubernetes.io/gce-pd` -> `pd.csi.storage.gke.io`.
    GcePd,
    /// `kubernetes.io/azure-disk` -> `disk.csi.azure.com`.
    AzureDisk,
    /// `kubernetes.io/azure-file` -> `file.csi.azure.com`.
    AzureFile,
    /// `kubernetes.io/cinder` -> `cinder.csi.openstack.org`.
    Cinder,
    /// `kubernetes.io/vsphere-volume` -> `csi.vsphere.vmware.com`.
    VSphere,
    /// `kubernetes.io/portworx-volume` -> `pxd.portworx.com`.
    Portworx,
}

impl Plugin {
    /// Every migrated plugin.
    pub const ALL: [Plugin; 7] = [
        Plugin::AwsEbs,
        Plugin::GcePd,
        Plugin::AzureDisk,
        Plugin::AzureFile,
        Plugin::Cinder,
        Plugin::VSphere,
        Plugin::Portworx,
    ];

    /// The in-tree plugin name (a StorageClass `provisioner`).
    pub fn in_tree_name(self) -> &'static str {
        match self {
            Plugin::AwsEbs => "kubernetes.io/aws-ebs",
            Plugin::GcePd => "kubernetes.io/gce-pd",
            Plugin::AzureDisk => "kubernetes.io/azure-disk",
            Plugin::AzureFile => "kubernetes.io/azure-file",
            Plugin::Cinder => "kubernetes.io/cinder",
            Plugin::VSphere => "kubernetes.io/vsphere-volume",
            Plugin::Portworx => "kubernetes.io/portworx-volume",
        }
    }

    /// The name of the CSI driver that replaces it.
    pub fn csi_driver(self) -> &'static str {
        match self {
            Plugin::AwsEbs => "ebs.csi.aws.com",
            Plugin::GcePd => "pd.csi.storage.gke.io",
            Plugin::AzureDisk => "disk.csi.azure.com",
            Plugin::AzureFile => "file.csi.azure.com",
            Plugin::Cinder => "cinder.csi.openstack.org",
            Plugin::VSphere => "csi.vsphere.vmware.com",
            Plugin::Portworx => "pxd.portworx.com",
        }
    }

    /// The zone topology key the translation writes, if the driver has one.
    pub fn topology_key(self) -> Option<&'static str> {
        match self {
            Plugin::AwsEbs => Some(aws_ebs::TOPOLOGY_KEY),
            Plugin::GcePd => Some(gce_pd::TOPOLOGY_KEY),
            Plugin::AzureDisk => Some(azure_disk::TOPOLOGY_KEY),
            Plugin::Cinder => Some(cinder::TOPOLOGY_KEY),
            Plugin::VSphere => Some(vsphere::ZONE_KEY),
            Plugin::AzureFile | Plugin::Portworx => None,
        }
    }

    /// The plugin with this in-tree name.
    pub fn from_in_tree_name(name: &str) -> Option<Plugin> {
        Plugin::ALL.into_iter().find(|p| p.in_tree_name() == name)
    }

    /// The plugin this CSI driver replaces.
    pub fn from_csi_driver(driver: &str) -> Option<Plugin> {
        Plugin::ALL.into_iter().find(|p| p.csi_driver() == driver)
    }

    /// The plugin of an in-tree PersistentVolume source, if the spec has one that migrates.
    pub fn of_pv_spec(spec: &PersistentVolumeSpec) -> Option<Plugin> {
        if spec.aws_elastic_block_store.is_some() {
            Some(Plugin::AwsEbs)
        } else if spec.gce_persistent_disk.is_some() {
            Some(Plugin::GcePd)
        } else if spec.azure_disk.is_some() {
            Some(Plugin::AzureDisk)
        } else if spec.azure_file.is_some() {
            Some(Plugin::AzureFile)
        } else if spec.cinder.is_some() {
            Some(Plugin::Cinder)
        } else if spec.vsphere_volume.is_some() {
            Some(Plugin::VSphere)
        } else if spec.portworx_volume.is_some() {
            Some(Plugin::Portworx)
        } else {
            None
        }
    }

    /// The plugin of an inline pod volume, if it is of a migrated in-tree plugin.
    pub fn of_volume(volume: &Volume) -> Option<Plugin> {
        if volume.aws_elastic_block_store.is_some() {
            Some(Plugin::AwsEbs)
        } else if volume.gce_persistent_disk.is_some() {
            Some(Plugin::GcePd)
        } else if volume.azure_disk.is_some() {
            Some(Plugin::AzureDisk)
        } else if volume.azure_file.is_some() {
            Some(Plugin::AzureFile)
        } else if volume.cinder.is_some() {
            Some(Plugin::Cinder)
        } else if volume.vsphere_volume.is_some() {
            Some(Plugin::VSphere)
        } else if volume.portworx_volume.is_some() {
            Some(Plugin::Portworx)
        } else {
            None
        }
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.in_tree_name())
    }
}

/// One change a translation made that a reader of the result would not guess.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The field of the input (or, for additions, of the output) the note is about, in the
    /// object's YAML spelling (`parameters.zone`, `spec.gcePersistentDisk.pdName`).
    pub field: String,
    /// What happened to it and why.
    pub message: String,
    /// Set when csi-translation-lib would do otherwise here.
    pub difference: Option<Difference>,
}

impl Note {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Note {
            field: field.into(),
            message: message.into(),
            difference: None,
        }
    }

    /// A note about a deliberate difference from csi-translation-lib.
    fn differs(field: impl Into<String>, message: impl Into<String>, why: Difference) -> Self {
        Note {
            difference: Some(why),
            ..Note::new(field, message)
        }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)?;
        if let Some(difference) = self.difference {
            write!(f, " [differs from csi-translation-lib: {difference}]")?;
        }
        Ok(())
    }
}

/// A translated object and the notes explaining the translation.
#[derive(Clone, Debug, PartialEq)]
pub struct Translation<T> {
    /// The translated object.
    pub object: T,
    /// Every parameter or field dropped, renamed, added or rewritten, in the order done.
    pub notes: Vec<Note>,
}

/// A translation failed; `field` names the offending field of the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// A volume ID or handle is not in the format the plugin or driver uses.
    #[error("{field}: malformed {plugin} volume ID {value:?}: {reason}")]
    MalformedVolumeId {
        /// The plugin whose format was expected.
        plugin: Plugin,
        /// The field holding the ID.
        field: String,
        /// The ID as given.
        value: String,
        /// What is wrong and the expected format.
        reason: String,
    },
    /// A field's value cannot be translated.
    #[error("{field}: invalid value {value:?}: {reason}")]
    InvalidValue {
        /// The offending field.
        field: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The object uses something the translation does not support.
    #[error("{field}: {reason}")]
    Unsupported {
        /// The offending field.
        field: String,
        /// What is not supported and what to do instead.
        reason: String,
    },
    /// Refused here where csi-translation-lib would translate it (a deliberate [`Difference`]).
    #[error("{cause} [differs from csi-translation-lib: {difference}]")]
    Differs {
        /// Which difference.
        difference: Difference,
        /// The refusal.
        cause: Box<TranslateError>,
    },
}

impl TranslateError {
    /// The field the error is about.
    pub fn field(&self) -> &str {
        match self {
            TranslateError::MalformedVolumeId { field, .. }
            | TranslateError::InvalidValue { field, .. }
            | TranslateError::Unsupported { field, .. } => field,
            TranslateError::Differs { cause, .. } => cause.field(),
        }
    }

    /// The refusal itself, without the [`TranslateError::Differs`] mark.
    pub fn cause(&self) -> &TranslateError {
        match self {
            TranslateError::Differs { cause, .. } => cause.cause(),
            other => other,
        }
    }

    /// The deliberate difference from csi-translation-lib this refusal is, if any.
    pub fn difference(&self) -> Option<Difference> {
        match self {
            TranslateError::Differs { difference, .. } => Some(*difference),
            _ => None,
        }
    }

    /// The same error with its field put under `prefix` (`spec.volumes[2]`).
    pub fn under(self, prefix: &str) -> Self {
        match self {
            TranslateError::Differs { difference, cause } => TranslateError::Differs {
                difference,
                cause: Box::new(cause.under(prefix)),
            },
            mut other => {
                if let TranslateError::MalformedVolumeId { field, .. }
                | TranslateError::InvalidValue { field, .. }
                | TranslateError::Unsupported { field, .. } = &mut other
                {
                    *field = format!("{prefix}.{field}");
                }
                other
            }
        }
    }

    /// Marks this refusal as a deliberate difference from csi-translation-lib.
    fn differs(self, difference: Difference) -> Self {
        TranslateError::Differs {
            difference,
            cause: Box::new(self),
        }
    }

    fn unsupported(field: impl Into<String>, reason: impl Into<String>) -> Self {
        TranslateError::Unsupported {
            field: field.into(),
            reason: reason.into(),
        }
    }

    fn invalid(field: impl Into<String>, value: &str, reason: impl Into<String>) -> Self {
        TranslateError::InvalidValue {
            field: field.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    fn malformed(
        plugin: Plugin,
        field: impl Into<String>,
        value: &str,
        reason: impl Into<String>,
    ) -> Self {
        TranslateError::MalformedVolumeId {
            plugin,
            field: field.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Result of a translation step.
pub type Result<T, E = TranslateError> = std::result::Result<T, E>;

/// Translates a StorageClass of an in-tree provisioner to the CSI StorageClass of its driver:
/// provisioner, parameters (renamed, dropped or added per plugin) and allowed topologies.
pub fn translate_storage_class(sc: &StorageClass) -> Result<Translation<StorageClass>> {
    let Some(plugin) = Plugin::from_in_tree_name(&sc.provisioner) else {
        return Err(not_in_tree_provisioner(&sc.provisioner));
    };
    let mut out = sc.clone();
    let message = format!(
        "{} -> {}: the CSI driver provisions the class's volumes since migration",
        plugin.in_tree_name(),
        plugin.csi_driver()
    );
    let mut notes = vec![if plugin == Plugin::Portworx {
        Note::new("provisioner", message)
    } else {
        Note::differs("provisioner", message, Difference::ClassProvisioner)
    }];
    out.provisioner = plugin.csi_driver().to_string();
    if sc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
    {
        notes.push(Note::new(
            format!("metadata.annotations[{DEFAULT_CLASS_ANNOTATION}]"),
            "kept: created next to the in-tree class under another name, it would make a \
             second default; keep the annotation on one of them",
        ));
    }
    let params = sc.parameters.clone().unwrap_or_default();
    let mut ctx = ScContext {
        allowed_topologies: out.allowed_topologies.take(),
        notes: &mut notes,
    };
    let params = match plugin {
        Plugin::AwsEbs => aws_ebs::storage_class(params, &mut ctx)?,
        Plugin::GcePd => gce_pd::storage_class(params, &mut ctx)?,
        Plugin::AzureDisk => azure_disk::storage_class(params, &mut ctx)?,
        Plugin::AzureFile => azure_file::storage_class(params, &mut ctx)?,
        Plugin::Cinder => cinder::storage_class(params, &mut ctx)?,
        Plugin::VSphere => vsphere::storage_class(params, &mut ctx)?,
        Plugin::Portworx => portworx::storage_class(params, &mut ctx)?,
    };
    out.allowed_topologies = ctx.allowed_topologies;
    out.parameters = (!params.is_empty()).then_some(params);
    Ok(Translation { object: out, notes })
}

fn not_in_tree_provisioner(provisioner: &str) -> TranslateError {
    let reason = match Plugin::from_csi_driver(provisioner) {
        Some(plugin) => format!(
            "already the CSI driver of {plugin}; StorageClasses are translated from in-tree only"
        ),
        None => format!(
            "not an in-tree provisioner that migrates to CSI (one of {})",
            in_tree_names()
        ),
    };
    TranslateError::invalid("provisioner", provisioner, reason)
}

fn in_tree_names() -> String {
    Plugin::ALL
        .iter()
        .map(|p| p.in_tree_name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The StorageClass parts a plugin's parameter rules may change.
pub(crate) struct ScContext<'a> {
    pub(crate) allowed_topologies: Option<Vec<k8s_openapi::api::core::v1::TopologySelectorTerm>>,
    pub(crate) notes: &'a mut Vec<Note>,
}

/// Translates an in-tree PersistentVolume to the CSI PersistentVolume the cluster works with:
/// the in-tree source becomes a `csi` source of the replacing driver; topology and access
/// modes are rewritten where the plugin needs it.
pub fn translate_pv_to_csi(pv: &PersistentVolume) -> Result<Translation<PersistentVolume>> {
    let spec = pv.spec.clone().unwrap_or_default();
    let Some(plugin) = Plugin::of_pv_spec(&spec) else {
        return Err(TranslateError::unsupported(
            "spec",
            "no in-tree volume source that migrates to CSI (one of awsElasticBlockStore, \
                 gcePersistentDisk, azureDisk, azureFile, cinder, vsphereVolume, portworxVolume)",
        ));
    };
    let mut out = pv.clone();
    let mut notes = Vec::new();
    match plugin {
        Plugin::AwsEbs => aws_ebs::pv_to_csi(&mut out, &mut notes)?,
        Plugin::GcePd => gce_pd::pv_to_csi(&mut out, &mut notes)?,
        Plugin::AzureDisk => azure_disk::pv_to_csi(&mut out, &mut notes)?,
        Plugin::AzureFile => azure_file::pv_to_csi(&mut out, &mut notes)?,
        Plugin::Cinder => cinder::pv_to_csi(&mut out, &mut notes)?,
        Plugin::VSphere => vsphere::pv_to_csi(&mut out, &mut notes)?,
        Plugin::Portworx => portworx::pv_to_csi(&mut out, &mut notes)?,
    }
    Ok(Translation { object: out, notes })
}

/// Translates an inline pod volume of a migrated plugin to the PersistentVolume the kubelet
/// and attach/detach controller use in its place (Filesystem mode, the plugin's access mode).
/// `pod_namespace` is where secrets referenced by the volume live.
pub fn translate_inline_volume(
    volume: &Volume,
    pod_namespace: &str,
) -> Result<Translation<PersistentVolume>> {
    let Some(plugin) = Plugin::of_volume(volume) else {
        return Err(TranslateError::unsupported(
            "volume",
            format!(
                "volume {:?} is not of an in-tree plugin that migrates to CSI",
                volume.name
            ),
        ));
    };
    let mut notes = Vec::new();
    let mut pv = match plugin {
        Plugin::AwsEbs => aws_ebs::inline_to_csi(volume, &mut notes)?,
        Plugin::GcePd => gce_pd::inline_to_csi(volume, &mut notes)?,
        Plugin::AzureDisk => azure_disk::inline_to_csi(volume, &mut notes)?,
        Plugin::AzureFile => azure_file::inline_to_csi(volume, pod_namespace, &mut notes)?,
        Plugin::Cinder => cinder::inline_to_csi(volume, &mut notes)?,
        Plugin::VSphere => vsphere::inline_to_csi(volume, &mut notes)?,
        Plugin::Portworx => portworx::inline_to_csi(volume, &mut notes)?,
    };
    let spec = pv.spec.get_or_insert_with(Default::default);
    if spec.volume_mode.is_none() {
        spec.volume_mode = Some("Filesystem".to_string());
    }
    Ok(Translation { object: pv, notes })
}

/// Translates every inline volume of a pod that belongs to a migrated plugin; volumes of other
/// kinds are skipped. Notes and errors name the volume (`spec.volumes[1].gcePersistentDisk...`).
pub fn translate_pod_volumes(pod: &Pod) -> Result<Vec<Translation<PersistentVolume>>> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (index, volume) in volumes.iter().enumerate() {
        if Plugin::of_volume(volume).is_none() {
            continue;
        }
        let prefix = format!("spec.volumes[{index}]");
        let mut translation =
            translate_inline_volume(volume, namespace).map_err(|e| e.under(&prefix))?;
        for note in &mut translation.notes {
            note.field = format!("{prefix}.{}", note.field);
        }
        out.push(translation);
    }
    Ok(out)
}

/// Translates a CSI PersistentVolume of a migration driver back to its in-tree form, as
/// Kubernetes does for volumes the CSI driver provisioned for an in-tree StorageClass.
pub fn translate_pv_to_in_tree(pv: &PersistentVolume) -> Result<Translation<PersistentVolume>> {
    let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
        return Err(TranslateError::unsupported(
            "spec.csi",
            "not a CSI PersistentVolume: only CSI volumes translate back to in-tree",
        ));
    };
    let Some(plugin) = Plugin::from_csi_driver(&csi.driver) else {
        return Err(TranslateError::invalid(
            "spec.csi.driver",
            &csi.driver,
            "not a CSI driver that replaces an in-tree plugin",
        ));
    };
    let csi = csi.clone();
    let mut out = pv.clone();
    if let Some(spec) = out.spec.as_mut() {
        spec.csi = None;
    }
    let mut notes = vec![Note::new(
        "spec.csi",
        format!("replaced by the {plugin} in-tree source"),
    )];
    match plugin {
        Plugin::AwsEbs => aws_ebs::pv_to_in_tree(&csi, &mut out, &mut notes)?,
        Plugin::GcePd => gce_pd::pv_to_in_tree(&csi, &mut out, &mut notes)?,
        Plugin::AzureDisk => azure_disk::pv_to_in_tree(&csi, &mut out, &mut notes)?,
        Plugin::AzureFile => azure_file::pv_to_in_tree(&csi, &mut out, &mut notes)?,
        Plugin::Cinder => cinder::pv_to_in_tree(&csi, &mut out, &mut notes)?,
        Plugin::VSphere => vsphere::pv_to_in_tree(&csi, &mut out, &mut notes)?,
        Plugin::Portworx => portworx::pv_to_in_tree(&csi, &mut out, &mut notes)?,
    }
    Ok(Translation { object: out, notes })
}

// Helpers shared by the plugin modules.

/// A CSI source with the common fields set.
fn csi_source(
    plugin: Plugin,
    handle: String,
    fs_type: Option<String>,
    read_only: Option<bool>,
    attributes: BTreeMap<String, String>,
) -> CSIPersistentVolumeSource {
    CSIPersistentVolumeSource {
        driver: plugin.csi_driver().to_string(),
        volume_handle: handle,
        fs_type: fs_type.filter(|s| !s.is_empty()),
        read_only: read_only.filter(|r| *r),
        volume_attributes: (!attributes.is_empty()).then_some(attributes),
        ..Default::default()
    }
}

/// The PersistentVolume standing in for an inline volume: named `<driver>-<unique id>`, as the
/// staging path is derived from it.
fn inline_pv(
    plugin: Plugin,
    unique: &str,
    csi: CSIPersistentVolumeSource,
    access_mode: &str,
) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("{}-{unique}", plugin.csi_driver())),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            csi: Some(csi),
            access_modes: Some(vec![access_mode.to_string()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Moves the in-tree source out: sets the CSI source and a note.
fn set_csi(pv: &mut PersistentVolume, source_field: &str, csi: CSIPersistentVolumeSource) -> Note {
    let driver = csi.driver.clone();
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.csi = Some(csi);
    Note::new(
        format!("spec.{source_field}"),
        format!("replaced by a csi source of driver {driver}"),
    )
}

/// Fails on an empty volume ID.
fn require_id(plugin: Plugin, field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(
            TranslateError::malformed(plugin, field, value, "the volume ID is empty")
                .differs(Difference::EmptyVolumeId),
        );
    }
    Ok(())
}

/// The `partition` volume attribute of an EBS or GCE PD CSI volume: a decimal integer (an
/// empty value is one only when `empty_is_error`); 0, the whole disk, is no partition.
fn parse_partition(value: &str, empty_is_error: bool) -> Result<Option<i32>> {
    let field = "spec.csi.volumeAttributes.partition";
    if value.is_empty() && !empty_is_error {
        return Ok(None);
    }
    let wide: i64 = value
        .parse()
        .map_err(|_| TranslateError::invalid(field, value, "not an integer"))?;
    let narrow = i32::try_from(wide).map_err(|_| {
        TranslateError::invalid(
            field,
            value,
            "out of the 32-bit range of a partition number",
        )
        .differs(Difference::PartitionRange)
    })?;
    Ok((narrow != 0).then_some(narrow))
}

/// Notes, for each of `known` (lower-case attribute names read in any case) given in several
/// spellings, that the one last in byte order is read: upstream reads whichever its map order
/// visits last. With `skip_empty`, empty values do not count (the reader ignores them).
fn attribute_spellings(
    attributes: Option<&BTreeMap<String, String>>,
    known: &[&str],
    skip_empty: bool,
    notes: &mut Vec<Note>,
) {
    for name in known {
        let spellings: Vec<&String> = attributes
            .into_iter()
            .flatten()
            .filter(|(k, v)| k.eq_ignore_ascii_case(name) && !(skip_empty && v.is_empty()))
            .map(|(k, _)| k)
            .collect();
        if let [lost @ .., kept] = spellings.as_slice() {
            for key in lost {
                notes.push(Note::differs(
                    format!("spec.csi.volumeAttributes.{key}"),
                    format!(
                        "ignored: volumeAttributes.{kept} is read instead (csi-translation-lib \
                         reads either, by Go map order)"
                    ),
                    Difference::MapOrder,
                ));
            }
        }
    }
}

/// The note on StorageClass parameter `lost`, ignored because parameter `kept` sets `what` too
/// (the [`Difference::MapOrder`] rule).
pub(crate) fn map_order_note(lost: &str, kept: &str, what: &str) -> Note {
    Note::differs(
        format!("parameters.{lost}"),
        format!(
            "ignored: parameters.{kept} also sets {what} and is kept (csi-translation-lib \
             keeps either, by Go map order)"
        ),
        Difference::MapOrder,
    )
}

/// How a StorageClass parameter came to be in the output; when two inputs set the same output
/// parameter, the higher rank wins, and between equal ranks the input key later in byte order
/// (the [`Difference::MapOrder`] rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// Added by the translation because of another parameter.
    Derived,
    /// Renamed from an in-tree parameter.
    Renamed,
    /// Given under this very name.
    Explicit,
}

/// The parameters of a translated StorageClass, built one input parameter at a time. Inputs
/// arrive in byte order (a `BTreeMap`), so the outcome never depends on map order as
/// csi-translation-lib's does.
#[derive(Default)]
pub(crate) struct Params {
    out: BTreeMap<String, (String, String, Rank)>,
    notes: Vec<Note>,
}

impl Params {
    /// Sets output parameter `key` to `value` because of input parameter `from`.
    pub(crate) fn set(&mut self, key: &str, value: &str, from: &str, rank: Rank) {
        let new = (value.to_string(), from.to_string(), rank);
        match self.out.get(key) {
            Some((_, kept, old)) if *old > rank => {
                let note = map_order_note(from, kept, key);
                self.notes.push(note);
            }
            Some((_, old_from, _)) => {
                let note = map_order_note(old_from, from, key);
                self.notes.push(note);
                self.out.insert(key.to_string(), new);
            }
            None => {
                self.out.insert(key.to_string(), new);
            }
        }
    }

    /// Keeps input parameter `key` as it is.
    pub(crate) fn keep(&mut self, key: &str, value: &str) {
        self.set(key, value, key, Rank::Explicit);
    }

    /// The parameters, and the notes about inputs that lost to another.
    pub(crate) fn finish(self, notes: &mut Vec<Note>) -> BTreeMap<String, String> {
        notes.extend(self.notes);
        self.out
            .into_iter()
            .map(|(key, (value, _, _))| (key, value))
            .collect()
    }
}

/// The `fstype` StorageClass parameter, in any case, is renamed to the CSI one; returns whether
/// the key was handled.
fn rename_fstype(key: &str, value: &str, out: &mut Params, notes: &mut Vec<Note>) -> bool {
    if key.eq_ignore_ascii_case("fstype") {
        out.set(CSI_FSTYPE_PARAMETER, value, key, Rank::Renamed);
        notes.push(Note::new(
            format!("parameters.{key}"),
            format!(
                "renamed to {CSI_FSTYPE_PARAMETER}: the external-provisioner passes the fsType \
                 to the driver under that key"
            ),
        ));
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests;
