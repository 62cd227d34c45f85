#![allow(clippy::unwrap_used)]
//! The hooks of each catalogue driver but GCP PD (see `rules.rs`), called through the
//! builders with hand-made inputs.

use std::collections::BTreeMap;

use api::config_v1::{PlatformStatus, PlatformType};
use api::operator_v1::{CSIDriverConfigSpec, CSIDriverType};
use csi_kit::{DriverDef, Inputs, Topology};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use rstest::rstest;
use serde_json::{Value, json};

fn def(name: &str) -> DriverDef {
    drivers::by_name(name).unwrap()
}

fn inputs(def: &DriverDef, topology: Topology) -> Inputs {
    Inputs::offline(def, topology, &BTreeMap::new())
}

fn controller(def: &DriverDef, inputs: &Inputs) -> Deployment {
    csi_kit::workloads::build_controller_deployment(def, inputs)
}

fn pod(d: &Deployment) -> &PodSpec {
    d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn driver_container(spec: &PodSpec) -> &Container {
    spec.containers
        .iter()
        .find(|c| c.name == "csi-driver")
        .unwrap()
}

fn args(d: &Deployment) -> Vec<String> {
    driver_container(pod(d)).args.clone().unwrap_or_default()
}

fn env(d: &Deployment) -> BTreeMap<String, Value> {
    driver_container(pod(d))
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), serde_json::to_value(e).unwrap()))
        .collect()
}

fn classes(def: &DriverDef, inputs: &Inputs) -> Vec<StorageClass> {
    csi_kit::storage::build_storage_classes(def, inputs)
}

fn platform_status(type_: PlatformType, details: Value) -> PlatformStatus {
    let mut value = details;
    value["type"] = json!(type_.to_string());
    serde_json::from_value(value).unwrap()
}

fn driver_config(driver_type: CSIDriverType, config: Value) -> CSIDriverConfigSpec {
    let mut value = config;
    value["driverType"] = json!(driver_type.to_string());
    serde_json::from_value(value).unwrap()
}

fn volume_names(d: &Deployment) -> Vec<String> {
    pod(d)
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.clone())
        .collect()
}

fn template_annotations(d: &Deployment) -> BTreeMap<String, String> {
    d.spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// AWS EBS

#[rstest]
#[case::nothing(None, json!({}), vec![])]
#[case::cluster_id_only(Some("demo-x7k2p"), json!({}), vec!["--k8s-tag-cluster-id=demo-x7k2p"])]
#[case::tags_only(None, json!({"resourceTags": [{"key": "a", "value": "1"}]}), vec!["--extra-tags=a=1"])]
#[case::both(
    Some("demo-x7k2p"),
    json!({"resourceTags": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]}),
    vec!["--k8s-tag-cluster-id=demo-x7k2p", "--extra-tags=a=1,b=2"]
)]
fn aws_ebs_tags_the_volumes_with_the_cluster_id_and_resource_tags(
    #[case] cluster_id: Option<&str>,
    #[case] aws: Value,
    #[case] want: Vec<&str>,
) {
    let def = def("aws-ebs");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.cluster_id = cluster_id.map(str::to_owned);
    inputs.platform_status = Some(platform_status(PlatformType::AWS, json!({"aws": aws})));
    assert_eq!(drivers::aws_ebs::tag_args(&inputs), want);
    let args = args(&controller(&def, &inputs));
    let tag_args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| a.starts_with("--k8s-tag-cluster-id=") || a.starts_with("--extra-tags="))
        .collect();
    assert_eq!(tag_args, want);
}

#[test]
fn aws_ebs_region_and_ec2_endpoint_come_from_the_infrastructure() {
    let def = def("aws-ebs");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    let env_without = env(&controller(&def, &inputs));
    assert!(!env_without.contains_key("AWS_REGION"));
    assert!(!env_without.contains_key("AWS_EC2_ENDPOINT"));
    inputs.platform_status = Some(platform_status(
        PlatformType::AWS,
        json!({"aws": {"region": "eu-west-1", "serviceEndpoints": [
            {"name": "s3", "url": "https://s3.example.com"},
            {"name": "ec2", "url": "https://ec2.example.com"}]}}),
    ));
    let env = env(&controller(&def, &inputs));
    assert_eq!(env["AWS_REGION"]["value"], "eu-west-1");
    assert_eq!(env["AWS_EC2_ENDPOINT"]["value"], "https://ec2.example.com");
}

#[rstest]
#[case::openshift_waits_for_the_secret(Topology::HighlyAvailable, false, true)]
#[case::kubernetes_with_the_secret(Topology::Kubernetes { control_plane_nodes: true }, true, true)]
#[case::kubernetes_without_uses_the_instance_identity(Topology::Kubernetes { control_plane_nodes: true }, false, false)]
fn aws_ebs_credentials_come_from_the_secret_unless_kubernetes_has_none(
    #[case] topology: Topology,
    #[case] secret_exists: bool,
    #[case] mounted: bool,
) {
    let def = def("aws-ebs");
    let mut inputs = inputs(&def, topology);
    if secret_exists {
        inputs
            .secret_hashes
            .insert("ebs-cloud-credentials".to_owned(), "h".to_owned());
    }
    let deployment = controller(&def, &inputs);
    let env = env(&deployment);
    assert_eq!(
        volume_names(&deployment).contains(&"aws-keys".to_owned()),
        mounted
    );
    assert_eq!(env.contains_key("AWS_ACCESS_KEY_ID"), mounted);
    assert_eq!(env.contains_key("AWS_SECRET_ACCESS_KEY"), mounted);
    assert_eq!(env.contains_key("AWS_SHARED_CREDENTIALS_FILE"), mounted);
    if mounted {
        assert_eq!(
            env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"],
            json!({"name": "ebs-cloud-credentials", "key": "aws_access_key_id", "optional": true})
        );
    }
}

#[rstest]
#[case::absent(None, false)]
#[case::without_the_key(Some("cloud.conf"), false)]
#[case::with_the_key(Some("ca-bundle.pem"), true)]
fn aws_ebs_custom_ca_bundle_is_mounted_only_when_kube_cloud_config_has_one(
    #[case] key: Option<&str>,
    #[case] mounted: bool,
) {
    let def = def("aws-ebs");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    if let Some(key) = key {
        inputs.copied_config_maps.insert(
            "kube-cloud-config".to_owned(),
            BTreeMap::from([(key.to_owned(), "pem".to_owned())]),
        );
        inputs
            .config_map_hashes
            .insert("kube-cloud-config".to_owned(), "h1".to_owned());
    }
    let deployment = controller(&def, &inputs);
    assert_eq!(
        volume_names(&deployment).contains(&"ca-bundle".to_owned()),
        mounted
    );
    let env = env(&deployment);
    assert_eq!(env.contains_key("AWS_CA_BUNDLE"), mounted);
    let copies: Vec<Value> = csi_kit::render(&def, &inputs)
        .into_iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "kube-cloud-config")
        .collect();
    // The copy follows the source, whatever it holds.
    assert_eq!(copies.len(), usize::from(key.is_some()));
    if mounted {
        assert_eq!(env["AWS_CA_BUNDLE"]["value"], "/etc/ca/ca-bundle.pem");
        let mount = driver_container(pod(&deployment))
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "ca-bundle")
            .unwrap();
        assert_eq!(mount.mount_path, "/etc/ca");
        assert_eq!(
            copies[0]["metadata"]["namespace"],
            "openshift-cluster-csi-drivers"
        );
    }
}

#[test]
fn aws_ebs_a_changed_ca_bundle_changes_the_pod_template() {
    let def = def("aws-ebs");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.copied_config_maps.insert(
        "kube-cloud-config".to_owned(),
        BTreeMap::from([("ca-bundle.pem".to_owned(), "pem".to_owned())]),
    );
    inputs
        .config_map_hashes
        .insert("kube-cloud-config".to_owned(), "h1".to_owned());
    let before = template_annotations(&controller(&def, &inputs));
    inputs
        .config_map_hashes
        .insert("kube-cloud-config".to_owned(), "h2".to_owned());
    let after = template_annotations(&controller(&def, &inputs));
    assert_ne!(before, after);
    assert!(after.values().any(|v| v == "h2"), "{after:?}");
}

