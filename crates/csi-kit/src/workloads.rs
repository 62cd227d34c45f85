//! The controller Deployment, its PodDisruptionBudget, and the node DaemonSet.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, Deployment, DeploymentSpec,
    DeploymentStrategy, RollingUpdateDaemonSet, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapEnvSource, ConfigMapKeySelector, ConfigMapVolumeSource,
    Container, ContainerPort, EmptyDirVolumeSource, EnvFromSource, EnvVar, EnvVarSource,
    ExecAction, HTTPGetAction, HostPathVolumeSource, KeyToPath, Lifecycle, LifecycleHandler,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Probe,
    ProjectedVolumeSource, ResourceRequirements, SecretVolumeSource, SecurityContext,
    ServiceAccountTokenProjection, Toleration, Volume, VolumeMount, VolumeProjection,
    WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::def::{
    ControllerPlacement, DriverContainerDef, DriverDef, EnvDef, ExtraDaemonSet, MetricsDef,
    RequestsDef, SidecarDef, SidecarKind, StaticConfigMapDef, VolumeDef, VolumeSourceDef,
};
use crate::hooks;
use crate::inputs::Inputs;
use crate::names;

/// Requests of the driver and every CSI sidecar.
const REQUEST_CPU: &str = "10m";
const REQUEST_MEMORY: &str = "50Mi";
/// Requests of each kube-rbac-proxy.
const PROXY_REQUEST_MEMORY: &str = "20Mi";

fn requests(memory: &str) -> ResourceRequirements {
    requests_of(REQUEST_CPU, memory)
}

fn requests_of(cpu: &str, memory: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])),
        ..ResourceRequirements::default()
    }
}

/// A table's requests of a CSI container, the kit's where it sets none.
fn table_requests(r: &RequestsDef) -> ResourceRequirements {
    requests_of(
        r.cpu.as_deref().unwrap_or(REQUEST_CPU),
        r.memory.as_deref().unwrap_or(REQUEST_MEMORY),
    )
}

/// A container with the settings every operand container shares: pull policy, requests,
/// read-only root file system, logs as termination message.
fn container(
    name: &str,
    image: &str,
    args: Vec<String>,
    resources: ResourceRequirements,
) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(args),
        resources: Some(resources),
        security_context: Some(SecurityContext {
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    }
}

/// A container for a driver's own helper process (an init container, a controller next to the
/// driver) with the settings every container the kit builds has: `IfNotPresent`, requests of
/// 10m CPU and 50Mi memory, a read-only root file system, logs as termination message.
pub fn operand_container(name: &str, image: &str, args: Vec<String>) -> Container {
    container(name, image, args, requests(REQUEST_MEMORY))
}

/// Env var `name` from field `path` of the pod (the downward API, e.g. `spec.nodeName`).
pub fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// How node DaemonSets roll: 10% of the nodes at a time (maxSurge stays unset, the API's
/// default 0, as OpenShift writes it).
pub fn node_update_strategy() -> DaemonSetUpdateStrategy {
    DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".to_owned()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_unavailable: Some(IntOrString::String("10%".to_owned())),
            ..RollingUpdateDaemonSet::default()
        }),
    }
}

/// A sidecar's leader election with OpenShift's timings (see
/// [`names::LEADER_ELECTION_LEASE_DURATION`]).
pub fn leader_election_args() -> [String; 4] {
    [
        "--leader-election".to_owned(),
        format!(
            "--leader-election-lease-duration={}",
            names::LEADER_ELECTION_LEASE_DURATION
        ),
        format!(
            "--leader-election-renew-deadline={}",
            names::LEADER_ELECTION_RENEW_DEADLINE
        ),
        format!(
            "--leader-election-retry-period={}",
            names::LEADER_ELECTION_RETRY_PERIOD
        ),
    ]
}

/// A mount of volume `name` at `path`.
pub fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

fn port(name: &str, number: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: i32::from(number),
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

/// An HTTP `/healthz` liveness probe on a named port; `loopback` when the health endpoint
/// listens on the loopback address only.
fn healthz_probe(port_name: &str, loopback: bool) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            host: loopback.then(|| "127.0.0.1".to_owned()),
            path: Some("/healthz".to_owned()),
            port: IntOrString::String(port_name.to_owned()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(10),
        timeout_seconds: Some(3),
        period_seconds: Some(10),
        failure_threshold: Some(5),
        ..Probe::default()
    }
}

/// The address a node pod's health endpoint listens on: loopback on the host network
/// (nothing else on the node needs it), every interface on the pod network (the kubelet
/// probes the pod IP).
fn health_endpoint(host_network: bool, port: u16) -> String {
    if host_network {
        format!("--http-endpoint=127.0.0.1:{port}")
    } else {
        format!("--http-endpoint=:{port}")
    }
}

/// The driver container's environment: `CSI_ENDPOINT` where the table lists it without a
/// value (first when it does not list it), then the table's variables in order.
fn env_from_def(def: &DriverContainerDef, endpoint: &str) -> Vec<EnvVar> {
    let bare = |e: &EnvDef| {
        e.name == CSI_ENDPOINT
            && e.value.is_none()
            && e.field_path.is_none()
            && e.config_map_key_ref.is_none()
    };
    let placed = def.env.iter().any(bare);
    let first = (!placed).then(|| env(CSI_ENDPOINT, endpoint));
    let table = def.env.iter().map(|e| {
        if bare(e) {
            return env(CSI_ENDPOINT, endpoint);
        }
        env_var(e)
    });
    first.into_iter().chain(table).collect()
}

