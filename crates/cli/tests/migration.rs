//! `storage-operator migration translate` as a user runs it.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn translate(input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args(["migration", "translate", "-f", "-"])
        .env_remove("LOG_LEVEL")
        .env_remove("LOG_FORMAT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

const CLASSES_AND_VOLUMES: &str = r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: thin
provisioner: kubernetes.io/vsphere-volume
parameters:
  datastore: ds1
  diskformat: thin
  vsanstorage: gold
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: ebs
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  awsElasticBlockStore:
    volumeID: aws://us-east-1a/vol-0abc
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: provisioned
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi:
    driver: pd.csi.storage.gke.io
    volumeHandle: projects/p/zones/us-central1-a/disks/d1
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: team}
spec:
  containers: [{name: c, image: busybox}]
  volumes:
  - name: scratch
    emptyDir: {}
  - name: data
    cinder: {volumeID: c-1}
"#;

#[test]
fn translates_every_document_and_explains_the_changes() {
    let output = translate(CLASSES_AND_VOLUMES);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&stdout).unwrap();
    assert_eq!(documents.len(), 4, "{stdout}");

    assert_eq!(documents[0]["provisioner"], "csi.vsphere.vmware.com");
    assert_eq!(
        documents[0]["parameters"],
        serde_json::json!({"datastore-migrationparam": "ds1", "diskformat-migrationparam": "thin", "csimigration": "true"})
    );
    assert_eq!(documents[1]["spec"]["csi"]["volumeHandle"], "vol-0abc");
    assert_eq!(documents[2]["spec"]["gcePersistentDisk"]["pdName"], "d1");
    assert_eq!(
        documents[3]["metadata"]["name"],
        "cinder.csi.openstack.org-c-1"
    );
    assert_eq!(documents[3]["kind"], "PersistentVolume");

    // The notes are comments: one per renamed, dropped or added parameter.
    for comment in [
        "# StorageClass/thin: kubernetes.io/vsphere-volume -> csi.vsphere.vmware.com",
        "#   parameters.datastore: renamed to datastore-migrationparam",
        "#   parameters.vsanstorage: dropped",
        "#   parameters.csimigration: set to \"true\"",
        // A deliberate difference from csi-translation-lib is marked.
        "the class's volumes since migration [differs from csi-translation-lib: class-provisioner]",
        "# PersistentVolume/ebs: in-tree -> CSI ebs.csi.aws.com",
        "#   spec.awsElasticBlockStore.volumeID: \"aws://us-east-1a/vol-0abc\" -> volumeHandle \"vol-0abc\"",
        "# PersistentVolume/provisioned: CSI pd.csi.storage.gke.io -> in-tree kubernetes.io/gce-pd",
        "# Pod/app: inline volume as PersistentVolume cinder.csi.openstack.org-c-1",
    ] {
        assert!(
            stdout.contains(comment),
            "missing {comment:?} in:\n{stdout}"
        );
    }
}

#[test]
fn a_bad_document_fails_naming_document_and_field() {
    let input = format!(
        "{CLASSES_AND_VOLUMES}---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: broken}}\n\
         spec:\n  gcePersistentDisk: {{pdName: d}}\n  csi: {{driver: pd.csi.storage.gke.io, volumeHandle: d}}\n"
    );
    let output = translate(&input);
    assert!(!output.status.success());
    assert!(
        output.stdout.is_empty(),
        "nothing is printed when a document fails"
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("document 5 (PersistentVolume/broken): spec.csi.volumeHandle: malformed"),
        "{stderr}"
    );
}

#[test]
fn unsupported_kinds_and_bad_yaml_are_refused() {
    let output = translate("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n");
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("document 1 (ConfigMap/c): kind \"ConfigMap\""),
        "{}",
        text(&output.stderr)
    );
    let output = translate("kind: [unclosed\n");
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("parsing the input as YAML"));
    let output = translate(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: s}\nprovisioner: kubernetes.io/gce-pd\nparameters: {zone: a}\nallowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [a]}]}]\n",
    );
    assert!(!output.status.success());
    assert!(
        text(&output.stderr)
            .contains("document 1 (StorageClass/s): parameters.zone: cannot set both"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn reads_kubectl_lists() {
    let list = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: PersistentVolume
  metadata: {name: a}
  spec: {portworxVolume: {volumeID: px-1}}
- apiVersion: v1
  kind: PersistentVolume
  metadata: {name: b}
  spec: {cinder: {volumeID: ""}}
"#;
    let output = translate(list);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr)
            .contains("document 1, item 2 (PersistentVolume/b): spec.cinder.volumeID: malformed"),
        "{}",
        text(&output.stderr)
    );
    let output = translate(&list.replace("volumeID: \"\"", "volumeID: c-1"));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text(&output.stdout)).unwrap();
    assert_eq!(documents.len(), 2);
    assert_eq!(
        documents[1]["spec"]["csi"]["driver"],
        "cinder.csi.openstack.org"
    );
}

#[test]
fn reads_a_file() {
    let dir = std::env::temp_dir().join(format!("migration-translate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("in.yaml");
    std::fs::write(&path, CLASSES_AND_VOLUMES).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args(["migration", "translate", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("kind: PersistentVolume"));
    let output = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args(["migration", "translate", "-f", "/nonexistent/in.yaml"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("reading /nonexistent/in.yaml"));
}
