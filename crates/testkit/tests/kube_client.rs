//! testkit driven through real `kube` clients: kube-runtime's `Controller` reconciling unmodified,
//! server-side apply ownership and conflicts via `kube::Api`, a watcher surviving injected faults,
//! the request log counting a controller's calls, CRD-defined kinds, and the workload simulation.
//!
//! Convergence waits poll with generous deadlines (the machines are small and shared) and never
//! assert on elapsed time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use testkit::{Cluster, FaultRule, SimConfig};

const NS: &str = "default";

/// Polls `check` until it returns `Some`, failing the test after a generous deadline.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.namespace = Some(NS.into());
    c.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    c
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct ReconcileError(#[from] kube::Error);

/// A small controller: every ConfigMap labelled `role=source` gets a `<name>-copy` ConfigMap with
/// the same data, owned by the source, written with server-side apply.
async fn reconcile(
    src: Arc<ConfigMap>,
    api: Arc<Api<ConfigMap>>,
) -> Result<Action, ReconcileError> {
    let name = format!("{}-copy", src.name_any());
    let owner = src
        .controller_owner_ref(&())
        .map(|o| vec![serde_json::to_value(o).unwrap_or(Value::Null)])
        .unwrap_or_default();
    let desired = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": owner},
        "data": src.data.clone().unwrap_or_default(),
    });
    api.patch(
        &name,
        &PatchParams::apply("copy-controller").force(),
        &Patch::Apply(&desired),
    )
    .await?;
    Ok(Action::await_change())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_runs_unmodified_and_reconciles() {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let ctl_api = Arc::new(api.clone());
    let controller = Controller::new(
        api.clone(),
        watcher::Config::default().labels("role=source"),
    )
    .owns(api.clone(), watcher::Config::default())
    .run(
        reconcile,
        |_, _, _| Action::requeue(Duration::from_millis(100)),
        ctl_api,
    )
    .for_each(|_| async {});
    let handle = tokio::spawn(controller);

    let mut src = cm("alpha", &[("k", "v1")]);
    src.metadata.labels = Some([("role".to_string(), "source".to_string())].into());
    api.create(&PostParams::default(), &src)
        .await
        .expect("create source");

    let copy = eventually("the copy to be created", || async {
        api.get_opt("alpha-copy").await.ok().flatten()
    })
    .await;
    assert_eq!(
        copy.data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("v1")
    );
    let owners = copy.owner_references();
    assert_eq!(owners.len(), 1, "copy is owned by its source");
    assert_eq!(owners[0].name, "alpha");

    // A change to the source reaches the copy through the watch.
    api.patch(
        "alpha",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v2"}})),
    )
    .await
    .expect("update source");
    eventually("the copy to follow the source", || async {
        let c = api.get("alpha-copy").await.ok()?;
        (c.data?.get("k")? == "v2").then_some(())
    })
    .await;

    // Drift on the owned object is restored (the controller watches what it owns).
    api.patch(
        "alpha-copy",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "drift"}})),
    )
    .await
    .expect("drift");
    eventually("the drift to be undone", || async {
        let c = api.get("alpha-copy").await.ok()?;
        (c.data?.get("k")? == "v2").then_some(())
    })
    .await;

    // Unlabelled ConfigMaps are not reconciled.
    api.create(&PostParams::default(), &cm("beta", &[("k", "x")]))
        .await
        .expect("create unlabelled");
    // A labelled one created after it is the barrier: once its copy exists, the controller
    // has seen both events (the unlabelled one arrives on the `owns` watch first).
    let mut gamma = cm("gamma", &[("k", "g")]);
    gamma.metadata.labels = Some([("role".to_string(), "source".to_string())].into());
    api.create(&PostParams::default(), &gamma)
        .await
        .expect("create gamma");
    eventually("the later labelled source's copy", || async {
        api.get_opt("gamma-copy").await.ok().flatten()
    })
    .await;
    assert!(api.get_opt("beta-copy").await.expect("get").is_none());

    // Deleting the source garbage-collects the copy (background propagation).
    api.delete("alpha", &DeleteParams::default())
        .await
        .expect("delete source");
    eventually("the copy to be collected", || async {
        api.get_opt("alpha-copy")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    handle.abort();
}

fn managers(cm: &ConfigMap) -> BTreeMap<String, Value> {
    cm.metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.fields_v1.map(|f| f.0).unwrap_or(Value::Null),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_ownership_and_conflicts() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    let apply = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": data});

    let created = api
        .patch(
            "shared",
            &PatchParams::apply("mgr-a"),
            &Patch::Apply(apply(json!({"x": "a", "y": "a"}))),
        )
        .await
        .expect("first apply creates");
    let rv1 = created.resource_version();
    assert_eq!(
        managers(&created).get("mgr-a"),
        Some(&json!({"f:data": {"f:x": {}, "f:y": {}}}))
    );

    // An identical re-apply is a no-op: same resourceVersion.
    let again = api
        .patch(
            "shared",
            &PatchParams::apply("mgr-a"),
            &Patch::Apply(apply(json!({"x": "a", "y": "a"}))),
        )
        .await
        .expect("re-apply");
    assert_eq!(again.resource_version(), rv1);

    // Another manager changing an owned field conflicts, naming the owner and the field.
    let err = api
        .patch(
            "shared",
            &PatchParams::apply("mgr-b"),
            &Patch::Apply(apply(json!({"x": "b"}))),
        )
        .await
        .expect_err("conflict");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert!(
                s.message.contains("conflict with \"mgr-a\"") && s.message.contains(".data.x"),
                "{}",
                s.message
            );
        }
        other => panic!("expected a 409, got {other:?}"),
    }

    // The same value is no conflict: the field becomes co-owned.
    let co = api
        .patch(
            "shared",
            &PatchParams::apply("mgr-b"),
            &Patch::Apply(apply(json!({"y": "a"}))),
        )
        .await
        .expect("same value applies");
    assert_eq!(
        managers(&co).get("mgr-b"),
        Some(&json!({"f:data": {"f:y": {}}}))
    );

    // force moves ownership of x to B.
    let forced = api
        .patch(
            "shared",
            &PatchParams::apply("mgr-b").force(),
            &Patch::Apply(apply(json!({"x": "b", "y": "a"}))),
        )
        .await
        .expect("forced apply");
    let m = managers(&forced);
    assert_eq!(m.get("mgr-a"), Some(&json!({"f:data": {"f:y": {}}})));
    assert_eq!(
        m.get("mgr-b"),
        Some(&json!({"f:data": {"f:x": {}, "f:y": {}}}))
    );

    // A drops y: it is co-owned by B, so it stays. B then drops x and y: x (B alone) goes,
    // y goes too because A no longer owns it either.
    let a_drops = api
        .patch(
            "shared",
            &PatchParams::apply("mgr-a"),
            &Patch::Apply(apply(json!({"z": "a"}))),
        )
        .await
        .expect("A drops y");
    let data = a_drops.data.clone().unwrap_or_default();
    assert_eq!(
        data.get("y").map(String::as_str),
        Some("a"),
        "co-owned field kept"
    );
    let b_drops = api
        .patch(
            "shared",
            &PatchParams::apply("mgr-b"),
            &Patch::Apply(apply(json!({}))),
        )
        .await
        .expect("B drops everything");
    let data = b_drops.data.clone().unwrap_or_default();
    assert_eq!(
        data.keys().cloned().collect::<Vec<_>>(),
        vec!["z".to_string()],
        "fields owned by B alone are removed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_recovers_from_dropped_streams_and_outages() {
    let cluster = Cluster::start_with(testkit::ServerConfig {
        seed: 7,
        ..Default::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    let (store, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default()).default_backoff(),
    )
    .applied_objects()
    .for_each(|_| async {});
    let handle = tokio::spawn(stream);

    api.create(&PostParams::default(), &cm("one", &[]))
        .await
        .expect("create one");
    eventually("the reflector to see the first object", || async {
        (store.state().len() == 1).then_some(())
    })
    .await;

    // Watches fail with 503, a relist would fail with 500, open streams are dropped, and the
    // whole server is down for a moment; the writes still get through after it.
    // The next two watch requests fail whatever the timing (rate 1.0), so the test always
    // exercises the retry path; seeded partial rates are covered by the faults unit tests.
    cluster.inject(
        FaultRule::status(Some("watch"), Some("configmaps"), 503)
            .with_rate(1.0)
            .with_max_hits(2),
    );
    cluster.inject(FaultRule::status(Some("list"), Some("configmaps"), 500).with_max_hits(1));
    cluster.drop_watches();
    cluster.unavailable_for(Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(400)).await;
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("later-{i}"), &[]))
            .await
            .expect("create after outage");
    }
    cluster.drop_watches();
    api.delete("one", &DeleteParams::default())
        .await
        .expect("delete one");

    let names = eventually("the reflector to converge after faults", || async {
        let mut names: Vec<String> = store.state().iter().map(|c| c.name_any()).collect();
        names.sort();
        (names.len() == 5 && !names.contains(&"one".to_string())).then_some(names)
    })
    .await;
    assert_eq!(names[0], "later-0");
    let failures = cluster
        .requests()
        .iter()
        .filter(|r| r.status >= 500)
        .count();
    assert!(
        failures > 0,
        "faults were injected and observed by the client"
    );
    handle.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_relists_after_its_resource_version_is_compacted() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    let (store, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default()).default_backoff(),
    )
    .applied_objects()
    .for_each(|_| async {});
    let handle = tokio::spawn(stream);
    api.create(&PostParams::default(), &cm("first", &[]))
        .await
        .expect("create");
    eventually("the first object", || async {
        (store.state().len() == 1).then_some(())
    })
    .await;
    let lists_before = cluster
        .requests()
        .iter()
        .filter(|r| r.verb == "list")
        .count();

    // Keep the watcher away while writes happen and the history is compacted past its RV.
    cluster.inject(FaultRule::status(Some("watch"), Some("configmaps"), 503));
    cluster.drop_watches();
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("missed-{i}"), &[]))
            .await
            .expect("create while the watch is down");
    }
    cluster.compact();
    cluster.clear_faults();

    eventually("the watcher to relist and see every object", || async {
        (store.state().len() == 4).then_some(())
    })
    .await;
    let lists_after = cluster
        .requests()
        .iter()
        .filter(|r| r.verb == "list")
        .count();
    assert!(
        lists_after > lists_before,
        "a 410 Expired watch forces a new list ({lists_before} -> {lists_after})"
    );
    handle.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_http_listener_serves_a_kube_client() {
    let cluster = Cluster::start().await;
    let addr = cluster.serve_http().await.expect("bind loopback");
    assert!(addr.ip().is_loopback());
    let url: http::Uri = format!("http://{addr}").parse().expect("uri");
    let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    api.create(&PostParams::default(), &cm("over-tcp", &[("k", "v")]))
        .await
        .expect("create over HTTP");
    // The in-memory client sees what the TCP client wrote: one server behind both.
    let mem: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    let got = mem.get("over-tcp").await.expect("get in memory");
    assert_eq!(
        got.data.and_then(|d| d.get("k").cloned()).as_deref(),
        Some("v")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_requests_outlast_a_client_timeout() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    cluster.inject(FaultRule::hang(
        Some("get"),
        Some("configmaps"),
        Duration::from_secs(120),
    ));
    let res = tokio::time::timeout(Duration::from_millis(300), api.get_opt("anything")).await;
    assert!(res.is_err(), "the request hangs past the client's timeout");
    assert_eq!(cluster.fault_hits(), 1, "exactly the one get was held");
    // Other verbs are unaffected, and once cleared, gets answer again.
    assert!(api.list(&ListParams::default()).await.is_ok());
    cluster.clear_faults();
    assert!(api.get_opt("anything").await.expect("get").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_watchers_sync_and_follow() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("pre-{i}"), &[]))
            .await
            .expect("create");
    }
    let (store, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().streaming_lists()).default_backoff(),
    )
    .applied_objects()
    .for_each(|_| async {});
    let handle = tokio::spawn(stream);
    store.wait_until_ready().await.expect("initial events end");
    assert_eq!(
        store.state().len(),
        3,
        "initial events are the existing objects"
    );
    api.create(&PostParams::default(), &cm("post", &[]))
        .await
        .expect("create");
    eventually("the new object", || async {
        (store.state().len() == 4).then_some(())
    })
    .await;
    // A streaming list is one watch request: no list was needed.
    assert!(cluster.requests().iter().all(|r| r.verb != "list"));
    handle.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_fields_in_built_in_kinds_are_caught_at_any_depth() {
    let cluster = Cluster::start().await;
    let api: Api<Deployment> = Api::namespaced(cluster.client(), NS);
    let with_typo = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "typo"},
        "spec": {"selector": {"matchLabels": {"app": "t"}},
                 "template": {"metadata": {"labels": {"app": "t"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1", "imagePullPolice": "Always"}]}}}
    });
    // Server-side apply refuses what the schema does not declare, like the apiserver (500).
    match api
        .patch(
            "typo",
            &PatchParams::apply("typo-ctl"),
            &Patch::Apply(&with_typo),
        )
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 500);
            assert!(
                s.message
                    .contains("imagePullPolice: field not declared in schema"),
                "{}",
                s.message
            );
        }
        other => panic!("expected a 500, got {other:?}"),
    }
    // A create drops it (with a warning) and defaults the real field.
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "typo"},
        "spec": {"selector": {"matchLabels": {"app": "t"}},
                 "template": {"metadata": {"labels": {"app": "t"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}
    }))
    .expect("deployment");
    let created = api
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    let c = &created
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec")
        .containers[0];
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_event_recorder_publishes_and_both_event_apis_see_it() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as NewEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let cluster = Cluster::start().await;
    let client = cluster.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let subject = cms
        .create(&PostParams::default(), &cm("subject", &[]))
        .await
        .expect("create");
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "testkit-ctl".into(),
            instance: Some("pod-1".into()),
        },
    );
    let ev = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("all good".into()),
        action: "Sync".into(),
        secondary: None,
    };
    let reference = subject.object_ref(&());
    recorder
        .publish(&ev, &reference)
        .await
        .expect("first publish");
    recorder
        .publish(&ev, &reference)
        .await
        .expect("repeat publish");

    let new_api: Api<NewEvent> = Api::namespaced(client.clone(), NS);
    let list = new_api
        .list(&ListParams::default())
        .await
        .expect("list events.k8s.io");
    assert_eq!(
        list.items.len(),
        1,
        "a repeat is a series, not a second event"
    );
    let e = &list.items[0];
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(e.reporting_controller.as_deref(), Some("testkit-ctl"));

    let core_api: Api<CoreEvent> = Api::namespaced(client, NS);
    let core = core_api
        .list(&ListParams::default().fields("involvedObject.name=subject"))
        .await
        .expect("list core events");
    assert_eq!(core.items.len(), 1);
    assert_eq!(core.items[0].message.as_deref(), Some("all good"));
    assert_eq!(
        core.items[0].reporting_component.as_deref(),
        Some("testkit-ctl")
    );
}

