//! `storage-operator diagnose` on a real node (`../shared/k8s/node.sh`): each test breaks one
//! link of the chain a volume goes through, as it breaks on real clusters, runs the binary as
//! a user would and checks the finding it prints: its kind, cause and fix.
//!
//! The binary runs as a ServiceAccount bound only to the ClusterRole that `diagnose
//! --print-rbac` prints (get and list), so every test also proves that this is enough: a read
//! refused to it would show as a note and fails the test. The namespace comes from the
//! kubeconfig's context, as kubectl takes it. The CSI driver of the tests is the kubernetes-csi
//! hostpath driver as `../shared/k8s/csi-hostpath.yaml` installs it, under names of its own
//! (driver `diagnose.hostpath.csi.k8s.io` in namespace `e2e-diagnose-hostpath`), each test
//! changing what it breaks.
//!
//! There is one node per machine: where a test needs a second one (multi-attach, a kubelet
//! that never reports), it is a Node object made by hand, which the real attach-detach and
//! node lifecycle controllers act on as on any node; no kubelet runs for it.
//!
//! The binary is `target/debug/storage-operator` beside the test (`cargo build -p cli` first
//! when running by hand; `cargo test --workspace` builds it), or the one `E2E_BIN`
//! names. Every test removes what it made, also what a failed run left behind.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e::{cleanup, install, node};
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// Where the test's claims and pods live, and the diagnosing ServiceAccount.
const NS: &str = "e2e-diagnose";
/// The ServiceAccount the binary runs as.
const SA: &str = "diagnose";
/// On every cluster-scoped object the tests make, for the cleanup.
const LABEL: &str = "e2e.storage.openshift.io/diagnose";
/// The hostpath driver under the tests' names.
const DRIVER: &str = "diagnose.hostpath.csi.k8s.io";
const DRIVER_NS: &str = "e2e-diagnose-hostpath";
/// Its StorageClass (WaitForFirstConsumer), as the manifest names it after renaming.
const DRIVER_CLASS: &str = "e2e-diagnose-hostpath-sc";
/// The manifest of `../shared/k8s`.
const HOSTPATH_MANIFEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/k8s/csi-hostpath.yaml"
);
/// A Node the tests make by hand, whose kubelet never reports, and the name of one that is
/// gone. No kubelet confirms that a pod bound to these nodes has stopped: the cleanup deletes
/// such pods at once.
const QUIET_NODE: &str = "e2e-diagnose-quiet-node";
const GONE_NODE: &str = "e2e-diagnose-gone-node";
/// A Node made by hand, Ready for a while, where a pod waits for a volume of the real node.
const SECOND_NODE: &str = "e2e-diagnose-second-node";
/// An image no node has, pulled `Never`: the kubelet says `ErrImageNeverPull` at once.
const MISSING_IMAGE: &str = "localhost/e2e-diagnose-no-such-image:dev";

/// The test's namespace, its diagnosing identity and a kubeconfig for it.
struct Scene {
    admin: Client,
    kubeconfig: PathBuf,
    started: Instant,
}

