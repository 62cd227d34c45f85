//! The names the controller, the build pods and the deploy manifests share. They live at the
//! bottom of the crate so that the pure parts ([`crate::pod`], [`crate::manifests`]) need not
//! reach up into the controller for them.

/// The CRD that serves Builds on plain Kubernetes.
pub const BUILD_CRD: &str = "builds.build.openshift.io";
/// The ServiceAccount build pods run as when the build names none (OpenShift's).
pub const DEFAULT_SERVICE_ACCOUNT: &str = "builder";
