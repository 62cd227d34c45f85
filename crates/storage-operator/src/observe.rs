//! What the cluster storage operator watches, and the snapshot of it each reconcile reads.
//! Every cache is scoped: our namespaces, our labels, or the singletons by name; nodes are
//! watched only where there is no Infrastructure API to read the platform from. The namespaces
//! are the catalogue's ([`driver_namespaces`]): the driver namespace, where the driver operators
//! run, and the operand namespaces of the drivers whose operands live apart, where only their
//! Roles and RoleBindings are ours. Prometheus' ServiceMonitor and PrometheusRule CRDs are
//! watched by name; the operator's object of each kind (by name, in its namespace, whoever made
//! it) gets a cache once that CRD exists. On OpenShift (with the Infrastructure API) the vSphere
//! problem detector's objects are watched each by its name, whoever made them, and the two
//! Secrets and the cloud config it restarts on are watched by name and kept as hashes only.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::config_v1::{APIServer, ClusterOperator, FeatureGate, Infrastructure, Proxy};
use api::operator_v1::{ClusterCSIDriver, Storage};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass, VolumeAttributesClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::{self, Config};
use kube::{Api, Client, Resource};
use opkit::runtime::{Informers, NotSynced, named, single, snapshot};
use serde::de::DeserializeOwned;

use crate::monitoring;
use crate::names::OPERATOR_NAMESPACE;
use crate::registry::{DRIVER_NAMESPACE, driver_namespaces, registry};
use crate::starter::STARTER_LABEL;
use crate::validator;

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
    /// Our driver operators' metrics Services.
    pub services: Vec<Service>,
    /// The volume data source validator's objects, whoever made them (also in
    /// `service_accounts`, `cluster_roles`, `cluster_role_bindings` and `deployments`).
    pub validator: ValidatorObjects,
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
    /// The ServiceMonitor and PrometheusRule of our names in the operator's namespace, whoever
    /// made them, and whether their CRDs exist (absent from the map: no CRD).
    pub monitoring: BTreeMap<monitoring::Kind, monitoring::Seen>,
    /// The vSphere problem detector's objects and inputs, on OpenShift.
    pub vsphere_detector: DetectorObserved,
    /// With a hosted control plane: the control plane whose namespace of the management
    /// cluster the driver operators run in (set by the controller, not a cache). The objects
    /// of ours there are in the lists above, told apart by namespace.
    pub hosted: Option<csi_kit::HostedControlPlane>,
    /// With a hosted control plane, its `HostedControlPlane` object (as JSON), when HyperShift's
    /// API is served in the management cluster and the object exists.
    pub hosted_control_plane: Option<serde_json::Value>,
    /// With a hosted control plane, why the management cluster is unreachable, when it is (set
    /// by the controller, which asks it when its watches there fail).
    pub management_unreachable: Option<String>,
    /// With a hosted control plane, the drivers' controller Deployments in the control-plane
    /// namespace (see [`crate::deployment_version`]).
    pub driver_controllers: Vec<crate::deployment_version::DriverController>,
}

/// The volume data source validator's objects, read by name whoever made them: the names are
/// fixed (OpenShift's), so one that someone else made must be seen to be left alone.
#[derive(Clone, Debug, Default)]
pub struct ValidatorObjects {
    /// Its ServiceAccount in the operator's namespace.
    pub service_account: Option<ServiceAccount>,
    /// Its ClusterRole.
    pub cluster_role: Option<ClusterRole>,
    /// Its ClusterRoleBinding.
    pub cluster_role_binding: Option<ClusterRoleBinding>,
    /// Its Deployment in the operator's namespace.
    pub deployment: Option<Deployment>,
    /// The `VolumePopulator` CRD.
    pub crd: Option<CustomResourceDefinition>,
}

