//! The report of the claims stuck Pending on a driver (`csi_kit::claims`), by the gcp-pd driver
//! operator on the in-process API server: a claim of the driver's class that a pod waits for is
//! reported once it has waited longer than the threshold (3 seconds here: the API server stamps
//! a claim's creation time, so a test cannot make an old one), a claim of another driver and
//! one that waits for its first pod are not, the report goes once the claim binds, and it never
//! makes the driver Degraded.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::time::Duration;

use api::operator_v1::{ClusterCSIDriver, ConditionStatus, OperatorCondition};
use driver_operator::Settings;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster, SimConfig};

const NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "pd.csi.storage.gke.io";
const AGENT: &str = "gcp-pd-operator";
const STUCK: &str = "GCPPDStuckClaims";
const AFTER: Duration = Duration::from_secs(3);

fn start(cluster: &Cluster) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let def = drivers::by_name("gcp-pd").unwrap();
    let settling = metrics.settling(&driver_operator::operator_name(&def));
    Background::spawn(|shutdown| async move {
        driver_operator::run(
            client,
            def,
            Settings {
                stuck_claims_after: Some(AFTER),
                ..Settings::default()
            },
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(settling)
}

async fn create_all<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + serde::Serialize + serde::de::DeserializeOwned + Clone + std::fmt::Debug,
{
    api.create(
        &PostParams::default(),
        &serde_json::from_value(value).unwrap(),
    )
    .await
    .unwrap();
}

/// An OpenShift cluster on GCP with a node, the workload simulation running, the
/// ClusterCSIDriver Managed, and the namespace `app`.
async fn openshift() -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        if ["ClusterCSIDriver", "Infrastructure"].contains(&crd.spec.names.kind.as_str()) {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}
    });
    let infrastructures = Api::<api::config_v1::Infrastructure>::all(admin.clone());
    create_all(&infrastructures, infrastructure.clone()).await;
    infrastructures
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    for ns in [NS, "app"] {
        create_all(
            &Api::<Namespace>::all(admin.clone()),
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }
    cluster.add_node("node-a", true);
    cluster.simulate_workloads(SimConfig::default());
    create_all(
        &Api::<ClusterCSIDriver>::all(admin.clone()),
        json!({"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
               "metadata": {"name": DRIVER}, "spec": {"managementState": "Managed"}}),
    )
    .await;
    (cluster, admin)
}

async fn claim(admin: &Client, name: &str, class: &str, annotations: Value) {
    create_all(
        &Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "app"),
        json!({"metadata": {"name": name, "annotations": annotations},
               "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}},
               "status": {"phase": "Pending"}}),
    )
    .await;
}

async fn condition(client: &Client, type_: &str) -> Option<OperatorCondition> {
    let driver = Api::<ClusterCSIDriver>::all(client.clone())
        .get_opt(DRIVER)
        .await
        .unwrap()?;
    driver.status?.condition(type_).cloned()
}

#[tokio::test]
async fn claims_waiting_on_the_driver_too_long_are_reported_and_forgotten_once_bound() {
    let (cluster, admin) = openshift().await;
    // Another driver's class, Immediate: its claims are not gcp-pd's.
    create_all(
        &Api::<StorageClass>::all(admin.clone()),
        json!({"metadata": {"name": "other"}, "provisioner": "ebs.csi.aws.com",
               "volumeBindingMode": "Immediate"}),
    )
    .await;
    let running = start(&cluster);
    // No claim: nothing to report, and nothing to wait for.
    let none = testkit::eventually(
        "StuckClaims reported",
        Duration::from_secs(60),
        async || condition(&admin, STUCK).await,
    )
    .await;
    assert_eq!(none.status, ConditionStatus::False);
    assert_eq!(none.reason.as_deref(), Some("NoStuckClaims"));

    // standard-csi binds on first consumer: `data` has a pod scheduled (selected-node), `idle`
    // has none; `theirs` is another driver's.
    claim(
        &admin,
        "data",
        "standard-csi",
        json!({"volume.kubernetes.io/selected-node": "node-a"}),
    )
    .await;
    claim(&admin, "idle", "standard-csi", json!({})).await;
    claim(&admin, "theirs", "other", json!({})).await;
    let reported =
        testkit::eventually("data reported stuck", Duration::from_secs(60), async || {
            condition(&admin, STUCK)
                .await
                .filter(|c| c.status == ConditionStatus::True)
        })
        .await;
    assert_eq!(reported.reason.as_deref(), Some("ClaimsStuckPending"));
    assert_eq!(
        reported.message.as_deref(),
        Some(
            "1 PersistentVolumeClaim of pd.csi.storage.gke.io has been Pending for more than 3 \
             seconds: app/data; run `storage-operator diagnose pvc -n app data` to see why"
        )
    );
    // Informational: no Degraded condition of the driver says anything of it.
    let driver = Api::<ClusterCSIDriver>::all(admin.clone())
        .get(DRIVER)
        .await
        .unwrap();
    for c in &driver.status.unwrap().conditions {
        if c.type_.ends_with("Degraded") {
            assert_eq!(c.status, ConditionStatus::False, "{c:?}");
        }
    }

    // Bound: forgotten.
    Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "app")
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    let cleared = testkit::eventually("the report cleared", Duration::from_secs(60), async || {
        condition(&admin, STUCK)
            .await
            .filter(|c| c.status == ConditionStatus::False)
    })
    .await;
    assert_eq!(cleared.reason.as_deref(), Some("NoStuckClaims"));
    // Nothing pending on the driver: it settles, and idles without polling.
    running.converged(&cluster, AGENT).await;
    cluster.clear_requests();
    tokio::time::sleep(AFTER + Duration::from_secs(1)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);
    let polls = cluster
        .requests()
        .iter()
        .filter(|r| r.from_client(AGENT) && (r.verb == "get" || r.verb == "list"))
        .count();
    assert_eq!(polls, 0, "the operator polled the API while idle");
    running.stop().await;
}
