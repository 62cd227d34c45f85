//! The table of bad inputs the CRDs refuse (`tests/fixtures/bad-inputs.yaml`) replayed against
//! the fake API server, as `tests/e2e/tests/bad_inputs.rs` replays it against a real one: each
//! broken object is created with `dryRun=All` (a field under `status`: the valid object is
//! created and the broken status patched with `dryRun=All`), and the answer must be 422 Invalid
//! naming the field. testkit must refuse what kube-apiserver refuses.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

fn api_for(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap();
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind && crd.spec.group == group)
        .unwrap_or_else(|| panic!("no CRD of ours serves {kind}"));
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &crd.spec.names.plural,
    );
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

#[tokio::test]
async fn testkit_refuses_every_bad_input_naming_the_field() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let cases = api::testdata::bad_inputs().unwrap();
    assert!(cases.len() >= 30, "the table has {} cases", cases.len());
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let mut wrong = Vec::new();
    for case in &cases {
        let valid = case.valid().unwrap();
        if let Some(ns) = valid["metadata"]["namespace"].as_str()
            && namespaces.get_opt(ns).await.unwrap().is_none()
        {
            namespaces
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
                )
                .await
                .unwrap();
        }
        let tried = testkit::refusal::try_refused(
            &api_for(&admin, &valid),
            &case.name,
            valid.clone(),
            case.broken().unwrap(),
            case.in_status(),
            &case.field,
        )
        .await
        .unwrap();
        wrong.extend(tried.wrong);
    }
    assert!(
        wrong.is_empty(),
        "{} of {} bad inputs were not refused as expected:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
