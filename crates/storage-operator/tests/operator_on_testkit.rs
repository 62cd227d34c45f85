//! `storage-operator run` against the in-process API server: on OpenShift (Infrastructure,
//! ClusterOperator) and on plain Kubernetes (platform from node provider IDs).

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

#[path = "../../drivers/tests/openshift_parity/fixtures.rs"]
mod fixtures;

use std::time::Duration;

use api::config_v1::ClusterOperator;
use api::operator_v1::{ClusterCSIDriver, Storage};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSIDriver;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use storage_operator::plan::{STARTER, Settings};
use testkit::Background;

const NS: &str = "openshift-cluster-csi-drivers";

/// What the install manifests make before the operator runs: the CRDs of `kinds` and the
/// operator's own namespace (where it runs the volume data source validator).
async fn install_crds(client: &Client, kinds: &[&str]) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds::all() {
        if kinds.contains(&crd.spec.names.kind.as_str()) {
            api.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": storage_operator::plan::OPERATOR_NAMESPACE}});
    match Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(namespace).unwrap(),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the operator's namespace: {error}"),
    }
}

async fn create<K>(client: &Client, value: Value)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// Creates Infrastructure `cluster` with `status`, set as the installer sets it (status is a
/// subresource: created first, then applied).
async fn install_infrastructure(admin: &Client, status: Value) {
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": status
    });
    create::<api::config_v1::Infrastructure>(admin, infrastructure.clone()).await;
    Api::<api::config_v1::Infrastructure>::all(admin.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
}

fn settings() -> Settings {
    Settings {
        operator_image: "example.com/storage-operator:1".into(),
        env: [(
            "GCP_PD_DRIVER_IMAGE".to_owned(),
            "example.com/pd:1".to_owned(),
        )]
        .into(),
        version: "4.20.0".into(),
        operator_log_level: None,
        metrics_tls: None,
    }
}

fn start(client: Client) -> Background {
    start_with(client, settings())
}

fn start_with(client: Client, settings: Settings) -> Background {
    let metrics = Metrics::new();
    let settling = metrics.settling(STARTER);
    Background::spawn(|shutdown| async move {
        storage_operator::operator::run(client, settings, metrics, Readiness::default(), shutdown)
            .await
            .unwrap();
    })
    .settles_when(settling)
}

/// Sets Storage/cluster's managementState, as an admin would.
async fn set_management_state(admin: &Client, state: &str) {
    Api::<Storage>::all(admin.clone())
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"managementState": state}})),
        )
        .await
        .unwrap();
}

/// Waits up to a minute for `check` (the machines are slow and shared).
async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

async fn storage_condition(client: &Client, type_: &str) -> Option<(String, String, String)> {
    let storage = Api::<Storage>::all(client.clone())
        .get_opt("cluster")
        .await
        .unwrap()?;
    let condition = storage.status?.condition(type_)?.clone();
    Some((
        condition.status.to_string(),
        condition.reason.unwrap_or_default(),
        condition.message.unwrap_or_default(),
    ))
}

async fn co_condition(client: &Client, type_: &str) -> Option<(String, String, String)> {
    let co = Api::<ClusterOperator>::all(client.clone())
        .get_opt("storage")
        .await
        .unwrap()?;
    let condition = co.status?.condition(type_)?.clone();
    Some((
        condition.status.to_string(),
        condition.reason.unwrap_or_default(),
        condition.message.unwrap_or_default(),
    ))
}

#[tokio::test]
async fn on_openshift_it_starts_the_platform_driver_and_reports_up_the_chain() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("info")
        .with_test_writer()
        .try_init();
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(
        &admin,
        &[
            "ClusterCSIDriver",
            "Storage",
            "ClusterOperator",
            "Infrastructure",
            "FeatureGate",
            "Proxy",
        ],
    )
    .await;
    // Status is a subresource: set it as the installer does, after creating the object.
    install_infrastructure(
        &admin,
        json!({"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
               "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}),
    )
    .await;
    create::<Storage>(&admin, json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "Storage", "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed", "logLevel": "Debug"}
    }))
    .await;

    let operator = cluster.client_with_agent("storage-operator");
    let running = start(operator);

    // The driver operator's Deployment runs this binary for gcp-pd with the GCP PD image.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let deployment = eventually("the driver operator Deployment", async || {
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
    })
    .await;
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(
        container.args.as_deref().unwrap(),
        [
            "driver",
            "gcp-pd",
            "--config=/var/run/configmaps/config/config.yaml",
            "--metrics-address=0.0.0.0:8443"
        ]
    );
    assert!(
        container
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "DRIVER_IMAGE" && e.value.as_deref() == Some("example.com/pd:1"))
    );

    // The ClusterCSIDriver is created with the Storage log level.
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    let driver = eventually("the ClusterCSIDriver", async || {
        drivers.get_opt("pd.csi.storage.gke.io").await.unwrap()
    })
    .await;
    assert_eq!(
        driver.spec.operator.log_level,
        Some(api::operator_v1::LogLevel::Debug)
    );

    // Until the driver operator reports, Storage and the ClusterOperator wait for it.
    let available = eventually("Storage waiting for the driver", async || {
        storage_condition(&admin, "GCPPDCSIDriverOperatorCRAvailable").await
    })
    .await;
    assert_eq!(available.0, "False");
    assert_eq!(available.1, "WaitForOperator");
    let co = eventually("ClusterOperator Available", async || {
        co_condition(&admin, "Available").await
    })
    .await;
    assert_eq!(co.0, "False");
    assert_eq!(co.1, "GCPPDCSIDriverOperatorCR_WaitForOperator");
    assert!(
        co.2.contains(
            "GCPPDCSIDriverOperatorCRAvailable: Waiting for GCPPD operator to report status"
        ),
        "{}",
        co.2
    );

    // The driver operator reports Available: the ClusterOperator follows and reports its version.
    drivers
        .patch_status(
            "pd.csi.storage.gke.io",
            &PatchParams::apply("driver-operator").force(),
            &Patch::Apply(json!({
                "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": "pd.csi.storage.gke.io"},
                "status": {"conditions": [
                    {"type": "GCPPDDriverControllerServiceControllerAvailable", "status": "True", "reason": "AsExpected",
                     "lastTransitionTime": "2026-11-22T10:00:00Z"},
                    {"type": "GCPPDDriverNodeServiceControllerAvailable", "status": "True", "reason": "AsExpected",
                     "lastTransitionTime": "2026-11-22T10:00:00Z"},
                    {"type": "GCPPDDriverControllerServiceControllerProgressing", "status": "False", "reason": "AsExpected",
                     "lastTransitionTime": "2026-11-22T10:00:00Z"}
                ]}
            })),
        )
        .await
        .unwrap();
    eventually("ClusterOperator Available=True", async || {
        co_condition(&admin, "Available")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    let co = Api::<ClusterOperator>::all(admin.clone())
        .get("storage")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(co.versions[0].name, "operator");
    assert_eq!(co.versions[0].version, "4.20.0");
    assert!(
        co.related_objects
            .iter()
            .any(|r| r.resource == "clustercsidrivers" && r.name == "pd.csi.storage.gke.io")
    );
    assert_eq!(
        co.condition("Degraded").unwrap().status.to_string(),
        "False"
    );

    // Idle: once converged, nothing is written.
    running.converged(&cluster, "storage-operator").await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes: Vec<_> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.from_client("storage-operator") && r.is_write())
        .collect();
    assert!(writes.is_empty(), "an idle operator wrote: {writes:#?}");

    // An admin's edit to the ClusterCSIDriver is kept; a deleted one is recreated.
    let passes = running.passes();
    drivers
        .patch(
            "pd.csi.storage.gke.io",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"logLevel": "TraceAll"}})),
        )
        .await
        .unwrap();
    running
        .converged_since(&cluster, "storage-operator", passes)
        .await;
    assert_eq!(
        drivers
            .get("pd.csi.storage.gke.io")
            .await
            .unwrap()
            .spec
            .operator
            .log_level,
        Some(api::operator_v1::LogLevel::TraceAll)
    );
    drivers
        .delete("pd.csi.storage.gke.io", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the ClusterCSIDriver recreated", async || {
        drivers.get_opt("pd.csi.storage.gke.io").await.unwrap()
    })
    .await;

    // Drift: an admin scales the driver operator to zero; it comes back.
    deployments
        .patch(
            "gcp-pd-csi-driver-operator",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    eventually("the driver operator scaled back", async || {
        let replicas = deployments
            .get("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas;
        (replicas == Some(1)).then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn on_plain_kubernetes_it_infers_the_platform_from_nodes() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Storage"]).await;
    for (name, control_plane) in [("cp-1", true), ("worker-1", false)] {
        let mut node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                              "spec": {"providerID": format!("gce://my-project/europe-west4-a/{name}")}});
        if control_plane {
            node["metadata"]["labels"] = json!({"node-role.kubernetes.io/control-plane": ""});
        }
        create::<Node>(&admin, node).await;
    }
    let running = start(cluster.client_with_agent("storage-operator"));

    // Storage/cluster is created when missing, and says how the platform was found.
    let starter = eventually("the starter's Available condition", async || {
        storage_condition(&admin, "CSIDriverStarterAvailable").await
    })
    .await;
    assert_eq!(starter.0, "True");
    assert!(
        starter
            .2
            .contains("GCP (inferred from the provider ID of 2 of 2 nodes"),
        "{}",
        starter.2
    );
    assert!(
        starter.2.contains("CSI driver operators started: gcp-pd"),
        "{}",
        starter.2
    );

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let deployment = eventually("the driver operator Deployment", async || {
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
    })
    .await;
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.node_selector.unwrap().keys().collect::<Vec<_>>(),
        ["node-role.kubernetes.io/control-plane"],
        "control-plane nodes exist: the operator runs there"
    );
    assert!(
        pod.priority_class_name.is_none(),
        "no OpenShift priority class on plain Kubernetes"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_foreign_csi_driver_blocks_ours_and_says_what_to_remove() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Storage"]).await;
    create::<Node>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                                  "spec": {"providerID": "gce://p/z/n"}}),
    )
    .await;
    create::<CSIDriver>(
        &admin,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                                       "metadata": {"name": "pd.csi.storage.gke.io"}, "spec": {}}),
    )
    .await;
    let running = start(cluster.client_with_agent("storage-operator"));
    let degraded = eventually("CSIDriverStarterDegraded", async || {
        storage_condition(&admin, "CSIDriverStarterDegraded")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert!(
        degraded
            .2
            .contains("remove CSIDriver pd.csi.storage.gke.io"),
        "{}",
        degraded.2
    );
    assert_eq!(degraded.1, "ObjectNotOurs");
    assert!(
        degraded.2.contains("(installed by field manager "),
        "the installer is named: {}",
        degraded.2
    );
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    assert!(
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
            .is_none()
    );
    running.stop().await;
}

#[tokio::test]
async fn unmanaged_pauses_and_removed_is_refused_with_a_reason() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Storage", "ClusterOperator"]).await;
    create::<Node>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                                  "spec": {"providerID": "gce://p/z/n"}}),
    )
    .await;
    create::<Storage>(&admin, json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "Storage", "metadata": {"name": "cluster"},
        "spec": {"managementState": "Unmanaged"}
    }))
    .await;
    let running = start(cluster.client_with_agent("storage-operator"));

    // Unmanaged: the ClusterOperator says so, and no driver is started.
    let available = eventually("ClusterOperator Unmanaged", async || {
        co_condition(&admin, "Available")
            .await
            .filter(|c| c.1 == "Unmanaged")
    })
    .await;
    assert_eq!(available.0, "Unknown");
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    assert!(
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
            .is_none()
    );

    // Removed: platform storage cannot be removed; the operator says why and how to fix it.
    set_management_state(&admin, "Removed").await;
    let refused = eventually("ManagementStateDegraded", async || {
        storage_condition(&admin, "ManagementStateDegraded")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(refused.1, "Removed");
    assert!(
        refused.2.contains("Removed is not supported"),
        "{}",
        refused.2
    );
    assert!(
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
            .is_none()
    );

    // Back to Managed: the driver starts.
    set_management_state(&admin, "Managed").await;
    eventually("the driver operator Deployment", async || {
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn an_upgrade_rolls_the_driver_operator_to_the_new_images() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Storage"]).await;
    create::<Node>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                                  "spec": {"providerID": "gce://p/z/n"}}),
    )
    .await;
    let running = start(cluster.client_with_agent("storage-operator"));
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    eventually("the driver operator Deployment", async || {
        deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
    })
    .await;
    running.stop().await;

    // The new release brings new images: the restarted operator updates the Deployment in place.
    let mut upgraded = settings();
    upgraded.operator_image = "example.com/storage-operator:2".into();
    upgraded
        .env
        .insert("GCP_PD_DRIVER_IMAGE".into(), "example.com/pd:2".into());
    let running = start_with(cluster.client_with_agent("storage-operator"), upgraded);
    let container = eventually("the new images", async || {
        let deployment = deployments.get("gcp-pd-csi-driver-operator").await.unwrap();
        let container = deployment.spec.unwrap().template.spec.unwrap().containers[0].clone();
        (container.image.as_deref() == Some("example.com/storage-operator:2")).then_some(container)
    })
    .await;
    assert!(
        container
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "DRIVER_IMAGE" && e.value.as_deref() == Some("example.com/pd:2"))
    );
    running.stop().await;
}

