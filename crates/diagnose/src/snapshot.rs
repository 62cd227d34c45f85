//! What a diagnosis reads: every object the gatherer read from the cluster, the driver
//! catalogue's facts and the time, as plain data ([`Snapshot`]). Also the lookups the rules
//! share (a claim by name, the pods that use a claim, the Events of an object), and what the
//! gatherer must read for a subject ([`reads`]).

use std::collections::{BTreeMap, BTreeSet};

use api::csidriver_v1alpha1::CSIDriverDeployment;
use api::operator_v1::ClusterCSIDriver;
use csi_kit::DriverDef;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Everything the gatherer read. A list holds what was read, nothing more: an object missing
/// from it is taken as absent from the cluster, so the gatherer reads every kind the subject
/// needs ([`reads`]). Unknown fields of a fixture are refused so a typo cannot hide an object.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Snapshot {
    /// When the objects were read; ages are measured from it.
    pub now: Time,
    /// PersistentVolumeClaims of the subject's namespace.
    #[serde(default)]
    pub claims: Vec<PersistentVolumeClaim>,
    /// Pods of the subject's namespace (the consumers of its claims).
    #[serde(default)]
    pub pods: Vec<Pod>,
    /// Every StorageClass.
    #[serde(default)]
    pub storage_classes: Vec<StorageClass>,
    /// Every CSIDriver.
    #[serde(default)]
    pub csi_drivers: Vec<CSIDriver>,
    /// Every CSINode.
    #[serde(default)]
    pub csi_nodes: Vec<CSINode>,
    /// Every Node.
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// The PersistentVolumes of the subject's claims (or every one).
    #[serde(default)]
    pub volumes: Vec<PersistentVolume>,
    /// Every VolumeAttachment.
    #[serde(default)]
    pub volume_attachments: Vec<VolumeAttachment>,
    /// core/v1 Events of the claims, their pods and the driver's pods.
    #[serde(default)]
    pub events: Vec<Event>,
    /// The pods of each driver involved.
    #[serde(default)]
    pub driver_pods: Vec<DriverPods>,
    /// The last log lines of the driver's containers that are not running well.
    #[serde(default)]
    pub logs: Vec<ContainerLog>,
    /// Every ClusterCSIDriver (OpenShift's driver operators).
    #[serde(default)]
    pub cluster_csi_drivers: Vec<ClusterCSIDriver>,
    /// Every CSIDriverDeployment.
    #[serde(default)]
    pub csi_driver_deployments: Vec<CSIDriverDeployment>,
    /// The catalogue's facts about each driver involved.
    #[serde(default)]
    pub drivers: Vec<DriverFacts>,
}

/// The pods of one CSI driver, as its installer labels them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriverPods {
    /// The driver's CSI name.
    pub csi_name: String,
    /// The controller Deployment's pods.
    #[serde(default)]
    pub controller: Vec<Pod>,
    /// The node DaemonSet's pods.
    #[serde(default)]
    pub node: Vec<Pod>,
}

/// The last lines a container logged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerLog {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container.
    pub container: String,
    /// From the container's previous run (`kubectl logs --previous`), as for a crash loop.
    #[serde(default)]
    pub previous: bool,
    /// Oldest first.
    #[serde(default)]
    pub lines: Vec<String>,
}

/// Who installed a driver, and so whose status to read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum InstalledBy {
    /// OpenShift's driver operator for `ClusterCSIDriver/<name>`.
    ClusterCSIDriver {
        /// The ClusterCSIDriver's name (the CSI name).
        name: String,
    },
    /// A user's CSIDriverDeployment.
    CSIDriverDeployment {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// What the driver catalogue knows about a driver: what it can provision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriverFacts {
    /// The CSI name.
    pub csi_name: String,
    /// The smallest volume it creates, in bytes.
    #[serde(default)]
    pub min_bytes: Option<u64>,
    /// The largest volume it creates, in bytes.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// The access modes it offers (`ReadWriteOnce`, ...); empty when not known.
    #[serde(default)]
    pub access_modes: Vec<String>,
    /// The volume modes it offers (`Filesystem`, `Block`); empty when not known.
    #[serde(default)]
    pub volume_modes: Vec<String>,
    /// The access modes it offers with each volume mode, where they differ between volume
    /// modes (AWS EBS offers `ReadWriteMany`, io2 Multi-Attach, with `Block` only); a volume
    /// mode not listed offers `access_modes`.
    #[serde(default)]
    pub access_modes_by_volume_mode: BTreeMap<String, Vec<String>>,
    /// Whether it runs a controller Deployment (some drivers have only node pods).
    #[serde(default = "yes")]
    pub has_controller: bool,
    /// Who installed it on this cluster, when known.
    #[serde(default)]
    pub installed_by: Option<InstalledBy>,
}

