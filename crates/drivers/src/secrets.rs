//! Secrets the drivers' own code writes from what only it can derive (Manila's
//! `csi-manila-secrets`, IBM VPC Block's `storage-secret-store`): labelled as the driver's
//! operands, with the hash of their data in an annotation, written by server-side apply under
//! the writer's field manager (so keys it no longer derives are removed) and only when the data
//! or the hash differ (an idle cluster sees no write).

use std::collections::BTreeMap;

use csi::{DriverDef, names};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};

/// The annotation with the hash of a written Secret's data.
pub const HASH_ANNOTATION: &str = "operator.openshift.io/spec-hash";

/// Secret `name` in the driver namespace of `def` with `data`, and the hash of its data.
pub fn build(def: &DriverDef, name: &str, data: &BTreeMap<String, String>) -> Secret {
    let bytes: BTreeMap<String, Vec<u8>> = data
        .iter()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    let mut metadata = names::ns_meta(def, name);
    metadata.annotations = Some(BTreeMap::from([(
        HASH_ANNOTATION.to_owned(),
        csi::hash::secret_data_hash(Some(&bytes)),
    )]));
    Secret {
        metadata,
        type_: Some("Opaque".to_owned()),
        data: Some(bytes.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Secret::default()
    }
}

/// The hash annotation of `secret`, when it has one.
pub fn hash_of(secret: &Secret) -> Option<&str> {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HASH_ANNOTATION))
        .map(String::as_str)
}

/// Whether `current` already holds everything of `desired` (data keys and hash).
pub fn up_to_date(current: &Secret, desired: &Secret) -> bool {
    let current_data = current.data.clone().unwrap_or_default();
    hash_of(current) == hash_of(desired)
        && desired
            .data
            .iter()
            .flatten()
            .all(|(k, v)| current_data.get(k) == Some(v))
}

/// Writes `desired` (from [`build`]) unless the Secret already holds it. Returns whether it
/// wrote; an error names the Secret and what failed.
pub async fn apply(
    client: &kube::Client,
    desired: &Secret,
    field_manager: &str,
) -> Result<bool, String> {
    let namespace = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api = Api::<Secret>::namespaced(client.clone(), &namespace);
    let current = api
        .get_opt(&name)
        .await
        .map_err(|e| format!("reading Secret {namespace}/{name} failed: {e}"))?;
    if current.is_some_and(|c| up_to_date(&c, desired)) {
        return Ok(false);
    }
    let mut object = serde_json::to_value(desired)
        .map_err(|e| format!("serializing Secret {namespace}/{name} failed: {e}"))?;
    object["apiVersion"] = "v1".into();
    object["kind"] = "Secret".into();
    api.patch(
        &name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|e| format!("writing Secret {namespace}/{name} failed: {e}"))?;
    tracing::info!(object = %format!("{namespace}/{name}"), "applied a Secret the driver reads");
    Ok(true)
}
