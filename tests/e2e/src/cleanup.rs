//! Removing what a test made, and waiting until the API server has let go of it: a real server
//! keeps a deleted namespace Terminating while its contents go, and an object with finalizers
//! until someone releases them. The next test must start from a clean cluster.

use std::fmt::Debug;

use api::operator_v1::ClusterCSIDriver;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::wait_for;

fn ignore_not_found<T>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => panic!("deleting {what}: {e}"),
    }
}

/// Deletes `name` (if it exists) and waits until the API server no longer has it.
pub async fn delete_and_wait<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let what = format!("{}/{name}", api.resource_url());
    ignore_not_found(api.delete(name, &DeleteParams::default()).await, &what);
    wait_for(&format!("{what} to be gone"), async || {
        api.get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {what}: {e}"))
            .is_none()
            .then_some(())
    })
    .await;
}

/// Deletes every object of `api` matching `selector` and waits until none is left.
pub async fn delete_labelled<K>(api: &Api<K>, selector: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let what = format!("{} labelled {selector}", api.resource_url());
    let params = ListParams::default().labels(selector);
    ignore_not_found(
        api.delete_collection(&DeleteParams::default(), &params)
            .await,
        &what,
    );
    wait_for(&format!("{what} to be gone"), async || {
        match api.list(&params).await {
            Ok(list) => list.items.is_empty().then_some(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Some(()),
            Err(e) => panic!("listing {what}: {e}"),
        }
    })
    .await;
}

/// Deletes namespace `name` and waits until it is gone (past Terminating).
pub async fn delete_namespace(admin: &Client, name: &str) {
    delete_and_wait(&Api::<Namespace>::all(admin.clone()), name).await;
}

/// Deletes ClusterCSIDriver `name` once its operator has stopped: the finalizer the operator
/// put on it has nobody left to release it, so the harness does.
pub async fn remove_cluster_csi_driver(admin: &Client, name: &str) {
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    if drivers
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading ClusterCSIDriver {name}: {e}"))
        .is_some()
    {
        ignore_not_found(
            drivers
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
                )
                .await,
            &format!("the finalizers of ClusterCSIDriver {name}"),
        );
    }
    delete_and_wait(&drivers, name).await;
}

/// Removes a catalogue driver `short` and everything installed for it: its ClusterCSIDriver,
/// its cluster-scoped operands (CSIDriver `csi_name`, StorageClasses, snapshot classes, RBAC),
/// the starter's cluster-scoped objects for its operator, and its operand namespace `namespace`
/// with all the rest; when that is not the driver namespace, where the starter put its
/// operator (Manila), that one too.
pub async fn remove_driver(admin: &Client, short: &str, csi_name: &str, namespace: &str) {
    remove_cluster_csi_driver(admin, csi_name).await;
    delete_and_wait(&Api::<CSIDriver>::all(admin.clone()), csi_name).await;
    let operands = format!("{}={short}", csi_kit::names::OPERAND_LABEL);
    let starter = format!("{}={short}", storage_operator::starter::STARTER_LABEL);
    delete_labelled(&Api::<StorageClass>::all(admin.clone()), &operands).await;
    let snapshot_classes = ApiResource {
        group: "snapshot.storage.k8s.io".into(),
        version: "v1".into(),
        api_version: "snapshot.storage.k8s.io/v1".into(),
        kind: "VolumeSnapshotClass".into(),
        plural: "volumesnapshotclasses".into(),
    };
    delete_labelled(
        &Api::<DynamicObject>::all_with(admin.clone(), &snapshot_classes),
        &operands,
    )
    .await;
    for selector in [&operands, &starter] {
        delete_labelled(&Api::<ClusterRole>::all(admin.clone()), selector).await;
        delete_labelled(&Api::<ClusterRoleBinding>::all(admin.clone()), selector).await;
    }
    delete_namespace(admin, namespace).await;
    let operators = storage_operator::registry::DRIVER_NAMESPACE;
    if namespace != operators {
        delete_namespace(admin, operators).await;
    }
}

/// Removes the Infrastructure `cluster` the harness declared, if it did.
pub async fn undeclare_platform(admin: &Client, declared: bool) {
    if declared {
        delete_and_wait(
            &Api::<api::config_v1::Infrastructure>::all(admin.clone()),
            "cluster",
        )
        .await;
    }
}
