//! Field-level schema knowledge for `fieldValidation`: which fields a kind declares (custom
//! resources from their structural schema, built-ins from a table of top-level fields plus
//! ObjectMeta), and duplicate-key detection in JSON bodies. Unknown fields are dropped with a
//! `Warning` (default), dropped silently (`Ignore`) or rejected (`Strict`), like the apiserver.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::OnceLock;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::registry::ResourceDef;

const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Top-level fields of built-in kinds (besides apiVersion, kind, metadata). `None`: not known,
/// nothing is reported for that kind.
fn builtin_top_level(def: &ResourceDef) -> Option<&'static [&'static str]> {
    Some(match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => &["data", "binaryData", "immutable"],
        ("", "secrets") => &["data", "stringData", "type", "immutable"],
        ("", "serviceaccounts") => &[
            "secrets",
            "imagePullSecrets",
            "automountServiceAccountToken",
        ],
        ("", "events") => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        ("events.k8s.io", "events") => &[
            "eventTime",
            "series",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
            "regarding",
            "related",
            "note",
            "type",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ],
        ("storage.k8s.io", "storageclasses") => &[
            "provisioner",
            "parameters",
            "reclaimPolicy",
            "mountOptions",
            "allowVolumeExpansion",
            "volumeBindingMode",
            "allowedTopologies",
        ],
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => &["rules", "aggregationRule"],
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            &["subjects", "roleRef"]
        }
        ("storage.k8s.io", "csidrivers" | "csinodes") => &["spec"],
        ("coordination.k8s.io", "leases") => &["spec"],
        _ => &["spec", "status"],
    })
}

fn generate<T: schemars::JsonSchema>() -> Value {
    // Inlined subschemas make the walk simple; recursive types keep a `$ref`, which the walk
    // treats as opaque.
    let generator = schemars::generate::SchemaSettings::default()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap_or(Value::Null)
}

/// Structural schemas of the served built-in kinds, from k8s-openapi (generated once).
fn builtin_schema(def: &ResourceDef) -> Option<&'static Value> {
    use k8s_openapi::api::{
        apps::v1 as apps, coordination::v1 as coordination, core::v1 as core, events::v1 as events,
        networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
        storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    static SCHEMAS: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    let all = SCHEMAS.get_or_init(|| {
        let mut m = BTreeMap::new();
        m.insert("/namespaces".to_string(), generate::<core::Namespace>());
        m.insert("/configmaps".to_string(), generate::<core::ConfigMap>());
        m.insert("/secrets".to_string(), generate::<core::Secret>());
        m.insert(
            "/serviceaccounts".to_string(),
            generate::<core::ServiceAccount>(),
        );
        m.insert("/services".to_string(), generate::<core::Service>());
        m.insert("/nodes".to_string(), generate::<core::Node>());
        m.insert("/pods".to_string(), generate::<core::Pod>());
        m.insert(
            "/persistentvolumes".to_string(),
            generate::<core::PersistentVolume>(),
        );
        m.insert(
            "/persistentvolumeclaims".to_string(),
            generate::<core::PersistentVolumeClaim>(),
        );
        m.insert("/events".to_string(), generate::<core::Event>());
        m.insert(
            "apps/deployments".to_string(),
            generate::<apps::Deployment>(),
        );
        m.insert("apps/daemonsets".to_string(), generate::<apps::DaemonSet>());
        m.insert(
            "apps/statefulsets".to_string(),
            generate::<apps::StatefulSet>(),
        );
        m.insert(
            "apps/replicasets".to_string(),
            generate::<apps::ReplicaSet>(),
        );
        m.insert(
            "storage.k8s.io/storageclasses".to_string(),
            generate::<storage::StorageClass>(),
        );
        m.insert(
            "storage.k8s.io/csidrivers".to_string(),
            generate::<storage::CSIDriver>(),
        );
        m.insert(
            "storage.k8s.io/csinodes".to_string(),
            generate::<storage::CSINode>(),
        );
        m.insert(
            "storage.k8s.io/volumeattachments".to_string(),
            generate::<storage::VolumeAttachment>(),
        );
        m.insert(
            "rbac.authorization.k8s.io/roles".to_string(),
            generate::<rbac::Role>(),
        );
        m.insert(
            "rbac.authorization.k8s.io/rolebindings".to_string(),
            generate::<rbac::RoleBinding>(),
        );
        m.insert(
            "rbac.authorization.k8s.io/clusterroles".to_string(),
            generate::<rbac::ClusterRole>(),
        );
        m.insert(
            "rbac.authorization.k8s.io/clusterrolebindings".to_string(),
            generate::<rbac::ClusterRoleBinding>(),
        );
        m.insert(
            "coordination.k8s.io/leases".to_string(),
            generate::<coordination::Lease>(),
        );
        m.insert(
            "events.k8s.io/events".to_string(),
            generate::<events::Event>(),
        );
        m.insert(
            "policy/poddisruptionbudgets".to_string(),
            generate::<policy::PodDisruptionBudget>(),
        );
        m.insert(
            "networking.k8s.io/networkpolicies".to_string(),
            generate::<networking::NetworkPolicy>(),
        );
        m.insert(
            "apiextensions.k8s.io/customresourcedefinitions".to_string(),
            generate::<apiext::CustomResourceDefinition>(),
        );
        m
    });
    all.get(&format!("{}/{}", def.group, def.plural))
        .filter(|s| s.get("properties").is_some())
}

