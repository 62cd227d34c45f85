//! What a driver operator watches, and the snapshot of it each reconcile reads. Every cache is
//! scoped: the ClusterCSIDriver, the CSIDriver, Infrastructure, Proxy, the credentials Secret
//! and the optional CRDs by name; operands by the operand label; StorageClasses all (the
//! default-class rule must see other classes); nodes only on plain Kubernetes; for a driver
//! that replaces an in-tree plugin, PVs and the metadata of PVCs and CSINodes (see
//! [`super::migration`]); for every driver, the PVCs that may be stuck Pending on it (see
//! [`csi_kit::claims`]; only those are kept). Kinds whose CRD may be missing (ServiceMonitor,
//! VolumeSnapshotClass, CredentialsRequest) get a cache once their CRD exists. The sources of a driver's copied
//! ConfigMaps are watched by name in their own namespaces; PersistentVolumes only for drivers
//! whose removal waits for them. Source ConfigMaps of derived ConfigMaps (e.g.
//! `openshift-config/cloud-provider-config`) are watched by name.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::config_v1::{APIServer, Infrastructure, Proxy};
use api::operator_v1::{CloudCredential, ClusterCSIDriver};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, PersistentVolume, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Config};
use kube::runtime::{WatchStreamExt, reflector::store::Writer};
use kube::{Api, Client};
use opkit::runtime::{Informers, NotSynced, Projection, named, single};
use tokio::task::JoinSet;

use csi_kit::def::DriverDef;
use csi_kit::inputs::OptionalKind;
use csi_kit::names;

/// Which optional APIs the cluster serves (OpenShift's config.openshift.io kinds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Apis {
    /// `infrastructures.config.openshift.io`.
    pub infrastructure: bool,
    /// `proxies.config.openshift.io`.
    pub proxy: bool,
    /// `apiservers.config.openshift.io` (the cluster's TLS security profile).
    pub api_server: bool,
    /// `cloudcredentials.operator.openshift.io` (cloud-credential-operator's mode).
    pub cloud_credential: bool,
}

impl Apis {
    /// Asks the API server which of the optional kinds it serves.
    pub async fn discover(client: &Client) -> Result<Self, kube::Error> {
        let served = opkit::discovery::served_resources(client, "config.openshift.io/v1").await?;
        let has = |plural: &str| served.contains(plural);
        let operator =
            opkit::discovery::served_resources(client, "operator.openshift.io/v1").await?;
        Ok(Self {
            infrastructure: has("infrastructures"),
            proxy: has("proxies"),
            api_server: has("apiservers"),
            cloud_credential: operator.contains("cloudcredentials"),
        })
    }
}

/// The operand objects of one optional kind, once its CRD exists and its cache has filled.
#[derive(Clone, Debug, Default)]
pub struct OptionalObjects {
    /// Whether the CRD exists.
    pub crd: bool,
    /// The cached objects, or `None` while the cache is filling (apply waits: without the
    /// observed object every pass would write).
    pub objects: Option<Vec<Arc<DynamicObject>>>,
}

/// Everything a reconcile reads, as of one moment: the ClusterCSIDriver, what the cluster says
/// (`cluster`), what the operands are (`operands`), and what the driver's own probe and the
/// migration audit found.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Optional APIs served.
    pub apis: Apis,
    /// The ClusterCSIDriver.
    pub cluster_csi_driver: Option<ClusterCSIDriver>,
    /// The cluster's configuration the operands are rendered from.
    pub cluster: ObservedCluster,
    /// The operands as they are.
    pub operands: ObservedOperands,
    /// The last answer of the driver's probe, when it has one: the facts it found, or why
    /// the driver cannot run here.
    pub probe: Option<Result<Vec<String>, csi_kit::HookError>>,
    /// The CSI migration audit's figures (empty for a driver that is no migration target).
    pub migration: crate::migration::Observed,
    /// Whether this process's host runs in FIPS mode ([`super::Settings::host_fips`]).
    pub host_fips: bool,
    /// The Pending claims that may wait on the driver, by `namespace/name`.
    pub pending_claims: Vec<(String, csi_kit::claims::PendingClaim)>,
    /// How long a claim may wait on the driver before it is reported
    /// ([`super::Settings::stuck_claims_after`]; `None`: [`csi_kit::claims::STUCK_AFTER`]).
    pub stuck_claims_after: Option<Duration>,
    /// The facts of the driver's tasks, by task name ([`super::Task::facts`]).
    pub task_facts: BTreeMap<String, Vec<String>>,
    /// The hosted control plane the controller runs in ([`super::Settings::hosted`]).
    pub hosted: Option<csi_kit::HostedControlPlane>,
}

