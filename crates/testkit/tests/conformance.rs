//! Replays the recorded kube-apiserver v1.36.2 scenarios (`tests/conformance/*.json`) against
//! testkit and compares every response by the rules of the recording's README: volatile paths
//! masked, resourceVersions compared by order through one consistent mapping, managedFields exact
//! except `time`, error `Status` bodies by code/status/reason/details (messages with numbers
//! normalised), JSON key order ignored, watches by event type and object with BOOKMARKs dropped,
//! timing fields ignored.
//!
//! `EXPECTED_DIVERGENCES` is the documented list of gaps. The test fails on a divergence that is
//! not listed and on a listed step that no longer diverges, so the list can only shrink honestly.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use testkit::{Cluster, ServerConfig};
use tower::ServiceExt;

/// (scenario file stem, step index, where the replay differs, why testkit differs there).
/// "Where" is exactly what the replay finds first: `status <recorded> -> <replay>`, or the JSON
/// path of the first differing field; a step that diverges anywhere else fails the test.
const EXPECTED_DIVERGENCES: &[(&str, usize, &str, &str)] = &[
    (
        "05-watch-basic",
        7,
        "resourceVersion order",
        "list RV: the recorded cluster had background writes, testkit has none",
    ),
    (
        "06-watch-bookmarks-selector",
        5,
        "$[0].object.apiVersion",
        "watch with bookmarks and no RV works; recorded etcd failed it (RequestWatchProgress disabled)",
    ),
    (
        "07-watch-expired-streaming",
        13,
        "resourceVersion order",
        "list RV: recorded cluster had background writes",
    ),
    (
        "07-watch-expired-streaming",
        14,
        "resourceVersion order",
        "list RV: recorded cluster had background writes",
    ),
    (
        "07-watch-expired-streaming",
        16,
        "resourceVersion order",
        "list RV: recorded cluster had background writes",
    ),
    (
        "07-watch-expired-streaming",
        18,
        "$",
        "streaming list works; recorded etcd failed it (RequestWatchProgress disabled)",
    ),
    (
        "07-watch-expired-streaming",
        19,
        "resourceVersion order",
        "list RV: recorded cluster had background writes",
    ),
    (
        "07-watch-expired-streaming",
        21,
        "$",
        "streaming list works; recorded etcd failed it (RequestWatchProgress disabled)",
    ),
    (
        "07-watch-expired-streaming",
        22,
        "$",
        "streaming list works; recorded etcd failed it (RequestWatchProgress disabled)",
    ),
    (
        "08-crud",
        9,
        "$.data.k",
        "recording artifact: the request body was mutated after sending (shows v3, server got v2)",
    ),
    (
        "09-validation",
        15,
        "$.message",
        "Strict patch 422 message (embeds the patched object as Go JSON) not reproduced",
    ),
    (
        "16-leases",
        2,
        "status 400 -> 200",
        "recording artifact: request body mutated after sending (server got renewTime .5Z)",
    ),
    (
        "16-leases",
        3,
        "status 200 -> 409",
        "recording artifact: request body mutated after sending (server got holder pod-a)",
    ),
    (
        "16-leases",
        6,
        "status 200 -> 409",
        "follows from the step-2/3 recording artifact (stale resourceVersion)",
    ),
    (
        "16-leases",
        10,
        "$.message",
        "422 message for a bad MicroTime in a patch is not reproduced",
    ),
];

const SCENARIOS: &[&str] = &[
    "01-discovery",
    "02-ssa-basic",
    "03-ssa-ownership",
    "04-ssa-lists-status",
    "05-watch-basic",
    "06-watch-bookmarks-selector",
    "07-watch-expired-streaming",
    "08-crud",
    "09-validation",
    "10-generation",
    "11-patches",
    "12-finalizers",
    "13-ownerrefs-gc",
    "14-lists-selectors-paging",
    "15-events",
    "16-leases",
    "17-status-subresource",
    "18-managed-fields-takeover",
];

