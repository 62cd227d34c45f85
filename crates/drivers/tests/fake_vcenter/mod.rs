//! An in-process fake vCenter for the `drivers` tests: the parts of vCenter 7.0U2+/8.x the
//! vSphere driver's client speaks, answering (and failing) as vCenter does, on 127.0.0.1 over
//! plain HTTP ([`FakeVCenter::start`]) or HTTPS with a throwaway CA ([`FakeVCenter::start_https`]).
//! - the vSphere Automation REST API under `/api`: sessions (basic auth, then the
//!   `vmware-api-session-id` header), datacenters and datastores by name, tag categories, tags
//!   and tag associations;
//! - the vim25 SOAP API on `/sdk`: `RetrieveServiceContent`, `Login` (which sets the
//!   `vmware_soap_session` cookie) and `Logout`;
//! - the storage policy (PBM) SOAP API on `/pbm/sdk`, authenticated by the vim25 session in
//!   `soapenv:Header/vcSessionCookie`: `PbmRetrieveServiceContent`, `PbmQueryProfile`,
//!   `PbmRetrieveContent` and `PbmCreate`, over a store seeded with two built-in profiles.
//!
//! Tests seed and inspect the [`State`], make calls fail with [`State::deny`], and read every
//! request seen with [`FakeVCenter::calls`] (those that change vCenter: [`FakeVCenter::writes`]).

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::hash_map::RandomState;
use std::convert::Infallible;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use roxmltree::{Document, Node};
use serde_json::{Value, json};

/// The only vCenter user, for REST basic auth and SOAP `Login`.
pub const USER: &str = "administrator@vsphere.local";
/// Its password (awkward characters on purpose: JSON, XML, basic auth and shells all differ).
pub const PASSWORD: &str = "p\"a$s\\w0rd";
/// The PBM capability namespace of tag-based placement rules.
pub const TAG_NAMESPACE: &str = "http://www.vmware.com/storage/tag";
const SOAPENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
const VIM: &str = "urn:vim25";
const PBM: &str = "urn:pbm";
const SOAP_COOKIE: &str = "vmware_soap_session";
/// PBM's built-in profiles, as a fresh vCenter has them: id, name, description and the rule's
/// capability namespace, capability id, property id and value, separated by `|`.
const BUILTIN: [&str; 2] = [
    "aa6d5a82-1c88-45da-85d3-3d74b91a5bad|vSAN Default Storage Policy|Storage policy used as default for vSAN datastores|VSAN|hostFailuresToTolerate|hostFailuresToTolerate|1",
    "4d5f673c-536f-11e6-beb8-9e71128cae77|VM Encryption Policy|Sample storage policy for VMware's VM and virtual disk encryption|vmwarevmcrypt@ENCRYPTION|vmwarevmcrypt@ENCRYPTION|AllowCleartextFilters|False",
];

/// The vCenter inventory: datacenters by name, with the names of their datastores.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub datacenters: Vec<(String, Vec<String>)>,
}

impl Inventory {
    /// This inventory and one more datacenter with these datastores.
    pub fn with(mut self, datacenter: &str, datastores: &[&str]) -> Self {
        let datastores = datastores.iter().map(|d| s(d)).collect();
        self.datacenters.push((s(datacenter), datastores));
        self
    }
}

/// One request the fake answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    /// The path with its query, as sent (still percent-encoded).
    pub path: String,
    /// The SOAP operation (the local name of the body's element), or "" for REST.
    pub operation: String,
}

impl Call {
    /// Whether the call changes vCenter (see [`FakeVCenter::writes`]).
    pub fn is_write(&self) -> bool {
        let (route, query) = self.path.split_once('?').unwrap_or((&self.path, ""));
        let list = query.split('&').any(|p| p.starts_with("action=list-"));
        let changes = matches!(self.method.as_str(), "POST" | "PATCH" | "DELETE");
        let rest = changes && route.starts_with("/api/") && route != "/api/session" && !list;
        rest || self.operation == "PbmCreate"
    }
}

/// A datacenter: `datacenter-N`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Datacenter {
    pub id: String,
    pub name: String,
}

/// A datastore, `datastore-N`, of the datacenter of id `datacenter`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Datastore {
    pub id: String,
    pub name: String,
    pub datacenter: String,
    /// `VMFS`, `NFS`, `VSAN`, ...
    pub kind: String,
    pub free_space: u64,
    pub capacity: u64,
}

/// A tag category, `urn:vmomi:InventoryServiceCategory:<uuid>:GLOBAL`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Category {
    pub id: String,
    pub name: String,
    pub description: String,
    /// `SINGLE` or `MULTIPLE`.
    pub cardinality: String,
    /// The object types its tags attach to (`urn:vim25:Datastore` or `Datastore`); none: all.
    pub associable_types: Vec<String>,
}

/// A tag of a category, `urn:vmomi:InventoryServiceTag:<uuid>:GLOBAL`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    pub id: String,
    pub name: String,
    pub description: String,
    pub category_id: String,
}

/// A PBM capability profile (a storage policy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub id: String,
    pub name: String,
    pub description: String,
    /// `REQUIREMENT` (or `RESOURCE`, `DATA_SERVICE_POLICY`, ...).
    pub category: String,
    /// `STORAGE`.
    pub resource_type: String,
    /// From the create spec: (capability namespace, capability id, property id, values) of
    /// each capability instance's property.
    pub rules: Vec<(String, String, String, Vec<String>)>,
}

