//! The cluster storage operator's decisions, as a pure function of what it observed: which
//! objects to apply, which ClusterCSIDrivers to create, and what Storage and ClusterOperator
//! status should say. The controller executes the plan; tests call [`plan`] directly.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::config_v1::{ClusterOperatorStatus, ObjectReference, OperandVersion};
use api::operator_v1::{
    ClusterCSIDriver, ConditionStatus, GenerationStatus, OperatorCondition, Storage, StorageSpec,
};
use csi_kit::{HostedControlPlane, Topology};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use opkit::cluster_operator::{DEGRADED_INERTIA, desired_conditions, merge};
use opkit::conditions::condition;
use opkit::management::{self, Mode};
use opkit::status::StatusPart;

use crate::default_storage_class;
use crate::driver_status::storage_conditions;
use crate::failure::{WriteFailure, part_conditions, sync_error};
use crate::monitoring;
use crate::observe::Observed;
use crate::olm;
use crate::ownership::{NotOurs, ours_or_former, ours_to_apply};
use crate::platform::{self, ClusterPlatform, Source};
use crate::registry::{ClusterDrivers, DRIVER_NAMESPACE, Decision, DriverEntry, select};
use crate::starter::{self, StarterInputs};
use crate::validator;
use crate::vsphere_detector;

/// Defined in [`crate::names`], below every file that needs them; re-exported for the callers
/// that name them here.
pub use crate::names::{CLUSTER_OPERATOR, OPERATOR_NAMESPACE, STARTER};

/// What the operator was configured with at start.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This binary's image, run by the driver operators too.
    pub operator_image: String,
    /// The operator's environment (image env vars pass through to driver operators).
    pub env: std::collections::BTreeMap<String, String>,
    /// The version reported in ClusterOperator `versions` (OPERATOR_IMAGE_VERSION).
    pub version: String,
    /// Applies `Storage.spec.operatorLogLevel` to this process's logging, when it can.
    pub operator_log_level: Option<LogLevelHook>,
    /// Where the process's `/metrics` over HTTPS take their TLS profile: kept as the cluster's
    /// (`APIServer/cluster`; Intermediate where it sets none or is not served), as OpenShift's
    /// operator takes it from its injected config.
    pub metrics_tls: Option<opkit::secure_metrics::ProfileCell>,
}

/// A way to change the process's log level at run time.
pub use opkit::log_level::LogLevelHook;

use crate::desired::start_driver;
/// Defined in [`crate::desired`], below the plan; re-exported for the callers that name them
/// here.
pub use crate::desired::{Desired, starter_objects};

/// Everything one reconcile does.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// `Storage/cluster` to create, when it does not exist (plain Kubernetes).
    pub create_storage: Option<Storage>,
    /// Objects to apply, in order.
    pub objects: Vec<Desired>,
    /// With a hosted control plane: objects to apply in the control-plane namespace of the
    /// management cluster (see [`crate::hosted`]), after `objects`.
    pub management_objects: Vec<Desired>,
    /// ClusterCSIDrivers to create (never updated afterwards).
    pub create_cluster_csi_drivers: Vec<ClusterCSIDriver>,
    /// This controller's part of Storage status.
    pub storage_status: Option<StatusPart>,
    /// The whole ClusterOperator status, when the API exists and it changed.
    pub cluster_operator: Option<ClusterOperatorStatus>,
    /// Run again after this long (for Degraded's inertia).
    pub requeue: Option<Duration>,
    /// The JSON merge patch of Storage's `spec.observedConfig` ([`config_observation`]), when
    /// it changes.
    pub observed_config: Option<serde_json::Value>,
    /// Monitoring objects of ours to delete (the vSphere problem detector's PrometheusRule
    /// once its alerts are disabled), by kind and name in the operator's namespace.
    pub delete_monitoring: Vec<(monitoring::Kind, ObjectMeta)>,
    /// With a hosted control plane: the drivers' controller Deployments to annotate with the
    /// release they run (see [`crate::deployment_version`]), as (namespace, name, version).
    pub version_annotations: Vec<(String, String, String)>,
}

/// How soon an unreachable management cluster is asked again.
pub use driver_operator::observe::UNREACHABLE_RETRY;

/// With a hosted control plane, the condition naming the drivers of the platform that are not
/// started there (informational: not an Available, Progressing or Degraded type).
pub const HOSTED_SKIPPED: &str = "CSIDriverStarterNotHosted";

/// The config observer's name, as OpenShift's (its field manager is
/// `storage-operator/ConfigObserver`).
pub const CONFIG_OBSERVER: &str = "ConfigObserver";
/// What a failed write of `spec.observedConfig` is named in [`WriteFailure`].
pub const OBSERVED_CONFIG: &str = "Storage/spec.observedConfig";

/// OpenShift's config observation for Storage: the cluster-wide proxy (`Proxy/cluster`'s
/// status: `HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`) under `spec.observedConfig.targetconfig.proxy`,
/// where OpenShift's tools read it (the driver operators get the proxy in their environment
/// straight from the Proxy). Returns the merge patch of `spec.observedConfig` when it changes,
/// and `ConfigObservationDegraded` (True with the server's answer when the last write failed).
fn config_observation(
    observed: &Observed,
    storage: &Storage,
    failures: &[WriteFailure],
) -> (Option<serde_json::Value>, OperatorCondition) {
    let env: serde_json::Map<String, serde_json::Value> = observed
        .proxy
        .as_ref()
        .and_then(|p| p.status.as_ref())
        .map(|status| {
            status
                .env()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value.into()))
                .collect()
        })
        .unwrap_or_default();
    let mut target = serde_json::Map::new();
    if !env.is_empty() {
        target.insert("proxy".into(), env.into());
    }
    let target = serde_json::Value::Object(target);
    let current = storage
        .spec
        .operator
        .observed_config
        .as_ref()
        .and_then(|c| c.get("targetconfig"));
    let unchanged = match current {
        Some(current) => current == &target,
        None => target.as_object().is_some_and(serde_json::Map::is_empty),
    };
    let patch = (!unchanged).then(|| {
        serde_json::json!({"targetconfig": driver_operator::config_observer::merge_patch(current, &target)})
    });
    let failed: Vec<&WriteFailure> = failures
        .iter()
        .filter(|f| f.kind == OBSERVED_CONFIG)
        .collect();
    let degraded = if failed.is_empty() {
        condition(
            "ConfigObservationDegraded",
            ConditionStatus::False,
            "AsExpected",
            "",
        )
    } else {
        sync_error("ConfigObservationDegraded".into(), &failed)
    };
    (patch, degraded)
}

fn topology(platform: &ClusterPlatform) -> Topology {
    match platform.source {
        Source::Infrastructure => Topology::from_openshift(&platform.control_plane_topology),
        Source::Nodes { .. } => Topology::Kubernetes {
            control_plane_nodes: platform.control_plane_topology
                != api::config_v1::TopologyMode::External,
        },
    }
}

/// The platform as observed: Infrastructure on OpenShift, the nodes elsewhere.
pub fn cluster_platform(observed: &Observed) -> ClusterPlatform {
    match (&observed.infrastructure, observed.apis.infrastructure) {
        (Some(infrastructure), _) => platform::from_infrastructure(infrastructure),
        (None, true) => ClusterPlatform {
            problem: Some("Infrastructure/cluster does not exist yet".into()),
            ..platform::infer_from_nodes(&[])
        },
        (None, false) => platform::infer_from_nodes(&observed.nodes),
    }
}

/// The drivers that should run (before OLM adoption): the ones [`plan`] starts once any
/// OLM-installed predecessor is gone.
pub fn candidates(observed: &Observed, settings: &Settings) -> Vec<DriverEntry> {
    let managed = observed.storage.as_ref().is_some_and(|s| {
        management::mode(&s.spec.operator.management_state, false) == Mode::Manage
    });
    if !managed {
        return Vec::new();
    }
    decide(
        &cluster_platform(observed),
        &cluster_drivers(observed, settings),
    )
    .0
    .into_iter()
    .map(|(e, _)| e)
    .collect()
}

/// The decisions for `observed` at `now`, given how the adoption of OLM-installed driver
/// operators stands (by driver short name; drivers absent from `adoption` have none to adopt).
pub fn plan(
    observed: &Observed,
    settings: &Settings,
    adoption: &BTreeMap<String, olm::Progress>,
    now: &Time,
) -> Plan {
    plan_with_failures(observed, settings, adoption, &[], now)
}

