//! Operator conditions: setting one the way library-go does (the transition time moves only
//! when the status changes), and the union of many into one (`UnionCondition`), which is how a
//! driver's dozen controller conditions become the Available/Progressing/Degraded/Upgradeable
//! that an admin reads on the Storage CR and on `ClusterOperator/storage`.

use std::time::Duration;

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Condition type suffixes with a meaning across OpenShift.
pub const AVAILABLE: &str = "Available";
/// The component is rolling out a change.
pub const PROGRESSING: &str = "Progressing";
/// The component is persistently not at its desired state.
pub const DEGRADED: &str = "Degraded";
/// Whether the cluster may be upgraded.
pub const UPGRADEABLE: &str = "Upgradeable";
/// Whether the operator detected conditions an upgrade evaluation should look at.
pub const EVALUATION_CONDITIONS_DETECTED: &str = "EvaluationConditionsDetected";

/// Reason of a unioned condition whose inputs are all at their default status.
pub const REASON_AS_EXPECTED: &str = "AsExpected";
/// Reason of a unioned condition with no inputs at all.
pub const REASON_NO_DATA: &str = "NoData";
/// Message of a unioned condition that is as expected and has nothing to say.
pub const MESSAGE_ALL_IS_WELL: &str = "All is well";

/// A condition without a transition time, as controllers produce them; [`set_condition`] stamps it.
pub fn condition(
    type_: impl Into<String>,
    status: ConditionStatus,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> OperatorCondition {
    OperatorCondition {
        type_: type_.into(),
        status,
        last_transition_time: None,
        reason: Some(reason.into()).filter(|r: &String| !r.is_empty()),
        message: Some(message.into()).filter(|m: &String| !m.is_empty()),
    }
}

/// Sets `new` in `conditions`, keyed by type. The transition time changes only when the status
/// does (taken from `new` when it has one, else `now`); reason and message always follow `new`.
/// Returns whether anything changed, so callers can skip a status write that would change nothing.
pub fn set_condition(
    conditions: &mut Vec<OperatorCondition>,
    new: OperatorCondition,
    now: &Time,
) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            let last_transition_time = new
                .last_transition_time
                .clone()
                .or_else(|| Some(now.clone()));
            conditions.push(OperatorCondition {
                last_transition_time,
                ..new
            });
            true
        }
        Some(existing) => {
            let mut changed = false;
            if existing.status != new.status {
                existing.status = new.status;
                existing.last_transition_time =
                    new.last_transition_time.or_else(|| Some(now.clone()));
                changed = true;
            }
            if existing.reason != new.reason {
                existing.reason = new.reason;
                changed = true;
            }
            if existing.message != new.message {
                existing.message = new.message;
                changed = true;
            }
            changed
        }
    }
}

