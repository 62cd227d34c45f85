//! Azure Disk (`disk.csi.azure.com`): the table in `azure_disk.yaml` plus hooks: the cluster's
//! Azure cloud config (copied from `openshift-config/cloud-provider-config` as
//! `azure-cloud-config`, as OpenShift names it; the node's `/etc/kubernetes/azure.json` on plain
//! Kubernetes without it) with the credentials Secret merged into it, the disk encryption set
//! of `driverConfig.azure.diskEncryptionSet` as a StorageClass parameter, and the Azure Stack
//! Hub variant. Its classes use `Premium_LRS` on OpenShift, as OpenShift's do.
//!
//! The cloud config carries no credentials: cloud-credential-operator writes them to
//! `azure-disk-credentials` (`azure_client_id` with `azure_client_secret` in mint and
//! passthrough modes, `azure_tenant_id` and `azure_federated_token_file` with workload
//! identity). As OpenShift does, an init container (`azure-inject-credentials`, the
//! `/azure-config-credentials-injector` of the cloud controller manager operator's image)
//! merges them into a copy of the cloud config in an emptyDir, which the driver reads as
//! `/etc/kubernetes/cloud.conf`; the driver itself never sees the Secret. The pods are laid out
//! as OpenShift lays them out ([`OPENSHIFT_CONTROLLER_LAYOUT`], the volumes in the table): the
//! injector reads the Secret mounted as files (`--creds-path`), and the Secret's hash
//! annotation rolls the pods when it changes (the merge happens only at pod start); a change of
//! the cloud config does not roll them, as on OpenShift. The same on the controller and the
//! nodes.
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

use csi_kit::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, HostPathVolumeSource, PodSpec,
    SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

use crate::common::{
    driver_container, ds_pod_spec, literal, memory_volume, pod_spec, put_volume, set_env,
    unprivileged,
};
use crate::table::DriverError;

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
/// The cloud config the driver reads at `/etc/kubernetes/`: the injector's output, or the
/// source itself when nothing is injected.
const CLOUD_CONFIG_VOLUME: &str = "cloud-config";
const CLOUD_CONFIG_DIR: &str = "/etc/kubernetes/";
const INJECTOR_SOURCE_DIR: &str = "/etc/cloud-config";
const INJECTOR_OUTPUT_DIR: &str = "/etc/merged-cloud-config";
const INJECTOR_CREDENTIALS_DIR: &str = "/etc/azure/credentials";

/// The Azure Disk driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
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

/// How a pod lays out the cloud config and the credentials: volume names and where the
/// injector writes. The injector reads the Secret's files (`--creds-path`); on OpenShift it is
/// OpenShift's container exactly (no resource requests, pull policy or dropped capabilities its
/// template does not have).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The source cloud config when the injector merges it (mounted in the injector only).
    pub source_volume: &'static str,
    /// The emptyDir the injector writes and the driver reads at `/etc/kubernetes/`.
    pub merged_volume: &'static str,
    /// The credentials Secret (mounted in the injector only).
    pub credentials_volume: &'static str,
    /// Where the injector mounts [`Layout::merged_volume`].
    pub injector_output_dir: &'static str,
}

/// The controller as OpenShift lays it out (csi-operator's standalone assets of Azure Disk
/// and Azure File).
pub const OPENSHIFT_CONTROLLER_LAYOUT: Layout = Layout {
    source_volume: "src-cloud-config",
    merged_volume: CLOUD_CONFIG_VOLUME,
    credentials_volume: "cloud-sa-volume",
    injector_output_dir: "/etc/kubernetes",
};

/// The node pod as OpenShift lays it out: the injector writes elsewhere than on the
/// controller, into the same emptyDir.
pub const OPENSHIFT_NODE_LAYOUT: Layout = Layout {
    injector_output_dir: INJECTOR_OUTPUT_DIR,
    ..OPENSHIFT_CONTROLLER_LAYOUT
};

