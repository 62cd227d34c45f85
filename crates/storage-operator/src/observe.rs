//! What the cluster storage operator watches, and the snapshot of it each reconcile reads.
//! Every cache is scoped: our namespaces, our labels, or the singletons by name; nodes are
//! watched only where there is no Infrastructure API to read the platform from. The namespaces
//! are the catalogue's ([`driver_namespaces`]): the driver namespace, where the driver operators
//! run, and the operand namespaces of the drivers whose operands live apart, where only their
//! Roles and RoleBindings are ours.

use std::time::Duration;

use api::config_v1::{APIServer, ClusterOperator, FeatureGate, Infrastructure, Proxy};
use api::operator_v1::{ClusterCSIDriver, Storage};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass, VolumeAttributesClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::Config;
use kube::{Api, Client, Resource};
use opkit::runtime::{Informers, NotSynced, named, single, snapshot};
use serde::de::DeserializeOwned;

use crate::plan::OPERATOR_NAMESPACE;
use crate::registry::{DRIVER_NAMESPACE, driver_namespaces, registry};
use crate::starter::STARTER_LABEL;

/// Which optional APIs the cluster serves (OpenShift's config.openshift.io kinds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Apis {
    /// `infrastructures.config.openshift.io`.
    pub infrastructure: bool,
    /// `featuregates.config.openshift.io`.
    pub feature_gate: bool,
    /// `proxies.config.openshift.io`.
    pub proxy: bool,
    /// `clusteroperators.config.openshift.io`.
    pub cluster_operator: bool,
    /// `apiservers.config.openshift.io` (its TLS profile goes into the driver operators'
    /// config ConfigMaps).
    pub api_server: bool,
    /// `volumeattributesclasses.storage.k8s.io/v1` (Kubernetes 1.34 and later).
    pub volume_attributes_classes: bool,
}

impl Apis {
    /// Asks the API server which of the optional kinds it serves.
    pub async fn discover(client: &Client) -> Result<Self, kube::Error> {
        let served = opkit::discovery::served_resources(client, "config.openshift.io/v1").await?;
        let has = |plural: &str| served.contains(plural);
        let storage = opkit::discovery::served_resources(client, "storage.k8s.io/v1").await?;
        Ok(Self {
            infrastructure: has("infrastructures"),
            feature_gate: has("featuregates"),
            proxy: has("proxies"),
            cluster_operator: has("clusteroperators"),
            api_server: has("apiservers"),
            volume_attributes_classes: storage.contains("volumeattributesclasses"),
        })
    }
}

/// Everything the reconcile reads, as of one moment.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Optional APIs served.
    pub apis: Apis,
    /// `Storage/cluster`.
    pub storage: Option<Storage>,
    /// `Infrastructure/cluster`.
    pub infrastructure: Option<Infrastructure>,
    /// Nodes, only without the Infrastructure API.
    pub nodes: Vec<Node>,
    /// `FeatureGate/cluster`.
    pub feature_gate: Option<FeatureGate>,
    /// `Proxy/cluster`.
    pub proxy: Option<Proxy>,
    /// `ClusterOperator/storage`.
    pub cluster_operator: Option<ClusterOperator>,
    /// `APIServer/cluster`.
    pub api_server: Option<APIServer>,
    /// The driver operators' config ConfigMaps (each watched by name).
    pub config_maps: Vec<ConfigMap>,
    /// Every ClusterCSIDriver.
    pub cluster_csi_drivers: Vec<ClusterCSIDriver>,
    /// Every CSIDriver.
    pub csi_drivers: Vec<CSIDriver>,
    /// The driver namespace and the separate operand namespaces.
    pub namespaces: Vec<Namespace>,
    /// Our ServiceAccounts in the driver namespace.
    pub service_accounts: Vec<ServiceAccount>,
    /// Our Roles in the driver namespace and the separate operand namespaces.
    pub roles: Vec<Role>,
    /// Our RoleBindings in the driver namespace and the separate operand namespaces.
    pub role_bindings: Vec<RoleBinding>,
    /// Our driver operator Deployments, and the volume data source validator's.
    pub deployments: Vec<Deployment>,
    /// The volume data source validator's Deployment (also in `deployments`).
    pub validator_deployment: Option<Deployment>,
    /// The `VolumePopulator` CRD, whoever made it.
    pub volume_populator_crd: Option<CustomResourceDefinition>,
    /// `openshift-config/selinux-conflicts`, on OpenShift (with the FeatureGate API).
    pub selinux_conflicts: Option<ConfigMap>,
    /// Every StorageClass (for the storage metrics).
    pub storage_classes: Vec<StorageClass>,
    /// Every VolumeAttributesClass (for the storage metrics).
    pub volume_attributes_classes: Vec<VolumeAttributesClass>,
    /// Our ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// Our ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

