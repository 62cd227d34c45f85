//! The CSIDriverDeployment controller: for every CSIDriverDeployment, validate it against the
//! cluster (claimants of the driver name, an existing CSIDriver), apply its objects with
//! server-side apply (drift restored, an Event on the CSIDriverDeployment naming the operand),
//! delete the objects it no longer wants, and write its status only when it changed.
//!
//! Namespaced operands are owned through ownerReferences (the garbage collector removes them);
//! cluster-scoped ones (CSIDriver, ClusterRoles and bindings, StorageClasses) carry the owner
//! labels and are removed through [`FINALIZER`] on deletion, or on `managementState: Removed`.
//! The CSIDriver and the StorageClasses stay while PersistentVolumes of the driver exist (the
//! status says so); PersistentVolumes and claims are never touched.
//!
//! `Unmanaged` touches nothing and reports only `state` and `observedGeneration`.
//!
//! Each CSIDriverDeployment is reconciled on its own ([`opkit::controller`], kube-runtime's
//! applier), asked for by the changes that concern it ([`start_caches`]). Steps: validate
//! ([`mod@super::validate`], pure) → build ([`mod@super::build`], pure) → apply and remove → status.
//! A failed step ([`StepError`]) does not stop the others; the failures are reported in
//! Degraded and as Warning Events, counted by category, and the object is retried after its
//! own backoff (a failed status write included) or as soon as it changes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use api::config_v1::Infrastructure;
use api::csidriver_v1alpha1::{CSIDriverDeployment, CSIDriverDeploymentStatus, GenerationHistory};
use api::operator_v1::{ConditionStatus, ManagementState, OperatorCondition};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use opkit::admin::Readiness;
use opkit::apply::{Applier, Outcome, delete_if_present};
use opkit::conditions::{AVAILABLE, DEGRADED, PROGRESSING, condition, set_condition};
use opkit::controller::{Queue, Requests};
use opkit::metrics::Metrics;
use opkit::runtime::{Informers, LoopConfig, ReconcileError, snapshot};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::task::JoinSet;

use super::build::{DeclaredInputs, build_operands};
use super::kinds::OwnedKind;
use super::validate::{Claimant, ClusterFacts, Invalid, validate};
use super::{CONTROLLER_NAME, FINALIZER, OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL};
use csi_kit::inputs::OptionalKind;
use csi_kit::inputs::Topology;
use csi_kit::inputs::from_objects;
use csi_kit::render::Operand;
use csi_kit::status::{
    PROGRESSING_TIMEOUT, daemon_set_conditions, deployment_conditions, progressing_too_long,
};

/// How long the caches may take to fill at start.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(120);
/// Reason of Degraded when a StorageClass of a template's name exists and is not ours; the
/// class is left as it is ([`csi_kit::replace`]).
pub const REASON_STORAGE_CLASS_EXISTS: &str = "StorageClassExists";
/// Reason of Degraded when objects could not be written.
pub const REASON_SYNC_FAILED: &str = "SyncFailed";
/// Reason of Degraded while PersistentVolumes of the driver hold back its removal.
pub const REASON_VOLUMES_IN_USE: &str = "VolumesInUse";
/// Reason of the workload conditions when all is well.
pub const REASON_AS_EXPECTED: &str = "AsExpected";
/// Reason of Degraded when the controller Deployment rolls out for longer than the deadline.
pub const REASON_PROGRESSING_TOO_LONG: &str = "ProgressingTooLong";
/// Reason of Available when the driver is removed.
pub const REASON_REMOVED: &str = "Removed";
/// Reason of Degraded when VolumeSnapshotClass templates wait for the snapshot API.
pub const REASON_SNAPSHOT_API_MISSING: &str = "SnapshotAPIMissing";

/// The operator could not start.
pub use opkit::runtime::StartError;

/// What the controller was configured with.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// This pod's name, the Events' reporting instance.
    pub instance: Option<String>,
    /// The process environment: the sidecar image variables (`PROVISIONER_IMAGE`,
    /// `ATTACHER_IMAGE`, `RESIZER_IMAGE`, `SNAPSHOTTER_IMAGE`, `NODE_DRIVER_REGISTRAR_IMAGE`,
    /// `LIVENESS_PROBE_IMAGE`) are the images of the objects whose `containerImages` names
    /// none; unset or empty ones use the upstream images.
    pub env: BTreeMap<String, String>,
}

/// A step of a reconcile that failed. Each names the object; [`StepError::category`] is what
/// the server's answer was (for metrics), [`StepError::reason`] which step failed (for the
/// Warning Event on the CSIDriverDeployment).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Adding or removing [`FINALIZER`].
    #[error("updating the finalizers of CSIDriverDeployment {owner}: {source}")]
    Finalizer {
        /// `namespace/name` of the CSIDriverDeployment.
        owner: String,
        /// What the API server or the client said.
        #[source]
        source: kube::Error,
    },
    /// Reading an object the caches do not hold (a StorageClass an admin made).
    #[error("reading {kind} {name}: {source}")]
    Read {
        /// Its kind.
        kind: OwnedKind,
        /// Its name.
        name: String,
        /// What the API server or the client said.
        #[source]
        source: kube::Error,
    },
    /// Applying an operand.
    #[error(transparent)]
    Apply(#[from] opkit::apply::ApplyError),
    /// Deleting an operand.
    #[error("deleting {kind} {name}: {source}")]
    Delete {
        /// Its kind.
        kind: OwnedKind,
        /// Its name.
        name: String,
        /// What the API server or the client said.
        #[source]
        source: kube::Error,
    },
    /// Writing the CSIDriverDeployment's status.
    #[error("writing the status of {owner}: {source}")]
    Status {
        /// `namespace/name` of the CSIDriverDeployment.
        owner: String,
        /// What the API server or the client said.
        #[source]
        source: kube::Error,
    },
    /// The builders made an object a CSIDriverDeployment never has (a bug, not input).
    #[error("{0} is not an operand of a CSIDriverDeployment")]
    NotAnOperand(String),
}

impl StepError {
    /// A stable category for metrics: the server's answer ([`opkit::apply::category`]), or
    /// `internal` for an object the builders should not have made.
    pub fn category(&self) -> &'static str {
        match self {
            StepError::Finalizer { source, .. }
            | StepError::Read { source, .. }
            | StepError::Delete { source, .. }
            | StepError::Status { source, .. } => opkit::apply::category(source),
            StepError::Apply(error) => error.category(),
            StepError::NotAnOperand(_) => "internal",
        }
    }

    /// The reason of the Warning Event that reports it: which step failed.
    pub fn reason(&self) -> &'static str {
        match self {
            StepError::Finalizer { .. } => "FinalizerUpdateFailed",
            StepError::Read { .. } => "ReadFailed",
            StepError::Apply(_) => "ApplyFailed",
            StepError::Delete { .. } => "DeleteFailed",
            StepError::Status { .. } => "StatusUpdateFailed",
            StepError::NotAnOperand(_) => "InternalError",
        }
    }
}

