//! The applier and the status writer against the in-process API server: what they send, what the
//! server ends up holding, and that an unchanged reconcile sends nothing.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use api::operator_v1::{ClusterCSIDriver, ConditionStatus, OperatorStatus};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use opkit::apply::{APPLIED_HASH_ANNOTATION, Applier, Outcome};
use opkit::conditions::condition;
use opkit::status::{StatusPart, StatusWrites, apply_status};
use serde_json::json;

fn deployment(args: &[&str]) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "driver", "namespace": "default", "labels": {"app": "driver"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "driver"}},
            "template": {
                "metadata": {"labels": {"app": "driver"}},
                "spec": {"containers": [{"name": "csi-driver", "image": "example.com/driver:1", "args": args}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn apply_creates_skips_restores_drift_and_removes_dropped_fields() {
    let cluster = testkit::Cluster::start().await;
    let applier = Applier::new(cluster.client_with_agent("operator"), "test-controller");
    let api: Api<Deployment> = Api::namespaced(cluster.client(), "default");

    let desired = deployment(&["--v=2", "--extra"]);
    assert_eq!(
        applier.apply(&desired, None).await.unwrap(),
        Outcome::Created
    );
    let served = api.get("driver").await.unwrap();
    assert_eq!(
        served.metadata.annotations.as_ref().unwrap()[APPLIED_HASH_ANNOTATION].len(),
        64
    );
    let managers: Vec<_> = served
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| m.manager.clone().unwrap())
        .collect();
    assert_eq!(managers, ["storage-operator/test-controller"]);

    // Unchanged: nothing is sent.
    cluster.clear_requests();
    assert_eq!(
        applier.apply(&desired, Some(&served)).await.unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(cluster.count_writes("operator"), 0);
    assert_eq!(cluster.count_reads("operator"), 0);

    // An admin scales it: the next apply puts it back.
    api.patch(
        "driver",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    let drifted = api.get("driver").await.unwrap();
    assert_eq!(
        applier.apply(&desired, Some(&drifted)).await.unwrap(),
        Outcome::DriftRestored
    );
    assert_eq!(
        api.get("driver").await.unwrap().spec.unwrap().replicas,
        Some(2)
    );

    // We stop setting an argument: it disappears from the server.
    let fewer = deployment(&["--v=2"]);
    let current = api.get("driver").await.unwrap();
    assert_eq!(
        applier.apply(&fewer, Some(&current)).await.unwrap(),
        Outcome::Updated
    );
    let args = api
        .get("driver")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers[0]
        .args
        .clone();
    assert_eq!(args, Some(vec!["--v=2".to_owned()]));
}

#[tokio::test]
async fn apply_serves_cluster_scoped_kinds() {
    let cluster = testkit::Cluster::start().await;
    let applier = Applier::new(cluster.client(), "sc");
    let class: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "standard-csi"}, "provisioner": "pd.csi.storage.gke.io",
        "parameters": {"type": "pd-standard"}
    }))
    .unwrap();
    assert_eq!(applier.apply(&class, None).await.unwrap(), Outcome::Created);
    let served = Api::<StorageClass>::all(cluster.client())
        .get("standard-csi")
        .await
        .unwrap();
    assert_eq!(
        applier.apply(&class, Some(&served)).await.unwrap(),
        Outcome::Unchanged
    );
}

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
}

