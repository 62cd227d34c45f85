//! The operator's own monitoring, as OpenShift ships it beside its storage operator: the metrics
//! Service `cluster-storage-operator-metrics` (install manifests), the ServiceMonitor
//! `cluster-storage-operator` that makes Prometheus scrape it, the PrometheusRule `prometheus`
//! with OpenShift's storage alerts and recording rules, and (OpenShift only, install manifests)
//! the Role and RoleBinding `prometheus` that let `openshift-monitoring/prometheus-k8s` find the
//! targets. Pure builders and decisions; the operator applies the ServiceMonitor and the
//! PrometheusRule at run time, each once its CRD exists, on OpenShift and plain Kubernetes alike.
//!
//! As OpenShift's, the operator serves `/metrics` over HTTPS on 8443 ([`opkit::secure_metrics`])
//! with the certificate service-ca writes for the Service's annotation, to callers the API server
//! allows (Prometheus' client certificate, or a bearer token). On OpenShift the ServiceMonitor
//! scrapes `https` with the platform Prometheus' client certificate and service CA, as
//! OpenShift's; on plain Kubernetes, where no service-ca signs the certificate (the operator
//! serves a self-signed one until its Secret is made), it scrapes `https` with Prometheus' own
//! ServiceAccount token and does not verify the certificate.
//!
//! Ownership: an existing object of one of these names is ours to apply over when we applied it
//! ([`opkit::ownership::applied_by_us`]), or when OpenShift's storage operator or the
//! cluster-version-operator (which applies OpenShift's payload manifests, with Update) wrote it:
//! those are taken over in place. Anything else of that name is someone's own and left alone.

use std::collections::BTreeMap;

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use opkit::conditions::condition;
use opkit::rbac::{READ, rule};
use serde_json::{Value, json};

use crate::failure::WriteFailure;
use crate::names::{NAME, OPERATOR_NAMESPACE};

/// The controller that applies the ServiceMonitor and PrometheusRule: its field manager is
/// `storage-operator/StorageOperatorMonitoringController`, its condition
/// `StorageOperatorMonitoringControllerDegraded`. OpenShift's operator has no such condition (the
/// cluster-version-operator applies its manifests), so the name follows its controllers'
/// `<Name>Controller<Type>` form, with the `StorageOperator` prefix of `StorageOperatorUpgradeable`.
pub const CONTROLLER: &str = "StorageOperatorMonitoringController";
/// The field manager of the cluster-version-operator, which applies OpenShift's payload (where
/// OpenShift's ServiceMonitor and PrometheusRule come from) with Update.
pub const CLUSTER_VERSION_OPERATOR: &str = "cluster-version-operator";

/// The metrics Service, as OpenShift's.
pub const SERVICE: &str = "cluster-storage-operator-metrics";
/// The ServiceMonitor, as OpenShift's.
pub const SERVICE_MONITOR: &str = "cluster-storage-operator";
/// The PrometheusRule, as OpenShift's.
pub const PROMETHEUS_RULE: &str = "prometheus";
/// The Service's port name, which the ServiceMonitor scrapes.
pub const PORT_NAME: &str = "https";
/// The Secret of the operator's serving certificate, which service-ca writes (the Service's
/// annotation names it) and the operator's pod mounts, as OpenShift's.
pub const SERVING_CERT: &str = "cluster-storage-operator-serving-cert";
/// The annotation OpenShift's Service asks service-ca with (the older, alpha, name).
pub const SERVING_CERT_ANNOTATION: &str = "service.alpha.openshift.io/serving-cert-secret-name";
/// The Role and RoleBinding that let Prometheus read the targets (OpenShift only).
pub const PROMETHEUS_RBAC: &str = "prometheus";

/// The monitoring kinds the operator applies; neither has a Rust type, and their CRDs (Prometheus
/// operator's) may be missing or come later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `servicemonitors.monitoring.coreos.com`.
    ServiceMonitor,
    /// `prometheusrules.monitoring.coreos.com`.
    PrometheusRule,
}

impl Kind {
    /// Both kinds.
    pub const ALL: [Kind; 2] = [Self::ServiceMonitor, Self::PrometheusRule];