#[tokio::test]
async fn a_platform_without_a_driver_installs_nothing_and_says_so() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Storage"]).await;
    // A kind-like node: no cloud provider ID.
    create::<Node>(&admin, json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kind-control-plane",
        "labels": {"node-role.kubernetes.io/control-plane": ""}}, "spec": {"providerID": "kind://docker/kind/kind-control-plane"}}))
    .await;
    let running = start(cluster.client_with_agent("storage-operator"));
    let starter = eventually("the starter's Available condition", async || {
        storage_condition(&admin, "CSIDriverStarterAvailable").await
    })
    .await;
    assert!(starter.2.contains("platform None"), "{}", starter.2);
    assert!(
        starter.2.contains("no CSI driver to install"),
        "{}",
        starter.2
    );
    assert_eq!(
        storage_condition(&admin, "CSIDriverStarterDegraded")
            .await
            .unwrap()
            .0,
        "False"
    );
    // No default StorageClass here, as OpenShift's DefaultStorageClassController says; and
    // with no driver operator to say Upgradeable, the starter says it.
    assert_eq!(
        storage_condition(&admin, "DefaultStorageClassControllerDisabled").await,
        Some((
            "True".into(),
            "UnsupportedPlatform".into(),
            "unsupported platform".into()
        ))
    );
    assert_eq!(
        storage_condition(&admin, "DefaultStorageClassControllerAvailable").await,
        Some((
            "True".into(),
            String::new(),
            "No default StorageClass for this platform".into()
        ))
    );
    assert_eq!(
        storage_condition(&admin, "StorageOperatorUpgradeable")
            .await
            .map(|c| c.0),
        Some("True".into())
    );
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    assert!(
        deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    running.stop().await;
}

#[tokio::test]
async fn the_operator_follows_its_own_log_level() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Storage"]).await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = {
        let seen = seen.clone();
        storage_operator::plan::LogLevelHook::new(move |level| {
            seen.lock().unwrap().push(level.to_string())
        })
    };
    let running = start_with(
        cluster.client_with_agent("storage-operator"),
        Settings {
            operator_log_level: Some(hook),
            ..settings()
        },
    );
    eventually("the default level applied", async || {
        (seen.lock().unwrap().as_slice() == ["Normal"]).then_some(())
    })
    .await;
    Api::<Storage>::all(admin.clone())
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"operatorLogLevel": "TraceAll"}})),
        )
        .await
        .unwrap();
    eventually("TraceAll applied", async || {
        (seen.lock().unwrap().last().map(String::as_str) == Some("TraceAll")).then_some(())
    })
    .await;
    assert_eq!(seen.lock().unwrap().len(), 2, "applied once per change");
    running.stop().await;
}

#[tokio::test]
async fn every_platform_gets_its_drivers_or_a_reason() {
    // (platform, drivers it needs, whether the catalogue has them all today)
    let platforms = [
        ("GCP", &["gcp-pd"][..], true),
        ("AWS", &["aws-ebs"][..], true),
        ("Azure", &["azure-disk", "azure-file"][..], true),
        (
            "OpenStack",
            &["openstack-manila", "openstack-cinder"][..],
            true,
        ),
        ("VSphere", &["vsphere"][..], true),
        ("IBMCloud", &["ibm-vpc-block"][..], true),
        ("PowerVS", &["powervs-block"][..], true),
        ("BareMetal", &[][..], true),
    ];
    for (platform, drivers, complete) in platforms {
        let cluster = testkit::Cluster::start().await;
        let admin = cluster.client();
        install_crds(&admin, &["ClusterCSIDriver", "Storage", "Infrastructure"]).await;
        install_infrastructure(
            &admin,
            json!({"infrastructureName": "c", "platformStatus": {"type": platform}}),
        )
        .await;
        let running = start(cluster.client_with_agent("storage-operator"));
        let degraded = eventually("the starter's Degraded condition", async || {
            storage_condition(&admin, "CSIDriverStarterDegraded").await
        })
        .await;
        if complete {
            assert_eq!(degraded.0, "False", "{platform}: {}", degraded.2);
        } else {
            assert_eq!(degraded.0, "True", "{platform}");
            for driver in drivers {
                assert!(
                    degraded
                        .2
                        .contains(&format!("no definition of the {driver} driver yet")),
                    "{platform}: {}",
                    degraded.2
                );
            }
        }
        let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
        let started = deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len();
        assert_eq!(
            started,
            if complete { drivers.len() } else { 0 },
            "{platform}"
        );
        running.stop().await;
    }
}

