//! The pure plan of the driver operator (`driver_operator::plan`) for what the catalogue added to
//! the kit: removal guarded by bound volumes (AWS EFS) and ConfigMaps copied from other
//! namespaces (AWS EBS).

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::sync::Arc;

use api::operator_v1::{ClusterCSIDriver, ConditionStatus};
use csi_kit::render::Operand;
use driver_operator::observe::{Apis, Observed};
use driver_operator::plan::{self, DeleteKind, Plan};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

fn now() -> Time {
    Time(Timestamp::from_second(1_800_000_000).unwrap())
}

fn observed(def: &csi_kit::DriverDef, spec: Value, finalizers: &[String]) -> Observed {
    Observed {
        apis: Apis {
            infrastructure: true,
            proxy: true,
            ..Apis::default()
        },
        cluster_csi_driver: Some(
            serde_json::from_value::<ClusterCSIDriver>(json!({
                "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": def.name, "generation": 2, "finalizers": finalizers},
                "spec": spec
            }))
            .unwrap(),
        ),
        cluster: driver_operator::observe::ObservedCluster {
            infrastructure: Some(
                serde_json::from_value(json!({
                    "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
                    "metadata": {"name": "cluster"}, "spec": {},
                    "status": {"infrastructureName": "demo-x7k2p", "controlPlaneTopology": "HighlyAvailable",
                               "platformStatus": {"type": "AWS", "aws": {"region": "us-east-2"}}}
                }))
                .unwrap(),
            ),
            ..Default::default()
        },
        ..Observed::default()
    }
}

fn condition(plan: &Plan, type_: &str) -> Option<(ConditionStatus, String)> {
    plan.status
        .iter()
        .flat_map(|p| p.part.conditions.iter())
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
}

fn pv(name: &str, driver: &str, phase: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"csi": {"driver": driver, "volumeHandle": name}},
        "status": {"phase": phase}
    }))
    .unwrap()
}

/// The driver's workloads as the operator applied them, and a copy of each under another
/// name (our operand label, not our field manager), which removal must leave alone.
fn workloads(def: &csi_kit::DriverDef, observed: &mut Observed) {
    let workload = |kind: &str, name: &str, ours: bool| {
        let object = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {
            "name": name, "namespace": def.namespace,
            "labels": {csi_kit::names::OPERAND_LABEL: def.short_name}}});
        if ours {
            testkit::as_applied_by(object, "storage-operator/test")
        } else {
            object
        }
    };
    let controller = csi_kit::names::controller(def);
    let node = csi_kit::names::node(def);
    observed.operands.deployments = [
        (controller.clone(), true),
        (format!("{controller}-copy"), false),
    ]
    .into_iter()
    .map(|(name, ours)| {
        Arc::new(serde_json::from_value::<Deployment>(workload("Deployment", &name, ours)).unwrap())
    })
    .collect();
    observed.operands.daemon_sets = [(node.clone(), true), (format!("{node}-copy"), false)]
        .into_iter()
        .map(|(name, ours)| {
            Arc::new(
                serde_json::from_value::<DaemonSet>(workload("DaemonSet", &name, ours)).unwrap(),
            )
        })
        .collect();
}

#[test]
fn efs_removal_waits_while_a_volume_is_bound_then_proceeds() {
    let def = drivers::by_name("aws-efs").unwrap();
    let finalizers = plan::finalizers(&def).to_vec();
    let mut observed = observed(&def, json!({"managementState": "Removed"}), &finalizers);
    workloads(&def, &mut observed);
    observed.cluster.persistent_volumes = vec![
        pv("pv-efs", "efs.csi.aws.com", "Bound"),
        pv("pv-ebs", "ebs.csi.aws.com", "Bound"),
    ];

    let blocked = plan::plan(&def, &Default::default(), &observed, &now());
    assert!(blocked.deletions.is_empty(), "{:?}", blocked.deletions);
    assert!(blocked.finalizers.is_none(), "the finalizers stay");
    assert!(blocked.steps.is_empty());
    let (status, message) = condition(&blocked, "AWSEFSRemovalProgressing").unwrap();
    assert_eq!(status, ConditionStatus::True);
    assert!(
        message.contains("pv-efs") && !message.contains("pv-ebs"),
        "{message}"
    );

    observed.cluster.persistent_volumes = vec![pv("pv-efs", "efs.csi.aws.com", "Released")];
    let removing = plan::plan(&def, &Default::default(), &observed, &now());
    let deleted: Vec<(DeleteKind, &str)> = removing
        .deletions
        .iter()
        .map(|d| (d.kind, d.name.as_str()))
        .collect();
    let (controller, node) = (csi_kit::names::controller(&def), csi_kit::names::node(&def));
    assert!(
        deleted.contains(&(DeleteKind::Deployment, controller.as_str()))
            && deleted.contains(&(DeleteKind::DaemonSet, node.as_str())),
        "{deleted:?}"
    );
    assert!(
        !deleted.iter().any(|(_, name)| name.ends_with("-copy")),
        "copies with our label are not ours: {deleted:?}"
    );
    assert_eq!(
        removing.finalizers, None,
        "the finalizers stay until the workloads are gone"
    );
    assert_eq!(
        condition(&removing, "AWSEFSRemovalProgressing").unwrap().0,
        ConditionStatus::False
    );

    // Once the deletions went through, the finalizers come off.
    observed.operands.deployments.clear();
    observed.operands.daemon_sets.clear();
    observed.operands.csi_driver = None;
    let removed = plan::plan(&def, &Default::default(), &observed, &now());
    assert!(removed.deletions.is_empty(), "{:?}", removed.deletions);
    assert_eq!(removed.finalizers, Some(Vec::new()));
}

