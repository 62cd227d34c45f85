//! The driver's links: the CSIDriver object, the controller pods, the node pod and CSINode
//! registration on a node, the node itself, and the conditions of the operator that installed
//! the driver (ClusterCSIDriver or CSIDriverDeployment).

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::api::core::v1::Pod;

use crate::evidence::{self, pod_trouble};
use crate::report::{
    Checked, Evidence, Finding, FindingKind, broken, not_applicable, not_checked, ok,
};
use crate::snapshot::{InstalledBy, Snapshot, name_of, namespace_of, object_name};

/// The CSI names installed on the cluster: CSIDriver objects and CSINode registrations.
pub fn installed_drivers(snap: &Snapshot) -> Vec<String> {
    let mut names: Vec<String> = snap
        .csi_drivers
        .iter()
        .map(|driver| name_of(&driver.metadata).to_owned())
        .chain(
            snap.csi_nodes
                .iter()
                .flat_map(|node| node.spec.drivers.iter().map(|d| d.name.clone())),
        )
        .collect();
    names.sort();
    names.dedup();
    names
}

fn registered_on(snap: &Snapshot, csi_name: &str) -> Vec<String> {
    snap.csi_nodes
        .iter()
        .filter(|node| node.spec.drivers.iter().any(|d| d.name == csi_name))
        .map(|node| name_of(&node.metadata).to_owned())
        .collect()
}

fn one_of(names: &[String]) -> String {
    if names.is_empty() {
        "(none installed)".to_owned()
    } else {
        names.join(", ")
    }
}

/// Whether the driver wants a VolumeAttachment before a mount (`spec.attachRequired`, true
/// unless the CSIDriver says otherwise).
pub fn attach_required(snap: &Snapshot, csi_name: &str) -> bool {
    snap.csi_driver(csi_name)
        .and_then(|driver| driver.spec.attach_required)
        .unwrap_or(true)
}

/// The CSIDriver link for driver `csi_name`, which `wanted_by` (e.g. `StorageClass fast`)
/// names. A driver without a CSIDriver object still serves when nodes register it; with
/// neither it is not installed.
pub fn csi_driver_link(
    snap: &Snapshot,
    csi_name: &str,
    wanted_by: Option<Evidence>,
    kind: FindingKind,
) -> Checked {
    let object = Some(object_name("CSIDriver", "", csi_name));
    if let Some(driver) = snap.csi_driver(csi_name) {
        let spec = &driver.spec;
        let modes = spec
            .volume_lifecycle_modes
            .as_deref()
            .map(|modes| modes.join(", "))
            .unwrap_or_else(|| "Persistent".to_owned());
        return ok(
            "CSIDriver",
            object,
            format!(
                "exists: attachRequired {}, podInfoOnMount {}, lifecycle modes {modes}",
                spec.attach_required.unwrap_or(true),
                spec.pod_info_on_mount.unwrap_or(false)
            ),
        );
    }
    let nodes = registered_on(snap, csi_name);
    let has_pods = snap
        .driver_pods(csi_name)
        .is_some_and(|pods| !pods.controller.is_empty() || !pods.node.is_empty());
    if !nodes.is_empty() || has_pods {
        return ok(
            "CSIDriver",
            object,
            format!(
                "no CSIDriver object, but the driver runs (registered on: {}); Kubernetes' \
                 defaults apply (attachRequired true)",
                one_of(&nodes)
            ),
        );
    }
    let installed = installed_drivers(snap);
    let mut evidence: Vec<Evidence> = wanted_by.into_iter().collect();
    evidence.push(Evidence::new(
        object_name("CSIDriver", "", csi_name),
        "GET".to_owned(),
        format!("csidrivers.storage.k8s.io \"{csi_name}\" not found"),
    ));
    evidence.push(Evidence::new(
        "CSINodes".to_owned(),
        "spec.drivers of every node".to_owned(),
        format!("drivers registered: {}", one_of(&installed)),
    ));
    evidence.extend(
        operator_problems(snap, csi_name)
            .map(|(_, problems)| problems)
            .unwrap_or_default(),
    );
    let cause = match kind {
        FindingKind::NoSuchDriver => format!("no CSI driver {csi_name} is installed"),
        _ => format!("the provisioner {csi_name} is not a CSI driver installed on this cluster"),
    };
    let fix = match kind {
        FindingKind::NoSuchDriver => format!(
            "check the name; installed drivers: {}. To install {csi_name}: on OpenShift create \
             ClusterCSIDriver {csi_name}, otherwise a CSIDriverDeployment or the driver's own \
             manifests",
            one_of(&installed)
        ),
        _ => format!(
            "install the driver {csi_name} (on OpenShift: create ClusterCSIDriver {csi_name}; \
             otherwise a CSIDriverDeployment or the driver's manifests), or use a StorageClass \
             whose provisioner is one of: {}",
            one_of(&installed)
        ),
    };
    broken(
        "CSIDriver",
        object,
        "not found, and no node registers it".to_owned(),
        Finding::new(kind, cause, evidence, fix),
    )
}

