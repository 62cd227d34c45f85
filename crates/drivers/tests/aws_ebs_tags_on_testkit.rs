//! AWS EBS's `AWSEBSEBSVolumeTagsController` on testkit with a hosted control plane (a
//! management and a guest API server, as `hosted_on_testkit.rs`), against a fake STS and EC2 on
//! 127.0.0.1 that the guest's Infrastructure names as its `sts` and `ec2` endpoints. The fake
//! checks the role, session name and token of `AssumeRoleWithWebIdentity`, and recomputes the
//! Signature Version 4 of every EC2 call with the session's credentials (it refuses a call whose
//! `Authorization` or `X-Amz-Security-Token` is not what it expects).

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

#[path = "hosted/scene.rs"]
#[allow(dead_code)] // the HostedControlPlane object is not needed here
mod scene;

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use bytes::Bytes;
use driver_operator::{Extras, Hosted, Settings};
use drivers::aws_api::{self, Credentials, Signed};
use drivers::aws_ebs_tags::{self, HASH_ANNOTATION, Timing};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster};

const GUEST_NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "ebs.csi.aws.com";
const AGENT: &str = "aws-ebs-operator";
const CONDITION: &str = "AWSEBSEBSVolumeTagsControllerDegraded";
const REGION: &str = "eu-west-1";
const ROLE: &str = "arn:aws:iam::123456789012:role/hosted-aws-ebs-csi-driver-operator";
const KEY_ID: &str = "ASIAFAKEEXAMPLE";
const SECRET_KEY: &str = "fake/secret+key";
const SESSION: &str = "session-token-1";

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(90), check).await
}

/// One call the fake AWS answered: the action, its parameters, and whether the signature and
/// session token were right (always true for STS, which is not signed).
#[derive(Clone, Debug)]
struct Call {
    action: String,
    params: BTreeMap<String, String>,
    signed: bool,
}

impl Call {
    /// The values of the numbered parameters `prefix.1`, `prefix.2`, ….
    fn list(&self, prefix: &str) -> Vec<String> {
        (1..)
            .map_while(|i| self.params.get(&format!("{prefix}.{i}")).cloned())
            .collect()
    }
}

/// The fake's state: the volumes and their tags, those CreateTags refuses, the calls.
#[derive(Default)]
struct Aws {
    /// The token `AssumeRoleWithWebIdentity` accepts.
    token: String,
    volumes: BTreeMap<String, BTreeMap<String, String>>,
    denied: BTreeSet<String>,
    /// EC2 answers 503 without an AWS error (e.g. a proxy in front of it).
    unavailable: bool,
    calls: Vec<Call>,
}

type Fake = Arc<Mutex<Aws>>;

fn xml(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/xml")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn ec2_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    xml(
        status,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>req-1</RequestID></Response>"
        ),
    )
}

/// Whether the EC2 request carries the session token and a Signature Version 4 of the
/// session's credentials, recomputed here over the headers it says it signed.
fn signed_right(headers: &hyper::HeaderMap, body: &[u8]) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(authorization), Some(date)) = (header("authorization"), header("x-amz-date")) else {
        return false;
    };
    if header("x-amz-security-token") != Some(SESSION) {
        return false;
    }
    let prefix = format!(
        "AWS4-HMAC-SHA256 Credential={KEY_ID}/{}/{REGION}/ec2/aws4_request, SignedHeaders=",
        &date[..8]
    );
    let Some(rest) = authorization.strip_prefix(&prefix) else {
        return false;
    };
    let Some((signed_headers, _)) = rest.split_once(", Signature=") else {
        return false;
    };
    let names: Vec<&str> = signed_headers.split(';').collect();
    if !names.contains(&"host") || !names.contains(&"x-amz-security-token") {
        return false;
    }
    let values: Vec<(&str, &str)> = names
        .iter()
        .map(|n| (*n, header(n).unwrap_or_default()))
        .collect();
    let credentials = Credentials {
        access_key_id: KEY_ID.into(),
        secret_access_key: SECRET_KEY.into(),
        session_token: Some(SESSION.into()),
    };
    let expected = aws_api::authorization(
        &credentials,
        date,
        REGION,
        "ec2",
        &Signed {
            method: "POST",
            path: "/",
            query: "",
            headers: &values,
            payload: body,
        },
    );
    expected == authorization
}

