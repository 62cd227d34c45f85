//! AWS EBS (`kubernetes.io/aws-ebs` -> `ebs.csi.aws.com`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, PersistentVolume, Volume,
};

use super::{
    Note, Plugin, Result, ScContext, TranslateError, csi_source, inline_pv, rename_fstype,
    require_id, set_csi, topology,
};

/// The driver's zone topology key.
pub(crate) const TOPOLOGY_KEY: &str = "topology.ebs.csi.aws.com/zone";
const PARTITION: &str = "partition";
const IOPS_PER_GB: &str = "iopsPerGB";
const ALLOW_AUTO_IOPS: &str = "allowautoiopspergbincrease";
const PLUGIN: Plugin = Plugin::AwsEbs;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut generated = None;
    for (key, value) in &params {
        if rename_fstype(key, value, &mut out, ctx.notes)
            || topology::zone_parameter(key, value, TOPOLOGY_KEY, &mut generated, ctx.notes)
        {
            continue;
        }
        if key.eq_ignore_ascii_case(IOPS_PER_GB) {
            out.insert(IOPS_PER_GB.to_string(), value.clone());
            out.insert(ALLOW_AUTO_IOPS.to_string(), "true".to_string());
            ctx.notes.push(Note::new(
                format!("parameters.{ALLOW_AUTO_IOPS}"),
                "added \"true\": the in-tree plugin raised IOPS to the volume type's minimum, \
                 the CSI driver does so only when allowed",
            ));
        } else {
            out.insert(key.clone(), value.clone());
        }
    }
    topology::finish_storage_class(ctx, generated, TOPOLOGY_KEY, None)?;
    Ok(out)
}

/// `aws://<zone>/vol-...` or a bare `vol-...` -> the EBS volume ID.
pub(crate) fn ebs_volume_id(field: &str, id: &str) -> Result<String> {
    require_id(PLUGIN, field, id)?;
    let Some(rest) = id.strip_prefix("aws://") else {
        // A bare ID is passed through, as upstream does.
        return Ok(id.to_string());
    };
    let path = rest.split_once('/').map(|(_, p)| p).unwrap_or_default();
    let volume = path.trim_matches('/');
    if !volume.starts_with("vol-") || volume.contains('/') {
        return Err(TranslateError::malformed(
            PLUGIN,
            field,
            id,
            "expected aws://<zone>/vol-<id> or vol-<id>",
        ));
    }
    Ok(volume.to_string())
}

fn csi(
    field: &str,
    source: &AWSElasticBlockStoreVolumeSource,
) -> Result<CSIPersistentVolumeSource> {
    let handle = ebs_volume_id(field, &source.volume_id)?;
    // Upstream always sets the attribute, "0" for the whole disk.
    let attributes = BTreeMap::from([(
        PARTITION.to_string(),
        source.partition.unwrap_or(0).to_string(),
    )]);
    Ok(csi_source(
        PLUGIN,
        handle,
        source.fs_type.clone(),
        source.read_only,
        attributes,
    ))
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(source) = pv
        .spec
        .as_mut()
        .and_then(|s| s.aws_elastic_block_store.take())
    else {
        return Ok(());
    };
    let csi = csi("spec.awsElasticBlockStore.volumeID", &source)?;
    if csi.volume_handle != source.volume_id {
        notes.push(Note::new(
            "spec.awsElasticBlockStore.volumeID",
            format!(
                "{:?} -> volumeHandle {:?}: the driver takes the bare EBS volume ID",
                source.volume_id, csi.volume_handle
            ),
        ));
    }
    notes.push(set_csi(pv, "awsElasticBlockStore", csi));
    topology::pv_to_csi(pv, TOPOLOGY_KEY, None, notes);
    Ok(())
}

pub(crate) fn inline_to_csi(volume: &Volume, notes: &mut Vec<Note>) -> Result<PersistentVolume> {
    let Some(source) = volume.aws_elastic_block_store.as_ref() else {
        return Err(TranslateError::unsupported(
            "awsElasticBlockStore",
            "missing",
        ));
    };
    let csi = csi("awsElasticBlockStore.volumeID", source)?;
    notes.push(Note::new(
        "awsElasticBlockStore",
        format!(
            "served as CSI volume {:?} of {}",
            csi.volume_handle, csi.driver
        ),
    ));
    let unique = csi.volume_handle.clone();
    Ok(inline_pv(PLUGIN, &unique, csi, "ReadWriteOnce"))
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    require_id(PLUGIN, "spec.csi.volumeHandle", &csi.volume_handle)?;
    let mut source = AWSElasticBlockStoreVolumeSource {
        volume_id: csi.volume_handle.clone(),
        fs_type: csi.fs_type.clone(),
        read_only: csi.read_only,
        partition: None,
    };
    if let Some(partition) = csi
        .volume_attributes
        .as_ref()
        .and_then(|a| a.get(PARTITION))
        .filter(|p| !p.is_empty())
    {
        let value = partition.parse::<i32>().map_err(|_| {
            TranslateError::invalid(
                format!("spec.csi.volumeAttributes.{PARTITION}"),
                partition,
                "not an integer",
            )
        })?;
        source.partition = Some(value);
    }
    pv.spec
        .get_or_insert_with(Default::default)
        .aws_elastic_block_store = Some(source);
    topology::pv_to_in_tree(pv, TOPOLOGY_KEY, Some(region_from_zones), notes)
}

/// `us-east-1a` -> `us-east-1`; local zones (`us-west-2-lax-1a`) and wavelength zones
/// (`us-east-1-wl1-bos-wlz-1`) -> their first three parts. All zones must share one region.
pub(crate) fn region_from_zones(zones: &[String]) -> std::result::Result<String, String> {
    let mut regions = std::collections::BTreeSet::new();
    for zone in zones {
        let parts: Vec<&str> = zone.split('-').collect();
        let region = match parts.len() {
            3 | 4 if parts.last().is_some_and(|l| l.len() == 2) => {
                let last = parts[parts.len() - 1];
                let digit: String = last.chars().take(1).collect();
                let mut region: Vec<&str> = parts[..parts.len() - 1].to_vec();
                region.push(&digit);
                region.join("-")
            }
            // Local zones (5 parts) and wavelength zones (7 parts).
            5 | 7 => parts[..3].join("-"),
            _ => return Err(format!("{zone:?} is not an AWS availability zone")),
        };
        regions.insert(region);
    }
    match regions.len() {
        1 => Ok(regions.into_iter().next().unwrap_or_default()),
        0 => Err("no zones".to_string()),
        _ => Err(format!("zones span several regions: {regions:?}")),
    }
}
