//! The cluster storage operator on the e2e cluster, run in-process as the ServiceAccount of
//! `deploy/kubernetes/storage-operator.yaml`.

use api::operator_v1::{ClusterCSIDriver, Storage};
use kube::{Api, Client};
use opkit::admin::Readiness;
use opkit::metrics::Metrics;

use crate::{Background, Identity, cleanup, install};

/// The image the starter puts in driver operator Deployments (their pods need not run).
pub const OPERATOR_IMAGE: &str = "localhost/storage-operator:e2e";

/// Installs the cluster storage operator's manifests (but its Deployment) and returns its
/// identity. Refuses to run where a driver is installed by someone else.
pub async fn prepare(admin: &Client) -> Identity {
    let identity = install::storage_operator(admin).await;
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    let installed = drivers
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("listing ClusterCSIDrivers: {e}"));
    if let Some(driver) = installed.items.first() {
        panic!(
            "this cluster already has ClusterCSIDriver {}; run the e2e tests on a disposable cluster",
            kube::ResourceExt::name_any(driver)
        );
    }
    identity
}

/// Starts the cluster storage operator as `identity`.
pub fn start(identity: &Identity) -> Background<storage_operator::operator::StartError> {
    start_with_env(identity, Default::default())
}

/// Starts the cluster storage operator as `identity`, with `env` as its environment (image
/// variables).
pub fn start_with_env(
    identity: &Identity,
    env: std::collections::BTreeMap<String, String>,
) -> Background<storage_operator::operator::StartError> {
    let client = identity.client.clone();
    let settings = storage_operator::plan::Settings {
        operator_image: OPERATOR_IMAGE.into(),
        env,
        version: "e2e".into(),
        operator_log_level: None,
        metrics_tls: None,
    };
    let metrics = Metrics::new();
    let running = metrics.clone();
    Background::start(move |stop| {
        storage_operator::operator::run(client, settings, running, Readiness::default(), stop)
    })
    .settles_with(metrics, storage_operator::plan::STARTER)
}

/// Removes what the cluster storage operator installed for driver `short` and Storage
/// `cluster`, and checks it was never refused a request.
pub async fn finish(admin: &Client, identity: &Identity, short: &str) {
    let def = drivers::by_name(short).unwrap_or_else(|e| panic!("{short}: {e}"));
    cleanup::remove_driver(admin, short, &def.name, &def.namespace).await;
    cleanup::delete_and_wait(&Api::<Storage>::all(admin.clone()), "cluster").await;
    remove_validator(admin).await;
    identity.assert_never_refused();
}

/// Removes the volume data source validator the cluster storage operator installs (not its
/// CRD: other tests' populators may use it, and it is served the same by anyone).
pub async fn remove_validator(admin: &Client) {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use storage_operator::plan::OPERATOR_NAMESPACE;
    use storage_operator::validator::NAME;
    cleanup::delete_and_wait(
        &Api::<Deployment>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        NAME,
    )
    .await;
    cleanup::delete_and_wait(
        &Api::<ServiceAccount>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        NAME,
    )
    .await;
    cleanup::delete_and_wait(&Api::<ClusterRoleBinding>::all(admin.clone()), NAME).await;
    cleanup::delete_and_wait(&Api::<ClusterRole>::all(admin.clone()), NAME).await;
}

/// A condition of `Storage/cluster`: its status, reason and message.
pub async fn storage_condition(admin: &Client, type_: &str) -> Option<(String, String, String)> {
    let storage = Api::<Storage>::all(admin.clone())
        .get_opt("cluster")
        .await
        .unwrap_or_else(|e| panic!("reading Storage/cluster: {e}"))?;
    let c = storage.status?.condition(type_)?.clone();
    Some((
        c.status.to_string(),
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

/// Removes the vSphere problem detector the cluster storage operator installs, with the
/// inputs a test made for it (its credentials Secret, the cloud config).
pub async fn remove_vsphere_detector(admin: &Client) {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use storage_operator::plan::OPERATOR_NAMESPACE;
    use storage_operator::vsphere_detector as d;
    cleanup::delete_and_wait(
        &Api::<Deployment>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        d::NAME,
    )
    .await;
    cleanup::delete_and_wait(
        &Api::<ServiceAccount>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        d::NAME,
    )
    .await;
    cleanup::delete_and_wait(
        &Api::<Service>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        d::SERVICE,
    )
    .await;
    for name in [d::TRUSTED_CA_BUNDLE, d::OPERATOR_CONFIG] {
        cleanup::delete_and_wait(
            &Api::<ConfigMap>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
            name,
        )
        .await;
    }
    cleanup::delete_and_wait(
        &Api::<Secret>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        d::CREDENTIALS,
    )
    .await;
    cleanup::delete_and_wait(
        &Api::<ConfigMap>::namespaced(admin.clone(), d::CLOUD_CONFIG_NAMESPACE),
        d::CLOUD_CONFIG,
    )
    .await;
    cleanup::delete_and_wait(
        &Api::<RoleBinding>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        d::ROLE_BINDING,
    )
    .await;
    cleanup::delete_and_wait(
        &Api::<Role>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        d::ROLE,
    )
    .await;
    cleanup::delete_and_wait(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        d::CLUSTER_ROLE_BINDING,
    )
    .await;
    cleanup::delete_and_wait(&Api::<ClusterRole>::all(admin.clone()), d::CLUSTER_ROLE).await;
}