/// Mounts the cloud config in the driver container at `/etc/kubernetes/` and points
/// `AZURE_CREDENTIAL_FILE` at it. The source is the copy of `cloud_config` (key `config`) on
/// OpenShift or when it exists, else (plain Kubernetes) the node's
/// `/etc/kubernetes/azure.json`. When [`injects_credentials`], the driver reads the source
/// with `secret` merged into it by the [`INJECTOR_CONTAINER`] init container
/// ([`MERGED_CLOUD_CONFIG_FILE`]), else the source itself (volume `cloud-config`). On Azure
/// Stack Hub the source's `endpoints` key becomes `AZURE_ENVIRONMENT_FILEPATH`.
///
/// Volumes and mounts the pod already has (from the driver's table, in OpenShift's order) are
/// replaced where they stand; the others are added last.
pub fn mount_cloud_config_as(
    layout: &Layout,
    inputs: &Inputs,
    spec: &mut PodSpec,
    cloud_config: &str,
    secret: &str,
) {
    let copied = inputs.copied_config_maps.contains_key(cloud_config);
    let (source, file) = if copied || inputs.topology.is_openshift() {
        (
            Volume {
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
                host_path: Some(HostPathVolumeSource {
                    path: CLOUD_CONFIG_DIR.to_owned(),
                    type_: Some("DirectoryOrCreate".to_owned()),
                }),
                ..Volume::default()
            },
            "azure.json",
        )
    };
    let named = |name: &str, volume: &Volume| Volume {
        name: name.to_owned(),
        ..volume.clone()
    };
    let inject = injects_credentials(inputs, secret);
    let (source_volume, driver_reads) = if inject {
        put_volume(spec, named(layout.source_volume, &source));
        add_injector(layout, inputs, spec, file, secret);
        put_volume(
            spec,
            Volume {
                name: layout.merged_volume.to_owned(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            },
        );
        put_driver_mount(
            spec,
            read_only_mount(layout.merged_volume, CLOUD_CONFIG_DIR),
        );
        (layout.source_volume, MERGED_CLOUD_CONFIG_FILE.to_owned())
    } else {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| {
            v.name == CLOUD_CONFIG_VOLUME
                || ![
                    layout.source_volume,
                    layout.merged_volume,
                    layout.credentials_volume,
                ]
                .contains(&v.name.as_str())
        });
        if let Some(init) = spec.init_containers.as_mut() {
            init.retain(|c| c.name != INJECTOR_CONTAINER);
        }
        put_volume(spec, named(CLOUD_CONFIG_VOLUME, &source));
        put_driver_mount(spec, read_only_mount(CLOUD_CONFIG_VOLUME, CLOUD_CONFIG_DIR));
        (CLOUD_CONFIG_VOLUME, format!("{CLOUD_CONFIG_DIR}{file}"))
    };
    let stack_hub = is_azure_stack_hub(inputs);
    if let Some(container) = driver_container(spec) {
        put_env(container, literal("AZURE_CREDENTIAL_FILE", &driver_reads));
        if stack_hub {
            // Appended, as OpenShift's Azure Stack Hub hook appends them.
            set_env(
                container,
                literal("AZURE_ENVIRONMENT_FILEPATH", STACK_HUB_ENVIRONMENT_PATH),
            );
            let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
            mounts.retain(|m| m.mount_path != STACK_HUB_ENVIRONMENT_PATH);
            mounts.push(VolumeMount {
                sub_path: Some("endpoints".to_owned()),
                ..read_only_mount(source_volume, STACK_HUB_ENVIRONMENT_PATH)
            });
        }
    }
}

fn read_only_mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// Replaces the pod's volume of the same name where it stands, or adds `volume` last.
/// Replaces the driver container's mount at the same path where it stands, or adds `mount`
/// last.
fn put_driver_mount(spec: &mut PodSpec, mount: VolumeMount) {
    if let Some(container) = driver_container(spec) {
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        match mounts.iter_mut().find(|m| m.mount_path == mount.mount_path) {
            Some(m) => *m = mount,
            None => mounts.push(mount),
        }
    }
}

/// Replaces the variable of the same name where it stands, or adds `var` last.
fn put_env(container: &mut Container, var: EnvVar) {
    let env = container.env.get_or_insert_with(Vec::new);
    match env.iter_mut().find(|e| e.name == var.name) {
        Some(e) => *e = var,
        None => env.push(var),
    }
}

