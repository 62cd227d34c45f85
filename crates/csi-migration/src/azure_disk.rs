//! Azure Disk (`kubernetes.io/azure-disk` -> `disk.csi.azure.com`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AzureDiskVolumeSource, CSIPersistentVolumeSource, PersistentVolume, Volume,
};

use crate::differences::Difference;
use crate::parameters::{Params, ScContext};
use crate::topology;
use crate::types::{Note, Plugin, Result, TranslateError};
use crate::volume::{attribute_spellings, csi_source, inline_pv, require_id, set_csi};

/// The driver's zone topology key.
pub(crate) const TOPOLOGY_KEY: &str = "topology.disk.csi.azure.com/zone";
const KIND: &str = "kind";
const CACHING_MODE: &str = "cachingmode";
const FSTYPE: &str = "fstype";
const MANAGED: &str = "Managed";
const PLUGIN: Plugin = Plugin::AzureDisk;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut out = Params::default();
    let mut generated = None;
    for (key, value) in &params {
        if topology::zone_parameter(key, value, TOPOLOGY_KEY, &mut generated, ctx.notes) {
            continue;
        }
        // The driver reads `fsType`, `kind`, `cachingmode` and the rest itself: kept as is.
        out.keep(key, value);
    }
    topology::finish_storage_class(ctx, generated, TOPOLOGY_KEY)?;
    blank_fault_domains(ctx);
    Ok(out.finish(ctx.notes))
}

/// Zones that are numbers are the fault domains of a region without availability zones; the
/// driver calls that zone "" (as upstream does).
fn blank_fault_domains(ctx: &mut ScContext<'_>) {
    for (at, expr) in topology::label_expressions_mut(&mut ctx.allowed_topologies) {
        if expr.key != TOPOLOGY_KEY {
            continue;
        }
        for (v, value) in expr.values.iter_mut().enumerate() {
            if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
                ctx.notes.push(Note::new(
                    format!("{at}.values[{v}]"),
                    format!(
                        "{value:?} -> \"\": a number is a fault domain of a region without \
                         zones, which the driver reports as the empty zone"
                    ),
                ));
                value.clear();
            }
        }
    }
}

/// Checks a disk URI: a managed disk resource ID
/// (`/subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Compute/disks/<name>`, its
/// words in any case, as the driver reads it) or an unmanaged blob URL
/// (`http(s)://<account>.blob.../vhds/<name>.vhd`); returns the disk name.
pub(crate) fn disk_name(field: &str, uri: &str) -> Result<String> {
    let unmanaged = uri.len() > 4 && uri[..4].eq_ignore_ascii_case("http");
    let name = if unmanaged {
        uri.find("://")
            .and_then(|i| uri[i + 3..].rfind("/vhds/").map(|j| &uri[i + 3 + j + 6..]))
    } else {
        managed_disk_name(uri)
    };
    match name {
        Some(name) if !name.is_empty() => Ok(name.to_string()),
        _ => Err(TranslateError::malformed(
            PLUGIN,
            field,
            uri,
            "expected /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Compute/\
             disks/<name> or an https://.../vhds/<name> blob URL",
        )),
    }
}

/// Whether upstream's case-sensitive pattern reads the disk name of a managed disk URI.
fn upstream_reads(uri: &str) -> bool {
    let unmanaged = uri.len() > 4 && uri[..4].eq_ignore_ascii_case("http");
    unmanaged
        || [
            "/subscriptions/",
            "/resourceGroups/",
            "/providers/Microsoft.Compute/disks/",
        ]
        .iter()
        .all(|part| uri.contains(part))
}

/// The name in `.../subscriptions/../resourceGroups/../providers/Microsoft.Compute/disks/<name>`,
/// matched in any case.
fn managed_disk_name(uri: &str) -> Option<&str> {
    let lower = uri.to_ascii_lowercase();
    let subscriptions = lower.find("/subscriptions/")?;
    let groups = subscriptions + lower[subscriptions..].find("/resourcegroups/")?;
    const DISKS: &str = "/providers/microsoft.compute/disks/";
    let disks = groups + lower[groups..].rfind(DISKS)?;
    // ASCII lower-casing keeps byte offsets.
    Some(&uri[disks + DISKS.len()..])
}

/// Refuses a kind other than Managed (any case), as upstream does: the driver serves managed
/// disks only.
fn check_kind(field: &str, source: &AzureDiskVolumeSource) -> Result<()> {
    match source.kind.as_deref() {
        Some(kind) if !kind.eq_ignore_ascii_case(MANAGED) => Err(TranslateError::unsupported(
            format!("{field}.kind"),
            format!(
                "kind {kind:?} is not supported by CSI migration: the Azure Disk CSI driver \
                 serves managed disks only; move the data to a managed disk"
            ),
        )),
        _ => Ok(()),
    }
}

