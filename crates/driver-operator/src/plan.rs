//! The pure half of a driver operator's reconcile: from what was observed, the operands to
//! apply (each with the logical controller that owns it), the objects to delete, the finalizers
//! and each controller's part of the ClusterCSIDriver status. No I/O: the unit tests call it
//! directly and `execute` only carries it out.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::operator_v1::{ConditionStatus, GenerationStatus, OperatorCondition};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::{Resource, ResourceExt};
use opkit::conditions::condition;
use opkit::management::{self, MANAGEMENT_STATE_DEGRADED, Mode};
use opkit::ownership::{self, NotOurs, Owner};
use opkit::status::StatusPart;
use serde_json::Value;

use crate::controllers::{ControllerStatus, Group, MANAGEMENT_STATE_CONTROLLER};
use crate::observe::Observed;
use crate::removal;
use csi_kit::def::DriverDef;
use csi_kit::inputs::OptionalKind;
use csi_kit::inputs::{Inputs, ResolvedImages, Topology, from_objects};
use csi_kit::render::{Operand, render_operands};
use csi_kit::{hash, names, replace, status, storage};

/// Reason of a Degraded condition caused by a failed sync.
pub const REASON_SYNC_ERROR: &str = "SyncError";

/// One operand to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Its controller.
    pub group: Group,
    /// The desired object.
    pub operand: Operand,
    /// Delete the existing object first (a CSIDriver's spec is immutable).
    pub recreate: bool,
    /// With a hosted control plane: whether it goes to the control-plane namespace of the
    /// management cluster (see `csi_kit::hosted`) rather than the guest.
    pub management: bool,
}

/// A kind the operator may delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteKind {
    /// A StorageClass.
    StorageClass,
    /// The controller Deployment.
    Deployment,
    /// The node DaemonSet.
    DaemonSet,
    /// The CSIDriver.
    CSIDriver,
    /// A copied ConfigMap whose source is gone.
    ConfigMap,
    /// An operand ServiceAccount this version no longer renders.
    ServiceAccount,
    /// An operand Role this version no longer renders.
    Role,
    /// An operand RoleBinding this version no longer renders.
    RoleBinding,
    /// An operand ClusterRole this version no longer renders.
    ClusterRole,
    /// An operand ClusterRoleBinding this version no longer renders.
    ClusterRoleBinding,
    /// An operand Service this version no longer renders.
    Service,
    /// An operand PodDisruptionBudget this version no longer renders.
    PodDisruptionBudget,
    /// An operand NetworkPolicy this version no longer renders.
    NetworkPolicy,
}

/// One object to delete.
#[derive(Clone, Debug, PartialEq)]
pub struct Deletion {
    /// Its controller.
    pub group: Group,
    /// Its kind.
    pub kind: DeleteKind,
    /// Its name (namespaced kinds are in the driver namespace, or the control-plane namespace
    /// with `management`).
    pub name: String,
    /// With a hosted control plane: whether it is in the management cluster.
    pub management: bool,
    /// The observed object's uid and resourceVersion: the delete's preconditions, so that it
    /// removes only the object the decision read ([`opkit::apply::delete_observed`]).
    pub observed: ObjectMeta,
}

impl Deletion {
    /// The deletion of the observed object `meta`, decided by `group`.
    fn of(group: Group, kind: DeleteKind, meta: &ObjectMeta, management: bool) -> Self {
        Self {
            group,
            kind,
            name: meta.name.clone().unwrap_or_default(),
            management,
            observed: ObjectMeta {
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                ..ObjectMeta::default()
            },
        }
    }
}

/// Everything one reconcile does.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Objects to apply, in order.
    pub steps: Vec<Step>,
    /// Objects to delete.
    pub deletions: Vec<Deletion>,
    /// The ClusterCSIDriver's new finalizer list, when it must change.
    pub finalizers: Option<Vec<String>>,
    /// Status parts to write, one per controller.
    pub status: Vec<ControllerStatus>,
    /// Run again after this long (the 15-minute progressing limit).
    pub requeue: Option<Duration>,
    /// Why nothing is done, for the log (no ClusterCSIDriver yet).
    pub waiting: Option<String>,
    /// The JSON merge patch of the ClusterCSIDriver's `spec.observedConfig` (the config
    /// observer's `targetcsiconfig`), when it must change.
    pub observed_config: Option<Value>,
}

/// The finalizers a removable driver puts on its ClusterCSIDriver (as library-go: one per
/// workload controller, named after it).
pub fn finalizers(def: &DriverDef) -> [String; 2] {
    // A finalizer must be a qualified name (`<domain>/<name>`); library-go's bare controller
    // names are rejected by current API servers.
    [
        format!(
            "{FINALIZER_DOMAIN}/{}",
            status::controller_service_controller(&def.condition_prefix)
        ),
        format!(
            "{FINALIZER_DOMAIN}/{}",
            status::node_service_controller(&def.condition_prefix)
        ),
    ]
}

/// The domain of this operator's finalizers.
pub const FINALIZER_DOMAIN: &str = "csi.storage.openshift.io";

