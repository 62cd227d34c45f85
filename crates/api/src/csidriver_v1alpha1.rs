//! `csidriver.storage.openshift.io/v1alpha1` CSIDriverDeployment (seed 004): any CSI driver,
//! declared. The fields and JSON names of the 2018 openshift/csi-operator, so its manifests apply
//! unchanged, plus optional fields for what 2018 could not know (the CSIDriver object, resizer
//! and snapshotter, controller replicas, the kubelet directory).
//!
//! The pod templates are kept as free-form objects in the CRD (a full PodTemplateSpec schema
//! would add some ten thousand lines to it); the controller decodes them and reports a field
//! that does not decode in status, naming it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, TopologySelectorTerm};
use k8s_openapi::api::storage::v1::CSIDriverSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::operator_v1::{ManagementState, OperatorCondition};
use crate::string_enum;

string_enum! {
    /// How the node DaemonSet is updated.
    pub enum NodeUpdateStrategy {
        /// Rolling update, a few nodes at a time.
        Rolling = "Rolling",
        /// Pods are replaced only when deleted (FUSE drivers, whose restart unmounts volumes).
        OnDelete = "OnDelete",
    }
}

string_enum! {
    /// Where volumes are provisioned from.
    pub enum Provisioning {
        /// By external-provisioner in the controller pod, for the whole cluster.
        Central = "Central",
        /// By an external-provisioner in every node pod, each for the volumes of its own node
        /// (external-provisioner's distributed provisioning, `--node-deployment`): for
        /// node-local storage, whose controller service must run next to the node service.
        Distributed = "Distributed",
    }
}

fn free_form(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn free_form_optional(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true})
}

/// A CSI driver to install: its node (and optional controller) pod templates, the socket the
/// driver listens on, and its StorageClasses. The operator adds the sidecars, RBAC, CSIDriver
/// object and StorageClasses.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "csidriver.storage.openshift.io",
    version = "v1alpha1",
    kind = "CSIDriverDeployment",
    plural = "csidriverdeployments",
    namespaced,
    status = "CSIDriverDeploymentStatus",
    doc = "CSIDriverDeployment installs any CSI driver: the operator adds sidecars, RBAC, the CSIDriver object and StorageClasses."
)]
#[serde(rename_all = "camelCase")]
pub struct CSIDriverDeploymentSpec {
    /// Managed, Unmanaged or Removed; Managed when unset (the 2018 samples leave it out).
    #[serde(default)]
    pub management_state: ManagementState,
    /// The CSI driver's name (what it returns from GetPluginInfo).
    #[schemars(length(min = 1, max = 63))]
    pub driver_name: String,
    /// The pod run on every node; its first container is the driver.
    #[schemars(schema_with = "free_form")]
    pub driver_per_node_template: PodTemplateSpec,
    /// The pod of the controller part; absent when the driver has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_optional")]
    pub driver_controller_template: Option<PodTemplateSpec>,
    /// The path of the driver's socket inside its container (absolute).
    pub driver_socket: String,
    /// StorageClasses to create for the driver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_class_templates: Vec<StorageClassTemplate>,
    /// VolumeSnapshotClasses to create for the driver (`driver` is the driverName); needs
    /// `sidecars.snapshotter: true`. They are created once the cluster serves
    /// `volumesnapshotclasses.snapshot.storage.k8s.io` (the snapshot CRDs and controller are
    /// installed); until then the status says so and the rest of the driver is installed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_snapshot_class_templates: Vec<VolumeSnapshotClassTemplate>,
    /// How the node pods are updated; Rolling when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_update_strategy: Option<NodeUpdateStrategy>,
    /// Images of the sidecars; upstream images when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_images: Option<CSIDeploymentContainerImages>,
    /// The CSIDriver object's spec (attachRequired, podInfoOnMount, fsGroupPolicy, ...);
    /// Kubernetes' defaults when unset, except attachRequired, which is false when there is no
    /// driverControllerTemplate (no controller pod, so no external-attacher).
    /// `storageCapacity: true` also makes external-provisioner publish the driver's capacity
    /// (CSIStorageCapacity objects, owned by the workload that runs it).
    #[serde(rename = "csiDriver", default, skip_serializing_if = "Option::is_none")]
    pub csi_driver: Option<CSIDriverSpec>,
    /// Optional controller sidecars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecars: Option<SidecarsSpec>,
    /// Central (when unset): external-provisioner runs in the controller pod. Distributed:
    /// it runs in every node pod and provisions volumes on that node only, for node-local
    /// storage whose driver keeps volumes where it runs; its StorageClasses must then be
    /// WaitForFirstConsumer, and the controller pod (still optional) runs only the other
    /// sidecars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Provisioning>,
    /// Controller replicas; as for the built-in drivers (by topology) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub controller_replicas: Option<i32>,
    /// The kubelet's root directory; `/var/lib/kubelet` when unset (OpenShift 3.11 used
    /// `/var/lib/origin/openshift.local.volumes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^/"))]
    pub kubelet_root_dir: Option<String>,
    /// How often the kubelet probes the driver's health through the livenessprobe sidecar
    /// (seconds; 2018 field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub probe_period_seconds: Option<i32>,
    /// How long the livenessprobe sidecar waits for the driver's Probe call (seconds; 2018
    /// field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub probe_timeout_seconds: Option<i32>,
}