#[tokio::test]
async fn controllers_own_their_conditions_on_a_shared_status() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &api::crds::cluster_csi_driver())
        .await
        .unwrap();
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    let driver: ClusterCSIDriver = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": "pd.csi.storage.gke.io"}, "spec": {"managementState": "Managed"}
    }))
    .unwrap();
    drivers
        .create(&PostParams::default(), &driver)
        .await
        .unwrap();

    let part = |type_: &str, status: ConditionStatus, message: &str| StatusPart {
        conditions: vec![condition(type_, status, "R", message)],
        ..Default::default()
    };
    let status = |d: &ClusterCSIDriver| -> OperatorStatus { d.status.clone().unwrap_or_default() };
    let write = |controller: &'static str,
                 part: StatusPart,
                 observed: Option<ClusterCSIDriver>,
                 time: i64| {
        let client = client.clone();
        async move {
            apply_status::<ClusterCSIDriver>(
                &client,
                controller,
                "pd.csi.storage.gke.io",
                &part,
                observed.as_ref(),
                &at(time),
            )
            .await
            .unwrap()
        }
    };
    let name = "pd.csi.storage.gke.io";

    let a = part("AAvailable", ConditionStatus::True, "a is fine");
    let b = part("BDegraded", ConditionStatus::False, "");
    assert!(write("a", a.clone(), None, 0).await);
    let observed = drivers.get(name).await.unwrap();
    assert!(write("b", b, Some(observed), 1).await);
    let observed = drivers.get(name).await.unwrap();
    let types: Vec<_> = status(&observed)
        .conditions
        .iter()
        .map(|c| c.type_.clone())
        .collect();
    assert_eq!(
        types,
        ["AAvailable", "BDegraded"],
        "neither controller overwrote the other"
    );

    // Unchanged: nothing is sent.
    cluster.clear_requests();
    assert!(!write("a", a, Some(observed.clone()), 9).await);
    assert_eq!(cluster.count_writes("operator"), 0);

    // A changes its message: its transition time stays, B's condition is untouched.
    let a2 = part("AAvailable", ConditionStatus::True, "a is still fine");
    assert!(write("a", a2, Some(observed), 10).await);
    let observed = status(&drivers.get(name).await.unwrap());
    let a_cond = observed.condition("AAvailable").unwrap();
    assert_eq!(a_cond.message.as_deref(), Some("a is still fine"));
    assert_eq!(a_cond.last_transition_time, Some(at(0)));
    assert!(observed.condition("BDegraded").is_some());

    // A stops reporting its condition: the server removes it, B's stays.
    let observed_object = drivers.get(name).await.unwrap();
    assert!(
        write(
            "a",
            StatusPart::default(),
            Some(observed_object.clone()),
            11
        )
        .await
    );
    // B saying nothing new sends nothing, though A's condition was in the status it observed.
    assert!(
        !write(
            "b",
            part("BDegraded", ConditionStatus::False, ""),
            Some(drivers.get(name).await.unwrap()),
            12
        )
        .await
    );
    let observed = status(&drivers.get(name).await.unwrap());
    assert!(observed.condition("AAvailable").is_none());
    assert!(observed.condition("BDegraded").is_some());
}

/// Another operator created the objects with plain writes (as OpenShift's Go operators do):
/// the applier takes its fields over, so what it set and we do not is removed instead of being
/// merged next to ours, and what a third manager owns stays.
/// A pass whose cache does not show its controller's last status write yet does not send the
/// same part again (the API server would change nothing and send no event); once the cache
/// shows it, or the part or the object changes, writes are planned as always.
#[tokio::test]
async fn a_status_part_is_not_sent_again_from_a_cache_that_does_not_show_it_yet() {
    let cluster = testkit::Cluster::start().await;
    let client = cluster.client_with_agent("operator");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &api::crds::cluster_csi_driver())
        .await
        .unwrap();
    let drivers: Api<ClusterCSIDriver> = Api::all(client.clone());
    let name = "pd.csi.storage.gke.io";
    let new_driver = || -> ClusterCSIDriver {
        serde_json::from_value(json!({
            "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
            "metadata": {"name": name}, "spec": {"managementState": "Managed"}
        }))
        .unwrap()
    };
    drivers
        .create(&PostParams::default(), &new_driver())
        .await
        .unwrap();
    let part = |message: &str| StatusPart {
        conditions: vec![condition("AAvailable", ConditionStatus::True, "R", message)],
        ..Default::default()
    };
    let writes = StatusWrites::default();
    let write = |part: StatusPart, observed: ClusterCSIDriver| {
        let (client, writes) = (client.clone(), &writes);
        async move {
            writes
                .apply::<ClusterCSIDriver>(&client, "a", name, &part, Some(&observed), &at(0))
                .await
                .unwrap()
        }
    };

    let stale = drivers.get(name).await.unwrap();
    assert!(write(part("fine"), stale.clone()).await);
    // The same part from the cache as it was before that write: not sent.
    cluster.clear_requests();
    assert!(!write(part("fine"), stale.clone()).await);
    assert_eq!(cluster.count_writes("operator"), 0);
    // From a cache that shows the write: nothing to send either.
    let fresh = drivers.get(name).await.unwrap();
    assert!(!write(part("fine"), fresh.clone()).await);
    assert_eq!(cluster.count_writes("operator"), 0);
    // Another part is sent, even from the stale cache, and then the first one again.
    assert!(write(part("changed"), stale.clone()).await);
    assert!(write(part("fine"), stale.clone()).await);
    // The object deleted and made again: its empty status (as the stale cache showed the old
    // one's, but of another UID) gets the part.
    drivers.delete(name, &Default::default()).await.unwrap();
    drivers
        .create(&PostParams::default(), &new_driver())
        .await
        .unwrap();
    let recreated = drivers.get(name).await.unwrap();
    assert!(write(part("fine"), recreated).await);
    let conditions = drivers.get(name).await.unwrap().status.unwrap().conditions;
    assert_eq!(conditions[0].message.as_deref(), Some("fine"));
}

