//! The desired objects of a valid CSIDriverDeployment: ServiceAccounts, least-privilege RBAC
//! for exactly the sidecars in use, the CSIDriver, the controller Deployment (when there is a
//! controller template), the node DaemonSet and the StorageClasses. Pure; call
//! [`validate`](super::validate::validate) first.

use std::collections::BTreeMap;

use api::csidriver_v1alpha1::{
    CSIDriverDeployment, NodeUpdateStrategy, Provisioning, StorageClassTemplate,
    VolumeSnapshotClassTemplate,
};
use k8s_openapi::api::apps::v1::{DaemonSetUpdateStrategy, Deployment};
use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, PodTemplateSpec, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use serde_json::{Value, json};

use super::validate::split_socket;
use super::{OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL};
use csi_kit::def::{
    CSIDriverDef, ControllerDef, DriverContainerDef, DriverDef, Hooks, ImageDef, Images, NodeDef,
    SidecarDef, SidecarKind, StorageClassDef, VolumeSnapshotClassDef,
};
use csi_kit::inputs::{ExistingStorageClass, Inputs, ResolvedImages, Topology};
use csi_kit::render::Operand;
use csi_kit::{names, rbac, storage, workloads};

// The sidecar images: `containerImages` when it names one, else the process environment's
// variable (`PROVISIONER_IMAGE`, ..., as the platform drivers' operators read them, see
// `driver_def`'s images), else these.

/// external-provisioner, when `containerImages` names none.
pub const PROVISIONER_IMAGE: &str = "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0";
/// external-attacher, when `containerImages` names none.
pub const ATTACHER_IMAGE: &str = "registry.k8s.io/sig-storage/csi-attacher:v4.8.1";
/// external-resizer, when `containerImages` names none.
pub const RESIZER_IMAGE: &str = "registry.k8s.io/sig-storage/csi-resizer:v1.13.2";
/// csi-snapshotter, when `containerImages` names none.
pub const SNAPSHOTTER_IMAGE: &str = "registry.k8s.io/sig-storage/csi-snapshotter:v8.2.1";
/// node-driver-registrar, when `containerImages` names none.
pub const REGISTRAR_IMAGE: &str = "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0";
/// livenessprobe, when `containerImages` names none.
pub const LIVENESS_PROBE_IMAGE: &str = "registry.k8s.io/sig-storage/livenessprobe:v2.15.0";

/// The kit's kubelet directory, which the declared driver may move.
const KIT_KUBELET_DIR: &str = "/var/lib/kubelet";
/// The socket file name the kit's sidecars use.
const KIT_SOCKET_FILE: &str = "csi.sock";
/// Health ports on the pod network (the livenessprobe default and the next one).
const POD_NETWORK_PORTS: (u16, u16) = (9808, 9809);

/// What the build reads besides the CSIDriverDeployment.
#[derive(Clone, Debug)]
pub struct DeclaredInputs {
    /// Cluster layout: controller replicas and placement when the object does not say.
    pub topology: Topology,
    /// Whether the `security.openshift.io` SecurityContextConstraints API is served.
    pub scc_api: bool,
    /// StorageClasses that exist now, for the default-class rule.
    pub storage_classes: Vec<ExistingStorageClass>,
    /// Whether `volumesnapshotclasses.snapshot.storage.k8s.io` is served: the
    /// VolumeSnapshotClasses of the templates are built only then.
    pub snapshot_classes: bool,
    /// The process environment: the image variables (`PROVISIONER_IMAGE`, `ATTACHER_IMAGE`,
    /// `RESIZER_IMAGE`, `SNAPSHOTTER_IMAGE`, `NODE_DRIVER_REGISTRAR_IMAGE`,
    /// `LIVENESS_PROBE_IMAGE`) are read from it; unset or empty ones use the upstream images.
    pub env: BTreeMap<String, String>,
}

impl DeclaredInputs {
    /// Inputs for offline rendering: SCCs exactly on OpenShift topologies, no StorageClasses.
    pub fn offline(topology: Topology) -> Self {
        Self {
            topology,
            scc_api: topology.is_openshift(),
            storage_classes: Vec::new(),
            snapshot_classes: true,
            env: BTreeMap::new(),
        }
    }
}

fn image(env: &str, default: &str) -> ImageDef {
    ImageDef {
        env: env.to_owned(),
        default: default.to_owned(),
    }
}

/// The SCC the controller pod needs on OpenShift, from what its template asks for.
fn controller_scc(template: &PodTemplateSpec) -> &'static str {
    let Some(spec) = template.spec.as_ref() else {
        return "restricted-v2";
    };
    let privileged = spec.containers.iter().any(|c| {
        c.security_context.as_ref().is_some_and(|s| {
            s.privileged == Some(true)
                || s.allow_privilege_escalation == Some(true)
                || s.capabilities
                    .as_ref()
                    .is_some_and(|caps| caps.add.as_ref().is_some_and(|a| !a.is_empty()))
        })
    }) || spec.volumes.iter().flatten().any(|v| v.host_path.is_some());
    if privileged {
        "privileged"
    } else if spec.host_network == Some(true) {
        "hostnetwork-v2"
    } else {
        "restricted-v2"
    }
}

