//! The rules of `storage-operator diagnose` (`diagnose pvc`, `diagnose pod`, `diagnose
//! driver`): given the objects a gatherer read ([`Snapshot`]), walk the chain a volume goes
//! through and report the first broken link as a [`Finding`] (cause, evidence with the exact
//! messages, fix), then every link as checked ([`Report`]).
//!
//! Nothing here reads the cluster, and the compiler holds it to that: this crate has no API
//! client, runtime or I/O among its dependencies. The CLI's gatherer fills a [`Snapshot`]
//! (what to read for a subject: [`reads`]), these functions judge it, and the CLI prints the
//! [`Report`] as text (`Display`) or as data (serde, `-o json` / `-o yaml`). Bad or partial
//! input never panics: a missing object is a finding or a link not checked.
//!
//! The files, bottom to top; a file uses only files listed before it:
//! 1. What uses nothing else: `report` (the output), `snapshot` (the input and its lookups),
//!    `affinity` (node selector terms against a Node). Sizes are read and written by
//!    `csi_kit::quantity`, as the driver tables' are.
//! 2. `evidence`: Events, scheduling failures and troubled containers as evidence.
//! 3. The links: `class` (StorageClass), `driver` (CSIDriver, controller, node plugin,
//!    CSINode, Node, operator), `provisioning` (an unbound claim), `volume`
//!    (PersistentVolume, scheduling, VolumeAttachment, mount).
//! 4. `claim`: one claim's chain, in order.
//! 5. This file: the three subjects.

mod affinity;
mod claim;
mod class;
mod driver;
mod evidence;
mod provisioning;
mod report;
mod snapshot;
mod volume;

use csi_kit::quantity::format_bytes;
use k8s_openapi::api::core::v1::Pod;

pub use crate::report::{Evidence, Finding, FindingKind, Link, LinkState, Report, Subject};
pub use crate::snapshot::{
    ContainerLog, DriverFacts, DriverPods, InstalledBy, Read, Snapshot, Target, reads,
};

use crate::claim::{claim_chain, consumers, pick_consumer};
use crate::driver::{
    controller_link, csi_driver_link, csi_node_link, node_pod, node_pod_link, operator_link,
};
use crate::report::{Checked, broken, not_applicable, not_checked, ok};
use crate::snapshot::{claims_of, name_of, namespace_of, object_name};
use crate::volume::scheduling_link;

fn subject(kind: &str, namespace: Option<&str>, name: &str) -> Subject {
    Subject {
        kind: kind.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
    }
}

/// Up to ten names of a list, for a fix that says what exists.
fn some_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    let more = names.len().saturating_sub(10);
    names.truncate(10);
    match (names.is_empty(), more) {
        (true, _) => "(none)".to_owned(),
        (false, 0) => names.join(", "),
        (false, more) => format!("{} and {more} more", names.join(", ")),
    }
}

fn no_such(kind: &str, resource: &str, namespace: &str, name: &str, others: String) -> Checked {
    let object = object_name(kind, namespace, name);
    broken(
        kind,
        Some(object.clone()),
        "not found".to_owned(),
        Finding::new(
            if kind == "Pod" {
                FindingKind::NoSuchPod
            } else {
                FindingKind::NoSuchClaim
            },
            format!("{object} does not exist"),
            vec![Evidence::new(
                object,
                "GET".to_owned(),
                format!("{resource} \"{name}\" not found"),
            )],
            format!("check the name and the namespace (-n); {resource} in {namespace}: {others}"),
        ),
    )
}

/// `diagnose pvc -n NAMESPACE NAME`: the chain of one claim, checked on the node of the pod
/// that uses it (the first one in trouble, when several do).
pub fn diagnose_pvc(snap: &Snapshot, namespace: &str, name: &str) -> Report {
    let subject = subject("PersistentVolumeClaim", Some(namespace), name);
    let Some(claim) = snap.claim(namespace, name) else {
        let others = some_names(
            snap.claims
                .iter()
                .filter(|claim| namespace_of(&claim.metadata) == namespace)
                .map(|claim| name_of(&claim.metadata)),
        );
        return Report::from_links(
            subject,
            vec![no_such(
                "PersistentVolumeClaim",
                "persistentvolumeclaims",
                namespace,
                name,
                others,
            )],
        );
    };
    let users = consumers(snap, claim);
    let consumer = pick_consumer(snap, &users);
    Report::from_links(subject, claim_chain(snap, claim, consumer, &users, true))
}

/// `diagnose pod -n NAMESPACE NAME`: the chain of every claim the pod uses, on its node, then
/// its scheduling. The first broken link across them is the finding.
pub fn diagnose_pod(snap: &Snapshot, namespace: &str, name: &str) -> Report {
    let subject = subject("Pod", Some(namespace), name);
    let Some(pod) = snap.pod(namespace, name) else {
        let others = some_names(
            snap.pods
                .iter()
                .filter(|pod| namespace_of(&pod.metadata) == namespace)
                .map(|pod| name_of(&pod.metadata)),
        );
        return Report::from_links(
            subject,
            vec![no_such("Pod", "pods", namespace, name, others)],
        );
    };
    let mut links = vec![pod_link(pod)];
    let claims = claims_of(pod);
    if claims.is_empty() {
        links.push(not_applicable(
            "PersistentVolumeClaim",
            None,
            "the pod uses no PersistentVolumeClaim".to_owned(),
        ));
    }
    for (volume, claim_name) in &claims {
        match snap.claim(namespace, claim_name) {
            Some(claim) => {
                let users = consumers(snap, claim);
                links.extend(claim_chain(snap, claim, Some(pod), &users, false));
            }
            None => links.push(missing_claim_of_pod(snap, pod, volume, claim_name)),
        }
    }
    links.push(scheduling_link(snap, pod));
    Report::from_links(subject, links)
}

