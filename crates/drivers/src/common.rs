//! Small pieces several driver modules' hooks share: finding the `csi-driver` container and
//! setting its environment, dropping a credentials volume where there are none, and locking down
//! the helper containers drivers add.

use csi_kit::{Inputs, names};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Capabilities, Container, EnvVar, PodSpec};

/// The pod spec of a Deployment, if it has one.
pub fn pod_spec(deployment: &mut Deployment) -> Option<&mut PodSpec> {
    deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
}

/// The `csi-driver` container of a pod.
pub fn driver_container(spec: &mut PodSpec) -> Option<&mut Container> {
    spec.containers
        .iter_mut()
        .find(|c| c.name == names::DRIVER_CONTAINER)
}

/// Sets `var` on `container`, replacing a variable of the same name (hooks may run twice).
pub fn set_env(container: &mut Container, var: EnvVar) {
    let env = container.env.get_or_insert_with(Vec::new);
    env.retain(|e| e.name != var.name);
    env.push(var);
}

/// A literal environment variable.
pub fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

/// Replaces the argument starting with `prefix` (e.g. `--extra-tags=`) by `arg`.
pub fn set_arg(container: &mut Container, prefix: &str, arg: String) {
    let args = container.args.get_or_insert_with(Vec::new);
    args.retain(|a| !a.starts_with(prefix));
    args.push(arg);
}

/// On plain Kubernetes, when the credentials Secret does not exist (the observe step found no
/// hash for it), drops its volume and the variables that point into it, so the driver uses the
/// node's ambient identity (instance metadata) instead of waiting forever for a Secret nobody
/// will create. On OpenShift the pods wait for cloud-credential-operator.
pub fn drop_missing_credentials(
    inputs: &Inputs,
    deployment: &mut Deployment,
    secret: &str,
    volume: &str,
    env: &[&str],
) {
    if inputs.topology.is_openshift() || inputs.secret_hashes.contains_key(secret) {
        return;
    }
    let Some(spec) = pod_spec(deployment) else {
        return;
    };
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| v.name != volume);
    }
    for container in &mut spec.containers {
        if let Some(mounts) = container.volume_mounts.as_mut() {
            mounts.retain(|m| m.name != volume);
        }
        if let Some(vars) = container.env.as_mut() {
            vars.retain(|e| !env.contains(&e.name.as_str()));
        }
    }
}

/// The pod spec of a DaemonSet, if it has one.
pub fn ds_pod_spec(daemon_set: &mut k8s_openapi::api::apps::v1::DaemonSet) -> Option<&mut PodSpec> {
    daemon_set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
}

/// An environment variable from a key of a Secret, optional (unset when the key is absent).
pub fn from_secret(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(k8s_openapi::api::core::v1::EnvVarSource {
            secret_key_ref: Some(k8s_openapi::api::core::v1::SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: Some(true),
            }),
            ..Default::default()
        }),
        ..EnvVar::default()
    }
}

/// Adds `volume` to the pod, replacing one of the same name.
pub fn add_volume(spec: &mut PodSpec, volume: k8s_openapi::api::core::v1::Volume) {
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    volumes.retain(|v| v.name != volume.name);
    volumes.push(volume);
}

/// Replaces the pod's volume of the same name where it stands, or adds `volume` last.
pub fn put_volume(spec: &mut PodSpec, volume: k8s_openapi::api::core::v1::Volume) {
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    match volumes.iter_mut().find(|v| v.name == volume.name) {
        Some(v) => *v = volume,
        None => volumes.push(volume),
    }
}

/// A tmpfs volume (`emptyDir: {medium: Memory}`): where HyperShift's token minter writes a
/// controller's cloud token with a hosted control plane.
pub fn memory_volume(name: &str) -> k8s_openapi::api::core::v1::Volume {
    k8s_openapi::api::core::v1::Volume {
        name: name.to_owned(),
        empty_dir: Some(k8s_openapi::api::core::v1::EmptyDirVolumeSource {
            medium: Some("Memory".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Forbids privilege escalation and drops every capability: for the helper containers a
/// driver adds, which need neither (the kit's containers get what their SCC imposes).
pub fn unprivileged(container: &mut Container) {
    let sc = container
        .security_context
        .get_or_insert_with(Default::default);
    sc.allow_privilege_escalation = Some(false);
    sc.capabilities = Some(Capabilities {
        drop: Some(vec!["ALL".to_owned()]),
        ..Capabilities::default()
    });
}