/// The caches behind [`Observed`].
#[derive(Clone)]
pub struct Caches {
    apis: Apis,
    storage: Store<Storage>,
    infrastructure: Option<Store<Infrastructure>>,
    /// Every Node's platform facts ([`csi::inputs::node_facts`]), on plain Kubernetes.
    nodes: Option<opkit::runtime::Projection<Node>>,
    feature_gate: Option<Store<FeatureGate>>,
    proxy: Option<Store<Proxy>>,
    cluster_operator: Option<Store<ClusterOperator>>,
    api_server: Option<Store<APIServer>>,
    /// One per driver operator config ConfigMap of the registry, by name: the operator reads
    /// no other ConfigMap of the driver namespace.
    config_maps: Vec<Store<ConfigMap>>,
    cluster_csi_drivers: Store<ClusterCSIDriver>,
    csi_drivers: Store<CSIDriver>,
    /// One per namespace of [`driver_namespaces`], as are `roles` and `role_bindings`.
    namespaces: Vec<Store<Namespace>>,
    service_accounts: Store<ServiceAccount>,
    roles: Vec<Store<Role>>,
    role_bindings: Vec<Store<RoleBinding>>,
    deployments: Store<Deployment>,
    /// Ours in the operator's namespace: the volume data source validator's ServiceAccount and
    /// Deployment.
    operator_service_accounts: Store<ServiceAccount>,
    operator_deployments: Store<Deployment>,
    volume_populator_crd: Store<CustomResourceDefinition>,
    selinux_conflicts: Option<Store<ConfigMap>>,
    storage_classes: Store<StorageClass>,
    volume_attributes_classes: Option<Store<VolumeAttributesClass>>,
    cluster_roles: Store<ClusterRole>,
    cluster_role_bindings: Store<ClusterRoleBinding>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("apis", &self.apis)
            .finish_non_exhaustive()
    }
}

impl Caches {
    /// Starts every watch; the caller waits for [`Informers::wait_synced`].
    pub fn start(client: &Client, apis: Apis, informers: &mut Informers) -> Self {
        let ours = || Config::default().labels(STARTER_LABEL);
        fn all<K>(client: &Client) -> Api<K>
        where
            K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
                + DeserializeOwned,
        {
            Api::all(client.clone())
        }
        let ns = |client: &Client| client.clone();
        let namespaces = driver_namespaces();
        // The watch names stay as they were for the driver namespace.
        let named_in = |kind: &str, namespace: &str| {
            if namespace == DRIVER_NAMESPACE {
                kind.to_owned()
            } else {
                format!("{kind} in {namespace}")
            }
        };
        Self {
            apis,
            storage: informers.watch("storages", all(client), named("cluster")),
            infrastructure: apis
                .infrastructure
                .then(|| informers.watch("infrastructures", all(client), named("cluster"))),
            nodes: (!apis.infrastructure).then(|| {
                informers.watch_projected(
                    "nodes (platform facts)",
                    all(client),
                    Config::default(),
                    |node| Some(csi::inputs::node_facts(node)),
                )
            }),
            feature_gate: apis
                .feature_gate
                .then(|| informers.watch("featuregates", all(client), named("cluster"))),
            proxy: apis
                .proxy
                .then(|| informers.watch("proxies", all(client), named("cluster"))),
            cluster_operator: apis
                .cluster_operator
                .then(|| informers.watch("clusteroperators", all(client), named("storage"))),
            api_server: apis
                .api_server
                .then(|| informers.watch("apiservers", all(client), named("cluster"))),
            config_maps: registry()
                .iter()
                .filter_map(crate::starter::operator_config_name)
                .map(|name| {
                    informers.watch(
                        &format!("configmaps {name}"),
                        Api::namespaced(ns(client), DRIVER_NAMESPACE),
                        named(&name),
                    )
                })
                .collect(),
            cluster_csi_drivers: informers.watch(
                "clustercsidrivers",
                all(client),
                Config::default(),
            ),
            csi_drivers: informers.watch("csidrivers", all(client), Config::default()),
            namespaces: namespaces
                .iter()
                .map(|namespace| {
                    informers.watch(
                        &named_in("namespaces", namespace),
                        all(client),
                        named(namespace),
                    )
                })
                .collect(),
            service_accounts: informers.watch(
                "serviceaccounts",
                Api::namespaced(ns(client), DRIVER_NAMESPACE),
                ours(),
            ),
            roles: namespaces
                .iter()
                .map(|namespace| {
                    informers.watch(
                        &named_in("roles", namespace),
                        Api::namespaced(ns(client), namespace),
                        ours(),
                    )
                })
                .collect(),
            role_bindings: namespaces
                .iter()
                .map(|namespace| {
                    informers.watch(
                        &named_in("rolebindings", namespace),
                        Api::namespaced(ns(client), namespace),
                        ours(),
                    )
                })
                .collect(),
            deployments: informers.watch(
                "deployments",
                Api::namespaced(ns(client), DRIVER_NAMESPACE),
                ours(),
            ),
            operator_service_accounts: informers.watch(
                &named_in("serviceaccounts", OPERATOR_NAMESPACE),
                Api::namespaced(ns(client), OPERATOR_NAMESPACE),
                ours(),
            ),
            operator_deployments: informers.watch(
                &named_in("deployments", OPERATOR_NAMESPACE),
                Api::namespaced(ns(client), OPERATOR_NAMESPACE),
                ours(),
            ),
            volume_populator_crd: informers.watch(
                "customresourcedefinitions",
                all(client),
                named(crate::validator::CRD_NAME),
            ),
            selinux_conflicts: apis.feature_gate.then(|| {
                informers.watch(
                    &named_in("configmaps", crate::selinux::NAMESPACE),
                    Api::namespaced(ns(client), crate::selinux::NAMESPACE),
                    named(crate::selinux::CONFIG_MAP),
                )
            }),
            storage_classes: informers.watch("storageclasses", all(client), Config::default()),
            volume_attributes_classes: apis.volume_attributes_classes.then(|| {
                informers.watch("volumeattributesclasses", all(client), Config::default())
            }),
            cluster_roles: informers.watch("clusterroles", all(client), ours()),
            cluster_role_bindings: informers.watch("clusterrolebindings", all(client), ours()),
        }
    }

