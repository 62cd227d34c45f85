//! The table of bad inputs the CRDs refuse (`crates/api/tests/fixtures/bad-inputs.yaml`, checked
//! offline by the api crate's tests), refused by a real API server too: each broken object is
//! created with `dryRun=All` (or, for a field under `status`, its valid object is created and
//! the broken status patched with `dryRun=All`), and the answer must be 422 Invalid naming the
//! field. Every CRD of this project is installed first (as on plain Kubernetes). What the test
//! creates it deletes.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use e2e::cleanup::{delete_and_wait, delete_namespace};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::pinned_kind;
use kube::{Api, Client};
use serde_json::{Value, json};

async fn api_for(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap());
    let (resource, _) = pinned_kind(client, &gvk).await.unwrap();
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn the_api_server_refuses_every_bad_input_naming_the_field() {
    let admin = e2e::admin().await;
    for crd in api::crds::all() {
        e2e::apply_crd(&admin, &crd).await;
    }
    let cases = api::testdata::bad_inputs().unwrap();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let mut made_namespaces = Vec::new();
    let mut made_objects: Vec<(Api<DynamicObject>, String)> = Vec::new();
    let mut wrong = Vec::new();
    for case in &cases {
        let valid = case.valid().unwrap();
        if let Some(ns) = valid["metadata"]["namespace"].as_str()
            && !made_namespaces.iter().any(|m| m == ns)
            && namespaces.get_opt(ns).await.unwrap().is_none()
        {
            e2e::install::wait_not_terminating(&admin, ns).await;
            namespaces
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
                )
                .await
                .unwrap();
            made_namespaces.push(ns.to_owned());
        }
        let api = api_for(&admin, &valid).await;
        let tried = testkit::refusal::try_refused(
            &api,
            &case.name,
            valid.clone(),
            case.broken().unwrap(),
            case.in_status(),
            &case.field,
        )
        .await
        .unwrap();
        if let Some(name) = tried.created {
            made_objects.push((api, name));
        }
        wrong.extend(tried.wrong);
    }
    for (api, name) in made_objects {
        delete_and_wait(&api, &name).await;
    }
    for ns in made_namespaces {
        delete_namespace(&admin, &ns).await;
    }
    assert!(
        wrong.is_empty(),
        "{} of {} bad inputs were not refused as expected:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
