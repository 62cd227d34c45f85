//! IBM Power Virtual Server Block (`powervs.csi.ibm.com`): the table in `powervs_block.yaml`
//! plus the driver image's node-update-controller next to the driver (it labels each node
//! with its PowerVS instance, which the driver's topology needs), the IBM Cloud API key of
//! the credentials Secret, and the custom service endpoints of the Infrastructure
//! (`status.platformStatus.powervs.serviceEndpoints`: `IAM`, `ResourceController` and `Power`,
//! as `IBMCLOUD_IAM_API_ENDPOINT`, `IBMCLOUD_RESOURCE_CONTROLLER_ENDPOINT` and
//! `IBMCLOUD_POWER_API_ENDPOINT`, as OpenShift's operator passes them; other names are
//! ignored). Where OpenShift gives them to the driver containers only, the node-update-controller
//! gets them too: it calls the same APIs.

use csi_kit::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::common::{
    driver_container, ds_pod_spec, from_secret, literal, pod_spec, set_env, unprivileged,
};
use crate::table::DriverError;

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
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_api_key_and_node_updater, with_service_endpoints],
        daemon_set: vec![with_api_key_on_nodes, with_service_endpoints_on_nodes],
        ..Hooks::default()
    };
    Ok(def)
}

/// Where images of the upstream project are published: they have the node-update-controller
/// at `/node-update-controller`; OpenShift's build of the driver (any other image) has it at
/// `/bin/node-update-controller`.
const UPSTREAM_IMAGE_REPOSITORIES: [&str; 2] = [
    "registry.k8s.io/cloud-provider-ibm/",
    "gcr.io/k8s-staging-cloud-provider-ibm/",
];
/// The node-update-controller's metrics and health ports, as OpenShift's asset declares them
/// (on the host's network: the pod uses it).
const NODE_UPDATE_PORTS: [(&str, i32); 2] = [("metrics", 8081), ("healthz", 8082)];

/// The path of the node-update-controller binary in the driver image `image`.
pub fn node_updater_command(image: &str) -> &'static str {
    if UPSTREAM_IMAGE_REPOSITORIES
        .iter()
        .any(|repo| image.starts_with(repo))
    {
        "/node-update-controller"
    } else {
        "/bin/node-update-controller"
    }
}

/// Adds `IBMCLOUD_API_KEY` (from the credentials Secret) to the driver and, right after it, a
/// `node-update-controller` container (the driver image's binary, see
/// [`node_updater_command`]) as OpenShift's asset has it: the same key, its metrics and
/// `healthz` ports, a liveness probe of `/healthz`, the cluster proxy and trusted CA bundle
/// (named in the workload's injection annotations); the requests and termination message
/// policy of the kit's containers, a read-only root file system and neither privilege
/// escalation nor capabilities.
pub fn with_api_key_and_node_updater(inputs: &Inputs, deployment: &mut Deployment) {
    for key in [
        csi_kit::names::INJECT_PROXY_ANNOTATION,
        csi_kit::names::INJECT_CA_BUNDLE_ANNOTATION,
    ] {
        if let Some(value) = deployment
            .metadata
            .annotations
            .as_mut()
            .and_then(|a| a.get_mut(key))
            && !value.split(',').any(|c| c == NODE_UPDATE_CONTAINER)
        {
            value.push(',');
            value.push_str(NODE_UPDATE_CONTAINER);
        }
    }
    let injected = deployment.metadata.annotations.clone().unwrap_or_default();
    let Some(template) = deployment.spec.as_mut().map(|s| &mut s.template) else {
        return;
    };
    let Some(spec) = template.spec.as_mut() else {
        return;
    };
    if let Some(container) = driver_container(spec) {
        set_env(
            container,
            from_secret(API_KEY_ENV, CREDENTIALS_SECRET, API_KEY),
        );
    }
    let mut updater = csi_kit::workloads::operand_container(
        NODE_UPDATE_CONTAINER,
        &inputs.images.driver,
        Vec::new(),
    );
    updater.args = None;
    updater.image_pull_policy = None;
    updater.command = Some(vec![node_updater_command(&inputs.images.driver).to_owned()]);
    updater.ports = Some(
        NODE_UPDATE_PORTS
            .iter()
            .map(|(name, port)| ContainerPort {
                name: Some((*name).to_owned()),
                container_port: *port,
                protocol: Some("TCP".to_owned()),
                ..ContainerPort::default()
            })
            .collect(),
    );
    updater.liveness_probe = Some(Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".to_owned()),
            port: IntOrString::String("healthz".to_owned()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(5),
        timeout_seconds: Some(10),
        period_seconds: Some(30),
        failure_threshold: Some(5),
        ..Probe::default()
    });
    updater.env = Some(vec![from_secret(API_KEY_ENV, CREDENTIALS_SECRET, API_KEY)]);
    unprivileged(&mut updater);
    spec.containers.retain(|c| c.name != NODE_UPDATE_CONTAINER);
    // Right after the driver, where OpenShift's asset has it (container order is part of the
    // pod template).
    let at = spec
        .containers
        .iter()
        .position(|c| c.name == csi_kit::names::DRIVER_CONTAINER)
        .map_or(spec.containers.len(), |i| i + 1);
    // The kit injected the proxy and CA bundle before this hook added the container: the same
    // for it alone, as the annotations now name it (the CA bundle's volume is the driver's).
    let ca_mount = spec.containers[..at]
        .iter()
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .find(|m| m.name == csi_kit::names::CA_BUNDLE_VOLUME)
        .cloned();
    if let Some(mount) = ca_mount.filter(|_| {
        injected
            .get(csi_kit::names::INJECT_CA_BUNDLE_ANNOTATION)
            .is_some_and(|v| v.split(',').any(|c| c == NODE_UPDATE_CONTAINER))
    }) {
        updater.volume_mounts = Some(vec![mount]);
    }
    spec.containers.insert(at, updater);
    let only_updater = ObjectMeta {
        annotations: Some(
            injected
                .get(csi_kit::names::INJECT_PROXY_ANNOTATION)
                .map(|_| {
                    (
                        csi_kit::names::INJECT_PROXY_ANNOTATION.to_owned(),
                        NODE_UPDATE_CONTAINER.to_owned(),
                    )
                })
                .into_iter()
                .collect(),
        ),
        ..ObjectMeta::default()
    };
    csi_kit::hooks::inject_proxy(&only_updater, template, inputs);
}

/// Adds `IBMCLOUD_API_KEY` (from the credentials Secret, optional as on the controller) to
/// the node plugin, as OpenShift's asset gives it. Its hash does not go on the DaemonSet, as
/// OpenShift's operator puts none there either: a rotated key reaches a node plugin when its
/// pod restarts.
pub fn with_api_key_on_nodes(_: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(container) = ds_pod_spec(daemon_set).and_then(driver_container) {
        set_env(
            container,
            from_secret(API_KEY_ENV, CREDENTIALS_SECRET, API_KEY),
        );
    }
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
        .filter(|c| c.name == csi_kit::names::DRIVER_CONTAINER || c.name == NODE_UPDATE_CONTAINER)
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
