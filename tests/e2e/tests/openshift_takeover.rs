//! Taking over a driver that OpenShift's Go operator installed, on a real cluster (see the crate
//! docs for how to run): the objects OpenShift's GCP PD operator (openshift/csi-operator)
//! creates, as its generated assets give them (`crates/drivers/tests/fixtures/openshift`),
//! written with Update under its field manager as it writes them; then ours starts, as its own
//! ServiceAccount with the RBAC the starter gives it. This is where the takeover first failed:
//! server-side apply merged our metrics Service ports into OpenShift's (keyed by port) and the
//! API server refused the duplicate port names on every pass.
//!
//! It must converge (a pass that writes nothing) without a single refusal, own every object
//! whole (no field left to the former manager, our operand label on each), keep OpenShift's
//! metrics ports once each, and leave the pod templates and StorageClasses as they were (no
//! pod restarts: the templates and the DaemonSet's generation do not move, the Deployment
//! keeps its one ReplicaSet; the classes keep their UID). The
//! same takeover runs for every driver of the catalogue on testkit
//! (`crates/drivers/tests/openshift_takeover_on_testkit.rs`).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

#[path = "../../../crates/drivers/tests/openshift_parity/fixtures.rs"]
mod fixtures;

use e2e::driver::Driver;
use e2e::{cleanup, ensure_gcp};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// The field manager OpenShift's GCP PD operator writes as (its binary's name).
const FORMER: &str = "gcp-pd-csi-driver-operator";
const CONTROLLER: &str = "gcp-pd-csi-driver-controller";
const NODE: &str = "gcp-pd-csi-driver-node";

