//! In-tree to CSI migration: the in-memory translation Kubernetes applies to the objects of a
//! migrated in-tree volume plugin (k8s.io/csi-translation-lib's behaviour), as pure functions.
//!
//! The files, bottom to top; each uses only files below it: `differences.rs` (the deliberate
//! [`Difference`]s), `types.rs` ([`Plugin`], [`Note`], [`Translation`], [`TranslateError`]),
//! `parameters.rs` (StorageClass parameter rules) and `volume.rs` (PersistentVolume pieces),
//! `topology.rs` (zones and regions), the plugin files (`aws_ebs.rs`, `gce_pd.rs`,
//! `azure_disk.rs`, `azure_file.rs`, `cinder.rs`, `vsphere.rs`, `portworx.rs`), and this file,
//! which dispatches each translation to its plugin.
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
mod parameters;
mod portworx;
mod topology;
mod types;
mod volume;
mod vsphere;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod, Volume};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::parameters::ScContext;

pub use differences::Difference;
pub use parameters::CSI_FSTYPE_PARAMETER;
pub use types::{Note, Plugin, Result, TranslateError, Translation};

/// CSINode annotation listing (comma-separated) the in-tree plugins the node's kubelet migrated.
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";
/// Annotation the PV controller sets on PVs and PVCs of a migrated plugin: the CSI driver name.
pub const MIGRATED_TO_ANNOTATION: &str = "pv.kubernetes.io/migrated-to";
/// The StorageClass annotation marking the default class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

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

/// Per-plugin facts the plugin modules hold, kept here, above them, so that [`Plugin`] itself
/// sits below every plugin module.
impl Plugin {
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
}

#[cfg(test)]
mod tests;
