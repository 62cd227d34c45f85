#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is a failure
//! The CSIDriverDeployment controller on the in-process API server: converge, idle, drift
//! restored, validation failures, two claimants, and deletion (with and without volumes).

use std::path::Path;
use std::time::Duration;

use api::csidriver_v1alpha1::CSIDriverDeployment;
use csi_driver_deployment::FINALIZER;
use csi_driver_deployment::controller::{Settings, run};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster, SimConfig};

const AGENT: &str = "csidriverdeployment-controller";
const NS: &str = "csi";

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    testkit::eventually(what, Duration::from_secs(60), check).await
}

async fn setup() -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        if crd.spec.names.kind == "CSIDriverDeployment" {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    for ns in [NS, "other"] {
        Api::<Namespace>::all(admin.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await
            .unwrap();
    }
    cluster.add_node("worker-1", true);
    cluster.simulate_workloads(SimConfig::default());
    (cluster, admin)
}

fn start(cluster: &Cluster) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let settling = metrics.settling(csi_driver_deployment::CONTROLLER_NAME);
    Background::spawn(|shutdown| async move {
        run(client, Settings::default(), metrics, None, shutdown)
            .await
            .unwrap();
    })
    .settles_when(settling)
}

fn example(file: &str, namespace: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/csidriverdeployment")
        .join(file);
    let mut object: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    object["metadata"]["namespace"] = json!(namespace);
    object
}

async fn create(client: &Client, object: Value) -> CSIDriverDeployment {
    let ns = object["metadata"]["namespace"].as_str().unwrap().to_owned();
    Api::<CSIDriverDeployment>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(object).unwrap(),
        )
        .await
        .unwrap()
}

async fn get(client: &Client, ns: &str, name: &str) -> Option<CSIDriverDeployment> {
    Api::<CSIDriverDeployment>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
}

