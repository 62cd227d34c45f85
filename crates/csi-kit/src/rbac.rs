//! ServiceAccounts and RBAC: one least-privilege grant per need (each sidecar, the SCCs of
//! the two pods, kube-rbac-proxy's token reviews, the sidecars' leader-election leases,
//! Prometheus discovery), named as OpenShift names them.
//!
//! The per-sidecar ClusterRoles (`openshift-csi-main-provisioner-role`, ...) are shared by
//! every driver; on OpenShift cluster-storage-operator ships them. The driver only binds
//! them. [`build_shared_sidecar_cluster_roles`] builds them for the operator that installs
//! them (the storage operator, or `render` on plain Kubernetes). Other shared roles (e.g.
//! `openshift-csi-provisioner-configmap-and-secret-reader-role`) are bound only where a table
//! asks for them (`sharedRoles`); [`build_shared_cluster_roles`] has them all.
//!
//! Besides the kit's roles, a table may give a pod roles of its own (`roles`: a ClusterRole or
//! a namespaced Role, each with its binding) and rename a kit binding
//! (`clusterRoleBindingNames`), where OpenShift's operator names or splits its grants so.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::def::{DriverDef, RoleDef, RuleDef, SharedRoleBindingDef, SidecarKind};
use crate::inputs::Inputs;
use crate::names;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The controller and node ServiceAccounts.
pub fn build_service_accounts(def: &DriverDef) -> Vec<ServiceAccount> {
    [names::controller_sa(def), names::node_sa(def)]
        .into_iter()
        .map(|name| ServiceAccount {
            metadata: names::ns_meta(def, name),
            ..ServiceAccount::default()
        })
        .collect()
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(groups.iter().map(|s| (*s).to_owned()).collect()),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

fn scc_rule(scc: &str) -> PolicyRule {
    PolicyRule {
        resource_names: Some(vec![scc.to_owned()]),
        ..rule(
            &["security.openshift.io"],
            &["securitycontextconstraints"],
            &["use"],
        )
    }
}

fn rule_from_def(r: &RuleDef) -> PolicyRule {
    PolicyRule {
        api_groups: Some(r.api_groups.clone()),
        resources: Some(r.resources.clone()),
        verbs: r.verbs.clone(),
        resource_names: (!r.resource_names.is_empty()).then(|| r.resource_names.clone()),
        ..PolicyRule::default()
    }
}

fn sa_subject(def: &DriverDef, sa: String) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        name: sa,
        namespace: Some(def.namespace.clone()),
        ..Subject::default()
    }
}

fn cluster_role_binding(meta: ObjectMeta, role: &str, subject: Subject) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some(RBAC_GROUP.to_owned()),
            kind: "ClusterRole".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![subject]),
    }
}

fn role_binding(meta: ObjectMeta, role: &str, subject: Subject) -> RoleBinding {
    RoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some(RBAC_GROUP.to_owned()),
            kind: "Role".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![subject]),
    }
}

fn names_prefixed(def: &DriverDef, suffix: &str) -> String {
    format!("{}-{suffix}", def.cluster_role_prefix)
}

