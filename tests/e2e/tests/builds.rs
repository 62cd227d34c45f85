//! The build controller on a real cluster (see the crate docs for how to run). It runs the
//! controller with a selector of its own, so on OpenShift it never touches builds that
//! openshift-controller-manager runs; on plain Kubernetes it installs the Build CRD first.
//! A Docker build with a CSI volume gets its pod, wired read only. Then either the cluster's
//! kubelet fails to mount the volume (its driver is not installed) and the build says so, or,
//! on a cluster where nothing schedules pods, the pod's status is simulated through to
//! Complete. It removes
//! what it created.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::time::Duration;

use api::build_v1::{Build, BuildPhase};
use builds::controller::{BUILD_CRD, Settings};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;

const NS: &str = "e2e-storage-operator-builds";
const LABEL: &str = "builds.storage.openshift.io/controller";
const VALUE: &str = "e2e";
/// A driver no cluster has, so a real kubelet reports FailedMount.
const DRIVER: &str = "absent.e2e.storage.openshift.io";

use e2e::wait_for;

/// Installs the Build CRD unless something already serves Builds. Returns whether it did.
async fn ensure_build_api(client: &Client) -> bool {
    let served = opkit::discovery::served_resources(client, "build.openshift.io/v1")
        .await
        .unwrap();
    if served.contains("builds") {
        return false;
    }
    let crd = <Build as kube::CustomResourceExt>::crd();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            BUILD_CRD,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    wait_for("the Build API served", async || {
        opkit::discovery::served_resources(client, "build.openshift.io/v1")
            .await
            .unwrap()
            .contains("builds")
            .then_some(())
    })
    .await;
    true
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn a_csi_build_gets_its_pod_and_reports_what_happens_to_it() {
    let client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    let installed = ensure_build_api(&client).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            NS,
            &PatchParams::apply("e2e"),
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
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(builds::controller::run(
        client.clone(),
        settings,
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = stopped.await;
        },
    ));

    let builds: Api<Build> = Api::namespaced(client.clone(), NS);
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
            &PatchParams::apply("e2e"),
            &Patch::Apply(&build),
        )
        .await
        .unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
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
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    // A scheduler marks the pod within seconds; without one (no nodes, or a fake API server)
    // nothing ever runs it.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let scheduled = pods
        .get("csi-build-build")
        .await
        .unwrap()
        .status
        .is_some_and(|s| !s.conditions.unwrap_or_default().is_empty());
    if nodes.is_empty() || !scheduled {
        // Nothing runs pods: play the kubelet's part.
        pods.patch_status(
            "csi-build-build",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .unwrap();
        wait_for("Complete", async || phase(BuildPhase::Complete).await).await;
    } else {
        let status = wait_for("the mount failure on the build", async || {
            phase(BuildPhase::Pending)
                .await
                .filter(|s| s.reason.as_deref() == Some("BuildVolumeMountFailed"))
        })
        .await;
        let message = status.message.unwrap();
        assert!(message.contains(DRIVER), "{message}");
    }

    let _ = stop.send(());
    task.await.unwrap().unwrap();
    namespaces
        .delete(NS, &DeleteParams::default())
        .await
        .unwrap();
    if installed {
        Api::<CustomResourceDefinition>::all(client.clone())
            .delete(BUILD_CRD, &DeleteParams::default())
            .await
            .unwrap();
    }
}
