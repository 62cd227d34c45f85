//! Removing operands: the ones the spec no longer wants, the whole driver on
//! `managementState: Removed`, and on deletion the cluster-scoped ones, after which
//! [`FINALIZER`] comes off. What the driver's PersistentVolumes need is held back.

use api::csidriver_v1alpha1::CSIDriverDeployment;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::apply::delete;
use crate::caches::SnapshotApi;
use crate::context::{Context, key};
use crate::error::StepError;
use crate::observe::{Existing, existing, volumes_of};
use crate::plan::Pass;
use crate::{CONTROLLER_NAME, FINALIZER};

/// Adds [`FINALIZER`] to `cd`, or takes it off, unless it already is as asked.
pub(crate) async fn set_finalizer(
    context: &Context,
    cd: &CSIDriverDeployment,
    present: bool,
) -> Result<(), StepError> {
    let mut finalizers = cd.finalizers().to_vec();
    let has = finalizers.iter().any(|f| f == FINALIZER);
    if has == present {
        return Ok(());
    }
    if present {
        finalizers.push(FINALIZER.to_owned());
    } else {
        finalizers.retain(|f| f != FINALIZER);
    }
    let api: Api<CSIDriverDeployment> =
        Api::namespaced(context.client.clone(), &cd.namespace().unwrap_or_default());
    // The resourceVersion makes this a compare-and-swap on the list.
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": cd.resource_version(),
    }});
    api.patch(
        &cd.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| StepError::Finalizer {
        owner: key(cd),
        source,
    })?;
    context
        .metrics
        .wrote(CONTROLLER_NAME, "CSIDriverDeployment/finalizers");
    Ok(())
}

/// What [`remove`] deletes while PersistentVolumes of the driver exist.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    /// Operands the spec no longer wants: all but the CSIDriver and StorageClasses.
    Stale,
    /// The whole driver (Removed, or the object deleted): nothing at all, because the volumes
    /// still need every part of it: the provisioner and its RBAC to delete them, the node
    /// pods to unmount them.
    Uninstall,
}

/// Deletes the given operands, holding back what the driver's existing volumes need (see
/// [`Removal`]); failures and what was held back go into `pass`.
pub(crate) async fn remove(
    context: &Context,
    cd: &CSIDriverDeployment,
    doomed: Vec<Existing>,
    removal: Removal,
    pass: &mut Pass,
) {
    let volumes = volumes_of(context, &cd.spec.driver_name);
    for object in doomed {
        if volumes > 0 && (removal == Removal::Uninstall || object.0.holds_volumes()) {
            pass.volumes_in_use = volumes;
            pass.uninstall_held |= removal == Removal::Uninstall;
            continue;
        }
        if let Err(error) = delete(context, cd, &object).await {
            pass.failures.push(error);
        }
    }
}

/// Removes the cluster-scoped operands of `cd`, which is being deleted (the namespaced ones go
/// with it, through their ownerReferences). Returns whether anything of ours may be left, in
/// which case the finalizer stays.
pub(crate) async fn remove_cluster_scoped(
    context: &Context,
    cd: &CSIDriverDeployment,
    pass: &mut Pass,
) -> bool {
    // While the snapshot classes' cache fills, some of ours may not be listed yet; its
    // first full list asks for this object again. (Asked before listing: a cache that
    // fills in between is then listed.)
    let filling = matches!(context.caches.snapshot_api(), SnapshotApi::Filling);
    let cluster_scoped: Vec<Existing> = existing(context, cd)
        .into_iter()
        .filter(|(_, ns, _)| ns.is_none())
        .collect();
    let left = !cluster_scoped.is_empty() || filling;
    remove(context, cd, cluster_scoped, Removal::Uninstall, pass).await;
    left
}
