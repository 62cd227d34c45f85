//! Whether an object is ours to delete or replace.
//!
//! Labels say which driver or owner an object belongs to, but anyone can copy them: `kubectl
//! get -o yaml` edited and created again, or Kubernetes' storage e2e suite, which makes its
//! own StorageClass as a copy of the driver's (labels, annotations and `managedFields`
//! included) under another name. What a copy cannot carry is our field manager: when an object
//! is created, the API server records every field as set by the creator, whatever
//! `managedFields` the request carried (every field is new, so every earlier owner loses it and
//! its entry is dropped). kube-apiserver v1.36.2 does so for `kubectl create` of an object
//! read with `--show-managed-fields`, as the Go client's `Create` of a `DeepCopy` does.
//!
//! So an object is ours when one of this project's controllers applied it: its
//! `managedFields` hold an `Apply` entry of a `storage-operator/...` manager on the object
//! itself (not on a subresource: writing the status of an object does not make it ours). Every
//! path that deletes or replaces an object asks this, besides its labels. Objects we adopted
//! from OpenShift's operators are ours from our first apply on.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::apply::FIELD_MANAGER_PREFIX;

/// Whether one of this project's controllers applied the object (see the module docs).
pub fn applied_by_us(meta: &ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|entry| {
        entry.operation.as_deref() == Some("Apply")
            && entry.subresource.as_deref().unwrap_or_default().is_empty()
            && entry
                .manager
                .as_deref()
                .and_then(|m| m.strip_prefix(FIELD_MANAGER_PREFIX))
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    fn entry(manager: &str, operation: &str, subresource: Option<&str>) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            operation: Some(operation.to_owned()),
            subresource: subresource.map(str::to_owned),
            ..ManagedFieldsEntry::default()
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta {
            managed_fields: Some(entries),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_an_apply_of_our_managers_on_the_object_makes_it_ours() {
        let cases = [
            (
                vec![entry("storage-operator/csidriverdeployment", "Apply", None)],
                true,
            ),
            (
                vec![entry(
                    "storage-operator/GCPPDDriverStaticResourcesController",
                    "Apply",
                    Some(""),
                )],
                true,
            ),
            (
                vec![
                    entry("kube-controller-manager", "Update", Some("status")),
                    entry("storage-operator/starter", "Apply", None),
                ],
                true,
            ),
            // A copy: the API server records its creator only.
            (vec![entry("kubectl-create", "Update", None)], false),
            (vec![entry("e2e.test", "Update", None)], false),
            // Our status writes do not make an object ours.
            (
                vec![entry("storage-operator/status", "Apply", Some("status"))],
                false,
            ),
            // An update under our name is not one of our applies (our controllers only apply).
            (
                vec![entry("storage-operator/config-observer", "Update", None)],
                false,
            ),
            // A manager that merely starts like ours.
            (vec![entry("storage-operator-copy", "Apply", None)], false),
            (vec![entry("storage-operator", "Apply", None)], false),
            (Vec::new(), false),
        ];
        for (entries, want) in cases {
            let described = format!("{entries:?}");
            assert_eq!(applied_by_us(&meta(entries)), want, "{described}");
        }
        assert!(
            !applied_by_us(&ObjectMeta::default()),
            "no managedFields at all"
        );
    }
}
