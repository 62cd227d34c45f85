//! Every rule of the build controller's decision ([`builds::plan::plan`]), one case each.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::build_v1::{Build, BuildPhase, BuildStatus};
use api::operator_v1::ConditionStatus;
use builds::plan::{PodAction, owns, plan, pod_name, status_patch};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

const IMAGE: &str = "example.com/builder:1";

fn now() -> Time {
    Time("2026-11-23T01:00:00Z".parse::<Timestamp>().unwrap())
}

fn build_with(volumes: Value, status: Value) -> Build {
    serde_json::from_value(json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": "app-1", "namespace": "team", "uid": "b-uid"},
        "spec": {"strategy": {"type": "Docker", "dockerStrategy": {"volumes": volumes}}},
        "status": status,
    }))
    .unwrap()
}

fn csi_build(status: Value) -> Build {
    build_with(
        json!([{"name": "entitlement",
                "source": {"type": "CSI", "csi": {"driver": "csi.sharedresource.openshift.io", "readOnly": true,
                           "volumeAttributes": {"sharedSecret": "my-share"}}},
                "mounts": [{"destinationPath": "/etc/pki/entitlement"}]}]),
        status,
    )
}

fn pod_of(build: &Build, phase: &str) -> Pod {
    let mut pod = builds::pod::build_pod(build, IMAGE).unwrap();
    pod.status = Some(
        serde_json::from_value(json!({"phase": phase, "startTime": "2026-11-23T00:59:00Z",
            "containerStatuses": if phase == "Succeeded" || phase == "Failed" {
                json!([{"name": "docker-build", "image": IMAGE, "imageID": "", "ready": false, "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-23T00:59:30Z"}}}])
            } else { json!([]) }}))
        .unwrap(),
    );
    pod
}

fn status(plan: &builds::plan::BuildPlan) -> &BuildStatus {
    plan.status.as_ref().expect("a status change")
}

#[test]
fn a_new_build_gets_its_pod_and_shows_new() {
    let build = csi_build(json!({}));
    let decided = plan(&build, None, &[], true, IMAGE, &now());
    let PodAction::Create(pod) = &decided.pod else {
        panic!("expected a pod, got {:?}", decided.pod);
    };
    assert_eq!(pod.metadata.name.as_deref(), Some("app-1-build"));
    assert!(owns(&build, pod));
    let volumes = pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    assert_eq!(volumes[0].name, "entitlement-user-build-volume");
    assert_eq!(status(&decided).phase, Some(BuildPhase::New));
    assert_eq!(status(&decided).conditions[0].type_, "New");

    // Once New, the same pass again changes nothing in status (the pod is simply created again,
    // which the controller treats as already done).
    let shown = csi_build(serde_json::to_value(status(&decided)).unwrap());
    let again = plan(&shown, None, &[], true, IMAGE, &now());
    assert!(matches!(again.pod, PodAction::Create(_)));
    assert_eq!(again.status, None);
}

#[test]
fn the_pod_drives_the_phase_with_timestamps_and_conditions() {
    let build = csi_build(json!({"phase": "New"}));
    let pending = plan(
        &build,
        Some(&pod_of(&build, "Pending")),
        &[],
        true,
        IMAGE,
        &now(),
    );
    assert_eq!(pending.pod, PodAction::Keep);
    assert_eq!(status(&pending).phase, Some(BuildPhase::Pending));
    assert_eq!(status(&pending).start_timestamp, None);

    let running = plan(
        &build,
        Some(&pod_of(&build, "Running")),
        &[],
        true,
        IMAGE,
        &now(),
    );
    let running = status(&running);
    assert_eq!(running.phase, Some(BuildPhase::Running));
    assert_eq!(
        running.start_timestamp.as_ref().unwrap().0.to_string(),
        "2026-11-23T00:59:00Z",
        "the pod's start time"
    );

    let build = csi_build(serde_json::to_value(running).unwrap());
    let complete = plan(
        &build,
        Some(&pod_of(&build, "Succeeded")),
        &[],
        true,
        IMAGE,
        &now(),
    );
    let complete = status(&complete);
    assert_eq!(complete.phase, Some(BuildPhase::Complete));
    assert_eq!(
        complete
            .completion_timestamp
            .as_ref()
            .unwrap()
            .0
            .to_string(),
        "2026-11-23T00:59:30Z",
        "when the build container ended"
    );
    let conditions: Vec<(&str, &ConditionStatus)> = complete
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), &c.status))
        .collect();
    assert_eq!(
        conditions,
        [
            ("Running", &ConditionStatus::False),
            ("Complete", &ConditionStatus::True)
        ]
    );

    // A finished build is left alone, whatever its pod does.
    let done = csi_build(serde_json::to_value(complete).unwrap());
    assert_eq!(
        plan(&done, None, &[], true, IMAGE, &now()),
        builds::plan::BuildPlan {
            pod: PodAction::Keep,
            status: None
        }
    );
}

