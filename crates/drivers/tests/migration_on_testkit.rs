//! The CSI migration audit of the gcp-pd driver operator (`driver_operator::migration`): its
//! conditions as pure functions, then the real operator on the in-process API server with
//! in-tree PersistentVolumes, half-migrated nodes, an in-tree default StorageClass and the
//! driver going unavailable and back.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::time::Duration;

use api::operator_v1::{ClusterCSIDriver, ConditionStatus, OperatorCondition};
use csi_migration::{DEFAULT_CLASS_ANNOTATION, MIGRATED_PLUGINS_ANNOTATION, Plugin};
use driver_operator::Settings;
use driver_operator::migration::{Observed, capped, lists_plugin, status};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
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
const VOLUMES: &str = "GCPPDCSIMigrationInTreeVolumes";
const NODES: &str = "GCPPDCSIMigrationNodesMigrated";
const DEFAULT_CLASS: &str = "GCPPDCSIMigrationInTreeDefaultStorageClass";
const UPGRADEABLE: &str = "GCPPDCSIMigrationUpgradeable";

fn def() -> csi_kit::DriverDef {
    drivers::by_name("gcp-pd").unwrap()
}

// The conditions, pure.

fn observed(volumes: &[&str], nodes: usize, pending: &[&str]) -> Observed {
    Observed {
        plugin: Some(Plugin::GcePd),
        volumes: volumes.iter().map(|s| s.to_string()).collect(),
        claims: vec![],
        nodes,
        nodes_not_migrated: pending.iter().map(|s| s.to_string()).collect(),
    }
}

fn find(conditions: &[OperatorCondition], type_: &str) -> OperatorCondition {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
        .unwrap_or_else(|| panic!("no {type_} in {conditions:?}"))
}

#[test]
fn a_driver_that_is_no_migration_target_reports_nothing() {
    assert!(status(&def(), &Observed::default(), &[], true).is_none());
}

#[test]
fn upgradeable_is_false_only_with_volumes_and_no_driver() {
    for (volumes, available, expected) in [
        (&["pv-1"][..], false, ConditionStatus::False),
        (&["pv-1"][..], true, ConditionStatus::True),
        (&[][..], false, ConditionStatus::True),
    ] {
        let part = status(&def(), &observed(volumes, 1, &[]), &[], available).unwrap();
        let c = find(&part.part.conditions, UPGRADEABLE);
        assert_eq!(c.status, expected, "{volumes:?} available={available}");
        if expected == ConditionStatus::False {
            assert_eq!(c.reason.as_deref(), Some("InTreeVolumesNeedDriver"));
            assert!(c.message.unwrap().ends_with(": pv-1"));
        }
    }
}

#[test]
fn only_upgradeable_is_read_by_the_cso_roll_up() {
    let part = status(&def(), &observed(&["a"], 2, &["n"]), &[], false).unwrap();
    assert_eq!(part.controller, "GCPPDCSIMigrationController");
    let rolled_up: Vec<&str> = part
        .part
        .conditions
        .iter()
        .map(|c| c.type_.as_str())
        .filter(|t| {
            [
                "Available",
                "Progressing",
                "Degraded",
                "Upgradeable",
                "Disabled",
            ]
            .iter()
            .any(|suffix| t.ends_with(suffix))
        })
        .collect();
    assert_eq!(rolled_up, vec![UPGRADEABLE]);
}

#[test]
fn the_roll_up_turns_upgradeable_false_and_ignores_the_informational_conditions() {
    use opkit::conditions::{Inertia, union_condition};
    // In-tree volumes, nodes pending, driver down: only Upgradeable moves.
    let part = status(&def(), &observed(&["pv-1"], 2, &["node-b"]), &[], false).unwrap();
    let now = k8s_openapi::jiff::Timestamp::now();
    let union = |kind: &str, default: ConditionStatus| {
        union_condition(kind, default, &Inertia::none(), &part.part.conditions, now)
    };
    let upgradeable = union("Upgradeable", ConditionStatus::True);
    assert_eq!(upgradeable.status, ConditionStatus::False);
    assert!(
        upgradeable
            .message
            .unwrap_or_default()
            .contains("would lose attach, mount and provisioning")
    );
    for (kind, default) in [
        ("Available", ConditionStatus::True),
        ("Progressing", ConditionStatus::False),
        ("Degraded", ConditionStatus::False),
    ] {
        assert_eq!(
            union(kind, default).reason.as_deref(),
            Some(opkit::conditions::REASON_NO_DATA),
            "{kind} picked up a migration condition"
        );
    }
}

