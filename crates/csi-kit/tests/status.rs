#![allow(clippy::unwrap_used)]
//! Workload conditions with library-go's semantics.

use std::collections::BTreeMap;

use api::operator_v1::{ConditionStatus, OperatorCondition};
use csi_kit::status::{self, STABLE_GENERATION_ANNOTATION};
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetStatus, Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rstest::rstest;

#[derive(Clone, Copy, Default)]
struct Dep {
    generation: i64,
    observed: i64,
    replicas: i32,
    available: i32,
    updated: i32,
    unavailable: i32,
    rolled_out: bool,
}

fn deployment(d: Dep) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            generation: Some(d.generation),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(d.replicas),
            ..DeploymentSpec::default()
        }),
        status: Some(DeploymentStatus {
            observed_generation: Some(d.observed),
            available_replicas: Some(d.available),
            updated_replicas: Some(d.updated),
            unavailable_replicas: Some(d.unavailable),
            conditions: d.rolled_out.then(|| {
                vec![DeploymentCondition {
                    type_: "Progressing".into(),
                    status: "True".into(),
                    reason: Some("NewReplicaSetAvailable".into()),
                    ..DeploymentCondition::default()
                }]
            }),
            ..DeploymentStatus::default()
        }),
    }
}

const STEADY: Dep = Dep {
    generation: 3,
    observed: 3,
    replicas: 2,
    available: 2,
    updated: 2,
    unavailable: 0,
    rolled_out: true,
};

#[rstest]
#[case::steady(STEADY, true, None)]
#[case::new_spec_not_seen(Dep { observed: 2, ..STEADY }, true, Some("Waiting for Deployment to act on changes"))]
#[case::node_reboot_after_rollout(Dep { available: 1, unavailable: 1, ..STEADY }, true, None)]
#[case::rolling_pods_unavailable(Dep { available: 1, unavailable: 1, rolled_out: false, ..STEADY }, true, Some("Waiting for Deployment to deploy pods"))]
#[case::rolling_pods_not_updated(Dep { updated: 1, rolled_out: false, ..STEADY }, true, Some("Waiting for Deployment to update pods"))]
#[case::first_install_nothing_yet(Dep { available: 0, updated: 0, unavailable: 2, rolled_out: false, ..STEADY }, false, Some("Waiting for Deployment to deploy pods"))]
fn deployment_conditions(
    #[case] d: Dep,
    #[case] available: bool,
    #[case] progressing: Option<&str>,
) {
    let c = status::deployment_conditions("GCPPD", &deployment(d));
    assert_eq!(
        c.available.type_,
        "GCPPDDriverControllerServiceControllerAvailable"
    );
    assert_eq!(
        c.progressing.type_,
        "GCPPDDriverControllerServiceControllerProgressing"
    );
    let want_available = if available {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    assert_eq!(c.available.status, want_available);
    assert_eq!(
        c.available.reason.as_deref(),
        Some(if available { "AsExpected" } else { "Deploying" })
    );
    match progressing {
        Some(message) => {
            assert_eq!(c.progressing.status, ConditionStatus::True);
            assert_eq!(c.progressing.reason.as_deref(), Some("Deploying"));
            assert_eq!(c.progressing.message.as_deref(), Some(message));
        }
        None => {
            assert_eq!(c.progressing.status, ConditionStatus::False);
            assert_eq!(
                c.progressing.message.as_deref(),
                Some("Deployment is not progressing")
            );
        }
    }
}

fn at(s: &str) -> Time {
    Time(s.parse().unwrap())
}

#[rstest]
#[case::fourteen_minutes("2026-11-22T10:14:00Z", false)]
#[case::sixteen_minutes("2026-11-22T10:16:00Z", true)]
fn degraded_after_fifteen_minutes_of_progressing(#[case] now: &str, #[case] degraded: bool) {
    let c = status::deployment_conditions(
        "GCPPD",
        &deployment(Dep {
            observed: 2,
            ..STEADY
        }),
    );
    let previous = OperatorCondition {
        last_transition_time: Some(at("2026-11-22T10:00:00Z")),
        ..c.progressing.clone()
    };
    assert_eq!(
        status::progressing_too_long(&at(now), &c, Some(&previous)),
        degraded
    );
    let steady = status::deployment_conditions("GCPPD", &deployment(STEADY));
    assert!(
        !status::progressing_too_long(&at(now), &steady, Some(&previous)),
        "done now"
    );
    assert!(
        !status::progressing_too_long(&at(now), &c, None),
        "no history, no verdict"
    );
}

fn daemon_set(generation: i64, stable: Option<i64>, st: DaemonSetStatus) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta {
            generation: Some(generation),
            annotations: stable.map(|s| {
                BTreeMap::from([(STABLE_GENERATION_ANNOTATION.to_owned(), s.to_string())])
            }),
            ..ObjectMeta::default()
        },
        status: Some(st),
        ..DaemonSet::default()
    }
}

