//! A healthy cluster as recorded objects, and builders to break one link of it at a time: an
//! AWS EBS volume (class `gp3-csi`, WaitForFirstConsumer) bound, attached and mounted in pod
//! `app/web-0` on `node-a` (zone us-east-1a); `node-b` is in us-east-1b.

#![allow(dead_code)]

use diagnose::{DriverFacts, DriverPods, InstalledBy, Snapshot};
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub const NOW: &str = "2026-03-01T12:00:00Z";
pub const EBS: &str = "ebs.csi.aws.com";
pub const NS: &str = "app";
pub const DRIVER_NS: &str = "openshift-cluster-csi-drivers";
pub const ZONE: &str = "topology.ebs.csi.aws.com/zone";

pub fn from<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

pub fn class(
    name: &str,
    provisioner: &str,
    mode: &str,
    default: bool,
    created: &str,
) -> StorageClass {
    let annotations = if default {
        json!({"storageclass.kubernetes.io/is-default-class": "true"})
    } else {
        json!({})
    };
    from(json!({
        "metadata": {"name": name, "annotations": annotations, "creationTimestamp": created},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        "reclaimPolicy": "Delete"
    }))
}

pub fn claim(name: &str, class: Option<&str>, volume: Option<&str>) -> PersistentVolumeClaim {
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}}
    });
    if let Some(class) = class {
        spec["storageClassName"] = json!(class);
    }
    if let Some(volume) = volume {
        spec["volumeName"] = json!(volume);
    }
    from(json!({
        "metadata": {
            "name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-03-01T11:00:00Z",
            "finalizers": ["kubernetes.io/pvc-protection"]
        },
        "spec": spec,
        "status": {"phase": if volume.is_some() { "Bound" } else { "Pending" }}
    }))
}

pub fn running_status(containers: &[&str]) -> Value {
    json!({
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"}
        ],
        "containerStatuses": containers.iter().map(|c| json!({
            "name": c, "image": format!("registry/{c}:1"), "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {"startedAt": "2026-03-01T10:00:00Z"}}
        })).collect::<Vec<_>>()
    })
}

pub fn pod(name: &str, claim: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({
        "containers": [{"name": "web", "image": "registry/web:1"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    from(json!({
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")},
        "spec": spec,
        "status": running_status(&["web"])
    }))
}

/// A pod the scheduler could not place, with its condition's message.
pub fn unschedulable(name: &str, claim: &str, message: &str) -> Pod {
    from(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [{"name": "web", "image": "registry/web:1"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        },
        "status": {
            "phase": "Pending",
            "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": message
            }]
        }
    }))
}

/// A pod scheduled to `node` whose containers have not started.
pub fn creating(name: &str, claim: &str, node: &str) -> Pod {
    from(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "web", "image": "registry/web:1"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{
                "name": "web", "image": "registry/web:1", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}
            }]
        }
    }))
}

pub fn node(name: &str, zone: &str, ready: bool) -> Node {
    from(json!({
        "metadata": {"name": name, "labels": {ZONE: zone, "kubernetes.io/hostname": name}},
        "status": {"conditions": [{
            "type": "Ready",
            "status": if ready { "True" } else { "Unknown" },
            "reason": if ready { "KubeletReady" } else { "NodeStatusUnknown" },
            "message": if ready { "kubelet is posting ready status" } else { "Kubelet stopped posting node status." }
        }]}
    }))
}

pub fn csi_node(name: &str, drivers: &[&str]) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"drivers": drivers.iter().map(|d| json!({
            "name": d, "nodeID": format!("i-{name}"), "topologyKeys": [ZONE],
            "allocatable": {"count": 25}
        })).collect::<Vec<_>>()}
    })
}

pub fn volume(name: &str, claim: &str, zone: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": claim, "uid": format!("uid-{claim}")},
            "csi": {"driver": EBS, "volumeHandle": "vol-0123"},
            "storageClassName": "gp3-csi",
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
            ]}}
        },
        "status": {"phase": "Bound"}
    })
}

pub fn attachment(
    name: &str,
    volume: &str,
    node: &str,
    attached: bool,
    error: Option<&str>,
) -> Value {
    let mut status = json!({"attached": attached});
    if let Some(error) = error {
        status["attachError"] = json!({"message": error, "time": "2026-03-01T11:58:00Z"});
    }
    json!({
        "metadata": {"name": name},
        "spec": {"attacher": EBS, "nodeName": node, "source": {"persistentVolumeName": volume}},
        "status": status
    })
}

