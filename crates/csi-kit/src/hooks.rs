//! The generic hooks every driver gets, applied by the workload builders in this order:
//! proxy env, trusted CA bundle, the driver's own hooks, then input hashes (last, so they
//! cover volumes that earlier hooks added). Images and `--v` are applied while building.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, KeyToPath, PodTemplateSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::def::{DriverDef, VolumeDef};
use crate::hash::{HashedKind, annotation_key};
use crate::inputs::Inputs;
use crate::names;

/// The containers named in a comma-separated injection annotation.
fn listed(annotations: Option<&BTreeMap<String, String>>, key: &str) -> Vec<String> {
    annotations
        .and_then(|a| a.get(key))
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn named_containers<'a>(
    template: &'a mut PodTemplateSpec,
    wanted: &'a [String],
) -> impl Iterator<Item = &'a mut Container> {
    let spec = template.spec.get_or_insert_with(Default::default);
    spec.containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
        .filter(move |c| wanted.contains(&c.name))
}

/// Adds `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` (those set in `Proxy.status`) to the
/// containers the workload's `config.openshift.io/inject-proxy` annotation lists. A variable
/// already present is overwritten, so the hook can run twice.
pub fn inject_proxy(workload: &ObjectMeta, template: &mut PodTemplateSpec, inputs: &Inputs) {
    let env = inputs.proxy.env();
    if env.is_empty() {
        return;
    }
    let wanted = listed(
        workload.annotations.as_ref(),
        names::INJECT_PROXY_ANNOTATION,
    );
    for container in named_containers(template, &wanted) {
        let vars = container.env.get_or_insert_with(Vec::new);
        for (name, value) in &env {
            vars.retain(|v| v.name != *name);
            vars.push(EnvVar {
                name: (*name).to_owned(),
                value: Some((*value).to_owned()),
                ..EnvVar::default()
            });
        }
    }
}

/// Mounts the trusted CA bundle ConfigMap (key `ca-bundle.crt` as `tls-ca-bundle.pem`) at
/// `/etc/pki/ca-trust/extracted/pem` in the containers the
/// `config.openshift.io/inject-proxy-cabundle` annotation lists, when the ConfigMap has
/// that key.
pub fn mount_trusted_ca_bundle(
    def: &DriverDef,
    workload: &ObjectMeta,
    template: &mut PodTemplateSpec,
    inputs: &Inputs,
) {
    if !inputs.trusted_ca_bundle {
        return;
    }
    let wanted = listed(
        workload.annotations.as_ref(),
        names::INJECT_CA_BUNDLE_ANNOTATION,
    );
    let mut mounted = false;
    for container in named_containers(template, &wanted) {
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts.iter().any(|m| m.name == names::CA_BUNDLE_VOLUME) {
            mounts.push(VolumeMount {
                name: names::CA_BUNDLE_VOLUME.to_owned(),
                mount_path: names::CA_BUNDLE_MOUNT_PATH.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        }
        mounted = true;
    }
    if !mounted {
        return;
    }
    let volumes = template
        .spec
        .get_or_insert_with(Default::default)
        .volumes
        .get_or_insert_with(Vec::new);
    if !volumes.iter().any(|v| v.name == names::CA_BUNDLE_VOLUME) {
        volumes.push(Volume {
            name: names::CA_BUNDLE_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: names::trusted_ca_bundle(def),
                items: Some(vec![KeyToPath {
                    key: "ca-bundle.crt".to_owned(),
                    path: "tls-ca-bundle.pem".to_owned(),
                    ..KeyToPath::default()
                }]),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
}

/// Puts the hash of every Secret and ConfigMap the pod mounts (when `inputs` has one) on the
/// workload and on its pod template, so a rotation rolls the pods; not for the table's volumes
/// of `volumes` that say [`VolumeDef::roll_on_change`] false. Objects without a known hash get
/// no annotation.
pub fn annotate_input_hashes(
    def: &DriverDef,
    volumes: &[VolumeDef],
    workload: &mut ObjectMeta,
    template: &mut PodTemplateSpec,
    inputs: &Inputs,
) {
    annotate_hashes_of(
        &def.namespace,
        volumes,
        workload,
        template,
        &inputs.secret_hashes,
        &inputs.config_map_hashes,
    );
}

/// [`annotate_input_hashes`] with the hashes of the objects of `namespace`, by name: after
/// removing every input hash annotation the workload had (a controller moved to another
/// namespace mounts other objects under the same names).
pub fn annotate_hashes_of(
    namespace: &str,
    volumes: &[VolumeDef],
    workload: &mut ObjectMeta,
    template: &mut PodTemplateSpec,
    secret_hashes: &BTreeMap<String, String>,
    config_map_hashes: &BTreeMap<String, String>,
) {
    let input_hash = |key: &String| key.starts_with(crate::hash::HASH_ANNOTATION_PREFIX);
    if let Some(annotations) = workload.annotations.as_mut() {
        annotations.retain(|key, _| !input_hash(key));
    }
    if let Some(annotations) = template
        .metadata
        .as_mut()
        .and_then(|m| m.annotations.as_mut())
    {
        annotations.retain(|key, _| !input_hash(key));
    }
    let mut hashes = BTreeMap::new();
    let unhashed = |name: &str| volumes.iter().any(|v| v.name == name && !v.roll_on_change);
    for volume in template
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter(|v| !unhashed(&v.name))
    {
        let secret = volume
            .secret
            .as_ref()
            .and_then(|s| s.secret_name.as_deref());
        if let Some(hash) = secret.and_then(|name| secret_hashes.get(name).map(|h| (name, h))) {
            hashes.insert(
                annotation_key(namespace, hash.0, HashedKind::Secret),
                hash.1.clone(),
            );
        }
        let cm = volume.config_map.as_ref().map(|c| c.name.as_str());
        if let Some(hash) = cm.and_then(|name| config_map_hashes.get(name).map(|h| (name, h))) {
            hashes.insert(
                annotation_key(namespace, hash.0, HashedKind::ConfigMap),
                hash.1.clone(),
            );
        }
    }
    if hashes.is_empty() {
        return;
    }
    workload
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(hashes.clone());
    template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(hashes);
}
