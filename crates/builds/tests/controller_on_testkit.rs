//! `storage-operator builds` (`builds::controller::run`) against the in-process API server: a
//! build from New to Complete, FailedMount reflection, the gate, selectors, deleted pods,
//! cancellation, and refusing to start without a Build API.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::time::Duration;

use api::build_v1::{Build, BuildPhase};
use builds::controller::{Settings, StartError, run};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster};

const NS: &str = "team";
const AGENT: &str = "storage-operator-builds";
const IMAGE: &str = "example.com/builder:1";
const VERSION: &str = "4.20.0";

fn settings(selector: Option<&str>) -> Settings {
    Settings {
        builder_image: IMAGE.into(),
        selector: selector.map(str::to_owned),
        namespace: None,
        version: VERSION.into(),
    }
}

fn start(cluster: &Cluster, settings: Settings) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let settling = metrics.settling(builds::controller::CONTROLLER);
    Background::spawn(|shutdown| async move {
        run(client, settings, metrics, Readiness::default(), shutdown)
            .await
            .unwrap();
    })
    .settles_when(settling)
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

async fn install_crds(client: &Client, kinds: &[&str]) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds::all() {
        if kinds.contains(&crd.spec.names.kind.as_str()) {
            api.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
}

/// A plain Kubernetes cluster with the Build CRD and a namespace for builds.
async fn cluster() -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["Build"]).await;
    let namespace: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    (cluster, admin)
}

fn csi_volume() -> Value {
    json!([{"name": "entitlement",
            "source": {"type": "CSI", "csi": {"driver": "csi.sharedresource.openshift.io", "readOnly": true,
                       "volumeAttributes": {"sharedSecret": "my-share"}}},
            "mounts": [{"destinationPath": "/etc/pki/entitlement"}]}])
}

async fn create_build(client: &Client, name: &str, labels: Value, volumes: Value) {
    let build: Build = serde_json::from_value(json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"strategy": {"type": "Docker", "dockerStrategy": {"volumes": volumes}}},
    }))
    .unwrap();
    Api::<Build>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &build)
        .await
        .unwrap();
}

async fn build_status(client: &Client, name: &str) -> Option<(BuildPhase, String, String)> {
    let build = Api::<Build>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap();
    let status = build.status?;
    Some((
        status.phase?,
        status.reason.unwrap_or_default(),
        status.message.unwrap_or_default(),
    ))
}

async fn phase_is(client: &Client, name: &str, phase: BuildPhase) -> Option<(String, String)> {
    build_status(client, name)
        .await
        .filter(|(p, _, _)| *p == phase)
        .map(|(_, reason, message)| (reason, message))
}

async fn pod(client: &Client, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .get_opt(&format!("{name}-build"))
        .await
        .unwrap()
}

async fn set_pod_phase(client: &Client, name: &str, phase: &str) {
    let terminated = json!([{"name": "docker-build", "image": IMAGE, "imageID": "", "ready": false,
        "restartCount": 0, "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-23T01:30:00Z"}}}]);
    Api::<Pod>::namespaced(client.clone(), NS)
        .patch_status(
            &format!("{name}-build"),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "phase": phase, "startTime": "2026-11-23T01:29:00Z",
                "containerStatuses": if phase == "Succeeded" { terminated } else { json!([]) }}})),
        )
        .await
        .unwrap();
}

/// Waits until the controller has converged: its latest pass wrote nothing, failed nothing and
/// had no change waiting.
async fn quiet(cluster: &Cluster, running: &Background) {
    running.converged(cluster, AGENT).await;
}

#[tokio::test]
async fn a_build_runs_from_new_to_complete_and_then_nothing_is_written() {
    let (cluster, admin) = cluster().await;
    let controller = start(&cluster, settings(None));
    create_build(&admin, "app-1", json!({}), csi_volume()).await;

    let pod = eventually("the build pod", async || pod(&admin, "app-1").await).await;
    let spec = pod.spec.unwrap();
    let volume = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(volume.name, "entitlement-user-build-volume");
    assert_eq!(
        volume.csi.as_ref().unwrap().driver,
        "csi.sharedresource.openshift.io"
    );
    let mount = &spec.containers[0].volume_mounts.as_ref().unwrap()[0];
    assert_eq!(mount.read_only, Some(true));
    assert_eq!(spec.containers[0].image.as_deref(), Some(IMAGE));
    let accounts = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), NS);
    assert!(
        accounts.get_opt("builder").await.unwrap().is_some(),
        "the builder ServiceAccount the pod runs as was created first"
    );
    eventually("Pending once the pod exists", async || {
        phase_is(&admin, "app-1", BuildPhase::Pending).await
    })
    .await;

    set_pod_phase(&admin, "app-1", "Running").await;
    eventually("Running", async || {
        phase_is(&admin, "app-1", BuildPhase::Running).await
    })
    .await;
    set_pod_phase(&admin, "app-1", "Succeeded").await;
    eventually("Complete", async || {
        phase_is(&admin, "app-1", BuildPhase::Complete).await
    })
    .await;
    let build = Api::<Build>::namespaced(admin.clone(), NS)
        .get("app-1")
        .await
        .unwrap();
    let status = build.status.unwrap();
    assert_eq!(
        status.start_timestamp.unwrap().0.to_string(),
        "2026-11-23T01:29:00Z"
    );
    assert_eq!(
        status.completion_timestamp.unwrap().0.to_string(),
        "2026-11-23T01:30:00Z"
    );
    let complete = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Complete")
        .unwrap();
    assert_eq!(complete.status, api::operator_v1::ConditionStatus::True);

    quiet(&cluster, &controller).await;
    controller.stop().await;
}

