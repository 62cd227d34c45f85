//! `config.openshift.io/v1`: the cluster configuration our operators read (Infrastructure,
//! Proxy, FeatureGate) and the ClusterOperator they report to. On OpenShift these CRDs belong to
//! the platform; on plain Kubernetes we install our own copies generated from these types.
//!
//! We model the fields our operators use one by one. The rest of each object (the many
//! per-platform details of Infrastructure, say) is kept in `extra` maps, so that reading and
//! writing an object back never drops what another component put there. The CRDs still declare
//! every field openshift/api's Default feature set declares, and nothing else (the
//! Infrastructure fields our types do not carry are declared by
//! [`crate::infrastructure_schema`]), so the API server validates and prunes as OpenShift's does.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::operator_v1::ConditionStatus;
use crate::schema::{preserve_unknown_fields, raw_extension};
use crate::string_enum;

/// The API group of this module.
pub const GROUP: &str = "config.openshift.io";
/// The API version of this module.
pub const VERSION: &str = "v1";
/// The name of the singleton configuration objects (Infrastructure, Proxy, FeatureGate).
pub const CLUSTER: &str = "cluster";

/// Fields of an object that this crate does not model, kept verbatim.
pub type Extra = BTreeMap<String, Value>;

// ---------------------------------------------------------------------------------------------
// ClusterOperator

/// The status an operator reports to the cluster version operator.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "config.openshift.io",
    version = "v1",
    kind = "ClusterOperator",
    plural = "clusteroperators",
    shortname = "co",
    status = "ClusterOperatorStatus",
    printcolumn = r#"{"name": "Version", "type": "string", "jsonPath": ".status.versions[?(@.name==\"operator\")].version"}"#,
    printcolumn = r#"{"name": "Available", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name": "Progressing", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Progressing\")].status"}"#,
    printcolumn = r#"{"name": "Degraded", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    printcolumn = r#"{"name": "Since", "type": "date", "jsonPath": ".status.conditions[?(@.type==\"Available\")].lastTransitionTime"}"#,
    doc = "ClusterOperator holds the status of a cluster operator."
)]
pub struct ClusterOperatorSpec {}

/// The status of a cluster operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOperatorStatus {
    /// Available, Progressing, Degraded, Upgradeable and others, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<ClusterOperatorStatusCondition>,
    /// Versions of the operator and its operands; `operator` is the operator's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<OperandVersion>,
    /// Objects an admin should look at when debugging this operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
    /// Operator-specific data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "raw_extension")]
    pub extension: Option<Value>,
}

impl ClusterOperatorStatus {
    /// The condition of the given type, if present.
    pub fn condition(&self, type_: &str) -> Option<&ClusterOperatorStatusCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// One condition of a ClusterOperator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOperatorStatusCondition {
    /// Available, Progressing, Degraded, Upgradeable, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown. The schema does not restrict it, as openshift/api's does not.
    #[schemars(with = "String")]
    pub status: ConditionStatus,
    /// When the status last changed.
    pub last_transition_time: Time,
    /// A CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A version of the operator or of one of its operands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperandVersion {
    /// `operator` for the operator itself, otherwise the operand's name.
    pub name: String,
    /// The version, semver where possible.
    pub version: String,
}

/// A reference to an object related to a cluster operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectReference {
    /// The object's API group; empty for the core group.
    pub group: String,
    /// The object's resource (plural).
    pub resource: String,
    /// The object's namespace, for namespaced objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

// ---------------------------------------------------------------------------------------------
// Infrastructure

string_enum! {
    /// The platform the cluster runs on. Consumers treat unknown values as `None`.
    pub enum PlatformType {
        Empty = "",
        AWS = "AWS",
        Azure = "Azure",
        BareMetal = "BareMetal",
        GCP = "GCP",
        Libvirt = "Libvirt",
        OpenStack = "OpenStack",
        None = "None",
        VSphere = "VSphere",
        OVirt = "oVirt",
        IBMCloud = "IBMCloud",
        KubeVirt = "KubeVirt",
        EquinixMetal = "EquinixMetal",
        PowerVS = "PowerVS",
        AlibabaCloud = "AlibabaCloud",
        Nutanix = "Nutanix",
        External = "External",
    }
}