#[test]
fn managed_efs_reports_no_removal_and_other_drivers_do_not_have_the_condition() {
    let efs = drivers::by_name("aws-efs").unwrap();
    let plan = plan::plan(
        &efs,
        &Default::default(),
        &observed(&efs, json!({"managementState": "Managed"}), &[]),
        &now(),
    );
    assert_eq!(
        condition(&plan, "AWSEFSRemovalProgressing").unwrap().0,
        ConditionStatus::False
    );
    let ebs = drivers::by_name("aws-ebs").unwrap();
    let plan = plan::plan(
        &ebs,
        &Default::default(),
        &observed(&ebs, json!({"managementState": "Managed"}), &[]),
        &now(),
    );
    assert!(condition(&plan, "AWSEBSRemovalProgressing").is_none());
}

fn source(pem: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": "kube-cloud-config", "namespace": "openshift-config-managed"},
        "data": {"ca-bundle.pem": pem}
    }))
    .unwrap()
}

fn copy_step(plan: &Plan) -> Option<ConfigMap> {
    plan.steps.iter().find_map(|s| match &s.operand {
        Operand::ConfigMap(cm) if cm.metadata.name.as_deref() == Some("kube-cloud-config") => {
            Some(cm.clone())
        }
        _ => None,
    })
}

#[test]
fn a_copied_config_map_follows_its_source_and_its_hash_rolls_the_pods() {
    let def = drivers::by_name("aws-ebs").unwrap();
    let mut observed = observed(&def, json!({"managementState": "Managed"}), &[]);
    let template_hashes = |plan: &Plan| {
        plan.steps
            .iter()
            .find_map(|s| match &s.operand {
                Operand::Deployment(d) => d.spec.as_ref()?.template.metadata.clone()?.annotations,
                _ => None,
            })
            .unwrap_or_default()
    };

    let without = plan::plan(&def, &Default::default(), &observed, &now());
    assert!(copy_step(&without).is_none());
    assert!(without.deletions.is_empty());

    observed.cluster.copied_config_map_sources = vec![source("pem-1")];
    let first = plan::plan(&def, &Default::default(), &observed, &now());
    let copy = copy_step(&first).unwrap();
    assert_eq!(
        copy.metadata.namespace.as_deref(),
        Some(def.namespace.as_str())
    );
    assert_eq!(copy.data.unwrap()["ca-bundle.pem"], "pem-1");

    observed.cluster.copied_config_map_sources = vec![source("pem-2")];
    let second = plan::plan(&def, &Default::default(), &observed, &now());
    assert_ne!(
        template_hashes(&first),
        template_hashes(&second),
        "a new bundle rolls"
    );

    // The source is gone while our copy exists: the copy is deleted.
    observed.cluster.copied_config_map_sources = Vec::new();
    let applied = |cm: ConfigMap| {
        let value = serde_json::to_value(cm).unwrap();
        serde_json::from_value::<ConfigMap>(testkit::as_applied_by(value, "storage-operator/test"))
            .unwrap()
    };
    observed.operands.config_maps = vec![Arc::new(applied(copy_step(&second).unwrap()))];
    let gone = plan::plan(&def, &Default::default(), &observed, &now());
    assert!(copy_step(&gone).is_none());
    assert!(
        gone.deletions
            .iter()
            .any(|d| d.kind == DeleteKind::ConfigMap && d.name == "kube-cloud-config"),
        "{:?}",
        gone.deletions
    );

    // An object of that name with our label that we did not apply (someone's, labels copied)
    // is not ours: it stays.
    observed.operands.config_maps = vec![Arc::new(copy_step(&second).unwrap())];
    let kept = plan::plan(&def, &Default::default(), &observed, &now());
    assert!(kept.deletions.is_empty(), "{:?}", kept.deletions);
}

/// The FIPS mode of the operator's host (as the operator observed it at start) reaches both of
/// AWS EFS's drivers as `FIPS_ENABLED`, as OpenShift's FIPS hooks set it.
#[test]
fn efs_drivers_are_told_whether_the_cluster_runs_fips() {
    let def = drivers::by_name("aws-efs").unwrap();
    let fips_of = |host_fips: bool| -> Vec<Option<String>> {
        let mut observed = observed(&def, json!({"managementState": "Managed"}), &[]);
        observed.host_fips = host_fips;
        let plan = plan::plan(&def, &Default::default(), &observed, &now());
        plan.steps
            .iter()
            .filter_map(|s| match &s.operand {
                Operand::Deployment(Deployment { spec, .. }) => spec.clone().map(|s| s.template),
                Operand::DaemonSet(DaemonSet { spec, .. }) => spec.clone().map(|s| s.template),
                _ => None,
            })
            .map(|template| {
                let driver = template.spec.unwrap().containers.remove(0);
                assert_eq!(driver.name, "csi-driver");
                driver
                    .env
                    .unwrap_or_default()
                    .into_iter()
                    .find(|e| e.name == "FIPS_ENABLED")
                    .and_then(|e| e.value)
            })
            .collect()
    };
    let on = Some("true".to_owned());
    let off = Some("false".to_owned());
    assert_eq!(fips_of(true), [on.clone(), on]);
    assert_eq!(fips_of(false), [off.clone(), off]);
}
