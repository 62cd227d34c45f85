//! `storage-operator driver aws-ebs --guest-kubeconfig FILE` (`driver_operator::run` with a
//! hosted control plane) against two in-process API servers: the management cluster, where the
//! driver's controller runs in the hosted cluster's control-plane namespace, and the guest,
//! where everything else is and the ClusterCSIDriver reports. Both run the workload simulation.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

#[path = "hosted/scene.rs"]
mod scene;

use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use driver_operator::{Hosted, Settings};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use scene::CONTROL_PLANE_NS;
use serde_json::json;
use testkit::{Background, Cluster};

const GUEST_NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "ebs.csi.aws.com";
const AGENT: &str = "aws-ebs-operator";
const CONTROLLER: &str = "aws-ebs-csi-driver-controller";
const NODE: &str = "aws-ebs-csi-driver-node";

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

/// The scene: a hosted cluster on AWS with the ClusterCSIDriver (Managed), and its management
/// cluster.
async fn clusters() -> (Cluster, Cluster) {
    let (management, guest) = scene::clusters(&["ClusterCSIDriver", "Proxy"], &[GUEST_NS]).await;
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

fn start(management: &Cluster, guest: &Cluster) -> Background {
    let def = drivers::by_name("aws-ebs").unwrap();
    let client = guest.client_with_agent(AGENT);
    let hosted = Hosted {
        management: management.client_with_agent(AGENT),
        control_plane: scene::control_plane(),
    };
    let metrics = Metrics::new();
    let settling = metrics.settling(&driver_operator::operator_name(&def));
    Background::spawn(|shutdown| async move {
        driver_operator::run(
            client,
            def,
            Settings {
                env: [("DRIVER_IMAGE".to_owned(), "example.com/ebs:1".to_owned())].into(),
                instance: Some("aws-ebs-operator-0".into()),
                hosted: Some(hosted),
                ..Settings::default()
            },
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(settling)
}

async fn condition(client: &Client, type_: &str) -> Option<String> {
    let driver = Api::<ClusterCSIDriver>::all(client.clone())
        .get_opt(DRIVER)
        .await
        .unwrap()?;
    Some(driver.status?.condition(type_)?.status.to_string())
}

#[tokio::test]
async fn the_controller_runs_in_the_management_cluster_and_the_rest_in_the_guest() {
    let (management, guest) = clusters().await;
    let running = start(&management, &guest);
    let (mgmt, admin) = (management.client(), guest.client());

    // The controller side, in the control-plane namespace of the management cluster.
    let deployments: Api<Deployment> = Api::namespaced(mgmt.clone(), CONTROL_PLANE_NS);
    let deployment = eventually(
        "the controller Deployment in the management cluster",
        async || deployments.get_opt(CONTROLLER).await.unwrap(),
    )
    .await;
    let spec = deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(1));
    let pod = spec.template.spec.as_ref().unwrap();
    assert!(
        pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == csi_kit::hosted::GUEST_KUBECONFIG_VOLUME),
        "the sidecars reach the guest through its kubeconfig"
    );
    assert!(pod.containers.iter().any(|c| c.name == "token-minter"));
    for (what, present) in [
        (
            "PodDisruptionBudget",
            Api::<PodDisruptionBudget>::namespaced(mgmt.clone(), CONTROL_PLANE_NS)
                .get_opt("aws-ebs-csi-driver-controller-pdb")
                .await
                .unwrap()
                .is_some(),
        ),
        (
            "controller ServiceAccount",
            Api::<ServiceAccount>::namespaced(mgmt.clone(), CONTROL_PLANE_NS)
                .get_opt("aws-ebs-csi-driver-controller-sa")
                .await
                .unwrap()
                .is_some(),
        ),
    ] {
        assert!(present, "{what} in the control-plane namespace");
    }

    // The rest, in the guest; no controller there.
    eventually("the node DaemonSet in the guest", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), GUEST_NS)
            .get_opt(NODE)
            .await
            .unwrap()
    })
    .await;
    assert!(
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        Api::<StorageClass>::all(admin.clone())
            .get_opt("gp3-csi")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), GUEST_NS)
            .get_opt(CONTROLLER)
            .await
            .unwrap()
            .is_none(),
        "the controller is not in the guest"
    );
    assert!(
        Api::<DaemonSet>::namespaced(mgmt.clone(), CONTROL_PLANE_NS)
            .get_opt(NODE)
            .await
            .unwrap()
            .is_none(),
        "the node plugin is not in the management cluster"
    );

    // The guest's ClusterCSIDriver reports the management cluster's Deployment.
    for (type_, status) in [
        ("AWSEBSDriverControllerServiceControllerAvailable", "True"),
        (
            "AWSEBSDriverControllerServiceControllerProgressing",
            "False",
        ),
        ("AWSEBSDriverNodeServiceControllerAvailable", "True"),
        ("AWSEBSDriverStaticResourcesControllerDegraded", "False"),
    ] {
        eventually(&format!("{type_}={status}"), async || {
            (condition(&admin, type_).await.as_deref() == Some(status)).then_some(())
        })
        .await;
    }
    running.converged(&guest, AGENT).await;

    // Drift on either side is restored there.
    deployments
        .delete(CONTROLLER, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the controller Deployment recreated in the management cluster",
        async || deployments.get_opt(CONTROLLER).await.unwrap(),
    )
    .await;
    Api::<DaemonSet>::namespaced(admin.clone(), GUEST_NS)
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the node DaemonSet recreated in the guest", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), GUEST_NS)
            .get_opt(NODE)
            .await
            .unwrap()
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn the_controller_follows_the_placement_its_hosted_control_plane_asks_for() {
    let (management, guest) = clusters().await;
    let mgmt = management.client();
    let planes = scene::hosted_control_plane(
        &mgmt,
        json!({"nodeSelector": {"pool": "control-plane"},
               "labels": {"team": "storage"},
               "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cp", "effect": "NoSchedule"}]}),
    )
    .await;
    let running = start(&management, &guest);

    let deployments: Api<Deployment> = Api::namespaced(mgmt.clone(), CONTROL_PLANE_NS);
    let pod = eventually(
        "the controller placed as its control plane asks",
        async || {
            let deployment = deployments.get_opt(CONTROLLER).await.unwrap()?;
            let template = deployment.spec?.template;
            let pod = template.spec?;
            (pod.node_selector.as_ref()?.get("pool").map(String::as_str) == Some("control-plane"))
                .then_some((template.metadata?, pod))
        },
    )
    .await;
    let (metadata, spec) = pod;
    assert_eq!(metadata.labels.unwrap()["team"], "storage");
    assert!(
        spec.tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some("dedicated"))
    );

    // A change of the HostedControlPlane is followed.
    planes
        .patch(
            "hosted",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeSelector": {"pool": "other"}}})),
        )
        .await
        .unwrap();
    eventually("the controller moved with its control plane", async || {
        let deployment = deployments.get_opt(CONTROLLER).await.unwrap()?;
        let selector = deployment.spec?.template.spec?.node_selector?;
        (selector.get("pool").map(String::as_str) == Some("other")).then_some(())
    })
    .await;
    running.stop().await;
}

