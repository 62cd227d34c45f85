//! The install manifests of the build controller (`deploy/<flavour>/builds.yaml`): its
//! namespace, ServiceAccount, least-privilege RBAC and Deployment, plus the Build CRD on plain
//! Kubernetes. On OpenShift the Deployment runs with a label selector, so it handles only the
//! builds labelled for it and never races openshift-controller-manager.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opkit::rbac::{MANAGE, READ, rule};
use serde_json::Value;

use crate::names::BUILD_CRD;

/// The name of the controller's namespace, Deployment, ServiceAccount and RBAC objects.
pub const NAME: &str = "storage-operator-builds";
/// The Lease its replicas compete for (in its namespace).
pub const LEASE: &str = "storage-operator-builds-lock";
/// The label selector the OpenShift manifests run with: builds labelled
/// `builds.storage.openshift.io/controller: storage-operator` are ours, all others OpenShift's.
pub const OPENSHIFT_SELECTOR: &str = "builds.storage.openshift.io/controller=storage-operator";

/// Which cluster the manifests are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// OpenShift: Builds served by OpenShift; run with [`OPENSHIFT_SELECTOR`].
    OpenShift,
    /// Plain Kubernetes: ships the Build CRD and runs every build.
    Kubernetes,
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some([("app.kubernetes.io/name".to_owned(), NAME.to_owned())].into()),
        ..Default::default()
    }
}

/// What the controller may do cluster-wide: exactly what it reads and writes. On OpenShift it
/// also uses the `privileged` SCC, as openshift-controller-manager's build controller does: SCC
/// admission checks the creator of the (privileged) build pod.
pub fn cluster_role(flavour: Flavour) -> ClusterRole {
    let mut crd = rule(
        &["apiextensions.k8s.io"],
        &["customresourcedefinitions"],
        &["get"],
    );
    crd.resource_names = Some(vec![BUILD_CRD.into()]);
    let mut scc = rule(
        &["security.openshift.io"],
        &["securitycontextconstraints"],
        &["use"],
    );
    scc.resource_names = Some(vec!["privileged".into()]);
    let scc = (flavour == Flavour::OpenShift).then_some(scc);
    ClusterRole {
        metadata: meta(NAME, None),
        rules: Some(
            scc.into_iter()
                .chain([
                    rule(
                        &["build.openshift.io"],
                        &["builds"],
                        &["get", "list", "watch", "patch"],
                    ),
                    rule(
                        &["build.openshift.io"],
                        &["builds/status"],
                        &["get", "patch"],
                    ),
                    rule(
                        &[""],
                        &["pods"],
                        &["get", "list", "watch", "create", "delete"],
                    ),
                    // The `builder` ServiceAccount build pods run as, on plain Kubernetes.
                    rule(&[""], &["serviceaccounts"], &["create"]),
                    rule(&[""], &["events"], READ),
                    // Warning Events on a build whose pod or status could not be written.
                    rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
                    rule(&["config.openshift.io"], &["featuregates"], READ),
                    crd,
                ])
                .collect(),
        ),
        ..Default::default()
    }
}

fn subject() -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: NAME.into(),
        namespace: Some(NAME.into()),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    }
}

/// The controller's Deployment.
pub fn deployment(flavour: Flavour, image: &str) -> Deployment {
    let mut args = vec!["builds".to_owned()];
    if flavour == Flavour::OpenShift {
        args.extend(["--selector".to_owned(), OPENSHIFT_SELECTOR.to_owned()]);
    }
    opkit::install::operator_deployment(opkit::install::OperatorDeployment {
        metadata: meta(NAME, Some(NAME)),
        name: NAME.into(),
        container: "controller".into(),
        image: image.into(),
        args,
        ..Default::default()
    })
}

/// Every object of one flavour, in apply order, as JSON.
pub fn build(flavour: Flavour, image: &str) -> Vec<Value> {
    let mut objects = Vec::new();
    let mut push = |value: Result<Value, serde_json::Error>| objects.extend(value.ok());
    if flavour == Flavour::Kubernetes {
        push(serde_json::to_value(
            <api::build_v1::Build as kube::CustomResourceExt>::crd(),
        ));
    }
    push(serde_json::to_value(Namespace {
        metadata: meta(NAME, None),
        ..Default::default()
    }));
    push(serde_json::to_value(ServiceAccount {
        metadata: meta(NAME, Some(NAME)),
        ..Default::default()
    }));
    push(serde_json::to_value(cluster_role(flavour)));
    push(serde_json::to_value(ClusterRoleBinding {
        metadata: meta(NAME, None),
        role_ref: role_ref("ClusterRole", NAME),
        subjects: Some(vec![subject()]),
    }));
    push(serde_json::to_value(Role {
        metadata: meta(&format!("{NAME}-lease"), Some(NAME)),
        rules: Some(vec![rule(&["coordination.k8s.io"], &["leases"], MANAGE)]),
    }));
    push(serde_json::to_value(RoleBinding {
        metadata: meta(&format!("{NAME}-lease"), Some(NAME)),
        role_ref: role_ref("Role", &format!("{NAME}-lease")),
        subjects: Some(vec![subject()]),
    }));
    push(serde_json::to_value(deployment(flavour, image)));
    objects
}

#[cfg(test)]
mod tests {
    use opkit::rbac::allows;

    use super::*;

    #[test]
    fn the_controller_may_do_what_it_does_and_nothing_more() {
        let rules = cluster_role(Flavour::Kubernetes).rules.unwrap();
        for (group, resource, verb) in [
            ("build.openshift.io", "builds", "watch"),
            ("build.openshift.io", "builds", "patch"),
            ("build.openshift.io", "builds/status", "patch"),
            ("", "pods", "create"),
            ("", "pods", "delete"),
            ("", "serviceaccounts", "create"),
            ("", "events", "watch"),
            ("events.k8s.io", "events", "create"),
            ("events.k8s.io", "events", "patch"),
            ("config.openshift.io", "featuregates", "watch"),
        ] {
            assert!(allows(&rules, group, resource, verb), "{resource} {verb}");
        }
        assert!(!allows(&rules, "", "pods", "patch"));
        assert!(!allows(&rules, "", "secrets", "get"));
        assert!(!allows(&rules, "", "serviceaccounts", "get"));
        assert!(!allows(
            &rules,
            "security.openshift.io",
            "securitycontextconstraints",
            "use"
        ));
        let openshift = cluster_role(Flavour::OpenShift).rules.unwrap();
        assert!(allows(
            &openshift,
            "security.openshift.io",
            "securitycontextconstraints",
            "use"
        ));
        let scc = openshift
            .iter()
            .find(|r| r.api_groups.as_deref() == Some(&["security.openshift.io".to_owned()][..]))
            .unwrap();
        assert_eq!(
            scc.resource_names.as_deref(),
            Some(&["privileged".to_owned()][..]),
            "only the privileged SCC"
        );
    }

    #[test]
    fn openshift_runs_with_a_selector_and_kubernetes_ships_the_crd() {
        let openshift = build(Flavour::OpenShift, "img");
        let kubernetes = build(Flavour::Kubernetes, "img");
        assert_eq!(kubernetes.len(), openshift.len() + 1);
        assert_eq!(kubernetes[0]["kind"], "CustomResourceDefinition");
        let args = |objects: &[Value]| {
            objects.last().unwrap()["spec"]["template"]["spec"]["containers"][0]["args"].clone()
        };
        assert_eq!(
            args(&openshift),
            serde_json::json!(["builds", "--selector", OPENSHIFT_SELECTOR])
        );
        assert_eq!(args(&kubernetes), serde_json::json!(["builds"]));
    }
}
