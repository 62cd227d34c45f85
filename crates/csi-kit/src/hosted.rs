//! A driver with a hosted control plane (HyperShift): which operand goes to which cluster, and
//! what the controller needs to run in the management cluster while serving the guest.
//!
//! With HyperShift, a hosted cluster's control plane runs as pods in one namespace of a
//! management cluster. OpenShift splits each driver the same way (openshift/csi-operator's
//! `hypershift` flavour): the controller Deployment and what only it uses (its
//! PodDisruptionBudget, ServiceAccount, metrics Service and trusted CA bundle) run in that
//! control-plane namespace; everything the guest's nodes and users see (the node DaemonSet, the
//! CSIDriver, StorageClasses, VolumeSnapshotClasses, the RBAC of the sidecars) lives in the
//! guest. The controller's sidecars reach the guest's API through the kubeconfig Secret that
//! HyperShift keeps in the control-plane namespace ([`GUEST_KUBECONFIG_SECRET`]).
//!
//! [`render_hosted`] renders the driver as [`crate::render::render_operands`] does (the guest
//! reports `controlPlaneTopology: External`, so one replica and no master nodes) and places
//! each operand; hooks see [`Inputs::hosted`] and do their part differently there (AWS adds
//! HyperShift's token minter, Azure reads its cloud config from HyperShift's Secret).
//!
//! Where this differs from OpenShift, the parity test lists it per driver
//! (`drivers/src/<driver>.openshift-hypershift-differences.yaml`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, LocalObjectReference, NodeAffinity, NodeSelectorRequirement,
    NodeSelectorTerm, PodAffinity, PodAffinityTerm, PodSecurityContext, PodSpec,
    PreferredSchedulingTerm, SecretVolumeSource, Toleration, Volume, VolumeMount,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;

use crate::def::DriverDef;
use crate::inputs::{HostedControlPlane, Inputs};
use crate::names;
use crate::render::{Operand, render_operands};

/// The Secret of the control-plane namespace that holds a kubeconfig of the guest's API
/// server (HyperShift creates it; key `kubeconfig`).
pub const GUEST_KUBECONFIG_SECRET: &str = "service-network-admin-kubeconfig";
/// The controller pod's volume of [`GUEST_KUBECONFIG_SECRET`].
pub const GUEST_KUBECONFIG_VOLUME: &str = "hosted-kubeconfig";
/// Where the containers that call the guest's API mount [`GUEST_KUBECONFIG_VOLUME`].
pub const GUEST_KUBECONFIG_DIR: &str = "/etc/hosted-kubernetes";
/// The kubeconfig file those containers read.
pub const GUEST_KUBECONFIG_PATH: &str = "/etc/hosted-kubernetes/kubeconfig";
/// The environment variable naming it, which their `--kubeconfig` argument expands.
pub const KUBECONFIG_ENV: &str = "KUBECONFIG";
/// The priority class of HyperShift's control-plane pods.
pub const PRIORITY_CLASS: &str = "hypershift-control-plane";
/// The pull secret HyperShift keeps in each control-plane namespace.
pub const PULL_SECRET: &str = "pull-secret";
/// Which operator manages a control-plane workload (HyperShift's convention).
pub const MANAGED_BY_LABEL: &str = "hypershift.openshift.io/managed-by";
/// [`MANAGED_BY_LABEL`]'s value on workloads of the cluster storage operator's components.
pub const MANAGED_BY: &str = "cluster-storage-operator";
/// The release a control-plane workload belongs to.
pub const DESIRED_VERSION_ANNOTATION: &str = "release.openshift.io/desired-version";
/// The label of every pod of one hosted control plane (its namespace).
pub const HOSTED_CONTROL_PLANE_LABEL: &str = "hypershift.openshift.io/hosted-control-plane";
/// Label and taint of the management cluster's nodes reserved for control planes.
pub const CONTROL_PLANE_NODE_KEY: &str = "hypershift.openshift.io/control-plane";
/// Label and taint of nodes reserved for one hosted cluster's control plane.
pub const CLUSTER_NODE_KEY: &str = "hypershift.openshift.io/cluster";

/// Which cluster an operand goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The control-plane namespace of the management cluster.
    Management,
    /// The hosted cluster.
    Guest,
}

