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

/// Every bad input of `tests/fixtures/bad-inputs.yaml` (also checked on a real API server by
/// `tests/e2e/tests/bad_inputs.rs`) is refused, with an error naming it.
#[test]
fn every_bad_input_is_refused() {
    let cases = api::testdata::bad_inputs().unwrap();
    assert!(cases.len() >= 30, "the table has {} cases", cases.len());
    let mut wrong = Vec::new();
    for case in &cases {
        let valid = case.valid().unwrap();
        let before = common::validate(&valid, None);
        if !before.is_empty() {
            wrong.push(format!(
                "{}: {} must start valid: {before:?}",
                case.name, case.fixture
            ));
            continue;
        }
        let errors = common::validate(&case.broken().unwrap(), None);
        if !errors.iter().any(|e| e.contains(&case.offline)) {
            wrong.push(format!(
                "{}: expected an error mentioning {:?}, got {errors:?}",
                case.name, case.offline
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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
#[case::azure_cloud_name_empty(
    "infrastructure-azure-stack.yaml",
    "/status/platformStatus/azure/cloudName",
    json!("")
)]
#[case::cluster_operator_condition_status_free(
    "clusteroperator-storage.yaml",
    "/status/conditions/0/status",
    json!("Maybe")
)]
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
