//! VMware vSphere (`csi.vsphere.vmware.com`): the table in `vsphere.yaml` plus
//! - `csi-vsphere.conf` (operand Secret `vsphere-csi-config-secret`, key `cloud.conf`, as
//!   OpenShift's operator writes it) generated from the cluster's cloud config
//!   (`openshift-config/cloud-provider-config`, key `config`, INI), `driverConfig.vSphere` and
//!   the vCenter credentials: the vCenter and its datacenters, its user and password (from the
//!   Secret `vmware-vsphere-cloud-credentials`, keys `<server>.username` and
//!   `<server>.password` per vCenter, as cloud-credential-operator writes them; hence a
//!   Secret; several vCenters, as OpenShift supports them, each with its own), the
//!   cluster ID, topology categories (`driverConfig.vSphere.topologyCategories`, else the cloud
//!   config's `[Labels] region`/`zone`, which the installer writes for failure domains) and
//!   snapshot limits;
//! - the syncer container, which reads the same file;
//! - `MAX_VOLUMES_PER_NODE` from `driverConfig.vSphere.maxAllowedBlockVolumesPerNode` (59);
//! - the pod templates as OpenShift's vSphere operator writes them
//!   (openshift/vmware-vsphere-csi-driver-operator's hand-written `controller.yaml` and
//!   `node.yaml`, not csi-operator's generated layout): its sidecar arguments and order, the
//!   socket address through `$(ADDRESS)`, the driver's and syncer's metrics proxies, the node's
//!   `plugin-dir`, and `X_CSI_DEBUG`/`LOGGER_LEVEL` instead of `--v` for the driver and syncer;
//!   so taking over an OpenShift-installed driver restarts no pod for layout alone (what still
//!   differs is listed in `vsphere.openshift-differences.yaml`);
//! - the storage policy `thin-csi` names, made in each vCenter by the
//!   `VMwareVSphereDriverStorageClassController` task (see [`crate::vsphere_policy`]);
//! - a precondition: without the credentials Secret, or with a cloud config the driver cannot
//!   use, the operator reports `VMwareVSphereDriverControllerServiceControllerDisabled` with
//!   the reason and applies nothing, rather than starting pods that crash-loop. Disabled, not
//!   Degraded, as OpenShift's vSphere operator does since OCPBUGS-27159: a cluster whose
//!   vSphere environment cannot serve volumes stays upgradeable and Available (reason
//!   `DriverDisabled`), and the message says what to fix.

use std::collections::BTreeMap;

use csi_kit::derived::ini;
use csi_kit::{DriverDef, Hooks, Inputs, names};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource};

use crate::table::DriverError;
use crate::vsphere_cloud_config::{
    CREDENTIALS_SECRET, SOURCE_ID, SOURCE_KEY, credential, vcenters,
};
use csi_kit::HookError;

/// The short name.
pub const SHORT_NAME: &str = "vsphere";
/// The CSI driver name.
pub const CSI_NAME: &str = "csi.vsphere.vmware.com";
/// The operand Secret with `cloud.conf` (it holds the vCenter credentials).
pub const CONFIG_SECRET: &str = "vsphere-csi-config-secret";
/// The driver's feature-switch ConfigMap.
pub const FEATURE_STATES_CONFIG_MAP: &str = "internal-feature-states.csi.vsphere.vmware.com";
/// The syncer container.
pub const SYNCER_CONTAINER: &str = "vsphere-syncer";
/// The kube-rbac-proxy in front of the syncer's metrics.
pub const SYNCER_PROXY_CONTAINER: &str = "syncer-kube-rbac-proxy";
/// The syncer's metrics port behind its kube-rbac-proxy (OpenShift's).
pub const SYNCER_METRICS_PORT: i32 = 9205;
/// The syncer's own (plain HTTP) metrics port.
pub const SYNCER_LOCAL_METRICS_PORT: i32 = 2113;
/// The kube-rbac-proxy in front of the driver's metrics, as OpenShift names it (the kit's
/// name is `kube-rbac-proxy-<port>`).
pub const DRIVER_PROXY_CONTAINER: &str = "driver-kube-rbac-proxy";
/// The controller's volume of the driver config, as OpenShift names it.
pub const CONFIG_VOLUME: &str = "vsphere-csi-config-volume";
/// The node's socket directory, as OpenShift names it (the kit's `socket-dir`).
pub const NODE_PLUGIN_VOLUME: &str = "plugin-dir";
/// Snapshots per block volume when `driverConfig` does not say.
pub const DEFAULT_MAX_SNAPSHOTS: i32 = 3;
/// Block volumes per node when `driverConfig` does not say.
pub const DEFAULT_MAX_VOLUMES_PER_NODE: i32 = 59;