fn yes() -> bool {
    true
}

impl DriverFacts {
    /// Facts with only the name: nothing known about sizes or modes, a controller expected.
    pub fn named(csi_name: &str) -> Self {
        DriverFacts {
            csi_name: csi_name.to_owned(),
            min_bytes: None,
            max_bytes: None,
            access_modes: Vec::new(),
            volume_modes: Vec::new(),
            access_modes_by_volume_mode: BTreeMap::new(),
            has_controller: true,
            installed_by: None,
        }
    }

    /// What the driver catalogue says `def` provisions (its table's `volumes`); what the table
    /// leaves out stays unknown. Access modes are kept by volume mode only where they differ
    /// between volume modes, so a finding names the volume mode only where it matters.
    pub fn of_catalogue(def: &DriverDef) -> Self {
        let mut facts = DriverFacts::named(&def.name);
        let Some(volumes) = &def.volumes else {
            return facts;
        };
        facts.min_bytes = volumes.min_bytes();
        facts.max_bytes = volumes.max_bytes();
        facts.volume_modes = volumes.volume_modes();
        facts.access_modes = volumes.all_access_modes();
        let as_set = |modes: &Vec<String>| modes.iter().cloned().collect::<BTreeSet<String>>();
        let mut sets = volumes.access_modes.values().map(as_set);
        let first = sets.next();
        if sets.any(|set| Some(set) != first) {
            facts.access_modes_by_volume_mode = volumes
                .access_modes
                .iter()
                .map(|(volume_mode, access_modes)| {
                    let offered = facts
                        .access_modes
                        .iter()
                        .filter(|mode| access_modes.contains(mode))
                        .cloned()
                        .collect();
                    (volume_mode.clone(), offered)
                })
                .collect();
        }
        facts
    }

    /// The access modes it offers with `volume_mode`; empty when not known.
    pub fn access_modes_with(&self, volume_mode: &str) -> &[String] {
        self.access_modes_by_volume_mode
            .get(volume_mode)
            .unwrap_or(&self.access_modes)
    }
}

/// The finalizer that keeps a claim while pods use it.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// The annotation that marks the default StorageClass.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The annotation the pre-GA API used for the same.
pub const BETA_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// `metadata.name`, empty when unset.
pub fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// `metadata.namespace`, empty when unset.
pub fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// `Kind namespace/name`, or `Kind name` without a namespace.
pub fn object_name(kind: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

/// The name of the claim a pod volume uses: its own for `persistentVolumeClaim`,
/// `<pod>-<volume>` for a generic ephemeral volume.
pub fn claims_of(pod: &Pod) -> Vec<(String, String)> {
    let pod_name = name_of(&pod.metadata);
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(|volume| {
            if let Some(claim) = &volume.persistent_volume_claim {
                Some((volume.name.clone(), claim.claim_name.clone()))
            } else {
                volume
                    .ephemeral
                    .as_ref()
                    .map(|_| (volume.name.clone(), format!("{pod_name}-{}", volume.name)))
            }
        })
        .collect()
}

/// The newest moment an Event was seen.
pub fn event_time(event: &Event) -> Option<&Timestamp> {
    event
        .series
        .as_ref()
        .and_then(|series| series.last_observed_time.as_ref())
        .map(|time| &time.0)
        .or(event.last_timestamp.as_ref().map(|time| &time.0))
        .or(event.event_time.as_ref().map(|time| &time.0))
        .or(event.first_timestamp.as_ref().map(|time| &time.0))
        .or(event
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|time| &time.0))
}

/// Who reported an Event: `reportingComponent`, else `source.component`.
pub fn event_reporter(event: &Event) -> &str {
    event
        .reporting_component
        .as_deref()
        .filter(|component| !component.is_empty())
        .or(event
            .source
            .as_ref()
            .and_then(|source| source.component.as_deref()))
        .unwrap_or_default()
}

