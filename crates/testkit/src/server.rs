//! The HTTP side of the fake API server: routing of the real REST paths, discovery, and the verbs
//! (get, list, watch, create, update, patch in four flavours, delete, deletecollection) with the
//! apiserver's status codes and `Status` bodies. Faults and the request log hook in here.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::convert::{to_storage, to_view};
use crate::faults::{FaultAction, Faults};
use crate::fields;
use crate::log::{RequestLog, RequestRecord};
use crate::patch;
use crate::registry::ResourceDef;
use crate::store::{Event, EventType, Key, State};
use crate::util::{
    ApiError, FieldSelector, LabelSelector, b64_decode, b64_encode, field_selector_fields, splitmix,
};
use crate::{defaults, schema, validate};

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Tunables of a running server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Upper bound on a watch's `timeoutSeconds` (replays use a short one to run fast).
    pub max_watch_timeout: Duration,
    /// Interval between BOOKMARK events when a watch asks for them.
    pub bookmark_interval: Duration,
    /// Events kept for watch resumption; older RVs get `410 Expired`.
    pub history_limit: usize,
    /// Seed for uids, generated names and fault decisions.
    pub seed: u64,
    /// Use this RFC 3339 time for every timestamp instead of the real clock.
    pub frozen_time: Option<String>,
    /// The resourceVersion of the empty store (a fresh real cluster is in the hundreds).
    pub initial_resource_version: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_watch_timeout: Duration::from_secs(3600),
            bookmark_interval: Duration::from_secs(1),
            history_limit: 10_000,
            seed: 0x5eed,
            frozen_time: None,
            initial_resource_version: 1,
        }
    }
}

pub struct Inner {
    pub state: Mutex<State>,
    pub config: ServerConfig,
    pub faults: Mutex<Faults>,
    pub log: Mutex<RequestLog>,
    pub started: Instant,
    /// Bumped to close every open watch stream (fault injection).
    pub drop_watches: tokio::sync::watch::Sender<u64>,
    /// The open watch streams and how far each is (see [`Inner::watches_drained`]).
    pub watches: Mutex<Vec<Arc<WatchProgress>>>,
}

/// How far one watch stream is: events it has taken from the store's broadcast, and lines
/// it has queued for and handed to its client.
#[derive(Debug)]
pub struct WatchProgress {
    /// The client's User-Agent.
    agent: String,
    /// Events broadcast before the watch subscribed.
    base: u64,
    /// Events taken from the broadcast (sent on or filtered out).
    handled: std::sync::atomic::AtomicU64,
    /// Lines queued for the client.
    sent: std::sync::atomic::AtomicU64,
    /// Lines the client has read.
    pulled: std::sync::atomic::AtomicU64,
    /// The task feeding the stream has ended: no more events will be taken.
    fed: std::sync::atomic::AtomicBool,
    /// The client has dropped the stream or read its end.
    ended: std::sync::atomic::AtomicBool,
}

/// Sets a flag when dropped.
struct SetOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A watch's line queue as its client reads it: counts what is read, and marks the stream
/// ended when dropped.
struct Lines {
    rx: mpsc::Receiver<Bytes>,
    progress: Arc<WatchProgress>,
}

