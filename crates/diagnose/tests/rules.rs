//! The rules on recorded objects: the healthy scene of `scene` with one link broken per test.
//! Each test asserts the finding's kind, that the evidence carries the exact message, and that
//! the fix names the fix.

mod scene;

use diagnose::{
    ContainerLog, DriverFacts, FindingKind, InstalledBy, LinkState, Report, Snapshot,
    diagnose_driver, diagnose_pod, diagnose_pvc,
};
use scene::*;
use serde_json::json;

/// The finding is `kind`, each of `messages` is an evidence message verbatim, and the fix
/// contains each of `fix`.
#[track_caller]
fn assert_finding(report: &Report, kind: FindingKind, messages: &[&str], fix: &[&str]) {
    let Some(finding) = &report.finding else {
        panic!("no finding, expected {kind}:\n{report}");
    };
    assert_eq!(finding.kind, kind, "\n{report}");
    for message in messages {
        assert!(
            finding.evidence.iter().any(|e| e.message == *message),
            "no evidence says {message:?}:\n{report}"
        );
    }
    for part in fix {
        assert!(
            finding.fix.contains(part),
            "the fix does not name {part:?}: {}",
            finding.fix
        );
    }
    assert!(
        report
            .chain
            .iter()
            .any(|link| link.state == LinkState::Broken),
        "a finding comes from a broken link:\n{report}"
    );
}

fn link_state(report: &Report, name: &str) -> LinkState {
    report
        .chain
        .iter()
        .find(|link| link.name == name)
        .map(|link| link.state)
        .unwrap_or_else(|| panic!("no link {name}:\n{report}"))
}

#[test]
fn a_healthy_chain_has_no_finding_and_every_link_ok() {
    let snap = healthy();
    for report in [
        diagnose_pvc(&snap, NS, "data"),
        diagnose_pod(&snap, NS, "web-0"),
    ] {
        assert_eq!(report.finding, None, "\n{report}");
        let not_ok: Vec<_> = report
            .chain
            .iter()
            .filter(|link| link.state != LinkState::Ok)
            .collect();
        assert!(not_ok.is_empty(), "{not_ok:?}");
        let names: Vec<&str> = report.chain.iter().map(|l| l.name.as_str()).collect();
        for expected in [
            "PersistentVolumeClaim",
            "StorageClass",
            "CSIDriver",
            "Controller",
            "Node",
            "NodePlugin",
            "CSINode",
            "Provisioning",
            "PersistentVolume",
            "Scheduling",
            "VolumeAttachment",
            "Mount",
            "Operator",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
    }
}

#[test]
fn a_healthy_driver_has_no_finding() {
    let report = diagnose_driver(&healthy(), EBS);
    assert_eq!(report.finding, None, "\n{report}");
    assert!(
        report.chain.iter().all(|link| link.state == LinkState::Ok),
        "\n{report}"
    );
    let csi_nodes = report.chain.iter().filter(|l| l.name == "CSINode").count();
    assert_eq!(csi_nodes, 2, "one CSINode link per node with a node pod");
}

#[test]
fn the_catalogue_link_says_what_it_does_not_know() {
    let mut snap = healthy();
    let detail = |snap: &Snapshot| {
        diagnose_driver(snap, EBS)
            .chain
            .into_iter()
            .find(|link| link.name == "Catalogue")
            .map(|link| link.detail)
            .unwrap_or_default()
    };
    let known = detail(&snap);
    assert!(known.starts_with("access modes ["), "{known}");
    snap.drivers = vec![DriverFacts::named(EBS)];
    assert_eq!(
        detail(&snap),
        "access modes not known, volume modes not known, sizes not known"
    );
}

#[test]
fn no_such_claim() {
    let report = diagnose_pvc(&healthy(), NS, "dta");
    assert_finding(
        &report,
        FindingKind::NoSuchClaim,
        &["persistentvolumeclaims \"dta\" not found"],
        &["persistentvolumeclaims in app: data"],
    );
}

#[test]
fn a_pod_whose_claim_is_missing() {
    let mut snap = healthy();
    snap.pods = vec![pod("web-1", "logs", Some("node-a"))];
    let report = diagnose_pod(&snap, NS, "web-1");
    assert_finding(
        &report,
        FindingKind::NoSuchClaim,
        &["persistentvolumeclaims \"logs\" not found"],
        &[
            "create claim logs in app",
            "spec.volumes[data].persistentVolumeClaim.claimName",
        ],
    );
}

#[test]
fn no_such_pod() {
    let report = diagnose_pod(&healthy(), NS, "web-9");
    assert_finding(
        &report,
        FindingKind::NoSuchPod,
        &["pods \"web-9\" not found"],
        &["pods in app: web-0"],
    );
}

#[test]
fn no_such_driver() {
    let report = diagnose_driver(&healthy(), "efs.csi.aws.com");
    assert_finding(
        &report,
        FindingKind::NoSuchDriver,
        &["csidrivers.storage.k8s.io \"efs.csi.aws.com\" not found"],
        &[
            "installed drivers: ebs.csi.aws.com",
            "ClusterCSIDriver efs.csi.aws.com",
        ],
    );
}

#[test]
fn a_claim_deleted_while_a_pod_uses_it() {
    let mut snap = healthy();
    let claim = &mut snap.claims[0];
    claim.metadata.deletion_timestamp = Some(from(json!("2026-03-01T11:50:00Z")));
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::ClaimInUseWhileDeleting,
        &[
            "deleted 10m ago, held by finalizer kubernetes.io/pvc-protection",
            "uses claim data (pod Running)",
        ],
        &["delete pod web-0"],
    );
    // Without a pod that uses it, the deletion is not held.
    snap.pods.clear();
    let report = diagnose_pvc(&snap, NS, "data");
    assert_eq!(link_state(&report, "PersistentVolumeClaim"), LinkState::Ok);
}