/// With the CSIDriverDeployment CRD served, `storage-operator run` also installs declared
/// drivers.
#[tokio::test]
async fn it_runs_the_csidriverdeployment_controller_when_the_crd_is_served() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(
        &admin,
        &["ClusterCSIDriver", "Storage", "CSIDriverDeployment"],
    )
    .await;
    create::<Node>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"},
               "spec": {"providerID": "kind://docker/kind/kind-worker"}}),
    )
    .await;
    let running = start(cluster.client_with_agent("storage-operator"));
    declare_and_see_installed(&admin, "mine", "mine.csi.example.com").await;
    running.stop().await;
}

#[tokio::test]
async fn the_csidriverdeployment_controller_starts_when_its_crd_is_installed_later() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Storage"]).await;
    create::<Node>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"},
               "spec": {"providerID": "kind://docker/kind/kind-worker"}}),
    )
    .await;
    let running = start(cluster.client_with_agent("storage-operator"));
    // The operator runs without it; then an admin installs the CRD, no restart.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    install_crds(&admin, &["CSIDriverDeployment"]).await;
    declare_and_see_installed(&admin, "later", "later.csi.example.com").await;
    running.stop().await;
}

/// Creates a minimal CSIDriverDeployment in `default` and waits for the CSIDriver its
/// controller installs.
async fn declare_and_see_installed(admin: &Client, name: &str, driver: &str) {
    let declared: api::csidriver_v1alpha1::CSIDriverDeployment = serde_json::from_value(json!({
        "apiVersion": "csidriver.storage.openshift.io/v1alpha1",
        "kind": "CSIDriverDeployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "driverName": driver,
            "driverSocket": "/csi/csi.sock",
            "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver", "image": "example.com/d:1"}]}},
        }
    }))
    .unwrap();
    Api::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &declared)
        .await
        .unwrap();
    eventually("the declared driver's CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(driver)
            .await
            .unwrap()
    })
    .await;
}

/// On OpenStack, Manila's operands live in `openshift-manila-csi-driver`, apart from its
/// operator: the starter makes that namespace (labelled for cluster monitoring), gives the
/// driver operator a Role and RoleBinding there and in its own namespace, lists the namespace
/// among the ClusterOperator's related objects, and, once converged, writes nothing.
#[tokio::test]
async fn operands_apart_from_their_operator_get_their_namespace_and_roles() {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    install_crds(
        &admin,
        &[
            "ClusterCSIDriver",
            "Storage",
            "ClusterOperator",
            "Infrastructure",
        ],
    )
    .await;
    install_infrastructure(
        &admin,
        json!({"infrastructureName": "c", "controlPlaneTopology": "HighlyAvailable",
               "platformStatus": {"type": "OpenStack"}}),
    )
    .await;
    let running = start(cluster.client_with_agent("storage-operator"));

    let manila = drivers::by_name("openstack-manila").unwrap();
    let apart = manila.namespace.as_str();
    assert_eq!(apart, "openshift-manila-csi-driver");
    let operator = storage_operator::registry::find("openstack-manila")
        .unwrap()
        .operator_deployment;
    let namespace = eventually("Manila's operand namespace", async || {
        Api::<Namespace>::all(admin.clone())
            .get_opt(apart)
            .await
            .unwrap()
    })
    .await;
    let labels = namespace.metadata.labels.unwrap();
    assert_eq!(labels["openshift.io/cluster-monitoring"], "true");
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    for ns in [apart, NS] {
        let role = eventually(&format!("the driver operator's Role in {ns}"), async || {
            Api::<Role>::namespaced(admin.clone(), ns)
                .get_opt(&format!("{operator}-role"))
                .await
                .unwrap()
        })
        .await;
        let binding = eventually(
            &format!("the driver operator's RoleBinding in {ns}"),
            async || {
                Api::<RoleBinding>::namespaced(admin.clone(), ns)
                    .get_opt(&format!("{operator}-rolebinding"))
                    .await
                    .unwrap()
            },
        )
        .await;
        assert_eq!(Some(binding.role_ref.name), role.metadata.name);
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(subject.namespace.as_deref(), Some(NS));
    }
    // The driver operator itself runs in the driver namespace.
    eventually("Manila's driver operator Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(operator)
            .await
            .unwrap()
    })
    .await;
    eventually(
        "the operand namespace among the related objects",
        async || {
            let co = Api::<ClusterOperator>::all(admin.clone())
                .get_opt("storage")
                .await
                .unwrap()?;
            co.status?
                .related_objects
                .iter()
                .any(|r| r.resource == "namespaces" && r.name == apart)
                .then_some(())
        },
    )
    .await;

    // Idle: the objects in the operand namespace are watched too, so nothing is rewritten.
    running.converged(&cluster, "storage-operator").await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes: Vec<_> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.from_client("storage-operator") && r.is_write())
        .collect();
    assert!(writes.is_empty(), "an idle operator wrote: {writes:#?}");
    running.stop().await;
}

/// An OpenShift cluster whose Infrastructure has the status `infrastructure`, with
/// Storage/cluster Managed; the admin's client.
async fn openshift_on(cluster: &testkit::Cluster, infrastructure: serde_json::Value) -> Client {
    let admin = cluster.client();
    install_crds(
        &admin,
        &[
            "ClusterCSIDriver",
            "Storage",
            "ClusterOperator",
            "Infrastructure",
        ],
    )
    .await;
    install_infrastructure(&admin, infrastructure).await;
    create::<Storage>(&admin, json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "Storage", "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed"}
    }))
    .await;
    admin
}

/// A GCP cluster on OpenShift, with Storage/cluster Managed.
async fn gcp_openshift(cluster: &testkit::Cluster) -> Client {
    openshift_on(
        cluster,
        json!({"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
               "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}),
    )
    .await
}

/// The `config.yaml` OpenShift's cluster-storage-operator writes into a driver operator's
/// config ConfigMap when the cluster has no TLS profile (Intermediate): sigs.k8s.io/yaml of
/// its GenericOperatorConfig map.
const OPENSHIFTS_INTERMEDIATE_CONFIG: &str = "apiVersion: operator.openshift.io/v1alpha1
kind: GenericOperatorConfig
servingInfo:
  cipherSuites:
  - TLS_AES_128_GCM_SHA256
  - TLS_AES_256_GCM_SHA384
  - TLS_CHACHA20_POLY1305_SHA256
  - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
  - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
  - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
  - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
  - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
  - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
  minTLSVersion: VersionTLS12
";

/// The GCP PD driver operator as OpenShift's cluster-storage-operator wrote it: its namespace,
/// ServiceAccount and Deployment (`strategy: {}`, so the API server's RollingUpdate defaults),
/// created under its field manager.
async fn seed_openshifts_gcp_pd_operator(cluster: &testkit::Cluster, admin: &Client) {
    create::<k8s_openapi::api::core::v1::Namespace>(
        admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    let former = cluster.client_with_agent(storage_operator::operator::FORMER_OPERATOR);
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(former.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "gcp-pd-csi-driver-operator",
                "namespace": NS}, "automountServiceAccountToken": true}))
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(former.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "gcp-pd-csi-driver-operator-config", "namespace": NS},
                "data": {"config.yaml": OPENSHIFTS_INTERMEDIATE_CONFIG}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<Deployment>::namespaced(former, NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "gcp-pd-csi-driver-operator", "namespace": NS,
                             "annotations": {"config.openshift.io/inject-proxy": "gcp-pd-csi-driver-operator"}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"name": "gcp-pd-csi-driver-operator"}},
                    "strategy": {},
                    "template": {"metadata": {"labels": {"name": "gcp-pd-csi-driver-operator"}},
                        "spec": {"serviceAccountName": "gcp-pd-csi-driver-operator",
                            "priorityClassName": "system-cluster-critical",
                            "containers": [{"name": "gcp-pd-csi-driver-operator",
                                "image": "quay.io/openshift/gcp-pd-csi-driver-operator:4.22",
                                "args": ["start", "-v=2"]}]}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
}