#[tokio::test]
async fn adopting_takes_over_a_former_managers_fields() {
    use k8s_openapi::api::core::v1::Service;

    let cluster = testkit::Cluster::start().await;
    let former = cluster.client_with_agent("gcp-pd-csi-driver-operator");
    let services: Api<Service> = Api::namespaced(former.clone(), "default");
    let old: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "metrics", "namespace": "default", "labels": {"old": "1"}},
        "spec": {"ports": [
            {"name": "provisioner-m", "port": 443, "protocol": "TCP", "targetPort": "provisioner-m"},
            {"name": "attacher-m", "port": 444, "protocol": "TCP", "targetPort": "attacher-m"}],
            "selector": {"app": "controller"}}
    }))
    .unwrap();
    services.create(&PostParams::default(), &old).await.unwrap();
    // A third manager's label.
    Api::<Service>::namespaced(cluster.client_with_agent("someone-else"), "default")
        .patch(
            "metrics",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"other": "1"}}})),
        )
        .await
        .unwrap();
    let desired: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "metrics", "namespace": "default"},
        "spec": {"ports": [
            {"name": "provisioner-m", "port": 9202, "protocol": "TCP", "targetPort": "provisioner-m"},
            {"name": "attacher-m", "port": 9203, "protocol": "TCP", "targetPort": "attacher-m"}],
            "selector": {"app": "controller"}}
    }))
    .unwrap();
    let admin: Api<Service> = Api::namespaced(cluster.client(), "default");

    // To an applier that does not take over from that operator, the Service is someone
    // else's: nothing is sent, and the error names who made it.
    let plain = Applier::new(cluster.client_with_agent("operator"), "metrics");
    let observed = admin.get("metrics").await.unwrap();
    let error = plain.apply(&desired, Some(&observed)).await.unwrap_err();
    assert_eq!(error.category(), "not-ours", "{error}");
    assert!(
        error.to_string().starts_with(
            "Service default/metrics exists and was made by field manager gcp-pd-csi-driver-operator"
        ),
        "{error}"
    );
    let error = plain.apply(&desired, None).await.unwrap_err();
    assert_eq!(error.category(), "not-ours", "unseen too: {error}");
    assert_eq!(
        admin
            .get("metrics")
            .await
            .unwrap()
            .metadata
            .resource_version,
        observed.metadata.resource_version,
        "never written"
    );

    let applier = plain.adopting(&["gcp-pd-csi-driver-operator".to_owned()]);
    assert_eq!(
        applier.apply(&desired, Some(&observed)).await.unwrap(),
        Outcome::Adopted
    );
    let served = admin.get("metrics").await.unwrap();
    let ports: Vec<i32> = served
        .spec
        .as_ref()
        .unwrap()
        .ports
        .iter()
        .flatten()
        .map(|p| p.port)
        .collect();
    assert_eq!(ports, [9202, 9203]);
    let labels = served.metadata.labels.clone().unwrap();
    assert_eq!(
        labels.get("old"),
        None,
        "the former operator's label is gone"
    );
    assert_eq!(labels.get("other").map(String::as_str), Some("1"));
    let managers: Vec<String> = served
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| m.manager.clone().unwrap())
        .collect();
    assert!(
        !managers.iter().any(|m| m == "gcp-pd-csi-driver-operator"),
        "{managers:?}"
    );
    // Defaults the former operator had written are defaults again.
    assert_eq!(
        served.spec.as_ref().unwrap().session_affinity.as_deref(),
        Some("None")
    );

    // Then it is ours like any other object: nothing more to send.
    assert_eq!(
        applier.apply(&desired, Some(&served)).await.unwrap(),
        Outcome::Unchanged
    );
    // A stale observation fails the take-over instead of dropping unseen owners.
    services
        .patch(
            "metrics",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"again": "1"}}})),
        )
        .await
        .unwrap();
    let error = applier.apply(&desired, Some(&observed)).await.unwrap_err();
    assert_eq!(error.category(), "invalid", "{error}");
}