#[rstest]
#[case::unset(json!({}), None)]
#[case::empty(json!({"kmsKeyARN": ""}), None)]
#[case::set(
    json!({"kmsKeyARN": "arn:aws:kms:us-east-1:123456789012:key/k1"}),
    Some("arn:aws:kms:us-east-1:123456789012:key/k1")
)]
fn aws_ebs_kms_key_becomes_a_parameter_of_every_class(
    #[case] aws: Value,
    #[case] want: Option<&str>,
) {
    let def = def("aws-ebs");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.spec.driver_config = Some(driver_config(CSIDriverType::AWS, json!({"aws": aws})));
    let classes = classes(&def, &inputs);
    assert_eq!(classes.len(), 2);
    for class in classes {
        let parameters = class.parameters.unwrap();
        assert_eq!(parameters.get("kmsKeyId").map(String::as_str), want);
        assert_eq!(parameters["encrypted"], "true");
    }
}

#[test]
fn aws_ebs_gp3_is_the_default_class() {
    let def = def("aws-ebs");
    let inputs = inputs(&def, Topology::HighlyAvailable);
    let defaults: Vec<String> = classes(&def, &inputs)
        .into_iter()
        .filter(|c| {
            c.metadata.annotations.as_ref().is_some_and(|a| {
                a.get("storageclass.kubernetes.io/is-default-class")
                    .is_some_and(|v| v == "true")
            })
        })
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(defaults, ["gp3-csi"]);
}

// ---------------------------------------------------------------------------------------------
// Azure Disk and Azure File

fn azure(cloud: &str) -> PlatformStatus {
    platform_status(PlatformType::Azure, json!({"azure": {"cloudName": cloud}}))
}

fn cloud_config(inputs: &mut Inputs, endpoints: bool) {
    let mut data = BTreeMap::from([("config".to_owned(), "{}".to_owned())]);
    if endpoints {
        data.insert("endpoints".to_owned(), "{}".to_owned());
    }
    inputs
        .copied_config_maps
        .insert("azure-cloud-config".to_owned(), data);
}

#[test]
fn azure_disk_encryption_set_becomes_its_full_arm_id() {
    let def = def("azure-disk");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    assert!(classes(&def, &inputs).iter().all(|c| {
        !c.parameters
            .as_ref()
            .unwrap()
            .contains_key("diskEncryptionSetID")
    }));
    inputs.spec.driver_config = Some(driver_config(
        CSIDriverType::Azure,
        json!({"azure": {"diskEncryptionSet": {
            "subscriptionID": "0b2d1f3c-1111-2222-3333-444455556666",
            "resourceGroup": "keys", "name": "des-1"}}}),
    ));
    for class in classes(&def, &inputs) {
        assert_eq!(
            class.parameters.unwrap()["diskEncryptionSetID"],
            "/subscriptions/0b2d1f3c-1111-2222-3333-444455556666/resourceGroups/keys/providers/Microsoft.Compute/diskEncryptionSets/des-1"
        );
    }
}

#[rstest]
#[case::azure("AzurePublicCloud", false)]
#[case::us_government("AzureUSGovernmentCloud", false)]
#[case::stack_hub("AzureStackCloud", true)]
fn azure_disk_stack_hub_reads_its_endpoints_uses_premium_disks_and_full_snapshots(
    #[case] cloud: &str,
    #[case] hub: bool,
) {
    let def = def("azure-disk");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.platform_status = Some(azure(cloud));
    cloud_config(&mut inputs, hub);
    assert_eq!(drivers::azure_disk::is_azure_stack_hub(&inputs), hub);
    let deployment = controller(&def, &inputs);
    let env = env(&deployment);
    assert_eq!(env.contains_key("AZURE_ENVIRONMENT_FILEPATH"), hub);
    let daemon_set = csi_kit::workloads::build_node_daemon_set(&def, &inputs);
    let node_env: Vec<String> = daemon_set.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(
        node_env.contains(&"AZURE_ENVIRONMENT_FILEPATH".to_owned()),
        hub
    );
    // The endpoints come from the source cloud config (OpenShift's `src-cloud-config`), next
    // to the merged file the credentials injector writes.
    for (pod_name, spec) in azure_pods(&def, &inputs) {
        assert!(
            init_container(&spec, "azure-inject-credentials").is_some(),
            "{pod_name}"
        );
        let driver = driver_container(&spec);
        let endpoints = driver
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/etc/azure/azurestackcloud.json");
        assert_eq!(endpoints.is_some(), hub, "{pod_name}");
        if hub {
            assert_eq!(
                serde_json::to_value(endpoints).unwrap(),
                json!({"name": "src-cloud-config", "mountPath": "/etc/azure/azurestackcloud.json",
                       "subPath": "endpoints", "readOnly": true})
            );
            assert_eq!(
                volume_json(&spec, "src-cloud-config")["configMap"]["name"],
                "azure-cloud-config"
            );
            assert_eq!(
                env_json(driver)["AZURE_ENVIRONMENT_FILEPATH"]["value"],
                "/etc/azure/azurestackcloud.json"
            );
        }
    }
    // Premium disks on OpenShift, as OpenShift's class has them (a class's parameters cannot
    // change), and on the hub everywhere; StandardSSD on plain Kubernetes in Azure.
    let sku =
        |inputs: &Inputs| classes(&def, inputs)[0].parameters.clone().unwrap()["skuname"].clone();
    assert_eq!(sku(&inputs), "Premium_LRS");
    let mut kubernetes = inputs.clone();
    kubernetes.topology = Topology::Kubernetes {
        control_plane_nodes: true,
    };
    assert_eq!(
        sku(&kubernetes),
        if hub {
            "Premium_LRS"
        } else {
            "StandardSSD_LRS"
        }
    );
    inputs.crds.volume_snapshot_class = true;
    let snapshot_classes = csi_kit::storage::build_volume_snapshot_classes(&def, &inputs);
    assert_eq!(snapshot_classes.len(), 1);
    assert_eq!(
        snapshot_classes[0]["parameters"]["incremental"].as_str(),
        Some(if hub { "false" } else { "true" })
    );
}

#[rstest]
#[case::openshift_copy(
    Topology::HighlyAvailable,
    true,
    "/etc/kubernetes/cloud.conf",
    "configMap"
)]
#[case::openshift_waits_for_the_copy(
    Topology::HighlyAvailable,
    false,
    "/etc/kubernetes/cloud.conf",
    "configMap"
)]
#[case::kubernetes_copy(Topology::Kubernetes { control_plane_nodes: true }, true, "/etc/kubernetes/config", "configMap")]
#[case::kubernetes_node_file(Topology::Kubernetes { control_plane_nodes: true }, false, "/etc/kubernetes/azure.json", "hostPath")]
fn azure_cloud_config_comes_from_the_copy_or_the_node(
    #[case] topology: Topology,
    #[case] copied: bool,
    #[case] file: &str,
    #[case] source: &str,
    #[values("azure-disk", "azure-file")] driver: &str,
) {
    let def = def(driver);
    let mut inputs = inputs(&def, topology);
    if copied {
        cloud_config(&mut inputs, false);
    }
    let deployment = controller(&def, &inputs);
    assert_eq!(env(&deployment)["AZURE_CREDENTIAL_FILE"]["value"], file);
    // The source: what the injector reads where it runs (on OpenShift), else what the driver
    // mounts.
    let source_volume = if inputs.topology.is_openshift() {
        layout("controller").source_volume
    } else {
        "cloud-config"
    };
    let volume = pod(&deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == source_volume)
        .unwrap();
    let volume = serde_json::to_value(volume).unwrap();
    assert!(volume.get(source).is_some(), "{volume}");
    let copies = csi_kit::render(&def, &inputs)
        .into_iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "azure-cloud-config")
        .count();
    assert_eq!(copies, usize::from(copied));
}