fn answer(aws: &mut Aws, call: &Call) -> Response<Full<Bytes>> {
    let p = |name: &str| {
        call.params
            .get(name)
            .map(String::as_str)
            .unwrap_or_default()
    };
    match call.action.as_str() {
        "AssumeRoleWithWebIdentity" => {
            if p("RoleArn") != ROLE
                || p("WebIdentityToken") != aws.token
                || p("RoleSessionName") != "aws-ebs-csi-driver-operator"
                || p("Version") != "2011-06-15"
            {
                return xml(
                    StatusCode::FORBIDDEN,
                    "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error><RequestId>r</RequestId></ErrorResponse>".into(),
                );
            }
            xml(
                StatusCode::OK,
                format!(
                    "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><Credentials><SessionToken>{SESSION}</SessionToken><SecretAccessKey>{SECRET_KEY}</SecretAccessKey><Expiration>2099-01-01T00:00:00Z</Expiration><AccessKeyId>{KEY_ID}</AccessKeyId></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
                ),
            )
        }
        _ if aws.unavailable => Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(Full::new(Bytes::from("<html>Service Unavailable</html>")))
            .unwrap(),
        _ if !call.signed => ec2_error(
            StatusCode::UNAUTHORIZED,
            "AuthFailure",
            "AWS was not able to validate the provided access credentials",
        ),
        "DescribeTags" => {
            assert_eq!(p("Filter.1.Name"), "resource-id");
            assert_eq!(p("Filter.2.Name"), "resource-type");
            let ids = call.list("Filter.1.Value");
            let mut items: Vec<String> = Vec::new();
            for id in &ids {
                for (k, v) in aws.volumes.get(id).into_iter().flatten() {
                    items.push(format!("<item><resourceId>{id}</resourceId><resourceType>volume</resourceType><key>{k}</key><value>{v}</value></item>"));
                }
            }
            // Pages of three tags, so that the client follows nextToken.
            let start: usize = call
                .params
                .get("NextToken")
                .map_or(0, |t| t.parse().unwrap());
            let end = (start + 3).min(items.len());
            let next = if end < items.len() {
                format!("<nextToken>{end}</nextToken>")
            } else {
                String::new()
            };
            xml(
                StatusCode::OK,
                format!(
                    "<DescribeTagsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId><tagSet>{}</tagSet>{next}</DescribeTagsResponse>",
                    items[start..end].concat()
                ),
            )
        }
        "CreateTags" => {
            let ids = call.list("ResourceId");
            if let Some(gone) = ids.iter().find(|id| !aws.volumes.contains_key(*id)) {
                return ec2_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidVolume.NotFound",
                    &format!("The volume '{gone}' does not exist."),
                );
            }
            if ids.iter().any(|id| aws.denied.contains(id)) {
                return ec2_error(
                    StatusCode::FORBIDDEN,
                    "UnauthorizedOperation",
                    "You are not authorized to perform this operation.",
                );
            }
            let mut tags = Vec::new();
            for i in 1.. {
                let Some(key) = call.params.get(&format!("Tag.{i}.Key")) else {
                    break;
                };
                let value = call.params.get(&format!("Tag.{i}.Value")).unwrap();
                tags.push((key.clone(), value.clone()));
            }
            for id in &ids {
                let volume = aws.volumes.get_mut(id).unwrap();
                volume.extend(tags.iter().cloned());
            }
            xml(
                StatusCode::OK,
                "<CreateTagsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId><return>true</return></CreateTagsResponse>".into(),
            )
        }
        other => ec2_error(StatusCode::BAD_REQUEST, "InvalidAction", other),
    }
}

/// A throwaway CA (PEM) and the server configuration of a certificate it signed for
/// 127.0.0.1.
fn pki() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "fake AWS test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, "fake AWS");
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = server.signed_by(&key, &ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (ca.pem(), Arc::new(config))
}

