//! Installing the operators' identities as a user would: the manifests of `deploy/kubernetes/`
//! (all but the operator's Deployment, whose process the test runs in-process instead), or for
//! a driver operator the ServiceAccount and RBAC the cluster storage operator's starter creates.
//! Each returns the [`Identity`] the operator under test then runs as.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::{Identity, MANAGER, wait_established, wait_for};

/// `deploy/kubernetes/storage-operator.yaml`, as a user applies it.
const STORAGE_OPERATOR: &str = include_str!("../../../deploy/kubernetes/storage-operator.yaml");
/// `deploy/kubernetes/builds.yaml`, as a user applies it.
const BUILDS: &str = include_str!("../../../deploy/kubernetes/builds.yaml");

/// Installs `deploy/kubernetes/storage-operator.yaml` but its Deployment, and returns the
/// cluster storage operator's identity (`openshift-cluster-storage-operator/cluster-storage-operator`).
pub async fn storage_operator(admin: &Client) -> Identity {
    storage_operator_manifests(admin).await;
    Identity::service_account(
        admin,
        "openshift-cluster-storage-operator",
        "cluster-storage-operator",
    )
    .await
}

/// Installs `deploy/kubernetes/storage-operator.yaml` but its Deployment on the cluster of
/// `admin` (for a guest cluster, whose identity the caller makes).
pub async fn storage_operator_manifests(admin: &Client) {
    apply_manifest(
        admin,
        STORAGE_OPERATOR,
        "deploy/kubernetes/storage-operator.yaml",
    )
    .await;
}

/// Installs the cluster storage operator's management side of a hosted control plane
/// (`storage_operator::hosted_install`, as `manifests --hosted-control-plane-namespace`
/// prints it) in the control-plane namespace `namespace`, which must exist, but its
/// Deployment.
pub async fn hosted_storage_operator(management: &Client, namespace: &str) {
    for object in storage_operator::hosted_install::build_management(namespace, "unused")
        .into_iter()
        .filter(|o| o["kind"] != "Deployment")
    {
        apply_value(management, object, "the management side's install").await;
    }
}

/// Creates HyperShift's `hypershift-control-plane` PriorityClass on the management cluster,
/// as HyperShift would have; whether the call made it (and should remove it).
pub async fn hypershift_priority_class(management: &Client) -> bool {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let priority_classes: Api<PriorityClass> = Api::all(management.clone());
    let name = csi_kit::hosted::PRIORITY_CLASS;
    if priority_classes
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading PriorityClass {name}: {e}"))
        .is_some()
    {
        return false;
    }
    let class: PriorityClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "value": 100_000_000,
        "description": "HyperShift's control-plane pods (made by the e2e test as HyperShift would)",
    }))
    .unwrap_or_else(|e| panic!("the PriorityClass: {e}"));
    priority_classes
        .create(&Default::default(), &class)
        .await
        .unwrap_or_else(|e| panic!("creating PriorityClass {name}: {e}"));
    true
}

/// The environment variable naming the operator's image on the node (imported there, e.g. by
/// `.ci/run` with `image/build.sh` and `ctr images import`), for the tests that run the
/// operator as a pod.
pub const OPERATOR_IMAGE_ENV: &str = "E2E_OPERATOR_IMAGE";

/// The environment variable naming the volume data source validator's image the operator pod
/// installs, when it is not upstream's (`localhost/volume-data-source-validator:dev` on the node
/// of `../shared/k8s`).
pub const VALIDATOR_IMAGE_ENV: &str = "E2E_VALIDATOR_IMAGE";

/// The operator image the node has, or a panic saying how to provide one.
pub fn operator_image() -> String {
    std::env::var(OPERATOR_IMAGE_ENV).unwrap_or_else(|_| {
        panic!(
            "set {OPERATOR_IMAGE_ENV} to an image of this repository's binary that the node has: cargo build -p cli && image/build.sh --binary target/debug/storage-operator --tag localhost/storage-operator:e2e && ctr -n k8s.io images import target/image/storage-operator.tar"
        )
    })
}

