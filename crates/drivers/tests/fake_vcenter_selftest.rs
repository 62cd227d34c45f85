//! The fake vCenter of `fake_vcenter/` driven with raw HTTP requests, so that the tests of the
//! real client stand on a fake that answers as vCenter does:
//! - REST: basic-auth login, 401 without a live session, logout; datacenters and datastores by
//!   (percent-encoded) name; categories created once, patched with associable types that may
//!   only grow; tags per category; attaching only where the category allows it;
//! - SOAP: `Login` setting the quoted `vmware_soap_session` cookie, PBM authenticated by it in
//!   `vcSessionCookie`, `PbmCreate` then `PbmQueryProfile`/`PbmRetrieveContent` listing the new
//!   profile, `PbmDuplicateName`, `NotAuthenticated`, envelopes with other prefixes;
//! - `deny` making REST and SOAP calls fail, and HTTPS trusted through the fake's own CA.

#![allow(clippy::unwrap_used)]

mod fake_vcenter;

use base64::Engine as _;
use bytes::Bytes;
use drivers::http::{Tls, http_client, send_raw};
use fake_vcenter::{Call, FakeVCenter, Inventory, PASSWORD, TAG_NAMESPACE, USER};
use http_body_util::{BodyExt, Full};
use hyper::{HeaderMap, Request};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// An answer: status, headers, body text.
struct Answer {
    status: u16,
    headers: HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// The `xsi:type` of a SOAP fault's detail element, and its faultstring.
    fn fault(&self) -> (String, String) {
        let doc = roxmltree::Document::parse(&self.text).unwrap();
        let find = |name: &str| doc.descendants().find(|n| n.tag_name().name() == name);
        let detail = find("detail").unwrap().first_element_child().unwrap();
        let kind = detail
            .attribute(("http://www.w3.org/2001/XMLSchema-instance", "type"))
            .unwrap();
        let text = find("faultstring").unwrap().text().unwrap_or_default();
        (kind.to_owned(), text.to_owned())
    }

    /// The texts of every element named `name`.
    fn texts(&self, name: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(&self.text).unwrap();
        doc.descendants()
            .filter(|n| n.tag_name().name() == name)
            .map(|n| n.text().unwrap_or_default().to_owned())
            .collect()
    }
}

