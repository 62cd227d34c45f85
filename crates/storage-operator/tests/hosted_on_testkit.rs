//! The cluster storage operator with a hosted control plane (`storage-operator run
//! --guest-kubeconfig FILE`), and the driver operator it starts, against two in-process API
//! servers: the management cluster, where the driver operator and the driver's controller run
//! in the hosted cluster's control-plane namespace, and the guest, where Storage, the
//! ClusterOperator and the ClusterCSIDriver report and everything else of the driver is.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

#[path = "../../drivers/tests/hosted/scene.rs"]
mod scene;

use std::time::Duration;

use api::config_v1::ClusterOperator;
use api::operator_v1::{ClusterCSIDriver, Storage};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use scene::CONTROL_PLANE_NS;
use serde_json::json;
use storage_operator::plan::{STARTER, Settings};
use testkit::{Background, Cluster};

const GUEST_NS: &str = "openshift-cluster-csi-drivers";
const OPERATOR: &str = "aws-ebs-csi-driver-operator";

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

/// The scene: a hosted cluster on AWS with Storage (Managed), and its management cluster.
async fn clusters() -> (Cluster, Cluster) {
    let (management, guest) = scene::clusters(
        &[
            "ClusterCSIDriver",
            "Storage",
            "ClusterOperator",
            "FeatureGate",
            "Proxy",
        ],
        &[storage_operator::plan::OPERATOR_NAMESPACE],
    )
    .await;
    let storage: Storage = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "Storage", "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    Api::<Storage>::all(guest.client())
        .create(&PostParams::default(), &storage)
        .await
        .unwrap();
    (management, guest)
}

