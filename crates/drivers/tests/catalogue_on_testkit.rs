//! The driver operators of the catalogue (but GCP PD, see `operator_on_testkit.rs`) against the
//! in-process API server with workload simulation: each converges from nothing, then writes
//! nothing, and its special behaviour works end to end.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use driver_operator::Settings;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster, SimConfig};

const NS: &str = "openshift-cluster-csi-drivers";

/// One driver under test.
struct Driver {
    short: &'static str,
    csi: &'static str,
    prefix: &'static str,
    agent: &'static str,
}

impl Driver {
    fn new(short: &'static str) -> Self {
        let def = drivers::by_name(short).unwrap();
        Self {
            short,
            csi: def.name.clone().leak(),
            prefix: def.condition_prefix.clone().leak(),
            agent: format!("{short}-operator").leak(),
        }
    }

    fn controller(&self) -> String {
        csi_kit::names::controller(&drivers::by_name(self.short).unwrap())
    }

    fn node(&self) -> String {
        csi_kit::names::node(&drivers::by_name(self.short).unwrap())
    }

    fn start(&self, cluster: &Cluster) -> Background {
        let client = cluster.client_with_agent(self.agent);
        let def = drivers::by_name(self.short).unwrap();
        let instance = format!("{}-0", self.agent);
        let metrics = Metrics::new();
        let settling = metrics.settling(&driver_operator::operator_name(&def));
        Background::spawn(|shutdown| async move {
            driver_operator::run(
                client,
                def,
                Settings {
                    env: [("DRIVER_IMAGE".to_owned(), "example.com/driver:1".to_owned())].into(),
                    instance: Some(instance),
                    ..Settings::default()
                },
                metrics,
                Readiness::default(),
                shutdown,
            )
            .await
            .unwrap();
        })
        .settles_when(settling)
    }
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

async fn install_crds(client: &Client, kinds: &[&str]) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds::all() {
        if kinds.contains(&crd.spec.names.kind.as_str()) {
            api.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
}

async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// An OpenShift cluster (HighlyAvailable) with this platform status, three nodes and the
/// workload simulation running.
async fn openshift(platform_status: Value) -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Infrastructure", "Proxy"]).await;
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                   "platformStatus": platform_status}
    });
    let infra: api::config_v1::Infrastructure =
        serde_json::from_value(infrastructure.clone()).unwrap();
    let infrastructures = Api::<api::config_v1::Infrastructure>::all(admin.clone());
    infrastructures
        .create(&PostParams::default(), &infra)
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
    create_namespace(&admin, NS).await;
    for node in ["node-a", "node-b", "node-c"] {
        cluster.add_node(node, true);
    }
    cluster.simulate_workloads(SimConfig::default());
    (cluster, admin)
}

