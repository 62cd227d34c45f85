//! A minimal vCenter client for the vSphere driver: just enough to make the storage policy
//! the cluster's default StorageClass names ([`ensure_storage_policy`]), as OpenShift's vSphere
//! operator makes it:
//! - the tag category `openshift-<infrastructure name>` (made by the installer; created when
//!   missing, and extended when tags of it cannot be attached to datastores);
//! - the tag `<infrastructure name>` in it, attached to each datastore of the cluster (its
//!   failure domains' datastores, else the cloud config's default datastore);
//! - the tag-based storage policy `openshift-storage-policy-<infrastructure name>`, which
//!   selects the datastores carrying that tag.
//!
//! Tags go through the vSphere Automation REST API (`/api`, vCenter 7.0U2 and later, the
//! oldest vCenter OpenShift upgrades on), storage policies through the SOAP API of vCenter's
//! policy service (PBM, `/pbm/sdk`), authenticated by a vim25 session (`/sdk`). Nothing is
//! written when everything is in place: each object is read first. Both sessions are logged
//! out at the end, whatever happened.
//!
//! HTTP is [`crate::http`] (a [`REQUEST_TIMEOUT`] per request, the egress proxy). Every error
//! names the vCenter and what failed, and never carries the password or a session.

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};
use percent_encoding::{AsciiSet, utf8_percent_encode};
use serde_json::{Value, json};

use crate::http::{HttpClient, NOT_UNRESERVED, percent_encode, send, send_raw};
pub use crate::http::{REQUEST_TIMEOUT, Tls, http_client};

/// The types a tag of the cluster's category must be attachable to, as vim25 type URNs (the
/// installer tags VMs, resource pools and folders with it; the policy needs datastores).
pub const ASSOCIABLE_TYPES: [&str; 5] = [
    "urn:vim25:Datastore",
    "urn:vim25:Folder",
    "urn:vim25:ResourcePool",
    "urn:vim25:StoragePod",
    "urn:vim25:VirtualMachine",
];
/// The namespace of tag-based capabilities in PBM.
pub const TAG_CAPABILITY_NAMESPACE: &str = "http://www.vmware.com/storage/tag";
/// The SOAPAction of vim25 requests: the API of vCenter 7.0U2, which every supported vCenter
/// speaks.
const VIM_ACTION: &str = "urn:vim25/7.0.2.0";
/// The SOAPAction of PBM requests.
const PBM_ACTION: &str = "urn:pbm/2.0";
/// The REST session header.
const SESSION_HEADER: &str = "vmware-api-session-id";
/// The vim25 session cookie.
const SOAP_COOKIE: &str = "vmware_soap_session";

/// A vCenter user and password. Its `Debug` output shows the user only.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    /// The user, e.g. `administrator@vsphere.local`.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// A datastore by name, in its datacenter.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DatastoreName {
    /// The datacenter's name.
    pub datacenter: String,
    /// The datastore's name (the last part of an inventory path such as
    /// `/dc1/datastore/ds1`).
    pub datastore: String,
}

/// What [`ensure_storage_policy`] makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySpec {
    /// The tag category, `openshift-<infrastructure name>`.
    pub category: String,
    /// The tag, `<infrastructure name>`.
    pub tag: String,
    /// The storage policy, `openshift-storage-policy-<infrastructure name>`.
    pub policy: String,
    /// The datastores to tag.
    pub datastores: Vec<DatastoreName>,
    /// The description of what it creates.
    pub description: String,
}

impl PolicySpec {
    /// The spec of the cluster whose infrastructure name is `cluster`.
    pub fn for_cluster(cluster: &str, datastores: Vec<DatastoreName>) -> Self {
        Self {
            category: format!("openshift-{cluster}"),
            tag: cluster.to_owned(),
            policy: policy_name(cluster),
            datastores,
            description: format!(
                "Made by the OpenShift storage operator for cluster {cluster}: do not remove"
            ),
        }
    }
}

/// The storage policy of the cluster whose infrastructure name is `cluster`.
pub fn policy_name(cluster: &str) -> String {
    format!("openshift-storage-policy-{cluster}")
}