impl Drop for Lines {
    fn drop(&mut self) {
        self.progress
            .ended
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl WatchProgress {
    fn count(counter: &std::sync::atomic::AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn drained(&self, emitted: u64) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let read_all = self.pulled.load(SeqCst) >= self.sent.load(SeqCst);
        self.ended.load(SeqCst)
            || (read_all
                && (self.fed.load(SeqCst) || self.base + self.handled.load(SeqCst) >= emitted))
    }
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    pub fn new(config: ServerConfig) -> Arc<Inner> {
        let (tx, _) = broadcast::channel(65_536);
        let mut state = State::new(config.seed, config.history_limit, tx);
        state.frozen_time = config.frozen_time.clone();
        state.rv = config.initial_resource_version;
        let (drop_watches, _) = tokio::sync::watch::channel(0);
        Arc::new(Inner {
            state: Mutex::new(state),
            faults: Mutex::new(Faults::new(config.seed)),
            config,
            log: Mutex::new(RequestLog::default()),
            started: Instant::now(),
            drop_watches,
            watches: Mutex::default(),
        })
    }

    /// Whether every open watch of clients with User-Agent `agent` (up to its first `/`) has
    /// taken every event broadcast so far and its client has read every line of it.
    pub fn watches_drained(&self, agent: &str) -> bool {
        let emitted = lock(&self.state).emitted;
        let mut watches = lock(&self.watches);
        watches.retain(|w| !w.ended.load(std::sync::atomic::Ordering::SeqCst));
        watches
            .iter()
            .filter(|w| w.agent == agent || w.agent.split('/').next() == Some(agent))
            .all(|w| w.drained(emitted))
    }
}

fn full(status: u16, ct: &str, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Full::new(body).boxed_unsync());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(ct) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}

fn json_response(status: u16, v: &Value) -> Response<Body> {
    full(
        status,
        "application/json",
        Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
    )
}

fn error_response(e: ApiError) -> Response<Body> {
    json_response(e.code, &e.body)
}

fn page_not_found() -> Response<Body> {
    full(
        404,
        "text/plain; charset=utf-8",
        Bytes::from_static(b"404 page not found\n"),
    )
}

/// A parsed request, independent of the transport.
pub struct Req {
    pub method: Method,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub content_type: String,
    pub accept: String,
    pub user_agent: String,
    pub body: Bytes,
    /// `Warning` headers to send with the response (unknown or duplicate fields).
    pub warnings: Mutex<Vec<String>>,
}

fn parse_query(q: Option<&str>) -> BTreeMap<String, String> {
    form_urlencoded::parse(q.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

impl Req {
    pub fn from_http(parts: &http::request::Parts, body: Bytes) -> Req {
        let h = |n: http::header::HeaderName| {
            parts
                .headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        Req {
            method: parts.method.clone(),
            path: parts.uri.path().to_string(),
            query: parse_query(parts.uri.query()),
            content_type: h(http::header::CONTENT_TYPE),
            accept: h(http::header::ACCEPT),
            user_agent: h(http::header::USER_AGENT),
            body,
            warnings: Mutex::new(Vec::new()),
        }
    }

    fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true" | "1"))
    }

    /// The manager recorded for writes without `fieldManager`: the User-Agent up to its first `/`.
    fn manager(&self) -> String {
        if let Some(m) = self.q("fieldManager") {
            return m.to_string();
        }
        let ua = self.user_agent.split('/').next().unwrap_or("");
        if ua.is_empty() {
            "unknown".into()
        } else {
            ua.to_string()
        }
    }
}

/// What a resource URL names.
struct Target {
    def: ResourceDef,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

enum Route {
    Version,
    CoreVersions,
    CoreResources,
    Groups,
    Group(String),
    GroupResources(String, String),
    Resource(Box<Target>),
    NotFoundStatus,
    PageNotFound,
}

fn route(st: &State, path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["api"] => Route::CoreVersions,
        ["api", "v1"] => Route::CoreResources,
        ["apis"] => Route::Groups,
        ["apis", g] => {
            if st.registry.all().any(|d| d.group == *g) {
                Route::Group((*g).to_string())
            } else {
                Route::PageNotFound
            }
        }
        ["apis", g, v] => {
            if st.registry.all().any(|d| d.group == *g && d.version == *v) {
                Route::GroupResources((*g).to_string(), (*v).to_string())
            } else {
                Route::PageNotFound
            }
        }
        ["api", "v1", rest @ ..] => resource_route(st, "", "v1", rest),
        ["apis", g, v, rest @ ..] => {
            if st.registry.all().any(|d| d.group == *g && d.version == *v) {
                resource_route(st, g, v, rest)
            } else {
                Route::PageNotFound
            }
        }
        _ => Route::PageNotFound,
    }
}

fn resource_route(st: &State, g: &str, v: &str, rest: &[&str]) -> Route {
    let found = |plural: &str| st.registry.get(g, v, plural).cloned();
    let mk = |def: ResourceDef, ns: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(Box::new(Target {
            def,
            ns: ns.map(str::to_string),
            name: name.map(str::to_string),
            sub: sub.map(str::to_string),
        }))
    };
    if let ["namespaces", ns, plural, tail @ ..] = rest {
        if let Some(def) = found(plural).filter(|d| d.namespaced) {
            return match tail {
                [] => mk(def, Some(ns), None, None),
                [name] => mk(def, Some(ns), Some(name), None),
                [name, sub] => mk(def, Some(ns), Some(name), Some(sub)),
                _ => Route::NotFoundStatus,
            };
        }
        if g.is_empty()
            && matches!(*plural, "status" | "finalize")
            && tail.is_empty()
            && let Some(def) = found("namespaces")
        {
            return mk(def, None, Some(ns), Some(plural));
        }
        return Route::NotFoundStatus;
    }
    match rest {
        [plural] => match found(plural) {
            Some(def) => mk(def, None, None, None),
            None => Route::NotFoundStatus,
        },
        [plural, name] => match found(plural).filter(|d| !d.namespaced) {
            Some(def) => mk(def, None, Some(name), None),
            None => Route::NotFoundStatus,
        },
        [plural, name, sub] => match found(plural).filter(|d| !d.namespaced) {
            Some(def) => mk(def, None, Some(name), Some(sub)),
            None => Route::NotFoundStatus,
        },
        _ => Route::NotFoundStatus,
    }
}

fn verb_of(method: &Method, t: Option<&Target>, watch: bool) -> &'static str {
    match (method.as_str(), t) {
        ("GET", Some(t)) if t.name.is_none() => {
            if watch {
                "watch"
            } else {
                "list"
            }
        }
        ("GET", Some(_)) => "get",
        ("GET", None) => "discovery",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", Some(t)) if t.name.is_none() => "deletecollection",
        ("DELETE", _) => "delete",
        _ => "other",
    }
}

/// Serves one request.
pub async fn handle(inner: Arc<Inner>, req: Req) -> Response<Body> {
    let watch = req.flag("watch");
    let (verb, group, plural, ns, name, sub) = {
        let st = lock(&inner.state);
        match route(&st, &req.path) {
            Route::Resource(t) => (
                verb_of(&req.method, Some(&t), watch),
                t.def.group.clone(),
                t.def.plural.clone(),
                t.ns.clone(),
                t.name.clone(),
                t.sub.clone(),
            ),
            _ => (
                verb_of(&req.method, None, watch),
                String::new(),
                String::new(),
                None,
                None,
                None,
            ),
        }
    };
    let seq = {
        let mut log = lock(&inner.log);
        log.push(RequestRecord {
            seq: 0,
            verb: verb.to_string(),
            method: req.method.to_string(),
            path: req.path.clone(),
            query: req.query.clone(),
            group: group.clone(),
            resource: plural.clone(),
            namespace: ns.clone(),
            name: name.clone(),
            subresource: sub.clone(),
            field_manager: req.q("fieldManager").map(str::to_string),
            user_agent: req.user_agent.clone(),
            at: inner.started.elapsed(),
            status: 0,
        })
    };
    let action = lock(&inner.faults).decide(verb, &plural, inner.started.elapsed());
    let resp = match action {
        FaultAction::None => dispatch(&inner, &req).await,
        FaultAction::Fail(code) => error_response(fault_error(code)),
        FaultAction::Hang(d) => {
            tokio::time::sleep(d).await;
            error_response(ApiError::new(
                504,
                Some("Timeout"),
                "the server was unable to return a response in the time allotted",
            ))
        }
    };
    lock(&inner.log).set_status(seq, resp.status().as_u16());
    resp
}

fn fault_error(code: u16) -> ApiError {
    match code {
        409 => ApiError::new(
            409,
            Some("Conflict"),
            "Operation cannot be fulfilled: injected conflict",
        ),
        429 => ApiError::new(
            429,
            Some("TooManyRequests"),
            "too many requests, please try again later",
        )
        .details(json!({"retryAfterSeconds": 1})),
        503 => ApiError::new(
            503,
            Some("ServiceUnavailable"),
            "the server is currently unable to handle the request",
        ),
        c => ApiError::new(
            c,
            Some("InternalError"),
            "Internal error occurred: injected fault",
        ),
    }
}

async fn dispatch(inner: &Arc<Inner>, req: &Req) -> Response<Body> {
    let aggregated = req.accept.contains("as=APIGroupDiscoveryList");
    let mut st = lock(&inner.state);
    // Establishing is asynchronous in a real server: a burst of CRD creations completes first.
    let creating_crd = req.method == Method::POST
        && req
            .path
            .trim_end_matches('/')
            .ends_with("/customresourcedefinitions");
    if !creating_crd {
        establish_pending_crds(&mut st);
    }
    let r = route(&st, &req.path);
    match r {
        Route::Version => json_response(200, &version()),
        Route::CoreVersions => {
            if aggregated {
                aggregated_response(&core_discovery(&st))
            } else {
                json_response(
                    200,
                    &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}),
                )
            }
        }
        Route::CoreResources => json_response(200, &resource_list(&st, "", "v1")),
        Route::Groups => {
            if aggregated {
                aggregated_response(&groups_discovery(&st))
            } else {
                json_response(200, &group_list(&st))
            }
        }
        Route::Group(g) => json_response(200, &group_entry(&st, &g, true)),
        Route::GroupResources(g, v) => json_response(200, &resource_list(&st, &g, &v)),
        Route::PageNotFound => page_not_found(),
        Route::NotFoundStatus => error_response(
            ApiError::new(
                404,
                Some("NotFound"),
                "the server could not find the requested resource",
            )
            .details(json!({})),
        ),
        Route::Resource(t) => {
            if req.method == Method::GET && t.name.is_none() && req.flag("watch") {
                let prepared = prepare_watch(&mut st, &t, req);
                drop(st);
                return match prepared {
                    Ok(w) => start_watch(inner.clone(), w, &req.user_agent),
                    Err(e) => error_response(e),
                };
            }
            let result = resource(&mut st, &t, req);
            match result {
                Ok((code, v)) => {
                    let mut r = json_response(code, &v);
                    for w in lock(&req.warnings).iter() {
                        let text = format!("299 - {}", Value::String(w.clone()));
                        if let Ok(h) = HeaderValue::from_str(&text) {
                            r.headers_mut().append(http::header::WARNING, h);
                        }
                    }
                    r
                }
                Err(e) => error_response(e),
            }
        }
    }
}

fn aggregated_response(v: &Value) -> Response<Body> {
    full(
        200,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
    )
}