#[test]
fn no_such_storage_class() {
    let mut snap = unbound();
    snap.claims = vec![claim("data", Some("gp2"), None)];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::NoSuchStorageClass,
        &["storageclasses.storage.k8s.io \"gp2\" not found", "gp2"],
        &[
            "create StorageClass gp2",
            "spec.storageClassName set to one of: gp3-csi",
        ],
    );
    // A bound claim no longer needs its class.
    let mut snap = healthy();
    snap.storage_classes.clear();
    assert_eq!(diagnose_pvc(&snap, NS, "data").finding, None);
}

#[test]
fn no_default_storage_class() {
    let mut snap = unbound();
    snap.claims = vec![claim("data", None, None)];
    snap.storage_classes = vec![class(
        "slow",
        EBS,
        "Immediate",
        false,
        "2026-01-01T00:00:00Z",
    )];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::NoDefaultStorageClass,
        &["(unset)", "no class has it set to \"true\"; classes: slow"],
        &[
            "mark one class default with the annotation storageclass.kubernetes.io/is-default-class=true",
            "one of: slow",
        ],
    );
}

#[test]
fn a_claim_without_a_class_gets_the_default() {
    let mut snap = unbound();
    snap.claims = vec![claim("data", None, None)];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_eq!(report.finding, None, "\n{report}");
    assert!(report.chain[1].detail.contains("assigns the default"));
}

#[test]
fn no_csi_driver_serves_the_provisioner_and_two_defaults_are_named() {
    let mut snap = unbound();
    snap.claims = vec![claim("data", None, None)];
    snap.storage_classes.push(class(
        "fast",
        "csi.example.com",
        "Immediate",
        true,
        "2026-02-01T00:00:00Z",
    ));
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::NoSuchCSIDriver,
        &[
            "csi.example.com",
            "csidrivers.storage.k8s.io \"csi.example.com\" not found",
            "drivers registered: ebs.csi.aws.com",
            "fast, gp3-csi are all marked default; Kubernetes gives a claim without a class the newest, fast",
        ],
        &[
            "install the driver csi.example.com",
            "provisioner is one of: ebs.csi.aws.com",
        ],
    );
}

#[test]
fn the_controller_cannot_pull_its_image() {
    let mut snap = unbound();
    let controller = &mut snap.driver_pods[0].controller[0];
    *controller = from(json!({
        "metadata": {"name": "aws-ebs-csi-driver-controller-7d9f-abcde", "namespace": DRIVER_NS},
        "spec": {"nodeName": "master-0", "containers": [{"name": "csi-driver", "image": "quay.io/bad/ebs:v0"}]},
        "status": {"phase": "Pending", "containerStatuses": [{
            "name": "csi-driver", "image": "quay.io/bad/ebs:v0", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"quay.io/bad/ebs:v0\""}}
        }]}
    }));
    snap.pods = vec![pod("web-0", "data", Some("node-a"))];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::DriverControllerNotRunning,
        &["Back-off pulling image \"quay.io/bad/ebs:v0\""],
        &["image quay.io/bad/ebs:v0 of container csi-driver cannot be pulled"],
    );
}

#[test]
fn the_controller_crash_loops_with_its_last_lines_and_the_waiting_claim() {
    let mut snap = unbound();
    snap.driver_pods[0].controller[0] = from(json!({
        "metadata": {"name": "aws-ebs-csi-driver-controller-7d9f-abcde", "namespace": DRIVER_NS},
        "spec": {"containers": [{"name": "csi-driver", "image": "registry/ebs:1"}], "nodeName": "master-0"},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "csi-driver", "image": "registry/ebs:1", "imageID": "", "ready": false, "restartCount": 12,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container=csi-driver pod=aws-ebs-csi-driver-controller-7d9f-abcde_openshift-cluster-csi-drivers(1)"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}
        }]}
    }));
    snap.logs = vec![ContainerLog {
        namespace: DRIVER_NS.to_owned(),
        pod: "aws-ebs-csi-driver-controller-7d9f-abcde".to_owned(),
        container: "csi-driver".to_owned(),
        previous: true,
        lines: vec![
            "I0301 11:59:01 driver.go:80] Driver: ebs.csi.aws.com".to_owned(),
            "F0301 11:59:02 driver.go:120] could not get region: no EC2 IMDS role found".to_owned(),
        ],
    }];
    let waiting = "waiting for a volume to be created, either by external provisioner \"ebs.csi.aws.com\" or manually created by system administrator";
    snap.events = vec![event(
        "PersistentVolumeClaim",
        "data",
        "Normal",
        "ExternalProvisioning",
        waiting,
        "persistentvolume-controller",
    )];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::DriverControllerNotRunning,
        &[
            "back-off 5m0s restarting failed container=csi-driver pod=aws-ebs-csi-driver-controller-7d9f-abcde_openshift-cluster-csi-drivers(1)",
            "I0301 11:59:01 driver.go:80] Driver: ebs.csi.aws.com\nF0301 11:59:02 driver.go:120] could not get region: no EC2 IMDS role found",
            waiting,
        ],
        &[
            "kubectl logs -n openshift-cluster-csi-drivers aws-ebs-csi-driver-controller-7d9f-abcde -c csi-driver --previous",
        ],
    );
    let finding = report.finding.unwrap();
    assert!(
        finding
            .cause
            .contains("CrashLoopBackOff (restarted 12 times)"),
        "{}",
        finding.cause
    );
}

