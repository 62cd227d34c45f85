//! The admin server every operator process runs: `/healthz` (the process is alive), `/readyz`
//! (every watch cache has synced, so decisions are made from a complete picture) and `/metrics`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::future::Future;

use tokio::net::{TcpListener, TcpStream};

use crate::metrics::Metrics;

/// Whether the process is ready: set once every cache has synced.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the process ready (or not).
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// Whether the process is ready.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A bound admin server, not yet serving.
#[derive(Debug)]
pub struct AdminServer {
    listener: TcpListener,
    readiness: Readiness,
    metrics: Metrics,
    metrics_moved_to: Option<SocketAddr>,
}

impl AdminServer {
    /// Binds `address` (use port 0 for an ephemeral port).
    pub async fn bind(
        address: SocketAddr,
        readiness: Readiness,
        metrics: Metrics,
    ) -> std::io::Result<Self> {
        Ok(Self {
            listener: TcpListener::bind(address).await?,
            readiness,
            metrics,
            metrics_moved_to: None,
        })
    }

    /// Serves no `/metrics` here: they are served over HTTPS on `address`
    /// ([`crate::secure_metrics`]), to callers the API server allows.
    pub fn metrics_served_at(mut self, address: SocketAddr) -> Self {
        self.metrics_moved_to = Some(address);
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the task is dropped. A failed connection is logged and does not stop the server.
    pub async fn serve(self) {
        let Self {
            listener,
            readiness,
            metrics,
            metrics_moved_to,
        } = self;
        accept_each(&listener, "admin server", |stream, peer| {
            let readiness = readiness.clone();
            let metrics = metrics.clone();
            async move {
                let service = service_fn(move |request| {
                    let response = respond(&request, &readiness, &metrics, metrics_moved_to);
                    async move { Ok::<_, Infallible>(response) }
                });
                serve_connection(TokioIo::new(stream), service, "admin server", peer).await;
            }
        })
        .await;
    }
}

fn respond(
    request: &Request<Incoming>,
    readiness: &Readiness,
    metrics: &Metrics,
    moved_to: Option<SocketAddr>,
) -> Response<Full<Bytes>> {
    if let Some(response) = not_get(request).or_else(|| health(request, readiness)) {
        return response;
    }
    match (request.uri().path(), moved_to) {
        ("/metrics", Some(address)) => text(
            StatusCode::NOT_FOUND,
            format!(
                "not here: /metrics is served over HTTPS on port {}, to callers the API server \
                 allows\n",
                address.port()
            ),
        ),
        ("/metrics", None) => metrics_response(metrics),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /healthz, /readyz or /metrics\n",
        ),
    }
}

/// Accepts connections on `listener` until the task is dropped, running `handle` on each in a
/// task of its own. A failed accept is logged (as `server`'s) and does not stop the loop.
pub(crate) async fn accept_each<F, Fut>(listener: &TcpListener, server: &str, handle: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::spawn(handle(stream, peer));
            }
            Err(error) => tracing::warn!(%error, "{server}: accept failed"),
        }
    }
}

/// Serves HTTP/1 on one connection; its end in an error is logged (as `server`'s) at debug.
pub(crate) async fn serve_connection<I, S>(io: I, service: S, server: &str, peer: SocketAddr)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await
    {
        tracing::debug!(%error, %peer, "{server}: connection ended with an error");
    }
}

/// 405 for anything but GET and HEAD.
pub(crate) fn not_get<B>(request: &Request<B>) -> Option<Response<Full<Bytes>>> {
    (request.method() != Method::GET && request.method() != Method::HEAD)
        .then(|| text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served here\n"))
}

/// `/healthz` and `/livez` (alive), `/readyz` (every cache synced); open to anyone.
pub(crate) fn health<B>(
    request: &Request<B>,
    readiness: &Readiness,
) -> Option<Response<Full<Bytes>>> {
    match request.uri().path() {
        "/healthz" | "/livez" => Some(text(StatusCode::OK, "ok\n")),
        "/readyz" if readiness.is_ready() => Some(text(StatusCode::OK, "ok\n")),
        "/readyz" => Some(text(
            StatusCode::SERVICE_UNAVAILABLE,
            "caches are not synced yet\n",
        )),
        _ => None,
    }
}

/// `metrics` in OpenMetrics text.
pub(crate) fn metrics_response(metrics: &Metrics) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(metrics.encode())));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    response
}

/// A plain-text answer.
pub(crate) fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get(address: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response[9..12].parse().unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1.to_owned();
        (status, body)
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics() {
        let readiness = Readiness::default();
        let metrics = Metrics::new();
        metrics.reconciled("X");
        let server = AdminServer::bind("127.0.0.1:0".parse().unwrap(), readiness.clone(), metrics)
            .await
            .unwrap();
        let address = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());

        assert_eq!(get(address, "/healthz").await, (200, "ok\n".into()));
        assert_eq!(get(address, "/readyz").await.0, 503);
        readiness.set(true);
        assert_eq!(get(address, "/readyz").await, (200, "ok\n".into()));
        let (status, body) = get(address, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            body.contains(r#"storage_operator_reconciles_total{controller="X"} 1"#),
            "{body}"
        );
        assert_eq!(get(address, "/nope").await.0, 404);
        task.abort();
    }

    #[tokio::test]
    async fn serves_no_metrics_when_they_are_served_over_https() {
        let metrics = Metrics::new();
        metrics.reconciled("X");
        let server = AdminServer::bind(
            "127.0.0.1:0".parse().unwrap(),
            Readiness::default(),
            metrics,
        )
        .await
        .unwrap()
        .metrics_served_at("0.0.0.0:8443".parse().unwrap());
        let address = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());
        assert_eq!(get(address, "/healthz").await, (200, "ok\n".into()));
        let (status, body) = get(address, "/metrics").await;
        assert_eq!(status, 404);
        assert!(body.contains("HTTPS on port 8443"), "{body}");
        assert!(!body.contains("reconciles"), "{body}");
        task.abort();
    }
}
