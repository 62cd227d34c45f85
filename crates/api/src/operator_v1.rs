//! `operator.openshift.io/v1`: the operator configuration types our operators own and serve,
//! ClusterCSIDriver and Storage, with the OperatorSpec/OperatorStatus they embed. Field names,
//! enums, defaults and validation follow openshift/api exactly so that objects written by
//! OpenShift's own operators decode here and ours decode there.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::schema::raw_extension;
use crate::string_enum;

/// The API group of this module.
pub const GROUP: &str = "operator.openshift.io";
/// The API version of this module.
pub const VERSION: &str = "v1";

string_enum! {
    /// How an operator treats its operands (`spec.managementState`).
    #[derive(Default)]
    pub enum ManagementState {
        /// The operator keeps its operands at the desired state.
        #[default]
        Managed = "Managed",
        /// The operator does not touch its operands; status stops being updated.
        Unmanaged = "Unmanaged",
        /// The operator removes its operands (only where removal is supported).
        Removed = "Removed",
        /// Managed, but without blocking upgrades.
        Force = "Force",
    }
}

string_enum! {
    /// Verbosity of an operand (`logLevel`) or of the operator itself (`operatorLogLevel`).
    /// The empty value means the default, `Normal`.
    pub enum LogLevel {
        /// Unset; same as `Normal`.
        Empty = "",
        /// The default level, klog `--v=2`.
        Normal = "Normal",
        /// klog `--v=4`.
        Debug = "Debug",
        /// klog `--v=6`.
        Trace = "Trace",
        /// klog `--v=8`.
        TraceAll = "TraceAll",
    }
}

impl LogLevel {
    /// The klog verbosity (`--v`) that this level stands for. Unknown values count as `Normal`.
    pub fn klog_verbosity(&self) -> u8 {
        match self {
            Self::Debug => 4,
            Self::Trace => 6,
            Self::TraceAll => 8,
            Self::Normal | Self::Empty | Self::Other(_) => 2,
        }
    }
}

string_enum! {
    /// The status of a condition.
    pub enum ConditionStatus {
        /// The condition holds.
        True = "True",
        /// The condition does not hold.
        False = "False",
        /// It is not known whether the condition holds.
        Unknown = "Unknown",
    }
}

/// The configuration every OpenShift operator CR shares (`OperatorSpec`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSpec {
    /// Whether and how the operator should manage the component; Managed when unset (the
    /// schema, as openshift/api's, does not require it).
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::management_state")]
    pub management_state: ManagementState,
    /// Intent for operand logging: Normal, Debug, Trace or TraceAll. Defaults to Normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Normal"))]
    pub log_level: Option<LogLevel>,
    /// Intent for the operator's own logging. Defaults to Normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Normal"))]
    pub operator_log_level: Option<LogLevel>,
    /// Overrides that the operator does not support; setting them blocks upgrades.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "raw_extension")]
    pub unsupported_config_overrides: Option<Value>,
    /// Sparse configuration written by the operator's config observers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "raw_extension")]
    pub observed_config: Option<Value>,
}

impl OperatorSpec {
    /// The operand log level with the API default applied.
    pub fn log_level(&self) -> LogLevel {
        effective_log_level(self.log_level.as_ref())
    }

    /// The operator's own log level with the API default applied.
    pub fn operator_log_level(&self) -> LogLevel {
        effective_log_level(self.operator_log_level.as_ref())
    }
}

fn effective_log_level(level: Option<&LogLevel>) -> LogLevel {
    match level {
        None | Some(LogLevel::Empty) => LogLevel::Normal,
        Some(level) => level.clone(),
    }
}

/// One condition of an operator (`OperatorCondition`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorCondition {
    /// The condition type, e.g. `GCPPDDriverControllerServiceControllerAvailable`.
    #[serde(rename = "type")]
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub type_: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// A machine-readable CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The last generation of an operand the operator acted on (`GenerationStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerationStatus {
    /// The operand's API group.
    pub group: String,
    /// The operand's resource (plural).
    pub resource: String,
    /// The operand's namespace; empty for cluster-scoped operands.
    pub namespace: String,
    /// The operand's name.
    pub name: String,
    /// The generation the operator last saw.
    #[serde(default)]
    pub last_generation: i64,
    /// An optional hash of the operand's inputs.
    #[serde(default)]
    pub hash: String,
}

/// The status every OpenShift operator CR shares (`OperatorStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// The generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions, keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<OperatorCondition>,
    /// The level this operator is at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How many replicas of the operand are ready. Always written, as OpenShift does.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The newest deployed revision, for operators with revisioned operands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self >= oldSelf", "message": "must only increase"}]))]
    pub latest_available_revision: Option<i32>,
    /// The generations of the operands the operator manages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["group", "resource", "namespace", "name"]
    ))]
    pub generations: Vec<GenerationStatus>,
}