/// Taking over from OpenShift's cluster-storage-operator: the driver operator Deployment it
/// made (RollingUpdate, written with Update) becomes ours whole, `Recreate` with no rolling
/// update parameters left (before, every pass was refused with 422 and nothing said so), and
/// the status says all is well.
#[tokio::test]
async fn takes_over_the_driver_operator_openshifts_cso_made() {
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    seed_openshifts_gcp_pd_operator(&cluster, &admin).await;
    let running = start(cluster.client_with_agent("storage-operator"));

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let deployment = eventually("our driver operator Deployment", async || {
        let d = deployments
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()?;
        let args = d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
            .args
            .clone()?;
        (args
            == [
                "driver",
                "gcp-pd",
                "--config=/var/run/configmaps/config/config.yaml",
                "--metrics-address=0.0.0.0:8443",
            ])
        .then_some(d)
    })
    .await;
    let spec = deployment.spec.clone().unwrap();
    let strategy = spec.strategy.unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("Recreate"));
    assert!(strategy.rolling_update.is_none(), "{strategy:?}");
    let containers = spec.template.spec.unwrap().containers;
    assert_eq!(containers.len(), 1, "one container, ours: {containers:?}");
    assert!(
        deployment
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .all(|e| e.manager.as_deref() != Some(storage_operator::operator::FORMER_OPERATOR)),
        "no field is left to the former operator: {:?}",
        deployment.metadata.managed_fields
    );
    // OpenShift's config ConfigMap is ours now, its content as it was.
    let config = eventually("the config ConfigMap taken over", async || {
        let c = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(admin.clone(), NS)
            .get("gcp-pd-csi-driver-operator-config")
            .await
            .unwrap();
        c.metadata
            .managed_fields
            .iter()
            .flatten()
            .all(|e| e.manager.as_deref() != Some(storage_operator::operator::FORMER_OPERATOR))
            .then_some(c)
    })
    .await;
    assert_eq!(
        config.data.unwrap()["config.yaml"],
        OPENSHIFTS_INTERMEDIATE_CONFIG
    );
    for type_ in [
        "GCPPDCSIDriverOperatorDeploymentDegraded",
        "GCPPDCSIDriverOperatorStaticControllerDegraded",
        "CSIDriverStarterDegraded",
        "DefaultStorageClassControllerDegraded",
        "DefaultStorageClassControllerProgressing",
    ] {
        eventually(&format!("{type_}=False"), async || {
            storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == "False")
        })
        .await;
    }
    assert_eq!(
        storage_condition(&admin, "DefaultStorageClassControllerAvailable")
            .await
            .map(|c| c.2),
        Some(storage_operator::default_storage_class::PROVIDED_BY_CSI.into())
    );
    assert_eq!(
        storage_condition(&admin, "DefaultStorageClassControllerDisabled").await,
        None
    );
    running.converged(&cluster, "storage-operator").await;
    running.stop().await;
}

