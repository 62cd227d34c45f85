//! `storage-operator run`: the controller that executes [`plan`](crate::plan::plan) against the
//! API server: discover the optional APIs, fill the caches, then reconcile on every change.

use std::future::Future;
use std::time::Duration;

use api::config_v1::{ClusterOperator, ClusterOperatorSpec, ClusterOperatorStatus};
use api::operator_v1::Storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use opkit::admin::Readiness;
use opkit::apply::{Applier, ApplyError, FIELD_MANAGER_PREFIX, Outcome};
use opkit::metrics::Metrics;
use opkit::runtime::LoopConfig;
use opkit::status::apply_status;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::observe::{Apis, Caches, Observed, start_caches};
use std::collections::BTreeMap;

use crate::failure::{Failure, WriteFailure};
use crate::names::{CLUSTER_OPERATOR, OPERATOR_NAMESPACE, STARTER};
use crate::olm;
use crate::plan::{Desired, Settings, candidates, plan, plan_with_failures};

/// How long the caches may take to fill at start.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// Defined in [`crate::names`], below every file that needs it; re-exported for the callers
/// that name it here.
pub use crate::names::FORMER_OPERATOR;
/// The operator could not start.
pub use opkit::runtime::StartError;

/// Runs the cluster storage operator until `shutdown` completes.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    run_with(client, settings, None, metrics, readiness, shutdown).await
}

/// The management side of a hosted control plane (HyperShift): the management cluster's client
/// and the control plane, as the driver operator takes them; here, where the driver operators
/// run.
pub use driver_operator::Hosted;

/// [`run`], with a hosted control plane when `hosted` is set: `client` is then the guest's,
/// where Storage, the ClusterOperator, the ClusterCSIDrivers and the driver operators' RBAC
/// are, and the driver operators run in the control-plane namespace of the management
/// cluster (see [`crate::hosted`]).
pub async fn run_with(
    client: Client,
    settings: Settings,
    hosted: Option<Hosted>,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let apis = Apis::discover(&client)
        .await
        .map_err(StartError::Discovery)?;
    tracing::info!(?apis, "discovered optional APIs");
    let scope = match &hosted {
        None => None,
        Some(hosted) => Some(
            crate::observe::Management::discover(
                &hosted.management,
                &hosted.control_plane.namespace,
            )
            .await,
        ),
    };
    let (caches, informers) = start_caches(&client, apis, scope.as_ref(), SYNC_TIMEOUT).await?;
    readiness.set(true);
    tracing::info!("caches synced; reconciling");
    let context = Context {
        log_level: Default::default(),
        settled: Default::default(),
        // Taking over from OpenShift's cluster-storage-operator: what it wrote with Update
        // (e.g. the server's RollingUpdate defaults of a driver operator Deployment, which our
        // Recreate cannot be merged with) becomes ours, so the apply replaces it whole.
        applier: Applier::new(client.clone(), STARTER).adopting(&[FORMER_OPERATOR.to_owned()]),
        // OpenShift's ServiceMonitor and PrometheusRule are the cluster-version-operator's
        // (its payload, written with Update): taken over in place as well.
        monitoring_applier: Applier::new(client.clone(), crate::monitoring::CONTROLLER).adopting(
            &[
                FORMER_OPERATOR.to_owned(),
                crate::monitoring::CLUSTER_VERSION_OPERATOR.to_owned(),
            ],
        ),
        management_applier: hosted.as_ref().map(|h| {
            Applier::new(h.management.clone(), STARTER)
                .adopting(&[FORMER_OPERATOR.to_owned()])
                .in_cluster("management cluster")
        }),
        management: hosted.as_ref().map(|h| h.management.clone()),
        hosted: hosted.map(|h| h.control_plane),
        client,
        caches,
        settings,
        gauges: crate::storage_metrics::StorageGauges::register(&metrics),
        metrics: metrics.clone(),
    };
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let declared = run_declared(
        &context.client,
        &context.settings.env,
        &metrics,
        shutdown.clone(),
    );
    let starter = opkit::runtime::run(
        STARTER,
        informers.trigger(),
        LoopConfig::default(),
        metrics.clone(),
        || reconcile(&context),
        shutdown,
    );
    tokio::join!(starter, declared);
    Ok(())
}

/// The CRD of CSIDriverDeployments.
const DECLARED_CRD: &str = "csidriverdeployments.csidriver.storage.openshift.io";

