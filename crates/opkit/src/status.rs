//! Status writes for operator CRs (ClusterCSIDriver, Storage): each controller applies only the
//! conditions it owns, with server-side apply on the `/status` subresource under its own field
//! manager. The API server merges the condition lists by `type`, so controllers sharing one CR
//! never overwrite each other and never race into 409s (the Go operator's Storage status writes
//! do); a condition a controller stops applying is removed because it owned it alone.
//!
//! Transition times are kept from the observed object while a condition's status is unchanged,
//! and nothing is sent when the observed status already says everything. "Everything" includes
//! what a controller no longer says: the observed object's `managedFields` tell which conditions
//! this controller owns, so one it dropped is noticed and removed.
//!
//! [`StatusWrites`] also remembers what each controller sent, so a pass whose cache does not
//! show that write yet does not send it again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use api::operator_v1::{
    ClusterCSIDriver, GenerationStatus, OperatorCondition, OperatorStatus, Storage,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};
use kube::api::{Patch, PatchParams};
use kube::{Client, Resource};
use serde_json::{Value, json};

use crate::apply::{ApplyError, FIELD_MANAGER_PREFIX};

/// What one controller says in an operator CR's status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusPart {
    /// The conditions this controller owns.
    pub conditions: Vec<OperatorCondition>,
    /// The operand generations this controller tracks.
    pub generations: Vec<GenerationStatus>,
    /// `status.observedGeneration`, when this controller is the one that sets it.
    pub observed_generation: Option<i64>,
    /// `status.readyReplicas`, when this controller is the one that sets it.
    pub ready_replicas: Option<i32>,
}

/// An operator CR whose status is the shared `OperatorStatus`.
pub trait OperatorResource: Resource<DynamicType = ()> {
    /// The status, if it has one yet.
    fn operator_status(&self) -> Option<&OperatorStatus>;
}

impl OperatorResource for ClusterCSIDriver {
    fn operator_status(&self) -> Option<&OperatorStatus> {
        self.status.as_ref()
    }
}

impl OperatorResource for Storage {
    fn operator_status(&self) -> Option<&OperatorStatus> {
        self.status.as_ref()
    }
}

/// The condition types `field_manager` owns in the status of an object, read from its
/// `managedFields` (`f:status` / `f:conditions` / `k:{"type":"..."}`).
pub fn owned_condition_types(meta: &ObjectMeta, field_manager: &str) -> BTreeSet<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| entry.manager.as_deref() == Some(field_manager))
        .flat_map(entry_condition_types)
        .collect()
}