/// A core/v1 Event about `kind NS/name`.
pub fn event(
    kind: &str,
    name: &str,
    kind_of: &str,
    reason: &str,
    message: &str,
    component: &str,
) -> Event {
    from(json!({
        "metadata": {"name": format!("{name}.{reason}"), "namespace": NS},
        "involvedObject": {"kind": kind, "namespace": NS, "name": name},
        "type": kind_of,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "count": 3,
        "lastTimestamp": "2026-03-01T11:58:00Z"
    }))
}

pub fn driver_pod(name: &str, node: &str, containers: &[&str]) -> Pod {
    from(json!({
        "metadata": {"name": name, "namespace": DRIVER_NS},
        "spec": {
            "nodeName": node,
            "containers": containers.iter().map(|c| json!({"name": c, "image": format!("registry/{c}:1")})).collect::<Vec<_>>()
        },
        "status": running_status(containers)
    }))
}

pub fn cluster_csi_driver(conditions: Value) -> Value {
    json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "ClusterCSIDriver",
        "metadata": {"name": EBS},
        "spec": {"managementState": "Managed"},
        "status": {"conditions": conditions}
    })
}

pub fn ebs_facts() -> DriverFacts {
    DriverFacts {
        csi_name: EBS.to_owned(),
        min_bytes: Some(1 << 30),
        max_bytes: Some(16 << 40),
        access_modes: vec!["ReadWriteOnce".to_owned(), "ReadWriteOncePod".to_owned()],
        volume_modes: vec!["Filesystem".to_owned(), "Block".to_owned()],
        access_modes_by_volume_mode: Default::default(),
        has_controller: true,
        installed_by: Some(InstalledBy::ClusterCSIDriver {
            name: EBS.to_owned(),
        }),
    }
}

/// The healthy scene: every link of `app/data` and `app/web-0` is fine.
pub fn healthy() -> Snapshot {
    let mut snap = Snapshot::new(from(json!(NOW)));
    snap.storage_classes = vec![class(
        "gp3-csi",
        EBS,
        "WaitForFirstConsumer",
        true,
        "2026-01-01T00:00:00Z",
    )];
    snap.csi_drivers = vec![from(json!({
        "metadata": {"name": EBS},
        "spec": {"attachRequired": true, "podInfoOnMount": false}
    }))];
    snap.nodes = vec![
        node("node-a", "us-east-1a", true),
        node("node-b", "us-east-1b", true),
    ];
    snap.csi_nodes = vec![
        from(csi_node("node-a", &[EBS])),
        from(csi_node("node-b", &[EBS])),
    ];
    snap.claims = vec![claim("data", Some("gp3-csi"), Some("pvc-1"))];
    snap.volumes = vec![from(volume("pvc-1", "data", "us-east-1a"))];
    snap.pods = vec![pod("web-0", "data", Some("node-a"))];
    snap.volume_attachments = vec![from(attachment("csi-0a1b", "pvc-1", "node-a", true, None))];
    snap.driver_pods = vec![DriverPods {
        csi_name: EBS.to_owned(),
        controller: vec![driver_pod(
            "aws-ebs-csi-driver-controller-7d9f-abcde",
            "master-0",
            &["csi-driver", "csi-provisioner", "csi-attacher"],
        )],
        node: vec![
            driver_pod(
                "aws-ebs-csi-driver-node-aaaaa",
                "node-a",
                &["csi-driver", "csi-node-driver-registrar"],
            ),
            driver_pod(
                "aws-ebs-csi-driver-node-bbbbb",
                "node-b",
                &["csi-driver", "csi-node-driver-registrar"],
            ),
        ],
    }];
    snap.cluster_csi_drivers = vec![from(cluster_csi_driver(json!([
        {"type": "AWSEBSDriverControllerServiceControllerAvailable", "status": "True", "reason": "AsExpected", "message": ""},
        {"type": "AWSEBSDriverControllerServiceControllerDegraded", "status": "False", "reason": "AsExpected", "message": ""}
    ])))];
    snap.drivers = vec![ebs_facts()];
    snap
}

/// The healthy scene with `app/data` not bound yet (no volume, no attachment).
pub fn unbound() -> Snapshot {
    let mut snap = healthy();
    snap.claims = vec![claim("data", Some("gp3-csi"), None)];
    snap.volumes.clear();
    snap.volume_attachments.clear();
    snap
}
