//! Writing operands: server-side apply of each kind (the StorageClass replaced when its
//! immutable fields change, the VolumeSnapshotClass as a dynamic object) and deleting them.

use std::fmt::Debug;

use api::csidriver_v1alpha1::CSIDriverDeployment;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource, ResourceExt};
use opkit::apply::{Outcome, delete_observed};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::CONTROLLER_NAME;
use crate::caches::SnapshotClasses;
use crate::context::{Context, key};
use crate::error::StepError;
use crate::events::record_class_recreated;
use crate::kinds::OwnedKind;
use crate::observe::{Existing, owned_by};
use csi_kit::render::Operand;

/// The operand `existing` as its cache holds it now; `None` when it is gone.
fn cached(context: &Context, (kind, namespace, name): &Existing) -> Option<ObjectMeta> {
    fn meta<K>(store: &Store<K>, namespace: Option<&str>, name: &str) -> Option<ObjectMeta>
    where
        K: Resource<DynamicType = ()> + Clone + 'static,
    {
        let mut reference = ObjectRef::<K>::new(name);
        if let Some(ns) = namespace {
            reference = reference.within(ns);
        }
        store.get(&reference).map(|o| o.meta().clone())
    }
    let c = &context.caches;
    let ns = namespace.as_deref();
    match kind {
        OwnedKind::ServiceAccount => meta(&c.service_accounts, ns, name),
        OwnedKind::Role => meta(&c.roles, ns, name),
        OwnedKind::RoleBinding => meta(&c.role_bindings, ns, name),
        OwnedKind::PodDisruptionBudget => meta(&c.pdbs, ns, name),
        OwnedKind::Deployment => meta(&c.deployments, ns, name),
        OwnedKind::DaemonSet => meta(&c.daemon_sets, ns, name),
        OwnedKind::ClusterRole => meta(&c.cluster_roles, ns, name),
        OwnedKind::ClusterRoleBinding => meta(&c.cluster_role_bindings, ns, name),
        OwnedKind::CSIDriver => meta(&c.csi_drivers, ns, name),
        OwnedKind::StorageClass => meta(&c.storage_classes, ns, name),
        OwnedKind::VolumeSnapshotClass => c.snapshot_classes.store.get().and_then(|store| {
            store
                .get(&ObjectRef::new_with(name, SnapshotClasses::resource()))
                .map(|o| o.metadata.clone())
        }),
    }
}

/// Deletes an operand of `cd`, if it is still there and still one `cd` made (its owner labels
/// and our field manager, [`owned_by`]): the object as the cache holds it, and no other (its
/// uid and resourceVersion are the delete's preconditions, [`opkit::apply::delete_observed`]).
pub(crate) async fn delete(
    context: &Context,
    cd: &CSIDriverDeployment,
    existing: &Existing,
) -> Result<(), StepError> {
    let (kind, _, name) = existing;
    let Some(meta) = cached(context, existing).filter(|meta| owned_by(cd, meta)) else {
        return Ok(());
    };
    let c = context.client.clone();
    let ns = meta.namespace.clone().unwrap_or_default();
    let ns = ns.as_str();
    let params = DeleteParams::background();
    let result = match *kind {
        OwnedKind::ServiceAccount => {
            delete_observed(
                &Api::<ServiceAccount>::namespaced(c, ns),
                &meta,
                true,
                &params,
            )
            .await
        }
        OwnedKind::Role => {
            delete_observed(&Api::<Role>::namespaced(c, ns), &meta, true, &params).await
        }
        OwnedKind::RoleBinding => {
            delete_observed(&Api::<RoleBinding>::namespaced(c, ns), &meta, true, &params).await
        }
        OwnedKind::PodDisruptionBudget => {
            let api = Api::<PodDisruptionBudget>::namespaced(c, ns);
            delete_observed(&api, &meta, true, &params).await
        }
        OwnedKind::Deployment => {
            delete_observed(&Api::<Deployment>::namespaced(c, ns), &meta, true, &params).await
        }
        OwnedKind::DaemonSet => {
            delete_observed(&Api::<DaemonSet>::namespaced(c, ns), &meta, true, &params).await
        }
        OwnedKind::ClusterRole => {
            delete_observed(&Api::<ClusterRole>::all(c), &meta, true, &params).await
        }
        OwnedKind::ClusterRoleBinding => {
            delete_observed(&Api::<ClusterRoleBinding>::all(c), &meta, true, &params).await
        }
        OwnedKind::CSIDriver => {
            delete_observed(&Api::<CSIDriver>::all(c), &meta, true, &params).await
        }
        OwnedKind::StorageClass => {
            delete_observed(&Api::<StorageClass>::all(c), &meta, true, &params).await
        }
        OwnedKind::VolumeSnapshotClass => {
            let api = Api::<DynamicObject>::all_with(c, &SnapshotClasses::resource());
            delete_observed(&api, &meta, true, &params).await
        }
    };
    if let Ok(true) = result {
        tracing::info!(kind = kind.name(), name, "deleted operand");
        context.metrics.wrote(CONTROLLER_NAME, "delete");
    }
    result.map(drop).map_err(|source| StepError::Delete {
        kind: *kind,
        name: name.clone(),
        source,
    })
}

