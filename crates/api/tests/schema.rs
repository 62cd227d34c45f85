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
#[case::log_level("clustercsidriver-gcp-pd.yaml", "/spec/logLevel", json!("Verbose"), "Verbose")]
#[case::operator_log_level("storage.yaml", "/spec/operatorLogLevel", json!("Loud"), "Loud")]
#[case::storage_class_state("clustercsidriver-gcp-pd.yaml", "/spec/storageClassState", json!("Deleted"), "Deleted")]
#[case::driver_type("clustercsidriver-gcp-pd.yaml", "/spec/driverConfig/driverType", json!("Ceph"), "Ceph")]
#[case::kms_key_arn("clustercsidriver-aws-ebs.yaml", "/spec/driverConfig/aws/kmsKeyARN", json!("arn:aws:s3:::bucket"), "kmsKeyARN must be a valid AWS KMS key ARN")]
#[case::kms_key_arn_partition("clustercsidriver-aws-ebs.yaml", "/spec/driverConfig/aws/kmsKeyARN", json!("arn:aws-mars:kms:us-east-2:123456789012:key/abc"), "kmsKeyARN must be a valid AWS KMS key ARN")]
#[case::efs_refresh_period("clustercsidriver-aws-efs.yaml", "/spec/driverConfig/aws/efsVolumeMetrics/recursiveWalk/refreshPeriodMinutes", json!(0), "refreshPeriodMinutes")]
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
#[case::rotation_custom_without_settings("clustercsidriver-secrets-store.yaml", "/spec/driverConfig/secretsStore/secretRotation", json!({"type": "Custom"}), "custom is set exactly when type is Custom")]
#[case::rotation_settings_without_custom("clustercsidriver-secrets-store.yaml", "/spec/driverConfig/secretsStore/secretRotation", json!({"type": "None", "custom": {"minimumRefreshAge": 60}}), "custom is set exactly when type is Custom")]
#[case::token_requests_managed_without_settings("clustercsidriver-secrets-store.yaml", "/spec/driverConfig/secretsStore/tokenRequests", json!({"type": "Managed"}), "managed is set exactly when type is Managed")]
#[case::empty_secrets_store("clustercsidriver-secrets-store.yaml", "/spec/driverConfig/secretsStore", json!({}), "secretsStore")]
#[case::secrets_store_driver_of_another_type("clustercsidriver-secrets-store.yaml", "/spec/driverConfig", json!({"driverType": "AWS"}), "the secrets-store.csi.k8s.io driver takes only driverType SecretsStore")]
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

/// What openshift/api's CRDs accept, ours accept too (no rule of our own invention): each case
/// changes one field of a valid fixture, and the object, and its update from the fixture, stay
/// valid.
#[rstest]
#[case::management_state_missing(
    "clustercsidriver-gcp-pd.yaml",
    "/spec/managementState",
    Value::Null
)]
#[case::efs_walk_settings_while_disabled("clustercsidriver-aws-efs.yaml", "/spec/driverConfig/aws/efsVolumeMetrics/state", json!("Disabled"))]
#[case::vsphere_storage_driver_unset("storage.yaml", "/spec/vsphereStorageDriver", Value::Null)]
#[case::kms_key_location_unset(
    "clustercsidriver-gcp-pd.yaml",
    "/spec/driverConfig/gcp/kmsKey/location",
    Value::Null
)]
fn what_openshift_api_accepts_is_accepted(
    #[case] fixture_name: &str,
    #[case] path: &str,
    #[case] value: Value,
) {
    let old = fixture(fixture_name);
    let mut new = old.clone();
    if value.is_null() {
        let (parent, field) = path.rsplit_once('/').unwrap();
        let parent = new.pointer_mut(parent).unwrap().as_object_mut().unwrap();
        assert!(parent.remove(field).is_some(), "{fixture_name} has {path}");
    } else {
        set(&mut new, path, value);
    }
    assert_eq!(common::validate(&new, None), Vec::<String>::new());
    assert_eq!(common::validate(&new, Some(&old)), Vec::<String>::new());
}

#[test]
fn managed_token_requests_stay_managed() {
    let old = fixture("clustercsidriver-secrets-store.yaml");
    assert_eq!(
        old["spec"]["driverConfig"]["secretsStore"]["tokenRequests"]["type"],
        "Managed"
    );
    let mut new = old.clone();
    set(
        &mut new,
        "/spec/driverConfig/secretsStore/tokenRequests",
        json!({"type": "Unmanaged"}),
    );
    assert_eq!(common::validate(&new, None), Vec::<String>::new());
    let errors = common::validate(&new, Some(&old));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("tokenRequests type Managed cannot be changed once set")),
        "{errors:#?}"
    );
}