/// The evidence that the operator which installed `csi_name` reports it Degraded or not
/// Available, and the object to look at.
pub fn operator_problems(snap: &Snapshot, csi_name: &str) -> Option<(String, Vec<Evidence>)> {
    let installed_by = snap
        .driver_facts(csi_name)
        .and_then(|facts| facts.installed_by.clone());
    let by_cluster_driver = |name: &str| {
        snap.cluster_csi_drivers
            .iter()
            .find(|driver| name_of(&driver.metadata) == name)
            .map(|driver| {
                (
                    object_name("ClusterCSIDriver", "", name),
                    driver
                        .status
                        .as_ref()
                        .map(|status| status.conditions.clone())
                        .unwrap_or_default(),
                )
            })
    };
    let by_deployment = |found: &dyn Fn(&api::csidriver_v1alpha1::CSIDriverDeployment) -> bool| {
        snap.csi_driver_deployments
            .iter()
            .find(|deployment| found(deployment))
            .map(|deployment| {
                (
                    object_name(
                        "CSIDriverDeployment",
                        namespace_of(&deployment.metadata),
                        name_of(&deployment.metadata),
                    ),
                    deployment
                        .status
                        .as_ref()
                        .map(|status| status.conditions.clone())
                        .unwrap_or_default(),
                )
            })
    };
    let (object, conditions) = match installed_by {
        Some(InstalledBy::ClusterCSIDriver { name }) => by_cluster_driver(&name),
        Some(InstalledBy::CSIDriverDeployment { namespace, name }) => by_deployment(&|d| {
            namespace_of(&d.metadata) == namespace && name_of(&d.metadata) == name
        }),
        None => by_cluster_driver(csi_name)
            .or_else(|| by_deployment(&|d| d.spec.driver_name == csi_name)),
    }?;
    let evidence = conditions
        .iter()
        .filter(|condition| is_problem(condition))
        .map(|condition| {
            Evidence::new(
                object.clone(),
                format!(
                    "condition {}={}, reason {}",
                    condition.type_,
                    condition.status.as_str(),
                    condition.reason.as_deref().unwrap_or_default()
                ),
                condition.message.clone().unwrap_or_default(),
            )
        })
        .collect();
    Some((object, evidence))
}

fn is_problem(condition: &OperatorCondition) -> bool {
    (condition.type_.ends_with("Degraded") && condition.status == ConditionStatus::True)
        || (condition.type_.ends_with("Available") && condition.status == ConditionStatus::False)
}