fn init_container<'a>(spec: &'a PodSpec, name: &str) -> Option<&'a Container> {
    spec.init_containers
        .iter()
        .flatten()
        .find(|c| c.name == name)
}

fn volume_json(spec: &PodSpec, name: &str) -> Value {
    let volume = spec.volumes.iter().flatten().find(|v| v.name == name);
    serde_json::to_value(volume.unwrap_or_else(|| panic!("no volume {name}"))).unwrap()
}

fn mount_json(container: &Container, path: &str) -> Value {
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == path);
    serde_json::to_value(mount.unwrap_or_else(|| panic!("no mount at {path}"))).unwrap()
}

fn env_json(container: &Container) -> BTreeMap<String, Value> {
    container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), serde_json::to_value(e).unwrap()))
        .collect()
}

/// How the driver's pod lays out the cloud config: Azure Disk and Azure File as OpenShift
/// does (the node injector writes elsewhere than the controller's).
fn layout(pod_name: &str) -> drivers::azure_disk::Layout {
    use drivers::azure_disk::{OPENSHIFT_CONTROLLER_LAYOUT, OPENSHIFT_NODE_LAYOUT};
    match pod_name {
        "controller" => OPENSHIFT_CONTROLLER_LAYOUT,
        _ => OPENSHIFT_NODE_LAYOUT,
    }
}

/// The controller's and the node's pod specs.
fn azure_pods(def: &DriverDef, inputs: &Inputs) -> [(&'static str, PodSpec); 2] {
    let deployment = controller(def, inputs);
    let daemon_set = csi_kit::workloads::build_node_daemon_set(def, inputs);
    [
        ("controller", pod(&deployment).clone()),
        ("node", daemon_set.spec.unwrap().template.spec.unwrap()),
    ]
}

/// Mint and passthrough modes: the Secret has a client ID and secret, which only the injector
/// sees; the driver reads the merged file.
#[rstest]
#[case::openshift(Topology::HighlyAvailable, true, false, "/etc/cloud-config/config")]
#[case::openshift_before_the_secret(
    Topology::HighlyAvailable,
    false,
    false,
    "/etc/cloud-config/config"
)]
#[case::kubernetes_with_the_copy(Topology::Kubernetes { control_plane_nodes: true }, true, true, "/etc/cloud-config/config")]
#[case::kubernetes_with_the_node_file(Topology::Kubernetes { control_plane_nodes: true }, true, false, "/etc/cloud-config/azure.json")]
fn azure_credentials_secret_is_merged_into_the_cloud_config_by_an_init_container(
    #[case] topology: Topology,
    #[case] secret_exists: bool,
    #[case] copied: bool,
    #[case] source_file: &str,
    #[values("azure-disk", "azure-file")] driver: &str,
) {
    let def = def(driver);
    let mut inputs = inputs(&def, topology);
    let secret = def.credentials.as_ref().unwrap().secret_name.clone();
    if secret_exists {
        inputs.secret_hashes.insert(secret.clone(), "h".to_owned());
    }
    if copied {
        cloud_config(&mut inputs, false);
    }
    for (pod_name, spec) in azure_pods(&def, &inputs) {
        let layout = layout(pod_name);
        let injector = init_container(&spec, "azure-inject-credentials")
            .unwrap_or_else(|| panic!("{pod_name}: no injector"));
        assert_eq!(
            injector.image.as_deref(),
            Some("quay.io/openshift/origin-cluster-cloud-controller-manager-operator:latest")
        );
        assert_eq!(
            injector.command.clone().unwrap(),
            ["/azure-config-credentials-injector"]
        );
        let args = vec![
            format!("--cloud-config-file-path={source_file}"),
            format!(
                "--output-file-path={}/cloud.conf",
                layout.injector_output_dir
            ),
            "--disable-identity-extension-auth".to_owned(),
            "--enable-azure-workload-identity=true".to_owned(),
            // OpenShift's injector reads the Secret's files.
            "--creds-path=/etc/azure/credentials".to_owned(),
        ];
        assert_eq!(injector.env, None, "{pod_name}");
        assert_eq!(injector.args.clone().unwrap(), args, "{pod_name}");
        // Reads the source, writes the emptyDir, has the Secret mounted.
        assert_eq!(
            mount_json(injector, "/etc/cloud-config"),
            json!({"name": layout.source_volume, "mountPath": "/etc/cloud-config", "readOnly": true})
        );
        assert_eq!(
            mount_json(injector, layout.injector_output_dir),
            json!({"name": layout.merged_volume, "mountPath": layout.injector_output_dir})
        );
        assert_eq!(
            mount_json(injector, "/etc/azure/credentials"),
            json!({"name": layout.credentials_volume, "mountPath": "/etc/azure/credentials",
                   "readOnly": true})
        );
        assert_eq!(
            volume_json(&spec, layout.credentials_volume)["secret"]["secretName"],
            secret.as_str()
        );
        let source = volume_json(&spec, layout.source_volume);
        assert_eq!(
            source.get("configMap").is_some(),
            source_file.ends_with("/config")
        );
        assert_eq!(
            source.get("hostPath").is_some(),
            source_file.ends_with("azure.json")
        );
        assert_eq!(
            volume_json(&spec, layout.merged_volume)["emptyDir"],
            json!({})
        );
        // On OpenShift, OpenShift's container; elsewhere the kit's container settings, and no
        // privileges.
        if inputs.topology.is_openshift() {
            assert_eq!(
                serde_json::to_value(&injector.security_context).unwrap(),
                json!({"readOnlyRootFilesystem": true})
            );
            assert_eq!(injector.resources, None);
            assert_eq!(injector.image_pull_policy, None);
        } else {
            assert_eq!(
                serde_json::to_value(&injector.security_context).unwrap(),
                json!({"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
                       "capabilities": {"drop": ["ALL"]}})
            );
            assert_eq!(
                serde_json::to_value(&injector.resources).unwrap(),
                json!({"requests": {"cpu": "10m", "memory": "50Mi"}})
            );
        }
        assert_eq!(
            injector.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
        // The driver reads the merged file, never the Secret.
        let driver = driver_container(&spec);
        let driver_env = env_json(driver);
        assert_eq!(
            driver_env["AZURE_CREDENTIAL_FILE"]["value"], "/etc/kubernetes/cloud.conf",
            "{pod_name}"
        );
        assert_eq!(
            mount_json(driver, "/etc/kubernetes/"),
            json!({"name": layout.merged_volume, "mountPath": "/etc/kubernetes/", "readOnly": true})
        );
        for var in [
            "AZURE_CLIENT_ID",
            "AZURE_CLIENT_SECRET",
            "AZURE_TENANT_ID",
            "AZURE_FEDERATED_TOKEN_FILE",
        ] {
            assert!(!driver_env.contains_key(var), "{pod_name}: {var}");
        }
        assert!(
            driver
                .volume_mounts
                .iter()
                .flatten()
                .all(|m| m.name != layout.credentials_volume),
            "{pod_name}"
        );
    }
    // A new Secret rolls the pods, whose injector merged the old one at start.
    let deployment = controller(&def, &inputs);
    let hash_key =
        csi_kit::hash::annotation_key(&def.namespace, &secret, csi_kit::hash::HashedKind::Secret);
    assert_eq!(
        template_annotations(&deployment).contains_key(&hash_key),
        secret_exists,
        "{:?}",
        template_annotations(&deployment)
    );
    // The controller's driver keeps the workload identity token the merged file points at.
    assert!(volume_names(&deployment).contains(&"bound-sa-token".to_owned()));
    // Hooks may run again on a hooked object: still one injector, one of each volume.
    let mut again = deployment.clone();
    if driver == "azure-disk" {
        drivers::azure_disk::with_cloud_config(&inputs, &mut again);
    } else {
        drivers::azure_file::with_cloud_config(&inputs, &mut again);
    }
    assert_eq!(pod(&again).init_containers.as_ref().unwrap().len(), 1);
    let mut names = volume_names(&again);
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "{names:?}");
    assert_eq!(again, deployment);
}