fn host_network(template: &PodTemplateSpec) -> bool {
    template
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// Health ports of the node pod: on the host network every driver needs its own pair, so it
/// is derived from the driver name (10400-10599); on the pod network the usual ones.
fn node_ports(driver_name: &str, host_network: bool) -> (u16, u16) {
    if !host_network {
        return POD_NETWORK_PORTS;
    }
    // FNV-1a: stable across releases and platforms.
    let hash = driver_name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let base = 10400 + 2 * u16::try_from(hash % 100).unwrap_or(0);
    (base, base + 1)
}

/// Whether external-provisioner runs in the node pods (`provisioning: Distributed`).
pub fn distributed(cd: &CSIDriverDeployment) -> bool {
    cd.spec.provisioning == Some(Provisioning::Distributed)
}

/// Whether csi-snapshotter runs in the node pods (`--node-deployment`): with Distributed
/// provisioning a volume lives on its node, and so do its snapshots, so each node snapshots its
/// own volumes (external-snapshotter's distributed snapshotting).
pub fn node_snapshotter(cd: &CSIDriverDeployment) -> bool {
    distributed(cd) && cd.spec.sidecars.as_ref().and_then(|s| s.snapshotter) == Some(true)
}

/// Whether external-provisioner publishes the driver's capacity (`csiDriver.storageCapacity`).
pub fn storage_capacity(cd: &CSIDriverDeployment) -> bool {
    cd.spec
        .csi_driver
        .as_ref()
        .and_then(|d| d.storage_capacity)
        .unwrap_or(false)
}

/// Whether volumes are attached (`spec.csiDriver.attachRequired`). Unset, it is true when there
/// is a controller pod (Kubernetes' own default) and false when there is none: with no controller
/// there is no external-attacher, and a CSIDriver that requires attaching would leave every pod
/// waiting for an attach that nobody does. Set true without a controller, validation refuses it.
pub fn attach_required(cd: &CSIDriverDeployment) -> bool {
    cd.spec
        .csi_driver
        .as_ref()
        .and_then(|d| d.attach_required)
        .unwrap_or(cd.spec.driver_controller_template.is_some())
}

/// The controller sidecars: the provisioner whenever there is a controller and provisioning is
/// central, the attacher when volumes are attached ([`attach_required`]), then the optional
/// ones (the snapshotter only with central provisioning, see [`node_snapshotter`]).
pub fn sidecars(cd: &CSIDriverDeployment) -> Vec<SidecarKind> {
    let spec = &cd.spec;
    if spec.driver_controller_template.is_none() {
        return Vec::new();
    }
    let mut kinds = Vec::new();
    if !distributed(cd) {
        kinds.push(SidecarKind::Provisioner);
    }
    if attach_required(cd) {
        kinds.push(SidecarKind::Attacher);
    }
    let optional = spec.sidecars.clone().unwrap_or_default();
    if optional.resizer == Some(true) {
        kinds.push(SidecarKind::Resizer);
    }
    if optional.snapshotter == Some(true) && !distributed(cd) {
        kinds.push(SidecarKind::Snapshotter);
    }
    kinds
}

fn storage_class_def(t: &StorageClassTemplate) -> StorageClassDef {
    StorageClassDef {
        name: t.metadata.name.clone().unwrap_or_default(),
        default: t.default == Some(true),
        parameters: t.parameters.clone(),
        // The API server's defaults, written out so a second pass compares equal.
        volume_binding_mode: t
            .volume_binding_mode
            .clone()
            .unwrap_or_else(|| "Immediate".to_owned()),
        allow_volume_expansion: t.allow_volume_expansion.unwrap_or(false),
        reclaim_policy: t
            .reclaim_policy
            .clone()
            .unwrap_or_else(|| "Delete".to_owned()),
    }
}

fn snapshot_class_def(t: &VolumeSnapshotClassTemplate) -> VolumeSnapshotClassDef {
    VolumeSnapshotClassDef {
        name: t.metadata.name.clone().unwrap_or_default(),
        default: t.default == Some(true),
        parameters: t.parameters.clone(),
        deletion_policy: t
            .deletion_policy
            .clone()
            .unwrap_or_else(|| "Delete".to_owned()),
    }
}

/// The CSIDriverDeployment as a driver table: names from the object (namespaced operands are
/// `<name>-controller`, `<name>-node`, ...; cluster-scoped ones start with the driver name),
/// the sidecars in use, the classes of its templates.
pub fn driver_def(cd: &CSIDriverDeployment) -> DriverDef {
    let spec = &cd.spec;
    let probe_args: Vec<String> = spec
        .probe_timeout_seconds
        .map(|t| format!("--probe-timeout={t}s"))
        .into_iter()
        .collect();
    let controller_template = spec.driver_controller_template.clone().unwrap_or_default();
    let node_host_network = host_network(&spec.driver_per_node_template);
    let (node_healthz, registrar_healthz) = node_ports(&spec.driver_name, node_host_network);
    let controller_host_network = host_network(&controller_template);
    let controller_healthz = if controller_host_network {
        // Clear of the node pod's pair, which may share the node.
        node_ports(&spec.driver_name, true).0 + 200
    } else {
        POD_NETWORK_PORTS.0
    };
    let driver = |healthz_port| DriverContainerDef {
        args: Vec::new(),
        env: Vec::new(),
        env_from: Vec::new(),
        healthz_port,
        metrics: None,
        privileged: false,
        capabilities: Vec::new(),
        allow_privilege_escalation: None,
        memory_limit: None,
        memory_request: None,
        cpu_request: None,
        liveness_probe: None,
        endpoint: None,
        mount_paths: Default::default(),
        volumes: Vec::new(),
        mount_order: Vec::new(),
        volume_order: Vec::new(),
    };
    let csi = spec.csi_driver.clone().unwrap_or_default();
    DriverDef {
        name: spec.driver_name.clone(),
        short_name: spec.driver_name.clone(),
        condition_prefix: String::new(),
        namespace: cd.metadata.namespace.clone().unwrap_or_default(),
        object_prefix: cd.metadata.name.clone().unwrap_or_default(),
        cluster_role_prefix: spec.driver_name.clone(),
        removable: true,
        adopt_from: Vec::new(),
        former_cluster_role_prefixes: Vec::new(),
        cluster_role_binding_names: Default::default(),
        // The declared controller keeps its own finalizer while PersistentVolumes exist.
        removal_blocked_by_volumes: false,
        cluster_proxy: true,
        copied_config_maps: Vec::new(),
        static_config_maps: Vec::new(),
        network_policies: Vec::new(),
        hashed_secrets: Vec::new(),
        config_maps: Vec::new(),
        extra_images: Default::default(),
        precondition: None,
        storage_class_generator: None,
        probe_example: Vec::new(),
        task_examples: BTreeMap::new(),
        // A declared driver runs where its CSIDriverDeployment is, in one cluster.
        hosted: None,
        // Its CRD says nothing of what the driver provisions: nothing is judged by it.
        volumes: None,
        images: Images {
            driver: image("", ""),
            provisioner: image("PROVISIONER_IMAGE", PROVISIONER_IMAGE),
            attacher: image("ATTACHER_IMAGE", ATTACHER_IMAGE),
            resizer: image("RESIZER_IMAGE", RESIZER_IMAGE),
            snapshotter: image("SNAPSHOTTER_IMAGE", SNAPSHOTTER_IMAGE),
            node_driver_registrar: image("NODE_DRIVER_REGISTRAR_IMAGE", REGISTRAR_IMAGE),
            liveness_probe: image("LIVENESS_PROBE_IMAGE", LIVENESS_PROBE_IMAGE),
            kube_rbac_proxy: image("", ""),
        },
        controller: ControllerDef {
            name: None,
            selector: Default::default(),
            host_network: controller_host_network,
            required_scc: controller_scc(&controller_template).to_owned(),
            privileged: false,
            extra_rules: Vec::new(),
            driver: driver(controller_healthz),
            sidecars: sidecars(cd)
                .into_iter()
                .map(|kind| SidecarDef {
                    kind,
                    extra_args: Vec::new(),
                    metrics: None,
                    address_env: false,
                    full_args: Vec::new(),
                    requests: Default::default(),
                })
                .collect(),
            liveness_probe_args: probe_args.clone(),
            liveness_probe_full_args: Vec::new(),
            liveness_probe_requests: Default::default(),
            sidecar_socket_dir: None,
            service_account_name: None,
            placement: Default::default(),
            container_names: Default::default(),
            explicitly_unprivileged: false,
            pod_labels: Default::default(),
            safe_to_evict_local_volumes: Vec::new(),
            container_order: Vec::new(),
            memory_limits: Default::default(),
            deployment_annotations: Default::default(),
            privileged_binding_name: None,
            metrics_service: Default::default(),
            roles: Vec::new(),
            shared_roles: Vec::new(),
        },
        node: NodeDef {
            name: None,
            selector: Default::default(),
            service_account_name: None,
            host_network: node_host_network,
            extra_rules: Vec::new(),
            driver: driver(node_healthz),
            registrar_healthz_port: registrar_healthz,
            inject_proxy: true,
            dns_policy: None,
            liveness_probe_args: probe_args,
            container_order: Vec::new(),
            pod_labels: Default::default(),
            node_selector: None,
            volume_names: Default::default(),
            container_names: Default::default(),
            registrar: Default::default(),
            liveness_probe: Default::default(),
            run_as_root: false,
            roles: Vec::new(),
            shared_roles: Vec::new(),
        },
        csi_driver: CSIDriverDef {
            attach_required: attach_required(cd),
            pod_info_on_mount: csi.pod_info_on_mount.unwrap_or(false),
            fs_group_policy: csi
                .fs_group_policy
                .unwrap_or_else(|| "ReadWriteOnceWithFSType".to_owned()),
            volume_lifecycle_modes: csi
                .volume_lifecycle_modes
                .unwrap_or_else(|| vec!["Persistent".to_owned()]),
            requires_republish: csi.requires_republish.unwrap_or(false),
            storage_capacity: csi.storage_capacity.unwrap_or(false),
            se_linux_mount: csi.se_linux_mount.unwrap_or(false),
            token_request_audiences: csi
                .token_requests
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.audience)
                .collect(),
            ephemeral_volume_profile: None,
        },
        storage_classes: spec
            .storage_class_templates
            .iter()
            .map(storage_class_def)
            .collect(),
        volume_snapshot_classes: spec
            .volume_snapshot_class_templates
            .iter()
            .map(snapshot_class_def)
            .collect(),
        credentials: None,
        node_credentials: None,
        hooks: Hooks::default(),
    }
}

