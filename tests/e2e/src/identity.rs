//! The identities the operators under test run as: a ServiceAccount's TokenRequest token, on a
//! client that records every request the API server refuses with 403.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::client::{Body, ClientBuilder};
use kube::config::AuthInfo;
use kube::{Api, Client};

/// Every refusal of the process, for [`crate::wait_for`]'s time-out message.
static REFUSALS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Every request refused with 403 so far, by any identity, as one line each.
pub fn all_refusals() -> Vec<String> {
    collapse(&REFUSALS.lock().unwrap_or_else(PoisonError::into_inner))
}

/// One line per distinct refusal, with how often it happened.
fn collapse(lines: &[String]) -> Vec<String> {
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for line in lines {
        *counts.entry(line).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(line, n)| {
            if n == 1 {
                line.to_owned()
            } else {
                format!("{line} ({n} times)")
            }
        })
        .collect()
}

/// An operator's identity on the e2e cluster: a client authenticated as a ServiceAccount.
#[derive(Clone)]
pub struct Identity {
    /// The client the operator under test is given.
    pub client: Client,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    refused: Arc<Mutex<Vec<String>>>,
}

impl Identity {
    /// A client for ServiceAccount `namespace/name` (which must exist), authenticated with a
    /// fresh TokenRequest token that the admin asks for.
    pub async fn service_account(admin: &Client, namespace: &str, name: &str) -> Self {
        let config = crate::cluster::admin_config()
            .await
            .unwrap_or_else(|m| panic!("{m}"));
        Self::service_account_of(config, admin, namespace, name).await
    }

    /// [`Identity::service_account`] on the guest cluster of the hosted control plane tests.
    pub async fn guest_service_account(admin: &Client, namespace: &str, name: &str) -> Self {
        let config = crate::cluster::guest_admin_config()
            .await
            .unwrap_or_else(|m| panic!("{m}"));
        Self::service_account_of(config, admin, namespace, name).await
    }

    /// [`Identity::service_account`] through `link` (a [`crate::link::Link`] to the cluster's
    /// API server), which the test can cut.
    pub async fn service_account_via(
        admin: &Client,
        namespace: &str,
        name: &str,
        link: &crate::link::Link,
    ) -> Self {
        let mut config = crate::cluster::admin_config()
            .await
            .unwrap_or_else(|m| panic!("{m}"));
        config.cluster_url = link.url();
        Self::service_account_of(config, admin, namespace, name).await
    }

    /// [`Identity::guest_service_account`] through `link`.
    pub async fn guest_service_account_via(
        admin: &Client,
        namespace: &str,
        name: &str,
        link: &crate::link::Link,
    ) -> Self {
        let mut config = crate::cluster::guest_admin_config()
            .await
            .unwrap_or_else(|m| panic!("{m}"));
        config.cluster_url = link.url();
        Self::service_account_of(config, admin, namespace, name).await
    }

    /// A client for ServiceAccount `namespace/name` of the cluster `config` (an admin's) and
    /// `admin` reach.
    async fn service_account_of(
        mut config: kube::Config,
        admin: &Client,
        namespace: &str,
        name: &str,
    ) -> Self {
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let token = service_account_token(admin, namespace, name, 3600).await;
        config.auth_info = AuthInfo {
            token: Some(token.into()),
            ..Default::default()
        };
        let refused = Arc::new(Mutex::new(Vec::new()));
        let layer = RecordRefusals {
            user: user.clone(),
            refused: refused.clone(),
        };
        let client = ClientBuilder::try_from(config)
            .unwrap_or_else(|e| panic!("building a client for {user}: {e}"))
            .with_layer(&layer)
            .build();
        Self {
            client,
            user,
            refused,
        }
    }

    /// The requests the API server refused this identity, one line each.
    pub fn refusals(&self) -> Vec<String> {
        collapse(&self.refused.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Fails the test naming every request refused to this identity: the RBAC we ship is not
    /// enough for what the operator does.
    pub fn assert_never_refused(&self) {
        let refused = self.refusals();
        assert!(
            refused.is_empty(),
            "the API server refused {} requests; the RBAC shipped for it is not enough:\n{}",
            self.user,
            refused.join("\n")
        );
    }
}

/// A TokenRequest token for ServiceAccount `namespace/name` (which must exist), valid for
/// `seconds`, as the admin asks for it.
pub async fn service_account_token(
    admin: &Client,
    namespace: &str,
    name: &str,
    seconds: i64,
) -> String {
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(seconds),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("requesting a token for {user}: {e}"))
        .status
        .unwrap_or_else(|| panic!("the token request for {user} has no status"))
        .token
        .unwrap_or_else(|| panic!("the token request for {user} returned no token"))
}

/// A tower layer recording each 403 answer with the request's verb and path.
#[derive(Clone)]
struct RecordRefusals {
    user: String,
    refused: Arc<Mutex<Vec<String>>>,
}

impl<S> tower::Layer<S> for RecordRefusals {
    type Service = Recorder<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Recorder {
            inner,
            record: self.clone(),
        }
    }
}

#[derive(Clone)]
struct Recorder<S> {
    inner: S,
    record: RecordRefusals,
}

type Response<S> = <S as tower::Service<http::Request<Body>>>::Response;
type Error<S> = <S as tower::Service<http::Request<Body>>>::Error;

impl<S, B> tower::Service<http::Request<Body>> for Recorder<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = Response<S>;
    type Error = Error<S>;
    type Future = Pin<Box<dyn Future<Output = Result<Response<S>, Error<S>>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        // kube names its verb in the request's extensions ("list", "watch", "patch", ...).
        let verb = request
            .extensions()
            .get::<&'static str>()
            .copied()
            .unwrap_or_else(|| request.method().as_str())
            .to_owned();
        let path = request
            .uri()
            .path_and_query()
            .map_or_else(|| request.uri().to_string(), ToString::to_string);
        let record = self.record.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            if response.status() == http::StatusCode::FORBIDDEN {
                let line = format!("{}: {verb} {path} was forbidden", record.user);
                record
                    .refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line.clone());
                REFUSALS
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
            Ok(response)
        })
    }
}