/// The former operator's object carries none of our labels, so a cache selecting by them has
/// not seen it: the applier reads it itself, takes it over, and its apply is not refused for
/// the ports it would otherwise merge with the former ones (same names, other numbers).
#[tokio::test]
async fn adopting_reads_an_object_the_cache_has_not_seen() {
    use k8s_openapi::api::core::v1::Service;

    let cluster = testkit::Cluster::start().await;
    let former = cluster.client_with_agent("vmware-vsphere-csi-driver-operator");
    let old: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "metrics", "namespace": "default"},
        "spec": {"ports": [
            {"name": "driver-m", "port": 443, "protocol": "TCP", "targetPort": "driver-m"}],
            "selector": {"app": "controller"}}
    }))
    .unwrap();
    Api::<Service>::namespaced(former, "default")
        .create(&PostParams::default(), &old)
        .await
        .unwrap();
    let desired: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "metrics", "namespace": "default", "labels": {"ours": "1"}},
        "spec": {"ports": [
            {"name": "driver-m", "port": 9201, "protocol": "TCP", "targetPort": "driver-m"}],
            "selector": {"app": "controller"}}
    }))
    .unwrap();
    let applier = Applier::new(cluster.client_with_agent("operator"), "metrics")
        .adopting(&["vmware-vsphere-csi-driver-operator".to_owned()]);
    assert_eq!(
        applier.apply(&desired, None).await.unwrap(),
        Outcome::Adopted
    );
    let served = Api::<Service>::namespaced(cluster.client(), "default")
        .get("metrics")
        .await
        .unwrap();
    let ports: Vec<i32> = served
        .spec
        .unwrap()
        .ports
        .into_iter()
        .flatten()
        .map(|p| p.port)
        .collect();
    assert_eq!(ports, [9201]);

    // An object that does not exist is simply created.
    let mut fresh = desired.clone();
    fresh.metadata.name = Some("fresh".to_owned());
    assert_eq!(applier.apply(&fresh, None).await.unwrap(), Outcome::Created);
}

/// An object of ours the cache has not seen yet (a cache behind our own write, or our label
/// removed by someone) is applied over: the create-only apply conflicts, the object is read and
/// found ours. The request log shows the sequence: apply, read, apply.
#[tokio::test]
async fn an_unseen_object_of_ours_is_read_and_applied_over() {
    let cluster = testkit::Cluster::start().await;
    let applier = Applier::new(cluster.client_with_agent("operator"), "controller");
    let desired = deployment(&["--v=2"]);
    assert_eq!(
        applier.apply(&desired, None).await.unwrap(),
        Outcome::Created
    );
    let changed = deployment(&["--v=4"]);
    assert_eq!(
        applier.apply(&changed, None).await.unwrap(),
        Outcome::Updated
    );
    let served = Api::<Deployment>::namespaced(cluster.client(), "default")
        .get("driver")
        .await
        .unwrap();
    let args = served.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert_eq!(args, ["--v=4"]);
}

/// `delete_observed` removes the object the decision read and no other: not one deleted and
/// made again under the name (another uid), nor one changed since it was read when the
/// decision read its content (another resourceVersion). Each is a 409 Conflict for the caller
/// to report; the object is still there.
#[tokio::test]
async fn a_delete_removes_only_the_object_that_was_read() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::DeleteParams;

    let cluster = testkit::Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let make = async |value: &str| {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x", "namespace": "default"},
                "data": {"v": value}}))
            .unwrap(),
        )
        .await
        .unwrap()
    };
    let read = make("ours").await;
    // Replaced between observation and deletion: someone else's now, same name.
    api.delete("x", &DeleteParams::default()).await.unwrap();
    let theirs = make("theirs").await;
    let params = DeleteParams::background();
    for content_read in [false, true] {
        let error = opkit::apply::delete_observed(&api, &read.metadata, content_read, &params)
            .await
            .unwrap_err();
        assert_eq!(opkit::apply::category(&error), "conflict", "{error}");
    }
    assert_eq!(
        api.get("x").await.unwrap().metadata.uid,
        theirs.metadata.uid
    );

    // Changed since it was read: refused when the decision read its content.
    let changed = api
        .patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "changed"}})),
        )
        .await
        .unwrap();
    let error = opkit::apply::delete_observed(&api, &theirs.metadata, true, &params)
        .await
        .unwrap_err();
    assert_eq!(opkit::apply::category(&error), "conflict", "{error}");
    assert!(api.get_opt("x").await.unwrap().is_some());
    // As read: deleted; and gone is no error.
    assert!(
        opkit::apply::delete_observed(&api, &changed.metadata, true, &params)
            .await
            .unwrap()
    );
    assert!(
        !opkit::apply::delete_observed(&api, &changed.metadata, true, &params)
            .await
            .unwrap()
    );
}

