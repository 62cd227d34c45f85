//! Server-side apply with drift detection, and no write when nothing changed.
//!
//! Every object an operator owns is applied with server-side apply (`force`, one field manager
//! per controller), so the API server merges ownership and a user's edit to a field we own is
//! reverted. Before writing, the desired object is compared with the observed one (from a watch
//! cache): an idle reconcile sends no request at all, unlike library-go's periodic updates.
//!
//! Deciding "nothing changed" needs two checks. Every field we set must already be there with our
//! value (the observed object may hold more: server defaults, other managers' fields); and a
//! field we stopped setting must be gone, which a subset test cannot see. For the second the
//! applied object carries a hash of everything we applied in [`APPLIED_HASH_ANNOTATION`]: a new
//! desired object has a new hash, so it is applied and SSA removes what we no longer own.
//!
//! Whose an object is ([`crate::ownership`]). An applier never writes over an object someone
//! else made: one observed in its cache is judged before any request, and one it has not seen
//! is applied create-only ([`CREATE_ONLY_RESOURCE_VERSION`]) and judged only when it turns out
//! to exist. Either way the error ([`ApplyFailure::NotOurs`]) names the object and its
//! installer, and nothing is written.
//!
//! Taking over objects another operator created ([`Applier::adopting`]). OpenShift's Go
//! operators write with Update, not apply, so their fields stay theirs after our forced apply:
//! a list entry we do not apply (a Service port keyed by another number, a container, an env
//! var) survives next to ours and can make the merged object invalid, and fields we do not set
//! stay forever. So before the first apply over an object that such a manager wrote, the
//! applier rewrites `metadata.managedFields` (a JSON patch guarded by the observed
//! `resourceVersion`): the former manager's Update entry becomes part of our Apply entry. The
//! apply that follows then owns every field the former operator owned, and the API server
//! removes those it no longer receives, as it does for fields we stop applying. Fields other
//! managers own (the Deployment controller's revision annotation, an injected CA bundle) are
//! left alone. A stale `resourceVersion` fails the patch and the next reconcile retries.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::ownership::{NotOurs, Owner};

/// Annotation holding the hash of everything a controller applied to an object (the same key
/// library-go uses for its spec hash; ours covers labels and annotations too).
pub const APPLIED_HASH_ANNOTATION: &str = "operator.openshift.io/spec-hash";

pub use crate::ownership::FIELD_MANAGER_PREFIX;

/// The `resourceVersion` an apply carries to only create ([`Applier`] with nothing observed):
/// kube-apiserver ignores it when the object is absent and answers 409 Conflict when it
/// exists, since no stored object has it (etcd's first write is revision 2).
pub const CREATE_ONLY_RESOURCE_VERSION: &str = "1";

/// What an apply did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The object did not exist and was created.
    Created,
    /// The object was already as desired; nothing was sent.
    Unchanged,
    /// The desired object changed (a new hash) and was applied.
    Updated,
    /// Someone else changed fields we own (or deleted them); they were put back.
    DriftRestored,
    /// The object was written by a manager we take over from; its fields became ours and the
    /// object was applied.
    Adopted,
}

impl Outcome {
    /// Whether a request was sent.
    pub fn wrote(self) -> bool {
        self != Self::Unchanged
    }
}

/// An apply that failed, naming the object.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ApplyError {
    /// The object's kind.
    pub kind: String,
    /// `namespace/name` or `name`.
    pub object: String,
    /// Which cluster it was written to, where the writer has two (a hosted control plane's
    /// management cluster); `None` for the writer's own.
    pub cluster: Option<String>,
    /// What the API server or the client said, or that the object is someone else's.
    #[source]
    pub source: ApplyFailure,
}

/// Why an apply did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ApplyFailure {
    /// The API server refused, or did not answer.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// An object of that name exists and is someone else's ([`crate::ownership`]): nothing
    /// was written.
    #[error("{0}")]
    NotOurs(Box<NotOurs>),
}