/// The vSphere problem detector's objects, whoever made them (each watched by its name), and
/// the hashes of what it reads (the Secrets are kept as hashes only, never their data).
#[derive(Clone, Debug, Default)]
pub struct DetectorObserved {
    /// Its ServiceAccount.
    pub service_accounts: Vec<ServiceAccount>,
    /// Its Role.
    pub roles: Vec<Role>,
    /// Its RoleBinding.
    pub role_bindings: Vec<RoleBinding>,
    /// Its ClusterRole.
    pub cluster_roles: Vec<ClusterRole>,
    /// Its ClusterRoleBinding.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// Its ConfigMaps (trusted CA bundle, configuration).
    pub config_maps: Vec<ConfigMap>,
    /// Its metrics Service.
    pub services: Vec<Service>,
    /// Its Deployment.
    pub deployment: Option<Deployment>,
    /// The hashes of its credentials, serving certificate and cloud config.
    pub hashes: crate::vsphere_detector::InputHashes,
    /// The admin's ConfigMap `vsphere-problem-detector` (`alertsDisabled`).
    pub user_config: Option<ConfigMap>,
    /// Its ServiceMonitor and PrometheusRule, on vSphere (as [`Observed::monitoring`]).
    pub monitoring: BTreeMap<monitoring::Kind, monitoring::Seen>,
}

/// The caches behind [`Observed`].
#[derive(Clone)]
pub struct Caches {
    apis: Apis,
    storage: Store<Storage>,
    infrastructure: Option<Store<Infrastructure>>,
    /// Every Node's platform facts ([`csi_kit::inputs::node_facts`]), on plain Kubernetes.
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
    services: Store<Service>,
    /// The volume data source validator's objects, by name.
    validator_service_account: Store<ServiceAccount>,
    validator_cluster_role: Store<ClusterRole>,
    validator_cluster_role_binding: Store<ClusterRoleBinding>,
    validator_deployment: Store<Deployment>,
    volume_populator_crd: Store<CustomResourceDefinition>,
    selinux_conflicts: Option<Store<ConfigMap>>,
    storage_classes: Store<StorageClass>,
    volume_attributes_classes: Option<Store<VolumeAttributesClass>>,
    cluster_roles: Store<ClusterRole>,
    cluster_role_bindings: Store<ClusterRoleBinding>,
    /// The monitoring kinds' CRDs, each by name.
    monitoring_crds: BTreeMap<monitoring::Kind, Store<CustomResourceDefinition>>,
    /// The monitoring objects of our names, each watched (by name) once its CRD exists.
    monitoring: MonitoringCaches,
    /// With the Infrastructure API (OpenShift) only: the detector runs nowhere else.
    vsphere_detector: Option<DetectorCaches>,
    /// With a hosted control plane, ours in its namespace of the management cluster.
    management: Option<ManagementCaches>,
    /// Which watches are failing.
    health: opkit::runtime::WatchHealth,
}

/// Where the driver operators go with a hosted control plane (the driver operator's own notion:
/// the management cluster's client, the control-plane namespace, whether HyperShift's
/// `HostedControlPlane` API is served there).
pub use driver_operator::observe::Management;

/// With a hosted control plane, the driver operators' objects in the control-plane namespace
/// of the management cluster (see [`crate::hosted`]), by the starter's label.
#[derive(Clone)]
struct ManagementCaches {
    service_accounts: Store<ServiceAccount>,
    roles: Store<Role>,
    role_bindings: Store<RoleBinding>,
    config_maps: Store<ConfigMap>,
    deployments: Store<Deployment>,
    services: Store<Service>,
    /// HyperShift's `HostedControlPlane` of the namespace (as JSON), where its API is served.
    hosted_control_planes: Option<opkit::runtime::Projection<serde_json::Value>>,
    /// The drivers' controller Deployments (whoever made them), projected.
    driver_controllers: opkit::runtime::Projection<crate::deployment_version::DriverController>,
}

