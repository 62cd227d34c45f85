//! Azure File (`file.csi.azure.com`): the table in `azure_file.yaml` plus hooks shared with
//! Azure Disk (the cloud config with `azure-file-credentials` merged into it, on the controller
//! and the nodes; see [`crate::azure_disk`] for when and how) and the SMB mount options
//! OpenShift puts on `azurefile-csi`. The registry does not start it on Azure Stack Hub, which
//! has no Azure Files.

use csi::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::DriverError;
use crate::azure_disk::{CLOUD_CONFIG, mount_cloud_config};
use crate::common::{ds_pod_spec, pod_spec};

/// The short name.
pub const SHORT_NAME: &str = "azure-file";
/// The CSI driver name.
pub const CSI_NAME: &str = "file.csi.azure.com";
/// The credentials Secret cloud-credential-operator writes.
pub const CREDENTIALS_SECRET: &str = "azure-file-credentials";
/// The mount options of SMB classes: symlinks, strict caching, one connection per share, and
/// attribute caching of 30 s.
pub const SMB_MOUNT_OPTIONS: [&str; 4] =
    ["mfsymlinks", "cache=strict", "nosharesock", "actimeo=30"];

const TABLE: &str = include_str!("azure_file.yaml");

/// The Azure File driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_cloud_config],
        daemon_set: vec![with_cloud_config_on_nodes],
        storage_class: vec![with_smb_mount_options],
        ..Hooks::default()
    };
    Ok(def)
}

/// The cloud config with `azure-file-credentials` on the controller (see
/// [`mount_cloud_config`]).
pub fn with_cloud_config(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = pod_spec(deployment) {
        mount_cloud_config(inputs, spec, CLOUD_CONFIG, CREDENTIALS_SECRET);
    }
}

/// The cloud config with `azure-file-credentials` on the nodes.
pub fn with_cloud_config_on_nodes(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = ds_pod_spec(daemon_set) {
        mount_cloud_config(inputs, spec, CLOUD_CONFIG, CREDENTIALS_SECRET);
    }
}

/// [`SMB_MOUNT_OPTIONS`] on every class that is not NFS.
pub fn with_smb_mount_options(_inputs: &Inputs, class: &mut StorageClass) {
    let nfs = class
        .parameters
        .as_ref()
        .and_then(|p| p.get("protocol"))
        .is_some_and(|p| p == "nfs");
    if !nfs {
        class.mount_options = Some(SMB_MOUNT_OPTIONS.iter().map(|o| (*o).to_owned()).collect());
    }
}
