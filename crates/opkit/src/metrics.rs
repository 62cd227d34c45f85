//! The operator's Prometheus metrics: reconciles, their errors by category, and API writes, per
//! controller. Served by the admin server at `/metrics`.

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

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
        let mut registry = Registry::with_prefix("storage_operator");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let writes = Family::<WriteLabels, Counter>::default();
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
        Self {
            registry: Arc::new(Mutex::new(registry)),
            reconciles,
            errors,
            writes,
        }
    }

    /// Counts a reconcile of `controller`.
    pub fn reconciled(&self, controller: &str) {
        self.reconciles
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
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
    }

    /// Counts a write of a `kind` object by `controller`.
    pub fn wrote(&self, controller: &str, kind: &str) {
        self.writes
            .get_or_create(&WriteLabels {
                controller: controller.to_owned(),
                kind: kind.to_owned(),
            })
            .inc();
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
}
