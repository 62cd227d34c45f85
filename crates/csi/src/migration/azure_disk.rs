//! Azure Disk (`kubernetes.io/azure-disk` -> `disk.csi.azure.com`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AzureDiskVolumeSource, CSIPersistentVolumeSource, PersistentVolume, Volume,
};

use super::{
    Note, Plugin, Result, ScContext, TranslateError, csi_source, inline_pv, set_csi, topology,
};

/// The driver's zone topology key.
pub(crate) const TOPOLOGY_KEY: &str = "topology.disk.csi.azure.com/zone";
const KIND: &str = "kind";
const CACHING_MODE: &str = "cachingmode";
const FSTYPE: &str = "fstype";
/// Tells the driver the request or volume comes from the in-tree plugin.
const CSI_MIGRATION: &str = "csimigration";
const PLUGIN: Plugin = Plugin::AzureDisk;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut generated = None;
    for (key, value) in &params {
        if topology::zone_parameter(key, value, TOPOLOGY_KEY, &mut generated, ctx.notes) {
            continue;
        }
        // The driver reads `fsType` itself, so it is kept as is.
        out.insert(key.clone(), value.clone());
    }
    topology::finish_storage_class(ctx, generated, TOPOLOGY_KEY, None)?;
    out.insert(CSI_MIGRATION.to_string(), "true".to_string());
    ctx.notes.push(Note::new(
        format!("parameters.{CSI_MIGRATION}"),
        "added \"true\": tells the driver the class comes from the in-tree plugin",
    ));
    Ok(out)
}

/// Checks a disk URI: a managed disk resource ID
/// (`/subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/disks/<name>`) or an
/// unmanaged blob URL (`https://<account>.blob.../vhds/<name>.vhd`); returns the disk name.
pub(crate) fn disk_name(field: &str, uri: &str) -> Result<String> {
    let malformed = || {
        TranslateError::malformed(
            PLUGIN,
            field,
            uri,
            "expected /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Compute/\
             disks/<name> or an https://.../vhds/<name> blob URL",
        )
    };
    let unmanaged = uri.len() > 4 && uri[..4].eq_ignore_ascii_case("http");
    let name = if unmanaged {
        uri.split_once("/vhds/").map(|(_, n)| n)
    } else {
        let lower = uri.to_ascii_lowercase();
        let has_parts = lower.contains("/subscriptions/") && lower.contains("/resourcegroups/");
        uri.split_once("/providers/Microsoft.Compute/disks/")
            .filter(|_| has_parts)
            .map(|(_, n)| n)
    };
    match name {
        Some(name) if !name.is_empty() => Ok(name.to_string()),
        _ => Err(malformed()),
    }
}

fn csi(field: &str, source: &AzureDiskVolumeSource) -> Result<CSIPersistentVolumeSource> {
    disk_name(field, &source.disk_uri)?;
    let mut attributes = BTreeMap::from([
        (KIND.to_string(), "Managed".to_string()),
        (CSI_MIGRATION.to_string(), "true".to_string()),
    ]);
    if let Some(mode) = source.caching_mode.as_ref().filter(|m| !m.is_empty()) {
        attributes.insert(CACHING_MODE.to_string(), mode.clone());
    }
    if let Some(fs_type) = source.fs_type.as_ref() {
        attributes.insert(FSTYPE.to_string(), fs_type.clone());
    }
    if let Some(kind) = source.kind.as_ref() {
        attributes.insert(KIND.to_string(), kind.clone());
    }
    Ok(csi_source(
        PLUGIN,
        source.disk_uri.clone(),
        source.fs_type.clone(),
        source.read_only,
        attributes,
    ))
}

/// `prefix` is the in-tree source's field, `csi` the output's CSI source field.
fn attribute_notes(prefix: &str, csi: &str, source: &AzureDiskVolumeSource, notes: &mut Vec<Note>) {
    notes.push(Note::new(
        format!("{prefix}.diskURI"),
        "becomes the volumeHandle; diskName is not carried (the URI names the disk)",
    ));
    if source.caching_mode.is_some() {
        notes.push(Note::new(
            format!("{prefix}.cachingMode"),
            format!("moved to volumeAttributes.{CACHING_MODE}"),
        ));
    }
    if source.kind.is_none() {
        notes.push(Note::new(
            format!("{prefix}.kind"),
            format!("unset: volumeAttributes.{KIND} defaults to Managed"),
        ));
    }
    notes.push(Note::new(
        format!("{csi}.volumeAttributes.{CSI_MIGRATION}"),
        "added \"true\": tells the driver the volume comes from the in-tree plugin",
    ));
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(source) = pv.spec.as_mut().and_then(|s| s.azure_disk.take()) else {
        return Ok(());
    };
    let csi = csi("spec.azureDisk.diskURI", &source)?;
    attribute_notes("spec.azureDisk", "spec.csi", &source, notes);
    notes.push(set_csi(pv, "azureDisk", csi));
    Ok(())
}

pub(crate) fn inline_to_csi(volume: &Volume, notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.azure_disk.as_ref() else {
        return Err(TranslateError::unsupported("azureDisk", "missing"));
    };
    let csi = csi("azureDisk.diskURI", source)?;
    attribute_notes("azureDisk", "csi", source, notes);
    Ok(inline_pv(PLUGIN, &source.disk_name, csi, "ReadWriteOnce"))
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    let name = disk_name("spec.csi.volumeHandle", &csi.volume_handle)?;
    let attributes = csi.volume_attributes.clone().unwrap_or_default();
    let non_empty = |key: &str| attributes.get(key).filter(|v| !v.is_empty()).cloned();
    let source = AzureDiskVolumeSource {
        disk_name: name,
        disk_uri: csi.volume_handle.clone(),
        fs_type: non_empty(FSTYPE).or_else(|| csi.fs_type.clone()),
        read_only: Some(csi.read_only.unwrap_or(false)),
        kind: Some(non_empty(KIND).unwrap_or_else(|| "Managed".to_string())),
        caching_mode: attributes.get(CACHING_MODE).cloned(),
    };
    for key in attributes.keys() {
        if ![KIND, CACHING_MODE, FSTYPE].contains(&key.as_str()) {
            notes.push(Note::new(
                format!("spec.csi.volumeAttributes.{key}"),
                "dropped: the in-tree source has no such field",
            ));
        }
    }
    pv.spec.get_or_insert_with(Default::default).azure_disk = Some(source);
    Ok(())
}
