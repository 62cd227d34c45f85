//! The pure plan of the driver operator (`driver_operator::plan`) with the gcp-pd table: what each
//! management and StorageClass state does, status from observed workloads, time-based rules.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::sync::Arc;
use std::time::Duration;

use api::operator_v1::{ClusterCSIDriver, ConditionStatus};
use csi_kit::render::Operand;
use driver_operator::controllers::Group;
use driver_operator::observe::{Apis, Observed};
use driver_operator::plan::{self, DeleteKind, Plan};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

fn def() -> csi_kit::DriverDef {
    drivers::by_name("gcp-pd").unwrap()
}

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
}

fn driver(spec: Value) -> ClusterCSIDriver {
    serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": "pd.csi.storage.gke.io", "generation": 3}, "spec": spec
    }))
    .unwrap()
}

fn openshift(spec: Value) -> Observed {
    Observed {
        apis: Apis {
            infrastructure: true,
            proxy: true,
            api_server: true,
            cloud_credential: true,
        },
        cluster_csi_driver: Some(driver(spec)),
            cluster: driver_operator::observe::ObservedCluster {
                infrastructure: Some(
                    serde_json::from_value(json!({
                        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
                        "metadata": {"name": "cluster"}, "spec": {},
                        "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                                   "platformStatus": {"type": "GCP", "gcp": {"projectID": "p", "region": "europe-west4"}}}
                    }))
                    .unwrap(),
                ),
                ..Default::default()
            },
        ..Observed::default()
    }
}

fn run(observed: &Observed, now: &Time) -> Plan {
    plan::plan(&def(), &Default::default(), observed, now)
}