/// Compare-before-write, as our controllers do: read, and apply only when something differs.
async fn ensure(api: &Api<ConfigMap>, desired: &ConfigMap) -> kube::Result<bool> {
    let name = desired.name_any();
    if let Some(cur) = api.get_opt(&name).await?
        && cur.data == desired.data
        && cur.labels() == desired.labels()
    {
        return Ok(false);
    }
    let mut body = serde_json::to_value(desired).map_err(kube::Error::SerdeError)?;
    body["apiVersion"] = json!("v1");
    body["kind"] = json!("ConfigMap");
    api.patch(
        &name,
        &PatchParams::apply("ensure-ctl").force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_log_shows_a_noop_reconcile_writes_nothing() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client_with_agent("ensure-ctl/1.0"), NS);
    let other: Api<ConfigMap> = Api::namespaced(cluster.client_with_agent("someone-else"), NS);
    let desired = cm("settings", &[("level", "2")]);

    assert!(ensure(&api, &desired).await.expect("first ensure"));
    assert!(!ensure(&api, &desired).await.expect("second ensure"));
    assert!(!ensure(&api, &desired).await.expect("third ensure"));
    assert_eq!(
        cluster.count_writes("ensure-ctl"),
        1,
        "only the first ensure writes"
    );
    assert_eq!(cluster.count_reads("ensure-ctl"), 3);

    // Someone else changes it: the next ensure writes again, and the log tells clients apart.
    other
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"level": "9"}})),
        )
        .await
        .expect("drift");
    assert!(ensure(&api, &desired).await.expect("ensure after drift"));
    assert_eq!(cluster.count_writes("ensure-ctl"), 2);
    assert_eq!(cluster.count_writes("someone-else"), 1);
    let patch = cluster
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.verb == "patch" && r.from_client("ensure-ctl"))
        .expect("the apply is logged");
    assert_eq!(patch.field_manager.as_deref(), Some("ensure-ctl"));
    assert_eq!(patch.path, "/api/v1/namespaces/default/configmaps/settings");

    // And the server agrees: an identical apply changes no resourceVersion.
    let rv = api.get("settings").await.expect("get").resource_version();
    let mut body = serde_json::to_value(&desired).expect("json");
    body["apiVersion"] = json!("v1");
    body["kind"] = json!("ConfigMap");
    let after = api
        .patch(
            "settings",
            &PatchParams::apply("ensure-ctl").force(),
            &Patch::Apply(body),
        )
        .await
        .expect("re-apply");
    assert_eq!(after.resource_version(), rv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_kinds_are_404_until_their_crd_exists() {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor");
    let ar = ApiResource::from_gvk(&gvk);
    let sm: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    match sm.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        other => panic!("expected 404 before the CRD exists, got {other:?}"),
    }

    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let established = crds
        .get("servicemonitors.monitoring.coreos.com")
        .await
        .expect("get crd");
    let conds = established
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "metrics"}, "spec": {"endpoints": [{"port": "metrics"}]}
    }))
    .expect("obj");
    sm.create(&PostParams::default(), &obj)
        .await
        .expect("create custom object");
    let got = sm.get("metrics").await.expect("get custom object");
    assert_eq!(got.data["spec"]["endpoints"][0]["port"], "metrics");

    // Discovery sees the new kind.
    let discovery = kube::Discovery::new(client).run().await.expect("discovery");
    assert!(
        discovery
            .groups()
            .any(|g| g.name() == "monitoring.coreos.com"),
        "the CRD's group is discoverable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_simulation_reports_rollouts_hangs_and_not_ready_nodes() {
    let cluster = Cluster::start().await;
    cluster.add_node("node-a", true);
    cluster.add_node("node-b", true);
    cluster.simulate_workloads(SimConfig {
        delay: Duration::from_millis(100),
        ..SimConfig::default()
    });
    let client = cluster.client();
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let daemons: Api<DaemonSet> = Api::namespaced(client, NS);
    let pod_template = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}});
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ctrl"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": pod_template}
    }))
    .expect("deployment");
    let ds: DaemonSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": pod_template}
    }))
    .expect("daemonset");
    deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create deployment");
    daemons
        .create(&PostParams::default(), &ds)
        .await
        .expect("create daemonset");

    eventually("the deployment to be available", || async {
        let s = deploys.get("ctrl").await.ok()?.status?;
        (s.available_replicas == Some(2) && s.observed_generation == Some(1)).then_some(())
    })
    .await;
    eventually("the daemonset to be ready on both nodes", || async {
        let s = daemons.get("node").await.ok()?.status?;
        (s.number_ready == 2 && s.desired_number_scheduled == 2).then_some(())
    })
    .await;

    // A hung rollout observes the new generation but never updates replicas.
    cluster.hang_rollout(NS, "ctrl");
    deploys
        .patch(
            "ctrl",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale");
    let s = eventually("the hung rollout to be observed", || async {
        let s = deploys.get("ctrl").await.ok()?.status?;
        (s.observed_generation == Some(2)).then_some(s)
    })
    .await;
    assert_eq!(s.updated_replicas, Some(0));
    let progressing = s
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .expect("Progressing condition");
    assert_eq!(
        progressing.reason.as_deref(),
        Some("ProgressDeadlineExceeded")
    );
    cluster.release_rollout(NS, "ctrl");
    eventually("the released rollout to finish", || async {
        let s = deploys.get("ctrl").await.ok()?.status?;
        (s.available_replicas == Some(3)).then_some(())
    })
    .await;

    // A NotReady node lowers the DaemonSet's ready count.
    cluster
        .set_node_ready("node-b", false)
        .expect("node exists");
    eventually("the daemonset to lose a ready pod", || async {
        let s = daemons.get("node").await.ok()?.status?;
        (s.number_ready == 1 && s.number_unavailable == Some(1)).then_some(())
    })
    .await;
    assert!(cluster.set_node_ready("missing", true).is_err());
    // The simulation writes status only: no spec change, generation stays.
    let dep = deploys.get("ctrl").await.expect("get");
    assert_eq!(dep.meta().generation, Some(2));
}