/// One object of every kind our writers write, minimal but valid, named `x` (in `default`
/// where namespaced), with a label `app: x`.
fn one_of_each_kind() -> Vec<(kube::api::ApiResource, serde_json::Value)> {
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use k8s_openapi::api::storage::v1::CSIDriver;
    use kube::api::ApiResource;
    let meta = |namespaced: bool| {
        let mut m = json!({"name": "x", "labels": {"app": "x"}});
        if namespaced {
            m["namespace"] = json!("default");
        }
        m
    };
    let template = json!({"metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]}});
    let subjects = json!([{"kind": "ServiceAccount", "name": "x", "namespace": "default"}]);
    vec![
        (
            ApiResource::erase::<ServiceAccount>(&()),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(true),
                "automountServiceAccountToken": false}),
        ),
        (
            ApiResource::erase::<ConfigMap>(&()),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(true), "data": {"a": "b"}}),
        ),
        (
            ApiResource::erase::<Secret>(&()),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(true), "data": {"a": "Yg=="}}),
        ),
        (
            ApiResource::erase::<Service>(&()),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(true),
                "spec": {"selector": {"app": "x"}, "ports": [{"name": "m", "port": 443, "protocol": "TCP"}]}}),
        ),
        (
            ApiResource::erase::<Role>(&()),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(true),
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        ),
        (
            ApiResource::erase::<RoleBinding>(&()),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(true),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"},
                "subjects": subjects}),
        ),
        (
            ApiResource::erase::<ClusterRole>(&()),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(false),
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        ),
        (
            ApiResource::erase::<ClusterRoleBinding>(&()),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(false),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"},
                "subjects": subjects}),
        ),
        (
            ApiResource::erase::<Deployment>(&()),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(true),
                "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}}),
        ),
        (
            ApiResource::erase::<DaemonSet>(&()),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta(true),
                "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}}),
        ),
        (
            ApiResource::erase::<PodDisruptionBudget>(&()),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(true),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}}}),
        ),
        (
            ApiResource::erase::<NetworkPolicy>(&()),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(true),
                "spec": {"podSelector": {"matchLabels": {"app": "x"}}, "policyTypes": ["Ingress"]}}),
        ),
        (
            ApiResource::erase::<CSIDriver>(&()),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": meta(false),
                "spec": {"attachRequired": false}}),
        ),
        (
            ApiResource::erase::<StorageClass>(&()),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta(false),
                "provisioner": "x.example.com"}),
        ),
    ]
}

