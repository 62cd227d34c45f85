//! IBM VPC Block's `SecretSync` on testkit, against a fake IBM Cloud (IAM and Resource Manager)
//! on 127.0.0.1 that the Infrastructure names as the cluster's custom service endpoints:
//! without the credentials it says what is missing (the operands are applied regardless);
//! once they exist it writes `storage-secret-store` with the resource group's ID, asks IBM
//! Cloud once and then writes nothing; a rejected API key is reported and the last good Secret
//! stays; an administrator's own Secret is left alone when there is nothing to derive from.

#![allow(clippy::unwrap_used)]

mod driver_testkit;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use driver_testkit::*;
use drivers::ibm_vpc_block::{self, STORAGE_SECRET, STORAGE_SECRET_KEY};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

const DRIVER: &str = "vpc.block.csi.ibm.io";
const CONDITION: &str = "SecretSyncDegraded";
const GOOD_KEY: &str = "good-key";
const TOKEN: &str = "iam-token-1";
const CONF: &str = "[global]\nversion = 1.1.0\n[provider]\naccountID = acct-1\nclusterID = demo-x7k2p\nregion = eu-de\ng2ResourceGroupName = demo-rg\n";

/// The requests the fake IBM Cloud saw: (method, path and query, authorization, body).
type Seen = Arc<Mutex<Vec<(String, String, Option<String>, String)>>>;

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// IAM accepts [`GOOD_KEY`]; Resource Manager lists two groups of account `acct-1`.
fn answer(
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: &str,
) -> Response<Full<Bytes>> {
    match (method, path) {
        ("POST", "/identity/token") => {
            let form: Vec<&str> = body.split('&').collect();
            let grant =
                form.contains(&"grant_type=urn%3Aibm%3Aparams%3Aoauth%3Agrant-type%3Aapikey");
            if grant && form.contains(&format!("apikey={GOOD_KEY}").as_str()) {
                reply(
                    StatusCode::OK,
                    json!({"access_token": TOKEN, "token_type": "Bearer"}),
                )
            } else {
                reply(
                    StatusCode::BAD_REQUEST,
                    json!({"errorCode": "BXNIM0415E", "errorMessage": "Provided API key could not be found."}),
                )
            }
        }
        ("GET", "/v2/resource_groups?account_id=acct-1")
            if authorization == Some(&format!("Bearer {TOKEN}")) =>
        {
            reply(
                StatusCode::OK,
                json!({"resources": [{"id": "rg-default", "name": "Default"}, {"id": "rg-0042", "name": "demo-rg"}]}),
            )
        }
        _ => reply(StatusCode::UNAUTHORIZED, json!({})),
    }
}

/// Serves [`answer`] on 127.0.0.1; returns its base URL and what it saw.
async fn fake_ibm_cloud() -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Seen::default();
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = s.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let seen = seen.clone();
                async move {
                    let method = request.method().to_string();
                    let path = request
                        .uri()
                        .path_and_query()
                        .map(|p| p.to_string())
                        .unwrap_or_default();
                    let authorization = request
                        .headers()
                        .get("authorization")
                        .map(|v| v.to_str().unwrap().to_owned());
                    let bytes = request.into_body().collect().await.unwrap().to_bytes();
                    let body = String::from_utf8(bytes.to_vec()).unwrap();
                    let response = answer(&method, &path, authorization.as_deref(), &body);
                    seen.lock()
                        .unwrap()
                        .push((method, path, authorization, body));
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (base, seen)
}

/// An OpenShift cluster on IBM Cloud whose Infrastructure sends IAM and Resource Manager calls
/// to `base`, with the cloud config's namespace, the ClusterCSIDriver and the driver operator
/// with its `SecretSync`.
async fn cluster_on(base: &str) -> (testkit::Cluster, Client, testkit::Background) {
    let (cluster, admin) = openshift(json!({"type": "IBMCloud", "ibmcloud": {
        "location": "eu-de", "providerType": "VPC", "resourceGroupName": "demo-rg",
        "serviceEndpoints": [{"name": "IAM", "url": base}, {"name": "ResourceManager", "url": format!("{base}/")}]
    }}))
    .await;
    create_cluster_scoped::<Namespace>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ibm_vpc_block::CLOUD_CONF.0}}),
    )
    .await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    let def = drivers::by_name(DRIVER).unwrap();
    let running = start_with_extras(&cluster, def.clone(), move |client| {
        drivers::extras(&def, client, false)
    });
    (cluster, admin, running)
}