#[test]
fn a_failed_pod_fails_the_build() {
    let build = csi_build(json!({"phase": "Running"}));
    let failed = plan(
        &build,
        Some(&pod_of(&build, "Failed")),
        &[],
        true,
        IMAGE,
        &now(),
    );
    assert_eq!(status(&failed).phase, Some(BuildPhase::Failed));
    assert_eq!(
        status(&failed).reason.as_deref(),
        Some("GenericBuildFailed")
    );
}

#[test]
fn a_stuck_csi_mount_is_explained_on_the_pending_build() {
    let build = csi_build(json!({"phase": "Pending"}));
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "e1", "namespace": "team"},
        "involvedObject": {"kind": "Pod", "name": "app-1-build", "namespace": "team"},
        "reason": "FailedMount",
        "message": "MountVolume.SetUp failed for volume \"entitlement-user-build-volume\" : rpc error: code = NotFound desc = shared secret my-share not found"
    }))
    .unwrap();
    let stuck = plan(
        &build,
        Some(&pod_of(&build, "Pending")),
        &[event],
        true,
        IMAGE,
        &now(),
    );
    let stuck = status(&stuck);
    assert_eq!(stuck.phase, Some(BuildPhase::Pending));
    assert_eq!(stuck.reason.as_deref(), Some("BuildVolumeMountFailed"));
    let message = stuck.message.as_deref().unwrap();
    assert!(
        message.contains("\"entitlement\"") && message.contains("csi.sharedresource.openshift.io"),
        "{message}"
    );
    // The Pending condition carries the reason too.
    let condition = stuck
        .conditions
        .iter()
        .find(|c| c.type_ == "Pending")
        .unwrap();
    assert_eq!(condition.status, ConditionStatus::True);
    assert_eq!(condition.reason.as_deref(), Some("BuildVolumeMountFailed"));
}

#[test]
fn the_gate_off_fails_csi_builds_without_a_pod() {
    let decided = plan(&csi_build(json!({})), None, &[], false, IMAGE, &now());
    assert_eq!(decided.pod, PodAction::Keep);
    let failed = status(&decided);
    assert_eq!(failed.phase, Some(BuildPhase::Failed));
    assert_eq!(failed.reason.as_deref(), Some("CannotCreateBuildPodSpec"));
    assert!(
        failed
            .message
            .as_deref()
            .unwrap()
            .contains("BuildCSIVolumes")
    );
    assert!(failed.completion_timestamp.is_some());

    // Builds without CSI volumes do not need the gate.
    let plain = build_with(
        json!([{"name": "s", "source": {"type": "Secret", "secret": {"secretName": "s"}},
                "mounts": [{"destinationPath": "/opt/s"}]}]),
        json!({}),
    );
    assert!(matches!(
        plan(&plain, None, &[], false, IMAGE, &now()).pod,
        PodAction::Create(_)
    ));
}

