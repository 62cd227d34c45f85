//! `DriverDef`: a CSI driver described as data (names, images, containers, sidecars, CSIDriver
//! fields, StorageClasses, credentials), plus the few hooks that data cannot express.
//!
//! A driver module in the `drivers` crate is one `DriverDef` value (usually parsed from an
//! embedded YAML table) and a handful of hook functions. Everything the operand builders emit is
//! derived from this value and from [`Inputs`].

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::{Deserialize, Serialize};

use crate::inputs::Inputs;

/// The namespace every OpenShift CSI driver operand runs in.
pub const DEFAULT_NAMESPACE: &str = "openshift-cluster-csi-drivers";

fn default_namespace() -> String {
    DEFAULT_NAMESPACE.to_owned()
}

fn default_true() -> bool {
    true
}

/// A CSI driver as data. Field names are camelCase so a table can be written in YAML.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriverDef {
    /// The CSI driver name, also the name of the ClusterCSIDriver and CSIDriver objects
    /// (e.g. `pd.csi.storage.gke.io`).
    pub name: String,
    /// The short name used on the command line (e.g. `gcp-pd`).
    pub short_name: String,
    /// The prefix of condition types and controller names (e.g. `GCPPD`).
    pub condition_prefix: String,
    /// The namespace of namespaced operands.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// The prefix of namespaced operand names (e.g. `gcp-pd-csi-driver` gives
    /// `gcp-pd-csi-driver-controller`).
    pub object_prefix: String,
    /// The prefix of cluster-scoped RBAC names (e.g. `gcp-pd` gives `gcp-pd-privileged-role`).
    pub cluster_role_prefix: String,
    /// Whether the operator supports `managementState: Removed` (deleting the operands).
    #[serde(default)]
    pub removable: bool,
    /// Field managers of the operator this one replaces on a cluster (OpenShift's Go operator
    /// writes its operands with Update under its binary's name, e.g.
    /// `gcp-pd-csi-driver-operator`): before the first apply over an object they wrote, their
    /// fields become ours, so whatever only they set is removed rather than merged next to ours
    /// (see `opkit::apply`); and once ours are in place, what they made under names ours does
    /// not use is deleted (see `operator::leftovers`).
    #[serde(default)]
    pub adopt_from: Vec<String>,
    /// Name prefixes of the replaced operator's cluster-scoped RBAC besides
    /// `clusterRolePrefix`, where its names do not start with ours (e.g. IBM VPC Block's
    /// `vpc-block-...`): its leftovers there are deleted too (see `operator::leftovers`).
    #[serde(default)]
    pub former_cluster_role_prefixes: Vec<String>,
    /// ClusterRoleBindings of the kit that the replaced operator names otherwise: the kit's
    /// name (e.g. `ibm-vpc-block-csi-main-attacher-binding`) to the name used instead
    /// (`vpc-block-main-attacher-binding`), prefixed as a [`RoleDef`]'s. A binding's name is
    /// all that differs; taking over then updates the replaced operator's binding in place.
    #[serde(default)]
    pub cluster_role_binding_names: BTreeMap<String, String>,
    /// Whether a removal waits until no PersistentVolume of the driver is Bound (the operator
    /// then watches PersistentVolumes; see `operator::removal`).
    #[serde(default)]
    pub removal_blocked_by_volumes: bool,
    /// Whether the cluster-wide proxy and trusted CA bundle reach the driver containers (the
    /// `config.openshift.io/inject-proxy*` annotations on the workloads and the
    /// `<objectPrefix>-trusted-ca-bundle` ConfigMap). A driver that makes no HTTPS calls (SMB,
    /// which talks to file servers) does without, as OpenShift runs it.
    #[serde(default = "default_true")]
    pub cluster_proxy: bool,
    /// The images of the driver and every sidecar.
    pub images: Images,
    /// Further images the driver's hooks use (e.g. vSphere's syncer, Manila's NFS node
    /// plugin), by role; resolved into [`Inputs::extra_images`].
    #[serde(default)]
    pub extra_images: BTreeMap<String, ImageDef>,
    /// The controller Deployment.
    pub controller: ControllerDef,
    /// The node DaemonSet.
    pub node: NodeDef,
    /// The CSIDriver object.
    pub csi_driver: CSIDriverDef,
    /// StorageClasses the operator creates (at most one should be the default).
    #[serde(default)]
    pub storage_classes: Vec<StorageClassDef>,
    /// VolumeSnapshotClasses the operator creates when their CRD exists.
    #[serde(default)]
    pub volume_snapshot_classes: Vec<VolumeSnapshotClassDef>,
    /// Cloud credentials of the controller, if the driver needs any.
    #[serde(default)]
    pub credentials: Option<CredentialsDef>,
    /// Cloud credentials of the node plugin, where it has its own (AWS EFS: describing mount
    /// targets across availability zones): its CredentialsRequest is reported by the
    /// `<conditionPrefix>NodeCredentialsRequestController`, and the driver's node hook decides
    /// how the pods use the Secret. The kit does not watch that Secret: list it in
    /// `hashedSecrets` so that a rotation rolls the node pods.
    #[serde(default)]
    pub node_credentials: Option<CredentialsDef>,
    /// ConfigMaps of other namespaces that the operator copies into the operand namespace
    /// while they exist, so pods can mount them (e.g. a cloud's custom CA bundle).
    /// Hooks see their data in [`Inputs::copied_config_maps`].
    #[serde(default)]
    pub copied_config_maps: Vec<CopiedConfigMapDef>,
    /// ConfigMaps of the operand namespace with fixed data (a driver's settings, which its
    /// containers read through `envFrom`, see [`DriverContainerDef::env_from`]), applied as
    /// they are. Their data changes only with the table, that is with a release, whose images
    /// roll the pods; no hash of theirs goes on the pod templates (as OpenShift's operators do
    /// not put one).
    #[serde(default)]
    pub static_config_maps: Vec<StaticConfigMapDef>,
    /// NetworkPolicies of the operand namespace the operator applies (e.g. letting monitoring
    /// reach a node plugin's metrics port where the namespace's policies deny ingress).
    #[serde(default)]
    pub network_policies: Vec<NetworkPolicyDef>,
    /// Secrets of the operand namespace besides the credentials that pods mount and that change
    /// while they run (e.g. one the driver's own code derives): watched by name, their data
    /// hashes roll the pods that mount them.
    #[serde(default)]
    pub hashed_secrets: Vec<String>,
    /// ConfigMaps of the operand namespace that the operator derives from a ConfigMap it
    /// observes (e.g. the driver's cloud config from the cluster's); see [`crate::derived`].
    #[serde(default)]
    pub config_maps: Vec<crate::derived::DerivedConfigMapDef>,
    /// Behaviour that data cannot express. Not part of the table; set by the driver module.
    #[serde(skip)]
    pub hooks: Hooks,
    /// Whether the driver can run with these inputs; an error (why not, and what would fix it)
    /// makes the operator report `<prefix>DriverControllerServiceControllerDisabled` and apply
    /// nothing. Set by the driver module, not part of the table.
    #[serde(skip)]
    pub precondition: Option<Precondition>,
    /// StorageClasses computed from the inputs (e.g. one per share type the cloud offers),
    /// built after the table's. Set by the driver module, not part of the table.
    #[serde(skip)]
    pub storage_class_generator: Option<StorageClassGenerator>,
    /// Probe facts that offline renders use ([`Inputs::offline`]), so a render shows what
    /// depends on them; never used by the operator.
    #[serde(default)]
    pub probe_example: Vec<String>,
    /// Task facts that offline renders use ([`Inputs::offline`]), by task name (see
    /// `operator::Task::facts`); never used by the operator.
    #[serde(default)]
    pub task_examples: BTreeMap<String, Vec<String>>,
}

/// See [`DriverDef::storage_class_generator`].
pub type StorageClassGenerator = fn(&Inputs) -> Vec<StorageClassDef>;

/// See [`DriverDef::precondition`].
pub type Precondition = fn(&Inputs) -> Result<(), crate::HookError>;

/// A hook on the controller Deployment, run after every generic hook.
pub type DeploymentHook = fn(&Inputs, &mut Deployment);
/// A hook on the node DaemonSet, run after every generic hook.
pub type DaemonSetHook = fn(&Inputs, &mut DaemonSet);
/// A hook on each StorageClass, run before the default-class rule.
pub type StorageClassHook = fn(&Inputs, &mut StorageClass);
/// A hook on each VolumeSnapshotClass (a `snapshot.storage.k8s.io/v1` object as JSON).
pub type VolumeSnapshotClassHook = fn(&Inputs, &mut serde_json::Value);

/// Driver-specific hooks, run in order.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    /// Hooks on the controller Deployment.
    pub deployment: Vec<DeploymentHook>,
    /// Hooks on the node DaemonSet.
    pub daemon_set: Vec<DaemonSetHook>,
    /// Hooks on every StorageClass.
    pub storage_class: Vec<StorageClassHook>,
    /// Which of the table's StorageClasses this cluster gets, when not all of them (e.g. GCP
    /// Dedicated regions support only Hyperdisk). Each selection may have its own default.
    pub storage_class_filter: Option<StorageClassFilter>,
    /// Hooks on every VolumeSnapshotClass.
    pub volume_snapshot_class: Vec<VolumeSnapshotClassHook>,
    /// DaemonSets the driver runs besides its node plugin (e.g. Manila's NFS node plugin).
    pub extra_daemon_sets: Vec<ExtraDaemonSet>,
}

/// A DaemonSet a driver runs besides its node DaemonSet. It is applied with the node
/// DaemonSet (its errors are the node service's), kept on every reconcile like it, and reported
/// under its own controller name: `<controller>Available` and `<controller>Progressing` in the
/// node service's status, so the driver is Available only when it is too.
#[derive(Clone, Copy, Debug)]
pub struct ExtraDaemonSet {
    /// The name of the controller its conditions carry, as OpenShift's operator names it
    /// (e.g. `NFSDriverNodeServiceController`).
    pub controller: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Builds it. The kit names it and puts it in the operand namespace with the operand
    /// label.
    pub build: ExtraDaemonSetBuilder,
}

/// See [`ExtraDaemonSet::build`].
pub type ExtraDaemonSetBuilder = fn(&DriverDef, &Inputs) -> DaemonSet;

/// Chooses whether a StorageClass of the table is built for these inputs.
pub type StorageClassFilter = fn(&Inputs, &StorageClassDef) -> bool;

