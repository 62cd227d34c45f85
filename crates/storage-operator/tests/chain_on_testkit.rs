//! The whole chain in one test: the cluster storage operator starts the GCP PD driver operator
//! (run here in-process, as its Deployment would), which installs the driver; the simulated
//! workloads become ready; the driver's status climbs to Storage and ClusterOperator/storage.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::time::Duration;

use api::config_v1::ClusterOperator;
use api::operator_v1::Storage;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;
use storage_operator::plan::Settings;
use tokio::sync::oneshot;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gcp_cluster_becomes_available_end_to_end() {
    let cluster = testkit::Cluster::start().await;
    cluster.simulate_workloads(testkit::SimConfig::default());
    for node in ["master-0", "master-1", "master-2", "worker-0"] {
        cluster.add_node(node, true);
    }
    let admin = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}
    });
    let infra_api: Api<api::config_v1::Infrastructure> = Api::all(admin.clone());
    infra_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(infrastructure.clone()).unwrap(),
        )
        .await
        .unwrap();
    infra_api
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();

    // The cluster storage operator.
    let (stop_cso, cso_stopped) = oneshot::channel::<()>();
    let settings = Settings {
        operator_image: "example.com/so:1".into(),
        env: Default::default(),
        version: "4.20.0".into(),
        operator_log_level: None,
        metrics_tls: None,
    };
    let cso = tokio::spawn(storage_operator::operator::run(
        cluster.client_with_agent("storage-operator"),
        settings,
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = cso_stopped.await;
        },
    ));
    // The driver operator, as the Deployment the cluster storage operator creates would run it.
    let (stop_driver, driver_stopped) = oneshot::channel::<()>();
    let driver = tokio::spawn(driver_operator::run(
        cluster.client_with_agent("gcp-pd-operator"),
        drivers::by_name("gcp-pd").unwrap(),
        driver_operator::Settings {
            env: Default::default(),
            instance: Some("gcp-pd-operator-0".into()),
            ..Default::default()
        },
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = driver_stopped.await;
        },
    ));

    let operators: Api<ClusterOperator> = Api::all(admin.clone());
    let mut available = None;
    for _ in 0..1200 {
        let co = operators.get_opt("storage").await.unwrap();
        let condition = co
            .and_then(|c| c.status)
            .and_then(|s| s.condition("Available").cloned());
        if let Some(condition) = condition.filter(|c| c.status.to_string() == "True") {
            available = Some(condition);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let available = available.expect("ClusterOperator/storage never became Available");
    assert_eq!(available.reason.as_deref(), Some("AsExpected"));

    let storage = Api::<Storage>::all(admin.clone())
        .get("cluster")
        .await
        .unwrap()
        .status
        .unwrap();
    let cr = storage
        .condition("GCPPDCSIDriverOperatorCRAvailable")
        .unwrap();
    assert_eq!(cr.status.to_string(), "True", "{cr:?}");
    let co = operators.get("storage").await.unwrap().status.unwrap();
    assert_eq!(co.versions[0].version, "4.20.0");

    stop_cso.send(()).unwrap();
    stop_driver.send(()).unwrap();
    cso.await.unwrap().unwrap();
    driver.await.unwrap().unwrap();
}