/// A table's environment variable.
fn env_var(e: &EnvDef) -> EnvVar {
    EnvVar {
        name: e.name.clone(),
        value: e.value.clone(),
        value_from: match (&e.value, &e.field_path, &e.config_map_key_ref) {
            (None, Some(path), _) => field_env(&e.name, path).value_from,
            (None, None, Some(key)) => Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: key.name.clone(),
                    key: key.key.clone(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
            _ => None,
        },
    }
}

/// A table's environment of a sidecar, in order.
fn env_vars(env: &[EnvDef]) -> Vec<EnvVar> {
    env.iter().map(env_var).collect()
}

/// The environment variable that carries the CSI socket's address.
const CSI_ENDPOINT: &str = "CSI_ENDPOINT";

/// The placeholder of the operand verbosity in a table's arguments.
const LOG_LEVEL_PLACEHOLDER: &str = "${LOG_LEVEL}";

/// The placeholder of the cluster's ID (OpenShift's infrastructure name) in a table's
/// arguments.
const CLUSTER_ID_PLACEHOLDER: &str = "${CLUSTER_ID}";

/// The driver's arguments: `${LOG_LEVEL}` replaced by the verbosity where the table puts it,
/// else `--v=N` last; `${CLUSTER_ID}` by the cluster's ID, an argument holding it left out
/// where the cluster has none (plain Kubernetes).
fn driver_args(def: &DriverContainerDef, inputs: &Inputs) -> Vec<String> {
    let verbosity = inputs.verbosity().to_string();
    let cluster_id = inputs.cluster_id.as_deref().filter(|id| !id.is_empty());
    let mut args: Vec<String> = def
        .args
        .iter()
        .filter_map(|a| match cluster_id {
            Some(id) => Some(a.replace(CLUSTER_ID_PLACEHOLDER, id)),
            None => (!a.contains(CLUSTER_ID_PLACEHOLDER)).then(|| a.clone()),
        })
        .map(|a| a.replace(LOG_LEVEL_PLACEHOLDER, &verbosity))
        .collect();
    if !def.args.iter().any(|a| a.contains(LOG_LEVEL_PLACEHOLDER)) {
        args.push(format!("--v={verbosity}"));
    }
    args
}

/// Sorts named items by their position in `order`; items it does not name keep their
/// relative order after those it does. The order of containers' mounts and of a pod's volumes
/// is part of the pod template, so the tables can follow OpenShift's.
fn sort_by_names<T>(items: &mut [T], order: &[String], name: impl Fn(&T) -> &str) {
    if order.is_empty() {
        return;
    }
    items.sort_by_key(|item| {
        order
            .iter()
            .position(|n| n == name(item))
            .unwrap_or(usize::MAX)
    });
}

fn volume_from_def(v: &VolumeDef) -> Volume {
    let mut volume = Volume {
        name: v.name.clone(),
        ..Volume::default()
    };
    match &v.source {
        VolumeSourceDef::HostPath { path, type_ } => {
            volume.host_path = Some(HostPathVolumeSource {
                path: path.clone(),
                type_: Some(type_.clone()),
            });
        }
        VolumeSourceDef::Secret { secret_name, items } => {
            volume.secret = Some(SecretVolumeSource {
                secret_name: Some(secret_name.clone()),
                items: key_paths(items),
                ..SecretVolumeSource::default()
            });
        }
        VolumeSourceDef::ConfigMap {
            config_map_name,
            items,
            optional,
        } => {
            volume.config_map = Some(ConfigMapVolumeSource {
                name: config_map_name.clone(),
                items: key_paths(items),
                optional: optional.then_some(true),
                ..ConfigMapVolumeSource::default()
            });
        }
        VolumeSourceDef::EmptyDir { medium } => {
            volume.empty_dir = Some(EmptyDirVolumeSource {
                medium: medium.clone(),
                ..EmptyDirVolumeSource::default()
            });
        }
        VolumeSourceDef::ServiceAccountToken { audience, path } => {
            volume.projected = Some(ProjectedVolumeSource {
                sources: Some(vec![VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        audience: Some(audience.clone()),
                        path: path.clone(),
                        ..ServiceAccountTokenProjection::default()
                    }),
                    ..VolumeProjection::default()
                }]),
                ..ProjectedVolumeSource::default()
            });
        }
    }
    volume
}

/// Each key as a file of its own name; `None` (every key) for none.
fn key_paths(keys: &[String]) -> Option<Vec<KeyToPath>> {
    (!keys.is_empty()).then(|| {
        keys.iter()
            .map(|key| KeyToPath {
                key: key.clone(),
                path: key.clone(),
                mode: None,
            })
            .collect()
    })
}

/// The driver container's mount of a table volume; none for a volume no container mounts.
fn mount_from_def(v: &VolumeDef) -> Option<VolumeMount> {
    Some(VolumeMount {
        name: v.name.clone(),
        mount_path: v.mount_path.clone()?,
        read_only: v.read_only.then_some(true),
        mount_propagation: v.mount_propagation.clone(),
        ..VolumeMount::default()
    })
}

/// Adds the table volumes that other containers mount too (`alsoMountedIn`) to those
/// containers, after their own mounts.
fn mount_shared_volumes(containers: &mut [Container], volumes: &[VolumeDef]) {
    for v in volumes {
        let Some(m) = mount_from_def(v) else { continue };
        for c in containers
            .iter_mut()
            .filter(|c| v.also_mounted_in.contains(&c.name))
        {
            c.volume_mounts.get_or_insert_with(Vec::new).push(m.clone());
        }
    }
}

