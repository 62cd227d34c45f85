//! A driver operator with a hosted control plane (`storage-operator driver aws-ebs
//! --guest-kubeconfig FILE`) on two real API servers: the management cluster
//! (`E2E_KUBECONFIG`), where the driver's controller goes into the hosted cluster's
//! control-plane namespace, and the guest (`E2E_GUEST_KUBECONFIG`), where everything else goes
//! and the ClusterCSIDriver reports. The operator runs in-process with an identity on each
//! side: on the management cluster the ServiceAccount and Role the cluster storage operator
//! creates there (`storage_operator::hosted`), on the guest its ServiceAccount and RBAC there
//! (where OpenShift gives it HyperShift's admin kubeconfig instead); every request either
//! refuses fails the test. The clusters have no nodes, so the pods never run: the controller
//! is reported as not yet available.
//!
//! What HyperShift would have created is created first: the control-plane namespace on the
//! management cluster, and the guest's `Infrastructure` with `controlPlaneTopology: External`.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::operator_v1::ClusterCSIDriver;
use e2e::cleanup::{delete_and_wait, undeclare_platform};
use e2e::install::{apply_value, ensure_namespace};
use e2e::{DECLARED_LABEL, Identity, admin, guest_admin, wait_for};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::storage::v1::CSIDriver;
use kube::api::PostParams;
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::json;
use storage_operator::plan::Desired;

const SHORT: &str = "aws-ebs";
const DRIVER: &str = "ebs.csi.aws.com";
const CONTROL_PLANE_NAMESPACE: &str = "clusters-e2e-hosted-driver";
const GUEST_NAMESPACE: &str = "openshift-cluster-csi-drivers";
const CONTROLLER: &str = "aws-ebs-csi-driver-controller";
const NODE: &str = "aws-ebs-csi-driver-node";

async fn condition(guest: &Client, type_: &str) -> Option<String> {
    let driver = Api::<ClusterCSIDriver>::all(guest.clone())
        .get_opt(DRIVER)
        .await
        .unwrap()?;
    Some(driver.status?.condition(type_)?.status.to_string())
}

