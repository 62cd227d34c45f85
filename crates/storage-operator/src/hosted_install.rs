//! The cluster storage operator's own install on the management side of a hosted control
//! plane (HyperShift): its ServiceAccount, Role, RoleBinding and Deployment in the hosted
//! cluster's control-plane namespace of the management cluster.
//!
//! OpenShift leaves these to HyperShift's control-plane operator, which creates them for every
//! hosted cluster; here they are generated from the code (`storage-operator manifests
//! --hosted-control-plane-namespace NS`, and `deploy/hypershift/management.yaml` with
//! HyperShift's `${CONTROLPLANE_NAMESPACE}` placeholder), so that the RBAC cannot drift from
//! what the operator does there. In the guest the operator uses the guest kubeconfig's
//! identity (HyperShift's `service-network-admin-kubeconfig`).
//!
//! The Role covers the control-plane namespace only, and within it only what the operator
//! does: it watches the driver operators' objects there (by the starter's label, which `list`
//! cannot be limited to), applies them by name, grants the driver operators' Roles by name
//! (`escalate` and `bind`: it does not hold what they allow, the Secrets and Pods of the
//! namespace among them), holds its Lease by name, records Events and reads the
//! `HostedControlPlane`. Nothing else of the control plane is readable or writable with it.

use std::collections::{BTreeMap, BTreeSet};

use csi_kit::HostedControlPlane;
use csi_kit::hosted::{GUEST_KUBECONFIG_SECRET, PRIORITY_CLASS, PULL_SECRET};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    LocalObjectReference, SecretVolumeSource, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opkit::rbac::{READ, dedupe, rule};
use serde_json::Value;

use crate::desired::Desired;
use crate::hosted::{
    GUEST_KUBECONFIG_DIR, GUEST_KUBECONFIG_VOLUME, MANAGEMENT_API_ACCESS_LABEL,
    hosted_starter_objects,
};
use crate::names::{LEASE, NAME};
use crate::registry::registry;
use crate::starter::{OPERATOR_IMAGE_ENV, StarterInputs};

/// HyperShift's placeholder for the control-plane namespace in its assets.
pub const CONTROL_PLANE_PLACEHOLDER: &str = "${CONTROLPLANE_NAMESPACE}";

/// What the starter applies in the control-plane namespace for every driver OpenShift runs
/// hosted: kind (plural, group) -> names.
fn written(namespace: &str) -> BTreeMap<(&'static str, &'static str), BTreeSet<String>> {
    let started: Vec<_> = registry()
        .into_iter()
        .filter(|entry| entry.hosted)
        .filter_map(|entry| Some((entry.clone(), drivers::by_name(entry.short_name).ok()?)))
        .collect();
    let inputs = StarterInputs {
        topology: csi_kit::Topology::External,
        log_level: api::operator_v1::LogLevel::Normal,
        proxy: Default::default(),
        env: BTreeMap::new(),
        operator_image: String::new(),
        tls_profile: None,
    };
    let control_plane = HostedControlPlane {
        namespace: namespace.to_owned(),
        ..HostedControlPlane::default()
    };
    let mut written: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
    for object in hosted_starter_objects(&started, &inputs, &control_plane).management {
        let (kind, name) = match &object {
            Desired::ServiceAccount(o) => (("serviceaccounts", ""), &o.metadata.name),
            Desired::ConfigMap(o) => (("configmaps", ""), &o.metadata.name),
            Desired::Service(o) => (("services", ""), &o.metadata.name),
            Desired::Deployment(o) => (("deployments", "apps"), &o.metadata.name),
            Desired::Role(o) => (("roles", RBAC_GROUP), &o.metadata.name),
            Desired::RoleBinding(o) => {
                written
                    .entry(("bound roles", RBAC_GROUP))
                    .or_default()
                    .insert(o.role_ref.name.clone());
                (("rolebindings", RBAC_GROUP), &o.metadata.name)
            }
            // Nothing else goes to the management cluster (checked by the tests).
            _ => (("other", ""), &None),
        };
        written
            .entry(kind)
            .or_default()
            .insert(name.clone().unwrap_or_default());
    }
    written
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The operator's rules in the control-plane namespace `namespace`.
pub fn management_rules(namespace: &str) -> Vec<PolicyRule> {
    let written = written(namespace);
    let named =
        |group: &str, resource: &str, verbs: &[&str], names: &BTreeSet<String>| PolicyRule {
            resource_names: Some(names.iter().cloned().collect()),
            ..rule(&[group], &[resource], verbs)
        };
    let mut rules = Vec::new();
    for ((resource, group), names) in &written {
        match *resource {
            "bound roles" => rules.push(named(group, "roles", &["bind"], names)),
            "other" => {}
            _ => {
                // Watched by the starter's label: `list` and `watch` cannot be limited to names.
                rules.push(rule(&[group], &[resource], READ));
                rules.push(named(group, resource, &["create", "patch"], names));
                if *resource == "roles" {
                    rules.push(named(group, resource, &["escalate"], names));
                }
            }
        }
    }
    // The release each driver's controller has rolled out, annotated on its Deployment (made
    // by the driver operator; see crate::deployment_version).
    let controllers: BTreeSet<String> = registry()
        .into_iter()
        .filter(|entry| entry.hosted)
        .filter_map(|entry| drivers::by_name(entry.short_name).ok())
        .map(|def| csi_kit::names::controller(&def))
        .collect();
    rules.push(named("apps", "deployments", &["patch"], &controllers));
    rules.extend([
        // Leader election: a Lease is created without a name the authorizer could check.
        rule(&["coordination.k8s.io"], &["leases"], &["create"]),
        PolicyRule {
            resource_names: Some(vec![LEASE.to_owned()]),
            ..rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["get", "update", "patch"],
            )
        },
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
        rule(&["hypershift.openshift.io"], &["hostedcontrolplanes"], READ),
    ]);
    dedupe(&mut rules);
    rules
}

fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some([("app.kubernetes.io/name".to_owned(), NAME.to_owned())].into()),
        ..ObjectMeta::default()
    }
}

/// The operator's Deployment in the control-plane namespace: `run --guest-kubeconfig`, with
/// HyperShift's guest kubeconfig Secret mounted, HyperShift's priority class, and the label
/// that lets it reach the management cluster's API.
pub fn build_management_deployment(namespace: &str, image: &str) -> Deployment {
    let mut pod_labels = crate::network_policy::operator_pod_labels();
    pod_labels.insert(MANAGEMENT_API_ACCESS_LABEL.to_owned(), "true".to_owned());
    let mut deployment = opkit::install::operator_deployment(opkit::install::OperatorDeployment {
        metadata: meta(NAME, namespace),
        name: NAME.into(),
        container: "operator".into(),
        image: image.into(),
        args: vec![
            "run".into(),
            format!("--guest-kubeconfig={GUEST_KUBECONFIG_DIR}/kubeconfig"),
        ],
        env: vec![k8s_openapi::api::core::v1::EnvVar {
            name: OPERATOR_IMAGE_ENV.into(),
            value: Some(image.into()),
            ..Default::default()
        }],
        priority_class: Some(PRIORITY_CLASS.into()),
        pod_labels,
        node_selector: None,
        pod_annotations: BTreeMap::new(),
        tolerations: Vec::new(),
        // Its /metrics stay on the admin port here: the management cluster's Role cannot let it
        // ask for the reviews an HTTPS scrape needs (they are cluster-scoped), and the guest's
        // Prometheus does not scrape the control plane (OpenShift's has no monitoring there).
        serving_cert_secret: None,
    });
    if let Some(spec) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: GUEST_KUBECONFIG_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(GUEST_KUBECONFIG_SECRET.to_owned()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        for container in &mut spec.containers {
            container
                .volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: GUEST_KUBECONFIG_VOLUME.to_owned(),
                    mount_path: GUEST_KUBECONFIG_DIR.to_owned(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                });
        }
    }
    deployment
}

/// Everything of the management side, in apply order, for the control-plane namespace
/// `namespace` (which HyperShift creates) and the operator image `image`.
pub fn build_management(namespace: &str, image: &str) -> Vec<Value> {
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: NAME.into(),
        namespace: Some(namespace.into()),
        ..Subject::default()
    };
    let service_account = ServiceAccount {
        metadata: meta(NAME, namespace),
        image_pull_secrets: Some(vec![LocalObjectReference {
            name: PULL_SECRET.to_owned(),
        }]),
        ..ServiceAccount::default()
    };
    let role = Role {
        metadata: meta(NAME, namespace),
        rules: Some(management_rules(namespace)),
    };
    let binding = RoleBinding {
        metadata: meta(NAME, namespace),
        role_ref: RoleRef {
            api_group: Some(RBAC_GROUP.into()),
            kind: "Role".into(),
            name: NAME.into(),
        },
        subjects: Some(vec![subject]),
    };
    [
        serde_json::to_value(service_account),
        serde_json::to_value(role),
        serde_json::to_value(binding),
        serde_json::to_value(build_management_deployment(namespace, image)),
    ]
    .into_iter()
    .filter_map(Result::ok)
    .collect()
}

#[cfg(test)]
mod tests {
    use opkit::rbac::{allows, allows_name};

    use super::*;

    const CP: &str = "clusters-demo";

    fn inputs() -> StarterInputs {
        StarterInputs {
            topology: csi_kit::Topology::External,
            log_level: api::operator_v1::LogLevel::Normal,
            proxy: Default::default(),
            env: BTreeMap::new(),
            operator_image: String::new(),
            tls_profile: None,
        }
    }