impl Side {
    /// How the side is named in output and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Management => "management",
            Self::Guest => "guest",
        }
    }
}

/// A driver's operands, by the cluster each goes to.
#[derive(Clone, Debug, Default)]
pub struct Sides {
    /// In the control-plane namespace of the management cluster.
    pub management: Vec<Operand>,
    /// In the hosted cluster.
    pub guest: Vec<Operand>,
}

impl Sides {
    /// Every operand with its side, the management side first.
    pub fn iter(&self) -> impl Iterator<Item = (Side, &Operand)> {
        self.management
            .iter()
            .map(|o| (Side::Management, o))
            .chain(self.guest.iter().map(|o| (Side::Guest, o)))
    }
}

/// A driver cannot be rendered for a hosted control plane.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotHosted {
    /// The driver's table has no `hosted` section.
    #[error(
        "driver {driver} does not run with a hosted control plane (HyperShift runs AWS EBS, Azure Disk, Azure File, OpenStack Cinder, OpenStack Manila and IBM PowerVS Block); its table has no `hosted` section"
    )]
    Driver {
        /// The driver's short name.
        driver: String,
    },
    /// The inputs name no hosted control plane.
    #[error("no hosted control plane in the inputs (`Inputs::hosted` is unset)")]
    NoControlPlane,
}

/// Every operand of `def` for the hosted control plane of `inputs`, placed on its side.
pub fn render_hosted(def: &DriverDef, inputs: &Inputs) -> Result<Sides, NotHosted> {
    let hosted = def.hosted.as_ref().ok_or_else(|| NotHosted::Driver {
        driver: def.short_name.clone(),
    })?;
    let hcp = inputs.hosted.as_ref().ok_or(NotHosted::NoControlPlane)?;
    let operands = render_operands(def, inputs);
    let mounted_by_controller = operands
        .iter()
        .find_map(|o| match o {
            Operand::Deployment(d) => Some(mounted(d.spec.as_ref()?.template.spec.as_ref()?)),
            _ => None,
        })
        .unwrap_or_default();
    let mounted_by_nodes: BTreeSet<(&str, String)> = operands
        .iter()
        .filter_map(|o| match o {
            Operand::DaemonSet(d) => Some(mounted(d.spec.as_ref()?.template.spec.as_ref()?)),
            _ => None,
        })
        .flatten()
        .collect();
    let mut sides = Sides::default();
    for operand in operands {
        let (management, guest) =
            placement(def, &operand, &mounted_by_controller, &mounted_by_nodes);
        if guest {
            sides.guest.push(operand.clone());
        }
        if management {
            sides
                .management
                .push(for_management(def, hosted, inputs, hcp, operand));
        }
    }
    Ok(sides)
}

/// Whether `operand` goes to the management side, and whether to the guest.
fn placement(
    def: &DriverDef,
    operand: &Operand,
    mounted_by_controller: &BTreeSet<(&str, String)>,
    mounted_by_nodes: &BTreeSet<(&str, String)>,
) -> (bool, bool) {
    const MANAGEMENT: (bool, bool) = (true, false);
    const GUEST: (bool, bool) = (false, true);
    const NOWHERE: (bool, bool) = (false, false);
    let by_mounts = |kind: &'static str, name: &str| {
        let key = (kind, name.to_owned());
        let controller = mounted_by_controller.contains(&key);
        // What no pod mounts is the guest's (its users and the driver's tasks read it there).
        (controller, mounted_by_nodes.contains(&key) || !controller)
    };
    match operand {
        Operand::Deployment(_) | Operand::PodDisruptionBudget(_) => MANAGEMENT,
        Operand::ServiceAccount(sa) if sa.metadata.name == Some(names::controller_sa(def)) => {
            MANAGEMENT
        }
        Operand::Service(s) if s.metadata.name == Some(names::metrics_service(def)) => MANAGEMENT,
        // HyperShift's own monitoring scrapes the control plane; OpenShift ships no
        // ServiceMonitor for a hosted controller.
        Operand::Dynamic(v) if is_controller_service_monitor(def, v) => NOWHERE,
        // HyperShift provides the controller's cloud credentials in the control-plane
        // namespace; nothing asks the guest's cloud-credential-operator for them.
        Operand::Dynamic(v) if v["kind"] == "CredentialsRequest" => NOWHERE,
        Operand::ConfigMap(cm) if cm.metadata.name == Some(names::trusted_ca_bundle(def)) => {
            MANAGEMENT
        }
        Operand::ConfigMap(cm) => by_mounts("ConfigMap", name_of(&cm.metadata)),
        Operand::Secret(s) => by_mounts("Secret", name_of(&s.metadata)),
        _ => GUEST,
    }
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn is_controller_service_monitor(def: &DriverDef, v: &Value) -> bool {
    v["kind"] == "ServiceMonitor" && v["metadata"]["name"] == names::service_monitor(def).as_str()
}

