//! Portworx (`kubernetes.io/portworx-volume` -> `pxd.portworx.com`): the volume ID is the
//! handle and the driver takes the in-tree parameters unchanged, except the OpenStorage auth
//! Secret, which becomes the CSI secret parameters (classes) and secret references (volumes).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PortworxVolumeSource, SecretReference, Volume,
};

use crate::parameters::{Params, Rank, ScContext};
use crate::types::{Note, Plugin, Result, TranslateError};
use crate::volume::{csi_source, inline_pv, require_id, set_csi};

const PLUGIN: Plugin = Plugin::Portworx;

/// The StorageClass parameters (and PV annotations) naming the OpenStorage auth Secret.
pub(crate) const AUTH_SECRET_NAME: &str = "openstorage.io/auth-secret-name";
/// See [`AUTH_SECRET_NAME`].
pub(crate) const AUTH_SECRET_NAMESPACE: &str = "openstorage.io/auth-secret-namespace";
/// The CSI operations whose secret parameters the auth Secret fills.
const SECRET_OPERATIONS: [&str; 6] = [
    "provisioner",
    "controller-publish",
    "node-publish",
    "node-stage",
    "controller-expand",
    "node-expand",
];

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut out = Params::default();
    for (key, value) in &params {
        let suffix = match key.to_ascii_lowercase().as_str() {
            AUTH_SECRET_NAME => "secret-name",
            AUTH_SECRET_NAMESPACE => "secret-namespace",
            _ => {
                out.keep(key, value);
                continue;
            }
        };
        for operation in SECRET_OPERATIONS {
            out.set(
                &format!("csi.storage.k8s.io/{operation}-{suffix}"),
                value,
                key,
                Rank::Renamed,
            );
        }
        ctx.notes.push(Note::new(
            format!("parameters.{key}"),
            format!(
                "expanded to csi.storage.k8s.io/<operation>-{suffix} for every CSI operation \
                 ({}): the external sidecars pass the Secret to the driver",
                SECRET_OPERATIONS.join(", ")
            ),
        ));
    }
    Ok(out.finish(ctx.notes))
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
    // As upstream: both annotations, or no secret references.
    let annotations = pv.metadata.annotations.clone().unwrap_or_default();
    if let (Some(name), Some(namespace)) = (
        annotations.get(AUTH_SECRET_NAME),
        annotations.get(AUTH_SECRET_NAMESPACE),
    ) {
        let secret = Some(SecretReference {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
        });
        csi.controller_publish_secret_ref = secret.clone();
        csi.node_stage_secret_ref = secret.clone();
        csi.node_publish_secret_ref = secret.clone();
        csi.controller_expand_secret_ref = secret.clone();
        csi.node_expand_secret_ref = secret;
        notes.push(Note::new(
            format!("metadata.annotations[{AUTH_SECRET_NAME}]"),
            format!(
                "with {AUTH_SECRET_NAMESPACE}: the Secret {namespace}/{name} becomes the \
                 controller-publish, node-stage, node-publish, controller-expand and node-expand \
                 secret reference"
            ),
        ));
    }
    notes.push(set_csi(pv, "portworxVolume", csi));
    Ok(())
}

pub(crate) fn inline_to_csi(volume: &Volume, notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.portworx_volume.as_ref() else {
        return Err(TranslateError::unsupported("portworxVolume", "missing"));
    };
    let mut csi = csi("portworxVolume.volumeID", source)?;
    let mode = if source.read_only == Some(true) {
        // As upstream: readOnly shows in the access mode, not in the CSI source.
        csi.read_only = None;
        notes.push(Note::new(
            "portworxVolume.readOnly",
            "becomes the access mode ReadOnlyMany; the CSI source itself is not read-only",
        ));
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
        fs_type: csi.fs_type.clone().filter(|f| !f.is_empty()),
        read_only: csi.read_only.filter(|r| *r),
    });
    Ok(())
}
