//! Every driver of the catalogue but GCP PD (see `driver_operator_scenarios.rs`) on a real
//! cluster (see the crate docs for how to run): its driver operator, run in-process as its own
//! ServiceAccount with the RBAC the starter gives it, and with the driver's own probe and
//! tasks, converges from an empty namespace and reports its status.
//! - drivers that need their cloud to say yes (Manila: share types; vSphere: credentials)
//!   report Disabled with the reason and start no pods;
//! - the others apply their controller Deployment (with the rendered containers), node
//!   DaemonSet, CSIDriver and StorageClasses, and their workload conditions say what
//!   kube-controller-manager says of the workloads: on a cluster whose pods cannot run, that
//!   they are waiting for them; IBM VPC Block also reports `SecretSyncDegraded`, naming the
//!   credentials it lacks;
//! - vSphere, given its credentials and a (fake, in-process) vCenter, makes its storage policy
//!   there and the StorageClass naming it;
//! - removable drivers (AWS EFS, SMB) are then set Removed and uninstall themselves.
//!
//! On a cluster without OpenShift's Infrastructure each test declares the driver's platform.
//! A test refuses to run where its driver is already installed, and removes everything it
//! created at the end (waiting until the API server has let go of it).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

// The drivers crate's fake vCenter, for the vSphere scenario.
#[path = "../../../crates/drivers/tests/fake_vcenter/mod.rs"]
mod fake_vcenter;

use api::operator_v1::ClusterCSIDriver;
use e2e::driver::Driver;
use e2e::{cleanup, ensure_platform, wait_for};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// What a driver's scenario expects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Disabled, with a message containing this.
    Disabled(&'static str),
    /// Operands applied and status reported.
    Applied,
}