fn condition(cd: &CSIDriverDeployment, type_: &str) -> Option<(String, String, String)> {
    cd.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.to_string(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

async fn wait_condition(
    client: &Client,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
) -> (String, String, String) {
    eventually(&format!("{type_}={status} on {ns}/{name}"), async || {
        let cd = get(client, ns, name).await?;
        condition(&cd, type_).filter(|c| c.0 == status)
    })
    .await
}

/// Waits until the controller has converged: its latest pass wrote nothing, failed nothing and
/// had no change waiting.
async fn quiet(cluster: &Cluster, running: &Background) {
    running.converged(cluster, AGENT).await;
}

#[tokio::test]
async fn converges_then_writes_nothing_and_restores_drift() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("cinder-3.11.yaml", NS)).await;

    let deployment = eventually("the controller Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt("cinder-controller")
            .await
            .unwrap()
    })
    .await;
    let owner = &deployment.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "CSIDriverDeployment");
    eventually("the node DaemonSet", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt("cinder-node")
            .await
            .unwrap()
    })
    .await;
    eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("csi-cinderplugin")
            .await
            .unwrap()
    })
    .await;
    let class = eventually("the StorageClass", async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt("cinder")
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        class.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    wait_condition(&admin, NS, "cinder", "Available", "True").await;
    wait_condition(&admin, NS, "cinder", "Degraded", "False").await;
    let cd = eventually("children with generations", async || {
        let cd = get(&admin, NS, "cinder").await?;
        let status = cd.status.as_ref()?;
        status
            .children
            .iter()
            .any(|c| c.resource == "daemonsets" && c.last_generation > 0)
            .then_some(cd)
    })
    .await;
    let status = cd.status.clone().unwrap();
    assert_eq!(status.observed_generation, cd.metadata.generation);
    assert_eq!(
        status.state,
        Some(api::operator_v1::ManagementState::Managed)
    );
    assert!(
        cd.metadata
            .finalizers
            .unwrap()
            .contains(&FINALIZER.to_owned())
    );

    // Idle: nothing written.
    quiet(&cluster, &running).await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);

    // Drift: someone edits a ClusterRole we own; it is put back.
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .patch(
            "csi-cinderplugin-csi-provisioner-role",
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": []})),
        )
        .await
        .unwrap();
    eventually("the ClusterRole restored", async || {
        let role = roles
            .get("csi-cinderplugin-csi-provisioner-role")
            .await
            .unwrap();
        role.rules.filter(|r| !r.is_empty())
    })
    .await;
    eventually("an Event naming the restored operand", async || {
        let events = Api::<Event>::namespaced(admin.clone(), NS)
            .list(&Default::default())
            .await
            .unwrap();
        events.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("OperandDriftRestored")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("csi-cinderplugin-csi-provisioner-role"))
        })
    })
    .await;

    // Deleted by someone: recreated, and said so.
    let daemon_sets: Api<DaemonSet> = Api::namespaced(admin.clone(), NS);
    let uid = daemon_sets.get("cinder-node").await.unwrap().metadata.uid;
    daemon_sets
        .delete("cinder-node", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the DaemonSet recreated", async || {
        daemon_sets
            .get_opt("cinder-node")
            .await
            .unwrap()
            .filter(|ds| ds.metadata.uid != uid)
    })
    .await;
    eventually("an Event saying it was recreated", async || {
        let events = Api::<Event>::namespaced(admin.clone(), NS)
            .list(&Default::default())
            .await
            .unwrap();
        events.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("OperandRecreated")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("DaemonSet/csi/cinder-node"))
        })
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn an_invalid_object_gets_a_condition_and_nothing_is_applied() {
    let (cluster, admin) = setup().await;
    // The example's VolumeSnapshotClass needs the snapshot API to converge.
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &snapshot_class_crd())
        .await
        .unwrap();
    let running = start(&cluster);
    let mut object = example("hostpath.yaml", NS);
    object["spec"]["driverPerNodeTemplate"]["spec"]["volumes"][0]["name"] = json!("socket-dir");
    object["spec"]["driverPerNodeTemplate"]["spec"]["containers"][0]["volumeMounts"][0]["name"] =
        json!("socket-dir");
    create(&admin, object).await;
    let (_, reason, message) = wait_condition(&admin, NS, "hostpath", "Degraded", "True").await;
    assert_eq!(reason, "TemplateConflict");
    assert!(
        message.contains("spec.driverPerNodeTemplate.spec.volumes[0].name"),
        "{message}"
    );
    quiet(&cluster, &running).await;
    assert!(
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("hostpath.csi.k8s.io")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt("hostpath-node")
            .await
            .unwrap()
            .is_none()
    );
    let roles = Api::<ClusterRole>::all(admin.clone())
        .list(&Default::default())
        .await
        .unwrap();
    assert!(roles.items.iter().all(|r| {
        !r.metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .starts_with("hostpath.csi.k8s.io")
    }));

    // Fixed: it converges.
    Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS)
        .patch(
            "hostpath",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"driverPerNodeTemplate": example("hostpath.yaml", NS)["spec"]["driverPerNodeTemplate"]}})),
        )
        .await
        .unwrap();
    wait_condition(&admin, NS, "hostpath", "Degraded", "False").await;
    eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("hostpath.csi.k8s.io")
            .await
            .unwrap()
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_second_claimant_of_a_driver_name_is_refused() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    eventually("the first claimant's CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
    })
    .await;
    let mut second = example("fuse-ondelete.yaml", "other");
    second["metadata"]["name"] = json!("second");
    create(&admin, second).await;
    let (_, reason, message) = wait_condition(&admin, "other", "second", "Degraded", "True").await;
    assert_eq!(reason, "DriverNameClaimed");
    assert!(message.contains("csi/csi-s3"), "{message}");
    assert!(
        Api::<DaemonSet>::namespaced(admin.clone(), "other")
            .get_opt("second-node")
            .await
            .unwrap()
            .is_none()
    );
    wait_condition(&admin, NS, "csi-s3", "Degraded", "False").await;

    // A CSIDriver nobody declared blocks its name too.
    Api::<CSIDriver>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "foreign.csi.example.com"}, "spec": {}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let mut third = example("fuse-ondelete.yaml", "other");
    third["metadata"]["name"] = json!("third");
    third["spec"]["driverName"] = json!("foreign.csi.example.com");
    create(&admin, third).await;
    let (_, reason, _) = wait_condition(&admin, "other", "third", "Degraded", "True").await;
    assert_eq!(reason, "CSIDriverExists");
    running.stop().await;
}