fn kit_inputs(cd: &CSIDriverDeployment, def: &DriverDef, inputs: &DeclaredInputs) -> Inputs {
    let mut kit = Inputs::new(def, inputs.topology, &BTreeMap::new());
    let images = cd.spec.container_images.clone().unwrap_or_default();
    let set = |i: &Option<String>| i.clone().filter(|i| !i.trim().is_empty());
    // The object's choice, else the environment's, else the upstream image.
    let pick = |chosen: Option<String>, image: &ImageDef| {
        chosen
            .or_else(|| {
                inputs
                    .env
                    .get(&image.env)
                    .filter(|i| !i.trim().is_empty())
                    .cloned()
            })
            .unwrap_or_else(|| image.default.clone())
    };
    let i = &def.images;
    kit.images = ResolvedImages {
        driver: String::new(),
        provisioner: pick(set(&images.provisioner_image), &i.provisioner),
        attacher: pick(set(&images.attacher_image), &i.attacher),
        resizer: pick(set(&images.resizer_image), &i.resizer),
        snapshotter: pick(set(&images.snapshotter_image), &i.snapshotter),
        node_driver_registrar: pick(
            set(&images.driver_registrar_image),
            &i.node_driver_registrar,
        ),
        liveness_probe: pick(set(&images.liveness_probe_image), &i.liveness_probe),
        kube_rbac_proxy: String::new(),
    };
    kit.storage_classes = inputs.storage_classes.clone();
    kit.crds.volume_snapshot_class = inputs.snapshot_classes;
    kit
}

