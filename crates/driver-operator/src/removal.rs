//! Removal guarded by volumes in use: for drivers whose table sets `removalBlockedByVolumes`
//! (e.g. AWS EFS), `managementState: Removed` uninstalls the operands only once no
//! PersistentVolume of the driver is Bound. Until then nothing is deleted, the finalizers stay,
//! and `<prefix>RemovalProgressing` says which volumes block it and what to do. Only such
//! drivers watch PersistentVolumes (see [`super::observe`]).

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::ResourceExt;
use opkit::conditions::condition;

use csi_kit::def::DriverDef;
use csi_kit::status;

/// How many blocking volumes a message names.
pub const LISTED_VOLUMES: usize = 5;
/// Reason of the condition while bound volumes block the removal.
pub const REASON_VOLUMES_IN_USE: &str = "VolumesInUse";

/// `<prefix>RemovalProgressing`.
pub fn condition_type(def: &DriverDef) -> String {
    format!("{}RemovalProgressing", def.condition_prefix)
}

/// The names of the Bound PersistentVolumes of this driver, sorted.
pub fn bound_volumes(def: &DriverDef, volumes: &[PersistentVolume]) -> Vec<String> {
    let mut names: Vec<String> = volumes
        .iter()
        .filter(|pv| {
            pv.spec
                .as_ref()
                .and_then(|s| s.csi.as_ref())
                .is_some_and(|csi| csi.driver == def.name)
                && pv
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_some_and(|phase| phase == "Bound")
        })
        .map(|pv| pv.name_any())
        .collect();
    names.sort();
    names
}

/// The removal condition: True with the blocking volumes (at most [`LISTED_VOLUMES`] named)
/// while Removed is requested and volumes are bound, False otherwise.
pub fn removal_condition(
    def: &DriverDef,
    removing: bool,
    blocking: &[String],
) -> OperatorCondition {
    if !removing || blocking.is_empty() {
        return condition(
            condition_type(def),
            ConditionStatus::False,
            status::REASON_AS_EXPECTED,
            "",
        );
    }
    let mut listed = blocking
        .iter()
        .take(LISTED_VOLUMES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if blocking.len() > LISTED_VOLUMES {
        listed.push_str(&format!(" and {} more", blocking.len() - LISTED_VOLUMES));
    }
    condition(
        condition_type(def),
        ConditionStatus::True,
        REASON_VOLUMES_IN_USE,
        format!(
            "managementState is Removed, but {} PersistentVolume(s) of {} are still bound ({listed}): the driver stays installed so they can be unmounted; delete the claims using them (or set managementState back to Managed) and the driver is removed",
            blocking.len(),
            def.name
        ),
    )
}
