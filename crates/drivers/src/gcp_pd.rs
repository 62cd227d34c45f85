//! GCP Persistent Disk (`pd.csi.storage.gke.io`): the table in `gcp_pd.yaml` plus a few hooks:
//! the cluster-ID volume label (so the installer can find and destroy the cluster's disks),
//! ambient credentials on plain Kubernetes when no credentials Secret exists, the KMS key of
//! `driverConfig.gcp.kmsKey` as a StorageClass parameter, and the StorageClasses of GCP
//! Dedicated regions (Hyperdisk only).

use csi_kit::{DriverDef, Hooks, Inputs, names};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::storage::v1::StorageClass;

use crate::table::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "gcp-pd";
/// The CSI driver name.
pub const CSI_NAME: &str = "pd.csi.storage.gke.io";
/// The StorageClass parameter naming the Cloud KMS key that encrypts new disks.
pub const KMS_KEY_PARAMETER: &str = "disk-encryption-kms-key";

const TABLE: &str = include_str!("gcp_pd.yaml");

/// The GCP PD driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_cluster_id_label, with_ambient_credentials],
        daemon_set: Vec::new(),
        storage_class: vec![with_kms_key],
        storage_class_filter: Some(storage_classes_for_region),
        ..Hooks::default()
    };
    Ok(def)
}

/// The argument that labels every disk the controller creates: the cluster's GCP resource
/// labels (`Infrastructure.status.platformStatus.gcp.resourceLabels`), then
/// `kubernetes-io-cluster-<infrastructureName>=owned` so the installer can find and destroy
/// them. `None` when there is nothing to label with.
pub fn extra_labels_arg(inputs: &Inputs) -> Option<String> {
    let resource_labels = inputs
        .platform_status
        .as_ref()
        .and_then(|p| p.gcp.as_ref())
        .map(|g| g.resource_labels.as_slice())
        .unwrap_or_default();
    let mut labels: Vec<String> = resource_labels
        .iter()
        .map(|l| format!("{}={}", l.key, l.value))
        .collect();
    if let Some(id) = inputs.cluster_id.as_deref().filter(|id| !id.is_empty()) {
        labels.push(format!("kubernetes-io-cluster-{id}=owned"));
    }
    (!labels.is_empty()).then(|| format!("--extra-labels={}", labels.join(",")))
}

/// Adds [`extra_labels_arg`] to the controller's driver container.
pub fn with_cluster_id_label(inputs: &Inputs, deployment: &mut Deployment) {
    let Some(arg) = extra_labels_arg(inputs) else {
        return;
    };
    let containers = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .map(|s| s.containers.iter_mut());
    for container in containers.into_iter().flatten() {
        if container.name == names::DRIVER_CONTAINER {
            let args = container.args.get_or_insert_with(Vec::new);
            args.retain(|a| !a.starts_with("--extra-labels="));
            args.push(arg.clone());
        }
    }
}

/// The credentials Secret the controller mounts.
pub const CREDENTIALS_SECRET: &str = "gcp-pd-cloud-credentials";
const CREDENTIALS_VOLUME: &str = "cloud-sa-volume";
const CREDENTIALS_ENV: &str = "GOOGLE_APPLICATION_CREDENTIALS";

/// On plain Kubernetes, when the credentials Secret does not exist (the observe step found no
/// hash for it), drops its volume and `GOOGLE_APPLICATION_CREDENTIALS` so the driver uses the
/// node's service account from the metadata server instead of waiting forever for a Secret
/// that nobody will create. On OpenShift the pods wait for cloud-credential-operator.
pub fn with_ambient_credentials(inputs: &Inputs, deployment: &mut Deployment) {
    if inputs.topology.is_openshift() || inputs.secret_hashes.contains_key(CREDENTIALS_SECRET) {
        return;
    }
    let Some(spec) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    else {
        return;
    };
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| v.name != CREDENTIALS_VOLUME);
    }
    for container in &mut spec.containers {
        if let Some(mounts) = container.volume_mounts.as_mut() {
            mounts.retain(|m| m.name != CREDENTIALS_VOLUME);
        }
        if let Some(env) = container.env.as_mut() {
            env.retain(|e| e.name != CREDENTIALS_ENV);
        }
    }
}

/// GCP Dedicated regions (`u-...`, e.g. `u-germany-northeast1`) support only Hyperdisk.
pub const DEDICATED_REGION_PREFIX: &str = "u-";
/// The StorageClass used on GCP Dedicated.
pub const HYPERDISK_CLASS: &str = "hyperdisk-balanced";

/// Whether the cluster runs in a GCP Dedicated region (from `Infrastructure.status`).
pub fn is_dedicated(inputs: &Inputs) -> bool {
    inputs
        .platform_status
        .as_ref()
        .and_then(|p| p.gcp.as_ref())
        .and_then(|g| g.region.as_deref())
        .is_some_and(|r| r.starts_with(DEDICATED_REGION_PREFIX))
}

/// GCP Dedicated gets only `hyperdisk-balanced`; every other cluster gets every other class.
pub fn storage_classes_for_region(inputs: &Inputs, class: &csi_kit::StorageClassDef) -> bool {
    (class.name == HYPERDISK_CLASS) == is_dedicated(inputs)
}

/// Sets `disk-encryption-kms-key` from `driverConfig.gcp.kmsKey` on every class, when set.
pub fn with_kms_key(inputs: &Inputs, class: &mut StorageClass) {
    let key = inputs
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.gcp.as_ref())
        .and_then(|g| g.kms_key.as_ref());
    if let Some(key) = key {
        class
            .parameters
            .get_or_insert_with(Default::default)
            .insert(KMS_KEY_PARAMETER.to_owned(), key.resource_name());
    }
}
