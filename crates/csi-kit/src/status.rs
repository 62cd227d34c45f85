//! Pure status: condition names of a driver operator and the Available/Progressing/Degraded
//! conditions computed from the observed controller Deployment and node DaemonSet, with
//! library-go's semantics (Progressing only during a real rollout, not when a node reboots;
//! Degraded after 15 minutes of progressing). Conditions carry no transition time; the status
//! writer stamps it.

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;

/// The StorageClass controller's condition; fixed, without the driver prefix, as in library-go.
pub const STORAGE_CLASS_CONTROLLER_DEGRADED: &str = "StorageClassControllerDegraded";
/// Reason of a workload that is rolling out or not yet available.
pub const REASON_DEPLOYING: &str = "Deploying";
/// Reason of a condition at its good value.
pub const REASON_AS_EXPECTED: &str = "AsExpected";
/// How long a controller Deployment may progress before the operator reports Degraded.
pub const PROGRESSING_TIMEOUT: SignedDuration = SignedDuration::from_secs(15 * 60);
/// DaemonSet annotation recording the last generation that finished rolling out: while it
/// equals the generation, missing node pods (a rebooting node) are not progress.
pub const STABLE_GENERATION_ANNOTATION: &str = "storage.openshift.io/stable-generation";

/// `<prefix>DriverControllerServiceController`, e.g. `GCPPDDriverControllerServiceController`.
pub fn controller_service_controller(prefix: &str) -> String {
    format!("{prefix}DriverControllerServiceController")
}

/// `<prefix>DriverNodeServiceController`.
pub fn node_service_controller(prefix: &str) -> String {
    format!("{prefix}DriverNodeServiceController")
}

/// `<prefix>DriverStaticResourcesController`.
pub fn static_resources_controller(prefix: &str) -> String {
    format!("{prefix}DriverStaticResourcesController")
}

/// `<prefix>DriverServiceMonitorController`.
pub fn service_monitor_controller(prefix: &str) -> String {
    format!("{prefix}DriverServiceMonitorController")
}

fn cond(type_: String, status: ConditionStatus, reason: &str, message: &str) -> OperatorCondition {
    OperatorCondition {
        type_,
        status,
        last_transition_time: None,
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    }
}

/// The Available and Progressing conditions of a workload controller.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadConditions {
    /// `<controller>Available`.
    pub available: OperatorCondition,
    /// `<controller>Progressing`.
    pub progressing: OperatorCondition,
}

impl WorkloadConditions {
    /// Whether the workload is rolling out.
    pub fn is_progressing(&self) -> bool {
        self.progressing.status == ConditionStatus::True
    }
}

fn pair(
    controller: &str,
    available: Option<&str>,
    waiting: &str,
    available_message: &str,
    progressing: Option<String>,
    steady_message: &str,
) -> WorkloadConditions {
    let available = match available {
        Some(_) => cond(
            format!("{controller}Available"),
            ConditionStatus::True,
            REASON_AS_EXPECTED,
            available_message,
        ),
        None => cond(
            format!("{controller}Available"),
            ConditionStatus::False,
            REASON_DEPLOYING,
            waiting,
        ),
    };
    let progressing = match progressing {
        Some(message) => cond(
            format!("{controller}Progressing"),
            ConditionStatus::True,
            REASON_DEPLOYING,
            &message,
        ),
        None => cond(
            format!("{controller}Progressing"),
            ConditionStatus::False,
            REASON_AS_EXPECTED,
            steady_message,
        ),
    };
    WorkloadConditions {
        available,
        progressing,
    }
}

/// Why the Deployment is progressing, or `None`. A Deployment whose own Progressing condition
/// says `NewReplicaSetAvailable` has finished its rollout: a pod lost to a node reboot or
/// eviction afterwards is not progress.
fn deployment_progress(d: &Deployment) -> Option<String> {
    let status = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or_default();
    if status.observed_generation.unwrap_or_default() != generation {
        return Some("Waiting for Deployment to act on changes".to_owned());
    }
    let rolled_out = status.conditions.iter().flatten().any(|c| {
        c.type_ == "Progressing"
            && c.status == "True"
            && c.reason.as_deref() == Some("NewReplicaSetAvailable")
    });
    if rolled_out {
        return None;
    }
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    if status.unavailable_replicas.unwrap_or_default() > 0 {
        return Some("Waiting for Deployment to deploy pods".to_owned());
    }
    if status.updated_replicas.unwrap_or_default() < desired {
        return Some("Waiting for Deployment to update pods".to_owned());
    }
    if status.available_replicas.unwrap_or_default() < desired {
        return Some("Waiting for Deployment to deploy pods".to_owned());
    }
    None
}