/// Applies the Deployment of `deploy/kubernetes/storage-operator.yaml` with `image` (as
/// `kubectl apply` and `kubectl set image` would), after [`storage_operator`] installed the rest.
/// Returns its namespace and name.
pub async fn storage_operator_deployment(admin: &Client, image: &str) -> (String, String) {
    let source = "deploy/kubernetes/storage-operator.yaml";
    let documents: Vec<Value> = serde_saphyr::from_multiple(STORAGE_OPERATOR)
        .unwrap_or_else(|e| panic!("parsing {source}: {e}"));
    let mut deployment = documents
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("{source} has no Deployment"));
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("the Deployment of {source} has no containers"));
    for container in containers {
        container["image"] = Value::from(image);
        for env in container["env"].as_array_mut().into_iter().flatten() {
            if env["name"] == "OPERATOR_IMAGE" {
                env["value"] = Value::from(image);
            }
        }
        // Where no registry can be reached, the validator's image the node has.
        if let Ok(validator) = std::env::var(VALIDATOR_IMAGE_ENV)
            && let Some(env) = container["env"].as_array_mut()
        {
            env.push(serde_json::json!({
                "name": storage_operator::validator::IMAGE_ENV, "value": validator}));
        }
    }
    let namespace = deployment["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let name = deployment["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    apply_value(admin, deployment, source).await;
    (namespace, name)
}

/// Installs `deploy/kubernetes/builds.yaml` but its Deployment, and returns the build
/// controller's identity (`storage-operator-builds/storage-operator-builds`). The Build CRD is
/// left out where something else already serves Builds (OpenShift's openshift-apiserver).
pub async fn build_controller(admin: &Client) -> Identity {
    apply_manifest(admin, BUILDS, "deploy/kubernetes/builds.yaml").await;
    Identity::service_account(admin, "storage-operator-builds", "storage-operator-builds").await
}

/// Creates what the cluster storage operator's starter creates for the driver operator of
/// `short` (its namespace and, for a driver whose operands live apart, their namespace too; its
/// ServiceAccount, ClusterRole, Roles and bindings, from the starter's own builders) and returns
/// that driver operator's identity.
pub async fn driver_operator(admin: &Client, short: &str) -> Identity {
    use storage_operator::starter;
    let entry = storage_operator::registry::find(short)
        .unwrap_or_else(|| panic!("{short} is not in the driver registry"));
    let def = drivers::by_name(short).unwrap_or_else(|e| panic!("{short}: {e}"));
    let inputs = starter::StarterInputs {
        topology: csi_kit::Topology::HighlyAvailable,
        log_level: api::operator_v1::LogLevel::Normal,
        proxy: Default::default(),
        env: Default::default(),
        operator_image: "localhost/storage-operator:e2e".into(),
        tls_profile: None,
    };
    let namespaces = std::iter::once(starter::build_namespace())
        .chain(starter::separate_operand_namespace(&def).map(starter::build_operand_namespace));
    let mut objects = Vec::new();
    for namespace in namespaces {
        wait_not_terminating(
            admin,
            namespace.metadata.name.as_deref().unwrap_or_default(),
        )
        .await;
        objects.push(to_value(&namespace));
    }
    let (cluster_role, roles) = starter::build_rbac(&entry, &def, &inputs);
    let (cluster_binding, bindings) = starter::build_bindings(&entry, &def);
    objects.push(to_value(&starter::build_service_account(&entry)));
    objects.push(to_value(&cluster_role));
    objects.extend(roles.iter().map(to_value));
    objects.push(to_value(&cluster_binding));
    objects.extend(bindings.iter().map(to_value));
    for object in objects {
        apply_value(admin, object, "the starter's objects").await;
    }
    Identity::service_account(
        admin,
        storage_operator::registry::DRIVER_NAMESPACE,
        entry.operator_deployment,
    )
    .await
}