#[test]
fn node_lists_are_capped() {
    let pending: Vec<String> = (0..13).map(|i| format!("node-{i:02}")).collect();
    assert_eq!(
        capped(&pending),
        "node-00, node-01, node-02, node-03, node-04, node-05, node-06, node-07, node-08, \
         node-09 and 3 more"
    );
    let refs: Vec<&str> = pending.iter().map(String::as_str).collect();
    let part = status(&def(), &observed(&[], 20, &refs), &[], true).unwrap();
    let c = find(&part.part.conditions, NODES);
    assert_eq!(c.status, ConditionStatus::False);
    let message = c.message.unwrap();
    assert!(
        message.starts_with("13 of 20 nodes have not migrated kubernetes.io/gce-pd"),
        "{message}"
    );
    assert!(message.ends_with("node-09 and 3 more"), "{message}");
    let none = status(&def(), &observed(&[], 0, &[]), &[], true).unwrap();
    assert_eq!(
        find(&none.part.conditions, NODES).status,
        ConditionStatus::Unknown
    );
}

#[test]
fn migrated_plugins_annotation_is_a_comma_separated_list() {
    let annotations = |v: &str| {
        std::collections::BTreeMap::from([(MIGRATED_PLUGINS_ANNOTATION.to_string(), v.to_string())])
    };
    assert!(lists_plugin(
        &annotations("kubernetes.io/aws-ebs,kubernetes.io/gce-pd"),
        Plugin::GcePd
    ));
    assert!(!lists_plugin(
        &annotations("kubernetes.io/aws-ebs"),
        Plugin::GcePd
    ));
    assert!(!lists_plugin(&Default::default(), Plugin::GcePd));
}

#[test]
fn an_in_tree_default_class_gets_the_csi_class_suggested() {
    let class = |name: &str, provisioner: &str| -> std::sync::Arc<StorageClass> {
        std::sync::Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": name, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
                "provisioner": provisioner}))
            .unwrap(),
        )
    };
    let part = status(
        &def(),
        &observed(&[], 1, &[]),
        &[class("standard", "kubernetes.io/gce-pd")],
        true,
    )
    .unwrap();
    let c = find(&part.part.conditions, DEFAULT_CLASS);
    assert_eq!(c.status, ConditionStatus::True);
    let message = c.message.unwrap();
    assert!(
        message.contains("default StorageClass standard"),
        "{message}"
    );
    assert!(message.contains("standard-csi the default"), "{message}");
    let part = status(
        &def(),
        &observed(&[], 1, &[]),
        &[class("fast", "pd.csi.storage.gke.io")],
        true,
    )
    .unwrap();
    assert_eq!(
        find(&part.part.conditions, DEFAULT_CLASS).status,
        ConditionStatus::False
    );
}

// The operator on the in-process API server.

fn start(cluster: &Cluster) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let settling = metrics.settling(&driver_operator::operator_name(&def()));
    Background::spawn(|shutdown| async move {
        driver_operator::run(
            client,
            def(),
            Settings {
                env: [("DRIVER_IMAGE".to_owned(), "example.com/pd:1".to_owned())].into(),
                instance: Some("gcp-pd-operator-0".into()),
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

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

async fn create<K>(client: &Client, value: Value)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// An OpenShift cluster on GCP, three nodes, the workload simulation running and the
/// ClusterCSIDriver Managed.
async fn openshift() -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        if ["ClusterCSIDriver", "Infrastructure", "Proxy"].contains(&crd.spec.names.kind.as_str()) {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}
    });
    create::<api::config_v1::Infrastructure>(&admin, infrastructure.clone()).await;
    Api::<api::config_v1::Infrastructure>::all(admin.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    create::<Namespace>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    for node in ["node-a", "node-b", "node-c"] {
        cluster.add_node(node, true);
    }
    cluster.simulate_workloads(SimConfig::default());
    create::<ClusterCSIDriver>(
        &admin,
        json!({"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
               "metadata": {"name": DRIVER}, "spec": {"managementState": "Managed"}}),
    )
    .await;
    (cluster, admin)
}

async fn in_tree_pv(client: &Client, name: &str, source: Value, annotations: Value) {
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]});
    spec.as_object_mut()
        .unwrap()
        .extend(source.as_object().unwrap().clone());
    create::<PersistentVolume>(
        client,
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": name, "annotations": annotations}, "spec": spec}),
    )
    .await;
}

