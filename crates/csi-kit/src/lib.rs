//! The CSI driver kit (library-go's `csi/*` equivalent): a driver described as data
//! ([`DriverDef`]), everything a build reads ([`Inputs`]), and one pure builder per operand
//! kind. [`render()`] returns every operand in a stable order.
//!
//! Nothing here talks to the API server or reads the process environment, and the compiler
//! holds it to that: this crate depends on kube's core types (`kube-core`), not on its client or
//! runtime. The driver operator (`driver-operator`) gathers [`Inputs`] from the cluster, these
//! functions compute the desired objects, and the driver operator applies them.
//!
//! The files, bottom to top; a file uses only files listed before it:
//! 1. What uses nothing else: [`error`], [`hash`], [`status`], [`claims`], [`replace`],
//!    [`quantity`], and the types of [`inputs`] (`inputs/mod.rs`).
//! 2. [`tls`] (serving TLS from a profile), then the table's schema, [`def`] (`def/mod.rs`).
//! 3. What reads a table: [`names`], [`credentials`], then the table's defaults
//!    (`def/defaults.rs`), a driver's inputs before anything is observed
//!    (`inputs/for_driver.rs`) and cached objects turned into inputs
//!    ([`inputs::from_objects`]).
//! 4. The builders: [`hooks`], [`derived`], [`metrics`], [`rbac`], [`storage`], then
//!    [`workloads`] (which runs the hooks).
//! 5. The checks of a table (`def/validate.rs`, which asks the builders what they would make),
//!    and [`render`](mod@render), every operand in order.
//! 6. [`hosted`]: the render for a hosted control plane, each operand placed on its cluster.
//!
//! Modules:
//! - [`def`]: the driver table and its hooks.
//! - [`inputs`]: topology, images, optional CRDs and their kinds, existing StorageClasses, hashes.
//! - [`credentials`]: where the short-lived cloud token is mounted, which variable holds a role.
//! - [`rbac`]: ServiceAccounts, per-sidecar least-privilege RBAC.
//! - [`workloads`]: controller Deployment, PodDisruptionBudget, node DaemonSet.
//! - [`hooks`]: the generic hooks (proxy, CA bundle, input hashes).
//! - [`storage`]: CSIDriver, StorageClasses, VolumeSnapshotClasses.
//! - [`status`]: condition names and workload conditions from observed objects.
//! - [`claims`]: the claims stuck Pending on a driver, and the condition that reports them.
//! - [`metrics`]: metrics Service and ServiceMonitor.
//! - [`hash`]: hash annotations for Secrets and ConfigMaps.
//! - [`quantity`]: a resource quantity (`10Gi`) read as bytes, and bytes written as one.
//! - [`derived`]: operand ConfigMaps generated from an observed ConfigMap (cloud configs).
//! - [`render`](mod@render): everything, in order.
//! - [`hosted`]: with a hosted control plane (HyperShift): the controller in the management
//!   cluster, the rest in the guest.
//! - [`replace`]: fields the API server refuses to change, and objects that are not ours: when
//!   an operand is replaced or kept instead of applied.
//!
//! Elsewhere: the controllers that run a `DriverDef` are `driver-operator`; a user's
//! CSIDriverDeployment becomes a `DriverDef` in `csi-driver-deployment`; the in-tree migration
//! translation is `csi-migration`.
//!
//! Where this differs from library-go on purpose (each driver's
//! `drivers/src/<driver>.openshift-differences.yaml` lists what remains, object by object, and a
//! test compares the render with OpenShift's generated assets):
//! - Placeholders never leak: an unset image uses the upstream default, an unknown TLS profile
//!   leaves kube-rbac-proxy's defaults, a missing cluster ID leaves out the label argument.
//! - The leader-election Role has only the verbs client-go's lease lock uses; the
//!   kube-rbac-proxy role can also create SubjectAccessReviews, which kube-rbac-proxy needs to
//!   authorize scrapers.
//! - Plain Kubernetes is a topology of its own: control-plane nodes are selected by
//!   `node-role.kubernetes.io/control-plane`, without OpenShift's service CA the metrics
//!   proxies serve self-signed certificates, and the render brings the shared sidecar
//!   ClusterRoles that cluster-storage-operator ships on OpenShift.
//! - The metrics Service is built even without the ServiceMonitor CRD: on OpenShift its
//!   annotation is what makes the service CA issue the certificate the proxies mount.
//! - Every operand carries the label [`names::OPERAND_LABEL`] (metadata only, never pod
//!   templates) so controllers can watch their operands by label.

pub mod claims;
pub mod credentials;
pub mod def;
pub mod derived;
pub mod error;
pub mod hash;
pub mod hooks;
pub mod hosted;
pub mod inputs;
pub mod metrics;
pub mod names;
pub mod quantity;
pub mod rbac;
pub mod render;
pub mod replace;
pub mod status;
pub mod storage;
pub mod tls;
pub mod workloads;

pub use def::{
    CSIDriverDef, ConfigMapKeyDef, ControllerDef, ControllerPlacement, CredentialsDef,
    CredentialsRequestDef, DaemonSetHook, DeploymentHook, DriverContainerDef, DriverDef, EnvDef,
    ExtraDaemonSet, ExtraDaemonSetBuilder, Hooks, HostedDef, ImageDef, Images, MetricsDef, NodeDef,
    RequestsDef, RuleDef, SidecarDef, SidecarKind, StorageClassDef, StorageClassFilter,
    StorageClassHook, VolumeDef, VolumeSnapshotClassDef, VolumeSourceDef, VolumesDef,
};
pub use error::{HookError, HookErrorKind};
pub use inputs::{
    ControlPlaneImages, ExistingStorageClass, HostedControlPlane, Inputs, OptionalCrds,
    ResolvedImages, SecretData, ServingTls, Topology, UnknownTopology,
};
pub use metrics::{
    build_metrics_service, build_node_metrics_service, build_node_service_monitor,
    build_service_monitor,
};
pub use rbac::{
    build_cluster_role_bindings, build_cluster_roles, build_role_bindings, build_roles,
    build_service_accounts, build_shared_cluster_roles, build_shared_sidecar_cluster_roles,
};
pub use render::{
    Operand, build_credentials_request, build_node_credentials_request,
    build_trusted_ca_bundle_config_map, render, render_operands,
};
pub use storage::{
    build_csi_driver, build_storage_classes, build_volume_snapshot_classes,
    storage_classes_to_delete, validate_storage_class_state,
};
pub use workloads::{
    build_controller_deployment, build_extra_daemon_set, build_node_daemon_set,
    build_pod_disruption_budget,
};
