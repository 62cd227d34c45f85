//! Taking over a GCP PD driver that OpenShift's Go operator installed: the cluster is seeded with
//! what that operator creates (its generated assets, `tests/fixtures/openshift/gcp-pd`, with the
//! values its run-time hooks add), written as it writes them (plain creates, field manager
//! `gcp-pd-csi-driver-operator`). Then our operator starts on the same cluster.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

#[path = "openshift_parity/fixtures.rs"]
mod fixtures;

use std::collections::BTreeMap;
use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use csi::operator::Settings;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster, SimConfig};

const NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "pd.csi.storage.gke.io";
const AGENT: &str = "gcp-pd-operator";
/// The field manager OpenShift's GCP PD operator writes as (its binary's name).
const FORMER: &str = "gcp-pd-csi-driver-operator";
const INFRA: &str = "demo-x7k2p";

/// The images of the release payload, by OpenShift's environment variable.
fn images() -> BTreeMap<String, String> {
    [
        "DRIVER_IMAGE",
        "PROVISIONER_IMAGE",
        "ATTACHER_IMAGE",
        "RESIZER_IMAGE",
        "SNAPSHOTTER_IMAGE",
        "NODE_DRIVER_REGISTRAR_IMAGE",
        "LIVENESS_PROBE_IMAGE",
        "KUBE_RBAC_PROXY_IMAGE",
    ]
    .into_iter()
    .map(|var| {
        let name = var
            .trim_end_matches("_IMAGE")
            .to_lowercase()
            .replace('_', "-");
        (
            var.to_owned(),
            format!("quay.io/openshift/origin-{name}:4.22"),
        )
    })
    .collect()
}

/// What OpenShift's GCP PD operator has written on an HA cluster in a regular region with the
/// default (Intermediate) TLS profile: its assets with every placeholder substituted, plus what
/// its hooks add (2 replicas, the cluster's `--extra-labels`, library-go's spec hashes), without
/// the Hyperdisk class it selects only in GCP Dedicated regions.
fn openshift_objects() -> Vec<Value> {
    let tls = csi::tls::serving_tls(None).unwrap();
    let mut substitutions =
        fixtures::common_substitutions(NS, &tls.cipher_suites, tls.min_version.as_deref().unwrap());
    for (var, image) in images() {
        substitutions.push((format!("${{{var}}}"), image));
    }
    let mut objects = fixtures::load("gcp-pd", &substitutions);
    objects.retain(|o| {
        o["metadata"]["name"] != "hyperdisk-balanced" && o["kind"] != "CredentialsRequest"
    });
    for o in &mut objects {
        if matches!(
            o["kind"].as_str(),
            Some("Deployment" | "DaemonSet" | "Service" | "CSIDriver")
        ) {
            o["metadata"]["annotations"]["operator.openshift.io/spec-hash"] =
                json!("0123456789abcdef");
        }
        if o["kind"] == "Deployment" {
            o["spec"]["replicas"] = json!(2);
            let driver = &mut o["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(driver["name"], "csi-driver");
            driver["args"].as_array_mut().unwrap().push(json!(format!(
                "--extra-labels=kubernetes-io-cluster-{INFRA}=owned"
            )));
        }
    }
    objects
}

async fn create_crd(client: &Client, crd: CustomResourceDefinition) {
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

/// A CRD accepting any object, for the optional kinds (ServiceMonitor, VolumeSnapshotClass).
fn open_crd(group: &str, kind: &str, plural: &str, namespaced: bool) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": if namespaced { "Namespaced" } else { "Cluster" },
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    match lower.as_str() {
        "storageclass" | "volumesnapshotclass" => format!("{lower}es"),
        "poddisruptionbudget" => "poddisruptionbudgets".to_owned(),
        _ => format!("{lower}s"),
    }
}

fn api_for(client: &Client, o: &Value) -> Api<DynamicObject> {
    let (group, version) = match o["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), o["apiVersion"].as_str().unwrap().to_owned()),
    };
    let kind = o["kind"].as_str().unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, &version, kind),
        &plural(kind),
    );
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// An OpenShift cluster on GCP with three nodes, the workload simulation running, and GCP PD as
/// OpenShift's operator left it.
async fn cluster_taken_over_from_openshift() -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    for crd in api::crds::all() {
        if ["ClusterCSIDriver", "Infrastructure", "Proxy"].contains(&crd.spec.names.kind.as_str()) {
            create_crd(&admin, crd).await;
        }
    }
    create_crd(
        &admin,
        <api::config_v1::APIServer as kube::CustomResourceExt>::crd(),
    )
    .await;
    create_crd(
        &admin,
        open_crd(
            "monitoring.coreos.com",
            "ServiceMonitor",
            "servicemonitors",
            true,
        ),
    )
    .await;
    create_crd(
        &admin,
        open_crd(
            "snapshot.storage.k8s.io",
            "VolumeSnapshotClass",
            "volumesnapshotclasses",
            false,
        ),
    )
    .await;
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": INFRA, "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}
    });
    let infrastructures: Api<api::config_v1::Infrastructure> = Api::all(admin.clone());
    infrastructures
        .create(
            &PostParams::default(),
            &serde_json::from_value(infrastructure.clone()).unwrap(),
        )
        .await
        .unwrap();
    infrastructures
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<ClusterCSIDriver>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": DRIVER}, "spec": {"managementState": "Managed"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    for node in ["node-a", "node-b", "node-c"] {
        cluster.add_node(node, true);
    }
    cluster.simulate_workloads(SimConfig::default());

    let former = cluster.client_with_agent(FORMER);
    for o in openshift_objects() {
        let object: DynamicObject = serde_json::from_value(o.clone()).unwrap();
        api_for(&former, &o)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("seeding {}: {e}", o["metadata"]["name"]));
    }
    (cluster, admin)
}

