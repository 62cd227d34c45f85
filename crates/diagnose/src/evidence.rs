//! Objects turned into evidence with their exact words: Events, a pod's scheduling failure, a
//! pod's troubled containers with their last log lines. The rules choose which to show.

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};

use crate::report::Evidence;
use crate::snapshot::{
    Snapshot, event_reporter, event_time, format_age, name_of, namespace_of, object_name,
};

/// An Event as evidence: its object, `Warning Reason from component, N times, last 2m ago`,
/// and its message.
pub fn event(snap: &Snapshot, event: &Event) -> Evidence {
    let about = &event.involved_object;
    let object = object_name(
        about.kind.as_deref().unwrap_or("Object"),
        about.namespace.as_deref().unwrap_or_default(),
        about.name.as_deref().unwrap_or_default(),
    );
    let mut source = format!(
        "Event {} {}",
        event.type_.as_deref().unwrap_or("Normal"),
        event.reason.as_deref().unwrap_or_default()
    );
    let reporter = event_reporter(event);
    if !reporter.is_empty() {
        source.push_str(&format!(" from {reporter}"));
    }
    let count = event
        .series
        .as_ref()
        .and_then(|series| series.count)
        .or(event.count)
        .unwrap_or(1);
    if count > 1 {
        source.push_str(&format!(", {count} times"));
    }
    if let Some(time) = event_time(event) {
        source.push_str(&format!(
            ", last {} ago",
            format_age(snap.age_seconds(time))
        ));
    }
    Evidence::new(object, source, event.message.clone().unwrap_or_default())
}

/// The newest Event of `events` with one of `reasons`.
pub fn newest<'a>(events: &[&'a Event], reasons: &[&str]) -> Option<&'a Event> {
    events
        .iter()
        .find(|event| {
            event
                .reason
                .as_deref()
                .is_some_and(|reason| reasons.contains(&reason))
        })
        .copied()
}

/// Why the scheduler has not placed `pod`: its `PodScheduled=False` condition and its newest
/// FailedScheduling Event. `None` when it is scheduled or nothing says it failed.
pub fn scheduling_failure(snap: &Snapshot, pod: &Pod) -> Option<Vec<Evidence>> {
    if pod.spec.as_ref().is_some_and(|spec| {
        spec.node_name
            .as_deref()
            .is_some_and(|node| !node.is_empty())
    }) {
        return None;
    }
    let namespace = namespace_of(&pod.metadata);
    let name = name_of(&pod.metadata);
    let object = object_name("Pod", namespace, name);
    let mut evidence = Vec::new();
    let condition = pod
        .status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .find(|condition| condition.type_ == "PodScheduled" && condition.status == "False");
    if let Some(condition) = condition {
        evidence.push(Evidence::new(
            object.clone(),
            format!(
                "condition PodScheduled=False, reason {}",
                condition.reason.as_deref().unwrap_or_default()
            ),
            condition.message.clone().unwrap_or_default(),
        ));
    }
    let events = snap.events_of("Pod", namespace, name);
    if let Some(failed) = newest(&events, &["FailedScheduling"])
        && condition.is_none_or(|condition| condition.message != failed.message)
    {
        evidence.push(self::event(snap, failed));
    }
    (!evidence.is_empty()).then_some(evidence)
}

/// What is wrong with a pod that should be running: a sentence, the evidence (container
/// states, last log lines, Events) and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trouble {
    /// E.g. `container csi-driver is in CrashLoopBackOff (restarted 12 times)`.
    pub summary: String,
    /// The exact messages.
    pub evidence: Vec<Evidence>,
    /// What to do.
    pub fix: String,
}

/// The first troubled container of `pod`, or its scheduling failure, or its newest warning
/// when it is not ready for another reason. `None` for a running, ready pod.
pub fn pod_trouble(snap: &Snapshot, pod: &Pod) -> Option<Trouble> {
    let namespace = namespace_of(&pod.metadata);
    let name = name_of(&pod.metadata);
    let object = object_name("Pod", namespace, name);
    if let Some(evidence) = scheduling_failure(snap, pod) {
        return Some(Trouble {
            summary: format!("pod {name} cannot be scheduled"),
            evidence,
            fix: format!(
                "make a node fit what the scheduler names above (resources, taints and \
                 tolerations, the node selector of pod {name}), or change the pod's \
                 spec.nodeSelector / spec.tolerations"
            ),
        });
    }
    let status = pod.status.as_ref();
    let init = status
        .and_then(|status| status.init_container_statuses.as_deref())
        .unwrap_or_default();
    let main = status
        .and_then(|status| status.container_statuses.as_deref())
        .unwrap_or_default();
    for (container, is_init) in init
        .iter()
        .map(|c| (c, true))
        .chain(main.iter().map(|c| (c, false)))
    {
        if let Some(trouble) = container_trouble(snap, pod, &object, container, is_init) {
            return Some(trouble);
        }
    }
    let phase = status
        .and_then(|status| status.phase.as_deref())
        .unwrap_or("Unknown");
    let ready = status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .any(|condition| condition.type_ == "Ready" && condition.status == "True");
    if phase == "Running" && (ready || main.is_empty()) {
        return None;
    }
    if phase == "Succeeded" {
        return None;
    }
    let events = snap.events_of("Pod", namespace, name);
    let evidence = events
        .iter()
        .find(|event| event.type_.as_deref() == Some("Warning"))
        .map(|warning| vec![self::event(snap, warning)])
        .unwrap_or_default();
    Some(Trouble {
        summary: format!("pod {name} is {phase} and not ready"),
        evidence,
        fix: format!("see why with `kubectl describe pod -n {namespace} {name}`"),
    })
}

