//! The Deployment of one of our operator processes in the install manifests
//! (`deploy/<flavour>/*.yaml`): one replica replaced with `Recreate` (leader election makes a
//! second one idle anyway), the admin port with `/healthz` and `/readyz` probes, `POD_NAME` and
//! `POD_NAMESPACE` from the downward API, small requests, and the restricted security settings
//! (non-root, no privilege escalation, read-only root, no capabilities, RuntimeDefault seccomp).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SeccompProfile, SecretVolumeSource, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The port of `/healthz`, `/readyz` and (unless served over HTTPS) `/metrics`.
pub const ADMIN_PORT: i32 = 8080;

/// What differs between our operator Deployments.
#[derive(Clone, Debug, Default)]
pub struct OperatorDeployment {
    /// The Deployment's metadata (name, namespace, labels).
    pub metadata: ObjectMeta,
    /// The pod label `name` (and selector) value; also the ServiceAccount's name.
    pub name: String,
    /// The container's name.
    pub container: String,
    /// The image.
    pub image: String,
    /// The subcommand and its flags.
    pub args: Vec<String>,
    /// Environment variables besides `POD_NAME` and `POD_NAMESPACE`.
    pub env: Vec<EnvVar>,
    /// A priority class.
    pub priority_class: Option<String>,
    /// Pod labels besides `name` (e.g. the opt-in labels of NetworkPolicies).
    pub pod_labels: BTreeMap<String, String>,
    /// Pod annotations (e.g. OpenShift's required SCC and workload partitioning).
    pub pod_annotations: BTreeMap<String, String>,
    /// A node selector.
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// `/metrics` over HTTPS on [`METRICS_PORT`] ([`crate::secure_metrics`]) with the serving
    /// certificate of this Secret (service-ca's, mounted optional at
    /// [`crate::secure_metrics::DEFAULT_CERT_DIR`]), instead of over HTTP on the admin port.
    pub serving_cert_secret: Option<String>,
}

/// The port of `/metrics` over HTTPS, as OpenShift's operators serve them.
pub const METRICS_PORT: i32 = 8443;

fn from_field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod security of this project's own workloads (the operators, the volume data source
/// validator): non-root, the runtime's default seccomp profile (Pod Security `restricted`).
pub fn restricted_pod() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The container security of this project's own workloads: no privilege escalation, no
/// capability, a read-only root filesystem.
pub fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(ADMIN_PORT),
            ..Default::default()
        }),
        period_seconds: Some(10),
        ..Default::default()
    }
}

/// The Deployment.
pub fn operator_deployment(spec: OperatorDeployment) -> Deployment {
    let labels: BTreeMap<String, String> = [("name".to_owned(), spec.name.clone())].into();
    let mut env = spec.env;
    env.push(from_field("POD_NAME", "metadata.name"));
    env.push(from_field("POD_NAMESPACE", "metadata.namespace"));
    let mut args = spec.args;
    let mut ports = vec![ContainerPort {
        name: Some("admin".into()),
        container_port: ADMIN_PORT,
        ..Default::default()
    }];
    let (mut volumes, mut mounts) = (Vec::new(), Vec::new());
    if let Some(secret) = spec.serving_cert_secret {
        args.push(format!("--metrics-address=0.0.0.0:{METRICS_PORT}"));
        ports.push(ContainerPort {
            name: Some("metrics".into()),
            container_port: METRICS_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        });
        // Optional: where no service-ca writes it, the process serves a self-signed
        // certificate until it appears.
        volumes.push(Volume {
            name: secret.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                optional: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: secret,
            mount_path: crate::secure_metrics::DEFAULT_CERT_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    let requests: BTreeMap<String, Quantity> = [
        ("cpu".to_owned(), Quantity("10m".into())),
        ("memory".to_owned(), Quantity("30Mi".into())),
    ]
    .into();
    Deployment {
        metadata: spec.metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..Default::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.into_iter().chain(spec.pod_labels).collect()),
                    annotations: (!spec.pod_annotations.is_empty()).then_some(spec.pod_annotations),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(spec.name),
                    priority_class_name: spec.priority_class,
                    node_selector: spec.node_selector,
                    tolerations: (!spec.tolerations.is_empty()).then_some(spec.tolerations),
                    security_context: Some(restricted_pod()),
                    containers: vec![Container {
                        name: spec.container,
                        image: Some(spec.image),
                        // Pulled only when the node lacks it, whatever the tag: the image
                        // may have been imported on the node with no registry to pull from.
                        image_pull_policy: Some("IfNotPresent".into()),
                        args: Some(args),
                        env: Some(env),
                        ports: Some(ports),
                        volume_mounts: (!mounts.is_empty()).then_some(mounts),
                        liveness_probe: Some(probe("/healthz")),
                        readiness_probe: Some(probe("/readyz")),
                        resources: Some(ResourceRequirements {
                            requests: Some(requests),
                            ..Default::default()
                        }),
                        security_context: Some(restricted_container()),
                        termination_message_policy: Some("FallbackToLogsOnError".into()),
                        ..Default::default()
                    }],
                    volumes: (!volumes.is_empty()).then_some(volumes),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}
