//! Whose an object is: the one rule every writer of this project follows before it applies
//! over an object or deletes one ([`owner`], [`may_apply`], [`may_delete`]), and the report of
//! an object someone else made ([`NotOurs`], [`installer`]).
//!
//! Labels say which driver or owner an object belongs to, but anyone can copy them: `kubectl
//! get -o yaml` edited and created again, a test suite's copy of a class (labels, annotations
//! and `managedFields` included), a Helm chart that happens to use our names. What a copy
//! cannot carry is its writer's field manager: when an object is created, the API server
//! records every field as set by the creator, whatever `managedFields` the request carried
//! (every field is new, so every earlier owner loses it and its entry is dropped).
//! kube-apiserver v1.36.2 does so for `kubectl create` of an object read with
//! `--show-managed-fields`, as the Go client's `Create` of a `DeepCopy` does.
//!
//! So, for an object of a name one of our controllers wants ([`owner`]):
//! - **ours** when one of this project's controllers applied it: its `managedFields` hold an
//!   `Apply` entry of a `storage-operator/...` manager on the object itself (not on a
//!   subresource: writing the status of an object does not make it ours);
//! - **the replaced operator's** when a field manager of the operator ours replaces wrote it
//!   (OpenShift's Go operators write with Update under their binary's name, e.g.
//!   `cluster-storage-operator`, `aws-ebs-csi-driver-operator`; each writer passes its list):
//!   taking those over is the point of a drop-in replacement;
//! - **nobody's** when no one but the cluster's own controllers set a field of it: how
//!   kube-apiserver keeps an object created with its name only (OpenShift's operator creates its
//!   ServiceAccounts so), with no `managedFields` at all;
//! - **someone else's** otherwise: another installer's (Helm, OLM, upstream's manifests, an
//!   admin), or a copy of ours.
//!
//! An object may be applied over when it is absent, ours, the replaced operator's or nobody's
//! ([`may_apply`]), and an object of a [`SHARED_KINDS`] kind (a Namespace) whoever made it; it may be deleted only when it is ours or the replaced operator's
//! ([`may_delete`]: an object nobody set a field of proves nothing). Someone else's object is
//! left exactly as it is, and the writer reports it with [`NotOurs`], naming the installer when
//! it can be told ([`installer`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

/// The prefix of every field manager of this project.
pub const FIELD_MANAGER_PREFIX: &str = "storage-operator";

/// Reason of a condition saying an object of a name we want is someone else's ([`NotOurs`]).
pub const REASON_NOT_OURS: &str = "ObjectNotOurs";

/// Managers whose entries do not make an object someone else's: the cluster's own
/// controllers, which add to objects whoever made them (a ServiceAccount's image pull secrets
/// on OpenShift, a Deployment's revision annotation).
pub const PLATFORM_MANAGERS: [&str; 2] =
    ["kube-controller-manager", "openshift-controller-manager"];

/// Kinds many installers add to, so that whoever made an object of them, our fields are applied
/// into it (server-side apply merges them beside the others'): a Namespace our operands run in
/// needs our labels (pod security, monitoring) whether an admin, the cluster-version operator
/// or we created it. Our writers never delete an object of these kinds.
pub const SHARED_KINDS: [&str; 1] = ["Namespace"];

/// Who made an existing object, by what a copy cannot carry (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// One of this project's controllers applied it.
    Us,
    /// The operator ours replaces wrote it; the field manager that did.
    Former(String),
    /// Nobody but the cluster's own controllers set a field of it.
    Nobody,
    /// Someone else made it.
    Someone,
}

/// Whether `entry` is on the object itself rather than a subresource.
fn on_object(entry: &ManagedFieldsEntry) -> bool {
    entry.subresource.as_deref().unwrap_or_default().is_empty()
}

