//! The driver operators with a hosted control plane (HyperShift): what the cluster storage
//! operator applies in the control-plane namespace of the management cluster, and what in the
//! guest.
//!
//! OpenShift's cluster storage operator in HyperShift mode (`--guest-kubeconfig`) runs each
//! driver operator in the hosted cluster's control-plane namespace, next to the rest of that
//! control plane, and points it at the guest's API with the kubeconfig Secret HyperShift keeps
//! there (`service-network-admin-kubeconfig`). The driver operator then splits its own operands
//! (see `csi_kit::hosted`). Here: the driver operator's Deployment, ServiceAccount, config
//! ConfigMap and the Role for what it writes in the control-plane namespace go to the
//! management side; its ServiceAccount and RBAC for the guest's objects, and the namespaces and
//! shared sidecar roles, to the guest, as a standalone cluster has them.
//!
//! The comparison with OpenShift's HyperShift assets is `tests/openshift_parity.rs`
//! (`src/starter.openshift-hypershift-differences.yaml`).

use std::collections::BTreeMap;

use csi_kit::hosted::{
    CLUSTER_NODE_KEY, CONTROL_PLANE_NODE_KEY, DESIRED_VERSION_ANNOTATION, GUEST_KUBECONFIG_SECRET,
    MANAGED_BY, MANAGED_BY_LABEL, PRIORITY_CLASS, PULL_SECRET, prefer_control_plane,
};
use csi_kit::{DriverDef, HostedControlPlane, Inputs, OptionalCrds, Topology};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, EnvVar, LocalObjectReference, PodSecurityContext, SecretVolumeSource, Service,
    ServiceAccount, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use opkit::rbac::{MANAGE, READ, dedupe, rule};

use crate::desired::{Desired, starter_objects};
use crate::registry::DriverEntry;
use crate::starter::{self, StarterInputs, meta, resource_of};

/// Where a driver operator mounts the guest kubeconfig Secret.
pub const GUEST_KUBECONFIG_DIR: &str = "/etc/guest-kubeconfig";
/// The driver operator pod's volume of it.
pub const GUEST_KUBECONFIG_VOLUME: &str = "guest-kubeconfig";
/// The pod label by which HyperShift's network policies let a control-plane pod reach the
/// management cluster's API server.
pub const MANAGEMENT_API_ACCESS_LABEL: &str = "hypershift.openshift.io/need-management-kas-access";
/// The shared control-plane images passed to every driver operator, for the controller's
/// containers (the management cluster's architecture may differ from the guest's).
pub const CONTROL_PLANE_IMAGE_ENVS: [&str; 2] = [
    "LIVENESS_PROBE_CONTROL_PLANE_IMAGE",
    "KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE",
];

/// What the cluster storage operator applies for its driver operators with a hosted control
/// plane, by cluster.
#[derive(Clone, Debug, Default)]
pub struct HostedStarterObjects {
    /// In the control-plane namespace of the management cluster.
    pub management: Vec<Desired>,
    /// In the guest.
    pub guest: Vec<Desired>,
}

/// Everything the starter applies for `started` drivers with the hosted control plane `hcp`.
/// Drivers that do not run hosted ([`DriverEntry::hosted`]) must not be among them.
pub fn hosted_starter_objects(
    started: &[(DriverEntry, DriverDef)],
    inputs: &StarterInputs,
    hcp: &HostedControlPlane,
) -> HostedStarterObjects {
    let mut objects = HostedStarterObjects::default();
    // A hosted control plane's topology is `External`, whatever the guest's Infrastructure
    // says (the driver operators' guest RBAC depends on it).
    let guest_inputs = StarterInputs {
        topology: Topology::External,
        ..inputs.clone()
    };
    for desired in starter_objects(started, &guest_inputs) {
        match desired {
            // The driver operator runs in the control-plane namespace, with its config and
            // its metrics Service.
            Desired::Deployment(_) | Desired::ConfigMap(_) | Desired::Service(_) => {}
            other => objects.guest.push(other),
        }
    }
    for (entry, def) in started {
        objects
            .management
            .push(Desired::ServiceAccount(management_service_account(
                entry, hcp,
            )));
        let role = management_role(entry, def, inputs, hcp);
        let binding = management_role_binding(entry, &role, hcp);
        objects.management.push(Desired::Role(role));
        objects.management.push(Desired::RoleBinding(binding));
        // With the control plane's TLS profile, not the guest's (an invalid one leaves the
        // ConfigMap as it is, reported by [`operator_config_error`]).
        if let Some(Ok(config)) = operator_config(entry, hcp) {
            objects.management.push(Desired::ConfigMap(config));
        }
        objects
            .management
            .push(Desired::Service(management_metrics_service(entry, hcp)));
        objects
            .management
            .push(Desired::Deployment(build_hosted_deployment(
                entry, inputs, hcp,
            )));
    }
    objects
}

