//! The status of a CSIDriverDeployment: Available, Progressing and Degraded from the
//! workloads and the pass, the informational StuckClaims (the claims Pending on the driver for
//! more than 5 minutes, see [`csi_kit::claims`]), the children applied, written only when it
//! changed.

use std::time::Duration;

use api::csidriver_v1alpha1::{CSIDriverDeployment, CSIDriverDeploymentStatus, GenerationHistory};
use api::operator_v1::{ConditionStatus, ManagementState, OperatorCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use opkit::conditions::{AVAILABLE, DEGRADED, PROGRESSING, condition, set_condition};
use serde_json::json;

use crate::CONTROLLER_NAME;
use crate::context::{Context, key};
use crate::error::{StepError, join};
use crate::observe::Existing;
use crate::plan::Pass;
use crate::reasons::{
    REASON_AS_EXPECTED, REASON_PROGRESSING_TOO_LONG, REASON_REMOVED, REASON_SYNC_FAILED,
    REASON_VOLUMES_IN_USE,
};
use csi_kit::status::{
    PROGRESSING_TIMEOUT, daemon_set_conditions, deployment_conditions, progressing_too_long,
};

/// The status entry of an applied operand: its group, resource, namespace, name and the
/// generation observed before the write.
pub(crate) fn history(
    (kind, namespace, name): &Existing,
    generation: Option<i64>,
) -> GenerationHistory {
    let (group, resource) = kind.group_resource();
    GenerationHistory {
        group: group.to_owned(),
        resource: resource.to_owned(),
        namespace: namespace.clone().unwrap_or_default(),
        name: name.clone(),
        last_generation: generation.unwrap_or_default(),
    }
}

/// Available, Progressing and Degraded from the observed workloads and the pass.
/// Also returns when to look again: when a rolling Deployment would reach the progressing
/// deadline.
fn conditions(
    context: &Context,
    cd: &CSIDriverDeployment,
    pass: &Pass,
    now: &Time,
) -> (Vec<OperatorCondition>, Option<Duration>) {
    let mut out = Vec::new();
    let mut requeue = None;
    let mut too_long = false;
    let ns = cd.namespace().unwrap_or_default();
    let name = cd.name_any();
    let deployment = context
        .caches
        .deployments
        .get(&ObjectRef::new(&format!("{name}-controller")).within(&ns));
    let daemon_set = context
        .caches
        .daemon_sets
        .get(&ObjectRef::new(&format!("{name}-node")).within(&ns));
    if pass.removed {
        out.push(condition(
            AVAILABLE,
            ConditionStatus::False,
            REASON_REMOVED,
            "the driver is removed",
        ));
        out.push(condition(
            PROGRESSING,
            ConditionStatus::False,
            REASON_REMOVED,
            "",
        ));
    } else {
        let mut workloads = Vec::new();
        if cd.spec.driver_controller_template.is_some() {
            let controller = deployment.map(|d| deployment_conditions("", &d));
            if let Some(controller) = &controller {
                // As the built-in drivers: a rollout longer than the deadline is Degraded.
                let previous = cd
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == PROGRESSING));
                too_long = progressing_too_long(now, controller, previous);
                if controller.is_progressing() && !too_long {
                    let since = previous
                        .filter(|p| p.status == ConditionStatus::True)
                        .and_then(|p| p.last_transition_time.as_ref())
                        .map_or(now.0, |t| t.0);
                    let left = PROGRESSING_TIMEOUT - now.0.duration_since(since);
                    requeue = Duration::try_from(left)
                        .ok()
                        .map(|d| d + Duration::from_secs(1));
                }
            }
            workloads.push(controller);
        }
        workloads.push(daemon_set.map(|d| daemon_set_conditions("", &d)));
        let available = workloads.iter().all(|w| {
            w.as_ref()
                .is_some_and(|w| w.available.status == ConditionStatus::True)
        });
        let waiting: Vec<String> = workloads
            .iter()
            .map(|w| match w {
                Some(w) if w.available.status != ConditionStatus::True => {
                    w.available.message.clone().unwrap_or_default()
                }
                None => "Waiting for the workloads to be created".to_owned(),
                _ => String::new(),
            })
            .filter(|m| !m.is_empty())
            .collect();
        out.push(if available {
            condition(AVAILABLE, ConditionStatus::True, REASON_AS_EXPECTED, "")
        } else {
            condition(
                AVAILABLE,
                ConditionStatus::False,
                "Deploying",
                waiting.join("\n"),
            )
        });
        let progress: Vec<String> = workloads
            .iter()
            .flatten()
            .filter(|w| w.is_progressing())
            .map(|w| w.progressing.message.clone().unwrap_or_default())
            .collect();
        out.push(if progress.is_empty() {
            condition(PROGRESSING, ConditionStatus::False, REASON_AS_EXPECTED, "")
        } else {
            condition(
                PROGRESSING,
                ConditionStatus::True,
                "Deploying",
                progress.join("\n"),
            )
        });
    }
    let reported = if pass.problems.is_empty() {
        &pass.kept
    } else {
        &pass.problems
    };
    let degraded = if let Some(first) = reported.first() {
        let lines: Vec<String> = reported.iter().map(ToString::to_string).collect();
        condition(
            DEGRADED,
            ConditionStatus::True,
            first.reason,
            lines.join("\n"),
        )
    } else if !pass.failures.is_empty() {
        // Objects someone else made, left as they are (`opkit::ownership`), say so.
        let reason = if pass.failures.iter().all(StepError::not_ours) {
            opkit::ownership::REASON_NOT_OURS
        } else {
            REASON_SYNC_FAILED
        };
        condition(
            DEGRADED,
            ConditionStatus::True,
            reason,
            join(&pass.failures, "\n"),
        )
    } else if too_long {
        condition(
            DEGRADED,
            ConditionStatus::True,
            REASON_PROGRESSING_TOO_LONG,
            "Deployment was progressing too long",
        )
    } else if pass.volumes_in_use > 0 {
        condition(
            DEGRADED,
            ConditionStatus::True,
            REASON_VOLUMES_IN_USE,
            if pass.uninstall_held {
                format!(
                    "{} PersistentVolumes of driver {} exist: the driver stays installed until they are deleted (delete their claims; volumes whose reclaim policy is Retain are deleted by hand)",
                    pass.volumes_in_use, cd.spec.driver_name
                )
            } else {
                format!(
                    "{} PersistentVolumes of driver {} exist: the CSIDriver and StorageClasses stay until they are deleted",
                    pass.volumes_in_use, cd.spec.driver_name
                )
            },
        )
    } else {
        condition(DEGRADED, ConditionStatus::False, REASON_AS_EXPECTED, "")
    };
    out.push(degraded);
    let (stuck, again) = stuck_claims(context, cd, now);
    out.push(stuck);
    let requeue = match (requeue, again) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    (out, requeue)
}

