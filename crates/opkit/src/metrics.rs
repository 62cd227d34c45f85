//! The operator's Prometheus metrics: reconciles, their errors by category, API writes, and
//! whether each controller has settled, per controller. Served by the admin server at
//! `/metrics`.
//!
//! A controller has *settled* when its latest pass succeeded, wrote nothing and failed nothing,
//! and no change was waiting when it ended: the cluster is as the controller wants it and the
//! controller will do nothing until something changes. [`Metrics::settled`] waits for that
//! moment (tests use it to decide "converged" from an event instead of a quiet period).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// When the running pass started and when its latest write returned (see
/// [`Metrics::within_pass`]).
struct PassClock {
    started: std::time::Instant,
    write_returned: Option<std::time::Instant>,
}

tokio::task_local! {
    static PASS_CLOCK: Mutex<PassClock>;
}

/// Labels of per-controller counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The controller, e.g. `GCPPDDriverControllerServiceController`.
    pub controller: String,
}

/// Labels of error counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The controller.
    pub controller: String,
    /// A stable error category, e.g. `conflict`, `invalid`, `transport`.
    pub category: String,
}

/// Labels of write counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// The controller.
    pub controller: String,
    /// The kind written.
    pub kind: String,
}

/// Every metric of the operator, cheap to clone and share.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    reconciles: Family<ControllerLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    writes: Family<WriteLabels, Counter>,
    settled: Family<ControllerLabels, Gauge>,
    passes: Arc<Mutex<HashMap<String, Passes>>>,
}

/// The passes of one controller: how many ran, whether the latest settled, and the writes and
/// failures counted so far (a pass that changes them did not settle).
struct Passes {
    state: tokio::sync::watch::Sender<PassState>,
    writes: u64,
    failures: u64,
    /// When the latest pass started, and when its latest write so far returned.
    pass_started: Option<std::time::Instant>,
    write_returned: Option<std::time::Instant>,
    /// A time before which the latest write was not sent: when the write before it (in the
    /// same pass) returned, or when its pass started.
    last_write_sent_after: Option<std::time::Instant>,
}

impl Default for Passes {
    fn default() -> Self {
        Self {
            state: tokio::sync::watch::Sender::new(PassState::default()),
            writes: 0,
            failures: 0,
            pass_started: None,
            write_returned: None,
            last_write_sent_after: None,
        }
    }
}

/// Where a controller's passes are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassState {
    /// Passes started.
    pub started: u64,
    /// Passes ended.
    pub ended: u64,
    /// Whether the latest pass ended settled (see the module docs); false while one runs.
    pub settled: bool,
    /// Whether a pass is due on a timer (a requeue or a retry) after the latest one; without
    /// one, only a change runs the controller again.
    pub timed: bool,
}

