//! The driver operator (`storage-operator driver <name>`): the controllers of one CSI driver.
//! Discover the optional OpenShift APIs, fill scoped caches ([`observe`]), then on every change
//! compute a [`plan`](plan::plan) from them and execute it: apply each operand with server-side
//! apply under its logical controller's field manager (drift restored, an Event naming the
//! object), delete what must go, and write each controller's part of the ClusterCSIDriver
//! status. An idle cluster costs no requests: nothing is written when nothing changed and there
//! is no periodic resync (time-based transitions use the loop's requeue).
//!
//! The files, bottom to top; each uses only files below it: [`controllers`] (the logical
//! controllers and the status part each writes), [`credentials`], [`removal`] and [`leftovers`]
//! (each a decision of its own, using none of the others), [`migration`] (the CSI migration
//! audit: its caches and its status part), [`observe`] (the caches and the snapshot a reconcile
//! reads), [`config_observer`] (the observed config, from that snapshot), [`plan`] (the pure
//! reconcile, from the snapshot to what to write), and this file, the controller that carries
//! the plan out.
//!
//! Logical controllers, each with its field manager `storage-operator/<name>` for its operands
//! and its conditions: `<prefix>DriverStaticResourcesController` (RBAC, ServiceAccounts, the CA
//! ConfigMap, CSIDriver, Service, PDB, snapshot classes, CredentialsRequest),
//! `<prefix>DriverControllerServiceController` (Deployment; Available/Progressing/Degraded,
//! `readyReplicas`, its generation), `<prefix>DriverNodeServiceController` (DaemonSet; also
//! applies a driver's other DaemonSets and reports each under its own controller's
//! Available/Progressing, e.g. Manila's `NFSDriverNodeServiceController`),
//! `StorageClassController`, `<prefix>DriverServiceMonitorController`, `ManagementState`
//! (`ManagementStateDegraded`, `observedGeneration`), `ConfigObserver`
//! (`ConfigObservationDegraded`, `spec.observedConfig`; see [`config_observer`]) and
//! `<prefix>CredentialsRequestController` (Available/Progressing from
//! cloud-credential-operator's answer; see [`credentials`]) and `<prefix>StuckClaimsController`
//! (`<prefix>StuckClaims`, informational: the claims Pending on the driver for more than 5
//! minutes; see [`csi_kit::claims`]).
//!
//! With a hosted control plane ([`Settings::hosted`], `--guest-kubeconfig`), the client `run`
//! is given is the guest's and a second one reaches the management cluster: the controller
//! side of the render (`csi_kit::hosted`) is applied and watched in the control-plane namespace
//! there ([`plan::Step::management`]), everything else and the ClusterCSIDriver's status stay
//! in the guest. The replaced operator's leftovers are not swept then.
//!
//! Where this differs from library-go on purpose:
//! - No periodic resync and no write when nothing changed (library-go resyncs every minute).
//! - A failed apply sets its controller's Degraded at once, as `WithSyncDegradedOnError` does;
//!   the roll-up inertia (2 minutes) is cluster-storage-operator's business.
//! - Restored drift and recreated objects are recorded as Events (`OperandDriftRestored`,
//!   `OperandRecreated`) regarding the operand; Events about cluster-scoped operands go to the
//!   `default` namespace (kube-rs' convention).
//! - Finalizers of removable drivers are qualified (`csi.storage.openshift.io/<controller>`):
//!   API servers reject library-go's bare controller names.
//! - Unmanaged says so: `ManagementStateDegraded` is False with reason `Unmanaged`; every other
//!   condition is left as it was.
//! - The DaemonSet's stable-generation annotation records the generation its own write
//!   produces (see [`plan::with_stable_generation`]).

pub mod config_observer;
pub mod controllers;
pub mod credentials;
pub mod leftovers;
pub mod migration;
pub mod observe;
pub mod plan;
pub mod removal;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::operator_v1::ClusterCSIDriver;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};
use opkit::admin::Readiness;
use opkit::apply::{Applier, ApplyError, Outcome, delete_observed};
use opkit::metrics::Metrics;
use opkit::runtime::{LoopConfig, ReconcileError};
use opkit::status::StatusWrites;

use controllers::Group;
use csi_kit::HookError;
use csi_kit::def::DriverDef;
use csi_kit::inputs::OptionalKind;
use csi_kit::render::Operand;
use observe::{Apis, Caches, Observed, start_caches};
use plan::{DeleteKind, Deletion, Step};

