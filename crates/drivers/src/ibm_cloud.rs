//! A minimal IBM Cloud client for the IBM VPC Block driver: just enough to find the ID of a
//! resource group by its name, which the driver's `slclient.toml` needs and the cluster's
//! cloud config only names.
//! - [`iam_token`] exchanges an API key for an IAM access token
//!   (`POST {iam}/identity/token`, grant type `urn:ibm:params:oauth:grant-type:apikey`);
//! - [`resource_group_id`] lists the account's resource groups
//!   (`GET {resource manager}/v2/resource_groups?account_id=...`) and picks the one named.
//!
//! The endpoints are IBM Cloud's public ones unless the Infrastructure names others
//! ([`Endpoints::from_infrastructure`]: `status.platformStatus.ibmcloud.serviceEndpoints`,
//! e.g. private endpoints). HTTP is [`crate::http`] with the system roots. Errors name the
//! endpoint and what failed, never the API key or the token.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};
use serde_json::Value;

use crate::http::{HttpClient, percent_encode, send};

/// IBM Cloud's public IAM endpoint.
pub const IAM_ENDPOINT: &str = "https://iam.cloud.ibm.com";
/// IBM Cloud's public Resource Manager endpoint.
pub const RESOURCE_MANAGER_ENDPOINT: &str = "https://resource-controller.cloud.ibm.com";

/// Where the IBM Cloud services are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// IAM (token exchange).
    pub iam: String,
    /// Resource Manager (resource groups).
    pub resource_manager: String,
    /// VPC infrastructure (`g2_riaas_endpoint_url`), when not the region's public one.
    pub vpc: Option<String>,
}

impl Default for Endpoints {
    fn default() -> Self {
        Self {
            iam: IAM_ENDPOINT.to_owned(),
            resource_manager: RESOURCE_MANAGER_ENDPOINT.to_owned(),
            vpc: None,
        }
    }
}

impl Endpoints {
    /// The public endpoints, replaced by the custom ones of `status.platformStatus.ibmcloud.
    /// serviceEndpoints` named `IAM`, `ResourceManager` and `VPC` (names compared without
    /// case; trailing slashes dropped; empty URLs ignored).
    pub fn from_infrastructure(infrastructure: Option<&api::config_v1::Infrastructure>) -> Self {
        let mut endpoints = Self::default();
        let custom = infrastructure
            .and_then(|i| i.status.as_ref())
            .and_then(|s| s.platform_status.as_ref())
            .and_then(|p| p.ibmcloud.as_ref())
            .map(|i| i.service_endpoints.as_slice())
            .unwrap_or_default();
        for endpoint in custom {
            let url = endpoint.url.trim().trim_end_matches('/');
            if url.is_empty() {
                continue;
            }
            match endpoint.name.to_ascii_lowercase().as_str() {
                "iam" => endpoints.iam = url.to_owned(),
                "resourcemanager" => endpoints.resource_manager = url.to_owned(),
                "vpc" => endpoints.vpc = Some(url.to_owned()),
                _ => {}
            }
        }
        endpoints
    }

    /// The VPC endpoint of `region`: the custom one, else `https://{region}.iaas.cloud.ibm.com`.
    pub fn vpc_for(&self, region: &str) -> String {
        self.vpc
            .clone()
            .unwrap_or_else(|| format!("https://{region}.iaas.cloud.ibm.com"))
    }
}

/// The token endpoint of IAM at `iam`.
pub fn token_url(iam: &str) -> String {
    format!("{}/identity/token", iam.trim_end_matches('/'))
}

/// The resource groups URL of the account at `resource_manager`.
pub fn resource_groups_url(resource_manager: &str, account_id: &str) -> String {
    format!(
        "{}/v2/resource_groups?account_id={}",
        resource_manager.trim_end_matches('/'),
        percent_encode(account_id)
    )
}

/// The ID of the group named `name` in a resource groups response; an error says what the
/// response lacks.
pub fn group_id(body: &Value, name: &str) -> Result<String, String> {
    let groups = body
        .get("resources")
        .and_then(Value::as_array)
        .ok_or("the resource groups response has no resources list")?;
    groups
        .iter()
        .find(|g| g.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|g| g.get("id").and_then(Value::as_str))
        .map(str::to_owned)
        .ok_or_else(|| {
            let known: Vec<&str> = groups
                .iter()
                .filter_map(|g| g.get("name").and_then(Value::as_str))
                .collect();
            format!(
                "the account has no resource group named {name:?} (it has: {}); check g2ResourceGroupName of the cloud config",
                known.join(", ")
            )
        })
}

/// The form body (`application/x-www-form-urlencoded`) that asks IAM for a token for `api_key`.
fn iam_token_form(api_key: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "urn:ibm:params:oauth:grant-type:apikey")
        .append_pair("apikey", api_key)
        .finish()
}

