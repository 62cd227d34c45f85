//! Events on the objects the operators act for. An Event is a report, not a step: a failure to
//! record one is logged and the reconcile goes on.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// Records an Event of `type_` with `reason` and `note` about `regarding`, for `action`
/// (e.g. `Apply`, `Reconcile`); a failure to record it is logged, naming the object.
pub async fn record(
    recorder: &Recorder,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, regarding).await {
        tracing::warn!(
            kind = regarding.kind.as_deref().unwrap_or_default(),
            namespace = regarding.namespace.as_deref().unwrap_or_default(),
            name = regarding.name.as_deref().unwrap_or_default(),
            reason,
            %error,
            "recording an Event failed"
        );
    }
}
