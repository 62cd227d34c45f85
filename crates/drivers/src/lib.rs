//! The driver catalogue: one module per CSI driver, each a `DriverDef` table (embedded YAML)
//! plus the few hooks data cannot express. [`by_name`] finds a driver by its short name
//! (`gcp-pd`) or its CSI name (`pd.csi.storage.gke.io`).
//!
//! The files have an order, and each uses only files below it (no file uses one above it, so
//! a reader can start at the bottom), from the bottom up:
//! 1. Shared pieces that use no other file of the crate: `table` (parsing a driver's embedded
//!    table, and [`DriverError`]), `common` (the hooks' helpers on pod specs and containers),
//!    `http` (the HTTP client the cloud APIs share), `secrets` (the Secrets a driver's own
//!    code writes) and `vsphere_cloud_config` (the vSphere cloud config and credentials).
//! 2. The cloud APIs, on `http`: `aws_api`, `ibm_cloud`, `openstack_api`, `vcenter_api`.
//! 3. The drivers, one file each: `gcp_pd`, `aws_ebs`, `azure_disk`, `smb`, `powervs_block`,
//!    `openstack_cinder`, then those that build on another: `aws_efs` (on `aws_ebs`),
//!    `azure_file` (on `azure_disk`), `openstack_manila` (on `openstack_cinder` and
//!    `openstack_api`), `ibm_vpc_block` (on `ibm_cloud`), `aws_ebs_tags` (on `aws_ebs` and
//!    `aws_api`), and `vsphere_policy` (on `vcenter_api`) below `vsphere`, whose StorageClass
//!    hooks it provides.
//! 4. This file: the catalogue, which names every driver.

use csi_kit::DriverDef;
use k8s_openapi::api::rbac::v1::PolicyRule;

pub mod aws_api;
pub mod aws_ebs;
pub mod aws_ebs_tags;
pub mod aws_efs;
pub mod azure_disk;
pub mod azure_file;
mod common;
pub mod gcp_pd;
pub mod http;
pub mod ibm_cloud;
pub mod ibm_vpc_block;
pub mod openstack_api;
pub mod openstack_cinder;
pub mod openstack_manila;
pub mod powervs_block;
pub mod secrets;
pub mod smb;
mod table;
pub mod vcenter_api;
pub mod vsphere;
pub mod vsphere_cloud_config;
pub mod vsphere_policy;

pub use table::DriverError;

/// One catalogue entry.
struct Entry {
    short_name: &'static str,
    csi_name: &'static str,
    def: fn() -> Result<DriverDef, DriverError>,
}

const CATALOGUE: &[Entry] = &[
    Entry {
        short_name: gcp_pd::SHORT_NAME,
        csi_name: gcp_pd::CSI_NAME,
        def: gcp_pd::def,
    },
    Entry {
        short_name: aws_ebs::SHORT_NAME,
        csi_name: aws_ebs::CSI_NAME,
        def: aws_ebs::def,
    },
    Entry {
        short_name: azure_disk::SHORT_NAME,
        csi_name: azure_disk::CSI_NAME,
        def: azure_disk::def,
    },
    Entry {
        short_name: azure_file::SHORT_NAME,
        csi_name: azure_file::CSI_NAME,
        def: azure_file::def,
    },
    Entry {
        short_name: aws_efs::SHORT_NAME,
        csi_name: aws_efs::CSI_NAME,
        def: aws_efs::def,
    },
    Entry {
        short_name: smb::SHORT_NAME,
        csi_name: smb::CSI_NAME,
        def: smb::def,
    },
    Entry {
        short_name: ibm_vpc_block::SHORT_NAME,
        csi_name: ibm_vpc_block::CSI_NAME,
        def: ibm_vpc_block::def,
    },
    Entry {
        short_name: powervs_block::SHORT_NAME,
        csi_name: powervs_block::CSI_NAME,
        def: powervs_block::def,
    },
    Entry {
        short_name: openstack_cinder::SHORT_NAME,
        csi_name: openstack_cinder::CSI_NAME,
        def: openstack_cinder::def,
    },
    Entry {
        short_name: openstack_manila::SHORT_NAME,
        csi_name: openstack_manila::CSI_NAME,
        def: openstack_manila::def,
    },
    Entry {
        short_name: vsphere::SHORT_NAME,
        csi_name: vsphere::CSI_NAME,
        def: vsphere::def,
    },
];

/// The short names of every driver in the catalogue.
pub fn short_names() -> Vec<&'static str> {
    CATALOGUE.iter().map(|e| e.short_name).collect()
}

/// The driver with this short name or CSI driver name, with its hooks.
pub fn by_name(name: &str) -> Result<DriverDef, DriverError> {
    let entry = CATALOGUE
        .iter()
        .find(|e| e.short_name == name || e.csi_name == name)
        .ok_or_else(|| DriverError::Unknown {
            name: name.to_owned(),
            known: short_names().join(", "),
        })?;
    let def = (entry.def)()?;
    def.validate()?;
    Ok(def)
}

