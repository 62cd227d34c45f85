//! The cluster storage operator on a real cluster (see the crate docs for how to run).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::time::Duration;

use api::operator_v1::Storage;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use storage_operator::plan::Settings;

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn reports_the_platform_and_starts_its_driver_operator() {
    let client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        api::crds::cluster_csi_driver(),
        <Storage as kube::CustomResourceExt>::crd(),
    ] {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(5)).await;

    let settings = Settings {
        operator_image: std::env::var("OPERATOR_IMAGE")
            .unwrap_or_else(|_| "localhost/storage-operator:latest".into()),
        env: std::env::vars().collect(),
        version: "e2e".into(),
        operator_log_level: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(storage_operator::operator::run(
        client.clone(),
        settings,
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = stopped.await;
        },
    ));

    let storages: Api<Storage> = Api::all(client.clone());
    let mut message = None;
    for _ in 0..120 {
        if let Some(storage) = storages.get_opt("cluster").await.unwrap()
            && let Some(condition) = storage
                .status
                .and_then(|s| s.condition("CSIDriverStarterAvailable").cloned())
        {
            message = condition.message;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    let message = message.expect("Storage/cluster never reported CSIDriverStarterAvailable");
    println!("{message}");
    assert!(message.starts_with("platform "), "{message}");
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn the_gcp_pd_driver_operator_reports_on_its_cluster_csi_driver() {
    use api::operator_v1::ClusterCSIDriver;

    let client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = api::crds::cluster_csi_driver();
    crds.patch(
        crd.metadata.name.as_deref().unwrap(),
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let declared = e2e::ensure_gcp(&client).await;
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    let driver = serde_json::json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": "pd.csi.storage.gke.io"}, "spec": {"managementState": "Managed"}
    });
    drivers
        .patch(
            "pd.csi.storage.gke.io",
            &PatchParams::apply("e2e"),
            &Patch::Apply(&driver),
        )
        .await
        .unwrap();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(csi::operator::run(
        client.clone(),
        drivers::by_name("gcp-pd").unwrap(),
        csi::operator::Settings {
            env: std::env::vars().collect(),
            ..Default::default()
        },
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = stopped.await;
        },
    ));
    let mut reported = None;
    for _ in 0..120 {
        let status = drivers.get("pd.csi.storage.gke.io").await.unwrap().status;
        if let Some(condition) = status.and_then(|s| {
            s.condition("GCPPDDriverControllerServiceControllerAvailable")
                .cloned()
        }) {
            reported = Some(condition);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    let _ = drivers
        .delete("pd.csi.storage.gke.io", &kube::api::DeleteParams::default())
        .await;
    if declared {
        let _ = Api::<api::config_v1::Infrastructure>::all(client.clone())
            .delete("cluster", &kube::api::DeleteParams::default())
            .await;
    }
    let condition = reported.expect("the driver operator never reported its controller service");
    println!("{condition:?}");
}