/// A reconcile that could not do everything: each failed step (the others were done). The
/// object is retried after its backoff, or when it changes.
#[derive(Debug, thiserror::Error)]
#[error("reconciling CSIDriverDeployment {owner} failed: {}", join(.errors, "; "))]
pub struct Failure {
    /// `namespace/name` of the CSIDriverDeployment.
    pub owner: String,
    /// The failed steps, in order; never empty.
    pub errors: Vec<StepError>,
}

fn join(errors: &[StepError], separator: &str) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

impl ReconcileError for Failure {
    /// The category of the first failed step.
    fn category(&self) -> &'static str {
        self.errors.first().map_or("internal", StepError::category)
    }
}

/// The watch caches: the CSIDriverDeployments, every operand by its owner label, the
/// StorageClasses and CSIDrivers (for the default-class rule and foreign drivers) and the
/// CSI driver of each CSI PersistentVolume (a driver with volumes keeps its CSIDriver; nothing
/// else of a volume is kept).
#[derive(Clone)]
pub struct Caches {
    deployments_declared: Store<CSIDriverDeployment>,
    service_accounts: Store<ServiceAccount>,
    roles: Store<Role>,
    role_bindings: Store<RoleBinding>,
    cluster_roles: Store<ClusterRole>,
    cluster_role_bindings: Store<ClusterRoleBinding>,
    pdbs: Store<PodDisruptionBudget>,
    deployments: Store<Deployment>,
    daemon_sets: Store<DaemonSet>,
    csi_drivers: Store<CSIDriver>,
    storage_classes: Store<StorageClass>,
    /// PersistentVolume name -> its CSI driver, for CSI volumes only.
    volumes: opkit::runtime::Projection<String>,
    /// The VolumeSnapshotClass CRD, while it exists.
    snapshot_crd: Store<CustomResourceDefinition>,
    /// The VolumeSnapshotClasses with owner labels, cached once their CRD exists.
    snapshot_classes: SnapshotClasses,
}

/// The cache of VolumeSnapshotClasses with owner labels: started the first time their CRD is
/// seen (a watch of a kind that is not served would never fill, and would hold up the start).
/// Each change asks for its owner; the first full list asks for every object, which may have
/// been waiting for the kind.
#[derive(Clone)]
struct SnapshotClasses {
    client: Client,
    requests: Requests<CSIDriverDeployment>,
    store: Arc<OnceLock<Store<DynamicObject>>>,
    /// The watch task; dropped (and so stopped) with the last clone of the caches.
    task: Arc<Mutex<JoinSet<()>>>,
}

impl SnapshotClasses {
    fn resource() -> ApiResource {
        OptionalKind::VolumeSnapshotClass.api_resource()
    }

    /// The cache, started now if it was not.
    fn start(&self) -> Store<DynamicObject> {
        self.store
            .get_or_init(|| {
                let resource = Self::resource();
                let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
                let writer = Writer::new(resource);
                let store = writer.as_reader();
                let requests = self.requests.clone();
                let events = watcher::watcher(api, owned_config())
                    .default_backoff()
                    .reflect(writer);
                self.task
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .spawn(async move {
                        let mut events = std::pin::pin!(events);
                        while let Some(event) = events.next().await {
                            match event {
                                Ok(watcher::Event::InitDone) => requests.all(),
                                Ok(
                                    watcher::Event::Apply(o)
                                    | watcher::Event::Delete(o)
                                    | watcher::Event::InitApply(o),
                                ) => {
                                    if let Some(owner) = owner_of(&o) {
                                        requests.object(owner);
                                    }
                                }
                                Ok(watcher::Event::Init) => {}
                                Err(error) => tracing::warn!(
                                    watch = "volumesnapshotclasses",
                                    %error,
                                    "watch failed; retrying"
                                ),
                            }
                        }
                    });
                store
            })
            .clone()
    }
}

/// What the cache of VolumeSnapshotClasses knows.
enum SnapshotApi {
    /// Their CRD does not exist.
    NotServed,
    /// The CRD exists; the cache is still filling.
    Filling,
    /// The CRD exists and these are the classes with owner labels.
    Served(Vec<Arc<DynamicObject>>),
}

impl Caches {
    /// The VolumeSnapshotClasses, starting their cache once their CRD exists.
    fn snapshot_api(&self) -> SnapshotApi {
        if self.snapshot_crd.state().is_empty() {
            return SnapshotApi::NotServed;
        }
        let store = self.snapshot_classes.start();
        match store.wait_until_ready().now_or_never() {
            Some(Ok(())) => SnapshotApi::Served(store.state()),
            _ => SnapshotApi::Filling,
        }
    }
}

fn owned_config() -> watcher::Config {
    watcher::Config::default().labels(OWNER_NAME_LABEL)
}

/// The CSIDriverDeployment an operand belongs to, from its owner labels.
fn owner_of<K: Resource>(object: &K) -> Option<ObjectRef<CSIDriverDeployment>> {
    let labels = object.meta().labels.as_ref()?;
    let name = labels.get(OWNER_NAME_LABEL)?;
    let namespace = labels.get(OWNER_NAMESPACE_LABEL)?;
    Some(ObjectRef::new(name).within(namespace))
}

/// Watches an owned kind: every object with the owner labels, each change asking for its
/// owner.
fn watch_owned<K>(
    informers: &mut Informers,
    client: &Client,
    requests: &Requests<CSIDriverDeployment>,
    name: &str,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    informers.watch_then(
        name,
        Api::all(client.clone()),
        owned_config(),
        requests.mapping(|object: &K| owner_of(object)),
    )
}

/// The CSIDriverDeployments that name `driver` (once their cache exists; before that, all of
/// them are reconciled at start anyway).
fn claimants_of(
    declared: &OnceLock<Store<CSIDriverDeployment>>,
    driver: &str,
) -> Vec<ObjectRef<CSIDriverDeployment>> {
    declared.get().map_or_else(Vec::new, |store| {
        store
            .state()
            .iter()
            .filter(|cd| cd.spec.driver_name == driver)
            .map(|cd| ObjectRef::from_obj(&**cd))
            .collect()
    })
}

