//! The real OpenStack client of the Manila driver against a fake cloud on 127.0.0.1: a
//! Keystone that checks the credentials and returns a token and a catalog, and a Manila per
//! region that checks the token and lists share types. Password and application-credential
//! auth, a 401, a catalog without Manila, region selection, a failing Manila, and the client
//! reading its credentials Secret through the API.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use drivers::openstack_api::{self, Tls};
use drivers::openstack_manila::{self, ShareTypes};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

const TOKEN: &str = "token-123";

/// What the fake cloud saw: (method, path, auth token header, manila version header, body).
type Seen = Arc<Mutex<Vec<(String, String, Option<String>, Option<String>, Value)>>>;

struct FakeCloud {
    base: String,
    seen: Seen,
}

fn catalog(base: &str, with_manila: bool) -> Value {
    let mut services = vec![json!({"type": "identity", "endpoints": [
        {"interface": "public", "region_id": "r1", "url": format!("{base}/v3")}]})];
    if with_manila {
        services.push(json!({"type": "sharev2", "endpoints": [
            {"interface": "internal", "region_id": "r1", "url": format!("{base}/internal/v2")},
            {"interface": "public", "region_id": "r1", "url": format!("{base}/r1/v2/")},
            {"interface": "public", "region_id": "r2", "url": format!("{base}/r2/v2")},
            {"interface": "public", "region_id": "broken", "url": format!("{base}/broken/v2")},
        ]}));
    }
    json!({"token": {"catalog": services}})
}

/// Accepts user `alice` (password `right`, user `nomanila` gets a catalog without Manila) and
/// application credential `ac1`/`shh`.
fn keystone(base: &str, body: &Value) -> Response<Full<Bytes>> {
    let identity = &body["auth"]["identity"];
    let user = &identity["password"]["user"];
    let ok_password = user["password"] == "right"
        && user["domain"]["name"] == "Default"
        && (user["name"] == "alice" || user["name"] == "nomanila");
    let ok_credential = identity["application_credential"] == json!({"id": "ac1", "secret": "shh"});
    if !(ok_password || ok_credential) {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .body(Full::new(Bytes::from(
                r#"{"error": {"code": 401, "title": "Unauthorized"}}"#,
            )))
            .unwrap();
    }
    let catalog = catalog(base, user["name"] != "nomanila");
    Response::builder()
        .status(StatusCode::CREATED)
        .header("X-Subject-Token", TOKEN)
        .body(Full::new(Bytes::from(catalog.to_string())))
        .unwrap()
}

fn manila(path: &str, token: Option<&str>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: Value| {
        Response::builder()
            .status(status)
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap()
    };
    if token != Some(TOKEN) {
        return reply(StatusCode::UNAUTHORIZED, json!({}));
    }
    match path {
        "/r1/v2/types" => reply(
            StatusCode::OK,
            json!({"share_types": [{"id": "1", "name": "default"}, {"id": "2", "name": "cephfs"}]}),
        ),
        "/r2/v2/types" => reply(
            StatusCode::OK,
            json!({"share_types": [{"id": "3", "name": "gold"}]}),
        ),
        "/broken/v2/types" => reply(StatusCode::SERVICE_UNAVAILABLE, json!({})),
        _ => reply(StatusCode::NOT_FOUND, json!({})),
    }
}