/// Serves the fake STS and EC2 over HTTPS on 127.0.0.1 (the Infrastructure accepts only https
/// endpoints); its base URL and the CA (PEM) of its certificate.
async fn fake_aws(fake: Fake) -> (String, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let (ca, config) = pki();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let fake = fake.clone();
            let acceptor = acceptor.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let fake = fake.clone();
                async move {
                    let headers = request.headers().clone();
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let params: BTreeMap<String, String> = form_urlencoded::parse(&body)
                        .map(|(k, v)| (k.into_owned(), v.into_owned()))
                        .collect();
                    let call = Call {
                        action: params.get("Action").cloned().unwrap_or_default(),
                        signed: params.get("Action").map(String::as_str)
                            == Some("AssumeRoleWithWebIdentity")
                            || signed_right(&headers, &body),
                        params,
                    };
                    let mut aws = fake.lock().unwrap();
                    let response = answer(&mut aws, &call);
                    aws.calls.push(call);
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (base, ca)
}

/// A JWT whose `exp` is an hour from now (the operator reads only that claim).
fn jwt() -> String {
    jwt_expiring_in(3600)
}

/// A JWT whose `exp` is `seconds` from now (negative: passed).
fn jwt_expiring_in(seconds: i64) -> String {
    use base64::Engine as _;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let exp = i64::try_from(now).unwrap() + seconds;
    let part = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.signature",
        part(json!({"alg": "RS256"})),
        part(
            json!({"aud": ["openshift"], "exp": exp, "sub": "system:serviceaccount:openshift-cluster-csi-drivers:aws-ebs-csi-driver-operator"})
        )
    )
}

/// Writes the token file of test `name`, as HyperShift's token minter would, in the target
/// directory's scratch space; its path.
fn token_file(name: &str, token: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ebs-tags-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, token).unwrap();
    path.display().to_string()
}

/// Creates or replaces `ebs-cloud-credentials` with `credentials` as its `credentials` key.
async fn put_credentials(guest: &Client, credentials: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ebs-cloud-credentials", "namespace": GUEST_NS},
        "stringData": {"credentials": credentials}
    }))
    .unwrap();
    let api = Api::<Secret>::namespaced(guest.clone(), GUEST_NS);
    if api
        .get_opt("ebs-cloud-credentials")
        .await
        .unwrap()
        .is_some()
    {
        api.replace("ebs-cloud-credentials", &PostParams::default(), &secret)
            .await
            .unwrap();
    } else {
        api.create(&PostParams::default(), &secret).await.unwrap();
    }
}

fn ini(role: &str, token_file: &str) -> String {
    format!(
        "[default]\nrole_arn = {role}\nweb_identity_token_file = {token_file}\nsts_regional_endpoints = regional\n"
    )
}

/// Sets the guest Infrastructure's AWS status: region, `tags`, STS and EC2 at `base`.
async fn put_tags(guest: &Client, base: &str, tags: &[(&str, &str)]) {
    let tags: Vec<Value> = tags
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "status": {"infrastructureName": "hosted-x7k2p", "controlPlaneTopology": "External",
                   "platformStatus": {"type": "AWS", "aws": {"region": REGION, "resourceTags": tags,
                       "serviceEndpoints": [{"name": "ec2", "url": base}, {"name": "sts", "url": base}]}}}
    });
    Api::<api::config_v1::Infrastructure>::all(guest.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("installer").force(),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
}

/// Creates PV `name` of `driver` with volume `handle` and `annotations`.
async fn create_pv(guest: &Client, name: &str, driver: &str, handle: &str, annotations: Value) {
    let pv: PersistentVolume = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Delete",
                 "csi": {"driver": driver, "volumeHandle": handle}}
    }))
    .unwrap();
    Api::<PersistentVolume>::all(guest.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap();
}

/// The annotations of PV `name`.
async fn annotations(guest: &Client, name: &str) -> BTreeMap<String, String> {
    Api::<PersistentVolume>::all(guest.clone())
        .get(name)
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default()
}

/// Condition `type_` of the ClusterCSIDriver: (status, message).
async fn condition(guest: &Client, type_: &str) -> Option<(String, String)> {
    let driver = Api::<ClusterCSIDriver>::all(guest.clone())
        .get_opt(DRIVER)
        .await
        .unwrap()?;
    let c = driver.status?.condition(type_)?.clone();
    Some((c.status.to_string(), c.message.unwrap_or_default()))
}

/// Waits until the condition has `status` and its message contains `part`; the message.
async fn condition_says(guest: &Client, status: &str, part: &str) -> String {
    eventually(
        &format!("{CONDITION}={status} saying {part:?}"),
        async || {
            let (s, m) = condition(guest, CONDITION).await?;
            (s == status && m.contains(part)).then_some(m)
        },
    )
    .await
}