async fn create_cluster_csi_driver(client: &Client, driver: &Driver, spec: Value) {
    let object: ClusterCSIDriver = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": driver.csi}, "spec": spec}))
    .unwrap();
    Api::<ClusterCSIDriver>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

async fn condition(
    client: &Client,
    driver: &Driver,
    type_: &str,
) -> Option<(String, String, String)> {
    let object = Api::<ClusterCSIDriver>::all(client.clone())
        .get_opt(driver.csi)
        .await
        .unwrap()?;
    let c = object.status?.condition(type_)?.clone();
    Some((
        c.status.to_string(),
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

/// Waits until every controller of the driver reports healthy.
async fn healthy(client: &Client, driver: &Driver) {
    let p = driver.prefix;
    let wanted = [
        (
            format!("{p}DriverControllerServiceControllerAvailable"),
            "True",
        ),
        (
            format!("{p}DriverControllerServiceControllerProgressing"),
            "False",
        ),
        (
            format!("{p}DriverControllerServiceControllerDegraded"),
            "False",
        ),
        (format!("{p}DriverNodeServiceControllerAvailable"), "True"),
        (
            format!("{p}DriverNodeServiceControllerProgressing"),
            "False",
        ),
        (
            format!("{p}DriverStaticResourcesControllerDegraded"),
            "False",
        ),
        ("StorageClassControllerDegraded".to_owned(), "False"),
        ("ManagementStateDegraded".to_owned(), "False"),
    ];
    for (type_, status) in &wanted {
        eventually(&format!("{type_}={status}"), async || {
            condition(client, driver, type_)
                .await
                .filter(|(s, _, _)| s == status)
        })
        .await;
    }
}

/// Waits until the operator has converged: its latest pass wrote nothing, failed nothing and
/// had no change waiting (fails if it never does).
async fn quiet(cluster: &Cluster, driver: &Driver, running: &Background) {
    running.converged(cluster, driver.agent).await;
}

/// Converges from nothing: controller, node, CSIDriver and classes exist, the conditions say
/// healthy, and a second pass writes nothing.
async fn converges(
    cluster: &Cluster,
    admin: &Client,
    driver: &Driver,
    running: &Background,
) -> Deployment {
    let deployment = eventually("the controller Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(&driver.controller())
            .await
            .unwrap()
    })
    .await;
    eventually("the node DaemonSet", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt(&driver.node())
            .await
            .unwrap()
    })
    .await;
    eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(driver.csi)
            .await
            .unwrap()
    })
    .await;
    healthy(admin, driver).await;
    quiet(cluster, driver, running).await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(driver.agent), 0, "a second pass wrote");
    deployment
}

fn env_value(deployment: &Deployment, name: &str) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "csi-driver")?
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

fn template_annotations(deployment: &Deployment) -> std::collections::BTreeMap<String, String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default()
}

async fn storage_class(admin: &Client, name: &str) -> StorageClass {
    eventually(&format!("StorageClass {name}"), async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt(name)
            .await
            .unwrap()
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// AWS EBS

#[tokio::test]
async fn aws_ebs_converges_with_kms_key_and_rolls_on_a_new_ca_bundle() {
    let driver = Driver::new("aws-ebs");
    let (cluster, admin) = openshift(json!({"type": "AWS", "aws": {"region": "us-east-2",
        "resourceTags": [{"key": "team", "value": "storage"}]}}))
    .await;
    create_namespace(&admin, "openshift-config-managed").await;
    let sources = Api::<ConfigMap>::namespaced(admin.clone(), "openshift-config-managed");
    let source = |pem: &str| -> ConfigMap {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-cloud-config", "namespace": "openshift-config-managed"},
            "data": {"ca-bundle.pem": pem, "cloud.conf": "[Global]\n"}}))
        .unwrap()
    };
    sources
        .create(&PostParams::default(), &source("pem-1"))
        .await
        .unwrap();
    create_cluster_csi_driver(
        &admin,
        &driver,
        json!({"managementState": "Managed", "driverConfig": {"driverType": "AWS",
               "aws": {"kmsKeyARN": "arn:aws:kms:us-east-2:123456789012:key/k1"}}}),
    )
    .await;
    let running = driver.start(&cluster);

    let deployment = converges(&cluster, &admin, &driver, &running).await;
    assert_eq!(
        env_value(&deployment, "AWS_CA_BUNDLE").as_deref(),
        Some("/etc/ca/ca-bundle.pem")
    );
    assert_eq!(
        env_value(&deployment, "AWS_REGION").as_deref(),
        Some("us-east-2")
    );
    let args = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap();
    assert!(
        args.contains(&"--k8s-tag-cluster-id=demo-x7k2p".to_owned()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--extra-tags=team=storage".to_owned()),
        "{args:?}"
    );
    let copies = Api::<ConfigMap>::namespaced(admin.clone(), NS);
    let copy = copies.get("kube-cloud-config").await.unwrap();
    assert_eq!(copy.data.unwrap()["ca-bundle.pem"], "pem-1");
    for name in ["gp3-csi", "gp2-csi"] {
        let class = storage_class(&admin, name).await;
        assert_eq!(
            class.parameters.unwrap()["kmsKeyId"],
            "arn:aws:kms:us-east-2:123456789012:key/k1"
        );
    }

    // A new bundle is copied and rolls the controller pods.
    let before = template_annotations(&deployment);
    sources
        .replace("kube-cloud-config", &PostParams::default(), &{
            let mut cm = source("pem-2");
            cm.metadata.resource_version = sources
                .get("kube-cloud-config")
                .await
                .unwrap()
                .metadata
                .resource_version;
            cm
        })
        .await
        .unwrap();
    let deployments = Api::<Deployment>::namespaced(admin.clone(), NS);
    eventually("the pods roll for the new bundle", async || {
        let d = deployments.get(&driver.controller()).await.unwrap();
        (template_annotations(&d) != before).then_some(())
    })
    .await;
    assert_eq!(
        copies.get("kube-cloud-config").await.unwrap().data.unwrap()["ca-bundle.pem"],
        "pem-2"
    );
    quiet(&cluster, &driver, &running).await;

    // Without the source, the copy goes and the driver no longer uses a custom bundle.
    sources
        .delete("kube-cloud-config", &Default::default())
        .await
        .unwrap();
    eventually("the copy is deleted and the bundle unmounted", async || {
        let d = deployments.get(&driver.controller()).await.unwrap();
        let copy = copies.get_opt("kube-cloud-config").await.unwrap();
        (copy.is_none() && env_value(&d, "AWS_CA_BUNDLE").is_none()).then_some(())
    })
    .await;
    quiet(&cluster, &driver, &running).await;
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Azure Disk and Azure File

async fn create_cloud_provider_config(admin: &Client, endpoints: bool) {
    create_namespace(admin, "openshift-config").await;
    let mut data = json!({"config": "{\"cloud\": \"AzureStackCloud\"}"});
    if endpoints {
        data["endpoints"] = json!("{\"name\": \"AzureStackCloud\"}");
    }
    let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cloud-provider-config", "namespace": "openshift-config"},
        "data": data}))
    .unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), "openshift-config")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