/// `caching_mode_if_empty`: upstream's PersistentVolume translation keeps an empty caching
/// mode, its inline one does not.
fn csi(
    field: &str,
    source: &AzureDiskVolumeSource,
    caching_mode_if_empty: bool,
) -> Result<CSIPersistentVolumeSource> {
    check_kind(field, source)?;
    require_id(PLUGIN, &format!("{field}.diskURI"), &source.disk_uri)?;
    // Upstream passes any URI to the driver; the driver would refuse this one.
    disk_name(&format!("{field}.diskURI"), &source.disk_uri)
        .map_err(|e| e.differs(Difference::AzureDiskUri))?;
    let mut attributes = BTreeMap::from([(KIND.to_string(), MANAGED.to_string())]);
    if let Some(mode) = source
        .caching_mode
        .as_ref()
        .filter(|m| caching_mode_if_empty || !m.is_empty())
    {
        attributes.insert(CACHING_MODE.to_string(), mode.clone());
    }
    if let Some(fs_type) = source.fs_type.as_ref() {
        attributes.insert(FSTYPE.to_string(), fs_type.clone());
    }
    Ok(csi_source(
        PLUGIN,
        source.disk_uri.clone(),
        source.fs_type.clone(),
        source.read_only,
        attributes,
    ))
}

/// `prefix` is the in-tree source's field.
fn attribute_notes(prefix: &str, source: &AzureDiskVolumeSource, notes: &mut Vec<Note>) {
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
    let kind = source.kind.as_deref().unwrap_or_default();
    if kind != MANAGED {
        notes.push(Note::new(
            format!("{prefix}.kind"),
            format!("{kind:?}: volumeAttributes.{KIND} is {MANAGED}"),
        ));
    }
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(source) = pv.spec.as_ref().and_then(|s| s.azure_disk.clone()) else {
        return Ok(());
    };
    let csi = csi("spec.azureDisk", &source, true)?;
    attribute_notes("spec.azureDisk", &source, notes);
    if let Some(spec) = pv.spec.as_mut() {
        spec.azure_disk = None;
    }
    notes.push(set_csi(pv, "azureDisk", csi));
    Ok(())
}

pub(crate) fn inline_to_csi(volume: &Volume, notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.azure_disk.as_ref() else {
        return Err(TranslateError::unsupported("azureDisk", "missing"));
    };
    let csi = csi("azureDisk", source, false)?;
    attribute_notes("azureDisk", source, notes);
    let mut pv = inline_pv(PLUGIN, "", csi, "ReadWriteOnce");
    // As upstream: named by the disk URI, unique per disk (the staging path derives from it).
    pv.metadata.name = Some(source.disk_uri.clone());
    Ok(pv)
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    let name = disk_name("spec.csi.volumeHandle", &csi.volume_handle)?;
    if !upstream_reads(&csi.volume_handle) {
        notes.push(Note::differs(
            "spec.csi.volumeHandle",
            "a managed disk path in other case than /subscriptions/../resourceGroups/../\
             providers/Microsoft.Compute/disks/..: read as the driver reads it \
             (csi-translation-lib refuses it)",
            Difference::AzureDiskUri,
        ));
    }
    let mut source = AzureDiskVolumeSource {
        disk_name: name,
        disk_uri: csi.volume_handle.clone(),
        // As upstream: fsType and readOnly always set, empty and false included.
        fs_type: Some(csi.fs_type.clone().unwrap_or_default()),
        read_only: Some(csi.read_only.unwrap_or(false)),
        kind: Some(MANAGED.to_string()),
        caching_mode: None,
    };
    attribute_spellings(
        csi.volume_attributes.as_ref(),
        &[CACHING_MODE, FSTYPE],
        true,
        notes,
    );
    for (key, value) in csi.volume_attributes.iter().flatten() {
        match key.to_ascii_lowercase().as_str() {
            CACHING_MODE if !value.is_empty() => source.caching_mode = Some(value.clone()),
            FSTYPE if !value.is_empty() => source.fs_type = Some(value.clone()),
            CACHING_MODE | FSTYPE | KIND => {}
            _ => notes.push(Note::new(
                format!("spec.csi.volumeAttributes.{key}"),
                "dropped: the in-tree source has no such field",
            )),
        }
    }
    pv.spec.get_or_insert_with(Default::default).azure_disk = Some(source);
    Ok(())
}
