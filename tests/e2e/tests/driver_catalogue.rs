//! Every driver of the catalogue but GCP PD (see `driver_operator_scenarios.rs`) on a real
//! cluster (see the crate docs for how to run): its driver operator, run in-process with the
//! driver's own probe and tasks, converges from an empty namespace and reports its status.
//! - drivers that need their cloud to say yes (Manila: share types; vSphere: credentials)
//!   report Disabled with the reason and start no pods;
//! - the others apply their controller Deployment, node DaemonSet, CSIDriver and
//!   StorageClasses and report their workloads (Available once they are; on a cluster without
//!   nodes the status a kubelet would give is patched into `/status`); IBM VPC Block also
//!   reports `SecretSyncDegraded`, naming the credentials it lacks;
//! - removable drivers (AWS EFS, SMB) are then set Removed and uninstall themselves.
//!
//! On a cluster without OpenShift's Infrastructure each test declares the driver's platform.
//! A test refuses to run where its driver is already installed, and removes everything it
//! created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::config_v1::Infrastructure;
use api::operator_v1::ClusterCSIDriver;
use e2e::{apply_crd, ensure_platform, simulate_workloads, wait_for};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};

async fn condition(client: &Client, driver: &str, type_: &str) -> Option<(String, String)> {
    let driver = Api::<ClusterCSIDriver>::all(client.clone())
        .get(driver)
        .await
        .unwrap();
    let condition = driver.status?.condition(type_).cloned()?;
    Some((
        condition.status.as_str().to_owned(),
        condition.message.unwrap_or_default(),
    ))
}

async fn condition_is(client: &Client, driver: &str, type_: &str, status: &str) -> String {
    wait_for(&format!("{type_}={status}"), async || {
        condition(client, driver, type_)
            .await
            .filter(|(s, _)| s == status)
            .map(|(_, m)| m)
    })
    .await
}

/// What a driver's scenario expects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Disabled, with a message containing this.
    Disabled(&'static str),
    /// Operands applied and status reported.
    Applied,
}

/// Deletes every object labelled as `short`'s operand (and its CSIDriver), in `ns` too
/// unless the namespace itself goes.
async fn remove_operands(
    client: &Client,
    short: &str,
    csi_name: &str,
    ns: &str,
    namespace_goes: bool,
) {
    let ours = ListParams::default().labels(&format!("{}={short}", csi::names::OPERAND_LABEL));
    let all = DeleteParams::default();
    let _ = Api::<CSIDriver>::all(client.clone())
        .delete(csi_name, &all)
        .await;
    let _ = Api::<StorageClass>::all(client.clone())
        .delete_collection(&all, &ours)
        .await;
    let _ = Api::<ClusterRole>::all(client.clone())
        .delete_collection(&all, &ours)
        .await;
    let _ = Api::<ClusterRoleBinding>::all(client.clone())
        .delete_collection(&all, &ours)
        .await;
    let snapshot_classes = ApiResource {
        group: "snapshot.storage.k8s.io".into(),
        version: "v1".into(),
        api_version: "snapshot.storage.k8s.io/v1".into(),
        kind: "VolumeSnapshotClass".into(),
        plural: "volumesnapshotclasses".into(),
    };
    let _ = Api::<DynamicObject>::all_with(client.clone(), &snapshot_classes)
        .delete_collection(&all, &ours)
        .await;
    if namespace_goes {
        return;
    }
    macro_rules! in_namespace {
        ($($kind:ty),*) => {$(
            let _ = Api::<$kind>::namespaced(client.clone(), ns).delete_collection(&all, &ours).await;
        )*};
    }
    in_namespace!(
        Deployment,
        DaemonSet,
        Service,
        ConfigMap,
        Secret,
        ServiceAccount,
        Role,
        RoleBinding,
        PodDisruptionBudget
    );
}

async fn scenario(short: &str, platform_status: Value, expect: Expect) {
    let client = e2e::client()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    let def = drivers::by_name(short).unwrap();
    let csi_name = def.name.clone();
    let ns = def.namespace.clone();
    apply_crd(&client, &api::crds::cluster_csi_driver()).await;
    let declared = ensure_platform(&client, platform_status).await;
    let drivers_api: Api<ClusterCSIDriver> = Api::all(client.clone());
    wait_for("the ClusterCSIDriver API", async || {
        drivers_api
            .list(&ListParams::default())
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    assert!(
        drivers_api.get_opt(&csi_name).await.unwrap().is_none(),
        "this cluster already has the {short} driver installed; run the e2e tests on a disposable cluster"
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created_namespace = namespaces.get_opt(&ns).await.unwrap().is_none();
    if created_namespace {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                )
                .unwrap(),
            )
            .await
            .unwrap();
    }
    drivers_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": csi_name}, "spec": {"managementState": "Managed"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let extras = drivers::extras(&def, client.clone());
    let task = tokio::spawn(csi::operator::run_with_extras(
        client.clone(),
        def.clone(),
        csi::operator::Settings::default(),
        extras,
        Metrics::new(),
        Readiness::default(),
        async {
            let _ = stopped.await;
        },
    ));

    let prefix = &def.condition_prefix;
    let controller = csi::names::controller(&def);
    let node = csi::names::node(&def);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    match expect {
        Expect::Disabled(reason) => {
            let message = condition_is(
                &client,
                &csi_name,
                &format!("{prefix}DriverControllerServiceControllerDisabled"),
                "True",
            )
            .await;
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
                Api::<DaemonSet>::namespaced(client.clone(), &ns)
                    .get_opt(&node)
                    .await
                    .unwrap()
            })
            .await;
            wait_for("the CSIDriver", async || {
                Api::<CSIDriver>::all(client.clone())
                    .get_opt(&csi_name)
                    .await
                    .unwrap()
            })
            .await;
            for class in &def.storage_classes {
                wait_for(&format!("StorageClass {}", class.name), async || {
                    Api::<StorageClass>::all(client.clone())
                        .get_opt(&class.name)
                        .await
                        .unwrap()
                })
                .await;
            }
            let available = format!("{prefix}DriverControllerServiceControllerAvailable");
            let no_nodes = Api::<Node>::all(client.clone())
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty();
            if no_nodes {
                simulate_workloads(&client, &ns, &controller, &node).await;
                condition_is(&client, &csi_name, &available, "True").await;
            } else {
                // Real nodes off this platform cannot run the driver; it must still report.
                wait_for(&format!("{available} reported"), async || {
                    condition(&client, &csi_name, &available).await
                })
                .await;
            }
            if short == drivers::ibm_vpc_block::SHORT_NAME {
                let message = condition_is(&client, &csi_name, "SecretSyncDegraded", "True").await;
                assert!(message.contains("ibm-cloud-credentials"), "{message}");
            }
            if def.removable {
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
                        && Api::<CSIDriver>::all(client.clone())
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

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();

    // Clean up everything this test created.
    let _ = drivers_api
        .delete(&csi_name, &DeleteParams::default())
        .await;
    remove_operands(&client, short, &csi_name, &ns, created_namespace).await;
    if created_namespace {
        let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    }
    if declared {
        let _ = Api::<Infrastructure>::all(client.clone())
            .delete("cluster", &DeleteParams::default())
            .await;
    }
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
