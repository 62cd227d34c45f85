//! Defaulting of built-in kinds, as the apiserver's `SetDefaults_*` functions do for the fields our
//! operators read back (Deployment/DaemonSet/pod template, Service, StorageClass, CSIDriver,
//! Namespace, Event). Kinds not listed here are stored as sent.

use serde_json::{Map, Value, json};

fn obj(v: &mut Value) -> Option<&mut Map<String, Value>> {
    v.as_object_mut()
}

fn default(m: &mut Map<String, Value>, k: &str, v: Value) {
    if !m.contains_key(k) || m.get(k) == Some(&Value::Null) {
        m.insert(k.to_string(), v);
    }
}

pub fn apply_defaults(group: &str, plural: &str, o: &mut Value) {
    // Go's omitempty: empty maps and lists of built-in kinds are not stored.
    if !plural.contains('.')
        && let Some(m) = o.get_mut("metadata").and_then(obj)
    {
        for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
            let empty = match m.get(k) {
                Some(Value::Object(x)) => x.is_empty(),
                Some(Value::Array(x)) => x.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                m.remove(k);
            }
        }
    }
    if group.is_empty()
        && matches!(plural, "configmaps" | "secrets")
        && let Some(m) = obj(o)
    {
        for k in ["data", "binaryData", "stringData"] {
            if m.get(k)
                .is_some_and(|v| v.as_object().is_some_and(Map::is_empty) || v.is_null())
            {
                m.remove(k);
            }
        }
    }
    // Secrets: stringData is a write-only convenience; the apiserver merges it into data
    // (base64-encoded, overriding data's keys) and never stores it.
    if group.is_empty()
        && plural == "secrets"
        && let Some(m) = obj(o)
        && let Some(Value::Object(strings)) = m.remove("stringData")
    {
        use base64::Engine;
        let data = m.entry("data").or_insert_with(|| json!({}));
        if let Some(data) = obj(data) {
            for (key, value) in strings {
                if let Some(text) = value.as_str() {
                    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                    data.insert(key, Value::String(encoded));
                }
            }
        }
    }
    match (group, plural) {
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            if let Some(spec) = o.get_mut("spec").and_then(obj) {
                default(spec, "conversion", json!({"strategy": "None"}));
            }
        }
        ("apps", "deployments") => deployment(o),
        ("apps", "daemonsets") => daemonset(o),
        ("apps", "statefulsets") | ("apps", "replicasets") => {
            if let Some(spec) = o.get_mut("spec").and_then(obj) {
                default(spec, "replicas", json!(1));
                if let Some(t) = spec.get_mut("template") {
                    pod_template(t);
                }
            }
        }
        ("", "pods") => {
            if let Some(spec) = o.get_mut("spec") {
                pod_spec(spec);
            }
        }
        ("", "services") => service(o),
        ("storage.k8s.io", "storageclasses") => {
            if let Some(m) = obj(o) {
                default(m, "reclaimPolicy", json!("Delete"));
                default(m, "volumeBindingMode", json!("Immediate"));
            }
        }
        ("storage.k8s.io", "csidrivers") => {
            if let Some(spec) = o.get_mut("spec").and_then(obj) {
                default(spec, "attachRequired", json!(true));
                default(spec, "podInfoOnMount", json!(false));
                default(spec, "volumeLifecycleModes", json!(["Persistent"]));
                default(spec, "storageCapacity", json!(false));
                default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
                default(spec, "requiresRepublish", json!(false));
                default(spec, "seLinuxMount", json!(false));
            }
        }
        ("", "namespaces") => {
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(meta) = o.get_mut("metadata").and_then(obj) {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
        }
        _ => {}
    }
}

/// Defaults set after managed fields are computed (the apiserver's strategy, not the decoder):
/// namespace finalizers/phase and Service IP allocation never show up in managedFields.
pub fn apply_strategy_defaults(group: &str, plural: &str, o: &mut Value, ip: u64) {
    match (group, plural) {
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            if let Some(m) = obj(o) {
                let stored: Vec<Value> = m
                    .get("spec")
                    .and_then(|s| s.get("versions"))
                    .and_then(Value::as_array)
                    .map(|vs| {
                        vs.iter()
                            .filter(|v| v["storage"].as_bool() == Some(true))
                            .map(|v| v["name"].clone())
                            .collect()
                    })
                    .unwrap_or_default();
                default(
                    m,
                    "status",
                    json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored}),
                );
            }
        }
        ("", "namespaces") => {
            if let Some(m) = obj(o) {
                default(m, "spec", json!({"finalizers": ["kubernetes"]}));
                default(m, "status", json!({"phase": "Active"}));
            }
        }
        ("", "services") => {
            if let Some(spec) = o.get_mut("spec").and_then(obj) {
                let ty = spec
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("ClusterIP")
                    .to_string();
                if ty != "ExternalName" && !spec.contains_key("clusterIP") {
                    let addr = format!("10.0.{}.{}", (ip / 250) % 250, ip % 250 + 1);
                    spec.insert("clusterIP".into(), json!(addr));
                    spec.insert("clusterIPs".into(), json!([addr]));
                }
                default(spec, "ipFamilies", json!(["IPv4"]));
                default(spec, "ipFamilyPolicy", json!("SingleStack"));
            }
            if let Some(m) = obj(o) {
                default(m, "status", json!({"loadBalancer": {}}));
            }
        }
        ("apps", "deployments" | "daemonsets" | "statefulsets" | "replicasets") => {
            if let Some(m) = obj(o) {
                default(m, "status", json!({}));
            }
        }
        ("", "events") => {
            if let Some(m) = obj(o) {
                default(m, "eventTime", Value::Null);
                default(m, "reportingComponent", json!(""));
                default(m, "reportingInstance", json!(""));
            }
        }
        ("events.k8s.io", "events") => {
            if let Some(m) = obj(o) {
                default(m, "deprecatedSource", json!({}));
                default(m, "deprecatedFirstTimestamp", Value::Null);
                default(m, "deprecatedLastTimestamp", Value::Null);
            }
        }

        _ => {}
    }
}