    /// The kind's name.
    pub fn kind(self) -> &'static str {
        match self {
            Self::ServiceMonitor => "ServiceMonitor",
            Self::PrometheusRule => "PrometheusRule",
        }
    }

    /// Its CRD's name.
    pub fn crd_name(self) -> &'static str {
        match self {
            Self::ServiceMonitor => "servicemonitors.monitoring.coreos.com",
            Self::PrometheusRule => "prometheusrules.monitoring.coreos.com",
        }
    }

    /// The resource (plural).
    pub fn plural(self) -> &'static str {
        match self {
            Self::ServiceMonitor => "servicemonitors",
            Self::PrometheusRule => "prometheusrules",
        }
    }

    /// The name of our object of this kind, in the operator's namespace.
    pub fn object_name(self) -> &'static str {
        match self {
            Self::ServiceMonitor => SERVICE_MONITOR,
            Self::PrometheusRule => PROMETHEUS_RULE,
        }
    }

    /// The API resource.
    pub fn api_resource(self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("monitoring.coreos.com", "v1", self.kind()),
            self.plural(),
        )
    }

    /// Our object of this kind, for OpenShift's cluster monitoring or (`openshift` false) a
    /// plain Kubernetes Prometheus.
    pub fn build(self, openshift: bool) -> DynamicObject {
        let value = match self {
            Self::ServiceMonitor => build_service_monitor(openshift),
            Self::PrometheusRule => build_prometheus_rule(),
        };
        self.object(value, self.object_name())
    }

    /// `value`, a built object of this kind named `name` in the operator's namespace, as the
    /// applier takes it. The builders are literals with apiVersion, kind and metadata, so it
    /// parses; were it not to, the object is the bare `name`.
    pub fn object(self, value: Value, name: &str) -> DynamicObject {
        serde_json::from_value(value).unwrap_or_else(|_| {
            DynamicObject::new(name, &self.api_resource()).within(OPERATOR_NAMESPACE)
        })
    }
}

/// What the operator saw of one monitoring kind.
// One per kind per reconcile; variant sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Seen {
    /// Its CRD does not exist: nothing to apply, not an error.
    #[default]
    NoCrd,
    /// The CRD exists and the cache of our object is still filling: wait (applying blind would
    /// write on every pass, or over someone else's object).
    Filling,
    /// The CRD exists; the object of our name, if there is one.
    Cached(Option<DynamicObject>),
}

/// Whether an existing object is ours to apply over: one we applied, or one OpenShift's
/// storage operator or the cluster-version-operator wrote (taken over in place).
pub fn ours(meta: &ObjectMeta) -> bool {
    crate::ownership::ours_or_former(meta)
        || meta
            .managed_fields
            .iter()
            .flatten()
            .any(|entry| entry.manager.as_deref() == Some(CLUSTER_VERSION_OPERATOR))
}

/// The objects to apply, by what was seen of each kind: absent (with its CRD) or ours. Returns
/// them with the kinds whose object is someone else's and left alone.
pub fn desired(
    seen: &BTreeMap<Kind, Seen>,
    openshift: bool,
) -> (Vec<(Kind, DynamicObject)>, Vec<Kind>) {
    let mut apply = Vec::new();
    let mut foreign = Vec::new();
    for kind in Kind::ALL {
        match seen.get(&kind).unwrap_or(&Seen::NoCrd) {
            Seen::NoCrd | Seen::Filling => {}
            Seen::Cached(Some(existing)) if !ours(&existing.metadata) => foreign.push(kind),
            Seen::Cached(_) => apply.push((kind, kind.build(openshift))),
        }
    }
    (apply, foreign)
}

/// `StorageOperatorMonitoringControllerDegraded`: True with reason `SyncError` and the server's
/// answers when an object could not be written in this pass; else False, saying what was left
/// alone.
pub fn degraded(failures: &[&WriteFailure], foreign: &[Kind]) -> OperatorCondition {
    let type_ = format!("{CONTROLLER}Degraded");
    if failures.is_empty() {
        let message: Vec<String> = foreign
            .iter()
            .map(|kind| {
                format!(
                    "{} {OPERATOR_NAMESPACE}/{} was not made by this operator or OpenShift's; it is left as it is",
                    kind.kind(),
                    kind.object_name()
                )
            })
            .collect();
        condition(
            type_,
            ConditionStatus::False,
            "AsExpected",
            message.join("\n"),
        )
    } else {
        let message: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
        condition(
            type_,
            ConditionStatus::True,
            "SyncError",
            message.join("\n"),
        )
    }
}

fn meta(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    json!({"name": name, "namespace": OPERATOR_NAMESPACE, "labels": labels})
}

