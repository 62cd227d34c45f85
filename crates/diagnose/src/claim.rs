//! One claim's chain, in the order a volume goes through it: the claim, its StorageClass, the
//! CSI driver (CSIDriver, controller), the consumer's node (Node, node plugin, CSINode),
//! provisioning, the PersistentVolume, the pod's scheduling, the VolumeAttachment, the mount,
//! and the operator that installed the driver.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use crate::class::class_link;
use crate::driver::{
    controller_link, csi_driver_link, csi_node_link, node_link, node_pod_link, operator_link,
};
use crate::evidence::{self, newest, pod_trouble};
use crate::provisioning::{Provisioning, provisioning_link};
use crate::report::{
    Checked, Evidence, Finding, FindingKind, LinkState, broken, not_applicable, not_checked, ok,
};
use crate::snapshot::{
    PVC_PROTECTION_FINALIZER, Snapshot, claims_of, format_age, name_of, namespace_of, object_name,
};
use crate::volume::{attachment_link, mount_link, node_of, scheduling_link, volume_link};

/// Whether a pod still holds its volumes (it has not finished).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(
        pod.status
            .as_ref()
            .and_then(|status| status.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The pods that use the claim and have not finished, by name.
pub fn consumers<'a>(snap: &'a Snapshot, claim: &PersistentVolumeClaim) -> Vec<&'a Pod> {
    snap.pods_using(namespace_of(&claim.metadata), name_of(&claim.metadata))
        .into_iter()
        .filter(|pod| is_active(pod))
        .collect()
}

/// The consumer whose node the chain checks: the first one in trouble, else the first.
pub fn pick_consumer<'a>(snap: &Snapshot, consumers: &[&'a Pod]) -> Option<&'a Pod> {
    consumers
        .iter()
        .find(|pod| pod_trouble(snap, pod).is_some())
        .or(consumers.first())
        .copied()
}

/// The annotation the scheduler puts on a claim of a WaitForFirstConsumer class: the node it
/// picked for the claim's first pod, where the volume must be provisioned.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// The node the scheduler picked for the claim, when it did.
fn selected_node(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(SELECTED_NODE_ANNOTATION))
        .map(String::as_str)
        .filter(|node| !node.is_empty())
}

/// Adds `extra` to the finding of a broken link.
fn with_evidence(mut checked: Checked, extra: &Option<Evidence>) -> Checked {
    if let (Some(finding), Some(extra)) = (checked.1.as_mut(), extra) {
        finding.evidence.push(extra.clone());
    }
    checked
}

fn claim_link(snap: &Snapshot, claim: &PersistentVolumeClaim, consumers: &[&Pod]) -> Checked {
    let namespace = namespace_of(&claim.metadata);
    let name = name_of(&claim.metadata);
    let object = object_name("PersistentVolumeClaim", namespace, name);
    let phase = claim
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
        .unwrap_or("Pending");
    let spec = claim.spec.as_ref();
    let size = spec
        .and_then(|spec| spec.resources.as_ref())
        .and_then(|resources| resources.requests.as_ref())
        .and_then(|requests| requests.get("storage"))
        .map(|quantity| quantity.0.as_str())
        .unwrap_or("no size");
    let modes = spec
        .and_then(|spec| spec.access_modes.as_deref())
        .map(|modes| modes.join(", "))
        .unwrap_or_default();
    let users = consumers
        .iter()
        .map(|pod| name_of(&pod.metadata))
        .collect::<Vec<_>>();
    let used_by = if users.is_empty() {
        "no pod".to_owned()
    } else {
        format!("pod {}", users.join(", "))
    };
    let detail = format!("{phase}, {size}, [{modes}], used by {used_by}");
    let Some(deleted) = &claim.metadata.deletion_timestamp else {
        return ok("PersistentVolumeClaim", Some(object), detail);
    };
    let protected = claim
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|finalizer| finalizer == PVC_PROTECTION_FINALIZER);
    if !protected || consumers.is_empty() {
        return ok(
            "PersistentVolumeClaim",
            Some(object),
            format!("being deleted; {detail}"),
        );
    }
    let mut evidence = vec![Evidence::new(
        object.clone(),
        "metadata.deletionTimestamp, metadata.finalizers".to_owned(),
        format!(
            "deleted {} ago, held by finalizer {PVC_PROTECTION_FINALIZER}",
            format_age(snap.age_seconds(&deleted.0))
        ),
    )];
    for pod in consumers {
        let volume = claims_of(pod)
            .into_iter()
            .find(|(_, used)| used == name)
            .map(|(volume, _)| volume)
            .unwrap_or_default();
        let phase = pod
            .status
            .as_ref()
            .and_then(|status| status.phase.as_deref())
            .unwrap_or("Pending");
        evidence.push(Evidence::new(
            object_name("Pod", namespace, name_of(&pod.metadata)),
            format!("spec.volumes[{volume}].persistentVolumeClaim"),
            format!("uses claim {name} (pod {phase})"),
        ));
    }
    broken(
        "PersistentVolumeClaim",
        Some(object),
        format!("being deleted, waits for {used_by}"),
        Finding::new(
            FindingKind::ClaimInUseWhileDeleting,
            format!("the claim is being deleted and waits until {used_by} no longer uses it"),
            evidence,
            format!(
                "delete {used_by} (or scale down the Deployment or StatefulSet that runs it); \
                 Kubernetes removes the claim once no pod uses it. The deletion cannot be undone: \
                 to keep the data, keep the PersistentVolume (persistentVolumeReclaimPolicy: \
                 Retain) before the claim goes"
            ),
        ),
    )
}

