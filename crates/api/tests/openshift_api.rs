//! The CRDs we generate for OpenShift's kinds (ClusterCSIDriver, Storage, ClusterOperator,
//! Infrastructure, Proxy, FeatureGate) are field-identical to openshift/api's (the Default
//! feature set): same properties, types, formats, enums, patterns, limits, defaults, list types,
//! required fields, printer columns and validation rules. Only descriptions and the messages of
//! rules differ (ours are our own words). The fixtures are openshift/api's, with those two left
//! out (see `tests/fixtures/openshift-api/README.md`).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/openshift-api",
        &format!("{name}.yaml"),
    ]
    .iter()
    .collect();
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

fn ours(name: &str) -> Value {
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.metadata.name.as_deref() == Some(name))
        .unwrap();
    serde_json::to_value(crd).unwrap()
}

/// Drops descriptions and rule messages, and normalises numbers (YAML's 1 and JSON's 1.0).
fn comparable(node: &Value) -> Value {
    match node {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "description")
                .map(|(k, v)| {
                    if k == "x-kubernetes-validations" {
                        let rules = v.as_array().cloned().unwrap_or_default();
                        let rules = rules
                            .into_iter()
                            .map(|mut rule| {
                                if let Some(rule) = rule.as_object_mut() {
                                    rule.remove("message");
                                }
                                comparable(&rule)
                            })
                            .collect();
                        (k.clone(), Value::Array(rules))
                    } else {
                        (k.clone(), comparable(v))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(comparable).collect()),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => Value::from(f as i64),
            _ => node.clone(),
        },
        other => other.clone(),
    }
}

/// Every path where the two documents differ.
fn differences(theirs: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    match (theirs, ours) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let p = format!("{path}.{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(x, y, &p, out),
                    (Some(x), None) => {
                        out.push(format!("{p}: openshift/api has {x}, ours nothing"))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{p}: ours has {y}, openshift/api nothing"))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ if theirs != ours => out.push(format!("{path}: openshift/api {theirs}, ours {ours}")),
        _ => {}
    }
}

/// Rules of openshift/api that ours state differently on purpose: openshift/api's use CEL's
/// optional syntax (`.?`, `orValue`), which the CEL engine of our offline tests (kube's) cannot
/// compile; ours say the same with `has()`. (openshift/api's rule, ours.)
const REWRITTEN_RULES: &[(&str, &str)] = &[
    (
        "self.spec.?driverConfig.driverType.orValue('') == 'SecretsStore' ? self.metadata.name == 'secrets-store.csi.k8s.io' : true",
        "!has(self.spec.driverConfig) || !has(self.spec.driverConfig.driverType) || self.spec.driverConfig.driverType != 'SecretsStore' || self.metadata.name == 'secrets-store.csi.k8s.io'",
    ),
    (
        "oldSelf.spec.?driverConfig.?secretsStore.?tokenRequests.?type.orValue('') != 'Managed' || self.spec.?driverConfig.?secretsStore.?tokenRequests.?type.orValue('') == 'Managed'",
        "!(has(oldSelf.spec.driverConfig) && has(oldSelf.spec.driverConfig.secretsStore) && has(oldSelf.spec.driverConfig.secretsStore.tokenRequests) && oldSelf.spec.driverConfig.secretsStore.tokenRequests.type == 'Managed') || (has(self.spec.driverConfig) && has(self.spec.driverConfig.secretsStore) && has(self.spec.driverConfig.secretsStore.tokenRequests) && self.spec.driverConfig.secretsStore.tokenRequests.type == 'Managed')",
    ),
];

/// openshift/api's document with its rewritten rules replaced by ours.
fn with_rewritten_rules(node: &Value) -> Value {
    match node {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| match (k.as_str(), v.as_str()) {
                    ("rule", Some(rule)) => {
                        let ours = REWRITTEN_RULES
                            .iter()
                            .find(|(theirs, _)| *theirs == rule)
                            .map_or(rule, |(_, ours)| ours);
                        (k.clone(), Value::from(ours))
                    }
                    _ => (k.clone(), with_rewritten_rules(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(with_rewritten_rules).collect()),
        other => other.clone(),
    }
}

#[test]
fn every_rewritten_rule_is_one_of_openshift_apis() {
    let text = std::fs::read_to_string(
        [
            env!("CARGO_MANIFEST_DIR"),
            "tests/fixtures/openshift-api/clustercsidrivers.operator.openshift.io.yaml",
        ]
        .iter()
        .collect::<PathBuf>(),
    )
    .unwrap();
    let fixture: Value = serde_saphyr::from_str(&text).unwrap();
    let rules = fixture.to_string();
    for (theirs, _) in REWRITTEN_RULES {
        assert!(
            rules.contains(&Value::from(*theirs).to_string()),
            "not a rule of openshift/api any more: {theirs}"
        );
    }
}

#[rstest::rstest]
#[case::cluster_csi_driver("clustercsidrivers.operator.openshift.io")]
#[case::storage("storages.operator.openshift.io")]
#[case::cluster_operator("clusteroperators.config.openshift.io")]
#[case::infrastructure("infrastructures.config.openshift.io")]
#[case::proxy("proxies.config.openshift.io")]
#[case::feature_gate("featuregates.config.openshift.io")]
fn the_crd_is_field_identical_to_openshift_api(#[case] name: &str) {
    let theirs = with_rewritten_rules(&comparable(&fixture(name)["spec"]));
    let ours = comparable(&ours(name)["spec"]);
    let mut out = Vec::new();
    differences(&theirs, &ours, "spec", &mut out);
    assert!(
        out.is_empty(),
        "{name} differs from openshift/api in {} places:\n{}",
        out.len(),
        out.join("\n")
    );
}
