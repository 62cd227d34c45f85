//! `build.openshift.io/v1` build volumes: the `volumes` of a Docker or Source build strategy,
//! which mount Secrets, ConfigMaps or CSI ephemeral volumes into the build (read only).
//! Wire-identical to openshift/api; the Build kind itself arrives with the build controller.

use k8s_openapi::api::core::v1::{CSIVolumeSource, ConfigMapVolumeSource, SecretVolumeSource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum;

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
    #[serde(default)]
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
    #[serde(default)]
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