/// The driver operator's metrics Service in the control-plane namespace: the standalone one,
/// without service-ca's annotation where the management cluster has none (Azure's).
fn management_metrics_service(entry: &DriverEntry, hcp: &HostedControlPlane) -> Service {
    let mut service = starter::build_metrics_service(entry);
    service.metadata.namespace = Some(hcp.namespace.clone());
    if !entry.hosted_service_ca {
        service.metadata.annotations = None;
    }
    service
}

/// The driver operator's config ConfigMap in the control-plane namespace, with the TLS profile
/// of the `HostedControlPlane` (as OpenShift's operator takes it there; Intermediate where it
/// sets none), when its driver has one.
fn operator_config(
    entry: &DriverEntry,
    hcp: &HostedControlPlane,
) -> Option<Result<ConfigMap, String>> {
    let profile = match &hcp.tls_profile {
        Some(Err(error)) => {
            starter::operator_config_name(entry)?;
            return Some(Err(error.clone()));
        }
        Some(Ok(profile)) => Some(profile),
        None => None,
    };
    let built = starter::build_operator_config_of(entry, profile, &hcp.tls_profile_field())?;
    Some(built.map(|mut config| {
        config.metadata.namespace = Some(hcp.namespace.clone());
        config
    }))
}

/// Why the driver operator's config ConfigMap cannot be written in the control-plane
/// namespace: the `HostedControlPlane`'s TLS profile is invalid (the field, and the fix).
pub fn operator_config_error(entry: &DriverEntry, hcp: &HostedControlPlane) -> Option<String> {
    operator_config(entry, hcp)?.err()
}

/// The driver operator's ServiceAccount in the control-plane namespace, with HyperShift's pull
/// secret.
fn management_service_account(entry: &DriverEntry, hcp: &HostedControlPlane) -> ServiceAccount {
    let mut sa = starter::build_service_account(entry);
    sa.metadata.namespace = Some(hcp.namespace.clone());
    sa.image_pull_secrets = Some(vec![LocalObjectReference {
        name: PULL_SECRET.to_owned(),
    }]);
    sa
}

/// What the driver operator may do in the control-plane namespace: manage exactly the kinds of
/// its management-side operands, hold its Lease, record Events, read the Secrets its
/// controller's hashes come from (by name), the ConfigMaps and its own pods, and read the
/// HostedControlPlane whose placement its controller follows.
fn management_role(
    entry: &DriverEntry,
    def: &DriverDef,
    inputs: &StarterInputs,
    hcp: &HostedControlPlane,
) -> Role {
    let mut render_inputs = Inputs::offline(def, Topology::External, &inputs.env);
    render_inputs.crds = OptionalCrds::all();
    render_inputs.trusted_ca_bundle = true;
    render_inputs.hosted = Some(hcp.clone());
    // The control-plane namespace holds the whole control plane's Secrets: only those the
    // controller mounts and the driver operator hashes (its credentials, its metrics serving
    // certificate) are readable, by name.
    let secrets: Vec<String> = def
        .credentials
        .iter()
        .map(|c| c.secret_name.clone())
        .chain(def.hashed_secrets.iter().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut rules: Vec<PolicyRule> = vec![rule(&[""], &["configmaps", "pods"], READ)];
    if !secrets.is_empty() {
        rules.push(PolicyRule {
            resource_names: Some(secrets),
            ..rule(&[""], &["secrets"], READ)
        });
    }
    rules.extend([
        // Its leader election Lease: created without a name the authorizer could check, then
        // read and renewed by name (no other component's Lease of the namespace).
        rule(&["coordination.k8s.io"], &["leases"], &["create"]),
        PolicyRule {
            resource_names: Some(vec![csi_kit::names::operator_lease(def)]),
            ..rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["get", "update", "patch"],
            )
        },
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
        rule(&["hypershift.openshift.io"], &["hostedcontrolplanes"], READ),
    ]);
    if let Ok(sides) = csi_kit::hosted::render_hosted(def, &render_inputs) {
        for (group, resource, _) in sides
            .management
            .iter()
            .filter_map(|operand| resource_of(operand, &hcp.namespace))
        {
            rules.push(rule(&[&group], &[&resource], MANAGE));
        }
    }
    dedupe(&mut rules);
    Role {
        metadata: meta(
            entry,
            format!("{}-role", entry.operator_deployment),
            Some(&hcp.namespace),
        ),
        rules: Some(rules),
    }
}