/// The names of the ClusterRoles of the fuse example's driver.
async fn driver_cluster_roles(admin: &Client) -> Vec<String> {
    Api::<ClusterRole>::all(admin.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .filter(|name| name.starts_with("ru.yandex.s3.csi"))
        .collect()
}

#[tokio::test]
async fn deletion_cleans_cluster_scoped_objects_once_volumes_are_gone() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    eventually("the StorageClass", async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt("csi-s3")
            .await
            .unwrap()
    })
    .await;
    wait_condition(&admin, NS, "csi-s3", "Available", "True").await;
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    volumes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "pv-1"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "csi": {"driver": "ru.yandex.s3.csi", "volumeHandle": "bucket-1"},
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();

    let api = Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS);
    api.delete("csi-s3", &DeleteParams::default())
        .await
        .unwrap();
    let (_, reason, message) = wait_condition(&admin, NS, "csi-s3", "Degraded", "True").await;
    assert_eq!(reason, "VolumesInUse");
    assert!(message.contains("1 PersistentVolumes"), "{message}");
    assert!(
        message.contains("the driver stays installed until they are deleted"),
        "{message}"
    );
    quiet(&cluster, &running).await;
    assert!(
        !driver_cluster_roles(&admin).await.is_empty(),
        "the provisioner's RBAC stays while its volumes exist: it deletes them"
    );
    assert!(
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        Api::<StorageClass>::all(admin.clone())
            .get_opt("csi-s3")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        volumes.get_opt("pv-1").await.unwrap().is_some(),
        "volumes are never touched"
    );

    volumes
        .delete("pv-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the CSIDriverDeployment gone", async || {
        get(&admin, NS, "csi-s3").await.is_none().then_some(())
    })
    .await;
    assert!(
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<StorageClass>::all(admin.clone())
            .get_opt("csi-s3")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(driver_cluster_roles(&admin).await, Vec::<String>::new());
    eventually("the DaemonSet collected", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt("csi-s3-node")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn removed_deletes_and_unmanaged_leaves_alone() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
    })
    .await;
    let api = Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS);
    let state = |s: &str| Patch::Merge(json!({"spec": {"managementState": s}}));

    api.patch("csi-s3", &PatchParams::default(), &state("Unmanaged"))
        .await
        .unwrap();
    eventually("state Unmanaged", async || {
        let cd = get(&admin, NS, "csi-s3").await?;
        (cd.status?.state == Some(api::operator_v1::ManagementState::Unmanaged)).then_some(())
    })
    .await;
    let ds: Api<DaemonSet> = Api::namespaced(admin.clone(), NS);
    ds.patch(
        "csi-s3-node",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"edited": "yes"}}})),
    )
    .await
    .unwrap();
    quiet(&cluster, &running).await;
    assert!(
        ds.get("csi-s3-node")
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap()
            .contains_key("edited")
    );

    api.patch("csi-s3", &PatchParams::default(), &state("Removed"))
        .await
        .unwrap();
    eventually("everything removed", async || {
        let gone = Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
            .is_none()
            && ds.get_opt("csi-s3-node").await.unwrap().is_none()
            && Api::<StorageClass>::all(admin.clone())
                .get_opt("csi-s3")
                .await
                .unwrap()
                .is_none();
        gone.then_some(())
    })
    .await;
    wait_condition(&admin, NS, "csi-s3", "Available", "False").await;
    running.stop().await;
}

#[tokio::test]
async fn removed_keeps_the_whole_driver_while_its_volumes_exist() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    wait_condition(&admin, NS, "csi-s3", "Available", "True").await;
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    volumes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "pv-1"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "csi": {"driver": "ru.yandex.s3.csi", "volumeHandle": "bucket-1"},
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let api = Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS);
    api.patch(
        "csi-s3",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"managementState": "Removed"}})),
    )
    .await
    .unwrap();
    let (_, reason, message) = wait_condition(&admin, NS, "csi-s3", "Degraded", "True").await;
    assert_eq!(reason, "VolumesInUse");
    assert!(
        message.contains(
            "1 PersistentVolumes of driver ru.yandex.s3.csi exist: the driver stays installed"
        ),
        "{message}"
    );
    quiet(&cluster, &running).await;
    let ds: Api<DaemonSet> = Api::namespaced(admin.clone(), NS);
    assert!(
        ds.get_opt("csi-s3-node").await.unwrap().is_some(),
        "the node pods unmount the volumes"
    );
    assert!(!driver_cluster_roles(&admin).await.is_empty());
    assert!(
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
            .is_some()
    );

    volumes
        .delete("pv-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("everything removed once the volume is gone", async || {
        let gone = ds.get_opt("csi-s3-node").await.unwrap().is_none()
            && driver_cluster_roles(&admin).await.is_empty()
            && Api::<CSIDriver>::all(admin.clone())
                .get_opt("ru.yandex.s3.csi")
                .await
                .unwrap()
                .is_none();
        gone.then_some(())
    })
    .await;
    wait_condition(&admin, NS, "csi-s3", "Degraded", "False").await;
    running.stop().await;
}

#[tokio::test]
async fn a_storage_class_with_new_parameters_is_recreated() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    let object = example("fuse-ondelete.yaml", NS);
    create(&admin, object.clone()).await;
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let first = eventually("the StorageClass", async || {
        classes.get_opt("csi-s3").await.unwrap()
    })
    .await;
    let mut templates = object["spec"]["storageClassTemplates"].clone();
    templates[0]["parameters"]["mounter"] = json!("rclone");
    Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS)
        .patch(
            "csi-s3",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClassTemplates": templates}})),
        )
        .await
        .unwrap();
    let second = eventually("the StorageClass with the new parameters", async || {
        classes.get_opt("csi-s3").await.unwrap().filter(|c| {
            c.parameters
                .as_ref()
                .is_some_and(|p| p["mounter"] == "rclone")
        })
    })
    .await;
    assert_ne!(first.metadata.uid, second.metadata.uid, "a new object");
    wait_condition(&admin, NS, "csi-s3", "Degraded", "False").await;
    running.stop().await;
}