/// Sets a memory limit on a container.
fn limit_memory(c: &mut Container, limit: Option<&String>) {
    if let (Some(limit), Some(resources)) = (limit, c.resources.as_mut()) {
        resources.limits = Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity(limit.clone()),
        )]));
    }
}

/// The `csi-driver` container of either pod. `loopback_probe`: the health endpoint listens on
/// the loopback address only.
fn driver_container(
    def: &DriverContainerDef,
    static_config_maps: &[StaticConfigMapDef],
    inputs: &Inputs,
    endpoint: &str,
    mut mounts: Vec<VolumeMount>,
    loopback_probe: bool,
) -> Container {
    let mut c = container(
        names::DRIVER_CONTAINER,
        &inputs.images.driver,
        driver_args(def, inputs),
        requests_of(
            def.cpu_request.as_deref().unwrap_or(REQUEST_CPU),
            def.memory_request.as_deref().unwrap_or(REQUEST_MEMORY),
        ),
    );
    // A ConfigMap of envFrom that has CSI_ENDPOINT gives it (the table checks it is the
    // socket); else the kit's.
    let endpoint_from_config_map = def.env_from.iter().any(|name| {
        static_config_maps
            .iter()
            .any(|c| &c.name == name && c.data.contains_key(CSI_ENDPOINT))
    });
    let mut env = env_from_def(def, def.endpoint.as_deref().unwrap_or(endpoint));
    if endpoint_from_config_map {
        env.retain(|e| e.name != CSI_ENDPOINT);
    }
    c.env = (!env.is_empty()).then_some(env);
    if !def.env_from.is_empty() {
        c.env_from = Some(
            def.env_from
                .iter()
                .map(|name| EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource {
                        name: name.clone(),
                        optional: None,
                    }),
                    ..EnvFromSource::default()
                })
                .collect(),
        );
    }
    // The driver's plain-HTTP metrics, if any, stay on loopback; kube-rbac-proxy exposes them.
    c.ports = Some(vec![port("healthz", def.healthz_port)]);
    let mut probe = healthz_probe("healthz", loopback_probe);
    if let Some(t) = def.liveness_probe {
        probe.initial_delay_seconds = Some(t.initial_delay_seconds);
        probe.period_seconds = Some(t.period_seconds);
        probe.timeout_seconds = Some(t.timeout_seconds);
    }
    c.liveness_probe = Some(probe);
    if let Some(sc) = c.security_context.as_mut() {
        if def.privileged {
            sc.privileged = Some(true);
        }
        if !def.capabilities.is_empty() {
            sc.capabilities = Some(Capabilities {
                add: Some(def.capabilities.clone()),
                drop: None,
            });
        }
        sc.allow_privilege_escalation = def.allow_privilege_escalation;
    }
    limit_memory(&mut c, def.memory_limit.as_ref());
    for m in &mut mounts {
        if let Some(path) = def.mount_paths.get(&m.name) {
            m.mount_path.clone_from(path);
        }
    }
    mounts.extend(def.volumes.iter().filter_map(mount_from_def));
    sort_by_names(&mut mounts, &def.mount_order, |m| &m.name);
    c.volume_mounts = Some(mounts);
    c
}

/// A privileged controller pod's containers: all but the kube-rbac-proxies privileged, the
/// driver's root file system writable (as OpenShift's privileged controllers have them).
fn privileged_controller(containers: &mut [Container]) {
    for c in containers {
        if c.name.contains("kube-rbac-proxy") {
            continue;
        }
        if let Some(sc) = c.security_context.as_mut() {
            sc.privileged = Some(true);
            if c.name == names::DRIVER_CONTAINER {
                sc.read_only_root_filesystem = None;
            }
        }
    }
}

/// A kube-rbac-proxy container `name` serving `metrics` over TLS as port `<short>-m`.
fn kube_rbac_proxy(name: &str, short: &str, metrics: MetricsDef, inputs: &Inputs) -> Container {
    let mut args = vec![
        format!("--secure-listen-address=0.0.0.0:{}", metrics.exposed_port),
        format!("--upstream=http://127.0.0.1:{}/", metrics.local_port),
    ];
    let service_ca = inputs.topology.is_openshift();
    if service_ca {
        args.push(format!(
            "--tls-cert-file={}/tls.crt",
            names::METRICS_CERT_DIR
        ));
        args.push(format!(
            "--tls-private-key-file={}/tls.key",
            names::METRICS_CERT_DIR
        ));
    }
    if !inputs.tls.cipher_suites.is_empty() {
        args.push(format!(
            "--tls-cipher-suites={}",
            inputs.tls.cipher_suites.join(",")
        ));
    }
    if let Some(min) = &inputs.tls.min_version {
        args.push(format!("--tls-min-version={min}"));
    }
    args.push("--logtostderr=true".to_owned());
    let mut c = container(
        name,
        &inputs.images.kube_rbac_proxy,
        args,
        requests(PROXY_REQUEST_MEMORY),
    );
    c.ports = Some(vec![port(
        &names::metrics_port(short),
        metrics.exposed_port,
    )]);
    if service_ca {
        // Without OpenShift's service CA there is no certificate Secret; kube-rbac-proxy
        // then serves a self-signed certificate.
        c.volume_mounts = Some(vec![mount("metrics-serving-cert", names::METRICS_CERT_DIR)]);
    }
    c
}