fn conditions(plan: &Plan) -> Vec<(String, ConditionStatus, String)> {
    plan.status
        .iter()
        .flat_map(|p| p.part.conditions.iter())
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.message.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn status_of(plan: &Plan, type_: &str) -> ConditionStatus {
    conditions(plan)
        .into_iter()
        .find(|c| c.0 == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", conditions(plan)))
        .1
}

fn has_step(plan: &Plan, kind: &str) -> bool {
    plan.steps
        .iter()
        .any(|s| s.operand.to_value()["kind"] == kind)
}

#[test]
fn nothing_happens_without_a_cluster_csi_driver() {
    let observed = Observed {
        cluster_csi_driver: None,
        ..openshift(json!({"managementState": "Managed"}))
    };
    let plan = run(&observed, &at(0));
    assert!(plan.waiting.is_some());
    assert!(plan.steps.is_empty() && plan.status.is_empty());
}

#[test]
fn managed_applies_every_operand_and_reports_every_controller() {
    let plan = run(&openshift(json!({"managementState": "Managed"})), &at(0));
    for kind in [
        "Deployment",
        "DaemonSet",
        "CSIDriver",
        "StorageClass",
        "ClusterRole",
    ] {
        assert!(has_step(&plan, kind), "no {kind}");
    }
    let deployment = plan
        .steps
        .iter()
        .find(|s| matches!(s.operand, Operand::Deployment(_)))
        .unwrap();
    assert_eq!(deployment.group, Group::ControllerService);
    let controllers: Vec<&str> = plan.status.iter().map(|p| p.controller.as_str()).collect();
    assert_eq!(
        controllers,
        [
            "ManagementState",
            "ConfigObserver",
            "GCPPDDriverStaticResourcesController",
            "GCPPDDriverControllerServiceController",
            "GCPPDDriverNodeServiceController",
            "StorageClassController",
            "GCPPDDriverServiceMonitorController",
            "GCPPDStuckClaimsController",
        ]
    );
    // No claim is Pending: none is reported stuck.
    assert_eq!(status_of(&plan, "GCPPDStuckClaims"), ConditionStatus::False);
    // Nothing observed yet: waiting for the workloads, not degraded.
    assert_eq!(
        status_of(&plan, "GCPPDDriverControllerServiceControllerAvailable"),
        ConditionStatus::False
    );
    assert_eq!(
        status_of(&plan, "GCPPDDriverControllerServiceControllerDegraded"),
        ConditionStatus::False
    );
    assert_eq!(plan.status[0].part.observed_generation, Some(3));
    // gcp-pd is not removable: no finalizer.
    assert_eq!(plan.finalizers, None);
}

#[test]
fn a_missing_infrastructure_degrades_the_static_controller_and_applies_nothing() {
    let mut observed = openshift(json!({"managementState": "Managed"}));
    observed.cluster.infrastructure = None;
    let plan = run(&observed, &at(0));
    assert!(plan.steps.is_empty());
    assert_eq!(
        status_of(&plan, "GCPPDDriverStaticResourcesControllerDegraded"),
        ConditionStatus::True
    );
}

#[test]
fn unmanaged_and_refused_removal_write_only_the_management_condition() {
    let plan = run(&openshift(json!({"managementState": "Unmanaged"})), &at(0));
    assert!(plan.steps.is_empty() && plan.deletions.is_empty());
    assert_eq!(plan.status.len(), 1);
    let c = &plan.status[0].part.conditions[0];
    assert_eq!(
        (c.status.clone(), c.reason.as_deref()),
        (ConditionStatus::False, Some("Unmanaged"))
    );

    let plan = run(&openshift(json!({"managementState": "Removed"})), &at(0));
    assert!(plan.steps.is_empty() && plan.deletions.is_empty());
    assert_eq!(
        status_of(&plan, "ManagementStateDegraded"),
        ConditionStatus::True
    );
}

#[test]
fn removed_on_a_removable_driver_deletes_workloads_and_releases_finalizers() {
    let mut def = def();
    def.removable = true;
    let mut observed = openshift(json!({"managementState": "Removed"}));
    let finalizers = plan::finalizers(&def);
    observed
        .cluster_csi_driver
        .as_mut()
        .unwrap()
        .metadata
        .finalizers = Some(vec![finalizers[0].clone(), "someone.else/keep".into()]);
    let deployment = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": name, "namespace": "openshift-cluster-csi-drivers",
            "labels": {"csi.storage.openshift.io/driver": "gcp-pd"}}})
    };
    // Ours (applied by the operator), and a copy with our label that someone created.
    observed.operands.deployments = vec![
        Arc::new(
            serde_json::from_value(testkit::as_applied_by(
                deployment("gcp-pd-csi-driver-controller"),
                "storage-operator/GCPPDDriverControllerServiceController",
            ))
            .unwrap(),
        ),
        Arc::new(serde_json::from_value(deployment("gcp-pd-csi-driver-controller-copy")).unwrap()),
    ];
    let plan = plan::plan(&def, &Default::default(), &observed, &at(0));
    assert_eq!(plan.deletions.len(), 1, "{:?}", plan.deletions);
    assert_eq!(plan.deletions[0].kind, DeleteKind::Deployment);
    assert_eq!(plan.deletions[0].name, "gcp-pd-csi-driver-controller");
    assert_eq!(
        plan.finalizers, None,
        "the finalizers stay until what they guard is gone"
    );

    // Being deleted (by an earlier pass): not deleted again, and the finalizers still stay.
    let mut deleting = observed.clone();
    let mut ours = (*deleting.operands.deployments[0]).clone();
    ours.metadata.deletion_timestamp = Some(at(0));
    deleting.operands.deployments[0] = Arc::new(ours);
    let plan = plan::plan(&def, &Default::default(), &deleting, &at(0));
    assert!(plan.deletions.is_empty(), "{:?}", plan.deletions);
    assert_eq!(plan.finalizers, None);

    // Gone: the finalizers come off (someone else's stays).
    observed.operands.deployments.remove(0);
    let plan = plan::plan(&def, &Default::default(), &observed, &at(0));
    assert!(plan.deletions.is_empty(), "{:?}", plan.deletions);
    assert_eq!(plan.finalizers, Some(vec!["someone.else/keep".to_owned()]));

    // Managed puts both finalizers on, qualified.
    let observed = openshift(json!({"managementState": "Managed"}));
    let plan = plan::plan(&def, &Default::default(), &observed, &at(0));
    let set = plan.finalizers.unwrap();
    assert_eq!(set.len(), 2);
    assert!(
        set.iter()
            .all(|f| f.starts_with("csi.storage.openshift.io/"))
    );
}

#[test]
fn an_unknown_storage_class_state_degrades_and_touches_no_class() {
    let mut observed = openshift(json!({"managementState": "Managed"}));
    observed
        .cluster_csi_driver
        .as_mut()
        .unwrap()
        .spec
        .storage_class_state = Some(api::operator_v1::StorageClassStateName::from("Sideways"));
    let plan = run(&observed, &at(0));
    assert!(!has_step(&plan, "StorageClass"));
    assert!(plan.deletions.is_empty());
    let message = conditions(&plan)
        .into_iter()
        .find(|c| c.0 == "StorageClassControllerDegraded")
        .unwrap();
    assert_eq!(message.1, ConditionStatus::True);
    assert!(message.2.contains("Sideways"), "{}", message.2);
}

#[test]
fn storage_class_state_removed_deletes_only_classes_we_created() {
    let mut observed =
        openshift(json!({"managementState": "Managed", "storageClassState": "Removed"}));
    // `labelled`: our operand label; `applied`: the operator applied it (our field manager).
    let class = |name: &str, labelled: bool, applied: bool| -> Arc<StorageClass> {
        let labels = if labelled {
            json!({"csi.storage.openshift.io/driver": "gcp-pd"})
        } else {
            json!({})
        };
        let object = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "labels": labels}, "provisioner": "x"});
        let object = if applied {
            testkit::as_applied_by(object, "storage-operator/StorageClassController")
        } else {
            object
        };
        Arc::new(serde_json::from_value(object).unwrap())
    };
    observed.operands.storage_classes = vec![
        class("standard-csi", true, true),
        class("ssd-csi", false, false),
    ];
    let plan = run(&observed, &at(0));
    assert!(!has_step(&plan, "StorageClass"));
    let deleted: Vec<&str> = plan.deletions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(deleted, ["standard-csi"]);

    // A class of that name with our label that someone else created (labels copied from
    // ours) is not ours: it stays.
    observed.operands.storage_classes = vec![class("standard-csi", true, false)];
    let plan = run(&observed, &at(0));
    assert!(plan.deletions.is_empty(), "{:?}", plan.deletions);
}