    /// Every object the starter applies in the control-plane namespace, for each driver
    /// OpenShift runs hosted: the operator may create and patch it by name, escalate and bind
    /// the Roles; and what it grants is not all held (so `escalate` is what allows it).
    #[test]
    fn the_management_role_covers_every_object_the_starter_applies_there() {
        let rules = management_rules(CP);
        let control_plane = HostedControlPlane {
            namespace: CP.into(),
            ..HostedControlPlane::default()
        };
        let mut checked = 0;
        let mut granted_not_held = 0;
        for entry in registry().into_iter().filter(|e| e.hosted) {
            let def = drivers::by_name(entry.short_name).unwrap();
            let objects =
                hosted_starter_objects(&[(entry.clone(), def)], &inputs(), &control_plane);
            for object in &objects.management {
                let (group, resource, meta) = match object {
                    Desired::ServiceAccount(o) => ("", "serviceaccounts", &o.metadata),
                    Desired::ConfigMap(o) => ("", "configmaps", &o.metadata),
                    Desired::Service(o) => ("", "services", &o.metadata),
                    Desired::Deployment(o) => ("apps", "deployments", &o.metadata),
                    Desired::Role(o) => (RBAC_GROUP, "roles", &o.metadata),
                    Desired::RoleBinding(o) => (RBAC_GROUP, "rolebindings", &o.metadata),
                    other => panic!("{}: {other:?} in the management cluster", entry.short_name),
                };
                assert_eq!(meta.namespace.as_deref(), Some(CP));
                let name = meta.name.as_deref().unwrap();
                for verb in ["get", "list", "watch"] {
                    assert!(allows(&rules, group, resource, verb), "{verb} {resource}");
                }
                for verb in ["create", "patch"] {
                    assert!(
                        allows_name(&rules, group, resource, verb, name),
                        "{verb} {resource} {name}"
                    );
                }
                assert!(!allows(&rules, group, resource, "delete"), "{resource}");
                match object {
                    Desired::Role(role) => {
                        assert!(allows_name(&rules, group, "roles", "escalate", name));
                        granted_not_held += role
                            .rules
                            .iter()
                            .flatten()
                            .filter(|granted| {
                                !granted.resources.iter().flatten().all(|res| {
                                    granted.verbs.iter().all(|v| {
                                        granted
                                            .api_groups
                                            .iter()
                                            .flatten()
                                            .all(|g| allows(&rules, g, res, v))
                                    })
                                })
                            })
                            .count();
                    }
                    Desired::RoleBinding(binding) => {
                        assert!(allows_name(
                            &rules,
                            RBAC_GROUP,
                            "roles",
                            "bind",
                            &binding.role_ref.name
                        ));
                    }
                    _ => {}
                }
                checked += 1;
            }
        }
        assert!(checked >= 6 * 5, "{checked} objects checked");
        assert!(granted_not_held > 0, "escalate is what allows the grants");
        // Nothing of the control plane beyond that: no Secret, Pod or other component's Lease.
        assert!(!allows(&rules, "", "secrets", "get"));
        assert!(!allows(&rules, "", "pods", "list"));
        assert!(!allows_name(
            &rules,
            "coordination.k8s.io",
            "leases",
            "patch",
            "kube-controller-manager"
        ));
        assert!(allows_name(
            &rules,
            "coordination.k8s.io",
            "leases",
            "patch",
            LEASE
        ));
        assert!(allows(
            &rules,
            "hypershift.openshift.io",
            "hostedcontrolplanes",
            "watch"
        ));
        // The drivers' controller Deployments, for their release annotation, and no other.
        assert!(allows_name(
            &rules,
            "apps",
            "deployments",
            "patch",
            "aws-ebs-csi-driver-controller"
        ));
        assert!(!allows_name(
            &rules,
            "apps",
            "deployments",
            "patch",
            "kube-apiserver"
        ));
    }

    #[test]
    fn the_operator_runs_with_the_guest_kubeconfig_in_the_control_plane() {
        let objects = build_management(CP, "quay.io/example/storage-operator:1");
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
        );
        assert!(objects.iter().all(|o| o["metadata"]["namespace"] == CP));
        assert_eq!(objects[2]["subjects"][0]["namespace"], CP);
        let pod = &objects[3]["spec"]["template"]["spec"];
        assert_eq!(pod["priorityClassName"], PRIORITY_CLASS);
        assert_eq!(
            pod["volumes"][0]["secret"]["secretName"],
            GUEST_KUBECONFIG_SECRET
        );
        let container = &pod["containers"][0];
        assert_eq!(
            container["args"],
            serde_json::json!(["run", "--guest-kubeconfig=/etc/guest-kubeconfig/kubeconfig"])
        );
        assert_eq!(
            container["volumeMounts"][0]["mountPath"],
            GUEST_KUBECONFIG_DIR
        );
        assert!(
            container["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "POD_NAMESPACE"),
            "the control-plane namespace is the pod's"
        );
        assert_eq!(
            objects[3]["spec"]["template"]["metadata"]["labels"][MANAGEMENT_API_ACCESS_LABEL],
            "true"
        );
    }
}
