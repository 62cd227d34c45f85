//! Azure Disk (`disk.csi.azure.com`): the table in `azure_disk.yaml` plus hooks: the cluster's
//! Azure cloud config (copied from `openshift-config/cloud-provider-config` as
//! `azure-cloud-config`, as OpenShift names it; the node's `/etc/kubernetes/azure.json` on plain
//! Kubernetes without it) with the credentials Secret merged into it, the disk encryption set
//! of `driverConfig.azure.diskEncryptionSet` as a StorageClass parameter, and the Azure Stack
//! Hub variant.
//!
//! The cloud config carries no credentials: cloud-credential-operator writes them to
//! `azure-disk-credentials` (`azure_client_id` with `azure_client_secret` in mint and
//! passthrough modes, `azure_tenant_id` and `azure_federated_token_file` with workload
//! identity). As OpenShift does, an init container (`azure-inject-credentials`, the
//! `/azure-config-credentials-injector` of the cloud controller manager operator's image)
//! merges them into a copy of the cloud config in an emptyDir, which the driver reads as
//! `/etc/kubernetes/cloud.conf`; the driver itself never sees the Secret. The Secret is also
//! mounted in the init container, unread, so that its hash annotation rolls the pods when it
//! changes (the merge happens only at pod start). The same on the controller and the nodes.
//!
//! When there is no injector:
//! - OpenShift always injects (the pods wait for cloud-credential-operator's Secret).
//! - Plain Kubernetes injects when the Secret exists, into the copied cloud config or, without
//!   one, into the node's `azure.json`: an admin who created the Secret means the driver to
//!   use it, and the node file still brings the cloud, subscription and resource group.
//! - Plain Kubernetes without the Secret mounts the cloud config (copy or node file) directly,
//!   with whatever identity it names (typically the nodes' managed identity).
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
    ConfigMapVolumeSource, EmptyDirVolumeSource, EnvVar, EnvVarSource, HostPathVolumeSource,
    PodSpec, SecretKeySelector, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

use crate::DriverError;
use crate::common::{
    add_volume, driver_container, ds_pod_spec, from_secret, literal, mount_in_driver, pod_spec,
    set_env, unprivileged,
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
/// The init container merging the credentials Secret into the cloud config.
pub const INJECTOR_CONTAINER: &str = "azure-inject-credentials";
/// The role of the injector's image in the table's `extraImages`.
pub const INJECTOR_IMAGE: &str = "credentialsInjector";
/// The cloud config the driver reads when the injector wrote it.
pub const MERGED_CLOUD_CONFIG_FILE: &str = "/etc/kubernetes/cloud.conf";

const TABLE: &str = include_str!("azure_disk.yaml");
/// The source cloud config: the copied ConfigMap, or the node's `/etc/kubernetes/`.
const CLOUD_CONFIG_VOLUME: &str = "cloud-config";
/// The emptyDir holding the injector's output.
const MERGED_CLOUD_CONFIG_VOLUME: &str = "merged-cloud-config";
const CREDENTIALS_VOLUME: &str = "azure-credentials";
const CLOUD_CONFIG_DIR: &str = "/etc/kubernetes/";
const INJECTOR_SOURCE_DIR: &str = "/etc/cloud-config";
const INJECTOR_OUTPUT_DIR: &str = "/etc/merged-cloud-config";
const INJECTOR_CREDENTIALS_DIR: &str = "/etc/azure/credentials";
/// The injector's environment: variable, key of the Secret, whether the key must exist.
/// `azure_client_id` is in every mode; the others depend on it.
const INJECTOR_ENV: [(&str, &str, bool); 4] = [
    ("AZURE_CLIENT_ID", "azure_client_id", true),
    ("AZURE_CLIENT_SECRET", "azure_client_secret", false),
    ("AZURE_TENANT_ID", "azure_tenant_id", false),
    (
        "AZURE_FEDERATED_TOKEN_FILE",
        "azure_federated_token_file",
        false,
    ),
];

/// The Azure Disk driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_cloud_config],
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

/// Whether the pods merge `secret` into the cloud config (see the module documentation):
/// always on OpenShift, on plain Kubernetes when the Secret exists.
pub fn injects_credentials(inputs: &Inputs, secret: &str) -> bool {
    inputs.topology.is_openshift() || inputs.secret_hashes.contains_key(secret)
}

/// Mounts the cloud config in the driver container and points `AZURE_CREDENTIAL_FILE` at it.
/// The source is the copy of `cloud_config` (key `config`) on OpenShift or when it exists,
/// else (plain Kubernetes) the node's `/etc/kubernetes/azure.json`. When
/// [`injects_credentials`], the driver reads the source with `secret` merged into it by the
/// [`INJECTOR_CONTAINER`] init container ([`MERGED_CLOUD_CONFIG_FILE`]), else the source
/// itself. On Azure Stack Hub the source's `endpoints` key becomes
/// `AZURE_ENVIRONMENT_FILEPATH`.
pub fn mount_cloud_config(inputs: &Inputs, spec: &mut PodSpec, cloud_config: &str, secret: &str) {
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
            "config",
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
            "azure.json",
        )
    };
    let read_only_mount = |name: &str, path: &str| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    let inject = injects_credentials(inputs, secret);
    let driver_reads = if inject {
        add_volume(spec, source);
        add_injector(inputs, spec, file, secret);
        mount_in_driver(
            spec,
            Volume {
                name: MERGED_CLOUD_CONFIG_VOLUME.to_owned(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            },
            read_only_mount(MERGED_CLOUD_CONFIG_VOLUME, CLOUD_CONFIG_DIR),
        );
        MERGED_CLOUD_CONFIG_FILE.to_owned()
    } else {
        mount_in_driver(
            spec,
            source,
            read_only_mount(CLOUD_CONFIG_VOLUME, CLOUD_CONFIG_DIR),
        );
        format!("{CLOUD_CONFIG_DIR}{file}")
    };
    let stack_hub = is_azure_stack_hub(inputs);
    if let Some(container) = driver_container(spec) {
        set_env(container, literal("AZURE_CREDENTIAL_FILE", &driver_reads));
        if stack_hub {
            set_env(
                container,
                literal("AZURE_ENVIRONMENT_FILEPATH", STACK_HUB_ENVIRONMENT_PATH),
            );
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            mounts.retain(|m| m.mount_path != STACK_HUB_ENVIRONMENT_PATH);
            mounts.push(VolumeMount {
                sub_path: Some("endpoints".to_owned()),
                ..read_only_mount(CLOUD_CONFIG_VOLUME, STACK_HUB_ENVIRONMENT_PATH)
            });
        }
    }
}

