use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use serde_json::Value;

use crate::inputs::{ExistingStorageClass, ServingTls, Topology};
use crate::names;

/// The default-class annotation of an existing StorageClass.
pub fn existing_storage_class(class: &StorageClass) -> ExistingStorageClass {
    ExistingStorageClass {
        name: class.metadata.name.clone().unwrap_or_default(),
        default_annotation: class
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(names::DEFAULT_STORAGE_CLASS_ANNOTATION).cloned()),
    }
}

/// Whether the trusted CA bundle ConfigMap has been filled in (has `ca-bundle.crt`).
pub fn has_ca_bundle(config_map: &ConfigMap) -> bool {
    config_map
        .data
        .as_ref()
        .is_some_and(|d| d.contains_key("ca-bundle.crt"))
}

/// The inline-volume profile label of the existing CSIDriver, which an admin may have set.
pub fn ephemeral_profile(driver: &CSIDriver) -> Option<String> {
    driver
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::EPHEMERAL_PROFILE_LABEL).cloned())
}

/// The proxies' TLS settings from the ClusterCSIDriver's `spec.observedConfig`
/// (`targetcsiconfig.servingInfo.minTLSVersion` / `.cipherSuites`, as OpenShift's config
/// observer writes them). Missing parts leave kube-rbac-proxy's defaults.
pub fn serving_tls(observed_config: Option<&Value>) -> ServingTls {
    let serving = observed_config
        .and_then(|c| c.get("targetcsiconfig"))
        .and_then(|c| c.get("servingInfo"));
    ServingTls {
        min_version: serving
            .and_then(|s| s.get("minTLSVersion"))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
        cipher_suites: serving
            .and_then(|s| s.get("cipherSuites"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The topology of a plain Kubernetes cluster from its nodes: control-plane nodes are those
/// labelled `node-role.kubernetes.io/control-plane` (or the older `.../master`).
pub fn kubernetes_topology(nodes: &[Node]) -> Topology {
    let control_plane_nodes = nodes.iter().any(|n| {
        n.metadata.labels.as_ref().is_some_and(|l| {
            l.contains_key("node-role.kubernetes.io/control-plane")
                || l.contains_key("node-role.kubernetes.io/master")
        })
    });
    Topology::Kubernetes {
        control_plane_nodes,
    }
}
