//! The kinds of object a CSIDriverDeployment owns, as a type: every place that lists, deletes
//! or reports its operands matches on [`OwnedKind`] exhaustively, so a kind added to the
//! operands cannot be silently skipped by one of them.

use csi_kit::render::Operand;

/// A kind of operand of a CSIDriverDeployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OwnedKind {
    /// The controller's and node's ServiceAccounts.
    ServiceAccount,
    /// Namespaced RBAC.
    Role,
    /// Namespaced RBAC bindings.
    RoleBinding,
    /// Cluster RBAC.
    ClusterRole,
    /// Cluster RBAC bindings.
    ClusterRoleBinding,
    /// The controller's PodDisruptionBudget.
    PodDisruptionBudget,
    /// The controller.
    Deployment,
    /// The node plugin.
    DaemonSet,
    /// The CSIDriver object.
    CSIDriver,
    /// The StorageClasses of the templates.
    StorageClass,
    /// The VolumeSnapshotClasses of the templates (`snapshot.storage.k8s.io/v1`, whose CRD may
    /// be missing).
    VolumeSnapshotClass,
}

impl OwnedKind {
    /// Every owned kind.
    pub const ALL: [OwnedKind; 11] = [
        OwnedKind::ServiceAccount,
        OwnedKind::Role,
        OwnedKind::RoleBinding,
        OwnedKind::ClusterRole,
        OwnedKind::ClusterRoleBinding,
        OwnedKind::PodDisruptionBudget,
        OwnedKind::Deployment,
        OwnedKind::DaemonSet,
        OwnedKind::CSIDriver,
        OwnedKind::StorageClass,
        OwnedKind::VolumeSnapshotClass,
    ];

    /// The kind's name, as in `kind:`.
    pub fn name(self) -> &'static str {
        match self {
            OwnedKind::ServiceAccount => "ServiceAccount",
            OwnedKind::Role => "Role",
            OwnedKind::RoleBinding => "RoleBinding",
            OwnedKind::ClusterRole => "ClusterRole",
            OwnedKind::ClusterRoleBinding => "ClusterRoleBinding",
            OwnedKind::PodDisruptionBudget => "PodDisruptionBudget",
            OwnedKind::Deployment => "Deployment",
            OwnedKind::DaemonSet => "DaemonSet",
            OwnedKind::CSIDriver => "CSIDriver",
            OwnedKind::StorageClass => "StorageClass",
            OwnedKind::VolumeSnapshotClass => "VolumeSnapshotClass",
        }
    }

    /// API group and resource, as the status's generation history names them.
    pub fn group_resource(self) -> (&'static str, &'static str) {
        match self {
            OwnedKind::ServiceAccount => ("", "serviceaccounts"),
            OwnedKind::Role => ("rbac.authorization.k8s.io", "roles"),
            OwnedKind::RoleBinding => ("rbac.authorization.k8s.io", "rolebindings"),
            OwnedKind::ClusterRole => ("rbac.authorization.k8s.io", "clusterroles"),
            OwnedKind::ClusterRoleBinding => ("rbac.authorization.k8s.io", "clusterrolebindings"),
            OwnedKind::PodDisruptionBudget => ("policy", "poddisruptionbudgets"),
            OwnedKind::Deployment => ("apps", "deployments"),
            OwnedKind::DaemonSet => ("apps", "daemonsets"),
            OwnedKind::CSIDriver => ("storage.k8s.io", "csidrivers"),
            OwnedKind::StorageClass => ("storage.k8s.io", "storageclasses"),
            OwnedKind::VolumeSnapshotClass => ("snapshot.storage.k8s.io", "volumesnapshotclasses"),
        }
    }

    /// Whether objects of the kind hold the driver's volumes in place: kept while
    /// PersistentVolumes of the driver exist. (A VolumeSnapshotClass does not: a snapshot's
    /// deletion reads its VolumeSnapshotContent, not its class.)
    pub fn holds_volumes(self) -> bool {
        match self {
            OwnedKind::CSIDriver | OwnedKind::StorageClass => true,
            OwnedKind::ServiceAccount
            | OwnedKind::Role
            | OwnedKind::RoleBinding
            | OwnedKind::ClusterRole
            | OwnedKind::ClusterRoleBinding
            | OwnedKind::PodDisruptionBudget
            | OwnedKind::Deployment
            | OwnedKind::DaemonSet
            | OwnedKind::VolumeSnapshotClass => false,
        }
    }

    /// The kind of `operand`, or `None` for an operand a CSIDriverDeployment never has.
    pub fn of(operand: &Operand) -> Option<OwnedKind> {
        match operand {
            Operand::ServiceAccount(_) => Some(OwnedKind::ServiceAccount),
            Operand::Role(_) => Some(OwnedKind::Role),
            Operand::RoleBinding(_) => Some(OwnedKind::RoleBinding),
            Operand::ClusterRole(_) => Some(OwnedKind::ClusterRole),
            Operand::ClusterRoleBinding(_) => Some(OwnedKind::ClusterRoleBinding),
            Operand::PodDisruptionBudget(_) => Some(OwnedKind::PodDisruptionBudget),
            Operand::Deployment(_) => Some(OwnedKind::Deployment),
            Operand::DaemonSet(_) => Some(OwnedKind::DaemonSet),
            Operand::CSIDriver(_) => Some(OwnedKind::CSIDriver),
            Operand::StorageClass(_) => Some(OwnedKind::StorageClass),
            Operand::Dynamic(v) if v["kind"] == "VolumeSnapshotClass" => {
                Some(OwnedKind::VolumeSnapshotClass)
            }
            Operand::ConfigMap(_)
            | Operand::Secret(_)
            | Operand::NetworkPolicy(_)
            | Operand::Service(_)
            | Operand::Dynamic(_) => None,
        }
    }
}

impl std::fmt::Display for OwnedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_resources_are_distinct() {
        let names: std::collections::BTreeSet<_> =
            OwnedKind::ALL.iter().map(|k| k.name()).collect();
        let resources: std::collections::BTreeSet<_> =
            OwnedKind::ALL.iter().map(|k| k.group_resource()).collect();
        assert_eq!(names.len(), OwnedKind::ALL.len());
        assert_eq!(resources.len(), OwnedKind::ALL.len());
        let held: Vec<_> = OwnedKind::ALL
            .into_iter()
            .filter(|k| k.holds_volumes())
            .collect();
        assert_eq!(held, [OwnedKind::CSIDriver, OwnedKind::StorageClass]);
    }
}
