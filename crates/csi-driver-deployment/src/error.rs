//! What a reconcile reports when it could not do everything: each failed step, its category
//! for metrics and its reason for the Warning Event.

use opkit::runtime::ReconcileError;

use crate::kinds::OwnedKind;

/// A step of a reconcile that failed. Each names the object; [`StepError::category`] is what
/// the server's answer was (for metrics), [`StepError::reason`] which step failed (for the
/// Warning Event on the CSIDriverDeployment).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// Adding or removing [`FINALIZER`](crate::FINALIZER).
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

    /// Whether the step was refused because the object is someone else's
    /// ([`opkit::ownership`]): asking again at once would not change it.
    pub fn not_ours(&self) -> bool {
        matches!(self, StepError::Apply(error) if error.not_ours().is_some())
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

/// The failed steps as one message.
pub(crate) fn join(errors: &[StepError], separator: &str) -> String {
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