impl ManagementCaches {
    fn start(management: &Management<'_>, informers: &mut Informers) -> Self {
        let (client, namespace) = (management.client, management.namespace);
        let ours = || Config::default().labels(STARTER_LABEL);
        let watch_suffix = driver_operator::observe::management_watch_suffix(namespace);
        let watch_name = |kind: &str| format!("{kind} {watch_suffix}");
        // The controller Deployments of the drivers that run hosted.
        let controllers: Vec<String> = crate::registry::registry()
            .into_iter()
            .filter(|entry| entry.hosted)
            .filter_map(|entry| drivers::by_name(entry.short_name).ok())
            .map(|def| csi_kit::names::controller(&def))
            .collect();
        Self {
            driver_controllers: informers.watch_projected(
                &watch_name("deployments (drivers' controllers)"),
                Api::<Deployment>::namespaced(client.clone(), namespace),
                Config::default(),
                move |deployment| crate::deployment_version::project(deployment, &controllers),
            ),
            hosted_control_planes: management.hosted_control_planes.then(|| {
                driver_operator::observe::watch_hosted_control_planes(informers, client, namespace)
            }),
            service_accounts: informers.watch(
                &watch_name("serviceaccounts"),
                Api::namespaced(client.clone(), namespace),
                ours(),
            ),
            roles: informers.watch(
                &watch_name("roles"),
                Api::namespaced(client.clone(), namespace),
                ours(),
            ),
            role_bindings: informers.watch(
                &watch_name("rolebindings"),
                Api::namespaced(client.clone(), namespace),
                ours(),
            ),
            config_maps: informers.watch(
                &watch_name("configmaps"),
                Api::namespaced(client.clone(), namespace),
                ours(),
            ),
            deployments: informers.watch(
                &watch_name("deployments"),
                Api::namespaced(client.clone(), namespace),
                ours(),
            ),
            services: informers.watch(
                &watch_name("services"),
                Api::namespaced(client.clone(), namespace),
                ours(),
            ),
        }
    }

    /// Adds what these caches hold to the guest's objects.
    fn observe_into(&self, observed: &mut Observed) {
        observed.hosted_control_plane = self
            .hosted_control_planes
            .as_ref()
            .and_then(|p| p.entries().into_iter().next())
            .map(|(_, object)| object);
        observed
            .service_accounts
            .extend(snapshot(&self.service_accounts));
        observed.roles.extend(snapshot(&self.roles));
        observed.role_bindings.extend(snapshot(&self.role_bindings));
        observed.config_maps.extend(snapshot(&self.config_maps));
        observed.deployments.extend(snapshot(&self.deployments));
        observed.services.extend(snapshot(&self.services));
        observed.driver_controllers = self
            .driver_controllers
            .entries()
            .into_iter()
            .map(|(_, controller)| controller)
            .collect();
    }
}

/// The started caches of monitoring objects, by kind and name.
type MonitoringStores = BTreeMap<(monitoring::Kind, &'static str), Store<DynamicObject>>;

/// The caches of the monitoring kinds, started lazily: a watch of a kind whose CRD is missing
/// would fail, and keep the caches from syncing at start.
#[derive(Clone)]
struct MonitoringCaches {
    client: Client,
    trigger: Arc<opkit::runtime::Trigger>,
    stores: Arc<Mutex<MonitoringStores>>,
    tasks: Arc<Mutex<tokio::task::JoinSet<()>>>,
}

impl MonitoringCaches {
    /// The cache of `kind`'s object of our name, started the first time its CRD is seen. Its
    /// changes pull the trigger every other cache pulls. A poisoned lock (a panic while it was
    /// held) still holds a consistent map, so it is used.
    fn store(&self, kind: monitoring::Kind, name: &'static str) -> Store<DynamicObject> {
        let mut stores = self
            .stores
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(store) = stores.get(&(kind, name)) {
            return store.clone();
        }
        let resource = kind.api_resource();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), OPERATOR_NAMESPACE, &resource);
        let writer = Writer::new(resource);
        let store = writer.as_reader();
        let trigger = self.trigger.clone();
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .spawn(async move {
                let mut events = std::pin::pin!(
                    watcher::watcher(api, named(name))
                        .backoff(opkit::backoff::WatchBackoff::default())
                        .reflect(writer)
                );
                while let Some(event) = events.next().await {
                    match event {
                        Ok(_) => trigger.pull(),
                        Err(error) => {
                            tracing::warn!(watch = kind.kind(), %error, "watch failed; retrying")
                        }
                    }
                }
            });
        stores.insert((kind, name), store.clone());
        store
    }
}

