//! Adoption of driver operators that were installed through OLM (seed 001, "Upgrade from
//! OLM-managed operator"): before starting our operator for such a driver, remove the OLM
//! Subscription, then the ClusterServiceVersion, and wait for OLM to take its operator
//! Deployment away. The driver's own Deployment, DaemonSet and the rest keep running and are
//! then re-applied in place by our driver operator, which uses the same names.
//!
//! Progress is recorded in annotations on `Storage/cluster` as soon as a Subscription is found,
//! so an operator restarted half-way resumes with the namespace and CSV it had found.

use std::time::Duration;

use api::operator_v1::{ConditionStatus, OperatorCondition, Storage};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use opkit::apply::delete_observed;
use opkit::conditions::condition;
use opkit::metrics::Metrics;
use serde_json::json;

use crate::failure::Failure;
use crate::names::STARTER;
use crate::registry::{DriverEntry, OlmPackage};

/// How soon to look again while an adoption is under way.
pub const RETRY: Duration = Duration::from_secs(5);

/// Where an adoption stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// No OLM installation of this driver (or no OLM at all).
    NothingToAdopt,
    /// Under way; the message says what we wait for.
    InProgress(String),
    /// The OLM installation is gone; our operator takes over.
    Adopted,
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", kind),
        plural,
    )
}

/// The annotation keys recording an adoption of `entry` on Storage.
pub fn annotation_keys(entry: &DriverEntry) -> (String, String) {
    // Annotation prefixes must be lower-case DNS subdomains.
    let prefix = entry.condition_prefix.to_lowercase();
    (
        format!("{prefix}.olm-removal.storage.openshift.io/namespace"),
        format!("{prefix}.olm-removal.storage.openshift.io/csvName"),
    )
}

fn failed(what: &str, source: kube::Error) -> Failure {
    Failure::Create {
        kind: "OLM adoption".into(),
        name: what.into(),
        source,
    }
}

fn not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Takes the next step of adopting `entry`'s OLM installation, if it has one, counting what
/// it writes in `metrics`.
pub async fn step(
    client: &Client,
    entry: &DriverEntry,
    storage: &Storage,
    metrics: &Metrics,
) -> Result<Progress, Failure> {
    let Some(OlmPackage {
        package,
        operator_deployment,
    }) = entry.olm
    else {
        return Ok(Progress::NothingToAdopt);
    };
    let (namespace_key, csv_key) = annotation_keys(entry);
    let subscriptions = resource("Subscription", "subscriptions");
    let csvs = resource("ClusterServiceVersion", "clusterserviceversions");
    let recorded = storage.annotations().get(&namespace_key).cloned();
    let (namespace, csv) = match recorded {
        Some(namespace) => (
            namespace,
            storage
                .annotations()
                .get(&csv_key)
                .cloned()
                .unwrap_or_default(),
        ),
        None => {
            let list = match Api::<DynamicObject>::all_with(client.clone(), &subscriptions)
                .list(&Default::default())
                .await
            {
                Ok(list) => list,
                // No OLM on this cluster.
                Err(error) if not_found(&error) => return Ok(Progress::NothingToAdopt),
                Err(error) => return Err(failed("listing Subscriptions", error)),
            };
            let Some(subscription) = list
                .items
                .into_iter()
                .find(|s| s.data["spec"]["name"] == package)
            else {
                return Ok(Progress::NothingToAdopt);
            };
            let namespace = subscription.namespace().unwrap_or_default();
            let status = &subscription.data["status"];
            let csv = status["installedCSV"]
                .as_str()
                .or(status["currentCSV"].as_str())
                .unwrap_or_default()
                .to_owned();
            record(
                client,
                metrics,
                &[(&namespace_key, Some(&namespace)), (&csv_key, Some(&csv))],
            )
            .await?;
            tracing::info!(
                driver = entry.short_name,
                namespace,
                csv,
                "adopting the OLM installation"
            );
            (namespace, csv)
        }
    };

    let namespaced =
        Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &subscriptions);
    let found = namespaced
        .list(&Default::default())
        .await
        .map_err(|e| failed("listing Subscriptions", e))?;
    if let Some(subscription) = found
        .items
        .iter()
        .find(|s| s.data["spec"]["name"] == package)
    {
        let name = subscription.name_any();
        // The Subscription read here (its package), and no other.
        if delete_observed(
            &namespaced,
            &subscription.metadata,
            true,
            &DeleteParams::default(),
        )
        .await
        .map_err(|e| failed("deleting the Subscription", e))?
        {
            metrics.wrote(STARTER, "Subscription");
        }
        return Ok(Progress::InProgress(format!(
            "deleting Subscription {namespace}/{name} of OLM package {package}"
        )));
    }
    if !csv.is_empty() {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &csvs);
        if let Some(found) = api
            .get_opt(&csv)
            .await
            .map_err(|e| failed("reading the ClusterServiceVersion", e))?
        {
            if delete_observed(&api, &found.metadata, false, &DeleteParams::default())
                .await
                .map_err(|e| failed("deleting the ClusterServiceVersion", e))?
            {
                metrics.wrote(STARTER, "ClusterServiceVersion");
            }
            return Ok(Progress::InProgress(format!(
                "deleting ClusterServiceVersion {namespace}/{csv}"
            )));
        }
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    if deployments
        .get_opt(operator_deployment)
        .await
        .map_err(|e| failed("reading the OLM operator", e))?
        .is_some()
    {
        return Ok(Progress::InProgress(format!(
            "waiting for OLM to remove the old operator Deployment {namespace}/{operator_deployment}"
        )));
    }
    record(client, metrics, &[(&namespace_key, None), (&csv_key, None)]).await?;
    tracing::info!(
        driver = entry.short_name,
        "the OLM installation is gone; starting our operator"
    );
    Ok(Progress::Adopted)
}

async fn record(
    client: &Client,
    metrics: &Metrics,
    annotations: &[(&str, Option<&str>)],
) -> Result<(), Failure> {
    let annotations: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    Api::<Storage>::all(client.clone())
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .map_err(|e| failed("recording adoption progress on Storage/cluster", e))?;
    metrics.wrote(STARTER, "Storage");
    Ok(())
}

/// `<Prefix>OLMOperatorRemoval{Progressing,Available}` for an adoption.
pub fn conditions(entry: &DriverEntry, progress: &Progress) -> Vec<OperatorCondition> {
    let prefix = format!("{}OLMOperatorRemoval", entry.condition_prefix);
    match progress {
        Progress::NothingToAdopt => Vec::new(),
        Progress::InProgress(message) => vec![
            condition(
                format!("{prefix}Progressing"),
                ConditionStatus::True,
                "RemovingOLMOperator",
                message.clone(),
            ),
            condition(
                format!("{prefix}Available"),
                ConditionStatus::True,
                "RemovingOLMOperator",
                "",
            ),
        ],
        Progress::Adopted => vec![
            condition(
                format!("{prefix}Progressing"),
                ConditionStatus::False,
                "Finished",
                "",
            ),
            condition(
                format!("{prefix}Available"),
                ConditionStatus::True,
                "Finished",
                "",
            ),
        ],
    }
}