fn management_role_binding(
    entry: &DriverEntry,
    role: &Role,
    hcp: &HostedControlPlane,
) -> RoleBinding {
    RoleBinding {
        metadata: meta(
            entry,
            format!("{}-rolebinding", entry.operator_deployment),
            Some(&hcp.namespace),
        ),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: role.metadata.name.clone().unwrap_or_default(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: entry.operator_deployment.to_owned(),
            namespace: Some(hcp.namespace.clone()),
            ..Subject::default()
        }]),
    }
}

/// The driver operator's Deployment in the control-plane namespace: the standalone one (for
/// `External` topology), reaching the guest through its kubeconfig, placed and labelled as
/// HyperShift's control-plane pods, with the control-plane images and HyperShift's image.
pub fn build_hosted_deployment(
    entry: &DriverEntry,
    inputs: &StarterInputs,
    hcp: &HostedControlPlane,
) -> Deployment {
    let mut standalone_inputs = inputs.clone();
    standalone_inputs.topology = Topology::External;
    let mut deployment = starter::build_deployment(entry, &standalone_inputs);
    deployment.metadata.namespace = Some(hcp.namespace.clone());
    deployment
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    deployment
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            DESIRED_VERSION_ANNOTATION.to_owned(),
            hcp.release_version.clone(),
        );
    let Some(template) = deployment.spec.as_mut().map(|s| &mut s.template) else {
        return deployment;
    };
    let labels = template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    labels.insert(MANAGEMENT_API_ACCESS_LABEL.to_owned(), "true".to_owned());
    labels.insert("app".to_owned(), entry.operator_deployment.to_owned());
    // As OpenShift labels its hosted driver operators (HyperShift's own policies govern the
    // control-plane namespace; these keep the pods' labels OpenShift's).
    labels.extend(crate::network_policy::labels(&[
        crate::network_policy::ALL_EGRESS,
    ]));
    for (key, value) in &hcp.labels {
        labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    let Some(spec) = template.spec.as_mut() else {
        return deployment;
    };
    prefer_control_plane(
        spec.affinity.get_or_insert_with(Default::default),
        &hcp.namespace,
    );
    spec.priority_class_name = Some(PRIORITY_CLASS.to_owned());
    spec.node_selector = (!hcp.node_selector.is_empty()).then(|| hcp.node_selector.clone());
    let exists = |key: &str, effect: Option<&str>| Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: effect.map(str::to_owned),
        ..Toleration::default()
    };
    let mut tolerations = vec![
        exists("CriticalAddonsOnly", None),
        exists("node-role.kubernetes.io/master", Some("NoSchedule")),
        exists(CONTROL_PLANE_NODE_KEY, None),
        Toleration {
            key: Some(CLUSTER_NODE_KEY.to_owned()),
            operator: Some("Equal".to_owned()),
            value: Some(hcp.namespace.clone()),
            ..Toleration::default()
        },
    ];
    tolerations.extend(hcp.tolerations.iter().cloned());
    spec.tolerations = Some(tolerations);
    if let Some(user) = hcp.run_as_user {
        spec.security_context
            .get_or_insert_with(PodSecurityContext::default)
            .run_as_user = Some(user);
    }
    // First, as OpenShift's pod has it.
    spec.volumes.get_or_insert_with(Vec::new).insert(
        0,
        Volume {
            name: GUEST_KUBECONFIG_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(GUEST_KUBECONFIG_SECRET.to_owned()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
    );
    let driver_control_plane_image = control_plane_image_env(entry.driver_image_env);
    let passed = std::iter::once((
        driver_control_plane_image.as_str(),
        "DRIVER_CONTROL_PLANE_IMAGE",
    ))
    .chain(CONTROL_PLANE_IMAGE_ENVS.iter().map(|e| (*e, *e)))
    .chain(entry.hosted_image_envs.iter().copied())
    .chain(std::iter::once(("RELEASE_VERSION", "RELEASE_VERSION")))
    .chain(std::iter::once(("RUN_AS_USER", "RUN_AS_USER")));
    let mut env: Vec<EnvVar> = passed
        .filter_map(|(from, to)| {
            let value = inputs.env.get(from).filter(|v| !v.trim().is_empty())?;
            Some(EnvVar {
                name: to.to_owned(),
                value: Some(value.clone()),
                ..EnvVar::default()
            })
        })
        .collect();
    // HyperShift's token minter, where the driver operator's cloud identity needs it and its
    // image is known.
    let minter = entry.hosted_token_minter.zip(
        inputs
            .env
            .get(HYPERSHIFT_IMAGE_ENV)
            .filter(|image| !image.trim().is_empty()),
    );
    if let Some(container) = spec.containers.first_mut() {
        container.args.get_or_insert_with(Vec::new).push(format!(
            "--guest-kubeconfig={GUEST_KUBECONFIG_DIR}/kubeconfig"
        ));
        container.env.get_or_insert_with(Vec::new).append(&mut env);
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: GUEST_KUBECONFIG_VOLUME.to_owned(),
                mount_path: GUEST_KUBECONFIG_DIR.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        if minter.is_some() {
            container
                .volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: TOKEN_VOLUME.to_owned(),
                    mount_path: TOKEN_DIR.to_owned(),
                    ..VolumeMount::default()
                });
        }
    }
    if let Some(((namespace, service_account), image)) = minter {
        add_token_minter(spec, namespace, service_account, image);
    }
    deployment
}