#[tokio::test]
async fn a_failed_write_is_degraded_naming_the_object_and_retried() {
    let (cluster, admin) = setup().await;
    cluster.inject(testkit::FaultRule::status(
        Some("patch"),
        Some("daemonsets"),
        500,
    ));
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    let (_, reason, message) = wait_condition(&admin, NS, "csi-s3", "Degraded", "True").await;
    assert_eq!(reason, "SyncFailed");
    assert!(message.contains("DaemonSet csi/csi-s3-node"), "{message}");
    // Said as a Warning Event on the object, naming the step and the operand.
    eventually("a Warning Event naming the failed apply", async || {
        let events = Api::<Event>::namespaced(admin.clone(), NS)
            .list(&Default::default())
            .await
            .unwrap();
        events.items.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("ApplyFailed")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("csi-s3")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("applying DaemonSet csi/csi-s3-node"))
        })
    })
    .await;
    // The rest is applied.
    eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
    })
    .await;
    cluster.clear_faults();
    wait_condition(&admin, NS, "csi-s3", "Degraded", "False").await;
    eventually("the DaemonSet", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt("csi-s3-node")
            .await
            .unwrap()
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn an_admins_storage_class_of_the_same_name_is_kept() {
    let (cluster, admin) = setup().await;
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let admins = classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "csi-s3"},
                "provisioner": "other.example.com",
                "reclaimPolicy": "Retain",
                "parameters": {"tier": "gold"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    let (_, reason, message) = wait_condition(&admin, NS, "csi-s3", "Degraded", "True").await;
    assert_eq!(reason, "StorageClassExists");
    assert!(
        message.starts_with("spec.storageClassTemplates[0].metadata.name: StorageClass csi-s3 already exists and was not made by this CSIDriverDeployment (provisioner other.example.com)"),
        "{message}"
    );
    // The rest of the driver is installed.
    eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
    })
    .await;
    quiet(&cluster, &running).await;
    let now = classes.get("csi-s3").await.unwrap();
    assert_eq!(now.metadata.uid, admins.metadata.uid, "never deleted");
    assert_eq!(now.provisioner, "other.example.com");
    assert_eq!(
        now.metadata.resource_version, admins.metadata.resource_version,
        "never written"
    );

    // Once the admin removes it, ours is created.
    classes
        .delete("csi-s3", &DeleteParams::default())
        .await
        .unwrap();
    Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS)
        .patch(
            "csi-s3",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touch": "1"}}})),
        )
        .await
        .unwrap();
    eventually("our StorageClass", async || {
        classes
            .get_opt("csi-s3")
            .await
            .unwrap()
            .filter(|c| c.provisioner == "ru.yandex.s3.csi")
    })
    .await;
    wait_condition(&admin, NS, "csi-s3", "Degraded", "False").await;
    running.stop().await;
}

#[tokio::test]
async fn a_refused_write_never_deletes_the_live_class() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    let object = example("fuse-ondelete.yaml", NS);
    create(&admin, object.clone()).await;
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let first = eventually("the StorageClass", async || {
        classes.get_opt("csi-s3").await.unwrap()
    })
    .await;
    wait_condition(&admin, NS, "csi-s3", "Degraded", "False").await;
    // The API server refuses every write of StorageClasses, as it would an invalid one.
    cluster.inject(testkit::FaultRule::status(
        Some("patch"),
        Some("storageclasses"),
        422,
    ));
    let mut templates = object["spec"]["storageClassTemplates"].clone();
    templates[0]["allowVolumeExpansion"] = json!(true);
    Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS)
        .patch(
            "csi-s3",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClassTemplates": templates}})),
        )
        .await
        .unwrap();
    let (_, reason, message) = wait_condition(&admin, NS, "csi-s3", "Degraded", "True").await;
    assert_eq!(reason, "SyncFailed");
    assert!(message.contains("StorageClass"), "{message}");
    let now = classes.get("csi-s3").await.unwrap();
    assert_eq!(now.metadata.uid, first.metadata.uid, "the live class stays");
    cluster.clear_faults();
    eventually("the change applied", async || {
        classes
            .get_opt("csi-s3")
            .await
            .unwrap()
            .filter(|c| c.allow_volume_expansion == Some(true))
    })
    .await;
    let now = classes.get("csi-s3").await.unwrap();
    assert_eq!(
        now.metadata.uid, first.metadata.uid,
        "patched, not recreated"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_failed_status_write_is_retried() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    wait_condition(&admin, NS, "csi-s3", "Available", "True").await;

    // The node goes NotReady: the node pods are no longer available, which only the status
    // says. Its first write fails; nothing else changes, so only a retry can write it.
    cluster.inject(
        testkit::FaultRule::status(Some("patch"), Some("csidriverdeployments"), 500)
            .with_max_hits(1),
    );
    cluster.set_node_ready("worker-1", false).unwrap();
    wait_condition(&admin, NS, "csi-s3", "Available", "False").await;
    let refused = cluster
        .requests()
        .into_iter()
        .filter(|r| r.from_client(AGENT) && r.resource == "csidriverdeployments" && r.status == 500)
        .count();
    assert_eq!(refused, 1, "the status write failed once");
    running.stop().await;
}

