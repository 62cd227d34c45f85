//! A field-by-field comparison of two sets of Kubernetes objects, reported as paths
//! (`Deployment/x: spec.template.spec.containers[csi-driver].args`), and the list of expected
//! differences it is checked against.
//!
//! Rules, chosen so that every reported difference is one an API server would also see:
//! - objects are matched by `Kind/name`;
//! - maps are compared key by key;
//! - lists of objects that all have a unique `name` are compared by name, and their order is
//!   compared separately (`<path>#order`: the order of containers, env or volumes is part of a
//!   pod template, so a different order alone restarts pods);
//! - other lists of objects are compared by index; lists of scalars (args, verbs) as a whole.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

/// One difference: where, and the value on each side (`None`: absent on that side).
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    pub at: String,
    pub ours: Option<Value>,
    pub openshift: Option<Value>,
}

/// Which side alone has something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Side {
    Ours,
    Openshift,
}

/// Why a difference exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// OpenShift's operator adds or changes this at run time (a hook, a selector), so its
    /// generated asset does not show it although the object it writes does.
    Runtime,
    /// We differ on purpose.
    Deliberate,
    /// Not matched yet: work left, named in `why`. Listed so the gap is visible and cannot grow
    /// unnoticed; an entry goes when the difference does.
    Pending,
}

/// An expected difference, as listed in a driver's `<module>.openshift.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expected {
    /// The path; `*` matches any run of characters.
    pub at: String,
    /// Only this side has the object or field; values are not compared.
    #[serde(default)]
    pub only: Option<Side>,
    /// Our value (absent when omitted), compared when `only` is unset.
    #[serde(default)]
    pub ours: Option<Value>,
    /// OpenShift's value (absent when omitted), compared when `only` is unset.
    #[serde(default)]
    pub openshift: Option<Value>,
    /// Both sides have something here and the values are not compared (a whole part that is
    /// ours by design, e.g. a role's rules, whose reason `why` gives); `only` must be unset.
    #[serde(default)]
    pub any_value: bool,
    pub kind: Kind,
    pub why: String,
}

/// A driver's list of expected differences.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedList {
    /// Where the reference comes from (repository, path, commit).
    pub reference: String,
    #[serde(default)]
    pub differences: Vec<Expected>,
}

impl Expected {
    pub fn matches(&self, d: &Difference) -> bool {
        if !glob(&self.at, &d.at) {
            return false;
        }
        match self.only {
            Some(Side::Ours) => d.ours.is_some() && d.openshift.is_none(),
            Some(Side::Openshift) => d.ours.is_none() && d.openshift.is_some(),
            None if self.any_value => true,
            None => self.ours == d.ours && self.openshift == d.openshift,
        }
    }
}

/// `*` matches any run of characters, everything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(pos) = rest.find(part) else {
                return false;
            };
            rest = &rest[pos + part.len()..];
        }
    }
    true
}

/// `Kind/name` of an object.
pub fn object_key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Every difference between our objects and OpenShift's.
pub fn diff_objects(ours: &[Value], openshift: &[Value]) -> Vec<Difference> {
    let index = |objects: &[Value]| -> BTreeMap<String, Value> {
        objects.iter().map(|o| (object_key(o), o.clone())).collect()
    };
    let (ours, openshift) = (index(ours), index(openshift));
    let keys: BTreeSet<&String> = ours.keys().chain(openshift.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        match (ours.get(key), openshift.get(key)) {
            (Some(a), Some(b)) => diff_value(&format!("{key}:"), a, b, &mut out),
            (a, b) => out.push(Difference {
                at: key.clone(),
                ours: a.map(|_| Value::String("present".to_owned())),
                openshift: b.map(|_| Value::String("present".to_owned())),
            }),
        }
    }
    out
}