/// Labels and owner reference every operand of `cd` carries.
fn own(cd: &CSIDriverDeployment, meta: &mut ObjectMeta) {
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(
        OWNER_NAMESPACE_LABEL.to_owned(),
        cd.metadata.namespace.clone().unwrap_or_default(),
    );
    labels.insert(
        OWNER_NAME_LABEL.to_owned(),
        cd.metadata.name.clone().unwrap_or_default(),
    );
    // Namespaced operands are garbage-collected with the object; cluster-scoped ones go
    // through the finalizer. Offline renders have no UID, and so no reference.
    if meta.namespace.is_some()
        && let Some(reference) = cd.controller_owner_ref(&())
    {
        meta.owner_references = Some(vec![OwnerReference {
            block_owner_deletion: Some(true),
            ..reference
        }]);
    }
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(groups.iter().map(|s| (*s).to_owned()).collect()),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

fn binding(def: &DriverDef, name: String, role: &str, sa: String) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: names::meta(def, name, None),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: sa,
            namespace: Some(def.namespace.clone()),
            ..Subject::default()
        }]),
    }
}

/// What the upstream sidecars (the images a CSIDriverDeployment runs unless it names others)
/// call beyond the kit's shared roles, which follow OpenShift's releases of them, per each
/// sidecar's upstream `deploy/kubernetes/rbac.yaml`: external-provisioner watches (and updates)
/// VolumeSnapshots, csi-snapshotter handles VolumeGroupSnapshotContents (without these it
/// turns group snapshots off).
fn upstream_rules(kind: SidecarKind) -> Vec<PolicyRule> {
    const READ: &[&str] = &["get", "list", "watch"];
    match kind {
        SidecarKind::Provisioner => vec![rule(
            &["snapshot.storage.k8s.io"],
            &["volumesnapshots"],
            &["get", "list", "watch", "update"],
        )],
        SidecarKind::Snapshotter => vec![
            rule(
                &["groupsnapshot.storage.k8s.io"],
                &["volumegroupsnapshotclasses"],
                READ,
            ),
            rule(
                &["groupsnapshot.storage.k8s.io"],
                &["volumegroupsnapshotcontents"],
                &["get", "list", "watch", "update", "patch"],
            ),
            rule(
                &["groupsnapshot.storage.k8s.io"],
                &["volumegroupsnapshotcontents/status"],
                &["update", "patch"],
            ),
        ],
        SidecarKind::Attacher | SidecarKind::Resizer => Vec::new(),
    }
}