/// The cluster's configuration the operands are rendered from: its layout, proxy, TLS
/// profile, credentials, and the objects derived operands are made from.
#[derive(Clone, Debug, Default)]
pub struct ObservedCluster {
    /// `Infrastructure/cluster`.
    pub infrastructure: Option<Infrastructure>,
    /// `Proxy/cluster`.
    pub proxy: Option<Proxy>,
    /// `APIServer/cluster`.
    pub api_server: Option<APIServer>,
    /// `CloudCredential/cluster` `spec.credentialsMode` (empty: the default mode).
    pub credentials_mode: Option<String>,
    /// Nodes, only without the Infrastructure API.
    pub nodes: Vec<Node>,
    /// The credentials Secret, if the driver has one and it exists.
    pub credentials_secret: Option<Secret>,
    /// The driver's hashed Secrets ([`DriverDef::hashed_secrets`]) that exist.
    pub hashed_secrets: Vec<Secret>,
    /// The driver's derived Secrets (see [`csi_kit::derived`]) that exist: the ones applied
    /// last, or the replaced operator's.
    pub derived_secrets: Vec<Secret>,
    /// The sources of the driver's copied ConfigMaps that exist (other namespaces).
    pub copied_config_map_sources: Vec<ConfigMap>,
    /// The source ConfigMaps of derived ConfigMaps that exist (see [`csi_kit::derived`]).
    pub source_config_maps: Vec<ConfigMap>,
    /// Every PersistentVolume, only for drivers whose removal waits for their volumes.
    pub persistent_volumes: Vec<PersistentVolume>,
}

/// The operands as they are: the objects with the driver's operand label, the shared sidecar
/// ClusterRoles, the driver's CSIDriver and every StorageClass.
#[derive(Clone, Debug, Default)]
pub struct ObservedOperands {
    /// The CSIDriver of this driver.
    pub csi_driver: Option<CSIDriver>,
    /// Every StorageClass.
    pub storage_classes: Vec<Arc<StorageClass>>,
    /// Operands in the driver namespace.
    pub service_accounts: Vec<Arc<ServiceAccount>>,
    /// Operand Roles.
    pub roles: Vec<Arc<Role>>,
    /// Operand RoleBindings.
    pub role_bindings: Vec<Arc<RoleBinding>>,
    /// Operand ConfigMaps (the trusted CA bundle).
    pub config_maps: Vec<Arc<ConfigMap>>,
    /// Operand Services.
    pub services: Vec<Arc<Service>>,
    /// Operand NetworkPolicies.
    pub network_policies: Vec<Arc<NetworkPolicy>>,
    /// Operand PodDisruptionBudgets.
    pub pod_disruption_budgets: Vec<Arc<PodDisruptionBudget>>,
    /// Operand Deployments.
    pub deployments: Vec<Arc<Deployment>>,
    /// Operand DaemonSets.
    pub daemon_sets: Vec<Arc<DaemonSet>>,
    /// Operand ClusterRoles, and the shared sidecar ClusterRoles.
    pub cluster_roles: Vec<Arc<ClusterRole>>,
    /// Operand ClusterRoleBindings.
    pub cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
    /// Optional kinds.
    pub optional: BTreeMap<OptionalKind, OptionalObjects>,
}

type DynamicCaches = Arc<Mutex<BTreeMap<OptionalKind, Store<DynamicObject>>>>;

/// The caches behind [`Observed`].
#[derive(Clone)]
pub struct Caches {
    apis: Apis,
    client: Client,
    namespace: String,
    /// Where the CredentialsRequest lives (cloud-credential-operator's namespace).
    credentials_request_namespace: Option<String>,
    label: String,
    trigger: Arc<opkit::runtime::Trigger>,
    cluster_csi_driver: Store<ClusterCSIDriver>,
    cluster: ClusterCaches,
    operands: OperandCaches,
    crds: BTreeMap<OptionalKind, Store<CustomResourceDefinition>>,
    dynamic: DynamicCaches,
    dynamic_tasks: Arc<Mutex<JoinSet<()>>>,
    /// PVs, PVCs and CSINodes, for a driver that replaces an in-tree plugin.
    migration: Option<crate::migration::Caches>,
    /// The Pending claims that may wait on the driver.
    pending_claims: Projection<csi_kit::claims::PendingClaim>,
    /// With a hosted control plane, the operands in its namespace of the management cluster.
    management: Option<ManagementCaches>,
}

