//! OpenStack Cinder (`cinder.csi.openstack.org`, seed 003): the table in
//! `openstack_cinder.yaml` plus the driver's `cloud.conf`, generated from the cluster's cloud
//! config (ConfigMap `openshift-config/cloud-provider-config`, key `config`) into the operand
//! ConfigMap `cloud-conf`:
//! - `[Global]` authenticates with the credentials Secret's `clouds.yaml` (written by
//!   cloud-credential-operator), never with passwords from the cloud config;
//! - `[BlockStorage]` and `[Metadata]` options are carried over, the known ones checked;
//! - a self-signed cloud's CA (key `ca-bundle.pem`, or `ca-cert.pem`, of the cloud config) is
//!   copied as `ca-bundle.pem` and named by `ca-file`.
//!
//! Availability-zone topology (`topology.cinder.csi.openstack.org/zone`) is on unless the cloud
//! config says `[BlockStorage] ignore-volume-az = true` (compute and volume zones differ).

use std::collections::BTreeMap;

use csi::derived::ini;
use csi::{DriverDef, Hooks, Inputs, names};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::PodSpec;

use crate::DriverError;

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
/// Keys of the cluster's cloud config that may hold the CA of a self-signed cloud.
pub const SOURCE_CA_KEYS: [&str; 2] = ["ca-bundle.pem", "ca-cert.pem"];
/// Where the pods see the operand ConfigMap.
pub const CONFIG_DIR: &str = "/etc/kubernetes/config";
/// Where the pods see the credentials Secret's `clouds.yaml`.
pub const CLOUDS_FILE: &str = "/etc/openstack/clouds.yaml";
/// The cloud's name in the `clouds.yaml` cloud-credential-operator writes.
pub const CLOUD_NAME: &str = "openstack";
/// The topology key the driver reports.
pub const TOPOLOGY_KEY: &str = "topology.cinder.csi.openstack.org/zone";

const TABLE: &str = include_str!("openstack_cinder.yaml");

/// The Cinder driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    for derived in &mut def.config_maps {
        derived.generate = Some(generate_cloud_conf);
    }
    def.hooks = Hooks {
        deployment: vec![with_topology_controller],
        daemon_set: vec![with_topology_node],
        storage_class: Vec::new(),
        storage_class_filter: None,
        volume_snapshot_class: Vec::new(),
    };
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
    let sections = ini::parse(text)?;
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
        global.push((
            "ca-file".to_owned(),
            format!("{CONFIG_DIR}/{CA_BUNDLE_KEY}"),
        ));
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

    let mut out_sections = vec![("Global".to_owned(), global)];
    for name in ["BlockStorage", "Metadata"] {
        let entries = section(name);
        if !entries.is_empty() {
            out_sections.push((name.to_owned(), entries.into_iter().collect()));
        }
    }
    let mut out = BTreeMap::from([(CLOUD_CONF_KEY.to_owned(), ini::render(&out_sections))]);
    if let Some(ca) = ca {
        out.insert(CA_BUNDLE_KEY.to_owned(), ca.clone());
    }
    Ok(out)
}

/// Whether availability-zone topology is on: yes, unless the cloud config says
/// `[BlockStorage] ignore-volume-az = true`. Without a readable cloud config, on (the
/// driver's default; the Degraded condition says what is wrong with the config).
pub fn topology_enabled(inputs: &Inputs) -> bool {
    let ignore_az = inputs
        .source_config_maps
        .get("openshift-config/cloud-provider-config")
        .and_then(|d| d.get("config"))
        .and_then(|text| ini::parse(text).ok())
        .and_then(|s| s.get("BlockStorage")?.get("ignore-volume-az").cloned())
        .and_then(|v| parse_bool(&v))
        .unwrap_or(false);
    !ignore_az
}

fn set_arg(args: &mut Vec<String>, prefix: &str, value: String) {
    args.retain(|a| !a.starts_with(prefix));
    args.push(value);
}

fn with_topology(inputs: &Inputs, spec: &mut PodSpec) {
    let on = topology_enabled(inputs);
    for container in &mut spec.containers {
        let args = container.args.get_or_insert_with(Vec::new);
        if container.name == names::DRIVER_CONTAINER {
            set_arg(args, "--with-topology=", format!("--with-topology={on}"));
        } else if container.name == "csi-provisioner" {
            set_arg(
                args,
                "--feature-gates=Topology=",
                format!("--feature-gates=Topology={on}"),
            );
        }
    }
}

/// `--with-topology` on the controller's driver and the provisioner's Topology gate.
pub fn with_topology_controller(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        with_topology(inputs, spec);
    }
}

/// `--with-topology` on the node's driver (it reports the node's zone only when on).
pub fn with_topology_node(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = daemon_set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        with_topology(inputs, spec);
    }
}
