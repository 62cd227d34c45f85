//! The CSI migration audit of a driver that replaces an in-tree volume plugin (see
//! [`csi_migration`]). Kubernetes made the in-tree to CSI switch permanent, so there is
//! nothing to turn on; what an admin lacks is sight of it. For such a driver this watches
//! PersistentVolumes (whole: the in-tree source is in the spec), and the metadata only of
//! PersistentVolumeClaims and CSINodes (the annotations are all it reads), keeping of them only
//! the few facts the figures need (see [`Caches`]), and reports on the
//! ClusterCSIDriver, under the field manager `storage-operator/<Prefix>CSIMigrationController`:
//!
//! - `<Prefix>CSIMigrationInTreeVolumes`: True while in-tree PersistentVolumes of the plugin
//!   (or volumes annotated `pv.kubernetes.io/migrated-to: <driver>`) exist, which the driver
//!   now serves; the message counts and names them (a capped list), and the in-tree
//!   StorageClasses whose volumes it provisions.
//! - `<Prefix>CSIMigrationNodesMigrated`: False while some CSINodes' kubelets have not migrated
//!   the plugin (their `storage.alpha.kubernetes.io/migrated-plugins` annotation does not list
//!   it), naming them (capped).
//! - `<Prefix>CSIMigrationInTreeDefaultStorageClass`: True when the cluster's default
//!   StorageClass is one of the in-tree provisioner; the message suggests the driver's CSI
//!   class. The operator never changes an admin's default.
//! - `<Prefix>CSIMigrationUpgradeable`: False while in-tree volumes exist and the driver is not
//!   Available (its controller Deployment or node DaemonSet): those volumes would lose attach,
//!   mount and provisioning across an upgrade. The message names them. While True it says
//!   whether in-tree volumes depend on the driver: cluster-storage-operator carries that into
//!   `Storage/cluster` (`<Prefix>CSIDriverOperatorCRUpgradeable`).
//!
//! Only `...Upgradeable` ends in a suffix that cluster-storage-operator's roll-up reads
//! (`Available`, `Progressing`, `Degraded`, `Upgradeable`): the other three are informational
//! and never change the driver's or the ClusterOperator's health. Messages hold only the
//! figures, sorted, so a resync or an unrelated change writes nothing.
//!
//! Inline pod volumes are not counted: watching every Pod cluster-wide is not worth it for an
//! audit (`storage-operator migration translate` shows what they become).

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::PartialObjectMeta;
use kube::runtime::watcher::Config;
use kube::{Api, Client, ResourceExt};
use opkit::conditions::condition;
use opkit::runtime::Informers;
use opkit::runtime::Projection;
use opkit::status::StatusPart;

use crate::controllers::ControllerStatus;
use csi_kit::def::DriverDef;
use csi_migration::{
    DEFAULT_CLASS_ANNOTATION, MIGRATED_PLUGINS_ANNOTATION, MIGRATED_TO_ANNOTATION, Plugin,
};

/// How many names a message lists before "and N more".
pub const NAME_CAP: usize = 10;

/// The controller (field manager suffix) owning the migration conditions.
pub fn controller(def: &DriverDef) -> String {
    format!("{}CSIMigrationController", def.condition_prefix)
}

/// `<Prefix>CSIMigrationInTreeVolumes`.
pub fn in_tree_volumes_type(def: &DriverDef) -> String {
    format!("{}CSIMigrationInTreeVolumes", def.condition_prefix)
}

/// `<Prefix>CSIMigrationNodesMigrated`.
pub fn nodes_migrated_type(def: &DriverDef) -> String {
    format!("{}CSIMigrationNodesMigrated", def.condition_prefix)
}

/// `<Prefix>CSIMigrationInTreeDefaultStorageClass`.
pub fn in_tree_default_type(def: &DriverDef) -> String {
    format!(
        "{}CSIMigrationInTreeDefaultStorageClass",
        def.condition_prefix
    )
}

/// `<Prefix>CSIMigrationUpgradeable`.
pub fn upgradeable_type(def: &DriverDef) -> String {
    format!("{}CSIMigrationUpgradeable", def.condition_prefix)
}

/// The figures the audit reports, from the caches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The in-tree plugin the driver replaces; `None` for a driver that is no migration target
    /// (then nothing is watched or reported).
    pub plugin: Option<Plugin>,
    /// PersistentVolumes served through migration: an in-tree source of the plugin, or
    /// annotated `pv.kubernetes.io/migrated-to: <driver>`. Sorted.
    pub volumes: Vec<String>,
    /// PersistentVolumeClaims (`namespace/name`) annotated `migrated-to: <driver>`. Sorted.
    pub claims: Vec<String>,
    /// How many CSINodes exist.
    pub nodes: usize,
    /// CSINodes whose migrated-plugins annotation does not list the plugin. Sorted.
    pub nodes_not_migrated: Vec<String>,
}

