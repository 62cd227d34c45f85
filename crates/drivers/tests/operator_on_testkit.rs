//! `storage-operator driver gcp-pd` (`driver_operator::run` with the gcp-pd table) against the in-process API server with
//! workload simulation: converge, idle, drift, management and StorageClass states, status
//! transitions, optional CRDs and API faults.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use driver_operator::Settings;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;
use serde_json::{Value, json};
use testkit::{Background, Cluster, FaultRule, SimConfig};

const NS: &str = "openshift-cluster-csi-drivers";
const DRIVER: &str = "pd.csi.storage.gke.io";
const AGENT: &str = "gcp-pd-operator";
const CONTROLLER: &str = "gcp-pd-csi-driver-controller";
const NODE: &str = "gcp-pd-csi-driver-node";

fn start_with(cluster: &Cluster, def: csi_kit::DriverDef) -> Background {
    start_with_hook(cluster, def, None)
}

fn start_with_hook(
    cluster: &Cluster,
    def: csi_kit::DriverDef,
    operator_log_level: Option<opkit::log_level::LogLevelHook>,
) -> Background {
    let client = cluster.client_with_agent(AGENT);
    let metrics = Metrics::new();
    let settling = metrics.settling(&driver_operator::operator_name(&def));
    Background::spawn(|shutdown| async move {
        driver_operator::run(
            client,
            def,
            Settings {
                env: [("DRIVER_IMAGE".to_owned(), "example.com/pd:1".to_owned())].into(),
                instance: Some("gcp-pd-operator-0".into()),
                operator_log_level,
                host_fips: false,
                hosted: None,
                stuck_claims_after: None,
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

fn start(cluster: &Cluster) -> Background {
    start_with(cluster, drivers::by_name("gcp-pd").unwrap())
}

/// Waits up to a minute for `check` (the machines are slow and shared).
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

/// A CRD accepting any object, for the optional kinds (ServiceMonitor, VolumeSnapshotClass).
async fn install_open_crd(
    client: &Client,
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        // The snapshot group is the Kubernetes project's: its CRDs carry their API review.
        "metadata": {"name": format!("{plural}.{group}"),
                     "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter/pull/419"}},
        "spec": {"group": group, "scope": if namespaced { "Namespaced" } else { "Cluster" },
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

async fn create_cluster_scoped<K>(client: &Client, value: Value)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

async fn create_namespace(client: &Client) {
    create_cluster_scoped::<Namespace>(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
}

async fn create_cluster_csi_driver(client: &Client, spec: Value) {
    create_cluster_scoped::<ClusterCSIDriver>(
        client,
        json!({"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
               "metadata": {"name": DRIVER}, "spec": spec}),
    )
    .await;
}

/// An OpenShift cluster on GCP with the given control plane topology, three nodes and the
/// workload simulation running.
async fn openshift(topology: &str) -> (Cluster, Client) {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver", "Infrastructure", "Proxy"]).await;
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {}, "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": topology,
                   "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}
    });
    create_cluster_scoped::<api::config_v1::Infrastructure>(&admin, infrastructure.clone()).await;
    Api::<api::config_v1::Infrastructure>::all(admin.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("installer"),
            &Patch::Apply(infrastructure),
        )
        .await
        .unwrap();
    create_namespace(&admin).await;
    for node in ["node-a", "node-b", "node-c"] {
        cluster.add_node(node, true);
    }
    cluster.simulate_workloads(SimConfig::default());
    (cluster, admin)
}

async fn condition(client: &Client, type_: &str) -> Option<(String, String, String)> {
    let driver = Api::<ClusterCSIDriver>::all(client.clone())
        .get_opt(DRIVER)
        .await
        .unwrap()?;
    let c = driver.status?.condition(type_)?.clone();
    Some((
        c.status.to_string(),
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

async fn condition_is(client: &Client, type_: &str, status: &str) -> Option<(String, String)> {
    condition(client, type_)
        .await
        .filter(|(s, _, _)| s == status)
        .map(|(_, r, m)| (r, m))
}

const HEALTHY: &[(&str, &str)] = &[
    ("GCPPDDriverControllerServiceControllerAvailable", "True"),
    ("GCPPDDriverControllerServiceControllerProgressing", "False"),
    ("GCPPDDriverControllerServiceControllerDegraded", "False"),
    ("GCPPDDriverNodeServiceControllerAvailable", "True"),
    ("GCPPDDriverNodeServiceControllerProgressing", "False"),
    ("GCPPDDriverNodeServiceControllerDegraded", "False"),
    ("GCPPDDriverStaticResourcesControllerDegraded", "False"),
    ("StorageClassControllerDegraded", "False"),
    ("ManagementStateDegraded", "False"),
];

async fn healthy(client: &Client) {
    for (type_, status) in HEALTHY {
        for attempt in 0.. {
            if condition_is(client, type_, status).await.is_some() {
                break;
            }
            if attempt == 1200 {
                let seen = condition(client, type_).await;
                panic!("timed out waiting for {type_}={status}; it is {seen:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Waits until the operator has converged: its latest pass wrote nothing, failed nothing and
/// had no change waiting.
async fn quiet(cluster: &Cluster, running: &Background) {
    running.converged(cluster, AGENT).await;
}

async fn events(client: &Client, reason: &str) -> Vec<Event> {
    let mut out = Vec::new();
    for ns in [NS, "default"] {
        out.extend(
            Api::<Event>::namespaced(client.clone(), ns)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some(reason)),
        );
    }
    out
}

#[tokio::test]
async fn converges_on_highly_available_openshift_and_then_writes_nothing() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let deployment = eventually("the controller Deployment", async || {
        deployments.get_opt(CONTROLLER).await.unwrap()
    })
    .await;
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(2));
    let containers = &deployment.spec.unwrap().template.spec.unwrap().containers;
    assert!(
        containers
            .iter()
            .any(|c| c.image.as_deref() == Some("example.com/pd:1"))
    );
    eventually("the node DaemonSet", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt(NODE)
            .await
            .unwrap()
    })
    .await;
    let csi = eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        csi.metadata
            .annotations
            .unwrap()
            .get("csi.openshift.io/managed")
            .map(String::as_str),
        Some("true")
    );
    let class = eventually("the default StorageClass", async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt("standard-csi")
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        class.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );

    healthy(&admin).await;
    let driver = Api::<ClusterCSIDriver>::all(admin.clone())
        .get(DRIVER)
        .await
        .unwrap();
    let status = driver.status.unwrap();
    assert_eq!(status.observed_generation, driver.metadata.generation);
    assert_eq!(status.ready_replicas, 2);
    for resource in ["deployments", "daemonsets"] {
        assert!(
            status
                .generations
                .iter()
                .any(|g| g.resource == resource && g.namespace == NS),
            "no generation for {resource}: {:?}",
            status.generations
        );
    }

    // Idle: once converged, nothing is written (and nothing polled).
    quiet(&cluster, &running).await;
    cluster.clear_requests();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);
    let polls = cluster
        .requests()
        .iter()
        .filter(|r| r.from_client(AGENT) && (r.verb == "get" || r.verb == "list"))
        .count();
    assert_eq!(polls, 0, "the operator polled the API while idle");
    running.stop().await;
}

#[tokio::test]
async fn converges_on_plain_kubernetes_without_config_apis() {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    install_crds(&admin, &["ClusterCSIDriver"]).await;
    create_namespace(&admin).await;
    cluster.add_node("worker-1", true);
    cluster.simulate_workloads(SimConfig::default());
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);

    let deployment = eventually("the controller Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(CONTROLLER)
            .await
            .unwrap()
    })
    .await;
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.template.spec.unwrap().node_selector, None);
    // Nobody ships the shared sidecar roles on plain Kubernetes: the driver brings them.
    let roles = Api::<ClusterRole>::all(admin.clone())
        .list(&ListParams::default().labels("csi.storage.openshift.io/driver=gcp-pd"))
        .await
        .unwrap();
    assert!(roles.items.len() > 2, "{} ClusterRoles", roles.items.len());
    healthy(&admin).await;
    quiet(&cluster, &running).await;
    running.stop().await;
}

#[tokio::test]
async fn drift_is_restored_with_an_event() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    healthy(&admin).await;
    quiet(&cluster, &running).await;

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    deployments
        .patch(
            CONTROLLER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    eventually("replicas restored to 2", async || {
        let d = deployments.get(CONTROLLER).await.unwrap();
        (d.spec.unwrap().replicas == Some(2)).then_some(())
    })
    .await;
    let restored = eventually("an OperandDriftRestored Event", async || {
        let found = events(&admin, "OperandDriftRestored").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    let regarding = restored[0].regarding.as_ref().unwrap();
    assert_eq!(regarding.kind.as_deref(), Some("Deployment"));
    assert_eq!(regarding.name.as_deref(), Some(CONTROLLER));
    assert!(restored[0].note.as_deref().unwrap().contains(CONTROLLER));

    // An edited argument of the driver container is put back.
    let mut d = deployments.get(CONTROLLER).await.unwrap();
    let original = d
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone();
    d.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .args = Some(vec!["--edited".into()]);
    d.metadata.managed_fields = None;
    deployments
        .replace(CONTROLLER, &PostParams::default(), &d)
        .await
        .unwrap();
    eventually("the driver's args restored", async || {
        let d = deployments.get(CONTROLLER).await.unwrap();
        (d.spec.unwrap().template.spec.unwrap().containers[0].args == original).then_some(())
    })
    .await;

    // A deleted DaemonSet is recreated, and said so.
    let daemon_sets: Api<DaemonSet> = Api::namespaced(admin.clone(), NS);
    let before = daemon_sets.get(NODE).await.unwrap().metadata.uid;
    daemon_sets
        .delete(NODE, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the DaemonSet recreated", async || {
        daemon_sets
            .get_opt(NODE)
            .await
            .unwrap()
            .filter(|ds| ds.metadata.uid != before)
    })
    .await;
    eventually("an OperandRecreated Event for the DaemonSet", async || {
        events(&admin, "OperandRecreated")
            .await
            .into_iter()
            .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NODE))
    })
    .await;
    healthy(&admin).await;
    quiet(&cluster, &running).await;
    running.stop().await;
}

#[tokio::test]
async fn a_hung_rollout_is_progressing_and_a_node_reboot_is_not() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    cluster.hang_rollout(NS, CONTROLLER);
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);

    let (reason, _) = eventually("controller Progressing=True", async || {
        condition_is(
            &admin,
            "GCPPDDriverControllerServiceControllerProgressing",
            "True",
        )
        .await
    })
    .await;
    assert_eq!(reason, "Deploying");
    eventually("controller Available=False", async || {
        condition_is(
            &admin,
            "GCPPDDriverControllerServiceControllerAvailable",
            "False",
        )
        .await
    })
    .await;
    // Not yet 15 minutes: not Degraded.
    assert_eq!(
        condition(&admin, "GCPPDDriverControllerServiceControllerDegraded")
            .await
            .unwrap()
            .0,
        "False"
    );

    cluster.release_rollout(NS, CONTROLLER);
    healthy(&admin).await;
    quiet(&cluster, &running).await;

    // A node goes NotReady: its node pod is unavailable, but nothing is rolling out.
    cluster.set_node_ready("node-b", false).unwrap();
    eventually("the DaemonSet sees the missing pod", async || {
        let ds = Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get(NODE)
            .await
            .unwrap();
        (ds.status.unwrap().number_unavailable.unwrap_or_default() > 0).then_some(())
    })
    .await;
    for _ in 0..20 {
        assert_eq!(
            condition(&admin, "GCPPDDriverNodeServiceControllerProgressing")
                .await
                .unwrap()
                .0,
            "False",
            "a NotReady node made the node service Progressing"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        condition(&admin, "GCPPDDriverNodeServiceControllerAvailable")
            .await
            .unwrap()
            .0,
        "True"
    );
    running.stop().await;
}

#[tokio::test]
async fn unmanaged_leaves_hand_edits_alone_and_says_so() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    healthy(&admin).await;

    Api::<ClusterCSIDriver>::all(admin.clone())
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"managementState": "Unmanaged"}})),
        )
        .await
        .unwrap();
    let (reason, _) = eventually("ManagementStateDegraded says Unmanaged", async || {
        condition_is(&admin, "ManagementStateDegraded", "False")
            .await
            .filter(|(r, _)| r == "Unmanaged")
    })
    .await;
    assert_eq!(reason, "Unmanaged");
    quiet(&cluster, &running).await;

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    cluster.clear_requests();
    let passes = running.passes();
    deployments
        .patch(
            CONTROLLER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    // The edit is watched: the operator runs a pass for it, and that pass writes nothing.
    running.converged_since(&cluster, AGENT, passes).await;
    assert_eq!(
        deployments
            .get(CONTROLLER)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(5)
    );
    // Conditions are frozen, not recomputed from the edited Deployment.
    assert_eq!(cluster.count_writes(AGENT), 0);
    running.stop().await;
}