/// A vCenter: its base URL (`https://<server>[:<port>]`) and the HTTP client to reach it.
#[derive(Clone)]
pub struct VCenter {
    base: String,
    host: String,
    http: HttpClient,
}

impl std::fmt::Debug for VCenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VCenter")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl VCenter {
    /// The vCenter at `base` (e.g. `https://vcenter.example.com` or `https://10.0.0.5:8443`).
    pub fn new(base: &str, http: HttpClient) -> Self {
        let base = base.trim_end_matches('/').to_owned();
        let host = base
            .split_once("://")
            .map_or(base.as_str(), |(_, rest)| rest)
            .to_owned();
        Self { base, host, http }
    }

    /// The base URL of the vCenter whose cloud-config server is `server` (a host name or
    /// address) on `port` (443 when unset).
    pub fn base_url(server: &str, port: Option<&str>) -> String {
        let host = if server.contains(':') && !server.starts_with('[') {
            format!("[{server}]")
        } else {
            server.to_owned()
        };
        match port.filter(|p| !p.is_empty() && *p != "443") {
            Some(port) => format!("https://{host}:{port}"),
            None => format!("https://{host}"),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// What a path segment holding a tag or category ID escapes: as a query value, but colons stay,
/// since vCenter's IDs are URNs and go into paths with their colons.
const NOT_UNRESERVED_OR_COLON: &AsciiSet = &NOT_UNRESERVED.remove(b':');

/// `value` for a URL query, or (`keep_colon`) a path segment holding a tag or category ID.
fn encode(value: &str, keep_colon: bool) -> String {
    if keep_colon {
        utf8_percent_encode(value, NOT_UNRESERVED_OR_COLON).to_string()
    } else {
        percent_encode(value)
    }
}

/// Basic credentials for `login`.
fn basic(login: &Login) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", login.user, login.password).as_bytes())
    )
}

/// The message of a vSphere Automation API error body, if it has one.
fn rest_message(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let text: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["default_message"].as_str())
        .collect();
    (!text.is_empty()).then(|| text.join(" "))
}

/// A REST session.
struct Rest<'a> {
    vc: &'a VCenter,
    token: String,
}

impl<'a> Rest<'a> {
    async fn login(vc: &'a VCenter, login: &Login) -> Result<Self, String> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(vc.url("/api/session"))
            .header("authorization", basic(login))
            .body(Full::new(Bytes::new()))
            .map_err(|e| format!("vCenter {}: {e}", vc.host))?;
        let what = format!("logging in to vCenter {} (REST)", vc.host);
        let response = send(&vc.http, request, &what).await?;
        match response.status {
            s if s.is_success() => match response.body.as_str() {
                Some(token) if !token.is_empty() => Ok(Self {
                    vc,
                    token: token.to_owned(),
                }),
                _ => Err(format!(
                    "{what}: the answer has no session: is {} a vCenter (7.0U2 or later)?",
                    vc.base
                )),
            },
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(format!(
                "vCenter {} refused user {}: check the user and password of this vCenter in the credentials Secret",
                vc.host, login.user
            )),
            StatusCode::NOT_FOUND => Err(format!(
                "{what}: {} has no /api/session: is it a vCenter 7.0U2 or later?",
                vc.base
            )),
            status => Err(format!(
                "{what}: {}",
                status_message(status, &response.body)
            )),
        }
    }

    /// One call; `what` names it in errors. A 404 is `Ok(None)`.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Option<Value>, String> {
        let mut request = Request::builder()
            .method(method)
            .uri(self.vc.url(path))
            .header(SESSION_HEADER, &self.token);
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            )))
            .map_err(|e| format!("vCenter {}: {what}: {e}", self.vc.host))?;
        let what = format!("vCenter {}: {what}", self.vc.host);
        let response = send(&self.vc.http, request, &what).await?;
        match response.status {
            s if s.is_success() => Ok(Some(response.body)),
            StatusCode::NOT_FOUND => Ok(None),
            StatusCode::FORBIDDEN => Err(format!(
                "{what}: the vCenter user lacks the privilege ({}); OpenShift's vSphere privileges list what the driver needs",
                rest_message(&response.body).unwrap_or_else(|| "403 Forbidden".to_owned())
            )),
            status => Err(format!(
                "{what}: {}",
                status_message(status, &response.body)
            )),
        }
    }

    /// As [`Self::call`], but a 404 is an error too.
    async fn must(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Value, String> {
        self.call(method, path, body, what)
            .await?
            .ok_or_else(|| format!("vCenter {}: {what}: not found", self.vc.host))
    }

    async fn logout(self) {
        let _ = self
            .call(Method::DELETE, "/api/session", None, "logging out")
            .await;
    }
}