/// The driver's own ClusterRoles: SCC use for the node pod (`<p>-privileged-role`), for a
/// host-network controller pod (`<p>-hostnetwork-role`), the extra rules of any other
/// controller (`<p>-csi-driver-role`), and token/access reviews for the metrics proxies
/// (`<p>-kube-rbac-proxy-role`, and `<p>-node-kube-rbac-proxy-role` for the node's).
pub fn build_cluster_roles(def: &DriverDef) -> Vec<ClusterRole> {
    let mut roles = Vec::new();
    if def.controller.host_network && !def.controller.uses_privileged_role() {
        let mut rules = vec![scc_rule(&def.controller.required_scc)];
        rules.extend(def.controller.extra_rules.iter().map(rule_from_def));
        roles.push(ClusterRole {
            metadata: names::meta(def, names_prefixed(def, "hostnetwork-role"), None),
            rules: Some(rules),
            ..ClusterRole::default()
        });
    }
    if controller_driver_role(def) {
        // A controller on the pod network with the default SCC has no SCC role to carry its
        // own rules: they get a role of their own, named as OpenShift names it.
        roles.push(ClusterRole {
            metadata: names::meta(def, names_prefixed(def, "csi-driver-role"), None),
            rules: Some(
                def.controller
                    .extra_rules
                    .iter()
                    .map(rule_from_def)
                    .collect(),
            ),
            ..ClusterRole::default()
        });
    }
    if def.has_metrics() {
        roles.push(ClusterRole {
            metadata: names::meta(def, names_prefixed(def, "kube-rbac-proxy-role"), None),
            rules: Some(proxy_rules()),
            ..ClusterRole::default()
        });
    }
    if def.node.driver.metrics.is_some() {
        roles.push(ClusterRole {
            metadata: names::meta(def, names_prefixed(def, "node-kube-rbac-proxy-role"), None),
            rules: Some(proxy_rules()),
            ..ClusterRole::default()
        });
    }
    let mut node_rules = vec![scc_rule("privileged")];
    node_rules.extend(def.node.extra_rules.iter().map(rule_from_def));
    if def.controller.uses_privileged_role() {
        node_rules.extend(def.controller.extra_rules.iter().map(rule_from_def));
    }
    roles.push(ClusterRole {
        metadata: names::meta(def, names_prefixed(def, "privileged-role"), None),
        rules: Some(node_rules),
        ..ClusterRole::default()
    });
    for (role, _) in table_roles(def).filter(|(r, _)| !r.namespaced) {
        roles.push(ClusterRole {
            metadata: names::meta(def, role.name.clone(), None),
            rules: Some(role.rules.iter().map(rule_from_def).collect()),
            ..ClusterRole::default()
        });
    }
    roles
}

/// The controller's `items`, then the node's, each with the ServiceAccount of its pod.
fn with_service_accounts<'a, T>(
    def: &DriverDef,
    controller: &'a [T],
    node: &'a [T],
) -> impl Iterator<Item = (&'a T, String)> {
    let (controller_sa, node_sa) = (names::controller_sa(def), names::node_sa(def));
    controller
        .iter()
        .map(move |r| (r, controller_sa.clone()))
        .chain(node.iter().map(move |r| (r, node_sa.clone())))
}

/// The table's own roles (`controller.roles`, `node.roles`), each with the ServiceAccount it is
/// bound to.
fn table_roles(def: &DriverDef) -> impl Iterator<Item = (&RoleDef, String)> {
    with_service_accounts(def, &def.controller.roles, &def.node.roles)
}

/// The table's bindings to shared roles (`controller.sharedRoles`, `node.sharedRoles`), each
/// with the ServiceAccount it binds.
fn table_shared_roles(def: &DriverDef) -> impl Iterator<Item = (&SharedRoleBindingDef, String)> {
    with_service_accounts(def, &def.controller.shared_roles, &def.node.shared_roles)
}

/// What a kube-rbac-proxy needs: it authenticates the scraper with a TokenReview and
/// authorizes it with a SubjectAccessReview.
fn proxy_rules() -> Vec<PolicyRule> {
    vec![
        rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
        rule(
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
            &["create"],
        ),
    ]
}

/// Whether the controller's extra rules need `<p>-csi-driver-role`: it has some and neither
/// the privileged role nor a host-network role carries them.
fn controller_driver_role(def: &DriverDef) -> bool {
    let ctl = &def.controller;
    !ctl.extra_rules.is_empty() && !ctl.uses_privileged_role() && !ctl.host_network
}

/// The shared per-sidecar ClusterRoles a sidecar's ServiceAccount is bound to, with the
/// middle part of the binding name (`<p>-csi-<middle>-binding`).
pub fn sidecar_role_refs(kind: SidecarKind) -> &'static [(&'static str, &'static str)] {
    match kind {
        SidecarKind::Provisioner => &[
            ("main-provisioner", "openshift-csi-main-provisioner-role"),
            (
                "volumesnapshot-reader-provisioner",
                "openshift-csi-provisioner-volumesnapshot-reader-role",
            ),
            (
                "volumeattributesclass-reader-provisioner",
                "openshift-csi-provisioner-volumeattributesclass-reader-role",
            ),
        ],
        SidecarKind::Attacher => &[("main-attacher", "openshift-csi-main-attacher-role")],
        SidecarKind::Resizer => &[
            ("main-resizer", "openshift-csi-main-resizer-role"),
            (
                "storageclass-reader-resizer",
                "openshift-csi-resizer-storageclass-reader-role",
            ),
            (
                "volumeattributesclass-reader-resizer",
                "openshift-csi-resizer-volumeattributesclass-reader-role",
            ),
        ],
        SidecarKind::Snapshotter => &[("main-snapshotter", "openshift-csi-main-snapshotter-role")],
    }
}