    /// The current state of every cache.
    pub fn observe(&self) -> Observed {
        Observed {
            apis: self.apis,
            storage: single(&self.storage),
            infrastructure: self.infrastructure.as_ref().and_then(single),
            nodes: self
                .nodes
                .as_ref()
                .map(|nodes| nodes.entries().into_iter().map(|(_, n)| n).collect())
                .unwrap_or_default(),
            feature_gate: self.feature_gate.as_ref().and_then(single),
            proxy: self.proxy.as_ref().and_then(single),
            cluster_operator: self.cluster_operator.as_ref().and_then(single),
            api_server: self.api_server.as_ref().and_then(single),
            config_maps: self.config_maps.iter().flat_map(snapshot).collect(),
            cluster_csi_drivers: snapshot(&self.cluster_csi_drivers),
            csi_drivers: snapshot(&self.csi_drivers),
            namespaces: self.namespaces.iter().flat_map(snapshot).collect(),
            service_accounts: snapshot(&self.service_accounts)
                .into_iter()
                .chain(snapshot(&self.operator_service_accounts))
                .collect(),
            roles: self.roles.iter().flat_map(snapshot).collect(),
            role_bindings: self.role_bindings.iter().flat_map(snapshot).collect(),
            deployments: snapshot(&self.deployments)
                .into_iter()
                .chain(snapshot(&self.operator_deployments))
                .collect(),
            validator_deployment: snapshot(&self.operator_deployments)
                .into_iter()
                .find(|d| d.metadata.name.as_deref() == Some(crate::validator::NAME)),
            volume_populator_crd: single(&self.volume_populator_crd),
            selinux_conflicts: self.selinux_conflicts.as_ref().and_then(single),
            storage_classes: snapshot(&self.storage_classes),
            volume_attributes_classes: self
                .volume_attributes_classes
                .as_ref()
                .map(snapshot)
                .unwrap_or_default(),
            cluster_roles: snapshot(&self.cluster_roles),
            cluster_role_bindings: snapshot(&self.cluster_role_bindings),
        }
    }
}

/// Starts the caches and waits for them to sync.
pub async fn start_caches(
    client: &Client,
    apis: Apis,
    timeout: Duration,
) -> Result<(Caches, Informers), NotSynced> {
    let mut informers = Informers::new();
    let caches = Caches::start(client, apis, &mut informers);
    informers.wait_synced(timeout).await?;
    Ok((caches, informers))
}