/// Everything the fake vCenter knows; tests may change it between requests.
#[derive(Debug, Default)]
pub struct State {
    pub datacenters: Vec<Datacenter>,
    pub datastores: Vec<Datastore>,
    pub categories: Vec<Category>,
    pub tags: Vec<Tag>,
    /// (tag id, object type as sent, object id).
    pub attached: Vec<(String, String, String)>,
    pub profiles: Vec<Profile>,
    /// Requests whose path starts with one of these (e.g. "/api/cis/tagging/category") or whose
    /// SOAP operation equals one (e.g. "PbmCreate") fail once authenticated: REST with 403
    /// `UNAUTHORIZED`, SOAP with a `NoPermission` fault.
    pub deny: Vec<String>,
    /// The live REST session tokens.
    pub sessions: Vec<String>,
    /// The live vim25 session cookies (without quotes), which PBM takes too.
    pub soap_sessions: Vec<String>,
    next_moref: u64,
    next_uuid: u64,
}

impl State {
    /// The inventory with fresh ids, and PBM's built-in profiles.
    pub fn new(inventory: &Inventory) -> Self {
        let mut state = Self::default();
        for (dc_name, datastores) in &inventory.datacenters {
            let dc = state.moref("datacenter");
            for name in datastores {
                let (id, name, datacenter) = (state.moref("datastore"), s(name), dc.clone());
                let (kind, free_space, capacity) = (s("VMFS"), 1 << 40, 1 << 41);
                let datastore = Datastore {
                    id,
                    name,
                    datacenter,
                    kind,
                    free_space,
                    capacity,
                };
                state.datastores.push(datastore);
            }
            let name = s(dc_name);
            state.datacenters.push(Datacenter { id: dc, name });
        }
        for builtin in BUILTIN {
            let f: Vec<String> = builtin.split('|').map(s).collect();
            let rules = vec![(s(&f[3]), s(&f[4]), s(&f[5]), vec![s(&f[6])])];
            let (id, name, description) = (s(&f[0]), s(&f[1]), s(&f[2]));
            let (category, resource_type) = (s("REQUIREMENT"), s("STORAGE"));
            let profile = Profile {
                id,
                name,
                description,
                category,
                resource_type,
                rules,
            };
            state.profiles.push(profile);
        }
        state
    }

    /// A new managed object id: `<kind>-N`.
    fn moref(&mut self, kind: &str) -> String {
        self.next_moref += 1;
        format!("{kind}-{}", self.next_moref)
    }

    /// A new uuid-like string (counter-based: runs are reproducible).
    pub fn uuid(&mut self) -> String {
        self.next_uuid += 1;
        format!("f4c3f4c3-0000-4000-8000-{:012x}", self.next_uuid)
    }

    /// A new tag category (no description); returns its id.
    pub fn add_category(&mut self, name: &str, cardinality: &str, types: &[&str]) -> String {
        let id = format!("urn:vmomi:InventoryServiceCategory:{}:GLOBAL", self.uuid());
        let (name, cardinality, description) = (s(name), s(cardinality), String::new());
        let associable_types = types.iter().map(|t| s(t)).collect();
        self.categories.push(Category {
            id: id.clone(),
            name,
            description,
            cardinality,
            associable_types,
        });
        id
    }

    /// A new tag (no description) of category `category_id`; returns its id.
    pub fn add_tag(&mut self, name: &str, category_id: &str) -> String {
        let id = format!("urn:vmomi:InventoryServiceTag:{}:GLOBAL", self.uuid());
        let (name, category_id, description) = (s(name), s(category_id), String::new());
        self.tags.push(Tag {
            id: id.clone(),
            name,
            description,
            category_id,
        });
        id
    }

    pub fn category_named(&self, name: &str) -> Option<&Category> {
        self.categories.iter().find(|c| c.name == name)
    }

    pub fn tag_named(&self, category_id: &str, name: &str) -> Option<&Tag> {
        let mut tags = self.tags.iter();
        tags.find(|t| t.category_id == category_id && t.name == name)
    }

    pub fn profile_named(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name == name)
    }

    pub fn datastore_named(&self, name: &str) -> Option<&Datastore> {
        self.datastores.iter().find(|d| d.name == name)
    }

    /// The names of the tags attached to the object of id `object`.
    pub fn tags_on(&self, object: &str) -> Vec<String> {
        let ids = self.attached.iter().filter(|a| a.2 == object);
        let tags = ids.filter_map(|a| self.tags.iter().find(|t| t.id == a.0));
        tags.map(|t| t.name.clone()).collect()
    }
}

fn s(text: &str) -> String {
    text.to_owned()
}

/// A session token or cookie: 40 random hex digits.
fn random_hex() -> String {
    let r = RandomState::new();
    let (a, b, c) = (r.hash_one(1), r.hash_one(2), r.hash_one(3) as u32);
    format!("{a:016x}{b:016x}{c:08x}")
}

/// Escapes `text` for XML content and attribute values (the client's escaping: a vCenter
/// unescapes any well-formed XML the same way).
pub use drivers::vcenter_api::xml_escape;