#[tokio::test]
async fn secret_string_data_is_stored_in_data() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Patch, PatchParams, PostParams};

    let cluster = testkit::Cluster::start().await;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(cluster.client(), "default");
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "creds"}, "data": {"a": "b2xk", "keep": "eA=="}, "stringData": {"a": "new"}
    }))
    .unwrap();
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let data = created.data.unwrap();
    assert_eq!(data["a"].0, b"new", "stringData wins over data");
    assert_eq!(data["keep"].0, b"x");
    assert!(created.string_data.is_none(), "stringData is never stored");

    // A rotation written as stringData changes data.
    secrets
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"stringData": {"a": "rotated"}})),
        )
        .await
        .unwrap();
    let rotated = secrets.get("creds").await.unwrap();
    assert_eq!(rotated.data.unwrap()["a"].0, b"rotated");
    assert!(rotated.string_data.is_none());
}

/// `watches_drained` says whether a client's open watches have been handed every event so
/// far: what `Background::converged` waits for before trusting a controller's "settled".
#[tokio::test]
async fn watches_are_drained_once_their_client_has_read_every_event() {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    let watched: Api<ConfigMap> = Api::namespaced(cluster.client_with_agent("watcher"), NS);
    assert!(cluster.watches_drained("watcher"), "no watch yet");

    let mut events = watched
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let configmaps: Api<ConfigMap> = Api::namespaced(admin, NS);
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
        )
        .await
        .unwrap();
    assert!(
        !cluster.watches_drained("watcher"),
        "the ADDED event is on its way"
    );
    assert!(
        cluster.watches_drained("someone-else"),
        "other clients have no watch"
    );
    let first = events.next().await.unwrap().unwrap();
    assert!(
        matches!(first, kube::api::WatchEvent::Added(_)),
        "{first:?}"
    );
    eventually("the watch to be drained", || async {
        cluster.watches_drained("watcher").then_some(())
    })
    .await;

    // A dropped stream is not waited for.
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "b"}})).unwrap(),
        )
        .await
        .unwrap();
    drop(events);
    eventually("the dropped watch to be forgotten", || async {
        cluster.watches_drained("watcher").then_some(())
    })
    .await;
}