/// The driver's ClusterRoleBindings: its own roles, then each sidecar's shared roles (named
/// as the table's `clusterRoleBindingNames` says, where it names them), then the table's own
/// cluster roles and shared roles.
pub fn build_cluster_role_bindings(def: &DriverDef) -> Vec<ClusterRoleBinding> {
    let mut bindings = kit_cluster_role_bindings(def);
    for binding in &mut bindings {
        if let Some(name) = binding
            .metadata
            .name
            .as_ref()
            .and_then(|n| def.cluster_role_binding_names.get(n))
        {
            binding.metadata.name = Some(name.clone());
        }
    }
    for (role, sa) in table_roles(def).filter(|(r, _)| !r.namespaced) {
        bindings.push(cluster_role_binding(
            names::meta(def, role.binding.clone(), None),
            &role.name,
            sa_subject(def, sa),
        ));
    }
    for (shared, sa) in table_shared_roles(def) {
        bindings.push(cluster_role_binding(
            names::meta(def, shared.binding.clone(), None),
            &shared.role,
            sa_subject(def, sa),
        ));
    }
    bindings
}

/// The names the kit gives its ClusterRoleBindings, before `clusterRoleBindingNames` renames
/// any (what that table field names).
pub(crate) fn kit_cluster_role_binding_names(def: &DriverDef) -> Vec<String> {
    kit_cluster_role_bindings(def)
        .into_iter()
        .filter_map(|b| b.metadata.name)
        .collect()
}

/// The kit's ClusterRoleBindings, under the kit's names.
fn kit_cluster_role_bindings(def: &DriverDef) -> Vec<ClusterRoleBinding> {
    let controller = || sa_subject(def, names::controller_sa(def));
    let mut bindings = Vec::new();
    if def.controller.uses_privileged_role() {
        bindings.push(cluster_role_binding(
            names::meta(
                def,
                def.controller
                    .privileged_binding_name
                    .clone()
                    .unwrap_or_else(|| names_prefixed(def, "controller-privileged-binding")),
                None,
            ),
            &names_prefixed(def, "privileged-role"),
            controller(),
        ));
    } else if def.controller.host_network {
        bindings.push(cluster_role_binding(
            names::meta(
                def,
                names_prefixed(def, "controller-hostnetwork-binding"),
                None,
            ),
            &names_prefixed(def, "hostnetwork-role"),
            controller(),
        ));
    }
    if controller_driver_role(def) {
        bindings.push(cluster_role_binding(
            names::meta(def, names_prefixed(def, "csi-driver-binding"), None),
            &names_prefixed(def, "csi-driver-role"),
            controller(),
        ));
    }
    if def.has_metrics() {
        bindings.push(cluster_role_binding(
            names::meta(def, names_prefixed(def, "kube-rbac-proxy-binding"), None),
            &names_prefixed(def, "kube-rbac-proxy-role"),
            controller(),
        ));
    }
    if def.node.driver.metrics.is_some() {
        bindings.push(cluster_role_binding(
            names::meta(
                def,
                names_prefixed(def, "node-kube-rbac-proxy-binding"),
                None,
            ),
            &names_prefixed(def, "node-kube-rbac-proxy-role"),
            sa_subject(def, names::node_sa(def)),
        ));
    }
    bindings.push(cluster_role_binding(
        names::meta(def, names_prefixed(def, "node-privileged-binding"), None),
        &names_prefixed(def, "privileged-role"),
        sa_subject(def, names::node_sa(def)),
    ));
    for sidecar in &def.controller.sidecars {
        for (middle, role) in sidecar_role_refs(sidecar.kind) {
            bindings.push(cluster_role_binding(
                names::meta(
                    def,
                    format!("{}-csi-{middle}-binding", def.cluster_role_prefix),
                    None,
                ),
                role,
                controller(),
            ));
        }
    }
    bindings
}