/// Adds (or replaces) the [`INJECTOR_CONTAINER`] init container, reading `file` of the
/// source cloud config and the keys of `secret`, writing the merged config into the
/// emptyDir. The Secret is mounted in it, as files.
fn add_injector(layout: &Layout, inputs: &Inputs, spec: &mut PodSpec, file: &str, secret: &str) {
    put_volume(
        spec,
        Volume {
            name: layout.credentials_volume.to_owned(),
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
    let args = vec![
        format!("--cloud-config-file-path={INJECTOR_SOURCE_DIR}/{file}"),
        format!(
            "--output-file-path={}/cloud.conf",
            layout.injector_output_dir
        ),
        // Only the Secret's identity, never the node's managed identity.
        "--disable-identity-extension-auth".to_owned(),
        // Takes effect only when the Secret has `azure_federated_token_file` (OpenShift's
        // operator always substitutes true too).
        "--enable-azure-workload-identity=true".to_owned(),
        format!("--creds-path={INJECTOR_CREDENTIALS_DIR}"),
    ];
    let mut injector = csi_kit::workloads::operand_container(INJECTOR_CONTAINER, image, args);
    injector.command = Some(vec!["/azure-config-credentials-injector".to_owned()]);
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    };
    injector.volume_mounts = Some(vec![
        mount(layout.source_volume, INJECTOR_SOURCE_DIR, true),
        mount(layout.merged_volume, layout.injector_output_dir, false),
        mount(layout.credentials_volume, INJECTOR_CREDENTIALS_DIR, true),
    ]);
    if inputs.topology.is_openshift() {
        injector.image_pull_policy = None;
        injector.resources = None;
    } else {
        unprivileged(&mut injector);
    }
    let init = spec.init_containers.get_or_insert_with(Vec::new);
    match init.iter_mut().find(|c| c.name == INJECTOR_CONTAINER) {
        Some(c) => *c = injector,
        None => init.push(injector),
    }
}

/// [`mount_cloud_config_as`] on the controller, with `azure-disk-credentials`, as OpenShift
/// lays it out; with a hosted control plane, [`from_hosted_cloud_config`].
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

/// The Secret HyperShift keeps in the control-plane namespace with Azure Disk's cloud config,
/// credentials included.
pub const HOSTED_CLOUD_CONFIG: &str = "azure-disk-csi-config";
/// The controller's volume of a bound service account token.
pub const BOUND_TOKEN_VOLUME: &str = "bound-sa-token";

/// With a hosted control plane the controller runs in the management cluster, where HyperShift
/// keeps the cloud config with the credentials merged in a Secret (`secret`): the driver reads
/// it where it reads the merged file standalone, and neither the injector nor the guest's
/// source ConfigMap and credentials Secret are needed. The token volume becomes a tmpfs, as
/// OpenShift's pod has it. The guest kubeconfig's volume is placed before the two, where
/// OpenShift's pod has it (the kit adds it otherwise).
pub fn from_hosted_cloud_config(spec: &mut PodSpec, secret: &str) {
    let layout = &OPENSHIFT_CONTROLLER_LAYOUT;
    if let Some(init) = spec.init_containers.as_mut() {
        init.retain(|c| c.name != INJECTOR_CONTAINER);
        if init.is_empty() {
            spec.init_containers = None;
        }
    }
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    volumes.retain(|v| {
        ![
            layout.source_volume,
            layout.merged_volume,
            layout.credentials_volume,
            BOUND_TOKEN_VOLUME,
        ]
        .contains(&v.name.as_str())
    });
    volumes.push(csi_kit::hosted::guest_kubeconfig_volume());
    volumes.push(memory_volume(BOUND_TOKEN_VOLUME));
    volumes.push(Volume {
        name: layout.merged_volume.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
}

/// [`mount_cloud_config_as`] on the nodes (the node plugin reads the cloud and zone from it).
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

/// Classes use `Premium_LRS` on OpenShift, as OpenShift's operator creates them (a class's
/// parameters cannot change, so taking one over must keep them), and on Azure Stack Hub, which
/// has no StandardSSD disks; the table's `StandardSSD_LRS` elsewhere.
pub fn with_stack_hub_sku(inputs: &Inputs, class: &mut StorageClass) {
    if inputs.topology.is_openshift() || is_azure_stack_hub(inputs) {
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
