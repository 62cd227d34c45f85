//! Helpers for the end-to-end tests: a client for the cluster named by `E2E_KUBECONFIG`.
//!
//! The tests are `#[ignore]`d so that `cargo test --workspace` stays offline; run them against
//! a disposable cluster with
//! `E2E_KUBECONFIG=/path/to/kubeconfig cargo test -p e2e -- --ignored --test-threads 1`.
//! `storage_operator_scenarios` removes what it created; the others leave their objects for
//! inspection. To check the tests themselves without a cluster, point them at testkit served
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
