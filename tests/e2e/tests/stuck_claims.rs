//! The report of claims stuck Pending on a driver on a real cluster (see the crate docs for how
//! to run): the gcp-pd driver operator, as its own ServiceAccount, reports a claim of its class
//! whose pod was scheduled (`volume.kubernetes.io/selected-node`) and that no provisioner
//! serves (none runs on the e2e cluster), once it has waited longer than the threshold (5 s
//! here instead of 5 minutes: kube-apiserver stamps a claim's creation time), and forgets it
//! once it is deleted. Its operator is never refused a request (it lists and watches claims
//! with the starter's RBAC). It removes what it created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::time::Duration;

use e2e::driver::Driver;
use e2e::{cleanup, ensure_gcp, wait_for};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const NS: &str = "e2e-stuck-claims";
const STUCK: &str = "GCPPDStuckClaims";

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn a_claim_pending_on_the_driver_too_long_is_reported_then_forgotten() {
    let admin = e2e::admin().await;
    let declared = ensure_gcp(&admin).await;
    let driver = Driver::prepare(&admin, "gcp-pd").await;
    e2e::install::ensure_namespace(&admin, NS).await;
    let running = driver.start_with_settings(driver_operator::Settings {
        stuck_claims_after: Some(Duration::from_secs(5)),
        ..driver_operator::Settings::default()
    });
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "data",
                             "annotations": {"volume.kubernetes.io/selected-node": "e2e-node"}},
                "spec": {"storageClassName": "standard-csi", "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let condition = async |status: &str| {
        driver
            .condition(&admin, STUCK)
            .await
            .filter(|c| c.status.as_str() == status)
    };
    let reported = wait_for("the stuck claim reported", async || condition("True").await).await;
    assert_eq!(reported.reason.as_deref(), Some("ClaimsStuckPending"));
    assert_eq!(
        reported.message.as_deref(),
        Some(
            "1 PersistentVolumeClaim of pd.csi.storage.gke.io has been Pending for more than 5 \
             seconds: e2e-stuck-claims/data; run `storage-operator diagnose pvc -n \
             e2e-stuck-claims data` to see why"
        )
    );

    cleanup::delete_and_wait(&claims, "data").await;
    let cleared = wait_for("the report cleared", async || condition("False").await).await;
    assert_eq!(cleared.reason.as_deref(), Some("NoStuckClaims"));

    running.stop().await;
    cleanup::delete_namespace(&admin, NS).await;
    driver.finish(&admin).await;
    cleanup::undeclare_platform(&admin, declared).await;
}
