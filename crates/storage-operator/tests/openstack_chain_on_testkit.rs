//! The whole chain on OpenStack: the cluster storage operator starts Cinder and Manila; the
//! driver operators run in-process (as their Deployments would) against a fake cloud without
//! Manila share types. Manila says Disabled, and ClusterOperator/storage is still Available,
//! with `ManilaCSIDriverOperatorCRAvailable` True for reason `DriverDisabled`. When the cloud
//! gets a share type, Manila is enabled and its condition turns to a real Available.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::config_v1::ClusterOperator;
use api::operator_v1::Storage;
use drivers::openstack_manila::{self, ShareTypes};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;
use storage_operator::plan::Settings;
use testkit::Background;

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

async fn create<K>(client: &Client, namespace: Option<&str>, value: serde_json::Value)
where
    K: kube::Resource<DynamicType = ()>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    let resource = kube::api::ApiResource::erase::<K>(&());
    let api: Api<kube::api::DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: kube::api::DynamicObject =
        serde_json::from_value(serde_json::to_value(&object).unwrap()).unwrap();
    api.create(&PostParams::default(), &dynamic).await.unwrap();
}

fn driver_operator(
    cluster: &testkit::Cluster,
    short_name: &'static str,
    probe: Option<driver_operator::ProbeConfig>,
) -> Background {
    let client = cluster.client_with_agent(short_name);
    Background::spawn(move |shutdown| async move {
        driver_operator::run_with_probe(
            client,
            drivers::by_name(short_name).unwrap(),
            driver_operator::Settings::default(),
            probe,
            Metrics::new(),
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
}

async fn storage_condition(client: &Client, type_: &str) -> Option<(String, String)> {
    let storage = Api::<Storage>::all(client.clone())
        .get_opt("cluster")
        .await
        .unwrap()?;
    let c = storage.status?.condition(type_)?.clone();
    Some((c.status.to_string(), c.reason.unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manila_without_share_types_leaves_storage_available() {
    let cluster = testkit::Cluster::start().await;
    cluster.simulate_workloads(testkit::SimConfig::default());
    for node in ["master-0", "master-1", "master-2", "worker-0"] {
        cluster.add_node(node, true);
    }
    let admin = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": {"type": "OpenStack"}}
    });
    create::<api::config_v1::Infrastructure>(&admin, None, infrastructure.clone()).await;
    Api::<api::config_v1::Infrastructure>::all(admin.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    // What the installer and cloud-credential-operator provide for Cinder.
    create::<Namespace>(
        &admin,
        None,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
    )
    .await;
    create::<ConfigMap>(
        &admin,
        Some("openshift-config"),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cloud-provider-config", "namespace": "openshift-config"},
               "data": {"config": "[Global]\nsecret-name = openstack-credentials\n"}}),
    )
    .await;

    let cso = {
        let client = cluster.client_with_agent("storage-operator");
        Background::spawn(move |shutdown| async move {
            storage_operator::operator::run(
                client,
                Settings {
                    operator_image: "example.com/so:1".into(),
                    env: Default::default(),
                    version: "4.20.0".into(),
                    operator_log_level: None,
                    metrics_tls: None,
                },
                Metrics::new(),
                Readiness::default(),
                shutdown,
            )
            .await
            .unwrap();
        })
    };
    // The driver namespace exists once the cluster storage operator made it.
    testkit::eventually(
        "the driver namespace",
        Duration::from_secs(60),
        async || {
            Api::<Namespace>::all(admin.clone())
                .get_opt("openshift-cluster-csi-drivers")
                .await
                .unwrap()
        },
    )
    .await;
    create::<Secret>(
        &admin,
        Some("openshift-cluster-csi-drivers"),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "openstack-cloud-credentials", "namespace": "openshift-cluster-csi-drivers"},
               "data": {"clouds.yaml": "Y2xvdWRzOiB7fQ=="}}),
    )
    .await;
    let cloud = FakeCloud::default();
    let cinder = driver_operator(&cluster, "openstack-cinder", None);
    let manila = driver_operator(
        &cluster,
        "openstack-manila",
        Some(openstack_manila::probe(
            cloud.clone(),
            Duration::from_millis(500),
        )),
    );

    let operators: Api<ClusterOperator> = Api::all(admin.clone());
    let available = testkit::eventually(
        "ClusterOperator/storage Available",
        Duration::from_secs(90),
        async || {
            operators
                .get_opt("storage")
                .await
                .unwrap()
                .and_then(|c| c.status)
                .and_then(|s| s.condition("Available").cloned())
                .filter(|c| c.status.to_string() == "True")
        },
    )
    .await;
    assert_eq!(available.reason.as_deref(), Some("AsExpected"));
    let manila_cr = testkit::eventually(
        "ManilaCSIDriverOperatorCRAvailable DriverDisabled",
        Duration::from_secs(60),
        async || {
            storage_condition(&admin, "ManilaCSIDriverOperatorCRAvailable")
                .await
                .filter(|(_, reason)| reason == "DriverDisabled")
        },
    )
    .await;
    assert_eq!(manila_cr.0, "True");
    assert_eq!(
        storage_condition(&admin, "OpenStackCinderCSIDriverOperatorCRAvailable")
            .await
            .unwrap()
            .0,
        "True"
    );

    // A share type appears: Manila runs and reports a real Available.
    cloud.0.lock().unwrap().push("default".to_owned());
    testkit::eventually(
        "ManilaCSIDriverOperatorCRAvailable from the running driver",
        Duration::from_secs(90),
        async || {
            storage_condition(&admin, "ManilaCSIDriverOperatorCRAvailable")
                .await
                .filter(|(status, reason)| status == "True" && reason != "DriverDisabled")
        },
    )
    .await;

    manila.stop().await;
    cinder.stop().await;
    cso.stop().await;
}