/// The ConfigMaps and Secrets a pod mounts, as `(kind, name)`.
fn mounted(spec: &PodSpec) -> BTreeSet<(&'static str, String)> {
    let mut out = BTreeSet::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            out.insert(("ConfigMap", cm.name.clone()));
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            out.insert(("Secret", s));
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                out.insert(("ConfigMap", cm.name.clone()));
            }
            if let Some(s) = &source.secret {
                out.insert(("Secret", s.name.clone()));
            }
        }
    }
    out
}

/// `operand` as it runs in the control-plane namespace.
fn for_management(
    def: &DriverDef,
    hosted: &crate::def::HostedDef,
    inputs: &Inputs,
    hcp: &HostedControlPlane,
    mut operand: Operand,
) -> Operand {
    match &mut operand {
        Operand::Deployment(d) => {
            controller_for_management(def, hosted, hcp, d);
            rehash_for_control_plane(def, inputs, hcp, d);
        }
        Operand::ServiceAccount(sa) => {
            sa.image_pull_secrets = Some(vec![LocalObjectReference {
                name: PULL_SECRET.to_owned(),
            }]);
        }
        _ => {}
    }
    set_namespace(&mut operand, &hcp.namespace);
    operand
}

fn set_namespace(operand: &mut Operand, namespace: &str) {
    let meta = match operand {
        Operand::ServiceAccount(o) => &mut o.metadata,
        Operand::ConfigMap(o) => &mut o.metadata,
        Operand::Secret(o) => &mut o.metadata,
        Operand::Service(o) => &mut o.metadata,
        Operand::PodDisruptionBudget(o) => &mut o.metadata,
        Operand::Deployment(o) => &mut o.metadata,
        Operand::Role(o) => &mut o.metadata,
        Operand::RoleBinding(o) => &mut o.metadata,
        Operand::NetworkPolicy(o) => &mut o.metadata,
        Operand::DaemonSet(o) => &mut o.metadata,
        Operand::Dynamic(v) => {
            v["metadata"]["namespace"] = Value::String(namespace.to_owned());
            return;
        }
        // Cluster-scoped.
        Operand::ClusterRole(_)
        | Operand::ClusterRoleBinding(_)
        | Operand::CSIDriver(_)
        | Operand::StorageClass(_) => return,
    };
    meta.namespace = Some(namespace.to_owned());
}

/// The controller Deployment in the control-plane namespace: HyperShift's labels and
/// placement, and the guest kubeconfig for every container that calls the guest's API.
fn controller_for_management(
    def: &DriverDef,
    hosted: &crate::def::HostedDef,
    hcp: &HostedControlPlane,
    deployment: &mut Deployment,
) {
    deployment
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            DESIRED_VERSION_ANNOTATION.to_owned(),
            hcp.release_version.clone(),
        );
    deployment
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    let Some(template) = deployment.spec.as_mut().map(|s| &mut s.template) else {
        return;
    };
    let labels = template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    labels.insert(HOSTED_CONTROL_PLANE_LABEL.to_owned(), hcp.namespace.clone());
    for (key, value) in &hcp.labels {
        // The pod's own labels stay: the Deployment's selector uses them.
        labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    let Some(spec) = template.spec.as_mut() else {
        return;
    };
    place_on_control_plane(spec, hcp);
    let reaching_guest: BTreeSet<String> = def
        .controller
        .sidecars
        .iter()
        .map(|s| s.kind.container_name())
        .chain(
            hosted
                .driver_reaches_guest_api
                .then(|| names::DRIVER_CONTAINER.to_owned()),
        )
        .collect();
    for c in spec
        .containers
        .iter_mut()
        .filter(|c| reaching_guest.contains(&c.name))
    {
        use_guest_kubeconfig(c);
    }
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    // A driver's hook may have placed it already, where OpenShift's pod has it.
    if !volumes.iter().any(|v| v.name == GUEST_KUBECONFIG_VOLUME) {
        volumes.push(guest_kubeconfig_volume());
    }
    for c in &mut spec.containers {
        let image = if c.name == names::DRIVER_CONTAINER {
            hcp.images.driver.as_ref()
        } else if c.name == names::LIVENESS_PROBE_CONTAINER {
            hcp.images.liveness_probe.as_ref()
        } else if c.name.contains("kube-rbac-proxy") {
            hcp.images.kube_rbac_proxy.as_ref()
        } else {
            None
        };
        if let Some(image) = image {
            c.image = Some(image.clone());
        }
    }
    if let Some(user) = hcp.run_as_user {
        spec.security_context
            .get_or_insert_with(PodSecurityContext::default)
            .run_as_user = Some(user);
    }
}