fn sidecar_image(kind: SidecarKind, inputs: &Inputs) -> &str {
    match kind {
        SidecarKind::Provisioner => &inputs.images.provisioner,
        SidecarKind::Attacher => &inputs.images.attacher,
        SidecarKind::Resizer => &inputs.images.resizer,
        SidecarKind::Snapshotter => &inputs.images.snapshotter,
    }
}

/// OpenShift's placeholders of the leader election timings in its assets' arguments, and the
/// kit's values for them.
const LEADER_ELECTION_PLACEHOLDERS: [(&str, &str); 3] = [
    (
        "${LEADER_ELECTION_LEASE_DURATION}",
        names::LEADER_ELECTION_LEASE_DURATION,
    ),
    (
        "${LEADER_ELECTION_RENEW_DEADLINE}",
        names::LEADER_ELECTION_RENEW_DEADLINE,
    ),
    (
        "${LEADER_ELECTION_RETRY_PERIOD}",
        names::LEADER_ELECTION_RETRY_PERIOD,
    ),
];

/// A table's whole argument list of a sidecar or the livenessprobe, its placeholders
/// replaced (see [`crate::def::SidecarDef::full_args`]).
fn full_args(args: &[String], inputs: &Inputs) -> Vec<String> {
    let verbosity = inputs.verbosity().to_string();
    args.iter()
        .map(|a| {
            LEADER_ELECTION_PLACEHOLDERS
                .iter()
                .fold(a.replace(LOG_LEVEL_PLACEHOLDER, &verbosity), |a, (p, v)| {
                    a.replace(p, v)
                })
        })
        .collect()
}

/// The environment variable that carries the socket's path to a sidecar with `addressEnv`.
const ADDRESS_ENV: &str = "ADDRESS";

/// The standard arguments of a controller sidecar: socket (`address`), metrics endpoint,
/// leader election with OpenShift's timings, verbosity; then the driver's extra arguments.
fn sidecar_args(
    def: &DriverDef,
    kind: SidecarKind,
    metrics: Option<MetricsDef>,
    extra: &[String],
    address: &str,
    inputs: &Inputs,
) -> Vec<String> {
    let mut args = vec![format!("--csi-address={address}")];
    if let Some(m) = metrics {
        // csi-snapshotter is the one sidecar OpenShift still configures with --metrics-address.
        let flag = if kind == SidecarKind::Snapshotter {
            "--metrics-address"
        } else {
            "--http-endpoint"
        };
        args.push(format!("{flag}=localhost:{}", m.local_port));
    }
    args.extend(leader_election_args());
    args.extend([
        format!("--leader-election-namespace={}", def.namespace),
        format!("--v={}", inputs.verbosity()),
    ]);
    args.extend(extra.iter().cloned());
    args
}

/// The annotations naming the containers that get the cluster proxy (when `proxy`) and the
/// trusted CA bundle; none for a driver without the cluster proxy (`clusterProxy: false`).
fn workload_annotations(def: &DriverDef, proxy: bool) -> Option<BTreeMap<String, String>> {
    if !def.cluster_proxy {
        return None;
    }
    let mut annotations = BTreeMap::from([(
        names::INJECT_CA_BUNDLE_ANNOTATION.to_owned(),
        names::DRIVER_CONTAINER.to_owned(),
    )]);
    if proxy {
        annotations.insert(
            names::INJECT_PROXY_ANNOTATION.to_owned(),
            names::DRIVER_CONTAINER.to_owned(),
        );
    }
    Some(annotations)
}

/// Where the controller pods run for a topology and placement: nodeSelector, tolerations
/// (none for [`ControllerPlacement::AnyNode`]) and a preferred spread across nodes.
fn place_controller(
    spec: &mut PodSpec,
    selector: &LabelSelector,
    placement: ControllerPlacement,
    inputs: &Inputs,
) {
    if placement == ControllerPlacement::ControlPlane {
        let label = inputs.topology.control_plane_node_label();
        spec.node_selector = label.map(|l| BTreeMap::from([(l.to_owned(), String::new())]));
        let mut tolerations = vec![Toleration {
            key: Some("CriticalAddonsOnly".to_owned()),
            operator: Some("Exists".to_owned()),
            ..Toleration::default()
        }];
        if let Some(l) = label {
            tolerations.push(Toleration {
                key: Some(l.to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some("NoSchedule".to_owned()),
                ..Toleration::default()
            });
        }
        spec.tolerations = Some(tolerations);
    }
    spec.affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(selector.clone()),
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    });
}

/// The controller Deployment: driver, each sidecar followed by its kube-rbac-proxy, and the
/// livenessprobe; sockets on an emptyDir; replicas and placement from the topology; a
/// rollout that never needs an extra node (maxSurge 0).
pub fn build_controller_deployment(def: &DriverDef, inputs: &Inputs) -> Deployment {
    let metadata = controller_metadata(def);
    let mut template = PodTemplateSpec {
        metadata: Some(controller_pod_metadata(def)),
        spec: Some(controller_pod_spec(def, inputs)),
    };
    inject_cluster_config(def, &metadata, &mut template, inputs);
    let mut deployment = Deployment {
        metadata,
        spec: Some(controller_deployment_spec(def, inputs, template)),
        ..Deployment::default()
    };
    controller_hooks(def, inputs, &mut deployment);
    deployment
}

/// The Deployment's metadata: the workload annotations, then the table's own.
fn controller_metadata(def: &DriverDef) -> ObjectMeta {
    let ctl = &def.controller;
    let mut metadata = workload_metadata(def, names::controller(def), true);
    if !ctl.deployment_annotations.is_empty() {
        metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(ctl.deployment_annotations.clone());
    }
    metadata
}

