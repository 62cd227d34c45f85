//! The cluster storage operator with a hosted control plane (`storage-operator run
//! --guest-kubeconfig FILE`) on two real API servers, as its own identities: on the
//! management cluster (`E2E_KUBECONFIG`) the ServiceAccount and Role of its management-side
//! install (`storage_operator::hosted_install`, in the control-plane namespace), on the guest
//! (`E2E_GUEST_KUBECONFIG`) the ServiceAccount and RBAC of `deploy/kubernetes/` (where
//! HyperShift would give it the guest kubeconfig's admin: the test holds it to least
//! privilege instead). Every request either server refuses fails the test.
//!
//! It checks where each object goes, that the driver operator's Deployment in the management
//! cluster reaches the guest's Storage, that a change to what it applied is undone on either
//! side, and that it survives each server being unreachable for a minute (its connections
//! go through a [`e2e::link::Link`] the test cuts): it keeps running and leading (its Lease is
//! in the management cluster, renewed as the binary renews it), says in the guest's Storage
//! that the management cluster does not answer, and undoes what changed meanwhile once the
//! server is back.
//!
//! What HyperShift would have made is made first: the control-plane namespace and its
//! PriorityClass on the management cluster, and the guest's `Infrastructure` with
//! `controlPlaneTopology: External` on AWS.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::time::{Duration, Instant};

use api::operator_v1::{ClusterCSIDriver, Storage};
use csi_kit::HostedControlPlane;
use e2e::cleanup::{delete_and_wait, undeclare_platform};
use e2e::install::ensure_namespace;
use e2e::link::Link;
use e2e::{Background, Identity, admin, cso, guest_admin, install, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::leader::LeaderConfig;
use opkit::metrics::Metrics;
use serde_json::json;
use storage_operator::names::{LEASE, NAME, OPERATOR_NAMESPACE};
use storage_operator::plan::STARTER;

const CONTROL_PLANE_NAMESPACE: &str = "clusters-e2e-hosted-cso";
const SHORT: &str = "aws-ebs";
const DRIVER: &str = "ebs.csi.aws.com";
const OPERATOR: &str = "aws-ebs-csi-driver-operator";
const GUEST_NAMESPACE: &str = "openshift-cluster-csi-drivers";
const OPERATOR_CLUSTER_ROLE: &str = "aws-ebs-csi-driver-operator-clusterrole";
/// How long each server is away.
const OUTAGE: Duration = Duration::from_secs(60);

/// Whether the object `kind` `namespace/name` exists on the cluster of `client` (the kinds
/// OpenShift's operator writes in HyperShift mode).
async fn exists(client: &Client, kind: &str, namespace: &str, name: &str) -> bool {
    let (group, version, plural) = match kind {
        "ClusterCSIDriver" => ("operator.openshift.io", "v1", "clustercsidrivers"),
        "Storage" => ("operator.openshift.io", "v1", "storages"),
        "ClusterOperator" => ("config.openshift.io", "v1", "clusteroperators"),
        "ClusterRole" => ("rbac.authorization.k8s.io", "v1", "clusterroles"),
        "ClusterRoleBinding" => ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
        "Role" => ("rbac.authorization.k8s.io", "v1", "roles"),
        "RoleBinding" => ("rbac.authorization.k8s.io", "v1", "rolebindings"),
        "CustomResourceDefinition" => ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        "Deployment" => ("apps", "v1", "deployments"),
        "Lease" => ("coordination.k8s.io", "v1", "leases"),
        "ConfigMap" => ("", "v1", "configmaps"),
        "ServiceAccount" => ("", "v1", "serviceaccounts"),
        "Service" => ("", "v1", "services"),
        other => panic!("the recording names kind {other}, which this test does not know"),
    };
    let resource = kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    let api: Api<kube::api::DynamicObject> = if namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), namespace, &resource)
    };
    api.get_opt(name).await.unwrap().is_some()
}

/// A condition of the guest's Storage: status and message.
async fn storage_condition(guest: &Client, type_: &str) -> Option<(String, String)> {
    cso::storage_condition(guest, type_)
        .await
        .map(|(status, _, message)| (status, message))
}