/// The cluster's TLS profile (`APIServer/cluster`) goes into the driver operator's config
/// ConfigMap and follows it when it changes; a Custom profile no server can use is reported
/// in the Deployment's Degraded, naming the field, and leaves the ConfigMap as it was until
/// the profile is fixed.
#[tokio::test]
async fn the_tls_profile_follows_apiserver_into_the_operator_config() {
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.create(
        &PostParams::default(),
        &<api::config_v1::APIServer as kube::CustomResourceExt>::crd(),
    )
    .await
    .unwrap();
    let api_servers: Api<api::config_v1::APIServer> = Api::all(admin.clone());
    let set_profile = async |profile: Value| {
        api_servers
            .patch(
                "cluster",
                &PatchParams::apply("admin").force(),
                &Patch::Apply(
                    json!({"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
                    "metadata": {"name": "cluster"}, "spec": {"tlsSecurityProfile": profile}}),
                ),
            )
            .await
            .unwrap();
    };
    set_profile(json!({"type": "Intermediate", "intermediate": {}})).await;
    // The operator's own /metrics follow the profile too (through this cell).
    let metrics_tls = opkit::secure_metrics::ProfileCell::default();
    let running = start_with(
        cluster.client_with_agent("storage-operator"),
        Settings {
            metrics_tls: Some(metrics_tls.clone()),
            ..settings()
        },
    );
    let served = |min: &str| {
        let metrics_tls = metrics_tls.clone();
        let min = min.to_owned();
        async move || {
            let profile = metrics_tls.get();
            (profile.min_version.as_deref() == Some(&min)).then_some(profile)
        }
    };

    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(admin.clone(), NS);
    let config_yaml = async || {
        config_maps
            .get_opt("gcp-pd-csi-driver-operator-config")
            .await
            .unwrap()
            .and_then(|c| c.data)
            .and_then(|mut d| d.remove("config.yaml"))
    };
    let intermediate = eventually("the Intermediate config", async || config_yaml().await).await;
    assert_eq!(intermediate, OPENSHIFTS_INTERMEDIATE_CONFIG);
    let profile = eventually("the metrics' Intermediate profile", served("VersionTLS12")).await;
    assert!(
        profile
            .cipher_suites
            .contains(&"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned()),
        "{profile:?}"
    );

    set_profile(json!({"type": "Modern", "modern": {}})).await;
    let modern = eventually("the Modern config", async || {
        config_yaml()
            .await
            .filter(|c| c.contains("minTLSVersion: VersionTLS13"))
    })
    .await;
    assert!(!modern.contains("ECDHE"), "{modern}");
    eventually("the metrics' Modern profile", served("VersionTLS13")).await;

    set_profile(
        json!({"type": "Custom", "custom": {"ciphers": ["NOT-A-CIPHER"],
        "minTLSVersion": "VersionTLS12"}}),
    )
    .await;
    let (_, reason, message) = eventually("the invalid profile's Degraded", async || {
        storage_condition(&admin, "GCPPDCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains("spec.tlsSecurityProfile.custom.ciphers")
            && message.contains("gcp-pd-csi-driver-operator-config"),
        "{message}"
    );
    assert_eq!(config_yaml().await.unwrap(), modern);
    assert_eq!(
        metrics_tls.get().min_version.as_deref(),
        Some("VersionTLS13"),
        "an invalid profile leaves the metrics' in force"
    );

    set_profile(
        json!({"type": "Custom", "custom": {"ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"],
        "minTLSVersion": "VersionTLS12"}}),
    )
    .await;
    eventually("the Custom config", async || {
        config_yaml().await.filter(|c| {
            c.contains("  - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n  minTLSVersion: VersionTLS12")
        })
    })
    .await;
    let custom = eventually("the metrics' Custom profile", served("VersionTLS12")).await;
    assert_eq!(
        custom.cipher_suites,
        ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
        "{custom:?}"
    );
    eventually("Degraded cleared", async || {
        storage_condition(&admin, "GCPPDCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    running.converged(&cluster, "storage-operator").await;
    running.stop().await;
}

/// A write that keeps failing is never silent: in the pass it fails, the part it belongs to
/// says Degraded with the object and the API server's answer (the other objects are still
/// applied, the rest of the status still written), and once the write succeeds it clears.
#[tokio::test]
async fn a_write_that_keeps_failing_is_degraded_in_the_same_pass() {
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    cluster.inject(testkit::FaultRule::status(
        Some("patch"),
        Some("deployments"),
        403,
    ));
    let running = start(cluster.client_with_agent("storage-operator"));

    let (_, reason, message) = eventually("the Deployment's Degraded", async || {
        storage_condition(&admin, "GCPPDCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains("Deployment openshift-cluster-csi-drivers/gcp-pd-csi-driver-operator")
            && message.contains("403"),
        "{message}"
    );
    // The rest was applied and reported.
    assert!(
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), NS)
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        storage_condition(&admin, "GCPPDCSIDriverOperatorStaticControllerDegraded")
            .await
            .map(|c| c.0),
        Some("False".into())
    );
    assert!(
        co_condition(&admin, "Degraded").await.is_some(),
        "the ClusterOperator is written in the same pass"
    );

    cluster.clear_faults();
    eventually("Degraded cleared", async || {
        storage_condition(&admin, "GCPPDCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    running.stop().await;
}

/// Taking over Storage/cluster from OpenShift's operator: conditions that only it maintained
/// and ours does not write (a controller ours has no counterpart for) are removed, so that
/// nothing stale feeds the ClusterOperator; conditions ours writes become ours, and a
/// condition someone else also maintains stays.
#[tokio::test]
async fn conditions_only_the_former_operator_maintained_are_removed() {
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    let storages: Api<Storage> = Api::all(admin.clone());
    let condition = |type_: &str, status: &str| json!({"type": type_, "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let former_conditions = vec![
        condition(
            "VSphereProblemDetectorDeploymentControllerAvailable",
            "True",
        ),
        condition("SELinuxMountGAReadinessControllerUpgradeable", "False"),
        condition("GCPPDCSIDriverOperatorCRAvailable", "True"),
    ];
    let write = |manager: &str| PatchParams {
        field_manager: Some(manager.into()),
        ..PatchParams::default()
    };
    storages
        .patch_status(
            "cluster",
            &write(storage_operator::operator::FORMER_OPERATOR),
            &Patch::Merge(json!({"status": {"conditions": former_conditions}})),
        )
        .await
        .unwrap();
    let mut with_admins = former_conditions.clone();
    with_admins.push(condition("AdminNoteDegraded", "False"));
    storages
        .patch_status(
            "cluster",
            &write("admin-tool"),
            &Patch::Merge(json!({"status": {"conditions": with_admins}})),
        )
        .await
        .unwrap();

    let running = start(cluster.client_with_agent("storage-operator"));
    eventually("the stale conditions removed", async || {
        let gone = storage_condition(
            &admin,
            "VSphereProblemDetectorDeploymentControllerAvailable",
        )
        .await
        .is_none()
            && storage_condition(&admin, "SELinuxMountGAReadinessControllerUpgradeable")
                .await
                .is_none();
        gone.then_some(())
    })
    .await;
    running.converged(&cluster, "storage-operator").await;
    assert!(
        storage_condition(&admin, "AdminNoteDegraded")
            .await
            .is_some(),
        "a condition someone else maintains stays"
    );
    assert!(
        storage_condition(&admin, "GCPPDCSIDriverOperatorCRAvailable")
            .await
            .is_some(),
        "ours stays"
    );
    running.stop().await;
}

/// The volume data source validator, as OpenShift's VolumeDataSourceValidatorStarter installs
/// it: its ServiceAccount, RBAC, the VolumePopulator CRD and its Deployment (the image of
/// VOLUME_DATA_SOURCE_VALIDATOR_IMAGE), with OpenShift's conditions; once in place nothing is
/// written again.
#[tokio::test]
async fn it_installs_the_volume_data_source_validator() {
    use storage_operator::validator;
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    // Its pod rolls out (the workload simulation schedules it).
    cluster.simulate_workloads(testkit::SimConfig::default());
    cluster.add_node("master-0", true);
    let mut settings = settings();
    settings.env.insert(
        validator::IMAGE_ENV.into(),
        "example.com/validator:1".into(),
    );
    let running = start_with(cluster.client_with_agent("storage-operator"), settings);

    let deployments: Api<Deployment> =
        Api::namespaced(admin.clone(), storage_operator::plan::OPERATOR_NAMESPACE);
    let deployment = eventually("the validator's Deployment", async || {
        deployments.get_opt(validator::NAME).await.unwrap()
    })
    .await;
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("example.com/validator:1")
    );
    assert_eq!(pod.service_account_name.as_deref(), Some(validator::NAME));
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    assert!(crds.get_opt(validator::CRD_NAME).await.unwrap().is_some());
    assert!(
        Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
            .get_opt(validator::NAME)
            .await
            .unwrap()
            .is_some()
    );
    for (type_, status) in [
        ("VolumeDataSourceValidatorStarterDegraded", "False"),
        ("VolumeDataSourceValidatorStaticControllerDegraded", "False"),
        (
            "VolumeDataSourceValidatorDeploymentControllerDegraded",
            "False",
        ),
        (
            "VolumeDataSourceValidatorDeploymentControllerProgressing",
            "False",
        ),
    ] {
        eventually(&format!("{type_}={status}"), async || {
            storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == status)
        })
        .await;
    }
    running.converged(&cluster, "storage-operator").await;
    running.stop().await;
}

/// A VolumePopulator CRD someone else installed (upstream's, or a populator's) serves the same
/// API: it is left as it is, and the validator is installed next to it.
#[tokio::test]
async fn someone_elses_volume_populator_crd_is_left_alone() {
    use storage_operator::validator;
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    let mut theirs = validator::build_crd();
    theirs.metadata.labels = None;
    theirs
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("installed-by".into(), "a populator".into());
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.create(&PostParams::default(), &theirs).await.unwrap();
    let running = start(cluster.client_with_agent("storage-operator"));
    eventually("the validator's Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), storage_operator::plan::OPERATOR_NAMESPACE)
            .get_opt(validator::NAME)
            .await
            .unwrap()
    })
    .await;
    running.converged(&cluster, "storage-operator").await;
    let crd = crds.get(validator::CRD_NAME).await.unwrap();
    assert!(
        crd.metadata.managed_fields.iter().flatten().all(|e| !e
            .manager
            .as_deref()
            .unwrap_or_default()
            .starts_with("storage-operator")),
        "{:?}",
        crd.metadata.managed_fields
    );
    assert_eq!(crd.metadata.labels, None);
    running.stop().await;
}

/// The validator's objects have OpenShift's fixed names. A ServiceAccount and a Deployment of
/// those names that someone else made are left as they are, and Storage says so, naming them;
/// once they are deleted, the operator makes its own and the conditions clear.
#[tokio::test]
async fn someone_elses_validator_objects_are_left_alone_and_reported() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use storage_operator::plan::OPERATOR_NAMESPACE;
    use storage_operator::validator;
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    let theirs = PostParams {
        field_manager: Some("helm".into()),
        ..PostParams::default()
    };
    let service_accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    service_accounts
        .create(
            &theirs,
            &serde_json::from_value(json!({"metadata": {"name": validator::NAME,
                "labels": {"app": "theirs"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    let image = "example.com/their-validator:1";
    deployments
        .create(
            &theirs,
            &serde_json::from_value(json!({
                "metadata": {"name": validator::NAME},
                "spec": {"selector": {"matchLabels": {"app": "theirs"}},
                    "template": {"metadata": {"labels": {"app": "theirs"}},
                        "spec": {"containers": [{"name": "validator", "image": image}]}}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let running = start(cluster.client_with_agent("storage-operator"));

    for (type_, object) in [
        (
            "VolumeDataSourceValidatorStaticControllerDegraded",
            "ServiceAccount",
        ),
        (
            "VolumeDataSourceValidatorDeploymentControllerDegraded",
            "Deployment",
        ),
    ] {
        let (_, reason, message) = eventually(&format!("{type_}=True"), async || {
            storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == "True")
        })
        .await;
        assert_eq!(reason, "ObjectNotOurs");
        assert!(
            message.starts_with(&format!(
                "{object} {OPERATOR_NAMESPACE}/{} exists and was made neither",
                validator::NAME
            )),
            "{message}"
        );
    }
    running.converged(&cluster, "storage-operator").await;
    // Theirs, untouched; the rest of the validator is in place.
    let deployment = deployments.get(validator::NAME).await.unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0].image.as_deref(), Some(image));
    let service_account = service_accounts.get(validator::NAME).await.unwrap();
    assert_eq!(
        service_account.metadata.labels,
        Some([("app".to_owned(), "theirs".to_owned())].into())
    );
    for object in [&deployment.metadata, &service_account.metadata] {
        assert!(
            !opkit::ownership::applied_by_us(object),
            "{:?}",
            object.managed_fields
        );
    }
    assert!(
        Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
            .get_opt(validator::NAME)
            .await
            .unwrap()
            .is_some()
    );

    // Once they are gone, the operator makes its own.
    deployments
        .delete(validator::NAME, &Default::default())
        .await
        .unwrap();
    service_accounts
        .delete(validator::NAME, &Default::default())
        .await
        .unwrap();
    for type_ in [
        "VolumeDataSourceValidatorStaticControllerDegraded",
        "VolumeDataSourceValidatorDeploymentControllerDegraded",
    ] {
        eventually(&format!("{type_}=False"), async || {
            storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == "False")
        })
        .await;
    }
    let ours = eventually("our validator's Deployment", async || {
        deployments
            .get_opt(validator::NAME)
            .await
            .unwrap()
            .filter(|d| opkit::ownership::applied_by_us(&d.metadata))
    })
    .await;
    assert_ne!(
        ours.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some(image)
    );
    running.stop().await;
}

/// OpenShift's SELinuxMountGAReadinessController, with its feature gate on: while
/// `openshift-config/selinux-conflicts` says conflicting workloads are present, Storage and
/// the ClusterOperator say the cluster is not Upgradeable, and why; once it says none, it is.
#[tokio::test]
async fn selinux_mount_conflicts_block_the_upgrade() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    install_crds(&admin, &["FeatureGate"]).await;
    let version = settings().version;
    let gates = json!({"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
        "metadata": {"name": "cluster"}, "spec": {},
        "status": {"featureGates": [{"version": version,
            "enabled": [{"name": "SELinuxMountGAReadiness"}], "disabled": []}]}});
    create::<api::config_v1::FeatureGate>(&admin, gates.clone()).await;
    Api::<api::config_v1::FeatureGate>::all(admin.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(gates),
        )
        .await
        .unwrap();
    create::<Namespace>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
    )
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "openshift-config");
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "selinux-conflicts"},
                "data": {"conflictsPresent": "True"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let running = start(cluster.client_with_agent("storage-operator"));

    let (_, reason, message) = eventually("Upgradeable False", async || {
        storage_condition(&admin, "SELinuxMountGAReadinessControllerUpgradeable")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(reason, "SELinuxMountIncompatibleWorkloads");
    assert!(
        message.contains("selinux_warning_controller_selinux_volume_conflict"),
        "{message}"
    );
    eventually("the ClusterOperator not Upgradeable", async || {
        co_condition(&admin, "Upgradeable")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;

    config_maps
        .patch(
            "selinux-conflicts",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"conflictsPresent": "False"}})),
        )
        .await
        .unwrap();
    eventually("Upgradeable True", async || {
        storage_condition(&admin, "SELinuxMountGAReadinessControllerUpgradeable")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    running.stop().await;
}

/// OpenShift's config observation: the cluster-wide proxy goes into Storage's
/// `spec.observedConfig.targetconfig.proxy` (other keys there are left alone), and out again
/// when the proxy is removed; `ConfigObservationDegraded` says all is well.
#[tokio::test]
async fn the_cluster_proxy_is_observed_into_storage() {
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    install_crds(&admin, &["Proxy"]).await;
    let proxy = json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
        "metadata": {"name": "cluster"}, "spec": {},
        "status": {"httpsProxy": "http://proxy.example.com:3128", "noProxy": ".cluster.local"}});
    create::<api::config_v1::Proxy>(&admin, proxy.clone()).await;
    let proxies: Api<api::config_v1::Proxy> = Api::all(admin.clone());
    proxies
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(proxy),
        )
        .await
        .unwrap();
    let storages: Api<Storage> = Api::all(admin.clone());
    storages
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"observedConfig": {"someone": {"else": true}}}})),
        )
        .await
        .unwrap();
    let running = start(cluster.client_with_agent("storage-operator"));

    let observed_config = async || {
        storages
            .get("cluster")
            .await
            .unwrap()
            .spec
            .operator
            .observed_config
            .unwrap_or_default()
    };
    eventually("the proxy observed", async || {
        let config = observed_config().await;
        (config["targetconfig"]["proxy"]
            == json!({"HTTPS_PROXY": "http://proxy.example.com:3128", "NO_PROXY": ".cluster.local"}))
        .then_some(())
    })
    .await;
    assert_eq!(observed_config().await["someone"], json!({"else": true}));
    assert_eq!(
        storage_condition(&admin, "ConfigObservationDegraded")
            .await
            .map(|c| c.0),
        Some("False".into())
    );
    running.converged(&cluster, "storage-operator").await;

    proxies
        .patch_status(
            "cluster",
            &PatchParams::apply("installer").force(),
            &Patch::Apply(
                json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
                "metadata": {"name": "cluster"}, "status": {}}),
            ),
        )
        .await
        .unwrap();
    eventually("the proxy no longer observed", async || {
        let config = observed_config().await;
        config["targetconfig"].get("proxy").is_none().then_some(())
    })
    .await;
    running.stop().await;
}

/// A CRD of a Prometheus operator kind accepting any object (what kube-prometheus or
/// OpenShift's cluster monitoring installs, with no schema to speak of).
fn monitoring_crd(kind: storage_operator::monitoring::Kind) -> CustomResourceDefinition {
    fixtures::open_crd("monitoring.coreos.com", kind.kind(), kind.plural(), true)
}

async fn install_monitoring_crd(admin: &Client, kind: storage_operator::monitoring::Kind) {
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &monitoring_crd(kind))
        .await
        .unwrap();
}

