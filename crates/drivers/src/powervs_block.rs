//! IBM Power Virtual Server Block (`powervs.csi.ibm.com`): the table in `powervs_block.yaml`
//! plus the driver image's node-update-controller next to the driver (it labels each node
//! with its PowerVS instance, which the driver's topology needs), the IBM Cloud API key of
//! the credentials Secret, and the custom service endpoints of the Infrastructure
//! (`status.platformStatus.powervs.serviceEndpoints`: `IAM`, `ResourceController` and `Power`,
//! as `IBMCLOUD_IAM_API_ENDPOINT`, `IBMCLOUD_RESOURCE_CONTROLLER_ENDPOINT` and
//! `IBMCLOUD_POWER_API_ENDPOINT`, as OpenShift's operator passes them; other names are
//! ignored). Where OpenShift gives them to the driver containers only, the node-update-controller
//! gets them too: it calls the same APIs.

use csi::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::PodSpec;

use crate::DriverError;
use crate::common::{
    driver_container, ds_pod_spec, from_secret, literal, pod_spec, set_env, unprivileged,
};

/// The short name.
pub const SHORT_NAME: &str = "powervs-block";
/// The CSI driver name.
pub const CSI_NAME: &str = "powervs.csi.ibm.com";
/// The credentials Secret cloud-credential-operator writes.
pub const CREDENTIALS_SECRET: &str = "ibm-powervs-cloud-credentials";
/// The container that labels nodes with their PowerVS instance.
pub const NODE_UPDATE_CONTAINER: &str = "node-update-controller";

const TABLE: &str = include_str!("powervs_block.yaml");
const API_KEY_ENV: &str = "IBMCLOUD_API_KEY";
const API_KEY: &str = "ibmcloud_api_key";

/// The PowerVS Block driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_api_key_and_node_updater, with_service_endpoints],
        daemon_set: vec![with_service_endpoints_on_nodes],
        ..Hooks::default()
    };
    Ok(def)
}

/// Adds `IBMCLOUD_API_KEY` (from the credentials Secret) to the driver and, right after it, a
/// `node-update-controller` container (the driver image's `/node-update-controller`) with the
/// same key, the settings of the kit's own containers and neither privilege escalation nor
/// capabilities.
pub fn with_api_key_and_node_updater(inputs: &Inputs, deployment: &mut Deployment) {
    let Some(spec) = pod_spec(deployment) else {
        return;
    };
    if let Some(container) = driver_container(spec) {
        set_env(
            container,
            from_secret(API_KEY_ENV, CREDENTIALS_SECRET, API_KEY),
        );
    }
    let mut updater =
        csi::workloads::operand_container(NODE_UPDATE_CONTAINER, &inputs.images.driver, Vec::new());
    updater.args = None;
    updater.command = Some(vec!["/node-update-controller".to_owned()]);
    updater.env = Some(vec![from_secret(API_KEY_ENV, CREDENTIALS_SECRET, API_KEY)]);
    unprivileged(&mut updater);
    spec.containers.retain(|c| c.name != NODE_UPDATE_CONTAINER);
    // Right after the driver, where OpenShift's asset has it (container order is part of the
    // pod template).
    let at = spec
        .containers
        .iter()
        .position(|c| c.name == csi::names::DRIVER_CONTAINER)
        .map_or(spec.containers.len(), |i| i + 1);
    spec.containers.insert(at, updater);
}

/// The service endpoint names OpenShift passes on, and their variables.
pub const ENDPOINT_ENV: [(&str, &str); 3] = [
    ("IAM", "IBMCLOUD_IAM_API_ENDPOINT"),
    (
        "ResourceController",
        "IBMCLOUD_RESOURCE_CONTROLLER_ENDPOINT",
    ),
    ("Power", "IBMCLOUD_POWER_API_ENDPOINT"),
];

/// The variables of the Infrastructure's custom service endpoints (see the module docs).
pub fn endpoint_env(inputs: &Inputs) -> Vec<(&'static str, String)> {
    let endpoints = inputs
        .platform_status
        .as_ref()
        .and_then(|p| p.powervs.as_ref())
        .map(|p| p.service_endpoints.as_slice())
        .unwrap_or_default();
    ENDPOINT_ENV
        .iter()
        .filter_map(|(name, var)| {
            endpoints
                .iter()
                .find(|e| e.name == *name && !e.url.trim().is_empty())
                .map(|e| (*var, e.url.trim().to_owned()))
        })
        .collect()
}

fn set_endpoints(inputs: &Inputs, spec: &mut PodSpec) {
    let env = endpoint_env(inputs);
    for container in spec
        .containers
        .iter_mut()
        .filter(|c| c.name == csi::names::DRIVER_CONTAINER || c.name == NODE_UPDATE_CONTAINER)
    {
        for (var, url) in &env {
            set_env(container, literal(var, url));
        }
    }
}

/// The custom service endpoints on the controller's driver and node-update-controller.
pub fn with_service_endpoints(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = pod_spec(deployment) {
        set_endpoints(inputs, spec);
    }
}

/// The custom service endpoints on the node plugin.
pub fn with_service_endpoints_on_nodes(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = ds_pod_spec(daemon_set) {
        set_endpoints(inputs, spec);
    }
}