fn ds_status(
    observed: i64,
    desired: i32,
    updated: i32,
    available: i32,
    unavailable: i32,
) -> DaemonSetStatus {
    DaemonSetStatus {
        observed_generation: Some(observed),
        desired_number_scheduled: desired,
        updated_number_scheduled: Some(updated),
        number_available: Some(available),
        number_unavailable: Some(unavailable),
        ..DaemonSetStatus::default()
    }
}

#[rstest]
#[case::steady(daemon_set(4, Some(4), ds_status(4, 3, 3, 3, 0)), true, None)]
#[case::node_reboot_when_stable(daemon_set(4, Some(4), ds_status(4, 3, 3, 2, 1)), true, None)]
#[case::new_generation(
    daemon_set(5, Some(4), ds_status(4, 3, 3, 3, 0)),
    true,
    Some("Waiting for DaemonSet to act on changes")
)]
#[case::updating(
    daemon_set(5, Some(4), ds_status(5, 3, 1, 3, 0)),
    true,
    Some("Waiting for DaemonSet to update 3 node pods")
)]
#[case::pods_missing_mid_rollout(
    daemon_set(5, Some(4), ds_status(5, 3, 3, 2, 1)),
    true,
    Some("Waiting for DaemonSet to deploy node pods")
)]
#[case::no_nodes_yet(daemon_set(1, None, ds_status(1, 0, 0, 0, 0)), false, None)]
fn daemon_set_conditions(
    #[case] ds: DaemonSet,
    #[case] available: bool,
    #[case] progressing: Option<&str>,
) {
    let c = status::daemon_set_conditions("GCPPD", &ds);
    assert_eq!(
        c.available.type_,
        "GCPPDDriverNodeServiceControllerAvailable"
    );
    assert_eq!(c.available.status == ConditionStatus::True, available);
    if !available {
        assert_eq!(
            c.available.message.as_deref(),
            Some("Waiting for the DaemonSet to deploy the CSI Node Service")
        );
    }
    assert_eq!(
        c.progressing
            .message
            .as_deref()
            .filter(|_| c.is_progressing()),
        progressing
    );
}

#[rstest]
#[case::nothing_observed(None, None)]
#[case::rolled_out(Some(daemon_set(5, Some(4), ds_status(5, 3, 3, 3, 0))), Some(5))]
#[case::still_rolling(Some(daemon_set(5, Some(4), ds_status(5, 3, 1, 3, 0))), Some(4))]
#[case::stable_with_a_rebooting_node(
    Some(daemon_set(5, Some(5), ds_status(5, 3, 3, 2, 1))),
    Some(5)
)]
#[case::first_rollout_unfinished(Some(daemon_set(1, None, ds_status(1, 3, 0, 0, 3))), None)]
fn stable_generation_moves_only_when_a_rollout_finishes(
    #[case] observed: Option<DaemonSet>,
    #[case] want: Option<i64>,
) {
    assert_eq!(status::stable_generation(observed.as_ref()), want);
    let mut desired = DaemonSet::default();
    status::with_stable_generation(&mut desired, observed.as_ref());
    let got = desired
        .metadata
        .annotations
        .and_then(|a| a.get(STABLE_GENERATION_ANNOTATION).cloned());
    assert_eq!(got, want.map(|g| g.to_string()));
}

#[test]
fn condition_names_follow_openshift() {
    assert_eq!(
        status::static_resources_controller("GCPPD"),
        "GCPPDDriverStaticResourcesController"
    );
    assert_eq!(
        status::service_monitor_controller("GCPPD"),
        "GCPPDDriverServiceMonitorController"
    );
    assert_eq!(
        status::STORAGE_CLASS_CONTROLLER_DEGRADED,
        "StorageClassControllerDegraded"
    );
}