/// The chain of `claim`, checked on `consumer`'s node. `with_scheduling` adds the consumer's
/// scheduling link (a pod's own diagnosis checks it once, after all its claims).
pub fn claim_chain(
    snap: &Snapshot,
    claim: &PersistentVolumeClaim,
    consumer: Option<&Pod>,
    consumers: &[&Pod],
    with_scheduling: bool,
) -> Vec<Checked> {
    let namespace = namespace_of(&claim.metadata);
    let name = name_of(&claim.metadata);
    let mut links = vec![claim_link(snap, claim, consumers)];
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|spec| spec.volume_name.as_deref())
        .filter(|volume| !volume.is_empty());
    let bound = volume_name.is_some();
    let class = class_link(snap, claim, bound);
    let class_broken = class.checked.0.state == LinkState::Broken;
    links.push(class.checked);

    // The driver: the bound volume's own, else the class's provisioner.
    let volume_driver = volume_name
        .and_then(|volume| snap.volume(volume))
        .and_then(|volume| volume.spec.as_ref())
        .and_then(|spec| spec.csi.as_ref())
        .map(|csi| (csi.driver.clone(), volume_name.unwrap_or_default()));
    let csi_name: Option<String>;
    let wanted_by: Option<Evidence>;
    match (&volume_driver, class.class) {
        (Some((driver, volume)), _) => {
            csi_name = Some(driver.clone());
            wanted_by = Some(Evidence::new(
                object_name("PersistentVolume", "", volume),
                "spec.csi.driver".to_owned(),
                driver.clone(),
            ));
        }
        (None, Some(found)) if !found.provisioner.starts_with("kubernetes.io/") => {
            csi_name = Some(found.provisioner.clone());
            wanted_by = Some(Evidence::new(
                object_name("StorageClass", "", name_of(&found.metadata)),
                "provisioner".to_owned(),
                found.provisioner.clone(),
            ));
        }
        _ => {
            csi_name = None;
            wanted_by = None;
        }
    }
    let in_tree = class
        .class
        .filter(|found| found.provisioner.starts_with("kubernetes.io/"))
        .map(|found| found.provisioner.clone());
    let skip = |why: &str| -> Vec<Checked> {
        ["CSIDriver", "Controller", "Node", "NodePlugin", "CSINode"]
            .iter()
            .map(|link| {
                if class_broken {
                    not_checked(link, None, "the StorageClass link is broken".to_owned())
                } else {
                    not_applicable(link, None, why.to_owned())
                }
            })
            .collect()
    };
    let mut driver_installed = false;
    match &csi_name {
        Some(csi) => {
            let driver = with_evidence(
                csi_driver_link(snap, csi, wanted_by, FindingKind::NoSuchCSIDriver),
                &class.ambiguity,
            );
            driver_installed = driver.0.state != LinkState::Broken;
            links.push(driver);
            if driver_installed {
                let waiting = if bound {
                    Vec::new()
                } else {
                    let events = snap.events_of("PersistentVolumeClaim", namespace, name);
                    newest(&events, &["ExternalProvisioning"])
                        .map(|event| vec![evidence::event(snap, event)])
                        .unwrap_or_default()
                };
                links.push(controller_link(snap, csi, waiting));
                // An unbound claim of a WaitForFirstConsumer class is provisioned for the node
                // the scheduler picked (the pod is bound to it only afterwards): that node must
                // exist and run the driver's node plugin, or the provisioner can only fail.
                let selected = (!bound).then(|| selected_node(claim)).flatten();
                match consumer.and_then(node_of).or(selected) {
                    Some(node) => {
                        let picked = selected
                            .filter(|_| consumer.and_then(node_of).is_none())
                            .map(|node| {
                                Evidence::new(
                                    object_name("PersistentVolumeClaim", namespace, name),
                                    format!("annotation {SELECTED_NODE_ANNOTATION}"),
                                    node.to_owned(),
                                )
                            });
                        links.push(with_evidence(node_link(snap, node), &picked));
                        links.push(with_evidence(node_pod_link(snap, csi, node), &picked));
                        links.push(with_evidence(csi_node_link(snap, csi, node), &picked));
                    }
                    None => {
                        for link in ["Node", "NodePlugin", "CSINode"] {
                            links.push(not_applicable(
                                link,
                                None,
                                "no pod using the claim is scheduled".to_owned(),
                            ));
                        }
                    }
                }
            } else {
                for link in ["Controller", "Node", "NodePlugin", "CSINode"] {
                    links.push(not_checked(link, None, format!("{csi} is not installed")));
                }
            }
        }
        None => {
            let skipped = match &in_tree {
                Some(provisioner) => skip(&format!("in-tree provisioner {provisioner}")),
                None => skip("no CSI driver: the claim has no class that provisions"),
            };
            // A volume of no CSI driver (a local or host path volume made beforehand) still
            // needs the pod's node.
            let node = consumer.and_then(node_of).filter(|_| !class_broken);
            links.extend(skipped.into_iter().map(|link| match node {
                Some(node) if link.0.name == "Node" => node_link(snap, node),
                _ => link,
            }));
        }
    }

    if bound {
        links.push(ok(
            "Provisioning",
            Some(object_name("PersistentVolumeClaim", namespace, name)),
            format!("bound to {}", volume_name.unwrap_or_default()),
        ));
    } else if class_broken || (csi_name.is_some() && !driver_installed) {
        links.push(not_checked(
            "Provisioning",
            None,
            "an earlier link is broken".to_owned(),
        ));
    } else {
        let provisioning = Provisioning {
            claim,
            class: class.class,
            csi_name: csi_name.as_deref(),
            consumers,
            ambiguity: class.ambiguity.clone(),
        };
        links.push(provisioning_link(snap, &provisioning));
    }

    let (volume_checked, volume) = volume_link(snap, claim, consumer);
    links.push(volume_checked);
    if with_scheduling {
        match consumer {
            Some(pod) if bound => links.push(scheduling_link(snap, pod)),
            Some(_) => links.push(not_checked(
                "Scheduling",
                None,
                "the pod waits for the claim to bind".to_owned(),
            )),
            None => links.push(not_applicable(
                "Scheduling",
                None,
                "no pod uses the claim".to_owned(),
            )),
        }
    }
    let pod_volume = consumer
        .and_then(|pod| {
            claims_of(pod)
                .into_iter()
                .find(|(_, used)| used == name)
                .map(|(volume, _)| volume)
        })
        .unwrap_or_default();
    match volume {
        Some(volume) => {
            links.push(attachment_link(
                snap,
                volume,
                &pod_volume,
                consumer,
                consumers,
            ));
            links.push(mount_link(snap, volume, &pod_volume, consumer));
        }
        None => {
            for link in ["VolumeAttachment", "Mount"] {
                links.push(not_checked(
                    link,
                    None,
                    "no PersistentVolume yet".to_owned(),
                ));
            }
        }
    }
    match &csi_name {
        Some(csi) => links.push(operator_link(snap, csi)),
        _ => links.push(not_applicable("Operator", None, "no CSI driver".to_owned())),
    }
    links
}