fn version() -> Value {
    json!({"major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "36", "minCompatibilityMajor": "1", "minCompatibilityMinor": "35", "gitVersion": "v1.36.2", "gitCommit": "98b35193b2ac7a23a673325f5e9b830ecd5ba406", "gitTreeState": "clean", "buildDate": "2026-08-21T11:29:11Z", "goVersion": "go1.26.4", "compiler": "gc", "platform": "linux/amd64"})
}

fn resource_list(st: &State, g: &str, v: &str) -> Value {
    let mut resources = Vec::new();
    let mut defs: Vec<&ResourceDef> = st
        .registry
        .all()
        .filter(|d| d.group == g && d.version == v)
        .collect();
    // Custom resources are listed in CRD creation order, built-ins alphabetically.
    defs.sort_by_key(|d| {
        (
            st.served_since
                .get(&(d.group.clone(), d.plural.clone()))
                .copied()
                .unwrap_or(0),
            d.plural.clone(),
        )
    });
    for d in defs {
        resources.push(d.legacy.clone());
        if d.status {
            resources.push(json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced, "kind": d.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    let mut out = json!({"kind": "APIResourceList", "groupVersion": if g.is_empty() { v.to_string() } else { format!("{g}/{v}") }, "resources": resources});
    if !g.is_empty() {
        out["apiVersion"] = json!("v1");
    }
    out
}

fn group_entry(st: &State, g: &str, with_kind: bool) -> Value {
    let versions: Vec<String> = st
        .registry
        .groups()
        .into_iter()
        .find(|(x, _)| x == g)
        .map(|(_, v)| v)
        .unwrap_or_default();
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let pref = vs.first().cloned().unwrap_or(Value::Null);
    let mut out = json!({"name": g, "versions": vs, "preferredVersion": pref});
    if with_kind {
        out["kind"] = json!("APIGroup");
        out["apiVersion"] = json!("v1");
    }
    out
}

fn group_list(st: &State) -> Value {
    let groups: Vec<Value> = st
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, _)| group_entry(st, &g, false))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn discovery_versions(st: &State, g: &str) -> Vec<Value> {
    let versions = st
        .registry
        .groups()
        .into_iter()
        .find(|(x, _)| x == g)
        .map(|(_, v)| v)
        .unwrap_or_default();
    versions
        .iter()
        .map(|v| {
            let mut defs: Vec<&ResourceDef> = st
                .registry
                .all()
                .filter(|d| d.group == g && d.version == *v)
                .collect();
            defs.sort_by_key(|d| d.plural.clone());
            let res: Vec<Value> = defs.iter().map(|d| d.aggregated.clone()).collect();
            json!({"version": v, "resources": res, "freshness": "Current"})
        })
        .collect()
}

fn core_discovery(st: &State) -> Value {
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": [{"metadata": {}, "versions": discovery_versions(st, "")}]})
}

fn groups_discovery(st: &State) -> Value {
    let items: Vec<Value> = st
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, _)| json!({"metadata": {"name": g}, "versions": discovery_versions(st, &g)}))
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

fn gr(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.plural.clone()
    } else {
        format!("{}.{}", def.plural, def.group)
    }
}

fn resource(st: &mut State, t: &Target, req: &Req) -> Result<(u16, Value), ApiError> {
    if let Some(sub) = &t.sub {
        if sub != "status" || !t.def.status {
            let name = t.name.clone().unwrap_or_default();
            return Err(ApiError::not_found(&t.def.plural, &t.def.group, &name));
        }
        if matches!(req.method.as_str(), "POST" | "DELETE") {
            let verb = if req.method == Method::POST {
                "create"
            } else {
                "delete"
            };
            let mut d = json!({"kind": t.def.plural});
            if !t.def.group.is_empty() {
                d["group"] = json!(t.def.group);
            }
            return Err(ApiError::new(
                405,
                Some("MethodNotAllowed"),
                format!(
                    "{verb} is not supported on resources of kind \"{}\"",
                    gr(&t.def)
                ),
            )
            .details(d));
        }
    }
    let ns = t.ns.clone().unwrap_or_default();
    match (req.method.as_str(), &t.name) {
        ("GET", Some(name)) => get(st, t, &ns, name, req),
        ("GET", None) => list(st, t, req),
        ("POST", None) => create(st, t, &ns, req),
        ("PUT", Some(name)) => update(st, t, &ns, name, req),
        ("PATCH", Some(name)) => patch_req(st, t, &ns, name, req),
        ("DELETE", Some(name)) => delete(st, t, &ns, name, req),
        ("DELETE", None) => delete_collection(st, t, req),
        _ => Err(ApiError::new(
            405,
            Some("MethodNotAllowed"),
            "the server does not allow this method on the requested resource",
        )),
    }
}

fn partial_metadata(v: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"]})
}

fn get(
    st: &mut State,
    t: &Target,
    ns: &str,
    name: &str,
    req: &Req,
) -> Result<(u16, Value), ApiError> {
    if let Some(rv) = req.q("resourceVersion") {
        parse_rv_list(rv)?;
    }
    let key = State::key(&t.def, ns, name);
    let obj = st
        .objects
        .get(&key)
        .cloned()
        .map(|o| to_view(&t.def, o))
        .ok_or_else(|| ApiError::not_found(&t.def.plural, &t.def.group, name))?;
    if req.accept.contains("as=PartialObjectMetadata;")
        || req.accept.ends_with("as=PartialObjectMetadata")
    {
        return Ok((200, partial_metadata(&obj)));
    }
    Ok((200, obj))
}

fn parse_rv_list(rv: &str) -> Result<u64, ApiError> {
    if rv.is_empty() {
        return Ok(0);
    }
    rv.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid resource version: resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": invalid syntax"
        ))
    })
}

struct Selectors {
    labels: LabelSelector,
    fields: FieldSelector,
}

fn selectors(def: &ResourceDef, req: &Req) -> Result<Selectors, ApiError> {
    let labels = LabelSelector::parse(req.q("labelSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let allowed = field_selector_fields(&def.plural, &def.group);
    let fields = FieldSelector::parse(req.q("fieldSelector").unwrap_or(""), &allowed)
        .map_err(ApiError::bad_request)?;
    Ok(Selectors { labels, fields })
}

impl Selectors {
    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj["metadata"]["labels"].as_object()) && self.fields.matches(obj)
    }
}

fn list_options_invalid(message: &str) -> ApiError {
    ApiError::new(
        422,
        Some("Invalid"),
        format!("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: {message}"),
    )
    .details(json!({"group": "meta.k8s.io", "kind": "ListOptions", "causes": [{"reason": "FieldValueForbidden", "message": format!("Forbidden: {message}"), "field": "resourceVersionMatch"}]}))
}

fn list(st: &mut State, t: &Target, req: &Req) -> Result<(u16, Value), ApiError> {
    let sel = selectors(&t.def, req)?;
    let rv_param = req.q("resourceVersion").unwrap_or("");
    let rv = parse_rv_list(rv_param)?;
    let rv_match = req.q("resourceVersionMatch");
    if rv_match.is_some() && rv_param.is_empty() {
        return Err(list_options_invalid(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    let limit: usize = req
        .q("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let mut start: Option<String> = None;
    let mut list_rv = st.rv;
    if let Some(c) = req.q("continue").filter(|c| !c.is_empty()) {
        let tok = b64_decode(c)
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid continue token: continue key is not valid: illegal base64 data at input byte 15",
                )
            })?;
        start = tok["start"].as_str().map(str::to_string);
        list_rv = tok["rv"].as_u64().unwrap_or(st.rv);
    }
    let since = st
        .served_since
        .get(&(t.def.group.clone(), t.def.plural.clone()))
        .copied()
        .unwrap_or(0);
    let snapshot = if rv_match == Some("Exact") {
        if rv < since {
            return Err(ApiError::new(
                410,
                Some("Expired"),
                "The resourceVersion for the provided list is too old.",
            ));
        }
        list_rv = rv;
        Some(
            st.snapshot_at(t.def.storage_group(), &t.def.plural, rv)
                .ok_or_else(|| {
                    ApiError::new(
                        410,
                        Some("Expired"),
                        "The resourceVersion for the provided list is too old.",
                    )
                })?,
        )
    } else if start.is_some() && list_rv < st.rv {
        st.snapshot_at(t.def.storage_group(), &t.def.plural, list_rv)
    } else {
        None
    };
    let source: Box<dyn Iterator<Item = (&Key, &Value)>> = match &snapshot {
        Some(s) => Box::new(s.iter()),
        None => Box::new(
            st.objects
                .range(
                    (
                        t.def.storage_group().to_string(),
                        t.def.plural.clone(),
                        String::new(),
                        String::new(),
                    )..,
                )
                .take_while(|(k, _)| k.0 == t.def.storage_group() && k.1 == t.def.plural),
        ),
    };
    let ns = t.ns.clone();
    let table = req.accept.contains("as=Table");
    let partial = req.accept.contains("as=PartialObjectMetadataList");
    let now = st.now();
    let mut items = Vec::new();
    let mut last_key: Option<String> = None;
    let mut more = 0usize;
    let converted = t.def.storage_group() != t.def.group;
    for (k, v) in source {
        if let Some(n) = &ns
            && &k.2 != n
        {
            continue;
        }
        let view;
        let v = if converted {
            view = to_view(&t.def, v.clone());
            &view
        } else {
            v
        };
        let pos = if k.2.is_empty() {
            k.3.clone()
        } else {
            format!("{}/{}", k.2, k.3)
        };
        if let Some(s) = &start
            && pos.as_str() < s.as_str()
        {
            continue;
        }
        if !sel.matches(v) {
            continue;
        }
        if items.len() >= limit {
            more += 1;
            continue;
        }
        last_key = Some(pos);
        items.push(if table {
            crate::table::row(&t.def, v, &now)
        } else if partial {
            partial_metadata(v)
        } else if t.def.custom {
            v.clone()
        } else {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
            v
        });
    }
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    let filtered = !sel.labels.is_empty() || !sel.fields.is_empty();
    if items.len() >= limit && (more > 0 || filtered) {
        if let Some(lk) = last_key {
            let tok = json!({"v": "meta.k8s.io/v1", "rv": list_rv, "start": format!("{lk}\u{0}")});
            meta["continue"] = json!(b64_encode(tok.to_string().as_bytes()));
            if !filtered {
                meta["remainingItemCount"] = json!(more);
            }
        }
    } else if t.def.custom {
        meta["continue"] = json!("");
    }
    if table {
        return Ok((200, crate::table::render(&t.def, meta, items)));
    }
    if partial {
        return Ok((
            200,
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items}),
        ));
    }
    Ok((
        200,
        json!({"kind": t.def.list_kind(), "apiVersion": t.def.api_version(), "metadata": meta, "items": items}),
    ))
}

