//! Portworx (`kubernetes.io/portworx-volume` -> `pxd.portworx.com`): the volume ID is the
//! handle and the driver takes the in-tree parameters unchanged.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PortworxVolumeSource, Volume,
};

use super::{
    Note, Plugin, Result, ScContext, TranslateError, csi_source, inline_pv, require_id, set_csi,
};

const PLUGIN: Plugin = Plugin::Portworx;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    _ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    Ok(params)
}

fn csi(field: &str, source: &PortworxVolumeSource) -> Result<CSIPersistentVolumeSource> {
    require_id(PLUGIN, field, &source.volume_id)?;
    Ok(csi_source(
        PLUGIN,
        source.volume_id.clone(),
        source.fs_type.clone(),
        source.read_only,
        BTreeMap::new(),
    ))
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(source) = pv.spec.as_mut().and_then(|s| s.portworx_volume.take()) else {
        return Ok(());
    };
    let mut csi = csi("spec.portworxVolume.volumeID", &source)?;
    if csi.read_only.take().is_some() {
        // Upstream's PersistentVolume translation does not carry readOnly; say so, as it
        // changes how the volume is mounted.
        notes.push(Note::new(
            "spec.portworxVolume.readOnly",
            "dropped by the translation: the CSI volume is published read-write unless the \
             pod's volumeMount is readOnly",
        ));
    }
    notes.push(set_csi(pv, "portworxVolume", csi));
    Ok(())
}

pub(crate) fn inline_to_csi(volume: &Volume, _notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.portworx_volume.as_ref() else {
        return Err(TranslateError::unsupported("portworxVolume", "missing"));
    };
    let csi = csi("portworxVolume.volumeID", source)?;
    let mode = if source.read_only == Some(true) {
        "ReadOnlyMany"
    } else {
        "ReadWriteOnce"
    };
    Ok(inline_pv(PLUGIN, &source.volume_id, csi, mode))
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    require_id(PLUGIN, "spec.csi.volumeHandle", &csi.volume_handle)?;
    for key in csi.volume_attributes.iter().flatten().map(|(k, _)| k) {
        notes.push(Note::new(
            format!("spec.csi.volumeAttributes.{key}"),
            "dropped: the in-tree source has no such field",
        ));
    }
    pv.spec.get_or_insert_with(Default::default).portworx_volume = Some(PortworxVolumeSource {
        volume_id: csi.volume_handle.clone(),
        fs_type: csi.fs_type.clone(),
        read_only: csi.read_only,
    });
    Ok(())
}
