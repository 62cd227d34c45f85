//! The build pod for OpenShift's examples, as committed YAML snapshots (reviewed as diffs).

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use api::build_v1::Build;
use builds::pod::build_pod;
use serde_json::json;

fn build(strategy: serde_json::Value) -> Build {
    serde_json::from_value(json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": "my-csi-bc-1", "namespace": "my-csi-app-namespace", "uid": "5d3c6c3e-0000-4000-8000-000000000001"},
        "spec": {"serviceAccount": "builder", "strategy": strategy,
                 "output": {"to": {"kind": "ImageStreamTag", "name": "my-csi-bc:latest"}}}
    }))
    .unwrap()
}

#[test]
fn docker_build_with_an_entitlement_csi_volume() {
    let build = build(json!({"type": "Docker", "dockerStrategy": {"volumes": [{
        "name": "my-csi-shared-secret",
        "mounts": [{"destinationPath": "/etc/pki/entitlement"}],
        "source": {"type": "CSI", "csi": {"driver": "csi.sharedresource.openshift.io", "readOnly": true,
                   "volumeAttributes": {"sharedSecret": "my-share-bc"}}}}]}}));
    let pod = build_pod(&build, "quay.io/openshift/origin-docker-builder:4.20").unwrap();
    insta::assert_yaml_snapshot!(pod);
}

#[test]
fn source_build_with_secret_and_configmap_volumes() {
    let build = build(json!({"type": "Source", "sourceStrategy": {
    "from": {"kind": "ImageStreamTag", "name": "nodejs:20", "namespace": "openshift"},
    "volumes": [
        {"name": "npmrc", "mounts": [{"destinationPath": "/opt/app-root/src/.npmrc.d"}],
         "source": {"type": "Secret", "secret": {"secretName": "npm-token"}}},
        {"name": "settings", "mounts": [{"destinationPath": "/opt/app-root/etc/settings"}],
         "source": {"type": "ConfigMap", "configMap": {"name": "build-settings"}}}
    ]}}));
    let pod = build_pod(&build, "quay.io/openshift/origin-docker-builder:4.20").unwrap();
    insta::assert_yaml_snapshot!(pod);
}

#[test]
fn other_strategies_are_refused() {
    let error =
        build_pod(&build(json!({"type": "Custom", "customStrategy": {}})), "b").unwrap_err();
    assert_eq!(
        error.to_string(),
        "build strategy \"Custom\" is not run by this controller; only Docker and Source builds are"
    );
}
