//! `storage-operator diagnose pvc|pod|driver`: reads from the cluster what the rules of crate
//! `diagnose` need for the subject (`diagnose::reads`), hands them the snapshot and prints the
//! report as text, JSON or YAML. It only reads (`get` and `list`; `--print-rbac` prints the
//! ClusterRole that allows exactly that).
//!
//! What must be read to judge the subject is required: a refusal there is an error that names
//! the verb, the resource and the RBAC it needs. What only adds detail (the driver's pods and
//! their logs, an operator's status, APIs that plain Kubernetes does not serve) is optional: a
//! refusal or an API that is not served leaves it out, the link it feeds says "not checked",
//! and a note on standard error says why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use api::csidriver_v1alpha1::CSIDriverDeployment;
use api::operator_v1::ClusterCSIDriver;
use diagnose::{ContainerLog, DriverFacts, DriverPods, InstalledBy, Snapshot, Target};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    Container, Event, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use crate::cli::{DiagnoseArgs, DiagnoseCommon, DiagnoseOutput, DiagnoseTarget};

/// The exit code of a diagnosis that found a problem (0: none; 2: the diagnosis failed).
const EXIT_FINDING: u8 = 1;
/// The exit code of a diagnosis that could not be made: 1 says a problem was found.
pub const EXIT_ERROR: u8 = 2;

/// How many log lines of a troubled driver container go into the evidence.
const LOG_LINES: i64 = 20;

/// The name of the ClusterRole `--print-rbac` prints.
pub const CLUSTER_ROLE: &str = "storage-operator-diagnose";

/// Container names (or image names) of the CSI sidecars a driver's controller Deployment runs:
/// how a controller is recognised next to a node DaemonSet when no catalogue entry or
/// CSIDriverDeployment says where it is.
const CONTROLLER_SIDECARS: [&str; 4] = [
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
];

/// One kind of object diagnose reads: its API group and resource, and the verbs it uses.
struct Resource {
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
}

/// Everything diagnose reads, for the ClusterRole and for the RBAC an error names.
const READS: &[Resource] = &[
    Resource {
        group: "",
        resource: "persistentvolumeclaims",
        verbs: &["get", "list"],
    },
    Resource {
        group: "",
        resource: "pods",
        verbs: &["get", "list"],
    },
    Resource {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
    },
    Resource {
        group: "",
        resource: "persistentvolumes",
        verbs: &["get", "list"],
    },
    Resource {
        group: "",
        resource: "nodes",
        verbs: &["get", "list"],
    },
    Resource {
        group: "",
        resource: "events",
        verbs: &["get", "list"],
    },
    Resource {
        group: "storage.k8s.io",
        resource: "storageclasses",
        verbs: &["get", "list"],
    },
    Resource {
        group: "storage.k8s.io",
        resource: "csidrivers",
        verbs: &["get", "list"],
    },
    Resource {
        group: "storage.k8s.io",
        resource: "csinodes",
        verbs: &["get", "list"],
    },
    Resource {
        group: "storage.k8s.io",
        resource: "volumeattachments",
        verbs: &["get", "list"],
    },
    Resource {
        group: "apps",
        resource: "deployments",
        verbs: &["get", "list"],
    },
    Resource {
        group: "apps",
        resource: "daemonsets",
        verbs: &["get", "list"],
    },
    Resource {
        group: "operator.openshift.io",
        resource: "clustercsidrivers",
        verbs: &["get", "list"],
    },
    Resource {
        group: "csidriver.storage.openshift.io",
        resource: "csidriverdeployments",
        verbs: &["get", "list"],
    },
];

/// The RBAC a read of `resource` needs, as a sentence for an error.
fn rbac_for(resource: &str) -> String {
    match READS.iter().find(|r| r.resource == resource) {
        Some(r) => format!(
            "verbs [{}] on {} (apiGroup \"{}\")",
            r.verbs.join(", "),
            r.resource,
            r.group
        ),
        None => format!("get and list on {resource}"),
    }
}