#[rstest]
fn azure_injector_image_comes_from_the_cloud_controller_manager_operator_env(
    #[values("azure-disk", "azure-file")] driver: &str,
) {
    let def = def(driver);
    assert_eq!(
        def.extra_images["credentialsInjector"].env,
        "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE"
    );
    let env = BTreeMap::from([(
        "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE".to_owned(),
        "example.com/ccm-operator@sha256:1".to_owned(),
    )]);
    let inputs = Inputs::offline(&def, Topology::HighlyAvailable, &env);
    for (pod_name, spec) in azure_pods(&def, &inputs) {
        assert_eq!(
            init_container(&spec, "azure-inject-credentials").and_then(|c| c.image.as_deref()),
            Some("example.com/ccm-operator@sha256:1"),
            "{pod_name}"
        );
    }
}

/// Plain Kubernetes without the Secret: nothing to merge, the driver reads its cloud config
/// (the copy, or the node's azure.json) with whatever identity it names.
#[rstest]
#[case::node_file(false, "/etc/kubernetes/azure.json", "hostPath")]
#[case::copy(true, "/etc/kubernetes/config", "configMap")]
fn azure_on_kubernetes_without_the_secret_has_no_injector(
    #[case] copied: bool,
    #[case] file: &str,
    #[case] source: &str,
    #[values("azure-disk", "azure-file")] driver: &str,
) {
    let def = def(driver);
    let mut inputs = inputs(
        &def,
        Topology::Kubernetes {
            control_plane_nodes: true,
        },
    );
    if copied {
        cloud_config(&mut inputs, false);
    }
    for (pod_name, spec) in azure_pods(&def, &inputs) {
        assert!(spec.init_containers.is_none(), "{pod_name}");
        let names: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        // Neither the injector's source nor the Secret (see the layout).
        let layout = layout(pod_name);
        assert!(!names.contains(&layout.source_volume), "{pod_name}");
        assert!(!names.contains(&layout.credentials_volume), "{pod_name}");
        assert!(volume_json(&spec, "cloud-config").get(source).is_some());
        let driver = driver_container(&spec);
        assert_eq!(
            mount_json(driver, "/etc/kubernetes/"),
            json!({"name": "cloud-config", "mountPath": "/etc/kubernetes/", "readOnly": true})
        );
        let env = env_json(driver);
        assert_eq!(env["AZURE_CREDENTIAL_FILE"]["value"], file, "{pod_name}");
        assert!(!env.contains_key("AZURE_CLIENT_ID"), "{pod_name}");
    }
}

#[test]
fn azure_file_smb_class_has_openshifts_mount_options_and_is_not_default() {
    let def = def("azure-file");
    let inputs = inputs(&def, Topology::HighlyAvailable);
    let classes = classes(&def, &inputs);
    assert_eq!(classes.len(), 1);
    assert_eq!(
        classes[0].mount_options.clone().unwrap(),
        ["mfsymlinks", "cache=strict", "nosharesock", "actimeo=30"]
    );
    assert!(classes[0].metadata.annotations.is_none());
    let mut nfs = classes[0].clone();
    nfs.mount_options = None;
    nfs.parameters
        .as_mut()
        .unwrap()
        .insert("protocol".to_owned(), "nfs".to_owned());
    drivers::azure_file::with_smb_mount_options(&inputs, &mut nfs);
    assert_eq!(nfs.mount_options, None, "NFS takes no SMB options");
}

/// A class's parameters cannot change: on OpenShift, `azurefile-csi` has the parameters
/// OpenShift's operator created it with; plain Kubernetes keeps the table's.
#[rstest]
#[case::openshift(Topology::HighlyAvailable, json!({"skuName": "Standard_LRS", "matchTags": "true",
    "tags": "storageClassName=azurefile-csi"}))]
#[case::single_replica(Topology::SingleReplica, json!({"skuName": "Standard_LRS",
    "matchTags": "true", "tags": "storageClassName=azurefile-csi"}))]
#[case::kubernetes(Topology::Kubernetes { control_plane_nodes: true },
    json!({"skuname": "Standard_LRS"}))]
fn azure_file_class_parameters_are_openshifts_on_openshift(
    #[case] topology: Topology,
    #[case] parameters: Value,
) {
    let def = def("azure-file");
    let classes = classes(&def, &inputs(&def, topology));
    assert_eq!(classes.len(), 1);
    assert_eq!(
        serde_json::to_value(&classes[0].parameters).unwrap(),
        parameters
    );
}

// ---------------------------------------------------------------------------------------------
// AWS EFS

#[rstest]
#[case::nothing(None, json!({}), None)]
#[case::cluster(Some("demo-x7k2p"), json!({}), Some("--tags=kubernetes.io/cluster/demo-x7k2p:owned"))]
#[case::cluster_and_resource_tags(
    Some("demo-x7k2p"),
    json!({"resourceTags": [{"key": "team", "value": "storage"}]}),
    Some("--tags=kubernetes.io/cluster/demo-x7k2p:owned team:storage")
)]
fn aws_efs_tags_access_points_with_the_cluster_and_resource_tags(
    #[case] cluster_id: Option<&str>,
    #[case] aws: Value,
    #[case] want: Option<&str>,
) {
    let def = def("aws-efs");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.cluster_id = cluster_id.map(str::to_owned);
    inputs.platform_status = Some(platform_status(PlatformType::AWS, json!({"aws": aws})));
    assert_eq!(drivers::aws_efs::tags_arg(&inputs).as_deref(), want);
    let args = args(&controller(&def, &inputs));
    let tags: Vec<&String> = args.iter().filter(|a| a.starts_with("--tags=")).collect();
    assert_eq!(tags.first().map(|a| a.as_str()), want);
}

#[test]
fn aws_efs_is_removable_only_once_its_volumes_are_released_and_has_no_class() {
    let def = def("aws-efs");
    assert!(def.removable && def.removal_blocked_by_volumes);
    assert!(
        def.storage_classes.is_empty(),
        "each class needs a file system ID"
    );
    let inputs = inputs(&def, Topology::HighlyAvailable);
    assert!(classes(&def, &inputs).is_empty());
}

fn pv(name: &str, driver: &str, phase: &str) -> k8s_openapi::api::core::v1::PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"csi": {"driver": driver, "volumeHandle": name}},
        "status": {"phase": phase}
    }))
    .unwrap()
}

#[test]
fn only_bound_volumes_of_the_driver_block_its_removal() {
    use driver_operator::removal::bound_volumes;
    let volumes = [
        pv("pv-b", "efs.csi.aws.com", "Bound"),
        pv("pv-a", "efs.csi.aws.com", "Bound"),
        pv("pv-released", "efs.csi.aws.com", "Released"),
        pv("pv-ebs", "ebs.csi.aws.com", "Bound"),
    ];
    assert_eq!(bound_volumes(&def("aws-efs"), &volumes), ["pv-a", "pv-b"]);
}

