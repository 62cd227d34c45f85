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

mod defaults;
mod validate;

pub use validate::InvalidDef;

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
    /// What the driver provisions (sizes, access modes by volume mode), from its own code and
    /// documentation and its cloud's limits: `storage-operator diagnose` judges a claim of the
    /// driver's classes by it. Nothing is rendered from it. Absent: nothing is known, and no
    /// claim is judged by it.
    #[serde(default)]
    pub volumes: Option<VolumesDef>,
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
    pub config_maps: Vec<DerivedConfigMapDef>,
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
    /// How the driver runs with a hosted control plane (HyperShift): its controller in the
    /// hosted cluster's control-plane namespace of a management cluster, the rest in the
    /// hosted (guest) cluster; see [`crate::hosted`]. Absent: the driver does not run there
    /// (OpenShift runs AWS EBS, Azure Disk, Azure File, OpenStack Cinder, Manila and PowerVS).
    #[serde(default)]
    pub hosted: Option<HostedDef>,
}

/// See [`DriverDef::hosted`]. What is the same for every driver (the guest kubeconfig of the
/// sidecars, placement on the control-plane nodes) is the kit's; this says what differs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostedDef {
    /// Whether the driver container itself calls the Kubernetes API (Azure File reads the
    /// Secrets of storage accounts there): it then gets the guest kubeconfig as the sidecars do.
    #[serde(default)]
    pub driver_reaches_guest_api: bool,
}

/// See [`DriverDef::storage_class_generator`].
pub type StorageClassGenerator = fn(&Inputs) -> Vec<StorageClassDef>;

/// See [`DriverDef::precondition`].
pub type Precondition = fn(&Inputs) -> Result<(), crate::error::HookError>;

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

/// The access modes of the Kubernetes API, in its order.
pub const ACCESS_MODES: [&str; 4] = [
    "ReadWriteOnce",
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOncePod",
];

/// The volume modes of the Kubernetes API, the default first.
pub const VOLUME_MODES: [&str; 2] = ["Filesystem", "Block"];

/// See [`DriverDef::volumes`]. A fact that is not known, or that no bound holds for every
/// class of the driver, is left out and never checked: a claim the driver would accept must
/// never be judged wrong. Where a limit depends on the class (a disk type, a SKU), the widest
/// the driver accepts with any class is given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumesDef {
    /// The smallest volume the driver creates, a quantity (e.g. `1Gi`): a claim asking for less
    /// is refused. Left out where the driver raises a small request to a size it can create.
    #[serde(default)]
    pub min_size: Option<String>,
    /// The largest volume the driver creates, a quantity (e.g. `64Ti`): a claim asking for more
    /// is refused. Where a class can raise it (a disk type), the largest of any class.
    #[serde(default)]
    pub max_size: Option<String>,
    /// The access modes (`ReadWriteOnce`, `ReadOnlyMany`, `ReadWriteMany`, `ReadWriteOncePod`)
    /// the driver accepts, by volume mode (`Filesystem`, `Block`): e.g. AWS EBS accepts
    /// `ReadWriteMany` (io2 Multi-Attach) with `Block` only. A volume mode left out is one the
    /// driver does not offer; an access mode that only some classes allow (a shared disk type)
    /// is listed. Empty: not known.
    #[serde(default)]
    pub access_modes: BTreeMap<String, Vec<String>>,
}

impl VolumesDef {
    /// `minSize` in bytes; none when it is unset or not a size (which [`DriverDef::validate`]
    /// reports).
    pub fn min_bytes(&self) -> Option<u64> {
        size_bytes(self.min_size.as_deref())
    }

    /// `maxSize` in bytes; none when it is unset or not a size.
    pub fn max_bytes(&self) -> Option<u64> {
        size_bytes(self.max_size.as_deref())
    }

    /// The volume modes the driver offers, in the API's order; empty when not known.
    pub fn volume_modes(&self) -> Vec<String> {
        VOLUME_MODES
            .iter()
            .filter(|mode| self.access_modes.contains_key(**mode))
            .map(|mode| (*mode).to_owned())
            .collect()
    }

    /// Every access mode the driver offers with at least one volume mode, in the API's order;
    /// empty when not known.
    pub fn all_access_modes(&self) -> Vec<String> {
        ACCESS_MODES
            .iter()
            .filter(|mode| self.access_modes.values().flatten().any(|m| m == **mode))
            .map(|mode| (*mode).to_owned())
            .collect()
    }
}

/// A table's size in bytes, when it is one.
fn size_bytes(size: Option<&str>) -> Option<u64> {
    let bytes = crate::quantity::parse_bytes(size?).ok()?;
    u64::try_from(bytes).ok()
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

/// Generates the operand ConfigMap's data from the source ConfigMap's: `text` is the value of
/// the source's key, `data` every key of the source (for companions such as a CA bundle).
/// An error says what is wrong with the source, for the Degraded message.
pub type ConfigMapGenerator = fn(
    inputs: &Inputs,
    text: &str,
    data: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String>;

/// Where a derived ConfigMap's input comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMapSourceDef {
    /// The source's namespace (e.g. `openshift-config`).
    pub namespace: String,
    /// The source's name (e.g. `cloud-provider-config`).
    pub name: String,
    /// The key holding the text the generator reads (e.g. `config`).
    pub key: String,
}

impl ConfigMapSourceDef {
    /// `namespace/name`, the key of [`Inputs::source_config_maps`].
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// An operand ConfigMap (or Secret) derived from a source ConfigMap.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DerivedConfigMapDef {
    /// The operand object's name, in the driver namespace.
    pub name: String,
    /// Whether the object is a Secret rather than a ConfigMap: for a generated file that holds
    /// the driver's credentials (its generator reads them from [`Inputs::credentials`]). Pods
    /// mount it as a `secret` volume; its hash rolls them as a ConfigMap's does.
    #[serde(default)]
    pub secret: bool,
    /// Its source.
    pub source: ConfigMapSourceDef,
    /// Source data that offline renders ([`Inputs::offline`], `storage-operator render`)
    /// use, so a render shows the generated object; never used by the operator.
    #[serde(default)]
    pub example: BTreeMap<String, String>,
    /// The generator; without one the source's data is copied as it is. Set by the driver
    /// module, not part of the table.
    #[serde(skip)]
    pub generate: Option<ConfigMapGenerator>,
}

impl DerivedConfigMapDef {
    /// `Secret` or `ConfigMap`, for messages.
    pub fn kind(&self) -> &'static str {
        if self.secret { "Secret" } else { "ConfigMap" }
    }
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
