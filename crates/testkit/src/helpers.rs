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
/// shutdown future, `stop` completes that future and waits for the task to end.
#[derive(Debug)]
pub struct Background {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
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

impl Cluster {
    /// Waits until the client `agent` sends no write for a whole 2-second window, for up to a
    /// minute; panics listing the writes it kept sending. How a controller test proves it has
    /// converged and that a pass without changes writes nothing.
    pub async fn wait_quiet(&self, agent: &str) {
        for _ in 0..30 {
            self.clear_requests();
            tokio::time::sleep(Duration::from_secs(2)).await;
            if self.count_writes(agent) == 0 {
                return;
            }
        }
        let writes: Vec<String> = self
            .requests()
            .iter()
            .filter(|r| r.is_write() && r.from_client(agent))
            .map(|r| format!("{} {}", r.verb, r.path))
            .collect();
        panic!("{agent} never stopped writing: {writes:?}");
    }
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
