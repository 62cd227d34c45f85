//! Taking over a driver that OpenShift's Go operator installed (GCP PD, AWS EBS, AWS EFS, SMB,
//! OpenStack Cinder, OpenStack Manila, Azure Disk, Azure File): the cluster is
//! seeded with what that operator creates (its generated assets, `tests/fixtures/openshift/
//! <driver>`, with the values its run-time hooks add), written as it writes them (plain creates,
//! field manager `<driver>-csi-driver-operator`). Then our operator starts on the same cluster.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

#[path = "openshift_parity/fixtures.rs"]
mod fixtures;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use driver_operator::Settings;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster, SimConfig};

/// The driver namespace (where most drivers' operands live).
const NS: &str = "openshift-cluster-csi-drivers";
const AGENT: &str = "driver-operator";
const INFRA: &str = "demo-x7k2p";

/// One driver OpenShift's operator installed, and what taking it over must give.
struct Case {
    /// Our short name.
    short: &'static str,
    /// The fixture directory (OpenShift's overlay name).
    fixture: &'static str,
    /// The CSI driver (and ClusterCSIDriver) name.
    driver: &'static str,
    /// Its conditions' prefix.
    prefix: &'static str,
    /// The field manager OpenShift's operator writes as (its binary's name).
    former: &'static str,
    /// The Infrastructure's platform status.
    platform: fn() -> Value,
    /// What OpenShift's operator's run-time hooks add to its assets.
    hooks: fn(&mut Value),
    /// The metrics Service's ports.
    metrics_ports: &'static [(&'static str, i32)],
    /// The driver's StorageClasses.
    classes: &'static [&'static str],
    /// OpenShift's objects we do not render (listed in the driver's
    /// `openshift-differences.yaml`): deleted as the replaced operator's leftovers.
    not_rendered: &'static [&'static str],
    /// ClusterRoles of ours OpenShift has no counterpart of under any name (listed only-ours
    /// in the driver's `openshift-differences.yaml`).
    own_roles: &'static [&'static str],
    /// Whether our controller's pod template is OpenShift's (no controller pod restarts on
    /// takeover); false where the driver's differences list a pod template difference (each
    /// case says which).
    same_controller_template: bool,
    /// Whether our DaemonSets' pod templates are OpenShift's (no node pod restarts on
    /// takeover); false where the driver's differences list a pod template difference (each
    /// case says which).
    same_node_templates: bool,
    /// What the cluster has besides the driver's operands (the cloud config, the credentials
    /// cloud-credential-operator wrote), created by an admin.
    seeds: fn() -> Vec<Value>,
    /// Operands OpenShift's operator writes at run time (not in its assets), as it writes them.
    runtime_operands: fn() -> Vec<Value>,
    /// The share types the cloud offers (Manila's probe), for a driver that asks.
    share_types: &'static [&'static str],
    /// Whether the driver makes a storage policy in its cloud first (vSphere's
    /// StorageClassController): a fake vCenter where it exists already.
    storage_policy: bool,
    /// Whether the driver's operator writes a Secret from what it asks its cloud (IBM VPC
    /// Block's SecretSync, against [`fake_ibm_cloud`]).
    secret_sync: bool,
}

impl Case {
    fn def(&self) -> csi_kit::DriverDef {
        drivers::by_name(self.short).unwrap()
    }

    /// Where the driver's operands live.
    fn namespace(&self) -> String {
        self.def().namespace
    }

    /// The names of the driver's DaemonSets: the node plugin's, then any other.
    fn daemon_sets(&self) -> Vec<String> {
        let def = self.def();
        std::iter::once(csi_kit::names::node(&def))
            .chain(
                def.hooks
                    .extra_daemon_sets
                    .iter()
                    .map(|e| e.name.to_owned()),
            )
            .collect()
    }
}