const ACCEPTED_BODY: &str = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Parses a create/update body like the apiserver's decoder (JSON or YAML by Content-Type).
fn decode_body(def: &ResourceDef, req: &Req) -> Result<Value, ApiError> {
    let ct = req.content_type.split(';').next().unwrap_or("").trim();
    if !matches!(ct, "" | "application/json" | "application/yaml" | "*/*") {
        return Err(ApiError::new(
            415,
            Some("UnsupportedMediaType"),
            ACCEPTED_BODY,
        ));
    }
    if ct == "application/yaml" {
        let text = String::from_utf8_lossy(&req.body);
        return crate::yaml::parse(&text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML body: {e}")));
    }
    serde_json::from_slice::<Value>(&req.body).map_err(|e| {
        let detail = if e.is_eof() {
            "unexpected end of JSON input".to_string()
        } else {
            e.to_string()
        };
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {detail} ({})",
            def.kind,
            String::from_utf8_lossy(&req.body)
        ))
    })
}

/// Applies `fieldValidation` to a decoded create/update body: unknown and duplicate fields are
/// rejected (`Strict`), dropped silently (`Ignore`) or dropped with a warning (default).
fn field_validation(def: &ResourceDef, req: &Req, body: &mut Value) -> Result<(), ApiError> {
    let mode = req.q("fieldValidation").unwrap_or("Warn");
    let dups = schema::duplicate_fields(&req.body);
    let unknown = schema::unknown_fields(def, body);
    if mode == "Strict" && (!dups.is_empty() || !unknown.is_empty()) {
        let parts: Vec<String> = dups
            .iter()
            .map(|d| format!("duplicate field \"{d}\""))
            .chain(unknown.iter().map(|u| format!("unknown field \"{u}\"")))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            parts.join(", "),
            kind = def.kind,
            v = def.version
        )));
    }
    schema::drop_fields(body, &unknown);
    if mode != "Ignore" {
        let mut w = lock(&req.warnings);
        w.extend(dups.iter().map(|d| format!("duplicate field \"{d}\"")));
        w.extend(unknown.iter().map(|u| format!("unknown field \"{u}\"")));
    }
    Ok(())
}

/// Parses an apply body: JSON or YAML.
fn parse_body(req: &Req, yaml_ok: bool) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(&req.body) {
        return Ok(v);
    }
    if yaml_ok
        && let Ok(s) = std::str::from_utf8(&req.body)
        && let Ok(v) = crate::yaml::parse(s)
    {
        return Ok(v);
    }
    Err(ApiError::bad_request(format!(
        "error decoding patch: {}",
        String::from_utf8_lossy(&req.body)
    )))
}

/// The decoder's answer to a body of another kind or version than the URL's.
fn check_type(def: &ResourceDef, body: &Value) -> Result<(), ApiError> {
    let av = body["apiVersion"].as_str().unwrap_or("");
    let kind = body["kind"].as_str().unwrap_or("");
    if (av.is_empty() && kind.is_empty()) || (av == def.api_version() && kind == def.kind) {
        return Ok(());
    }
    let version = av.rsplit('/').next().unwrap_or(av);
    let internal = if def.group.is_empty() {
        "core".to_string()
    } else {
        def.group.split('.').next().unwrap_or("").to_string()
    };
    Err(ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {}: converting ({version}.{kind}) to ({internal}.{}): unknown conversion",
        def.kind, def.kind
    )))
}

fn generate_name(st: &mut State, prefix: &str) -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    st.name_counter += 1;
    let mut x = splitmix(st.uid_seed ^ st.name_counter.wrapping_mul(0x9E37));
    let mut s = prefix.to_string();
    for _ in 0..5 {
        s.push(ALPHA[(x % ALPHA.len() as u64) as usize] as char);
        x /= ALPHA.len() as u64;
    }
    s
}

fn ensure_namespace(st: &State, def: &ResourceDef, ns: &str) -> Result<(), ApiError> {
    if !def.namespaced {
        return Ok(());
    }
    let key = (
        String::new(),
        "namespaces".to_string(),
        String::new(),
        ns.to_string(),
    );
    if st.objects.contains_key(&key) {
        Ok(())
    } else {
        Err(ApiError::not_found("namespaces", "", ns))
    }
}

fn dry_run(req: &Req) -> bool {
    req.q("dryRun") == Some("All")
}

fn create(st: &mut State, t: &Target, ns: &str, req: &Req) -> Result<(u16, Value), ApiError> {
    let mut body = decode_body(&t.def, req)?;
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request is not an object",
        ));
    }
    check_type(&t.def, &body)?;
    field_validation(&t.def, req, &mut body)?;
    if t.def.namespaced {
        match body["metadata"]["namespace"].as_str() {
            Some(bns) if bns != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => body["metadata"]["namespace"] = json!(ns),
        }
    } else if let Some(m) = body["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    let name = match body["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => n.to_string(),
        None => match body["metadata"]["generateName"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            Some(p) => {
                let p = p.to_string();
                generate_name(st, &p)
            }
            None => {
                return Err(ApiError::invalid(
                    &t.def.kind,
                    "",
                    "",
                    &[(
                        "FieldValueRequired",
                        "Required value: name or generateName is required".into(),
                        "metadata.name".into(),
                    )],
                ));
            }
        },
    };
    body["metadata"]["name"] = json!(name);
    ensure_namespace(st, &t.def, ns)?;
    let key = State::key(&t.def, ns, &name);
    if st.objects.contains_key(&key) {
        return Err(ApiError::already_exists(&t.def.plural, &t.def.group, &name));
    }
    validate::micro_times(&t.def, &mut body)?;
    let manager = req.manager();
    let obj = prepare_create(st, &t.def, body, &manager, None)?;
    if dry_run(req) {
        return Ok((201, obj));
    }
    let stored = commit_create(st, &t.def, key, obj);
    Ok((201, stored))
}

/// Validation, defaulting, managed fields and system metadata for a new object.
fn prepare_create(
    st: &mut State,
    def: &ResourceDef,
    mut body: Value,
    manager: &str,
    applied: Option<Value>,
) -> Result<Value, ApiError> {
    let body_obj = body.as_object_mut();
    if let Some(m) = body_obj {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
        if def.status {
            m.remove("status");
        }
    }
    strip_system_metadata(&mut body);
    validate::validate(def, &body, None, false)?;
    let now = st.now();
    if applied.is_none() {
        defaults::apply_defaults(&def.group, &def.plural, &mut body);
        let skeleton = json!({"metadata": {}});
        let mut entries = Vec::new();
        fields::record_update(def, &mut entries, &skeleton, &body, manager, None, &now);
        fields::write_entries(&mut body, &entries);
    } else {
        defaults::apply_defaults(&def.group, &def.plural, &mut body);
    }
    defaults::apply_strategy_defaults(&def.group, &def.plural, &mut body, st.uid_counter);
    let uid = st.next_uid();
    let meta = &mut body["metadata"];
    meta["uid"] = json!(uid);
    meta["creationTimestamp"] = json!(now);
    if def.has_generation() {
        meta["generation"] = json!(1);
    }
    Ok(order_metadata(body))
}