#[test]
fn the_node_plugin_on_the_pods_node_crash_loops() {
    let mut snap = healthy();
    snap.pods = vec![creating("web-0", "data", "node-a")];
    snap.driver_pods[0].node[0] = from(json!({
        "metadata": {"name": "aws-ebs-csi-driver-node-aaaaa", "namespace": DRIVER_NS},
        "spec": {"nodeName": "node-a", "containers": [{"name": "csi-driver", "image": "registry/ebs:1"}]},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "csi-driver", "image": "registry/ebs:1", "imageID": "", "ready": false, "restartCount": 4,
            "state": {"terminated": {"exitCode": 2, "reason": "Error", "message": "panic: nil map"}}
        }]}
    }));
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::DriverNodeNotRunning,
        &["panic: nil map"],
        &["aws-ebs-csi-driver-node-aaaaa -c csi-driver --previous"],
    );
}

#[test]
fn the_driver_is_not_registered_on_the_pods_node() {
    let mut snap = healthy();
    snap.pods = vec![creating("web-0", "data", "node-a")];
    snap.csi_nodes[0] = from(csi_node("node-a", &["efs.csi.aws.com"]));
    snap.driver_pods[0].node.remove(0);
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::DriverNotRegistered,
        &[
            "drivers registered: efs.csi.aws.com",
            "no node pod of ebs.csi.aws.com runs on node node-a",
        ],
        &[
            "the node DaemonSet of ebs.csi.aws.com has no pod on node node-a",
            "tolerations",
        ],
    );
}

#[test]
fn the_pods_node_is_not_ready() {
    let mut snap = healthy();
    snap.pods = vec![creating("web-0", "data", "node-a")];
    snap.nodes[0] = node("node-a", "us-east-1a", false);
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::NodeNotReady,
        &["Kubelet stopped posting node status."],
        &[
            "kubectl describe node node-a",
            "node.kubernetes.io/out-of-service",
        ],
    );
}

#[test]
fn wait_for_first_consumer_without_a_pod() {
    let mut snap = unbound();
    snap.pods.clear();
    snap.events = vec![event(
        "PersistentVolumeClaim",
        "data",
        "Normal",
        "WaitForFirstConsumer",
        "waiting for first consumer to be created before binding",
        "persistentvolume-controller",
    )];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::WaitForFirstConsumerNoPod,
        &[
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding",
        ],
        &[
            "create a pod that uses the claim",
            "the volume is provisioned when it is scheduled",
        ],
    );
}

#[test]
fn wait_for_first_consumer_with_an_unschedulable_pod() {
    let mut snap = unbound();
    let message = "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/master: }, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
    snap.pods = vec![unschedulable("web-0", "data", message)];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::PodUnschedulable,
        &[message],
        &[
            "fix what the scheduler's message names",
            "spec.nodeSelector",
        ],
    );
}

/// The healthy scene's claim unbound, annotated by the scheduler with the node it picked for
/// `web-0`, which waits (not on a node yet) for the volume.
fn selected(node: &str) -> Snapshot {
    let mut snap = unbound();
    snap.claims[0].metadata.annotations = Some(
        [(
            "volume.kubernetes.io/selected-node".to_owned(),
            node.to_owned(),
        )]
        .into(),
    );
    // As the real server shows it: Pending, nominated, no condition yet.
    snap.pods = vec![from(json!({
        "metadata": {"name": "web-0", "namespace": NS, "uid": "uid-web-0"},
        "spec": {
            "containers": [{"name": "web", "image": "registry/web:1"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        },
        "status": {"phase": "Pending", "nominatedNodeName": node, "qosClass": "BestEffort"}
    }))];
    snap
}

#[test]
fn wait_for_first_consumer_on_a_node_without_the_driver() {
    // As on the real node: the provisioner cannot read the node's topology and says so, but
    // the cause is the node plugin missing there.
    let mut snap = selected("node-a");
    snap.csi_nodes[0] = from(csi_node("node-a", &["efs.csi.aws.com"]));
    snap.driver_pods[0].node.remove(0);
    let message =
        "error generating accessibility requirements: no topology key found for node node-a";
    snap.events = vec![event(
        "PersistentVolumeClaim",
        "data",
        "Warning",
        "ProvisioningFailed",
        message,
        "ebs.csi.aws.com_aws-ebs-csi-driver-controller-7d9f-abcde_1b2c",
    )];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::DriverNotRegistered,
        &["drivers registered: efs.csi.aws.com", "node-a"],
        &["the node DaemonSet of ebs.csi.aws.com has no pod on node node-a"],
    );
    let finding = report.finding.unwrap();
    assert_eq!(
        finding.cause,
        "the driver ebs.csi.aws.com is not registered on node node-a"
    );
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.source == "annotation volume.kubernetes.io/selected-node"),
        "{:?}",
        finding.evidence
    );
    // The pod's own diagnosis follows its claim.
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_eq!(
        report.finding.map(|f| f.kind),
        Some(FindingKind::DriverNotRegistered)
    );
}