#[test]
fn aws_efs_nodes_get_their_own_optional_credentials_and_a_rotation_rolls_them() {
    let def = def("aws-efs");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    let node = |inputs: &Inputs| csi_kit::build_node_daemon_set(&def, inputs);
    let pod = |ds: &k8s_openapi::api::apps::v1::DaemonSet| ds.spec.clone().unwrap().template;

    // Before cloud-credential-operator writes the Secret: the volume is optional and the keys
    // unset, so the node plugin runs (zonal mounts fail until the Secret exists).
    let before = node(&inputs);
    let spec = pod(&before).spec.unwrap();
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "aws-keys")
        .unwrap();
    let secret = volume.secret.clone().unwrap();
    assert_eq!(
        secret.secret_name.as_deref(),
        Some("node-aws-efs-cloud-credentials")
    );
    assert_eq!(secret.optional, Some(true));
    let driver = &spec.containers[0];
    let env = driver.env.clone().unwrap();
    let key_id = env.iter().find(|e| e.name == "AWS_ACCESS_KEY_ID").unwrap();
    let selector = key_id.value_from.clone().unwrap().secret_key_ref.unwrap();
    assert_eq!(selector.name, "node-aws-efs-cloud-credentials");
    assert_eq!(selector.optional, Some(true));
    assert!(!env.iter().any(|e| e.name == "AWS_SHARED_CREDENTIALS_FILE"));
    assert!(
        driver
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "aws-keys" && m.mount_path == "/var/run/aws/keys")
    );

    // Once it exists its credentials file is read too, and its rotation rolls the pods.
    inputs.secret_hashes.insert(
        "node-aws-efs-cloud-credentials".to_owned(),
        "h1=".to_owned(),
    );
    let with_secret = node(&inputs);
    let env = pod(&with_secret).spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    assert!(env.iter().any(|e| e.name == "AWS_SHARED_CREDENTIALS_FILE"
        && e.value.as_deref() == Some("/var/run/aws/keys/credentials")));
    inputs.secret_hashes.insert(
        "node-aws-efs-cloud-credentials".to_owned(),
        "h2=".to_owned(),
    );
    assert_ne!(pod(&with_secret).metadata, pod(&node(&inputs)).metadata);
    assert!(
        def.hashed_secrets
            .contains(&"node-aws-efs-cloud-credentials".to_owned()),
        "the operator watches the Secret"
    );
}

#[test]
fn the_removal_condition_names_a_capped_list_and_what_to_do() {
    use api::operator_v1::ConditionStatus;
    use driver_operator::removal::{REASON_VOLUMES_IN_USE, removal_condition};
    let def = def("aws-efs");
    let blocking: Vec<String> = (0..7).map(|i| format!("pv-{i}")).collect();
    let c = removal_condition(&def, true, &blocking);
    assert_eq!(c.type_, "AWSEFSRemovalProgressing");
    assert_eq!(c.status, ConditionStatus::True);
    assert_eq!(c.reason.as_deref(), Some(REASON_VOLUMES_IN_USE));
    let message = c.message.unwrap();
    assert!(message.contains("7 PersistentVolume(s)"), "{message}");
    assert!(
        message.contains("pv-0, pv-1, pv-2, pv-3, pv-4 and 2 more"),
        "{message}"
    );
    assert!(!message.contains("pv-5"), "{message}");
    assert!(message.contains("delete the claims"), "{message}");
    assert_eq!(
        removal_condition(&def, true, &[]).status,
        ConditionStatus::False
    );
    assert_eq!(
        removal_condition(&def, false, &blocking).status,
        ConditionStatus::False
    );
}