/// The notes of the Warning Events `EBSVolumeTagsUpdateFailed` in the guest.
async fn failure_events(guest: &Client) -> Vec<String> {
    Api::<Event>::all(guest.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("EBSVolumeTagsUpdateFailed")
                && e.type_.as_deref() == Some("Warning")
        })
        .filter_map(|e| e.note)
        .collect()
}

/// The lists of PVs by the controller (pages of 50) the guest served so far.
fn pv_pages(guest: &Cluster) -> usize {
    guest
        .requests()
        .iter()
        .filter(|r| {
            r.verb == "list"
                && r.resource == "persistentvolumes"
                && r.query.get("limit").map(String::as_str) == Some("50")
        })
        .count()
}

/// The scene: a hosted cluster on AWS with the ClusterCSIDriver (Managed) and the custom CA
/// bundle `ca` in its cloud config, and its management cluster.
async fn clusters(ca: &str) -> (Cluster, Cluster) {
    let (management, guest) = scene::clusters(
        &["ClusterCSIDriver", "Proxy"],
        &[GUEST_NS, "openshift-config-managed"],
    )
    .await;
    let cloud_config: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-cloud-config", "namespace": "openshift-config-managed"},
        "data": {"ca-bundle.pem": ca}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(guest.client(), "openshift-config-managed")
        .create(&PostParams::default(), &cloud_config)
        .await
        .unwrap();
    let cluster_csi_driver: ClusterCSIDriver = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": DRIVER}, "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    Api::<ClusterCSIDriver>::all(guest.client())
        .create(&PostParams::default(), &cluster_csi_driver)
        .await
        .unwrap();
    (management, guest)
}

/// Quick retries, so that the tests see them.
const TIMING: Timing = Timing {
    first_retry: Duration::from_secs(1),
    max_retry: Duration::from_secs(2),
};

/// Retries after an hour: only a change of what the controller reads tries it again in a test.
const SLOW: Timing = Timing {
    first_retry: Duration::from_secs(3600),
    max_retry: Duration::from_secs(3600),
};