/// The pod spec a DaemonSet with pod spec `spec` is stored with.
async fn stored_pod_spec(spec: serde_json::Value) -> serde_json::Value {
    use kube::api::PostParams;

    let cluster = Cluster::start().await;
    let daemon_sets: kube::Api<DaemonSet> = kube::Api::namespaced(cluster.client(), "default");
    let written: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "node"},
        "spec": {
            "selector": {"matchLabels": {"app": "node"}},
            "template": {"metadata": {"labels": {"app": "node"}}, "spec": spec},
        },
    }))
    .expect("a DaemonSet");
    let stored = daemon_sets
        .create(&PostParams::default(), &written)
        .await
        .expect("create the DaemonSet");
    let spec = stored
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod spec");
    serde_json::to_value(spec).expect("a pod spec as JSON")
}

/// A pod field reference is stored with `apiVersion: v1` whether or not it was written with
/// one, as kube-apiserver defaults it: an operator that leaves it out and one that writes it
/// produce the same pod template (and no rollout when one takes over from the other).
#[tokio::test]
async fn pod_field_references_default_to_the_core_version() {
    let spec = stored_pod_spec(json!({"containers": [{"name": "driver", "image": "driver:1", "env": [
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "OTHER", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "PLAIN", "value": "x"},
    ]}]}))
    .await;
    let env = &spec["containers"][0]["env"];
    assert_eq!(env[0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(env[1]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(env[2].get("valueFrom"), None);
}

/// A pod volume without a source is stored as an emptyDir, as kube-apiserver defaults it
/// (OpenShift's Azure assets have one, spelled `emptydir`, which the API drops); the other
/// volumes keep theirs.
#[tokio::test]
async fn a_pod_volume_without_a_source_is_an_empty_dir() {
    let spec = stored_pod_spec(json!({
        "containers": [{"name": "driver", "image": "driver:1"}],
        "volumes": [
            {"name": "scratch"},
            {"name": "host", "hostPath": {"path": "/dev", "type": "Directory"}},
        ],
    }))
    .await;
    let volumes = &spec["volumes"];
    assert_eq!(volumes[0], json!({"name": "scratch", "emptyDir": {}}));
    assert_eq!(volumes[1].get("emptyDir"), None);
    assert_eq!(volumes[1]["hostPath"]["path"], "/dev");
}

/// NetworkPolicies are served as kube-apiserver v1.36.2 serves them (checked there: discovery
/// as `networking.k8s.io/v1` `networkpolicies`, short name `netpol`; `metadata.generation`
/// counts spec changes), and server-side apply manages them.
#[tokio::test]
async fn network_policies_are_served_with_a_generation() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;

    let cluster = Cluster::start().await;
    let policies: Api<NetworkPolicy> = Api::namespaced(cluster.client(), NS);
    let policy = |port: i32| -> NetworkPolicy {
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "allow-metrics"},
            "spec": {"podSelector": {"matchLabels": {"a": "b"}},
                     "ingress": [{"ports": [{"protocol": "TCP", "port": port}]}],
                     "policyTypes": ["Ingress"]}
        }))
        .unwrap()
    };
    let params = PatchParams::apply("tester");
    let first = policies
        .patch("allow-metrics", &params, &Patch::Apply(policy(9080)))
        .await
        .unwrap();
    assert_eq!(first.metadata.generation, Some(1));
    let same = policies
        .patch("allow-metrics", &params, &Patch::Apply(policy(9080)))
        .await
        .unwrap();
    assert_eq!(same.metadata.generation, Some(1), "an unchanged apply");
    let changed = policies
        .patch("allow-metrics", &params, &Patch::Apply(policy(9081)))
        .await
        .unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    let ports = changed.spec.unwrap().ingress.unwrap()[0]
        .ports
        .clone()
        .unwrap();
    assert_eq!(ports.len(), 1, "the apply replaced the rule: {ports:?}");

    let discovery = kube::discovery::Discovery::new(cluster.client())
        .run()
        .await
        .unwrap();
    let (resource, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
        ))
        .unwrap();
    assert_eq!(resource.plural, "networkpolicies");
}

