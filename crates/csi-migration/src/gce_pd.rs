//! GCE PD (`kubernetes.io/gce-pd` -> `pd.csi.storage.gke.io`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource, PersistentVolume, Volume,
};

use crate::differences::Difference;
use crate::parameters::{Params, ScContext, rename_fstype};
use crate::topology;
use crate::types::{Note, Plugin, Result, TranslateError};
use crate::volume::{csi_source, inline_pv, parse_partition, require_id, set_csi};

/// The driver's zone topology key.
pub(crate) const TOPOLOGY_KEY: &str = "topology.gke.io/zone";
/// Placeholder for the project (and, for inline volumes, the zone) the translation cannot know;
/// the driver fills it in from the node.
pub(crate) const UNSPECIFIED: &str = "UNSPECIFIED";
const PARTITION: &str = "partition";
const PLUGIN: Plugin = Plugin::GcePd;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut out = Params::default();
    let mut generated = None;
    for (key, value) in &params {
        if rename_fstype(key, value, &mut out, ctx.notes)
            || topology::zone_parameter(key, value, TOPOLOGY_KEY, &mut generated, ctx.notes)
        {
            continue;
        }
        out.keep(key, value);
    }
    topology::finish_storage_class(ctx, generated, TOPOLOGY_KEY)?;
    Ok(out.finish(ctx.notes))
}

fn attributes(partition: Option<i32>) -> BTreeMap<String, String> {
    // Upstream always sets the attribute, empty for "whole disk".
    let value = partition
        .filter(|p| *p != 0)
        .map(|p| p.to_string())
        .unwrap_or_default();
    BTreeMap::from([(PARTITION.to_string(), value)])
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(source) = pv.spec.as_ref().and_then(|s| s.gce_persistent_disk.clone()) else {
        return Ok(());
    };
    require_id(PLUGIN, "spec.gcePersistentDisk.pdName", &source.pd_name)?;
    let labels = pv.metadata.labels.clone().unwrap_or_default();
    // As upstream: the beta label first, then the GA one; the value split at `__` as is.
    let (label, zones_value) = [topology::ZONE_BETA, topology::ZONE_GA]
        .into_iter()
        .find_map(|l| {
            labels
                .get(l)
                .filter(|v| !v.is_empty())
                .map(|v| (l, v.clone()))
        })
        .unwrap_or((topology::ZONE_GA, String::new()));
    let zones: Vec<String> = zones_value
        .split(topology::MULTI_ZONE_DELIMITER)
        .map(str::to_string)
        .collect();
    let handle = match zones.as_slice() {
        [zone] if zone.is_empty() => {
            notes.push(Note::new(
                "metadata.labels",
                format!(
                    "no zone label: the volume handle's zone is {UNSPECIFIED}, the driver \
                     resolves it from the node"
                ),
            ));
            format!(
                "projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{}",
                source.pd_name
            )
        }
        [zone] => format!(
            "projects/{UNSPECIFIED}/zones/{zone}/disks/{}",
            source.pd_name
        ),
        several => {
            let region = region_from_zones(several).map_err(|reason| {
                TranslateError::invalid(format!("metadata.labels[{label}]"), &zones_value, reason)
            })?;
            notes.push(Note::new(
                format!("metadata.labels[{label}]"),
                format!("several zones: a regional disk in {region}"),
            ));
            format!(
                "projects/{UNSPECIFIED}/regions/{region}/disks/{}",
                source.pd_name
            )
        }
    };
    let csi = csi_source(
        PLUGIN,
        handle,
        source.fs_type.clone(),
        source.read_only,
        attributes(source.partition),
    );
    if let Some(spec) = pv.spec.as_mut() {
        spec.gce_persistent_disk = None;
    }
    notes.push(set_csi(pv, "gcePersistentDisk", csi));
    topology::pv_to_csi(pv, TOPOLOGY_KEY, notes);
    if let Some(spec) = pv.spec.as_mut()
        && let Some(modes) = spec.access_modes.as_mut()
    {
        let new = compatible_access_modes(modes);
        if *modes != new {
            notes.push(Note::new(
                "spec.accessModes",
                format!(
                    "{modes:?} -> {new:?}: the in-tree plugin attached every disk read-write to one \
                     node whatever the modes said; the CSI driver enforces them"
                ),
            ));
            *modes = new;
        }
    }
    Ok(())
}

