//! The operators' `/metrics` over HTTPS on a real API server: who may read them is the API
//! server's decision (a ServiceAccount's token through TokenReview, a client certificate that
//! its client CA signed, issued here through a CertificateSigningRequest as an admin would),
//! asked with the driver operator's own RBAC, and no one else gets them.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::sync::Arc;

use base64::Engine;
use e2e::scrape::{Scraper, get};
use e2e::{Identity, install, wait_for};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use opkit::secure_metrics::{ApiReviewer, SecureMetricsConfig, SecureMetricsServer, TlsProfile};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The test's namespace (its ServiceAccounts) and the label of what it made cluster-wide.
const NS: &str = "e2e-operator-metrics";
const LABEL: &str = "e2e.storage.openshift.io/operator-metrics";
/// The ClusterRole of whoever may read `/metrics` (as OpenShift's `prometheus-k8s` holds it).
const READER_ROLE: &str = "e2e-operator-metrics-reader";
/// The user of the client certificate the test has signed.
const CERT_USER: &str = "e2e-operator-metrics-scraper";

/// A CA of the test's own for the serving certificate (service-ca's part on OpenShift).
struct ServingCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl ServingCa {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "e2e service CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        Self {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    /// A directory with `tls.crt` and `tls.key` for `localhost`, as service-ca's Secret is
    /// mounted.
    fn serving_dir(&self, purpose: &str) -> std::path::PathBuf {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "e2e-operator-metrics-{purpose}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
        dir
    }
}

/// Removes what an earlier run made, then makes the test's namespace, a reader and a stranger
/// ServiceAccount, and the reader's ClusterRole (also bound to [`CERT_USER`]).
async fn scene(admin: &Client) -> (String, String) {
    // The cleanup reads ClusterCSIDrivers: their CRD, on a cluster where no test made it yet.
    e2e::apply_crd(admin, &api::crds::cluster_csi_driver()).await;
    remove_all(admin).await;
    install::ensure_namespace(admin, NS).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    for name in ["reader", "stranger"] {
        accounts
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
    }
    install::apply_value(
        admin,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": READER_ROLE, "labels": {LABEL: "true"}},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
        }),
        "the test",
    )
    .await;
    install::apply_value(
        admin,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": READER_ROLE, "labels": {LABEL: "true"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": READER_ROLE},
            "subjects": [
                {"kind": "ServiceAccount", "name": "reader", "namespace": NS},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": CERT_USER}
            ]
        }),
        "the test",
    )
    .await;
    let reader = e2e::identity::service_account_token(admin, NS, "reader", 3600).await;
    let stranger = e2e::identity::service_account_token(admin, NS, "stranger", 3600).await;
    (reader, stranger)
}

/// Removes the test's namespace, what it labelled cluster-wide, and the gcp-pd driver
/// operator's objects (from the starter; the process made no operand).
async fn remove_all(admin: &Client) {
    e2e::cleanup::delete_namespace(admin, NS).await;
    let def = drivers::by_name("gcp-pd").unwrap();
    e2e::cleanup::remove_driver(admin, &def.short_name, &def.name, &def.namespace).await;
    let selector = format!("{LABEL}=true");
    e2e::cleanup::delete_labelled(
        &Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone()),
        &selector,
    )
    .await;
    e2e::cleanup::delete_labelled(
        &Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone()),
        &selector,
    )
    .await;
    e2e::cleanup::delete_labelled(
        &Api::<CertificateSigningRequest>::all(admin.clone()),
        &selector,
    )
    .await;
}

/// A client certificate for `user`, signed by the API server's client CA through a
/// CertificateSigningRequest the admin approves (kube-controller-manager signs it): (cert
/// PEM, key PEM).
async fn client_certificate(admin: &Client, user: &str) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, user);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "e2e-scrapers");
    let request = params.serialize_request(&key).unwrap().pem().unwrap();
    let name = format!("e2e-operator-metrics-{user}");
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
            "expirationSeconds": 3600
        }
    }))
    .unwrap();
    csrs.create(&PostParams::default(), &csr).await.unwrap();
    csrs.patch_approval(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{
            "type": "Approved", "status": "True", "reason": "E2E",
            "message": "the operator metrics e2e test"
        }]}})),
    )
    .await
    .unwrap();
    let cert = wait_for(&format!("CSR {name} to be signed"), async || {
        let signed = csrs.get(&name).await.ok()?.status?.certificate?;
        Some(String::from_utf8(signed.0).unwrap())
    })
    .await;
    (cert, key.serialize_pem())
}

