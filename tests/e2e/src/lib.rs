//! Helpers for the end-to-end tests: a client for the cluster named by `E2E_KUBECONFIG`.
//!
//! The tests are `#[ignore]`d so that `cargo test --workspace` stays offline; run them against
//! a disposable cluster with
//! `E2E_KUBECONFIG=/path/to/kubeconfig cargo test -p e2e -- --ignored --test-threads 1`.
//! Each test removes the objects that would stop the others from running (ClusterCSIDrivers, a
//! declared Infrastructure, its namespaces); the scenario tests remove everything they created. To check the tests themselves without a cluster, point them at testkit served
//! over loopback: `cargo run -p testkit --example serve` prints a kubeconfig path to use as
//! `E2E_KUBECONFIG`.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The environment variable naming the kubeconfig of the cluster to test against.
pub const KUBECONFIG_ENV: &str = "E2E_KUBECONFIG";

/// A client for the e2e cluster, or a message saying how to provide one.
pub async fn client() -> Result<Client, String> {
    let path = std::env::var(KUBECONFIG_ENV).map_err(|_| {
        format!(
            "set {KUBECONFIG_ENV} to the kubeconfig of a disposable cluster to run the e2e tests"
        )
    })?;
    let kubeconfig = Kubeconfig::read_from(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("using {path}: {e}"))?;
    Client::try_from(config).map_err(|e| format!("connecting with {path}: {e}"))
}

/// Polls `check` every half second for up to two minutes; panics naming `what` on time-out.
pub async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..240 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Server-side applies a CRD (idempotent; a newer copy of ours wins).
pub async fn apply_crd(
    client: &Client,
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    let name = crd.metadata.name.clone().unwrap_or_default();
    kube::Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(crd),
        )
        .await
        .unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
}

/// Declares the platform GCP (an Infrastructure `cluster`, and its CRD when missing) unless the
/// cluster already says what it is. Returns whether it did, so the test can remove it.
pub async fn ensure_gcp(client: &Client) -> bool {
    ensure_platform(client, serde_json::json!({"type": "GCP"})).await
}

/// Declares the platform of `platform_status` (an Infrastructure `cluster`, and its CRD when
/// missing) unless the cluster already says what it is. Returns whether it did, so the test
/// can remove it.
pub async fn ensure_platform(client: &Client, platform_status: serde_json::Value) -> bool {
    use api::config_v1::Infrastructure;
    use kube::api::{Patch, PatchParams};
    let served = opkit::discovery::served_resources(client, "config.openshift.io/v1")
        .await
        .unwrap_or_else(|e| panic!("discovering config.openshift.io: {e}"));
    let infrastructures: kube::Api<Infrastructure> = kube::Api::all(client.clone());
    if served.contains("infrastructures")
        && infrastructures
            .get_opt("cluster")
            .await
            .unwrap_or_else(|e| panic!("reading Infrastructure/cluster: {e}"))
            .is_some()
    {
        return false;
    }
    apply_crd(client, &<Infrastructure as kube::CustomResourceExt>::crd()).await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let infrastructure = serde_json::json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "e2e", "platformStatus": platform_status}
    });
    for status in [false, true] {
        let params = PatchParams::apply("e2e");
        let patch = Patch::Apply(&infrastructure);
        let result = if status {
            infrastructures
                .patch_status("cluster", &params, &patch)
                .await
        } else {
            infrastructures.patch("cluster", &params, &patch).await
        };
        result.unwrap_or_else(|e| panic!("declaring Infrastructure/cluster: {e}"));
    }
    true
}

/// Plays the kubelet and controllers where nothing runs pods: every replica of Deployment
/// `controller` and DaemonSet `node` in `ns` available.
pub async fn simulate_workloads(client: &Client, ns: &str, controller: &str, node: &str) {
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client.clone(), ns);
    let d = deployments
        .get(controller)
        .await
        .unwrap_or_else(|e| panic!("reading Deployment {ns}/{controller}: {e}"));
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    deployments
        .patch_status(
            controller,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"status": {
                "observedGeneration": d.metadata.generation, "replicas": replicas,
                "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("patching the status of Deployment {ns}/{controller}: {e}"));
    let daemon_sets: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> =
        kube::Api::namespaced(client.clone(), ns);
    let ds = daemon_sets
        .get(node)
        .await
        .unwrap_or_else(|e| panic!("reading DaemonSet {ns}/{node}: {e}"));
    daemon_sets
        .patch_status(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"status": {
                "observedGeneration": ds.metadata.generation, "currentNumberScheduled": 1,
                "desiredNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 1,
                "numberAvailable": 1, "updatedNumberScheduled": 1}})),
        )
        .await
        .unwrap_or_else(|e| panic!("patching the status of DaemonSet {ns}/{node}: {e}"));
}
