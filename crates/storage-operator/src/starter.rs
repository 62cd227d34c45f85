//! What the cluster storage operator installs to start one driver operator: its namespace,
//! ServiceAccount, RBAC, Deployment (this same binary running `driver <name>`), and the
//! ClusterCSIDriver it then manages. Pure builders; the starter controller applies them.
//!
//! The driver operator's RBAC is derived, not hand-written: it may write exactly the kinds its
//! driver renders; it holds every permission of the roles it creates for its operands (the API
//! server requires that, short of the cluster-admin-like `escalate` verb); and for the shared
//! sidecar ClusterRoles this operator installs, it may only `bind` those roles by name.
//! OpenShift binds its storage operator to cluster-admin; ours needs none, and does not hold
//! what these roles grant either: it may `escalate` and `bind` them, by their names only
//! (see [`crate::manifests`]), so these names are part of its RBAC.

use std::collections::{BTreeMap, BTreeSet};

use api::config_v1::{ProxyStatus, TLSSecurityProfile};
use api::operator_v1::{
    ClusterCSIDriver, ClusterCSIDriverSpec, ConditionStatus, LogLevel, ManagementState,
    OperatorCondition, OperatorSpec,
};
use csi_kit::{DriverDef, Inputs, Operand, OptionalCrds, ServingTls, Topology};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource, Namespace,
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

use opkit::rbac::{MANAGE, READ, dedupe, rule};

use crate::network_policy;
use crate::registry::{DRIVER_NAMESPACE, DriverEntry, SIDECAR_IMAGE_ENVS};

/// Label on everything the starter creates, naming the driver.
pub const STARTER_LABEL: &str = "storage.openshift.io/driver-operator";
/// The env var naming this operator's own image, which driver operators run too.
pub const OPERATOR_IMAGE_ENV: &str = "OPERATOR_IMAGE";

/// What the starter needs to know besides the driver.
#[derive(Clone, Debug)]
pub struct StarterInputs {
    /// Cluster layout (decides where the driver operator runs).
    pub topology: Topology,
    /// `Storage.spec.logLevel`, passed to the driver operator and its first ClusterCSIDriver.
    pub log_level: LogLevel,
    /// The cluster-wide proxy, passed to the driver operator.
    pub proxy: ProxyStatus,
    /// The cluster storage operator's own environment (image env vars are passed through).
    pub env: BTreeMap<String, String>,
    /// The image of this binary.
    pub operator_image: String,
    /// `APIServer/cluster` `spec.tlsSecurityProfile` (none on plain Kubernetes: Intermediate),
    /// written into each driver operator's config ConfigMap.
    pub tls_profile: Option<TLSSecurityProfile>,
}

/// The namespace of driver operators and their operands, labelled for privileged CSI pods and
/// for cluster monitoring.
pub fn build_namespace() -> Namespace {
    namespace(
        DRIVER_NAMESPACE,
        &[
            ("openshift.io/node-selector", ""),
            // Workload partitioning: its pods may run on the CPUs reserved for management.
            ("workload.openshift.io/allowed", "management"),
        ],
    )
}

/// The namespace of a driver whose operands live apart from its operator (OpenShift's Manila:
/// `openshift-manila-csi-driver`), as OpenShift's static asset makes it: privileged CSI pods,
/// no default node selector, management workloads allowed. It is also labelled
/// `openshift.io/cluster-monitoring`, so that the platform Prometheus scrapes the driver's
/// ServiceMonitor there, and opted out of OpenShift's pod security label sync, which would
/// otherwise lower the privileged labels.
pub fn build_operand_namespace(name: &str) -> Namespace {
    namespace(
        name,
        &[
            ("openshift.io/node-selector", ""),
            ("workload.openshift.io/allowed", "management"),
        ],
    )
}

/// `def`'s operand namespace, when it is not [`DRIVER_NAMESPACE`] where its operator runs.
pub fn separate_operand_namespace(def: &DriverDef) -> Option<&str> {
    (def.namespace != DRIVER_NAMESPACE).then_some(def.namespace.as_str())
}

/// The namespaces the driver operator of `def` gets a Role in: its operands' first, then its
/// own when that is another one.
fn role_namespaces(def: &DriverDef) -> Vec<&str> {
    std::iter::once(def.namespace.as_str())
        .chain(separate_operand_namespace(def).map(|_| DRIVER_NAMESPACE))
        .collect()
}

fn namespace(name: &str, annotations: &[(&str, &str)]) -> Namespace {
    let labels = [
        ("pod-security.kubernetes.io/enforce", "privileged"),
        ("pod-security.kubernetes.io/audit", "privileged"),
        ("pod-security.kubernetes.io/warn", "privileged"),
        ("openshift.io/cluster-monitoring", "true"),
        ("security.openshift.io/scc.podSecurityLabelSync", "false"),
    ];
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(map(&labels)),
            annotations: Some(map(annotations)),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub(crate) fn meta(entry: &DriverEntry, name: String, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: namespace.map(Into::into),
        labels: Some([(STARTER_LABEL.to_owned(), entry.short_name.to_owned())].into()),
        ..Default::default()
    }
}

/// The driver operator's ServiceAccount.
pub fn build_service_account(entry: &DriverEntry) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(
            entry,
            entry.operator_deployment.into(),
            Some(DRIVER_NAMESPACE),
        ),
        ..Default::default()
    }
}

/// The port on which a driver operator serves `/metrics` over HTTPS, as OpenShift's.
pub const OPERATOR_METRICS_PORT: i32 = 8443;
/// The name of that port, in the pod and (`https`) in the Service, as OpenShift's.
pub const OPERATOR_METRICS_PORT_NAME: &str = "metrics";
/// The volume of the driver operator's serving certificate, as OpenShift's.
pub const SERVING_CERT_VOLUME: &str = "serving-cert";
/// The annotation by which OpenShift's service-ca writes a Service's serving certificate into
/// the Secret it names.
pub const SERVING_CERT_ANNOTATION: &str = "service.beta.openshift.io/serving-cert-secret-name";

/// The driver operator's metrics Service (`<operator>-metrics`).
pub fn metrics_service_name(entry: &DriverEntry) -> String {
    format!("{}-metrics", entry.operator_deployment)
}

/// The Secret of the driver operator's serving certificate (`<operator>-serving-cert`), which
/// service-ca writes on OpenShift.
pub fn serving_cert_secret_name(entry: &DriverEntry) -> String {
    format!("{}-serving-cert", entry.operator_deployment)
}