/// The ClusterRole that allows every read of diagnose and nothing else.
pub fn build_cluster_role() -> ClusterRole {
    let mut by_group: BTreeMap<&str, Vec<&Resource>> = BTreeMap::new();
    for read in READS {
        by_group.entry(read.group).or_default().push(read);
    }
    let mut rules = Vec::new();
    for (group, reads) in by_group {
        // One rule per group and set of verbs, as kubectl would write it.
        let mut by_verbs: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
        for read in reads {
            by_verbs
                .entry(read.verbs.to_vec())
                .or_default()
                .push(read.resource);
        }
        for (verbs, resources) in by_verbs {
            rules.push(PolicyRule {
                api_groups: Some(vec![group.to_owned()]),
                resources: Some(resources.into_iter().map(str::to_owned).collect()),
                verbs: verbs.into_iter().map(str::to_owned).collect(),
                ..PolicyRule::default()
            });
        }
    }
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(CLUSTER_ROLE.to_owned()),
            annotations: Some(BTreeMap::from([(
                "description".to_owned(),
                "read-only: what `storage-operator diagnose` reads (get and list), nothing else"
                    .to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

/// Why a diagnosis could not be made.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    /// The identity may not make a read the diagnosis needs.
    #[error(
        "the API server refused to {what} ({message}): diagnose needs {rbac}; `storage-operator diagnose --print-rbac` prints a ClusterRole with every read it makes"
    )]
    Forbidden {
        /// E.g. `list persistentvolumeclaims in namespace app`.
        what: String,
        /// The server's message.
        message: String,
        /// The rule that allows it.
        rbac: String,
    },
    /// A read failed otherwise.
    #[error("could not {what}: {source}")]
    Read {
        /// E.g. `list persistentvolumeclaims in namespace app`.
        what: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
}

/// One read: what it is for the messages, and whether the diagnosis can do without it.
struct ReadOf<'a> {
    verb: &'static str,
    resource: &'static str,
    namespace: Option<&'a str>,
    optional: bool,
}

impl ReadOf<'_> {
    fn what(&self) -> String {
        match self.namespace {
            Some(namespace) => format!("{} {} in namespace {namespace}", self.verb, self.resource),
            None => format!("{} {}", self.verb, self.resource),
        }
    }
}

/// The client and the notes on optional reads that were left out.
struct Reader {
    client: Client,
    notes: Vec<String>,
}

/// An error's HTTP status, when the API server answered.
fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

impl Reader {
    /// What to do with a failed read: a note (optional reads, and APIs that are not served),
    /// or the error.
    fn failed(&mut self, read: &ReadOf<'_>, error: kube::Error) -> Result<(), GatherError> {
        let code = status_code(&error);
        if read.optional {
            let why = match code {
                Some(403) => format!("forbidden; it needs {}", rbac_for(read.resource)),
                Some(404) if read.verb == "list" => "the API is not served here".to_owned(),
                Some(404) => "not found".to_owned(),
                _ => error.to_string(),
            };
            self.notes
                .push(format!("not checked: {}: {why}", read.what()));
            return Ok(());
        }
        match (code, error) {
            (Some(403), kube::Error::Api(status)) => Err(GatherError::Forbidden {
                what: read.what(),
                message: status.message.clone(),
                rbac: rbac_for(read.resource),
            }),
            (_, source) => Err(GatherError::Read {
                what: read.what(),
                source,
            }),
        }
    }

    async fn list<K>(
        &mut self,
        api: Api<K>,
        params: &ListParams,
        read: ReadOf<'_>,
    ) -> Result<Option<Vec<K>>, GatherError>
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        match api.list(params).await {
            Ok(list) => Ok(Some(list.items)),
            Err(error) => self.failed(&read, error).map(|()| None),
        }
    }

    /// A GET by name: `Ok(None)` when the object does not exist (or the API is not served).
    async fn get<K>(
        &mut self,
        api: Api<K>,
        name: &str,
        read: ReadOf<'_>,
    ) -> Result<Option<K>, GatherError>
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        match api.get(name).await {
            Ok(object) => Ok(Some(object)),
            Err(error) if status_code(&error) == Some(404) => Ok(None),
            Err(error) => self.failed(&read, error).map(|()| None),
        }
    }
}