impl PlatformType {
    /// The platform with OpenShift's rule applied: values this version does not know are `None`.
    pub fn effective(&self) -> PlatformType {
        match self {
            Self::Other(_) => Self::None,
            known => known.clone(),
        }
    }
}

string_enum! {
    /// How the control plane or the infrastructure nodes are laid out.
    pub enum TopologyMode {
        HighlyAvailable = "HighlyAvailable",
        HighlyAvailableArbiter = "HighlyAvailableArbiter",
        SingleReplica = "SingleReplica",
        DualReplica = "DualReplica",
        External = "External",
    }
}

string_enum! {
    /// Whether nodes are set up for CPU partitioning.
    pub enum CPUPartitioningMode {
        None = "None",
        AllNodes = "AllNodes",
    }
}

string_enum! {
    /// The Azure cloud the cluster runs in.
    pub enum AzureCloudEnvironment {
        /// Not set: AzurePublicCloud.
        Unset = "",
        AzurePublicCloud = "AzurePublicCloud",
        AzureUSGovernmentCloud = "AzureUSGovernmentCloud",
        AzureChinaCloud = "AzureChinaCloud",
        AzureGermanCloud = "AzureGermanCloud",
        AzureStackCloud = "AzureStackCloud",
        AzureUSSecCloud = "AzureUSSecCloud",
    }
}

/// The cluster's infrastructure; the only instance is named `cluster`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "config.openshift.io",
    version = "v1",
    kind = "Infrastructure",
    plural = "infrastructures",
    status = "InfrastructureStatus",
    doc = "Infrastructure holds cluster-wide information about the infrastructure. The only instance is named cluster."
)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureSpec {
    /// The cloud provider configuration (a key of a ConfigMap in `openshift-config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_config: Option<ConfigMapFileReference>,
    /// Platform-specific desired configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_spec: Option<PlatformSpec>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// A key of a ConfigMap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigMapFileReference {
    /// The ConfigMap's name.
    #[serde(default)]
    pub name: String,
    /// The key inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Platform-specific desired configuration; only the type is modelled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlatformSpec {
    /// The platform.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<PlatformType>,
    /// Per-platform details, kept verbatim.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// The observed infrastructure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureStatus {
    /// A unique, human-friendly name of the cluster; drivers tag volumes with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_name: Option<String>,
    /// Deprecated: use `platformStatus.type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<PlatformType>,
    /// The platform and its details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_status: Option<PlatformStatus>,
    /// Deprecated etcd discovery domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_discovery_domain: Option<String>,
    /// The API server's external URL.
    #[serde(
        rename = "apiServerURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_server_url: Option<String>,
    /// The API server's internal URI.
    #[serde(
        rename = "apiServerInternalURI",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_server_internal_uri: Option<String>,
    /// Where the control plane runs: HighlyAvailable (default), SingleReplica, External, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "HighlyAvailable"))]
    pub control_plane_topology: Option<TopologyMode>,
    /// How infrastructure nodes are laid out: HighlyAvailable (default) or SingleReplica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrastructure_topology")]
    pub infrastructure_topology: Option<TopologyMode>,
    /// Whether nodes are set up for CPU partitioning (None by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub cpu_partitioning: Option<CPUPartitioningMode>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// The schema of `infrastructureTopology`: of the topology modes, only the two that apply to
/// infrastructure nodes (our type reads any).
fn infrastructure_topology(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "description": "How infrastructure nodes are laid out: HighlyAvailable (the default) or SingleReplica.",
        "enum": [TopologyMode::HighlyAvailable.as_str(), TopologyMode::SingleReplica.as_str()],
        "default": TopologyMode::HighlyAvailable.as_str(),
    })
}

