//! `/metrics` over HTTPS, as OpenShift's operators serve theirs on port 8443: the serving
//! certificate that service-ca writes into the operator's Secret (`tls.crt`, `tls.key`,
//! mounted in a directory), the cluster's TLS profile (minimum version, cipher suites), and
//! only for whom the API server allows `get` on the non-resource URL `/metrics`.
//!
//! Callers prove who they are with a client certificate signed by the API server's client CA
//! (the `client-ca-file` of `kube-system/extension-apiserver-authentication`, as OpenShift's
//! Prometheus does with its `metrics-client-certs`), or with a bearer token, which the API
//! server reviews (TokenReview). Whether they may read is a SubjectAccessReview. Decisions are
//! kept 10 s, as library-go's delegated authentication and authorization keep theirs, so a
//! scrape every 30 s costs two reviews a minute; no caller, no request.
//!
//! Nothing is read while no one connects: the certificate files are read again at most every
//! 30 s and the client CA every 5 minutes, on a connection. When the directory has no
//! certificate (no service-ca on the cluster, or the Secret not written yet), a self-signed one
//! is served, as library-go does, and the files are looked for again on later connections.
//! `/healthz`, `/livez` and `/readyz` are served to anyone, as library-go's always-allowed paths.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

use crate::admin::{
    Readiness, accept_each, health, metrics_response, not_get, serve_connection, text,
};
use crate::metrics::Metrics;

/// The certificate file in the serving-cert directory (service-ca's Secret key).
pub const CERT_FILE: &str = "tls.crt";
/// The private key file in the serving-cert directory.
pub const KEY_FILE: &str = "tls.key";
/// Where OpenShift's operator Deployments mount their serving certificate.
pub const DEFAULT_CERT_DIR: &str = "/var/run/secrets/serving-cert";
/// The namespace and name of the ConfigMap holding the API server's client CA.
pub const CLIENT_CA_CONFIG_MAP: (&str, &str) =
    ("kube-system", "extension-apiserver-authentication");
/// Its key.
pub const CLIENT_CA_KEY: &str = "client-ca-file";

/// How long an authentication or authorization decision is kept.
const DECISION_TTL: Duration = Duration::from_secs(10);
/// How often, at most, the certificate files are read again, by default.
pub const CERT_RECHECK: Duration = Duration::from_secs(30);
/// How often, at most, the client CA is read again.
const CA_RECHECK: Duration = Duration::from_secs(300);
/// How long a review may take before the request is answered 503.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster's TLS profile for serving: `VersionTLS12`-style minimum version and IANA
/// cipher-suite names (OpenShift's `servingInfo`). Empty means rustls' defaults (TLS 1.2 and
/// 1.3, its modern suites).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsProfile {
    /// `VersionTLS10` .. `VersionTLS13`.
    pub min_version: Option<String>,
    /// IANA names of the TLS 1.2 suites allowed. TLS 1.3's suites are not configurable, as in
    /// Go's crypto/tls.
    pub cipher_suites: Vec<String>,
}

/// Who a caller is, as the API server would see them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name (`system:serviceaccount:ns:name`, a certificate's common name).
    pub name: String,
    /// The UID, when the token review gave one.
    pub uid: Option<String>,
    /// The groups (a certificate's organizations).
    pub groups: Vec<String>,
    /// Extra attributes from the token review.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A token review's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authenticated {
    /// The token belongs to this user.
    User(User),
    /// The token is not valid; the API server's error, if any.
    Rejected(String),
}

/// An access review's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authorized {
    /// May read.
    Allowed,
    /// May not; the API server's reason.
    Denied(String),
}

/// The RBAC rules a process serving `/metrics` this way needs (cluster-wide): create
/// TokenReviews and SubjectAccessReviews (what `system:auth-delegator` grants), and read the
/// client CA's ConfigMap, by name.
pub fn review_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    vec![
        crate::rbac::rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
        crate::rbac::rule(
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
            &["create"],
        ),
        k8s_openapi::api::rbac::v1::PolicyRule {
            resource_names: Some(vec![CLIENT_CA_CONFIG_MAP.1.to_owned()]),
            ..crate::rbac::rule(&[""], &["configmaps"], &["get"])
        },
    ]
}

