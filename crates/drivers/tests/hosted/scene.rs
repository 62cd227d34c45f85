//! The scene of the hosted control plane tests on testkit (the drivers' and the cluster storage
//! operator's): a guest and a management cluster, both running the workload simulation, and
//! HyperShift's `HostedControlPlane`.

use api::config_v1::Infrastructure;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use testkit::{Cluster, SimConfig};

/// The hosted cluster's control-plane namespace on the management cluster.
pub const CONTROL_PLANE_NS: &str = "clusters-hosted";

/// The hosted control plane the operators are given.
pub fn control_plane() -> csi_kit::HostedControlPlane {
    csi_kit::HostedControlPlane {
        namespace: CONTROL_PLANE_NS.to_owned(),
        release_version: "4.22.0".to_owned(),
        ..csi_kit::HostedControlPlane::default()
    }
}

/// Creates namespace `name`.
pub async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// A hosted OpenShift cluster on AWS (`controlPlaneTopology: External`) with our CRDs of
/// `kinds` (Infrastructure always), the `namespaces` and three nodes; and a management cluster
/// with the control-plane namespace (what HyperShift creates) and two nodes. Returns the
/// management cluster, then the guest.
pub async fn clusters(kinds: &[&str], namespaces: &[&str]) -> (Cluster, Cluster) {
    let guest = Cluster::start().await;
    let admin = guest.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        let kind = crd.spec.names.kind.as_str();
        if kind == "Infrastructure" || kinds.contains(&kind) {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "hosted-x7k2p", "controlPlaneTopology": "External",
                   "platformStatus": {"type": "AWS", "aws": {"region": "eu-west-1"}}}
    });
    let infrastructures: Api<Infrastructure> = Api::all(admin.clone());
    infrastructures
        .create(
            &PostParams::default(),
            &serde_json::from_value(infrastructure.clone()).unwrap(),
        )
        .await
        .unwrap();
    infrastructures
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    for name in namespaces {
        namespace(&admin, name).await;
    }
    for node in ["worker-a", "worker-b", "worker-c"] {
        guest.add_node(node, true);
    }
    guest.simulate_workloads(SimConfig::default());

    let management = Cluster::start().await;
    namespace(&management.client(), CONTROL_PLANE_NS).await;
    for node in ["management-a", "management-b"] {
        management.add_node(node, true);
    }
    management.simulate_workloads(SimConfig::default());
    (management, guest)
}

/// HyperShift's `HostedControlPlane` CRD (accepting any object, as HyperShift is not there),
/// and the control plane's object `hosted` with `spec`; the API of those objects.
pub async fn hosted_control_plane(management: &Client, spec: Value) -> Api<DynamicObject> {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "hostedcontrolplanes.hypershift.openshift.io"},
        "spec": {"group": "hypershift.openshift.io", "scope": "Namespaced",
                 "names": {"kind": "HostedControlPlane", "plural": "hostedcontrolplanes",
                           "singular": "hostedcontrolplane", "listKind": "HostedControlPlaneList"},
                 "versions": [{"name": "v1beta1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(management.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let planes: Api<DynamicObject> = Api::namespaced_with(
        management.clone(),
        CONTROL_PLANE_NS,
        &csi_kit::HostedControlPlane::api_resource(),
    );
    let plane: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedControlPlane",
        "metadata": {"name": "hosted", "namespace": CONTROL_PLANE_NS},
        "spec": spec
    }))
    .unwrap();
    planes.create(&PostParams::default(), &plane).await.unwrap();
    planes
}