/// As kube-apiserver (KEP 1111): a CRD in one of the Kubernetes project's groups (`k8s.io`,
/// `kubernetes.io` and their subdomains) needs the `api-approved.kubernetes.io` annotation.
#[tokio::test]
async fn crds_of_protected_groups_need_their_api_approval() {
    let cluster = Cluster::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let crd = |group: &str, annotations: serde_json::Value| -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("things.{group}"), "annotations": annotations},
            "spec": {"group": group, "scope": "Cluster",
                     "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .expect("crd")
    };
    for group in ["snapshot.storage.k8s.io", "k8s.io", "x.kubernetes.io"] {
        match crds
            .create(&PostParams::default(), &crd(group, json!({})))
            .await
        {
            Err(kube::Error::Api(e)) => {
                assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{group}");
                assert!(
                    e.message
                        .contains("protected groups must have approval annotation"),
                    "{}",
                    e.message
                );
            }
            other => panic!("{group}: expected 422, got {other:?}"),
        }
    }
    let approved = json!({"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter/pull/419"});
    crds.create(
        &PostParams::default(),
        &crd("snapshot.storage.k8s.io", approved),
    )
    .await
    .expect("an approved CRD");
    // Other groups need nothing (a look-alike suffix is not the protected group).
    for group in ["example.com", "notk8s.io"] {
        crds.create(&PostParams::default(), &crd(group, json!({})))
            .await
            .unwrap_or_else(|e| panic!("{group}: {e}"));
    }
}

