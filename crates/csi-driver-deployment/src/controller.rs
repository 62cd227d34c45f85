//! The CSIDriverDeployment controller: for every CSIDriverDeployment, validate it against the
//! cluster (claimants of the driver name, an existing CSIDriver), apply its objects with
//! server-side apply (drift restored, an Event on the CSIDriverDeployment naming the operand),
//! delete the objects it no longer wants, and write its status only when it changed.
//!
//! Namespaced operands are owned through ownerReferences (the garbage collector removes them);
//! cluster-scoped ones (CSIDriver, ClusterRoles and bindings, StorageClasses) carry the owner
//! labels and are removed through [`FINALIZER`] on deletion, or on `managementState: Removed`.
//! The CSIDriver and the StorageClasses stay while PersistentVolumes of the driver exist (the
//! status says so); PersistentVolumes and claims are never touched.
//!
//! `Unmanaged` touches nothing and reports only `state` and `observedGeneration`.
//!
//! Each CSIDriverDeployment is reconciled on its own ([`opkit::controller`], kube-runtime's
//! applier), asked for by the changes that concern it ([`start_caches`]). Steps: validate
//! ([`mod@super::validate`], pure) → build ([`mod@super::build`], pure) → apply and remove → status.
//! A failed step ([`StepError`]) does not stop the others; the failures are reported in
//! Degraded and as Warning Events, counted by category, and the object is retried after its
//! own backoff (a failed status write included) or as soon as it changes.
//!
//! This file is the loop and the order of the steps; each step is a file below it (the crate's
//! documentation gives their order).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::config_v1::Infrastructure;
use api::csidriver_v1alpha1::CSIDriverDeployment;
use api::operator_v1::ManagementState;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Api, Client, ResourceExt};
use opkit::admin::Readiness;
use opkit::apply::{Applier, Outcome};
use opkit::controller::Queue;
use opkit::metrics::Metrics;
use opkit::runtime::LoopConfig;

use crate::apply::apply;
use crate::build::build_operands;
use crate::context::{Context, key};
use crate::events::{record_drift, record_failures};
use crate::observe::{Existing, existing, facts, operand_key};
use crate::plan::{Pass, declared_inputs, snapshot_classes_waiting, stale, storage_class_replace};
use crate::remove::{Removal, remove, remove_cluster_scoped, set_finalizer};
use crate::status::{history, write_status};
use crate::validate::validate;
use crate::{CONTROLLER_NAME, FINALIZER};
use csi_kit::inputs::Topology;
use csi_kit::inputs::from_objects;
use csi_kit::render::Operand;

pub use crate::caches::{Caches, SYNC_TIMEOUT, start_caches};
pub use crate::error::{Failure, StepError};
pub use crate::rbac::operator_rules;
pub use crate::reasons::{
    REASON_AS_EXPECTED, REASON_PROGRESSING_TOO_LONG, REASON_REMOVED, REASON_SNAPSHOT_API_MISSING,
    REASON_STORAGE_CLASS_EXISTS, REASON_SYNC_FAILED, REASON_VOLUMES_IN_USE,
};
/// The operator could not start.
pub use opkit::runtime::StartError;

/// What the controller was configured with.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// This pod's name, the Events' reporting instance.
    pub instance: Option<String>,
    /// The process environment: the sidecar image variables (`PROVISIONER_IMAGE`,
    /// `ATTACHER_IMAGE`, `RESIZER_IMAGE`, `SNAPSHOTTER_IMAGE`, `NODE_DRIVER_REGISTRAR_IMAGE`,
    /// `LIVENESS_PROBE_IMAGE`) are the images of the objects whose `containerImages` names
    /// none; unset or empty ones use the upstream images.
    pub env: BTreeMap<String, String>,
    /// How long a claim may wait Pending on the driver before the `StuckClaims` condition
    /// reports it (see [`csi_kit::claims`]); `None`: [`csi_kit::claims::STUCK_AFTER`], 5
    /// minutes. Tests set it shorter: the API server stamps a claim's creation time, so a test
    /// cannot make an old one.
    pub stuck_claims_after: Option<Duration>,
}

/// The cluster's layout and whether SCCs exist, asked once at start: OpenShift's
/// Infrastructure when served, else the nodes.
pub async fn discover(client: &Client) -> Result<(Topology, bool), kube::Error> {
    let scc_api = opkit::discovery::served_resources(client, "security.openshift.io/v1")
        .await?
        .contains("securitycontextconstraints");
    let config = opkit::discovery::served_resources(client, "config.openshift.io/v1").await?;
    let infrastructure = if config.contains("infrastructures") {
        Api::<Infrastructure>::all(client.clone())
            .get_opt(api::config_v1::CLUSTER)
            .await?
    } else {
        None
    };
    let topology = match infrastructure {
        Some(infra) => Topology::from_openshift(&infra.control_plane_topology()),
        None => {
            let nodes = Api::<Node>::all(client.clone())
                .list(&Default::default())
                .await?;
            from_objects::kubernetes_topology(&nodes.items)
        }
    };
    Ok((topology, scc_api))
}