/// `StuckClaims`: the claims Pending on the driver for longer than the controller's threshold
/// (see [`csi_kit::claims`]; informational, never Degraded), and when the next one would be.
fn stuck_claims(
    context: &Context,
    cd: &CSIDriverDeployment,
    now: &Time,
) -> (OperatorCondition, Option<Duration>) {
    use csi_kit::claims;
    let driver = cd.spec.driver_name.as_str();
    let pending = context.caches.pending_claims.entries();
    let classes = context.caches.storage_classes.state();
    let stuck = claims::stuck_claims(
        driver,
        pending.iter().map(|(key, claim)| (key.as_str(), claim)),
        |name| {
            classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
                .map(AsRef::as_ref)
        },
        now.0,
        context.stuck_claims_after,
    );
    let condition = claims::stuck_claims_condition(
        claims::STUCK_CLAIMS.to_owned(),
        driver,
        &stuck,
        context.stuck_claims_after,
    );
    (condition, stuck.next)
}

/// The status this pass should leave: `Unmanaged` keeps conditions and children as they were.
fn desired_status(
    context: &Context,
    cd: &CSIDriverDeployment,
    pass: &Pass,
    now: &Time,
) -> (CSIDriverDeploymentStatus, Option<Duration>) {
    let mut status = cd.status.clone().unwrap_or_default();
    status.observed_generation = cd.metadata.generation;
    status.state = Some(cd.spec.management_state.clone());
    if cd.spec.management_state == ManagementState::Unmanaged
        && cd.metadata.deletion_timestamp.is_none()
    {
        return (status, None);
    }
    if pass.problems.is_empty() {
        status.children = pass.children.clone();
    }
    let (conditions, requeue) = conditions(context, cd, pass, now);
    for new in conditions {
        set_condition(&mut status.conditions, new, now);
    }
    (status, requeue)
}

/// Writes the status this pass should leave, only when it changed; returns when to look again.
pub(crate) async fn write_status(
    context: &Context,
    cd: &CSIDriverDeployment,
    pass: &Pass,
    now: &Time,
) -> Result<Option<Duration>, StepError> {
    let (status, requeue) = desired_status(context, cd, pass, now);
    if cd.status.as_ref() == Some(&status) {
        return Ok(requeue);
    }
    let api: Api<CSIDriverDeployment> =
        Api::namespaced(context.client.clone(), &cd.namespace().unwrap_or_default());
    // A merge patch leaves out what is unset; name every field so emptied lists are cleared.
    let mut body = serde_json::to_value(&status).unwrap_or_default();
    for field in ["observedGeneration", "children", "state", "conditions"] {
        if body.get(field).is_none() {
            body[field] = serde_json::Value::Null;
        }
    }
    let patch = json!({ "status": body });
    // A failed write fails the pass: the object's backoff retries it, status included.
    api.patch_status(
        &cd.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| StepError::Status {
        owner: key(cd),
        source,
    })?;
    context
        .metrics
        .wrote(CONTROLLER_NAME, "CSIDriverDeployment/status");
    Ok(requeue)
}
