//! `/metrics` over HTTPS: who may read, with which certificate, under which TLS profile. The
//! API server's reviews are a fake here (tests/e2e asks a real one).

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use opkit::secure_metrics::{
    Authenticated, Authorized, ProfileSource, Reviewer, SecureMetricsConfig, SecureMetricsServer,
    TlsProfile, User, user_of_certificate,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const READER: &str = "system:serviceaccount:openshift-monitoring:prometheus-k8s";
const STRANGER: &str = "system:serviceaccount:default:stranger";

/// A CA and what it signed.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Self {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `localhost`: (cert PEM, key PEM).
    fn server(&self) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "operator-metrics");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate for `user` in `groups`: (cert PEM, key PEM).
    fn client(&self, user: &str, groups: &[&str]) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// The API server's answers: tokens to users, who may read, the client CA; and a count of
/// the reviews asked.
#[derive(Default)]
struct FakeApi {
    tokens: Vec<(String, User)>,
    readers: Vec<String>,
    client_ca: Mutex<Option<String>>,
    down: std::sync::atomic::AtomicBool,
    token_reviews: AtomicUsize,
    access_reviews: AtomicUsize,
    ca_reads: AtomicUsize,
}

/// The fake as the server holds it.
struct Fake(Arc<FakeApi>);

impl Reviewer for Fake {
    fn review_token(&self, token: String) -> BoxFuture<'static, Result<Authenticated, String>> {
        self.0.token_reviews.fetch_add(1, Ordering::SeqCst);
        let answer = if self.0.down.load(Ordering::SeqCst) {
            Err("connection refused".to_owned())
        } else {
            Ok(self
                .0
                .tokens
                .iter()
                .find(|(known, _)| *known == token)
                .map(|(_, user)| Authenticated::User(user.clone()))
                .unwrap_or_else(|| Authenticated::Rejected("invalid bearer token".to_owned())))
        };
        Box::pin(async move { answer })
    }

    fn review_access(
        &self,
        user: User,
        path: String,
    ) -> BoxFuture<'static, Result<Authorized, String>> {
        self.0.access_reviews.fetch_add(1, Ordering::SeqCst);
        assert_eq!(path, "/metrics");
        let answer = if self.0.readers.contains(&user.name) {
            Authorized::Allowed
        } else {
            Authorized::Denied(String::new())
        };
        Box::pin(async move { Ok(answer) })
    }

    fn client_ca(&self) -> BoxFuture<'static, Result<Option<String>, String>> {
        self.0.ca_reads.fetch_add(1, Ordering::SeqCst);
        let ca = self.0.client_ca.lock().unwrap().clone();
        Box::pin(async move { Ok(ca) })
    }
}

