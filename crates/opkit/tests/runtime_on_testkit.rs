//! The reconcile loop against the in-process API server: changes trigger reconciles, an idle
//! cluster triggers none, failures are retried with backoff.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::watcher;
use opkit::metrics::{Metrics, PassState};
use opkit::runtime::{Informers, LoopConfig, ReconcileError, run};
use tokio::sync::oneshot;

#[derive(Debug)]
struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed on purpose")
    }
}

impl ReconcileError for Failed {
    fn category(&self) -> &'static str {
        "test"
    }
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(
        serde_json::json!({"metadata": {"name": name, "labels": {"watched": "yes"}}}),
    )
    .unwrap()
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..600 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A cluster, the client `operator`, and its synced cache of the ConfigMaps of `default`
/// labelled `watched=yes`.
async fn watching_labelled_config_maps() -> (
    testkit::Cluster,
    kube::Client,
    Informers,
    kube::runtime::reflector::Store<ConfigMap>,
) {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    let mut informers = Informers::new();
    let store = informers.watch(
        "configmaps",
        Api::<ConfigMap>::namespaced(client.clone(), "default"),
        watcher::Config::default().labels("watched=yes"),
    );
    informers
        .wait_synced(Duration::from_secs(30))
        .await
        .unwrap();
    (cluster, client, informers, store)
}

