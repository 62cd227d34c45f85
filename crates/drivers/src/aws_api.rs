//! The few AWS calls of the EBS volume tags controller ([`crate::aws_ebs_tags`]), on
//! [`crate::http`], without an SDK: STS `AssumeRoleWithWebIdentity` (unsigned) for temporary
//! credentials, and EC2 `DescribeTags` and `CreateTags`, Query API calls (a form POST) signed
//! with AWS Signature Version 4 ([`authorization`]), answered in XML. Also what feeds them: the
//! web identity of a credentials file (`role_arn`, `web_identity_token_file` of its
//! `[default]` section) and the expiry of the token (its JWT `exp`).
//!
//! An answer's error is AWS's own code and message ([`AwsError::Service`]), e.g.
//! `InvalidVolume.NotFound`, which the caller tells apart.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use k8s_openapi::jiff::Timestamp;
use ring::{digest, hmac};

use crate::http::{HttpClient, percent_encode, send_raw};

/// The EC2 API version of the calls.
pub const EC2_API_VERSION: &str = "2016-11-15";
/// The STS API version of the calls.
pub const STS_API_VERSION: &str = "2011-06-15";
/// The content type of a Query API body.
pub const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";
/// The most pages of one `DescribeTags` read (50 volumes with at most 50 tags each fill three
/// pages of 1,000): a service that keeps answering with a next page is an error.
const MAX_PAGES: usize = 100;

/// AWS credentials: an access key, and a session token when they are temporary (STS's).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key ID.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token of temporary credentials (sent as `X-Amz-Security-Token`).
    pub session_token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Why an AWS call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AwsError {
    /// The service answered with an error: its code (`InvalidVolume.NotFound`), message and
    /// HTTP status.
    Service {
        /// AWS's error code.
        code: String,
        /// AWS's message.
        message: String,
        /// The HTTP status.
        status: u16,
    },
    /// No usable answer: the request failed, or the answer was not understood.
    Transport(String),
}

impl AwsError {
    /// AWS's error code, when the service answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Service { code, .. } => Some(code),
            Self::Transport(_) => None,
        }
    }
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Service { code, message, .. } => write!(f, "{code}: {message}"),
            Self::Transport(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for AwsError {}

/// The lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The lowercase hex SHA-256 of `data`.
pub fn hex_sha256(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &str) -> hmac::Tag {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
}

/// What Signature Version 4 signs of a request.
#[derive(Clone, Copy, Debug)]
pub struct Signed<'a> {
    /// The HTTP method.
    pub method: &'a str,
    /// The URI path, already URI-encoded (`/`).
    pub path: &'a str,
    /// The canonical query string (parameters sorted, values URI-encoded), empty if none.
    pub query: &'a str,
    /// The signed headers (name, value); `host` and `x-amz-date` among them.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub payload: &'a [u8],
}

/// The canonical request of `request` and its signed headers (`content-type;host;x-amz-date`).
pub fn canonical_request(request: &Signed<'_>) -> (String, String) {
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|(name, value)| {
            let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
            (name.to_ascii_lowercase(), value)
        })
        .collect();
    headers.sort();
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{value}\n"))
        .collect();
    let signed_headers = headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        request.method,
        request.path,
        request.query,
        hex_sha256(request.payload)
    );
    (canonical, signed_headers)
}

/// The `Authorization` header of `request` signed with `credentials` at `amz_date`
/// (`20150830T123600Z`) for `region` and `service` (AWS Signature Version 4, HMAC-SHA256).
pub fn authorization(
    credentials: &Credentials,
    amz_date: &str,
    region: &str,
    service: &str,
    request: &Signed<'_>,
) -> String {
    let date = amz_date.get(..8).unwrap_or(amz_date);
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let (canonical, signed_headers) = canonical_request(request);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex_sha256(canonical.as_bytes())
    );
    let key = format!("AWS4{}", credentials.secret_access_key);
    let k_date = hmac_sha256(key.as_bytes(), date);
    let k_region = hmac_sha256(k_date.as_ref(), region);
    let k_service = hmac_sha256(k_region.as_ref(), service);
    let k_signing = hmac_sha256(k_service.as_ref(), "aws4_request");
    let signature = hex(hmac_sha256(k_signing.as_ref(), &to_sign).as_ref());
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    )
}