#[tokio::test]
async fn removed_on_a_platform_driver_is_refused_and_removable_drivers_clean_up() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Removed"})).await;
    let running = start(&cluster);
    let (reason, message) = eventually("ManagementStateDegraded=True", async || {
        condition_is(&admin, "ManagementStateDegraded", "True").await
    })
    .await;
    assert_eq!(reason, "Removed");
    assert!(
        message.contains("Removed is not supported for GCPPD operator"),
        "{message}"
    );
    quiet(&cluster, &running).await;
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(CONTROLLER)
            .await
            .unwrap()
            .is_none()
    );
    running.stop().await;

    // The same driver, removable: Managed puts finalizers on, Removed deletes and releases them.
    Api::<ClusterCSIDriver>::all(admin.clone())
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"managementState": "Managed"}})),
        )
        .await
        .unwrap();
    let mut def = drivers::by_name("gcp-pd").unwrap();
    def.removable = true;
    let running = start_with(&cluster, def);
    healthy(&admin).await;
    let drivers_api = Api::<ClusterCSIDriver>::all(admin.clone());
    eventually("finalizers", async || {
        let d = drivers_api.get(DRIVER).await.unwrap();
        (d.metadata.finalizers.unwrap_or_default().len() == 2).then_some(())
    })
    .await;
    drivers_api
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"managementState": "Removed"}})),
        )
        .await
        .unwrap();
    eventually("workloads deleted and finalizers released", async || {
        let d = drivers_api.get(DRIVER).await.unwrap();
        let gone = Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(CONTROLLER)
            .await
            .unwrap()
            .is_none()
            && Api::<DaemonSet>::namespaced(admin.clone(), NS)
                .get_opt(NODE)
                .await
                .unwrap()
                .is_none();
        (gone && d.metadata.finalizers.unwrap_or_default().is_empty()).then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn storage_class_state_removed_and_unmanaged() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    healthy(&admin).await;
    let classes: Api<StorageClass> = Api::all(admin.clone());
    eventually("standard-csi", async || {
        classes.get_opt("standard-csi").await.unwrap()
    })
    .await;
    let drivers_api = Api::<ClusterCSIDriver>::all(admin.clone());

    drivers_api
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClassState": "Removed"}})),
        )
        .await
        .unwrap();
    eventually("standard-csi deleted", async || {
        classes
            .get_opt("standard-csi")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;

    drivers_api
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClassState": "Unmanaged"}})),
        )
        .await
        .unwrap();
    quiet(&cluster, &running).await;
    assert!(
        classes.get_opt("standard-csi").await.unwrap().is_none(),
        "Unmanaged created a class"
    );

    running.stop().await;
}

#[tokio::test]
async fn an_admins_default_class_is_kept() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_scoped::<StorageClass>(
        &admin,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "admin-default", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": "example.com/other"}),
    )
    .await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let ours = eventually("standard-csi", async || {
        classes.get_opt("standard-csi").await.unwrap()
    })
    .await;
    assert_eq!(
        ours.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "false"
    );
    healthy(&admin).await;
    quiet(&cluster, &running).await;
    let theirs = classes.get("admin-default").await.unwrap();
    assert_eq!(
        theirs.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    // The admin turns our class off as default: it stays off.
    classes
        .patch(
            "standard-csi",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "false"}}})),
        )
        .await
        .unwrap();
    classes
        .patch(
            "admin-default",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": null}}})),
        )
        .await
        .unwrap();
    quiet(&cluster, &running).await;
    let ours = classes.get("standard-csi").await.unwrap();
    assert_eq!(
        ours.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "false",
        "an admin's choice was overwritten"
    );
    running.stop().await;
}

