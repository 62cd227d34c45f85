//! Objects sent through an API server's admission without running anything: created with
//! `dryRun=All` (or for real, where admission needs them, such as ServiceAccounts), and a Pod
//! made from a workload's template as its controller would make it.

use kube::api::{DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::pinned_kind;
use kube::{Api, Client};
use serde_json::{Value, json};

/// The group, version and kind of `object`.
pub fn gvk(object: &Value) -> GroupVersionKind {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap_or_default())
}

/// `Kind namespace/name`, for messages.
pub fn describe(object: &Value) -> String {
    format!(
        "{} {}/{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Creates `object` (only validated with `dry_run`); what the server refused, as its message
/// and code. An object of the same name that exists already still had its fields validated
/// before the conflict, so a conflict is no refusal.
pub async fn create(client: &Client, object: &Value, dry_run: bool) -> Result<(), String> {
    let gvk = gvk(object);
    let (resource, _) = pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("{gvk:?} is not served: {e}"))?;
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let typed: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| format!("not an object: {e}"))?;
    let params = PostParams {
        dry_run,
        field_manager: Some(crate::MANAGER.to_owned()),
    };
    match api.create(&params, &typed).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(kube::Error::Api(status)) => Err(format!("{} ({})", status.message, status.code)),
        Err(e) => Err(e.to_string()),
    }
}

/// A Pod as a workload controller would make it from `workload`'s template, on `node` when
/// there is one.
pub fn pod_of(workload: &Value, node: Option<&str>) -> Value {
    let template = &workload["spec"]["template"];
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": template["metadata"].clone(),
        "spec": template["spec"].clone(),
    });
    pod["metadata"]["namespace"] = workload["metadata"]["namespace"].clone();
    pod["metadata"]["name"] = Value::from(format!(
        "{}-dry-run",
        workload["metadata"]["name"].as_str().unwrap_or("workload")
    ));
    if let Some(node) = node {
        pod["spec"]["nodeName"] = Value::from(node);
    }
    pod
}
