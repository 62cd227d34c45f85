//! The GCP PD driver operator's scenarios on a real cluster (see the crate docs for how to run):
//! converge from an empty namespace, report Available (on a cluster without nodes the workload
//! status a kubelet would give is patched into `/status`), drift restored with an Event, a
//! deleted StorageClass recreated, and Unmanaged leaving a hand edit alone until Managed again.
//! On a cluster without OpenShift's Infrastructure it declares the platform GCP. It refuses to
//! run where a GCP PD driver is already installed, and removes everything it created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::config_v1::Infrastructure;
use api::operator_v1::ClusterCSIDriver;
use e2e::{apply_crd, ensure_gcp, simulate_workloads, wait_for};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;

const NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "pd.csi.storage.gke.io";
const CONTROLLER: &str = "gcp-pd-csi-driver-controller";
const NODE: &str = "gcp-pd-csi-driver-node";

async fn condition(client: &Client, type_: &str) -> Option<(String, String)> {
    let driver = Api::<ClusterCSIDriver>::all(client.clone())
        .get(DRIVER)
        .await
        .unwrap();
    let condition = driver.status?.condition(type_).cloned()?;
    Some((
        condition.status.as_str().to_owned(),
        condition.reason.unwrap_or_default(),
    ))
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn converge_report_drift_and_unmanaged() {
    let client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    apply_crd(&client, &api::crds::cluster_csi_driver()).await;
    let declared = ensure_gcp(&client).await;
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    wait_for("the ClusterCSIDriver API", async || {
        drivers.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;
    assert!(
        drivers.get_opt(DRIVER).await.unwrap().is_none(),
        "this cluster already has the GCP PD driver installed; run the e2e tests on a disposable cluster"
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created_namespace = namespaces.get_opt(NS).await.unwrap().is_none();
    if created_namespace {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
                )
                .unwrap(),
            )
            .await
            .unwrap();
    }
    drivers
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": DRIVER}, "spec": {"managementState": "Managed"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(csi::operator::run(
        client.clone(),
        drivers::by_name("gcp-pd").unwrap(),
        csi::operator::Settings::default(),
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = stopped.await;
        },
    ));

    // Converge.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let classes: Api<StorageClass> = Api::all(client.clone());
    wait_for("the controller Deployment", async || {
        deployments.get_opt(CONTROLLER).await.unwrap()
    })
    .await;
    wait_for("the node DaemonSet", async || {
        Api::<DaemonSet>::namespaced(client.clone(), NS)
            .get_opt(NODE)
            .await
            .unwrap()
    })
    .await;
    wait_for("the CSIDriver", async || {
        Api::<CSIDriver>::all(client.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
    })
    .await;
    wait_for("the StorageClass", async || {
        classes.get_opt("standard-csi").await.unwrap()
    })
    .await;

    // Status: Available once the workloads are.
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    if nodes.is_empty() {
        simulate_workloads(&client, NS, CONTROLLER, NODE).await;
        wait_for("ControllerServiceControllerAvailable", async || {
            condition(&client, "GCPPDDriverControllerServiceControllerAvailable")
                .await
                .filter(|(status, _)| status == "True")
        })
        .await;
    } else {
        // Real nodes outside GCP cannot run the driver; the operator must still report.
        wait_for(
            "ControllerServiceControllerAvailable reported",
            async || condition(&client, "GCPPDDriverControllerServiceControllerAvailable").await,
        )
        .await;
    }

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
        condition(&client, "ManagementStateDegraded")
            .await
            .filter(|(_, reason)| reason == "Unmanaged")
    })
    .await;
    deployments
        .patch(CONTROLLER, &PatchParams::default(), &scale(5))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(15)).await;
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

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();

    // Clean up everything this test created.
    let _ = drivers.delete(DRIVER, &DeleteParams::default()).await;
    let ours = ListParams::default().labels(&format!("{}=gcp-pd", csi::names::OPERAND_LABEL));
    let _ = Api::<CSIDriver>::all(client.clone())
        .delete(DRIVER, &DeleteParams::default())
        .await;
    let _ = classes
        .delete_collection(&DeleteParams::default(), &ours)
        .await;
    let _ = Api::<ClusterRole>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &ours)
        .await;
    let _ = Api::<ClusterRoleBinding>::all(client.clone())
        .delete_collection(&DeleteParams::default(), &ours)
        .await;
    if created_namespace {
        let _ = namespaces.delete(NS, &DeleteParams::default()).await;
    } else {
        let _ = deployments
            .delete(CONTROLLER, &DeleteParams::default())
            .await;
        let _ = Api::<DaemonSet>::namespaced(client.clone(), NS)
            .delete(NODE, &DeleteParams::default())
            .await;
    }
    if declared {
        let _ = Api::<Infrastructure>::all(client.clone())
            .delete("cluster", &DeleteParams::default())
            .await;
    }
}