#[test]
fn a_csi_driver_with_another_spec_is_recreated() {
    let mut observed = openshift(json!({"managementState": "Managed"}));
    let plan = run(&observed, &at(0));
    let Operand::CSIDriver(desired) = &plan
        .steps
        .iter()
        .find(|s| matches!(s.operand, Operand::CSIDriver(_)))
        .unwrap()
        .operand
    else {
        unreachable!()
    };
    observed.operands.csi_driver = Some(desired.clone());
    // Created with no field anyone set, and the same spec: applied over.
    let same = run(&observed, &at(0));
    assert!(same.steps.iter().all(|s| !s.recreate));
    assert!(
        same.steps
            .iter()
            .any(|s| matches!(s.operand, Operand::CSIDriver(_))),
        "{:?}",
        same.steps
    );
    // Ours (applied by the operator) with another immutable spec: replaced.
    let mut other: CSIDriver = desired.clone();
    other.spec.attach_required = Some(false);
    let applied = |csi: &CSIDriver, manager: &str| -> CSIDriver {
        let mut value = serde_json::to_value(csi).unwrap();
        value["apiVersion"] = "storage.k8s.io/v1".into();
        serde_json::from_value(testkit::as_applied_by(value, manager)).unwrap()
    };
    let csi_step = |plan: &Plan| {
        plan.steps
            .iter()
            .find(|s| matches!(s.operand, Operand::CSIDriver(_)))
            .cloned()
    };
    observed.operands.csi_driver = Some(applied(
        &other,
        "storage-operator/GCPPDDriverStaticResourcesController",
    ));
    let changed = run(&observed, &at(0));
    assert!(csi_step(&changed).is_some_and(|s| s.recreate));
    // OpenShift's operator's (its field manager): replaced too, taking it over is the point.
    let mut former = serde_json::to_value(&other).unwrap();
    former["metadata"]["managedFields"] = json!([{"manager": "gcp-pd-csi-driver-operator",
        "operation": "Update", "apiVersion": "storage.k8s.io/v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:attachRequired": {}}}}]);
    observed.operands.csi_driver = Some(serde_json::from_value(former).unwrap());
    let changed = run(&observed, &at(0));
    assert!(csi_step(&changed).is_some_and(|s| s.recreate));
    // Created with no field anyone set: applied over if it could be, never deleted; so kept,
    // and said in the static resources controller's Degraded.
    observed.operands.csi_driver = Some(other.clone());
    let kept = run(&observed, &at(0));
    assert!(csi_step(&kept).is_none(), "{:?}", kept.steps);
    assert!(kept.deletions.is_empty());
    let degraded = kept
        .status
        .iter()
        .flat_map(|s| &s.part.conditions)
        .find(|c| c.type_ == "GCPPDDriverStaticResourcesControllerDegraded")
        .unwrap();
    assert_eq!(degraded.status, ConditionStatus::True);
    assert_eq!(degraded.reason.as_deref(), Some("ObjectNotOurs"));
    assert!(
        degraded
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("attachRequired"),
        "{degraded:?}"
    );
}

/// A CSIDriver of the driver's name that another installer made (a Helm chart here) blocks the
/// whole driver: nothing is applied or deleted, and status names the installer and the fix.
#[test]
fn another_installers_csi_driver_blocks_the_driver() {
    let mut observed = openshift(json!({"managementState": "Managed"}));
    let helm: CSIDriver = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": "pd.csi.storage.gke.io",
            // A copy of our label proves nothing.
            "labels": {"csi.storage.openshift.io/driver": "gcp-pd", "helm.sh/chart": "gcp-pd-1.0.0"},
            "annotations": {"meta.helm.sh/release-name": "pd", "meta.helm.sh/release-namespace": "kube-system"},
            "managedFields": [{"manager": "helm", "operation": "Update", "apiVersion": "storage.k8s.io/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"attachRequired": true}
    }))
    .unwrap();
    observed.operands.csi_driver = Some(helm);
    let plan = run(&observed, &at(0));
    assert!(plan.steps.is_empty(), "{:?}", plan.steps);
    assert!(plan.deletions.is_empty(), "{:?}", plan.deletions);
    let find = |type_: &str| {
        plan.status
            .iter()
            .flat_map(|s| &s.part.conditions)
            .find(|c| c.type_ == type_)
            .cloned()
            .unwrap_or_else(|| panic!("no {type_}"))
    };
    let degraded = find("GCPPDDriverStaticResourcesControllerDegraded");
    assert_eq!(degraded.status, ConditionStatus::True);
    assert_eq!(degraded.reason.as_deref(), Some("ObjectNotOurs"));
    let message = degraded.message.unwrap_or_default();
    assert!(
        message.contains("Helm release pd in namespace kube-system, chart gcp-pd-1.0.0")
            && message.contains("helm uninstall pd --namespace kube-system"),
        "{message}"
    );
    let available = find("GCPPDDriverControllerServiceControllerAvailable");
    assert_eq!(available.status, ConditionStatus::False);
    assert_eq!(available.reason.as_deref(), Some("ObjectNotOurs"));
}

