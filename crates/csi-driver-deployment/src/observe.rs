//! What a pass reads about the cluster: which objects are ours, the facts validation needs,
//! the operands of a CSIDriverDeployment that exist, the volumes of its driver.

use api::csidriver_v1alpha1::CSIDriverDeployment;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource, ResourceExt};
use opkit::runtime::snapshot;

use crate::caches::SnapshotApi;
use crate::context::Context;
use crate::error::StepError;
use crate::kinds::OwnedKind;
use crate::validate::{Claimant, ClusterFacts};
use crate::{OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL};
use csi_kit::render::Operand;

/// Whether `meta` is an operand this controller made for `cd`: the owner labels name `cd`, and
/// our field manager applied it. Labels alone prove nothing (a copy of a class, made by a user
/// or by Kubernetes' storage e2e suite, carries them; see [`opkit::ownership`]), and only what
/// we made is ever deleted or replaced.
pub(crate) fn owned_by(
    cd: &CSIDriverDeployment,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    owner_labels(meta).is_some_and(|(ns, name)| {
        Some(ns) == cd.metadata.namespace.as_ref() && Some(name) == cd.metadata.name.as_ref()
    })
}

/// The CSIDriverDeployment (namespace, name) that made the object: the one its owner labels
/// name, when our field manager applied it; `None` for anyone else's object, labelled or not.
fn owner_labels(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<(&String, &String)> {
    let labels = meta.labels.as_ref()?;
    let owner = (
        labels.get(OWNER_NAMESPACE_LABEL)?,
        labels.get(OWNER_NAME_LABEL)?,
    );
    opkit::ownership::applied_by_us(meta).then_some(owner)
}

/// The facts about the cluster that validation needs.
pub(crate) fn facts(context: &Context, cd: &CSIDriverDeployment) -> ClusterFacts {
    let claimants = snapshot(&context.caches.deployments_declared)
        .into_iter()
        .filter(|other| {
            other.spec.driver_name == cd.spec.driver_name
                && other.metadata.deletion_timestamp.is_none()
                && other.metadata.uid != cd.metadata.uid
        })
        .map(|other| Claimant {
            namespace: other.namespace().unwrap_or_default(),
            name: other.name_any(),
            created: other.metadata.creation_timestamp.clone(),
        })
        .collect();
    let csi_driver = context
        .caches
        .csi_drivers
        .get(&ObjectRef::new(&cd.spec.driver_name));
    let csi_driver_owner = csi_driver
        .as_ref()
        .map(|driver| owner_labels(&driver.metadata).map(|(ns, name)| (ns.clone(), name.clone())));
    let csi_driver_installer = csi_driver
        .filter(|_| csi_driver_owner == Some(None))
        .map(|driver| opkit::ownership::installer(&driver.metadata));
    ClusterFacts {
        claimants,
        csi_driver_owner,
        csi_driver_installer,
    }
}

/// How many PersistentVolumes of `driver` exist.
pub(crate) fn volumes_of(context: &Context, driver: &str) -> usize {
    context
        .caches
        .volumes
        .entries()
        .iter()
        .filter(|(_, of)| of == driver)
        .count()
}

/// One operand that exists: kind, namespace, name.
pub(crate) type Existing = (OwnedKind, Option<String>, String);

/// Adds the objects of `store` that are operands of `cd` to `out`.
fn existing_of<K>(
    store: &Store<K>,
    kind: OwnedKind,
    cd: &CSIDriverDeployment,
    out: &mut Vec<Existing>,
) where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    for object in store.state() {
        if owned_by(cd, object.meta()) {
            out.push((kind, object.meta().namespace.clone(), object.name_any()));
        }
    }
}

/// Every operand of `cd` in the caches.
pub(crate) fn existing(context: &Context, cd: &CSIDriverDeployment) -> Vec<Existing> {
    let c = &context.caches;
    let mut out = Vec::new();
    existing_of(&c.service_accounts, OwnedKind::ServiceAccount, cd, &mut out);
    existing_of(&c.roles, OwnedKind::Role, cd, &mut out);
    existing_of(&c.role_bindings, OwnedKind::RoleBinding, cd, &mut out);
    existing_of(&c.cluster_roles, OwnedKind::ClusterRole, cd, &mut out);
    existing_of(
        &c.cluster_role_bindings,
        OwnedKind::ClusterRoleBinding,
        cd,
        &mut out,
    );
    existing_of(&c.pdbs, OwnedKind::PodDisruptionBudget, cd, &mut out);
    existing_of(&c.deployments, OwnedKind::Deployment, cd, &mut out);
    existing_of(&c.daemon_sets, OwnedKind::DaemonSet, cd, &mut out);
    existing_of(&c.csi_drivers, OwnedKind::CSIDriver, cd, &mut out);
    existing_of(&c.storage_classes, OwnedKind::StorageClass, cd, &mut out);
    if let SnapshotApi::Served(classes) = c.snapshot_api() {
        for class in classes {
            if owned_by(cd, &class.metadata) {
                out.push((OwnedKind::VolumeSnapshotClass, None, class.name_any()));
            }
        }
    }
    out
}

/// The kind, namespace and name of `operand`; `None` for an operand a CSIDriverDeployment
/// never has (its apply is refused with a message).
pub(crate) fn operand_key(operand: &Operand) -> Option<Existing> {
    let kind = OwnedKind::of(operand)?;
    let v = operand.to_value();
    Some((
        kind,
        v["metadata"]["namespace"].as_str().map(str::to_owned),
        v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    ))
}

/// The StorageClass named `name`, whoever made it: from the cache of classes with owner labels,
/// else read from the API server (an admin's class carries none of our labels).
pub(crate) async fn live_storage_class(
    context: &Context,
    name: &str,
) -> Result<Option<StorageClass>, StepError> {
    if let Some(class) = context
        .caches
        .storage_classes
        .get(&ObjectRef::<StorageClass>::new(name))
    {
        return Ok(Some((*class).clone()));
    }
    Api::<StorageClass>::all(context.client.clone())
        .get_opt(name)
        .await
        .map_err(|source| StepError::Read {
            kind: OwnedKind::StorageClass,
            name: name.to_owned(),
            source,
        })
}