const GCP_PD: Case = Case {
    short: "gcp-pd",
    fixture: "gcp-pd",
    driver: "pd.csi.storage.gke.io",
    prefix: "GCPPD",
    former: "gcp-pd-csi-driver-operator",
    platform: || json!({"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}),
    hooks: |o| {
        // The cluster's labels on every disk.
        if o["kind"] == "Deployment" {
            let driver = &mut o["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(driver["name"], "csi-driver");
            driver["args"].as_array_mut().unwrap().push(json!(format!(
                "--extra-labels=kubernetes-io-cluster-{INFRA}=owned"
            )));
        }
    },
    metrics_ports: &[
        ("provisioner-m", 9202),
        ("attacher-m", 9203),
        ("resizer-m", 9204),
        ("snapshotter-m", 9205),
    ],
    classes: &["ssd-csi", "standard-csi"],
    not_rendered: &[],
    own_roles: &[],
    same_controller_template: true,
    same_node_templates: true,
    seeds: Vec::new,
    runtime_operands: Vec::new,
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

/// The credentials cloud-credential-operator wrote for AWS EBS in mint mode.
const AWS_EBS_CREDENTIALS: [(&str, &str); 2] = [
    ("aws_access_key_id", "AKIAEXAMPLEMINTED01"),
    ("aws_secret_access_key", "minted-ebs-secret"),
];

/// library-go's hash annotation of Secret `name` with `data`, on a workload and its pods.
fn annotate_secret_hash(o: &mut Value, name: &str, data: &[(&str, &str)]) {
    use csi_kit::hash::{HashedKind, annotation_key, secret_data_hash};
    let data: BTreeMap<String, Vec<u8>> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
        .collect();
    let key = annotation_key(NS, name, HashedKind::Secret);
    let hash = secret_data_hash(Some(&data));
    o["spec"]["template"]["metadata"]["annotations"][&key] = json!(hash);
    o["metadata"]["annotations"][&key] = json!(hash);
}

/// A Secret of the driver namespace with `data`, as cloud-credential-operator writes it.
fn credentials_secret(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": NS},
           "stringData": data})
}

const AWS_EBS: Case = Case {
    short: "aws-ebs",
    fixture: "aws-ebs",
    driver: "ebs.csi.aws.com",
    prefix: "AWSEBS",
    former: "aws-ebs-csi-driver-operator",
    platform: || json!({"type": "AWS", "aws": {"region": "us-east-2"}}),
    hooks: |o| {
        // withAWSRegion appends the region to the controller's driver; library-go's hash
        // annotation of the credentials Secret, which OpenShift's operator watches for the
        // Deployment only (the metrics certificate's too, but service-ca has not made it
        // here). No resource tags, custom endpoint or CA bundle on this cluster.
        if o["kind"] == "Deployment" {
            let driver = &mut o["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(driver["name"], "csi-driver");
            driver["env"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "AWS_REGION", "value": "us-east-2"}));
            annotate_secret_hash(o, "ebs-cloud-credentials", &AWS_EBS_CREDENTIALS);
        }
    },
    metrics_ports: &[
        ("provisioner-m", 9202),
        ("attacher-m", 9203),
        ("resizer-m", 9204),
        ("snapshotter-m", 9205),
        ("driver-m", 9201),
    ],
    classes: &["gp2-csi", "gp3-csi"],
    not_rendered: &[],
    own_roles: &[],
    // OpenShift's operator turns the credentials into a config file with an init container
    // running its own script; we pass them to the driver as variables instead (see
    // aws_ebs.openshift-differences.yaml): the controller pods roll once.
    same_controller_template: false,
    same_node_templates: true,
    seeds: || {
        vec![credentials_secret(
            "ebs-cloud-credentials",
            &AWS_EBS_CREDENTIALS,
        )]
    },
    runtime_operands: Vec::new,
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

/// The credentials cloud-credential-operator wrote for AWS EFS in mint mode: the controller's
/// and the node plugin's (its own CredentialsRequest).
const AWS_EFS_CREDENTIALS: [(&str, &str); 2] = [
    ("aws_access_key_id", "AKIAEXAMPLEMINTED02"),
    ("aws_secret_access_key", "minted-efs-secret"),
];
const AWS_EFS_NODE_CREDENTIALS: [(&str, &str); 2] = [
    ("aws_access_key_id", "AKIAEXAMPLEMINTED03"),
    ("aws_secret_access_key", "minted-efs-node-secret"),
];

const AWS_EFS: Case = Case {
    short: "aws-efs",
    fixture: "aws-efs",
    driver: "efs.csi.aws.com",
    prefix: "AWSEFS",
    former: "aws-efs-csi-driver-operator",
    platform: || json!({"type": "AWS", "aws": {"region": "us-east-2"}}),
    hooks: |o| {
        // library-go's hash annotations of the Secrets OpenShift's operator watches: the
        // controller's credentials for the Deployment, the node's for the DaemonSet (the
        // metrics certificate's too on the Deployment, but service-ca has not made it here);
        // and its FIPS hooks' FIPS_ENABLED on both drivers (a host without FIPS).
        let secret = match o["kind"].as_str() {
            Some("Deployment") => ("aws-efs-cloud-credentials", &AWS_EFS_CREDENTIALS),
            Some("DaemonSet") => ("node-aws-efs-cloud-credentials", &AWS_EFS_NODE_CREDENTIALS),
            _ => return,
        };
        let driver = &mut o["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(driver["name"], "csi-driver");
        driver["env"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "FIPS_ENABLED", "value": "false"}));
        annotate_secret_hash(o, secret.0, secret.1);
    },
    metrics_ports: &[("provisioner-m", 9212)],
    classes: &[],
    not_rendered: &[],
    own_roles: &[],
    // The credentials are passed as variables, not by OpenShift's init container (see
    // aws_efs.openshift-differences.yaml); also our controller's driver gets AWS_REGION from
    // Infrastructure, which OpenShift's AWS EFS operator does not set (it does not show in
    // openshift_parity, which renders without a platform status).
    same_controller_template: false,
    same_node_templates: false,
    seeds: || {
        vec![
            credentials_secret("aws-efs-cloud-credentials", &AWS_EFS_CREDENTIALS),
            credentials_secret("node-aws-efs-cloud-credentials", &AWS_EFS_NODE_CREDENTIALS),
        ]
    },
    runtime_operands: Vec::new,
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

const SMB: Case = Case {
    short: "smb",
    fixture: "samba",
    driver: "smb.csi.k8s.io",
    prefix: "SMB",
    former: "smb-csi-driver-operator",
    platform: || json!({"type": "None"}),
    hooks: |_| {},
    metrics_ports: &[
        ("provisioner-m", 9222),
        ("resizer-m", 9223),
        ("driver-m", 9221),
    ],
    classes: &[],
    not_rendered: &[],
    own_roles: &[],
    same_controller_template: true,
    same_node_templates: true,
    seeds: Vec::new,
    runtime_operands: Vec::new,
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

/// The installer's cloud config of an OpenStack cluster.
const OPENSTACK_CLOUD_CONFIG: &str = "[Global]\nsecret-name = openstack-credentials\nsecret-namespace = kube-system\nregion = regionOne\n[BlockStorage]\nignore-volume-az = false\n";

/// The credentials cloud-credential-operator wrote.
const OPENSTACK_CLOUDS_YAML: &str = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example.com:5000\n    region_name: regionOne\n";

/// The cloud.conf OpenShift's operator generated from [`OPENSTACK_CLOUD_CONFIG`] (go-ini's
/// layout: the kept section first, `=` aligned).
const OPENSHIFT_CINDER_CLOUD_CONF: &str = "[BlockStorage]\nignore-volume-az = false\n\n[Global]\nuse-clouds  = true\nclouds-file = /etc/kubernetes/secret/clouds.yaml\ncloud       = openstack\n";

const OPENSTACK_CINDER: Case = Case {
    short: "openstack-cinder",
    fixture: "openstack-cinder",
    driver: "cinder.csi.openstack.org",
    prefix: "OpenStackCinder",
    former: "openstack-cinder-csi-driver-operator",
    platform: || json!({"type": "OpenStack", "openstack": {}}),
    hooks: |o| {
        // library-go's hash annotations: cloud-conf as OpenShift's operator wrote it and the
        // credentials, on both workloads (the metrics certificate's too on the Deployment, but
        // service-ca has not made it here).
        if matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet")) {
            use csi_kit::hash::{
                HashedKind, annotation_key, config_map_data_hash, secret_data_hash,
            };
            let cloud_conf: BTreeMap<String, String> = [
                ("cloud.conf", OPENSHIFT_CINDER_CLOUD_CONF),
                ("enable_topology", "true"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
            let credentials = BTreeMap::from([(
                "clouds.yaml".to_owned(),
                OPENSTACK_CLOUDS_YAML.as_bytes().to_vec(),
            )]);
            for (key, hash) in [
                (
                    annotation_key(NS, "cloud-conf", HashedKind::ConfigMap),
                    config_map_data_hash(Some(&cloud_conf)),
                ),
                (
                    annotation_key(NS, "openstack-cloud-credentials", HashedKind::Secret),
                    secret_data_hash(Some(&credentials)),
                ),
            ] {
                o["spec"]["template"]["metadata"]["annotations"][&key] = json!(hash);
                o["metadata"]["annotations"][&key] = json!(hash);
            }
        }
    },
    metrics_ports: &[
        ("provisioner-m", 9203),
        ("attacher-m", 9204),
        ("resizer-m", 9205),
        ("snapshotter-m", 9206),
        ("driver-m", 9202),
    ],
    classes: &["standard-csi"],
    not_rendered: &[],
    own_roles: &[],
    // cloud.conf is written as OpenShift's operator writes it, so its hash on the pod templates
    // is the same too.
    same_controller_template: true,
    same_node_templates: true,
    seeds: || {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cloud-provider-config", "namespace": "openshift-config"},
                   "data": {"config": OPENSTACK_CLOUD_CONFIG}}),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "openstack-cloud-credentials", "namespace": NS},
                   "stringData": {"clouds.yaml": OPENSTACK_CLOUDS_YAML}}),
        ]
    },
    runtime_operands: || {
        vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cloud-conf", "namespace": NS},
        "data": {
            "cloud.conf": OPENSHIFT_CINDER_CLOUD_CONF,
            "enable_topology": "true",
        }})]
    },
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

