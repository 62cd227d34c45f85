//! Build status from what happens to the build pod: the phase, and, where OpenShift leaves a
//! build silently Pending, the reason. A build pod stuck because a CSI volume cannot be
//! mounted (FailedMount events for that volume) says which volume and which driver.

use api::build_v1::{Build, BuildPhase, BuildVolumeSourceType};
use k8s_openapi::api::core::v1::{Event, Pod};

use crate::pod::name_for_build_volume;

/// The feature gate that allows CSI volumes in builds.
pub const BUILD_CSI_VOLUMES_GATE: &str = "BuildCSIVolumes";

/// A phase with its reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseUpdate {
    /// The new phase.
    pub phase: BuildPhase,
    /// A CamelCase reason, when there is one.
    pub reason: Option<String>,
    /// An explanation, when there is one.
    pub message: Option<String>,
}

impl PhaseUpdate {
    fn bare(phase: BuildPhase) -> Self {
        Self {
            phase,
            reason: None,
            message: None,
        }
    }
}

/// When a build uses CSI volumes and the gate is off: the build fails before any pod exists,
/// saying which gate (OpenShift leaves such builds in New forever).
pub fn gate_check(build: &Build, gate_enabled: bool) -> Option<PhaseUpdate> {
    let uses_csi = build
        .volumes()
        .iter()
        .any(|v| v.source.type_ == Some(BuildVolumeSourceType::CSI));
    (uses_csi && !gate_enabled).then(|| PhaseUpdate {
        phase: BuildPhase::Failed,
        reason: Some("CannotCreateBuildPodSpec".into()),
        message: Some(format!(
            "Failed to create pod spec: csi volumes require the {BUILD_CSI_VOLUMES_GATE} feature gate to be enabled; \
             enable it in FeatureGate/cluster or remove the CSI volumes from the build"
        )),
    })
}

/// The build's phase from its pod and the pod's events.
pub fn from_pod(build: &Build, pod: &Pod, events: &[Event]) -> PhaseUpdate {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    match phase {
        "Succeeded" => PhaseUpdate::bare(BuildPhase::Complete),
        "Failed" => PhaseUpdate {
            phase: BuildPhase::Failed,
            reason: Some("GenericBuildFailed".into()),
            message: Some("Generic Build failure - check logs for details.".into()),
        },
        "Running" => PhaseUpdate::bare(BuildPhase::Running),
        _ => stuck_mount(build, events).unwrap_or_else(|| PhaseUpdate::bare(BuildPhase::Pending)),
    }
}

/// A Pending build whose pod cannot mount one of its build volumes.
fn stuck_mount(build: &Build, events: &[Event]) -> Option<PhaseUpdate> {
    for volume in build.volumes() {
        let Some(csi) = volume
            .source
            .csi
            .as_ref()
            .filter(|_| volume.source.type_ == Some(BuildVolumeSourceType::CSI))
        else {
            continue;
        };
        let pod_volume = name_for_build_volume(&volume.name);
        let quoted = format!("\"{pod_volume}\"");
        let failure = events
            .iter()
            .filter(|e| e.reason.as_deref() == Some("FailedMount"))
            .filter(|e| e.message.as_deref().is_some_and(|m| m.contains(&quoted)))
            .max_by_key(|e| {
                e.last_timestamp
                    .clone()
                    .or_else(|| e.metadata.creation_timestamp.clone())
            });
        if let Some(event) = failure {
            return Some(PhaseUpdate {
                phase: BuildPhase::Pending,
                reason: Some("BuildVolumeMountFailed".into()),
                message: Some(format!(
                    "build volume {:?} (CSI driver {}) cannot be mounted: {}",
                    volume.name,
                    csi.driver,
                    event.message.as_deref().unwrap_or_default()
                )),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn build(csi: bool) -> Build {
        let source = if csi {
            json!({"type": "CSI", "csi": {"driver": "csi.sharedresource.openshift.io", "readOnly": true}})
        } else {
            json!({"type": "Secret", "secret": {"secretName": "s"}})
        };
        serde_json::from_value(json!({
            "apiVersion": "build.openshift.io/v1", "kind": "Build", "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"strategy": {"type": "Docker", "dockerStrategy": {"volumes": [
                {"name": "entitlement", "source": source, "mounts": [{"destinationPath": "/etc/pki/entitlement"}]}]}}}
        }))
        .unwrap()
    }

    fn pod(phase: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "b-build"}, "status": {"phase": phase}}))
            .unwrap()
    }

    fn event(reason: &str, message: &str) -> Event {
        serde_json::from_value(
            json!({"metadata": {"name": "e"}, "involvedObject": {"name": "b-build"},
                                      "reason": reason, "message": message}),
        )
        .unwrap()
    }

    #[test]
    fn the_gate_fails_csi_builds_before_a_pod_exists() {
        let failed = gate_check(&build(true), false).unwrap();
        assert_eq!(failed.phase, BuildPhase::Failed);
        assert_eq!(failed.reason.as_deref(), Some("CannotCreateBuildPodSpec"));
        assert!(
            failed
                .message
                .unwrap()
                .contains("BuildCSIVolumes feature gate")
        );
        assert_eq!(gate_check(&build(true), true), None);
        assert_eq!(
            gate_check(&build(false), false),
            None,
            "only CSI volumes need the gate"
        );
    }

    #[test]
    fn pod_phases_become_build_phases() {
        assert_eq!(
            from_pod(&build(true), &pod("Running"), &[]).phase,
            BuildPhase::Running
        );
        assert_eq!(
            from_pod(&build(true), &pod("Succeeded"), &[]).phase,
            BuildPhase::Complete
        );
        let failed = from_pod(&build(true), &pod("Failed"), &[]);
        assert_eq!(failed.reason.as_deref(), Some("GenericBuildFailed"));
        assert_eq!(
            from_pod(&build(true), &pod("Pending"), &[]),
            PhaseUpdate::bare(BuildPhase::Pending)
        );
    }

    #[test]
    fn a_stuck_csi_mount_is_named_with_its_driver() {
        let events = [
            event("Scheduled", "assigned"),
            event(
                "FailedMount",
                "MountVolume.SetUp failed for volume \"entitlement-user-build-volume\" : rpc error: code = PermissionDenied desc = subjectaccessreviews share my-share-bc returned forbidden",
            ),
        ];
        let update = from_pod(&build(true), &pod("Pending"), &events);
        assert_eq!(update.phase, BuildPhase::Pending);
        assert_eq!(update.reason.as_deref(), Some("BuildVolumeMountFailed"));
        let message = update.message.unwrap();
        assert!(message.starts_with("build volume \"entitlement\" (CSI driver csi.sharedresource.openshift.io) cannot be mounted"), "{message}");
        assert!(message.contains("PermissionDenied"));

        // A FailedMount of another volume is not ours to explain.
        let other = [event(
            "FailedMount",
            "MountVolume.SetUp failed for volume \"kube-api-access\" : boom",
        )];
        assert_eq!(from_pod(&build(true), &pod("Pending"), &other).reason, None);
    }
}
