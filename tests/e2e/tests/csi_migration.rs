//! The CSI migration audit on a real cluster (see the crate docs for how to run): the gcp-pd
//! driver operator reports an in-tree GCE PD PersistentVolume it serves and the migration
//! state of the cluster's real CSINodes. The PersistentVolume is an API object only (no disk,
//! no claim, `Retain`), so any cluster will do. It removes what it created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use csi::operator::Settings;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume};
use k8s_openapi::api::storage::v1::CSINode;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;

const NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "pd.csi.storage.gke.io";
const PV: &str = "e2e-csi-migration-in-tree";

async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..240 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn apply<K>(api: &Api<K>, name: &str, value: serde_json::Value)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(value),
    )
    .await
    .unwrap();
}

async fn message(drivers: &Api<ClusterCSIDriver>, type_: &str) -> Option<(String, String)> {
    let driver = drivers.get_opt(DRIVER).await.unwrap()?;
    let c = driver.status?.condition(type_)?.clone();
    Some((c.status.to_string(), c.message.unwrap_or_default()))
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn audit_reports_an_in_tree_volume_and_the_nodes() {
    let client: Client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    apply(
        &crds,
        "clustercsidrivers.operator.openshift.io",
        serde_json::to_value(api::crds::cluster_csi_driver()).unwrap(),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    apply(
        &Api::<Namespace>::all(client.clone()),
        NS,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    apply(
        &drivers,
        DRIVER,
        json!({"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
               "metadata": {"name": DRIVER}, "spec": {"managementState": "Managed"}}),
    )
    .await;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    apply(
        &volumes,
        PV,
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": PV},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "gcePersistentDisk": {"pdName": "e2e-no-such-disk"}}}),
    )
    .await;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(csi::operator::run(
        client.clone(),
        drivers::by_name("gcp-pd").unwrap(),
        Settings::default(),
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = stopped.await;
        },
    ));

    wait_for("the in-tree volume reported", async || {
        message(&drivers, "GCPPDCSIMigrationInTreeVolumes")
            .await
            .filter(|(status, m)| status == "True" && m.contains(PV))
    })
    .await;
    // The nodes condition matches the CSINodes' annotations, whatever they are.
    let csi_nodes = Api::<CSINode>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let expected = if csi_nodes.is_empty() {
        "Unknown"
    } else if csi_nodes.iter().all(|n| {
        csi::operator::migration::lists_plugin(
            n.metadata
                .annotations
                .as_ref()
                .unwrap_or(&Default::default()),
            csi::migration::Plugin::GcePd,
        )
    }) {
        "True"
    } else {
        "False"
    };
    wait_for("the nodes condition", async || {
        message(&drivers, "GCPPDCSIMigrationNodesMigrated")
            .await
            .filter(|(status, _)| status == expected)
    })
    .await;

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();

    // Clean up what this test created.
    let _ = volumes.delete(PV, &DeleteParams::default()).await;
    let _ = drivers.delete(DRIVER, &DeleteParams::default()).await;
}