/// Whether `entry` is one of our controllers' applies on the object itself.
fn our_apply(entry: &ManagedFieldsEntry) -> bool {
    entry.operation.as_deref() == Some("Apply")
        && on_object(entry)
        && entry
            .manager
            .as_deref()
            .and_then(|m| m.strip_prefix(FIELD_MANAGER_PREFIX))
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Who made the object; `former` are the field managers of the operator ours replaces.
pub fn owner(meta: &ObjectMeta, former: &[String]) -> Owner {
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    if entries.iter().any(our_apply) {
        return Owner::Us;
    }
    if let Some(manager) = entries
        .iter()
        .filter(|e| on_object(e))
        .filter_map(|e| e.manager.as_deref())
        .find(|m| former.iter().any(|f| f == m))
    {
        return Owner::Former(manager.to_owned());
    }
    let others = entries
        .iter()
        .filter(|e| on_object(e))
        .filter_map(|e| e.manager.as_deref())
        .any(|m| !PLATFORM_MANAGERS.contains(&m));
    if others {
        Owner::Someone
    } else {
        Owner::Nobody
    }
}

/// Whether one of this project's controllers applied the object.
pub fn applied_by_us(meta: &ObjectMeta) -> bool {
    owner(meta, &[]) == Owner::Us
}

/// Whether an object of a name we want may be applied over: absent (`None`), ours, the
/// replaced operator's, or nobody's.
pub fn may_apply(meta: Option<&ObjectMeta>, former: &[String]) -> bool {
    meta.is_none_or(|meta| owner(meta, former) != Owner::Someone)
}

/// Whether an existing object may be deleted: ours, or the replaced operator's.
pub fn may_delete(meta: &ObjectMeta, former: &[String]) -> bool {
    matches!(owner(meta, former), Owner::Us | Owner::Former(_))
}

/// Who installed an object that is not ours, as far as its metadata tells: a Helm release
/// (`meta.helm.sh/release-name` and `-namespace`, the chart from `helm.sh/chart`), an OLM
/// ClusterServiceVersion (owner reference or `olm.owner`), `app.kubernetes.io/managed-by`, and
/// else the field manager that created it (`kubectl-create`, `kubectl-client-side-apply`, ...).
pub fn installer(meta: &ObjectMeta) -> Installer {
    let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key)).cloned();
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    if let Some(release) = annotation("meta.helm.sh/release-name") {
        let namespace = annotation("meta.helm.sh/release-namespace").unwrap_or_default();
        let chart = label("helm.sh/chart")
            .map(|c| format!(", chart {c}"))
            .unwrap_or_default();
        return Installer {
            description: format!("Helm release {release} in namespace {namespace}{chart}"),
            removal: format!("helm uninstall {release} --namespace {namespace}"),
        };
    }
    let csv = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == "ClusterServiceVersion")
        .map(|r| r.name.clone())
        .or_else(|| label("olm.owner").filter(|_| label("olm.owner.kind").is_some()));
    if let Some(csv) = csv {
        let namespace = label("olm.owner.namespace")
            .or_else(|| meta.namespace.clone())
            .unwrap_or_default();
        return Installer {
            description: format!("OLM, ClusterServiceVersion {namespace}/{csv}"),
            removal: format!(
                "remove the operator's Subscription and ClusterServiceVersion {namespace}/{csv}"
            ),
        };
    }
    if let Some(manager) = label("app.kubernetes.io/managed-by") {
        let chart = label("helm.sh/chart")
            .map(|c| format!(" (chart {c})"))
            .unwrap_or_default();
        return Installer {
            description: format!("{manager}{chart}, by its app.kubernetes.io/managed-by label"),
            removal: format!("remove it with {manager}"),
        };
    }
    let creator = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| on_object(e))
        .filter_map(|e| e.manager.as_deref())
        .find(|m| !PLATFORM_MANAGERS.contains(m));
    Installer {
        description: match creator {
            Some(manager) => format!("field manager {manager}"),
            None => "someone else".to_owned(),
        },
        removal: "delete it".to_owned(),
    }
}

/// Who installed an object that is not ours, and how it goes away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installer {
    /// E.g. "Helm release hostpath in namespace kube-system, chart csi-hostpath-1.2.0".
    pub description: String,
    /// What to run or do to remove it, e.g. "helm uninstall hostpath --namespace kube-system".
    pub removal: String,
}

/// An object of a name one of our operands needs, made by someone else: left exactly as it
/// is, and reported in the condition of the part that wanted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotOurs {
    /// The object's kind.
    pub kind: String,
    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub object: String,
    /// Who made it.
    pub installer: Installer,
}

impl NotOurs {
    /// The report of the object `meta` of `kind`.
    pub fn of(kind: &str, meta: &ObjectMeta) -> Self {
        let name = meta.name.clone().unwrap_or_default();
        Self {
            kind: kind.to_owned(),
            object: match &meta.namespace {
                Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
                _ => name,
            },
            installer: installer(meta),
        }
    }

    /// What status says about it: the object, who made it, and what to do.
    pub fn message(&self) -> String {
        format!(
            "{} {} exists and was made by {}, not by this operator or the one it replaces: it is \
             left as it is and this operator's own is not applied; {} to let the operator create \
             its own, or rename yours",
            self.kind, self.object, self.installer.description, self.installer.removal
        )
    }
}

