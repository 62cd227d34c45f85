//! The cluster the e2e tests run against: its admin configuration and client, from the
//! kubeconfig that `E2E_KUBECONFIG` names, and the operators' logs. It uses no other file of
//! the harness, so the identities and the waits can build on it.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The environment variable naming the kubeconfig of the cluster to test against.
pub const KUBECONFIG_ENV: &str = "E2E_KUBECONFIG";

/// The environment variable naming the kubeconfig of a second cluster, the guest of the
/// hosted control plane tests (the first is then the management cluster).
pub const GUEST_KUBECONFIG_ENV: &str = "E2E_GUEST_KUBECONFIG";

/// The environment variable with the log filter of the operators under test (e.g.
/// `csi=debug,opkit=debug`); unset, they log nothing.
pub const LOG_ENV: &str = "E2E_LOG";

/// Sends the in-process operators' logs to the test's output, filtered by [`LOG_ENV`], once
/// per process; nothing when it is unset.
fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var(LOG_ENV) {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
    });
}

/// The admin configuration of the e2e cluster, or a message saying how to provide one.
pub async fn admin_config() -> Result<Config, String> {
    config_from(
        KUBECONFIG_ENV,
        "the kubeconfig of a disposable cluster to run the e2e tests",
    )
    .await
}

/// The admin configuration of the cluster the kubeconfig in `env` names, or a message saying
/// to set it to `what`.
async fn config_from(env: &str, what: &str) -> Result<Config, String> {
    let path = std::env::var(env).map_err(|_| format!("set {env} to {what}"))?;
    let kubeconfig = Kubeconfig::read_from(&path).map_err(|e| format!("reading {path}: {e}"))?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("using {path}: {e}"))
}

/// The admin configuration of the guest cluster of the hosted control plane tests.
pub async fn guest_admin_config() -> Result<Config, String> {
    config_from(
        GUEST_KUBECONFIG_ENV,
        "the kubeconfig of a second disposable cluster (the guest) to run the hosted control plane tests",
    )
    .await
}

/// The admin client of the guest cluster of the hosted control plane tests ([`admin`]'s is the
/// management cluster). Panics with how to provide one when none is given.
pub async fn guest_admin() -> Client {
    init_logging();
    let config = guest_admin_config().await.unwrap_or_else(|m| panic!("{m}"));
    Client::try_from(config).unwrap_or_else(|e| panic!("connecting to the guest cluster: {e}"))
}

/// The admin client of the e2e cluster: for setting the scene and cleaning up, never for the
/// operators under test. Panics with how to provide a cluster when none is given.
pub async fn admin() -> Client {
    init_logging();
    let config = admin_config().await.unwrap_or_else(|m| panic!("{m}"));
    Client::try_from(config).unwrap_or_else(|e| panic!("connecting to the e2e cluster: {e}"))
}
