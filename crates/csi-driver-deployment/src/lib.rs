//! A user's CSIDriverDeployment (seed 004, `csidriver.storage.openshift.io/v1alpha1`): any CSI
//! driver, declared by its pod templates. It is one more source of a [`DriverDef`](csi_kit::DriverDef),
//! served by the kit's builders: [`build::driver_def`] turns the object into a table (sidecars
//! by `attachRequired` and the optional resizer/snapshotter, upstream images unless
//! `containerImages` says otherwise), the kit builds the controller Deployment and node
//! DaemonSet, and [`build`] puts the user's containers and volumes into them, on the socket and
//! kubelet paths the object names.
//!
//! Pipeline: [`mod@validate`] (pure, every rule, each naming the field and the fix) →
//! [`mod@build`] (pure, desired objects) → [`controller`] (observe, plan, apply, remove, status).
//!
//! The files, from the bottom up: each uses only files listed before it (types and constants
//! first, the controller last; `cargo test -p cli --test layering` checks there is no circle).
//! - `lib.rs`: the owner labels, the finalizer and the controller's name.
//! - `kinds.rs`: the kinds a CSIDriverDeployment owns.
//! - `validate.rs`, then `build.rs`: pure, as above.
//! - `reasons.rs`: the reasons of the conditions the controller sets itself.
//! - `error.rs`: a failed step and a failed reconcile.
//! - `caches.rs`: the watches, and which change asks for which CSIDriverDeployment.
//! - `context.rs`: the client, caches and settings every step works with.
//! - `observe.rs`: what a pass reads: whether an object is ours, the facts validation needs, the
//!   operands that exist, the driver's volumes.
//! - `plan.rs`: what the build is given, how each StorageClass is written (applied, replaced
//!   or kept), which operands are stale, and what the pass found.
//! - `events.rs`: the Events on a CSIDriverDeployment.
//! - `apply.rs`: applying and deleting one operand.
//! - `remove.rs`: removing operands (stale, Removed, deleted), the finalizer, and what the
//!   driver's volumes hold back.
//! - `status.rs`: the conditions and the status write.
//! - `rbac.rs`: the controller's own permissions, for the manifests.
//! - `controller.rs`: the run loop and the steps of a reconcile, in order.
//!
//! Where this differs from the 2018 openshift/csi-operator on purpose:
//! - Sidecars are today's (node-driver-registrar, leases for leader election with OpenShift's
//!   137s/107s/26s); `containerImages` still picks their images.
//! - Each sidecar gets its own least-privilege ClusterRole (the 2018 operator bound one broad
//!   role), and the node ServiceAccount alone gets the `privileged` SCC, only where SCCs exist.
//! - The whole kubelet root directory (which holds `pods/` and the staging paths under
//!   `plugins/`) is mounted with Bidirectional propagation, as the built-in drivers do.

mod apply;
pub mod build;
mod caches;
mod context;
pub mod controller;
mod error;
mod events;
pub mod kinds;
mod observe;
mod plan;
mod rbac;
mod reasons;
mod remove;
mod status;
pub mod validate;

pub use build::{DeclaredInputs, build_operands, driver_def};
pub use validate::{Claimant, ClusterFacts, Invalid, validate};

/// The label on every cluster-scoped object made for a CSIDriverDeployment: its namespace.
pub const OWNER_NAMESPACE_LABEL: &str = "csidriver.storage.openshift.io/owner-namespace";
/// The label on every cluster-scoped object made for a CSIDriverDeployment: its name.
pub const OWNER_NAME_LABEL: &str = "csidriver.storage.openshift.io/owner-name";
/// The finalizer that removes the cluster-scoped objects when a CSIDriverDeployment is deleted.
pub const FINALIZER: &str = "csidriver.storage.openshift.io/cluster-scoped-objects";
/// The field manager (and Event reporter) of the controller.
pub const CONTROLLER_NAME: &str = "csidriverdeployment-controller";
