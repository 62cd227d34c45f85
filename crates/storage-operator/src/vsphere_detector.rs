//! The vSphere problem detector (`vsphere-problem-detector-operator`), as OpenShift's storage
//! operator runs it with its `VSphereProblemDetectorStarter`: on vSphere only, a Deployment in
//! the operator's namespace that checks the cluster's vSphere configuration, credentials and
//! permissions, reports them in events and metrics, and restarts when the cloud config or the
//! credentials change (their hashes are annotations of its pod template). Pure builders and
//! conditions; the plan decides when they are applied ([`crate::plan`]).
//!
//! The objects, names and values are OpenShift's (`assets/vsphere_problem_detector/`): a
//! ServiceAccount, Role and RoleBinding, ClusterRole and ClusterRoleBinding, the
//! `trusted-ca-bundle` ConfigMap (filled by OpenShift's network operator), the
//! `vsphere-problem-detector-operator-config` ConfigMap (its TLS serving settings), the metrics
//! Service, and the Deployment. Its ServiceMonitor and PrometheusRule
//! ([`build_service_monitor`], [`build_prometheus_rule`]) are applied where Prometheus' CRDs
//! exist, as OpenShift's VSphereProblemDetectorMonitoringController does: the rule only while
//! the admin's ConfigMap `vsphere-problem-detector` does not say `alertsDisabled: true` and the
//! vSphere CSI driver is not `Removed` (a rule of ours is deleted then). Its credentials
//! come from the CredentialsRequest OpenShift ships in its payload
//! ([`build_credentials_request`], in `deploy/openshift/`).
//!
//! It runs only on OpenShift: the detector reads OpenShift's Infrastructure and its cloud
//! config, and has no image outside OpenShift's release (`VSPHERE_PROBLEM_DETECTOR_OPERATOR_IMAGE`).
//! Without that variable, or on plain Kubernetes on vSphere, it is not started and
//! `VSphereProblemDetectorStarterDegraded` (False) says why: no pod with a made-up image.
//!
//! Differences from OpenShift's rendered Deployment (07_deployment.yaml after its hooks), and
//! why:
//! - every object carries the starter's label (`storage.openshift.io/driver-operator:
//!   vsphere-problem-detector`), so that `kubectl get -l` finds what the operator manages;
//! - the cloud config whose hash restarts it is `openshift-config/cloud-provider-config`, the
//!   name OpenShift's installer gives it, not any name `Infrastructure.spec.cloudConfig` gives:
//!   the operator reads that ConfigMap by name only ([`CLOUD_CONFIG`]); when the Infrastructure
//!   names another one, no cloud config hash is set (as OpenShift does when the ConfigMap is
//!   missing);
//! - `operator.openshift.io/spec-hash` is this project's hash of everything applied, not
//!   library-go's hash of the spec (the key is the same, the value differs).

use std::collections::BTreeMap;

use api::config_v1::ProxyStatus;
use api::operator_v1::{ConditionStatus, OperatorCondition};
use csi_kit::Topology;
use csi_kit::hash::{HashedKind, annotation_key};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource, KeyToPath,
    ObjectFieldSelector, PodSpec, PodTemplateSpec, ResourceRequirements, SecretVolumeSource,
    Service, ServiceAccount, ServicePort, ServiceSpec, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use opkit::conditions::condition;
use opkit::rbac::{MANAGE, READ, rule};
use serde_json::{Value, json};

use crate::failure::WriteFailure;
use crate::names::OPERATOR_NAMESPACE;
use crate::starter::STARTER_LABEL;

/// The Deployment's, ServiceAccount's and container's name.
pub const NAME: &str = "vsphere-problem-detector-operator";
/// The value of the starter's label on its objects.
pub const LABEL_VALUE: &str = "vsphere-problem-detector";
/// The environment variable naming its image, as OpenShift's.
pub const IMAGE_ENV: &str = "VSPHERE_PROBLEM_DETECTOR_OPERATOR_IMAGE";
/// Its Role.
pub const ROLE: &str = "vsphere-problem-detector-operator-role";
/// Its RoleBinding.
pub const ROLE_BINDING: &str = "vsphere-problem-detector-operator-rolebinding";
/// Its ClusterRole.
pub const CLUSTER_ROLE: &str = "vsphere-problem-detector-operator-clusterrole";
/// Its ClusterRoleBinding.
pub const CLUSTER_ROLE_BINDING: &str = "vsphere-problem-detector-operator-clusterrolebinding";
/// The ConfigMap OpenShift's network operator fills with the cluster's trusted CAs.
pub const TRUSTED_CA_BUNDLE: &str = "trusted-ca-bundle";
/// Its configuration (TLS serving settings); it exits when the file changes.
pub const OPERATOR_CONFIG: &str = "vsphere-problem-detector-operator-config";
/// Its metrics Service.
pub const SERVICE: &str = "vsphere-problem-detector-metrics";
/// The Secret OpenShift's service CA makes for the Service (its serving certificate).
pub const SERVING_CERT: &str = "vsphere-problem-detector-serving-cert";
/// The Secret the cloud credential operator makes from the CredentialsRequest.
pub const CREDENTIALS: &str = "vsphere-cloud-credentials";
/// Where OpenShift keeps the cloud config.
pub const CLOUD_CONFIG_NAMESPACE: &str = "openshift-config";
/// The cloud config ConfigMap, as OpenShift's installer names it.
pub const CLOUD_CONFIG: &str = "cloud-provider-config";
/// The name of its ServiceMonitor and PrometheusRule.
pub const MONITORING_NAME: &str = "vsphere-problem-detector";
/// Its metrics port.
const METRICS_PORT: i32 = 8444;
/// The port's name, which the Service and ServiceMonitor refer to.
const METRICS_PORT_NAME: &str = "vsphere-metrics";

