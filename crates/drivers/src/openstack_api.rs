//! A minimal OpenStack client for the Manila driver: just enough to ask a cloud which Manila
//! share types it offers.
//! - [`parse_cloud`] reads one cloud of a `clouds.yaml` (as cloud-credential-operator writes
//!   it: password or application-credential auth, `region_name`, `interface`, `cacert`,
//!   `verify`);
//! - [`auth_request`] maps it to a Keystone v3 `POST /v3/auth/tokens` body;
//! - [`list_share_types`] authenticates, finds the `sharev2` endpoint in the token's service
//!   catalog and lists `GET {endpoint}/types`.
//!
//! HTTP is [`crate::http`]: the system roots plus an optional CA PEM, or no verification at
//! all when `clouds.yaml` says `verify: false` (logged as a warning). Every request has a
//! [`REQUEST_TIMEOUT`]. Every error names what failed and never carries a password, secret or
//! token.

use std::collections::BTreeMap;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{HttpClient, send};
pub use crate::http::{REQUEST_TIMEOUT, Tls, http_client};

/// The Manila microversion asked for: the base of API v2, which every Manila has.
pub const MANILA_API_VERSION: &str = "2.0";
/// The catalog service types of Manila's v2 API, in order of preference.
pub const SHAREV2_TYPES: [&str; 2] = ["sharev2", "shared-file-system"];

/// `clouds.yaml`: the clouds by name.
#[derive(Debug, Deserialize)]
struct CloudsYaml {
    #[serde(default)]
    clouds: BTreeMap<String, Cloud>,
}

/// One cloud of a `clouds.yaml`: the fields this client uses (others are ignored).
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Cloud {
    /// How to authenticate.
    #[serde(default)]
    pub auth: Auth,
    /// `password`, `v3password`, `v3applicationcredential`...; inferred when unset.
    #[serde(default)]
    pub auth_type: Option<String>,
    /// The region whose endpoints are used; any when unset.
    #[serde(default)]
    pub region_name: Option<String>,
    /// The endpoint interface (`public`, `internal`, `admin`); `public` when unset.
    #[serde(default)]
    pub interface: Option<String>,
    /// A CA file path the cloud's tools read (the file itself is not in `clouds.yaml`).
    #[serde(default)]
    pub cacert: Option<String>,
    /// TLS verification; `false` turns it off.
    #[serde(default)]
    pub verify: Option<bool>,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No credentials in logs, ever.
        f.debug_struct("Cloud")
            .field("auth_url", &self.auth.auth_url)
            .field("region_name", &self.region_name)
            .field("interface", &self.interface)
            .finish_non_exhaustive()
    }
}

/// The `auth` section of a cloud.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Auth {
    /// Keystone's URL, with or without the `/v3` suffix.
    #[serde(default)]
    pub auth_url: String,
    /// The user's name.
    #[serde(default)]
    pub username: Option<String>,
    /// The user's ID.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The user's password.
    #[serde(default)]
    pub password: Option<String>,
    /// The project's name.
    #[serde(default, alias = "tenant_name")]
    pub project_name: Option<String>,
    /// The project's ID.
    #[serde(default, alias = "tenant_id")]
    pub project_id: Option<String>,
    /// The domain of both user and project, by name, when they have none of their own.
    #[serde(default)]
    pub domain_name: Option<String>,
    /// The domain of both user and project, by ID.
    #[serde(default)]
    pub domain_id: Option<String>,
    /// The user's domain, by name.
    #[serde(default)]
    pub user_domain_name: Option<String>,
    /// The user's domain, by ID.
    #[serde(default)]
    pub user_domain_id: Option<String>,
    /// The project's domain, by name.
    #[serde(default)]
    pub project_domain_name: Option<String>,
    /// The project's domain, by ID.
    #[serde(default)]
    pub project_domain_id: Option<String>,
    /// An application credential's ID.
    #[serde(default)]
    pub application_credential_id: Option<String>,
    /// An application credential's name (with the user that owns it).
    #[serde(default)]
    pub application_credential_name: Option<String>,
    /// An application credential's secret.
    #[serde(default)]
    pub application_credential_secret: Option<String>,
}

fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl Auth {
    /// Whether this is application-credential auth.
    pub fn is_application_credential(&self, auth_type: Option<&str>) -> bool {
        match auth_type {
            Some(t) => t.contains("applicationcredential"),
            None => {
                set(&self.application_credential_id).is_some()
                    || set(&self.application_credential_secret).is_some()
            }
        }
    }
}

/// The first line of a parser error with quoted text removed: the parser quotes the
/// source (a snippet of the line, the offending value), which may be a password.
fn redacted(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default();
    let mut out = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                out.push('…');
                out.push(c);
            }
            Some(_) => {}
            None if matches!(c, '"' | '`' | '\'') => {
                quote = Some(c);
                out.push(c);
            }
            None => out.push(c),
        }
    }
    if quote.is_some() {
        out.push('…');
    }
    out
}

/// Reads cloud `name` of a `clouds.yaml` text; an error names the field to fix.
pub fn parse_cloud(text: &str, name: &str) -> Result<Cloud, String> {
    let file: CloudsYaml = serde_saphyr::from_str(text).map_err(|e| {
        format!(
            "clouds.yaml does not parse as YAML: {}",
            redacted(&e.to_string())
        )
    })?;
    let cloud = file.clouds.get(name).cloned().ok_or_else(|| {
        format!(
            "clouds.yaml has no cloud {name:?} (it has: {}): the cloud must be under clouds.{name}",
            file.clouds.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    if cloud.auth.auth_url.trim().is_empty() {
        return Err(format!(
            "clouds.{name}.auth.auth_url is missing in clouds.yaml"
        ));
    }
    let url = cloud.auth.auth_url.trim();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(format!(
            "clouds.{name}.auth.auth_url {url:?} is not an http(s) URL"
        ));
    }
    Ok(cloud)
}

/// Keystone's token URL for `auth_url`: `/v3` is added unless the URL ends with it.
pub fn token_url(auth_url: &str) -> String {
    let base = auth_url.trim().trim_end_matches('/');
    if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    }
}

/// A domain reference by ID or name, the first pair that is set.
fn domain(pairs: &[(&Option<String>, &Option<String>)]) -> Option<Value> {
    pairs.iter().find_map(|(id, name)| {
        set(id)
            .map(|id| json!({"id": id}))
            .or_else(|| set(name).map(|name| json!({"name": name})))
    })
}

/// The user of password (or named application-credential) auth; an error names the field.
fn user(auth: &Auth) -> Result<Value, String> {
    if let Some(id) = set(&auth.user_id) {
        return Ok(json!({"id": id}));
    }
    let Some(name) = set(&auth.username) else {
        return Err("auth.username (or auth.user_id) is missing in clouds.yaml".to_owned());
    };
    let Some(domain) = domain(&[
        (&auth.user_domain_id, &auth.user_domain_name),
        (&auth.domain_id, &auth.domain_name),
    ]) else {
        return Err(
            "auth.user_domain_name (or user_domain_id, domain_name, domain_id) is missing in clouds.yaml: a user given by name needs its domain"
                .to_owned(),
        );
    };
    Ok(json!({"name": name, "domain": domain}))
}

/// The Keystone v3 `POST /auth/tokens` body for `cloud`: application credentials when the
/// cloud has them, else password auth scoped to the project (if one is given). An error
/// names the missing `clouds.yaml` field.
pub fn auth_request(cloud: &Cloud) -> Result<Value, String> {
    let auth = &cloud.auth;
    if auth.is_application_credential(cloud.auth_type.as_deref()) {
        let Some(secret) = set(&auth.application_credential_secret) else {
            return Err("auth.application_credential_secret is missing in clouds.yaml".to_owned());
        };
        let credential = if let Some(id) = set(&auth.application_credential_id) {
            json!({"id": id, "secret": secret})
        } else if let Some(name) = set(&auth.application_credential_name) {
            json!({"name": name, "secret": secret, "user": user(auth)?})
        } else {
            return Err(
                "auth.application_credential_id (or application_credential_name) is missing in clouds.yaml"
                    .to_owned(),
            );
        };
        return Ok(json!({"auth": {"identity": {
            "methods": ["application_credential"],
            "application_credential": credential,
        }}}));
    }
    let Some(password) = set(&auth.password) else {
        return Err("auth.password is missing in clouds.yaml".to_owned());
    };
    let mut user = user(auth)?;
    user["password"] = json!(password);
    let mut body = json!({"auth": {"identity": {
        "methods": ["password"],
        "password": {"user": user},
    }}});
    let project = if let Some(id) = set(&auth.project_id) {
        Some(json!({"id": id}))
    } else if let Some(name) = set(&auth.project_name) {
        let Some(domain) = domain(&[
            (&auth.project_domain_id, &auth.project_domain_name),
            (&auth.domain_id, &auth.domain_name),
        ]) else {
            return Err(
                "auth.project_domain_name (or project_domain_id, domain_name, domain_id) is missing in clouds.yaml: a project given by name needs its domain"
                    .to_owned(),
            );
        };
        Some(json!({"name": name, "domain": domain}))
    } else {
        None
    };
    if let Some(project) = project {
        body["auth"]["scope"] = json!({"project": project});
    }
    Ok(body)
}

/// One service of a Keystone v3 catalog.
#[derive(Debug, Deserialize)]
struct Service {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
}

#[derive(Debug, Deserialize)]
struct Endpoint {
    #[serde(default)]
    interface: String,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    region_id: Option<String>,
    #[serde(default)]
    url: String,
}

/// The interface asked for: `public` unless the cloud says otherwise (`publicURL` style too).
fn interface(cloud: &Cloud) -> String {
    set(&cloud.interface)
        .unwrap_or("public")
        .trim_end_matches("URL")
        .to_ascii_lowercase()
}

/// The Manila v2 endpoint in a token response's body (`token.catalog`): the first service of
/// [`SHAREV2_TYPES`] with an endpoint on the cloud's interface, in its region when it has
/// one. An error says what the catalog lacks.
pub fn sharev2_endpoint(body: &Value, cloud: &Cloud) -> Result<String, String> {
    let catalog: Vec<Service> = body
        .pointer("/token/catalog")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| format!("the token's service catalog does not parse: {e}"))?
        .unwrap_or_default();
    let interface = interface(cloud);
    let region = set(&cloud.region_name);
    let mut seen = Vec::new();
    for kind in SHAREV2_TYPES {
        for service in catalog.iter().filter(|s| s.kind == kind) {
            for endpoint in &service.endpoints {
                seen.push(format!(
                    "{} in {}",
                    endpoint.interface,
                    endpoint
                        .region_id
                        .as_deref()
                        .or(endpoint.region.as_deref())
                        .unwrap_or("no region")
                ));
                let in_region = region.is_none_or(|r| {
                    endpoint.region_id.as_deref() == Some(r)
                        || endpoint.region.as_deref() == Some(r)
                });
                if endpoint.interface == interface && in_region && !endpoint.url.is_empty() {
                    return Ok(endpoint.url.trim_end_matches('/').to_owned());
                }
            }
        }
    }
    let wanted = match region {
        Some(r) => format!("interface {interface} in region {r}"),
        None => format!("interface {interface}"),
    };
    if seen.is_empty() {
        Err("the service catalog has no Manila endpoint (service type sharev2): the cloud has no Manila service, or this user cannot see it".to_owned())
    } else {
        Err(format!(
            "the service catalog has no Manila (sharev2) endpoint on {wanted}; it has: {}",
            seen.join(", ")
        ))
    }
}