/// Adds (or replaces) the [`INJECTOR_CONTAINER`] init container, reading `file` of the
/// source cloud config and the keys of `secret`, writing the merged config into the
/// emptyDir, and mounts `secret` in it for the hash annotation.
fn add_injector(inputs: &Inputs, spec: &mut PodSpec, file: &str, secret: &str) {
    add_volume(
        spec,
        Volume {
            name: CREDENTIALS_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
    );
    let image = inputs
        .extra_images
        .get(INJECTOR_IMAGE)
        .map_or("", String::as_str);
    let mut injector = csi::workloads::operand_container(
        INJECTOR_CONTAINER,
        image,
        vec![
            format!("--cloud-config-file-path={INJECTOR_SOURCE_DIR}/{file}"),
            format!("--output-file-path={INJECTOR_OUTPUT_DIR}/cloud.conf"),
            // Only the Secret's identity, never the node's managed identity.
            "--disable-identity-extension-auth".to_owned(),
            // Takes effect only when the Secret has `azure_federated_token_file`.
            "--enable-azure-workload-identity=true".to_owned(),
        ],
    );
    injector.command = Some(vec!["/azure-config-credentials-injector".to_owned()]);
    injector.env = Some(
        INJECTOR_ENV
            .iter()
            .map(|(name, key, required)| secret_env(name, secret, key, *required))
            .collect(),
    );
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    };
    injector.volume_mounts = Some(vec![
        mount(CLOUD_CONFIG_VOLUME, INJECTOR_SOURCE_DIR, true),
        mount(MERGED_CLOUD_CONFIG_VOLUME, INJECTOR_OUTPUT_DIR, false),
        mount(CREDENTIALS_VOLUME, INJECTOR_CREDENTIALS_DIR, true),
    ]);
    unprivileged(&mut injector);
    let init = spec.init_containers.get_or_insert_with(Vec::new);
    init.retain(|c| c.name != INJECTOR_CONTAINER);
    init.push(injector);
}

/// An environment variable from `key` of `secret`; a required key keeps the container from
/// starting until the Secret has it.
fn secret_env(name: &str, secret: &str, key: &str, required: bool) -> EnvVar {
    if !required {
        return from_secret(name, secret, key);
    }
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// [`mount_cloud_config`] on the controller, with `azure-disk-credentials`.
pub fn with_cloud_config(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = pod_spec(deployment) {
        mount_cloud_config(inputs, spec, CLOUD_CONFIG, CREDENTIALS_SECRET);
    }
}

/// [`mount_cloud_config`] on the nodes (the node plugin reads the cloud and zone from it).
pub fn with_cloud_config_on_nodes(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = ds_pod_spec(daemon_set) {
        mount_cloud_config(inputs, spec, CLOUD_CONFIG, CREDENTIALS_SECRET);
    }
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