/// A copy of an applied object, created with the original's `managedFields` (as `kubectl
/// create` of `kubectl get -o yaml --show-managed-fields`, or the storage e2e suite's copy of a
/// StorageClass, sends it), is recorded as its creator's alone: every field is new, so the
/// original's managers own none of it. kube-apiserver v1.36.2 answers the same (checked with
/// kubectl on `../shared/k8s`: the copy's only entry is `kubectl-create`, Update). Our
/// controllers rely on it to tell their objects from copies (`opkit::ownership`).
#[tokio::test]
async fn a_copy_created_with_the_originals_managed_fields_is_its_creators_alone() {
    use k8s_openapi::api::storage::v1::StorageClass;
    let cluster = Cluster::start().await;
    let classes: Api<StorageClass> = Api::all(cluster.client());
    let original = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "orig", "labels": {"a": "b"}}, "provisioner": "x.example.com"});
    classes
        .patch(
            "orig",
            &PatchParams::apply("storage-operator/test").force(),
            &Patch::Apply(&original),
        )
        .await
        .unwrap();
    let stored = serde_json::to_value(classes.get("orig").await.unwrap()).unwrap();
    let copy = testkit::copy_of(&stored, "copy");
    assert!(
        copy["metadata"]["managedFields"].is_array(),
        "the copy is sent with the original's managedFields"
    );
    let created = classes
        .create(
            &PostParams {
                field_manager: Some("kubectl-create".into()),
                ..PostParams::default()
            },
            &serde_json::from_value(copy).unwrap(),
        )
        .await
        .unwrap();
    let entries: Vec<(String, String)> = created
        .managed_fields()
        .iter()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [("kubectl-create".to_owned(), "Update".to_owned())]
    );
    assert_eq!(created.labels()["a"], "b", "the labels are copied");
}

