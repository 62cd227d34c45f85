//! The CSI migration audit on a real cluster (see the crate docs for how to run): the gcp-pd
//! driver operator, as its own ServiceAccount, reports an in-tree GCE PD PersistentVolume it
//! serves and the migration state of the cluster's real CSINodes. The PersistentVolume is an
//! API object only (no disk, no claim, `Retain`), so any cluster will do. It removes what it
//! created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use e2e::driver::Driver;
use e2e::{cleanup, ensure_gcp, wait_for};
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

const PV: &str = "e2e-csi-migration-in-tree";

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn audit_reports_an_in_tree_volume_and_the_nodes() {
    let admin = e2e::admin().await;
    let declared = ensure_gcp(&admin).await;
    let driver = Driver::prepare(&admin, "gcp-pd").await;
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    volumes
        .patch(
            PV,
            &PatchParams::apply(e2e::MANAGER).force(),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": PV},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "gcePersistentDisk": {"pdName": "e2e-no-such-disk"}}}),
            ),
        )
        .await
        .unwrap();
    let running = driver.start();

    let message = async |type_: &str| {
        driver
            .condition(&admin, type_)
            .await
            .map(|c| (c.status.as_str().to_owned(), c.message.unwrap_or_default()))
    };
    wait_for("the in-tree volume reported", async || {
        message("GCPPDCSIMigrationInTreeVolumes")
            .await
            .filter(|(status, m)| status == "True" && m.contains(PV))
    })
    .await;
    // The nodes condition matches the CSINodes' annotations, whatever they are.
    let csi_nodes = Api::<CSINode>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let expected = if csi_nodes.is_empty() {
        "Unknown"
    } else if csi_nodes.iter().all(|n| {
        driver_operator::migration::lists_plugin(
            n.metadata
                .annotations
                .as_ref()
                .unwrap_or(&Default::default()),
            csi_migration::Plugin::GcePd,
        )
    }) {
        "True"
    } else {
        "False"
    };
    wait_for("the nodes condition", async || {
        message("GCPPDCSIMigrationNodesMigrated")
            .await
            .filter(|(status, _)| status == expected)
    })
    .await;

    running.stop().await;
    cleanup::delete_and_wait(&volumes, PV).await;
    driver.finish(&admin).await;
    cleanup::undeclare_platform(&admin, declared).await;
}