/// The platform and its details.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlatformStatus {
    /// The platform. Unknown values must be treated as `None`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<PlatformType>,
    /// AWS details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AWSPlatformStatus>,
    /// Azure details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzurePlatformStatus>,
    /// GCP details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GCPPlatformStatus>,
    /// OpenStack details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openstack: Option<OpenStackPlatformStatus>,
    /// IBM Cloud details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ibmcloud: Option<IBMCloudPlatformStatus>,
    /// Power VS details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub powervs: Option<PowerVSPlatformStatus>,
    /// Other platforms' details (vsphere, baremetal, nutanix, ...), kept verbatim.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// A key/value tag.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceTag {
    /// The tag's key.
    pub key: String,
    /// The tag's value.
    pub value: String,
}

/// AWS details of the platform.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSPlatformStatus {
    /// The AWS region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Tags applied to every AWS resource of the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_tags: Vec<ResourceTag>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// Azure details of the platform.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzurePlatformStatus {
    /// The cluster's resource group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group_name: Option<String>,
    /// The resource group of the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_resource_group_name: Option<String>,
    /// The Azure cloud; AzureStackCloud is Azure Stack Hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_name: Option<AzureCloudEnvironment>,
    /// The Resource Manager endpoint (Azure Stack Hub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_endpoint: Option<String>,
    /// Tags applied to every Azure resource of the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_tags: Vec<ResourceTag>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// A GCP resource tag.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPResourceTag {
    /// The organization or project the tag key is defined in.
    #[serde(rename = "parentID")]
    pub parent_id: String,
    /// The tag's key.
    pub key: String,
    /// The tag's value.
    pub value: String,
}

/// GCP details of the platform.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPPlatformStatus {
    /// The GCP project.
    #[serde(rename = "projectID", default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// The GCP region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Labels applied to every GCP resource of the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_labels: Vec<ResourceTag>,
    /// Tags applied to every GCP resource of the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_tags: Vec<GCPResourceTag>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// OpenStack details of the platform.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenStackPlatformStatus {
    /// The cloud's name in clouds.yaml.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_name: Option<String>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// IBM Cloud details of the platform.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IBMCloudPlatformStatus {
    /// The region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The resource group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group_name: Option<String>,
    /// Classic or VPC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_type: Option<String>,
    /// Custom endpoints of IBM Cloud services (`IAM`, `VPC`, `ResourceManager`, ...) that
    /// replace the public ones, e.g. private endpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_endpoints: Vec<IBMCloudServiceEndpoint>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// A custom endpoint of an IBM Cloud service (IBM Cloud and Power VS platforms).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IBMCloudServiceEndpoint {
    /// The service: `IAM`, `VPC`, `ResourceManager`, `ResourceController`, `COS`, ...
    #[serde(default)]
    pub name: String,
    /// Its URL (`https://...`).
    #[serde(default)]
    pub url: String,
}

/// Power VS details of the platform.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PowerVSPlatformStatus {
    /// The region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The resource group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group: Option<String>,
    /// Custom endpoints of IBM Cloud services (`IAM`, `ResourceController`, `Power`, ...)
    /// that replace the public ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_endpoints: Vec<IBMCloudServiceEndpoint>,
    /// Fields not modelled here.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

impl Infrastructure {
    /// The platform as cluster-storage-operator decides it: `status.platformStatus.type` only
    /// (the deprecated `status.platform` is not read), unknown values as `None`, and a missing
    /// platform status as `Empty` (which starts no driver).
    pub fn platform(&self) -> PlatformType {
        self.status
            .as_ref()
            .and_then(|s| s.platform_status.as_ref())
            .and_then(|p| p.type_.as_ref())
            .map_or(PlatformType::Empty, PlatformType::effective)
    }

    /// The control plane topology, HighlyAvailable when unset.
    pub fn control_plane_topology(&self) -> TopologyMode {
        self.status
            .as_ref()
            .and_then(|s| s.control_plane_topology.clone())
            .unwrap_or(TopologyMode::HighlyAvailable)
    }
}