/// The controller pod's labels and annotations: the autoscaler may evict it with its local
/// volumes (the sockets' emptyDir, or those the table names), and it needs the table's SCC.
fn controller_pod_metadata(def: &DriverDef) -> ObjectMeta {
    let ctl = &def.controller;
    let evictable = if ctl.safe_to_evict_local_volumes.is_empty() {
        "socket-dir".to_owned()
    } else {
        ctl.safe_to_evict_local_volumes.join(",")
    };
    pod_metadata(
        names::controller_selector(def),
        &ctl.pod_labels,
        (
            "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes",
            evictable,
        ),
        &ctl.required_scc,
    )
}

/// The controller pod: its containers and volumes, on the host network if the table says so,
/// critical to the cluster, placed by [`place_controller`].
fn controller_pod_spec(def: &DriverDef, inputs: &Inputs) -> PodSpec {
    let ctl = &def.controller;
    let mut spec = PodSpec {
        containers: controller_containers(def, inputs),
        host_network: ctl.host_network.then_some(true),
        priority_class_name: Some("system-cluster-critical".to_owned()),
        service_account_name: Some(names::controller_sa(def)),
        volumes: Some(controller_volumes(def, inputs)),
        ..PodSpec::default()
    };
    place_controller(
        &mut spec,
        &names::controller_pods_selector(def),
        ctl.placement,
        inputs,
    );
    spec
}

/// The controller pod's containers: the driver and its metrics proxy, each sidecar followed by
/// its own, and the livenessprobe; then the table's privileges, shared mounts, order and names.
fn controller_containers(def: &DriverDef, inputs: &Inputs) -> Vec<Container> {
    let ctl = &def.controller;
    // As OpenShift's controllers do, on either network: the livenessprobe sidecar listens on
    // every address (`--health-port`) and the kubelet probes the pod's address.
    let mut containers = vec![driver_container(
        &ctl.driver,
        &def.static_config_maps,
        inputs,
        names::CONTROLLER_ENDPOINT,
        vec![mount("socket-dir", names::CONTROLLER_SOCKET_DIR)],
        false,
    )];
    containers.extend(driver_metrics_proxy(&ctl.driver, inputs));
    for sidecar in &ctl.sidecars {
        containers.push(controller_sidecar(def, sidecar, inputs));
        if let Some(m) = sidecar.metrics {
            containers.push(kube_rbac_proxy(
                &sidecar.kind.proxy_container_name(),
                sidecar.kind.short_name(),
                m,
                inputs,
            ));
        }
    }
    for c in containers
        .iter_mut()
        .filter(|c| c.name.contains("kube-rbac-proxy"))
    {
        limit_memory(c, ctl.memory_limits.kube_rbac_proxy.as_ref());
    }
    let mut probe = liveness_probe(
        format!("--health-port={}", ctl.driver.healthz_port),
        &ctl.liveness_probe_args,
        &ctl.liveness_probe_full_args,
        &ctl.liveness_probe_requests,
        inputs,
    );
    limit_memory(&mut probe, ctl.memory_limits.liveness_probe.as_ref());
    containers.push(probe);

    if ctl.privileged {
        privileged_controller(&mut containers);
    }
    if ctl.explicitly_unprivileged {
        unprivileged_controller(&mut containers);
    }
    mount_shared_volumes(&mut containers, &ctl.driver.volumes);
    sort_by_names(&mut containers, &ctl.container_order, |c| &c.name);
    rename_kit_containers(&mut containers, &ctl.container_names);
    containers
}

/// A CSI sidecar of the controller: the table's full arguments or the kit's, the driver's
/// socket given directly or through `ADDRESS`, the table's requests and memory limit.
fn controller_sidecar(def: &DriverDef, sidecar: &SidecarDef, inputs: &Inputs) -> Container {
    let ctl = &def.controller;
    let socket = ctl.socket();
    let address = if sidecar.address_env {
        format!("$({ADDRESS_ENV})")
    } else {
        socket.clone()
    };
    let args = if sidecar.full_args.is_empty() {
        sidecar_args(
            def,
            sidecar.kind,
            sidecar.metrics,
            &sidecar.extra_args,
            &address,
            inputs,
        )
    } else {
        full_args(&sidecar.full_args, inputs)
    };
    let mut c = container(
        &sidecar.kind.container_name(),
        sidecar_image(sidecar.kind, inputs),
        args,
        table_requests(&sidecar.requests),
    );
    if sidecar.address_env {
        c.env = Some(vec![env(ADDRESS_ENV, &socket)]);
    }
    c.volume_mounts = Some(vec![mount("socket-dir", ctl.socket_dir())]);
    limit_memory(&mut c, ctl.memory_limits.sidecars.as_ref());
    c
}

/// An explicitly unprivileged controller pod's containers: all but the kube-rbac-proxies say
/// they are not privileged and may not escalate.
fn unprivileged_controller(containers: &mut [Container]) {
    for sc in containers
        .iter_mut()
        .filter(|c| !c.name.contains("kube-rbac-proxy"))
        .filter_map(|c| c.security_context.as_mut())
    {
        sc.privileged = Some(false);
        sc.allow_privilege_escalation = Some(false);
    }
}

