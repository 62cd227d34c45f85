//! The cluster storage operator's least privilege on a real API server (see the crate docs for
//! how to run), as the ServiceAccount of `deploy/kubernetes/storage-operator.yaml`: it reads no
//! Secret anywhere and may escalate and bind only the roles it writes, by name; and yet it
//! installs every platform's driver operators, whose Roles grant what it does not hold (their
//! Secrets), without a single refusal.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::operator_v1::ClusterCSIDriver;
use e2e::{Identity, cleanup, cso, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use storage_operator::manifests::NAME;
use storage_operator::plan::OPERATOR_NAMESPACE;
use storage_operator::registry::{self, DRIVER_NAMESPACE};

/// A namespace of nobody's, with a Secret in it.
const NS: &str = "e2e-cso-least-privilege";
const SECRET: &str = "e2e-cso-not-its-secret";

/// Whether the API server's authorizer allows `verb` on `resource` (of `group`) `name` in
/// `namespace` to the cluster storage operator's ServiceAccount, as a SubjectAccessReview says.
async fn cso_may(
    admin: &Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{OPERATOR_NAMESPACE}:{NAME}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{OPERATOR_NAMESPACE}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

/// The status code and message of a refused request.
fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected the API server to refuse, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn reads_no_secret_and_escalates_only_the_roles_it_writes() {
    let admin = e2e::admin().await;
    let identity = cso::prepare(&admin).await;
    e2e::install::ensure_namespace(&admin, NS).await;
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": SECRET}, "stringData": {"password": "e2e"}}),
    )
    .unwrap();
    for namespace in [NS, "kube-system"] {
        let secrets: Api<Secret> = Api::namespaced(admin.clone(), namespace);
        if secrets.get_opt(SECRET).await.unwrap().is_none() {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .unwrap();
        }
    }

    // Requests that must be refused go through a client of their own, so that the operator's
    // identity keeps its record clean.
    let probe = Identity::service_account(&admin, OPERATOR_NAMESPACE, NAME).await;
    for namespace in [NS, "kube-system"] {
        let (code, message) = refused(
            Api::<Secret>::namespaced(probe.client.clone(), namespace)
                .get(SECRET)
                .await,
        );
        assert_eq!(code, 403, "{message}");
    }
    let (code, message) = refused(
        Api::<Secret>::all(probe.client.clone())
            .list(&Default::default())
            .await,
    );
    assert_eq!(code, 403, "{message}");

    // Writing a role it does not manage, or binding cluster-admin, is an escalation: the
    // CSIDriverDeployment controller's rules let it write roles and bindings of any name, but
    // only with permissions it holds.
    let apply = PatchParams::apply("e2e-least-privilege");
    let (code, message) = refused(
        Api::<ClusterRole>::all(probe.client.clone())
            .patch(
                "e2e-cso-not-its-role",
                &apply,
                &Patch::Apply(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": "e2e-cso-not-its-role"},
                    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
                })),
            )
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("not currently held"), "{message}");
    let (code, message) = refused(
        Api::<ClusterRoleBinding>::all(probe.client.clone())
            .patch(
                "e2e-cso-not-its-binding",
                &apply,
                &Patch::Apply(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "e2e-cso-not-its-binding"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
                    "subjects": [{"kind": "ServiceAccount", "name": NAME,
                        "namespace": OPERATOR_NAMESPACE}]
                })),
            )
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert!(message.contains("not currently held"), "{message}");

    // What the authorizer says, for the checks kube-apiserver makes with a name.
    let rbac = "rbac.authorization.k8s.io";
    let gcp = registry::find("gcp-pd").unwrap().operator_deployment;
    let aws = registry::find("aws-ebs").unwrap().operator_deployment;
    let manila = registry::find("openstack-manila")
        .unwrap()
        .operator_deployment;
    let manila_operands = drivers::by_name("openstack-manila").unwrap().namespace;
    let shared = csi_kit::rbac::CONFIGMAP_AND_SECRET_READER_ROLE;
    let gcp_role = format!("{gcp}-clusterrole");
    let aws_role = format!("{aws}-role");
    let manila_role = format!("{manila}-role");
    for (verb, group, resource, namespace, name, expected) in [
        ("get", "", "secrets", "kube-system", SECRET, false),
        ("get", "", "secrets", NS, SECRET, false),
        ("list", "", "secrets", "", "", false),
        ("watch", "", "secrets", DRIVER_NAMESPACE, "", false),
        (
            "get",
            "",
            "secrets",
            DRIVER_NAMESPACE,
            "ebs-cloud-credentials",
            false,
        ),
        ("get", "", "configmaps", "kube-system", "", false),
        // The driver operators' config ConfigMaps, by name, and no other ConfigMap there.
        (
            "patch",
            "",
            "configmaps",
            DRIVER_NAMESPACE,
            "aws-ebs-csi-driver-operator-config",
            true,
        ),
        ("get", "", "configmaps", DRIVER_NAMESPACE, "", false),
        (
            "get",
            "",
            "configmaps",
            DRIVER_NAMESPACE,
            "aws-ebs-cloud-config",
            false,
        ),
        // APIServer/cluster (its TLS profile), by name.
        (
            "get",
            "config.openshift.io",
            "apiservers",
            "",
            "cluster",
            true,
        ),
        ("list", "config.openshift.io", "apiservers", "", "", false),
        // Its own roles, by name, and nothing else.
        ("create", rbac, "clusterroles", "", gcp_role.as_str(), true),
        (
            "escalate",
            rbac,
            "clusterroles",
            "",
            gcp_role.as_str(),
            true,
        ),
        ("bind", rbac, "clusterroles", "", gcp_role.as_str(), true),
        ("escalate", rbac, "clusterroles", "", shared, true),
        ("bind", rbac, "clusterroles", "", shared, false),
        ("escalate", rbac, "clusterroles", "", "cluster-admin", false),
        ("bind", rbac, "clusterroles", "", "cluster-admin", false),
        ("escalate", rbac, "clusterroles", "", "", false),
        (
            "escalate",
            rbac,
            "roles",
            DRIVER_NAMESPACE,
            aws_role.as_str(),
            true,
        ),
        (
            "bind",
            rbac,
            "roles",
            DRIVER_NAMESPACE,
            aws_role.as_str(),
            true,
        ),
        ("escalate", rbac, "roles", DRIVER_NAMESPACE, "admin", false),
        (
            "escalate",
            rbac,
            "roles",
            "kube-system",
            aws_role.as_str(),
            false,
        ),
        (
            "escalate",
            rbac,
            "roles",
            &manila_operands,
            manila_role.as_str(),
            true,
        ),
        (
            "escalate",
            rbac,
            "roles",
            &manila_operands,
            aws_role.as_str(),
            false,
        ),
    ] {
        assert_eq!(
            cso_may(&admin, verb, group, resource, namespace, name).await,
            expected,
            "{verb} {group}/{resource} {namespace}/{name}"
        );
    }

    for namespace in [NS, "kube-system"] {
        cleanup::delete_and_wait(&Api::<Secret>::namespaced(admin.clone(), namespace), SECRET)
            .await;
    }
    cleanup::delete_namespace(&admin, NS).await;
    identity.assert_never_refused();
}