impl Snapshot {
    /// An empty snapshot taken at `now`.
    pub fn new(now: Time) -> Self {
        Snapshot {
            now,
            claims: Vec::new(),
            pods: Vec::new(),
            storage_classes: Vec::new(),
            csi_drivers: Vec::new(),
            csi_nodes: Vec::new(),
            nodes: Vec::new(),
            volumes: Vec::new(),
            volume_attachments: Vec::new(),
            events: Vec::new(),
            driver_pods: Vec::new(),
            logs: Vec::new(),
            cluster_csi_drivers: Vec::new(),
            csi_driver_deployments: Vec::new(),
            drivers: Vec::new(),
        }
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims.iter().find(|claim| {
            namespace_of(&claim.metadata) == namespace && name_of(&claim.metadata) == name
        })
    }

    /// The pod `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods
            .iter()
            .find(|pod| namespace_of(&pod.metadata) == namespace && name_of(&pod.metadata) == name)
    }

    /// The pods that use claim `namespace/name`, by name.
    pub fn pods_using(&self, namespace: &str, claim: &str) -> Vec<&Pod> {
        let mut pods: Vec<&Pod> = self
            .pods
            .iter()
            .filter(|pod| namespace_of(&pod.metadata) == namespace)
            .filter(|pod| claims_of(pod).iter().any(|(_, used)| used == claim))
            .collect();
        pods.sort_by_key(|pod| name_of(&pod.metadata));
        pods
    }

    /// The StorageClass `name`.
    pub fn storage_class(&self, name: &str) -> Option<&StorageClass> {
        self.storage_classes
            .iter()
            .find(|class| name_of(&class.metadata) == name)
    }

    /// The classes marked default, newest first (the one Kubernetes gives a claim).
    pub fn default_classes(&self) -> Vec<&StorageClass> {
        let mut defaults: Vec<&StorageClass> = self
            .storage_classes
            .iter()
            .filter(|class| {
                class
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|annotations| {
                        [DEFAULT_CLASS_ANNOTATION, BETA_DEFAULT_CLASS_ANNOTATION]
                            .iter()
                            .any(|key| annotations.get(*key).is_some_and(|v| v == "true"))
                    })
            })
            .collect();
        defaults.sort_by(|a, b| {
            b.metadata
                .creation_timestamp
                .cmp(&a.metadata.creation_timestamp)
                .then_with(|| name_of(&a.metadata).cmp(name_of(&b.metadata)))
        });
        defaults
    }

    /// The CSIDriver `name`.
    pub fn csi_driver(&self, name: &str) -> Option<&CSIDriver> {
        self.csi_drivers
            .iter()
            .find(|driver| name_of(&driver.metadata) == name)
    }

    /// The CSINode of node `name`.
    pub fn csi_node(&self, name: &str) -> Option<&CSINode> {
        self.csi_nodes
            .iter()
            .find(|node| name_of(&node.metadata) == name)
    }

    /// The Node `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|node| name_of(&node.metadata) == name)
    }

    /// The PersistentVolume `name`.
    pub fn volume(&self, name: &str) -> Option<&PersistentVolume> {
        self.volumes
            .iter()
            .find(|volume| name_of(&volume.metadata) == name)
    }

    /// The VolumeAttachments of PersistentVolume `name`.
    pub fn attachments_of(&self, volume: &str) -> Vec<&VolumeAttachment> {
        self.volume_attachments
            .iter()
            .filter(|attachment| {
                attachment.spec.source.persistent_volume_name.as_deref() == Some(volume)
            })
            .collect()
    }

    /// The Events about `kind namespace/name`, newest first.
    pub fn events_of(&self, kind: &str, namespace: &str, name: &str) -> Vec<&Event> {
        let mut events: Vec<&Event> = self
            .events
            .iter()
            .filter(|event| {
                let about = &event.involved_object;
                about.kind.as_deref() == Some(kind)
                    && about.namespace.as_deref().unwrap_or_default() == namespace
                    && about.name.as_deref() == Some(name)
            })
            .collect();
        events.sort_by(|a, b| event_time(b).cmp(&event_time(a)));
        events
    }

    /// The pods of driver `csi_name`, when the gatherer read them.
    pub fn driver_pods(&self, csi_name: &str) -> Option<&DriverPods> {
        self.driver_pods
            .iter()
            .find(|pods| pods.csi_name == csi_name)
    }

    /// The catalogue's facts about driver `csi_name`.
    pub fn driver_facts(&self, csi_name: &str) -> Option<&DriverFacts> {
        self.drivers.iter().find(|facts| facts.csi_name == csi_name)
    }

    /// The last log lines of a container: the previous run's first, as a crash loop needs them.
    pub fn log(&self, namespace: &str, pod: &str, container: &str) -> Option<&ContainerLog> {
        let mut logs: Vec<&ContainerLog> = self
            .logs
            .iter()
            .filter(|log| {
                log.namespace == namespace && log.pod == pod && log.container == container
            })
            .collect();
        logs.sort_by_key(|log| !log.previous);
        logs.into_iter().next()
    }

    /// Seconds from `time` to the snapshot's `now` (zero for the future).
    pub fn age_seconds(&self, time: &Timestamp) -> i64 {
        self.now
            .0
            .as_second()
            .saturating_sub(time.as_second())
            .max(0)
    }
}