impl FakeCloud {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Seen::default();
        let (b, s) = (base.clone(), seen.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (base, seen) = (b.clone(), s.clone());
                let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                    let (base, seen) = (base.clone(), seen.clone());
                    async move {
                        let method = request.method().to_string();
                        let path = request.uri().path().to_owned();
                        let header = |name: &str| {
                            request
                                .headers()
                                .get(name)
                                .map(|v| v.to_str().unwrap().to_owned())
                        };
                        let token = header("x-auth-token");
                        let version = header("x-openstack-manila-api-version");
                        let bytes = request.into_body().collect().await.unwrap().to_bytes();
                        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        seen.lock().unwrap().push((
                            method.clone(),
                            path.clone(),
                            token.clone(),
                            version,
                            body.clone(),
                        ));
                        let response = if method == "POST" && path == "/v3/auth/tokens" {
                            keystone(&base, &body)
                        } else {
                            manila(&path, token.as_deref())
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { base, seen }
    }

    fn clouds_yaml(&self, auth: &str, extra: &str) -> String {
        format!(
            "clouds:\n  openstack:\n    auth:\n      auth_url: {}\n{auth}{extra}",
            self.base
        )
    }
}

fn password(user: &str, password: &str) -> String {
    format!(
        "      username: {user}\n      password: {password}\n      user_domain_name: Default\n      project_name: shift\n      project_domain_name: Default\n"
    )
}

const APP_CREDENTIAL: &str = "      application_credential_id: ac1\n      application_credential_secret: shh\n    auth_type: v3applicationcredential\n";

async fn share_types(text: &str) -> Result<Vec<String>, String> {
    let parsed = openstack_api::parse_cloud(text, "openstack").unwrap();
    openstack_api::list_share_types(&parsed, &Tls::System).await
}

#[tokio::test]
async fn password_auth_lists_the_share_types_of_the_public_endpoint() {
    let cloud = FakeCloud::start().await;
    let text = cloud.clouds_yaml(&password("alice", "right"), "");
    assert_eq!(share_types(&text).await.unwrap(), ["default", "cephfs"]);
    let seen = cloud.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let (method, path, _, _, body) = &seen[0];
    assert_eq!(
        (method.as_str(), path.as_str()),
        ("POST", "/v3/auth/tokens")
    );
    assert_eq!(
        body["auth"]["scope"],
        json!({"project": {"name": "shift", "domain": {"name": "Default"}}})
    );
    let (method, path, token, version, _) = &seen[1];
    assert_eq!((method.as_str(), path.as_str()), ("GET", "/r1/v2/types"));
    assert_eq!(token.as_deref(), Some(TOKEN));
    assert_eq!(version.as_deref(), Some("2.0"));
}

#[tokio::test]
async fn wrong_credentials_are_a_401_naming_the_auth_url_without_the_password() {
    let cloud = FakeCloud::start().await;
    let text = cloud.clouds_yaml(&password("alice", "wrong-pw"), "");
    let error = share_types(&text).await.unwrap_err();
    assert!(
        error.contains(&format!("Keystone at {}/v3/auth/tokens", cloud.base)),
        "{error}"
    );
    assert!(error.contains("401"), "{error}");
    assert!(!error.contains("wrong-pw"), "{error}");
}

#[tokio::test]
async fn a_catalog_without_manila_says_so() {
    let cloud = FakeCloud::start().await;
    let text = cloud.clouds_yaml(&password("nomanila", "right"), "");
    let error = share_types(&text).await.unwrap_err();
    assert!(error.contains("no Manila endpoint"), "{error}");
}

#[tokio::test]
async fn application_credentials_authenticate_without_a_scope() {
    let cloud = FakeCloud::start().await;
    let text = cloud.clouds_yaml(APP_CREDENTIAL, "");
    assert_eq!(share_types(&text).await.unwrap(), ["default", "cephfs"]);
    let body = cloud.seen.lock().unwrap()[0].4.clone();
    assert_eq!(
        body["auth"]["identity"]["methods"],
        json!(["application_credential"])
    );
    assert!(body["auth"].get("scope").is_none(), "{body}");
}

#[tokio::test]
async fn the_region_picks_the_endpoint() {
    let cloud = FakeCloud::start().await;
    let text = cloud.clouds_yaml(APP_CREDENTIAL, "    region_name: r2\n");
    assert_eq!(share_types(&text).await.unwrap(), ["gold"]);

    let text = cloud.clouds_yaml(APP_CREDENTIAL, "    region_name: r9\n");
    let error = share_types(&text).await.unwrap_err();
    assert!(error.contains("interface public in region r9"), "{error}");
}

#[tokio::test]
async fn a_failing_manila_is_reported_with_its_status() {
    let cloud = FakeCloud::start().await;
    let text = cloud.clouds_yaml(APP_CREDENTIAL, "    region_name: broken\n");
    let error = share_types(&text).await.unwrap_err();
    assert!(
        error.contains(&format!("{}/broken/v2/types", cloud.base)),
        "{error}"
    );
    assert!(error.contains("503"), "{error}");
}

#[tokio::test]
async fn an_unreachable_keystone_is_named() {
    // A port nothing listens on: bind one, then drop the listener.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let text =
        format!("clouds:\n  openstack:\n    auth:\n      auth_url: {base}\n{APP_CREDENTIAL}");
    let parsed = openstack_api::parse_cloud(&text, "openstack").unwrap();
    let error = openstack_api::list_share_types(&parsed, &Tls::System)
        .await
        .unwrap_err();
    assert!(
        error.contains(&format!(
            "authenticating at Keystone {base}/v3/auth/tokens failed"
        )),
        "{error}"
    );
}

#[tokio::test]
async fn the_real_client_reads_its_credentials_secret_through_the_api() {
    let cloud = FakeCloud::start().await;
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    let def = drivers::by_name("openstack-manila").unwrap();
    let client = openstack_manila::OpenStackShareTypes::new(admin.clone(), &def);

    let error = client.share_types().await.unwrap_err();
    assert!(
        error
            .message()
            .contains("Secret openshift-manila-csi-driver/manila-cloud-credentials does not exist"),
        "{error}"
    );
    assert_eq!(
        error.kind(),
        csi_kit::HookErrorKind::Config,
        "an admin fixes it"
    );

    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "openshift-manila-csi-driver"}}))
            .unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let secrets = Api::<Secret>::namespaced(admin.clone(), "openshift-manila-csi-driver");
    let secret = |data: BTreeMap<&str, String>| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "manila-cloud-credentials"},
            "stringData": data,
        }))
        .unwrap()
    };
    secrets
        .create(
            &PostParams::default(),
            &secret(BTreeMap::from([("other", "x".to_owned())])),
        )
        .await
        .unwrap();
    let error = client.share_types().await.unwrap_err();
    assert!(
        error.message().contains("has no key clouds.yaml"),
        "{error}"
    );
    assert_eq!(error.kind(), csi_kit::HookErrorKind::Config);

    secrets
        .replace(
            "manila-cloud-credentials",
            &PostParams::default(),
            &secret(BTreeMap::from([(
                "clouds.yaml",
                cloud.clouds_yaml(APP_CREDENTIAL, ""),
            )])),
        )
        .await
        .unwrap();
    assert_eq!(client.share_types().await.unwrap(), ["default", "cephfs"]);
}

