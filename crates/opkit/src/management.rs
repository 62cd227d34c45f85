//! Management state as a strategy chosen once per reconcile, rather than `if`s spread through
//! every controller: what `spec.managementState` means for an operator that may or may not
//! support removal of its operands, and the `ManagementStateDegraded` condition that says so.

use api::operator_v1::{ConditionStatus, ManagementState, OperatorCondition};

use crate::conditions::condition;

/// The condition every operator sets about its management state.
pub const MANAGEMENT_STATE_DEGRADED: &str = "ManagementStateDegraded";

/// What the controllers of an operator do in this reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Keep the operands at their desired state (Managed, and Force).
    Manage,
    /// Hands off: no writes to operands, conditions left as they were.
    Pause,
    /// Delete the operands, then release the finalizer.
    Remove,
    /// Removal was asked of an operator that cannot remove its operands: do nothing, say so.
    RefuseRemoval,
    /// A management state this version does not know: do nothing, say so.
    Unsupported(String),
}

/// The strategy for `state`. `removable` says whether this operator supports Removed (platform
/// drivers do not: deleting the cluster's only storage driver would strand its volumes).
pub fn mode(state: &ManagementState, removable: bool) -> Mode {
    match state {
        ManagementState::Managed | ManagementState::Force => Mode::Manage,
        ManagementState::Unmanaged => Mode::Pause,
        ManagementState::Removed if removable => Mode::Remove,
        ManagementState::Removed => Mode::RefuseRemoval,
        ManagementState::Other(value) => Mode::Unsupported(value.clone()),
    }
}

/// The `ManagementStateDegraded` condition for `mode`, with library-go's reasons and messages.
/// `operator` names the operator in the message, e.g. `GCPPD`.
pub fn management_state_degraded(mode: &Mode, operator: &str) -> OperatorCondition {
    match mode {
        Mode::Manage | Mode::Pause | Mode::Remove => {
            condition(MANAGEMENT_STATE_DEGRADED, ConditionStatus::False, "", "")
        }
        Mode::RefuseRemoval => condition(
            MANAGEMENT_STATE_DEGRADED,
            ConditionStatus::True,
            "Removed",
            format!(
                "Removed is not supported for {operator} operator: set spec.managementState to Managed or Unmanaged"
            ),
        ),
        Mode::Unsupported(value) => condition(
            MANAGEMENT_STATE_DEGRADED,
            ConditionStatus::True,
            "Unknown",
            format!(
                "Unsupported management state {value:?} for {operator} operator: set spec.managementState to Managed, Unmanaged or Removed"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case(ManagementState::Managed, false, Mode::Manage)]
    #[case(ManagementState::Force, false, Mode::Manage)]
    #[case(ManagementState::Unmanaged, false, Mode::Pause)]
    #[case(ManagementState::Removed, true, Mode::Remove)]
    #[case(ManagementState::Removed, false, Mode::RefuseRemoval)]
    #[case(ManagementState::from("Sideways"), true, Mode::Unsupported("Sideways".into()))]
    fn each_state_picks_one_strategy(
        #[case] state: ManagementState,
        #[case] removable: bool,
        #[case] expected: Mode,
    ) {
        assert_eq!(mode(&state, removable), expected);
    }

    #[test]
    fn refused_and_unknown_states_degrade_with_a_fix() {
        let refused = management_state_degraded(&Mode::RefuseRemoval, "GCPPD");
        assert_eq!(refused.status, ConditionStatus::True);
        assert_eq!(refused.reason.as_deref(), Some("Removed"));
        assert!(
            refused
                .message
                .as_deref()
                .unwrap()
                .contains("Removed is not supported for GCPPD operator")
        );

        let unknown = management_state_degraded(&Mode::Unsupported("Sideways".into()), "GCPPD");
        assert_eq!(unknown.reason.as_deref(), Some("Unknown"));
        assert!(unknown.message.as_deref().unwrap().contains("\"Sideways\""));

        let fine = management_state_degraded(&Mode::Pause, "GCPPD");
        assert_eq!(fine.status, ConditionStatus::False);
        assert_eq!(fine.reason, None);
    }
}
