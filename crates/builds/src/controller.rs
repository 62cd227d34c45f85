//! `storage-operator builds`: the build-pod controller. It watches Builds (label-selected when
//! asked), their pods, FailedMount events and FeatureGate `cluster`, and for each Docker or
//! Source build that is not over: validates it, creates its pod with the build volumes wired,
//! and keeps its phase in step with the pod ([`crate::plan`] decides; this module acts).
//!
//! On plain Kubernetes, Builds are served by the CRD in `deploy/crds/`. On OpenShift,
//! openshift-apiserver serves them and openshift-controller-manager runs them; two controllers
//! running the same build would race, so there the controller starts only with a label selector
//! naming the builds it handles. No polling: every input is a watch cache, and a pass that finds
//! nothing to change writes nothing.
//!
//! Each build is reconciled on its own ([`opkit::controller`], kube-runtime's applier): a
//! change to a build, its pod (by the build-name label) or a FailedMount event of its pod asks
//! for that build; FeatureGate asks for all. A build whose writes fail is retried after its
//! own backoff; the others are not held up.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::build_v1::Build;
use api::config_v1::{FeatureGate, GateState};
use k8s_openapi::api::core::v1::{Event, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use opkit::admin::Readiness;
use opkit::apply::delete_observed;
use opkit::controller::Queue;
use opkit::metrics::Metrics;
use opkit::runtime::{Informers, LoopConfig, ReconcileError, named, single};

use crate::names::{BUILD_CRD, DEFAULT_SERVICE_ACCOUNT};
use crate::phase::BUILD_CSI_VOLUMES_GATE;
use crate::plan::{PodAction, REASON_CANNOT_CREATE_POD, plan, pod_name, status_patch};

/// The controller's name in metrics and logs, and its field manager.
pub const CONTROLLER: &str = "storage-operator-builds";
/// The label every build pod carries (the build's name).
pub const BUILD_NAME_LABEL: &str = "openshift.io/build.name";
/// The builder image when none is given: OpenShift's (it reads the build from `BUILD`).
pub const DEFAULT_BUILDER_IMAGE: &str = "quay.io/openshift/origin-docker-builder:latest";
/// How long the caches may take to fill at start.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The image of the build pods.
    pub builder_image: String,
    /// A label selector: only the Builds it matches are handled. Required on OpenShift.
    pub selector: Option<String>,
    /// Only Builds in this namespace; all namespaces when `None`.
    pub namespace: Option<String>,
    /// The release version whose FeatureGate status decides `BuildCSIVolumes` (the first
    /// version listed when this one is not).
    pub version: String,
}

/// Who serves `build.openshift.io/v1` Builds on this cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// Nobody: the API is not served.
    None,
    /// Our CRD (plain Kubernetes): this controller runs every build.
    Crd,
    /// OpenShift's API server, whose controller manager runs builds too.
    OpenShift,
}

/// The controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Discovery failed.
    #[error("discovering the build.openshift.io API: {0}")]
    Discovery(#[source] kube::Error),
    /// No Build API.
    #[error(
        "the cluster does not serve build.openshift.io/v1 builds; install the Build CRD \
         (deploy/crds/build.openshift.io_builds.yaml) and start again"
    )]
    NotServed,
    /// OpenShift without a selector.
    #[error(
        "this is an OpenShift cluster: openshift-controller-manager already runs its builds, and two \
         controllers running one build would race. Give --selector with a label selector naming the \
         builds this controller handles (and that OpenShift's does not), e.g. \
         --selector builds.storage.openshift.io/controller=storage-operator"
    )]
    OpenShiftNeedsSelector,
    /// The selector does not parse.
    #[error("--selector {selector:?} is not a label selector: {reason}")]
    BadSelector {
        /// The selector.
        selector: String,
        /// Why.
        reason: String,
    },
    /// The caches did not fill.
    #[error(transparent)]
    NotSynced(#[from] opkit::runtime::NotSynced),
}

