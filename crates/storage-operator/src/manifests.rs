//! The install manifests of the cluster storage operator itself, for OpenShift and for plain
//! Kubernetes, generated from the code so they cannot drift from it: the namespace, the
//! ServiceAccount, RBAC, the Deployment, and (on plain Kubernetes) the CRDs it serves.
//!
//! Its RBAC is what it reads and writes itself, and no more; no cluster-admin. It does not hold
//! what it grants the driver operators (their Secrets, the shared provisioner role's reading of
//! every Secret): the API server lets a writer of a role grant what it does not hold when it
//! may `escalate` that role, and bind a role it does not hold when it may `bind` it, and both
//! are asked with the role's name. So its ClusterRole and its Role in each namespace the
//! starter writes Roles in ([`driver_namespaces`]) may `create`, `patch` and `escalate` exactly
//! the roles the starter applies, `bind` exactly the roles its bindings refer to, and write
//! exactly those bindings, each by name ([`Written`], from [`plan::starter_objects`] over
//! every catalogue driver and topology). The starter writes with server-side apply, a PATCH
//! to the object's name, which the API server authorizes as `patch`, and as `create` with
//! that name when the object does not exist yet, so names can limit both.
//!
//! The CSIDriverDeployment controller runs in the same process, as the same ServiceAccount,
//! and keeps holding what it grants ([`csi_driver_deployment::controller::operator_rules`]): the roles
//! it writes are named after each CSIDriverDeployment, which a user names, and `resourceNames`
//! are exact names (no prefix or pattern), so `escalate` cannot be limited to them.

use std::collections::{BTreeMap, BTreeSet};

use csi_kit::Topology;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvVar, Namespace, ServiceAccount, Toleration};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::monitoring;
use crate::names::OPERATOR_NAMESPACE;
use crate::plan::{self, Desired};
use opkit::rbac::{MANAGE, READ, dedupe, rule};

use crate::registry::{DRIVER_NAMESPACE, driver_namespaces, registry};
use crate::starter::{self, OPERATOR_IMAGE_ENV, StarterInputs};
use crate::validator;
use crate::vsphere_detector;

/// Defined in [`crate::names`], below every file that needs them; re-exported for the callers
/// that name them here.
pub use crate::names::{Flavour, NAME};

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some([("app.kubernetes.io/name".to_owned(), NAME.to_owned())].into()),
        ..Default::default()
    }
}

/// The names of the RBAC objects the starter applies, over every driver of the catalogue and
/// every topology: what the operator's own RBAC names in `resourceNames`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The ClusterRoles it applies: the driver operators' and the shared ones.
    pub cluster_roles: BTreeSet<String>,
    /// The ClusterRoleBindings it applies.
    pub cluster_role_bindings: BTreeSet<String>,
    /// The ClusterRoles its bindings refer to.
    pub bound_cluster_roles: BTreeSet<String>,
    /// The Roles it applies, by namespace.
    pub roles: BTreeMap<String, BTreeSet<String>>,
    /// The RoleBindings it applies, by namespace.
    pub role_bindings: BTreeMap<String, BTreeSet<String>>,
    /// The Roles its RoleBindings refer to, by namespace.
    pub bound_roles: BTreeMap<String, BTreeSet<String>>,
}

impl Written {
    /// Adds the RBAC objects among `objects`.
    pub fn add(&mut self, objects: &[Desired]) {
        let name = |name: &Option<String>| name.clone().unwrap_or_default();
        let namespace = |namespace: &Option<String>| namespace.clone().unwrap_or_default();
        for object in objects {
            match object {
                Desired::ClusterRole(role) => {
                    self.cluster_roles.insert(name(&role.metadata.name));
                }
                Desired::ClusterRoleBinding(binding) => {
                    self.cluster_role_bindings
                        .insert(name(&binding.metadata.name));
                    self.bound_cluster_roles
                        .insert(binding.role_ref.name.clone());
                }
                Desired::Role(role) => {
                    self.roles
                        .entry(namespace(&role.metadata.namespace))
                        .or_default()
                        .insert(name(&role.metadata.name));
                }
                Desired::RoleBinding(binding) => {
                    let namespace = namespace(&binding.metadata.namespace);
                    self.role_bindings
                        .entry(namespace.clone())
                        .or_default()
                        .insert(name(&binding.metadata.name));
                    // A RoleBinding may refer to a ClusterRole; `bind` is then asked of
                    // clusterroles, which the ClusterRole's rule answers in every namespace.
                    if binding.role_ref.kind == "ClusterRole" {
                        self.bound_cluster_roles
                            .insert(binding.role_ref.name.clone());
                    } else {
                        self.bound_roles
                            .entry(namespace)
                            .or_default()
                            .insert(binding.role_ref.name.clone());
                    }
                }
                Desired::Namespace(_)
                | Desired::ServiceAccount(_)
                | Desired::Deployment(_)
                | Desired::CustomResourceDefinition(_)
                | Desired::Monitoring(..)
                | Desired::ConfigMap(_)
                | Desired::Service(_) => {}
            }
        }
    }
}