fn key_segment(key: &str) -> String {
    if key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

fn join(path: &str, segment: &str) -> String {
    if path.ends_with(':') {
        format!("{path} {segment}")
    } else {
        format!("{path}.{segment}")
    }
}

fn names(list: &[Value]) -> Option<Vec<String>> {
    let names: Option<Vec<String>> = list
        .iter()
        .map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let names = names?;
    let unique: BTreeSet<&String> = names.iter().collect();
    (unique.len() == names.len()).then_some(names)
}

fn diff_value(path: &str, a: &Value, b: &Value, out: &mut Vec<Difference>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let p = join(path, &key_segment(key));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff_value(&p, x, y, out),
                    (x, y) => out.push(Difference {
                        at: p,
                        ours: x.cloned(),
                        openshift: y.cloned(),
                    }),
                }
            }
        }
        (Value::Array(a), Value::Array(b))
            if a.iter().chain(b).all(Value::is_object) && !a.is_empty() && !b.is_empty() =>
        {
            if let (Some(na), Some(nb)) = (names(a), names(b)) {
                let common_a: Vec<&String> = na.iter().filter(|n| nb.contains(n)).collect();
                let common_b: Vec<&String> = nb.iter().filter(|n| na.contains(n)).collect();
                if common_a != common_b {
                    out.push(Difference {
                        at: format!("{path}#order"),
                        ours: Some(Value::from(
                            common_a.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                        )),
                        openshift: Some(Value::from(
                            common_b.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                        )),
                    });
                }
                let all: BTreeSet<&String> = na.iter().chain(&nb).collect();
                for name in all {
                    let p = format!("{path}[{name}]");
                    let x = na.iter().position(|n| n == name).map(|i| &a[i]);
                    let y = nb.iter().position(|n| n == name).map(|i| &b[i]);
                    match (x, y) {
                        (Some(x), Some(y)) => diff_value(&p, x, y, out),
                        (x, y) => out.push(Difference {
                            at: p,
                            ours: x.cloned(),
                            openshift: y.cloned(),
                        }),
                    }
                }
            } else {
                for i in 0..a.len().max(b.len()) {
                    let p = format!("{path}[{i}]");
                    match (a.get(i), b.get(i)) {
                        (Some(x), Some(y)) => diff_value(&p, x, y, out),
                        (x, y) => out.push(Difference {
                            at: p,
                            ours: x.cloned(),
                            openshift: y.cloned(),
                        }),
                    }
                }
            }
        }
        (a, b) if a != b => out.push(Difference {
            at: path.to_owned(),
            ours: Some(a.clone()),
            openshift: Some(b.clone()),
        }),
        _ => {}
    }
}

/// Drops the annotations that carry hashes of run-time inputs (`operator.openshift.io/dep-*`,
/// `operator.openshift.io/spec-hash`): both operators compute them from what the cluster holds.
pub fn drop_hash_annotations(v: &mut Value) {
    if let Value::Object(map) = v {
        if let Some(Value::Object(annotations)) = map.get_mut("annotations") {
            annotations.retain(|k, _| {
                !(k.starts_with("operator.openshift.io/dep-")
                    || k == "operator.openshift.io/spec-hash")
            });
            if annotations.is_empty() {
                map.remove("annotations");
            }
        }
        map.values_mut().for_each(drop_hash_annotations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn glob_matches_runs() {
        assert!(glob("*: metadata.labels", "Service/x: metadata.labels"));
        assert!(glob("a*c*e", "abcde"));
        assert!(!glob("a*c", "abcd"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exactly"));
    }

    #[test]
    fn named_lists_compare_by_name_and_order() {
        let ours = json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "args": ["--x"]}, {"name": "b"}]}});
        let theirs = json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "b"}, {"name": "a", "args": ["--y"]}, {"name": "c"}]}});
        let d = diff_objects(&[ours], &[theirs]);
        let at: Vec<&str> = d.iter().map(|d| d.at.as_str()).collect();
        assert_eq!(
            at,
            [
                "Pod/p: spec.containers#order",
                "Pod/p: spec.containers[a].args",
                "Pod/p: spec.containers[c]",
            ]
        );
    }

    #[test]
    fn objects_on_one_side_and_dotted_keys() {
        let a = json!({"kind": "A", "metadata": {"name": "x", "labels": {"a.b/c": "1"}}});
        let b = json!({"kind": "A", "metadata": {"name": "x"}});
        let c = json!({"kind": "B", "metadata": {"name": "y"}});
        let d = diff_objects(&[a], &[b, c]);
        assert_eq!(d[0].at, "A/x: metadata.labels");
        assert_eq!(d[1].at, "B/y");
        assert_eq!(d[1].ours, None);
    }
}
