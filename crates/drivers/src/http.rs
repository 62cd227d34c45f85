//! The HTTP client the drivers' cloud clients share (OpenStack Keystone and Manila, IBM Cloud
//! IAM and Resource Manager): hyper 1 with hyper-util's client and rustls (the stack kube
//! already uses), with the system roots plus an optional CA PEM, or no verification at all
//! when the cloud's configuration says so. Every request has a [`REQUEST_TIMEOUT`] and a body
//! limit; every error names what failed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::Value;

/// How long one HTTP request (connect, send, read the body) may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest response body read (a service catalog is a few hundred KiB at most).
const MAX_BODY: usize = 8 * 1024 * 1024;

/// How to check a server's TLS certificates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Tls {
    /// The system roots.
    #[default]
    System,
    /// The system roots and this CA bundle (PEM).
    WithCa(String),
    /// No verification (e.g. `verify: false` in `clouds.yaml`).
    Insecure,
}

/// The HTTP(S) client of [`http_client`].
pub type HttpClient = Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// An HTTP(S) client for `tls`; an error says what is wrong with the CA bundle.
pub fn http_client(tls: &Tls) -> Result<HttpClient, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?;
    let config = match tls {
        Tls::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
            .with_no_client_auth(),
        Tls::System | Tls::WithCa(_) => {
            let mut roots = rustls::RootCertStore::empty();
            // Unreadable system certificates are skipped: a CA bundle may still do.
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
            if let Tls::WithCa(pem) = tls {
                let mut added = 0;
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    let cert = cert.map_err(|e| format!("the CA bundle is not valid PEM: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("the CA bundle has an unusable certificate: {e}"))?;
                    added += 1;
                }
                if added == 0 {
                    return Err("the CA bundle has no PEM certificate".to_owned());
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// Accepts any server certificate, for `verify: false` (signatures are still checked).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A response: its status, headers and JSON body (`Null` if empty or not JSON).
pub struct Response {
    /// The HTTP status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body as JSON.
    pub body: Value,
}

impl Response {
    /// The header `name` as text, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Sends one request with [`REQUEST_TIMEOUT`]; `what` names it in errors.
pub async fn send(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    what: &str,
) -> Result<Response, String> {
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("{what} failed: {}", error_chain(&e)))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("{what}: reading the response failed: {e}"))?
            .to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Response {
            status,
            headers,
            body,
        })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("{what} timed out after {}s", REQUEST_TIMEOUT.as_secs()))?
}

/// An error and its causes on one line (hyper's own message is terse).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