/// `now` as Signature Version 4 dates it (`20150830T123600Z`).
pub fn amz_date(now: Timestamp) -> String {
    now.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// Where a service is reached: its URL, and the `Host` and path that are signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    uri: hyper::Uri,
    host: String,
    path: String,
}

impl Endpoint {
    /// The endpoint of `url` (`https://ec2.example.com`); an error says why it is unusable.
    pub fn parse(url: &str) -> Result<Self, String> {
        let uri: hyper::Uri = url
            .trim()
            .parse()
            .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(uri.scheme_str(), Some("https" | "http")) {
            return Err(format!("{url:?} is not an http(s) URL"));
        }
        let host = uri
            .authority()
            .map(|a| a.as_str().rsplit('@').next().unwrap_or_default().to_owned())
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("{url:?} has no host"))?;
        let path = match uri.path() {
            "" => "/".to_owned(),
            path => path.to_owned(),
        };
        Ok(Self { uri, host, path })
    }

    /// AWS's endpoint of `service` (`ec2`, `sts`) in `region`: `https://<service>.<region>.amazonaws.com`
    /// (`.com.cn` in the China regions).
    pub fn regional(service: &str, region: &str) -> Result<Self, String> {
        let suffix = if region.starts_with("cn-") {
            "amazonaws.com.cn"
        } else {
            "amazonaws.com"
        };
        Self::parse(&format!("https://{service}.{region}.{suffix}"))
    }

    /// The URL.
    pub fn url(&self) -> String {
        self.uri.to_string()
    }
}

/// A Query API body: `params` as a form, every value URI-encoded.
pub fn form(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// AWS's error in an answer's body: the code and message of its first `Error` (EC2's
/// `<Response><Errors><Error>`, STS's `<ErrorResponse><Error>`).
pub fn parse_error(body: &str) -> Option<(String, String)> {
    let doc = roxmltree::Document::parse(body).ok()?;
    let error = doc.descendants().find(|n| n.tag_name().name() == "Error")?;
    let code = child_text(error, "Code")?;
    let message = child_text(error, "Message").unwrap_or_default();
    Some((code, message))
}

fn child<'a, 'input>(
    node: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|c| c.tag_name().name() == name)
}

fn child_text(node: roxmltree::Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name).map(|c| c.text().unwrap_or_default().trim().to_owned())
}

/// Sends a Query API call (`body` is its form) to `endpoint`, with `extra` headers; the body of
/// a 2xx answer, else AWS's error. `what` names the call in errors.
async fn post(
    http: &HttpClient,
    endpoint: &Endpoint,
    body: String,
    extra: &[(&str, String)],
    what: &str,
) -> Result<String, AwsError> {
    let mut builder = Request::post(endpoint.uri.clone())
        .header("host", &endpoint.host)
        .header("content-type", FORM_CONTENT_TYPE);
    for (name, value) in extra {
        builder = builder.header(*name, value);
    }
    let request = builder
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| AwsError::Transport(format!("{what}: cannot build the request: {e}")))?;
    let response = send_raw(http, request, what)
        .await
        .map_err(AwsError::Transport)?;
    let text = String::from_utf8_lossy(&response.body).into_owned();
    if response.status.is_success() {
        return Ok(text);
    }
    match parse_error(&text) {
        Some((code, message)) => Err(AwsError::Service {
            code,
            message,
            status: response.status.as_u16(),
        }),
        None => Err(AwsError::Transport(format!(
            "{what}: HTTP {} from {}: {}",
            response.status,
            endpoint.url(),
            text.chars().take(200).collect::<String>()
        ))),
    }
}