// ---------------------------------------------------------------------------------------------
// Proxy

/// The cluster-wide proxy; the only instance is named `cluster`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "config.openshift.io",
    version = "v1",
    kind = "Proxy",
    plural = "proxies",
    status = "ProxyStatus",
    doc = "Proxy holds the cluster-wide proxy configuration. The only instance is named cluster."
)]
#[serde(rename_all = "camelCase")]
pub struct ProxySpec {
    /// Proxy for HTTP requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
    /// Proxy for HTTPS requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_proxy: Option<String>,
    /// Comma-separated destinations that bypass the proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,
    /// URLs used to check the proxy works.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readiness_endpoints: Vec<String>,
    /// The ConfigMap (in `openshift-config`) with extra trusted CAs.
    #[serde(rename = "trustedCA", default, skip_serializing_if = "Option::is_none")]
    pub trusted_ca: Option<ConfigMapNameReference>,
}

/// A ConfigMap by name. The schema requires the name (Go always writes it); decoding still
/// tolerates its absence.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["name"]))]
pub struct ConfigMapNameReference {
    /// The ConfigMap's name.
    #[serde(default)]
    pub name: String,
}

/// The proxy settings operators consume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxyStatus {
    /// Proxy for HTTP requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
    /// Proxy for HTTPS requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_proxy: Option<String>,
    /// Destinations that bypass the proxy, including the cluster's own networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,
}

impl ProxyStatus {
    /// The proxy environment variables for operands (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`),
    /// only those that are set and not empty.
    pub fn env(&self) -> Vec<(&'static str, &str)> {
        [
            ("HTTP_PROXY", self.http_proxy.as_deref()),
            ("HTTPS_PROXY", self.https_proxy.as_deref()),
            ("NO_PROXY", self.no_proxy.as_deref()),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.filter(|v| !v.is_empty()).map(|v| (name, v)))
        .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// APIServer

string_enum! {
    /// A TLS security profile, after Mozilla's server-side TLS recommendations.
    pub enum TLSProfileType {
        /// For old clients: TLS 1.0 and many ciphers.
        Old = "Old",
        /// The default: TLS 1.2 and AEAD ciphers.
        Intermediate = "Intermediate",
        /// TLS 1.3 only.
        Modern = "Modern",
        /// The ciphers and minimum version given in `custom`.
        Custom = "Custom",
    }
}

/// The cluster's API server configuration; the only instance is named `cluster`. Operators read
/// its TLS security profile for the endpoints they serve.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "config.openshift.io",
    version = "v1",
    kind = "APIServer",
    plural = "apiservers",
    doc = "APIServer holds the cluster-wide API server configuration. The only instance is named cluster."
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = preserve_unknown_fields)]
pub struct APIServerSpec {
    /// The TLS settings of the cluster's servers; unset means Intermediate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<TLSSecurityProfile>,
    /// servingCerts, clientCA, encryption, audit and the rest, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// Which TLS profile, and for `Custom` its settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TLSSecurityProfile {
    /// Old, Intermediate, Modern or Custom.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<TLSProfileType>,
    /// The settings of a Custom profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomTLSProfile>,
    /// `old`, `intermediate`, `modern` (empty objects), kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// The settings of a Custom TLS profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomTLSProfile {
    /// Cipher suites, OpenSSL names (e.g. `ECDHE-RSA-AES128-GCM-SHA256`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ciphers: Vec<String>,
    /// VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13.
    #[serde(
        rename = "minTLSVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub min_tls_version: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// FeatureGate

string_enum! {
    /// A named set of feature gates.
    pub enum FeatureSet {
        CustomNoUpgrade = "CustomNoUpgrade",
        DevPreviewNoUpgrade = "DevPreviewNoUpgrade",
        TechPreviewNoUpgrade = "TechPreviewNoUpgrade",
        OKD = "OKD",
        Default = "",
    }
}

/// The cluster's feature gates; the only instance is named `cluster`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "config.openshift.io",
    version = "v1",
    kind = "FeatureGate",
    plural = "featuregates",
    status = "FeatureGateStatus",
    doc = "FeatureGate selects the cluster's feature gates. The only instance is named cluster."
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(oldSelf.featureSet) ? has(self.featureSet) : true",
    "message": "once set, featureSet may be changed but not removed",
}]))]
pub struct FeatureGateSpec {
    /// The feature set; empty is Default. The NoUpgrade sets cannot be left once chosen, nor
    /// can OKD be turned back into Default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "oldSelf == 'CustomNoUpgrade' ? self == 'CustomNoUpgrade' : true",
            "message": "CustomNoUpgrade cannot be left once chosen",
        },
        {
            "rule": "oldSelf == 'TechPreviewNoUpgrade' ? self == 'TechPreviewNoUpgrade' : true",
            "message": "TechPreviewNoUpgrade cannot be left once chosen",
        },
        {
            "rule": "oldSelf == 'DevPreviewNoUpgrade' ? self == 'DevPreviewNoUpgrade' : true",
            "message": "DevPreviewNoUpgrade cannot be left once chosen",
        },
        {
            "rule": "oldSelf == 'OKD' ? self != '' : true",
            "message": "OKD cannot be changed back to Default",
        },
    ]))]
    pub feature_set: Option<FeatureSet>,
    /// Gates enabled and disabled by hand, for CustomNoUpgrade (may be null).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_no_upgrade: Option<CustomFeatureGates>,
}