/// The driver operator's metrics Service: HTTPS on 443 to its pod's 8443, asking service-ca
/// for its serving certificate, as OpenShift's. Scrapers present a bearer token or a client
/// certificate of the API server's client CA, and need `get` on the URL `/metrics`.
pub fn build_metrics_service(entry: &DriverEntry) -> Service {
    let mut metadata = meta(entry, metrics_service_name(entry), Some(DRIVER_NAMESPACE));
    metadata
        .labels
        .get_or_insert_default()
        .insert("app".to_owned(), entry.operator_deployment.to_owned());
    metadata.annotations = Some(
        [(
            SERVING_CERT_ANNOTATION.to_owned(),
            serving_cert_secret_name(entry),
        )]
        .into(),
    );
    Service {
        metadata,
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some("https".to_owned()),
                port: 443,
                protocol: Some("TCP".to_owned()),
                target_port: Some(IntOrString::Int(OPERATOR_METRICS_PORT)),
                ..Default::default()
            }]),
            selector: Some([("name".to_owned(), entry.operator_deployment.to_owned())].into()),
            session_affinity: Some("None".to_owned()),
            type_: Some("ClusterIP".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The API group and resource of a kind the driver operator renders, and whether it lives in
/// the operand namespace `namespace`.
pub(crate) fn resource_of(operand: &Operand, namespace: &str) -> Option<(String, String, bool)> {
    let value = operand.to_value();
    let api_version = value["apiVersion"].as_str()?;
    let group = api_version
        .rsplit_once('/')
        .map_or("", |(g, _)| g)
        .to_owned();
    let kind = value["kind"].as_str()?;
    // Namespaced operands of the driver's operand namespace go in its Role there; cluster-scoped
    // ones, and the few namespaced ones living elsewhere (the CredentialsRequest, in
    // cloud-credential-operator's namespace, as on OpenShift), in its ClusterRole.
    let namespaced = value["metadata"]["namespace"].as_str() == Some(namespace);
    let resource = match kind {
        "ServiceAccount" => "serviceaccounts",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "ConfigMap" => "configmaps",
        "CSIDriver" => "csidrivers",
        "Service" => "services",
        "PodDisruptionBudget" => "poddisruptionbudgets",
        "NetworkPolicy" => "networkpolicies",
        "Deployment" => "deployments",
        "DaemonSet" => "daemonsets",
        "StorageClass" => "storageclasses",
        "VolumeSnapshotClass" => "volumesnapshotclasses",
        "ServiceMonitor" => "servicemonitors",
        "CredentialsRequest" => "credentialsrequests",
        other => return Some((group, format!("{}s", other.to_lowercase()), namespaced)),
    };
    Some((group, resource.to_owned(), namespaced))
}

/// Everything the driver of `def` may render: the maximal operand set (every optional CRD
/// present), so the operator is allowed whatever a later cluster state asks of it.
fn maximal_operands(
    def: &DriverDef,
    topology: Topology,
    env: &BTreeMap<String, String>,
) -> Vec<Operand> {
    let mut inputs = Inputs::offline(def, topology, env);
    inputs.crds = OptionalCrds::all();
    inputs.trusted_ca_bundle = true;
    csi_kit::render_operands(def, &inputs)
}

/// The driver operator's ClusterRole and its Roles: first the one in its operand namespace
/// (`def.namespace`), for the operands it writes and reads there; then, when its operands live
/// apart from it (see [`separate_operand_namespace`]), one in [`DRIVER_NAMESPACE`] where it
/// runs, for its leader election Lease. With one namespace for both, one Role holds both.
pub fn build_rbac(
    entry: &DriverEntry,
    def: &DriverDef,
    inputs: &StarterInputs,
) -> (ClusterRole, Vec<Role>) {
    let operands = maximal_operands(def, inputs.topology, &inputs.env);

    // What it reads and reports on, cluster-wide.
    let mut cluster_rules = vec![
        rule(
            &["operator.openshift.io"],
            &["clustercsidrivers"],
            &["get", "list", "watch", "update", "patch"],
        ),
        rule(
            &["operator.openshift.io"],
            &["clustercsidrivers/status", "clustercsidrivers/finalizers"],
            &["get", "update", "patch"],
        ),
        rule(
            &["config.openshift.io"],
            &["infrastructures", "proxies", "featuregates", "apiservers"],
            READ,
        ),
        // cloud-credential-operator's mode decides whether a CredentialsRequest is applied.
        rule(&["operator.openshift.io"], &["cloudcredentials"], READ),
        rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            READ,
        ),
        // Nodes on plain Kubernetes; PVs, PVCs (metadata) and CSINodes for the CSI migration
        // audit of drivers that replace an in-tree plugin; PVCs for every driver's report of
        // the claims stuck Pending on it.
        rule(
            &[""],
            &["nodes", "persistentvolumes", "persistentvolumeclaims"],
            READ,
        ),
        rule(&["storage.k8s.io"], &["csinodes"], READ),
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
    ];
    // Who may read its /metrics over HTTPS: the API server reviews the caller's token and
    // access (as `system:auth-delegator` grants), and publishes its client CA.
    cluster_rules.extend(opkit::secure_metrics::review_rules());
    // The ConfigMaps it derives operand ConfigMaps from (the cloud config), by name.
    let sources: BTreeSet<String> = driver_operator::observe::source_ids(def)
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    if !sources.is_empty() {
        cluster_rules.push(PolicyRule {
            resource_names: Some(sources.into_iter().collect()),
            ..rule(&[""], &["configmaps"], READ)
        });
    }
    // What it writes: exactly the kinds it renders.
    let mut cluster_written = BTreeSet::new();
    let mut namespaced_written = BTreeSet::new();
    for (group, resource, namespaced) in operands
        .iter()
        .filter_map(|operand| resource_of(operand, &def.namespace))
    {
        if namespaced {
            namespaced_written.insert((group, resource));
        } else {
            cluster_written.insert((group, resource));
        }
    }
    for (group, resource) in &cluster_written {
        cluster_rules.push(rule(&[group], &[resource], MANAGE));
    }
    // What the kit watches for every driver, rendered or not (SMB has no StorageClass but
    // watches them for the default-class rules): read, where writing does not cover it.
    for (group, resource, _) in driver_operator::observe::ALWAYS_WATCHED
        .iter()
        .filter(|(_, _, namespaced)| !namespaced)
    {
        if !opkit::rbac::allows(&cluster_rules, group, resource, "watch") {
            cluster_rules.push(rule(&[group], &[resource], READ));
        }
    }
    // The roles it creates for its operands, it must hold itself.
    let mut rendered_roles = BTreeSet::new();
    for operand in &operands {
        if let Operand::ClusterRole(role) = operand {
            cluster_rules.extend(role.rules.iter().flatten().cloned());
            rendered_roles.extend(role.metadata.name.clone());
        }
    }
    // Roles it binds but does not create (the shared sidecar roles): `bind`, by name only.
    let bound: BTreeSet<String> = operands
        .iter()
        .filter_map(|operand| match operand {
            Operand::ClusterRoleBinding(b) => Some(&b.role_ref),
            Operand::RoleBinding(b) => Some(&b.role_ref),
            _ => None,
        })
        .filter(|role_ref| {
            role_ref.kind == "ClusterRole" && !rendered_roles.contains(&role_ref.name)
        })
        .map(|role_ref| role_ref.name.clone())
        .collect();
    if !bound.is_empty() {
        cluster_rules.push(PolicyRule {
            resource_names: Some(bound.into_iter().collect()),
            ..rule(&["rbac.authorization.k8s.io"], &["clusterroles"], &["bind"])
        });
    }
    // ConfigMaps it copies from other namespaces (e.g. a cloud CA bundle): read, by name.
    let copied: BTreeSet<String> = def
        .copied_config_maps
        .iter()
        .map(|c| c.name.clone())
        .collect();
    if !copied.is_empty() {
        cluster_rules.push(PolicyRule {
            resource_names: Some(copied.into_iter().collect()),
            ..rule(&[""], &["configmaps"], READ)
        });
    }
    // What a driver's own code reads besides its sources (Manila: the cloud config's CA), and
    // writes (AWS EBS's volume tags controller, with a hosted control plane only).
    cluster_rules.extend(drivers::extra_cluster_rules(
        def,
        inputs.topology == Topology::External,
    ));
    dedupe(&mut cluster_rules);

    // Where it runs: its leader election Lease (see `cli`'s `driver`, which holds it in the
    // pod's namespace) and, as OpenShift's operators, its own pods and secrets.
    let own_rules = vec![
        rule(&[""], &["secrets", "pods"], READ),
        rule(&["coordination.k8s.io"], &["leases"], MANAGE),
    ];
    let separate = separate_operand_namespace(def).is_some();
    let mut namespace_rules = if separate {
        vec![rule(&[""], &["secrets", "pods"], READ)]
    } else {
        own_rules.clone()
    };
    for (group, resource) in &namespaced_written {
        if group.is_empty() && resource == "secrets" {
            continue; // by name, below
        }
        namespace_rules.push(rule(&[group], &[resource], MANAGE));
    }
    // Its derived Secrets hold credentials: it writes those by name, and no other Secret.
    let derived_secrets: Vec<String> = def
        .config_maps
        .iter()
        .filter(|d| d.secret)
        .map(|d| d.name.clone())
        .collect();
    if !derived_secrets.is_empty() {
        namespace_rules.push(rule(&[""], &["secrets"], &["create"]));
        namespace_rules.push(PolicyRule {
            resource_names: Some(derived_secrets),
            ..rule(&[""], &["secrets"], &["get", "update", "patch", "delete"])
        });
    }
    for (group, resource, _) in driver_operator::observe::ALWAYS_WATCHED
        .iter()
        .filter(|(_, _, namespaced)| *namespaced)
    {
        if !opkit::rbac::allows(&namespace_rules, group, resource, "watch") {
            namespace_rules.push(rule(&[group], &[resource], READ));
        }
    }
    for operand in &operands {
        if let Operand::Role(role) = operand {
            namespace_rules.extend(role.rules.iter().flatten().cloned());
        }
    }
    // What a driver's own code writes besides its operands (Manila: csi-manila-secrets).
    namespace_rules.extend(drivers::extra_namespace_rules(def));
    dedupe(&mut namespace_rules);

    let name = entry.operator_deployment;
    let mut roles = vec![Role {
        metadata: meta(entry, format!("{name}-role"), Some(&def.namespace)),
        rules: Some(namespace_rules),
    }];
    if separate {
        let mut rules = own_rules;
        rules.push(rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ));
        roles.push(Role {
            metadata: meta(entry, format!("{name}-role"), Some(DRIVER_NAMESPACE)),
            rules: Some(rules),
        });
    }
    (
        ClusterRole {
            metadata: meta(entry, format!("{name}-clusterrole"), None),
            rules: Some(cluster_rules),
            ..Default::default()
        },
        roles,
    )
}