#[tokio::test]
async fn a_failed_mount_is_named_on_the_pending_build() {
    let (cluster, admin) = cluster().await;
    let controller = start(&cluster, settings(None));
    create_build(&admin, "app-2", json!({}), csi_volume()).await;
    let pod = eventually("the build pod", async || pod(&admin, "app-2").await).await;
    let event: Event = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "app-2-build.1", "namespace": NS},
        "involvedObject": {"kind": "Pod", "name": "app-2-build", "namespace": NS, "uid": pod.metadata.uid},
        "reason": "FailedMount", "type": "Warning",
        "message": "MountVolume.SetUp failed for volume \"entitlement-user-build-volume\" : rpc error: code = PermissionDenied desc = subjectaccessreviews share my-share returned forbidden"
    }))
    .unwrap();
    Api::<Event>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &event)
        .await
        .unwrap();
    let (reason, message) = eventually("the mount failure on the build", async || {
        phase_is(&admin, "app-2", BuildPhase::Pending)
            .await
            .filter(|(reason, _)| reason == "BuildVolumeMountFailed")
    })
    .await;
    assert!(
        message.contains("\"entitlement\"")
            && message.contains("csi.sharedresource.openshift.io")
            && message.contains("PermissionDenied"),
        "{reason}: {message}"
    );
    // Once the volume mounts and the pod runs, the reason goes.
    set_pod_phase(&admin, "app-2", "Running").await;
    let (reason, _) = eventually("Running", async || {
        phase_is(&admin, "app-2", BuildPhase::Running).await
    })
    .await;
    assert_eq!(reason, "");
    controller.stop().await;
}

#[tokio::test]
async fn with_the_gate_off_csi_builds_fail_without_a_pod() {
    let (cluster, admin) = cluster().await;
    install_crds(&admin, &["FeatureGate"]).await;
    let gates = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "FeatureGate", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"featureGates": [{"version": VERSION, "enabled": [],
                                                 "disabled": [{"name": "BuildCSIVolumes"}]}]}
    });
    let api = Api::<api::config_v1::FeatureGate>::all(admin.clone());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(gates.clone()).unwrap(),
    )
    .await
    .unwrap();
    api.patch_status("cluster", &PatchParams::default(), &Patch::Merge(gates))
        .await
        .unwrap();
    let controller = start(&cluster, settings(None));
    create_build(&admin, "app-3", json!({}), csi_volume()).await;
    let (reason, message) = eventually("Failed", async || {
        phase_is(&admin, "app-3", BuildPhase::Failed).await
    })
    .await;
    assert_eq!(reason, "CannotCreateBuildPodSpec");
    assert!(message.contains("BuildCSIVolumes"), "{message}");
    assert!(pod(&admin, "app-3").await.is_none(), "no pod was created");

    // A build without CSI volumes still runs.
    create_build(
        &admin,
        "app-4",
        json!({}),
        json!([{"name": "s", "source": {"type": "Secret", "secret": {"secretName": "s"}},
                "mounts": [{"destinationPath": "/opt/s"}]}]),
    )
    .await;
    eventually("the pod of the build without CSI volumes", async || {
        pod(&admin, "app-4").await
    })
    .await;
    controller.stop().await;
}

#[tokio::test]
async fn a_selector_limits_the_builds_handled() {
    let (cluster, admin) = cluster().await;
    let controller = start(&cluster, settings(Some("team=storage")));
    create_build(&admin, "theirs", json!({}), csi_volume()).await;
    create_build(&admin, "ours", json!({"team": "storage"}), csi_volume()).await;
    eventually("the selected build's pod", async || {
        pod(&admin, "ours").await
    })
    .await;
    quiet(&cluster, &controller).await;
    assert!(pod(&admin, "theirs").await.is_none());
    assert_eq!(build_status(&admin, "theirs").await, None, "untouched");
    controller.stop().await;
}

