//! Adopting a driver operator that OLM installed (seed 001: AWS EBS), on the real control plane
//! (see the crate docs for how to run), as the cluster storage operator's own ServiceAccount.
//! OLM itself does not run here: the test makes what it would have made (a Subscription of the
//! package with its installed CSV, the CSV, an OperatorGroup, the CSV-owned operator Deployment
//! and ServiceAccount) under OLM's API groups, with CRDs of OLM's groups, versions, kinds and
//! scopes (their schemas open: the operator reads only `spec.name` and `status.installedCSV`).
//! The garbage collector of kube-controller-manager plays OLM's part in removing the
//! CSV-owned objects once the CSV is gone, as it does on a cluster where OLM runs.
//!
//! Checked: the Subscription, then the CSV go; OLM's operator Deployment is gone before ours of
//! the same name is created, so the two never run side by side; the driver's own operands are
//! left as they are (same UID); `AWSEBSOLMOperatorRemoval{Progressing,Available}` end as
//! OpenShift's (`Finished`); the progress annotations on Storage/cluster are cleared; the
//! operator was never refused a request.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::operator_v1::Storage;
use e2e::{cleanup, cso, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const NS: &str = "openshift-cluster-csi-drivers";
const OPERATOR: &str = "aws-ebs-csi-driver-operator";
const CSV: &str = "aws-ebs-csi-driver-operator.v4.5.0";
const OPERAND: &str = "aws-ebs-csi-driver-controller";

/// A CRD of OLM's `operators.coreos.com` group, with an open schema.
fn olm_crd(kind: &str, plural: &str, version: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.operators.coreos.com")},
        "spec": {"group": "operators.coreos.com", "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                           "listKind": format!("{kind}List")},
                 "versions": [{"name": version, "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                   "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

fn dynamic(client: &kube::Client, kind: &str, plural: &str, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("operators.coreos.com", version, kind),
            plural,
        ),
    )
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

fn deployment(name: &str, owner: Option<&DynamicObject>) -> Deployment {
    let mut value = json!({"metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "quay.io/openshift/origin-aws-ebs:4.5"}]}}}});
    if let Some(csv) = owner {
        value["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "name": csv.name_any(), "uid": csv.uid().unwrap(),
            "controller": false, "blockOwnerDeletion": false}]);
    }
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn an_olm_installed_driver_operator_is_adopted_without_running_twice() {
    let admin = e2e::admin().await;
    let declared = e2e::ensure_platform(
        &admin,
        json!({"type": "AWS", "aws": {"region": "us-east-1"}}),
    )
    .await;
    let identity = cso::prepare(&admin).await;
    for (kind, plural, version) in [
        ("Subscription", "subscriptions", "v1alpha1"),
        (
            "ClusterServiceVersion",
            "clusterserviceversions",
            "v1alpha1",
        ),
        ("OperatorGroup", "operatorgroups", "v1"),
    ] {
        e2e::apply_crd(&admin, &olm_crd(kind, plural, version)).await;
    }
    e2e::install::ensure_namespace(&admin, NS).await;

    // What OLM made.
    let subscriptions = dynamic(&admin, "Subscription", "subscriptions", "v1alpha1");
    let csvs = dynamic(
        &admin,
        "ClusterServiceVersion",
        "clusterserviceversions",
        "v1alpha1",
    );
    let groups = dynamic(&admin, "OperatorGroup", "operatorgroups", "v1");
    let post = PostParams::default();
    groups
        .create(
            &post,
            &object(
                json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": "aws-ebs-operator-group", "namespace": NS},
                "spec": {"targetNamespaces": [NS]}}),
            ),
        )
        .await
        .unwrap();
    subscriptions
        .create(
            &post,
            &object(
                json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": OPERATOR, "namespace": NS},
                "spec": {"name": OPERATOR, "source": "redhat-operators",
                         "sourceNamespace": "openshift-marketplace", "channel": "4.5"},
                "status": {"installedCSV": CSV, "currentCSV": CSV}}),
            ),
        )
        .await
        .unwrap();
    let csv = csvs
        .create(
            &post,
            &object(json!({"apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion",
                "metadata": {"name": CSV, "namespace": NS}, "spec": {}})),
        )
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let olm_operator = deployments
        .create(&post, &deployment(OPERATOR, Some(&csv)))
        .await
        .unwrap();
    let mut olm_account: ServiceAccount = serde_json::from_value(
        json!({"metadata": {"name": "olm-aws-ebs-operator", "namespace": NS}}),
    )
    .unwrap();
    olm_account.metadata.owner_references = olm_operator.metadata.owner_references.clone();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    accounts.create(&post, &olm_account).await.unwrap();
    // The driver's own operand, which the adopted operator takes over in place.
    let operand = deployments
        .create(&post, &deployment(OPERAND, None))
        .await
        .unwrap();

    let running = cso::start(&identity);
    // Ours of the same name only once OLM's is gone: never two operators side by side.
    let ours = wait_for("our operator Deployment", async || {
        let d = deployments.get_opt(OPERATOR).await.unwrap()?;
        (d.uid() != olm_operator.uid()).then_some(d)
    })
    .await;
    let args = ours.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert_eq!(
        args,
        [
            "driver",
            "aws-ebs",
            "--config=/var/run/configmaps/config/config.yaml",
            "--metrics-address=0.0.0.0:8443"
        ]
    );
    assert!(subscriptions.get_opt(OPERATOR).await.unwrap().is_none());
    assert!(csvs.get_opt(CSV).await.unwrap().is_none());
    wait_for("the CSV's ServiceAccount collected", async || {
        accounts
            .get_opt("olm-aws-ebs-operator")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(
        deployments.get(OPERAND).await.unwrap().uid(),
        operand.uid(),
        "the driver's own operand is left in place"
    );
    for (type_, status) in [
        ("AWSEBSOLMOperatorRemovalProgressing", "False"),
        ("AWSEBSOLMOperatorRemovalAvailable", "True"),
    ] {
        let (_, reason) = wait_for(&format!("{type_}={status}"), async || {
            cso::storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == status)
                .map(|c| (c.0, c.1))
        })
        .await;
        assert_eq!(reason, "Finished", "{type_}");
    }
    let annotations = Api::<Storage>::all(admin.clone())
        .get("cluster")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(
        !annotations.keys().any(|k| k.contains("olm-removal")),
        "{annotations:?}"
    );

    running.stop().await;
    cleanup::delete_and_wait(&deployments, OPERAND).await;
    cleanup::delete_and_wait(&groups, "aws-ebs-operator-group").await;
    cso::finish(&admin, &identity, "aws-ebs").await;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for plural in ["subscriptions", "clusterserviceversions", "operatorgroups"] {
        cleanup::delete_and_wait(&crds, &format!("{plural}.operators.coreos.com")).await;
    }
    cleanup::undeclare_platform(&admin, declared).await;
}