/// How the names of the watches of the management cluster end, for the control-plane namespace
/// `namespace`: `(management cluster, <namespace>)`.
pub fn management_watch_suffix(namespace: &str) -> String {
    format!("(management cluster, {namespace})")
}

/// How soon an unreachable management cluster is asked again.
pub const UNREACHABLE_RETRY: Duration = Duration::from_secs(5);

/// With a hosted control plane: why the management cluster is unreachable, when it is. Asked
/// only when its watches (those of `health` named with [`management_watch_suffix`]) have
/// failed: then its `/version`, which any identity may read. An answer forgets the failures
/// (a watch that resumes where it was has nothing to say until something changes).
pub async fn management_unreachable(
    health: &opkit::runtime::WatchHealth,
    client: &Client,
    namespace: &str,
) -> Option<String> {
    let suffix = management_watch_suffix(namespace);
    unreachable(health, client, "management cluster", |watch| {
        watch.ends_with(&suffix)
    })
    .await
}

/// With a hosted control plane: why the guest cluster is unreachable, when it is (its watches,
/// all but the management cluster's, have failed and its `/version` does not answer). Its
/// status cannot say so; the log does, naming the guest.
pub async fn guest_unreachable(
    health: &opkit::runtime::WatchHealth,
    client: &Client,
    namespace: &str,
) -> Option<String> {
    let suffix = management_watch_suffix(namespace);
    unreachable(health, client, "guest cluster", |watch| {
        !watch.ends_with(&suffix)
    })
    .await
}

/// Whether the `cluster` that `client` reaches answers, asked when the watches of it (those
/// `of_it` says are) have failed.
async fn unreachable(
    health: &opkit::runtime::WatchHealth,
    client: &Client,
    cluster: &str,
    of_it: impl Fn(&str) -> bool,
) -> Option<String> {
    let failing: Vec<opkit::runtime::Failing> = health
        .failing()
        .into_iter()
        .filter(|f| of_it(&f.watch))
        .collect();
    let first = failing.iter().min_by_key(|f| f.since)?;
    match client.apiserver_version().await {
        Ok(_) => {
            let names: Vec<&str> = failing.iter().map(|f| f.watch.as_str()).collect();
            health.forget(&names);
            None
        }
        Err(error) => {
            let since = k8s_openapi::jiff::Timestamp::try_from(first.since)
                .map(|t| t.to_string())
                .unwrap_or_default();
            tracing::warn!(%error, watch = %first.watch, "the {cluster} does not answer");
            Some(format!(
                "the {cluster} does not answer: {error} (its watch of {} has failed since {since}: {})",
                first.watch, first.error
            ))
        }
    }
}

/// Watches the `HostedControlPlane` of `namespace` (as JSON; one per control-plane namespace).
pub fn watch_hosted_control_planes(
    informers: &mut Informers,
    client: &Client,
    namespace: &str,
) -> Projection<serde_json::Value> {
    let (_, _, plural) = csi_kit::HostedControlPlane::API;
    informers.watch_projected(
        &format!("{plural} {}", management_watch_suffix(namespace)),
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            namespace,
            &csi_kit::HostedControlPlane::api_resource(),
        ),
        Config::default(),
        |object| serde_json::to_value(object).ok(),
    )
}

/// Where the controller side of a driver with a hosted control plane goes: the management
/// cluster's client, the control-plane namespace, and whether HyperShift's
/// `HostedControlPlane` API is served there (then its object is watched for the placement).
#[derive(Clone, Copy)]
pub struct Management<'a> {
    /// A client of the management cluster.
    pub client: &'a Client,
    /// The control-plane namespace.
    pub namespace: &'a str,
    /// Whether `hostedcontrolplanes.hypershift.openshift.io` is served.
    pub hosted_control_planes: bool,
}

impl<'a> Management<'a> {
    /// The control-plane namespace `namespace` of the management cluster `client` reaches,
    /// asking whether HyperShift's `HostedControlPlane` API is served there (said in the log
    /// when it is not: the placement then comes from the environment only).
    pub async fn discover(client: &'a Client, namespace: &'a str) -> Self {
        let (group, version, plural) = csi_kit::HostedControlPlane::API;
        let served = opkit::discovery::served_resources(client, &format!("{group}/{version}"))
            .await
            .is_ok_and(|served| served.contains(plural));
        if !served {
            tracing::info!(
                "{plural}.{group} is not served in the management cluster: the control plane's placement comes from the environment only"
            );
        }
        Self {
            client,
            namespace,
            hosted_control_planes: served,
        }
    }
}