/// Starts the caches and waits until they are filled. Every change asks `requests` for the
/// CSIDriverDeployments it concerns: an operand's owner; a CSIDriverDeployment itself and the
/// others naming the same driver (the first claimant wins); a CSIDriver's claimants and owner;
/// any StorageClass, or a change in which drivers have volumes, all of them (the default-class
/// rule and the volumes that hold a removal back).
pub async fn start_caches(
    client: &Client,
    requests: &Requests<CSIDriverDeployment>,
) -> Result<(Caches, Informers), StartError> {
    let mut informers = Informers::new();
    let c = client.clone();
    let declared: Arc<OnceLock<Store<CSIDriverDeployment>>> = Arc::default();
    let claimants = declared.clone();
    let deployments_declared = informers.watch_then(
        "csidriverdeployments",
        Api::all(c.clone()),
        watcher::Config::default(),
        requests.mapping(move |cd: &CSIDriverDeployment| {
            let mut wanted = claimants_of(&claimants, &cd.spec.driver_name);
            wanted.push(ObjectRef::from_obj(cd));
            wanted
        }),
    );
    let _ = declared.set(deployments_declared.clone());
    let i = &mut informers;
    let service_accounts = watch_owned(i, &c, requests, "serviceaccounts");
    let roles = watch_owned(i, &c, requests, "roles");
    let role_bindings = watch_owned(i, &c, requests, "rolebindings");
    let cluster_roles = watch_owned(i, &c, requests, "clusterroles");
    let cluster_role_bindings = watch_owned(i, &c, requests, "clusterrolebindings");
    let pdbs = watch_owned(i, &c, requests, "poddisruptionbudgets");
    let deployments = watch_owned(i, &c, requests, "deployments");
    let daemon_sets = watch_owned(i, &c, requests, "daemonsets");
    let csi_drivers = informers.watch_then(
        "csidrivers",
        Api::all(c.clone()),
        watcher::Config::default(),
        requests.mapping(move |driver: &CSIDriver| {
            let mut wanted = claimants_of(&declared, &driver.name_any());
            wanted.extend(owner_of(driver));
            wanted
        }),
    );
    let storage_classes = informers.watch_then(
        "storageclasses",
        Api::all(c.clone()),
        watcher::Config::default(),
        requests.every(),
    );
    let every = requests.clone();
    let volumes = informers.watch_projected_then(
        "persistentvolumes (CSI drivers kept)",
        Api::<PersistentVolume>::all(c.clone()),
        watcher::Config::default(),
        |pv| Some(pv.spec.as_ref()?.csi.as_ref()?.driver.clone()),
        move || every.all(),
    );
    let snapshot_crd = informers.watch_then(
        "customresourcedefinitions/volumesnapshotclasses",
        Api::all(c.clone()),
        opkit::runtime::named(OptionalKind::VolumeSnapshotClass.crd_name()),
        requests.every(),
    );
    let snapshot_classes = SnapshotClasses {
        client: c.clone(),
        requests: requests.clone(),
        store: Arc::default(),
        task: Arc::default(),
    };
    let caches = Caches {
        deployments_declared,
        service_accounts,
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
        pdbs,
        deployments,
        daemon_sets,
        csi_drivers,
        storage_classes,
        volumes,
        snapshot_crd,
        snapshot_classes,
    };
    informers.wait_synced(SYNC_TIMEOUT).await?;
    Ok((caches, informers))
}

/// The cluster's layout and whether SCCs exist, asked once at start: OpenShift's
/// Infrastructure when served, else the nodes.
pub async fn discover(client: &Client) -> Result<(Topology, bool), kube::Error> {
    let scc_api = opkit::discovery::served_resources(client, "security.openshift.io/v1")
        .await?
        .contains("securitycontextconstraints");
    let config = opkit::discovery::served_resources(client, "config.openshift.io/v1").await?;
    let infrastructure = if config.contains("infrastructures") {
        Api::<Infrastructure>::all(client.clone())
            .get_opt(api::config_v1::CLUSTER)
            .await?
    } else {
        None
    };
    let topology = match infrastructure {
        Some(infra) => Topology::from_openshift(&infra.control_plane_topology()),
        None => {
            let nodes = Api::<Node>::all(client.clone())
                .list(&Default::default())
                .await?;
            from_objects::kubernetes_topology(&nodes.items)
        }
    };
    Ok((topology, scc_api))
}

/// Runs the controller until `shutdown` completes.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    readiness: Option<Readiness>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let (topology, scc_api) = discover(&client).await.map_err(StartError::Discovery)?;
    tracing::info!(%topology, scc_api, "CSIDriverDeployment controller starting");
    let queue = Queue::new();
    let (caches, informers) = start_caches(&client, &queue.requests()).await?;
    if let Some(readiness) = readiness {
        readiness.set(true);
    }
    let store = caches.deployments_declared.clone();
    let context = Context {
        applier: Applier::new(client.clone(), CONTROLLER_NAME),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: CONTROLLER_NAME.to_owned(),
                instance: settings.instance.clone(),
            },
        ),
        client,
        caches,
        topology,
        scc_api,
        env: settings.env,
        metrics: metrics.clone(),
    };
    opkit::controller::run(
        CONTROLLER_NAME,
        store,
        queue,
        informers.trigger(),
        LoopConfig::default(),
        metrics,
        |cd| reconcile(&context, cd),
        shutdown,
    )
    .await;
    Ok(())
}

struct Context {
    client: Client,
    applier: Applier,
    recorder: Recorder,
    caches: Caches,
    topology: Topology,
    scc_api: bool,
    env: BTreeMap<String, String>,
    metrics: Metrics,
}

fn key(cd: &CSIDriverDeployment) -> String {
    format!("{}/{}", cd.namespace().unwrap_or_default(), cd.name_any())
}

/// Whether `meta` is an operand this controller made for `cd`: the owner labels name `cd`, and
/// our field manager applied it. Labels alone prove nothing (a copy of a class, made by a user
/// or by Kubernetes' storage e2e suite, carries them; see [`opkit::ownership`]), and only what
/// we made is ever deleted or replaced.
fn owned_by(
    cd: &CSIDriverDeployment,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    owner_labels(meta).is_some_and(|(ns, name)| {
        Some(ns) == cd.metadata.namespace.as_ref() && Some(name) == cd.metadata.name.as_ref()
    })
}