/// The inputs of the builders, from the caches. An error says what is missing.
pub fn inputs(
    def: &DriverDef,
    env: &BTreeMap<String, String>,
    observed: &Observed,
) -> Result<Inputs, String> {
    let topology = if observed.apis.infrastructure {
        let infrastructure = observed.cluster.infrastructure.as_ref().ok_or_else(|| {
            "Infrastructure/cluster does not exist yet: the cluster topology and ID are unknown"
                .to_owned()
        })?;
        Topology::from_openshift(&infrastructure.control_plane_topology())
    } else {
        from_objects::kubernetes_topology(&observed.cluster.nodes)
    };
    let mut inputs = Inputs::new(def, topology, env);
    if let Some(driver) = &observed.cluster_csi_driver {
        inputs.spec = driver.spec.clone();
        inputs.tls = crate::config_observer::serving_tls(
            observed,
            driver.spec.operator.observed_config.as_ref(),
        );
    }
    if let Some(status) = observed
        .cluster
        .infrastructure
        .as_ref()
        .and_then(|i| i.status.as_ref())
    {
        inputs.cluster_id = status.infrastructure_name.clone().filter(|n| !n.is_empty());
        inputs.platform_status = status.platform_status.clone();
    }
    inputs.platform_spec = observed
        .cluster
        .infrastructure
        .as_ref()
        .and_then(|i| i.spec.platform_spec.clone());
    if let Some(status) = observed
        .cluster
        .proxy
        .as_ref()
        .and_then(|p| p.status.as_ref())
    {
        inputs.proxy = status.clone();
    }
    let ca_name = names::trusted_ca_bundle(def);
    if let Some(ca) = observed
        .operands
        .config_maps
        .iter()
        .find(|c| c.name_any() == ca_name)
    {
        inputs.trusted_ca_bundle = from_objects::has_ca_bundle(ca);
        if inputs.trusted_ca_bundle {
            inputs
                .config_map_hashes
                .insert(ca_name.clone(), hash::config_map_hash(ca));
        }
    }
    for source in &observed.cluster.copied_config_map_sources {
        let copied = def.copied_config_maps.iter().find(|c| {
            c.name == source.name_any()
                && source.metadata.namespace.as_deref() == Some(&c.namespace)
        });
        if let Some(copied) = copied {
            let target = copied.target().to_owned();
            inputs
                .config_map_hashes
                .insert(target.clone(), hash::config_map_hash(source));
            inputs
                .copied_config_maps
                .insert(target, source.data.clone().unwrap_or_default());
        }
    }
    for source in &observed.cluster.source_config_maps {
        let id = format!(
            "{}/{}",
            source.namespace().unwrap_or_default(),
            source.name_any()
        );
        inputs
            .source_config_maps
            .insert(id, source.data.clone().unwrap_or_default());
    }
    // The derived ConfigMaps and Secrets applied last: their hashes stand until a new one is
    // generated.
    for secret in &observed.cluster.derived_secrets {
        inputs
            .secret_hashes
            .insert(secret.name_any(), hash::secret_hash(secret));
    }
    for derived in def.config_maps.iter().filter(|d| !d.secret) {
        if let Some(applied) = observed
            .operands
            .config_maps
            .iter()
            .find(|c| c.name_any() == derived.name)
        {
            inputs
                .config_map_hashes
                .insert(derived.name.clone(), hash::config_map_hash(applied));
        }
    }
    if let Some(Ok(facts)) = &observed.probe {
        inputs.probe_facts = facts.clone();
    }
    inputs.task_facts = observed.task_facts.clone();
    inputs.host_fips = observed.host_fips;
    inputs.hosted = observed.hosted.clone();
    for secret in observed
        .cluster
        .credentials_secret
        .iter()
        .chain(&observed.cluster.hashed_secrets)
    {
        inputs
            .secret_hashes
            .insert(secret.name_any(), hash::secret_hash(secret));
    }
    if let Some(secret) = &observed.cluster.credentials_secret {
        inputs.credentials = csi_kit::inputs::SecretData::of(secret);
    }
    inputs.images = ResolvedImages::from_env(&def.images, env);
    let crd = |kind| observed.operands.optional.get(&kind).is_some_and(|o| o.crd);
    inputs.crds.service_monitor = crd(OptionalKind::ServiceMonitor);
    inputs.crds.volume_snapshot_class = crd(OptionalKind::VolumeSnapshotClass);
    inputs.crds.credentials_request = crd(OptionalKind::CredentialsRequest);
    inputs.storage_classes = observed
        .operands
        .storage_classes
        .iter()
        .map(|class| from_objects::existing_storage_class(class))
        .collect();
    inputs.csi_driver_ephemeral_profile = observed
        .operands
        .csi_driver
        .as_ref()
        .and_then(from_objects::ephemeral_profile);
    Ok(inputs)
}

/// Whether the object is one of this driver's operands that we may delete or replace: our
/// operand label names the driver, and one of our controllers applied it or the operator ours
/// replaces wrote it (a copy carries the label, never the field manager:
/// [`opkit::ownership::may_delete`]).
fn is_ours(meta: &ObjectMeta, def: &DriverDef) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(names::OPERAND_LABEL))
        .is_some_and(|driver| driver == &def.short_name)
        && ownership::may_delete(meta, &def.adopt_from)
}

/// The CSIDriver of the driver's name when someone else made it ([`ownership::owner`]): the
/// driver is then installed by another installer, and this operator installs nothing of it.
fn foreign_csi_driver(def: &DriverDef, observed: &Observed) -> Option<NotOurs> {
    let live = observed.operands.csi_driver.as_ref()?;
    (ownership::owner(live.meta(), &def.adopt_from) == Owner::Someone)
        .then(|| NotOurs::of("CSIDriver", live.meta()))
}

fn generation(
    resource: &str,
    def: &DriverDef,
    name: &str,
    generation: Option<i64>,
) -> GenerationStatus {
    GenerationStatus {
        group: "apps".into(),
        resource: resource.into(),
        namespace: def.namespace.clone(),
        name: name.into(),
        last_generation: generation.unwrap_or_default(),
        hash: String::new(),
    }
}

/// Reason of `<controller>Degraded` when an object of the operand's name is not ours and is
/// kept as it is ([`opkit::ownership`], [`replace`]).
pub const REASON_OBJECT_KEPT: &str = ownership::REASON_NOT_OURS;

fn degraded(def: &DriverDef, group: Group, error: Option<&str>) -> OperatorCondition {
    match error {
        None => condition(
            group.degraded_type(def),
            ConditionStatus::False,
            status::REASON_AS_EXPECTED,
            "",
        ),
        Some(message) => condition(
            group.degraded_type(def),
            ConditionStatus::True,
            REASON_SYNC_ERROR,
            message,
        ),
    }
}

/// The status of a driver's own controller ([`super::TaskConfig`]) named `name`:
/// `<name>Degraded`, True with `error` (reason `SyncError`) or False.
pub fn task_status(name: &str, error: Option<&str>) -> ControllerStatus {
    let type_ = format!("{name}Degraded");
    let condition = match error {
        None => condition(
            type_,
            ConditionStatus::False,
            status::REASON_AS_EXPECTED,
            "",
        ),
        Some(message) => condition(type_, ConditionStatus::True, REASON_SYNC_ERROR, message),
    };
    ControllerStatus {
        group: None,
        controller: name.to_owned(),
        part: StatusPart {
            conditions: vec![condition],
            ..StatusPart::default()
        },
    }
}

