//! The HTTP client the drivers' cloud clients share (OpenStack Keystone and Manila, IBM Cloud
//! IAM and Resource Manager): hyper 1 with hyper-util's client and rustls (the stack kube
//! already uses), with the system roots plus an optional CA PEM, or no verification at all
//! when the cloud's configuration says so. Every request has a [`REQUEST_TIMEOUT`] and a body
//! limit; every error names what failed.
//!
//! HTTPS goes through the cluster's egress proxy when there is one ([`Proxy`]: `HTTPS_PROXY`
//! and `NO_PROXY` of the process, which cluster-storage-operator sets from the cluster's Proxy
//! object), as an HTTP `CONNECT` tunnel, with basic credentials from the proxy URL. Loopback
//! hosts are always reached directly; plain-HTTP URLs too (a cloud API over plain HTTP is
//! a lab setup, inside the cluster's network).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::rt::{TokioExecutor, TokioIo};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
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
pub type HttpClient = Client<hyper_rustls::HttpsConnector<ProxyConnector>, Full<Bytes>>;

/// Which proxy HTTPS requests go through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Proxy {
    /// The proxy of HTTPS URLs (`http://[user:password@]host:port`), if any.
    pub https: Option<String>,
    /// The hosts, domains and networks reached directly (`NO_PROXY` syntax).
    pub no_proxy: Option<String>,
}

impl Proxy {
    /// The proxy of the process environment: `HTTPS_PROXY` (else `https_proxy`) and
    /// `NO_PROXY` (else `no_proxy`); empty values count as unset.
    pub fn from_env() -> Self {
        let var = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
        };
        Self {
            https: var(["HTTPS_PROXY", "https_proxy"]),
            no_proxy: var(["NO_PROXY", "no_proxy"]),
        }
    }

    fn matcher(&self) -> hyper_util::client::proxy::matcher::Matcher {
        let mut builder = hyper_util::client::proxy::matcher::Matcher::builder();
        if let Some(https) = &self.https {
            builder = builder.https(https.as_str());
        }
        if let Some(no) = &self.no_proxy {
            builder = builder.no(no.as_str());
        }
        builder.build()
    }
}

/// `uri` without its credentials, for messages.
fn redacted_uri(uri: &hyper::Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority()
            .map(|a| a.as_str().rsplit('@').next().unwrap_or_default())
            .unwrap_or_default()
    )
}

fn is_loopback(uri: &hyper::Uri) -> bool {
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The TCP connector under TLS: direct, or a `CONNECT` tunnel through the [`Proxy`].
#[derive(Clone)]
pub struct ProxyConnector {
    direct: HttpConnector,
    proxies: Arc<hyper_util::client::proxy::matcher::Matcher>,
}

impl std::fmt::Debug for ProxyConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyConnector").finish_non_exhaustive()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<hyper::Uri> for ProxyConnector {
    type Response = TokioIo<tokio::net::TcpStream>;
    type Error = BoxError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.direct.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: hyper::Uri) -> Self::Future {
        let mut direct = self.direct.clone();
        let intercept = if dst.scheme_str() == Some("https") && !is_loopback(&dst) {
            self.proxies.intercept(&dst)
        } else {
            None
        };
        Box::pin(async move {
            let Some(proxy) = intercept else {
                return direct.call(dst).await.map_err(Into::into);
            };
            let via = redacted_uri(proxy.uri());
            let mut tunnel = Tunnel::new(proxy.uri().clone(), direct);
            if let Some(auth) = proxy.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            std::future::poll_fn(|cx| tunnel.poll_ready(cx))
                .await
                .map_err(|e| format!("proxy {via}: {e}"))?;
            tunnel
                .call(dst)
                .await
                .map_err(|e| format!("through the proxy {via}: {}", error_chain(&e)).into())
        })
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// An HTTP(S) client for `tls` through the proxy of the environment ([`Proxy::from_env`]); an
/// error says what is wrong with the CA bundle.
pub fn http_client(tls: &Tls) -> Result<HttpClient, String> {
    http_client_with(tls, &Proxy::from_env())
}

/// An HTTP(S) client for `tls` through `proxy`; an error says what is wrong with the CA
/// bundle.
pub fn http_client_with(tls: &Tls, proxy: &Proxy) -> Result<HttpClient, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?;
    let config = match tls {
        Tls::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(opkit::tls::AnyServerCertificate::new(
                provider(),
            )))
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
                    roots.add(cert).map_err(|e| {
                        // rustls words this for a server's certificate; name the bundle's.
                        let reason = match e {
                            rustls::Error::InvalidCertificate(reason) => format!("{reason:?}"),
                            other => other.to_string(),
                        };
                        format!(
                            "the CA bundle's certificate number {} is unusable: {reason}",
                            added + 1
                        )
                    })?;
                    added += 1;
                }
                if added == 0 {
                    return Err("the CA bundle has no PEM certificate".to_owned());
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    let mut direct = HttpConnector::new();
    direct.enforce_http(false);
    let inner = ProxyConnector {
        direct,
        proxies: Arc::new(proxy.matcher()),
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(inner);
    Ok(Client::builder(TokioExecutor::new()).build(connector))
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

/// A response whose body is kept as it came (e.g. SOAP's XML).
pub struct RawResponse {
    /// The HTTP status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// Sends one request with [`REQUEST_TIMEOUT`]; `what` names it in errors.
pub async fn send(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    what: &str,
) -> Result<Response, String> {
    let raw = send_raw(client, request, what).await?;
    Ok(Response {
        status: raw.status,
        headers: raw.headers,
        body: serde_json::from_slice(&raw.body).unwrap_or(Value::Null),
    })
}

/// Sends one request with [`REQUEST_TIMEOUT`] and keeps the body as bytes; `what` names it in
/// errors.
pub async fn send_raw(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
    what: &str,
) -> Result<RawResponse, String> {
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
        Ok(RawResponse {
            status,
            headers,
            body: bytes,
        })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("{what} timed out after {}s", REQUEST_TIMEOUT.as_secs()))?
}

/// What a value in a URL query or path segment escapes: every byte but RFC 3986's unreserved
/// characters (`A-Z a-z 0-9 - _ . ~`), so the value reads back as it was whatever it holds.
pub const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `value` percent-encoded for a URL query or path segment, keeping the unreserved characters
/// only ([`NOT_UNRESERVED`]).
pub fn percent_encode(value: &str) -> String {
    utf8_percent_encode(value, NOT_UNRESERVED).to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_keeps_unreserved_characters_only() {
        const KEEPING_COLONS: &AsciiSet = &NOT_UNRESERVED.remove(b':');
        assert_eq!(percent_encode("aZ09-_.~"), "aZ09-_.~");
        assert_eq!(percent_encode("urn:ibm:params"), "urn%3Aibm%3Aparams");
        assert_eq!(percent_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(
            utf8_percent_encode("urn:a b", KEEPING_COLONS).to_string(),
            "urn:a%20b"
        );
    }

    /// The same bytes the hand-written encoder gave before the crate replaced it, for every
    /// ASCII character and a few beyond: letters, digits and `-_.~` as they are, every other
    /// byte as `%XX` in capitals.
    #[test]
    fn encoding_escapes_every_byte_but_the_unreserved_in_capitals() {
        for c in (0u8..0x80).map(char::from).chain(['é', '€', '😀']) {
            let value = c.to_string();
            let want = if c.is_ascii_alphanumeric() || "-_.~".contains(c) {
                value.clone()
            } else {
                value.bytes().map(|b| format!("%{b:02X}")).collect()
            };
            assert_eq!(percent_encode(&value), want, "{c:?}");
        }
    }
}