/// The metrics Service: OpenShift's name, label and selector (the operator pod's `name`
/// label), in front of the admin port where `/metrics` is served over HTTP.
pub fn build_service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(SERVICE.into()),
            namespace: Some(OPERATOR_NAMESPACE.into()),
            labels: Some([("app".to_owned(), SERVICE.to_owned())].into()),
            annotations: Some(
                [(SERVING_CERT_ANNOTATION.to_owned(), SERVING_CERT.to_owned())].into(),
            ),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: 443,
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::Int(opkit::install::METRICS_PORT)),
                ..Default::default()
            }]),
            selector: Some([("name".to_owned(), NAME.to_owned())].into()),
            session_affinity: Some("None".into()),
            type_: Some("ClusterIP".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The ServiceMonitor: every 30 s, `/metrics` of the Service's `https` port, found through
/// EndpointSlices, as OpenShift's. On OpenShift, with the platform Prometheus' client
/// certificate and the service CA (OpenShift's); elsewhere with Prometheus' ServiceAccount token,
/// the certificate unverified (see the module docs).
pub fn build_service_monitor(openshift: bool) -> Value {
    let server_name = format!("{SERVICE}.{OPERATOR_NAMESPACE}.svc");
    let endpoint = if openshift {
        json!({
            "interval": "30s",
            "path": "/metrics",
            "port": PORT_NAME,
            "scheme": "https",
            "tlsConfig": {
                "caFile": "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
                "serverName": server_name,
                "certFile": "/etc/prometheus/secrets/metrics-client-certs/tls.crt",
                "keyFile": "/etc/prometheus/secrets/metrics-client-certs/tls.key",
            },
        })
    } else {
        json!({
            "interval": "30s",
            "path": "/metrics",
            "port": PORT_NAME,
            "scheme": "https",
            "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "tlsConfig": {"serverName": server_name, "insecureSkipVerify": true},
        })
    };
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": meta(SERVICE_MONITOR, &[]),
        "spec": {
            "endpoints": [endpoint],
            "jobLabel": "component",
            "selector": {"matchLabels": {"app": SERVICE}},
            "serviceDiscoveryRole": "EndpointSlice",
        },
    })
}

/// The label selector of the namespaces whose volumes the PersistentVolume alerts cover, as
/// OpenShift's (the platform's own namespaces).
const PLATFORM_NAMESPACES: &str = r#"namespace=~"(openshift-.*|kube-.*|default)""#;

/// A kubelet volume statistic of the platform's namespaces, as the alerts select it.
fn kubelet(metric: &str) -> String {
    format!(
        r#"kubelet_volume_stats_{metric}{{{PLATFORM_NAMESPACES},job="kubelet", metrics_path="/metrics"}}"#
    )
}

/// The end of every PersistentVolume alert's expression: not for read-only claims, nor for
/// claims labelled to opt out.
fn unless_read_only_or_opted_out() -> String {
    format!(
        "unless on(cluster, namespace, persistentvolumeclaim)\n\
         kube_persistentvolumeclaim_access_mode{{{PLATFORM_NAMESPACES}, access_mode=\"ReadOnlyMany\"}} == 1\n\
         unless on(cluster, namespace, persistentvolumeclaim)\n\
         kube_persistentvolumeclaim_labels{{{PLATFORM_NAMESPACES},label_alerts_k8s_io_kube_persistent_volume_filling_up=\"disabled\"}} == 1\n"
    )
}

/// A "filling up" expression over `free`/`total` (bytes or inodes): below `ratio` with
/// something used, and with `predict` also heading for zero within four days.
fn filling_up(free: &str, total: &str, used: &str, ratio: &str, predict: bool) -> String {
    let mut expr = format!(
        "(\n  {}\n    /\n  {}\n) < {ratio}\nand\n{} > 0\n",
        kubelet(free),
        kubelet(total),
        kubelet(used),
    );
    if predict {
        expr.push_str(&format!(
            "and\npredict_linear({}[6h], 4 * 24 * 3600) < 0\n",
            kubelet(free)
        ));
    }
    expr.push_str(&unless_read_only_or_opted_out());
    expr
}

