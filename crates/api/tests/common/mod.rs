//! Helpers shared by the api crate's tests: fixtures, and validation of an object against the
//! generated CRD the way an API server would (OpenAPI structure with `jsonschema`, CEL rules with
//! kube's client-side CEL validator).

#![allow(dead_code, clippy::unwrap_used)] // test helpers: a panic is a test failure

use std::path::{Path, PathBuf};

use serde_json::Value;

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn valid_fixtures() -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(fixtures_dir().join("valid"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures found");
    files
        .into_iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                read_yaml(&p),
            )
        })
        .collect()
}

/// The openAPIV3Schema of the CRD serving `kind`.
pub fn schema_for(kind: &str) -> Value {
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for kind {kind}"));
    let crd = serde_json::to_value(crd).unwrap();
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
        .unwrap()
        .clone()
}

/// Validates `object` (and, for transition rules, `old`) against its kind's CRD. Returns every
/// error message, empty when the object would be accepted.
pub fn validate(object: &Value, old: Option<&Value>) -> Vec<String> {
    let kind = object["kind"].as_str().expect("object has a kind");
    let schema = schema_for(kind);
    let mut errors = Vec::new();

    // The OpenAPI structure. Kubernetes itself validates apiVersion/kind/metadata separately;
    // the CRD schema only constrains what it lists, which is what we check here.
    let validator = jsonschema::validator_for(&openapi_to_json_schema(schema.clone())).unwrap();
    for error in validator.iter_errors(object) {
        errors.push(format!("{}: {}", error.instance_path(), error));
    }

    // CEL rules (x-kubernetes-validations), with the API server's defaulting applied first.
    if let Err(cel_errors) = kube::core::cel::Validator::new().validate(&schema, object, old) {
        for error in cel_errors.as_slice() {
            errors.push(format!("{}: {}", error.field_path, error.message));
        }
    }
    errors
}

/// OpenAPI v3 schemas say `nullable: true` where JSON Schema says `type: [T, "null"]`.
fn openapi_to_json_schema(mut schema: Value) -> Value {
    fn walk(node: &mut Value) {
        match node {
            Value::Object(map) => {
                if map.remove("nullable") == Some(Value::Bool(true))
                    && let Some(Value::String(t)) = map.get("type").cloned()
                {
                    map.insert("type".into(), serde_json::json!([t, "null"]));
                    if let Some(Value::Array(values)) = map.get_mut("enum") {
                        values.push(Value::Null);
                    }
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}

/// Drops `null` members: Go's encoder writes some absent optional fields as `null`
/// (`extension: null`), which carries no information and which our types omit.
pub fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}