#[test]
fn a_removal_guard_without_removable_is_refused() {
    let mut def = def("gcp-pd");
    def.removal_blocked_by_volumes = true;
    let error = def.validate().unwrap_err();
    assert!(
        error
            .problems
            .iter()
            .any(|p| p.contains("removalBlockedByVolumes")),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// SMB

#[test]
fn smb_needs_no_cloud_and_waits_for_its_volumes_before_removal() {
    let def = def("smb");
    assert!(def.credentials.is_none());
    assert!(def.copied_config_maps.is_empty());
    assert!(def.removable && def.removal_blocked_by_volumes);
    let inputs = inputs(
        &def,
        Topology::Kubernetes {
            control_plane_nodes: true,
        },
    );
    assert!(classes(&def, &inputs).is_empty());
    // The controller mounts shares to create volumes: its driver container is privileged, on
    // the pod network as OpenShift runs it.
    let deployment = controller(&def, &inputs);
    assert_eq!(pod(&deployment).host_network, None);
    let driver = &pod(&deployment).containers[0];
    assert_eq!(
        driver.security_context.as_ref().and_then(|s| s.privileged),
        Some(true)
    );
    let node_ports: Vec<u16> = [
        def.node.driver.healthz_port,
        def.node.registrar_healthz_port,
    ]
    .into();
    // SMB runs on any platform, beside that platform's driver: its node pods, on the host
    // network, must not take a port another driver's node pods listen on.
    for other in drivers::short_names().into_iter().filter(|n| *n != "smb") {
        let other = drivers::by_name(other).unwrap();
        if !other.node.host_network {
            continue;
        }
        for port in [
            other.node.driver.healthz_port,
            other.node.registrar_healthz_port,
        ] {
            assert!(
                !node_ports.contains(&port),
                "node port {port} is also {}'s",
                other.short_name
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// IBM VPC Block and PowerVS Block

const CRN: &str = "crn:v1:bluemix:public:kms:us-south:a/c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6:0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f:key:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d";

#[rstest]
#[case::unset(None)]
#[case::set(Some(CRN))]
fn ibm_vpc_block_customer_key_goes_on_every_class(#[case] crn: Option<&str>) {
    let def = def("ibm-vpc-block");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    if let Some(crn) = crn {
        inputs.spec.driver_config = Some(driver_config(
            CSIDriverType::IBMCloud,
            json!({"ibmcloud": {"encryptionKeyCRN": crn}}),
        ));
    }
    let classes = classes(&def, &inputs);
    assert_eq!(classes.len(), 8);
    for class in classes {
        let parameters = class.parameters.unwrap();
        // Unset: empty, as OpenShift's classes say, or absent (classes OpenShift does not have).
        assert_eq!(
            parameters.get("encryptionKey").map_or("", String::as_str),
            crn.unwrap_or("")
        );
        let encrypted = if crn.is_some() { "true" } else { "false" };
        assert_eq!(parameters["encrypted"], encrypted);
    }
}

#[test]
fn ibm_vpc_block_reads_its_config_from_storage_secret_store_and_retains_where_asked() {
    let def = def("ibm-vpc-block");
    let inputs = inputs(&def, Topology::HighlyAvailable);
    let deployment = controller(&def, &inputs);
    // Its settings come from the settings ConfigMap both drivers read (envFrom).
    let settings = csi_kit::render_operands(&def, &inputs)
        .into_iter()
        .find_map(|o| match o {
            csi_kit::Operand::ConfigMap(c)
                if c.metadata.name.as_deref() == Some("ibm-vpc-block-csi-configmap") =>
            {
                c.data
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(settings["SECRET_CONFIG_PATH"], "/etc/storage_ibmc");
    let driver = deployment
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers
        .into_iter()
        .find(|c| c.name == "csi-driver")
        .unwrap();
    assert_eq!(
        driver.env_from.unwrap()[0]
            .config_map_ref
            .clone()
            .unwrap()
            .name,
        "ibm-vpc-block-csi-configmap"
    );
    let deployment = controller(&def, &inputs);
    assert!(volume_names(&deployment).contains(&"customer-auth".to_owned()));
    let classes = classes(&def, &inputs);
    for class in &classes {
        let name = class.metadata.name.as_deref().unwrap();
        let retain = class.reclaim_policy.as_deref() == Some("Retain");
        assert_eq!(retain, name.contains("-retain-"), "{name}");
    }
}

#[test]
fn powervs_block_passes_the_custom_service_endpoints() {
    let def = def("powervs-block");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.platform_status = Some(
        serde_json::from_value(
            json!({"type": "PowerVS", "powervs": {"region": "dal", "serviceEndpoints": [
                {"name": "IAM", "url": "https://private.iam.cloud.ibm.com"},
                {"name": "Power", "url": "https://dal.power-iaas.cloud.ibm.com"},
                {"name": "ResourceController", "url": " "},
                {"name": "COS", "url": "https://cos.example.com"},
            ]}}),
        )
        .unwrap(),
    );
    let deployment = controller(&def, &inputs);
    let daemon_set = csi_kit::workloads::build_node_daemon_set(&def, &inputs);
    let node = daemon_set.spec.unwrap().template.spec.unwrap();
    let containers = [
        ("csi-driver", pod(&deployment)),
        ("node-update-controller", pod(&deployment)),
        ("csi-driver", &node),
    ];
    for (name, spec) in containers {
        let container = spec.containers.iter().find(|c| c.name == name).unwrap();
        let env = env_json(container);
        assert_eq!(
            env["IBMCLOUD_IAM_API_ENDPOINT"]["value"], "https://private.iam.cloud.ibm.com",
            "{name}"
        );
        assert_eq!(
            env["IBMCLOUD_POWER_API_ENDPOINT"]["value"],
            "https://dal.power-iaas.cloud.ibm.com"
        );
        assert!(
            !env.contains_key("IBMCLOUD_RESOURCE_CONTROLLER_ENDPOINT"),
            "empty URLs are ignored"
        );
        assert!(!env.keys().any(|k| k.contains("COS")));
    }
    // Without custom endpoints, nothing is set.
    let plain = controller(&def, &self::inputs(&def, Topology::HighlyAvailable));
    assert!(!env(&plain).contains_key("IBMCLOUD_IAM_API_ENDPOINT"));
}

#[test]
fn powervs_block_runs_the_node_update_controller_with_the_api_key() {
    let def = def("powervs-block");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.images.driver = "example.com/powervs:1".to_owned();
    let deployment = controller(&def, &inputs);
    let updater = pod(&deployment)
        .containers
        .iter()
        .find(|c| c.name == "node-update-controller")
        .unwrap();
    assert_eq!(updater.image.as_deref(), Some("example.com/powervs:1"));
    // OpenShift's build of the image has the binary in /bin, the upstream one at the root.
    assert_eq!(
        updater.command.clone().unwrap(),
        ["/bin/node-update-controller"]
    );
    let upstream = controller(&def, &self::inputs(&def, Topology::HighlyAvailable));
    let upstream_updater = pod(&upstream)
        .containers
        .iter()
        .find(|c| c.name == "node-update-controller")
        .unwrap();
    assert!(
        upstream_updater
            .image
            .as_deref()
            .unwrap()
            .starts_with("registry.k8s.io/cloud-provider-ibm/")
    );
    assert_eq!(
        upstream_updater.command.clone().unwrap(),
        ["/node-update-controller"]
    );
    // OpenShift's ports and liveness probe.
    assert_eq!(
        serde_json::to_value(&updater.ports).unwrap(),
        json!([{"name": "metrics", "containerPort": 8081, "protocol": "TCP"},
               {"name": "healthz", "containerPort": 8082, "protocol": "TCP"}])
    );
    assert_eq!(
        serde_json::to_value(&updater.liveness_probe).unwrap(),
        json!({"httpGet": {"path": "/healthz", "port": "healthz"}, "initialDelaySeconds": 5,
               "timeoutSeconds": 10, "periodSeconds": 30, "failureThreshold": 5})
    );
    let key = serde_json::to_value(&updater.env.as_ref().unwrap()[0]).unwrap();
    assert_eq!(
        key["valueFrom"]["secretKeyRef"],
        json!({"name": "ibm-powervs-cloud-credentials", "key": "ibmcloud_api_key", "optional": true})
    );
    assert!(env(&deployment).contains_key("IBMCLOUD_API_KEY"));
    // The settings of the kit's containers, and no privileges.
    assert_eq!(
        serde_json::to_value(&updater.security_context).unwrap(),
        json!({"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false,
               "capabilities": {"drop": ["ALL"]}})
    );
    assert_eq!(
        serde_json::to_value(&updater.resources).unwrap(),
        json!({"requests": {"cpu": "10m", "memory": "50Mi"}})
    );
    // As OpenShift's asset: the API server's default pull policy.
    assert_eq!(updater.image_pull_policy, None);
    assert_eq!(
        updater.termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
    assert_eq!(updater.args, None);
    // The cluster proxy and trusted CA bundle reach it too, as its annotations say.
    let annotations = deployment.metadata.annotations.clone().unwrap();
    for key in [
        "config.openshift.io/inject-proxy",
        "config.openshift.io/inject-proxy-cabundle",
    ] {
        assert_eq!(annotations[key], "csi-driver,node-update-controller");
    }
    // Rendering twice gives one updater, named once (hooks may run on an already hooked
    // object).
    let mut again = deployment.clone();
    drivers::powervs_block::with_api_key_and_node_updater(&inputs, &mut again);
    assert_eq!(
        pod(&again)
            .containers
            .iter()
            .filter(|c| c.name == "node-update-controller")
            .count(),
        1
    );
    assert_eq!(again.metadata.annotations, deployment.metadata.annotations);
}

#[test]
fn powervs_block_gives_the_node_update_controller_the_proxy_and_ca_bundle() {
    let def = def("powervs-block");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.proxy = api::config_v1::ProxyStatus {
        http_proxy: Some("http://proxy.example.com:3128".to_owned()),
        https_proxy: None,
        no_proxy: None,
    };
    inputs.trusted_ca_bundle = true;
    let deployment = controller(&def, &inputs);
    for name in ["csi-driver", "node-update-controller"] {
        let c = pod(&deployment)
            .containers
            .iter()
            .find(|c| c.name == name)
            .unwrap();
        assert!(
            c.env.iter().flatten().any(|e| e.name == "HTTP_PROXY"),
            "{name} has no proxy"
        );
        assert!(
            c.volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == csi_kit::names::CA_BUNDLE_VOLUME),
            "{name} has no CA bundle"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// RBAC of every driver

/// Every rule a driver table asks for its controller (`controller.extraRules`) is granted to
/// the controller's ServiceAccount by a ClusterRole bound to it, whatever network and SCC the
/// controller has (a pod-network controller with the default SCC once got none of them).
#[test]
fn every_controller_gets_its_extra_rules() {
    for name in drivers::short_names() {
        let def = def(name);
        let sa = csi_kit::names::controller_sa(&def);
        let roles = csi_kit::rbac::build_cluster_roles(&def);
        let granted: Vec<k8s_openapi::api::rbac::v1::PolicyRule> =
            csi_kit::rbac::build_cluster_role_bindings(&def)
                .iter()
                .filter(|b| b.subjects.iter().flatten().any(|s| s.name == sa))
                .filter_map(|b| {
                    roles
                        .iter()
                        .find(|r| r.metadata.name.as_deref() == Some(&b.role_ref.name))
                })
                .flat_map(|r| r.rules.clone().unwrap_or_default())
                .collect();
        for rule in &def.controller.extra_rules {
            let covered = granted.iter().any(|g| {
                g.api_groups.clone().unwrap_or_default() == rule.api_groups
                    && g.resources.clone().unwrap_or_default() == rule.resources
                    && g.verbs == rule.verbs
            });
            assert!(
                covered,
                "{name}: controller rule {rule:?} is not granted to {sa} (granted: {granted:?})"
            );
        }
    }
}

/// The controller containers a table can name (`containerOrder`, `alsoMountedIn`) are the ones
/// the kit renders, in the kit's order, for every driver (a driver's hooks may add their own
/// after them, as PowerVS's node-update-controller).
#[test]
fn the_named_controller_containers_are_the_rendered_ones() {
    for name in drivers::short_names() {
        let def = def(name);
        let inputs = inputs(&def, Topology::HighlyAvailable);
        let deployment = controller(&def, &inputs);
        let mut named = def.controller.container_names();
        // vSphere names its driver's metrics proxy as OpenShift's vSphere operator does.
        if name == "vsphere" {
            for n in &mut named {
                if n == "kube-rbac-proxy-2112" {
                    *n = drivers::vsphere::DRIVER_PROXY_CONTAINER.to_owned();
                }
            }
        }
        // Under OpenShift's names where the table gives them (`containerNames`).
        let openshift_name =
            |n: &String| def.controller.container_names.get(n).unwrap_or(n).clone();
        let renamed: Vec<String> = named.iter().map(openshift_name).collect();
        let rendered: Vec<String> = pod(&deployment)
            .containers
            .iter()
            .map(|c| c.name.clone())
            .filter(|c| renamed.contains(c))
            .collect();
        if !def.controller.container_order.is_empty() {
            let position = |c: &String| {
                def.controller
                    .container_order
                    .iter()
                    .position(|n| n == c)
                    .unwrap_or(usize::MAX)
            };
            named.sort_by_key(position);
        }
        let named: Vec<String> = named.iter().map(openshift_name).collect();
        assert_eq!(rendered, named, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics Services and the tables' own RBAC

/// Every port of a driver's metrics Service targets, by name, a container port of the pod it
/// selects (the kit's proxies and those a hook adds, e.g. vSphere's syncer), whatever number
/// the Service gives it; the ServiceMonitor scrapes the same ports in the same order.
#[test]
fn every_metrics_service_port_targets_a_port_the_controller_serves() {
    for name in drivers::short_names() {
        let def = def(name);
        let mut inputs = inputs(&def, Topology::HighlyAvailable);
        inputs.crds.service_monitor = true;
        let Some(service) = csi_kit::build_metrics_service(&def, &inputs) else {
            continue;
        };
        let deployment = controller(&def, &inputs);
        let served: BTreeMap<String, i32> = pod(&deployment)
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| Some((p.name.clone()?, p.container_port)))
            .collect();
        let ports = service.spec.unwrap().ports.unwrap();
        let mut numbers = Vec::new();
        for port in &ports {
            let Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(target)) =
                &port.target_port
            else {
                panic!("{name}: Service port {:?} targets no port name", port.name);
            };
            assert!(
                served.contains_key(target),
                "{name}: Service port {target} is served by no container (ports: {served:?})"
            );
            assert_eq!(port.name.as_ref(), Some(target), "{name}");
            numbers.push(port.port);
        }
        let mut unique = numbers.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), numbers.len(), "{name}: {numbers:?}");
        let monitor = csi_kit::build_service_monitor(&def, &inputs).unwrap();
        let scraped: Vec<&str> = monitor["spec"]["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["port"].as_str().unwrap())
            .collect();
        let names: Vec<&str> = ports.iter().map(|p| p.name.as_deref().unwrap()).collect();
        assert_eq!(scraped, names, "{name}");
    }
}

/// vSphere's syncer metrics (a hook's container) are in the Service and the ServiceMonitor,
/// in OpenShift's order and with its Service ports.
#[test]
fn vsphere_scrapes_the_syncer_through_openshifts_service_ports() {
    let def = def("vsphere");
    let mut inputs = inputs(&def, Topology::HighlyAvailable);
    inputs.crds.service_monitor = true;
    let service = csi_kit::build_metrics_service(&def, &inputs).unwrap();
    let ports: Vec<(String, i32)> = service
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap(), p.port))
        .collect();
    let want = [
        ("driver-m", 442),
        ("provisioner-m", 443),
        ("attacher-m", 444),
        ("resizer-m", 445),
        ("syncer-m", 446),
        ("snapshotter-m", 447),
    ]
    .map(|(n, p)| (n.to_owned(), p));
    assert_eq!(ports, want);
    let deployment = controller(&def, &inputs);
    let proxy = pod(&deployment)
        .containers
        .iter()
        .find(|c| c.name == drivers::vsphere::SYNCER_PROXY_CONTAINER)
        .unwrap();
    let port = &proxy.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.container_port),
        (Some("syncer-m"), drivers::vsphere::SYNCER_METRICS_PORT)
    );
}

/// Whom a driver's RBAC grants what: `Kind/name` of each role to the ServiceAccounts its
/// bindings name.
fn grants(def: &DriverDef, inputs: &Inputs) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for b in csi_kit::build_cluster_role_bindings(def) {
        let role = format!("{}/{}", b.role_ref.kind, b.role_ref.name);
        out.entry(role)
            .or_default()
            .extend(b.subjects.into_iter().flatten().map(|s| s.name));
    }
    for b in csi_kit::build_role_bindings(def, inputs) {
        let role = format!("{}/{}", b.role_ref.kind, b.role_ref.name);
        out.entry(role)
            .or_default()
            .extend(b.subjects.into_iter().flatten().map(|s| s.name));
    }
    out
}

/// The tables' own roles (`roles`) and shared role bindings (`sharedRoles`) grant their rules
/// to their pod's ServiceAccount only: SMB's node reads Secrets without its controller, whose
/// provisioner reads them through the shared reader role; vSphere's node reads ConfigMaps in
/// its namespace only; neither privileged role (which both pods share) carries them.
#[test]
fn table_roles_grant_one_pod_what_it_needs() {
    let smb = def("smb");
    let i = inputs(&smb, Topology::HighlyAvailable);
    let g = grants(&smb, &i);
    let (controller_sa, node_sa) = (
        csi_kit::names::controller_sa(&smb),
        csi_kit::names::node_sa(&smb),
    );
    assert_eq!(g["ClusterRole/smb-csi-driver-role"], [node_sa]);
    assert_eq!(
        g["ClusterRole/openshift-csi-provisioner-configmap-and-secret-reader-role"],
        [controller_sa]
    );
    let roles = csi_kit::build_cluster_roles(&smb);
    let privileged = roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("smb-privileged-role"))
        .unwrap();
    assert_eq!(privileged.rules.as_ref().unwrap().len(), 1, "SCC use only");
    // On plain Kubernetes nobody else installs the shared reader role: SMB brings it.
    let plain = Inputs::offline(
        &smb,
        Topology::Kubernetes {
            control_plane_nodes: true,
        },
        &BTreeMap::new(),
    );
    assert!(
        rendered_kind_names(&smb, &plain)
            .contains("ClusterRole/openshift-csi-provisioner-configmap-and-secret-reader-role")
    );

    let vsphere = def("vsphere");
    let i = inputs(&vsphere, Topology::HighlyAvailable);
    let g = grants(&vsphere, &i);
    let node_sa = csi_kit::names::node_sa(&vsphere);
    assert_eq!(
        g["ClusterRole/vmware-vsphere-csi-driver-node-cluster-role"],
        std::slice::from_ref(&node_sa)
    );
    assert_eq!(g["Role/vmware-vsphere-csi-driver-node-role"], [node_sa]);
    let role = csi_kit::build_roles(&vsphere, &i)
        .into_iter()
        .find(|r| r.metadata.name.as_deref() == Some("vmware-vsphere-csi-driver-node-role"))
        .unwrap();
    assert_eq!(
        role.metadata.namespace.as_deref(),
        Some(vsphere.namespace.as_str())
    );
    assert_eq!(
        role.rules.unwrap()[0].resources.as_deref(),
        Some(&["configmaps".to_owned()][..])
    );
    let privileged = csi_kit::build_cluster_roles(&vsphere)
        .into_iter()
        .find(|r| r.metadata.name.as_deref() == Some("vmware-vsphere-privileged-role"))
        .unwrap();
    assert_eq!(privileged.rules.unwrap().len(), 1, "SCC use only");
}

/// `Kind/name` of every operand rendered for these inputs (e.g. what the leftover sweep
/// spares).
fn rendered_kind_names(def: &DriverDef, i: &Inputs) -> std::collections::BTreeSet<String> {
    csi_kit::render_operands(def, i)
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o.kind(),
                o.to_value()["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// A ClusterRoleBinding the table renames (`clusterRoleBindingNames`) is rendered under the
/// replaced operator's name, so the leftover sweep keeps (adopts) the replaced operator's
/// binding of that name, and the kit's name is not rendered: a binding of that name the
/// replaced operator made would be swept. The tables' own roles are kept the same way, while
/// what the replaced operator made that we do not render still goes.
#[rstest]
#[case::powervs(
    "powervs-block",
    "ibm-powervs-block-csi-storageclass-reader-resizer-binding",
    "ibm-powervs-block-storageclass-reader-resizer-binding"
)]
#[case::ibm_vpc(
    "ibm-vpc-block",
    "ibm-vpc-block-csi-main-attacher-binding",
    "vpc-block-main-attacher-binding"
)]
#[case::ibm_vpc_node(
    "ibm-vpc-block",
    "ibm-vpc-block-node-privileged-binding",
    "ibm-vpc-node-privileged-binding"
)]
fn renamed_bindings_are_rendered_and_adopted(
    #[case] short: &str,
    #[case] kit_name: &str,
    #[case] openshift_name: &str,
) {
    use driver_operator::leftovers::{LeftoverKind, is_leftover};
    let def = def(short);
    assert_eq!(def.cluster_role_binding_names[kit_name], openshift_name);
    let i = inputs(&def, Topology::HighlyAvailable);
    let ours = rendered_kind_names(&def, &i);
    let former = |name: &str| {
        serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(
            json!({"name": name, "managedFields": [{"manager": def.adopt_from[0],
                "operation": "Update", "apiVersion": "rbac.authorization.k8s.io/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {}}]}),
        )
        .unwrap()
    };
    let binding = LeftoverKind::ClusterRoleBinding;
    assert!(ours.contains(&format!("ClusterRoleBinding/{openshift_name}")));
    assert!(!ours.contains(&format!("ClusterRoleBinding/{kit_name}")));
    assert!(!is_leftover(&def, binding, &former(openshift_name), &ours));
    assert!(is_leftover(&def, binding, &former(kit_name), &ours));
}

/// The tables' own roles are rendered (so the leftover sweep adopts OpenShift's of the same
/// name), and the replaced operator's roles we do not render are still swept.
#[test]
fn table_roles_are_adopted_and_unrendered_former_roles_swept() {
    use driver_operator::leftovers::{LeftoverKind, is_leftover};
    for (short, kept, swept) in [
        (
            "smb",
            vec![
                ("ClusterRole", "smb-csi-driver-role"),
                ("ClusterRoleBinding", "smb-csi-driver-binding"),
                (
                    "ClusterRoleBinding",
                    "smb-csi-provisioner-configmap-and-secret-reader-binding",
                ),
            ],
            vec![],
        ),
        (
            "vsphere",
            vec![
                ("ClusterRole", "vmware-vsphere-csi-driver-node-cluster-role"),
                (
                    "ClusterRoleBinding",
                    "vmware-vsphere-csi-driver-node-cluster-binding",
                ),
                ("Role", "vmware-vsphere-csi-driver-node-role"),
                ("RoleBinding", "vmware-vsphere-csi-driver-node-binding"),
            ],
            vec![(
                "ClusterRoleBinding",
                "vmware-vsphere-controller-privileged-binding",
            )],
        ),
        (
            "powervs-block",
            vec![(
                "ClusterRoleBinding",
                "ibm-powervs-block-controller-privileged-binding",
            )],
            vec![
                ("ClusterRole", "ibm-powervs-block-csi-node-role"),
                ("ClusterRoleBinding", "ibm-powervs-block-csi-node-binding"),
            ],
        ),
    ] {
        let def = def(short);
        let i = inputs(&def, Topology::HighlyAvailable);
        let ours = rendered_kind_names(&def, &i);
        let kind_of = |kind: &str| *LeftoverKind::ALL.iter().find(|k| k.name() == kind).unwrap();
        let former = |name: &str| {
            serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(
                json!({"name": name, "managedFields": [{"manager": def.adopt_from[0],
                    "operation": "Update", "apiVersion": "rbac.authorization.k8s.io/v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {}}]}),
            )
            .unwrap()
        };
        for (kind, name) in kept {
            assert!(
                ours.contains(&format!("{kind}/{name}")),
                "{short}: {kind}/{name}"
            );
            assert!(
                !is_leftover(&def, kind_of(kind), &former(name), &ours),
                "{name}"
            );
        }
        for (kind, name) in swept {
            assert!(
                is_leftover(&def, kind_of(kind), &former(name), &ours),
                "{name}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What each driver provisions

/// Every catalogue driver says what it provisions (`volumes`), so `storage-operator diagnose`
/// judges the claims of its classes: its access modes by volume mode at least (every table
/// parses and validates: `by_name` validates it). ReadWriteOncePod is Kubernetes' own: the
/// provisioner hands it to a driver as the mode it gives ReadWriteOnce or as
/// SINGLE_NODE_SINGLE_WRITER, which each driver that has SINGLE_NODE_MULTI_WRITER accepts; so
/// wherever a driver takes ReadWriteOnce it takes ReadWriteOncePod.
#[test]
fn every_driver_says_what_it_provisions() {
    for name in drivers::short_names() {
        let def = def(name);
        let Some(volumes) = &def.volumes else {
            panic!("{name}: the table has no volumes section");
        };
        assert!(
            volumes.volume_modes().contains(&"Filesystem".to_owned()),
            "{name}: {volumes:?}"
        );
        for (volume_mode, access_modes) in &volumes.access_modes {
            assert!(
                !access_modes.contains(&"ReadWriteOnce".to_owned())
                    || access_modes.contains(&"ReadWriteOncePod".to_owned()),
                "{name}: {volume_mode} takes ReadWriteOnce, and so ReadWriteOncePod"
            );
        }
        if let (Some(min), Some(max)) = (volumes.min_bytes(), volumes.max_bytes()) {
            assert!(min <= max, "{name}");
        }
    }
}

/// The facts of the catalogue in one place, as each table's comments source them: a change is
/// reviewed here. Sizes a driver raises or does not enforce, and those no bound holds for
/// every class, are left out ("-").
#[test]
fn what_each_driver_provisions() {
    let facts: Vec<String> = drivers::short_names()
        .into_iter()
        .map(|name| {
            let def = def(name);
            let volumes = def.volumes.unwrap_or_default();
            let size = |size: Option<String>| size.unwrap_or_else(|| "-".to_owned());
            let modes = volumes
                .volume_modes()
                .iter()
                .map(|mode| format!("{mode} [{}]", volumes.access_modes[mode].join(" ")))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "{name}: {} to {}; {modes}",
                size(volumes.min_size.clone()),
                size(volumes.max_size.clone())
            )
        })
        .collect();
    let all = "ReadWriteOnce ReadOnlyMany ReadWriteMany ReadWriteOncePod";
    assert_eq!(
        facts,
        [
            "gcp-pd: - to 64Ti; Filesystem [ReadWriteOnce ReadOnlyMany ReadWriteOncePod], \
             Block [ReadWriteOnce ReadOnlyMany ReadWriteMany ReadWriteOncePod]"
                .to_owned(),
            "aws-ebs: - to 64Ti; Filesystem [ReadWriteOnce ReadWriteOncePod], \
             Block [ReadWriteOnce ReadWriteMany ReadWriteOncePod]"
                .to_owned(),
            "azure-disk: - to 64Ti; Filesystem [ReadWriteOnce ReadWriteOncePod], \
             Block [ReadWriteOnce ReadOnlyMany ReadWriteMany ReadWriteOncePod]"
                .to_owned(),
            format!("azure-file: - to -; Filesystem [{all}]"),
            "aws-efs: - to -; Filesystem [ReadWriteOnce ReadWriteMany ReadWriteOncePod]".to_owned(),
            format!("smb: - to -; Filesystem [{all}]"),
            "ibm-vpc-block: - to 32000Gi; Filesystem [ReadWriteOnce ReadWriteOncePod], \
             Block [ReadWriteOnce ReadWriteOncePod]"
                .to_owned(),
            format!("powervs-block: - to -; Filesystem [{all}], Block [{all}]"),
            format!("openstack-cinder: - to -; Filesystem [{all}], Block [{all}]"),
            format!("openstack-manila: - to -; Filesystem [{all}]"),
            format!("vsphere: - to -; Filesystem [{all}], Block [ReadWriteOnce ReadWriteOncePod]"),
        ]
    );
}
