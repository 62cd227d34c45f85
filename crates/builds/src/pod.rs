//! Build pod wiring: each build volume becomes a pod volume mounted read only in the build
//! container under `/var/run/openshift.io/volumes/<name>`, named as OpenShift names them
//! (`<name>-user-build-volume`, shortened with a hash past 63 characters), so the builder image
//! finds it where it expects it. CSI volumes are forced read only, as the proposal says.

use api::build_v1::{BuildVolume, BuildVolumeSourceType};
use k8s_openapi::api::core::v1::{PodSpec, Volume, VolumeMount};

/// Where build volumes are mounted in the build container.
pub const BUILD_VOLUME_MOUNT_PATH: &str = "/var/run/openshift.io/volumes";
/// The suffix of every build volume's pod volume name.
pub const BUILD_VOLUME_SUFFIX: &str = "user-build-volume";

/// A build's volumes cannot be wired into its pod.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WiringError {
    /// The pod has no container to mount into.
    #[error("the build pod has no container to mount build volumes into")]
    NoContainer,
    /// A destination path is already a mount path of the build container.
    #[error(
        "user provided BuildVolumeMount path {0:?} collides with VolumeMount path created by the build controller"
    )]
    Collision(String),
    /// A volume's source does not match its type (validation catches this first).
    #[error("build volume {0:?} has no {1} source")]
    MissingSource(String, String),
    /// A volume type this version does not know.
    #[error("encountered unsupported build volume source type {0:?}")]
    Unsupported(String),
}

