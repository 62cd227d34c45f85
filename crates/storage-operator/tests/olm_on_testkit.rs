//! Adopting an OLM-installed driver operator on the in-process API server, including a restart
//! half-way (the next step starts from what Storage/cluster recorded).

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use api::operator_v1::Storage;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client, ResourceExt};
use opkit::metrics::Metrics;
use serde_json::json;
use storage_operator::olm::{Progress, annotation_keys, step};
use storage_operator::registry::{DriverEntry, OlmPackage, find};

const NS: &str = "openshift-olm-driver";

fn olm_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.operators.coreos.com")},
        "spec": {"group": "operators.coreos.com", "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

fn entry() -> DriverEntry {
    DriverEntry {
        olm: Some(OlmPackage {
            package: "gcp-pd-csi-driver-operator",
            operator_deployment: "old-gcp-pd-operator",
        }),
        ..find("gcp-pd").unwrap()
    }
}

async fn storage(client: &Client) -> Storage {
    Api::<Storage>::all(client.clone())
        .get("cluster")
        .await
        .unwrap()
}

fn deployment(name: &str, owner: Option<(&str, &str)>) -> Deployment {
    let mut value = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    });
    if let Some((csv, uid)) = owner {
        value["metadata"]["ownerReferences"] = json!([{"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion", "name": csv, "uid": uid}]);
    }
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn adoption_removes_the_subscription_and_csv_keeps_operands_and_survives_a_restart() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &<Storage as kube::CustomResourceExt>::crd(),
    )
    .await
    .unwrap();
    crds.create(
        &PostParams::default(),
        &olm_crd("Subscription", "subscriptions"),
    )
    .await
    .unwrap();
    crds.create(
        &PostParams::default(),
        &olm_crd("ClusterServiceVersion", "clusterserviceversions"),
    )
    .await
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    let storage_object: Storage = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "Storage", "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    Api::<Storage>::all(client.clone())
        .create(&PostParams::default(), &storage_object)
        .await
        .unwrap();

    let gvk = |kind: &str| GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", kind);
    let subscriptions = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk("Subscription"), "subscriptions"),
    );
    let csvs = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk("ClusterServiceVersion"), "clusterserviceversions"),
    );
    let subscription: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "my-subscription", "namespace": NS},
        "spec": {"name": "gcp-pd-csi-driver-operator", "source": "redhat-operators"},
        "status": {"installedCSV": "gcp-pd-csi-driver-operator.v4.5.0"}
    }))
    .unwrap();
    subscriptions
        .create(&PostParams::default(), &subscription)
        .await
        .unwrap();
    let csv: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "gcp-pd-csi-driver-operator.v4.5.0", "namespace": NS}, "spec": {}
    }))
    .unwrap();
    let csv = csvs.create(&PostParams::default(), &csv).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    // OLM's operator Deployment is owned by the CSV; the driver's own Deployment is not.
    deployments
        .create(
            &PostParams::default(),
            &deployment(
                "old-gcp-pd-operator",
                Some((&csv.name_any(), &csv.uid().unwrap())),
            ),
        )
        .await
        .unwrap();
    deployments
        .create(
            &PostParams::default(),
            &deployment("gcp-pd-csi-driver-controller", None),
        )
        .await
        .unwrap();

    // Step 1: the Subscription goes, and the progress is recorded on Storage.
    let metrics = Metrics::new();
    let writes = |kind: &str| {
        let line = format!(
            "storage_operator_api_writes_total{{controller=\"CSIDriverStarter\",kind=\"{kind}\"}}"
        );
        metrics
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(&line).map(|n| n.trim().to_owned()))
    };
    let progress = step(&client, &entry(), &storage(&client).await, &metrics)
        .await
        .unwrap();
    assert!(
        matches!(&progress, Progress::InProgress(m) if m.contains("deleting Subscription")),
        "{progress:?}"
    );
    let (namespace_key, csv_key) = annotation_keys(&entry());
    let recorded = storage(&client).await;
    assert_eq!(recorded.annotations()[&namespace_key], NS);
    assert_eq!(
        recorded.annotations()[&csv_key],
        "gcp-pd-csi-driver-operator.v4.5.0"
    );
    assert!(
        subscriptions
            .get_opt("my-subscription")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(writes("Storage").as_deref(), Some("1"));
    assert_eq!(writes("Subscription").as_deref(), Some("1"));

    // "Restart": a new step reads only what Storage recorded, and removes the CSV.
    let progress = step(&client, &entry(), &storage(&client).await, &metrics)
        .await
        .unwrap();
    assert!(
        matches!(&progress, Progress::InProgress(m) if m.contains("ClusterServiceVersion")),
        "{progress:?}"
    );
    assert!(
        csvs.get_opt("gcp-pd-csi-driver-operator.v4.5.0")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(writes("ClusterServiceVersion").as_deref(), Some("1"));

    // OLM's Deployment went with its CSV; the driver's own Deployment is untouched.
    let progress = step(&client, &entry(), &storage(&client).await, &metrics)
        .await
        .unwrap();
    assert_eq!(progress, Progress::Adopted);
    assert!(
        deployments
            .get_opt("old-gcp-pd-operator")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        deployments
            .get_opt("gcp-pd-csi-driver-controller")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        !storage(&client)
            .await
            .annotations()
            .contains_key(&namespace_key),
        "progress cleared"
    );
    assert_eq!(
        writes("Storage").as_deref(),
        Some("2"),
        "the cleared progress"
    );

    // Nothing left to adopt afterwards.
    assert_eq!(
        step(&client, &entry(), &storage(&client).await, &metrics)
            .await
            .unwrap(),
        Progress::NothingToAdopt
    );
}

#[tokio::test]
async fn without_olm_there_is_nothing_to_adopt() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(
            &PostParams::default(),
            &<Storage as kube::CustomResourceExt>::crd(),
        )
        .await
        .unwrap();
    let storage: Storage = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "Storage", "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    assert_eq!(
        step(&client, &entry(), &storage, &Metrics::new())
            .await
            .unwrap(),
        Progress::NothingToAdopt
    );
}