/// Asks the API server who a caller is and what they may do.
pub trait Reviewer: Send + Sync + 'static {
    /// Reviews a bearer token (TokenReview).
    fn review_token(&self, token: String) -> BoxFuture<'static, Result<Authenticated, String>>;
    /// Whether `user` may `get` the non-resource URL `path` (SubjectAccessReview).
    fn review_access(
        &self,
        user: User,
        path: String,
    ) -> BoxFuture<'static, Result<Authorized, String>>;
    /// The PEM bundle of CAs whose client certificates authenticate callers; `None` when the
    /// cluster publishes none.
    fn client_ca(&self) -> BoxFuture<'static, Result<Option<String>, String>>;
}

/// The [`Reviewer`] of a real API server.
#[derive(Clone)]
pub struct ApiReviewer(pub kube::Client);

impl Reviewer for ApiReviewer {
    fn review_token(&self, token: String) -> BoxFuture<'static, Result<Authenticated, String>> {
        use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
        let api: kube::Api<TokenReview> = kube::Api::all(self.0.clone());
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token,
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let answer = api
                .create(&kube::api::PostParams::default(), &review)
                .await
                .map_err(|error| format!("TokenReview: {error}"))?;
            let status = answer.status.unwrap_or_default();
            if status.authenticated != Some(true) {
                return Ok(Authenticated::Rejected(
                    status
                        .error
                        .filter(|error| !error.is_empty())
                        .unwrap_or_else(|| "the token is not valid".to_owned()),
                ));
            }
            let user = status.user.unwrap_or_default();
            Ok(Authenticated::User(User {
                name: user.username.unwrap_or_default(),
                uid: user.uid,
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }))
        })
    }

    fn review_access(
        &self,
        user: User,
        path: String,
    ) -> BoxFuture<'static, Result<Authorized, String>> {
        use k8s_openapi::api::authorization::v1::{
            NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.0.clone());
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.name),
                    uid: user.uid,
                    groups: Some(user.groups),
                    extra: (!user.extra.is_empty()).then_some(user.extra),
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some(path),
                        verb: Some("get".to_owned()),
                    }),
                    resource_attributes: None,
                },
                ..SubjectAccessReview::default()
            };
            let answer = api
                .create(&kube::api::PostParams::default(), &review)
                .await
                .map_err(|error| format!("SubjectAccessReview: {error}"))?;
            let status = answer.status.unwrap_or_default();
            Ok(if status.allowed && status.denied != Some(true) {
                Authorized::Allowed
            } else {
                Authorized::Denied(status.reason.filter(|r| !r.is_empty()).unwrap_or_default())
            })
        })
    }

    fn client_ca(&self) -> BoxFuture<'static, Result<Option<String>, String>> {
        let (namespace, name) = CLIENT_CA_CONFIG_MAP;
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(self.0.clone(), namespace);
        Box::pin(async move {
            let config_map = api
                .get_opt(name)
                .await
                .map_err(|error| format!("ConfigMap {namespace}/{name}: {error}"))?;
            Ok(config_map
                .and_then(|config_map| config_map.data)
                .and_then(|mut data| data.remove(CLIENT_CA_KEY))
                .filter(|pem| !pem.trim().is_empty()))
        })
    }
}

/// Reads the TLS profile again.
#[derive(Clone)]
pub struct ProfileSource(pub Arc<dyn Fn() -> Result<TlsProfile, String> + Send + Sync>);

impl std::fmt::Debug for ProfileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProfileSource")
    }
}

/// A TLS profile the process keeps current itself (the cluster storage operator follows
/// `APIServer/cluster`), read by the server as its [`ProfileSource`].
#[derive(Clone, Debug, Default)]
pub struct ProfileCell(Arc<Mutex<TlsProfile>>);