/// An object created with nothing but its name has no managedFields at all: the creator set no
/// field, and kube-apiserver v1.36.2 keeps no empty entry (a ServiceAccount created so under
/// field manager `cluster-storage-operator` on `../shared/k8s` has none). So the lack of an
/// entry says nothing about who made it.
#[tokio::test]
async fn an_object_created_with_only_its_name_has_no_managed_fields() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let cluster = Cluster::start().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), NS);
    let created = accounts
        .create(
            &PostParams {
                field_manager: Some("cluster-storage-operator".into()),
                ..PostParams::default()
            },
            &serde_json::from_value(json!({"metadata": {"name": "bare"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.managed_fields, None, "{created:?}");
    let with_a_label = accounts
        .create(
            &PostParams {
                field_manager: Some("cluster-storage-operator".into()),
                ..PostParams::default()
            },
            &serde_json::from_value(
                json!({"metadata": {"name": "labelled", "labels": {"a": "b"}}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        with_a_label
            .managed_fields()
            .iter()
            .map(|e| e.manager.clone().unwrap_or_default())
            .collect::<Vec<_>>(),
        ["cluster-storage-operator"]
    );
}

/// A Deployment recreated on update has no rolling update parameters: kube-apiserver v1.36.2
/// refuses them with this 422 (the body below is its answer, read on `../shared/k8s`), also
/// when a server-side apply of `Recreate` meets a RollingUpdate another manager owns.
#[tokio::test]
async fn a_recreate_deployment_with_rolling_update_parameters_is_refused_as_the_apiserver_does() {
    let cluster = Cluster::start().await;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), NS);
    let deployment = |strategy: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": NS},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "strategy": strategy,
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    };
    let refused = deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment(
                json!({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
            ))
            .unwrap(),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "Deployment.apps \"d\" is invalid: spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
    );

    // Created by someone else with the defaults (RollingUpdate, 25%), then applied as
    // Recreate by another manager: the defaults stay the creator's, and the merge is refused.
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment(json!({}))).unwrap(),
        )
        .await
        .unwrap();
    let applied = deployments
        .patch(
            "d",
            &PatchParams::apply("other").force(),
            &Patch::Apply(deployment(json!({"type": "Recreate"}))),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&applied, kube::Error::Api(s) if s.code == 422),
        "{applied}"
    );
}