/// With a hosted control plane, the caches of the operands the controller side puts in the
/// control-plane namespace of the management cluster (see `csi_kit::hosted`), by the driver's
/// operand label; observed with the guest's of the same kinds (objects are told apart by
/// namespace).
#[derive(Clone)]
struct ManagementCaches {
    service_accounts: Store<ServiceAccount>,
    config_maps: Store<ConfigMap>,
    services: Store<Service>,
    pod_disruption_budgets: Store<PodDisruptionBudget>,
    deployments: Store<Deployment>,
    /// HyperShift's `HostedControlPlane` of the namespace (as JSON), where its API is served.
    hosted_control_planes: Option<Projection<serde_json::Value>>,
    /// The Secrets of the namespace the controller mounts that are not ours (the credentials
    /// HyperShift puts there), by name, for their hashes only.
    secrets: Vec<Store<Secret>>,
}

impl ManagementCaches {
    fn start(
        management: &Management<'_>,
        def: &DriverDef,
        label: &str,
        informers: &mut Informers,
    ) -> Self {
        let (client, namespace) = (management.client, management.namespace);
        let ours = || Config::default().labels(label);
        let c = || client.clone();
        let suffix = management_watch_suffix(namespace);
        let watch_name = |kind: &str| format!("{kind} {suffix}");
        let secrets: BTreeSet<&str> = def
            .credentials
            .iter()
            .map(|c| c.secret_name.as_str())
            .chain(def.hashed_secrets.iter().map(String::as_str))
            .collect();
        Self {
            secrets: secrets
                .into_iter()
                .map(|name| {
                    informers.watch(
                        &watch_name(&format!("secrets/{name} (hashed)")),
                        Api::namespaced(c(), namespace),
                        named(name),
                    )
                })
                .collect(),
            hosted_control_planes: management
                .hosted_control_planes
                .then(|| watch_hosted_control_planes(informers, client, namespace)),
            service_accounts: informers.watch(
                &watch_name("serviceaccounts"),
                Api::namespaced(c(), namespace),
                ours(),
            ),
            config_maps: informers.watch(
                &watch_name("configmaps"),
                Api::namespaced(c(), namespace),
                ours(),
            ),
            services: informers.watch(
                &watch_name("services"),
                Api::namespaced(c(), namespace),
                ours(),
            ),
            pod_disruption_budgets: informers.watch(
                &watch_name("poddisruptionbudgets"),
                Api::namespaced(c(), namespace),
                ours(),
            ),
            deployments: informers.watch(
                &watch_name("deployments"),
                Api::namespaced(c(), namespace),
                ours(),
            ),
        }
    }

    /// The hashes of the Secrets of the namespace the controller mounts that exist, by name.
    fn secret_hashes(&self) -> BTreeMap<String, String> {
        self.secrets
            .iter()
            .filter_map(single)
            .map(|secret| {
                (
                    secret.metadata.name.clone().unwrap_or_default(),
                    csi_kit::hash::secret_hash(&secret),
                )
            })
            .collect()
    }

    /// The `HostedControlPlane` object of the namespace, if its API is served and it exists.
    fn hosted_control_plane(&self) -> Option<serde_json::Value> {
        let projection = self.hosted_control_planes.as_ref()?;
        projection
            .entries()
            .into_iter()
            .next()
            .map(|(_, object)| object)
    }

    /// Adds what these caches hold to the guest's operands.
    fn observe_into(&self, operands: &mut ObservedOperands) {
        operands
            .service_accounts
            .extend(self.service_accounts.state());
        operands.config_maps.extend(self.config_maps.state());
        operands.services.extend(self.services.state());
        operands
            .pod_disruption_budgets
            .extend(self.pod_disruption_budgets.state());
        operands.deployments.extend(self.deployments.state());
    }
}