/// How long the caches may take to fill at start.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// What the driver operator was configured with at start.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// The process environment: the image variables (`DRIVER_IMAGE`, `PROVISIONER_IMAGE`, ...)
    /// are read from it; unset or empty ones use the driver's upstream defaults.
    pub env: BTreeMap<String, String>,
    /// This pod's name, reported as the Events' reporting instance (`POD_NAME`); the host name
    /// when unset.
    pub instance: Option<String>,
    /// Applies the ClusterCSIDriver's `operatorLogLevel` to this process's logging.
    pub operator_log_level: Option<opkit::log_level::LogLevelHook>,
    /// Whether this process's host runs in FIPS mode (see [`host_fips`]): on OpenShift every
    /// node of a FIPS cluster does, so drivers that switch their own cryptography (AWS EFS's
    /// TLS tunnel) are told so, as OpenShift's operators tell them.
    pub host_fips: bool,
    /// With a hosted control plane (HyperShift): the management cluster, where the controller
    /// side of the driver runs, and the control plane. The client `run` is given is then the
    /// guest's, where everything else is and the ClusterCSIDriver reports.
    pub hosted: Option<Hosted>,
    /// How long a claim may wait Pending on the driver before `<prefix>StuckClaims` reports it
    /// (see [`csi_kit::claims`]); `None`: [`csi_kit::claims::STUCK_AFTER`], 5 minutes. Tests
    /// set it shorter: the API server stamps a claim's creation time, so a test cannot make
    /// an old one.
    pub stuck_claims_after: Option<Duration>,
}

/// The management side of a driver with a hosted control plane (see `csi_kit::hosted`).
#[derive(Clone)]
pub struct Hosted {
    /// A client of the management cluster, allowed in the control-plane namespace.
    pub management: Client,
    /// The control plane: its namespace there, and what its pods must carry.
    pub control_plane: csi_kit::HostedControlPlane,
}

impl std::fmt::Debug for Hosted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosted")
            .field("control_plane", &self.control_plane)
            .finish_non_exhaustive()
    }
}

/// Whether this host runs in FIPS mode: `/proc/sys/crypto/fips_enabled` says `1`. False where
/// the file cannot be read.
pub fn host_fips() -> bool {
    std::fs::read_to_string("/proc/sys/crypto/fips_enabled").is_ok_and(|c| c.trim() == "1")
}

/// The operator could not start.
pub use opkit::runtime::StartError;

/// A reconcile failed; the loop retries with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Some operands or status parts could not be written; each line names one.
    #[error("syncing the {driver} driver failed: {}", .messages.join("; "))]
    Sync {
        /// The driver's short name.
        driver: String,
        /// What failed.
        messages: Vec<String>,
        /// The category of the first failure.
        category: &'static str,
    },
}

impl ReconcileError for Failure {
    fn category(&self) -> &'static str {
        match self {
            Self::Sync { category, .. } => category,
        }
    }
}

/// The name of this driver operator, as the loop, metrics and Events report it.
pub fn operator_name(def: &DriverDef) -> String {
    format!("{}-csi-driver-operator", def.short_name)
}

/// Asks something outside the cluster whether the driver can run, and what it offers (e.g.
/// the share types of an OpenStack cloud). Behind a trait so tests use a fake.
pub trait Probe: Send + Sync {
    /// What was found, or why the driver cannot run here (reported as its Disabled
    /// condition).
    fn check(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Probed, HookError>> + Send + '_>>;
}

/// What a [`Probe`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probed {
    /// The facts (given to the driver's hooks as [`csi_kit::Inputs::probe_facts`]).
    pub facts: Vec<String>,
    /// Whether asking wrote to the API server (e.g. a Secret derived on the way).
    pub wrote: bool,
}

/// A probe and how often to ask it again (its answer can change without any watch event).
#[derive(Clone)]
pub struct ProbeConfig {
    /// The probe.
    pub probe: std::sync::Arc<dyn Probe>,
    /// The time between two checks.
    pub interval: Duration,
}

impl std::fmt::Debug for ProbeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeConfig")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// A controller of a driver's own beside the kit's, as OpenShift's driver operators add them:
/// e.g. IBM VPC Block's `SecretSync`, which writes the Secret its driver reads from the
/// credentials through IBM Cloud's API. Behind a trait so tests use a fake.
pub trait Task: Send + Sync {
    /// Does the work once for `inputs` (what the kit observed, as the driver's hooks get it):
    /// whether it wrote anything (to the API server or outside the cluster), or an error that
    /// says what failed and how to fix it.
    fn sync<'a>(
        &'a self,
        inputs: &'a csi_kit::Inputs,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<bool, HookError>> + Send + 'a>>;

