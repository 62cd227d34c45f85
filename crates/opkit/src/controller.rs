//! Per-object controllers on kube-runtime's controller engine.
//!
//! The driver operator and the cluster storage operator reconcile one object from many inputs
//! ([`crate::runtime::run`]). The CSIDriverDeployment and build controllers reconcile many
//! objects, each on its own: [`run`] drives them with kube-runtime's [`applier`] (what
//! `Controller::run` drives): a queue keyed by object that coalesces repeated requests, a
//! requeue per object when a reconcile asks for one, and on failure a retry after that
//! object's own backoff ([`PerObjectBackoff`]), so a failing object never holds up the
//! others and is retried at once when it, or an object mapped to it, changes.
//!
//! The requests come from the operator's shared caches ([`Informers::watch_then`]), each
//! kind watched once: a change to an owned object requests its owner ([`Requests::mapping`]),
//! a change to a cluster-wide input requests every object ([`Requests::every`]). (Using
//! `Controller::new(..).owns(..)` instead would open a second watch per kind beside the cache
//! the reconcile reads.)
//!
//! Up to [`CONCURRENCY`] objects are reconciled at once, never one object twice at once. Each
//! reconcile is a *pass* to [`Metrics`] (with its own clock, [`Metrics::within_pass`]): it
//! settled when it succeeded, wrote and failed nothing, no change came while it ran, the
//! events of earlier writes have come, no other pass was running, and no object is waiting for
//! a retry. A request for an object that is gone (or for every object when there is none) is
//! an idle pass, settled on the same terms.
//!
//! [`Informers::watch_then`]: crate::runtime::Informers::watch_then

use std::collections::HashSet;
use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::{StreamExt, stream};
use kube::Resource;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Config, applier};

use crate::backoff::PerObjectBackoff;
use crate::metrics::Metrics;
use crate::runtime::{LoopConfig, ReconcileError, Trigger};

enum Request<K: Resource> {
    One(ObjectRef<K>),
    All,
}

/// Asks a per-object controller to reconcile objects; cheap to clone into watch hooks.
pub struct Requests<K: Resource> {
    tx: mpsc::UnboundedSender<Request<K>>,
}

impl<K: Resource> Clone for Requests<K> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
        }
    }
}

impl<K: Resource> Debug for Requests<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requests").finish_non_exhaustive()
    }
}

/// What [`run`] takes its requests from.
pub struct Queue<K: Resource> {
    requests: Requests<K>,
    rx: mpsc::UnboundedReceiver<Request<K>>,
}

impl<K: Resource> Debug for Queue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}

impl<K: Resource> Default for Queue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource> Queue<K> {
    /// An empty queue.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::unbounded();
        Self {
            requests: Requests { tx },
            rx,
        }
    }

    /// A handle that adds to this queue.
    pub fn requests(&self) -> Requests<K> {
        self.requests.clone()
    }
}

impl<K> Requests<K>
where
    K: Resource + 'static,
    K::DynamicType: Default + Clone,
{
    /// Asks for `object` to be reconciled. (After the controller has stopped, nothing.)
    pub fn object(&self, object: ObjectRef<K>) {
        let _ = self.tx.unbounded_send(Request::One(object));
    }

    /// Asks for every object in the controller's cache to be reconciled.
    pub fn all(&self) {
        let _ = self.tx.unbounded_send(Request::All);
    }

    /// A watch hook ([`crate::runtime::Informers::watch_then`]) that asks for the objects
    /// `map` names for each object it sees.
    pub fn mapping<O, I>(
        &self,
        map: impl Fn(&O) -> I + Send + Sync + 'static,
    ) -> impl Fn(&O) + Send + Sync + 'static
    where
        I: IntoIterator<Item = ObjectRef<K>>,
        K::DynamicType: Send,
    {
        let requests = self.clone();
        move |object| {
            for wanted in map(object) {
                requests.object(wanted);
            }
        }
    }

    /// A watch hook that asks for every object on any change: for inputs every object
    /// depends on.
    pub fn every<O>(&self) -> impl Fn(&O) + Send + Sync + 'static
    where
        K::DynamicType: Send,
    {
        let requests = self.clone();
        move |_| requests.all()
    }
}

/// A failed reconcile and when it is retried (the error policy's answer).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Failed<E: std::error::Error + 'static> {
    /// What failed.
    #[source]
    pub error: E,
    /// When the object is tried again, unless it changes first.
    pub retry_in: Duration,
}

/// What the passes share: to decide whether one settled, and each object's backoff.
struct State {
    in_flight: AtomicUsize,
    failing: Mutex<HashSet<String>>,
    backoff: PerObjectBackoff,
}

