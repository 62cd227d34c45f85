//! Writes that failed: the reconcile's error ([`Failure`]), how status names a failed write
//! ([`WriteFailure`]), and the Degraded conditions a part reports from its own
//! ([`part_conditions`]). The controller makes them, the plan and the parts' conditions read
//! them, so they sit below all of these.

use api::operator_v1::{ConditionStatus, OperatorCondition};
use opkit::apply::ApplyError;
use opkit::conditions::condition;
use opkit::runtime::ReconcileError;

/// A reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Applying an object failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// Deleting an object failed.
    #[error("deleting {kind} {name}: {source}")]
    Delete {
        /// Its kind.
        kind: String,
        /// `namespace/name`.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// Creating an object failed.
    #[error("creating {kind} {name}: {source}")]
    Create {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

impl ReconcileError for Failure {
    fn category(&self) -> &'static str {
        match self {
            Self::Apply(error) => error.category(),
            Self::Create { .. } => "create",
            Self::Delete { source, .. } => opkit::apply::category(source),
        }
    }
}

/// An object this controller could not write in this pass, and what the API server (or the
/// client) said: it shows in the status of the same pass (see [`crate::plan::plan_with_failures`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFailure {
    /// The object's kind.
    pub kind: String,
    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub object: String,
    /// The whole error: what was written, and the server's answer.
    pub message: String,
    /// Whether the object is someone else's, and so was not written ([`opkit::ownership`]).
    pub not_ours: bool,
}

impl From<&Failure> for WriteFailure {
    fn from(failure: &Failure) -> Self {
        match failure {
            Failure::Apply(error) => error.into(),
            Failure::Create { kind, name, .. } | Failure::Delete { kind, name, .. } => Self {
                kind: kind.clone(),
                object: name.clone(),
                message: failure.to_string(),
                not_ours: false,
            },
        }
    }
}

impl From<&ApplyError> for WriteFailure {
    fn from(error: &ApplyError) -> Self {
        Self {
            kind: error.kind.clone(),
            object: error.object.clone(),
            message: error.to_string(),
            not_ours: error.not_ours().is_some(),
        }
    }
}

/// The Degraded conditions of a part made of static objects and a Deployment, given the
/// part's own failed writes of this pass (`failures`): its static objects' Degraded
/// (`static_degraded`: False, or SyncError listing what failed), and the Deployment's
/// conditions as observed (`deployment_conditions`) with their `deployment_degraded` replaced
/// by SyncError when the Deployment itself could not be written.
pub(crate) fn part_conditions(
    static_degraded: &str,
    deployment_degraded: &str,
    mut deployment_conditions: Vec<OperatorCondition>,
    failures: &[&WriteFailure],
) -> (OperatorCondition, Vec<OperatorCondition>) {
    let (deployment_failures, static_failures): (Vec<&WriteFailure>, Vec<&WriteFailure>) =
        failures.iter().partition(|f| f.kind == "Deployment");
    if !deployment_failures.is_empty() {
        deployment_conditions.retain(|c| c.type_ != deployment_degraded);
        deployment_conditions.push(sync_error(deployment_degraded.into(), &deployment_failures));
    }
    let static_condition = if static_failures.is_empty() {
        condition(static_degraded, ConditionStatus::False, "AsExpected", "")
    } else {
        sync_error(static_degraded.into(), &static_failures)
    };
    (static_condition, deployment_conditions)
}

/// `<type_>=True` with reason `SyncError`, listing what failed (`ObjectNotOurs` when every
/// failure is an object someone else made, left as it is).
pub(crate) fn sync_error(type_: String, failures: &[&WriteFailure]) -> OperatorCondition {
    let message: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
    let reason = if failures.iter().all(|f| f.not_ours) {
        opkit::ownership::REASON_NOT_OURS
    } else {
        "SyncError"
    };
    condition(type_, ConditionStatus::True, reason, message.join("\n"))
}
