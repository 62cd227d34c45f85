//! The controller runtime of our operators: watch-fed caches and a reconcile loop.
//!
//! Both operators reconcile one object (Storage `cluster`, or one ClusterCSIDriver) from many
//! inputs, so the loop is keyed by nothing: any change in any watched cache triggers the next
//! reconcile, bursts coalesce into one, failures back off exponentially, and a reconcile may ask
//! to run again after a delay (for time-based rules such as Degraded's 2-minute inertia). There is
//! no periodic resync: an idle cluster costs no requests. Controllers of many objects, each
//! reconciled on its own, use [`crate::controller`] over the same caches.
//!
//! [`Informers`] owns the caches: one reflector per watched kind, scoped by namespace and
//! label/field selectors by the caller. [`Informers::wait_synced`] is what readiness means.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::backoff::PerObjectBackoff;
use crate::metrics::Metrics;

type ReadyFuture = Pin<Box<dyn Future<Output = bool> + Send>>;

/// What the caches pull on a change: wakes the reconcile loop, and remembers when the latest
/// change came (a pass that follows writes settles only once a change has come after them).
#[derive(Debug, Default)]
pub struct Trigger {
    notify: Notify,
    /// When the latest change came.
    last: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Trigger {
    /// A change came: wake the loop.
    pub fn pull(&self) {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Read under the lock, so the latest change always has the latest time.
        *last = Some(std::time::Instant::now());
        drop(last);
        self.notify.notify_one();
    }

    /// Something other than a change needs a pass (a watch's first error, which the pass may
    /// report): wakes the loop without counting as a change, so a pass it brings after a write
    /// is not taken for one that sees the write.
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// When the latest change came, if one has.
    pub fn last_change(&self) -> Option<std::time::Instant> {
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The caches of one operator, and the trigger their changes pull.
pub struct Informers {
    trigger: Arc<Trigger>,
    ready: Vec<(String, ReadyFuture)>,
    tasks: JoinSet<()>,
    health: WatchHealth,
}

/// Which watches are failing, since when, and with what error: how a controller tells that an
/// API server it watches has stopped answering (every watch of it fails, and keeps failing,
/// however often it retries). A watch is failing from its first error until it gets an event
/// again (a change, or its re-list), or until the caller [`WatchHealth::forget`]s it: a watch
/// that resumes where it was has nothing to say until something changes.
#[derive(Clone, Debug, Default)]
pub struct WatchHealth(Arc<std::sync::Mutex<std::collections::BTreeMap<String, Failing>>>);

/// A watch that is failing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// The watch's name (as given to [`Informers::watch`]).
    pub watch: String,
    /// Its first error since it last had an event.
    pub since: std::time::SystemTime,
    /// Its latest error.
    pub error: String,
    /// When its latest error came.
    pub last: std::time::SystemTime,
}

/// A watch whose latest error is older than this has been working quietly since: its next
/// error starts a new failure (and is said again).
const QUIET_RECOVERY: Duration = Duration::from_secs(60);

impl WatchHealth {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, Failing>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records an error of `watch`; whether it was working until now.
    fn failed(&self, watch: &str, error: &impl std::fmt::Display) -> bool {
        let mut failing = self.lock();
        let error = error.to_string();
        let now = std::time::SystemTime::now();
        match failing.get_mut(watch) {
            Some(known)
                if now
                    .duration_since(known.last)
                    .is_ok_and(|quiet| quiet < QUIET_RECOVERY) =>
            {
                known.error = error;
                known.last = now;
                false
            }
            _ => {
                failing.insert(
                    watch.to_owned(),
                    Failing {
                        watch: watch.to_owned(),
                        since: now,
                        error,
                        last: now,
                    },
                );
                true
            }
        }
    }

    /// Records an event of `watch`: it works. Whether it was failing until now.
    fn working(&self, watch: &str) -> bool {
        let mut failing = self.lock();
        !failing.is_empty() && failing.remove(watch).is_some()
    }

    /// Forgets the failures of `watches`, once the caller knows better (it asked the server,
    /// and the server answered): a quiet watch that is back has no event to show it.
    pub fn forget(&self, watches: &[&str]) {
        let mut failing = self.lock();
        for watch in watches {
            failing.remove(*watch);
        }
    }

    /// The watches failing now, by name.
    pub fn failing(&self) -> Vec<Failing> {
        self.lock().values().cloned().collect()
    }
}

impl Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers")
            .field("watches", &self.ready.len())
            .finish_non_exhaustive()
    }
}