#[test]
fn wait_for_first_consumer_on_a_node_that_is_gone() {
    let report = diagnose_pvc(&selected("node-gone"), NS, "data");
    assert_finding(
        &report,
        FindingKind::NodeNotReady,
        &["nodes \"node-gone\" not found", "node-gone"],
        &["kubectl get nodes", "selected-node"],
    );
    assert_eq!(
        report.finding.unwrap().cause,
        "node node-gone does not exist"
    );
}

#[test]
fn wait_for_first_consumer_on_a_ready_node_with_the_driver_is_not_a_finding() {
    let report = diagnose_pvc(&selected("node-a"), NS, "data");
    assert_eq!(report.finding, None, "\n{report}");
    assert_eq!(link_state(&report, "CSINode"), LinkState::Ok);
}

#[test]
fn a_pod_bound_to_a_node_that_does_not_exist() {
    let mut snap = healthy();
    snap.pods = vec![creating("web-0", "data", "node-gone")];
    snap.volume_attachments.clear();
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::NodeNotReady,
        &["nodes \"node-gone\" not found"],
        &["delete the pod so that its owner recreates it"],
    );
}

#[test]
fn a_pod_of_a_volume_without_driver_on_a_node_that_does_not_exist() {
    // A volume made beforehand of no CSI driver (here a local one): no driver links, but the
    // pod's node is still checked.
    let mut snap = healthy();
    snap.claims = vec![claim("data", Some(""), Some("local-1"))];
    snap.volumes = vec![from(json!({
        "metadata": {"name": "local-1"},
        "spec": {
            "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "claimRef": {"namespace": NS, "name": "data", "uid": "uid-data"},
            "local": {"path": "/mnt/disks/1"}
        },
        "status": {"phase": "Bound"}
    }))];
    snap.volume_attachments.clear();
    snap.pods = vec![creating("web-0", "data", "node-gone")];
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::NodeNotReady,
        &["nodes \"node-gone\" not found"],
        &["kubectl get nodes"],
    );
    snap.pods = vec![pod("web-0", "data", Some("node-a"))];
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_eq!(report.finding, None, "\n{report}");
    assert_eq!(link_state(&report, "Node"), LinkState::Ok);
}

#[test]
fn a_pod_with_a_bound_claim_that_cannot_be_scheduled() {
    let mut snap = healthy();
    let message = "0/2 nodes are available: 2 Insufficient memory.";
    snap.pods = vec![unschedulable("web-0", "data", message)];
    snap.events = vec![event(
        "Pod",
        "web-0",
        "Warning",
        "FailedScheduling",
        message,
        "default-scheduler",
    )];
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::PodUnschedulable,
        &[message],
        &["free resources"],
    );
    assert_eq!(link_state(&report, "Scheduling"), LinkState::Broken);
}

#[test]
fn the_provisioner_reports_an_error() {
    let mut snap = unbound();
    let message = "failed to provision volume with StorageClass \"gp3-csi\": rpc error: code = Internal desc = Could not create volume \"pvc-1\": could not create volume in EC2: UnauthorizedOperation: You are not authorized to perform this operation.";
    snap.events = vec![event(
        "PersistentVolumeClaim",
        "data",
        "Warning",
        "ProvisioningFailed",
        message,
        "ebs.csi.aws.com_aws-ebs-csi-driver-controller-7d9f-abcde_1b2c",
    )];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::ProvisioningFailed,
        &[message],
        &[
            "the driver refused to create the volume",
            "StorageClass gp3-csi's parameters",
        ],
    );
    let finding = report.finding.unwrap();
    assert_eq!(
        finding.evidence[0].source,
        "Event Warning ProvisioningFailed from ebs.csi.aws.com_aws-ebs-csi-driver-controller-7d9f-abcde_1b2c, 3 times, last 2m ago"
    );
}