#[tokio::test]
async fn azure_disk_on_azure_stack_hub_converges_with_its_endpoints_and_encryption_set() {
    let driver = Driver::new("azure-disk");
    let (cluster, admin) = openshift(json!({"type": "Azure",
        "azure": {"cloudName": "AzureStackCloud", "resourceGroupName": "rg",
                  "armEndpoint": "https://management.hub.example.com"}}))
    .await;
    create_cloud_provider_config(&admin, true).await;
    create_cluster_csi_driver(
        &admin,
        &driver,
        json!({"managementState": "Managed", "driverConfig": {"driverType": "Azure",
               "azure": {"diskEncryptionSet": {"subscriptionID": "0b2d1f3c-1111-2222-3333-444455556666",
                                               "resourceGroup": "keys", "name": "des-1"}}}}),
    )
    .await;
    let running = driver.start(&cluster);

    let deployment = converges(&cluster, &admin, &driver, &running).await;
    assert_eq!(
        env_value(&deployment, "AZURE_ENVIRONMENT_FILEPATH").as_deref(),
        Some("/etc/azure/azurestackcloud.json")
    );
    assert_eq!(
        env_value(&deployment, "AZURE_CREDENTIAL_FILE").as_deref(),
        Some("/etc/kubernetes/cloud.conf")
    );
    let init = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(
        init.init_containers.as_ref().unwrap()[0].name,
        "azure-inject-credentials"
    );
    let copy = Api::<ConfigMap>::namespaced(admin.clone(), NS)
        .get("azure-cloud-config")
        .await
        .unwrap();
    assert!(copy.data.unwrap().contains_key("endpoints"));
    let parameters = storage_class(&admin, "managed-csi")
        .await
        .parameters
        .unwrap();
    assert_eq!(parameters["skuname"], "Premium_LRS");
    assert_eq!(
        parameters["diskEncryptionSetID"],
        "/subscriptions/0b2d1f3c-1111-2222-3333-444455556666/resourceGroups/keys/providers/Microsoft.Compute/diskEncryptionSets/des-1"
    );
    running.stop().await;
}