fn progressing_deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "gcp-pd-csi-driver-controller", "namespace": "openshift-cluster-csi-drivers", "generation": 2},
        "spec": {"replicas": 2, "selector": {}, "template": {}},
        "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 0, "availableReplicas": 0, "unavailableReplicas": 2}
    }))
    .unwrap()
}

#[test]
fn progressing_requeues_for_the_deadline_and_degrades_after_fifteen_minutes() {
    let mut observed = openshift(json!({"managementState": "Managed"}));
    observed.operands.deployments = vec![Arc::new(progressing_deployment())];
    let plan = run(&observed, &at(0));
    assert_eq!(
        status_of(&plan, "GCPPDDriverControllerServiceControllerProgressing"),
        ConditionStatus::True
    );
    assert_eq!(plan.requeue, Some(Duration::from_secs(15 * 60 + 1)));

    // Written as Progressing at t=0; at t=10 min the deadline is 5 minutes away.
    let driver = observed.cluster_csi_driver.as_mut().unwrap();
    driver.status = Some(
        serde_json::from_value(json!({"conditions": [{
            "type": "GCPPDDriverControllerServiceControllerProgressing", "status": "True",
            "lastTransitionTime": at(0), "reason": "Deploying", "message": ""}]}))
        .unwrap(),
    );
    let plan = run(&observed, &at(600));
    assert_eq!(plan.requeue, Some(Duration::from_secs(5 * 60 + 1)));
    assert_eq!(
        status_of(&plan, "GCPPDDriverControllerServiceControllerDegraded"),
        ConditionStatus::False
    );
    let plan = run(&observed, &at(16 * 60));
    assert_eq!(
        status_of(&plan, "GCPPDDriverControllerServiceControllerDegraded"),
        ConditionStatus::True
    );
    assert_eq!(plan.requeue, None);
}

/// The desired DaemonSet as the server would hold it after our apply at `generation`, with its
/// rollout finished.
fn rolled_out(desired: &DaemonSet, generation: i64) -> DaemonSet {
    let body = match opkit::apply::plan(&serde_json::to_value(desired).unwrap(), None) {
        opkit::apply::Plan::Apply(body, _) => body,
        opkit::apply::Plan::Skip => unreachable!(),
    };
    let mut ds: DaemonSet = serde_json::from_value(body).unwrap();
    ds.metadata.generation = Some(generation);
    ds.status = Some(
        serde_json::from_value(
            json!({"observedGeneration": generation, "desiredNumberScheduled": 3,
            "currentNumberScheduled": 3, "numberMisscheduled": 0, "numberReady": 3,
            "updatedNumberScheduled": 3, "numberAvailable": 3}),
        )
        .unwrap(),
    );
    ds
}

#[test]
fn the_stable_generation_is_the_one_its_own_write_produces() {
    let observed = openshift(json!({"managementState": "Managed"}));
    let plan = run(&observed, &at(0));
    let desired = &daemon_sets(&plan)[0];
    let key = csi_kit::status::STABLE_GENERATION_ANNOTATION;
    // Rolled out at 1, nothing else to change: the annotation-only write makes generation 2.
    let observed_ds = rolled_out(desired, 1);
    let next = plan::with_stable_generation(desired.clone(), Some(&observed_ds));
    assert_eq!(next.metadata.annotations.as_ref().unwrap()[key], "2");
    // Once carried at the current generation it stays, and the object is unchanged.
    let stable = rolled_out(&next, 2);
    let again = plan::with_stable_generation(desired.clone(), Some(&stable));
    assert_eq!(again.metadata.annotations.as_ref().unwrap()[key], "2");
    assert_eq!(
        opkit::apply::plan(
            &serde_json::to_value(&again).unwrap(),
            Some(&serde_json::to_value(&stable).unwrap())
        ),
        opkit::apply::Plan::Skip
    );
    // A real change (a new image) keeps the carried value: that rollout is not finished.
    let mut changed = desired.clone();
    changed
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("example.com/pd:2".into());
    let during = plan::with_stable_generation(changed, Some(&stable));
    assert_eq!(during.metadata.annotations.as_ref().unwrap()[key], "2");
}

