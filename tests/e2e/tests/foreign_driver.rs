//! A driver someone else installed, on a real cluster: the AWS EBS CSI driver as its upstream
//! project deploys it (`fixtures/upstream/aws-ebs-csi-driver.yaml`, its `deploy/kubernetes/base`,
//! server-side applied as `kubectl apply --server-side -k` does), then our AWS EBS driver
//! operator as its own ServiceAccount. Ours touches nothing of that install (not one write: no
//! entry of our field managers, the same resourceVersion on every object whose status nobody
//! writes), installs nothing of its own, and says in the ClusterCSIDriver who installed the
//! driver and what to do; where the API server keeps an audit log (`.ci/run`'s does), it shows
//! no write of the operator's but its ClusterCSIDriver's, Events and Lease. Once that install
//! is removed, ours installs the driver by itself, without a restart, and leaves an admin's
//! StorageClass of its class's name as it is, saying so. See docs/ownership.md.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use e2e::driver::{Driver, any_operand};
use e2e::{cleanup, ensure_platform, wait_for};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{Scope, pinned_kind};
use kube::{Api, Client};
use serde_json::{Value, json};

const UPSTREAM: &str = include_str!("../fixtures/upstream/aws-ebs-csi-driver.yaml");
const DRIVER: &str = "ebs.csi.aws.com";
/// The field manager `kubectl apply --server-side` writes as.
const KUBECTL: &str = "kubectl";

/// The API of one upstream object, and its name.
async fn api_of(admin: &Client, object: &Value) -> (Api<DynamicObject>, String) {
    let gvk = e2e::admission::gvk(object);
    let (resource, capabilities) = pinned_kind(admin, &gvk).await.unwrap();
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let api = match (object["metadata"]["namespace"].as_str(), capabilities.scope) {
        (Some(ns), Scope::Namespaced) => Api::namespaced_with(admin.clone(), ns, &resource),
        _ => Api::all_with(admin.clone(), &resource),
    };
    (api, name)
}

/// Every upstream object as served: (kind/name, uid, resourceVersion, field managers).
async fn upstream_state(
    admin: &Client,
    objects: &[Value],
) -> Vec<(String, Option<String>, Option<String>, Vec<String>)> {
    let mut out = Vec::new();
    for object in objects {
        let (api, name) = api_of(admin, object).await;
        let served = api.get(&name).await.unwrap();
        let kind = object["kind"].as_str().unwrap();
        // kube-controller-manager writes the workloads' and the PDB's status: their version
        // moves without us.
        let version = (!matches!(kind, "Deployment" | "DaemonSet" | "PodDisruptionBudget"))
            .then(|| served.metadata.resource_version.clone())
            .flatten();
        let managers = served
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|e| e.manager.clone())
            .collect();
        out.push((
            format!("{kind}/{name}"),
            served.metadata.uid,
            version,
            managers,
        ));
    }
    out
}