/// The names of a Manila `GET /types` response (`share_types[].name`).
pub fn share_type_names(body: &Value) -> Result<Vec<String>, String> {
    let Some(types) = body.get("share_types").and_then(Value::as_array) else {
        return Err("the Manila share types response has no share_types list".to_owned());
    };
    Ok(types
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect())
}

/// Authenticates against Keystone: the token and the token response's body (the catalog).
pub async fn authenticate(client: &HttpClient, cloud: &Cloud) -> Result<(String, Value), String> {
    let url = token_url(&cloud.auth.auth_url);
    let body = auth_request(cloud)?;
    let request = Request::builder()
        .method(Method::POST)
        .uri(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| format!("auth_url {url:?} is not a valid URL: {e}"))?;
    let what = format!("authenticating at Keystone {url}");
    let response = send(client, request, &what).await?;
    match response.status {
        s if s.is_success() => {}
        StatusCode::UNAUTHORIZED => {
            return Err(format!(
                "Keystone at {url} rejected the credentials of clouds.yaml (HTTP 401): check the user, password or application credential and the project"
            ));
        }
        s => return Err(format!("{what} failed with HTTP {s}")),
    }
    let token = response
        .header("x-subject-token")
        .map(str::to_owned)
        .ok_or_else(|| format!("Keystone at {url} answered without an X-Subject-Token header"))?;
    Ok((token, response.body))
}

