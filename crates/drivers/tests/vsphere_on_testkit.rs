//! The vSphere driver operator on testkit: without the vCenter credentials it refuses
//! (Disabled with the reason, nothing applied, no pods to crash-loop); once the Secret exists
//! it converges, enforces topology from the cloud config, and then writes nothing.

#![allow(clippy::unwrap_used)]

mod driver_testkit;

use std::time::Duration;

use driver_testkit::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::ConfigMap;
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

    // cloud-credential-operator writes the Secret: the driver starts.
    create_secret(
        &admin,
        "vmware-vsphere-cloud-credentials",
        "vc.example.com.username",
        "YWRtaW4=",
    )
    .await;
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
    let conf = Api::<ConfigMap>::namespaced(admin.clone(), NS)
        .get("vsphere-csi-config")
        .await
        .unwrap()
        .data
        .unwrap()["cloud.conf"]
        .clone();
    assert!(conf.contains("topology-categories = openshift-region,openshift-zone"));
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
    running.stop().await;
}