/// The PrometheusRule: OpenShift's alerts and recording rules, with the same names,
/// expressions, durations, severities and runbook links (descriptions in our words). Of the
/// metrics they read, `default_storage_class_count` and
/// `openshift_cluster_storage_vac_mismatch_parameters` are this operator's
/// ([`crate::storage_metrics`]); the others are the kubelet's, kube-controller-manager's and
/// kube-state-metrics'.
pub fn build_prometheus_rule() -> Value {
    let pv_runbook = |alert: &str| {
        format!(
            "https://github.com/openshift/runbooks/blob/master/alerts/cluster-monitoring-operator/{alert}.md"
        )
    };
    let on_cluster = "{{ with $labels.cluster -}} on Cluster {{ . }} {{- end }}";
    let failing_ops = r#"storage_operation_duration_seconds_count{status != "success", operation_name =~"volume_attach|volume_mount"}"#;
    let succeeding_ops = r#"storage_operation_duration_seconds_count{status = "success", operation_name =~"volume_attach|volume_mount"}"#;
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": meta(PROMETHEUS_RULE, &[("role", "alert-rules")]),
        "spec": {"groups": [
            {"name": "default-storage-classes.rules", "rules": [{
                "alert": "MultipleDefaultStorageClasses",
                "expr": "min_over_time(default_storage_class_count[5m]) > 1",
                "for": "10m",
                "labels": {"severity": "warning"},
                "annotations": {
                    "summary": "The cluster has more than one default StorageClass.",
                    "description": "The storage operator counts the StorageClasses marked as the cluster's default, and more than one is. A claim that names no class then gets one of them, which one is not defined.\n",
                    "message": "More than one StorageClass is marked as default; unmark all but one.",
                },
            }]},
            {"name": "volume-attributes-class.rules", "rules": [{
                "alert": "VolumeAttributesClassParameterMismatch",
                "expr": "max_over_time(openshift_cluster_storage_vac_mismatch_parameters[5m]) > 0",
                "for": "10m",
                "labels": {"severity": "warning"},
                "annotations": {
                    "summary": "The VolumeAttributesClasses of a CSI driver set different parameters.",
                    "description": "The VolumeAttributesClasses of CSI driver {{ $labels.driver }} do not all name the same parameters. Give every VolumeAttributesClass of {{ $labels.driver }} the same set of parameter names.\n",
                    "message": "The VolumeAttributesClasses of CSI driver {{ $labels.driver }} do not all name the same parameters. Give every VolumeAttributesClass of {{ $labels.driver }} the same set of parameter names.",
                },
            }]},
            {"name": "storage-operations.rules", "rules": [{
                "alert": "PodStartupStorageOperationsFailing",
                // Failures of attach or mount in the last 5 minutes and no success: the
                // successes count as zero where the success series does not exist yet (the
                // failures' series times zero fills the gap).
                "expr": format!(
                    "increase({failing_ops}[5m]) > 0\n  and ignoring(status) (sum without(status)\n    (increase({succeeding_ops}[5m])\n      or increase({failing_ops}[5m]) * 0)\n    ) == 0\n"
                ),
                "for": "5m",
                "labels": {"severity": "info"},
                "annotations": {
                    "summary": "{{ $labels.operation_name }} of volume plugin {{ $labels.volume_plugin }} keeps failing{{ if $labels.node }} on node {{ $labels.node }}{{ end }}, so pods cannot start.",
                    "description": concat!(
                        "For the last 5 minutes every \"{{ $labels.operation_name }}\" of volume plugin {{ $labels.volume_plugin }} failed{{ if $labels.node }} on node {{ $labels.node }}{{ end }}, and pods using those volumes could not start.\n",
                        "{{ if eq $labels.operation_name \"volume_mount\" -}}\n",
                        "Look at the pods stuck in ContainerCreating on that node: \"oc get pod --field-selector=spec.nodeName={{ $labels.node }} --all-namespaces | grep ContainerCreating\".\n",
                        "{{- else if eq $labels.operation_name \"volume_attach\" -}}\n",
                        "Look at the pods stuck in ContainerCreating on any node: \"oc get pod --all-namespaces | grep ContainerCreating\", at the attachments (\"oc get volumeattachment\") and at the controller manager's logs.\n",
                        "{{- else -}}\n",
                        "Look at the pods stuck in ContainerCreating{{ if $labels.node }} on node {{ $labels.node }}{{ end }}.\n",
                        "{{- end }}\n",
                        "A pod's events give the exact error: \"oc describe pod -n <pod namespace> <pod name>\".\n",
                    ),
                },
            }]},
            {"name": "storage-selinux.rules", "rules": [
                // Containers of one pod with different SELinux contexts.
                {"expr": "sum(volume_manager_selinux_pod_context_mismatch_warnings_total) + sum(volume_manager_selinux_pod_context_mismatch_errors_total)",
                 "record": "cluster:volume_manager_selinux_pod_context_mismatch_total"},
                // Pods sharing a ReadWriteOnce or ReadWriteMany volume with different contexts.
                {"expr": "sum by(volume_plugin) (volume_manager_selinux_volume_context_mismatch_warnings_total{volume_plugin !~\".*-e2e-.*\"})",
                 "record": "cluster:volume_manager_selinux_volume_context_mismatch_warnings_total"},
                // The same for ReadWriteOncePod volumes.
                {"expr": "sum by(volume_plugin) (volume_manager_selinux_volume_context_mismatch_errors_total{volume_plugin !~\".*-e2e-.*\"})",
                 "record": "cluster:volume_manager_selinux_volume_context_mismatch_errors_total"},
                // Volumes a pod with an SELinux context uses, which a context mount would serve.
                {"expr": "sum by(volume_plugin) (volume_manager_selinux_volumes_admitted_total{volume_plugin !~\".*-e2e-.*\"})",
                 "record": "cluster:volume_manager_selinux_volumes_admitted_total"},
                // Pods the SELinux warning controller finds in conflict, by property (only
                // these two exist; the filter keeps the cardinality low if more come).
                {"expr": "sum by(property) (selinux_warning_controller_selinux_volume_conflict{property =~ \"SELinuxLabel|SELinuxChangePolicy\"})",
                 "record": "cluster:selinux_warning_controller_selinux_volume_conflict:count"},
                // Each pod in conflict has two series (one per property): half the sum counts pods.
                {"alert": "SELinuxMountGAReadinessWorkloadsDetected",
                 "expr": "floor(sum(selinux_warning_controller_selinux_volume_conflict) / 2) > 0",
                 "for": "10m",
                 "labels": {"severity": "warning"},
                 "annotations": {
                    "summary": "Some workloads will not work with SELinuxMount GA.",
                    "description": "{{ $value | humanize }} pods have an SELinux conflict to resolve before the cluster can be upgraded to the next OpenShift version.\nThe metric selinux_warning_controller_selinux_volume_conflict lists them.\n",
                    "runbook_url": "https://github.com/openshift/enhancements/blob/master/enhancements/storage/selinuxmount-ga-block-upgrade.md",
                 }},
            ]},
            // As OpenShift's, from kubernetes-mixin's storage alerts, for the platform's namespaces.
            {"name": "kubernetes-storage", "rules": [
                {"alert": "KubePersistentVolumeFillingUp",
                 "annotations": {
                    "description": format!("The PersistentVolume of claim {{{{ $labels.persistentvolumeclaim }}}} in namespace {{{{ $labels.namespace }}}} {on_cluster} has only {{{{ $value | humanizePercentage }}}} of its space left."),
                    "runbook_url": pv_runbook("KubePersistentVolumeFillingUp"),
                    "summary": "A PersistentVolume is almost full.",
                 },
                 "expr": filling_up("available_bytes", "capacity_bytes", "used_bytes", "0.03", false),
                 "for": "1m",
                 "labels": {"severity": "critical"}},
                {"alert": "KubePersistentVolumeFillingUp",
                 "annotations": {
                    "description": format!("At its recent rate the PersistentVolume of claim {{{{ $labels.persistentvolumeclaim }}}} in namespace {{{{ $labels.namespace }}}} {on_cluster} will be full within four days; {{{{ $value | humanizePercentage }}}} of its space is left."),
                    "runbook_url": pv_runbook("KubePersistentVolumeFillingUp"),
                    "summary": "A PersistentVolume is almost full.",
                 },
                 "expr": filling_up("available_bytes", "capacity_bytes", "used_bytes", "0.15", true),
                 "for": "1h",
                 "labels": {"severity": "warning"}},
                {"alert": "KubePersistentVolumeInodesFillingUp",
                 "annotations": {
                    "description": format!("The PersistentVolume of claim {{{{ $labels.persistentvolumeclaim }}}} in namespace {{{{ $labels.namespace }}}} {on_cluster} has only {{{{ $value | humanizePercentage }}}} of its inodes left."),
                    "runbook_url": pv_runbook("KubePersistentVolumeInodesFillingUp"),
                    "summary": "A PersistentVolume is running out of inodes.",
                 },
                 "expr": filling_up("inodes_free", "inodes", "inodes_used", "0.03", false),
                 "for": "1m",
                 "labels": {"severity": "critical"}},
                {"alert": "KubePersistentVolumeInodesFillingUp",
                 "annotations": {
                    "description": format!("At its recent rate the PersistentVolume of claim {{{{ $labels.persistentvolumeclaim }}}} in namespace {{{{ $labels.namespace }}}} {on_cluster} will run out of inodes within four days; {{{{ $value | humanizePercentage }}}} of its inodes are left."),
                    "runbook_url": pv_runbook("KubePersistentVolumeInodesFillingUp"),
                    "summary": "A PersistentVolume is running out of inodes.",
                 },
                 "expr": filling_up("inodes_free", "inodes", "inodes_used", "0.15", true),
                 "for": "1h",
                 "labels": {"severity": "warning"}},
                {"alert": "KubePersistentVolumeErrors",
                 "annotations": {
                    "description": format!("PersistentVolume {{{{ $labels.persistentvolume }}}} {on_cluster} is in phase {{{{ $labels.phase }}}}."),
                    "summary": "A PersistentVolume failed or is not provisioned.",
                 },
                 "expr": format!("kube_persistentvolume_status_phase{{phase=~\"Failed|Pending\",{PLATFORM_NAMESPACES},job=\"kube-state-metrics\"}} > 0\n"),
                 "for": "5m",
                 "labels": {"severity": "warning"}},
            ]},
        ]},
    })
}