/// The controller pod's volumes: the sockets' emptyDir, the metrics serving certificate on
/// OpenShift, and the table's, in the table's order.
fn controller_volumes(def: &DriverDef, inputs: &Inputs) -> Vec<Volume> {
    let mut volumes = vec![Volume {
        name: "socket-dir".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    if def.has_metrics() && inputs.topology.is_openshift() {
        volumes.push(metrics_serving_cert(names::metrics_serving_cert(def)));
    }
    let driver = &def.controller.driver;
    volumes.extend(driver.volumes.iter().map(volume_from_def));
    sort_by_names(&mut volumes, &driver.volume_order, |v| &v.name);
    volumes
}

/// The Deployment's spec: replicas by topology, and a rollout one pod at a time that never
/// needs an extra node (maxSurge 0).
fn controller_deployment_spec(
    def: &DriverDef,
    inputs: &Inputs,
    template: PodTemplateSpec,
) -> DeploymentSpec {
    DeploymentSpec {
        replicas: Some(inputs.topology.controller_replicas()),
        selector: LabelSelector {
            match_labels: Some(names::controller_selector(def)),
            ..LabelSelector::default()
        },
        strategy: Some(DeploymentStrategy {
            type_: Some("RollingUpdate".to_owned()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(IntOrString::Int(0)),
                max_unavailable: Some(IntOrString::Int(1)),
            }),
        }),
        template,
        ..DeploymentSpec::default()
    }
}

/// The driver's Deployment hooks, then the hashes of the Secrets and ConfigMaps the pods mount
/// (so that a rotation rolls them), on what the hooks left.
fn controller_hooks(def: &DriverDef, inputs: &Inputs, deployment: &mut Deployment) {
    for hook in &def.hooks.deployment {
        hook(inputs, deployment);
    }
    if let Some(spec) = deployment.spec.as_mut() {
        hooks::annotate_input_hashes(
            def,
            &def.controller.driver.volumes,
            &mut deployment.metadata,
            &mut spec.template,
            inputs,
        );
    }
}

/// A workload's metadata: its name in the operand namespace, and the annotations that ask for
/// the cluster proxy (when `proxy`) and the trusted CA bundle ([`workload_annotations`]).
fn workload_metadata(def: &DriverDef, name: String, proxy: bool) -> ObjectMeta {
    let mut metadata = names::ns_meta(def, name);
    metadata.annotations = workload_annotations(def, proxy);
    metadata
}

/// A pod template's metadata: the workload's selector and the table's pod labels; the cluster
/// autoscaler's eviction annotation, the SCC the pods need, and OpenShift's workload
/// partitioning.
fn pod_metadata(
    selector: BTreeMap<String, String>,
    pod_labels: &BTreeMap<String, String>,
    (eviction, evict): (&str, String),
    required_scc: &str,
) -> ObjectMeta {
    let mut labels = selector;
    labels.extend(pod_labels.clone());
    ObjectMeta {
        labels: Some(labels),
        annotations: Some(BTreeMap::from([
            (eviction.to_owned(), evict),
            (
                names::REQUIRED_SCC_ANNOTATION.to_owned(),
                required_scc.to_owned(),
            ),
            (
                names::WORKLOAD_MANAGEMENT_ANNOTATION.to_owned(),
                names::WORKLOAD_MANAGEMENT_VALUE.to_owned(),
            ),
        ])),
        ..ObjectMeta::default()
    }
}

/// The cluster-wide proxy and trusted CA bundle, into the containers the workload's
/// annotations name.
fn inject_cluster_config(
    def: &DriverDef,
    workload: &ObjectMeta,
    template: &mut PodTemplateSpec,
    inputs: &Inputs,
) {
    hooks::inject_proxy(workload, template, inputs);
    hooks::mount_trusted_ca_bundle(def, workload, template, inputs);
}

/// The kube-rbac-proxy that serves the driver's metrics over TLS, when it has metrics (with a
/// certificate the service CA issues for the metrics Service on OpenShift).
fn driver_metrics_proxy(driver: &DriverContainerDef, inputs: &Inputs) -> Option<Container> {
    driver
        .metrics
        .map(|m| kube_rbac_proxy(&m.driver_proxy_container_name(), "driver", m, inputs))
}

/// The livenessprobe sidecar: it checks the driver over the socket in `/csi` and serves the
/// answer on `health` (an argument), unless the table gives its full arguments.
fn liveness_probe(
    health: String,
    extra_args: &[String],
    table_full_args: &[String],
    requests: &RequestsDef,
    inputs: &Inputs,
) -> Container {
    let args = if table_full_args.is_empty() {
        let mut args = vec![
            "--csi-address=/csi/csi.sock".to_owned(),
            health,
            format!("--v={}", inputs.verbosity()),
        ];
        args.extend(extra_args.iter().cloned());
        args
    } else {
        full_args(table_full_args, inputs)
    };
    let mut probe = container(
        names::LIVENESS_PROBE_CONTAINER,
        &inputs.images.liveness_probe,
        args,
        table_requests(requests),
    );
    probe.volume_mounts = Some(vec![mount("socket-dir", "/csi")]);
    probe
}

/// The volume of the metrics serving certificate, Secret `secret_name`.
fn metrics_serving_cert(secret_name: String) -> Volume {
    Volume {
        name: "metrics-serving-cert".to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret_name),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// The controller's PodDisruptionBudget: one pod may be down at a time, and an unhealthy pod
/// never blocks a drain.
pub fn build_pod_disruption_budget(def: &DriverDef) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: names::ns_meta(def, format!("{}-pdb", names::controller(def))),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(names::controller_pods_selector(def)),
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".to_owned()),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}

/// Volume `name`: directory `path` of the node, of hostPath type `type_`.
pub fn host_path(name: &str, path: &str, type_: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path: path.to_owned(),
            type_: Some(type_.to_owned()),
        }),
        ..Volume::default()
    }
}