/// A duration as `kubectl get` prints an age: `45s`, `12m`, `3h`, `5d`.
pub fn format_age(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// One kind of object the gatherer must read, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Read {
    /// The [`Snapshot`] field it fills.
    pub field: &'static str,
    /// What to list, e.g. `PersistentVolumeClaims in the namespace`.
    pub what: &'static str,
}

/// The subject of a diagnosis, as the command line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `diagnose pvc -n NAMESPACE NAME`.
    Claim,
    /// `diagnose pod -n NAMESPACE NAME`.
    Pod,
    /// `diagnose driver NAME`.
    Driver,
}

/// What the gatherer must read for a subject, in the order it is needed. Listing a whole kind
/// where a name would do is fine; leaving a kind out makes its objects look absent.
pub fn reads(target: &Target) -> Vec<Read> {
    let volume_side = [
        Read {
            field: "claims",
            what: "PersistentVolumeClaims in the namespace",
        },
        Read {
            field: "pods",
            what: "Pods in the namespace",
        },
        Read {
            field: "storageClasses",
            what: "every StorageClass",
        },
        Read {
            field: "volumes",
            what: "the PersistentVolumes the claims name (spec.volumeName), or every one",
        },
        Read {
            field: "volumeAttachments",
            what: "every VolumeAttachment",
        },
        Read {
            field: "events",
            what: "Events in the namespace (the claims' and the pods'), and in the driver pods' \
                   namespaces",
        },
    ];
    let driver_side = [
        Read {
            field: "csiDrivers",
            what: "every CSIDriver",
        },
        Read {
            field: "csiNodes",
            what: "every CSINode",
        },
        Read {
            field: "nodes",
            what: "every Node",
        },
        Read {
            field: "drivers",
            what: "the catalogue's DriverFacts of each driver named by a class, a volume or the \
                   command line",
        },
        Read {
            field: "driverPods",
            what: "each such driver's controller and node pods (by the installer's labels)",
        },
        Read {
            field: "logs",
            what: "the last lines of each driver container that is waiting, terminated or \
                   restarted (--previous when it restarted)",
        },
        Read {
            field: "clusterCsiDrivers",
            what: "the ClusterCSIDriver of each such driver, if the API is served",
        },
        Read {
            field: "csiDriverDeployments",
            what: "CSIDriverDeployments that name such a driver, if the API is served",
        },
    ];
    match target {
        Target::Claim | Target::Pod => volume_side.into_iter().chain(driver_side).collect(),
        Target::Driver => driver_side.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(format_age(45), "45s");
        assert_eq!(format_age(600), "10m");
        assert_eq!(format_age(3 * 3600), "3h");
        assert_eq!(format_age(3 * 86400), "3d");
    }

    #[test]
    fn a_driver_subject_reads_no_claims() {
        let fields: Vec<&str> = reads(&Target::Driver).iter().map(|r| r.field).collect();
        assert!(!fields.contains(&"claims"));
        assert!(fields.contains(&"csiNodes"));
        let fields: Vec<&str> = reads(&Target::Claim).iter().map(|r| r.field).collect();
        assert!(fields.contains(&"claims") && fields.contains(&"logs"));
    }

    #[test]
    fn a_fixture_with_an_unknown_field_is_refused() {
        let refused = serde_json::from_value::<Snapshot>(serde_json::json!({
            "now": "2026-01-01T00:00:00Z",
            "storageClass": []
        }));
        assert!(refused.is_err());
        let read = serde_json::from_value::<Snapshot>(serde_json::json!({
            "now": "2026-01-01T00:00:00Z",
            "storageClasses": []
        }));
        assert!(read.is_ok());
    }
}