#[test]
fn the_provisioner_says_nothing_for_too_long() {
    let mut snap = unbound();
    let waiting = "waiting for a volume to be created, either by external provisioner \"ebs.csi.aws.com\" or manually created by system administrator";
    snap.events = vec![event(
        "PersistentVolumeClaim",
        "data",
        "Normal",
        "ExternalProvisioning",
        waiting,
        "persistentvolume-controller",
    )];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::ProvisioningStuck,
        &[waiting],
        &[
            "kubectl logs -n openshift-cluster-csi-drivers aws-ebs-csi-driver-controller-7d9f-abcde -c csi-provisioner",
        ],
    );
    // A young claim is only slow.
    snap.claims[0].metadata.creation_timestamp = Some(from(json!("2026-03-01T11:59:00Z")));
    assert_eq!(diagnose_pvc(&snap, NS, "data").finding, None);
}

#[test]
fn the_size_is_outside_the_drivers_range() {
    let mut snap = unbound();
    snap.claims[0].spec.as_mut().unwrap().resources =
        Some(from(json!({"requests": {"storage": "500Mi"}})));
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::SizeOutOfRange,
        &["500Mi", "ebs.csi.aws.com creates volumes from 1Gi to 16Ti"],
        &["spec.resources.requests.storage from 1Gi to 16Ti"],
    );
    snap.claims[0].spec.as_mut().unwrap().resources =
        Some(from(json!({"requests": {"storage": "17Ti"}})));
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::SizeOutOfRange,
        &["17Ti"],
        &["from 1Gi to 16Ti"],
    );
    assert!(report.finding.unwrap().cause.contains("above"));
}

#[test]
fn read_write_many_on_a_block_driver() {
    let mut snap = unbound();
    snap.claims[0].spec.as_mut().unwrap().access_modes = Some(vec!["ReadWriteMany".to_owned()]);
    snap.storage_classes.push(class(
        "efs-sc",
        "efs.csi.aws.com",
        "Immediate",
        false,
        "2026-01-01T00:00:00Z",
    ));
    let mut efs = diagnose::DriverFacts::named("efs.csi.aws.com");
    efs.access_modes = vec!["ReadWriteOnce".to_owned(), "ReadWriteMany".to_owned()];
    snap.drivers.push(efs);
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::AccessModeUnsupported,
        &[
            "ReadWriteMany",
            "ebs.csi.aws.com offers: ReadWriteOnce, ReadWriteOncePod",
        ],
        &[
            "spec.accessModes from: ReadWriteOnce, ReadWriteOncePod",
            "a class whose driver offers it: efs-sc",
        ],
    );
}

#[test]
fn block_mode_on_a_filesystem_only_driver() {
    let mut snap = unbound();
    snap.drivers[0].volume_modes = vec!["Filesystem".to_owned()];
    snap.claims[0].spec.as_mut().unwrap().volume_mode = Some("Block".to_owned());
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::VolumeModeUnsupported,
        &["Block", "ebs.csi.aws.com offers: Filesystem"],
        &["spec.volumeMode from: Filesystem"],
    );
}

/// Where a driver's access modes depend on the volume mode (AWS EBS: ReadWriteMany, io2
/// Multi-Attach, of a raw block device only), a claim is judged by its own volume mode: the
/// finding says which, and that the other volume mode offers what it asks; the same claim as a
/// raw block device is one the driver takes.
#[test]
fn read_write_many_only_with_block() {
    let mut snap = unbound();
    let modes = |modes: &[&str]| modes.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>();
    let ebs = &mut snap.drivers[0];
    ebs.access_modes = modes(&["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"]);
    ebs.access_modes_by_volume_mode = [
        ("Filesystem", modes(&["ReadWriteOnce", "ReadWriteOncePod"])),
        (
            "Block",
            modes(&["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"]),
        ),
    ]
    .into_iter()
    .map(|(mode, access)| (mode.to_owned(), access))
    .collect();
    snap.claims[0].spec.as_mut().unwrap().access_modes = Some(modes(&["ReadWriteMany"]));
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::AccessModeUnsupported,
        &[
            "ReadWriteMany",
            "ebs.csi.aws.com offers with volumeMode Filesystem: ReadWriteOnce, ReadWriteOncePod",
        ],
        &[
            "spec.accessModes from: ReadWriteOnce, ReadWriteOncePod; or with spec.volumeMode \
             Block, with which ebs.csi.aws.com offers ReadWriteMany",
        ],
    );
    assert_eq!(
        report.finding.unwrap().cause,
        "the claim asks for ReadWriteMany, which ebs.csi.aws.com does not offer with volumeMode \
         Filesystem"
    );
    let catalogue = diagnose_driver(&snap, EBS)
        .chain
        .into_iter()
        .find(|link| link.name == "Catalogue")
        .unwrap();
    assert_eq!(
        catalogue.detail,
        "access modes [ReadWriteOnce, ReadWriteOncePod] with Filesystem and [ReadWriteOnce, \
         ReadWriteMany, ReadWriteOncePod] with Block, volume modes [Filesystem, Block], sizes \
         1Gi to 16Ti"
    );

    snap.claims[0].spec.as_mut().unwrap().volume_mode = Some("Block".to_owned());
    let report = diagnose_pvc(&snap, NS, "data");
    let kind = report.finding.as_ref().map(|finding| finding.kind);
    assert!(
        !matches!(
            kind,
            Some(
                FindingKind::AccessModeUnsupported
                    | FindingKind::VolumeModeUnsupported
                    | FindingKind::SizeOutOfRange
            )
        ),
        "\n{report}"
    );
}

