//! Shared helpers of the per-driver loop tests on testkit (OpenStack Cinder, vSphere,
//! Manila): an OpenShift cluster of a given platform, the driver operator in the background,
//! condition and generation probes.

#![allow(clippy::unwrap_used, dead_code)]

use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use driver_operator::{Extras, ProbeConfig, Settings};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster, SimConfig};

/// The operand namespace.
pub const NS: &str = "openshift-cluster-csi-drivers";
/// Manila's operand namespace (its own, as on OpenShift).
pub const MANILA_NS: &str = "openshift-manila-csi-driver";
/// The user agent of the operator under test.
pub const AGENT: &str = "driver-operator-under-test";

/// Starts the driver operator of `def` (with `probe`, if any) in the background.
pub fn start(cluster: &Cluster, def: csi_kit::DriverDef, probe: Option<ProbeConfig>) -> Background {
    start_with_extras(cluster, def, move |_| Extras {
        probe,
        tasks: Vec::new(),
    })
}

/// Starts the driver operator of `def` in the background with the extras `extras` makes from
/// the operator's client.
pub fn start_with_extras(
    cluster: &Cluster,
    def: csi_kit::DriverDef,
    extras: impl FnOnce(Client) -> Extras + Send + 'static,
) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let settling = metrics.settling(&driver_operator::operator_name(&def));
    Background::spawn(|shutdown| async move {
        let extras = extras(client.clone());
        driver_operator::run_with_extras(
            client,
            def,
            Settings {
                env: [("DRIVER_IMAGE".to_owned(), "example.com/driver:1".to_owned())].into(),
                instance: Some("operator-0".into()),
                ..Settings::default()
            },
            extras,
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(settling)
}

/// Waits up to a minute for `check` (the machines are slow and shared).
pub async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

async fn install_crds(client: &Client, kinds: &[&str]) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds::all() {
        if kinds.contains(&crd.spec.names.kind.as_str()) {
            api.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
}

/// Creates a cluster-scoped object from JSON.
pub async fn create_cluster_scoped<K>(client: &Client, value: Value)
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

/// An OpenShift cluster on `platform_status` (e.g. `{"type": "OpenStack"}`), highly
/// available, with the operand and `openshift-config` namespaces, three nodes and the
/// workload simulation running.
pub async fn openshift(platform_status: Value) -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Infrastructure", "Proxy"]).await;
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": platform_status}
    });
    create_cluster_scoped::<api::config_v1::Infrastructure>(&admin, infrastructure.clone()).await;
    Api::<api::config_v1::Infrastructure>::all(admin.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    for ns in [NS, MANILA_NS, "openshift-config"] {
        create_cluster_scoped::<Namespace>(
            &admin,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    for node in ["node-a", "node-b", "node-c"] {
        cluster.add_node(node, true);
    }
    cluster.simulate_workloads(SimConfig::default());
    (cluster, admin)
}

/// Creates the ClusterCSIDriver `name`, Managed.
pub async fn create_cluster_csi_driver(client: &Client, name: &str) {
    create_cluster_scoped::<ClusterCSIDriver>(
        client,
        json!({"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
               "metadata": {"name": name}, "spec": {"managementState": "Managed"}}),
    )
    .await;
}

/// Creates or replaces a ConfigMap.
pub async fn put_config_map(client: &Client, ns: &str, name: &str, data: Value) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns}, "data": data
    }))
    .unwrap();
    if api.get_opt(name).await.unwrap().is_some() {
        api.replace(name, &PostParams::default(), &cm)
            .await
            .unwrap();
    } else {
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
}

/// Creates a Secret of the operand namespace with one key (base64 value).
pub async fn create_secret(client: &Client, name: &str, key: &str, base64: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS}, "data": {key: base64}
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// A condition of the ClusterCSIDriver `driver`: (status, reason, message).
pub async fn condition(
    client: &Client,
    driver: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let driver = Api::<ClusterCSIDriver>::all(client.clone())
        .get_opt(driver)
        .await
        .unwrap()?;
    let c = driver.status?.condition(type_)?.clone();
    Some((
        c.status.to_string(),
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

/// Waits until condition `type_` of `driver` has `status`; returns (reason, message).
pub async fn condition_becomes(
    client: &Client,
    driver: &str,
    type_: &str,
    status: &str,
) -> (String, String) {
    eventually(&format!("{type_}={status}"), async || {
        condition(client, driver, type_)
            .await
            .filter(|(s, _, _)| s == status)
            .map(|(_, r, m)| (r, m))
    })
    .await
}

/// Waits until the workloads of `prefix` are available, not progressing nor degraded.
pub async fn healthy(client: &Client, driver: &str, prefix: &str) {
    for (suffix, status) in [
        ("DriverControllerServiceControllerAvailable", "True"),
        ("DriverControllerServiceControllerProgressing", "False"),
        ("DriverControllerServiceControllerDegraded", "False"),
        ("DriverNodeServiceControllerAvailable", "True"),
        ("DriverNodeServiceControllerProgressing", "False"),
        ("DriverStaticResourcesControllerDegraded", "False"),
    ] {
        condition_becomes(client, driver, &format!("{prefix}{suffix}"), status).await;
    }
}

/// Waits until the operator has converged: its latest pass wrote nothing, failed nothing and
/// had no change waiting.
pub async fn quiet(cluster: &Cluster, running: &Background) {
    running.converged(cluster, AGENT).await;
}

/// The generations of the controller Deployment and node DaemonSet named `prefix`-controller
/// and `prefix`-node.
pub async fn generations(client: &Client, prefix: &str) -> (i64, i64) {
    let d = Api::<Deployment>::namespaced(client.clone(), NS)
        .get(&format!("{prefix}-controller"))
        .await
        .unwrap();
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get(&format!("{prefix}-node"))
        .await
        .unwrap();
    (
        d.metadata.generation.unwrap(),
        ds.metadata.generation.unwrap(),
    )
}
