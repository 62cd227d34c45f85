//! For the tests whose pods must really run (the node of `../shared/k8s/node.sh`, or a real
//! cluster's nodes): waits that, when they give up, say why with the pods' state, the
//! namespaces' Events and the containers' logs, and reads through the API server's pod proxy.

use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client, ResourceExt};

/// How long a wait for running pods lasts: image imports, probes and volume mounts take longer
/// than object changes.
pub const TIMEOUT: Duration = Duration::from_secs(180);

/// Panics, saying how to get one, unless the cluster has a Node.
pub async fn require_node(admin: &Client) {
    if !crate::has_nodes(admin).await {
        panic!(
            "this test needs a node where pods run: start one with ../shared/k8s/node.sh (after start.sh --kcm), as .ci/run does"
        );
    }
}

/// What the pods of `namespaces` are doing: phase and conditions, each container's state, the
/// namespaces' Events (oldest first) and the last lines of every container's log.
pub async fn explain(admin: &Client, namespaces: &[&str]) -> String {
    let mut out = String::new();
    for namespace in namespaces {
        let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
        let listed = pods.list(&ListParams::default()).await;
        let Ok(listed) = listed else {
            let _ = writeln!(out, "namespace {namespace}: pods unreadable: {listed:?}");
            continue;
        };
        for pod in &listed.items {
            let status = pod.status.clone().unwrap_or_default();
            let _ = writeln!(
                out,
                "pod {namespace}/{}: {}",
                pod.name_any(),
                status.phase.as_deref().unwrap_or("?")
            );
            for c in status.container_statuses.iter().flatten() {
                let state = serde_json::to_string(&c.state).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  container {}: ready={} restarts={} state={state}",
                    c.name, c.ready, c.restart_count
                );
            }
            let containers = pod.spec.iter().flat_map(|s| &s.containers);
            for container in containers {
                let params = LogParams {
                    container: Some(container.name.clone()),
                    tail_lines: Some(20),
                    ..LogParams::default()
                };
                match pods.logs(&pod.name_any(), &params).await {
                    Ok(log) if !log.trim().is_empty() => {
                        let _ = writeln!(out, "  log of {}:", container.name);
                        for line in log.lines() {
                            let _ = writeln!(out, "    {line}");
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = writeln!(out, "  log of {}: unavailable ({e})", container.name);
                    }
                }
            }
        }
        let events: Api<Event> = Api::namespaced(admin.clone(), namespace);
        if let Ok(mut events) = events.list(&ListParams::default()).await {
            events
                .items
                .sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
            for e in events.items {
                let _ = writeln!(
                    out,
                    "event {namespace} {}/{}: {} {}: {}",
                    e.involved_object.kind.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default(),
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default()
                );
            }
        }
    }
    out
}

/// Polls `check` every second for up to [`TIMEOUT`]; on time-out panics naming `what`, with
/// [`explain`] of `namespaces` and the requests the API server refused an operator.
pub async fn wait_or_explain<T>(
    admin: &Client,
    namespaces: &[&str],
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let refused = crate::identity::all_refusals();
    panic!(
        "timed out after {}s waiting for {what}\n{}{}",
        TIMEOUT.as_secs(),
        explain(admin, namespaces).await,
        if refused.is_empty() {
            String::new()
        } else {
            format!("the API server refused:\n{}", refused.join("\n"))
        }
    );
}

/// `GET path` on `port` of a pod, through the API server's pod proxy: the status code and body.
pub async fn proxy_get(
    admin: &Client,
    namespace: &str,
    pod: &str,
    port: u16,
    path: &str,
) -> Result<(u16, String), String> {
    let uri = format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{path}");
    let request = http::Request::get(&uri)
        .body(Vec::new())
        .map_err(|e| format!("building GET {uri}: {e}"))?;
    match admin.request_text(request).await {
        Ok(body) => Ok((200, body)),
        Err(kube::Error::Api(status)) => Ok((status.code, status.message)),
        Err(e) => Err(format!("GET {uri}: {e}")),
    }
}

/// The Ready pods of `namespace` matching `selector`.
pub async fn ready_pods(admin: &Client, namespace: &str, selector: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let listed = pods
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap_or_else(|e| panic!("listing pods {selector} of {namespace}: {e}"));
    listed
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .collect()
}