const TABLE: &str = include_str!("vsphere.yaml");

/// The vSphere driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    for derived in &mut def.config_maps {
        derived.generate = Some(if derived.name == CONFIG_SECRET {
            generate_config
        } else {
            feature_states
        });
    }
    def.hooks = Hooks {
        deployment: vec![
            openshift_controller_layout,
            with_syncer,
            with_topology,
            with_debug_logging,
        ],
        daemon_set: vec![
            openshift_node_layout,
            with_max_volumes_per_node,
            with_debug_logging_on_nodes,
        ],
        storage_class: vec![crate::vsphere_policy::with_storage_policy],
        storage_class_filter: Some(crate::vsphere_policy::wait_for_policy),
        ..Hooks::default()
    };
    def.precondition = Some(precondition);
    Ok(def)
}

/// Whether a cloud config is the newer YAML layout (top-level `global:` or `vcenter:`).
fn looks_like_yaml(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_end();
        l.starts_with("global:") || l.starts_with("vcenter:")
    })
}

/// The topology categories: `driverConfig.vSphere.topologyCategories` when set, else the
/// cloud config's `[Labels] region` and `zone` (the installer's failure domains).
pub fn topology_categories(inputs: &Inputs, sections: &ini::Sections) -> Vec<String> {
    let configured = inputs
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.vsphere.as_ref())
        .and_then(|v| v.topology_categories.clone())
        .unwrap_or_default();
    if !configured.is_empty() {
        return configured;
    }
    let labels = sections.get("Labels").cloned().unwrap_or_default();
    ["region", "zone"]
        .iter()
        .filter_map(|k| labels.get(*k).filter(|v| !v.is_empty()).cloned())
        .collect()
}

/// Generates `cloud.conf` (csi-vsphere.conf) from the cloud config, `driverConfig.vSphere` and
/// the vCenter credentials ([`Inputs::credentials`]). An error names what to fix.
pub fn generate_config(
    inputs: &Inputs,
    text: &str,
    _data: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    if looks_like_yaml(text) {
        return Err(
            "it is in the YAML format (global:/vcenter:), which this operator does not read yet: write it in the INI format ([Global], [VirtualCenter \"<server>\"])"
                .to_owned(),
        );
    }
    let sections = ini::parse(text)?;
    let vcenters = vcenters(&sections)?;
    let config = inputs
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.vsphere.clone())
        .unwrap_or_default();
    let limit = |field: &str, value: Option<i32>| -> Result<Option<i32>, String> {
        match value {
            Some(n) if !(1..=32).contains(&n) => Err(format!(
                "driverConfig.vSphere.{field} = {n} is out of range: use 1 to 32"
            )),
            other => Ok(other),
        }
    };
    let global_max = limit(
        "globalMaxSnapshotsPerBlockVolume",
        config.global_max_snapshots_per_block_volume,
    )?
    .unwrap_or(DEFAULT_MAX_SNAPSHOTS);
    let vsan = limit(
        "granularMaxSnapshotsPerBlockVolumeInVSAN",
        config.granular_max_snapshots_per_block_volume_in_vsan,
    )?;
    let vvol = limit(
        "granularMaxSnapshotsPerBlockVolumeInVVOL",
        config.granular_max_snapshots_per_block_volume_in_vvol,
    )?;

    let cluster_id = inputs
        .cluster_id
        .clone()
        .unwrap_or_else(|| "kubernetes".to_owned());
    let mut out = vec![(
        "Global".to_owned(),
        vec![
            ("cluster-id".to_owned(), cluster_id),
            ("cluster-distribution".to_owned(), "OpenShift".to_owned()),
        ],
    )];
    let categories = topology_categories(inputs, &sections);
    if vcenters.len() > 1 && categories.is_empty() {
        return Err(format!(
            "it names {} vCenters, and the driver serves several vCenters only with topology: set driverConfig.vSphere.topologyCategories, or region and zone in the cloud config's [Labels] (the installer writes them for failure domains)",
            vcenters.len()
        ));
    }
    let credential = |server: &str, what: &str| credential(inputs, server, what).map(quoted);
    for vc in &vcenters {
        let mut entries = vec![
            ("insecure-flag".to_owned(), vc.insecure.to_string()),
            ("datacenters".to_owned(), vc.datacenters.clone()),
            ("user".to_owned(), credential(&vc.server, "username")?),
            ("password".to_owned(), credential(&vc.server, "password")?),
        ];
        if let Some(port) = &vc.port {
            entries.push(("port".to_owned(), port.clone()));
        }
        out.push((format!("VirtualCenter \"{}\"", vc.server), entries));
    }
    if !categories.is_empty() {
        out.push((
            "Labels".to_owned(),
            vec![("topology-categories".to_owned(), categories.join(","))],
        ));
    }
    let mut snapshot = vec![(
        "global-max-snapshots-per-block-volume".to_owned(),
        global_max.to_string(),
    )];
    if let Some(n) = vsan {
        snapshot.push((
            "granular-max-snapshots-per-block-volume-vsan".to_owned(),
            n.to_string(),
        ));
    }
    if let Some(n) = vvol {
        snapshot.push((
            "granular-max-snapshots-per-block-volume-vvol".to_owned(),
            n.to_string(),
        ));
    }
    out.push(("Snapshot".to_owned(), snapshot));
    Ok(BTreeMap::from([(
        "cloud.conf".to_owned(),
        ini::render(&out),
    )]))
}