/// Runs the controller until `shutdown` completes.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    readiness: Option<Readiness>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let (topology, scc_api) = discover(&client).await.map_err(StartError::Discovery)?;
    tracing::info!(%topology, scc_api, "CSIDriverDeployment controller starting");
    let queue = Queue::new();
    let (caches, informers) = start_caches(&client, &queue.requests()).await?;
    if let Some(readiness) = readiness {
        readiness.set(true);
    }
    let store = caches.deployments_declared.clone();
    let context = Context {
        applier: Applier::new(client.clone(), CONTROLLER_NAME),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: CONTROLLER_NAME.to_owned(),
                instance: settings.instance.clone(),
            },
        ),
        client,
        caches,
        topology,
        scc_api,
        env: settings.env,
        metrics: metrics.clone(),
        stuck_claims_after: settings
            .stuck_claims_after
            .unwrap_or(csi_kit::claims::STUCK_AFTER),
    };
    opkit::controller::run(
        CONTROLLER_NAME,
        store,
        queue,
        informers.trigger(),
        LoopConfig::default(),
        metrics,
        |cd| reconcile(&context, cd),
        shutdown,
    )
    .await;
    Ok(())
}

/// How soon a pass that found objects of its operands' names made by someone else looks again.
const NOT_OURS_RETRY: Duration = Duration::from_secs(300);

/// Reconciles one CSIDriverDeployment. A failed step does not stop the others (each object
/// is applied on its own); the failures are reported in Degraded, as Warning Events, and to
/// the loop, which retries the object after its backoff.
async fn reconcile(
    context: &Context,
    cd: Arc<CSIDriverDeployment>,
) -> Result<Option<Duration>, Failure> {
    let (requeue, failures) = steps(context, &cd).await;
    if failures.is_empty() {
        return Ok(requeue);
    }
    record_failures(context, &cd, &failures).await;
    if failures.iter().all(StepError::not_ours) {
        // Reported (Degraded, Events) and left as they are; nothing watches an object without
        // our labels, so their removal is noticed at the next pass, at the latest this soon.
        return Ok(Some(
            requeue.map_or(NOT_OURS_RETRY, |r| r.min(NOT_OURS_RETRY)),
        ));
    }
    Err(Failure {
        owner: key(&cd),
        errors: failures,
    })
}

/// The steps of a reconcile: finalizer and removal on deletion, else by management state
/// (validate, apply, remove what is no longer wanted), then the status. Returns when to look
/// again and the steps that failed.
async fn steps(context: &Context, cd: &CSIDriverDeployment) -> (Option<Duration>, Vec<StepError>) {
    let now = Time(Timestamp::now());
    let mut pass = Pass::default();

    if cd.metadata.deletion_timestamp.is_some() {
        if !cd.finalizers().iter().any(|f| f == FINALIZER) {
            return (None, Vec::new());
        }
        if !remove_cluster_scoped(context, cd, &mut pass).await {
            // Everything is gone from the caches: nothing of ours is left.
            let failures = set_finalizer(context, cd, false).await.err();
            return (None, failures.into_iter().collect());
        }
        pass.removed = true;
        if let Err(error) = write_status(context, cd, &pass, &now).await {
            pass.failures.push(error);
        }
        return (None, pass.failures);
    }

    match &cd.spec.management_state {
        ManagementState::Unmanaged => {}
        ManagementState::Removed => {
            if let Err(error) = set_finalizer(context, cd, true).await {
                pass.failures.push(error);
            }
            remove(
                context,
                cd,
                existing(context, cd),
                Removal::Uninstall,
                &mut pass,
            )
            .await;
            pass.removed = true;
        }
        _ => {
            pass.problems = validate(cd, &facts(context, cd));
            if pass.problems.is_empty() {
                sync(context, cd, &mut pass).await;
            }
        }
    }
    let requeue = match write_status(context, cd, &pass, &now).await {
        Ok(requeue) => requeue,
        Err(error) => {
            pass.failures.push(error);
            None
        }
    };
    (requeue, pass.failures)
}

/// Applies what `cd` wants, after the finalizer (StorageClasses that are not ours are kept,
/// the ones whose immutable fields changed are replaced), then removes what it no longer wants.
async fn sync(context: &Context, cd: &CSIDriverDeployment, pass: &mut Pass) {
    // The finalizer comes first: no cluster-scoped object exists without it.
    if let Err(error) = set_finalizer(context, cd, true).await {
        pass.failures.push(error);
        return;
    }
    let snapshot_api = context.caches.snapshot_api();
    let inputs = declared_inputs(context, &snapshot_api);
    pass.kept
        .extend(snapshot_classes_waiting(cd, &snapshot_api));
    let desired = build_operands(cd, &inputs);
    let wanted: BTreeSet<Existing> = desired.iter().filter_map(operand_key).collect();
    for operand in &desired {
        let Some(operand_key) = operand_key(operand) else {
            pass.failures.push(StepError::NotAnOperand(operand.key()));
            continue;
        };
        let replace = match operand {
            Operand::StorageClass(class) => {
                match storage_class_replace(context, cd, class, pass).await {
                    Some(replace) => replace,
                    None => continue,
                }
            }
            _ => false,
        };
        match apply(context, cd, operand, replace).await {
            Ok((outcome, generation)) => {
                let child = history(&operand_key, generation);
                let known = cd.status.iter().flat_map(|s| &s.children).any(|c| {
                    (&c.resource, &c.namespace, &c.name)
                        == (&child.resource, &child.namespace, &child.name)
                });
                match outcome {
                    Outcome::DriftRestored => record_drift(context, cd, operand, false).await,
                    Outcome::Created if known => record_drift(context, cd, operand, true).await,
                    _ => {}
                }
                if outcome.wrote() {
                    context.metrics.wrote(CONTROLLER_NAME, operand.kind());
                    tracing::info!(owner = %key(cd), object = %operand.key(), ?outcome, "applied");
                }
                pass.children.push(child);
            }
            Err(error) => pass.failures.push(error),
        }
    }
    let stale = stale(existing(context, cd), &wanted, inputs.snapshot_classes);
    remove(context, cd, stale, Removal::Stale, pass).await;
}