/// One ClusterRole per sidecar in use, with exactly what that sidecar calls (the rules of the
/// kit's shared sidecar roles, and [`upstream_rules`]), and the SCC grants on OpenShift: `privileged` for the node
/// ServiceAccount, the controller's SCC when its pod needs more than `restricted-v2`.
fn cluster_rbac(
    def: &DriverDef,
    inputs: &DeclaredInputs,
    distributed: bool,
    node_snapshotter: bool,
) -> Vec<(ClusterRole, ClusterRoleBinding)> {
    let shared = rbac::build_shared_sidecar_cluster_roles();
    let mut out = Vec::new();
    // (sidecar, the ServiceAccount of the pod it runs in)
    let mut in_use: Vec<(SidecarKind, String)> = def
        .controller
        .sidecars
        .iter()
        .map(|s| (s.kind, names::controller_sa(def)))
        .collect();
    if distributed {
        in_use.insert(0, (SidecarKind::Provisioner, names::node_sa(def)));
    }
    if node_snapshotter {
        in_use.push((SidecarKind::Snapshotter, names::node_sa(def)));
    }
    for (kind, sa) in in_use {
        let mut rules: Vec<PolicyRule> = Vec::new();
        for (_, shared_name) in rbac::sidecar_role_refs(kind) {
            if let Some(role) = shared
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(shared_name))
            {
                rules.extend(role.rules.clone().unwrap_or_default());
            }
        }
        rules.extend(upstream_rules(kind));
        let short = kind.short_name();
        let role_name = format!("{}-csi-{short}-role", def.cluster_role_prefix);
        out.push((
            ClusterRole {
                metadata: names::meta(def, role_name.clone(), None),
                rules: Some(rules),
                ..ClusterRole::default()
            },
            binding(
                def,
                format!("{}-csi-{short}-binding", def.cluster_role_prefix),
                &role_name,
                sa,
            ),
        ));
    }
    if inputs.scc_api {
        let mut grants = vec![("node", "privileged".to_owned(), names::node_sa(def))];
        if !def.controller.sidecars.is_empty() && def.controller.required_scc != "restricted-v2" {
            grants.push((
                "controller",
                def.controller.required_scc.clone(),
                names::controller_sa(def),
            ));
        }
        for (pod, scc, sa) in grants {
            let role_name = format!("{}-{pod}-scc-role", def.cluster_role_prefix);
            out.push((
                ClusterRole {
                    metadata: names::meta(def, role_name.clone(), None),
                    rules: Some(vec![PolicyRule {
                        resource_names: Some(vec![scc]),
                        ..rule(
                            &["security.openshift.io"],
                            &["securitycontextconstraints"],
                            &["use"],
                        )
                    }]),
                    ..ClusterRole::default()
                },
                binding(
                    def,
                    format!("{}-{pod}-scc-binding", def.cluster_role_prefix),
                    &role_name,
                    sa,
                ),
            ));
        }
    }
    out
}

/// The CSIDriver: the object's `csiDriver` spec as given (Kubernetes' defaults otherwise),
/// with `attachRequired` written out, because it also decides whether the attacher runs.
fn build_csi_driver(cd: &CSIDriverDeployment, def: &DriverDef) -> CSIDriver {
    let mut spec = cd.spec.csi_driver.clone().unwrap_or_default();
    spec.attach_required = Some(def.csi_driver.attach_required);
    CSIDriver {
        metadata: names::meta(def, def.name.clone(), None),
        spec,
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

fn host_path(name: &str, path: String, type_: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path,
            type_: Some(type_.to_owned()),
        }),
        ..Volume::default()
    }
}

/// Points an argument of an injected container at the declared socket file and kubelet
/// directory (the kit builds them for `csi.sock` under `/var/lib/kubelet`).
fn retarget(arg: &str, socket_file: &str, kubelet_dir: &str) -> String {
    let arg = match arg.strip_suffix(KIT_SOCKET_FILE) {
        Some(stem) if arg.contains("--csi-address=") || arg.contains("-registration-path=") => {
            format!("{stem}{socket_file}")
        }
        _ => arg.to_owned(),
    };
    arg.replace(
        &format!("={KIT_KUBELET_DIR}/"),
        &format!("={}/", kubelet_dir.trim_end_matches('/')),
    )
}

fn retarget_container(c: &mut Container, socket_file: &str, kubelet_dir: &str) {
    for arg in c.args.iter_mut().flatten() {
        *arg = retarget(arg, socket_file, kubelet_dir);
    }
}

/// Puts the user's pod into the kit's: the user's first container becomes the driver (with
/// the socket volume at the socket's directory, the kit's health port and probe unless it has
/// its own), the user's other containers and volumes follow the kit's, and the user's pod
/// settings win where set (placement falls back to the kit's).
fn adopt(
    kit: &mut PodTemplateSpec,
    user: &PodTemplateSpec,
    driver_mounts: Vec<VolumeMount>,
    probe_period: Option<i32>,
) {
    let kit_spec = kit.spec.take().unwrap_or_default();
    let mut spec = user.spec.clone().unwrap_or_default();
    let mut user_containers = std::mem::take(&mut spec.containers).into_iter();
    let mut kit_containers = kit_spec.containers.into_iter();
    let kit_driver = kit_containers.next().unwrap_or_default();
    let mut driver = user_containers.next().unwrap_or_default();

    driver
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .extend(driver_mounts);
    let ports = driver.ports.get_or_insert_with(Vec::new);
    for port in kit_driver.ports.into_iter().flatten() {
        if !ports
            .iter()
            .any(|p| p.name == port.name || p.container_port == port.container_port)
        {
            ports.push(port);
        }
    }
    if driver.liveness_probe.is_none() {
        driver.liveness_probe = kit_driver.liveness_probe.map(|mut probe| {
            if let Some(period) = probe_period {
                probe.period_seconds = Some(period);
            }
            probe
        });
    }
    if driver.termination_message_policy.is_none() {
        driver.termination_message_policy = kit_driver.termination_message_policy;
    }

    let mut containers = vec![driver];
    containers.extend(user_containers);
    containers.extend(kit_containers);
    let mut volumes = kit_spec.volumes.unwrap_or_default();
    volumes.extend(spec.volumes.take().unwrap_or_default());

    spec.containers = containers;
    spec.volumes = Some(volumes);
    spec.service_account_name = kit_spec.service_account_name;
    spec.service_account = None;
    spec.node_selector = spec.node_selector.or(kit_spec.node_selector);
    spec.tolerations = spec.tolerations.or(kit_spec.tolerations);
    spec.affinity = spec.affinity.or(kit_spec.affinity);
    spec.priority_class_name = spec.priority_class_name.or(kit_spec.priority_class_name);
    kit.spec = Some(spec);

    let meta = kit.metadata.get_or_insert_with(ObjectMeta::default);
    let user_meta = user.metadata.clone().unwrap_or_default();
    for (mine, theirs) in [
        (&mut meta.labels, user_meta.labels),
        (&mut meta.annotations, user_meta.annotations),
    ] {
        // The kit's entries (the `app` selector label, the SCC annotation) win.
        let mut merged = theirs.unwrap_or_default();
        merged.extend(mine.take().unwrap_or_default());
        *mine = Some(merged);
    }
}

