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