/// FNV-1a 32-bit, as Go's `hash/fnv` computes it (library-go's name hash; no crate in the lock
/// computes FNV).
fn fnv32a(value: &str) -> u32 {
    value.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

/// library-go's `naming.GetName(base, suffix, maxLength)`: `<base>-<suffix>`, or when that is too
/// long, a shortened base, an 8-digit hash of the base, and the suffix.
pub fn get_name(base: &str, suffix: &str, max_length: usize) -> String {
    let name = format!("{base}-{suffix}");
    if name.len() <= max_length {
        return name;
    }
    let cut = |s: &str, n: usize| s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    match max_length.checked_sub(10 + suffix.len()) {
        Some(base_length) => {
            format!(
                "{}-{:08x}-{suffix}",
                &base[..cut(base, base_length)],
                fnv32a(base)
            )
        }
        None => {
            let prefix = &base[..cut(base, max_length.saturating_sub(9))];
            let short = format!("{prefix}-{:08x}", fnv32a(&name));
            short[..cut(&short, max_length)].to_owned()
        }
    }
}

/// The pod volume name for a build volume source named `name`.
pub fn name_for_build_volume(name: &str) -> String {
    get_name(&name.to_lowercase(), BUILD_VOLUME_SUFFIX, 63).replace('.', "-")
}

/// Where the pod volume for `name` is mounted in the build container.
pub fn path_for_build_volume(name: &str) -> String {
    format!("{BUILD_VOLUME_MOUNT_PATH}/{}", name_for_build_volume(name))
}

/// Adds `volumes` to the build pod: volumes to the pod, read-only mounts to its first container.
pub fn wire_volumes(pod: &mut PodSpec, volumes: &[BuildVolume]) -> Result<(), WiringError> {
    let existing: Vec<String> = pod
        .containers
        .first()
        .ok_or(WiringError::NoContainer)?
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.clone())
        .collect();
    for volume in volumes {
        for mount in &volume.mounts {
            if existing.contains(&mount.destination_path) {
                return Err(WiringError::Collision(mount.destination_path.clone()));
            }
        }
        let source = &volume.source;
        let missing = |kind: &str| WiringError::MissingSource(volume.name.clone(), kind.to_owned());
        let (object_name, pod_volume) = match source.type_.as_ref() {
            Some(BuildVolumeSourceType::Secret) => {
                let secret = source.secret.clone().ok_or_else(|| missing("secret"))?;
                let name = secret.secret_name.clone().unwrap_or_default();
                (
                    name,
                    Volume {
                        secret: Some(secret),
                        ..Default::default()
                    },
                )
            }
            Some(BuildVolumeSourceType::ConfigMap) => {
                let config_map = source
                    .config_map
                    .clone()
                    .ok_or_else(|| missing("configMap"))?;
                (
                    config_map.name.clone(),
                    Volume {
                        config_map: Some(config_map),
                        ..Default::default()
                    },
                )
            }
            Some(BuildVolumeSourceType::CSI) => {
                let mut csi = source.csi.clone().ok_or_else(|| missing("csi"))?;
                // Builds never write to their input volumes.
                csi.read_only = Some(true);
                (
                    volume.name.clone(),
                    Volume {
                        csi: Some(csi),
                        ..Default::default()
                    },
                )
            }
            other => {
                return Err(WiringError::Unsupported(
                    other.map(|t| t.as_str().to_owned()).unwrap_or_default(),
                ));
            }
        };
        let name = name_for_build_volume(&object_name);
        let volumes = pod.volumes.get_or_insert_default();
        if !volumes.iter().any(|v| v.name == name) {
            volumes.push(Volume {
                name: name.clone(),
                ..pod_volume
            });
        }
        let container = pod.containers.first_mut().ok_or(WiringError::NoContainer)?;
        container
            .volume_mounts
            .get_or_insert_default()
            .push(VolumeMount {
                name,
                mount_path: path_for_build_volume(&object_name),
                read_only: Some(true),
                ..Default::default()
            });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    #[rstest]
    #[case("csi-one", "csi-one-user-build-volume")]
    #[case("My.Secret", "my-secret-user-build-volume")]
    fn short_names_are_suffixed(#[case] name: &str, #[case] expected: &str) {
        assert_eq!(name_for_build_volume(name), expected);
        assert_eq!(
            path_for_build_volume(name),
            format!("/var/run/openshift.io/volumes/{expected}")
        );
    }

    #[test]
    fn long_names_are_shortened_with_a_hash_to_63_characters() {
        let long = "a".repeat(60);
        let name = name_for_build_volume(&long);
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("-user-build-volume"), "{name}");
        assert_eq!(
            name,
            format!("{}-{:08x}-user-build-volume", "a".repeat(36), fnv32a(&long))
        );
        assert_ne!(
            name_for_build_volume(&"b".repeat(60)),
            name,
            "the hash tells long names apart"
        );
    }

    #[test]
    fn fnv_matches_go() {
        // Go: fmt.Sprintf("%08x", fnv.New32a().Sum32()) of "" and "a".
        assert_eq!(format!("{:08x}", fnv32a("")), "811c9dc5");
        assert_eq!(format!("{:08x}", fnv32a("a")), "e40c292c");
    }

    fn build_pod() -> PodSpec {
        serde_json::from_value(json!({"containers": [{"name": "docker-build", "image": "builder",
            "volumeMounts": [{"name": "push", "mountPath": "/var/run/secrets/openshift.io/push"}]}]}))
        .unwrap()
    }

    fn volumes(value: serde_json::Value) -> Vec<BuildVolume> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn csi_volumes_are_wired_read_only_even_when_asked_otherwise() {
        let mut pod = build_pod();
        let wanted = volumes(json!([
            {"name": "csi-one", "source": {"type": "CSI", "csi": {"driver": "inline.storage.kubernetes.io",
              "volumeAttributes": {"foo": "bar"}}}, "mounts": [{"destinationPath": "/etc/pki/entitlement"}]},
            {"name": "creds", "source": {"type": "Secret", "secret": {"secretName": "Repo-Creds"}},
             "mounts": [{"destinationPath": "/opt/creds"}]}
        ]));
        wire_volumes(&mut pod, &wanted).unwrap();
        let pod_volumes = pod.volumes.unwrap();
        assert_eq!(pod_volumes[0].name, "csi-one-user-build-volume");
        let csi = pod_volumes[0].csi.as_ref().unwrap();
        assert_eq!(csi.read_only, Some(true));
        assert_eq!(csi.volume_attributes.as_ref().unwrap()["foo"], "bar");
        assert_eq!(
            pod_volumes[1].name, "repo-creds-user-build-volume",
            "Secrets are named after the Secret"
        );
        let mounts = pod.containers[0].volume_mounts.clone().unwrap();
        assert_eq!(mounts.len(), 3);
        assert!(mounts[1..].iter().all(|m| m.read_only == Some(true)));
        assert_eq!(
            mounts[1].mount_path,
            "/var/run/openshift.io/volumes/csi-one-user-build-volume"
        );
    }

    #[test]
    fn a_destination_on_a_controller_mount_is_refused() {
        let mut pod = build_pod();
        let wanted = volumes(
            json!([{"name": "x", "source": {"type": "CSI", "csi": {"driver": "d.example.com"}},
            "mounts": [{"destinationPath": "/var/run/secrets/openshift.io/push"}]}]),
        );
        let error = wire_volumes(&mut pod, &wanted).unwrap_err();
        assert_eq!(
            error.to_string(),
            "user provided BuildVolumeMount path \"/var/run/secrets/openshift.io/push\" collides with VolumeMount path created by the build controller"
        );
    }
}

