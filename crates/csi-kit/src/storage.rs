//! The CSIDriver object, StorageClasses (with the default-class rule) and
//! VolumeSnapshotClasses.

use std::collections::BTreeMap;

use api::operator_v1::StorageClassStateName;
use k8s_openapi::api::storage::v1::{CSIDriver, CSIDriverSpec, StorageClass, TokenRequest};
use serde_json::{Value, json};

use crate::def::{DriverDef, StorageClassDef};
use crate::inputs::Inputs;
use crate::names;

/// The CSIDriver object. The `security.openshift.io/csi-ephemeral-volume-profile` label keeps
/// an admin's value; otherwise it is the driver's default, if it has one. It always carries
/// `csi.openshift.io/managed: "true"` (see [`names::MANAGED_CSIDRIVER_ANNOTATION`]).
pub fn build_csi_driver(def: &DriverDef, inputs: &Inputs) -> CSIDriver {
    let d = &def.csi_driver;
    let mut metadata = names::meta(def, def.name.clone(), None);
    metadata.annotations = Some(BTreeMap::from([(
        names::MANAGED_CSIDRIVER_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    let profile = inputs
        .csi_driver_ephemeral_profile
        .clone()
        .or_else(|| d.ephemeral_volume_profile.clone());
    if let (Some(profile), Some(labels)) = (profile, metadata.labels.as_mut()) {
        labels.insert(names::EPHEMERAL_PROFILE_LABEL.to_owned(), profile);
    }
    CSIDriver {
        metadata,
        spec: CSIDriverSpec {
            attach_required: Some(d.attach_required),
            pod_info_on_mount: Some(d.pod_info_on_mount),
            fs_group_policy: Some(d.fs_group_policy.clone()),
            volume_lifecycle_modes: Some(d.volume_lifecycle_modes.clone()),
            requires_republish: Some(d.requires_republish),
            storage_capacity: Some(d.storage_capacity),
            se_linux_mount: Some(d.se_linux_mount),
            token_requests: (!d.token_request_audiences.is_empty()).then(|| {
                d.token_request_audiences
                    .iter()
                    .map(|a| TokenRequest {
                        audience: a.clone(),
                        ..TokenRequest::default()
                    })
                    .collect()
            }),
            ..CSIDriverSpec::default()
        },
    }
}

/// The value of the default-class annotation for a class the driver proposes as default:
/// an existing class of the same name that carries the annotation (any value, even empty)
/// keeps it, because that is an admin's choice; else `"false"` when another class is already
/// the default; else `"true"`.
pub fn default_class_annotation(name: &str, inputs: &Inputs) -> String {
    if let Some(existing) = inputs
        .storage_classes
        .iter()
        .find(|sc| sc.name == name)
        .and_then(|sc| sc.default_annotation.clone())
    {
        return existing;
    }
    let other_default = inputs
        .storage_classes
        .iter()
        .any(|sc| sc.name != name && sc.default_annotation.as_deref() == Some("true"));
    if other_default { "false" } else { "true" }.to_owned()
}

/// The classes of the table this cluster gets (after the filter), then the generated ones.
fn wanted_classes(def: &DriverDef, inputs: &Inputs) -> Vec<StorageClassDef> {
    let mut classes: Vec<StorageClassDef> = def
        .storage_classes
        .iter()
        .filter(|sc| {
            def.hooks
                .storage_class_filter
                .is_none_or(|keep| keep(inputs, sc))
        })
        .cloned()
        .collect();
    if let Some(generate) = def.storage_class_generator {
        classes.extend(generate(inputs));
    }
    classes
}

fn build_storage_class(def: &DriverDef, sc: &StorageClassDef, inputs: &Inputs) -> StorageClass {
    let mut class = StorageClass {
        metadata: names::meta(def, sc.name.clone(), None),
        provisioner: def.name.clone(),
        parameters: (!sc.parameters.is_empty()).then(|| sc.parameters.clone()),
        volume_binding_mode: Some(sc.volume_binding_mode.clone()),
        allow_volume_expansion: Some(sc.allow_volume_expansion),
        reclaim_policy: Some(sc.reclaim_policy.clone()),
        ..StorageClass::default()
    };
    for hook in &def.hooks.storage_class {
        hook(inputs, &mut class);
    }
    if sc.default {
        class
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                names::DEFAULT_STORAGE_CLASS_ANNOTATION.to_owned(),
                default_class_annotation(&sc.name, inputs),
            );
    }
    class
}

/// The StorageClasses to apply: those the driver's filter selects (all, without one) when
/// `storageClassState` is Managed (or unset), none when it is Unmanaged (left alone) or Removed
/// (the controller deletes them).
pub fn build_storage_classes(def: &DriverDef, inputs: &Inputs) -> Vec<StorageClass> {
    if inputs.spec.storage_class_state() != StorageClassStateName::Managed {
        return Vec::new();
    }
    wanted_classes(def, inputs)
        .iter()
        .map(|sc| build_storage_class(def, sc, inputs))
        .collect()
}

/// The StorageClasses the operator must delete: the driver's classes (as its filter selects
/// them) when `storageClassState` is Removed, none otherwise (Unmanaged leaves them alone).
pub fn storage_classes_to_delete(def: &DriverDef, inputs: &Inputs) -> Vec<String> {
    if inputs.spec.storage_class_state() != StorageClassStateName::Removed {
        return Vec::new();
    }
    // Only the classes this cluster would get: a class of the same name outside the selection
    // is somebody else's.
    wanted_classes(def, inputs)
        .into_iter()
        .map(|sc| sc.name)
        .collect()
}

/// The VolumeSnapshotClasses (`snapshot.storage.k8s.io/v1`, no typed struct), only when
/// their CRD exists.
pub fn build_volume_snapshot_classes(def: &DriverDef, inputs: &Inputs) -> Vec<Value> {
    if !inputs.crds.volume_snapshot_class {
        return Vec::new();
    }
    def.volume_snapshot_classes
        .iter()
        .map(|vsc| {
            let mut metadata = json!({
                "name": vsc.name,
                "labels": { names::OPERAND_LABEL: def.short_name },
            });
            if vsc.default {
                metadata["annotations"] =
                    json!({ names::DEFAULT_SNAPSHOT_CLASS_ANNOTATION: "true" });
            }
            let mut class = json!({
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshotClass",
                "metadata": metadata,
                "driver": def.name,
                "deletionPolicy": vsc.deletion_policy,
            });
            if !vsc.parameters.is_empty() {
                class["parameters"] = json!(vsc.parameters);
            }
            for hook in &def.hooks.volume_snapshot_class {
                hook(inputs, &mut class);
            }
            class
        })
        .collect()
}

/// The StorageClass controller's validation of the ClusterCSIDriver: an unknown
/// `storageClassState` is an error (reported as `StorageClassControllerDegraded`, and nothing is
/// applied or deleted until it changes).
pub fn validate_storage_class_state(inputs: &Inputs) -> Result<(), String> {
    match inputs.spec.storage_class_state() {
        StorageClassStateName::Other(value) => Err(format!(
            "invalid storageClassState {value:?} in the ClusterCSIDriver: use Managed, Unmanaged or Removed"
        )),
        _ => Ok(()),
    }
}