/// The watches of the audit. Each keeps only what the figures need, so its memory follows
/// the volumes the driver serves through migration, not the size of the cluster: a key per
/// migrated PersistentVolume and per annotated claim, and one flag per CSINode. Claims and
/// CSINodes are watched as metadata only; PersistentVolumes whole, as their in-tree source is
/// in the spec, but none is stored.
#[derive(Clone)]
pub struct Caches {
    plugin: Plugin,
    /// PersistentVolumes served through migration, by name.
    volumes: Projection<()>,
    /// Claims annotated `migrated-to: <driver>`, by `namespace/name`.
    claims: Projection<()>,
    /// Every CSINode: whether its kubelet has migrated the plugin.
    nodes: Projection<bool>,
}

fn migrated_to(annotations: &std::collections::BTreeMap<String, String>, driver: &str) -> bool {
    annotations
        .get(MIGRATED_TO_ANNOTATION)
        .is_some_and(|to| to == driver)
}

impl Caches {
    /// Starts the watches when `def` replaces an in-tree plugin; `None` otherwise.
    pub fn start(client: &Client, def: &DriverDef, informers: &mut Informers) -> Option<Self> {
        let plugin = Plugin::from_csi_driver(&def.name)?;
        let driver = def.name.clone();
        let volumes = informers.watch_projected(
            "persistentvolumes (migrated ones kept)",
            Api::<PersistentVolume>::all(client.clone()),
            Config::default(),
            move |pv| {
                let in_tree = pv.spec.as_ref().and_then(Plugin::of_pv_spec) == Some(plugin);
                (in_tree || migrated_to(pv.annotations(), &driver)).then_some(())
            },
        );
        let driver = def.name.clone();
        let claims = informers.watch_projected(
            "persistentvolumeclaims (metadata; migrated ones kept)",
            Api::<PartialObjectMeta<PersistentVolumeClaim>>::all(client.clone()),
            Config::default(),
            move |pvc| migrated_to(pvc.annotations(), &driver).then_some(()),
        );
        let nodes = informers.watch_projected(
            "csinodes (metadata)",
            Api::<PartialObjectMeta<CSINode>>::all(client.clone()),
            Config::default(),
            move |node| Some(lists_plugin(node.annotations(), plugin)),
        );
        Some(Self {
            plugin,
            volumes,
            claims,
            nodes,
        })
    }

    /// The figures now.
    pub fn observe(&self) -> Observed {
        let keys = |projection: &Projection<()>| -> Vec<String> {
            projection
                .entries()
                .into_iter()
                .map(|(key, ())| key)
                .collect()
        };
        let nodes = self.nodes.entries();
        Observed {
            plugin: Some(self.plugin),
            volumes: keys(&self.volumes),
            claims: keys(&self.claims),
            nodes: nodes.len(),
            nodes_not_migrated: nodes
                .into_iter()
                .filter(|(_, migrated)| !migrated)
                .map(|(name, _)| name)
                .collect(),
        }
    }
}

/// Whether a CSINode's migrated-plugins annotation lists `plugin`.
pub fn lists_plugin(
    annotations: &std::collections::BTreeMap<String, String>,
    plugin: Plugin,
) -> bool {
    annotations
        .get(MIGRATED_PLUGINS_ANNOTATION)
        .is_some_and(|list| list.split(',').any(|p| p.trim() == plugin.in_tree_name()))
}

