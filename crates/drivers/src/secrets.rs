//! Secrets the drivers' own code writes from what only it can derive (Manila's
//! `csi-manila-secrets`, IBM VPC Block's `storage-secret-store`): labelled as the driver's
//! operands, with the hash of their data in an annotation, written by server-side apply under
//! the writer's field manager (so keys it no longer derives are removed, and those only the
//! replaced operator set once it is adopted) and only when they differ (an idle cluster sees no
//! write).

use std::collections::BTreeMap;

use csi_kit::{DriverDef, names};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use opkit::apply::Applier;

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
        csi_kit::hash::secret_data_hash(Some(&bytes)),
    )]));
    Secret {
        metadata,
        type_: Some("Opaque".to_owned()),
        data: Some(bytes.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Secret::default()
    }
}

/// Writes `desired` (from [`build`]) as `storage-operator/<controller>` unless the Secret
/// already holds it (server-side apply, so keys it no longer derives are removed). Fields the
/// operators of `adopt_from` wrote (OpenShift's, with Update) are taken over first, so the keys
/// only they set are removed too. Returns whether it wrote; an error names the Secret and what
/// failed.
pub async fn apply(
    client: &kube::Client,
    desired: &Secret,
    controller: &str,
    adopt_from: &[String],
) -> Result<bool, String> {
    let namespace = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let current = Api::<Secret>::namespaced(client.clone(), &namespace)
        .get_opt(&name)
        .await
        .map_err(|e| format!("reading Secret {namespace}/{name} failed: {e}"))?;
    let outcome = Applier::new(client.clone(), controller)
        .adopting(adopt_from)
        .apply(desired, current.as_ref())
        .await
        .map_err(|e| format!("writing Secret {namespace}/{name} failed: {e}"))?;
    if outcome.wrote() {
        tracing::info!(object = %format!("{namespace}/{name}"), ?outcome, "applied a Secret the driver reads");
    }
    Ok(outcome.wrote())
}