/// Decodes `%XX` escapes (and `+` as a space in query values); bad escapes stay as they are.
fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let (bytes, mut out, mut i) = (text.as_bytes(), Vec::new(), 0);
    while i < bytes.len() {
        let hex = text.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16));
        match (bytes[i], hex) {
            (b'%', Some(Ok(byte))) => {
                out.push(byte);
                i += 2;
            }
            (b'+', _) if plus_is_space => out.push(b' '),
            (byte, _) => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded values of `key` in a query string.
fn query_values(query: &str, key: &str) -> Vec<String> {
    let pairs = query.split('&').filter_map(|p| p.split_once('='));
    let values = pairs.filter(|(k, _)| percent_decode(k, true) == key);
    values.map(|(_, v)| percent_decode(v, true)).collect()
}

/// The fake vCenter server; it stops taking connections when dropped.
pub struct FakeVCenter {
    port: u16,
    ca_pem: Option<String>,
    state: Arc<Mutex<State>>,
    calls: Arc<Mutex<Vec<Call>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeVCenter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeVCenter {
    /// Plain HTTP on 127.0.0.1:<random>.
    pub async fn start(inventory: Inventory) -> Self {
        Self::serve(inventory, None).await
    }

    /// HTTPS with a certificate for 127.0.0.1 and "localhost" signed by a throwaway CA.
    pub async fn start_https(inventory: Inventory) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa};
        use rcgen::{ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose};
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        let name = &mut ca.distinguished_name;
        name.push(DnType::CommonName, "fake vCenter test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let mut server = CertificateParams::new(vec![s("localhost"), s("127.0.0.1")]).unwrap();
        let name = &mut server.distinguished_name;
        name.push(DnType::CommonName, "fake vCenter");
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = server.signed_by(&key, &ca).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap();
        Self::serve(inventory, Some((Arc::new(config), ca.pem()))).await
    }

    async fn serve(inventory: Inventory, tls: Option<(Arc<rustls::ServerConfig>, String)>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::new(&inventory)));
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let ca_pem = tls.as_ref().map(|t| t.1.clone());
        let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.0));
        let shared = (state.clone(), calls.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let ((state, calls), acceptor) = (shared.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let (state, calls) = (state.clone(), calls.clone());
                        async move { Ok::<_, Infallible>(answer(&state, &calls, request).await) }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    let _ = match acceptor {
                        // A client that refuses the certificate ends the connection here.
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(tls) => http.serve_connection(TokioIo::new(tls), service).await,
                            Err(_) => return,
                        },
                        None => http.serve_connection(TokioIo::new(stream), service).await,
                    };
                });
            }
        });
        Self {
            port,
            ca_pem,
            state,
            calls,
            task,
        }
    }

    /// "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT".
    pub fn base_url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA that signed the server's certificate (PEM), for HTTPS.
    pub fn ca_pem(&self) -> Option<String> {
        self.ca_pem.clone()
    }

    /// The state, to seed or inspect (drop the guard before the next request).
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Every request seen, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    pub fn clear_calls(&self) {
        self.calls.lock().unwrap().clear();
    }

    /// The calls that change vCenter: POST/PATCH/DELETE on /api except session create/delete
    /// and the read-only `action=list-*` POSTs; SOAP `PbmCreate`. Refused attempts count too.
    pub fn writes(&self) -> Vec<Call> {
        self.calls().into_iter().filter(Call::is_write).collect()
    }
}

/// An answer before it is an HTTP response: status, body (JSON, or XML when `xml`), and the
/// `Set-Cookie` header if any.
#[derive(Default)]
struct Reply {
    status: u16,
    xml: bool,
    body: String,
    set_cookie: Option<String>,
}

impl Reply {
    fn into_response(self) -> Response<Full<Bytes>> {
        let kind = if self.xml {
            "text/xml; charset=utf-8"
        } else {
            "application/json"
        };
        let mut response = Response::builder().status(self.status);
        if !self.body.is_empty() {
            response = response.header("content-type", kind);
        }
        if let Some(cookie) = self.set_cookie {
            response = response.header("set-cookie", cookie);
        }
        response.body(Full::new(Bytes::from(self.body))).unwrap()
    }
}

/// A handler's answer: the reply, or the error reply that ended it early.
type Answer = Result<Reply, Reply>;

/// Records the request and answers it: SOAP on `POST /sdk` and `/pbm/sdk`, REST otherwise.
async fn answer(
    state: &Mutex<State>,
    calls: &Mutex<Vec<Call>>,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let method = request.method().to_string();
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let path = path.to_owned();
    let headers = request.headers().clone();
    let body = request.into_body().collect().await.map(|b| b.to_bytes());
    let body = body.unwrap_or_default();
    let route = path.split('?').next().unwrap_or_default();
    let soap = method == "POST" && (route == "/sdk" || route == "/pbm/sdk");
    let (pbm, text) = (route == "/pbm/sdk", String::from_utf8_lossy(&body));
    let document = Document::parse(&text).ok().filter(|_| soap);
    let op = document.as_ref().and_then(soap_operation);
    let operation = op.map(|o| s(o.tag_name().name())).unwrap_or_default();
    let call = Call {
        method: method.clone(),
        path: path.clone(),
        operation,
    };
    calls.lock().unwrap().push(call);
    let state = &mut state.lock().unwrap();
    let namespace = if pbm { PBM } else { VIM };
    let answer = match (&document, op) {
        _ if !soap => rest(state, &method, &path, &headers, &body),
        (Some(doc), Some(op)) if op.tag_name().namespace() == Some(namespace) => {
            if pbm {
                pbm_call(state, doc, op)
            } else {
                vim_call(state, op, &headers)
            }
        }
        (_, Some(op)) => Err(not_implemented(op.tag_name().name(), namespace)),
        _ => Err(fault(VIM, "InvalidRequest", "Not a SOAP envelope.", "")),
    };
    answer.unwrap_or_else(|reply| reply).into_response()
}

// ---------------------------------------------------------------------------------------------
// REST: the vSphere Automation API under /api.

/// `body` as JSON, or no body when it is `null`.
fn json_reply(status: u16, body: &Value) -> Reply {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    Reply {
        status,
        body,
        ..Reply::default()
    }
}