/// Unknown field paths of `obj` (dotted, sorted), as the apiserver names them in warnings.
pub fn unknown_fields(def: &ResourceDef, obj: &Value) -> Vec<String> {
    let mut out = BTreeSet::new();
    let Some(m) = obj.as_object() else {
        return Vec::new();
    };
    if !def.custom
        && let Some(schema) = builtin_schema(def)
    {
        for (k, v) in m {
            if matches!(k.as_str(), "apiVersion" | "kind") {
                continue;
            }
            match schema["properties"].get(k) {
                Some(s) => walk_schema(s, v, k, &mut out),
                None => {
                    out.insert(k.clone());
                }
            }
        }
        return out.into_iter().collect();
    }
    if let Some(meta) = m.get("metadata").and_then(Value::as_object) {
        for k in meta.keys() {
            if !OBJECT_META.contains(&k.as_str()) {
                out.insert(format!("metadata.{k}"));
            }
        }
    }
    if def.custom {
        if let Some(schema) = &def.schema {
            for (k, v) in m {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match schema["properties"].get(k) {
                    Some(s) => walk_schema(s, v, k, &mut out),
                    None if preserves(schema) => {}
                    None => {
                        out.insert(k.clone());
                    }
                }
            }
        }
    } else if let Some(top) = builtin_top_level(def) {
        for k in m.keys() {
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                && !top.contains(&k.as_str())
            {
                out.insert(k.clone());
            }
        }
    }
    out.into_iter().collect()
}

fn preserves(s: &Value) -> bool {
    s["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true)
}

fn walk_schema(s: &Value, v: &Value, path: &str, out: &mut BTreeSet<String>) {
    if preserves(s) {
        return;
    }
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties");
            for (k, c) in m {
                let p = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(sub), _) => walk_schema(sub, c, &p, out),
                    (None, Some(a)) if a.is_object() => walk_schema(a, c, &p, out),
                    (None, Some(Value::Bool(true))) => {}
                    _ => {
                        if props.is_some() || additional.is_some() {
                            out.insert(p);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, it) in items.iter().enumerate() {
                    walk_schema(is, it, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// Removes the dotted paths `unknown_fields` reported.
pub fn drop_fields(obj: &mut Value, paths: &[String]) {
    for p in paths {
        // `a.b[3].c` becomes the JSON pointer `/a/b/3/c`.
        let mut segs: Vec<String> = Vec::new();
        for part in p.split('.') {
            match part.split_once('[') {
                Some((n, rest)) => {
                    segs.push(n.to_string());
                    segs.push(rest.trim_end_matches(']').to_string());
                }
                None => segs.push(part.to_string()),
            }
        }
        let Some(last) = segs.pop() else { continue };
        let parent: String = segs.iter().map(|s| format!("/{s}")).collect();
        if let Some(m) = obj.pointer_mut(&parent).and_then(Value::as_object_mut) {
            m.remove(&last);
        }
    }
}

/// Dotted paths of keys that appear twice in the same JSON object.
pub fn duplicate_fields(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let _ = Dup {
        path: String::new(),
        out: &mut out,
    }
    .deserialize(&mut de);
    out
}

struct Dup<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Dup<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dup<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let out = self.out;
        let mut seen = BTreeSet::new();
        while let Some(k) = m.next_key::<String>()? {
            let p = if self.path.is_empty() {
                k.clone()
            } else {
                format!("{}.{k}", self.path)
            };
            if !seen.insert(k) {
                out.push(p.clone());
            }
            m.next_value_seed(Dup {
                path: p,
                out: &mut *out,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        let out = self.out;
        while s
            .next_element_seed(Dup {
                path: self.path.clone(),
                out: &mut *out,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
}