/// An apply carrying a `resourceVersion` is conditional, as on kube-apiserver v1.36.2 (checked
/// there with the same requests): it creates an absent object (the version is ignored, and not
/// owned by the applier), and refuses an existing one whose version differs with 409 Conflict.
/// `opkit::apply` relies on it to create without merging into someone else's object.
#[tokio::test]
async fn an_apply_with_a_resource_version_only_creates_or_matches() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    let body = |version: &str, value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "only-created", "resourceVersion": version},
            "data": {"a": value}})
    };
    let params = PatchParams::apply("creator").force();
    let created = api
        .patch("only-created", &params, &Patch::Apply(body("1", "b")))
        .await
        .expect("an absent object is created");
    assert_ne!(created.resource_version().as_deref(), Some("1"));
    assert_eq!(
        managers(&created).get("creator"),
        Some(&json!({"f:data": {"f:a": {}}})),
        "the version is not a field of the applier"
    );

    let error = api
        .patch("only-created", &params, &Patch::Apply(body("1", "c")))
        .await
        .expect_err("an existing object of another version is refused");
    let kube::Error::Api(status) = error else {
        panic!("expected an API error, got {error:?}")
    };
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    assert_eq!(
        status.message,
        "Operation cannot be fulfilled on configmaps \"only-created\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let unchanged = api.get("only-created").await.unwrap();
    assert_eq!(unchanged.data.unwrap()["a"], "b");

    let current = created.resource_version().unwrap();
    let updated = api
        .patch("only-created", &params, &Patch::Apply(body(&current, "d")))
        .await
        .expect("the current version matches");
    assert_eq!(updated.data.unwrap()["a"], "d");
}
