//! Helpers for the tests that use testkit: waiting for a condition, and a kubeconfig file for
//! processes (the real binary) that talk to the server over loopback.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{Cluster, Error};

/// Polls `check` every 50 ms until it returns `Some`, for up to `timeout`; panics naming `what`
/// when it never does. Use generous timeouts: test machines are slow and shared.
pub async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A task under test (an operator's run loop) that stops when asked: `spawn` hands it a
/// shutdown future, `stop` completes that future and waits for the task to end. With
/// [`Background::settles_when`] it can also say when it has converged.
pub struct Background {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    settled: Option<Settled>,
}

/// How a task says it has settled: a future that completes when a pass that started after
/// the first `n` ended settled, and the number of passes started so far.
struct Settled {
    after: Box<dyn Fn(u64) -> BoxedWait + Send + Sync>,
    passes: Box<dyn Fn() -> u64 + Send + Sync>,
}

type BoxedWait = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background")
            .field("settles", &self.settled.is_some())
            .finish_non_exhaustive()
    }
}

impl Background {
    /// Spawns `run(shutdown)`.
    pub fn spawn<Fut>(
        run: impl FnOnce(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>) -> Fut,
    ) -> Self
    where
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run(Box::pin(async move {
            let _ = stopped.await;
        })));
        Self {
            stop: Some(stop),
            task,
            settled: None,
        }
    }

    /// `settled_after(n)` completes when a pass of the task that started after its first `n`
    /// ended settled (for an operator: wrote nothing, failed nothing, no change waiting), and
    /// `passes()` counts the passes started so far: what opkit's `Metrics::settling` gives.
    #[must_use]
    pub fn settles_when<A, P, Fut>(mut self, (settled_after, passes): (A, P)) -> Self
    where
        A: Fn(u64) -> Fut + Send + Sync + 'static,
        P: Fn() -> u64 + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.settled = Some(Settled {
            after: Box::new(move |n| Box::pin(settled_after(n))),
            passes: Box::new(passes),
        });
        self
    }

    /// The passes the task has started so far, for [`Background::converged_since`].
    pub fn passes(&self) -> u64 {
        (self.settled().passes)()
    }

    fn settled(&self) -> &Settled {
        match &self.settled {
            Some(settled) => settled,
            None => panic!(
                "this background task cannot say when it has settled: start it with settles_when"
            ),
        }
    }

    /// Waits up to a minute until the task has converged: it says it has settled (see
    /// [`Background::settles_when`]) and every watch event the cluster has for `agent` has
    /// reached it without starting another pass. The event that tells a controller test the
    /// controller has converged. Leaves the request log alone. Panics when it never does,
    /// listing the last writes `agent` sent, or when the task cannot say.
    pub async fn converged(&self, cluster: &Cluster, agent: &str) {
        self.converged_since(cluster, agent, 0).await;
    }

    /// Like [`Background::converged`], but the settled pass must have started after the first
    /// `passes` (read with [`Background::passes`] before a change): the task has acted on a
    /// change that triggers it, and acting on it wrote nothing more.
    pub async fn converged_since(&self, cluster: &Cluster, agent: &str, passes: u64) {
        let settled = self.settled();
        if self.task.is_finished() {
            panic!("the background task has ended; it will not settle");
        }
        let converged = async {
            let mut after = passes;
            loop {
                (settled.after)(after).await;
                // A pass settled; the events on their way may still start another: once the
                // watches are drained, let the task take what it was handed.
                let started = (settled.passes)();
                while !cluster.watches_drained(agent) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
                if (settled.passes)() == started {
                    return;
                }
                after = started;
            }
        };
        if tokio::time::timeout(Duration::from_secs(60), converged)
            .await
            .is_err()
        {
            let writes: Vec<String> = cluster
                .requests()
                .iter()
                .filter(|r| r.is_write() && r.from_client(agent))
                .map(|r| format!("{} {}", r.verb, r.path))
                .collect();
            let last = &writes[writes.len().saturating_sub(20)..];
            panic!(
                "{agent} did not settle in 60s; of its {} logged writes, the last: {last:#?}",
                writes.len()
            );
        }
    }

    /// Asks the task to stop and waits for it; panics if it panicked.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(error) = (&mut self.task).await {
            panic!("the background task failed: {error}");
        }
    }
}

/// A kubeconfig file naming a cluster served on loopback; removed when dropped.
#[derive(Debug)]
pub struct Kubeconfig {
    dir: PathBuf,
    path: PathBuf,
}

impl Kubeconfig {
    /// The file's path, for `KUBECONFIG`.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Kubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Cluster {
    /// Serves the API on loopback and writes a kubeconfig for it (no credentials).
    pub async fn kubeconfig(&self) -> Result<Kubeconfig, Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let address = self.serve_http().await?;
        let dir = std::env::temp_dir().join(format!(
            "testkit-kubeconfig-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: testkit\n  cluster:\n    server: http://{address}\n\
             contexts:\n- name: testkit\n  context:\n    cluster: testkit\n    user: testkit\ncurrent-context: testkit\n\
             users:\n- name: testkit\n  user: {{}}\n"
        );
        let failed = |source| Error::Kubeconfig {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(failed)?;
        std::fs::write(&path, text).map_err(failed)?;
        Ok(Kubeconfig { dir, path })
    }
}

/// `object` as a server-side apply by `manager` leaves it: with that manager's `Apply` entry in
/// `metadata.managedFields`. For plan tests that build the observed objects by hand: our
/// controllers delete only what one of them applied (`opkit::ownership`), never an object that
/// merely carries our labels.
pub fn as_applied_by(mut object: serde_json::Value, manager: &str) -> serde_json::Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1").to_owned();
    object["metadata"]["managedFields"] = serde_json::json!([{
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {}}},
    }]);
    object
}