impl Default for Informers {
    fn default() -> Self {
        Self::new()
    }
}

/// Some caches did not fill in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "watch caches not synced after {after:?}: {pending}; check that these APIs exist and that the operator may list and watch them"
)]
pub struct NotSynced {
    /// How long we waited.
    pub after: Duration,
    /// The caches still empty, comma-separated.
    pub pending: String,
}

impl Informers {
    /// No caches yet.
    pub fn new() -> Self {
        Self {
            trigger: Arc::default(),
            ready: Vec::new(),
            tasks: JoinSet::new(),
            health: WatchHealth::default(),
        }
    }

    /// Starts caching `api` (scoped by `config`) and returns the cache. Every change to it
    /// triggers a reconcile. Watch errors are retried with backoff, forever.
    pub fn watch<K>(&mut self, name: &str, api: Api<K>, config: watcher::Config) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        self.watch_then(name, api, config, |_: &K| {})
    }

    /// Like [`Informers::watch`], and `touched` sees every object the watch applies or
    /// deletes (after the cache has it), including each object of a re-list: how a
    /// per-object controller ([`crate::controller`]) maps a change to the objects it concerns.
    pub fn watch_then<K>(
        &mut self,
        name: &str,
        api: Api<K>,
        config: watcher::Config,
        touched: impl Fn(&K) + Send + Sync + 'static,
    ) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        watch_kind(self, name, api, config, Box::new(touched))
    }

    /// Caches of `api`, scoped by `config`, only what `project` keeps of each object: `None`
    /// keeps nothing (the object does not concern the operator), `Some(p)` keeps `p` under the
    /// object's `namespace/name`. Full objects pass through the watch but none is stored, so
    /// the memory is that of the projections kept, however many objects the cluster has. A
    /// change triggers a reconcile only when it changes what is kept. With an
    /// `Api<PartialObjectMeta<_>>` only metadata crosses the wire.
    ///
    /// The first list (and every re-list) is read [`PROJECTED_PAGE_SIZE`] objects at a time
    /// at most: a page is read and decoded whole before it is projected, so on a cluster that
    /// already holds thousands of the objects a larger page is what the memory would follow.
    pub fn watch_projected<K, P>(
        &mut self,
        name: &str,
        api: Api<K>,
        config: watcher::Config,
        project: impl Fn(&K) -> Option<P> + Send + Sync + 'static,
    ) -> Projection<P>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        P: Clone + PartialEq + Send + Sync + 'static,
    {
        self.watch_projected_then(name, api, config, project, || {})
    }

    /// Like [`Informers::watch_projected`], and `changed` runs whenever what is kept changes,
    /// and on the watch's first error (a pass may report it).
    pub fn watch_projected_then<K, P>(
        &mut self,
        name: &str,
        api: Api<K>,
        config: watcher::Config,
        project: impl Fn(&K) -> Option<P> + Send + Sync + 'static,
        changed: impl Fn() + Send + Sync + 'static,
    ) -> Projection<P>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        P: Clone + PartialEq + Send + Sync + 'static,
    {
        watch_projected_kind(
            self,
            name,
            api,
            config,
            Box::new(project),
            Box::new(changed),
        )
    }

    /// The trigger every cache pulls on change (for [`run`]).
    pub fn trigger(&self) -> Arc<Trigger> {
        self.trigger.clone()
    }

    /// Which of these watches are failing (see [`WatchHealth`]). A watch's first error
    /// triggers a reconcile, so that the controller can say so.
    pub fn health(&self) -> WatchHealth {
        self.health.clone()
    }

    /// Waits until every cache has its first full list.
    pub async fn wait_synced(&mut self, timeout: Duration) -> Result<(), NotSynced> {
        let mut pending = Vec::new();
        let deadline = Instant::now() + timeout;
        for (name, ready) in self.ready.drain(..) {
            let synced = tokio::time::timeout_at(deadline, ready)
                .await
                .unwrap_or(false);
            if !synced {
                pending.push(name);
            }
        }
        if pending.is_empty() {
            Ok(())
        } else {
            Err(NotSynced {
                after: timeout,
                pending: pending.join(", "),
            })
        }
    }
}

/// What a watch tells its caller about each object it applies or deletes.
type Touched<K> = Box<dyn Fn(&K) + Send + Sync>;

/// What a projecting watch keeps of each object (see [`Informers::watch_projected`]).
type Project<K, P> = Box<dyn Fn(&K) -> Option<P> + Send + Sync>;