/// The starter's condition prefix (`VSphereProblemDetectorStarterDegraded`).
pub const STARTER: &str = "VSphereProblemDetectorStarter";
/// The static objects' condition prefix.
pub const STATIC: &str = "VSphereProblemDetectorStarterStaticController";
/// The Deployment's condition prefix (Progressing and Degraded; no Available, as OpenShift's).
pub const DEPLOYMENT: &str = "VSphereProblemDetectorDeploymentController";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some([(STARTER_LABEL.to_owned(), LABEL_VALUE.to_owned())].into()),
        ..Default::default()
    }
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

/// Its ServiceAccount.
pub fn build_service_account() -> ServiceAccount {
    ServiceAccount {
        metadata: meta(NAME, Some(OPERATOR_NAMESPACE)),
        ..Default::default()
    }
}

/// Its Role in the operator's namespace, as OpenShift's (02_role.yaml).
pub fn build_role() -> Role {
    Role {
        metadata: meta(ROLE, Some(OPERATOR_NAMESPACE)),
        rules: Some(vec![
            rule(
                &[""],
                &[
                    "pods",
                    "services",
                    "endpoints",
                    "persistentvolumeclaims",
                    "events",
                    "configmaps",
                    "secrets",
                ],
                MANAGE,
            ),
            rule(&[""], &["namespaces"], &["get"]),
            rule(&["apps"], &["deployments", "replicasets"], MANAGE),
            rule(
                &["monitoring.coreos.com"],
                &["servicemonitors"],
                &["get", "create", "update", "patch", "delete"],
            ),
        ]),
    }
}

/// Binds [`build_role`] to its ServiceAccount.
pub fn build_role_binding() -> RoleBinding {
    RoleBinding {
        metadata: meta(ROLE_BINDING, Some(OPERATOR_NAMESPACE)),
        role_ref: role_ref("Role", ROLE),
        subjects: Some(vec![subject()]),
    }
}

/// Its ClusterRole, as OpenShift's (04_clusterrole.yaml): it reads nodes, volumes, classes,
/// Secrets and ConfigMaps everywhere (the cloud config, the credentials), the Infrastructure
/// and Proxy, Storage and ClusterCSIDrivers; and holds its lock and checks its metrics' callers.
pub fn build_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: meta(CLUSTER_ROLE, None),
        rules: Some(vec![
            PolicyRule {
                resource_names: Some(vec![
                    "extension-apiserver-authentication".into(),
                    "vsphere-problem-detector-operator-lock".into(),
                ]),
                ..rule(&[""], &["configmaps"], MANAGE)
            },
            rule(&["authentication.k8s.io"], &["tokenreviews"], MANAGE),
            rule(&["authorization.k8s.io"], &["subjectaccessreviews"], MANAGE),
            rule(&["coordination.k8s.io"], &["leases"], MANAGE),
            rule(&[""], &["nodes"], READ),
            rule(
                &[""],
                &[
                    "secrets",
                    "services",
                    "endpoints",
                    "configmaps",
                    "persistentvolumes",
                ],
                READ,
            ),
            rule(&["storage.k8s.io"], &["storageclasses"], READ),
            rule(
                &["operator.openshift.io"],
                &["storages", "storages/status"],
                MANAGE,
            ),
            rule(
                &["config.openshift.io"],
                &["infrastructures", "proxies"],
                READ,
            ),
            rule(&["operator.openshift.io"], &["clustercsidrivers"], READ),
        ]),
        ..Default::default()
    }
}

/// Binds [`build_cluster_role`] to its ServiceAccount.
pub fn build_cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(CLUSTER_ROLE_BINDING, None),
        role_ref: role_ref("ClusterRole", CLUSTER_ROLE),
        subjects: Some(vec![subject()]),
    }
}

/// The `trusted-ca-bundle` ConfigMap: empty, labelled so that OpenShift's network operator
/// injects the cluster's trusted CAs (`ca-bundle.crt`, which the operator never writes).
pub fn build_trusted_ca_bundle() -> ConfigMap {
    let mut metadata = meta(TRUSTED_CA_BUNDLE, Some(OPERATOR_NAMESPACE));
    metadata.labels.get_or_insert_default().insert(
        "config.openshift.io/inject-trusted-cabundle".into(),
        "true".into(),
    );
    ConfigMap {
        metadata,
        ..Default::default()
    }
}

/// The detector's configuration ConfigMap (08_operator_config.yaml with the TLS serving
/// settings of the cluster's profile, `APIServer/cluster`, Intermediate when unset), written as
/// OpenShift writes it (the driver operators' config, [`crate::starter::operator_config_yaml`]),
/// so that taking over an unchanged cluster changes nothing (the detector exits when this file
/// changes). The error (an invalid Custom profile) names the field and the fix.
pub fn build_operator_config(
    profile: Option<&api::config_v1::TLSSecurityProfile>,
) -> Result<ConfigMap, String> {
    let tls = csi_kit::tls::serving_tls(profile)?;
    Ok(ConfigMap {
        metadata: meta(OPERATOR_CONFIG, Some(OPERATOR_NAMESPACE)),
        data: Some(
            [(
                "config.yaml".to_owned(),
                crate::starter::operator_config_yaml(&tls),
            )]
            .into(),
        ),
        ..Default::default()
    })
}

/// The admin's ConfigMap (in the operator's namespace) whose `config.yaml` may say
/// `alertsDisabled: true`, as OpenShift's detector reads it.
pub const USER_CONFIG: &str = "vsphere-problem-detector";
/// The monitoring controller's condition prefix, as OpenShift names it.
pub const MONITORING: &str = "VSphereProblemDetectorMonitoringController";