/// The environment variable with HyperShift's image (its control-plane operator binary).
pub const HYPERSHIFT_IMAGE_ENV: &str = "HYPERSHIFT_IMAGE";
/// Where the token minter writes the guest ServiceAccount's token, and the operator reads it.
use csi_kit::hosted::TOKEN_DIR;
const TOKEN_VOLUME: &str = "web-identity-token";
/// The token minter's own mount of the guest kubeconfig, as HyperShift's pods have it.
const MINTER_KUBECONFIG_VOLUME: &str = csi_kit::hosted::GUEST_KUBECONFIG_VOLUME;

/// HyperShift's token minter, first in the pod as OpenShift's has it: it writes a token of the
/// guest ServiceAccount `namespace/service_account` (audience `openshift`) into a memory
/// volume the operator mounts, from the guest kubeconfig Secret.
fn add_token_minter(
    spec: &mut k8s_openapi::api::core::v1::PodSpec,
    namespace: &str,
    service_account: &str,
    image: &str,
) {
    let minter = csi_kit::hosted::token_minter(
        Some(image.to_owned()),
        namespace,
        service_account,
        TOKEN_VOLUME,
    );
    spec.containers.insert(0, minter);
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    volumes.insert(
        0,
        Volume {
            name: TOKEN_VOLUME.to_owned(),
            empty_dir: Some(Default::default()),
            ..Volume::default()
        },
    );
    volumes.insert(
        1,
        Volume {
            name: MINTER_KUBECONFIG_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(GUEST_KUBECONFIG_SECRET.to_owned()),
                default_mode: Some(0o644),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
    );
}

/// The variable of a driver's control-plane image: `AWS_EBS_DRIVER_IMAGE` gives
/// `AWS_EBS_DRIVER_CONTROL_PLANE_IMAGE`, as OpenShift's release payload names them.
pub fn control_plane_image_env(driver_image_env: &str) -> String {
    let stem = driver_image_env
        .strip_suffix("_IMAGE")
        .unwrap_or(driver_image_env);
    format!("{stem}_CONTROL_PLANE_IMAGE")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use api::operator_v1::LogLevel;

    const CP: &str = "clusters-demo";

    fn started(short_name: &str) -> Vec<(DriverEntry, DriverDef)> {
        let entry = crate::registry::find(short_name).unwrap();
        vec![(entry, drivers::by_name(short_name).unwrap())]
    }

    fn inputs(env: &[(&str, &str)]) -> StarterInputs {
        StarterInputs {
            topology: Topology::External,
            log_level: LogLevel::Normal,
            proxy: Default::default(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            operator_image: "example.com/storage-operator:v1".to_owned(),
            tls_profile: None,
        }
    }

    fn hcp() -> HostedControlPlane {
        HostedControlPlane {
            namespace: CP.to_owned(),
            release_version: "4.22.0".to_owned(),
            node_selector: BTreeMap::from([("pool".to_owned(), "cp".to_owned())]),
            labels: BTreeMap::from([("team".to_owned(), "storage".to_owned())]),
            tolerations: vec![Toleration {
                key: Some("custom".to_owned()),
                operator: Some("Exists".to_owned()),
                ..Toleration::default()
            }],
            run_as_user: Some(1001),
            ..HostedControlPlane::default()
        }
    }

    #[test]
    fn the_driver_operator_runs_in_the_control_plane_namespace_and_its_rbac_stays_in_the_guest() {
        let objects = hosted_starter_objects(&started("aws-ebs"), &inputs(&[]), &hcp());
        let keys = |objects: &[Desired]| -> Vec<(&'static str, String)> {
            objects.iter().map(Desired::key).collect()
        };
        let management = keys(&objects.management);
        assert_eq!(
            management,
            [
                (
                    "ServiceAccount",
                    format!("{CP}/aws-ebs-csi-driver-operator")
                ),
                ("Role", format!("{CP}/aws-ebs-csi-driver-operator-role")),
                (
                    "RoleBinding",
                    format!("{CP}/aws-ebs-csi-driver-operator-rolebinding")
                ),
                (
                    "ConfigMap",
                    format!("{CP}/aws-ebs-csi-driver-operator-config")
                ),
                (
                    "Service",
                    format!("{CP}/aws-ebs-csi-driver-operator-metrics")
                ),
                ("Deployment", format!("{CP}/aws-ebs-csi-driver-operator")),
            ]
        );
        let guest = keys(&objects.guest);
        assert!(
            guest
                .iter()
                .all(|(kind, _)| !["Deployment", "ConfigMap", "Service"].contains(kind))
        );
        assert!(guest.iter().any(|(kind, name)| *kind == "ClusterRole"
            && name == "aws-ebs-csi-driver-operator-clusterrole"));
        assert!(
            guest
                .iter()
                .filter(|(kind, _)| *kind == "ServiceAccount")
                .all(|(_, name)| name.starts_with("openshift-cluster-csi-drivers/"))
        );
    }

    /// AWS EBS's volume tags controller runs with a hosted control plane only: the driver
    /// operator's guest ClusterRole may patch PVs there, whatever topology the guest's
    /// Infrastructure says, and the standalone one may not.
    #[test]
    fn only_the_hosted_aws_ebs_operator_may_patch_persistent_volumes() {
        let may_patch = |objects: &[Desired], operator: &str| {
            let name = format!("{operator}-clusterrole");
            let role = objects
                .iter()
                .find_map(|d| match d {
                    Desired::ClusterRole(role) if role.metadata.name.as_deref() == Some(&name) => {
                        Some(role)
                    }
                    _ => None,
                })
                .expect("the driver operator's ClusterRole");
            opkit::rbac::allows(
                role.rules.as_deref().unwrap_or_default(),
                "",
                "persistentvolumes",
                "patch",
            )
        };
        let mut guest_says = inputs(&[]);
        guest_says.topology = Topology::HighlyAvailable;
        let hosted = hosted_starter_objects(&started("aws-ebs"), &guest_says, &hcp());
        assert!(may_patch(&hosted.guest, "aws-ebs-csi-driver-operator"));
        let standalone = starter_objects(&started("aws-ebs"), &guest_says);
        assert!(!may_patch(&standalone, "aws-ebs-csi-driver-operator"));
        let other = hosted_starter_objects(&started("azure-disk"), &inputs(&[]), &hcp());
        assert!(!may_patch(&other.guest, "azure-disk-csi-driver-operator"));
    }

    #[test]
    fn the_management_role_covers_what_the_driver_operator_writes_there_and_no_more() {
        let objects = hosted_starter_objects(&started("aws-ebs"), &inputs(&[]), &hcp());
        let role = objects
            .management
            .iter()
            .find_map(|d| match d {
                Desired::Role(r) => Some(r),
                _ => None,
            })
            .unwrap();
        let rules = role.rules.as_deref().unwrap();
        for (group, resource) in [
            ("apps", "deployments"),
            ("policy", "poddisruptionbudgets"),
            ("", "serviceaccounts"),
            ("", "services"),
            ("", "configmaps"),
            ("coordination.k8s.io", "leases"),
        ] {
            assert!(
                opkit::rbac::allows(rules, group, resource, "patch"),
                "{group}/{resource}"
            );
        }
        assert!(opkit::rbac::allows(
            rules,
            "hypershift.openshift.io",
            "hostedcontrolplanes",
            "watch"
        ));
        for (group, resource) in [
            ("apps", "daemonsets"),
            ("storage.k8s.io", "csidrivers"),
            ("rbac.authorization.k8s.io", "rolebindings"),
        ] {
            assert!(
                !opkit::rbac::allows(rules, group, resource, "get"),
                "{group}/{resource} is the guest's"
            );
        }
        assert!(!opkit::rbac::allows(rules, "", "secrets", "patch"));
        // Its own Lease, and no other component's of the control plane.
        let lease = "aws-ebs-csi-driver-operator-lock";
        assert!(opkit::rbac::allows_name(
            rules,
            "coordination.k8s.io",
            "leases",
            "patch",
            lease
        ));
        assert!(!opkit::rbac::allows_name(
            rules,
            "coordination.k8s.io",
            "leases",
            "patch",
            "kube-controller-manager"
        ));
    }

    #[test]
    fn the_driver_operator_reaches_the_guest_and_is_placed_as_a_control_plane_pod() {
        let deployment = build_hosted_deployment(
            &crate::registry::find("aws-ebs").unwrap(),
            &inputs(&[
                ("AWS_EBS_DRIVER_CONTROL_PLANE_IMAGE", "mgmt/driver:1"),
                ("LIVENESS_PROBE_CONTROL_PLANE_IMAGE", "mgmt/probe:1"),
                ("HYPERSHIFT_IMAGE", "example.com/hypershift:1"),
                ("RELEASE_VERSION", "4.22.0"),
                ("KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE", ""),
            ]),
            &hcp(),
        );
        assert_eq!(deployment.metadata.namespace.as_deref(), Some(CP));
        assert_eq!(
            deployment.metadata.labels.as_ref().unwrap()[MANAGED_BY_LABEL],
            MANAGED_BY
        );
        let template = &deployment.spec.as_ref().unwrap().template;
        let labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels[MANAGEMENT_API_ACCESS_LABEL], "true");
        assert_eq!(labels["team"], "storage");
        let spec = template.spec.as_ref().unwrap();
        assert_eq!(spec.priority_class_name.as_deref(), Some(PRIORITY_CLASS));
        assert_eq!(spec.node_selector.as_ref().unwrap()["pool"], "cp");
        assert_eq!(
            spec.tolerations
                .as_ref()
                .unwrap()
                .last()
                .unwrap()
                .key
                .as_deref(),
            Some("custom")
        );
        assert_eq!(
            spec.security_context.as_ref().unwrap().run_as_user,
            Some(1001)
        );
        // As OpenShift's pod: the token minter's two volumes, then the guest kubeconfig.
        let volumes: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(
            volumes[..3],
            [
                TOKEN_VOLUME,
                MINTER_KUBECONFIG_VOLUME,
                GUEST_KUBECONFIG_VOLUME
            ]
        );
        // HyperShift's token minter first, for the guest controller's ServiceAccount.
        let minter = &spec.containers[0];
        assert_eq!(minter.name, "token-minter");
        assert_eq!(minter.image.as_deref(), Some("example.com/hypershift:1"));
        assert!(
            minter
                .args
                .iter()
                .flatten()
                .any(|a| a == "--service-account-name=aws-ebs-csi-driver-controller-sa")
        );
        let container = &spec.containers[1];
        assert_eq!(container.name, "operator");
        assert!(
            container
                .args
                .iter()
                .flatten()
                .any(|a| a == "--guest-kubeconfig=/etc/guest-kubeconfig/kubeconfig")
        );
        assert!(
            container
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == TOKEN_VOLUME && m.mount_path == TOKEN_DIR),
            "the operator reads the minted token"
        );
        let env: BTreeMap<&str, &str> = container
            .env
            .iter()
            .flatten()
            .filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?)))
            .collect();
        assert_eq!(env["DRIVER_CONTROL_PLANE_IMAGE"], "mgmt/driver:1");
        assert_eq!(env["LIVENESS_PROBE_CONTROL_PLANE_IMAGE"], "mgmt/probe:1");
        assert_eq!(env["HYPERSHIFT_IMAGE"], "example.com/hypershift:1");
        assert_eq!(env["RELEASE_VERSION"], "4.22.0");
        assert!(
            !env.contains_key("KUBE_RBAC_PROXY_CONTROL_PLANE_IMAGE"),
            "empty: not passed"
        );
        assert_eq!(
            control_plane_image_env("MANILA_DRIVER_IMAGE"),
            "MANILA_DRIVER_CONTROL_PLANE_IMAGE"
        );
    }
}