impl OperatorStatus {
    /// The condition of the given type, if present.
    pub fn condition(&self, type_: &str) -> Option<&OperatorCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

string_enum! {
    /// The names a ClusterCSIDriver may have: the CSI drivers OpenShift knows how to install.
    pub enum CSIDriverName {
        AWSEBS = "ebs.csi.aws.com",
        AWSEFS = "efs.csi.aws.com",
        AzureDisk = "disk.csi.azure.com",
        AzureFile = "file.csi.azure.com",
        GCPFilestore = "filestore.csi.storage.gke.io",
        GCPPD = "pd.csi.storage.gke.io",
        Cinder = "cinder.csi.openstack.org",
        VSphere = "csi.vsphere.vmware.com",
        Manila = "manila.csi.openstack.org",
        KubeVirt = "csi.kubevirt.io",
        SharedResource = "csi.sharedresource.openshift.io",
        AlibabaDisk = "diskplugin.csi.alibabacloud.com",
        IBMVPCBlock = "vpc.block.csi.ibm.io",
        IBMPowerVSBlock = "powervs.csi.ibm.com",
        SecretsStore = "secrets-store.csi.k8s.io",
        SambaDriver = "smb.csi.k8s.io",
    }
}

string_enum! {
    /// Whether the driver operator manages its StorageClasses (`spec.storageClassState`).
    /// Empty means Managed.
    pub enum StorageClassStateName {
        Empty = "",
        Managed = "Managed",
        Unmanaged = "Unmanaged",
        Removed = "Removed",
    }
}

string_enum! {
    /// Which member of `driverConfig` is set.
    pub enum CSIDriverType {
        Empty = "",
        AWS = "AWS",
        Azure = "Azure",
        GCP = "GCP",
        IBMCloud = "IBMCloud",
        VSphere = "vSphere",
        SecretsStore = "SecretsStore",
    }
}

/// A cluster-wide CSI driver installed by an OpenShift driver operator. The name is the CSI
/// driver's name; the spec tunes how the operator runs it.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "operator.openshift.io",
    version = "v1",
    kind = "ClusterCSIDriver",
    plural = "clustercsidrivers",
    status = "ClusterCSIDriverStatus",
    doc = "ClusterCSIDriver configures a CSI driver operator; its name is the CSI driver name."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCSIDriverSpec {
    /// The configuration shared by all operators.
    #[serde(flatten)]
    pub operator: OperatorSpec,
    /// Whether the operator manages the StorageClasses it creates: Managed (the default),
    /// Unmanaged (created once, then left alone) or Removed (deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_state: Option<StorageClassStateName>,
    /// Driver-specific settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_config: Option<CSIDriverConfigSpec>,
}

impl ClusterCSIDriverSpec {
    /// The StorageClass state with the API default (Managed) applied.
    pub fn storage_class_state(&self) -> StorageClassStateName {
        match &self.storage_class_state {
            None | Some(StorageClassStateName::Empty) => StorageClassStateName::Managed,
            Some(state) => state.clone(),
        }
    }
}

/// The status of a ClusterCSIDriver is the shared operator status.
pub type ClusterCSIDriverStatus = OperatorStatus;

/// Driver-specific configuration: a union keyed by `driverType` (`CSIDriverConfigSpec`).
/// Unknown driver types are a no-op, as openshift/api requires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.driverType) && self.driverType == 'IBMCloud' ? has(self.ibmcloud) : !has(self.ibmcloud)",
     "message": "ibmcloud must be set if driverType is 'IBMCloud', but remain unset otherwise"},
    {"rule": "has(self.driverType) && self.driverType == 'SecretsStore' ? has(self.secretsStore) : !has(self.secretsStore)",
     "message": "secretsStore must be set if driverType is 'SecretsStore', but remain unset otherwise"},
]))]
pub struct CSIDriverConfigSpec {
    /// Which driver the configuration is for.
    pub driver_type: CSIDriverType,
    /// AWS EBS and EFS settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AWSCSIDriverConfigSpec>,
    /// Azure Disk settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureCSIDriverConfigSpec>,
    /// GCP PD settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GCPCSIDriverConfigSpec>,
    /// IBM Cloud VPC Block settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ibmcloud: Option<IBMCloudCSIDriverConfigSpec>,
    /// vSphere settings.
    #[serde(rename = "vSphere", default, skip_serializing_if = "Option::is_none")]
    pub vsphere: Option<VSphereCSIDriverConfigSpec>,
    /// Secrets Store CSI driver settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_store: Option<SecretsStoreCSIDriverConfigSpec>,
}