/// The link of the operator that installed the driver: Degraded or not Available is broken.
pub fn operator_link(snap: &Snapshot, csi_name: &str) -> Checked {
    let Some((object, problems)) = operator_problems(snap, csi_name) else {
        return not_applicable(
            "Operator",
            None,
            format!(
                "no ClusterCSIDriver or CSIDriverDeployment installs {csi_name} (installed some \
                 other way)"
            ),
        );
    };
    if problems.is_empty() {
        return ok(
            "Operator",
            Some(object),
            "no Degraded condition, none not Available".to_owned(),
        );
    }
    let detail = problems
        .iter()
        .map(|problem| problem.source.clone())
        .collect::<Vec<_>>()
        .join("; ");
    let look = match object.split_once(' ') {
        Some(("CSIDriverDeployment", rest)) => match rest.split_once('/') {
            Some((namespace, name)) => {
                format!("kubectl get csidriverdeployment -n {namespace} {name} -o yaml")
            }
            None => format!("kubectl get csidriverdeployment {rest} -o yaml"),
        },
        _ => format!("oc get clustercsidriver {csi_name} -o yaml"),
    };
    broken(
        "Operator",
        Some(object.clone()),
        detail,
        Finding::new(
            FindingKind::OperatorDegraded,
            format!("{object}, which installs {csi_name}, reports a failure"),
            problems,
            format!(
                "fix what the condition's message names; `{look}` shows every condition, and the \
                 operator retries on its own once it is fixed"
            ),
        ),
    )
}

/// The controller pods' link: fine when one is running and ready (they elect a leader).
/// `extra` is evidence from the volume's side (e.g. an ExternalProvisioning Event) that the
/// finding carries along.
pub fn controller_link(snap: &Snapshot, csi_name: &str, extra: Vec<Evidence>) -> Checked {
    let facts = snap.driver_facts(csi_name);
    if facts.is_some_and(|facts| !facts.has_controller) {
        return not_applicable("Controller", None, format!("{csi_name} has no controller"));
    }
    let Some(pods) = snap.driver_pods(csi_name) else {
        return not_checked(
            "Controller",
            None,
            format!("the pods of {csi_name} were not read"),
        );
    };
    let operator = operator_problems(snap, csi_name)
        .map(|(_, problems)| problems)
        .unwrap_or_default();
    let Some(first) = pods.controller.first() else {
        if facts.is_none() {
            return not_checked(
                "Controller",
                None,
                format!(
                    "no controller pods of {csi_name} found, and the catalogue does not say whether it has any"
                ),
            );
        }
        let mut evidence = extra;
        evidence.extend(operator);
        return broken(
            "Controller",
            None,
            "no controller pods".to_owned(),
            Finding::new(
                FindingKind::DriverControllerNotRunning,
                format!("the controller of {csi_name} has no pods"),
                evidence,
                format!(
                    "the controller Deployment of {csi_name} runs no pods: see why with `kubectl \
                     describe deployment` on it (replicas, quota, events), and check the \
                     operator that installs the driver"
                ),
            ),
        );
    };
    let healthy: Vec<&Pod> = pods
        .controller
        .iter()
        .filter(|pod| pod_trouble(snap, pod).is_none())
        .collect();
    let object =
        |pod: &Pod| object_name("Pod", namespace_of(&pod.metadata), name_of(&pod.metadata));
    if let Some(running) = healthy.first() {
        return ok(
            "Controller",
            Some(object(running)),
            format!(
                "{}/{} controller pods running and ready{}",
                healthy.len(),
                pods.controller.len(),
                restarts(running)
            ),
        );
    }
    let trouble = pods
        .controller
        .iter()
        .find_map(|pod| pod_trouble(snap, pod).map(|trouble| (pod, trouble)));
    let (pod, trouble) = match trouble {
        Some((pod, trouble)) => (pod, trouble),
        None => (
            first,
            evidence::Trouble {
                summary: "not ready".to_owned(),
                evidence: Vec::new(),
                fix: String::new(),
            },
        ),
    };
    let mut evidence = trouble.evidence;
    evidence.extend(extra);
    evidence.extend(operator);
    broken(
        "Controller",
        Some(object(pod)),
        trouble.summary.clone(),
        Finding::new(
            FindingKind::DriverControllerNotRunning,
            format!(
                "the controller of {csi_name} is not running: {}",
                trouble.summary
            ),
            evidence,
            trouble.fix,
        ),
    )
}