/// A value in double quotes, as the driver's INI reader (gcfg) reads it back: every `"` and `\`
/// escaped with a backslash. (A user of the form `domain\user` thus becomes `domain\\user`, as
/// the driver's documentation asks.)
pub fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The driver's feature switches, as OpenShift's operator sets them
/// (`vsphere_features_config.yaml` and its DriverFeaturesController): its fixed set, with
/// `improved-volume-topology` on when there are topology categories. The node plugin runs
/// without the cloud config and relies on `use-csinode-id` and `improved-volume-topology`;
/// the driver crash-loops with `multi-vcenter-csi-topology` off.
pub fn feature_states(
    inputs: &Inputs,
    text: &str,
    _data: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let topology = ini::parse(text)
        .map(|sections| !topology_categories(inputs, &sections).is_empty())
        .unwrap_or(false);
    let mut out: BTreeMap<String, String> = [
        ("csi-migration", "true"),
        ("csi-auth-check", "true"),
        ("online-volume-extend", "true"),
        ("trigger-csi-fullsync", "false"),
        ("async-query-volume", "true"),
        ("block-volume-snapshot", "true"),
        ("csi-windows-support", "true"),
        ("use-csinode-id", "true"),
        ("list-volumes", "true"),
        ("pv-to-backingdiskobjectid-mapping", "false"),
        ("cnsmgr-suspend-create-volume", "true"),
        ("topology-preferential-datastores", "true"),
        ("improved-volume-topology", "false"),
        ("improved-csi-idempotency", "true"),
        ("multi-vcenter-csi-topology", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    out.insert("improved-volume-topology".to_owned(), topology.to_string());
    Ok(out)
}

fn source_sections(inputs: &Inputs) -> Option<ini::Sections> {
    let text = inputs.source_config_maps.get(SOURCE_ID)?.get(SOURCE_KEY)?;
    ini::parse(text).ok()
}

/// Whether the driver can work here: the credentials Secret exists and the cloud config gives
/// a usable driver config. The error is the Disabled condition's message.
pub fn precondition(inputs: &Inputs) -> Result<(), HookError> {
    if !inputs.secret_hashes.contains_key(CREDENTIALS_SECRET) {
        return Err(HookError::config(format!(
            "Secret {}/{CREDENTIALS_SECRET} with the vCenter credentials does not exist: on OpenShift cloud-credential-operator writes it from the CredentialsRequest; elsewhere create it with keys <server>.username and <server>.password",
            csi_kit::def::DEFAULT_NAMESPACE
        )));
    }
    let Some(data) = inputs.source_config_maps.get(SOURCE_ID) else {
        return Err(HookError::config(format!(
            "ConfigMap {SOURCE_ID} with the vSphere cloud config does not exist: create it with key {SOURCE_KEY}"
        )));
    };
    let Some(text) = data.get(SOURCE_KEY) else {
        return Err(HookError::config(format!(
            "ConfigMap {SOURCE_ID} has no key {SOURCE_KEY}"
        )));
    };
    generate_config(inputs, text, data).map(|_| ()).map_err(|e| {
        HookError::config(format!("the vSphere cloud config (key {SOURCE_KEY} of ConfigMap {SOURCE_ID}) cannot be used: {e}"))
    })
}

/// Adds the syncer: a copy of the driver container's settings, so it gets the same proxy, CA
/// and config (with the vCenter credentials in it).
pub fn with_syncer(inputs: &Inputs, deployment: &mut Deployment) {
    let Some(spec) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    else {
        return;
    };
    let Some(driver) = spec
        .containers
        .iter()
        .find(|c| c.name == names::DRIVER_CONTAINER)
        .cloned()
    else {
        return;
    };
    // As OpenShift's controller.yaml: no lease timings or --v of its own, the driver's config
    // and client limits, its metrics (:2113) behind syncer-kube-rbac-proxy; the proxy and CA
    // bundle the kit gave the driver container.
    let mut syncer = driver;
    syncer.name = SYNCER_CONTAINER.to_owned();
    syncer.image = inputs.extra_images.get("syncer").cloned();
    syncer.args = Some(vec![
        "--leader-election".to_owned(),
        format!("--fss-name={FEATURE_STATES_CONFIG_MAP}"),
        "--fss-namespace=$(CSI_NAMESPACE)".to_owned(),
    ]);
    syncer.ports = None;
    syncer.liveness_probe = None;
    let mut env = vec![EnvVar {
        name: "FULL_SYNC_INTERVAL_MINUTES".to_owned(),
        value: Some("30".to_owned()),
        ..EnvVar::default()
    }];
    env.extend(
        syncer
            .env
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| {
                e.name != "CSI_ENDPOINT"
                    && e.name != "MAX_VOLUMES_PER_NODE"
                    && !e.name.starts_with("X_CSI_")
            }),
    );
    syncer.env = Some(env);
    if let Some(mounts) = syncer.volume_mounts.as_mut() {
        mounts.retain(|m| m.name != "socket-dir");
        for m in mounts.iter_mut().filter(|m| m.name == CONFIG_VOLUME) {
            m.mount_path = m.mount_path.trim_end_matches('/').to_owned();
        }
    }
    let syncer_proxy = spec
        .containers
        .iter()
        .find(|c| c.name.ends_with("-kube-rbac-proxy"))
        .cloned()
        .map(|mut proxy| {
            proxy.name = SYNCER_PROXY_CONTAINER.to_owned();
            for arg in proxy.args.iter_mut().flatten() {
                if arg.starts_with("--secure-listen-address=") {
                    *arg = format!("--secure-listen-address=0.0.0.0:{SYNCER_METRICS_PORT}");
                } else if arg.starts_with("--upstream=") {
                    *arg = format!("--upstream=http://127.0.0.1:{SYNCER_LOCAL_METRICS_PORT}/");
                }
            }
            for port in proxy.ports.iter_mut().flatten() {
                port.name = Some("syncer-m".to_owned());
                port.container_port = SYNCER_METRICS_PORT;
            }
            proxy
        });
    spec.containers
        .retain(|c| c.name != SYNCER_CONTAINER && c.name != SYNCER_PROXY_CONTAINER);
    spec.containers.push(syncer);
    spec.containers.extend(syncer_proxy);
}

/// Without topology categories the provisioner neither asks for nor enforces topology.
pub fn with_topology(inputs: &Inputs, deployment: &mut Deployment) {
    let on = source_sections(inputs).is_some_and(|s| !topology_categories(inputs, &s).is_empty());
    let containers = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .map(|s| s.containers.iter_mut());
    for container in containers.into_iter().flatten() {
        if container.name != "csi-provisioner" {
            continue;
        }
        let args = container.args.get_or_insert_with(Vec::new);
        args.retain(|a| a != "--strict-topology" && !a.starts_with("--feature-gates=Topology="));
        args.push(format!("--feature-gates=Topology={on}"));
        if on {
            args.push("--strict-topology".to_owned());
        }
    }
}

/// `MAX_VOLUMES_PER_NODE` on the node driver.
pub fn with_max_volumes_per_node(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    let max = inputs
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.vsphere.as_ref())
        .and_then(|v| v.max_allowed_block_volumes_per_node)
        .filter(|n| (1..=255).contains(n))
        .unwrap_or(DEFAULT_MAX_VOLUMES_PER_NODE);
    let containers = daemon_set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .map(|s| s.containers.iter_mut());
    for container in containers.into_iter().flatten() {
        if container.name == names::DRIVER_CONTAINER {
            let env = container.env.get_or_insert_with(Vec::new);
            env.retain(|e| e.name != "MAX_VOLUMES_PER_NODE");
            env.push(EnvVar {
                name: "MAX_VOLUMES_PER_NODE".to_owned(),
                value: Some(max.to_string()),
                ..EnvVar::default()
            });
        }
    }
}