/// Where an image comes from: an environment variable of the operator (as OpenShift's release
/// payload sets them), or the upstream default when it is unset or empty.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageDef {
    /// The environment variable, e.g. `DRIVER_IMAGE`.
    pub env: String,
    /// The image used when the variable is unset or empty.
    pub default: String,
}

/// The images a driver needs, one per container kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Images {
    /// The CSI driver itself.
    pub driver: ImageDef,
    /// external-provisioner.
    pub provisioner: ImageDef,
    /// external-attacher.
    pub attacher: ImageDef,
    /// external-resizer.
    pub resizer: ImageDef,
    /// external-snapshotter's csi-snapshotter sidecar.
    pub snapshotter: ImageDef,
    /// node-driver-registrar.
    pub node_driver_registrar: ImageDef,
    /// livenessprobe.
    pub liveness_probe: ImageDef,
    /// kube-rbac-proxy, the TLS front of every metrics endpoint.
    pub kube_rbac_proxy: ImageDef,
}

/// An environment variable of the driver container: a literal or a pod field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvDef {
    /// The variable's name.
    pub name: String,
    /// A literal value.
    #[serde(default)]
    pub value: Option<String>,
    /// A pod field path (e.g. `spec.nodeName`), used when `value` is unset.
    #[serde(default)]
    pub field_path: Option<String>,
    /// A key of one of the table's derived ConfigMaps (`configMaps`), read when the container
    /// starts (the ConfigMap's hash rolls the pods when it changes); used when `value` and
    /// `fieldPath` are unset.
    #[serde(default)]
    pub config_map_key_ref: Option<ConfigMapKeyDef>,
}

/// A key of a ConfigMap, for [`EnvDef::config_map_key_ref`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMapKeyDef {
    /// The ConfigMap's name (in the operand namespace).
    pub name: String,
    /// The key.
    pub key: String,
}

/// A volume of the driver container and where it is mounted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeDef {
    /// The volume's name in the pod.
    pub name: String,
    /// Where the driver container sees it; none for a volume of the pod that no container
    /// mounts (OpenShift keeps a few such volumes in its pod templates, and a template that
    /// differs from theirs restarts every pod on takeover).
    #[serde(default)]
    pub mount_path: Option<String>,
    /// Other containers of the pod that mount it too, at the same path (e.g. `csi-provisioner`
    /// sharing the driver's `/tmp`).
    #[serde(default)]
    pub also_mounted_in: Vec<String>,
    /// Whether the mount is read-only.
    #[serde(default)]
    pub read_only: bool,
    /// `Bidirectional` or `HostToContainer`, for host paths the driver mounts into.
    #[serde(default)]
    pub mount_propagation: Option<String>,
    /// Whether a change of the Secret or ConfigMap behind it rolls the pods (its hash goes on
    /// the pod template). True by default; false where the driver rereads the file, which the
    /// kubelet refreshes in place, and OpenShift does not roll the pods for it either.
    #[serde(default = "default_true")]
    pub roll_on_change: bool,
    /// What backs the volume.
    pub source: VolumeSourceDef,
}

/// What backs a [`VolumeDef`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum VolumeSourceDef {
    /// A directory of the node.
    HostPath {
        /// The node's path.
        path: String,
        /// `Directory`, `DirectoryOrCreate`, ...
        #[serde(rename = "type")]
        type_: String,
    },
    /// A Secret of the operand namespace.
    #[serde(rename_all = "camelCase")]
    Secret {
        /// The Secret's name.
        secret_name: String,
        /// Only these keys, each as a file of its own name; every key when empty.
        #[serde(default)]
        items: Vec<String>,
    },
    /// A ConfigMap of the operand namespace (e.g. one the operator derives, see
    /// [`crate::derived`]); its hash rolls the pods when it changes.
    #[serde(rename_all = "camelCase")]
    ConfigMap {
        /// The ConfigMap's name.
        config_map_name: String,
        /// Only these keys, each as a file of its own name; every key when empty.
        #[serde(default)]
        items: Vec<String>,
        /// Whether the pod starts without the ConfigMap (or, with `items`, without those keys).
        #[serde(default)]
        optional: bool,
    },
    /// Scratch space that lives as long as the pod (e.g. a driver's logs): `emptyDir: {}`, or
    /// `emptyDir: {medium: Memory}` for a tmpfs.
    EmptyDir {
        /// `Memory` for a tmpfs; the node's disk when unset.
        #[serde(default)]
        medium: Option<String>,
    },
    /// A bound service account token (for workload identity).
    #[serde(rename_all = "camelCase")]
    ServiceAccountToken {
        /// The token's audience.
        audience: String,
        /// The file name of the token inside the volume.
        path: String,
    },
}

/// A metrics endpoint: the container serves plain HTTP on `localhost:<local_port>`, and a
/// kube-rbac-proxy sidecar serves it over TLS on `<exposed_port>` of the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsDef {
    /// The loopback port of the container's HTTP metrics.
    pub local_port: u16,
    /// The TLS port kube-rbac-proxy listens on.
    pub exposed_port: u16,
    /// The port of the metrics Service in front of the proxy, when it is not `exposedPort`
    /// (OpenShift's vSphere and PowerVS Services number theirs 442-447). The Service targets
    /// the proxy's port by name either way, so scrapes reach the same container.
    #[serde(default)]
    pub service_port: Option<u16>,
}

/// The CSI driver container (`csi-driver`) of the controller or node pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriverContainerDef {
    /// Arguments. `${CLUSTER_ID}` stands for the cluster's ID (OpenShift's infrastructure
    /// name); an argument holding it is left out where there is none (plain Kubernetes).
    /// `--v=${LOG_LEVEL}` puts the log level's verbosity where it stands; without
    /// it the kit adds `--v=N` last. The kit sets `CSI_ENDPOINT` to the socket, so
    /// `--endpoint=$(CSI_ENDPOINT)` is the usual first one.
    pub args: Vec<String>,
    /// Extra environment. `CSI_ENDPOINT` is the kit's and comes first, unless listed here
    /// without a value: then it takes that place; or unless a ConfigMap of `envFrom` has it.
    #[serde(default)]
    pub env: Vec<EnvDef>,
    /// The table's `staticConfigMaps` whose keys the container gets as environment
    /// (`envFrom`), in order. One that has `CSI_ENDPOINT` gives the socket's address (it must
    /// be the container's endpoint), and the kit then sets no `CSI_ENDPOINT` of its own.
    #[serde(default)]
    pub env_from: Vec<String>,
    /// The port of `/healthz`, served by the livenessprobe sidecar and probed by the kubelet.
    pub healthz_port: u16,
    /// The driver's own metrics, if it has any: served over TLS by a kube-rbac-proxy beside
    /// it, behind a metrics Service and ServiceMonitor (the controller's, or on nodes
    /// `<objectPrefix>-node-metrics` and `-node-monitor`, with their own certificate and proxy
    /// role).
    #[serde(default)]
    pub metrics: Option<MetricsDef>,
    /// Whether the container runs privileged (node drivers mounting volumes do).
    #[serde(default)]
    pub privileged: bool,
    /// Capabilities added to the container, where OpenShift names them beside `privileged`
    /// (e.g. `SYS_ADMIN`).
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// `allowPrivilegeEscalation`, where OpenShift states it.
    #[serde(default)]
    pub allow_privilege_escalation: Option<bool>,
    /// A memory limit (a quantity such as `1Gi`), where OpenShift caps the driver; none by
    /// default.
    #[serde(default)]
    pub memory_limit: Option<String>,
    /// The memory request; 50Mi, as every CSI container of the kit, when unset.
    #[serde(default)]
    pub memory_request: Option<String>,
    /// The CPU request (a quantity such as `50m`); 10m, as every CSI container of the kit,
    /// when unset.
    #[serde(default)]
    pub cpu_request: Option<String>,
    /// The timings of the kubelet's liveness probe of `/healthz`; 10 s delay, every 10 s,
    /// 3 s timeout when unset.
    #[serde(default)]
    pub liveness_probe: Option<ProbeTimingsDef>,
    /// The value of `CSI_ENDPOINT` (the driver's socket), when it is not the kit's
    /// (`unix:///var/lib/csi/sockets/pluginproxy/csi.sock` in the controller,
    /// `unix:/csi/csi.sock` on nodes). It must be `csi.sock` in `socket-dir`'s mount, where
    /// the sidecars connect.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Paths of the kit's mounts of this container, by volume name, where they are not the
    /// kit's (e.g. `socket-dir: /csi`; `kubelet-dir: /var/lib/kubelet/`).
    #[serde(default)]
    pub mount_paths: BTreeMap<String, String>,
    /// Extra volumes of the driver container.
    #[serde(default)]
    pub volumes: Vec<VolumeDef>,
    /// The order of the container's mounts, the kit's (`socket-dir`, `kubelet-dir`) included,
    /// when it is not the kit's first then `volumes` in order; mounts it does not name follow.
    /// Order is part of the pod template: the tables follow OpenShift's.
    #[serde(default)]
    pub mount_order: Vec<String>,
    /// The order of the pod's volumes, the kit's included, when it is not the kit's first then
    /// `volumes` in order; volumes it does not name follow.
    #[serde(default)]
    pub volume_order: Vec<String>,
}

/// The timings of a liveness probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProbeTimingsDef {
    /// Seconds before the first probe.
    pub initial_delay_seconds: i32,
    /// Seconds between probes.
    pub period_seconds: i32,
    /// Seconds a probe may take.
    pub timeout_seconds: i32,
}

/// Memory limits of the controller pod's other containers, where OpenShift sets them; none
/// by default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerLimitsDef {
    /// Each CSI sidecar (provisioner, attacher, resizer, snapshotter).
    #[serde(default)]
    pub sidecars: Option<String>,
    /// Each kube-rbac-proxy.
    #[serde(default)]
    pub kube_rbac_proxy: Option<String>,
    /// The livenessprobe sidecar.
    #[serde(default)]
    pub liveness_probe: Option<String>,
}

/// The controller-side sidecars.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SidecarKind {
    /// external-provisioner (`csi-provisioner`).
    Provisioner,
    /// external-attacher (`csi-attacher`).
    Attacher,
    /// external-resizer (`csi-resizer`).
    Resizer,
    /// csi-snapshotter (`csi-snapshotter`).
    Snapshotter,
}

