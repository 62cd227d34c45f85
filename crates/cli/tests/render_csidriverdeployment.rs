//! `storage-operator render --csidriverdeployment FILE`: the whole install of a declared CSI
//! driver, offline; a broken manifest names each field and renders nothing.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn storage_operator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args(args)
        .env_remove("LOG_LEVEL")
        .env_remove("LOG_FORMAT")
        .output()
        .unwrap()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/csidriverdeployment")
        .join(name)
}

fn documents(output: &Output) -> Vec<serde_json::Value> {
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    text.split("---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect()
}

#[test]
fn the_cinder_example_renders_every_object() {
    let file = example("cinder-3.11.yaml");
    let output = storage_operator(&[
        "render",
        "--csidriverdeployment",
        file.to_str().unwrap(),
        "--topology",
        "HighlyAvailable",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let kinds: Vec<String> = documents(&output)
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    for expected in [
        "ServiceAccount/cinder-controller-sa",
        "ServiceAccount/cinder-node-sa",
        "ClusterRole/csi-cinderplugin-csi-provisioner-role",
        "ClusterRole/csi-cinderplugin-csi-attacher-role",
        "ClusterRole/csi-cinderplugin-node-scc-role",
        "CSIDriver/csi-cinderplugin",
        "Deployment/cinder-controller",
        "DaemonSet/cinder-node",
        "StorageClass/cinder",
    ] {
        assert!(
            kinds.contains(&expected.to_owned()),
            "{expected} missing from {kinds:?}"
        );
    }
}

#[test]
fn plain_kubernetes_gets_no_scc_grant() {
    let file = example("hostpath-2018.yaml");
    let output = storage_operator(&[
        "render",
        "--csidriverdeployment",
        file.to_str().unwrap(),
        "--topology",
        "Kubernetes",
    ]);
    assert!(output.status.success());
    let docs = documents(&output);
    assert!(
        docs.iter()
            .all(|d| !d["metadata"]["name"].as_str().unwrap().contains("scc"))
    );
    // Written without a namespace: rendered into `default`, as kubectl applies it.
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    assert_eq!(ds["metadata"]["namespace"], "default");
}

#[test]
fn a_broken_manifest_names_each_field() {
    let dir = std::env::temp_dir().join(format!("render-cdd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("broken.yaml");
    let text = std::fs::read_to_string(example("hostpath-2018.yaml"))
        .unwrap()
        .replace("driverSocket: /csi/csi.sock", "driverSocket: csi.sock")
        .replace("driverName: csi-hostpath", "driverName: CSI_Hostpath");
    std::fs::write(&file, text).unwrap();
    let output = storage_operator(&["render", "--csidriverdeployment", file.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "nothing half-rendered");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("spec.driverName: \"CSI_Hostpath\" is not a valid CSI driver name"),
        "{stderr}"
    );
    assert!(
        stderr.contains("spec.driverSocket: \"csi.sock\" is not an absolute path"),
        "{stderr}"
    );
}

#[test]
fn a_file_that_is_not_a_csidriverdeployment_is_refused() {
    let dir = std::env::temp_dir().join(format!("render-cdd-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: CSIDriverDeployment\nspec:\n  driverName: 3\n",
    )
    .unwrap();
    let output = storage_operator(&["render", "--csidriverdeployment", file.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("is not a CSIDriverDeployment"), "{stderr}");
}