/// The node DaemonSet: driver (kubelet directory with Bidirectional propagation),
/// node-driver-registrar and livenessprobe, on every Linux node (or those of the table's
/// nodeSelector) whatever its taints, 10% of nodes updated at a time. Where the table follows
/// OpenShift's layout (names of the kit's volumes and containers, the sidecars' arguments,
/// environment and requests, root), it is applied here, before the driver's hooks.
pub fn build_node_daemon_set(def: &DriverDef, inputs: &Inputs) -> DaemonSet {
    let node = &def.node;
    let metadata = workload_metadata(def, names::node(def), node.inject_proxy);
    let mut template = PodTemplateSpec {
        metadata: Some(node_pod_metadata(def)),
        spec: Some(node_pod_spec(def, inputs)),
    };
    inject_cluster_config(def, &metadata, &mut template, inputs);
    let mut daemon_set = DaemonSet {
        metadata,
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(names::node_selector(def)),
                ..LabelSelector::default()
            },
            template,
            update_strategy: Some(node_update_strategy()),
            ..DaemonSetSpec::default()
        }),
        ..DaemonSet::default()
    };
    node_hooks(def, inputs, &mut daemon_set);
    daemon_set
}

/// The node pod's labels and annotations: the autoscaler does not evict it, and it needs the
/// `privileged` SCC.
fn node_pod_metadata(def: &DriverDef) -> ObjectMeta {
    pod_metadata(
        names::node_selector(def),
        &def.node.pod_labels,
        (
            "cluster-autoscaler.kubernetes.io/enable-ds-eviction",
            "false".to_owned(),
        ),
        "privileged",
    )
}

/// The node pod: its containers and volumes (the kit's volumes renamed as the table says), on
/// the host network if the table says so, critical to the node, placed by [`place_node`].
fn node_pod_spec(def: &DriverDef, inputs: &Inputs) -> PodSpec {
    let node = &def.node;
    let mut containers = node_containers(def, inputs);
    let mut volumes = node_volumes(def, inputs);
    rename_kit_volumes(&mut containers, &mut volumes, &node.volume_names);
    let mut spec = PodSpec {
        containers,
        dns_policy: node.dns_policy.clone(),
        host_network: node.host_network.then_some(true),
        priority_class_name: Some("system-node-critical".to_owned()),
        service_account_name: Some(names::node_sa(def)),
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    place_node(&mut spec, def);
    spec
}

/// Where the node pods run: every Linux node, or those of the table's nodeSelector (every node
/// when it is empty), whatever their taints.
fn place_node(spec: &mut PodSpec, def: &DriverDef) {
    let node_selector =
        def.node.node_selector.clone().unwrap_or_else(|| {
            BTreeMap::from([("kubernetes.io/os".to_owned(), "linux".to_owned())])
        });
    spec.node_selector = (!node_selector.is_empty()).then_some(node_selector);
    spec.tolerations = Some(vec![Toleration {
        operator: Some("Exists".to_owned()),
        ..Toleration::default()
    }]);
}

/// The node pod's containers: the driver (the kubelet directory mounted with Bidirectional
/// propagation) and its metrics proxy, node-driver-registrar and the livenessprobe; then the
/// table's order, shared mounts, root and names.
fn node_containers(def: &DriverDef, inputs: &Inputs) -> Vec<Container> {
    let node = &def.node;
    let kubelet_mount = VolumeMount {
        mount_propagation: Some("Bidirectional".to_owned()),
        ..mount("kubelet-dir", "/var/lib/kubelet")
    };
    let mut containers = vec![driver_container(
        &node.driver,
        &def.static_config_maps,
        inputs,
        names::NODE_ENDPOINT,
        vec![kubelet_mount, mount("socket-dir", names::NODE_SOCKET_DIR)],
        probe_on_loopback(node.host_network, &node.liveness_probe.full_args),
    )];
    containers.extend(driver_metrics_proxy(&node.driver, inputs));
    containers.push(node_driver_registrar(def, inputs));
    let mut probe = liveness_probe(
        health_endpoint(node.host_network, node.driver.healthz_port),
        &node.liveness_probe_args,
        &node.liveness_probe.full_args,
        &node.liveness_probe.requests,
        inputs,
    );
    if !node.liveness_probe.env.is_empty() {
        probe.env = Some(env_vars(&node.liveness_probe.env));
    }
    containers.push(probe);

    sort_by_names(&mut containers, &node.container_order, |c| &c.name);
    mount_shared_volumes(&mut containers, &node.driver.volumes);
    if node.run_as_root {
        run_as_root(&mut containers);
    }
    rename_kit_containers(&mut containers, &node.container_names);
    containers
}

/// Whether the kubelet probes a health endpoint on the loopback address: where it listens
/// there only, the kit's on the host network, else as the table's arguments say.
fn probe_on_loopback(host_network: bool, table_full_args: &[String]) -> bool {
    if table_full_args.is_empty() {
        host_network
    } else {
        table_full_args
            .iter()
            .any(|a| a.starts_with("--http-endpoint=127.0.0.1:"))
    }
}

/// The node's CSI plugin directory, where the driver's socket is.
fn plugin_dir(def: &DriverDef) -> String {
    format!("/var/lib/kubelet/plugins/{}/", def.name)
}

/// node-driver-registrar: registers the driver's socket with the kubelet, privileged (it
/// writes into the kubelet's registration directory), and removes the sockets when stopped.
fn node_driver_registrar(def: &DriverDef, inputs: &Inputs) -> Container {
    let node = &def.node;
    let registrar_args = if node.registrar.full_args.is_empty() {
        vec![
            "--csi-address=/csi/csi.sock".to_owned(),
            format!("--kubelet-registration-path={}csi.sock", plugin_dir(def)),
            health_endpoint(node.host_network, node.registrar_healthz_port),
            format!("--v={}", inputs.verbosity()),
        ]
    } else {
        full_args(&node.registrar.full_args, inputs)
    };
    let mut registrar = container(
        names::REGISTRAR_CONTAINER,
        &inputs.images.node_driver_registrar,
        registrar_args,
        table_requests(&node.registrar.requests),
    );
    if !node.registrar.env.is_empty() {
        registrar.env = Some(env_vars(&node.registrar.env));
    }
    registrar.ports = Some(vec![port("rhealthz", node.registrar_healthz_port)]);
    registrar.liveness_probe = Some(healthz_probe(
        "rhealthz",
        probe_on_loopback(node.host_network, &node.registrar.full_args),
    ));
    registrar.lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(if node.registrar.pre_stop.is_empty() {
                    vec![
                        "/bin/sh".to_owned(),
                        "-c".to_owned(),
                        format!("rm -rf /registration/{}-reg.sock /csi/csi.sock", def.name),
                    ]
                } else {
                    node.registrar.pre_stop.clone()
                }),
            }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    });
    if let Some(sc) = registrar.security_context.as_mut() {
        // Writes its socket into the kubelet's registration directory on SELinux hosts.
        sc.privileged = Some(true);
    }
    registrar.volume_mounts = Some(vec![
        mount("socket-dir", "/csi"),
        mount("registration-dir", "/registration"),
    ]);
    registrar
}