/// [`plan`], with the objects this pass failed to write: each shows as `SyncError` in the
/// Degraded condition of the part it belongs to, naming the object and the server's answer
/// (a driver operator's Deployment in `<Prefix>CSIDriverOperatorDeploymentDegraded`, its
/// ServiceAccount and RBAC in `<Prefix>CSIDriverOperatorStaticControllerDegraded`, the
/// namespaces and shared roles in `CSIDriverStarterDegraded`, the ServiceMonitor and
/// PrometheusRule in `StorageOperatorMonitoringControllerDegraded`), and so in the ClusterOperator.
/// The controller plans once, applies, and plans again with what failed, so that a write that
/// keeps failing is never silent.
pub fn plan_with_failures(
    observed: &Observed,
    settings: &Settings,
    adoption: &BTreeMap<String, olm::Progress>,
    failures: &[WriteFailure],
    now: &Time,
) -> Plan {
    let Some(storage) = &observed.storage else {
        let mut storage = Storage::new("cluster", StorageSpec::default());
        storage.metadata.annotations = Some(
            [(
                "release.openshift.io/create-only".to_owned(),
                "true".to_owned(),
            )]
            .into(),
        );
        return Plan {
            create_storage: Some(storage),
            ..Default::default()
        };
    };
    let mode = management::mode(&storage.spec.operator.management_state, false);
    let mut conditions = vec![management::management_state_degraded(&mode, "storage")];
    let mut plan = Plan::default();
    let mut related = vec![
        reference("", "namespaces", None, OPERATOR_NAMESPACE),
        reference("", "namespaces", None, DRIVER_NAMESPACE),
        reference("operator.openshift.io", "storages", None, "cluster"),
    ];
    let mut generations = Vec::new();

    if mode == Mode::Manage {
        let platform = cluster_platform(observed);
        let cluster = cluster_drivers(observed, settings);
        let inputs = StarterInputs {
            topology: topology(&platform),
            log_level: storage.spec.operator.log_level(),
            proxy: observed
                .proxy
                .as_ref()
                .and_then(|p| p.status.clone())
                .unwrap_or_default(),
            env: settings.env.clone(),
            operator_image: settings.operator_image.clone(),
            tls_profile: observed
                .api_server
                .as_ref()
                .and_then(|a| a.spec.tls_security_profile.clone()),
        };
        let previous = storage
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        conditions.extend(default_storage_class::conditions(
            &platform,
            observed.apis.infrastructure && observed.infrastructure.is_none(),
            previous,
        ));
        let (mut started, mut blocked, foreign_csi_drivers) = decide(&platform, &cluster);
        // A driver whose OLM-installed predecessor is still being removed waits for it.
        for (entry, _) in &started {
            if let Some(progress) = adoption.get(entry.short_name) {
                conditions.extend(olm::conditions(entry, progress));
            }
        }
        started.retain(|(entry, _)| {
            !matches!(
                adoption.get(entry.short_name),
                Some(olm::Progress::InProgress(_))
            )
        });
        if adoption
            .values()
            .any(|p| matches!(p, olm::Progress::InProgress(_)))
        {
            plan.requeue = Some(olm::RETRY);
        }
        if let Some(control_plane) = &observed.hosted {
            // OpenShift runs only some drivers with a hosted control plane; the others are not
            // started, which is no fault of the cluster's: said, not Degraded.
            let skipped: Vec<&str> = started
                .iter()
                .filter(|(entry, _)| !entry.hosted)
                .map(|(entry, _)| entry.short_name)
                .collect();
            if !skipped.is_empty() {
                conditions.push(condition(
                    HOSTED_SKIPPED,
                    ConditionStatus::True,
                    "NotRunHosted",
                    format!(
                        "not started with a hosted control plane, where OpenShift does not run them: {}",
                        skipped.join(", ")
                    ),
                ));
            }
            started.retain(|(entry, _)| entry.hosted);
            let hosted = crate::hosted::hosted_starter_objects(&started, &inputs, control_plane);
            plan.objects.extend(hosted.guest);
            plan.management_objects.extend(hosted.management);
        } else {
            plan.objects.extend(starter_objects(&started, &inputs));
        }
        // Where the driver operators run: their own namespace, or the control-plane namespace
        // of the management cluster.
        let operators_namespace = observed
            .hosted
            .as_ref()
            .map_or(DRIVER_NAMESPACE, |h| h.namespace.as_str());
        // Failures of objects no started driver owns (the namespaces, the shared roles).
        let mut shared_failures: Vec<&WriteFailure> = plan
            .objects
            .iter()
            .chain(&plan.management_objects)
            .filter_map(|d| d.failed_in(failures))
            .collect();
        for (entry, def) in &started {
            // Its objects are built again only to name what failed, on a pass where something did.
            let own_failures: Vec<&WriteFailure> = if failures.is_empty() {
                Vec::new()
            } else {
                let own = match &observed.hosted {
                    Some(control_plane) => {
                        let hosted = crate::hosted::hosted_starter_objects(
                            &[(entry.clone(), def.clone())],
                            &inputs,
                            control_plane,
                        );
                        hosted.guest.into_iter().chain(hosted.management).collect()
                    }
                    None => start_driver(entry, def, &inputs),
                };
                own.iter().filter_map(|d| d.failed_in(failures)).collect()
            };
            shared_failures.retain(|f| !own_failures.contains(f));
            // OpenShift's CSIDriverOperatorCRController: its sync (creating the
            // ClusterCSIDriver) reports `<Prefix>CSIDriverOperatorDegraded`.
            let cr_failures: Vec<&WriteFailure> = failures
                .iter()
                .filter(|f| f.kind == "ClusterCSIDriver" && f.object == entry.csi_driver_name)
                .collect();
            let cr_degraded = format!("{}CSIDriverOperatorDegraded", entry.condition_prefix);
            conditions.push(if cr_failures.is_empty() {
                condition(cr_degraded, ConditionStatus::False, "AsExpected", "")
            } else {
                sync_error(cr_degraded, &cr_failures)
            });
            // As OpenShift lists the namespace its static assets create for such a driver.
            if let Some(namespace) = starter::separate_operand_namespace(def) {
                let namespace = reference("", "namespaces", None, namespace);
                if !related.contains(&namespace) {
                    related.push(namespace);
                }
            }
            if !observed
                .cluster_csi_drivers
                .iter()
                .any(|d| d.name_any() == entry.csi_driver_name)
            {
                plan.create_cluster_csi_drivers
                    .push(starter::build_cluster_csi_driver(entry, &inputs));
            }
            let cr = observed
                .cluster_csi_drivers
                .iter()
                .find(|d| d.name_any() == entry.csi_driver_name);
            conditions.extend(storage_conditions(
                entry,
                cr.and_then(|c| c.status.as_ref()),
                now.0,
            ));
            related.push(reference(
                "operator.openshift.io",
                "clustercsidrivers",
                None,
                entry.csi_driver_name,
            ));
            related.push(reference(
                "apps",
                "deployments",
                Some(operators_namespace),
                entry.operator_deployment,
            ));
            if let Some(cr) = cr {
                generations.push(generation(
                    "operator.openshift.io",
                    "clustercsidrivers",
                    "",
                    entry.csi_driver_name,
                    cr.metadata.generation,
                ));
            }
            let deployment = observed
                .deployments
                .iter()
                .find(|d| d.name_any() == entry.operator_deployment);
            // With a hosted control plane, what fails in the control-plane namespace (but the
            // Deployment) is OpenShift's management-side static controller's.
            let (management_failures, own_failures): (Vec<&WriteFailure>, Vec<&WriteFailure>) =
                own_failures.into_iter().partition(|f| {
                    observed.hosted.is_some()
                        && f.kind != "Deployment"
                        && f.object.starts_with(&format!("{operators_namespace}/"))
                });
            if observed.hosted.is_some() {
                let type_ = format!(
                    "{}CSIDriverOperatorMgmtStaticControllerDegraded",
                    entry.condition_prefix
                );
                conditions.push(if management_failures.is_empty() {
                    condition(type_, ConditionStatus::False, "AsExpected", "")
                } else {
                    sync_error(type_, &management_failures)
                });
                let (version_condition, due) =
                    deployment_version(def, operators_namespace, observed, settings, failures);
                conditions.push(version_condition);
                plan.version_annotations.extend(due);
            }
            let (static_degraded, mut deployment_conditions) = part_conditions(
                &format!(
                    "{}CSIDriverOperatorStaticControllerDegraded",
                    entry.condition_prefix
                ),
                &format!(
                    "{}CSIDriverOperatorDeploymentDegraded",
                    entry.condition_prefix
                ),
                starter::operator_deployment_conditions(entry, deployment),
                &own_failures,
            );
            if let Some(invalid) =
                operator_config_degraded(entry, &inputs, observed.hosted.as_ref())
            {
                deployment_conditions.retain(|c| c.type_ != invalid.type_);
                deployment_conditions.push(invalid);
            }
            conditions.extend(deployment_conditions);
            conditions.push(static_degraded);
            if let Some(deployment) = observed
                .deployments
                .iter()
                .find(|d| d.name_any() == entry.operator_deployment)
            {
                generations.push(generation(
                    "apps",
                    "deployments",
                    operators_namespace,
                    entry.operator_deployment,
                    deployment.metadata.generation,
                ));
            }
        }
        if observed.apis.proxy {
            let (patch, degraded) = config_observation(observed, storage, failures);
            plan.observed_config = patch;
            conditions.push(degraded);
        }
        conditions.extend(crate::selinux::conditions(
            cluster.enabled_gates.contains(crate::selinux::FEATURE_GATE),
            observed.selinux_conflicts.as_ref(),
        ));
        // The volume data source validator, on every platform.
        let (validator_objects, validator_not_ours) =
            validator_objects(observed, settings, &inputs, storage);
        let validator_failures: Vec<&WriteFailure> = validator_objects
            .iter()
            .filter_map(|d| d.failed_in(failures))
            .collect();
        shared_failures.retain(|f| !validator_failures.contains(f));
        // Someone else's Deployment of that name is not ours to report on.
        let validator_deployment = observed
            .validator
            .deployment
            .as_ref()
            .filter(|d| ours_to_apply(Some(&d.metadata)));
        conditions.extend(validator::conditions(
            validator_deployment,
            &validator_failures,
            &validator_not_ours,
        ));
        if let Some(deployment) = validator_deployment {
            generations.push(generation(
                "apps",
                "deployments",
                OPERATOR_NAMESPACE,
                validator::NAME,
                deployment.metadata.generation,
            ));
        }
        related.push(reference(
            "apps",
            "deployments",
            Some(OPERATOR_NAMESPACE),
            validator::NAME,
        ));
        plan.objects.extend(validator_objects);
        // The operator's ServiceMonitor and PrometheusRule, where their CRDs exist; not with a
        // hosted control plane, where it runs in the management cluster and the guest's
        // Prometheus cannot scrape it (OpenShift's operator has no monitoring there either).
        let monitoring = if observed.hosted.is_some() {
            Default::default()
        } else {
            observed.monitoring.clone()
        };
        let (monitoring_objects, foreign) =
            monitoring::desired(&monitoring, observed.apis.infrastructure);
        let monitoring_objects: Vec<Desired> = monitoring_objects
            .into_iter()
            .map(|(kind, object)| Desired::Monitoring(kind, object))
            .collect();
        let monitoring_failures: Vec<&WriteFailure> = monitoring_objects
            .iter()
            .filter_map(|d| d.failed_in(failures))
            .collect();
        if observed.hosted.is_none() {
            conditions.push(monitoring::degraded(&monitoring_failures, &foreign));
        }
        plan.objects.extend(monitoring_objects);
        // The vSphere problem detector, on vSphere only; never with a hosted control plane
        // (OpenShift's HyperShift mode does not start it: vSphere is not hosted there).
        if observed.hosted.is_some() {
        } else if platform.platform == api::config_v1::PlatformType::VSphere {
            match vsphere_detector_part(observed, settings, &inputs, storage, &platform) {
                DetectorPart::Started { objects, kept } => {
                    let mut detector_failures: Vec<&WriteFailure> = objects
                        .iter()
                        .filter_map(|d| d.failed_in(failures))
                        .collect();
                    shared_failures.retain(|f| !detector_failures.contains(f));
                    detector_failures.extend(kept.iter());
                    let deployment = observed.vsphere_detector.deployment.as_ref();
                    conditions.extend(vsphere_detector::conditions(deployment, &detector_failures));
                    if let Some(deployment) = deployment {
                        generations.push(generation(
                            "apps",
                            "deployments",
                            OPERATOR_NAMESPACE,
                            vsphere_detector::NAME,
                            deployment.metadata.generation,
                        ));
                    }
                    plan.objects.extend(objects);
                    let DetectorMonitoring {
                        apply: objects,
                        delete,
                        kept,
                        alerts,
                    } = detector_monitoring(observed);
                    let mut monitoring_failures: Vec<&WriteFailure> = failures
                        .iter()
                        .filter(|f| {
                            monitoring::Kind::ALL.iter().any(|k| k.kind() == f.kind)
                                && f.object
                                    == format!(
                                        "{OPERATOR_NAMESPACE}/{}",
                                        vsphere_detector::MONITORING_NAME
                                    )
                        })
                        .collect();
                    monitoring_failures.extend(kept.iter());
                    conditions.extend(vsphere_detector::monitoring_conditions(
                        alerts,
                        &monitoring_failures,
                    ));
                    plan.objects.extend(objects);
                    plan.delete_monitoring.extend(delete);
                }
                DetectorPart::NotStarted(reason) => {
                    conditions.extend(vsphere_detector::not_started(&reason));
                }
            }
        } else {
            // OpenShift's starter runs on every platform and says so (seen on AWS).
            conditions.push(condition(
                format!("{}Degraded", vsphere_detector::STARTER),
                ConditionStatus::False,
                "AsExpected",
                "",
            ));
        }
        let names: Vec<&str> = started.iter().map(|(e, _)| e.short_name).collect();
        if names.is_empty() {
            // No driver operator reports Upgradeable: OpenShift's starter says it itself, so
            // that the ClusterOperator's Upgradeable has data.
            conditions.push(condition(
                "StorageOperatorUpgradeable",
                ConditionStatus::True,
                "",
                "",
            ));
        }
        let mut message = format!("platform {}", platform.describe());
        message.push_str(&if names.is_empty() {
            "; no CSI driver to install".to_owned()
        } else {
            format!("; CSI driver operators started: {}", names.join(", "))
        });
        if let Some(problem) = &platform.problem {
            message.push_str(&format!("; {problem}"));
        }
        conditions.push(condition(
            format!("{STARTER}Available"),
            ConditionStatus::True,
            "AsExpected",
            message,
        ));
        let disagreement = matches!(platform.source, Source::Nodes { .. })
            && platform.problem.is_some()
            && !observed.nodes.is_empty();
        if disagreement {
            blocked.extend(platform.problem.clone());
        }
        // Every problem is an object someone else made (a CSIDriver, a shared role): the
        // reason says so.
        let not_ours_only = blocked.len() == foreign_csi_drivers
            && shared_failures.iter().all(|f| f.not_ours)
            && observed.management_unreachable.is_none();
        blocked.extend(shared_failures.iter().map(|f| f.message.clone()));
        if let Some(unreachable) = &observed.management_unreachable {
            blocked.push(unreachable.clone());
            // Asked again soon: a watch that resumes has nothing to say until a change.
            plan.requeue = Some(
                plan.requeue
                    .map_or(UNREACHABLE_RETRY, |r| r.min(UNREACHABLE_RETRY)),
            );
        }
        conditions.push(if blocked.is_empty() {
            condition(
                format!("{STARTER}Degraded"),
                ConditionStatus::False,
                "AsExpected",
                "",
            )
        } else {
            condition(
                format!("{STARTER}Degraded"),
                ConditionStatus::True,
                if not_ours_only {
                    opkit::ownership::REASON_NOT_OURS
                } else {
                    "SyncError"
                },
                blocked.join("\n"),
            )
        });
    }

    if mode != Mode::Pause {
        plan.storage_status = Some(StatusPart {
            conditions: conditions.clone(),
            generations,
            ..Default::default()
        });
    }

    // The ClusterOperator sees every Storage condition: ours as just computed, others' as observed.
    let storage_status = storage.status.clone().unwrap_or_default();
    let mut all_conditions: Vec<OperatorCondition> = storage_status
        .conditions
        .iter()
        .filter(|c| !conditions.iter().any(|ours| ours.type_ == c.type_))
        .cloned()
        .collect();
    for ours in &conditions {
        let kept = storage_status
            .condition(&ours.type_)
            .filter(|o| o.status == ours.status)
            .and_then(|o| o.last_transition_time.clone());
        all_conditions.push(OperatorCondition {
            last_transition_time: kept.or_else(|| Some(now.clone())),
            ..ours.clone()
        });
    }
    plan.requeue = match (plan.requeue, young_degraded(&all_conditions, now)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if observed.apis.cluster_operator {
        let mut status = observed
            .cluster_operator
            .as_ref()
            .and_then(|co| co.status.clone())
            .unwrap_or_default();
        let mut changed = merge(
            &mut status.conditions,
            desired_conditions(&all_conditions, &mode, now),
            now,
        );
        let available = status
            .condition("Available")
            .is_some_and(|c| c.status == ConditionStatus::True);
        let versions = if available {
            vec![OperandVersion {
                name: "operator".into(),
                version: settings.version.clone(),
            }]
        } else {
            status.versions.clone()
        };
        if versions != status.versions {
            status.versions = versions;
            changed = true;
        }
        if related != status.related_objects {
            status.related_objects = related;
            changed = true;
        }
        if changed || observed.cluster_operator.is_none() {
            plan.cluster_operator = Some(status);
        }
    }
    plan
}

/// The drivers to start on `platform`, why the ones that should run cannot, and how many of
/// those are blocked by someone else's CSIDriver.
pub fn decide(
    platform: &ClusterPlatform,
    cluster: &ClusterDrivers,
) -> (Vec<(DriverEntry, csi_kit::DriverDef)>, Vec<String>, usize) {
    let mut started = Vec::new();
    let mut blocked = Vec::new();
    let mut foreign = 0;
    for (entry, decision) in select(platform, cluster) {
        match decision {
            Decision::Start => match drivers::by_name(entry.short_name) {
                Ok(def) => started.push((entry, def)),
                Err(_) => blocked.push(format!(
                    "{}: this operator's catalogue has no definition of the {} driver yet",
                    entry.csi_driver_name, entry.short_name
                )),
            },
            Decision::Blocked(message) => {
                foreign += 1;
                blocked.push(message);
            }
            Decision::Skip(reason) => {
                tracing::debug!(driver = entry.short_name, reason, "not starting")
            }
        }
    }
    (started, blocked, foreign)
}

impl NotOurs {
    /// The report of `desired`'s object, made by someone else. [`Desired`] is the plan's, so
    /// this constructor lives here rather than in [`crate::ownership`].
    fn of(desired: &Desired) -> Self {
        let (kind, object) = desired.key();
        Self { kind, object }
    }
}

/// The volume data source validator's objects to apply, and those of its names someone else
/// made ([`ours_to_apply`]), which are left alone and reported. A `VolumePopulator` CRD
/// someone else installed (upstream's, or a populator's) serves the same API: it is left as it
/// is without a report.
fn validator_objects(
    observed: &Observed,
    settings: &Settings,
    inputs: &StarterInputs,
    storage: &Storage,
) -> (Vec<Desired>, Vec<NotOurs>) {
    let image = settings
        .env
        .get(validator::IMAGE_ENV)
        .filter(|i| !i.is_empty())
        .map_or(validator::DEFAULT_IMAGE, String::as_str);
    let found = &observed.validator;
    let candidates = [
        (
            Desired::ServiceAccount(validator::build_service_account()),
            found.service_account.as_ref().map(|o| &o.metadata),
        ),
        (
            Desired::ClusterRole(validator::build_cluster_role()),
            found.cluster_role.as_ref().map(|o| &o.metadata),
        ),
        (
            Desired::ClusterRoleBinding(validator::build_cluster_role_binding()),
            found.cluster_role_binding.as_ref().map(|o| &o.metadata),
        ),
        (
            Desired::CustomResourceDefinition(validator::build_crd()),
            found.crd.as_ref().map(|o| &o.metadata),
        ),
        (
            Desired::Deployment(validator::build_deployment(
                image,
                storage.spec.operator.log_level().klog_verbosity(),
                inputs.topology,
            )),
            found.deployment.as_ref().map(|o| &o.metadata),
        ),
    ];
    let mut objects = Vec::new();
    let mut not_ours = Vec::new();
    for (desired, live) in candidates {
        if ours_to_apply(live) {
            objects.push(desired);
        } else if !matches!(desired, Desired::CustomResourceDefinition(_)) {
            not_ours.push(NotOurs::of(&desired));
        }
    }
    (objects, not_ours)
}

/// What the plan does about the vSphere problem detector on a vSphere cluster.
#[derive(Clone, Debug)]
enum DetectorPart {
    /// It runs: these objects are applied; `kept` are objects of its names someone else made,
    /// left alone and reported.
    Started {
        objects: Vec<Desired>,
        kept: Vec<WriteFailure>,
    },
    /// It cannot run here, and why.
    NotStarted(String),
}

/// The vSphere problem detector's objects, as OpenShift's `VSphereProblemDetectorStarter`
/// applies them: only on OpenShift (it reads OpenShift's Infrastructure and cloud config) and
/// with its image given (`VSPHERE_PROBLEM_DETECTOR_OPERATOR_IMAGE`; there is no upstream
/// image). An object of its names that someone other than this operator or OpenShift's made
/// is not written, and is reported in the Degraded condition of its part.
fn vsphere_detector_part(
    observed: &Observed,
    settings: &Settings,
    inputs: &StarterInputs,
    storage: &Storage,
    platform: &ClusterPlatform,
) -> DetectorPart {
    if platform.source != Source::Infrastructure {
        return DetectorPart::NotStarted(
            "it runs on OpenShift only (it reads OpenShift's Infrastructure and cloud config)"
                .into(),
        );
    }
    let Some(image) = settings
        .env
        .get(vsphere_detector::IMAGE_ENV)
        .filter(|i| !i.is_empty())
    else {
        return DetectorPart::NotStarted(format!(
            "{} is not set (it names the detector's image, which OpenShift's release provides)",
            vsphere_detector::IMAGE_ENV
        ));
    };
    let detector = &observed.vsphere_detector;
    // The cloud config is the ConfigMap the Infrastructure names; the operator watches it
    // under the name OpenShift's installer gives it, so any other name (or none) has no hash,
    // as OpenShift sets none for a ConfigMap it cannot find.
    let mut hashes = detector.hashes.clone();
    let cloud_config = observed
        .infrastructure
        .as_ref()
        .and_then(|i| i.spec.cloud_config.as_ref())
        .map(|c| c.name.as_str());
    if cloud_config != Some(vsphere_detector::CLOUD_CONFIG) {
        hashes.cloud_config = None;
    }
    let deployment = vsphere_detector::build_deployment(&vsphere_detector::DeploymentInputs {
        image: image.clone(),
        verbosity: storage.spec.operator.log_level().klog_verbosity(),
        topology: inputs.topology,
        proxy: inputs.proxy.clone(),
        hashes,
    });
    let mut kept = Vec::new();
    let mut candidates = vec![
        Desired::ServiceAccount(vsphere_detector::build_service_account()),
        Desired::Role(vsphere_detector::build_role()),
        Desired::RoleBinding(vsphere_detector::build_role_binding()),
        Desired::ClusterRole(vsphere_detector::build_cluster_role()),
        Desired::ClusterRoleBinding(vsphere_detector::build_cluster_role_binding()),
        Desired::ConfigMap(vsphere_detector::build_trusted_ca_bundle()),
    ];
    // With the cluster's TLS profile; an invalid one leaves the configuration as it is, and
    // the starter (which writes it) says why.
    match vsphere_detector::build_operator_config(inputs.tls_profile.as_ref()) {
        Ok(config) => candidates.push(Desired::ConfigMap(config)),
        Err(error) => {
            let object = format!("{OPERATOR_NAMESPACE}/{}", vsphere_detector::OPERATOR_CONFIG);
            kept.push(WriteFailure {
                kind: "ConfigMap".into(),
                message: format!(
                    "cannot write ConfigMap {object} with the cluster's TLS profile: {error}"
                ),
                object,
                not_ours: false,
            });
        }
    }
    candidates.push(Desired::Service(vsphere_detector::build_service()));
    candidates.push(Desired::Deployment(deployment));
    let mut objects = Vec::new();
    for desired in candidates {
        match detector_existing(detector, &desired).filter(|meta| !ours_to_apply(Some(meta))) {
            None => objects.push(desired),
            Some(meta) => {
                let (kind, object) = desired.key();
                let managers: BTreeSet<&str> = meta
                    .managed_fields
                    .iter()
                    .flatten()
                    .filter_map(|e| e.manager.as_deref())
                    .collect();
                let managers: Vec<&str> = managers.into_iter().collect();
                kept.push(WriteFailure {
                    kind: kind.into(),
                    object: object.clone(),
                    message: format!(
                        "{kind} {object} was made by someone else ({}), not by this operator or OpenShift's; it is left as it is: delete it to have the operator manage it",
                        managers.join(", ")
                    ),
                    not_ours: true,
                });
            }
        }
    }
    DetectorPart::Started { objects, kept }
}

/// OpenShift's VSphereProblemDetectorMonitoringController: the detector's ServiceMonitor,
/// and its PrometheusRule unless the admin disabled its alerts (ConfigMap
/// `vsphere-problem-detector`) or removed the vSphere CSI driver (its ClusterCSIDriver
/// `Removed`), in which case a rule of ours is deleted. Each only where its CRD exists, never
/// over someone else's object. Returns what to apply, what to delete, and whether the alerts
/// are disabled (the error names the admin's ConfigMap and the fix; the rule is then left as
/// it is).
fn detector_monitoring(observed: &Observed) -> DetectorMonitoring {
    let seen = &observed.vsphere_detector.monitoring;
    let alerts = vsphere_detector::alerts_disabled(observed.vsphere_detector.user_config.as_ref());
    let driver_removed = observed.cluster_csi_drivers.iter().any(|d| {
        d.name_any() == "csi.vsphere.vmware.com"
            && d.spec.operator.management_state == api::operator_v1::ManagementState::Removed
    });
    let mut apply = Vec::new();
    let mut delete = Vec::new();
    let mut kept = Vec::new();
    for kind in monitoring::Kind::ALL {
        let existing = match seen.get(&kind) {
            Some(monitoring::Seen::Cached(existing)) => existing.as_ref(),
            // No CRD (nothing to do) or its cache still filling (wait).
            _ => continue,
        };
        if existing.is_some_and(|o| !ours_to_apply(Some(&o.metadata))) {
            let object = format!("{OPERATOR_NAMESPACE}/{}", vsphere_detector::MONITORING_NAME);
            kept.push(WriteFailure {
                kind: kind.kind().into(),
                message: format!(
                    "{} {object} was made by someone else, not by this operator or OpenShift's; it is left as it is: delete it to have the operator manage it",
                    kind.kind()
                ),
                object,
                not_ours: true,
            });
            continue;
        }
        let wanted = match kind {
            monitoring::Kind::ServiceMonitor => true,
            monitoring::Kind::PrometheusRule => match &alerts {
                Ok(disabled) => !disabled && !driver_removed,
                // Left as it is until the admin's ConfigMap can be read.
                Err(_) => continue,
            },
        };
        if wanted {
            apply.push(Desired::Monitoring(
                kind,
                vsphere_detector::monitoring_object(kind),
            ));
        } else if let Some(ours) = existing.filter(|o| ours_or_former(&o.metadata)) {
            // Deleting needs proof that we (or the operator ours replaces) wrote it: an object
            // nobody set a field of may be adopted, never deleted. The delete carries its uid
            // and resourceVersion, so it removes only the object read here.
            delete.push((kind, ours.metadata.clone()));
        }
    }
    let alerts = alerts.map(|disabled| disabled || driver_removed);
    DetectorMonitoring {
        apply,
        delete,
        kept,
        alerts,
    }
}

/// What [`detector_monitoring`] decided: the objects to apply, those to delete, those of its
/// names someone else made (reported), and whether the alerts are disabled.
struct DetectorMonitoring {
    apply: Vec<Desired>,
    delete: Vec<(monitoring::Kind, ObjectMeta)>,
    kept: Vec<WriteFailure>,
    alerts: Result<bool, String>,
}

/// OpenShift's `DeploymentVersionController` with a hosted control plane (see
/// [`crate::deployment_version`]): its `DeploymentVersionControllerDegraded`, and the
/// annotation due on the driver's controller Deployment, if any. A write of it that failed is
/// Degraded with the server's answer; a controller Deployment the driver operator has not made
/// yet is not (OpenShift's says Degraded until it exists, which every install goes through).
fn deployment_version(
    def: &csi_kit::DriverDef,
    namespace: &str,
    observed: &Observed,
    settings: &Settings,
    failures: &[WriteFailure],
) -> (OperatorCondition, Option<(String, String, String)>) {
    let type_ = format!("{}Degraded", crate::deployment_version::CONTROLLER);
    let name = csi_kit::names::controller(def);
    let failed: Vec<&WriteFailure> = failures
        .iter()
        .filter(|f| f.kind == "Deployment" && f.object == format!("{namespace}/{name}"))
        .collect();
    let due = observed
        .driver_controllers
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| crate::deployment_version::due(c, &settings.version))
        .map(|version| (namespace.to_owned(), name.clone(), version));
    let condition = if failed.is_empty() {
        condition(type_, ConditionStatus::False, "AsExpected", "")
    } else {
        sync_error(type_, &failed)
    };
    (condition, due)
}