/// What OpenShift's GCP PD operator has written for cluster `infra` in namespace `ns`: its
/// assets with the placeholders substituted, plus what its hooks add (2 replicas on an HA
/// control plane, library-go's spec hashes, the cluster's label on every disk); without the
/// Hyperdisk class (GCP Dedicated regions only) and the CredentialsRequest (cluster-storage-
/// operator's, from the release payload).
fn openshift_objects(ns: &str, infra: &str) -> Vec<Value> {
    let tls = csi_kit::tls::serving_tls(None).unwrap();
    let mut substitutions =
        fixtures::common_substitutions(ns, &tls.cipher_suites, tls.min_version.as_deref().unwrap());
    for (var, image) in fixtures::release_images() {
        substitutions.push((format!("${{{var}}}"), image));
    }
    substitutions.push(("${CLUSTER_ID}".to_owned(), infra.to_owned()));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/drivers/tests/fixtures/openshift");
    let mut objects = fixtures::load_from(&root, "gcp-pd", &substitutions);
    fixtures::as_openshift_wrote(&mut objects);
    for o in &mut objects {
        if o["kind"] == "Deployment" {
            let driver = &mut o["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(driver["name"], "csi-driver");
            driver["args"].as_array_mut().unwrap().push(json!(format!(
                "--extra-labels=kubernetes-io-cluster-{infra}=owned"
            )));
        }
    }
    objects
}

/// What OpenShift's operator made under names ours does not use (an earlier release's
/// workload, bindings it no longer needs): ours deletes them once its own operands are in place.
fn leftovers(ns: &str) -> Vec<Value> {
    let name = "gcp-pd-csi-driver-former-only";
    vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": ns},
               "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]}}}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": format!("{name}-binding"), "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "gcp-pd-former-only-role"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    ]
}

/// The optional kinds every OpenShift cluster serves (Prometheus' ServiceMonitor, the snapshot
/// classes): a CRD accepting any object of `kind` where the cluster has none. Returns its name
/// when it made it, for the test to remove.
async fn ensure_crd(
    admin: &Client,
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) -> Option<String> {
    let name = format!("{plural}.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    if crds.get_opt(&name).await.unwrap().is_some() {
        return None;
    }
    e2e::apply_crd(admin, &fixtures::open_crd(group, kind, plural, namespaced)).await;
    Some(name)
}

/// Where `before` and `after` differ: (path, before, after) of each differing leaf.
fn differences(before: &impl serde::Serialize, after: &impl serde::Serialize) -> Vec<String> {
    fn walk(path: String, a: &Value, b: &Value, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let null = Value::Null;
                    walk(
                        format!("{path}.{k}"),
                        x.get(k).unwrap_or(&null),
                        y.get(k).unwrap_or(&null),
                        out,
                    );
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (a, b)) in x.iter().zip(y).enumerate() {
                    walk(format!("{path}[{i}]"), a, b, out);
                }
            }
            (a, b) if a != b => out.push(format!("{path}: {a} -> {b}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(
        String::new(),
        &serde_json::to_value(before).unwrap(),
        &serde_json::to_value(after).unwrap(),
        &mut out,
    );
    out
}

fn former_entries(object: &DynamicObject) -> Vec<String> {
    object
        .managed_fields()
        .iter()
        .filter(|e| e.manager.as_deref() == Some(FORMER))
        .map(|e| format!("{:?} {:?}", e.operation, e.fields_v1))
        .collect()
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn takes_over_openshifts_gcp_pd_driver_without_a_fight() {
    let admin = e2e::admin().await;
    let declared = ensure_gcp(&admin).await;
    let infra = e2e::infrastructure_name(&admin).await;
    // An OpenShift cluster serves the APIServer config (the TLS profile of the metrics proxies:
    // Intermediate without a `cluster` object, which the assets' ciphers above are).
    let api_server = <api::config_v1::APIServer as kube::CustomResourceExt>::crd();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let api_server_name = api_server.metadata.name.clone().unwrap();
    let made_api_server = crds.get_opt(&api_server_name).await.unwrap().is_none();
    if made_api_server {
        e2e::apply_crd(&admin, &api_server).await;
    }
    let made_crds = [
        ensure_crd(
            &admin,
            "monitoring.coreos.com",
            "ServiceMonitor",
            "servicemonitors",
            true,
        )
        .await,
        ensure_crd(
            &admin,
            "snapshot.storage.k8s.io",
            "VolumeSnapshotClass",
            "volumesnapshotclasses",
            false,
        )
        .await,
    ];
    let driver = Driver::prepare(&admin, "gcp-pd").await;
    let ns = driver.def.namespace.clone();

    // OpenShift's operator installed the driver: every object written with Update (create)
    // under its field manager.
    let mut seeded = Vec::new();
    let params = PostParams {
        field_manager: Some(FORMER.to_owned()),
        ..PostParams::default()
    };
    let leftovers = leftovers(&ns);
    for o in leftovers
        .iter()
        .cloned()
        .chain(openshift_objects(&ns, &infra))
    {
        let object: DynamicObject = serde_json::from_value(o.clone()).unwrap();
        fixtures::api_for(&admin, &o)
            .create(&params, &object)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "seeding {} {}: {e}",
                    o["kind"],
                    o["metadata"]["name"].as_str().unwrap()
                )
            });
        if !leftovers.contains(&o) {
            seeded.push(o);
        }
    }
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let daemon_sets: Api<DaemonSet> = Api::namespaced(admin.clone(), &ns);
    let classes: Api<StorageClass> = Api::all(admin.clone());
    let controller_before = deployments.get(CONTROLLER).await.unwrap();
    let node_before = daemon_sets.get(NODE).await.unwrap();
    let classes_before = [
        classes.get("standard-csi").await.unwrap(),
        classes.get("ssd-csi").await.unwrap(),
    ];

    // Ours takes over, with the same images: every object becomes ours.
    let running = driver.start_with_env(fixtures::release_images());
    for o in &seeded {
        let name = o["metadata"]["name"].as_str().unwrap();
        let api = fixtures::api_for(&admin, o);
        e2e::wait_for(&format!("{} {name} adopted", o["kind"]), async || {
            let served = api.get_opt(name).await.unwrap()?;
            former_entries(&served).is_empty().then_some(())
        })
        .await;
    }
    // Then it converges: told of a change (an annotation on its ClusterCSIDriver, which it
    // watches), it runs and writes nothing; an apply the API server kept refusing would show
    // here as a pass that fails.
    let passes = running.passes();
    Api::<api::operator_v1::ClusterCSIDriver>::all(admin.clone())
        .patch(
            &driver.def.name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"e2e.storage.openshift.io/nudge": "1"}}}),
            ),
        )
        .await
        .unwrap();
    running.settled_since(passes).await;

    // What it left under other names is gone.
    for o in &leftovers {
        let name = o["metadata"]["name"].as_str().unwrap();
        assert!(
            fixtures::api_for(&admin, o)
                .get_opt(name)
                .await
                .unwrap()
                .is_none(),
            "{} {name} was left behind",
            o["kind"]
        );
    }

    // Every object OpenShift's operator wrote is ours, whole.
    for o in &seeded {
        let name = o["metadata"]["name"].as_str().unwrap();
        let key = format!("{}/{name}", o["kind"].as_str().unwrap());
        let served = fixtures::api_for(&admin, o)
            .get_opt(name)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key} is gone"));
        assert_eq!(former_entries(&served), Vec::<String>::new(), "{key}");
        assert_eq!(
            served
                .labels()
                .get(csi_kit::names::OPERAND_LABEL)
                .map(String::as_str),
            Some("gcp-pd"),
            "{key} was not adopted"
        );
    }

    // The metrics Service has OpenShift's ports, once each.
    let service = Api::<Service>::namespaced(admin.clone(), &ns)
        .get(&csi_kit::names::metrics_service(&driver.def))
        .await
        .unwrap();
    let ports: Vec<(String, i32)> = service
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap(), p.port))
        .collect();
    assert_eq!(
        ports,
        [
            ("provisioner-m".to_owned(), 9202),
            ("attacher-m".to_owned(), 9203),
            ("resizer-m".to_owned(), 9204),
            ("snapshotter-m".to_owned(), 9205),
        ]
    );

    // No pod restarts: the pod templates the API server holds are OpenShift's, as they were.
    // (The Deployment's generation may move: it counts annotation changes too, and adopting
    // drops library-go's spec-hash annotation.) One ReplicaSet: no rollout began.
    let controller_after = deployments.get(CONTROLLER).await.unwrap();
    let template = |spec: &Option<k8s_openapi::api::apps::v1::DeploymentSpec>| {
        spec.as_ref().map(|s| s.template.clone())
    };
    assert_eq!(
        differences(
            &template(&controller_before.spec),
            &template(&controller_after.spec)
        ),
        Vec::<String>::new(),
        "the controller's pod template changed"
    );
    let replica_sets =
        Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(admin.clone(), &ns)
            .list(&Default::default())
            .await
            .unwrap()
            .items;
    assert_eq!(
        replica_sets.len(),
        1,
        "{:?}",
        replica_sets
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    );
    let node_after = daemon_sets.get(NODE).await.unwrap();
    assert_eq!(
        differences(
            &node_before.spec.as_ref().map(|s| s.template.clone()),
            &node_after.spec.as_ref().map(|s| s.template.clone())
        ),
        Vec::<String>::new(),
        "the node pods' template changed"
    );
    assert_eq!(
        node_after.metadata.generation,
        node_before.metadata.generation,
        "the node DaemonSet's spec changed: {:#?}",
        differences(&node_before.spec, &node_after.spec)
    );
    // The classes are adopted in place (their parameters cannot change).
    for before in classes_before {
        let after = classes.get(&before.name_any()).await.unwrap();
        assert_eq!(
            after.metadata.uid,
            before.metadata.uid,
            "{}",
            before.name_any()
        );
    }
    // No second controller or node workload.
    let names: Vec<String> = deployments
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|d| d.name_any())
        .collect();
    assert_eq!(names, [CONTROLLER]);

    running.stop().await;
    // It never needed more than the starter's RBAC.
    driver.finish(&admin).await;
    let made_api_server = made_api_server.then_some(api_server_name);
    for name in made_crds.into_iter().chain([made_api_server]).flatten() {
        cleanup::delete_and_wait(&crds, &name).await;
    }
    cleanup::undeclare_platform(&admin, declared).await;
}
