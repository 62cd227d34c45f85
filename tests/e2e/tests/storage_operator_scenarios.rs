//! The cluster storage operator's scenarios on a real cluster (see the crate docs for how to
//! run): converge, drift restored, a deleted ClusterCSIDriver recreated with an admin's edits
//! kept, Unmanaged pausing. On a cluster without OpenShift's Infrastructure it installs the CRD
//! and declares the platform GCP, so the scenarios run anywhere (the driver pods need not run:
//! the operator's behaviour is about its objects). It removes what it created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::time::Duration;

use api::config_v1::Infrastructure;
use api::operator_v1::{ClusterCSIDriver, Storage};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;
use storage_operator::plan::Settings;

const NS: &str = "openshift-cluster-csi-drivers";
const OPERATOR: &str = "gcp-pd-csi-driver-operator";
const DRIVER: &str = "pd.csi.storage.gke.io";

use e2e::{apply_crd, ensure_gcp, wait_for};

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn converge_drift_recreate_and_unmanaged() {
    let client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    apply_crd(&client, &api::crds::cluster_csi_driver()).await;
    apply_crd(&client, &<Storage as kube::CustomResourceExt>::crd()).await;
    let declared = ensure_gcp(&client).await;

    let settings = Settings {
        operator_image: "localhost/storage-operator:e2e".into(),
        env: Default::default(),
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
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    let storages: Api<Storage> = Api::all(client.clone());

    // Converge.
    wait_for("the driver operator Deployment", async || {
        deployments.get_opt(OPERATOR).await.unwrap()
    })
    .await;
    wait_for("the ClusterCSIDriver", async || {
        drivers.get_opt(DRIVER).await.unwrap()
    })
    .await;

    // Drift: scaled to zero, restored.
    let scale = |replicas: i32| json!({"spec": {"replicas": replicas}});
    deployments
        .patch(OPERATOR, &PatchParams::default(), &Patch::Merge(scale(0)))
        .await
        .unwrap();
    wait_for("the scale restored", async || {
        (deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas
            == Some(1))
        .then_some(())
    })
    .await;

    // An admin's edit is kept; a deleted ClusterCSIDriver comes back.
    drivers
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"logLevel": "Debug"}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        drivers
            .get(DRIVER)
            .await
            .unwrap()
            .spec
            .operator
            .log_level
            .unwrap()
            .as_str(),
        "Debug"
    );
    drivers
        .delete(DRIVER, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the ClusterCSIDriver recreated", async || {
        drivers
            .get_opt(DRIVER)
            .await
            .unwrap()
            .filter(|d| d.metadata.deletion_timestamp.is_none())
    })
    .await;

    // Unmanaged: hands off.
    let state = |s: &str| json!({"spec": {"managementState": s}});
    storages
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(state("Unmanaged")),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    deployments
        .patch(OPERATOR, &PatchParams::default(), &Patch::Merge(scale(0)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(
        deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(0),
        "Unmanaged left it alone"
    );
    storages
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(state("Managed")),
        )
        .await
        .unwrap();
    wait_for("Managed again restores it", async || {
        (deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas
            == Some(1))
        .then_some(())
    })
    .await;

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();

    // Clean up what this test created.
    let _ = drivers.delete(DRIVER, &DeleteParams::default()).await;
    let _ = Api::<Namespace>::all(client.clone())
        .delete(NS, &DeleteParams::default())
        .await;
    if declared {
        let _ = Api::<Infrastructure>::all(client.clone())
            .delete("cluster", &DeleteParams::default())
            .await;
    }
}
