//! Every operand of a driver, in a stable order: `render` is what `storage-operator render`
//! prints and what the driver operator's controllers apply.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use serde_json::{Value, json};

use crate::def::{CredentialsDef, DriverDef};
use crate::inputs::Inputs;
use crate::inputs::OptionalKind;
use crate::{derived, metrics, names, rbac, storage, workloads};

/// One desired operand. Kinds without a typed struct (ServiceMonitor, VolumeSnapshotClass,
/// CredentialsRequest) are JSON values with `apiVersion` and `kind`.
// A render is a few dozen objects built once per reconcile; variant sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A ServiceAccount.
    ServiceAccount(ServiceAccount),
    /// A ClusterRole.
    ClusterRole(ClusterRole),
    /// A ClusterRoleBinding.
    ClusterRoleBinding(ClusterRoleBinding),
    /// A Role.
    Role(Role),
    /// A RoleBinding.
    RoleBinding(RoleBinding),
    /// A ConfigMap.
    ConfigMap(ConfigMap),
    /// A derived Secret (see [`crate::derived`]).
    Secret(Secret),
    /// A NetworkPolicy of the table.
    NetworkPolicy(NetworkPolicy),
    /// The CSIDriver.
    CSIDriver(CSIDriver),
    /// The metrics Service.
    Service(Service),
    /// The PodDisruptionBudget.
    PodDisruptionBudget(PodDisruptionBudget),
    /// The controller Deployment.
    Deployment(Deployment),
    /// The node DaemonSet.
    DaemonSet(DaemonSet),
    /// A StorageClass.
    StorageClass(StorageClass),
    /// An object of a kind without a typed struct.
    Dynamic(Value),
}

impl Operand {
    /// The object as JSON, with `apiVersion` and `kind`.
    pub fn to_value(&self) -> Value {
        let value = match self {
            Self::ServiceAccount(o) => serde_json::to_value(o),
            Self::ClusterRole(o) => serde_json::to_value(o),
            Self::ClusterRoleBinding(o) => serde_json::to_value(o),
            Self::Role(o) => serde_json::to_value(o),
            Self::RoleBinding(o) => serde_json::to_value(o),
            Self::ConfigMap(o) => serde_json::to_value(o),
            Self::Secret(o) => serde_json::to_value(o),
            Self::NetworkPolicy(o) => serde_json::to_value(o),
            Self::CSIDriver(o) => serde_json::to_value(o),
            Self::Service(o) => serde_json::to_value(o),
            Self::PodDisruptionBudget(o) => serde_json::to_value(o),
            Self::Deployment(o) => serde_json::to_value(o),
            Self::DaemonSet(o) => serde_json::to_value(o),
            Self::StorageClass(o) => serde_json::to_value(o),
            Self::Dynamic(v) => Ok(v.clone()),
        };
        // Serializing these types cannot fail: they hold only strings, numbers and maps with
        // string keys.
        value.unwrap_or(Value::Null)
    }

    /// The object's kind (for the kinds without a Rust type, the one it names when known,
    /// else `Dynamic`), for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ServiceAccount(_) => "ServiceAccount",
            Self::ClusterRole(_) => "ClusterRole",
            Self::ClusterRoleBinding(_) => "ClusterRoleBinding",
            Self::Role(_) => "Role",
            Self::RoleBinding(_) => "RoleBinding",
            Self::ConfigMap(_) => "ConfigMap",
            Self::Secret(_) => "Secret",
            Self::NetworkPolicy(_) => "NetworkPolicy",
            Self::CSIDriver(_) => "CSIDriver",
            Self::Service(_) => "Service",
            Self::PodDisruptionBudget(_) => "PodDisruptionBudget",
            Self::Deployment(_) => "Deployment",
            Self::DaemonSet(_) => "DaemonSet",
            Self::StorageClass(_) => "StorageClass",
            Self::Dynamic(v) => v["kind"]
                .as_str()
                .and_then(OptionalKind::of_kind)
                .map_or("Dynamic", OptionalKind::kind),
        }
    }

    /// The object's name, read without serializing it.
    pub fn name(&self) -> &str {
        let name = match self {
            Self::ServiceAccount(o) => &o.metadata.name,
            Self::ClusterRole(o) => &o.metadata.name,
            Self::ClusterRoleBinding(o) => &o.metadata.name,
            Self::Role(o) => &o.metadata.name,
            Self::RoleBinding(o) => &o.metadata.name,
            Self::ConfigMap(o) => &o.metadata.name,
            Self::Secret(o) => &o.metadata.name,
            Self::NetworkPolicy(o) => &o.metadata.name,
            Self::CSIDriver(o) => &o.metadata.name,
            Self::Service(o) => &o.metadata.name,
            Self::PodDisruptionBudget(o) => &o.metadata.name,
            Self::Deployment(o) => &o.metadata.name,
            Self::DaemonSet(o) => &o.metadata.name,
            Self::StorageClass(o) => &o.metadata.name,
            Self::Dynamic(v) => return v["metadata"]["name"].as_str().unwrap_or_default(),
        };
        name.as_deref().unwrap_or_default()
    }

    /// `kind/[namespace/]name`, for logs and test messages.
    pub fn key(&self) -> String {
        let v = self.to_value();
        let kind = v["kind"].as_str().unwrap_or_default();
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        match v["metadata"]["namespace"].as_str() {
            Some(ns) => format!("{kind}/{ns}/{name}"),
            None => format!("{kind}/{name}"),
        }
    }
}