/// What a copy of `object` under the name `name` is before it is created: everything the
/// original carries (labels, annotations, `managedFields`, the rest), without what the API
/// server assigns (`uid`, `resourceVersion`, `creationTimestamp`, `generation`). Made as
/// `kubectl get -o yaml --show-managed-fields`, edited and created again makes it, and as
/// Kubernetes' storage e2e suite copies a driver's StorageClass (`CopyStorageClass`: a
/// `DeepCopy` with a new name, created with the Go client).
pub fn copy_of(object: &serde_json::Value, name: &str) -> serde_json::Value {
    let mut copy = object.clone();
    if let Some(meta) = copy["metadata"].as_object_mut() {
        for key in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
            meta.remove(key);
        }
        meta.insert("name".into(), name.into());
    }
    if let Some(status) = copy.as_object_mut() {
        status.remove("status");
    }
    copy
}

/// The objects of `resources` (each kind listed in every namespace) whose metadata `keep`
/// accepts, with their kind and `ApiResource`: e.g. every object a controller applied, for a
/// test to put someone else's in its place ([`someone_elses_stand_ins`]).
pub async fn objects_of(
    client: &kube::Client,
    resources: &[(&'static str, kube::api::ApiResource)],
    keep: impl Fn(&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool,
) -> Vec<(&'static str, kube::api::ApiResource, serde_json::Value)> {
    let mut out = Vec::new();
    for (kind, resource) in resources {
        let list = kube::Api::<kube::api::DynamicObject>::all_with(client.clone(), resource)
            .list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("listing {kind}s: {e}"));
        for object in list.items.into_iter().filter(|o| keep(&o.metadata)) {
            let value =
                serde_json::to_value(&object).unwrap_or_else(|e| panic!("a {kind} as JSON: {e}"));
            out.push((*kind, resource.clone(), value));
        }
    }
    out
}

/// What someone else may have made under the name of `ours`, each with how a test names it:
/// a labelled copy ([`copy_of`], as `kubectl get -o yaml` created again makes it), and another
/// installer's object with the content but none of the metadata of ours, labelled
/// `app.kubernetes.io/managed-by: kustomize` (an object with no field set at all would be
/// nobody's, which our controllers may adopt).
pub fn someone_elses_stand_ins(ours: &serde_json::Value) -> [(&'static str, serde_json::Value); 2] {
    let name = ours["metadata"]["name"].as_str().unwrap_or_default();
    let labelled = copy_of(ours, name);
    let mut bare = labelled.clone();
    bare["metadata"] = serde_json::json!({
        "name": name,
        "namespace": ours["metadata"]["namespace"],
        "labels": {"app.kubernetes.io/managed-by": "kustomize"},
    });
    [("a labelled copy", labelled), ("bare", bare)]
}

/// Creates `object` of `resource` as the client `agent` (in its namespace, if it has one), and
/// returns the API it was made through and the object as created.
pub async fn create_as(
    cluster: &Cluster,
    agent: &str,
    resource: &kube::api::ApiResource,
    object: serde_json::Value,
) -> (
    kube::Api<kube::api::DynamicObject>,
    kube::api::DynamicObject,
) {
    let client = cluster.client_with_agent(agent);
    let api = match object["metadata"]["namespace"].as_str() {
        Some(ns) => kube::Api::namespaced_with(client, ns, resource),
        None => kube::Api::all_with(client, resource),
    };
    let object: kube::api::DynamicObject =
        serde_json::from_value(object).unwrap_or_else(|e| panic!("a {}: {e}", resource.kind));
    let created = api
        .create(&Default::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {} {:?}: {e}", resource.kind, object.metadata.name));
    (api, created)
}

/// Whether a field manager whose name starts with `prefix` has an entry in `meta`'s
/// `managedFields`: whether such a client ever wrote the object.
pub fn written_by(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    prefix: &str,
) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .filter_map(|e| e.manager.as_deref())
        .any(|m| m.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_kubeconfig_reaches_the_server_and_is_cleaned_up() {
        let cluster = Cluster::start().await;
        let kubeconfig = cluster.kubeconfig().await.unwrap();
        let config = kube::config::Kubeconfig::read_from(kubeconfig.path()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        assert!(namespaces.get_opt("default").await.unwrap().is_some());
        let path = kubeconfig.path().to_owned();
        drop(kubeconfig);
        assert!(!path.exists());
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 100ms waiting for nothing")]
    async fn eventually_names_what_never_happened() {
        eventually("nothing", Duration::from_millis(100), || async {
            None::<()>
        })
        .await;
    }
}
