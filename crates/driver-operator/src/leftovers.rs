//! What the operator this one replaces left behind: objects OpenShift's Go operator made for
//! the driver under names ours does not use (e.g. a workload or a role of another name). Left
//! alone they are orphans at best, and at worst a second controller or node plugin of the same
//! driver. Once per process, after a pass has applied every operand (so ours are in place),
//! the operator lists the kinds it manages and deletes each such object.
//!
//! An object is the former operator's leftover when:
//! - one of the table's `adoptFrom` managers wrote it with Update (that manager is the former
//!   operator's binary, one per driver, so other drivers' objects in the shared namespace are
//!   never matched), and nobody declared it with server-side apply;
//! - it is not one of ours: not an operand this pass rendered, and without our operand label
//!   (those are [`super::plan`]'s to remove when a later version stops rendering them, see
//!   its `no_longer_rendered`);
//! - it is of a kind that runs or grants something: Deployments, DaemonSets, Services,
//!   ServiceAccounts, Roles, RoleBindings and PodDisruptionBudgets in the driver namespace,
//!   ClusterRoles and ClusterRoleBindings whose name starts with the driver's cluster role
//!   prefix (or one of the table's `formerClusterRolePrefixes`, where the replaced operator
//!   named its RBAC otherwise); owned by no other object (the garbage collector removes those).
//!
//! ConfigMaps and Secrets are never deleted (data, some written at run time by the driver's own
//! code), nor StorageClasses, snapshot classes or the CSIDriver (volumes depend on them). An
//! object whose fields the former operator never wrote cannot be told from anyone else's and
//! stays: a bare ServiceAccount (name and namespace only) is one, the API server records no
//! fields for it.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use csi_kit::def::DriverDef;
use csi_kit::names::OPERAND_LABEL;

/// A kind the sweep looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LeftoverKind {
    /// In the driver namespace.
    Deployment,
    /// In the driver namespace.
    DaemonSet,
    /// In the driver namespace.
    Service,
    /// In the driver namespace.
    ServiceAccount,
    /// In the driver namespace.
    Role,
    /// In the driver namespace.
    RoleBinding,
    /// In the driver namespace.
    PodDisruptionBudget,
    /// Cluster-wide, by name prefix.
    ClusterRole,
    /// Cluster-wide, by name prefix.
    ClusterRoleBinding,
}

impl LeftoverKind {
    /// Every kind the sweep looks at.
    pub const ALL: [LeftoverKind; 9] = [
        LeftoverKind::Deployment,
        LeftoverKind::DaemonSet,
        LeftoverKind::Service,
        LeftoverKind::ServiceAccount,
        LeftoverKind::Role,
        LeftoverKind::RoleBinding,
        LeftoverKind::PodDisruptionBudget,
        LeftoverKind::ClusterRole,
        LeftoverKind::ClusterRoleBinding,
    ];

    /// The kind's name, as in `kind:` (and in [`csi_kit::render::Operand::kind`]).
    pub fn name(self) -> &'static str {
        match self {
            LeftoverKind::Deployment => "Deployment",
            LeftoverKind::DaemonSet => "DaemonSet",
            LeftoverKind::Service => "Service",
            LeftoverKind::ServiceAccount => "ServiceAccount",
            LeftoverKind::Role => "Role",
            LeftoverKind::RoleBinding => "RoleBinding",
            LeftoverKind::PodDisruptionBudget => "PodDisruptionBudget",
            LeftoverKind::ClusterRole => "ClusterRole",
            LeftoverKind::ClusterRoleBinding => "ClusterRoleBinding",
        }
    }

    /// Group, version, kind and plural, for a dynamic client.
    pub fn api_resource(self) -> kube::api::ApiResource {
        let (group, version, plural) = match self {
            LeftoverKind::Deployment => ("apps", "v1", "deployments"),
            LeftoverKind::DaemonSet => ("apps", "v1", "daemonsets"),
            LeftoverKind::Service => ("", "v1", "services"),
            LeftoverKind::ServiceAccount => ("", "v1", "serviceaccounts"),
            LeftoverKind::Role => ("rbac.authorization.k8s.io", "v1", "roles"),
            LeftoverKind::RoleBinding => ("rbac.authorization.k8s.io", "v1", "rolebindings"),
            LeftoverKind::PodDisruptionBudget => ("policy", "v1", "poddisruptionbudgets"),
            LeftoverKind::ClusterRole => ("rbac.authorization.k8s.io", "v1", "clusterroles"),
            LeftoverKind::ClusterRoleBinding => {
                ("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
            }
        };
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(group, version, self.name()),
            plural,
        )
    }

    /// Whether objects of the kind are cluster-scoped.
    pub fn cluster_scoped(self) -> bool {
        matches!(
            self,
            LeftoverKind::ClusterRole | LeftoverKind::ClusterRoleBinding
        )
    }
}