pub(crate) fn lease_role_name(def: &DriverDef) -> String {
    format!("{}-lease-leader-election", def.object_prefix)
}

pub(crate) fn prometheus_role_name(def: &DriverDef) -> String {
    format!("{}-prometheus", def.object_prefix)
}

/// Whether the Prometheus discovery Role is built: cluster monitoring scrapes through a
/// ServiceMonitor, so only with that CRD, on OpenShift, and when there is something to scrape.
fn wants_prometheus_rbac(def: &DriverDef, inputs: &Inputs) -> bool {
    def.has_metrics() && inputs.crds.service_monitor && inputs.topology.is_openshift()
}

/// Namespaced Roles: the sidecars' leader-election leases (only the verbs client-go's lease
/// lock uses), Prometheus service discovery, and the table's namespaced roles.
pub fn build_roles(def: &DriverDef, inputs: &Inputs) -> Vec<Role> {
    let mut roles = vec![Role {
        metadata: names::ns_meta(def, lease_role_name(def)),
        rules: Some(vec![rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "create", "update"],
        )]),
    }];
    if wants_prometheus_rbac(def, inputs) {
        roles.push(Role {
            metadata: names::ns_meta(def, prometheus_role_name(def)),
            rules: Some(vec![rule(
                &[""],
                &["services", "endpoints", "pods"],
                &["get", "list", "watch"],
            )]),
        });
    }
    for (role, _) in table_roles(def).filter(|(r, _)| r.namespaced) {
        roles.push(Role {
            metadata: names::ns_meta(def, role.name.clone()),
            rules: Some(role.rules.iter().map(rule_from_def).collect()),
        });
    }
    roles
}

/// The RoleBindings of [`build_roles`].
pub fn build_role_bindings(def: &DriverDef, inputs: &Inputs) -> Vec<RoleBinding> {
    let mut bindings = vec![role_binding(
        names::ns_meta(def, lease_role_name(def)),
        &lease_role_name(def),
        sa_subject(def, names::controller_sa(def)),
    )];
    if wants_prometheus_rbac(def, inputs) {
        let (ns, sa) = names::PROMETHEUS_SERVICE_ACCOUNT;
        bindings.push(role_binding(
            names::ns_meta(def, prometheus_role_name(def)),
            &prometheus_role_name(def),
            Subject {
                kind: "ServiceAccount".to_owned(),
                name: sa.to_owned(),
                namespace: Some(ns.to_owned()),
                ..Subject::default()
            },
        ));
    }
    for (role, sa) in table_roles(def).filter(|(r, _)| r.namespaced) {
        bindings.push(role_binding(
            names::ns_meta(def, role.binding.clone()),
            &role.name,
            sa_subject(def, sa),
        ));
    }
    bindings
}

fn shared_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                names::SHARED_ROLE_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

/// The shared ClusterRole that lets a provisioner read the Secrets (and ConfigMaps) its
/// StorageClasses name, anywhere in the cluster (cluster-storage-operator ships it on
/// OpenShift); bound only where a table's `sharedRoles` asks for it.
pub const CONFIGMAP_AND_SECRET_READER_ROLE: &str =
    "openshift-csi-provisioner-configmap-and-secret-reader-role";

/// The shared ClusterRoles a table may bind (`sharedRoles`) that the kit binds for no sidecar
/// by itself, with OpenShift's rules.
pub fn build_shared_opt_in_cluster_roles() -> Vec<ClusterRole> {
    vec![shared_role(
        CONFIGMAP_AND_SECRET_READER_ROLE,
        vec![
            rule(&[""], &["configmaps"], &["get", "list"]),
            rule(&[""], &["secrets"], &["get", "list", "watch"]),
        ],
    )]
}

/// Every shared ClusterRole, what the storage operator installs: the sidecars' and those a
/// table may bind.
pub fn build_shared_cluster_roles() -> Vec<ClusterRole> {
    let mut roles = build_shared_sidecar_cluster_roles();
    roles.extend(build_shared_opt_in_cluster_roles());
    roles
}

/// The shared ClusterRoles the driver binds: every sidecar role, and those of the table's
/// `sharedRoles` (what a driver brings where no storage operator installs them).
pub fn build_shared_cluster_roles_bound_by(def: &DriverDef) -> Vec<ClusterRole> {
    let mut roles = build_shared_sidecar_cluster_roles();
    roles.extend(build_shared_opt_in_cluster_roles().into_iter().filter(|r| {
        table_shared_roles(def).any(|(s, _)| r.metadata.name.as_deref() == Some(&s.role))
    }));
    roles
}

