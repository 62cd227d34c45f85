//! The watch caches the controller reads instead of asking the API server, and which change
//! asks for which CSIDriverDeployment ([`start_caches`]).

use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use api::csidriver_v1alpha1::CSIDriverDeployment;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use opkit::controller::Requests;
use opkit::runtime::{Informers, StartError};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;

use crate::{OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL};
use csi_kit::inputs::OptionalKind;

/// How long the caches may take to fill at start.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// The watch caches: the CSIDriverDeployments, every operand by its owner label, the
/// StorageClasses and CSIDrivers (for the default-class rule and foreign drivers), the
/// CSI driver of each CSI PersistentVolume (a driver with volumes keeps its CSIDriver; nothing
/// else of a volume is kept) and the Pending claims that may be stuck on a driver (see
/// [`csi_kit::claims`]; nothing of the other claims is kept).
#[derive(Clone)]
pub struct Caches {
    pub(crate) deployments_declared: Store<CSIDriverDeployment>,
    pub(crate) service_accounts: Store<ServiceAccount>,
    pub(crate) roles: Store<Role>,
    pub(crate) role_bindings: Store<RoleBinding>,
    pub(crate) cluster_roles: Store<ClusterRole>,
    pub(crate) cluster_role_bindings: Store<ClusterRoleBinding>,
    pub(crate) pdbs: Store<PodDisruptionBudget>,
    pub(crate) deployments: Store<Deployment>,
    pub(crate) daemon_sets: Store<DaemonSet>,
    pub(crate) csi_drivers: Store<CSIDriver>,
    pub(crate) storage_classes: Store<StorageClass>,
    /// PersistentVolume name -> its CSI driver, for CSI volumes only.
    pub(crate) volumes: opkit::runtime::Projection<String>,
    /// The Pending claims that may wait on some driver, by `namespace/name`.
    pub(crate) pending_claims: opkit::runtime::Projection<csi_kit::claims::PendingClaim>,
    /// The VolumeSnapshotClass CRD, while it exists.
    pub(crate) snapshot_crd: Store<CustomResourceDefinition>,
    /// The VolumeSnapshotClasses with owner labels, cached once their CRD exists.
    pub(crate) snapshot_classes: SnapshotClasses,
}

/// The cache of VolumeSnapshotClasses with owner labels: started the first time their CRD is
/// seen (a watch of a kind that is not served would never fill, and would hold up the start).
/// Each change asks for its owner; the first full list asks for every object, which may have
/// been waiting for the kind.
#[derive(Clone)]
pub(crate) struct SnapshotClasses {
    client: Client,
    requests: Requests<CSIDriverDeployment>,
    pub(crate) store: Arc<OnceLock<Store<DynamicObject>>>,
    /// The watch task; dropped (and so stopped) with the last clone of the caches.
    task: Arc<Mutex<JoinSet<()>>>,
}

impl SnapshotClasses {
    /// The kind, as the dynamic API names it.
    pub(crate) fn resource() -> ApiResource {
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
pub(crate) enum SnapshotApi {
    /// Their CRD does not exist.
    NotServed,
    /// The CRD exists; the cache is still filling.
    Filling,
    /// The CRD exists and these are the classes with owner labels.
    Served(Vec<Arc<DynamicObject>>),
}

impl Caches {
    /// The VolumeSnapshotClasses, starting their cache once their CRD exists.
    pub(crate) fn snapshot_api(&self) -> SnapshotApi {
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

/// The watch of an owned kind: the objects with the owner labels.
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
/// any StorageClass, or a change in which drivers have volumes or which claims are Pending,
/// all of them (the default-class rule, the volumes that hold a removal back, the stuck
/// claims).
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
    let every = requests.clone();
    let classes = storage_classes.clone();
    let pending_claims = informers.watch_projected_then(
        "persistentvolumeclaims (pending ones kept)",
        Api::<PersistentVolumeClaim>::all(c.clone()),
        watcher::Config::default(),
        move |claim| {
            let pending = csi_kit::claims::pending_claim(claim)?;
            let class = pending
                .class
                .as_deref()
                .and_then(|name| classes.get(&ObjectRef::new(name)));
            // Any driver's: the drivers declared may change, a claim's projection does not.
            csi_kit::claims::may_wait_on(&pending, None, class.as_deref()).then_some(pending)
        },
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
        pending_claims,
        snapshot_crd,
        snapshot_classes,
    };
    informers.wait_synced(SYNC_TIMEOUT).await?;
    Ok((caches, informers))
}