fn pod_link(pod: &Pod) -> Checked {
    let status = pod.status.as_ref();
    let phase = status
        .and_then(|status| status.phase.as_deref())
        .unwrap_or("Pending");
    let node = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .map(|node| format!(" on node {node}"))
        .unwrap_or_default();
    ok(
        "Pod",
        Some(object_name(
            "Pod",
            namespace_of(&pod.metadata),
            name_of(&pod.metadata),
        )),
        format!("{phase}{node}"),
    )
}

fn missing_claim_of_pod(snap: &Snapshot, pod: &Pod, volume: &str, claim_name: &str) -> Checked {
    let namespace = namespace_of(&pod.metadata);
    let pod_name = name_of(&pod.metadata);
    let ephemeral = pod
        .spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .any(|v| v.name == volume && v.ephemeral.is_some());
    let object = object_name("PersistentVolumeClaim", namespace, claim_name);
    let mut evidence = vec![
        Evidence::new(
            object_name("Pod", namespace, pod_name),
            format!("spec.volumes[{volume}]"),
            if ephemeral {
                format!("ephemeral volume, claim {claim_name}")
            } else {
                format!("persistentVolumeClaim.claimName: {claim_name}")
            },
        ),
        Evidence::new(
            object.clone(),
            "GET".to_owned(),
            format!("persistentvolumeclaims \"{claim_name}\" not found"),
        ),
    ];
    let events = snap.events_of("Pod", namespace, pod_name);
    if let Some(failed) = evidence::newest(&events, &["FailedScheduling"]) {
        evidence.push(evidence::event(snap, failed));
    }
    let fix = if ephemeral {
        format!(
            "the ephemeral volume controller creates claim {claim_name} from the pod's \
             spec.volumes[{volume}].ephemeral.volumeClaimTemplate: check kube-controller-manager's \
             events, and that no other claim of that name exists"
        )
    } else {
        format!(
            "create claim {claim_name} in {namespace}, or fix the pod's \
             spec.volumes[{volume}].persistentVolumeClaim.claimName"
        )
    };
    broken(
        "PersistentVolumeClaim",
        Some(object),
        "not found".to_owned(),
        Finding::new(
            FindingKind::NoSuchClaim,
            format!("pod {pod_name} uses claim {claim_name}, which does not exist"),
            evidence,
            fix,
        ),
    )
}

/// What the catalogue knows of a driver; what it does not know is said so, not taken as "any".
fn describe_facts(facts: &DriverFacts) -> String {
    let modes = |modes: &[String]| {
        if modes.is_empty() {
            "not known".to_owned()
        } else {
            format!("[{}]", modes.join(", "))
        }
    };
    let bytes = |bytes: u64| format_bytes(u128::from(bytes));
    let sizes = match (facts.min_bytes, facts.max_bytes) {
        (None, None) => "not known".to_owned(),
        (Some(min), None) => format!("from {}", bytes(min)),
        (None, Some(max)) => format!("up to {}", bytes(max)),
        (Some(min), Some(max)) => format!("{} to {}", bytes(min), bytes(max)),
    };
    // Where they differ between volume modes, the access modes of each.
    let access_modes =
        if facts.access_modes_by_volume_mode.is_empty() || facts.volume_modes.is_empty() {
            modes(&facts.access_modes)
        } else {
            facts
                .volume_modes
                .iter()
                .map(|mode| format!("{} with {mode}", modes(facts.access_modes_with(mode))))
                .collect::<Vec<_>>()
                .join(" and ")
        };
    format!(
        "access modes {access_modes}, volume modes {}, sizes {sizes}",
        modes(&facts.volume_modes)
    )
}

/// `diagnose driver NAME`: the CSIDriver, its catalogue entry, its controller, its node pods
/// and their registration in each node's CSINode, and its operator's conditions.
pub fn diagnose_driver(snap: &Snapshot, csi_name: &str) -> Report {
    let subject = subject("CSIDriver", None, csi_name);
    let facts = snap.driver_facts(csi_name);
    let driver = csi_driver_link(snap, csi_name, None, FindingKind::NoSuchDriver);
    let installed = driver.0.state != LinkState::Broken || facts.is_some();
    let mut links = vec![driver];
    links.push(match facts {
        Some(facts) => ok("Catalogue", None, describe_facts(facts)),
        None => not_applicable(
            "Catalogue",
            None,
            format!("{csi_name} is not in the driver catalogue"),
        ),
    });
    if !installed {
        links.push(operator_link(snap, csi_name));
        return Report::from_links(subject, links);
    }
    links.push(controller_link(snap, csi_name, Vec::new()));
    let mut nodes: Vec<&str> = snap
        .nodes
        .iter()
        .map(|node| name_of(&node.metadata))
        .collect();
    nodes.sort_unstable();
    let pods_read = snap.driver_pods(csi_name).is_some();
    let mut without_pod = Vec::new();
    for node in nodes {
        if pods_read && node_pod(snap, csi_name, node).is_none() {
            without_pod.push(node);
            continue;
        }
        if pods_read {
            links.push(node_pod_link(snap, csi_name, node));
        }
        links.push(csi_node_link(snap, csi_name, node));
    }
    if !without_pod.is_empty() {
        links.push(not_applicable(
            "NodePlugin",
            None,
            format!(
                "no node pod on node {} (the DaemonSet does not select them)",
                without_pod.join(", ")
            ),
        ));
    }
    if snap.nodes.is_empty() {
        links.push(not_checked("CSINode", None, "no Node was read".to_owned()));
    }
    links.push(operator_link(snap, csi_name));
    Report::from_links(subject, links)
}