#[tokio::test]
async fn optional_crds_absent_then_installed() {
    let (cluster, admin) = openshift("SingleReplica").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    healthy(&admin).await;
    quiet(&cluster, &running).await;

    create_cluster_scoped::<Namespace>(
        &admin,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "openshift-cloud-credential-operator"}}),
    )
    .await;
    install_open_crd(
        &admin,
        "monitoring.coreos.com",
        "ServiceMonitor",
        "servicemonitors",
        true,
    )
    .await;
    install_open_crd(
        &admin,
        "snapshot.storage.k8s.io",
        "VolumeSnapshotClass",
        "volumesnapshotclasses",
        false,
    )
    .await;
    install_open_crd(
        &admin,
        "cloudcredential.openshift.io",
        "CredentialsRequest",
        "credentialsrequests",
        true,
    )
    .await;
    let monitors = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        NS,
        &csi_kit::inputs::OptionalKind::ServiceMonitor.api_resource(),
    );
    eventually("a ServiceMonitor", async || {
        let list = monitors.list(&ListParams::default()).await.ok()?;
        (!list.items.is_empty()).then_some(())
    })
    .await;
    let snapshot_classes = Api::<DynamicObject>::all_with(
        admin.clone(),
        &csi_kit::inputs::OptionalKind::VolumeSnapshotClass.api_resource(),
    );
    let requests = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        "openshift-cloud-credential-operator",
        &csi_kit::inputs::OptionalKind::CredentialsRequest.api_resource(),
    );
    eventually("the CredentialsRequest", async || {
        requests
            .get_opt("openshift-gcp-pd-csi-driver-operator")
            .await
            .ok()
            .flatten()
    })
    .await;
    eventually("a VolumeSnapshotClass", async || {
        snapshot_classes
            .get_opt("csi-gce-pd-vsc")
            .await
            .ok()
            .flatten()
    })
    .await;
    healthy(&admin).await;
    quiet(&cluster, &running).await;
    running.stop().await;
}