/// Temporary credentials from STS, and when they expire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StsCredentials {
    /// The credentials (with their session token).
    pub credentials: Credentials,
    /// When they expire, if STS said.
    pub expiration: Option<Timestamp>,
}

/// The credentials of an `AssumeRoleWithWebIdentity` answer.
pub fn parse_assume_role(body: &str) -> Result<StsCredentials, String> {
    let doc =
        roxmltree::Document::parse(body).map_err(|e| format!("the STS answer is not XML: {e}"))?;
    let credentials = doc
        .descendants()
        .find(|n| n.tag_name().name() == "Credentials")
        .ok_or("the STS answer has no Credentials")?;
    let field = |name: &str| {
        child_text(credentials, name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the STS answer's Credentials have no {name}"))
    };
    let expiration = match child_text(credentials, "Expiration") {
        Some(text) => Some(
            text.parse::<Timestamp>()
                .map_err(|e| format!("the STS answer's Expiration {text:?} is not a time: {e}"))?,
        ),
        None => None,
    };
    Ok(StsCredentials {
        credentials: Credentials {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: Some(field("SessionToken")?),
        },
        expiration,
    })
}

/// STS `AssumeRoleWithWebIdentity`: temporary credentials of `role_arn` for the web identity
/// `token`, in a session named `session_name`.
pub async fn assume_role_with_web_identity(
    http: &HttpClient,
    endpoint: &Endpoint,
    role_arn: &str,
    session_name: &str,
    token: &str,
) -> Result<StsCredentials, AwsError> {
    let params = [
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", STS_API_VERSION),
        ("RoleArn", role_arn),
        ("RoleSessionName", session_name),
        ("WebIdentityToken", token),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let what = format!("STS AssumeRoleWithWebIdentity at {}", endpoint.url());
    let body = post(http, endpoint, form(&params), &[], &what).await?;
    parse_assume_role(&body).map_err(|e| AwsError::Transport(format!("{what}: {e}")))
}

/// The parameters of `CreateTags` of `tags` on `resources`.
pub fn create_tags_params(
    resources: &[String],
    tags: &[(String, String)],
) -> Vec<(String, String)> {
    let mut params = vec![
        ("Action".to_owned(), "CreateTags".to_owned()),
        ("Version".to_owned(), EC2_API_VERSION.to_owned()),
    ];
    for (i, id) in resources.iter().enumerate() {
        params.push((format!("ResourceId.{}", i + 1), id.clone()));
    }
    for (i, (key, value)) in tags.iter().enumerate() {
        params.push((format!("Tag.{}.Key", i + 1), key.clone()));
        params.push((format!("Tag.{}.Value", i + 1), value.clone()));
    }
    params
}

/// The parameters of `DescribeTags` of the volumes `resources` (filters `resource-id` and
/// `resource-type=volume`, 1,000 a page), from `next_token` on.
pub fn describe_tags_params(
    resources: &[String],
    next_token: Option<&str>,
) -> Vec<(String, String)> {
    let mut params = vec![
        ("Action".to_owned(), "DescribeTags".to_owned()),
        ("Version".to_owned(), EC2_API_VERSION.to_owned()),
        ("Filter.1.Name".to_owned(), "resource-id".to_owned()),
    ];
    for (i, id) in resources.iter().enumerate() {
        params.push((format!("Filter.1.Value.{}", i + 1), id.clone()));
    }
    params.push(("Filter.2.Name".to_owned(), "resource-type".to_owned()));
    params.push(("Filter.2.Value.1".to_owned(), "volume".to_owned()));
    params.push(("MaxResults".to_owned(), "1000".to_owned()));
    if let Some(token) = next_token {
        params.push(("NextToken".to_owned(), token.to_owned()));
    }
    params
}

/// One tag of a `DescribeTags` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagDescription {
    /// The resource (`vol-…`).
    pub resource_id: String,
    /// The tag's key.
    pub key: String,
    /// Its value (empty when the answer has none).
    pub value: String,
}

/// The tags of a `DescribeTags` answer and its `nextToken`, if any.
pub fn parse_describe_tags(body: &str) -> Result<(Vec<TagDescription>, Option<String>), String> {
    let doc = roxmltree::Document::parse(body)
        .map_err(|e| format!("the DescribeTags answer is not XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "DescribeTagsResponse" {
        return Err(format!(
            "the DescribeTags answer is a {}, not a DescribeTagsResponse",
            root.tag_name().name()
        ));
    }
    let mut tags = Vec::new();
    if let Some(set) = child(root, "tagSet") {
        for item in set.children().filter(|c| c.tag_name().name() == "item") {
            let (Some(resource_id), Some(key)) =
                (child_text(item, "resourceId"), child_text(item, "key"))
            else {
                continue;
            };
            tags.push(TagDescription {
                resource_id,
                key,
                value: child_text(item, "value").unwrap_or_default(),
            });
        }
    }
    let next = child_text(root, "nextToken").filter(|t| !t.is_empty());
    Ok((tags, next))
}

/// Checks a `CreateTags` answer (`<return>true</return>`).
pub fn parse_create_tags(body: &str) -> Result<(), String> {
    let doc = roxmltree::Document::parse(body)
        .map_err(|e| format!("the CreateTags answer is not XML: {e}"))?;
    let root = doc.root_element();
    match child_text(root, "return").as_deref() {
        Some("true") if root.tag_name().name() == "CreateTagsResponse" => Ok(()),
        _ => Err(format!(
            "the CreateTags answer does not say it succeeded: {}",
            body.chars().take(200).collect::<String>()
        )),
    }
}

/// An EC2 client: where, in which region, with which credentials.
#[derive(Clone, Debug)]
pub struct Ec2 {
    http: HttpClient,
    endpoint: Endpoint,
    region: String,
    credentials: Credentials,
}

impl Ec2 {
    /// EC2 at `endpoint` in `region` with `credentials`, over `http`.
    pub fn new(
        http: HttpClient,
        endpoint: Endpoint,
        region: &str,
        credentials: Credentials,
    ) -> Self {
        Self {
            http,
            endpoint,
            region: region.to_owned(),
            credentials,
        }
    }

    /// One signed call of `params`; the answer's body.
    async fn call(&self, params: &[(String, String)], what: &str) -> Result<String, AwsError> {
        let body = form(params);
        let date = amz_date(Timestamp::now());
        let mut headers = vec![
            ("content-type", FORM_CONTENT_TYPE),
            ("host", self.endpoint.host.as_str()),
            ("x-amz-date", date.as_str()),
        ];
        if let Some(token) = &self.credentials.session_token {
            headers.push(("x-amz-security-token", token.as_str()));
        }
        let authorization = authorization(
            &self.credentials,
            &date,
            &self.region,
            "ec2",
            &Signed {
                method: "POST",
                path: &self.endpoint.path,
                query: "",
                headers: &headers,
                payload: body.as_bytes(),
            },
        );
        let mut extra = vec![
            ("x-amz-date", date.clone()),
            ("authorization", authorization),
        ];
        if let Some(token) = &self.credentials.session_token {
            extra.push(("x-amz-security-token", token.clone()));
        }
        let what = format!("EC2 {what} at {}", self.endpoint.url());
        post(&self.http, &self.endpoint, body, &extra, &what).await
    }

    /// `CreateTags`: sets `tags` on every resource of `resources` (one call).
    pub async fn create_tags(
        &self,
        resources: &[String],
        tags: &[(String, String)],
    ) -> Result<(), AwsError> {
        let body = self
            .call(&create_tags_params(resources, tags), "CreateTags")
            .await?;
        parse_create_tags(&body).map_err(AwsError::Transport)
    }

    /// `DescribeTags` of the volumes `resources`, every page: their tags by volume ID.
    pub async fn describe_tags(
        &self,
        resources: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>, AwsError> {
        let mut tags: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let body = self
                .call(
                    &describe_tags_params(resources, next.as_deref()),
                    "DescribeTags",
                )
                .await?;
            let (page, token) = parse_describe_tags(&body).map_err(AwsError::Transport)?;
            for tag in page {
                tags.entry(tag.resource_id)
                    .or_default()
                    .insert(tag.key, tag.value);
            }
            match token {
                Some(token) => next = Some(token),
                None => return Ok(tags),
            }
        }
        Err(AwsError::Transport(format!(
            "EC2 DescribeTags at {} answered more than {MAX_PAGES} pages",
            self.endpoint.url()
        )))
    }
}

/// The web identity of a credentials file: the role to assume and the token file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebIdentity {
    /// `role_arn`.
    pub role_arn: String,
    /// `web_identity_token_file`.
    pub token_file: String,
}

/// `role_arn` and `web_identity_token_file` of the `[default]` section of an AWS credentials
/// file (INI: `[section]` headers, `key = value` lines, `#` and `;` comments). `source` names
/// the file in the error, which names every missing key.
pub fn parse_web_identity(text: &str, source: &str) -> Result<WebIdentity, String> {
    let mut section: Option<String> = None;
    let mut seen_default = false;
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_owned();
            seen_default |= name == "default";
            section = Some(name);
            continue;
        }
        if section.as_deref() != Some("default") {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim().trim_matches('"').trim();
            if !value.is_empty() {
                values.insert(key.trim().to_owned(), value.to_owned());
            }
        }
    }
    if !seen_default {
        return Err(format!(
            "{source} has no [default] section (it must name role_arn and web_identity_token_file there)"
        ));
    }
    let missing: Vec<&str> = ["role_arn", "web_identity_token_file"]
        .into_iter()
        .filter(|k| !values.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{source} has no {} in its [default] section (with a hosted control plane the credentials are a role to assume with the web identity token HyperShift's token minter writes)",
            missing.join(", ")
        ));
    }
    let mut take = |key: &str| values.remove(key).unwrap_or_default();
    Ok(WebIdentity {
        role_arn: take("role_arn"),
        token_file: take("web_identity_token_file"),
    })
}