/// The controller's input hashes, of the objects of the control-plane namespace it mounts
/// there: the driver operator's own derived Secrets and ConfigMaps (the same as the guest's),
/// and what HyperShift put there ([`HostedControlPlane::secret_hashes`]), never the guest's
/// objects of the same names.
fn rehash_for_control_plane(
    def: &DriverDef,
    inputs: &Inputs,
    hcp: &HostedControlPlane,
    deployment: &mut Deployment,
) {
    let derived = |secret: bool| -> BTreeSet<&str> {
        def.config_maps
            .iter()
            .filter(|d| d.secret == secret)
            .map(|d| d.name.as_str())
            .collect()
    };
    let (derived_secrets, derived_config_maps) = (derived(true), derived(false));
    let mut secret_hashes: BTreeMap<String, String> = inputs
        .secret_hashes
        .iter()
        .filter(|(name, _)| derived_secrets.contains(name.as_str()))
        .map(|(name, hash)| (name.clone(), hash.clone()))
        .collect();
    secret_hashes.extend(hcp.secret_hashes.clone());
    let config_map_hashes: BTreeMap<String, String> = inputs
        .config_map_hashes
        .iter()
        .filter(|(name, _)| derived_config_maps.contains(name.as_str()))
        .map(|(name, hash)| (name.clone(), hash.clone()))
        .collect();
    if let Some(spec) = deployment.spec.as_mut() {
        crate::hooks::annotate_hashes_of(
            &hcp.namespace,
            &def.controller.driver.volumes,
            &mut deployment.metadata,
            &mut spec.template,
            &secret_hashes,
            &config_map_hashes,
        );
    }
}

/// Where HyperShift's token minter writes a token, and its readers find it.
pub const TOKEN_DIR: &str = "/var/run/secrets/openshift/serviceaccount";
/// HyperShift's token minter container's name.
pub const TOKEN_MINTER_CONTAINER: &str = "token-minter";

/// HyperShift's token minter (its control-plane operator's `token-minter`), for a pod in the
/// management cluster that needs a token of the guest's ServiceAccount
/// `namespace/service_account` (audience `openshift`), which the kubelet there cannot issue:
/// it asks the guest for one through the guest kubeconfig (the pod's [`guest_kubeconfig_volume`])
/// and writes it to [`TOKEN_DIR`] in the volume `token_volume`, as OpenShift's pods have it.
pub fn token_minter(
    image: Option<String>,
    namespace: &str,
    service_account: &str,
    token_volume: &str,
) -> k8s_openapi::api::core::v1::Container {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    Container {
        name: TOKEN_MINTER_CONTAINER.to_owned(),
        image,
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![
            "/usr/bin/control-plane-operator".to_owned(),
            "token-minter".to_owned(),
        ]),
        args: Some(vec![
            format!("--service-account-namespace={namespace}"),
            format!("--service-account-name={service_account}"),
            "--token-audience=openshift".to_owned(),
            format!("--token-file={TOKEN_DIR}/token"),
            format!("--kubeconfig={GUEST_KUBECONFIG_PATH}"),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_owned(), Quantity("10m".to_owned())),
                ("memory".to_owned(), Quantity("10Mi".to_owned())),
            ])),
            ..ResourceRequirements::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        volume_mounts: Some(vec![
            VolumeMount {
                name: token_volume.to_owned(),
                mount_path: TOKEN_DIR.to_owned(),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: GUEST_KUBECONFIG_VOLUME.to_owned(),
                mount_path: GUEST_KUBECONFIG_DIR.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            },
        ]),
        ..Container::default()
    }
}