/// A vAPI error: `{"error_type": kind, "messages": [...]}`.
fn error(status: u16, kind: &str, message: &str) -> Reply {
    let id = format!("com.vmware.vapi.std.errors.{}", kind.to_lowercase());
    let messages = json!([{"args": [], "default_message": message, "id": id}]);
    json_reply(status, &json!({"error_type": kind, "messages": messages}))
}

fn not_found(what: &str) -> Reply {
    error(404, "NOT_FOUND", &format!("{what} not found."))
}

fn invalid(message: &str) -> Reply {
    error(400, "INVALID_ARGUMENT", message)
}

/// `item`, or 404 naming `what`.
fn found<T>(item: Option<T>, what: &str) -> Result<T, Reply> {
    item.ok_or_else(|| not_found(what))
}

/// The text field `key` of a JSON body.
fn field(body: &Value, key: &str) -> Option<String> {
    body.get(key).and_then(Value::as_str).map(s)
}

/// The list of texts `key` of a JSON body.
fn texts(body: &Value, key: &str) -> Option<Vec<String>> {
    let items = body.get(key)?.as_array()?;
    items.iter().map(|t| t.as_str().map(s)).collect()
}

fn rest(state: &mut State, method: &str, path: &str, headers: &HeaderMap, body: &[u8]) -> Answer {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let unauthenticated = || error(401, "UNAUTHENTICATED", "Authentication required.");
    if (method, route) == ("POST", "/api/session") {
        let basic = header("authorization").and_then(|a| a.strip_prefix("Basic "));
        let base64 = base64::engine::general_purpose::STANDARD;
        let credentials = basic.and_then(|b| base64.decode(b.trim()).ok());
        if credentials.as_deref() != Some(format!("{USER}:{PASSWORD}").as_bytes()) {
            return Err(unauthenticated());
        }
        let token = random_hex()[..32].to_owned();
        state.sessions.push(token.clone());
        return Ok(json_reply(201, &json!(token)));
    }
    let token = header("vmware-api-session-id").unwrap_or_default();
    if !state.sessions.iter().any(|t| t == token) {
        return Err(unauthenticated());
    }
    if state.deny.iter().any(|d| route.starts_with(d.as_str())) {
        return Err(error(403, "UNAUTHORIZED", "Permission denied."));
    }
    let body: Value = serde_json::from_slice(body).unwrap_or_default();
    let parts = route.strip_prefix("/api/").unwrap_or("-").split('/');
    let parts: Vec<String> = parts.map(|p| percent_decode(p, false)).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let action = query_values(query, "action").pop();
    let names = query_values(query, "names");
    let named = |name: &String| names.is_empty() || names.contains(name);
    let list = |items: Vec<Value>| Ok(json_reply(200, &Value::Array(items)));
    match (method, parts.as_slice(), action.as_deref()) {
        ("DELETE", ["session"], None) => {
            state.sessions.retain(|t| t != token);
            Ok(json_reply(204, &Value::Null))
        }
        ("GET", ["vcenter", "datacenter"], None) => {
            let found = state.datacenters.iter().filter(|d| named(&d.name));
            list(
                found
                    .map(|d| json!({"datacenter": d.id, "name": d.name}))
                    .collect(),
            )
        }
        ("GET", ["vcenter", "datastore"], None) => {
            let dcs = query_values(query, "datacenters");
            let found = state.datastores.iter().filter(|d| named(&d.name));
            let found = found.filter(|d| dcs.is_empty() || dcs.contains(&d.datacenter));
            list(
                found
                    .map(|d| {
                        json!({"datastore": d.id, "name": d.name, "type": d.kind,
                "free_space": d.free_space, "capacity": d.capacity})
                    })
                    .collect(),
            )
        }
        ("GET", ["cis", "tagging", "category"], None) => {
            list(state.categories.iter().map(|c| json!(c.id)).collect())
        }
        ("GET", ["cis", "tagging", "category", id], None) => {
            let c = found(state.categories.iter().find(|c| c.id == *id), id)?;
            Ok(json_reply(
                200,
                &json!({"id": c.id, "name": c.name, "description": c.description,
                "cardinality": c.cardinality, "associable_types": c.associable_types,
                "used_by": []}),
            ))
        }
        ("POST", ["cis", "tagging", "category"], None) => create_category(state, &body),
        ("PATCH", ["cis", "tagging", "category", id], None) => update_category(state, id, &body),
        ("GET", ["cis", "tagging", "tag"], None) => {
            list(state.tags.iter().map(|t| json!(t.id)).collect())
        }
        ("POST", ["cis", "tagging", "tag"], Some("list-tags-for-category")) => {
            let category = field(&body, "category_id").unwrap_or_default();
            found(
                state.categories.iter().find(|c| c.id == category),
                &category,
            )?;
            let tags = state.tags.iter().filter(|t| t.category_id == category);
            list(tags.map(|t| json!(t.id)).collect())
        }
        ("POST", ["cis", "tagging", "tag"], None) => create_tag(state, &body),
        ("GET", ["cis", "tagging", "tag", id], None) => {
            let t = found(state.tags.iter().find(|t| t.id == *id), id)?;
            Ok(json_reply(
                200,
                &json!({"id": t.id, "category_id": t.category_id, "name": t.name,
                "description": t.description, "used_by": []}),
            ))
        }
        ("POST", ["cis", "tagging", "tag-association"], Some("list-attached-tags")) => {
            let object = body["object_id"]["id"].as_str().unwrap_or_default();
            let on = state.attached.iter().filter(|a| a.2 == object);
            list(on.map(|a| json!(a.0)).collect())
        }
        ("POST", ["cis", "tagging", "tag-association", tag], Some("attach")) => {
            attach(state, tag, &body)
        }
        _ => Err(not_found(&format!("Operation {method} {route}"))),
    }
}

