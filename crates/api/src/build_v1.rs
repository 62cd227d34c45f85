//! `build.openshift.io/v1`: the Build, as far as building with volumes needs it, and build
//! volumes: the `volumes` of a Docker or Source build strategy, which mount Secrets, ConfigMaps
//! or CSI ephemeral volumes into the build (read only). Wire-identical to openshift/api; fields
//! not modelled here are kept in `extra` maps so nothing is lost on a status update.

use k8s_openapi::api::core::v1::{
    CSIVolumeSource, ConfigMapVolumeSource, EnvVar, LocalObjectReference, ObjectReference,
    ResourceRequirements, SecretVolumeSource,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config_v1::Extra;
use crate::schema::preserve_unknown_fields;
use crate::string_enum;

string_enum! {
    /// The state of a build.
    pub enum BuildPhase {
        /// Created, not yet scheduled.
        New = "New",
        /// The build pod exists but is not running yet.
        Pending = "Pending",
        /// The build pod runs.
        Running = "Running",
        /// The build succeeded.
        Complete = "Complete",
        /// The build failed (the build itself, or it could not run).
        Failed = "Failed",
        /// The build could not be run because of an error in the build system.
        Error = "Error",
        /// The build was cancelled.
        Cancelled = "Cancelled",
    }
}

impl BuildPhase {
    /// Whether the build is over.
    pub fn is_complete(&self) -> bool {
        matches!(
            self,
            Self::Complete | Self::Failed | Self::Error | Self::Cancelled
        )
    }
}

string_enum! {
    /// How a build builds.
    pub enum BuildStrategyType {
        /// A Dockerfile.
        Docker = "Docker",
        /// Source-to-image.
        Source = "Source",
        /// A custom builder image.
        Custom = "Custom",
        /// A Jenkins pipeline (deprecated).
        JenkinsPipeline = "JenkinsPipeline",
    }
}

/// A build: one run of a build strategy over a source, producing an image.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "build.openshift.io",
    version = "v1",
    kind = "Build",
    plural = "builds",
    namespaced,
    status = "BuildStatus",
    doc = "Build is one run of a build strategy (Docker or Source here) producing an image."
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = preserve_unknown_fields)]
pub struct BuildSpec {
    /// The ServiceAccount the build pod runs as; `builder` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// How to build.
    #[serde(default)]
    pub strategy: BuildStrategy,
    /// Where the image goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<BuildOutput>,
    /// Resources of the build pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// How long the build may run, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_deadline_seconds: Option<i64>,
    /// Nodes the build pod may run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<std::collections::BTreeMap<String, String>>,
    /// Source, revision, triggeredBy, hooks and the rest, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// The strategy of a build; `type` says which member is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = preserve_unknown_fields)]
pub struct BuildStrategy {
    /// Docker, Source, Custom or JenkinsPipeline.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<BuildStrategyType>,
    /// The Docker strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_strategy: Option<DockerBuildStrategy>,
    /// The Source (source-to-image) strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_strategy: Option<SourceBuildStrategy>,
    /// Custom and JenkinsPipeline strategies, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// Building from a Dockerfile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = preserve_unknown_fields)]
pub struct DockerBuildStrategy {
    /// The base image, overriding the Dockerfile's FROM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<ObjectReference>,
    /// Environment of the build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Volumes mounted into the build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub volumes: Vec<BuildVolume>,
    /// pullSecret, noCache, dockerfilePath, buildArgs and the rest, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// Building with source-to-image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = preserve_unknown_fields)]
pub struct SourceBuildStrategy {
    /// The builder image.
    #[serde(default)]
    pub from: ObjectReference,
    /// Environment of the build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Volumes mounted into the build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub volumes: Vec<BuildVolume>,
    /// pullSecret, scripts, incremental and the rest, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// Where a build pushes its image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = preserve_unknown_fields)]
pub struct BuildOutput {
    /// The image to push to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<ObjectReference>,
    /// Credentials for the push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_secret: Option<LocalObjectReference>,
    /// imageLabels and the rest, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// What happened to a build.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = preserve_unknown_fields)]
pub struct BuildStatus {
    /// New, Pending, Running, Complete, Failed, Error or Cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BuildPhase>,
    /// A CamelCase reason for the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the build pod started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
    /// When the build ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_timestamp: Option<Time>,
    /// Conditions mirroring the phase (New, Pending, Running, Complete, Failed, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<BuildCondition>,
    /// duration, outputDockerImageReference, config, logSnippet and the rest, kept as sent.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// One condition of a build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildCondition {
    /// The phase this condition is about.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: crate::operator_v1::ConditionStatus,
    /// When the condition was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// A CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Build {
    /// The volumes of the build's strategy (Docker and Source have them; others none).
    pub fn volumes(&self) -> &[BuildVolume] {
        let strategy = &self.spec.strategy;
        match strategy.type_ {
            Some(BuildStrategyType::Docker) => strategy
                .docker_strategy
                .as_ref()
                .map_or(&[], |s| &s.volumes),
            Some(BuildStrategyType::Source) => strategy
                .source_strategy
                .as_ref()
                .map_or(&[], |s| &s.volumes),
            _ => &[],
        }
    }

    /// The field path of the strategy's volumes, for error messages.
    pub fn volumes_path(&self) -> &'static str {
        match self.spec.strategy.type_ {
            Some(BuildStrategyType::Source) => "spec.strategy.sourceStrategy.volumes",
            _ => "spec.strategy.dockerStrategy.volumes",
        }
    }
}

string_enum! {
    /// The kind of source of a build volume.
    pub enum BuildVolumeSourceType {
        /// A Secret of the build's namespace.
        Secret = "Secret",
        /// A ConfigMap of the build's namespace.
        ConfigMap = "ConfigMap",
        /// A CSI ephemeral volume.
        CSI = "CSI",
    }
}

/// A volume mounted into a build.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildVolume {
    /// A DNS-1123 label, unique among the build's volumes.
    pub name: String,
    /// Where the volume's content comes from.
    #[serde(default)]
    pub source: BuildVolumeSource,
    /// Where it is mounted in the image being built.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["destinationPath"]))]
    pub mounts: Vec<BuildVolumeMount>,
}

/// The source of a build volume: `type` says which member is set, and only that one may be.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildVolumeSource {
    /// Secret, ConfigMap or CSI.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<BuildVolumeSourceType>,
    /// The Secret, for type Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    /// The ConfigMap, for type ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    /// The CSI ephemeral volume, for type CSI. Builds mount it read only whatever `readOnly` says
    /// (a `readOnly: false` is refused by validation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi: Option<CSIVolumeSource>,
}

/// Where a build volume is mounted during the build.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildVolumeMount {
    /// An absolute path in the image being built, without `..` or `:`.
    pub destination_path: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openshifts_entitlement_example_round_trips() {
        let yaml = r#"
name: my-csi-shared-secret
mounts:
- destinationPath: /etc/pki/entitlement
source:
  type: CSI
  csi:
    driver: csi.sharedresource.openshift.io
    readOnly: true
    volumeAttributes:
      sharedSecret: my-share-bc
"#;
        let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        let volume: BuildVolume = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(volume.source.type_, Some(BuildVolumeSourceType::CSI));
        assert_eq!(
            volume.source.csi.as_ref().unwrap().driver,
            "csi.sharedresource.openshift.io"
        );
        assert_eq!(serde_json::to_value(&volume).unwrap(), value);
    }
}