#[tokio::test]
async fn a_hanging_write_for_one_object_holds_up_no_other() {
    let (cluster, admin) = setup().await;
    // The first DaemonSet write hangs far longer than this test waits for anything.
    cluster.inject(
        testkit::FaultRule::hang(Some("patch"), Some("daemonsets"), Duration::from_secs(600))
            .with_max_hits(1),
    );
    let _running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    eventually("the first object's DaemonSet write hanging", async || {
        (cluster.fault_hits() == 1).then_some(())
    })
    .await;

    create(&admin, example("cinder-3.11.yaml", "other")).await;
    wait_condition(&admin, "other", "cinder", "Degraded", "False").await;
    eventually("the other object's DaemonSet", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), "other")
            .get_opt("cinder-node")
            .await
            .unwrap()
    })
    .await;
    let hung = Api::<DaemonSet>::namespaced(admin.clone(), NS)
        .get_opt("csi-s3-node")
        .await
        .unwrap();
    assert!(hung.is_none(), "the first object's write is still hanging");
    // Not stopped: a graceful stop would wait for the hanging write.
}

/// The VolumeSnapshotClass CRD as external-snapshotter installs it (schema left open).
fn snapshot_class_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {
            "name": "volumesnapshotclasses.snapshot.storage.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter/pull/814"},
        },
        "spec": {
            "group": "snapshot.storage.k8s.io",
            "scope": "Cluster",
            "names": {
                "kind": "VolumeSnapshotClass",
                "plural": "volumesnapshotclasses",
                "singular": "volumesnapshotclass",
                "listKind": "VolumeSnapshotClassList",
            },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        }
    }))
    .unwrap()
}

fn snapshot_classes(client: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
        "volumesnapshotclasses",
    );
    Api::all_with(client.clone(), &resource)
}