/// Runs every container of a node pod as root, as the table asks; only the driver stays
/// privileged.
fn run_as_root(containers: &mut [Container]) {
    for c in containers {
        if let Some(sc) = c.security_context.as_mut() {
            sc.run_as_user = Some(0);
            sc.run_as_non_root = Some(false);
            if c.name != names::DRIVER_CONTAINER {
                sc.privileged = Some(false);
            }
        }
    }
}

/// The node pod's volumes: the kubelet's directory, the driver's socket directory, the
/// kubelet's plugin registration directory, the metrics serving certificate on OpenShift, and
/// the table's, in the table's order.
fn node_volumes(def: &DriverDef, inputs: &Inputs) -> Vec<Volume> {
    let driver = &def.node.driver;
    let mut volumes = vec![
        host_path("kubelet-dir", "/var/lib/kubelet", "Directory"),
        host_path("socket-dir", &plugin_dir(def), "DirectoryOrCreate"),
        host_path(
            "registration-dir",
            "/var/lib/kubelet/plugins_registry/",
            "Directory",
        ),
    ];
    if driver.metrics.is_some() && inputs.topology.is_openshift() {
        volumes.push(metrics_serving_cert(names::node_metrics_serving_cert(def)));
    }
    volumes.extend(driver.volumes.iter().map(volume_from_def));
    sort_by_names(&mut volumes, &driver.volume_order, |v| &v.name);
    volumes
}

/// The driver's DaemonSet hooks, then the hashes of the Secrets and ConfigMaps the pods mount
/// (so that a rotation rolls them), on what the hooks left.
fn node_hooks(def: &DriverDef, inputs: &Inputs, daemon_set: &mut DaemonSet) {
    for hook in &def.hooks.daemon_set {
        hook(inputs, daemon_set);
    }
    if let Some(spec) = daemon_set.spec.as_mut() {
        hooks::annotate_input_hashes(
            def,
            &def.node.driver.volumes,
            &mut daemon_set.metadata,
            &mut spec.template,
            inputs,
        );
    }
}

/// Renames the kit's volumes of a pod (`socket-dir`, ...) and every mount of them, by the
/// kit's name.
fn rename_kit_volumes(
    containers: &mut [Container],
    volumes: &mut [Volume],
    renames: &BTreeMap<String, String>,
) {
    if renames.is_empty() {
        return;
    }
    for v in volumes.iter_mut() {
        if let Some(name) = renames.get(&v.name) {
            v.name.clone_from(name);
        }
    }
    for m in containers
        .iter_mut()
        .flat_map(|c| c.volume_mounts.iter_mut().flatten())
    {
        if let Some(name) = renames.get(&m.name) {
            m.name.clone_from(name);
        }
    }
}

/// Renames the kit's containers of a pod (`csi-liveness-probe`, ...), by the kit's name.
fn rename_kit_containers(containers: &mut [Container], renames: &BTreeMap<String, String>) {
    for c in containers {
        if let Some(name) = renames.get(&c.name) {
            c.name.clone_from(name);
        }
    }
}

/// A driver's [`ExtraDaemonSet`]: what its hook builds, under its name, in the operand
/// namespace with the operand label (whatever the hook set).
pub fn build_extra_daemon_set(
    def: &DriverDef,
    inputs: &Inputs,
    extra: &ExtraDaemonSet,
) -> DaemonSet {
    let mut daemon_set = (extra.build)(def, inputs);
    let own = names::ns_meta(def, extra.name);
    daemon_set.metadata.namespace = own.namespace;
    daemon_set.metadata.name = own.name;
    daemon_set
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(own.labels.unwrap_or_default());
    daemon_set
}
