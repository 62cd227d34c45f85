//! From a bound claim to a running pod: the PersistentVolume (there, bound to this claim, its
//! node affinity against the pod's node), the pod's scheduling, the VolumeAttachment (attach
//! errors, multi-attach) and the kubelet's mount.

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};

use crate::affinity::{describe, matches, relevant_labels, required_terms};
use crate::driver::{attach_required, node_pod};
use crate::evidence::{self, scheduling_failure};
use crate::report::{
    Checked, Evidence, Finding, FindingKind, broken, not_applicable, not_checked, ok,
};
use crate::snapshot::{Snapshot, name_of, namespace_of, object_name};

/// How the scheduler's volume binding says that a bound volume's node affinity excludes a
/// node: the words of Kubernetes 1.36 (what the scheduler of `../shared/k8s` prints), and
/// those of older releases.
const SCHEDULER_NODE_CONFLICT: [&str; 2] = [
    "node(s) didn't match PersistentVolume's node affinity",
    "node(s) had volume node affinity conflict",
];

/// The node a pod was scheduled to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .filter(|node| !node.is_empty())
}

fn pod_object(pod: &Pod) -> String {
    object_name("Pod", namespace_of(&pod.metadata), name_of(&pod.metadata))
}

/// The PersistentVolume link, and the volume when it is there and bound to this claim.
pub fn volume_link<'a>(
    snap: &'a Snapshot,
    claim: &PersistentVolumeClaim,
    consumer: Option<&Pod>,
) -> (Checked, Option<&'a PersistentVolume>) {
    let namespace = namespace_of(&claim.metadata);
    let name = name_of(&claim.metadata);
    let claim_object = object_name("PersistentVolumeClaim", namespace, name);
    let Some(volume_name) = claim
        .spec
        .as_ref()
        .and_then(|spec| spec.volume_name.as_deref())
        .filter(|volume| !volume.is_empty())
    else {
        return (
            not_checked(
                "PersistentVolume",
                None,
                "the claim is not bound yet".to_owned(),
            ),
            None,
        );
    };
    let object = object_name("PersistentVolume", "", volume_name);
    let phase = claim
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .unwrap_or("Pending");
    let Some(volume) = snap.volume(volume_name) else {
        return (
            broken(
                "PersistentVolume",
                Some(object.clone()),
                "not found".to_owned(),
                Finding::new(
                    FindingKind::VolumeMissing,
                    format!("the claim's PersistentVolume {volume_name} is gone (claim {phase})"),
                    vec![
                        Evidence::new(
                            claim_object,
                            "spec.volumeName".to_owned(),
                            volume_name.to_owned(),
                        ),
                        Evidence::new(
                            object,
                            "GET".to_owned(),
                            format!("persistentvolumes \"{volume_name}\" not found"),
                        ),
                    ],
                    format!(
                        "if the disk still exists, recreate PersistentVolume {volume_name} with \
                         its spec.csi.volumeHandle and spec.claimRef to {namespace}/{name}; \
                         otherwise the data is gone: delete the claim and create it again"
                    ),
                ),
            ),
            None,
        );
    };
    let claim_ref = volume
        .spec
        .as_ref()
        .and_then(|spec| spec.claim_ref.as_ref());
    let ours = claim_ref.is_some_and(|reference| {
        reference.name.as_deref() == Some(name)
            && reference.namespace.as_deref().unwrap_or_default() == namespace
            && match (&reference.uid, &claim.metadata.uid) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    });
    if !ours {
        let bound_to = claim_ref
            .map(|reference| {
                format!(
                    "{}/{} (uid {})",
                    reference.namespace.as_deref().unwrap_or_default(),
                    reference.name.as_deref().unwrap_or_default(),
                    reference.uid.as_deref().unwrap_or("unset")
                )
            })
            .unwrap_or_else(|| "(no claim)".to_owned());
        return (
            broken(
                "PersistentVolume",
                Some(object.clone()),
                format!("bound to {bound_to}"),
                Finding::new(
                    FindingKind::VolumeMissing,
                    format!("the claim's PersistentVolume {volume_name} belongs to another claim"),
                    vec![Evidence::new(object, "spec.claimRef".to_owned(), bound_to)],
                    format!(
                        "the volume was given to another claim (or this claim was recreated): \
                         delete claim {namespace}/{name} and create it again, or clear the \
                         volume's spec.claimRef if it is Released and should be reused"
                    ),
                ),
            ),
            None,
        );
    }

    let terms = required_terms(volume);
    let pv_phase = volume
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .unwrap_or("Unknown");
    let driver = volume
        .spec
        .as_ref()
        .and_then(|spec| spec.csi.as_ref())
        .map(|csi| format!(", CSI driver {} handle {}", csi.driver, csi.volume_handle))
        .unwrap_or_default();
    let affinity = if terms.is_empty() {
        String::new()
    } else {
        format!(", node affinity: {}", describe(terms))
    };
    let detail = format!("{pv_phase}{driver}{affinity}");
    if terms.is_empty() {
        return (ok("PersistentVolume", Some(object), detail), Some(volume));
    }
    let conflict = match consumer {
        Some(pod) => match node_of(pod) {
            Some(node_name) => snap.node(node_name).and_then(|node| {
                (!matches(terms, node)).then(|| {
                    let evidence = vec![
                        Evidence::new(
                            object.clone(),
                            "spec.nodeAffinity.required".to_owned(),
                            describe(terms),
                        ),
                        Evidence::new(
                            object_name("Node", "", node_name),
                            "metadata.labels".to_owned(),
                            relevant_labels(terms, node),
                        ),
                    ];
                    (
                        format!(
                            "excludes node {node_name}, where pod {} runs",
                            name_of(&pod.metadata)
                        ),
                        evidence,
                    )
                })
            }),
            None => scheduling_failure(snap, pod).and_then(|failure| {
                let fits: Vec<&str> = snap
                    .nodes
                    .iter()
                    .filter(|node| matches(terms, node))
                    .map(|node| name_of(&node.metadata))
                    .collect();
                let scheduler_says = failure.iter().any(|e| {
                    SCHEDULER_NODE_CONFLICT
                        .iter()
                        .any(|reason| e.message.contains(reason))
                });
                (scheduler_says || (fits.is_empty() && !snap.nodes.is_empty())).then(|| {
                    let mut evidence = vec![Evidence::new(
                        object.clone(),
                        "spec.nodeAffinity.required".to_owned(),
                        describe(terms),
                    )];
                    evidence.push(Evidence::new(
                        "Nodes".to_owned(),
                        "labels".to_owned(),
                        if fits.is_empty() {
                            "no node matches".to_owned()
                        } else {
                            format!("nodes that match: {}", fits.join(", "))
                        },
                    ));
                    evidence.extend(failure);
                    (
                        format!("keeps pod {} from being scheduled", name_of(&pod.metadata)),
                        evidence,
                    )
                })
            }),
        },
        None => None,
    };
    match conflict {
        Some((what, evidence)) => (
            broken(
                "PersistentVolume",
                Some(object),
                format!("node affinity {what}"),
                Finding::new(
                    FindingKind::VolumeNodeAffinityConflict,
                    format!("the volume's node affinity {what}"),
                    evidence,
                    format!(
                        "the volume can be used only on nodes where {}: run the pod on such a \
                         node (its spec.nodeSelector, affinity and tolerations must allow one), \
                         or bring back a node there. For new claims, volumeBindingMode: \
                         WaitForFirstConsumer on the class creates the volume where the pod is \
                         scheduled",
                        describe(terms)
                    ),
                ),
            ),
            None,
        ),
        None => (ok("PersistentVolume", Some(object), detail), Some(volume)),
    }
}