/// Manila's namespace on OpenShift.
const MANILA_NS: &str = "openshift-manila-csi-driver";

/// The credentials cloud-credential-operator wrote for the Manila driver's pods.
const MANILA_CLOUDS_YAML: &str = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example.com:5000/v3\n      username: shift\n      password: secret\n      project_name: shift\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: regionOne\n    cacert: /etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem\n";

const OPENSTACK_MANILA: Case = Case {
    short: "openstack-manila",
    fixture: "openstack-manila",
    driver: "manila.csi.openstack.org",
    prefix: "Manila",
    former: "openstack-manila-csi-driver-operator",
    platform: || json!({"type": "OpenStack", "openstack": {}}),
    hooks: |_| {},
    metrics_ports: &[
        ("provisioner-m", 9203),
        ("resizer-m", 9204),
        ("snapshotter-m", 9205),
    ],
    classes: &["csi-manila-default"],
    not_rendered: &[],
    own_roles: &[],
    same_controller_template: true,
    same_node_templates: true,
    seeds: || {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cloud-provider-config", "namespace": "openshift-config"},
                   "data": {"config": OPENSTACK_CLOUD_CONFIG, "ca-bundle.pem": "PEM"}}),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "manila-cloud-credentials", "namespace": MANILA_NS},
                   "stringData": {"clouds.yaml": MANILA_CLOUDS_YAML}}),
        ]
    },
    runtime_operands: || {
        // Its resource sync controller's copy of the cloud config, and the class of the
        // cloud's one share type.
        let secret = |key: &str| format!("csi.storage.k8s.io/{key}-secret");
        let mut parameters = serde_json::Map::new();
        parameters.insert("type".to_owned(), json!("default"));
        for role in [
            "provisioner",
            "node-stage",
            "node-publish",
            "controller-expand",
        ] {
            parameters.insert(
                format!("{}-name", secret(role)),
                json!("csi-manila-secrets"),
            );
            parameters.insert(format!("{}-namespace", secret(role)), json!(MANILA_NS));
        }
        vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cloud-provider-config", "namespace": MANILA_NS},
                   "data": {"config": OPENSTACK_CLOUD_CONFIG, "ca-bundle.pem": "PEM"}}),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "csi-manila-default"},
                   "provisioner": "manila.csi.openstack.org",
                   "parameters": parameters,
                   "reclaimPolicy": "Delete",
                   "volumeBindingMode": "Immediate",
                   "allowVolumeExpansion": true}),
        ]
    },
    share_types: &["default"],
    storage_policy: false,
    secret_sync: false,
};

/// The installer's cloud config of an Azure cluster (`openshift-config/cloud-provider-config`).
const AZURE_CLOUD_CONFIG: &str = r#"{"cloud":"AzurePublicCloud","tenantId":"6f2d1e0c-0000-4000-8000-000000000001","subscriptionId":"0b2d1f3c-1111-2222-3333-444455556666","resourceGroup":"demo-x7k2p-rg","location":"eastus","vnetName":"demo-x7k2p-vnet","subnetName":"demo-x7k2p-worker-subnet","securityGroupName":"demo-x7k2p-nsg","routeTableName":"demo-x7k2p-node-routetable","useManagedIdentityExtension":true,"useInstanceMetadata":true,"loadBalancerSku":"standard"}"#;

/// The credentials cloud-credential-operator wrote for Azure Disk in mint mode.
const AZURE_DISK_CREDENTIALS: [(&str, &str); 7] = [
    ("azure_client_id", "1c0d2e3f-aaaa-4bbb-8ccc-ddddeeeeffff"),
    ("azure_client_secret", "minted-secret"),
    ("azure_region", "eastus"),
    ("azure_resource_prefix", "demo-x7k2p"),
    ("azure_resourcegroup", "demo-x7k2p-rg"),
    (
        "azure_subscription_id",
        "0b2d1f3c-1111-2222-3333-444455556666",
    ),
    ("azure_tenant_id", "6f2d1e0c-0000-4000-8000-000000000001"),
];