/// Whether the controller may start: Builds must be served, and on OpenShift a selector given.
pub fn check_start(server: Server, selector: Option<&str>) -> Result<(), StartError> {
    match server {
        Server::None => Err(StartError::NotServed),
        Server::OpenShift if selector.is_none_or(|s| s.trim().is_empty()) => {
            Err(StartError::OpenShiftNeedsSelector)
        }
        Server::OpenShift | Server::Crd => Ok(()),
    }
}

/// Checks a label selector's syntax the way the API server would refuse it, before watching.
pub fn check_selector(selector: &str) -> Result<(), StartError> {
    let bad = |reason: &str| StartError::BadSelector {
        selector: selector.to_owned(),
        reason: reason.to_owned(),
    };
    for term in selector.split(',').map(str::trim) {
        if term.is_empty() {
            return Err(bad(
                "an empty term (two commas in a row, or a trailing comma)",
            ));
        }
        let key = term
            .trim_start_matches('!')
            .split(['=', '!', ' '])
            .next()
            .unwrap_or_default();
        if key.is_empty() {
            return Err(bad(&format!("term {term:?} has no key")));
        }
        let valid_key = key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        if !valid_key {
            return Err(bad(&format!(
                "key {key:?} may contain only letters, digits, '-', '_', '.' and '/'"
            )));
        }
    }
    Ok(())
}

/// Who serves Builds, and whether FeatureGate is served.
async fn discover(client: &Client) -> Result<(Server, bool), StartError> {
    let builds = opkit::discovery::served_resources(client, "build.openshift.io/v1")
        .await
        .map_err(StartError::Discovery)?;
    let server = if !builds.contains("builds") {
        Server::None
    } else {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        match crds.get(BUILD_CRD).await {
            Ok(_) => Server::Crd,
            Err(kube::Error::Api(status)) if status.code == 404 => Server::OpenShift,
            Err(error) => return Err(StartError::Discovery(error)),
        }
    };
    let config = opkit::discovery::served_resources(client, "config.openshift.io/v1")
        .await
        .map_err(StartError::Discovery)?;
    Ok((server, config.contains("featuregates")))
}

/// A step of a build's reconcile that failed, naming the build (`namespace/name`).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Creating the build pod (or the `builder` ServiceAccount it runs as) was refused.
    #[error("creating the pod of build {build}: {source}")]
    CreatePod {
        /// The build.
        build: String,
        /// What the API server or the client said.
        #[source]
        source: kube::Error,
    },
    /// Deleting the pod of a cancelled build failed.
    #[error("deleting the pod of cancelled build {build}: {source}")]
    DeletePod {
        /// The build.
        build: String,
        /// What the API server or the client said.
        #[source]
        source: kube::Error,
    },
    /// Writing the build's status failed.
    #[error("writing the status of build {build}: {source}")]
    WriteStatus {
        /// The build.
        build: String,
        /// What the API server or the client said.
        #[source]
        source: kube::Error,
    },
}

impl Failure {
    /// The reason of the Warning Event that reports it on the build: which step failed.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::CreatePod { .. } => "CreatePodFailed",
            Failure::DeletePod { .. } => "DeletePodFailed",
            Failure::WriteStatus { .. } => "StatusUpdateFailed",
        }
    }
}

impl ReconcileError for Failure {
    /// What the server answered ([`opkit::apply::category`]).
    fn category(&self) -> &'static str {
        match self {
            Failure::CreatePod { source, .. }
            | Failure::DeletePod { source, .. }
            | Failure::WriteStatus { source, .. } => opkit::apply::category(source),
        }
    }
}

struct Context {
    client: Client,
    settings: Settings,
    server: Server,
    pods: Store<Pod>,
    events: Store<Event>,
    feature_gate: Option<Store<FeatureGate>>,
    metrics: Metrics,
    recorder: Recorder,
}