/// The names of the driver operators' config ConfigMaps, over the whole registry.
fn operator_config_names() -> Vec<String> {
    registry()
        .iter()
        .filter_map(starter::operator_config_name)
        .collect()
}

/// What the starter applies for the whole catalogue, in each topology.
pub fn written() -> Written {
    let started: Vec<_> = registry()
        .into_iter()
        .filter_map(|entry| {
            let def = drivers::by_name(entry.short_name).ok()?;
            Some((entry, def))
        })
        .collect();
    let mut written = Written::default();
    for topology in Topology::ALL {
        let inputs = StarterInputs {
            topology,
            log_level: api::operator_v1::LogLevel::Normal,
            proxy: Default::default(),
            env: BTreeMap::new(),
            operator_image: String::new(),
            tls_profile: None,
        };
        written.add(&plan::starter_objects(&started, &inputs));
    }
    // The volume data source validator's, on every platform.
    written.add(&[
        Desired::ClusterRole(validator::build_cluster_role()),
        Desired::ClusterRoleBinding(validator::build_cluster_role_binding()),
    ]);
    // The vSphere problem detector's, on vSphere.
    written.add(&[
        Desired::ClusterRole(vsphere_detector::build_cluster_role()),
        Desired::ClusterRoleBinding(vsphere_detector::build_cluster_role_binding()),
        Desired::Role(vsphere_detector::build_role()),
        Desired::RoleBinding(vsphere_detector::build_role_binding()),
    ]);
    written
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The name of the CSIDriverDeployment CRD.
fn declared_crd() -> String {
    <api::csidriver_v1alpha1::CSIDriverDeployment as kube::CustomResourceExt>::crd_name().into()
}

/// `verbs` on `resource` of RBAC, for the objects `names` only; none when there are no names
/// (an empty `resourceNames` would mean every object).
fn by_name(resource: &str, verbs: &[&str], names: Option<&BTreeSet<String>>) -> Option<PolicyRule> {
    let names = names.filter(|names| !names.is_empty())?;
    Some(PolicyRule {
        resource_names: Some(names.iter().cloned().collect()),
        ..rule(&[RBAC_GROUP], &[resource], verbs)
    })
}

/// The operator's ClusterRole and its Roles: one in each of [`driver_namespaces`], in that
/// order (the driver namespace first).
pub fn build_rbac() -> (ClusterRole, Vec<Role>) {
    let written = written();
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
        // The TLS profile of the driver operators' config ConfigMaps: APIServer/cluster only.
        PolicyRule {
            resource_names: Some(vec!["cluster".to_owned()]),
            ..rule(&["config.openshift.io"], &["apiservers"], READ)
        },
        rule(&[""], &["nodes"], READ),
        rule(&["storage.k8s.io"], &["csidrivers"], READ),
        rule(
            &[""],
            &["namespaces"],
            &["get", "list", "watch", "create", "update", "patch"],
        ),
        // It starts the CSIDriverDeployment controller once that CRD is established,
        // installs the volume data source validator's VolumePopulator CRD, and applies its
        // ServiceMonitor and PrometheusRule once Prometheus' CRDs exist: it watches those four
        // CRDs (a list and watch of one name are asked with that name), and writes the second.
        PolicyRule {
            resource_names: Some(
                [declared_crd(), validator::CRD_NAME.to_owned()]
                    .into_iter()
                    .chain(monitoring::Kind::ALL.map(|k| k.crd_name().to_owned()))
                    .collect(),
            ),
            ..rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                READ,
            )
        },
        PolicyRule {
            resource_names: Some(vec![validator::CRD_NAME.to_owned()]),
            ..rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &["create", "patch"],
            )
        },
        // The storage metrics count the classes.
        rule(
            &["storage.k8s.io"],
            &["storageclasses", "volumeattributesclasses"],
            READ,
        ),
        // SELinuxMountGAReadiness reads openshift-config/selinux-conflicts: by that name only
        // (a ClusterRole rule, so that it needs no Role in a namespace plain Kubernetes lacks).
        PolicyRule {
            resource_names: Some(vec![crate::selinux::CONFIG_MAP.to_owned()]),
            ..rule(&[""], &["configmaps"], READ)
        },
        // The vSphere problem detector restarts when openshift-config/cloud-provider-config
        // changes: the operator watches it by that name only, for its hash (as above, a
        // ClusterRole rule).
        PolicyRule {
            resource_names: Some(vec![vsphere_detector::CLOUD_CONFIG.to_owned()]),
            ..rule(&[""], &["configmaps"], READ)
        },
        // Its caches of the ClusterRoles and bindings it applies (by label).
        rule(
            &[RBAC_GROUP],
            &["clusterroles", "clusterrolebindings"],
            READ,
        ),
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
    ];
    // Who may read its /metrics over HTTPS: reviewed by the API server (as
    // `system:auth-delegator` grants), with its client CA read by name.
    cluster_rules.extend(opkit::secure_metrics::review_rules());
    // The ClusterRoles it applies, which may grant what it does not hold; the bindings it
    // applies, and the roles they refer to: each by name.
    cluster_rules.extend(
        [
            by_name(
                "clusterroles",
                &["create", "patch", "escalate"],
                Some(&written.cluster_roles),
            ),
            by_name(
                "clusterrolebindings",
                &["create", "patch"],
                Some(&written.cluster_role_bindings),
            ),
            by_name(
                "clusterroles",
                &["bind"],
                Some(&written.bound_cluster_roles),
            ),
        ]
        .into_iter()
        .flatten(),
    );
    // The CSIDriverDeployment controller runs in this process (when its CRD is served).
    cluster_rules.extend(csi_driver_deployment::controller::operator_rules());
    dedupe(&mut cluster_rules);
    // The driver operators' ServiceAccounts and Deployments are in the driver namespace; their
    // Roles and RoleBindings there and in their separate operand namespaces, by name.
    let roles = driver_namespaces()
        .into_iter()
        .map(|namespace| {
            let mut rules = Vec::new();
            if namespace == DRIVER_NAMESPACE {
                rules.push(rule(
                    &["", "apps"],
                    &["serviceaccounts", "deployments"],
                    MANAGE,
                ));
                // The driver operators' config ConfigMaps, by name (each watched by name).
                rules.push(PolicyRule {
                    resource_names: Some(operator_config_names()),
                    ..rule(
                        &[""],
                        &["configmaps"],
                        &["get", "list", "watch", "create", "patch"],
                    )
                });
                // The driver operators' metrics Services: watched by the starter's label,
                // written by name (the drivers' own Services are their operators').
                rules.push(rule(
                    &[""],
                    &["services"],
                    &["get", "list", "watch", "create"],
                ));
                rules.push(PolicyRule {
                    resource_names: Some(
                        registry()
                            .iter()
                            .map(starter::metrics_service_name)
                            .collect(),
                    ),
                    ..rule(&[""], &["services"], &["patch"])
                });
            }
            rules.push(rule(&[RBAC_GROUP], &["roles", "rolebindings"], READ));
            rules.extend(
                [
                    by_name(
                        "roles",
                        &["create", "patch", "escalate"],
                        written.roles.get(&namespace),
                    ),
                    by_name(
                        "rolebindings",
                        &["create", "patch"],
                        written.role_bindings.get(&namespace),
                    ),
                    by_name("roles", &["bind"], written.bound_roles.get(&namespace)),
                ]
                .into_iter()
                .flatten(),
            );
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

/// The namespace labels OpenShift's storage admission reads, and their valid values: a
/// namespace's default fsGroup change policy and SELinux relabelling policy for its pods.
pub const NAMESPACE_POLICY_LABELS: [(&str, &[&str]); 2] = [
    (
        "storage.openshift.io/fsgroup-change-policy",
        &["Always", "OnRootMismatch"],
    ),
    (
        "storage.openshift.io/selinux-change-policy",
        &["Recursive", "MountOption"],
    ),
];

/// The annotations of OpenShift's payload manifests that this project ships as they are (every
/// cluster profile includes them).
fn release_annotations() -> Value {
    serde_json::json!({
        "include.release.openshift.io/hypershift": "true",
        "include.release.openshift.io/ibm-cloud-managed": "true",
        "include.release.openshift.io/self-managed-high-availability": "true",
        "include.release.openshift.io/single-node-developer": "true",
    })
}

/// The ValidatingAdmissionPolicy OpenShift ships beside its storage operator, and its binding
/// (`openshift-storage-policy-validation`): a namespace created or updated with one of
/// [`NAMESPACE_POLICY_LABELS`] set to a value that label does not take is refused, naming the
/// label and the values it takes. OpenShift only: on plain Kubernetes nothing reads these
/// labels.
pub fn namespace_label_policy() -> Vec<Value> {
    let release = release_annotations();
    let namespaces = serde_json::json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["namespaces"]}]});
    let validations: Vec<Value> = NAMESPACE_POLICY_LABELS
        .iter()
        .map(|(label, values)| {
            let quoted: Vec<String> = values.iter().map(|v| format!("'{v}'")).collect();
            serde_json::json!({
                "expression": format!(
                    "!has(object.metadata.labels) || !('{label}' in object.metadata.labels) || object.metadata.labels['{label}'] in [{}]",
                    quoted.join(", ")
                ),
                "messageExpression": format!(
                    "\"Invalid value '\" + object.metadata.labels['{label}'] + \"' for label {label}. Valid values are: {}\"",
                    values.join(", ")
                ),
                "reason": "Invalid",
            })
        })
        .collect();
    let name = "openshift-storage-policy-validation";
    vec![
        serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "annotations": release,
                         "labels": {"app.kubernetes.io/name": NAME}},
            "spec": {"failurePolicy": "Fail", "matchConstraints": namespaces,
                     "validations": validations},
        }),
        serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": format!("{name}-binding"), "annotations": release,
                         "labels": {"app.kubernetes.io/name": NAME}},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                     "matchResources": namespaces},
        }),
    ]
}

