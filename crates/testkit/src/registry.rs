//! The resource registry: which kinds the fake server serves, their REST names, scope, status
//! subresource, and the schema facts server-side apply needs (list types, atomic structs).
//!
//! Built-in discovery entries are copied from a real v1.36 apiserver (`builtin_resources.json`,
//! extracted from the conformance recording) so discovery of served kinds is byte-for-byte real.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// How a JSON list is merged and tracked by server-side apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// `x-kubernetes-list-type: map`: items identified by these keys.
    Map(Vec<String>),
    /// `x-kubernetes-list-type: set`: items identified by value.
    Set,
    /// Replaced as a whole.
    Atomic,
}

/// One served resource (a group/version/plural).
#[derive(Clone, Debug)]
pub struct ResourceDef {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// Has a `/status` subresource: the main endpoint ignores status, `/status` ignores the rest.
    pub status: bool,
    /// A custom resource (served from a CRD).
    pub custom: bool,
    /// Discovery entry in `APIResourceList` form.
    pub legacy: Value,
    /// Discovery entry in `apidiscovery.k8s.io/v2` form.
    pub aggregated: Value,
    /// For custom resources: the version's `openAPIV3Schema`.
    pub schema: Option<Value>,
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group objects are stored under: events.k8s.io Events share core Events' storage.
    pub fn storage_group(&self) -> &str {
        if self.group == "events.k8s.io" && self.plural == "events" {
            ""
        } else {
            &self.group
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether `metadata.generation` is maintained for this kind.
    pub fn has_generation(&self) -> bool {
        self.custom
            || matches!(
                self.plural.as_str(),
                "deployments"
                    | "daemonsets"
                    | "statefulsets"
                    | "replicasets"
                    | "poddisruptionbudgets"
                    | "networkpolicies"
                    | "customresourcedefinitions"
            )
    }

    /// Whether a plain DELETE answers with the object rather than a `Status`.
    pub fn delete_returns_object(&self) -> bool {
        matches!(
            self.plural.as_str(),
            "services" | "storageclasses" | "csidrivers" | "csinodes" | "namespaces" | "nodes"
        ) && !self.custom
    }

    fn schema_at(&self, names: &[String]) -> Option<&Value> {
        let mut cur = self.schema.as_ref()?;
        for n in names {
            // Step through array items transparently: names never contain list indices.
            if cur.get("type").and_then(Value::as_str) == Some("array") {
                cur = cur.get("items")?;
            }
            cur = match cur.get("properties").and_then(|p| p.get(n)) {
                Some(c) => c,
                None => cur.get("additionalProperties")?,
            };
        }
        Some(cur)
    }

    /// List type of the list found at the field-name path `names`.
    pub fn list_type(&self, names: &[String]) -> ListType {
        if self.custom
            && let Some(s) = self.schema_at(names)
        {
            return match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => ListType::Map(
                    s.get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|k| k.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
                Some("set") => ListType::Set,
                _ => builtin_list_type(names),
            };
        }
        builtin_list_type(names)
    }

    /// An object replaced as a whole by apply (`+structType=atomic` / `x-kubernetes-map-type: atomic`).
    pub fn atomic_object(&self, names: &[String]) -> bool {
        if self.custom
            && let Some(s) = self.schema_at(names)
            && s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
        {
            return true;
        }
        let last = names.last().map(String::as_str);
        let parent = names.len().checked_sub(2).map(|i| names[i].as_str());
        if self.custom {
            return false;
        }
        matches!((parent, last), (Some("spec"), Some("selector")))
            || matches!(
                last,
                Some("involvedObject" | "regarding" | "related" | "roleRef")
            )
    }

    /// A list-map whose items are owned whole (`+structType=atomic` items such as OwnerReference).
    pub fn atomic_items(&self, names: &[String]) -> bool {
        !self.custom
            && names
                .last()
                .is_some_and(|n| n == "ownerReferences" || n == "imagePullSecrets")
    }

    /// A struct that always exists (Go value field), so an Update manager never owns it as a member.
    pub fn value_struct(&self, names: &[String]) -> bool {
        if names.len() == 1 && names[0] == "metadata" {
            return true;
        }
        if self.custom {
            return false;
        }
        matches!(
            names.last().map(String::as_str),
            Some(
                "metadata"
                    | "spec"
                    | "status"
                    | "template"
                    | "strategy"
                    | "updateStrategy"
                    | "names"
                    | "acceptedNames"
                    | "containers"
                    | "source"
            )
        )
    }
}

fn builtin_list_type(names: &[String]) -> ListType {
    let s = |v: &[&str]| ListType::Map(v.iter().map(|x| x.to_string()).collect());
    let last = names.last().map(String::as_str).unwrap_or("");
    let parent = names.len().checked_sub(2).map(|i| names[i].as_str());
    match last {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => s(&["name"]),
        "volumeMounts" => s(&["mountPath"]),
        "volumeDevices" => s(&["devicePath"]),
        "ports" if matches!(parent, Some("containers" | "initContainers")) => {
            s(&["containerPort", "protocol"])
        }
        "ports" if parent == Some("spec") => s(&["port", "protocol"]),
        "finalizers" if parent == Some("metadata") => ListType::Set,
        "volumeLifecycleModes" => ListType::Set,
        "ownerReferences" => s(&["uid"]),
        "conditions" => s(&["type"]),
        "topologySpreadConstraints" => s(&["topologyKey", "whenUnsatisfiable"]),
        "hostAliases" => s(&["ip"]),
        "drivers" if parent == Some("spec") => s(&["name"]),
        _ => ListType::Atomic,
    }
}

/// The set of served resources, looked up by group/version/plural or by group/kind.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    by_path: BTreeMap<(String, String, String), ResourceDef>,
}

impl Registry {
    pub fn builtin() -> Registry {
        let mut r = Registry::default();
        let raw: Value =
            serde_json::from_str(include_str!("builtin_resources.json")).unwrap_or(Value::Null);
        for e in raw.as_array().into_iter().flatten() {
            let st = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let legacy = e.get("legacy").cloned().unwrap_or(Value::Null);
            let mut aggregated = e.get("aggregated").cloned().unwrap_or(Value::Null);
            let status = e.get("status").and_then(Value::as_bool).unwrap_or(false);
            // Only the status subresource is served; advertise only what is served.
            if let Some(subs) = aggregated
                .get_mut("subresources")
                .and_then(Value::as_array_mut)
            {
                subs.retain(|s| s.get("subresource").and_then(Value::as_str) == Some("status"));
                if subs.is_empty()
                    && let Some(m) = aggregated.as_object_mut()
                {
                    m.remove("subresources");
                }
            }
            let ls = |k: &str| {
                legacy
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            r.insert(ResourceDef {
                group: st("group"),
                version: st("version"),
                kind: ls("kind"),
                plural: ls("name"),
                namespaced: legacy
                    .get("namespaced")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                status,
                custom: false,
                legacy,
                aggregated,
                schema: None,
            });
        }
        r
    }

    pub fn insert(&mut self, d: ResourceDef) {
        self.by_path
            .insert((d.group.clone(), d.version.clone(), d.plural.clone()), d);
    }

    pub fn remove_group_plural(&mut self, group: &str, plural: &str) {
        self.by_path
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceDef> {
        self.by_path
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceDef> {
        self.by_path.values()
    }

    /// Groups in a stable order: the built-in groups in apiserver order, then custom groups.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        // kube-apiserver v1.36's order (its group priorities), as the recorded discovery shows.
        const ORDER: &[&str] = &[
            "",
            "apiregistration.k8s.io",
            "apps",
            "events.k8s.io",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "autoscaling",
            "batch",
            "certificates.k8s.io",
            "networking.k8s.io",
            "policy",
            "rbac.authorization.k8s.io",
            "storage.k8s.io",
            "admissionregistration.k8s.io",
            "apiextensions.k8s.io",
            "scheduling.k8s.io",
            "coordination.k8s.io",
            "node.k8s.io",
            "discovery.k8s.io",
            "resource.k8s.io",
            "flowcontrol.apiserver.k8s.io",
        ];
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        let mut push = |g: &str, v: &str| match out.iter_mut().find(|(x, _)| x == g) {
            Some((_, vs)) => {
                if !vs.iter().any(|x| x == v) {
                    vs.push(v.to_string())
                }
            }
            None => out.push((g.to_string(), vec![v.to_string()])),
        };
        for g in ORDER {
            for d in self.all().filter(|d| d.group == *g) {
                push(&d.group, &d.version);
            }
        }
        for d in self.all().filter(|d| !ORDER.contains(&d.group.as_str())) {
            push(&d.group, &d.version);
        }
        out
    }

    /// The resource defs a CRD object defines (one per served version).
    pub fn defs_from_crd(crd: &Value) -> Vec<ResourceDef> {
        let spec = &crd["spec"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let group = s(&spec["group"]);
        let names = &spec["names"];
        let kind = s(&names["kind"]);
        let plural = s(&names["plural"]);
        let singular = match names["singular"].as_str() {
            Some(x) => x.to_string(),
            None => kind.to_lowercase(),
        };
        let namespaced = spec["scope"].as_str() == Some("Namespaced");
        let mut out = Vec::new();
        for v in spec["versions"].as_array().into_iter().flatten() {
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            let version = s(&v["name"]);
            let status = v["subresources"].get("status").is_some();
            let mut legacy = json!({
                "name": plural, "singularName": singular, "namespaced": namespaced, "kind": kind,
                "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
                "storageVersionHash": crate::util::storage_version_hash(&group, &version, &kind),
            });
            let mut aggregated = json!({
                "resource": plural,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "scope": if namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": singular,
                "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
            });
            for (k, lk) in [("shortNames", "shortNames"), ("categories", "categories")] {
                if let Some(x) = names.get(k) {
                    legacy[lk] = x.clone();
                    aggregated[lk] = x.clone();
                }
            }
            if status {
                aggregated["subresources"] = json!([{
                    "subresource": "status",
                    "responseKind": {"group": group, "version": version, "kind": kind},
                    "verbs": ["get", "patch", "update"],
                }]);
            }
            out.push(ResourceDef {
                group: group.clone(),
                version,
                kind: kind.clone(),
                plural: plural.clone(),
                namespaced,
                status,
                custom: true,
                legacy: legacy.clone(),
                aggregated,
                schema: v["schema"].get("openAPIV3Schema").cloned(),
            });
        }
        out
    }
}