fn proxy_args(plan: &Plan) -> Vec<String> {
    let deployment = plan
        .steps
        .iter()
        .find_map(|s| match &s.operand {
            Operand::Deployment(d) => Some(d),
            _ => None,
        })
        .unwrap();
    let spec = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let proxy = spec
        .containers
        .iter()
        .find(|c| c.image.as_deref().is_some_and(|i| i.contains("rbac-proxy")))
        .unwrap();
    proxy
        .args
        .iter()
        .flatten()
        .filter(|a| a.starts_with("--tls-"))
        .filter(|a| !a.contains("file"))
        .cloned()
        .collect()
}

#[test]
fn the_config_observer_follows_the_tls_profile_and_the_proxy() {
    let mut observed = openshift(json!({"managementState": "Managed"}));
    observed.cluster.api_server = Some(
        serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
            "metadata": {"name": "cluster"}, "spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}}))
        .unwrap(),
    );
    observed.cluster.proxy = Some(
        serde_json::from_value(json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
            "metadata": {"name": "cluster"}, "spec": {}, "status": {"httpsProxy": "http://proxy:3128"}}))
        .unwrap(),
    );
    let plan = run(&observed, &at(0));
    let written = plan
        .observed_config
        .clone()
        .expect("observedConfig to write");
    assert_eq!(
        written,
        json!({"targetcsiconfig": {
            "servingInfo": {"minTLSVersion": "VersionTLS13",
                            "cipherSuites": ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]},
            "proxy": {"HTTPS_PROXY": "http://proxy:3128"}}})
    );
    // The proxies follow the profile in the same pass, without waiting for the round trip.
    assert!(
        proxy_args(&plan).contains(&"--tls-min-version=VersionTLS13".to_owned()),
        "{:?}",
        proxy_args(&plan)
    );
    assert_eq!(
        status_of(&plan, "ConfigObservationDegraded"),
        ConditionStatus::False
    );

    // Once written, nothing more to write; another key in observedConfig is not ours.
    let mut config = written;
    config["someoneElse"] = json!({"x": 1});
    observed
        .cluster_csi_driver
        .as_mut()
        .unwrap()
        .spec
        .operator
        .observed_config = Some(config.clone());
    assert_eq!(run(&observed, &at(1)).observed_config, None);

    // An impossible Custom profile keeps the last good servingInfo and says why.
    observed.cluster.api_server.as_mut().unwrap().spec.tls_security_profile = Some(
        serde_json::from_value(json!({"type": "Custom", "custom": {"ciphers": ["DHE-RSA-AES128-GCM-SHA256"], "minTLSVersion": "VersionTLS12"}}))
            .unwrap(),
    );
    let plan = run(&observed, &at(2));
    assert_eq!(plan.observed_config, None, "the last good config stays");
    assert_eq!(
        status_of(&plan, "ConfigObservationDegraded"),
        ConditionStatus::True
    );
    let (_, _, message) = conditions(&plan)
        .into_iter()
        .find(|(t, _, _)| t == "ConfigObservationDegraded")
        .unwrap();
    assert!(message.contains("custom.ciphers"), "{message}");
    assert!(proxy_args(&plan).contains(&"--tls-min-version=VersionTLS13".to_owned()));

    // The proxy goes away: its key is removed, the rest stays.
    observed.cluster.proxy = None;
    observed
        .cluster
        .api_server
        .as_mut()
        .unwrap()
        .spec
        .tls_security_profile = None;
    let plan = run(&observed, &at(3));
    let patch = plan.observed_config.unwrap();
    assert_eq!(patch["targetcsiconfig"]["proxy"], Value::Null);
    assert_eq!(
        patch["targetcsiconfig"]["servingInfo"]["minTLSVersion"],
        "VersionTLS12"
    );
    assert!(patch.get("someoneElse").is_none());
}

#[test]
fn without_openshift_config_apis_nothing_is_observed() {
    let mut observed = openshift(json!({"managementState": "Managed"}));
    observed.apis.api_server = false;
    observed.apis.proxy = false;
    let plan = run(&observed, &at(0));
    assert_eq!(plan.observed_config, None);
    assert_eq!(
        status_of(&plan, "ConfigObservationDegraded"),
        ConditionStatus::False
    );
}

fn with_credentials_request_api(observed: &mut Observed, cached: Option<Value>) {
    use csi_kit::inputs::OptionalKind;
    use driver_operator::observe::OptionalObjects;
    let objects = cached
        .map(|v| {
            vec![Arc::new(
                serde_json::from_value::<kube::api::DynamicObject>(v).unwrap(),
            )]
        })
        .unwrap_or_default();
    observed.operands.optional.insert(
        OptionalKind::CredentialsRequest,
        OptionalObjects {
            crd: true,
            objects: Some(objects),
        },
    );
}

fn reason_of(plan: &Plan, type_: &str) -> String {
    plan.status
        .iter()
        .flat_map(|p| p.part.conditions.iter())
        .find(|c| c.type_ == type_)
        .and_then(|c| c.reason.clone())
        .unwrap_or_else(|| panic!("no {type_}"))
}