/// The controller pod's volume of the guest kubeconfig Secret.
pub fn guest_kubeconfig_volume() -> Volume {
    Volume {
        name: GUEST_KUBECONFIG_VOLUME.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(GUEST_KUBECONFIG_SECRET.to_owned()),
            default_mode: Some(0o644),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// HyperShift's preferences for a pod of the control plane in `namespace`: the management
/// cluster's control-plane nodes, then those reserved for this hosted cluster, then next to its
/// other control-plane pods. Other affinities (a spread of replicas) stay.
pub fn prefer_control_plane(affinity: &mut Affinity, namespace: &str) {
    let preferred = |key: &str, value: &str, weight: i32| PreferredSchedulingTerm {
        weight,
        preference: NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![value.to_owned()]),
            }]),
            ..NodeSelectorTerm::default()
        },
    };
    affinity.node_affinity = Some(NodeAffinity {
        preferred_during_scheduling_ignored_during_execution: Some(vec![
            preferred(CONTROL_PLANE_NODE_KEY, "true", 50),
            preferred(CLUSTER_NODE_KEY, namespace, 100),
        ]),
        ..NodeAffinity::default()
    });
    affinity.pod_affinity = Some(PodAffinity {
        preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
            weight: 100,
            pod_affinity_term: PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        HOSTED_CONTROL_PLANE_LABEL.to_owned(),
                        namespace.to_owned(),
                    )])),
                    ..LabelSelector::default()
                }),
                topology_key: "kubernetes.io/hostname".to_owned(),
                ..PodAffinityTerm::default()
            },
        }]),
        ..PodAffinity::default()
    });
}

/// HyperShift's placement of a control-plane pod: preferably on the control-plane nodes, on
/// those of this hosted cluster, next to its other control-plane pods; the control plane's
/// priority; its node selector, labels and tolerations.
fn place_on_control_plane(spec: &mut PodSpec, hcp: &HostedControlPlane) {
    prefer_control_plane(
        spec.affinity.get_or_insert_with(Default::default),
        &hcp.namespace,
    );
    spec.priority_class_name = Some(PRIORITY_CLASS.to_owned());
    spec.node_selector = (!hcp.node_selector.is_empty()).then(|| hcp.node_selector.clone());
    let taint = |key: &str, value: &str| Toleration {
        key: Some(key.to_owned()),
        operator: Some("Equal".to_owned()),
        value: Some(value.to_owned()),
        effect: Some("NoSchedule".to_owned()),
        ..Toleration::default()
    };
    let mut tolerations = vec![
        taint(CONTROL_PLANE_NODE_KEY, "true"),
        taint(CLUSTER_NODE_KEY, &hcp.namespace),
    ];
    tolerations.extend(hcp.tolerations.iter().cloned());
    spec.tolerations = Some(tolerations);
}