impl Scene {
    /// Removes what an earlier run left, then makes the namespace and the identity.
    async fn new() -> Scene {
        let admin = e2e::admin().await;
        node::require_node(&admin).await;
        let started = Instant::now();
        remove_all(&admin).await;
        install::ensure_namespace(&admin, NS).await;
        Api::<ServiceAccount>::namespaced(admin.clone(), NS)
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": SA}})).unwrap(),
            )
            .await
            .unwrap();
        let printed = run_binary(&[], &["diagnose", "--print-rbac"]).await;
        assert_eq!(printed.code, Some(0), "{}", printed.stderr);
        let mut role: Value = serde_saphyr::from_str(&printed.stdout).unwrap();
        role["metadata"]["labels"] = json!({LABEL: "true"});
        install::apply_value(&admin, role, "diagnose --print-rbac").await;
        install::apply_value(
            &admin,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "e2e-diagnose", "labels": {LABEL: "true"}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "storage-operator-diagnose"},
                "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]
            }),
            "the test",
        )
        .await;
        let token = e2e::identity::service_account_token(&admin, NS, SA, 3600).await;
        let kubeconfig = e2e::process::kubeconfig_with_token(&token, Some(NS), "diagnose");
        Scene {
            admin,
            kubeconfig,
            started,
        }
    }

    /// Creates `object` as the admin (the scene, not the diagnosis).
    async fn create(&self, object: Value) {
        install::apply_value(&self.admin, object, "the test").await;
    }

    /// The claim `data` of the driver's class and the pod `app` that mounts it.
    async fn claim_and_pod(&self) {
        self.create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", Some(DRIVER_CLASS), "16Mi"),
        ))
        .await;
        self.create(in_ns("v1", "Pod", pod("app", "data"))).await;
    }

    /// Waits until the pod `app` runs (explaining the test's and the driver's namespaces when
    /// it does not).
    async fn wait_app_running(&self) {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), NS);
        node::wait_or_explain(
            &self.admin,
            &[NS, DRIVER_NS],
            "pod app Running",
            async || {
                let pod = pods.get("app").await.ok()?;
                (pod.status?.phase.as_deref() == Some("Running")).then_some(())
            },
        )
        .await;
    }

    /// A static volume of the driver named `volume` (its handle `handle`) and the claim
    /// `data` bound to it.
    async fn bound_claim(&self, volume: &str, handle: &str) {
        self.create(cluster(
            "v1",
            "PersistentVolume",
            static_volume(volume, handle),
        ))
        .await;
        self.create(in_ns("v1", "PersistentVolumeClaim", claim_of(volume)))
            .await;
    }

    /// Runs `diagnose ARGS -o json` as the ServiceAccount until the finding is `kind` (the
    /// cluster needs a moment: the scheduler, the kubelet, the driver); then checks its text
    /// output too and returns the report.
    async fn finding(&self, args: &[&str], kind: &str) -> Value {
        self.finding_saying(args, kind, "").await
    }

    /// [`Scene::finding`], waiting also until the cause says `words` (a pod just created is
    /// Pending before the kubelet says why).
    async fn finding_saying(&self, args: &[&str], kind: &str, words: &str) -> Value {
        let deadline = Instant::now() + node::TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            let mut json_args = args.to_vec();
            json_args.extend(["-o", "json"]);
            let output = self.diagnose(&json_args).await;
            if let Ok(report) = serde_json::from_str::<Value>(&output.stdout)
                && report["finding"]["kind"] == kind
                && report["finding"]["cause"]
                    .as_str()
                    .is_some_and(|cause| cause.contains(words))
            {
                assert_eq!(output.code, Some(1), "a finding exits with 1");
                let text = self.diagnose(args).await;
                assert_eq!(text.code, Some(1));
                let cause = report["finding"]["cause"].as_str().unwrap();
                let fix = report["finding"]["fix"].as_str().unwrap();
                assert!(
                    text.stdout.contains(&format!("{cause} ({kind})")),
                    "{}",
                    text.stdout
                );
                assert!(text.stdout.contains("\nFix:\n  "), "{}", text.stdout);
                assert!(text.stdout.contains(&fix[..fix.len().min(40)]));
                eprintln!(
                    "diagnose {} found {kind} after {:.1}s of the test:\n{}",
                    args.join(" "),
                    self.started.elapsed().as_secs_f64(),
                    text.stdout
                );
                return report;
            }
            last = format!("{}{}", output.stdout, output.stderr);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!(
            "diagnose {} did not find {kind} in {}s; it last said:\n{last}\n{}",
            args.join(" "),
            node::TIMEOUT.as_secs(),
            node::explain(&self.admin, &[NS, DRIVER_NS]).await
        );
    }

    /// Runs `diagnose ARGS` until it finds nothing (exit 0): a healthy chain is not reported.
    async fn no_finding(&self, args: &[&str]) -> String {
        let deadline = Instant::now() + node::TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            let output = self.diagnose(args).await;
            if output.code == Some(0) {
                eprintln!(
                    "diagnose {} found nothing after {:.1}s of the test:\n{}",
                    args.join(" "),
                    self.started.elapsed().as_secs_f64(),
                    output.stdout
                );
                return output.stdout;
            }
            last = format!("{}{}", output.stdout, output.stderr);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!(
            "diagnose {} still found something after {}s:\n{last}\n{}",
            args.join(" "),
            node::TIMEOUT.as_secs(),
            node::explain(&self.admin, &[NS, DRIVER_NS]).await
        );
    }

    /// Runs `diagnose ARGS` as the ServiceAccount; fails on any read refused to it.
    async fn diagnose(&self, args: &[&str]) -> Ran {
        let mut all = vec!["diagnose"];
        all.extend_from_slice(args);
        let kubeconfig = self.kubeconfig.to_string_lossy().into_owned();
        let ran = run_binary(&[("KUBECONFIG", kubeconfig.as_str())], &all).await;
        assert!(
            !ran.stderr.contains("forbidden") && ran.code != Some(2),
            "diagnose {} as {SA}: {}",
            args.join(" "),
            ran.stderr
        );
        ran
    }

    /// Removes everything the test made.
    async fn end(self) {
        remove_all(&self.admin).await;
        if let Some(dir) = self.kubeconfig.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
        eprintln!(
            "test done in {:.1}s with its cleanup",
            self.started.elapsed().as_secs_f64()
        );
    }
}

/// What a run of the binary printed and how it exited.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run_binary(env: &[(&str, &str)], args: &[&str]) -> Ran {
    let mut command = std::process::Command::new(e2e::process::binary());
    command
        .args(args)
        .env_remove("LOG_LEVEL")
        .env_remove("LOG_FORMAT");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Deletes the test's namespaces, the volumes of its driver, its driver and every