impl ProfileCell {
    /// Sets the profile served from the next connection on (at the server's next reading).
    pub fn set(&self, profile: TlsProfile) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = profile;
    }

    /// The profile set last.
    pub fn get(&self) -> TlsProfile {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The server's source of this cell.
    pub fn source(&self) -> ProfileSource {
        let cell = self.clone();
        ProfileSource(Arc::new(move || Ok(cell.get())))
    }
}

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct SecureMetricsConfig {
    /// The address to listen on (port 0 for an ephemeral one).
    pub address: SocketAddr,
    /// The directory with `tls.crt` and `tls.key`.
    pub cert_dir: PathBuf,
    /// The TLS profile.
    pub profile: TlsProfile,
    /// Where the profile is read again, with the certificate files (the driver operator's
    /// config file, which the cluster storage operator rewrites when the cluster's profile
    /// changes): a profile that changed is served from the next connection on; one that
    /// cannot be read or used is logged and the previous one kept.
    pub profile_source: Option<ProfileSource>,
    /// The DNS names of the self-signed certificate served while the directory has none.
    pub self_signed_names: Vec<String>,
    /// How often, at most, the certificate files are read again (on a connection).
    pub reread_after: Duration,
}

impl SecureMetricsConfig {
    /// Serving on `address` the certificate of `cert_dir`, read again at most every 30 s.
    pub fn new(address: SocketAddr, cert_dir: PathBuf, profile: TlsProfile) -> Self {
        Self {
            address,
            cert_dir,
            profile,
            profile_source: None,
            self_signed_names: Vec::new(),
            reread_after: CERT_RECHECK,
        }
    }
}

/// A bound HTTPS metrics server, not yet serving.
pub struct SecureMetricsServer {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SecureMetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureMetricsServer")
            .field("listener", &self.listener)
            .field("cert_dir", &self.shared.config.cert_dir)
            .finish_non_exhaustive()
    }
}

struct Shared {
    config: SecureMetricsConfig,
    metrics: Metrics,
    readiness: Readiness,
    reviewer: Arc<dyn Reviewer>,
    tls: tokio::sync::Mutex<TlsState>,
    tokens: Mutex<Decisions<[u8; 32], Authenticated>>,
    access: Mutex<Decisions<User, Authorized>>,
}

struct TlsState {
    config: Option<Arc<ServerConfig>>,
    profile: TlsProfile,
    provider: Arc<rustls::crypto::CryptoProvider>,
    versions: Vec<&'static rustls::SupportedProtocolVersion>,
    /// The PEM pair served, and whether it is the files' (not self-signed).
    pair: Option<(Vec<u8>, Vec<u8>)>,
    self_signed: Option<(Vec<u8>, Vec<u8>)>,
    from_files: bool,
    cert_checked: Option<Instant>,
    ca: Option<String>,
    ca_checked: Option<Instant>,
    ca_failing: bool,
}

/// Decisions kept [`DECISION_TTL`].
struct Decisions<K, V> {
    entries: HashMap<K, (Instant, V)>,
}

impl<K: std::hash::Hash + Eq, V: Clone> Decisions<K, V> {
    fn new() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }

    fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(at, _)| now.duration_since(*at) < DECISION_TTL)
            .map(|(_, value)| value.clone())
    }

    fn put(&mut self, key: K, value: V, now: Instant) {
        if self.entries.len() >= 256 {
            self.entries
                .retain(|_, (at, _)| now.duration_since(*at) < DECISION_TTL);
        }
        self.entries.insert(key, (now, value));
    }
}

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SecureMetricsError {
    /// The address cannot be bound.
    #[error("binding {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The TLS profile leaves nothing to serve with.
    #[error("the TLS profile: {0}")]
    Profile(String),
}

