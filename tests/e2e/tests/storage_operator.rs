//! The cluster storage operator on a real cluster (see the crate docs for how to run), as the
//! ServiceAccount of `deploy/kubernetes/storage-operator.yaml`: it says which platform it found.
//! And the GCP PD driver operator, as the ServiceAccount the starter gives it, reports on its
//! ClusterCSIDriver.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::operator_v1::Storage;
use e2e::driver::Driver;
use e2e::{cleanup, cso, wait_for};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn reports_the_platform_it_found() {
    let admin = e2e::admin().await;
    let identity = cso::prepare(&admin).await;
    let running = cso::start(&identity);

    let storages: Api<Storage> = Api::all(admin.clone());
    let message = wait_for(
        "Storage/cluster to report CSIDriverStarterAvailable",
        async || {
            storages
                .get_opt("cluster")
                .await
                .unwrap()?
                .status?
                .condition("CSIDriverStarterAvailable")?
                .message
                .clone()
        },
    )
    .await;
    running.stop().await;
    assert!(message.starts_with("platform "), "{message}");

    cleanup::delete_and_wait(&storages, "cluster").await;
    cleanup::delete_labelled(
        &Api::<ClusterRole>::all(admin.clone()),
        &format!("{}=true", csi_kit::names::SHARED_ROLE_LABEL),
    )
    .await;
    identity.assert_never_refused();
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn the_gcp_pd_driver_operator_reports_on_its_cluster_csi_driver() {
    let admin = e2e::admin().await;
    let declared = e2e::ensure_gcp(&admin).await;
    let driver = Driver::prepare(&admin, "gcp-pd").await;
    let running = driver.start();
    driver.assert_workloads_reported(&admin).await;
    running.stop().await;
    driver.finish(&admin).await;
    cleanup::undeclare_platform(&admin, declared).await;
}
