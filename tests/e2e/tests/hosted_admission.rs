//! With a hosted control plane (HyperShift), every object both operators would write, on the
//! cluster it goes to, validated by two real API servers' admission: the management cluster
//! (`E2E_KUBECONFIG`), where the driver operators and the drivers' controllers run in a
//! control-plane namespace, and the guest (`E2E_GUEST_KUBECONFIG`). None of the HyperShift
//! drivers can run here (they need their clouds), so, as `catalogue_admission.rs` does for a
//! standalone cluster, the objects are created with `dryRun=All`, and a Pod from each
//! workload's template goes through the pod admission (ServiceAccount, PodSecurity, priority,
//! defaults) as the workload controllers' pods would.
//!
//! What HyperShift itself creates is created first, as it would: the control-plane namespace
//! and the `hypershift-control-plane` PriorityClass on the management cluster. The
//! ServiceAccounts (pod admission needs them), the namespaces and the ClusterCSIDriver CRD are
//! really created; the namespaces and the PriorityClass the test made are removed afterwards.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::collections::BTreeMap;

use csi_kit::{HostedControlPlane, Inputs, Topology};
use e2e::admission::{create, describe, pod_of};
use e2e::cleanup::delete_and_wait;
use e2e::{admin, guest_admin};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};
use storage_operator::registry::registry;
use storage_operator::starter::{StarterInputs, build_cluster_csi_driver};

/// The control-plane namespace of the hosted cluster on the management cluster.
const CONTROL_PLANE_NAMESPACE: &str = "clusters-e2e-hosted";

/// Kinds whose API the bare clusters do not serve (their CRDs come with other operators).
const OPTIONAL_KINDS: &[&str] = &["VolumeSnapshotClass", "ServiceMonitor"];

/// Creates the namespaces `objects` name that do not exist yet; returns those it made.
async fn namespaces_of(client: &Client, objects: &[Value]) -> Vec<String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut made = Vec::new();
    for object in objects {
        let Some(ns) = object["metadata"]["namespace"].as_str() else {
            continue;
        };
        if namespaces.get_opt(ns).await.unwrap().is_none() {
            namespaces
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
                )
                .await
                .unwrap();
            made.push(ns.to_owned());
        }
    }
    made
}

/// Creates the ServiceAccounts of `objects` and every other object with `dryRun=All`, and a
/// Pod of each workload; returns what the server refused, each line naming the object.
async fn admitted(client: &Client, cluster: &str, objects: &[Value]) -> Vec<String> {
    let mut refused = Vec::new();
    for object in objects.iter().filter(|o| o["kind"] == "ServiceAccount") {
        if let Err(e) = create(client, object, false).await {
            refused.push(format!("{cluster}: {}: {e}", describe(object)));
        }
    }
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        if kind == "ServiceAccount" || kind == "Namespace" {
            continue;
        }
        match create(client, object, true).await {
            Err(e) if OPTIONAL_KINDS.contains(&kind) && e.contains("is not served") => {}
            Err(e) => refused.push(format!("{cluster}: {}: {e}", describe(object))),
            Ok(()) => {}
        }
        if (kind == "Deployment" || kind == "DaemonSet")
            && let Err(e) = create(client, &pod_of(object, None), true).await
        {
            refused.push(format!("{cluster}: pod of {}: {e}", describe(object)));
        }
    }
    refused
}

#[tokio::test]
#[ignore = "needs two real clusters: set E2E_KUBECONFIG (management) and E2E_GUEST_KUBECONFIG (guest)"]
async fn every_hosted_object_passes_the_admission_of_the_cluster_it_goes_to() {
    let management = admin().await;
    let guest = guest_admin().await;
    // What HyperShift creates on the management cluster.
    let made_priority_class = e2e::install::hypershift_priority_class(&management).await;
    for crd in api::crds::all() {
        e2e::apply_crd(&guest, &crd).await;
    }

    let started: Vec<_> = registry()
        .into_iter()
        .filter(|entry| entry.hosted)
        .map(|entry| {
            let def = drivers::by_name(entry.short_name).unwrap();
            (entry, def)
        })
        .collect();
    assert_eq!(started.len(), 6, "OpenShift's six HyperShift drivers");
    // HyperShift's image: AWS EBS's driver operator gets its token minter, admitted too.
    let env: BTreeMap<String, String> = [(
        "HYPERSHIFT_IMAGE".to_owned(),
        "quay.io/hypershift/hypershift:e2e".to_owned(),
    )]
    .into();
    let inputs = StarterInputs {
        topology: Topology::External,
        log_level: api::operator_v1::LogLevel::Normal,
        proxy: Default::default(),
        env: env.clone(),
        operator_image: "quay.io/openshift/origin-cluster-storage-operator:latest".to_owned(),
        tls_profile: None,
    };
    let hcp = HostedControlPlane {
        namespace: CONTROL_PLANE_NAMESPACE.to_owned(),
        release_version: "4.22.0".to_owned(),
        ..HostedControlPlane::default()
    };
    let starter = storage_operator::hosted::hosted_starter_objects(&started, &inputs, &hcp);
    let mut on_management: Vec<Value> = starter.management.iter().map(|o| o.to_value()).collect();
    let mut on_guest: Vec<Value> = starter.guest.iter().map(|o| o.to_value()).collect();
    for (entry, def) in &started {
        on_guest.push(serde_json::to_value(build_cluster_csi_driver(entry, &inputs)).unwrap());
        let mut driver_inputs = Inputs::offline(def, Topology::External, &env);
        driver_inputs.hosted = Some(hcp.clone());
        let sides = csi_kit::hosted::render_hosted(def, &driver_inputs).unwrap();
        on_management.extend(sides.management.iter().map(|o| o.to_value()));
        on_guest.extend(sides.guest.iter().map(|o| o.to_value()));
    }
    // Everything on the management side is in the control-plane namespace.
    for object in &on_management {
        assert_eq!(
            object["metadata"]["namespace"],
            CONTROL_PLANE_NAMESPACE,
            "{}",
            describe(object)
        );
    }
    assert!(
        on_management.iter().any(|o| o["kind"] == "Deployment"
            && o["metadata"]["name"] == "aws-ebs-csi-driver-controller"),
        "the drivers' controllers run in the management cluster"
    );
    assert!(
        on_guest.iter().all(|o| o["kind"] != "Deployment"),
        "no Deployment of either operator goes to the guest"
    );

    let made_on_management = namespaces_of(&management, &on_management).await;
    let made_on_guest = namespaces_of(&guest, &on_guest).await;
    let mut refused = admitted(&management, "management", &on_management).await;
    refused.extend(admitted(&guest, "guest", &on_guest).await);
    for ns in made_on_management {
        delete_and_wait(&Api::<Namespace>::all(management.clone()), &ns).await;
    }
    for ns in made_on_guest {
        delete_and_wait(&Api::<Namespace>::all(guest.clone()), &ns).await;
    }
    if made_priority_class {
        delete_and_wait(
            &Api::<PriorityClass>::all(management.clone()),
            csi_kit::hosted::PRIORITY_CLASS,
        )
        .await;
    }
    assert!(
        refused.is_empty(),
        "the API servers refused:\n{}",
        refused.join("\n")
    );
}