impl SidecarKind {
    /// The short name used in container, port and binding names (`provisioner`).
    pub fn short_name(self) -> &'static str {
        match self {
            Self::Provisioner => "provisioner",
            Self::Attacher => "attacher",
            Self::Resizer => "resizer",
            Self::Snapshotter => "snapshotter",
        }
    }

    /// The container name (`csi-provisioner`).
    pub fn container_name(self) -> String {
        format!("csi-{}", self.short_name())
    }

    /// The name of the kube-rbac-proxy container in front of its metrics
    /// (`provisioner-kube-rbac-proxy`).
    pub fn proxy_container_name(self) -> String {
        format!("{}-kube-rbac-proxy", self.short_name())
    }
}

impl MetricsDef {
    /// The name of the kube-rbac-proxy container in front of the driver's own metrics:
    /// OpenShift names it after the port it fronts (`kube-rbac-proxy-8221`).
    pub fn driver_proxy_container_name(self) -> String {
        format!("kube-rbac-proxy-{}", self.local_port)
    }

    /// The metrics Service's port in front of the proxy: `servicePort`, else the proxy's.
    pub fn port_in_service(self) -> u16 {
        self.service_port.unwrap_or(self.exposed_port)
    }
}

/// The controller's metrics Service and ServiceMonitor, where they are not the kit's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsServiceDef {
    /// The order of the Service's ports and of the ServiceMonitor's endpoints, by port name
    /// (`driver-m`, `provisioner-m`, ..., or a hook endpoint's), when it is not the kit's:
    /// each sidecar's in container order, the driver's, then `hookEndpoints`. Ports it does
    /// not name follow in that order. Order changes nothing served: the tables follow
    /// OpenShift's objects.
    #[serde(default)]
    pub port_order: Vec<String>,
    /// Metrics endpoints that containers added by the driver's hooks serve (e.g. vSphere's
    /// syncer behind its own kube-rbac-proxy), scraped through the same Service and
    /// ServiceMonitor. The hook adds the proxy with a container port of this name and number.
    #[serde(default)]
    pub hook_endpoints: Vec<HookMetricsDef>,
}

/// A metrics endpoint served by a container a hook adds to the controller pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookMetricsDef {
    /// The name of the proxy's container port, and of the Service port and ServiceMonitor
    /// endpoint (e.g. `syncer-m`): a port name (at most 15 lower-case letters, digits and
    /// '-').
    pub port_name: String,
    /// The TLS port the hook's kube-rbac-proxy listens on.
    pub exposed_port: u16,
    /// The Service's port, when it is not `exposedPort`.
    #[serde(default)]
    pub service_port: Option<u16>,
}

impl HookMetricsDef {
    /// The metrics Service's port in front of the proxy: `servicePort`, else the proxy's.
    pub fn port_in_service(&self) -> u16 {
        self.service_port.unwrap_or(self.exposed_port)
    }
}

/// A role of the driver's own for one pod's ServiceAccount, bound by a binding of its own,
/// besides the kit's SCC role (which carries `extraRules`): where OpenShift grants a pod's
/// rules in roles named for them (vSphere's node plugin: a ClusterRole, and a Role for the
/// ConfigMaps of the operand namespace only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleDef {
    /// The role's name: a ClusterRole's starts with `<clusterRolePrefix>-` (or one of
    /// `formerClusterRolePrefixes`), a Role's with `<objectPrefix>-` or `<clusterRolePrefix>-`,
    /// so a table cannot take over an object that is not the driver's.
    pub name: String,
    /// The name of the binding to the pod's ServiceAccount, prefixed as `name`.
    pub binding: String,
    /// A Role and RoleBinding in the operand namespace rather than a ClusterRole and
    /// ClusterRoleBinding.
    #[serde(default)]
    pub namespaced: bool,
    /// The rules; no wildcards (the operator must hold every permission it grants).
    pub rules: Vec<RuleDef>,
}

/// A binding of one pod's ServiceAccount to a shared ClusterRole that the storage operator
/// installs for every driver (cluster-storage-operator on OpenShift; see
/// `rbac::build_shared_cluster_roles`), besides the sidecar roles the kit binds itself (e.g.
/// SMB's provisioner reading the Secrets its StorageClasses name).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharedRoleBindingDef {
    /// The shared ClusterRole (e.g. `openshift-csi-provisioner-configmap-and-secret-reader-role`).
    pub role: String,
    /// The ClusterRoleBinding's name, prefixed as a [`RoleDef`]'s.
    pub binding: String,
}

/// One controller sidecar.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SidecarDef {
    /// Which sidecar.
    pub kind: SidecarKind,
    /// Arguments after the standard ones (socket, metrics, leader election, `--v`).
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// The sidecar's metrics endpoint, if scraped.
    #[serde(default)]
    pub metrics: Option<MetricsDef>,
    /// Whether the sidecar finds the driver's socket through the environment: the kit sets
    /// `ADDRESS` to the socket's path and passes `--csi-address=$(ADDRESS)` (as some of
    /// OpenShift's assets do) instead of the path itself.
    #[serde(default)]
    pub address_env: bool,
    /// The sidecar's whole argument list in the order OpenShift's asset has it, instead of
    /// the kit's (socket, metrics, leader election, `--v`, then `extraArgs`), which it
    /// replaces. `${LOG_LEVEL}` stands for the verbosity and
    /// `${LEADER_ELECTION_LEASE_DURATION}`, `${LEADER_ELECTION_RENEW_DEADLINE}`,
    /// `${LEADER_ELECTION_RETRY_PERIOD}` for the kit's leader election timings (OpenShift's
    /// placeholders). It must connect to the socket (`--csi-address=`, `$(ADDRESS)` with
    /// `addressEnv`), serve `metrics` on their local port, and elect a leader: controllers
    /// run two replicas on HA clusters.
    #[serde(default)]
    pub full_args: Vec<String>,
    /// The sidecar's requests, where they are not the kit's (10m CPU, 50Mi memory).
    #[serde(default)]
    pub requests: RequestsDef,
}

/// CPU and memory requests of a container, each the kit's when unset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestsDef {
    /// The CPU request (a quantity such as `10m`).
    #[serde(default)]
    pub cpu: Option<String>,
    /// The memory request (a quantity such as `20Mi`).
    #[serde(default)]
    pub memory: Option<String>,
}

/// Where the controller's pods run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerPlacement {
    /// On the control-plane nodes where the topology has them (a nodeSelector on their label
    /// and tolerations of their taint and of `CriticalAddonsOnly`), as csi-operator's drivers
    /// run.
    #[default]
    ControlPlane,
    /// Wherever the scheduler puts them: no nodeSelector and no tolerations (so on worker
    /// nodes where the control plane is tainted), as IBM's assets run their controllers.
    AnyNode,
}

/// The controller Deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerDef {
    /// The Deployment's name, when it is not `<objectPrefix>-controller` (OpenShift names
    /// some after the plugin, e.g. `openstack-manila-csi-controllerplugin`).
    #[serde(default)]
    pub name: Option<String>,
    /// The pod labels that select the pods (Deployment, PodDisruptionBudget, metrics Service,
    /// anti-affinity), when they are not `app: <Deployment name>`.
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    /// Whether the pod uses the node's network (drivers that reach a metadata server do).
    #[serde(default)]
    pub host_network: bool,
    /// The SecurityContextConstraints the pod needs on OpenShift (`hostnetwork-v2`,
    /// `restricted-v2`, ...), granted to the controller ServiceAccount.
    pub required_scc: String,
    /// Whether the pod runs as OpenShift runs AWS EFS's controller: the driver, its CSI
    /// sidecars and the livenessprobe are privileged containers (the driver's root file system
    /// writable), and the ServiceAccount is bound to `<prefix>-privileged-role`
    /// (`<prefix>-controller-privileged-binding`) instead of a host-network role. Goes with
    /// `requiredScc: privileged`.
    #[serde(default)]
    pub privileged: bool,
    /// Extra rules of the controller's SCC ClusterRole (e.g. reading Nodes).
    #[serde(default)]
    pub extra_rules: Vec<RuleDef>,
    /// The driver container.
    pub driver: DriverContainerDef,
    /// The sidecars, in container order.
    pub sidecars: Vec<SidecarDef>,
    /// Arguments of the livenessprobe sidecar after the standard ones.
    #[serde(default)]
    pub liveness_probe_args: Vec<String>,
    /// The livenessprobe's whole argument list in OpenShift's order, instead of the kit's
    /// (socket, `--health-port`, `--v`, then `livenessProbeArgs`). `${LOG_LEVEL}` stands for
    /// the verbosity. It must connect to `/csi/csi.sock` and serve the driver's `healthzPort`
    /// (`--health-port=`; without it the livenessprobe's default, 9808).
    #[serde(default)]
    pub liveness_probe_full_args: Vec<String>,
    /// The livenessprobe's requests, where they are not the kit's (10m CPU, 50Mi memory).
    #[serde(default)]
    pub liveness_probe_requests: RequestsDef,
    /// Where the CSI sidecars mount `socket-dir` and find `csi.sock`, when it is not the
    /// kit's `/var/lib/csi/sockets/pluginproxy/` (e.g. `/csi`; the driver's own mount is
    /// `driver.mountPaths`). An absolute path.
    #[serde(default)]
    pub sidecar_socket_dir: Option<String>,
    /// The pod's ServiceAccount, when it is not `<objectPrefix>-controller-sa` (IBM's
    /// operators name theirs otherwise); every RBAC subject and SCC grant of the controller
    /// names it.
    #[serde(default)]
    pub service_account_name: Option<String>,
    /// Where the pods run: `ControlPlane` (the default) or `AnyNode`.
    #[serde(default)]
    pub placement: ControllerPlacement,
    /// Names of the kit's containers as OpenShift's asset has them, by the kit's name (e.g.
    /// `csi-liveness-probe: liveness-probe`, `kube-rbac-proxy-8206: driver-kube-rbac-proxy`).
    /// Applied last, before the driver's hooks; everything else in the table (such as
    /// `containerOrder` and `alsoMountedIn`) uses the kit's names. `csi-driver` keeps its
    /// name: hooks and the proxy annotations find the driver by it.
    #[serde(default)]
    pub container_names: BTreeMap<String, String>,
    /// Whether the CSI containers (the driver, the sidecars and the livenessprobe; not the
    /// kube-rbac-proxies) state `privileged: false` and `allowPrivilegeEscalation: false`, as
    /// IBM's assets do. It restricts nothing the SCC does not already; it keeps the pod
    /// template OpenShift's.
    #[serde(default)]
    pub explicitly_unprivileged: bool,
    /// Pod template labels besides `app` (e.g. OpenShift's network policy selectors).
    #[serde(default)]
    pub pod_labels: BTreeMap<String, String>,
    /// The pod's volumes the cluster autoscaler may drop with it
    /// (`cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes`); `socket-dir` when
    /// empty.
    #[serde(default)]
    pub safe_to_evict_local_volumes: Vec<String>,
    /// The order of the pod's containers by name, when it is not the kit's (the driver, its
    /// kube-rbac-proxy, each sidecar followed by its own, the livenessprobe); containers it
    /// does not name follow. Order is part of the pod template: the tables follow OpenShift's.
    #[serde(default)]
    pub container_order: Vec<String>,
    /// Memory limits of the sidecars, proxies and livenessprobe.
    #[serde(default)]
    pub memory_limits: ControllerLimitsDef,
    /// Annotations of the Deployment itself (not its pods), where OpenShift's asset has some
    /// of its own (metadata only: changing them restarts nothing).
    #[serde(default)]
    pub deployment_annotations: BTreeMap<String, String>,
    /// The name of the binding of a `privileged` controller's ServiceAccount to
    /// `<prefix>-privileged-role`, when it is not `<prefix>-controller-privileged-binding`.
    #[serde(default)]
    pub privileged_binding_name: Option<String>,
    /// The metrics Service and ServiceMonitor, where they are not the kit's.
    #[serde(default)]
    pub metrics_service: MetricsServiceDef,
    /// Roles of the controller's own besides the SCC role (see [`RoleDef`]).
    #[serde(default)]
    pub roles: Vec<RoleDef>,
    /// Shared ClusterRoles the controller's ServiceAccount is bound to besides the sidecars'.
    #[serde(default)]
    pub shared_roles: Vec<SharedRoleBindingDef>,
}