fn monitoring_api(
    client: &Client,
    kind: storage_operator::monitoring::Kind,
) -> Api<kube::api::DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        storage_operator::plan::OPERATOR_NAMESPACE,
        &kind.api_resource(),
    )
}

const MONITORING_DEGRADED: &str = "StorageOperatorMonitoringControllerDegraded";

/// Without Prometheus' CRDs the operator applies no monitoring object and says all is well;
/// each CRD installed later brings its object at once (the CRDs are watched); once in place
/// nothing is written again.
#[tokio::test]
async fn the_service_monitor_and_rules_come_with_their_crds() {
    use storage_operator::monitoring::{Kind, build_prometheus_rule, build_service_monitor};
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    let running = start(cluster.client_with_agent("storage-operator"));
    eventually("monitoring not Degraded", async || {
        storage_condition(&admin, MONITORING_DEGRADED)
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    running.converged(&cluster, "storage-operator").await;

    install_monitoring_crd(&admin, Kind::ServiceMonitor).await;
    let monitor = eventually("the ServiceMonitor", async || {
        monitoring_api(&admin, Kind::ServiceMonitor)
            .get_opt(Kind::ServiceMonitor.object_name())
            .await
            .unwrap()
    })
    .await;
    assert_eq!(monitor.data["spec"], build_service_monitor(true)["spec"]);
    assert!(
        monitor
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|e| e.manager.as_deref()
                == Some("storage-operator/StorageOperatorMonitoringController")),
        "{:?}",
        monitor.metadata.managed_fields
    );
    running.converged(&cluster, "storage-operator").await;

    install_monitoring_crd(&admin, Kind::PrometheusRule).await;
    let rule = eventually("the PrometheusRule", async || {
        monitoring_api(&admin, Kind::PrometheusRule)
            .get_opt(Kind::PrometheusRule.object_name())
            .await
            .unwrap()
    })
    .await;
    assert_eq!(rule.data["spec"], build_prometheus_rule()["spec"]);

    // Drift is put back.
    monitoring_api(&admin, Kind::PrometheusRule)
        .patch(
            Kind::PrometheusRule.object_name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"groups": []}})),
        )
        .await
        .unwrap();
    eventually("the rules restored", async || {
        let rule = monitoring_api(&admin, Kind::PrometheusRule)
            .get(Kind::PrometheusRule.object_name())
            .await
            .unwrap();
        (rule.data["spec"] == build_prometheus_rule()["spec"]).then_some(())
    })
    .await;
    assert_eq!(
        storage_condition(&admin, MONITORING_DEGRADED)
            .await
            .map(|c| c.0),
        Some("False".into())
    );
    running.converged(&cluster, "storage-operator").await;
    running.stop().await;
}

/// A ServiceMonitor of our name that someone else made is left as it is (and the condition
/// says so, without Degraded); the PrometheusRule OpenShift's cluster-version-operator applied
/// from the payload (with Update) is taken over in place: ours whole, no field left to it.
#[tokio::test]
async fn someone_elses_service_monitor_is_left_alone_and_the_payloads_rules_taken_over() {
    use storage_operator::monitoring::{Kind, build_prometheus_rule};
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    for kind in Kind::ALL {
        install_monitoring_crd(&admin, kind).await;
    }
    let theirs = json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": Kind::ServiceMonitor.object_name(),
                     "namespace": storage_operator::plan::OPERATOR_NAMESPACE},
        "spec": {"endpoints": [{"port": "theirs"}], "selector": {"matchLabels": {"app": "theirs"}}}});
    monitoring_api(&cluster.client_with_agent("kubectl"), Kind::ServiceMonitor)
        .create(
            &PostParams::default(),
            &serde_json::from_value(theirs.clone()).unwrap(),
        )
        .await
        .unwrap();
    let payload = json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": Kind::PrometheusRule.object_name(),
                     "namespace": storage_operator::plan::OPERATOR_NAMESPACE,
                     "annotations": {"include.release.openshift.io/self-managed-high-availability": "true"},
                     "labels": {"role": "alert-rules"}},
        "spec": {"groups": [{"name": "retired.rules", "rules": [{"alert": "Retired", "expr": "vector(1)"}]}]}});
    monitoring_api(
        &cluster.client_with_agent("cluster-version-operator"),
        Kind::PrometheusRule,
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(payload).unwrap(),
    )
    .await
    .unwrap();

    let running = start(cluster.client_with_agent("storage-operator"));
    let rule = eventually("the PrometheusRule taken over", async || {
        let rule = monitoring_api(&admin, Kind::PrometheusRule)
            .get(Kind::PrometheusRule.object_name())
            .await
            .unwrap();
        (rule.data["spec"] == build_prometheus_rule()["spec"]).then_some(rule)
    })
    .await;
    assert!(
        rule.metadata
            .managed_fields
            .iter()
            .flatten()
            .all(|e| e.manager.as_deref() != Some("cluster-version-operator")),
        "no field is left to the cluster-version-operator: {:?}",
        rule.metadata.managed_fields
    );
    assert!(
        !rule
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("include.release.openshift.io/self-managed-high-availability"),
        "what only the payload set is gone"
    );
    let (_, reason, message) = eventually("the condition says what was left", async || {
        storage_condition(&admin, MONITORING_DEGRADED)
            .await
            .filter(|c| c.0 == "False" && !c.2.is_empty())
    })
    .await;
    assert_eq!(reason, "AsExpected");
    assert!(message.contains("ServiceMonitor"), "{message}");
    running.converged(&cluster, "storage-operator").await;
    let monitor = monitoring_api(&admin, Kind::ServiceMonitor)
        .get(Kind::ServiceMonitor.object_name())
        .await
        .unwrap();
    assert_eq!(monitor.data["spec"], theirs["spec"]);
    assert!(
        monitor.metadata.managed_fields.iter().flatten().all(|e| !e
            .manager
            .as_deref()
            .unwrap_or_default()
            .starts_with("storage-operator")),
        "{:?}",
        monitor.metadata.managed_fields
    );
    running.stop().await;
}

