//! The end-to-end tests' harness: the cluster named by `E2E_KUBECONFIG`, the identities the
//! operators run as there, and the waits a real API server needs.
//!
//! The files, bottom to top (a file uses only those below it): `cluster.rs` (the kubeconfig,
//! the admin client, the logs), `link.rs` (a TCP link to an API server that a test can cut),
//! `identity.rs` (the operators' ServiceAccount clients and their refusals, directly or
//! through a link), this file (the waits, CRDs, the declared platform, [`Background`]), `install.rs`
//! and `cleanup.rs` (putting the operators' objects in place and taking them away), then
//! `cso.rs`, `driver.rs` and `node.rs` (what the tests start and check). `process.rs` (the
//! binary under test, with a token's kubeconfig) uses only this file's names; `scrape.rs`
//! (`/metrics` over HTTPS) none of them. `admission.rs`
//! (objects sent through admission) uses only this file's `MANAGER`. `suite.rs` (the
//! external storage suite's runner) uses none of them.
//!
//! The tests are `#[ignore]`d so that `cargo test --workspace` stays offline. `.ci/run` runs
//! them against the real control plane of `../shared/k8s` (kube-apiserver and
//! kube-controller-manager v1.36.2); by hand:
//!
//! ```sh
//! export E2E_KUBECONFIG=$(../shared/k8s/start.sh --kcm)
//! cargo test --workspace --no-fail-fast -- --ignored --test-threads 1
//! ../shared/k8s/stop.sh --clean
//! ```
//!
//! The hosted control plane tests (`hosted_admission.rs`) need a second cluster, the guest, its
//! kubeconfig as `E2E_GUEST_KUBECONFIG` (`start.sh --kcm` again); `E2E_KUBECONFIG`'s is then
//! the management cluster.
//!
//! `E2E_LOG` (a tracing filter such as `csi=debug,opkit=debug`) sends the in-process
//! operators' logs to the tests' output (with `--nocapture`).
//!
//! The tests of `on_a_node.rs` need pods that really run: a node (`../shared/k8s/node.sh`) and
//! the operator's image imported there, named by `E2E_OPERATOR_IMAGE` (see the README's Checks
//! section, or `.ci/run`, for the commands).
//!
//! What the harness guarantees every test:
//! - **Least privilege.** The operators under test run as their own ServiceAccounts, with the
//!   RBAC that `deploy/` (the cluster storage operator, the build controller) or the starter
//!   (a driver operator) creates, through TokenRequest tokens: never as the admin. Every 403
//!   any of them receives is recorded ([`Identity`]); [`wait_for`] names them when it gives up
//!   and [`Identity::assert_never_refused`] fails the test with the verb, path and identity.
//! - **Real-server waits.** CRDs are waited for until Established, deleted namespaces until
//!   they are gone (they pass through Terminating), and objects the test deletes until the API
//!   server no longer has them, so the next test starts clean.
//! - **No fighting the controllers.** Workload status belongs to kube-controller-manager and
//!   pod status to the kubelet; tests read them and assert what the operators make of them.

pub mod admission;
pub mod cleanup;
pub mod cluster;
pub mod cso;
pub mod driver;
pub mod identity;
pub mod install;
pub mod link;
pub mod node;
pub mod process;
pub mod scrape;
pub mod suite;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};

pub use cluster::{
    GUEST_KUBECONFIG_ENV, KUBECONFIG_ENV, LOG_ENV, admin, admin_config, guest_admin,
};
pub use identity::Identity;

/// The field manager of what the harness itself writes.
pub const MANAGER: &str = "e2e";

/// Polls `check` every half second for up to two minutes; panics naming `what`, and every
/// request the API server refused an operator meanwhile, on time-out.
pub async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..240 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let refused = identity::all_refusals();
    if refused.is_empty() {
        panic!("timed out waiting for {what}");
    }
    panic!(
        "timed out waiting for {what}; the API server refused:\n{}",
        refused.join("\n")
    );
}

/// Server-side applies a CRD (ours wins) and waits until the API server serves it
/// (`Established`).
pub async fn apply_crd(client: &Client, crd: &CustomResourceDefinition) {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
    wait_established(client, &name).await;
}