/// `<Prefix>CSIDriverOperatorDeploymentDegraded` when the driver operator's config ConfigMap
/// cannot be written because the cluster's TLS profile is invalid (where OpenShift's
/// Deployment controller reports it): what is wrong, in which field, and how to fix it.
/// With a hosted control plane, the profile is the `HostedControlPlane`'s, and the ConfigMap
/// is in its namespace.
fn operator_config_degraded(
    entry: &DriverEntry,
    inputs: &StarterInputs,
    hosted: Option<&HostedControlPlane>,
) -> Option<OperatorCondition> {
    let (namespace, error) = match hosted {
        Some(hcp) => (
            hcp.namespace.as_str(),
            crate::hosted::operator_config_error(entry, hcp)?,
        ),
        None => (
            DRIVER_NAMESPACE,
            starter::build_operator_config(entry, inputs.tls_profile.as_ref())?.err()?,
        ),
    };
    let name = starter::operator_config_name(entry).unwrap_or_default();
    Some(condition(
        format!(
            "{}CSIDriverOperatorDeploymentDegraded",
            entry.condition_prefix
        ),
        ConditionStatus::True,
        "SyncError",
        format!(
            "cannot write ConfigMap {namespace}/{name} with the cluster's TLS profile: {error}"
        ),
    ))
}