#[tokio::test]
async fn a_deleted_pod_errors_the_build_and_a_cancel_deletes_the_pod() {
    let (cluster, admin) = cluster().await;
    let controller = start(&cluster, settings(None));
    create_build(&admin, "lost", json!({}), csi_volume()).await;
    create_build(&admin, "stopped", json!({}), csi_volume()).await;
    for name in ["lost", "stopped"] {
        eventually("the build pod", async || pod(&admin, name).await).await;
        set_pod_phase(&admin, name, "Running").await;
        eventually("Running", async || {
            phase_is(&admin, name, BuildPhase::Running).await
        })
        .await;
    }

    Api::<Pod>::namespaced(admin.clone(), NS)
        .delete("lost-build", &DeleteParams::default())
        .await
        .unwrap();
    let (reason, _) = eventually("Error", async || {
        phase_is(&admin, "lost", BuildPhase::Error).await
    })
    .await;
    assert_eq!(reason, "BuildPodDeleted");
    assert!(pod(&admin, "lost").await.is_none(), "not re-created");

    Api::<Build>::namespaced(admin.clone(), NS)
        .patch_status(
            "stopped",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"cancelled": true}})),
        )
        .await
        .unwrap();
    let (reason, _) = eventually("Cancelled", async || {
        phase_is(&admin, "stopped", BuildPhase::Cancelled).await
    })
    .await;
    assert_eq!(reason, "CancelledBuild");
    eventually("the pod deleted", async || {
        pod(&admin, "stopped").await.is_none().then_some(())
    })
    .await;
    quiet(&cluster, &controller).await;
    controller.stop().await;
}

#[tokio::test]
async fn without_a_build_api_it_refuses_to_start_and_says_what_to_install() {
    let cluster = Cluster::start().await;
    let error = run(
        cluster.client(),
        settings(None),
        Metrics::new(),
        Readiness::default(),
        std::future::pending::<()>(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, StartError::NotServed), "{error}");
    assert!(
        error
            .to_string()
            .contains("deploy/crds/build.openshift.io_builds.yaml")
    );
}

/// OpenShift serves Builds from its own API server (no CRD), and its controller manager runs
/// them: simulated here by the Build CRD's lookup answering 404.
#[tokio::test]
async fn on_openshift_it_starts_only_with_a_selector() {
    let (cluster, admin) = cluster().await;
    cluster.inject(testkit::FaultRule::status(
        Some("get"),
        Some("customresourcedefinitions"),
        404,
    ));
    let error = run(
        cluster.client(),
        settings(None),
        Metrics::new(),
        Readiness::default(),
        std::future::pending::<()>(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, StartError::OpenShiftNeedsSelector),
        "{error}"
    );
    assert!(error.to_string().contains("--selector"), "{error}");

    let controller = start(&cluster, settings(Some("team=storage")));
    create_build(&admin, "ours", json!({"team": "storage"}), csi_volume()).await;
    eventually("the selected build's pod", async || {
        pod(&admin, "ours").await
    })
    .await;
    let accounts = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), NS);
    assert!(
        accounts.get_opt("builder").await.unwrap().is_none(),
        "OpenShift makes the builder ServiceAccount itself"
    );
    controller.stop().await;
}

#[tokio::test]
async fn a_build_whose_pod_create_hangs_holds_up_no_other_build() {
    let (cluster, admin) = cluster().await;
    // The first pod create hangs far longer than this test waits for anything.
    cluster.inject(
        testkit::FaultRule::hang(Some("create"), Some("pods"), Duration::from_secs(600))
            .with_max_hits(1),
    );
    let _controller = start(&cluster, settings(None));
    create_build(&admin, "stuck", json!({}), csi_volume()).await;
    eventually("the first build's pod create hanging", async || {
        (cluster.fault_hits() == 1).then_some(())
    })
    .await;
    create_build(&admin, "next", json!({}), csi_volume()).await;
    eventually("the next build's pod", async || pod(&admin, "next").await).await;
    assert!(pod(&admin, "stuck").await.is_none(), "still hanging");
    // Not stopped: a graceful stop would wait for the hanging create.
}

#[tokio::test]
async fn a_refused_pod_is_said_on_the_build_and_as_a_warning_event() {
    let (cluster, admin) = cluster().await;
    cluster.inject(testkit::FaultRule::status(
        Some("create"),
        Some("pods"),
        403,
    ));
    let controller = start(&cluster, settings(None));
    create_build(&admin, "refused", json!({}), csi_volume()).await;
    let event = eventually("a Warning Event on the build", async || {
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(admin.clone(), NS)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Build")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("refused")
            })
    })
    .await;
    assert_eq!(event.reason.as_deref(), Some("CreatePodFailed"));
    assert!(
        event
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("creating the pod of build team/refused: ")),
        "{:?}",
        event.note
    );
    let status = eventually("the reason on the build", async || {
        Api::<Build>::namespaced(admin.clone(), NS)
            .get("refused")
            .await
            .unwrap()
            .status
            .filter(|s| s.reason.as_deref() == Some("CannotCreateBuildPod"))
    })
    .await;
    assert_eq!(status.phase, Some(BuildPhase::New), "still New");
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with("Failed creating build pod"),
        "{message}"
    );
    cluster.clear_faults();
    eventually("the pod once it is allowed", async || {
        pod(&admin, "refused").await
    })
    .await;
    controller.stop().await;
}