/// The build pod cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildPodError {
    /// Only Docker and Source builds are run here.
    #[error(
        "build strategy {0:?} is not run by this controller; only Docker and Source builds are"
    )]
    Strategy(String),
    /// The build could not be serialized for the builder.
    #[error("serializing the build for the builder: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The volumes could not be wired.
    #[error(transparent)]
    Wiring(#[from] WiringError),
}

/// The default time a build may run: a week, as OpenShift's.
pub const DEFAULT_DEADLINE_SECONDS: i64 = 604_800;

/// The pod that runs `build` with OpenShift's builder image: one privileged container
/// (`docker-build` or `sti-build`) reading the build from the `BUILD` env var, build volumes
/// wired read only.
pub fn build_pod(
    build: &api::build_v1::Build,
    builder_image: &str,
) -> Result<k8s_openapi::api::core::v1::Pod, BuildPodError> {
    use api::build_v1::BuildStrategyType;
    use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, SecurityContext};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use kube::ResourceExt;

    let (container, command) = match build.spec.strategy.type_ {
        Some(BuildStrategyType::Docker) => ("docker-build", "openshift-docker-build"),
        Some(BuildStrategyType::Source) => ("sti-build", "openshift-sti-build"),
        ref other => {
            return Err(BuildPodError::Strategy(
                other
                    .as_ref()
                    .map(|t| t.as_str().to_owned())
                    .unwrap_or_default(),
            ));
        }
    };
    // The builder reads the whole build, volumes included, from this variable.
    let mut serialized = serde_json::to_value(build)?;
    if let Some(object) = serialized.as_object_mut() {
        object.insert("apiVersion".into(), "build.openshift.io/v1".into());
        object.insert("kind".into(), "Build".into());
        object.remove("status");
    }
    let name = build.name_any();
    let labels = [("openshift.io/build.name".to_owned(), name.clone())];
    let mut spec = k8s_openapi::api::core::v1::PodSpec {
        service_account_name: Some(
            build
                .spec
                .service_account
                .clone()
                .unwrap_or_else(|| crate::names::DEFAULT_SERVICE_ACCOUNT.into()),
        ),
        restart_policy: Some("Never".into()),
        active_deadline_seconds: Some(
            build
                .spec
                .completion_deadline_seconds
                .unwrap_or(DEFAULT_DEADLINE_SECONDS),
        ),
        node_selector: build.spec.node_selector.clone(),
        containers: vec![Container {
            name: container.into(),
            image: Some(builder_image.into()),
            command: Some(vec![command.into()]),
            env: Some(vec![EnvVar {
                name: "BUILD".into(),
                value: Some(serialized.to_string()),
                ..Default::default()
            }]),
            resources: build.spec.resources.clone(),
            // buildah needs it, as on OpenShift.
            security_context: Some(SecurityContext {
                privileged: Some(true),
                ..Default::default()
            }),
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    wire_volumes(&mut spec, build.volumes())?;
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(format!("{name}-build")),
            namespace: build.namespace(),
            labels: Some(labels.iter().cloned().collect()),
            annotations: Some(labels.into_iter().collect()),
            owner_references: Some(vec![OwnerReference {
                api_version: "build.openshift.io/v1".into(),
                kind: "Build".into(),
                name,
                uid: build.uid().unwrap_or_default(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}