#[test]
fn the_bound_volume_is_gone() {
    let mut snap = healthy();
    snap.volumes.clear();
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::VolumeMissing,
        &["persistentvolumes \"pvc-1\" not found", "pvc-1"],
        &[
            "recreate PersistentVolume pvc-1",
            "spec.claimRef to app/data",
        ],
    );
}

#[test]
fn the_volume_belongs_to_another_claim() {
    let mut snap = healthy();
    snap.volumes = vec![from(volume("pvc-1", "other", "us-east-1a"))];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::VolumeMissing,
        &["app/other (uid uid-other)"],
        &["spec.claimRef"],
    );
}

#[test]
fn the_volumes_node_affinity_excludes_the_pods_node() {
    let mut snap = healthy();
    snap.pods = vec![creating("web-0", "data", "node-b")];
    snap.volume_attachments.clear();
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::VolumeNodeAffinityConflict,
        &[
            "topology.ebs.csi.aws.com/zone In [us-east-1a]",
            "topology.ebs.csi.aws.com/zone=us-east-1b",
        ],
        &[
            "nodes where topology.ebs.csi.aws.com/zone In [us-east-1a]",
            "WaitForFirstConsumer",
        ],
    );
}

#[test]
fn the_volumes_node_affinity_keeps_the_pod_unscheduled() {
    let mut snap = healthy();
    let message = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had volume node affinity conflict. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.";
    snap.pods = vec![unschedulable("web-0", "data", message)];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::VolumeNodeAffinityConflict,
        &[message, "nodes that match: node-a"],
        &["us-east-1a"],
    );
}

#[test]
fn the_volumes_node_affinity_keeps_the_pod_unscheduled_in_the_words_of_1_36() {
    // What the scheduler of the real node (v1.36) says; a node matches the volume but is
    // full, so only the scheduler's words tell the conflict on the other one.
    let mut snap = healthy();
    let message = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match PersistentVolume's node affinity. no new claims to deallocate, preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.";
    snap.pods = vec![unschedulable("web-0", "data", message)];
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::VolumeNodeAffinityConflict,
        &[message, "nodes that match: node-a"],
        &["us-east-1a"],
    );
}

#[test]
fn the_attachment_fails() {
    let mut snap = healthy();
    snap.pods = vec![creating("web-0", "data", "node-a")];
    let message = "rpc error: code = Internal desc = Could not attach volume \"vol-0123\" to node \"i-node-a\": attachment of disk \"vol-0123\" failed, expected device to be attached but was attaching";
    snap.volume_attachments = vec![from(attachment(
        "csi-0a1b",
        "pvc-1",
        "node-a",
        false,
        Some(message),
    ))];
    let event_message = format!("AttachVolume.Attach failed for volume \"pvc-1\" : {message}");
    snap.events = vec![event(
        "Pod",
        "web-0",
        "Warning",
        "FailedAttachVolume",
        &event_message,
        "attachdetach-controller",
    )];
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::AttachFailed,
        &[message, &event_message],
        &["could not attach it", "retries"],
    );
    assert_eq!(
        report.finding.unwrap().evidence[0].source,
        "status.attachError.message"
    );
}

#[test]
fn the_volume_is_attached_to_another_node() {
    let mut snap = healthy();
    snap.nodes.push(node("node-c", "us-east-1a", true));
    snap.csi_nodes.push(from(csi_node("node-c", &[EBS])));
    snap.driver_pods[0].node.push(driver_pod(
        "aws-ebs-csi-driver-node-ccccc",
        "node-c",
        &["csi-driver", "csi-node-driver-registrar"],
    ));
    snap.pods = vec![
        pod("web-0", "data", Some("node-a")),
        creating("web-1", "data", "node-c"),
    ];
    let message = "Multi-Attach error for volume \"pvc-1\" Volume is already used by pod(s) web-0";
    snap.events = vec![event(
        "Pod",
        "web-1",
        "Warning",
        "FailedAttachVolume",
        message,
        "attachdetach-controller",
    )];
    let report = diagnose_pod(&snap, NS, "web-1");
    assert_finding(
        &report,
        FindingKind::MultiAttach,
        &[
            message,
            "node node-a, attached true",
            "uses the claim on node node-a",
        ],
        &[
            "delete that pod or scale its owner down",
            "node.kubernetes.io/out-of-service",
        ],
    );
    assert!(
        report
            .finding
            .unwrap()
            .cause
            .contains("used there by pod web-0")
    );
}