/// ReadWriteMany counts as ReadWriteOnce, and ReadWriteOnce with ReadOnlyMany as ReadWriteOnce.
pub(crate) fn compatible_access_modes(modes: &[String]) -> Vec<String> {
    let rwo = modes
        .iter()
        .any(|m| m == "ReadWriteOnce" || m == "ReadWriteMany");
    let rox = modes.iter().any(|m| m == "ReadOnlyMany");
    if rox && !rwo {
        vec!["ReadOnlyMany".to_string()]
    } else {
        vec!["ReadWriteOnce".to_string()]
    }
}

pub(crate) fn inline_to_csi(volume: &Volume, notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.gce_persistent_disk.as_ref() else {
        return Err(TranslateError::unsupported("gcePersistentDisk", "missing"));
    };
    require_id(PLUGIN, "gcePersistentDisk.pdName", &source.pd_name)?;
    let handle = format!(
        "projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{}",
        source.pd_name
    );
    notes.push(Note::new(
        "gcePersistentDisk",
        format!(
            "served as CSI volume {handle:?}: an inline volume has no zone, the driver resolves \
             project and zone from the node"
        ),
    ));
    let read_only = source.read_only.unwrap_or(false);
    let csi = csi_source(
        PLUGIN,
        handle,
        source.fs_type.clone(),
        source.read_only,
        attributes(source.partition),
    );
    let mode = if read_only {
        "ReadOnlyMany"
    } else {
        "ReadWriteOnce"
    };
    Ok(inline_pv(PLUGIN, &source.pd_name, csi, mode))
}

/// The disk name of a `projects/<p>/zones/<z>/disks/<name>` or
/// `projects/<p>/regions/<r>/disks/<name>` handle.
pub(crate) fn pd_name(field: &str, handle: &str) -> Result<String> {
    let parts: Vec<&str> = handle.split('/').collect();
    let shape = "expected projects/<project>/zones/<zone>/disks/<name> or \
                 projects/<project>/regions/<region>/disks/<name>";
    if parts.len() < 6 {
        return Err(TranslateError::malformed(PLUGIN, field, handle, shape));
    }
    let ok = parts.len() == 6
        && parts[0] == "projects"
        && (parts[2] == "zones" || parts[2] == "regions")
        && parts[4] == "disks"
        && parts.iter().all(|p| !p.is_empty());
    if !ok {
        return Err(TranslateError::malformed(PLUGIN, field, handle, shape)
            .differs(Difference::GcePdHandle));
    }
    Ok(parts[5].to_string())
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    let name = pd_name("spec.csi.volumeHandle", &csi.volume_handle)?;
    let partition = match csi
        .volume_attributes
        .as_ref()
        .and_then(|a| a.get(PARTITION))
    {
        Some(value) => parse_partition(value, false)?,
        None => None,
    };
    let source = GCEPersistentDiskVolumeSource {
        pd_name: name,
        fs_type: csi.fs_type.clone().filter(|f| !f.is_empty()),
        read_only: csi.read_only.filter(|r| *r),
        partition,
    };
    notes.push(Note::new(
        "spec.csi.volumeHandle",
        "only the disk name is kept: the in-tree plugin finds the disk in the cluster's project",
    ));
    pv.spec
        .get_or_insert_with(Default::default)
        .gce_persistent_disk = Some(source);
    topology::pv_to_in_tree(pv, TOPOLOGY_KEY, Some(region_from_zones), notes)
}

/// `us-central1-a` -> `us-central1`; all zones must share one region.
pub(crate) fn region_from_zones(zones: &[String]) -> std::result::Result<String, String> {
    let mut regions = std::collections::BTreeSet::new();
    for zone in zones {
        let parts: Vec<&str> = zone.split('-').collect();
        if parts.len() != 3 {
            return Err(format!(
                "zone {zone:?} is not of the form <locale>-<region>-<zone>"
            ));
        }
        regions.insert(parts[..2].join("-"));
    }
    match regions.len() {
        1 => Ok(regions.into_iter().next().unwrap_or_default()),
        0 => Err("no zones".to_string()),
        _ => Err(format!("zones span several regions: {regions:?}")),
    }
}