fn start_storage_operator(management: &Cluster, guest: &Cluster) -> Background {
    let client = guest.client_with_agent("storage-operator");
    let hosted = storage_operator::operator::Hosted {
        management: management.client_with_agent("storage-operator"),
        control_plane: scene::control_plane(),
    };
    let settings = Settings {
        operator_image: "example.com/storage-operator:1".into(),
        env: [(
            "AWS_EBS_DRIVER_IMAGE".to_owned(),
            "example.com/ebs:1".to_owned(),
        )]
        .into(),
        version: "4.22.0".into(),
        operator_log_level: None,
        metrics_tls: None,
    };
    let metrics = Metrics::new();
    let settling = metrics.settling(STARTER);
    Background::spawn(|shutdown| async move {
        storage_operator::operator::run_with(
            client,
            settings,
            Some(hosted),
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(settling)
}

/// The driver operator as the Deployment the storage operator made would run it.
fn start_driver_operator(management: &Cluster, guest: &Cluster) -> Background {
    let def = drivers::by_name("aws-ebs").unwrap();
    let client = guest.client_with_agent("aws-ebs-operator");
    let settings = driver_operator::Settings {
        env: [("DRIVER_IMAGE".to_owned(), "example.com/ebs:1".to_owned())].into(),
        hosted: Some(driver_operator::Hosted {
            management: management.client_with_agent("aws-ebs-operator"),
            control_plane: scene::control_plane(),
        }),
        ..driver_operator::Settings::default()
    };
    let metrics = Metrics::new();
    let settling = metrics.settling(&driver_operator::operator_name(&def));
    Background::spawn(|shutdown| async move {
        driver_operator::run(
            client,
            def,
            settings,
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(settling)
}

async fn storage_condition(client: &Client, type_: &str) -> Option<String> {
    let storage = Api::<Storage>::all(client.clone())
        .get_opt("cluster")
        .await
        .unwrap()?;
    Some(storage.status?.condition(type_)?.status.to_string())
}

#[tokio::test]
async fn the_driver_operators_run_in_the_management_cluster_and_report_in_the_guest() {
    let (management, guest) = clusters().await;
    let (mgmt, admin) = (management.client(), guest.client());
    let storage_operator = start_storage_operator(&management, &guest);

    // The driver operator, in the control-plane namespace, pointed at the guest.
    let deployments: Api<Deployment> = Api::namespaced(mgmt.clone(), CONTROL_PLANE_NS);
    let deployment = eventually(
        "the driver operator in the management cluster",
        async || deployments.get_opt(OPERATOR).await.unwrap(),
    )
    .await;
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert!(
        pod.containers[0]
            .args
            .iter()
            .flatten()
            .any(|a| a == "--guest-kubeconfig=/etc/guest-kubeconfig/kubeconfig")
    );
    for (kind, present) in [
        (
            "ServiceAccount",
            Api::<ServiceAccount>::namespaced(mgmt.clone(), CONTROL_PLANE_NS)
                .get_opt(OPERATOR)
                .await
                .unwrap()
                .is_some(),
        ),
        (
            "Role",
            Api::<Role>::namespaced(mgmt.clone(), CONTROL_PLANE_NS)
                .get_opt("aws-ebs-csi-driver-operator-role")
                .await
                .unwrap()
                .is_some(),
        ),
    ] {
        assert!(present, "its {kind} in the control-plane namespace");
    }
    // In the guest: its ClusterCSIDriver and RBAC, not the operator itself.
    eventually("the ClusterCSIDriver in the guest", async || {
        Api::<ClusterCSIDriver>::all(admin.clone())
            .get_opt("ebs.csi.aws.com")
            .await
            .unwrap()
    })
    .await;
    assert!(
        Api::<ClusterRole>::all(admin.clone())
            .get_opt("aws-ebs-csi-driver-operator-clusterrole")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), GUEST_NS)
            .get_opt(OPERATOR)
            .await
            .unwrap()
            .is_none(),
        "the driver operator is not in the guest"
    );
    // The management cluster's Deployment reaches the guest's Storage.
    eventually(
        "the driver operator's Deployment reported in the guest",
        async || {
            (storage_condition(&admin, "AWSEBSCSIDriverOperatorDeploymentDegraded")
                .await
                .as_deref()
                == Some("False"))
            .then_some(())
        },
    )
    .await;

    // The driver operator, as that Deployment runs it: the chain up to the ClusterOperator.
    let driver_operator = start_driver_operator(&management, &guest);
    eventually(
        "the driver's controller in the management cluster",
        async || {
            deployments
                .get_opt("aws-ebs-csi-driver-controller")
                .await
                .unwrap()
        },
    )
    .await;
    eventually("the node plugin in the guest", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), GUEST_NS)
            .get_opt("aws-ebs-csi-driver-node")
            .await
            .unwrap()
    })
    .await;
    eventually("Storage: the driver available", async || {
        (storage_condition(&admin, "AWSEBSCSIDriverOperatorCRAvailable")
            .await
            .as_deref()
            == Some("True"))
        .then_some(())
    })
    .await;
    eventually("ClusterOperator/storage Available", async || {
        let co = Api::<ClusterOperator>::all(admin.clone())
            .get_opt("storage")
            .await
            .unwrap()?;
        let available = co
            .status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Available" && c.status.to_string() == "True");
        available.then_some(())
    })
    .await;
    driver_operator.stop().await;
    storage_operator.stop().await;
}

#[tokio::test]
async fn the_driver_operators_follow_the_placement_their_hosted_control_plane_asks_for() {
    let (management, guest) = clusters().await;
    let mgmt = management.client();
    let planes = scene::hosted_control_plane(
        &mgmt,
        json!({"nodeSelector": {"pool": "control-plane"},
               "tolerations": [{"key": "dedicated", "operator": "Exists"}],
               "configuration": {"apiServer": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}}}),
    )
    .await;
    let storage_operator = start_storage_operator(&management, &guest);
    let deployments: Api<Deployment> = Api::namespaced(mgmt.clone(), CONTROL_PLANE_NS);
    let pod = eventually(
        "the driver operator placed as its control plane asks",
        async || {
            let pod = deployments
                .get_opt(OPERATOR)
                .await
                .unwrap()?
                .spec?
                .template
                .spec?;
            (pod.node_selector.as_ref()?.get("pool").map(String::as_str) == Some("control-plane"))
                .then_some(pod)
        },
    )
    .await;
    assert!(
        pod.tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some("dedicated"))
    );

    // The driver operator's config has the control plane's TLS profile, and follows it.
    let config_maps: Api<ConfigMap> = Api::namespaced(mgmt.clone(), CONTROL_PLANE_NS);
    let min_version = async |wanted: &str| {
        eventually(&format!("the operator config with {wanted}"), async || {
            let config = config_maps
                .get_opt(&format!("{OPERATOR}-config"))
                .await
                .unwrap()?;
            config.data?["config.yaml"]
                .contains(&format!("minTLSVersion: {wanted}"))
                .then_some(())
        })
        .await
    };
    min_version("VersionTLS13").await;
    planes
        .patch(
            "hosted",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"configuration": {"apiServer":
                {"tlsSecurityProfile": {"type": "Old", "old": {}, "modern": null}}}}})),
        )
        .await
        .unwrap();
    min_version("VersionTLS10").await;
    storage_operator.stop().await;
}

