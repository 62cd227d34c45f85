//! The volume data source validator (kubernetes-csi's `volume-data-source-validator`), as
//! OpenShift's storage operator installs it with its `VolumeDataSourceValidatorStarter`: the
//! `VolumePopulator` CRD (`volumepopulators.populator.storage.k8s.io`), where volume populators
//! register the kinds they fill volumes from, and a Deployment that watches claims whose
//! `dataSourceRef` names a kind no populator registered and says so in an Event on the claim
//! (without it such a claim stays Pending without a word). Installed on every platform,
//! OpenShift or not, while Storage is Managed. Pure builders and conditions; the starter
//! applies them.
//!
//! The objects and their names are OpenShift's (`assets/volumedatasourcevalidator/`): a
//! ServiceAccount, ClusterRole and ClusterRoleBinding `volume-data-source-validator`, and the
//! Deployment of that name in the operator's namespace, running the image of
//! `VOLUME_DATA_SOURCE_VALIDATOR_IMAGE` (upstream's release otherwise).

use std::collections::BTreeMap;

use api::operator_v1::{ConditionStatus, OperatorCondition};
use csi_kit::Topology;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, ResourceRequirements, ServiceAccount,
    Toleration,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceValidation,
    JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use opkit::conditions::condition;
use opkit::rbac::rule;

use crate::failure::WriteFailure;
use crate::names::OPERATOR_NAMESPACE;
use crate::ownership::NotOurs;
use crate::starter::STARTER_LABEL;

/// The name of every object of the validator.
pub const NAME: &str = "volume-data-source-validator";
/// The environment variable naming its image, as OpenShift's.
pub const IMAGE_ENV: &str = "VOLUME_DATA_SOURCE_VALIDATOR_IMAGE";
/// Its image when [`IMAGE_ENV`] is unset: upstream's release.
pub const DEFAULT_IMAGE: &str = "registry.k8s.io/sig-storage/volume-data-source-validator:v1.3.0";
/// The CRD it serves.
pub const CRD_NAME: &str = "volumepopulators.populator.storage.k8s.io";
/// The starter's condition prefix.
pub const STARTER: &str = "VolumeDataSourceValidatorStarter";
/// The static objects' (ServiceAccount, RBAC, CRD) condition prefix.
pub const STATIC: &str = "VolumeDataSourceValidatorStaticController";
/// The Deployment's condition prefix.
pub const DEPLOYMENT: &str = "VolumeDataSourceValidatorDeploymentController";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some([(STARTER_LABEL.to_owned(), NAME.to_owned())].into()),
        ..Default::default()
    }
}

/// Its ServiceAccount.
pub fn build_service_account() -> ServiceAccount {
    ServiceAccount {
        metadata: meta(NAME, Some(OPERATOR_NAMESPACE)),
        ..Default::default()
    }
}

/// What it may do: read populators and claims, report Events, hold its Lease, and check the
/// tokens of whoever reads its metrics.
pub fn build_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: meta(NAME, None),
        rules: Some(vec![
            rule(
                &["populator.storage.k8s.io"],
                &["volumepopulators"],
                &["get", "list", "watch"],
            ),
            rule(
                &[""],
                &["persistentvolumeclaims"],
                &["get", "list", "watch"],
            ),
            rule(
                &[""],
                &["events"],
                &["list", "watch", "create", "update", "patch"],
            ),
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            ),
            rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
        ]),
        ..Default::default()
    }
}

/// Binds [`build_cluster_role`] to its ServiceAccount.
pub fn build_cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(NAME, None),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: NAME.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: NAME.into(),
            namespace: Some(OPERATOR_NAMESPACE.into()),
            ..Default::default()
        }]),
    }
}

fn string() -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some("string".into()),
        ..Default::default()
    }
}