fn build_deployment(
    cd: &CSIDriverDeployment,
    def: &DriverDef,
    kit: &Inputs,
    template: &PodTemplateSpec,
    socket: (&str, &str),
) -> Deployment {
    let mut deployment = workloads::build_controller_deployment(def, kit);
    // The kit's proxy injection names its own driver container; a declared driver sets its
    // environment in its template.
    deployment.metadata.annotations = None;
    if let Some(spec) = deployment.spec.as_mut() {
        if let Some(replicas) = cd.spec.controller_replicas {
            spec.replicas = Some(replicas);
        }
        if let Some(pod) = spec.template.spec.as_mut() {
            for c in pod.containers.iter_mut().skip(1) {
                retarget_container(c, socket.1, KIT_KUBELET_DIR);
                if storage_capacity(cd) && c.name == SidecarKind::Provisioner.container_name() {
                    enable_capacity(cd, c);
                }
            }
        }
        adopt(
            &mut spec.template,
            template,
            vec![mount("socket-dir", socket.0)],
            cd.spec.probe_period_seconds,
        );
    }
    deployment
}

/// external-provisioner in a node pod (distributed provisioning): it provisions only the
/// claims whose pod was scheduled to its node (`volume.kubernetes.io/selected-node`), so it
/// needs no leader election, the node's name, and `--strict-topology` so the driver is asked
/// for exactly that node.
fn node_provisioner(image: &str, kit: &Inputs) -> Container {
    let mut c = workloads::operand_container(
        &SidecarKind::Provisioner.container_name(),
        image,
        vec![
            format!("--csi-address=/csi/{KIT_SOCKET_FILE}"),
            "--node-deployment=true".to_owned(),
            "--strict-topology=true".to_owned(),
            "--immediate-topology=false".to_owned(),
            "--feature-gates=Topology=true".to_owned(),
            "--extra-create-metadata=true".to_owned(),
            format!("--v={}", kit.verbosity()),
        ],
    );
    c.env = Some(vec![csi_kit::workloads::field_env(
        "NODE_NAME",
        "spec.nodeName",
    )]);
    c.volume_mounts = Some(vec![mount("socket-dir", "/csi")]);
    c
}

/// csi-snapshotter in a node pod (distributed snapshotting): it handles only the
/// VolumeSnapshotContents the snapshot-controller labels with its node
/// (`snapshot.storage.kubernetes.io/managed-by`, set when the controller runs with
/// `--enable-distributed-snapshotting`), so it needs no leader election and the node's name.
fn node_snapshotter_container(kit: &Inputs) -> Container {
    let mut c = workloads::operand_container(
        &SidecarKind::Snapshotter.container_name(),
        &kit.images.snapshotter,
        vec![
            format!("--csi-address=/csi/{KIT_SOCKET_FILE}"),
            "--node-deployment=true".to_owned(),
            format!("--v={}", kit.verbosity()),
        ],
    );
    c.env = Some(vec![csi_kit::workloads::field_env(
        "NODE_NAME",
        "spec.nodeName",
    )]);
    c.volume_mounts = Some(vec![mount("socket-dir", "/csi")]);
    c
}

fn build_daemon_set(
    cd: &CSIDriverDeployment,
    def: &DriverDef,
    kit: &Inputs,
    socket: (&str, &str),
) -> k8s_openapi::api::apps::v1::DaemonSet {
    let kubelet_dir = cd.spec.kubelet_root_dir().trim_end_matches('/').to_owned();
    let mut daemon_set = workloads::build_node_daemon_set(def, kit);
    daemon_set.metadata.annotations = None;
    if let Some(spec) = daemon_set.spec.as_mut() {
        if cd.spec.node_update_strategy == Some(NodeUpdateStrategy::OnDelete) {
            spec.update_strategy = Some(DaemonSetUpdateStrategy {
                type_: Some("OnDelete".to_owned()),
                rolling_update: None,
            });
        }
        if let Some(pod) = spec.template.spec.as_mut() {
            if distributed(cd) {
                // After the kit's driver container, which `adopt` replaces by the user's.
                let at = pod.containers.len().min(1);
                let mut provisioner = node_provisioner(&kit.images.provisioner, kit);
                if storage_capacity(cd) {
                    enable_capacity(cd, &mut provisioner);
                }
                pod.containers.insert(at, provisioner);
                if node_snapshotter(cd) {
                    pod.containers
                        .insert(at + 1, node_snapshotter_container(kit));
                }
            }
            for c in pod.containers.iter_mut().skip(1) {
                retarget_container(c, socket.1, &kubelet_dir);
                let command = c
                    .lifecycle
                    .as_mut()
                    .and_then(|l| l.pre_stop.as_mut())
                    .and_then(|h| h.exec.as_mut())
                    .and_then(|e| e.command.as_mut());
                for part in command.into_iter().flatten() {
                    *part = part.replace(
                        &format!("/csi/{KIT_SOCKET_FILE}"),
                        &format!("/csi/{}", socket.1),
                    );
                }
            }
            let plugin_dir = format!("{kubelet_dir}/plugins/{}/", def.name);
            for volume in pod.volumes.iter_mut().flatten() {
                *volume = match volume.name.as_str() {
                    "kubelet-dir" => host_path("kubelet-dir", kubelet_dir.clone(), "Directory"),
                    "socket-dir" => {
                        host_path("socket-dir", plugin_dir.clone(), "DirectoryOrCreate")
                    }
                    "registration-dir" => host_path(
                        "registration-dir",
                        format!("{kubelet_dir}/plugins_registry/"),
                        "Directory",
                    ),
                    _ => continue,
                };
            }
        }
        let kubelet_mount = VolumeMount {
            mount_propagation: Some("Bidirectional".to_owned()),
            ..mount("kubelet-dir", &kubelet_dir)
        };
        adopt(
            &mut spec.template,
            &cd.spec.driver_per_node_template,
            vec![mount("socket-dir", socket.0), kubelet_mount],
            cd.spec.probe_period_seconds,
        );
        // Bidirectional propagation works only in a privileged container.
        if let Some(driver) = spec
            .template
            .spec
            .as_mut()
            .and_then(|p| p.containers.first_mut())
        {
            driver
                .security_context
                .get_or_insert_with(SecurityContext::default)
                .privileged = Some(true);
        }
    }
    daemon_set
}