async fn storage_condition_message(client: &Client, type_: &str) -> Option<(String, String)> {
    let storage = Api::<Storage>::all(client.clone())
        .get_opt("cluster")
        .await
        .unwrap()?;
    let condition = storage.status?.condition(type_)?.clone();
    Some((
        condition.status.to_string(),
        condition.message.unwrap_or_default(),
    ))
}

/// A write to the management cluster that keeps failing is Degraded in the guest's Storage
/// within a pass, naming the object and the cluster, with the server's answer; each cluster's
/// outage is survived, and the drift it let through is restored once it is back.
#[tokio::test]
async fn failures_and_outages_of_either_cluster_are_reported_and_survived() {
    let (management, guest) = clusters().await;
    let (mgmt, admin) = (management.client(), guest.client());
    let storage_operator = start_storage_operator(&management, &guest);
    let deployments: Api<Deployment> = Api::namespaced(mgmt.clone(), CONTROL_PLANE_NS);
    eventually("the driver operator reported", async || {
        (storage_condition(&admin, "AWSEBSCSIDriverOperatorDeploymentDegraded")
            .await
            .as_deref()
            == Some("False"))
        .then_some(())
    })
    .await;

    // The management cluster refuses the Deployment's writes; a drift needs one.
    management.inject(testkit::FaultRule::status(
        Some("patch"),
        Some("deployments"),
        500,
    ));
    deployments
        .delete(OPERATOR, &Default::default())
        .await
        .unwrap();
    let (_, message) = eventually("Degraded, naming the management cluster", async || {
        storage_condition_message(&admin, "AWSEBSCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|(status, _)| status == "True")
    })
    .await;
    assert!(
        message.contains(&format!(
            "Deployment {CONTROL_PLANE_NS}/{OPERATOR} in the management cluster"
        )),
        "{message}"
    );
    management.clear_faults();
    eventually("restored once the writes pass", async || {
        deployments.get_opt(OPERATOR).await.unwrap()
    })
    .await;
    eventually("no longer Degraded", async || {
        (storage_condition(&admin, "AWSEBSCSIDriverOperatorDeploymentDegraded")
            .await
            .as_deref()
            == Some("False"))
        .then_some(())
    })
    .await;

    // Each cluster away for a while (every request answered 503, watches cut): the operator
    // keeps running, and restores what was deleted there meanwhile once it is back. (The
    // admin's requests are not spared by `unavailable_for`: the deletion waits for its end.)
    management.unavailable_for(Duration::from_secs(8));
    management.drop_watches();
    let (_, message) = eventually(
        "Degraded: the management cluster does not answer",
        async || {
            storage_condition_message(&admin, "CSIDriverStarterDegraded")
                .await
                .filter(|(status, _)| status == "True")
        },
    )
    .await;
    assert!(
        message.contains("the management cluster does not answer")
            && message.contains(&format!("(management cluster, {CONTROL_PLANE_NS})")),
        "{message}"
    );
    eventually("the management cluster back", async || {
        deployments.delete(OPERATOR, &Default::default()).await.ok()
    })
    .await;
    eventually(
        "the Deployment restored after the management outage",
        async || deployments.get_opt(OPERATOR).await.ok().flatten(),
    )
    .await;
    eventually("no longer Degraded once it answers", async || {
        (storage_condition(&admin, "CSIDriverStarterDegraded")
            .await
            .as_deref()
            == Some("False"))
        .then_some(())
    })
    .await;
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    let role = "aws-ebs-csi-driver-operator-clusterrole";
    guest.unavailable_for(Duration::from_secs(5));
    guest.drop_watches();
    eventually("the guest back", async || {
        cluster_roles.delete(role, &Default::default()).await.ok()
    })
    .await;
    eventually(
        "the ClusterRole restored after the guest outage",
        async || cluster_roles.get_opt(role).await.ok().flatten(),
    )
    .await;
    storage_operator.stop().await;
}