/// The management cluster not answering is said in the guest's ClusterCSIDriver (the
/// controller's side cannot be managed), and the controller's Degraded clears once it answers.
#[tokio::test]
async fn an_unreachable_management_cluster_is_said_in_the_guest() {
    let (management, guest) = clusters().await;
    let running = start(&management, &guest);
    let admin = guest.client();
    let degraded = "AWSEBSDriverControllerServiceControllerDegraded";
    eventually("the controller side in place", async || {
        (condition(&admin, degraded).await.as_deref() == Some("False")).then_some(())
    })
    .await;
    management.unavailable_for(Duration::from_secs(8));
    management.drop_watches();
    let message = eventually(
        "Degraded: the management cluster does not answer",
        async || {
            let driver = Api::<ClusterCSIDriver>::all(admin.clone())
                .get_opt(DRIVER)
                .await
                .unwrap()?;
            let condition = driver.status?.condition(degraded)?.clone();
            (condition.status.to_string() == "True")
                .then_some(condition.message.unwrap_or_default())
        },
    )
    .await;
    assert!(
        message.contains("the management cluster does not answer")
            && message.contains(&format!("(management cluster, {CONTROL_PLANE_NS})")),
        "{message}"
    );
    eventually("no longer Degraded once it answers", async || {
        (condition(&admin, degraded).await.as_deref() == Some("False")).then_some(())
    })
    .await;
    running.stop().await;
}
