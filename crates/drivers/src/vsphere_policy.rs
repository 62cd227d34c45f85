//! The vSphere driver's storage policy, as OpenShift's vSphere operator makes it: its
//! `VMwareVSphereDriverStorageClassController` tags the cluster's datastores in each vCenter
//! and makes the tag-based storage policy `openshift-storage-policy-<infrastructure name>`
//! ([`crate::vcenter_api`]), and the default StorageClass `thin-csi` names it
//! (`StoragePolicyName`), so volumes land only on the cluster's datastores.
//!
//! - Which datastores: those of the failure domains of `Infrastructure/cluster`
//!   (`spec.platformSpec.vsphere.failureDomains[].topology.datastore`, each in its vCenter
//!   `server`); on clusters installed before failure domains, the cloud config's
//!   `[Workspace] datacenter` and `default-datastore`.
//! - When: the [`StoragePolicySync`] task runs while the operands are applied and the
//!   StorageClasses are Managed. After a success it checks again after 1 minute, then 2, 4...
//!   up to 30 minutes (OpenShift's backoff); after a failure after 30 seconds, doubling up to 5
//!   minutes. A change of what it reads (vCenters, credentials, datastores) checks at once.
//! - Until the policy exists, `thin-csi` is not applied (a class made without it could not be
//!   changed: StorageClass parameters are immutable), and the controller's Degraded condition
//!   says why; a class that already exists (e.g. made by OpenShift's operator) is left as it is
//!   meanwhile. Once the policy exists, a later failure to check it keeps the class.
//! - On plain Kubernetes (no Infrastructure, no installer tags) no policy is made and the class
//!   names none: CNS then places volumes on a datastore every node can reach.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use csi_kit::def::StorageClassDef;
use csi_kit::derived::ini;
use csi_kit::{HookError, Inputs};
use driver_operator::{Task, TaskConfig};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::Deserialize;

use crate::vcenter_api::{self, DatastoreName, Login, PolicySpec, Tls, VCenter};
use crate::vsphere_cloud_config;

/// The controller name, prefix of its conditions, as OpenShift's vSphere operator names it.
pub const CONTROLLER: &str = "VMwareVSphereDriverStorageClassController";
/// The StorageClass parameter naming the policy.
pub const POLICY_PARAMETER: &str = "StoragePolicyName";
/// The longest time between two runs of the task.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// The placeholder of the cluster's infrastructure name in offline examples.
const CLUSTER_PLACEHOLDER: &str = "${CLUSTER_ID}";

/// When the task asks vCenter again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// After a success: this, then twice as long each time, up to `max_recheck`.
    pub first_recheck: Duration,
    /// The longest time between two checks after a success.
    pub max_recheck: Duration,
    /// After a failure: this, then twice as long each time, up to `max_retry`.
    pub first_retry: Duration,
    /// The longest time between two tries after a failure.
    pub max_retry: Duration,
}

impl Default for Timing {
    /// OpenShift's: 1 minute doubling to 30 after a success; ours after a failure: 30 seconds
    /// doubling to 5 minutes.
    fn default() -> Self {
        Self {
            first_recheck: Duration::from_secs(60),
            max_recheck: Duration::from_secs(30 * 60),
            first_retry: Duration::from_secs(30),
            max_retry: Duration::from_secs(5 * 60),
        }
    }
}

/// One vCenter's part of the policy: where it is, how to log in, which datastores to tag.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    /// The cloud config's server name.
    pub server: String,
    /// Its URL.
    pub base: String,
    /// Whether its certificate is not verified (the cloud config's `insecure-flag`).
    pub insecure: bool,
    /// The user and password of the credentials Secret.
    pub login: Login,
    /// The datastores to tag.
    pub datastores: Vec<DatastoreName>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("base", &self.base)
            .field("insecure", &self.insecure)
            .field("login", &self.login)
            .field("datastores", &self.datastores)
            .finish()
    }
}

/// What the policy is made from: the cluster's infrastructure name and its vCenters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `Infrastructure.status.infrastructureName`.
    pub cluster: String,
    /// Each vCenter, ordered by server.
    pub targets: Vec<Target>,
}