fn container_trouble(
    snap: &Snapshot,
    pod: &Pod,
    object: &str,
    container: &ContainerStatus,
    is_init: bool,
) -> Option<Trouble> {
    let namespace = namespace_of(&pod.metadata);
    let name = name_of(&pod.metadata);
    let c = &container.name;
    let state = container.state.as_ref();
    let waiting = state.and_then(|state| state.waiting.as_ref());
    let terminated = state.and_then(|state| state.terminated.as_ref());
    let running = state.and_then(|state| state.running.as_ref());
    let restarts = container.restart_count;
    let restarted = if restarts > 0 {
        format!(" (restarted {restarts} times)")
    } else {
        String::new()
    };
    let mut evidence = Vec::new();
    let (reason, summary) = if let Some(waiting) = waiting {
        let reason = waiting.reason.clone().unwrap_or_default();
        if reason.is_empty() || reason == "ContainerCreating" || reason == "PodInitializing" {
            return None;
        }
        evidence.push(Evidence::new(
            object.to_owned(),
            format!("container {c}: waiting, reason {reason}"),
            waiting.message.clone().unwrap_or_else(|| reason.clone()),
        ));
        let summary = format!("container {c} of pod {name} is in {reason}{restarted}");
        (reason, summary)
    } else if let Some(terminated) = terminated {
        if terminated.exit_code == 0 && is_init {
            return None;
        }
        let reason = terminated
            .reason
            .clone()
            .unwrap_or_else(|| "Error".to_owned());
        let summary = format!(
            "container {c} of pod {name} exited with code {}{restarted}",
            terminated.exit_code
        );
        evidence.push(Evidence::new(
            object.to_owned(),
            format!(
                "container {c}: terminated, exit code {}, reason {reason}",
                terminated.exit_code
            ),
            terminated.message.clone().unwrap_or_else(|| reason.clone()),
        ));
        ("Error".to_owned(), summary)
    } else if running.is_some() && !container.ready && !is_init {
        let summary = format!("container {c} of pod {name} is running but not ready{restarted}");
        let warnings = snap.events_of("Pod", namespace, name);
        if let Some(unhealthy) = newest(&warnings, &["Unhealthy"]) {
            evidence.push(self::event(snap, unhealthy));
        }
        ("NotReady".to_owned(), summary)
    } else {
        return None;
    };
    if let Some(last) = container
        .last_state
        .as_ref()
        .and_then(|state| state.terminated.as_ref())
    {
        evidence.push(Evidence::new(
            object.to_owned(),
            format!(
                "container {c}: last terminated, exit code {}, reason {}",
                last.exit_code,
                last.reason.as_deref().unwrap_or_default()
            ),
            last.message
                .clone()
                .unwrap_or_else(|| format!("exit code {}", last.exit_code)),
        ));
    }
    if let Some(log) = snap.log(namespace, name, c)
        && !log.lines.is_empty()
    {
        let run = if log.previous { ", previous run" } else { "" };
        evidence.push(Evidence::new(
            object.to_owned(),
            format!("last {} log lines of container {c}{run}", log.lines.len()),
            log.lines.join("\n"),
        ));
    }
    let image = pod
        .spec
        .iter()
        .flat_map(|spec| {
            spec.init_containers
                .iter()
                .flatten()
                .chain(spec.containers.iter())
        })
        .find(|spec| spec.name == *c)
        .and_then(|spec| spec.image.clone())
        .unwrap_or_else(|| container.image.clone());
    let node = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or("its node");
    let fix = match reason.as_str() {
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
            format!(
                "image {image} of container {c} cannot be pulled: check that it exists and that \
                 {node} can reach its registry (pull secret, proxy, image mirror); `kubectl \
                 describe pod -n {namespace} {name}` shows each attempt"
            )
        }
        "CrashLoopBackOff" | "Error" | "RunContainerError" => format!(
            "container {c} exits soon after it starts: read `kubectl logs -n {namespace} {name} \
             -c {c} --previous` and fix what it reports (often the cloud credentials or \
             configuration); the pod restarts on its own"
        ),
        "CreateContainerConfigError" | "CreateContainerError" => format!(
            "a Secret, ConfigMap or key that container {c} reads is missing: create what the \
             message names in namespace {namespace}"
        ),
        "NotReady" => format!(
            "the readiness probe of container {c} fails: `kubectl describe pod -n {namespace} \
             {name}` shows the probe, and `kubectl logs -n {namespace} {name} -c {c}` why"
        ),
        _ => format!(
            "see `kubectl describe pod -n {namespace} {name}` and `kubectl logs -n {namespace} \
             {name} -c {c}`"
        ),
    };
    Some(Trouble {
        summary,
        evidence,
        fix,
    })
}