/// The caches behind [`ObservedCluster`].
#[derive(Clone)]
struct ClusterCaches {
    infrastructure: Option<Store<Infrastructure>>,
    proxy: Option<Store<Proxy>>,
    api_server: Option<Store<APIServer>>,
    cloud_credential: Option<Store<CloudCredential>>,
    /// Every Node's layout facts ([`csi_kit::inputs::node_facts`]), on plain Kubernetes.
    nodes: Option<Projection<Node>>,
    credentials_secret: Option<Store<Secret>>,
    hashed_secrets: Vec<Store<Secret>>,
    derived_secrets: Vec<Store<Secret>>,
    copied_config_map_sources: Vec<Store<ConfigMap>>,
    /// One cache per source ConfigMap of derived ConfigMaps.
    sources: Vec<Store<ConfigMap>>,
    /// The driver's bound volumes (name, driver and phase only), for the removal guard.
    persistent_volumes: Option<Projection<PersistentVolume>>,
}

/// The caches behind [`ObservedOperands`] (but the optional kinds'): the operand kinds by the
/// driver's operand label, the shared sidecar roles, the CSIDriver and every StorageClass.
#[derive(Clone)]
struct OperandCaches {
    csi_driver: Store<CSIDriver>,
    storage_classes: Store<StorageClass>,
    service_accounts: Store<ServiceAccount>,
    roles: Store<Role>,
    role_bindings: Store<RoleBinding>,
    config_maps: Store<ConfigMap>,
    services: Store<Service>,
    network_policies: Option<Store<NetworkPolicy>>,
    pod_disruption_budgets: Store<PodDisruptionBudget>,
    deployments: Store<Deployment>,
    daemon_sets: Store<DaemonSet>,
    cluster_roles: Store<ClusterRole>,
    shared_cluster_roles: Store<ClusterRole>,
    cluster_role_bindings: Store<ClusterRoleBinding>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("apis", &self.apis)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The kinds the kit watches for every driver, whether or not the driver renders one (a
/// driver without StorageClasses still watches them for the default-class rules), as
/// (API group, resource, namespaced in the driver's namespace). Whoever installs a driver
/// operator grants it read access to these; [`Caches::start`] is the list's source of truth.
pub const ALWAYS_WATCHED: [(&str, &str, bool); 15] = [
    ("operator.openshift.io", "clustercsidrivers", false),
    ("", "persistentvolumeclaims", false),
    ("storage.k8s.io", "csidrivers", false),
    ("storage.k8s.io", "storageclasses", false),
    ("rbac.authorization.k8s.io", "clusterroles", false),
    ("rbac.authorization.k8s.io", "clusterrolebindings", false),
    ("apiextensions.k8s.io", "customresourcedefinitions", false),
    ("", "serviceaccounts", true),
    ("rbac.authorization.k8s.io", "roles", true),
    ("rbac.authorization.k8s.io", "rolebindings", true),
    ("", "configmaps", true),
    ("", "services", true),
    ("policy", "poddisruptionbudgets", true),
    ("apps", "deployments", true),
    ("apps", "daemonsets", true),
];

/// The claims that may be stuck Pending on `driver` ([`csi_kit::claims::may_wait_on`], with
/// the StorageClasses cached now), each as a [`csi_kit::claims::PendingClaim`]: the watch sees
/// every claim of the cluster (whole: the phase is in the status) but keeps only these.
fn watch_pending_claims(
    client: &Client,
    driver: &str,
    operands: &OperandCaches,
    informers: &mut Informers,
) -> Projection<csi_kit::claims::PendingClaim> {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use kube::runtime::reflector::ObjectRef;
    let driver = driver.to_owned();
    let classes = operands.storage_classes.clone();
    informers.watch_projected(
        "persistentvolumeclaims (pending ones of the driver kept)",
        Api::<PersistentVolumeClaim>::all(client.clone()),
        Config::default(),
        move |claim| {
            let pending = csi_kit::claims::pending_claim(claim)?;
            let class = pending
                .class
                .as_deref()
                .and_then(|name| classes.get(&ObjectRef::new(name)));
            csi_kit::claims::may_wait_on(&pending, Some(&driver), class.as_deref())
                .then_some(pending)
        },
    )
}

/// The driver's bound PersistentVolumes, as much of each as the removal guard reads (name, CSI
/// driver, phase): the watch sees every volume of the cluster but keeps only these.
fn bound_volumes_of(
    driver: &str,
    client: &Client,
    informers: &mut Informers,
) -> Projection<PersistentVolume> {
    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, PersistentVolumeSpec, PersistentVolumeStatus,
    };
    let driver = driver.to_owned();
    informers.watch_projected(
        "persistentvolumes (the driver's bound ones kept)",
        Api::<PersistentVolume>::all(client.clone()),
        Config::default(),
        move |pv| {
            let ours = pv
                .spec
                .as_ref()
                .and_then(|s| s.csi.as_ref())
                .is_some_and(|csi| csi.driver == driver);
            let phase = pv.status.as_ref().and_then(|s| s.phase.clone());
            (ours && phase.as_deref() == Some("Bound")).then(|| PersistentVolume {
                metadata: kube::api::ObjectMeta {
                    name: pv.metadata.name.clone(),
                    ..Default::default()
                },
                spec: Some(PersistentVolumeSpec {
                    csi: Some(CSIPersistentVolumeSource {
                        driver: driver.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                status: Some(PersistentVolumeStatus {
                    phase,
                    ..Default::default()
                }),
            })
        },
    )
}

impl Caches {
    /// Starts every watch; the caller waits for [`Informers::wait_synced`]. With `management`,
    /// the operands of the controller side are watched in the control-plane namespace of the
    /// management cluster.
    pub fn start(
        client: &Client,
        def: &DriverDef,
        apis: Apis,
        management: Option<&Management<'_>>,
        informers: &mut Informers,
    ) -> Self {
        let label = format!("{}={}", names::OPERAND_LABEL, def.short_name);
        let operands = OperandCaches::start(client, def, &label, informers);
        let crds = OptionalKind::ALL
            .into_iter()
            .map(|kind| {
                (
                    kind,
                    informers.watch(
                        &format!("customresourcedefinitions/{}", kind.crd_name()),
                        Api::all(client.clone()),
                        named(kind.crd_name()),
                    ),
                )
            })
            .collect();
        Self {
            apis,
            client: client.clone(),
            namespace: def.namespace.clone(),
            credentials_request_namespace: def
                .credentials
                .iter()
                .chain(&def.node_credentials)
                .find_map(|c| c.credentials_request.as_ref())
                .map(|r| r.namespace.clone()),
            trigger: informers.trigger(),
            cluster_csi_driver: informers.watch(
                "clustercsidrivers",
                Api::all(client.clone()),
                named(&def.name),
            ),
            cluster: ClusterCaches::start(client, def, apis, informers),
            pending_claims: watch_pending_claims(client, &def.name, &operands, informers),
            operands,
            management: management.map(|m| ManagementCaches::start(m, def, &label, informers)),
            label,
            crds,
            dynamic: Arc::default(),
            dynamic_tasks: Arc::default(),
            migration: crate::migration::Caches::start(client, def, informers),
        }
    }

    /// With a hosted control plane, its `HostedControlPlane` object, when watched and present.
    pub fn hosted_control_plane(&self) -> Option<serde_json::Value> {
        self.management.as_ref()?.hosted_control_plane()
    }

    /// With a hosted control plane, the hashes of the Secrets of the control-plane namespace
    /// the controller mounts that are not ours, by name (see `csi_kit::HostedControlPlane`).
    pub fn control_plane_secret_hashes(&self) -> BTreeMap<String, String> {
        self.management
            .as_ref()
            .map(ManagementCaches::secret_hashes)
            .unwrap_or_default()
    }

    /// Starts the cache of an optional kind whose CRD now exists (once). Its changes pull the
    /// same trigger as every other cache. A poisoned lock (a panic while it was held) still
    /// holds a consistent map, so it is used rather than skipping the kind for ever.
    fn start_dynamic(&self, kind: OptionalKind) -> Store<DynamicObject> {
        let mut caches = self
            .dynamic
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(store) = caches.get(&kind) {
            return store.clone();
        }
        let resource = kind.api_resource();
        let namespace = match kind {
            OptionalKind::ServiceMonitor => Some(self.namespace.as_str()),
            OptionalKind::CredentialsRequest => self.credentials_request_namespace.as_deref(),
            OptionalKind::VolumeSnapshotClass => None,
        };
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let writer = Writer::new(resource);
        let store = writer.as_reader();
        let trigger = self.trigger.clone();
        let config = Config::default().labels(&self.label);
        let mut tasks = self
            .dynamic_tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tasks.spawn(async move {
            let mut events = std::pin::pin!(
                watcher::watcher(api, config)
                    .backoff(opkit::backoff::WatchBackoff::default())
                    .reflect(writer)
            );
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        tracing::trace!(watch = kind.kind(), ?event, "watch event");
                        trigger.pull();
                    }
                    Err(error) => {
                        tracing::warn!(watch = kind.kind(), %error, "watch failed; retrying")
                    }
                }
            }
        });
        caches.insert(kind, store.clone());
        store
    }

    /// The current state of every cache.
    pub fn observe(&self) -> Observed {
        Observed {
            apis: self.apis,
            cluster_csi_driver: single(&self.cluster_csi_driver),
            cluster: self.cluster.observe(),
            operands: {
                let mut operands = ObservedOperands {
                    optional: self.observe_optional(),
                    ..self.operands.observe()
                };
                if let Some(management) = &self.management {
                    management.observe_into(&mut operands);
                }
                operands
            },
            probe: None,
            migration: self
                .migration
                .as_ref()
                .map(crate::migration::Caches::observe)
                .unwrap_or_default(),
            host_fips: false,
            pending_claims: self.pending_claims.entries(),
            stuck_claims_after: None,
            task_facts: BTreeMap::new(),
            hosted: None,
        }
    }

    /// Each optional kind: whether its CRD exists, and its objects once their cache filled
    /// (started here, the first time the CRD is seen).
    fn observe_optional(&self) -> BTreeMap<OptionalKind, OptionalObjects> {
        OptionalKind::ALL
            .into_iter()
            .map(|kind| {
                let crd = self
                    .crds
                    .get(&kind)
                    .is_some_and(|store| !store.state().is_empty());
                let objects = if crd {
                    let store = self.start_dynamic(kind);
                    store
                        .wait_until_ready()
                        .now_or_never()
                        .and_then(Result::ok)
                        .map(|()| store.state())
                } else {
                    None
                };
                (kind, OptionalObjects { crd, objects })
            })
            .collect()
    }
}

impl ClusterCaches {
    fn start(client: &Client, def: &DriverDef, apis: Apis, informers: &mut Informers) -> Self {
        let ns = def.namespace.as_str();
        let c = || client.clone();
        Self {
            infrastructure: apis
                .infrastructure
                .then(|| informers.watch("infrastructures", Api::all(c()), named("cluster"))),
            proxy: apis
                .proxy
                .then(|| informers.watch("proxies", Api::all(c()), named("cluster"))),
            api_server: apis
                .api_server
                .then(|| informers.watch("apiservers", Api::all(c()), named("cluster"))),
            cloud_credential: (apis.cloud_credential
                && def
                    .credentials
                    .iter()
                    .chain(&def.node_credentials)
                    .any(|c| c.credentials_request.is_some()))
            .then(|| informers.watch("cloudcredentials", Api::all(c()), named("cluster"))),
            nodes: (!apis.infrastructure).then(|| {
                informers.watch_projected(
                    "nodes (layout facts)",
                    Api::all(c()),
                    Config::default(),
                    |node| Some(csi_kit::inputs::node_facts(node)),
                )
            }),
            credentials_secret: def.credentials.as_ref().map(|creds| {
                informers.watch(
                    "secrets",
                    Api::namespaced(c(), ns),
                    named(&creds.secret_name),
                )
            }),
            hashed_secrets: def
                .hashed_secrets
                .iter()
                .map(|name| {
                    informers.watch(
                        &format!("secrets/{name} (hashed)"),
                        Api::namespaced(c(), ns),
                        named(name),
                    )
                })
                .collect(),
            derived_secrets: def
                .config_maps
                .iter()
                .filter(|d| d.secret)
                .map(|d| {
                    informers.watch(
                        &format!("secrets/{} (derived)", d.name),
                        Api::namespaced(c(), ns),
                        named(&d.name),
                    )
                })
                .collect(),
            copied_config_map_sources: def
                .copied_config_maps
                .iter()
                .map(|copied| {
                    informers.watch(
                        &format!("configmaps/{}/{}", copied.namespace, copied.name),
                        Api::namespaced(c(), &copied.namespace),
                        named(&copied.name),
                    )
                })
                .collect(),
            sources: source_ids(def)
                .into_iter()
                .map(|(namespace, name)| {
                    informers.watch(
                        &format!("configmaps {namespace}/{name} (source)"),
                        Api::namespaced(c(), &namespace),
                        named(&name),
                    )
                })
                .collect(),
            persistent_volumes: def
                .removal_blocked_by_volumes
                .then(|| bound_volumes_of(&def.name, client, informers)),
        }
    }

    fn observe(&self) -> ObservedCluster {
        ObservedCluster {
            infrastructure: self.infrastructure.as_ref().and_then(single),
            proxy: self.proxy.as_ref().and_then(single),
            api_server: self.api_server.as_ref().and_then(single),
            credentials_mode: self
                .cloud_credential
                .as_ref()
                .and_then(single)
                .map(|c| c.spec.credentials_mode.unwrap_or_default()),
            nodes: self
                .nodes
                .as_ref()
                .map(|nodes| nodes.entries().into_iter().map(|(_, n)| n).collect())
                .unwrap_or_default(),
            credentials_secret: self.credentials_secret.as_ref().and_then(single),
            hashed_secrets: self.hashed_secrets.iter().filter_map(single).collect(),
            derived_secrets: self.derived_secrets.iter().filter_map(single).collect(),
            copied_config_map_sources: self
                .copied_config_map_sources
                .iter()
                .filter_map(single)
                .collect(),
            source_config_maps: self.sources.iter().filter_map(single).collect(),
            persistent_volumes: self
                .persistent_volumes
                .as_ref()
                .map(|bound| bound.entries().into_iter().map(|(_, pv)| pv).collect())
                .unwrap_or_default(),
        }
    }
}

impl OperandCaches {
    fn start(client: &Client, def: &DriverDef, label: &str, informers: &mut Informers) -> Self {
        let ours = || Config::default().labels(label);
        let ns = def.namespace.as_str();
        let c = || client.clone();
        Self {
            csi_driver: informers.watch("csidrivers", Api::all(c()), named(&def.name)),
            storage_classes: informers.watch("storageclasses", Api::all(c()), Config::default()),
            service_accounts: informers.watch("serviceaccounts", Api::namespaced(c(), ns), ours()),
            roles: informers.watch("roles", Api::namespaced(c(), ns), ours()),
            role_bindings: informers.watch("rolebindings", Api::namespaced(c(), ns), ours()),
            config_maps: informers.watch("configmaps", Api::namespaced(c(), ns), ours()),
            services: informers.watch("services", Api::namespaced(c(), ns), ours()),
            // Watched only for a driver that has some (the RBAC follows the rendered kinds).
            network_policies: (!def.network_policies.is_empty())
                .then(|| informers.watch("networkpolicies", Api::namespaced(c(), ns), ours())),
            pod_disruption_budgets: informers.watch(
                "poddisruptionbudgets",
                Api::namespaced(c(), ns),
                ours(),
            ),
            deployments: informers.watch("deployments", Api::namespaced(c(), ns), ours()),
            daemon_sets: informers.watch("daemonsets", Api::namespaced(c(), ns), ours()),
            cluster_roles: informers.watch("clusterroles", Api::all(c()), ours()),
            shared_cluster_roles: informers.watch(
                "clusterroles (shared sidecar roles)",
                Api::all(c()),
                Config::default().labels(&format!("{}=true", names::SHARED_ROLE_LABEL)),
            ),
            cluster_role_bindings: informers.watch("clusterrolebindings", Api::all(c()), ours()),
        }
    }

    /// The operands as cached (the optional kinds left empty).
    fn observe(&self) -> ObservedOperands {
        ObservedOperands {
            csi_driver: single(&self.csi_driver),
            storage_classes: self.storage_classes.state(),
            service_accounts: self.service_accounts.state(),
            roles: self.roles.state(),
            role_bindings: self.role_bindings.state(),
            config_maps: self.config_maps.state(),
            services: self.services.state(),
            network_policies: self
                .network_policies
                .as_ref()
                .map(Store::state)
                .unwrap_or_default(),
            pod_disruption_budgets: self.pod_disruption_budgets.state(),
            deployments: self.deployments.state(),
            daemon_sets: self.daemon_sets.state(),
            cluster_roles: self
                .cluster_roles
                .state()
                .into_iter()
                .chain(self.shared_cluster_roles.state())
                .collect(),
            cluster_role_bindings: self.cluster_role_bindings.state(),
            optional: BTreeMap::new(),
        }
    }
}

/// The distinct source ConfigMaps (namespace, name) of the driver's derived ConfigMaps.
pub fn source_ids(def: &DriverDef) -> BTreeSet<(String, String)> {
    def.config_maps
        .iter()
        .map(|d| (d.source.namespace.clone(), d.source.name.clone()))
        .collect()
}

/// Starts the caches and waits for them to sync (see [`Caches::start`] for `management`).
pub async fn start_caches(
    client: &Client,
    def: &DriverDef,
    apis: Apis,
    management: Option<&Management<'_>>,
    timeout: Duration,
) -> Result<(Caches, Informers), NotSynced> {
    let mut informers = Informers::new();
    let caches = Caches::start(client, def, apis, management, &mut informers);
    informers.wait_synced(timeout).await?;
    Ok((caches, informers))
}