/// `a, b, c and 4 more`.
pub fn capped(names: &[String]) -> String {
    let shown = names
        .iter()
        .take(NAME_CAP)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(NAME_CAP) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The audit's status part, or `None` for a driver that is no migration target.
/// `driver_available`: the controller Deployment and the node DaemonSet are both Available.
pub fn status(
    def: &DriverDef,
    observed: &Observed,
    storage_classes: &[std::sync::Arc<StorageClass>],
    driver_available: bool,
) -> Option<ControllerStatus> {
    let plugin = observed.plugin?;
    let driver = plugin.csi_driver();
    let in_tree = plugin.in_tree_name();
    let mut conditions: Vec<OperatorCondition> = Vec::new();

    let volumes = &observed.volumes;
    let mut in_tree_classes: Vec<String> = storage_classes
        .iter()
        .filter(|sc| sc.provisioner == in_tree)
        .map(|sc| sc.name_any())
        .collect();
    in_tree_classes.sort();
    let classes = if in_tree_classes.is_empty() {
        String::new()
    } else {
        format!(
            "; {} of {in_tree} provision{} through it: {}",
            plural(in_tree_classes.len(), "StorageClass", "StorageClasses"),
            if in_tree_classes.len() == 1 { "s" } else { "" },
            capped(&in_tree_classes)
        )
    };
    conditions.push(if volumes.is_empty() {
        condition(
            in_tree_volumes_type(def),
            ConditionStatus::False,
            "NoInTreeVolumes",
            format!("no PersistentVolume of {in_tree} exists{classes}"),
        )
    } else {
        let mut message = format!(
            "{driver} serves {} of {in_tree} through CSI migration: {}",
            plural(
                volumes.len(),
                "in-tree PersistentVolume",
                "in-tree PersistentVolumes"
            ),
            capped(volumes)
        );
        if !observed.claims.is_empty() {
            message.push_str(&format!(
                "; {} annotated {MIGRATED_TO_ANNOTATION}: {}",
                plural(
                    observed.claims.len(),
                    "PersistentVolumeClaim is",
                    "PersistentVolumeClaims are"
                ),
                capped(&observed.claims)
            ));
        }
        message.push_str(&classes);
        condition(
            in_tree_volumes_type(def),
            ConditionStatus::True,
            "InTreeVolumesServed",
            message,
        )
    });

    let pending = &observed.nodes_not_migrated;
    conditions.push(match (observed.nodes, pending.len()) {
        (0, _) => condition(
            nodes_migrated_type(def),
            ConditionStatus::Unknown,
            "NoCSINodes",
            "no CSINode exists yet",
        ),
        (total, 0) => condition(
            nodes_migrated_type(def),
            ConditionStatus::True,
            "AllNodesMigrated",
            format!(
                "the kubelets of all {} use {driver} for {in_tree} volumes",
                plural(total, "node", "nodes")
            ),
        ),
        (total, n) => condition(
            nodes_migrated_type(def),
            ConditionStatus::False,
            "NodesNotMigrated",
            format!(
                "{n} of {} have not migrated {in_tree} (their CSINode annotation \
                 {MIGRATED_PLUGINS_ANNOTATION} does not list it) and mount its volumes with the \
                 in-tree plugin: {}",
                plural(total, "node", "nodes"),
                capped(pending)
            ),
        ),
    });

    let in_tree_defaults: Vec<String> = storage_classes
        .iter()
        .filter(|sc| sc.provisioner == in_tree)
        .filter(|sc| {
            sc.annotations()
                .get(DEFAULT_CLASS_ANNOTATION)
                .is_some_and(|v| v == "true")
        })
        .map(|sc| sc.name_any())
        .collect();
    conditions.push(if in_tree_defaults.is_empty() {
        condition(
            in_tree_default_type(def),
            ConditionStatus::False,
            "NoInTreeDefault",
            "",
        )
    } else {
        let suggestion = def
            .storage_classes
            .iter()
            .find(|c| c.default)
            .or(def.storage_classes.first())
            .map(|c| {
                format!(
                    "; consider making the CSI class {} the default instead",
                    c.name
                )
            })
            .unwrap_or_default();
        condition(
            in_tree_default_type(def),
            ConditionStatus::True,
            "InTreeDefaultStorageClass",
            format!(
                "the default StorageClass {} uses the in-tree provisioner {in_tree}; its volumes \
                 are provisioned by {driver} through migration, without CSI-only features such \
                 as snapshots or expansion{suggestion} (this operator never changes the default)",
                capped(&in_tree_defaults)
            ),
        )
    });

    conditions.push(if !volumes.is_empty() && !driver_available {
        condition(
            upgradeable_type(def),
            ConditionStatus::False,
            "InTreeVolumesNeedDriver",
            format!(
                "{driver} is not available and serves {} of {in_tree}, which would lose \
                 attach, mount and provisioning until it is: {}",
                plural(
                    volumes.len(),
                    "in-tree PersistentVolume",
                    "in-tree PersistentVolumes"
                ),
                capped(volumes)
            ),
        )
    } else {
        // Said only while in-tree volumes exist: this message is what reaches Storage and the
        // ClusterOperator (the union carries the messages of its conditions). No count, so a
        // new volume does not rewrite three statuses.
        let message = if volumes.is_empty() {
            String::new()
        } else {
            format!("in-tree volumes of {in_tree} depend on {driver}, which is available")
        };
        condition(
            upgradeable_type(def),
            ConditionStatus::True,
            "AsExpected",
            message,
        )
    });

    Some(ControllerStatus {
        group: None,
        controller: controller(def),
        part: StatusPart {
            conditions,
            ..StatusPart::default()
        },
    })
}