/// The hostpath example's VolumeSnapshotClass: while the cluster does not serve the kind,
/// Degraded names the field and the fix and the rest is installed; once the CRD is installed the
/// class appears (driver, owner labels), goes when its template is removed, and goes with the
/// driver on uninstall.
#[tokio::test]
async fn snapshot_classes_wait_for_their_crd_and_go_with_their_templates_and_the_driver() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("hostpath.yaml", NS)).await;

    let (_, reason, message) = wait_condition(&admin, NS, "hostpath", "Degraded", "True").await;
    assert_eq!(reason, "SnapshotAPIMissing");
    assert!(
        message.starts_with("spec.volumeSnapshotClassTemplates: ")
            && message.contains("install the VolumeSnapshot CRDs and the snapshot controller"),
        "{message}"
    );
    for (what, present) in [
        (
            "the StorageClass",
            Api::<StorageClass>::all(admin.clone())
                .get_opt("csi-hostpath")
                .await
                .unwrap()
                .is_some(),
        ),
        (
            "the node DaemonSet",
            Api::<DaemonSet>::namespaced(admin.clone(), NS)
                .get_opt("hostpath-node")
                .await
                .unwrap()
                .is_some(),
        ),
    ] {
        assert!(present, "{what} is installed without the snapshot API");
    }

    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &snapshot_class_crd())
        .await
        .unwrap();
    let classes = snapshot_classes(&admin);
    let class = eventually("the VolumeSnapshotClass", async || {
        classes.get_opt("csi-hostpath-snapclass").await.unwrap()
    })
    .await;
    assert_eq!(class.data["driver"], "hostpath.csi.k8s.io");
    assert_eq!(class.data["deletionPolicy"], "Delete");
    let labels = class.metadata.labels.clone().unwrap();
    assert_eq!(
        labels["csidriver.storage.openshift.io/owner-name"],
        "hostpath"
    );
    assert_eq!(labels["csidriver.storage.openshift.io/owner-namespace"], NS);
    assert_eq!(labels["app.kubernetes.io/part-of"], "csi-driver-host-path");
    wait_condition(&admin, NS, "hostpath", "Degraded", "False").await;
    let cd = get(&admin, NS, "hostpath").await.unwrap();
    assert!(
        cd.status
            .unwrap()
            .children
            .iter()
            .any(|c| c.resource == "volumesnapshotclasses" && c.name == "csi-hostpath-snapclass")
    );

    // Drift: deleted by someone, recreated.
    classes
        .delete("csi-hostpath-snapclass", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the VolumeSnapshotClass recreated", async || {
        classes
            .get_opt("csi-hostpath-snapclass")
            .await
            .unwrap()
            .filter(|c| c.metadata.uid != class.metadata.uid)
    })
    .await;

    // The template removed: the class goes.
    let declared: Api<CSIDriverDeployment> = Api::namespaced(admin.clone(), NS);
    declared
        .patch(
            "hostpath",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"volumeSnapshotClassTemplates": null}})),
        )
        .await
        .unwrap();
    eventually("the stale VolumeSnapshotClass deleted", async || {
        classes
            .get_opt("csi-hostpath-snapclass")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;

    // Back, then uninstalled with the driver.
    declared
        .patch(
            "hostpath",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"volumeSnapshotClassTemplates": [
                {"metadata": {"name": "csi-hostpath-snapclass"}, "default": true},
            ]}})),
        )
        .await
        .unwrap();
    let class = eventually("the VolumeSnapshotClass again", async || {
        classes.get_opt("csi-hostpath-snapclass").await.unwrap()
    })
    .await;
    assert_eq!(
        class.metadata.annotations.unwrap()["snapshot.storage.kubernetes.io/is-default-class"],
        "true"
    );
    declared
        .delete("hostpath", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the CSIDriverDeployment gone", async || {
        get(&admin, NS, "hostpath").await.is_none().then_some(())
    })
    .await;
    assert!(
        classes
            .get_opt("csi-hostpath-snapclass")
            .await
            .unwrap()
            .is_none(),
        "the VolumeSnapshotClass goes with the driver"
    );
    running.stop().await;
}

/// A restarted controller finds the VolumeSnapshotClass it made and leaves it alone (its cache
/// starts empty; the unit test of `stale` covers the pass that builds before it fills).
#[tokio::test]
async fn a_restarted_controller_keeps_its_snapshot_class() {
    let (cluster, admin) = setup().await;
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &snapshot_class_crd())
        .await
        .unwrap();
    let running = start(&cluster);
    create(&admin, example("hostpath.yaml", NS)).await;
    let classes = snapshot_classes(&admin);
    let class = eventually("the VolumeSnapshotClass", async || {
        classes.get_opt("csi-hostpath-snapclass").await.unwrap()
    })
    .await;
    wait_condition(&admin, NS, "hostpath", "Degraded", "False").await;
    running.stop().await;

    for _ in 0..3 {
        cluster.clear_requests();
        let running = start(&cluster);
        quiet(&cluster, &running).await;
        running.stop().await;
        let now = classes.get("csi-hostpath-snapclass").await.unwrap();
        assert_eq!(now.metadata.uid, class.metadata.uid, "never deleted");
    }
}

