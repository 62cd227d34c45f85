//! IBM Power Virtual Server Block (`powervs.csi.ibm.com`): the table in `powervs_block.yaml`
//! plus the driver image's node-update-controller next to the driver (it labels each node
//! with its PowerVS instance, which the driver's topology needs) and the IBM Cloud API key of
//! the credentials Secret.

use csi::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::Deployment;

use crate::DriverError;
use crate::common::{driver_container, from_secret, pod_spec, set_env, unprivileged};

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
        deployment: vec![with_api_key_and_node_updater],
        ..Hooks::default()
    };
    Ok(def)
}

/// Adds `IBMCLOUD_API_KEY` (from the credentials Secret) to the driver and a
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
    spec.containers.push(updater);
}
