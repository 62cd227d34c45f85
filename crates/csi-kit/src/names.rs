//! Names, labels, annotations and fixed numbers shared by the builders. Object names are
//! derived from the `DriverDef` prefixes exactly as OpenShift's operators name them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use crate::def::DriverDef;

/// The label on every operand's metadata (not on pod templates, so adding it never rolls
/// pods): the driver's short name. Controllers watch operands by this label.
pub const OPERAND_LABEL: &str = "csi.storage.openshift.io/driver";

/// The label on the shared sidecar ClusterRoles (identical for every driver, so they cannot
/// carry one driver's [`OPERAND_LABEL`]); driver operators watch them by it.
pub const SHARED_ROLE_LABEL: &str = "csi.storage.openshift.io/shared-sidecar-role";

/// The default-StorageClass annotation.
pub const DEFAULT_STORAGE_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The default-VolumeSnapshotClass annotation.
pub const DEFAULT_SNAPSHOT_CLASS_ANNOTATION: &str =
    "snapshot.storage.kubernetes.io/is-default-class";
/// The CSIDriver annotation that marks it as installed by an OpenShift driver operator;
/// cluster-storage-operator tells ours from a foreign CSIDriver of the same name by it.
pub const MANAGED_CSIDRIVER_ANNOTATION: &str = "csi.openshift.io/managed";
/// The CSIDriver label that says which pod security level may use inline volumes.
pub const EPHEMERAL_PROFILE_LABEL: &str = "security.openshift.io/csi-ephemeral-volume-profile";
/// Deployment/DaemonSet annotation naming the containers that get the cluster proxy.
pub const INJECT_PROXY_ANNOTATION: &str = "config.openshift.io/inject-proxy";
/// Deployment/DaemonSet annotation naming the containers that get the trusted CA bundle.
pub const INJECT_CA_BUNDLE_ANNOTATION: &str = "config.openshift.io/inject-proxy-cabundle";
/// ConfigMap label asking OpenShift's network operator to fill in the trusted CA bundle.
pub const INJECT_TRUSTED_CA_LABEL: &str = "config.openshift.io/inject-trusted-cabundle";
/// Service annotation asking OpenShift's service CA to issue a serving certificate.
pub const SERVING_CERT_ANNOTATION: &str = "service.beta.openshift.io/serving-cert-secret-name";
/// Pod annotation naming the SecurityContextConstraints the pod needs.
pub const REQUIRED_SCC_ANNOTATION: &str = "openshift.io/required-scc";
/// Pod annotation for workload partitioning.
pub const WORKLOAD_MANAGEMENT_ANNOTATION: &str = "target.workload.openshift.io/management";
/// Its value.
pub const WORKLOAD_MANAGEMENT_VALUE: &str = r#"{"effect": "PreferredDuringScheduling"}"#;

/// The driver container's name in both pods.
pub const DRIVER_CONTAINER: &str = "csi-driver";
/// The livenessprobe container's name.
pub const LIVENESS_PROBE_CONTAINER: &str = "csi-liveness-probe";
/// The node-driver-registrar container's name.
pub const REGISTRAR_CONTAINER: &str = "csi-node-driver-registrar";

/// Sidecar leader election, OpenShift's HA values for every topology (library-go does not
/// shorten them for single-node clusters either): tolerates a 78 s API server outage.
pub const LEADER_ELECTION_LEASE_DURATION: &str = "137s";
/// See [`LEADER_ELECTION_LEASE_DURATION`].
pub const LEADER_ELECTION_RENEW_DEADLINE: &str = "107s";
/// See [`LEADER_ELECTION_LEASE_DURATION`].
pub const LEADER_ELECTION_RETRY_PERIOD: &str = "26s";

/// The controller pod's socket directory (an emptyDir).
pub const CONTROLLER_SOCKET_DIR: &str = "/var/lib/csi/sockets/pluginproxy/";
/// Where a node pod's containers find the driver's socket directory.
pub const NODE_SOCKET_DIR: &str = "/csi";
/// The controller-side socket path the sidecars use.
pub const CONTROLLER_SOCKET: &str = "/var/lib/csi/sockets/pluginproxy/csi.sock";
/// The controller's driver's `CSI_ENDPOINT` unless the table says otherwise.
pub const CONTROLLER_ENDPOINT: &str = "unix:///var/lib/csi/sockets/pluginproxy/csi.sock";
/// The node's driver's `CSI_ENDPOINT` unless the table says otherwise.
pub const NODE_ENDPOINT: &str = "unix:/csi/csi.sock";
/// Where the kube-rbac-proxies find the serving certificate.
pub const METRICS_CERT_DIR: &str = "/etc/tls/private";
/// The trusted CA bundle volume.
pub const CA_BUNDLE_VOLUME: &str = "non-standard-root-system-trust-ca-bundle";
/// Where the trusted CA bundle is mounted.
pub const CA_BUNDLE_MOUNT_PATH: &str = "/etc/pki/ca-trust/extracted/pem";

/// The ServiceAccount of cluster monitoring, allowed to discover the metrics endpoints.
pub const PROMETHEUS_SERVICE_ACCOUNT: (&str, &str) = ("openshift-monitoring", "prometheus-k8s");

/// The controller Deployment: `<object_prefix>-controller` unless the table names it.
pub fn controller(def: &DriverDef) -> String {
    def.controller
        .name
        .clone()
        .unwrap_or_else(|| format!("{}-controller", def.object_prefix))
}