/// A failure domain of `Infrastructure.spec.platformSpec.vsphere` (the fields used here).
#[derive(Clone, Debug, Default, Deserialize)]
struct FailureDomain {
    #[serde(default)]
    name: String,
    #[serde(default)]
    server: String,
    #[serde(default)]
    topology: FailureDomainTopology,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct FailureDomainTopology {
    #[serde(default)]
    datacenter: String,
    #[serde(default)]
    datastore: String,
}

/// The failure domains of the Infrastructure's spec; an error names a malformed one.
fn failure_domains(inputs: &Inputs) -> Result<Vec<FailureDomain>, String> {
    let Some(domains) = inputs
        .platform_spec
        .as_ref()
        .and_then(|s| s.extra.get("vsphere"))
        .and_then(|v| v.get("failureDomains"))
        .filter(|v| !v.is_null())
    else {
        return Ok(Vec::new());
    };
    serde_json::from_value::<Vec<FailureDomain>>(domains.clone()).map_err(|e| {
        format!(
            "Infrastructure/cluster spec.platformSpec.vsphere.failureDomains cannot be read: {e}"
        )
    })
}

/// The datastore's name: the last part of an inventory path (`/dc1/datastore/ds1` → `ds1`).
fn datastore_name(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

/// What the policy is made from, or `None` when there is nothing to make: plain Kubernetes,
/// or StorageClasses that are not Managed. An error says what is missing.
pub fn plan(inputs: &Inputs) -> Result<Option<Plan>, String> {
    if !inputs.topology.is_openshift()
        || inputs.spec.storage_class_state() != api::operator_v1::StorageClassStateName::Managed
    {
        return Ok(None);
    }
    let Some(cluster) = inputs.cluster_id.clone() else {
        return Err(
            "Infrastructure/cluster has no status.infrastructureName, which names the storage policy"
                .to_owned(),
        );
    };
    let text = inputs
        .source_config_maps
        .get(vsphere_cloud_config::SOURCE_ID)
        .and_then(|d| d.get(vsphere_cloud_config::SOURCE_KEY))
        .ok_or_else(|| {
            format!(
                "ConfigMap {} does not exist",
                vsphere_cloud_config::SOURCE_ID
            )
        })?;
    let sections = ini::parse(text)?;
    let vcenters = vsphere_cloud_config::vcenters(&sections)?;
    let domains = failure_domains(inputs)?;
    let workspace = sections.get("Workspace").cloned().unwrap_or_default();
    let mut targets = Vec::new();
    for vcenter in &vcenters {
        let mut datastores: Vec<DatastoreName> = Vec::new();
        if domains.is_empty() {
            // Installed before failure domains: the cloud config's default datastore, in the
            // vCenter of [Workspace] (the only one then).
            let serves = workspace
                .get("server")
                .is_none_or(|s| s.is_empty() || *s == vcenter.server);
            if serves {
                let field = |key: &str| workspace.get(key).filter(|v| !v.trim().is_empty());
                match (field("datacenter"), field("default-datastore")) {
                    (Some(dc), Some(ds)) => datastores.push(DatastoreName {
                        datacenter: dc.trim().to_owned(),
                        datastore: datastore_name(ds.trim()).to_owned(),
                    }),
                    _ => {
                        return Err(format!(
                            "Infrastructure/cluster has no vSphere failure domains and the cloud config has no [Workspace] datacenter and default-datastore: the storage policy of vCenter {} has no datastore to select",
                            vcenter.server
                        ));
                    }
                }
            }
        }
        for domain in domains.iter().filter(|d| d.server == vcenter.server) {
            if domain.topology.datacenter.is_empty() || domain.topology.datastore.is_empty() {
                return Err(format!(
                    "failure domain {:?} of Infrastructure/cluster names no datacenter or datastore (spec.platformSpec.vsphere.failureDomains[].topology)",
                    domain.name
                ));
            }
            let name = DatastoreName {
                datacenter: domain.topology.datacenter.clone(),
                datastore: datastore_name(&domain.topology.datastore).to_owned(),
            };
            if !datastores.contains(&name) {
                datastores.push(name);
            }
        }
        let credential = |what: &str| {
            vsphere_cloud_config::credential(inputs, &vcenter.server, what).map(str::to_owned)
        };
        targets.push(Target {
            server: vcenter.server.clone(),
            base: VCenter::base_url(&vcenter.server, vcenter.port.as_deref()),
            insecure: vcenter.insecure,
            login: Login {
                user: credential("username")?,
                password: credential("password")?,
            },
            datastores,
        });
    }
    Ok(Some(Plan { cluster, targets }))
}

/// The policy the driver's StorageClasses name: `None` when they name none (plain
/// Kubernetes), `Some(None)` while it is not made yet, `Some(Some(name))` once it is.
pub fn storage_policy(inputs: &Inputs) -> Option<Option<String>> {
    if !inputs.topology.is_openshift() {
        return None;
    }
    let made = inputs
        .task_facts
        .get(CONTROLLER)
        .and_then(|facts| facts.first())
        .map(|name| match &inputs.cluster_id {
            // Offline examples name the cluster with a placeholder.
            Some(cluster) => name.replace(CLUSTER_PLACEHOLDER, cluster),
            None => name.clone(),
        });
    Some(made)
}

/// The StorageClass filter: while the policy is not made, a Managed class is not applied.
pub fn wait_for_policy(inputs: &Inputs, _class: &StorageClassDef) -> bool {
    inputs.spec.storage_class_state() != api::operator_v1::StorageClassStateName::Managed
        || !matches!(storage_policy(inputs), Some(None))
}

/// The StorageClass hook: names the policy.
pub fn with_storage_policy(inputs: &Inputs, class: &mut StorageClass) {
    if let Some(Some(policy)) = storage_policy(inputs) {
        class
            .parameters
            .get_or_insert_with(BTreeMap::new)
            .insert(POLICY_PARAMETER.to_owned(), policy);
    }
}

/// Makes the storage policy in one vCenter: what it changed, or what failed.
pub trait PolicyMaker: Send + Sync {
    /// Makes sure `spec` exists in the vCenter of `target`.
    fn ensure<'a>(
        &'a self,
        target: &'a Target,
        spec: &'a PolicySpec,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + 'a>>;
}

/// The real vCenter client ([`vcenter_api`]), with system roots or no verification as the
/// cloud config says.
#[derive(Debug, Default)]
pub struct VCenterPolicyMaker;

impl PolicyMaker for VCenterPolicyMaker {
    fn ensure<'a>(
        &'a self,
        target: &'a Target,
        spec: &'a PolicySpec,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + 'a>> {
        Box::pin(async move {
            let tls = if target.insecure {
                Tls::Insecure
            } else {
                Tls::System
            };
            let http = vcenter_api::http_client(&tls)?;
            let vc = VCenter::new(&target.base, http);
            vcenter_api::ensure_storage_policy(&vc, &target.login, spec).await
        })
    }
}

#[derive(Debug, Default)]
struct State {
    /// What the last check was made from.
    last_plan: Option<Plan>,
    /// Its outcome.
    last_error: Option<String>,
    /// When to check again, and the delay after that.
    next: Option<Instant>,
    delay: Duration,
    /// The policy once made (kept through later failures; reset with another cluster name).
    made: Option<String>,
}

/// The task that makes the storage policy ([`CONTROLLER`]).
pub struct StoragePolicySync {
    maker: Arc<dyn PolicyMaker>,
    timing: Timing,
    state: Mutex<State>,
}

impl std::fmt::Debug for StoragePolicySync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoragePolicySync").finish_non_exhaustive()
    }
}