const AZURE_DISK: Case = Case {
    short: "azure-disk",
    fixture: "azure-disk",
    driver: "disk.csi.azure.com",
    prefix: "AzureDisk",
    former: "azure-disk-csi-driver-operator",
    platform: || {
        json!({"type": "Azure", "azure": {
            "cloudName": "AzurePublicCloud",
            "resourceGroupName": "demo-x7k2p-rg",
            "networkResourceGroupName": "demo-x7k2p-rg"}})
    },
    hooks: |o| {
        // library-go's hash annotation of the credentials Secret, which OpenShift's operator
        // watches for both workloads (the metrics certificate's too on the Deployment, but
        // service-ca has not made it here); it watches no ConfigMap.
        if matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet")) {
            annotate_secret_hash(o, "azure-disk-credentials", &AZURE_DISK_CREDENTIALS);
        }
    },
    metrics_ports: &[
        ("provisioner-m", 9202),
        ("attacher-m", 9203),
        ("resizer-m", 9204),
        ("snapshotter-m", 9205),
        ("driver-m", 9201),
    ],
    classes: &["managed-csi"],
    not_rendered: &[
        "ClusterRole/azure-disk-csi-driver-node-clusterrole",
        "ClusterRoleBinding/azure-disk-csi-driver-node-clusterrolebinding",
    ],
    own_roles: &[],
    // The credentials Secret's hash included.
    same_controller_template: true,
    same_node_templates: true,
    seeds: || {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cloud-provider-config", "namespace": "openshift-config"},
                   "data": {"config": AZURE_CLOUD_CONFIG}}),
            credentials_secret("azure-disk-credentials", &AZURE_DISK_CREDENTIALS),
        ]
    },
    runtime_operands: || {
        // Its resource sync controller's copy of the cloud config.
        vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "azure-cloud-config", "namespace": NS},
                    "data": {"config": AZURE_CLOUD_CONFIG}})]
    },
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

/// The credentials cloud-credential-operator wrote for Azure File in mint mode.
const AZURE_FILE_CREDENTIALS: [(&str, &str); 7] = [
    ("azure_client_id", "2d1e3f40-bbbb-4ccc-8ddd-eeeeffff0000"),
    ("azure_client_secret", "minted-file-secret"),
    ("azure_region", "eastus"),
    ("azure_resource_prefix", "demo-x7k2p"),
    ("azure_resourcegroup", "demo-x7k2p-rg"),
    (
        "azure_subscription_id",
        "0b2d1f3c-1111-2222-3333-444455556666",
    ),
    ("azure_tenant_id", "6f2d1e0c-0000-4000-8000-000000000001"),
];

const AZURE_FILE: Case = Case {
    short: "azure-file",
    fixture: "azure-file",
    driver: "file.csi.azure.com",
    prefix: "AzureFile",
    former: "azure-file-csi-driver-operator",
    platform: AZURE_DISK.platform,
    hooks: |o| {
        // As Azure Disk's: library-go's hash annotation of the credentials Secret, which
        // OpenShift's operator watches for both workloads (the metrics certificate's too on
        // the Deployment, but service-ca has not made it here); it watches no ConfigMap.
        if matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet")) {
            annotate_secret_hash(o, "azure-file-credentials", &AZURE_FILE_CREDENTIALS);
        }
    },
    metrics_ports: &[
        ("provisioner-m", 9212),
        ("attacher-m", 9213),
        ("resizer-m", 9214),
        ("snapshotter-m", 9215),
        ("driver-m", 9211),
    ],
    classes: &["azurefile-csi"],
    not_rendered: &[],
    own_roles: &[],
    // The credentials Secret's hash included.
    same_controller_template: true,
    same_node_templates: true,
    seeds: || {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cloud-provider-config", "namespace": "openshift-config"},
                   "data": {"config": AZURE_CLOUD_CONFIG}}),
            credentials_secret("azure-file-credentials", &AZURE_FILE_CREDENTIALS),
        ]
    },
    runtime_operands: AZURE_DISK.runtime_operands,
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

/// The vSphere cloud config of an installer-made cluster with failure domains (topology on).
const VSPHERE_CLOUD_CONFIG: &str = "[Global]\nsecret-name = vsphere-creds\nsecret-namespace = kube-system\ninsecure-flag = 1\n[Workspace]\nserver = vc.example.com\ndatacenter = dc1\ndefault-datastore = ds1\nfolder = /dc1/vm/x\n[VirtualCenter \"vc.example.com\"]\ndatacenters = dc1\n[Labels]\nregion = openshift-region\nzone = openshift-zone\n";

/// What OpenShift's vSphere operator writes into Secret vsphere-csi-config-secret for it.
const OPENSHIFT_VSPHERE_CSI_CONF: &str = "# Labels with topology values are added dynamically via operator\n\n[Global]\ncluster-id = \"demo-x7k2p\"\n\n# Populate VCenters (multi) after here\n[VirtualCenter \"vc.example.com\"]\ninsecure-flag = true\ndatacenters = dc1\npassword = \"p\"\nuser = \"u\"\n\n[Labels]\ntopology-categories = \"openshift-region,openshift-zone\"";

const VSPHERE: Case = Case {
    short: "vsphere",
    fixture: "vsphere",
    driver: "csi.vsphere.vmware.com",
    prefix: "VMwareVSphere",
    former: "vmware-vsphere-csi-driver-operator",
    platform: || json!({"type": "VSphere", "vsphere": {}}),
    hooks: |o| {
        match o["kind"].as_str() {
            // Its topology hook (categories from [Labels]) on the provisioner, and library-go's
            // hash of the config Secret on both workloads.
            Some("Deployment") => {
                for c in o["spec"]["template"]["spec"]["containers"]
                    .as_array_mut()
                    .unwrap()
                {
                    if c["name"] == "csi-provisioner" {
                        let args = c["args"].as_array_mut().unwrap();
                        args.push(json!("--feature-gates=Topology=true"));
                        args.push(json!("--strict-topology"));
                    }
                }
                annotate_secret_hash(
                    o,
                    "vsphere-csi-config-secret",
                    &[("cloud.conf", OPENSHIFT_VSPHERE_CSI_CONF)],
                );
            }
            Some("DaemonSet") => annotate_secret_hash(
                o,
                "vsphere-csi-config-secret",
                &[("cloud.conf", OPENSHIFT_VSPHERE_CSI_CONF)],
            ),
            // The config it generates (its asset has an empty one).
            Some("Secret") if o["metadata"]["name"] == "vsphere-csi-config-secret" => {
                o["data"] = json!({});
                o["stringData"] = json!({"cloud.conf": OPENSHIFT_VSPHERE_CSI_CONF});
            }
            // Its driver features controller: there are topology categories.
            Some("ConfigMap")
                if o["metadata"]["name"] == "internal-feature-states.csi.vsphere.vmware.com" =>
            {
                o["data"]["improved-volume-topology"] = json!("true");
            }
            _ => {}
        }
    },
    metrics_ports: &[
        ("driver-m", 442),
        ("provisioner-m", 443),
        ("attacher-m", 444),
        ("resizer-m", 445),
        ("syncer-m", 446),
        ("snapshotter-m", 447),
    ],
    classes: &["thin-csi"],
    not_rendered: &["ClusterRoleBinding/vmware-vsphere-controller-privileged-binding"],
    own_roles: &[],
    // The templates are OpenShift's but for the hash of the config Secret: ours writes
    // csi-vsphere.conf in its own layout (deliberate, see vsphere.openshift-differences.yaml),
    // so the controller pods roll once. OpenShift also puts that hash on the node DaemonSet,
    // whose pods do not read the file; ours does not (a new vCenter password restarts no node
    // plugin), so the node pods roll once too.
    same_controller_template: false,
    same_node_templates: false,
    seeds: || {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-config"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cloud-provider-config", "namespace": "openshift-config"},
                   "data": {"config": VSPHERE_CLOUD_CONFIG}}),
            credentials_secret(
                "vmware-vsphere-cloud-credentials",
                &[
                    ("vc.example.com.username", "u"),
                    ("vc.example.com.password", "p"),
                ],
            ),
        ]
    },
    runtime_operands: Vec::new,
    share_types: &[],
    storage_policy: true,
    secret_sync: false,
};