/// The bindings of the driver operator's ClusterRole and Roles (as [`build_rbac`] makes them,
/// in the same order) to its ServiceAccount, which is in [`DRIVER_NAMESPACE`].
pub fn build_bindings(
    entry: &DriverEntry,
    def: &DriverDef,
) -> (ClusterRoleBinding, Vec<RoleBinding>) {
    let name = entry.operator_deployment;
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(DRIVER_NAMESPACE.into()),
        ..Default::default()
    };
    let role_ref = |kind: &str, role: String| RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: role,
    };
    (
        ClusterRoleBinding {
            metadata: meta(entry, format!("{name}-clusterrolebinding"), None),
            role_ref: role_ref("ClusterRole", format!("{name}-clusterrole")),
            subjects: Some(vec![subject.clone()]),
        },
        role_namespaces(def)
            .into_iter()
            .map(|namespace| RoleBinding {
                metadata: meta(entry, format!("{name}-rolebinding"), Some(namespace)),
                role_ref: role_ref("Role", format!("{name}-role")),
                subjects: Some(vec![subject.clone()]),
            })
            .collect(),
    )
}

/// The tracing filter for a driver operator at `level`.
fn log_filter(level: &LogLevel) -> &'static str {
    match level.klog_verbosity() {
        0..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// An env var from the pod's own metadata (the downward API).
fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The key of the driver operator's config in its ConfigMap.
pub const OPERATOR_CONFIG_KEY: &str = "config.yaml";
/// The name of the config ConfigMap's volume in the driver operator's pod, as OpenShift's.
pub const OPERATOR_CONFIG_VOLUME: &str = "operator-config";
/// Where the driver operator's pod mounts its config ConfigMap, as OpenShift's.
pub const OPERATOR_CONFIG_DIR: &str = "/var/run/configmaps/config";

/// The name of a driver operator's config ConfigMap (`<operator Deployment>-config`, e.g.
/// `aws-ebs-csi-driver-operator-config`), when its driver has one (OpenShift's platform
/// drivers; not the optional ones OLM once installed).
pub fn operator_config_name(entry: &DriverEntry) -> Option<String> {
    entry
        .operator_config
        .then(|| format!("{}-config", entry.operator_deployment))
}

/// The `config.yaml` of a driver operator's config ConfigMap: a `GenericOperatorConfig` with
/// only the serving TLS settings, the minimum version and the IANA cipher suite names, laid
/// out as OpenShift's operator writes it (keys sorted, list items not indented), so that an
/// unchanged profile leaves OpenShift's ConfigMap byte for byte as it was.
pub fn operator_config_yaml(tls: &ServingTls) -> String {
    let mut yaml = String::from(
        "apiVersion: operator.openshift.io/v1alpha1\nkind: GenericOperatorConfig\nservingInfo:\n",
    );
    if tls.cipher_suites.is_empty() {
        yaml.push_str("  cipherSuites: []\n");
    } else {
        yaml.push_str("  cipherSuites:\n");
        for suite in &tls.cipher_suites {
            yaml.push_str(&format!("  - {suite}\n"));
        }
    }
    yaml.push_str(&format!(
        "  minTLSVersion: {}\n",
        tls.min_version.as_deref().unwrap_or("VersionTLS12")
    ));
    yaml
}

/// Serving TLS settings as the HTTPS `/metrics` server takes them
/// ([`opkit::secure_metrics`]): the driver operator's from its config file, the cluster
/// storage operator's from `APIServer/cluster`.
pub fn metrics_profile(tls: ServingTls) -> opkit::secure_metrics::TlsProfile {
    opkit::secure_metrics::TlsProfile {
        min_version: tls.min_version,
        cipher_suites: tls.cipher_suites,
    }
}

/// Reads a driver operator's `config.yaml` (as [`operator_config_yaml`] writes it, or as
/// OpenShift's operator does): its serving TLS settings.
pub fn parse_operator_config(text: &str) -> Result<ServingTls, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Config {
        kind: Option<String>,
        #[serde(default)]
        serving_info: ServingInfo,
    }
    #[derive(Default, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ServingInfo {
        #[serde(rename = "minTLSVersion")]
        min_tls_version: Option<String>,
        #[serde(default)]
        cipher_suites: Vec<String>,
    }
    let config: Config = api::yaml::from_str(text).map_err(|e| e.to_string())?;
    if config.kind.as_deref() != Some("GenericOperatorConfig") {
        return Err(format!(
            "kind is {:?}, not GenericOperatorConfig",
            config.kind.unwrap_or_default()
        ));
    }
    Ok(ServingTls {
        min_version: config.serving_info.min_tls_version,
        cipher_suites: config.serving_info.cipher_suites,
    })
}

/// The driver operator's config ConfigMap for the cluster's TLS profile, when its driver has
/// one. The error (an invalid Custom profile) names the field and the fix; the ConfigMap is
/// then left as it is.
pub fn build_operator_config(
    entry: &DriverEntry,
    profile: Option<&TLSSecurityProfile>,
) -> Option<Result<ConfigMap, String>> {
    build_operator_config_of(entry, profile, csi_kit::tls::CLUSTER_PROFILE_FIELD)
}

/// [`build_operator_config`] for a profile read from `field` (as its errors name it).
pub fn build_operator_config_of(
    entry: &DriverEntry,
    profile: Option<&TLSSecurityProfile>,
    field: &str,
) -> Option<Result<ConfigMap, String>> {
    let name = operator_config_name(entry)?;
    Some(
        csi_kit::tls::serving_tls_of(profile, field).map(|tls| ConfigMap {
            metadata: meta(entry, name, Some(DRIVER_NAMESPACE)),
            data: Some([(OPERATOR_CONFIG_KEY.to_owned(), operator_config_yaml(&tls))].into()),
            ..Default::default()
        }),
    )
}

