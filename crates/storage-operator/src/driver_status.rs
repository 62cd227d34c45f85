//! How a driver's ClusterCSIDriver status becomes conditions on `Storage/cluster`:
//! `<Prefix>CSIDriverOperatorCR{Available,Progressing,Degraded,Upgradeable}`, each the union of the
//! driver's own conditions of that kind, with cluster-storage-operator's rules for a driver that
//! has not reported yet and for a driver that disabled itself.

use api::operator_v1::{ConditionStatus, OperatorCondition, OperatorStatus};
use k8s_openapi::jiff::Timestamp;
use opkit::conditions::{
    AVAILABLE, DEGRADED, Inertia, PROGRESSING, REASON_NO_DATA, UPGRADEABLE, condition,
    union_condition,
};

use crate::registry::DriverEntry;

/// Reason while the driver operator has not reported a condition of the kind.
pub const REASON_WAIT_FOR_OPERATOR: &str = "WaitForOperator";
/// Reason when a driver that may disable itself did (the platform lacks the service).
pub const REASON_DRIVER_DISABLED: &str = "DriverDisabled";

/// The Storage condition type for one of the driver's roll-ups.
pub fn storage_condition_type(entry: &DriverEntry, kind: &str) -> String {
    format!("{}CSIDriverOperatorCR{kind}", entry.condition_prefix)
}

