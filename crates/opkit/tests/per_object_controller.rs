//! `opkit::controller::run` without an API server: a store filled by hand, a reconcile that
//! counts its calls, and the passes as `Metrics` reports them.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use opkit::controller::{Queue, run};
use opkit::metrics::Metrics;
use opkit::runtime::{LoopConfig, ReconcileError, Trigger};

const CONTROLLER: &str = "per-object";

#[derive(Debug, thiserror::Error)]
#[error("refused")]
struct Refused;

impl ReconcileError for Refused {
    fn category(&self) -> &'static str {
        "refused"
    }
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns"}
    }))
    .unwrap()
}

fn fast() -> LoopConfig {
    LoopConfig {
        retry_base: Duration::from_millis(20),
        retry_cap: Duration::from_millis(80),
    }
}

async fn within_a_minute<T>(what: &str, wait: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

#[tokio::test]
async fn with_nothing_to_reconcile_it_settles() {
    let (store, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let metrics = Metrics::new();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn({
        let metrics = metrics.clone();
        async move {
            run(
                CONTROLLER,
                store,
                Queue::new(),
                Arc::new(Trigger::default()),
                fast(),
                metrics,
                |_: Arc<ConfigMap>| async { Ok::<_, Refused>(None) },
                async {
                    let _ = stopped.await;
                },
            )
            .await;
        }
    });
    within_a_minute("an idle pass", metrics.settled(CONTROLLER)).await;
    assert_eq!(metrics.pass_state(CONTROLLER).started, 1, "one idle pass");
    let encoded = metrics.encode();
    assert!(
        !encoded.contains("storage_operator_reconciles_total{controller=\"per-object\"}"),
        "an idle pass is no reconcile:\n{encoded}"
    );
    assert!(
        encoded.contains("storage_operator_settled{controller=\"per-object\"} 1"),
        "{encoded}"
    );
    stop.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_failing_object_backs_off_alone_and_is_asked_for_again() {
    let (store, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&watcher::Event::Init);
    for name in ["healthy", "failing"] {
        writer.apply_watcher_event(&watcher::Event::InitApply(config_map(name)));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let calls: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let fixed = Arc::new(AtomicBool::new(false));
    let metrics = Metrics::new();
    let queue = Queue::new();
    let requests = queue.requests();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn({
        let (metrics, calls, fixed) = (metrics.clone(), calls.clone(), fixed.clone());
        async move {
            run(
                CONTROLLER,
                store,
                queue,
                Arc::new(Trigger::default()),
                fast(),
                metrics,
                move |object: Arc<ConfigMap>| {
                    let name = object.name_any();
                    *calls.lock().unwrap().entry(name.clone()).or_default() += 1;
                    let refuse = name == "failing" && !fixed.load(Ordering::SeqCst);
                    async move { if refuse { Err(Refused) } else { Ok(None) } }
                },
                async {
                    let _ = stopped.await;
                },
            )
            .await;
        }
    });
    let count = |name: &str| calls.lock().unwrap().get(name).copied().unwrap_or(0);
    within_a_minute("the failing object retried on its own", async {
        while count("failing") < 4 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(
        count("healthy"),
        1,
        "the healthy object is not retried with it"
    );
    assert!(
        !metrics.pass_state(CONTROLLER).settled,
        "a retry is pending"
    );
    let encoded = metrics.encode();
    assert!(encoded.contains("category=\"refused\""), "{encoded}");
    assert!(
        encoded.contains("storage_operator_reconciles_total{controller=\"per-object\"}"),
        "{encoded}"
    );

    // Fixed, then asked for: it succeeds and the controller settles.
    fixed.store(true, Ordering::SeqCst);
    requests.object(ObjectRef::new("failing").within("ns"));
    within_a_minute(
        "settled once the object succeeds",
        metrics.settled(CONTROLLER),
    )
    .await;
    assert_eq!(count("healthy"), 1);
    // Asked for an object that is gone: an idle pass, nothing reconciled.
    let before = metrics.pass_state(CONTROLLER).started;
    requests.object(ObjectRef::new("gone").within("ns"));
    within_a_minute("the idle pass", metrics.settled_after(CONTROLLER, before)).await;
    assert_eq!(calls.lock().unwrap().get("gone"), None);
    stop.send(()).unwrap();
    task.await.unwrap();
}
