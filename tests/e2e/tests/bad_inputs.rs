//! The table of bad inputs the CRDs refuse (`crates/api/tests/fixtures/bad-inputs.yaml`, checked
//! offline by the api crate's tests), refused by a real API server too: each broken object is
//! created with `dryRun=All` (or, for a field under `status`, its valid object is created and
//! the broken status patched with `dryRun=All`), and the answer must be 422 Invalid naming the
//! field. Every CRD of this project is installed first (as on plain Kubernetes). What the test
//! creates it deletes.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use e2e::cleanup::{delete_and_wait, delete_namespace};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
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

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        field_manager: Some(e2e::MANAGER.to_owned()),
    }
}

/// What the API server says to `result`: Ok(message of a 422), or why that is not what happened.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Result<String, String> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 422 => Ok(status.message),
        Err(other) => Err(format!("refused otherwise: {other}")),
        Ok(accepted) => Err(format!("accepted: {accepted:?}")),
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
        let broken = case.broken().unwrap();
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
        let answer = if case.path.starts_with("/status") {
            // Status is not written on create: the object must exist, its status is patched.
            let name = valid["metadata"]["name"].as_str().unwrap().to_owned();
            if api.get_opt(&name).await.unwrap().is_none() {
                let mut object: DynamicObject = serde_json::from_value(valid.clone()).unwrap();
                object.metadata.resource_version = None;
                api.create(&PostParams::default(), &object).await.unwrap();
                made_objects.push((api.clone(), name.clone()));
            }
            let params = PatchParams {
                dry_run: true,
                ..PatchParams::default()
            };
            refusal(
                api.patch_status(
                    &name,
                    &params,
                    &Patch::Merge(json!({"status": broken["status"]})),
                )
                .await,
            )
        } else {
            let object: DynamicObject = serde_json::from_value(broken).unwrap();
            refusal(api.create(&dry_run(), &object).await)
        };
        match answer {
            Ok(message) if message.contains(&case.field) => {}
            Ok(message) => wrong.push(format!(
                "{}: 422 without naming {}: {message}",
                case.name, case.field
            )),
            Err(why) => wrong.push(format!("{}: {why}", case.name)),
        }
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
