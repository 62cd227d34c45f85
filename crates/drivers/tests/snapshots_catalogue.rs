#![allow(clippy::unwrap_used)]
//! Snapshots of every object rendered for each driver of the catalogue but GCP PD (which has
//! its own file), one file per driver and topology, plus the objects each driver's hooks touch
//! with every input set. Review a change to these files as you would a change to the manifests
//! themselves.

use std::collections::BTreeMap;

use api::config_v1::{PlatformStatus, PlatformType, ProxyStatus};
use api::operator_v1::{CSIDriverConfigSpec, CSIDriverType, LogLevel};
use csi_kit::{DriverDef, Inputs, Topology};
use rstest::rstest;
use serde_json::{Value, json};

#[rstest]
fn every_object_for_each_topology(
    #[values(
        "aws-ebs",
        "azure-disk",
        "azure-file",
        "aws-efs",
        "smb",
        "ibm-vpc-block",
        "powervs-block"
    )]
    driver: &str,
    #[values(
        Topology::HighlyAvailable,
        Topology::SingleReplica,
        Topology::External,
        Topology::Kubernetes { control_plane_nodes: true },
        Topology::Kubernetes { control_plane_nodes: false }
    )]
    topology: Topology,
) {
    let def = drivers::by_name(driver).unwrap();
    let mut inputs = Inputs::offline(&def, topology, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    let objects = csi_kit::render(&def, &inputs);
    insta::assert_yaml_snapshot!(format!("{}_{topology}", driver.replace('-', "_")), objects);
}

fn driver_config(driver_type: CSIDriverType, config: Value) -> CSIDriverConfigSpec {
    let mut value = config;
    value["driverType"] = json!(driver_type.to_string());
    serde_json::from_value(value).unwrap()
}

fn platform_status(type_: PlatformType, details: Value) -> PlatformStatus {
    let mut value = details;
    value["type"] = json!(type_.to_string());
    serde_json::from_value(value).unwrap()
}

/// Inputs of a highly available OpenShift cluster with every generic input set: proxy, CA
/// bundle, Debug, a TLS profile, and the credentials Secret and metrics certificate hashes.
fn every_generic_input(def: &DriverDef) -> Inputs {
    let mut inputs = Inputs::offline(def, Topology::HighlyAvailable, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    inputs.spec.operator.log_level = Some(LogLevel::Debug);
    inputs.proxy = ProxyStatus {
        http_proxy: Some("http://proxy.example.com:3128".to_owned()),
        https_proxy: Some("http://proxy.example.com:3128".to_owned()),
        no_proxy: Some(".cluster.local,.svc,10.0.0.0/16".to_owned()),
    };
    inputs.trusted_ca_bundle = true;
    inputs.config_map_hashes.insert(
        csi_kit::names::trusted_ca_bundle(def),
        "cAbUnDl=".to_owned(),
    );
    if let Some(creds) = &def.credentials {
        inputs
            .secret_hashes
            .insert(creds.secret_name.clone(), "cReDs01=".to_owned());
    }
    inputs.tls.min_version = Some("VersionTLS12".to_owned());
    inputs
}

fn hooked(def: &DriverDef, inputs: &Inputs) -> Vec<Value> {
    csi_kit::render(def, inputs)
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("Deployment" | "DaemonSet" | "StorageClass" | "ConfigMap")
            )
        })
        .collect()
}

/// AWS EBS with tags, region, endpoint, a custom CA bundle and a KMS key.
#[test]
fn aws_ebs_with_every_input_set() {
    let def = drivers::by_name("aws-ebs").unwrap();
    let mut inputs = every_generic_input(&def);
    inputs.platform_status = Some(platform_status(
        PlatformType::AWS,
        json!({"aws": {"region": "us-east-2",
                       "resourceTags": [{"key": "team", "value": "storage"}, {"key": "env", "value": "ci"}],
                       "serviceEndpoints": [{"name": "ec2", "url": "https://ec2.example.com"}]}}),
    ));
    inputs.copied_config_maps.insert(
        "kube-cloud-config".to_owned(),
        BTreeMap::from([(
            "ca-bundle.pem".to_owned(),
            "-----BEGIN CERTIFICATE-----\n...".to_owned(),
        )]),
    );
    inputs
        .config_map_hashes
        .insert("kube-cloud-config".to_owned(), "cLoUdCa=".to_owned());
    inputs.spec.driver_config = Some(driver_config(
        CSIDriverType::AWS,
        json!({"aws": {"kmsKeyARN": "arn:aws:kms:us-east-2:123456789012:key/abcd-1234"}}),
    ));
    insta::assert_yaml_snapshot!("aws_ebs_every_input_set", hooked(&def, &inputs));
}

