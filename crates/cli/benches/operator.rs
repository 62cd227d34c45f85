//! Figures for the cluster storage operator on testkit (a bench, not a test: it prints numbers
//! and asserts nothing about time). Targets from issue #5:
//! - Infrastructure present -> driver operator Deployment and ClusterCSIDriver created: < 200 ms;
//! - idle: 0 writes and no polling;
//! - resident memory of `storage-operator run`: < 20 MiB.
//!
//! Run with `cargo bench -p cli --bench operator`.

#![allow(clippy::unwrap_used)] // a bench: a panic is a failed run

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use api::operator_v1::{ClusterCSIDriver, Storage};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;
use storage_operator::plan::Settings;

async fn openshift_cluster() -> (testkit::Cluster, Client) {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "bench-1", "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "r"}}}
    });
    let infra_api: Api<api::config_v1::Infrastructure> = Api::all(admin.clone());
    infra_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(infrastructure.clone()).unwrap(),
        )
        .await
        .unwrap();
    infra_api
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    let storage: Storage = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "Storage", "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    Api::<Storage>::all(admin.clone())
        .create(&PostParams::default(), &storage)
        .await
        .unwrap();
    (cluster, admin)
}

async fn converged(admin: &Client) -> bool {
    let deployments: Api<Deployment> =
        Api::namespaced(admin.clone(), "openshift-cluster-csi-drivers");
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    deployments
        .get_opt("gcp-pd-csi-driver-operator")
        .await
        .unwrap()
        .is_some()
        && drivers
            .get_opt("pd.csi.storage.gke.io")
            .await
            .unwrap()
            .is_some()
}

async fn in_process() {
    let mut starts = Vec::new();
    let mut requests = Vec::new();
    for _ in 0..5 {
        let (cluster, admin) = openshift_cluster().await;
        let client = cluster.client_with_agent("storage-operator");
        let settings = Settings {
            operator_image: "example.com/so:1".into(),
            env: Default::default(),
            version: "1".into(),
            operator_log_level: None,
            metrics_tls: None,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let started = Instant::now();
        let task = tokio::spawn(storage_operator::operator::run(
            client,
            settings,
            Metrics::new(),
            Readiness::default(),
            async {
                let _ = stopped.await;
            },
        ));
        while !converged(&admin).await {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        starts.push(started.elapsed());
        requests.push(
            cluster
                .requests()
                .iter()
                .filter(|r| r.from_client("storage-operator"))
                .count(),
        );

        // Idle: let the status settle, then count what ten quiet seconds cost.
        tokio::time::sleep(Duration::from_secs(1)).await;
        cluster.clear_requests();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let mine: Vec<_> = cluster
            .requests()
            .into_iter()
            .filter(|r| r.from_client("storage-operator"))
            .collect();
        let writes = mine.iter().filter(|r| r.is_write()).count();
        let reads = mine
            .iter()
            .filter(|r| r.is_read() && r.verb != "watch")
            .count();
        println!("idle 10 s: {writes} writes, {reads} non-watch reads");
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
    }
    starts.sort();
    println!(
        "Infrastructure present -> driver operator Deployment + ClusterCSIDriver (in-process, incl. discovery and cache sync): min {:?}, median {:?}, max {:?} (target < 200 ms)",
        starts[0],
        starts[starts.len() / 2],
        starts[starts.len() - 1]
    );
    println!("requests until then: {requests:?}");
}

async fn driver_in_process() {
    let mut times = Vec::new();
    let mut requests = Vec::new();
    for _ in 0..5 {
        let (cluster, admin) = openshift_cluster().await;
        let driver: ClusterCSIDriver = serde_json::from_value(json!({
            "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
            "metadata": {"name": "pd.csi.storage.gke.io"}, "spec": {"managementState": "Managed"}
        }))
        .unwrap();
        Api::<ClusterCSIDriver>::all(admin.clone())
            .create(&PostParams::default(), &driver)
            .await
            .unwrap();
        let namespace: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": "openshift-cluster-csi-drivers"}}))
                .unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let started = Instant::now();
        let task = tokio::spawn(driver_operator::run(
            cluster.client_with_agent("gcp-pd-operator"),
            drivers::by_name("gcp-pd").unwrap(),
            driver_operator::Settings::default(),
            Metrics::new(),
            Readiness::default(),
            async {
                let _ = stopped.await;
            },
        ));
        // The DaemonSet and the StorageClasses are applied last.
        let daemonsets: Api<k8s_openapi::api::apps::v1::DaemonSet> =
            Api::namespaced(admin.clone(), "openshift-cluster-csi-drivers");
        let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(admin.clone());
        while daemonsets
            .get_opt("gcp-pd-csi-driver-node")
            .await
            .unwrap()
            .is_none()
            || classes.get_opt("ssd-csi").await.unwrap().is_none()
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        times.push(started.elapsed());
        requests.push(
            cluster
                .requests()
                .iter()
                .filter(|r| r.from_client("gcp-pd-operator"))
                .count(),
        );
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
    }
    times.sort();
    println!(
        "ClusterCSIDriver present -> every GCP PD operand applied (in-process, incl. discovery and cache sync): min {:?}, median {:?}, max {:?} (target < 200 ms)",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1]
    );
    println!("driver operator requests until then: {requests:?}");
}

async fn resident_memory() {
    let (cluster, admin) = openshift_cluster().await;
    let kubeconfig = cluster.kubeconfig().await.unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "run",
            "--operator-image",
            "example.com/so:1",
            "--no-leader-election",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", kubeconfig.path())
        .env("LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if converged(&admin).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap_or("VmRSS: unknown");
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or("VmHWM: unknown");
    println!("storage-operator run, converged and idle: {rss}, peak {hwm} (target < 20 MiB)");
    child.kill().unwrap();
    child.wait().unwrap();

    // The driver operator the cluster storage operator started, as its Deployment runs it.
    let mut driver = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "driver",
            "gcp-pd",
            "--no-leader-election",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", kubeconfig.path())
        .env("LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let controllers: Api<Deployment> =
        Api::namespaced(admin.clone(), "openshift-cluster-csi-drivers");
    for _ in 0..600 {
        if controllers
            .get_opt("gcp-pd-csi-driver-controller")
            .await
            .unwrap()
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", driver.id())).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap_or("VmRSS: unknown");
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or("VmHWM: unknown");
    println!(
        "storage-operator driver gcp-pd, converged and idle: {rss}, peak {hwm} (Go operator: about 100 MiB)"
    );
    driver.kill().unwrap();
    driver.wait().unwrap();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        in_process().await;
        driver_in_process().await;
        resident_memory().await;
    });
}