impl SecureMetricsServer {
    /// Binds the address and checks the TLS profile.
    pub async fn bind(
        config: SecureMetricsConfig,
        metrics: Metrics,
        readiness: Readiness,
        reviewer: Arc<dyn Reviewer>,
    ) -> Result<Self, SecureMetricsError> {
        let (provider, versions) =
            provider_for(&config.profile).map_err(SecureMetricsError::Profile)?;
        let tls = TlsState {
            config: None,
            profile: config.profile.clone(),
            provider: Arc::new(provider),
            versions,
            pair: None,
            self_signed: None,
            from_files: false,
            cert_checked: None,
            ca: None,
            ca_checked: None,
            ca_failing: false,
        };
        let listener =
            TcpListener::bind(config.address)
                .await
                .map_err(|source| SecureMetricsError::Bind {
                    address: config.address,
                    source,
                })?;
        Ok(Self {
            listener,
            shared: Arc::new(Shared {
                config,
                metrics,
                readiness,
                reviewer,
                tls: tokio::sync::Mutex::new(tls),
                tokens: Mutex::new(Decisions::new()),
                access: Mutex::new(Decisions::new()),
            }),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the task is dropped. A failed connection is logged and does not stop the
    /// server.
    pub async fn serve(self) {
        let Self { listener, shared } = self;
        accept_each(&listener, "metrics server", |stream, peer| {
            let shared = shared.clone();
            async move {
                let config = shared.server_config().await;
                let acceptor = tokio_rustls::TlsAcceptor::from(config);
                let stream =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            tracing::debug!(%error, %peer, "metrics server: TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "metrics server: TLS handshake timed out");
                            return;
                        }
                    };
                // rustls verified the chain against the client CA: the subject names the user.
                let certified = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|leaf| user_of_certificate(leaf.as_ref()));
                let service = service_fn(move |request| {
                    let shared = shared.clone();
                    let certified = certified.clone();
                    async move { Ok::<_, Infallible>(shared.respond(&request, certified).await) }
                });
                serve_connection(TokioIo::new(stream), service, "metrics server", peer).await;
            }
        })
        .await;
    }
}

impl Shared {
    /// The TLS configuration for a new connection: the certificate files and the client CA
    /// read again when due, rebuilt when either changed.
    async fn server_config(&self) -> Arc<ServerConfig> {
        let mut state = self.tls.lock().await;
        let now = Instant::now();
        let mut changed = state.config.is_none();
        if state
            .cert_checked
            .is_none_or(|at| now.duration_since(at) >= self.config.reread_after)
        {
            state.cert_checked = Some(now);
            if let Some(source) = &self.config.profile_source {
                changed |= reread_profile(source, &mut state);
            }
            let files = read_pair(&self.config.cert_dir);
            let (pair, from_files) = match files {
                Ok(pair) => (pair, true),
                Err(why) => {
                    if state.from_files || state.pair.is_none() {
                        tracing::warn!(
                            dir = %self.config.cert_dir.display(),
                            why,
                            "metrics server: no serving certificate; serving a self-signed one \
                             until the directory has one"
                        );
                    }
                    (self.self_signed(&mut state), false)
                }
            };
            if state.pair.as_ref() != Some(&pair) {
                if from_files {
                    tracing::info!(
                        dir = %self.config.cert_dir.display(),
                        "metrics server: serving the certificate of the directory"
                    );
                }
                state.pair = Some(pair);
                state.from_files = from_files;
                changed = true;
            }
        }
        if state
            .ca_checked
            .is_none_or(|at| now.duration_since(at) >= CA_RECHECK)
        {
            state.ca_checked = Some(now);
            match tokio::time::timeout(REVIEW_TIMEOUT, self.reviewer.client_ca()).await {
                Ok(Ok(ca)) => {
                    if state.ca_failing {
                        tracing::info!("metrics server: the client CA can be read again");
                    }
                    state.ca_failing = false;
                    if ca != state.ca {
                        state.ca = ca;
                        changed = true;
                    }
                }
                failed => {
                    let error = match failed {
                        Ok(Err(error)) => error,
                        _ => "no answer in 10 s".to_owned(),
                    };
                    if !state.ca_failing {
                        tracing::warn!(
                            %error,
                            "metrics server: cannot read the client CA; client certificates are \
                             not accepted until it can be read (bearer tokens still are)"
                        );
                    }
                    state.ca_failing = true;
                }
            }
        }
        if changed || state.config.is_none() {
            let config = self.build(&mut state);
            state.config = Some(Arc::new(config));
        }
        state
            .config
            .clone()
            .unwrap_or_else(|| unreachable!("set just above"))
    }

    fn self_signed(&self, state: &mut TlsState) -> (Vec<u8>, Vec<u8>) {
        state
            .self_signed
            .get_or_insert_with(|| self_signed(&self.config.self_signed_names))
            .clone()
    }

