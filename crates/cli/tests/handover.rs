//! Two `storage-operator run` processes against one in-process API server (served on
//! loopback): one leads and installs the driver, the other waits; when the leader is stopped
//! with SIGTERM it releases the lease and the other takes over.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use api::operator_v1::Storage;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

fn spawn(kubeconfig: &Path, identity: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "run",
            "--operator-image",
            "example.com/so:1",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .args([
            "--identity",
            identity,
            "--lease-duration",
            "6",
            "--lease-renew-after",
            "2",
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("LOG_LEVEL", "warn")
        .env_remove("POD_NAMESPACE")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

async fn holder(client: &Client) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), "openshift-cluster-storage-operator")
        .get_opt("cluster-storage-operator-lock")
        .await
        .unwrap()?;
    lease.spec?.holder_identity
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    testkit::eventually(what, Duration::from_secs(60), async || {
        check().await.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_when_the_leader_stops() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &api::crds::cluster_csi_driver())
        .await
        .unwrap();
    crds.create(
        &PostParams::default(),
        &<Storage as kube::CustomResourceExt>::crd(),
    )
    .await
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "openshift-cluster-storage-operator"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": "n"}, "spec": {"providerID": "gce://p/z/n"}}),
    )
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();

    let kubeconfig = cluster.kubeconfig().await.unwrap();

    let mut first = spawn(kubeconfig.path(), "replica-a");
    eventually("replica-a to lead", async || {
        holder(&client).await.as_deref() == Some("replica-a")
    })
    .await;
    let deployments: Api<Deployment> =
        Api::namespaced(client.clone(), "openshift-cluster-csi-drivers");
    eventually("the leader to start the driver operator", async || {
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
            .is_some()
    })
    .await;

    let mut second = spawn(kubeconfig.path(), "replica-b");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        holder(&client).await.as_deref(),
        Some("replica-a"),
        "the leader keeps its lease"
    );

    // SIGTERM, as the kubelet sends it.
    let status = Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || first.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "a SIGTERM is a clean stop: {exit:?}");
    eventually("replica-b to take over", async || {
        holder(&client).await.as_deref() == Some("replica-b")
    })
    .await;

    second.kill().unwrap();
    second.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_operator_process_installs_its_driver() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &api::crds::cluster_csi_driver())
        .await
        .unwrap();
    let driver: api::operator_v1::ClusterCSIDriver = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": "pd.csi.storage.gke.io"}, "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    Api::<api::operator_v1::ClusterCSIDriver>::all(client.clone())
        .create(&PostParams::default(), &driver)
        .await
        .unwrap();
    for name in ["openshift-cluster-csi-drivers"] {
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
    }
    let kubeconfig = cluster.kubeconfig().await.unwrap();
    let mut process = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "driver",
            "gcp-pd",
            "--admin-address",
            "127.0.0.1:0",
            "--identity",
            "driver-a",
        ])
        .args(["--lease-duration", "6", "--lease-renew-after", "2"])
        .env("KUBECONFIG", kubeconfig.path())
        .env("LOG_LEVEL", "warn")
        .env_remove("POD_NAMESPACE")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let deployments: Api<Deployment> =
        Api::namespaced(client.clone(), "openshift-cluster-csi-drivers");
    eventually("the driver's controller Deployment", async || {
        deployments
            .get_opt("gcp-pd-csi-driver-controller")
            .await
            .unwrap()
            .is_some()
    })
    .await;
    let lease = Api::<Lease>::namespaced(client.clone(), "openshift-cluster-csi-drivers")
        .get("gcp-pd-csi-driver-operator-lock")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("driver-a"),
        "OpenShift's lease name and namespace"
    );
    let status = Command::new("kill")
        .args(["-TERM", &process.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || process.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