fn with_cloud_config(inputs: &mut Inputs, endpoints: bool) {
    let mut data = BTreeMap::from([(
        "config".to_owned(),
        "{\"cloud\": \"AzurePublicCloud\"}".to_owned(),
    )]);
    if endpoints {
        data.insert(
            "endpoints".to_owned(),
            "{\"name\": \"AzureStackCloud\"}".to_owned(),
        );
    }
    inputs
        .copied_config_maps
        .insert("azure-cloud-config".to_owned(), data);
    inputs
        .config_map_hashes
        .insert("azure-cloud-config".to_owned(), "cLoUdCfG=".to_owned());
}

/// Azure Disk with a disk encryption set, on Azure and on Azure Stack Hub.
#[rstest]
#[case::azure("AzurePublicCloud")]
#[case::azure_stack_hub("AzureStackCloud")]
fn azure_disk_with_every_input_set(#[case] cloud: &str) {
    let def = drivers::by_name("azure-disk").unwrap();
    let mut inputs = every_generic_input(&def);
    inputs.platform_status = Some(platform_status(
        PlatformType::Azure,
        json!({"azure": {"cloudName": cloud, "resourceGroupName": "rg"}}),
    ));
    with_cloud_config(&mut inputs, cloud == "AzureStackCloud");
    inputs.spec.driver_config = Some(driver_config(
        CSIDriverType::Azure,
        json!({"azure": {"diskEncryptionSet": {
            "subscriptionID": "0b2d1f3c-1111-2222-3333-444455556666",
            "resourceGroup": "keys", "name": "cluster-des"}}}),
    ));
    let mut objects = hooked(&def, &inputs);
    objects.extend(
        csi_kit::render(&def, &inputs)
            .into_iter()
            .filter(|o| o["kind"] == "VolumeSnapshotClass"),
    );
    insta::assert_yaml_snapshot!(format!("azure_disk_every_input_set_{cloud}"), objects);
}

/// Azure File with its cloud config.
#[test]
fn azure_file_with_every_input_set() {
    let def = drivers::by_name("azure-file").unwrap();
    let mut inputs = every_generic_input(&def);
    inputs.platform_status = Some(platform_status(
        PlatformType::Azure,
        json!({"azure": {"cloudName": "AzurePublicCloud"}}),
    ));
    with_cloud_config(&mut inputs, false);
    insta::assert_yaml_snapshot!("azure_file_every_input_set", hooked(&def, &inputs));
}

/// IBM VPC Block with a customer key.
#[test]
fn ibm_vpc_block_with_every_input_set() {
    let def = drivers::by_name("ibm-vpc-block").unwrap();
    let mut inputs = every_generic_input(&def);
    inputs.spec.driver_config = Some(driver_config(
        CSIDriverType::IBMCloud,
        json!({"ibmcloud": {"encryptionKeyCRN": "crn:v1:bluemix:public:kms:us-south:a/c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6:0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f:key:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"}}),
    ));
    insta::assert_yaml_snapshot!("ibm_vpc_block_every_input_set", hooked(&def, &inputs));
}

/// PowerVS Block with its credentials.
#[test]
fn powervs_block_with_every_input_set() {
    let def = drivers::by_name("powervs-block").unwrap();
    let inputs = every_generic_input(&def);
    insta::assert_yaml_snapshot!("powervs_block_every_input_set", hooked(&def, &inputs));
}
