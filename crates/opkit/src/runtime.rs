//! The controller runtime of our operators: watch-fed caches and a reconcile loop.
//!
//! Both operators reconcile one object (Storage `cluster`, or one ClusterCSIDriver) from many
//! inputs, so the loop is keyed by nothing: any change in any watched cache triggers the next
//! reconcile, bursts coalesce into one, failures back off exponentially, and a reconcile may ask
//! to run again after a delay (for time-based rules such as Degraded's 2-minute inertia). There is
//! no periodic resync: an idle cluster costs no requests.
//!
//! [`Informers`] owns the caches: one reflector per watched kind, scoped by namespace and
//! label/field selectors by the caller. [`Informers::wait_synced`] is what readiness means.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
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

/// The caches of one operator, and the trigger their changes pull.
pub struct Informers {
    trigger: Arc<Notify>,
    ready: Vec<(String, ReadyFuture)>,
    tasks: JoinSet<()>,
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
            trigger: Arc::new(Notify::new()),
            ready: Vec::new(),
            tasks: JoinSet::new(),
        }
    }

    /// Starts caching `api` (scoped by `config`) and returns the cache. Every change to it
    /// triggers a reconcile. Watch errors are retried with backoff, forever.
    pub fn watch<K>(&mut self, name: &str, api: Api<K>, config: watcher::Config) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        let (store, writer) = reflector::store();
        let trigger = self.trigger.clone();
        let watch_name = name.to_owned();
        self.tasks.spawn(async move {
            let mut events = std::pin::pin!(
                watcher(api, config)
                    .backoff(crate::backoff::WatchBackoff::default())
                    .reflect(writer)
            );
            while let Some(event) = events.next().await {
                match event {
                    Ok(_) => trigger.notify_one(),
                    Err(error) => {
                        tracing::warn!(watch = %watch_name, %error, "watch failed; retrying")
                    }
                }
            }
        });
        let ready = store.clone();
        self.ready.push((
            name.to_owned(),
            Box::pin(async move { ready.wait_until_ready().await.is_ok() }),
        ));
        store
    }

    /// The trigger every cache pulls on change (for [`run`]).
    pub fn trigger(&self) -> Arc<Notify> {
        self.trigger.clone()
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

/// An operator could not start.
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
/// Returns when `shutdown` completes.
pub async fn run<F, Fut, E>(
    controller: &str,
    trigger: Arc<Notify>,
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
        tokio::select! {
            () = &mut shutdown => return,
            () = trigger.notified() => {}
            () = timer => {}
        }
        metrics.reconciled(controller);
        match reconcile().await {
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
    }
}
