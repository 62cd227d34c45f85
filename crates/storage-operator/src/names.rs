//! The names the operator's files share, and the kind of cluster it is deployed to. This file
//! uses no other: every file may use it, so the builders need not reach up into the plan, the
//! manifests or the controller for a name.

/// The namespace this operator runs in.
pub const OPERATOR_NAMESPACE: &str = "openshift-cluster-storage-operator";
/// The ClusterOperator this operator reports to.
pub const CLUSTER_OPERATOR: &str = "storage";
/// The condition type prefix of this controller.
pub const STARTER: &str = "CSIDriverStarter";

/// The name of the operator's Deployment, ServiceAccount and RBAC objects.
pub const NAME: &str = "cluster-storage-operator";

/// The Lease the operator's replicas compete for, in the namespace they run in (with a hosted
/// control plane, the control-plane namespace of the management cluster).
pub const LEASE: &str = "cluster-storage-operator-lock";

/// The field manager of OpenShift's cluster-storage-operator (its binary's name, as client-go
/// derives a manager from the user agent), whose objects this operator adopts.
pub const FORMER_OPERATOR: &str = "cluster-storage-operator";

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
