//! The OpenStack client of the Manila driver against a fake cloud over HTTPS on 127.0.0.1:
//! Keystone and Manila served by one in-process rustls + hyper server whose certificate is
//! signed by a throwaway CA made at test time (no key material in the repository).
//! - trust: the cloud's own CA (also by host name, from a mixed CRLF bundle, over TLS 1.2
//!   only), not the system roots alone, nothing with `verify: false`, never a certificate for
//!   another name;
//! - failures named without the password: a wrong password (401), a CA bundle without a
//!   usable certificate, a server that hangs up, a closed port;
//! - end to end on testkit: the driver operator with the real client, reading its
//!   credentials Secret (clouds.yaml and the CA), enables Manila with one class per share
//!   type and writes the CA into `csi-manila-secrets`; without a trusted CA it stays Disabled
//!   saying where the CA goes, until the cluster's cloud config brings it.
//! - the egress proxy: HTTPS through a `CONNECT` tunnel with the proxy URL's credentials, the
//!   host resolved by the proxy only; loopback reached directly; a refusing proxy named
//!   without its password.

#![allow(clippy::unwrap_used)]

mod driver_testkit;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use driver_testkit::*;
use drivers::openstack_api::{self, Tls};
use drivers::openstack_manila;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::PostParams;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::version::{TLS12, TLS13};
use rustls::{ServerConfig, SupportedProtocolVersion};
use serde_json::{Value, json};

const PASSWORD: &str = "correct-horse-battery-staple";
const CREDENTIAL_SECRET: &str = "app-credential-secret-value";
const TOKEN: &str = "gAAAAB-fake-keystone-token";
const PROJECT_ID: &str = "6f1c0a3b9d2e4c5f8a7b6c5d4e3f2a1b";
const REGION: &str = "regionOne";

/// A throwaway CA and a server certificate it signed, for `names` (DNS names or IPs).
struct Pki {
    ca_pem: String,
    cert: CertificateDer<'static>,
    key_der: Vec<u8>,
    key_pem: String,
}