fn build_storage_classes(
    cd: &CSIDriverDeployment,
    def: &DriverDef,
    kit: &Inputs,
) -> Vec<StorageClass> {
    let mut classes = storage::build_storage_classes(def, kit);
    for (class, template) in classes.iter_mut().zip(&cd.spec.storage_class_templates) {
        let mut labels = template.metadata.labels.clone().unwrap_or_default();
        labels.extend(class.metadata.labels.take().unwrap_or_default());
        class.metadata.labels = Some(labels);
        let mut annotations = template.metadata.annotations.clone().unwrap_or_default();
        if template.default != Some(true) {
            // Only the rule decides the default-class annotation.
            annotations.remove(names::DEFAULT_STORAGE_CLASS_ANNOTATION);
        }
        annotations.extend(class.metadata.annotations.take().unwrap_or_default());
        class.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
        class.mount_options =
            (!template.mount_options.is_empty()).then(|| template.mount_options.clone());
        class.allowed_topologies =
            (!template.allowed_topologies.is_empty()).then(|| template.allowed_topologies.clone());
    }
    classes
}

/// Every object of a valid CSIDriverDeployment, in apply order: identities and RBAC, the
/// CSIDriver, the workloads, then the StorageClasses.
pub fn build_operands(cd: &CSIDriverDeployment, inputs: &DeclaredInputs) -> Vec<Operand> {
    let def = driver_def(cd);
    let kit = kit_inputs(cd, &def, inputs);
    let socket = split_socket(&cd.spec.driver_socket).unwrap_or(("/csi", KIT_SOCKET_FILE));
    let has_controller = cd.spec.driver_controller_template.is_some();
    let controller_sa = names::controller_sa(&def);

    let mut out = Vec::new();
    out.extend(
        rbac::build_service_accounts(&def)
            .into_iter()
            .filter(|sa| has_controller || sa.metadata.name.as_ref() != Some(&controller_sa))
            .map(Operand::ServiceAccount),
    );
    let (roles, bindings): (Vec<_>, Vec<_>) =
        cluster_rbac(&def, inputs, distributed(cd), node_snapshotter(cd))
            .into_iter()
            .unzip();
    out.extend(roles.into_iter().map(Operand::ClusterRole));
    out.extend(bindings.into_iter().map(Operand::ClusterRoleBinding));
    if has_controller {
        out.extend(rbac::build_roles(&def, &kit).into_iter().map(Operand::Role));
        out.extend(
            rbac::build_role_bindings(&def, &kit)
                .into_iter()
                .map(Operand::RoleBinding),
        );
    }
    if let Some((role, binding)) = capacity_rbac(cd, &def) {
        out.push(Operand::Role(role));
        out.push(Operand::RoleBinding(binding));
    }
    out.push(Operand::CSIDriver(build_csi_driver(cd, &def)));
    if let Some(template) = &cd.spec.driver_controller_template {
        out.push(Operand::PodDisruptionBudget(
            workloads::build_pod_disruption_budget(&def),
        ));
        out.push(Operand::Deployment(build_deployment(
            cd, &def, &kit, template, socket,
        )));
    }
    out.push(Operand::DaemonSet(build_daemon_set(cd, &def, &kit, socket)));
    out.extend(
        build_storage_classes(cd, &def, &kit)
            .into_iter()
            .map(Operand::StorageClass),
    );
    out.extend(
        build_snapshot_classes(cd, &def, &kit)
            .into_iter()
            .map(Operand::Dynamic),
    );
    for operand in &mut out {
        if let Some(meta) = metadata_mut(operand) {
            own(cd, meta);
        } else if let Operand::Dynamic(value) = operand {
            own_value(cd, value);
        }
    }
    out
}