/// The cloud config of an IBM Cloud cluster (openshift-cloud-controller-manager/cloud-conf).
const IBM_CLOUD_CONF: &str = "[global]\nversion = 1.1.0\n[kubernetes]\nconfig-file = \"\"\n[provider]\naccountID = 1a2b3c\nclusterID = demo-x7k2p\ncluster-default-provider = g2\nregion = us-south\ng2Credentials = /etc/vpc/ibmcloud_api_key\ng2ResourceGroupName = demo-x7k2p-rg\n";

/// The driver's credentials as OpenShift's IBM VPC operator's secret sync writes them.
const IBM_VPC_STORAGE_SECRET: &str = "[VPC]\n  iam_client_id = \"bx\"\n  g2_resource_group_id = \"rg-0001\"\n  g2_api_key = \"minted-ibm-key\"\n  provider_type = \"g2\"\n";

const IBM_VPC_BLOCK: Case = Case {
    short: "ibm-vpc-block",
    fixture: "ibm-vpc-block",
    driver: "vpc.block.csi.ibm.io",
    prefix: "IBMVPCBlock",
    former: "ibm-vpc-block-csi-driver-operator",
    platform: || {
        json!({"type": "IBMCloud", "ibmcloud": {
            "location": "us-south", "resourceGroupName": "demo-x7k2p-rg",
            "serviceEndpoints": [{"name": "IAM", "url": fake_ibm_cloud()},
                                 {"name": "ResourceManager", "url": format!("{}/", fake_ibm_cloud())}]}})
    },
    hooks: |_| {},
    metrics_ports: &[
        ("provisioner-m", 9202),
        ("attacher-m", 9203),
        ("resizer-m", 9204),
        ("snapshotter-m", 9205),
        ("driver-m", 9206),
    ],
    // OpenShift's three and ours besides (listed in ibm_vpc_block.openshift-differences).
    classes: &[
        "ibmc-vpc-block-10iops-tier",
        "ibmc-vpc-block-5iops-tier",
        "ibmc-vpc-block-custom",
        "ibmc-vpc-block-general-purpose",
        "ibmc-vpc-block-retain-10iops-tier",
        "ibmc-vpc-block-retain-5iops-tier",
        "ibmc-vpc-block-retain-custom",
        "ibmc-vpc-block-retain-general-purpose",
    ],
    not_rendered: &[
        "ClusterRole/vpc-block-initcontainer-role",
        "ClusterRoleBinding/vpc-block-initcontainer-binding",
        "ClusterRoleBinding/ibm-vpc-block-csi-configmap-and-secret-reader-provisioner-binding",
    ],
    own_roles: &[],
    // Controller pod template differences (ibm_vpc_block.openshift-differences.yaml): the
    // sidecars' leader election (two replicas) and the kit's read-only root file systems,
    // which ours keeps. The node plugin's template is OpenShift's but for the hash of
    // storage-secret-store, which ours puts on both workloads so that new IBM Cloud
    // credentials reach the drivers (OpenShift's operator puts none: its pods keep the old
    // key until restarted); so the node pods roll once.
    same_controller_template: false,
    same_node_templates: false,
    seeds: || {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "openshift-cloud-controller-manager"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cloud-conf", "namespace": "openshift-cloud-controller-manager"},
                   "data": {"cloud.conf": IBM_CLOUD_CONF}}),
            credentials_secret(
                "ibm-cloud-credentials",
                &[("ibmcloud_api_key", "minted-ibm-key")],
            ),
        ]
    },
    runtime_operands: || {
        // Its secret sync's Secret, which ours adopts and writes anew from what it asks IBM
        // Cloud.
        vec![json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "storage-secret-store", "namespace": NS},
                    "stringData": {"slclient.toml": IBM_VPC_STORAGE_SECRET}})]
    },
    share_types: &[],
    storage_policy: false,
    secret_sync: true,
};

const POWERVS_BLOCK: Case = Case {
    short: "powervs-block",
    fixture: "powervs-block",
    driver: "powervs.csi.ibm.com",
    prefix: "PowerVSBlock",
    former: "ibm-powervs-block-csi-driver-operator",
    platform: || json!({"type": "PowerVS", "powervs": {"region": "dal", "zone": "dal12"}}),
    hooks: |_| {},
    metrics_ports: &[
        ("provisioner-m", 443),
        ("attacher-m", 444),
        ("resizer-m", 445),
    ],
    classes: &["ibm-powervs-tier1", "ibm-powervs-tier3"],
    not_rendered: &[
        "ClusterRole/ibm-powervs-block-csi-node-role",
        "ClusterRoleBinding/ibm-powervs-block-csi-node-binding",
    ],
    // The node-update-controller's Node writes, which OpenShift's grants nowhere (deliberate
    // in powervs_block.openshift-differences.yaml).
    own_roles: &["ibm-powervs-block-node-update-controller-role"],
    // The controller's template differs deliberately (powervs_block.openshift-differences.yaml:
    // the kit's read-only root file systems and the node-update-controller's hardening, the
    // credentials Secret of cloud-sa-volume); the node plugin's template is OpenShift's.
    same_controller_template: false,
    same_node_templates: true,
    seeds: || {
        vec![credentials_secret(
            "ibm-powervs-cloud-credentials",
            &[("ibmcloud_api_key", "minted-powervs-key")],
        )]
    },
    runtime_operands: Vec::new,
    share_types: &[],
    storage_policy: false,
    secret_sync: false,
};