impl Pki {
    fn new(names: &[&str]) -> Self {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(DnType::CommonName, "fake OpenStack test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();

        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut server = CertificateParams::new(names).unwrap();
        server
            .distinguished_name
            .push(DnType::CommonName, "fake OpenStack");
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = server.signed_by(&key, &ca).unwrap();
        Self {
            ca_pem: ca.pem(),
            cert: cert.der().clone(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
        }
    }

    /// For the addresses the tests use.
    fn local() -> Self {
        Self::new(&["localhost", "127.0.0.1"])
    }

    /// The server side: this certificate, speaking `versions` of TLS.
    fn server(&self, versions: &[&'static SupportedProtocolVersion]) -> Arc<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![self.cert.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )
            .unwrap();
        Arc::new(config)
    }
}

/// One request the fake cloud answered.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    headers: HeaderMap,
    body: Value,
}

/// Keystone and Manila on one HTTPS port.
struct FakeCloud {
    port: u16,
    ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn reply(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// Keystone v3 `POST /v3/auth/tokens`: user `alice` of domain `Default` with [`PASSWORD`],
/// scoped to project `shift` of `Default`, or application credential `ac1`; 401 otherwise.
/// The catalog's endpoints point back at the host the client asked for.
fn keystone(base: &str, body: &Value) -> Response<Full<Bytes>> {
    let auth = &body["auth"];
    let identity = &auth["identity"];
    let password = identity["methods"] == json!(["password"])
        && identity["password"]["user"]
            == json!({"name": "alice", "domain": {"name": "Default"}, "password": PASSWORD})
        && auth["scope"] == json!({"project": {"name": "shift", "domain": {"name": "Default"}}});
    let credential = identity["methods"] == json!(["application_credential"])
        && identity["application_credential"] == json!({"id": "ac1", "secret": CREDENTIAL_SECRET})
        && auth.get("scope").is_none();
    if !(password || credential) {
        return reply(
            StatusCode::UNAUTHORIZED,
            &json!({"error": {"code": 401, "title": "Unauthorized",
                "message": "The request you have made requires authentication."}}),
        );
    }
    let catalog = json!([
        {"type": "identity", "name": "keystone", "endpoints": [
            {"interface": "public", "region_id": REGION, "region": REGION, "url": format!("{base}/v3")},
        ]},
        {"type": "share", "name": "manila", "endpoints": [
            {"interface": "public", "region_id": REGION, "region": REGION, "url": format!("{base}/v1/{PROJECT_ID}")},
        ]},
        {"type": "sharev2", "name": "manilav2", "endpoints": [
            {"interface": "internal", "region_id": REGION, "region": REGION, "url": format!("{base}/internal/v2/{PROJECT_ID}")},
            {"interface": "public", "region_id": "regionTwo", "region": "regionTwo", "url": format!("{base}/region-two/v2/{PROJECT_ID}")},
            // Keystone keeps the URL as registered, trailing slash included.
            {"interface": "public", "region_id": REGION, "region": REGION, "url": format!("{base}/v2/{PROJECT_ID}/")},
        ]},
    ]);
    let mut response = reply(
        StatusCode::CREATED,
        &json!({"token": {
            "methods": identity["methods"],
            "project": {"id": PROJECT_ID, "name": "shift", "domain": {"id": "default", "name": "Default"}},
            "expires_at": "2099-01-01T00:00:00.000000Z",
            "catalog": catalog,
        }}),
    );
    response
        .headers_mut()
        .insert("x-subject-token", TOKEN.parse().unwrap());
    response
}

/// Manila `GET /v2/<project>/types` with the token Keystone issued; 401 otherwise.
fn manila(path: &str, headers: &HeaderMap) -> Response<Full<Bytes>> {
    if headers.get("x-auth-token").and_then(|v| v.to_str().ok()) != Some(TOKEN) {
        return reply(
            StatusCode::UNAUTHORIZED,
            &json!({"error": {"code": 401, "title": "Unauthorized"}}),
        );
    }
    if path == format!("/v2/{PROJECT_ID}/types") {
        return reply(
            StatusCode::OK,
            &json!({"share_types": [
                {"id": "c5b1f2c4", "name": "default", "extra_specs": {"driver_handles_share_servers": "False"}},
                {"id": "9a8e7d6c", "name": "ssd", "extra_specs": {"driver_handles_share_servers": "False"}},
            ]}),
        );
    }
    reply(
        StatusCode::NOT_FOUND,
        &json!({"itemNotFound": {"code": 404}}),
    )
}

async fn answer(seen: Arc<Mutex<Vec<Seen>>>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let headers = request.headers().clone();
    let bytes = request.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    seen.lock().unwrap().push(Seen {
        method: method.clone(),
        path: path.clone(),
        headers: headers.clone(),
        body: body.clone(),
    });
    if method == "POST" && path == "/v3/auth/tokens" {
        let host = headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        keystone(&format!("https://{host}"), &body)
    } else if method == "GET" {
        manila(&path, &headers)
    } else {
        reply(StatusCode::METHOD_NOT_ALLOWED, &json!({}))
    }
}

impl FakeCloud {
    async fn start() -> Self {
        Self::start_with(&Pki::local(), &[&TLS13, &TLS12]).await
    }

    async fn start_with(pki: &Pki, versions: &[&'static SupportedProtocolVersion]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let acceptor = tokio_rustls::TlsAcceptor::from(pki.server(versions));
        let recorder = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), recorder.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the connection here.
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        let seen = seen.clone();
                        async move { Ok::<_, Infallible>(answer(seen, request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            port,
            ca_pem: pki.ca_pem.clone(),
            seen,
        }
    }

    fn base(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// `clouds.yaml` with cloud `openstack` at `auth_url`: user `alice` with `password`, scoped
/// to project `shift`, in [`REGION`]; `extra` lines are added to the cloud.
fn clouds_yaml(auth_url: &str, password: &str, extra: &str) -> String {
    format!(
        "clouds:\n  openstack:\n    auth:\n      auth_url: {auth_url}\n      username: alice\n      password: {password}\n      user_domain_name: Default\n      project_name: shift\n      project_domain_name: Default\n    region_name: {REGION}\n{extra}"
    )
}

fn application_credential_yaml(auth_url: &str, extra: &str) -> String {
    format!(
        "clouds:\n  openstack:\n    auth:\n      auth_url: {auth_url}\n      application_credential_id: ac1\n      application_credential_secret: {CREDENTIAL_SECRET}\n    auth_type: v3applicationcredential\n    region_name: {REGION}\n{extra}"
    )
}

async fn share_types(text: &str, tls: &Tls) -> Result<Vec<String>, String> {
    let cloud = openstack_api::parse_cloud(text, "openstack").unwrap();
    openstack_api::list_share_types(&cloud, tls).await
}

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn the_cloud_s_own_ca_is_trusted_and_the_share_types_are_listed() {
    let cloud = FakeCloud::start().await;
    // A trailing slash on auth_url, as users write it.
    let text = clouds_yaml(&format!("{}/v3/", cloud.base()), PASSWORD, "");
    let types = share_types(&text, &Tls::WithCa(cloud.ca_pem.clone()))
        .await
        .unwrap();
    assert_eq!(types, ["default", "ssd"]);

    let seen = cloud.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let auth = &seen[0];
    assert_eq!(
        (auth.method.as_str(), auth.path.as_str()),
        ("POST", "/v3/auth/tokens")
    );
    assert_eq!(header(auth, "content-type"), Some("application/json"));
    assert_eq!(header(auth, "x-auth-token"), None);
    assert_eq!(
        auth.body["auth"]["identity"]["password"]["user"]["password"],
        PASSWORD
    );
    let list = &seen[1];
    assert_eq!(
        (list.method.as_str(), list.path.as_str()),
        ("GET", format!("/v2/{PROJECT_ID}/types").as_str()),
        "the public sharev2 endpoint of {REGION}, joined without a double slash"
    );
    assert_eq!(header(list, "x-auth-token"), Some(TOKEN));
    assert_eq!(header(list, "x-openstack-manila-api-version"), Some("2.0"));
    assert_eq!(header(list, "accept"), Some("application/json"));
    assert_eq!(
        header(list, "host"),
        Some(format!("127.0.0.1:{}", cloud.port).as_str())
    );
}

#[tokio::test]
async fn a_host_name_is_checked_against_the_certificate_too() {
    let cloud = FakeCloud::start().await;
    let text = application_credential_yaml(&format!("https://localhost:{}", cloud.port), "");
    let types = share_types(&text, &Tls::WithCa(cloud.ca_pem.clone()))
        .await
        .unwrap();
    assert_eq!(types, ["default", "ssd"]);
    let seen = cloud.seen();
    assert_eq!(
        header(&seen[1], "host"),
        Some(format!("localhost:{}", cloud.port).as_str())
    );
}

#[tokio::test]
async fn a_cloud_that_speaks_only_tls_1_2_is_reached() {
    let cloud = FakeCloud::start_with(&Pki::local(), &[&TLS12]).await;
    let text = clouds_yaml(&cloud.base(), PASSWORD, "");
    let types = share_types(&text, &Tls::WithCa(cloud.ca_pem.clone()))
        .await
        .unwrap();
    assert_eq!(types, ["default", "ssd"]);
}

#[tokio::test]
async fn a_ca_bundle_with_other_blocks_and_crlf_line_ends_is_read() {
    let cloud = FakeCloud::start().await;
    let other = Pki::local();
    // Another CA, a private key and the cloud's CA, as a bundle edited on Windows.
    let bundle = format!("{}{}{}", other.ca_pem, other.key_pem, cloud.ca_pem).replace('\n', "\r\n");
    let text = clouds_yaml(&cloud.base(), PASSWORD, "");
    let types = share_types(&text, &Tls::WithCa(bundle)).await.unwrap();
    assert_eq!(types, ["default", "ssd"]);
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let cloud = FakeCloud::start_with(&Pki::new(&["keystone.example.com"]), &[&TLS13]).await;
    let text = clouds_yaml(&cloud.base(), PASSWORD, "");
    let error = share_types(&text, &Tls::WithCa(cloud.ca_pem.clone()))
        .await
        .unwrap_err();
    assert!(
        error.contains("certificate not valid for name \"127.0.0.1\""),
        "{error}"
    );
    assert!(
        error.contains(&format!("{}/v3/auth/tokens", cloud.base())),
        "{error}"
    );
    assert!(!error.contains(PASSWORD), "{error}");
    assert!(cloud.seen().is_empty(), "{:?}", cloud.seen());
}

#[tokio::test]
async fn the_system_roots_do_not_trust_a_private_ca() {
    let cloud = FakeCloud::start().await;
    let text = clouds_yaml(&cloud.base(), PASSWORD, "");
    let error = share_types(&text, &Tls::System).await.unwrap_err();
    assert!(error.contains("UnknownIssuer"), "{error}");
    assert!(
        error.contains(&format!(
            "authenticating at Keystone {}/v3/auth/tokens failed",
            cloud.base()
        )),
        "{error}"
    );
    assert!(!error.contains(PASSWORD), "{error}");
    assert!(
        cloud.seen().is_empty(),
        "no request gets past the handshake"
    );
}

#[tokio::test]
async fn verify_false_skips_the_certificate_check() {
    let cloud = FakeCloud::start().await;
    // As the operator reads it: `verify: false` in clouds.yaml wins over a CA in the Secret.
    let text = application_credential_yaml(&cloud.base(), "    verify: false\n");
    let data = BTreeMap::from([
        ("clouds.yaml".to_owned(), ByteString(text.into_bytes())),
        (
            "cacert".to_owned(),
            ByteString(Pki::local().ca_pem.into_bytes()),
        ),
    ]);
    let credentials = openstack_manila::credentials_from("ns/creds", &data).unwrap();
    assert_eq!(credentials.tls(), Tls::Insecure);
    let types = openstack_api::list_share_types(&credentials.cloud, &credentials.tls())
        .await
        .unwrap();
    assert_eq!(types, ["default", "ssd"]);
    let seen = cloud.seen();
    assert_eq!(
        seen[0].body["auth"]["identity"]["methods"],
        json!(["application_credential"])
    );
    assert_eq!(header(&seen[1], "x-auth-token"), Some(TOKEN));
}

#[tokio::test]
async fn a_wrong_password_is_a_401_naming_clouds_yaml_not_the_password() {
    let cloud = FakeCloud::start().await;
    let wrong = "not-the-password-42";
    let text = clouds_yaml(&cloud.base(), wrong, "");
    let error = share_types(&text, &Tls::WithCa(cloud.ca_pem.clone()))
        .await
        .unwrap_err();
    assert!(error.contains("HTTP 401"), "{error}");
    assert!(error.contains("clouds.yaml"), "{error}");
    assert!(
        error.contains(&format!("Keystone at {}/v3/auth/tokens", cloud.base())),
        "{error}"
    );
    assert!(!error.contains(wrong), "{error}");
    let seen = cloud.seen();
    assert_eq!(seen.len(), 1, "no Manila request without a token: {seen:?}");
}

#[tokio::test]
async fn a_ca_bundle_without_a_usable_certificate_is_named() {
    let cloud = FakeCloud::start().await;
    let pki = Pki::local();
    let text = clouds_yaml(&cloud.base(), PASSWORD, "");
    let cases = [
        (
            "not a PEM at all".to_owned(),
            "the CA bundle has no PEM certificate",
        ),
        // A key where the CA should be: PEM, but no certificate.
        (pki.key_pem.clone(), "the CA bundle has no PEM certificate"),
        (
            "-----BEGIN CERTIFICATE-----\n!!! not base64 !!!\n-----END CERTIFICATE-----\n"
                .to_owned(),
            "the CA bundle is not valid PEM",
        ),
        (
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
                .to_owned(),
            "the CA bundle's certificate number 1 is unusable: BadEncoding",
        ),
    ];
    for (bundle, expected) in cases {
        let tls = Tls::WithCa(bundle);
        let error = openstack_api::http_client(&tls).map(|_| ()).unwrap_err();
        assert!(error.contains(expected), "{error}");
        assert!(!error.contains("PRIVATE KEY"), "{error}");
        assert!(!error.contains("peer certificate"), "{error}");
        let error = share_types(&text, &tls).await.unwrap_err();
        assert!(error.contains(expected), "{error}");
    }
    assert!(cloud.seen().is_empty(), "{:?}", cloud.seen());
}

/// A server on 127.0.0.1 that accepts connections and closes them, after the TLS handshake
/// when `tls` is given, without answering.
async fn hang_up_server(tls: Option<Arc<ServerConfig>>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            if let Some(config) = &tls {
                let acceptor = tokio_rustls::TlsAcceptor::from(config.clone());
                tokio::spawn(async move {
                    if let Ok(stream) = acceptor.accept(stream).await {
                        drop(stream);
                    }
                });
            } else {
                drop(stream);
            }
        }
    });
    port
}

#[tokio::test]
async fn a_server_that_hangs_up_is_named() {
    let pki = Pki::local();
    let before = hang_up_server(None).await;
    let after = hang_up_server(Some(pki.server(&[&TLS13]))).await;
    for port in [before, after] {
        let base = format!("https://127.0.0.1:{port}");
        let text = clouds_yaml(&base, PASSWORD, "");
        let error = share_types(&text, &Tls::WithCa(pki.ca_pem.clone()))
            .await
            .unwrap_err();
        assert!(
            error.contains(&format!(
                "authenticating at Keystone {base}/v3/auth/tokens failed"
            )),
            "{error}"
        );
        assert!(!error.contains("timed out"), "{error}");
        assert!(!error.contains(PASSWORD), "{error}");
    }
}

#[tokio::test]
async fn a_closed_port_is_named() {
    // A port nothing listens on: bind one, then drop the listener.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    drop(listener);
    let text = clouds_yaml(&base, PASSWORD, "");
    let error = share_types(&text, &Tls::Insecure).await.unwrap_err();
    assert!(
        error.contains(&format!(
            "authenticating at Keystone {base}/v3/auth/tokens failed"
        )),
        "{error}"
    );
    assert!(error.to_lowercase().contains("refused"), "{error}");
    assert!(!error.contains(PASSWORD), "{error}");
}

const DRIVER: &str = "manila.csi.openstack.org";
const DISABLED: &str = "ManilaDriverControllerServiceControllerDisabled";

/// Creates Secret `manila-cloud-credentials` with `string_data` and starts the Manila driver
/// operator with the real cloud client, asked every half second.
async fn start_with_credentials(
    cluster: &testkit::Cluster,
    admin: &kube::Client,
    string_data: Value,
) -> testkit::Background {
    let credentials: Secret = serde_json::from_value(json!({
        "metadata": {"name": "manila-cloud-credentials", "namespace": MANILA_NS},
        "stringData": string_data,
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), MANILA_NS)
        .create(&PostParams::default(), &credentials)
        .await
        .unwrap();
    let def = drivers::by_name("openstack-manila").unwrap();
    let operator = cluster.client_with_agent(AGENT);
    let probe = openstack_manila::probe_with_secret(
        openstack_manila::OpenStackShareTypes::new(operator.clone(), &def),
        operator,
        &def,
        Duration::from_millis(500),
    );
    start(cluster, def, Some(probe))
}

#[tokio::test]
async fn the_operator_enables_manila_through_the_real_client_over_https() {
    let cloud = FakeCloud::start().await;
    let (cluster, admin) = openshift(json!({"type": "OpenStack"})).await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    let running = start_with_credentials(
        &cluster,
        &admin,
        json!({
            "clouds.yaml": clouds_yaml(&format!("{}/v3", cloud.base()), PASSWORD, ""),
            "cacert": cloud.ca_pem,
        }),
    )
    .await;

    condition_becomes(&admin, DRIVER, DISABLED, "False").await;
    for (name, share_type) in [("csi-manila-default", "default"), ("csi-manila-ssd", "ssd")] {
        let class = eventually(name, async || {
            Api::<StorageClass>::all(admin.clone())
                .get_opt(name)
                .await
                .unwrap()
        })
        .await;
        assert_eq!(class.provisioner, DRIVER);
        assert_eq!(class.parameters.unwrap()["type"], share_type);
    }
    let secret = Api::<Secret>::namespaced(admin.clone(), MANILA_NS)
        .get(openstack_manila::CSI_SECRET)
        .await
        .unwrap();
    let data = secret.data.unwrap();
    let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    assert_eq!(text("os-certAuthority"), cloud.ca_pem);
    assert_eq!(text("os-authURL"), format!("{}/v3", cloud.base()));
    assert_eq!(text("os-password"), PASSWORD);
    assert!(!data.contains_key("os-TLSInsecure"));

    // Every request reached the fake cloud over the verified TLS connection.
    let seen = cloud.seen();
    assert!(
        seen.iter()
            .any(|s| s.path == format!("/v2/{PROJECT_ID}/types")),
        "{seen:?}"
    );
    running.stop().await;
}

#[tokio::test]
async fn an_untrusted_cloud_stays_disabled_until_the_cloud_config_brings_its_ca() {
    let cloud = FakeCloud::start().await;
    let (cluster, admin) = openshift(json!({"type": "OpenStack"})).await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    // clouds.yaml names a CA file, as the installer writes it, and the Secret has no CA.
    let extra =
        "    cacert: /etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem\n";
    let running = start_with_credentials(
        &cluster,
        &admin,
        json!({"clouds.yaml": clouds_yaml(&cloud.base(), PASSWORD, extra)}),
    )
    .await;

    // The system roots do not trust the cloud: Disabled, saying why, without the password.
    let message = eventually("Disabled for the unknown issuer", async || {
        condition(&admin, DRIVER, DISABLED)
            .await
            .filter(|(status, _, message)| status == "True" && message.contains("UnknownIssuer"))
            .map(|(_, _, message)| message)
    })
    .await;
    assert!(
        message.contains(&format!("{}/v3/auth/tokens", cloud.base())),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "put the cloud's CA bundle (PEM) in key cacert of Secret {MANILA_NS}/manila-cloud-credentials"
        )),
        "{message}"
    );
    assert!(!message.contains(PASSWORD), "{message}");
    assert!(
        Api::<StorageClass>::all(admin.clone())
            .get_opt("csi-manila-default")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Secret>::namespaced(admin.clone(), MANILA_NS)
            .get_opt(openstack_manila::CSI_SECRET)
            .await
            .unwrap()
            .is_none(),
        "nothing is written while Disabled"
    );

    // The cluster's cloud config carries the cloud's CA: the next check trusts it.
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({"config": "[Global]\n", "ca-bundle.pem": cloud.ca_pem}),
    )
    .await;
    condition_becomes(&admin, DRIVER, DISABLED, "False").await;
    eventually("csi-manila-ssd", async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt("csi-manila-ssd")
            .await
            .unwrap()
    })
    .await;
    let data = Api::<Secret>::namespaced(admin.clone(), MANILA_NS)
        .get(openstack_manila::CSI_SECRET)
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(data["os-certAuthority"].0, cloud.ca_pem.as_bytes());
    assert!(!data.contains_key("os-certAuthorityPath"), "{data:?}");
    running.stop().await;
}

/// A fake egress proxy: answers each `CONNECT` with `status` and, when 200, tunnels to the
/// fake cloud on 127.0.0.1 `port` whatever host was asked. Returns its URL and the request
/// heads it saw.
async fn fake_proxy(port: u16, status: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let heads: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let reply = format!("HTTP/1.1 {status}\r\n\r\n");
                client.write_all(reply.as_bytes()).await.unwrap();
                if !status.starts_with("200") {
                    return;
                }
                let mut cloud = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut cloud).await;
            });
        }
    });
    (url, heads)
}