fn cluster_drivers(observed: &Observed, settings: &Settings) -> ClusterDrivers {
    // Ours, or OpenShift's driver operator's (its field manager, which the driver operator
    // takes over): labels and OpenShift's `csi.openshift.io/managed` annotation can be copied,
    // field managers cannot (`opkit::ownership`).
    let ours = |d: &k8s_openapi::api::storage::v1::CSIDriver| {
        // The catalogue finds a driver by its CSI name too.
        let former = drivers::by_name(&d.name_any())
            .map(|def| def.adopt_from)
            .unwrap_or_default();
        opkit::ownership::owner(&d.metadata, &former) != opkit::ownership::Owner::Someone
    };
    // The gates in force for this operator's version, as library-go's FeatureGateAccess reads them.
    let enabled_gates = observed
        .feature_gate
        .iter()
        .flat_map(|gates| gates.status.iter().flat_map(|s| s.feature_gates.iter()))
        .filter(|details| details.version == settings.version)
        .flat_map(|details| details.enabled.iter().map(|g| g.name.clone()))
        .collect::<BTreeSet<_>>();
    ClusterDrivers {
        installed: observed
            .cluster_csi_drivers
            .iter()
            .map(|d| d.name_any())
            .collect(),
        foreign_csidrivers: observed
            .csi_drivers
            .iter()
            .filter(|d| !ours(d))
            .map(|d| (d.name_any(), opkit::ownership::installer(&d.metadata)))
            .collect(),
        enabled_gates,
    }
}

fn reference(group: &str, resource: &str, namespace: Option<&str>, name: &str) -> ObjectReference {
    ObjectReference {
        group: group.into(),
        resource: resource.into(),
        namespace: namespace.map(Into::into),
        name: name.into(),
    }
}

fn generation(
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    generation: Option<i64>,
) -> GenerationStatus {
    GenerationStatus {
        group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        last_generation: generation.unwrap_or_default(),
        hash: String::new(),
    }
}

/// When a bad Degraded condition will outlive the ClusterOperator's inertia, so the roll-up is
/// recomputed then rather than at the next unrelated change.
fn young_degraded(conditions: &[OperatorCondition], now: &Time) -> Option<Duration> {
    conditions
        .iter()
        .filter(|c| c.type_.ends_with("Degraded") && c.status != ConditionStatus::False)
        .filter_map(|c| c.last_transition_time.as_ref())
        .filter_map(|since| {
            let age = now.0.duration_since(since.0).unsigned_abs();
            DEGRADED_INERTIA
                .checked_sub(age)
                .map(|left| left + Duration::from_secs(1))
        })
        .min()
}