#[tokio::test]
async fn api_faults_and_dropped_watches_recover() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    cluster.inject(
        FaultRule::status(Some("patch"), None, 503)
            .with_rate(0.5)
            .with_max_hits(8),
    );
    let running = start(&cluster);
    eventually("the controller Deployment despite 503s", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(CONTROLLER)
            .await
            .unwrap()
    })
    .await;
    healthy(&admin).await;
    assert!(cluster.fault_hits() > 0, "no fault was injected");
    cluster.clear_faults();

    cluster.drop_watches();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    deployments
        .patch(
            CONTROLLER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    eventually("drift restored after the watches dropped", async || {
        let d = deployments.get(CONTROLLER).await.unwrap();
        (d.spec.unwrap().replicas == Some(2)).then_some(())
    })
    .await;
    healthy(&admin).await;
    quiet(&cluster, &running).await;
    running.stop().await;
}

async fn generations(client: &Client) -> (i64, i64) {
    let d = Api::<Deployment>::namespaced(client.clone(), NS)
        .get(CONTROLLER)
        .await
        .unwrap();
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get(NODE)
        .await
        .unwrap();
    (
        d.metadata.generation.unwrap(),
        ds.metadata.generation.unwrap(),
    )
}

/// Waits for the operator to settle, then returns the workload generations.
async fn settled(cluster: &Cluster, client: &Client, running: &Background) -> (i64, i64) {
    healthy(client).await;
    quiet(cluster, running).await;
    generations(client).await
}

#[tokio::test]
async fn credential_rotation_and_log_level_roll_the_pods_once() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(admin.clone(), NS);
    // `data` rather than `stringData`: testkit stores stringData as sent (a real API server
    // merges it into data).
    let secret = |key: &str| {
        serde_json::from_value::<k8s_openapi::api::core::v1::Secret>(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "gcp-pd-cloud-credentials", "namespace": NS},
            "data": {"service_account.json": key}
        }))
        .unwrap()
    };
    let before = settled(&cluster, &admin, &running).await;

    // The cloud-credential-operator writes the Secret: the controller pods roll once.
    secrets
        .create(&PostParams::default(), &secret("a2V5LTE="))
        .await
        .unwrap();
    let after_create = eventually("the Deployment rolled for the new Secret", async || {
        let now = generations(&admin).await;
        (now.0 > before.0).then_some(now)
    })
    .await;
    let settled_create = settled(&cluster, &admin, &running).await;
    assert_eq!(
        settled_create.0, after_create.0,
        "the Deployment rolled more than once"
    );
    let template = Api::<Deployment>::namespaced(admin.clone(), NS)
        .get(CONTROLLER)
        .await
        .unwrap()
        .spec
        .unwrap()
        .template;
    let hash_key = csi_kit::hash::annotation_key(
        NS,
        "gcp-pd-cloud-credentials",
        csi_kit::hash::HashedKind::Secret,
    );
    let first_hash = template.metadata.unwrap().annotations.unwrap()[&hash_key].clone();

    // Rotation: a new hash, one more rollout.
    secrets
        .replace(
            "gcp-pd-cloud-credentials",
            &PostParams::default(),
            &secret("a2V5LTI="),
        )
        .await
        .unwrap();
    eventually("the Deployment rolled for the rotated Secret", async || {
        (generations(&admin).await.0 > settled_create.0).then_some(())
    })
    .await;
    let settled_rotation = settled(&cluster, &admin, &running).await;
    assert_eq!(settled_rotation.0, settled_create.0 + 1);
    let second_hash = Api::<Deployment>::namespaced(admin.clone(), NS)
        .get(CONTROLLER)
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap()[&hash_key]
        .clone();
    assert_ne!(first_hash, second_hash);

    // logLevel Debug: --v=4 everywhere, each workload rolled once.
    Api::<ClusterCSIDriver>::all(admin.clone())
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"logLevel": "Debug"}})),
        )
        .await
        .unwrap();
    eventually("both workloads rolled for the log level", async || {
        let now = generations(&admin).await;
        (now.0 > settled_rotation.0 && now.1 > settled_rotation.1).then_some(())
    })
    .await;
    let settled_log = settled(&cluster, &admin, &running).await;
    assert_eq!(settled_log.0, settled_rotation.0 + 1);
    let d = Api::<Deployment>::namespaced(admin.clone(), NS)
        .get(CONTROLLER)
        .await
        .unwrap();
    let args = d.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert!(args.iter().any(|a| a == "--v=4"), "{args:?}");
    running.stop().await;
}