#[tokio::test]
async fn azure_file_converges_with_its_smb_class() {
    let driver = Driver::new("azure-file");
    let (cluster, admin) =
        openshift(json!({"type": "Azure", "azure": {"cloudName": "AzurePublicCloud"}})).await;
    create_cloud_provider_config(&admin, false).await;
    create_cluster_csi_driver(&admin, &driver, json!({"managementState": "Managed"})).await;
    let running = driver.start(&cluster);

    converges(&cluster, &admin, &driver, &running).await;
    let class = storage_class(&admin, "azurefile-csi").await;
    assert!(
        class
            .mount_options
            .unwrap()
            .contains(&"nosharesock".to_owned())
    );
    let csi = Api::<CSIDriver>::all(admin.clone())
        .get(driver.csi)
        .await
        .unwrap();
    assert_eq!(
        csi.metadata.labels.unwrap()["security.openshift.io/csi-ephemeral-volume-profile"],
        "privileged"
    );
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// AWS EFS

async fn finalizers(admin: &Client, driver: &Driver) -> Vec<String> {
    Api::<ClusterCSIDriver>::all(admin.clone())
        .get(driver.csi)
        .await
        .unwrap()
        .metadata
        .finalizers
        .unwrap_or_default()
}

async fn set_management_state(admin: &Client, driver: &Driver, state: &str) {
    Api::<ClusterCSIDriver>::all(admin.clone())
        .patch(
            driver.csi,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"managementState": state}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn aws_efs_removal_waits_for_its_bound_volumes() {
    use k8s_openapi::api::core::v1::PersistentVolume;

    let driver = Driver::new("aws-efs");
    let (cluster, admin) = openshift(json!({"type": "AWS", "aws": {"region": "us-east-2"}})).await;
    create_cluster_csi_driver(&admin, &driver, json!({"managementState": "Managed"})).await;
    let running = driver.start(&cluster);
    converges(&cluster, &admin, &driver, &running).await;
    assert_eq!(finalizers(&admin, &driver).await.len(), 2);
    let (status, _, _) = condition(&admin, &driver, "AWSEFSRemovalProgressing")
        .await
        .unwrap();
    assert_eq!(status, "False");

    // A bound volume of the driver, and one of another driver that does not count.
    let volumes = Api::<PersistentVolume>::all(admin.clone());
    for (name, csi_driver) in [
        ("pvc-efs-1", "efs.csi.aws.com"),
        ("pvc-ebs-1", "ebs.csi.aws.com"),
    ] {
        let pv: PersistentVolume = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany"],
                     "csi": {"driver": csi_driver, "volumeHandle": format!("fs-1::{name}")}}}))
        .unwrap();
        volumes.create(&PostParams::default(), &pv).await.unwrap();
        volumes
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Bound"}})),
            )
            .await
            .unwrap();
    }

    set_management_state(&admin, &driver, "Removed").await;
    let (_, reason, message) = eventually("removal blocked", async || {
        condition(&admin, &driver, "AWSEFSRemovalProgressing")
            .await
            .filter(|(s, _, _)| s == "True")
    })
    .await;
    assert_eq!(reason, "VolumesInUse");
    assert!(message.contains("pvc-efs-1"), "{message}");
    assert!(!message.contains("pvc-ebs-1"), "{message}");
    quiet(&cluster, &driver, &running).await;
    let deployments = Api::<Deployment>::namespaced(admin.clone(), NS);
    assert!(
        deployments
            .get_opt(&driver.controller())
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        finalizers(&admin, &driver).await.len(),
        2,
        "finalizers stay"
    );

    // The claim goes: the volume is released and the driver is removed.
    volumes
        .patch_status(
            "pvc-efs-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Released"}})),
        )
        .await
        .unwrap();
    eventually("workloads deleted and finalizers released", async || {
        let gone = deployments
            .get_opt(&driver.controller())
            .await
            .unwrap()
            .is_none()
            && Api::<DaemonSet>::namespaced(admin.clone(), NS)
                .get_opt(&driver.node())
                .await
                .unwrap()
                .is_none();
        (gone && finalizers(&admin, &driver).await.is_empty()).then_some(())
    })
    .await;
    let (status, _, _) = condition(&admin, &driver, "AWSEFSRemovalProgressing")
        .await
        .unwrap();
    assert_eq!(status, "False");
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// SMB