/// Copies of the controller's own objects under other names, with everything ours carry
/// (owner labels, annotations, managedFields as sent), as `kubectl get -o yaml` edited and
/// created again makes them, or as Kubernetes' storage e2e suite copies the driver's class
/// (the copy it made of `csi-hostpath` was deleted 20 ms later before ownership was checked):
/// none is ever deleted, neither when a template goes away nor on `Removed`, while ours are.
#[tokio::test]
async fn copies_of_our_objects_under_other_names_are_never_deleted() {
    use csi_driver_deployment::kinds::OwnedKind;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let (cluster, admin) = setup().await;
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &snapshot_class_crd())
        .await
        .unwrap();
    let running = start(&cluster);
    let mut object = example("fuse-ondelete.yaml", NS);
    // A snapshot class too, so that there is one to copy.
    object["spec"]["sidecars"]["snapshotter"] = json!(true);
    object["spec"]["volumeSnapshotClassTemplates"] =
        json!([{"metadata": {"name": "csi-s3-snapclass"}, "deletionPolicy": "Delete"}]);
    // A second class, whose template is removed below.
    let first = object["spec"]["storageClassTemplates"][0].clone();
    let mut second = first.clone();
    second["metadata"]["name"] = json!("csi-s3-second");
    object["spec"]["storageClassTemplates"]
        .as_array_mut()
        .unwrap()
        .push(second);
    create(&admin, object).await;
    wait_condition(&admin, NS, "csi-s3", "Available", "True").await;
    quiet(&cluster, &running).await;

    let owner = format!("{}=csi-s3", csi_driver_deployment::OWNER_NAME_LABEL);
    let mut copies = Vec::new();
    for kind in OwnedKind::ALL {
        let (group, plural) = kind.group_resource();
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, "v1", kind.name()),
            plural,
        );
        let namespaced = !matches!(
            kind,
            OwnedKind::ClusterRole
                | OwnedKind::ClusterRoleBinding
                | OwnedKind::CSIDriver
                | OwnedKind::StorageClass
                | OwnedKind::VolumeSnapshotClass
        );
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(admin.clone(), NS, &resource)
        } else {
            Api::all_with(admin.clone(), &resource)
        };
        let ours = api
            .list(&ListParams::default().labels(&owner))
            .await
            .unwrap();
        // The example has no controller Deployment's PodDisruptionBudget when it runs one
        // replica; every other kind has at least one object to copy.
        let Some(original) = ours.items.into_iter().next() else {
            assert_eq!(kind, OwnedKind::PodDisruptionBudget, "no {kind:?} to copy");
            continue;
        };
        let name = format!("{}-copy", original.metadata.name.clone().unwrap());
        let mut copy = testkit::copy_of(&serde_json::to_value(&original).unwrap(), &name);
        copy["apiVersion"] = json!(resource.api_version);
        copy["kind"] = json!(kind.name());
        api.create(
            &PostParams::default(),
            &serde_json::from_value(copy).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("copying {kind:?} {name}: {e}"));
        copies.push((api, kind, name));
    }
    let copies_left = async || {
        for (api, kind, name) in &copies {
            assert!(
                api.get_opt(name).await.unwrap().is_some(),
                "the copy {kind:?} {name} was deleted"
            );
        }
    };

    // A pass that deletes a class whose template is gone: ours goes, no copy does.
    let api = Api::<CSIDriverDeployment>::namespaced(admin.clone(), NS);
    api.patch(
        "csi-s3",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"storageClassTemplates": [first]}})),
    )
    .await
    .unwrap();
    let classes: Api<StorageClass> = Api::all(admin.clone());
    eventually("the second class deleted", async || {
        classes
            .get_opt("csi-s3-second")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    quiet(&cluster, &running).await;
    copies_left().await;

    // Removed deletes every object of ours, and still no copy.
    api.patch(
        "csi-s3",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"managementState": "Removed"}})),
    )
    .await
    .unwrap();
    eventually("ours removed", async || {
        let gone = Api::<CSIDriver>::all(admin.clone())
            .get_opt("ru.yandex.s3.csi")
            .await
            .unwrap()
            .is_none()
            && classes.get_opt("csi-s3").await.unwrap().is_none()
            && Api::<DaemonSet>::namespaced(admin.clone(), NS)
                .get_opt("csi-s3-node")
                .await
                .unwrap()
                .is_none();
        gone.then_some(())
    })
    .await;
    quiet(&cluster, &running).await;
    copies_left().await;
    running.stop().await;
}

/// A claim of the driver's StorageClass left Pending (no provisioner runs here) is reported on
/// the CSIDriverDeployment once it has waited longer than the threshold (3 seconds here: the
/// API server stamps a claim's creation time, so a test cannot make an old one), a claim of
/// another class is not, the report goes once the claim binds, and Degraded never says it.
#[tokio::test]
async fn claims_pending_on_the_driver_too_long_are_reported() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let (cluster, admin) = setup().await;
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let settling = metrics.settling(csi_driver_deployment::CONTROLLER_NAME);
    let settings = Settings {
        stuck_claims_after: Some(Duration::from_secs(3)),
        ..Settings::default()
    };
    let running = Background::spawn(|shutdown| async move {
        run(client, settings, metrics, None, shutdown)
            .await
            .unwrap();
    })
    .settles_when(settling);
    create(&admin, example("cinder-3.11.yaml", NS)).await;
    let (_, reason, _) = wait_condition(&admin, NS, "cinder", "StuckClaims", "False").await;
    assert_eq!(reason, "NoStuckClaims");

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), "other");
    for (name, class) in [("data", "cinder"), ("elsewhere", "no-such-class")] {
        claims
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}},
                    "status": {"phase": "Pending"}
                }))
                .unwrap(),
            )
            .await
            .unwrap();
    }
    let (_, reason, message) = wait_condition(&admin, NS, "cinder", "StuckClaims", "True").await;
    assert_eq!(reason, "ClaimsStuckPending");
    assert_eq!(
        message,
        "1 PersistentVolumeClaim of csi-cinderplugin has been Pending for more than 3 seconds: \
         other/data; run `storage-operator diagnose pvc -n other data` to see why"
    );
    let cd = get(&admin, NS, "cinder").await.unwrap();
    assert_ne!(
        condition(&cd, "Degraded").map(|c| c.1),
        Some("ClaimsStuckPending".to_owned())
    );

    claims
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    wait_condition(&admin, NS, "cinder", "StuckClaims", "False").await;
    quiet(&cluster, &running).await;
    running.stop().await;
}