#[tokio::test]
#[ignore = "needs two real clusters: set E2E_KUBECONFIG (management) and E2E_GUEST_KUBECONFIG (guest)"]
async fn the_driver_operator_puts_each_operand_on_its_cluster_as_its_own_identities() {
    let management = admin().await;
    let guest = guest_admin().await;
    let entry = storage_operator::registry::find(SHORT).unwrap();
    let def = drivers::by_name(SHORT).unwrap();
    let control_plane = csi_kit::HostedControlPlane {
        namespace: CONTROL_PLANE_NAMESPACE.to_owned(),
        release_version: "4.22.0".to_owned(),
        ..csi_kit::HostedControlPlane::default()
    };

    // The scene: what HyperShift and the cluster storage operator would have made.
    let declared = e2e::declare_hosted_aws(&guest).await;
    e2e::apply_crd(&guest, &api::crds::cluster_csi_driver()).await;
    ensure_namespace(&management, CONTROL_PLANE_NAMESPACE).await;
    let inputs = storage_operator::starter::StarterInputs {
        topology: csi_kit::Topology::External,
        log_level: api::operator_v1::LogLevel::Normal,
        proxy: Default::default(),
        env: Default::default(),
        operator_image: "localhost/storage-operator:e2e".into(),
        tls_profile: None,
    };
    let starter = storage_operator::hosted::hosted_starter_objects(
        &[(entry.clone(), def.clone())],
        &inputs,
        &control_plane,
    );
    for desired in &starter.guest {
        if let Desired::Namespace(ns) = desired {
            e2e::install::wait_not_terminating(&guest, ns.metadata.name.as_deref().unwrap()).await;
        }
        apply_value(&guest, desired.to_value(), "the starter's guest objects").await;
    }
    // The driver operator's identity on the management cluster: its ServiceAccount and Role
    // there (not its Deployment and config: it runs in this process).
    for desired in starter
        .management
        .iter()
        .filter(|d| !matches!(d, Desired::Deployment(_) | Desired::ConfigMap(_)))
    {
        apply_value(
            &management,
            desired.to_value(),
            "the starter's management objects",
        )
        .await;
    }
    let on_management = Identity::service_account(
        &management,
        CONTROL_PLANE_NAMESPACE,
        entry.operator_deployment,
    )
    .await;
    let on_guest =
        Identity::guest_service_account(&guest, GUEST_NAMESPACE, entry.operator_deployment).await;
    let cluster_csi_driver: ClusterCSIDriver = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": DRIVER, "labels": {DECLARED_LABEL: "true"}},
        "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    Api::<ClusterCSIDriver>::all(guest.clone())
        .create(&PostParams::default(), &cluster_csi_driver)
        .await
        .unwrap();

    // Leader election as the binary holds it: its Lease in the control-plane namespace, which
    // its Role there allows by name only.
    let (mut leading, election) = opkit::leader::elect(
        on_management.client.clone(),
        &opkit::leader::LeaderConfig::new(
            CONTROL_PLANE_NAMESPACE,
            csi_kit::names::operator_lease(&def),
            "e2e-hosted-driver",
        ),
    )
    .await
    .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), leading.wait_for(|l| *l))
        .await
        .expect("leading within a minute")
        .unwrap();

    // The driver operator, with a hosted control plane.
    let metrics = Metrics::new();
    let settings = driver_operator::Settings {
        hosted: Some(driver_operator::Hosted {
            management: on_management.client.clone(),
            control_plane: control_plane.clone(),
        }),
        ..driver_operator::Settings::default()
    };
    let guest_client = on_guest.client.clone();
    let run_def = def.clone();
    let running = e2e::Background::start(move |stop| {
        let extras = drivers::extras(&run_def, guest_client.clone(), true);
        driver_operator::run_with_extras(
            guest_client,
            run_def,
            settings,
            extras,
            metrics,
            Readiness::default(),
            stop,
        )
    });

    let deployments: Api<Deployment> = Api::namespaced(management.clone(), CONTROL_PLANE_NAMESPACE);
    let deployment = wait_for(
        "the controller Deployment in the control-plane namespace",
        async || deployments.get_opt(CONTROLLER).await.unwrap(),
    )
    .await;
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert!(
        pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == csi_kit::hosted::GUEST_KUBECONFIG_VOLUME)
    );
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some(csi_kit::hosted::PRIORITY_CLASS)
    );
    wait_for("the node DaemonSet in the guest", async || {
        Api::<DaemonSet>::namespaced(guest.clone(), GUEST_NAMESPACE)
            .get_opt(NODE)
            .await
            .unwrap()
    })
    .await;
    wait_for("the CSIDriver in the guest", async || {
        Api::<CSIDriver>::all(guest.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
    })
    .await;
    // Without nodes no pod runs: the guest's ClusterCSIDriver says the management cluster's
    // controller is not available yet.
    wait_for("the controller's status in the guest", async || {
        (condition(&guest, "AWSEBSDriverControllerServiceControllerAvailable")
            .await
            .as_deref()
            == Some("False"))
        .then_some(())
    })
    .await;
    assert!(
        Api::<Deployment>::namespaced(guest.clone(), GUEST_NAMESPACE)
            .get_opt(CONTROLLER)
            .await
            .unwrap()
            .is_none(),
        "the controller is not in the guest"
    );
    assert!(
        Api::<DaemonSet>::namespaced(management.clone(), CONTROL_PLANE_NAMESPACE)
            .get_opt(NODE)
            .await
            .unwrap()
            .is_none(),
        "the node plugin is not in the management cluster"
    );
    running.stop().await;
    election.abort();
    on_management.assert_never_refused();
    on_guest.assert_never_refused();

    // Cleanup: the driver's objects in the guest, the control-plane namespace.
    e2e::cleanup::remove_driver(&guest, SHORT, DRIVER, GUEST_NAMESPACE).await;
    delete_and_wait(
        &Api::<Namespace>::all(management.clone()),
        CONTROL_PLANE_NAMESPACE,
    )
    .await;
    undeclare_platform(&guest, declared).await;
}