/// The name of the detector's object of a monitoring kind (both are [`MONITORING_NAME`]).
pub fn monitoring_name(_kind: crate::monitoring::Kind) -> &'static str {
    MONITORING_NAME
}

/// Whether the admin disabled the detector's alerts, from the ConfigMap [`USER_CONFIG`]: absent
/// means enabled. Its `config.yaml` may hold `alertsDisabled` only (OpenShift reads it
/// strictly); anything else is an error naming the ConfigMap, the key and the fix.
pub fn alerts_disabled(config: Option<&ConfigMap>) -> Result<bool, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Config {
        #[serde(default)]
        alerts_disabled: bool,
    }
    let Some(config) = config else {
        return Ok(false);
    };
    let where_ = format!("ConfigMap {OPERATOR_NAMESPACE}/{USER_CONFIG}");
    let text = config
        .data
        .as_ref()
        .and_then(|d| d.get("config.yaml"))
        .ok_or_else(|| {
            format!("{where_} has no key config.yaml: put `alertsDisabled: true` (or false) there")
        })?;
    if text.trim().is_empty() {
        return Ok(false);
    }
    api::yaml::from_str::<Config>(text)
        .map(|c| c.alerts_disabled)
        .map_err(|e| {
            format!(
                "{where_}, key config.yaml, is not valid: {e}; it takes only `alertsDisabled: true` or `false`"
            )
        })
}

/// The detector's monitoring object of `kind` ([`build_service_monitor`],
/// [`build_prometheus_rule`]).
pub fn monitoring_object(kind: crate::monitoring::Kind) -> kube::api::DynamicObject {
    let value = match kind {
        crate::monitoring::Kind::ServiceMonitor => build_service_monitor(),
        crate::monitoring::Kind::PrometheusRule => build_prometheus_rule(),
    };
    kind.object(value, MONITORING_NAME)
}

/// The monitoring controller's conditions, as OpenShift's: Available True saying whether the
/// alerts are enabled (when that could be read), and Degraded, SyncError with what failed
/// (a write, a delete, or the admin's ConfigMap), else False.
pub fn monitoring_conditions(
    alerts: Result<bool, String>,
    failures: &[&WriteFailure],
) -> Vec<OperatorCondition> {
    let mut problems: Vec<String> = failures.iter().map(|f| f.message.clone()).collect();
    let mut out = Vec::new();
    match alerts {
        Ok(disabled) => out.push(condition(
            format!("{MONITORING}Available"),
            ConditionStatus::True,
            "AsExpected",
            if disabled {
                "vsphere-problem-detector alerts are disabled"
            } else {
                "vsphere-problem-detector alerts are enabled"
            },
        )),
        Err(error) => problems.insert(0, error),
    }
    out.push(if problems.is_empty() {
        condition(
            format!("{MONITORING}Degraded"),
            ConditionStatus::False,
            "AsExpected",
            "",
        )
    } else {
        condition(
            format!("{MONITORING}Degraded"),
            ConditionStatus::True,
            "SyncError",
            problems.join("\n"),
        )
    });
    out
}

/// Its metrics Service (10_service.yaml); the annotation has OpenShift's service CA make the
/// serving certificate Secret the Deployment mounts.
pub fn build_service() -> Service {
    let mut metadata = meta(SERVICE, Some(OPERATOR_NAMESPACE));
    metadata
        .labels
        .get_or_insert_default()
        .insert("app".into(), SERVICE.into());
    metadata.annotations = Some(
        [(
            "service.alpha.openshift.io/serving-cert-secret-name".to_owned(),
            SERVING_CERT.to_owned(),
        )]
        .into(),
    );
    Service {
        metadata,
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(METRICS_PORT_NAME.into()),
                port: METRICS_PORT,
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::String(METRICS_PORT_NAME.into())),
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

/// The hashes of what the detector reads at start, as observed: the credentials and serving
/// certificate Secrets in the operator's namespace and the cloud config ConfigMap. A missing
/// object has no hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputHashes {
    /// `openshift-cluster-storage-operator/vsphere-cloud-credentials`'s data.
    pub credentials: Option<String>,
    /// `openshift-cluster-storage-operator/vsphere-problem-detector-serving-cert`'s data.
    pub serving_cert: Option<String>,
    /// `openshift-config/cloud-provider-config`'s data.
    pub cloud_config: Option<String>,
}

impl InputHashes {
    /// The annotations library-go's hash hooks write for them, on the Deployment and its pod
    /// template (`operator.openshift.io/dep-<namespace>.<name>.<kind>`, shortened as
    /// library-go shortens keys longer than 63 characters).
    pub fn annotations(&self) -> BTreeMap<String, String> {
        [
            (
                OPERATOR_NAMESPACE,
                CREDENTIALS,
                HashedKind::Secret,
                &self.credentials,
            ),
            (
                OPERATOR_NAMESPACE,
                SERVING_CERT,
                HashedKind::Secret,
                &self.serving_cert,
            ),
            (
                CLOUD_CONFIG_NAMESPACE,
                CLOUD_CONFIG,
                HashedKind::ConfigMap,
                &self.cloud_config,
            ),
        ]
        .into_iter()
        .filter_map(|(namespace, name, kind, hash)| {
            hash.clone()
                .map(|hash| (annotation_key(namespace, name, kind), hash))
        })
        .collect()
    }
}

/// What the Deployment depends on.
#[derive(Clone, Debug)]
pub struct DeploymentInputs {
    /// The detector's image ([`IMAGE_ENV`]).
    pub image: String,
    /// `--v`, from Storage's `logLevel`.
    pub verbosity: u8,
    /// The cluster's layout: a hosted control plane has no master nodes to select.
    pub topology: Topology,
    /// The cluster-wide proxy, passed in the container's environment.
    pub proxy: ProxyStatus,
    /// The hashes that restart it.
    pub hashes: InputHashes,
}