/// The driver operator's metrics server, in the test's process, asking the API server as the
/// driver operator's own ServiceAccount with the starter's RBAC: every review it needs is
/// allowed (no refusal recorded), and its answers are the API server's.
#[tokio::test]
#[ignore = "needs a real API server (E2E_KUBECONFIG)"]
async fn driver_operator_metrics_go_to_whom_the_api_server_allows() {
    let admin = e2e::admin().await;
    let (reader, stranger) = scene(&admin).await;
    let operator: Identity = install::driver_operator(&admin, "gcp-pd").await;
    let ca = ServingCa::new();
    let trust = ca.issuer.pem();
    let metrics = Metrics::new();
    metrics.reconciled("E2EMetrics");
    let server = SecureMetricsServer::bind(
        SecureMetricsConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            ca.serving_dir("in-process"),
            TlsProfile::default(),
        ),
        metrics,
        Readiness::default(),
        Arc::new(ApiReviewer(operator.client.clone())),
    )
    .await
    .unwrap();
    let address = server.local_addr().unwrap();
    let task = tokio::spawn(server.serve());

    // What a scraper presents, trusting the serving CA.
    let scrape = async |token: Option<&str>, certificate: Option<&(String, String)>| {
        let scraper = Scraper {
            trust: Some(&trust),
            token,
            certificate,
        };
        get(address, "/metrics", &scraper).await
    };

    let (status, body) = scrape(Some(&reader), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#"storage_operator_reconciles_total{controller="E2EMetrics"} 1"#),
        "{body}"
    );
    let (status, body) = scrape(Some(&stranger), None).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!("system:serviceaccount:{NS}:stranger")),
        "{body}"
    );
    let (status, body) = scrape(None, None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = scrape(Some("not-a-token"), None).await;
    assert_eq!(status, 401, "{body}");

    // A client certificate of the API server's client CA names a user the API server
    // authorizes; one whose user may not read is refused as a token's would be.
    let allowed = client_certificate(&admin, CERT_USER).await;
    let (status, body) = scrape(None, Some(&allowed)).await;
    assert_eq!(status, 200, "{body}");
    let other = client_certificate(&admin, "e2e-operator-metrics-nobody").await;
    let (status, body) = scrape(None, Some(&other)).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("e2e-operator-metrics-nobody"), "{body}");

    operator.assert_never_refused();
    task.abort();
    remove_all(&admin).await;
}

/// A process killed when dropped (a failed test leaves none behind), and its log file.
struct Running(Option<std::process::Child>, std::path::PathBuf);

impl Running {
    /// Fails the test, with its log, when it has exited.
    fn assert_running(&mut self) {
        if let Some(status) = self.0.as_mut().and_then(|child| child.try_wait().unwrap()) {
            let log = std::fs::read_to_string(&self.1).unwrap_or_default();
            panic!("the driver operator exited ({status}):\n{log}");
        }
    }

    /// Kills it (it must still be running) and returns its log.
    fn stop(&mut self) -> String {
        self.assert_running();
        let mut child = self.0.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `storage-operator driver` as a process, as the starter's Deployment runs it: `/metrics` is
/// served over HTTPS on --metrics-address (with the certificate of --serving-cert-dir), and no
/// longer over HTTP on the admin address.
#[tokio::test]
#[ignore = "needs a real API server (E2E_KUBECONFIG)"]
async fn the_driver_operator_process_serves_its_metrics_over_https_only() {
    let admin = e2e::admin().await;
    let (reader, _) = scene(&admin).await;
    install::driver_operator(&admin, "gcp-pd").await;
    let token = e2e::identity::service_account_token(
        &admin,
        storage_operator::registry::DRIVER_NAMESPACE,
        "gcp-pd-csi-driver-operator",
        3600,
    )
    .await;
    let kubeconfig = e2e::process::kubeconfig_with_token(&token, None, "operator-metrics");
    let ca = ServingCa::new();
    let trust = ca.issuer.pem();
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (metrics_address, admin_address) = (free(), free());
    // Its log in a file: a pipe nobody reads would block it once full.
    let log = kubeconfig.with_file_name("driver-operator.log");
    let child = std::process::Command::new(e2e::process::binary())
        .args([
            "driver",
            "gcp-pd",
            "--no-leader-election",
            "--metrics-address",
            &metrics_address.to_string(),
            "--admin-address",
            &admin_address.to_string(),
            "--serving-cert-dir",
        ])
        .arg(ca.serving_dir("process"))
        .env("KUBECONFIG", &kubeconfig)
        .env(
            "POD_NAMESPACE",
            storage_operator::registry::DRIVER_NAMESPACE,
        )
        .env_remove("LOG_FORMAT")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut child = Running(Some(child), log);

    let reader_scraper = Scraper {
        token: Some(&reader),
        trust: Some(&trust),
        ..Scraper::default()
    };
    let body = wait_for("the driver operator's /metrics over HTTPS", async || {
        child.assert_running();
        if tokio::net::TcpStream::connect(metrics_address)
            .await
            .is_err()
        {
            return None;
        }
        let (status, body) = get(metrics_address, "/metrics", &reader_scraper).await;
        (status == 200).then_some(body)
    })
    .await;
    // OpenMetrics text (the process may not have reconciled anything yet).
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    let (status, _) = get(
        metrics_address,
        "/metrics",
        &Scraper {
            trust: Some(&trust),
            ..Scraper::default()
        },
    )
    .await;
    assert_eq!(status, 401);

    // The admin port: health, and no metrics.
    let plain = |path: &'static str| async move {
        let mut stream = tokio::net::TcpStream::connect(admin_address).await.unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    };
    assert!(plain("/healthz").await.starts_with("HTTP/1.1 200"));
    let metrics = plain("/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 404"), "{metrics}");
    assert!(metrics.contains("served over HTTPS on port"), "{metrics}");

    let stderr = child.stop();
    assert!(
        !stderr.to_lowercase().contains("forbidden"),
        "the driver operator was refused something:\n{stderr}"
    );
    remove_all(&admin).await;
}