/// The ownership rule on every kind our writers write, crossed with every state an object of
/// the wanted name can be in, through the applier and the delete every writer uses:
/// - absent: created;
/// - ours (applied by us): applied over, and may be deleted;
/// - the replaced operator's (its field manager): taken over (`Adopted`), and may be deleted;
/// - a labelled copy of ours (`kubectl get -o yaml` created again) and another installer's:
///   refused (`not-ours`, nothing written, seen or unseen), and never to be deleted;
/// - ours, replaced by someone else's between observation and deletion: the delete of what was
///   observed is refused (409) and theirs stays.
#[tokio::test]
async fn every_kind_in_every_state_of_ownership() {
    use kube::api::{DeleteParams, DynamicObject};
    use opkit::ownership::{Owner, may_delete, owner};

    let former = "gcp-pd-csi-driver-operator".to_owned();
    let formers = std::slice::from_ref(&former);
    for (resource, desired) in one_of_each_kind() {
        let kind = resource.kind.clone();
        let namespaced = desired["metadata"]["namespace"].is_string();
        let cluster = testkit::Cluster::start().await;
        let api_of = |client: kube::Client| -> Api<DynamicObject> {
            if namespaced {
                Api::namespaced_with(client, "default", &resource)
            } else {
                Api::all_with(client, &resource)
            }
        };
        let admin = api_of(cluster.client());
        let wanted: DynamicObject = serde_json::from_value(desired.clone()).unwrap();
        let applier =
            Applier::new(cluster.client_with_agent("operator"), "table").adopting(formers);
        let params = DeleteParams::background();

        // Absent: created. Ours: applied over (nothing to change), and ours to delete.
        let outcome = applier.apply_dynamic(&resource, &wanted, None).await;
        assert_eq!(outcome.unwrap(), Outcome::Created, "{kind} absent");
        let ours = admin.get("x").await.unwrap();
        assert_eq!(owner(&ours.metadata, &[]), Owner::Us, "{kind}");
        let outcome = applier.apply_dynamic(&resource, &wanted, Some(&ours)).await;
        assert_eq!(outcome.unwrap(), Outcome::Unchanged, "{kind} ours");
        assert!(may_delete(&ours.metadata, &[]), "{kind}");

        // Replaced between observation and deletion: someone else's now, and it stays.
        admin.delete("x", &DeleteParams::default()).await.unwrap();
        let someone = api_of(cluster.client_with_agent("helm"));
        let mut theirs: DynamicObject = serde_json::from_value(desired.clone()).unwrap();
        theirs.metadata.labels = None;
        let theirs = someone
            .create(&PostParams::default(), &theirs)
            .await
            .unwrap();
        let error = opkit::apply::delete_observed(&admin, &ours.metadata, true, &params)
            .await
            .unwrap_err();
        assert_eq!(
            opkit::apply::category(&error),
            "conflict",
            "{kind} replaced"
        );
        assert_eq!(
            admin.get("x").await.unwrap().metadata.uid,
            theirs.metadata.uid
        );

        // Another installer's: refused, seen or unseen, nothing written; never to be deleted.
        for observed in [Some(&theirs), None] {
            let error = applier
                .apply_dynamic(&resource, &wanted, observed)
                .await
                .unwrap_err();
            assert_eq!(
                error.category(),
                "not-ours",
                "{kind} someone else's: {error}"
            );
        }
        let now = admin.get("x").await.unwrap();
        assert_eq!(
            now.metadata.resource_version, theirs.metadata.resource_version,
            "{kind}"
        );
        assert!(!may_delete(&now.metadata, formers), "{kind}");

        // A labelled copy of ours: the same.
        admin.delete("x", &DeleteParams::default()).await.unwrap();
        let copy = testkit::copy_of(&serde_json::to_value(&ours).unwrap(), "x");
        let copy: DynamicObject = serde_json::from_value(copy).unwrap();
        let copy = api_of(cluster.client_with_agent("kubectl-create"))
            .create(&PostParams::default(), &copy)
            .await
            .unwrap();
        assert_eq!(
            owner(&copy.metadata, formers),
            Owner::Someone,
            "{kind} copy"
        );
        for observed in [Some(&copy), None] {
            let error = applier
                .apply_dynamic(&resource, &wanted, observed)
                .await
                .unwrap_err();
            assert_eq!(error.category(), "not-ours", "{kind} copy: {error}");
        }
        let now = admin.get("x").await.unwrap();
        assert_eq!(
            now.metadata.resource_version, copy.metadata.resource_version,
            "{kind}"
        );

        // The replaced operator's: taken over, and its to delete.
        admin.delete("x", &DeleteParams::default()).await.unwrap();
        let mut old: DynamicObject = serde_json::from_value(desired.clone()).unwrap();
        old.metadata.labels = None;
        let old = api_of(cluster.client_with_agent(&former))
            .create(&PostParams::default(), &old)
            .await
            .unwrap();
        assert!(may_delete(&old.metadata, formers), "{kind}");
        let outcome = applier.apply_dynamic(&resource, &wanted, None).await;
        assert_eq!(
            outcome.unwrap(),
            Outcome::Adopted,
            "{kind} the replaced operator's"
        );
        let adopted = admin.get("x").await.unwrap();
        assert_eq!(owner(&adopted.metadata, &[]), Owner::Us, "{kind} adopted");
        assert!(
            opkit::apply::delete_observed(&admin, &adopted.metadata, true, &params)
                .await
                .unwrap(),
            "{kind}: ours to delete, as read"
        );
    }
}