#[tokio::test]
async fn smb_converges_on_any_platform_with_a_privileged_controller() {
    let driver = Driver::new("smb");
    let (cluster, admin) = openshift(json!({"type": "None"})).await;
    create_cluster_csi_driver(&admin, &driver, json!({"managementState": "Managed"})).await;
    let running = driver.start(&cluster);
    let deployment = converges(&cluster, &admin, &driver, &running).await;
    let spec = deployment.spec.unwrap().template.spec.unwrap();
    // On the pod network, as OpenShift runs it, with a privileged driver container only.
    assert_eq!(spec.host_network, None);
    let privileged: Vec<(&str, Option<bool>)> = spec
        .containers
        .iter()
        .map(|c| {
            let p = c.security_context.as_ref().and_then(|s| s.privileged);
            (c.name.as_str(), p)
        })
        .collect();
    assert_eq!(privileged[0], ("csi-driver", Some(true)));
    assert!(
        privileged[1..].iter().all(|(_, p)| p.is_none()),
        "{privileged:?}"
    );
    // The privileged SCC comes from the node's role, under OpenShift's binding name.
    let binding = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
        .get("csi-smb-controller-privileged-binding")
        .await
        .unwrap();
    assert_eq!(binding.role_ref.name, "smb-privileged-role");
    let subjects = binding.subjects.unwrap_or_default();
    assert_eq!(subjects[0].name, "smb-csi-driver-controller-sa");
    assert_eq!(finalizers(&admin, &driver).await.len(), 2, "removable");
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// IBM VPC Block and PowerVS Block

#[tokio::test]
async fn ibm_vpc_block_converges_with_a_customer_key() {
    let driver = Driver::new("ibm-vpc-block");
    let (cluster, admin) = openshift(json!({"type": "IBMCloud",
        "ibmcloud": {"location": "us-south", "providerType": "VPC"}}))
    .await;
    let crn = "crn:v1:bluemix:public:kms:us-south:a/c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6:0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f:key:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d";
    create_cluster_csi_driver(
        &admin,
        &driver,
        json!({"managementState": "Managed", "driverConfig": {"driverType": "IBMCloud",
               "ibmcloud": {"encryptionKeyCRN": crn}}}),
    )
    .await;
    let running = driver.start(&cluster);
    converges(&cluster, &admin, &driver, &running).await;
    let class = storage_class(&admin, "ibmc-vpc-block-10iops-tier").await;
    assert_eq!(
        class.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    assert_eq!(class.parameters.unwrap()["encryptionKey"], crn);
    running.stop().await;
}

#[tokio::test]
async fn powervs_block_converges_with_its_node_update_controller() {
    let driver = Driver::new("powervs-block");
    let (cluster, admin) =
        openshift(json!({"type": "PowerVS", "powervs": {"region": "dal", "zone": "dal12"}})).await;
    create_cluster_csi_driver(&admin, &driver, json!({"managementState": "Managed"})).await;
    let running = driver.start(&cluster);
    let deployment = converges(&cluster, &admin, &driver, &running).await;
    let containers = deployment.spec.unwrap().template.spec.unwrap().containers;
    assert!(
        containers
            .iter()
            .any(|c| c.name == "node-update-controller")
    );
    storage_class(&admin, "ibm-powervs-tier1").await;
    running.stop().await;
}