/// What OpenShift's operator has written on an HA cluster in a regular region with the
/// default (Intermediate) TLS profile: its assets with every placeholder substituted, plus what
/// its hooks add (2 replicas, library-go's spec hashes, the driver's own), without GCP PD's
/// Hyperdisk class (selected only in GCP Dedicated regions) and the CredentialsRequests (the
/// cloud-credential API is not served here).
fn openshift_objects(case: &Case) -> Vec<Value> {
    let tls = csi_kit::tls::serving_tls(None).unwrap();
    let mut substitutions = fixtures::common_substitutions(
        &case.namespace(),
        &tls.cipher_suites,
        tls.min_version.as_deref().unwrap(),
    );
    for (var, image) in fixtures::release_images() {
        substitutions.push((format!("${{{var}}}"), image));
    }
    substitutions.push(("${CLUSTER_ID}".to_owned(), INFRA.to_owned()));
    // vSphere's StorageClassController names the policy it made.
    substitutions.push((
        "${STORAGE_POLICY_NAME}".to_owned(),
        format!("openshift-storage-policy-{INFRA}"),
    ));
    let mut objects = fixtures::load(case.fixture, &substitutions);
    objects.extend((case.runtime_operands)());
    fixtures::as_openshift_wrote(&mut objects);
    for o in &mut objects {
        (case.hooks)(o);
    }
    objects
}

async fn create_crd(client: &Client, crd: CustomResourceDefinition) {
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

/// An OpenShift cluster on the case's platform with three nodes, the workload simulation
/// running, and the driver as OpenShift's operator left it.
async fn cluster_taken_over_from_openshift(case: &Case) -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    for crd in api::crds::all() {
        if ["ClusterCSIDriver", "Infrastructure", "Proxy"].contains(&crd.spec.names.kind.as_str()) {
            create_crd(&admin, crd).await;
        }
    }
    create_crd(
        &admin,
        <api::config_v1::APIServer as kube::CustomResourceExt>::crd(),
    )
    .await;
    create_crd(
        &admin,
        fixtures::open_crd(
            "monitoring.coreos.com",
            "ServiceMonitor",
            "servicemonitors",
            true,
        ),
    )
    .await;
    create_crd(
        &admin,
        fixtures::open_crd(
            "snapshot.storage.k8s.io",
            "VolumeSnapshotClass",
            "volumesnapshotclasses",
            false,
        ),
    )
    .await;
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": INFRA, "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": (case.platform)()}
    });
    let infrastructures: Api<api::config_v1::Infrastructure> = Api::all(admin.clone());
    infrastructures
        .create(
            &PostParams::default(),
            &serde_json::from_value(infrastructure.clone()).unwrap(),
        )
        .await
        .unwrap();
    infrastructures
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    let mut namespaces = vec![NS.to_owned(), case.namespace()];
    namespaces.dedup();
    for namespace in namespaces {
        Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
                )
                .unwrap(),
            )
            .await
            .unwrap();
    }
    Api::<ClusterCSIDriver>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": case.driver}, "spec": {"managementState": "Managed"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    for node in ["node-a", "node-b", "node-c"] {
        cluster.add_node(node, true);
    }
    cluster.simulate_workloads(SimConfig::default());
    // An admin's own workload in the driver namespace: never ours to touch.
    for o in std::iter::once(deployment(case, "admin-tool")).chain((case.seeds)()) {
        let object: DynamicObject = serde_json::from_value(o.clone()).unwrap();
        fixtures::api_for(&admin, &o)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("seeding {}: {e}", o["metadata"]["name"]));
    }

    let former = cluster.client_with_agent(case.former);
    for o in leftovers(case).into_iter().chain(openshift_objects(case)) {
        let object: DynamicObject = serde_json::from_value(o.clone()).unwrap();
        fixtures::api_for(&former, &o)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("seeding {}: {e}", o["metadata"]["name"]));
    }
    // Someone's copies of the former operator's leftovers (everything copied, managedFields
    // included): not the former operator's, so never deleted ([`leftover_copies`]).
    for o in leftovers(case) {
        let api = fixtures::api_for(&admin, &o);
        let stored = api
            .get(o["metadata"]["name"].as_str().unwrap())
            .await
            .unwrap();
        let mut copy = testkit::copy_of(&serde_json::to_value(&stored).unwrap(), "");
        copy["metadata"]["name"] = json!(leftover_copy_name(&o));
        api.create(
            &PostParams::default(),
            &serde_json::from_value(copy).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("copying {}: {e}", o["metadata"]["name"]));
    }
    (cluster, admin)
}

/// The name of someone's copy of the leftover `o`.
fn leftover_copy_name(o: &Value) -> String {
    format!("{}-copy", o["metadata"]["name"].as_str().unwrap())
}