/// The node DaemonSet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeDef {
    /// The DaemonSet's name, when it is not `<objectPrefix>-node`.
    #[serde(default)]
    pub name: Option<String>,
    /// The pod labels that select the pods, when they are not `app: <DaemonSet name>`.
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    /// The pod's ServiceAccount, when it is not `<objectPrefix>-node-sa`; every RBAC subject
    /// and SCC grant of the node plugin names it.
    #[serde(default)]
    pub service_account_name: Option<String>,
    /// Whether the pod uses the node's network.
    #[serde(default = "default_true")]
    pub host_network: bool,
    /// Extra rules of the node's SCC ClusterRole (e.g. reading Nodes).
    #[serde(default)]
    pub extra_rules: Vec<RuleDef>,
    /// The driver container. The kit adds the kubelet directory (Bidirectional) and the
    /// socket directory; `volumes` holds the rest (`/dev`, udev, ...).
    pub driver: DriverContainerDef,
    /// The port of node-driver-registrar's `/healthz`.
    pub registrar_healthz_port: u16,
    /// Whether the cluster proxy reaches the node's driver container (the
    /// `config.openshift.io/inject-proxy` annotation); the trusted CA bundle always does.
    #[serde(default = "default_true")]
    pub inject_proxy: bool,
    /// The pod's DNS policy (e.g. `Default`: the node's resolver), where OpenShift sets one;
    /// the API server's default (`ClusterFirst`) otherwise.
    #[serde(default)]
    pub dns_policy: Option<String>,
    /// Arguments of the livenessprobe sidecar after the standard ones.
    #[serde(default)]
    pub liveness_probe_args: Vec<String>,
    /// The order of the pod's containers by name (`csi-driver`, `csi-node-driver-registrar`,
    /// `csi-liveness-probe`), when it is not that; containers it does not name follow.
    #[serde(default)]
    pub container_order: Vec<String>,
    /// Pod template labels besides the selector's (e.g. OpenShift's network policy
    /// selectors). Where the node pods then carry every label of the controller's selector
    /// (IBM VPC's share `app`), the kit's PodDisruptionBudget and anti-affinity select the
    /// controller's pods by `pod-template-hash` too, which only a Deployment's pods carry.
    #[serde(default)]
    pub pod_labels: BTreeMap<String, String>,
    /// The pod's nodeSelector, when it is not `kubernetes.io/os: linux` (e.g. adding
    /// `kubernetes.io/arch` for a driver built for one architecture); `{}` for none.
    #[serde(default)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Names of the kit's volumes (`socket-dir`, `kubelet-dir`, `registration-dir`) as
    /// OpenShift's asset has them, by the kit's name (e.g. `socket-dir: plugin-dir`). Applied
    /// last, before the driver's hooks; the rest of the table (`mountPaths`, `mountOrder`,
    /// `volumeOrder`) uses the kit's names.
    #[serde(default)]
    pub volume_names: BTreeMap<String, String>,
    /// Names of the kit's sidecar containers as OpenShift's asset has them, by the kit's
    /// name (`csi-node-driver-registrar`, `csi-liveness-probe`). Applied last, before the
    /// driver's hooks; the rest of the table (`containerOrder`, `alsoMountedIn`) uses the kit's
    /// names.
    #[serde(default)]
    pub container_names: BTreeMap<String, String>,
    /// node-driver-registrar, where it is not the kit's.
    #[serde(default)]
    pub registrar: NodeSidecarDef,
    /// The livenessprobe, where it is not the kit's (its `fullArgs` replace
    /// `livenessProbeArgs` and the kit's socket, `--http-endpoint` and `--v`).
    #[serde(default)]
    pub liveness_probe: NodeSidecarDef,
    /// Whether the node's containers state `runAsUser: 0` and `runAsNonRoot: false` (IBM
    /// VPC's asset does; the privileged SCC allows it either way). With it the registrar and
    /// the livenessprobe state `privileged: false`, as there.
    #[serde(default)]
    pub run_as_root: bool,
    /// Roles of the node plugin's own besides the privileged role (see [`RoleDef`]); its
    /// `extraRules` go into the privileged role.
    #[serde(default)]
    pub roles: Vec<RoleDef>,
    /// Shared ClusterRoles the node's ServiceAccount is bound to.
    #[serde(default)]
    pub shared_roles: Vec<SharedRoleBindingDef>,
}

/// A sidecar of the node pod (node-driver-registrar, livenessprobe) where OpenShift's asset
/// lays it out otherwise than the kit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSidecarDef {
    /// The whole argument list in OpenShift's order, instead of the kit's. `${LOG_LEVEL}`
    /// stands for the verbosity; `$(NAME)` for a variable of `env`. The registrar's must
    /// name the socket (`--csi-address=`), the kubelet's path to it
    /// (`--kubelet-registration-path=`) and serve `registrarHealthzPort`
    /// (`--http-endpoint=`); the livenessprobe's the socket, and serve the driver's
    /// `healthzPort` (`--http-endpoint=`, `--health-port=`, or without either the
    /// livenessprobe's default, 9808). The kubelet probes the health endpoint on the loopback
    /// address where it listens there only.
    #[serde(default)]
    pub full_args: Vec<String>,
    /// Environment of the container (e.g. `ADDRESS` for `--csi-address=$(ADDRESS)`).
    #[serde(default)]
    pub env: Vec<EnvDef>,
    /// Requests, where they are not the kit's (10m CPU, 50Mi memory).
    #[serde(default)]
    pub requests: RequestsDef,
    /// The registrar's preStop command, where it is not the kit's (a shell removing its
    /// registration socket and the driver's); the livenessprobe has none.
    #[serde(default)]
    pub pre_stop: Vec<String>,
}

/// One RBAC rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleDef {
    /// API groups (`""` for the core group).
    pub api_groups: Vec<String>,
    /// Resources.
    pub resources: Vec<String>,
    /// Verbs.
    pub verbs: Vec<String>,
    /// Object names, when the rule is limited to some.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// The CSIDriver object's spec, as the driver needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CSIDriverDef {
    /// Whether volumes need ControllerPublish (attach) before use.
    pub attach_required: bool,
    /// Whether the driver gets pod information on NodePublish.
    #[serde(default)]
    pub pod_info_on_mount: bool,
    /// `None`, `File` or `ReadWriteOnceWithFSType`.
    pub fs_group_policy: String,
    /// `Persistent` and/or `Ephemeral`.
    pub volume_lifecycle_modes: Vec<String>,
    /// Whether NodePublish is called periodically.
    #[serde(default)]
    pub requires_republish: bool,
    /// Whether the driver reports capacity.
    #[serde(default)]
    pub storage_capacity: bool,
    /// Whether the driver supports `-o context` mounts.
    #[serde(default)]
    pub se_linux_mount: bool,
    /// Audiences of service account tokens passed on NodePublish.
    #[serde(default)]
    pub token_request_audiences: Vec<String>,
    /// The `security.openshift.io/csi-ephemeral-volume-profile` label when an admin has not
    /// set one; required when `volumeLifecycleModes` has `Ephemeral`.
    #[serde(default)]
    pub ephemeral_volume_profile: Option<String>,
}

/// A StorageClass the operator creates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageClassDef {
    /// The class name.
    pub name: String,
    /// Whether the operator proposes it as the cluster default (see the default-class rule).
    #[serde(default)]
    pub default: bool,
    /// Driver parameters.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// `WaitForFirstConsumer` or `Immediate`.
    pub volume_binding_mode: String,
    /// Whether volumes may be expanded.
    #[serde(default = "default_true")]
    pub allow_volume_expansion: bool,
    /// `Delete` or `Retain`.
    #[serde(default = "default_reclaim_policy")]
    pub reclaim_policy: String,
}

fn default_reclaim_policy() -> String {
    "Delete".to_owned()
}

/// A VolumeSnapshotClass the operator creates when its CRD exists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeSnapshotClassDef {
    /// The class name.
    pub name: String,
    /// Whether it is marked as the default class for the driver.
    #[serde(default)]
    pub default: bool,
    /// Driver parameters.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// `Delete` or `Retain`.
    #[serde(default = "default_reclaim_policy")]
    pub deletion_policy: String,
}

/// The controller's cloud credentials.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CredentialsDef {
    /// The Secret in the operand namespace that holds them (mounted by the controller;
    /// its hash restarts the pods when it rotates).
    pub secret_name: String,
    /// The CredentialsRequest that makes cloud-credential-operator write the Secret, created
    /// only when the CredentialsRequest CRD exists.
    #[serde(default)]
    pub credentials_request: Option<CredentialsRequestDef>,
    /// Placeholder data that offline renders ([`Inputs::offline`]) use for the Secret, where a
    /// derived Secret is generated from it; never used by the operator.
    #[serde(default)]
    pub example: BTreeMap<String, String>,
}

/// A NetworkPolicy the operator applies (see [`DriverDef::network_policies`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicyDef {
    /// Its name, in the operand namespace.
    pub name: String,
    /// Annotations of the object, where OpenShift's asset has some.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Its spec, as the API has it.
    pub spec: k8s_openapi::api::networking::v1::NetworkPolicySpec,
}