/// Marks `group`'s Degraded condition True with `message` in `parts` (for failures found while
/// executing the plan), with `reason` (`SyncError`, or `ObjectNotOurs` when every failure was
/// an object someone else made).
pub fn set_degraded(
    parts: &mut [ControllerStatus],
    def: &DriverDef,
    group: Group,
    reason: &str,
    message: &str,
) {
    let type_ = group.degraded_type(def);
    for part in parts.iter_mut().filter(|p| p.group == Some(group)) {
        for c in part.part.conditions.iter_mut().filter(|c| c.type_ == type_) {
            *c = condition(type_.clone(), ConditionStatus::True, reason, message);
        }
    }
}

/// When a progressing workload reaches the 15-minute limit, given its last written condition.
fn progressing_deadline(
    now: &Time,
    conditions: &status::WorkloadConditions,
    previous: Option<&OperatorCondition>,
) -> Option<Duration> {
    if !conditions.is_progressing() {
        return None;
    }
    let since = previous
        .filter(|p| p.status == ConditionStatus::True)
        .and_then(|p| p.last_transition_time.as_ref())
        .map_or(now.0, |t| t.0);
    let deadline = since + status::PROGRESSING_TIMEOUT;
    let left = now.0.duration_until(deadline);
    Some(Duration::try_from(left).unwrap_or(Duration::ZERO) + Duration::from_secs(1))
}