/// The pod's scheduling link.
pub fn scheduling_link(snap: &Snapshot, pod: &Pod) -> Checked {
    let object = Some(pod_object(pod));
    if let Some(node) = node_of(pod) {
        return ok("Scheduling", object, format!("scheduled to node {node}"));
    }
    let name = name_of(&pod.metadata);
    match scheduling_failure(snap, pod) {
        Some(evidence) => broken(
            "Scheduling",
            object,
            "unschedulable".to_owned(),
            Finding::new(
                FindingKind::PodUnschedulable,
                format!("pod {name} cannot be scheduled"),
                evidence,
                format!(
                    "fix what the scheduler's message names: free resources or add nodes, or \
                     change pod {name}'s spec.nodeSelector, affinity and tolerations"
                ),
            ),
        ),
        None => not_checked("Scheduling", object, "not scheduled yet".to_owned()),
    }
}

/// Whether a kubelet Event's message is about this volume: it quotes the PersistentVolume's
/// name or the pod's volume name, or lists the pod volume among the unmounted ones.
fn mentions(message: &str, volume: &str, pod_volume: &str) -> bool {
    let listed = message
        .split_once("unmounted volumes=[")
        .and_then(|(_, rest)| rest.split_once(']'))
        .is_some_and(|(list, _)| list.split([' ', ',']).any(|item| item == pod_volume));
    message.contains(&format!("\"{volume}\""))
        || message.contains(&format!("\"{pod_volume}\""))
        || listed
}