/// Its Deployment, as OpenShift renders 07_deployment.yaml: one replica on the master nodes,
/// the image, log level, proxy and input hashes filled in.
pub fn build_deployment(inputs: &DeploymentInputs) -> Deployment {
    let selector: BTreeMap<String, String> = [("name".to_owned(), NAME.to_owned())].into();
    let mut template_labels = selector.clone();
    for key in [
        "openshift.storage.network-policy.dns",
        "openshift.storage.network-policy.api-server",
        "openshift.storage.network-policy.operator-metrics",
        "openshift.storage.network-policy.all-egress",
    ] {
        template_labels.insert(key.into(), "allow".into());
    }
    let hashes = inputs.hashes.annotations();
    let mut template_annotations: BTreeMap<String, String> = [
        (
            "target.workload.openshift.io/management".to_owned(),
            r#"{"effect": "PreferredDuringScheduling"}"#.to_owned(),
        ),
        (
            "openshift.io/required-scc".to_owned(),
            "restricted-v2".to_owned(),
        ),
    ]
    .into();
    template_annotations.extend(hashes.clone());
    let mut annotations: BTreeMap<String, String> = [(
        "config.openshift.io/inject-proxy".to_owned(),
        NAME.to_owned(),
    )]
    .into();
    annotations.extend(hashes);
    let mut env = vec![EnvVar {
        name: "POD_NAME".into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.name".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }];
    env.extend(inputs.proxy.env().into_iter().map(|(name, value)| EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }));
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    };
    let container = Container {
        name: NAME.into(),
        image: Some(inputs.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(vec![
            "start".into(),
            format!("--listen=0.0.0.0:{METRICS_PORT}"),
            "--config=/var/run/configmaps/config/config.yaml".into(),
            "--terminate-on-files=/var/run/configmaps/config/config.yaml".into(),
            format!("--v={}", inputs.verbosity),
        ]),
        env: Some(env),
        ports: Some(vec![ContainerPort {
            container_port: METRICS_PORT,
            name: Some(METRICS_PORT_NAME.into()),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(
                [
                    ("memory".to_owned(), Quantity("100Mi".into())),
                    ("cpu".to_owned(), Quantity("10m".into())),
                ]
                .into(),
            ),
            ..Default::default()
        }),
        volume_mounts: Some(vec![
            mount(SERVING_CERT, "/var/run/secrets/serving-cert", false),
            mount(TRUSTED_CA_BUNDLE, "/etc/pki/ca-trust/extracted/pem", true),
            mount("operator-config", "/var/run/configmaps/config", false),
        ]),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        security_context: Some(opkit::install::restricted_container()),
        ..Default::default()
    };
    // OpenShift's ControlPlaneTopology hook: a hosted control plane has no master node.
    let node_selector = (inputs.topology != Topology::External)
        .then(|| [("node-role.kubernetes.io/master".to_owned(), String::new())].into());
    Deployment {
        metadata: ObjectMeta {
            annotations: Some(annotations),
            ..meta(NAME, Some(OPERATOR_NAMESPACE))
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(template_labels),
                    annotations: Some(template_annotations),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    priority_class_name: Some("system-cluster-critical".into()),
                    service_account_name: Some(NAME.into()),
                    node_selector,
                    tolerations: Some(vec![
                        Toleration {
                            key: Some("CriticalAddonsOnly".into()),
                            operator: Some("Exists".into()),
                            ..Default::default()
                        },
                        Toleration {
                            key: Some("node-role.kubernetes.io/master".into()),
                            operator: Some("Exists".into()),
                            effect: Some("NoSchedule".into()),
                            ..Default::default()
                        },
                    ]),
                    volumes: Some(vec![
                        Volume {
                            name: SERVING_CERT.into(),
                            secret: Some(SecretVolumeSource {
                                secret_name: Some(SERVING_CERT.into()),
                                optional: Some(true),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        Volume {
                            name: TRUSTED_CA_BUNDLE.into(),
                            config_map: Some(ConfigMapVolumeSource {
                                name: TRUSTED_CA_BUNDLE.into(),
                                items: Some(vec![KeyToPath {
                                    key: "ca-bundle.crt".into(),
                                    path: "tls-ca-bundle.pem".into(),
                                    ..Default::default()
                                }]),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        Volume {
                            name: "operator-config".into(),
                            config_map: Some(ConfigMapVolumeSource {
                                name: OPERATOR_CONFIG.into(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                    ]),
                    security_context: Some(opkit::install::restricted_pod()),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Its ServiceMonitor (11_service_monitor.yaml): Prometheus scrapes the metrics Service over
/// TLS, with the service CA and its client certificate. Not applied yet (see the module docs).
pub fn build_service_monitor() -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": MONITORING_NAME,
            "namespace": OPERATOR_NAMESPACE,
            "labels": {STARTER_LABEL: LABEL_VALUE},
        },
        "spec": {
            "endpoints": [{
                "interval": "30s",
                "path": "/metrics",
                "port": METRICS_PORT_NAME,
                "scheme": "https",
                "tlsConfig": {
                    "caFile": "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
                    "serverName": format!("{SERVICE}.{OPERATOR_NAMESPACE}.svc"),
                    "certFile": "/etc/prometheus/secrets/metrics-client-certs/tls.crt",
                    "keyFile": "/etc/prometheus/secrets/metrics-client-certs/tls.key",
                },
            }],
            "jobLabel": "component",
            "selector": {"matchLabels": {"app": SERVICE}},
            "serviceDiscoveryRole": "EndpointSlice",
        },
    })
}

/// One alert of [`build_prometheus_rule`]: every one waits 10 minutes.
fn alert(name: &str, expr: &str, severity: &str, annotations: Value) -> Value {
    json!({
        "alert": name,
        "expr": expr,
        "for": "10m",
        "labels": {"severity": severity},
        "annotations": annotations,
    })
}

/// Its PrometheusRule (12_prometheusrules.yaml): the alerts on the detector's metrics, with
/// OpenShift's names, expressions, severities and texts (their runbooks and tooling key on
/// them). Each expression takes `min_over_time` over 5 minutes, so that one missed scrape (a
/// restart) does not end an alert. Not applied yet (see the module docs); OpenShift removes it
/// when `alertsDisabled: true` is set in ConfigMap `vsphere-problem-detector` or the vSphere
/// ClusterCSIDriver is Removed.
pub fn build_prometheus_rule() -> Value {
    let events = "oc -n openshift-cluster-storage-operator get event --sort-by=.metadata.creationTimestamp | grep VSphere{{ $labels.check }}";
    let rules = vec![
        alert(
            "VSphereOpenshiftNodeHealthFail",
            "min_over_time(vsphere_node_check_errors[5m]) == 1",
            "warning",
            json!({
                "summary": format!("Periodic vSphere health check {{{{ $labels.check }}}} is failing on node {{{{ $labels.node }}}}.\nTo get details about the failure, please see events in namespace openshift-cluster-storage-operator:\n'{events}'\n"),
                "message": "vSphere health check {{ $labels.check }} is failing on {{ $labels.node }}.",
                "description": "The vsphere-problem-detector performs health checks on individual OpenShift nodes on \nvSphere to confirm configuration and performance requirements are met.  Health checks \nverify machine scaling, storage provisioning, and node performance meet requirements.\n",
            }),
        ),
        alert(
            "VSphereOpenshiftClusterHealthFail",
            "min_over_time(vsphere_cluster_check_errors[5m]) == 1",
            "warning",
            json!({
                "summary": format!("Periodic vSphere cluster health check {{{{ $labels.check }}}} is failing.\nTo get details about the failure, please see events in namespace openshift-cluster-storage-operator:\n'{events}'\n"),
                "message": "vSphere cluster health checks are failing with {{ $labels.check }}",
                "description": "The vsphere-problem-detector monitors the health, permissions and configuration of OpenShift on\nvSphere.  If problems are found which may prevent machine scaling, storage provisioning,\nand safe upgrades, the vsphere-problem-detector will raise alerts.\n",
            }),
        ),
        alert(
            "VSphereOpenshiftConnectionFailure",
            r#"min_over_time(vsphere_sync_errors{reason =~ "UsernameWithoutDomain|UsernameWithNewLine|PasswordWithNewLine|InvalidCredentials"}[5m]) == 1"#,
            "warning",
            json!({
                "summary": "vsphere-problem-detector is unable to connect to vSphere vCenter.",
                "description": "vsphere-problem-detector cannot access vCenter. As consequence, other OCP components,\nsuch as storage or machine API, may not be able to access vCenter too and provide\ntheir services. Detailed error message can be found in Available condition of\nClusterOperator \"storage\", either in console\n(Administration -> Cluster settings -> Cluster operators tab -> storage) or on\ncommand line: oc get clusteroperator storage -o jsonpath='{.status.conditions[?(@.type==\"Available\")].message}'\n",
            }),
        ),
        alert(
            "CSIWithOldVSphereHWVersion",
            "min_over_time(vsphere_node_hw_version_total{hw_version=~\"vmx-(11|12|13|14)\"}[5m]) > 0\n",
            "info",
            json!({
                "summary": "Detected vSphere VM with HW version lower than 15, which is being deprecated by Openshift.",
                "description": "The cluster is using VMs with hardware version lower than 15, which is being deprecated by Openshift. Hardware version 15 or greater\nis required by vSphere CSI driver. Please update your VMs to at least HW version 15.\n",
            }),
        ),
        alert(
            "VSphereOlderVersionPresent",
            "min_over_time(vsphere_esxi_version_total{api_version=~\"^7\\\\.0\\\\.[0-1].*|^6.*\"}[5m]) > 0\n",
            "info",
            json!({
                "summary": "Detected vSphere host with ESXi version less than 7.0.2 in Openshift cluster.",
                "description": "The cluster is using ESXi hosts which are on version less than 7.0.2, which is being deprecated by Openshift. A future version of\nOpenshift will remove support for ESXi version less than 7.0.2 and it is recommended to update your hosts to the latest ESXi version.\n",
            }),
        ),
        alert(
            "VSphereOlderVCenterPresent",
            "min_over_time(vsphere_vcenter_info{api_version=~\"^7.*|^6.*\"}[5m]) > 0\n",
            "info",
            json!({
                "summary": "Detected vSphere vCenter version less than 8 in Openshift cluster.",
                "description": "The cluster is using vCenter version less than 8, which is being deprecated by Openshift. A future version of\nOpenshift will remove support for vCenter versions less than 8 and it is recommended to update your vCenter to a supported version.\n",
            }),
        ),
        alert(
            "VSphereOpenshiftVmsCBTMismatch",
            r#"min_over_time(vsphere_vm_cbt_checks{cbt=~"enabled"}[5m]) > 0 and on() min_over_time(vsphere_vm_cbt_checks{cbt=~"disabled"}[5m]) > 0"#,
            "warning",
            json!({
                "summary": "Periodic vSphere health check is failing due to some nodes not having ctkEnabled matching the other nodes.\nTo get details about the failure, please see the logs in the vsphere-problem-detector-operator pod in namespace openshift-cluster-storage-operator:\n' oc logs -l name=vsphere-problem-detector-operator -n openshift-cluster-storage-operator --tail=-1 | grep \"node_cbt\"'\n",
                "message": "Cluster node VMs are not configured the same for CBT feature.",
                "description": "Cluster node VMs are not configured the same for CBT feature.\n",
            }),
        ),
    ];
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": MONITORING_NAME,
            "namespace": OPERATOR_NAMESPACE,
            "labels": {"role": "alert-rules", STARTER_LABEL: LABEL_VALUE},
        },
        "spec": {"groups": [{"name": "vsphere-problem-detector.rules", "rules": rules}]},
    })
}

/// The CredentialsRequest OpenShift ships in its payload
/// (`manifests/03_credentials_request_vsphere_detector.yaml`): the cloud credential operator
/// gives the detector the vSphere credentials in Secret [`CREDENTIALS`] of the operator's
/// namespace. Part of the OpenShift install manifests; the operator does not write it.
pub fn build_credentials_request() -> Value {
    json!({
        "apiVersion": "cloudcredential.openshift.io/v1",
        "kind": "CredentialsRequest",
        "metadata": {
            "name": "openshift-vsphere-problem-detector",
            "namespace": "openshift-cloud-credential-operator",
            "annotations": {
                "include.release.openshift.io/self-managed-high-availability": "true",
                "include.release.openshift.io/single-node-developer": "true",
                "capability.openshift.io/name": "Storage+CloudCredential",
            },
        },
        "spec": {
            "secretRef": {"name": CREDENTIALS, "namespace": OPERATOR_NAMESPACE},
            "providerSpec": {
                "apiVersion": "cloudcredential.openshift.io/v1",
                "kind": "VSphereProviderSpec",
            },
        },
    })
}

/// Why the detector is not started on this vSphere cluster, for
/// `VSphereProblemDetectorStarterDegraded`'s message.
pub fn not_started(reason: &str) -> Vec<OperatorCondition> {
    vec![condition(
        format!("{STARTER}Degraded"),
        ConditionStatus::False,
        "AsExpected",
        format!("vsphere-problem-detector is not started: {reason}"),
    )]
}

/// The detector's conditions while it runs, as OpenShift names them: the starter's Degraded
/// (SyncError when its configuration could not be written), its static objects' Degraded
/// (SyncError naming what could not be written), and its Deployment's Progressing and
/// Degraded. `failures` are the detector's own failed writes of this pass, and the objects of
/// its names left alone because someone else made them.
pub fn conditions(
    deployment: Option<&Deployment>,
    failures: &[&WriteFailure],
) -> Vec<OperatorCondition> {
    let config_key = format!("{OPERATOR_NAMESPACE}/{OPERATOR_CONFIG}");
    let (config_failures, part_failures): (Vec<&WriteFailure>, Vec<&WriteFailure>) = failures
        .iter()
        .partition(|f| f.kind == "ConfigMap" && f.object == config_key);
    let (static_degraded, workload) = crate::failure::part_conditions(
        &format!("{STATIC}Degraded"),
        &format!("{DEPLOYMENT}Degraded"),
        crate::starter::deployment_conditions(
            &format!("{DEPLOYMENT}Progressing"),
            &format!("{DEPLOYMENT}Degraded"),
            NAME,
            deployment,
        ),
        &part_failures,
    );
    let starter = if config_failures.is_empty() {
        condition(
            format!("{STARTER}Degraded"),
            ConditionStatus::False,
            "AsExpected",
            "",
        )
    } else {
        let message: Vec<&str> = config_failures.iter().map(|f| f.message.as_str()).collect();
        condition(
            format!("{STARTER}Degraded"),
            ConditionStatus::True,
            "SyncError",
            message.join("\n"),
        )
    };
    let mut out = vec![starter, static_degraded];
    out.extend(workload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> DeploymentInputs {
        DeploymentInputs {
            image: "quay.io/openshift/origin-vsphere-problem-detector:4.22".into(),
            verbosity: 2,
            topology: Topology::HighlyAvailable,
            proxy: ProxyStatus::default(),
            hashes: InputHashes::default(),
        }
    }

    /// The Deployment as OpenShift renders 07_deployment.yaml, field by field.
    #[test]
    fn the_deployment_is_openshifts() {
        let deployment = build_deployment(&inputs());
        let value = serde_json::to_value(&deployment).unwrap();
        assert_eq!(value["metadata"]["name"], NAME);
        assert_eq!(value["metadata"]["namespace"], OPERATOR_NAMESPACE);
        assert_eq!(
            value["metadata"]["annotations"]["config.openshift.io/inject-proxy"],
            NAME
        );
        let spec = &value["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["selector"]["matchLabels"], json!({"name": NAME}));
        assert!(
            spec.get("strategy").is_none(),
            "the server's default, as `strategy: {{}}`"
        );
        let template = &spec["template"];
        assert_eq!(
            template["metadata"]["annotations"],
            json!({"target.workload.openshift.io/management": "{\"effect\": \"PreferredDuringScheduling\"}",
                   "openshift.io/required-scc": "restricted-v2"})
        );
        assert_eq!(
            template["metadata"]["labels"],
            json!({"name": NAME, "openshift.storage.network-policy.dns": "allow",
                   "openshift.storage.network-policy.api-server": "allow",
                   "openshift.storage.network-policy.operator-metrics": "allow",
                   "openshift.storage.network-policy.all-egress": "allow"})
        );
        let pod = &template["spec"];
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
        assert_eq!(pod["serviceAccountName"], NAME);
        assert_eq!(
            pod["nodeSelector"],
            json!({"node-role.kubernetes.io/master": ""})
        );
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "CriticalAddonsOnly", "operator": "Exists"},
                   {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}])
        );
        assert_eq!(
            pod["securityContext"],
            json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
        );
        assert_eq!(
            pod["volumes"],
            json!([
                {"name": SERVING_CERT, "secret": {"secretName": SERVING_CERT, "optional": true}},
                {"name": "trusted-ca-bundle", "configMap": {"name": "trusted-ca-bundle",
                    "items": [{"key": "ca-bundle.crt", "path": "tls-ca-bundle.pem"}]}},
                {"name": "operator-config", "configMap": {"name": OPERATOR_CONFIG}},
            ])
        );
        let container = &pod["containers"][0];
        assert_eq!(pod["containers"].as_array().unwrap().len(), 1);
        assert_eq!(
            container["args"],
            json!([
                "start",
                "--listen=0.0.0.0:8444",
                "--config=/var/run/configmaps/config/config.yaml",
                "--terminate-on-files=/var/run/configmaps/config/config.yaml",
                "--v=2"
            ])
        );
        assert_eq!(
            container["env"],
            json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
        );
        assert_eq!(
            container["image"],
            "quay.io/openshift/origin-vsphere-problem-detector:4.22"
        );
        assert_eq!(container["imagePullPolicy"], "IfNotPresent");
        assert_eq!(
            container["resources"],
            json!({"requests": {"memory": "100Mi", "cpu": "10m"}})
        );
        assert_eq!(
            container["ports"],
            json!([{"containerPort": 8444, "name": "vsphere-metrics"}])
        );
        assert_eq!(
            container["volumeMounts"],
            json!([
                {"mountPath": "/var/run/secrets/serving-cert", "name": SERVING_CERT},
                {"name": "trusted-ca-bundle", "mountPath": "/etc/pki/ca-trust/extracted/pem", "readOnly": true},
                {"mountPath": "/var/run/configmaps/config", "name": "operator-config"},
            ])
        );
        assert_eq!(
            container["terminationMessagePolicy"],
            "FallbackToLogsOnError"
        );
        assert_eq!(
            container["securityContext"],
            json!({"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
                   "capabilities": {"drop": ["ALL"]}})
        );
    }

    /// A changed cloud config or credentials Secret changes the pod template (the pods roll);
    /// the keys are library-go's.
    #[test]
    fn input_hashes_roll_the_pods() {
        let before = build_deployment(&DeploymentInputs {
            hashes: InputHashes {
                credentials: Some("a".into()),
                serving_cert: None,
                cloud_config: Some("c".into()),
            },
            ..inputs()
        });
        let template = |d: &Deployment| {
            d.spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .as_ref()
                .unwrap()
                .annotations
                .clone()
                .unwrap()
        };
        let annotations = template(&before);
        // Both keys are longer than 63 characters: shortened to a hash of the object, as
        // library-go does.
        let cloud_key = annotation_key(CLOUD_CONFIG_NAMESPACE, CLOUD_CONFIG, HashedKind::ConfigMap);
        assert_eq!(cloud_key.len(), 63);
        assert_eq!(annotations[&cloud_key], "c");
        let credentials_key = annotation_key(OPERATOR_NAMESPACE, CREDENTIALS, HashedKind::Secret);
        assert_eq!(credentials_key.len(), 63);
        assert_eq!(annotations[&credentials_key], "a");
        assert_eq!(
            before.metadata.annotations.as_ref().unwrap()[&credentials_key],
            "a",
            "on the Deployment too"
        );
        let serving_key = annotation_key(OPERATOR_NAMESPACE, SERVING_CERT, HashedKind::Secret);
        assert!(
            !annotations.contains_key(&serving_key),
            "no Secret, no hash"
        );

        let after = build_deployment(&DeploymentInputs {
            hashes: InputHashes {
                credentials: Some("b".into()),
                serving_cert: None,
                cloud_config: Some("c".into()),
            },
            ..inputs()
        });
        assert_ne!(template(&before), template(&after));
    }

    #[test]
    fn the_proxy_and_a_hosted_control_plane_are_followed() {
        let deployment = build_deployment(&DeploymentInputs {
            topology: Topology::External,
            proxy: ProxyStatus {
                https_proxy: Some("http://proxy:3128".into()),
                ..Default::default()
            },
            ..inputs()
        });
        let pod = deployment.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.node_selector, None);
        let env = pod.containers[0].env.clone().unwrap();
        assert!(
            env.iter()
                .any(|e| e.name == "HTTPS_PROXY" && e.value.as_deref() == Some("http://proxy:3128")),
            "{env:?}"
        );
    }

    #[test]
    fn the_static_objects_are_openshifts() {
        assert_eq!(build_role_binding().role_ref.name, ROLE);
        assert_eq!(
            build_cluster_role_binding().role_ref.name,
            build_cluster_role().metadata.name.unwrap()
        );
        let service = serde_json::to_value(build_service()).unwrap();
        assert_eq!(
            service["spec"],
            json!({"ports": [{"name": "vsphere-metrics", "port": 8444, "protocol": "TCP",
                              "targetPort": "vsphere-metrics"}],
                   "selector": {"name": NAME}, "sessionAffinity": "None", "type": "ClusterIP"})
        );
        assert_eq!(
            service["metadata"]["annotations"]["service.alpha.openshift.io/serving-cert-secret-name"],
            SERVING_CERT
        );
        let bundle = build_trusted_ca_bundle();
        assert_eq!(bundle.data, None, "the CA bundle is the network operator's");
        assert_eq!(
            bundle.metadata.labels.unwrap()["config.openshift.io/inject-trusted-cabundle"],
            "true"
        );
        // What OpenShift's tls.OperatorConfigYAML writes for the default (Intermediate) profile.
        assert_eq!(
            build_operator_config(None).unwrap().data.unwrap()["config.yaml"],
            "apiVersion: operator.openshift.io/v1alpha1\nkind: GenericOperatorConfig\nservingInfo:\n  cipherSuites:\n  - TLS_AES_128_GCM_SHA256\n  - TLS_AES_256_GCM_SHA384\n  - TLS_CHACHA20_POLY1305_SHA256\n  - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n  - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n  - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n  - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n  - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256\n  - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256\n  minTLSVersion: VersionTLS12\n"
        );
    }

    /// The admin's switch: absent or empty means enabled; anything but `alertsDisabled` is an
    /// error naming the ConfigMap and the fix.
    #[test]
    fn the_alerts_switch_is_read_strictly() {
        let config = |text: Option<&str>| -> ConfigMap {
            serde_json::from_value(json!({"metadata": {"name": USER_CONFIG},
                "data": text.map(|t| json!({"config.yaml": t})).unwrap_or(json!({}))}))
            .unwrap()
        };
        assert_eq!(alerts_disabled(None), Ok(false));
        assert_eq!(alerts_disabled(Some(&config(Some("")))), Ok(false));
        assert_eq!(
            alerts_disabled(Some(&config(Some("alertsDisabled: true")))),
            Ok(true)
        );
        assert_eq!(
            alerts_disabled(Some(&config(Some("alertsDisabled: false\n")))),
            Ok(false)
        );
        for bad in [Some("alertsDisabled: maybe"), Some("alerts: off"), None] {
            let error = alerts_disabled(Some(&config(bad))).unwrap_err();
            assert!(
                error.contains(
                    "ConfigMap openshift-cluster-storage-operator/vsphere-problem-detector"
                ) && error.contains("alertsDisabled"),
                "{bad:?}: {error}"
            );
        }
        let conditions = monitoring_conditions(Err("bad".into()), &[]);
        assert_eq!(conditions.len(), 1, "no Available without the switch read");
        assert_eq!(conditions[0].status, ConditionStatus::True);
        assert_eq!(conditions[0].message.as_deref(), Some("bad"));
        let conditions = monitoring_conditions(Ok(true), &[]);
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("vsphere-problem-detector alerts are disabled")
        );
        assert_eq!(conditions[1].status, ConditionStatus::False);
    }

    #[test]
    fn the_monitoring_objects_are_openshifts() {
        let monitor = build_service_monitor();
        let endpoint = &monitor["spec"]["endpoints"][0];
        assert_eq!(endpoint["port"], "vsphere-metrics");
        assert_eq!(
            endpoint["tlsConfig"]["serverName"],
            "vsphere-problem-detector-metrics.openshift-cluster-storage-operator.svc"
        );
        assert_eq!(
            monitor["spec"]["selector"]["matchLabels"]["app"],
            build_service().metadata.labels.unwrap()["app"]
        );
        let rule = build_prometheus_rule();
        let alerts: Vec<&str> = rule["spec"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["alert"].as_str().unwrap())
            .collect();
        assert_eq!(
            alerts,
            [
                "VSphereOpenshiftNodeHealthFail",
                "VSphereOpenshiftClusterHealthFail",
                "VSphereOpenshiftConnectionFailure",
                "CSIWithOldVSphereHWVersion",
                "VSphereOlderVersionPresent",
                "VSphereOlderVCenterPresent",
                "VSphereOpenshiftVmsCBTMismatch",
            ]
        );
        assert_eq!(
            rule["spec"]["groups"][0]["rules"][4]["expr"],
            "min_over_time(vsphere_esxi_version_total{api_version=~\"^7\\\\.0\\\\.[0-1].*|^6.*\"}[5m]) > 0\n"
        );
        assert!(
            rule["spec"]["groups"][0]["rules"][0]["annotations"]["summary"]
                .as_str()
                .unwrap()
                .contains("grep VSphere{{ $labels.check }}'")
        );
        let request = build_credentials_request();
        assert_eq!(
            request["spec"]["secretRef"],
            json!({"name": "vsphere-cloud-credentials", "namespace": OPERATOR_NAMESPACE})
        );
    }

    #[test]
    fn failures_show_in_the_part_they_belong_to() {
        let failure = |kind: &str, name: &str| WriteFailure {
            kind: kind.into(),
            object: format!("{OPERATOR_NAMESPACE}/{name}"),
            message: format!("applying {kind} {name}: refused (403)"),
            not_ours: false,
        };
        let find = |conditions: &[OperatorCondition], type_: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == type_)
                .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
                .unwrap()
        };
        let all = [
            "VSphereProblemDetectorStarterDegraded",
            "VSphereProblemDetectorStarterStaticControllerDegraded",
            "VSphereProblemDetectorDeploymentControllerDegraded",
        ];
        let clean = conditions(None, &[]);
        for type_ in all {
            assert_eq!(find(&clean, type_).0, ConditionStatus::False, "{type_}");
        }
        assert!(
            clean.iter().all(|c| !c.type_.ends_with("Available")),
            "no Available, as OpenShift's"
        );
        let cases = [
            (failure("ConfigMap", OPERATOR_CONFIG), all[0]),
            (failure("Service", SERVICE), all[1]),
            (failure("ConfigMap", TRUSTED_CA_BUNDLE), all[1]),
            (failure("Deployment", NAME), all[2]),
        ];
        for (failed, degraded) in cases {
            let conditions = conditions(None, &[&failed]);
            for type_ in all {
                let expected = if type_ == degraded {
                    (ConditionStatus::True, "SyncError".to_owned())
                } else {
                    (ConditionStatus::False, "AsExpected".to_owned())
                };
                assert_eq!(find(&conditions, type_), expected, "{type_} for {failed:?}");
            }
        }
    }
}
