//! The vSphere driver operator on testkit: without the vCenter credentials it refuses
//! (Disabled with the reason, nothing applied, no pods to crash-loop), also while the Secret
//! lacks the password; once both keys exist it converges, writes csi-vsphere.conf with them
//! into its Secret, enforces topology from the cloud config, and then writes nothing; a new
//! password rolls the controller pods once.

#![allow(clippy::unwrap_used)]

mod driver_testkit;

use std::time::Duration;

use driver_testkit::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use serde_json::json;

const DRIVER: &str = "csi.vsphere.vmware.com";
const PREFIX: &str = "VMwareVSphere";
const WORKLOADS: &str = "vmware-vsphere-csi-driver";
const DISABLED: &str = "VMwareVSphereDriverControllerServiceControllerDisabled";

#[tokio::test]
async fn refuses_without_credentials_then_converges_once_they_exist() {
    let (cluster, admin) = openshift(json!({"type": "VSphere"})).await;
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({"config": "[Global]\ninsecure-flag = 1\n[VirtualCenter \"vc.example.com\"]\ndatacenters = dc1\n[Labels]\nregion = openshift-region\nzone = openshift-zone\n"}),
    )
    .await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    let running = start(&cluster, drivers::by_name("vsphere").unwrap(), None);

    let (reason, message) = condition_becomes(&admin, DRIVER, DISABLED, "True").await;
    assert_eq!(reason, "PreConditionNotSatisfied");
    assert!(
        message.contains("vmware-vsphere-cloud-credentials"),
        "{message}"
    );
    quiet(&cluster, &running).await;
    let deployments = Api::<Deployment>::namespaced(admin.clone(), NS);
    assert!(
        deployments
            .get_opt(&format!("{WORKLOADS}-controller"))
            .await
            .unwrap()
            .is_none(),
        "a refused driver starts no pods"
    );
    assert!(
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt(&format!("{WORKLOADS}-node"))
            .await
            .unwrap()
            .is_none()
    );
    for degraded in [
        "VMwareVSphereDriverControllerServiceControllerDegraded",
        "VMwareVSphereDriverStaticResourcesControllerDegraded",
    ] {
        assert_eq!(
            condition(&admin, DRIVER, degraded).await.unwrap().0,
            "False"
        );
    }

    // A Secret without the password: still refused, and the message names the key.
    create_secret(
        &admin,
        "vmware-vsphere-cloud-credentials",
        "vc.example.com.username",
        "YWRtaW4=",
    )
    .await;
    eventually("the missing password named", async || {
        let (status, _, message) = condition(&admin, DRIVER, DISABLED).await?;
        (status == "True" && message.contains("has no key vc.example.com.password")).then_some(())
    })
    .await;

    // cloud-credential-operator completes the Secret: the driver starts.
    set_password(&admin, "czNjcmV0").await;
    condition_becomes(&admin, DRIVER, DISABLED, "False").await;
    healthy(&admin, DRIVER, PREFIX).await;
    let deployment = deployments
        .get(&format!("{WORKLOADS}-controller"))
        .await
        .unwrap();
    let containers = deployment.spec.unwrap().template.spec.unwrap().containers;
    assert!(containers.iter().any(|c| c.name == "vsphere-syncer"));
    let provisioner = containers
        .iter()
        .find(|c| c.name == "csi-provisioner")
        .unwrap();
    assert!(
        provisioner
            .args
            .as_ref()
            .unwrap()
            .contains(&"--strict-topology".to_owned())
    );
    let conf = generated_config(&admin).await;
    assert!(conf.contains("topology-categories = openshift-region,openshift-zone"));
    assert!(
        conf.contains("user = \"admin\"\npassword = \"s3cret\""),
        "{conf}"
    );
    let class = Api::<StorageClass>::all(admin.clone())
        .get("thin-csi")
        .await
        .unwrap();
    assert_eq!(
        class.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );

    // Idle: a second pass writes nothing.
    quiet(&cluster, &running).await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);

    // A new password: the config Secret follows, and its hash rolls the controller pods.
    let template = |d: Deployment| d.spec.unwrap().template.metadata.unwrap().annotations;
    let before = template(
        deployments
            .get(&format!("{WORKLOADS}-controller"))
            .await
            .unwrap(),
    );
    set_password(&admin, "bjN3").await;
    eventually("the new password in the config", async || {
        generated_config(&admin)
            .await
            .contains("password = \"n3w\"")
            .then_some(())
    })
    .await;
    eventually("the controller pods rolled", async || {
        let now = template(
            deployments
                .get(&format!("{WORKLOADS}-controller"))
                .await
                .ok()?,
        );
        (now != before).then_some(())
    })
    .await;
    running.stop().await;
}

/// Sets the password (base64) in the credentials Secret, as cloud-credential-operator would.
async fn set_password(admin: &kube::Client, base64: &str) {
    Api::<Secret>::namespaced(admin.clone(), NS)
        .patch(
            "vmware-vsphere-cloud-credentials",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"data": {"vc.example.com.password": base64}})),
        )
        .await
        .unwrap();
}

/// csi-vsphere.conf as the operator wrote it into its Secret.
async fn generated_config(admin: &kube::Client) -> String {
    let secret = Api::<Secret>::namespaced(admin.clone(), NS)
        .get("vsphere-csi-config-secret")
        .await
        .unwrap();
    String::from_utf8(secret.data.unwrap()["cloud.conf"].0.clone()).unwrap()
}