/// cluster-scoped object it labelled, and waits until they are gone.
async fn remove_all(admin: &Client) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    for pod in pods
        .list(&ListParams::default())
        .await
        .into_iter()
        .flatten()
    {
        let node = pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref());
        if matches!(node, Some(QUIET_NODE | GONE_NODE | SECOND_NODE)) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let _ = pods
                .delete(name, &DeleteParams::default().grace_period(0))
                .await;
        }
    }
    cleanup::delete_labelled(&Api::<Node>::all(admin.clone()), LABEL).await;
    cleanup::delete_labelled(&Api::<CSINode>::all(admin.clone()), LABEL).await;
    cleanup::delete_namespace(admin, NS).await;
    // Volumes the driver provisioned go with their claims, by the driver; those the tests
    // made themselves are labelled.
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    cleanup::delete_labelled(&volumes, LABEL).await;
    e2e::wait_for("the hostpath driver's volumes to be deleted", async || {
        let listed = volumes.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .iter()
            .all(|pv| {
                pv.spec
                    .as_ref()
                    .and_then(|spec| spec.csi.as_ref())
                    .is_none_or(|csi| csi.driver != DRIVER)
            })
            .then_some(())
    })
    .await;
    cleanup::delete_namespace(admin, DRIVER_NS).await;
    cleanup::delete_labelled(&Api::<StorageClass>::all(admin.clone()), LABEL).await;
    cleanup::delete_labelled(&Api::<CSIDriver>::all(admin.clone()), LABEL).await;
    cleanup::delete_labelled(&Api::<ClusterRoleBinding>::all(admin.clone()), LABEL).await;
    cleanup::delete_labelled(&Api::<ClusterRole>::all(admin.clone()), LABEL).await;
}

/// Installs the hostpath driver of `../shared/k8s/csi-hostpath.yaml` under the tests' names,
/// each object first passed through `change` (the test's break).
async fn install_hostpath(admin: &Client, mut change: impl FnMut(&mut Value)) {
    let manifest = std::fs::read_to_string(HOSTPATH_MANIFEST).unwrap_or_else(|e| {
        panic!("reading {HOSTPATH_MANIFEST} (the hostpath driver of ../shared/k8s): {e}")
    });
    // Its own names, so that it stands beside any other hostpath driver: namespace, objects,
    // class, socket and data directories, and the driver's name.
    let renamed = manifest
        .replace("csi-hostpath", "e2e-diagnose-hostpath")
        .replace("hostpath.csi.k8s.io", DRIVER);
    let documents: Vec<Value> = serde_saphyr::from_multiple(&renamed).unwrap();
    for mut document in documents.into_iter().filter(|d| d.is_object()) {
        if document["metadata"]["namespace"].is_null() {
            document["metadata"]["labels"][LABEL] = json!("true");
        }
        change(&mut document);
        install::apply_value(admin, document, HOSTPATH_MANIFEST).await;
    }
}

/// Waits until the kubelet of every node has registered the test's driver.
async fn wait_registered(admin: &Client) {
    let csi_nodes: Api<CSINode> = Api::all(admin.clone());
    node::wait_or_explain(
        admin,
        &[DRIVER_NS],
        &format!("every CSINode to list {DRIVER}"),
        async || {
            let listed = csi_nodes.list(&ListParams::default()).await.ok()?;
            (!listed.items.is_empty()
                && listed
                    .items
                    .iter()
                    .all(|n| n.spec.drivers.iter().any(|d| d.name == DRIVER)))
            .then_some(())
        },
    )
    .await;
}

/// The containers of a workload's pod template.
fn containers(workload: &mut Value) -> impl Iterator<Item = &mut Value> {
    workload["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .into_iter()
        .flatten()
}

fn is(document: &Value, kind: &str) -> bool {
    document["kind"] == kind
}

/// `body` as an object of `kind` in the test's namespace.
fn in_ns(api_version: &str, kind: &str, mut body: Value) -> Value {
    body["metadata"]["namespace"] = json!(NS);
    cluster(api_version, kind, body)
}

/// `body` as a cluster-scoped object of `kind`.
fn cluster(api_version: &str, kind: &str, mut body: Value) -> Value {
    body["apiVersion"] = json!(api_version);
    body["kind"] = json!(kind);
    body
}

/// A claim `name` of `class` (`None`: no class named) asking for `size`.
fn claim(name: &str, class: Option<&str>, size: &str) -> Value {
    let mut claim = json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    });
    if let Some(class) = class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    claim
}

/// A pod `name` that mounts claim `claim` at /data and sleeps.
fn pod(name: &str, claim: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": "localhost/busybox:dev", "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "100000"],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        }
    })
}

/// A PersistentVolume made beforehand for claim `data`: a CSI volume of the test's driver
/// with handle `handle`.
fn static_volume(name: &str, handle: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "spec": {
            "capacity": {"storage": "16Mi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "claimRef": {"namespace": NS, "name": "data"},
            "csi": {"driver": DRIVER, "volumeHandle": handle}
        }
    })
}