    /// Builds the TLS configuration of the state's pair and CA; a pair or CA that cannot be
    /// used is logged and replaced by the self-signed pair or no client CA.
    fn build(&self, state: &mut TlsState) -> ServerConfig {
        let pair = state
            .pair
            .clone()
            .unwrap_or_else(|| self.self_signed(state));
        let verifier = match state
            .ca
            .as_deref()
            .map(|ca| client_verifier(ca, state.provider.clone()))
        {
            Some(Ok(verifier)) => verifier,
            Some(Err(error)) => {
                tracing::warn!(
                    %error,
                    "metrics server: the client CA cannot be used; client certificates are not \
                     accepted"
                );
                rustls::server::WebPkiClientVerifier::no_client_auth()
            }
            None => rustls::server::WebPkiClientVerifier::no_client_auth(),
        };
        match with_pair(state, verifier.clone(), &pair) {
            Ok(config) => config,
            Err(error) => {
                tracing::error!(
                    dir = %self.config.cert_dir.display(),
                    %error,
                    "metrics server: the serving certificate cannot be used; serving a \
                     self-signed one"
                );
                let fallback = self.self_signed(state);
                state.pair = Some(fallback.clone());
                state.from_files = false;
                with_pair(state, verifier, &fallback)
                    .unwrap_or_else(|error| unreachable!("the self-signed pair is valid: {error}"))
            }
        }
    }
}

fn client_verifier(
    ca: &str,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(ca.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|error| format!("{CLIENT_CA_KEY}: {error}"))?;
    let (added, _) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!("{CLIENT_CA_KEY} holds no usable certificate"));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|error| error.to_string())
}

