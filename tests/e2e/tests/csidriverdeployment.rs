//! The CSIDriverDeployment controller on a real cluster (see the crate docs for how to run), as
//! the cluster storage operator's ServiceAccount (it runs inside `storage-operator run`):
//! converge, drift restored, and deletion removing the cluster-scoped objects and releasing the
//! finalizer. The driver pods need not run: the controller's behaviour is about its objects.
//! It removes what it created (the CRD stays).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use api::csidriver_v1alpha1::CSIDriverDeployment;
use e2e::{Background, cleanup, wait_for};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use opkit::metrics::Metrics;
use serde_json::json;

const NS: &str = "e2e-csidriverdeployment";
const DRIVER: &str = "e2e.csi.storage.openshift.io";

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn converge_drift_and_delete() {
    let admin = e2e::admin().await;
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "CSIDriverDeployment")
        .unwrap();
    e2e::apply_crd(&admin, &crd).await;
    let identity = e2e::install::storage_operator(&admin).await;
    e2e::install::ensure_namespace(&admin, NS).await;
    let client = identity.client.clone();
    let running = Background::start(move |stop| {
        csi_driver_deployment::controller::run(
            client,
            Default::default(),
            Metrics::new(),
            None,
            stop,
        )
    });

    let declared: CSIDriverDeployment = serde_json::from_value(json!({
        "apiVersion": "csidriver.storage.openshift.io/v1alpha1",
        "kind": "CSIDriverDeployment",
        "metadata": {"name": "e2e", "namespace": NS},
        "spec": {
            "driverName": DRIVER,
            "driverSocket": "/csi/csi.sock",
            "csiDriver": {"attachRequired": false},
            "driverControllerTemplate": {"spec": {"containers": [
                {"name": "driver", "image": "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0",
                 "args": ["--drivername=e2e.csi.storage.openshift.io", "--endpoint=unix:///csi/csi.sock", "--nodeid=$(NODE)"],
                 "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
            ]}},
            "driverPerNodeTemplate": {"spec": {"containers": [
                {"name": "driver", "image": "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0",
                 "args": ["--drivername=e2e.csi.storage.openshift.io", "--endpoint=unix:///csi/csi.sock", "--nodeid=$(NODE)"],
                 "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
            ]}},
            "storageClassTemplates": [{"metadata": {"name": "e2e-declared"}}],
        }
    }))
    .unwrap();
    let declared_api: Api<CSIDriverDeployment> = Api::namespaced(admin.clone(), NS);
    declared_api
        .create(&PostParams::default(), &declared)
        .await
        .unwrap();

    // Converge.
    let csi_drivers: Api<CSIDriver> = Api::all(admin.clone());
    let classes: Api<StorageClass> = Api::all(admin.clone());
    wait_for("the CSIDriver", async || {
        csi_drivers.get_opt(DRIVER).await.unwrap()
    })
    .await;
    wait_for("the node DaemonSet", async || {
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt("e2e-node")
            .await
            .unwrap()
    })
    .await;
    wait_for("the StorageClass", async || {
        classes.get_opt("e2e-declared").await.unwrap()
    })
    .await;
    wait_for("the status", async || {
        let cd = declared_api.get("e2e").await.unwrap();
        let status = cd.status?;
        (status.observed_generation == cd.metadata.generation && !status.children.is_empty())
            .then_some(())
    })
    .await;

    // Copies of our class and of a ClusterRole of ours, made as Kubernetes' storage e2e suite
    // copies a driver's class (everything, managedFields included, under a new name) and as
    // `kubectl get -o yaml` edited and created again does: they carry our labels, and are never
    // deleted (the real API server records their creator only in managedFields).
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role = format!("{DRIVER}-csi-provisioner-role");
    let copy_of = |object: serde_json::Value, name: &str| {
        let mut copy = object;
        let meta = copy["metadata"].as_object_mut().unwrap();
        for key in ["uid", "resourceVersion", "creationTimestamp"] {
            meta.remove(key);
        }
        meta.insert("name".into(), json!(name));
        assert!(
            meta["managedFields"].is_array(),
            "copied with managedFields"
        );
        copy
    };
    let class = serde_json::to_value(classes.get("e2e-declared").await.unwrap()).unwrap();
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(copy_of(class, "e2e-declared-copy")).unwrap(),
        )
        .await
        .unwrap();
    let original_role = serde_json::to_value(roles.get(&role).await.unwrap()).unwrap();
    let role_copy = format!("{role}-copy");
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(copy_of(original_role, &role_copy)).unwrap(),
        )
        .await
        .unwrap();

    // Drift restored.
    roles
        .patch(
            &role,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": []})),
        )
        .await
        .unwrap();
    wait_for("the ClusterRole restored", async || {
        roles
            .get(&role)
            .await
            .unwrap()
            .rules
            .filter(|r| !r.is_empty())
    })
    .await;

    // Deleted: the cluster-scoped objects go, then the object itself.
    declared_api
        .delete("e2e", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the CSIDriverDeployment gone", async || {
        declared_api
            .get_opt("e2e")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(csi_drivers.get_opt(DRIVER).await.unwrap().is_none());
    assert!(classes.get_opt("e2e-declared").await.unwrap().is_none());
    assert!(roles.get_opt(&role).await.unwrap().is_none());
    // The copies outlived every pass and the uninstall; they are ours (the test's) to delete.
    assert!(
        classes
            .get_opt("e2e-declared-copy")
            .await
            .unwrap()
            .is_some(),
        "the copy of our class was deleted"
    );
    assert!(
        roles.get_opt(&role_copy).await.unwrap().is_some(),
        "the copy of our ClusterRole was deleted"
    );
    classes
        .delete("e2e-declared-copy", &DeleteParams::default())
        .await
        .unwrap();
    roles
        .delete(&role_copy, &DeleteParams::default())
        .await
        .unwrap();

    running.stop().await;
    cleanup::delete_namespace(&admin, NS).await;
    identity.assert_never_refused();
}