/// The writes (`verb resource/subresource namespace/name`) `user` sent since `since`, from the
/// API server's audit log (`E2E_AUDIT_LOG`, which `.ci/run` sets for its control plane);
/// `None` without one.
fn audited_writes(user: &str, since: Timestamp) -> Option<Vec<String>> {
    let path = std::env::var_os("E2E_AUDIT_LOG")?;
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading the audit log {}: {e}", path.display()));
    let mut writes = Vec::new();
    for line in text.lines().filter(|l| l.contains(user)) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue; // a line being written
        };
        let verb = event["verb"].as_str().unwrap_or_default();
        let when = event["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok());
        if event["stage"] != "ResponseComplete"
            || event["user"]["username"] != user
            || !matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
            || when.is_none_or(|t| t < since)
        {
            continue;
        }
        let object = &event["objectRef"];
        let text = |key: &str| object[key].as_str().unwrap_or_default().to_owned();
        writes.push(format!(
            "{verb} {}/{} {}/{}",
            text("resource"),
            text("subresource"),
            text("namespace"),
            text("name")
        ));
    }
    Some(writes)
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn a_driver_installed_from_upstream_manifests_is_left_to_them_then_ours_installs() {
    let admin = e2e::admin().await;
    let declared = ensure_platform(
        &admin,
        json!({"type": "AWS", "aws": {"region": "us-east-1"}}),
    )
    .await;
    let driver = Driver::prepare(&admin, "aws-ebs").await;
    let ns = driver.def.namespace.clone();
    let prefix = driver.def.condition_prefix.clone();

    // The upstream install, as `kubectl apply --server-side -k deploy/kubernetes/base`.
    let objects: Vec<Value> = serde_saphyr::from_multiple(UPSTREAM).unwrap();
    assert_eq!(objects.len(), 18, "the upstream install's objects");
    for object in &objects {
        let (api, name) = api_of(&admin, object).await;
        api.patch(
            &name,
            &PatchParams::apply(KUBECTL).force(),
            &Patch::Apply(object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", object["kind"]));
    }
    let before = upstream_state(&admin, &objects).await;

    let started = Timestamp::now();
    let running = driver.start();
    let blocked = driver
        .condition_is(
            &admin,
            &format!("{prefix}DriverStaticResourcesControllerDegraded"),
            "True",
        )
        .await;
    assert_eq!(blocked.reason.as_deref(), Some("ObjectNotOurs"));
    let message = blocked.message.unwrap_or_default();
    assert!(
        message.contains(&format!(
            "CSIDriver {DRIVER} was installed by field manager {KUBECTL}"
        )),
        "{message}"
    );
    let available = driver
        .condition_is(
            &admin,
            &format!("{prefix}DriverControllerServiceControllerAvailable"),
            "False",
        )
        .await;
    assert_eq!(available.reason.as_deref(), Some("ObjectNotOurs"));
    running.settled_since(0).await;

    // Not one write to the upstream install, and nothing of ours. The audit log, where there
    // is one, has every request: the operator wrote only its ClusterCSIDriver's status and
    // finalizers, Events and its Lease.
    if let Some(writes) = audited_writes(&driver.operator.user, started) {
        let others: Vec<&String> = writes
            .iter()
            .filter(|w| {
                let resource = w.split(' ').nth(1).unwrap_or_default();
                !["clustercsidrivers/", "events/", "leases/"]
                    .iter()
                    .any(|ours| resource.starts_with(ours))
            })
            .collect();
        assert!(
            others.is_empty(),
            "writes to objects the operator did not create: {others:?}"
        );
        assert!(
            writes
                .iter()
                .any(|w| w.starts_with("patch clustercsidrivers/status")),
            "the audit log is read: {writes:?}"
        );
    }
    assert_eq!(upstream_state(&admin, &objects).await, before);
    for (what, _, _, managers) in &before {
        assert!(
            !managers.iter().any(|m| m.starts_with("storage-operator")),
            "{what}: {managers:?}"
        );
    }
    let short = driver.def.short_name.clone();
    assert!(!any_operand(&Api::<Deployment>::namespaced(admin.clone(), &ns), &short).await);
    assert!(!any_operand(&Api::<DaemonSet>::namespaced(admin.clone(), &ns), &short).await);
    assert!(!any_operand(&Api::<ClusterRole>::all(admin.clone()), &short).await);
    assert!(!any_operand(&Api::<StorageClass>::all(admin.clone()), &short).await);

    // An admin's class with the name of ours.
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let admins = classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "gp3-csi"}, "provisioner": DRIVER,
                "parameters": {"type": "io2"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();

    // The upstream install goes (`kubectl delete -k`): ours installs the driver by itself.
    for object in &objects {
        let (api, name) = api_of(&admin, object).await;
        api.delete(&name, &DeleteParams::background())
            .await
            .unwrap();
    }
    wait_for("our CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(DRIVER)
            .await
            .unwrap()
            .filter(|c| opkit::ownership::applied_by_us(&c.metadata))
    })
    .await;
    wait_for("our controller Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), &ns)
            .get_opt(&csi_kit::names::controller(&driver.def))
            .await
            .unwrap()
    })
    .await;
    let kept = driver
        .condition_is(&admin, "StorageClassControllerDegraded", "True")
        .await;
    assert_eq!(kept.reason.as_deref(), Some("ObjectNotOurs"));
    assert!(
        kept.message
            .unwrap_or_default()
            .contains("StorageClass gp3-csi exists and was made by"),
        "the admin's class is named"
    );
    let static_degraded = driver
        .condition_is(
            &admin,
            &format!("{prefix}DriverStaticResourcesControllerDegraded"),
            "False",
        )
        .await;
    assert_eq!(static_degraded.reason.as_deref(), Some("AsExpected"));
    running.settled_since(0).await;
    let now = classes.get("gp3-csi").await.unwrap();
    assert_eq!(now.metadata.uid, admins.metadata.uid, "never deleted");
    assert_eq!(
        now.metadata.resource_version, admins.metadata.resource_version,
        "never written"
    );

    classes
        .delete("gp3-csi", &DeleteParams::default())
        .await
        .unwrap();
    running.stop().await;
    driver.finish(&admin).await;
    cleanup::undeclare_platform(&admin, declared).await;
}