/// A small Deployment named `name` in the driver's namespace.
fn deployment(case: &Case, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": case.namespace()},
           "spec": {"selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]}}}})
}

/// What OpenShift's operator made under names ours does not use (an earlier release's
/// workload, a role it no longer needs): ours deletes them once its own operands are in place.
fn leftovers(case: &Case) -> Vec<Value> {
    let def = case.def();
    let (prefix, ns) = (&def.cluster_role_prefix, &def.namespace);
    vec![
        deployment(case, &format!("{}-former-only", def.object_prefix)),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": format!("{}-former-only-binding", def.object_prefix), "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": format!("{prefix}-former-only-role")},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    ]
}

fn start(cluster: &Cluster, case: &Case) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let def = drivers::by_name(case.short).unwrap();
    let metrics = Metrics::new();
    let settling = metrics.settling(&driver_operator::operator_name(&def));
    let extras = driver_operator::Extras {
        probe: (!case.share_types.is_empty()).then(|| {
            drivers::openstack_manila::probe_with_secret(
                ShareTypesOf(case.share_types),
                client.clone(),
                &def,
                Duration::from_millis(500),
            )
        }),
        tasks: if case.storage_policy {
            vec![drivers::vsphere_policy::task(Arc::new(PolicyExists))]
        } else if case.secret_sync {
            vec![drivers::ibm_vpc_block::secret_sync(
                client.clone(),
                &def,
                drivers::ibm_vpc_block::SYNC_INTERVAL,
            )]
        } else {
            Vec::new()
        },
    };
    Background::spawn(|shutdown| async move {
        driver_operator::run_with_extras(
            client,
            def,
            Settings {
                env: fixtures::release_images(),
                instance: Some("operator-0".into()),
                ..Settings::default()
            },
            extras,
            metrics,
            Readiness::default(),
            shutdown,
        )
        .await
        .unwrap();
    })
    .settles_when(settling)
}

/// A fake IBM Cloud for every test of this binary, on its own thread (it outlives each test's
/// runtime): IAM trades the cluster's API key for a token, and Resource Manager knows the
/// cluster's resource group. Returns its base URL.
fn fake_ibm_cloud() -> &'static str {
    static BASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let service = hyper::service::service_fn(
                        |request: hyper::Request<hyper::body::Incoming>| async move {
                            let path = request
                                .uri()
                                .path_and_query()
                                .map(ToString::to_string)
                                .unwrap_or_default();
                            let authorized = request
                                .headers()
                                .get("authorization")
                                .is_some_and(|v| v == "Bearer ibm-token");
                            let body = http_body_util::BodyExt::collect(request.into_body())
                                .await
                                .unwrap()
                                .to_bytes();
                            let body = String::from_utf8_lossy(&body).into_owned();
                            let (status, answer) = if path == "/identity/token"
                                && body.contains("apikey=minted-ibm-key")
                            {
                                (200, json!({"access_token": "ibm-token", "token_type": "Bearer"}))
                            } else if path == "/v2/resource_groups?account_id=1a2b3c" && authorized {
                                (200, json!({"resources": [{"id": "rg-0001", "name": "demo-x7k2p-rg"}]}))
                            } else {
                                (401, json!({}))
                            };
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .status(status)
                                    .body(http_body_util::Full::new(bytes::Bytes::from(
                                        answer.to_string(),
                                    )))
                                    .unwrap(),
                            )
                        },
                    );
                    tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        base
    })
}

/// A vCenter where the cluster's storage policy exists (OpenShift's operator made it).
struct PolicyExists;