/// Applies a typed operand against what its cache holds; returns the outcome and the
/// generation observed before the write, for the status.
async fn apply_typed<K>(
    context: &Context,
    store: &Store<K>,
    desired: &K,
) -> Result<(Outcome, Option<i64>), opkit::apply::ApplyError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    let mut reference = ObjectRef::<K>::new(&desired.name_any());
    if let Some(ns) = desired.meta().namespace.as_deref() {
        reference = reference.within(ns);
    }
    let observed = store.get(&reference);
    let generation = observed.as_ref().and_then(|o| o.meta().generation);
    context
        .applier
        .apply(desired, observed.as_deref())
        .await
        .map(|outcome| (outcome, generation))
}

/// Applies a StorageClass as [`csi_kit::replace`] decided: `replace` when its immutable fields
/// (parameters, provisioner, reclaim policy, binding mode) changed, which deletes it and
/// creates it again. Volumes provisioned from it keep their copy of the parameters. A failed
/// apply never deletes anything.
async fn apply_storage_class(
    context: &Context,
    cd: &CSIDriverDeployment,
    desired: &StorageClass,
    replace: bool,
) -> Result<(Outcome, Option<i64>), StepError> {
    if !replace {
        return Ok(apply_typed(context, &context.caches.storage_classes, desired).await?);
    }
    let name = desired.name_any();
    tracing::info!(owner = %key(cd), class = name, "replacing StorageClass");
    let existing: Existing = (OwnedKind::StorageClass, None, name.clone());
    delete(context, cd, &existing).await?;
    let outcome = context.applier.apply(desired, None).await?;
    record_class_recreated(context, cd, &name).await;
    Ok((outcome, None))
}

/// Applies an operand (a StorageClass replaced when `replace`); returns the outcome and the
/// generation observed before the write.
pub(crate) async fn apply(
    context: &Context,
    cd: &CSIDriverDeployment,
    operand: &Operand,
    replace: bool,
) -> Result<(Outcome, Option<i64>), StepError> {
    let c = &context.caches;
    let result = match operand {
        Operand::ServiceAccount(o) => apply_typed(context, &c.service_accounts, o).await,
        Operand::Role(o) => apply_typed(context, &c.roles, o).await,
        Operand::RoleBinding(o) => apply_typed(context, &c.role_bindings, o).await,
        Operand::ClusterRole(o) => apply_typed(context, &c.cluster_roles, o).await,
        Operand::ClusterRoleBinding(o) => apply_typed(context, &c.cluster_role_bindings, o).await,
        Operand::PodDisruptionBudget(o) => apply_typed(context, &c.pdbs, o).await,
        Operand::Deployment(o) => apply_typed(context, &c.deployments, o).await,
        Operand::DaemonSet(o) => apply_typed(context, &c.daemon_sets, o).await,
        Operand::CSIDriver(o) => apply_typed(context, &c.csi_drivers, o).await,
        Operand::StorageClass(o) => return apply_storage_class(context, cd, o, replace).await,
        Operand::Dynamic(v) if OwnedKind::of(operand) == Some(OwnedKind::VolumeSnapshotClass) => {
            apply_snapshot_class(context, v).await
        }
        other => return Err(StepError::NotAnOperand(other.key())),
    };
    Ok(result?)
}

/// Applies a VolumeSnapshotClass (built only once its cache has filled).
async fn apply_snapshot_class(
    context: &Context,
    desired: &serde_json::Value,
) -> Result<(Outcome, Option<i64>), opkit::apply::ApplyError> {
    let resource = SnapshotClasses::resource();
    let error = |source: serde_json::Error| opkit::apply::ApplyError {
        kind: resource.kind.clone(),
        object: desired["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        cluster: None,
        source: kube::Error::SerdeError(source).into(),
    };
    let desired: DynamicObject = serde_json::from_value(desired.clone()).map_err(error)?;
    let observed = context
        .caches
        .snapshot_classes
        .store
        .get()
        .and_then(|store| store.get(&ObjectRef::new_with(&desired.name_any(), resource.clone())));
    let generation = observed.as_ref().and_then(|o| o.metadata.generation);
    context
        .applier
        .apply_dynamic(&resource, &desired, observed.as_deref())
        .await
        .map(|outcome| (outcome, generation))
}
