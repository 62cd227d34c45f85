//! The GCP PD driver operator's scenarios on a real cluster (see the crate docs for how to run),
//! run as its own ServiceAccount with the RBAC the starter gives it: converge from an empty
//! namespace with the rendered containers, workload conditions that say what
//! kube-controller-manager says of the workloads (on a cluster whose pods cannot run: that the
//! operator waits for them), drift restored, a deleted StorageClass recreated, and Unmanaged
//! leaving a hand edit alone until Managed again. On a cluster without OpenShift's
//! Infrastructure it declares the platform GCP. It refuses to run where a GCP PD driver is
//! already installed, and removes everything it created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::operator_v1::ClusterCSIDriver;
use e2e::driver::Driver;
use e2e::{cleanup, ensure_gcp, wait_for};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

const NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "pd.csi.storage.gke.io";
const CONTROLLER: &str = "gcp-pd-csi-driver-controller";
const NODE: &str = "gcp-pd-csi-driver-node";

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn converge_report_drift_and_unmanaged() {
    let admin = e2e::admin().await;
    let declared = ensure_gcp(&admin).await;
    let driver = Driver::prepare(&admin, "gcp-pd").await;
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    let running = driver.start();

    // Converge.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let classes: Api<StorageClass> = Api::all(admin.clone());
    wait_for("the controller Deployment", async || {
        deployments.get_opt(CONTROLLER).await.unwrap()
    })
    .await;
    wait_for("the node DaemonSet", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt(NODE)
            .await
            .unwrap()
    })
    .await;
    wait_for("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
    })
    .await;
    wait_for("the StorageClass", async || {
        classes.get_opt("standard-csi").await.unwrap()
    })
    .await;
    driver.assert_workloads_applied(&admin).await;

    // Status: what the workloads' own status says.
    driver.assert_workloads_reported(&admin).await;

    // Drift: the Deployment's replicas changed by hand are restored.
    let replicas = |d: Deployment| d.spec.and_then(|s| s.replicas);
    let wanted = replicas(deployments.get(CONTROLLER).await.unwrap());
    let scale = |n: i32| Patch::Merge(json!({"spec": {"replicas": n}}));
    deployments
        .patch(CONTROLLER, &PatchParams::default(), &scale(5))
        .await
        .unwrap();
    wait_for("the replicas restored", async || {
        (replicas(deployments.get(CONTROLLER).await.unwrap()) == wanted).then_some(())
    })
    .await;

    // A deleted StorageClass comes back.
    classes
        .delete("standard-csi", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the StorageClass recreated", async || {
        classes
            .get_opt("standard-csi")
            .await
            .unwrap()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
    })
    .await;

    // Unmanaged: a hand edit stays, and the operator says why.
    let state = |s: &str| Patch::Merge(json!({"spec": {"managementState": s}}));
    drivers
        .patch(DRIVER, &PatchParams::default(), &state("Unmanaged"))
        .await
        .unwrap();
    wait_for("ManagementStateDegraded says Unmanaged", async || {
        driver
            .condition(&admin, "ManagementStateDegraded")
            .await
            .filter(|c| c.reason.as_deref() == Some("Unmanaged"))
    })
    .await;
    let passes = running.passes();
    deployments
        .patch(CONTROLLER, &PatchParams::default(), &scale(5))
        .await
        .unwrap();
    // The edit is watched: the operator runs for it and writes nothing.
    running.settled_since(passes).await;
    assert_eq!(
        replicas(deployments.get(CONTROLLER).await.unwrap()),
        Some(5),
        "Unmanaged left the edit alone"
    );
    drivers
        .patch(DRIVER, &PatchParams::default(), &state("Managed"))
        .await
        .unwrap();
    wait_for("Managed again restores it", async || {
        (replicas(deployments.get(CONTROLLER).await.unwrap()) == wanted).then_some(())
    })
    .await;

    running.stop().await;
    driver.finish(&admin).await;
    cleanup::undeclare_platform(&admin, declared).await;
}