/// The vSphere problem detector's caches: each object by its name, in its namespace (so that
/// one made by someone else is seen, and left alone), and the hashes of its inputs.
#[derive(Clone)]
struct DetectorCaches {
    service_account: Store<ServiceAccount>,
    role: Store<Role>,
    role_binding: Store<RoleBinding>,
    cluster_role: Store<ClusterRole>,
    cluster_role_binding: Store<ClusterRoleBinding>,
    trusted_ca_bundle: Store<ConfigMap>,
    operator_config: Store<ConfigMap>,
    service: Store<Service>,
    deployment: Store<Deployment>,
    credentials: opkit::runtime::Projection<String>,
    serving_cert: opkit::runtime::Projection<String>,
    cloud_config: opkit::runtime::Projection<String>,
    user_config: Store<ConfigMap>,
}

impl DetectorCaches {
    fn start(client: &Client, informers: &mut Informers) -> Self {
        use crate::vsphere_detector as d;
        fn in_ns<K>(client: &Client) -> Api<K>
        where
            K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
        {
            Api::namespaced(client.clone(), OPERATOR_NAMESPACE)
        }
        let watch_name =
            |kind: &str, name: &str| format!("{kind} {name} (vsphere-problem-detector)");
        Self {
            service_account: informers.watch(
                &watch_name("serviceaccount", d::NAME),
                in_ns(client),
                named(d::NAME),
            ),
            role: informers.watch(&watch_name("role", d::ROLE), in_ns(client), named(d::ROLE)),
            role_binding: informers.watch(
                &watch_name("rolebinding", d::ROLE_BINDING),
                in_ns(client),
                named(d::ROLE_BINDING),
            ),
            cluster_role: informers.watch(
                &watch_name("clusterrole", d::CLUSTER_ROLE),
                Api::all(client.clone()),
                named(d::CLUSTER_ROLE),
            ),
            cluster_role_binding: informers.watch(
                &watch_name("clusterrolebinding", d::CLUSTER_ROLE_BINDING),
                Api::all(client.clone()),
                named(d::CLUSTER_ROLE_BINDING),
            ),
            trusted_ca_bundle: informers.watch(
                &watch_name("configmap", d::TRUSTED_CA_BUNDLE),
                in_ns(client),
                named(d::TRUSTED_CA_BUNDLE),
            ),
            operator_config: informers.watch(
                &watch_name("configmap", d::OPERATOR_CONFIG),
                in_ns(client),
                named(d::OPERATOR_CONFIG),
            ),
            service: informers.watch(
                &watch_name("service", d::SERVICE),
                in_ns(client),
                named(d::SERVICE),
            ),
            deployment: informers.watch(
                &watch_name("deployment", d::NAME),
                in_ns(client),
                named(d::NAME),
            ),
            credentials: informers.watch_projected(
                &watch_name("secret", d::CREDENTIALS),
                Api::<Secret>::namespaced(client.clone(), OPERATOR_NAMESPACE),
                named(d::CREDENTIALS),
                |secret| Some(csi_kit::hash::secret_hash(secret)),
            ),
            serving_cert: informers.watch_projected(
                &watch_name("secret", d::SERVING_CERT),
                Api::<Secret>::namespaced(client.clone(), OPERATOR_NAMESPACE),
                named(d::SERVING_CERT),
                |secret| Some(csi_kit::hash::secret_hash(secret)),
            ),
            cloud_config: informers.watch_projected(
                &watch_name("configmap", d::CLOUD_CONFIG),
                Api::<ConfigMap>::namespaced(client.clone(), d::CLOUD_CONFIG_NAMESPACE),
                named(d::CLOUD_CONFIG),
                |config_map| Some(csi_kit::hash::config_map_hash(config_map)),
            ),
            user_config: informers.watch(
                &watch_name("configmap", d::USER_CONFIG),
                in_ns(client),
                named(d::USER_CONFIG),
            ),
        }
    }