#[test]
fn the_kubelet_cannot_mount() {
    let mut snap = healthy();
    snap.pods = vec![creating("web-0", "data", "node-a")];
    let specific = "MountVolume.MountDevice failed for volume \"pvc-1\" : rpc error: code = Internal desc = could not format \"/dev/nvme1n1\" and mount it at \"/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/globalmount\": exit status 32";
    let generic = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: timed out waiting for the condition";
    snap.events = vec![
        event(
            "Pod",
            "web-0",
            "Warning",
            "FailedMount",
            specific,
            "kubelet",
        ),
        event("Pod", "web-0", "Warning", "FailedMount", generic, "kubelet"),
        event(
            "Pod",
            "web-0",
            "Warning",
            "FailedMount",
            "MountVolume.SetUp failed for volume \"secret-x\" : secret \"x\" not found",
            "kubelet",
        ),
    ];
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::MountFailed,
        &[specific, generic],
        &["kubectl logs -n openshift-cluster-csi-drivers aws-ebs-csi-driver-node-aaaaa"],
    );
    let finding = report.finding.unwrap();
    assert_eq!(
        finding.evidence.len(),
        2,
        "the secret's failure is not this volume's"
    );
    assert_eq!(
        finding.evidence[0].message, specific,
        "the specific message first"
    );
}

#[test]
fn the_operator_is_degraded() {
    let mut snap = healthy();
    let message = "Get \"https://ec2.us-east-1.amazonaws.com\": dial tcp: lookup ec2.us-east-1.amazonaws.com: no such host";
    snap.cluster_csi_drivers = vec![from(cluster_csi_driver(json!([
        {"type": "AWSEBSDriverControllerServiceControllerDegraded", "status": "True", "reason": "SyncError", "message": message}
    ])))];
    let report = diagnose_pvc(&snap, NS, "data");
    assert_finding(
        &report,
        FindingKind::OperatorDegraded,
        &[message],
        &["oc get clustercsidriver ebs.csi.aws.com -o yaml"],
    );
    assert_eq!(
        report.finding.unwrap().evidence[0].source,
        "condition AWSEBSDriverControllerServiceControllerDegraded=True, reason SyncError"
    );
}

#[test]
fn a_csi_driver_deployment_is_degraded() {
    let mut snap = healthy();
    snap.drivers[0].installed_by = Some(InstalledBy::CSIDriverDeployment {
        namespace: "storage".to_owned(),
        name: "ebs".to_owned(),
    });
    snap.csi_driver_deployments = vec![from(json!({
        "apiVersion": "csidriver.storage.openshift.io/v1alpha1",
        "kind": "CSIDriverDeployment",
        "metadata": {"name": "ebs", "namespace": "storage"},
        "spec": {"driverName": EBS, "driverPerNodeTemplate": {}, "driverSocket": "/csi/csi.sock"},
        "status": {"conditions": [
            {"type": "Available", "status": "False", "reason": "NoController", "message": "the controller Deployment has 0 of 2 replicas ready"}
        ]}
    }))];
    let report = diagnose_driver(&snap, EBS);
    assert_finding(
        &report,
        FindingKind::OperatorDegraded,
        &["the controller Deployment has 0 of 2 replicas ready"],
        &["kubectl get csidriverdeployment -n storage ebs -o yaml"],
    );
}

#[test]
fn the_first_broken_link_across_a_pods_claims_is_the_finding() {
    let mut snap = healthy();
    let mut pod = creating("web-0", "data", "node-a");
    pod.spec.as_mut().unwrap().volumes.as_mut().unwrap().insert(
        0,
        from(json!({"name": "cache", "persistentVolumeClaim": {"claimName": "cache"}})),
    );
    snap.pods = vec![pod];
    snap.claims.push(claim("cache", Some("gp2"), None));
    let report = diagnose_pod(&snap, NS, "web-0");
    assert_finding(
        &report,
        FindingKind::NoSuchStorageClass,
        &["gp2"],
        &["create StorageClass gp2"],
    );
    // Both claims' chains are there.
    let claims: Vec<_> = report
        .chain
        .iter()
        .filter(|link| link.name == "PersistentVolumeClaim")
        .filter_map(|link| link.object.clone())
        .collect();
    assert_eq!(
        claims,
        [
            "PersistentVolumeClaim app/cache",
            "PersistentVolumeClaim app/data"
        ]
    );
}