/// `POST /api/cis/tagging/category`: every field is required; names are unique.
fn create_category(state: &mut State, body: &Value) -> Answer {
    let fields = (field(body, "name"), field(body, "description"));
    let (Some(name), Some(description)) = fields else {
        return Err(invalid("A category needs a name and a description."));
    };
    let cardinality = field(body, "cardinality").unwrap_or_default();
    let types = texts(body, "associable_types");
    let (Some(types), "SINGLE" | "MULTIPLE") = (types, cardinality.as_str()) else {
        return Err(invalid(
            "A category needs a cardinality and associable types.",
        ));
    };
    if name.is_empty() {
        return Err(invalid("The category name is empty."));
    }
    if state.category_named(&name).is_some() {
        let message = format!("Category {name} already exists.");
        return Err(error(400, "ALREADY_EXISTS", &message));
    }
    let types: Vec<&str> = types.iter().map(String::as_str).collect();
    let id = state.add_category(&name, &cardinality, &types);
    state.categories.last_mut().unwrap().description = description;
    Ok(json_reply(201, &json!(id)))
}

/// `PATCH /api/cis/tagging/category/<id>`: the cardinality may go from `SINGLE` to `MULTIPLE`
/// only, and the associable types may only grow.
fn update_category(state: &mut State, id: &str, body: &Value) -> Answer {
    let index = state.categories.iter().position(|c| c.id == id);
    let index = found(index, id)?;
    let old = state.categories[index].clone();
    let mut new = old.clone();
    if let Some(name) = field(body, "name") {
        if state
            .categories
            .iter()
            .any(|c| c.name == name && c.id != id)
        {
            let message = format!("Category {name} already exists.");
            return Err(error(400, "ALREADY_EXISTS", &message));
        }
        new.name = name;
    }
    new.description = field(body, "description").unwrap_or(new.description);
    if let Some(cardinality) = field(body, "cardinality") {
        let allowed = [s(&old.cardinality), s("MULTIPLE")];
        if !allowed.contains(&cardinality) {
            return Err(invalid(&format!(
                "The cardinality cannot become {cardinality}."
            )));
        }
        new.cardinality = cardinality;
    }
    if let Some(types) = texts(body, "associable_types") {
        if let Some(lost) = old.associable_types.iter().find(|t| !types.contains(t)) {
            return Err(invalid(&format!(
                "The associable type {lost} cannot be removed."
            )));
        }
        new.associable_types = types;
    }
    state.categories[index] = new;
    Ok(json_reply(204, &Value::Null))
}

/// `POST /api/cis/tagging/tag`: every field is required; names are unique in a category.
fn create_tag(state: &mut State, body: &Value) -> Answer {
    let fields = (field(body, "name"), field(body, "description"));
    let (Some(name), Some(description), Some(category)) =
        (fields.0, fields.1, field(body, "category_id"))
    else {
        return Err(invalid(
            "A tag needs a name, a description and a category_id.",
        ));
    };
    if name.is_empty() {
        return Err(invalid("The tag name is empty."));
    }
    found(
        state.categories.iter().find(|c| c.id == category),
        &category,
    )?;
    if state.tag_named(&category, &name).is_some() {
        let message = format!("Tag {name} already exists in {category}.");
        return Err(error(400, "ALREADY_EXISTS", &message));
    }
    let id = state.add_tag(&name, &category);
    state.tags.last_mut().unwrap().description = description;
    Ok(json_reply(201, &json!(id)))
}

/// `POST /api/cis/tagging/tag-association/<tag>?action=attach`: to a datastore or datacenter
/// that exists, of a type the tag's category allows, once; with a `SINGLE` category, not next to
/// another tag of it.
fn attach(state: &mut State, tag: &str, body: &Value) -> Answer {
    let object = &body["object_id"];
    let (Some(kind), Some(id)) = (object["type"].as_str(), object["id"].as_str()) else {
        return Err(invalid("object_id needs a type and an id."));
    };
    let t = found(state.tags.iter().find(|t| t.id == tag), tag)?;
    let category = state.categories.iter().find(|c| c.id == t.category_id);
    let category = found(category, &t.category_id)?;
    let bare = |t: &str| s(t.strip_prefix("urn:vim25:").unwrap_or(t));
    let exists = match bare(kind).as_str() {
        "Datastore" => state.datastores.iter().any(|d| d.id == id),
        "Datacenter" => state.datacenters.iter().any(|d| d.id == id),
        _ => false,
    };
    found(exists.then_some(()), &format!("{kind}:{id}"))?;
    let types = &category.associable_types;
    if !types.is_empty() && !types.iter().any(|t| bare(t) == bare(kind)) {
        let message = format!("Tag {} cannot be attached to a {kind}.", t.name);
        return Err(invalid(&message));
    }
    let on: Vec<&str> = state
        .attached
        .iter()
        .filter(|a| a.2 == id)
        .map(|a| &*a.0)
        .collect();
    if on.contains(&tag) {
        return Ok(json_reply(204, &Value::Null));
    }
    let mut siblings = state
        .tags
        .iter()
        .filter(|x| x.category_id == category.id && x.id != tag);
    if category.cardinality == "SINGLE" && siblings.any(|x| on.contains(&&*x.id)) {
        let message = format!("{id} already has a tag of category {}.", category.name);
        return Err(invalid(&message));
    }
    state.attached.push((s(tag), s(kind), s(id)));
    Ok(json_reply(204, &Value::Null))
}

