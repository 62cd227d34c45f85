//! The generated CRDs reject what openshift/api's CRDs reject: each case takes a valid fixture,
//! breaks one field, and expects the API server's validation (OpenAPI structure and CEL) to name it.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

mod common;

use rstest::rstest;
use serde_json::{Value, json};

/// Sets `value` at the JSON pointer `path`, creating missing objects on the way; numeric
/// segments index into existing arrays.
fn set(object: &mut Value, path: &str, value: Value) {
    let mut node = object;
    for part in path.trim_start_matches('/').split('/') {
        node = match node {
            Value::Array(items) => &mut items[part.parse::<usize>().unwrap()],
            other => other
                .as_object_mut()
                .unwrap()
                .entry(part.to_string())
                .or_insert(Value::Null),
        };
    }
    *node = value;
}

fn fixture(name: &str) -> Value {
    common::read_yaml(&common::fixtures_dir().join("valid").join(name))
}

#[rstest]
#[case::name_not_a_known_driver("clustercsidriver-gcp-pd.yaml", "/metadata/name", json!("my.own.driver"), "my.own.driver")]
#[case::management_state("clustercsidriver-gcp-pd.yaml", "/spec/managementState", json!("Sometimes"), "Sometimes")]
#[case::management_state_missing(
    "clustercsidriver-gcp-pd.yaml",
    "/spec/managementState",
    Value::Null,
    "managementState"
)]
#[case::log_level("clustercsidriver-gcp-pd.yaml", "/spec/logLevel", json!("Verbose"), "Verbose")]
#[case::operator_log_level("storage.yaml", "/spec/operatorLogLevel", json!("Loud"), "Loud")]
#[case::storage_class_state("clustercsidriver-gcp-pd.yaml", "/spec/storageClassState", json!("Deleted"), "Deleted")]
#[case::driver_type("clustercsidriver-gcp-pd.yaml", "/spec/driverConfig/driverType", json!("Ceph"), "Ceph")]
#[case::kms_key_arn("clustercsidriver-aws-ebs.yaml", "/spec/driverConfig/aws/kmsKeyARN", json!("arn:aws:s3:::bucket"), "kmsKeyARN must be a valid AWS KMS key ARN")]
#[case::kms_key_arn_partition("clustercsidriver-aws-ebs.yaml", "/spec/driverConfig/aws/kmsKeyARN", json!("arn:aws-mars:kms:us-east-2:123456789012:key/abc"), "kmsKeyARN must be a valid AWS KMS key ARN")]
#[case::efs_refresh_period("clustercsidriver-aws-efs.yaml", "/spec/driverConfig/aws/efsVolumeMetrics/recursiveWalk/refreshPeriodMinutes", json!(0), "refreshPeriodMinutes")]
#[case::efs_walk_when_disabled("clustercsidriver-aws-efs.yaml", "/spec/driverConfig/aws/efsVolumeMetrics/state", json!("Disabled"), "recursiveWalk may only be set when state is RecursiveWalk")]
#[case::azure_subscription("clustercsidriver-azure-disk.yaml", "/spec/driverConfig/azure/diskEncryptionSet/subscriptionID", json!("not-a-uuid"), "not-a-uuid")]
#[case::azure_des_name("clustercsidriver-azure-disk.yaml", "/spec/driverConfig/azure/diskEncryptionSet/name", json!("a".repeat(81)), "diskEncryptionSet/name")]
#[case::gcp_project("clustercsidriver-gcp-pd.yaml", "/spec/driverConfig/gcp/kmsKey/projectID", json!("abc"), "projectID")]
#[case::gcp_key_ring("clustercsidriver-gcp-pd.yaml", "/spec/driverConfig/gcp/kmsKey/keyRing", json!("ring/1"), "keyRing")]
#[case::ibm_crn("clustercsidriver-ibm-vpc.yaml", "/spec/driverConfig/ibmcloud/encryptionKeyCRN", json!("crn:short"), "encryptionKeyCRN")]
#[case::ibm_missing_member(
    "clustercsidriver-ibm-vpc.yaml",
    "/spec/driverConfig/ibmcloud",
    Value::Null,
    "ibmcloud must be set if driverType is 'IBMCloud'"
)]
#[case::ibm_member_on_other_type("clustercsidriver-gcp-pd.yaml", "/spec/driverConfig/ibmcloud", json!({"encryptionKeyCRN": "crn:v1:bluemix:public:kms:us-south:a/c468d8824937fecd8a0860fe0f379bf9:4d97d1ef-5e36-4d1c-b2e3-5a3a4ef1e0c2:key:4d97d1ef-5e36-4d1c-b2e3-5a3a4ef1e0c2"}), "ibmcloud must be set if driverType is 'IBMCloud', but remain unset otherwise")]
#[case::secrets_store_on_other_driver("clustercsidriver-gcp-pd.yaml", "/spec/driverConfig", json!({"driverType": "SecretsStore", "secretsStore": {}}), "driverType SecretsStore is only allowed for the secrets-store.csi.k8s.io driver")]
#[case::vsphere_snapshots("clustercsidriver-vsphere.yaml", "/spec/driverConfig/vSphere/globalMaxSnapshotsPerBlockVolume", json!(33), "globalMaxSnapshotsPerBlockVolume")]
#[case::vsphere_volumes_per_node("clustercsidriver-vsphere.yaml", "/spec/driverConfig/vSphere/maxAllowedBlockVolumesPerNode", json!(256), "maxAllowedBlockVolumesPerNode")]
#[case::condition_status("clustercsidriver-gcp-pd.yaml", "/status/conditions", json!([{"type": "Available", "status": "Maybe"}]), "Maybe")]
#[case::condition_type("clustercsidriver-gcp-pd.yaml", "/status/conditions", json!([{"type": "not a type!", "status": "True"}]), "not a type!")]
#[case::token_expiry("clustercsidriver-secrets-store.yaml", "/spec/driverConfig/secretsStore/tokenRequests/managed/audiences/0/expirationSeconds", json!(60), "expirationSeconds")]
#[case::vsphere_legacy_driver("storage.yaml", "/spec/vsphereStorageDriver", json!("LegacyDeprecatedInTreeDriver"), "VSphereStorageDriver can not be set to LegacyDeprecatedInTreeDriver")]
#[case::platform_type("infrastructure-gcp.yaml", "/status/platformStatus/type", json!("MarsCloud"), "MarsCloud")]
#[case::topology("infrastructure-gcp.yaml", "/status/controlPlaneTopology", json!("Sideways"), "Sideways")]
#[case::feature_set("featuregate.yaml", "/spec/featureSet", json!("Everything"), "Everything")]
#[case::cdd_node_update_strategy("csidriverdeployment-hostpath-2018.yaml", "/spec/nodeUpdateStrategy", json!("Sometimes"), "Sometimes")]
#[case::cdd_kubelet_dir_relative("csidriverdeployment-hostpath-2018.yaml", "/spec/kubeletRootDir", json!("var/lib/kubelet"), "kubeletRootDir")]
#[case::cdd_driver_name_missing(
    "csidriverdeployment-hostpath-2018.yaml",
    "/spec/driverName",
    Value::Null,
    "driverName"
)]
#[case::cdd_socket_missing(
    "csidriverdeployment-hostpath-2018.yaml",
    "/spec/driverSocket",
    Value::Null,
    "driverSocket"
)]
#[case::related_object_without_name("clusteroperator-storage.yaml", "/status/relatedObjects", json!([{"group": "", "resource": "namespaces"}]), "name")]
fn invalid_values_are_rejected(
    #[case] fixture_name: &str,
    #[case] path: &str,
    #[case] value: Value,
    #[case] expected: &str,
) {
    let valid = fixture(fixture_name);
    assert!(
        common::validate(&valid, None).is_empty(),
        "{fixture_name} must start valid"
    );

    let mut broken = valid;
    if value.is_null() {
        // Null means "remove the field".
        let (parent, field) = path.rsplit_once('/').unwrap();
        broken
            .pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(field);
    } else {
        set(&mut broken, path, value);
    }
    let errors = common::validate(&broken, None);
    assert!(
        errors.iter().any(|e| e.contains(expected)),
        "expected an error mentioning {expected:?}, got {errors:#?}"
    );
}

#[test]
fn latest_available_revision_must_only_increase() {
    let old = fixture("clustercsidriver-gcp-pd.yaml");
    let mut new = old.clone();
    set(&mut new, "/status/latestAvailableRevision", json!(3));
    assert!(common::validate(&new, Some(&old)).is_empty());
    let mut lower = new.clone();
    set(&mut lower, "/status/latestAvailableRevision", json!(2));
    let errors = common::validate(&lower, Some(&new));
    assert!(
        errors.iter().any(|e| e.contains("must only increase")),
        "{errors:#?}"
    );
}

#[test]
fn vsphere_storage_driver_cannot_be_unset_once_set() {
    let old = fixture("storage.yaml");
    let mut new = old.clone();
    new["spec"]
        .as_object_mut()
        .unwrap()
        .remove("vsphereStorageDriver");
    let errors = common::validate(&new, Some(&old));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("VSphereStorageDriver is required once set")),
        "{errors:#?}"
    );
}
