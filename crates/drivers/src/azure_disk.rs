//! Azure Disk (`disk.csi.azure.com`): the table in `azure_disk.yaml` plus hooks: the cluster's
//! Azure cloud config (copied from `openshift-config/cloud-provider-config` as
//! `azure-cloud-config`, as OpenShift names it; the node's
//! `/etc/kubernetes/azure.json` on plain Kubernetes without it), workload identity credentials,
//! the disk encryption set of `driverConfig.azure.diskEncryptionSet` as a StorageClass
//! parameter, and the Azure Stack Hub variant.
//!
//! Azure Stack Hub (`Infrastructure.status.platformStatus.azure.cloudName: AzureStackCloud`)
//! differs as OpenShift makes it: the driver reads the hub's endpoints from the `endpoints` key
//! of the cloud config (`AZURE_ENVIRONMENT_FILEPATH`); classes use `Premium_LRS` (the hub has
//! no StandardSSD); snapshots are full copies (`incremental: "false"`, the hub has no
//! incremental snapshots). Everything else, zones included, is as on Azure: the hub reports no
//! zones, so topology degrades to none by itself.

use csi::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, HostPathVolumeSource, PodSpec, Volume, VolumeMount,
};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

use crate::DriverError;
use crate::common::{
    driver_container, drop_missing_credentials, ds_pod_spec, from_secret, literal, mount_in_driver,
    pod_spec, set_env,
};

/// The short name.
pub const SHORT_NAME: &str = "azure-disk";
/// The CSI driver name.
pub const CSI_NAME: &str = "disk.csi.azure.com";
/// The StorageClass parameter naming the disk encryption set of new disks.
pub const DISK_ENCRYPTION_SET_PARAMETER: &str = "diskEncryptionSetID";
/// The credentials Secret cloud-credential-operator writes.
pub const CREDENTIALS_SECRET: &str = "azure-disk-credentials";
/// The copy of the cluster's cloud config (`openshift-config/cloud-provider-config`), named as
/// OpenShift names it.
pub const CLOUD_CONFIG: &str = "azure-cloud-config";
/// Where the driver reads the Azure Stack Hub endpoints.
pub const STACK_HUB_ENVIRONMENT_PATH: &str = "/etc/azure/azurestackcloud.json";

const TABLE: &str = include_str!("azure_disk.yaml");
const CLOUD_CONFIG_VOLUME: &str = "cloud-config";
const CLOUD_CONFIG_DIR: &str = "/etc/kubernetes/";
const CREDENTIALS_VOLUME: &str = "azure-credentials";
const IDENTITY_ENV: [(&str, &str); 3] = [
    ("AZURE_CLIENT_ID", "azure_client_id"),
    ("AZURE_TENANT_ID", "azure_tenant_id"),
    ("AZURE_FEDERATED_TOKEN_FILE", "azure_federated_token_file"),
];

/// The Azure Disk driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_cloud_config, with_workload_identity],
        daemon_set: vec![with_cloud_config_on_nodes],
        storage_class: vec![with_disk_encryption_set, with_stack_hub_sku],
        volume_snapshot_class: vec![with_stack_hub_full_snapshots],
        ..Hooks::default()
    };
    Ok(def)
}

/// Whether the cluster runs on Azure Stack Hub.
pub fn is_azure_stack_hub(inputs: &Inputs) -> bool {
    inputs
        .platform_status
        .as_ref()
        .and_then(|p| p.azure.as_ref())
        .and_then(|a| a.cloud_name.as_ref())
        .is_some_and(|c| *c == api::config_v1::AzureCloudEnvironment::AzureStackCloud)
}

