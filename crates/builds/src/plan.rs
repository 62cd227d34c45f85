//! What the build controller does with one build, decided from cached state alone: create its
//! pod, delete it (cancellation), and the status the build should have. Pure, so every rule is
//! a table test; [`crate::controller`] carries the decision out.
//!
//! The phases follow openshift-controller-manager's build controller: New until the pod exists,
//! then Pending, Running and Complete or Failed from the pod; Error when the pod vanishes or a
//! foreign pod has its name; Cancelled when `status.cancelled` is set. Where OpenShift leaves a
//! build in New forever (gate off, a pod spec it cannot build), the build fails at once with
//! reason `CannotCreateBuildPodSpec` and a message saying what to fix.

use api::build_v1::{Build, BuildCondition, BuildPhase, BuildStatus};
use api::operator_v1::ConditionStatus;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::phase::{PhaseUpdate, from_pod, gate_check};
use crate::pod::build_pod;
use crate::validation::validate_volumes;

/// The reason of a build whose pod spec cannot be made (OpenShift's `CannotCreateBuildPodSpec`).
pub const REASON_CANNOT_CREATE_POD_SPEC: &str = "CannotCreateBuildPodSpec";
/// The reason of a build whose pod the API server refused (OpenShift's `CannotCreateBuildPod`).
pub const REASON_CANNOT_CREATE_POD: &str = "CannotCreateBuildPod";
/// The reason of a build whose pod was deleted while it ran (OpenShift's `BuildPodDeleted`).
pub const REASON_POD_DELETED: &str = "BuildPodDeleted";
/// The reason of a build whose pod name is taken by a pod of something else.
pub const REASON_POD_EXISTS: &str = "BuildPodExists";
/// The reason of a cancelled build (OpenShift's `CancelledBuild`).
pub const REASON_CANCELLED: &str = "CancelledBuild";

/// What to do about a build's pod.
#[derive(Clone, Debug, PartialEq)]
pub enum PodAction {
    /// Nothing.
    Keep,
    /// Create this pod.
    Create(Box<Pod>),
    /// Delete the build's pod (it was cancelled): the pod as observed, whose uid and
    /// resourceVersion the delete carries as preconditions.
    Delete(Box<ObjectMeta>),
}

/// The decision for one build.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildPlan {
    /// The pod action.
    pub pod: PodAction,
    /// The status the build should have, when it differs from the one it has.
    pub status: Option<BuildStatus>,
}

impl BuildPlan {
    fn nothing() -> Self {
        Self {
            pod: PodAction::Keep,
            status: None,
        }
    }
}

/// The name of a build's pod (OpenShift's `<build>-build`).
pub fn pod_name(build: &Build) -> String {
    format!("{}-build", build.name_any())
}

/// Whether `pod` was created for `build` (its controller reference names the build's UID).
pub fn owns(build: &Build, pod: &Pod) -> bool {
    let uid = build.uid();
    pod.owner_references().iter().any(|r| {
        r.kind == "Build"
            && r.controller == Some(true)
            && r.name == build.name_any()
            && (uid.is_none() || uid.as_deref() == Some(r.uid.as_str()))
    })
}