/// What the driver operator of `def` asks outside the cluster, if anything (Manila: the
/// cloud's share types, with the credentials read through `client`, which also writes the
/// driver's `csi-manila-secrets`).
pub fn probe(def: &DriverDef, client: kube::Client) -> Option<driver_operator::ProbeConfig> {
    (def.short_name == openstack_manila::SHORT_NAME).then(|| {
        openstack_manila::probe_with_secret(
            openstack_manila::OpenStackShareTypes::new(client.clone(), def),
            client,
            def,
            openstack_manila::PROBE_INTERVAL,
        )
    })
}

/// The driver's own controllers beside the kit's (IBM VPC Block: `SecretSync`, which writes
/// `storage-secret-store` through `client`; vSphere: `VMwareVSphereDriverStorageClassController`,
/// which makes the storage policy in each vCenter; AWS EBS with a hosted control plane
/// (`hosted`): `AWSEBSEBSVolumeTagsController`, which tags the volumes of the PVs with the
/// cluster's resource tags, through `client`, the guest's).
pub fn tasks(
    def: &DriverDef,
    client: kube::Client,
    hosted: bool,
) -> Vec<driver_operator::TaskConfig> {
    match def.short_name.as_str() {
        aws_ebs::SHORT_NAME if hosted => vec![aws_ebs_tags::task(client, def)],
        ibm_vpc_block::SHORT_NAME => vec![ibm_vpc_block::secret_sync(
            client,
            def,
            ibm_vpc_block::SYNC_INTERVAL,
        )],
        vsphere::SHORT_NAME => vec![vsphere_policy::task(std::sync::Arc::new(
            vsphere_policy::VCenterPolicyMaker,
        ))],
        _ => Vec::new(),
    }
}

/// What the driver operator of `def` adds to the kit's controllers: [`probe`] and [`tasks`]
/// (`hosted`: with a hosted control plane, `client` being the guest's).
pub fn extras(def: &DriverDef, client: kube::Client, hosted: bool) -> driver_operator::Extras {
    driver_operator::Extras {
        probe: probe(def, client.clone()),
        tasks: tasks(def, client, hosted),
    }
}

/// The Secret the driver's own code writes in its namespace, if any (Manila:
/// `csi-manila-secrets`; IBM VPC Block: `storage-secret-store`).
fn written_secret(def: &DriverDef) -> Option<&'static str> {
    match def.short_name.as_str() {
        openstack_manila::SHORT_NAME => Some(openstack_manila::CSI_SECRET),
        ibm_vpc_block::SHORT_NAME => Some(ibm_vpc_block::STORAGE_SECRET),
        _ => None,
    }
}

/// Rules the driver operator of `def` needs in its namespace beyond those of its rendered
/// operands (the Secret its own code writes: Manila's `csi-manila-secrets`, derived by the
/// probe, IBM VPC Block's `storage-secret-store`, derived by `SecretSync`). Creating cannot be
/// limited by name; the rest is by name.
pub fn extra_namespace_rules(def: &DriverDef) -> Vec<PolicyRule> {
    let Some(secret) = written_secret(def) else {
        return Vec::new();
    };
    let rule = |verbs: &[&str], names: Option<Vec<String>>| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        resource_names: names,
        ..PolicyRule::default()
    };
    vec![
        rule(&["create"], None),
        rule(&["get", "update", "patch"], Some(vec![secret.to_owned()])),
    ]
}

/// Rules the driver operator of `def` needs cluster-wide beyond those of its rendered
/// operands: reading (and for IBM watching), by name, the cloud config its own code reads (Manila: the CA bundle of
/// `openshift-config/cloud-provider-config`; IBM VPC Block:
/// `openshift-cloud-controller-manager/cloud-conf`), and what it writes (AWS EBS with a hosted
/// control plane, `hosted`: the hash annotation of the PVs whose volumes
/// `AWSEBSEBSVolumeTagsController` tagged; every driver operator may read PVs already).
pub fn extra_cluster_rules(def: &DriverDef, hosted: bool) -> Vec<PolicyRule> {
    // Manila reads its source when it checks; IBM's SecretSync also watches it.
    let (config_map, verbs) = match def.short_name.as_str() {
        openstack_manila::SHORT_NAME => (openstack_manila::CLOUD_CONFIG.1, &["get"][..]),
        ibm_vpc_block::SHORT_NAME => (ibm_vpc_block::CLOUD_CONF.1, &["get", "list", "watch"][..]),
        aws_ebs::SHORT_NAME if hosted => {
            return vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["persistentvolumes".to_owned()]),
                verbs: vec!["patch".to_owned()],
                ..PolicyRule::default()
            }];
        }
        _ => return Vec::new(),
    };
    vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".to_owned()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        resource_names: Some(vec![config_map.to_owned()]),
        ..PolicyRule::default()
    }]
}
