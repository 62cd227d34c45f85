//! vSphere (`kubernetes.io/vsphere-volume` -> `csi.vsphere.vmware.com`). StorageClass parameters
//! the driver understands only for migrated classes get a `-migrationparam` suffix, others are
//! dropped, and `csimigration=true` makes the driver return the in-tree path
//! (`initialvolumefilepath`) so provisioned volumes can be written back in in-tree form.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, Volume, VsphereVirtualDiskVolumeSource,
};

use crate::differences::Difference;
use crate::parameters::{Params, Rank, ScContext, rename_fstype};
use crate::topology;
use crate::types::{Note, Plugin, Result, TranslateError};
use crate::volume::{csi_source, inline_pv, require_id, set_csi};

/// The driver's zone topology key.
pub(crate) const ZONE_KEY: &str = "topology.csi.vmware.com/zone";
/// The driver's region topology key.
pub(crate) const REGION_KEY: &str = "topology.csi.vmware.com/region";
const STORAGE_POLICY_NAME: &str = "storagepolicyname";
const CSI_MIGRATION: &str = "csimigration";
/// The in-tree volume path the driver reports for volumes it provisioned for a migrated class.
pub(crate) const INITIAL_VOLUME_FILE_PATH: &str = "initialvolumefilepath";
/// Parameters passed to the driver with the `-migrationparam` suffix.
const MIGRATION_PARAMS: [&str; 8] = [
    "datastore",
    "diskformat",
    "hostfailurestotolerate",
    "forceprovisioning",
    "cachereservation",
    "diskstripes",
    "objectspacereservation",
    "iopslimit",
];
const PLUGIN: Plugin = Plugin::VSphere;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut out = Params::default();
    for (key, value) in &params {
        if rename_fstype(key, value, &mut out, ctx.notes) {
            continue;
        }
        let lower = key.to_ascii_lowercase();
        if lower == STORAGE_POLICY_NAME {
            if key != STORAGE_POLICY_NAME {
                ctx.notes.push(Note::new(
                    format!("parameters.{key}"),
                    format!("renamed to {STORAGE_POLICY_NAME}: the driver's spelling"),
                ));
            }
            out.set(STORAGE_POLICY_NAME, value, key, Rank::Renamed);
        } else if MIGRATION_PARAMS.contains(&lower.as_str()) {
            let new = format!("{lower}-migrationparam");
            ctx.notes.push(Note::new(
                format!("parameters.{key}"),
                format!("renamed to {new}: the driver accepts it only from migrated classes"),
            ));
            out.set(&new, value, key, Rank::Renamed);
        } else {
            ctx.notes.push(Note::new(
                format!("parameters.{key}"),
                "dropped: the vSphere CSI driver does not support it",
            ));
        }
    }
    // Upstream sets it after every parameter, whatever the class said.
    out.set(CSI_MIGRATION, "true", CSI_MIGRATION, Rank::Explicit);
    ctx.notes.push(Note::new(
        format!("parameters.{CSI_MIGRATION}"),
        format!(
            "set to \"true\": the driver then reports {INITIAL_VOLUME_FILE_PATH}, which the \
             translation back to in-tree needs"
        ),
    ));
    topology::finish_storage_class(ctx, None, ZONE_KEY)?;
    Ok(out.finish(ctx.notes))
}

fn csi(
    field: &str,
    source: &VsphereVirtualDiskVolumeSource,
    notes: &mut Vec<Note>,
) -> Result<CSIPersistentVolumeSource> {
    require_id(PLUGIN, &format!("{field}.volumePath"), &source.volume_path)?;
    let mut attributes = BTreeMap::new();
    if let Some(name) = source
        .storage_policy_name
        .as_ref()
        .filter(|n| !n.is_empty())
    {
        attributes.insert(STORAGE_POLICY_NAME.to_string(), name.clone());
    }
    if source.storage_policy_id.is_some() {
        notes.push(Note::new(
            format!("{field}.storagePolicyID"),
            "dropped: the driver identifies the policy by name",
        ));
    }
    Ok(csi_source(
        PLUGIN,
        source.volume_path.clone(),
        source.fs_type.clone(),
        None,
        attributes,
    ))
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(source) = pv.spec.as_mut().and_then(|s| s.vsphere_volume.take()) else {
        return Ok(());
    };
    let csi = csi("spec.vsphereVolume", &source, notes)?;
    notes.push(set_csi(pv, "vsphereVolume", csi));
    topology::pv_to_csi_zone_region(pv, ZONE_KEY, REGION_KEY, notes);
    Ok(())
}

pub(crate) fn inline_to_csi(volume: &Volume, notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.vsphere_volume.as_ref() else {
        return Err(TranslateError::unsupported("vsphereVolume", "missing"));
    };
    let csi = csi("vsphereVolume", source, notes)?;
    if source
        .storage_policy_name
        .as_ref()
        .is_some_and(|n| !n.is_empty())
    {
        notes.push(Note::differs(
            "vsphereVolume.storagePolicyName",
            format!(
                "moved to volumeAttributes.{STORAGE_POLICY_NAME} (csi-translation-lib crashes on \
                 it)"
            ),
            Difference::VsphereInlinePolicy,
        ));
    }
    Ok(inline_pv(PLUGIN, &source.volume_path, csi, "ReadWriteOnce"))
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    let attributes = csi.volume_attributes.clone().unwrap_or_default();
    let Some(path) = attributes
        .get(INITIAL_VOLUME_FILE_PATH)
        .filter(|p| !p.is_empty())
    else {
        return Err(TranslateError::unsupported(
            format!("spec.csi.volumeAttributes.{INITIAL_VOLUME_FILE_PATH}"),
            "missing: only volumes the driver provisioned for a migrated class \
             (csimigration=true) carry the in-tree path; this volume has no in-tree form",
        )
        .differs(Difference::VsphereInitialPath));
    };
    notes.push(Note::new(
        "spec.csi.volumeHandle",
        format!("dropped: the in-tree volumePath is {INITIAL_VOLUME_FILE_PATH}"),
    ));
    for key in attributes.keys().filter(|k| *k != INITIAL_VOLUME_FILE_PATH) {
        notes.push(Note::new(
            format!("spec.csi.volumeAttributes.{key}"),
            "dropped: the translation back keeps only the path and fsType",
        ));
    }
    let source = VsphereVirtualDiskVolumeSource {
        volume_path: path.clone(),
        fs_type: csi.fs_type.clone().filter(|f| !f.is_empty()),
        storage_policy_name: None,
        storage_policy_id: None,
    };
    pv.spec.get_or_insert_with(Default::default).vsphere_volume = Some(source);
    topology::pv_to_in_tree_zone_region(pv, ZONE_KEY, REGION_KEY, notes);
    Ok(())
}