/// Exchanges `api_key` for an IAM access token at `iam`.
pub async fn iam_token(client: &HttpClient, iam: &str, api_key: &str) -> Result<String, String> {
    let url = token_url(iam);
    let body = iam_token_form(api_key);
    let request = Request::builder()
        .method(Method::POST)
        .uri(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("the IAM endpoint {url:?} is not a valid URL: {e}"))?;
    let what = format!("getting an IAM token at {url}");
    let response = send(client, request, &what).await?;
    match response.status {
        s if s.is_success() => {}
        StatusCode::BAD_REQUEST | StatusCode::UNAUTHORIZED => {
            let detail = response
                .body
                .get("errorMessage")
                .and_then(Value::as_str)
                .unwrap_or("no detail");
            return Err(format!(
                "IAM at {url} rejected the API key (HTTP {}: {detail}): check key ibmcloud_api_key of the credentials Secret",
                response.status.as_u16()
            ));
        }
        s => return Err(format!("{what} failed with HTTP {s}")),
    }
    response
        .body
        .get("access_token")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("IAM at {url} answered without an access_token"))
}

/// The ID of the resource group `name` of account `account_id`, asked at `endpoints` with
/// `api_key`.
pub async fn resource_group_id(
    client: &HttpClient,
    endpoints: &Endpoints,
    api_key: &str,
    account_id: &str,
    name: &str,
) -> Result<String, String> {
    let token = iam_token(client, &endpoints.iam, api_key).await?;
    let url = resource_groups_url(&endpoints.resource_manager, account_id);
    let request = Request::builder()
        .method(Method::GET)
        .uri(&url)
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json")
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("the Resource Manager endpoint {url:?} is not a valid URL: {e}"))?;
    let what = format!("listing the resource groups at {url}");
    let response = send(client, request, &what).await?;
    if !response.status.is_success() {
        return Err(format!("{what} failed with HTTP {}", response.status));
    }
    group_id(&response.body, name).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn urls_join_without_double_slashes() {
        assert_eq!(
            token_url("https://iam.example.com/"),
            "https://iam.example.com/identity/token"
        );
        assert_eq!(
            resource_groups_url("https://rm.example.com/", "abc 1"),
            "https://rm.example.com/v2/resource_groups?account_id=abc%201"
        );
    }

    /// The form IAM reads: the grant type as before, byte for byte, and any key read back as
    /// it was. The hand-written encoder this replaced wrote a space as `%20`, `~` as it is and
    /// `*` as `%2A`; the form serializer writes `+`, `%7E` and `*`, which a form reader decodes
    /// the same.
    #[test]
    fn the_token_form_names_the_grant_type_and_carries_any_key() {
        assert_eq!(
            iam_token_form("k3y_-."),
            "grant_type=urn%3Aibm%3Aparams%3Aoauth%3Agrant-type%3Aapikey&apikey=k3y_-."
        );
        let key = "a b~c*d&e=f+g/é%";
        let form = iam_token_form(key);
        let read: Vec<(String, String)> = form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        assert_eq!(
            read,
            [
                (
                    "grant_type".to_owned(),
                    "urn:ibm:params:oauth:grant-type:apikey".to_owned()
                ),
                ("apikey".to_owned(), key.to_owned()),
            ]
        );
    }

    #[test]
    fn the_group_is_found_by_name_or_the_known_ones_are_listed() {
        let body = json!({"resources": [
            {"id": "1111", "name": "default"},
            {"id": "2222", "name": "ocp-abc"},
        ]});
        assert_eq!(group_id(&body, "ocp-abc").unwrap(), "2222");
        let error = group_id(&body, "other").unwrap_err();
        assert!(
            error.contains("\"other\"") && error.contains("default, ocp-abc"),
            "{error}"
        );
        assert!(group_id(&json!({}), "x").is_err());
    }

    #[test]
    fn endpoints_default_to_the_public_ones() {
        let endpoints = Endpoints::from_infrastructure(None);
        assert_eq!(endpoints, Endpoints::default());
        assert_eq!(
            endpoints.vpc_for("eu-de"),
            "https://eu-de.iaas.cloud.ibm.com"
        );
    }

    #[test]
    fn custom_endpoints_replace_the_public_ones() {
        let infrastructure: api::config_v1::Infrastructure = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "Infrastructure",
            "metadata": {"name": "cluster"},
            "spec": {},
            "status": {"platformStatus": {"type": "IBMCloud", "ibmcloud": {"serviceEndpoints": [
                {"name": "IAM", "url": "https://private.iam.cloud.ibm.com/"},
                {"name": "VPC", "url": "https://eu-de.private.iaas.cloud.ibm.com"},
                {"name": "ResourceManager", "url": "https://private.resource-controller.cloud.ibm.com"},
                {"name": "COS", "url": "https://cos.example.com"},
                {"name": "IAM", "url": ""},
            ]}}}
        }))
        .unwrap();
        let endpoints = Endpoints::from_infrastructure(Some(&infrastructure));
        assert_eq!(endpoints.iam, "https://private.iam.cloud.ibm.com");
        assert_eq!(
            endpoints.resource_manager,
            "https://private.resource-controller.cloud.ibm.com"
        );
        assert_eq!(
            endpoints.vpc_for("eu-de"),
            "https://eu-de.private.iaas.cloud.ibm.com"
        );
    }
}