/// Whether the build's `status.cancelled` is set (`oc cancel-build`).
pub fn is_cancelled(build: &Build) -> bool {
    build
        .status
        .as_ref()
        .and_then(|s| s.extra.get("cancelled"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Decides what to do with `build`, given its pod (if any), the FailedMount events of that pod,
/// whether the `BuildCSIVolumes` gate is on, the builder image and the time now.
pub fn plan(
    build: &Build,
    pod: Option<&Pod>,
    events: &[Event],
    gate_enabled: bool,
    builder_image: &str,
    now: &Time,
) -> BuildPlan {
    let current = build.status.clone().unwrap_or_default();
    let phase = current.phase.clone().unwrap_or(BuildPhase::New);
    if phase.is_complete() {
        return BuildPlan::nothing();
    }
    let ours = pod.filter(|p| owns(build, p));
    if is_cancelled(build) {
        return BuildPlan {
            pod: ours.map_or(PodAction::Keep, |p| {
                PodAction::Delete(Box::new(p.metadata.clone()))
            }),
            status: next_status(
                &current,
                &update(
                    BuildPhase::Cancelled,
                    REASON_CANCELLED,
                    "The build was cancelled by the user.",
                ),
                None,
                now,
            ),
        };
    }
    match (pod, ours) {
        (Some(pod), None) => BuildPlan {
            pod: PodAction::Keep,
            status: next_status(
                &current,
                &update(
                    BuildPhase::Error,
                    REASON_POD_EXISTS,
                    &format!(
                        "pod {:?} already exists and was not created for this build; delete that pod or rebuild under another name",
                        pod.name_any()
                    ),
                ),
                None,
                now,
            ),
        },
        (_, Some(pod)) => BuildPlan {
            pod: PodAction::Keep,
            status: next_status(&current, &from_pod(build, pod, events), Some(pod), now),
        },
        (None, None) if matches!(phase, BuildPhase::Pending | BuildPhase::Running) => BuildPlan {
            pod: PodAction::Keep,
            status: next_status(
                &current,
                &update(
                    BuildPhase::Error,
                    REASON_POD_DELETED,
                    "The pod for this build was deleted before the build completed.",
                ),
                None,
                now,
            ),
        },
        (None, None) => new_build(build, &current, gate_enabled, builder_image, now),
    }
}

/// A build without a pod yet: it fails if its pod cannot be made, else its pod is created.
fn new_build(
    build: &Build,
    current: &BuildStatus,
    gate_enabled: bool,
    builder_image: &str,
    now: &Time,
) -> BuildPlan {
    let fail = |message: String| BuildPlan {
        pod: PodAction::Keep,
        status: next_status(
            current,
            &update(
                BuildPhase::Failed,
                REASON_CANNOT_CREATE_POD_SPEC,
                &format!("Failed to create pod spec: {message}"),
            ),
            None,
            now,
        ),
    };
    let errors = validate_volumes(build.volumes(), build.volumes_path());
    if !errors.is_empty() {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return fail(format!("invalid build volumes: {}", list.join("; ")));
    }
    if let Some(failed) = gate_check(build, gate_enabled) {
        return BuildPlan {
            pod: PodAction::Keep,
            status: next_status(current, &failed, None, now),
        };
    }
    match build_pod(build, builder_image) {
        Ok(pod) => BuildPlan {
            pod: PodAction::Create(Box::new(pod)),
            // A build created without a phase (a CRD has no defaulting) shows New.
            status: next_status(
                current,
                &PhaseUpdate {
                    phase: BuildPhase::New,
                    reason: current.reason.clone(),
                    message: current.message.clone(),
                },
                None,
                now,
            ),
        },
        Err(error) => fail(error.to_string()),
    }
}

fn update(phase: BuildPhase, reason: &str, message: &str) -> PhaseUpdate {
    PhaseUpdate {
        phase,
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    }
}

/// The status after `update`, or `None` when it is the status the build already has. The
/// phase's condition turns True and the previous phase's False; timestamps are set once.
fn next_status(
    current: &BuildStatus,
    update: &PhaseUpdate,
    pod: Option<&Pod>,
    now: &Time,
) -> Option<BuildStatus> {
    let mut next = current.clone();
    let previous = current.phase.clone();
    next.phase = Some(update.phase.clone());
    next.reason.clone_from(&update.reason);
    next.message.clone_from(&update.message);
    let started = matches!(
        update.phase,
        BuildPhase::Running | BuildPhase::Complete | BuildPhase::Failed
    ) && pod.is_some();
    if started && next.start_timestamp.is_none() {
        next.start_timestamp = Some(pod_start(pod).unwrap_or_else(|| now.clone()));
    }
    if update.phase.is_complete() && next.completion_timestamp.is_none() {
        next.completion_timestamp = Some(pod_finish(pod).unwrap_or_else(|| now.clone()));
    }
    let shown = next
        .conditions
        .iter_mut()
        .find(|c| c.type_ == update.phase.as_str());
    match shown {
        Some(condition) if previous.as_ref() == Some(&update.phase) => {
            if condition.reason != update.reason || condition.message != update.message {
                condition.reason.clone_from(&update.reason);
                condition.message.clone_from(&update.message);
                condition.last_update_time = Some(now.clone());
            }
        }
        _ => set_phase_condition(&mut next, previous.as_ref(), update, now),
    }
    (next != *current).then_some(next)
}

fn set_phase_condition(
    status: &mut BuildStatus,
    previous: Option<&BuildPhase>,
    update: &PhaseUpdate,
    now: &Time,
) {
    if let Some(previous) = previous.filter(|p| **p != update.phase)
        && let Some(old) = status
            .conditions
            .iter_mut()
            .find(|c| c.type_ == previous.as_str())
    {
        old.status = ConditionStatus::False;
        old.last_update_time = Some(now.clone());
        old.last_transition_time = Some(now.clone());
    }
    let condition = BuildCondition {
        type_: update.phase.as_str().to_owned(),
        status: ConditionStatus::True,
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
        reason: update.reason.clone(),
        message: update.message.clone(),
    };
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == condition.type_)
    {
        Some(existing) => *existing = condition,
        None => status.conditions.push(condition),
    }
}

fn pod_start(pod: Option<&Pod>) -> Option<Time> {
    pod?.status.as_ref()?.start_time.clone()
}

/// When the build container ended, from its terminated state.
fn pod_finish(pod: Option<&Pod>) -> Option<Time> {
    pod?.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.clone())
        .max_by_key(|t| t.0)
}

/// The merge patch that sets `status` (fields now unset are removed).
pub fn status_patch(status: &BuildStatus) -> Value {
    let or_null = |v: Option<Value>| v.unwrap_or(Value::Null);
    json!({"status": {
        "phase": or_null(status.phase.as_ref().map(|p| json!(p.as_str()))),
        "reason": or_null(status.reason.as_ref().map(|r| json!(r))),
        "message": or_null(status.message.as_ref().map(|m| json!(m))),
        "startTimestamp": or_null(status.start_timestamp.as_ref().and_then(|t| serde_json::to_value(t).ok())),
        "completionTimestamp": or_null(status.completion_timestamp.as_ref().and_then(|t| serde_json::to_value(t).ok())),
        "conditions": serde_json::to_value(&status.conditions).unwrap_or(Value::Null),
    }})
}