fn restarts(pod: &Pod) -> String {
    let total: i32 = pod
        .status
        .iter()
        .flat_map(|status| status.container_statuses.iter().flatten())
        .map(|container| container.restart_count)
        .sum();
    if total > 0 {
        format!(" ({} restarted {total} times)", name_of(&pod.metadata))
    } else {
        String::new()
    }
}

/// The driver's node pod on `node`.
pub fn node_pod<'a>(snap: &'a Snapshot, csi_name: &str, node: &str) -> Option<&'a Pod> {
    snap.driver_pods(csi_name)?
        .node
        .iter()
        .find(|pod| pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) == Some(node))
}

/// The node pod's link on `node`: broken only when it exists and is in trouble (its absence
/// shows in the CSINode link).
pub fn node_pod_link(snap: &Snapshot, csi_name: &str, node: &str) -> Checked {
    if snap.driver_pods(csi_name).is_none() {
        return not_checked(
            "NodePlugin",
            None,
            format!("the pods of {csi_name} were not read"),
        );
    }
    let Some(pod) = node_pod(snap, csi_name, node) else {
        return not_checked(
            "NodePlugin",
            None,
            format!("no node pod of {csi_name} on node {node}"),
        );
    };
    let object = Some(object_name(
        "Pod",
        namespace_of(&pod.metadata),
        name_of(&pod.metadata),
    ));
    match pod_trouble(snap, pod) {
        None => ok(
            "NodePlugin",
            object,
            format!("running and ready on node {node}{}", restarts(pod)),
        ),
        Some(trouble) => {
            let mut evidence = trouble.evidence;
            evidence.extend(
                operator_problems(snap, csi_name)
                    .map(|(_, problems)| problems)
                    .unwrap_or_default(),
            );
            broken(
                "NodePlugin",
                object,
                trouble.summary.clone(),
                Finding::new(
                    FindingKind::DriverNodeNotRunning,
                    format!(
                        "the node plugin of {csi_name} on node {node} is not running: {}",
                        trouble.summary
                    ),
                    evidence,
                    trouble.fix,
                ),
            )
        }
    }
}

/// The CSINode link: the driver registered on `node`, with its topology keys and volume limit.
pub fn csi_node_link(snap: &Snapshot, csi_name: &str, node: &str) -> Checked {
    let object = Some(object_name("CSINode", "", node));
    let registered = snap
        .csi_node(node)
        .and_then(|csi_node| csi_node.spec.drivers.iter().find(|d| d.name == csi_name));
    if let Some(driver) = registered {
        let keys = driver
            .topology_keys
            .as_deref()
            .map(|keys| keys.join(", "))
            .unwrap_or_default();
        let attached = snap
            .volume_attachments
            .iter()
            .filter(|va| va.spec.attacher == csi_name && va.spec.node_name == node)
            .count();
        let limit = driver
            .allocatable
            .as_ref()
            .and_then(|allocatable| allocatable.count)
            .map(|count| format!(", {attached} of {count} attachable volumes used"))
            .unwrap_or_default();
        let missing_labels: Vec<&str> = driver
            .topology_keys
            .iter()
            .flatten()
            .filter(|key| {
                snap.node(node).is_some_and(|n| {
                    n.metadata
                        .labels
                        .as_ref()
                        .is_none_or(|labels| !labels.contains_key(key.as_str()))
                })
            })
            .map(String::as_str)
            .collect();
        let missing = if missing_labels.is_empty() {
            String::new()
        } else {
            format!(
                "; the Node lacks the topology labels {}",
                missing_labels.join(", ")
            )
        };
        return ok(
            "CSINode",
            object,
            format!(
                "{csi_name} registered (node ID {}, topology keys [{keys}]{limit}){missing}",
                driver.node_id
            ),
        );
    }
    let mut evidence = Vec::new();
    match snap.csi_node(node) {
        Some(csi_node) => {
            let names: Vec<String> = csi_node
                .spec
                .drivers
                .iter()
                .map(|d| d.name.clone())
                .collect();
            evidence.push(Evidence::new(
                object_name("CSINode", "", node),
                "spec.drivers".to_owned(),
                format!("drivers registered: {}", one_of(&names)),
            ));
        }
        None => evidence.push(Evidence::new(
            object_name("CSINode", "", node),
            "GET".to_owned(),
            format!("csinodes.storage.k8s.io \"{node}\" not found"),
        )),
    }
    let fix = match node_pod(snap, csi_name, node) {
        Some(pod) => {
            let pod_object =
                object_name("Pod", namespace_of(&pod.metadata), name_of(&pod.metadata));
            let phase = pod
                .status
                .as_ref()
                .and_then(|status| status.phase.clone())
                .unwrap_or_else(|| "Unknown".to_owned());
            evidence.push(Evidence::new(pod_object, "status.phase".to_owned(), phase));
            format!(
                "the node pod {} runs but has not registered {csi_name} with the kubelet: read \
                 `kubectl logs -n {} {} -c csi-node-driver-registrar`; the DaemonSet's \
                 registration directory must be the kubelet's (/var/lib/kubelet/plugins_registry)",
                name_of(&pod.metadata),
                namespace_of(&pod.metadata),
                name_of(&pod.metadata)
            )
        }
        None if snap.driver_pods(csi_name).is_some() => {
            evidence.push(Evidence::new(
                format!("DaemonSet of {csi_name}"),
                "pods by node".to_owned(),
                format!("no node pod of {csi_name} runs on node {node}"),
            ));
            format!(
                "the node DaemonSet of {csi_name} has no pod on node {node}: compare its \
                 spec.template.spec.nodeSelector and tolerations with the node's labels and \
                 taints (`kubectl describe node {node}`)"
            )
        }
        None => format!(
            "check that the node DaemonSet of {csi_name} runs a pod on node {node} and that its \
             csi-node-driver-registrar registered it"
        ),
    };
    broken(
        "CSINode",
        object,
        format!("{csi_name} is not registered on node {node}"),
        Finding::new(
            FindingKind::DriverNotRegistered,
            format!("the driver {csi_name} is not registered on node {node}"),
            evidence,
            fix,
        ),
    )
}