fn load(name: &str) -> Value {
    let path = format!(
        "{}/tests/conformance/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

/// Recorded-to-replayed translations learnt while replaying one scenario.
#[derive(Default)]
struct Maps {
    rv: BTreeMap<u64, u64>,
    uid: BTreeMap<String, String>,
    cont: BTreeMap<String, String>,
}

impl Maps {
    /// Adds an RV pair; an inconsistent pair (breaking equality or order) is an error.
    fn rv_pair(&mut self, rec: &str, rep: &str) -> Result<(), String> {
        let (Ok(r), Ok(p)) = (rec.parse::<u64>(), rep.parse::<u64>()) else {
            return if rec == rep {
                Ok(())
            } else {
                Err(format!("resourceVersion {rec:?} vs {rep:?}"))
            };
        };
        if let Some(&q) = self.rv.get(&r) {
            return if q == p {
                Ok(())
            } else {
                Err(format!(
                    "recorded rv {r} already maps to {q}, replay gave {p}"
                ))
            };
        }
        if let Some((&r0, &p0)) = self.rv.range(..r).next_back()
            && p0 >= p
        {
            return Err(format!(
                "rv order: recorded {r0}<{r} but replayed {p0}>={p}"
            ));
        }
        if let Some((&r1, &p1)) = self.rv.range(r + 1..).next()
            && p1 <= p
        {
            return Err(format!(
                "rv order: recorded {r}<{r1} but replayed {p}>={p1}"
            ));
        }
        self.rv.insert(r, p);
        Ok(())
    }

    /// The replay's RV for a recorded one; an RV never seen in a response (the recorded cluster
    /// had background writers) maps to the replay's RV at the same point: the nearest lower one.
    fn map_rv(&self, rec: &str) -> String {
        match rec.parse::<u64>() {
            Ok(r) => match self.rv.range(..=r).next_back() {
                Some((_, p)) => p.to_string(),
                None => rec.to_string(),
            },
            Err(_) => rec.to_string(),
        }
    }
}

/// Collects rv/uid/continue pairs from parallel positions of the two documents.
fn learn(rec: &Value, rep: &Value, maps: &mut Maps, errors: &mut Vec<String>) {
    match (rec, rep) {
        (Value::Object(a), Value::Object(b)) => {
            if let (Some(Value::Object(ma)), Some(Value::Object(mb))) =
                (a.get("metadata"), b.get("metadata"))
            {
                if let (Some(Value::String(x)), Some(Value::String(y))) =
                    (ma.get("resourceVersion"), mb.get("resourceVersion"))
                    && let Err(e) = maps.rv_pair(x, y)
                {
                    errors.push(e);
                }
                if let (Some(Value::String(x)), Some(Value::String(y))) =
                    (ma.get("uid"), mb.get("uid"))
                {
                    maps.uid.insert(x.clone(), y.clone());
                }
                if let (Some(Value::String(x)), Some(Value::String(y))) =
                    (ma.get("continue"), mb.get("continue"))
                {
                    maps.cont.insert(x.clone(), y.clone());
                }
            }
            for (k, va) in a {
                if k == "metadata" {
                    continue;
                }
                if let Some(vb) = b.get(k) {
                    learn(va, vb, maps, errors);
                }
            }
            if let (Some(ma), Some(mb)) = (a.get("metadata"), b.get("metadata")) {
                for (k, va) in ma.as_object().into_iter().flatten() {
                    if let Some(vb) = mb.get(k) {
                        learn(va, vb, maps, errors);
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (x, y) in a.iter().zip(b) {
                learn(x, y, maps, errors);
            }
        }
        _ => {}
    }
}

/// Rewrites recorded uids and resourceVersions in a request body to the replay's.
fn translate_body(v: &mut Value, maps: &Maps) {
    match v {
        Value::Object(m) => {
            // A JSON patch `test` op guarding a write with the object's resourceVersion.
            let tests_rv =
                m.get("path").and_then(Value::as_str) == Some("/metadata/resourceVersion");
            for (k, x) in m.iter_mut() {
                if k == "resourceVersion" || (tests_rv && k == "value") {
                    if let Value::String(s) = x {
                        *s = maps.map_rv(s);
                    }
                } else {
                    translate_body(x, maps);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| translate_body(x, maps)),
        Value::String(s) => {
            if let Some(u) = maps.uid.get(s.as_str()) {
                *s = u.clone();
            }
        }
        _ => {}
    }
}

/// A volatile path split into segments; `[*]` matches any list index.
fn parse_mask(p: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in p.split('.') {
        if let Some(name) = part.strip_suffix("[*]") {
            out.push(name.to_string());
            out.push("[*]".into());
        } else if let Some((name, idx)) = part.strip_suffix(']').and_then(|p| p.split_once('[')) {
            out.push(name.to_string());
            out.push(format!("[{idx}]"));
        } else {
            out.push(part.to_string());
        }
    }
    out
}

fn mask_at(v: &mut Value, path: &[String]) {
    let Some((head, rest)) = path.split_first() else {
        *v = json!("<masked>");
        return;
    };
    if head == "[*]" {
        if let Value::Array(a) = v {
            for x in a {
                mask_at(x, rest);
            }
        }
    } else if let Some(i) = head
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .and_then(|h| h.parse::<usize>().ok())
    {
        if let Some(x) = v.get_mut(i) {
            mask_at(x, rest);
        }
    } else if let Some(x) = v.get_mut(head.as_str()) {
        mask_at(x, rest);
    }
}

/// Applies an unprefixed mask at every depth.
fn mask_everywhere(v: &mut Value, path: &[String]) {
    mask_at(v, path);
    match v {
        Value::Object(m) => m.values_mut().for_each(|x| mask_everywhere(x, path)),
        Value::Array(a) => a.iter_mut().for_each(|x| mask_everywhere(x, path)),
        _ => {}
    }
}

/// Replaces uids (`8-4-4-4-12` hex) and runs of 3+ digits, which embed volatile values.
fn normalise_message(s: &str) -> String {
    let mut s = s.to_string();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut cleaned = String::new();
    while i < b.len() {
        if i + 36 <= b.len() {
            let cand: String = b[i..i + 36].iter().collect();
            let shape = cand.char_indices().all(|(j, c)| {
                if matches!(j, 8 | 13 | 18 | 23) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
            if shape {
                cleaned.push_str("<uid>");
                i += 36;
                continue;
            }
        }
        cleaned.push(b[i]);
        i += 1;
    }
    s = cleaned;
    let mut out = String::new();
    let mut run = String::new();
    // Runs of 3+ digits are resourceVersions and the like; shorter numbers (counts, `v1`) stay.
    let flush = |run: &mut String, out: &mut String| {
        if run.len() >= 3 {
            out.push('#');
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in s.chars() {
        if c.is_ascii_digit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The parts of an error `Status` the README says to compare.
fn status_view(v: &Value) -> Value {
    let d = &v["details"];
    let causes: Vec<Value> = d["causes"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| json!({"reason": c["reason"], "field": c["field"]}))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "code": v["code"], "status": v["status"], "reason": v["reason"],
        "message": v["message"].as_str().map(normalise_message),
        "details": {"name": d["name"], "group": d["group"], "kind": d["kind"], "causes": causes},
    })
}

fn is_error_status(v: &Value) -> bool {
    v["kind"] == "Status" && v["status"] == "Failure"
}

/// Replaces error Status bodies (also inside watch ERROR events) by their compared view.
fn view(v: &Value) -> Value {
    if is_error_status(v) {
        return status_view(v);
    }
    match v {
        Value::Array(a) => Value::Array(a.iter().map(view).collect()),
        Value::Object(m) if m.get("type").is_some() && m.get("object").is_some() => {
            let mut m = m.clone();
            if let Some(o) = m.get("object").cloned() {
                m.insert("object".into(), view(&o));
            }
            Value::Object(m)
        }
        other => other.clone(),
    }
}

/// First difference between two JSON documents, as a path and both values.
/// Where two documents first differ: the JSON path, and what each side has there.
fn first_diff(a: &Value, b: &Value, path: &str) -> Option<Divergence> {
    let at = |detail: String| Divergence {
        at: path.to_owned(),
        detail,
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                let missing = |detail: String| Divergence {
                    at: p.clone(),
                    detail,
                };
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => {
                        if let Some(d) = first_diff(u, v, &p) {
                            return Some(d);
                        }
                    }
                    (Some(u), None) => {
                        return Some(missing(format!("recorded {}, replay missing", trunc(u))));
                    }
                    (None, Some(v)) => {
                        return Some(missing(format!("recorded missing, replay {}", trunc(v))));
                    }
                    (None, None) => {}
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(at(format!(
                    "recorded {} items, replay {} items: {}",
                    x.len(),
                    y.len(),
                    trunc(&Value::Array(y.clone()))
                )));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (u, v))| first_diff(u, v, &format!("{path}[{i}]")))
        }
        _ => (a != b).then(|| at(format!("recorded {}, replay {}", trunc(a), trunc(b)))),
    }
}

fn trunc(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 300 {
        format!("{}...", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

struct Replayed {
    status: u16,
    content_type: String,
    warnings: Vec<String>,
    body: Value,
}

async fn send(cluster: &Cluster, ua: &str, step: &Value, maps: &Maps) -> Replayed {
    let req = &step["request"];
    let mut query: Vec<String> = Vec::new();
    for (k, v) in req["query"].as_object().into_iter().flatten() {
        let mut v = v.as_str().unwrap_or("").to_string();
        if k == "resourceVersion" {
            v = maps.map_rv(&v);
        }
        if k == "continue"
            && let Some(c) = maps.cont.get(&v)
        {
            v = c.clone();
        }
        query.push(format!("{}={}", encode(k), encode(&v)));
    }
    let path = req["path"].as_str().unwrap_or("/");
    let uri = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", query.join("&"))
    };
    let body = match &req["body"] {
        Value::Null => Bytes::new(),
        Value::String(s) => Bytes::from(s.clone()),
        other => {
            let mut b = other.clone();
            translate_body(&mut b, maps);
            Bytes::from(b.to_string())
        }
    };
    let mut builder = Request::builder()
        .method(req["method"].as_str().unwrap_or("GET"))
        .uri(uri)
        .header("User-Agent", ua);
    for (k, v) in req["headers"].as_object().into_iter().flatten() {
        if let Some(v) = v.as_str() {
            builder = builder.header(k.as_str(), v);
        }
    }
    let request = builder.body(Full::new(body)).expect("request");
    let resp = cluster
        .service(None)
        .oneshot(request)
        .await
        .expect("infallible");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let warnings: Vec<String> = resp
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let is_watch = req["query"]["watch"] == "true";
    let body = if is_watch && status == 200 {
        Value::Array(
            bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap_or(Value::Null))
                .collect(),
        )
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Replayed {
        status,
        content_type,
        warnings,
        body,
    }
}

fn unmap_uids(v: &Value, back: &[(String, String)]) -> Value {
    let fix = |s: &str| {
        let mut s = s.to_string();
        for (p, r) in back {
            if s.contains(p.as_str()) {
                s = s.replace(p.as_str(), r);
            }
        }
        s
    };
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (fix(k), unmap_uids(x, back)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| unmap_uids(x, back)).collect()),
        Value::String(s) => Value::String(fix(s)),
        other => other.clone(),
    }
}

fn drop_bookmarks(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| e["type"] != "BOOKMARK")
                .cloned()
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Discovery documents of the kinds testkit does not serve: (scenario, step, the entries of
/// the recorded document that testkit leaves out, as `/`-joined keys). Every entry testkit does
/// serve is compared exactly with the recorded one; the list of what it leaves out must be this.
const NOT_SERVED: &[(&str, usize, &[&str])] = &[
    (
        "01-discovery",
        2,
        &[
            "bindings",
            "componentstatuses",
            "endpoints",
            "limitranges",
            "namespaces/finalize",
            "nodes/proxy",
            "pods/attach",
            "pods/binding",
            "pods/ephemeralcontainers",
            "pods/eviction",
            "pods/exec",
            "pods/log",
            "pods/portforward",
            "pods/proxy",
            "pods/resize",
            "podtemplates",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
            "serviceaccounts/token",
            "services/proxy",
        ],
    ),
    (
        "01-discovery",
        3,
        &[
            "apiregistration.k8s.io",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "autoscaling",
            "batch",
            "certificates.k8s.io",
            "admissionregistration.k8s.io",
            "scheduling.k8s.io",
            "node.k8s.io",
            "discovery.k8s.io",
            "resource.k8s.io",
            "flowcontrol.apiserver.k8s.io",
        ],
    ),
    (
        "01-discovery",
        4,
        &[
            "apiregistration.k8s.io",
            "apps/v1/controllerrevisions",
            "apps/v1/deployments/scale",
            "apps/v1/replicasets/scale",
            "apps/v1/statefulsets/scale",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "autoscaling",
            "batch",
            "certificates.k8s.io",
            "networking.k8s.io/v1/ingressclasses",
            "networking.k8s.io/v1/ingresses",
            "networking.k8s.io/v1/ipaddresses",
            "networking.k8s.io/v1/servicecidrs",
            "storage.k8s.io/v1/csistoragecapacities",
            "storage.k8s.io/v1/volumeattributesclasses",
            "admissionregistration.k8s.io",
            "scheduling.k8s.io",
            "node.k8s.io",
            "discovery.k8s.io",
            "resource.k8s.io",
            "flowcontrol.apiserver.k8s.io",
        ],
    ),
    (
        "01-discovery",
        5,
        &[
            "v1/bindings",
            "v1/componentstatuses",
            "v1/endpoints",
            "v1/limitranges",
            "v1/namespaces/finalize",
            "v1/nodes/proxy",
            "v1/pods/attach",
            "v1/pods/binding",
            "v1/pods/ephemeralcontainers",
            "v1/pods/eviction",
            "v1/pods/exec",
            "v1/pods/log",
            "v1/pods/portforward",
            "v1/pods/proxy",
            "v1/pods/resize",
            "v1/podtemplates",
            "v1/replicationcontrollers",
            "v1/resourcequotas",
            "v1/serviceaccounts/token",
            "v1/services/proxy",
        ],
    ),
    (
        "01-discovery",
        6,
        &[
            "controllerrevisions",
            "deployments/scale",
            "replicasets/scale",
            "statefulsets/scale",
        ],
    ),
    (
        "01-discovery",
        7,
        &["csistoragecapacities", "volumeattributesclasses"],
    ),
    (
        "01-discovery",
        20,
        &[
            "apiregistration.k8s.io",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "autoscaling",
            "batch",
            "certificates.k8s.io",
            "admissionregistration.k8s.io",
            "scheduling.k8s.io",
            "node.k8s.io",
            "discovery.k8s.io",
            "resource.k8s.io",
            "flowcontrol.apiserver.k8s.io",
        ],
    ),
    (
        "01-discovery",
        21,
        &[
            "apiregistration.k8s.io",
            "apps/v1/controllerrevisions",
            "apps/v1/deployments/scale",
            "apps/v1/replicasets/scale",
            "apps/v1/statefulsets/scale",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "autoscaling",
            "batch",
            "certificates.k8s.io",
            "networking.k8s.io/v1/ingressclasses",
            "networking.k8s.io/v1/ingresses",
            "networking.k8s.io/v1/ipaddresses",
            "networking.k8s.io/v1/servicecidrs",
            "storage.k8s.io/v1/csistoragecapacities",
            "storage.k8s.io/v1/volumeattributesclasses",
            "admissionregistration.k8s.io",
            "scheduling.k8s.io",
            "node.k8s.io",
            "discovery.k8s.io",
            "resource.k8s.io",
            "flowcontrol.apiserver.k8s.io",
        ],
    ),
];

/// A discovery read: `/api`, `/apis` and what is under them without a resource.
fn is_discovery(step: &Value) -> bool {
    let request = &step["request"];
    let path = request["path"].as_str().unwrap_or_default();
    let parts = path.trim_start_matches('/').split('/').count();
    request["method"] == "GET"
        && step["response"]["status"] == 200
        && ((path.starts_with("/api") && parts <= 2) || (path.starts_with("/apis") && parts <= 3))
}

/// What identifies an entry of a discovery list.
fn entry_key(entry: &Value) -> Option<&str> {
    ["name", "resource", "subresource", "version"]
        .iter()
        .find_map(|k| entry.get(*k).and_then(Value::as_str))
        .or_else(|| entry["metadata"]["name"].as_str())
}

/// The recorded document cut down to the entries the replay has (lists of named entries keep
/// only the names the replay lists, at every depth); what was cut goes into `dropped`.
fn served_subset(rec: &Value, rep: &Value, prefix: &str, dropped: &mut Vec<String>) -> Value {
    match (rec, rep) {
        (Value::Object(a), Value::Object(b)) => Value::Object(
            a.iter()
                .filter_map(|(k, v)| match (b.get(k), v) {
                    (Some(w), _) => Some((k.clone(), served_subset(v, w, prefix, dropped))),
                    // A list of named entries the replay has none of (e.g. subresources).
                    (None, Value::Array(entries))
                        if !entries.is_empty()
                            && entries.iter().all(|e| entry_key(e).is_some()) =>
                    {
                        for entry in entries {
                            dropped
                                .push(format!("{prefix}{}", entry_key(entry).unwrap_or_default()));
                        }
                        None
                    }
                    (None, _) => Some((k.clone(), v.clone())),
                })
                .collect(),
        ),
        (Value::Array(a), Value::Array(b)) if a.iter().all(|e| entry_key(e).is_some()) => {
            let served: BTreeMap<&str, &Value> =
                b.iter().filter_map(|e| Some((entry_key(e)?, e))).collect();
            let mut kept = Vec::new();
            for entry in a {
                let key = entry_key(entry).unwrap_or_default();
                let path = format!("{prefix}{key}");
                match served.get(key) {
                    Some(other) => {
                        kept.push(served_subset(entry, other, &format!("{path}/"), dropped));
                    }
                    None => dropped.push(path),
                }
            }
            Value::Array(kept)
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => Value::Array(
            a.iter()
                .zip(b)
                .map(|(u, v)| served_subset(u, v, prefix, dropped))
                .collect(),
        ),
        _ => rec.clone(),
    }
}

/// How a replayed step differs from the recording: `at` is what differs (`status 500 -> 200`,
/// `Content-Type`, `Warning`, `resourceVersion order`, or the JSON path of the first differing
/// field), `detail` the values.
#[derive(Debug)]
struct Divergence {
    at: String,
    detail: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.detail)
    }
}

/// Compares one step; `None` when it matches.
fn compare(
    name: &str,
    idx: usize,
    step: &Value,
    got: &Replayed,
    volatile: &[String],
    maps: &mut Maps,
) -> Option<Divergence> {
    let resp = &step["response"];
    let rec_status = resp["status"].as_u64().unwrap_or(0) as u16;
    if rec_status != got.status {
        return Some(Divergence {
            at: format!("status {rec_status} -> {}", got.status),
            detail: trunc(&got.body),
        });
    }
    let rec_ct = resp["headers"]["Content-Type"].as_str().unwrap_or("");
    if rec_ct != got.content_type {
        return Some(Divergence {
            at: "Content-Type".to_owned(),
            detail: format!("recorded {rec_ct:?}, replay {:?}", got.content_type),
        });
    }
    let rec_warnings: Vec<String> = resp["headers"]["Warning"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect();
    if rec_warnings != got.warnings {
        return Some(Divergence {
            at: "Warning".to_owned(),
            detail: format!("recorded {rec_warnings:?}, replay {:?}", got.warnings),
        });
    }
    let is_watch = step["request"]["query"]["watch"] == "true";
    let (mut rec, mut rep) = if is_watch {
        (drop_bookmarks(&resp["body"]), drop_bookmarks(&got.body))
    } else {
        (resp["body"].clone(), got.body.clone())
    };
    let mut errors = Vec::new();
    learn(&rec, &rep, maps, &mut errors);
    // uids are volatile, also where they are embedded (fieldsV1 `k:{"uid":...}` keys, messages).
    let back: Vec<(String, String)> = maps
        .uid
        .iter()
        .map(|(r, p)| (p.clone(), r.clone()))
        .collect();
    rep = unmap_uids(&rep, &back);
    for p in volatile {
        if let Some(abs) = p.strip_prefix("$.steps[") {
            let Some((n, rest)) = abs.split_once("].response.body.") else {
                continue;
            };
            if n.parse::<usize>().ok() == Some(idx) {
                let segs = parse_mask(rest);
                mask_at(&mut rec, &segs);
                mask_at(&mut rep, &segs);
            }
        } else if !p.starts_with("query.") {
            let segs = parse_mask(p);
            mask_everywhere(&mut rec, &segs);
            mask_everywhere(&mut rep, &segs);
        }
    }
    let (mut rec, rep) = (view(&rec), view(&rep));
    let dropped = if is_discovery(step) {
        let mut dropped = Vec::new();
        rec = served_subset(&rec, &rep, "", &mut dropped);
        dropped
    } else {
        Vec::new()
    };
    let not_served: Vec<&str> = NOT_SERVED
        .iter()
        .filter(|(s, i, _)| *s == name && *i == idx)
        .flat_map(|(_, _, keys)| keys.iter().copied())
        .collect();
    if dropped != not_served {
        return Some(Divergence {
            at: "served kinds".to_owned(),
            detail: format!(
                "testkit leaves out {dropped:?}; NOT_SERVED lists {not_served:?} for this step"
            ),
        });
    }
    if let Some(d) = first_diff(&rec, &rep, "$") {
        return Some(d);
    }
    errors.into_iter().next().map(|detail| Divergence {
        at: "resourceVersion order".to_owned(),
        detail,
    })
}

async fn replay(name: &str, crds: &[Value]) -> BTreeMap<usize, Divergence> {
    let sc = load(name);
    let ua = sc["user_agent"]
        .as_str()
        .unwrap_or("record-conformance/1.0");
    let cluster = Cluster::start_empty(ServerConfig {
        frozen_time: Some("2026-11-22T21:41:43Z".into()),
        // Like a fresh real server, so resourceVersions in messages are 3+ digit numbers.
        initial_resource_version: 200,
        max_watch_timeout: Duration::from_millis(300),
        bookmark_interval: Duration::from_secs(3600),
        ..ServerConfig::default()
    })
    .await;
    let mut maps = Maps::default();
    if name != "01-discovery" {
        for crd in crds {
            let r = send(&cluster, ua, crd, &maps).await;
            assert_eq!(r.status, 201, "prelude CRD creation failed: {}", r.body);
        }
    }
    let volatile: Vec<String> = sc["volatile"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let mut out = BTreeMap::new();
    for (i, step) in sc["steps"].as_array().into_iter().flatten().enumerate() {
        let got = send(&cluster, ua, step, &maps).await;
        if let Some(d) = compare(name, i, step, &got, &volatile, &mut maps) {
            out.insert(i, d);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_recorded_apiserver_scenarios() {
    let discovery = load("01-discovery");
    let crds: Vec<Value> = discovery["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| {
            s["request"]["method"] == "POST"
                && s["request"]["path"] == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        })
        .cloned()
        .collect();
    assert_eq!(crds.len(), 2, "01-discovery should create two CRDs");

    let expected: BTreeSet<(&str, usize)> = EXPECTED_DIVERGENCES
        .iter()
        .map(|(s, i, _, _)| (*s, *i))
        .collect();
    assert_eq!(
        expected.len(),
        EXPECTED_DIVERGENCES.len(),
        "duplicate entries in EXPECTED_DIVERGENCES"
    );
    let mut unexpected = Vec::new();
    let mut seen = BTreeSet::new();
    let mut per_scenario = Vec::new();
    for name in SCENARIOS {
        let divs = replay(name, &crds).await;
        per_scenario.push(format!("{name}: {} divergent steps", divs.len()));
        for (i, d) in divs {
            seen.insert((*name, i));
            let listed = EXPECTED_DIVERGENCES
                .iter()
                .find(|(s, step, _, _)| s == name && *step == i);
            match listed {
                None => unexpected.push(format!("(\"{name}\", {i}, \"{}\", \"\"), // {d}", d.at)),
                Some((_, _, at, why)) if *at != d.at => unexpected.push(format!(
                    "{name} step {i} is listed as differing at {at:?} ({why}) but differs at {d}"
                )),
                Some(_) => {}
            }
        }
    }
    // The crate docs mirror the table; keep them exact.
    let docs = std::fs::read_to_string(format!("{}/src/lib.rs", env!("CARGO_MANIFEST_DIR")))
        .expect("read lib.rs");
    let documented: BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter(|l| l.contains("` step "))
        .filter_map(|l| l.split(':').next().map(str::to_string))
        .collect();
    let wanted: BTreeSet<String> = EXPECTED_DIVERGENCES
        .iter()
        .map(|(s, i, _, _)| format!("{s}` step {i}"))
        .collect();
    assert_eq!(
        documented, wanted,
        "the divergence list in src/lib.rs docs must mirror EXPECTED_DIVERGENCES"
    );
    let stale: Vec<String> = EXPECTED_DIVERGENCES
        .iter()
        .filter(|(s, i, _, _)| !seen.contains(&(*s, *i)))
        .map(|(s, i, _, r)| format!("{s} step {i} ({r})"))
        .collect();
    println!("{}", per_scenario.join("\n"));
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "conformance replay drifted.\nunexpected divergences ({}):\n{}\n\nlisted but now conformant ({}):\n{}",
        unexpected.len(),
        unexpected.join("\n"),
        stale.len(),
        stale.join("\n")
    );
}