/// The CSIDriverDeployment (namespace, name) that made the object: the one its owner labels
/// name, when our field manager applied it; `None` for anyone else's object, labelled or not.
fn owner_labels(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<(&String, &String)> {
    let labels = meta.labels.as_ref()?;
    let owner = (
        labels.get(OWNER_NAMESPACE_LABEL)?,
        labels.get(OWNER_NAME_LABEL)?,
    );
    opkit::ownership::applied_by_us(meta).then_some(owner)
}

/// Why the class `name` of `cd` is not applied: a class of that name exists and is not ours.
fn kept_class(cd: &CSIDriverDeployment, name: &str, live: Option<&StorageClass>) -> Invalid {
    let index = cd
        .spec
        .storage_class_templates
        .iter()
        .position(|t| t.metadata.name.as_deref() == Some(name))
        .unwrap_or_default();
    let provisioner = live.map(|sc| sc.provisioner.as_str()).unwrap_or_default();
    Invalid {
        field: format!("spec.storageClassTemplates[{index}].metadata.name"),
        reason: REASON_STORAGE_CLASS_EXISTS,
        message: format!(
            "StorageClass {name} already exists and was not made by this CSIDriverDeployment (provisioner {provisioner}): it is left as it is; choose another name, or delete that class to have this one created"
        ),
    }
}

/// The facts about the cluster that validation needs.
fn facts(context: &Context, cd: &CSIDriverDeployment) -> ClusterFacts {
    let claimants = snapshot(&context.caches.deployments_declared)
        .into_iter()
        .filter(|other| {
            other.spec.driver_name == cd.spec.driver_name
                && other.metadata.deletion_timestamp.is_none()
                && other.metadata.uid != cd.metadata.uid
        })
        .map(|other| Claimant {
            namespace: other.namespace().unwrap_or_default(),
            name: other.name_any(),
            created: other.metadata.creation_timestamp.clone(),
        })
        .collect();
    let csi_driver_owner = context
        .caches
        .csi_drivers
        .get(&ObjectRef::new(&cd.spec.driver_name))
        .map(|driver| owner_labels(&driver.metadata).map(|(ns, name)| (ns.clone(), name.clone())));
    ClusterFacts {
        claimants,
        csi_driver_owner,
    }
}

fn volumes_of(context: &Context, driver: &str) -> usize {
    context
        .caches
        .volumes
        .entries()
        .iter()
        .filter(|(_, of)| of == driver)
        .count()
}

/// One operand that exists: kind, namespace, name.
type Existing = (OwnedKind, Option<String>, String);

fn existing_of<K>(
    store: &Store<K>,
    kind: OwnedKind,
    cd: &CSIDriverDeployment,
    out: &mut Vec<Existing>,
) where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    for object in store.state() {
        if owned_by(cd, object.meta()) {
            out.push((kind, object.meta().namespace.clone(), object.name_any()));
        }
    }
}

/// Every operand of `cd` in the caches.
fn existing(context: &Context, cd: &CSIDriverDeployment) -> Vec<Existing> {
    let c = &context.caches;
    let mut out = Vec::new();
    existing_of(&c.service_accounts, OwnedKind::ServiceAccount, cd, &mut out);
    existing_of(&c.roles, OwnedKind::Role, cd, &mut out);
    existing_of(&c.role_bindings, OwnedKind::RoleBinding, cd, &mut out);
    existing_of(&c.cluster_roles, OwnedKind::ClusterRole, cd, &mut out);
    existing_of(
        &c.cluster_role_bindings,
        OwnedKind::ClusterRoleBinding,
        cd,
        &mut out,
    );
    existing_of(&c.pdbs, OwnedKind::PodDisruptionBudget, cd, &mut out);
    existing_of(&c.deployments, OwnedKind::Deployment, cd, &mut out);
    existing_of(&c.daemon_sets, OwnedKind::DaemonSet, cd, &mut out);
    existing_of(&c.csi_drivers, OwnedKind::CSIDriver, cd, &mut out);
    existing_of(&c.storage_classes, OwnedKind::StorageClass, cd, &mut out);
    if let SnapshotApi::Served(classes) = c.snapshot_api() {
        for class in classes {
            if owned_by(cd, &class.metadata) {
                out.push((OwnedKind::VolumeSnapshotClass, None, class.name_any()));
            }
        }
    }
    out
}

/// The kind, namespace and name of `operand`; `None` for an operand a CSIDriverDeployment
/// never has (its apply is refused with a message).
fn operand_key(operand: &Operand) -> Option<Existing> {
    let kind = OwnedKind::of(operand)?;
    let v = operand.to_value();
    Some((
        kind,
        v["metadata"]["namespace"].as_str().map(str::to_owned),
        v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    ))
}

async fn delete(context: &Context, (kind, namespace, name): &Existing) -> Result<(), StepError> {
    let c = context.client.clone();
    let ns = namespace.as_deref().unwrap_or_default();
    let params = DeleteParams::background();
    let result = match *kind {
        OwnedKind::ServiceAccount => {
            delete_if_present(&Api::<ServiceAccount>::namespaced(c, ns), name, &params).await
        }
        OwnedKind::Role => delete_if_present(&Api::<Role>::namespaced(c, ns), name, &params).await,
        OwnedKind::RoleBinding => {
            delete_if_present(&Api::<RoleBinding>::namespaced(c, ns), name, &params).await
        }
        OwnedKind::PodDisruptionBudget => {
            delete_if_present(
                &Api::<PodDisruptionBudget>::namespaced(c, ns),
                name,
                &params,
            )
            .await
        }
        OwnedKind::Deployment => {
            delete_if_present(&Api::<Deployment>::namespaced(c, ns), name, &params).await
        }
        OwnedKind::DaemonSet => {
            delete_if_present(&Api::<DaemonSet>::namespaced(c, ns), name, &params).await
        }
        OwnedKind::ClusterRole => {
            delete_if_present(&Api::<ClusterRole>::all(c), name, &params).await
        }
        OwnedKind::ClusterRoleBinding => {
            delete_if_present(&Api::<ClusterRoleBinding>::all(c), name, &params).await
        }
        OwnedKind::CSIDriver => delete_if_present(&Api::<CSIDriver>::all(c), name, &params).await,
        OwnedKind::StorageClass => {
            delete_if_present(&Api::<StorageClass>::all(c), name, &params).await
        }
        OwnedKind::VolumeSnapshotClass => {
            let api = Api::<DynamicObject>::all_with(c, &SnapshotClasses::resource());
            delete_if_present(&api, name, &params).await
        }
    };
    if let Ok(true) = result {
        tracing::info!(kind = kind.name(), name, "deleted operand");
        context.metrics.wrote(CONTROLLER_NAME, "delete");
    }
    result.map(drop).map_err(|source| StepError::Delete {
        kind: *kind,
        name: name.clone(),
        source,
    })
}