/// The form of a feature gate's name: dot-separated words of letters, digits and dashes.
const GATE_NAME_PATTERN: &str = r"^([A-Za-z0-9-]+\.)*[A-Za-z0-9-]+\.?$";

/// Gates enabled and disabled by hand.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomFeatureGates {
    /// Gates to enable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = GATE_NAME_PATTERN)))]
    pub enabled: Vec<String>,
    /// Gates to disable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = GATE_NAME_PATTERN)))]
    pub disabled: Vec<String>,
}

/// The gates in force, per cluster version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureGateStatus {
    /// Conditions of the feature gate machinery.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Vec<Condition>,
    /// One entry per cluster version being rolled out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["version"]))]
    pub feature_gates: Vec<FeatureGateDetails>,
}

/// The gates of one cluster version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FeatureGateDetails {
    /// The cluster version these gates apply to.
    pub version: String,
    /// Enabled gates.
    #[serde(default)]
    pub enabled: Vec<FeatureGateAttributes>,
    /// Disabled gates.
    #[serde(default)]
    pub disabled: Vec<FeatureGateAttributes>,
}

/// A gate by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FeatureGateAttributes {
    /// The gate's name.
    #[schemars(regex(pattern = GATE_NAME_PATTERN))]
    pub name: String,
}

/// What the status says about one gate for one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateState {
    /// Listed as enabled.
    Enabled,
    /// Listed as disabled.
    Disabled,
    /// Not listed for this version, or the version has no entry.
    Unknown,
}

impl FeatureGate {
    /// The feature set, Default when unset.
    pub fn feature_set(&self) -> FeatureSet {
        self.spec.feature_set.clone().unwrap_or(FeatureSet::Default)
    }

    /// Whether `gate` is enabled for cluster `version`, from the status entry of that version
    /// (as library-go's FeatureGateAccess reads it).
    pub fn gate(&self, version: &str, gate: &str) -> GateState {
        let Some(details) = self
            .status
            .as_ref()
            .and_then(|s| s.feature_gates.iter().find(|d| d.version == version))
        else {
            return GateState::Unknown;
        };
        if details.enabled.iter().any(|g| g.name == gate) {
            GateState::Enabled
        } else if details.disabled.iter().any(|g| g.name == gate) {
            GateState::Disabled
        } else {
            GateState::Unknown
        }
    }
}
