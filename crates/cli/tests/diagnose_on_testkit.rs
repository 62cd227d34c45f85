//! `storage-operator diagnose` as a user runs it, against the in-process API server served on
//! loopback: what it reads for a subject (and that it writes nothing), the finding it prints
//! in each format with its exit code, and how it takes a refused read.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::collections::BTreeSet;
use std::process::Output;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testkit::{Cluster, FaultRule};

const NS: &str = "app";
const DRIVER: &str = "hostpath.csi.k8s.io";
const DRIVER_NS: &str = "csi-hostpath";

/// Runs the binary with `args` against `cluster` (off the async runtime, which keeps serving).
async fn diagnose(cluster: &Cluster, args: &[&str]) -> Output {
    let kubeconfig = cluster.kubeconfig().await.unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_storage-operator"));
    command.arg("diagnose").args(args);
    if matches!(args.first(), Some(&("pvc" | "pod" | "driver"))) {
        command.arg("--kubeconfig").arg(kubeconfig.path());
    }
    command
        .env_remove("KUBECONFIG")
        .env_remove("LOG_LEVEL")
        .env_remove("LOG_FORMAT");
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    drop(kubeconfig);
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

async fn create<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

/// A cluster with namespace `app`, one class `standard` of the hostpath driver (its CSIDriver
/// and a node), and claim `data` of class `class`.
async fn scene(class: &str) -> Cluster {
    let cluster = Cluster::start().await;
    cluster.add_node("node-0", true);
    let client = cluster.client();
    create(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()),
        json!({"metadata": {"name": NS}}),
    )
    .await;
    create(
        &Api::<k8s_openapi::api::storage::v1::StorageClass>::all(client.clone()),
        json!({"metadata": {"name": "standard"}, "provisioner": DRIVER,
               "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    create(
        &Api::<k8s_openapi::api::storage::v1::CSIDriver>::all(client.clone()),
        json!({"metadata": {"name": DRIVER}, "spec": {"attachRequired": false}}),
    )
    .await;
    create(
        &Api::<PersistentVolumeClaim>::namespaced(client, NS),
        json!({"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": class,
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    cluster
}

/// `(verb, resource, namespace)` of every request since the last `clear_requests`.
fn reads(cluster: &Cluster) -> BTreeSet<(String, String, String)> {
    cluster
        .requests()
        .iter()
        .map(|r| {
            let resource = match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.resource),
                None => r.resource.clone(),
            };
            (
                r.verb.clone(),
                resource,
                r.namespace.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn read(verb: &str, resource: &str, namespace: &str) -> (String, String, String) {
    (verb.to_owned(), resource.to_owned(), namespace.to_owned())
}

fn assert_no_writes(cluster: &Cluster) {
    let writes: Vec<String> = cluster
        .requests()
        .iter()
        // (A path of an API that is not served is logged as `discovery`: a read too.)
        .filter(|r| r.is_write() || !(r.is_read() || r.verb == "discovery"))
        .map(|r| format!("{} {}", r.verb, r.path))
        .collect();
    assert!(writes.is_empty(), "diagnose did more than read: {writes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_a_missing_class_is_found_with_only_the_reads_it_needs() {
    let cluster = scene("fast").await;
    cluster.clear_requests();

    let output = diagnose(&cluster, &["pvc", "-n", NS, "data", "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["subject"]["name"], "data");
    assert_eq!(report["finding"]["kind"], "NoSuchStorageClass");
    assert_eq!(
        report["finding"]["cause"],
        "the claim's StorageClass fast does not exist"
    );
    let fix = report["finding"]["fix"].as_str().unwrap();
    assert!(fix.contains("create StorageClass fast"), "{fix}");
    assert!(fix.contains("standard"), "{fix}");

    assert_no_writes(&cluster);
    // The claim by name, the namespace's pods and Events, the cluster-wide kinds the chain
    // needs; no driver is involved, so none of its objects.
    let expected: BTreeSet<_> = [
        read("get", "persistentvolumeclaims", NS),
        read("list", "pods", NS),
        read("list", "events", NS),
        read("list", "storageclasses", ""),
        read("list", "volumeattachments", ""),
        read("list", "csidrivers", ""),
        read("list", "csinodes", ""),
        read("list", "nodes", ""),
    ]
    .into();
    assert_eq!(reads(&cluster), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_yaml_say_the_same_as_json() {
    let cluster = scene("fast").await;
    let text = diagnose(&cluster, &["pvc", "-n", NS, "data"]).await;
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    let text = stdout(&text);
    assert!(
        text.starts_with(
            "PersistentVolumeClaim app/data: the claim's StorageClass fast does not exist (NoSuchStorageClass)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\nFix:\n  create StorageClass fast"),
        "{text}"
    );
    assert!(
        text.contains("[BROKEN]      StorageClass fast: not found"),
        "{text}"
    );

    let yaml = diagnose(&cluster, &["pvc", "-n", NS, "data", "-o", "yaml"]).await;
    assert_eq!(yaml.status.code(), Some(1));
    let yaml: Value = serde_saphyr::from_str(&stdout(&yaml)).unwrap();
    let json = diagnose(&cluster, &["pvc", "-n", NS, "data", "-o", "json"]).await;
    let json: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(yaml, json);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_claim_lists_the_claims_that_exist() {
    let cluster = scene("standard").await;
    let output = diagnose(&cluster, &["pvc", "-n", NS, "dta", "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["finding"]["kind"], "NoSuchClaim");
    let fix = report["finding"]["fix"].as_str().unwrap();
    assert!(fix.contains(": data"), "{fix}");
}

/// The hostpath driver as its own manifests install it: a node DaemonSet whose plugin names
/// the driver, a controller Deployment with the CSI sidecars, and the controller's pod, whose
/// provisioner keeps crashing.
async fn install_driver_with_crashing_controller(cluster: &Cluster) {
    let client = cluster.client();
    create(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()),
        json!({"metadata": {"name": DRIVER_NS}}),
    )
    .await;
    let template = |app: &str, containers: Value| {
        json!({"selector": {"matchLabels": {"app": app}},
               "template": {"metadata": {"labels": {"app": app}},
                            "spec": {"containers": containers}}})
    };
    create(
        &Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(client.clone(), DRIVER_NS),
        json!({"metadata": {"name": "node"}, "spec": template("node", json!([
            {"name": "plugin", "image": "hostpathplugin", "args": [format!("--drivername={DRIVER}")]}
        ]))}),
    )
    .await;
    create(
        &Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), DRIVER_NS),
        json!({"metadata": {"name": "controller"}, "spec": template("controller", json!([
            {"name": "csi-provisioner", "image": "csi-provisioner"}
        ]))}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client, DRIVER_NS);
    create(
        &pods,
        json!({"metadata": {"name": "controller-0", "labels": {"app": "controller"}},
               "spec": {"nodeName": "node-0", "containers": [{"name": "csi-provisioner", "image": "csi-provisioner"}]}}),
    )
    .await;
    pods.patch_status(
        "controller-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "containerStatuses": [{
            "name": "csi-provisioner", "image": "csi-provisioner", "imageID": "", "ready": false,
            "restartCount": 4, "started": false,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}
        }]}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_controller_of_a_driver_installed_from_its_manifests_is_found() {
    let cluster = scene("standard").await;
    install_driver_with_crashing_controller(&cluster).await;
    cluster.clear_requests();

    let output = diagnose(&cluster, &["pvc", "-n", NS, "data", "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        report["finding"]["kind"], "DriverControllerNotRunning",
        "{report:#}"
    );
    let cause = report["finding"]["cause"].as_str().unwrap();
    assert!(cause.contains("CrashLoopBackOff"), "{cause}");
    let fix = report["finding"]["fix"].as_str().unwrap();
    assert!(
        fix.contains("kubectl logs -n csi-hostpath controller-0 -c csi-provisioner --previous"),
        "{fix}"
    );

    assert_no_writes(&cluster);
    let reads = reads(&cluster);
    // The driver is found by its DaemonSet, its controller beside it; its pods by their labels,
    // the log of the restarted container (testkit serves no logs: a note, not an error), the
    // Events of its namespace; the APIs plain Kubernetes lacks are tried and noted.
    for expected in [
        read("list", "daemonsets", ""),
        read("list", "deployments", DRIVER_NS),
        read("list", "pods", DRIVER_NS),
        read("get", "pods/log", DRIVER_NS),
        read("list", "events", DRIVER_NS),
    ] {
        assert!(reads.contains(&expected), "{expected:?} not in {reads:?}");
    }
    assert!(
        cluster
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/csidriverdeployments")),
        "{reads:?}"
    );
    let notes = stderr(&output);
    assert!(
        notes.contains("note: not checked: list csidriverdeployments"),
        "{notes}"
    );
    assert!(
        notes.contains("note: not checked: get pods/log in namespace csi-hostpath"),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_is_diagnosed_by_its_csi_name() {
    let cluster = scene("standard").await;
    install_driver_with_crashing_controller(&cluster).await;
    let output = diagnose(&cluster, &["driver", DRIVER, "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["subject"]["kind"], "CSIDriver");
    assert_eq!(report["finding"]["kind"], "DriverControllerNotRunning");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_required_read_is_an_error_naming_the_rbac() {
    let cluster = scene("fast").await;
    cluster.inject(FaultRule::status(Some("list"), Some("storageclasses"), 403));
    let output = diagnose(&cluster, &["pvc", "-n", NS, "data"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    let error = stderr(&output);
    assert!(
        error.starts_with("error: the API server refused to list storageclasses"),
        "{error}"
    );
    assert!(
        error.contains(
            "diagnose needs verbs [get, list] on storageclasses (apiGroup \"storage.k8s.io\")"
        ),
        "{error}"
    );
    assert!(error.contains("--print-rbac"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_optional_read_leaves_its_link_not_checked() {
    let cluster = scene("standard").await;
    install_driver_with_crashing_controller(&cluster).await;
    cluster.inject(FaultRule::status(Some("list"), Some("daemonsets"), 403));
    let output = diagnose(&cluster, &["pvc", "-n", NS, "data", "-o", "json"]).await;
    let notes = stderr(&output);
    // Without the driver's pods the claim's own state is what is left to say.
    assert_eq!(output.status.code(), Some(1), "{notes}");
    assert!(
        notes.contains("note: not checked: list daemonsets: forbidden; it needs verbs [get, list] on daemonsets (apiGroup \"apps\")"),
        "{notes}"
    );
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let controller = report["chain"]
        .as_array()
        .unwrap()
        .iter()
        .find(|link| link["name"] == "Controller")
        .unwrap();
    assert_eq!(controller["state"], "NotChecked", "{report:#}");
    assert_eq!(report["finding"]["kind"], "WaitForFirstConsumerNoPod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_are_refused_before_connecting() {
    let cluster = Cluster::start().await;
    cluster.clear_requests();
    for args in [
        &["pvc", "-n", NS, "a/b"][..],
        &["pod", "-n", "Bad_NS", "x"][..],
        &["driver", ""][..],
    ] {
        let output = diagnose(&cluster, args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let error = stderr(&output);
        assert!(
            error.contains("is not a valid Kubernetes name"),
            "{args:?}: {error}"
        );
    }
    assert!(cluster.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_rbac_is_a_cluster_role_of_reads() {
    let cluster = Cluster::start().await;
    let output = diagnose(&cluster, &["--print-rbac"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let role: k8s_openapi::api::rbac::v1::ClusterRole =
        serde_saphyr::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        role.metadata.name.as_deref(),
        Some("storage-operator-diagnose")
    );
    let verbs: BTreeSet<String> = role
        .rules
        .unwrap()
        .into_iter()
        .flat_map(|rule| rule.verbs)
        .collect();
    assert_eq!(verbs, BTreeSet::from(["get".to_owned(), "list".to_owned()]));
}

/// A healthy pod of the driver on node-0, labelled `labels`.
fn running_pod(name: &str, labels: std::collections::BTreeMap<String, String>) -> Value {
    json!({"metadata": {"name": name, "labels": labels},
           "spec": {"nodeName": "node-0", "containers": [{"name": "csi-driver", "image": "driver"}]}})
}

const RUNNING: &str = r#"{"status": {"phase": "Running",
    "conditions": [{"type": "Ready", "status": "True"}],
    "containerStatuses": [{"name": "csi-driver", "image": "driver", "imageID": "", "ready": true,
                           "restartCount": 0, "started": true,
                           "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}}"#;

/// The driver of `def` at work: its controller and node pods (`<prefix>-controller-0`,
/// `<prefix>-node-0`) running on node-0 where its selectors find them, and node-0's CSINode
/// registering it.
async fn run_driver(cluster: &Cluster, def: &csi_kit::DriverDef, prefix: &str) {
    let client = cluster.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &def.namespace);
    for (name, labels) in [
        (
            format!("{prefix}-controller-0"),
            csi_kit::names::controller_selector(def),
        ),
        (
            format!("{prefix}-node-0"),
            csi_kit::names::node_selector(def),
        ),
    ] {
        create(&pods, running_pod(&name, labels)).await;
        pods.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::from_str::<Value>(RUNNING).unwrap()),
        )
        .await
        .unwrap();
    }
    create(
        &Api::<k8s_openapi::api::storage::v1::CSINode>::all(client),
        json!({"metadata": {"name": "node-0"},
               "spec": {"drivers": [{"name": def.name, "nodeID": "node-0"}]}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_driver_whose_csi_driver_deployment_is_degraded() {
    let cluster = scene("standard").await;
    let client = cluster.client();
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "CSIDriverDeployment")
        .unwrap();
    create(
        &Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(client.clone()),
        serde_json::to_value(crd).unwrap(),
    )
    .await;
    create(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()),
        json!({"metadata": {"name": DRIVER_NS}}),
    )
    .await;
    // The example as a user declares it, and what its controller would say of a bad template.
    let declared: api::csidriver_v1alpha1::CSIDriverDeployment = serde_saphyr::from_str(
        include_str!("../../../examples/csidriverdeployment/hostpath.yaml"),
    )
    .unwrap();
    let declared_api: Api<api::csidriver_v1alpha1::CSIDriverDeployment> =
        Api::namespaced(client.clone(), DRIVER_NS);
    declared_api
        .create(&PostParams::default(), &declared)
        .await
        .unwrap();
    declared_api
        .patch_status(
            "hostpath",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Degraded", "status": "True", "reason": "SyncError",
                 "lastTransitionTime": "2026-01-01T00:00:00Z",
                 "message": "applying DaemonSet csi-hostpath/hostpath-node: forbidden"}]}})),
        )
        .await
        .unwrap();
    // Its pods where the CSIDriverDeployment's names put them, running well, and the node's
    // registration.
    run_driver(
        &cluster,
        &csi_driver_deployment::driver_def(&declared),
        "hostpath",
    )
    .await;
    cluster.clear_requests();

    let output = diagnose(&cluster, &["driver", DRIVER, "-o", "json"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["finding"]["kind"], "OperatorDegraded", "{report:#}");
    assert_eq!(
        report["finding"]["cause"],
        format!(
            "CSIDriverDeployment csi-hostpath/hostpath, which installs {DRIVER}, reports a failure"
        )
    );
    assert_eq!(
        report["finding"]["evidence"][0]["message"],
        "applying DaemonSet csi-hostpath/hostpath-node: forbidden"
    );
    let states: Vec<(String, String)> = report["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|link| {
            (
                link["name"].as_str().unwrap().to_owned(),
                link["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for link in ["Controller", "NodePlugin", "CSINode"] {
        assert!(
            states.contains(&(link.to_owned(), "Ok".to_owned())),
            "{link} not Ok in {states:?}"
        );
    }
    // Found through its CSIDriverDeployment, not by searching the cluster's DaemonSets.
    assert_no_writes(&cluster);
    assert!(!reads(&cluster).contains(&read("list", "daemonsets", "")));
}

const EBS: &str = "ebs.csi.aws.com";

/// AWS EBS from the driver catalogue, as its operator installs it: the CSIDriver, a class that
/// binds at once, the controller and node pods running where the catalogue's selectors find
/// them, and node-0's registration; then one claim of the class per `(name, access mode,
/// volume mode, size)`.
async fn catalogue_scene(claims: &[(&str, &str, &str, &str)]) -> Cluster {
    let cluster = scene("standard").await;
    let client = cluster.client();
    let def = drivers::by_name("aws-ebs").unwrap();
    create(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()),
        json!({"metadata": {"name": def.namespace}}),
    )
    .await;
    create(
        &Api::<k8s_openapi::api::storage::v1::CSIDriver>::all(client.clone()),
        json!({"metadata": {"name": EBS}, "spec": {"attachRequired": true}}),
    )
    .await;
    create(
        &Api::<k8s_openapi::api::storage::v1::StorageClass>::all(client.clone()),
        json!({"metadata": {"name": "ebs-now"}, "provisioner": EBS,
               "parameters": {"type": "gp3"}, "volumeBindingMode": "Immediate"}),
    )
    .await;
    run_driver(&cluster, &def, "aws-ebs-csi-driver").await;
    let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(client, NS);
    for (name, access_mode, volume_mode, size) in claims {
        create(
            &claims_api,
            json!({"metadata": {"name": name}, "spec": {
                "accessModes": [access_mode], "volumeMode": volume_mode,
                "storageClassName": "ebs-now",
                "resources": {"requests": {"storage": size}}}}),
        )
        .await;
    }
    cluster.clear_requests();
    cluster
}

/// `diagnose pvc -o json` of `claim`: its exit code and report.
async fn diagnose_claim(cluster: &Cluster, claim: &str) -> (Option<i32>, Value) {
    let output = diagnose(cluster, &["pvc", "-n", NS, claim, "-o", "json"]).await;
    let report = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|e| panic!("{e}: {}", stderr(&output)));
    (output.status.code(), report)
}

/// The evidence of a finding whose object is `object`, as `source: message`.
fn evidence_of(report: &Value, object: &str) -> Vec<String> {
    report["finding"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["object"] == object)
        .map(|e| {
            format!(
                "{}: {}",
                e["source"].as_str().unwrap(),
                e["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// A claim of a catalogue driver's class is judged by the sizes the catalogue gives the
/// driver (AWS EBS: at most 64Ti, io2 Block Express), which the evidence cites as the
/// catalogue's; a claim within them has nothing wrong with its request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_above_the_catalogues_largest_volume_is_out_of_range() {
    let cluster = catalogue_scene(&[
        ("too-big", "ReadWriteOnce", "Filesystem", "65Ti"),
        ("fits", "ReadWriteOnce", "Filesystem", "64Ti"),
    ])
    .await;

    let (code, report) = diagnose_claim(&cluster, "too-big").await;
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["finding"]["kind"], "SizeOutOfRange", "{report:#}");
    assert_eq!(
        report["finding"]["cause"],
        format!("the claim requests 65Ti, above the volumes {EBS} creates (of at most 64Ti)")
    );
    assert_eq!(
        evidence_of(&report, &format!("catalogue of {EBS}")),
        [format!(
            "volume sizes: {EBS} creates volumes of at most 64Ti"
        )]
    );
    let fix = report["finding"]["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("recreate the claim with spec.resources.requests.storage of at most 64Ti"),
        "{fix}"
    );

    let (code, report) = diagnose_claim(&cluster, "fits").await;
    assert_eq!(code, Some(0), "{report:#}");
    assert!(report["finding"].is_null(), "{report:#}");
    let provisioning = report["chain"]
        .as_array()
        .unwrap()
        .iter()
        .find(|link| link["name"] == "Provisioning")
        .unwrap();
    assert_eq!(provisioning["state"], "Ok", "{report:#}");
    assert_no_writes(&cluster);
}

/// An access mode the catalogue's driver does not offer with the claim's volume mode (AWS EBS:
/// ReadWriteMany only of a raw block device, io2 Multi-Attach) is found, with the catalogue's
/// modes in evidence and the volume mode that offers it in the fix; the same claim as a raw
/// block device is one the driver takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_mode_the_catalogues_driver_lacks_is_unsupported() {
    let cluster = catalogue_scene(&[
        ("shared", "ReadWriteMany", "Filesystem", "100Gi"),
        ("shared-block", "ReadWriteMany", "Block", "100Gi"),
    ])
    .await;

    let (code, report) = diagnose_claim(&cluster, "shared").await;
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(
        report["finding"]["kind"], "AccessModeUnsupported",
        "{report:#}"
    );
    assert_eq!(
        report["finding"]["cause"],
        format!(
            "the claim asks for ReadWriteMany, which {EBS} does not offer with volumeMode Filesystem"
        )
    );
    assert_eq!(
        evidence_of(&report, &format!("catalogue of {EBS}")),
        [format!(
            "access modes: {EBS} offers with volumeMode Filesystem: ReadWriteOnce, ReadWriteOncePod"
        )]
    );
    let fix = report["finding"]["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(&format!(
            "recreate the claim with spec.accessModes from: ReadWriteOnce, ReadWriteOncePod; or \
             with spec.volumeMode Block, with which {EBS} offers ReadWriteMany"
        )),
        "{fix}"
    );

    let (code, report) = diagnose_claim(&cluster, "shared-block").await;
    assert_eq!(code, Some(0), "{report:#}");
    assert!(report["finding"].is_null(), "{report:#}");
    assert_no_writes(&cluster);
}
