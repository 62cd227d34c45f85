//! The plan of one pass: what the build is given, how each StorageClass is written (applied,
//! replaced or left alone), which operands are stale, and what the pass found ([`Pass`]), for
//! the status.

use std::collections::BTreeSet;

use api::csidriver_v1alpha1::{CSIDriverDeployment, GenerationHistory};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;

use crate::build::DeclaredInputs;
use crate::caches::SnapshotApi;
use crate::context::Context;
use crate::error::StepError;
use crate::kinds::OwnedKind;
use crate::observe::{Existing, live_storage_class, owned_by};
use crate::reasons::{REASON_SNAPSHOT_API_MISSING, REASON_STORAGE_CLASS_EXISTS};
use crate::validate::Invalid;
use csi_kit::inputs::{OptionalKind, from_objects};
use csi_kit::replace::Decision;

/// What a pass found, for the status.
#[derive(Default)]
pub(crate) struct Pass {
    pub(crate) problems: Vec<Invalid>,
    pub(crate) failures: Vec<StepError>,
    /// Operands left alone because an object of their name is not ours.
    pub(crate) kept: Vec<Invalid>,
    pub(crate) volumes_in_use: usize,
    /// The uninstall waits for the volumes (everything is held back, not only the CSIDriver
    /// and StorageClasses).
    pub(crate) uninstall_held: bool,
    pub(crate) children: Vec<GenerationHistory>,
    pub(crate) removed: bool,
}

/// How a wanted StorageClass is written, as [`csi_kit::replace`] decides against the class of
/// that name: `Some(false)` applied, `Some(true)` replaced (its immutable fields changed);
/// `None` left alone, when that class is not ours (in `pass.kept`) or could not be read (in
/// `pass.failures`).
pub(crate) async fn storage_class_replace(
    context: &Context,
    cd: &CSIDriverDeployment,
    class: &StorageClass,
    pass: &mut Pass,
) -> Option<bool> {
    let name = class.name_any();
    let live = match live_storage_class(context, &name).await {
        Ok(live) => live,
        Err(error) => {
            pass.failures.push(error);
            return None;
        }
    };
    let ours = live.as_ref().is_some_and(|sc| owned_by(cd, &sc.metadata));
    match csi_kit::replace::storage_class(class, live.as_ref(), ours) {
        Decision::Apply => Some(false),
        Decision::Replace(_) => Some(true),
        Decision::Keep(_) => {
            pass.kept.push(kept_class(cd, &name, live.as_ref()));
            None
        }
    }
}

/// Why the class `name` of `cd` is not applied: a class of that name exists and is not ours.
fn kept_class(cd: &CSIDriverDeployment, name: &str, live: Option<&StorageClass>) -> Invalid {
    let index = cd
        .spec
        .storage_class_templates
        .iter()
        .position(|t| t.metadata.name.as_deref() == Some(name))
        .unwrap_or_default();
    let provisioner = live.map(|sc| sc.provisioner.as_str()).unwrap_or_default();
    Invalid {
        field: format!("spec.storageClassTemplates[{index}].metadata.name"),
        reason: REASON_STORAGE_CLASS_EXISTS,
        message: format!(
            "StorageClass {name} already exists and was not made by this CSIDriverDeployment (provisioner {provisioner}): it is left as it is; choose another name, or delete that class to have this one created"
        ),
    }
}

/// The operands that exist and are no longer wanted. VolumeSnapshotClasses count only when
/// this pass built them (`snapshot_classes_built`): their cache may have filled since the
/// build, which then left them out, and they must not be taken for stale ones.
pub(crate) fn stale(
    existing: Vec<Existing>,
    wanted: &BTreeSet<Existing>,
    snapshot_classes_built: bool,
) -> Vec<Existing> {
    existing
        .into_iter()
        .filter(|e| !wanted.contains(e))
        .filter(|(kind, _, _)| *kind != OwnedKind::VolumeSnapshotClass || snapshot_classes_built)
        .collect()
}

/// What the build is given: the layout and SCCs found at start, the StorageClasses that exist
/// (for the default-class rule), whether VolumeSnapshotClasses can be applied now, and the
/// sidecar images of the environment.
pub(crate) fn declared_inputs(context: &Context, snapshot_api: &SnapshotApi) -> DeclaredInputs {
    DeclaredInputs {
        topology: context.topology,
        scc_api: context.scc_api,
        storage_classes: context
            .caches
            .storage_classes
            .state()
            .iter()
            .map(|sc| from_objects::existing_storage_class(sc))
            .collect(),
        snapshot_classes: matches!(snapshot_api, SnapshotApi::Served(_)),
        env: context.env.clone(),
    }
}

/// Why the VolumeSnapshotClass templates of `cd` wait: the cluster does not serve their kind.
/// `None` when there are none, or when the kind is served (or its cache is filling).
pub(crate) fn snapshot_classes_waiting(
    cd: &CSIDriverDeployment,
    snapshot_api: &SnapshotApi,
) -> Option<Invalid> {
    if cd.spec.volume_snapshot_class_templates.is_empty()
        || !matches!(snapshot_api, SnapshotApi::NotServed)
    {
        return None;
    }
    Some(Invalid {
        field: "spec.volumeSnapshotClassTemplates".to_owned(),
        reason: REASON_SNAPSHOT_API_MISSING,
        message: format!(
            "the cluster does not serve {}: install the VolumeSnapshot CRDs and the snapshot controller (kubernetes-csi/external-snapshotter); the classes are created as soon as the CRD exists, and the rest of the driver is installed meanwhile",
            OptionalKind::VolumeSnapshotClass.crd_name()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_classes_are_stale_only_when_this_pass_built_them() {
        let class = (OwnedKind::VolumeSnapshotClass, None, "snap".to_owned());
        let role = (OwnedKind::ClusterRole, None, "gone".to_owned());
        let kept = (OwnedKind::StorageClass, None, "kept".to_owned());
        let wanted = BTreeSet::from([kept.clone()]);
        let existing = vec![class.clone(), role.clone(), kept];
        // Built without the classes (their cache was filling): the class is not stale.
        assert_eq!(
            stale(existing.clone(), &wanted, false),
            std::slice::from_ref(&role)
        );
        // Built with them, and the template is gone: it is.
        assert_eq!(stale(existing, &wanted, true), [class, role]);
    }
}