/// The shared sidecar ClusterRoles every driver binds (see the module docs), each with only
/// what that sidecar calls.
pub fn build_shared_sidecar_cluster_roles() -> Vec<ClusterRole> {
    const EVENTS: &[&str] = &["get", "list", "watch", "create", "update", "patch"];
    const READ: &[&str] = &["get", "list", "watch"];
    vec![
        shared_role(
            "openshift-csi-main-provisioner-role",
            vec![
                rule(
                    &[""],
                    &["persistentvolumes"],
                    &["get", "list", "watch", "create", "patch", "delete"],
                ),
                rule(
                    &[""],
                    &["persistentvolumeclaims"],
                    &["get", "list", "watch", "update", "patch"],
                ),
                rule(&["storage.k8s.io"], &["storageclasses"], READ),
                rule(&[""], &["events"], EVENTS),
                rule(&["storage.k8s.io"], &["csinodes"], READ),
                rule(&[""], &["nodes"], READ),
                rule(&["storage.k8s.io"], &["volumeattachments"], READ),
            ],
        ),
        shared_role(
            "openshift-csi-provisioner-volumesnapshot-reader-role",
            vec![
                // Watch and update: the provisioner puts a finalizer on the VolumeSnapshot a
                // claim is restored from, so that it is not deleted while the volume is made,
                // and sweeps leftover finalizers (external-provisioner's RBAC, and OpenShift's).
                rule(
                    &["snapshot.storage.k8s.io"],
                    &["volumesnapshots"],
                    &["get", "list", "watch", "update"],
                ),
                rule(
                    &["snapshot.storage.k8s.io"],
                    &["volumesnapshotcontents"],
                    &["get", "list"],
                ),
            ],
        ),
        shared_role(
            "openshift-csi-provisioner-volumeattributesclass-reader-role",
            vec![rule(
                &["storage.k8s.io"],
                &["volumeattributesclasses"],
                READ,
            )],
        ),
        shared_role(
            "openshift-csi-main-attacher-role",
            vec![
                rule(
                    &[""],
                    &["persistentvolumes"],
                    &["get", "list", "watch", "patch"],
                ),
                rule(&["storage.k8s.io"], &["csinodes"], READ),
                rule(
                    &["storage.k8s.io"],
                    &["volumeattachments"],
                    &["get", "list", "watch", "patch"],
                ),
                rule(
                    &["storage.k8s.io"],
                    &["volumeattachments/status"],
                    &["patch"],
                ),
                rule(&[""], &["events"], EVENTS),
            ],
        ),
        shared_role(
            "openshift-csi-main-resizer-role",
            vec![
                rule(
                    &[""],
                    &["persistentvolumes"],
                    &["get", "list", "watch", "patch"],
                ),
                rule(&[""], &["persistentvolumeclaims"], READ),
                rule(&[""], &["persistentvolumeclaims/status"], &["patch"]),
                rule(&[""], &["pods"], &["list", "watch"]),
                rule(&[""], &["events"], EVENTS),
            ],
        ),
        shared_role(
            "openshift-csi-resizer-storageclass-reader-role",
            vec![rule(&["storage.k8s.io"], &["storageclasses"], READ)],
        ),
        shared_role(
            "openshift-csi-resizer-volumeattributesclass-reader-role",
            vec![rule(
                &["storage.k8s.io"],
                &["volumeattributesclasses"],
                READ,
            )],
        ),
        shared_role(
            "openshift-csi-main-snapshotter-role",
            vec![
                rule(&[""], &["events"], EVENTS),
                rule(
                    &["snapshot.storage.k8s.io"],
                    &["volumesnapshotclasses"],
                    READ,
                ),
                rule(
                    &["snapshot.storage.k8s.io"],
                    &["volumesnapshotcontents"],
                    &["get", "list", "watch", "update", "patch"],
                ),
                rule(
                    &["snapshot.storage.k8s.io"],
                    &["volumesnapshotcontents/status"],
                    &["update", "patch"],
                ),
            ],
        ),
    ]
}