fn pod_events_about<'a>(
    snap: &'a Snapshot,
    pod: &Pod,
    reason: &str,
    volume: &str,
    pod_volume: &str,
) -> Vec<&'a Event> {
    snap.events_of("Pod", namespace_of(&pod.metadata), name_of(&pod.metadata))
        .into_iter()
        .filter(|event| event.reason.as_deref() == Some(reason))
        .filter(|event| {
            mentions(
                event.message.as_deref().unwrap_or_default(),
                volume,
                pod_volume,
            )
        })
        .collect()
}

/// The VolumeAttachment link for `volume` on the consumer's node.
pub fn attachment_link(
    snap: &Snapshot,
    volume: &PersistentVolume,
    pod_volume: &str,
    consumer: Option<&Pod>,
    consumers: &[&Pod],
) -> Checked {
    const LINK: &str = "VolumeAttachment";
    let volume_name = name_of(&volume.metadata);
    let Some(csi) = volume.spec.as_ref().and_then(|spec| spec.csi.as_ref()) else {
        return not_applicable(LINK, None, "not a CSI volume".to_owned());
    };
    if !attach_required(snap, &csi.driver) {
        return not_applicable(
            LINK,
            None,
            format!("{} needs no attachment (attachRequired false)", csi.driver),
        );
    }
    let Some(pod) = consumer else {
        return not_applicable(LINK, None, "no pod uses the claim".to_owned());
    };
    let Some(node) = node_of(pod) else {
        return not_checked(LINK, None, "the pod is not scheduled".to_owned());
    };
    let attach_events = pod_events_about(snap, pod, "FailedAttachVolume", volume_name, pod_volume);
    let attachments = snap.attachments_of(volume_name);
    let multi = attach_events.iter().find(|event| {
        event
            .message
            .as_deref()
            .is_some_and(|message| message.starts_with("Multi-Attach error"))
    });
    if let Some(multi) = multi {
        let mut evidence = vec![evidence::event(snap, multi)];
        let mut elsewhere = Vec::new();
        for attachment in attachments.iter().filter(|va| va.spec.node_name != node) {
            elsewhere.push(attachment.spec.node_name.clone());
            let attached = attachment
                .status
                .as_ref()
                .is_some_and(|status| status.attached);
            evidence.push(Evidence::new(
                object_name("VolumeAttachment", "", name_of(&attachment.metadata)),
                "spec.nodeName, status.attached".to_owned(),
                format!("node {}, attached {attached}", attachment.spec.node_name),
            ));
        }
        let mut users = Vec::new();
        for other in consumers
            .iter()
            .filter(|other| node_of(other).is_some_and(|n| n != node))
        {
            users.push(name_of(&other.metadata).to_owned());
            evidence.push(Evidence::new(
                pod_object(other),
                "spec.nodeName".to_owned(),
                format!(
                    "uses the claim on node {}",
                    node_of(other).unwrap_or_default()
                ),
            ));
        }
        let there = if elsewhere.is_empty() {
            "another node".to_owned()
        } else {
            format!("node {}", elsewhere.join(", "))
        };
        let users = if users.is_empty() {
            String::new()
        } else {
            format!(" (used there by pod {})", users.join(", "))
        };
        return broken(
            LINK,
            None,
            format!("attached to {there}"),
            Finding::new(
                FindingKind::MultiAttach,
                format!(
                    "volume {volume_name} is still attached to {there}{users} and can be attached \
                     to one node at a time"
                ),
                evidence,
                format!(
                    "stop what uses it on {there}: delete that pod or scale its owner down, and \
                     use a Recreate strategy (not RollingUpdate) for single-node volumes. If that \
                     node is down, the volume detaches after 6 minutes, or at once when the node \
                     gets the taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
                ),
            ),
        );
    }
    let attachment = attachments.iter().find(|va| va.spec.node_name == node);
    let object = attachment.map(|va| object_name("VolumeAttachment", "", name_of(&va.metadata)));
    let status = attachment.and_then(|va| va.status.as_ref());
    let attach_error = status
        .and_then(|status| status.attach_error.as_ref())
        .and_then(|error| error.message.clone());
    if status.is_some_and(|status| status.attached) {
        return ok(LINK, object, format!("attached to node {node}"));
    }
    if attach_error.is_some() || !attach_events.is_empty() {
        let mut evidence = Vec::new();
        if let (Some(message), Some(object)) = (&attach_error, &object) {
            evidence.push(Evidence::new(
                object.clone(),
                "status.attachError.message".to_owned(),
                message.clone(),
            ));
        }
        evidence.extend(
            attach_events
                .first()
                .map(|event| evidence::event(snap, event)),
        );
        return broken(
            LINK,
            object,
            format!("not attached to node {node}"),
            Finding::new(
                FindingKind::AttachFailed,
                format!("volume {volume_name} could not be attached to node {node}"),
                evidence,
                format!(
                    "the controller of {} could not attach it: fix what the message names (the \
                     node's volume limit, a disk in another zone, the driver's cloud \
                     permissions); the attacher retries on its own",
                    csi.driver
                ),
            ),
        );
    }
    not_checked(
        LINK,
        object,
        format!("not attached to node {node} yet, no error reported"),
    )
}