#[tokio::test]
async fn changes_trigger_reconciles_and_idle_costs_nothing() {
    let (cluster, _client, informers, store) = watching_labelled_config_maps().await;

    let runs = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = {
        let (runs, seen, store) = (runs.clone(), seen.clone(), store.clone());
        tokio::spawn(run(
            "test",
            informers.trigger(),
            LoopConfig::default(),
            Metrics::new(),
            move || {
                runs.fetch_add(1, Ordering::SeqCst);
                seen.store(store.state().len(), Ordering::SeqCst);
                async { Ok::<_, Failed>(None) }
            },
            async {
                let _ = stopped.await;
            },
        ))
    };
    eventually("the first reconcile", || runs.load(Ordering::SeqCst) >= 1).await;

    let api = Api::<ConfigMap>::namespaced(cluster.client(), "default");
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    eventually("a reconcile that sees the new ConfigMap", || {
        seen.load(Ordering::SeqCst) == 1
    })
    .await;

    // Idle: no reconcile and no request for a while.
    let settled = runs.load(Ordering::SeqCst);
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        settled,
        "no reconcile without a change"
    );
    assert_eq!(cluster.count_writes("operator"), 0);
    let reads: Vec<_> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.from_client("operator") && r.is_read() && r.verb != "watch")
        .collect();
    assert!(reads.is_empty(), "no polling: {reads:?}");

    // An object outside the label selector is neither cached nor a trigger: the next pass is
    // the one for the next watched object, and it sees only the watched two.
    api.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": "other"}})).unwrap(),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &config_map("b"))
        .await
        .unwrap();
    eventually("a reconcile that sees the second watched ConfigMap", || {
        seen.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), settled + 1);
    assert_eq!(store.state().len(), 2);

    stop.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn failures_are_retried_with_backoff_and_requeues_honoured() {
    let cluster = testkit::Cluster::start().await;
    let informers = Informers::new();
    let _ = &cluster;
    let runs = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = oneshot::channel::<()>();
    let metrics = Metrics::new();
    let task = {
        let runs = runs.clone();
        tokio::spawn(run(
            "flaky",
            informers.trigger(),
            LoopConfig {
                retry_base: Duration::from_millis(20),
                retry_cap: Duration::from_millis(40),
            },
            metrics.clone(),
            move || {
                let n = runs.fetch_add(1, Ordering::SeqCst);
                async move {
                    match n {
                        0..=2 => Err(Failed),
                        // Then succeed, asking to run again soon, once.
                        3 => Ok(Some(Duration::from_millis(20))),
                        _ => Ok(None),
                    }
                }
            },
            async {
                let _ = stopped.await;
            },
        ))
    };
    eventually("three retries, a requeue and its pass", || {
        metrics.pass_state("flaky").ended >= 5
    })
    .await;
    // No pass is due on a timer and nothing is watched: nothing runs again.
    assert_eq!(
        metrics.pass_state("flaky"),
        PassState {
            started: 5,
            ended: 5,
            settled: true,
            timed: false
        },
        "nothing after the last success without a requeue"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    let text = metrics.encode();
    assert!(
        text.contains(
            r#"storage_operator_reconcile_errors_total{controller="flaky",category="test"} 3"#
        ),
        "{text}"
    );
    stop.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn a_cache_of_a_missing_api_is_reported_not_synced() {
    let cluster = testkit::Cluster::start().await;
    let mut informers = Informers::new();
    let api: Api<api::config_v1::Infrastructure> = Api::all(cluster.client());
    let _store = informers.watch("infrastructures", api, watcher::Config::default());
    let error = informers
        .wait_synced(Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(error.pending, "infrastructures");
    assert!(
        error.to_string().contains("check that these APIs exist"),
        "{error}"
    );
}

/// A projected cache keeps only what its projection keeps, follows changes and deletions,
/// and forgets objects deleted while its watch was down (the re-list replaces it whole).
#[tokio::test]
async fn a_projected_cache_keeps_only_what_concerns_it() {
    use kube::api::{DeleteParams, PartialObjectMeta, Patch, PatchParams};
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    let admin: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let labelled = |name: &str, keep: &str| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"keep": keep}},
            "data": {"big": "x".repeat(1000)}
        }))
        .unwrap()
    };
    for (name, keep) in [("a", "yes"), ("b", "no"), ("c", "yes")] {
        admin
            .create(&PostParams::default(), &labelled(name, keep))
            .await
            .unwrap();
    }
    let mut informers = Informers::new();
    let kept = informers.watch_projected(
        "configmaps (kept ones)",
        Api::<PartialObjectMeta<ConfigMap>>::namespaced(client.clone(), "default"),
        watcher::Config::default(),
        |cm| {
            let keep = cm.metadata.labels.as_ref()?.get("keep")?;
            (keep == "yes").then(|| cm.metadata.name.clone().unwrap_or_default())
        },
    );
    informers
        .wait_synced(Duration::from_secs(10))
        .await
        .unwrap();
    let keys = || {
        kept.entries()
            .into_iter()
            .map(|(k, _)| k)
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(), ["default/a", "default/c"]);

    // A change that makes an object concern it, and one that makes another stop concerning it.
    let relabel =
        |keep: &str| Patch::Merge(serde_json::json!({"metadata": {"labels": {"keep": keep}}}));
    admin
        .patch("b", &PatchParams::default(), &relabel("yes"))
        .await
        .unwrap();
    admin
        .patch("a", &PatchParams::default(), &relabel("no"))
        .await
        .unwrap();
    eventually("b kept and a dropped", || {
        keys() == ["default/b", "default/c"]
    })
    .await;

    // Deleted while the watch is down: forgotten once it is back.
    cluster.drop_watches();
    admin.delete("c", &DeleteParams::default()).await.unwrap();
    eventually("c forgotten", || keys() == ["default/b"]).await;
}