/// The Role and RoleBinding `prometheus` in the operator's namespace that let OpenShift's
/// cluster monitoring (`openshift-monitoring/prometheus-k8s`) find and scrape the targets, as
/// OpenShift's. OpenShift only: elsewhere whoever runs Prometheus grants it what it reads.
pub fn build_prometheus_rbac() -> (Role, RoleBinding) {
    let metadata = ObjectMeta {
        name: Some(PROMETHEUS_RBAC.into()),
        namespace: Some(OPERATOR_NAMESPACE.into()),
        labels: Some([("app.kubernetes.io/name".to_owned(), NAME.to_owned())].into()),
        ..Default::default()
    };
    let rules: Vec<PolicyRule> = vec![
        rule(&[""], &["services", "endpoints", "pods"], READ),
        rule(&["discovery.k8s.io"], &["endpointslices"], READ),
    ];
    (
        Role {
            metadata: metadata.clone(),
            rules: Some(rules),
        },
        RoleBinding {
            metadata,
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Role".into(),
                name: PROMETHEUS_RBAC.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: "prometheus-k8s".into(),
                namespace: Some("openshift-monitoring".into()),
                ..Default::default()
            }]),
        },
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    fn object(kind: Kind, managers: &[(&str, &str)]) -> DynamicObject {
        let mut object = kind.build(true);
        object.metadata.managed_fields = Some(
            managers
                .iter()
                .map(|(manager, operation)| ManagedFieldsEntry {
                    manager: Some((*manager).to_owned()),
                    operation: Some((*operation).to_owned()),
                    ..Default::default()
                })
                .collect(),
        );
        object
    }

    fn planned(seen: Seen) -> (Vec<Kind>, Vec<Kind>) {
        let (apply, foreign) = desired(&[(Kind::ServiceMonitor, seen)].into(), true);
        (apply.into_iter().map(|(k, _)| k).collect(), foreign)
    }

    /// Applied where the CRD exists and the object is absent, ours, OpenShift's operator's or
    /// the cluster-version-operator's; left alone when someone else made it; nothing while the
    /// CRD is missing or the cache fills.
    #[test]
    fn applied_where_the_crd_exists_and_the_object_is_absent_or_ours() {
        let sm = Kind::ServiceMonitor;
        let cases = [
            (Seen::NoCrd, (vec![], vec![])),
            (Seen::Filling, (vec![], vec![])),
            (Seen::Cached(None), (vec![sm], vec![])),
            (
                Seen::Cached(Some(object(
                    sm,
                    &[(
                        "storage-operator/StorageOperatorMonitoringController",
                        "Apply",
                    )],
                ))),
                (vec![sm], vec![]),
            ),
            (
                Seen::Cached(Some(object(sm, &[("cluster-version-operator", "Update")]))),
                (vec![sm], vec![]),
            ),
            (
                Seen::Cached(Some(object(sm, &[("cluster-storage-operator", "Update")]))),
                (vec![sm], vec![]),
            ),
            (
                Seen::Cached(Some(object(sm, &[("kubectl-client-side-apply", "Update")]))),
                (vec![], vec![sm]),
            ),
            (Seen::Cached(Some(object(sm, &[]))), (vec![], vec![sm])),
        ];
        for (seen, want) in cases {
            let described = format!("{seen:?}");
            assert_eq!(planned(seen), want, "{described}");
        }
        // No CRD seen at all: nothing.
        assert_eq!(desired(&BTreeMap::new(), true), (vec![], vec![]));
        // Each kind on its own.
        let (apply, _) = desired(&[(Kind::PrometheusRule, Seen::Cached(None))].into(), true);
        assert_eq!(apply.len(), 1);
        assert_eq!(apply[0].1, Kind::PrometheusRule.build(true));
    }

    #[test]
    fn degraded_names_the_failed_write_and_is_false_otherwise() {
        let failure = WriteFailure {
            kind: "PrometheusRule".into(),
            object: "openshift-cluster-storage-operator/prometheus".into(),
            message: "applying PrometheusRule openshift-cluster-storage-operator/prometheus: forbidden (403)".into(),
            not_ours: false,
        };
        let c = degraded(&[&failure], &[]);
        assert_eq!(c.type_, "StorageOperatorMonitoringControllerDegraded");
        assert_eq!(c.status, ConditionStatus::True);
        assert_eq!(c.reason.as_deref(), Some("SyncError"));
        assert_eq!(c.message.as_deref(), Some(failure.message.as_str()));
        let fine = degraded(&[], &[]);
        assert_eq!(
            (fine.status, fine.reason.as_deref(), fine.message.as_deref()),
            (ConditionStatus::False, Some("AsExpected"), None)
        );
        let left = degraded(&[], &[Kind::ServiceMonitor]);
        assert_eq!(left.status, ConditionStatus::False);
        assert!(left.message.unwrap_or_default().contains(
            "ServiceMonitor openshift-cluster-storage-operator/cluster-storage-operator"
        ),);
    }

    /// The objects are OpenShift's (names, namespace, selector, annotation) and scrape what the
    /// operator serves: its HTTPS metrics port, with service-ca's certificate mounted from the
    /// Secret the Service asks for.
    #[test]
    fn the_service_monitor_scrapes_the_https_metrics_port_of_the_operator_pods() {
        let service = build_service();
        let spec = service.spec.unwrap();
        assert_eq!(service.metadata.name.as_deref(), Some(SERVICE));
        assert_eq!(
            service.metadata.namespace.as_deref(),
            Some(OPERATOR_NAMESPACE)
        );
        let secret = &service.metadata.annotations.as_ref().unwrap()[SERVING_CERT_ANNOTATION];
        for flavour in [
            crate::manifests::Flavour::OpenShift,
            crate::manifests::Flavour::Kubernetes,
        ] {
            let deployment = crate::manifests::build_deployment(flavour, "example.com/so:1");
            let pod = deployment.spec.unwrap().template;
            let pod_labels = pod.metadata.unwrap().labels.unwrap();
            for (key, value) in spec.selector.clone().unwrap() {
                assert_eq!(pod_labels.get(&key), Some(&value), "{key}");
            }
            let pod = pod.spec.unwrap();
            let container = &pod.containers[0];
            assert!(
                container
                    .args
                    .as_ref()
                    .unwrap()
                    .contains(&"--metrics-address=0.0.0.0:8443".to_owned())
            );
            let port = &spec.ports.as_ref().unwrap()[0];
            assert_eq!(port.port, 443);
            assert!(container.ports.as_ref().unwrap().iter().any(|p| {
                Some(IntOrString::Int(p.container_port)) == port.target_port
                    && p.name.as_deref() == Some("metrics")
            }));
            let volume = pod
                .volumes
                .as_ref()
                .unwrap()
                .iter()
                .find(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_ref()) == Some(secret))
                .unwrap();
            assert_eq!(volume.secret.as_ref().unwrap().optional, Some(true));
            let mount = container
                .volume_mounts
                .as_ref()
                .unwrap()
                .iter()
                .find(|m| m.name == volume.name)
                .unwrap();
            assert_eq!(mount.mount_path, opkit::secure_metrics::DEFAULT_CERT_DIR);
        }

        for openshift in [true, false] {
            let monitor = build_service_monitor(openshift);
            assert_eq!(monitor["metadata"]["name"], "cluster-storage-operator");
            assert_eq!(
                monitor["spec"]["selector"]["matchLabels"]["app"],
                service.metadata.labels.as_ref().unwrap()["app"]
            );
            let endpoint = &monitor["spec"]["endpoints"][0];
            assert_eq!(endpoint["port"], "https");
            assert_eq!(endpoint["scheme"], "https");
            assert_eq!(endpoint["path"], "/metrics");
            assert_eq!(
                endpoint["tlsConfig"]["serverName"],
                "cluster-storage-operator-metrics.openshift-cluster-storage-operator.svc"
            );
            if openshift {
                assert_eq!(
                    endpoint["tlsConfig"]["certFile"],
                    "/etc/prometheus/secrets/metrics-client-certs/tls.crt"
                );
            } else {
                assert_eq!(endpoint["tlsConfig"]["insecureSkipVerify"], true);
                assert!(endpoint["bearerTokenFile"].is_string());
            }
        }
    }

    /// Every alert and recording rule of OpenShift's `12_prometheusrules.yaml`, with its
    /// duration, severity and runbook; the alerts on this operator's metrics read the names it
    /// registers.
    #[test]
    fn the_rules_are_openshifts() {
        let rule = build_prometheus_rule();
        assert_eq!(rule["metadata"]["name"], "prometheus");
        assert_eq!(rule["metadata"]["namespace"], OPERATOR_NAMESPACE);
        assert_eq!(rule["metadata"]["labels"]["role"], "alert-rules");
        let rules: Vec<&Value> = rule["spec"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .collect();
        let alerts: Vec<(&str, &str, &str)> = rules
            .iter()
            .filter_map(|r| {
                Some((
                    r["alert"].as_str()?,
                    r["for"].as_str()?,
                    r["labels"]["severity"].as_str()?,
                ))
            })
            .collect();
        assert_eq!(
            alerts,
            [
                ("MultipleDefaultStorageClasses", "10m", "warning"),
                ("VolumeAttributesClassParameterMismatch", "10m", "warning"),
                ("PodStartupStorageOperationsFailing", "5m", "info"),
                ("SELinuxMountGAReadinessWorkloadsDetected", "10m", "warning"),
                ("KubePersistentVolumeFillingUp", "1m", "critical"),
                ("KubePersistentVolumeFillingUp", "1h", "warning"),
                ("KubePersistentVolumeInodesFillingUp", "1m", "critical"),
                ("KubePersistentVolumeInodesFillingUp", "1h", "warning"),
                ("KubePersistentVolumeErrors", "5m", "warning"),
            ]
        );
        let records = rules.iter().filter(|r| r.get("record").is_some()).count();
        assert_eq!(records, 5);
        for r in &rules {
            let annotations = &r["annotations"];
            if r.get("alert").is_some() {
                assert!(annotations["summary"].is_string(), "{r}");
                assert!(annotations["description"].is_string(), "{r}");
            }
        }
        let expr = |alert: &str| {
            rules.iter().find(|r| r["alert"] == alert).unwrap()["expr"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        // The metrics this operator serves (crate::storage_metrics).
        let metrics = opkit::metrics::Metrics::new();
        let gauges = crate::storage_metrics::StorageGauges::register(&metrics);
        let class: k8s_openapi::api::storage::v1::VolumeAttributesClass = serde_json::from_value(
            json!({"metadata": {"name": "a"}, "driverName": "d", "parameters": {"iops": "1"}}),
        )
        .unwrap();
        gauges.set(&[], &[class]);
        let served = metrics.encode();
        for (alert, metric) in [
            (
                "MultipleDefaultStorageClasses",
                "default_storage_class_count",
            ),
            (
                "VolumeAttributesClassParameterMismatch",
                "openshift_cluster_storage_vac_mismatch_parameters",
            ),
        ] {
            assert!(expr(alert).contains(&format!("({metric}[5m])")), "{alert}");
            assert!(
                served.contains(&format!("# TYPE {metric} gauge")),
                "{metric}: {served}"
            );
        }
        assert_eq!(
            rules
                .iter()
                .find(|r| r["alert"] == "KubePersistentVolumeFillingUp")
                .unwrap()["annotations"]["runbook_url"],
            "https://github.com/openshift/runbooks/blob/master/alerts/cluster-monitoring-operator/KubePersistentVolumeFillingUp.md"
        );
    }

    #[test]
    fn prometheus_reads_the_targets_in_the_operators_namespace() {
        let (role, binding) = build_prometheus_rbac();
        let rules = role.rules.unwrap();
        for (group, resource) in [
            ("", "services"),
            ("", "endpoints"),
            ("", "pods"),
            ("discovery.k8s.io", "endpointslices"),
        ] {
            assert!(
                opkit::rbac::allows(&rules, group, resource, "watch"),
                "{resource}"
            );
            assert!(
                !opkit::rbac::allows(&rules, group, resource, "patch"),
                "{resource}"
            );
        }
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("prometheus-k8s", Some("openshift-monitoring"))
        );
        assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
    }
}