/// [`Informers::watch_then`] without the caller's closure type, so that each kind's watch (the
/// watcher, the reflector and their decoding: several hundred functions) is compiled once for
/// all callers rather than once per call site. See [`prebuilt_watches`].
fn watch_kind<K>(
    informers: &mut Informers,
    name: &str,
    api: Api<K>,
    config: watcher::Config,
    touched: Touched<K>,
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store();
    let trigger = informers.trigger.clone();
    let health = informers.health.clone();
    let watch_name = name.to_owned();
    informers.tasks.spawn(async move {
        let mut events = std::pin::pin!(
            watcher(api, config)
                .backoff(crate::backoff::WatchBackoff::default())
                .reflect(writer)
        );
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    if health.working(&watch_name) {
                        tracing::info!(watch = %watch_name, "watch working again");
                    }
                    // The store shows a re-list's objects only once it is complete: a
                    // pass woken before then would decide from the state before it.
                    match &event {
                        watcher::Event::Apply(object) | watcher::Event::Delete(object) => {
                            touched(object);
                            trigger.pull();
                        }
                        watcher::Event::InitApply(object) => touched(object),
                        watcher::Event::Init => {}
                        watcher::Event::InitDone => trigger.pull(),
                    }
                }
                Err(error) => {
                    // Said once per outage; the retries (every second or so) only at debug.
                    // Its first error brings a pass, which may report it; it is no change.
                    if health.failed(&watch_name, &error) {
                        tracing::warn!(watch = %watch_name, %error, "watch failed; retrying");
                        trigger.wake();
                    } else {
                        tracing::debug!(watch = %watch_name, %error, "watch still failing; retrying");
                    }
                }
            }
        }
    });
    let ready = store.clone();
    informers.ready.push((
        name.to_owned(),
        Box::pin(async move { ready.wait_until_ready().await.is_ok() }),
    ));
    store
}

/// [`Informers::watch_projected_then`] without the caller's closure types (see [`watch_kind`]).
fn watch_projected_kind<K, P>(
    informers: &mut Informers,
    name: &str,
    api: Api<K>,
    config: watcher::Config,
    project: Project<K, P>,
    changed: Box<dyn Fn() + Send + Sync>,
) -> Projection<P>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    P: Clone + PartialEq + Send + Sync + 'static,
{
    let config = with_projected_page_size(config);
    let trigger = informers.trigger.clone();
    let health = informers.health.clone();
    let watch_name = name.to_owned();
    let projection = Projection::default();
    let (synced, mut ready) = tokio::sync::watch::channel(false);
    let shared = projection.clone();
    informers.tasks.spawn(async move {
        let events = watcher(api, config).backoff(crate::backoff::WatchBackoff::default());
        let pulled = || {
            changed();
            trigger.pull();
        };
        // The caller hears of the watch's first error too (a per-object controller reports
        // it from its passes), but the trigger does not take it for a change.
        let woken = || {
            changed();
            trigger.wake();
        };
        let watch = Watch {
            name: &watch_name,
            health: &health,
            wake: &woken,
        };
        follow(events, &shared, &project, &synced, &pulled, &watch).await;
    });
    informers.ready.push((
        name.to_owned(),
        Box::pin(async move { ready.wait_for(|synced| *synced).await.is_ok() }),
    ));
    projection
}

/// The most objects a projecting watch ([`Informers::watch_projected`]) asks for in one page
/// of its list. kube's watcher reads 500 by default, and each page is held whole, as its
/// response body and then decoded, before the first object of it is projected: with a few
/// cluster-wide watches listing at once (PersistentVolumes, claims, CSINodes) that is several
/// MiB of heap at the start, which glibc's allocator keeps for the life of the process once
/// the small objects that outlive the list are scattered across it. 50 keeps the start of an
/// operator on a cluster of 4,000 volumes within a MiB of its start on an empty one (the
/// README's bench, "volumes first"), at the cost of one list request per 50 objects.
pub const PROJECTED_PAGE_SIZE: u32 = 50;

/// `config` with its page size capped at [`PROJECTED_PAGE_SIZE`].
fn with_projected_page_size(config: watcher::Config) -> watcher::Config {
    let page = config
        .page_size
        .map_or(PROJECTED_PAGE_SIZE, |page| page.min(PROJECTED_PAGE_SIZE));
    config.page_size(page)
}

