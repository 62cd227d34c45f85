//! What the cluster storage operator applies, as one type ([`Desired`]), and the starter's
//! objects for the driver operators it starts ([`starter_objects`]): below the plan, which
//! decides which of them to apply, and the hosted control plane's split ([`crate::hosted`]).

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::failure::WriteFailure;
use crate::monitoring;
use crate::registry::DriverEntry;
use crate::starter::{self, STARTER_LABEL, StarterInputs};

/// One object to apply.
// Built once per reconcile; variant sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Desired {
    /// The driver namespace, or a driver's separate operand namespace.
    Namespace(Namespace),
    /// A driver operator's ServiceAccount.
    ServiceAccount(ServiceAccount),
    /// A driver operator's or shared sidecar ClusterRole.
    ClusterRole(ClusterRole),
    /// A driver operator's ClusterRoleBinding.
    ClusterRoleBinding(ClusterRoleBinding),
    /// A driver operator's Role (in its namespace or its operands').
    Role(Role),
    /// A driver operator's RoleBinding (in its namespace or its operands').
    RoleBinding(RoleBinding),
    /// A driver operator's Deployment, or the volume data source validator's.
    Deployment(Deployment),
    /// The volume data source validator's `VolumePopulator` CRD.
    CustomResourceDefinition(CustomResourceDefinition),
    /// The operator's ServiceMonitor or PrometheusRule ([`monitoring`]).
    Monitoring(monitoring::Kind, kube::api::DynamicObject),
    /// A driver operator's config ConfigMap (the cluster's TLS profile), or the vSphere
    /// problem detector's ConfigMaps.
    ConfigMap(ConfigMap),
    /// A driver operator's metrics Service, or the vSphere problem detector's.
    Service(Service),
}

impl Desired {
    /// The object's kind and `namespace/name` (or `name`), as [`WriteFailure`] names it.
    pub fn key(&self) -> (&'static str, String) {
        let (kind, meta) = match self {
            Self::Monitoring(kind, o) => (kind.kind(), &o.metadata),
            Self::Namespace(o) => ("Namespace", &o.metadata),
            Self::ServiceAccount(o) => ("ServiceAccount", &o.metadata),
            Self::ClusterRole(o) => ("ClusterRole", &o.metadata),
            Self::ClusterRoleBinding(o) => ("ClusterRoleBinding", &o.metadata),
            Self::Role(o) => ("Role", &o.metadata),
            Self::RoleBinding(o) => ("RoleBinding", &o.metadata),
            Self::Deployment(o) => ("Deployment", &o.metadata),
            Self::CustomResourceDefinition(o) => ("CustomResourceDefinition", &o.metadata),
            Self::ConfigMap(o) => ("ConfigMap", &o.metadata),
            Self::Service(o) => ("Service", &o.metadata),
        };
        let name = meta.name.clone().unwrap_or_default();
        let object = match &meta.namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name,
        };
        (kind, object)
    }

    pub(crate) fn failed_in<'a>(&self, failures: &'a [WriteFailure]) -> Option<&'a WriteFailure> {
        let (kind, object) = self.key();
        failures
            .iter()
            .find(|f| f.kind == kind && f.object == object)
    }

    /// The object as JSON, with `apiVersion` and `kind`.
    pub fn to_value(&self) -> serde_json::Value {
        let value = match self {
            Self::Namespace(o) => serde_json::to_value(o),
            Self::ServiceAccount(o) => serde_json::to_value(o),
            Self::ClusterRole(o) => serde_json::to_value(o),
            Self::ClusterRoleBinding(o) => serde_json::to_value(o),
            Self::Role(o) => serde_json::to_value(o),
            Self::RoleBinding(o) => serde_json::to_value(o),
            Self::Deployment(o) => serde_json::to_value(o),
            Self::CustomResourceDefinition(o) => serde_json::to_value(o),
            Self::Monitoring(_, o) => serde_json::to_value(o),
            Self::ConfigMap(o) => serde_json::to_value(o),
            Self::Service(o) => serde_json::to_value(o),
        };
        // These types hold only strings, numbers and string-keyed maps: serializing cannot fail.
        value.unwrap_or_default()
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Self::Namespace(o) => &o.metadata,
            Self::ServiceAccount(o) => &o.metadata,
            Self::ClusterRole(o) => &o.metadata,
            Self::ClusterRoleBinding(o) => &o.metadata,
            Self::Role(o) => &o.metadata,
            Self::RoleBinding(o) => &o.metadata,
            Self::Deployment(o) => &o.metadata,
            Self::CustomResourceDefinition(o) => &o.metadata,
            Self::ConfigMap(o) => &o.metadata,
            Self::Service(o) => &o.metadata,
            Self::Monitoring(_, o) => &o.metadata,
        }
    }
}

/// Everything the starter applies for `started` drivers: the driver namespace, the separate
/// operand namespaces of the drivers that have one, and the shared sidecar ClusterRoles once,
/// then each driver operator's ServiceAccount, RBAC and Deployment.
pub fn starter_objects(
    started: &[(DriverEntry, csi_kit::DriverDef)],
    inputs: &StarterInputs,
) -> Vec<Desired> {
    let mut objects = Vec::new();
    if started.is_empty() {
        return objects;
    }
    objects.push(Desired::Namespace(starter::build_namespace()));
    let separate: BTreeSet<&str> = started
        .iter()
        .filter_map(|(_, def)| starter::separate_operand_namespace(def))
        .collect();
    for namespace in separate {
        objects.push(Desired::Namespace(starter::build_operand_namespace(
            namespace,
        )));
    }
    for mut role in csi_kit::build_shared_cluster_roles() {
        role.metadata
            .labels
            .get_or_insert_default()
            .insert(STARTER_LABEL.into(), "shared".into());
        objects.push(Desired::ClusterRole(role));
    }
    for (entry, def) in started {
        objects.extend(start_driver(entry, def, inputs));
    }
    objects
}

/// The objects the starter applies for one driver operator: its ServiceAccount, RBAC, config
/// ConfigMap, metrics Service and Deployment.
pub(crate) fn start_driver(
    entry: &DriverEntry,
    def: &csi_kit::DriverDef,
    inputs: &StarterInputs,
) -> Vec<Desired> {
    let (cluster_role, roles) = starter::build_rbac(entry, def, inputs);
    let (cluster_binding, bindings) = starter::build_bindings(entry, def);
    let mut objects = vec![
        Desired::ServiceAccount(starter::build_service_account(entry)),
        Desired::ClusterRole(cluster_role),
        Desired::ClusterRoleBinding(cluster_binding),
    ];
    objects.extend(roles.into_iter().map(Desired::Role));
    objects.extend(bindings.into_iter().map(Desired::RoleBinding));
    // Before the Deployment that mounts it. An invalid profile leaves it as it is (reported
    // by [`operator_config_degraded`]).
    if let Some(Ok(config)) = starter::build_operator_config(entry, inputs.tls_profile.as_ref()) {
        objects.push(Desired::ConfigMap(config));
    }
    objects.push(Desired::Service(starter::build_metrics_service(entry)));
    objects.push(Desired::Deployment(starter::build_deployment(
        entry, inputs,
    )));
    objects
}