async fn apply_typed<K>(
    context: &Context,
    store: &Store<K>,
    desired: &K,
) -> Result<(Outcome, Option<i64>), opkit::apply::ApplyError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    let mut reference = ObjectRef::<K>::new(&desired.name_any());
    if let Some(ns) = desired.meta().namespace.as_deref() {
        reference = reference.within(ns);
    }
    let observed = store.get(&reference);
    let generation = observed.as_ref().and_then(|o| o.meta().generation);
    context
        .applier
        .apply(desired, observed.as_deref())
        .await
        .map(|outcome| (outcome, generation))
}

/// The StorageClass named `name`, whoever made it: from the cache of classes with owner labels,
/// else read from the API server (an admin's class carries none of our labels).
async fn live_storage_class(
    context: &Context,
    name: &str,
) -> Result<Option<StorageClass>, StepError> {
    if let Some(class) = context
        .caches
        .storage_classes
        .get(&ObjectRef::<StorageClass>::new(name))
    {
        return Ok(Some((*class).clone()));
    }
    Api::<StorageClass>::all(context.client.clone())
        .get_opt(name)
        .await
        .map_err(|source| StepError::Read {
            kind: OwnedKind::StorageClass,
            name: name.to_owned(),
            source,
        })
}

/// Applies a StorageClass as [`csi_kit::replace`] decided: `replace` when its immutable fields
/// (parameters, provisioner, reclaim policy, binding mode) changed, which deletes it and
/// creates it again. Volumes provisioned from it keep their copy of the parameters. A failed
/// apply never deletes anything.
async fn apply_storage_class(
    context: &Context,
    cd: &CSIDriverDeployment,
    desired: &StorageClass,
    replace: bool,
) -> Result<(Outcome, Option<i64>), StepError> {
    if !replace {
        return Ok(apply_typed(context, &context.caches.storage_classes, desired).await?);
    }
    let name = desired.name_any();
    tracing::info!(owner = %key(cd), class = name, "replacing StorageClass");
    let existing: Existing = (OwnedKind::StorageClass, None, name.clone());
    delete(context, &existing).await?;
    let outcome = context.applier.apply(desired, None).await?;
    opkit::events::record(
        &context.recorder,
        &cd.object_ref(&()),
        EventType::Normal,
        "OperandRecreated",
        "Apply",
        format!("StorageClass/{name} was recreated: its immutable fields changed"),
    )
    .await;
    Ok((outcome, None))
}

async fn apply(
    context: &Context,
    cd: &CSIDriverDeployment,
    operand: &Operand,
    replace: bool,
) -> Result<(Outcome, Option<i64>), StepError> {
    let c = &context.caches;
    let result = match operand {
        Operand::ServiceAccount(o) => apply_typed(context, &c.service_accounts, o).await,
        Operand::Role(o) => apply_typed(context, &c.roles, o).await,
        Operand::RoleBinding(o) => apply_typed(context, &c.role_bindings, o).await,
        Operand::ClusterRole(o) => apply_typed(context, &c.cluster_roles, o).await,
        Operand::ClusterRoleBinding(o) => apply_typed(context, &c.cluster_role_bindings, o).await,
        Operand::PodDisruptionBudget(o) => apply_typed(context, &c.pdbs, o).await,
        Operand::Deployment(o) => apply_typed(context, &c.deployments, o).await,
        Operand::DaemonSet(o) => apply_typed(context, &c.daemon_sets, o).await,
        Operand::CSIDriver(o) => apply_typed(context, &c.csi_drivers, o).await,
        Operand::StorageClass(o) => return apply_storage_class(context, cd, o, replace).await,
        Operand::Dynamic(v) if OwnedKind::of(operand) == Some(OwnedKind::VolumeSnapshotClass) => {
            apply_snapshot_class(context, v).await
        }
        other => return Err(StepError::NotAnOperand(other.key())),
    };
    Ok(result?)
}

/// Applies a VolumeSnapshotClass (built only once its cache has filled).
async fn apply_snapshot_class(
    context: &Context,
    desired: &serde_json::Value,
) -> Result<(Outcome, Option<i64>), opkit::apply::ApplyError> {
    let resource = SnapshotClasses::resource();
    let error = |source: serde_json::Error| opkit::apply::ApplyError {
        kind: resource.kind.clone(),
        object: desired["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        source: kube::Error::SerdeError(source),
    };
    let desired: DynamicObject = serde_json::from_value(desired.clone()).map_err(error)?;
    let observed = context
        .caches
        .snapshot_classes
        .store
        .get()
        .and_then(|store| store.get(&ObjectRef::new_with(&desired.name_any(), resource.clone())));
    let generation = observed.as_ref().and_then(|o| o.metadata.generation);
    context
        .applier
        .apply_dynamic(&resource, &desired, observed.as_deref())
        .await
        .map(|outcome| (outcome, generation))
}

fn history((kind, namespace, name): &Existing, generation: Option<i64>) -> GenerationHistory {
    let (group, resource) = kind.group_resource();
    GenerationHistory {
        group: group.to_owned(),
        resource: resource.to_owned(),
        namespace: namespace.clone().unwrap_or_default(),
        name: name.clone(),
        last_generation: generation.unwrap_or_default(),
    }
}

/// Records restored drift: a changed operand (`OperandDriftRestored`), or one that was
/// created before and deleted by someone (`OperandRecreated`).
async fn record_drift(
    context: &Context,
    cd: &CSIDriverDeployment,
    operand: &Operand,
    recreated: bool,
) {
    let (reason, what) = if recreated {
        ("OperandRecreated", "was deleted by someone else; recreated")
    } else {
        (
            "OperandDriftRestored",
            "was changed by someone else; restored",
        )
    };
    opkit::events::record(
        &context.recorder,
        &cd.object_ref(&()),
        EventType::Normal,
        reason,
        "Apply",
        format!("{} {what}", operand.key()),
    )
    .await;
}

async fn set_finalizer(
    context: &Context,
    cd: &CSIDriverDeployment,
    present: bool,
) -> Result<(), StepError> {
    let mut finalizers = cd.finalizers().to_vec();
    let has = finalizers.iter().any(|f| f == FINALIZER);
    if has == present {
        return Ok(());
    }
    if present {
        finalizers.push(FINALIZER.to_owned());
    } else {
        finalizers.retain(|f| f != FINALIZER);
    }
    let api: Api<CSIDriverDeployment> =
        Api::namespaced(context.client.clone(), &cd.namespace().unwrap_or_default());
    // The resourceVersion makes this a compare-and-swap on the list.
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": cd.resource_version(),
    }});
    api.patch(
        &cd.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| StepError::Finalizer {
        owner: key(cd),
        source,
    })?;
    context
        .metrics
        .wrote(CONTROLLER_NAME, "CSIDriverDeployment/finalizers");
    Ok(())
}