fn status_message(status: StatusCode, body: &Value) -> String {
    match rest_message(body) {
        Some(message) => format!("{status}: {message}"),
        None => status.to_string(),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Whether `types` lets tags be attached to `kind` (an empty list allows every type; a type
/// may be written with or without the `urn:vim25:` prefix).
fn associable(types: &[String], kind: &str) -> bool {
    let bare = kind.trim_start_matches("urn:vim25:");
    types.is_empty()
        || types
            .iter()
            .any(|t| t.trim_start_matches("urn:vim25:") == bare)
}

/// The datastore's managed object ID (`datastore-12`).
async fn datastore_id(rest: &Rest<'_>, name: &DatastoreName) -> Result<String, String> {
    let what = format!("finding datacenter {}", name.datacenter);
    let found = rest
        .must(
            Method::GET,
            &format!(
                "/api/vcenter/datacenter?names={}",
                encode(&name.datacenter, false)
            ),
            None,
            &what,
        )
        .await?;
    let Some(datacenter) = found
        .as_array()
        .and_then(|l| l.first())
        .and_then(|d| d["datacenter"].as_str())
    else {
        return Err(format!(
            "vCenter {}: there is no datacenter {}: check the failure domains of Infrastructure/cluster (spec.platformSpec.vsphere) or the cloud config",
            rest.vc.host, name.datacenter
        ));
    };
    let what = format!("finding datastore {}", name.datastore);
    let found = rest
        .must(
            Method::GET,
            &format!(
                "/api/vcenter/datastore?names={}&datacenters={}",
                encode(&name.datastore, false),
                encode(datacenter, false)
            ),
            None,
            &what,
        )
        .await?;
    found
        .as_array()
        .and_then(|l| l.first())
        .and_then(|d| d["datastore"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            format!(
                "vCenter {}: datacenter {} has no datastore {}: check the failure domains of Infrastructure/cluster (spec.platformSpec.vsphere) or the cloud config",
                rest.vc.host, name.datacenter, name.datastore
            )
        })
}

/// The category named `name`: (id, associable types).
async fn find_category(
    rest: &Rest<'_>,
    name: &str,
) -> Result<Option<(String, Vec<String>)>, String> {
    let ids = rest
        .must(
            Method::GET,
            "/api/cis/tagging/category",
            None,
            "listing tag categories",
        )
        .await?;
    for id in strings(&ids) {
        let path = format!("/api/cis/tagging/category/{}", encode(&id, true));
        // A category deleted meanwhile is a 404: skip it.
        let Some(category) = rest
            .call(Method::GET, &path, None, "reading a tag category")
            .await?
        else {
            continue;
        };
        if category["name"].as_str() == Some(name) {
            return Ok(Some((id, strings(&category["associable_types"]))));
        }
    }
    Ok(None)
}

/// The ID of the tag named `name` in category `category`.
async fn find_tag(rest: &Rest<'_>, category: &str, name: &str) -> Result<Option<String>, String> {
    let ids = rest
        .must(
            Method::POST,
            "/api/cis/tagging/tag?action=list-tags-for-category",
            Some(json!({ "category_id": category })),
            "listing the tags of the cluster's category",
        )
        .await?;
    for id in strings(&ids) {
        let path = format!("/api/cis/tagging/tag/{}", encode(&id, true));
        let Some(tag) = rest.call(Method::GET, &path, None, "reading a tag").await? else {
            continue;
        };
        if tag["name"].as_str() == Some(name) {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Makes sure the tag category, the tag on each datastore and the storage policy of `spec`
/// exist in the vCenter at `vc`, logging in as `login`. Returns what it changed (empty when
/// everything was in place), or what failed.
pub async fn ensure_storage_policy(
    vc: &VCenter,
    login: &Login,
    spec: &PolicySpec,
) -> Result<Vec<String>, String> {
    let rest = Rest::login(vc, login).await?;
    let tagged = tag_datastores(&rest, spec).await;
    rest.logout().await;
    let mut changes = tagged?;
    changes.extend(ensure_policy(vc, login, spec).await?);
    Ok(changes)
}

async fn tag_datastores(rest: &Rest<'_>, spec: &PolicySpec) -> Result<Vec<String>, String> {
    let mut changes = Vec::new();
    let mut datastores = Vec::new();
    for name in &spec.datastores {
        datastores.push((name, datastore_id(rest, name).await?));
    }
    let category = match find_category(rest, &spec.category).await? {
        None => {
            let id = rest
                .must(
                    Method::POST,
                    "/api/cis/tagging/category",
                    Some(json!({
                        "name": spec.category,
                        "description": spec.description,
                        "cardinality": "SINGLE",
                        "associable_types": ASSOCIABLE_TYPES,
                    })),
                    &format!("creating tag category {}", spec.category),
                )
                .await?;
            changes.push(format!("created tag category {}", spec.category));
            id.as_str().map(str::to_owned).ok_or_else(|| {
                format!(
                    "vCenter {}: creating tag category {}: the answer has no ID",
                    rest.vc.host, spec.category
                )
            })?
        }
        Some((id, types)) => {
            // Types can only be added to a category: keep the existing ones as written.
            let missing: Vec<&str> = ASSOCIABLE_TYPES
                .iter()
                .copied()
                .filter(|t| !associable(&types, t))
                .collect();
            if !missing.is_empty() {
                let mut all = types.clone();
                all.extend(missing.iter().map(|t| (*t).to_owned()));
                rest.must(
                    Method::PATCH,
                    &format!("/api/cis/tagging/category/{}", encode(&id, true)),
                    Some(json!({ "associable_types": all })),
                    &format!("letting tags of category {} on datastores", spec.category),
                )
                .await?;
                changes.push(format!(
                    "let tags of category {} be attached to {}",
                    spec.category,
                    missing.join(", ")
                ));
            }
            id
        }
    };
    let tag = match find_tag(rest, &category, &spec.tag).await? {
        Some(id) => id,
        None => {
            let id = rest
                .must(
                    Method::POST,
                    "/api/cis/tagging/tag",
                    Some(json!({
                        "name": spec.tag,
                        "description": spec.description,
                        "category_id": category,
                    })),
                    &format!("creating tag {}", spec.tag),
                )
                .await?;
            changes.push(format!("created tag {} in {}", spec.tag, spec.category));
            id.as_str().map(str::to_owned).ok_or_else(|| {
                format!(
                    "vCenter {}: creating tag {}: the answer has no ID",
                    rest.vc.host, spec.tag
                )
            })?
        }
    };
    for (name, id) in datastores {
        let object = json!({ "object_id": { "type": "Datastore", "id": id } });
        let attached = rest
            .must(
                Method::POST,
                "/api/cis/tagging/tag-association?action=list-attached-tags",
                Some(object.clone()),
                &format!("listing the tags of datastore {}", name.datastore),
            )
            .await?;
        if strings(&attached).contains(&tag) {
            continue;
        }
        rest.must(
            Method::POST,
            &format!(
                "/api/cis/tagging/tag-association/{}?action=attach",
                encode(&tag, true)
            ),
            Some(object),
            &format!("tagging datastore {} with {}", name.datastore, spec.tag),
        )
        .await?;
        changes.push(format!(
            "tagged datastore {} of {} with {}",
            name.datastore, name.datacenter, spec.tag
        ));
    }
    Ok(changes)
}

/// Escapes `text` for XML content.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn envelope(header: &str, body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">{header}<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

/// A managed object reference: (type, value).
type MoRef = (String, String);

fn this(moref: &MoRef) -> String {
    format!(
        r#"<_this type="{}">{}</_this>"#,
        xml_escape(&moref.0),
        xml_escape(&moref.1)
    )
}

/// The answer of a SOAP call: its text and its `Set-Cookie` headers.
struct SoapAnswer {
    text: String,
    cookies: Vec<String>,
}

impl SoapAnswer {
    /// The answer, parsed as XML.
    fn parse(&self) -> Result<roxmltree::Document<'_>, String> {
        roxmltree::Document::parse(&self.text).map_err(|e| format!("the answer is not XML: {e}"))
    }
}

/// The first element named `name` (by local name) among `node` and its descendants.
fn first<'a, 'i>(node: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    node.descendants()
        .find(|n| n.is_element() && n.tag_name().name() == name)
}

fn child_text(node: roxmltree::Node<'_, '_>, name: &str) -> Option<String> {
    node.children()
        .find(|n| n.is_element() && n.tag_name().name() == name)
        .and_then(|n| n.text())
        .map(|t| t.trim().to_owned())
}

fn moref(node: roxmltree::Node<'_, '_>) -> MoRef {
    (
        node.attribute("type").unwrap_or_default().to_owned(),
        node.text().unwrap_or_default().trim().to_owned(),
    )
}

/// Sends a SOAP request to `path` and returns the answer, or the fault as an error naming
/// `what`.
async fn soap(
    vc: &VCenter,
    path: &str,
    action: &str,
    cookie: Option<&str>,
    envelope: String,
    what: &str,
) -> Result<SoapAnswer, String> {
    let what = format!("vCenter {}: {what}", vc.host);
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(vc.url(path))
        .header("content-type", "text/xml; charset=\"utf-8\"")
        .header("soapaction", action);
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("{SOAP_COOKIE}=\"{cookie}\""));
    }
    let request = request
        .body(Full::new(Bytes::from(envelope)))
        .map_err(|e| format!("{what}: {e}"))?;
    let response = send_raw(&vc.http, request, &what).await?;
    let text = String::from_utf8_lossy(&response.body).into_owned();
    let cookies = response
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let answer = SoapAnswer { text, cookies };
    if response.status == StatusCode::OK {
        return Ok(answer);
    }
    // A fault: faultstring, and the fault's type in its detail.
    let fault = answer.parse().ok().and_then(|doc| {
        let fault = first(doc.root(), "Fault")?;
        let text = child_text(fault, "faultstring").unwrap_or_default();
        let kind = first(fault, "detail")
            .and_then(|d| d.children().find(roxmltree::Node::is_element))
            .map(|f| {
                f.attribute(("http://www.w3.org/2001/XMLSchema-instance", "type"))
                    .unwrap_or(f.tag_name().name())
                    .trim_end_matches("Fault")
                    .to_owned()
            });
        Some((text, kind))
    });
    Err(match fault {
        Some((text, Some(kind))) if !kind.is_empty() => format!("{what}: {kind}: {text}"),
        Some((text, _)) if !text.is_empty() => format!("{what}: {text}"),
        _ => format!("{what}: {}", response.status),
    })
}

/// The vim25 session cookie of a `Set-Cookie` header, without its quotes.
fn session_cookie(headers: &[String]) -> Option<String> {
    headers.iter().find_map(|h| {
        let pair = h.split(';').next()?;
        let (name, value) = pair.split_once('=')?;
        (name.trim() == SOAP_COOKIE).then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// A vim25 session, for PBM.
struct Soap<'a> {
    vc: &'a VCenter,
    cookie: String,
    session_manager: MoRef,
}

impl<'a> Soap<'a> {
    async fn login(vc: &'a VCenter, login: &Login) -> Result<Self, String> {
        let content = soap(
            vc,
            "/sdk",
            VIM_ACTION,
            None,
            envelope(
                "",
                r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#,
            ),
            "reading the service content (SOAP)",
        )
        .await?;
        let session_manager =
            {
                let doc = content.parse()?;
                first(doc.root(), "sessionManager").map(moref).ok_or_else(|| {
                format!(
                    "vCenter {}: the service content has no session manager: is {} a vCenter?",
                    vc.host, vc.base
                )
            })?
            };
        let body = format!(
            r#"<Login xmlns="urn:vim25">{}<userName>{}</userName><password>{}</password></Login>"#,
            this(&session_manager),
            xml_escape(&login.user),
            xml_escape(&login.password)
        );
        let answer = soap(
            vc,
            "/sdk",
            VIM_ACTION,
            None,
            envelope("", &body),
            &format!("logging in as {} (SOAP)", login.user),
        )
        .await
        .map_err(|e| {
            if e.contains("InvalidLogin") {
                format!(
                    "vCenter {} refused user {}: check the user and password of this vCenter in the credentials Secret",
                    vc.host, login.user
                )
            } else {
                e
            }
        })?;
        let cookie = session_cookie(&answer.cookies).ok_or_else(|| {
            format!(
                "vCenter {}: logging in (SOAP): the answer sets no {SOAP_COOKIE} cookie",
                vc.host
            )
        })?;
        Ok(Self {
            vc,
            cookie,
            session_manager,
        })
    }

    /// A PBM call with this session.
    async fn pbm(&self, body: String, what: &str) -> Result<SoapAnswer, String> {
        let header = format!(
            "<soapenv:Header><vcSessionCookie>{}</vcSessionCookie></soapenv:Header>",
            xml_escape(&self.cookie)
        );
        soap(
            self.vc,
            "/pbm/sdk",
            PBM_ACTION,
            None,
            envelope(&header, &body),
            what,
        )
        .await
    }

    async fn logout(self) {
        let body = format!(
            r#"<Logout xmlns="urn:vim25">{}</Logout>"#,
            this(&self.session_manager)
        );
        let _ = soap(
            self.vc,
            "/sdk",
            VIM_ACTION,
            Some(&self.cookie),
            envelope("", &body),
            "logging out (SOAP)",
        )
        .await;
    }
}

const STORAGE_RESOURCE: &str = "<resourceType><resourceType>STORAGE</resourceType></resourceType>";

/// The PBM create spec of `spec`'s policy: storage that carries the cluster's tag.
pub fn create_spec(spec: &PolicySpec) -> String {
    let category = xml_escape(&spec.category);
    format!(
        concat!(
            "<createSpec><name>{name}</name><description>{description}</description>",
            "<category>REQUIREMENT</category>{resource}",
            r#"<constraints xsi:type="PbmCapabilitySubProfileConstraints">"#,
            "<subProfiles><name>Tag based placement</name><capability>",
            "<id><namespace>{namespace}</namespace><id>{category}</id></id>",
            "<constraint><propertyInstance><id>com.vmware.storage.tag.{category}.property</id>",
            r#"<value xsi:type="PbmCapabilityDiscreteSet"><values xsi:type="xsd:string">{tag}</values></value>"#,
            "</propertyInstance></constraint></capability></subProfiles></constraints></createSpec>"
        ),
        name = xml_escape(&spec.policy),
        description = xml_escape(&spec.description),
        resource = STORAGE_RESOURCE,
        namespace = TAG_CAPABILITY_NAMESPACE,
        category = category,
        tag = xml_escape(&spec.tag),
    )
}

async fn ensure_policy(
    vc: &VCenter,
    login: &Login,
    spec: &PolicySpec,
) -> Result<Vec<String>, String> {
    let session = Soap::login(vc, login).await?;
    let outcome = ensure_policy_in(&session, spec).await;
    session.logout().await;
    outcome
}

async fn ensure_policy_in(session: &Soap<'_>, spec: &PolicySpec) -> Result<Vec<String>, String> {
    let content = session
        .pbm(
            r#"<PbmRetrieveServiceContent xmlns="urn:pbm"><_this type="PbmServiceInstance">ServiceInstance</_this></PbmRetrieveServiceContent>"#.to_owned(),
            "reading the storage policy service's content",
        )
        .await?;
    let manager = {
        let doc = content.parse()?;
        first(doc.root(), "profileManager")
            .map(moref)
            .ok_or_else(|| {
                format!(
                    "vCenter {}: the storage policy service has no profile manager",
                    session.vc.host
                )
            })?
    };
    let ids = session
        .pbm(
            format!(
                r#"<PbmQueryProfile xmlns="urn:pbm">{}{STORAGE_RESOURCE}<profileCategory>REQUIREMENT</profileCategory></PbmQueryProfile>"#,
                this(&manager)
            ),
            "listing storage policies",
        )
        .await?;
    let ids: Vec<String> = {
        let doc = ids.parse()?;
        doc.descendants()
            .filter(|n| n.is_element() && n.tag_name().name() == "returnval")
            .filter_map(|n| child_text(n, "uniqueId"))
            .collect()
    };
    if !ids.is_empty() {
        let body = format!(
            r#"<PbmRetrieveContent xmlns="urn:pbm">{}{}</PbmRetrieveContent>"#,
            this(&manager),
            ids.iter()
                .map(|id| format!(
                    "<profileIds><uniqueId>{}</uniqueId></profileIds>",
                    xml_escape(id)
                ))
                .collect::<String>()
        );
        let profiles = session.pbm(body, "reading storage policies").await?;
        let doc = profiles.parse()?;
        let exists = doc
            .descendants()
            .filter(|n| n.is_element() && n.tag_name().name() == "returnval")
            .any(|n| child_text(n, "name").as_deref() == Some(spec.policy.as_str()));
        if exists {
            return Ok(Vec::new());
        }
    }
    let body = format!(
        r#"<PbmCreate xmlns="urn:pbm">{}{}</PbmCreate>"#,
        this(&manager),
        create_spec(spec)
    );
    session
        .pbm(body, &format!("creating storage policy {}", spec.policy))
        .await?;
    Ok(vec![format!("created storage policy {}", spec.policy)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_server_and_port() {
        assert_eq!(
            VCenter::base_url("vc.example.com", None),
            "https://vc.example.com"
        );
        assert_eq!(
            VCenter::base_url("vc.example.com", Some("443")),
            "https://vc.example.com"
        );
        assert_eq!(
            VCenter::base_url("10.0.0.5", Some("8443")),
            "https://10.0.0.5:8443"
        );
        assert_eq!(
            VCenter::base_url("fd00::5", Some("8443")),
            "https://[fd00::5]:8443"
        );
    }

    #[test]
    fn encoding_keeps_colons_only_in_ids() {
        assert_eq!(encode("dc 1/ä", false), "dc%201%2F%C3%A4");
        assert_eq!(
            encode("urn:vmomi:InventoryServiceTag:1:GLOBAL", true),
            "urn:vmomi:InventoryServiceTag:1:GLOBAL"
        );
        assert_eq!(encode("a:b", false), "a%3Ab");
    }

    #[test]
    fn associability_ignores_the_vim25_prefix_and_empty_means_all() {
        let types = vec![
            "VirtualMachine".to_owned(),
            "urn:vim25:Datastore".to_owned(),
        ];
        assert!(associable(&types, "urn:vim25:VirtualMachine"));
        assert!(associable(&types, "Datastore"));
        assert!(!associable(&types, "urn:vim25:Folder"));
        assert!(associable(&[], "urn:vim25:Folder"));
    }

    #[test]
    fn the_session_cookie_is_read_without_quotes() {
        let headers = vec![
            "other=1; Path=/".to_owned(),
            "vmware_soap_session=\"52ab\"; Path=/; HttpOnly; Secure;".to_owned(),
        ];
        assert_eq!(session_cookie(&headers).as_deref(), Some("52ab"));
        assert_eq!(session_cookie(&headers[..1]), None);
    }

    #[test]
    fn the_create_spec_names_the_tag_and_escapes_text() {
        let spec = PolicySpec::for_cluster("c<1>", Vec::new());
        let xml = create_spec(&spec);
        assert!(
            xml.contains("<name>openshift-storage-policy-c&lt;1&gt;</name>"),
            "{xml}"
        );
        assert!(xml.contains("<id>com.vmware.storage.tag.openshift-c&lt;1&gt;.property</id>"));
        assert!(xml.contains(r#"<values xsi:type="xsd:string">c&lt;1&gt;</values>"#));
        // It parses inside an envelope.
        let doc = envelope("", &xml);
        assert!(roxmltree::Document::parse(&doc).is_ok(), "{doc}");
    }

    #[test]
    fn a_login_never_prints_its_password() {
        let login = Login {
            user: "u".into(),
            password: "secret".into(),
        };
        assert!(!format!("{login:?}").contains("secret"));
    }
}