/// The condition types one managedFields entry owns (`f:status` / `f:conditions` /
/// `k:{"type":"..."}`).
fn entry_condition_types(entry: &ManagedFieldsEntry) -> Vec<String> {
    entry
        .fields_v1
        .as_ref()
        .and_then(|fields| fields.0.pointer("/f:status/f:conditions"))
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|conditions| conditions.keys())
        .filter_map(|key| key.strip_prefix("k:"))
        .filter_map(|key| serde_json::from_str::<Value>(key).ok())
        .filter_map(|key| key.get("type").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// The status body to apply for `part`, or `None` when `observed` already says all of it and
/// holds no condition in `owned` that `part` no longer has. Transition times come from
/// `observed` when a condition's status is unchanged, else `now`.
pub fn plan_status(
    part: &StatusPart,
    observed: Option<&OperatorStatus>,
    owned: &BTreeSet<String>,
    now: &Time,
) -> Option<Value> {
    let empty = OperatorStatus::default();
    let observed = observed.unwrap_or(&empty);
    let conditions: Vec<OperatorCondition> = part
        .conditions
        .iter()
        .map(|c| {
            let kept = observed
                .condition(&c.type_)
                .filter(|o| o.status == c.status)
                .and_then(|o| o.last_transition_time.clone());
            OperatorCondition {
                last_transition_time: kept.or_else(|| Some(now.clone())),
                ..c.clone()
            }
        })
        .collect();
    let same_conditions = conditions.iter().all(|c| {
        observed
            .condition(&c.type_)
            .is_some_and(|o| o.status == c.status && o.reason == c.reason && o.message == c.message)
    });
    let same_generations = part
        .generations
        .iter()
        .all(|g| observed.generations.contains(g));
    let same_observed = part.observed_generation.is_none()
        || part.observed_generation == observed.observed_generation;
    let same_ready = part
        .ready_replicas
        .is_none_or(|r| r == observed.ready_replicas);
    let nothing_dropped = owned.iter().all(|type_| {
        part.conditions.iter().any(|c| &c.type_ == type_) || observed.condition(type_).is_none()
    });
    if same_conditions && same_generations && same_observed && same_ready && nothing_dropped {
        return None;
    }
    let mut status = json!({ "conditions": conditions });
    if !part.generations.is_empty() {
        status["generations"] = json!(part.generations);
    }
    if let Some(generation) = part.observed_generation {
        status["observedGeneration"] = json!(generation);
    }
    if let Some(ready) = part.ready_replicas {
        status["readyReplicas"] = json!(ready);
    }
    Some(status)
}

/// Applies `part` to the status of the cluster-scoped operator CR `name` of kind `K`, as
/// `storage-operator/<controller>`, given the object as last observed (from a cache). Returns
/// whether a request was sent.
pub async fn apply_status<K: OperatorResource>(
    client: &Client,
    controller: &str,
    name: &str,
    part: &StatusPart,
    observed: Option<&K>,
    now: &Time,
) -> Result<bool, ApplyError> {
    let field_manager = format!("{FIELD_MANAGER_PREFIX}/{controller}");
    let owned = observed
        .map(|o| owned_condition_types(o.meta(), &field_manager))
        .unwrap_or_default();
    let Some(status) = plan_status(part, observed.and_then(K::operator_status), &owned, now) else {
        return Ok(false);
    };
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": { "name": name },
        "status": status,
    });
    let params = PatchParams::apply(&field_manager).force();
    let error = |source: kube::Error| ApplyError {
        kind: K::kind(&()).into_owned(),
        object: name.to_owned(),
        cluster: None,
        source: source.into(),
    };
    let request = kube::core::Request::new(K::url_path(&(), None))
        .patch_subresource("status", name, &params, &Patch::Apply(&body))
        .map_err(|e| error(kube::Error::BuildRequest(e)))?;
    client.request::<Value>(request).await.map_err(error)?;
    Ok(true)
}

/// The usages library-go names its controllers' field managers after
/// (`<controller>-<usage>`): the server-side applies of an operator's status by its sync
/// error reporter, management state, static resources, Deployment, config observer, resource
/// sync and stale-condition controllers.
const LIBRARY_GO_USAGES: [&str; 7] = [
    "reportDegraded",
    "ManagementState",
    "StaticResources",
    "Deployment",
    "ConfigObserver",
    "ResourceSync",
    "RemoveStaleConditions",
];

/// The field managers in `meta` that are an OpenShift Go operator's, for
/// [`stale_condition_types`]: `binary` (its Update writes, named after the binary by
/// client-go) and its library-go controllers' server-side applies (`<controller>-<usage>`,
/// e.g. `AWSEBSCSIDriverOperator-reportDegraded`, `storage-ManagementState`). OpenShift's
/// cluster storage operator writes `Storage/cluster`'s conditions under a dozen such managers
/// (seen on kube-apiserver v1.36.2). Never one of this project's.
pub fn go_operator_managers(meta: &ObjectMeta, binary: &str) -> Vec<String> {
    let mut managers: Vec<String> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|e| e.manager.clone())
        .filter(|m| !m.starts_with(crate::apply::FIELD_MANAGER_PREFIX))
        .filter(|m| {
            m == binary
                || m.rsplit_once('-').is_some_and(|(controller, usage)| {
                    !controller.is_empty() && LIBRARY_GO_USAGES.contains(&usage)
                })
        })
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

/// The condition types of `status` that only an operator this one replaced maintained: every
/// manager that owns the type in `meta`'s managedFields is one of `former` (OpenShift's Go
/// operator's, [`go_operator_managers`]), and no part of ours writes it
/// (`ours`). Nobody updates them any more, so they would stay as they were forever (an old
/// Degraded included) and keep feeding the ClusterOperator: they are removed, as OpenShift's
/// `RemoveStaleConditionsController` removes what its removed controllers left. A type another
/// manager (an admin's tool, another operator) also owns is kept.
pub fn stale_condition_types(
    meta: &ObjectMeta,
    status: &OperatorStatus,
    former: &[String],
    ours: &BTreeSet<String>,
) -> Vec<String> {
    let mut owners: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in meta.managed_fields.iter().flatten() {
        let manager = entry.manager.clone().unwrap_or_default();
        for type_ in entry_condition_types(entry) {
            owners.entry(type_).or_default().insert(manager.clone());
        }
    }
    status
        .conditions
        .iter()
        .map(|c| &c.type_)
        .filter(|type_| !ours.contains(*type_))
        .filter(|type_| {
            owners
                .get(*type_)
                .is_some_and(|o| !o.is_empty() && o.iter().all(|m| former.contains(m)))
        })
        .cloned()
        .collect()
}