/// What a pass found, for the status.
#[derive(Default)]
struct Pass {
    problems: Vec<Invalid>,
    failures: Vec<StepError>,
    /// Operands left alone because an object of their name is not ours.
    kept: Vec<Invalid>,
    volumes_in_use: usize,
    /// The uninstall waits for the volumes (everything is held back, not only the CSIDriver
    /// and StorageClasses).
    uninstall_held: bool,
    children: Vec<GenerationHistory>,
    removed: bool,
}

/// What [`remove`] deletes while PersistentVolumes of the driver exist.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// Operands the spec no longer wants: all but the CSIDriver and StorageClasses.
    Stale,
    /// The whole driver (Removed, or the object deleted): nothing at all, because the volumes
    /// still need every part of it: the provisioner and its RBAC to delete them, the node
    /// pods to unmount them.
    Uninstall,
}

/// Deletes the given operands, holding back what the driver's existing volumes need (see
/// [`Removal`]); failures and what was held back go into `pass`.
async fn remove(
    context: &Context,
    cd: &CSIDriverDeployment,
    doomed: Vec<Existing>,
    removal: Removal,
    pass: &mut Pass,
) {
    let volumes = volumes_of(context, &cd.spec.driver_name);
    for object in doomed {
        if volumes > 0 && (removal == Removal::Uninstall || object.0.holds_volumes()) {
            pass.volumes_in_use = volumes;
            pass.uninstall_held |= removal == Removal::Uninstall;
            continue;
        }
        if let Err(error) = delete(context, &object).await {
            pass.failures.push(error);
        }
    }
}

/// Reconciles one CSIDriverDeployment. A failed step does not stop the others (each object
/// is applied on its own); the failures are reported in Degraded, as Warning Events, and to
/// the loop, which retries the object after its backoff.
async fn reconcile(
    context: &Context,
    cd: Arc<CSIDriverDeployment>,
) -> Result<Option<Duration>, Failure> {
    let (requeue, failures) = steps(context, &cd).await;
    if failures.is_empty() {
        return Ok(requeue);
    }
    for failure in &failures {
        opkit::events::record(
            &context.recorder,
            &cd.object_ref(&()),
            EventType::Warning,
            failure.reason(),
            "Reconcile",
            failure.to_string(),
        )
        .await;
    }
    Err(Failure {
        owner: key(&cd),
        errors: failures,
    })
}

/// The steps of a reconcile: finalizer and removal on deletion, else by management state
/// (validate, apply, remove what is no longer wanted), then the status. Returns when to look
/// again and the steps that failed.
async fn steps(context: &Context, cd: &CSIDriverDeployment) -> (Option<Duration>, Vec<StepError>) {
    let now = Time(Timestamp::now());
    let mut pass = Pass::default();

    if cd.metadata.deletion_timestamp.is_some() {
        if !cd.finalizers().iter().any(|f| f == FINALIZER) {
            return (None, Vec::new());
        }
        // While the snapshot classes' cache fills, some of ours may not be listed yet; its
        // first full list asks for this object again. (Asked before listing: a cache that
        // fills in between is then listed.)
        let filling = matches!(context.caches.snapshot_api(), SnapshotApi::Filling);
        let cluster_scoped: Vec<Existing> = existing(context, cd)
            .into_iter()
            .filter(|(_, ns, _)| ns.is_none())
            .collect();
        let left = !cluster_scoped.is_empty() || filling;
        remove(context, cd, cluster_scoped, Removal::Uninstall, &mut pass).await;
        if !left {
            // Everything is gone from the caches: nothing of ours is left.
            let failures = set_finalizer(context, cd, false).await.err();
            return (None, failures.into_iter().collect());
        }
        pass.removed = true;
        if let Err(error) = write_status(context, cd, &pass, &now).await {
            pass.failures.push(error);
        }
        return (None, pass.failures);
    }

    match &cd.spec.management_state {
        ManagementState::Unmanaged => {}
        ManagementState::Removed => {
            if let Err(error) = set_finalizer(context, cd, true).await {
                pass.failures.push(error);
            }
            remove(
                context,
                cd,
                existing(context, cd),
                Removal::Uninstall,
                &mut pass,
            )
            .await;
            pass.removed = true;
        }
        _ => {
            pass.problems = validate(cd, &facts(context, cd));
            if pass.problems.is_empty() {
                sync(context, cd, &mut pass).await;
            }
        }
    }
    let requeue = match write_status(context, cd, &pass, &now).await {
        Ok(requeue) => requeue,
        Err(error) => {
            pass.failures.push(error);
            None
        }
    };
    (requeue, pass.failures)
}

async fn sync(context: &Context, cd: &CSIDriverDeployment, pass: &mut Pass) {
    // The finalizer comes first: no cluster-scoped object exists without it.
    if let Err(error) = set_finalizer(context, cd, true).await {
        pass.failures.push(error);
        return;
    }
    let snapshot_api = context.caches.snapshot_api();
    let inputs = DeclaredInputs {
        topology: context.topology,
        scc_api: context.scc_api,
        storage_classes: context
            .caches
            .storage_classes
            .state()
            .iter()
            .map(|sc| from_objects::existing_storage_class(sc))
            .collect(),
        snapshot_classes: matches!(snapshot_api, SnapshotApi::Served(_)),
        env: context.env.clone(),
    };
    if !cd.spec.volume_snapshot_class_templates.is_empty()
        && matches!(snapshot_api, SnapshotApi::NotServed)
    {
        pass.kept.push(Invalid {
            field: "spec.volumeSnapshotClassTemplates".to_owned(),
            reason: REASON_SNAPSHOT_API_MISSING,
            message: format!(
                "the cluster does not serve {}: install the VolumeSnapshot CRDs and the snapshot controller (kubernetes-csi/external-snapshotter); the classes are created as soon as the CRD exists, and the rest of the driver is installed meanwhile",
                OptionalKind::VolumeSnapshotClass.crd_name()
            ),
        });
    }
    let desired = build_operands(cd, &inputs);
    let wanted: BTreeSet<Existing> = desired.iter().filter_map(operand_key).collect();
    for operand in &desired {
        let Some(operand_key) = operand_key(operand) else {
            pass.failures.push(StepError::NotAnOperand(operand.key()));
            continue;
        };
        let mut replace = false;
        if let Operand::StorageClass(class) = operand {
            let name = class.name_any();
            let live = match live_storage_class(context, &name).await {
                Ok(live) => live,
                Err(error) => {
                    pass.failures.push(error);
                    continue;
                }
            };
            let ours = live.as_ref().is_some_and(|sc| owned_by(cd, &sc.metadata));
            match csi_kit::replace::storage_class(class, live.as_ref(), ours) {
                csi_kit::replace::Decision::Apply => {}
                csi_kit::replace::Decision::Replace(_) => replace = true,
                csi_kit::replace::Decision::Keep(_) => {
                    pass.kept.push(kept_class(cd, &name, live.as_ref()));
                    continue;
                }
            }
        }
        match apply(context, cd, operand, replace).await {
            Ok((outcome, generation)) => {
                let child = history(&operand_key, generation);
                let known = cd.status.iter().flat_map(|s| &s.children).any(|c| {
                    (&c.resource, &c.namespace, &c.name)
                        == (&child.resource, &child.namespace, &child.name)
                });
                match outcome {
                    Outcome::DriftRestored => record_drift(context, cd, operand, false).await,
                    Outcome::Created if known => record_drift(context, cd, operand, true).await,
                    _ => {}
                }
                if outcome.wrote() {
                    context.metrics.wrote(CONTROLLER_NAME, operand.kind());
                    tracing::info!(owner = %key(cd), object = %operand.key(), ?outcome, "applied");
                }
                pass.children.push(child);
            }
            Err(error) => pass.failures.push(error),
        }
    }
    let stale = stale(existing(context, cd), &wanted, inputs.snapshot_classes);
    remove(context, cd, stale, Removal::Stale, pass).await;
}