#[tokio::test]
async fn the_ca_comes_from_the_secret_or_else_the_cloud_config() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    for ns in ["openshift-manila-csi-driver", "openshift-config"] {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    let clouds = format!(
        "clouds:\n  openstack:\n    auth:\n      auth_url: https://k\n{APP_CREDENTIAL}    cacert: /etc/ca.pem\n"
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"}, "stringData": {"clouds.yaml": clouds},
    }))
    .unwrap();
    let secrets = Api::<Secret>::namespaced(admin.clone(), "openshift-manila-csi-driver");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let fetch = async || {
        openstack_manila::fetch_credentials(&admin, "openshift-manila-csi-driver", "creds")
            .await
            .unwrap()
    };
    // No CA anywhere: the system roots.
    assert_eq!(fetch().await.tls(), Tls::System);

    let config: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "cloud-provider-config"},
        "data": {"config": "[Global]\n", "ca-bundle.pem": "CLOUD-CONFIG-CA"},
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), "openshift-config")
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    assert_eq!(fetch().await.tls(), Tls::WithCa("CLOUD-CONFIG-CA".into()));

    // The Secret's own CA wins.
    let mut secret = secrets.get("creds").await.unwrap();
    secret.string_data = Some(BTreeMap::from([(
        "cacert".to_owned(),
        "SECRET-CA".to_owned(),
    )]));
    secrets
        .replace("creds", &PostParams::default(), &secret)
        .await
        .unwrap();
    assert_eq!(fetch().await.tls(), Tls::WithCa("SECRET-CA".into()));
}