impl StoragePolicySync {
    /// The task over `maker`, asking again as `timing` says.
    pub fn new(maker: Arc<dyn PolicyMaker>, timing: Timing) -> Self {
        Self {
            maker,
            timing,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn run(&self, inputs: &Inputs) -> Result<bool, HookError> {
        let plan = match plan(inputs) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(false),
            Err(message) => {
                return Err(HookError::config(format!(
                    "the storage policy cannot be made: {message}"
                )));
            }
        };
        let now = Instant::now();
        {
            let state = self.state();
            let due = state.next.is_none_or(|next| now >= next);
            if state.last_plan.as_ref() == Some(&plan) && !due {
                return match &state.last_error {
                    Some(error) => Err(HookError::cloud(error.clone())),
                    None => Ok(false),
                };
            }
        }
        let spec_of =
            |target: &Target| PolicySpec::for_cluster(&plan.cluster, target.datastores.clone());
        let mut changes = Vec::new();
        let mut error = None;
        for target in &plan.targets {
            let spec = spec_of(target);
            match self.maker.ensure(target, &spec).await {
                Ok(made) => changes.extend(made.into_iter().map(|c| (target.server.clone(), c))),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        for (server, change) in &changes {
            tracing::info!(vcenter = %server, "{change}");
        }
        let mut state = self.state();
        let same = state.last_plan.as_ref() == Some(&plan);
        let was_ok = state.last_error.is_none();
        if state
            .made
            .as_ref()
            .is_some_and(|m| *m != vcenter_api::policy_name(&plan.cluster))
        {
            state.made = None;
        }
        let outcome = match error {
            None => {
                state.delay = if same && was_ok {
                    (state.delay * 2).clamp(self.timing.first_recheck, self.timing.max_recheck)
                } else {
                    self.timing.first_recheck
                };
                state.made = Some(vcenter_api::policy_name(&plan.cluster));
                state.last_error = None;
                Ok(!changes.is_empty())
            }
            Some(error) => {
                state.delay = if same && !was_ok {
                    (state.delay * 2).clamp(self.timing.first_retry, self.timing.max_retry)
                } else {
                    self.timing.first_retry
                };
                let message = format!(
                    "the storage policy {} cannot be made: {error}",
                    vcenter_api::policy_name(&plan.cluster)
                );
                state.last_error = Some(message.clone());
                Err(HookError::cloud(message))
            }
        };
        state.next = Some(now + state.delay);
        state.last_plan = Some(plan);
        outcome
    }
}

impl Task for StoragePolicySync {
    fn sync<'a>(
        &'a self,
        inputs: &'a Inputs,
    ) -> Pin<Box<dyn Future<Output = Result<bool, HookError>> + Send + 'a>> {
        Box::pin(self.run(inputs))
    }

    fn facts(&self) -> Vec<String> {
        self.state().made.clone().into_iter().collect()
    }
}

/// The task over `maker`, as the driver operator runs it.
pub fn task(maker: Arc<dyn PolicyMaker>) -> TaskConfig {
    task_with(maker, Timing::default())
}

/// The task over `maker` with `timing`; it runs at least every `timing.first_retry` (or
/// [`INTERVAL`], if shorter), so a retry is never late.
pub fn task_with(maker: Arc<dyn PolicyMaker>, timing: Timing) -> TaskConfig {
    TaskConfig {
        name: CONTROLLER.to_owned(),
        task: Arc::new(StoragePolicySync::new(maker, timing)),
        interval: INTERVAL.min(timing.first_retry),
        // It reads the cloud config, the credentials and the Infrastructure, all of which the
        // kit watches for the driver.
        config_maps: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::operator_v1::StorageClassStateName;
    use csi_kit::Topology;

    const CONFIG: &str = "[Global]\ninsecure-flag = 1\n[Workspace]\nserver = vc1\ndatacenter = dc1\ndefault-datastore = /dc1/datastore/ds1\n[VirtualCenter \"vc1\"]\ndatacenters = dc1\nport = 8443\n[VirtualCenter \"vc2\"]\ndatacenters = dc2\n[Labels]\nregion = r\nzone = z\n";

    fn inputs(config: &str) -> Inputs {
        let def = crate::by_name("vsphere").unwrap();
        let mut inputs = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
        inputs.cluster_id = Some("c-1".to_owned());
        inputs.source_config_maps.insert(
            vsphere_cloud_config::SOURCE_ID.to_owned(),
            [(
                vsphere_cloud_config::SOURCE_KEY.to_owned(),
                config.to_owned(),
            )]
            .into(),
        );
        inputs.credentials = csi_kit::SecretData(
            [
                ("vc1.username", "u1"),
                ("vc1.password", "p1"),
                ("vc2.username", "u2"),
                ("vc2.password", "p2"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        inputs
    }

    fn with_failure_domains(inputs: &mut Inputs, domains: serde_json::Value) {
        let spec: api::config_v1::PlatformSpec = serde_json::from_value(
            serde_json::json!({"type": "VSphere", "vsphere": {"failureDomains": domains}}),
        )
        .unwrap();
        inputs.platform_spec = Some(spec);
    }

    fn names(target: &Target) -> Vec<(String, String)> {
        target
            .datastores
            .iter()
            .map(|d| (d.datacenter.clone(), d.datastore.clone()))
            .collect()
    }

    #[test]
    fn datastore_paths_give_their_names() {
        assert_eq!(datastore_name("/dc1/datastore/ds1"), "ds1");
        assert_eq!(datastore_name("/dc1/datastore/folder/ds 2/"), "ds 2");
        assert_eq!(datastore_name("ds3"), "ds3");
    }

    #[test]
    fn without_failure_domains_the_workspace_datastore_is_tagged() {
        let plan = plan(&inputs(CONFIG)).unwrap().unwrap();
        assert_eq!(plan.cluster, "c-1");
        assert_eq!(plan.targets.len(), 2);
        assert_eq!(plan.targets[0].base, "https://vc1:8443");
        assert!(plan.targets[0].insecure);
        assert_eq!(plan.targets[0].login.user, "u1");
        assert_eq!(names(&plan.targets[0]), [("dc1".into(), "ds1".into())]);
        // The other vCenter is not [Workspace]'s: its policy selects no datastore of its own.
        assert_eq!(plan.targets[1].base, "https://vc2");
        assert!(names(&plan.targets[1]).is_empty());
    }

    #[test]
    fn failure_domains_give_each_vcenter_its_datastores() {
        let mut inputs = inputs(CONFIG);
        with_failure_domains(
            &mut inputs,
            serde_json::json!([
                {"name": "a", "server": "vc1", "topology": {"datacenter": "dc1", "datastore": "/dc1/datastore/fast"}},
                {"name": "b", "server": "vc2", "topology": {"datacenter": "dc2", "datastore": "/dc2/datastore/slow"}},
                {"name": "c", "server": "vc2", "topology": {"datacenter": "dc2", "datastore": "/dc2/datastore/slow"}},
            ]),
        );
        let plan = plan(&inputs).unwrap().unwrap();
        assert_eq!(names(&plan.targets[0]), [("dc1".into(), "fast".into())]);
        assert_eq!(names(&plan.targets[1]), [("dc2".into(), "slow".into())]);
    }

    #[test]
    fn what_is_missing_is_named() {
        let mut no_password = inputs(CONFIG);
        no_password.credentials.0.remove("vc2.password");
        let error = plan(&no_password).unwrap_err();
        assert!(error.contains("has no key vc2.password"), "{error}");

        let no_datastore = inputs(&CONFIG.replace("default-datastore = /dc1/datastore/ds1\n", ""));
        let error = plan(&no_datastore).unwrap_err();
        assert!(
            error.contains("no [Workspace] datacenter and default-datastore"),
            "{error}"
        );

        let mut bad_domain = inputs(CONFIG);
        with_failure_domains(
            &mut bad_domain,
            serde_json::json!([{"name": "a", "server": "vc1", "topology": {"datacenter": "dc1"}}]),
        );
        let error = plan(&bad_domain).unwrap_err();
        assert!(error.contains("failure domain \"a\""), "{error}");

        let mut malformed = inputs(CONFIG);
        with_failure_domains(&mut malformed, serde_json::json!({"a": 1}));
        let error = plan(&malformed).unwrap_err();
        assert!(error.contains("failureDomains cannot be read"), "{error}");

        let mut no_id = inputs(CONFIG);
        no_id.cluster_id = None;
        assert!(plan(&no_id).unwrap_err().contains("infrastructureName"));
    }

    #[test]
    fn nothing_is_made_on_kubernetes_or_for_unmanaged_classes() {
        let mut kubernetes = inputs(CONFIG);
        kubernetes.topology = Topology::Kubernetes {
            control_plane_nodes: true,
        };
        assert_eq!(plan(&kubernetes).unwrap(), None);
        assert_eq!(storage_policy(&kubernetes), None);
        let mut unmanaged = inputs(CONFIG);
        unmanaged.spec.storage_class_state = Some(StorageClassStateName::Unmanaged);
        assert_eq!(plan(&unmanaged).unwrap(), None);
    }

    #[test]
    fn the_class_waits_for_the_policy_and_then_names_it() {
        let def = crate::by_name("vsphere").unwrap();
        let class = &def.storage_classes[0];
        let mut inputs = inputs(CONFIG);
        assert!(!wait_for_policy(&inputs, class));
        // Removed: the filter keeps the class, so it is deleted.
        inputs.spec.storage_class_state = Some(StorageClassStateName::Removed);
        assert!(wait_for_policy(&inputs, class));
        inputs.spec.storage_class_state = None;
        inputs.task_facts.insert(
            CONTROLLER.to_owned(),
            vec!["openshift-storage-policy-c-1".into()],
        );
        assert!(wait_for_policy(&inputs, class));
        let mut built = StorageClass::default();
        with_storage_policy(&inputs, &mut built);
        assert_eq!(
            built.parameters.unwrap()[POLICY_PARAMETER],
            "openshift-storage-policy-c-1"
        );
        // The offline example's placeholder takes the cluster's name.
        inputs.task_facts.insert(
            CONTROLLER.to_owned(),
            vec!["openshift-storage-policy-${CLUSTER_ID}".into()],
        );
        assert_eq!(
            storage_policy(&inputs),
            Some(Some("openshift-storage-policy-c-1".into()))
        );
    }

    /// Counts its calls; fails while `fail` says so.
    #[derive(Default)]
    struct Counting {
        calls: Mutex<Vec<(String, PolicySpec)>>,
        fail: Mutex<Option<String>>,
    }

    impl PolicyMaker for Counting {
        fn ensure<'a>(
            &'a self,
            target: &'a Target,
            spec: &'a PolicySpec,
        ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + 'a>> {
            self.calls
                .lock()
                .unwrap()
                .push((target.server.clone(), spec.clone()));
            let fail = self.fail.lock().unwrap().clone();
            Box::pin(async move {
                match fail {
                    Some(error) => Err(error),
                    None => Ok(vec![format!("created storage policy {}", spec.policy)]),
                }
            })
        }
    }

    fn timing(recheck: Duration, retry: Duration) -> Timing {
        Timing {
            first_recheck: recheck,
            max_recheck: recheck * 4,
            first_retry: retry,
            max_retry: retry * 4,
        }
    }

    #[tokio::test]
    async fn a_made_policy_is_a_fact_and_is_not_asked_again_until_due() {
        let maker = Arc::new(Counting::default());
        let task = StoragePolicySync::new(
            maker.clone(),
            timing(Duration::from_secs(3600), Duration::from_secs(3600)),
        );
        let inputs = inputs(CONFIG);
        assert!(task.facts().is_empty());
        assert!(task.run(&inputs).await.unwrap(), "it made the policy");
        assert_eq!(task.facts(), ["openshift-storage-policy-c-1"]);
        let calls = maker.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 2, "one call per vCenter");
        assert_eq!(calls[0].1.category, "openshift-c-1");
        assert_eq!(calls[0].1.tag, "c-1");
        assert_eq!(calls[0].1.policy, "openshift-storage-policy-c-1");
        // Not due: vCenter is not asked.
        assert!(!task.run(&inputs).await.unwrap());
        assert_eq!(maker.calls.lock().unwrap().len(), 2);
        // What it reads changed: asked at once.
        let mut changed = inputs.clone();
        changed
            .credentials
            .0
            .insert("vc1.password".into(), "new".into());
        task.run(&changed).await.unwrap();
        assert_eq!(maker.calls.lock().unwrap().len(), 4);
    }

    #[tokio::test]
    async fn a_failure_is_retried_when_due_and_a_made_policy_stays_a_fact() {
        let maker = Arc::new(Counting::default());
        *maker.fail.lock().unwrap() = Some("vCenter vc1: NoPermission".into());
        let task = StoragePolicySync::new(maker.clone(), timing(Duration::ZERO, Duration::ZERO));
        let inputs = inputs(CONFIG);
        let error = task.run(&inputs).await.unwrap_err();
        assert!(
            error
                .message()
                .contains("openshift-storage-policy-c-1 cannot be made: vCenter vc1: NoPermission"),
            "{error}"
        );
        assert!(task.facts().is_empty(), "no policy yet");
        assert_eq!(
            maker.calls.lock().unwrap().len(),
            1,
            "it stops at the first failure"
        );
        // Due at once (zero delay): tried again, and made.
        *maker.fail.lock().unwrap() = None;
        task.run(&inputs).await.unwrap();
        assert_eq!(task.facts(), ["openshift-storage-policy-c-1"]);
        // A later failure keeps the fact: the class stays as it is.
        *maker.fail.lock().unwrap() = Some("vCenter vc1: unreachable".into());
        assert!(task.run(&inputs).await.is_err());
        assert_eq!(task.facts(), ["openshift-storage-policy-c-1"]);
    }

    #[tokio::test]
    async fn a_failure_is_reported_again_until_the_retry_is_due() {
        let maker = Arc::new(Counting::default());
        *maker.fail.lock().unwrap() = Some("down".into());
        let task = StoragePolicySync::new(
            maker.clone(),
            timing(Duration::from_secs(3600), Duration::from_secs(3600)),
        );
        let inputs = inputs(CONFIG);
        assert!(task.run(&inputs).await.is_err());
        let again = task.run(&inputs).await.unwrap_err();
        assert!(again.message().contains("down"), "{again}");
        assert_eq!(
            maker.calls.lock().unwrap().len(),
            1,
            "not asked before the retry is due"
        );
    }
}
