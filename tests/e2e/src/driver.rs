//! A catalogue driver on the e2e cluster: its ClusterCSIDriver (created as the cluster storage
//! operator would), its operator run in-process as its own ServiceAccount, and what its status
//! must say on a cluster whose pods may or may not run.

use api::operator_v1::{ClusterCSIDriver, OperatorCondition};
use csi_kit::DriverDef;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;

use crate::{Background, DECLARED_LABEL, Identity, cleanup, install, wait_for};

/// One catalogue driver under test.
pub struct Driver {
    /// The driver's definition from the catalogue.
    pub def: DriverDef,
    /// The identity its operator runs as.
    pub operator: Identity,
}

impl Driver {
    /// Prepares driver `short` on a cluster without it: the ClusterCSIDriver CRD, the
    /// starter's ServiceAccount and RBAC for its operator, and its ClusterCSIDriver (Managed).
    /// Refuses to run where the driver is installed by someone else; removes what an earlier
    /// e2e run left behind.
    pub async fn prepare(admin: &Client, short: &str) -> Self {
        let def = drivers::by_name(short).unwrap_or_else(|e| panic!("{short}: {e}"));
        crate::apply_crd(admin, &api::crds::cluster_csi_driver()).await;
        let drivers_api: Api<ClusterCSIDriver> = Api::all(admin.clone());
        if let Some(existing) = drivers_api
            .get_opt(&def.name)
            .await
            .unwrap_or_else(|e| panic!("reading ClusterCSIDriver {}: {e}", def.name))
        {
            let ours = existing
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(DECLARED_LABEL));
            assert!(
                ours,
                "this cluster already has the {short} driver installed; run the e2e tests on a disposable cluster"
            );
            cleanup::remove_driver(admin, short, &def.name, &def.namespace).await;
        }
        let operator = install::driver_operator(admin, short).await;
        let driver: ClusterCSIDriver = serde_json::from_value(serde_json::json!({
            "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
            "metadata": {"name": def.name, "labels": {DECLARED_LABEL: "true"}},
            "spec": {"managementState": "Managed"}
        }))
        .unwrap_or_else(|e| panic!("a ClusterCSIDriver: {e}"));
        drivers_api
            .create(&PostParams::default(), &driver)
            .await
            .unwrap_or_else(|e| panic!("creating ClusterCSIDriver {}: {e}", def.name));
        Self { def, operator }
    }

    /// Starts the driver's operator (with its probe and tasks) as its own identity.
    pub fn start(&self) -> Background<driver_operator::StartError> {
        self.start_with_env(Default::default())
    }

    /// As [`Driver::start`], with the operator's environment `env` (e.g. the image variables
    /// OpenShift's release payload sets).
    pub fn start_with_env(
        &self,
        env: std::collections::BTreeMap<String, String>,
    ) -> Background<driver_operator::StartError> {
        self.start_with_settings(driver_operator::Settings {
            env,
            ..driver_operator::Settings::default()
        })
    }

    /// As [`Driver::start`], with the operator's `settings` (e.g. a shorter threshold for the
    /// report of claims stuck Pending).
    pub fn start_with_settings(
        &self,
        settings: driver_operator::Settings,
    ) -> Background<driver_operator::StartError> {
        let client = self.operator.client.clone();
        let def = self.def.clone();
        let metrics = Metrics::new();
        let controller = driver_operator::operator_name(&def);
        let running = metrics.clone();
        let hosted = settings.hosted.is_some();
        Background::start(move |stop| {
            let extras = drivers::extras(&def, client.clone(), hosted);
            driver_operator::run_with_extras(
                client,
                def,
                settings,
                extras,
                running,
                Readiness::default(),
                stop,
            )
        })
        .settles_with(metrics, &controller)
    }

    /// The ClusterCSIDriver's condition `type_`, if reported.
    pub async fn condition(&self, admin: &Client, type_: &str) -> Option<OperatorCondition> {
        Api::<ClusterCSIDriver>::all(admin.clone())
            .get(&self.def.name)
            .await
            .unwrap_or_else(|e| panic!("reading ClusterCSIDriver {}: {e}", self.def.name))
            .status?
            .condition(type_)
            .cloned()
    }

    /// Waits until condition `type_` has `status`, and returns it.
    pub async fn condition_is(
        &self,
        admin: &Client,
        type_: &str,
        status: &str,
    ) -> OperatorCondition {
        wait_for(
            &format!("{type_}={status} on {}", self.def.name),
            async || {
                self.condition(admin, type_)
                    .await
                    .filter(|c| c.status.as_str() == status)
            },
        )
        .await
    }

    /// Waits until the driver's controller and node workload conditions say what the
    /// Deployment's and DaemonSet's own status says (written by kube-controller-manager, never
    /// by the test): Available once a pod is, else `Deploying` with the operator's waiting
    /// message. On a cluster whose pods cannot run (no node, or images it cannot pull) that is
    /// the waiting answer.
    pub async fn assert_workloads_reported(&self, admin: &Client) {
        let prefix = &self.def.condition_prefix;
        let ns = &self.def.namespace;
        let controller = csi_kit::names::controller(&self.def);
        let node = csi_kit::names::node(&self.def);
        let deployments: Api<Deployment> = Api::namespaced(admin.clone(), ns);
        let daemon_sets: Api<DaemonSet> = Api::namespaced(admin.clone(), ns);
        let checks = [
            (
                csi_kit::status::controller_service_controller(prefix),
                "Waiting for Deployment",
            ),
            (
                csi_kit::status::node_service_controller(prefix),
                "Waiting for the DaemonSet to deploy the CSI Node Service",
            ),
        ];
        for (index, (controller_name, waiting)) in checks.iter().enumerate() {
            let type_ = format!("{controller_name}Available");
            wait_for(&format!("{type_} to match the workload"), async || {
                let available = if index == 0 {
                    deployments
                        .get_opt(&controller)
                        .await
                        .ok()??
                        .status
                        .and_then(|s| s.available_replicas)
                        .unwrap_or_default()
                } else {
                    daemon_sets
                        .get_opt(&node)
                        .await
                        .ok()??
                        .status
                        .and_then(|s| s.number_available)
                        .unwrap_or_default()
                };
                let condition = self.condition(admin, &type_).await?;
                let agrees = if available > 0 {
                    condition.status.as_str() == "True"
                } else {
                    condition.status.as_str() == "False"
                        && condition.reason.as_deref() == Some(csi_kit::status::REASON_DEPLOYING)
                        && condition.message.as_deref() == Some(*waiting)
                };
                agrees.then_some(())
            })
            .await;
        }
    }

    /// The names of the containers of the rendered controller Deployment and node DaemonSet
    /// (from the same definition, offline), to compare with what was applied.
    pub fn rendered_containers(&self) -> (Vec<String>, Vec<String>) {
        let inputs = csi_kit::Inputs::offline(
            &self.def,
            csi_kit::Topology::HighlyAvailable,
            &Default::default(),
        );
        let mut controller = Vec::new();
        let mut node = Vec::new();
        for operand in csi_kit::render_operands(&self.def, &inputs) {
            match operand {
                csi_kit::Operand::Deployment(d) => {
                    controller = pod_containers(d.spec.map(|s| s.template))
                }
                csi_kit::Operand::DaemonSet(d) => node = pod_containers(d.spec.map(|s| s.template)),
                _ => {}
            }
        }
        (controller, node)
    }

    /// Asserts the applied controller Deployment and node DaemonSet run the rendered
    /// containers, in order. Each is waited for: the operator applies them one after the other,
    /// so one may exist a moment before the other.
    pub async fn assert_workloads_applied(&self, admin: &Client) {
        let ns = &self.def.namespace;
        let (controller, node) = self.rendered_containers();
        let deployments = Api::<Deployment>::namespaced(admin.clone(), ns);
        let deployment = wait_for("the controller Deployment", async || {
            deployments
                .get_opt(&csi_kit::names::controller(&self.def))
                .await
                .unwrap_or_else(|e| panic!("reading the controller Deployment: {e}"))
        })
        .await;
        assert_eq!(
            pod_containers(deployment.spec.map(|s| s.template)),
            controller,
            "the controller Deployment's containers"
        );
        let daemon_sets = Api::<DaemonSet>::namespaced(admin.clone(), ns);
        let daemon_set = wait_for("the node DaemonSet", async || {
            daemon_sets
                .get_opt(&csi_kit::names::node(&self.def))
                .await
                .unwrap_or_else(|e| panic!("reading the node DaemonSet: {e}"))
        })
        .await;
        assert_eq!(
            pod_containers(daemon_set.spec.map(|s| s.template)),
            node,
            "the node DaemonSet's containers"
        );
    }

    /// Removes the driver and everything installed for it, and checks its operator was never
    /// refused a request.
    pub async fn finish(self, admin: &Client) {
        cleanup::remove_driver(
            admin,
            &self.def.short_name,
            &self.def.name,
            &self.def.namespace,
        )
        .await;
        self.operator.assert_never_refused();
    }
}

fn pod_containers(template: Option<k8s_openapi::api::core::v1::PodTemplateSpec>) -> Vec<String> {
    template
        .and_then(|t| t.spec)
        .map(|s| s.containers.into_iter().map(|c| c.name).collect())
        .unwrap_or_default()
}

/// Whether objects of `api` labelled as `short`'s operands exist (any).
pub async fn any_operand<K>(api: &Api<K>, short: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params =
        ListParams::default().labels(&format!("{}={short}", csi_kit::names::OPERAND_LABEL));
    api.list(&params)
        .await
        .map(|l| !l.items.is_empty())
        .unwrap_or(false)
}
