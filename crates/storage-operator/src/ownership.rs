//! Whether an object of a fixed name is ours: to apply over ([`ours_to_apply`]) or to delete
//! ([`ours_or_former`]), and the report of one someone else made ([`NotOurs`]). The plan, the
//! monitoring and the parts' conditions all ask it, so it sits below them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::names::FORMER_OPERATOR;

/// The operator ours replaces, as [`opkit::ownership`] takes its field managers.
fn former() -> [String; 1] {
    [FORMER_OPERATOR.to_owned()]
}

/// Whether an object of a fixed name is ours to apply ([`opkit::ownership::may_apply`]):
/// absent, applied by us, written by the operator ours replaces (whose fields the applier
/// takes over on the first apply), or holding no field anyone else set. The last is how
/// kube-apiserver keeps an object created with nothing but its name (OpenShift's operator
/// creates its ServiceAccounts so): with no `managedFields` at all, since it keeps no empty
/// entry; applying ours over it overwrites nothing. Anything else was made by someone else and
/// is left as it is.
pub(crate) fn ours_to_apply(meta: Option<&ObjectMeta>) -> bool {
    opkit::ownership::may_apply(meta, &former())
}

/// Whether one of our controllers applied the object, or the operator ours replaces wrote it
/// (OpenShift's, whose fields the applier takes over): proof enough to delete it
/// ([`opkit::ownership::may_delete`]).
pub(crate) fn ours_or_former(meta: &ObjectMeta) -> bool {
    opkit::ownership::may_delete(meta, &former())
}

/// An object of a fixed name that someone else made, so it is not applied: a part reports it
/// as Degraded, naming the object and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotOurs {
    /// The object's kind.
    pub kind: &'static str,
    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub object: String,
}

impl NotOurs {
    /// What status says about it.
    pub fn message(&self) -> String {
        format!(
            "{} {} exists and was made neither by this operator nor by OpenShift's \
             cluster-storage-operator, so it is left as it is: delete it to let the operator \
             create its own",
            self.kind, self.object
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_object_is_someone_elses_only_when_someone_else_set_a_field_of_it() {
        let meta = |entries: serde_json::Value| -> ObjectMeta {
            serde_json::from_value(json!({"name": "x", "managedFields": entries})).unwrap()
        };
        let entry = |manager: &str, operation: &str, subresource: Option<&str>| {
            let mut e = json!({"manager": manager, "operation": operation, "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}});
            if let Some(s) = subresource {
                e["subresource"] = s.into();
            }
            e
        };
        let cases = [
            (json!(null), true, "created with its name only"),
            (
                json!([entry("storage-operator/CSIDriverStarter", "Apply", None)]),
                true,
                "ours",
            ),
            (
                json!([entry("cluster-storage-operator", "Update", None)]),
                true,
                "the former operator's",
            ),
            (
                json!([
                    entry("openshift-controller-manager", "Update", None),
                    entry("kube-controller-manager", "Update", Some("status"))
                ]),
                true,
                "only the cluster's controllers added to it",
            ),
            (
                json!([entry("helm", "Update", None)]),
                false,
                "someone else's",
            ),
            (
                json!([
                    entry(
                        "storage-operator/CSIDriverStarter",
                        "Update",
                        Some("status")
                    ),
                    entry("kubectl-create", "Update", None)
                ]),
                false,
                "a copy whose status we wrote",
            ),
        ];
        for (entries, expected, what) in cases {
            assert_eq!(ours_to_apply(Some(&meta(entries))), expected, "{what}");
        }
        assert!(ours_to_apply(None), "absent");
    }
}