/// Every platform of the catalogue, and the driver operators the cluster storage operator
/// starts there (as `registry`'s own table of them).
const PLATFORMS: &[(&str, &[&str])] = &[
    ("AWS", &["aws-ebs"]),
    ("Azure", &["azure-disk", "azure-file"]),
    ("GCP", &["gcp-pd"]),
    ("IBMCloud", &["ibm-vpc-block"]),
    ("OpenStack", &["openstack-manila", "openstack-cinder"]),
    ("PowerVS", &["powervs-block"]),
    ("VSphere", &["vsphere"]),
];

/// On each platform in turn, the operator installs its driver operators: their Deployment,
/// ClusterRole and Roles (which grant Secrets where they run, which it cannot read itself) and
/// bindings, and their ClusterCSIDriver, and is never refused a request.
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn installs_every_platforms_driver_operators_without_holding_their_secrets() {
    let admin = e2e::admin().await;
    for (platform, shorts) in PLATFORMS {
        let declared = e2e::ensure_platform(&admin, json!({"type": platform})).await;
        if !declared {
            // The cluster's own platform: storage_operator_scenarios covers it.
            eprintln!("the cluster declares its own platform; {platform} is not tried");
            continue;
        }
        // Installed anew each time: the previous platform's cleanup deleted the driver
        // namespace, and with it the operator's Role there, as a user would reinstall it.
        let identity = cso::prepare(&admin).await;
        let running = cso::start(&identity);
        for short in *shorts {
            let entry = registry::find(short).unwrap();
            let def = drivers::by_name(short).unwrap();
            let operator = entry.operator_deployment;
            wait_for(&format!("{platform}: Deployment {operator}"), async || {
                Api::<Deployment>::namespaced(admin.clone(), DRIVER_NAMESPACE)
                    .get_opt(operator)
                    .await
                    .unwrap()
            })
            .await;
            wait_for(
                &format!("{platform}: ClusterCSIDriver of {short}"),
                async || {
                    Api::<ClusterCSIDriver>::all(admin.clone())
                        .get_opt(entry.csi_driver_name)
                        .await
                        .unwrap()
                },
            )
            .await;
            let cluster_role = format!("{operator}-clusterrole");
            wait_for(
                &format!("{platform}: ClusterRole {cluster_role}"),
                async || {
                    Api::<ClusterRole>::all(admin.clone())
                        .get_opt(&cluster_role)
                        .await
                        .unwrap()
                },
            )
            .await;
            wait_for(&format!("{platform}: its ClusterRoleBinding"), async || {
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .get_opt(&format!("{operator}-clusterrolebinding"))
                    .await
                    .unwrap()
            })
            .await;
            let namespaces = std::iter::once(def.namespace.as_str()).chain(
                storage_operator::starter::separate_operand_namespace(&def)
                    .map(|_| DRIVER_NAMESPACE),
            );
            for namespace in namespaces {
                let role = wait_for(
                    &format!("{platform}: Role {operator}-role in {namespace}"),
                    async || {
                        Api::<Role>::namespaced(admin.clone(), namespace)
                            .get_opt(&format!("{operator}-role"))
                            .await
                            .unwrap()
                    },
                )
                .await;
                wait_for(
                    &format!("{platform}: its RoleBinding in {namespace}"),
                    async || {
                        Api::<RoleBinding>::namespaced(admin.clone(), namespace)
                            .get_opt(&format!("{operator}-rolebinding"))
                            .await
                            .unwrap()
                    },
                )
                .await;
                // It granted the driver operator its Secrets there, which it cannot read.
                let rules = role.rules.unwrap_or_default();
                assert!(
                    opkit::rbac::allows(&rules, "", "secrets", "get"),
                    "{short}: the Role in {namespace} grants Secrets"
                );
                assert!(
                    !cso_may(&admin, "get", "", "secrets", namespace, "").await,
                    "{short}: the operator reads no Secret in {namespace}"
                );
            }
        }
        running.stop().await;
        for short in *shorts {
            cso::finish(&admin, &identity, short).await;
        }
        cleanup::undeclare_platform(&admin, declared).await;
    }
    cleanup::delete_labelled(
        &Api::<ClusterRole>::all(admin.clone()),
        &format!("{}=true", csi_kit::names::SHARED_ROLE_LABEL),
    )
    .await;
}