#[tokio::test]
async fn trusted_ca_bundle_and_proxy_changes_roll_the_pods_once() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let before = settled(&cluster, &admin, &running).await;

    // The network operator fills in the trusted CA bundle ConfigMap the operator created.
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(admin.clone(), NS);
    config_maps
        .patch(
            "gcp-pd-csi-driver-trusted-ca-bundle",
            &PatchParams::apply("cluster-network-operator"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "gcp-pd-csi-driver-trusted-ca-bundle", "namespace": NS},
                "data": {"ca-bundle.crt": "-----BEGIN CERTIFICATE-----\n"}})),
        )
        .await
        .unwrap();
    eventually("the controller rolled for the CA bundle", async || {
        (generations(&admin).await.0 > before.0).then_some(())
    })
    .await;
    let after_ca = settled(&cluster, &admin, &running).await;
    assert_eq!(
        after_ca.0,
        before.0 + 1,
        "the CA bundle rolled the controller more than once"
    );
    let d = Api::<Deployment>::namespaced(admin.clone(), NS)
        .get(CONTROLLER)
        .await
        .unwrap();
    let volumes = d.spec.unwrap().template.spec.unwrap().volumes.unwrap();
    assert!(
        volumes.iter().any(|v| v
            .config_map
            .as_ref()
            .is_some_and(|c| c.name == "gcp-pd-csi-driver-trusted-ca-bundle")),
        "the CA bundle is not mounted"
    );

    // The cluster-wide proxy is configured: the proxy env reaches the pods, one rollout.
    let proxy = json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
        "metadata": {"name": "cluster"}, "spec": {},
        "status": {"httpProxy": "http://proxy.example.com:3128", "httpsProxy": "http://proxy.example.com:3128", "noProxy": ".cluster.local"}});
    create_cluster_scoped::<api::config_v1::Proxy>(&admin, proxy.clone()).await;
    Api::<api::config_v1::Proxy>::all(admin.clone())
        .patch_status(
            "cluster",
            &PatchParams::apply("network-operator"),
            &Patch::Apply(proxy),
        )
        .await
        .unwrap();
    eventually("the controller rolled for the proxy", async || {
        (generations(&admin).await.0 > after_ca.0).then_some(())
    })
    .await;
    let after_proxy = settled(&cluster, &admin, &running).await;
    assert_eq!(
        after_proxy.0,
        after_ca.0 + 1,
        "the proxy rolled the controller more than once"
    );
    let d = Api::<Deployment>::namespaced(admin.clone(), NS)
        .get(CONTROLLER)
        .await
        .unwrap();
    let env = d.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default();
    assert!(
        env.iter().any(|e| e.name == "HTTPS_PROXY"),
        "no proxy env in the driver container: {env:?}"
    );
    running.stop().await;
}

/// Prints the figures of the performance section (run with `--nocapture`): requests to
/// converge from empty by verb, and the time from the first request to the last operand write.
/// Only the absence of polling is asserted; times depend on the machine.
#[tokio::test]
async fn converge_figures() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    cluster.clear_requests();
    let running = start(&cluster);
    healthy(&admin).await;
    let requests: Vec<_> = cluster
        .requests()
        .into_iter()
        .filter(|r| r.from_client(AGENT))
        .collect();
    let mut by_verb = std::collections::BTreeMap::<String, usize>::new();
    for r in &requests {
        *by_verb.entry(r.verb.clone()).or_default() += 1;
    }
    let first = requests.first().map(|r| r.at).unwrap_or_default();
    let last_operand_write = requests
        .iter()
        .filter(|r| r.is_write() && r.subresource.is_none() && r.resource != "events")
        .map(|r| r.at)
        .max()
        .unwrap_or_default();
    println!(
        "converge from empty: {} requests {by_verb:?}; every operand applied {:?} after the first request",
        requests.len(),
        last_operand_write.saturating_sub(first)
    );
    // Reads are the initial list+watch of each cache and discovery, never GETs.
    assert_eq!(by_verb.get("get"), None, "GET polling: {by_verb:?}");
    running.stop().await;
}

#[tokio::test]
async fn an_admins_default_snapshot_class_choice_is_kept() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    install_open_crd(
        &admin,
        "snapshot.storage.k8s.io",
        "VolumeSnapshotClass",
        "volumesnapshotclasses",
        false,
    )
    .await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let classes = Api::<DynamicObject>::all_with(
        admin.clone(),
        &csi_kit::inputs::OptionalKind::VolumeSnapshotClass.api_resource(),
    );
    eventually("the VolumeSnapshotClass", async || {
        classes.get_opt("csi-gce-pd-vsc").await.ok().flatten()
    })
    .await;
    healthy(&admin).await;
    classes
        .patch(
            "csi-gce-pd-vsc",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"snapshot.storage.kubernetes.io/is-default-class": "false"}}})),
        )
        .await
        .unwrap();
    quiet(&cluster, &running).await;
    let class = classes.get("csi-gce-pd-vsc").await.unwrap();
    assert_eq!(
        class.metadata.annotations.unwrap()["snapshot.storage.kubernetes.io/is-default-class"],
        "false"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_storage_class_with_other_immutable_fields_is_recreated() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    // An older version of the operator applied the class with another disk type.
    let classes: Api<StorageClass> = Api::all(admin.clone());
    classes
        .patch(
            "standard-csi",
            &PatchParams::apply("storage-operator/StorageClassController"),
            &Patch::Apply(json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "standard-csi", "labels": {"csi.storage.openshift.io/driver": "gcp-pd"}},
               "provisioner": DRIVER, "parameters": {"type": "pd-old"}})),
        )
        .await
        .unwrap();
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    eventually(
        "standard-csi recreated with the current parameters",
        async || {
            let class = classes.get_opt("standard-csi").await.unwrap()?;
            (class.parameters?.get("type").map(String::as_str) != Some("pd-old")).then_some(())
        },
    )
    .await;
    healthy(&admin).await;
    quiet(&cluster, &running).await;
    running.stop().await;
}