/// Mounts the cloud config in the driver container and points `AZURE_CREDENTIAL_FILE` at it:
/// the copy of `cloud_config` (key `config`) on OpenShift or when it exists, else (plain
/// Kubernetes) the node's `/etc/kubernetes/azure.json`. On Azure Stack Hub the copy's
/// `endpoints` key becomes `AZURE_ENVIRONMENT_FILEPATH`.
pub fn mount_cloud_config(inputs: &Inputs, spec: &mut PodSpec, cloud_config: &str) {
    let copied = inputs.copied_config_maps.contains_key(cloud_config);
    let (source, file) = if copied || inputs.topology.is_openshift() {
        (
            Volume {
                name: CLOUD_CONFIG_VOLUME.to_owned(),
                config_map: Some(ConfigMapVolumeSource {
                    name: cloud_config.to_owned(),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            "/etc/kubernetes/config",
        )
    } else {
        (
            Volume {
                name: CLOUD_CONFIG_VOLUME.to_owned(),
                host_path: Some(HostPathVolumeSource {
                    path: CLOUD_CONFIG_DIR.to_owned(),
                    type_: Some("DirectoryOrCreate".to_owned()),
                }),
                ..Volume::default()
            },
            "/etc/kubernetes/azure.json",
        )
    };
    mount_in_driver(
        spec,
        source,
        VolumeMount {
            name: CLOUD_CONFIG_VOLUME.to_owned(),
            mount_path: CLOUD_CONFIG_DIR.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    );
    let stack_hub = is_azure_stack_hub(inputs);
    if let Some(container) = driver_container(spec) {
        set_env(container, literal("AZURE_CREDENTIAL_FILE", file));
        if stack_hub {
            set_env(
                container,
                literal("AZURE_ENVIRONMENT_FILEPATH", STACK_HUB_ENVIRONMENT_PATH),
            );
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            mounts.retain(|m| m.mount_path != STACK_HUB_ENVIRONMENT_PATH);
            mounts.push(VolumeMount {
                name: CLOUD_CONFIG_VOLUME.to_owned(),
                mount_path: STACK_HUB_ENVIRONMENT_PATH.to_owned(),
                sub_path: Some("endpoints".to_owned()),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        }
    }
}

/// [`mount_cloud_config`] on the controller.
pub fn with_cloud_config(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = pod_spec(deployment) {
        mount_cloud_config(inputs, spec, CLOUD_CONFIG);
    }
}

/// [`mount_cloud_config`] on the nodes (the node plugin reads the cloud and zone from it).
pub fn with_cloud_config_on_nodes(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = ds_pod_spec(daemon_set) {
        mount_cloud_config(inputs, spec, CLOUD_CONFIG);
    }
}

/// Passes Azure workload identity (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`,
/// `AZURE_FEDERATED_TOKEN_FILE`) from the keys of `secret` to the controller's driver, which
/// then authenticates with the pod's bound token; on plain Kubernetes without that Secret,
/// neither the variables nor its volume (the driver uses the cloud config's identity).
pub fn with_identity_from(
    inputs: &Inputs,
    deployment: &mut Deployment,
    secret: &str,
    volume: &str,
) {
    if let Some(container) = pod_spec(deployment).and_then(driver_container) {
        for (name, key) in IDENTITY_ENV {
            set_env(container, from_secret(name, secret, key));
        }
    }
    let names: Vec<&str> = IDENTITY_ENV.iter().map(|(n, _)| *n).collect();
    drop_missing_credentials(inputs, deployment, secret, volume, &names);
}

/// [`with_identity_from`] with `azure-disk-credentials`.
pub fn with_workload_identity(inputs: &Inputs, deployment: &mut Deployment) {
    with_identity_from(inputs, deployment, CREDENTIALS_SECRET, CREDENTIALS_VOLUME);
}

/// The ARM ID of `driverConfig.azure.diskEncryptionSet`, if set.
pub fn disk_encryption_set_id(inputs: &Inputs) -> Option<String> {
    let set = inputs
        .spec
        .driver_config
        .as_ref()?
        .azure
        .as_ref()?
        .disk_encryption_set
        .as_ref()?;
    Some(format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/diskEncryptionSets/{}",
        set.subscription_id, set.resource_group, set.name
    ))
}

/// Sets `diskEncryptionSetID` from `driverConfig.azure.diskEncryptionSet` on every class.
pub fn with_disk_encryption_set(inputs: &Inputs, class: &mut StorageClass) {
    if let Some(id) = disk_encryption_set_id(inputs) {
        class
            .parameters
            .get_or_insert_with(Default::default)
            .insert(DISK_ENCRYPTION_SET_PARAMETER.to_owned(), id);
    }
}

/// Azure Stack Hub has no StandardSSD disks: its classes use `Premium_LRS`.
pub fn with_stack_hub_sku(inputs: &Inputs, class: &mut StorageClass) {
    if is_azure_stack_hub(inputs) {
        class
            .parameters
            .get_or_insert_with(Default::default)
            .insert("skuname".to_owned(), "Premium_LRS".to_owned());
    }
}

/// Azure Stack Hub has no incremental snapshots: its snapshot classes take full ones.
pub fn with_stack_hub_full_snapshots(inputs: &Inputs, class: &mut Value) {
    if is_azure_stack_hub(inputs) {
        class["parameters"]["incremental"] = Value::from("false");
    }
}