fn min_requeue(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The config observer's part of the plan: its condition, and the observed config to write.
fn observe_config(
    plan: &mut Plan,
    driver: &api::operator_v1::ClusterCSIDriver,
    observed: &Observed,
) {
    use crate::config_observer::{CONFIG_OBSERVER, TARGET, merge_patch, observe};
    let current = driver.spec.operator.observed_config.as_ref();
    let (target, condition) = observe(observed, current);
    plan.status.push(ControllerStatus {
        group: None,
        controller: CONFIG_OBSERVER.to_owned(),
        part: StatusPart {
            conditions: vec![condition],
            ..StatusPart::default()
        },
    });
    let Some(target) = target else {
        return;
    };
    let wanted = serde_json::json!({ TARGET: target });
    let patch = merge_patch(current, &wanted);
    let changes = patch.as_object().is_none_or(|p| {
        p.iter()
            .any(|(key, value)| key == TARGET && value.as_object().is_none_or(|v| !v.is_empty()))
    });
    if changes {
        // Only our key: whatever else observedConfig holds is not ours to remove.
        plan.observed_config =
            Some(serde_json::json!({ TARGET: patch.get(TARGET).cloned().unwrap_or(Value::Null) }));
    }
}

/// The CredentialsRequest controllers' part (the controller's credentials and the node
/// plugin's): each request's step only when cloud-credential-operator will act on it, and its
/// conditions (only where the CredentialsRequest API exists).
fn credentials_request(
    plan: &mut Plan,
    def: &DriverDef,
    env: &BTreeMap<String, String>,
    observed: &Observed,
    inputs: &Inputs,
) {
    use crate::credentials;
    if !inputs.crds.credentials_request {
        return;
    }
    let requests = [
        (def.credentials.as_ref(), credentials::controller(def)),
        (
            def.node_credentials.as_ref(),
            credentials::node_controller(def),
        ),
    ];
    for (creds, controller) in requests {
        let Some(request) = creds.and_then(|c| c.credentials_request.as_ref()) else {
            continue;
        };
        let applied = credentials::should_apply(
            observed.cluster.credentials_mode.as_deref(),
            env,
            request
                .annotations
                .get(csi_kit::credentials::ROLE_ARN_VARS_ANNOTATION)
                .map(String::as_str),
        );
        if !applied {
            plan.steps.retain(|step| {
                !matches!(&step.operand, Operand::Dynamic(value)
                    if value["kind"] == "CredentialsRequest"
                        && value["metadata"]["name"] == request.name.as_str())
            });
        }
        let cached = observed
            .operands
            .optional
            .get(&OptionalKind::CredentialsRequest)
            .and_then(|o| o.objects.as_ref())
            .and_then(|objects| {
                objects
                    .iter()
                    .find(|o| o.metadata.name.as_deref() == Some(request.name.as_str()))
            })
            .map(|o| o.data.clone());
        let conditions = credentials::conditions(&controller, applied, cached.as_ref());
        plan.status.push(ControllerStatus {
            group: None,
            controller,
            part: StatusPart {
                conditions,
                ..StatusPart::default()
            },
        });
    }
}

/// The decisions for `observed` at `now`, one logical controller at a time: management state
/// (`manage`), config observer, inputs and preconditions, the operands (`operand_steps`,
/// `stale_operands`, credentials), then the status of each workload and of the classes.
pub fn plan(
    def: &DriverDef,
    env: &BTreeMap<String, String>,
    observed: &Observed,
    now: &Time,
) -> Plan {
    let Some(driver) = &observed.cluster_csi_driver else {
        return Plan {
            waiting: Some(format!(
                "ClusterCSIDriver {} does not exist; nothing to do until it does",
                def.name
            )),
            ..Plan::default()
        };
    };
    let mut plan = match manage(def, driver, observed) {
        Managed::Operands(plan) => plan,
        Managed::Done(plan) => return plan,
    };
    if let Some(foreign) = foreign_csi_driver(def, observed) {
        // Another installer's driver: nothing of ours is applied or deleted while it exists.
        plan.status.extend(blocked_status(def, &foreign));
        return plan;
    }

    let inputs = match inputs(def, env, observed) {
        Ok(inputs) => inputs,
        Err(message) => {
            plan.status.push(ControllerStatus {
                group: Some(Group::Static),
                controller: Group::Static.controller(def),
                part: StatusPart {
                    conditions: vec![degraded(def, Group::Static, Some(&message))],
                    ..StatusPart::default()
                },
            });
            return plan;
        }
    };
    let disabled = match &observed.probe {
        Some(Err(reason)) => Some(reason.clone()),
        _ => def.precondition.and_then(|check| check(&inputs).err()),
    };
    if let Some(reason) = disabled {
        plan.status.extend(disabled_status(def, reason.message()));
        return plan;
    }
    let storage_class_error = storage::validate_storage_class_state(&inputs).err();
    let derived_errors = csi_kit::derived::derived_config_map_errors(def, &inputs);

    // Static resources, CSIDriver, StorageClasses and optional kinds: what to apply.
    let (steps, kept) = operand_steps(def, &inputs, observed, storage_class_error.is_some());
    let kept_in = |group: Group| -> Option<String> {
        let messages: Vec<&str> = kept
            .iter()
            .filter(|(g, _)| *g == group)
            .map(|(_, m)| m.as_str())
            .collect();
        (!messages.is_empty()).then(|| messages.join("\n"))
    };
    plan.steps = steps;
    credentials_request(&mut plan, def, env, observed, &inputs);
    plan.deletions.extend(stale_operands(
        def,
        &inputs,
        observed,
        storage_class_error.is_none(),
    ));
    plan.deletions
        .extend(no_longer_rendered(def, &plan.steps, observed));

    // Workload status from the observed objects.
    let controller = controller_service_status(def, observed, driver, now);
    plan.requeue = min_requeue(plan.requeue, controller.requeue);
    let (node_part, node_available) = node_service_status(def, observed);
    // Hook: the CSI migration audit (see `super::migration`) needs the driver's availability.
    let driver_available = controller.available && node_available;
    let static_part = StatusPart {
        conditions: vec![match kept_in(Group::Static) {
            Some(message) if derived_errors.is_empty() => {
                not_ours_degraded(def, Group::Static, &message)
            }
            _ => degraded(
                def,
                Group::Static,
                (!derived_errors.is_empty())
                    .then(|| derived_errors.join("\n"))
                    .as_deref(),
            ),
        }],
        ..StatusPart::default()
    };
    for (group, part) in [
        (Group::Static, static_part),
        (Group::ControllerService, controller.part),
        (Group::NodeService, node_part),
        (
            Group::StorageClass,
            storage_class_status(def, storage_class_error, kept_in(Group::StorageClass)),
        ),
        (
            Group::ServiceMonitor,
            StatusPart {
                conditions: vec![degraded(def, Group::ServiceMonitor, None)],
                ..StatusPart::default()
            },
        ),
    ] {
        plan.status.push(ControllerStatus {
            group: Some(group),
            controller: group.controller(def),
            part,
        });
    }
    // Hook: the CSI migration audit, for a driver that replaces an in-tree plugin.
    plan.status.extend(crate::migration::status(
        def,
        &observed.migration,
        &observed.operands.storage_classes,
        driver_available,
    ));
    let (stuck, again) = stuck_claims_status(def, observed, now);
    plan.status.push(stuck);
    plan.requeue = min_requeue(plan.requeue, again);
    plan
}

/// The claims stuck Pending on the driver (see [`csi_kit::claims`]): the informational
/// `<prefix>StuckClaims` under its own controller, and when the next claim would be stuck.
fn stuck_claims_status(
    def: &DriverDef,
    observed: &Observed,
    now: &Time,
) -> (ControllerStatus, Option<Duration>) {
    use csi_kit::claims;
    let after = observed.stuck_claims_after.unwrap_or(claims::STUCK_AFTER);
    let classes = &observed.operands.storage_classes;
    let stuck = claims::stuck_claims(
        &def.name,
        observed
            .pending_claims
            .iter()
            .map(|(key, claim)| (key.as_str(), claim)),
        |name| {
            classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
                .map(AsRef::as_ref)
        },
        now.0,
        after,
    );
    let condition = claims::stuck_claims_condition(
        claims::stuck_claims_type(&def.condition_prefix),
        &def.name,
        &stuck,
        after,
    );
    let status = ControllerStatus {
        group: None,
        controller: claims::stuck_claims_controller(&def.condition_prefix),
        part: StatusPart {
            conditions: vec![condition],
            ..StatusPart::default()
        },
    };
    (status, stuck.next)
}

/// What the management state leaves to do.
enum Managed {
    /// Nothing more (removal, Unmanaged, a deleted driver that is not removable): the whole plan.
    Done(Plan),
    /// The operands are managed: the plan so far (config observer's patch, finalizers).
    Operands(Plan),
}

/// The management state controller: its condition, and what `spec.managementState` and a
/// deletion decide.
fn manage(
    def: &DriverDef,
    driver: &api::operator_v1::ClusterCSIDriver,
    observed: &Observed,
) -> Managed {
    let deleting = driver.metadata.deletion_timestamp.is_some();
    let mut mode = management::mode(&driver.spec.operator.management_state, def.removable);
    if deleting && def.removable {
        mode = Mode::Remove;
    }
    let mut plan = Plan::default();
    let mut management_condition =
        management::management_state_degraded(&mode, &def.condition_prefix);
    if mode == Mode::Pause {
        management_condition.reason = Some("Unmanaged".into());
        management_condition.message = Some(
            "spec.managementState is Unmanaged: the operands are left as they are and their conditions are not updated"
                .into(),
        );
    }
    plan.status.push(ControllerStatus {
        group: None,
        controller: MANAGEMENT_STATE_CONTROLLER.to_owned(),
        part: StatusPart {
            conditions: vec![management_condition],
            observed_generation: driver.metadata.generation,
            ..StatusPart::default()
        },
    });
    let current_finalizers = driver.metadata.finalizers.clone().unwrap_or_default();
    if def.removal_blocked_by_volumes && mode == Mode::Manage {
        plan.status[0]
            .part
            .conditions
            .push(removal::removal_condition(def, false, &[]));
    }
    match mode {
        Mode::Manage => {}
        Mode::Remove => {
            if def.removal_blocked_by_volumes {
                let blocking = removal::bound_volumes(def, &observed.cluster.persistent_volumes);
                plan.status[0]
                    .part
                    .conditions
                    .push(removal::removal_condition(def, true, &blocking));
                if !blocking.is_empty() {
                    // Operands and finalizers stay until the volumes are released.
                    return Managed::Done(plan);
                }
            }
            // The finalizers come off once every operand they guard is gone or being deleted:
            // a deletion that failed keeps them, and is tried again (with backoff) and reported.
            let remaining = removal(def, observed);
            if remaining.is_empty() {
                let kept: Vec<String> = current_finalizers
                    .iter()
                    .filter(|f| !finalizers(def).contains(f))
                    .cloned()
                    .collect();
                if kept != current_finalizers {
                    plan.finalizers = Some(kept);
                }
            }
            plan.deletions = remaining
                .into_iter()
                .filter(|d| !being_deleted(d, observed))
                .collect();
            return Managed::Done(plan);
        }
        Mode::Pause | Mode::RefuseRemoval | Mode::Unsupported(_) => return Managed::Done(plan),
    }
    if deleting {
        // Not removable: the ClusterCSIDriver goes, the operands stay.
        return Managed::Done(plan);
    }
    observe_config(&mut plan, driver, observed);
    if def.removable {
        let mut wanted = current_finalizers.clone();
        for f in finalizers(def) {
            if !wanted.contains(&f) {
                wanted.push(f);
            }
        }
        if wanted != current_finalizers {
            plan.finalizers = Some(wanted);
        }
    }

    Managed::Operands(plan)
}

/// The operands to apply, each decided against what is live (a DaemonSet keeps its template
/// generation, an immutable change of the CSIDriver or a class of ours replaces it, a
/// same-named class of someone else is kept); with the messages for the objects kept, by
/// the controller that wanted them. An
/// optional kind whose cache is still filling waits for the next pass; with `classes_invalid`,
/// no StorageClass is applied.
fn operand_steps(
    def: &DriverDef,
    inputs: &Inputs,
    observed: &Observed,
    classes_invalid: bool,
) -> (Vec<Step>, Vec<(Group, String)>) {
    let mut steps = Vec::new();
    let mut kept: Vec<(Group, String)> = Vec::new();
    for (management, operand) in placed_operands(def, inputs) {
        let group = Group::of(&operand);
        let mut recreate = false;
        let operand = match operand {
            Operand::DaemonSet(ds) => {
                let observed_ds = observed
                    .operands
                    .daemon_sets
                    .iter()
                    .find(|o| o.name_any() == ds.name_any())
                    .map(AsRef::as_ref);
                Operand::DaemonSet(with_stable_generation(ds, observed_ds))
            }
            Operand::CSIDriver(csi) => {
                // Someone else's CSIDriver blocks the whole plan (`foreign_csi_driver`), so
                // the live one may be applied over; replaced only when provably ours.
                let live = observed.operands.csi_driver.as_ref();
                let owner = live.map(|c| ownership::owner(c.meta(), &def.adopt_from));
                let changed = live.map(|l| replace::csi_driver_changes(&csi, l));
                match immutable_decision(owner.as_ref(), changed.unwrap_or_default()) {
                    replace::Decision::Apply => {}
                    replace::Decision::Replace(_) => recreate = true,
                    replace::Decision::Keep(fields) => {
                        kept.push((group, kept_message("CSIDriver", &csi.name_any(), &fields)));
                        continue;
                    }
                }
                Operand::CSIDriver(csi)
            }
            Operand::StorageClass(class) => {
                let live = observed
                    .operands
                    .storage_classes
                    .iter()
                    .find(|sc| sc.name_any() == class.name_any())
                    .map(AsRef::as_ref);
                // Applied over when absent, ours, OpenShift's operator's (it did not label its
                // classes; taking them over is the point) or nobody's; replaced only when
                // ours or OpenShift's operator's (`opkit::ownership`). Someone else's is kept.
                let owner = live.map(|sc| ownership::owner(sc.meta(), &def.adopt_from));
                if let (Some(Owner::Someone), Some(sc)) = (&owner, live) {
                    kept.push((group, NotOurs::of("StorageClass", sc.meta()).message()));
                    continue;
                }
                let changed = live.map(|l| replace::storage_class_changes(&class, l));
                match immutable_decision(owner.as_ref(), changed.unwrap_or_default()) {
                    replace::Decision::Apply => {}
                    replace::Decision::Replace(_) => recreate = true,
                    replace::Decision::Keep(fields) => {
                        let name = class.name_any();
                        kept.push((group, kept_message("StorageClass", &name, &fields)));
                        continue;
                    }
                }
                Operand::StorageClass(class)
            }
            Operand::Dynamic(value) => {
                let kind = value["kind"].as_str().and_then(OptionalKind::of_kind);
                let ready = kind.is_none_or(|k| {
                    observed
                        .operands
                        .optional
                        .get(&k)
                        .is_some_and(|o| o.objects.is_some())
                });
                if !ready {
                    // Its cache is filling; its first event triggers the next pass.
                    continue;
                }
                Operand::Dynamic(keep_default_snapshot_class_choice(value, observed))
            }
            other => other,
        };
        if group == Group::StorageClass && classes_invalid {
            continue;
        }
        steps.push(Step {
            group,
            operand,
            recreate,
            management,
        });
    }
    (steps, kept)
}

/// What to do with an operand whose immutable fields (`changed`) differ from the live object
/// of its name, by whose that object is (`None`: absent): applied when nothing immutable
/// changes and it may be applied over; replaced only when ours or the replaced operator's
/// ([`ownership::may_delete`]); else kept (someone else's, or nobody's, which may be adopted
/// but never deleted).
fn immutable_decision(owner: Option<&Owner>, changed: Vec<&'static str>) -> replace::Decision {
    match owner {
        None => replace::Decision::Apply,
        Some(Owner::Someone) => replace::Decision::Keep(changed),
        Some(_) if changed.is_empty() => replace::Decision::Apply,
        Some(Owner::Us | Owner::Former(_)) => replace::Decision::Replace(changed),
        Some(Owner::Nobody) => replace::Decision::Keep(changed),
    }
}

/// Status's words for an operand kept because its immutable `fields` differ from a live
/// object no field manager proves ours.
fn kept_message(kind: &str, name: &str, fields: &[&str]) -> String {
    format!(
        "{kind} {name} exists with other {} and no field manager proves it ours, so it is left as it is: delete it to let the operator create its own",
        fields.join(", ")
    )
}

/// Every operand, with whether it goes to the management cluster (with a hosted control
/// plane, see `csi_kit::hosted`; never otherwise). A driver that does not run hosted renders
/// nothing there: the command line refuses to start it so.
fn placed_operands(def: &DriverDef, inputs: &Inputs) -> Vec<(bool, Operand)> {
    if inputs.hosted.is_none() {
        return render_operands(def, inputs)
            .into_iter()
            .map(|o| (false, o))
            .collect();
    }
    match csi_kit::hosted::render_hosted(def, inputs) {
        Ok(sides) => sides
            .management
            .into_iter()
            .map(|o| (true, o))
            .chain(sides.guest.into_iter().map(|o| (false, o)))
            .collect(),
        Err(error) => {
            tracing::error!(driver = %def.short_name, %error, "nothing to apply");
            Vec::new()
        }
    }
}

/// Operands of ours that the inputs no longer render: a copied ConfigMap whose source is gone,
/// and (when the classes are valid) StorageClasses no longer wanted.
fn stale_operands(
    def: &DriverDef,
    inputs: &Inputs,
    observed: &Observed,
    classes_valid: bool,
) -> Vec<Deletion> {
    let mut deletions = Vec::new();
    // A copy outlives its source only until the next pass.
    for copied in &def.copied_config_maps {
        let target = copied.target();
        if inputs.copied_config_maps.contains_key(target) {
            continue;
        }
        // (With a hosted control plane a copy may be on either side, or both.)
        for copy in observed
            .operands
            .config_maps
            .iter()
            .filter(|c| c.name_any() == target && is_ours(c.meta(), def))
        {
            deletions.push(Deletion::of(
                Group::Static,
                DeleteKind::ConfigMap,
                copy.meta(),
                in_management_cluster(copy.meta(), observed),
            ));
        }
    }
    if classes_valid {
        for name in storage::storage_classes_to_delete(def, inputs) {
            if let Some(ours) = observed
                .operands
                .storage_classes
                .iter()
                .find(|sc| sc.name_any() == name)
                .filter(|sc| is_ours(sc.meta(), def))
            {
                deletions.push(Deletion::of(
                    Group::StorageClass,
                    DeleteKind::StorageClass,
                    ours.meta(),
                    false,
                ));
            }
        }
    }
    deletions
}

/// Operands of ours (with the driver's operand label) that this pass does not render: what an
/// earlier version made under names this one no longer uses (e.g. a binding renamed to
/// OpenShift's). Only for kinds of which this pass renders some (the operator's RBAC covers
/// those), never the shared sidecar roles, and only on a full pass (a disabled driver or one
/// being removed plans elsewhere). Workloads, ConfigMaps, Secrets, classes and the CSIDriver
/// are not swept here.
fn no_longer_rendered(def: &DriverDef, steps: &[Step], observed: &Observed) -> Vec<Deletion> {
    let rendered: BTreeSet<(&'static str, &str)> = steps
        .iter()
        .map(|s| (s.operand.kind(), s.operand.name()))
        .collect();
    let rendered_kinds: BTreeSet<&'static str> = rendered.iter().map(|(k, _)| *k).collect();
    let ops = &observed.operands;
    let candidates: Vec<(DeleteKind, &'static str, &ObjectMeta)> = ops
        .service_accounts
        .iter()
        .map(|o| (DeleteKind::ServiceAccount, "ServiceAccount", &o.metadata))
        .chain(
            ops.roles
                .iter()
                .map(|o| (DeleteKind::Role, "Role", &o.metadata)),
        )
        .chain(
            ops.role_bindings
                .iter()
                .map(|o| (DeleteKind::RoleBinding, "RoleBinding", &o.metadata)),
        )
        .chain(
            ops.cluster_roles
                .iter()
                .map(|o| (DeleteKind::ClusterRole, "ClusterRole", &o.metadata)),
        )
        .chain(ops.cluster_role_bindings.iter().map(|o| {
            (
                DeleteKind::ClusterRoleBinding,
                "ClusterRoleBinding",
                &o.metadata,
            )
        }))
        .chain(
            ops.services
                .iter()
                .map(|o| (DeleteKind::Service, "Service", &o.metadata)),
        )
        .chain(ops.pod_disruption_budgets.iter().map(|o| {
            (
                DeleteKind::PodDisruptionBudget,
                "PodDisruptionBudget",
                &o.metadata,
            )
        }))
        .chain(
            ops.network_policies
                .iter()
                .map(|o| (DeleteKind::NetworkPolicy, "NetworkPolicy", &o.metadata)),
        )
        .collect();
    let mut deletions = Vec::new();
    for (kind, kind_name, meta) in candidates {
        let labels = meta.labels.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        if is_ours(meta, def)
            && !labels.contains_key(names::SHARED_ROLE_LABEL)
            && rendered_kinds.contains(kind_name)
            && !rendered.contains(&(kind_name, name.as_str()))
            && !deletions
                .iter()
                .any(|d: &Deletion| d.kind == kind && d.name == name)
        {
            deletions.push(Deletion::of(
                Group::Static,
                kind,
                meta,
                in_management_cluster(meta, observed),
            ));
        }
    }
    deletions
}

/// Whether an observed operand is in the control-plane namespace of the management cluster
/// (with a hosted control plane; the guest's operands are in the driver's namespace).
fn in_management_cluster(meta: &ObjectMeta, observed: &Observed) -> bool {
    observed
        .hosted
        .as_ref()
        .is_some_and(|h| meta.namespace.as_deref() == Some(h.namespace.as_str()))
}

/// The controller service's status (its Deployment), when to look again for the progressing
/// deadline, and whether it is Available.
struct ControllerServiceStatus {
    part: StatusPart,
    requeue: Option<Duration>,
    available: bool,
}

fn controller_service_status(
    def: &DriverDef,
    observed: &Observed,
    driver: &api::operator_v1::ClusterCSIDriver,
    now: &Time,
) -> ControllerServiceStatus {
    let previous = driver.status.as_ref();
    let deployment_name = names::controller(def);
    let deployment = observed
        .operands
        .deployments
        .iter()
        .find(|d| d.name_any() == deployment_name)
        .map(AsRef::as_ref);
    let deployment_conditions = status::deployment_conditions(
        &def.condition_prefix,
        deployment.unwrap_or(&Deployment::default()),
    );
    let progressing_type = deployment_conditions.progressing.type_.clone();
    let previous_progressing = previous.and_then(|s| s.condition(&progressing_type));
    let too_long = status::progressing_too_long(now, &deployment_conditions, previous_progressing);
    let requeue = progressing_deadline(now, &deployment_conditions, previous_progressing)
        .filter(|_| !too_long);
    let available = deployment_conditions.available.status == ConditionStatus::True;
    let mut part = StatusPart {
        conditions: vec![
            deployment_conditions.available,
            deployment_conditions.progressing,
            degraded(
                def,
                Group::ControllerService,
                too_long.then_some("Deployment was progressing too long"),
            ),
        ],
        ready_replicas: Some(
            deployment
                .and_then(|d| d.status.as_ref())
                .and_then(|s| s.ready_replicas)
                .unwrap_or_default(),
        ),
        ..StatusPart::default()
    };
    if def.precondition.is_some() || observed.probe.is_some() {
        part.conditions.push(condition(
            disabled_type(def),
            ConditionStatus::False,
            status::REASON_AS_EXPECTED,
            "",
        ));
    }
    if let Some(d) = deployment {
        part.generations.push(generation(
            "deployments",
            def,
            &deployment_name,
            d.metadata.generation,
        ));
    }
    ControllerServiceStatus {
        part,
        requeue,
        available,
    }
}

/// The node service's status (its DaemonSet), and whether it is Available.
fn node_service_status(def: &DriverDef, observed: &Observed) -> (StatusPart, bool) {
    let node_name = names::node(def);
    let daemon_set = observed
        .operands
        .daemon_sets
        .iter()
        .find(|d| d.name_any() == node_name)
        .map(AsRef::as_ref);
    let node_conditions = status::daemon_set_conditions(
        &def.condition_prefix,
        daemon_set.unwrap_or(&DaemonSet::default()),
    );
    let mut available = node_conditions.available.status == ConditionStatus::True;
    let mut part = StatusPart {
        conditions: vec![
            node_conditions.available,
            node_conditions.progressing,
            degraded(def, Group::NodeService, None),
        ],
        ..StatusPart::default()
    };
    if let Some(ds) = daemon_set {
        part.generations.push(generation(
            "daemonsets",
            def,
            &node_name,
            ds.metadata.generation,
        ));
    }
    // The driver's other DaemonSets, each under its own controller's name.
    for extra in &def.hooks.extra_daemon_sets {
        let daemon_set = observed
            .operands
            .daemon_sets
            .iter()
            .find(|d| d.name_any() == extra.name)
            .map(AsRef::as_ref);
        let conditions = status::daemon_set_conditions_of(
            extra.controller,
            daemon_set.unwrap_or(&DaemonSet::default()),
        );
        available &= conditions.available.status == ConditionStatus::True;
        part.conditions
            .extend([conditions.available, conditions.progressing]);
        if let Some(ds) = daemon_set {
            part.generations.push(generation(
                "daemonsets",
                def,
                extra.name,
                ds.metadata.generation,
            ));
        }
    }
    (part, available)
}

/// The StorageClass controller's status: Degraded with the invalid input, or with the classes
/// kept because someone else's has the name, else not.
fn storage_class_status(
    def: &DriverDef,
    invalid: Option<String>,
    kept: Option<String>,
) -> StatusPart {
    StatusPart {
        conditions: vec![match (invalid, kept) {
            (Some(error), _) => degraded(def, Group::StorageClass, Some(&error)),
            (None, Some(kept)) => not_ours_degraded(def, Group::StorageClass, &kept),
            (None, None) => degraded(def, Group::StorageClass, None),
        }],
        ..StatusPart::default()
    }
}

/// `group`'s Degraded, True because objects of its operands' names are someone else's and are
/// kept as they are (`message` names them and what to do).
fn not_ours_degraded(def: &DriverDef, group: Group, message: &str) -> OperatorCondition {
    condition(
        group.degraded_type(def),
        ConditionStatus::True,
        REASON_OBJECT_KEPT,
        message,
    )
}

/// The status of a driver whose CSIDriver another installer made (`foreign`): the static
/// resources controller is Degraded, naming the installer and how to remove its install; the
/// workloads are neither available nor progressing, since none of ours runs. Nothing of ours
/// is applied, replaced or deleted meanwhile; once that CSIDriver is gone, the next pass (its
/// watch) installs the driver.
fn blocked_status(def: &DriverDef, foreign: &NotOurs) -> Vec<ControllerStatus> {
    let message = format!(
        "CSIDriver {} was installed by {}, not by this operator or the one it replaces: while it \
         exists this operator installs nothing of the {} driver (not its RBAC, workloads or \
         classes) and leaves that install as it is; {} (with every object of that install) and \
         the operator installs its own",
        foreign.object, foreign.installer.description, def.name, foreign.installer.removal
    );
    let short = format!(
        "the driver is installed by {}, not by this operator",
        foreign.installer.description
    );
    let workload = |group: Group| ControllerStatus {
        group: Some(group),
        controller: group.controller(def),
        part: StatusPart {
            conditions: vec![
                condition(
                    format!("{}Available", group.controller(def)),
                    ConditionStatus::False,
                    REASON_OBJECT_KEPT,
                    &short,
                ),
                condition(
                    format!("{}Progressing", group.controller(def)),
                    ConditionStatus::False,
                    REASON_OBJECT_KEPT,
                    &short,
                ),
                degraded(def, group, None),
            ],
            ..StatusPart::default()
        },
    };
    vec![
        ControllerStatus {
            group: Some(Group::Static),
            controller: Group::Static.controller(def),
            part: StatusPart {
                conditions: vec![not_ours_degraded(def, Group::Static, &message)],
                ..StatusPart::default()
            },
        },
        workload(Group::ControllerService),
        workload(Group::NodeService),
        ControllerStatus {
            group: Some(Group::StorageClass),
            controller: Group::StorageClass.controller(def),
            part: StatusPart {
                conditions: vec![degraded(def, Group::StorageClass, None)],
                ..StatusPart::default()
            },
        },
    ]
}

/// Reason of the Disabled condition when the driver cannot run on this cluster.
pub const REASON_PRECONDITION_NOT_SATISFIED: &str = "PreConditionNotSatisfied";

/// `<prefix>DriverControllerServiceControllerDisabled`: True when the driver cannot run here
/// (its precondition or probe said why); cluster-storage-operator then reports the driver
/// Available with `DriverDisabled` when the registry allows it.
pub fn disabled_type(def: &DriverDef) -> String {
    format!("{}Disabled", Group::ControllerService.controller(def))
}

/// The status of a driver that cannot run here: Disabled True with `reason` as the message,
/// nothing progressing or degraded. Operands applied earlier are left alone (their volumes may
/// still need unmounting); the workloads' Available conditions are dropped, so the roll-up
/// reads the driver as disabled rather than unavailable.
fn disabled_status(def: &DriverDef, reason: &str) -> Vec<ControllerStatus> {
    let controller = Group::ControllerService.controller(def);
    let node = Group::NodeService.controller(def);
    let part = |group: Group, conditions: Vec<OperatorCondition>| ControllerStatus {
        group: Some(group),
        controller: group.controller(def),
        part: StatusPart {
            conditions,
            ..StatusPart::default()
        },
    };
    vec![
        part(Group::Static, vec![degraded(def, Group::Static, None)]),
        part(
            Group::ControllerService,
            vec![
                condition(
                    disabled_type(def),
                    ConditionStatus::True,
                    REASON_PRECONDITION_NOT_SATISFIED,
                    reason,
                ),
                condition(
                    format!("{controller}Progressing"),
                    ConditionStatus::False,
                    REASON_PRECONDITION_NOT_SATISFIED,
                    "",
                ),
                degraded(def, Group::ControllerService, None),
            ],
        ),
        part(
            Group::NodeService,
            std::iter::once(node.as_str())
                .chain(def.hooks.extra_daemon_sets.iter().map(|e| e.controller))
                .map(|controller| {
                    condition(
                        format!("{controller}Progressing"),
                        ConditionStatus::False,
                        REASON_PRECONDITION_NOT_SATISFIED,
                        "",
                    )
                })
                .chain([degraded(def, Group::NodeService, None)])
                .collect(),
        ),
        part(
            Group::StorageClass,
            vec![degraded(def, Group::StorageClass, None)],
        ),
    ]
}

/// Puts the stable-generation annotation (see [`status::STABLE_GENERATION_ANNOTATION`]) on the
/// desired DaemonSet. Writing an annotation bumps a DaemonSet's generation (apps kinds count
/// annotation changes), so recording "generation G has rolled out" by writing G would never
/// catch up. Instead: when G has rolled out and nothing but the annotation would change, the
/// write records G+1, the generation that very write produces (its pod template is G's, so
/// there is nothing to roll out). When anything else changes too, the carried value stays until
/// that rollout finishes. One extra write per rollout; none when idle.
pub fn with_stable_generation(mut desired: DaemonSet, observed: Option<&DaemonSet>) -> DaemonSet {
    let Some(observed) = observed else {
        return desired;
    };
    let generation = observed.metadata.generation.unwrap_or_default();
    let carried = observed
        .annotations()
        .get(status::STABLE_GENERATION_ANNOTATION)
        .cloned();
    let set = |ds: &mut DaemonSet, value: String| {
        ds.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(status::STABLE_GENERATION_ANNOTATION.to_owned(), value);
    };
    if let Some(carried) = &carried {
        set(&mut desired, carried.clone());
    }
    if carried.as_deref() == Some(generation.to_string().as_str()) {
        return desired;
    }
    let finished = status::stable_generation(Some(observed)) == Some(generation);
    if !finished {
        return desired;
    }
    let body = serde_json::to_value(&desired).unwrap_or(Value::Null);
    let have = serde_json::to_value(observed).unwrap_or(Value::Null);
    if opkit::apply::plan(&body, Some(&have)) == opkit::apply::Plan::Skip {
        set(&mut desired, (generation + 1).to_string());
    }
    desired
}

/// An admin's choice of default VolumeSnapshotClass wins, as library-go reconciles only
/// `driver`, `deletionPolicy` and `parameters` of a snapshot class: when the existing class has
/// the default annotation (any value), the desired one carries that value.
fn keep_default_snapshot_class_choice(mut value: Value, observed: &Observed) -> Value {
    if value["kind"] != "VolumeSnapshotClass" {
        return value;
    }
    let name = value["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let existing = observed
        .operands
        .optional
        .get(&OptionalKind::VolumeSnapshotClass)
        .and_then(|o| o.objects.as_ref())
        .and_then(|objects| {
            objects
                .iter()
                .find(|o| o.metadata.name.as_deref() == Some(&name))
        })
        .and_then(|o| o.metadata.annotations.as_ref())
        .and_then(|a| a.get(names::DEFAULT_SNAPSHOT_CLASS_ANNOTATION))
        .cloned();
    if let Some(choice) = existing {
        value["metadata"]["annotations"][names::DEFAULT_SNAPSHOT_CLASS_ANNOTATION] =
            Value::String(choice);
    }
    value
}

/// What `Removed` deletes: our workloads and CSIDriver ([`is_ours`]; StorageClasses and snapshot classes
/// stay, as in library-go: volumes may still use them). Those already being deleted are listed
/// too: the finalizers guarding the removal stay until none is left.
fn removal(def: &DriverDef, observed: &Observed) -> Vec<Deletion> {
    let ops = &observed.operands;
    let deployments = ops.deployments.iter().map(|d| {
        let management = in_management_cluster(d.meta(), observed);
        (
            Group::ControllerService,
            DeleteKind::Deployment,
            d.meta(),
            management,
        )
    });
    let daemon_sets = ops
        .daemon_sets
        .iter()
        .map(|d| (Group::NodeService, DeleteKind::DaemonSet, d.meta(), false));
    let csi_driver = ops
        .csi_driver
        .iter()
        .map(|c| (Group::Static, DeleteKind::CSIDriver, c.meta(), false));
    deployments
        .chain(daemon_sets)
        .chain(csi_driver)
        .filter(|(_, _, meta, _)| is_ours(meta, def))
        .map(|(group, kind, meta, management)| Deletion::of(group, kind, meta, management))
        .collect()
}

/// Whether the object of `deletion` is already being deleted (it has a deletionTimestamp).
fn being_deleted(deletion: &Deletion, observed: &Observed) -> bool {
    let ops = &observed.operands;
    let same = |meta: &ObjectMeta| meta.uid == deletion.observed.uid;
    let deleting = |meta: &ObjectMeta| same(meta) && meta.deletion_timestamp.is_some();
    ops.deployments.iter().any(|d| deleting(d.meta()))
        || ops.daemon_sets.iter().any(|d| deleting(d.meta()))
        || ops.csi_driver.iter().any(|c| deleting(c.meta()))
}

/// Whether `condition` is the management-state one (for tests and logs).
pub fn is_management_condition(condition: &OperatorCondition) -> bool {
    condition.type_ == MANAGEMENT_STATE_DEGRADED
}