    fn observe(&self) -> DetectorObserved {
        let hash =
            |p: &opkit::runtime::Projection<String>| p.entries().into_iter().next().map(|(_, h)| h);
        DetectorObserved {
            service_accounts: snapshot(&self.service_account),
            roles: snapshot(&self.role),
            role_bindings: snapshot(&self.role_binding),
            cluster_roles: snapshot(&self.cluster_role),
            cluster_role_bindings: snapshot(&self.cluster_role_binding),
            config_maps: snapshot(&self.trusted_ca_bundle)
                .into_iter()
                .chain(snapshot(&self.operator_config))
                .collect(),
            services: snapshot(&self.service),
            deployment: single(&self.deployment),
            hashes: crate::vsphere_detector::InputHashes {
                credentials: hash(&self.credentials),
                serving_cert: hash(&self.serving_cert),
                cloud_config: hash(&self.cloud_config),
            },
            user_config: single(&self.user_config),
            monitoring: BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("apis", &self.apis)
            .finish_non_exhaustive()
    }
}

impl Caches {
    /// Starts every watch; the caller waits for [`Informers::wait_synced`]. With `management`
    /// (a client of the management cluster and the control-plane namespace), the driver
    /// operators' objects there are watched too.
    pub fn start(
        client: &Client,
        apis: Apis,
        management: Option<&Management<'_>>,
        informers: &mut Informers,
    ) -> Self {
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
                    |node| Some(csi_kit::inputs::node_facts(node)),
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
            services: informers.watch(
                "services",
                Api::namespaced(ns(client), DRIVER_NAMESPACE),
                ours(),
            ),
            validator_service_account: informers.watch(
                &named_in("serviceaccounts", OPERATOR_NAMESPACE),
                Api::namespaced(ns(client), OPERATOR_NAMESPACE),
                named(validator::NAME),
            ),
            validator_cluster_role: informers.watch(
                "clusterroles (volume data source validator)",
                all(client),
                named(validator::NAME),
            ),
            validator_cluster_role_binding: informers.watch(
                "clusterrolebindings (volume data source validator)",
                all(client),
                named(validator::NAME),
            ),
            validator_deployment: informers.watch(
                &named_in("deployments", OPERATOR_NAMESPACE),
                Api::namespaced(ns(client), OPERATOR_NAMESPACE),
                named(validator::NAME),
            ),
            volume_populator_crd: informers.watch(
                "customresourcedefinitions",
                all(client),
                named(validator::CRD_NAME),
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
            monitoring_crds: monitoring::Kind::ALL
                .into_iter()
                .map(|kind| {
                    let name = format!("customresourcedefinitions/{}", kind.crd_name());
                    (
                        kind,
                        informers.watch(&name, all(client), named(kind.crd_name())),
                    )
                })
                .collect(),
            monitoring: MonitoringCaches {
                client: client.clone(),
                trigger: informers.trigger(),
                stores: Arc::default(),
                tasks: Arc::default(),
            },
            vsphere_detector: apis
                .infrastructure
                .then(|| DetectorCaches::start(client, informers)),
            management: management.map(|m| ManagementCaches::start(m, informers)),
            health: informers.health(),
        }
    }

    /// Which watches are failing.
    pub fn health(&self) -> &opkit::runtime::WatchHealth {
        &self.health
    }