fn required<'a>(
    verb: &'static str,
    resource: &'static str,
    namespace: Option<&'a str>,
) -> ReadOf<'a> {
    ReadOf {
        verb,
        resource,
        namespace,
        optional: false,
    }
}

fn optional<'a>(
    verb: &'static str,
    resource: &'static str,
    namespace: Option<&'a str>,
) -> ReadOf<'a> {
    ReadOf {
        verb,
        resource,
        namespace,
        optional: true,
    }
}

/// What a diagnosis read, and what it left out.
pub struct Gathered {
    /// The objects, for the rules.
    pub snapshot: Snapshot,
    /// One line per optional read left out (`not checked: ...`).
    pub notes: Vec<String>,
}

/// The subject of a diagnosis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// Claim, pod or driver.
    pub target: Target,
    /// The namespace of a claim or pod.
    pub namespace: String,
    /// The object's name; a driver's CSI name.
    pub name: String,
}

/// Reads what the rules need for `subject` (`diagnose::reads`).
pub async fn gather(client: Client, subject: &Subject) -> Result<Gathered, GatherError> {
    let mut reader = Reader {
        client,
        notes: Vec::new(),
    };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut snap = Snapshot::new(now);
    let drivers = match subject.target {
        Target::Claim | Target::Pod => {
            match volume_side(&mut reader, &mut snap, subject).await? {
                Some(drivers) => drivers,
                // The subject does not exist: the rules say so with what the namespace holds.
                None => {
                    return Ok(Gathered {
                        snapshot: snap,
                        notes: reader.notes,
                    });
                }
            }
        }
        Target::Driver => BTreeSet::from([subject.name.clone()]),
    };
    driver_side(
        &mut reader,
        &mut snap,
        &drivers,
        subject.target == Target::Driver,
    )
    .await?;
    Ok(Gathered {
        snapshot: snap,
        notes: reader.notes,
    })
}

/// The claims, pods, classes, volumes, attachments and Events of a claim's or a pod's chain.
/// Returns the CSI drivers involved, or `None` when the subject does not exist.
async fn volume_side(
    reader: &mut Reader,
    snap: &mut Snapshot,
    subject: &Subject,
) -> Result<Option<BTreeSet<String>>, GatherError> {
    let namespace = subject.namespace.as_str();
    let ns = Some(namespace);
    let client = reader.client.clone();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let all = ListParams::default();

    // The pods of the namespace: the consumers of its claims (and the subject pod).
    snap.pods = reader
        .list(pods, &all, required("list", "pods", ns))
        .await?
        .unwrap_or_default();
    let claim_names: Vec<String> = match subject.target {
        Target::Pod => match snap.pod(namespace, &subject.name) {
            Some(pod) => diagnose_claims_of(pod),
            None => return Ok(None),
        },
        _ => vec![subject.name.clone()],
    };
    for name in &claim_names {
        if let Some(claim) = reader
            .get(
                claims.clone(),
                name,
                required("get", "persistentvolumeclaims", ns),
            )
            .await?
        {
            snap.claims.push(claim);
        }
    }
    if subject.target == Target::Claim && snap.claims.is_empty() {
        // For the finding's list of the claims that do exist.
        snap.claims = reader
            .list(claims, &all, required("list", "persistentvolumeclaims", ns))
            .await?
            .unwrap_or_default();
        return Ok(None);
    }

    snap.storage_classes = reader
        .list(
            Api::<StorageClass>::all(client.clone()),
            &all,
            required("list", "storageclasses", None),
        )
        .await?
        .unwrap_or_default();
    let volume_names: BTreeSet<String> = snap
        .claims
        .iter()
        .filter_map(|claim| claim.spec.as_ref()?.volume_name.clone())
        .filter(|volume| !volume.is_empty())
        .collect();
    for volume in &volume_names {
        if let Some(found) = reader
            .get(
                Api::<PersistentVolume>::all(client.clone()),
                volume,
                required("get", "persistentvolumes", None),
            )
            .await?
        {
            snap.volumes.push(found);
        }
    }
    snap.volume_attachments = reader
        .list(
            Api::<VolumeAttachment>::all(client.clone()),
            &all,
            required("list", "volumeattachments", None),
        )
        .await?
        .unwrap_or_default();
    snap.events = reader
        .list(
            Api::<Event>::namespaced(client, namespace),
            &all,
            required("list", "events", ns),
        )
        .await?
        .unwrap_or_default();
    Ok(Some(drivers_of(snap)))
}