/// The trusted CA bundle ConfigMap: empty, labelled so OpenShift's network operator fills in
/// `ca-bundle.crt`. The workloads mount it only once it has that key.
pub fn build_trusted_ca_bundle_config_map(def: &DriverDef) -> ConfigMap {
    let mut metadata = names::ns_meta(def, names::trusted_ca_bundle(def));
    if let Some(labels) = metadata.labels.as_mut() {
        labels.insert(names::INJECT_TRUSTED_CA_LABEL.to_owned(), "true".to_owned());
    }
    ConfigMap {
        metadata,
        ..ConfigMap::default()
    }
}

/// The copies of [`DriverDef::copied_config_maps`] whose source exists: the same data,
/// in the operand namespace, labelled as operands.
pub fn build_copied_config_maps(def: &DriverDef, inputs: &Inputs) -> Vec<ConfigMap> {
    def.copied_config_maps
        .iter()
        .filter_map(|copied| {
            let data = inputs.copied_config_maps.get(copied.target())?;
            Some(ConfigMap {
                metadata: names::ns_meta(def, copied.target().to_owned()),
                data: Some(data.clone()),
                ..ConfigMap::default()
            })
        })
        .collect()
}

/// The table's [`DriverDef::static_config_maps`]: their data, their labels and the operand
/// label, in the operand namespace.
pub fn build_static_config_maps(def: &DriverDef) -> Vec<ConfigMap> {
    def.static_config_maps
        .iter()
        .map(|c| {
            let mut metadata = names::ns_meta(def, c.name.clone());
            let labels = metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in &c.labels {
                labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
            ConfigMap {
                metadata,
                data: Some(c.data.clone()),
                ..ConfigMap::default()
            }
        })
        .collect()
}

/// The table's [`DriverDef::network_policies`], in the operand namespace with the operand
/// label.
pub fn build_network_policies(def: &DriverDef) -> Vec<NetworkPolicy> {
    def.network_policies
        .iter()
        .map(|p| {
            let mut metadata = names::ns_meta(def, p.name.clone());
            if !p.annotations.is_empty() {
                metadata.annotations = Some(p.annotations.clone());
            }
            NetworkPolicy {
                metadata,
                spec: Some(p.spec.clone()),
            }
        })
        .collect()
}

/// The CredentialsRequest (`cloudcredential.openshift.io/v1`) of the controller's credentials,
/// only when the driver has one and its CRD exists. The Secret is always written to the operand
/// namespace.
pub fn build_credentials_request(def: &DriverDef, inputs: &Inputs) -> Option<Value> {
    credentials_request(def, def.credentials.as_ref()?, inputs)
}

/// The CredentialsRequest of the node plugin's own credentials
/// ([`DriverDef::node_credentials`]), as [`build_credentials_request`].
pub fn build_node_credentials_request(def: &DriverDef, inputs: &Inputs) -> Option<Value> {
    credentials_request(def, def.node_credentials.as_ref()?, inputs)
}

fn credentials_request(def: &DriverDef, creds: &CredentialsDef, inputs: &Inputs) -> Option<Value> {
    let request = creds.credentials_request.as_ref()?;
    if !inputs.crds.credentials_request {
        return None;
    }
    let mut object = json!({
        "apiVersion": "cloudcredential.openshift.io/v1",
        "kind": "CredentialsRequest",
        "metadata": {
            "name": request.name,
            "namespace": request.namespace,
            "labels": { names::OPERAND_LABEL: def.short_name },
        },
        "spec": {
            "serviceAccountNames": request.service_account_names,
            "secretRef": { "name": creds.secret_name, "namespace": def.namespace },
            "providerSpec": request.provider_spec,
        },
    });
    if !request.annotations.is_empty() {
        object["metadata"]["annotations"] = json!(request.annotations);
    }
    // With its role set, an AWS request asks for STS credentials: cloud-credential-operator
    // then writes a Secret with the role and the token's path instead of keys.
    if let Some(role) = inputs.token_roles.get(&request.name)
        && request.provider_spec["kind"] == "AWSProviderSpec"
    {
        object["spec"]["cloudTokenPath"] = json!(crate::credentials::CLOUD_TOKEN_PATH);
        object["spec"]["providerSpec"]["stsIAMRoleARN"] = json!(role);
    }
    if request.service_account_names.is_empty()
        && let Some(spec) = object["spec"].as_object_mut()
    {
        spec.remove("serviceAccountNames");
    }
    Some(object)
}

/// Every operand of the driver for these inputs, in a stable order: identities and RBAC,
/// configuration, the CSIDriver, metrics, workloads, then classes and credentials. On plain
/// Kubernetes this includes the shared sidecar ClusterRoles (see [`rbac`]).
pub fn render_operands(def: &DriverDef, inputs: &Inputs) -> Vec<Operand> {
    // Derived ConfigMaps and Secrets are built in this pass; the workloads carry their hashes.
    let hashed;
    let inputs = if def.config_maps.is_empty() {
        inputs
    } else {
        hashed = derived::with_derived_hashes(def, inputs);
        &hashed
    };
    let mut out = Vec::new();
    out.extend(
        rbac::build_service_accounts(def)
            .into_iter()
            .map(Operand::ServiceAccount),
    );
    out.extend(
        rbac::build_cluster_roles(def)
            .into_iter()
            .map(Operand::ClusterRole),
    );
    if !inputs.topology.is_openshift() {
        // On OpenShift cluster-storage-operator ships the shared roles; elsewhere nobody does,
        // so the driver brings those it binds (identical for every driver).
        out.extend(
            rbac::build_shared_cluster_roles_bound_by(def)
                .into_iter()
                .map(Operand::ClusterRole),
        );
    }
    out.extend(
        rbac::build_cluster_role_bindings(def)
            .into_iter()
            .map(Operand::ClusterRoleBinding),
    );
    out.extend(
        rbac::build_roles(def, inputs)
            .into_iter()
            .map(Operand::Role),
    );
    out.extend(
        rbac::build_role_bindings(def, inputs)
            .into_iter()
            .map(Operand::RoleBinding),
    );
    if def.cluster_proxy {
        out.push(Operand::ConfigMap(build_trusted_ca_bundle_config_map(def)));
    }
    out.extend(
        build_copied_config_maps(def, inputs)
            .into_iter()
            .map(Operand::ConfigMap),
    );
    out.extend(
        build_static_config_maps(def)
            .into_iter()
            .map(Operand::ConfigMap),
    );
    out.extend(
        derived::build_derived_config_maps(def, inputs)
            .into_iter()
            .flatten()
            .map(Operand::ConfigMap),
    );
    out.extend(
        derived::build_derived_secrets(def, inputs)
            .into_iter()
            .flatten()
            .map(Operand::Secret),
    );
    out.push(Operand::CSIDriver(storage::build_csi_driver(def, inputs)));
    out.extend(metrics::build_metrics_service(def, inputs).map(Operand::Service));
    out.extend(metrics::build_node_metrics_service(def, inputs).map(Operand::Service));
    out.extend(metrics::build_service_monitor(def, inputs).map(Operand::Dynamic));
    out.extend(metrics::build_node_service_monitor(def, inputs).map(Operand::Dynamic));
    out.extend(
        build_network_policies(def)
            .into_iter()
            .map(Operand::NetworkPolicy),
    );
    out.push(Operand::PodDisruptionBudget(
        workloads::build_pod_disruption_budget(def),
    ));
    out.push(Operand::Deployment(workloads::build_controller_deployment(
        def, inputs,
    )));
    out.push(Operand::DaemonSet(workloads::build_node_daemon_set(
        def, inputs,
    )));
    out.extend(
        def.hooks
            .extra_daemon_sets
            .iter()
            .map(|extra| Operand::DaemonSet(workloads::build_extra_daemon_set(def, inputs, extra))),
    );
    out.extend(
        storage::build_storage_classes(def, inputs)
            .into_iter()
            .map(Operand::StorageClass),
    );
    out.extend(
        storage::build_volume_snapshot_classes(def, inputs)
            .into_iter()
            .map(Operand::Dynamic),
    );
    out.extend(build_credentials_request(def, inputs).map(Operand::Dynamic));
    out.extend(build_node_credentials_request(def, inputs).map(Operand::Dynamic));
    out
}

/// [`render_operands`] as JSON values.
pub fn render(def: &DriverDef, inputs: &Inputs) -> Vec<Value> {
    render_operands(def, inputs)
        .iter()
        .map(Operand::to_value)
        .collect()
}