fn start(cluster: &Cluster) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let settled = (metrics.clone(), "gcp-pd-csi-driver-operator".to_owned());
    Background::spawn(|shutdown| async move {
        csi::operator::run(
            client,
            drivers::by_name("gcp-pd").unwrap(),
            Settings {
                env: images(),
                instance: Some("gcp-pd-operator-0".into()),
                operator_log_level: None,
            },
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(
        {
            let (metrics, controller) = settled.clone();
            move |n| metrics.settled_after(&controller, n)
        },
        move || settled.0.pass_state(&settled.1).started,
    )
}

const HEALTHY: &[(&str, &str)] = &[
    ("GCPPDDriverControllerServiceControllerAvailable", "True"),
    ("GCPPDDriverControllerServiceControllerProgressing", "False"),
    ("GCPPDDriverControllerServiceControllerDegraded", "False"),
    ("GCPPDDriverNodeServiceControllerAvailable", "True"),
    ("GCPPDDriverNodeServiceControllerProgressing", "False"),
    ("GCPPDDriverNodeServiceControllerDegraded", "False"),
    ("GCPPDDriverStaticResourcesControllerDegraded", "False"),
    ("StorageClassControllerDegraded", "False"),
    ("ManagementStateDegraded", "False"),
];

/// Waits until every condition of [`HEALTHY`] has its healthy status, and reports the ones
/// that never get there.
async fn healthy(client: &Client) {
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    let conditions = async || {
        let driver = drivers.get(DRIVER).await.unwrap();
        let status = driver.status.unwrap_or_default();
        HEALTHY
            .iter()
            .map(|(type_, _)| {
                let c = status.condition(type_);
                (
                    *type_,
                    c.map(|c| (c.status.to_string(), c.message.clone().unwrap_or_default())),
                )
            })
            .collect::<Vec<_>>()
    };
    let ok = testkit::eventually("healthy conditions", Duration::from_secs(60), async || {
        let seen = conditions().await;
        seen.iter()
            .zip(HEALTHY)
            .all(|((_, c), (_, want))| c.as_ref().is_some_and(|(s, _)| s == want))
            .then_some(())
    });
    ok.await;
}

fn template(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap()["spec"]["template"].clone()
}

fn former_entries(meta: &Value) -> Vec<Value> {
    meta["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == FORMER)
        .cloned()
        .collect()
}

#[tokio::test]
async fn takes_over_openshifts_gcp_pd_without_errors_duplicates_orphans_or_restarts() {
    let (cluster, admin) = cluster_taken_over_from_openshift().await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let daemon_sets: Api<DaemonSet> = Api::namespaced(admin.clone(), NS);
    let controller_before = deployments
        .get("gcp-pd-csi-driver-controller")
        .await
        .unwrap();
    let node_before = daemon_sets.get("gcp-pd-csi-driver-node").await.unwrap();

    let running = start(&cluster);
    healthy(&admin).await;
    // Converged: the operator stops writing (this fails if it never does, e.g. an apply that
    // keeps failing).
    running.converged(&cluster, AGENT).await;

    // Every object OpenShift's operator had written is ours now, whole: no field is left to
    // the former manager, and each carries our operand label.
    for o in openshift_objects() {
        let served = api_for(&admin, &o)
            .get(o["metadata"]["name"].as_str().unwrap())
            .await
            .unwrap();
        let meta = serde_json::to_value(&served.metadata).unwrap();
        let key = format!("{}/{}", o["kind"], o["metadata"]["name"]);
        assert_eq!(former_entries(&meta), Vec::<Value>::new(), "{key}");
        assert_eq!(
            meta["labels"]["csi.storage.openshift.io/driver"], "gcp-pd",
            "{key} was not adopted"
        );
    }

    // The metrics Service has OpenShift's four ports, once each.
    let service = Api::<Service>::namespaced(admin.clone(), NS)
        .get("gcp-pd-csi-driver-controller-metrics")
        .await
        .unwrap();
    let ports: Vec<(String, i32)> = service
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap(), p.port))
        .collect();
    assert_eq!(
        ports,
        [
            ("provisioner-m".to_owned(), 9202),
            ("attacher-m".to_owned(), 9203),
            ("resizer-m".to_owned(), 9204),
            ("snapshotter-m".to_owned(), 9205)
        ]
    );

    // No duplicate and no stray operand: the namespace holds the one controller and node
    // workload, and the StorageClasses of the driver are OpenShift's two.
    assert_eq!(
        deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        daemon_sets
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let classes: Vec<String> =
        Api::<k8s_openapi::api::storage::v1::StorageClass>::all(admin.clone())
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|c| c.provisioner == DRIVER)
            .map(|c| c.metadata.name.unwrap())
            .collect();
    assert_eq!(classes, ["ssd-csi", "standard-csi"]);

    // The pod templates are what OpenShift's operator wrote: no driver pod restarts.
    let controller_after = deployments
        .get("gcp-pd-csi-driver-controller")
        .await
        .unwrap();
    let node_after = daemon_sets.get("gcp-pd-csi-driver-node").await.unwrap();
    assert_eq!(template(&controller_after), template(&controller_before));
    assert_eq!(template(&node_after), template(&node_before));

    running.stop().await;
}