/// The claim names a pod uses, as the rules name them (generic ephemeral volumes included).
fn diagnose_claims_of(pod: &Pod) -> Vec<String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(|volume| {
            if let Some(claim) = &volume.persistent_volume_claim {
                Some(claim.claim_name.clone())
            } else {
                volume
                    .ephemeral
                    .as_ref()
                    .map(|_| format!("{pod_name}-{}", volume.name))
            }
        })
        .collect()
}

/// The CSI drivers the claims lead to: their volumes' drivers, their classes' provisioners
/// (the default class's for a claim that names none). In-tree provisioners are left out.
fn drivers_of(snap: &Snapshot) -> BTreeSet<String> {
    let mut drivers = BTreeSet::new();
    for claim in &snap.claims {
        let spec = claim.spec.as_ref();
        let class = match spec.and_then(|spec| spec.storage_class_name.as_deref()) {
            Some("") => None,
            Some(name) => snap.storage_class(name),
            None => snap.default_classes().first().copied(),
        };
        if let Some(class) = class
            && !class.provisioner.starts_with("kubernetes.io/")
        {
            drivers.insert(class.provisioner.clone());
        }
    }
    for volume in &snap.volumes {
        if let Some(csi) = volume.spec.as_ref().and_then(|spec| spec.csi.as_ref()) {
            drivers.insert(csi.driver.clone());
        }
    }
    drivers
}

/// Where a driver's pods are: their namespace and the labels of each side.
struct PodPlace {
    namespace: String,
    controller: Option<BTreeMap<String, String>>,
    node: Vec<BTreeMap<String, String>>,
}