/// The kubelet's mount of the volume in the consumer pod.
pub fn mount_link(
    snap: &Snapshot,
    volume: &PersistentVolume,
    pod_volume: &str,
    consumer: Option<&Pod>,
) -> Checked {
    const LINK: &str = "Mount";
    let Some(pod) = consumer else {
        return not_applicable(LINK, None, "no pod uses the claim".to_owned());
    };
    let object = Some(pod_object(pod));
    let Some(node) = node_of(pod) else {
        return not_checked(LINK, object, "the pod is not scheduled".to_owned());
    };
    let phase = pod
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .unwrap_or("Pending");
    if phase == "Running" || phase == "Succeeded" {
        return ok(
            LINK,
            object,
            format!("mounted on node {node} (pod {phase})"),
        );
    }
    let volume_name = name_of(&volume.metadata);
    let failures = pod_events_about(snap, pod, "FailedMount", volume_name, pod_volume);
    let generic = |event: &&Event| {
        event
            .message
            .as_deref()
            .is_some_and(|message| message.starts_with("Unable to attach or mount volumes"))
    };
    let specific = failures.iter().find(|event| !generic(event));
    let timeout = failures.iter().find(|event| generic(event));
    if specific.is_none() && timeout.is_none() {
        return not_checked(
            LINK,
            object,
            format!("pod {phase} on node {node}, no mount error reported"),
        );
    }
    let evidence: Vec<Evidence> = specific
        .into_iter()
        .chain(timeout)
        .map(|event| evidence::event(snap, event))
        .collect();
    let csi = volume
        .spec
        .as_ref()
        .and_then(|spec| spec.csi.as_ref())
        .map(|csi| csi.driver.as_str());
    let logs = csi
        .and_then(|csi| node_pod(snap, csi, node))
        .map(|plugin| {
            format!(
                "; the node plugin says more: `kubectl logs -n {} {}`",
                namespace_of(&plugin.metadata),
                name_of(&plugin.metadata)
            )
        })
        .unwrap_or_default();
    broken(
        LINK,
        object,
        format!("mount failed on node {node}"),
        Finding::new(
            FindingKind::MountFailed,
            format!(
                "the kubelet on node {node} could not mount volume {volume_name} for pod {}",
                name_of(&pod.metadata)
            ),
            evidence,
            format!(
                "fix what the kubelet's message names (filesystem, permissions, the device, the \
                 node plugin){logs}; the kubelet retries on its own"
            ),
        ),
    )
}