fn commit_create(st: &mut State, def: &ResourceDef, key: Key, obj: Value) -> Value {
    let stored = to_view(def, st.put(key.clone(), to_storage(def, obj)));
    if def.group.is_empty() && def.plural == "namespaces" {
        // The service-account controller gives every new namespace its `default` ServiceAccount.
        let ns = key.3.clone();
        let uid = st.next_uid();
        let t = st.now();
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns, "uid": uid, "creationTimestamp": t}});
        st.put(
            (
                String::new(),
                "serviceaccounts".into(),
                ns,
                "default".into(),
            ),
            sa,
        );
    }
    if def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions" {
        st.register_crd(&stored);
        // The apiserver's naming controller marks it Established just after the create, before
        // the next request is served (asynchronous in a real server, so not in this response).
        st.pending_crds.push(key.clone());
    }
    st.collect_garbage();
    stored
}

/// Runs the apiserver's CRD naming/establishing controller for CRDs created since the last request.
fn establish_pending_crds(st: &mut State) {
    for key in std::mem::take(&mut st.pending_crds) {
        let Some(stored) = st.objects.get(&key).cloned() else {
            continue;
        };
        let Some(def) = st
            .registry
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .cloned()
        else {
            continue;
        };
        let def = &def;
        let mut established = stored.clone();
        let names = stored["spec"]["names"].clone();
        let mut accepted = names.clone();
        if accepted.get("singular").is_none() {
            accepted["singular"] = json!(names["kind"].as_str().unwrap_or("").to_lowercase());
        }
        let t = st.now();
        established["status"] = json!({
            "acceptedNames": accepted,
            "storedVersions": stored["status"]["storedVersions"].clone(),
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t, "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": t, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
            ],
        });
        let mut entries = fields::read_entries(&stored);
        fields::record_update(
            def,
            &mut entries,
            &stored,
            &established,
            "kube-apiserver",
            Some("status"),
            &t,
        );
        fields::write_entries(&mut established, &entries);
        st.put(key, established);
    }
}

fn strip_system_metadata(body: &mut Value) {
    if let Some(m) = body["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ] {
            m.remove(k);
        }
        if m.get("managedFields").is_some() {
            m.remove("managedFields");
        }
    }
}

/// Keeps `metadata` keys in the apiserver's order for readability of dumps (order is not semantic).
fn order_metadata(mut v: Value) -> Value {
    const ORDER: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ];
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        let mut out = Map::new();
        for k in ORDER {
            if let Some(x) = m.remove(*k) {
                out.insert((*k).to_string(), x);
            }
        }
        out.extend(std::mem::take(m));
        *m = out;
    }
    v
}

/// Common tail of update and patch: status/spec isolation, validation, defaults, generation,
/// managed fields, no-op detection, finalizer-driven deletion, storage and events.
#[allow(clippy::too_many_arguments)]
fn finish_write(
    st: &mut State,
    t: &Target,
    key: Key,
    old: &Value,
    mut new: Value,
    manager: &str,
    managed: Managed,
    dry: bool,
) -> Result<(u16, Value), ApiError> {
    let def = &t.def;
    let status_sub = t.sub.as_deref() == Some("status");
    // Endpoint isolation: /status changes only status; the main endpoint never changes it.
    if def.status {
        if status_sub {
            let mut base = old.clone();
            base["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            if base["status"].is_null()
                && let Some(m) = base.as_object_mut()
            {
                m.remove("status");
            }
            if let (Some(mf), Some(m)) = (
                new["metadata"].get("managedFields").cloned(),
                base["metadata"].as_object_mut(),
            ) {
                m.insert("managedFields".into(), mf);
            }
            new = base;
        } else {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
    }
    // System metadata is the server's.
    {
        let om = &old["metadata"];
        let nm = &mut new["metadata"];
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "name",
            "namespace",
        ] {
            match om.get(k) {
                Some(v) => nm[k] = v.clone(),
                None => {
                    if let Some(m) = nm.as_object_mut() {
                        m.remove(k);
                    }
                }
            }
        }
        nm["resourceVersion"] = om["resourceVersion"].clone();
    }
    if let Some(m) = new.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version()));
        m.insert("kind".into(), json!(def.kind));
    }
    validate::validate(def, &new, Some(old), status_sub)?;
    // An update that leaves out a Service's allocated IPs keeps them (nobody gains them).
    if def.group.is_empty() && def.plural == "services" {
        for k in ["clusterIP", "clusterIPs"] {
            if new["spec"].get(k).is_none()
                && let (Some(v), Some(spec)) = (old["spec"].get(k), new["spec"].as_object_mut())
            {
                spec.insert(k.into(), v.clone());
            }
        }
    }
    defaults::apply_defaults(&def.group, &def.plural, &mut new);
    defaults::apply_strategy_defaults(&def.group, &def.plural, &mut new, 0);
    let now = st.now();
    match managed {
        Managed::Update { reset, supplied } => {
            let mut entries = match supplied {
                _ if reset => Vec::new(),
                Some(entries) => entries,
                None => fields::read_entries(old),
            };
            if reset {
                fields::write_entries(&mut new, &entries);
            } else {
                fields::record_update(
                    def,
                    &mut entries,
                    old,
                    &new,
                    manager,
                    t.sub.as_deref(),
                    &now,
                );
                fields::write_entries(&mut new, &entries);
            }
        }
        Managed::Keep => {}
    }
    if def.has_generation() && spec_changed(def, old, &new) {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(0);
        new["metadata"]["generation"] = json!(g + 1);
    }
    let new = order_metadata(new);
    if same_ignoring_times(old, &new) {
        return Ok((200, old.clone()));
    }
    if dry {
        return Ok((200, new));
    }
    let deleting = old["metadata"]
        .get("deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    let no_finalizers = new["metadata"]["finalizers"]
        .as_array()
        .is_none_or(Vec::is_empty);
    if deleting && no_finalizers && !(key.0.is_empty() && key.1 == "namespaces") {
        // The write that removes the last finalizer deletes the object; the response shows the
        // object at its previous resourceVersion and watchers see one DELETED.
        let mut resp = new.clone();
        resp["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        // The DELETED event carries the object as stored (finalizers included), not the update.
        st.remove(&key);
        st.collect_garbage();
        return Ok((200, resp));
    }
    let stored = to_view(def, st.put(key, to_storage(def, new)));
    st.collect_garbage();
    Ok((200, stored))
}

enum Managed {
    /// Record an Update operation (reset: the write cleared managedFields with `[{}]`;
    /// supplied: the write carried managedFields of its own, which replace the stored ones).
    Update {
        reset: bool,
        supplied: Option<Vec<fields::Entry>>,
    },
    /// Managed fields already computed (apply).
    Keep,
}

fn strip_volatile(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(mf) = v["metadata"]["managedFields"].as_array_mut() {
        for e in mf.iter_mut() {
            if let Some(m) = e.as_object_mut() {
                m.remove("time");
            }
        }
    }
    v
}

fn same_ignoring_times(a: &Value, b: &Value) -> bool {
    strip_volatile(a) == strip_volatile(b)
}

fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
            if def.status {
                m.remove("status");
            }
        }
        v
    };
    if strip(old) != strip(new) {
        return true;
    }
    // Deployments (and other apps kinds) also bump on annotation changes.
    def.group == "apps" && old["metadata"].get("annotations") != new["metadata"].get("annotations")
}

