//! The OpenStack Cinder driver operator on testkit: it waits for the cluster's cloud config
//! with a Degraded condition naming the ConfigMap and key (never crashing), converges once it
//! exists and then writes nothing, rolls the pods exactly once when the cloud config changes
//! what the driver sees, not at all for a comment, and keeps the last good config when the
//! cloud config breaks.

#![allow(clippy::unwrap_used)]

mod driver_testkit;

use std::time::Duration;

use driver_testkit::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use serde_json::json;

const DRIVER: &str = "cinder.csi.openstack.org";
const PREFIX: &str = "OpenStackCinder";
const WORKLOADS: &str = "openstack-cinder-csi-driver";
const STATIC_DEGRADED: &str = "OpenStackCinderDriverStaticResourcesControllerDegraded";

async fn cloud_conf(admin: &kube::Client) -> Option<String> {
    Api::<ConfigMap>::namespaced(admin.clone(), NS)
        .get_opt("cloud-conf")
        .await
        .unwrap()
        .and_then(|c| c.data)
        .and_then(|d| d.get("cloud.conf").cloned())
}

async fn settled(
    cluster: &testkit::Cluster,
    admin: &kube::Client,
    running: &testkit::Background,
) -> (i64, i64) {
    healthy(admin, DRIVER, PREFIX).await;
    quiet(cluster, running).await;
    generations(admin, WORKLOADS).await
}

#[tokio::test]
async fn cloud_config_drives_the_driver_config_and_rolls_the_pods_once() {
    let (cluster, admin) = openshift(json!({"type": "OpenStack"})).await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    create_secret(
        &admin,
        "openstack-cloud-credentials",
        "clouds.yaml",
        "Y2xvdWRzOiB7fQ==",
    )
    .await;
    let running = start(
        &cluster,
        drivers::by_name("openstack-cinder").unwrap(),
        None,
    );

    // No cloud config yet: Degraded names the ConfigMap and the key; the rest is applied.
    let (reason, message) = condition_becomes(&admin, DRIVER, STATIC_DEGRADED, "True").await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains("ConfigMap openshift-config/cloud-provider-config does not exist")
            && message.contains("key config"),
        "{message}"
    );
    eventually("the controller Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(&format!("{WORKLOADS}-controller"))
            .await
            .unwrap()
    })
    .await;
    assert_eq!(cloud_conf(&admin).await, None);

    // The installer's cloud config appears: the driver config is generated, Degraded clears.
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({"config": "[Global]\nsecret-name = openstack-credentials\n[BlockStorage]\nrescan-on-resize = false\n"}),
    )
    .await;
    condition_becomes(&admin, DRIVER, STATIC_DEGRADED, "False").await;
    let conf = eventually("cloud.conf", async || cloud_conf(&admin).await).await;
    assert!(conf.contains("use-clouds  = true") && conf.contains("rescan-on-resize = false"));
    let class = eventually("the default StorageClass", async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt("standard-csi")
            .await
            .unwrap()
    })
    .await;
    assert_eq!(class.provisioner, DRIVER);
    let before = settled(&cluster, &admin, &running).await;

    // Idle: a second pass writes nothing.
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);

    // A comment only: the generated config is the same, nothing rolls.
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({"config": "# reviewed\n[Global]\nsecret-name = openstack-credentials\n[BlockStorage]\nrescan-on-resize = false\n"}),
    )
    .await;
    quiet(&cluster, &running).await;
    assert_eq!(generations(&admin, WORKLOADS).await.0, before.0);

    // A real change: the pods roll, once.
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({"config": "[Global]\nsecret-name = openstack-credentials\n[BlockStorage]\nrescan-on-resize = true\n"}),
    )
    .await;
    eventually("the controller rolled for the new config", async || {
        (generations(&admin, WORKLOADS).await.0 > before.0).then_some(())
    })
    .await;
    let after = settled(&cluster, &admin, &running).await;
    assert_eq!(
        after.0,
        before.0 + 1,
        "the Deployment rolled more than once"
    );
    assert!(after.1 > before.1, "the node pods rolled too");
    assert!(
        cloud_conf(&admin)
            .await
            .unwrap()
            .contains("rescan-on-resize = true")
    );

    // A broken cloud config: Degraded names the key and the line; the last config and the
    // pods stay as they are.
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({"config": "[BlockStorage\n"}),
    )
    .await;
    let (_, message) = condition_becomes(&admin, DRIVER, STATIC_DEGRADED, "True").await;
    assert!(
        message.starts_with(
            "key config of ConfigMap openshift-config/cloud-provider-config is invalid: line 1"
        ),
        "{message}"
    );
    quiet(&cluster, &running).await;
    assert_eq!(generations(&admin, WORKLOADS).await.0, after.0);
    assert!(
        cloud_conf(&admin)
            .await
            .unwrap()
            .contains("rescan-on-resize = true")
    );
    running.stop().await;
}