#[tokio::test]
async fn an_admins_class_of_the_same_name_for_another_driver_is_kept() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_scoped::<StorageClass>(
        &admin,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "standard-csi"},
               "provisioner": "nfs.example.com", "parameters": {"server": "nas"}}),
    )
    .await;
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let admins = classes.get("standard-csi").await.unwrap();
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let (reason, message) = eventually("StorageClassControllerDegraded", async || {
        condition_is(&admin, "StorageClassControllerDegraded", "True").await
    })
    .await;
    assert_eq!(reason, driver_operator::plan::REASON_OBJECT_KEPT);
    assert!(
        message.starts_with("StorageClass standard-csi exists and was made by field manager ")
            && message.contains("it is left as it is"),
        "{message}"
    );
    // The driver itself is installed; the other class of the driver too.
    eventually("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
    })
    .await;
    quiet(&cluster, &running).await;
    let now = classes.get("standard-csi").await.unwrap();
    assert_eq!(now.metadata.uid, admins.metadata.uid, "never deleted");
    assert_eq!(
        now.metadata.resource_version, admins.metadata.resource_version,
        "never written"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_persistent_apply_failure_degrades_its_controller_until_it_clears() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    cluster.inject(FaultRule::status(Some("patch"), Some("daemonsets"), 500));
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let (reason, message) = eventually("NodeServiceControllerDegraded=True", async || {
        condition_is(&admin, "GCPPDDriverNodeServiceControllerDegraded", "True").await
    })
    .await;
    assert_eq!(reason, "SyncError");
    assert!(message.contains(NODE), "{message}");
    // The other controllers are not blamed.
    assert_eq!(
        condition(&admin, "GCPPDDriverStaticResourcesControllerDegraded")
            .await
            .unwrap()
            .0,
        "False"
    );
    cluster.clear_faults();
    healthy(&admin).await;
    running.stop().await;
}

#[tokio::test]
async fn the_operator_follows_its_operator_log_level() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let hook = {
        let seen = seen.clone();
        opkit::log_level::LogLevelHook::new(move |level| {
            seen.lock().unwrap().push(level.to_string())
        })
    };
    let running = start_with_hook(&cluster, drivers::by_name("gcp-pd").unwrap(), Some(hook));
    eventually("Normal applied", async || {
        (seen.lock().unwrap().first().map(String::as_str) == Some("Normal")).then_some(())
    })
    .await;
    Api::<ClusterCSIDriver>::all(admin.clone())
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"operatorLogLevel": "Debug"}})),
        )
        .await
        .unwrap();
    eventually("Debug applied", async || {
        (seen.lock().unwrap().last().map(String::as_str) == Some("Debug")).then_some(())
    })
    .await;
    running.stop().await;
}

fn proxy_tls_args(deployment: &Deployment) -> Vec<String> {
    let spec = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    spec.containers
        .iter()
        .filter(|c| c.image.as_deref().is_some_and(|i| i.contains("rbac-proxy")))
        .flat_map(|c| c.args.iter().flatten())
        .filter(|a| a.starts_with("--tls-min-version") || a.starts_with("--tls-cipher-suites"))
        .cloned()
        .collect()
}

#[tokio::test]
async fn the_tls_profile_is_observed_and_rolls_the_controller_once() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(
            &PostParams::default(),
            &<api::config_v1::APIServer as kube::CustomResourceExt>::crd(),
        )
        .await
        .unwrap();
    let api_servers: Api<api::config_v1::APIServer> = Api::all(admin.clone());
    api_servers
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
                "metadata": {"name": "cluster"}, "spec": {}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let before = settled(&cluster, &admin, &running).await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let args = proxy_tls_args(&deployments.get(CONTROLLER).await.unwrap());
    assert!(
        args.iter().all(|a| a != "--tls-min-version=VersionTLS13")
            && args.iter().any(|a| a == "--tls-min-version=VersionTLS12"),
        "no profile: Intermediate; {args:?}"
    );
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    let observed_config = |d: ClusterCSIDriver| d.spec.operator.observed_config.unwrap_or_default();
    assert_eq!(
        observed_config(drivers.get(DRIVER).await.unwrap())["targetcsiconfig"]["servingInfo"]["minTLSVersion"],
        "VersionTLS12"
    );
    assert!(
        condition_is(&admin, "ConfigObservationDegraded", "False")
            .await
            .is_some()
    );

    // Modern: the proxies move to TLS 1.3 in one rollout, and observedConfig says so.
    api_servers
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}}),
            ),
        )
        .await
        .unwrap();
    eventually("the controller rolled for the profile", async || {
        (generations(&admin).await.0 > before.0).then_some(())
    })
    .await;
    let after = settled(&cluster, &admin, &running).await;
    assert_eq!(after.0, before.0 + 1, "one rollout");
    assert_eq!(
        after.1, before.1,
        "the node pods serve no metrics proxy here"
    );
    let args = proxy_tls_args(&deployments.get(CONTROLLER).await.unwrap());
    assert!(
        args.iter().any(|a| a == "--tls-min-version=VersionTLS13"),
        "{args:?}"
    );
    assert_eq!(
        observed_config(drivers.get(DRIVER).await.unwrap())["targetcsiconfig"]["servingInfo"]["minTLSVersion"],
        "VersionTLS13"
    );
    assert!(!events(&admin, "ObservedConfigChanged").await.is_empty());

    // An impossible Custom profile: the condition says why, nothing rolls.
    api_servers
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tlsSecurityProfile": {"type": "Custom", "modern": null,
                "custom": {"ciphers": ["DHE-RSA-AES128-GCM-SHA256"], "minTLSVersion": "VersionTLS12"}}}})),
        )
        .await
        .unwrap();
    let (_, message) = eventually("ConfigObservationDegraded", async || {
        condition_is(&admin, "ConfigObservationDegraded", "True").await
    })
    .await;
    assert!(message.contains("custom.ciphers"), "{message}");
    let still = settled_quietly(&cluster, &admin, &running).await;
    assert_eq!(still.0, after.0, "the last good profile stays in force");
    running.stop().await;
}

