//! The OpenStack Manila driver operator on testkit with a fake cloud: Disabled (nothing
//! applied) while the cloud offers no share types, enabled with one StorageClass per share type
//! once they appear, a class more when another appears, and no writes when idle; the
//! `csi-manila-secrets` Secret derived from the credentials Secret's `clouds.yaml`, following
//! its rotation.

#![allow(clippy::unwrap_used)]

mod driver_testkit;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use driver_testkit::*;
use drivers::openstack_manila::{self, ShareTypes};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const DRIVER: &str = "manila.csi.openstack.org";
const PREFIX: &str = "Manila";
const CONTROLLER: &str = "openstack-manila-csi-controllerplugin";
const NODE: &str = "openstack-manila-csi-nodeplugin";
const NFS_NODE: &str = "csi-nodeplugin-nfsplugin";
const DISABLED: &str = "ManilaDriverControllerServiceControllerDisabled";

/// A cloud whose share types the test changes.
#[derive(Clone, Default)]
struct FakeCloud(Arc<Mutex<Vec<String>>>);

impl ShareTypes for FakeCloud {
    fn share_types(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, csi_kit::HookError>> + Send + '_>> {
        let types = self.0.lock().unwrap().clone();
        Box::pin(async move { Ok(types) })
    }
}

async fn class(admin: &kube::Client, name: &str) -> Option<StorageClass> {
    Api::<StorageClass>::all(admin.clone())
        .get_opt(name)
        .await
        .unwrap()
}

#[tokio::test]
async fn disabled_until_share_types_appear_then_one_class_each() {
    let (cluster, admin) = openshift(json!({"type": "OpenStack"})).await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    let cloud = FakeCloud::default();
    let running = start(
        &cluster,
        drivers::by_name("openstack-manila").unwrap(),
        Some(openstack_manila::probe(
            cloud.clone(),
            Duration::from_millis(500),
        )),
    );

    let (reason, message) = condition_becomes(&admin, DRIVER, DISABLED, "True").await;
    assert_eq!(reason, "PreConditionNotSatisfied");
    assert!(message.contains("no Manila share types"), "{message}");
    quiet(&cluster, &running).await;
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), MANILA_NS)
            .get_opt(CONTROLLER)
            .await
            .unwrap()
            .is_none(),
        "nothing is applied while Manila is disabled"
    );

    // The cloud admin creates a share type: Manila is enabled at the next probe.
    cloud.0.lock().unwrap().push("default".to_owned());
    condition_becomes(&admin, DRIVER, DISABLED, "False").await;
    healthy(&admin, DRIVER, PREFIX).await;
    let default = eventually("csi-manila-default", async || {
        class(&admin, "csi-manila-default").await
    })
    .await;
    assert_eq!(default.parameters.unwrap()["type"], "default");
    // The node plugin waits for the NFS plugin's DaemonSet, which is reported under its own
    // controller's name, as OpenShift reports it.
    let node = Api::<DaemonSet>::namespaced(admin.clone(), MANILA_NS)
        .get(NODE)
        .await
        .unwrap();
    let init = node.spec.unwrap().template.spec.unwrap().init_containers;
    assert_eq!(init.unwrap()[0].name, "wait-for-nfs-plugin");
    Api::<DaemonSet>::namespaced(admin.clone(), MANILA_NS)
        .get(NFS_NODE)
        .await
        .unwrap();
    condition_becomes(
        &admin,
        DRIVER,
        "NFSDriverNodeServiceControllerAvailable",
        "True",
    )
    .await;
    condition_becomes(
        &admin,
        DRIVER,
        "NFSDriverNodeServiceControllerProgressing",
        "False",
    )
    .await;

    // Another share type: another class.
    cloud.0.lock().unwrap().push("gold".to_owned());
    eventually("csi-manila-gold", async || {
        class(&admin, "csi-manila-gold").await
    })
    .await;

    // Idle: the probe keeps asking, but nothing is written.
    quiet(&cluster, &running).await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);
    running.stop().await;
}

const CREDENTIALS: &str = "manila-cloud-credentials";