impl State {
    fn failing(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.failing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether the events of the latest write have come: a change has come since it was sent.
fn writes_seen(metrics: &Metrics, controller: &str, trigger: &Trigger) -> bool {
    metrics
        .last_write_sent_after(controller)
        .is_none_or(|sent| trigger.last_change().is_some_and(|change| change > sent))
}

/// Records an idle pass (see the module docs), unless a reconcile is running.
fn idle(state: &State, metrics: &Metrics, controller: &str, trigger: &Trigger) {
    if state.in_flight.load(Ordering::SeqCst) == 0 {
        let quiet = state.failing().is_empty() && writes_seen(metrics, controller, trigger);
        metrics.idle_pass(controller, quiet);
    }
}

/// How many objects are reconciled at once: one slow or hanging request does not hold up the
/// others, and a burst (every object after a re-list) does not flood the API server.
pub const CONCURRENCY: u16 = 4;

type PassFuture<'a, E> = Pin<Box<dyn Future<Output = Result<Action, Failed<E>>> + Send + 'a>>;

/// Reconciles every object of `store` once at start, then each object `queue` asks for, until
/// `shutdown` completes (running reconciles are finished first).
/// `reconcile` returns when to look at the object again (`Ok(Some(delay))`), or fails; a
/// failure is counted under its category, logged, and retried after the object's backoff
/// (from `config.retry_base` doubling to `config.retry_cap`), or sooner when a change asks
/// for the object. Passes are reported to `metrics` under `controller` (see the module docs);
/// `trigger` is the one the caches pull.
#[allow(clippy::too_many_arguments)]
pub async fn run<K, F, Fut, E>(
    controller: &str,
    store: Store<K>,
    queue: Queue<K>,
    trigger: Arc<Trigger>,
    config: LoopConfig,
    metrics: Metrics,
    reconcile: F,
    shutdown: impl Future<Output = ()>,
) where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Debug + Default + Eq + Hash + Clone + Unpin + Send + Sync,
    F: Fn(Arc<K>) -> Fut + Sync,
    Fut: Future<Output = Result<Option<Duration>, E>> + Send,
    E: ReconcileError + std::error::Error + Send + 'static,
{
    let state = State {
        in_flight: AtomicUsize::new(0),
        failing: Mutex::default(),
        backoff: PerObjectBackoff::new(config.retry_base, config.retry_cap),
    };
    // Held to the end: the queue stays open (and the loop running) until `shutdown`, even when
    // no watch asks for anything.
    let Queue { requests, rx } = queue;
    requests.all();
    let (state, metrics, trigger, reconcile) = (&state, &metrics, &*trigger, &reconcile);
    let cache = store.clone();
    let wanted = rx
        .flat_map(move |request| {
            let objects = match request {
                Request::One(object) => vec![object],
                Request::All => {
                    let all: Vec<ObjectRef<K>> = cache
                        .state()
                        .iter()
                        .map(|o| ObjectRef::from_obj(&**o))
                        .collect();
                    if all.is_empty() {
                        idle(state, metrics, controller, trigger);
                    }
                    all
                }
            };
            stream::iter(objects.into_iter().map(Ok::<_, Infallible>))
        })
        .take_until(shutdown);
    let reconciler = move |object: Arc<K>, _: Arc<()>| -> PassFuture<'_, E> {
        Box::pin(async move {
            let key = ObjectRef::from_obj(&*object).erase().to_string();
            state.in_flight.fetch_add(1, Ordering::SeqCst);
            let seen = writes_seen(metrics, controller, trigger);
            let started = std::time::Instant::now();
            let mark = metrics.pass_started(controller);
            let result = Metrics::within_pass(reconcile(object)).await;
            let alone = state.in_flight.fetch_sub(1, Ordering::SeqCst) == 1;
            let waiting = trigger.last_change().is_some_and(|change| change > started);
            match result {
                Ok(requeue) => {
                    state.backoff.succeeded(&key);
                    let quiet = {
                        let mut failing = state.failing();
                        failing.remove(&key);
                        failing.is_empty()
                    } && seen
                        && alone
                        && !waiting;
                    metrics.pass_ended(controller, mark, quiet, requeue.is_some());
                    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
                }
                Err(error) => {
                    let retry_in = state.backoff.failed(&key);
                    metrics.failed(controller, error.category());
                    tracing::warn!(controller, object = %key, %error, ?retry_in, "reconcile failed");
                    state.failing().insert(key);
                    metrics.pass_ended(controller, mark, false, true);
                    Err(Failed { error, retry_in })
                }
            }
        })
    };
    let error_policy = |_: Arc<K>, failed: &Failed<E>, _: Arc<()>| Action::requeue(failed.retry_in);
    let mut results = std::pin::pin!(applier(
        reconciler,
        error_policy,
        Arc::new(()),
        store,
        wanted,
        Config::default().concurrency(CONCURRENCY),
    ));
    while let Some(result) = results.next().await {
        match result {
            Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
            Err(controller::Error::ObjectNotFound(object)) => {
                let key = object.to_string();
                state.backoff.succeeded(&key);
                state.failing().remove(&key);
                idle(state, metrics, controller, trigger);
            }
            Err(error) => tracing::warn!(controller, %error, "controller queue failed"),
        }
    }
    drop(requests);
}