/// A projected cache lists in pages of at most `PROJECTED_PAGE_SIZE` objects, whatever page
/// size it was given (kube's default is 500): a page is held whole before it is projected.
#[tokio::test]
async fn a_projected_cache_lists_in_small_pages() {
    use opkit::runtime::PROJECTED_PAGE_SIZE;
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    let admin: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let count = 2 * PROJECTED_PAGE_SIZE as usize + 20;
    for i in 0..count {
        admin
            .create(&PostParams::default(), &config_map(&format!("cm-{i:03}")))
            .await
            .unwrap();
    }
    cluster.clear_requests();
    let mut informers = Informers::new();
    let kept = informers.watch_projected(
        "configmaps (names)",
        Api::<ConfigMap>::namespaced(client.clone(), "default"),
        watcher::Config::default(),
        |cm| cm.metadata.name.clone(),
    );
    informers
        .wait_synced(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(kept.len(), count);
    let limits: Vec<String> = cluster
        .requests()
        .iter()
        .filter(|r| r.from_client("operator") && r.verb == "list")
        .map(|r| r.query.get("limit").cloned().unwrap_or_default())
        .collect();
    assert_eq!(limits, ["50", "50", "50"], "pages of the first list");
}

/// A pass that wrote is followed by passes that cannot be called settled until a watch event
/// has come: a pass woken by its timer may decide from caches that do not show the write yet.
#[tokio::test]
async fn a_pass_settles_only_once_the_events_of_earlier_writes_are_seen() {
    let (cluster, client, informers, store) = watching_labelled_config_maps().await;
    // The watch breaks and cannot come back for a while: the write below reaches the cache
    // only after the watch's backoff, well after the pass that follows the write.
    cluster.inject(
        testkit::FaultRule::status(Some("watch"), Some("configmaps"), 500).with_max_hits(2),
    );
    cluster.drop_watches();
    let metrics = Metrics::new();
    // What each pass saw: how many ConfigMaps were cached.
    let saw = Arc::new(std::sync::Mutex::new(Vec::<usize>::new()));
    // Passes after the second wait for this, so the test can look at the second.
    let (release, released) = tokio::sync::watch::channel(false);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = {
        let (saw, store, metrics, client) =
            (saw.clone(), store.clone(), metrics.clone(), client.clone());
        tokio::spawn(run(
            "writer",
            informers.trigger(),
            LoopConfig::default(),
            metrics.clone(),
            move || {
                let pass = {
                    let mut saw = saw.lock().unwrap();
                    saw.push(store.state().len());
                    saw.len()
                };
                let (metrics, client, mut released) =
                    (metrics.clone(), client.clone(), released.clone());
                async move {
                    if pass == 1 {
                        // Writes, then asks to run again at once: that pass is woken by its
                        // timer, before the ConfigMap reaches the cache.
                        Api::<ConfigMap>::namespaced(client, "default")
                            .create(&PostParams::default(), &config_map("mine"))
                            .await
                            .unwrap();
                        metrics.wrote("writer", "ConfigMap");
                        return Ok::<_, Failed>(Some(Duration::ZERO));
                    }
                    if pass > 2 {
                        let _ = released.wait_for(|r| *r).await;
                    }
                    Ok(None)
                }
            },
            async {
                let _ = stopped.await;
            },
        ))
    };
    eventually("the second pass", || {
        metrics.pass_state("writer").ended >= 2
    })
    .await;
    let second = saw.lock().unwrap()[1];
    if metrics.pass_state("writer").ended == 2 && metrics.pass_state("writer").settled {
        assert_eq!(
            second, 1,
            "the second pass settled without seeing the write"
        );
    }
    release.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), metrics.settled("writer"))
        .await
        .expect("the writer settles");
    let saw = saw.lock().unwrap().clone();
    assert_eq!(
        saw.last(),
        Some(&1),
        "the settled pass saw its own write in the cache: {saw:?}"
    );
    stop.send(()).unwrap();
    task.await.unwrap();
}