/// A container that calls the guest's API: `--kubeconfig`, the variable it expands, and the
/// mounted Secret.
fn use_guest_kubeconfig(c: &mut Container) {
    c.args
        .get_or_insert_with(Vec::new)
        .push(format!("--kubeconfig=$({KUBECONFIG_ENV})"));
    c.env.get_or_insert_with(Vec::new).push(EnvVar {
        name: KUBECONFIG_ENV.to_owned(),
        value: Some(GUEST_KUBECONFIG_PATH.to_owned()),
        ..EnvVar::default()
    });
    c.volume_mounts
        .get_or_insert_with(Vec::new)
        .push(VolumeMount {
            name: GUEST_KUBECONFIG_VOLUME.to_owned(),
            mount_path: GUEST_KUBECONFIG_DIR.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::def::{HostedDef, test_def};
    use crate::inputs::{ControlPlaneImages, Topology};
    use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource};

    const CP: &str = "clusters-demo";

    fn hosted_def(driver_reaches_guest_api: bool) -> DriverDef {
        let mut def = test_def();
        def.controller.sidecars =
            vec![serde_json::from_value(serde_json::json!({"kind": "Provisioner"})).unwrap()];
        def.hosted = Some(HostedDef {
            driver_reaches_guest_api,
        });
        def
    }

    fn inputs(def: &DriverDef, hcp: HostedControlPlane) -> Inputs {
        let mut inputs = Inputs::offline(def, Topology::External, &BTreeMap::new());
        inputs.hosted = Some(hcp);
        inputs
    }

    fn hcp() -> HostedControlPlane {
        HostedControlPlane {
            namespace: CP.to_owned(),
            release_version: "4.22.0".to_owned(),
            ..HostedControlPlane::default()
        }
    }

    fn controller(sides: &Sides) -> &Deployment {
        sides
            .management
            .iter()
            .find_map(|o| match o {
                Operand::Deployment(d) => Some(d),
                _ => None,
            })
            .expect("the controller is on the management side")
    }

    fn keys(operands: &[Operand]) -> Vec<String> {
        operands
            .iter()
            .map(|o| {
                let v = o.to_value();
                format!(
                    "{}/{}/{}",
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["namespace"].as_str().unwrap_or("-"),
                    v["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn a_driver_without_a_hosted_section_or_inputs_without_a_control_plane_is_refused() {
        let def = test_def();
        let error = render_hosted(&def, &inputs(&def, hcp())).unwrap_err();
        assert_eq!(
            error,
            NotHosted::Driver {
                driver: "demo".to_owned()
            }
        );
        assert!(error.to_string().contains("no `hosted` section"), "{error}");
        let def = hosted_def(false);
        let mut standalone = inputs(&def, hcp());
        standalone.hosted = None;
        assert_eq!(
            render_hosted(&def, &standalone).unwrap_err(),
            NotHosted::NoControlPlane
        );
    }

    #[test]
    fn the_controller_and_what_only_it_uses_go_to_the_control_plane_namespace() {
        // (The demo driver serves no metrics; the drivers' parity tests place a metrics Service.)
        let def = hosted_def(false);
        let sides = render_hosted(&def, &inputs(&def, hcp())).unwrap();
        let management = keys(&sides.management);
        assert_eq!(
            management,
            [
                "ServiceAccount/clusters-demo/demo-csi-driver-controller-sa",
                "ConfigMap/clusters-demo/demo-csi-driver-trusted-ca-bundle",
                "PodDisruptionBudget/clusters-demo/demo-csi-driver-controller-pdb",
                "Deployment/clusters-demo/demo-csi-driver-controller",
            ]
        );
        let guest = keys(&sides.guest);
        for expected in [
            "ServiceAccount/openshift-cluster-csi-drivers/demo-csi-driver-node-sa",
            "CSIDriver/-/demo.csi.k8s.io",
            "DaemonSet/openshift-cluster-csi-drivers/demo-csi-driver-node",
        ] {
            assert!(
                guest.iter().any(|k| k == expected),
                "{expected} in {guest:?}"
            );
        }
        // The controller is not in the guest, and no ServiceMonitor of it is anywhere.
        for (side, operand) in sides.iter() {
            let v = operand.to_value();
            if side == Side::Guest {
                assert_ne!(v["kind"], "Deployment");
            }
            assert_ne!(v["kind"], "CredentialsRequest");
            assert_ne!(
                v["metadata"]["name"].as_str(),
                Some(names::service_monitor(&def).as_str())
            );
        }
        let sa = sides
            .management
            .iter()
            .find_map(|o| match o {
                Operand::ServiceAccount(sa) => Some(sa),
                _ => None,
            })
            .unwrap();
        assert_eq!(sa.image_pull_secrets.as_ref().unwrap()[0].name, PULL_SECRET);
    }

    #[test]
    fn the_controller_runs_on_the_control_plane_and_reaches_the_guest_through_its_kubeconfig() {
        let def = hosted_def(false);
        let mut plane = hcp();
        plane.node_selector = BTreeMap::from([("pool".to_owned(), "cp".to_owned())]);
        plane.labels = BTreeMap::from([
            ("team".to_owned(), "storage".to_owned()),
            // A label the pods have already (the Deployment selects by it): kept.
            ("app".to_owned(), "overridden".to_owned()),
        ]);
        plane.tolerations = vec![Toleration {
            key: Some("custom".to_owned()),
            operator: Some("Exists".to_owned()),
            ..Toleration::default()
        }];
        plane.run_as_user = Some(1001);
        plane.images = ControlPlaneImages {
            driver: Some("mgmt/driver:1".to_owned()),
            liveness_probe: Some("mgmt/probe:1".to_owned()),
            kube_rbac_proxy: Some("mgmt/proxy:1".to_owned()),
        };
        let sides = render_hosted(&def, &inputs(&def, plane)).unwrap();
        let deployment = controller(&sides);
        let meta = &deployment.metadata;
        assert_eq!(meta.labels.as_ref().unwrap()[MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(
            meta.annotations.as_ref().unwrap()[DESIRED_VERSION_ANNOTATION],
            "4.22.0"
        );
        let template = &deployment.spec.as_ref().unwrap().template;
        let labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels[HOSTED_CONTROL_PLANE_LABEL], CP);
        assert_eq!(labels["team"], "storage");
        assert_eq!(labels["app"], "demo-csi-driver-controller");
        let spec = template.spec.as_ref().unwrap();
        assert_eq!(spec.priority_class_name.as_deref(), Some(PRIORITY_CLASS));
        assert_eq!(spec.node_selector.as_ref().unwrap()["pool"], "cp");
        let tolerations: Vec<&str> = spec
            .tolerations
            .iter()
            .flatten()
            .map(|t| t.key.as_deref().unwrap())
            .collect();
        assert_eq!(
            tolerations,
            [CONTROL_PLANE_NODE_KEY, CLUSTER_NODE_KEY, "custom"]
        );
        assert_eq!(
            spec.security_context.as_ref().unwrap().run_as_user,
            Some(1001)
        );
        let affinity = spec.affinity.as_ref().unwrap();
        assert!(affinity.node_affinity.is_some() && affinity.pod_affinity.is_some());
        assert!(affinity.pod_anti_affinity.is_some(), "the spread is kept");
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == GUEST_KUBECONFIG_VOLUME)
            .unwrap();
        assert_eq!(
            volume.secret.as_ref().unwrap().secret_name.as_deref(),
            Some(GUEST_KUBECONFIG_SECRET)
        );
        let container = |name: &str| spec.containers.iter().find(|c| c.name == name).unwrap();
        let provisioner = container("csi-provisioner");
        assert!(
            provisioner
                .args
                .iter()
                .flatten()
                .any(|a| a == "--kubeconfig=$(KUBECONFIG)")
        );
        assert!(
            provisioner
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == GUEST_KUBECONFIG_VOLUME && m.read_only == Some(true))
        );
        let driver = container(names::DRIVER_CONTAINER);
        assert!(
            !driver
                .args
                .iter()
                .flatten()
                .any(|a| a.starts_with("--kubeconfig"))
        );
        assert_eq!(driver.image.as_deref(), Some("mgmt/driver:1"));
        assert_eq!(
            container(names::LIVENESS_PROBE_CONTAINER).image.as_deref(),
            Some("mgmt/probe:1")
        );
        assert!(
            spec.containers
                .iter()
                .filter(|c| c.name.contains("kube-rbac-proxy"))
                .all(|c| c.image.as_deref() == Some("mgmt/proxy:1"))
        );
        assert_eq!(provisioner.image.as_deref(), Some("example.com/x:v1"));

        let def = hosted_def(true);
        let sides = render_hosted(&def, &inputs(&def, hcp())).unwrap();
        let spec = controller(&sides)
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap();
        let driver = spec
            .containers
            .iter()
            .find(|c| c.name == names::DRIVER_CONTAINER)
            .unwrap();
        assert!(
            driver
                .args
                .iter()
                .flatten()
                .any(|a| a == "--kubeconfig=$(KUBECONFIG)")
        );
        assert!(spec.node_selector.is_none());
    }

    #[test]
    fn a_config_map_or_secret_goes_where_the_pods_that_mount_it_run() {
        let def = hosted_def(false);
        let volume = |name: &str| Volume {
            name: name.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: name.to_owned(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        };
        let controller = mounted(&PodSpec {
            volumes: Some(vec![volume("controller-only"), volume("both")]),
            ..PodSpec::default()
        });
        let nodes = mounted(&PodSpec {
            volumes: Some(vec![volume("both"), volume("nodes-only")]),
            ..PodSpec::default()
        });
        let config_map = |name: &str| {
            Operand::ConfigMap(ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            })
        };
        let at = |name: &str| placement(&def, &config_map(name), &controller, &nodes);
        assert_eq!(at("controller-only"), (true, false));
        assert_eq!(at("both"), (true, true));
        assert_eq!(at("nodes-only"), (false, true));
        assert_eq!(at("unmounted"), (false, true));
    }

    #[test]
    fn the_hosted_control_plane_object_gives_the_placement() {
        let object = serde_json::json!({
            "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedControlPlane",
            "metadata": {"name": "demo", "namespace": CP},
            "spec": {
                "nodeSelector": {"pool": "cp"},
                "labels": {"team": "storage"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cp", "effect": "NoSchedule"}],
            }
        });
        let plane = hcp().with_object(&object);
        assert_eq!(plane.namespace, CP);
        assert_eq!(plane.release_version, "4.22.0");
        assert_eq!(plane.node_selector["pool"], "cp");
        assert_eq!(plane.labels["team"], "storage");
        assert_eq!(plane.tolerations[0].key.as_deref(), Some("dedicated"));
        // A field it does not set is empty; one it sets wrongly is left out, not fatal.
        let plane = hcp().with_object(&serde_json::json!({"spec": {"tolerations": "none"}}));
        assert!(plane.node_selector.is_empty() && plane.tolerations.is_empty());
        assert_eq!(plane.tls_profile, None, "no profile: the default");
    }

    #[test]
    fn the_hosted_control_plane_object_gives_the_tls_profile() {
        let with = |profile: serde_json::Value| {
            hcp().with_object(&serde_json::json!({
                "metadata": {"name": "demo", "namespace": CP},
                "spec": {"configuration": {"apiServer": {"tlsSecurityProfile": profile}}},
            }))
        };
        let modern = with(serde_json::json!({"type": "Modern", "modern": {}}));
        let profile = modern.tls_profile.clone().unwrap().unwrap();
        let tls = crate::tls::serving_tls_of(Some(&profile), &modern.tls_profile_field()).unwrap();
        assert_eq!(tls.min_version.as_deref(), Some("VersionTLS13"));

        // Errors name the HostedControlPlane's field, not the guest's APIServer.
        let custom = with(serde_json::json!({"type": "Custom",
            "custom": {"ciphers": ["NOT-A-CIPHER"], "minTLSVersion": "VersionTLS12"}}));
        let profile = custom.tls_profile.clone().unwrap().unwrap();
        let error =
            crate::tls::serving_tls_of(Some(&profile), &custom.tls_profile_field()).unwrap_err();
        assert!(
            error.starts_with(&format!(
                "HostedControlPlane {CP}/demo spec.configuration.apiServer.tlsSecurityProfile.custom.ciphers"
            )),
            "{error}"
        );

        // A profile that is not one is an error naming the field, not a silent default.
        let broken = with(serde_json::json!({"type": "Custom", "custom": {"ciphers": "all"}}));
        let error = broken.tls_profile.unwrap().unwrap_err();
        assert!(
            error.contains(&format!(
                "HostedControlPlane {CP}/demo spec.configuration.apiServer.tlsSecurityProfile cannot be read"
            )),
            "{error}"
        );
    }

    #[test]
    fn the_environment_gives_what_hypershift_sets() {
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let plane = HostedControlPlane::from_env(
            CP,
            &env(&[
                ("RELEASE_VERSION", "4.22.1"),
                ("RUN_AS_USER", "1001"),
                ("DRIVER_CONTROL_PLANE_IMAGE", "mgmt/driver:1"),
                ("LIVENESS_PROBE_CONTROL_PLANE_IMAGE", " "),
            ]),
        )
        .unwrap();
        assert_eq!(plane.namespace, CP);
        assert_eq!(plane.release_version, "4.22.1");
        assert_eq!(plane.run_as_user, Some(1001));
        assert_eq!(plane.images.driver.as_deref(), Some("mgmt/driver:1"));
        assert_eq!(plane.images.liveness_probe, None);
        for bad in ["-1", "root", "1.5"] {
            let error =
                HostedControlPlane::from_env(CP, &env(&[("RUN_AS_USER", bad)])).unwrap_err();
            assert!(error.to_string().contains("RUN_AS_USER"), "{error}");
        }
    }
}