/// Available (at least one replica available) and Progressing of the controller Deployment.
pub fn deployment_conditions(prefix: &str, d: &Deployment) -> WorkloadConditions {
    let available = d
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .filter(|n| *n > 0)
        .map(|_| "");
    pair(
        &controller_service_controller(prefix),
        available,
        "Waiting for Deployment",
        "Deployment is available",
        deployment_progress(d),
        "Deployment is not progressing",
    )
}

/// Whether a Deployment that is still progressing has been so for longer than
/// [`PROGRESSING_TIMEOUT`], judged by the transition time of the previously written
/// Progressing condition. The controller then reports `<controller>Degraded`.
pub fn progressing_too_long(
    now: &Time,
    conditions: &WorkloadConditions,
    previous: Option<&OperatorCondition>,
) -> bool {
    let Some(previous) = previous.filter(|p| p.status == ConditionStatus::True) else {
        return false;
    };
    let Some(since) = previous.last_transition_time.as_ref() else {
        return false;
    };
    conditions.is_progressing() && now.0.duration_since(since.0) > PROGRESSING_TIMEOUT
}

/// Why the DaemonSet is progressing, or `None`. While the stable-generation annotation equals
/// the generation the rollout is over and missing node pods are not progress.
fn daemon_set_progress(ds: &DaemonSet) -> Option<String> {
    let generation = ds.metadata.generation.unwrap_or_default();
    let stable = ds
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STABLE_GENERATION_ANNOTATION))
        .and_then(|v| v.parse::<i64>().ok());
    if stable == Some(generation) {
        return None;
    }
    let status = ds.status.clone().unwrap_or_default();
    if status.observed_generation.unwrap_or_default() != generation {
        return Some("Waiting for DaemonSet to act on changes".to_owned());
    }
    if status.updated_number_scheduled.unwrap_or_default() < status.desired_number_scheduled {
        return Some(format!(
            "Waiting for DaemonSet to update {} node pods",
            status.desired_number_scheduled
        ));
    }
    if status.number_unavailable.unwrap_or_default() > 0 {
        return Some("Waiting for DaemonSet to deploy node pods".to_owned());
    }
    None
}

/// Available (at least one node pod available) and Progressing of the node DaemonSet.
pub fn daemon_set_conditions(prefix: &str, ds: &DaemonSet) -> WorkloadConditions {
    daemon_set_conditions_of(&node_service_controller(prefix), ds)
}

/// [`daemon_set_conditions`] of any DaemonSet, under the name of the controller that runs it
/// (e.g. Manila's `NFSDriverNodeServiceController`).
pub fn daemon_set_conditions_of(controller: &str, ds: &DaemonSet) -> WorkloadConditions {
    let available = ds
        .status
        .as_ref()
        .and_then(|s| s.number_available)
        .filter(|n| *n > 0)
        .map(|_| "");
    pair(
        controller,
        available,
        "Waiting for the DaemonSet to deploy the CSI Node Service",
        "DaemonSet is available",
        daemon_set_progress(ds),
        "DaemonSet is not progressing",
    )
}

/// The stable generation to put on the desired DaemonSet before applying it: the observed
/// generation once its rollout has finished, else whatever it already carried. Written into the
/// desired object (not patched afterwards) so it is part of the applied content and never
/// causes an extra write.
pub fn stable_generation(observed: Option<&DaemonSet>) -> Option<i64> {
    let observed = observed?;
    let carried = observed
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STABLE_GENERATION_ANNOTATION))
        .and_then(|v| v.parse::<i64>().ok());
    let mut without_stable = observed.clone();
    if let Some(a) = without_stable.metadata.annotations.as_mut() {
        a.remove(STABLE_GENERATION_ANNOTATION);
    }
    if daemon_set_progress(&without_stable).is_none() {
        observed.metadata.generation.or(carried)
    } else {
        carried
    }
}

/// Puts [`stable_generation`] of the observed DaemonSet on the desired one.
pub fn with_stable_generation(desired: &mut DaemonSet, observed: Option<&DaemonSet>) {
    if let Some(generation) = stable_generation(observed) {
        desired
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                STABLE_GENERATION_ANNOTATION.to_owned(),
                generation.to_string(),
            );
    }
}
