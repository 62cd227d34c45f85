//! The install manifests of the cluster storage operator itself, for OpenShift and for plain
//! Kubernetes, generated from the code so they cannot drift from it: the namespace, the
//! ServiceAccount, RBAC, the Deployment, and (on plain Kubernetes) the CRDs it serves.
//!
//! Its ClusterRole is derived like the driver operators': what it reads, what it writes, and
//! every permission of the roles it creates (the driver operators' roles and the shared sidecar
//! roles), over every driver in the catalogue and every topology. No cluster-admin. Likewise a
//! Role in every namespace the starter creates Roles in ([`driver_namespaces`]): the API server
//! lets it grant there only what it holds there.

use std::collections::BTreeMap;

use csi::Topology;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvVar, Namespace, ServiceAccount, Toleration};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::plan::OPERATOR_NAMESPACE;
use opkit::rbac::{MANAGE, READ, dedupe, rule};

use crate::registry::{DRIVER_NAMESPACE, driver_namespaces, registry};
use crate::starter::{self, OPERATOR_IMAGE_ENV, StarterInputs};

/// The name of the operator's Deployment, ServiceAccount and RBAC objects.
pub const NAME: &str = "cluster-storage-operator";

/// Which cluster the manifests are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// OpenShift: the CRDs and config objects exist; control-plane placement and priority.
    OpenShift,
    /// Plain Kubernetes: ships the CRDs it serves.
    Kubernetes,
}

impl Flavour {
    /// The directory under `deploy/`.
    pub fn dir(self) -> &'static str {
        match self {
            Self::OpenShift => "openshift",
            Self::Kubernetes => "kubernetes",
        }
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some([("app.kubernetes.io/name".to_owned(), NAME.to_owned())].into()),
        ..Default::default()
    }
}

/// The operator's ClusterRole and its Roles: one in each of [`driver_namespaces`], in that
/// order (the driver namespace first).
pub fn build_rbac() -> (ClusterRole, Vec<Role>) {
    let mut cluster_rules = vec![
        rule(
            &["operator.openshift.io"],
            &["storages", "clustercsidrivers"],
            &["get", "list", "watch", "create"],
        ),
        // Adoption progress is recorded in annotations on Storage/cluster.
        rule(&["operator.openshift.io"], &["storages"], &["patch"]),
        // Adopting OLM-installed driver operators: find and remove their Subscription and CSV,
        // and see OLM's operator Deployment gone.
        rule(
            &["operators.coreos.com"],
            &["subscriptions", "clusterserviceversions"],
            &["get", "list", "delete"],
        ),
        rule(&["apps"], &["deployments"], &["get"]),
        rule(
            &["operator.openshift.io"],
            &["storages/status"],
            &["get", "update", "patch"],
        ),
        rule(
            &["config.openshift.io"],
            &["clusteroperators"],
            &["get", "list", "watch", "create"],
        ),
        rule(
            &["config.openshift.io"],
            &["clusteroperators/status"],
            &["get", "update", "patch"],
        ),
        rule(
            &["config.openshift.io"],
            &["infrastructures", "featuregates", "proxies"],
            READ,
        ),
        rule(&[""], &["nodes"], READ),
        rule(&["storage.k8s.io"], &["csidrivers"], READ),
        rule(
            &[""],
            &["namespaces"],
            &["get", "list", "watch", "create", "update", "patch"],
        ),
        rule(
            &["rbac.authorization.k8s.io"],
            &["clusterroles", "clusterrolebindings"],
            MANAGE,
        ),
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
    ];
    // The driver operators' ServiceAccounts and Deployments are in the driver namespace; their
    // Roles and RoleBindings there and in their separate operand namespaces.
    let mut namespace_rules: BTreeMap<String, Vec<_>> = driver_namespaces()
        .into_iter()
        .map(|namespace| {
            let rules = if namespace == DRIVER_NAMESPACE {
                vec![rule(
                    &["", "apps", "rbac.authorization.k8s.io"],
                    &["serviceaccounts", "deployments", "roles", "rolebindings"],
                    MANAGE,
                )]
            } else {
                vec![rule(
                    &["rbac.authorization.k8s.io"],
                    &["roles", "rolebindings"],
                    MANAGE,
                )]
            };
            (namespace, rules)
        })
        .collect();
    // The CSIDriverDeployment controller runs in this process (when its CRD is served).
    cluster_rules.extend(csi::declared::controller::operator_rules());
    // Every permission of the roles it creates.
    for role in csi::build_shared_cluster_roles() {
        cluster_rules.extend(role.rules.into_iter().flatten());
    }
    for entry in registry() {
        let Ok(def) = drivers::by_name(entry.short_name) else {
            continue;
        };
        for topology in Topology::ALL {
            let inputs = StarterInputs {
                topology,
                log_level: api::operator_v1::LogLevel::Normal,
                proxy: Default::default(),
                env: BTreeMap::new(),
                operator_image: String::new(),
            };
            let (cluster_role, roles) = starter::build_rbac(&entry, &def, &inputs);
            cluster_rules.extend(cluster_role.rules.into_iter().flatten());
            for role in roles {
                let namespace = role.metadata.namespace.unwrap_or_default();
                // `driver_namespaces` derives from the same catalogue: every Role's is there.
                if let Some(rules) = namespace_rules.get_mut(&namespace) {
                    rules.extend(role.rules.into_iter().flatten());
                }
            }
        }
    }
    dedupe(&mut cluster_rules);
    let roles = driver_namespaces()
        .into_iter()
        .map(|namespace| {
            let mut rules = namespace_rules.remove(&namespace).unwrap_or_default();
            dedupe(&mut rules);
            Role {
                metadata: meta(NAME, Some(&namespace)),
                rules: Some(rules),
            }
        })
        .collect();
    (
        ClusterRole {
            metadata: meta(NAME, None),
            rules: Some(cluster_rules),
            ..Default::default()
        },
        roles,
    )
}