/// The driver side of every driver in `drivers`: CSIDrivers, CSINodes and Nodes, each
/// driver's catalogue facts, who installed it, its pods, their Events and troubled logs.
async fn driver_side(
    reader: &mut Reader,
    snap: &mut Snapshot,
    drivers: &BTreeSet<String>,
    driver_subject: bool,
) -> Result<(), GatherError> {
    let client = reader.client.clone();
    let all = ListParams::default();
    snap.csi_drivers = reader
        .list(
            Api::<CSIDriver>::all(client.clone()),
            &all,
            required("list", "csidrivers", None),
        )
        .await?
        .unwrap_or_default();
    snap.csi_nodes = reader
        .list(
            Api::<CSINode>::all(client.clone()),
            &all,
            required("list", "csinodes", None),
        )
        .await?
        .unwrap_or_default();
    snap.nodes = reader
        .list(
            Api::<Node>::all(client.clone()),
            &all,
            required("list", "nodes", None),
        )
        .await?
        .unwrap_or_default();
    if drivers.is_empty() {
        return Ok(());
    }
    // Declared drivers: read once, kept for the drivers involved.
    let declared = reader
        .list(
            Api::<CSIDriverDeployment>::all(client.clone()),
            &all,
            optional("list", "csidriverdeployments", None),
        )
        .await?
        .unwrap_or_default();
    let mut daemon_sets: Option<Vec<DaemonSet>> = None;
    let mut event_namespaces = BTreeSet::new();
    for csi_name in drivers {
        let catalogue = drivers::by_name(csi_name)
            .ok()
            .filter(|def| def.name == *csi_name);
        let cluster_driver = if catalogue.is_some() || driver_subject {
            reader
                .get(
                    Api::<ClusterCSIDriver>::all(client.clone()),
                    csi_name,
                    optional("get", "clustercsidrivers", None),
                )
                .await?
        } else {
            None
        };
        let own: Vec<&CSIDriverDeployment> = declared
            .iter()
            .filter(|cd| cd.spec.driver_name == *csi_name)
            .collect();
        snap.csi_driver_deployments
            .extend(own.iter().map(|cd| (*cd).clone()));
        let has_cluster_driver = cluster_driver.is_some();
        snap.cluster_csi_drivers.extend(cluster_driver);

        let (facts, place) = match (own.first(), &catalogue) {
            (Some(cd), _) => {
                let def = csi_driver_deployment::driver_def(cd);
                let has_controller = cd.spec.driver_controller_template.is_some();
                let facts = DriverFacts {
                    has_controller,
                    installed_by: Some(InstalledBy::CSIDriverDeployment {
                        namespace: cd.metadata.namespace.clone().unwrap_or_default(),
                        name: cd.metadata.name.clone().unwrap_or_default(),
                    }),
                    ..DriverFacts::named(csi_name)
                };
                let place = PodPlace {
                    namespace: def.namespace.clone(),
                    controller: has_controller.then(|| csi_kit::names::controller_selector(&def)),
                    node: vec![csi_kit::names::node_selector(&def)],
                };
                (Some(facts), Some(place))
            }
            (None, Some(def)) => {
                // Sizes and modes as the driver's table states them.
                let facts = DriverFacts {
                    installed_by: has_cluster_driver.then(|| InstalledBy::ClusterCSIDriver {
                        name: csi_name.clone(),
                    }),
                    ..DriverFacts::of_catalogue(def)
                };
                let place = PodPlace {
                    namespace: def.namespace.clone(),
                    controller: Some(csi_kit::names::controller_selector(def)),
                    node: vec![csi_kit::names::node_selector(def)],
                };
                (Some(facts), Some(place))
            }
            (None, None) => {
                if daemon_sets.is_none() {
                    daemon_sets = Some(
                        reader
                            .list(
                                Api::<DaemonSet>::all(client.clone()),
                                &all,
                                optional("list", "daemonsets", None),
                            )
                            .await?
                            .unwrap_or_default(),
                    );
                }
                let found = match &daemon_sets {
                    Some(sets) => find_installed(reader, sets, csi_name).await?,
                    None => None,
                };
                (None, found)
            }
        };
        snap.drivers.extend(facts);
        let Some(place) = place else {
            continue;
        };
        if let Some(pods) = read_driver_pods(reader, csi_name, &place).await? {
            read_logs(reader, snap, &pods).await?;
            event_namespaces.insert(place.namespace.clone());
            snap.driver_pods.push(pods);
        }
    }
    for namespace in event_namespaces {
        if snap
            .events
            .iter()
            .any(|event| event.metadata.namespace.as_deref() == Some(namespace.as_str()))
        {
            continue;
        }
        let events = reader
            .list(
                Api::<Event>::namespaced(client.clone(), &namespace),
                &ListParams::default().fields("involvedObject.kind=Pod"),
                optional("list", "events", Some(&namespace)),
            )
            .await?
            .unwrap_or_default();
        snap.events.extend(events);
    }
    Ok(())
}

/// Whether a pod template runs driver `csi_name`: a container's argument or environment
/// names it (`--drivername=<name>`, `DRIVER_NAME=<name>`, ...).
fn runs_driver(spec: Option<&PodSpec>, csi_name: &str) -> bool {
    let names_it = |text: &str| {
        text == csi_name
            || text
                .split_once('=')
                .is_some_and(|(_, value)| value == csi_name)
    };
    containers(spec).any(|container| {
        container.args.iter().flatten().any(|arg| names_it(arg))
            || container.command.iter().flatten().any(|arg| names_it(arg))
            || container
                .env
                .iter()
                .flatten()
                .any(|env| env.value.as_deref() == Some(csi_name))
    })
}

fn containers(spec: Option<&PodSpec>) -> impl Iterator<Item = &Container> {
    spec.into_iter().flat_map(|spec| {
        spec.init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
    })
}