async fn scenario(short: &str, platform_status: Value, expect: Expect) {
    let admin = e2e::admin().await;
    let declared = ensure_platform(&admin, platform_status).await;
    let driver = Driver::prepare(&admin, short).await;
    let def = driver.def.clone();
    let csi_name = def.name.clone();
    let ns = def.namespace.clone();
    let running = driver.start();

    let prefix = &def.condition_prefix;
    let controller = csi_kit::names::controller(&def);
    let node = csi_kit::names::node(&def);
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    match expect {
        Expect::Disabled(reason) => {
            let condition = driver
                .condition_is(
                    &admin,
                    &format!("{prefix}DriverControllerServiceControllerDisabled"),
                    "True",
                )
                .await;
            let message = condition.message.unwrap_or_default();
            assert!(message.contains(reason), "{message}");
            assert!(
                deployments.get_opt(&controller).await.unwrap().is_none(),
                "a disabled driver starts no pods"
            );
        }
        Expect::Applied => {
            wait_for("the controller Deployment", async || {
                deployments.get_opt(&controller).await.unwrap()
            })
            .await;
            wait_for("the node DaemonSet", async || {
                Api::<DaemonSet>::namespaced(admin.clone(), &ns)
                    .get_opt(&node)
                    .await
                    .unwrap()
            })
            .await;
            wait_for("the CSIDriver", async || {
                Api::<CSIDriver>::all(admin.clone())
                    .get_opt(&csi_name)
                    .await
                    .unwrap()
            })
            .await;
            for class in &def.storage_classes {
                wait_for(&format!("StorageClass {}", class.name), async || {
                    Api::<StorageClass>::all(admin.clone())
                        .get_opt(&class.name)
                        .await
                        .unwrap()
                })
                .await;
            }
            driver.assert_workloads_applied(&admin).await;
            driver.assert_workloads_reported(&admin).await;
            if short == drivers::ibm_vpc_block::SHORT_NAME {
                let condition = driver
                    .condition_is(&admin, "SecretSyncDegraded", "True")
                    .await;
                let message = condition.message.unwrap_or_default();
                assert!(message.contains("ibm-cloud-credentials"), "{message}");
            }
            if def.removable {
                let drivers_api: Api<ClusterCSIDriver> = Api::all(admin.clone());
                drivers_api
                    .patch(
                        &csi_name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"managementState": "Removed"}})),
                    )
                    .await
                    .unwrap();
                wait_for("the driver uninstalled", async || {
                    let gone = deployments.get_opt(&controller).await.unwrap().is_none()
                        && Api::<DaemonSet>::namespaced(admin.clone(), &ns)
                            .get_opt(&node)
                            .await
                            .unwrap()
                            .is_none()
                        && Api::<CSIDriver>::all(admin.clone())
                            .get_opt(&csi_name)
                            .await
                            .unwrap()
                            .is_none();
                    let finalizers = drivers_api
                        .get(&csi_name)
                        .await
                        .unwrap()
                        .metadata
                        .finalizers
                        .unwrap_or_default();
                    (gone && finalizers.is_empty()).then_some(())
                })
                .await;
            }
        }
    }

    running.stop().await;
    driver.finish(&admin).await;
    cleanup::undeclare_platform(&admin, declared).await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn aws_ebs() {
    scenario(
        "aws-ebs",
        json!({"type": "AWS", "aws": {"region": "us-east-1"}}),
        Expect::Applied,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn aws_efs_installs_and_uninstalls() {
    scenario(
        "aws-efs",
        json!({"type": "AWS", "aws": {"region": "us-east-1"}}),
        Expect::Applied,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn azure_disk() {
    scenario(
        "azure-disk",
        json!({"type": "Azure", "azure": {}}),
        Expect::Applied,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn azure_file() {
    scenario(
        "azure-file",
        json!({"type": "Azure", "azure": {}}),
        Expect::Applied,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn openstack_cinder() {
    scenario(
        "openstack-cinder",
        json!({"type": "OpenStack"}),
        Expect::Applied,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn openstack_manila_disabled_without_share_types() {
    scenario(
        "openstack-manila",
        json!({"type": "OpenStack"}),
        Expect::Disabled("manila-cloud-credentials"),
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn vsphere_disabled_without_credentials() {
    scenario(
        "vsphere",
        json!({"type": "VSphere"}),
        Expect::Disabled("vmware-vsphere-cloud-credentials"),
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn ibm_vpc_block_says_what_its_secret_lacks() {
    scenario(
        "ibm-vpc-block",
        json!({"type": "IBMCloud", "ibmcloud": {"location": "eu-de"}}),
        Expect::Applied,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn powervs_block() {
    scenario(
        "powervs-block",
        json!({"type": "PowerVS", "powervs": {"region": "dal", "zone": "dal10"}}),
        Expect::Applied,
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn smb_installs_and_uninstalls() {
    scenario("smb", json!({"type": "None"}), Expect::Applied).await;
}

/// With the cloud config and cloud-credential-operator's Secret, vSphere installs: its operator
/// writes csi-vsphere.conf, credentials included, into its own Secret, under the RBAC the
/// starter gives it (which allows writing that Secret by name and no other), and the controller
/// mounts it. It makes the storage policy in vCenter (a fake one in this process, which the
/// operator, running here too, reaches on 127.0.0.1) and then StorageClass thin-csi naming it.
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn vsphere_writes_its_config_secret_once_credentials_exist() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
    use kube::api::PostParams;

    let admin = e2e::admin().await;
    let vcenter = fake_vcenter::FakeVCenter::start_https(fake_vcenter::Inventory {
        datacenters: vec![("dc1".into(), vec!["ds1".into()])],
    })
    .await;
    let declared = ensure_platform(&admin, json!({"type": "VSphere"})).await;
    let cluster = e2e::infrastructure_name(&admin).await;
    let driver = Driver::prepare(&admin, "vsphere").await;
    let ns = driver.def.namespace.clone();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    // OpenShift's API server refuses to delete openshift-config: once made, it stays.
    if namespaces
        .get_opt("openshift-config")
        .await
        .unwrap()
        .is_none()
    {
        let namespace = serde_json::from_value(json!({"metadata": {"name": "openshift-config"}}));
        namespaces
            .create(&PostParams::default(), &namespace.unwrap())
            .await
            .unwrap();
    }
    let cloud_configs: Api<ConfigMap> = Api::namespaced(admin.clone(), "openshift-config");
    let cloud_config = serde_json::from_value(json!({
        "metadata": {"name": "cloud-provider-config"},
        "data": {"config": format!(
            "[Global]\ninsecure-flag = 1\nport = {}\n[Workspace]\nserver = 127.0.0.1\ndatacenter = dc1\ndefault-datastore = ds1\n[VirtualCenter \"127.0.0.1\"]\ndatacenters = dc1\n",
            vcenter.port()
        )}
    }));
    cloud_configs
        .create(&PostParams::default(), &cloud_config.unwrap())
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let credentials = serde_json::from_value(json!({
        "metadata": {"name": "vmware-vsphere-cloud-credentials"},
        "stringData": {
            "127.0.0.1.username": fake_vcenter::USER,
            "127.0.0.1.password": fake_vcenter::PASSWORD,
        }
    }));
    secrets
        .create(&PostParams::default(), &credentials.unwrap())
        .await
        .unwrap();
    let running = driver.start();

    let config = wait_for("Secret vsphere-csi-config-secret", async || {
        secrets.get_opt("vsphere-csi-config-secret").await.unwrap()
    })
    .await;
    let text = String::from_utf8(config.data.unwrap()["cloud.conf"].0.clone()).unwrap();
    assert!(
        text.contains(&format!(
            "user = \"{}\"\npassword = {}",
            fake_vcenter::USER,
            drivers::vsphere::quoted(fake_vcenter::PASSWORD)
        )),
        "{text}"
    );
    driver.assert_workloads_applied(&admin).await;
    let controller = Api::<Deployment>::namespaced(admin.clone(), &ns)
        .get(&csi_kit::names::controller(&driver.def))
        .await
        .unwrap();
    let volumes = controller
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .volumes
        .unwrap();
    assert!(volumes.iter().any(|v| {
        v.secret.as_ref().and_then(|s| s.secret_name.as_deref())
            == Some("vsphere-csi-config-secret")
    }));

    // The storage policy, then the default class naming it.
    let policy = format!("openshift-storage-policy-{cluster}");
    let class = wait_for("StorageClass thin-csi", async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt("thin-csi")
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        class.parameters.unwrap().get("StoragePolicyName"),
        Some(&policy)
    );
    let degraded = driver
        .condition_is(
            &admin,
            "VMwareVSphereDriverStorageClassControllerDegraded",
            "False",
        )
        .await;
    assert_eq!(degraded.reason.as_deref(), Some("AsExpected"));
    assert!(vcenter.state().profile_named(&policy).is_some());

    running.stop().await;
    driver.finish(&admin).await;
    cleanup::delete_and_wait(&secrets, "vmware-vsphere-cloud-credentials").await;
    cleanup::delete_and_wait(&secrets, "vsphere-csi-config-secret").await;
    cleanup::delete_and_wait(&cloud_configs, "cloud-provider-config").await;
    cleanup::undeclare_platform(&admin, declared).await;
}