/// A ConfigMap with fixed data that the operator applies (see
/// [`DriverDef::static_config_maps`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticConfigMapDef {
    /// Its name, in the operand namespace.
    pub name: String,
    /// Labels besides the operand label (e.g. those OpenShift's asset has).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its data.
    pub data: BTreeMap<String, String>,
}

/// A ConfigMap of another namespace that the operator copies into the operand namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CopiedConfigMapDef {
    /// The source's namespace (e.g. `openshift-config-managed`).
    pub namespace: String,
    /// The source's name.
    pub name: String,
    /// The copy's name, when not the source's (OpenShift names some copies differently,
    /// e.g. `azure-cloud-config`).
    #[serde(default)]
    pub copy_name: Option<String>,
}

impl CopiedConfigMapDef {
    /// The copy's name in the operand namespace.
    pub fn target(&self) -> &str {
        self.copy_name.as_deref().unwrap_or(&self.name)
    }
}

/// A `cloudcredential.openshift.io/v1` CredentialsRequest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CredentialsRequestDef {
    /// The object's name.
    pub name: String,
    /// The object's namespace (cloud-credential-operator's).
    pub namespace: String,
    /// ServiceAccounts that use the credentials (for clouds whose credentials are bound to
    /// them; left out of the object when empty).
    #[serde(default)]
    pub service_account_names: Vec<String>,
    /// Annotations of the object. `credentials.openshift.io/role-arns-vars` names the
    /// operator's environment variables (comma-separated) that hold its short-lived token role:
    /// in cloud-credential-operator's Manual mode the request is applied only when they are all
    /// set (see `operator::credentials`).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The provider-specific spec, verbatim.
    pub provider_spec: serde_json::Value,
}