async fn replicas(deployments: &Api<Deployment>) -> Option<i32> {
    deployments.get_opt(OPERATOR).await.unwrap()?.spec?.replicas
}

/// Scales the driver operator's Deployment as someone else would (not the operator's field
/// manager): a change the operator must undo.
async fn scale_behind_its_back(deployments: &Api<Deployment>) {
    deployments
        .patch(
            OPERATOR,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
}

/// Waits out the rest of an outage that began at `since`, checking every second that the
/// operator still runs and still leads.
async fn wait_out(
    since: Instant,
    running: &Background<storage_operator::operator::StartError>,
    leading: &tokio::sync::watch::Receiver<bool>,
    which: &str,
) {
    while since.elapsed() < OUTAGE {
        assert!(
            running.is_running(),
            "the operator stopped during the {which} outage"
        );
        assert!(
            *leading.borrow(),
            "leadership lost during the {which} outage, after {:?}",
            since.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
#[ignore = "needs two real clusters: set E2E_KUBECONFIG (management) and E2E_GUEST_KUBECONFIG (guest)"]
async fn the_storage_operator_runs_hosted_as_its_own_identities_and_survives_each_outage() {
    let management = admin().await;
    let guest = guest_admin().await;

    // What HyperShift would have made, then the operator's install on each side.
    let declared = e2e::declare_hosted_aws(&guest).await;
    // OpenShift's APIs the guest serves (ClusterOperator among them).
    for crd in api::crds::all() {
        e2e::apply_crd(&guest, &crd).await;
    }
    ensure_namespace(&management, CONTROL_PLANE_NAMESPACE).await;
    let made_priority_class = install::hypershift_priority_class(&management).await;
    install::storage_operator_manifests(&guest).await;
    install::hosted_storage_operator(&management, CONTROL_PLANE_NAMESPACE).await;

    // Its identities, each through a link the test can cut.
    let management_link = Link::to_server(&e2e::admin_config().await.unwrap().cluster_url).await;
    let guest_link = Link::to_server(
        &e2e::cluster::guest_admin_config()
            .await
            .unwrap()
            .cluster_url,
    )
    .await;
    let on_management =
        Identity::service_account_via(&management, CONTROL_PLANE_NAMESPACE, NAME, &management_link)
            .await;
    let on_guest =
        Identity::guest_service_account_via(&guest, OPERATOR_NAMESPACE, NAME, &guest_link).await;

    // Leader election as the binary holds it: in the control-plane namespace, with the
    // binary's timings.
    let (mut leading, election) = opkit::leader::elect(
        on_management.client.clone(),
        &LeaderConfig::new(CONTROL_PLANE_NAMESPACE, LEASE, "e2e-hosted"),
    )
    .await
    .unwrap();
    tokio::time::timeout(Duration::from_secs(60), leading.wait_for(|l| *l))
        .await
        .expect("leading within a minute")
        .unwrap();

    // The operator, hosted.
    let metrics = Metrics::new();
    let settings = storage_operator::plan::Settings {
        operator_image: cso::OPERATOR_IMAGE.into(),
        env: Default::default(),
        version: "e2e".into(),
        operator_log_level: None,
        metrics_tls: None,
    };
    let hosted = storage_operator::operator::Hosted {
        management: on_management.client.clone(),
        control_plane: HostedControlPlane {
            namespace: CONTROL_PLANE_NAMESPACE.into(),
            release_version: "4.22.0".into(),
            ..HostedControlPlane::default()
        },
    };
    let guest_client = on_guest.client.clone();
    let running_metrics = metrics.clone();
    let running = Background::start(move |stop| {
        storage_operator::operator::run_with(
            guest_client,
            settings,
            Some(hosted),
            running_metrics,
            Readiness::default(),
            stop,
        )
    })
    .settles_with(metrics, STARTER);

    // Placement: the driver operator and what it needs there in the control-plane namespace
    // of the management cluster; its ClusterCSIDriver, RBAC and the validator in the guest.
    let deployments: Api<Deployment> = Api::namespaced(management.clone(), CONTROL_PLANE_NAMESPACE);
    let deployment = wait_for(
        "the driver operator's Deployment in the control-plane namespace",
        async || deployments.get_opt(OPERATOR).await.unwrap(),
    )
    .await;
    let args = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(
        args.iter().any(|a| a.starts_with("--guest-kubeconfig=")),
        "{args:?}"
    );
    let in_control_plane = |kind: &str, found: bool| {
        assert!(found, "{kind} in the control-plane namespace");
    };
    in_control_plane(
        "ServiceAccount",
        Api::<ServiceAccount>::namespaced(management.clone(), CONTROL_PLANE_NAMESPACE)
            .get_opt(OPERATOR)
            .await
            .unwrap()
            .is_some(),
    );
    in_control_plane(
        "Role",
        Api::<Role>::namespaced(management.clone(), CONTROL_PLANE_NAMESPACE)
            .get_opt(&format!("{OPERATOR}-role"))
            .await
            .unwrap()
            .is_some(),
    );
    in_control_plane(
        "RoleBinding",
        Api::<RoleBinding>::namespaced(management.clone(), CONTROL_PLANE_NAMESPACE)
            .get_opt(&format!("{OPERATOR}-rolebinding"))
            .await
            .unwrap()
            .is_some(),
    );
    in_control_plane(
        "config ConfigMap",
        Api::<ConfigMap>::namespaced(management.clone(), CONTROL_PLANE_NAMESPACE)
            .get_opt(&format!("{OPERATOR}-config"))
            .await
            .unwrap()
            .is_some(),
    );
    wait_for("the ClusterCSIDriver in the guest", async || {
        Api::<ClusterCSIDriver>::all(guest.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
    })
    .await;
    let cluster_roles: Api<ClusterRole> = Api::all(guest.clone());
    assert!(
        cluster_roles
            .get_opt(OPERATOR_CLUSTER_ROLE)
            .await
            .unwrap()
            .is_some(),
        "the driver operator's ClusterRole in the guest"
    );
    wait_for(
        "the volume data source validator in the guest",
        async || {
            Api::<Deployment>::namespaced(guest.clone(), OPERATOR_NAMESPACE)
                .get_opt(storage_operator::validator::NAME)
                .await
                .unwrap()
        },
    )
    .await;
    for (cluster, client, namespace) in [
        ("guest", &guest, GUEST_NAMESPACE),
        ("management cluster", &management, OPERATOR_NAMESPACE),
    ] {
        assert!(
            Api::<Deployment>::namespaced(client.clone(), namespace)
                .get_opt(OPERATOR)
                .await
                .unwrap()
                .is_none(),
            "no driver operator in {namespace} of the {cluster}"
        );
    }

    // Roll-up: the management cluster's Deployment in the guest's Storage.
    wait_for(
        "the driver operator's Deployment in the guest's Storage",
        async || {
            let storage = Api::<Storage>::all(guest.clone())
                .get_opt("cluster")
                .await
                .unwrap()?;
            let status = storage.status?;
            let generation = status.generations.iter().any(|g| {
                g.resource == "deployments"
                    && g.namespace == CONTROL_PLANE_NAMESPACE
                    && g.name == OPERATOR
            });
            // OpenShift's HyperShift conditions too, each False.
            let degraded = [
                "AWSEBSCSIDriverOperatorDeploymentDegraded",
                "AWSEBSCSIDriverOperatorMgmtStaticControllerDegraded",
                "DeploymentVersionControllerDegraded",
            ]
            .iter()
            .all(|type_| {
                status
                    .condition(type_)
                    .is_some_and(|c| c.status.to_string() == "False")
            });
            (generation && degraded).then_some(())
        },
    )
    .await;

    // Each object OpenShift's operator writes in this mode (recorded side by side), on the
    // same side; each condition type it writes in the guest's Storage.
    let recorded: serde_json::Value = serde_json::from_str(include_str!(
        "../../../crates/storage-operator/tests/fixtures/openshift-hypershift/side-by-side.json"
    ))
    .unwrap();
    let not_ours: Vec<(&str, &str)> = recorded["notWrittenByOurs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["kind"].as_str().unwrap(), o["name"].as_str().unwrap()))
        .collect();
    for object in recorded["written"].as_array().unwrap() {
        let (cluster, kind, name) = (
            object["cluster"].as_str().unwrap(),
            object["kind"].as_str().unwrap(),
            object["name"].as_str().unwrap(),
        );
        if not_ours.contains(&(kind, name)) {
            continue;
        }
        let namespace = object["namespace"]
            .as_str()
            .unwrap()
            .replace("${CONTROLPLANE_NAMESPACE}", CONTROL_PLANE_NAMESPACE);
        let client = if cluster == "management" {
            &management
        } else {
            &guest
        };
        wait_for(
            &format!("{kind} {namespace}/{name} in the {cluster}"),
            async || exists(client, kind, &namespace, name).await.then_some(()),
        )
        .await;
    }
    let storage = Api::<Storage>::all(guest.clone())
        .get("cluster")
        .await
        .unwrap();
    let ours: Vec<String> = storage
        .status
        .unwrap()
        .conditions
        .iter()
        .map(|c| c.type_.clone())
        .collect();
    for type_ in recorded["storageConditions"].as_array().unwrap() {
        let type_ = type_.as_str().unwrap();
        assert!(
            ours.iter().any(|t| t == type_),
            "OpenShift's {type_} in the guest's Storage: {ours:?}"
        );
    }

    // Drift, undone on each side.
    scale_behind_its_back(&deployments).await;
    wait_for("the Deployment scaled back", async || {
        (replicas(&deployments).await == Some(1)).then_some(())
    })
    .await;
    cluster_roles
        .delete(OPERATOR_CLUSTER_ROLE, &Default::default())
        .await
        .unwrap();
    wait_for("the guest's ClusterRole restored", async || {
        cluster_roles.get_opt(OPERATOR_CLUSTER_ROLE).await.unwrap()
    })
    .await;

    // The management cluster away for a minute: said in the guest's Storage; what changed
    // there meanwhile is undone once it is back.
    management_link.cut();
    let since = Instant::now();
    let (_, message) = wait_for(
        "Storage: the management cluster does not answer",
        async || {
            storage_condition(&guest, "CSIDriverStarterDegraded")
                .await
                .filter(|(status, _)| status == "True")
        },
    )
    .await;
    assert!(
        message.contains("the management cluster does not answer"),
        "{message}"
    );
    scale_behind_its_back(&deployments).await;
    wait_out(since, &running, &leading, "management cluster").await;
    management_link.restore();
    let back = Instant::now();
    wait_for("the Deployment scaled back after the outage", async || {
        (replicas(&deployments).await == Some(1)).then_some(())
    })
    .await;
    println!(
        "management cluster back: the drift undone {:?} later",
        back.elapsed()
    );
    wait_for(
        "Storage: the management cluster answers again",
        async || {
            storage_condition(&guest, "CSIDriverStarterDegraded")
                .await
                .filter(|(status, _)| status == "False")
        },
    )
    .await;

    // The guest away for a minute: nothing can be said there; what changed there meanwhile is
    // undone once it is back.
    guest_link.cut();
    let since = Instant::now();
    cluster_roles
        .delete(OPERATOR_CLUSTER_ROLE, &Default::default())
        .await
        .unwrap();
    wait_out(since, &running, &leading, "guest").await;
    guest_link.restore();
    let back = Instant::now();
    wait_for(
        "the guest's ClusterRole restored after the outage",
        async || cluster_roles.get_opt(OPERATOR_CLUSTER_ROLE).await.unwrap(),
    )
    .await;
    println!("guest back: the drift undone {:?} later", back.elapsed());
    assert!(*leading.borrow(), "still leading");

    running.stop().await;
    drop(leading);
    let _ = election.await;
    on_management.assert_never_refused();

    // Cleanup: what it installed in the guest (and its refusals there), the control-plane
    // namespace and what HyperShift would have made.
    cso::finish(&guest, &on_guest, SHORT).await;
    delete_and_wait(
        &Api::<api::config_v1::ClusterOperator>::all(guest.clone()),
        "storage",
    )
    .await;
    delete_and_wait(
        &Api::<Namespace>::all(management.clone()),
        CONTROL_PLANE_NAMESPACE,
    )
    .await;
    if made_priority_class {
        delete_and_wait(
            &Api::<PriorityClass>::all(management.clone()),
            csi_kit::hosted::PRIORITY_CLASS,
        )
        .await;
    }
    undeclare_platform(&guest, declared).await;
}