async fn call(
    fake: &FakeVCenter,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("{}{path}", fake.base_url()));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    Answer {
        status,
        headers,
        text,
    }
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// A REST session token.
async fn login(fake: &FakeVCenter) -> String {
    let auth = basic(USER, PASSWORD);
    let answer = call(
        fake,
        "POST",
        "/api/session",
        &[("authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(answer.status, 201, "{}", answer.text);
    answer.json().as_str().unwrap().to_owned()
}

/// A REST call with session `token` and a JSON body.
async fn api(fake: &FakeVCenter, token: &str, method: &str, path: &str, body: Value) -> Answer {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let headers = [
        ("vmware-api-session-id", token),
        ("content-type", "application/json"),
    ];
    call(fake, method, path, &headers, &body).await
}

/// A SOAP envelope with `body`, and the PBM session header when `cookie` is given.
fn envelope(cookie: Option<&str>, body: &str) -> String {
    let header = cookie
        .map(|c| format!("<soapenv:Header><vcSessionCookie>{c}</vcSessionCookie></soapenv:Header>"))
        .unwrap_or_default();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">{header}<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

async fn soap(fake: &FakeVCenter, path: &str, extra: &[(&str, &str)], xml: &str) -> Answer {
    let mut headers = vec![
        ("content-type", "text/xml; charset=\"utf-8\""),
        ("soapaction", "urn:vim25/7.0.2.0"),
    ];
    headers.extend_from_slice(extra);
    call(fake, "POST", path, &headers, xml).await
}

const PROFILE_MANAGER: &str = r#"<_this type="PbmProfileProfileManager">ProfileManager</_this>"#;

/// A vim25 `Login`: the cookie value without its quotes.
async fn soap_login(fake: &FakeVCenter) -> String {
    let body = format!(
        r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>{USER}</userName><password>{}</password></Login>"#,
        fake_vcenter::xml_escape(PASSWORD)
    );
    let answer = soap(fake, "/sdk", &[], &envelope(None, &body)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.texts("userName"), [USER]);
    let set_cookie = answer.headers["set-cookie"].to_str().unwrap();
    let value = set_cookie
        .strip_prefix("vmware_soap_session=\"")
        .unwrap()
        .split_once('"')
        .unwrap();
    assert_eq!(value.1, "; Path=/; HttpOnly; Secure;");
    value.0.to_owned()
}

fn create_spec(name: &str, category: &str, tag: &str) -> String {
    format!(
        r#"<PbmCreate xmlns="urn:pbm">{PROFILE_MANAGER}<createSpec><name>{name}</name><description>d &amp; e</description><category>REQUIREMENT</category><resourceType><resourceType>STORAGE</resourceType></resourceType><constraints xsi:type="PbmCapabilitySubProfileConstraints"><subProfiles><name>Tag based placement</name><capability><id><namespace>{TAG_NAMESPACE}</namespace><id>{category}</id></id><constraint><propertyInstance><id>com.vmware.storage.tag.{category}.property</id><value xsi:type="PbmCapabilityDiscreteSet"><values xsi:type="xsd:string">{tag}</values></value></propertyInstance></constraint></capability></subProfiles></constraints></createSpec></PbmCreate>"#
    )
}

#[tokio::test]
async fn rest_sessions_and_inventory() {
    let fake = FakeVCenter::start(
        Inventory::default()
            .with("my dc", &["ds1", "ds 2"])
            .with("dc2", &["ds1"]),
    )
    .await;
    let wrong = basic(USER, "nope");
    let answer = call(
        &fake,
        "POST",
        "/api/session",
        &[("authorization", &wrong)],
        "",
    )
    .await;
    assert_eq!(
        (answer.status, answer.json()["error_type"].clone()),
        (401, json!("UNAUTHENTICATED"))
    );
    let answer = call(&fake, "GET", "/api/vcenter/datacenter", &[], "").await;
    assert_eq!(answer.status, 401);
    assert_eq!(
        api(
            &fake,
            "bogus",
            "GET",
            "/api/cis/tagging/category",
            Value::Null
        )
        .await
        .status,
        401
    );

    let token = login(&fake).await;
    let dcs = api(
        &fake,
        &token,
        "GET",
        "/api/vcenter/datacenter?names=my%20dc",
        Value::Null,
    )
    .await;
    let dc = dcs.json()[0]["datacenter"].as_str().unwrap().to_owned();
    assert_eq!(dcs.json(), json!([{"datacenter": dc, "name": "my dc"}]));
    let none = api(
        &fake,
        &token,
        "GET",
        "/api/vcenter/datacenter?names=nope",
        Value::Null,
    )
    .await;
    assert_eq!((none.status, none.json()), (200, json!([])));
    let path = format!("/api/vcenter/datastore?names=ds1&datacenters={dc}");
    let ds = api(&fake, &token, "GET", &path, Value::Null).await.json();
    assert_eq!(
        ds.as_array().unwrap().len(),
        1,
        "only the datastore of {dc}: {ds}"
    );
    assert_eq!(
        ds[0]["datastore"],
        json!(fake.state().datastore_named("ds1").unwrap().id)
    );
    assert_eq!(
        (ds[0]["name"].clone(), ds[0]["type"].clone()),
        (json!("ds1"), json!("VMFS"))
    );
    let path = format!("/api/vcenter/datastore?names=ds%202&datacenters={dc}");
    assert_eq!(
        api(&fake, &token, "GET", &path, Value::Null).await.json()[0]["name"],
        "ds 2"
    );
    let unknown = api(&fake, &token, "GET", "/api/vcenter/cluster", Value::Null).await;
    assert_eq!(
        (unknown.status, unknown.json()["error_type"].clone()),
        (404, json!("NOT_FOUND"))
    );

    assert_eq!(
        api(&fake, &token, "DELETE", "/api/session", Value::Null)
            .await
            .status,
        204
    );
    assert_eq!(
        api(&fake, &token, "GET", "/api/vcenter/datacenter", Value::Null)
            .await
            .status,
        401
    );
    assert!(fake.writes().is_empty(), "{:?}", fake.writes());
    assert_eq!(fake.calls().len(), 11);
}

#[tokio::test]
async fn categories_are_created_once_and_their_types_only_grow() {
    let fake = FakeVCenter::start(Inventory::default().with("dc", &["ds"])).await;
    let token = login(&fake).await;
    let spec = json!({"name": "openshift-c1", "description": "d", "cardinality": "SINGLE",
        "associable_types": ["urn:vim25:VirtualMachine", "urn:vim25:Folder"]});
    let created = api(
        &fake,
        &token,
        "POST",
        "/api/cis/tagging/category",
        spec.clone(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.json().as_str().unwrap().to_owned();
    assert!(id.starts_with("urn:vmomi:InventoryServiceCategory:") && id.ends_with(":GLOBAL"));
    let again = api(&fake, &token, "POST", "/api/cis/tagging/category", spec).await;
    assert_eq!(
        (again.status, again.json()["error_type"].clone()),
        (400, json!("ALREADY_EXISTS"))
    );
    let partial = api(
        &fake,
        &token,
        "POST",
        "/api/cis/tagging/category",
        json!({"name": "x"}),
    )
    .await;
    assert_eq!(
        (partial.status, partial.json()["error_type"].clone()),
        (400, json!("INVALID_ARGUMENT"))
    );

    let list = api(
        &fake,
        &token,
        "GET",
        "/api/cis/tagging/category",
        Value::Null,
    )
    .await;
    assert_eq!(list.json(), json!([id]));
    let path = format!("/api/cis/tagging/category/{}", id.replace(':', "%3A"));
    let got = api(&fake, &token, "GET", &path, Value::Null).await.json();
    assert_eq!(got["name"], "openshift-c1");
    assert_eq!(got["used_by"], json!([]));
    let grow = json!({"associable_types": ["urn:vim25:VirtualMachine", "urn:vim25:Folder", "urn:vim25:Datastore"]});
    assert_eq!(api(&fake, &token, "PATCH", &path, grow).await.status, 204);
    let shrink = json!({"associable_types": ["urn:vim25:Datastore"]});
    let refused = api(&fake, &token, "PATCH", &path, shrink).await;
    assert_eq!(
        (refused.status, refused.json()["error_type"].clone()),
        (400, json!("INVALID_ARGUMENT"))
    );
    assert_eq!(fake.state().categories[0].associable_types.len(), 3);
    let missing = api(
        &fake,
        &token,
        "GET",
        "/api/cis/tagging/category/urn%3Anope",
        Value::Null,
    )
    .await;
    assert_eq!(missing.status, 404);
    let writes: Vec<String> = fake.writes().into_iter().map(|c| c.method).collect();
    assert_eq!(writes, ["POST", "POST", "POST", "PATCH", "PATCH"]);
}

#[tokio::test]
async fn tags_are_made_per_category_and_attached_where_allowed() {
    let fake = FakeVCenter::start(Inventory::default().with("dc", &["ds"])).await;
    let (category, ds) = {
        let mut state = fake.state();
        let ds = state.datastore_named("ds").unwrap().id.clone();
        (
            state.add_category("openshift-c1", "SINGLE", &["urn:vim25:VirtualMachine"]),
            ds,
        )
    };
    let token = login(&fake).await;
    let spec = json!({"name": "c1", "description": "", "category_id": category});
    let created = api(&fake, &token, "POST", "/api/cis/tagging/tag", spec.clone()).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let tag = created.json().as_str().unwrap().to_owned();
    assert!(tag.starts_with("urn:vmomi:InventoryServiceTag:"));
    assert_eq!(
        api(&fake, &token, "POST", "/api/cis/tagging/tag", spec)
            .await
            .json()["error_type"],
        "ALREADY_EXISTS"
    );
    let orphan = json!({"name": "c1", "description": "", "category_id": "urn:nope"});
    assert_eq!(
        api(&fake, &token, "POST", "/api/cis/tagging/tag", orphan)
            .await
            .status,
        404
    );
    let list = "/api/cis/tagging/tag?action=list-tags-for-category";
    let listed = api(
        &fake,
        &token,
        "POST",
        list,
        json!({"category_id": category}),
    )
    .await;
    assert_eq!(listed.json(), json!([tag]));
    let got = api(
        &fake,
        &token,
        "GET",
        &format!("/api/cis/tagging/tag/{tag}"),
        Value::Null,
    )
    .await;
    assert_eq!(
        (
            got.json()["name"].clone(),
            got.json()["category_id"].clone()
        ),
        (json!("c1"), json!(category))
    );

    let attach = format!(
        "/api/cis/tagging/tag-association/{}?action=attach",
        tag.replace(':', "%3A")
    );
    let object = json!({"object_id": {"type": "Datastore", "id": ds}});
    let refused = api(&fake, &token, "POST", &attach, object.clone()).await;
    assert_eq!(
        (refused.status, refused.json()["error_type"].clone()),
        (400, json!("INVALID_ARGUMENT"))
    );
    fake.state().categories[0]
        .associable_types
        .push("urn:vim25:Datastore".into());
    assert_eq!(
        api(&fake, &token, "POST", &attach, object.clone())
            .await
            .status,
        204
    );
    assert_eq!(
        api(&fake, &token, "POST", &attach, object.clone())
            .await
            .status,
        204,
        "no-op"
    );
    let unknown = json!({"object_id": {"type": "Datastore", "id": "datastore-999"}});
    assert_eq!(
        api(&fake, &token, "POST", &attach, unknown).await.status,
        404
    );
    let listed = "/api/cis/tagging/tag-association?action=list-attached-tags";
    assert_eq!(
        api(&fake, &token, "POST", listed, object).await.json(),
        json!([tag])
    );
    assert_eq!(fake.state().tags_on(&ds), ["c1"]);
    assert_eq!(fake.state().attached.len(), 1);
    let writes: Vec<Call> = fake.writes();
    assert_eq!(writes.len(), 7, "{writes:?}");

    // One tag per object in a SINGLE category.
    let other = fake.state().add_tag("c2", &category);
    let attach = format!("/api/cis/tagging/tag-association/{other}?action=attach");
    let object = json!({"object_id": {"type": "Datastore", "id": ds}});
    let refused = api(&fake, &token, "POST", &attach, object).await;
    assert_eq!(refused.json()["error_type"], "INVALID_ARGUMENT");
}

#[tokio::test]
async fn soap_login_then_pbm_creates_and_lists_a_profile() {
    let fake = FakeVCenter::start(Inventory::default().with("dc", &["ds"])).await;
    {
        let mut state = fake.state();
        let category = state.add_category("openshift-c1", "SINGLE", &[]);
        state.add_tag("c1", &category);
    }
    let content = r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#;
    let answer = soap(&fake, "/sdk", &[], &envelope(None, content)).await;
    assert_eq!(answer.texts("apiVersion"), ["8.0.3.0"]);
    assert_eq!(answer.texts("sessionManager"), ["SessionManager"]);
    let wrong = r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>x</password></Login>"#;
    let answer = soap(&fake, "/sdk", &[], &envelope(None, wrong)).await;
    assert_eq!(answer.status, 500);
    let (kind, text) = answer.fault();
    assert_eq!(kind, "InvalidLogin");
    assert_eq!(
        text,
        "Cannot complete login due to an incorrect user name or password."
    );
    let cookie = soap_login(&fake).await;

    let pbm_content = r#"<PbmRetrieveServiceContent xmlns="urn:pbm"><_this type="PbmServiceInstance">ServiceInstance</_this></PbmRetrieveServiceContent>"#;
    let answer = soap(&fake, "/pbm/sdk", &[], &envelope(None, pbm_content)).await;
    assert_eq!(
        (answer.status, answer.fault().0),
        (500, "NotAuthenticated".to_owned())
    );
    let answer = soap(
        &fake,
        "/pbm/sdk",
        &[],
        &envelope(Some(&cookie), pbm_content),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.texts("profileManager"), ["ProfileManager"]);

    let create = create_spec("openshift-storage-policy-c1", "openshift-c1", "c1");
    let answer = soap(&fake, "/pbm/sdk", &[], &envelope(Some(&cookie), &create)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let id = answer.texts("uniqueId").pop().unwrap();
    let again = soap(&fake, "/pbm/sdk", &[], &envelope(Some(&cookie), &create)).await;
    let (kind, text) = again.fault();
    assert_eq!(kind, "PbmDuplicateName");
    assert!(text.contains("openshift-storage-policy-c1"), "{text}");
    let unknown_tag = create_spec("p2", "openshift-c1", "other");
    let answer = soap(
        &fake,
        "/pbm/sdk",
        &[],
        &envelope(Some(&cookie), &unknown_tag),
    )
    .await;
    assert_eq!(answer.fault().0, "InvalidArgument");

    // Other prefixes, as another client may write them.
    let query = format!(
        r#"<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header><vcSessionCookie>{cookie}</vcSessionCookie></s:Header><s:Body><p:PbmQueryProfile xmlns:p="urn:pbm"><p:_this type="PbmProfileProfileManager">ProfileManager</p:_this><p:resourceType><p:resourceType>STORAGE</p:resourceType></p:resourceType><p:profileCategory>REQUIREMENT</p:profileCategory></p:PbmQueryProfile></s:Body></s:Envelope>"#
    );
    let ids = soap(&fake, "/pbm/sdk", &[], &query).await.texts("uniqueId");
    assert_eq!(ids.len(), 3, "the two built-in profiles and ours: {ids:?}");
    assert!(ids.contains(&id));
    let retrieve = format!(
        r#"<PbmRetrieveContent xmlns="urn:pbm">{PROFILE_MANAGER}<profileIds><uniqueId>{id}</uniqueId></profileIds></PbmRetrieveContent>"#
    );
    let answer = soap(&fake, "/pbm/sdk", &[], &envelope(Some(&cookie), &retrieve)).await;
    assert_eq!(
        answer.texts("name"),
        ["openshift-storage-policy-c1", "Tag based placement"]
    );
    assert_eq!(answer.texts("description"), ["d & e"]);
    assert_eq!(answer.texts("values"), ["c1"]);
    let profile = fake
        .state()
        .profile_named("openshift-storage-policy-c1")
        .unwrap()
        .clone();
    assert_eq!(
        profile.rules,
        [(
            TAG_NAMESPACE.into(),
            "openshift-c1".into(),
            "com.vmware.storage.tag.openshift-c1.property".into(),
            vec!["c1".into()]
        )]
    );
    assert_eq!(
        (profile.category.as_str(), profile.resource_type.as_str()),
        ("REQUIREMENT", "STORAGE")
    );
    let bogus = retrieve.replace(&id, "nope");
    assert_eq!(
        soap(&fake, "/pbm/sdk", &[], &envelope(Some(&cookie), &bogus))
            .await
            .fault()
            .0,
        "InvalidArgument"
    );

    let logout =
        r#"<Logout xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this></Logout>"#;
    let header = format!("vmware_soap_session=\"{cookie}\"");
    let answer = soap(
        &fake,
        "/sdk",
        &[("cookie", &header)],
        &envelope(None, logout),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let answer = soap(
        &fake,
        "/pbm/sdk",
        &[],
        &envelope(Some(&cookie), pbm_content),
    )
    .await;
    assert_eq!(answer.fault().0, "NotAuthenticated");
    let operations: Vec<String> = fake.writes().into_iter().map(|c| c.operation).collect();
    assert_eq!(operations, ["PbmCreate", "PbmCreate", "PbmCreate"]);
    let unknown = r#"<PbmDelete xmlns="urn:pbm"><_this type="PbmProfileProfileManager">ProfileManager</_this></PbmDelete>"#;
    let answer = soap(&fake, "/pbm/sdk", &[], &envelope(Some(&cookie), unknown)).await;
    assert_eq!(answer.fault().0, "NotImplemented");
}

#[tokio::test]
async fn deny_makes_rest_and_soap_calls_fail() {
    let fake = FakeVCenter::start(Inventory::default().with("dc", &["ds"])).await;
    fake.state().deny = vec!["/api/cis/tagging/category".into(), "PbmCreate".into()];
    let token = login(&fake).await;
    let spec =
        json!({"name": "c", "description": "", "cardinality": "SINGLE", "associable_types": []});
    let answer = api(&fake, &token, "POST", "/api/cis/tagging/category", spec).await;
    assert_eq!(
        (answer.status, answer.json()["error_type"].clone()),
        (403, json!("UNAUTHORIZED"))
    );
    assert!(fake.state().categories.is_empty());
    assert_eq!(
        api(&fake, &token, "GET", "/api/cis/tagging/tag", Value::Null)
            .await
            .status,
        200
    );

    let cookie = soap_login(&fake).await;
    let create = create_spec("p", "openshift-c1", "c1");
    let answer = soap(&fake, "/pbm/sdk", &[], &envelope(Some(&cookie), &create)).await;
    assert_eq!(
        (answer.status, answer.fault().0),
        (500, "NoPermission".to_owned())
    );
    assert_eq!(fake.writes().len(), 2, "denied attempts are writes too");
}

#[tokio::test]
async fn https_with_the_fake_s_ca() {
    let fake = FakeVCenter::start_https(Inventory::default()).await;
    assert!(fake.base_url().starts_with("https://127.0.0.1:"));
    let pem = fake.ca_pem().unwrap();
    let login = || {
        Request::post(format!("{}/api/session", fake.base_url()))
            .header("authorization", basic(USER, PASSWORD))
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let client = http_client(&Tls::WithCa(pem)).unwrap();
    let answer = send_raw(&client, login(), "logging in").await.unwrap();
    assert_eq!(answer.status, 201);
    let untrusted = http_client(&Tls::System).unwrap();
    let error = send_raw(&untrusted, login(), "logging in")
        .await
        .err()
        .unwrap();
    assert!(error.contains("logging in failed"), "{error}");
    assert_eq!(fake.calls().len(), 1);
    assert_eq!(
        fake.port(),
        fake.base_url()
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u16>()
            .unwrap()
    );
}
