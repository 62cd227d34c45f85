//! Azure File (`file.csi.azure.com`): the table in `azure_file.yaml` plus hooks shared with
//! Azure Disk (the cloud config with `azure-file-credentials` merged into it, on the controller
//! and the nodes, laid out as OpenShift lays it out; see [`crate::azure_disk`] for when and
//! how), the SMB mount options OpenShift puts on `azurefile-csi`, and, on OpenShift, the class
//! parameters OpenShift's operator created it with. The registry does not start it on Azure
//! Stack Hub, which has no Azure Files.

use csi_kit::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::azure_disk::{
    CLOUD_CONFIG, OPENSHIFT_CONTROLLER_LAYOUT, OPENSHIFT_NODE_LAYOUT, from_hosted_cloud_config,
    mount_cloud_config_as,
};
use crate::common::{ds_pod_spec, pod_spec};
use crate::table::DriverError;

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
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_cloud_config],
        daemon_set: vec![with_cloud_config_on_nodes],
        storage_class: vec![with_smb_mount_options, with_openshift_parameters],
        ..Hooks::default()
    };
    Ok(def)
}

/// The cloud config with `azure-file-credentials` on the controller, as OpenShift lays it out
/// (see [`mount_cloud_config_as`]); with a hosted control plane, from HyperShift's Secret (see
/// [`from_hosted_cloud_config`]).
pub fn with_cloud_config(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = pod_spec(deployment) {
        mount_cloud_config_as(
            &OPENSHIFT_CONTROLLER_LAYOUT,
            inputs,
            spec,
            CLOUD_CONFIG,
            CREDENTIALS_SECRET,
        );
        if inputs.hosted.is_some() {
            from_hosted_cloud_config(spec, HOSTED_CLOUD_CONFIG);
        }
    }
}

/// The Secret HyperShift keeps in the control-plane namespace with Azure File's cloud config,
/// credentials included.
pub const HOSTED_CLOUD_CONFIG: &str = "azure-file-csi-config";

/// The cloud config with `azure-file-credentials` on the nodes (mounting reads the storage
/// accounts' keys through it).
pub fn with_cloud_config_on_nodes(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = ds_pod_spec(daemon_set) {
        mount_cloud_config_as(
            &OPENSHIFT_NODE_LAYOUT,
            inputs,
            spec,
            CLOUD_CONFIG,
            CREDENTIALS_SECRET,
        );
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

/// On OpenShift, the parameters OpenShift's operator creates its classes with (a class's
/// parameters cannot change, so taking one over must keep them): the SKU spelled `skuName`
/// (the driver reads parameter names in any case), and storage accounts tagged with the
/// class's name (`tags: storageClassName=<name>`) and shared only by volumes of the same tags
/// (`matchTags`). Plain Kubernetes keeps the table's parameters.
pub fn with_openshift_parameters(inputs: &Inputs, class: &mut StorageClass) {
    if !inputs.topology.is_openshift() {
        return;
    }
    let name = class.metadata.name.clone().unwrap_or_default();
    let parameters = class.parameters.get_or_insert_with(Default::default);
    if let Some(sku) = parameters.remove("skuname") {
        parameters.insert("skuName".to_owned(), sku);
    }
    parameters.insert("matchTags".to_owned(), "true".to_owned());
    parameters.insert("tags".to_owned(), format!("storageClassName={name}"));
}
