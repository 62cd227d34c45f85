//! Whether an API server (this fake one or a real one) refuses a bad object as it should: the
//! check behind the bad-input tables of the CRDs (`api::testdata`), offline on testkit and on a
//! real kube-apiserver in `tests/e2e`. It lives here rather than beside the table because the
//! `api` crate has no API client (it is pure).

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

/// What trying a bad object found ([`try_refused`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tried {
    /// Why the answer was not the one wanted (422 Invalid naming the field); `None` when it was.
    pub wrong: Option<String>,
    /// The valid object created on the way (a field under `status` needs one), to delete.
    pub created: Option<String>,
}

/// Tries `broken` (the `valid` object with one bad field; `name` names the case in messages)
/// through `api` (its kind's): it is created with `dryRun=All`; for a field under `status`
/// (`in_status`), the valid object is created when absent and the broken status patched with
/// `dryRun=All`. The answer must be 422 Invalid naming `field`. An error says what could not be
/// done on the way.
pub async fn try_refused(
    api: &Api<DynamicObject>,
    name: &str,
    valid: Value,
    broken: Value,
    in_status: bool,
    field: &str,
) -> Result<Tried, String> {
    let failed = |what: &str, e: &dyn std::fmt::Display| format!("{}: {what}: {e}", name);
    let mut created = None;
    let answer = if in_status {
        // Status is not written on create: the object must exist, its status is patched.
        let name = valid["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let existing = api
            .get_opt(&name)
            .await
            .map_err(|e| failed("reading the valid object", &e))?;
        if existing.is_none() {
            let mut object: DynamicObject = serde_json::from_value(valid.clone())
                .map_err(|e| failed("decoding the valid object", &e))?;
            object.metadata.resource_version = None;
            api.create(&PostParams::default(), &object)
                .await
                .map_err(|e| failed("creating the valid object", &e))?;
            created = Some(name.clone());
        }
        let params = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        let patch = Patch::Merge(serde_json::json!({"status": broken["status"]}));
        api.patch_status(&name, &params, &patch).await.map(drop)
    } else {
        let object: DynamicObject =
            serde_json::from_value(broken).map_err(|e| failed("decoding the broken object", &e))?;
        let params = PostParams {
            dry_run: true,
            field_manager: None,
        };
        api.create(&params, &object).await.map(drop)
    };
    let wrong = match answer {
        Err(kube::Error::Api(status)) if status.code == 422 => (!status.message.contains(field))
            .then(|| format!("{}: 422 without naming {}: {}", name, field, status.message)),
        Err(other) => Some(format!("{}: refused otherwise: {other}", name)),
        Ok(()) => Some(format!("{}: accepted", name)),
    };
    Ok(Tried { wrong, created })
}