/// Runs the CSIDriverDeployment controller once its CRD is served: at once when it is, else as
/// soon as the CRD is installed and established (watched, not polled). It failing to start
/// leaves the rest of the operator running.
async fn run_declared(
    client: &Client,
    env: &BTreeMap<String, String>,
    metrics: &Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let group_version = "csidriver.storage.openshift.io/v1alpha1";
    let mut shutdown = std::pin::pin!(shutdown);
    let mut said = false;
    loop {
        match opkit::discovery::served_resources(client, group_version).await {
            Ok(served) if served.contains("csidriverdeployments") => break,
            Ok(_) if !said => {
                tracing::info!(
                    "CSIDriverDeployment CRD not served; its controller starts once the CRD is installed"
                );
                said = true;
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "discovering {group_version} failed; waiting for its CRD");
            }
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = crd_established(client, DECLARED_CRD) => {}
        }
        // Established a moment before discovery lists it.
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    let settings = csi_driver_deployment::controller::Settings {
        instance: None,
        env: env.clone(),
        stuck_claims_after: None,
    };
    if let Err(error) = csi_driver_deployment::controller::run(
        client.clone(),
        settings,
        metrics.clone(),
        None,
        shutdown,
    )
    .await
    {
        tracing::error!(%error, "the CSIDriverDeployment controller could not start");
    }
}