/// The detector's object of the same kind and name as `desired`, as observed.
fn detector_existing<'a>(
    detector: &'a crate::observe::DetectorObserved,
    desired: &Desired,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> {
    let same = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.name == desired.metadata().name && meta.namespace == desired.metadata().namespace
    };
    match desired {
        Desired::ServiceAccount(_) => detector
            .service_accounts
            .iter()
            .map(|o| &o.metadata)
            .find(|m| same(m)),
        Desired::Role(_) => detector.roles.iter().map(|o| &o.metadata).find(|m| same(m)),
        Desired::RoleBinding(_) => detector
            .role_bindings
            .iter()
            .map(|o| &o.metadata)
            .find(|m| same(m)),
        Desired::ClusterRole(_) => detector
            .cluster_roles
            .iter()
            .map(|o| &o.metadata)
            .find(|m| same(m)),
        Desired::ClusterRoleBinding(_) => detector
            .cluster_role_bindings
            .iter()
            .map(|o| &o.metadata)
            .find(|m| same(m)),
        Desired::ConfigMap(_) => detector
            .config_maps
            .iter()
            .map(|o| &o.metadata)
            .find(|m| same(m)),
        Desired::Service(_) => detector
            .services
            .iter()
            .map(|o| &o.metadata)
            .find(|m| same(m)),
        Desired::Deployment(_) => detector
            .deployment
            .iter()
            .map(|o| &o.metadata)
            .find(|m| same(m)),
        Desired::Namespace(_) | Desired::CustomResourceDefinition(_) | Desired::Monitoring(..) => {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;

    fn observed() -> Observed {
        Observed {
            storage: Some(
                serde_json::from_value(json!({"metadata": {"name": "cluster"}, "spec": {"managementState": "Managed"}}))
                    .unwrap(),
            ),
            nodes: vec![serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {"providerID": "gce://p/z/n"}})).unwrap()],
            ..Default::default()
        }
    }

    fn settings() -> Settings {
        Settings {
            operator_image: "i".into(),
            env: Default::default(),
            version: "1".into(),
            operator_log_level: None,
            metrics_tls: None,
        }
    }

    fn now() -> Time {
        Time(Timestamp::from_second(1_800_000_000).unwrap())
    }

    /// Whether the plan starts a driver operator (the validator's Deployment is always there).
    fn has_deployment(plan: &Plan) -> bool {
        plan.objects.iter().any(|o| {
            matches!(o, Desired::Deployment(d) if d.metadata.name.as_deref() != Some(validator::NAME))
        })
    }

    /// Every condition type OpenShift's cluster storage operator (bb8d2fd) wrote on
    /// `Storage/cluster` of an AWS cluster is one ours writes: run on kube-apiserver v1.36.2
    /// (`../shared/k8s`) with OpenShift's config CRDs, an AWS Infrastructure, Proxy, APIServer,
    /// FeatureGate and ClusterVersion, no nodes. Ours writes one more, named below with why.
    #[test]
    fn openshifts_condition_types_are_all_reported() {
        const OPENSHIFT_AWS: [&str; 19] = [
            "AWSEBSCSIDriverOperatorCRAvailable",
            "AWSEBSCSIDriverOperatorCRDegraded",
            "AWSEBSCSIDriverOperatorCRProgressing",
            "AWSEBSCSIDriverOperatorCRUpgradeable",
            "AWSEBSCSIDriverOperatorDegraded",
            "AWSEBSCSIDriverOperatorDeploymentDegraded",
            "AWSEBSCSIDriverOperatorStaticControllerDegraded",
            "AWSEBSProgressing",
            "CSIDriverStarterDegraded",
            "ConfigObservationDegraded",
            "DefaultStorageClassControllerAvailable",
            "DefaultStorageClassControllerDegraded",
            "DefaultStorageClassControllerProgressing",
            "ManagementStateDegraded",
            "VSphereProblemDetectorStarterDegraded",
            "VolumeDataSourceValidatorDeploymentControllerDegraded",
            "VolumeDataSourceValidatorDeploymentControllerProgressing",
            "VolumeDataSourceValidatorStarterDegraded",
            "VolumeDataSourceValidatorStaticControllerDegraded",
        ];
        // The starter's Available carries what it decided (the platform and where it was read,
        // the drivers started) for the ClusterOperator's message; OpenShift's says it nowhere.
        // OpenShift's cluster version operator applies its ServiceMonitor and PrometheusRule;
        // ours applies them itself, and says when it cannot.
        const ONLY_OURS: [&str; 2] = [
            "CSIDriverStarterAvailable",
            "StorageOperatorMonitoringControllerDegraded",
        ];
        let mut o = observed();
        o.nodes.clear();
        o.apis = crate::observe::Apis {
            infrastructure: true,
            feature_gate: true,
            proxy: true,
            cluster_operator: true,
            volume_attributes_classes: true,
            api_server: true,
        };
        o.infrastructure = Some(
            serde_json::from_value(json!({"metadata": {"name": "cluster"}, "spec": {},
                "status": {"platform": "AWS", "platformStatus": {"type": "AWS", "aws": {"region": "us-east-1"}},
                    "infrastructureName": "x", "controlPlaneTopology": "HighlyAvailable",
                    "infrastructureTopology": "HighlyAvailable"}}))
            .unwrap(),
        );
        let plan = plan_with_failures(&o, &settings(), &BTreeMap::new(), &[], &now());
        let ours: BTreeSet<&str> = plan
            .storage_status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        let openshift: BTreeSet<&str> = OPENSHIFT_AWS.into_iter().collect();
        let missing: Vec<&&str> = openshift.difference(&ours).collect();
        assert!(missing.is_empty(), "not reported: {missing:?}");
        let extra: Vec<&str> = ours.difference(&openshift).copied().collect();
        assert_eq!(extra, ONLY_OURS);
    }

    /// The validator's objects have OpenShift's fixed names: each is applied when it is
    /// absent, ours or the former operator's, and left alone (and reported) when someone
    /// else made it; someone else's VolumePopulator CRD is left alone without a report.
    #[test]
    fn the_validators_objects_someone_else_made_are_left_alone() {
        let made_by = |manager: &str, operation: &str| {
            json!({"managedFields": [{"manager": manager, "operation": operation,
                "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]})
        };
        let meta = |name: &str, namespace: Option<&str>, by: serde_json::Value| {
            let mut m = by;
            m["name"] = name.into();
            if let Some(ns) = namespace {
                m["namespace"] = ns.into();
            }
            json!({"metadata": m})
        };
        let mut o = observed();
        let theirs = made_by("kubectl-create", "Update");
        let former = made_by(crate::names::FORMER_OPERATOR, "Update");
        let ours = made_by("storage-operator/CSIDriverStarter", "Apply");
        o.validator.service_account = Some(
            serde_json::from_value(meta(
                validator::NAME,
                Some(OPERATOR_NAMESPACE),
                theirs.clone(),
            ))
            .unwrap(),
        );
        o.validator.cluster_role =
            Some(serde_json::from_value(meta(validator::NAME, None, former)).unwrap());
        o.validator.cluster_role_binding =
            Some(serde_json::from_value(meta(validator::NAME, None, ours)).unwrap());
        o.validator.crd =
            Some(serde_json::from_value(meta(validator::CRD_NAME, None, theirs.clone())).unwrap());
        let mut d: serde_json::Value = meta(validator::NAME, Some(OPERATOR_NAMESPACE), theirs);
        d["status"] = json!({"availableReplicas": 1, "replicas": 1, "updatedReplicas": 1});
        o.validator.deployment = Some(serde_json::from_value(d).unwrap());

        let plan = plan_with_failures(&o, &settings(), &BTreeMap::new(), &[], &now());
        let applied: Vec<(&str, String)> = plan
            .objects
            .iter()
            .map(Desired::key)
            .filter(|(_, name)| name.ends_with(validator::NAME) || name == validator::CRD_NAME)
            .collect();
        assert_eq!(
            applied,
            [
                ("ClusterRole", validator::NAME.to_owned()),
                ("ClusterRoleBinding", validator::NAME.to_owned()),
            ]
        );
        let conditions = plan.storage_status.unwrap().conditions;
        let get = |type_: &str| conditions.iter().find(|c| c.type_ == type_).unwrap();
        for type_ in [
            "VolumeDataSourceValidatorStaticControllerDegraded",
            "VolumeDataSourceValidatorDeploymentControllerDegraded",
        ] {
            assert_eq!(get(type_).status, ConditionStatus::True, "{type_}");
            assert_eq!(
                get(type_).reason.as_deref(),
                Some("ObjectNotOurs"),
                "{type_}"
            );
        }
        assert!(
            get("VolumeDataSourceValidatorStaticControllerDegraded")
                .message
                .as_deref()
                .unwrap()
                .starts_with("ServiceAccount openshift-cluster-storage-operator/volume-data-source-validator exists"),
        );
        // Someone else's Deployment's state is not reported as ours.
        assert_eq!(
            get("VolumeDataSourceValidatorDeploymentControllerProgressing").status,
            ConditionStatus::True
        );
    }

    fn profile(value: serde_json::Value) -> Option<api::config_v1::APIServer> {
        Some(
            serde_json::from_value(json!({"metadata": {"name": "cluster"},
                "spec": {"tlsSecurityProfile": value}}))
            .unwrap(),
        )
    }

    fn config_maps(plan: &Plan) -> Vec<&ConfigMap> {
        plan.objects
            .iter()
            .filter_map(|o| match o {
                Desired::ConfigMap(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    /// The started driver operator gets its config ConfigMap with the cluster's TLS profile
    /// (Intermediate without an APIServer, as on plain Kubernetes), before its Deployment.
    #[test]
    fn the_driver_operator_config_carries_the_tls_profile() {
        let mut observed = observed();
        let plan = plan(&observed, &settings(), &BTreeMap::new(), &now());
        let maps = config_maps(&plan);
        assert_eq!(maps.len(), 1);
        assert_eq!(
            maps[0].metadata.name.as_deref(),
            Some("gcp-pd-csi-driver-operator-config")
        );
        let intermediate = &maps[0].data.as_ref().unwrap()["config.yaml"];
        assert!(
            intermediate.contains("minTLSVersion: VersionTLS12"),
            "{intermediate}"
        );
        let position = |f: &dyn Fn(&Desired) -> bool| plan.objects.iter().position(f).unwrap();
        assert!(
            position(&|o| matches!(o, Desired::ConfigMap(_)))
                < position(
                    &|o| matches!(o, Desired::Deployment(d) if d.metadata.name.as_deref() == Some("gcp-pd-csi-driver-operator"))
                )
        );
        observed.api_server = profile(json!({"type": "Modern", "modern": {}}));
        let plan = plan_fn(&observed);
        let modern = &config_maps(&plan)[0].data.as_ref().unwrap()["config.yaml"];
        assert!(modern.contains("minTLSVersion: VersionTLS13"), "{modern}");
        assert_ne!(modern, intermediate);
    }

    fn plan_fn(observed: &Observed) -> Plan {
        plan(observed, &settings(), &BTreeMap::new(), &now())
    }

    /// A Custom profile the driver operators cannot serve leaves the ConfigMap as it is and
    /// says so in the Deployment's Degraded condition, naming the field and the fix; the rest
    /// of the plan goes on.
    #[rstest::rstest]
    #[case::no_usable_cipher(
        json!({"type": "Custom", "custom": {"ciphers": ["NOT-A-CIPHER"], "minTLSVersion": "VersionTLS12"}}),
        "spec.tlsSecurityProfile.custom.ciphers"
    )]
    #[case::unknown_version(
        json!({"type": "Custom", "custom": {"ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"], "minTLSVersion": "TLS1.2"}}),
        "spec.tlsSecurityProfile.custom.minTLSVersion"
    )]
    #[case::custom_without_settings(json!({"type": "Custom"}), "spec.tlsSecurityProfile.custom")]
    fn an_invalid_custom_profile_is_degraded_not_written(
        #[case] value: serde_json::Value,
        #[case] field: &str,
    ) {
        let mut observed = observed();
        observed.api_server = profile(value);
        let plan = plan_fn(&observed);
        assert!(config_maps(&plan).is_empty());
        assert!(has_deployment(&plan));
        let conditions = &plan.storage_status.as_ref().unwrap().conditions;
        let degraded = conditions
            .iter()
            .find(|c| c.type_ == "GCPPDCSIDriverOperatorDeploymentDegraded")
            .unwrap();
        assert_eq!(degraded.status, ConditionStatus::True);
        assert_eq!(degraded.reason.as_deref(), Some("SyncError"));
        let message = degraded.message.clone().unwrap_or_default();
        assert!(
            message.contains(field)
                && message
                    .contains("openshift-cluster-csi-drivers/gcp-pd-csi-driver-operator-config"),
            "{message}"
        );
        assert_eq!(
            conditions
                .iter()
                .filter(|c| c.type_ == degraded.type_)
                .count(),
            1
        );
    }

    /// Each failed write is reported in the Degraded condition of its part: the driver
    /// operator's Deployment, its static objects, or the starter's shared objects; the
    /// ClusterOperator says Degraded once the failure outlives the inertia.
    #[test]
    fn write_failures_are_degraded_in_the_part_they_belong_to() {
        let failure = |kind: &str, object: &str| WriteFailure {
            kind: kind.into(),
            object: object.into(),
            message: format!("applying {kind} {object}: the server said no (403)"),
            not_ours: false,
        };
        let find = |plan: &Plan, type_: &str| {
            let c = plan
                .storage_status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .find(|c| c.type_ == type_)
                .unwrap_or_else(|| panic!("no {type_}"))
                .clone();
            (
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
            )
        };
        let cases = [
            (
                failure(
                    "Deployment",
                    "openshift-cluster-csi-drivers/gcp-pd-csi-driver-operator",
                ),
                "GCPPDCSIDriverOperatorDeploymentDegraded",
            ),
            (
                failure(
                    "ServiceAccount",
                    "openshift-cluster-csi-drivers/gcp-pd-csi-driver-operator",
                ),
                "GCPPDCSIDriverOperatorStaticControllerDegraded",
            ),
            (
                failure("Namespace", "openshift-cluster-csi-drivers"),
                "CSIDriverStarterDegraded",
            ),
        ];
        let all = [
            "GCPPDCSIDriverOperatorDeploymentDegraded",
            "GCPPDCSIDriverOperatorStaticControllerDegraded",
            "CSIDriverStarterDegraded",
        ];
        let clean = plan(&observed(), &settings(), &BTreeMap::new(), &now());
        for type_ in all {
            assert_eq!(find(&clean, type_).0, ConditionStatus::False, "{type_}");
        }
        for (failed, degraded) in cases {
            let plan = plan_with_failures(
                &observed(),
                &settings(),
                &BTreeMap::new(),
                std::slice::from_ref(&failed),
                &now(),
            );
            assert_eq!(plan.objects, clean.objects, "the same objects are planned");
            for type_ in all {
                let (status, reason, message) = find(&plan, type_);
                if type_ == degraded {
                    assert_eq!(
                        (status, reason.as_str(), message.as_str()),
                        (ConditionStatus::True, "SyncError", failed.message.as_str()),
                        "{type_}"
                    );
                } else {
                    assert_eq!(status, ConditionStatus::False, "{type_} for {failed:?}");
                }
            }
        }

        // The roll-up: Degraded in the ClusterOperator once it has lasted past the inertia.
        let failed = [failure(
            "Deployment",
            "openshift-cluster-csi-drivers/gcp-pd-csi-driver-operator",
        )];
        let mut observed = observed();
        observed.apis.cluster_operator = true;
        let first = plan_with_failures(&observed, &settings(), &BTreeMap::new(), &failed, &now());
        let mut status = observed
            .storage
            .as_ref()
            .unwrap()
            .status
            .clone()
            .unwrap_or_default();
        status.conditions = first
            .storage_status
            .unwrap()
            .conditions
            .into_iter()
            .map(|c| OperatorCondition {
                last_transition_time: Some(now()),
                ..c
            })
            .collect();
        observed.storage.as_mut().unwrap().status = Some(status);
        let later = Time(
            now()
                .0
                .checked_add(DEGRADED_INERTIA + Duration::from_secs(1))
                .unwrap(),
        );
        let after = plan_with_failures(&observed, &settings(), &BTreeMap::new(), &failed, &later);
        let co = after
            .cluster_operator
            .expect("the ClusterOperator is written");
        let degraded = co
            .conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .unwrap();
        assert_eq!(degraded.status, ConditionStatus::True, "{degraded:?}");
        assert!(
            degraded
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("gcp-pd-csi-driver-operator"),
            "{degraded:?}"
        );
    }

    /// Where Prometheus' CRDs exist the plan applies the ServiceMonitor and PrometheusRule (not
    /// before); a failed write of one shows as `StorageOperatorMonitoringControllerDegraded`
    /// (only there), which is False again once the write succeeds.
    #[test]
    fn monitoring_objects_are_planned_where_their_crds_exist() {
        use crate::monitoring::{Kind, Seen};
        let monitoring = |plan: &Plan| -> Vec<Kind> {
            plan.objects
                .iter()
                .filter_map(|o| match o {
                    Desired::Monitoring(kind, _) => Some(*kind),
                    _ => None,
                })
                .collect()
        };
        let degraded = |plan: &Plan| {
            plan.storage_status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .find(|c| c.type_ == "StorageOperatorMonitoringControllerDegraded")
                .cloned()
                .unwrap()
        };
        let without = plan(&observed(), &settings(), &BTreeMap::new(), &now());
        assert!(monitoring(&without).is_empty());
        assert_eq!(degraded(&without).status, ConditionStatus::False);

        let mut with = observed();
        with.monitoring = [
            (Kind::ServiceMonitor, Seen::Cached(None)),
            (Kind::PrometheusRule, Seen::Cached(None)),
        ]
        .into();
        let clean = plan(&with, &settings(), &BTreeMap::new(), &now());
        assert_eq!(
            monitoring(&clean),
            [Kind::ServiceMonitor, Kind::PrometheusRule]
        );
        assert_eq!(degraded(&clean).status, ConditionStatus::False);

        let failed = WriteFailure {
            kind: "ServiceMonitor".into(),
            object: "openshift-cluster-storage-operator/cluster-storage-operator".into(),
            message: "applying ServiceMonitor openshift-cluster-storage-operator/cluster-storage-operator: forbidden (403)".into(),
            not_ours: false,
        };
        let failing = plan_with_failures(
            &with,
            &settings(),
            &BTreeMap::new(),
            std::slice::from_ref(&failed),
            &now(),
        );
        assert_eq!(failing.objects, clean.objects);
        let condition = degraded(&failing);
        assert_eq!(
            (
                condition.status,
                condition.reason.as_deref(),
                condition.message.as_deref()
            ),
            (
                ConditionStatus::True,
                Some("SyncError"),
                Some(failed.message.as_str())
            )
        );
        // Nowhere else.
        for c in &failing.storage_status.as_ref().unwrap().conditions {
            if c.type_ != condition.type_ && c.type_.ends_with("Degraded") {
                assert_eq!(c.status, ConditionStatus::False, "{c:?}");
            }
        }
    }

    #[test]
    fn a_driver_waits_for_its_olm_predecessor_to_go() {
        let candidates: Vec<_> = candidates(&observed(), &settings())
            .into_iter()
            .map(|e| e.short_name)
            .collect();
        assert_eq!(candidates, ["gcp-pd"]);

        let waiting: BTreeMap<String, olm::Progress> = [(
            "gcp-pd".to_owned(),
            olm::Progress::InProgress("deleting Subscription x".into()),
        )]
        .into();
        let plan = plan(&observed(), &settings(), &waiting, &now());
        assert!(
            !has_deployment(&plan),
            "not started while OLM's operator may still run"
        );
        assert!(plan.create_cluster_csi_drivers.is_empty());
        assert_eq!(plan.requeue, Some(olm::RETRY));
        let conditions = &plan.storage_status.unwrap().conditions;
        let progressing = conditions
            .iter()
            .find(|c| c.type_ == "GCPPDOLMOperatorRemovalProgressing")
            .unwrap();
        assert_eq!(
            progressing.message.as_deref(),
            Some("deleting Subscription x")
        );

        let adopted: BTreeMap<String, olm::Progress> =
            [("gcp-pd".to_owned(), olm::Progress::Adopted)].into();
        let plan = super::plan(&observed(), &settings(), &adopted, &now());
        assert!(has_deployment(&plan));
        assert!(plan.requeue.is_none());
    }

    fn kinds_in(objects: &[Desired]) -> Vec<(String, String)> {
        objects
            .iter()
            .map(|o| {
                let value = o.to_value();
                (
                    value["kind"].as_str().unwrap().to_owned(),
                    value["metadata"]["namespace"]
                        .as_str()
                        .or(value["metadata"]["name"].as_str())
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect()
    }

    fn starter_inputs() -> StarterInputs {
        StarterInputs {
            topology: Topology::HighlyAvailable,
            log_level: api::operator_v1::LogLevel::Normal,
            proxy: Default::default(),
            env: Default::default(),
            operator_image: "i".into(),
            tls_profile: None,
        }
    }

    #[test]
    fn the_starter_makes_a_separate_operand_namespace_before_its_roles() {
        let entry = crate::registry::find("gcp-pd").unwrap();
        let mut def = drivers::by_name("gcp-pd").unwrap();
        def.namespace = "openshift-gcp-pd-csi-driver".into();
        let objects = kinds_in(&starter_objects(&[(entry, def)], &starter_inputs()));
        let position = |wanted: (&str, &str)| {
            objects
                .iter()
                .position(|(kind, ns)| (kind.as_str(), ns.as_str()) == wanted)
                .unwrap_or_else(|| panic!("no {wanted:?} in {objects:?}"))
        };
        let operands = "openshift-gcp-pd-csi-driver";
        assert!(position(("Namespace", DRIVER_NAMESPACE)) < position(("Role", DRIVER_NAMESPACE)));
        assert!(position(("Namespace", operands)) < position(("Role", operands)));
        assert!(position(("Role", operands)) < position(("RoleBinding", operands)));
        assert!(position(("Role", DRIVER_NAMESPACE)) < position(("RoleBinding", DRIVER_NAMESPACE)));
        for kind in ["ServiceAccount", "Deployment"] {
            position((kind, DRIVER_NAMESPACE));
            assert!(
                !objects.contains(&(kind.to_owned(), operands.to_owned())),
                "{kind}"
            );
        }
        let count = |kind: &str| objects.iter().filter(|(k, _)| k == kind).count();
        assert_eq!(
            (count("Namespace"), count("Role"), count("RoleBinding")),
            (2, 2, 2)
        );

        // Beside their operator: as before, one of each.
        let entry = crate::registry::find("gcp-pd").unwrap();
        let def = drivers::by_name("gcp-pd").unwrap();
        let objects = kinds_in(&starter_objects(&[(entry, def)], &starter_inputs()));
        let kinds: Vec<&str> = objects
            .iter()
            .filter(|(kind, _)| kind != "ClusterRole")
            .map(|(kind, _)| kind.as_str())
            .collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "ConfigMap",
                "Service",
                "Deployment"
            ]
        );
    }

    /// An OpenShift cluster on `platform` (Infrastructure/cluster), Storage Managed.
    fn openshift_on(platform: &str) -> Observed {
        Observed {
            apis: crate::observe::Apis {
                infrastructure: true,
                ..Default::default()
            },
            infrastructure: Some(
                serde_json::from_value(json!({"metadata": {"name": "cluster"},
                    "spec": {"cloudConfig": {"name": "cloud-provider-config", "key": "config"}},
                    "status": {"infrastructureName": "c", "controlPlaneTopology": "HighlyAvailable",
                               "platformStatus": {"type": platform}}}))
                .unwrap(),
            ),
            ..observed()
        }
    }

    #[test]
    fn with_a_hosted_control_plane_the_driver_operators_go_to_the_management_cluster() {
        let control_plane = csi_kit::HostedControlPlane {
            namespace: "clusters-demo".into(),
            ..Default::default()
        };
        let mut aws = openshift_on("AWS");
        aws.hosted = Some(control_plane.clone());
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        let keys: Vec<(&str, String)> = planned
            .management_objects
            .iter()
            .map(Desired::key)
            .collect();
        assert!(keys.contains(&(
            "Deployment",
            "clusters-demo/aws-ebs-csi-driver-operator".to_owned()
        )));
        assert!(
            keys.iter()
                .all(|(_, object)| object.starts_with("clusters-demo/")),
            "{keys:?}"
        );
        assert!(
            planned.objects
                .iter()
                .all(|d| !matches!(d, Desired::Deployment(o) if o.metadata.name.as_deref() == Some("aws-ebs-csi-driver-operator"))),
            "the driver operator is not in the guest"
        );
        assert_eq!(planned.create_cluster_csi_drivers.len(), 1);
        let conditions = &planned.storage_status.unwrap().conditions;
        assert!(conditions.iter().all(|c| c.type_ != HOSTED_SKIPPED));

        // GCP PD does not run hosted: not started, said, and nothing Degraded for it.
        let mut gcp = openshift_on("GCP");
        gcp.hosted = Some(control_plane);
        let planned = plan(&gcp, &settings(), &BTreeMap::new(), &now());
        assert!(planned.management_objects.is_empty());
        assert!(planned.create_cluster_csi_drivers.is_empty());
        let conditions = &planned.storage_status.unwrap().conditions;
        let skipped = conditions
            .iter()
            .find(|c| c.type_ == HOSTED_SKIPPED)
            .unwrap();
        assert!(skipped.message.as_deref().unwrap().contains("gcp-pd"));
        assert!(
            conditions
                .iter()
                .filter(|c| c.type_.ends_with("Degraded"))
                .all(|c| c.status == ConditionStatus::False),
            "{conditions:?}"
        );
    }

    /// With a hosted control plane, the conditions are OpenShift's HyperShift mode's: the
    /// management-side static controller's and the DeploymentVersionController's, not the
    /// monitoring controller's or the vSphere problem detector's; a failed management-side
    /// write is the former's; the controller's release is annotated once it has rolled out.
    #[test]
    fn with_a_hosted_control_plane_the_conditions_are_openshifts_hypershift_ones() {
        let mut aws = openshift_on("AWS");
        aws.hosted = Some(csi_kit::HostedControlPlane {
            namespace: "clusters-demo".into(),
            ..Default::default()
        });
        let types = |planned: &Plan| -> Vec<(String, String)> {
            planned
                .storage_status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .map(|c| (c.type_.clone(), c.status.to_string()))
                .collect()
        };
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        let conditions = types(&planned);
        for (type_, status) in [
            (
                "AWSEBSCSIDriverOperatorMgmtStaticControllerDegraded",
                "False",
            ),
            ("DeploymentVersionControllerDegraded", "False"),
        ] {
            assert!(
                conditions.contains(&(type_.to_owned(), status.to_owned())),
                "{type_} {status}: {conditions:?}"
            );
        }
        for absent in [
            "StorageOperatorMonitoringControllerDegraded",
            "VSphereProblemDetectorStarterDegraded",
        ] {
            assert!(
                conditions.iter().all(|(t, _)| t != absent),
                "{absent}: {conditions:?}"
            );
        }
        assert!(planned.version_annotations.is_empty());

        // A management-side write that failed.
        let failure = WriteFailure {
            kind: "Role".into(),
            object: "clusters-demo/aws-ebs-csi-driver-operator-role".into(),
            message: "applying Role clusters-demo/aws-ebs-csi-driver-operator-role in the management cluster: forbidden".into(),
            not_ours: false,
        };
        let planned = plan_with_failures(&aws, &settings(), &BTreeMap::new(), &[failure], &now());
        let conditions = types(&planned);
        assert!(conditions.contains(&(
            "AWSEBSCSIDriverOperatorMgmtStaticControllerDegraded".into(),
            "True".into()
        )));
        assert!(conditions.contains(&(
            "AWSEBSCSIDriverOperatorStaticControllerDegraded".into(),
            "False".into()
        )));

        // The driver's controller, rolled out for this operator's release.
        aws.driver_controllers = vec![crate::deployment_version::DriverController {
            name: "aws-ebs-csi-driver-controller".into(),
            desired_version: Some(settings().version),
            version: None,
            rolled_out: true,
        }];
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        assert_eq!(
            planned.version_annotations,
            [(
                "clusters-demo".to_owned(),
                "aws-ebs-csi-driver-controller".to_owned(),
                settings().version
            )]
        );
    }

    /// An unreachable management cluster is Degraded in the guest's Storage, with why, and
    /// asked again soon.
    #[test]
    fn an_unreachable_management_cluster_is_degraded_and_asked_again() {
        let mut aws = openshift_on("AWS");
        aws.hosted = Some(csi_kit::HostedControlPlane {
            namespace: "clusters-demo".into(),
            ..Default::default()
        });
        aws.management_unreachable = Some("the management cluster does not answer: refused".into());
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        assert_eq!(planned.requeue, Some(UNREACHABLE_RETRY));
        let conditions = planned.storage_status.unwrap().conditions;
        let degraded = conditions
            .iter()
            .find(|c| c.type_ == "CSIDriverStarterDegraded")
            .unwrap();
        assert_eq!(degraded.status, ConditionStatus::True);
        assert!(
            degraded
                .message
                .as_deref()
                .unwrap()
                .contains("the management cluster does not answer: refused")
        );
        aws.management_unreachable = None;
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        assert_eq!(planned.requeue, None);
    }

    /// With a hosted control plane, the driver operators' config carries the
    /// HostedControlPlane's TLS profile (as OpenShift's HyperShift Deployment controller
    /// writes it), not the guest's APIServer's; an invalid one is Degraded naming its field.
    #[test]
    fn with_a_hosted_control_plane_the_operator_config_has_its_tls_profile() {
        let profile_of_the_guest = profile;
        let profile = |value: serde_json::Value| {
            csi_kit::HostedControlPlane {
                namespace: "clusters-demo".into(),
                ..Default::default()
            }
            .with_object(&json!({
                "metadata": {"name": "demo", "namespace": "clusters-demo"},
                "spec": {"configuration": {"apiServer": {"tlsSecurityProfile": value}}},
            }))
        };
        let config = |planned: &Plan| {
            planned.management_objects.iter().find_map(|d| match d {
                Desired::ConfigMap(c) => Some(c.clone()),
                _ => None,
            })
        };
        let mut aws = openshift_on("AWS");
        aws.api_server = profile_of_the_guest(json!({"type": "Old", "old": {}}));
        aws.hosted = Some(profile(json!({"type": "Modern", "modern": {}})));
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        let modern = config(&planned).expect("the operator config, in the control plane");
        assert_eq!(modern.metadata.namespace.as_deref(), Some("clusters-demo"));
        let yaml = &modern.data.unwrap()[starter::OPERATOR_CONFIG_KEY];
        assert!(yaml.contains("minTLSVersion: VersionTLS13"), "{yaml}");

        // No profile on the control plane: Intermediate, whatever the guest says.
        aws.hosted = Some(csi_kit::HostedControlPlane {
            namespace: "clusters-demo".into(),
            ..Default::default()
        });
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        let yaml = &config(&planned).unwrap().data.unwrap()[starter::OPERATOR_CONFIG_KEY];
        assert!(yaml.contains("minTLSVersion: VersionTLS12"), "{yaml}");

        // An invalid one: the ConfigMap is left as it is, and Degraded says where and why.
        aws.hosted = Some(profile(json!({"type": "Custom",
            "custom": {"ciphers": ["NOT-A-CIPHER"], "minTLSVersion": "VersionTLS12"}})));
        let planned = plan(&aws, &settings(), &BTreeMap::new(), &now());
        assert!(config(&planned).is_none());
        let conditions = planned.storage_status.unwrap().conditions;
        let degraded = conditions
            .iter()
            .find(|c| c.type_ == "AWSEBSCSIDriverOperatorDeploymentDegraded")
            .unwrap();
        assert_eq!(degraded.status, ConditionStatus::True);
        let message = degraded.message.as_deref().unwrap();
        assert!(
            message.contains("ConfigMap clusters-demo/aws-ebs-csi-driver-operator-config")
                && message.contains(
                    "HostedControlPlane clusters-demo/demo spec.configuration.apiServer.tlsSecurityProfile.custom.ciphers"
                ),
            "{message}"
        );
    }

    fn with_detector_image() -> Settings {
        let mut settings = settings();
        settings.env.insert(
            vsphere_detector::IMAGE_ENV.into(),
            "quay.io/openshift/origin-vsphere-problem-detector:4.22".into(),
        );
        settings
    }

    /// The detector's PrometheusRule goes with the vSphere CSI driver: its ClusterCSIDriver
    /// `Removed` deletes a rule of ours (never someone else's), as OpenShift's controller does.
    #[test]
    fn the_detectors_rule_goes_when_the_vsphere_driver_is_removed() {
        use crate::monitoring::{Kind, Seen};
        let rule = |manager: &str| {
            Seen::Cached(Some(
                serde_json::from_value(json!({"apiVersion": "monitoring.coreos.com/v1",
                    "kind": "PrometheusRule", "metadata": {"name": vsphere_detector::MONITORING_NAME,
                    "namespace": OPERATOR_NAMESPACE, "managedFields": [{"manager": manager,
                    "operation": "Apply", "apiVersion": "monitoring.coreos.com/v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]}}))
                .unwrap(),
            ))
        };
        let mut observed = openshift_on("VSphere");
        observed.cluster_csi_drivers = vec![
            serde_json::from_value(json!({"metadata": {"name": "csi.vsphere.vmware.com"},
                "spec": {"managementState": "Removed"}}))
            .unwrap(),
        ];
        observed.vsphere_detector.monitoring = [
            (Kind::ServiceMonitor, Seen::Cached(None)),
            (
                Kind::PrometheusRule,
                rule("storage-operator/CSIDriverStarter"),
            ),
        ]
        .into();
        let plan = plan(&observed, &with_detector_image(), &BTreeMap::new(), &now());
        let deleted: Vec<(Kind, Option<String>)> = plan
            .delete_monitoring
            .iter()
            .map(|(kind, meta)| (*kind, meta.name.clone()))
            .collect();
        assert_eq!(
            deleted,
            [(
                Kind::PrometheusRule,
                Some(vsphere_detector::MONITORING_NAME.to_owned())
            )]
        );
        assert!(plan.objects.iter().any(|o| matches!(o,
            Desired::Monitoring(Kind::ServiceMonitor, m) if m.metadata.name.as_deref() == Some(vsphere_detector::MONITORING_NAME))));
        // One nobody wrote a field of (created with its name only) is not deleted.
        observed.vsphere_detector.monitoring.insert(
            Kind::PrometheusRule,
            Seen::Cached(Some(
                serde_json::from_value(json!({"apiVersion": "monitoring.coreos.com/v1",
                    "kind": "PrometheusRule", "metadata": {"name": vsphere_detector::MONITORING_NAME,
                    "namespace": OPERATOR_NAMESPACE}}))
                .unwrap(),
            )),
        );
        assert!(
            plan_fn_with(&observed, &with_detector_image())
                .delete_monitoring
                .is_empty()
        );
        // Someone else's rule stays, and is reported.
        observed
            .vsphere_detector
            .monitoring
            .insert(Kind::PrometheusRule, rule("helm"));
        let plan = plan_fn_with(&observed, &with_detector_image());
        assert!(plan.delete_monitoring.is_empty());
        let degraded = plan
            .storage_status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "VSphereProblemDetectorMonitoringControllerDegraded")
            .unwrap();
        assert_eq!(degraded.status, ConditionStatus::True);
        assert!(
            degraded
                .message
                .unwrap_or_default()
                .contains("made by someone else"),
        );
    }

    fn plan_fn_with(observed: &Observed, settings: &Settings) -> Plan {
        plan(observed, settings, &BTreeMap::new(), &now())
    }

    /// The detector's configuration carries the cluster's TLS profile (APIServer/cluster), as
    /// OpenShift's starter writes it; an invalid Custom profile leaves it as it is and the
    /// starter's Degraded names the field.
    #[test]
    fn the_detectors_config_carries_the_tls_profile() {
        let config_of = |plan: &Plan| {
            plan.objects.iter().find_map(|o| match o {
                Desired::ConfigMap(c)
                    if c.metadata.name.as_deref() == Some(vsphere_detector::OPERATOR_CONFIG) =>
                {
                    Some(c.data.clone().unwrap_or_default()["config.yaml"].clone())
                }
                _ => None,
            })
        };
        let mut observed = openshift_on("VSphere");
        let intermediate = config_of(&plan(
            &observed,
            &with_detector_image(),
            &BTreeMap::new(),
            &now(),
        ))
        .unwrap();
        assert!(
            intermediate.contains("minTLSVersion: VersionTLS12"),
            "{intermediate}"
        );
        observed.api_server = Some(
            serde_json::from_value(json!({"metadata": {"name": "cluster"},
                "spec": {"tlsSecurityProfile": {"type": "Modern", "modern": {}}}}))
            .unwrap(),
        );
        let modern = config_of(&plan(
            &observed,
            &with_detector_image(),
            &BTreeMap::new(),
            &now(),
        ))
        .unwrap();
        assert!(modern.contains("minTLSVersion: VersionTLS13"), "{modern}");

        observed.api_server = Some(
            serde_json::from_value(json!({"metadata": {"name": "cluster"},
                "spec": {"tlsSecurityProfile": {"type": "Custom",
                    "custom": {"ciphers": ["NOT-A-CIPHER"], "minTLSVersion": "VersionTLS12"}}}}))
            .unwrap(),
        );
        let invalid = plan(&observed, &with_detector_image(), &BTreeMap::new(), &now());
        assert_eq!(config_of(&invalid), None);
        assert!(detector_deployment(&invalid).is_some(), "the rest goes on");
        let starter = invalid
            .storage_status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "VSphereProblemDetectorStarterDegraded")
            .unwrap();
        assert_eq!(starter.status, ConditionStatus::True);
        let message = starter.message.unwrap_or_default();
        assert!(
            message.contains("spec.tlsSecurityProfile.custom.ciphers")
                && message.contains("vsphere-problem-detector-operator-config"),
            "{message}"
        );
    }

    fn detector_deployment(plan: &Plan) -> Option<&k8s_openapi::api::apps::v1::Deployment> {
        plan.objects.iter().find_map(|o| match o {
            Desired::Deployment(d)
                if d.metadata.name.as_deref() == Some(vsphere_detector::NAME) =>
            {
                Some(d)
            }
            _ => None,
        })
    }

    fn detector_conditions(plan: &Plan) -> Vec<(String, ConditionStatus, String)> {
        plan.storage_status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .filter(|c| c.type_.starts_with("VSphereProblemDetector"))
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.message.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The vSphere problem detector runs on vSphere under OpenShift with its image given;
    /// elsewhere nothing of it is planned and no condition of it is written (so none is left
    /// behind either); on vSphere without the image or without OpenShift, a condition says
    /// why it is not started.
    #[test]
    fn the_vsphere_problem_detector_runs_on_vsphere_only() {
        let vsphere = plan(
            &openshift_on("VSphere"),
            &with_detector_image(),
            &BTreeMap::new(),
            &now(),
        );
        let deployment = detector_deployment(&vsphere).expect("the detector's Deployment");
        assert_eq!(
            deployment
                .spec
                .as_ref()
                .unwrap()
                .template
                .spec
                .as_ref()
                .unwrap()
                .containers[0]
                .image
                .as_deref(),
            Some("quay.io/openshift/origin-vsphere-problem-detector:4.22")
        );
        let kinds: Vec<(&str, String)> = vsphere
            .objects
            .iter()
            .map(Desired::key)
            .filter(|(_, object)| {
                object.contains("vsphere-problem-detector") || object.ends_with("trusted-ca-bundle")
            })
            .collect();
        assert_eq!(kinds.len(), 9, "{kinds:?}");
        let types: Vec<String> = detector_conditions(&vsphere)
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            types,
            [
                "VSphereProblemDetectorStarterDegraded",
                "VSphereProblemDetectorStarterStaticControllerDegraded",
                "VSphereProblemDetectorDeploymentControllerProgressing",
                "VSphereProblemDetectorDeploymentControllerDegraded",
                "VSphereProblemDetectorMonitoringControllerAvailable",
                "VSphereProblemDetectorMonitoringControllerDegraded",
            ]
        );

        let gcp = plan(
            &openshift_on("GCP"),
            &with_detector_image(),
            &BTreeMap::new(),
            &now(),
        );
        assert!(detector_deployment(&gcp).is_none());
        // No object of the detector's (the driver operator's config ConfigMap is there).
        assert!(gcp.objects.iter().all(|o| {
            o.metadata().namespace.as_deref() != Some(OPERATOR_NAMESPACE)
                || !matches!(o, Desired::ConfigMap(_) | Desired::Service(_))
        }));
        // Elsewhere only the starter's Degraded, False, as OpenShift's starter reports it on
        // every platform.
        assert_eq!(
            detector_conditions(&gcp),
            [(
                "VSphereProblemDetectorStarterDegraded".to_owned(),
                ConditionStatus::False,
                String::new()
            )]
        );

        let no_image = plan(
            &openshift_on("VSphere"),
            &settings(),
            &BTreeMap::new(),
            &now(),
        );
        assert!(detector_deployment(&no_image).is_none());
        let conditions = detector_conditions(&no_image);
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].1, ConditionStatus::False);
        assert!(
            conditions[0].2.contains(vsphere_detector::IMAGE_ENV),
            "{conditions:?}"
        );

        let mut kubernetes = observed();
        kubernetes.nodes = vec![
            serde_json::from_value(json!({"metadata": {"name": "n"},
            "spec": {"providerID": "vsphere://4237e5b4-0000-0000-0000-000000000000"}}))
            .unwrap(),
        ];
        let kubernetes = plan(
            &kubernetes,
            &with_detector_image(),
            &BTreeMap::new(),
            &now(),
        );
        assert!(detector_deployment(&kubernetes).is_none());
        let conditions = detector_conditions(&kubernetes);
        assert!(conditions[0].2.contains("OpenShift only"), "{conditions:?}");
    }

    /// A changed cloud config or credentials Secret changes the detector's pod template.
    #[test]
    fn a_changed_input_hash_rolls_the_detector() {
        let mut observed = openshift_on("VSphere");
        observed.vsphere_detector.hashes.credentials = Some("one".into());
        let before = plan(&observed, &with_detector_image(), &BTreeMap::new(), &now());
        observed.vsphere_detector.hashes.credentials = Some("two".into());
        let after = plan(&observed, &with_detector_image(), &BTreeMap::new(), &now());
        let template = |plan: &Plan| {
            detector_deployment(plan)
                .unwrap()
                .spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .clone()
        };
        assert_ne!(template(&before), template(&after));
        observed.vsphere_detector.hashes.cloud_config = Some("c".into());
        let cloud = plan(&observed, &with_detector_image(), &BTreeMap::new(), &now());
        assert_ne!(template(&after), template(&cloud));
        // An Infrastructure naming another cloud config: that one is not watched, so no hash
        // (rather than the hash of a ConfigMap the detector does not read).
        observed
            .infrastructure
            .as_mut()
            .unwrap()
            .spec
            .cloud_config
            .as_mut()
            .unwrap()
            .name = "my-cloud-config".into();
        let other = plan(&observed, &with_detector_image(), &BTreeMap::new(), &now());
        assert_eq!(template(&after), template(&other));
    }

    /// A failed write of the detector shows in its part, in the same pass; an object of its
    /// names someone else made is not written and is reported; one OpenShift's operator made
    /// is written (taken over).
    #[test]
    fn the_detectors_failures_and_foreign_objects_are_degraded() {
        let observed = openshift_on("VSphere");
        let failed = WriteFailure {
            kind: "Deployment".into(),
            object: format!("{OPERATOR_NAMESPACE}/{}", vsphere_detector::NAME),
            message: "applying Deployment: refused (403)".into(),
            not_ours: false,
        };
        let plan_failed = plan_with_failures(
            &observed,
            &with_detector_image(),
            &BTreeMap::new(),
            std::slice::from_ref(&failed),
            &now(),
        );
        let conditions = detector_conditions(&plan_failed);
        let degraded = conditions
            .iter()
            .find(|c| c.0 == "VSphereProblemDetectorDeploymentControllerDegraded")
            .unwrap();
        assert_eq!(
            (degraded.1.clone(), degraded.2.as_str()),
            (ConditionStatus::True, failed.message.as_str())
        );
        let starter = plan_failed
            .storage_status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.type_ == "CSIDriverStarterDegraded")
            .unwrap();
        assert_eq!(
            starter.status,
            ConditionStatus::False,
            "not the CSI driver starter's"
        );

        let service_by = |manager: &str| -> k8s_openapi::api::core::v1::Service {
            serde_json::from_value(json!({"metadata": {"name": vsphere_detector::SERVICE,
                "namespace": OPERATOR_NAMESPACE,
                "managedFields": [{"manager": manager, "operation": "Update", "apiVersion": "v1"}]}}))
            .unwrap()
        };
        let has_service = |plan: &Plan| {
            plan.objects.iter().any(|o| {
                matches!(o, Desired::Service(s)
                    if s.metadata.name.as_deref() == Some(vsphere_detector::SERVICE))
            })
        };
        let mut foreign = observed.clone();
        foreign.vsphere_detector.services = vec![service_by("kubectl-create")];
        let kept = plan(&foreign, &with_detector_image(), &BTreeMap::new(), &now());
        assert!(!has_service(&kept), "someone else's Service is left alone");
        let conditions = detector_conditions(&kept);
        let static_degraded = conditions
            .iter()
            .find(|c| c.0 == "VSphereProblemDetectorStarterStaticControllerDegraded")
            .unwrap();
        assert_eq!(static_degraded.1, ConditionStatus::True);
        assert!(
            static_degraded.2.contains("kubectl-create"),
            "{static_degraded:?}"
        );
        assert!(detector_deployment(&kept).is_some(), "the rest is applied");

        let mut former = observed;
        former.vsphere_detector.services = vec![service_by(crate::names::FORMER_OPERATOR)];
        let taken = plan(&former, &with_detector_image(), &BTreeMap::new(), &now());
        assert!(has_service(&taken), "OpenShift's Service is taken over");
    }

    #[test]
    fn nothing_starts_unless_managed() {
        let mut unmanaged = observed();
        unmanaged
            .storage
            .as_mut()
            .unwrap()
            .spec
            .operator
            .management_state = api::operator_v1::ManagementState::Unmanaged;
        assert!(candidates(&unmanaged, &settings()).is_empty());
        let plan = plan(&unmanaged, &settings(), &BTreeMap::new(), &now());
        assert!(plan.objects.is_empty());
        assert!(
            plan.storage_status.is_none(),
            "conditions frozen while unmanaged"
        );
    }
}
