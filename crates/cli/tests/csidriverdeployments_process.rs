//! `storage-operator csidriverdeployments`: the CSIDriverDeployment controller alone, as a
//! leader-elected process against an in-process API server served on loopback.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::storage::v1::CSIDriver;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_installs_a_declared_driver() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client();
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "CSIDriverDeployment")
        .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "csi"}})).unwrap(),
        )
        .await
        .unwrap();
    let declared: api::csidriver_v1alpha1::CSIDriverDeployment = serde_json::from_value(json!({
        "apiVersion": "csidriver.storage.openshift.io/v1alpha1",
        "kind": "CSIDriverDeployment",
        "metadata": {"name": "mine", "namespace": "csi"},
        "spec": {
            "driverName": "mine.csi.example.com",
            "driverSocket": "/csi/csi.sock",
            "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver", "image": "example.com/d:1"}]}},
        }
    }))
    .unwrap();
    Api::namespaced(client.clone(), "csi")
        .create(&PostParams::default(), &declared)
        .await
        .unwrap();

    let kubeconfig = cluster.kubeconfig().await.unwrap();
    let mut process = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "csidriverdeployments",
            "--admin-address",
            "127.0.0.1:0",
            "--identity",
            "declared-a",
            "--namespace",
            "csi",
        ])
        .args(["--lease-duration", "6", "--lease-renew-after", "2"])
        .env("KUBECONFIG", kubeconfig.path())
        .env("LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    testkit::eventually(
        "the declared driver's CSIDriver",
        Duration::from_secs(60),
        async || {
            Api::<CSIDriver>::all(client.clone())
                .get_opt("mine.csi.example.com")
                .await
                .unwrap()
        },
    )
    .await;
    let lease = Api::<Lease>::namespaced(client.clone(), "csi")
        .get("csidriverdeployment-controller-lock")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("declared-a")
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