/// A watch's first error brings a pass (which may report it), but it is no change: a pass it
/// brings after a write cannot be called settled while the write's own event is still on its
/// way (it would decide from a cache without the write).
#[tokio::test]
async fn a_watch_error_after_a_write_is_not_taken_for_its_event() {
    use k8s_openapi::api::core::v1::Secret;
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    let mut informers = Informers::new();
    let store = informers.watch(
        "configmaps",
        Api::<ConfigMap>::namespaced(client.clone(), "default"),
        watcher::Config::default().labels("watched=yes"),
    );
    let _secrets = informers.watch(
        "secrets",
        Api::<Secret>::namespaced(client.clone(), "default"),
        watcher::Config::default(),
    );
    informers
        .wait_synced(Duration::from_secs(30))
        .await
        .unwrap();
    // The ConfigMaps' watch is held for 5 s when it comes back: the write below reaches the
    // cache only after that.
    cluster.inject(
        testkit::FaultRule::hang(Some("watch"), Some("configmaps"), Duration::from_secs(5))
            .with_max_hits(1),
    );
    cluster.drop_watches();
    eventually("the ConfigMaps' watch held", || cluster.fault_hits() == 1).await;

    let metrics = Metrics::new();
    let saw = Arc::new(std::sync::Mutex::new(Vec::<usize>::new()));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = {
        let (saw, store, metrics, client) =
            (saw.clone(), store.clone(), metrics.clone(), client.clone());
        tokio::spawn(run(
            "writer",
            informers.trigger(),
            LoopConfig::default(),
            metrics.clone(),
            move || {
                let pass = {
                    let mut saw = saw.lock().unwrap();
                    saw.push(store.state().len());
                    saw.len()
                };
                let (metrics, client) = (metrics.clone(), client.clone());
                async move {
                    if pass == 1 {
                        Api::<ConfigMap>::namespaced(client, "default")
                            .create(&PostParams::default(), &config_map("mine"))
                            .await
                            .unwrap();
                        metrics.wrote("writer", "ConfigMap");
                    }
                    Ok::<_, Failed>(None)
                }
            },
            async {
                let _ = stopped.await;
            },
        ))
    };
    eventually("the writing pass", || {
        metrics.pass_state("writer").ended >= 1
    })
    .await;
    // The Secrets' watch fails once, after the write: a pass follows, on a cache without it.
    cluster
        .inject(testkit::FaultRule::status(Some("watch"), Some("secrets"), 500).with_max_hits(1));
    cluster.drop_watches();
    eventually("the pass the watch's error brings", || {
        metrics.pass_state("writer").ended >= 2
    })
    .await;
    let state = metrics.pass_state("writer");
    let seen = saw.lock().unwrap().clone();
    assert_eq!(seen[1], 0, "the write reached the cache early: {seen:?}");
    assert!(
        !state.settled,
        "a pass brought by a watch's error settled before the write's event: {seen:?}"
    );
    tokio::time::timeout(Duration::from_secs(30), metrics.settled("writer"))
        .await
        .expect("the writer settles once the write's event has come");
    let seen = saw.lock().unwrap().clone();
    assert_eq!(
        seen.last(),
        Some(&1),
        "the settled pass saw the write: {seen:?}"
    );
    stop.send(()).unwrap();
    task.await.unwrap();
}

/// A server that stops answering shows in the watches' health, from their first error until
/// they have an event again; plain and projected watches alike.
#[tokio::test]
async fn failing_watches_are_known_until_they_work_again() {
    use kube::api::PartialObjectMeta;
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    let mut informers = Informers::new();
    let _plain = informers.watch(
        "configmaps",
        Api::<ConfigMap>::namespaced(client.clone(), "default"),
        watcher::Config::default(),
    );
    let _projected = informers.watch_projected(
        "configmaps (names)",
        Api::<PartialObjectMeta<ConfigMap>>::namespaced(client.clone(), "default"),
        watcher::Config::default(),
        |cm| cm.metadata.name.clone(),
    );
    informers
        .wait_synced(Duration::from_secs(10))
        .await
        .unwrap();
    let health = informers.health();
    assert!(health.failing().is_empty());

    cluster.unavailable_for(Duration::from_secs(3));
    cluster.drop_watches();
    eventually("both watches failing", || health.failing().len() == 2).await;
    let failing = health.failing();
    assert_eq!(failing[0].watch, "configmaps");
    assert_eq!(failing[1].watch, "configmaps (names)");
    assert!(failing.iter().all(|f| !f.error.is_empty()), "{failing:?}");
    // A quiet watch that is back has no event to show it; the next change does.
    let admin: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    for _ in 0..100 {
        if admin
            .create(&PostParams::default(), &config_map("after"))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually("both watches working again", || health.failing().is_empty()).await;

    // What the caller found out otherwise (the server answers again) it may forget.
    cluster.unavailable_for(Duration::from_secs(1));
    cluster.drop_watches();
    eventually("failing again", || health.failing().len() == 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    health.forget(&["configmaps", "configmaps (names)"]);
    assert!(health.failing().is_empty());
}