#[test]
fn the_credentials_request_is_reported_until_provisioned_and_skipped_in_manual_mode() {
    const AVAILABLE: &str = "GCPPDCredentialsRequestControllerAvailable";
    const PROGRESSING: &str = "GCPPDCredentialsRequestControllerProgressing";
    let mut observed = openshift(json!({"managementState": "Managed"}));
    let name = def().credentials.unwrap().credentials_request.unwrap().name;
    let request = |provisioned: bool| {
        json!({"apiVersion": "cloudcredential.openshift.io/v1", "kind": "CredentialsRequest",
               "metadata": {"name": name, "namespace": "openshift-cloud-credential-operator"},
               "spec": {}, "status": {"provisioned": provisioned}})
    };

    // Without the API: nothing to report.
    let plan = run(&observed, &at(0));
    assert!(!conditions(&plan).iter().any(|c| c.0 == AVAILABLE));

    with_credentials_request_api(&mut observed, Some(request(false)));
    let plan = run(&observed, &at(0));
    assert!(has_step(&plan, "CredentialsRequest"));
    assert_eq!(status_of(&plan, AVAILABLE), ConditionStatus::False);
    assert_eq!(status_of(&plan, PROGRESSING), ConditionStatus::True);
    assert_eq!(reason_of(&plan, AVAILABLE), "CredentialsNotProvisionedYet");

    with_credentials_request_api(&mut observed, Some(request(true)));
    let plan = run(&observed, &at(0));
    assert_eq!(status_of(&plan, AVAILABLE), ConditionStatus::True);
    assert_eq!(status_of(&plan, PROGRESSING), ConditionStatus::False);

    // Manual mode: nobody would provision it, so it is not applied, and that is fine.
    observed.cluster.credentials_mode = Some("Manual".into());
    let plan = run(&observed, &at(0));
    assert!(!has_step(&plan, "CredentialsRequest"));
    assert_eq!(status_of(&plan, AVAILABLE), ConditionStatus::True);
    assert_eq!(reason_of(&plan, AVAILABLE), "CredentialsDisabled");

    // Manual with GCP Workload Identity settings: applied.
    let env = [
        ("POOL_ID", "pool"),
        ("PROVIDER_ID", "provider"),
        ("SERVICE_ACCOUNT_EMAIL", "sa@p.iam.gserviceaccount.com"),
        ("PROJECT_NUMBER", "123"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let plan = plan::plan(&def(), &env, &observed, &at(0));
    assert!(has_step(&plan, "CredentialsRequest"));
}

/// The names of the CredentialsRequests a plan applies.
fn credentials_requests(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|s| s.operand.to_value())
        .filter(|v| v["kind"] == "CredentialsRequest")
        .map(|v| v["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_node_credentials_request_has_its_own_controller_and_its_own_role() {
    const NODE_AVAILABLE: &str = "GCPPDNodeCredentialsRequestControllerAvailable";
    const AVAILABLE: &str = "GCPPDCredentialsRequestControllerAvailable";
    let mut def = def();
    let mut node = def.credentials.clone().unwrap();
    node.secret_name = "node-creds".to_owned();
    let request = node.credentials_request.as_mut().unwrap();
    request.name = "node-request".to_owned();
    request.annotations = [(
        "credentials.openshift.io/role-arns-vars".to_owned(),
        "NODE_ROLEARN".to_owned(),
    )]
    .into();
    def.node_credentials = Some(node);
    let controller_request = def
        .credentials
        .clone()
        .unwrap()
        .credentials_request
        .unwrap()
        .name;
    let mut observed = openshift(json!({"managementState": "Managed"}));
    with_credentials_request_api(
        &mut observed,
        Some(
            json!({"apiVersion": "cloudcredential.openshift.io/v1", "kind": "CredentialsRequest",
                    "metadata": {"name": controller_request, "namespace": "openshift-cloud-credential-operator"},
                    "spec": {}, "status": {"provisioned": true}}),
        ),
    );
    let env = |vars: &[&str]| -> std::collections::BTreeMap<String, String> {
        vars.iter()
            .map(|v| ((*v).to_owned(), format!("arn:aws:iam::1:role/{v}")))
            .collect()
    };

    // Both applied; each reported from its own request's status.
    let plan = plan::plan(&def, &env(&[]), &observed, &at(0));
    assert_eq!(
        credentials_requests(&plan),
        [controller_request.clone(), "node-request".to_owned()]
    );
    let node_request = plan
        .steps
        .iter()
        .map(|s| s.operand.to_value())
        .find(|v| v["metadata"]["name"] == "node-request")
        .unwrap();
    assert_eq!(node_request["spec"]["secretRef"]["name"], "node-creds");
    assert_eq!(
        node_request["metadata"]["annotations"]["credentials.openshift.io/role-arns-vars"],
        "NODE_ROLEARN"
    );
    assert_eq!(status_of(&plan, AVAILABLE), ConditionStatus::True);
    assert_eq!(status_of(&plan, NODE_AVAILABLE), ConditionStatus::False);
    assert_eq!(
        reason_of(&plan, NODE_AVAILABLE),
        "CredentialsNotProvisionedYet"
    );

    // Manual mode with the controller's role only: the node's request waits for its own.
    observed.cluster.credentials_mode = Some("Manual".into());
    let plan = plan::plan(&def, &env(&["ROLEARN"]), &observed, &at(0));
    assert_eq!(
        credentials_requests(&plan),
        std::slice::from_ref(&controller_request)
    );
    assert_eq!(reason_of(&plan, NODE_AVAILABLE), "CredentialsDisabled");
    let plan = plan::plan(&def, &env(&["ROLEARN", "NODE_ROLEARN"]), &observed, &at(0));
    assert_eq!(
        credentials_requests(&plan),
        [controller_request.clone(), "node-request".to_owned()]
    );
}

/// With its role in the operator's environment an AWS CredentialsRequest asks for STS
/// credentials (role and token path), each request its own role, as OpenShift's AWS EFS
/// operator writes them; without, it asks for keys.
#[test]
fn aws_credentials_requests_carry_their_sts_role() {
    let def = drivers::by_name("aws-efs").unwrap();
    let mut observed = openshift(json!({"managementState": "Managed"}));
    with_credentials_request_api(&mut observed, None);
    let requests = |env: &[(&str, &str)]| -> Vec<Value> {
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        plan::plan(&def, &env, &observed, &at(0))
            .steps
            .iter()
            .map(|s| s.operand.to_value())
            .filter(|v| v["kind"] == "CredentialsRequest")
            .collect()
    };
    let keys = requests(&[]);
    assert_eq!(keys.len(), 2);
    for request in &keys {
        assert!(request["spec"].get("cloudTokenPath").is_none(), "{request}");
        assert!(
            request["spec"]["providerSpec"]
                .get("stsIAMRoleARN")
                .is_none()
        );
    }
    let sts = requests(&[
        ("ROLEARN", "arn:aws:iam::1:role/controller"),
        ("NODE_ROLEARN", "arn:aws:iam::1:role/node"),
    ]);
    let role_of = |name: &str| {
        let request = sts.iter().find(|r| r["metadata"]["name"] == name).unwrap();
        assert_eq!(
            request["spec"]["cloudTokenPath"],
            "/var/run/secrets/openshift/serviceaccount/token"
        );
        request["spec"]["providerSpec"]["stsIAMRoleARN"].clone()
    };
    assert_eq!(
        role_of("openshift-aws-efs-csi-driver"),
        "arn:aws:iam::1:role/controller"
    );
    assert_eq!(
        role_of("openshift-aws-efs-csi-driver-node"),
        "arn:aws:iam::1:role/node"
    );
}

/// The DaemonSets a plan applies, in its order.
fn daemon_sets(plan: &Plan) -> Vec<DaemonSet> {
    plan.steps
        .iter()
        .filter_map(|s| match &s.operand {
            Operand::DaemonSet(ds) => Some(ds.clone()),
            _ => None,
        })
        .collect()
}

fn extra_daemon_set(def: &csi_kit::DriverDef, inputs: &csi_kit::Inputs) -> DaemonSet {
    let mut ds = csi_kit::build_node_daemon_set(def, inputs);
    ds.metadata.name = Some("helper".to_owned());
    ds
}

#[test]
fn an_extra_daemon_set_is_applied_and_reported_under_its_controller() {
    let mut def = def();
    def.hooks.extra_daemon_sets.push(csi_kit::ExtraDaemonSet {
        controller: "HelperNodeServiceController",
        name: "helper",
        build: extra_daemon_set,
    });
    let mut observed = openshift(json!({"managementState": "Managed"}));
    let now = at(0);
    let plan = plan::plan(&def, &Default::default(), &observed, &now);
    let [node, helper] = <[DaemonSet; 2]>::try_from(daemon_sets(&plan)).unwrap();
    assert_eq!(
        node.metadata.name.as_deref(),
        Some("gcp-pd-csi-driver-node")
    );
    assert_eq!(helper.metadata.name.as_deref(), Some("helper"));

    // The node plugin is rolled out, the helper not yet: the helper's controller says so.
    observed.operands.daemon_sets = vec![Arc::new(rolled_out(&node, 1))];
    let plan = plan::plan(&def, &Default::default(), &observed, &now);
    assert_eq!(
        status_of(&plan, "GCPPDDriverNodeServiceControllerAvailable"),
        ConditionStatus::True
    );
    assert_eq!(
        status_of(&plan, "HelperNodeServiceControllerAvailable"),
        ConditionStatus::False
    );
    assert_eq!(
        helper.metadata.namespace.as_deref(),
        Some("openshift-cluster-csi-drivers")
    );
    assert_eq!(
        helper.metadata.labels.as_ref().unwrap()["csi.storage.openshift.io/driver"],
        "gcp-pd"
    );
    observed
        .operands
        .daemon_sets
        .push(Arc::new(rolled_out(&helper, 1)));
    let plan = plan::plan(&def, &Default::default(), &observed, &now);
    assert_eq!(
        status_of(&plan, "HelperNodeServiceControllerAvailable"),
        ConditionStatus::True
    );
    assert_eq!(
        status_of(&plan, "HelperNodeServiceControllerProgressing"),
        ConditionStatus::False
    );
}

/// The sweep of what an earlier version rendered under other names: only objects with the
/// driver's operand label, never the shared sidecar roles, only kinds this pass renders (the
/// operator may delete those), and nothing on a pass that renders nothing.
#[test]
fn only_our_operands_of_rendered_kinds_that_this_version_does_not_render_are_deleted() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let ours = json!({"csi.storage.openshift.io/driver": "gcp-pd"});
    // Every object here but the copy was applied by one of our controllers.
    let applied = |object: Value| {
        testkit::as_applied_by(
            object,
            "storage-operator/GCPPDDriverStaticResourcesController",
        )
    };
    let binding = |name: &str, labels: Value| -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}})
    };
    let typed = |object: Value| -> Arc<ClusterRoleBinding> {
        Arc::new(serde_json::from_value(object).unwrap())
    };
    let mut observed = openshift(json!({"managementState": "Managed"}));
    observed.operands.cluster_role_bindings = vec![
        typed(applied(binding("gcp-pd-old-binding", ours.clone()))),
        typed(applied(binding(
            "other-drivers-binding",
            json!({"csi.storage.openshift.io/driver": "smb"}),
        ))),
        typed(applied(binding("unlabelled-binding", json!({})))),
        // A copy of one of ours (labels and all) that someone created, as the API server
        // stores it: its creator's entry only. Not ours.
        typed({
            let mut copy = binding("gcp-pd-binding-copy", ours.clone());
            copy["metadata"]["managedFields"] =
                json!([{"manager": "kubectl-create", "operation": "Update"}]);
            copy
        }),
    ];
    observed.operands.cluster_roles = vec![Arc::new(
        serde_json::from_value::<ClusterRole>(applied(json!({"metadata": {
            "name": "openshift-csi-old-shared-role",
            "labels": {"csi.storage.openshift.io/driver": "gcp-pd",
                       "csi.storage.openshift.io/shared-sidecar-role": "true"}}})))
        .unwrap(),
    )];
    // GCP PD renders no NetworkPolicy: the operator may not delete one.
    observed.operands.network_policies = vec![Arc::new(
        serde_json::from_value::<NetworkPolicy>(applied(
            json!({"metadata": {"name": "gcp-pd-old-policy", "labels": ours}}),
        ))
        .unwrap(),
    )];
    let plan = run(&observed, &at(0));
    let deleted: Vec<(DeleteKind, &str)> = plan
        .deletions
        .iter()
        .map(|d| (d.kind, d.name.as_str()))
        .collect();
    assert_eq!(
        deleted,
        [(DeleteKind::ClusterRoleBinding, "gcp-pd-old-binding")]
    );

    // A pass that plans nothing (here Unmanaged) deletes nothing.
    observed.cluster_csi_driver = Some(driver(json!({"managementState": "Unmanaged"})));
    assert!(run(&observed, &at(0)).deletions.is_empty());
}