/// AWS driver settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSCSIDriverConfigSpec {
    /// The ARN of the KMS key used to encrypt volumes of the default StorageClass.
    #[serde(rename = "kmsKeyARN", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "matches(self, '^arn:(aws|aws-cn|aws-us-gov|aws-iso|aws-iso-b|aws-iso-e|aws-iso-f):kms:[a-z0-9-]+:[0-9]{12}:(key|alias)/.*$')",
        "message": "kmsKeyARN must be a valid AWS KMS key ARN: arn:<partition>:kms:<region>:<account-id>:key/<id> or alias/<name>"
    }]))]
    pub kms_key_arn: Option<String>,
    /// Volume metrics of the EFS driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efs_volume_metrics: Option<AWSEFSVolumeMetrics>,
}

string_enum! {
    /// How the EFS driver computes volume metrics.
    pub enum AWSEFSVolumeMetricsState {
        RecursiveWalk = "RecursiveWalk",
        Disabled = "Disabled",
    }
}

/// EFS volume metrics (`efsVolumeMetrics`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSEFSVolumeMetrics {
    /// RecursiveWalk or Disabled.
    pub state: AWSEFSVolumeMetricsState,
    /// Tuning of the recursive walk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive_walk: Option<AWSEFSVolumeMetricsRecursiveWalkConfig>,
}

/// Tuning of the EFS recursive walk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSEFSVolumeMetricsRecursiveWalkConfig {
    /// Minutes between metric refreshes; 240 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 43200))]
    pub refresh_period_minutes: Option<i32>,
    /// Concurrent walks per file system; 5 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub fs_rate_limit: Option<i32>,
}

/// Azure driver settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureCSIDriverConfigSpec {
    /// The disk encryption set used by the default StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_encryption_set: Option<AzureDiskEncryptionSet>,
}

/// An Azure disk encryption set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureDiskEncryptionSet {
    /// The subscription, a UUID.
    #[serde(rename = "subscriptionID")]
    #[schemars(
        length(max = 36),
        regex(
            pattern = r"^[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$"
        )
    )]
    pub subscription_id: String,
    /// The resource group of the encryption set.
    #[schemars(length(max = 90), regex(pattern = r"^[\w\.\-\(\)]*[\w\-\(\)]$"))]
    pub resource_group: String,
    /// The encryption set's name.
    #[schemars(length(max = 80), regex(pattern = r"^[a-zA-Z0-9\_-]+$"))]
    pub name: String,
}

/// GCP driver settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPCSIDriverConfigSpec {
    /// The KMS key used to encrypt volumes of the default StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key: Option<GCPKMSKeyReference>,
}

/// A Cloud KMS key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPKMSKeyReference {
    /// The key's name.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-zA-Z0-9\_-]+$"))]
    pub name: String,
    /// The key ring holding the key.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-zA-Z0-9\_-]+$"))]
    pub key_ring: String,
    /// The project holding the key ring.
    #[serde(rename = "projectID")]
    #[schemars(
        length(min = 6, max = 30),
        regex(pattern = r"^[a-z][a-z0-9-]+[a-z0-9]$")
    )]
    pub project_id: String,
    /// The key ring's location; `global` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-zA-Z0-9\_-]+$"))]
    pub location: Option<String>,
}

impl GCPKMSKeyReference {
    /// The full key resource name the GCP PD driver takes as `disk-encryption-kms-key`.
    pub fn resource_name(&self) -> String {
        format!(
            "projects/{}/locations/{}/keyRings/{}/cryptoKeys/{}",
            self.project_id,
            self.location.as_deref().unwrap_or("global"),
            self.key_ring,
            self.name
        )
    }
}

/// IBM Cloud driver settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IBMCloudCSIDriverConfigSpec {
    /// The CRN of the key used to encrypt volumes of the default StorageClass.
    #[serde(rename = "encryptionKeyCRN")]
    #[schemars(
        length(min = 144, max = 154),
        regex(
            pattern = r"^crn:v[0-9]+:bluemix:(public|private):(kms|hs-crypto):[a-z-]+:a/[0-9a-f]+:[0-9a-f-]{36}:key:[0-9a-f-]{36}$"
        )
    )]
    pub encryption_key_crn: String,
}