/// A monitoring write that the API server refuses is Degraded in the same pass, naming the
/// object and the answer; once it goes through, Degraded is False again.
#[tokio::test]
async fn a_refused_monitoring_write_is_degraded() {
    use storage_operator::monitoring::Kind;
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    for kind in Kind::ALL {
        install_monitoring_crd(&admin, kind).await;
    }
    cluster.inject(testkit::FaultRule::status(
        Some("patch"),
        Some("prometheusrules"),
        403,
    ));
    let running = start(cluster.client_with_agent("storage-operator"));
    let (_, reason, message) = eventually("monitoring Degraded", async || {
        storage_condition(&admin, MONITORING_DEGRADED)
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains("PrometheusRule openshift-cluster-storage-operator/prometheus")
            && message.contains("403"),
        "{message}"
    );
    // The ServiceMonitor went through.
    assert!(
        monitoring_api(&admin, Kind::ServiceMonitor)
            .get_opt(Kind::ServiceMonitor.object_name())
            .await
            .unwrap()
            .is_some()
    );
    cluster.clear_faults();
    eventually("Degraded cleared", async || {
        storage_condition(&admin, MONITORING_DEGRADED)
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    assert!(
        monitoring_api(&admin, Kind::PrometheusRule)
            .get_opt(Kind::PrometheusRule.object_name())
            .await
            .unwrap()
            .is_some()
    );
    running.stop().await;
}

/// A vSphere cluster on OpenShift, Storage Managed, with the cloud config and the detector's
/// credentials Secret (which OpenShift's installer and cloud credential operator make).
async fn vsphere_openshift(cluster: &testkit::Cluster) -> Client {
    use storage_operator::vsphere_detector as d;
    let admin = openshift_on(
        cluster,
        json!({"infrastructureName": "demo-v5x", "controlPlaneTopology": "HighlyAvailable",
               "platformStatus": {"type": "VSphere"}}),
    )
    .await;
    // The installer names the cloud config in the Infrastructure's spec.
    Api::<api::config_v1::Infrastructure>::all(admin.clone())
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"cloudConfig": {"name": d::CLOUD_CONFIG, "key": "config"}}}),
            ),
        )
        .await
        .unwrap();
    create::<k8s_openapi::api::core::v1::Namespace>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": d::CLOUD_CONFIG_NAMESPACE}}),
    )
    .await;
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        admin.clone(),
        d::CLOUD_CONFIG_NAMESPACE,
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": d::CLOUD_CONFIG},
                "data": {"config": "[Global]\nsecret-name = \"vsphere-creds\"\n"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
        admin.clone(),
        storage_operator::plan::OPERATOR_NAMESPACE,
    )
    .create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": d::CREDENTIALS},
            "stringData": {"vcenter.example.com.username": "u", "vcenter.example.com.password": "p"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    admin
}

/// The vSphere problem detector, as OpenShift's VSphereProblemDetectorStarter runs it: its
/// objects with OpenShift's names, the Deployment OpenShift's operator made taken over in
/// place, a Service of its name someone else made left alone and reported, the hashes of the
/// credentials and cloud config on the pod template (a changed Secret rolls the pods), and
/// OpenShift's conditions; once in place nothing is written again.
#[tokio::test]
async fn it_runs_the_vsphere_problem_detector_on_vsphere() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
    use storage_operator::plan::OPERATOR_NAMESPACE;
    use storage_operator::vsphere_detector as d;
    let cluster = testkit::Cluster::start().await;
    let admin = vsphere_openshift(&cluster).await;
    cluster.simulate_workloads(testkit::SimConfig::default());
    cluster.add_node("master-0", true);
    // What OpenShift's operator made: the Deployment (an older image).
    let former = cluster.client_with_agent(storage_operator::operator::FORMER_OPERATOR);
    Api::<Deployment>::namespaced(former, OPERATOR_NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": d::NAME, "namespace": OPERATOR_NAMESPACE},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"name": d::NAME}},
                    "template": {"metadata": {"labels": {"name": d::NAME}},
                        "spec": {"serviceAccountName": d::NAME,
                            "containers": [{"name": d::NAME, "image": "quay.io/openshift/origin-vsphere-problem-detector:4.21",
                                "args": ["start", "--v=2"]}]}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // Someone else's Service of the detector's name.
    let someone = cluster.client_with_agent("someone-else");
    Api::<Service>::namespaced(someone, OPERATOR_NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": d::SERVICE, "namespace": OPERATOR_NAMESPACE},
                "spec": {"ports": [{"name": "theirs", "port": 9000}]}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let mut settings = settings();
    settings.env.insert(
        d::IMAGE_ENV.into(),
        "quay.io/openshift/origin-vsphere-problem-detector:4.22".into(),
    );
    let running = start_with(cluster.client_with_agent("storage-operator"), settings);

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    let template_annotations = |d: &Deployment| {
        d.spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default()
    };
    let credentials_key = csi_kit::hash::annotation_key(
        OPERATOR_NAMESPACE,
        d::CREDENTIALS,
        csi_kit::hash::HashedKind::Secret,
    );
    let cloud_key = csi_kit::hash::annotation_key(
        d::CLOUD_CONFIG_NAMESPACE,
        d::CLOUD_CONFIG,
        csi_kit::hash::HashedKind::ConfigMap,
    );
    let deployment = eventually("the detector's Deployment, ours", async || {
        let deployment = deployments.get_opt(d::NAME).await.unwrap()?;
        let pod = deployment.spec.as_ref()?.template.spec.as_ref()?;
        (pod.containers[0].image.as_deref()
            == Some("quay.io/openshift/origin-vsphere-problem-detector:4.22"))
        .then_some(deployment)
    })
    .await;
    let annotations = template_annotations(&deployment);
    assert!(
        annotations.contains_key(&credentials_key) && annotations.contains_key(&cloud_key),
        "{annotations:?}"
    );
    let args = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert_eq!(args[0], "start");
    assert!(
        args.contains(&"--listen=0.0.0.0:8444".to_owned()),
        "{args:?}"
    );
    for (kind, exists) in [
        (
            "ServiceAccount",
            Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(
                admin.clone(),
                OPERATOR_NAMESPACE,
            )
            .get_opt(d::NAME)
            .await
            .unwrap()
            .is_some(),
        ),
        (
            "Role",
            Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
                .get_opt(d::ROLE)
                .await
                .unwrap()
                .is_some(),
        ),
        (
            "ClusterRoleBinding",
            Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
                .get_opt(d::CLUSTER_ROLE_BINDING)
                .await
                .unwrap()
                .is_some(),
        ),
        (
            "ConfigMap",
            Api::<ConfigMap>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
                .get_opt(d::OPERATOR_CONFIG)
                .await
                .unwrap()
                .is_some_and(|c| c.data.unwrap_or_default().contains_key("config.yaml")),
        ),
    ] {
        assert!(exists, "{kind}");
    }
    for (type_, status) in [
        ("VSphereProblemDetectorStarterDegraded", "False"),
        (
            "VSphereProblemDetectorDeploymentControllerDegraded",
            "False",
        ),
        (
            "VSphereProblemDetectorDeploymentControllerProgressing",
            "False",
        ),
    ] {
        eventually(&format!("{type_}={status}"), async || {
            storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == status)
        })
        .await;
    }
    let (status, reason, message) = eventually("the foreign Service reported", async || {
        storage_condition(
            &admin,
            "VSphereProblemDetectorStarterStaticControllerDegraded",
        )
        .await
        .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "ObjectNotOurs")
    );
    assert!(message.contains("someone-else"), "{message}");
    running.converged(&cluster, "storage-operator").await;
    let service = Api::<Service>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
        .get(d::SERVICE)
        .await
        .unwrap();
    assert_eq!(
        service.spec.unwrap().ports.unwrap()[0].name.as_deref(),
        Some("theirs"),
        "someone else's Service is not written"
    );

    // New credentials: the pods roll.
    let before = annotations[&credentials_key].clone();
    Api::<Secret>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
        .patch(
            d::CREDENTIALS,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"vcenter.example.com.password": "new"}})),
        )
        .await
        .unwrap();
    eventually("the credentials hash changed", async || {
        let deployment = deployments.get(d::NAME).await.unwrap();
        template_annotations(&deployment)
            .get(&credentials_key)
            .filter(|hash| **hash != before)
            .cloned()
    })
    .await;
    running.stop().await;
}