/// Removes the conditions of `types` from the status of `name` (of kind `K`), as observed in
/// `observed`: a JSON patch of the status subresource, guarded by the observed
/// `resourceVersion` (a stale cache fails the patch with 422/409 and the next pass retries).
/// Returns whether it wrote.
pub async fn remove_conditions<K: OperatorResource>(
    client: &Client,
    name: &str,
    observed: &K,
    types: &[String],
) -> Result<bool, ApplyError> {
    let Some(status) = observed.operator_status() else {
        return Ok(false);
    };
    let mut indexes: Vec<usize> = status
        .conditions
        .iter()
        .enumerate()
        .filter(|(_, c)| types.contains(&c.type_))
        .map(|(i, _)| i)
        .collect();
    if indexes.is_empty() {
        return Ok(false);
    }
    indexes.reverse();
    let mut patch = vec![json!({"op": "test", "path": "/metadata/resourceVersion",
        "value": observed.meta().resource_version})];
    patch.extend(
        indexes
            .into_iter()
            .map(|i| json!({"op": "remove", "path": format!("/status/conditions/{i}")})),
    );
    let error = |source: kube::Error| ApplyError {
        kind: K::kind(&()).into_owned(),
        object: name.to_owned(),
        cluster: None,
        source: source.into(),
    };
    let url = format!(
        "{}/{name}/status?fieldManager={FIELD_MANAGER_PREFIX}/stale-conditions",
        K::url_path(&(), None)
    );
    let body = serde_json::to_vec(&patch).map_err(|e| error(kube::Error::SerdeError(e)))?;
    let request = http::Request::patch(url)
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .map_err(|e| {
            error(kube::Error::BuildRequest(
                kube::core::request::Error::BuildRequest(e),
            ))
        })?;
    client.request::<Value>(request).await.map_err(error)?;
    Ok(true)
}

/// What each controller last wrote into an operator CR's status, with what the cache showed
/// of that controller's part before the write ([`status_view`]). A pass whose cache still
/// shows that (it started before the write's event came) does not send the same part again:
/// the API server would change nothing and send no event, and the caller could not tell the
/// write was seen (e.g. opkit's loop would not call the pass settled).
#[derive(Debug, Default)]
pub struct StatusWrites {
    /// By (object name, controller).
    last: Mutex<BTreeMap<(String, String), (Value, StatusPart)>>,
}

impl StatusWrites {
    /// [`apply_status`], unless `controller` already sent `part` for `name` while the cache
    /// (`observed`) showed what it shows now. Returns whether it wrote.
    pub async fn apply<K: OperatorResource>(
        &self,
        client: &Client,
        controller: &str,
        name: &str,
        part: &StatusPart,
        observed: Option<&K>,
        now: &Time,
    ) -> Result<bool, ApplyError> {
        let key = (name.to_owned(), controller.to_owned());
        let view = status_view(observed, part);
        let sent = self
            .last()
            .get(&key)
            .is_some_and(|(before, sent)| *before == view && sent == part);
        if sent {
            return Ok(false);
        }
        let wrote = apply_status(client, controller, name, part, observed, now).await?;
        if wrote {
            self.last().insert(key, (view, part.clone()));
        }
        Ok(wrote)
    }