/// Completes once the CRD `name` exists and is Established.
async fn crd_established(client: &Client, name: &str) {
    use futures::StreamExt;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::{WatchStreamExt, watcher};

    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut events = std::pin::pin!(
        watcher(api, opkit::runtime::named(name))
            .backoff(opkit::backoff::WatchBackoff::default())
            .applied_objects()
    );
    while let Some(event) = events.next().await {
        let established = event.ok().is_some_and(|crd| {
            crd.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        if established {
            return;
        }
    }
    std::future::pending::<()>().await;
}

struct Context {
    client: Client,
    /// Follows Storage's operatorLogLevel.
    log_level: opkit::log_level::LogLevelSync,
    /// Drivers whose OLM adoption is settled (nothing to adopt, or adopted) in this process.
    settled: std::sync::Mutex<BTreeMap<String, olm::Progress>>,
    applier: Applier,
    /// With a hosted control plane, the applier of the management cluster.
    management_applier: Option<Applier>,
    /// With a hosted control plane, the control plane.
    hosted: Option<csi_kit::HostedControlPlane>,
    /// With a hosted control plane, the management cluster's client.
    management: Option<Client>,
    /// The monitoring objects' applier ([`crate::monitoring::CONTROLLER`]).
    monitoring_applier: Applier,
    caches: Caches,
    settings: Settings,
    metrics: Metrics,
    gauges: crate::storage_metrics::StorageGauges,
}

/// Steps the OLM adoption of every driver about to start, until it is settled.
async fn adopt(
    context: &Context,
    observed: &crate::observe::Observed,
) -> Result<BTreeMap<String, olm::Progress>, Failure> {
    let mut results = BTreeMap::new();
    let Some(storage) = &observed.storage else {
        return Ok(results);
    };
    for entry in candidates(observed, &context.settings) {
        let settled = context
            .settled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(entry.short_name)
            .cloned();
        let progress = match settled {
            Some(progress) => progress,
            None => {
                let progress =
                    olm::step(&context.client, &entry, storage, &context.metrics).await?;
                if !matches!(progress, olm::Progress::InProgress(_)) {
                    context
                        .settled
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(entry.short_name.to_owned(), progress.clone());
                }
                progress
            }
        };
        results.insert(entry.short_name.to_owned(), progress);
    }
    Ok(results)
}

async fn reconcile(context: &Context) -> Result<Option<Duration>, Failure> {
    let mut observed = context.caches.observe();
    // The control plane as configured, with the placement its HostedControlPlane asks for.
    observed.hosted = context
        .hosted
        .as_ref()
        .map(|h| match &observed.hosted_control_plane {
            Some(object) => h.with_object(object),
            None => h.clone(),
        });
    let now = Time(Timestamp::now());
    // The management cluster's watches failing: does it answer at all?
    if let (Some(management), Some(control_plane)) = (&context.management, &context.hosted) {
        observed.management_unreachable = driver_operator::observe::management_unreachable(
            context.caches.health(),
            management,
            &control_plane.namespace,
        )
        .await;
        // A guest that does not answer cannot be told so; the log says it (and the pass
        // fails on its writes, retried with backoff).
        driver_operator::observe::guest_unreachable(
            context.caches.health(),
            &context.client,
            &control_plane.namespace,
        )
        .await;
    }
    if let Some(storage) = &observed.storage {
        let level = storage.spec.operator.operator_log_level();
        context
            .log_level
            .sync(context.settings.operator_log_level.as_ref(), level);
    }
    if let Some(cell) = &context.settings.metrics_tls {
        follow_tls_profile(cell, &observed);
    }
    context.gauges.set(
        &observed.storage_classes,
        &observed.volume_attributes_classes,
    );
    let adoption = adopt(context, &observed).await?;
    let mut plan = plan(&observed, &context.settings, &adoption, &now);
    tracing::debug!(
        objects = plan.objects.len(),
        create_storage = plan.create_storage.is_some(),
        "planned"
    );

    if let Some(storage) = &plan.create_storage {
        if create(&context.client, storage).await? {
            context.metrics.wrote(STARTER, "Storage");
        }
        return Ok(None);
    }
    // Every object is tried; what failed shows in this pass's status (then the loop retries).
    let mut failed: Vec<Failure> = Vec::new();
    // The guest's objects, then (with a hosted control plane) the management cluster's.
    let mut writes: Vec<(&Applier, &Desired)> =
        plan.objects.iter().map(|d| (&context.applier, d)).collect();
    if let Some(applier) = &context.management_applier {
        writes.extend(plan.management_objects.iter().map(|d| (applier, d)));
    }
    for (applier, desired) in writes {
        match apply(context, applier, desired, &observed).await {
            Ok((kind, outcome)) if outcome.wrote() => {
                context.metrics.wrote(STARTER, kind);
                tracing::info!(kind, ?outcome, "applied");
            }
            Ok(_) => {}
            Err(error)
                if matches!(desired, Desired::Monitoring(..))
                    && error.category() == "not-found" =>
            {
                // Its CRD went away (or is not served yet) since the cache saw it: nothing to
                // monitor with; the CRD's watch brings the next pass.
                tracing::debug!(%error, "monitoring object not applied");
            }
            Err(error) => {
                tracing::warn!(%error, "apply failed");
                failed.push(error.into());
            }
        }
    }
    if let Some(patch) = &plan.observed_config {
        match write_observed_config(&context.client, patch).await {
            Ok(()) => {
                tracing::info!(%patch, "observed config changed");
                context.metrics.wrote(STARTER, "Storage/observedConfig");
            }
            Err(error) => failed.push(error.into()),
        }
    }
    // With a hosted control plane: the release each driver's controller has rolled out.
    for (namespace, name, version) in &plan.version_annotations {
        let Some(management) = &context.management else {
            break;
        };
        let patch = serde_json::json!({"metadata": {"annotations": {
            crate::deployment_version::VERSION_ANNOTATION: version}}});
        let params = PatchParams {
            field_manager: Some(format!(
                "{FIELD_MANAGER_PREFIX}/{}",
                crate::deployment_version::CONTROLLER
            )),
            ..PatchParams::default()
        };
        match Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
            management.clone(),
            namespace,
        )
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        {
            Ok(_) => {
                context.metrics.wrote(STARTER, "Deployment/version");
                tracing::info!(
                    namespace,
                    name,
                    version,
                    "the driver's controller has rolled out this release"
                );
            }
            Err(source) => {
                let failure = Failure::Apply(ApplyError {
                    kind: "Deployment".into(),
                    object: format!("{namespace}/{name}"),
                    cluster: Some("management cluster".into()),
                    source: source.into(),
                });
                tracing::warn!(error = %failure, "annotating the release failed");
                failed.push(failure);
            }
        }
    }
    for driver in &plan.create_cluster_csi_drivers {
        match create(&context.client, driver).await {
            Ok(true) => {
                context.metrics.wrote(STARTER, "ClusterCSIDriver");
                tracing::info!(driver = driver.name_any(), "created ClusterCSIDriver");
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, "create failed");
                failed.push(error);
            }
        }
    }
    for (kind, meta) in &plan.delete_monitoring {
        let name = meta.name.as_deref().unwrap_or_default();
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
            context.client.clone(),
            OPERATOR_NAMESPACE,
            &kind.api_resource(),
        );
        match opkit::apply::delete_observed(&api, meta, true, &Default::default()).await {
            Ok(true) => {
                context.metrics.wrote(STARTER, kind.kind());
                tracing::info!(kind = kind.kind(), name, "deleted");
            }
            Ok(false) => {}
            Err(source) => {
                let failure = Failure::Delete {
                    kind: kind.kind().into(),
                    name: format!("{OPERATOR_NAMESPACE}/{name}"),
                    source,
                };
                tracing::warn!(error = %failure, "delete failed");
                failed.push(failure);
            }
        }
    }
    if !failed.is_empty() {
        let failures: Vec<WriteFailure> = failed.iter().map(WriteFailure::from).collect();
        plan = plan_with_failures(&observed, &context.settings, &adoption, &failures, &now);
    }
    // What only OpenShift's operator maintained (controllers ours has no counterpart for, or
    // that it replaced) goes, so that no stale condition feeds the ClusterOperator.
    if let (Some(storage), Some(part)) = (&observed.storage, &plan.storage_status) {
        let ours: std::collections::BTreeSet<String> =
            part.conditions.iter().map(|c| c.type_.clone()).collect();
        let stale = opkit::status::stale_condition_types(
            storage.meta(),
            &storage.status.clone().unwrap_or_default(),
            &opkit::status::go_operator_managers(storage.meta(), FORMER_OPERATOR),
            &ours,
        );
        // Before this pass's own status write, while the cache's resourceVersion, which
        // guards the removal, is current; a failure is reported once the status is written.
        match opkit::status::remove_conditions(&context.client, "cluster", storage, &stale).await {
            Ok(true) => {
                tracing::info!(
                    ?stale,
                    "removed conditions only the former operator maintained"
                );
                context.metrics.wrote(STARTER, "Storage/status");
            }
            Ok(false) => {}
            Err(error) => failed.push(error.into()),
        }
    }
    if let Some(part) = &plan.storage_status
        && apply_status::<Storage>(
            &context.client,
            STARTER,
            "cluster",
            part,
            observed.storage.as_ref(),
            &now,
        )
        .await?
    {
        context.metrics.wrote(STARTER, "Storage/status");
    }
    if let Some(status) = &plan.cluster_operator {
        write_cluster_operator(&context.client, observed.cluster_operator.is_none(), status)
            .await?;
        context.metrics.wrote(STARTER, "ClusterOperator/status");
    }
    // An object someone else made is reported and left as it is: asking again at once would
    // not change it. Nothing watches it (the caches select by our labels), so its removal is
    // noticed at the next pass, at the latest after NOT_OURS_RETRY.
    use opkit::runtime::ReconcileError;
    let not_ours = failed.iter().any(|f| f.category() == NOT_OURS);
    match failed.into_iter().find(|f| f.category() != NOT_OURS) {
        Some(first) => Err(first),
        None if not_ours => Ok(Some(
            plan.requeue
                .map_or(NOT_OURS_RETRY, |r| r.min(NOT_OURS_RETRY)),
        )),
        None => Ok(plan.requeue),
    }
}