fn to_value<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap_or_else(|e| panic!("serialising an object: {e}"))
}

/// Server-side applies every document of `text` but Deployments: CRDs first (each waited for
/// until Established), then namespaces (a namespace still Terminating from an earlier test is
/// waited for until gone), then the rest.
async fn apply_manifest(admin: &Client, text: &str, source: &str) {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("parsing {source}: {e}"));
    let kind = |d: &Value| d["kind"].as_str().unwrap_or_default().to_owned();
    for crd in documents
        .iter()
        .filter(|d| kind(d) == "CustomResourceDefinition")
    {
        let crd: CustomResourceDefinition = serde_json::from_value(crd.clone())
            .unwrap_or_else(|e| panic!("a CRD of {source}: {e}"));
        let name = crd.metadata.name.clone().unwrap_or_default();
        let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
        let plural = &crd.spec.names.plural;
        let mut served_elsewhere = false;
        if crds
            .get_opt(&name)
            .await
            .unwrap_or_else(|e| panic!("reading CRD {name}: {e}"))
            .is_none()
        {
            for version in &crd.spec.versions {
                let group_version = format!("{}/{}", crd.spec.group, version.name);
                served_elsewhere |= opkit::discovery::served_resources(admin, &group_version)
                    .await
                    .is_ok_and(|served| served.contains(plural));
            }
        }
        if served_elsewhere {
            continue;
        }
        crate::apply_crd(admin, &crd).await;
        wait_established(admin, &name).await;
    }
    for namespace in documents.iter().filter(|d| kind(d) == "Namespace") {
        wait_not_terminating(
            admin,
            namespace["metadata"]["name"].as_str().unwrap_or_default(),
        )
        .await;
        apply_value(admin, namespace.clone(), source).await;
    }
    for document in documents.iter().filter(|d| {
        !matches!(
            kind(d).as_str(),
            "CustomResourceDefinition" | "Namespace" | "Deployment"
        )
    }) {
        apply_value(admin, document.clone(), source).await;
    }
}

/// Waits until namespace `name` is not Terminating (gone, or never deleted).
pub async fn wait_not_terminating(admin: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    wait_for(
        &format!("namespace {name} to finish terminating"),
        async || {
            let namespace = namespaces
                .get_opt(name)
                .await
                .unwrap_or_else(|e| panic!("reading namespace {name}: {e}"));
            namespace
                .is_none_or(|n| n.metadata.deletion_timestamp.is_none())
                .then_some(())
        },
    )
    .await;
}

/// Makes namespace `name` exist: waits until a deletion of it has finished, then creates it
/// unless it is there.
pub async fn ensure_namespace(admin: &Client, name: &str) {
    wait_not_terminating(admin, name).await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if namespaces
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading namespace {name}: {e}"))
        .is_none()
    {
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                .unwrap_or_else(|e| panic!("namespace {name}: {e}"));
        namespaces
            .create(&kube::api::PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    }
}

/// Server-side applies one object as the harness (force: the harness owns the scene).
pub async fn apply_value(admin: &Client, object: Value, source: &str) {
    let gvk = gvk_of(&object);
    let (resource, capabilities) = kube::discovery::pinned_kind(admin, &gvk)
        .await
        .unwrap_or_else(|e| panic!("discovering {gvk:?} of {source}: {e}"));
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
    let api: Api<DynamicObject> = match (&namespace, capabilities.scope) {
        (Some(ns), kube::discovery::Scope::Namespaced) => {
            Api::namespaced_with(admin.clone(), ns, &resource)
        }
        _ => Api::all_with(admin.clone(), &resource),
    };
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {} {name} of {source}: {e}", gvk.kind));
}

fn gvk_of(object: &Value) -> GroupVersionKind {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap_or_default())
}