async fn put_cloud_conf(admin: &Client) {
    let (ns, name) = ibm_vpc_block::CLOUD_CONF;
    put_config_map(admin, ns, name, json!({"cloud.conf": CONF})).await;
}

async fn put_api_key(admin: &Client, key: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ibm-cloud-credentials", "namespace": NS},
        "stringData": {"ibmcloud_api_key": key}
    }))
    .unwrap();
    let api = Api::<Secret>::namespaced(admin.clone(), NS);
    if api
        .get_opt("ibm-cloud-credentials")
        .await
        .unwrap()
        .is_some()
    {
        api.replace("ibm-cloud-credentials", &PostParams::default(), &secret)
            .await
            .unwrap();
    } else {
        api.create(&PostParams::default(), &secret).await.unwrap();
    }
}

/// The hash annotation of `storage-secret-store` on the controller's pod template.
async fn controller_secret_hash(admin: &Client) -> String {
    eventually("the Secret's hash on the controller pods", async || {
        let deployment = Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt("ibm-vpc-block-csi-controller")
            .await
            .unwrap()?;
        let annotations = deployment.spec?.template.metadata?.annotations?;
        let key =
            csi_kit::hash::annotation_key(NS, STORAGE_SECRET, csi_kit::hash::HashedKind::Secret);
        annotations.get(&key).cloned()
    })
    .await
}

async fn slclient(admin: &Client) -> Option<String> {
    let secret = Api::<Secret>::namespaced(admin.clone(), NS)
        .get_opt(STORAGE_SECRET)
        .await
        .unwrap()?;
    let data = secret.data?.remove(STORAGE_SECRET_KEY)?;
    Some(String::from_utf8(data.0).unwrap())
}