/// The workload generations once the operator has converged (its Degraded conditions may be True).
async fn settled_quietly(cluster: &Cluster, client: &Client, running: &Background) -> (i64, i64) {
    quiet(cluster, running).await;
    generations(client).await
}

#[tokio::test]
async fn the_credentials_request_is_available_once_provisioned() {
    const AVAILABLE: &str = "GCPPDCredentialsRequestControllerAvailable";
    let (cluster, admin) = openshift("HighlyAvailable").await;
    install_open_crd(
        &admin,
        "cloudcredential.openshift.io",
        "CredentialsRequest",
        "credentialsrequests",
        true,
    )
    .await;
    for ns in ["openshift-cloud-credential-operator"] {
        Api::<Namespace>::all(admin.clone())
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
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    let (reason, _) = eventually("waiting for cloud-credential-operator", async || {
        condition_is(&admin, AVAILABLE, "False").await
    })
    .await;
    assert_eq!(reason, "CredentialsNotProvisionedYet");

    // cloud-credential-operator provisions it.
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(
            "cloudcredential.openshift.io",
            "v1",
            "CredentialsRequest",
        ),
        "credentialsrequests",
    );
    let requests: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "openshift-cloud-credential-operator",
        &resource,
    );
    eventually("the CredentialsRequest", async || {
        requests
            .get_opt("openshift-gcp-pd-csi-driver-operator")
            .await
            .unwrap()
    })
    .await;
    requests
        .patch(
            "openshift-gcp-pd-csi-driver-operator",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"provisioned": true}})),
        )
        .await
        .unwrap();
    eventually("Available once provisioned", async || {
        condition_is(&admin, AVAILABLE, "True").await
    })
    .await;
    quiet(&cluster, &running).await;
    running.stop().await;
}

/// What an earlier version of ours rendered under names this one no longer uses (here a
/// binding and a Role with the operand label, applied by our field manager) is deleted once
/// the operator runs; what is not ours stays: an object without the operand label, and a copy
/// of the old binding that someone created (our label, not our field manager). So do ours
/// that are rendered.
#[tokio::test]
async fn operands_an_earlier_version_named_otherwise_are_deleted() {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role};
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let binding = |name: &str, ours: bool| {
        let labels = if ours {
            json!({"csi.storage.openshift.io/driver": "gcp-pd"})
        } else {
            json!({})
        };
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": NS}]})
    };
    // As an earlier version of ours made them: server-side apply under our field manager.
    let earlier =
        PatchParams::apply("storage-operator/GCPPDDriverStaticResourcesController").force();
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    bindings
        .patch(
            "gcp-pd-old-binding",
            &earlier,
            &Patch::Apply(binding("gcp-pd-old-binding", true)),
        )
        .await
        .unwrap();
    create_cluster_scoped::<ClusterRoleBinding>(&admin, binding("someone-elses-binding", false))
        .await;
    let old = serde_json::to_value(bindings.get("gcp-pd-old-binding").await.unwrap()).unwrap();
    create_cluster_scoped::<ClusterRoleBinding>(
        &admin,
        testkit::copy_of(&old, "gcp-pd-old-binding-copy"),
    )
    .await;
    let roles: Api<Role> = Api::namespaced(admin.clone(), NS);
    roles
        .patch(
            "gcp-pd-old-role",
            &earlier,
            &Patch::Apply(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "gcp-pd-old-role", "namespace": NS,
                             "labels": {"csi.storage.openshift.io/driver": "gcp-pd"}},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
            ),
        )
        .await
        .unwrap();
    let running = start(&cluster);
    healthy(&admin).await;
    eventually("the old binding and Role deleted", async || {
        let binding = bindings.get_opt("gcp-pd-old-binding").await.unwrap();
        let role = roles.get_opt("gcp-pd-old-role").await.unwrap();
        (binding.is_none() && role.is_none()).then_some(())
    })
    .await;
    quiet(&cluster, &running).await;
    for kept in ["someone-elses-binding", "gcp-pd-old-binding-copy"] {
        assert!(
            bindings.get_opt(kept).await.unwrap().is_some(),
            "{kept} was deleted"
        );
    }
    let ours = bindings
        .list(&ListParams::default().labels("csi.storage.openshift.io/driver=gcp-pd"))
        .await
        .unwrap();
    assert!(ours.items.len() > 1, "the rendered bindings stay");
    running.stop().await;
}

