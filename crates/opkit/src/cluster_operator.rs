//! The roll-up of an operator's conditions into `ClusterOperator` conditions, as library-go's
//! StatusSyncer does it: one union per type with OpenShift's defaults, Degraded surfacing only
//! after its inertia, and everything Unknown/`Unmanaged` while the operator is unmanaged.

use std::time::Duration;

use api::config_v1::ClusterOperatorStatusCondition;
use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::conditions::{
    AVAILABLE, DEGRADED, EVALUATION_CONDITIONS_DETECTED, Inertia, PROGRESSING, UPGRADEABLE,
    union_condition,
};
use crate::management::Mode;

/// How long a Degraded condition must last before the ClusterOperator shows it.
pub const DEGRADED_INERTIA: Duration = Duration::from_secs(120);

/// The ClusterOperator condition types, with the status each has when nothing says otherwise.
pub const CONDITION_DEFAULTS: [(&str, ConditionStatus); 5] = [
    (DEGRADED, ConditionStatus::False),
    (PROGRESSING, ConditionStatus::False),
    (AVAILABLE, ConditionStatus::True),
    (UPGRADEABLE, ConditionStatus::True),
    (EVALUATION_CONDITIONS_DETECTED, ConditionStatus::False),
];

/// The desired ClusterOperator conditions for an operator whose own conditions are `conditions`.
/// Their transition times are those of the inputs; [`merge`] decides what is stored.
pub fn desired_conditions(
    conditions: &[OperatorCondition],
    mode: &Mode,
    now: &Time,
) -> Vec<OperatorCondition> {
    CONDITION_DEFAULTS
        .iter()
        .map(|(type_, default)| {
            if *mode == Mode::Pause {
                return crate::conditions::condition(
                    *type_,
                    ConditionStatus::Unknown,
                    "Unmanaged",
                    "",
                );
            }
            let inertia = if *type_ == DEGRADED {
                Inertia::uniform(DEGRADED_INERTIA)
            } else {
                Inertia::none()
            };
            union_condition(type_, default.clone(), &inertia, conditions, now.0)
        })
        .collect()
}

/// Merges `desired` into the stored ClusterOperator conditions: a condition's transition time
/// moves only when its status changes. Returns whether anything changed.
pub fn merge(
    stored: &mut Vec<ClusterOperatorStatusCondition>,
    desired: Vec<OperatorCondition>,
    now: &Time,
) -> bool {
    let mut changed = false;
    for new in desired {
        let transition = new
            .last_transition_time
            .clone()
            .unwrap_or_else(|| now.clone());
        match stored.iter_mut().find(|c| c.type_ == new.type_) {
            None => {
                stored.push(ClusterOperatorStatusCondition {
                    type_: new.type_,
                    status: new.status,
                    last_transition_time: now.clone(),
                    reason: new.reason,
                    message: new.message,
                });
                changed = true;
            }
            Some(existing) => {
                if existing.status != new.status {
                    existing.status = new.status;
                    existing.last_transition_time = transition;
                    changed = true;
                }
                if existing.reason != new.reason || existing.message != new.message {
                    existing.reason = new.reason;
                    existing.message = new.message;
                    changed = true;
                }
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::conditions::condition;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
    }

    fn find<'a>(conditions: &'a [OperatorCondition], type_: &str) -> &'a OperatorCondition {
        conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn waiting_driver_rolls_up_like_openshift() {
        // What the Storage CR holds while the AWS EBS driver operator has not reported yet.
        let inputs = [
            OperatorCondition {
                last_transition_time: Some(at(0)),
                ..condition(
                    "AWSEBSCSIDriverOperatorCRAvailable",
                    ConditionStatus::False,
                    "WaitForOperator",
                    "Waiting for AWSEBS operator to report status",
                )
            },
            OperatorCondition {
                last_transition_time: Some(at(0)),
                ..condition(
                    "AWSEBSCSIDriverOperatorCRProgressing",
                    ConditionStatus::True,
                    "WaitForOperator",
                    "Waiting for AWSEBS operator to report status",
                )
            },
        ];
        let desired = desired_conditions(&inputs, &Mode::Manage, &at(5));
        let available = find(&desired, AVAILABLE);
        assert_eq!(available.status, ConditionStatus::False);
        assert_eq!(
            available.reason.as_deref(),
            Some("AWSEBSCSIDriverOperatorCR_WaitForOperator")
        );
        assert_eq!(
            available.message.as_deref(),
            Some(
                "AWSEBSCSIDriverOperatorCRAvailable: Waiting for AWSEBS operator to report status"
            )
        );
        assert_eq!(find(&desired, PROGRESSING).status, ConditionStatus::True);
        assert_eq!(
            find(&desired, DEGRADED).status,
            ConditionStatus::Unknown,
            "no Degraded input: NoData"
        );
        let upgradeable = find(&desired, UPGRADEABLE);
        assert_eq!(upgradeable.reason.as_deref(), Some("NoData"));
    }

    #[test]
    fn degraded_surfaces_only_after_two_minutes() {
        let inputs = [OperatorCondition {
            last_transition_time: Some(at(0)),
            ..condition(
                "CSIDriverStarterDegraded",
                ConditionStatus::True,
                "SyncError",
                "boom",
            )
        }];
        assert_eq!(
            find(
                &desired_conditions(&inputs, &Mode::Manage, &at(60)),
                DEGRADED
            )
            .status,
            ConditionStatus::False
        );
        let late = desired_conditions(&inputs, &Mode::Manage, &at(121));
        assert_eq!(find(&late, DEGRADED).status, ConditionStatus::True);
        assert_eq!(
            find(&late, DEGRADED).reason.as_deref(),
            Some("CSIDriverStarter_SyncError")
        );
    }

    #[test]
    fn unmanaged_reports_unknown_everywhere() {
        let desired = desired_conditions(&[], &Mode::Pause, &at(0));
        assert_eq!(desired.len(), 5);
        assert!(
            desired.iter().all(|c| c.status == ConditionStatus::Unknown
                && c.reason.as_deref() == Some("Unmanaged"))
        );
    }

    #[test]
    fn merge_keeps_transition_times_and_reports_changes() {
        let mut stored = Vec::new();
        let first = desired_conditions(&[], &Mode::Manage, &at(0));
        assert!(merge(&mut stored, first.clone(), &at(0)));
        assert_eq!(stored.len(), 5);
        assert!(stored.iter().all(|c| c.last_transition_time == at(0)));
        assert!(
            !merge(&mut stored, first, &at(50)),
            "the same conditions again change nothing"
        );

        let inputs = [OperatorCondition {
            last_transition_time: Some(at(40)),
            ..condition("XAvailable", ConditionStatus::False, "Deploying", "")
        }];
        assert!(merge(
            &mut stored,
            desired_conditions(&inputs, &Mode::Manage, &at(60)),
            &at(60)
        ));
        let available = stored.iter().find(|c| c.type_ == AVAILABLE).unwrap();
        assert_eq!(available.status, ConditionStatus::False);
        assert_eq!(
            available.last_transition_time,
            at(40),
            "the time the input went bad"
        );
        let degraded = stored.iter().find(|c| c.type_ == DEGRADED).unwrap();
        assert_eq!(
            degraded.last_transition_time,
            at(0),
            "unchanged status keeps its time"
        );
    }
}