/// Runs the build controller until `shutdown` completes.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    if let Some(selector) = &settings.selector {
        check_selector(selector)?;
    }
    let (server, feature_gates) = discover(&client).await?;
    check_start(server, settings.selector.as_deref())?;
    tracing::info!(?server, selector = ?settings.selector, namespace = ?settings.namespace, "handling builds");

    let mut informers = Informers::new();
    let scoped = |client: &Client| -> (Api<Build>, Api<Pod>, Api<Event>) {
        match &settings.namespace {
            Some(ns) => (
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client.clone(), ns),
            ),
            None => (
                Api::all(client.clone()),
                Api::all(client.clone()),
                Api::all(client.clone()),
            ),
        }
    };
    let (builds_api, pods_api, events_api) = scoped(&client);
    let mut builds_config = watcher::Config::default();
    if let Some(selector) = &settings.selector {
        builds_config = builds_config.labels(selector);
    }
    let queue = Queue::new();
    let requests = queue.requests();
    let builds = informers.watch_then(
        "builds",
        builds_api,
        builds_config,
        requests.mapping(|build: &Build| [ObjectRef::from_obj(build)]),
    );
    let pods = informers.watch_then(
        "pods",
        pods_api,
        watcher::Config::default().labels(BUILD_NAME_LABEL),
        requests.mapping(build_of_pod),
    );
    let events = informers.watch_then(
        "events",
        events_api,
        watcher::Config::default().fields("involvedObject.kind=Pod,reason=FailedMount"),
        requests.mapping(build_of_event),
    );
    let feature_gate = feature_gates.then(|| {
        informers.watch_then(
            "featuregates",
            Api::all(client.clone()),
            named("cluster"),
            requests.every(),
        )
    });
    drop(requests);
    informers.wait_synced(SYNC_TIMEOUT).await?;
    readiness.set(true);
    tracing::info!("caches synced; running builds");
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: CONTROLLER.to_owned(),
            instance: None,
        },
    );
    let context = Context {
        recorder,
        client,
        settings,
        server,
        pods,
        events,
        feature_gate,
        metrics: metrics.clone(),
    };
    opkit::controller::run(
        CONTROLLER,
        builds,
        queue,
        informers.trigger(),
        LoopConfig::default(),
        metrics,
        |build| reconcile(&context, build),
        shutdown,
    )
    .await;
    Ok(())
}

/// The build a build pod belongs to (its build-name label).
fn build_of_pod(pod: &Pod) -> Option<ObjectRef<Build>> {
    let name = pod.labels().get(BUILD_NAME_LABEL)?;
    Some(ObjectRef::new(name).within(&pod.namespace()?))
}

/// The build whose pod a FailedMount event is about (pods are named `<build>-build`).
fn build_of_event(event: &Event) -> Option<ObjectRef<Build>> {
    let pod = event.involved_object.name.as_deref()?;
    let build = pod.strip_suffix("-build")?;
    Some(ObjectRef::new(build).within(event.involved_object.namespace.as_deref()?))
}

/// Whether `BuildCSIVolumes` is on: off only when FeatureGate lists it as disabled (it is GA,
/// and newer OpenShift releases no longer list it at all).
pub fn gate_enabled(feature_gate: Option<&FeatureGate>, version: &str) -> bool {
    let Some(gates) = feature_gate else {
        return true;
    };
    let state = match gates.gate(version, BUILD_CSI_VOLUMES_GATE) {
        GateState::Unknown => gates
            .status
            .as_ref()
            .and_then(|s| s.feature_gates.first())
            .map_or(GateState::Unknown, |first| {
                gates.gate(&first.version, BUILD_CSI_VOLUMES_GATE)
            }),
        known => known,
    };
    state != GateState::Disabled
}

