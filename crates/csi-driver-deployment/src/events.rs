//! The Events on a CSIDriverDeployment: restored drift, a recreated operand, the steps that
//! failed.

use api::csidriver_v1alpha1::CSIDriverDeployment;
use csi_kit::render::Operand;
use kube::Resource;
use kube::runtime::events::EventType;

use crate::context::Context;
use crate::error::StepError;

/// Records restored drift: a changed operand (`OperandDriftRestored`), or one that was
/// created before and deleted by someone (`OperandRecreated`).
pub(crate) async fn record_drift(
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

/// Records a StorageClass deleted and created again because its immutable fields changed.
pub(crate) async fn record_class_recreated(
    context: &Context,
    cd: &CSIDriverDeployment,
    name: &str,
) {
    opkit::events::record(
        &context.recorder,
        &cd.object_ref(&()),
        EventType::Normal,
        "OperandRecreated",
        "Apply",
        format!("StorageClass/{name} was recreated: its immutable fields changed"),
    )
    .await;
}

/// Records each failed step as a Warning Event, its reason naming the step.
pub(crate) async fn record_failures(
    context: &Context,
    cd: &CSIDriverDeployment,
    failures: &[StepError],
) {
    for failure in failures {
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
}