impl DriverDef {
    /// Problems of `staticConfigMaps` and of the driver containers' `envFrom`.
    fn validate_static_config_maps(&self, problems: &mut Vec<String>) {
        let names = |c: &StaticConfigMapDef| c.name.clone();
        for c in &self.static_config_maps {
            if !is_dns_subdomain(&c.name) {
                problems.push(format!(
                    "staticConfigMaps: {:?} is not a valid object name",
                    c.name
                ));
            }
            if c.data.is_empty() {
                problems.push(format!("staticConfigMaps: {} has no data", c.name));
            }
        }
        let derived: Vec<&str> = self.config_maps.iter().map(|d| d.name.as_str()).collect();
        let copied: Vec<&str> = self.copied_config_maps.iter().map(|c| c.target()).collect();
        for name in duplicates(self.static_config_maps.iter().map(|c| c.name.as_str())) {
            problems.push(format!("staticConfigMaps: {name} is listed twice"));
        }
        for c in &self.static_config_maps {
            if derived.contains(&c.name.as_str()) || copied.contains(&c.name.as_str()) {
                problems.push(format!(
                    "staticConfigMaps: {} is also a derived or copied ConfigMap: use another name",
                    c.name
                ));
            }
        }
        for (pod, driver, kit_endpoint) in [
            (
                "controller",
                &self.controller.driver,
                crate::names::CONTROLLER_ENDPOINT,
            ),
            ("node", &self.node.driver, crate::names::NODE_ENDPOINT),
        ] {
            let endpoint = driver.endpoint.as_deref().unwrap_or(kit_endpoint);
            for name in &driver.env_from {
                let Some(c) = self.static_config_maps.iter().find(|c| &c.name == name) else {
                    problems.push(format!(
                        "{pod}.driver.envFrom: {name} is not one of staticConfigMaps ({})",
                        self.static_config_maps
                            .iter()
                            .map(names)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    continue;
                };
                if let Some(value) = c.data.get("CSI_ENDPOINT")
                    && value != endpoint
                {
                    problems.push(format!(
                        "{pod}.driver.envFrom: CSI_ENDPOINT of {name} is {value:?}, but the driver's socket is {endpoint:?}: make them the same (or set {pod}.driver.endpoint)"
                    ));
                }
            }
            for name in duplicates(driver.env_from.iter().map(String::as_str)) {
                problems.push(format!("{pod}.driver.envFrom: {name} is listed twice"));
            }
        }
    }
}

/// A driver table that parses but cannot work: every problem found, so one fix round is
/// enough.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid table of CSI driver {driver:?}: {}", problems.join("; "))]
pub struct InvalidDef {
    /// The driver's name.
    pub driver: String,
    /// What is wrong, one entry per problem.
    pub problems: Vec<String>,
}

/// Volume names the kit itself uses in the pods.
const RESERVED_CONTROLLER_VOLUMES: &[&str] = &[
    "socket-dir",
    "metrics-serving-cert",
    "non-standard-root-system-trust-ca-bundle",
];
/// The node pod's own volumes (the kit's metrics certificate is the controller's only).
const RESERVED_NODE_VOLUMES: &[&str] = &[
    "socket-dir",
    "kubelet-dir",
    "registration-dir",
    "non-standard-root-system-trust-ca-bundle",
];

/// A DNS-1123 subdomain: what a ServiceAccount's name must be.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// A resource quantity as requests are written: a decimal number with an optional suffix
/// (`10m`, `0.5`, `50Mi`, `1G`).
fn is_quantity(value: &str) -> bool {
    const SUFFIXES: [&str; 14] = [
        "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    let number_end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, suffix) = value.split_at(number_end);
    number.parse::<f64>().is_ok_and(|n| n >= 0.0)
        && !number.starts_with('.')
        && !number.ends_with('.')
        && SUFFIXES.contains(&suffix)
}

/// A DNS-1123 label: what a workload's name must be (its pods' names derive from it).
fn is_dns_label(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-')
}

fn duplicates<T: Ord + Clone + std::fmt::Display>(
    items: impl IntoIterator<Item = T>,
) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut dups = std::collections::BTreeSet::new();
    for item in items {
        if !seen.insert(item.clone()) {
            dups.insert(item);
        }
    }
    dups.into_iter().map(|d| d.to_string()).collect()
}

impl ControllerDef {
    /// Where the CSI sidecars mount `socket-dir`: `sidecarSocketDir`, else the kit's
    /// `/var/lib/csi/sockets/pluginproxy/`.
    pub fn socket_dir(&self) -> &str {
        self.sidecar_socket_dir
            .as_deref()
            .unwrap_or(crate::names::CONTROLLER_SOCKET_DIR)
    }

    /// The driver's socket as the sidecars see it: `csi.sock` in [`Self::socket_dir`].
    pub fn socket(&self) -> String {
        format!("{}/csi.sock", self.socket_dir().trim_end_matches('/'))
    }

    /// What is wrong with the table's layout of the pod after OpenShift's asset: sidecars'
    /// and the livenessprobe's whole argument lists, requests, container names and the
    /// explicit security settings.
    fn layout_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let socket = self.socket();
        if let Some(dir) = &self.sidecar_socket_dir
            && (!dir.starts_with('/') || dir.contains(char::is_whitespace))
        {
            problems.push(format!(
                "controller.sidecarSocketDir {dir:?} is not an absolute path"
            ));
        }
        for s in &self.sidecars {
            let field = format!("controller.sidecars[{}]", s.kind.short_name());
            for (what, quantity) in [("cpu", &s.requests.cpu), ("memory", &s.requests.memory)] {
                if let Some(q) = quantity.as_deref().filter(|q| !is_quantity(q)) {
                    problems.push(format!(
                        "{field}.requests.{what} {q:?} is not a quantity (e.g. 10m, 50Mi)"
                    ));
                }
            }
            if s.full_args.is_empty() {
                continue;
            }
            if !s.extra_args.is_empty() {
                problems.push(format!(
                    "{field} has both fullArgs and extraArgs: fullArgs is the whole list"
                ));
            }
            let address = if s.address_env {
                "$(ADDRESS)".to_owned()
            } else {
                socket.clone()
            };
            let addresses: Vec<&String> = s
                .full_args
                .iter()
                .filter(|a| a.starts_with("--csi-address="))
                .collect();
            if addresses != [&format!("--csi-address={address}")] {
                problems.push(format!(
                    "{field}.fullArgs must pass --csi-address={address} once (the driver's \
                     socket{})",
                    if s.address_env {
                        ", through ADDRESS with addressEnv"
                    } else {
                        " in socket-dir"
                    }
                ));
            }
            if let Some(m) = s.metrics {
                let local = [
                    format!("localhost:{}", m.local_port),
                    format!("127.0.0.1:{}", m.local_port),
                ];
                if !s.full_args.iter().any(|a| {
                    a.split_once('=')
                        .is_some_and(|(_, v)| local.iter().any(|l| l == v))
                }) {
                    problems.push(format!(
                        "{field}.fullArgs serve no metrics on localhost:{} (its metrics' \
                         localPort, where kube-rbac-proxy scrapes)",
                        m.local_port
                    ));
                }
            }
            let elects = s.full_args.iter().any(|a| a == "--leader-election")
                || s.full_args.iter().any(|a| a == "--leader-election=true");
            if !elects || s.full_args.iter().any(|a| a == "--leader-election=false") {
                problems.push(format!(
                    "{field}.fullArgs do not elect a leader (--leader-election): the \
                     controller runs two replicas on HA clusters"
                ));
            }
        }
        let p = &self.liveness_probe_requests;
        for (what, quantity) in [("cpu", &p.cpu), ("memory", &p.memory)] {
            if let Some(q) = quantity.as_deref().filter(|q| !is_quantity(q)) {
                problems.push(format!(
                    "controller.livenessProbeRequests.{what} {q:?} is not a quantity (e.g. 5m, \
                     10Mi)"
                ));
            }
        }
        if !self.liveness_probe_full_args.is_empty() {
            let args = &self.liveness_probe_full_args;
            if !self.liveness_probe_args.is_empty() {
                problems.push(
                    "controller has both livenessProbeFullArgs and livenessProbeArgs: \
                     livenessProbeFullArgs is the whole list"
                        .to_owned(),
                );
            }
            if !args.iter().any(|a| a == "--csi-address=/csi/csi.sock") {
                problems.push(
                    "controller.livenessProbeFullArgs must pass --csi-address=/csi/csi.sock \
                     (the livenessprobe mounts socket-dir at /csi)"
                        .to_owned(),
                );
            }
            let ports: Vec<&str> = args
                .iter()
                .filter_map(|a| a.strip_prefix("--health-port="))
                .collect();
            // The livenessprobe's default port.
            let port = self.driver.healthz_port.to_string();
            let serves = match ports.as_slice() {
                [] => port == "9808",
                [p] => *p == port,
                _ => false,
            };
            if !serves {
                problems.push(format!(
                    "controller.livenessProbeFullArgs do not serve the driver's healthzPort \
                     {port} (--health-port={port} once, or nothing for the default 9808)"
                ));
            }
        }
        let kit = self.container_names();
        let mut final_names: Vec<String> = kit
            .iter()
            .map(|n| self.container_names.get(n).unwrap_or(n).clone())
            .collect();
        final_names.sort();
        for (from, to) in &self.container_names {
            if from == crate::names::DRIVER_CONTAINER {
                problems.push(format!(
                    "controller.containerNames renames {from}: hooks and the proxy annotations \
                     find the driver by that name"
                ));
            } else if !kit.contains(from) {
                problems.push(format!(
                    "controller.containerNames names {from}, not a container of the pod ({})",
                    kit.join(", ")
                ));
            }
            if !is_dns_label(to) {
                problems.push(format!(
                    "controller.containerNames gives {from} the name {to:?}, not a valid \
                     container name (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        for name in duplicates(final_names) {
            problems.push(format!(
                "controller.containerNames gives two containers the name {name}"
            ));
        }
        if self.explicitly_unprivileged
            && (self.privileged
                || self.driver.privileged
                || self.driver.allow_privilege_escalation == Some(true))
        {
            problems.push(
                "controller.explicitlyUnprivileged states privileged: false and \
                 allowPrivilegeEscalation: false, but the table makes the driver privileged or \
                 lets it escalate"
                    .to_owned(),
            );
        }
        problems
    }

    /// The names of the containers the kit puts in the pod, in its order: the driver and its
    /// kube-rbac-proxy, each sidecar followed by its own, the livenessprobe (a driver's hooks
    /// may add more after them).
    pub fn container_names(&self) -> Vec<String> {
        let mut names = vec![crate::names::DRIVER_CONTAINER.to_owned()];
        if let Some(m) = self.driver.metrics {
            names.push(m.driver_proxy_container_name());
        }
        for sidecar in &self.sidecars {
            names.push(sidecar.kind.container_name());
            if sidecar.metrics.is_some() {
                names.push(sidecar.kind.proxy_container_name());
            }
        }
        names.push(crate::names::LIVENESS_PROBE_CONTAINER.to_owned());
        names
    }

    /// Whether the controller's ServiceAccount is bound to `<prefix>-privileged-role` (the
    /// node's, which grants the privileged SCC), with the controller's extra rules in it: for a
    /// `privileged` controller and for any that requires the privileged SCC. Otherwise a
    /// host-network controller gets `<prefix>-hostnetwork-role` for its SCC and extra rules.
    pub fn uses_privileged_role(&self) -> bool {
        self.privileged || self.required_scc == "privileged"
    }
}

impl DriverDef {
    /// Whether the controller has any metrics endpoint (and so kube-rbac-proxies, a metrics
    /// Service and their RBAC).
    pub fn has_metrics(&self) -> bool {
        self.controller.driver.metrics.is_some()
            || self.controller.sidecars.iter().any(|s| s.metrics.is_some())
            || !self.controller.metrics_service.hook_endpoints.is_empty()
    }

    /// Checks what serde cannot: names set, ports and volume names unique within a pod, at most
    /// one default class of each kind, a profile for inline volumes, images with defaults.
    pub fn validate(&self) -> Result<(), InvalidDef> {
        let mut problems = Vec::new();
        for (field, value) in [
            ("name", &self.name),
            ("shortName", &self.short_name),
            ("conditionPrefix", &self.condition_prefix),
            ("namespace", &self.namespace),
            ("objectPrefix", &self.object_prefix),
            ("clusterRolePrefix", &self.cluster_role_prefix),
        ] {
            if value.trim().is_empty() {
                problems.push(format!("{field} is empty"));
            }
        }
        for (field, name) in [
            ("controller.name", &self.controller.name),
            ("node.name", &self.node.name),
        ] {
            if let Some(name) = name.as_deref().filter(|n| !is_dns_label(n)) {
                problems.push(format!(
                    "{field} {name:?} is not a valid object name (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        if self.controller.name.is_some() && self.controller.name == self.node.name {
            problems.push("controller.name and node.name are the same".to_owned());
        }
        for (field, selector) in [
            ("controller.selector", &self.controller.selector),
            ("node.selector", &self.node.selector),
        ] {
            if selector
                .iter()
                .any(|(k, v)| k.trim().is_empty() || v.trim().is_empty())
            {
                problems.push(format!("{field} has an empty label key or value"));
            }
        }
        self.validate_node_layout(&mut problems);
        let i = &self.images;
        for (role, image) in [
            ("driver", &i.driver),
            ("provisioner", &i.provisioner),
            ("attacher", &i.attacher),
            ("resizer", &i.resizer),
            ("snapshotter", &i.snapshotter),
            ("nodeDriverRegistrar", &i.node_driver_registrar),
            ("livenessProbe", &i.liveness_probe),
            ("kubeRbacProxy", &i.kube_rbac_proxy),
        ] {
            if image.env.trim().is_empty() || image.default.trim().is_empty() {
                problems.push(format!("image {role} needs both env and default"));
            }
        }

        let ctl = &self.controller;
        let mut controller_ports = vec![ctl.driver.healthz_port];
        let metrics = ctl
            .driver
            .metrics
            .iter()
            .chain(ctl.sidecars.iter().filter_map(|s| s.metrics.as_ref()));
        for m in metrics {
            controller_ports.extend([m.local_port, m.exposed_port]);
        }
        controller_ports.extend(
            ctl.metrics_service
                .hook_endpoints
                .iter()
                .map(|e| e.exposed_port),
        );
        for port in duplicates(controller_ports) {
            problems.push(format!("controller port {port} is used twice"));
        }
        for kind in duplicates(ctl.sidecars.iter().map(|s| s.kind.short_name())) {
            problems.push(format!("sidecar {kind} is listed twice"));
        }
        let mut node_ports = vec![
            self.node.driver.healthz_port,
            self.node.registrar_healthz_port,
        ];
        if let Some(m) = self.node.driver.metrics {
            node_ports.extend([m.local_port, m.exposed_port]);
            // The kit's, as in the controller pod.
            if self
                .node
                .driver
                .volumes
                .iter()
                .any(|v| v.name == "metrics-serving-cert")
            {
                problems.push(
                    "node volume metrics-serving-cert is the kit's when node.driver.metrics is set"
                        .to_owned(),
                );
            }
        }
        for port in duplicates(node_ports) {
            problems.push(format!("node port {port} is used twice"));
        }
        for (pod, volumes, reserved) in [
            (
                "controller",
                &ctl.driver.volumes,
                RESERVED_CONTROLLER_VOLUMES,
            ),
            ("node", &self.node.driver.volumes, RESERVED_NODE_VOLUMES),
        ] {
            for name in duplicates(volumes.iter().map(|v| v.name.as_str())) {
                problems.push(format!("{pod} volume {name} is listed twice"));
            }
            for v in volumes.iter().filter(|v| {
                !v.roll_on_change
                    && !matches!(
                        v.source,
                        VolumeSourceDef::Secret { .. } | VolumeSourceDef::ConfigMap { .. }
                    )
            }) {
                problems.push(format!(
                    "{pod} volume {} has rollOnChange false but is no Secret or ConfigMap: only their changes roll pods",
                    v.name
                ));
            }
            for v in volumes
                .iter()
                .filter(|v| reserved.contains(&v.name.as_str()))
            {
                problems.push(format!("{pod} volume {} is reserved by the kit", v.name));
            }
            for v in volumes.iter().filter(|v| v.mount_path.is_none()) {
                if v.read_only || v.mount_propagation.is_some() || !v.also_mounted_in.is_empty() {
                    problems.push(format!(
                        "{pod} volume {} has no mountPath but mount settings \
                         (readOnly, mountPropagation, alsoMountedIn)",
                        v.name
                    ));
                }
            }
        }
        let derived: Vec<&str> = self.config_maps.iter().map(|c| c.name.as_str()).collect();
        for (pod, driver) in [("controller", &ctl.driver), ("node", &self.node.driver)] {
            for e in &driver.env {
                let sources = usize::from(e.value.is_some())
                    + usize::from(e.field_path.is_some())
                    + usize::from(e.config_map_key_ref.is_some());
                if sources > 1 {
                    problems.push(format!(
                        "{pod} env {} has more than one of value, fieldPath and configMapKeyRef",
                        e.name
                    ));
                }
                if let Some(key) = &e.config_map_key_ref
                    && !derived.contains(&key.name.as_str())
                {
                    problems.push(format!(
                        "{pod} env {} reads ConfigMap {}, which is not one of the table's \
                         configMaps ({}): only those roll the pods when they change",
                        e.name,
                        key.name,
                        derived.join(", ")
                    ));
                }
            }
        }
        for (pod, driver, kit_mounts, socket_dir) in [
            (
                "controller",
                &ctl.driver,
                &["socket-dir"][..],
                crate::names::CONTROLLER_SOCKET_DIR,
            ),
            (
                "node",
                &self.node.driver,
                &["socket-dir", "kubelet-dir"][..],
                crate::names::NODE_SOCKET_DIR,
            ),
        ] {
            for name in driver.mount_paths.keys() {
                if !kit_mounts.contains(&name.as_str()) {
                    problems.push(format!(
                        "{pod} driver mountPaths names {name}, not one of the kit's mounts ({})",
                        kit_mounts.join(", ")
                    ));
                }
            }
            let dir = driver
                .mount_paths
                .get("socket-dir")
                .map_or(socket_dir, String::as_str);
            if let Some(endpoint) = &driver.endpoint {
                let path = endpoint
                    .trim_start_matches("unix://")
                    .trim_start_matches("unix:");
                // The sidecars and the livenessprobe find the socket as csi.sock in socket-dir.
                let want = format!("{}/csi.sock", dir.trim_end_matches('/'));
                if path.trim_start_matches('/') != want.trim_start_matches('/') {
                    problems.push(format!(
                        "{pod} driver endpoint {endpoint} is not csi.sock in socket-dir ({dir}): \
                         the sidecars connect to {want}"
                    ));
                }
            }
            if let Some(p) = driver.liveness_probe
                && (p.initial_delay_seconds < 0 || p.period_seconds < 1 || p.timeout_seconds < 1)
            {
                problems.push(format!(
                    "{pod} driver livenessProbe needs initialDelaySeconds >= 0 and \
                     periodSeconds, timeoutSeconds >= 1"
                ));
            }
        }

        // Containers named in the table must be containers of the pod.
        let controller_containers = ctl.container_names();
        let mut node_containers = vec![
            crate::names::DRIVER_CONTAINER.to_owned(),
            crate::names::REGISTRAR_CONTAINER.to_owned(),
            crate::names::LIVENESS_PROBE_CONTAINER.to_owned(),
        ];
        node_containers.extend(
            self.node
                .driver
                .metrics
                .map(MetricsDef::driver_proxy_container_name),
        );
        for (pod, volumes, containers) in [
            (
                "controller",
                &ctl.driver.volumes,
                &controller_containers[..],
            ),
            ("node", &self.node.driver.volumes, &node_containers[..]),
        ] {
            for v in volumes {
                for name in v.also_mounted_in.iter().filter(|n| !containers.contains(n)) {
                    problems.push(format!(
                        "{pod} volume {} alsoMountedIn names {name}, not a container of the pod ({})",
                        v.name,
                        containers.join(", ")
                    ));
                }
            }
        }
        for (pod, order, containers) in [
            (
                "controller",
                &ctl.container_order,
                &controller_containers[..],
            ),
            ("node", &self.node.container_order, &node_containers[..]),
        ] {
            for name in order.iter().filter(|n| !containers.contains(n)) {
                problems.push(format!(
                    "{pod} containerOrder names {name}, not a container of the pod ({})",
                    containers.join(", ")
                ));
            }
        }
        problems.extend(ctl.layout_problems());
        for (field, name) in [
            ("controller.serviceAccountName", &ctl.service_account_name),
            ("node.serviceAccountName", &self.node.service_account_name),
        ] {
            if let Some(name) = name.as_deref().filter(|n| !is_dns_subdomain(n)) {
                problems.push(format!(
                    "{field} {name:?} is not a valid ServiceAccount name (lower-case letters, \
                     digits, '-' and '.', at most 253 characters)"
                ));
            }
        }
        if crate::names::controller_sa(self) == crate::names::node_sa(self) {
            problems.push(
                "controller.serviceAccountName and node.serviceAccountName are the same: each \
                 pod has its own ServiceAccount and grants"
                    .to_owned(),
            );
        }
        for (field, quantity) in [
            ("controller.driver.cpuRequest", &ctl.driver.cpu_request),
            (
                "controller.driver.memoryRequest",
                &ctl.driver.memory_request,
            ),
            ("node.driver.cpuRequest", &self.node.driver.cpu_request),
            (
                "node.driver.memoryRequest",
                &self.node.driver.memory_request,
            ),
        ] {
            if let Some(q) = quantity.as_deref().filter(|q| !is_quantity(q)) {
                problems.push(format!("{field} {q:?} is not a quantity (e.g. 10m, 50Mi)"));
            }
        }
        for (pod, rules) in [
            ("controller", &ctl.extra_rules),
            ("node", &self.node.extra_rules),
        ] {
            for r in rules {
                if r.resources
                    .iter()
                    .chain(&r.verbs)
                    .chain(&r.api_groups)
                    .any(|x| x == "*")
                {
                    problems.push(format!(
                        "{pod} extraRules use a wildcard ({:?} {:?} {:?}): name each API group, \
                         resource and verb (the operator must hold every permission it grants)",
                        r.api_groups, r.resources, r.verbs
                    ));
                }
            }
        }
        for copied in &self.copied_config_maps {
            if copied.namespace.trim().is_empty() || copied.name.trim().is_empty() {
                problems.push("a copied ConfigMap needs both namespace and name".to_owned());
            }
        }
        for name in duplicates(self.copied_config_maps.iter().map(|c| c.target())) {
            problems.push(format!("copied ConfigMap {name} is listed twice"));
        }
        self.validate_static_config_maps(&mut problems);
        for p in &self.network_policies {
            if !is_dns_subdomain(&p.name) {
                problems.push(format!(
                    "networkPolicies: {:?} is not a valid object name",
                    p.name
                ));
            }
            let selects_all = p.spec.pod_selector.as_ref().is_none_or(|s| {
                s.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
                    && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
            });
            if selects_all {
                problems.push(format!(
                    "networkPolicies: {} selects every pod of the namespace (an empty podSelector), other drivers' too: select this driver's pods by a label",
                    p.name
                ));
            }
        }
        for name in duplicates(self.network_policies.iter().map(|p| p.name.as_str())) {
            problems.push(format!("networkPolicies: {name} is listed twice"));
        }
        for name in duplicates(self.storage_classes.iter().map(|c| c.name.as_str())) {
            problems.push(format!("StorageClass {name} is listed twice"));
        }
        // With a filter, the classes that can be selected together are the driver's business.
        if self.hooks.storage_class_filter.is_none()
            && self.storage_classes.iter().filter(|c| c.default).count() > 1
        {
            problems.push("more than one StorageClass is marked default".to_owned());
        }
        for name in duplicates(self.volume_snapshot_classes.iter().map(|c| c.name.as_str())) {
            problems.push(format!("VolumeSnapshotClass {name} is listed twice"));
        }
        if self
            .volume_snapshot_classes
            .iter()
            .filter(|c| c.default)
            .count()
            > 1
        {
            problems.push("more than one VolumeSnapshotClass is marked default".to_owned());
        }
        let d = &self.csi_driver;
        if d.volume_lifecycle_modes.iter().any(|m| m == "Ephemeral")
            && d.ephemeral_volume_profile.is_none()
        {
            problems.push(
                "csiDriver supports Ephemeral volumes but has no ephemeralVolumeProfile".to_owned(),
            );
        }

        if self.removal_blocked_by_volumes && !self.removable {
            problems.push("removalBlockedByVolumes needs removable".to_owned());
        }
        self.validate_metrics_service(&mut problems);
        self.validate_rbac(&mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidDef {
                driver: self.name.clone(),
                problems,
            })
        }
    }
}

impl DriverDef {
    /// The metrics Services: port names and numbers unique, hook endpoints named as ports,
    /// `portOrder` naming the Service's ports.
    fn validate_metrics_service(&self, problems: &mut Vec<String>) {
        let service = &self.controller.metrics_service;
        for e in &service.hook_endpoints {
            if !is_port_name(&e.port_name) {
                problems.push(format!(
                    "controller.metricsService.hookEndpoints port name {:?} is not a port name \
                     (at most 15 lower-case letters, digits and '-', with a letter)",
                    e.port_name
                ));
            }
        }
        let ports = crate::metrics::metrics_ports(self);
        let node_port = self.node.driver.metrics.map(|m| m.port_in_service());
        // Two proxies on one port are reported as such; their Service ports then collide too.
        let ctl = &self.controller;
        let proxies_twice = duplicates(
            ctl.driver
                .metrics
                .iter()
                .chain(ctl.sidecars.iter().filter_map(|s| s.metrics.as_ref()))
                .map(|m| m.exposed_port)
                .chain(service.hook_endpoints.iter().map(|e| e.exposed_port)),
        );
        for (pod, numbers) in [
            (
                "controller",
                ports.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
            ),
            ("node", node_port.into_iter().collect()),
        ] {
            if numbers.contains(&0) {
                problems.push(format!("{pod} metrics Service port 0 is not a port"));
            }
            for port in duplicates(numbers)
                .into_iter()
                .filter(|p| !proxies_twice.contains(p))
            {
                problems.push(format!("{pod} metrics Service port {port} is used twice"));
            }
        }
        for name in duplicates(ports.iter().map(|(n, _)| n.as_str())) {
            problems.push(format!(
                "controller metrics Service port name {name} is used twice"
            ));
        }
        let names: Vec<&str> = ports.iter().map(|(n, _)| n.as_str()).collect();
        for name in service
            .port_order
            .iter()
            .filter(|n| !names.contains(&n.as_str()))
        {
            problems.push(format!(
                "controller.metricsService.portOrder names {name}, not a port of the metrics \
                 Service ({})",
                names.join(", ")
            ));
        }
        for name in duplicates(service.port_order.iter().map(String::as_str)) {
            problems.push(format!(
                "controller.metricsService.portOrder names {name} twice"
            ));
        }
    }

    /// The table's roles, shared role bindings and binding names: prefixed names of the
    /// driver's, rules without wildcards, only the kit's shared roles, no name used twice.
    fn validate_rbac(&self, problems: &mut Vec<String>) {
        let cluster_prefixes: Vec<String> = std::iter::once(&self.cluster_role_prefix)
            .chain(&self.former_cluster_role_prefixes)
            .map(|p| format!("{p}-"))
            .collect();
        let namespaced_prefixes = vec![
            format!("{}-", self.object_prefix),
            format!("{}-", self.cluster_role_prefix),
        ];
        let mut check_name = |field: String, name: &str, namespaced: bool| {
            let prefixes = if namespaced {
                &namespaced_prefixes
            } else {
                &cluster_prefixes
            };
            if !is_dns_subdomain(name) {
                problems.push(format!(
                    "{field} {name:?} is not a valid object name (lower-case letters, digits, \
                     '-' and '.', at most 253 characters)"
                ));
            } else if !prefixes.iter().any(|p| name.starts_with(p.as_str())) {
                problems.push(format!(
                    "{field} {name:?} does not start with one of the driver's prefixes ({}): \
                     a table names only the driver's own objects",
                    prefixes.join(", ")
                ));
            }
        };
        let shared: Vec<String> = crate::rbac::build_shared_opt_in_cluster_roles()
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        let mut other_problems = Vec::new();
        for (pod, roles, shared_roles) in [
            (
                "controller",
                &self.controller.roles,
                &self.controller.shared_roles,
            ),
            ("node", &self.node.roles, &self.node.shared_roles),
        ] {
            for role in roles {
                check_name(format!("{pod}.roles name"), &role.name, role.namespaced);
                check_name(
                    format!("{pod}.roles binding"),
                    &role.binding,
                    role.namespaced,
                );
                if role.rules.is_empty() {
                    other_problems.push(format!("{pod} role {} has no rules", role.name));
                }
                for r in role.rules.iter().filter(|r| r.has_wildcard()) {
                    other_problems.push(format!(
                        "{pod} role {} uses a wildcard ({:?} {:?} {:?}): name each API group, \
                         resource and verb (the operator must hold every permission it grants)",
                        role.name, r.api_groups, r.resources, r.verbs
                    ));
                }
            }
            for binding in shared_roles {
                check_name(
                    format!("{pod}.sharedRoles binding"),
                    &binding.binding,
                    false,
                );
                if !shared.contains(&binding.role) {
                    other_problems.push(format!(
                        "{pod}.sharedRoles names {}, not a shared role the kit knows ({})",
                        binding.role,
                        shared.join(", ")
                    ));
                }
            }
        }
        let kit_bindings = crate::rbac::kit_cluster_role_binding_names(self);
        for (kit, name) in &self.cluster_role_binding_names {
            check_name(format!("clusterRoleBindingNames {kit}"), name, false);
            if !kit_bindings.contains(kit) {
                other_problems.push(format!(
                    "clusterRoleBindingNames renames {kit}, not a ClusterRoleBinding of the \
                     kit's ({})",
                    kit_bindings.join(", ")
                ));
            }
        }
        problems.extend(other_problems);

        // Every name once per kind: a second object of a name would overwrite the first.
        let name_of = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.name.clone().unwrap_or_default()
        };
        let table_namespaced = || {
            self.controller
                .roles
                .iter()
                .chain(&self.node.roles)
                .filter(|r| r.namespaced)
        };
        let kit_roles = [
            crate::rbac::lease_role_name(self),
            crate::rbac::prometheus_role_name(self),
        ];
        for (kind, names) in [
            (
                "ClusterRole",
                crate::rbac::build_cluster_roles(self)
                    .iter()
                    .map(|r| name_of(&r.metadata))
                    .collect::<Vec<_>>(),
            ),
            (
                "ClusterRoleBinding",
                crate::rbac::build_cluster_role_bindings(self)
                    .iter()
                    .map(|b| name_of(&b.metadata))
                    .collect(),
            ),
            (
                "Role",
                kit_roles
                    .iter()
                    .cloned()
                    .chain(table_namespaced().map(|r| r.name.clone()))
                    .collect(),
            ),
            (
                "RoleBinding",
                kit_roles
                    .iter()
                    .cloned()
                    .chain(table_namespaced().map(|r| r.binding.clone()))
                    .collect(),
            ),
        ] {
            for name in duplicates(names) {
                problems.push(format!("{kind} {name} is rendered twice"));
            }
        }
    }
}

impl RuleDef {
    /// Whether the rule names `*` as an API group, resource or verb.
    pub fn has_wildcard(&self) -> bool {
        self.resources
            .iter()
            .chain(&self.verbs)
            .chain(&self.api_groups)
            .any(|x| x == "*")
    }
}

/// A port name (IANA service name): at most 15 lower-case letters, digits and '-', with a
/// letter, no '-' at either end or twice in a row.
fn is_port_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.chars().any(|c| c.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

impl DriverDef {
    /// The node pod's fields where it follows OpenShift's layout rather than the kit's:
    /// labels, nodeSelector, names of the kit's volumes and containers, the sidecars'
    /// arguments and environment.
    fn validate_node_layout(&self, problems: &mut Vec<String>) {
        let node = &self.node;
        // Shared labels are fine for the workloads (each owns its pods) and the kit's
        // PodDisruptionBudget and anti-affinity (see `names::controller_pods_selector`), but a
        // metrics Service selects by labels only and would send scrapes to the other pods.
        if node.driver.metrics.is_some()
            && (crate::names::node_pods_match_controller_selector(self)
                || crate::names::controller_pods_match_node_selector(self))
        {
            problems.push(
                "node.driver.metrics needs node pods and controller pods that no one selector \
                 matches both of (node.selector, node.podLabels, controller.selector): each \
                 metrics Service would select the other's pods"
                    .to_owned(),
            );
        }
        let selector = crate::names::node_selector(self);
        for (field, labels) in [
            ("node.podLabels", &node.pod_labels),
            (
                "node.nodeSelector",
                node.node_selector.as_ref().unwrap_or(&BTreeMap::new()),
            ),
        ] {
            if labels.keys().any(|k| k.trim().is_empty()) {
                problems.push(format!("{field} has an empty label key"));
            }
        }
        for k in node.pod_labels.keys().filter(|k| selector.contains_key(*k)) {
            problems.push(format!(
                "node.podLabels sets {k}, a label of the node's selector: set it in node.selector"
            ));
        }
        if node.pod_labels.values().any(|v| v.trim().is_empty()) {
            problems.push("node.podLabels has an empty label value".to_owned());
        }

        const KIT_VOLUMES: [&str; 3] = ["socket-dir", "kubelet-dir", "registration-dir"];
        // A table volume of a kit name is reported as reserved already.
        let mut volume_names: Vec<&str> = node
            .driver
            .volumes
            .iter()
            .map(|v| v.name.as_str())
            .filter(|n| !RESERVED_NODE_VOLUMES.contains(n))
            .collect();
        for kit in KIT_VOLUMES {
            volume_names.push(node.volume_names.get(kit).map_or(kit, String::as_str));
        }
        for (kit, name) in &node.volume_names {
            if !KIT_VOLUMES.contains(&kit.as_str()) {
                problems.push(format!(
                    "node.volumeNames renames {kit}, not one of the kit's volumes ({})",
                    KIT_VOLUMES.join(", ")
                ));
            }
            if !is_dns_label(name) {
                problems.push(format!(
                    "node.volumeNames gives {kit} the name {name:?}, not a valid volume name \
                     (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        for name in duplicates(volume_names) {
            problems.push(format!(
                "node volume name {name} is used twice (node.volumeNames and node.driver.volumes)"
            ));
        }

        const KIT_SIDECARS: [&str; 2] = [
            crate::names::REGISTRAR_CONTAINER,
            crate::names::LIVENESS_PROBE_CONTAINER,
        ];
        let mut container_names = vec![crate::names::DRIVER_CONTAINER];
        for kit in KIT_SIDECARS {
            container_names.push(node.container_names.get(kit).map_or(kit, String::as_str));
        }
        for (kit, name) in &node.container_names {
            if !KIT_SIDECARS.contains(&kit.as_str()) {
                problems.push(format!(
                    "node.containerNames renames {kit}, not one of the kit's sidecars ({})",
                    KIT_SIDECARS.join(", ")
                ));
            }
            if !is_dns_label(name) {
                problems.push(format!(
                    "node.containerNames gives {kit} the name {name:?}, not a valid container \
                     name (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        for name in duplicates(container_names) {
            problems.push(format!("node container name {name} is used twice"));
        }

        if !node.liveness_probe.pre_stop.is_empty() {
            problems.push(
                "node.livenessProbe.preStop is set: only the registrar has a preStop command"
                    .to_owned(),
            );
        }
        if !node.liveness_probe.full_args.is_empty() && !node.liveness_probe_args.is_empty() {
            problems.push(
                "node.livenessProbe.fullArgs and node.livenessProbeArgs are both set: fullArgs \
                 is the whole list"
                    .to_owned(),
            );
        }
        for (field, sidecar, port, flags) in [
            (
                "node.registrar",
                &node.registrar,
                node.registrar_healthz_port,
                &["--csi-address=", "--kubelet-registration-path="][..],
            ),
            (
                "node.livenessProbe",
                &node.liveness_probe,
                node.driver.healthz_port,
                &["--csi-address="][..],
            ),
        ] {
            for e in &sidecar.env {
                let sources = usize::from(e.value.is_some())
                    + usize::from(e.field_path.is_some())
                    + usize::from(e.config_map_key_ref.is_some());
                if sources != 1 {
                    problems.push(format!(
                        "{field}.env {} needs exactly one of value, fieldPath and configMapKeyRef",
                        e.name
                    ));
                }
            }
            for (what, quantity) in [
                ("cpu", &sidecar.requests.cpu),
                ("memory", &sidecar.requests.memory),
            ] {
                if quantity.as_deref().is_some_and(|q| q.trim().is_empty()) {
                    problems.push(format!("{field}.requests.{what} is empty"));
                }
            }
            let args = &sidecar.full_args;
            if args.is_empty() {
                continue;
            }
            for flag in flags {
                if !args.iter().any(|a| a.starts_with(flag)) {
                    problems.push(format!("{field}.fullArgs has no {flag}"));
                }
            }
            let served = args.iter().find_map(|a| {
                a.strip_prefix("--http-endpoint=")
                    .and_then(|e| e.rsplit(':').next())
                    .or_else(|| a.strip_prefix("--health-port="))
            });
            // Without a flag the livenessprobe serves its default port; the registrar none.
            let served = match (served, field) {
                (Some(p), _) => p.parse::<u16>().ok(),
                (None, "node.livenessProbe") => Some(9808),
                (None, _) => None,
            };
            if served != Some(port) {
                problems.push(format!(
                    "{field}.fullArgs serve /healthz on {}, not on {port} where the kubelet \
                     probes it",
                    served.map_or_else(|| "no port".to_owned(), |p| p.to_string())
                ));
            }
            for a in args {
                for var in env_references(a) {
                    if !sidecar.env.iter().any(|e| e.name == var) {
                        problems.push(format!(
                            "{field}.fullArgs use $({var}), which {field}.env does not set"
                        ));
                    }
                }
            }
        }
    }
}

/// The variables an argument refers to as `$(NAME)`.
fn env_references(arg: &str) -> Vec<&str> {
    let mut vars = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        vars.push(&after[..end]);
        rest = &after[end + 1..];
    }
    vars
}

/// A minimal valid table for unit tests (this crate's and the driver operator's): driver
/// `demo.csi.k8s.io`, no sidecars, no classes.
#[doc(hidden)]
pub fn test_def() -> DriverDef {
    let image = |env: &str| serde_json::json!({"env": env, "default": "example.com/x:v1"});
    serde_json::from_value(serde_json::json!({
        "name": "demo.csi.k8s.io", "shortName": "demo", "conditionPrefix": "Demo",
        "objectPrefix": "demo-csi-driver", "clusterRolePrefix": "demo",
        "images": {"driver": image("A"), "provisioner": image("B"), "attacher": image("C"),
                   "resizer": image("D"), "snapshotter": image("E"),
                   "nodeDriverRegistrar": image("F"), "livenessProbe": image("G"),
                   "kubeRbacProxy": image("H")},
        "controller": {"requiredScc": "restricted-v2", "sidecars": [],
                       "driver": {"args": [], "healthzPort": 10401}},
        "node": {"driver": {"args": [], "healthzPort": 10400}, "registrarHealthzPort": 10403},
        "csiDriver": {"attachRequired": true, "fsGroupPolicy": "File",
                      "volumeLifecycleModes": ["Persistent"]},
    }))
    .unwrap_or_else(|e| panic!("the test table is invalid: {e}"))
}