fn with_pair(
    state: &TlsState,
    verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    (cert, key): &(Vec<u8>, Vec<u8>),
) -> Result<ServerConfig, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<_, _>>()
        .map_err(|error| format!("{CERT_FILE}: {error}"))?;
    if chain.is_empty() {
        return Err(format!("{CERT_FILE} holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|error| format!("{KEY_FILE}: {error}"))?;
    let mut config = ServerConfig::builder_with_provider(state.provider.clone())
        .with_protocol_versions(&state.versions)
        .map_err(|error| error.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|error| error.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Reads the profile again; whether it changed (and is in use from now on).
fn reread_profile(source: &ProfileSource, state: &mut TlsState) -> bool {
    let profile = match (source.0)() {
        Ok(profile) => profile,
        Err(error) => {
            tracing::warn!(%error, "metrics server: cannot read the TLS profile; keeping the one in use");
            return false;
        }
    };
    if profile == state.profile {
        return false;
    }
    match provider_for(&profile) {
        Ok((provider, versions)) => {
            tracing::info!(
                min_version = profile.min_version.as_deref().unwrap_or_default(),
                cipher_suites = profile.cipher_suites.len(),
                "metrics server: the TLS profile changed; serving it from the next connection"
            );
            state.provider = Arc::new(provider);
            state.versions = versions;
            state.profile = profile;
            true
        }
        Err(error) => {
            tracing::warn!(%error, "metrics server: the new TLS profile cannot be used; keeping the one in use");
            false
        }
    }
}

impl Shared {
    async fn respond(
        &self,
        request: &Request<Incoming>,
        certified: Option<User>,
    ) -> Response<Full<Bytes>> {
        if let Some(response) = not_get(request).or_else(|| health(request, &self.readiness)) {
            return response;
        }
        let path = request.uri().path();
        if path != "/metrics" {
            return text(
                StatusCode::NOT_FOUND,
                "not found: try /metrics, /healthz or /readyz\n",
            );
        }
        let user = match certified {
            Some(user) => user,
            None => match self.authenticate(request).await {
                Ok(user) => user,
                Err(response) => return response,
            },
        };
        match self.authorize(&user, path).await {
            Ok(()) => metrics_response(&self.metrics),
            Err(response) => response,
        }
    }

    async fn authenticate(
        &self,
        request: &Request<Incoming>,
    ) -> Result<User, Response<Full<Bytes>>> {
        let token = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                value
                    .strip_prefix("Bearer ")
                    .or_else(|| value.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|token| !token.is_empty());
        let Some(token) = token else {
            let mut response = text(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: present a bearer token or a client certificate signed by the API \
                 server's client CA\n",
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return Err(response);
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        let cached = self
            .tokens
            .lock()
            .ok()
            .and_then(|tokens| tokens.get(&key, now));
        let answer = match cached {
            Some(answer) => answer,
            None => {
                let asked =
                    tokio::time::timeout(REVIEW_TIMEOUT, self.reviewer.review_token(token.into()))
                        .await;
                let answer = match asked {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(error)) => return Err(unavailable("review the token", &error)),
                    Err(_) => return Err(unavailable("review the token", "no answer in 10 s")),
                };
                if let Ok(mut tokens) = self.tokens.lock() {
                    tokens.put(key, answer.clone(), now);
                }
                answer
            }
        };
        match answer {
            Authenticated::User(user) => Ok(user),
            Authenticated::Rejected(why) => Err(text(
                StatusCode::UNAUTHORIZED,
                format!("Unauthorized: {why}\n"),
            )),
        }
    }

    async fn authorize(&self, user: &User, path: &str) -> Result<(), Response<Full<Bytes>>> {
        let now = Instant::now();
        let cached = self
            .access
            .lock()
            .ok()
            .and_then(|access| access.get(user, now));
        let answer = match cached {
            Some(answer) => answer,
            None => {
                let asked = tokio::time::timeout(
                    REVIEW_TIMEOUT,
                    self.reviewer.review_access(user.clone(), path.to_owned()),
                )
                .await;
                let answer = match asked {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(error)) => return Err(unavailable("authorize the request", &error)),
                    Err(_) => {
                        return Err(unavailable("authorize the request", "no answer in 10 s"));
                    }
                };
                if let Ok(mut access) = self.access.lock() {
                    access.put(user.clone(), answer.clone(), now);
                }
                answer
            }
        };
        match answer {
            Authorized::Allowed => Ok(()),
            Authorized::Denied(reason) => {
                let reason = if reason.is_empty() {
                    String::new()
                } else {
                    format!(": {reason}")
                };
                Err(text(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Forbidden: user \"{}\" cannot get path \"{path}\"{reason}\n",
                        user.name
                    ),
                ))
            }
        }
    }
}

fn unavailable(what: &str, error: &str) -> Response<Full<Bytes>> {
    tracing::warn!(error, "metrics server: cannot {what}");
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("cannot {what} with the API server: {error}\n"),
    )
}

/// Reads `tls.crt` and `tls.key`; the error says which is missing or unreadable.
fn read_pair(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), String> {
    let read =
        |file: &str| std::fs::read(dir.join(file)).map_err(|error| format!("{file}: {error}"));
    Ok((read(CERT_FILE)?, read(KEY_FILE)?))
}

/// A self-signed certificate and key (PEM) for those of `names` that are DNS names
/// (`localhost` when none is).
fn self_signed(names: &[String]) -> (Vec<u8>, Vec<u8>) {
    let is_dns_name = |name: &&String| {
        !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    let mut names: Vec<String> = names.iter().filter(is_dns_name).cloned().collect();
    if names.is_empty() {
        names.push("localhost".to_owned());
    }
    let certified = rcgen::generate_simple_self_signed(names)
        .or_else(|_| rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]))
        .unwrap_or_else(|error| unreachable!("a self-signed certificate for localhost: {error}"));
    (
        certified.cert.pem().into_bytes(),
        certified.signing_key.serialize_pem().into_bytes(),
    )
}

/// The crypto provider and protocol versions of a TLS profile. TLS 1.0 and 1.1 are not
/// offered by rustls: a profile allowing them serves 1.2 and 1.3 (logged). Suites named by the
/// profile that rustls lacks (CBC, 3DES) are left out; a profile left with no TLS 1.2 suite
/// serves TLS 1.3 only.
pub fn provider_for(
    profile: &TlsProfile,
) -> Result<
    (
        rustls::crypto::CryptoProvider,
        Vec<&'static rustls::SupportedProtocolVersion>,
    ),
    String,
> {
    let mut provider = rustls::crypto::ring::default_provider();
    let tls13_only = match profile.min_version.as_deref() {
        None | Some("") | Some("VersionTLS12") => false,
        Some("VersionTLS13") => true,
        Some("VersionTLS10" | "VersionTLS11") => {
            tracing::info!(
                min_version = profile.min_version.as_deref().unwrap_or_default(),
                "metrics server: TLS 1.0 and 1.1 are not offered; serving TLS 1.2 and 1.3"
            );
            false
        }
        Some(other) => {
            return Err(format!(
                "minTLSVersion {other:?} is not one of VersionTLS10, VersionTLS11, VersionTLS12, \
                 VersionTLS13"
            ));
        }
    };
    if !profile.cipher_suites.is_empty() {
        provider.cipher_suites.retain(|suite| match suite {
            rustls::SupportedCipherSuite::Tls13(_) => true,
            rustls::SupportedCipherSuite::Tls12(_) => suite
                .suite()
                .as_str()
                .is_some_and(|name| profile.cipher_suites.iter().any(|wanted| wanted == name)),
        });
    }
    let has_tls12 = provider
        .cipher_suites
        .iter()
        .any(|suite| matches!(suite, rustls::SupportedCipherSuite::Tls12(_)));
    let versions = if tls13_only || !has_tls12 {
        if !tls13_only {
            tracing::warn!(
                cipher_suites = ?profile.cipher_suites,
                "metrics server: none of the profile's TLS 1.2 cipher suites is offered here; \
                 serving TLS 1.3 only"
            );
        }
        vec![&rustls::version::TLS13]
    } else {
        vec![&rustls::version::TLS12, &rustls::version::TLS13]
    };
    Ok((provider, versions))
}

/// The user a client certificate names, as the API server reads it: the subject's common name
/// is the user, its organizations the groups. `None` when the certificate has no common name.
pub fn user_of_certificate(der: &[u8]) -> Option<User> {
    let subject = der::subject(der)?;
    let mut name = None;
    let mut groups = Vec::new();
    for (oid, value) in subject {
        match oid {
            der::COMMON_NAME => name = Some(value),
            der::ORGANIZATION => groups.push(value),
            _ => {}
        }
    }
    Some(User {
        name: name.filter(|name| !name.is_empty())?,
        uid: None,
        groups,
        extra: BTreeMap::new(),
    })
}

/// Just enough DER to read a certificate's subject (RFC 5280 §4.1): the chain was verified
/// by rustls before this reads it.
mod der {
    pub const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    pub const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

    /// One TLV: tag, contents, rest.
    fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (length, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || rest.len() < count {
                return None;
            }
            let (bytes, rest) = rest.split_at(count);
            let length = bytes
                .iter()
                .fold(0usize, |length, byte| (length << 8) | usize::from(*byte));
            (length, rest)
        };
        if rest.len() < length {
            return None;
        }
        let (contents, rest) = rest.split_at(length);
        Some((tag, contents, rest))
    }

    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;
    const OID: u8 = 0x06;
    const VERSION: u8 = 0xa0;

    /// The subject's attributes: (OID bytes, value as text).
    pub fn subject(certificate: &[u8]) -> Option<Vec<(&[u8], String)>> {
        let (SEQUENCE, certificate, _) = tlv(certificate)? else {
            return None;
        };
        let (SEQUENCE, mut tbs, _) = tlv(certificate)? else {
            return None;
        };
        // [0] version, optional.
        if tbs.first() == Some(&VERSION) {
            tbs = tlv(tbs)?.2;
        }
        // serialNumber, signature, issuer, validity, then subject.
        for _ in 0..4 {
            tbs = tlv(tbs)?.2;
        }
        let (SEQUENCE, mut names, _) = tlv(tbs)? else {
            return None;
        };
        let mut attributes = Vec::new();
        while !names.is_empty() {
            let (tag, mut set, rest) = tlv(names)?;
            names = rest;
            if tag != SET {
                return None;
            }
            while !set.is_empty() {
                let (SEQUENCE, pair, rest) = tlv(set)? else {
                    return None;
                };
                set = rest;
                let (OID, oid, value) = tlv(pair)? else {
                    return None;
                };
                let (_, value, _) = tlv(value)?;
                attributes.push((oid, String::from_utf8_lossy(value).into_owned()));
            }
        }
        Some(attributes)
    }
}