/// Removes the condition of `type_`; returns whether there was one.
pub fn remove_condition(conditions: &mut Vec<OperatorCondition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// How long a condition must have been "bad" before a union reports it. OpenShift uses this so
/// that a Degraded blip (a pod restarting, an API hiccup) does not page anyone: the
/// ClusterOperator's Degraded waits 2 minutes.
#[derive(Clone, Debug, Default)]
pub struct Inertia {
    default: Duration,
    exceptions: Vec<(String, Duration)>,
}

impl Inertia {
    /// No inertia: bad conditions count at once.
    pub fn none() -> Self {
        Self::default()
    }

    /// The same inertia for every condition.
    pub fn uniform(duration: Duration) -> Self {
        Self {
            default: duration,
            exceptions: Vec::new(),
        }
    }

    /// A different inertia for conditions whose type is exactly `type_`.
    pub fn with(mut self, type_: impl Into<String>, duration: Duration) -> Self {
        self.exceptions.push((type_.into(), duration));
        self
    }

    fn of(&self, type_: &str) -> Duration {
        self.exceptions
            .iter()
            .find(|(t, _)| t == type_)
            .map_or(self.default, |(_, d)| *d)
    }
}

/// Unions every condition whose type ends with `type_` into one condition of type `type_`,
/// exactly as library-go's `UnionCondition` does:
///
/// - no such condition: Unknown, reason `NoData`;
/// - none differs from `default` (or those that do are younger than their inertia): `default`,
///   reason `AsExpected`, every message as `<Type>: <line>` (or "All is well"), transition time
///   the latest of them;
/// - otherwise: the opposite of `default` if any condition says so, else Unknown; the bad ones'
///   messages; reason the sorted `<TypePrefix>_<Reason>` joined with `::`.
pub fn union_condition(
    type_: &str,
    default: ConditionStatus,
    inertia: &Inertia,
    conditions: &[OperatorCondition],
    now: Timestamp,
) -> OperatorCondition {
    let opposite = match default {
        ConditionStatus::True => ConditionStatus::False,
        _ => ConditionStatus::True,
    };
    let interesting: Vec<&OperatorCondition> = conditions
        .iter()
        .filter(|c| c.type_.ends_with(type_))
        .collect();
    if interesting.is_empty() {
        return condition(type_, ConditionStatus::Unknown, REASON_NO_DATA, "");
    }
    let bad: Vec<&OperatorCondition> = interesting
        .iter()
        .copied()
        .filter(|c| c.status != default)
        .collect();
    let elder_bad = bad.iter().any(|c| {
        let inertia = inertia.of(&c.type_);
        if inertia.is_zero() {
            return true;
        }
        let since = c
            .last_transition_time
            .as_ref()
            .map_or(Timestamp::MIN, |t| t.0);
        let inertia = SignedDuration::try_from(inertia).unwrap_or(SignedDuration::MAX);
        now.duration_since(since) > inertia
    });

    if !elder_bad {
        let message = union_message(&interesting);
        return OperatorCondition {
            last_transition_time: latest_transition(&interesting),
            ..condition(
                type_,
                default,
                REASON_AS_EXPECTED,
                if message.is_empty() {
                    MESSAGE_ALL_IS_WELL.to_owned()
                } else {
                    message
                },
            )
        };
    }

    let status = if bad.iter().any(|c| c.status == opposite) {
        opposite
    } else {
        ConditionStatus::Unknown
    };
    let mut reasons: Vec<String> = bad
        .iter()
        .map(|c| {
            let prefix = &c.type_[..c.type_.len() - type_.len()];
            match c.reason.as_deref() {
                Some(reason) if !reason.is_empty() => format!("{prefix}_{reason}"),
                _ => prefix.to_owned(),
            }
        })
        .collect();
    reasons.sort();
    OperatorCondition {
        last_transition_time: latest_transition(&bad),
        ..condition(type_, status, reasons.join("::"), union_message(&bad))
    }
}

fn union_message(conditions: &[&OperatorCondition]) -> String {
    conditions
        .iter()
        .filter_map(|c| {
            c.message
                .as_deref()
                .filter(|m| !m.is_empty())
                .map(|m| (&c.type_, m))
        })
        .flat_map(|(type_, message)| {
            message
                .split('\n')
                .map(move |line| format!("{type_}: {line}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn latest_transition(conditions: &[&OperatorCondition]) -> Option<Time> {
    conditions
        .iter()
        .filter_map(|c| c.last_transition_time.clone())
        .max()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
    }

    fn cond(
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        since: i64,
    ) -> OperatorCondition {
        OperatorCondition {
            last_transition_time: Some(at(since)),
            ..condition(type_, status, reason, message)
        }
    }

    use ConditionStatus::{False, True, Unknown};

    #[test]
    fn set_condition_moves_the_transition_time_only_on_a_status_change() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            condition("XAvailable", True, "AsExpected", ""),
            &at(0)
        ));
        assert_eq!(conditions[0].last_transition_time, Some(at(0)));

        // Same status, new message: message changes, time does not.
        assert!(set_condition(
            &mut conditions,
            condition("XAvailable", True, "AsExpected", "fine"),
            &at(10)
        ));
        assert_eq!(conditions[0].last_transition_time, Some(at(0)));
        assert_eq!(conditions[0].message.as_deref(), Some("fine"));

        // Identical: nothing changes, so no status write is needed.
        assert!(!set_condition(
            &mut conditions,
            condition("XAvailable", True, "AsExpected", "fine"),
            &at(20)
        ));

        // Status change: time moves.
        assert!(set_condition(
            &mut conditions,
            condition("XAvailable", False, "Deploying", "wait"),
            &at(30)
        ));
        assert_eq!(conditions[0].last_transition_time, Some(at(30)));
        assert_eq!(conditions.len(), 1);

        assert!(remove_condition(&mut conditions, "XAvailable"));
        assert!(!remove_condition(&mut conditions, "XAvailable"));
    }

    #[test]
    fn union_of_nothing_is_unknown_no_data() {
        let union = union_condition(
            "Degraded",
            False,
            &Inertia::none(),
            &[cond("XAvailable", True, "", "", 0)],
            at(0).0,
        );
        assert_eq!(union.status, Unknown);
        assert_eq!(union.reason.as_deref(), Some("NoData"));
        assert_eq!(union.message, None);
    }

    #[test]
    fn union_of_good_conditions_is_as_expected_with_every_message() {
        let conditions = [
            cond(
                "GCPPDDriverControllerServiceControllerAvailable",
                True,
                "AsExpected",
                "",
                5,
            ),
            cond(
                "GCPPDDriverNodeServiceControllerAvailable",
                True,
                "AsExpected",
                "3 of 3 ready\nall nodes",
                9,
            ),
        ];
        let union = union_condition("Available", True, &Inertia::none(), &conditions, at(100).0);
        assert_eq!(union.status, True);
        assert_eq!(union.reason.as_deref(), Some("AsExpected"));
        assert_eq!(
            union.message.as_deref(),
            Some(
                "GCPPDDriverNodeServiceControllerAvailable: 3 of 3 ready\nGCPPDDriverNodeServiceControllerAvailable: all nodes"
            )
        );
        assert_eq!(union.last_transition_time, Some(at(9)));

        let quiet = union_condition(
            "Available",
            True,
            &Inertia::none(),
            &conditions[..1],
            at(100).0,
        );
        assert_eq!(quiet.message.as_deref(), Some("All is well"));
    }

    #[test]
    fn union_of_bad_conditions_names_each_with_its_reason() {
        let conditions = [
            cond(
                "AWSEBSDriverNodeServiceControllerDegraded",
                True,
                "SyncError",
                "node: boom",
                3,
            ),
            cond(
                "AWSEBSDriverControllerServiceControllerDegraded",
                False,
                "AsExpected",
                "",
                1,
            ),
            cond("ManagementStateDegraded", True, "", "", 7),
            cond(
                "AWSEBSDriverControllerServiceControllerAvailable",
                False,
                "Deploying",
                "waiting",
                1,
            ),
        ];
        let union = union_condition("Degraded", False, &Inertia::none(), &conditions, at(100).0);
        assert_eq!(union.status, True);
        assert_eq!(
            union.reason.as_deref(),
            Some("AWSEBSDriverNodeServiceController_SyncError::ManagementState")
        );
        assert_eq!(
            union.message.as_deref(),
            Some("AWSEBSDriverNodeServiceControllerDegraded: node: boom")
        );
        assert_eq!(union.last_transition_time, Some(at(7)));
    }

    #[rstest]
    #[case::opposite_wins(&[True, Unknown], True)]
    #[case::only_unknown(&[Unknown], Unknown)]
    fn bad_status_is_the_opposite_when_any_says_so(
        #[case] statuses: &[ConditionStatus],
        #[case] expected: ConditionStatus,
    ) {
        let conditions: Vec<_> = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| cond(&format!("C{i}Degraded"), s.clone(), "R", "", 0))
            .collect();
        assert_eq!(
            union_condition("Degraded", False, &Inertia::none(), &conditions, at(0).0).status,
            expected
        );
    }

    #[rstest]
    #[case::young(119, False)]
    #[case::elder(121, True)]
    fn inertia_hides_young_bad_conditions(#[case] age: i64, #[case] expected: ConditionStatus) {
        let conditions = [cond("XDegraded", True, "SyncError", "boom", 0)];
        let inertia = Inertia::uniform(Duration::from_secs(120));
        let union = union_condition("Degraded", False, &inertia, &conditions, at(age).0);
        assert_eq!(union.status, expected);
        if expected == False {
            assert_eq!(union.reason.as_deref(), Some("AsExpected"));
            // While hidden, the bad condition's message is still shown.
            assert_eq!(union.message.as_deref(), Some("XDegraded: boom"));
        }
    }

    #[test]
    fn inertia_can_differ_per_condition_type() {
        let inertia =
            Inertia::uniform(Duration::from_secs(120)).with("FastDegraded", Duration::ZERO);
        let conditions = [
            cond("FastDegraded", True, "SyncError", "", 0),
            cond("SlowDegraded", True, "SyncError", "", 0),
        ];
        let union = union_condition("Degraded", False, &inertia, &conditions, at(1).0);
        assert_eq!(union.status, True);
        assert_eq!(
            union.reason.as_deref(),
            Some("Fast_SyncError::Slow_SyncError"),
            "all bad ones are named"
        );
    }
}