/// OpenShift's VSphereProblemDetectorMonitoringController: with Prometheus' CRDs, the
/// detector's ServiceMonitor and PrometheusRule are applied and Available says its alerts are
/// enabled; the admin's ConfigMap `vsphere-problem-detector` with `alertsDisabled: true`
/// removes the rule (ours) and says so; a ConfigMap it cannot read makes the controller
/// Degraded, naming the ConfigMap and the fix, and leaves the rule as it is.
#[tokio::test]
async fn the_vsphere_problem_detectors_alerts_follow_the_admins_switch() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use storage_operator::monitoring::Kind;
    use storage_operator::vsphere_detector as d;
    let cluster = testkit::Cluster::start().await;
    let admin = vsphere_openshift(&cluster).await;
    for kind in Kind::ALL {
        install_monitoring_crd(&admin, kind).await;
    }
    let mut settings = settings();
    settings
        .env
        .insert(d::IMAGE_ENV.into(), "example.com/detector:1".into());
    let running = start_with(cluster.client_with_agent("storage-operator"), settings);
    let api = |kind: Kind| {
        Api::<kube::api::DynamicObject>::namespaced_with(
            admin.clone(),
            storage_operator::plan::OPERATOR_NAMESPACE,
            &kind.api_resource(),
        )
    };
    for kind in Kind::ALL {
        eventually(&format!("the detector's {}", kind.kind()), async || {
            api(kind).get_opt(d::MONITORING_NAME).await.unwrap()
        })
        .await;
    }
    let available = "VSphereProblemDetectorMonitoringControllerAvailable";
    eventually("alerts enabled", async || {
        storage_condition(&admin, available)
            .await
            .filter(|c| c.0 == "True" && c.2.contains("alerts are enabled"))
    })
    .await;

    let config_maps: Api<ConfigMap> =
        Api::namespaced(admin.clone(), storage_operator::plan::OPERATOR_NAMESPACE);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": d::USER_CONFIG},
                "data": {"config.yaml": "alertsDisabled: true\n"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    eventually("the rule removed", async || {
        api(Kind::PrometheusRule)
            .get_opt(d::MONITORING_NAME)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    eventually("alerts disabled", async || {
        storage_condition(&admin, available)
            .await
            .filter(|c| c.0 == "True" && c.2.contains("alerts are disabled"))
    })
    .await;
    assert!(
        api(Kind::ServiceMonitor)
            .get_opt(d::MONITORING_NAME)
            .await
            .unwrap()
            .is_some(),
        "the ServiceMonitor stays"
    );

    config_maps
        .patch(
            d::USER_CONFIG,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"config.yaml": "alertsDisabled: maybe\n"}})),
        )
        .await
        .unwrap();
    let (_, reason, message) = eventually("Degraded", async || {
        storage_condition(&admin, "VSphereProblemDetectorMonitoringControllerDegraded")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains("ConfigMap openshift-cluster-storage-operator/vsphere-problem-detector")
            && message.contains("alertsDisabled"),
        "{message}"
    );
    config_maps
        .patch(
            d::USER_CONFIG,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"config.yaml": "alertsDisabled: false\n"}})),
        )
        .await
        .unwrap();
    eventually("the rule back", async || {
        api(Kind::PrometheusRule)
            .get_opt(d::MONITORING_NAME)
            .await
            .unwrap()
    })
    .await;
    eventually("not Degraded", async || {
        storage_condition(&admin, "VSphereProblemDetectorMonitoringControllerDegraded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    running.converged(&cluster, "storage-operator").await;
    running.stop().await;
}

/// Every object of ours the cluster storage operator applied: (kind, its ApiResource, the
/// object as served). Namespaces (shared: `opkit::ownership::SHARED_KINDS`) and the API
/// objects it reports on (Storage, ClusterOperator, ClusterCSIDriver) are not operands.
async fn applied_operands(admin: &Client) -> Vec<(&'static str, kube::api::ApiResource, Value)> {
    use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use kube::api::ApiResource;
    let resources = [
        ("ServiceAccount", ApiResource::erase::<ServiceAccount>(&())),
        ("Role", ApiResource::erase::<Role>(&())),
        ("RoleBinding", ApiResource::erase::<RoleBinding>(&())),
        ("ClusterRole", ApiResource::erase::<ClusterRole>(&())),
        (
            "ClusterRoleBinding",
            ApiResource::erase::<ClusterRoleBinding>(&()),
        ),
        ("ConfigMap", ApiResource::erase::<ConfigMap>(&())),
        ("Service", ApiResource::erase::<Service>(&())),
        ("Deployment", ApiResource::erase::<Deployment>(&())),
    ];
    testkit::objects_of(admin, &resources, opkit::ownership::applied_by_us).await
}

/// The ownership rule (`opkit::ownership`) on every kind the cluster storage operator applies
/// (the driver operator's ServiceAccount, RBAC, config ConfigMap, metrics Service and
/// Deployment, the shared sidecar roles, the validator's objects): an object of one of those
/// names made by someone else, as a labelled copy of ours or bare (another installer's), is
/// never written or deleted, and a condition of Storage/cluster names it.
#[tokio::test]
async fn someone_elses_object_of_every_kind_it_applies_is_left_as_it_is_and_reported() {
    let cluster = testkit::Cluster::start().await;
    let admin = gcp_openshift(&cluster).await;
    let running = start(cluster.client_with_agent("storage-operator"));
    eventually("the driver operator Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt("gcp-pd-csi-driver-operator")
            .await
            .unwrap()
    })
    .await;
    running.converged(&cluster, "storage-operator").await;
    running.stop().await;
    let applied = applied_operands(&admin).await;
    let kinds: std::collections::BTreeSet<&str> = applied.iter().map(|(k, _, _)| *k).collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
    ] {
        assert!(
            kinds.contains(kind),
            "the operator applies a {kind}: {kinds:?}"
        );
    }

    for (kind, resource, ours) in &applied {
        for (variant, theirs) in testkit::someone_elses_stand_ins(ours) {
            let name = ours["metadata"]["name"].as_str().unwrap().to_owned();
            let namespace = ours["metadata"]["namespace"].as_str().map(str::to_owned);
            let what = format!("{kind} {name} ({variant})");
            let cluster = testkit::Cluster::start().await;
            let admin = gcp_openshift(&cluster).await;
            let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone());
            if let Some(ns) = &namespace
                && namespaces.get_opt(ns).await.unwrap().is_none()
            {
                create::<k8s_openapi::api::core::v1::Namespace>(
                    &admin,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                )
                .await;
            }
            let (api, created) =
                testkit::create_as(&cluster, "kubectl-create", resource, theirs).await;
            let running = start(cluster.client_with_agent("storage-operator"));
            let object = match &namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name.clone(),
            };
            let reported = format!("{kind} {object} exists and was made ");
            eventually(&format!("{what} reported"), async || {
                let storage = Api::<Storage>::all(admin.clone())
                    .get_opt("cluster")
                    .await
                    .unwrap()?;
                storage
                    .status?
                    .conditions
                    .into_iter()
                    .filter(|c| c.status == api::operator_v1::ConditionStatus::True)
                    .filter(|c| c.reason.as_deref() == Some("ObjectNotOurs"))
                    .filter_map(|c| c.message)
                    .find(|m| m.contains(&reported))
            })
            .await;
            running.converged(&cluster, "storage-operator").await;
            let now = api.get(&name).await.unwrap();
            assert_eq!(
                now.metadata.uid, created.metadata.uid,
                "{what}: never deleted"
            );
            assert!(
                !testkit::written_by(&now.metadata, "storage-operator"),
                "{what}: never written: {:?}",
                now.metadata.managed_fields
            );
            running.stop().await;
        }
    }
}