impl drivers::vsphere_policy::PolicyMaker for PolicyExists {
    fn ensure<'a>(
        &'a self,
        _target: &'a drivers::vsphere_policy::Target,
        spec: &'a drivers::vcenter_api::PolicySpec,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<String>, String>> + Send + 'a>>
    {
        assert_eq!(spec.policy, format!("openshift-storage-policy-{INFRA}"));
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// A cloud offering these share types.
struct ShareTypesOf(&'static [&'static str]);

impl drivers::openstack_manila::ShareTypes for ShareTypesOf {
    fn share_types(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<String>, csi_kit::HookError>> + Send + '_>>
    {
        let types = self.0.iter().map(|t| (*t).to_owned()).collect();
        Box::pin(async move { Ok(types) })
    }
}

/// The conditions of a healthy driver (after the `prefix` where they have one).
const HEALTHY: &[(&str, bool, &str)] = &[
    ("DriverControllerServiceControllerAvailable", true, "True"),
    (
        "DriverControllerServiceControllerProgressing",
        true,
        "False",
    ),
    ("DriverControllerServiceControllerDegraded", true, "False"),
    ("DriverNodeServiceControllerAvailable", true, "True"),
    ("DriverNodeServiceControllerProgressing", true, "False"),
    ("DriverNodeServiceControllerDegraded", true, "False"),
    ("DriverStaticResourcesControllerDegraded", true, "False"),
    ("StorageClassControllerDegraded", false, "False"),
    ("ManagementStateDegraded", false, "False"),
];

/// Waits until every condition of [`HEALTHY`] has its healthy status.
async fn healthy(client: &Client, case: &Case) {
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    let wanted: Vec<(String, &str)> = HEALTHY
        .iter()
        .map(|(type_, prefixed, want)| {
            let prefix = if *prefixed { case.prefix } else { "" };
            (format!("{prefix}{type_}"), *want)
        })
        .collect();
    let conditions = async || {
        let driver = drivers.get(case.driver).await.unwrap();
        let status = driver.status.unwrap_or_default();
        wanted
            .iter()
            .map(|(type_, _)| {
                let c = status.condition(type_);
                (
                    type_.clone(),
                    c.map(|c| (c.status.to_string(), c.message.clone().unwrap_or_default())),
                )
            })
            .collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let seen = conditions().await;
        if seen
            .iter()
            .zip(&wanted)
            .all(|((_, c), (_, want))| c.as_ref().is_some_and(|(s, _)| s == want))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: not healthy after 60 s; conditions (status, message): {seen:#?}",
            case.short
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn template(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap()["spec"]["template"].clone()
}

fn former_entries(meta: &Value, former: &str) -> Vec<Value> {
    meta["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == former)
        .cloned()
        .collect()
}

#[rstest::rstest]
#[case::gcp_pd(&GCP_PD)]
#[case::aws_ebs(&AWS_EBS)]
#[case::aws_efs(&AWS_EFS)]
#[case::smb(&SMB)]
#[case::openstack_cinder(&OPENSTACK_CINDER)]
#[case::openstack_manila(&OPENSTACK_MANILA)]
#[case::azure_disk(&AZURE_DISK)]
#[case::azure_file(&AZURE_FILE)]
#[case::vsphere(&VSPHERE)]
#[case::ibm_vpc_block(&IBM_VPC_BLOCK)]
#[case::powervs_block(&POWERVS_BLOCK)]
#[tokio::test]
async fn takes_over_openshifts_driver_without_errors_duplicates_or_orphans(#[case] case: &Case) {
    let (cluster, admin) = cluster_taken_over_from_openshift(case).await;
    let def = case.def();
    let controller = csi_kit::names::controller(&def);
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &def.namespace);
    let daemon_sets: Api<DaemonSet> = Api::namespaced(admin.clone(), &def.namespace);
    // The workloads as OpenShift's operator wrote them, under our names, when ours should
    // leave their pod templates alone.
    let mut controller_before = None;
    if case.same_controller_template {
        controller_before = Some(deployments.get(&controller).await.unwrap());
    }
    let mut nodes_before = Vec::new();
    if case.same_node_templates {
        for name in case.daemon_sets() {
            nodes_before.push(daemon_sets.get(&name).await.unwrap());
        }
    }

    // The StorageClasses as OpenShift's operator made them: ours are the same (their
    // parameters cannot change), so they are adopted in place, never deleted and recreated.
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let mut classes_before = Vec::new();
    for name in case.classes {
        classes_before.extend(classes.get_opt(name).await.unwrap());
    }

    let running = start(&cluster, case);
    healthy(&admin, case).await;
    // What OpenShift's operator left under other names is deleted, once ours are in place;
    // an admin's workload in the same namespace stays.
    for leftover in leftovers(case) {
        let name = leftover["metadata"]["name"].as_str().unwrap().to_owned();
        testkit::eventually(
            &format!("{} {name} deleted", leftover["kind"]),
            Duration::from_secs(60),
            async || {
                fixtures::api_for(&admin, &leftover)
                    .get_opt(&name)
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            },
        )
        .await;
    }
    // Converged: the operator stops writing (this fails if it never does, e.g. an apply that
    // keeps failing).
    running.converged(&cluster, AGENT).await;
    // Copies of the leftovers that someone made stay: the former operator did not write them.
    for leftover in leftovers(case) {
        let name = leftover_copy_name(&leftover);
        assert!(
            fixtures::api_for(&admin, &leftover)
                .get_opt(&name)
                .await
                .unwrap()
                .is_some(),
            "{} {name}, a copy of a leftover, was deleted",
            leftover["kind"]
        );
    }

    // Every object OpenShift's operator had written is ours now, whole: no field is left to
    // the former manager, and each carries our operand label. The ones we do not render are
    // gone (what they granted, ours grants under our names).
    for o in openshift_objects(case) {
        let key = format!(
            "{}/{}",
            o["kind"].as_str().unwrap(),
            o["metadata"]["name"].as_str().unwrap()
        );
        let served = fixtures::api_for(&admin, &o)
            .get_opt(o["metadata"]["name"].as_str().unwrap())
            .await
            .unwrap();
        if case.not_rendered.contains(&key.as_str()) {
            assert!(served.is_none(), "{key} was left behind");
            continue;
        }
        let served = served.unwrap_or_else(|| panic!("{key} is gone"));
        let meta = serde_json::to_value(&served.metadata).unwrap();
        assert_eq!(
            former_entries(&meta, case.former),
            Vec::<Value>::new(),
            "{key}"
        );
        assert_eq!(
            meta["labels"]["csi.storage.openshift.io/driver"], case.short,
            "{key} was not adopted"
        );
    }

    for before in classes_before {
        let after = classes.get(&before.name_any()).await.unwrap();
        assert_eq!(
            after.metadata.uid,
            before.metadata.uid,
            "StorageClass {} was recreated",
            before.name_any()
        );
        assert_eq!(after.parameters, before.parameters);
    }

    // The metrics Service has OpenShift's ports, once each.
    let service = Api::<Service>::namespaced(admin.clone(), &def.namespace)
        .get(&csi_kit::names::metrics_service(&def))
        .await
        .unwrap();
    let ports: Vec<(String, i32)> = service
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap(), p.port))
        .collect();
    let wanted: Vec<(String, i32)> = case
        .metrics_ports
        .iter()
        .map(|(name, port)| ((*name).to_owned(), *port))
        .collect();
    assert_eq!(ports, wanted);

    // No duplicate and no stray operand: the namespace holds the one controller and node
    // workload (and the admin's, and someone's copy of the leftover Deployment, which is
    // neither ours nor the former operator's), the driver's StorageClasses are OpenShift's, and every
    // cluster-scoped RBAC object of ours has OpenShift's name (or is one OpenShift does not
    // have).
    let mut deployment_names: Vec<String> = deployments
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|d| d.metadata.name.unwrap())
        .collect();
    deployment_names.sort();
    let mut wanted = vec![
        "admin-tool".to_owned(),
        controller.clone(),
        leftover_copy_name(&deployment(
            case,
            &format!("{}-former-only", def.object_prefix),
        )),
    ];
    wanted.sort();
    assert_eq!(deployment_names, wanted);
    let mut daemon_set_names: Vec<String> = daemon_sets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|d| d.metadata.name.unwrap())
        .collect();
    daemon_set_names.sort();
    let mut wanted = case.daemon_sets();
    wanted.sort();
    assert_eq!(daemon_set_names, wanted);
    let classes: Vec<String> =
        Api::<k8s_openapi::api::storage::v1::StorageClass>::all(admin.clone())
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|c| c.provisioner == case.driver)
            .map(|c| c.metadata.name.unwrap())
            .collect();
    assert_eq!(classes, case.classes);
    let openshift_names: Vec<String> = openshift_objects(case)
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let ours = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
        .list(&Default::default())
        .await
        .unwrap();
    for role in ours.items {
        let name = role.metadata.name.unwrap();
        let is_ours = role
            .metadata
            .labels
            .unwrap_or_default()
            .get("csi.storage.openshift.io/driver")
            .is_some_and(|d| d == case.short);
        assert!(
            !is_ours || openshift_names.contains(&name) || case.own_roles.contains(&name.as_str()),
            "ClusterRole {name} duplicates one of OpenShift's under another name"
        );
    }

    // The pod templates are what OpenShift's operator wrote: no driver pod restarts.
    if let Some(controller_before) = &controller_before {
        let controller_after = deployments.get(&controller).await.unwrap();
        assert_eq!(template(&controller_after), template(controller_before));
    }
    for before in &nodes_before {
        let name = before.metadata.name.as_deref().unwrap();
        let after = daemon_sets.get(name).await.unwrap();
        assert_eq!(template(&after), template(before), "DaemonSet {name}");
    }

    running.stop().await;
}
