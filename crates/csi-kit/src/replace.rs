//! When an operand cannot simply be applied over the live object: fields the API server refuses
//! to change, and objects that are not ours. Pure: the plans decide with it, the apply steps
//! only carry the decision out.
//!
//! The rule:
//! 1. The API server refuses to change some fields once an object exists (Kubernetes 1.36):
//!    a StorageClass's `provisioner`, `parameters`, `reclaimPolicy` (defaulted to `Delete`) and
//!    `volumeBindingMode` (defaulted to `Immediate`); a CSIDriver's `attachRequired` (defaulted
//!    to true) and `volumeLifecycleModes` (defaulted to `[Persistent]`). Other fields are
//!    applied as usual.
//! 2. An object of ours whose immutable fields must change is replaced: deleted, then created.
//!    Volumes provisioned from a StorageClass keep their own copy of its parameters, so they
//!    are not affected.
//! 3. An object that is not ours (an admin's StorageClass of the same name, a CSIDriver another
//!    installer made) is never deleted and never written: it is kept as it is, and the owner
//!    reports which object, which fields and what to do.
//! 4. Nothing is ever deleted because an apply failed: a refused write is reported, and the live
//!    object stays until the input is fixed.
//!
//! library-go applies over any same-named StorageClass and recreates it when immutable fields
//! differ, whoever made it; here rule 3 keeps an admin's class instead. What counts as "ours"
//! is decided by the caller: the driver operator treats a class whose provisioner is its
//! driver as its own (OpenShift's Go operators did not label their classes, and taking them over
//! is the point of a drop-in replacement); a CSIDriverDeployment owns the objects that carry its
//! owner labels.

use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};

/// What to do with one operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Apply it (create, or patch the mutable fields).
    Apply,
    /// Delete the live object and create the desired one: these immutable fields differ.
    Replace(Vec<&'static str>),
    /// Leave the live object alone: it is not ours. The fields that differ, if any.
    Keep(Vec<&'static str>),
}

/// The decision for a StorageClass, given the live object of the same name and whether it is
/// ours.
pub fn storage_class(desired: &StorageClass, live: Option<&StorageClass>, ours: bool) -> Decision {
    let Some(live) = live else {
        return Decision::Apply;
    };
    let changed = storage_class_changes(desired, live);
    decide(changed, ours)
}

/// The decision for a CSIDriver, given the live object of the same name and whether it is ours.
pub fn csi_driver(desired: &CSIDriver, live: Option<&CSIDriver>, ours: bool) -> Decision {
    let Some(live) = live else {
        return Decision::Apply;
    };
    let changed = csi_driver_changes(desired, live);
    decide(changed, ours)
}

fn decide(changed: Vec<&'static str>, ours: bool) -> Decision {
    match (ours, changed.is_empty()) {
        (false, _) => Decision::Keep(changed),
        (true, true) => Decision::Apply,
        (true, false) => Decision::Replace(changed),
    }
}

/// The immutable fields of a StorageClass whose desired value differs from the live one (both
/// with the API server's defaults).
pub fn storage_class_changes(desired: &StorageClass, live: &StorageClass) -> Vec<&'static str> {
    let reclaim = |c: &StorageClass| c.reclaim_policy.clone().unwrap_or_else(|| "Delete".into());
    let binding = |c: &StorageClass| {
        c.volume_binding_mode
            .clone()
            .unwrap_or_else(|| "Immediate".into())
    };
    let parameters = |c: &StorageClass| c.parameters.clone().unwrap_or_default();
    let mut changed = Vec::new();
    if desired.provisioner != live.provisioner {
        changed.push("provisioner");
    }
    if parameters(desired) != parameters(live) {
        changed.push("parameters");
    }
    if reclaim(desired) != reclaim(live) {
        changed.push("reclaimPolicy");
    }
    if binding(desired) != binding(live) {
        changed.push("volumeBindingMode");
    }
    changed
}

/// The immutable fields of a CSIDriver's spec whose desired value differs from the live one
/// (both with the API server's defaults).
pub fn csi_driver_changes(desired: &CSIDriver, live: &CSIDriver) -> Vec<&'static str> {
    let attach = |d: &CSIDriver| d.spec.attach_required.unwrap_or(true);
    let modes = |d: &CSIDriver| {
        d.spec
            .volume_lifecycle_modes
            .clone()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| vec!["Persistent".to_owned()])
    };
    let mut changed = Vec::new();
    if attach(desired) != attach(live) {
        changed.push("attachRequired");
    }
    if modes(desired) != modes(live) {
        changed.push("volumeLifecycleModes");
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(value: serde_json::Value) -> StorageClass {
        let mut object = json!({"metadata": {"name": "fast"}, "provisioner": "a.example.com"});
        if let (Some(object), Some(extra)) = (object.as_object_mut(), value.as_object()) {
            object.extend(extra.clone());
        }
        serde_json::from_value(object).unwrap_or_default()
    }

    fn driver(value: serde_json::Value) -> CSIDriver {
        serde_json::from_value(json!({"metadata": {"name": "a.example.com"}, "spec": value}))
            .unwrap_or_default()
    }

    #[test]
    fn defaults_are_not_changes() {
        let desired = class(json!({"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}));
        assert_eq!(
            storage_class_changes(&desired, &class(json!({}))),
            Vec::<&str>::new()
        );
        let desired =
            driver(json!({"attachRequired": true, "volumeLifecycleModes": ["Persistent"]}));
        assert_eq!(
            csi_driver_changes(&desired, &driver(json!({}))),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn every_immutable_storage_class_field_is_found() {
        let live = class(json!({"parameters": {"type": "gp3"}}));
        let desired = class(json!({
            "provisioner": "b.example.com",
            "parameters": {"type": "io2"},
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": true,
        }));
        assert_eq!(
            storage_class_changes(&desired, &live),
            vec![
                "provisioner",
                "parameters",
                "reclaimPolicy",
                "volumeBindingMode"
            ]
        );
    }

    #[test]
    fn mutable_fields_are_applied() {
        let live = class(json!({}));
        let desired = class(json!({"allowVolumeExpansion": true, "mountOptions": ["ro"]}));
        assert_eq!(storage_class(&desired, Some(&live), true), Decision::Apply);
        let desired = driver(json!({"podInfoOnMount": true, "fsGroupPolicy": "File"}));
        assert_eq!(
            csi_driver(&desired, Some(&driver(json!({}))), true),
            Decision::Apply
        );
    }

    #[test]
    fn ours_is_replaced_and_anothers_kept() {
        let live = class(json!({"reclaimPolicy": "Retain"}));
        let desired = class(json!({}));
        assert_eq!(
            storage_class(&desired, Some(&live), true),
            Decision::Replace(vec!["reclaimPolicy"])
        );
        assert_eq!(
            storage_class(&desired, Some(&live), false),
            Decision::Keep(vec!["reclaimPolicy"])
        );
        assert_eq!(
            storage_class(&desired, Some(&class(json!({}))), false),
            Decision::Keep(vec![])
        );
        assert_eq!(storage_class(&desired, None, false), Decision::Apply);
        let live = driver(json!({"volumeLifecycleModes": ["Ephemeral"]}));
        assert_eq!(
            csi_driver(&driver(json!({})), Some(&live), true),
            Decision::Replace(vec!["volumeLifecycleModes"])
        );
    }
}