#[tokio::test]
async fn https_goes_through_the_egress_proxy_with_its_credentials() {
    let pki = Pki::new(&["keystone.example.com"]);
    let cloud = FakeCloud::start_with(&pki, &[&TLS13]).await;
    let (proxy_url, heads) = fake_proxy(cloud.port, "200 Connection established").await;
    let proxy = drivers::http::Proxy {
        https: Some(proxy_url.replace("http://", "http://squid:s3cr3t@")),
        no_proxy: Some("localhost,127.0.0.1,.cluster.local".into()),
    };
    let client = drivers::http::http_client_with(&Tls::WithCa(pki.ca_pem.clone()), &proxy).unwrap();
    // The host is resolved by the proxy only: nothing resolves it here.
    let text = clouds_yaml("https://keystone.example.com/v3", PASSWORD, "");
    let parsed = openstack_api::parse_cloud(&text, "openstack").unwrap();
    let (token, _) = openstack_api::authenticate(&client, &parsed).await.unwrap();
    assert_eq!(token, TOKEN);
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with("CONNECT keystone.example.com:443 HTTP/1.1\r\n"),
        "{heads:?}"
    );
    // Basic credentials of the proxy URL: base64("squid:s3cr3t").
    assert!(
        heads[0].contains("Proxy-Authorization: Basic c3F1aWQ6czNjcjN0\r\n"),
        "{heads:?}"
    );
    assert_eq!(cloud.seen().len(), 1);
}