impl CSIDriverDeploymentSpec {
    /// The kubelet root directory with the default applied.
    pub fn kubelet_root_dir(&self) -> &str {
        self.kubelet_root_dir
            .as_deref()
            .unwrap_or("/var/lib/kubelet")
    }
}

/// A StorageClass to create for the driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageClassTemplate {
    /// Its name, labels and annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Whether it should be the cluster's default class (only when no other class is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    /// Parameters passed to the driver.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// Delete or Retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Delete", "Retain"]))]
    pub reclaim_policy: Option<String>,
    /// Mount options of its volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_options: Vec<String>,
    /// Whether its volumes can be expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_volume_expansion: Option<bool>,
    /// Immediate or WaitForFirstConsumer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Immediate", "WaitForFirstConsumer"]))]
    pub volume_binding_mode: Option<String>,
    /// Where its volumes may be provisioned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_topologies: Vec<TopologySelectorTerm>,
}

/// A VolumeSnapshotClass to create for the driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotClassTemplate {
    /// Its name, labels and annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Whether it is the default snapshot class of the driver's volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    /// What happens to the storage snapshot when its VolumeSnapshot is deleted: Delete (when
    /// unset) or Retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Delete", "Retain"]))]
    pub deletion_policy: Option<String>,
    /// Parameters passed to the driver's CreateSnapshot.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// Sidecar images.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CSIDeploymentContainerImages {
    /// external-attacher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attacher_image: Option<String>,
    /// external-provisioner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioner_image: Option<String>,
    /// node-driver-registrar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_registrar_image: Option<String>,
    /// livenessprobe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe_image: Option<String>,
    /// external-resizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resizer_image: Option<String>,
    /// external-snapshotter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshotter_image: Option<String>,
}

/// Optional sidecars.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarsSpec {
    /// Run external-resizer (the driver supports volume expansion), in the controller pod.
    /// external-resizer has no per-node mode: with Distributed provisioning, a driver whose
    /// volumes live in its node process should offer node expansion only (no controller
    /// EXPAND_VOLUME), so that the resizer only records the new size and the kubelet asks the
    /// node that holds the volume to expand it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resizer: Option<bool>,
    /// Run external-snapshotter (the driver supports snapshots): in the controller pod, or with
    /// Distributed provisioning in every node pod (`--node-deployment`, each for the volumes
    /// of its node), which needs the cluster's snapshot-controller to run with
    /// `--enable-distributed-snapshotting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshotter: Option<bool>,
}

/// One object the operator created, with its last seen generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerationHistory {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Resource (plural).
    #[serde(default)]
    pub resource: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Last generation seen.
    #[serde(default)]
    pub last_generation: i64,
}

/// What the operator did with a CSIDriverDeployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CSIDriverDeploymentStatus {
    /// The generation of the spec this status is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The objects created for the driver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<GenerationHistory>,
    /// The management state acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ManagementState>,
    /// Available, Progressing, Degraded and the validation conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<OperatorCondition>,
}