/// Bad input never costs a class: the CRD refuses a misspelt reclaim policy, and a StorageClass
/// an admin made under a template's name is kept as it is while the rest of the driver installs.
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn typos_are_refused_and_an_admins_class_is_kept() {
    const NS_KEPT: &str = "e2e-csidriverdeployment-kept";
    const DRIVER_KEPT: &str = "kept.e2e.csi.storage.openshift.io";
    let admin = e2e::admin().await;
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == "CSIDriverDeployment")
        .unwrap();
    e2e::apply_crd(&admin, &crd).await;
    let identity = e2e::install::storage_operator(&admin).await;
    e2e::install::ensure_namespace(&admin, NS_KEPT).await;
    let classes: Api<StorageClass> = Api::all(admin.clone());
    cleanup::delete_and_wait(&classes, "e2e-admins").await;
    let admins = classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "e2e-admins"},
                "provisioner": "other.example.com",
                "reclaimPolicy": "Retain",
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let declared = |reclaim: &str| -> CSIDriverDeployment {
        serde_json::from_value(json!({
            "apiVersion": "csidriver.storage.openshift.io/v1alpha1",
            "kind": "CSIDriverDeployment",
            "metadata": {"name": "kept", "namespace": NS_KEPT},
            "spec": {
                "driverName": DRIVER_KEPT,
                "driverSocket": "/csi/csi.sock",
                "driverPerNodeTemplate": {"spec": {"containers": [
                    {"name": "driver", "image": "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0"}
                ]}},
                "storageClassTemplates": [{"metadata": {"name": "e2e-admins"}, "reclaimPolicy": reclaim}],
            }
        }))
        .unwrap()
    };
    let declared_api: Api<CSIDriverDeployment> = Api::namespaced(admin.clone(), NS_KEPT);

    // The CRD refuses the typo, naming the field and the allowed values.
    match declared_api
        .create(&PostParams::default(), &declared("Deleet"))
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status
                    .message
                    .contains("spec.storageClassTemplates[0].reclaimPolicy")
                    && status.message.contains("\"Delete\", \"Retain\""),
                "{}",
                status.message
            );
        }
        other => panic!("the typo was not refused: {other:?}"),
    }

    let client = identity.client.clone();
    let running = Background::start(move |stop| {
        csi_driver_deployment::controller::run(
            client,
            Default::default(),
            Metrics::new(),
            None,
            stop,
        )
    });
    declared_api
        .create(&PostParams::default(), &declared("Delete"))
        .await
        .unwrap();
    let message = wait_for("Degraded StorageClassExists", async || {
        let cd = declared_api.get("kept").await.unwrap();
        cd.status?
            .conditions
            .into_iter()
            .find(|c| {
                c.type_ == "Degraded"
                    && c.status.to_string() == "True"
                    && c.reason.as_deref() == Some("StorageClassExists")
            })?
            .message
    })
    .await;
    assert!(
        message.contains("StorageClass e2e-admins already exists"),
        "{message}"
    );
    wait_for("the CSIDriver", async || {
        Api::<CSIDriver>::all(admin.clone())
            .get_opt(DRIVER_KEPT)
            .await
            .unwrap()
    })
    .await;
    let now = classes.get("e2e-admins").await.unwrap();
    assert_eq!(now.metadata.uid, admins.metadata.uid, "never deleted");
    assert_eq!(now.provisioner, "other.example.com", "never written");

    declared_api
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the CSIDriverDeployment gone", async || {
        declared_api
            .get_opt("kept")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let now = classes.get("e2e-admins").await.unwrap();
    assert_eq!(
        now.metadata.uid, admins.metadata.uid,
        "an admin's class outlives the uninstall"
    );
    running.stop().await;
    cleanup::delete_and_wait(&classes, "e2e-admins").await;
    cleanup::delete_namespace(&admin, NS_KEPT).await;
    identity.assert_never_refused();
}