/// A claim bound to `volume`, made beforehand.
fn claim_of(volume: &str) -> Value {
    let mut claim = claim("data", Some(""), "16Mi");
    claim["spec"]["volumeName"] = json!(volume);
    claim
}

fn text(report: &Value, field: &str) -> String {
    report["finding"][field]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn evidence(report: &Value) -> String {
    report["finding"]["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| format!("{} ({}): {}", e["object"], e["source"], e["message"]))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_claim_of_a_class_that_does_not_exist() {
    let scene = Scene::new().await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", Some("e2e-diagnose-gold"), "1Gi"),
        ))
        .await;
    // No -n: the namespace of the kubeconfig's context.
    let report = scene.finding(&["pvc", "data"], "NoSuchStorageClass").await;
    assert_eq!(
        text(&report, "cause"),
        "the claim's StorageClass e2e-diagnose-gold does not exist"
    );
    assert!(
        text(&report, "fix").starts_with("create StorageClass e2e-diagnose-gold, or recreate the claim with spec.storageClassName set to one of:"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_claim_without_class_when_none_is_default() {
    let scene = Scene::new().await;
    let classes = Api::<StorageClass>::all(scene.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let defaults: Vec<String> = classes
        .items
        .iter()
        .filter(|c| {
            c.metadata.annotations.as_ref().is_some_and(|a| {
                a.get("storageclass.kubernetes.io/is-default-class")
                    .is_some_and(|v| v == "true")
            })
        })
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert!(
        defaults.is_empty(),
        "this test needs a cluster without a default StorageClass; default: {defaults:?}"
    );
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", None, "1Gi"),
        ))
        .await;
    let report = scene
        .finding(&["pvc", "-n", NS, "data"], "NoDefaultStorageClass")
        .await;
    assert_eq!(
        text(&report, "cause"),
        "the claim names no StorageClass and no class is marked default"
    );
    assert!(
        text(&report, "fix").contains(
            "`kubectl annotate storageclass NAME storageclass.kubernetes.io/is-default-class=true`"
        ),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_class_whose_provisioner_is_not_installed() {
    let scene = Scene::new().await;
    scene
        .create(cluster(
            "storage.k8s.io/v1",
            "StorageClass",
            json!({"metadata": {"name": "e2e-diagnose-nowhere", "labels": {LABEL: "true"}},
                   "provisioner": "nowhere.csi.example.com"}),
        ))
        .await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", Some("e2e-diagnose-nowhere"), "1Gi"),
        ))
        .await;
    let report = scene.finding(&["pvc", "data"], "NoSuchCSIDriver").await;
    assert_eq!(
        text(&report, "cause"),
        "the provisioner nowhere.csi.example.com is not a CSI driver installed on this cluster"
    );
    assert!(
        text(&report, "fix").starts_with("install the driver nowhere.csi.example.com"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_claim_that_waits_for_a_pod_that_never_comes() {
    let scene = Scene::new().await;
    scene
        .create(cluster(
            "storage.k8s.io/v1",
            "StorageClass",
            json!({"metadata": {"name": "e2e-diagnose-local", "labels": {LABEL: "true"}},
                   "provisioner": "kubernetes.io/no-provisioner",
                   "volumeBindingMode": "WaitForFirstConsumer"}),
        ))
        .await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", Some("e2e-diagnose-local"), "1Gi"),
        ))
        .await;
    let report = scene
        .finding(&["pvc", "data"], "WaitForFirstConsumerNoPod")
        .await;
    assert_eq!(
        text(&report, "cause"),
        "StorageClass e2e-diagnose-local binds on first consumer, and no pod uses claim data"
    );
    assert!(
        text(&report, "fix").starts_with("create a pod that uses the claim"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_pod_pinned_to_a_node_that_does_not_exist() {
    let scene = Scene::new().await;
    scene
        .create(cluster(
            "storage.k8s.io/v1",
            "StorageClass",
            json!({"metadata": {"name": "e2e-diagnose-local", "labels": {LABEL: "true"}},
                   "provisioner": "kubernetes.io/no-provisioner",
                   "volumeBindingMode": "WaitForFirstConsumer"}),
        ))
        .await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", Some("e2e-diagnose-local"), "1Gi"),
        ))
        .await;
    let mut pinned = pod("pinned", "data");
    pinned["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "e2e-diagnose-no-such-node"});
    scene.create(in_ns("v1", "Pod", pinned)).await;
    let report = scene.finding(&["pod", "pinned"], "PodUnschedulable").await;
    assert!(text(&report, "cause").contains("pod pinned"), "{report:#}");
    assert!(
        evidence(&report).contains("node(s) didn't match Pod's node affinity/selector"),
        "{report:#}"
    );
    assert!(
        text(&report, "fix").contains("change pod pinned's spec.nodeSelector"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_claim_deleted_while_a_pod_uses_it() {
    let scene = Scene::new().await;
    // A volume of the node's own directory, bound to the claim beforehand: no driver needed.
    scene.create(cluster("v1","PersistentVolume", json!({"metadata": {"name": "e2e-diagnose-node-dir", "labels": {LABEL: "true"}},
                   "spec": {"capacity": {"storage": "16Mi"}, "accessModes": ["ReadWriteOnce"],
                            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                            "claimRef": {"namespace": NS, "name": "data"},
                            "hostPath": {"path": "/tmp/e2e-diagnose-node-dir", "type": "DirectoryOrCreate"}}}),
        ))
        .await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim_of("e2e-diagnose-node-dir"),
        ))
        .await;
    scene.create(in_ns("v1", "Pod", pod("app", "data"))).await;
    scene.wait_app_running().await;
    Api::<PersistentVolumeClaim>::namespaced(scene.admin.clone(), NS)
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    let report = scene
        .finding(&["pvc", "data"], "ClaimInUseWhileDeleting")
        .await;
    assert_eq!(
        text(&report, "cause"),
        "the claim is being deleted and waits until pod app no longer uses it"
    );
    assert!(
        text(&report, "fix").starts_with("delete pod app"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_the_driver_controller_image_is_missing() {
    let scene = Scene::new().await;
    install_hostpath(&scene.admin, |document| {
        if is(document, "Deployment") {
            for container in containers(document) {
                container["image"] = json!(MISSING_IMAGE);
            }
        }
    })
    .await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", Some(DRIVER_CLASS), "16Mi"),
        ))
        .await;
    let report = scene
        .finding_saying(
            &["pvc", "data"],
            "DriverControllerNotRunning",
            "ErrImageNeverPull",
        )
        .await;
    let cause = text(&report, "cause");
    assert!(
        cause.starts_with(&format!(
            "the controller of {DRIVER} is not running: container "
        )),
        "{cause}"
    );
    assert!(cause.contains("is in ErrImageNeverPull"), "{cause}");
    assert!(evidence(&report).contains(MISSING_IMAGE), "{report:#}");
    assert!(
        text(&report, "fix").starts_with(&format!("image {MISSING_IMAGE} of container ")),
        "{report:#}"
    );
    assert!(text(&report, "fix").contains("cannot be pulled"));
    // The driver's own diagnosis says the same.
    let report = scene
        .finding_saying(
            &["driver", DRIVER],
            "DriverControllerNotRunning",
            "ErrImageNeverPull",
        )
        .await;
    assert!(text(&report, "cause").contains("ErrImageNeverPull"));
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_the_driver_has_no_node_pod_on_the_pods_node() {
    let scene = Scene::new().await;
    // The node DaemonSet selects no node: its pod is gone and the kubelet does not know the
    // driver. A volume made beforehand lets the app's pod be scheduled anyway.
    install_hostpath(&scene.admin, |document| {
        if is(document, "DaemonSet") {
            document["spec"]["template"]["spec"]["nodeSelector"] =
                json!({"e2e.storage.openshift.io/no-such-label": "true"});
        }
    })
    .await;
    scene
        .bound_claim("e2e-diagnose-made", "made-beforehand")
        .await;
    scene.create(in_ns("v1", "Pod", pod("app", "data"))).await;
    let report = scene.finding(&["pod", "app"], "DriverNotRegistered").await;
    assert_eq!(
        text(&report, "cause"),
        format!("the driver {DRIVER} is not registered on node harness-node")
    );
    assert!(
        text(&report, "fix").starts_with(&format!(
            "the node DaemonSet of {DRIVER} has no pod on node harness-node"
        )),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_claim_larger_than_the_driver_allows() {
    let scene = Scene::new().await;
    // The driver creates volumes of at most 64 MiB; its class binds at once.
    install_hostpath(&scene.admin, |document| {
        if is(document, "DaemonSet") {
            for container in containers(document) {
                if container["name"] == "hostpath"
                    && let Some(args) = container["args"].as_array_mut()
                {
                    args.push(json!("--max-volume-size=67108864"));
                }
            }
        }
        if is(document, "StorageClass") {
            document["volumeBindingMode"] = json!("Immediate");
        }
    })
    .await;
    wait_registered(&scene.admin).await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim("data", Some(DRIVER_CLASS), "1Gi"),
        ))
        .await;
    let report = scene.finding(&["pvc", "data"], "ProvisioningFailed").await;
    assert!(
        text(&report, "cause").starts_with(&format!(
            "provisioning the claim's volume failed ({DRIVER}_"
        )),
        "{report:#}"
    );
    assert!(
        evidence(&report).contains("exceeds maximum allowed"),
        "{report:#}"
    );
    assert!(
        text(&report, "fix").starts_with("the driver refused to create the volume"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_volume_the_driver_cannot_mount() {
    let scene = Scene::new().await;
    // No attach step, so the kubelet asks the node plugin straight away; it does not know the
    // volume made beforehand.
    install_hostpath(&scene.admin, |document| {
        if is(document, "CSIDriver") {
            document["spec"]["attachRequired"] = json!(false);
        }
    })
    .await;
    wait_registered(&scene.admin).await;
    scene
        .bound_claim("e2e-diagnose-unknown", "no-such-volume")
        .await;
    scene.create(in_ns("v1", "Pod", pod("app", "data"))).await;
    let report = scene.finding(&["pod", "app"], "MountFailed").await;
    assert_eq!(
        text(&report, "cause"),
        "the kubelet on node harness-node could not mount volume e2e-diagnose-unknown for pod app"
    );
    assert!(evidence(&report).contains("no-such-volume"), "{report:#}");
    assert!(
        text(&report, "fix").starts_with("fix what the kubelet's message names"),
        "{report:#}"
    );
    assert!(
        text(&report, "fix")
            .contains("`kubectl logs -n e2e-diagnose-hostpath e2e-diagnose-hostpath-node-"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_the_driver_node_plugin_cannot_start() {
    let scene = Scene::new().await;
    // The registrar of the node pod has no image: the driver runs but the kubelet never hears
    // of it.
    install_hostpath(&scene.admin, |document| {
        if is(document, "DaemonSet") {
            for container in containers(document) {
                if container["name"] == "node-driver-registrar" {
                    container["image"] = json!(MISSING_IMAGE);
                }
            }
        }
    })
    .await;
    let report = scene
        .finding_saying(
            &["driver", DRIVER],
            "DriverNodeNotRunning",
            "ErrImageNeverPull",
        )
        .await;
    let cause = text(&report, "cause");
    assert!(
        cause.starts_with(&format!(
            "the node plugin of {DRIVER} on node harness-node is not running: container node-driver-registrar of pod e2e-diagnose-hostpath-node-"
        )),
        "{cause}"
    );
    assert!(evidence(&report).contains(MISSING_IMAGE), "{report:#}");
    assert!(
        text(&report, "fix").starts_with(&format!(
            "image {MISSING_IMAGE} of container node-driver-registrar cannot be pulled"
        )),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_healthy_volume_has_no_finding() {
    let scene = Scene::new().await;
    install_hostpath(&scene.admin, |_| {}).await;
    wait_registered(&scene.admin).await;
    scene.claim_and_pod().await;
    // A claim still being provisioned is not a problem either; the whole chain is checked
    // once the pod runs.
    scene.wait_app_running().await;
    let text = scene.no_finding(&["pod", "app"]).await;
    assert!(
        text.starts_with("Pod e2e-diagnose/app: no problem found\n"),
        "{text}"
    );
    assert!(!text.contains("[BROKEN]"), "{text}");
    assert!(
        text.contains("[ok]          Mount (Pod e2e-diagnose/app): "),
        "{text}"
    );
    let driver = scene.no_finding(&["driver", DRIVER]).await;
    assert!(!driver.contains("[BROKEN]"), "{driver}");
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_volume_whose_node_affinity_excludes_the_node() {
    let scene = Scene::new().await;
    // A volume of a node's own directory that may only be used on another node (as a local
    // volume of a node that left, or a zonal disk of another zone): the scheduler finds no
    // node for the pod.
    scene
        .create(cluster(
            "v1",
            "PersistentVolume",
            json!({"metadata": {"name": "e2e-diagnose-elsewhere", "labels": {LABEL: "true"}},
                   "spec": {"capacity": {"storage": "16Mi"}, "accessModes": ["ReadWriteOnce"],
                            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                            "claimRef": {"namespace": NS, "name": "data"},
                            "hostPath": {"path": "/tmp/e2e-diagnose-elsewhere", "type": "DirectoryOrCreate"},
                            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In",
                                 "values": ["e2e-diagnose-other-node"]}]}]}}}}),
        ))
        .await;
    scene
        .create(in_ns(
            "v1",
            "PersistentVolumeClaim",
            claim_of("e2e-diagnose-elsewhere"),
        ))
        .await;
    scene.create(in_ns("v1", "Pod", pod("app", "data"))).await;
    // The scheduler may first try before the claim is bound ("pod has unbound immediate
    // PersistentVolumeClaims"); the test checks the evidence of its next try.
    let pods: Api<Pod> = Api::namespaced(scene.admin.clone(), NS);
    node::wait_or_explain(
        &scene.admin,
        &[NS],
        "the scheduler to name the volume's node affinity",
        async || {
            let pod = pods.get("app").await.ok()?;
            pod.status?
                .conditions?
                .iter()
                .any(|c| {
                    c.type_ == "PodScheduled"
                        && c.message.as_deref().is_some_and(|m| {
                            m.contains("didn't match PersistentVolume's node affinity")
                        })
                })
                .then_some(())
        },
    )
    .await;
    for args in [&["pod", "app"][..], &["pvc", "data"][..]] {
        let report = scene.finding(args, "VolumeNodeAffinityConflict").await;
        assert_eq!(
            text(&report, "cause"),
            "the volume's node affinity keeps pod app from being scheduled"
        );
        let evidence = evidence(&report);
        assert!(
            evidence.contains("kubernetes.io/hostname In [e2e-diagnose-other-node]"),
            "{report:#}"
        );
        assert!(evidence.contains("no node matches"), "{report:#}");
        assert!(
            evidence.contains("1 node(s) didn't match PersistentVolume's node affinity"),
            "{report:#}"
        );
        assert!(
            text(&report, "fix").starts_with(
                "the volume can be used only on nodes where kubernetes.io/hostname In \
                 [e2e-diagnose-other-node]: run the pod on such a node"
            ),
            "{report:#}"
        );
    }
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_volume_the_driver_cannot_attach() {
    let scene = Scene::new().await;
    // The driver attaches (ControllerPublishVolume) only with --enable-attach; without it the
    // attacher marks every volume attached without asking. It does not know the volume made
    // beforehand, so the attacher's call fails and the VolumeAttachment says why.
    install_hostpath(&scene.admin, |document| {
        if is(document, "DaemonSet") {
            for container in containers(document) {
                if container["name"] == "hostpath"
                    && let Some(args) = container["args"].as_array_mut()
                {
                    args.push(json!("--enable-attach=true"));
                }
            }
        }
    })
    .await;
    wait_registered(&scene.admin).await;
    scene
        .bound_claim("e2e-diagnose-unattachable", "no-such-volume")
        .await;
    scene.create(in_ns("v1", "Pod", pod("app", "data"))).await;
    let report = scene.finding(&["pod", "app"], "AttachFailed").await;
    assert_eq!(
        text(&report, "cause"),
        "volume e2e-diagnose-unattachable could not be attached to node harness-node"
    );
    assert!(
        report["finding"]["evidence"][0]["source"] == "status.attachError.message",
        "{report:#}"
    );
    assert!(evidence(&report).contains("no-such-volume"), "{report:#}");
    assert!(
        text(&report, "fix")
            .starts_with(&format!("the controller of {DRIVER} could not attach it")),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_claim_provisioned_for_a_node_without_the_driver() {
    let scene = Scene::new().await;
    // The class waits for the first consumer: the scheduler picks the node for the pod and
    // writes it on the claim, then the provisioner fails for want of the driver's topology
    // there (its node DaemonSet selects no node). The pod waits, on no node yet.
    install_hostpath(&scene.admin, |document| {
        if is(document, "DaemonSet") {
            document["spec"]["template"]["spec"]["nodeSelector"] =
                json!({"e2e.storage.openshift.io/no-such-label": "true"});
        }
    })
    .await;
    scene.claim_and_pod().await;
    for args in [&["pvc", "data"][..], &["pod", "app"][..]] {
        let report = scene.finding(args, "DriverNotRegistered").await;
        assert_eq!(
            text(&report, "cause"),
            format!("the driver {DRIVER} is not registered on node harness-node")
        );
        assert!(
            report["finding"]["evidence"]
                .as_array()
                .unwrap()
                .contains(&json!({
                    "object": format!("PersistentVolumeClaim {NS}/data"),
                    "source": "annotation volume.kubernetes.io/selected-node",
                    "message": "harness-node"
                })),
            "{report:#}"
        );
        assert!(
            text(&report, "fix").starts_with(&format!(
                "the node DaemonSet of {DRIVER} has no pod on node harness-node"
            )),
            "{report:#}"
        );
    }
    scene.end().await;
}

/// Waits until the driver's controller pod is running and ready.
async fn wait_controller_ready(admin: &Client) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), DRIVER_NS);
    node::wait_or_explain(
        admin,
        &[DRIVER_NS],
        "the driver's controller pod ready",
        async || {
            let listed = pods.list(&ListParams::default()).await.ok()?;
            listed
                .items
                .iter()
                .filter(|pod| {
                    pod.metadata
                        .name
                        .as_deref()
                        .unwrap_or_default()
                        .contains("-controller-")
                })
                .any(|pod| {
                    pod.status
                        .iter()
                        .flat_map(|status| status.conditions.iter().flatten())
                        .any(|condition| condition.type_ == "Ready" && condition.status == "True")
                })
                .then_some(())
        },
    )
    .await;
}

/// A pod `name` using claim `data`, bound by hand to `node` (as the scheduler bound it before
/// the node went away).
fn pod_on(name: &str, node: &str) -> Value {
    let mut bound = pod(name, "data");
    bound["spec"]["nodeName"] = json!(node);
    bound
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_pod_on_a_node_whose_kubelet_never_reports() {
    let scene = Scene::new().await;
    install_hostpath(&scene.admin, |_| {}).await;
    wait_registered(&scene.admin).await;
    wait_controller_ready(&scene.admin).await;
    // A second Node, made by hand: no kubelet ever reports for it, and the node lifecycle
    // controller marks it Ready=Unknown after its grace period (about a minute).
    scene
        .create(cluster(
            "v1",
            "Node",
            json!({"metadata": {"name": QUIET_NODE, "labels": {LABEL: "true"}}}),
        ))
        .await;
    scene
        .bound_claim("e2e-diagnose-made", "made-beforehand")
        .await;
    scene
        .create(in_ns("v1", "Pod", pod_on("app", QUIET_NODE)))
        .await;
    let report = scene.finding(&["pod", "app"], "NodeNotReady").await;
    assert_eq!(
        text(&report, "cause"),
        format!("node {QUIET_NODE} is not Ready")
    );
    assert!(
        evidence(&report).contains("Kubelet never posted node status."),
        "{report:#}"
    );
    assert!(
        text(&report, "fix").contains(&format!("`kubectl describe node {QUIET_NODE}`")),
        "{report:#}"
    );
    assert!(
        text(&report, "fix").contains("node.kubernetes.io/out-of-service"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_pod_on_a_node_that_is_gone() {
    let scene = Scene::new().await;
    install_hostpath(&scene.admin, |_| {}).await;
    wait_registered(&scene.admin).await;
    wait_controller_ready(&scene.admin).await;
    scene
        .bound_claim("e2e-diagnose-made", "made-beforehand")
        .await;
    // The pod garbage collector deletes a pod of a node that does not exist about 40 s after
    // it sees it; the diagnosis comes well before.
    scene
        .create(in_ns("v1", "Pod", pod_on("app", GONE_NODE)))
        .await;
    let report = scene.finding(&["pod", "app"], "NodeNotReady").await;
    assert_eq!(
        text(&report, "cause"),
        format!("node {GONE_NODE} does not exist")
    );
    assert!(
        evidence(&report).contains(&format!("nodes \\\"{GONE_NODE}\\\" not found")),
        "{report:#}"
    );
    assert!(
        text(&report, "fix").starts_with(&format!(
            "node {GONE_NODE} was deleted or never joined the cluster"
        )),
        "{report:#}"
    );
    assert!(
        text(&report, "fix").contains("delete the pod so that its owner recreates it"),
        "{report:#}"
    );
    scene.end().await;
}

#[tokio::test]
#[ignore = "needs a real node (../shared/k8s/node.sh) and E2E_KUBECONFIG; pass --ignored"]
async fn diagnose_on_a_node_a_volume_still_attached_to_another_node() {
    let scene = Scene::new().await;
    // Multi-attach needs a second node: one made by hand, Ready as its kubelet would first
    // register it (the node lifecycle controller marks it Unknown about a minute later; the
    // diagnosis comes well before), its attachments managed by the attach-detach controller,
    // the driver registered on it (no node pod runs there) and in the same topology as the
    // real node, as two nodes of one zone are for a zonal disk.
    install_hostpath(&scene.admin, |document| {
        if is(document, "DaemonSet") {
            document["spec"]["template"]["spec"]["nodeSelector"] =
                json!({"kubernetes.io/hostname": "harness-node"});
        }
    })
    .await;
    wait_registered(&scene.admin).await;
    scene.claim_and_pod().await;
    scene.wait_app_running().await;
    scene
        .create(cluster(
            "v1",
            "Node",
            json!({
                "metadata": {
                    "name": SECOND_NODE,
                    "labels": {LABEL: "true", "kubernetes.io/hostname": SECOND_NODE,
                               "topology.hostpath.csi/node": "harness-node"},
                    "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
                },
                "status": {"conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"
                }]}
            }),
        ))
        .await;
    scene
        .create(cluster(
            "storage.k8s.io/v1",
            "CSINode",
            json!({
                "metadata": {"name": SECOND_NODE, "labels": {LABEL: "true"}},
                "spec": {"drivers": [{"name": DRIVER, "nodeID": SECOND_NODE,
                                      "topologyKeys": ["topology.hostpath.csi/node"]}]}
            }),
        ))
        .await;
    // A second pod of the claim, placed on the other node (as a rolling update places it).
    scene
        .create(in_ns("v1", "Pod", pod_on("app-2", SECOND_NODE)))
        .await;
    let report = scene.finding(&["pod", "app-2"], "MultiAttach").await;
    let cause = text(&report, "cause");
    assert!(
        cause.ends_with(
            " is still attached to node harness-node (used there by pod app) and can be \
             attached to one node at a time"
        ),
        "{cause}"
    );
    let evidence = evidence(&report);
    assert!(
        evidence.contains("Multi-Attach error for volume")
            && evidence.contains("Volume is already used by pod(s) app"),
        "{report:#}"
    );
    assert!(
        evidence.contains("node harness-node, attached true"),
        "{report:#}"
    );
    assert!(
        text(&report, "fix").starts_with(
            "stop what uses it on node harness-node: delete that pod or scale its owner down"
        ),
        "{report:#}"
    );
    scene.end().await;
}