/// A wait for a controller to settle (see [`Metrics::settling`]).
pub type SettledWait = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A mark taken when a pass starts, for [`Metrics::pass_ended`]: the writes and failures
/// counted so far.
#[derive(Clone, Copy, Debug)]
pub struct PassMark {
    writes: u64,
    failures: u64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with the operator's metrics registered under the `storage_operator` prefix.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("storage_operator");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let writes = Family::<WriteLabels, Counter>::default();
        let settled = Family::<ControllerLabels, Gauge>::default();
        registry.register(
            "reconciles",
            "Reconciles run, per controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, per controller and error category",
            errors.clone(),
        );
        registry.register(
            "api_writes",
            "Objects written to the API server, per controller and kind",
            writes.clone(),
        );
        registry.register(
            "settled",
            "1 when the controller's latest pass wrote nothing, failed nothing and no change was waiting",
            settled.clone(),
        );
        Self {
            registry: Arc::new(Mutex::new(root)),
            reconciles,
            errors,
            writes,
            settled,
            passes: Arc::default(),
        }
    }

    fn passes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Passes>> {
        self.passes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn labels(controller: &str) -> ControllerLabels {
        ControllerLabels {
            controller: controller.to_owned(),
        }
    }

    /// Counts a pass of `controller` starting (a reconcile); returns the mark to end it with.
    pub fn pass_started(&self, controller: &str) -> PassMark {
        self.reconciled(controller);
        self.settled.get_or_create(&Self::labels(controller)).set(0);
        let mut passes = self.passes();
        let passes = passes.entry(controller.to_owned()).or_default();
        passes.pass_started = Some(std::time::Instant::now());
        passes.write_returned = None;
        passes.state.send_modify(|s| {
            s.started += 1;
            s.settled = false;
        });
        PassMark {
            writes: passes.writes,
            failures: passes.failures,
        }
    }

    /// Ends the pass started at `mark`; returns whether it wrote anything. It settled when
    /// `quiet` (the loop says it succeeded, no change is waiting, and the events of earlier
    /// writes have been seen) and nothing was written or failed since `mark`.
    /// `timed` says whether a pass is due on a timer.
    pub fn pass_ended(&self, controller: &str, mark: PassMark, quiet: bool, timed: bool) -> bool {
        let mut passes = self.passes();
        let passes = passes.entry(controller.to_owned()).or_default();
        let wrote = passes.writes != mark.writes;
        let settled = quiet && !wrote && passes.failures == mark.failures;
        passes.state.send_modify(|s| {
            s.ended += 1;
            s.settled = settled;
            s.timed = timed;
        });
        self.settled
            .get_or_create(&Self::labels(controller))
            .set(i64::from(settled));
        wrote
    }

    /// Counts a pass of `controller` that had nothing to reconcile (a per-object controller
    /// asked about an object that is gone, or about every object when there is none): it
    /// started and ended at once, settled when `quiet`. Not counted as a reconcile.
    pub fn idle_pass(&self, controller: &str, quiet: bool) {
        let mut passes = self.passes();
        let passes = passes.entry(controller.to_owned()).or_default();
        passes.state.send_modify(|s| {
            s.started += 1;
            s.ended += 1;
            s.settled = quiet;
            s.timed = false;
        });
        self.settled
            .get_or_create(&Self::labels(controller))
            .set(i64::from(quiet));
    }

    /// A time before which the latest write of `controller` was not sent, if it has written:
    /// a change that came later may be that write's (writes are counted when they return,
    /// and their watch events can come before that).
    pub fn last_write_sent_after(&self, controller: &str) -> Option<std::time::Instant> {
        self.passes()
            .get(controller)
            .and_then(|p| p.last_write_sent_after)
    }

    /// Where the passes of `controller` are now.
    pub fn pass_state(&self, controller: &str) -> PassState {
        *self
            .passes()
            .entry(controller.to_owned())
            .or_default()
            .state
            .borrow()
    }

    /// Completes when the latest pass of `controller` ended settled (at once if it has), or
    /// when the metrics are dropped.
    pub fn settled(
        &self,
        controller: &str,
    ) -> impl std::future::Future<Output = ()> + Send + use<> {
        self.settled_after(controller, 0)
    }

    /// Completes when a pass of `controller` that started after the first `started` passes
    /// ended settled and no pass has started since; `started` is a [`PassState::started`] read
    /// earlier. How a test waits for the controller to have seen a change it made after
    /// reading it (when the change triggers a pass).
    pub fn settled_after(
        &self,
        controller: &str,
        started: u64,
    ) -> impl std::future::Future<Output = ()> + Send + use<> {
        let mut state = self
            .passes()
            .entry(controller.to_owned())
            .or_default()
            .state
            .subscribe();
        async move {
            let _ = state.wait_for(|s| s.settled && s.ended > started).await;
        }
    }

    /// What a test harness needs to wait for `controller` to settle: a future per count of
    /// passes ([`Metrics::settled_after`]) and the passes started so far.
    pub fn settling(
        &self,
        controller: &str,
    ) -> (
        impl Fn(u64) -> SettledWait + Send + Sync + 'static,
        impl Fn() -> u64 + Send + Sync + 'static,
    ) {
        let (metrics, name) = (self.clone(), controller.to_owned());
        let (counted, counted_name) = (self.clone(), controller.to_owned());
        (
            move |n| Box::pin(metrics.settled_after(&name, n)) as _,
            move || counted.pass_state(&counted_name).started,
        )
    }

    fn count(&self, controller: &str, update: impl FnOnce(&mut Passes)) {
        update(self.passes().entry(controller.to_owned()).or_default());
    }

    /// Counts a reconcile of `controller`.
    pub fn reconciled(&self, controller: &str) {
        self.reconciles
            .get_or_create(&Self::labels(controller))
            .inc();
    }

    /// Counts a failed reconcile of `controller`.
    pub fn failed(&self, controller: &str, category: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller: controller.to_owned(),
                category: category.to_owned(),
            })
            .inc();
        self.count(controller, |p| p.failures += 1);
    }

    /// Counts a write of a `kind` object by `controller`.
    pub fn wrote(&self, controller: &str, kind: &str) {
        self.writes
            .get_or_create(&WriteLabels {
                controller: controller.to_owned(),
                kind: kind.to_owned(),
            })
            .inc();
        let now = std::time::Instant::now();
        // Inside a pass of a per-object controller, passes overlap: the bound comes from this
        // pass's own clock, not from whichever pass started last.
        let own = PASS_CLOCK
            .try_with(|clock| {
                let mut clock = clock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let sent_after = clock.write_returned.unwrap_or(clock.started);
                clock.write_returned = Some(now);
                sent_after
            })
            .ok();
        self.count(controller, |p| {
            p.writes += 1;
            p.last_write_sent_after =
                Some(own.or(p.write_returned).or(p.pass_started).unwrap_or(now));
            p.write_returned = Some(now);
        });
    }

    /// Runs `pass` with its own clock for [`Metrics::wrote`]: how passes that run at the same
    /// time (a per-object controller's) keep the bound of each write to their own start and
    /// writes.
    pub async fn within_pass<T>(pass: impl std::future::Future<Output = T>) -> T {
        let clock = Mutex::new(PassClock {
            started: std::time::Instant::now(),
            write_returned: None,
        });
        PASS_CLOCK.scope(clock, pass).await
    }

    /// Registers `metric` under `name` as it is, without this project's `storage_operator`
    /// prefix: for metrics OpenShift's alerts and dashboards know by their own names (e.g.
    /// `default_storage_class_count`).
    pub fn register_unprefixed(
        &self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) {
        self.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .register(name, help, metric);
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self
            .registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[test]
    fn counters_are_encoded_with_their_labels() {
        let metrics = Metrics::new();
        metrics.reconciled("A");
        metrics.reconciled("A");
        metrics.failed("A", "conflict");
        metrics.wrote("A", "Deployment");
        let text = metrics.encode();
        assert!(
            text.contains(r#"storage_operator_reconciles_total{controller="A"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"storage_operator_reconcile_errors_total{controller="A",category="conflict"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"storage_operator_api_writes_total{controller="A",kind="Deployment"} 1"#
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn a_pass_settles_only_when_it_wrote_and_failed_nothing() {
        let metrics = Metrics::new();
        let mark = metrics.pass_started("A");
        metrics.wrote("A", "Deployment");
        assert!(metrics.pass_ended("A", mark, true, false), "it wrote");
        assert!(!metrics.pass_state("A").settled);
        assert!(metrics.last_write_sent_after("A").is_some());

        let mark = metrics.pass_started("A");
        metrics.failed("A", "conflict");
        assert!(!metrics.pass_ended("A", mark, true, true));
        assert!(!metrics.pass_state("A").settled, "it failed");

        let mark = metrics.pass_started("A");
        assert!(!metrics.pass_ended("A", mark, false, false));
        assert!(!metrics.pass_state("A").settled, "the loop said not quiet");

        let mark = metrics.pass_started("A");
        assert!(!metrics.pass_ended("A", mark, true, false));
        assert_eq!(
            metrics.pass_state("A"),
            PassState {
                started: 4,
                ended: 4,
                settled: true,
                timed: false
            }
        );
        assert!(
            metrics
                .encode()
                .contains(r#"storage_operator_settled{controller="A"} 1"#)
        );
        // Settled now, and after the fourth pass; not yet after a fifth.
        assert!(metrics.settled("A").now_or_never().is_some());
        assert!(metrics.settled_after("A", 3).now_or_never().is_some());
        assert!(metrics.settled_after("A", 4).now_or_never().is_none());
    }
}