/// The managedFields a write to the main resource carries, when they are a non-empty list of
/// entries the apiserver can decode: it then takes them as the object's managed fields before
/// recording the write itself (how a client rewrites ownership, e.g. to take over another
/// manager's fields). Writes to a subresource, and lists it cannot decode, keep the stored ones.
fn supplied_entries(body: &Value, t: &Target) -> Option<Vec<fields::Entry>> {
    if t.sub.is_some() || managed_reset(body) {
        return None;
    }
    let list = body["metadata"]["managedFields"].as_array()?;
    let decodable = |e: &Value| {
        e["manager"].is_string()
            && e["operation"]
                .as_str()
                .is_some_and(|o| o == "Apply" || o == "Update")
            && e["fieldsType"].as_str() == Some("FieldsV1")
            && e["fieldsV1"].is_object()
    };
    (!list.is_empty() && list.iter().all(decodable)).then(|| fields::read_entries(body))
}

fn managed_reset(body: &Value) -> bool {
    body["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|a| a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty))
}

fn update(
    st: &mut State,
    t: &Target,
    ns: &str,
    name: &str,
    req: &Req,
) -> Result<(u16, Value), ApiError> {
    let mut body = decode_body(&t.def, req)?;
    check_type(&t.def, &body)?;
    field_validation(&t.def, req, &mut body)?;
    if let Some(bn) = body["metadata"]["name"].as_str()
        && bn != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({bn}) does not match the name on the URL ({name})"
        )));
    }
    if t.def.namespaced
        && let Some(bns) = body["metadata"]["namespace"].as_str()
        && bns != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    // Decoding (MicroTime precision) fails before any precondition is looked at.
    validate::micro_times(&t.def, &mut body)?;
    let key = State::key(&t.def, ns, name);
    let Some(old) = st.objects.get(&key).cloned().map(|o| to_view(&t.def, o)) else {
        return Err(ApiError::not_found(&t.def.plural, &t.def.group, name));
    };
    if let Some(rv) = body["metadata"]["resourceVersion"].as_str()
        && !rv.is_empty()
        && Some(rv) != old["metadata"]["resourceVersion"].as_str()
    {
        return Err(ApiError::conflict(&t.def.plural, &t.def.group, name));
    }
    let reset = managed_reset(&body);
    let supplied = supplied_entries(&body, t);
    if let Some(m) = body["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    let manager = req.manager();
    finish_write(
        st,
        t,
        key,
        &old,
        body,
        &manager,
        Managed::Update { reset, supplied },
        dry_run(req),
    )
}

const ACCEPTED_PATCH: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
const ACCEPTED_PATCH_SMP: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json, application/apply-patch+cbor";

fn patch_req(
    st: &mut State,
    t: &Target,
    ns: &str,
    name: &str,
    req: &Req,
) -> Result<(u16, Value), ApiError> {
    let ct = req.content_type.split(';').next().unwrap_or("").trim();
    let unsupported = |smp: bool| {
        ApiError::new(
            415,
            Some("UnsupportedMediaType"),
            if smp {
                ACCEPTED_PATCH_SMP
            } else {
                ACCEPTED_PATCH
            },
        )
    };
    match ct {
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            return apply(st, t, ns, name, req);
        }
        "application/merge-patch+json" | "application/json-patch+json" => {}
        "application/strategic-merge-patch+json" if !t.def.custom => {}
        _ => return Err(unsupported(!t.def.custom)),
    }
    let key = State::key(&t.def, ns, name);
    let Some(old) = st.objects.get(&key).cloned().map(|o| to_view(&t.def, o)) else {
        return Err(ApiError::not_found(&t.def.plural, &t.def.group, name));
    };
    let body = serde_json::from_slice::<Value>(&req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut new = old.clone();
    match ct {
        "application/merge-patch+json" => {
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
                ));
            }
            patch::merge_patch(&mut new, &body);
        }
        "application/json-patch+json" => {
            patch::json_patch(&mut new, &body).map_err(|_| {
                ApiError::new(
                    422,
                    Some("Invalid"),
                    "the server rejected our request due to an error in our request",
                )
                .details(json!({}))
            })?;
        }
        _ => {
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
                ));
            }
            patch::strategic_merge(&t.def, &mut new, &body).map_err(ApiError::internal)?;
        }
    }
    if new["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
        && !new["metadata"]["resourceVersion"].is_null()
    {
        return Err(ApiError::conflict(&t.def.plural, &t.def.group, name));
    }
    let unknown = schema::unknown_fields(&t.def, &new);
    if !unknown.is_empty() {
        if req.q("fieldValidation") == Some("Strict") {
            let parts: Vec<String> = unknown
                .iter()
                .map(|u| format!("unknown field \"{u}\""))
                .collect();
            return Err(ApiError::new(
                422,
                Some("Invalid"),
                format!(
                    " \"\" is invalid: patch: Invalid value: \"...\": strict decoding error: {}",
                    parts.join(", ")
                ),
            )
            .details(json!({"causes": [{"reason": "FieldValueInvalid", "field": "patch"}]})));
        }
        schema::drop_fields(&mut new, &unknown);
        if req.q("fieldValidation") != Some("Ignore") {
            lock(&req.warnings).extend(unknown.iter().map(|u| format!("unknown field \"{u}\"")));
        }
    }
    // In a patch the decode error surfaces as a 422 about the patched object.
    validate::micro_times(&t.def, &mut new).map_err(|e| {
        ApiError::new(
            422,
            Some("Invalid"),
            e.body["message"].as_str().unwrap_or("").to_string(),
        )
        .details(json!({"causes": [{"reason": "FieldValueInvalid", "field": "patch"}]}))
    })?;
    let reset = managed_reset(&new);
    // A patch that leaves managedFields as they were does not supply any.
    let supplied = supplied_entries(&new, t)
        .filter(|_| new["metadata"].get("managedFields") != old["metadata"].get("managedFields"));
    if let Some(m) = new["metadata"].as_object_mut() {
        m.remove("managedFields");
        if reset {
            m.remove("managedFields");
        }
    }
    if !reset && let Some(mf) = old["metadata"].get("managedFields") {
        new["metadata"]["managedFields"] = mf.clone();
    }
    let manager = req.manager();
    finish_write(
        st,
        t,
        key,
        &old,
        new,
        &manager,
        Managed::Update { reset, supplied },
        dry_run(req),
    )
}