/// The operands that exist and are no longer wanted. VolumeSnapshotClasses count only when
/// this pass built them (`snapshot_classes_built`): their cache may have filled since the
/// build, which then left them out, and they must not be taken for stale ones.
fn stale(
    existing: Vec<Existing>,
    wanted: &BTreeSet<Existing>,
    snapshot_classes_built: bool,
) -> Vec<Existing> {
    existing
        .into_iter()
        .filter(|e| !wanted.contains(e))
        .filter(|(kind, _, _)| *kind != OwnedKind::VolumeSnapshotClass || snapshot_classes_built)
        .collect()
}

/// Available, Progressing and Degraded from the observed workloads and the pass.
/// Also returns when to look again: when a rolling Deployment would reach the progressing
/// deadline.
fn conditions(
    context: &Context,
    cd: &CSIDriverDeployment,
    pass: &Pass,
    now: &Time,
) -> (Vec<OperatorCondition>, Option<Duration>) {
    let mut out = Vec::new();
    let mut requeue = None;
    let mut too_long = false;
    let ns = cd.namespace().unwrap_or_default();
    let name = cd.name_any();
    let deployment = context
        .caches
        .deployments
        .get(&ObjectRef::new(&format!("{name}-controller")).within(&ns));
    let daemon_set = context
        .caches
        .daemon_sets
        .get(&ObjectRef::new(&format!("{name}-node")).within(&ns));
    if pass.removed {
        out.push(condition(
            AVAILABLE,
            ConditionStatus::False,
            REASON_REMOVED,
            "the driver is removed",
        ));
        out.push(condition(
            PROGRESSING,
            ConditionStatus::False,
            REASON_REMOVED,
            "",
        ));
    } else {
        let mut workloads = Vec::new();
        if cd.spec.driver_controller_template.is_some() {
            let controller = deployment.map(|d| deployment_conditions("", &d));
            if let Some(controller) = &controller {
                // As the built-in drivers: a rollout longer than the deadline is Degraded.
                let previous = cd
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == PROGRESSING));
                too_long = progressing_too_long(now, controller, previous);
                if controller.is_progressing() && !too_long {
                    let since = previous
                        .filter(|p| p.status == ConditionStatus::True)
                        .and_then(|p| p.last_transition_time.as_ref())
                        .map_or(now.0, |t| t.0);
                    let left = PROGRESSING_TIMEOUT - now.0.duration_since(since);
                    requeue = Duration::try_from(left)
                        .ok()
                        .map(|d| d + Duration::from_secs(1));
                }
            }
            workloads.push(controller);
        }
        workloads.push(daemon_set.map(|d| daemon_set_conditions("", &d)));
        let available = workloads.iter().all(|w| {
            w.as_ref()
                .is_some_and(|w| w.available.status == ConditionStatus::True)
        });
        let waiting: Vec<String> = workloads
            .iter()
            .map(|w| match w {
                Some(w) if w.available.status != ConditionStatus::True => {
                    w.available.message.clone().unwrap_or_default()
                }
                None => "Waiting for the workloads to be created".to_owned(),
                _ => String::new(),
            })
            .filter(|m| !m.is_empty())
            .collect();
        out.push(if available {
            condition(AVAILABLE, ConditionStatus::True, REASON_AS_EXPECTED, "")
        } else {
            condition(
                AVAILABLE,
                ConditionStatus::False,
                "Deploying",
                waiting.join("\n"),
            )
        });
        let progress: Vec<String> = workloads
            .iter()
            .flatten()
            .filter(|w| w.is_progressing())
            .map(|w| w.progressing.message.clone().unwrap_or_default())
            .collect();
        out.push(if progress.is_empty() {
            condition(PROGRESSING, ConditionStatus::False, REASON_AS_EXPECTED, "")
        } else {
            condition(
                PROGRESSING,
                ConditionStatus::True,
                "Deploying",
                progress.join("\n"),
            )
        });
    }
    let reported = if pass.problems.is_empty() {
        &pass.kept
    } else {
        &pass.problems
    };
    let degraded = if let Some(first) = reported.first() {
        let lines: Vec<String> = reported.iter().map(ToString::to_string).collect();
        condition(
            DEGRADED,
            ConditionStatus::True,
            first.reason,
            lines.join("\n"),
        )
    } else if !pass.failures.is_empty() {
        condition(
            DEGRADED,
            ConditionStatus::True,
            REASON_SYNC_FAILED,
            join(&pass.failures, "\n"),
        )
    } else if too_long {
        condition(
            DEGRADED,
            ConditionStatus::True,
            REASON_PROGRESSING_TOO_LONG,
            "Deployment was progressing too long",
        )
    } else if pass.volumes_in_use > 0 {
        condition(
            DEGRADED,
            ConditionStatus::True,
            REASON_VOLUMES_IN_USE,
            if pass.uninstall_held {
                format!(
                    "{} PersistentVolumes of driver {} exist: the driver stays installed until they are deleted (delete their claims; volumes whose reclaim policy is Retain are deleted by hand)",
                    pass.volumes_in_use, cd.spec.driver_name
                )
            } else {
                format!(
                    "{} PersistentVolumes of driver {} exist: the CSIDriver and StorageClasses stay until they are deleted",
                    pass.volumes_in_use, cd.spec.driver_name
                )
            },
        )
    } else {
        condition(DEGRADED, ConditionStatus::False, REASON_AS_EXPECTED, "")
    };
    out.push(degraded);
    (out, requeue)
}

