//! OpenStack Cinder (`kubernetes.io/cinder` -> `cinder.csi.openstack.org`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, CinderPersistentVolumeSource, PersistentVolume, Volume,
};

use crate::parameters::{Params, ScContext, rename_fstype};
use crate::topology;
use crate::types::{Note, Plugin, Result, TranslateError};
use crate::volume::{csi_source, inline_pv, require_id, set_csi};

/// The driver's zone topology key.
pub(crate) const TOPOLOGY_KEY: &str = "topology.cinder.csi.openstack.org/zone";
const PLUGIN: Plugin = Plugin::Cinder;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut out = Params::default();
    for (key, value) in &params {
        if rename_fstype(key, value, &mut out, ctx.notes) {
            continue;
        }
        // The driver supports the other parameters, `availability` included, under the same
        // names, so the zone stays a parameter rather than becoming allowed topologies.
        out.keep(key, value);
    }
    topology::finish_storage_class(ctx, None, TOPOLOGY_KEY)?;
    Ok(out.finish(ctx.notes))
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(source) = pv.spec.as_mut().and_then(|s| s.cinder.take()) else {
        return Ok(());
    };
    require_id(PLUGIN, "spec.cinder.volumeID", &source.volume_id)?;
    if source.secret_ref.is_some() {
        notes.push(Note::new(
            "spec.cinder.secretRef",
            "dropped: the CSI driver authenticates with its own cloud credentials",
        ));
    }
    let csi = csi_source(
        PLUGIN,
        source.volume_id.clone(),
        source.fs_type.clone(),
        source.read_only,
        BTreeMap::new(),
    );
    notes.push(set_csi(pv, "cinder", csi));
    topology::pv_to_csi(pv, TOPOLOGY_KEY, notes);
    Ok(())
}

pub(crate) fn inline_to_csi(volume: &Volume, notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.cinder.as_ref() else {
        return Err(TranslateError::unsupported("cinder", "missing"));
    };
    require_id(PLUGIN, "cinder.volumeID", &source.volume_id)?;
    if source.secret_ref.is_some() {
        notes.push(Note::new(
            "cinder.secretRef",
            "dropped: the CSI driver authenticates with its own cloud credentials",
        ));
    }
    let csi = csi_source(
        PLUGIN,
        source.volume_id.clone(),
        source.fs_type.clone(),
        source.read_only,
        BTreeMap::new(),
    );
    Ok(inline_pv(PLUGIN, &source.volume_id, csi, "ReadWriteOnce"))
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    require_id(PLUGIN, "spec.csi.volumeHandle", &csi.volume_handle)?;
    let source = CinderPersistentVolumeSource {
        volume_id: csi.volume_handle.clone(),
        fs_type: csi.fs_type.clone().filter(|f| !f.is_empty()),
        read_only: csi.read_only.filter(|r| *r),
        secret_ref: None,
    };
    pv.spec.get_or_insert_with(Default::default).cinder = Some(source);
    topology::pv_to_in_tree(pv, TOPOLOGY_KEY, None, notes)
}