// ---------------------------------------------------------------------------------------------
// SOAP: vim25 on /sdk, PBM on /pbm/sdk.

/// The `soapenv:Header` or `soapenv:Body` (`part`) of a SOAP envelope.
fn soap_part<'a, 'i>(document: &'a Document<'i>, part: &str) -> Option<Node<'a, 'i>> {
    let is =
        |n: &Node, name| (n.tag_name().namespace(), n.tag_name().name()) == (Some(SOAPENV), name);
    let envelope = Some(document.root_element()).filter(|e| is(e, "Envelope"))?;
    envelope.children().find(|n| is(n, part))
}

/// The element in `soapenv:Body` of a SOAP envelope.
fn soap_operation<'a, 'i>(document: &'a Document<'i>) -> Option<Node<'a, 'i>> {
    soap_part(document, "Body")?
        .children()
        .find(Node::is_element)
}

/// The vim25 session of a `Cookie` header, without quotes.
fn soap_cookie(headers: &HeaderMap) -> Option<String> {
    for header in headers.get_all("cookie") {
        for pair in header.to_str().ok()?.split(';') {
            let Some((name, value)) = pair.split_once('=') else {
                continue;
            };
            if name.trim() == SOAP_COOKIE {
                return Some(s(value.trim().trim_matches('"')));
            }
        }
    }
    None
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|c| c.tag_name().name() == name)
}

fn children<'a, 'i>(node: Node<'a, 'i>, name: &'a str) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children().filter(move |c| c.tag_name().name() == name)
}

/// The text of `node`'s child `name` (all of it, entities resolved).
fn text(node: Node<'_, '_>, name: &str) -> Option<String> {
    let texts = child(node, name)?.descendants().filter(Node::is_text);
    let texts = texts.filter_map(|t| t.text());
    Some(texts.collect())
}

/// `value`, or an `InvalidArgument` fault naming `property`.
fn need<T>(value: Option<T>, property: &str) -> Result<T, Reply> {
    value.ok_or_else(|| invalid_argument(property))
}

fn xml_reply(status: u16, body: &str) -> Reply {
    let envelope = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" xmlns:soapenv="{SOAPENV}" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>{body}</soapenv:Body>
</soapenv:Envelope>"#
    );
    Reply {
        status,
        xml: true,
        body: envelope,
        set_cookie: None,
    }
}