/// The Node link: the node exists and is Ready.
pub fn node_link(snap: &Snapshot, node: &str) -> Checked {
    let object = Some(object_name("Node", "", node));
    // Every Node is read, so one missing from the snapshot is gone (deleted, or a name that
    // never registered): nothing there will run, attach or mount anything.
    let Some(found) = snap.node(node) else {
        return broken(
            "Node",
            object.clone(),
            "not found".to_owned(),
            Finding::new(
                FindingKind::NodeNotReady,
                format!("node {node} does not exist"),
                vec![Evidence::new(
                    object_name("Node", "", node),
                    "GET".to_owned(),
                    format!("nodes \"{node}\" not found"),
                )],
                format!(
                    "node {node} was deleted or never joined the cluster (`kubectl get nodes`): \
                     a pod bound to it never runs; delete the pod so that its owner recreates \
                     it on a node that exists (a claim's volume.kubernetes.io/selected-node \
                     naming it is cleared by the provisioner, and the scheduler picks again)"
                ),
            ),
        );
    };
    let ready = found
        .status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .find(|condition| condition.type_ == "Ready");
    match ready {
        Some(condition) if condition.status == "True" => ok("Node", object, "Ready".to_owned()),
        Some(condition) => broken(
            "Node",
            object,
            format!("Ready={}", condition.status),
            Finding::new(
                FindingKind::NodeNotReady,
                format!("node {node} is not Ready"),
                vec![Evidence::new(
                    object_name("Node", "", node),
                    format!(
                        "condition Ready={}, reason {}",
                        condition.status,
                        condition.reason.as_deref().unwrap_or_default()
                    ),
                    condition.message.clone().unwrap_or_default(),
                )],
                format!(
                    "the kubelet of node {node} does not report Ready (`kubectl describe node \
                     {node}`); volumes cannot be mounted there. If the node is gone for good, \
                     delete the Node object (or taint it node.kubernetes.io/out-of-service) so \
                     its volumes are detached and its pods move"
                ),
            ),
        ),
        None => not_checked("Node", object, "no Ready condition yet".to_owned()),
    }
}