    /// What is seen of each monitoring kind (see [`monitoring::Seen`]), for the objects named
    /// `name_of` each kind.
    fn observe_monitoring(
        &self,
        name_of: impl Fn(monitoring::Kind) -> &'static str,
    ) -> BTreeMap<monitoring::Kind, monitoring::Seen> {
        self.monitoring_crds
            .iter()
            .filter(|(_, crd)| !crd.state().is_empty())
            .map(|(kind, _)| {
                let store = self.monitoring.store(*kind, name_of(*kind));
                let ready = store
                    .wait_until_ready()
                    .now_or_never()
                    .is_some_and(|r| r.is_ok());
                let seen = if ready {
                    monitoring::Seen::Cached(store.state().first().map(|o| (**o).clone()))
                } else {
                    monitoring::Seen::Filling
                };
                (*kind, seen)
            })
            .collect()
    }

    /// The current state of every cache.
    pub fn observe(&self) -> Observed {
        let validator = ValidatorObjects {
            service_account: single(&self.validator_service_account),
            cluster_role: single(&self.validator_cluster_role),
            cluster_role_binding: single(&self.validator_cluster_role_binding),
            deployment: single(&self.validator_deployment),
            crd: single(&self.volume_populator_crd),
        };
        let mut observed = Observed {
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
            service_accounts: with(snapshot(&self.service_accounts), &validator.service_account),
            roles: self.roles.iter().flat_map(snapshot).collect(),
            role_bindings: self.role_bindings.iter().flat_map(snapshot).collect(),
            deployments: with(snapshot(&self.deployments), &validator.deployment),
            services: snapshot(&self.services),
            selinux_conflicts: self.selinux_conflicts.as_ref().and_then(single),
            storage_classes: snapshot(&self.storage_classes),
            volume_attributes_classes: self
                .volume_attributes_classes
                .as_ref()
                .map(snapshot)
                .unwrap_or_default(),
            cluster_roles: with(snapshot(&self.cluster_roles), &validator.cluster_role),
            cluster_role_bindings: with(
                snapshot(&self.cluster_role_bindings),
                &validator.cluster_role_binding,
            ),
            validator,
            monitoring: self.observe_monitoring(monitoring::Kind::object_name),
            vsphere_detector: self
                .vsphere_detector
                .as_ref()
                .map(|caches| {
                    let mut detector = caches.observe();
                    // Its ServiceMonitor and PrometheusRule are watched (by name) only on
                    // vSphere, where it runs.
                    let on_vsphere = self.infrastructure.as_ref().and_then(single).is_some_and(
                        |i: Infrastructure| {
                            crate::platform::from_infrastructure(&i).platform
                                == api::config_v1::PlatformType::VSphere
                        },
                    );
                    if on_vsphere {
                        detector.monitoring =
                            self.observe_monitoring(crate::vsphere_detector::monitoring_name);
                    }
                    detector
                })
                .unwrap_or_default(),
            hosted: None,
            hosted_control_plane: None,
            management_unreachable: None,
            driver_controllers: Vec::new(),
        };
        if let Some(management) = &self.management {
            management.observe_into(&mut observed);
        }
        observed
    }
}

/// `objects` and `named`, unless an object of that name and namespace is already there (ours
/// are in both the labelled cache and the by-name one).
fn with<K: Resource + Clone>(mut objects: Vec<K>, named: &Option<K>) -> Vec<K> {
    if let Some(named) = named
        && !objects.iter().any(|o| {
            o.meta().name == named.meta().name && o.meta().namespace == named.meta().namespace
        })
    {
        objects.push(named.clone());
    }
    objects
}

/// Starts the caches and waits for them to sync (see [`Caches::start`] for `management`).
pub async fn start_caches(
    client: &Client,
    apis: Apis,
    management: Option<&Management<'_>>,
    timeout: Duration,
) -> Result<(Caches, Informers), NotSynced> {
    let mut informers = Informers::new();
    let caches = Caches::start(client, apis, management, &mut informers);
    informers.wait_synced(timeout).await?;
    Ok((caches, informers))
}