/// `<{op}Response xmlns="{namespace}">{inner}</{op}Response>`.
fn ok(namespace: &str, op: &str, inner: &str) -> Answer {
    let body = format!(r#"<{op}Response xmlns="{namespace}">{inner}</{op}Response>"#);
    Ok(xml_reply(200, &body))
}

/// A fault of type `kind` (of `namespace`), with `detail` in its fault element.
fn fault(namespace: &str, kind: &str, message: &str, detail: &str) -> Reply {
    let message = xml_escape(message);
    let fault =
        format!(r#"<{kind}Fault xmlns="{namespace}" xsi:type="{kind}">{detail}</{kind}Fault>"#);
    let code = "<faultcode>ServerFaultCode</faultcode>";
    let body = format!(
        "<soapenv:Fault>{code}<faultstring>{message}</faultstring><detail>{fault}</detail></soapenv:Fault>"
    );
    xml_reply(500, &body)
}

fn not_implemented(op: &str, namespace: &str) -> Reply {
    let message = format!("Unable to resolve WSDL method name {op} in {namespace}");
    fault(VIM, "NotImplemented", &message, "")
}

fn invalid_argument(property: &str) -> Reply {
    let message = format!("A specified parameter was not correct: {property}");
    let detail = format!(
        "<invalidProperty>{}</invalidProperty>",
        xml_escape(property)
    );
    fault(VIM, "InvalidArgument", &message, &detail)
}

/// A fault about managed object `this` needing `privilege`.
fn denied(kind: &str, this: (&str, &str), privilege: &str, message: &str) -> Reply {
    let (object_type, object) = (xml_escape(this.0), xml_escape(this.1));
    let object = format!(r#"<object type="{object_type}">{object}</object>"#);
    let detail = format!("{object}<privilegeId>{privilege}</privilegeId>");
    fault(VIM, kind, message, &detail)
}

fn not_authenticated(this: (&str, &str)) -> Reply {
    denied(
        "NotAuthenticated",
        this,
        "System.View",
        "The session is not authenticated.",
    )
}

/// The `_this` of operation `op` (which is known) must be `this`; and `op` must not be denied.
fn check(state: &State, op: Node<'_, '_>, this: (&str, &str)) -> Result<(), Reply> {
    let node = child(op, "_this");
    let found = (
        node.and_then(|t| t.attribute("type")),
        node.and_then(|t| t.text()),
    );
    if found != (Some(this.0), Some(this.1)) {
        let object = found.1.unwrap_or_default();
        let message = format!(
            "The object '{}:{object}' has already been deleted or has not been completely created",
            this.0
        );
        return Err(fault(VIM, "ManagedObjectNotFound", &message, ""));
    }
    if state.deny.iter().any(|d| d == op.tag_name().name()) {
        let message = "Permission to perform this operation was denied.";
        return Err(denied(
            "NoPermission",
            this,
            "StorageProfile.Update",
            message,
        ));
    }
    Ok(())
}

/// vim25: `RetrieveServiceContent`, `Login`, `Logout` (by the `vmware_soap_session` cookie).
fn vim_call(state: &mut State, op: Node<'_, '_>, headers: &HeaderMap) -> Answer {
    let name = op.tag_name().name();
    let this = match name {
        "RetrieveServiceContent" => ("ServiceInstance", "ServiceInstance"),
        "Login" | "Logout" => ("SessionManager", "SessionManager"),
        other => return Err(not_implemented(other, VIM)),
    };
    check(state, op, this)?;
    match name {
        "RetrieveServiceContent" => ok(
            VIM,
            name,
            r#"<returnval><rootFolder type="Folder">group-d1</rootFolder><propertyCollector type="PropertyCollector">propertyCollector</propertyCollector><about><name>VMware vCenter Server</name><fullName>VMware vCenter Server 8.0.3 build-24022515</fullName><vendor>VMware, Inc.</vendor><version>8.0.3</version><build>24022515</build><osType>linux-x64</osType><productLineId>vpx</productLineId><apiType>VirtualCenter</apiType><apiVersion>8.0.3.0</apiVersion><instanceUuid>f4c3f4c3-0000-4000-8000-00000000aaaa</instanceUuid></about><sessionManager type="SessionManager">SessionManager</sessionManager></returnval>"#,
        ),
        "Login" => {
            let credentials = (text(op, "userName"), text(op, "password"));
            if credentials != (Some(s(USER)), Some(s(PASSWORD))) {
                let message = "Cannot complete login due to an incorrect user name or password.";
                return Err(fault(VIM, "InvalidLogin", message, ""));
            }
            let cookie = random_hex();
            state.soap_sessions.push(cookie.clone());
            let (key, user) = (&random_hex()[..32], xml_escape(USER));
            let time = "2026-01-01T00:00:00Z";
            let session = format!(
                "<returnval><key>{key}</key><userName>{user}</userName><fullName>Administrator vsphere.local</fullName><loginTime>{time}</loginTime><lastActiveTime>{time}</lastActiveTime><locale>en</locale><messageLocale>en</messageLocale><extensionSession>false</extensionSession></returnval>"
            );
            let mut reply = ok(VIM, name, &session)?;
            let set_cookie = format!("{SOAP_COOKIE}=\"{cookie}\"; Path=/; HttpOnly; Secure;");
            reply.set_cookie = Some(set_cookie);
            Ok(reply)
        }
        _ => {
            let cookie = soap_cookie(headers).filter(|c| state.soap_sessions.contains(c));
            let cookie = cookie.ok_or_else(|| not_authenticated(this))?;
            state.soap_sessions.retain(|c| *c != cookie);
            ok(VIM, name, "")
        }
    }
}

/// PBM: every call needs a live vim25 session in `soapenv:Header/vcSessionCookie`.
fn pbm_call(state: &mut State, document: &Document<'_>, op: Node<'_, '_>) -> Answer {
    let name = op.tag_name().name();
    let this = match name {
        "PbmRetrieveServiceContent" => ("PbmServiceInstance", "ServiceInstance"),
        "PbmQueryProfile" | "PbmRetrieveContent" | "PbmCreate" => {
            ("PbmProfileProfileManager", "ProfileManager")
        }
        other => return Err(not_implemented(other, PBM)),
    };
    let header = soap_part(document, "Header");
    let cookie = header
        .and_then(|h| text(h, "vcSessionCookie"))
        .unwrap_or_default();
    if !state.soap_sessions.contains(&cookie) {
        return Err(not_authenticated(this));
    }
    check(state, op, this)?;
    match name {
        "PbmRetrieveServiceContent" => ok(
            PBM,
            name,
            r#"<returnval><aboutInfo><name>PBM</name><version>8.0.3.0</version><instanceUuid>f4c3f4c3-0000-4000-8000-00000000bbbb</instanceUuid></aboutInfo><sessionManager type="PbmSessionManager">SessionManager</sessionManager><capabilityMetadataManager type="PbmCapabilityMetadataManager">CapabilityMetadataManager</capabilityMetadataManager><profileManager type="PbmProfileProfileManager">ProfileManager</profileManager><complianceManager type="PbmComplianceManager">complianceManager</complianceManager><placementSolver type="PbmPlacementSolver">placementSolver</placementSolver><replicationManager type="PbmReplicationManager">ReplicationManager</replicationManager></returnval>"#,
        ),
        "PbmQueryProfile" => {
            let resource = child(op, "resourceType").and_then(|r| text(r, "resourceType"));
            let resource = need(resource, "resourceType")?;
            let category = text(op, "profileCategory");
            let of_category = |p: &&Profile| category.as_ref().is_none_or(|c| *c == p.category);
            let profiles = state
                .profiles
                .iter()
                .filter(|p| p.resource_type == resource);
            let ids = profiles.filter(of_category).map(|p| xml_escape(&p.id));
            let ids = ids.map(|id| format!("<returnval><uniqueId>{id}</uniqueId></returnval>"));
            ok(PBM, name, &ids.collect::<String>())
        }
        "PbmRetrieveContent" => {
            let ids = children(op, "profileIds").filter_map(|p| text(p, "uniqueId"));
            let find = |id: String| state.profiles.iter().find(|p| p.id == id);
            let profiles: Option<Vec<&Profile>> = ids.map(find).collect();
            let profiles = need(profiles.filter(|p| !p.is_empty()), "profileIds")?;
            ok(
                PBM,
                name,
                &profiles.into_iter().map(profile_xml).collect::<String>(),
            )
        }
        _ => pbm_create(state, op),
    }
}

/// A profile as `PbmRetrieveContent` returns it: one sub-profile, one capability per
/// (namespace, id) of its rules.
fn profile_xml(profile: &Profile) -> String {
    let mut capabilities: Vec<(&str, &str, String)> = Vec::new();
    for (namespace, id, property, values) in &profile.rules {
        let value = match values.as_slice() {
            [one] if namespace != TAG_NAMESPACE => {
                let kind = match one.as_str() {
                    v if v.parse::<i64>().is_ok() => "xsd:int",
                    "true" | "false" => "xsd:boolean",
                    _ => "xsd:string",
                };
                format!(r#"<value xsi:type="{kind}">{}</value>"#, xml_escape(one))
            }
            _ => {
                let values = values.iter().map(|v| xml_escape(v));
                let values =
                    values.map(|v| format!(r#"<values xsi:type="xsd:string">{v}</values>"#));
                let values: String = values.collect();
                format!(r#"<value xsi:type="PbmCapabilityDiscreteSet">{values}</value>"#)
            }
        };
        let property = format!(
            "<propertyInstance><id>{}</id>{value}</propertyInstance>",
            xml_escape(property)
        );
        match capabilities
            .iter_mut()
            .find(|c| (c.0, c.1) == (namespace, id))
        {
            Some(capability) => capability.2.push_str(&property),
            None => capabilities.push((namespace, id, property)),
        }
    }
    let capabilities = capabilities.into_iter().map(|(namespace, id, properties)| {
        let (namespace, id) = (xml_escape(namespace), xml_escape(id));
        format!("<capability><id><namespace>{namespace}</namespace><id>{id}</id></id><constraint>{properties}</constraint></capability>")
    });
    let capabilities: String = capabilities.collect();
    let tags_only = profile.rules.iter().all(|r| r.0 == TAG_NAMESPACE);
    let rule_set = if tags_only {
        "Tag based placement"
    } else {
        "Rule-Set 1"
    };
    let (id, name) = (xml_escape(&profile.id), xml_escape(&profile.name));
    let (description, user) = (xml_escape(&profile.description), xml_escape(USER));
    let (category, resource) = (
        xml_escape(&profile.category),
        xml_escape(&profile.resource_type),
    );
    let time = "2026-01-01T00:00:00Z";
    format!(
        r#"<returnval xsi:type="PbmCapabilityProfile"><profileId><uniqueId>{id}</uniqueId></profileId><name>{name}</name><description>{description}</description><creationTime>{time}</creationTime><createdBy>{user}</createdBy><lastUpdatedTime>{time}</lastUpdatedTime><lastUpdatedBy>{user}</lastUpdatedBy><profileCategory>{category}</profileCategory><resourceType><resourceType>{resource}</resourceType></resourceType><constraints xsi:type="PbmCapabilitySubProfileConstraints"><subProfiles><name>{rule_set}</name>{capabilities}</subProfiles></constraints><generationId>0</generationId><isDefault>false</isDefault></returnval>"#
    )
}

/// `PbmCreate`: a capability profile from its create spec. Tag rules must name an existing
/// category (the capability id) and tags of it (the values), as PBM's tag capabilities are
/// the categories and tags vCenter has.
fn pbm_create(state: &mut State, op: Node<'_, '_>) -> Answer {
    let spec = need(child(op, "createSpec"), "createSpec")?;
    let name = text(spec, "name").filter(|n| !n.trim().is_empty());
    let name = need(name, "createSpec.name")?;
    let resource = child(spec, "resourceType").and_then(|r| text(r, "resourceType"));
    let resource = need(resource, "createSpec.resourceType")?;
    let constraints = need(child(spec, "constraints"), "createSpec.constraints")?;
    let mut rules = Vec::new();
    let sub_profiles = children(constraints, "subProfiles");
    for capability in sub_profiles.flat_map(|p| children(p, "capability")) {
        let id = child(capability, "id");
        let namespace = need(
            id.and_then(|i| text(i, "namespace")),
            "capability.id.namespace",
        )?;
        let capability_id = need(id.and_then(|i| text(i, "id")), "capability.id.id")?;
        let constraints = children(capability, "constraint");
        for property in constraints.flat_map(|c| children(c, "propertyInstance")) {
            let value = need(child(property, "value"), "propertyInstance.value")?;
            let values = children(value, "values").filter_map(|v| v.text().map(s));
            let mut values: Vec<String> = values.collect();
            if values.is_empty() {
                values.push(s(value.text().unwrap_or_default()));
            }
            if namespace == TAG_NAMESPACE {
                let category = state.category_named(&capability_id);
                let category = need(category, &format!("tag category {capability_id}"))?;
                let missing = values
                    .iter()
                    .find(|v| state.tag_named(&category.id, v).is_none());
                if let Some(tag) = missing {
                    return Err(invalid_argument(&format!("tag {tag} of {capability_id}")));
                }
            }
            let property = text(property, "id").unwrap_or_default();
            rules.push((namespace.clone(), capability_id.clone(), property, values));
        }
    }
    need(
        Some(()).filter(|_| !rules.is_empty()),
        "createSpec.constraints",
    )?;
    if state.profile_named(&name).is_some() {
        let detail = format!("<name>{}</name>", xml_escape(&name));
        let message = format!("A profile with the name {name} already exists.");
        return Err(fault(PBM, "PbmDuplicateName", &message, &detail));
    }
    let id = state.uuid();
    let description = text(spec, "description").unwrap_or_default();
    let category = text(spec, "category").unwrap_or_else(|| s("REQUIREMENT"));
    let resource_type = resource;
    state.profiles.push(Profile {
        id: id.clone(),
        name,
        description,
        category,
        resource_type,
        rules,
    });
    ok(
        PBM,
        "PbmCreate",
        &format!("<returnval><uniqueId>{id}</uniqueId></returnval>"),
    )
}