/// The four Storage conditions for `entry`, from its ClusterCSIDriver status (`None` when the
/// ClusterCSIDriver or its status does not exist yet).
pub fn storage_conditions(
    entry: &DriverEntry,
    status: Option<&OperatorStatus>,
    now: Timestamp,
) -> Vec<OperatorCondition> {
    let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let prefix = entry.condition_prefix;
    let disabled = entry.allow_disabled.then(|| {
        conditions
            .iter()
            .find(|c| c.type_.ends_with("Disabled") && c.status == ConditionStatus::True)
    });
    let disabled = disabled.flatten();
    let waiting = format!("Waiting for {prefix} operator to report status");
    let union = |kind: &str, default: ConditionStatus| {
        let union = union_condition(kind, default, &Inertia::none(), conditions, now);
        let type_ = storage_condition_type(entry, kind);
        OperatorCondition { type_, ..union }
    };
    let no_data = |c: &OperatorCondition| c.reason.as_deref() == Some(REASON_NO_DATA);

    let available = match disabled {
        Some(d) => condition(
            storage_condition_type(entry, AVAILABLE),
            ConditionStatus::True,
            REASON_DRIVER_DISABLED,
            format!(
                "CSI driver for {prefix} is disabled: {}",
                d.message.as_deref().unwrap_or_default()
            ),
        ),
        None => {
            let c = union(AVAILABLE, ConditionStatus::True);
            if no_data(&c) {
                condition(
                    c.type_,
                    ConditionStatus::False,
                    REASON_WAIT_FOR_OPERATOR,
                    waiting.clone(),
                )
            } else {
                c
            }
        }
    };
    let progressing = {
        let c = union(PROGRESSING, ConditionStatus::False);
        match (no_data(&c), disabled.is_some()) {
            (true, true) => condition(c.type_, ConditionStatus::False, REASON_DRIVER_DISABLED, ""),
            (true, false) => condition(
                c.type_,
                ConditionStatus::True,
                REASON_WAIT_FOR_OPERATOR,
                waiting,
            ),
            (false, _) => c,
        }
    };
    let degraded = {
        let c = union(DEGRADED, ConditionStatus::False);
        if no_data(&c) {
            OperatorCondition {
                status: ConditionStatus::False,
                ..c
            }
        } else {
            c
        }
    };
    let upgradeable = {
        let c = union(UPGRADEABLE, ConditionStatus::True);
        if no_data(&c) {
            OperatorCondition {
                status: ConditionStatus::True,
                ..c
            }
        } else {
            c
        }
    };
    vec![available, progressing, degraded, upgradeable]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::find;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn status(conditions: &[(&str, ConditionStatus, &str, &str)]) -> OperatorStatus {
        OperatorStatus {
            conditions: conditions
                .iter()
                .map(|(t, s, r, m)| condition(*t, s.clone(), *r, *m))
                .collect(),
            ..Default::default()
        }
    }

    fn summary(conditions: &[OperatorCondition]) -> Vec<(String, String, String)> {
        conditions
            .iter()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.to_string(),
                    c.reason.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn row(t: &str, s: &str, r: &str) -> (String, String, String) {
        (t.into(), s.into(), r.into())
    }

    #[test]
    fn a_driver_that_has_not_reported_is_waited_for() {
        let ebs = find("aws-ebs").unwrap();
        let conditions = storage_conditions(&ebs, None, now());
        assert_eq!(
            summary(&conditions),
            [
                row(
                    "AWSEBSCSIDriverOperatorCRAvailable",
                    "False",
                    "WaitForOperator"
                ),
                row(
                    "AWSEBSCSIDriverOperatorCRProgressing",
                    "True",
                    "WaitForOperator"
                ),
                row("AWSEBSCSIDriverOperatorCRDegraded", "False", "NoData"),
                row("AWSEBSCSIDriverOperatorCRUpgradeable", "True", "NoData"),
            ]
        );
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("Waiting for AWSEBS operator to report status")
        );
    }

    #[test]
    fn a_reporting_driver_is_unioned_by_kind() {
        let gcp = find("gcp-pd").unwrap();
        let reported = status(&[
            (
                "GCPPDDriverControllerServiceControllerAvailable",
                ConditionStatus::True,
                "AsExpected",
                "",
            ),
            (
                "GCPPDDriverNodeServiceControllerAvailable",
                ConditionStatus::False,
                "Deploying",
                "waiting for 2 pods",
            ),
            (
                "GCPPDDriverNodeServiceControllerProgressing",
                ConditionStatus::True,
                "Deploying",
                "",
            ),
            (
                "StorageClassControllerDegraded",
                ConditionStatus::False,
                "AsExpected",
                "",
            ),
        ]);
        let conditions = storage_conditions(&gcp, Some(&reported), now());
        assert_eq!(
            summary(&conditions),
            [
                row(
                    "GCPPDCSIDriverOperatorCRAvailable",
                    "False",
                    "GCPPDDriverNodeServiceController_Deploying"
                ),
                row(
                    "GCPPDCSIDriverOperatorCRProgressing",
                    "True",
                    "GCPPDDriverNodeServiceController_Deploying"
                ),
                row("GCPPDCSIDriverOperatorCRDegraded", "False", "AsExpected"),
                row("GCPPDCSIDriverOperatorCRUpgradeable", "True", "NoData"),
            ]
        );
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("GCPPDDriverNodeServiceControllerAvailable: waiting for 2 pods")
        );
    }

    #[test]
    fn a_disabled_driver_counts_as_available_only_when_allowed() {
        let disabled = status(&[(
            "CSIControllerDisabled",
            ConditionStatus::True,
            "NoManila",
            "no Manila share types",
        )]);
        let manila = find("openstack-manila").unwrap();
        let conditions = storage_conditions(&manila, Some(&disabled), now());
        assert_eq!(
            summary(&conditions)[0],
            row(
                "ManilaCSIDriverOperatorCRAvailable",
                "True",
                "DriverDisabled"
            )
        );
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("CSI driver for Manila is disabled: no Manila share types")
        );
        assert_eq!(
            summary(&conditions)[1],
            row(
                "ManilaCSIDriverOperatorCRProgressing",
                "False",
                "DriverDisabled"
            )
        );

        // A driver that may not disable itself keeps waiting.
        let cinder = find("openstack-cinder").unwrap();
        assert_eq!(
            storage_conditions(&cinder, Some(&disabled), now())[0]
                .reason
                .as_deref(),
            Some("WaitForOperator")
        );

        // A Disabled condition that is False does not disable.
        let enabled = status(&[("CSIControllerDisabled", ConditionStatus::False, "", "")]);
        assert_eq!(
            storage_conditions(&manila, Some(&enabled), now())[0]
                .reason
                .as_deref(),
            Some("WaitForOperator")
        );
    }
}
