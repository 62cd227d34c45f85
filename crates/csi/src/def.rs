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
    /// ConfigMaps of other namespaces that the operator copies into the operand namespace
    /// while they exist, so pods can mount them (e.g. a cloud's custom CA bundle).
    /// Hooks see their data in [`Inputs::copied_config_maps`].
    #[serde(default)]
    pub copied_config_maps: Vec<CopiedConfigMapDef>,
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
    /// without a value: then it takes that place.
    #[serde(default)]
    pub env: Vec<EnvDef>,
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
    /// The provider-specific spec, verbatim.
    pub provider_spec: serde_json::Value,
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
        if !self.controller.selector.is_empty() && self.controller.selector == self.node.selector {
            problems.push(
                "controller.selector and node.selector are the same: each must select its own pods"
                    .to_owned(),
            );
        }
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

/// A minimal valid table for the crate's unit tests: driver `demo.csi.k8s.io`, no sidecars,
/// no classes.
#[cfg(test)]
pub(crate) fn test_def() -> DriverDef {
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