/// Reconciles one build: [`plan`] decides from the build, its pod and the pod's FailedMount
/// events; [`act`] writes.
async fn reconcile(context: &Context, build: Arc<Build>) -> Result<Option<Duration>, Failure> {
    if build.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let gate = gate_enabled(
        context.feature_gate.as_ref().and_then(single).as_ref(),
        &context.settings.version,
    );
    let namespace = build.namespace().unwrap_or_default();
    let pod_name = pod_name(&build);
    let pod = context
        .pods
        .get(&ObjectRef::new(&pod_name).within(&namespace));
    let pod_events: Vec<Event> = context
        .events
        .state()
        .iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(pod_name.as_str())
                && e.involved_object.namespace.as_deref() == Some(namespace.as_str())
                && (pod.is_none()
                    || e.involved_object.uid.is_none()
                    || e.involved_object.uid == pod.as_ref().and_then(|p| p.uid()))
        })
        .map(|e| e.as_ref().clone())
        .collect();
    let decided = plan(
        &build,
        pod.as_deref(),
        &pod_events,
        gate,
        &context.settings.builder_image,
        &Time(Timestamp::now()),
    );
    if let Err(failure) = act(context, &build, decided).await {
        opkit::events::record(
            &context.recorder,
            &build.object_ref(&()),
            EventType::Warning,
            failure.reason(),
            "Reconcile",
            failure.to_string(),
        )
        .await;
        return Err(failure);
    }
    Ok(None)
}

async fn act(
    context: &Context,
    build: &Build,
    decided: crate::plan::BuildPlan,
) -> Result<(), Failure> {
    let namespace = build.namespace().unwrap_or_default();
    let name = build.name_any();
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let status = decided.status;
    match decided.pod {
        PodAction::Keep => {}
        PodAction::Create(pod) => match create_pod(context, build, &pod).await {
            Ok(_) => {
                context.metrics.wrote(CONTROLLER, "Pod");
                tracing::info!(build = %format!("{namespace}/{name}"), pod = pod.name_any(), "created build pod");
            }
            // An earlier pass created it and the cache has not seen it yet.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(error) => {
                // Refused (admission, quota): say so on the build, and retry with backoff.
                let mut refused = build.status.clone().unwrap_or_default();
                // Still New (OpenShift's API server sets New on create; the CRD does not).
                refused.phase.get_or_insert(api::build_v1::BuildPhase::New);
                refused.reason = Some(REASON_CANNOT_CREATE_POD.to_owned());
                refused.message = Some(format!("Failed creating build pod: {error}"));
                if Some(&refused) != build.status.as_ref() {
                    write_status(context, build, &refused).await?;
                }
                return Err(Failure::CreatePod {
                    build: format!("{namespace}/{name}"),
                    source: error,
                });
            }
        },
        PodAction::Delete(observed) => {
            let pod = observed.name.clone().unwrap_or_default();
            // The pod the plan read (owned by this build), and no other.
            match delete_observed(&pods, &observed, true, &DeleteParams::default()).await {
                Ok(true) => {
                    context.metrics.wrote(CONTROLLER, "Pod");
                    tracing::info!(build = %format!("{namespace}/{name}"), pod, "cancelled build: deleted its pod");
                }
                Ok(false) => {}
                Err(error) => {
                    return Err(Failure::DeletePod {
                        build: format!("{namespace}/{name}"),
                        source: error,
                    });
                }
            }
        }
    }
    if let Some(status) = &status {
        write_status(context, build, status).await?;
        tracing::info!(
            build = %format!("{namespace}/{name}"),
            phase = status.phase.as_ref().map(|p| p.as_str()),
            reason = status.reason.as_deref(),
            "build status"
        );
    }
    Ok(())
}