    /// What the task has established so far, for the driver's hooks
    /// ([`csi_kit::Inputs::task_facts`] under the task's name); e.g. the name of a storage policy
    /// it made in the cloud, which a StorageClass then names. None by default. When a run
    /// changes them, the operands are planned again in the same pass.
    fn facts(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A [`Task`], its name and how often to run it again (what it reads can change without any
/// watch event). It runs on every reconcile that applies the operands (Managed, not Disabled,
/// not being removed) and at least every `interval`. Its outcome is its condition
/// `<name>Degraded` (False, or True with the error, reason `SyncError`), written under field
/// manager `storage-operator/<name>`; the operands are applied whatever it says (their pods wait
/// for what it writes), as library-go's `WithSyncDegradedOnError` controllers do.
#[derive(Clone)]
pub struct TaskConfig {
    /// The controller name (`SecretSync`), prefix of its condition.
    pub name: String,
    /// The task.
    pub task: std::sync::Arc<dyn Task>,
    /// The longest time between two runs.
    pub interval: Duration,
    /// The ConfigMaps of other namespaces it reads, (namespace, name): watched by name, so a
    /// change runs it at once. (Secrets it reads or writes in the operand namespace are the
    /// driver's credentials or [`DriverDef::hashed_secrets`], which the kit watches.)
    pub config_maps: Vec<(String, String)>,
}

impl std::fmt::Debug for TaskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskConfig")
            .field("name", &self.name)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// What a driver adds to the kit's controllers: a probe and tasks.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// Asks whether the driver can run here.
    pub probe: Option<ProbeConfig>,
    /// The driver's own controllers.
    pub tasks: Vec<TaskConfig>,
}

/// Runs the driver operator of `def` until `shutdown` completes.
pub async fn run(
    client: Client,
    def: DriverDef,
    settings: Settings,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    run_with_probe(client, def, settings, None, metrics, readiness, shutdown).await
}

/// [`run`], asking `probe` (when set) on every reconcile and at least every
/// `probe.interval` whether the driver can run.
pub async fn run_with_probe(
    client: Client,
    def: DriverDef,
    settings: Settings,
    probe: Option<ProbeConfig>,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let extras = Extras {
        probe,
        tasks: Vec::new(),
    };
    run_with_extras(client, def, settings, extras, metrics, readiness, shutdown).await
}

/// [`run`] with the driver's [`Extras`]: its probe (asked on every reconcile and at least
/// every `probe.interval` whether the driver can run) and its tasks.
pub async fn run_with_extras(
    client: Client,
    def: DriverDef,
    settings: Settings,
    extras: Extras,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let apis = Apis::discover(&client)
        .await
        .map_err(StartError::Discovery)?;
    tracing::info!(driver = %def.short_name, ?apis, "discovered optional APIs");
    let scope = match &settings.hosted {
        None => None,
        Some(hosted) => Some(
            observe::Management::discover(&hosted.management, &hosted.control_plane.namespace)
                .await,
        ),
    };
    let (caches, mut informers) =
        start_caches(&client, &def, apis, scope.as_ref(), SYNC_TIMEOUT).await?;
    // What the tasks read: only the events matter (the tasks read through the API).
    for (namespace, name) in extras.tasks.iter().flat_map(|t| &t.config_maps) {
        informers.watch(
            &format!("configmaps {namespace}/{name} (read by a task)"),
            Api::<ConfigMap>::namespaced(client.clone(), namespace),
            kube::runtime::watcher::Config::default().fields(&format!("metadata.name={name}")),
        );
    }
    readiness.set(true);
    tracing::info!(driver = %def.short_name, "caches synced; reconciling");
    let name = operator_name(&def);
    let appliers = appliers_for(&client, &def, None);
    let reporter = Reporter {
        controller: name.clone(),
        instance: settings.instance.clone(),
    };
    let recorder = Recorder::new(client.clone(), reporter.clone());
    let management = settings.hosted.as_ref().map(|hosted| Management {
        appliers: appliers_for(&hosted.management, &def, Some(MANAGEMENT_CLUSTER)),
        recorder: Recorder::new(hosted.management.clone(), reporter),
        client: hosted.management.clone(),
        namespace: hosted.control_plane.namespace.clone(),
    });
    let context = Context {
        client,
        management,
        def,
        settings,
        caches,
        appliers,
        recorder,
        metrics: metrics.clone(),
        applied: Mutex::default(),
        status_writes: StatusWrites::default(),
        name: name.clone(),
        log_level: Default::default(),
        probe: extras.probe,
        tasks: extras.tasks,
        leftovers_swept: Default::default(),
        health: informers.health(),
    };
    opkit::runtime::run(
        &name,
        informers.trigger(),
        LoopConfig::default(),
        metrics,
        || reconcile(&context),
        shutdown,
    )
    .await;
    Ok(())
}

/// An applier per logical controller, writing through `client` under the controller's field
/// manager and adopting what the replaced operator wrote.
/// `cluster` names the cluster in errors where it is not the driver operator's own.
fn appliers_for(
    client: &Client,
    def: &DriverDef,
    cluster: Option<&str>,
) -> BTreeMap<Group, Applier> {
    Group::ALL
        .into_iter()
        .map(|g| {
            let applier = Applier::new(client.clone(), &g.controller(def));
            let applier = applier.adopting(&def.adopt_from);
            (
                g,
                cluster.map_or(applier.clone(), |c| applier.in_cluster(c)),
            )
        })
        .collect()
}

/// How errors name the management cluster of a hosted control plane.
const MANAGEMENT_CLUSTER: &str = "management cluster";

/// The management cluster's side of a hosted control plane: what writes there.
struct Management {
    client: Client,
    /// The control-plane namespace.
    namespace: String,
    appliers: BTreeMap<Group, Applier>,
    recorder: Recorder,
}

/// The facts of `tasks` that have some, by task name.
fn task_facts(tasks: &[TaskConfig]) -> BTreeMap<String, Vec<String>> {
    tasks
        .iter()
        .filter_map(|t| {
            let facts = t.task.facts();
            (!facts.is_empty()).then(|| (t.name.clone(), facts))
        })
        .collect()
}

struct Context {
    client: Client,
    /// With a hosted control plane, where the controller side goes.
    management: Option<Management>,
    def: DriverDef,
    settings: Settings,
    caches: Caches,
    appliers: BTreeMap<Group, Applier>,
    recorder: Recorder,
    metrics: Metrics,
    /// Operands this process has applied, so a later create is reported as a recreation.
    applied: Mutex<BTreeSet<String>>,
    /// The status parts each controller wrote, so a stale cache does not send them again.
    status_writes: StatusWrites,
    name: String,
    /// Follows the ClusterCSIDriver's operatorLogLevel.
    log_level: opkit::log_level::LogLevelSync,
    /// Asks whether the driver can run here.
    probe: Option<ProbeConfig>,
    /// The driver's own controllers.
    tasks: Vec<TaskConfig>,
    /// Whether the replaced operator's leftovers were removed in this process.
    leftovers_swept: std::sync::atomic::AtomicBool,
    /// Which watches are failing.
    health: opkit::runtime::WatchHealth,
}

async fn reconcile(context: &Context) -> Result<Option<Duration>, Failure> {
    let def = &context.def;
    let mut observed = context.caches.observe();
    observed.host_fips = context.settings.host_fips;
    observed.stuck_claims_after = context.settings.stuck_claims_after;
    // The control plane as configured, with the placement its HostedControlPlane asks for.
    observed.hosted = context.settings.hosted.as_ref().map(|h| {
        let mut control_plane = match context.caches.hosted_control_plane() {
            Some(object) => h.control_plane.with_object(&object),
            None => h.control_plane.clone(),
        };
        control_plane.secret_hashes = context.caches.control_plane_secret_hashes();
        control_plane
    });
    if let Some(probe) = &context.probe {
        let answer = probe.probe.check().await;
        match &answer {
            Ok(probed) if probed.wrote => context.metrics.wrote(&context.name, "probe"),
            Ok(_) => {}
            Err(reason) => {
                tracing::info!(driver = %def.short_name, %reason, category = reason.category(), "the driver cannot run here");
            }
        }
        observed.probe = Some(answer.map(|probed| probed.facts));
    }
    if let Some(driver) = &observed.cluster_csi_driver {
        let level = driver.spec.operator.operator_log_level();
        context
            .log_level
            .sync(context.settings.operator_log_level.as_ref(), level);
    }
    observed.task_facts = task_facts(&context.tasks);
    let now = Time(Timestamp::now());
    let mut plan = plan::plan(def, &context.settings.env, &observed, &now);
    if let Some(waiting) = &plan.waiting {
        tracing::debug!(driver = %def.short_name, "{waiting}");
        return Ok(None);
    }
    let mut failures: Vec<(Option<Group>, &'static str, String)> = Vec::new();

    // The driver's tasks run while its operands are applied (none are when it is Unmanaged,
    // Disabled or being removed), before them: what they write is there when pods start.
    // They get the inputs the operands were planned with (none when those could not be
    // computed: the plan then reports why, and the tasks wait for the next pass).
    let task_inputs = (!plan.steps.is_empty() && !context.tasks.is_empty())
        .then(|| plan::inputs(def, &context.settings.env, &observed).ok())
        .flatten();
    if let Some(inputs) = task_inputs {
        let mut statuses = Vec::new();
        for task in &context.tasks {
            let outcome = task.task.sync(&inputs).await;
            match &outcome {
                Ok(true) => context.metrics.wrote(&context.name, &task.name),
                Ok(false) => {}
                Err(error) => {
                    context.metrics.failed(&context.name, error.category());
                    tracing::warn!(driver = %def.short_name, task = %task.name, %error, category = error.category(), "task failed");
                }
            }
            statuses.push(plan::task_status(
                &task.name,
                outcome.as_ref().err().map(HookError::message),
            ));
        }
        // What the tasks established changes what is rendered (e.g. a StorageClass naming the
        // storage policy a task made): plan again, so it is applied in this pass.
        let facts = task_facts(&context.tasks);
        if facts != observed.task_facts {
            observed.task_facts = facts;
            plan = plan::plan(def, &context.settings.env, &observed, &now);
        }
        plan.status.extend(statuses);
    }

    for step in &plan.steps {
        match apply_step(context, step, &observed).await {
            Ok(outcome) => {
                if outcome.wrote() {
                    context.metrics.wrote(&context.name, step.operand.kind());
                    tracing::info!(object = %step.operand.key(), ?outcome, "applied");
                }
                report(context, step, outcome).await;
            }
            Err(error)
                if step.group == Group::ServiceMonitor && error.category() == "not-found" =>
            {
                // The CRD went away after we saw it: nothing to monitor with.
                tracing::debug!(%error, "ServiceMonitor not applied");
            }
            Err(error) => {
                failures.push((Some(step.group), error.category(), error.to_string()));
            }
        }
    }
    if let Some(patch) = &plan.observed_config {
        match write_observed_config(context, patch).await {
            Ok(()) => context
                .metrics
                .wrote(&context.name, "ClusterCSIDriver/observedConfig"),
            Err(error) => failures.push((None, "api", error)),
        }
    }
    for deletion in &plan.deletions {
        match delete(context, deletion).await {
            Ok(true) => context.metrics.wrote(&context.name, "delete"),
            Ok(false) => {}
            Err((category, message)) => failures.push((Some(deletion.group), category, message)),
        }
    }
    // Once every operand is in place, what the replaced operator left under other names goes.
    // (With a hosted control plane not yet: the operands of the two clusters would have to be
    // told apart; see the README.)
    if failures.is_empty()
        && context.management.is_none()
        && !plan.steps.is_empty()
        && !context.def.adopt_from.is_empty()
        && !context
            .leftovers_swept
            .load(std::sync::atomic::Ordering::SeqCst)
    {
        match sweep_leftovers(context, &plan.steps, &observed).await {
            Ok(()) => context
                .leftovers_swept
                .store(true, std::sync::atomic::Ordering::SeqCst),
            Err(errors) => failures.extend(
                errors
                    .into_iter()
                    .map(|(category, message)| (Some(Group::Static), category, message)),
            ),
        }
    }
    if let Some(finalizers) = &plan.finalizers {
        match set_finalizers(context, &observed, finalizers).await {
            Ok(()) => context
                .metrics
                .wrote(&context.name, "ClusterCSIDriver/finalizers"),
            Err(error) => failures.push((None, "api", error)),
        }
    }
    // With a hosted control plane, a management cluster that does not answer: the controller's
    // side cannot be managed, which its Degraded says in the guest.
    if let Some(management) = &context.management
        && let Some(message) = observe::management_unreachable(
            &context.health,
            &management.client,
            &management.namespace,
        )
        .await
    {
        failures.push((Some(Group::ControllerService), "transport", message));
    }
    // And a guest that does not answer, which only the log can say.
    if let Some(management) = &context.management
        && let Some(message) =
            observe::guest_unreachable(&context.health, &context.client, &management.namespace)
                .await
    {
        failures.push((None, "transport", message));
    }
    for group in Group::ALL {
        let failed: Vec<&(Option<Group>, &'static str, String)> = failures
            .iter()
            .filter(|(g, _, _)| *g == Some(group))
            .collect();
        if failed.is_empty() {
            continue;
        }
        let messages: Vec<&str> = failed.iter().map(|(_, _, m)| m.as_str()).collect();
        let reason = if failed.iter().all(|(_, category, _)| *category == NOT_OURS) {
            plan::REASON_OBJECT_KEPT
        } else {
            plan::REASON_SYNC_ERROR
        };
        plan::set_degraded(&mut plan.status, def, group, reason, &messages.join("\n"));
    }
    for part in &plan.status {
        match context
            .status_writes
            .apply::<ClusterCSIDriver>(
                &context.client,
                &part.controller,
                &def.name,
                &part.part,
                observed.cluster_csi_driver.as_ref(),
                &now,
            )
            .await
        {
            Ok(true) => context
                .metrics
                .wrote(&context.name, "ClusterCSIDriver/status"),
            Ok(false) => {}
            Err(error) => failures.push((None, error.category(), error.to_string())),
        }
    }
    // An object someone else made is reported and left as it is: asking again at once would
    // not change it. Nothing watches it (our caches select by our labels), so its removal is
    // noticed at the next pass, at the latest after NOT_OURS_RETRY.
    let not_ours = !failures.is_empty() && failures.iter().all(|(_, c, _)| *c == NOT_OURS);
    if let Some((_, category, _)) = failures.first().filter(|_| !not_ours) {
        return Err(Failure::Sync {
            driver: def.short_name.clone(),
            category,
            messages: failures.into_iter().map(|(_, _, m)| m).collect(),
        });
    }
    let again = context
        .probe
        .as_ref()
        .map(|p| p.interval)
        .into_iter()
        .chain(context.tasks.iter().map(|t| t.interval))
        .chain(plan.requeue)
        .chain(not_ours.then_some(NOT_OURS_RETRY))
        .min();
    Ok(again)
}

/// The category of a write refused because the object is someone else's
/// ([`opkit::apply::ApplyError::category`]).
const NOT_OURS: &str = "not-ours";

/// How soon a pass that found objects of our operands' names made by someone else looks
/// again, for their removal (their watches would cost a cache of every object of the kind).
const NOT_OURS_RETRY: Duration = Duration::from_secs(300);

fn find<'a, K: Resource + 'a>(objects: &'a [Arc<K>], object: &K) -> Option<&'a K> {
    objects
        .iter()
        .find(|o| {
            o.meta().name == object.meta().name && o.meta().namespace == object.meta().namespace
        })
        .map(AsRef::as_ref)
}

async fn apply_step(
    context: &Context,
    step: &Step,
    observed: &Observed,
) -> Result<Outcome, ApplyError> {
    let appliers = match &context.management {
        Some(management) if step.management => &management.appliers,
        _ => &context.appliers,
    };
    let Some(applier) = appliers.get(&step.group) else {
        return Ok(Outcome::Unchanged);
    };
    let ops = &observed.operands;
    match &step.operand {
        Operand::ServiceAccount(o) => applier.apply(o, find(&ops.service_accounts, o)).await,
        Operand::ClusterRole(o) => applier.apply(o, find(&ops.cluster_roles, o)).await,
        Operand::ClusterRoleBinding(o) => {
            applier.apply(o, find(&ops.cluster_role_bindings, o)).await
        }
        Operand::Role(o) => applier.apply(o, find(&ops.roles, o)).await,
        Operand::RoleBinding(o) => applier.apply(o, find(&ops.role_bindings, o)).await,
        Operand::ConfigMap(o) => applier.apply(o, find(&ops.config_maps, o)).await,
        Operand::Secret(o) => {
            let current = observed
                .cluster
                .derived_secrets
                .iter()
                .find(|s| s.metadata.name == o.metadata.name);
            applier.apply(o, current).await
        }
        Operand::CSIDriver(o) => {
            if step.recreate
                && let Some(live) = ops.csi_driver.as_ref()
            {
                // Immutable fields of its spec changed (see `csi_kit::replace`): delete the
                // object the plan read, and create it anew.
                delete_observed(
                    &Api::<CSIDriver>::all(context.client.clone()),
                    live.meta(),
                    true,
                    &DeleteParams::background(),
                )
                .await
                .map_err(|source| ApplyError {
                    kind: "CSIDriver".into(),
                    object: o.name_any(),
                    cluster: None,
                    source: source.into(),
                })?;
                applier.apply(o, None).await
            } else {
                applier.apply(o, ops.csi_driver.as_ref()).await
            }
        }
        Operand::Service(o) => applier.apply(o, find(&ops.services, o)).await,
        Operand::NetworkPolicy(o) => applier.apply(o, find(&ops.network_policies, o)).await,
        Operand::PodDisruptionBudget(o) => {
            applier.apply(o, find(&ops.pod_disruption_budgets, o)).await
        }
        Operand::Deployment(o) => applier.apply(o, find(&ops.deployments, o)).await,
        Operand::DaemonSet(o) => applier.apply(o, find(&ops.daemon_sets, o)).await,
        Operand::StorageClass(o) => {
            if step.recreate
                && let Some(live) = find(&ops.storage_classes, o)
            {
                // Immutable fields changed (the plan decided, see `csi_kit::replace`): delete
                // the class the plan read and create it anew. A failed apply never deletes
                // anything.
                tracing::info!(class = %o.name_any(), "replacing StorageClass");
                delete_observed(
                    &Api::<StorageClass>::all(context.client.clone()),
                    live.meta(),
                    true,
                    &DeleteParams::background(),
                )
                .await
                .map_err(|source| ApplyError {
                    kind: "StorageClass".into(),
                    object: o.name_any(),
                    cluster: None,
                    source: source.into(),
                })?;
                applier.apply(o, None).await
            } else {
                applier.apply(o, find(&ops.storage_classes, o)).await
            }
        }
        Operand::Dynamic(value) => {
            let error = |source: kube::Error| ApplyError {
                kind: value["kind"].as_str().unwrap_or_default().to_owned(),
                object: step.operand.key(),
                cluster: None,
                source: source.into(),
            };
            let Some(kind) = value["kind"].as_str().and_then(OptionalKind::of_kind) else {
                return Ok(Outcome::Unchanged);
            };
            let desired: DynamicObject = serde_json::from_value(value.clone())
                .map_err(|e| error(kube::Error::SerdeError(e)))?;
            let existing = observed
                .operands
                .optional
                .get(&kind)
                .and_then(|o| o.objects.as_ref())
                .and_then(|objects| {
                    objects.iter().find(|o| {
                        o.metadata.name == desired.metadata.name
                            && o.metadata.namespace == desired.metadata.namespace
                    })
                })
                .map(AsRef::as_ref);
            applier
                .apply_dynamic(&kind.api_resource(), &desired, existing)
                .await
        }
    }
}

/// Records an Event for a restored operand: fields someone else changed, or an object someone
/// deleted. A failure to record is logged, never fatal.
async fn report(context: &Context, step: &Step, outcome: Outcome) {
    let (operand, recreated) = (&step.operand, step.recreate);
    let recorder = match &context.management {
        Some(management) if step.management => &management.recorder,
        _ => &context.recorder,
    };
    let key = operand.key();
    let previously_applied = {
        let Ok(mut applied) = context.applied.lock() else {
            return;
        };
        !applied.insert(key.clone())
    };
    let (reason, note) = match outcome {
        Outcome::DriftRestored => (
            "OperandDriftRestored",
            format!(
                "{key}: fields managed by the operator were changed by someone else and have been restored"
            ),
        ),
        Outcome::Created if previously_applied || recreated => (
            "OperandRecreated",
            format!("{key}: the object was missing or had to be replaced and has been recreated"),
        ),
        _ => return,
    };
    let value = operand.to_value();
    let reference = ObjectReference {
        api_version: value["apiVersion"].as_str().map(str::to_owned),
        kind: value["kind"].as_str().map(str::to_owned),
        name: value["metadata"]["name"].as_str().map(str::to_owned),
        namespace: value["metadata"]["namespace"].as_str().map(str::to_owned),
        ..ObjectReference::default()
    };
    tracing::info!(object = %key, reason, "restored operand");
    opkit::events::record(
        recorder,
        &reference,
        EventType::Normal,
        reason,
        "Apply",
        note,
    )
    .await;
}

/// Writes the config observer's `spec.observedConfig` change and records it as an Event, as
/// library-go's `ObservedConfigChanged`.
async fn write_observed_config(context: &Context, patch: &serde_json::Value) -> Result<(), String> {
    let api: Api<ClusterCSIDriver> = Api::all(context.client.clone());
    let params = PatchParams {
        field_manager: Some(format!(
            "{}/{}",
            opkit::apply::FIELD_MANAGER_PREFIX,
            config_observer::CONFIG_OBSERVER
        )),
        ..PatchParams::default()
    };
    let body = serde_json::json!({"spec": {"observedConfig": patch}});
    let driver = api
        .patch(&context.def.name, &params, &Patch::Merge(&body))
        .await
        .map_err(|e| {
            format!(
                "writing spec.observedConfig of ClusterCSIDriver {}: {e}",
                context.def.name
            )
        })?;
    tracing::info!(driver = %context.def.name, %patch, "observed config changed");
    opkit::events::record(
        &context.recorder,
        &driver.object_ref(&()),
        EventType::Normal,
        "ObservedConfigChanged",
        "Update",
        format!("Writing updated observed config: {patch}"),
    )
    .await;
    Ok(())
}

/// Lists, then deletes, the leftovers of one kind ([`leftovers::is_leftover`]); what failed.
async fn sweep_kind(
    context: &Context,
    kind: leftovers::LeftoverKind,
    ours: &BTreeSet<String>,
    observed: &Observed,
) -> Vec<(&'static str, String)> {
    let resource = kind.api_resource();
    let api: Api<DynamicObject> = if kind.cluster_scoped() {
        Api::all_with(context.client.clone(), &resource)
    } else {
        Api::namespaced_with(context.client.clone(), &context.def.namespace, &resource)
    };
    let found: Vec<DynamicObject> = match api.list(&Default::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|o| leftovers::is_leftover(&context.def, kind, &o.metadata, ours))
            .collect(),
        Err(error) => {
            return vec![(
                opkit::apply::category(&error),
                format!("listing {kind}s to find what the replaced operator left: {error}"),
            )];
        }
    };
    let mut failures = Vec::new();
    for object in found {
        let name = object.name_any();
        // The object the decision read, and no other (its uid and resourceVersion).
        match delete_observed(&api, &object.metadata, true, &DeleteParams::background()).await {
            Ok(false) => {}
            Ok(true) => {
                context.metrics.wrote(&context.name, "delete");
                tracing::info!(%kind, name, "deleted what the replaced operator left");
                let Some(driver) = &observed.cluster_csi_driver else {
                    continue;
                };
                opkit::events::record(
                    &context.recorder,
                    &driver.object_ref(&()),
                    EventType::Normal,
                    "FormerOperandDeleted",
                    "Delete",
                    format!(
                        "{kind} {name} was made by the operator this one replaces ({}) and has no counterpart among this operator's operands",
                        context.def.adopt_from.join(", ")
                    ),
                )
                .await;
            }
            Err(error) => failures.push((
                opkit::apply::category(&error),
                format!("deleting {kind} {name}, which the replaced operator left: {error}"),
            )),
        }
    }
    failures
}

/// Deletes what the operator this one replaces left under names ours does not use (see
/// [`leftovers`]), for the kinds this driver renders (and so may list and delete).
async fn sweep_leftovers(
    context: &Context,
    steps: &[Step],
    observed: &Observed,
) -> Result<(), Vec<(&'static str, String)>> {
    let ours: BTreeSet<String> = steps
        .iter()
        .map(|step| format!("{}/{}", step.operand.kind(), step.operand.name()))
        .collect();
    let rendered: BTreeSet<&str> = steps.iter().map(|s| s.operand.kind()).collect();
    let mut failures = Vec::new();
    for kind in leftovers::LeftoverKind::ALL
        .into_iter()
        .filter(|k| rendered.contains(k.name()))
    {
        failures.extend(sweep_kind(context, kind, &ours, observed).await);
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures)
    }
}

/// Deletes what `deletion` names; whether it was there to delete.
async fn delete(context: &Context, deletion: &Deletion) -> Result<bool, (&'static str, String)> {
    let (client, ns, cluster) = match &context.management {
        Some(management) if deletion.management => (
            management.client.clone(),
            management.namespace.as_str(),
            format!(" in the {MANAGEMENT_CLUSTER}"),
        ),
        _ => (
            context.client.clone(),
            context.def.namespace.as_str(),
            String::new(),
        ),
    };
    let name = deletion.name.as_str();
    let meta = &deletion.observed;
    let params = DeleteParams::background();
    let result = match deletion.kind {
        DeleteKind::StorageClass => {
            delete_observed(&Api::<StorageClass>::all(client), meta, true, &params).await
        }
        DeleteKind::CSIDriver => {
            delete_observed(&Api::<CSIDriver>::all(client), meta, true, &params).await
        }
        DeleteKind::Deployment => {
            delete_observed(
                &Api::<Deployment>::namespaced(client, ns),
                meta,
                true,
                &params,
            )
            .await
        }
        DeleteKind::DaemonSet => {
            delete_observed(
                &Api::<DaemonSet>::namespaced(client, ns),
                meta,
                true,
                &params,
            )
            .await
        }
        DeleteKind::ConfigMap => {
            delete_observed(
                &Api::<ConfigMap>::namespaced(client, ns),
                meta,
                true,
                &params,
            )
            .await
        }
        DeleteKind::ServiceAccount => {
            delete_observed(
                &Api::<ServiceAccount>::namespaced(client, ns),
                meta,
                true,
                &params,
            )
            .await
        }
        DeleteKind::Role => {
            delete_observed(&Api::<Role>::namespaced(client, ns), meta, true, &params).await
        }
        DeleteKind::RoleBinding => {
            delete_observed(
                &Api::<RoleBinding>::namespaced(client, ns),
                meta,
                true,
                &params,
            )
            .await
        }
        DeleteKind::ClusterRole => {
            delete_observed(&Api::<ClusterRole>::all(client), meta, true, &params).await
        }
        DeleteKind::ClusterRoleBinding => {
            delete_observed(&Api::<ClusterRoleBinding>::all(client), meta, true, &params).await
        }
        DeleteKind::Service => {
            delete_observed(&Api::<Service>::namespaced(client, ns), meta, true, &params).await
        }
        DeleteKind::PodDisruptionBudget => {
            delete_observed(
                &Api::<PodDisruptionBudget>::namespaced(client, ns),
                meta,
                true,
                &params,
            )
            .await
        }
        DeleteKind::NetworkPolicy => {
            delete_observed(
                &Api::<NetworkPolicy>::namespaced(client, ns),
                meta,
                true,
                &params,
            )
            .await
        }
    };
    tracing::info!(kind = ?deletion.kind, name, ok = result.is_ok(), "deleted");
    result.map_err(|error| {
        let why = if opkit::apply::category(&error) == "conflict" {
            " (it changed or was made anew since it was read; the next pass decides again)"
        } else {
            ""
        };
        (
            opkit::apply::category(&error),
            format!("deleting {:?} {name}{cluster}: {error}{why}", deletion.kind),
        )
    })
}

async fn set_finalizers(
    context: &Context,
    observed: &Observed,
    finalizers: &[String],
) -> Result<(), String> {
    let Some(driver) = &observed.cluster_csi_driver else {
        return Ok(());
    };
    // The resourceVersion makes this a compare-and-swap: a stale cache gets a 409 and a retry.
    let patch = serde_json::json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": driver.metadata.resource_version,
        }
    });
    Api::<ClusterCSIDriver>::all(context.client.clone())
        .patch(
            &context.def.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .map_err(|error| {
            format!(
                "setting the finalizers of ClusterCSIDriver {}: {error}",
                context.def.name
            )
        })
}