fn user(name: &str) -> User {
    User {
        name: name.to_owned(),
        groups: vec!["system:serviceaccounts".to_owned()],
        ..User::default()
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "opkit-secure-metrics-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_pair(dir: &Path, (cert, key): &(String, String)) {
    std::fs::write(dir.join("tls.crt"), cert).unwrap();
    std::fs::write(dir.join("tls.key"), key).unwrap();
}

struct Served {
    address: SocketAddr,
    api: Arc<FakeApi>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(api: FakeApi, cert_dir: &Path, profile: TlsProfile) -> Served {
    serve_rereading(api, cert_dir, profile, opkit::secure_metrics::CERT_RECHECK).await
}

async fn serve_rereading(
    api: FakeApi,
    cert_dir: &Path,
    profile: TlsProfile,
    reread_after: std::time::Duration,
) -> Served {
    let api = Arc::new(api);
    let metrics = Metrics::new();
    metrics.reconciled("Secure");
    let readiness = Readiness::default();
    readiness.set(true);
    let server = SecureMetricsServer::bind(
        SecureMetricsConfig {
            address: "127.0.0.1:0".parse().unwrap(),
            cert_dir: cert_dir.to_owned(),
            profile,
            profile_source: None,
            self_signed_names: vec!["localhost".to_owned()],
            reread_after,
        },
        metrics,
        readiness,
        Arc::new(Fake(api.clone())),
    )
    .await
    .unwrap();
    let address = server.local_addr().unwrap();
    Served {
        address,
        api,
        task: tokio::spawn(server.serve()),
    }
}

/// How the test client connects.
#[derive(Default)]
struct Client<'a> {
    /// The CA it trusts; `None` trusts any certificate (and records it).
    trust: Option<&'a str>,
    /// Its own certificate.
    certificate: Option<&'a (String, String)>,
    /// TLS 1.2 only.
    tls12_only: bool,
    token: Option<&'a str>,
}

/// GET `path`: the status and body, or the TLS error.
async fn get(
    address: SocketAddr,
    path: &str,
    client: &Client<'_>,
) -> Result<(u16, String), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&'static rustls::SupportedProtocolVersion] = if client.tls12_only {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS12, &rustls::version::TLS13]
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .unwrap();
    let builder = match client.trust {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
            builder.with_root_certificates(roots)
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(opkit::tls::AnyServerCertificate::new(
                provider,
            ))),
    };
    let config = match client.certificate {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let mut stream = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|error| error.to_string())?;
    let authorization = client
        .token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{authorization}Connection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|error| error.to_string())?;
    let mut response = Vec::new();
    // A server that ends the TLS session without close_notify still gave its answer.
    let _ = stream.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .get(9..12)
        .ok_or_else(|| format!("no HTTP answer: {response:?}"))?
        .parse()
        .map_err(|_| format!("no HTTP status: {response:?}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned());
    Ok((status, body.unwrap_or_default()))
}

/// A client trusting `trust` that presents `token`.
fn bearer<'a>(trust: &'a str, token: &'a str) -> Client<'a> {
    Client {
        trust: Some(trust),
        token: Some(token),
        ..Client::default()
    }
}

fn api_with_reader_token() -> FakeApi {
    FakeApi {
        tokens: vec![
            ("reader-token".to_owned(), user(READER)),
            ("stranger-token".to_owned(), user(STRANGER)),
        ],
        readers: vec![READER.to_owned()],
        ..FakeApi::default()
    }
}

#[tokio::test]
async fn serves_metrics_to_whom_the_api_server_allows_with_a_bearer_token() {
    let ca = Ca::new("service-ca");
    let dir = temp_dir("bearer");
    write_pair(&dir, &ca.server());
    let served = serve(api_with_reader_token(), &dir, TlsProfile::default()).await;
    let trust = ca.pem();

    let reader = bearer(&trust, "reader-token");
    let (status, body) = get(served.address, "/metrics", &reader).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#"storage_operator_reconciles_total{controller="Secure"} 1"#),
        "{body}"
    );

    let anonymous = Client {
        trust: Some(&trust),
        ..Client::default()
    };
    let (status, body) = get(served.address, "/metrics", &anonymous).await.unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(
        body.contains("bearer token or a client certificate"),
        "{body}"
    );

    let forged = bearer(&trust, "forged");
    let (status, body) = get(served.address, "/metrics", &forged).await.unwrap();
    assert_eq!(
        (status, body.as_str()),
        (401, "Unauthorized: invalid bearer token\n")
    );

    let stranger = bearer(&trust, "stranger-token");
    let (status, body) = get(served.address, "/metrics", &stranger).await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(STRANGER) && body.contains("/metrics"),
        "{body}"
    );

    // Health needs no credentials, as library-go's always-allowed paths; nothing else is here.
    assert_eq!(
        get(served.address, "/healthz", &anonymous).await.unwrap(),
        (200, "ok\n".to_owned())
    );
    assert_eq!(
        get(served.address, "/readyz", &anonymous).await.unwrap().0,
        200
    );
    assert_eq!(
        get(served.address, "/secrets", &reader).await.unwrap().0,
        404
    );
}