/// " in the <cluster>", or nothing for the writer's own cluster.
fn in_cluster(cluster: Option<&str>) -> String {
    cluster.map(|c| format!(" in the {c}")).unwrap_or_default()
}

impl ApplyError {
    /// A stable category for metrics and events ([`category`], or `not-ours`).
    pub fn category(&self) -> &'static str {
        match &self.source {
            ApplyFailure::Api(error) => category(error),
            ApplyFailure::NotOurs(_) => "not-ours",
        }
    }

    /// The object that is someone else's, when that is why nothing was applied.
    pub fn not_ours(&self) -> Option<&NotOurs> {
        match &self.source {
            ApplyFailure::NotOurs(not_ours) => Some(not_ours),
            ApplyFailure::Api(_) => None,
        }
    }

    fn describe(&self) -> String {
        let cluster = in_cluster(self.cluster.as_deref());
        match &self.source {
            ApplyFailure::Api(error) => {
                format!("applying {} {}{cluster}: {error}", self.kind, self.object)
            }
            ApplyFailure::NotOurs(not_ours) if cluster.is_empty() => not_ours.message(),
            ApplyFailure::NotOurs(not_ours) => format!("{}{cluster}", not_ours.message()),
        }
    }
}

/// A stable category of a failed request, for metrics and events: `conflict`, `invalid`,
/// `forbidden`, `not-found`, `api` (any other answer of the server), `serialization`, or
/// `transport` (no answer).
pub fn category(error: &kube::Error) -> &'static str {
    match error {
        kube::Error::Api(status) if status.code == 409 => "conflict",
        kube::Error::Api(status) if status.code == 422 || status.code == 400 => "invalid",
        kube::Error::Api(status) if status.code == 403 => "forbidden",
        kube::Error::Api(status) if status.code == 404 => "not-found",
        kube::Error::Api(_) => "api",
        kube::Error::SerdeError(_) => "serialization",
        _ => "transport",
    }
}

/// The decision of [`plan`], before any request.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Send nothing.
    Skip,
    /// Apply this body (the desired object with its hash stamped), and report this outcome.
    Apply(Value, Outcome),
}

/// Deletes `name` with `params`; whether it was there to delete (a 404 is not an error: what
/// was to go is gone). Controllers count a write only when it was.
pub async fn delete_if_present<K>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Deletes the object `meta` describes and no other: the request carries its `uid` as a
/// precondition (an object deleted and made again under the name since it was observed is
/// not this one), and its `resourceVersion` too when `content_read` (the decision to delete
/// read more than the object's identity, e.g. its fields or its owner, so a change since
/// then must be seen first). Whether it was there to delete: a 404 is not an error, what was
/// to go is gone. A failed precondition is a 409 Conflict, returned for the caller to report;
/// the next pass decides again on what it then observes.
pub async fn delete_observed<K>(
    api: &Api<K>,
    meta: &ObjectMeta,
    content_read: bool,
    params: &DeleteParams,
) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone().filter(|_| content_read),
        }),
        ..params.clone()
    };
    delete_if_present(api, meta.name.as_deref().unwrap_or_default(), &params).await
}

/// Decides whether `desired` must be applied over `observed`. Pure: the controller's unit tests
/// call it directly.
pub fn plan(desired: &Value, observed: Option<&Value>) -> Plan {
    let mut body = desired.clone();
    let hash = hash_of(desired);
    set_annotation(&mut body, APPLIED_HASH_ANNOTATION, &hash);
    let Some(observed) = observed else {
        return Plan::Apply(body, Outcome::Created);
    };
    let observed_hash = observed
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(APPLIED_HASH_ANNOTATION))
        .and_then(Value::as_str);
    if observed_hash != Some(hash.as_str()) {
        return Plan::Apply(body, Outcome::Updated);
    }
    if is_subset(&body, observed) {
        Plan::Skip
    } else {
        Plan::Apply(body, Outcome::DriftRestored)
    }
}

