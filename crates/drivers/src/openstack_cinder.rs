//! OpenStack Cinder (`cinder.csi.openstack.org`, seed 003): the table in
//! `openstack_cinder.yaml` plus the driver's `cloud.conf`, generated from the cluster's cloud
//! config (ConfigMap `openshift-config/cloud-provider-config`, key `config`) into the operand
//! ConfigMap `cloud-conf`:
//! - `[Global]` authenticates with the credentials Secret's `clouds.yaml` (written by
//!   cloud-credential-operator), never with passwords from the cloud config;
//! - `[BlockStorage]` options are carried over (less the legacy `trust-device-path`), the
//!   known ones checked, and `[Metadata]`;
//! - a self-signed cloud's CA (key `ca-bundle.pem`, or `ca-cert.pem`, of the cloud config) is
//!   copied as `ca-bundle.pem` and named by `ca-file`;
//! - `enable_topology` says whether availability-zone topology
//!   (`topology.cinder.csi.openstack.org/zone`) is on; both driver containers read it into
//!   `--with-topology` when they start, and its hash rolls them when it changes.
//!
//! The files are where OpenShift's operator puts them (`clouds.yaml` under
//! `/etc/kubernetes/secret`, the CA under
//! `/etc/kubernetes/static-pod-resources/configmaps/cloud-config`), and `cloud.conf` is laid
//! out as it lays it out ([`ini::render_aligned`]), so its pod templates and ours are the same,
//! hash annotations included, and taking over restarts no pod. Topology is on unless the cloud config's ConfigMap says
//! `enable_topology: "false"` (OpenShift's override) or `[BlockStorage] ignore-volume-az = true`
//! (compute and volume zones differ). Where OpenShift's operator, without an override, asks the
//! cloud whether the compute and volume zones match, we go by that option. Unlike OpenShift's,
//! the `[Metadata]` section is carried over too (the driver reads it on the nodes).

use std::collections::BTreeMap;

use csi_kit::derived::ini;
use csi_kit::{DriverDef, Inputs};

use crate::table::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "openstack-cinder";
/// The CSI driver name.
pub const CSI_NAME: &str = "cinder.csi.openstack.org";
/// The operand ConfigMap holding `cloud.conf`.
pub const CONFIG_MAP: &str = "cloud-conf";
/// Its key with the driver's configuration.
pub const CLOUD_CONF_KEY: &str = "cloud.conf";
/// Its key with the cloud's CA bundle, when the cloud has one.
pub const CA_BUNDLE_KEY: &str = "ca-bundle.pem";
/// Its key saying whether topology is on (`true` or `false`); also the key of the cluster's
/// cloud config that overrides it, as on OpenShift.
pub const TOPOLOGY_KEY_NAME: &str = "enable_topology";
/// Keys of the cluster's cloud config that may hold the CA of a self-signed cloud.
pub const SOURCE_CA_KEYS: [&str; 2] = ["ca-bundle.pem", "ca-cert.pem"];
/// Where the pods see the credentials Secret's `clouds.yaml`.
pub const CLOUDS_FILE: &str = "/etc/kubernetes/secret/clouds.yaml";
/// Where the pods see the cloud's CA bundle (OpenShift's path).
pub const CA_FILE: &str =
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem";
/// The cloud's name in the `clouds.yaml` cloud-credential-operator writes.
pub const CLOUD_NAME: &str = "openstack";
/// The topology key the driver reports.
pub const TOPOLOGY_KEY: &str = "topology.cinder.csi.openstack.org/zone";

const TABLE: &str = include_str!("openstack_cinder.yaml");

/// The Cinder driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    for derived in &mut def.config_maps {
        derived.generate = Some(generate_cloud_conf);
    }
    Ok(def)
}

/// `[BlockStorage]` options whose value is a boolean.
const BOOL_OPTIONS: [&str; 3] = [
    "ignore-volume-az",
    "rescan-on-resize",
    "ignore-volume-microversion",
];

/// A gcfg boolean (`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`; an empty value is true).
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Generates the operand ConfigMap's data (`cloud.conf`, and `ca-bundle.pem` for a
/// self-signed cloud) from the cluster's cloud config. An error names the option to fix.
pub fn generate_cloud_conf(
    _inputs: &Inputs,
    text: &str,
    data: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let ordered = ini::parse_ordered(text)?;
    let sections = ini::sections(&ordered);
    let section = |name: &str| sections.get(name).cloned().unwrap_or_default();
    let source_global = section("Global");
    let ca = SOURCE_CA_KEYS
        .iter()
        .find_map(|k| data.get(*k).filter(|v| !v.trim().is_empty()));
    if ca.is_none() && source_global.contains_key("ca-file") {
        return Err(format!(
            "[Global] ca-file is set but the ConfigMap has no CA (key {} or {}): add the cloud's CA bundle under one of them",
            SOURCE_CA_KEYS[0], SOURCE_CA_KEYS[1]
        ));
    }

    let mut global = vec![
        ("use-clouds".to_owned(), "true".to_owned()),
        ("clouds-file".to_owned(), CLOUDS_FILE.to_owned()),
        ("cloud".to_owned(), CLOUD_NAME.to_owned()),
    ];
    if ca.is_some() {
        global.push(("ca-file".to_owned(), CA_FILE.to_owned()));
    }

    let block_storage = section("BlockStorage");
    for option in BOOL_OPTIONS {
        if let Some(value) = block_storage.get(option)
            && parse_bool(value).is_none()
        {
            return Err(format!(
                "[BlockStorage] {option} = {value:?} is not a boolean: use true or false"
            ));
        }
    }
    if let Some(limit) = block_storage.get("node-volume-attach-limit")
        && !limit.parse::<u32>().is_ok_and(|n| (1..=256).contains(&n))
    {
        return Err(format!(
            "[BlockStorage] node-volume-attach-limit = {limit:?} is not a number from 1 to 256"
        ));
    }

    // As OpenShift's operator lays the file out: [BlockStorage] as the source has it (less the
    // legacy trust-device-path), then [Global]; then, ours only, [Metadata].
    let kept = |name: &str| -> Vec<(String, String)> {
        ordered
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, entries)| entries.iter().cloned())
            .filter(|(k, _)| k != "trust-device-path")
            .collect()
    };
    let mut out_sections = Vec::new();
    let block_storage_kept = kept("BlockStorage");
    if !block_storage_kept.is_empty() {
        out_sections.push(("BlockStorage".to_owned(), block_storage_kept));
    }
    out_sections.push(("Global".to_owned(), global));
    let metadata = kept("Metadata");
    if !metadata.is_empty() {
        out_sections.push(("Metadata".to_owned(), metadata));
    }
    let topology = match data.get(TOPOLOGY_KEY_NAME).map(|v| (v, parse_bool(v))) {
        Some((_, Some(on))) => on,
        Some((value, None)) => {
            return Err(format!(
                "{TOPOLOGY_KEY_NAME} = {value:?} is not a boolean: use \"true\" or \"false\""
            ));
        }
        None => !block_storage
            .get("ignore-volume-az")
            .and_then(|v| parse_bool(v))
            .unwrap_or(false),
    };
    let mut out = BTreeMap::from([
        (
            CLOUD_CONF_KEY.to_owned(),
            ini::render_aligned(&out_sections),
        ),
        (TOPOLOGY_KEY_NAME.to_owned(), topology.to_string()),
    ]);
    if let Some(ca) = ca {
        out.insert(CA_BUNDLE_KEY.to_owned(), ca.clone());
    }
    Ok(out)
}
