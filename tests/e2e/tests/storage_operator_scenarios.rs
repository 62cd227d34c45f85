//! The cluster storage operator's scenarios on a real cluster (see the crate docs for how to
//! run), as the ServiceAccount of `deploy/kubernetes/storage-operator.yaml`: converge, drift
//! restored, an admin's edit of the ClusterCSIDriver kept, a deleted ClusterCSIDriver
//! recreated, Unmanaged pausing. On a cluster without OpenShift's Infrastructure it declares
//! the platform GCP, so the scenarios run anywhere (the driver operator's pod need not run:
//! the operator's behaviour is about its objects). It removes what it created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::operator_v1::{ClusterCSIDriver, Storage};
use e2e::{cleanup, cso, ensure_gcp, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

const NS: &str = "openshift-cluster-csi-drivers";
const OPERATOR: &str = "gcp-pd-csi-driver-operator";
const DRIVER: &str = "pd.csi.storage.gke.io";

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn converge_drift_recreate_and_unmanaged() {
    let admin = e2e::admin().await;
    let declared = ensure_gcp(&admin).await;
    let identity = cso::prepare(&admin).await;
    let running = cso::start(&identity);
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    let storages: Api<Storage> = Api::all(admin.clone());

    // Converge.
    wait_for("the driver operator Deployment", async || {
        deployments.get_opt(OPERATOR).await.unwrap()
    })
    .await;
    wait_for("the ClusterCSIDriver", async || {
        drivers.get_opt(DRIVER).await.unwrap()
    })
    .await;

    // Drift: scaled to zero, restored.
    let scale = |replicas: i32| json!({"spec": {"replicas": replicas}});
    deployments
        .patch(OPERATOR, &PatchParams::default(), &Patch::Merge(scale(0)))
        .await
        .unwrap();
    wait_for("the scale restored", async || {
        (deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas
            == Some(1))
        .then_some(())
    })
    .await;

    // An admin's edit is kept; a deleted ClusterCSIDriver comes back.
    let passes = running.passes();
    drivers
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"logLevel": "Debug"}})),
        )
        .await
        .unwrap();
    running.settled_since(passes).await;
    assert_eq!(
        drivers
            .get(DRIVER)
            .await
            .unwrap()
            .spec
            .operator
            .log_level
            .unwrap()
            .as_str(),
        "Debug"
    );
    drivers
        .delete(DRIVER, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the ClusterCSIDriver recreated", async || {
        drivers
            .get_opt(DRIVER)
            .await
            .unwrap()
            .filter(|d| d.metadata.deletion_timestamp.is_none())
    })
    .await;

    // Unmanaged: hands off.
    let state = |s: &str| json!({"spec": {"managementState": s}});
    let passes = running.passes();
    storages
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(state("Unmanaged")),
        )
        .await
        .unwrap();
    running.settled_since(passes).await;
    let passes = running.passes();
    deployments
        .patch(OPERATOR, &PatchParams::default(), &Patch::Merge(scale(0)))
        .await
        .unwrap();
    running.settled_since(passes).await;
    assert_eq!(
        deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(0),
        "Unmanaged left it alone"
    );
    storages
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(state("Managed")),
        )
        .await
        .unwrap();
    wait_for("Managed again restores it", async || {
        (deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas
            == Some(1))
        .then_some(())
    })
    .await;

    running.stop().await;
    cso::finish(&admin, &identity, "gcp-pd").await;
    cleanup::undeclare_platform(&admin, declared).await;
}

/// On OpenStack the cluster storage operator starts Manila, whose operands live apart from its
/// operator: as the ServiceAccount of the install manifests, it makes their namespace and gives
/// the driver operator a Role there and in the driver namespace, which the API server allows
/// only if it holds every permission it grants in each (it is never refused a request).
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn manila_gets_its_operand_namespace_and_roles_there() {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let admin = e2e::admin().await;
    let declared = e2e::ensure_platform(&admin, json!({"type": "OpenStack"})).await;
    let identity = cso::prepare(&admin).await;
    let running = cso::start(&identity);

    let def = drivers::by_name("openstack-manila").unwrap();
    let operator = storage_operator::registry::find("openstack-manila")
        .unwrap()
        .operator_deployment;
    let apart = def.namespace.as_str();
    assert_ne!(apart, NS, "Manila's operands live apart from its operator");
    let namespace = wait_for("Manila's operand namespace", async || {
        Api::<Namespace>::all(admin.clone())
            .get_opt(apart)
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        namespace.metadata.labels.unwrap()["openshift.io/cluster-monitoring"],
        "true"
    );
    for ns in [apart, NS] {
        wait_for(&format!("the driver operator's Role in {ns}"), async || {
            Api::<Role>::namespaced(admin.clone(), ns)
                .get_opt(&format!("{operator}-role"))
                .await
                .unwrap()
        })
        .await;
        wait_for(
            &format!("the driver operator's RoleBinding in {ns}"),
            async || {
                Api::<RoleBinding>::namespaced(admin.clone(), ns)
                    .get_opt(&format!("{operator}-rolebinding"))
                    .await
                    .unwrap()
            },
        )
        .await;
    }
    wait_for("Manila's driver operator Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(operator)
            .await
            .unwrap()
    })
    .await;

    running.stop().await;
    for short in ["openstack-cinder", "openstack-manila"] {
        cso::finish(&admin, &identity, short).await;
    }
    cleanup::undeclare_platform(&admin, declared).await;
}
