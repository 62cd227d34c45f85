//! `Inputs`: everything a build needs besides the `DriverDef`, gathered by the `observe` step
//! from caches (or made up by `render` and tests). Pure code never reads the process
//! environment or the API: it gets an `Inputs` value.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use api::config_v1::{PlatformStatus, ProxyStatus, TLSSecurityProfile, TopologyMode};
use api::operator_v1::{ClusterCSIDriverSpec, LogLevel};

/// Where the controller pods may run and how many of them there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topology {
    /// OpenShift with three or more control-plane nodes: 2 replicas on master nodes, spread
    /// by anti-affinity.
    HighlyAvailable,
    /// OpenShift on one node (and HighlyAvailableArbiter/DualReplica, as library-go does):
    /// 1 replica on the master node.
    SingleReplica,
    /// OpenShift with a hosted control plane (HyperShift): no master nodes to select, 1 replica.
    External,
    /// Plain Kubernetes: 1 replica, on control-plane nodes when there are any.
    Kubernetes {
        /// Whether the cluster has nodes labelled `node-role.kubernetes.io/control-plane`.
        control_plane_nodes: bool,
    },
}

impl Topology {
    /// Every topology, for tests and `render --topology`.
    pub const ALL: [Topology; 5] = [
        Topology::HighlyAvailable,
        Topology::SingleReplica,
        Topology::External,
        Topology::Kubernetes {
            control_plane_nodes: true,
        },
        Topology::Kubernetes {
            control_plane_nodes: false,
        },
    ];

    /// The topology of an OpenShift cluster from `Infrastructure.status.controlPlaneTopology`.
    pub fn from_openshift(mode: &TopologyMode) -> Self {
        match mode {
            TopologyMode::HighlyAvailable => Self::HighlyAvailable,
            TopologyMode::External => Self::External,
            // library-go runs one replica for every other layout (arbiter, two-node, unknown).
            _ => Self::SingleReplica,
        }
    }

    /// Whether the cluster is OpenShift (and so has the service CA, SCCs and cluster monitoring).
    pub fn is_openshift(self) -> bool {
        !matches!(self, Self::Kubernetes { .. })
    }

    /// Controller replicas: 2 only on a highly available OpenShift control plane.
    pub fn controller_replicas(self) -> i32 {
        match self {
            Self::HighlyAvailable => 2,
            _ => 1,
        }
    }