#[tokio::test]
async fn decisions_are_kept_so_a_scrape_does_not_review_each_time() {
    let ca = Ca::new("service-ca");
    let dir = temp_dir("cache");
    write_pair(&dir, &ca.server());
    let served = serve(api_with_reader_token(), &dir, TlsProfile::default()).await;
    let trust = ca.pem();
    let reader = bearer(&trust, "reader-token");
    for _ in 0..3 {
        assert_eq!(
            get(served.address, "/metrics", &reader).await.unwrap().0,
            200
        );
    }
    assert_eq!(served.api.token_reviews.load(Ordering::SeqCst), 1);
    assert_eq!(served.api.access_reviews.load(Ordering::SeqCst), 1);
    // The client CA is read on the first connection, not again within 5 minutes.
    assert_eq!(served.api.ca_reads.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_api_server_that_does_not_answer_gives_503_not_the_metrics() {
    let ca = Ca::new("service-ca");
    let dir = temp_dir("down");
    write_pair(&dir, &ca.server());
    let api = api_with_reader_token();
    api.down.store(true, Ordering::SeqCst);
    let served = serve(api, &dir, TlsProfile::default()).await;
    let trust = ca.pem();
    let reader = bearer(&trust, "reader-token");
    let (status, body) = get(served.address, "/metrics", &reader).await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("connection refused"), "{body}");
    // The failure is not kept: once the API server answers, the next scrape is served.
    served.api.down.store(false, Ordering::SeqCst);
    assert_eq!(
        get(served.address, "/metrics", &reader).await.unwrap().0,
        200
    );
}

#[tokio::test]
async fn client_certificates_of_the_api_servers_client_ca_name_the_user() {
    let serving = Ca::new("service-ca");
    let clients = Ca::new("kube-apiserver client CA");
    let other = Ca::new("someone else's CA");
    let dir = temp_dir("client-cert");
    write_pair(&dir, &serving.server());
    let api = FakeApi {
        readers: vec![READER.to_owned()],
        client_ca: Mutex::new(Some(clients.pem())),
        ..FakeApi::default()
    };
    let served = serve(api, &dir, TlsProfile::default()).await;
    let trust = serving.pem();

    let prometheus = clients.client(READER, &["system:serviceaccounts"]);
    let with_cert = Client {
        trust: Some(&trust),
        certificate: Some(&prometheus),
        ..Client::default()
    };
    let (status, body) = get(served.address, "/metrics", &with_cert).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(served.api.token_reviews.load(Ordering::SeqCst), 0);

    let stranger = clients.client(STRANGER, &[]);
    let (status, body) = get(
        served.address,
        "/metrics",
        &Client {
            trust: Some(&trust),
            certificate: Some(&stranger),
            ..Client::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(status, 403, "{body}");

    // A certificate of another CA does not get through the handshake.
    let forged = other.client(READER, &[]);
    let refused = get(
        served.address,
        "/metrics",
        &Client {
            trust: Some(&trust),
            certificate: Some(&forged),
            ..Client::default()
        },
    )
    .await;
    assert!(
        refused.is_err() || refused.as_ref().is_ok_and(|(status, _)| *status != 200),
        "{refused:?}"
    );
}

#[test]
fn a_certificates_subject_gives_the_user_and_groups() {
    let ca = Ca::new("client CA");
    // rcgen keeps one value per attribute type: one organization.
    let (cert, _) = ca.client(READER, &["system:serviceaccounts"]);
    let der = CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
    assert_eq!(
        user_of_certificate(der.as_ref()),
        Some(User {
            name: READER.to_owned(),
            groups: vec!["system:serviceaccounts".to_owned()],
            ..User::default()
        })
    );
    assert_eq!(user_of_certificate(b"\x30\x03\x02\x01"), None);
    assert_eq!(user_of_certificate(b""), None);
}

#[tokio::test]
async fn without_a_certificate_in_the_directory_a_self_signed_one_is_served_until_one_appears() {
    let dir = temp_dir("self-signed");
    let served = serve_rereading(
        api_with_reader_token(),
        &dir,
        TlsProfile::default(),
        std::time::Duration::ZERO,
    )
    .await;
    let reader_any = Client {
        token: Some("reader-token"),
        ..Client::default()
    };
    assert_eq!(
        get(served.address, "/metrics", &reader_any)
            .await
            .unwrap()
            .0,
        200
    );
    // It is not signed by the service CA, so a client that trusts only that refuses it.
    let ca = Ca::new("service-ca");
    let trust = ca.pem();
    let reader = bearer(&trust, "reader-token");
    assert!(get(served.address, "/metrics", &reader).await.is_err());

    // service-ca writes the Secret, the kubelet updates the mount: the next connection gets it.
    write_pair(&dir, &ca.server());
    assert_eq!(
        get(served.address, "/metrics", &reader).await.unwrap().0,
        200
    );
    // And a rotated certificate (a new CA) replaces it.
    let rotated = Ca::new("service-ca, rotated");
    write_pair(&dir, &rotated.server());
    let trust = rotated.pem();
    let reader = bearer(&trust, "reader-token");
    assert_eq!(
        get(served.address, "/metrics", &reader).await.unwrap().0,
        200
    );
}

#[tokio::test]
async fn the_profile_sets_the_versions_and_suites() {
    let ca = Ca::new("service-ca");
    let dir = temp_dir("profile");
    write_pair(&dir, &ca.server());
    let trust = ca.pem();

    let modern = TlsProfile {
        min_version: Some("VersionTLS13".to_owned()),
        cipher_suites: Vec::new(),
    };
    let served = serve(api_with_reader_token(), &dir, modern).await;
    let tls12 = Client {
        trust: Some(&trust),
        token: Some("reader-token"),
        tls12_only: true,
        ..Client::default()
    };
    assert!(get(served.address, "/metrics", &tls12).await.is_err());
    let any = bearer(&trust, "reader-token");
    assert_eq!(get(served.address, "/metrics", &any).await.unwrap().0, 200);
    drop(served);

    // Intermediate's suites include the ECDSA and RSA GCM ones: the RSA-less test key is
    // ECDSA, so a TLS 1.2 client gets through.
    let intermediate = TlsProfile {
        min_version: Some("VersionTLS12".to_owned()),
        cipher_suites: vec![
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_owned(),
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned(),
        ],
    };
    let served = serve(api_with_reader_token(), &dir, intermediate).await;
    assert_eq!(
        get(served.address, "/metrics", &tls12).await.unwrap().0,
        200
    );
    drop(served);

    // A profile whose TLS 1.2 suites are all RSA ones: no suite for the ECDSA key in 1.2.
    let rsa_only = TlsProfile {
        min_version: Some("VersionTLS12".to_owned()),
        cipher_suites: vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned()],
    };
    let served = serve(api_with_reader_token(), &dir, rsa_only).await;
    assert!(get(served.address, "/metrics", &tls12).await.is_err());
    assert_eq!(get(served.address, "/metrics", &any).await.unwrap().0, 200);
}

#[tokio::test]
async fn an_unknown_minimum_version_is_refused_at_start_naming_it() {
    let error = SecureMetricsServer::bind(
        SecureMetricsConfig {
            address: "127.0.0.1:0".parse().unwrap(),
            cert_dir: temp_dir("bad-profile"),
            profile: TlsProfile {
                min_version: Some("TLSv1.2".to_owned()),
                cipher_suites: Vec::new(),
            },
            profile_source: None,
            self_signed_names: Vec::new(),
            reread_after: opkit::secure_metrics::CERT_RECHECK,
        },
        Metrics::new(),
        Readiness::default(),
        Arc::new(Fake(Arc::new(FakeApi::default()))),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains(r#"minTLSVersion "TLSv1.2""#),
        "{error}"
    );
}

#[tokio::test]
async fn a_changed_profile_is_served_from_the_next_connection() {
    let ca = Ca::new("service-ca");
    let dir = temp_dir("profile-change");
    write_pair(&dir, &ca.server());
    let trust = ca.pem();
    let current = Arc::new(Mutex::new(Ok(TlsProfile::default())));
    let source = current.clone();
    let api = Arc::new(api_with_reader_token());
    let server = SecureMetricsServer::bind(
        SecureMetricsConfig {
            profile_source: Some(ProfileSource(Arc::new(move || {
                source.lock().unwrap().clone()
            }))),
            reread_after: std::time::Duration::ZERO,
            ..SecureMetricsConfig::new(
                "127.0.0.1:0".parse().unwrap(),
                dir.clone(),
                TlsProfile::default(),
            )
        },
        Metrics::new(),
        Readiness::default(),
        Arc::new(Fake(api)),
    )
    .await
    .unwrap();
    let address = server.local_addr().unwrap();
    let task = tokio::spawn(server.serve());
    let tls12 = Client {
        trust: Some(&trust),
        token: Some("reader-token"),
        tls12_only: true,
        ..Client::default()
    };
    assert_eq!(get(address, "/metrics", &tls12).await.unwrap().0, 200);

    *current.lock().unwrap() = Ok(TlsProfile {
        min_version: Some("VersionTLS13".to_owned()),
        cipher_suites: Vec::new(),
    });
    assert!(get(address, "/metrics", &tls12).await.is_err());

    // A profile that cannot be read, or used, keeps the one in use.
    *current.lock().unwrap() = Err("config.yaml: no such file".to_owned());
    assert!(get(address, "/metrics", &tls12).await.is_err());
    *current.lock().unwrap() = Ok(TlsProfile {
        min_version: Some("VersionSSL3".to_owned()),
        cipher_suites: Vec::new(),
    });
    assert!(get(address, "/metrics", &tls12).await.is_err());

    *current.lock().unwrap() = Ok(TlsProfile::default());
    assert_eq!(get(address, "/metrics", &tls12).await.unwrap().0, 200);
    task.abort();
}