/// The labels that select the controller's pods: the table's, else `app: <Deployment name>`.
pub fn controller_selector(def: &DriverDef) -> BTreeMap<String, String> {
    if def.controller.selector.is_empty() {
        app_labels(&controller(def))
    } else {
        def.controller.selector.clone()
    }
}

/// The label the ReplicaSet controller puts on a Deployment's pods and a DaemonSet's never
/// carry.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// Whether pods labelled with `selector` and `extra` carry every label of `other`.
fn carries(
    mut selector: BTreeMap<String, String>,
    extra: &BTreeMap<String, String>,
    other: &BTreeMap<String, String>,
) -> bool {
    selector.extend(extra.clone());
    other.iter().all(|(k, v)| selector.get(k) == Some(v))
}

/// Whether the node pods carry every label of the controller's selector (OpenShift's IBM VPC
/// Block selects both workloads' pods by one `app` label).
pub fn node_pods_match_controller_selector(def: &DriverDef) -> bool {
    carries(
        node_selector(def),
        &def.node.pod_labels,
        &controller_selector(def),
    )
}

/// Whether the controller pods carry every label of the node's selector.
pub fn controller_pods_match_node_selector(def: &DriverDef) -> bool {
    carries(
        controller_selector(def),
        &def.controller.pod_labels,
        &node_selector(def),
    )
}

/// The selector of the controller's pods alone, for what must not count node pods (the
/// PodDisruptionBudget, the anti-affinity): the controller's selector, and where node pods
/// match it too, [`POD_TEMPLATE_HASH_LABEL`] present.
pub fn controller_pods_selector(def: &DriverDef) -> LabelSelector {
    LabelSelector {
        match_labels: Some(controller_selector(def)),
        match_expressions: node_pods_match_controller_selector(def).then(|| {
            vec![LabelSelectorRequirement {
                key: POD_TEMPLATE_HASH_LABEL.to_owned(),
                operator: "Exists".to_owned(),
                values: None,
            }]
        }),
    }
}

/// The node DaemonSet: `<object_prefix>-node` unless the table names it.
pub fn node(def: &DriverDef) -> String {
    def.node
        .name
        .clone()
        .unwrap_or_else(|| format!("{}-node", def.object_prefix))
}

/// The labels that select the node pods: the table's, else `app: <DaemonSet name>`.
pub fn node_selector(def: &DriverDef) -> BTreeMap<String, String> {
    if def.node.selector.is_empty() {
        app_labels(&node(def))
    } else {
        def.node.selector.clone()
    }
}

/// The leader-election Lease of the driver operator: the one OpenShift's operator holds
/// (`<its name>-lock`, library-go's), so that the two never run at once during a handover. Its
/// name is the field manager it writes with ([`DriverDef::adopt_from`]'s first), else
/// `<object_prefix>-operator`.
pub fn operator_lease(def: &DriverDef) -> String {
    match def.adopt_from.first() {
        Some(operator) => format!("{operator}-lock"),
        None => format!("{}-operator-lock", def.object_prefix),
    }
}

/// The ServiceMonitor of the controller's metrics.
pub fn service_monitor(def: &DriverDef) -> String {
    format!("{}-controller-monitor", def.object_prefix)
}

/// The controller ServiceAccount: `<object_prefix>-controller-sa` unless the table names it.
pub fn controller_sa(def: &DriverDef) -> String {
    def.controller
        .service_account_name
        .clone()
        .unwrap_or_else(|| format!("{}-controller-sa", def.object_prefix))
}

/// The node ServiceAccount: `<object_prefix>-node-sa` unless the table names it.
pub fn node_sa(def: &DriverDef) -> String {
    def.node
        .service_account_name
        .clone()
        .unwrap_or_else(|| format!("{}-node-sa", def.object_prefix))
}

/// The metrics Service (also the `app` label of the Service itself).
pub fn metrics_service(def: &DriverDef) -> String {
    format!("{}-controller-metrics", def.object_prefix)
}

/// The Secret the service CA writes the metrics serving certificate to.
pub fn metrics_serving_cert(def: &DriverDef) -> String {
    format!("{}-controller-metrics-serving-cert", def.object_prefix)
}

/// The node metrics Service (also the `app` label of the Service itself), for a node plugin
/// with metrics.
pub fn node_metrics_service(def: &DriverDef) -> String {
    format!("{}-node-metrics", def.object_prefix)
}

/// The Secret the service CA writes the node metrics serving certificate to.
pub fn node_metrics_serving_cert(def: &DriverDef) -> String {
    format!("{}-node-metrics-serving-cert", def.object_prefix)
}

/// The ServiceMonitor of the node plugin's metrics.
pub fn node_service_monitor(def: &DriverDef) -> String {
    format!("{}-node-monitor", def.object_prefix)
}

/// The trusted CA bundle ConfigMap.
pub fn trusted_ca_bundle(def: &DriverDef) -> String {
    format!("{}-trusted-ca-bundle", def.object_prefix)
}

/// The metrics port name of a container (`provisioner-m`, `driver-m`).
pub fn metrics_port(short: &str) -> String {
    format!("{short}-m")
}

/// Object metadata with the operand label; `namespace` is `None` for cluster-scoped objects.
pub fn meta(def: &DriverDef, name: impl Into<String>, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([(
            OPERAND_LABEL.to_owned(),
            def.short_name.clone(),
        )])),
        ..ObjectMeta::default()
    }
}

/// Namespaced metadata in the operand namespace.
pub fn ns_meta(def: &DriverDef, name: impl Into<String>) -> ObjectMeta {
    meta(def, name, Some(&def.namespace))
}

/// A one-entry label map `app: <value>` for selectors.
pub fn app_labels(value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), value.to_owned())])
}