/// The category of a write refused because the object is someone else's
/// ([`opkit::apply::ApplyError::category`]).
const NOT_OURS: &str = "not-ours";

/// How soon a pass that found objects of our names made by someone else looks again, for their
/// removal.
const NOT_OURS_RETRY: Duration = Duration::from_secs(300);

/// Creates `object`; one that already exists is fine (another replica or an earlier pass made
/// it). Whether it created it.
async fn create<K>(client: &Client, object: &K) -> Result<bool, Failure>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    match Api::<K>::all(client.clone())
        .create(&PostParams::default(), object)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(Failure::Create {
            kind: K::kind(&()).into_owned(),
            name: object.name_any(),
            source,
        }),
    }
}

fn find<'a, K: Resource + 'a>(objects: &'a [K], object: &K) -> Option<&'a K> {
    objects.iter().find(|o| {
        o.meta().name == object.meta().name && o.meta().namespace == object.meta().namespace
    })
}

async fn apply(
    context: &Context,
    applier: &Applier,
    desired: &Desired,
    observed: &Observed,
) -> Result<(&'static str, Outcome), ApplyError> {
    // The vSphere problem detector's objects are watched by name, apart from the others.
    let detector = &observed.vsphere_detector;
    Ok(match desired {
        Desired::Namespace(o) => (
            "Namespace",
            applier.apply(o, find(&observed.namespaces, o)).await?,
        ),
        Desired::ServiceAccount(o) => (
            "ServiceAccount",
            applier
                .apply(
                    o,
                    find(&observed.service_accounts, o)
                        .or_else(|| find(&detector.service_accounts, o)),
                )
                .await?,
        ),
        Desired::ClusterRole(o) => (
            "ClusterRole",
            applier
                .apply(
                    o,
                    find(&observed.cluster_roles, o).or_else(|| find(&detector.cluster_roles, o)),
                )
                .await?,
        ),
        Desired::ClusterRoleBinding(o) => (
            "ClusterRoleBinding",
            applier
                .apply(
                    o,
                    find(&observed.cluster_role_bindings, o)
                        .or_else(|| find(&detector.cluster_role_bindings, o)),
                )
                .await?,
        ),
        Desired::Role(o) => (
            "Role",
            applier
                .apply(
                    o,
                    find(&observed.roles, o).or_else(|| find(&detector.roles, o)),
                )
                .await?,
        ),
        Desired::RoleBinding(o) => (
            "RoleBinding",
            applier
                .apply(
                    o,
                    find(&observed.role_bindings, o).or_else(|| find(&detector.role_bindings, o)),
                )
                .await?,
        ),
        Desired::Deployment(o) => (
            "Deployment",
            applier
                .apply(
                    o,
                    find(&observed.deployments, o)
                        .or_else(|| find(detector.deployment.as_slice(), o)),
                )
                .await?,
        ),
        Desired::CustomResourceDefinition(o) => (
            "CustomResourceDefinition",
            applier.apply(o, observed.validator.crd.as_ref()).await?,
        ),
        Desired::Monitoring(kind, o) => {
            // Ours, or the vSphere problem detector's (each kind's objects seen by name).
            let seen = if o.metadata.name.as_deref() == Some(kind.object_name()) {
                &observed.monitoring
            } else {
                &detector.monitoring
            };
            let existing = match seen.get(kind) {
                Some(crate::monitoring::Seen::Cached(existing)) => existing.as_ref(),
                _ => None,
            };
            (
                kind.kind(),
                context
                    .monitoring_applier
                    .apply_dynamic(&kind.api_resource(), o, existing)
                    .await?,
            )
        }
        // A driver operator's config, or one of the vSphere problem detector's.
        Desired::ConfigMap(o) => (
            "ConfigMap",
            applier
                .apply(
                    o,
                    find(&observed.config_maps, o).or_else(|| find(&detector.config_maps, o)),
                )
                .await?,
        ),
        Desired::Service(o) => (
            "Service",
            applier
                .apply(
                    o,
                    find(&observed.services, o).or_else(|| find(&detector.services, o)),
                )
                .await?,
        ),
    })
}

/// Keeps the process's `/metrics` TLS profile the cluster's: `APIServer/cluster`'s
/// (Intermediate where it sets none or the API is not served). An invalid profile leaves the
/// one in force; the driver operators' config reports it (`...CSIDriverOperatorDeploymentDegraded`).
fn follow_tls_profile(cell: &opkit::secure_metrics::ProfileCell, observed: &Observed) {
    let profile = observed
        .api_server
        .as_ref()
        .and_then(|a| a.spec.tls_security_profile.as_ref());
    match csi_kit::tls::serving_tls_of(profile, "APIServer/cluster spec.tlsSecurityProfile") {
        Ok(tls) => cell.set(crate::starter::metrics_profile(tls)),
        Err(error) => tracing::debug!(%error, "keeping the metrics TLS profile in force"),
    }
}

/// Writes the config observer's change of Storage's `spec.observedConfig` (a JSON merge patch:
/// other keys of observedConfig are not ours and stay).
async fn write_observed_config(
    client: &Client,
    patch: &serde_json::Value,
) -> Result<(), ApplyError> {
    let params = PatchParams {
        field_manager: Some(format!(
            "{FIELD_MANAGER_PREFIX}/{}",
            crate::plan::CONFIG_OBSERVER
        )),
        ..PatchParams::default()
    };
    let body = serde_json::json!({"spec": {"observedConfig": patch}});
    Api::<Storage>::all(client.clone())
        .patch("cluster", &params, &Patch::Merge(&body))
        .await
        .map(drop)
        .map_err(|source| ApplyError {
            kind: crate::plan::OBSERVED_CONFIG.into(),
            object: "cluster".into(),
            cluster: None,
            source: source.into(),
        })
}

async fn write_cluster_operator(
    client: &Client,
    missing: bool,
    status: &ClusterOperatorStatus,
) -> Result<(), Failure> {
    let api: Api<ClusterOperator> = Api::all(client.clone());
    if missing {
        create(
            client,
            &ClusterOperator::new(CLUSTER_OPERATOR, ClusterOperatorSpec {}),
        )
        .await?;
    }
    let body = serde_json::json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "ClusterOperator",
        "metadata": {"name": CLUSTER_OPERATOR},
        "status": status,
    });
    let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}/status")).force();
    api.patch_status(CLUSTER_OPERATOR, &params, &Patch::Apply(&body))
        .await
        .map_err(|source| {
            Failure::Apply(ApplyError {
                kind: "ClusterOperator".into(),
                object: CLUSTER_OPERATOR.into(),
                cluster: None,
                source: source.into(),
            })
        })?;
    Ok(())
}
