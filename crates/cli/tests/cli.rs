//! The binary as a user runs it: exit codes, what goes to stdout and stderr.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::path::Path;
use std::process::{Command, Output};

fn storage_operator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args(args)
        .env_remove("LOG_LEVEL")
        .env_remove("LOG_FORMAT")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn deploy_crds() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/crds"))
}

#[test]
fn version_names_version_and_commit() {
    let output = storage_operator(&["--version"]);
    assert!(output.status.success());
    let line = stdout(&output);
    assert!(
        line.starts_with(&format!(
            "storage-operator {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
}

#[test]
fn help_lists_every_subcommand() {
    let output = storage_operator(&["--help"]);
    assert!(output.status.success());
    let help = stdout(&output);
    for subcommand in ["run", "driver", "csidriverdeployments", "render", "crds"] {
        assert!(
            help.contains(&format!("\n  {subcommand} ")),
            "{subcommand} missing from:\n{help}"
        );
    }
    assert!(help.contains("--log-format"));
}

#[test]
fn crds_prints_every_crd_as_multi_document_yaml() {
    let output = storage_operator(&["crds"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let yaml = stdout(&output);
    let documents: Vec<serde_json::Value> = yaml
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect();
    let names: Vec<&str> = documents
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "clustercsidrivers.operator.openshift.io",
            "storages.operator.openshift.io",
            "clusteroperators.config.openshift.io",
            "infrastructures.config.openshift.io",
            "proxies.config.openshift.io",
            "featuregates.config.openshift.io",
            "csidriverdeployments.csidriver.storage.openshift.io",
            "builds.build.openshift.io",
        ]
    );
    assert!(
        documents
            .iter()
            .all(|d| d["kind"] == "CustomResourceDefinition")
    );
    assert!(!yaml.contains('\u{1b}'), "no terminal colours in the YAML");
}

#[test]
fn crds_check_passes_on_the_committed_files_and_names_stale_ones() {
    let output = storage_operator(&["crds", "--check", deploy_crds().to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));

    let dir = std::env::temp_dir().join(format!("crds-check-{}", std::process::id()));
    let written = storage_operator(&["crds", "--out-dir", dir.to_str().unwrap()]);
    assert!(written.status.success(), "{}", stderr(&written));
    let edited = dir.join("config.openshift.io_proxies.yaml");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, text.replace("Proxy", "Proxxy")).unwrap();

    let output = storage_operator(&["crds", "--check", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("config.openshift.io_proxies.yaml differs"),
        "{message}"
    );
    assert!(
        !message.contains("clustercsidrivers"),
        "only the stale file is named: {message}"
    );
    assert!(
        message.contains("storage-operator crds --out-dir"),
        "says how to fix it: {message}"
    );
}

#[test]
fn driver_names_the_known_drivers_and_needs_a_cluster() {
    let unknown = storage_operator(&["driver", "nfs"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("unknown CSI driver \"nfs\""),
        "{}",
        stderr(&unknown)
    );
    assert!(
        stderr(&unknown).contains("gcp-pd"),
        "lists the known drivers: {}",
        stderr(&unknown)
    );

    let no_cluster = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args(["driver", "gcp-pd", "--admin-address", "127.0.0.1:0"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(no_cluster.status.code(), Some(1));
    let said = stderr(&no_cluster);
    assert!(
        said.contains("no Kubernetes API to connect to: not in a pod (KUBERNETES_SERVICE_HOST is unset) and no kubeconfig at /nonexistent/kubeconfig: set KUBECONFIG"),
        "{said}"
    );
    assert_eq!(
        said.matches("/nonexistent/kubeconfig").count(),
        1,
        "said once: {said}"
    );
}

/// With a hosted control plane (`--guest-kubeconfig`) only the drivers OpenShift runs there
/// start, and the guest kubeconfig is read before anything connects.
#[test]
fn driver_with_a_guest_kubeconfig_says_what_is_wrong_first() {
    let not_hosted = storage_operator(&[
        "driver",
        "gcp-pd",
        "--guest-kubeconfig",
        "/nonexistent/guest",
    ]);
    assert_eq!(not_hosted.status.code(), Some(1));
    assert!(
        stderr(&not_hosted).contains("driver gcp-pd does not run with a hosted control plane"),
        "{}",
        stderr(&not_hosted)
    );
    let missing = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "driver",
            "aws-ebs",
            "--guest-kubeconfig",
            "/nonexistent/guest",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("--guest-kubeconfig: reading /nonexistent/guest"),
        "{}",
        stderr(&missing)
    );
}

/// The driver operator takes its config file (`--config`, the TLS profile the cluster storage
/// operator mounts) as OpenShift's driver operators do: read and logged before it connects; a
/// file it cannot read is logged and does not stop it.
#[test]
fn driver_reads_its_config_file() {
    let dir = std::env::temp_dir().join(format!("cso-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.yaml");
    std::fs::write(
        &file,
        "apiVersion: operator.openshift.io/v1alpha1\nkind: GenericOperatorConfig\nservingInfo:\n  cipherSuites:\n  - TLS_AES_128_GCM_SHA256\n  minTLSVersion: VersionTLS13\n",
    )
    .unwrap();
    let run = |config: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_storage-operator"))
            .args(["driver", "gcp-pd", "--admin-address", "127.0.0.1:0"])
            .arg(format!("--config={}", config.display()))
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap()
    };
    let read = run(&file);
    let said = format!("{}{}", stdout(&read), stderr(&read));
    assert!(
        said.contains("read the operator config") && said.contains("VersionTLS13"),
        "{said}"
    );
    // Then it goes on, to the missing cluster.
    assert!(said.contains("no Kubernetes API to connect to"), "{said}");
    let missing = run(&dir.join("missing.yaml"));
    let said = format!("{}{}", stdout(&missing), stderr(&missing));
    assert!(said.contains("cannot read the operator config"), "{said}");
    assert!(said.contains("no Kubernetes API to connect to"), "{said}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Out of a cluster, a Lease namespace that does not exist is named with the flag that fixes
/// it, once, instead of the API server's 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_lease_namespace_is_named_with_its_fix() {
    let cluster = testkit::Cluster::start().await;
    let kubeconfig = cluster.kubeconfig().await.unwrap();
    let path = kubeconfig.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_storage-operator"))
            .args([
                "builds",
                "--namespace",
                "nope",
                "--admin-address",
                "127.0.0.1:0",
            ])
            .env("KUBECONFIG", path)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("LOG_LEVEL")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = stderr(&output);
    assert!(
        said.contains("error: the namespace nope of the leader election Lease storage-operator-builds-lock does not exist: create it, or name an existing one with --namespace (POD_NAMESPACE)"),
        "{said}"
    );
    assert_eq!(said.matches("nope").count(), 1, "said once: {said}");
}

#[test]
fn a_bad_log_filter_warns_and_carries_on() {
    let output = storage_operator(&["--log-level", "info,=[", "crds"]);
    assert!(output.status.success());
    assert!(
        stderr(&output).contains("invalid --log-level"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn json_logs_are_json_lines() {
    let dir = std::env::temp_dir().join(format!("crds-json-{}", std::process::id()));
    let output = storage_operator(&[
        "--log-format",
        "json",
        "crds",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(output.status.success());
    let logs = stderr(&output);
    assert!(!logs.is_empty());
    for line in logs.lines() {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(entry["fields"]["message"], "wrote generated file");
    }
}

fn documents(yaml: &str) -> Vec<serde_json::Value> {
    yaml.split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect()
}

fn find<'a>(docs: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// A driver `render --platform` installs: short name, CSI name, controller Deployment, node
/// DaemonSet.
type Rendered = (&'static str, &'static str, &'static str, &'static str);

/// The drivers `render --platform` installs on each platform.
const PLATFORM_DRIVERS: &[(&str, &[Rendered])] = &[
    (
        "GCP",
        &[(
            "gcp-pd",
            "pd.csi.storage.gke.io",
            "gcp-pd-csi-driver-controller",
            "gcp-pd-csi-driver-node",
        )],
    ),
    (
        "AWS",
        &[(
            "aws-ebs",
            "ebs.csi.aws.com",
            "aws-ebs-csi-driver-controller",
            "aws-ebs-csi-driver-node",
        )],
    ),
    (
        "Azure",
        &[
            (
                "azure-disk",
                "disk.csi.azure.com",
                "azure-disk-csi-driver-controller",
                "azure-disk-csi-driver-node",
            ),
            (
                "azure-file",
                "file.csi.azure.com",
                "azure-file-csi-driver-controller",
                "azure-file-csi-driver-node",
            ),
        ],
    ),
    (
        "IBMCloud",
        &[(
            "ibm-vpc-block",
            "vpc.block.csi.ibm.io",
            // OpenShift's name for it.
            "ibm-vpc-block-csi-controller",
            "ibm-vpc-block-csi-node",
        )],
    ),
    (
        "PowerVS",
        &[(
            "powervs-block",
            "powervs.csi.ibm.com",
            "ibm-powervs-block-csi-driver-controller",
            "ibm-powervs-block-csi-driver-node",
        )],
    ),
];

#[test]
fn render_platform_prints_every_operand_of_its_drivers() {
    for (platform, expected) in PLATFORM_DRIVERS {
        let output = storage_operator(&["render", "--platform", platform]);
        assert!(output.status.success(), "{platform}: {}", stderr(&output));
        let docs = documents(&stdout(&output));
        for (short, csi_name, controller, node) in *expected {
            let controller = find(&docs, "Deployment", controller);
            assert_eq!(
                controller["spec"]["replicas"], 2,
                "HighlyAvailable is the default topology"
            );
            find(&docs, "DaemonSet", node);
            find(&docs, "CSIDriver", csi_name);
            assert!(
                docs.iter()
                    .any(|d| d["kind"] == "StorageClass" && d["provisioner"] == *csi_name),
                "{platform}: no StorageClass of {csi_name}"
            );
            // What the cluster storage operator itself creates comes first.
            let operator = find(&docs, "Deployment", &format!("{short}-csi-driver-operator"));
            assert_eq!(
                operator["spec"]["template"]["spec"]["containers"][0]["args"],
                serde_json::json!([
                    "driver",
                    short,
                    "--config=/var/run/configmaps/config/config.yaml",
                    "--metrics-address=0.0.0.0:8443"
                ])
            );
            // Its config ConfigMap (the TLS profile: Intermediate when rendered offline).
            let config = find(
                &docs,
                "ConfigMap",
                &format!("{short}-csi-driver-operator-config"),
            );
            assert!(
                config["data"]["config.yaml"]
                    .as_str()
                    .unwrap()
                    .contains("minTLSVersion: VersionTLS12")
            );
            find(&docs, "ClusterCSIDriver", csi_name);
        }
        find(&docs, "ClusterRole", "openshift-csi-main-provisioner-role");
        assert_eq!(docs[0]["kind"], "Namespace");
        assert!(
            docs.iter()
                .all(|d| d["apiVersion"].is_string() && d["metadata"]["name"].is_string())
        );
    }
}

/// Parses `doc` as `K` and serializes it back: equal only when every field is known to the
/// type and has the right shape (k8s-openapi ignores unknown fields on parse).
fn round_trips<K: serde::de::DeserializeOwned + serde::Serialize>(doc: &serde_json::Value) {
    let parsed: K = serde_json::from_value(doc.clone()).unwrap_or_else(|e| {
        panic!(
            "{} {} does not parse: {e}",
            doc["kind"], doc["metadata"]["name"]
        )
    });
    assert_eq!(
        &serde_json::to_value(parsed).unwrap(),
        doc,
        "{} {} has fields its type does not know",
        doc["kind"],
        doc["metadata"]["name"]
    );
}

#[test]
fn render_platform_output_is_schema_valid() {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};

    let platforms = PLATFORM_DRIVERS
        .iter()
        .map(|(platform, _)| *platform)
        .chain(["OpenStack", "VSphere"]);
    for platform in platforms {
        for topology in ["HighlyAvailable", "SingleReplica", "External", "Kubernetes"] {
            let output =
                storage_operator(&["render", "--platform", platform, "--topology", topology]);
            assert!(output.status.success(), "{platform}: {}", stderr(&output));
            if stdout(&output).is_empty() {
                // IBM VPC Block is not installed on an External control plane (ROKS).
                assert_eq!((platform, topology), ("IBMCloud", "External"));
                continue;
            }
            for doc in documents(&stdout(&output)) {
                match doc["kind"].as_str().unwrap() {
                    "Namespace" => round_trips::<Namespace>(&doc),
                    "ServiceAccount" => round_trips::<ServiceAccount>(&doc),
                    "ClusterRole" => round_trips::<ClusterRole>(&doc),
                    "ClusterRoleBinding" => round_trips::<ClusterRoleBinding>(&doc),
                    "Role" => round_trips::<Role>(&doc),
                    "RoleBinding" => round_trips::<RoleBinding>(&doc),
                    "ConfigMap" => round_trips::<ConfigMap>(&doc),
                    "Secret" => round_trips::<Secret>(&doc),
                    "NetworkPolicy" => {
                        round_trips::<k8s_openapi::api::networking::v1::NetworkPolicy>(&doc)
                    }
                    "Service" => round_trips::<Service>(&doc),
                    "PodDisruptionBudget" => round_trips::<PodDisruptionBudget>(&doc),
                    "Deployment" => round_trips::<Deployment>(&doc),
                    "DaemonSet" => round_trips::<DaemonSet>(&doc),
                    "CSIDriver" => round_trips::<CSIDriver>(&doc),
                    "StorageClass" => round_trips::<StorageClass>(&doc),
                    "ClusterCSIDriver" => round_trips::<api::operator_v1::ClusterCSIDriver>(&doc),
                    // Kinds without a typed struct: the fields every object needs.
                    "ServiceMonitor" | "VolumeSnapshotClass" | "CredentialsRequest" => {
                        assert!(doc["apiVersion"].as_str().unwrap().contains('/'));
                        assert!(doc["metadata"]["name"].is_string());
                    }
                    other => panic!("{platform}: unexpected kind {other}"),
                }
            }
        }
    }
}

#[test]
fn render_platform_vsphere_prints_a_complete_install() {
    let output = storage_operator(&["render", "--platform", "VSphere"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let docs = documents(&stdout(&output));
    find(&docs, "Deployment", "vmware-vsphere-csi-driver-operator");
    find(&docs, "ClusterCSIDriver", "csi.vsphere.vmware.com");
    let controller = find(&docs, "Deployment", "vmware-vsphere-csi-driver-controller");
    let containers = controller["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert!(containers.iter().any(|c| c["name"] == "vsphere-syncer"));
    find(&docs, "DaemonSet", "vmware-vsphere-csi-driver-node");
    find(&docs, "CSIDriver", "csi.vsphere.vmware.com");
    // csi-vsphere.conf holds the vCenter credentials: a Secret, with the example's
    // placeholders in an offline render.
    let config: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(find(&docs, "Secret", "vsphere-csi-config-secret").clone()).unwrap();
    let conf = String::from_utf8(config.data.unwrap()["cloud.conf"].0.clone()).unwrap();
    assert!(conf.contains("[VirtualCenter"), "{conf}");
    assert!(
        conf.contains("password = \"<the vCenter password>\""),
        "{conf}"
    );
    find(
        &docs,
        "ConfigMap",
        "internal-feature-states.csi.vsphere.vmware.com",
    );
    find(&docs, "StorageClass", "thin-csi");
    find(&docs, "VolumeSnapshotClass", "csi-vsphere-vsc");
    find(
        &docs,
        "CredentialsRequest",
        "openshift-vmware-vsphere-csi-driver-operator",
    );
}

#[test]
fn render_platform_openstack_prints_cinder_and_manila() {
    let output = storage_operator(&["render", "--platform", "OpenStack"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let docs = documents(&stdout(&output));
    for (driver, operator, controller, node) in [
        (
            "cinder.csi.openstack.org",
            "openstack-cinder-csi-driver-operator",
            "openstack-cinder-csi-driver-controller",
            "openstack-cinder-csi-driver-node",
        ),
        (
            "manila.csi.openstack.org",
            "manila-csi-driver-operator",
            "openstack-manila-csi-controllerplugin",
            "openstack-manila-csi-nodeplugin",
        ),
    ] {
        find(&docs, "ClusterCSIDriver", driver);
        find(&docs, "CSIDriver", driver);
        find(&docs, "Deployment", operator);
        find(&docs, "Deployment", controller);
        find(&docs, "DaemonSet", node);
    }
    // Manila's NFS plugin on nodes, and its operands in their own namespace, as on OpenShift.
    let nfs = find(&docs, "DaemonSet", "csi-nodeplugin-nfsplugin");
    assert_eq!(nfs["metadata"]["namespace"], "openshift-manila-csi-driver");
    find(&docs, "Namespace", "openshift-manila-csi-driver");
    let conf = find(&docs, "ConfigMap", "cloud-conf");
    assert!(
        conf["data"]["cloud.conf"]
            .as_str()
            .unwrap()
            .contains("clouds-file = /etc/kubernetes/secret/clouds.yaml")
    );
    find(&docs, "StorageClass", "standard-csi");
    find(&docs, "StorageClass", "csi-manila-default");
    find(
        &docs,
        "CredentialsRequest",
        "openstack-cinder-csi-driver-operator",
    );
    find(&docs, "CredentialsRequest", "manila-csi-drivers");
}

#[test]
fn render_driver_follows_topology_and_image_env() {
    let output = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "render",
            "--driver",
            "pd.csi.storage.gke.io",
            "--topology",
            "SingleReplica",
        ])
        .env("DRIVER_IMAGE", "registry.example.com/gcp-pd-driver:v9")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let docs = documents(&stdout(&output));
    let controller = find(&docs, "Deployment", "gcp-pd-csi-driver-controller");
    assert_eq!(controller["spec"]["replicas"], 1);
    let images: Vec<&str> = controller["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["image"].as_str().unwrap())
        .collect();
    assert!(
        images.contains(&"registry.example.com/gcp-pd-driver:v9"),
        "{images:?}"
    );
}

#[test]
fn render_hosted_marks_each_object_with_its_cluster() {
    let output = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "render",
            "--driver",
            "aws-ebs",
            "--topology",
            "External",
            "--hosted",
            "--control-plane-namespace",
            "clusters-demo",
        ])
        .env("HYPERSHIFT_IMAGE", "registry.example.com/hypershift:v1")
        .env("RELEASE_VERSION", "4.22.3")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let mut sides = Vec::new();
    for doc in text.split("\n---\n") {
        let side = doc
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# cluster: "))
            .unwrap_or_else(|| panic!("a document without its cluster: {doc}"));
        let object: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
        sides.push((side.to_owned(), object));
    }
    let on = |kind: &str, name: &str| {
        sides
            .iter()
            .find(|(_, o)| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    let (side, controller) = on("Deployment", "aws-ebs-csi-driver-controller");
    assert_eq!(side, "management");
    assert_eq!(controller["metadata"]["namespace"], "clusters-demo");
    assert_eq!(
        controller["metadata"]["annotations"]["release.openshift.io/desired-version"],
        "4.22.3"
    );
    let minter = controller["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "token-minter")
        .unwrap();
    assert_eq!(minter["image"], "registry.example.com/hypershift:v1");
    let (side, node) = on("DaemonSet", "aws-ebs-csi-driver-node");
    assert_eq!(side, "guest");
    assert_eq!(
        node["metadata"]["namespace"],
        "openshift-cluster-csi-drivers"
    );
    assert_eq!(on("CSIDriver", "ebs.csi.aws.com").0, "guest");

    let not_hosted = storage_operator(&[
        "render",
        "--driver",
        "gcp-pd",
        "--topology",
        "External",
        "--hosted",
    ]);
    assert_eq!(not_hosted.status.code(), Some(1));
    assert!(
        stderr(&not_hosted).contains("does not run with a hosted control plane"),
        "{}",
        stderr(&not_hosted)
    );
    let standalone = storage_operator(&["render", "--driver", "aws-ebs", "--hosted"]);
    assert_eq!(standalone.status.code(), Some(1));
    assert!(
        stderr(&standalone).contains("--hosted needs --topology External"),
        "{}",
        stderr(&standalone)
    );
    let platform_standalone = storage_operator(&["render", "--platform", "AWS", "--hosted"]);
    assert_eq!(platform_standalone.status.code(), Some(1));

    // A platform: both operators' objects, by cluster.
    let aws = storage_operator(&[
        "render",
        "--platform",
        "AWS",
        "--topology",
        "External",
        "--hosted",
    ]);
    assert!(aws.status.success(), "{}", stderr(&aws));
    let text = stdout(&aws);
    let marked: Vec<(String, serde_json::Value)> = text
        .split("\n---\n")
        .map(|doc| {
            let side = doc
                .lines()
                .next()
                .unwrap()
                .strip_prefix("# cluster: ")
                .unwrap();
            (side.to_owned(), serde_saphyr::from_str(doc).unwrap())
        })
        .collect();
    let side_of = |kind: &str, name: &str| {
        marked
            .iter()
            .find(|(_, o)| o["kind"] == kind && o["metadata"]["name"] == name)
            .map(|(side, _)| side.as_str())
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    assert_eq!(
        side_of("Deployment", "aws-ebs-csi-driver-operator"),
        "management"
    );
    assert_eq!(
        side_of("Deployment", "aws-ebs-csi-driver-controller"),
        "management"
    );
    assert_eq!(side_of("ClusterCSIDriver", "ebs.csi.aws.com"), "guest");
    assert_eq!(side_of("DaemonSet", "aws-ebs-csi-driver-node"), "guest");
    let gcp = storage_operator(&[
        "render",
        "--platform",
        "GCP",
        "--topology",
        "External",
        "--hosted",
    ]);
    assert!(gcp.status.success());
    assert!(stdout(&gcp).is_empty());
    assert!(
        stderr(&gcp).contains("gcp-pd is not started with a hosted control plane")
            && stderr(&gcp).contains("no CSI driver is installed on platform GCP with a hosted"),
        "{}",
        stderr(&gcp)
    );
    let declared = storage_operator(&["render", "--csidriverdeployment", "x.yaml", "--hosted"]);
    assert_eq!(declared.status.code(), Some(2), "clap usage error");
    let namespace_alone = storage_operator(&[
        "render",
        "--driver",
        "aws-ebs",
        "--control-plane-namespace",
        "x",
    ]);
    assert_eq!(namespace_alone.status.code(), Some(2), "clap usage error");
}

#[test]
fn render_explains_what_it_cannot_render() {
    // Every driver of the registry is in the catalogue now, so no platform renders half.
    let none = storage_operator(&["render", "--platform", "None"]);
    assert!(none.status.success());
    assert!(stdout(&none).is_empty());
    assert!(stderr(&none).contains("no CSI driver is installed on platform None"));

    let unknown = storage_operator(&["render", "--platform", "Mars"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("unknown platform \"Mars\""),
        "{}",
        stderr(&unknown)
    );

    let neither = storage_operator(&["render"]);
    assert_eq!(neither.status.code(), Some(2), "clap usage error");
}

#[test]
fn run_says_what_it_needs_to_start() {
    let no_image = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .arg("run")
        .env_remove("OPERATOR_IMAGE")
        .output()
        .unwrap();
    assert_eq!(no_image.status.code(), Some(2));
    assert!(
        stderr(&no_image).contains("--operator-image"),
        "{}",
        stderr(&no_image)
    );

    let no_cluster = Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args([
            "run",
            "--operator-image",
            "example.com/so:1",
            "--admin-address",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(no_cluster.status.code(), Some(1));
    let said = stderr(&no_cluster);
    assert!(
        said.contains("no Kubernetes API to connect to: not in a pod (KUBERNETES_SERVICE_HOST is unset) and no kubeconfig at /nonexistent/kubeconfig: set KUBECONFIG"),
        "{said}"
    );
    assert_eq!(
        said.matches("/nonexistent/kubeconfig").count(),
        1,
        "said once: {said}"
    );
}

#[test]
fn committed_install_manifests_are_fresh() {
    let deploy = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy"));
    let output = storage_operator(&["manifests", "--check", deploy.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The command line's rows of the bad-input table (#17): each bad input is refused with the
/// exit code of its kind (2: usage or input refused, 1: it could not be done) and one message
/// that names the field, flag or file and what fixes it.
#[test]
fn bad_command_line_inputs_are_refused_with_a_precise_message() {
    let dir = std::env::temp_dir().join(format!("storage-operator-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let valid = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../api/tests/fixtures/valid/csidriverdeployment-hostpath-2018.yaml"
    ))
    .unwrap();
    let file = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let header = "apiVersion: csidriver.storage.openshift.io/v1alpha1\nkind: CSIDriverDeployment\nmetadata: {name: x}\n";
    let not_yaml = file("not-yaml.yaml", format!("{header}spec: [unclosed\n"));
    let wrong_type = file(
        "wrong-type.yaml",
        format!("{header}spec:\n  driverName: 7\n"),
    );
    let missing = file(
        "missing.yaml",
        format!("{header}spec: {{driverName: a.b.c}}\n"),
    );
    let bad_name = file(
        "bad-name.yaml",
        valid.replace("driverName: csi-hostpath", "driverName: Not A Name"),
    );
    let bad_volume = file(
        "bad-migration.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec:\n  capacity: {storage: 1Gi}\n  gcePersistentDisk: {pdName: 7, fsType: [ext4]}\n".to_owned(),
    );
    let missing_file = dir.join("absent.yaml").display().to_string();

    let cases: Vec<(Vec<&str>, i32, String)> = vec![
        (
            vec!["render", "--csidriverdeployment", &missing_file],
            1,
            format!("error: reading {missing_file}: No such file or directory"),
        ),
        (
            vec!["render", "--csidriverdeployment", &not_yaml],
            2,
            format!("error: {not_yaml} is not a CSIDriverDeployment: line 4 column 7: unclosed bracket"),
        ),
        (
            vec!["render", "--csidriverdeployment", &wrong_type],
            2,
            format!("error: {wrong_type} is not a CSIDriverDeployment: spec.driverName: invalid type: integer `7`, expected a string"),
        ),
        (
            vec!["render", "--csidriverdeployment", &missing],
            2,
            format!("error: {missing} is not a CSIDriverDeployment: spec: missing field `driverPerNodeTemplate`"),
        ),
        (
            vec!["render", "--csidriverdeployment", &bad_name],
            2,
            "spec.driverName".to_owned(),
        ),
        (
            vec!["migration", "translate", "--filename", &bad_volume],
            1,
            "spec.gcePersistentDisk.fsType: invalid type: sequence, expected a string".to_owned(),
        ),
        (
            vec!["render", "--driver", "nfs"],
            1,
            "error: unknown CSI driver \"nfs\": known drivers are gcp-pd".to_owned(),
        ),
        (
            vec!["render", "--platform", "AWS", "--topology", "Bogus"],
            2,
            "invalid value 'Bogus' for '--topology <TOPOLOGY>': unknown topology \"Bogus\": expected HighlyAvailable".to_owned(),
        ),
        (
            vec!["--log-format", "xml", "crds"],
            2,
            "invalid value 'xml' for '--log-format <LOG_FORMAT>'".to_owned(),
        ),
        (
            vec!["driver", "gcp-pd", "--admin-address", "localhost"],
            2,
            "invalid value 'localhost' for '--admin-address <ADMIN_ADDRESS>'".to_owned(),
        ),
    ];
    for (args, code, message) in &cases {
        let output = storage_operator(args);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(*code), "{args:?}: {said}");
        assert!(
            said.contains(message.as_str()),
            "{args:?}: want {message:?}, got: {said}"
        );
        assert_eq!(
            said.matches("error:").count(),
            1,
            "{args:?}: one error, once: {said}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