/// The names of the cloud's Manila share types.
pub async fn list_share_types(cloud: &Cloud, tls: &Tls) -> Result<Vec<String>, String> {
    if *tls == Tls::Insecure {
        tracing::warn!(auth_url = %cloud.auth.auth_url, "clouds.yaml says verify: false: the cloud's TLS certificates are not checked");
    }
    let client = http_client(tls)?;
    let (token, body) = authenticate(&client, cloud).await?;
    let endpoint = sharev2_endpoint(&body, cloud)?;
    let url = format!("{endpoint}/types");
    let request = Request::builder()
        .method(Method::GET)
        .uri(&url)
        .header("x-auth-token", token)
        .header("x-openstack-manila-api-version", MANILA_API_VERSION)
        .header("accept", "application/json")
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("the Manila endpoint {url:?} is not a valid URL: {e}"))?;
    let what = format!("listing the share types at {url}");
    let response = send(&client, request, &what).await?;
    if !response.status.is_success() {
        return Err(format!("{what} failed with HTTP {}", response.status));
    }
    share_type_names(&response.body).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const PASSWORD: &str = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example.com:13000\n      username: alice\n      password: s3cret\n      project_name: shift\n      project_domain_name: Default\n      user_domain_name: Users\n    region_name: regionOne\n    cacert: /etc/ca.pem\n";

    #[test]
    fn password_auth_is_scoped_to_the_project() {
        let cloud = parse_cloud(PASSWORD, "openstack").unwrap();
        assert_eq!(
            auth_request(&cloud).unwrap(),
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": {
                    "name": "alice", "domain": {"name": "Users"}, "password": "s3cret"}}},
                "scope": {"project": {"name": "shift", "domain": {"name": "Default"}}},
            }})
        );
    }

    #[test]
    fn ids_win_over_names_and_domain_is_the_fallback() {
        let text = "clouds:\n  openstack:\n    auth:\n      auth_url: https://k/v3/\n      user_id: u1\n      password: p\n      project_id: p1\n      username: ignored\n";
        let cloud = parse_cloud(text, "openstack").unwrap();
        let body = auth_request(&cloud).unwrap();
        assert_eq!(
            body["auth"]["identity"]["password"]["user"],
            json!({"id": "u1", "password": "p"})
        );
        assert_eq!(body["auth"]["scope"], json!({"project": {"id": "p1"}}));
        assert_eq!(token_url(&cloud.auth.auth_url), "https://k/v3/auth/tokens");

        let text = "clouds:\n  openstack:\n    auth:\n      auth_url: https://k\n      username: bob\n      password: p\n      project_name: pr\n      domain_id: d1\n";
        let body = auth_request(&parse_cloud(text, "openstack").unwrap()).unwrap();
        assert_eq!(
            body["auth"]["identity"]["password"]["user"]["domain"],
            json!({"id": "d1"})
        );
        assert_eq!(
            body["auth"]["scope"]["project"]["domain"],
            json!({"id": "d1"})
        );
        assert_eq!(token_url("https://k"), "https://k/v3/auth/tokens");
    }

    #[test]
    fn application_credentials_are_unscoped() {
        let text = "clouds:\n  openstack:\n    auth:\n      auth_url: https://k\n      application_credential_id: ac1\n      application_credential_secret: shh\n    auth_type: v3applicationcredential\n";
        let body = auth_request(&parse_cloud(text, "openstack").unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"auth": {"identity": {"methods": ["application_credential"],
                "application_credential": {"id": "ac1", "secret": "shh"}}}})
        );
    }

    #[test]
    fn missing_fields_are_named() {
        let cases = [
            ("clouds: {}\n", "no cloud \"openstack\""),
            (
                "clouds:\n  openstack:\n    auth: {}\n",
                "auth.auth_url is missing",
            ),
            (
                "clouds:\n  openstack:\n    auth: {auth_url: ftp://x}\n",
                "not an http(s) URL",
            ),
        ];
        for (text, expected) in cases {
            let error = parse_cloud(text, "openstack").unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
        let cases = [
            (
                "auth: {auth_url: https://k, username: a}",
                "auth.password is missing",
            ),
            (
                "auth: {auth_url: https://k, password: p}",
                "auth.username (or auth.user_id)",
            ),
            (
                "auth: {auth_url: https://k, username: a, password: p}",
                "auth.user_domain_name",
            ),
            (
                "auth: {auth_url: https://k, user_id: a, password: p, project_name: x}",
                "auth.project_domain_name",
            ),
            (
                "auth: {auth_url: https://k, application_credential_id: a}",
                "application_credential_secret is missing",
            ),
            (
                "auth: {auth_url: https://k, application_credential_secret: a}",
                "application_credential_id (or",
            ),
        ];
        for (cloud, expected) in cases {
            let text = format!("clouds:\n  openstack: {{{cloud}}}\n");
            let cloud = parse_cloud(&text, "openstack").unwrap();
            let error = auth_request(&cloud).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn yaml_errors_do_not_quote_the_credentials() {
        for text in [
            "clouds:\n  openstack:\n    auth:\n      password: [s3cret-value\n",
            "clouds:\n  openstack:\n    auth:\n      password: {a: s3cret-value}\n",
            "clouds:\n  openstack:\n    verify: s3cret-value\n",
        ] {
            let error = parse_cloud(text, "openstack").unwrap_err();
            assert!(!error.contains("s3cret"), "{error}");
            assert!(error.contains("line"), "{error}");
        }
    }

    #[test]
    fn debug_output_hides_credentials() {
        let cloud = parse_cloud(PASSWORD, "openstack").unwrap();
        let shown = format!("{cloud:?}");
        assert!(shown.contains("keystone.example.com"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    fn catalog(endpoints: Value) -> Value {
        json!({"token": {"catalog": [
            {"type": "identity", "endpoints": [{"interface": "public", "region_id": "r1", "url": "https://k"}]},
            {"type": "sharev2", "endpoints": endpoints},
        ]}})
    }

    #[test]
    fn endpoint_by_interface_and_region() {
        let body = catalog(json!([
            {"interface": "internal", "region_id": "r1", "url": "https://internal-r1/v2"},
            {"interface": "public", "region_id": "r1", "url": "https://public-r1/v2/"},
            {"interface": "public", "region_id": "r2", "url": "https://public-r2/v2"},
        ]));
        let mut cloud = Cloud::default();
        assert_eq!(
            sharev2_endpoint(&body, &cloud).unwrap(),
            "https://public-r1/v2"
        );
        cloud.region_name = Some("r2".into());
        assert_eq!(
            sharev2_endpoint(&body, &cloud).unwrap(),
            "https://public-r2/v2"
        );
        cloud.region_name = Some("r1".into());
        cloud.interface = Some("internalURL".into());
        assert_eq!(
            sharev2_endpoint(&body, &cloud).unwrap(),
            "https://internal-r1/v2"
        );
        cloud.region_name = Some("r3".into());
        let error = sharev2_endpoint(&body, &cloud).unwrap_err();
        assert!(error.contains("interface internal in region r3"), "{error}");
        assert!(error.contains("public in r2"), "{error}");
        let error = sharev2_endpoint(&json!({"token": {"catalog": []}}), &cloud).unwrap_err();
        assert!(error.contains("no Manila endpoint"), "{error}");
    }

    #[test]
    fn share_type_names_from_the_response() {
        let body =
            json!({"share_types": [{"id": "1", "name": "default"}, {"id": "2", "name": "gold"}]});
        assert_eq!(share_type_names(&body).unwrap(), ["default", "gold"]);
        assert!(share_type_names(&json!({})).is_err());
    }

    #[test]
    fn a_bad_ca_bundle_is_named() {
        let error = http_client(&Tls::WithCa("not a pem".into())).unwrap_err();
        assert!(error.contains("no PEM certificate"), "{error}");
        assert!(http_client(&Tls::Insecure).is_ok());
    }
}