/// The watches of the kinds that more than one of our operators cache, compiled here once.
///
/// In a debug build (the tests, `cargo build`) rustc shares generic instances: a crate that
/// needs `watch_kind::<Deployment>` uses this crate's copy if this crate has one, and compiles
/// its own otherwise. The driver operator and the CSIDriverDeployment controller are side by
/// side, not one on top of the other, so without these both would compile every watch they
/// share (about 9,000 functions, a tenth of their build). Naming the instances here is all it
/// takes; nothing calls this function. A release build inlines across crates and ignores it.
#[doc(hidden)]
pub fn prebuilt_watches() -> [*const (); 13] {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
    use k8s_openapi::api::core::v1::{PersistentVolume, ServiceAccount};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    [
        watch_kind::<ServiceAccount> as *const (),
        watch_kind::<Role> as *const (),
        watch_kind::<RoleBinding> as *const (),
        watch_kind::<ClusterRole> as *const (),
        watch_kind::<ClusterRoleBinding> as *const (),
        watch_kind::<PodDisruptionBudget> as *const (),
        watch_kind::<Deployment> as *const (),
        watch_kind::<DaemonSet> as *const (),
        watch_kind::<CSIDriver> as *const (),
        watch_kind::<StorageClass> as *const (),
        watch_kind::<CustomResourceDefinition> as *const (),
        watch_projected_kind::<PersistentVolume, String> as *const (),
        watch_kind::<PersistentVolume> as *const (),
    ]
}

/// What [`Informers::watch_projected`] keeps: a projection per object that concerns the
/// operator, by `namespace/name` (`name` for cluster-scoped objects).
#[derive(Debug)]
pub struct Projection<P> {
    entries: Arc<std::sync::RwLock<std::collections::HashMap<String, P>>>,
}

impl<P> Clone for Projection<P> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
        }
    }
}

impl<P> Default for Projection<P> {
    fn default() -> Self {
        Self {
            entries: Arc::default(),
        }
    }
}

impl<P: Clone + PartialEq> Projection<P> {
    /// Every kept projection with its key, sorted by key.
    pub fn entries(&self) -> Vec<(String, P)> {
        let mut entries: Vec<(String, P)> = self
            .entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries
    }

    /// How many objects are kept.
    pub fn len(&self) -> usize {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps `value` under `key` (removes it for `None`); whether that changed anything.
    fn set(&self, key: String, value: Option<P>) -> bool {
        let mut entries = self
            .entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match value {
            Some(value) => entries.insert(key, value.clone()).as_ref() != Some(&value),
            None => entries.remove(&key).is_some(),
        }
    }

    /// Replaces everything kept; whether that changed anything.
    fn replace(&self, fresh: std::collections::HashMap<String, P>) -> bool {
        let mut entries = self
            .entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = *entries != fresh;
        *entries = fresh;
        changed
    }
}

/// A watch's name and where its failures are recorded.
struct Watch<'a> {
    name: &'a str,
    health: &'a WatchHealth,
    /// Brings a pass without counting as a change (see [`Trigger::wake`]).
    wake: &'a (dyn Fn() + Sync),
}

/// Keeps `projection` in step with the watch `events` until the watch ends.
async fn follow<K, P>(
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    projection: &Projection<P>,
    project: &impl Fn(&K) -> Option<P>,
    synced: &tokio::sync::watch::Sender<bool>,
    pull: &impl Fn(),
    watch: &Watch<'_>,
) where
    K: Resource,
    P: Clone + PartialEq,
{
    let mut events = std::pin::pin!(events);
    // A re-list fills a fresh map, swapped in whole when complete (objects deleted while the
    // watch was down must not linger).
    let mut relisting: Option<std::collections::HashMap<String, P>> = None;
    while let Some(event) = events.next().await {
        if event.is_ok() && watch.health.working(watch.name) {
            tracing::info!(watch = %watch.name, "watch working again");
        }
        let changed = match event {
            Ok(watcher::Event::Init) => {
                relisting = Some(std::collections::HashMap::new());
                false
            }
            Ok(watcher::Event::InitApply(object)) => {
                if let (Some(fresh), Some(kept)) = (relisting.as_mut(), project(&object)) {
                    fresh.insert(key_of(&object), kept);
                }
                false
            }
            Ok(watcher::Event::InitDone) => {
                let changed = projection.replace(relisting.take().unwrap_or_default());
                let _ = synced.send(true);
                changed
            }
            Ok(watcher::Event::Apply(object)) => projection.set(key_of(&object), project(&object)),
            Ok(watcher::Event::Delete(object)) => projection.set(key_of(&object), None),
            Err(error) => {
                // Said once per outage; the retries only at debug. Its first error brings a
                // pass, which may report it; it is no change.
                if watch.health.failed(watch.name, &error) {
                    tracing::warn!(watch = %watch.name, %error, "watch failed; retrying");
                    (watch.wake)();
                } else {
                    tracing::debug!(watch = %watch.name, %error, "watch still failing; retrying");
                }
                false
            }
        };
        if changed {
            pull();
        }
    }
}