fn env_value(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

/// The kit's argument of `container` that starts with `prefix` (e.g. the table's
/// `--timeout=`), so the table stays the one place of the values.
fn kit_arg(container: &Container, prefix: &str) -> Vec<String> {
    container
        .args
        .iter()
        .flatten()
        .filter(|a| a.starts_with(prefix))
        .cloned()
        .collect()
}

/// The controller sidecars' arguments in the order of OpenShift's controller.yaml (written by
/// hand, so each differs), from the kit's values; `None` for other containers.
fn openshift_sidecar_args(container: &Container) -> Option<Vec<String>> {
    let address = vec!["--csi-address=$(ADDRESS)".to_owned()];
    let v = kit_arg(container, "--v=");
    let le = csi_kit::workloads::leader_election_args().to_vec();
    let timeout = kit_arg(container, "--timeout=");
    let endpoint = kit_arg(container, "--http-endpoint=");
    let parts: Vec<Vec<String>> = match container.name.as_str() {
        "csi-provisioner" => vec![
            address,
            kit_arg(container, "--default-fstype="),
            timeout,
            v,
            le,
            endpoint,
        ],
        "csi-attacher" => vec![
            address,
            timeout,
            endpoint,
            le,
            v,
            kit_arg(container, "--reconcile-sync="),
        ],
        "csi-resizer" => vec![address, endpoint, timeout, le, v],
        "csi-snapshotter" => vec![
            address,
            kit_arg(container, "--metrics-address="),
            timeout,
            le,
            v,
        ],
        names::LIVENESS_PROBE_CONTAINER => vec![
            address,
            kit_arg(container, "--probe-timeout="),
            kit_arg(container, "--health-port="),
            v,
        ],
        _ => return None,
    };
    Some(parts.concat())
}

/// The controller pod as OpenShift's controller.yaml lays it out: sidecars reach the socket
/// through `$(ADDRESS)` with OpenShift's arguments (leader election in the pod's namespace,
/// their default), the driver logs by `LOGGER_LEVEL` rather than `--v`, and its metrics proxy
/// is `driver-kube-rbac-proxy`; no `safe-to-evict-local-volumes` annotation.
pub fn openshift_controller_layout(_inputs: &Inputs, deployment: &mut Deployment) {
    let Some(template) = deployment.spec.as_mut().map(|s| &mut s.template) else {
        return;
    };
    // OpenShift's pods do not have it (and run on control-plane nodes, which the cluster
    // autoscaler does not drain); a pod template of its own would restart them on takeover.
    if let Some(annotations) = template
        .metadata
        .as_mut()
        .and_then(|m| m.annotations.as_mut())
    {
        annotations.remove("cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes");
    }
    let Some(spec) = template.spec.as_mut() else {
        return;
    };
    for c in &mut spec.containers {
        if c.name == names::DRIVER_CONTAINER {
            if let Some(args) = c.args.as_mut() {
                args.retain(|a| !a.starts_with("--v="));
            }
        } else if c.name.starts_with("kube-rbac-proxy-") {
            c.name = DRIVER_PROXY_CONTAINER.to_owned();
        } else if let Some(args) = openshift_sidecar_args(c) {
            c.args = Some(args);
            c.env = Some(vec![env_value("ADDRESS", names::CONTROLLER_SOCKET)]);
            for m in c.volume_mounts.iter_mut().flatten() {
                if m.name == "socket-dir" {
                    m.mount_path = names::CONTROLLER_SOCKET_DIR.to_owned();
                }
            }
        }
    }
}

/// The node pod as OpenShift's node.yaml lays it out: the socket directory is `plugin-dir`,
/// node-driver-registrar takes its paths from the environment, the health endpoints listen on
/// every address of the node (`--health-port`, `:<port>`) and the kubelet probes the node's
/// address; the driver logs by `LOGGER_LEVEL` rather than `--v`.
pub fn openshift_node_layout(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    let Some(spec) = daemon_set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    else {
        return;
    };
    let v = format!("--v={}", inputs.verbosity());
    let port_of = |c: &Container| -> Option<String> {
        kit_arg(c, "--http-endpoint=")
            .first()
            .and_then(|a| a.rsplit(':').next())
            .map(str::to_owned)
    };
    for c in &mut spec.containers {
        if c.name == names::DRIVER_CONTAINER {
            if let Some(args) = c.args.as_mut() {
                args.retain(|a| !a.starts_with("--v="));
            }
        } else if c.name == names::REGISTRAR_CONTAINER {
            let port = port_of(c).unwrap_or_default();
            c.args = Some(vec![
                "--csi-address=$(ADDRESS)".to_owned(),
                "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)".to_owned(),
                format!("--http-endpoint=:{port}"),
                v.clone(),
            ]);
            c.env = Some(vec![
                EnvVar {
                    name: "NODE_NAME".to_owned(),
                    value_from: Some(EnvVarSource {
                        field_ref: Some(k8s_openapi::api::core::v1::ObjectFieldSelector {
                            field_path: "spec.nodeName".to_owned(),
                            ..Default::default()
                        }),
                        ..EnvVarSource::default()
                    }),
                    ..EnvVar::default()
                },
                env_value("ADDRESS", "/csi/csi.sock"),
                env_value(
                    "DRIVER_REG_SOCK_PATH",
                    &format!("/var/lib/kubelet/plugins/{CSI_NAME}/csi.sock"),
                ),
            ]);
            for p in c.ports.iter_mut().flatten() {
                p.protocol = None;
            }
        } else if c.name == names::LIVENESS_PROBE_CONTAINER {
            let port = port_of(c).unwrap_or_default();
            c.args = Some(vec![
                "--csi-address=/csi/csi.sock".to_owned(),
                kit_arg(c, "--probe-timeout=").concat(),
                format!("--health-port={port}"),
                v.clone(),
            ]);
        }
        if let Some(get) = c.liveness_probe.as_mut().and_then(|p| p.http_get.as_mut()) {
            get.host = None;
        }
        for m in c.volume_mounts.iter_mut().flatten() {
            if m.name == "socket-dir" {
                m.name = NODE_PLUGIN_VOLUME.to_owned();
            }
        }
    }
    for volume in spec.volumes.iter_mut().flatten() {
        if volume.name == "socket-dir" {
            volume.name = NODE_PLUGIN_VOLUME.to_owned();
        }
    }
}

fn debug_logging(inputs: &Inputs, containers: &mut [Container]) {
    // OpenShift's maybeAppendDebug: at Debug and above, on the driver and the syncer.
    if inputs.verbosity() < 4 {
        return;
    }
    for c in containers
        .iter_mut()
        .filter(|c| c.name == names::DRIVER_CONTAINER || c.name == SYNCER_CONTAINER)
    {
        let env = c.env.get_or_insert_with(Vec::new);
        env.retain(|e| e.name != "X_CSI_DEBUG" && e.name != "LOGGER_LEVEL");
        env.push(env_value("X_CSI_DEBUG", "true"));
        env.push(env_value("LOGGER_LEVEL", "DEVELOPMENT"));
    }
}

/// The driver and syncer log verbosely at log level Debug and above (they take no `--v`).
pub fn with_debug_logging(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        debug_logging(inputs, &mut spec.containers);
    }
}

/// As [`with_debug_logging`], on nodes.
pub fn with_debug_logging_on_nodes(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = daemon_set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        debug_logging(inputs, &mut spec.containers);
    }
}
