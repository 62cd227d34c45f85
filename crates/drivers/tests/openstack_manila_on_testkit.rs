//! The OpenStack Manila driver operator on testkit with a fake cloud: Disabled (nothing
//! applied) while the cloud offers no share types, enabled with one StorageClass per share type
//! once they appear, a class more when another appears, and no writes when idle.

#![allow(clippy::unwrap_used)]

mod driver_testkit;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use driver_testkit::*;
use drivers::openstack_manila::{self, ShareTypes};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use serde_json::json;

const DRIVER: &str = "manila.csi.openstack.org";
const PREFIX: &str = "Manila";
const WORKLOADS: &str = "openstack-manila-csi-driver";
const DISABLED: &str = "ManilaDriverControllerServiceControllerDisabled";

/// A cloud whose share types the test changes.
#[derive(Clone, Default)]
struct FakeCloud(Arc<Mutex<Vec<String>>>);

impl ShareTypes for FakeCloud {
    fn share_types(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + '_>> {
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
    quiet(&cluster).await;
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(&format!("{WORKLOADS}-controller"))
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
    let node = Api::<DaemonSet>::namespaced(admin.clone(), NS)
        .get(&format!("{WORKLOADS}-node"))
        .await
        .unwrap();
    let containers = node.spec.unwrap().template.spec.unwrap().containers;
    assert!(containers.iter().any(|c| c.name == "csi-nfs-node"));

    // Another share type: another class.
    cloud.0.lock().unwrap().push("gold".to_owned());
    eventually("csi-manila-gold", async || {
        class(&admin, "csi-manila-gold").await
    })
    .await;

    // Idle: the probe keeps asking, but nothing is written.
    quiet(&cluster).await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);
    running.stop().await;
}