/// Creates the build pod, and on plain Kubernetes first the `builder` ServiceAccount it runs
/// as by default (OpenShift's controller manager makes one in every namespace; nobody else does).
async fn create_pod(context: &Context, build: &Build, pod: &Pod) -> Result<Pod, kube::Error> {
    let namespace = build.namespace().unwrap_or_default();
    if context.server == Server::Crd && build.spec.service_account.is_none() {
        let accounts: Api<ServiceAccount> = Api::namespaced(context.client.clone(), &namespace);
        let builder = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(DEFAULT_SERVICE_ACCOUNT.to_owned()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        match accounts.create(&PostParams::default(), &builder).await {
            Ok(_) => {
                context.metrics.wrote(CONTROLLER, "ServiceAccount");
                tracing::info!(namespace, "created the builder ServiceAccount");
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(error) => return Err(error),
        }
    }
    Api::<Pod>::namespaced(context.client.clone(), &namespace)
        .create(&PostParams::default(), pod)
        .await
}

async fn write_status(
    context: &Context,
    build: &Build,
    status: &api::build_v1::BuildStatus,
) -> Result<(), Failure> {
    let namespace = build.namespace().unwrap_or_default();
    let name = build.name_any();
    let builds: Api<Build> = Api::namespaced(context.client.clone(), &namespace);
    let params = PatchParams {
        field_manager: Some(CONTROLLER.to_owned()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(status_patch(status));
    // OpenShift's Build API has no status subresource: status is written with the object.
    let result = match context.server {
        Server::OpenShift => builds.patch(&name, &params, &patch).await,
        Server::Crd | Server::None => builds.patch_status(&name, &params, &patch).await,
    };
    match result {
        Ok(_) => {
            context.metrics.wrote(CONTROLLER, "Build/status");
            Ok(())
        }
        // Deleted meanwhile: nothing left to report on.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(Failure::WriteStatus {
            build: format!("{namespace}/{name}"),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openshift_needs_a_selector_and_a_missing_api_is_named() {
        let refused = check_start(Server::OpenShift, None).unwrap_err();
        assert!(refused.to_string().contains("--selector"), "{refused}");
        assert!(check_start(Server::OpenShift, Some(" ")).is_err());
        assert!(check_start(Server::OpenShift, Some("team=a")).is_ok());
        assert!(check_start(Server::Crd, None).is_ok());
        let missing = check_start(Server::None, Some("team=a")).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("deploy/crds/build.openshift.io_builds.yaml"),
            "{missing}"
        );
    }

    #[test]
    fn selectors_are_checked_before_watching() {
        for good in [
            "team=a",
            "team==a,env!=prod",
            "builds.storage.openshift.io/controller=storage-operator",
            "team",
            "!team",
            "env in (a,b)",
        ] {
            // `in` lists contain commas; only the key of each comma-separated piece is checked.
            let first = good.split(" in ").next().unwrap_or(good);
            assert!(check_selector(first).is_ok(), "{good}");
        }
        for bad in ["team=a,", "=a", "te$m=a", ""] {
            let error = check_selector(bad).unwrap_err();
            assert!(
                error.to_string().contains("is not a label selector"),
                "{bad}: {error}"
            );
        }
    }

    fn gates(version: &str, enabled: &[&str], disabled: &[&str]) -> FeatureGate {
        let names = |list: &[&str]| {
            list.iter()
                .map(|n| serde_json::json!({"name": n}))
                .collect::<Vec<_>>()
        };
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1", "kind": "FeatureGate",
            "metadata": {"name": "cluster"}, "spec": {},
            "status": {"featureGates": [{"version": version, "enabled": names(enabled), "disabled": names(disabled)}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_gate_is_off_only_when_featuregate_says_disabled() {
        assert!(gate_enabled(None, "4.20.0"), "no FeatureGate API: GA");
        assert!(gate_enabled(
            Some(&gates("4.20.0", &[BUILD_CSI_VOLUMES_GATE], &[])),
            "4.20.0"
        ));
        assert!(!gate_enabled(
            Some(&gates("4.20.0", &[], &[BUILD_CSI_VOLUMES_GATE])),
            "4.20.0"
        ));
        assert!(
            gate_enabled(Some(&gates("4.20.0", &[], &[])), "4.20.0"),
            "gate no longer listed: removed, always on"
        );
        assert!(
            !gate_enabled(
                Some(&gates("4.15.3", &[], &[BUILD_CSI_VOLUMES_GATE])),
                "0.1.0"
            ),
            "our version unknown to the cluster: the cluster's listed version decides"
        );
    }
}