/// The `exp` claim (seconds since the epoch) of a JWT.
pub fn token_expiry(token: &str) -> Result<i64, String> {
    use base64::Engine as _;
    let payload = token
        .trim()
        .split('.')
        .nth(1)
        .ok_or("the token is not a JWT (no payload part)")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| format!("the token's payload is not base64url: {e}"))?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the token's payload is not JSON: {e}"))?;
    claims["exp"]
        .as_i64()
        .ok_or_else(|| "the token has no exp claim".to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// AWS's published example of Signature Version 4: IAM `ListUsers` (GET).
    #[test]
    fn the_signature_is_awss_published_example() {
        let credentials = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        let request = Signed {
            method: "GET",
            path: "/",
            query: "Action=ListUsers&Version=2010-05-08",
            headers: &[
                (
                    "Content-Type",
                    "application/x-www-form-urlencoded; charset=utf-8",
                ),
                ("Host", "iam.amazonaws.com"),
                ("X-Amz-Date", "20150830T123600Z"),
            ],
            payload: b"",
        };
        let (canonical, signed) = canonical_request(&request);
        assert_eq!(
            canonical,
            "GET\n/\nAction=ListUsers&Version=2010-05-08\ncontent-type:application/x-www-form-urlencoded; charset=utf-8\nhost:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(signed, "content-type;host;x-amz-date");
        assert_eq!(
            hex_sha256(canonical.as_bytes()),
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
        );
        assert_eq!(
            authorization(
                &credentials,
                "20150830T123600Z",
                "us-east-1",
                "iam",
                &request
            ),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn dates_are_basic_iso_8601_in_utc() {
        let t: Timestamp = "2015-08-30T12:36:00Z".parse().unwrap();
        assert_eq!(amz_date(t), "20150830T123600Z");
    }

    #[test]
    fn endpoints_are_regional_or_the_given_url() {
        let e = Endpoint::regional("ec2", "eu-west-1").unwrap();
        assert_eq!(e.url(), "https://ec2.eu-west-1.amazonaws.com/");
        assert_eq!(e.host, "ec2.eu-west-1.amazonaws.com");
        assert_eq!(e.path, "/");
        let cn = Endpoint::regional("sts", "cn-north-1").unwrap();
        assert_eq!(cn.host, "sts.cn-north-1.amazonaws.com.cn");
        let custom = Endpoint::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(custom.host, "127.0.0.1:8080");
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("not a url").is_err());
    }

    #[test]
    fn create_tags_is_a_form_of_resources_and_tags() {
        let params = create_tags_params(
            &["vol-1".into(), "vol-2".into()],
            &[("team".into(), "a b&c".into())],
        );
        assert_eq!(
            form(&params),
            "Action=CreateTags&Version=2016-11-15&ResourceId.1=vol-1&ResourceId.2=vol-2&Tag.1.Key=team&Tag.1.Value=a%20b%26c"
        );
    }

    #[test]
    fn describe_tags_filters_the_volumes_and_pages() {
        let params = describe_tags_params(&["vol-1".into(), "vol-2".into()], Some("tok"));
        assert_eq!(
            form(&params),
            "Action=DescribeTags&Version=2016-11-15&Filter.1.Name=resource-id&Filter.1.Value.1=vol-1&Filter.1.Value.2=vol-2&Filter.2.Name=resource-type&Filter.2.Value.1=volume&MaxResults=1000&NextToken=tok"
        );
    }

    #[test]
    fn describe_tags_answers_give_every_tag_and_the_next_page() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeTagsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
   <requestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</requestId>
   <tagSet>
      <item><resourceId>vol-1</resourceId><resourceType>volume</resourceType><key>team</key><value>storage</value></item>
      <item><resourceId>vol-2</resourceId><resourceType>volume</resourceType><key>empty</key><value/></item>
   </tagSet>
   <nextToken>page-2</nextToken>
</DescribeTagsResponse>"#;
        let (tags, next) = parse_describe_tags(body).unwrap();
        assert_eq!(
            tags,
            vec![
                TagDescription {
                    resource_id: "vol-1".into(),
                    key: "team".into(),
                    value: "storage".into()
                },
                TagDescription {
                    resource_id: "vol-2".into(),
                    key: "empty".into(),
                    value: String::new()
                },
            ]
        );
        assert_eq!(next.as_deref(), Some("page-2"));
        let last = "<DescribeTagsResponse><requestId>x</requestId><tagSet/></DescribeTagsResponse>";
        assert_eq!(parse_describe_tags(last).unwrap(), (Vec::new(), None));
        assert!(parse_describe_tags("<Response/>").is_err());
        assert!(parse_describe_tags("not xml").is_err());
    }

    #[test]
    fn create_tags_answers_must_say_true() {
        let ok = r#"<CreateTagsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>x</requestId><return>true</return></CreateTagsResponse>"#;
        assert_eq!(parse_create_tags(ok), Ok(()));
        assert!(parse_create_tags(&ok.replace("true", "false")).is_err());
        assert!(parse_create_tags("<html>").is_err());
    }

    #[test]
    fn ec2_and_sts_errors_give_awss_code_and_message() {
        let ec2 = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>InvalidVolume.NotFound</Code><Message>The volume 'vol-gone' does not exist.</Message></Error></Errors><RequestID>ea9bd0a5-cc6b-4b6b-a7b4-9d9e0EXAMPLE</RequestID></Response>"#;
        assert_eq!(
            parse_error(ec2),
            Some((
                "InvalidVolume.NotFound".into(),
                "The volume 'vol-gone' does not exist.".into()
            ))
        );
        let sts = r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>Couldn't retrieve verification key from your identity provider</Message></Error><RequestId>x</RequestId></ErrorResponse>"#;
        assert_eq!(
            parse_error(sts).map(|(c, _)| c).as_deref(),
            Some("InvalidIdentityToken")
        );
        assert_eq!(parse_error("<html>Bad gateway</html>"), None);
        assert_eq!(parse_error("not xml"), None);
        let error = AwsError::Service {
            code: "InvalidVolume.NotFound".into(),
            message: "gone".into(),
            status: 400,
        };
        assert_eq!(error.to_string(), "InvalidVolume.NotFound: gone");
        assert_eq!(error.code(), Some("InvalidVolume.NotFound"));
    }

    #[test]
    fn sts_answers_give_temporary_credentials() {
        let body = r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:openshift-cluster-csi-drivers:aws-ebs-csi-driver-operator</SubjectFromWebIdentityToken>
    <Credentials>
      <SessionToken>session-1</SessionToken>
      <SecretAccessKey>secret-1</SecretAccessKey>
      <Expiration>2026-11-28T08:00:00Z</Expiration>
      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"#;
        let sts = parse_assume_role(body).unwrap();
        assert_eq!(
            sts.credentials,
            Credentials {
                access_key_id: "ASIAEXAMPLE".into(),
                secret_access_key: "secret-1".into(),
                session_token: Some("session-1".into()),
            }
        );
        assert_eq!(
            sts.expiration,
            Some("2026-11-28T08:00:00Z".parse().unwrap())
        );
        let no_token = body.replace("<SessionToken>session-1</SessionToken>", "");
        assert_eq!(
            parse_assume_role(&no_token).unwrap_err(),
            "the STS answer's Credentials have no SessionToken"
        );
        assert!(parse_assume_role("<X/>").is_err());
        assert!(!format!("{:?}", sts.credentials).contains("secret-1"));
    }

    #[test]
    fn the_web_identity_is_read_from_the_default_section() {
        let text = "[default]\nrole_arn = arn:aws:iam::123:role/ebs\nweb_identity_token_file = /var/run/secrets/openshift/serviceaccount/token\nsts_regional_endpoints = regional\n";
        assert_eq!(
            parse_web_identity(text, "the file").unwrap(),
            WebIdentity {
                role_arn: "arn:aws:iam::123:role/ebs".into(),
                token_file: "/var/run/secrets/openshift/serviceaccount/token".into(),
            }
        );
    }

    #[test]
    fn a_credentials_file_without_a_web_identity_is_named() {
        let error = parse_web_identity(
            "[default]\naws_access_key_id = AKID\naws_secret_access_key = x\n",
            "key credentials of Secret ns/name",
        )
        .unwrap_err();
        assert!(
            error.starts_with(
                "key credentials of Secret ns/name has no role_arn, web_identity_token_file in its [default] section"
            ),
            "{error}"
        );
        let error = parse_web_identity(
            "[default]\nrole_arn = arn\n[other]\nweb_identity_token_file = /t\n",
            "f",
        )
        .unwrap_err();
        assert!(
            error.starts_with("f has no web_identity_token_file "),
            "{error}"
        );
        let error = parse_web_identity("role_arn = arn\n", "f").unwrap_err();
        assert!(error.starts_with("f has no [default] section"), "{error}");
    }

    #[test]
    fn the_token_expiry_is_its_exp_claim() {
        use base64::Engine as _;
        let payload =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"exp":1764316800}"#);
        assert_eq!(
            token_expiry(&format!("eyJhbGciOiJSUzI1NiJ9.{payload}.sig\n")),
            Ok(1_764_316_800)
        );
        assert!(token_expiry("not-a-jwt").is_err());
        assert!(token_expiry("a.!!!.c").is_err());
        let no_exp = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"x"}"#);
        assert_eq!(
            token_expiry(&format!("a.{no_exp}.c")).unwrap_err(),
            "the token has no exp claim"
        );
    }
}