fn key_of<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

/// An operator could not start./// An operator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// API discovery failed.
    #[error("discovering the config.openshift.io API: {0}")]
    Discovery(#[source] kube::Error),
    /// The caches did not fill.
    #[error(transparent)]
    NotSynced(#[from] NotSynced),
}

/// A watch configuration for one object by name (singletons such as `Infrastructure/cluster`).
pub fn named(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

/// Every object of a cache, cloned.
pub fn snapshot<K: Resource + Clone>(store: &Store<K>) -> Vec<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store.state().iter().map(|o| o.as_ref().clone()).collect()
}

/// The one object of a cache scoped to a single name, cloned.
pub fn single<K: Resource + Clone>(store: &Store<K>) -> Option<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store.state().first().map(|o| o.as_ref().clone())
}

/// An error a reconcile can report, with a stable category for metrics.
pub trait ReconcileError: std::fmt::Display {
    /// e.g. `conflict`, `invalid`, `transport`.
    fn category(&self) -> &'static str;
}

/// How the loop retries.
#[derive(Clone, Copy, Debug)]
pub struct LoopConfig {
    /// First retry delay after a failure.
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_cap: Duration,
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            retry_base: Duration::from_secs(1),
            retry_cap: Duration::from_secs(300),
        }
    }
}

/// Runs `reconcile` once at start, then whenever `trigger` is pulled, when a failure's backoff
/// ends, or when the last successful reconcile asked to run again after a delay (`Ok(Some(d))`).
/// Each pass is reported to `metrics` ([`Metrics::pass_started`], [`Metrics::pass_ended`]): a
/// pass settles when it succeeds, `reconcile` counted no write or failure for `controller`, no
/// change is waiting when it ends, and a change has come through `trigger` since the latest
/// write was sent (before that, the caches may not show it). A change from elsewhere that
/// comes while a write is on its way passes for the write's own; that window is the one of two
/// events racing. Returns when `shutdown` completes.
pub async fn run<F, Fut, E>(
    controller: &str,
    trigger: Arc<Trigger>,
    config: LoopConfig,
    metrics: Metrics,
    mut reconcile: F,
    shutdown: impl Future<Output = ()>,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<Duration>, E>>,
    E: ReconcileError,
{
    let backoff = PerObjectBackoff::new(config.retry_base, config.retry_cap);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut next: Option<Instant> = Some(Instant::now());
    loop {
        let timer = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let woken_by = tokio::select! {
            () = &mut shutdown => return,
            () = trigger.notify.notified() => "change",
            () = timer => "timer",
        };
        // The caches may not show writes made after the latest change they brought: a pass
        // that starts before a change has come since the last write was sent decides from
        // the state before it, and cannot be called settled. (A change from elsewhere that
        // comes while the write is on its way passes for the write's own: two events racing.)
        let writes_seen = metrics
            .last_write_sent_after(controller)
            .is_none_or(|sent| trigger.last_change().is_some_and(|change| change > sent));
        let mark = metrics.pass_started(controller);
        let result = reconcile().await;
        // A change that arrived during the pass: taking its permit here means running again at
        // once, as the select above would have.
        let waiting = trigger.notify.notified().now_or_never().is_some();
        match &result {
            Ok(requeue) => {
                backoff.succeeded(controller);
                next = requeue.map(|delay| Instant::now() + delay);
            }
            Err(error) => {
                let delay = backoff.failed(controller);
                metrics.failed(controller, error.category());
                tracing::warn!(controller, %error, retry_in = ?delay, "reconcile failed");
                next = Some(Instant::now() + delay);
            }
        }
        if waiting {
            next = Some(Instant::now());
        }
        let quiet = result.is_ok() && !waiting && writes_seen;
        let wrote = metrics.pass_ended(controller, mark, quiet, next.is_some());
        tracing::debug!(
            controller,
            woken_by,
            ok = result.is_ok(),
            wrote,
            waiting,
            settled = metrics.pass_state(controller).settled,
            "pass ended"
        );
    }
}