    /// The node label the controller pods select, if any.
    pub fn control_plane_node_label(self) -> Option<&'static str> {
        match self {
            Self::HighlyAvailable | Self::SingleReplica => Some("node-role.kubernetes.io/master"),
            Self::Kubernetes {
                control_plane_nodes: true,
            } => Some("node-role.kubernetes.io/control-plane"),
            Self::External
            | Self::Kubernetes {
                control_plane_nodes: false,
            } => None,
        }
    }

    /// The name used on the command line and in snapshot names.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HighlyAvailable => "HighlyAvailable",
            Self::SingleReplica => "SingleReplica",
            Self::External => "External",
            Self::Kubernetes {
                control_plane_nodes: true,
            } => "Kubernetes",
            Self::Kubernetes {
                control_plane_nodes: false,
            } => "KubernetesWithoutControlPlane",
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A topology name that is not one of [`Topology::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown topology {0:?}: expected HighlyAvailable, SingleReplica, External, Kubernetes or KubernetesWithoutControlPlane"
)]
pub struct UnknownTopology(pub String);

impl FromStr for Topology {
    type Err = UnknownTopology;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Topology::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownTopology(s.to_owned()))
    }
}

/// The images after resolution: the operator's environment variable when set and not empty,
/// else the upstream default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedImages {
    /// The CSI driver.
    pub driver: String,
    /// external-provisioner.
    pub provisioner: String,
    /// external-attacher.
    pub attacher: String,
    /// external-resizer.
    pub resizer: String,
    /// csi-snapshotter.
    pub snapshotter: String,
    /// node-driver-registrar.
    pub node_driver_registrar: String,
    /// livenessprobe.
    pub liveness_probe: String,
    /// kube-rbac-proxy.
    pub kube_rbac_proxy: String,
}

/// Optional CustomResourceDefinitions; objects of a missing kind are not built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptionalCrds {
    /// `volumesnapshotclasses.snapshot.storage.k8s.io`.
    pub volume_snapshot_class: bool,
    /// `servicemonitors.monitoring.coreos.com`.
    pub service_monitor: bool,
    /// `credentialsrequests.cloudcredential.openshift.io`.
    pub credentials_request: bool,
}

impl OptionalCrds {
    /// Every optional CRD present (a full OpenShift cluster).
    pub fn all() -> Self {
        Self {
            volume_snapshot_class: true,
            service_monitor: true,
            credentials_request: true,
        }
    }
}

/// An operand kind without a typed struct, whose CRD may be missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OptionalKind {
    /// `servicemonitors.monitoring.coreos.com`.
    ServiceMonitor,
    /// `volumesnapshotclasses.snapshot.storage.k8s.io`.
    VolumeSnapshotClass,
    /// `credentialsrequests.cloudcredential.openshift.io`.
    CredentialsRequest,
}

impl OptionalKind {
    /// Every optional kind.
    pub const ALL: [OptionalKind; 3] = [
        Self::ServiceMonitor,
        Self::VolumeSnapshotClass,
        Self::CredentialsRequest,
    ];

    /// The CRD's name.
    pub fn crd_name(self) -> &'static str {
        match self {
            Self::ServiceMonitor => "servicemonitors.monitoring.coreos.com",
            Self::VolumeSnapshotClass => "volumesnapshotclasses.snapshot.storage.k8s.io",
            Self::CredentialsRequest => "credentialsrequests.cloudcredential.openshift.io",
        }
    }

    /// The kind as rendered (`kind` of the operand).
    pub fn kind(self) -> &'static str {
        match self {
            Self::ServiceMonitor => "ServiceMonitor",
            Self::VolumeSnapshotClass => "VolumeSnapshotClass",
            Self::CredentialsRequest => "CredentialsRequest",
        }
    }

    /// The kind of a rendered dynamic operand.
    pub fn of_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.kind() == kind)
    }

    /// The API resource.
    pub fn api_resource(self) -> kube_core::discovery::ApiResource {
        let (group, version, plural) = match self {
            Self::ServiceMonitor => ("monitoring.coreos.com", "v1", "servicemonitors"),
            Self::VolumeSnapshotClass => ("snapshot.storage.k8s.io", "v1", "volumesnapshotclasses"),
            Self::CredentialsRequest => {
                ("cloudcredential.openshift.io", "v1", "credentialsrequests")
            }
        };
        kube_core::discovery::ApiResource::from_gvk_with_plural(
            &kube_core::gvk::GroupVersionKind::gvk(group, version, self.kind()),
            plural,
        )
    }
}

/// A StorageClass that exists in the cluster, as far as the default-class rule cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingStorageClass {
    /// Its name.
    pub name: String,
    /// The value of its `storageclass.kubernetes.io/is-default-class` annotation, if the
    /// annotation is present (any value, even empty).
    pub default_annotation: Option<String>,
}

/// TLS settings of the metrics proxies, from the cluster's TLS security profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServingTls {
    /// e.g. `VersionTLS12`; unset means kube-rbac-proxy's default.
    pub min_version: Option<String>,
    /// IANA cipher suite names; empty means kube-rbac-proxy's default.
    pub cipher_suites: Vec<String>,
}

/// The data of a Secret, as text (values that are not UTF-8 are read lossily). Its `Debug`
/// output shows the keys only, so the values never reach a log.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretData(pub BTreeMap<String, String>);

impl SecretData {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The data of `secret`.
    pub fn of(secret: &k8s_openapi::api::core::v1::Secret) -> Self {
        Self(
            secret
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
                .collect(),
        )
    }
}

impl std::fmt::Debug for SecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Everything a build reads besides the `DriverDef`.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// The ClusterCSIDriver's spec (log level, storageClassState, driverConfig).
    pub spec: ClusterCSIDriverSpec,
    /// Cluster layout.
    pub topology: Topology,
    /// `Infrastructure.status.infrastructureName`, the cluster ID volumes are tagged with.
    pub cluster_id: Option<String>,
    /// `Infrastructure.status.platformStatus`, for driver hooks that read their platform's
    /// details (e.g. GCP resource labels).
    pub platform_status: Option<PlatformStatus>,
    /// `Proxy.status` of the cluster-wide proxy.
    pub proxy: ProxyStatus,
    /// Whether the trusted CA bundle ConfigMap has a `ca-bundle.crt` key (it is mounted only
    /// then).
    pub trusted_ca_bundle: bool,
    /// Hashes of Secrets of the operand namespace, by name (see [`crate::hash`]).
    pub secret_hashes: BTreeMap<String, String>,
    /// The data of the credentials Secret ([`DriverDef::credentials`]), for generators of
    /// derived Secrets (see [`crate::derived`]); empty while it does not exist. Offline renders
    /// use the table's example.
    pub credentials: SecretData,
    /// Hashes of ConfigMaps of the operand namespace, by name.
    pub config_map_hashes: BTreeMap<String, String>,
    /// The images to run.
    pub images: ResolvedImages,
    /// The driver's extra images by role ([`DriverDef::extra_images`]), resolved as
    /// [`ResolvedImages`] are.
    pub extra_images: BTreeMap<String, String>,
    /// Which optional CRDs exist.
    pub crds: OptionalCrds,
    /// StorageClasses that exist now.
    pub storage_classes: Vec<ExistingStorageClass>,
    /// The `security.openshift.io/csi-ephemeral-volume-profile` label of the existing
    /// CSIDriver, kept when an admin set it.
    pub csi_driver_ephemeral_profile: Option<String>,
    /// TLS settings of the metrics proxies.
    pub tls: ServingTls,
    /// The data of each source of [`DriverDef::copied_config_maps`] that exists, by the name
    /// of its copy.
    pub copied_config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// The data of the source ConfigMaps of derived ConfigMaps that exist, by
    /// `namespace/name` (see [`crate::derived`]).
    pub source_config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// What the driver operator's probe found outside the cluster (e.g. the share types a
    /// cloud offers), for the driver's hooks; empty without a probe.
    pub probe_facts: Vec<String>,
    /// What the driver operator's tasks have established, by task name (see
    /// `operator::Task::facts`); a task without facts has no entry. Offline renders use the
    /// table's `taskExamples`.
    pub task_facts: BTreeMap<String, Vec<String>>,
    /// `Infrastructure.spec.platformSpec`, for driver hooks and tasks that read the platform's
    /// desired layout (e.g. vSphere's failure domains).
    pub platform_spec: Option<api::config_v1::PlatformSpec>,
    /// Whether the operator's host runs in FIPS mode, and with it the cluster's nodes (see
    /// `operator::Settings::host_fips`); false in offline renders.
    pub host_fips: bool,
    /// The short-lived token role (an AWS IAM role ARN) of each CredentialsRequest, by request
    /// name, where the operator's environment sets the request's role variable (see
    /// `credentials::role_variable`): the request then asks for STS credentials.
    pub token_roles: BTreeMap<String, String>,
    /// The hosted control plane the controller runs in (HyperShift), or `None` when the whole
    /// driver runs in one cluster. Hooks read it to run their part differently there (see
    /// [`crate::hosted`]).
    pub hosted: Option<HostedControlPlane>,
}

/// A hosted control plane (HyperShift): where a hosted cluster's controllers run in the
/// management cluster, and what its `HostedControlPlane` object asks of their pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostedControlPlane {
    /// The control-plane namespace of the management cluster (e.g. `clusters-hosted`).
    pub namespace: String,
    /// The release the hosted cluster runs (`release.openshift.io/desired-version`).
    pub release_version: String,
    /// `HostedControlPlane.spec.nodeSelector`: where the control-plane pods must run.
    pub node_selector: BTreeMap<String, String>,
    /// `HostedControlPlane.spec.labels`: added to the control-plane pods.
    pub labels: BTreeMap<String, String>,
    /// `HostedControlPlane.spec.tolerations`: added to those of every control-plane pod.
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// The user the control-plane pods run as, where the management cluster has no
    /// SecurityContextConstraints to pick one (`RUN_AS_USER`, e.g. AKS).
    pub run_as_user: Option<i64>,
    /// Images built for the management cluster's architecture, which may differ from the
    /// guest's.
    pub images: ControlPlaneImages,
    /// The `HostedControlPlane` object these settings were read from, where one was.
    pub object_name: Option<String>,
    /// `HostedControlPlane.spec.configuration.apiServer.tlsSecurityProfile`: the TLS settings of
    /// the control plane's servers (Intermediate where unset). The error says why the field
    /// cannot be read, naming it.
    pub tls_profile: Option<Result<TLSSecurityProfile, String>>,
    /// Hashes of the Secrets of the control-plane namespace the controller mounts that are not
    /// the driver operator's own (the credentials HyperShift puts there), by name (see
    /// [`crate::hash`]): the controller's pods roll when they change, as the guest's when the
    /// guest's do.
    pub secret_hashes: BTreeMap<String, String>,
}

impl HostedControlPlane {
    /// The API group, version and plural of HyperShift's `HostedControlPlane` objects (one per
    /// control-plane namespace).
    pub const API: (&'static str, &'static str, &'static str) =
        ("hypershift.openshift.io", "v1beta1", "hostedcontrolplanes");

    /// [`HostedControlPlane::API`] as the resource a dynamic client addresses.
    pub fn api_resource() -> kube_core::ApiResource {
        let (group, version, plural) = Self::API;
        kube_core::ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version: format!("{group}/{version}"),
            kind: "HostedControlPlane".to_owned(),
            plural: plural.to_owned(),
        }
    }

    /// How errors name the TLS profile of this control plane: the field of its
    /// `HostedControlPlane` object.
    pub fn tls_profile_field(&self) -> String {
        format!(
            "HostedControlPlane {}/{} spec.configuration.apiServer.tlsSecurityProfile",
            self.namespace,
            self.object_name.as_deref().unwrap_or("*")
        )
    }

    /// These settings with the placement the `HostedControlPlane` object `object` asks of its
    /// control-plane pods (`spec.nodeSelector`, `spec.labels`, `spec.tolerations`) and its TLS
    /// profile (`spec.configuration.apiServer.tlsSecurityProfile`); a placement field it does
    /// not set, or cannot be read, leaves that part empty.
    pub fn with_object(&self, object: &serde_json::Value) -> Self {
        let spec = &object["spec"];
        let strings = |v: &serde_json::Value| -> BTreeMap<String, String> {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut read = Self {
            node_selector: strings(&spec["nodeSelector"]),
            labels: strings(&spec["labels"]),
            tolerations: serde_json::from_value(spec["tolerations"].clone()).unwrap_or_default(),
            object_name: object["metadata"]["name"].as_str().map(str::to_owned),
            tls_profile: None,
            ..self.clone()
        };
        let profile = &spec["configuration"]["apiServer"]["tlsSecurityProfile"];
        if !profile.is_null() {
            read.tls_profile = Some(
                serde_json::from_value::<TLSSecurityProfile>(profile.clone()).map_err(|e| {
                    format!(
                        "{} cannot be read ({e}); set type to Old, Intermediate, Modern, or Custom \
                         with custom.ciphers and custom.minTLSVersion",
                        read.tls_profile_field()
                    )
                }),
            );
        }
        read
    }

    /// The settings HyperShift gives its control-plane pods through the environment
    /// (`RELEASE_VERSION`, `RUN_AS_USER`, `DRIVER_CONTROL_PLANE_IMAGE`,
    /// `LIVENESS_PROBE_CONTROL_PLANE_IMAGE`, `KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE`), for the
    /// control plane in `namespace`; the HostedControlPlane object's placement is not in the
    /// environment and stays empty. An unset or empty variable is not set.
    pub fn from_env(namespace: &str, env: &BTreeMap<String, String>) -> Result<Self, BadRunAsUser> {
        let get = |name: &str| env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let run_as_user = get("RUN_AS_USER")
            .map(|v| {
                v.parse::<i64>()
                    .ok()
                    .filter(|uid| *uid >= 0)
                    .ok_or_else(|| BadRunAsUser(v.to_owned()))
            })
            .transpose()?;
        Ok(Self {
            namespace: namespace.to_owned(),
            release_version: get("RELEASE_VERSION").unwrap_or_default().to_owned(),
            run_as_user,
            images: ControlPlaneImages {
                driver: get("DRIVER_CONTROL_PLANE_IMAGE").map(str::to_owned),
                liveness_probe: get("LIVENESS_PROBE_CONTROL_PLANE_IMAGE").map(str::to_owned),
                kube_rbac_proxy: get("KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE").map(str::to_owned),
            },
            ..Self::default()
        })
    }
}

/// `RUN_AS_USER` is not a user ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RUN_AS_USER is {0:?}: it must be a non-negative integer (a user ID), or unset")]
pub struct BadRunAsUser(pub String);

/// The controller's images for the management cluster, where set (OpenShift's
/// `*_CONTROL_PLANE_IMAGE` variables); the guest's images otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlPlaneImages {
    /// The driver container's (`DRIVER_CONTROL_PLANE_IMAGE`).
    pub driver: Option<String>,
    /// The livenessprobe's (`LIVENESS_PROBE_CONTROL_PLANE_IMAGE`).
    pub liveness_probe: Option<String>,
    /// The kube-rbac-proxies' (`KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE`).
    pub kube_rbac_proxy: Option<String>,
}

impl Inputs {
    /// The operand log level with the API default applied.
    pub fn log_level(&self) -> LogLevel {
        self.spec.operator.log_level()
    }

    /// The klog verbosity of every operand container (`--v=N`).
    pub fn verbosity(&self) -> u8 {
        self.log_level().klog_verbosity()
    }
}

/// Pure conversions the `observe` step uses to turn cached API objects into [`Inputs`] fields.
pub mod from_objects;

mod for_driver;
pub use for_driver::resolve;

/// What the operators read of a Node (its name, its `node-role.kubernetes.io/*` labels and its
/// provider ID: the cluster's layout and platform on plain Kubernetes), the rest dropped so a
/// cache of every Node stays small on a large cluster.
pub fn node_facts(node: &k8s_openapi::api::core::v1::Node) -> k8s_openapi::api::core::v1::Node {
    use k8s_openapi::api::core::v1::{Node, NodeSpec};
    let labels = node.metadata.labels.as_ref().map(|labels| {
        labels
            .iter()
            .filter(|(key, _)| key.starts_with("node-role.kubernetes.io/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: node.metadata.name.clone(),
            labels,
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: node.spec.as_ref().and_then(|s| s.provider_id.clone()),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod node_facts_tests {
    use super::*;

    #[test]
    fn node_facts_keep_the_role_labels_and_provider_id_only() {
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {
                "node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": "n1"},
                "annotations": {"big": "x"}},
            "spec": {"providerID": "gce://p/z/n1", "podCIDR": "10.0.0.0/24"},
            "status": {"images": [{"names": ["a"], "sizeBytes": 1}]}
        }))
        .unwrap();
        let facts = node_facts(&node);
        assert_eq!(
            serde_json::to_value(&facts).unwrap(),
            serde_json::json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
                "spec": {"providerID": "gce://p/z/n1"}
            })
        );
        assert_eq!(
            from_objects::kubernetes_topology(&[facts]),
            from_objects::kubernetes_topology(&[node])
        );
    }
}