async fn csi_node(client: &Client, name: &str, migrated: Option<&str>) {
    let annotations = match migrated {
        Some(list) => json!({MIGRATED_PLUGINS_ANNOTATION: list}),
        None => json!({}),
    };
    create::<CSINode>(
        client,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
               "metadata": {"name": name, "annotations": annotations}, "spec": {"drivers": []}}),
    )
    .await;
}

async fn annotate_csi_node(client: &Client, name: &str, list: &str) {
    Api::<CSINode>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {MIGRATED_PLUGINS_ANNOTATION: list}}}),
            ),
        )
        .await
        .unwrap();
}

async fn condition(client: &Client, type_: &str) -> Option<OperatorCondition> {
    let driver = Api::<ClusterCSIDriver>::all(client.clone())
        .get_opt(DRIVER)
        .await
        .unwrap()?;
    driver.status?.condition(type_).cloned()
}

/// Waits for `type_` to have `status` and a message containing `text`; returns the message.
async fn condition_says(client: &Client, type_: &str, status: &str, text: &str) -> String {
    eventually(&format!("{type_}={status} saying {text:?}"), async || {
        condition(client, type_)
            .await
            .filter(|c| c.status.to_string() == status)
            .map(|c| c.message.unwrap_or_default())
            .filter(|m| m.contains(text))
    })
    .await
}

/// Waits until the operator has converged: its latest pass wrote nothing, failed nothing and
/// had no change waiting.
async fn quiet(cluster: &Cluster, running: &Background) {
    running.converged(cluster, AGENT).await;
}

const GA_PLUGINS: &str = "kubernetes.io/aws-ebs,kubernetes.io/gce-pd";