/// The operator's rules in its own namespace, where it runs the volume data source validator
/// and the vSphere problem detector. The detector's objects are watched and written by name;
/// its two Secrets (credentials, serving certificate) are read by name, for their hashes only.
pub fn operator_namespace_rules() -> Vec<PolicyRule> {
    let named = |resource: &str, verbs: &[&str], names: &[&str]| PolicyRule {
        resource_names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
        ..rule(&[""], &[resource], verbs)
    };
    let written = written();
    let mut rules = vec![
        rule(&["", "apps"], &["serviceaccounts", "deployments"], MANAGE),
        named(
            "configmaps",
            &["get", "list", "watch", "create", "patch"],
            &[
                vsphere_detector::TRUSTED_CA_BUNDLE,
                vsphere_detector::OPERATOR_CONFIG,
            ],
        ),
        named(
            "services",
            &["get", "list", "watch", "create", "patch"],
            &[vsphere_detector::SERVICE],
        ),
        named(
            "secrets",
            READ,
            &[
                vsphere_detector::CREDENTIALS,
                vsphere_detector::SERVING_CERT,
            ],
        ),
    ];
    let roles = written.roles.get(OPERATOR_NAMESPACE);
    let bindings = written.role_bindings.get(OPERATOR_NAMESPACE);
    rules.extend(
        [
            by_name("roles", READ, roles),
            by_name("rolebindings", READ, bindings),
            by_name("roles", &["create", "patch", "escalate"], roles),
            by_name("rolebindings", &["create", "patch"], bindings),
            by_name(
                "roles",
                &["bind"],
                written.bound_roles.get(OPERATOR_NAMESPACE),
            ),
        ]
        .into_iter()
        .flatten(),
    );
    // Its own ServiceMonitor and PrometheusRule, and the vSphere problem detector's (whose
    // rule it deletes when the admin disables the detector's alerts).
    for kind in monitoring::Kind::ALL {
        rules.push(PolicyRule {
            resource_names: Some(vec![
                kind.object_name().to_owned(),
                vsphere_detector::MONITORING_NAME.to_owned(),
            ]),
            ..rule(
                &["monitoring.coreos.com"],
                &[kind.plural()],
                &["get", "list", "watch", "create", "patch"],
            )
        });
    }
    rules.push(PolicyRule {
        resource_names: Some(vec![vsphere_detector::MONITORING_NAME.to_owned()]),
        ..rule(
            &["monitoring.coreos.com"],
            &[monitoring::Kind::PrometheusRule.plural()],
            &["delete"],
        )
    });
    // The admin's switch of the detector's alerts.
    rules.push(named("configmaps", READ, &[vsphere_detector::USER_CONFIG]));
    dedupe(&mut rules);
    rules
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
        pod_labels: crate::network_policy::operator_pod_labels(),
        // On plain Kubernetes the control plane may be managed and invisible: prefer it
        // through the toleration, never require it.
        node_selector: openshift.then(|| [(control_plane.to_owned(), String::new())].into()),
        // restricted-v2, where OpenShift's (bound to cluster-admin) asks for nonroot-v2: ours
        // may use only what every ServiceAccount may, and needs no more.
        pod_annotations: if openshift {
            crate::starter::openshift_pod_annotations("restricted-v2")
        } else {
            BTreeMap::new()
        },
        // As OpenShift's: moved off an unreachable or not-ready node after 2 minutes rather
        // than the default 5, so that storage keeps being managed.
        tolerations: [
            (control_plane, "NoSchedule", None),
            ("node.kubernetes.io/unreachable", "NoExecute", Some(120)),
            ("node.kubernetes.io/not-ready", "NoExecute", Some(120)),
        ]
        .into_iter()
        .map(|(key, effect, seconds)| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            toleration_seconds: seconds,
            ..Default::default()
        })
        .collect(),
        // /metrics over HTTPS on 8443 with service-ca's certificate, as OpenShift's.
        serving_cert_secret: Some(monitoring::SERVING_CERT.into()),
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
    // Labelled as OpenShift's: its cluster monitoring reads ServiceMonitors and PrometheusRules
    // only in namespaces that carry `openshift.io/cluster-monitoring`.
    let mut operator_namespace = meta(OPERATOR_NAMESPACE, None);
    operator_namespace
        .labels
        .get_or_insert_default()
        .insert("openshift.io/cluster-monitoring".into(), "true".into());
    push(serde_json::to_value(Namespace {
        metadata: operator_namespace,
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
    // Its own namespace: the volume data source validator's ServiceAccount and Deployment.
    push(serde_json::to_value(Role {
        metadata: meta(NAME, Some(OPERATOR_NAMESPACE)),
        rules: Some(operator_namespace_rules()),
    }));
    push(serde_json::to_value(RoleBinding {
        metadata: meta(NAME, Some(OPERATOR_NAMESPACE)),
        role_ref: role_ref("Role", NAME),
        subjects: Some(vec![subject()]),
    }));
    push(serde_json::to_value(Role {
        metadata: meta(&format!("{NAME}-lease"), Some(OPERATOR_NAMESPACE)),
        rules: Some(vec![rule(&["coordination.k8s.io"], &["leases"], MANAGE)]),
    }));
    push(serde_json::to_value(RoleBinding {
        metadata: meta(&format!("{NAME}-lease"), Some(OPERATOR_NAMESPACE)),
        role_ref: role_ref("Role", &format!("{NAME}-lease")),
        subjects: Some(vec![subject()]),
    }));
    for policy in crate::network_policy::build(flavour) {
        push(serde_json::to_value(policy));
    }
    push(serde_json::to_value(build_deployment(flavour, image)));
    // Its metrics Service (its ServiceMonitor and PrometheusRule it applies itself, once
    // Prometheus' CRDs exist).
    push(serde_json::to_value(monitoring::build_service()));
    if flavour == Flavour::OpenShift {
        // OpenShift's cluster monitoring finds the targets with this Role.
        let (role, binding) = monitoring::build_prometheus_rbac();
        for object in [serde_json::to_value(role), serde_json::to_value(binding)] {
            push(object.map(|mut object| {
                object["metadata"]["annotations"] = release_annotations();
                object
            }));
        }
        objects.extend(namespace_label_policy());
        // OpenShift's payload asks the cloud credential operator for the vSphere problem
        // detector's credentials (used on vSphere only).
        objects.push(vsphere_detector::build_credentials_request());
    }
    objects
}

#[cfg(test)]
mod tests {
    use opkit::rbac::{allows, allows_name};

    use super::*;

    fn inputs(topology: Topology) -> StarterInputs {
        StarterInputs {
            topology,
            log_level: api::operator_v1::LogLevel::Normal,
            proxy: Default::default(),
            env: BTreeMap::new(),
            operator_image: String::new(),
            tls_profile: None,
        }
    }

    fn rules_of(role: &Role) -> &[PolicyRule] {
        role.rules.as_deref().unwrap_or_default()
    }

    const RBAC: &str = RBAC_GROUP;

    #[test]
    fn the_operator_reads_no_secret_and_grants_only_by_name() {
        let (cluster_role, roles) = build_rbac();
        let rules = cluster_role.rules.unwrap();
        // No Secret, anywhere, by any verb: it reads none itself. It held them only for what it
        // grants (the driver operators' Roles, the shared provisioner Secret reader).
        for verb in MANAGE {
            assert!(!allows(&rules, "", "secrets", verb), "{verb} secrets");
            for role in &roles {
                assert!(
                    !allows(rules_of(role), "", "secrets", verb),
                    "{verb} secrets in {:?}",
                    role.metadata.namespace
                );
            }
        }
        // ConfigMaps: only SELinuxMountGAReadiness's and the cloud config (whose hash restarts
        // the vSphere problem detector), by name (the driver operators read and write others).
        assert!(!allows_name(
            &rules,
            "",
            "configmaps",
            "get",
            "kube-root-ca.crt"
        ));
        assert!(allows_name(
            &rules,
            "",
            "configmaps",
            "watch",
            "cloud-provider-config"
        ));
        assert!(allows_name(
            &rules,
            "",
            "configmaps",
            "watch",
            "selinux-conflicts"
        ));
        // In the driver namespace: the driver operators' config ConfigMaps, by name (their
        // TLS profile), and no other ConfigMap there.
        let driver_role = roles
            .iter()
            .find(|r| r.metadata.namespace.as_deref() == Some(DRIVER_NAMESPACE))
            .unwrap();
        for verb in ["get", "watch", "create", "patch"] {
            assert!(allows_name(
                rules_of(driver_role),
                "",
                "configmaps",
                verb,
                "aws-ebs-csi-driver-operator-config"
            ));
            assert!(!allows_name(
                rules_of(driver_role),
                "",
                "configmaps",
                verb,
                "aws-ebs-cloud-config"
            ));
        }
        assert!(!allows_name(
            rules_of(driver_role),
            "",
            "configmaps",
            "get",
            "aws-efs-csi-driver-operator-config"
        ));
        // APIServer/cluster only.
        assert!(allows_name(
            &rules,
            "config.openshift.io",
            "apiservers",
            "watch",
            "cluster"
        ));
        assert!(!allows_name(
            &rules,
            "config.openshift.io",
            "apiservers",
            "list",
            ""
        ));
        // Nor what only the driver operators do.
        for (group, resource, verb) in [
            (
                "cloudcredential.openshift.io",
                "credentialsrequests",
                "patch",
            ),
            ("operator.openshift.io", "clustercsidrivers", "update"),
            ("operator.openshift.io", "cloudcredentials", "get"),
            ("monitoring.coreos.com", "servicemonitors", "patch"),
        ] {
            assert!(
                !allows(&rules, group, resource, verb),
                "{verb} {group}/{resource}"
            );
        }
        // What it does itself, it holds.
        for (group, resource, verb) in [
            ("operator.openshift.io", "storages/status", "patch"),
            ("operator.openshift.io", "clustercsidrivers", "create"),
            ("config.openshift.io", "clusteroperators/status", "patch"),
            ("config.openshift.io", "infrastructures", "watch"),
            ("operators.coreos.com", "subscriptions", "delete"),
            ("", "namespaces", "patch"),
            (RBAC, "clusterroles", "watch"),
            (RBAC, "clusterrolebindings", "watch"),
        ] {
            assert!(
                allows(&rules, group, resource, verb),
                "{verb} {group}/{resource}"
            );
        }
        // It watches one CRD, by name: the CSIDriverDeployments', to start their controller.
        let crds = "customresourcedefinitions";
        let declared = "csidriverdeployments.csidriver.storage.openshift.io";
        for verb in READ {
            assert!(allows_name(
                &rules,
                "apiextensions.k8s.io",
                crds,
                verb,
                declared
            ));
            assert!(!allows_name(
                &rules,
                "apiextensions.k8s.io",
                crds,
                verb,
                "x.example.com"
            ));
        }
        // No wildcard; `escalate` and `bind` only on roles, only by name.
        for (rule, whose) in
            rules
                .iter()
                .map(|r| (r, "ClusterRole".to_owned()))
                .chain(roles.iter().flat_map(|role| {
                    let whose = format!("Role in {:?}", role.metadata.namespace);
                    rules_of(role).iter().map(move |r| (r, whose.clone()))
                }))
        {
            let any = |items: &Option<Vec<String>>| items.iter().flatten().any(|x| x == "*");
            assert!(
                !rule.verbs.iter().any(|v| v == "*")
                    && !any(&rule.resources)
                    && !any(&rule.api_groups),
                "{whose}: {rule:?}"
            );
            // An empty list of names would mean every name.
            assert!(
                rule.resource_names.as_ref().is_none_or(|n| !n.is_empty()),
                "{whose}: {rule:?}"
            );
            if rule.verbs.iter().any(|v| v == "escalate" || v == "bind") {
                assert!(rule.resource_names.is_some(), "{whose}: {rule:?}");
                assert_eq!(rule.api_groups.as_deref(), Some(&[RBAC.to_owned()][..]));
                assert!(
                    rule.resources
                        .iter()
                        .flatten()
                        .all(|r| r == "clusterroles" || r == "roles"),
                    "{whose}: {rule:?}"
                );
            }
        }
        // Nothing else can be escalated or bound.
        for verb in ["escalate", "bind"] {
            for other in ["cluster-admin", "admin", "edit", "system:controller:foo"] {
                assert!(
                    !allows_name(&rules, RBAC, "clusterroles", verb, other),
                    "{verb} {other}"
                );
                for role in &roles {
                    assert!(!allows_name(rules_of(role), RBAC, "roles", verb, other));
                }
            }
        }
        // It watches the driver operators' Roles and RoleBindings in each namespace.
        for role in &roles {
            for resource in ["roles", "rolebindings"] {
                assert!(
                    allows(rules_of(role), RBAC, resource, "watch"),
                    "{resource}"
                );
            }
        }
        assert_eq!(roles.len(), driver_namespaces().len());
    }

    /// For every driver of the catalogue, alone, in every topology: every ClusterRole, Role and
    /// binding the starter applies, the operator may create, patch and escalate or bind by its
    /// name, in its namespace, as the API server asks; and some of them grant what it does not
    /// hold, which only `escalate` allows.
    #[test]
    fn every_role_the_starter_writes_or_binds_is_named_for_every_driver_and_topology() {
        let (cluster_role, roles) = build_rbac();
        let cluster_rules = cluster_role.rules.unwrap();
        let role_in = |namespace: &str| {
            roles
                .iter()
                .find(|r| r.metadata.namespace.as_deref() == Some(namespace))
                .map(rules_of)
                .unwrap_or_else(|| panic!("no Role in {namespace}"))
        };
        // What the server asks: `resource` `name` in `namespace` (None: cluster-scoped), where
        // a ClusterRole's rule answers in every namespace.
        let may = |namespace: Option<&str>, resource: &str, verb: &str, name: &str| {
            allows_name(&cluster_rules, RBAC, resource, verb, name)
                || namespace.is_some_and(|ns| allows_name(role_in(ns), RBAC, resource, verb, name))
        };
        let mut granted_not_held = 0;
        for entry in registry() {
            let def = drivers::by_name(entry.short_name).unwrap();
            for topology in Topology::ALL {
                let objects =
                    plan::starter_objects(&[(entry.clone(), def.clone())], &inputs(topology));
                let what = format!("{} {topology}", entry.short_name);
                for object in &objects {
                    let (resource, meta, role_ref, granted) = match object {
                        Desired::ClusterRole(r) => {
                            ("clusterroles", &r.metadata, None, r.rules.as_deref())
                        }
                        Desired::Role(r) => ("roles", &r.metadata, None, r.rules.as_deref()),
                        Desired::ClusterRoleBinding(b) => {
                            ("clusterrolebindings", &b.metadata, Some(&b.role_ref), None)
                        }
                        Desired::RoleBinding(b) => {
                            ("rolebindings", &b.metadata, Some(&b.role_ref), None)
                        }
                        _ => continue,
                    };
                    let namespace = meta.namespace.as_deref();
                    let name = meta.name.as_deref().unwrap();
                    for verb in ["create", "patch"] {
                        assert!(
                            may(namespace, resource, verb, name),
                            "{what}: {verb} {resource} {name}"
                        );
                    }
                    if granted.is_some() {
                        assert!(
                            may(namespace, resource, "escalate", name),
                            "{what}: escalate {name}"
                        );
                    }
                    if let Some(role_ref) = role_ref {
                        let resource = if role_ref.kind == "ClusterRole" {
                            "clusterroles"
                        } else {
                            "roles"
                        };
                        assert!(
                            may(namespace, resource, "bind", &role_ref.name),
                            "{what}: bind {} from {name}",
                            role_ref.name
                        );
                    }
                    let holds = |r: &PolicyRule| {
                        let held = namespace.map_or(&cluster_rules[..], role_in);
                        r.api_groups.iter().flatten().all(|g| {
                            r.resources.iter().flatten().all(|res| {
                                r.verbs.iter().all(|v| {
                                    allows(held, g, res, v) || allows(&cluster_rules, g, res, v)
                                })
                            })
                        })
                    };
                    granted_not_held += granted.into_iter().flatten().filter(|r| !holds(r)).count();
                }
            }
        }
        assert!(
            granted_not_held > 0,
            "escalate is needed for what it does not hold"
        );
        // The shared roles too, which the driver operators bind.
        let written = written();
        for role in csi_kit::build_shared_cluster_roles() {
            let name = role.metadata.name.unwrap();
            assert!(written.cluster_roles.contains(&name), "{name}");
            assert!(may(None, "clusterroles", "escalate", &name), "{name}");
        }
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

    /// Its ServiceMonitor and PrometheusRule: read and written in its namespace by their names
    /// only, their CRDs watched by name, nothing of Prometheus' cluster-wide; the metrics Service
    /// on both flavours, Prometheus' Role on OpenShift only.
    #[test]
    fn the_operator_writes_only_its_own_monitoring_objects() {
        let rules = operator_namespace_rules();
        let (cluster_role, _) = build_rbac();
        let cluster = cluster_role.rules.unwrap();
        let group = "monitoring.coreos.com";
        for kind in monitoring::Kind::ALL {
            let resource = kind.plural();
            for verb in ["get", "list", "watch", "create", "patch"] {
                assert!(allows_name(
                    &rules,
                    group,
                    resource,
                    verb,
                    kind.object_name()
                ));
                assert!(!allows_name(&rules, group, resource, verb, "someone-elses"));
                assert!(
                    !allows(&cluster, group, resource, verb),
                    "{verb} {resource}"
                );
            }
            // It deletes only the vSphere problem detector's rule (when its alerts are
            // disabled), by that name.
            for name in [kind.object_name(), "someone-elses"] {
                assert!(!allows_name(&rules, group, resource, "delete", name));
            }
            assert_eq!(
                allows_name(
                    &rules,
                    group,
                    resource,
                    "delete",
                    vsphere_detector::MONITORING_NAME
                ),
                kind == monitoring::Kind::PrometheusRule
            );
            let crds = "customresourcedefinitions";
            for verb in READ {
                assert!(allows_name(
                    &cluster,
                    "apiextensions.k8s.io",
                    crds,
                    verb,
                    kind.crd_name()
                ));
            }
            assert!(!allows_name(
                &cluster,
                "apiextensions.k8s.io",
                crds,
                "patch",
                kind.crd_name()
            ));
        }
        for flavour in [Flavour::OpenShift, Flavour::Kubernetes] {
            let objects = build(flavour, "example.com/so:1");
            let has = |kind: &str, name: &str| {
                objects.iter().any(|o| {
                    o["kind"] == kind
                        && o["metadata"]["name"] == name
                        && o["metadata"]["namespace"] == OPERATOR_NAMESPACE
                })
            };
            assert!(has("Service", monitoring::SERVICE), "{flavour:?}");
            assert_eq!(
                has("Role", monitoring::PROMETHEUS_RBAC),
                flavour == Flavour::OpenShift
            );
            assert_eq!(
                has("RoleBinding", monitoring::PROMETHEUS_RBAC),
                flavour == Flavour::OpenShift
            );
            let namespace = objects
                .iter()
                .find(|o| o["kind"] == "Namespace" && o["metadata"]["name"] == OPERATOR_NAMESPACE)
                .unwrap();
            assert_eq!(
                namespace["metadata"]["labels"]["openshift.io/cluster-monitoring"],
                "true"
            );
        }
    }

    /// In its own namespace, the operator reads the vSphere problem detector's two Secrets by
    /// name (for their hashes) and no other Secret; it writes the detector's ConfigMaps and
    /// Service by name; it may escalate and bind the detector's Role, and its ClusterRole,
    /// which grant reading Secrets it does not hold.
    #[test]
    fn the_vsphere_problem_detector_is_run_by_name() {
        use crate::vsphere_detector as d;
        let rules = operator_namespace_rules();
        for verb in READ {
            for name in [d::CREDENTIALS, d::SERVING_CERT] {
                assert!(
                    allows_name(&rules, "", "secrets", verb, name),
                    "{verb} {name}"
                );
            }
            // Any other name (a rule without names would allow it).
            assert!(!allows_name(&rules, "", "secrets", verb, "other"), "{verb}");
        }
        for verb in ["create", "patch"] {
            for (resource, name) in [
                ("configmaps", d::TRUSTED_CA_BUNDLE),
                ("configmaps", d::OPERATOR_CONFIG),
                ("services", d::SERVICE),
            ] {
                assert!(
                    allows_name(&rules, "", resource, verb, name),
                    "{verb} {name}"
                );
            }
            assert!(!allows_name(&rules, "", "configmaps", verb, "other"));
        }
        assert!(allows_name(&rules, RBAC, "roles", "escalate", d::ROLE));
        assert!(allows_name(&rules, RBAC, "roles", "bind", d::ROLE));
        assert!(allows_name(
            &rules,
            RBAC,
            "rolebindings",
            "patch",
            d::ROLE_BINDING
        ));
        assert!(!allows_name(&rules, RBAC, "roles", "escalate", "other"));
        let (cluster_role, _) = build_rbac();
        let cluster_rules = cluster_role.rules.unwrap();
        assert!(allows_name(
            &cluster_rules,
            RBAC,
            "clusterroles",
            "escalate",
            d::CLUSTER_ROLE
        ));
        assert!(allows_name(
            &cluster_rules,
            RBAC,
            "clusterroles",
            "bind",
            d::CLUSTER_ROLE
        ));
        assert!(allows_name(
            &cluster_rules,
            RBAC,
            "clusterrolebindings",
            "patch",
            d::CLUSTER_ROLE_BINDING
        ));
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
