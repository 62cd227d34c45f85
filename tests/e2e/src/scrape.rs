//! Scraping an operator's `/metrics` over HTTPS, as Prometheus does: with a bearer token or a
//! client certificate, trusting the serving certificate's CA (or, for a self-signed one, any).

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a scraper presents and trusts.
#[derive(Default)]
pub struct Scraper<'a> {
    /// A bearer token.
    pub token: Option<&'a str>,
    /// A client certificate and its key (PEM).
    pub certificate: Option<&'a (String, String)>,
    /// The CA (PEM) of the serving certificate; `None` accepts any certificate (a self-signed
    /// one, where no service-ca signs it).
    pub trust: Option<&'a str>,
}

/// GET `path` of `address` over HTTPS, as `scraper`, naming the server `localhost` (or
/// what the certificate names, when any is accepted): the status and the body. Panics when
/// the TLS session cannot be set up.
pub async fn get(address: SocketAddr, path: &str, scraper: &Scraper<'_>) -> (u16, String) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("TLS versions: {e}"));
    let builder = match scraper.trust {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots
                    .add(cert.unwrap_or_else(|e| panic!("the trusted CA: {e}")))
                    .unwrap_or_else(|e| panic!("the trusted CA: {e}"));
            }
            builder.with_root_certificates(roots)
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(opkit::tls::AnyServerCertificate::new(
                provider,
            ))),
    };
    let config = match scraper.certificate {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap_or_else(|e| panic!("the client certificate: {e}")),
                PrivateKeyDer::from_pem_slice(key.as_bytes())
                    .unwrap_or_else(|e| panic!("the client key: {e}")),
            )
            .unwrap_or_else(|e| panic!("the client certificate: {e}")),
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .unwrap_or_else(|e| panic!("connecting to {address}: {e}"));
    let name = ServerName::try_from("localhost").unwrap_or_else(|e| panic!("{e}"));
    let mut stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap_or_else(|e| panic!("TLS to {address}: {e}"));
    let authorization = scraper
        .token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{authorization}Connection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("writing to {address}: {e}"));
    let mut response = Vec::new();
    // A server that ends the session without close_notify still gave its answer.
    let _ = stream.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.get(9..12).unwrap_or("0").parse().unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}