/// A claim Pending on the driver (annotated with it by kube-controller-manager): not reported
/// before the 5 minutes, with a requeue for the moment it crosses them, then reported.
#[test]
fn a_claim_pending_on_the_driver_is_reported_after_five_minutes_and_timed_before() {
    use csi_kit::claims::PendingClaim;
    let mut observed = openshift(json!({"managementState": "Managed"}));
    observed.pending_claims = vec![(
        "shop/orders-db".to_owned(),
        PendingClaim {
            class: Some("gone".into()),
            provisioner: Some("pd.csi.storage.gke.io".into()),
            selected_node: false,
            created: Some(at(0).0),
        },
    )];
    let early = run(&observed, &at(60));
    assert_eq!(
        status_of(&early, "GCPPDStuckClaims"),
        ConditionStatus::False
    );
    // Due at 301 s; nothing else asks for an earlier pass in this plan but the progressing
    // deadline of a Deployment that does not exist yet.
    assert!(early.requeue.is_some_and(|r| r <= Duration::from_secs(241)));
    let late = run(&observed, &at(301));
    let (_, status, message) = conditions(&late)
        .into_iter()
        .find(|c| c.0 == "GCPPDStuckClaims")
        .unwrap();
    assert_eq!(status, ConditionStatus::True);
    assert!(
        message.contains("shop/orders-db; run `storage-operator diagnose pvc -n shop orders-db`"),
        "{message}"
    );
}