/// Copies of the operator's own objects, under other names and with everything ours carry
/// (labels, annotations, managedFields as sent), as `kubectl get -o yaml` edited and created
/// again makes them, or as Kubernetes' storage e2e suite copies a driver's class: none is
/// ever deleted, neither on a full pass nor when `storageClassState: Removed` deletes the
/// driver's own classes. Our objects of the same kinds are still deleted when they should be.
#[tokio::test]
async fn copies_of_our_objects_under_other_names_are_never_deleted() {
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    healthy(&admin).await;
    quiet(&cluster, &running).await;

    // One copy of every rendered object of each kind an operator pass may delete.
    let kinds: [(&str, &str, &str, bool); 9] = [
        ("", "v1", "ServiceAccount", true),
        ("", "v1", "Service", true),
        ("rbac.authorization.k8s.io", "v1", "Role", true),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding", true),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole", false),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            false,
        ),
        ("policy", "v1", "PodDisruptionBudget", true),
        ("storage.k8s.io", "v1", "StorageClass", false),
        ("apps", "v1", "Deployment", true),
    ];
    let mut copies = Vec::new();
    for (group, version, kind, namespaced) in kinds {
        let (resource, _) = kube::discovery::pinned_kind(
            &admin,
            &kube::api::GroupVersionKind::gvk(group, version, kind),
        )
        .await
        .unwrap();
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(admin.clone(), NS, &resource)
        } else {
            Api::all_with(admin.clone(), &resource)
        };
        let ours = api
            .list(&ListParams::default().labels("csi.storage.openshift.io/driver=gcp-pd"))
            .await
            .unwrap();
        let original = ours
            .items
            .into_iter()
            .find(|o| opkit::ownership::applied_by_us(&o.metadata))
            .unwrap_or_else(|| panic!("no {kind} of ours to copy"));
        let name = format!("{}-copy", original.metadata.name.clone().unwrap());
        let mut copy = testkit::copy_of(&serde_json::to_value(&original).unwrap(), &name);
        copy["apiVersion"] = json!(resource.api_version);
        copy["kind"] = json!(kind);
        if kind == "Service" {
            // A Service's cluster IP is the original's; the copy gets its own.
            copy["spec"].as_object_mut().unwrap().remove("clusterIP");
            copy["spec"].as_object_mut().unwrap().remove("clusterIPs");
        }
        api.create(
            &PostParams::default(),
            &serde_json::from_value(copy).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("copying {kind} {name}: {e}"));
        copies.push((api, kind, name));
    }

    // A full pass (a change of the ClusterCSIDriver asks for one), then one that deletes the
    // driver's classes.
    let drivers_api: Api<ClusterCSIDriver> = Api::all(admin.clone());
    drivers_api
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test/nudge": "1"}}})),
        )
        .await
        .unwrap();
    quiet(&cluster, &running).await;
    drivers_api
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClassState": "Removed"}})),
        )
        .await
        .unwrap();
    let classes: Api<StorageClass> = Api::all(admin.clone());
    eventually("the driver's own classes deleted", async || {
        let left = classes.list(&ListParams::default()).await.unwrap();
        left.items
            .iter()
            .all(|c| !opkit::ownership::applied_by_us(&c.metadata))
            .then_some(())
    })
    .await;
    quiet(&cluster, &running).await;
    for (api, kind, name) in &copies {
        assert!(
            api.get_opt(name).await.unwrap().is_some(),
            "the copy {kind} {name} was deleted"
        );
    }
    running.stop().await;
}

/// Every object of ours the operator applied on this cluster: (kind, its ApiResource, the
/// object as served).
async fn applied_objects(admin: &Client) -> Vec<(&'static str, kube::api::ApiResource, Value)> {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
    use kube::api::ApiResource;
    let resources = [
        ("ServiceAccount", ApiResource::erase::<ServiceAccount>(&())),
        ("Role", ApiResource::erase::<Role>(&())),
        ("RoleBinding", ApiResource::erase::<RoleBinding>(&())),
        ("ClusterRole", ApiResource::erase::<ClusterRole>(&())),
        (
            "ClusterRoleBinding",
            ApiResource::erase::<ClusterRoleBinding>(&()),
        ),
        ("ConfigMap", ApiResource::erase::<ConfigMap>(&())),
        ("Secret", ApiResource::erase::<Secret>(&())),
        ("Service", ApiResource::erase::<Service>(&())),
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

/// The ownership rule (`opkit::ownership`) on every kind the driver operator writes: an
/// object of an operand's name made by someone else, as a labelled copy of ours (`kubectl get
/// -o yaml` created again) or bare (another installer's), is left exactly as it is (never
/// written, never deleted) and the status names it; someone else's CSIDriver of the driver's
/// name blocks the whole driver (nothing of ours is made). Absent objects, ours and OpenShift's
/// operator's are the other tests' (converge, drift, takeover).
#[tokio::test]
async fn someone_elses_object_of_every_operand_kind_is_left_as_it_is_and_reported() {
    // What the operator applies on this cluster, from a fresh one.
    let (cluster, admin) = openshift("HighlyAvailable").await;
    create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
    let running = start(&cluster);
    healthy(&admin).await;
    quiet(&cluster, &running).await;
    running.stop().await;
    let applied = applied_objects(&admin).await;
    let kinds: std::collections::BTreeSet<&str> = applied.iter().map(|(k, _, _)| *k).collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "RoleBinding",
        "Service",
        "Deployment",
        "DaemonSet",
        "CSIDriver",
        "StorageClass",
    ] {
        assert!(
            kinds.contains(kind),
            "the operator applies a {kind}: {kinds:?}"
        );
    }

    for (kind, resource, ours) in &applied {
        for (variant, theirs) in testkit::someone_elses_stand_ins(ours) {
            let name = ours["metadata"]["name"].as_str().unwrap().to_owned();
            let namespace = ours["metadata"]["namespace"].as_str().map(str::to_owned);
            let what = format!("{kind} {name} ({variant})");
            let (cluster, admin) = openshift("HighlyAvailable").await;
            let (api, created) =
                testkit::create_as(&cluster, "kubectl-create", resource, theirs).await;
            create_cluster_csi_driver(&admin, json!({"managementState": "Managed"})).await;
            let running = start(&cluster);
            let object = match &namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name.clone(),
            };
            let reported = if *kind == "CSIDriver" {
                format!("CSIDriver {object} was installed by ")
            } else {
                format!("{kind} {object} exists and was made by ")
            };
            let message = eventually(&format!("{what} reported"), async || {
                let driver = Api::<ClusterCSIDriver>::all(admin.clone())
                    .get_opt(DRIVER)
                    .await
                    .unwrap()?;
                driver
                    .status?
                    .conditions
                    .into_iter()
                    .filter(|c| c.reason.as_deref() == Some("ObjectNotOurs"))
                    .filter_map(|c| c.message)
                    .find(|m| m.contains(&reported))
            })
            .await;
            if variant == "bare" {
                assert!(
                    message.contains("kustomize"),
                    "{what}: the installer is named: {message}"
                );
            }
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
            if *kind == "CSIDriver" {
                // The driver is another installer's: nothing of ours at all.
                let ours: Vec<String> = applied_objects(&admin)
                    .await
                    .into_iter()
                    .map(|(k, _, o)| format!("{k} {}", o["metadata"]["name"]))
                    .collect();
                assert!(ours.is_empty(), "{what}: nothing is installed: {ours:?}");
            }
            running.stop().await;
        }
    }
}