/// vSphere driver settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereCSIDriverConfigSpec {
    /// vCenter tag categories used for topology-aware provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub topology_categories: Option<Vec<String>>,
    /// Snapshots per block volume on all datastores; 3 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32))]
    pub global_max_snapshots_per_block_volume: Option<i32>,
    /// Snapshots per block volume on vSAN datastores.
    #[serde(
        rename = "granularMaxSnapshotsPerBlockVolumeInVSAN",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 32))]
    pub granular_max_snapshots_per_block_volume_in_vsan: Option<i32>,
    /// Snapshots per block volume on Virtual Volumes datastores.
    #[serde(
        rename = "granularMaxSnapshotsPerBlockVolumeInVVOL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 32))]
    pub granular_max_snapshots_per_block_volume_in_vvol: Option<i32>,
    /// Block volumes that may attach to one node; 59 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 255))]
    pub max_allowed_block_volumes_per_node: Option<i32>,
}

/// Secrets Store CSI driver settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct SecretsStoreCSIDriverConfigSpec {
    /// Rotation of mounted secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_rotation: Option<SecretRotation>,
    /// Service account tokens passed to providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_requests: Option<TokenRequests>,
}

string_enum! {
    /// Whether mounted secrets are rotated.
    pub enum SecretRotationType {
        None = "None",
        Custom = "Custom",
    }
}

/// Rotation of mounted secrets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.type) && self.type == 'Custom' ? has(self.custom) : !has(self.custom)",
    "message": "custom is set exactly when type is Custom"
}]))]
pub struct SecretRotation {
    /// None or Custom.
    #[serde(rename = "type")]
    pub type_: SecretRotationType,
    /// Settings for Custom rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomSecretRotation>,
}

/// Custom rotation settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct CustomSecretRotation {
    /// Seconds a mounted secret is kept before it is refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 31_560_000))]
    pub minimum_refresh_age: Option<i32>,
}

string_enum! {
    /// Who manages the token requests of the Secrets Store driver.
    pub enum TokenRequestsType {
        Managed = "Managed",
        Unmanaged = "Unmanaged",
    }
}

/// Service account tokens passed to Secrets Store providers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.type) && self.type == 'Managed' ? has(self.managed) : !has(self.managed)",
    "message": "managed is set exactly when type is Managed"
}]))]
pub struct TokenRequests {
    /// Managed or Unmanaged.
    #[serde(rename = "type")]
    pub type_: TokenRequestsType,
    /// Settings for Managed token requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<ManagedTokenRequests>,
}

/// Token requests managed by the operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ManagedTokenRequests {
    /// Audiences of the requested tokens, keyed by audience.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(min = 0, max = 10),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["audience"])
    )]
    pub audiences: Vec<TokenAudience>,
}

/// One token audience.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenAudience {
    /// The audience.
    #[schemars(length(min = 0, max = 253))]
    pub audience: String,
    /// Requested token lifetime in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 600, max = 315_360_000))]
    pub expiration_seconds: Option<i32>,
}

string_enum! {
    /// The vSphere storage driver choice of the Storage CR (deprecated; CSI is the only driver).
    pub enum StorageDriverType {
        Empty = "",
        LegacyDeprecatedInTreeDriver = "LegacyDeprecatedInTreeDriver",
        CSIWithMigrationDriver = "CSIWithMigrationDriver",
    }
}

/// The cluster storage operator's configuration; the only instance is named `cluster`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "operator.openshift.io",
    version = "v1",
    kind = "Storage",
    plural = "storages",
    status = "StorageStatus",
    doc = "Storage configures the cluster storage operator. The only instance is named cluster."
)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// The configuration shared by all operators.
    #[serde(flatten)]
    pub operator: OperatorSpec,
    /// Deprecated: vSphere always uses the CSI driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self != \"LegacyDeprecatedInTreeDriver\"",
        "message": "VSphereStorageDriver can not be set to LegacyDeprecatedInTreeDriver"
    }]))]
    pub vsphere_storage_driver: Option<StorageDriverType>,
}

/// The name of the only Storage object.
pub const STORAGE_NAME: &str = "cluster";

/// The status of Storage is the shared operator status.
pub type StorageStatus = OperatorStatus;

// ---------------------------------------------------------------------------------------------
// CloudCredential

/// cloud-credential-operator's configuration; the only instance is named `cluster`. Driver
/// operators read its credentials mode: in `Manual` mode nobody provisions a CredentialsRequest
/// unless short-lived token settings are given.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "operator.openshift.io",
    version = "v1",
    kind = "CloudCredential",
    plural = "cloudcredentials",
    doc = "CloudCredential configures cloud-credential-operator. The only instance is named cluster."
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::preserve_unknown_fields)]
pub struct CloudCredentialSpec {
    /// `""` (default), `Manual`, `Mint` or `Passthrough`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_mode: Option<String>,
    /// managementState, logLevel and the rest, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: std::collections::BTreeMap<String, Value>,
}
