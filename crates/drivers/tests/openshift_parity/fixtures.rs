//! OpenShift's generated assets, committed under `tests/fixtures/openshift/<driver>/`, as JSON
//! objects with the placeholders OpenShift's operator substitutes at run time replaced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::Value;

/// Every object of a driver's fixture directory (`*.yaml`, one object a file, sorted by file
/// name), each placeholder `(from, to)` replaced in the text first, then [`normalise`]d.
#[allow(dead_code)] // each crate that includes this module uses one of `load` and `load_from`
pub fn load(fixture: &str, substitutions: &[(String, String)]) -> Vec<Value> {
    load_from(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openshift"),
        fixture,
        substitutions,
    )
}

/// As [`load`], from the fixture directories under `root` (for crates other than `drivers`).
#[allow(dead_code)] // each crate that includes this module uses one of `load` and `load_from`
pub fn load_from(root: &Path, fixture: &str, substitutions: &[(String, String)]) -> Vec<Value> {
    let dir = root.join(fixture);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
        .iter()
        .map(|path| {
            let mut text = std::fs::read_to_string(path).unwrap();
            for (from, to) in substitutions {
                text = text.replace(from, to);
            }
            let mut v: Value = serde_saphyr::from_str(&text)
                .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
            normalise(&mut v);
            v
        })
        .collect()
}

/// The placeholders of OpenShift's assets that do not depend on the driver: namespaces, log
/// level Normal, leader election timings, the TLS profile given, the Default feature set.
#[allow(dead_code)] // the cluster storage operator's comparison substitutes its own few
pub fn common_substitutions(
    namespace: &str,
    ciphers: &[String],
    min_tls: &str,
) -> Vec<(String, String)> {
    [
        ("${NAMESPACE}", namespace.to_owned()),
        ("${NODE_NAMESPACE}", namespace.to_owned()),
        ("${LOG_LEVEL}", "2".to_owned()),
        ("${LEADER_ELECTION_LEASE_DURATION}", "137s".to_owned()),
        ("${LEADER_ELECTION_RENEW_DEADLINE}", "107s".to_owned()),
        ("${LEADER_ELECTION_RETRY_PERIOD}", "26s".to_owned()),
        ("${TLS_CIPHER_SUITES}", ciphers.join(",")),
        ("${TLS_MIN_VERSION}", min_tls.to_owned()),
        // csi-operator's Azure operators always substitute true (the injector acts on it only
        // when the credentials have azure_federated_token_file).
        ("${ENABLE_AZURE_WORKLOAD_IDENTITY}", "true".to_owned()),
        // Set only with the MutableCSINodeAllocatableCount feature gate (not in Default).
        ("${NODE_ALLOCATABLE_UPDATE_PERIOD_SECONDS}", String::new()),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b))
    .collect()
}

/// What Go's encoder would write for the same object: no `null`s and no empty lists (every
/// list field of the Kubernetes API is `omitempty`, so `env: []` in an asset never reaches the
/// API server). Empty maps stay: `emptyDir: {}` is a pointer to an empty struct and is kept.
pub fn normalise(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, x| !(x.is_null() || x.as_array().is_some_and(Vec::is_empty)));
            map.values_mut().for_each(normalise);
        }
        Value::Array(list) => list.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// The images of the release payload, by OpenShift's environment variable (the same for
/// OpenShift's operator and ours, so image names are not a difference).
#[allow(dead_code)] // the takeover tests use it, not the comparison
pub fn release_images() -> BTreeMap<String, String> {
    [
        "DRIVER_IMAGE",
        "PROVISIONER_IMAGE",
        "ATTACHER_IMAGE",
        "RESIZER_IMAGE",
        "SNAPSHOTTER_IMAGE",
        "NODE_DRIVER_REGISTRAR_IMAGE",
        "LIVENESS_PROBE_IMAGE",
        "KUBE_RBAC_PROXY_IMAGE",
        "TOOLS_IMAGE",
        "NFS_DRIVER_IMAGE",
        "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE",
    ]
    .into_iter()
    .map(|var| {
        let name = var
            .trim_end_matches("_IMAGE")
            .to_lowercase()
            .replace('_', "-");
        (
            var.to_owned(),
            format!("quay.io/openshift/origin-{name}:4.22"),
        )
    })
    .collect()
}

/// What OpenShift's operator has written on an HA cluster in a regular region, from its assets
/// as loaded: what library-go's hooks add to every driver (2 controller replicas, the spec hash
/// annotations), without GCP PD's Hyperdisk class (selected only in GCP Dedicated regions) and
/// the CredentialsRequests (cluster-storage-operator's, from the release payload).
#[allow(dead_code)] // the takeover tests use it, not the comparison
pub fn as_openshift_wrote(objects: &mut Vec<Value>) {
    objects.retain(|o| {
        o["metadata"]["name"] != "hyperdisk-balanced" && o["kind"] != "CredentialsRequest"
    });
    for o in objects {
        if matches!(
            o["kind"].as_str(),
            Some("Deployment" | "DaemonSet" | "Service" | "CSIDriver")
        ) {
            o["metadata"]["annotations"]["operator.openshift.io/spec-hash"] =
                serde_json::json!("0123456789abcdef");
        }
        if o["kind"] == "Deployment" {
            o["spec"]["replicas"] = serde_json::json!(2);
        }
    }
}

/// A CRD accepting any object of `kind`, for the optional kinds every OpenShift cluster serves
/// (Prometheus' ServiceMonitor, the snapshot classes). The snapshot group is the Kubernetes
/// project's: its CRDs carry their API review, or the API server refuses them.
#[allow(dead_code)] // the takeover tests use it, not the comparison
pub fn open_crd(
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}"),
                     "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter/pull/419"}},
        "spec": {"group": group, "scope": if namespaced { "Namespaced" } else { "Cluster" },
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap_or_else(|e| panic!("the CRD of {kind}: {e}"))
}

/// The resource name of `kind` (the kinds of the fixtures).
fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    match lower.as_str() {
        "storageclass" | "volumesnapshotclass" => format!("{lower}es"),
        "poddisruptionbudget" => "poddisruptionbudgets".to_owned(),
        "networkpolicy" => "networkpolicies".to_owned(),
        _ => format!("{lower}s"),
    }
}

/// The API of the object `o` (its kind, and its namespace if it has one).
#[allow(dead_code)] // the takeover tests use it, not the comparison
pub fn api_for(client: &Client, o: &Value) -> Api<DynamicObject> {
    let api_version = o["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = o["kind"].as_str().unwrap_or_default();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &plural(kind),
    );
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalise_drops_empty_lists_keeps_empty_maps() {
        let mut v = json!({"env": [], "emptyDir": {}, "x": null, "l": [{"env": []}]});
        normalise(&mut v);
        assert_eq!(v, json!({"emptyDir": {}, "l": [{}]}));
    }
}