#[test]
fn partial_objects_never_panic() {
    let mut snap = diagnose::Snapshot::new(from(json!(NOW)));
    snap.claims = vec![from(json!({"metadata": {"name": "data", "namespace": NS}}))];
    snap.pods = vec![from(
        json!({"metadata": {"name": "web-0", "namespace": NS}, "spec": {"containers": [], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    )];
    snap.events = vec![from(json!({"metadata": {}, "involvedObject": {}}))];
    snap.volumes = vec![from(json!({"metadata": {}}))];
    snap.storage_classes = vec![from(json!({"metadata": {}, "provisioner": ""}))];
    snap.driver_pods = vec![diagnose::DriverPods::default()];
    for report in [
        diagnose_pvc(&snap, NS, "data"),
        diagnose_pod(&snap, NS, "web-0"),
        diagnose_driver(&snap, ""),
        diagnose_driver(&snap, EBS),
    ] {
        let _ = report.to_string();
        assert!(!report.chain.is_empty());
    }
    // The claim with no class and no default class says so.
    let report = diagnose_pvc(&snap, NS, "data");
    assert_eq!(
        report.finding.map(|f| f.kind),
        Some(FindingKind::NoDefaultStorageClass)
    );
}

fn provisioning_failed() -> Report {
    let mut snap = unbound();
    snap.events = vec![event(
        "PersistentVolumeClaim",
        "data",
        "Warning",
        "ProvisioningFailed",
        "rpc error: code = ResourceExhausted desc = VolumeLimitExceeded",
        "ebs.csi.aws.com_aws-ebs-csi-driver-controller-7d9f-abcde_1b2c",
    )];
    diagnose_pvc(&snap, NS, "data")
}

#[test]
fn text_puts_the_finding_first_then_the_chain() {
    let text = provisioning_failed().to_string();
    let expected_start = "PersistentVolumeClaim app/data: provisioning the claim's volume failed \
        (ebs.csi.aws.com_aws-ebs-csi-driver-controller-7d9f-abcde_1b2c) (ProvisioningFailed)\n\
        \n\
        Evidence:\n  \
        PersistentVolumeClaim app/data (Event Warning ProvisioningFailed from \
        ebs.csi.aws.com_aws-ebs-csi-driver-controller-7d9f-abcde_1b2c, 3 times, last 2m ago):\n    \
        rpc error: code = ResourceExhausted desc = VolumeLimitExceeded\n\
        \n\
        Fix:\n  the driver refused to create the volume";
    assert!(text.starts_with(expected_start), "{text}");
    let chain = text
        .split_once("\nChain:\n")
        .map(|(_, chain)| chain)
        .unwrap();
    let lines: Vec<&str> = chain.lines().collect();
    assert_eq!(
        lines[0],
        "  [ok]          PersistentVolumeClaim app/data: Pending, 10Gi, [ReadWriteOnce], used by pod web-0"
    );
    assert!(lines.contains(&"  [BROKEN]      Provisioning (PersistentVolumeClaim app/data): ProvisioningFailed from ebs.csi.aws.com_aws-ebs-csi-driver-controller-7d9f-abcde_1b2c"), "{chain}");
    assert!(
        lines.contains(&"  [not checked] PersistentVolume: the claim is not bound yet"),
        "{chain}"
    );
}

#[test]
fn json_and_yaml_carry_the_same_data() {
    let report = provisioning_failed();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["subject"],
        json!({"kind": "PersistentVolumeClaim", "namespace": "app", "name": "data"})
    );
    assert_eq!(json["finding"]["kind"], "ProvisioningFailed");
    assert_eq!(
        json["finding"]["evidence"][0]["message"],
        "rpc error: code = ResourceExhausted desc = VolumeLimitExceeded"
    );
    let states: Vec<&str> = json["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|link| link["state"].as_str().unwrap())
        .collect();
    assert!(states.contains(&"Broken") && states.contains(&"NotChecked") && states.contains(&"Ok"));
    let names: Vec<&str> = json["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"PersistentVolumeClaim"));
    assert_eq!(names.last(), Some(&"Operator"));
    let yaml = serde_saphyr::to_string(&report).unwrap();
    let back: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(back, json);
}

/// The catalogue's facts as the rules read them from a driver's table: sizes in bytes, modes in
/// the API's order, access modes by volume mode only where they differ between volume modes;
/// what the table leaves out stays unknown.
#[test]
fn catalogue_facts_from_a_driver_table() {
    let table = |volumes: serde_json::Value| {
        let mut def = csi_kit::def::test_def();
        def.volumes = Some(serde_json::from_value(volumes).unwrap());
        def.validate().unwrap();
        DriverFacts::of_catalogue(&def)
    };
    let facts = table(json!({"maxSize": "64Ti", "accessModes": {
        "Block": ["ReadWriteMany", "ReadWriteOnce"],
        "Filesystem": ["ReadWriteOncePod", "ReadWriteOnce"],
    }}));
    assert_eq!(facts.csi_name, "demo.csi.k8s.io");
    assert_eq!((facts.min_bytes, facts.max_bytes), (None, Some(64 << 40)));
    assert_eq!(facts.volume_modes, ["Filesystem", "Block"]);
    assert_eq!(
        facts.access_modes,
        ["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"]
    );
    assert_eq!(
        facts.access_modes_with("Filesystem"),
        ["ReadWriteOnce", "ReadWriteOncePod"]
    );
    assert_eq!(
        facts.access_modes_with("Block"),
        ["ReadWriteOnce", "ReadWriteMany"]
    );

    let same = table(json!({"minSize": "1Gi", "accessModes": {
        "Filesystem": ["ReadWriteOnce", "ReadWriteMany"],
        "Block": ["ReadWriteMany", "ReadWriteOnce"],
    }}));
    assert_eq!(same.min_bytes, Some(1 << 30));
    assert!(same.access_modes_by_volume_mode.is_empty(), "{same:?}");
    assert_eq!(same.access_modes, ["ReadWriteOnce", "ReadWriteMany"]);

    let unknown = table(json!({}));
    assert_eq!(unknown, DriverFacts::named("demo.csi.k8s.io"));
    assert_eq!(
        DriverFacts::of_catalogue(&csi_kit::def::test_def()),
        DriverFacts::named("demo.csi.k8s.io")
    );
}