fn deployment(o: &mut Value) {
    let Some(spec) = o.get_mut("spec").and_then(obj) else {
        return;
    };
    default(spec, "replicas", json!(1));
    let strategy = spec
        .entry("strategy")
        .or_insert_with(|| json!({"type": "RollingUpdate"}));
    if let Some(s) = strategy.as_object_mut() {
        default(s, "type", json!("RollingUpdate"));
        if s.get("type") == Some(&json!("RollingUpdate")) {
            let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(r) = ru.as_object_mut() {
                default(r, "maxUnavailable", json!("25%"));
                default(r, "maxSurge", json!("25%"));
            }
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(t) = spec.get_mut("template") {
        pod_template(t);
    }
}

fn daemonset(o: &mut Value) {
    let Some(spec) = o.get_mut("spec").and_then(obj) else {
        return;
    };
    let strategy = spec
        .entry("updateStrategy")
        .or_insert_with(|| json!({"type": "RollingUpdate"}));
    if let Some(s) = strategy.as_object_mut() {
        default(s, "type", json!("RollingUpdate"));
        if s.get("type") == Some(&json!("RollingUpdate")) {
            let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(r) = ru.as_object_mut() {
                default(r, "maxUnavailable", json!(1));
                default(r, "maxSurge", json!(0));
            }
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
    if let Some(t) = spec.get_mut("template") {
        pod_template(t);
    }
}

fn pod_template(t: &mut Value) {
    if let Some(spec) = t.get_mut("spec") {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut Value) {
    let Some(s) = obj(spec) else { return };
    for key in ["containers", "initContainers"] {
        if let Some(cs) = s.get_mut(key).and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                default(c, "resources", json!({}));
                default(c, "terminationMessagePath", json!("/dev/termination-log"));
                default(c, "terminationMessagePolicy", json!("File"));
                let latest = c
                    .get("image")
                    .and_then(Value::as_str)
                    .is_some_and(|i| i.ends_with(":latest") || !i.contains(':'));
                default(
                    c,
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        default(p, "protocol", json!("TCP"));
                    }
                }
                // A pod field reference names the core API's version, as kube-apiserver
                // defaults it (so an object written with or without it is stored the same).
                if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
                    for field in env
                        .iter_mut()
                        .filter_map(|e| e.pointer_mut("/valueFrom/fieldRef"))
                        .filter_map(Value::as_object_mut)
                    {
                        default(field, "apiVersion", json!("v1"));
                    }
                }
            }
        }
    }
    if let Some(vs) = s.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in vs.iter_mut().filter_map(Value::as_object_mut) {
            // A volume without a source is an emptyDir (SetDefaults_Volume).
            if !VOLUME_SOURCES.iter().any(|k| v.contains_key(*k)) {
                v.insert("emptyDir".to_owned(), json!({}));
            }
            if let Some(cm) = v.get_mut("configMap").and_then(Value::as_object_mut) {
                default(cm, "defaultMode", json!(420));
            }
            if let Some(sec) = v.get_mut("secret").and_then(Value::as_object_mut) {
                default(sec, "defaultMode", json!(420));
            }
            if let Some(hp) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
                default(hp, "type", json!(""));
            }
        }
    }
    default(s, "restartPolicy", json!("Always"));
    default(s, "terminationGracePeriodSeconds", json!(30));
    default(s, "dnsPolicy", json!("ClusterFirst"));
    default(s, "securityContext", json!({}));
    default(s, "schedulerName", json!("default-scheduler"));
}

/// The source fields of a core/v1 Volume.
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

fn service(o: &mut Value) {
    let Some(spec) = o.get_mut("spec").and_then(obj) else {
        return;
    };
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(p, "protocol", json!("TCP"));
            if !p.contains_key("targetPort")
                && let Some(port) = p.get("port").cloned()
            {
                p.insert("targetPort".into(), port);
            }
        }
    }
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    default(spec, "internalTrafficPolicy", json!("Cluster"));
}