#[tokio::test]
async fn reports_in_tree_volumes_half_migrated_nodes_and_an_in_tree_default() {
    let (cluster, admin) = openshift().await;
    in_tree_pv(
        &admin,
        "pv-gce-1",
        json!({"gcePersistentDisk": {"pdName": "disk-1"}}),
        json!({}),
    )
    .await;
    // Provisioned through migration: in-tree in form, annotated by the PV controller.
    in_tree_pv(
        &admin,
        "pv-gce-2",
        json!({"gcePersistentDisk": {"pdName": "disk-2"}}),
        json!({"pv.kubernetes.io/migrated-to": DRIVER}),
    )
    .await;
    // Another plugin's volume is not this driver's business.
    in_tree_pv(
        &admin,
        "pv-ebs",
        json!({"awsElasticBlockStore": {"volumeID": "vol-1"}}),
        json!({}),
    )
    .await;
    create::<Namespace>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .await;
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "team", "annotations": {"pv.kubernetes.io/migrated-to": DRIVER}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "team")
        .create(&PostParams::default(), &claim)
        .await
        .unwrap();
    csi_node(&admin, "node-a", Some(GA_PLUGINS)).await;
    csi_node(&admin, "node-b", Some("kubernetes.io/aws-ebs")).await;
    csi_node(&admin, "node-c", None).await;
    create::<StorageClass>(
        &admin,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
               "provisioner": "kubernetes.io/gce-pd"}),
    )
    .await;
    let running = start(&cluster);

    let volumes = condition_says(&admin, VOLUMES, "True", "pv-gce-1, pv-gce-2").await;
    assert_eq!(
        volumes,
        "pd.csi.storage.gke.io serves 2 in-tree PersistentVolumes of kubernetes.io/gce-pd through \
         CSI migration: pv-gce-1, pv-gce-2; 1 PersistentVolumeClaim is annotated \
         pv.kubernetes.io/migrated-to: team/data; 1 StorageClass of kubernetes.io/gce-pd \
         provisions through it: standard"
    );
    let nodes = condition_says(&admin, NODES, "False", "node-b, node-c").await;
    assert!(
        nodes.starts_with("2 of 3 nodes have not migrated"),
        "{nodes}"
    );
    condition_says(
        &admin,
        DEFAULT_CLASS,
        "True",
        "consider making the CSI class standard-csi",
    )
    .await;
    condition_says(
        &admin,
        UPGRADEABLE,
        "True",
        "in-tree volumes of kubernetes.io/gce-pd depend on pd.csi.storage.gke.io, which is available",
    )
    .await;
    // The admin's in-tree default is left alone.
    let standard = Api::<StorageClass>::all(admin.clone())
        .get("standard")
        .await
        .unwrap();
    assert_eq!(
        standard.metadata.annotations.unwrap()[DEFAULT_CLASS_ANNOTATION],
        "true"
    );

    // Changes that do not move the figures write nothing.
    quiet(&cluster, &running).await;
    cluster.clear_requests();
    Api::<PersistentVolume>::all(admin.clone())
        .patch(
            "pv-ebs",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "1"}}})),
        )
        .await
        .unwrap();
    Api::<CSINode>::all(admin.clone())
        .patch(
            "node-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "1"}}})),
        )
        .await
        .unwrap();
    // Both changes reach the operator (its watches are drained) and it settles.
    quiet(&cluster, &running).await;
    assert_eq!(
        cluster.count_writes(AGENT),
        0,
        "an unrelated change rewrote the status"
    );

    // The nodes finish migrating, one by one.
    annotate_csi_node(&admin, "node-b", GA_PLUGINS).await;
    let nodes = condition_says(&admin, NODES, "False", "1 of 3 nodes").await;
    assert!(nodes.ends_with(": node-c"), "{nodes}");
    annotate_csi_node(&admin, "node-c", GA_PLUGINS).await;
    condition_says(&admin, NODES, "True", "all 3 nodes").await;
    // The last in-tree volume goes.
    for pv in ["pv-gce-1", "pv-gce-2"] {
        Api::<PersistentVolume>::all(admin.clone())
            .delete(pv, &Default::default())
            .await
            .unwrap();
    }
    condition_says(
        &admin,
        VOLUMES,
        "False",
        "no PersistentVolume of kubernetes.io/gce-pd",
    )
    .await;
    eventually(
        "Upgradeable silent once no volume depends on the driver",
        async || {
            condition(&admin, UPGRADEABLE).await.filter(|c| {
                c.status == ConditionStatus::True
                    && c.message.as_deref().unwrap_or_default().is_empty()
            })
        },
    )
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_driver_going_unavailable_blocks_upgrades_while_in_tree_volumes_exist() {
    let (cluster, admin) = openshift().await;
    in_tree_pv(
        &admin,
        "pv-gce-1",
        json!({"gcePersistentDisk": {"pdName": "disk-1"}}),
        json!({}),
    )
    .await;
    for node in ["node-a", "node-b", "node-c"] {
        csi_node(&admin, node, Some(GA_PLUGINS)).await;
    }
    let running = start(&cluster);
    condition_says(&admin, VOLUMES, "True", "pv-gce-1").await;
    condition_says(&admin, NODES, "True", "all 3 nodes").await;
    eventually(
        "Upgradeable=True once the driver is available",
        async || {
            condition(&admin, UPGRADEABLE)
                .await
                .filter(|c| c.status == ConditionStatus::True)
        },
    )
    .await;
    quiet(&cluster, &running).await;

    // Every node goes NotReady: no node pod is available, so the driver is not.
    for node in ["node-a", "node-b", "node-c"] {
        cluster.set_node_ready(node, false).unwrap();
    }
    let message = condition_says(&admin, UPGRADEABLE, "False", "pv-gce-1").await;
    assert_eq!(
        message,
        "pd.csi.storage.gke.io is not available and serves 1 in-tree PersistentVolume of \
         kubernetes.io/gce-pd, which would lose attach, mount and provisioning until it is: \
         pv-gce-1"
    );
    assert_eq!(
        condition(&admin, UPGRADEABLE)
            .await
            .unwrap()
            .reason
            .as_deref(),
        Some("InTreeVolumesNeedDriver")
    );

    // Back.
    for node in ["node-a", "node-b", "node-c"] {
        cluster.set_node_ready(node, true).unwrap();
    }
    eventually("Upgradeable=True again", async || {
        condition(&admin, UPGRADEABLE)
            .await
            .filter(|c| c.status == ConditionStatus::True)
    })
    .await;
    quiet(&cluster, &running).await;
    running.stop().await;
}