#[tokio::test]
async fn secret_sync_writes_the_driver_secret_from_the_credentials_and_the_cloud_config() {
    let (base, seen) = fake_ibm_cloud().await;
    let (cluster, admin, running) = cluster_on(&base).await;

    // Nothing to derive from: said, and the operands are applied regardless.
    let (reason, message) = condition_becomes(&admin, DRIVER, CONDITION, "True").await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains("Secret openshift-cluster-csi-drivers/ibm-cloud-credentials does not exist")
            && message.contains("create openshift-cluster-csi-drivers/storage-secret-store with key slclient.toml yourself"),
        "{message}"
    );
    eventually("the controller Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt("ibm-vpc-block-csi-controller")
            .await
            .unwrap()
    })
    .await;

    put_api_key(&admin, GOOD_KEY).await;
    condition_becomes(&admin, DRIVER, CONDITION, "True").await;
    // The credentials exist now; the cloud config is what is missing (the message may lag).
    let message = eventually("the cloud config named", async || {
        let (_, _, m) = condition(&admin, DRIVER, CONDITION).await?;
        m.contains("ConfigMap openshift-cloud-controller-manager/cloud-conf does not exist")
            .then_some(m)
    })
    .await;
    assert!(!message.contains(GOOD_KEY), "{message}");

    put_cloud_conf(&admin).await;
    condition_becomes(&admin, DRIVER, CONDITION, "False").await;
    let toml = slclient(&admin).await.unwrap();
    assert_eq!(
        toml,
        format!(
            "[vpc]\niam_client_id = \"bx\"\niam_client_secret = \"bx\"\ng2_token_exchange_endpoint_url = \"{base}\"\ng2_riaas_endpoint_url = \"https://eu-de.iaas.cloud.ibm.com\"\ng2_resource_group_id = \"rg-0042\"\ng2_api_key = \"{GOOD_KEY}\"\nprovider_type = \"g2\"\n"
        )
    );
    let secret = Api::<Secret>::namespaced(admin.clone(), NS)
        .get(STORAGE_SECRET)
        .await
        .unwrap();
    assert!(
        secret
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|f| f.manager.as_deref() == Some(ibm_vpc_block::SECRET_FIELD_MANAGER)),
        "written under its own field manager"
    );

    // Converged: no write, and IBM Cloud is not asked again for the same inputs.
    quiet(&cluster, &running).await;
    let asked = seen.lock().unwrap().len();
    assert!(asked >= 2, "{:?}", seen.lock().unwrap());
    put_cloud_conf(&admin).await; // the same data: a reconcile without a change
    quiet(&cluster, &running).await;
    let requests = seen.lock().unwrap().clone();
    let lookups = requests
        .iter()
        .filter(|(_, path, _, _)| path.starts_with("/v2/resource_groups"))
        .count();
    assert_eq!(lookups, 1, "one lookup for unchanged inputs: {requests:?}");

    // The pods mount the Secret: its hash is on their template, and a new Secret rolls them.
    let hash = controller_secret_hash(&admin).await;
    let (ns, name) = ibm_vpc_block::CLOUD_CONF;
    put_config_map(
        &admin,
        ns,
        name,
        json!({"cloud.conf": CONF.replace("eu-de", "eu-gb")}),
    )
    .await;
    let moved = eventually("the Secret for the new region", async || {
        slclient(&admin)
            .await
            .filter(|t| t.contains("https://eu-gb.iaas.cloud.ibm.com"))
    })
    .await;
    eventually("the pods rolled", async || {
        let now = controller_secret_hash(&admin).await;
        (now != hash).then_some(())
    })
    .await;
    put_cloud_conf(&admin).await;
    let toml = eventually("the Secret back in eu-de", async || {
        slclient(&admin).await.filter(|t| *t != moved)
    })
    .await;

    // A rotated key IBM Cloud rejects: said (without the key), the last good Secret stays.
    put_api_key(&admin, "revoked-key").await;
    let message = eventually("the rejected key reported", async || {
        let (status, _, m) = condition(&admin, DRIVER, CONDITION).await?;
        (status == "True" && m.contains("rejected the API key")).then_some(m)
    })
    .await;
    assert!(
        message.contains("Provided API key could not be found") && message.contains("demo-rg"),
        "{message}"
    );
    assert!(!message.contains("revoked-key"), "{message}");
    assert_eq!(slclient(&admin).await.unwrap(), toml);

    // Back to a good key: healthy again.
    put_api_key(&admin, GOOD_KEY).await;
    condition_becomes(&admin, DRIVER, CONDITION, "False").await;
}

#[tokio::test]
async fn an_administrators_secret_is_kept_when_there_is_nothing_to_derive_from() {
    let (base, seen) = fake_ibm_cloud().await;
    let (cluster, admin, running) = cluster_on(&base).await;
    let own = "[vpc]\ng2_api_key = \"mine\"\n";
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": STORAGE_SECRET, "namespace": NS},
        "stringData": {STORAGE_SECRET_KEY: own}
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    condition_becomes(&admin, DRIVER, CONDITION, "False").await;
    quiet(&cluster, &running).await;
    assert_eq!(slclient(&admin).await.unwrap(), own);
    assert!(seen.lock().unwrap().is_empty(), "IBM Cloud is not asked");

    // Deleted, it is missing again and said so at once (the Secret is watched).
    Api::<Secret>::namespaced(admin.clone(), NS)
        .delete(STORAGE_SECRET, &DeleteParams::default())
        .await
        .unwrap();
    condition_becomes(&admin, DRIVER, CONDITION, "True").await;
}

#[tokio::test]
async fn the_operator_may_write_its_secret_and_read_the_cloud_config() {
    let def = drivers::by_name(DRIVER).unwrap();
    let namespace = serde_json::to_value(drivers::extra_namespace_rules(&def)).unwrap();
    assert_eq!(
        namespace,
        json!([
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update", "patch"], "resourceNames": [STORAGE_SECRET]},
        ])
    );
    let cluster = serde_json::to_value(drivers::extra_cluster_rules(&def, false)).unwrap();
    assert_eq!(
        cluster,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"], "resourceNames": ["cloud-conf"]}])
    );
    assert_eq!(drivers::tasks(&def, dummy_client(), false).len(), 1);
}

fn dummy_client() -> Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    Client::try_from(config).unwrap()
}