/// Whether a pod template runs a CSI controller sidecar.
fn runs_controller_sidecar(spec: Option<&PodSpec>) -> bool {
    containers(spec).any(|container| {
        CONTROLLER_SIDECARS.iter().any(|sidecar| {
            container.name.contains(sidecar)
                || container
                    .image
                    .as_deref()
                    .is_some_and(|image| image.contains(sidecar))
        })
    })
}

/// The pods of a driver that neither the catalogue nor a CSIDriverDeployment describes
/// (installed from its own manifests): the DaemonSets that run it, and the Deployments beside
/// them that run it or a CSI controller sidecar.
async fn find_installed(
    reader: &mut Reader,
    daemon_sets: &[DaemonSet],
    csi_name: &str,
) -> Result<Option<PodPlace>, GatherError> {
    let Some(node_set) = daemon_sets.iter().find(|set| {
        runs_driver(
            set.spec
                .as_ref()
                .and_then(|spec| spec.template.spec.as_ref()),
            csi_name,
        )
    }) else {
        return Ok(None);
    };
    let namespace = node_set.metadata.namespace.clone().unwrap_or_default();
    let selector = |labels: Option<&BTreeMap<String, String>>| labels.cloned().unwrap_or_default();
    let node: Vec<BTreeMap<String, String>> = daemon_sets
        .iter()
        .filter(|set| set.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .filter(|set| {
            runs_driver(
                set.spec
                    .as_ref()
                    .and_then(|spec| spec.template.spec.as_ref()),
                csi_name,
            )
        })
        .filter_map(|set| {
            let labels = set.spec.as_ref()?.selector.match_labels.as_ref();
            Some(selector(labels)).filter(|labels| !labels.is_empty())
        })
        .collect();
    let deployments = reader
        .list(
            Api::<Deployment>::namespaced(reader.client.clone(), &namespace),
            &ListParams::default(),
            optional("list", "deployments", Some(&namespace)),
        )
        .await?
        .unwrap_or_default();
    let controller = deployments
        .iter()
        .find(|deployment| {
            let spec = deployment
                .spec
                .as_ref()
                .and_then(|spec| spec.template.spec.as_ref());
            runs_driver(spec, csi_name) || runs_controller_sidecar(spec)
        })
        .and_then(|deployment| deployment.spec.as_ref()?.selector.match_labels.clone())
        .filter(|labels| !labels.is_empty());
    Ok(Some(PodPlace {
        namespace,
        controller,
        node,
    }))
}

fn label_selector(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The driver's controller and node pods, by their labels; `None` when they could not be read.
async fn read_driver_pods(
    reader: &mut Reader,
    csi_name: &str,
    place: &PodPlace,
) -> Result<Option<DriverPods>, GatherError> {
    let pods: Api<Pod> = Api::namespaced(reader.client.clone(), &place.namespace);
    let ns = Some(place.namespace.as_str());
    let mut driver_pods = DriverPods {
        csi_name: csi_name.to_owned(),
        ..DriverPods::default()
    };
    if let Some(labels) = &place.controller {
        let params = ListParams::default().labels(&label_selector(labels));
        match reader
            .list(pods.clone(), &params, optional("list", "pods", ns))
            .await?
        {
            Some(found) => driver_pods.controller = found,
            None => return Ok(None),
        }
    }
    for labels in &place.node {
        let params = ListParams::default().labels(&label_selector(labels));
        match reader
            .list(pods.clone(), &params, optional("list", "pods", ns))
            .await?
        {
            Some(found) => driver_pods.node.extend(found),
            None => return Ok(None),
        }
    }
    // A pod both selectors match (a driver whose two workloads share labels) is the node's.
    let node_names: BTreeSet<Option<String>> = driver_pods
        .node
        .iter()
        .map(|pod| pod.metadata.name.clone())
        .collect();
    driver_pods
        .controller
        .retain(|pod| !node_names.contains(&pod.metadata.name));
    Ok(Some(driver_pods))
}

/// The last lines of each driver container in trouble: from its previous run when it
/// restarted, else from the current one. A container that never started has none.
async fn read_logs(
    reader: &mut Reader,
    snap: &mut Snapshot,
    pods: &DriverPods,
) -> Result<(), GatherError> {
    for pod in pods.controller.iter().chain(&pods.node) {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let statuses = pod.status.iter().flat_map(|status| {
            status
                .init_container_statuses
                .iter()
                .flatten()
                .chain(status.container_statuses.iter().flatten())
        });
        for container in statuses {
            let state = container.state.as_ref();
            let waiting = state.is_some_and(|state| state.waiting.is_some());
            let terminated = state.is_some_and(|state| state.terminated.is_some());
            let running_unready = state.is_some_and(|state| state.running.is_some())
                && !container.ready
                && container.started == Some(true);
            let previous = if waiting && container.restart_count > 0 {
                // A crash loop: what the last run said before it ended.
                true
            } else if terminated || running_unready {
                false
            } else {
                // Running well, or waiting for a first start (an image pull): no log to read.
                continue;
            };
            let params = LogParams {
                container: Some(container.name.clone()),
                previous,
                tail_lines: Some(LOG_LINES),
                ..LogParams::default()
            };
            let logs: Api<Pod> = Api::namespaced(reader.client.clone(), &namespace);
            match logs.logs(&name, &params).await {
                Ok(text) => snap.logs.push(ContainerLog {
                    namespace: namespace.clone(),
                    pod: name.clone(),
                    container: container.name.clone(),
                    previous,
                    lines: text.lines().map(str::to_owned).collect(),
                }),
                Err(error) => {
                    let read = optional("get", "pods/log", Some(&namespace));
                    reader.failed(&read, error)?;
                }
            }
        }
    }
    Ok(())
}

/// Checks a name given on the command line before it goes into a request path.
fn check_name(flag: &str, name: &str) -> anyhow::Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if !valid {
        anyhow::bail!(
            "{flag} {name:?} is not a valid Kubernetes name: lower-case letters, digits, '-' and '.', at most 253 characters"
        );
    }
    Ok(())
}

/// A client of the cluster `--kubeconfig` names, else as kubectl finds it (`KUBECONFIG`,
/// `~/.kube/config`, the pod's ServiceAccount), and the namespace of its context.
async fn connect(kubeconfig: Option<&Path>) -> anyhow::Result<(Client, String)> {
    let mut config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig: reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig: using {}", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "finding the cluster: no usable kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a pod",
        )?,
    };
    let agent = format!("storage-operator/{} (diagnose)", env!("CARGO_PKG_VERSION"));
    if let Ok(value) = http::HeaderValue::from_str(&agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).context("connecting to the Kubernetes API")?;
    Ok((client, namespace))
}