impl std::fmt::Display for LeftoverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the object of `kind` with `meta` is a leftover of the former operator (see the
/// module docs); `ours` holds the `Kind/name` of every operand this pass rendered.
pub fn is_leftover(
    def: &DriverDef,
    kind: LeftoverKind,
    meta: &ObjectMeta,
    ours: &BTreeSet<String>,
) -> bool {
    let name = meta.name.as_deref().unwrap_or_default();
    if name.is_empty() || ours.contains(&format!("{kind}/{name}")) {
        return false;
    }
    if meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(OPERAND_LABEL))
        || meta
            .owner_references
            .as_ref()
            .is_some_and(|o| !o.is_empty())
        || meta.deletion_timestamp.is_some()
    {
        return false;
    }
    if kind.cluster_scoped()
        && !std::iter::once(&def.cluster_role_prefix)
            .chain(&def.former_cluster_role_prefixes)
            .any(|prefix| name.starts_with(&format!("{prefix}-")))
    {
        return false;
    }
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    let by_former = entries.iter().any(|e| {
        e.operation.as_deref() == Some("Update")
            && e.manager
                .as_ref()
                .is_some_and(|m| def.adopt_from.contains(m))
    });
    let declared_by_others = entries.iter().any(|e| {
        e.operation.as_deref() == Some("Apply")
            && !e
                .manager
                .as_ref()
                .is_some_and(|m| def.adopt_from.contains(m))
    });
    by_former && !declared_by_others
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn def() -> DriverDef {
        let mut def = csi_kit::def::test_def();
        def.cluster_role_prefix = "manila".into();
        def.adopt_from = vec!["manila-csi-driver-operator".into()];
        def.former_cluster_role_prefixes = vec!["csi-manila".into()];
        def
    }

    fn meta(value: serde_json::Value) -> ObjectMeta {
        serde_json::from_value(value).unwrap()
    }

    fn entry(manager: &str, operation: &str) -> serde_json::Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "apps/v1",
               "fieldsType": "FieldsV1", "fieldsV1": {}})
    }

    #[test]
    fn only_the_former_operators_unlabelled_objects_of_other_names() {
        let def = def();
        let ours = BTreeSet::from(["Deployment/manila-csi-driver-controller".to_owned()]);
        let former = entry("manila-csi-driver-operator", "Update");
        let status = entry("kube-controller-manager", "Update");
        let cases = [
            (
                "the former operator's controller under its own name",
                LeftoverKind::Deployment,
                json!({"name": "openstack-manila-csi-controllerplugin", "managedFields": [former, status]}),
                true,
            ),
            (
                "one of ours by name",
                LeftoverKind::Deployment,
                json!({"name": "manila-csi-driver-controller", "managedFields": [former]}),
                false,
            ),
            (
                "one of ours by label",
                LeftoverKind::Deployment,
                json!({"name": "other", "labels": {OPERAND_LABEL: "x"}, "managedFields": [former]}),
                false,
            ),
            (
                "another driver's former operator",
                LeftoverKind::Deployment,
                json!({"name": "gcp-pd-csi-driver-controller", "managedFields": [entry("gcp-pd-csi-driver-operator", "Update")]}),
                false,
            ),
            (
                "an admin's object",
                LeftoverKind::Service,
                json!({"name": "tool", "managedFields": [entry("kubectl-create", "Update")]}),
                false,
            ),
            (
                "declared by someone with server-side apply",
                LeftoverKind::Service,
                json!({"name": "tool", "managedFields": [former, entry("argocd", "Apply")]}),
                false,
            ),
            (
                "owned by another object",
                LeftoverKind::ServiceAccount,
                json!({"name": "sa", "managedFields": [former],
                       "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"}]}),
                false,
            ),
            (
                "a cluster role of the driver's prefix",
                LeftoverKind::ClusterRole,
                json!({"name": "manila-old-role", "managedFields": [former]}),
                true,
            ),
            (
                "a cluster role of another prefix",
                LeftoverKind::ClusterRole,
                json!({"name": "system:thing", "managedFields": [former]}),
                false,
            ),
            (
                "a binding of a prefix the former operator used",
                LeftoverKind::ClusterRoleBinding,
                json!({"name": "csi-manila-old-binding", "managedFields": [former]}),
                true,
            ),
        ];
        for (what, kind, value, want) in cases {
            assert_eq!(is_leftover(&def, kind, &meta(value), &ours), want, "{what}");
        }
    }
}