/// The pod annotations of OpenShift's operators: the SCC the pod must be admitted under
/// (`openshift.io/required-scc`, so that a custom SCC cannot capture it) and workload
/// partitioning (management pods may run on the reserved CPUs).
pub fn openshift_pod_annotations(scc: &str) -> BTreeMap<String, String> {
    [
        ("openshift.io/required-scc", scc),
        (
            "target.workload.openshift.io/management",
            r#"{"effect": "PreferredDuringScheduling"}"#,
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The driver operator's Deployment: this binary running `driver <short name>`, one replica,
/// on control-plane nodes when the cluster has them, with the images, log level and proxy
/// passed through its environment.
pub fn build_deployment(entry: &DriverEntry, inputs: &StarterInputs) -> Deployment {
    let labels: BTreeMap<String, String> =
        [("name".to_owned(), entry.operator_deployment.to_owned())].into();
    let mut env_vars = vec![
        field_env("POD_NAME", "metadata.name"),
        // Where it holds its leader election Lease: the namespace it runs in, where its Role
        // allows it (the driver's operands may live in another one).
        field_env("POD_NAMESPACE", "metadata.namespace"),
        env("LOG_LEVEL", log_filter(&inputs.log_level)),
    ];
    // The driver's image under the name the driver operator reads, then the shared sidecars.
    // Unset ones are left out: the driver operator falls back to upstream images.
    let passed = std::iter::once((entry.driver_image_env, "DRIVER_IMAGE"))
        .chain(entry.extra_image_envs.iter().copied())
        .chain(SIDECAR_IMAGE_ENVS.iter().map(|e| (*e, *e)));
    for (from, to) in passed {
        if let Some(value) = inputs.env.get(from).filter(|v| !v.is_empty()) {
            env_vars.push(env(to, value));
        }
    }
    env_vars.extend(
        inputs
            .proxy
            .env()
            .into_iter()
            .map(|(name, value)| env(name, value)),
    );

    // The config ConfigMap (the cluster's TLS profile), mounted and passed as OpenShift's
    // driver operators get it.
    let config = operator_config_name(entry);
    let mut args = vec!["driver".to_owned(), entry.short_name.to_owned()];
    if config.is_some() {
        args.push(format!(
            "--config={OPERATOR_CONFIG_DIR}/{OPERATOR_CONFIG_KEY}"
        ));
    }
    // `/metrics` over HTTPS with service-ca's certificate (opkit's default directory), to
    // whom the API server allows; the admin port keeps the health endpoints.
    args.push(format!("--metrics-address=0.0.0.0:{OPERATOR_METRICS_PORT}"));
    let control_plane = inputs.topology.control_plane_node_label();
    let requests: BTreeMap<String, Quantity> = [
        ("cpu".to_owned(), Quantity("10m".into())),
        ("memory".to_owned(), Quantity("50Mi".into())),
    ]
    .into();
    let container = Container {
        name: "operator".into(),
        image: Some(inputs.operator_image.clone()),
        // As OpenShift's operands: a node pulls an image it lacks, never one it has.
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(args),
        env: Some(env_vars),
        // Where it serves /healthz and /readyz (the process's default address), and /metrics
        // over HTTPS.
        ports: Some(vec![
            ContainerPort {
                name: Some("admin".into()),
                container_port: opkit::install::ADMIN_PORT,
                ..Default::default()
            },
            ContainerPort {
                name: Some(OPERATOR_METRICS_PORT_NAME.into()),
                container_port: OPERATOR_METRICS_PORT,
                protocol: Some("TCP".into()),
                ..Default::default()
            },
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(requests),
            ..Default::default()
        }),
        security_context: Some(opkit::install::restricted_container()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(
            std::iter::once(VolumeMount {
                name: SERVING_CERT_VOLUME.into(),
                mount_path: opkit::secure_metrics::DEFAULT_CERT_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            })
            .chain(config.as_ref().map(|_| VolumeMount {
                name: OPERATOR_CONFIG_VOLUME.into(),
                mount_path: OPERATOR_CONFIG_DIR.into(),
                ..Default::default()
            }))
            .collect(),
        ),
        ..Default::default()
    };
    // OpenShift's NetworkPolicies of the namespace let the pod reach the API server and DNS,
    // anywhere when the driver operator talks to its cloud, and take metrics ingress.
    let mut template_labels = labels.clone();
    let mut opt_in = vec![
        network_policy::DNS,
        network_policy::API_SERVER,
        network_policy::OPERATOR_METRICS_RANGE,
    ];
    if entry.operator_all_egress {
        opt_in.push(network_policy::ALL_EGRESS);
    }
    template_labels.extend(network_policy::labels(&opt_in));
    // As OpenShift's driver operators: CriticalAddonsOnly, then the control-plane taint.
    let tolerations = control_plane.map(|label| {
        vec![
            Toleration {
                key: Some("CriticalAddonsOnly".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            },
            Toleration {
                key: Some(label.into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            },
        ]
    });
    Deployment {
        metadata: meta(
            entry,
            entry.operator_deployment.into(),
            Some(DRIVER_NAMESPACE),
        ),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels),
                ..Default::default()
            },
            // One replica that holds a lease: stop the old pod before starting the new one.
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..Default::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(template_labels),
                    annotations: inputs
                        .topology
                        .is_openshift()
                        .then(|| openshift_pod_annotations("restricted-v2")),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(entry.operator_deployment.into()),
                    priority_class_name: inputs
                        .topology
                        .is_openshift()
                        .then(|| "system-cluster-critical".into()),
                    node_selector: control_plane
                        .map(|label| [(label.to_owned(), String::new())].into()),
                    tolerations,
                    security_context: Some(opkit::install::restricted_pod()),
                    containers: vec![container],
                    volumes: Some(
                        // Optional: where no service-ca writes it (plain Kubernetes), the
                        // pod starts and serves a self-signed certificate until it appears.
                        std::iter::once(Volume {
                            name: SERVING_CERT_VOLUME.into(),
                            secret: Some(SecretVolumeSource {
                                secret_name: Some(serving_cert_secret_name(entry)),
                                default_mode: Some(0o644),
                                optional: Some(true),
                                ..Default::default()
                            }),
                            ..Default::default()
                        })
                        .chain(config.map(|name| Volume {
                            name: OPERATOR_CONFIG_VOLUME.into(),
                            config_map: Some(ConfigMapVolumeSource {
                                name,
                                ..Default::default()
                            }),
                            ..Default::default()
                        }))
                        .collect(),
                    ),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `<Prefix>Progressing` and `<Prefix>CSIDriverOperatorDeploymentDegraded` from the driver
/// operator Deployment as observed: the names OpenShift's operator really writes (its
/// Deployment controller is named after the prefix alone, its sync's Degraded after
/// `<Prefix>CSIDriverOperatorDeployment`; seen on Storage/cluster of an AWS cluster it ran). Deliberately no Available: a single-replica operator being drained
/// must not make the cluster look unavailable (OpenShift learned this the hard way), and a
/// pod rescheduled after a node reboot is not a rollout, so it does not make it Progressing.
pub fn operator_deployment_conditions(
    entry: &DriverEntry,
    observed: Option<&Deployment>,
) -> Vec<OperatorCondition> {
    deployment_conditions(
        &format!("{}Progressing", entry.condition_prefix),
        &format!(
            "{}CSIDriverOperatorDeploymentDegraded",
            entry.condition_prefix
        ),
        entry.operator_deployment,
        observed,
    )
}

/// `progressing_type` and `degraded_type` from the Deployment `name` as observed, as
/// library-go's Deployment controller reports a workload of the operator (see
/// [`operator_deployment_conditions`]).
pub fn deployment_conditions(
    progressing_type: &str,
    degraded_type: &str,
    name: &str,
    observed: Option<&Deployment>,
) -> Vec<OperatorCondition> {
    let Some(deployment) = observed else {
        return vec![
            condition(
                progressing_type,
                ConditionStatus::True,
                "Deploying",
                "Waiting for the Deployment to be created",
            ),
            condition(degraded_type, ConditionStatus::False, "AsExpected", ""),
        ];
    };
    let status = deployment.status.clone().unwrap_or_default();
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let acted = status.observed_generation.is_some()
        && status.observed_generation >= deployment.metadata.generation;
    // As OpenShift's: a rollout that completed (`Progressing` with `NewReplicaSetAvailable`)
    // is not progressing again when a pod goes missing later (a node drained, rebooted).
    let finished = status.conditions.iter().flatten().any(|c| {
        c.type_ == "Progressing"
            && c.status == "True"
            && c.reason.as_deref() == Some("NewReplicaSetAvailable")
    });
    let progressing = if !acted {
        Some("Waiting for Deployment to act on changes")
    } else if finished {
        None
    } else if status.unavailable_replicas.unwrap_or(0) > 0 {
        Some("Waiting for Deployment to deploy pods")
    } else if status.updated_replicas.unwrap_or(0) < wanted {
        Some("Waiting for Deployment to update pods")
    } else if status.available_replicas.unwrap_or(0) < wanted {
        Some("Waiting for Deployment to deploy pods")
    } else {
        None
    };
    let deployment_condition = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .map(|c| {
                (
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
    };
    let stuck = match (
        deployment_condition("Progressing"),
        deployment_condition("ReplicaFailure"),
        deployment_condition("Available"),
    ) {
        (Some((_, reason, message)), _, _) if reason == "ProgressDeadlineExceeded" => Some(
            format!("Deployment {name} has not finished rolling out: {message}"),
        ),
        (_, Some((failed, _, message)), _) if failed == "True" => {
            Some(format!("Deployment {name} cannot create pods: {message}"))
        }
        (Some((progressing, _, _)), _, Some((available, _, message)))
            if progressing == "False" && available == "False" =>
        {
            Some(format!(
                "Deployment {name} is not available and not progressing: {message}"
            ))
        }
        _ => None,
    };
    vec![
        match progressing {
            Some(message) => condition(
                progressing_type,
                ConditionStatus::True,
                "Deploying",
                message,
            ),
            None => condition(progressing_type, ConditionStatus::False, "AsExpected", ""),
        },
        match stuck {
            Some(message) => condition(degraded_type, ConditionStatus::True, "SyncError", message),
            None => condition(degraded_type, ConditionStatus::False, "AsExpected", ""),
        },
    ]
}

/// The ClusterCSIDriver as first created (never updated afterwards: an admin's edits win).
pub fn build_cluster_csi_driver(entry: &DriverEntry, inputs: &StarterInputs) -> ClusterCSIDriver {
    let level = match &inputs.log_level {
        LogLevel::Empty | LogLevel::Other(_) => LogLevel::Normal,
        known => known.clone(),
    };
    let mut driver = ClusterCSIDriver::new(
        entry.csi_driver_name,
        ClusterCSIDriverSpec {
            operator: OperatorSpec {
                management_state: ManagementState::Managed,
                log_level: Some(level.clone()),
                operator_log_level: Some(level),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    driver.metadata.labels = Some([(STARTER_LABEL.to_owned(), entry.short_name.to_owned())].into());
    driver
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::registry::find;

    fn inputs(topology: Topology) -> StarterInputs {
        StarterInputs {
            topology,
            log_level: LogLevel::Debug,
            proxy: ProxyStatus {
                https_proxy: Some("http://proxy:3128".into()),
                ..Default::default()
            },
            env: [
                (
                    "GCP_PD_DRIVER_IMAGE".to_owned(),
                    "example.com/pd:1".to_owned(),
                ),
                (
                    "PROVISIONER_IMAGE".to_owned(),
                    "example.com/provisioner:1".to_owned(),
                ),
                ("ATTACHER_IMAGE".to_owned(), String::new()),
            ]
            .into(),
            operator_image: "example.com/storage-operator:1".into(),
            tls_profile: None,
        }
    }

    fn gcp() -> (DriverEntry, DriverDef) {
        (find("gcp-pd").unwrap(), drivers::by_name("gcp-pd").unwrap())
    }

    #[test]
    fn the_deployment_runs_this_binary_for_the_driver_with_its_images() {
        let (entry, _) = gcp();
        let deployment = build_deployment(&entry, &inputs(Topology::HighlyAvailable));
        let pod = deployment.spec.unwrap().template.spec.unwrap();
        let container = &pod.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("example.com/storage-operator:1")
        );
        assert_eq!(
            container.args.as_deref(),
            Some(
                &[
                    "driver".to_owned(),
                    "gcp-pd".to_owned(),
                    "--config=/var/run/configmaps/config/config.yaml".to_owned(),
                    "--metrics-address=0.0.0.0:8443".to_owned()
                ][..]
            )
        );
        let env: BTreeMap<_, _> = container
            .env
            .iter()
            .flatten()
            .filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?)))
            .collect();
        assert_eq!(
            env["DRIVER_IMAGE"], "example.com/pd:1",
            "renamed for the driver operator"
        );
        assert_eq!(env["PROVISIONER_IMAGE"], "example.com/provisioner:1");
        assert!(
            !env.contains_key("ATTACHER_IMAGE"),
            "empty values fall back to upstream images"
        );
        assert_eq!(env["LOG_LEVEL"], "debug");
        assert_eq!(env["HTTPS_PROXY"], "http://proxy:3128");
        assert!(container.resources.as_ref().unwrap().requests.is_some());
        assert_eq!(
            pod.service_account_name.as_deref(),
            Some("gcp-pd-csi-driver-operator")
        );
    }

    #[rstest]
    #[case(
        Topology::HighlyAvailable,
        Some("node-role.kubernetes.io/master"),
        true
    )]
    #[case(Topology::SingleReplica, Some("node-role.kubernetes.io/master"), true)]
    #[case(Topology::External, None, true)]
    #[case(Topology::Kubernetes { control_plane_nodes: true }, Some("node-role.kubernetes.io/control-plane"), false)]
    #[case(Topology::Kubernetes { control_plane_nodes: false }, None, false)]
    fn placement_follows_the_topology(
        #[case] topology: Topology,
        #[case] node_label: Option<&str>,
        #[case] critical: bool,
    ) {
        let (entry, _) = gcp();
        let pod = build_deployment(&entry, &inputs(topology))
            .spec
            .unwrap()
            .template
            .spec
            .unwrap();
        assert_eq!(
            pod.node_selector
                .as_ref()
                .and_then(|s| s.keys().next().cloned())
                .as_deref(),
            node_label
        );
        assert_eq!(pod.tolerations.is_some(), node_label.is_some());
        assert_eq!(pod.priority_class_name.is_some(), critical);
    }

    #[test]
    fn rbac_lets_the_driver_operator_write_what_it_renders_and_grant_what_it_holds() {
        let (entry, def) = gcp();
        let (cluster_role, roles) = build_rbac(&entry, &def, &inputs(Topology::HighlyAvailable));
        let [role] = <[Role; 1]>::try_from(roles).unwrap();
        assert_eq!(
            role.metadata.name.as_deref(),
            Some("gcp-pd-csi-driver-operator-role")
        );
        let cluster_rules = cluster_role.rules.unwrap();
        let allows = opkit::rbac::allows;
        for (group, resource) in [
            ("storage.k8s.io", "csidrivers"),
            ("storage.k8s.io", "storageclasses"),
            ("rbac.authorization.k8s.io", "clusterroles"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
        ] {
            assert!(
                allows(&cluster_rules, group, resource, "patch"),
                "{group}/{resource}"
            );
        }
        assert!(allows(
            &cluster_rules,
            "operator.openshift.io",
            "clustercsidrivers/status",
            "patch"
        ));
        // The node plugin's role (created by the driver operator) grants SCC use: held.
        assert!(allows(
            &cluster_rules,
            "security.openshift.io",
            "securitycontextconstraints",
            "use"
        ));
        // The provisioner binds the shared sidecar role: bind by name, without holding PV create.
        let bind = cluster_rules
            .iter()
            .find(|r| r.verbs == ["bind"])
            .expect("a bind rule");
        assert!(
            bind.resource_names
                .as_ref()
                .unwrap()
                .contains(&"openshift-csi-main-provisioner-role".to_owned())
        );
        assert!(!allows(&cluster_rules, "", "persistentvolumes", "create"));
        // The CSI migration audit watches these.
        for (group, resource) in [
            ("", "persistentvolumes"),
            ("", "persistentvolumeclaims"),
            ("storage.k8s.io", "csinodes"),
            ("storage.k8s.io", "storageclasses"),
        ] {
            for verb in ["list", "watch"] {
                assert!(
                    allows(&cluster_rules, group, resource, verb),
                    "{resource} {verb}"
                );
            }
        }
        // Nothing cluster-admin-like.
        assert!(
            !cluster_rules
                .iter()
                .any(|r| r.verbs.iter().any(|v| v == "*" || v == "escalate"))
        );
        assert!(
            cluster_rules
                .iter()
                .filter(|r| r.verbs.iter().any(|v| v == "bind"))
                .all(|r| r.resource_names.is_some())
        );
        assert!(
            !allows(&cluster_rules, "", "secrets", "get"),
            "secrets are read in its namespace only"
        );
        // Its CredentialsRequest lives in cloud-credential-operator's namespace, not its own.
        assert!(allows(
            &cluster_rules,
            "cloudcredential.openshift.io",
            "credentialsrequests",
            "patch"
        ));

        let role_rules = role.rules.unwrap();
        for resource in ["deployments", "daemonsets"] {
            assert!(allows(&role_rules, "apps", resource, "patch"), "{resource}");
        }
        assert!(allows(&role_rules, "", "secrets", "get"));
        assert!(allows(
            &role_rules,
            "coordination.k8s.io",
            "leases",
            "update"
        ));
        assert_eq!(role.metadata.namespace.as_deref(), Some(DRIVER_NAMESPACE));
    }

    /// Found on a real API server: SMB renders no StorageClass, so a role derived from the
    /// rendered kinds alone let it not list the StorageClasses the kit always watches.
    #[test]
    fn every_driver_operator_may_read_what_the_kit_always_watches() {
        for entry in crate::registry::registry() {
            let def = drivers::by_name(entry.short_name).unwrap();
            for topology in [Topology::HighlyAvailable, Topology::SingleReplica] {
                let (cluster_role, roles) = build_rbac(&entry, &def, &inputs(topology));
                // The kit watches the operands' namespace.
                let role = roles
                    .into_iter()
                    .find(|r| r.metadata.namespace.as_ref() == Some(&def.namespace))
                    .unwrap();
                let (cluster_rules, role_rules) =
                    (cluster_role.rules.unwrap(), role.rules.unwrap());
                for (group, resource, namespaced) in driver_operator::observe::ALWAYS_WATCHED {
                    let rules = if namespaced {
                        &role_rules
                    } else {
                        &cluster_rules
                    };
                    for verb in ["get", "list", "watch"] {
                        assert!(
                            opkit::rbac::allows(rules, group, resource, verb),
                            "{}: {verb} {group}/{resource}",
                            entry.short_name
                        );
                    }
                }
            }
        }
    }

    /// GCP PD's definition with its operands in a namespace of their own, as Manila's are.
    fn gcp_apart() -> (DriverEntry, DriverDef) {
        let (entry, mut def) = gcp();
        def.namespace = "openshift-gcp-pd-csi-driver".into();
        (entry, def)
    }

    #[rstest]
    #[case::one_namespace(gcp(), 1)]
    #[case::operands_apart(gcp_apart(), 2)]
    fn bindings_point_at_the_roles_and_the_service_account(
        #[case] (entry, def): (DriverEntry, DriverDef),
        #[case] count: usize,
    ) {
        let (cluster_role, roles) = build_rbac(&entry, &def, &inputs(Topology::HighlyAvailable));
        let (crb, rbs) = build_bindings(&entry, &def);
        assert_eq!(crb.role_ref.name, cluster_role.metadata.name.unwrap());
        assert_eq!((roles.len(), rbs.len()), (count, count));
        for (role, rb) in roles.iter().zip(&rbs) {
            assert_eq!(Some(&rb.role_ref.name), role.metadata.name.as_ref());
            assert_eq!(rb.role_ref.kind, "Role");
            assert_eq!(rb.metadata.namespace, role.metadata.namespace);
        }
        let sa = build_service_account(&entry);
        assert_eq!(sa.metadata.namespace.as_deref(), Some(DRIVER_NAMESPACE));
        for subject in crb
            .subjects
            .iter()
            .chain(rbs.iter().filter_map(|rb| rb.subjects.as_ref()))
            .flatten()
        {
            assert_eq!(Some(&subject.name), sa.metadata.name.as_ref());
            assert_eq!(subject.namespace, sa.metadata.namespace);
        }
    }

    #[test]
    fn operands_apart_from_their_operator_get_a_role_where_they_live() {
        let (entry, def) = gcp_apart();
        assert_eq!(
            separate_operand_namespace(&def),
            Some("openshift-gcp-pd-csi-driver")
        );
        let (cluster_role, roles) = build_rbac(&entry, &def, &inputs(Topology::HighlyAvailable));
        let [operands, own] = <[Role; 2]>::try_from(roles).unwrap();
        assert_eq!(
            operands.metadata.namespace.as_deref(),
            Some("openshift-gcp-pd-csi-driver")
        );
        assert_eq!(own.metadata.namespace.as_deref(), Some(DRIVER_NAMESPACE));
        for role in [&operands, &own] {
            assert_eq!(
                role.metadata.name.as_deref(),
                Some("gcp-pd-csi-driver-operator-role")
            );
        }
        let (cluster_rules, operand_rules, own_rules) = (
            cluster_role.rules.unwrap(),
            operands.rules.unwrap(),
            own.rules.unwrap(),
        );
        let allows = opkit::rbac::allows;

        // Every namespaced operand of the maximal render lives in the operand namespace, and
        // the Role there lets the driver operator write and remove it; the ClusterRole does
        // not grant those kinds everywhere instead.
        let operands = maximal_operands(
            &def,
            Topology::HighlyAvailable,
            &inputs(Topology::HighlyAvailable).env,
        );
        let mut kinds = BTreeSet::new();
        for operand in &operands {
            let value = operand.to_value();
            let Some(namespace) = value["metadata"]["namespace"].as_str() else {
                continue;
            };
            let (group, resource, _) = resource_of(operand, &def.namespace).unwrap();
            if namespace != def.namespace {
                // Only the CredentialsRequest, in cloud-credential-operator's namespace.
                assert_eq!(resource, "credentialsrequests", "{value}");
                continue;
            }
            for verb in ["get", "list", "watch", "create", "patch", "delete"] {
                assert!(
                    allows(&operand_rules, &group, &resource, verb),
                    "{verb} {group}/{resource}"
                );
            }
            kinds.insert((group, resource));
        }
        for resource in ["deployments", "daemonsets"] {
            assert!(kinds.contains(&("apps".to_owned(), resource.to_owned())));
            assert!(
                !allows(&cluster_rules, "apps", resource, "patch"),
                "{resource}"
            );
            assert!(!allows(&own_rules, "apps", resource, "patch"), "{resource}");
        }
        // It holds what the Roles it renders grant, in their namespace.
        for operand in &operands {
            if let Operand::Role(role) = operand {
                assert_eq!(role.metadata.namespace.as_ref(), Some(&def.namespace));
                for rule in role.rules.iter().flatten() {
                    assert!(operand_rules.contains(rule), "{rule:?}");
                }
            }
        }
        // It reads its credentials there.
        assert!(allows(&operand_rules, "", "secrets", "watch"));
        // Its Lease is where it runs, not where its operands are.
        for verb in ["get", "create", "update"] {
            assert!(
                allows(&own_rules, "coordination.k8s.io", "leases", verb),
                "{verb}"
            );
        }
        assert!(!operand_rules.contains(&rule(&["coordination.k8s.io"], &["leases"], MANAGE)));
        assert!(allows(&own_rules, "", "events", "create"));
        assert!(allows(&own_rules, "", "pods", "get"));

        // The Deployment tells it the namespace it runs in, for its Lease.
        let deployment = build_deployment(&entry, &inputs(Topology::HighlyAvailable));
        assert_eq!(
            deployment.metadata.namespace.as_deref(),
            Some(DRIVER_NAMESPACE)
        );
        let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
        let pod_namespace = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "POD_NAMESPACE")
            .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(pod_namespace, Some("metadata.namespace"));
    }

    #[test]
    fn a_separate_operand_namespace_is_made_as_openshift_makes_manilas() {
        let namespace = build_operand_namespace("openshift-manila-csi-driver");
        assert_eq!(
            namespace.metadata.name.as_deref(),
            Some("openshift-manila-csi-driver")
        );
        let labels = namespace.metadata.labels.unwrap();
        for mode in ["enforce", "audit", "warn"] {
            assert_eq!(
                labels[&format!("pod-security.kubernetes.io/{mode}")],
                "privileged"
            );
        }
        assert_eq!(labels["openshift.io/cluster-monitoring"], "true");
        assert_eq!(
            labels["security.openshift.io/scc.podSecurityLabelSync"],
            "false"
        );
        let annotations = namespace.metadata.annotations.unwrap();
        assert_eq!(annotations["openshift.io/node-selector"], "");
        assert_eq!(annotations["workload.openshift.io/allowed"], "management");
        // The driver namespace has OpenShift's annotations (manifests/02).
        let driver = build_namespace();
        assert_eq!(driver.metadata.name.as_deref(), Some(DRIVER_NAMESPACE));
        assert_eq!(
            driver
                .metadata
                .annotations
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            [
                "openshift.io/node-selector",
                "workload.openshift.io/allowed"
            ]
        );
        assert_eq!(driver.metadata.labels.unwrap(), labels);
    }

    /// Nothing changes for the drivers whose operands live beside their operator.
    #[test]
    fn drivers_with_their_operands_beside_them_keep_one_role_and_one_binding() {
        for entry in crate::registry::registry() {
            let def = drivers::by_name(entry.short_name).unwrap();
            let (_, roles) = build_rbac(&entry, &def, &inputs(Topology::HighlyAvailable));
            let (_, bindings) = build_bindings(&entry, &def);
            let namespaces = |metas: Vec<&ObjectMeta>| {
                metas
                    .into_iter()
                    .map(|m| m.namespace.clone().unwrap())
                    .collect::<Vec<_>>()
            };
            let expected: Vec<String> = match separate_operand_namespace(&def) {
                None => vec![DRIVER_NAMESPACE.into()],
                Some(apart) => vec![apart.into(), DRIVER_NAMESPACE.into()],
            };
            assert_eq!(
                namespaces(roles.iter().map(|r| &r.metadata).collect()),
                expected,
                "{}",
                entry.short_name
            );
            assert_eq!(
                namespaces(bindings.iter().map(|b| &b.metadata).collect()),
                expected,
                "{}",
                entry.short_name
            );
            let name = entry.operator_deployment;
            assert!(
                roles
                    .iter()
                    .all(|r| r.metadata.name == Some(format!("{name}-role")))
            );
            assert!(
                bindings
                    .iter()
                    .all(|b| b.metadata.name == Some(format!("{name}-rolebinding")))
            );
            if separate_operand_namespace(&def).is_none() {
                // Its Lease, where it runs, in the one Role.
                let rules = roles[0].rules.as_ref().unwrap();
                assert_eq!(rules[0], rule(&[""], &["secrets", "pods"], READ));
                assert_eq!(
                    rules[1],
                    rule(&["coordination.k8s.io"], &["leases"], MANAGE)
                );
            }
        }
    }

    #[test]
    fn the_first_cluster_csi_driver_carries_the_storage_log_level() {
        let (entry, _) = gcp();
        let driver = build_cluster_csi_driver(&entry, &inputs(Topology::HighlyAvailable));
        assert_eq!(
            driver.metadata.name.as_deref(),
            Some("pd.csi.storage.gke.io")
        );
        assert_eq!(
            driver.spec.operator.management_state,
            ManagementState::Managed
        );
        assert_eq!(driver.spec.operator.log_level, Some(LogLevel::Debug));
        assert_eq!(
            driver.spec.operator.operator_log_level,
            Some(LogLevel::Debug)
        );
        let unset = StarterInputs {
            log_level: LogLevel::Empty,
            ..inputs(Topology::HighlyAvailable)
        };
        assert_eq!(
            build_cluster_csi_driver(&entry, &unset)
                .spec
                .operator
                .log_level,
            Some(LogLevel::Normal)
        );
    }

    fn deployment(generation: i64, status: serde_json::Value) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gcp-pd-csi-driver-operator", "generation": generation},
            "spec": {"replicas": 1, "selector": {}, "template": {}},
            "status": status,
        }))
        .unwrap()
    }

    fn summary(conditions: &[OperatorCondition]) -> Vec<(String, String)> {
        conditions
            .iter()
            .map(|c| (c.status.to_string(), c.reason.clone().unwrap_or_default()))
            .collect()
    }

    #[rstest]
    #[case::not_acted_on(2, serde_json::json!({"observedGeneration": 1, "updatedReplicas": 1}), ("True", "Deploying"), ("False", "AsExpected"))]
    #[case::updating(2, serde_json::json!({"observedGeneration": 2, "updatedReplicas": 0}), ("True", "Deploying"), ("False", "AsExpected"))]
    #[case::rolled_out(2, serde_json::json!({"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 1}), ("False", "AsExpected"), ("False", "AsExpected"))]
    #[case::first_pods_not_running_yet(2, serde_json::json!({"observedGeneration": 2, "updatedReplicas": 1, "unavailableReplicas": 1, "conditions": [
        {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "ReplicaSet x is progressing."}]}),
        ("True", "Deploying"), ("False", "AsExpected"))]
    #[case::pod_rescheduled_is_not_a_rollout(2, serde_json::json!({"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 0, "unavailableReplicas": 1, "conditions": [
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet x has successfully progressed."}]}),
        ("False", "AsExpected"), ("False", "AsExpected"))]
    #[case::deadline_exceeded(2, serde_json::json!({"observedGeneration": 2, "updatedReplicas": 0, "conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet x has timed out progressing."}]}),
        ("True", "Deploying"), ("True", "SyncError"))]
    #[case::replica_failure(2, serde_json::json!({"observedGeneration": 2, "updatedReplicas": 1, "conditions": [
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "forbidden: quota"}]}),
        ("True", "Deploying"), ("True", "SyncError"))]
    fn operator_deployment_conditions_follow_openshift(
        #[case] generation: i64,
        #[case] status: serde_json::Value,
        #[case] progressing: (&str, &str),
        #[case] degraded: (&str, &str),
    ) {
        let (entry, _) = gcp();
        let conditions =
            operator_deployment_conditions(&entry, Some(&deployment(generation, status)));
        assert_eq!(conditions[0].type_, "GCPPDProgressing");
        assert_eq!(
            conditions[1].type_,
            "GCPPDCSIDriverOperatorDeploymentDegraded"
        );
        let expected = vec![
            (progressing.0.to_owned(), progressing.1.to_owned()),
            (degraded.0.to_owned(), degraded.1.to_owned()),
        ];
        assert_eq!(summary(&conditions), expected);
    }

    fn tls_profile(type_: &str, custom: Option<(&[&str], &str)>) -> TLSSecurityProfile {
        TLSSecurityProfile {
            type_: Some(api::config_v1::TLSProfileType::from(type_)),
            custom: custom.map(|(ciphers, min)| api::config_v1::CustomTLSProfile {
                ciphers: ciphers.iter().map(|c| (*c).to_owned()).collect(),
                min_tls_version: Some(min.to_owned()),
            }),
            ..Default::default()
        }
    }

    fn config_yaml(entry: &DriverEntry, profile: Option<&TLSSecurityProfile>) -> String {
        let config = build_operator_config(entry, profile).unwrap().unwrap();
        assert_eq!(config.metadata.namespace.as_deref(), Some(DRIVER_NAMESPACE));
        config.data.unwrap()[OPERATOR_CONFIG_KEY].clone()
    }

    /// Each profile as OpenShift's operator writes it (sigs.k8s.io/yaml of a map: keys sorted,
    /// list items at the key's indentation), with IANA cipher names.
    #[test]
    fn each_profile_becomes_the_config_openshift_writes() {
        let (entry, _) = gcp();
        let intermediate = "apiVersion: operator.openshift.io/v1alpha1
kind: GenericOperatorConfig
servingInfo:
  cipherSuites:
  - TLS_AES_128_GCM_SHA256
  - TLS_AES_256_GCM_SHA384
  - TLS_CHACHA20_POLY1305_SHA256
  - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
  - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
  - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
  - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
  - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
  - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
  minTLSVersion: VersionTLS12
";
        assert_eq!(config_yaml(&entry, None), intermediate);
        assert_eq!(
            config_yaml(&entry, Some(&tls_profile("Intermediate", None))),
            intermediate
        );
        assert_eq!(
            config_yaml(&entry, Some(&tls_profile("Modern", None))),
            "apiVersion: operator.openshift.io/v1alpha1
kind: GenericOperatorConfig
servingInfo:
  cipherSuites:
  - TLS_AES_128_GCM_SHA256
  - TLS_AES_256_GCM_SHA384
  - TLS_CHACHA20_POLY1305_SHA256
  minTLSVersion: VersionTLS13
"
        );
        let old = config_yaml(&entry, Some(&tls_profile("Old", None)));
        assert!(
            old.ends_with("  - TLS_RSA_WITH_3DES_EDE_CBC_SHA\n  minTLSVersion: VersionTLS10\n")
        );
        // Custom: OpenSSL names become IANA names; ones Go cannot serve are left out.
        assert_eq!(
            config_yaml(
                &entry,
                Some(&tls_profile(
                    "Custom",
                    Some((
                        &["ECDHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES128-GCM-SHA256"],
                        "VersionTLS11"
                    ))
                ))
            ),
            "apiVersion: operator.openshift.io/v1alpha1
kind: GenericOperatorConfig
servingInfo:
  cipherSuites:
  - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
  minTLSVersion: VersionTLS11
"
        );
        // What the driver operator reads back.
        let read = parse_operator_config(intermediate).unwrap();
        assert_eq!(read, csi_kit::tls::serving_tls(None).unwrap());
        assert!(parse_operator_config("kind: Other").is_err());
        assert!(parse_operator_config(": not yaml [").is_err());
    }

    #[test]
    fn an_invalid_custom_profile_is_an_error_naming_the_field() {
        let (entry, _) = gcp();
        let error = build_operator_config(
            &entry,
            Some(&tls_profile("Custom", Some((&["BOGUS"], "VersionTLS12")))),
        )
        .unwrap()
        .unwrap_err();
        assert!(
            error.contains("spec.tlsSecurityProfile.custom.ciphers"),
            "{error}"
        );
    }

    /// Every driver operator serves `/metrics` over HTTPS on 8443 with service-ca's
    /// certificate, behind its `<operator>-metrics` Service, as OpenShift's; the Secret is
    /// optional, so that the pod starts where no service-ca writes it.
    #[test]
    fn every_driver_operator_serves_metrics_over_https_behind_its_service() {
        for entry in crate::registry::registry() {
            let op = entry.operator_deployment;
            let service = build_metrics_service(&entry);
            assert_eq!(
                service.metadata.name.as_deref(),
                Some(&*format!("{op}-metrics"))
            );
            assert_eq!(
                service.metadata.annotations.as_ref().unwrap()[SERVING_CERT_ANNOTATION],
                format!("{op}-serving-cert")
            );
            let spec = service.spec.unwrap();
            assert_eq!(spec.selector.unwrap()["name"], op);
            let port = &spec.ports.unwrap()[0];
            assert_eq!((port.name.as_deref(), port.port), (Some("https"), 443));
            assert_eq!(port.target_port, Some(IntOrString::Int(8443)));

            let deployment = build_deployment(&entry, &inputs(Topology::HighlyAvailable));
            let template = deployment.spec.unwrap().template;
            assert_eq!(
                template.metadata.unwrap().labels.unwrap()["name"],
                op,
                "the Service selects the pod"
            );
            let pod = template.spec.unwrap();
            let container = &pod.containers[0];
            assert!(
                container
                    .args
                    .as_ref()
                    .unwrap()
                    .contains(&"--metrics-address=0.0.0.0:8443".to_owned())
            );
            assert!(
                container
                    .ports
                    .as_ref()
                    .unwrap()
                    .iter()
                    .any(|p| { p.name.as_deref() == Some("metrics") && p.container_port == 8443 })
            );
            let volume = pod
                .volumes
                .as_ref()
                .unwrap()
                .iter()
                .find(|v| v.name == "serving-cert")
                .unwrap();
            let secret = volume.secret.as_ref().unwrap();
            assert_eq!(
                secret.secret_name.as_deref(),
                Some(&*format!("{op}-serving-cert"))
            );
            assert_eq!(secret.optional, Some(true));
            let mount = container
                .volume_mounts
                .as_ref()
                .unwrap()
                .iter()
                .find(|m| m.name == "serving-cert")
                .unwrap();
            assert_eq!(mount.mount_path, "/var/run/secrets/serving-cert");
            assert_eq!(mount.read_only, Some(true));
        }
    }

    /// The platform drivers' operators mount their config as OpenShift's do (volume
    /// `operator-config`, `/var/run/configmaps/config`, `--config=.../config.yaml`); the
    /// optional drivers' have none, as on OpenShift.
    #[test]
    fn the_operator_deployment_mounts_its_config_as_openshift_does() {
        for entry in crate::registry::registry() {
            let deployment = build_deployment(&entry, &inputs(Topology::HighlyAvailable));
            let pod = deployment.spec.unwrap().template.spec.unwrap();
            let container = &pod.containers[0];
            let args = container.args.clone().unwrap();
            match operator_config_name(&entry) {
                Some(name) => {
                    assert_eq!(name, format!("{}-config", entry.operator_deployment));
                    assert!(
                        args.contains(
                            &"--config=/var/run/configmaps/config/config.yaml".to_owned()
                        )
                    );
                    let volumes = pod.volumes.unwrap();
                    let volume = volumes
                        .iter()
                        .find(|v| v.name == "operator-config")
                        .unwrap();
                    assert_eq!(volume.config_map.as_ref().unwrap().name, name);
                    let mounts = container.volume_mounts.clone().unwrap();
                    let mount = mounts.iter().find(|m| m.name == "operator-config").unwrap();
                    assert_eq!(mount.mount_path, "/var/run/configmaps/config");
                }
                None => {
                    assert!(["aws-efs", "smb"].contains(&entry.short_name));
                    let names = |volumes: Option<Vec<String>>| volumes.unwrap_or_default();
                    assert_eq!(
                        names(pod.volumes.map(|v| v.into_iter().map(|v| v.name).collect())),
                        ["serving-cert"]
                    );
                    assert_eq!(
                        args,
                        ["driver", entry.short_name, "--metrics-address=0.0.0.0:8443"]
                    );
                }
            }
        }
    }

    #[test]
    fn the_namespace_admits_privileged_csi_pods() {
        let labels = build_namespace().metadata.labels.unwrap();
        assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    }
}