/// The `VolumePopulator` CRD (`populator.storage.k8s.io/v1beta1`, cluster-scoped): a
/// registration naming, in `sourceKind`, the group and kind of the objects a populator fills
/// volumes from.
pub fn build_crd() -> CustomResourceDefinition {
    let source_kind = JSONSchemaProps {
        description: Some(
            "The group and kind of the objects this populator fills volumes from (what a claim's dataSourceRef names)."
                .into(),
        ),
        type_: Some("object".into()),
        properties: Some(BTreeMap::from([
            ("group".to_owned(), string()),
            ("kind".to_owned(), string()),
        ])),
        required: Some(vec!["group".into(), "kind".into()]),
        ..Default::default()
    };
    let schema = JSONSchemaProps {
        description: Some(
            "VolumePopulator registers a volume populator: claims whose dataSourceRef names its sourceKind are valid."
                .into(),
        ),
        type_: Some("object".into()),
        properties: Some(BTreeMap::from([
            ("apiVersion".to_owned(), string()),
            ("kind".to_owned(), string()),
            (
                "metadata".to_owned(),
                JSONSchemaProps {
                    type_: Some("object".into()),
                    ..Default::default()
                },
            ),
            ("sourceKind".to_owned(), source_kind),
        ])),
        required: Some(vec!["sourceKind".into()]),
        ..Default::default()
    };
    let mut metadata = meta(CRD_NAME, None);
    // The Kubernetes project's API (KEP 1495, reviewed in kubernetes/enhancements#2934).
    metadata.annotations = Some(
        [(
            "api-approved.kubernetes.io".to_owned(),
            "https://github.com/kubernetes/enhancements/pull/2934".to_owned(),
        )]
        .into(),
    );
    CustomResourceDefinition {
        metadata,
        spec: CustomResourceDefinitionSpec {
            group: "populator.storage.k8s.io".into(),
            names: CustomResourceDefinitionNames {
                kind: "VolumePopulator".into(),
                list_kind: Some("VolumePopulatorList".into()),
                plural: "volumepopulators".into(),
                singular: Some("volumepopulator".into()),
                ..Default::default()
            },
            scope: "Cluster".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1beta1".into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                additional_printer_columns: Some(vec![CustomResourceColumnDefinition {
                    json_path: ".sourceKind".into(),
                    name: "SourceKind".into(),
                    type_: "string".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// Its Deployment: one leader-elected replica in the operator's namespace (on control-plane
/// nodes where the cluster has them), metrics on loopback only, with the log level of Storage.
pub fn build_deployment(image: &str, verbosity: u8, topology: Topology) -> Deployment {
    let labels: BTreeMap<String, String> = [("name".to_owned(), NAME.to_owned())].into();
    let args = vec![
        format!("--v={verbosity}"),
        "--http-endpoint=127.0.0.1:8443".into(),
        "--leader-election=true".into(),
        // OpenShift's defaults for the control plane's components (library-go's
        // LeaderElectionDefaulting): survive an API server outage of two minutes.
        "--leader-election-lease-duration=137s".into(),
        "--leader-election-renew-deadline=107s".into(),
        "--leader-election-retry-period=26s".into(),
        format!("--leader-election-namespace={OPERATOR_NAMESPACE}"),
    ];
    let control_plane = topology.control_plane_node_label();
    let mut tolerations = vec![Toleration {
        key: Some("CriticalAddonsOnly".into()),
        operator: Some("Exists".into()),
        ..Default::default()
    }];
    tolerations.extend(control_plane.map(|label| Toleration {
        key: Some(label.into()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    }));
    let container = Container {
        name: NAME.into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(args),
        ports: Some(vec![ContainerPort {
            container_port: 8443,
            name: Some("validator-http".into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(
                [
                    ("cpu".to_owned(), Quantity("10m".into())),
                    ("memory".to_owned(), Quantity("50Mi".into())),
                ]
                .into(),
            ),
            ..Default::default()
        }),
        security_context: Some(opkit::install::restricted_container()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    };
    let mut template_labels = labels.clone();
    if topology.is_openshift() {
        // OpenShift's network policies of the namespace let these pods reach DNS and the API.
        for key in [
            "openshift.storage.network-policy.dns",
            "openshift.storage.network-policy.api-server",
        ] {
            template_labels.insert(key.into(), "allow".into());
        }
    }
    let annotations = topology.is_openshift().then(|| {
        BTreeMap::from([
            (
                "target.workload.openshift.io/management".to_owned(),
                r#"{"effect": "PreferredDuringScheduling"}"#.to_owned(),
            ),
            (
                "openshift.io/required-scc".to_owned(),
                "restricted-v2".to_owned(),
            ),
        ])
    });
    Deployment {
        metadata: meta(NAME, Some(OPERATOR_NAMESPACE)),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(template_labels),
                    annotations,
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(NAME.into()),
                    node_selector: control_plane
                        .map(|label| [(label.to_owned(), String::new())].into()),
                    tolerations: Some(tolerations),
                    priority_class_name: topology
                        .is_openshift()
                        .then(|| "system-cluster-critical".into()),
                    containers: vec![container],
                    security_context: Some(pod_security(topology)),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod's security: non-root everywhere. Upstream's image declares no user, so on plain
/// Kubernetes the pod names one (`nobody`); on OpenShift the restricted SCC assigns the
/// namespace's UID, and a fixed one would be refused.
fn pod_security(topology: Topology) -> k8s_openapi::api::core::v1::PodSecurityContext {
    let mut security = opkit::install::restricted_pod();
    if !topology.is_openshift() {
        security.run_as_user = Some(NOBODY);
        security.run_as_group = Some(NOBODY);
    }
    security
}

/// The user and group of the validator on plain Kubernetes.
const NOBODY: i64 = 65534;

/// The validator's conditions: its starter's Degraded (it always starts while Managed), its
/// static objects' Degraded (SyncError naming what could not be written), and its
/// Deployment's Progressing and Degraded (from the Deployment as observed, or SyncError when
/// it could not be written), as OpenShift names them. `failures` are the validator's own
/// failed writes of this pass; `not_ours` its objects someone else made, which make their
/// part Degraded (`ObjectNotOurs`) until they are gone.
pub fn conditions(
    deployment: Option<&Deployment>,
    failures: &[&WriteFailure],
    not_ours: &[NotOurs],
) -> Vec<OperatorCondition> {
    let static_type = format!("{STATIC}Degraded");
    let deployment_type = format!("{DEPLOYMENT}Degraded");
    let (static_degraded, mut workload) = crate::failure::part_conditions(
        &static_type,
        &deployment_type,
        crate::starter::deployment_conditions(
            &format!("{DEPLOYMENT}Progressing"),
            &deployment_type,
            NAME,
            deployment,
        ),
        failures,
    );
    let (foreign_deployment, foreign_static): (Vec<&NotOurs>, Vec<&NotOurs>) =
        not_ours.iter().partition(|n| n.kind == "Deployment");
    let static_degraded = with_not_ours(static_degraded, &foreign_static);
    if !foreign_deployment.is_empty() {
        let current = workload
            .iter()
            .position(|c| c.type_ == deployment_type)
            .map(|i| workload.remove(i))
            .unwrap_or_else(|| {
                condition(
                    deployment_type.clone(),
                    ConditionStatus::False,
                    "AsExpected",
                    "",
                )
            });
        workload.push(with_not_ours(current, &foreign_deployment));
    }
    let mut out = vec![
        condition(
            format!("{STARTER}Degraded"),
            ConditionStatus::False,
            "AsExpected",
            "",
        ),
        static_degraded,
    ];
    out.extend(workload);
    out
}

/// `degraded`, made True by objects someone else made: reason `ObjectNotOurs` unless a write
/// failed too (SyncError stays, and the messages are joined).
fn with_not_ours(mut degraded: OperatorCondition, not_ours: &[&NotOurs]) -> OperatorCondition {
    if not_ours.is_empty() {
        return degraded;
    }
    let mut messages: Vec<String> = not_ours.iter().map(|n| n.message()).collect();
    if degraded.status == ConditionStatus::True {
        messages.insert(0, degraded.message.clone().unwrap_or_default());
    } else {
        degraded.status = ConditionStatus::True;
        degraded.reason = Some("ObjectNotOurs".into());
    }
    degraded.message = Some(messages.join("\n"));
    degraded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objects_are_openshifts() {
        let deployment = build_deployment("example.com/v:1", 2, Topology::HighlyAvailable);
        assert_eq!(deployment.metadata.name.as_deref(), Some(NAME));
        assert_eq!(
            deployment.metadata.namespace.as_deref(),
            Some("openshift-cluster-storage-operator")
        );
        let pod = deployment.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some(NAME));
        assert_eq!(
            pod.node_selector,
            Some([("node-role.kubernetes.io/master".to_owned(), String::new())].into())
        );
        let container = &pod.containers[0];
        assert_eq!(container.image.as_deref(), Some("example.com/v:1"));
        let args = container.args.clone().unwrap();
        assert!(args.contains(&"--v=2".to_owned()), "{args:?}");
        assert!(
            args.contains(&"--leader-election-namespace=openshift-cluster-storage-operator".into())
        );
        let binding = build_cluster_role_binding();
        assert_eq!(
            binding.role_ref.name,
            build_cluster_role().metadata.name.unwrap()
        );
        let crd = build_crd();
        assert_eq!(crd.metadata.name.as_deref(), Some(CRD_NAME));
        assert_eq!(
            format!("{}.{}", crd.spec.names.plural, crd.spec.group),
            CRD_NAME
        );
        // On OpenShift the SCC assigns the user; elsewhere the pod names a non-root one (the
        // image declares none, and runAsNonRoot alone refuses to start it).
        assert_eq!(pod.security_context.as_ref().unwrap().run_as_user, None);
        // Plain Kubernetes without control-plane nodes: no node selector.
        let anywhere = build_deployment(
            "i",
            2,
            Topology::Kubernetes {
                control_plane_nodes: false,
            },
        );
        let anywhere = anywhere.spec.unwrap().template.spec.unwrap();
        assert_eq!(anywhere.node_selector, None);
        assert_eq!(anywhere.security_context.unwrap().run_as_user, Some(65534));
    }

    #[test]
    fn failures_show_in_the_part_they_belong_to() {
        let failure = WriteFailure {
            kind: "CustomResourceDefinition".into(),
            object: CRD_NAME.into(),
            message: "applying CustomResourceDefinition: refused (403)".into(),
            not_ours: false,
        };
        let find = |conditions: &[OperatorCondition], type_: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == type_)
                .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
                .unwrap()
        };
        let clean = conditions(None, &[], &[]);
        assert_eq!(
            find(&clean, "VolumeDataSourceValidatorStaticControllerDegraded"),
            (ConditionStatus::False, "AsExpected".into())
        );
        assert_eq!(
            find(
                &clean,
                "VolumeDataSourceValidatorDeploymentControllerProgressing"
            )
            .0,
            ConditionStatus::True,
            "waiting for the Deployment"
        );
        let deployment_failure = WriteFailure {
            kind: "Deployment".into(),
            object: format!("{OPERATOR_NAMESPACE}/{NAME}"),
            message: "applying Deployment: refused (403)".into(),
            not_ours: false,
        };
        let failed = conditions(None, &[&failure, &deployment_failure], &[]);
        for type_ in [
            "VolumeDataSourceValidatorStaticControllerDegraded",
            "VolumeDataSourceValidatorDeploymentControllerDegraded",
        ] {
            assert_eq!(
                find(&failed, type_),
                (ConditionStatus::True, "SyncError".into())
            );
        }
    }

    #[test]
    fn objects_someone_else_made_make_their_part_degraded_naming_them() {
        let service_account = NotOurs {
            kind: "ServiceAccount",
            object: format!("{OPERATOR_NAMESPACE}/{NAME}"),
        };
        let deployment = NotOurs {
            kind: "Deployment",
            object: format!("{OPERATOR_NAMESPACE}/{NAME}"),
        };
        let failure = WriteFailure {
            kind: "ClusterRole".into(),
            object: NAME.into(),
            message: "applying ClusterRole: refused (403)".into(),
            not_ours: false,
        };
        let out = conditions(None, &[&failure], &[service_account, deployment]);
        let get = |type_: &str| out.iter().find(|c| c.type_ == type_).unwrap();
        let static_degraded = get("VolumeDataSourceValidatorStaticControllerDegraded");
        assert_eq!(static_degraded.status, ConditionStatus::True);
        // The failed write keeps its reason; both are said.
        assert_eq!(static_degraded.reason.as_deref(), Some("SyncError"));
        let message = static_degraded.message.clone().unwrap();
        assert!(message.contains("refused (403)"), "{message}");
        assert!(
            message.contains(&format!(
                "ServiceAccount {OPERATOR_NAMESPACE}/{NAME} exists and was made neither"
            )) && message.contains("delete it"),
            "{message}"
        );
        let deployment_degraded = get("VolumeDataSourceValidatorDeploymentControllerDegraded");
        assert_eq!(deployment_degraded.status, ConditionStatus::True);
        assert_eq!(deployment_degraded.reason.as_deref(), Some("ObjectNotOurs"));
        assert!(
            deployment_degraded
                .message
                .as_deref()
                .unwrap()
                .starts_with(&format!("Deployment {OPERATOR_NAMESPACE}/{NAME} exists")),
            "{deployment_degraded:?}"
        );
        assert_eq!(
            out.iter()
                .filter(|c| c.type_ == "VolumeDataSourceValidatorDeploymentControllerDegraded")
                .count(),
            1
        );
    }
}