/// `storage-operator diagnose`.
pub fn run(args: DiagnoseArgs) -> anyhow::Result<ExitCode> {
    if args.print_rbac {
        let role = api::yaml::to_string(&build_cluster_role())
            .context("rendering the ClusterRole as YAML")?;
        print!("{role}");
        return Ok(ExitCode::SUCCESS);
    }
    let Some(target) = args.target else {
        anyhow::bail!("diagnose needs what to diagnose: pvc, pod or driver (or --print-rbac)");
    };
    diagnose(target)
}

fn diagnose(target: DiagnoseTarget) -> anyhow::Result<ExitCode> {
    let (kind, namespace, name, common): (Target, Option<String>, String, DiagnoseCommon) =
        match target {
            DiagnoseTarget::Pvc {
                namespace,
                name,
                common,
            } => (Target::Claim, namespace, name, common),
            DiagnoseTarget::Pod {
                namespace,
                name,
                common,
            } => (Target::Pod, namespace, name, common),
            DiagnoseTarget::Driver { name, common } => (Target::Driver, None, name, common),
        };
    if let Some(namespace) = &namespace {
        check_name("--namespace", namespace)?;
    }
    check_name("NAME", &name)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (report, notes) = runtime.block_on(async {
        let (client, context_namespace) = connect(common.kubeconfig.as_deref()).await?;
        let namespace = namespace.unwrap_or(context_namespace);
        // A driver's short name from the catalogue (`gcp-pd`) stands for its CSI name.
        let name = match kind {
            Target::Driver => drivers::by_name(&name).map(|def| def.name).unwrap_or(name),
            _ => name,
        };
        let subject = Subject {
            target: kind.clone(),
            namespace: namespace.clone(),
            name: name.clone(),
        };
        let gathered = gather(client, &subject).await?;
        let snap = &gathered.snapshot;
        let report = match kind {
            Target::Claim => diagnose::diagnose_pvc(snap, &namespace, &name),
            Target::Pod => diagnose::diagnose_pod(snap, &namespace, &name),
            Target::Driver => diagnose::diagnose_driver(snap, &name),
        };
        anyhow::Ok((report, gathered.notes))
    })?;
    for note in &notes {
        eprintln!("note: {note}");
    }
    match common.output {
        DiagnoseOutput::Text => print!("{report}"),
        DiagnoseOutput::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).context("rendering the report as JSON")?
        ),
        DiagnoseOutput::Yaml => print!(
            "{}",
            api::yaml::to_string(&report).context("rendering the report as YAML")?
        ),
    }
    Ok(if report.finding.is_some() {
        ExitCode::from(EXIT_FINDING)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_role_only_reads() {
        let role = build_cluster_role();
        for rule in role.rules.iter().flatten() {
            for verb in &rule.verbs {
                assert!(matches!(verb.as_str(), "get" | "list"), "{verb}");
            }
        }
        let resources: Vec<String> = role
            .rules
            .iter()
            .flatten()
            .flat_map(|rule| rule.resources.clone().unwrap_or_default())
            .collect();
        for read in diagnose::reads(&Target::Claim) {
            let needed = match read.field {
                "claims" => "persistentvolumeclaims",
                "pods" | "driverPods" => "pods",
                "storageClasses" => "storageclasses",
                "volumes" => "persistentvolumes",
                "volumeAttachments" => "volumeattachments",
                "events" => "events",
                "csiDrivers" => "csidrivers",
                "csiNodes" => "csinodes",
                "nodes" => "nodes",
                "logs" => "pods/log",
                "clusterCsiDrivers" => "clustercsidrivers",
                "csiDriverDeployments" => "csidriverdeployments",
                "drivers" => continue,
                other => panic!("a read the ClusterRole does not know: {other}"),
            };
            assert!(resources.iter().any(|r| r == needed), "{needed}");
        }
    }

    #[test]
    fn a_refused_required_read_names_the_rbac() {
        let error = GatherError::Forbidden {
            what: "list storageclasses".to_owned(),
            message: "no".to_owned(),
            rbac: rbac_for("storageclasses"),
        };
        assert_eq!(
            error.to_string(),
            "the API server refused to list storageclasses (no): diagnose needs verbs [get, list] on storageclasses (apiGroup \"storage.k8s.io\"); `storage-operator diagnose --print-rbac` prints a ClusterRole with every read it makes"
        );
    }

    #[test]
    fn names_are_checked_before_they_reach_a_path() {
        assert!(check_name("NAME", "data-0").is_ok());
        assert!(check_name("NAME", "hostpath.csi.k8s.io").is_ok());
        for bad in ["", "a/b", "Data", "x?y", &"a".repeat(254)] {
            let error = check_name("NAME", bad).unwrap_err().to_string();
            assert!(error.starts_with("NAME "), "{error}");
        }
    }

    #[test]
    fn a_daemon_set_runs_the_driver_its_arguments_name() {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({
            "containers": [
                {"name": "plugin", "args": ["--drivername=hostpath.csi.k8s.io", "--v=5"]},
                {"name": "csi-provisioner", "image": "localhost/csi-provisioner:dev"}
            ]
        }))
        .unwrap();
        assert!(runs_driver(Some(&spec), "hostpath.csi.k8s.io"));
        assert!(!runs_driver(Some(&spec), "csi.k8s.io"));
        assert!(runs_controller_sidecar(Some(&spec)));
        assert!(!runs_controller_sidecar(None));
    }
}