/// The driver operator of AWS EBS with `hosted` (the management cluster), and its tasks as
/// `drivers::extras` gives them (or the tags controller with `timing`, when given).
fn start(management: Option<&Cluster>, guest: &Cluster, timing: Option<Timing>) -> Background {
    let def = drivers::by_name("aws-ebs").unwrap();
    let client = guest.client_with_agent(AGENT);
    let hosted = management.map(|m| Hosted {
        management: m.client_with_agent(AGENT),
        control_plane: scene::control_plane(),
    });
    let metrics = Metrics::new();
    let settling = metrics.settling(&driver_operator::operator_name(&def));
    Background::spawn(|shutdown| async move {
        let mut extras = drivers::extras(&def, client.clone(), hosted.is_some());
        if let Some(timing) = timing {
            extras = Extras {
                probe: None,
                tasks: vec![aws_ebs_tags::task_with(client.clone(), &def, timing)],
            };
        }
        driver_operator::run_with_extras(
            client,
            def,
            Settings {
                env: [("DRIVER_IMAGE".to_owned(), "example.com/ebs:1".to_owned())].into(),
                instance: Some("aws-ebs-operator-0".into()),
                hosted,
                ..Settings::default()
            },
            extras,
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(settling)
}

/// Every EBS volume gets the tags (only those missing one are in a CreateTags, at most 50 a
/// call) and its PV the hash; other drivers' PVs and other annotations are left alone; the same
/// tags again cost no AWS call and no PV list; a changed tag is applied again.
#[tokio::test]
async fn the_resource_tags_reach_every_ebs_volume_once_and_again_when_they_change() {
    let fake = Fake::default();
    let token = jwt();
    fake.lock().unwrap().token = token.clone();
    let (base, ca) = fake_aws(fake.clone()).await;
    let (management, guest_cluster) = clusters(&ca).await;
    let guest = guest_cluster.client();
    let path = token_file("tags", &token);
    put_credentials(&guest, &ini(ROLE, &path)).await;

    // 60 EBS volumes: two batches. vol-007 has the tags already; pv-003 has an annotation of
    // its own.
    for i in 0..60 {
        let id = format!("vol-{i:03}");
        let mut tags = BTreeMap::from([(
            "kubernetes.io/created-for/pv/name".to_owned(),
            format!("pv-{i:03}"),
        )]);
        if i == 7 {
            tags.insert("team".into(), "storage".into());
            tags.insert("env".into(), "prod".into());
        }
        fake.lock().unwrap().volumes.insert(id.clone(), tags);
        let own = if i == 3 {
            json!({"mine": "kept"})
        } else {
            json!({})
        };
        create_pv(&guest, &format!("pv-{i:03}"), DRIVER, &id, own).await;
    }
    create_pv(
        &guest,
        "pv-other",
        "other.csi.example.com",
        "vol-other",
        json!({}),
    )
    .await;
    put_tags(&guest, &base, &[("team", "storage"), ("env", "prod")]).await;

    let _running = start(Some(&management), &guest_cluster, None);
    // OpenShift's hash of env=prod;team=storage; (see aws_ebs_tags' unit test).
    let hash = "eac4e15b800d925af0ac501b3171820039e86c5db461df77995dbe2bb47a5dde";
    eventually("every EBS PV annotated", async || {
        for i in 0..60 {
            let a = annotations(&guest, &format!("pv-{i:03}")).await;
            if a.get(HASH_ANNOTATION).map(String::as_str) != Some(hash) {
                return None;
            }
        }
        Some(())
    })
    .await;
    condition_says(&guest, "False", "").await;

    let calls = fake.lock().unwrap().calls.clone();
    assert!(calls.iter().all(|c| c.signed), "{calls:?}");
    let sts = calls
        .iter()
        .filter(|c| c.action == "AssumeRoleWithWebIdentity")
        .count();
    assert_eq!(sts, 1, "one session");
    let created: Vec<Vec<String>> = calls
        .iter()
        .filter(|c| c.action == "CreateTags")
        .map(|c| c.list("ResourceId"))
        .collect();
    assert_eq!(created.len(), 2, "{created:?}");
    assert!(created.iter().all(|ids| ids.len() <= 50), "{created:?}");
    let tagged: BTreeSet<&String> = created.iter().flatten().collect();
    assert_eq!(tagged.len(), 59);
    assert!(!tagged.contains(&"vol-007".to_owned()), "already tagged");
    let describes = calls.iter().filter(|c| c.action == "DescribeTags").count();
    assert!(describes > 2, "DescribeTags follows nextToken: {describes}");
    for (id, tags) in &fake.lock().unwrap().volumes {
        assert_eq!(
            tags.get("team").map(String::as_str),
            Some("storage"),
            "{id}"
        );
        assert_eq!(tags.get("env").map(String::as_str), Some("prod"), "{id}");
    }
    assert_eq!(
        annotations(&guest, "pv-003")
            .await
            .get("mine")
            .map(String::as_str),
        Some("kept")
    );
    assert!(
        !annotations(&guest, "pv-other")
            .await
            .contains_key(HASH_ANNOTATION)
    );
    // The kit's own watch of PVs (CSI migration) lists them in pages of 50 too: two pages of
    // the 61 PVs, and the controller's two.
    let pages = pv_pages(&guest_cluster);
    assert_eq!(pages, 4, "61 PVs in pages of 50, twice");

    // The same tags: a reconcile (the credentials Secret changes) asks nothing and lists
    // nothing.
    fake.lock().unwrap().calls.clear();
    put_credentials(&guest, &format!("{}# touched\n", ini(ROLE, &path))).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    _running.converged(&guest_cluster, AGENT).await;
    assert!(fake.lock().unwrap().calls.is_empty());
    assert_eq!(pv_pages(&guest_cluster), pages);

    // A changed tag: applied again, to every volume.
    put_tags(&guest, &base, &[("team", "block"), ("env", "prod")]).await;
    let changed = aws_api::hex_sha256(b"env=prod;team=block;");
    eventually("every EBS PV annotated with the new hash", async || {
        for i in 0..60 {
            let a = annotations(&guest, &format!("pv-{i:03}")).await;
            if a.get(HASH_ANNOTATION) != Some(&changed) {
                return None;
            }
        }
        Some(())
    })
    .await;
    let aws = fake.lock().unwrap();
    assert!(
        aws.volumes
            .values()
            .all(|t| t.get("team").map(String::as_str) == Some("block"))
    );
    let again: usize = aws
        .calls
        .iter()
        .filter(|c| c.action == "CreateTags")
        .map(|c| c.list("ResourceId").len())
        .sum();
    assert_eq!(again, 60);
    assert!(
        aws.calls
            .iter()
            .all(|c| c.action != "AssumeRoleWithWebIdentity"),
        "the session is kept"
    );
}

/// A batch CreateTags refuses is tried volume by volume: a volume that no longer exists is
/// skipped, one AWS refuses is a Warning Event and the condition (naming the volume and AWS's
/// message), and it is tried again until AWS accepts it.
#[tokio::test]
async fn a_refused_batch_is_tried_volume_by_volume() {
    let fake = Fake::default();
    let token = jwt();
    fake.lock().unwrap().token = token.clone();
    let (base, ca) = fake_aws(fake.clone()).await;
    let (management, guest_cluster) = clusters(&ca).await;
    let guest = guest_cluster.client();
    put_credentials(&guest, &ini(ROLE, &token_file("refused", &token))).await;
    {
        let mut aws = fake.lock().unwrap();
        for id in ["vol-ok-1", "vol-denied", "vol-ok-2"] {
            aws.volumes.insert(id.into(), BTreeMap::new());
        }
        aws.denied.insert("vol-denied".into());
    }
    for (pv, id) in [
        ("pv-ok-1", "vol-ok-1"),
        ("pv-gone", "vol-gone"),
        ("pv-denied", "vol-denied"),
        ("pv-ok-2", "vol-ok-2"),
    ] {
        create_pv(&guest, pv, DRIVER, id, json!({})).await;
    }
    put_tags(&guest, &base, &[("team", "storage")]).await;
    let _running = start(Some(&management), &guest_cluster, Some(TIMING));

    let message = condition_says(&guest, "True", "vol-denied").await;
    assert!(
        message.contains("PersistentVolume pv-denied")
            && message.contains(
                "UnauthorizedOperation: You are not authorized to perform this operation."
            ),
        "{message}"
    );
    assert!(!message.contains("vol-gone"), "{message}");
    let hash = aws_api::hex_sha256(b"team=storage;");
    for pv in ["pv-ok-1", "pv-ok-2"] {
        assert_eq!(
            annotations(&guest, pv).await.get(HASH_ANNOTATION),
            Some(&hash),
            "{pv}"
        );
    }
    for pv in ["pv-gone", "pv-denied"] {
        assert!(
            !annotations(&guest, pv).await.contains_key(HASH_ANNOTATION),
            "{pv}"
        );
    }
    let notes = eventually("the Warning Events", async || {
        let notes = failure_events(&guest).await;
        (notes.iter().any(|n| n.contains("batch"))
            && notes
                .iter()
                .any(|n| n.contains("vol-denied") && n.contains("pv-denied")))
        .then_some(notes)
    })
    .await;
    assert!(
        notes.iter().any(|n| n.contains("InvalidVolume.NotFound")),
        "the batch's failure: {notes:?}"
    );
    let calls = fake.lock().unwrap().calls.clone();
    let singles: BTreeSet<Vec<String>> = calls
        .iter()
        .filter(|c| c.action == "CreateTags")
        .map(|c| c.list("ResourceId"))
        .filter(|ids| ids.len() == 1)
        .collect();
    assert!(
        singles.contains(&vec!["vol-gone".to_owned()]),
        "{singles:?}"
    );
    assert!(
        singles.contains(&vec!["vol-denied".to_owned()]),
        "{singles:?}"
    );

    // AWS accepts it now: tried again, done; the missing volume stays skipped.
    fake.lock().unwrap().denied.clear();
    condition_says(&guest, "False", "").await;
    assert_eq!(
        annotations(&guest, "pv-denied").await.get(HASH_ANNOTATION),
        Some(&hash)
    );
    assert!(
        !annotations(&guest, "pv-gone")
            .await
            .contains_key(HASH_ANNOTATION)
    );
    assert_eq!(
        fake.lock().unwrap().volumes["vol-denied"]
            .get("team")
            .map(String::as_str),
        Some("storage")
    );
}

/// EC2 not answering stops the run at the first batch (the others are not tried in turn), and
/// it is tried again.
#[tokio::test]
async fn a_run_stops_when_ec2_does_not_answer() {
    let fake = Fake::default();
    let token = jwt();
    fake.lock().unwrap().token = token.clone();
    fake.lock().unwrap().unavailable = true;
    let (base, ca) = fake_aws(fake.clone()).await;
    let (management, guest_cluster) = clusters(&ca).await;
    let guest = guest_cluster.client();
    put_credentials(&guest, &ini(ROLE, &token_file("unavailable", &token))).await;
    for i in 0..60 {
        let id = format!("vol-{i:03}");
        fake.lock()
            .unwrap()
            .volumes
            .insert(id.clone(), BTreeMap::new());
        create_pv(&guest, &format!("pv-{i:03}"), DRIVER, &id, json!({})).await;
    }
    put_tags(&guest, &base, &[("team", "storage")]).await;
    let _running = start(Some(&management), &guest_cluster, Some(SLOW));

    let message = condition_says(&guest, "True", "10 more PersistentVolumes not tried").await;
    assert!(
        message.contains("HTTP 503 Service Unavailable"),
        "{message}"
    );
    let calls = fake.lock().unwrap().calls.clone();
    let ec2: Vec<&str> = calls
        .iter()
        .map(|c| c.action.as_str())
        .filter(|a| *a != "AssumeRoleWithWebIdentity")
        .collect();
    assert_eq!(ec2, ["DescribeTags"]);

    // EC2 is back; the next run (the tags change) tags every volume.
    fake.lock().unwrap().unavailable = false;
    put_tags(&guest, &base, &[("team", "block")]).await;
    condition_says(&guest, "False", "").await;
    assert!(
        fake.lock()
            .unwrap()
            .volumes
            .values()
            .all(|t| t.get("team").map(String::as_str) == Some("block"))
    );
}

/// What is wrong with the credentials is said, one thing after the other, until they work: each
/// change of the Secret is tried at once, whatever the delay after a failure.
#[tokio::test]
async fn wrong_credentials_are_named() {
    let fake = Fake::default();
    let token = jwt();
    fake.lock().unwrap().token = token.clone();
    fake.lock()
        .unwrap()
        .volumes
        .insert("vol-1".into(), BTreeMap::new());
    let (base, ca) = fake_aws(fake.clone()).await;
    let (management, guest_cluster) = clusters(&ca).await;
    let guest = guest_cluster.client();
    create_pv(&guest, "pv-1", DRIVER, "vol-1", json!({})).await;
    put_tags(&guest, &base, &[("team", "storage")]).await;
    let _running = start(Some(&management), &guest_cluster, Some(SLOW));

    condition_says(
        &guest,
        "True",
        "Secret openshift-cluster-csi-drivers/ebs-cloud-credentials does not exist",
    )
    .await;
    put_credentials(&guest, "[default]\naws_access_key_id = AKID\n").await;
    condition_says(
        &guest,
        "True",
        "key credentials of Secret openshift-cluster-csi-drivers/ebs-cloud-credentials has no role_arn, web_identity_token_file",
    )
    .await;
    let missing =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ebs-tags-no-such-dir/token");
    put_credentials(&guest, &ini(ROLE, &missing.display().to_string())).await;
    condition_says(&guest, "True", "cannot read the web identity token file").await;
    let path = token_file("credentials", &token);
    put_credentials(&guest, &ini("arn:aws:iam::123456789012:role/other", &path)).await;
    let message = condition_says(&guest, "True", "AccessDenied").await;
    assert!(
        message.contains("assuming role arn:aws:iam::123456789012:role/other"),
        "{message}"
    );
    put_credentials(&guest, &ini(ROLE, &path)).await;
    condition_says(&guest, "False", "").await;
    assert!(
        annotations(&guest, "pv-1")
            .await
            .contains_key(HASH_ANNOTATION)
    );
    // The token itself never reaches the status.
    let (_, message) = condition(&guest, CONDITION).await.unwrap();
    assert!(!message.contains(&token));
}

/// Once the token's `exp` has passed, the next run assumes the role again with the token the
/// file has then (as OpenShift's, which reads `exp` when it makes a session).
#[tokio::test]
async fn the_role_is_assumed_again_once_the_token_has_expired() {
    let fake = Fake::default();
    let expired = jwt_expiring_in(-60);
    fake.lock().unwrap().token = expired.clone();
    fake.lock()
        .unwrap()
        .volumes
        .insert("vol-1".into(), BTreeMap::new());
    let (base, ca) = fake_aws(fake.clone()).await;
    let (management, guest_cluster) = clusters(&ca).await;
    let guest = guest_cluster.client();
    let path = token_file("renewal", &expired);
    put_credentials(&guest, &ini(ROLE, &path)).await;
    create_pv(&guest, "pv-1", DRIVER, "vol-1", json!({})).await;
    put_tags(&guest, &base, &[("team", "storage")]).await;
    let _running = start(Some(&management), &guest_cluster, Some(TIMING));
    let first = aws_api::hex_sha256(b"team=storage;");
    eventually("pv-1 annotated", async || {
        (annotations(&guest, "pv-1").await.get(HASH_ANNOTATION) == Some(&first)).then_some(())
    })
    .await;

    // The minter wrote a new token; the session of the expired one is not used again.
    let fresh = jwt();
    std::fs::write(&path, &fresh).unwrap();
    fake.lock().unwrap().token = fresh;
    put_tags(&guest, &base, &[("team", "block")]).await;
    let second = aws_api::hex_sha256(b"team=block;");
    eventually("pv-1 annotated again", async || {
        (annotations(&guest, "pv-1").await.get(HASH_ANNOTATION) == Some(&second)).then_some(())
    })
    .await;
    let sts = fake
        .lock()
        .unwrap()
        .calls
        .iter()
        .filter(|c| c.action == "AssumeRoleWithWebIdentity")
        .count();
    assert_eq!(sts, 2);
}

/// Without a hosted control plane the controller is not there (OpenShift runs it only with
/// HyperShift), and the task itself does nothing if given.
#[tokio::test]
async fn without_a_hosted_control_plane_nothing_is_tagged() {
    let def = drivers::by_name("aws-ebs").unwrap();
    let fake = Fake::default();
    let token = jwt();
    fake.lock().unwrap().token = token.clone();
    fake.lock()
        .unwrap()
        .volumes
        .insert("vol-1".into(), BTreeMap::new());
    let (base, ca) = fake_aws(fake.clone()).await;
    let (_management, guest_cluster) = clusters(&ca).await;
    let guest = guest_cluster.client();
    assert!(drivers::tasks(&def, guest.clone(), false).is_empty());
    assert_eq!(drivers::tasks(&def, guest.clone(), true).len(), 1);
    put_credentials(&guest, &ini(ROLE, &token_file("standalone", &token))).await;
    create_pv(&guest, "pv-1", DRIVER, "vol-1", json!({})).await;
    put_tags(&guest, &base, &[("team", "storage")]).await;

    // The task given anyway, without a hosted control plane.
    let running = start(None, &guest_cluster, Some(TIMING));
    condition_says(&guest, "False", "").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    running.converged(&guest_cluster, AGENT).await;
    assert!(fake.lock().unwrap().calls.is_empty());
    // The kit's own watch of PVs (CSI migration) only.
    assert_eq!(pv_pages(&guest_cluster), 1);
    assert!(
        !annotations(&guest, "pv-1")
            .await
            .contains_key(HASH_ANNOTATION)
    );
}

/// The driver operator's guest identity may patch PVs (their hash annotation): only AWS
/// EBS's, and only with a hosted control plane, where the controller runs.
#[test]
fn only_aws_ebs_may_patch_persistent_volumes() {
    let rules = |name: &str, hosted: bool| {
        serde_json::to_value(drivers::extra_cluster_rules(
            &drivers::by_name(name).unwrap(),
            hosted,
        ))
        .unwrap()
    };
    assert_eq!(
        rules("aws-ebs", true),
        json!([{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["patch"]}])
    );
    assert_eq!(rules("aws-ebs", false), json!([]), "standalone");
    for other in ["aws-efs", "azure-disk", "gcp-pd"] {
        for hosted in [true, false] {
            assert!(
                !rules(other, hosted)
                    .to_string()
                    .contains("persistentvolumes"),
                "{other}"
            );
        }
    }
}