#[test]
fn invalid_volumes_fail_the_build_naming_each_field() {
    let build = build_with(
        json!([{"name": "Bad_Name", "source": {"type": "CSI", "csi": {"driver": "d.example.com"}},
                "mounts": [{"destinationPath": "relative/path"}]}]),
        json!({}),
    );
    let decided = plan(&build, None, &[], true, IMAGE, &now());
    assert_eq!(decided.pod, PodAction::Keep);
    let failed = status(&decided);
    assert_eq!(failed.phase, Some(BuildPhase::Failed));
    assert_eq!(failed.reason.as_deref(), Some("CannotCreateBuildPodSpec"));
    let message = failed.message.as_deref().unwrap();
    assert!(
        message.contains("spec.strategy.dockerStrategy.volumes[0].name"),
        "{message}"
    );
    assert!(
        message.contains("spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath"),
        "{message}"
    );
}

#[test]
fn other_strategies_are_refused_with_a_reason() {
    let build: Build = serde_json::from_value(json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": "c", "namespace": "team"},
        "spec": {"strategy": {"type": "Custom", "customStrategy": {}}},
    }))
    .unwrap();
    let decided = plan(&build, None, &[], true, IMAGE, &now());
    assert_eq!(decided.pod, PodAction::Keep);
    let message = status(&decided).message.clone().unwrap();
    assert!(
        message.contains("\"Custom\"") && message.contains("only Docker and Source"),
        "{message}"
    );
}

#[test]
fn a_pod_deleted_mid_build_is_an_error() {
    for phase in ["Pending", "Running"] {
        let decided = plan(
            &csi_build(json!({ "phase": phase })),
            None,
            &[],
            true,
            IMAGE,
            &now(),
        );
        assert_eq!(decided.pod, PodAction::Keep, "{phase}: never re-created");
        assert_eq!(status(&decided).phase, Some(BuildPhase::Error));
        assert_eq!(status(&decided).reason.as_deref(), Some("BuildPodDeleted"));
    }
}

#[test]
fn a_foreign_pod_with_the_builds_pod_name_is_not_adopted() {
    let build = csi_build(json!({}));
    let foreign: Pod = serde_json::from_value(
        json!({"metadata": {"name": pod_name(&build), "namespace": "team"}, "status": {"phase": "Running"}}),
    )
    .unwrap();
    let decided = plan(&build, Some(&foreign), &[], true, IMAGE, &now());
    assert_eq!(decided.pod, PodAction::Keep);
    assert_eq!(status(&decided).phase, Some(BuildPhase::Error));
    assert_eq!(status(&decided).reason.as_deref(), Some("BuildPodExists"));

    // A pod of an earlier build of the same name (another UID) is not ours either.
    let mut older = pod_of(&build, "Running");
    older.metadata.owner_references.as_mut().unwrap()[0].uid = "old-uid".into();
    assert!(!owns(&build, &older));
}

#[test]
fn cancelling_deletes_the_pod_and_ends_the_build() {
    let build = csi_build(json!({"phase": "Running", "cancelled": true}));
    let decided = plan(
        &build,
        Some(&pod_of(&build, "Running")),
        &[],
        true,
        IMAGE,
        &now(),
    );
    let PodAction::Delete(pod) = &decided.pod else {
        panic!("expected the pod's deletion, got {:?}", decided.pod)
    };
    assert_eq!(pod.name.as_deref(), Some("app-1-build"));
    let cancelled = status(&decided);
    assert_eq!(cancelled.phase, Some(BuildPhase::Cancelled));
    assert_eq!(cancelled.reason.as_deref(), Some("CancelledBuild"));
    assert_eq!(cancelled.extra.get("cancelled"), Some(&json!(true)), "kept");
}

#[test]
fn the_status_patch_clears_what_is_no_longer_set() {
    let status: BuildStatus = serde_json::from_value(
        json!({"phase": "Running", "startTimestamp": "2026-11-23T00:59:00Z"}),
    )
    .unwrap();
    let patch = status_patch(&status);
    assert_eq!(patch["status"]["phase"], "Running");
    assert_eq!(
        patch["status"]["reason"],
        Value::Null,
        "a stale reason is removed"
    );
    assert_eq!(patch["status"]["message"], Value::Null);
    assert_eq!(patch["status"]["startTimestamp"], "2026-11-23T00:59:00Z");
    assert!(
        patch["status"].get("cancelled").is_none(),
        "fields we do not own are not touched"
    );
}