/// The VolumeSnapshotClasses of the templates (none until their CRD is served), with the
/// templates' labels and annotations; only `default` decides the default-class annotation.
fn build_snapshot_classes(cd: &CSIDriverDeployment, def: &DriverDef, kit: &Inputs) -> Vec<Value> {
    let mut classes = storage::build_volume_snapshot_classes(def, kit);
    for (class, template) in classes
        .iter_mut()
        .zip(&cd.spec.volume_snapshot_class_templates)
    {
        let meta = &mut class["metadata"];
        let mut labels = template.metadata.labels.clone().unwrap_or_default();
        labels.extend(string_map(&meta["labels"]));
        meta["labels"] = json!(labels);
        let mut annotations = template.metadata.annotations.clone().unwrap_or_default();
        if template.default != Some(true) {
            annotations.remove(names::DEFAULT_SNAPSHOT_CLASS_ANNOTATION);
        }
        annotations.extend(string_map(&meta["annotations"]));
        if annotations.is_empty() {
            if let Some(meta) = meta.as_object_mut() {
                meta.remove("annotations");
            }
        } else {
            meta["annotations"] = json!(annotations);
        }
    }
    classes
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The owner labels on an operand without a Rust type (all of them are cluster-scoped).
fn own_value(cd: &CSIDriverDeployment, value: &mut Value) {
    let mut labels = string_map(&value["metadata"]["labels"]);
    labels.insert(
        OWNER_NAMESPACE_LABEL.to_owned(),
        cd.metadata.namespace.clone().unwrap_or_default(),
    );
    labels.insert(
        OWNER_NAME_LABEL.to_owned(),
        cd.metadata.name.clone().unwrap_or_default(),
    );
    value["metadata"]["labels"] = json!(labels);
}

/// The name of the Role that lets external-provisioner publish capacity.
pub fn capacity_role_name(def: &DriverDef) -> String {
    format!("{}-csi-provisioner-capacity", def.object_prefix)
}

/// How many owners up from its pod external-provisioner finds the owner of its
/// CSIStorageCapacity objects: the DaemonSet (1) in the node pods, the Deployment (pod, then
/// ReplicaSet, then Deployment: 2) in the controller pod.
fn capacity_owner_level(cd: &CSIDriverDeployment) -> u8 {
    if distributed(cd) { 1 } else { 2 }
}

/// The Role (and its binding to the ServiceAccount of the pod the provisioner runs in) that
/// capacity tracking needs, as upstream external-provisioner's RBAC has it: its
/// CSIStorageCapacity objects in the driver namespace, and reading its own pod (and the
/// ReplicaSet above it in the controller pod) to find their owner.
fn capacity_rbac(cd: &CSIDriverDeployment, def: &DriverDef) -> Option<(Role, RoleBinding)> {
    let provisioner = distributed(cd) || cd.spec.driver_controller_template.is_some();
    if !storage_capacity(cd) || !provisioner {
        return None;
    }
    let mut rules = vec![
        rule(
            &["storage.k8s.io"],
            &["csistoragecapacities"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        rule(&[""], &["pods"], &["get"]),
    ];
    if !distributed(cd) {
        rules.push(rule(&["apps"], &["replicasets"], &["get"]));
    }
    let sa = if distributed(cd) {
        names::node_sa(def)
    } else {
        names::controller_sa(def)
    };
    let name = capacity_role_name(def);
    Some((
        Role {
            metadata: names::ns_meta(def, name.clone()),
            rules: Some(rules),
        },
        RoleBinding {
            metadata: names::ns_meta(def, name.clone()),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "Role".to_owned(),
                name,
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: sa,
                namespace: Some(def.namespace.clone()),
                ..Subject::default()
            }]),
        },
    ))
}

/// Turns capacity tracking on in an external-provisioner container: `--enable-capacity`, the
/// owner level, and the pod's name and namespace, from which it finds the owner.
fn enable_capacity(cd: &CSIDriverDeployment, c: &mut Container) {
    c.args.get_or_insert_with(Vec::new).extend([
        "--enable-capacity".to_owned(),
        format!("--capacity-ownerref-level={}", capacity_owner_level(cd)),
    ]);
    c.env.get_or_insert_with(Vec::new).extend([
        workloads::field_env("NAMESPACE", "metadata.namespace"),
        workloads::field_env("POD_NAME", "metadata.name"),
    ]);
}

fn metadata_mut(operand: &mut Operand) -> Option<&mut ObjectMeta> {
    Some(match operand {
        Operand::ServiceAccount(o) => &mut o.metadata,
        Operand::ClusterRole(o) => &mut o.metadata,
        Operand::ClusterRoleBinding(o) => &mut o.metadata,
        Operand::Role(o) => &mut o.metadata,
        Operand::RoleBinding(o) => &mut o.metadata,
        Operand::ConfigMap(o) => &mut o.metadata,
        Operand::Secret(o) => &mut o.metadata,
        Operand::NetworkPolicy(o) => &mut o.metadata,
        Operand::CSIDriver(o) => &mut o.metadata,
        Operand::Service(o) => &mut o.metadata,
        Operand::PodDisruptionBudget(o) => &mut o.metadata,
        Operand::Deployment(o) => &mut o.metadata,
        Operand::DaemonSet(o) => &mut o.metadata,
        Operand::StorageClass(o) => &mut o.metadata,
        Operand::Dynamic(_) => return None,
    })
}