fn apply(
    st: &mut State,
    t: &Target,
    ns: &str,
    name: &str,
    req: &Req,
) -> Result<(u16, Value), ApiError> {
    let Some(manager) = req.q("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::new(
            422,
            Some("Invalid"),
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        )
        .details(json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]})));
    };
    let mut cfg = parse_body(req, true)?;
    let av = cfg["apiVersion"].as_str().unwrap_or("").to_string();
    let kind = cfg["kind"].as_str().unwrap_or("").to_string();
    if av != t.def.api_version() || kind != t.def.kind {
        let (g, v) = match av.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), av.clone()),
        };
        return Err(ApiError::bad_request(format!(
            "invalid object type: {g}/{v}, Kind={kind}"
        )));
    }
    if let Some(bn) = cfg["metadata"]["name"].as_str()
        && bn != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({bn}) does not match the name on the URL ({name})"
        )));
    }
    if t.def.namespaced
        && let Some(bns) = cfg["metadata"]["namespace"].as_str()
        && bns != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if let Some(unknown) = schema::unknown_fields(&t.def, &cfg).first() {
        let path: String = unknown.split('.').map(|p| format!(".{p}")).collect();
        return Err(ApiError::internal(format!(
            "failed to create typed patch object ({ns}/{name}; {}/{}, Kind={}): {path}: field not declared in schema",
            t.def.group, t.def.version, t.def.kind
        )));
    }
    if let Some((path, key)) = fields::find_duplicate(&t.def, &cfg) {
        let prefix = if ns.is_empty() {
            String::new()
        } else {
            ns.to_string()
        };
        return Err(ApiError::internal(format!(
            "failed to create typed patch object ({prefix}/{name}; {}, Kind={}): {path}: duplicate entries for key [{key}]",
            t.def.api_version(),
            t.def.kind
        )));
    }
    let status_sub = t.sub.as_deref() == Some("status");
    // What each endpoint may apply: /status only status, the main endpoint everything else.
    if t.def.status
        && let Some(m) = cfg.as_object_mut()
    {
        if status_sub {
            m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| k == "name" || k == "namespace");
            }
        } else {
            m.remove("status");
        }
    }
    let force = req.flag("force");
    let key = State::key(&t.def, ns, name);
    let existing = st.objects.get(&key).cloned().map(|o| to_view(&t.def, o));
    let now = st.now();
    let sub = t.sub.as_deref();
    match existing {
        None => {
            if status_sub {
                return Err(ApiError::not_found(&t.def.plural, &t.def.group, name));
            }
            ensure_namespace(st, &t.def, ns)?;
            let mut skeleton = json!({"apiVersion": t.def.api_version(), "kind": t.def.kind, "metadata": {"name": name}});
            if t.def.namespaced {
                skeleton["metadata"]["namespace"] = json!(ns);
            }
            let merged = fields::apply(&t.def, &skeleton, &cfg, manager, sub, force, &now)
                .map_err(|c| conflict_error(&c))?;
            let mf = merged["metadata"].get("managedFields").cloned();
            let mut obj = prepare_create(st, &t.def, merged, manager, Some(cfg))?;
            if let Some(mf) = mf {
                obj["metadata"]["managedFields"] = mf;
            }
            let obj = order_metadata(obj);
            if dry_run(req) {
                return Ok((201, obj));
            }
            Ok((201, commit_create(st, &t.def, key, obj)))
        }
        Some(old) => {
            // A resourceVersion in the applied configuration is a precondition, as in
            // kube-apiserver (where it is ignored when the apply creates the object).
            if let Some(rv) = cfg["metadata"]["resourceVersion"].as_str()
                && !rv.is_empty()
                && Some(rv) != old["metadata"]["resourceVersion"].as_str()
            {
                return Err(ApiError::conflict(&t.def.plural, &t.def.group, name));
            }
            let merged = fields::apply(&t.def, &old, &cfg, manager, sub, force, &now)
                .map_err(|c| conflict_error(&c))?;
            finish_write(
                st,
                t,
                key,
                &old,
                merged,
                manager,
                Managed::Keep,
                dry_run(req),
            )
        }
    }
}

fn conflict_error(c: &[fields::Conflict]) -> ApiError {
    let causes: Vec<Value> = c
        .iter()
        .map(|c| {
            let who = match &c.api_version {
                Some(v) => format!("conflict with \"{}\" using {}", c.manager, v),
                None => format!("conflict with \"{}\"", c.manager),
            };
            json!({"reason": "FieldManagerConflict", "message": who, "field": c.path})
        })
        .collect();
    ApiError::new(409, Some("Conflict"), fields::conflict_message(c))
        .details(json!({"causes": causes}))
}

fn delete_options(req: &Req) -> Value {
    let mut opts = serde_json::from_slice::<Value>(&req.body).unwrap_or(json!({}));
    if let Some(p) = req.q("propagationPolicy") {
        opts["propagationPolicy"] = json!(p);
    }
    opts
}

fn delete(
    st: &mut State,
    t: &Target,
    ns: &str,
    name: &str,
    req: &Req,
) -> Result<(u16, Value), ApiError> {
    let key = State::key(&t.def, ns, name);
    let Some(obj) = st.objects.get(&key).cloned().map(|o| to_view(&t.def, o)) else {
        return Err(ApiError::not_found(&t.def.plural, &t.def.group, name));
    };
    let opts = delete_options(req);
    if let Some(uid) = opts["preconditions"]["uid"].as_str() {
        let actual = obj["metadata"]["uid"].as_str().unwrap_or("");
        if uid != actual {
            return Err(ApiError::new(
                409,
                Some("Conflict"),
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated",
                    t.def.kind
                ),
            )
            .details(json!({"name": name, "kind": t.def.kind})));
        }
    }
    if let Some(rv) = opts["preconditions"]["resourceVersion"].as_str() {
        let actual = obj["metadata"]["resourceVersion"].as_str().unwrap_or("");
        if rv != actual {
            return Err(ApiError::new(
                409,
                Some("Conflict"),
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified",
                    t.def.kind
                ),
            )
            .details(json!({"name": name, "kind": t.def.kind})));
        }
    }
    if dry_run(req) {
        return Ok((200, obj));
    }
    let policy = opts["propagationPolicy"].as_str().map(str::to_string);
    let Some((last, gone)) = st
        .delete_object(&key, policy.as_deref())
        .map(|(o, g)| (to_view(&t.def, o), g))
    else {
        return Err(ApiError::not_found(&t.def.plural, &t.def.group, name));
    };
    st.collect_garbage();
    if !gone || t.def.delete_returns_object() {
        return Ok((200, last));
    }
    let mut details = json!({"name": name, "kind": t.def.plural, "uid": last["metadata"]["uid"]});
    if !t.def.group.is_empty() {
        details["group"] = json!(t.def.group);
    }
    Ok((
        200,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
    ))
}

fn delete_collection(st: &mut State, t: &Target, req: &Req) -> Result<(u16, Value), ApiError> {
    let sel = selectors(&t.def, req)?;
    let keys: Vec<Key> = st
        .objects
        .iter()
        .filter(|(k, v)| {
            k.0 == t.def.storage_group()
                && k.1 == t.def.plural
                && t.ns.as_ref().is_none_or(|n| &k.2 == n)
                && sel.matches(v)
        })
        .map(|(k, _)| k.clone())
        .collect();
    let opts = delete_options(req);
    let policy = opts["propagationPolicy"].as_str().map(str::to_string);
    // The answer lists the objects as they were, at the resourceVersion before the deletions.
    let list_rv = st.rv;
    let mut items = Vec::new();
    for k in keys {
        let before = st.objects.get(&k).cloned();
        if let Some((after, gone)) = st.delete_object(&k, policy.as_deref()) {
            let mut last = to_view(&t.def, if gone { before.unwrap_or(after) } else { after });
            if !t.def.custom
                && let Some(m) = last.as_object_mut()
            {
                m.remove("apiVersion");
                m.remove("kind");
            }
            items.push(last);
        }
    }
    st.collect_garbage();
    Ok((
        200,
        json!({"kind": t.def.list_kind(), "apiVersion": t.def.api_version(), "metadata": {"resourceVersion": list_rv.to_string()}, "items": items}),
    ))
}

/// Queues `line` for the watch's client, counting it.
async fn send(
    tx: &mpsc::Sender<Bytes>,
    progress: &WatchProgress,
    line: Bytes,
) -> Result<(), mpsc::error::SendError<Bytes>> {
    tx.send(line).await?;
    WatchProgress::count(&progress.sent);
    Ok(())
}

/// Everything a watch stream needs, computed under the state lock.
pub struct PreparedWatch {
    def: ResourceDef,
    ns: Option<String>,
    sel: Selectors,
    initial: Vec<Value>,
    rx: broadcast::Receiver<Arc<Event>>,
    /// Events broadcast before `rx` subscribed.
    base: u64,
    from_rv: u64,
    bookmarks: bool,
    initial_end_bookmark: bool,
    timeout: Duration,
    partial: bool,
}

fn watch_error_event(e: &ApiError) -> Value {
    json!({"type": "ERROR", "object": e.body})
}