    fn last(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), (Value, StatusPart)>> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What `observed`'s status shows of the fields `part` writes: its conditions (by type), its
/// operand generations (by operand), and observedGeneration and readyReplicas when it sets
/// them; and which object it is (its UID: one deleted and made again starts afresh).
fn status_view<K: OperatorResource>(observed: Option<&K>, part: &StatusPart) -> Value {
    let status = observed.and_then(K::operator_status);
    let conditions: Vec<_> = status
        .into_iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| part.conditions.iter().any(|p| p.type_ == c.type_))
        .collect();
    let generations: Vec<_> = status
        .into_iter()
        .flat_map(|s| &s.generations)
        .filter(|g| {
            part.generations.iter().any(|p| {
                (&p.group, &p.resource, &p.namespace, &p.name)
                    == (&g.group, &g.resource, &g.namespace, &g.name)
            })
        })
        .collect();
    json!({
        "uid": observed.and_then(|o| o.meta().uid.as_deref()),
        "conditions": conditions,
        "generations": generations,
        "observedGeneration": part.observed_generation.and(status.and_then(|s| s.observed_generation)),
        "readyReplicas": part.ready_replicas.and(status.map(|s| s.ready_replicas)),
    })
}

#[cfg(test)]
mod tests {
    use api::operator_v1::ConditionStatus;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::conditions::condition;