/// Waits until CRD `name` is `Established`.
pub async fn wait_established(client: &Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for(&format!("CRD {name} Established"), async || {
        let crd = crds.get_opt(name).await.ok()??;
        crd.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
}

/// Whether the cluster has any Node (the real node of `../shared/k8s/node.sh`, or a real
/// cluster's): without one no pod ever runs.
pub async fn has_nodes(client: &Client) -> bool {
    !Api::<Node>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .unwrap_or_else(|e| panic!("listing Nodes: {e}"))
        .items
        .is_empty()
}

/// `Infrastructure/cluster`'s `status.infrastructureName` (the cluster's or the one
/// [`ensure_platform`] declared); panics when there is none.
pub async fn infrastructure_name(client: &Client) -> String {
    Api::<api::config_v1::Infrastructure>::all(client.clone())
        .get("cluster")
        .await
        .unwrap_or_else(|e| panic!("reading Infrastructure/cluster: {e}"))
        .status
        .and_then(|s| s.infrastructure_name)
        .unwrap_or_else(|| panic!("Infrastructure/cluster has no status.infrastructureName"))
}

/// Declares the platform GCP (an Infrastructure `cluster`, and its CRD when missing) unless the
/// cluster already says what it is. Returns whether it did, so the test can remove it.
pub async fn ensure_gcp(client: &Client) -> bool {
    ensure_platform(client, serde_json::json!({"type": "GCP"})).await
}

/// Declares the platform of `platform_status` (an Infrastructure `cluster`, and its CRD when
/// missing) unless the cluster already says what it is. Returns whether it did, so the test
/// can remove it (with [`cleanup::undeclare_platform`]).
pub async fn ensure_platform(client: &Client, platform_status: serde_json::Value) -> bool {
    ensure_infrastructure(
        client,
        serde_json::json!({"infrastructureName": "e2e", "platformStatus": platform_status}),
    )
    .await
}

/// [`ensure_platform`] with the whole `status` of the Infrastructure to declare (e.g. a hosted
/// cluster's `controlPlaneTopology: External`).
pub async fn ensure_infrastructure(client: &Client, status: serde_json::Value) -> bool {
    use api::config_v1::Infrastructure;
    let served = opkit::discovery::served_resources(client, "config.openshift.io/v1")
        .await
        .unwrap_or_else(|e| panic!("discovering config.openshift.io: {e}"));
    let infrastructures: Api<Infrastructure> = Api::all(client.clone());
    if served.contains("infrastructures")
        && let Some(existing) = infrastructures
            .get_opt("cluster")
            .await
            .unwrap_or_else(|e| panic!("reading Infrastructure/cluster: {e}"))
        && existing
            .metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key(DECLARED_LABEL))
    {
        // The cluster's own: it says what the platform is. (One an earlier e2e run declared
        // and left behind is declared anew below.)
        return false;
    }
    apply_crd(client, &<Infrastructure as kube::CustomResourceExt>::crd()).await;
    let infrastructure = serde_json::json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
        "metadata": {"name": "cluster", "labels": {DECLARED_LABEL: "true"}},
        "spec": {}, "status": status
    });
    let params = PatchParams::apply(MANAGER);
    let patch = Patch::Apply(&infrastructure);
    infrastructures
        .patch("cluster", &params, &patch)
        .await
        .unwrap_or_else(|e| panic!("declaring Infrastructure/cluster: {e}"));
    infrastructures
        .patch_status("cluster", &params, &patch)
        .await
        .unwrap_or_else(|e| panic!("declaring the status of Infrastructure/cluster: {e}"));
    true
}

/// Marks an Infrastructure the harness declared, so a leftover is recognised.
pub const DECLARED_LABEL: &str = "e2e.storage.openshift.io/declared";

/// Declares the guest cluster of the hosted control plane tests a hosted cluster on AWS
/// (`controlPlaneTopology: External`), as HyperShift's guest has it; refuses a guest that says
/// what it is already. Returns whether it declared it (for [`cleanup::undeclare_platform`]).
pub async fn declare_hosted_aws(guest: &Client) -> bool {
    let declared = ensure_infrastructure(
        guest,
        serde_json::json!({"infrastructureName": "e2e-hosted", "controlPlaneTopology": "External",
               "platformStatus": {"type": "AWS", "aws": {"region": "us-east-1"}}}),
    )
    .await;
    assert!(
        declared,
        "the guest cluster has an Infrastructure of its own; run the e2e tests on a disposable cluster"
    );
    declared
}

/// Runs `future` (an operator's run loop) in the background until [`Background::stop`].
pub struct Background<E> {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), E>>,
    /// The operator's metrics and the controller whose passes say when it has settled.
    settles: Option<(opkit::metrics::Metrics, String)>,
}

impl<E: std::fmt::Debug + Send + 'static> Background<E> {
    /// Starts `run`, handing it a future that resolves when the test stops it.
    pub fn start<F>(
        run: impl FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> F,
    ) -> Self
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run(Box::pin(async {
            let _ = stopped.await;
        })));
        Self {
            stop: Some(stop),
            task,
            settles: None,
        }
    }

    /// Says when the operator has settled: when a pass of `controller` (reported to
    /// `metrics`, which the operator runs with) wrote nothing and failed nothing.
    #[must_use]
    pub fn settles_with(mut self, metrics: opkit::metrics::Metrics, controller: &str) -> Self {
        self.settles = Some((metrics, controller.to_owned()));
        self
    }

    fn settles(&self) -> &(opkit::metrics::Metrics, String) {
        self.settles
            .as_ref()
            .expect("start the operator with settles_with to wait for it to settle")
    }

    /// The passes the operator has started so far, for [`Background::settled_since`].
    pub fn passes(&self) -> u64 {
        let (metrics, controller) = self.settles();
        metrics.pass_state(controller).started
    }

    /// Waits up to two minutes for a pass that started after the first `passes` to end
    /// settled: the operator has acted on a watched change made after reading `passes`, and
    /// acting on it wrote nothing. (An event still on its way from the API server can start
    /// one more pass; what the test asserts next must hold whichever pass saw the change.)
    pub async fn settled_since(&self, passes: u64) {
        let (metrics, controller) = self.settles();
        tokio::time::timeout(
            Duration::from_secs(120),
            metrics.settled_after(controller, passes),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{controller} did not settle in 120s after pass {passes}: {:?}; requests the API server refused: {:?}",
                metrics.pass_state(controller),
                identity::all_refusals()
            )
        });
    }

    /// Whether it is still running (it has not returned, failed or panicked).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Stops it and waits for it; panics if it failed.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the operator under test failed: {e:?}"),
            Err(e) => panic!("the operator under test panicked: {e}"),
        }
    }
}