/// Writes the credentials Secret (create or replace) with `clouds.yaml` = `clouds`.
async fn put_credentials(admin: &kube::Client, clouds: &str) {
    let api = Api::<Secret>::namespaced(admin.clone(), MANILA_NS);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": CREDENTIALS, "namespace": MANILA_NS},
        "stringData": {"clouds.yaml": clouds},
    }))
    .unwrap();
    if api.get_opt(CREDENTIALS).await.unwrap().is_some() {
        api.replace(CREDENTIALS, &PostParams::default(), &secret)
            .await
            .unwrap();
    } else {
        api.create(&PostParams::default(), &secret).await.unwrap();
    }
}

/// The data of `csi-manila-secrets`, as text, once it satisfies `check`.
async fn csi_secret_when(
    admin: &kube::Client,
    what: &str,
    check: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    eventually(what, async || {
        let secret = Api::<Secret>::namespaced(admin.clone(), MANILA_NS)
            .get_opt(openstack_manila::CSI_SECRET)
            .await
            .unwrap()?;
        let data: BTreeMap<String, String> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8(v.0).unwrap()))
            .collect();
        check(&data).then_some(data)
    })
    .await
}

const PASSWORD_CLOUD: &str = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example.com:13000\n      username: alice\n      password: first-password\n      project_name: shift\n      project_domain_name: Default\n      user_domain_name: Default\n    region_name: regionOne\n";
const CREDENTIAL_CLOUD: &str = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example.com:13000\n      application_credential_id: ac1\n      application_credential_secret: shh\n    auth_type: v3applicationcredential\n    region_name: regionOne\n";

#[tokio::test]
async fn csi_manila_secrets_follow_the_credentials_secret() {
    let (cluster, admin) = openshift(json!({"type": "OpenStack"})).await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    put_credentials(&admin, PASSWORD_CLOUD).await;
    let cloud = FakeCloud::default();
    cloud.0.lock().unwrap().push("default".to_owned());
    let def = drivers::by_name("openstack-manila").unwrap();
    let probe = openstack_manila::probe_with_secret(
        cloud.clone(),
        cluster.client_with_agent(AGENT),
        &def,
        Duration::from_millis(500),
    );
    let running = start(&cluster, def, Some(probe));

    // Derived from clouds.yaml, as OpenShift's Manila operator does.
    let data = csi_secret_when(&admin, "csi-manila-secrets", |d| !d.is_empty()).await;
    let expected: BTreeMap<String, String> = [
        ("os-authURL", "https://keystone.example.com:13000"),
        ("os-region", "regionOne"),
        ("os-userName", "alice"),
        ("os-password", "first-password"),
        ("os-projectName", "shift"),
        ("os-projectDomainName", "Default"),
        ("os-userDomainName", "Default"),
        ("os-domainName", "Default"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(data, expected);
    condition_becomes(&admin, DRIVER, DISABLED, "False").await;

    // Idle: once the workloads are up (the cluster's controllers report them a moment
    // later, and the operator records that), nothing is written again while clouds.yaml
    // does not change.
    healthy(&admin, DRIVER, PREFIX).await;
    quiet(&cluster, &running).await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);

    // Rotation to an application credential: the new keys, and the password is gone.
    put_credentials(&admin, CREDENTIAL_CLOUD).await;
    let data = csi_secret_when(&admin, "rotated csi-manila-secrets", |d| {
        d.contains_key("os-applicationCredentialID")
    })
    .await;
    assert_eq!(data["os-applicationCredentialSecret"], "shh");
    for stale in ["os-password", "os-userName", "os-projectName"] {
        assert!(!data.contains_key(stale), "{stale} left behind: {data:?}");
    }

    // A broken clouds.yaml is reported, naming the Secret and the key; the last good
    // csi-manila-secrets stays.
    put_credentials(&admin, "clouds: {}\n").await;
    let (_, message) = condition_becomes(&admin, DRIVER, DISABLED, "True").await;
    assert!(
        message.contains(&format!(
            "key clouds.yaml of Secret {MANILA_NS}/{CREDENTIALS} is invalid"
        )),
        "{message}"
    );
    assert!(!message.contains("shh"), "{message}");
    csi_secret_when(&admin, "kept csi-manila-secrets", |d| {
        d.contains_key("os-applicationCredentialID")
    })
    .await;
    running.stop().await;
}
