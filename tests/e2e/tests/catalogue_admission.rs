//! Every catalogue driver's pods, validated by the real API server's admission without running
//! them. None of the catalogue drivers can run on the node of `../shared/k8s`: the cloud drivers
//! (GCP PD, AWS EBS and EFS, Azure Disk and File, Cinder, Manila, vSphere, IBM VPC Block,
//! PowerVS) need their cloud's metadata and APIs, and no registry can be reached for any of
//! their images (SMB's included). So what is rendered for plain Kubernetes is created with
//! `dryRun=All`: every object (RBAC, CSIDriver, Services, the controller Deployment and node
//! DaemonSet), and a Pod from each workload's template, which goes through the pod admission
//! (ServiceAccount, PodSecurity, priority, defaults) as the workload controllers' pods would.
//! Only the ServiceAccounts are really created (pod admission needs them), in the driver's
//! namespace, which is removed afterwards when the test made it.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::collections::BTreeMap;

use csi_kit::{Inputs, Topology};
use e2e::admission::{create, describe, pod_of};
use e2e::cleanup::delete_and_wait;
use e2e::{admin, has_nodes};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Kinds whose API may be missing on plain Kubernetes (their CRDs come with other operators).
const OPTIONAL_KINDS: &[&str] = &[
    "VolumeSnapshotClass",
    "ServiceMonitor",
    "CredentialsRequest",
];

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG (see the e2e crate docs)"]
async fn every_catalogue_drivers_pods_pass_the_api_servers_admission() {
    let admin = admin().await;
    let node = if has_nodes(&admin).await {
        Api::<Node>::all(admin.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .first()
            .map(|n| n.name_any())
    } else {
        None
    };
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let env = BTreeMap::new();
    let topology = Topology::Kubernetes {
        control_plane_nodes: true,
    };
    let mut failures = Vec::new();
    for short in drivers::short_names() {
        let def = drivers::by_name(short).unwrap();
        let objects = csi_kit::render(&def, &Inputs::offline(&def, topology, &env));
        let mut made = Vec::new();
        for object in &objects {
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
        let mut workloads = 0;
        for object in objects.iter().filter(|o| o["kind"] == "ServiceAccount") {
            if let Err(e) = create(&admin, object, false).await {
                failures.push(format!("{short}: {}: {e}", describe(object)));
            }
        }
        for object in &objects {
            let kind = object["kind"].as_str().unwrap_or_default();
            if kind == "ServiceAccount" || kind == "Namespace" {
                continue;
            }
            match create(&admin, object, true).await {
                Err(e) if OPTIONAL_KINDS.contains(&kind) && e.contains("is not served") => {}
                Err(e) => failures.push(format!("{short}: {}: {e}", describe(object))),
                Ok(()) => {}
            }
            if kind == "Deployment" || kind == "DaemonSet" {
                workloads += 1;
                let pod = pod_of(object, node.as_deref());
                if let Err(e) = create(&admin, &pod, true).await {
                    failures.push(format!("{short}: pod of {}: {e}", describe(object)));
                }
            }
        }
        if workloads == 0 {
            failures.push(format!("{short}: renders no Deployment or DaemonSet"));
        }
        for ns in made {
            delete_and_wait(&namespaces, &ns).await;
        }
    }
    assert!(
        failures.is_empty(),
        "the API server refused:\n{}",
        failures.join("\n")
    );
}