/// Every object of ours the controller applied: (kind, its ApiResource, the object as served).
async fn applied_operands(admin: &Client) -> Vec<(&'static str, ApiResource, Value)> {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
    let resources = [
        ("ServiceAccount", ApiResource::erase::<ServiceAccount>(&())),
        ("Role", ApiResource::erase::<Role>(&())),
        ("RoleBinding", ApiResource::erase::<RoleBinding>(&())),
        ("ClusterRole", ApiResource::erase::<ClusterRole>(&())),
        (
            "ClusterRoleBinding",
            ApiResource::erase::<ClusterRoleBinding>(&()),
        ),
        (
            "PodDisruptionBudget",
            ApiResource::erase::<PodDisruptionBudget>(&()),
        ),
        ("Deployment", ApiResource::erase::<Deployment>(&())),
        ("DaemonSet", ApiResource::erase::<DaemonSet>(&())),
        ("CSIDriver", ApiResource::erase::<CSIDriver>(&())),
        ("StorageClass", ApiResource::erase::<StorageClass>(&())),
    ];
    testkit::objects_of(admin, &resources, opkit::ownership::applied_by_us).await
}

/// The ownership rule (`opkit::ownership`) on every kind the controller applies: an object of
/// an operand's name made by someone else, as a labelled copy of ours or bare (another
/// installer's), is never written or deleted, and the CSIDriverDeployment's Degraded names it
/// (`ObjectNotOurs`; a StorageClass is checked before its apply: `StorageClassExists`).
#[tokio::test]
async fn someone_elses_object_of_every_operand_kind_is_left_as_it_is_and_reported() {
    let (cluster, admin) = setup().await;
    let running = start(&cluster);
    create(&admin, example("fuse-ondelete.yaml", NS)).await;
    wait_condition(&admin, NS, "csi-s3", "Available", "True").await;
    quiet(&cluster, &running).await;
    running.stop().await;
    let applied = applied_operands(&admin).await;
    let kinds: std::collections::BTreeSet<&str> = applied.iter().map(|(k, _, _)| *k).collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "DaemonSet",
        "CSIDriver",
        "StorageClass",
    ] {
        assert!(
            kinds.contains(kind),
            "the controller applies a {kind}: {kinds:?}"
        );
    }

    for (kind, resource, ours) in &applied {
        for (variant, theirs) in testkit::someone_elses_stand_ins(ours) {
            let name = ours["metadata"]["name"].as_str().unwrap().to_owned();
            let namespace = ours["metadata"]["namespace"].as_str().map(str::to_owned);
            let what = format!("{kind} {name} ({variant})");
            let (cluster, admin) = setup().await;
            let (api, created) =
                testkit::create_as(&cluster, "kubectl-create", resource, theirs).await;
            let running = start(&cluster);
            create(&admin, example("fuse-ondelete.yaml", NS)).await;
            let object = match &namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name.clone(),
            };
            // A StorageClass is checked before its apply, and so is the CSIDriver (validation
            // refuses a driver name someone else's CSIDriver has: nothing is applied).
            let (reason, reported) = match *kind {
                "StorageClass" => (
                    "StorageClassExists",
                    format!("StorageClass {name} already exists"),
                ),
                "CSIDriver" => (
                    "CSIDriverExists",
                    format!(
                        "a CSIDriver named {name:?} exists that no CSIDriverDeployment created (installed by "
                    ),
                ),
                _ => (
                    "ObjectNotOurs",
                    format!("{kind} {object} exists and was made by "),
                ),
            };
            eventually(&format!("{what} reported"), async || {
                let cd = get(&admin, NS, "csi-s3").await?;
                cd.status?.conditions.into_iter().find(|c| {
                    c.status == api::operator_v1::ConditionStatus::True
                        && c.reason.as_deref() == Some(reason)
                        && c.message.as_deref().is_some_and(|m| m.contains(&reported))
                })
            })
            .await;
            quiet(&cluster, &running).await;
            let now = api.get(&name).await.unwrap();
            assert_eq!(
                now.metadata.uid, created.metadata.uid,
                "{what}: never deleted"
            );
            assert!(
                !testkit::written_by(&now.metadata, "storage-operator"),
                "{what}: never written: {:?}",
                now.metadata.managed_fields
            );
            running.stop().await;
        }
    }
}