/// Whether every field of `desired` is in `observed` with the same value. Objects may have more
/// keys in `observed`; lists must have the same length, item by item (item order is meaningful
/// in Kubernetes lists we set, such as containers and args).
pub fn is_subset(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(key, value)| {
            have.get(key).is_some_and(|h| is_subset(value, h))
                || is_empty(value) && !have.contains_key(key)
        }),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| is_subset(w, h))
        }
        (want, have) => want == have,
    }
}

/// Empty maps and lists we "set" are absent on the server, which is the same thing.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

/// SHA-256 (hex) of a JSON value with its keys sorted, ignoring the hash annotation itself.
pub fn hash_of(value: &Value) -> String {
    let mut value = value.clone();
    if let Some(annotations) = value
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(APPLIED_HASH_ANNOTATION);
    }
    let mut hasher = Sha256::new();
    write_canonical(&value, &mut hasher);
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn write_canonical(value: &Value, hasher: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            hasher.update(b"{");
            for key in keys {
                hasher.update(Value::String(key.clone()).to_string().as_bytes());
                hasher.update(b":");
                write_canonical(&map[key], hasher);
                hasher.update(b",");
            }
            hasher.update(b"}");
        }
        Value::Array(items) => {
            hasher.update(b"[");
            for item in items {
                write_canonical(item, hasher);
                hasher.update(b",");
            }
            hasher.update(b"]");
        }
        scalar => hasher.update(scalar.to_string().as_bytes()),
    }
}

fn set_annotation(object: &mut Value, key: &str, value: &str) {
    let Some(metadata) = object.as_object_mut().map(|o| {
        o.entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()))
    }) else {
        return;
    };
    let Some(annotations) = metadata
        .as_object_mut()
        .map(|m| {
            m.entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()))
        })
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.insert(key.to_owned(), Value::String(value.to_owned()));
}

/// The JSON patch that hands `former` managers' fields of `observed` to `manager`, or `None`
/// when no such manager has an Update entry on the main resource of `api_version`. Each such
/// entry is removed and its field set merged into `manager`'s Apply entry (created if absent);
/// the first operation tests the observed `resourceVersion`, so a concurrent write makes the
/// patch fail instead of dropping an owner the patch did not see. Pure, for unit tests.
pub fn takeover_patch(
    observed: &Value,
    manager: &str,
    api_version: &str,
    former: &[String],
) -> Option<Value> {
    let entries = observed.pointer("/metadata/managedFields")?.as_array()?;
    let resource_version = observed.pointer("/metadata/resourceVersion")?.as_str()?;
    let is_main = |e: &Value| e.get("subresource").is_none_or(|s| s.as_str() == Some(""));
    let taken = |e: &Value| {
        e["operation"] == "Update"
            && e["apiVersion"] == api_version
            && is_main(e)
            && e["manager"]
                .as_str()
                .is_some_and(|m| former.iter().any(|f| f == m))
    };
    if !entries.iter().any(taken) {
        return None;
    }
    let ours = |e: &Value| {
        e["manager"] == manager
            && e["operation"] == "Apply"
            && e["apiVersion"] == api_version
            && is_main(e)
    };
    let mut fields = entries
        .iter()
        .find(|e| ours(e))
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or_else(|| Value::Object(Default::default()));
    for entry in entries.iter().filter(|e| taken(e)) {
        merge_field_sets(&mut fields, &entry["fieldsV1"]);
    }
    let mut rewritten: Vec<Value> = entries
        .iter()
        .filter(|e| !taken(e) && !ours(e))
        .cloned()
        .collect();
    rewritten.push(serde_json::json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }));
    Some(serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "replace", "path": "/metadata/managedFields", "value": rewritten},
    ]))
}

