//! The build controller on a real cluster (see the crate docs for how to run), as the
//! ServiceAccount of `deploy/kubernetes/builds.yaml`. It runs with a selector of its own, so on
//! OpenShift it never touches builds that openshift-controller-manager runs; on plain
//! Kubernetes the manifest installs the Build CRD. A Docker build with a CSI volume gets its
//! pod, wired read only, and the build reports what happens to the pod: on a cluster with a
//! node, the kubelet fails to mount the volume (its driver is not installed) and the build
//! says so; without one the pod is never scheduled and the build stays Pending. Then the build
//! is cancelled, which deletes its pod. It removes what it created (the CRD stays).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::build_v1::{Build, BuildPhase};
use builds::controller::Settings;
use e2e::{Background, cleanup, has_nodes, wait_for};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;

const NS: &str = "e2e-storage-operator-builds";
const LABEL: &str = "builds.storage.openshift.io/controller";
const VALUE: &str = "e2e";
/// A driver no cluster has, so a real kubelet reports FailedMount.
const DRIVER: &str = "absent.e2e.storage.openshift.io";

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn a_csi_build_gets_its_pod_and_reports_what_happens_to_it() {
    let admin = e2e::admin().await;
    let identity = e2e::install::build_controller(&admin).await;
    e2e::install::wait_not_terminating(&admin, NS).await;
    Api::<Namespace>::all(admin.clone())
        .patch(
            NS,
            &PatchParams::apply(e2e::MANAGER),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS,
                "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}),
            ),
        )
        .await
        .unwrap();

    let settings = Settings {
        builder_image: builds::controller::DEFAULT_BUILDER_IMAGE.into(),
        selector: Some(format!("{LABEL}={VALUE}")),
        namespace: Some(NS.into()),
        version: "e2e".into(),
    };
    let client = identity.client.clone();
    let running = Background::start(move |stop| {
        builds::controller::run(client, settings, Metrics::new(), Readiness::default(), stop)
    });

    let builds: Api<Build> = Api::namespaced(admin.clone(), NS);
    let build = json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": "csi-build", "namespace": NS, "labels": {LABEL: VALUE}},
        "spec": {"strategy": {"type": "Docker", "dockerStrategy": {"volumes": [
            {"name": "secrets", "source": {"type": "CSI", "csi": {"driver": DRIVER}},
             "mounts": [{"destinationPath": "/opt/secrets"}]}]}},
            "source": {"type": "Dockerfile", "dockerfile": "FROM scratch"}},
    });
    builds
        .patch(
            "csi-build",
            &PatchParams::apply(e2e::MANAGER),
            &Patch::Apply(&build),
        )
        .await
        .unwrap();

    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let pod = wait_for("the build pod", async || {
        pods.get_opt("csi-build-build").await.unwrap()
    })
    .await;
    let spec = pod.spec.unwrap();
    let volume = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(volume.csi.as_ref().unwrap().driver, DRIVER);
    assert_eq!(volume.csi.as_ref().unwrap().read_only, Some(true));

    let phase = async |wanted: BuildPhase| {
        builds
            .get("csi-build")
            .await
            .unwrap()
            .status
            .filter(|s| s.phase.as_ref() == Some(&wanted))
    };
    if has_nodes(&admin).await {
        let status = wait_for("the mount failure on the build", async || {
            phase(BuildPhase::Pending)
                .await
                .filter(|s| s.reason.as_deref() == Some("BuildVolumeMountFailed"))
        })
        .await;
        let message = status.message.unwrap();
        assert!(message.contains(DRIVER), "{message}");
    } else {
        // Nothing schedules the pod: the build waits for it.
        wait_for("the build Pending", async || {
            phase(BuildPhase::Pending).await
        })
        .await;
    }

    // Cancelled, as `oc cancel-build` does it: the pod goes, the build says why.
    builds
        .patch_status(
            "csi-build",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"cancelled": true}})),
        )
        .await
        .unwrap();
    let status = wait_for("the build Cancelled", async || {
        phase(BuildPhase::Cancelled).await
    })
    .await;
    assert_eq!(
        status.reason.as_deref(),
        Some(builds::plan::REASON_CANCELLED)
    );
    wait_for("the build pod deleted", async || {
        pods.get_opt("csi-build-build")
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;

    running.stop().await;
    cleanup::delete_namespace(&admin, NS).await;
    identity.assert_never_refused();
}
