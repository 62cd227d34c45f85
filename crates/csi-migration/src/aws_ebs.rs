//! AWS EBS (`kubernetes.io/aws-ebs` -> `ebs.csi.aws.com`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, PersistentVolume, Volume,
};

use crate::parameters::{Params, Rank, ScContext, rename_fstype};
use crate::topology;
use crate::types::{Note, Plugin, Result, TranslateError};
use crate::volume::{csi_source, inline_pv, parse_partition, require_id, set_csi};

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
    let mut out = Params::default();
    let mut generated = None;
    for (key, value) in &params {
        if rename_fstype(key, value, &mut out, ctx.notes)
            || topology::zone_parameter(key, value, TOPOLOGY_KEY, &mut generated, ctx.notes)
        {
            continue;
        }
        out.keep(key, value);
        if key.eq_ignore_ascii_case(IOPS_PER_GB) {
            out.set(ALLOW_AUTO_IOPS, "true", key, Rank::Derived);
            ctx.notes.push(Note::new(
                format!("parameters.{ALLOW_AUTO_IOPS}"),
                "added \"true\": the in-tree plugin raised IOPS to the volume type's minimum, \
                 the CSI driver does so only when allowed",
            ));
        }
    }
    topology::finish_storage_class(ctx, generated, TOPOLOGY_KEY)?;
    Ok(out.finish(ctx.notes))
}

/// `aws://<zone>/vol-...` or a bare ID -> the EBS volume ID, as upstream reads it: the URL is
/// parsed (Go's `net/url` rules: the query and fragment go, `%`-escapes are decoded, a bad
/// escape, port or host character is an error) and its path, without surrounding slashes, must
/// be `vol-` and no further `/`. A bare ID passes unchanged.
pub(crate) fn ebs_volume_id(field: &str, id: &str) -> Result<String> {
    require_id(PLUGIN, field, id)?;
    let Some(rest) = id.strip_prefix("aws://") else {
        return Ok(id.to_string());
    };
    let malformed = |reason: &str| {
        TranslateError::malformed(
            PLUGIN,
            field,
            id,
            format!("{reason}; expected aws://<zone>/vol-<id> or vol-<id>"),
        )
    };
    let path = url_path(rest).map_err(|reason| malformed(&reason))?;
    let volume = path.trim_matches('/');
    if !volume.starts_with("vol-") || volume.contains('/') {
        return Err(malformed("the path is not a vol- ID"));
    }
    Ok(volume.to_string())
}

/// The decoded path of a URL whose `scheme://` is already removed, or why Go's `url.Parse`
/// refuses it.
fn url_path(rest: &str) -> std::result::Result<String, String> {
    if rest.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("a control character in the URL".to_string());
    }
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    unescape(fragment).map_err(|e| format!("bad fragment: {e}"))?;
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    check_host(host)?;
    unescape(path).map_err(|e| format!("bad path: {e}"))
}

/// Go's host rules for a non-IP-literal host: `%`-escapes valid, allowed characters only, and a
/// port, if any, of digits.
fn check_host(host: &str) -> std::result::Result<(), String> {
    let (name, port) = if host.starts_with('[') {
        match host.find(']') {
            Some(end) => (&host[..=end], &host[end + 1..]),
            None => return Err("missing ']' in host".to_string()),
        }
    } else {
        match host.rfind(':') {
            Some(i) => (&host[..i], &host[i..]),
            None => (host, ""),
        }
    };
    let port_ok = port.strip_prefix(':').map_or(port.is_empty(), |digits| {
        digits.bytes().all(|b| b.is_ascii_digit())
    });
    if !port_ok {
        return Err(format!("invalid port {port:?} after host"));
    }
    let allowed =
        |b: u8| b.is_ascii_alphanumeric() || b >= 0x80 || b"-_.~!$&'()*+,;=:[]<>\"%".contains(&b);
    if let Some(bad) = name.bytes().find(|b| !allowed(*b)) {
        return Err(format!("invalid character {:?} in host name", bad as char));
    }
    unescape(name)
        .map(|_| ())
        .map_err(|e| format!("bad host: {e}"))
}

/// Decodes `%XX` escapes; a `%` not followed by two hex digits is an error, as Go's
/// `url.Parse` makes it (the `percent-encoding` crate decodes leniently and cannot say so).
fn unescape(s: &str) -> std::result::Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .filter(|_| bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit());
            match hex {
                Some(b) => out.push(b),
                None => {
                    let end = (i + 3).min(bytes.len());
                    return Err(format!(
                        "invalid URL escape {:?}",
                        String::from_utf8_lossy(&bytes[i..end])
                    ));
                }
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
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
    topology::pv_to_csi(pv, TOPOLOGY_KEY, notes);
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
    // As upstream: a present partition attribute must be a number, even when empty.
    let partition = match csi
        .volume_attributes
        .as_ref()
        .and_then(|a| a.get(PARTITION))
    {
        Some(value) => parse_partition(value, true)?,
        None => None,
    };
    let source = AWSElasticBlockStoreVolumeSource {
        volume_id: csi.volume_handle.clone(),
        fs_type: csi.fs_type.clone().filter(|f| !f.is_empty()),
        read_only: csi.read_only.filter(|r| *r),
        partition,
    };
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