impl std::fmt::Display for NotOurs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use serde_json::json;

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
            name: Some("x".into()),
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

    #[test]
    fn the_owner_is_told_by_field_managers_only() {
        let former = ["aws-ebs-csi-driver-operator".to_owned()];
        let cases = [
            (Vec::new(), Owner::Nobody, "created with its name only"),
            (
                vec![entry("kube-controller-manager", "Update", None)],
                Owner::Nobody,
                "only the cluster's controllers added to it",
            ),
            (
                vec![entry(
                    "storage-operator/AWSEBSDriverStaticResourcesController",
                    "Apply",
                    None,
                )],
                Owner::Us,
                "ours",
            ),
            (
                vec![
                    entry("aws-ebs-csi-driver-operator", "Update", None),
                    entry("kube-controller-manager", "Update", Some("status")),
                ],
                Owner::Former("aws-ebs-csi-driver-operator".into()),
                "the replaced operator's",
            ),
            (
                vec![entry("helm", "Update", None)],
                Owner::Someone,
                "another installer's",
            ),
            (
                vec![
                    entry("storage-operator/status", "Apply", Some("status")),
                    entry("kubectl-create", "Update", None),
                ],
                Owner::Someone,
                "a copy whose status we wrote",
            ),
            (
                vec![
                    entry("kubectl-edit", "Update", None),
                    entry("storage-operator/x", "Apply", None),
                ],
                Owner::Us,
                "ours, edited by an admin",
            ),
        ];
        for (entries, want, what) in cases {
            let m = meta(entries);
            assert_eq!(owner(&m, &former), want, "{what}");
            assert_eq!(
                may_apply(Some(&m), &former),
                want != Owner::Someone,
                "{what}"
            );
            assert_eq!(
                may_delete(&m, &former),
                matches!(want, Owner::Us | Owner::Former(_)),
                "{what}"
            );
        }
        assert!(may_apply(None, &former), "absent");
        // The same manager is someone else's to a writer that does not replace it.
        let theirs = meta(vec![entry("aws-ebs-csi-driver-operator", "Update", None)]);
        assert_eq!(owner(&theirs, &[]), Owner::Someone);
    }

    #[test]
    fn the_installer_is_named_when_it_can_be_told() {
        let with = |value: serde_json::Value| -> ObjectMeta {
            let mut m = json!({"name": "hostpath.csi.k8s.io", "managedFields": [
                {"manager": "helm", "operation": "Update", "apiVersion": "storage.k8s.io/v1"}
            ]});
            if let (Some(m), Some(extra)) = (m.as_object_mut(), value.as_object()) {
                m.extend(extra.clone());
            }
            serde_json::from_value(m).unwrap()
        };
        let helm = installer(&with(json!({
            "annotations": {"meta.helm.sh/release-name": "hp", "meta.helm.sh/release-namespace": "kube-system"},
            "labels": {"helm.sh/chart": "csi-hostpath-1.2.0", "app.kubernetes.io/managed-by": "Helm"},
        })));
        assert_eq!(
            helm.description,
            "Helm release hp in namespace kube-system, chart csi-hostpath-1.2.0"
        );
        assert_eq!(helm.removal, "helm uninstall hp --namespace kube-system");

        let mut olm = with(json!({"namespace": "openshift-cluster-csi-drivers"}));
        olm.owner_references = Some(vec![OwnerReference {
            kind: "ClusterServiceVersion".into(),
            name: "aws-efs-csi-driver-operator.v4.20.0".into(),
            ..OwnerReference::default()
        }]);
        assert_eq!(
            installer(&olm).description,
            "OLM, ClusterServiceVersion openshift-cluster-csi-drivers/aws-efs-csi-driver-operator.v4.20.0"
        );
        let olm_labels = with(json!({"labels": {
            "olm.owner": "x.v1", "olm.owner.kind": "ClusterServiceVersion", "olm.owner.namespace": "operators"
        }}));
        assert_eq!(
            installer(&olm_labels).description,
            "OLM, ClusterServiceVersion operators/x.v1"
        );

        let managed = with(json!({"labels": {"app.kubernetes.io/managed-by": "kustomize"}}));
        assert_eq!(
            installer(&managed).description,
            "kustomize, by its app.kubernetes.io/managed-by label"
        );
        assert_eq!(
            installer(&with(json!({}))).description,
            "field manager helm"
        );
        let report = NotOurs::of("CSIDriver", &with(json!({}))).message();
        assert!(
            report.starts_with(
                "CSIDriver hostpath.csi.k8s.io exists and was made by field manager helm"
            ),
            "{report}"
        );
    }
}
