//! The CSIDriverDeployment controller on a real cluster (see the crate docs for how to run):
//! converge, drift restored, and deletion removing the cluster-scoped objects and releasing the
//! finalizer. The driver pods need not run: the controller's behaviour is about its objects.
//! It removes what it created (the CRD stays).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::time::Duration;

use api::csidriver_v1alpha1::CSIDriverDeployment;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::metrics::Metrics;
use serde_json::json;

const NS: &str = "e2e-csidriverdeployment";
const DRIVER: &str = "e2e.csi.storage.openshift.io";

async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..240 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn apply_crd(client: &Client) {
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "CSIDriverDeployment")
        .unwrap();
    let name = crd.metadata.name.clone().unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    // The API server serves a new CRD after a moment.
    tokio::time::sleep(Duration::from_secs(5)).await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn converge_drift_and_delete() {
    let client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    apply_crd(&client).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(NS).await.unwrap().is_none() {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
            )
            .await
            .unwrap();
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(csi::declared::controller::run(
        client.clone(),
        Default::default(),
        Metrics::new(),
        None,
        async {
            let _ = stopped.await;
        },
    ));

    let declared: CSIDriverDeployment = serde_json::from_value(json!({
        "apiVersion": "csidriver.storage.openshift.io/v1alpha1",
        "kind": "CSIDriverDeployment",
        "metadata": {"name": "e2e", "namespace": NS},
        "spec": {
            "driverName": DRIVER,
            "driverSocket": "/csi/csi.sock",
            "csiDriver": {"attachRequired": false},
            "driverControllerTemplate": {"spec": {"containers": [
                {"name": "driver", "image": "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0",
                 "args": ["--drivername=e2e.csi.storage.openshift.io", "--endpoint=unix:///csi/csi.sock", "--nodeid=$(NODE)"],
                 "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
            ]}},
            "driverPerNodeTemplate": {"spec": {"containers": [
                {"name": "driver", "image": "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0",
                 "args": ["--drivername=e2e.csi.storage.openshift.io", "--endpoint=unix:///csi/csi.sock", "--nodeid=$(NODE)"],
                 "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
            ]}},
            "storageClassTemplates": [{"metadata": {"name": "e2e-declared"}}],
        }
    }))
    .unwrap();
    let declared_api: Api<CSIDriverDeployment> = Api::namespaced(client.clone(), NS);
    declared_api
        .create(&PostParams::default(), &declared)
        .await
        .unwrap();

    // Converge.
    let csi_drivers: Api<CSIDriver> = Api::all(client.clone());
    let classes: Api<StorageClass> = Api::all(client.clone());
    wait_for("the CSIDriver", async || {
        csi_drivers.get_opt(DRIVER).await.unwrap()
    })
    .await;
    wait_for("the node DaemonSet", async || {
        Api::<DaemonSet>::namespaced(client.clone(), NS)
            .get_opt("e2e-node")
            .await
            .unwrap()
    })
    .await;
    wait_for("the StorageClass", async || {
        classes.get_opt("e2e-declared").await.unwrap()
    })
    .await;
    wait_for("the status", async || {
        let cd = declared_api.get("e2e").await.unwrap();
        let status = cd.status?;
        (status.observed_generation == cd.metadata.generation && !status.children.is_empty())
            .then_some(())
    })
    .await;

    // Drift restored.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role = format!("{DRIVER}-csi-provisioner-role");
    roles
        .patch(
            &role,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": []})),
        )
        .await
        .unwrap();
    wait_for("the ClusterRole restored", async || {
        roles
            .get(&role)
            .await
            .unwrap()
            .rules
            .filter(|r| !r.is_empty())
    })
    .await;

    // Deleted: the cluster-scoped objects go, then the object itself.
    declared_api
        .delete("e2e", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the CSIDriverDeployment gone", async || {
        declared_api
            .get_opt("e2e")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(csi_drivers.get_opt(DRIVER).await.unwrap().is_none());
    assert!(classes.get_opt("e2e-declared").await.unwrap().is_none());
    assert!(roles.get_opt(&role).await.unwrap().is_none());

    let _ = stop.send(());
    task.await.unwrap().unwrap();
    namespaces
        .delete(NS, &DeleteParams::default())
        .await
        .unwrap();
}