/// The status this pass should leave: `Unmanaged` keeps conditions and children as they were.
fn desired_status(
    context: &Context,
    cd: &CSIDriverDeployment,
    pass: &Pass,
    now: &Time,
) -> (CSIDriverDeploymentStatus, Option<Duration>) {
    let mut status = cd.status.clone().unwrap_or_default();
    status.observed_generation = cd.metadata.generation;
    status.state = Some(cd.spec.management_state.clone());
    if cd.spec.management_state == ManagementState::Unmanaged
        && cd.metadata.deletion_timestamp.is_none()
    {
        return (status, None);
    }
    if pass.problems.is_empty() {
        status.children = pass.children.clone();
    }
    let (conditions, requeue) = conditions(context, cd, pass, now);
    for new in conditions {
        set_condition(&mut status.conditions, new, now);
    }
    (status, requeue)
}

async fn write_status(
    context: &Context,
    cd: &CSIDriverDeployment,
    pass: &Pass,
    now: &Time,
) -> Result<Option<Duration>, StepError> {
    let (status, requeue) = desired_status(context, cd, pass, now);
    if cd.status.as_ref() == Some(&status) {
        return Ok(requeue);
    }
    let api: Api<CSIDriverDeployment> =
        Api::namespaced(context.client.clone(), &cd.namespace().unwrap_or_default());
    // A merge patch leaves out what is unset; name every field so emptied lists are cleared.
    let mut body = serde_json::to_value(&status).unwrap_or_default();
    for field in ["observedGeneration", "children", "state", "conditions"] {
        if body.get(field).is_none() {
            body[field] = serde_json::Value::Null;
        }
    }
    let patch = json!({ "status": body });
    // A failed write fails the pass: the object's backoff retries it, status included.
    api.patch_status(
        &cd.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| StepError::Status {
        owner: key(cd),
        source,
    })?;
    context
        .metrics
        .wrote(CONTROLLER_NAME, "CSIDriverDeployment/status");
    Ok(requeue)
}

/// Every permission the controller needs, cluster-wide: its own API (finalizers, status), the
/// operands in any namespace, the cluster-scoped ones, what it reads, and every rule of every
/// role it can create (RBAC lets it grant only what it holds).
pub fn operator_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    use opkit::rbac::rule;
    const READ: &[&str] = &["get", "list", "watch"];
    const MANAGE: &[&str] = &[
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let mut rules = vec![
        rule(
            &["csidriver.storage.openshift.io"],
            &["csidriverdeployments"],
            &["get", "list", "watch", "patch", "update"],
        ),
        rule(
            &["csidriver.storage.openshift.io"],
            &["csidriverdeployments/status"],
            &["get", "patch", "update"],
        ),
        // Owner references that block deletion need this where admission enforces it.
        rule(
            &["csidriver.storage.openshift.io"],
            &["csidriverdeployments/finalizers"],
            &["update"],
        ),
        rule(
            &["", "apps", "policy", "rbac.authorization.k8s.io"],
            &[
                "serviceaccounts",
                "deployments",
                "daemonsets",
                "poddisruptionbudgets",
                "roles",
                "rolebindings",
            ],
            MANAGE,
        ),
        rule(
            &["rbac.authorization.k8s.io", "storage.k8s.io"],
            &[
                "clusterroles",
                "clusterrolebindings",
                "csidrivers",
                "storageclasses",
            ],
            MANAGE,
        ),
        rule(
            &["snapshot.storage.k8s.io"],
            &["volumesnapshotclasses"],
            MANAGE,
        ),
        rule(&[""], &["persistentvolumes", "nodes"], READ),
        rule(&["config.openshift.io"], &["infrastructures"], READ),
        // Whether the VolumeSnapshotClass CRD exists: that CRD only (it is watched by name).
        k8s_openapi::api::rbac::v1::PolicyRule {
            resource_names: Some(vec![
                OptionalKind::VolumeSnapshotClass.crd_name().to_owned(),
            ]),
            ..rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                READ,
            )
        },
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
    ];
    // What it grants: the roles of the largest declared drivers, on OpenShift.
    let inputs = DeclaredInputs::offline(Topology::HighlyAvailable);
    for (controller, provisioning) in [
        (
            json!({"spec": {"hostNetwork": true, "containers": [{"name": "driver"}]}}),
            "Central",
        ),
        (
            json!({"spec": {"containers": [{"name": "driver", "securityContext": {"privileged": true}}]}}),
            "Distributed",
        ),
    ] {
        let object = json!({
            "metadata": {"name": "all", "namespace": "ns"},
            "spec": {
                "driverName": "all.csi.example.com",
                "driverSocket": "/csi/csi.sock",
                "provisioning": provisioning,
                "csiDriver": {"storageCapacity": true},
                "sidecars": {"resizer": true, "snapshotter": true},
                "driverControllerTemplate": controller,
                "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
            }
        });
        let Ok(cd) = api::yaml::from_value::<CSIDriverDeployment>(&object) else {
            continue;
        };
        for operand in build_operands(&cd, &inputs) {
            match operand {
                Operand::ClusterRole(role) => rules.extend(role.rules.into_iter().flatten()),
                Operand::Role(role) => rules.extend(role.rules.into_iter().flatten()),
                _ => {}
            }
        }
    }
    opkit::rbac::dedupe(&mut rules);
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_classes_are_stale_only_when_this_pass_built_them() {
        let class = (OwnedKind::VolumeSnapshotClass, None, "snap".to_owned());
        let role = (OwnedKind::ClusterRole, None, "gone".to_owned());
        let kept = (OwnedKind::StorageClass, None, "kept".to_owned());
        let wanted = BTreeSet::from([kept.clone()]);
        let existing = vec![class.clone(), role.clone(), kept];
        // Built without the classes (their cache was filling): the class is not stale.
        assert_eq!(
            stale(existing.clone(), &wanted, false),
            std::slice::from_ref(&role)
        );
        // Built with them, and the template is gone: it is.
        assert_eq!(stale(existing, &wanted, true), [class, role]);
    }
}