    /// Only what former managers alone own, and none of ours writes, is stale.
    #[test]
    fn stale_conditions_are_the_former_operators_alone() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let entry = |manager: &str, operation: &str, types: &[&str]| {
            let conditions: serde_json::Map<String, Value> = types
                .iter()
                .map(|t| {
                    (
                        format!("k:{{\"type\":\"{t}\"}}"),
                        json!({".": {}, "f:status": {}}),
                    )
                })
                .collect();
            ManagedFieldsEntry {
                manager: Some(manager.into()),
                operation: Some(operation.into()),
                subresource: Some("status".into()),
                fields_v1: Some(FieldsV1(json!({"f:status": {"f:conditions": conditions}}))),
                ..ManagedFieldsEntry::default()
            }
        };
        let former = vec!["cluster-storage-operator".to_owned()];
        let meta = ObjectMeta {
            managed_fields: Some(vec![
                entry(
                    "cluster-storage-operator",
                    "Update",
                    &["OldControllerDegraded", "SharedDegraded", "OursAvailable"],
                ),
                entry("admin-tool", "Update", &["SharedDegraded", "AdminDegraded"]),
                entry(
                    "storage-operator/CSIDriverStarter",
                    "Apply",
                    &["OursAvailable"],
                ),
            ]),
            ..ObjectMeta::default()
        };
        let status = OperatorStatus {
            conditions: [
                "OldControllerDegraded",
                "SharedDegraded",
                "AdminDegraded",
                "OursAvailable",
                "UnownedDegraded",
            ]
            .iter()
            .map(|t| condition(*t, ConditionStatus::True, "", ""))
            .collect(),
            ..OperatorStatus::default()
        };
        let ours: BTreeSet<String> = ["OursAvailable".to_owned()].into();
        assert_eq!(
            stale_condition_types(&meta, &status, &former, &ours),
            ["OldControllerDegraded"]
        );
        // Without a former operator, nothing is ever stale.
        assert!(stale_condition_types(&meta, &status, &[], &ours).is_empty());
    }

    /// The managers OpenShift's cluster storage operator wrote `Storage/cluster` under, as
    /// kube-apiserver v1.36.2 recorded them: its binary's Update and its library-go
    /// controllers' applies; ours and anyone else's are not among them.
    #[test]
    fn a_go_operators_managers_are_its_binary_and_its_library_go_controllers() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let meta = ObjectMeta {
            managed_fields: Some(
                [
                    "CSIDriverStarter-reportDegraded",
                    "AWSEBSCSIDriverOperatorStaticController-StaticResources",
                    "VolumeDataSourceValidatorDeploymentController-Deployment",
                    "openshift-storage-ConfigObserver",
                    "storage-ManagementState",
                    "cluster-storage-operator",
                    "storage-operator/CSIDriverStarter",
                    "kubectl-client-side-apply",
                    "my-Deployment-tool",
                    "-reportDegraded",
                ]
                .iter()
                .map(|m| ManagedFieldsEntry {
                    manager: Some((*m).into()),
                    ..ManagedFieldsEntry::default()
                })
                .collect(),
            ),
            ..ObjectMeta::default()
        };
        assert_eq!(
            go_operator_managers(&meta, "cluster-storage-operator"),
            [
                "AWSEBSCSIDriverOperatorStaticController-StaticResources",
                "CSIDriverStarter-reportDegraded",
                "VolumeDataSourceValidatorDeploymentController-Deployment",
                "cluster-storage-operator",
                "openshift-storage-ConfigObserver",
                "storage-ManagementState",
            ]
        );
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
    }

    fn part(status: ConditionStatus, message: &str) -> StatusPart {
        StatusPart {
            conditions: vec![condition("XAvailable", status, "R", message)],
            generations: vec![GenerationStatus {
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: "ns".into(),
                name: "d".into(),
                last_generation: 3,
                hash: String::new(),
            }],
            ..Default::default()
        }
    }

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
    }

    fn observed_after(body: &Value) -> OperatorStatus {
        serde_json::from_value(body.clone()).unwrap()
    }

    #[test]
    fn first_write_stamps_now_and_a_repeat_sends_nothing() {
        let body = plan_status(&part(ConditionStatus::True, "ok"), None, &none(), &at(0)).unwrap();
        assert_eq!(body["conditions"][0]["lastTransitionTime"], json!(at(0)));
        let observed = observed_after(&body);
        assert_eq!(
            plan_status(
                &part(ConditionStatus::True, "ok"),
                Some(&observed),
                &none(),
                &at(50)
            ),
            None
        );
    }

    #[test]
    fn message_changes_keep_the_transition_time_and_status_changes_move_it() {
        let observed = observed_after(
            &plan_status(&part(ConditionStatus::True, "ok"), None, &none(), &at(0)).unwrap(),
        );
        let body = plan_status(
            &part(ConditionStatus::True, "still ok"),
            Some(&observed),
            &none(),
            &at(50),
        )
        .unwrap();
        assert_eq!(body["conditions"][0]["lastTransitionTime"], json!(at(0)));
        let body = plan_status(
            &part(ConditionStatus::False, "down"),
            Some(&observed),
            &none(),
            &at(60),
        )
        .unwrap();
        assert_eq!(body["conditions"][0]["lastTransitionTime"], json!(at(60)));
    }

    #[test]
    fn other_controllers_conditions_do_not_count_as_differences() {
        let mut observed = observed_after(
            &plan_status(&part(ConditionStatus::True, "ok"), None, &none(), &at(0)).unwrap(),
        );
        observed.conditions.push(OperatorCondition {
            last_transition_time: Some(at(1)),
            ..condition("YDegraded", ConditionStatus::True, "Boom", "")
        });
        assert_eq!(
            plan_status(
                &part(ConditionStatus::True, "ok"),
                Some(&observed),
                &none(),
                &at(50)
            ),
            None
        );
    }

    #[test]
    fn a_dropped_condition_this_controller_owns_is_written_away() {
        let observed = observed_after(
            &plan_status(&part(ConditionStatus::True, "ok"), None, &none(), &at(0)).unwrap(),
        );
        let owned: BTreeSet<String> = ["XAvailable".to_owned()].into();
        let body = plan_status(&StatusPart::default(), Some(&observed), &owned, &at(1)).unwrap();
        assert_eq!(body["conditions"], json!([]));
        // Someone else's condition of that type is not ours to drop.
        assert_eq!(
            plan_status(&StatusPart::default(), Some(&observed), &none(), &at(1)),
            None
        );
    }

    #[test]
    fn owned_conditions_are_read_from_managed_fields() {
        let meta: ObjectMeta = serde_json::from_value(json!({"managedFields": [
            {"manager": "storage-operator/a", "operation": "Apply", "subresource": "status", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"AAvailable\"}": {".": {}, "f:status": {}}}}}},
            {"manager": "storage-operator/b", "operation": "Apply", "subresource": "status", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"BDegraded\"}": {}}}}}
        ]}))
        .unwrap();
        assert_eq!(
            owned_condition_types(&meta, "storage-operator/a"),
            ["AAvailable".to_owned()].into()
        );
        assert!(owned_condition_types(&meta, "storage-operator/c").is_empty());
    }

    #[test]
    fn generation_and_readiness_changes_are_written() {
        let observed = observed_after(
            &plan_status(&part(ConditionStatus::True, "ok"), None, &none(), &at(0)).unwrap(),
        );
        let mut newer = part(ConditionStatus::True, "ok");
        newer.generations[0].last_generation = 4;
        assert!(plan_status(&newer, Some(&observed), &none(), &at(1)).is_some());
        let ready = StatusPart {
            ready_replicas: Some(2),
            ..part(ConditionStatus::True, "ok")
        };
        assert_eq!(
            plan_status(&ready, Some(&observed), &none(), &at(1)).unwrap()["readyReplicas"],
            2
        );
    }
}