#[tokio::test]
async fn loopback_is_reached_directly_and_a_refusing_proxy_is_named_without_its_password() {
    let cloud = FakeCloud::start().await;
    let (proxy_url, heads) = fake_proxy(cloud.port, "407 Proxy Authentication Required").await;
    let proxy = drivers::http::Proxy {
        https: Some(proxy_url.replace("http://", "http://squid:s3cr3t@")),
        no_proxy: None,
    };
    let client =
        drivers::http::http_client_with(&Tls::WithCa(cloud.ca_pem.clone()), &proxy).unwrap();
    let text = clouds_yaml(&format!("{}/v3", cloud.base()), PASSWORD, "");
    let parsed = openstack_api::parse_cloud(&text, "openstack").unwrap();
    openstack_api::authenticate(&client, &parsed).await.unwrap();
    assert!(
        heads.lock().unwrap().is_empty(),
        "loopback never goes through the proxy"
    );

    let text = clouds_yaml("https://keystone.example.com/v3", PASSWORD, "");
    let parsed = openstack_api::parse_cloud(&text, "openstack").unwrap();
    let error = openstack_api::authenticate(&client, &parsed)
        .await
        .unwrap_err();
    assert!(
        error.contains(&format!("through the proxy {proxy_url}"))
            && error.contains("https://keystone.example.com/v3/auth/tokens"),
        "{error}"
    );
    assert!(!error.contains("s3cr3t"), "{error}");
    assert_eq!(heads.lock().unwrap().len(), 1);
}