/// The union of two `fieldsV1` sets (trees whose leaves are empty objects).
fn merge_field_sets(into: &mut Value, from: &Value) {
    let (Value::Object(into), Value::Object(from)) = (into, from) else {
        return;
    };
    for (key, value) in from {
        match into.get_mut(key) {
            Some(existing) => merge_field_sets(existing, value),
            None => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Applies objects for one controller, under its own field manager.
#[derive(Clone)]
pub struct Applier {
    client: Client,
    params: PatchParams,
    /// Field managers whose Update-written fields this applier takes over (see the module doc).
    former: Vec<String>,
    /// The cluster its errors name, where it is not the controller's own.
    cluster: Option<String>,
}

impl Applier {
    /// An applier whose field manager is `storage-operator/<controller>`.
    pub fn new(client: Client, controller: &str) -> Self {
        let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}/{controller}")).force();
        Self {
            client,
            params,
            former: Vec::new(),
            cluster: None,
        }
    }

    /// The same applier, for a cluster other than the controller's own, which its errors name
    /// (e.g. `management cluster`: "applying Deployment ns/x in the management cluster: ...").
    pub fn in_cluster(mut self, cluster: &str) -> Self {
        self.cluster = Some(cluster.to_owned());
        self
    }

    /// The same applier, taking over the fields these managers wrote with Update (the
    /// operator ours replaces, e.g. OpenShift's `gcp-pd-csi-driver-operator`) before it applies.
    pub fn adopting(mut self, former: &[String]) -> Self {
        self.former = former.to_vec();
        self
    }

    /// Sends the take-over patch when `observed` has fields of a former manager. Returns
    /// whether it did.
    async fn take_over(
        &self,
        url: &str,
        name: &str,
        observed: Option<&Value>,
        api_version: &str,
    ) -> Result<bool, kube::Error> {
        if self.former.is_empty() {
            return Ok(false);
        }
        let Some(patch) = observed
            .and_then(|o| takeover_patch(o, self.field_manager(), api_version, &self.former))
        else {
            return Ok(false);
        };
        let manager = self.field_manager();
        let request = http::Request::patch(format!("{url}/{name}?fieldManager={manager}"))
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .header(http::header::ACCEPT, "application/json")
            .body(serde_json::to_vec(&patch).map_err(kube::Error::SerdeError)?)
            .map_err(|e| kube::Error::BuildRequest(kube::core::request::Error::BuildRequest(e)))?;
        self.client.request::<Value>(request).await?;
        tracing::info!(object = name, manager = self.field_manager(), former = ?self.former, "took over the fields of the former operator");
        Ok(true)
    }

    /// The field manager this applier writes as.
    pub fn field_manager(&self) -> &str {
        self.params
            .field_manager
            .as_deref()
            .unwrap_or(FIELD_MANAGER_PREFIX)
    }

    /// Applies a typed object unless `observed` (from a cache) shows it is already as desired.
    /// An object of that name that is someone else's ([`crate::ownership::may_apply`], with
    /// the managers this applier takes over from) is left as it is: the error says whose it is.
    pub async fn apply<K>(&self, desired: &K, observed: Option<&K>) -> Result<Outcome, ApplyError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        let kind = K::kind(&()).into_owned();
        let error = |source: ApplyFailure| ApplyError {
            kind: kind.clone(),
            object: object_name(desired),
            cluster: self.cluster.clone(),
            source,
        };
        let desired_value = to_value(desired).map_err(|e| error(e.into()))?;
        let observed_value = observed
            .map(to_value)
            .transpose()
            .map_err(|e| error(e.into()))?;
        let url = K::url_path(&(), desired.meta().namespace.as_deref());
        self.apply_value(
            &url,
            &kind,
            &desired.name_any(),
            &desired_value,
            observed_value.as_ref(),
        )
        .await
        .map_err(error)
    }

    /// Applies over the observed object when it may be applied over, or creates the object
    /// when none was observed.
    async fn apply_value(
        &self,
        url: &str,
        kind: &str,
        name: &str,
        desired: &Value,
        observed: Option<&Value>,
    ) -> Result<Outcome, ApplyFailure> {
        match observed {
            None => self.apply_unseen(url, kind, name, desired).await,
            Some(observed) => {
                self.ours_to_apply(kind, observed)?;
                self.apply_seen(url, name, desired, observed).await
            }
        }
    }

    /// Whether `observed` may be applied over ([`crate::ownership::may_apply`], or its kind is
    /// one of [`crate::ownership::SHARED_KINDS`]); the report of whose it is otherwise.
    fn ours_to_apply(&self, kind: &str, observed: &Value) -> Result<(), ApplyFailure> {
        let meta: ObjectMeta = serde_json::from_value(observed["metadata"].clone())
            .map_err(kube::Error::SerdeError)?;
        if crate::ownership::owner(&meta, &self.former) == Owner::Someone
            && !crate::ownership::SHARED_KINDS.contains(&kind)
        {
            return Err(ApplyFailure::NotOurs(Box::new(NotOurs::of(kind, &meta))));
        }
        Ok(())
    }

    /// Takes over a former manager's fields if needed, then plans and applies over an object
    /// that may be applied over.
    async fn apply_seen(
        &self,
        url: &str,
        name: &str,
        desired: &Value,
        observed: &Value,
    ) -> Result<Outcome, ApplyFailure> {
        let api_version = desired["apiVersion"].as_str().unwrap_or_default();
        let adopted = self
            .take_over(url, name, Some(observed), api_version)
            .await?;
        match plan(desired, Some(observed)) {
            Plan::Apply(body, outcome) => {
                self.send(url, name, &body).await?;
                Ok(if adopted { Outcome::Adopted } else { outcome })
            }
            Plan::Skip if adopted => {
                // Our values were there already; the apply removes what only the former
                // manager set.
                let Plan::Apply(body, _) = plan(desired, None) else {
                    return Ok(Outcome::Adopted);
                };
                self.send(url, name, &body).await?;
                Ok(Outcome::Adopted)
            }
            Plan::Skip => Ok(Outcome::Unchanged),
        }
    }

    /// Applies an object the caller has not seen (its cache selects by our labels, so an
    /// object of the name someone else made, or the replaced operator wrote, is not in it). The
    /// apply only creates: it carries a `resourceVersion` no existing object has
    /// ([`CREATE_ONLY_RESOURCE_VERSION`]), which kube-apiserver ignores when it creates and
    /// refuses with a conflict when the object exists. So a fresh install costs one request
    /// per object and nothing is merged into an object unseen. On a conflict the object is read
    /// and applied over only when it may be ([`Self::ours_to_apply`]; the replaced operator's
    /// fields are taken over first).
    async fn apply_unseen(
        &self,
        url: &str,
        kind: &str,
        name: &str,
        desired: &Value,
    ) -> Result<Outcome, ApplyFailure> {
        let Plan::Apply(mut body, outcome) = plan(desired, None) else {
            return Ok(Outcome::Unchanged);
        };
        body["metadata"]["resourceVersion"] = Value::from(CREATE_ONLY_RESOURCE_VERSION);
        match self.send(url, name, &body).await {
            Ok(()) => Ok(outcome),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let Some(live) = self.get(url, name).await? else {
                    // Deleted in between: the next pass creates it.
                    return Err(kube::Error::Api(status).into());
                };
                self.ours_to_apply(kind, &live)?;
                self.apply_seen(url, name, desired, &live).await
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Applies an object of a kind without a Rust type (ServiceMonitor, CredentialsRequest),
    /// as [`Self::apply`].
    pub async fn apply_dynamic(
        &self,
        resource: &ApiResource,
        desired: &DynamicObject,
        observed: Option<&DynamicObject>,
    ) -> Result<Outcome, ApplyError> {
        let error = |source: ApplyFailure| ApplyError {
            kind: resource.kind.clone(),
            object: object_name(desired),
            cluster: self.cluster.clone(),
            source,
        };
        let desired_value = to_value(desired).map_err(|e| error(e.into()))?;
        let observed_value = observed
            .map(to_value)
            .transpose()
            .map_err(|e| error(e.into()))?;
        let url = DynamicObject::url_path(resource, desired.metadata.namespace.as_deref());
        self.apply_value(
            &url,
            &resource.kind,
            &desired.name_any(),
            &desired_value,
            observed_value.as_ref(),
        )
        .await
        .map_err(error)
    }
}

impl Applier {
    /// The object at `<url>/<name>` as served, `None` when there is none.
    async fn get(&self, url: &str, name: &str) -> Result<Option<Value>, kube::Error> {
        let request = kube::core::Request::new(url)
            .get(name, &Default::default())
            .map_err(kube::Error::BuildRequest)?;
        match self.client.request::<Value>(request).await {
            Ok(object) => Ok(Some(object)),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// One server-side apply PATCH to `<url>/<name>`. Built from the URL rather than a typed
    /// `Api` so that one path serves namespaced and cluster-scoped kinds alike.
    async fn send(&self, url: &str, name: &str, body: &Value) -> Result<(), kube::Error> {
        let request = kube::core::Request::new(url)
            .patch(name, &self.params, &Patch::Apply(body))
            .map_err(kube::Error::BuildRequest)?;
        self.client.request::<Value>(request).await.map(drop)
    }
}

fn to_value<T: Serialize>(object: &T) -> Result<Value, kube::Error> {
    serde_json::to_value(object).map_err(kube::Error::SerdeError)
}

fn object_name<K: Resource>(object: &K) -> String {
    match object.meta().namespace.as_deref() {
        Some(namespace) => format!("{namespace}/{}", object.name_any()),
        None => object.name_any(),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn deployment(replicas: u32, args: &[&str]) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "labels": {"app": "d"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "args": args}]}}}
        })
    }

    /// What the API server returns after applying `body`: our fields plus defaults and others'.
    fn as_served(body: &Value) -> Value {
        let mut served = body.clone();
        served["metadata"]["uid"] = json!("u-1");
        served["metadata"]["labels"]["added-by-someone"] = json!("x");
        served["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] =
            json!("IfNotPresent");
        served["status"] = json!({"replicas": 2});
        served
    }

    #[test]
    fn missing_objects_are_created() {
        let Plan::Apply(body, outcome) = plan(&deployment(2, &["--v=2"]), None) else {
            panic!()
        };
        assert_eq!(outcome, Outcome::Created);
        assert_eq!(
            body["metadata"]["annotations"][APPLIED_HASH_ANNOTATION]
                .as_str()
                .unwrap()
                .len(),
            64
        );
    }

    #[test]
    fn an_object_as_applied_plus_server_fields_needs_no_write() {
        let desired = deployment(2, &["--v=2"]);
        let Plan::Apply(body, _) = plan(&desired, None) else {
            panic!()
        };
        assert_eq!(plan(&desired, Some(&as_served(&body))), Plan::Skip);
    }

    #[test]
    fn a_changed_desired_object_is_applied() {
        let Plan::Apply(body, _) = plan(&deployment(2, &["--v=2"]), None) else {
            panic!()
        };
        let observed = as_served(&body);
        let Plan::Apply(_, outcome) = plan(&deployment(2, &["--v=4"]), Some(&observed)) else {
            panic!()
        };
        assert_eq!(outcome, Outcome::Updated);
        // A dropped field is a change too, though the new desired object is a subset of the old.
        let Plan::Apply(_, outcome) = plan(&deployment(2, &[]), Some(&observed)) else {
            panic!()
        };
        assert_eq!(outcome, Outcome::Updated);
    }

    #[rstest]
    #[case::scaled(|o: &mut Value| o["spec"]["replicas"] = json!(5))]
    #[case::arg_edited(|o: &mut Value| o["spec"]["template"]["spec"]["containers"][0]["args"][0] = json!("--v=9"))]
    #[case::arg_added(|o: &mut Value| o["spec"]["template"]["spec"]["containers"][0]["args"].as_array_mut().unwrap().push(json!("--x")))]
    #[case::label_removed(|o: &mut Value| drop(o["metadata"]["labels"].as_object_mut().unwrap().remove("app")))]
    fn edits_to_owned_fields_are_drift(#[case] edit: fn(&mut Value)) {
        let desired = deployment(2, &["--v=2"]);
        let Plan::Apply(body, _) = plan(&desired, None) else {
            panic!()
        };
        let mut observed = as_served(&body);
        edit(&mut observed);
        let Plan::Apply(_, outcome) = plan(&desired, Some(&observed)) else {
            panic!("drift not seen")
        };
        assert_eq!(outcome, Outcome::DriftRestored);
    }

    #[test]
    fn the_hash_ignores_key_order_and_itself() {
        let a = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}});
        let b = json!({"b": {"d": "x", "c": [1, 2]}, "a": 1});
        assert_eq!(hash_of(&a), hash_of(&b));
        assert_ne!(
            hash_of(&a),
            hash_of(&json!({"a": 1, "b": {"c": [2, 1], "d": "x"}}))
        );
        let mut stamped = a.clone();
        set_annotation(&mut stamped, APPLIED_HASH_ANNOTATION, "whatever");
        assert_ne!(stamped, a);
        let mut without = stamped.clone();
        without["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .clear();
        assert_eq!(hash_of(&stamped), hash_of(&without));
    }

    fn entry(manager: &str, operation: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "v1",
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    #[test]
    fn a_former_managers_update_entry_joins_ours() {
        let observed = json!({"metadata": {"resourceVersion": "7", "managedFields": [
            entry("old-operator", "Update", json!({"f:spec": {"f:ports": {"k:{\"port\":443,\"protocol\":\"TCP\"}": {}}}})),
            entry("ours", "Apply", json!({"f:spec": {"f:selector": {}}})),
            entry("kube-controller-manager", "Update", json!({"f:metadata": {"f:annotations": {}}})),
            entry("old-operator", "Update", json!({"f:status": {}})).as_object().map(|e| {
                let mut e = e.clone();
                e.insert("subresource".into(), json!("status"));
                Value::Object(e)
            }).unwrap(),
        ]}});
        let former = ["old-operator".to_owned()];
        let patch = takeover_patch(&observed, "ours", "v1", &former).unwrap();
        assert_eq!(
            patch[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"})
        );
        let entries = patch[1]["value"].as_array().unwrap();
        let managers: Vec<(&str, &str)> = entries
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap(),
                    e["operation"].as_str().unwrap(),
                )
            })
            .collect();
        // Others' entries and the former manager's status entry stay; ours comes last.
        assert_eq!(
            managers,
            [
                ("kube-controller-manager", "Update"),
                ("old-operator", "Update"),
                ("ours", "Apply")
            ]
        );
        assert_eq!(entries[1]["subresource"], "status");
        assert_eq!(
            entries[2]["fieldsV1"],
            json!({"f:spec": {"f:selector": {}, "f:ports": {"k:{\"port\":443,\"protocol\":\"TCP\"}": {}}}})
        );
    }

    #[test]
    fn nothing_to_take_over_without_a_former_update_entry() {
        let former = ["old-operator".to_owned()];
        let applied_by_it = json!({"metadata": {"resourceVersion": "7", "managedFields": [
            entry("old-operator", "Apply", json!({"f:data": {}})),
        ]}});
        assert_eq!(takeover_patch(&applied_by_it, "ours", "v1", &former), None);
        let other_version = json!({"metadata": {"resourceVersion": "7", "managedFields": [
            entry("old-operator", "Update", json!({"f:data": {}})),
        ]}});
        assert_eq!(takeover_patch(&other_version, "ours", "v2", &former), None);
        let nobody = json!({"metadata": {"resourceVersion": "7"}});
        assert_eq!(takeover_patch(&nobody, "ours", "v1", &former), None);
        assert_eq!(takeover_patch(&other_version, "ours", "v1", &[]), None);
    }

    #[test]
    fn empty_maps_we_set_match_absent_fields() {
        assert!(is_subset(
            &json!({"spec": {"selector": {}}}),
            &json!({"spec": {}})
        ));
        assert!(!is_subset(&json!({"spec": {"x": 0}}), &json!({"spec": {}})));
        assert!(!is_subset(&json!([1]), &json!([1, 2])));
    }
}
