//! The applier and the status writer against the in-process API server: what they send, what the
//! server ends up holding, and that an unchanged reconcile sends nothing.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use api::operator_v1::{ClusterCSIDriver, ConditionStatus, OperatorStatus};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use opkit::apply::{APPLIED_HASH_ANNOTATION, Applier, Outcome};
use opkit::conditions::condition;
use opkit::status::{StatusPart, apply_status};
use serde_json::json;

fn deployment(args: &[&str]) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "driver", "namespace": "default", "labels": {"app": "driver"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "driver"}},
            "template": {
                "metadata": {"labels": {"app": "driver"}},
                "spec": {"containers": [{"name": "csi-driver", "image": "example.com/driver:1", "args": args}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn apply_creates_skips_restores_drift_and_removes_dropped_fields() {
    let cluster = testkit::Cluster::start().await;
    let applier = Applier::new(cluster.client_with_agent("operator"), "test-controller");
    let api: Api<Deployment> = Api::namespaced(cluster.client(), "default");

    let desired = deployment(&["--v=2", "--extra"]);
    assert_eq!(
        applier.apply(&desired, None).await.unwrap(),
        Outcome::Created
    );
    let served = api.get("driver").await.unwrap();
    assert_eq!(
        served.metadata.annotations.as_ref().unwrap()[APPLIED_HASH_ANNOTATION].len(),
        64
    );
    let managers: Vec<_> = served
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| m.manager.clone().unwrap())
        .collect();
    assert_eq!(managers, ["storage-operator/test-controller"]);

    // Unchanged: nothing is sent.
    cluster.clear_requests();
    assert_eq!(
        applier.apply(&desired, Some(&served)).await.unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(cluster.count_writes("operator"), 0);
    assert_eq!(cluster.count_reads("operator"), 0);

    // An admin scales it: the next apply puts it back.
    api.patch(
        "driver",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    let drifted = api.get("driver").await.unwrap();
    assert_eq!(
        applier.apply(&desired, Some(&drifted)).await.unwrap(),
        Outcome::DriftRestored
    );
    assert_eq!(
        api.get("driver").await.unwrap().spec.unwrap().replicas,
        Some(2)
    );

    // We stop setting an argument: it disappears from the server.
    let fewer = deployment(&["--v=2"]);
    let current = api.get("driver").await.unwrap();
    assert_eq!(
        applier.apply(&fewer, Some(&current)).await.unwrap(),
        Outcome::Updated
    );
    let args = api
        .get("driver")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers[0]
        .args
        .clone();
    assert_eq!(args, Some(vec!["--v=2".to_owned()]));
}

#[tokio::test]
async fn apply_serves_cluster_scoped_kinds() {
    let cluster = testkit::Cluster::start().await;
    let applier = Applier::new(cluster.client(), "sc");
    let class: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "standard-csi"}, "provisioner": "pd.csi.storage.gke.io",
        "parameters": {"type": "pd-standard"}
    }))
    .unwrap();
    assert_eq!(applier.apply(&class, None).await.unwrap(), Outcome::Created);
    let served = Api::<StorageClass>::all(cluster.client())
        .get("standard-csi")
        .await
        .unwrap();
    assert_eq!(
        applier.apply(&class, Some(&served)).await.unwrap(),
        Outcome::Unchanged
    );
}

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
}

#[tokio::test]
async fn controllers_own_their_conditions_on_a_shared_status() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &api::crds::cluster_csi_driver())
        .await
        .unwrap();
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    let driver: ClusterCSIDriver = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": "pd.csi.storage.gke.io"}, "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    drivers
        .create(&PostParams::default(), &driver)
        .await
        .unwrap();

    let part = |type_: &str, status: ConditionStatus, message: &str| StatusPart {
        conditions: vec![condition(type_, status, "R", message)],
        ..Default::default()
    };
    let status = |d: &ClusterCSIDriver| -> OperatorStatus { d.status.clone().unwrap_or_default() };
    let write = |controller: &'static str,
                 part: StatusPart,
                 observed: Option<ClusterCSIDriver>,
                 time: i64| {
        let client = client.clone();
        async move {
            apply_status::<ClusterCSIDriver>(
                &client,
                controller,
                "pd.csi.storage.gke.io",
                &part,
                observed.as_ref(),
                &at(time),
            )
            .await
            .unwrap()
        }
    };
    let name = "pd.csi.storage.gke.io";

    let a = part("AAvailable", ConditionStatus::True, "a is fine");
    let b = part("BDegraded", ConditionStatus::False, "");
    assert!(write("a", a.clone(), None, 0).await);
    let observed = drivers.get(name).await.unwrap();
    assert!(write("b", b, Some(observed), 1).await);
    let observed = drivers.get(name).await.unwrap();
    let types: Vec<_> = status(&observed)
        .conditions
        .iter()
        .map(|c| c.type_.clone())
        .collect();
    assert_eq!(
        types,
        ["AAvailable", "BDegraded"],
        "neither controller overwrote the other"
    );

    // Unchanged: nothing is sent.
    cluster.clear_requests();
    assert!(!write("a", a, Some(observed.clone()), 9).await);
    assert_eq!(cluster.count_writes("operator"), 0);

    // A changes its message: its transition time stays, B's condition is untouched.
    let a2 = part("AAvailable", ConditionStatus::True, "a is still fine");
    assert!(write("a", a2, Some(observed), 10).await);
    let observed = status(&drivers.get(name).await.unwrap());
    let a_cond = observed.condition("AAvailable").unwrap();
    assert_eq!(a_cond.message.as_deref(), Some("a is still fine"));
    assert_eq!(a_cond.last_transition_time, Some(at(0)));
    assert!(observed.condition("BDegraded").is_some());

    // A stops reporting its condition: the server removes it, B's stays.
    let observed_object = drivers.get(name).await.unwrap();
    assert!(
        write(
            "a",
            StatusPart::default(),
            Some(observed_object.clone()),
            11
        )
        .await
    );
    // B saying nothing new sends nothing, though A's condition was in the status it observed.
    assert!(
        !write(
            "b",
            part("BDegraded", ConditionStatus::False, ""),
            Some(drivers.get(name).await.unwrap()),
            12
        )
        .await
    );
    let observed = status(&drivers.get(name).await.unwrap());
    assert!(observed.condition("AAvailable").is_none());
    assert!(observed.condition("BDegraded").is_some());
}