fn subject() -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: NAME.into(),
        namespace: Some(OPERATOR_NAMESPACE.into()),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    }
}

/// The operator's Deployment.
pub fn build_deployment(flavour: Flavour, image: &str) -> Deployment {
    let openshift = flavour == Flavour::OpenShift;
    let control_plane = if openshift {
        "node-role.kubernetes.io/master"
    } else {
        "node-role.kubernetes.io/control-plane"
    };
    opkit::install::operator_deployment(opkit::install::OperatorDeployment {
        metadata: meta(NAME, Some(OPERATOR_NAMESPACE)),
        name: NAME.into(),
        container: "operator".into(),
        image: image.into(),
        args: vec!["run".into()],
        env: vec![EnvVar {
            name: OPERATOR_IMAGE_ENV.into(),
            value: Some(image.into()),
            ..Default::default()
        }],
        priority_class: openshift.then(|| "system-cluster-critical".into()),
        // On plain Kubernetes the control plane may be managed and invisible: prefer it
        // through the toleration, never require it.
        node_selector: openshift.then(|| [(control_plane.to_owned(), String::new())].into()),
        tolerations: vec![Toleration {
            key: Some(control_plane.into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }],
    })
}

/// Every object of one flavour, in apply order, as JSON.
pub fn build(flavour: Flavour, image: &str) -> Vec<Value> {
    let mut objects = Vec::new();
    let mut push = |value: Result<Value, serde_json::Error>| objects.extend(value.ok());
    if flavour == Flavour::Kubernetes {
        for crd in [
            api::crds::cluster_csi_driver(),
            <api::operator_v1::Storage as kube::CustomResourceExt>::crd(),
        ] {
            push(serde_json::to_value(crd));
        }
    }
    push(serde_json::to_value(Namespace {
        metadata: meta(OPERATOR_NAMESPACE, None),
        ..Default::default()
    }));
    push(serde_json::to_value(starter::build_namespace()));
    for namespace in driver_namespaces()
        .iter()
        .filter(|namespace| *namespace != DRIVER_NAMESPACE)
    {
        push(serde_json::to_value(starter::build_operand_namespace(
            namespace,
        )));
    }
    push(serde_json::to_value(ServiceAccount {
        metadata: meta(NAME, Some(OPERATOR_NAMESPACE)),
        ..Default::default()
    }));
    let (cluster_role, roles) = build_rbac();
    push(serde_json::to_value(cluster_role));
    push(serde_json::to_value(ClusterRoleBinding {
        metadata: meta(NAME, None),
        role_ref: role_ref("ClusterRole", NAME),
        subjects: Some(vec![subject()]),
    }));
    for role in roles {
        let namespace = role.metadata.namespace.clone();
        push(serde_json::to_value(role));
        push(serde_json::to_value(RoleBinding {
            metadata: meta(NAME, namespace.as_deref()),
            role_ref: role_ref("Role", NAME),
            subjects: Some(vec![subject()]),
        }));
    }
    push(serde_json::to_value(Role {
        metadata: meta(&format!("{NAME}-lease"), Some(OPERATOR_NAMESPACE)),
        rules: Some(vec![rule(&["coordination.k8s.io"], &["leases"], MANAGE)]),
    }));
    push(serde_json::to_value(RoleBinding {
        metadata: meta(&format!("{NAME}-lease"), Some(OPERATOR_NAMESPACE)),
        role_ref: role_ref("Role", &format!("{NAME}-lease")),
        subjects: Some(vec![subject()]),
    }));
    push(serde_json::to_value(build_deployment(flavour, image)));
    objects
}

#[cfg(test)]
mod tests {
    use opkit::rbac::allows;

    use super::*;

    #[test]
    fn the_operator_holds_what_it_grants_and_no_wildcards() {
        let (cluster_role, roles) = build_rbac();
        let rules = cluster_role.rules.unwrap();
        // It creates the shared provisioner role, so it holds PV creation itself.
        assert!(allows(&rules, "", "persistentvolumes", "create"));
        // It creates driver-operator roles that may write CSIDrivers and StorageClasses.
        assert!(allows(&rules, "storage.k8s.io", "storageclasses", "patch"));
        assert!(allows(
            &rules,
            "config.openshift.io",
            "clusteroperators/status",
            "patch"
        ));
        assert!(
            !rules
                .iter()
                .any(|r| r.verbs.iter().any(|v| v == "*" || v == "escalate"))
        );
        assert!(
            !rules
                .iter()
                .any(|r| r.resources.iter().flatten().any(|x| x == "*"))
        );
        // Every role the starter builds for a driver operator is covered, in its namespace.
        let role_in = |namespace: &str| {
            roles
                .iter()
                .find(|r| r.metadata.namespace.as_deref() == Some(namespace))
                .unwrap_or_else(|| panic!("no Role in {namespace}"))
                .rules
                .as_ref()
                .unwrap()
        };
        for entry in registry() {
            let def = drivers::by_name(entry.short_name).unwrap();
            for topology in Topology::ALL {
                let inputs = StarterInputs {
                    topology,
                    log_level: api::operator_v1::LogLevel::Normal,
                    proxy: Default::default(),
                    env: BTreeMap::new(),
                    operator_image: String::new(),
                };
                let (driver_role, driver_ns_roles) = starter::build_rbac(&entry, &def, &inputs);
                for r in driver_role.rules.unwrap() {
                    assert!(
                        rules.contains(&r),
                        "{} {topology}: missing {r:?}",
                        entry.short_name
                    );
                }
                for driver_ns_role in driver_ns_roles {
                    let namespace = driver_ns_role.metadata.namespace.unwrap();
                    for r in driver_ns_role.rules.unwrap() {
                        assert!(
                            role_in(&namespace).contains(&r),
                            "{} {topology}: missing {r:?} in {namespace}",
                            entry.short_name
                        );
                    }
                }
            }
        }
        // It applies and watches the driver operators' Roles and RoleBindings in each.
        for namespace in driver_namespaces() {
            for resource in ["roles", "rolebindings"] {
                for verb in ["watch", "patch"] {
                    assert!(
                        allows(
                            role_in(&namespace),
                            "rbac.authorization.k8s.io",
                            resource,
                            verb
                        ),
                        "{verb} {resource} in {namespace}"
                    );
                }
            }
        }
        assert_eq!(roles.len(), driver_namespaces().len());
    }

    #[test]
    fn the_install_makes_every_namespace_before_the_roles_in_it() {
        for flavour in [Flavour::OpenShift, Flavour::Kubernetes] {
            let objects = build(flavour, "example.com/so:1");
            let position = |kind: &str, name: &str, namespace: Option<&str>| {
                objects
                    .iter()
                    .position(|o| {
                        o["kind"] == kind
                            && o["metadata"]["name"] == name
                            && o["metadata"]["namespace"].as_str() == namespace
                    })
                    .unwrap_or_else(|| panic!("{flavour:?}: no {kind} {name} in {namespace:?}"))
            };
            for namespace in driver_namespaces() {
                let made = position("Namespace", &namespace, None);
                let role = position("Role", NAME, Some(&namespace));
                let binding = position("RoleBinding", NAME, Some(&namespace));
                assert!(made < role && role < binding, "{flavour:?}: {namespace}");
                // Labelled as the starter labels it.
                let expected = if namespace == DRIVER_NAMESPACE {
                    starter::build_namespace()
                } else {
                    starter::build_operand_namespace(&namespace)
                };
                assert_eq!(
                    objects[made],
                    serde_json::to_value(expected).unwrap(),
                    "{flavour:?}: {namespace}"
                );
            }
        }
    }

    #[test]
    fn the_operator_holds_what_the_csidriverdeployment_controller_does_and_grants() {
        let (cluster_role, _) = build_rbac();
        let rules = cluster_role.rules.unwrap();
        for (group, resource, verb) in [
            (
                "csidriver.storage.openshift.io",
                "csidriverdeployments",
                "patch",
            ),
            (
                "csidriver.storage.openshift.io",
                "csidriverdeployments/status",
                "patch",
            ),
            ("apps", "daemonsets", "delete"),
            ("storage.k8s.io", "csidrivers", "delete"),
            ("", "persistentvolumes", "watch"),
            ("coordination.k8s.io", "leases", "update"),
            (
                "snapshot.storage.k8s.io",
                "volumesnapshotcontents/status",
                "patch",
            ),
        ] {
            assert!(
                allows(&rules, group, resource, verb),
                "{verb} {group}/{resource}"
            );
        }
        let scc: Vec<&str> = rules
            .iter()
            .filter(|r| {
                r.resources
                    .iter()
                    .flatten()
                    .any(|x| x == "securitycontextconstraints")
            })
            .flat_map(|r| r.resource_names.iter().flatten().map(String::as_str))
            .collect();
        assert!(
            scc.contains(&"privileged") && scc.contains(&"hostnetwork-v2"),
            "{scc:?}"
        );
    }

    #[test]
    fn flavours_differ_where_the_platforms_do() {
        let kubernetes = build(Flavour::Kubernetes, "example.com/so:1");
        let openshift = build(Flavour::OpenShift, "example.com/so:1");
        let kinds = |objects: &[Value]| {
            objects
                .iter()
                .map(|o| o["kind"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kinds(&kubernetes)
                .iter()
                .filter(|k| *k == "CustomResourceDefinition")
                .count(),
            2
        );
        assert!(!kinds(&openshift).contains(&"CustomResourceDefinition".to_owned()));
        let deployment = |objects: &[Value]| {
            objects
                .iter()
                .find(|o| o["kind"] == "Deployment")
                .unwrap()
                .clone()
        };
        let os = deployment(&openshift);
        assert_eq!(
            os["spec"]["template"]["spec"]["priorityClassName"],
            "system-cluster-critical"
        );
        assert!(deployment(&kubernetes)["spec"]["template"]["spec"]["nodeSelector"].is_null());
        assert_eq!(
            os["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
            "example.com/so:1"
        );
    }
}
