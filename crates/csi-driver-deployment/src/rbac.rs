//! The permissions the controller itself needs, for the manifests that install it.

use api::csidriver_v1alpha1::CSIDriverDeployment;
use serde_json::json;

use crate::build::{DeclaredInputs, build_operands};
use csi_kit::inputs::{OptionalKind, Topology};
use csi_kit::render::Operand;

/// Every permission the controller needs, cluster-wide: its own API (finalizers, status), the
/// operands in any namespace, the cluster-scoped ones, what it reads, and every rule of every
/// role it can create (RBAC lets it grant only what it holds).
pub fn operator_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    use opkit::rbac::rule;
    const READ: &[&str] = &["get", "list", "watch"];
    const MANAGE: &[&str] = &[
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let mut rules = vec![
        rule(
            &["csidriver.storage.openshift.io"],
            &["csidriverdeployments"],
            &["get", "list", "watch", "patch", "update"],
        ),
        rule(
            &["csidriver.storage.openshift.io"],
            &["csidriverdeployments/status"],
            &["get", "patch", "update"],
        ),
        // Owner references that block deletion need this where admission enforces it.
        rule(
            &["csidriver.storage.openshift.io"],
            &["csidriverdeployments/finalizers"],
            &["update"],
        ),
        rule(
            &["", "apps", "policy", "rbac.authorization.k8s.io"],
            &[
                "serviceaccounts",
                "deployments",
                "daemonsets",
                "poddisruptionbudgets",
                "roles",
                "rolebindings",
            ],
            MANAGE,
        ),
        rule(
            &["rbac.authorization.k8s.io", "storage.k8s.io"],
            &[
                "clusterroles",
                "clusterrolebindings",
                "csidrivers",
                "storageclasses",
            ],
            MANAGE,
        ),
        rule(
            &["snapshot.storage.k8s.io"],
            &["volumesnapshotclasses"],
            MANAGE,
        ),
        // Volumes hold a removal back; claims Pending on a driver are reported (StuckClaims).
        rule(
            &[""],
            &["persistentvolumes", "persistentvolumeclaims", "nodes"],
            READ,
        ),
        rule(&["config.openshift.io"], &["infrastructures"], READ),
        // Whether the VolumeSnapshotClass CRD exists: that CRD only (it is watched by name).
        k8s_openapi::api::rbac::v1::PolicyRule {
            resource_names: Some(vec![
                OptionalKind::VolumeSnapshotClass.crd_name().to_owned(),
            ]),
            ..rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                READ,
            )
        },
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
    ];
    // What it grants: the roles of the largest declared drivers, on OpenShift.
    let inputs = DeclaredInputs::offline(Topology::HighlyAvailable);
    for (controller, provisioning) in [
        (
            json!({"spec": {"hostNetwork": true, "containers": [{"name": "driver"}]}}),
            "Central",
        ),
        (
            json!({"spec": {"containers": [{"name": "driver", "securityContext": {"privileged": true}}]}}),
            "Distributed",
        ),
    ] {
        let object = json!({
            "metadata": {"name": "all", "namespace": "ns"},
            "spec": {
                "driverName": "all.csi.example.com",
                "driverSocket": "/csi/csi.sock",
                "provisioning": provisioning,
                "csiDriver": {"storageCapacity": true},
                "sidecars": {"resizer": true, "snapshotter": true},
                "driverControllerTemplate": controller,
                "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
            }
        });
        let Ok(cd) = api::yaml::from_value::<CSIDriverDeployment>(&object) else {
            continue;
        };
        for operand in build_operands(&cd, &inputs) {
            match operand {
                Operand::ClusterRole(role) => rules.extend(role.rules.into_iter().flatten()),
                Operand::Role(role) => rules.extend(role.rules.into_iter().flatten()),
                _ => {}
            }
        }
    }
    opkit::rbac::dedupe(&mut rules);
    rules
}