fn prepare_watch(st: &mut State, t: &Target, req: &Req) -> Result<PreparedWatch, ApiError> {
    let sel = selectors(&t.def, req)?;
    let rv_param = req.q("resourceVersion").unwrap_or("").to_string();
    let send_initial = req.q("sendInitialEvents").map(|v| v == "true");
    let rv_match = req.q("resourceVersionMatch");
    if send_initial.is_some() && rv_match != Some("NotOlderThan") {
        return Err(list_options_invalid(
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    let rv = if rv_param.is_empty() {
        None
    } else {
        Some(rv_param.parse::<u64>().map_err(|_| {
            ApiError::internal(format!(
                "resourceVersion: Invalid value: \"{rv_param}\": strconv.ParseUint: parsing \"{rv_param}\": invalid syntax"
            ))
        })?)
    };
    let timeout_req = req
        .q("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let bookmarks = req.flag("allowWatchBookmarks");
    let partial = req.accept.contains("as=PartialObjectMetadata");
    let rx = st.tx.subscribe();
    let base = st.emitted;
    let matching = |v: &Value| {
        let ns_ok =
            t.ns.as_ref()
                .is_none_or(|n| v["metadata"]["namespace"].as_str() == Some(n));
        ns_ok && sel.matches(v)
    };
    let mut initial = Vec::new();
    let synthetic = match (rv, send_initial) {
        (_, Some(true)) => true,
        (_, Some(false)) => false,
        (None, None) | (Some(0), None) => true,
        _ => false,
    };
    let from_rv;
    if synthetic || rv.is_none() || rv == Some(0) {
        from_rv = st.rv;
        if synthetic {
            for (k, v) in st.objects.range(
                (
                    t.def.storage_group().to_string(),
                    t.def.plural.clone(),
                    String::new(),
                    String::new(),
                )..,
            ) {
                if k.0 != t.def.storage_group() || k.1 != t.def.plural {
                    break;
                }
                let v = to_view(&t.def, v.clone());
                if matching(&v) {
                    initial.push(json!({"type": "ADDED", "object": v}));
                }
            }
        }
    } else {
        let rv = rv.unwrap_or(0);
        let since = st
            .served_since
            .get(&(t.def.group.clone(), t.def.plural.clone()))
            .copied()
            .unwrap_or(0);
        if rv < since || rv < st.compacted {
            let oldest = since.max(st.compacted + 1);
            let err = ApiError::new(
                410,
                Some("Expired"),
                format!("too old resource version: {rv} ({oldest})"),
            );
            initial.push(watch_error_event(&err));
            return Ok(PreparedWatch {
                def: t.def.clone(),
                ns: t.ns.clone(),
                sel,
                initial,
                rx,
                base,
                from_rv: u64::MAX,
                bookmarks: false,
                initial_end_bookmark: false,
                timeout: Duration::ZERO,
                partial,
            });
        }
        from_rv = st.rv;
        for ev in st.history.iter().filter(|e| e.rv > rv) {
            if let Some(line) = filter_event(&t.def, t.ns.as_deref(), &sel, ev) {
                initial.push(line);
            }
        }
    }
    Ok(PreparedWatch {
        def: t.def.clone(),
        ns: t.ns.clone(),
        sel,
        initial,
        rx,
        base,
        from_rv,
        bookmarks,
        initial_end_bookmark: send_initial == Some(true) && bookmarks,
        timeout: timeout_req,
        partial,
    })
}

/// Maps a stored event to what a watcher with these filters sees: selector transitions become
/// ADDED/DELETED, and a DELETED for an object leaving the selector carries its old labels.
fn filter_event(def: &ResourceDef, ns: Option<&str>, sel: &Selectors, ev: &Event) -> Option<Value> {
    if ev.group != def.storage_group() || ev.plural != def.plural {
        return None;
    }
    if let Some(n) = ns
        && ev.namespace != n
    {
        return None;
    }
    let object = to_view(def, ev.object.clone());
    let old = ev.old.clone().map(|o| to_view(def, o));
    let new_match = sel.matches(&object);
    let old_match = old.as_ref().is_some_and(|o| sel.matches(o));
    let (ty, obj) = match ev.kind {
        EventType::Added => (new_match.then_some("ADDED"), object),
        EventType::Deleted => ((new_match || old_match).then_some("DELETED"), object),
        EventType::Modified => match (old_match, new_match) {
            (true, true) => (Some("MODIFIED"), object),
            (false, true) => (Some("ADDED"), object),
            (true, false) => {
                let mut o = old.unwrap_or(Value::Null);
                o["metadata"]["resourceVersion"] = json!(ev.rv.to_string());
                (Some("DELETED"), o)
            }
            (false, false) => (None, Value::Null),
        },
    };
    ty.map(|t| json!({"type": t, "object": obj}))
}

fn start_watch(inner: Arc<Inner>, mut w: PreparedWatch, agent: &str) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(1024);
    let progress = Arc::new(WatchProgress {
        agent: agent.to_owned(),
        base: w.base,
        handled: Default::default(),
        sent: Default::default(),
        pulled: Default::default(),
        fed: Default::default(),
        ended: Default::default(),
    });
    lock(&inner.watches).push(progress.clone());
    let lines = Lines {
        rx,
        progress: progress.clone(),
    };
    let timeout = w.timeout.min(inner.config.max_watch_timeout);
    let interval = inner.config.bookmark_interval;
    let mut drop_rx = inner.drop_watches.subscribe();
    tokio::spawn(async move {
        let _fed = SetOnDrop(&progress.fed);
        let line = |v: &Value| {
            let mut b = serde_json::to_vec(v).unwrap_or_default();
            b.push(b'\n');
            Bytes::from(b)
        };
        let shape = |mut v: Value, partial: bool| {
            if partial && let Some(o) = v.get("object").cloned() {
                v["object"] = partial_metadata(&o);
            }
            v
        };
        for ev in std::mem::take(&mut w.initial) {
            if send(&tx, &progress, line(&shape(ev, w.partial)))
                .await
                .is_err()
            {
                return;
            }
        }
        if w.from_rv == u64::MAX {
            return;
        }
        let bookmark = |rv: u64, end: bool| {
            let mut b = json!({"type": "BOOKMARK", "object": {"kind": w.def.kind, "apiVersion": w.def.api_version(), "metadata": {"resourceVersion": rv.to_string()}}});
            if end {
                b["object"]["metadata"]["annotations"] =
                    json!({"k8s.io/initial-events-end": "true"});
            }
            b
        };
        let mut last_rv = w.from_rv;
        if w.initial_end_bookmark
            && send(&tx, &progress, line(&bookmark(last_rv, true)))
                .await
                .is_err()
        {
            return;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = drop_rx.changed() => return,
                _ = tx.closed() => return,
                _ = ticker.tick(), if w.bookmarks => {
                    let current = lock(&inner.state).rv;
                    // Deliver everything up to `current` first so the bookmark never runs ahead.
                    loop {
                        match w.rx.try_recv() {
                            Ok(ev) => {
                                if ev.rv > w.from_rv {
                                    last_rv = last_rv.max(ev.rv);
                                    if let Some(l) = filter_event(&w.def, w.ns.as_deref(), &w.sel, &ev)
                                        && send(&tx, &progress, line(&shape(l, w.partial))).await.is_err() { return; }
                                }
                                WatchProgress::count(&progress.handled);
                            }
                            Err(broadcast::error::TryRecvError::Empty) => break,
                            Err(_) => return,
                        }
                    }
                    last_rv = last_rv.max(current);
                    if send(&tx, &progress, line(&bookmark(last_rv, false))).await.is_err() { return; }
                }
                ev = w.rx.recv() => {
                    match ev {
                        Ok(ev) => {
                            if ev.rv > w.from_rv {
                                last_rv = last_rv.max(ev.rv);
                                if let Some(l) = filter_event(&w.def, w.ns.as_deref(), &w.sel, &ev)
                                    && send(&tx, &progress, line(&shape(l, w.partial))).await.is_err() { return; }
                            }
                            WatchProgress::count(&progress.handled);
                        }
                        // A watcher that fell too far behind is closed; the client re-watches.
                        Err(_) => return,
                    }
                }
            }
        }
    });
    let stream = futures::stream::unfold(lines, |mut lines| async move {
        let line = lines.rx.recv().await?;
        WatchProgress::count(&lines.progress.pulled);
        Some((Ok::<_, Infallible>(Frame::data(line)), lines))
    });
    let mut r = Response::new(StreamBody::new(stream.boxed()).boxed_unsync());
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
