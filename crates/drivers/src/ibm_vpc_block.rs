//! IBM Cloud VPC Block (`vpc.block.csi.ibm.io`): the table in `ibm_vpc_block.yaml` plus
//! - the customer key of `driverConfig.ibmcloud.encryptionKeyCRN` on every class;
//! - node affinity to nodes with region and zone labels (the driver exits without them, so a
//!   node without them gets no crash-looping pod), as OpenShift's operator does;
//! - `SecretSync` ([`secret_sync`]), the controller of OpenShift's IBM operator: the driver
//!   reads its IBM Cloud configuration from Secret `storage-secret-store` (key
//!   `slclient.toml`: region endpoint, resource group ID, API key), which it derives from the
//!   API key of the credentials Secret `ibm-cloud-credentials` (cloud-credential-operator
//!   writes it) and the region, account and resource group name of the cluster's cloud config
//!   (ConfigMap `openshift-cloud-controller-manager/cloud-conf`, key `cloud.conf`); the
//!   resource group's ID comes from IBM Cloud's Resource Manager ([`crate::ibm_cloud`], at the
//!   Infrastructure's custom service endpoints when it names some). It runs on every reconcile
//!   and every [`SYNC_INTERVAL`], asks IBM Cloud only when an input changed, and writes only
//!   when the Secret differs; a new Secret (e.g. a rotated API key) rolls the driver's pods. Its condition is `SecretSyncDegraded`: True naming the missing
//!   Secret, ConfigMap, key or the IBM Cloud error, while the last good Secret stays.
//!
//! Where this differs from OpenShift on purpose: OpenShift's operator waits silently for a
//! missing credentials Secret or cloud config; here that is `SecretSyncDegraded` True, unless a
//! `storage-secret-store` exists already (e.g. one an administrator created on a cluster
//! without cloud-credential-operator), which is then left as it is.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_kit::{DriverDef, HookError, Hooks, Inputs};
use driver_operator::{Task, TaskConfig};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    Secret,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;

use crate::common::ds_pod_spec;
use crate::ibm_cloud::{self, Endpoints};
use crate::table::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "ibm-vpc-block";
/// The CSI driver name.
pub const CSI_NAME: &str = "vpc.block.csi.ibm.io";
/// The StorageClass parameter naming the Key Protect / Hyper Protect key of new volumes.
pub const ENCRYPTION_KEY_PARAMETER: &str = "encryptionKey";
/// The Secret the driver reads its IBM Cloud configuration from.
pub const STORAGE_SECRET: &str = "storage-secret-store";
/// Its key.
pub const STORAGE_SECRET_KEY: &str = "slclient.toml";
/// The key of the credentials Secret with the API key.
pub const API_KEY: &str = "ibmcloud_api_key";
/// The cluster's cloud config: namespace, name.
pub const CLOUD_CONF: (&str, &str) = ("openshift-cloud-controller-manager", "cloud-conf");
/// Its key.
pub const CLOUD_CONF_KEY: &str = "cloud.conf";
/// The name of the controller writing [`STORAGE_SECRET`] (condition `SecretSyncDegraded`).
pub const SECRET_SYNC: &str = "SecretSync";
/// Its field manager.
pub const SECRET_FIELD_MANAGER: &str = "storage-operator/SecretSync";
/// The controller writing [`STORAGE_SECRET`] (its field manager is [`SECRET_FIELD_MANAGER`]).
pub const SECRET_CONTROLLER: &str = "SecretSync";
/// The longest time between two syncs (OpenShift's operator resyncs every 20 minutes).
pub const SYNC_INTERVAL: Duration = Duration::from_secs(20 * 60);
/// The node labels the driver needs.
pub const NODE_LABELS: [&str; 2] = [
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

const TABLE: &str = include_str!("ibm_vpc_block.yaml");

/// The IBM VPC Block driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        daemon_set: vec![with_labelled_nodes_only],
        storage_class: vec![with_encryption_key],
        ..Hooks::default()
    };
    Ok(def)
}

/// Sets `encryptionKey` (and `encrypted: "true"`) from `driverConfig.ibmcloud.encryptionKeyCRN`
/// on every class, when set.
pub fn with_encryption_key(inputs: &Inputs, class: &mut StorageClass) {
    let crn = inputs
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.ibmcloud.as_ref())
        .map(|i| i.encryption_key_crn.as_str())
        .filter(|crn| !crn.is_empty());
    if let Some(crn) = crn {
        let parameters = class.parameters.get_or_insert_with(Default::default);
        parameters.insert(ENCRYPTION_KEY_PARAMETER.to_owned(), crn.to_owned());
        parameters.insert("encrypted".to_owned(), "true".to_owned());
    }
}

/// Schedules the node plugin only on nodes with [`NODE_LABELS`] (the installer sets them; the
/// driver exits on a node without them).
pub fn with_labelled_nodes_only(_inputs: &Inputs, daemon_set: &mut DaemonSet) {
    let Some(spec) = ds_pod_spec(daemon_set) else {
        return;
    };
    let requirements = NODE_LABELS
        .iter()
        .map(|key| NodeSelectorRequirement {
            key: (*key).to_owned(),
            operator: "Exists".to_owned(),
            values: None,
        })
        .collect();
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity = Some(NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(requirements),
                match_fields: None,
            }],
        }),
        preferred_during_scheduling_ignored_during_execution: None,
    });
}

/// What the cloud config says about the cluster's IBM Cloud account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudConf {
    /// `region`.
    pub region: String,
    /// `g2ResourceGroupName`.
    pub resource_group_name: String,
    /// `accountID`.
    pub account_id: String,
}

/// Reads `region`, `g2ResourceGroupName` and `accountID` of the cloud config (`key = value`
/// lines of an INI file, any section; quotes around a value dropped). `source` names the
/// ConfigMap and key in the error, which lists every missing key.
pub fn parse_cloud_conf(text: &str, source: &str) -> Result<CloudConf, String> {
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with(['#', ';', '[']) {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim().trim_matches('"').trim();
            if !value.is_empty() {
                values.insert(key.trim().to_owned(), value.to_owned());
            }
        }
    }
    let wanted = ["region", "g2ResourceGroupName", "accountID"];
    let missing: Vec<&str> = wanted
        .into_iter()
        .filter(|k| !values.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{source} has no {} (the IBM Cloud cloud config names the cluster's region, resource group and account)",
            missing.join(", ")
        ));
    }
    let mut take = |key: &str| values.remove(key).unwrap_or_default();
    Ok(CloudConf {
        region: take("region"),
        resource_group_name: take("g2ResourceGroupName"),
        account_id: take("accountID"),
    })
}

/// A TOML basic string.
fn toml_string(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The driver's `slclient.toml` (its `[vpc]` section, as OpenShift's operator writes it).
pub fn slclient_toml(
    endpoints: &Endpoints,
    region: &str,
    resource_group_id: &str,
    api_key: &str,
) -> String {
    let lines = [
        ("iam_client_id", "bx".to_owned()),
        ("iam_client_secret", "bx".to_owned()),
        ("g2_token_exchange_endpoint_url", endpoints.iam.clone()),
        ("g2_riaas_endpoint_url", endpoints.vpc_for(region)),
        ("g2_resource_group_id", resource_group_id.to_owned()),
        ("g2_api_key", api_key.to_owned()),
        ("provider_type", "g2".to_owned()),
    ];
    let mut out = String::from("[vpc]\n");
    for (key, value) in lines {
        out.push_str(&format!("{key} = {}\n", toml_string(&value)));
    }
    out
}

/// What the resource group lookup depends on; an unchanged key reuses the last answer.
#[derive(Clone, PartialEq, Eq)]
struct LookupKey {
    endpoints: Endpoints,
    account_id: String,
    group: String,
    api_key: String,
}

/// The `SecretSync` controller (see the module docs).
pub struct SecretSync {
    client: kube::Client,
    def: DriverDef,
    credentials: String,
    last_lookup: Mutex<Option<(LookupKey, String)>>,
}

impl std::fmt::Debug for SecretSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretSync")
            .field("namespace", &self.def.namespace)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

/// The guarded value, also after a panic while it was held (the lookup cache is only ever
/// replaced whole, so it is never half-written).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SecretSync {
    /// The controller of `def`'s Secret, reading and writing through `client`.
    pub fn new(client: kube::Client, def: &DriverDef) -> Self {
        let credentials = def
            .credentials
            .as_ref()
            .map_or("ibm-cloud-credentials", |c| c.secret_name.as_str())
            .to_owned();
        Self {
            client,
            def: def.clone(),
            credentials,
            last_lookup: Mutex::new(None),
        }
    }

    /// The resource group's ID: the last answer when nothing it depends on changed, else IBM
    /// Cloud's.
    async fn group_id(&self, key: LookupKey) -> Result<String, String> {
        if let Some((k, id)) = lock(&self.last_lookup).as_ref()
            && *k == key
        {
            return Ok(id.clone());
        }
        let client = crate::http::http_client(&crate::http::Tls::System)?;
        let id = ibm_cloud::resource_group_id(
            &client,
            &key.endpoints,
            &key.api_key,
            &key.account_id,
            &key.group,
        )
        .await?;
        *lock(&self.last_lookup) = Some((key, id.clone()));
        Ok(id)
    }

    /// Writes the Secret when it is missing or stale; whether it wrote.
    async fn run(&self) -> Result<bool, HookError> {
        let namespace = &self.def.namespace;
        let target = format!("{namespace}/{STORAGE_SECRET}");
        let secrets = Api::<Secret>::namespaced(self.client.clone(), namespace);
        let read =
            |e: kube::Error, what: &str| HookError::api(format!("reading {what} failed: {e}"));
        let credentials_id = format!("Secret {namespace}/{}", self.credentials);
        let credentials = secrets
            .get_opt(&self.credentials)
            .await
            .map_err(|e| read(e, &credentials_id))?;
        let (cm_namespace, cm_name) = CLOUD_CONF;
        let conf_id = format!("ConfigMap {cm_namespace}/{cm_name}");
        let conf = Api::<ConfigMap>::namespaced(self.client.clone(), cm_namespace)
            .get_opt(cm_name)
            .await
            .map_err(|e| read(e, &conf_id))?;
        let (credentials, conf) = match (credentials, conf) {
            (Some(credentials), Some(conf)) => (credentials, conf),
            (credentials, _) => {
                let existing = secrets
                    .get_opt(STORAGE_SECRET)
                    .await
                    .map_err(|e| read(e, &format!("Secret {target}")))?;
                if existing.is_some() {
                    tracing::debug!(secret = %target, "inputs missing; the existing Secret is kept");
                    return Ok(false);
                }
                let missing = if credentials.is_none() {
                    format!(
                        "{credentials_id} does not exist (cloud-credential-operator creates it from the driver's CredentialsRequest)"
                    )
                } else {
                    format!("{conf_id} does not exist (the cluster's IBM Cloud cloud config)")
                };
                return Err(HookError::config(format!(
                    "Secret {target} cannot be generated: {missing}; without them, create {target} with key {STORAGE_SECRET_KEY} yourself"
                )));
            }
        };
        let api_key = credentials
            .data
            .as_ref()
            .and_then(|d| d.get(API_KEY))
            .map(|v| String::from_utf8_lossy(&v.0).trim().to_owned())
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                HookError::config(format!(
                    "{credentials_id} has no key {API_KEY}: it must hold the IBM Cloud API key"
                ))
            })?;
        let conf_source = format!("key {CLOUD_CONF_KEY} of {conf_id}");
        let text = conf
            .data
            .as_ref()
            .and_then(|d| d.get(CLOUD_CONF_KEY))
            .ok_or_else(|| HookError::config(format!("{conf_id} has no key {CLOUD_CONF_KEY}")))?;
        let cloud = parse_cloud_conf(text, &conf_source).map_err(HookError::config)?;
        let infrastructure = Api::<api::config_v1::Infrastructure>::all(self.client.clone())
            .get_opt("cluster")
            .await
            .ok()
            .flatten();
        let endpoints = Endpoints::from_infrastructure(infrastructure.as_ref());
        let group_id = self
            .group_id(LookupKey {
                endpoints: endpoints.clone(),
                account_id: cloud.account_id.clone(),
                group: cloud.resource_group_name.clone(),
                api_key: api_key.clone(),
            })
            .await
            .map_err(|e| {
                HookError::cloud(format!(
                    "cannot find the ID of resource group {:?} for Secret {target}: {e}",
                    cloud.resource_group_name
                ))
            })?;
        let toml = slclient_toml(&endpoints, &cloud.region, &group_id, &api_key);
        let desired = crate::secrets::build(
            &self.def,
            STORAGE_SECRET,
            &BTreeMap::from([(STORAGE_SECRET_KEY.to_owned(), toml)]),
        );
        crate::secrets::apply(
            &self.client,
            &desired,
            SECRET_CONTROLLER,
            &self.def.adopt_from,
        )
        .await
        .map_err(HookError::api)
    }
}

impl Task for SecretSync {
    fn sync<'a>(
        &'a self,
        _inputs: &'a Inputs,
    ) -> Pin<Box<dyn Future<Output = Result<bool, HookError>> + Send + 'a>> {
        // It reads the cloud config and credentials through the API, as OpenShift's does.
        Box::pin(self.run())
    }
}

/// The `SecretSync` task of `def` over `client`, run at least every `interval`.
/// It runs at once when the cloud config changes (the credentials Secret and the Secret it
/// writes are the kit's to watch: the latter is a hashed Secret of the table, so a new one
/// rolls the pods).
pub fn secret_sync(client: kube::Client, def: &DriverDef, interval: Duration) -> TaskConfig {
    let (namespace, name) = CLOUD_CONF;
    TaskConfig {
        name: SECRET_SYNC.to_owned(),
        task: Arc::new(SecretSync::new(client, def)),
        interval,
        config_maps: vec![(namespace.to_owned(), name.to_owned())],
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const CONF: &str = "[global]\nversion = 1.1.0\n[kubernetes]\nconfig-file = \"\"\n[provider]\naccountID = 0123abcd\nclusterID = demo-x7k2p\ncluster-default-provider = g2\nregion = eu-de\ng2Credentials = /etc/vpc/ibmcloud_api_key\ng2ResourceGroupName = \"demo-rg\"\ng2VpcName = demo-vpc\n";

    #[test]
    fn the_cloud_config_gives_region_group_and_account() {
        let conf = parse_cloud_conf(CONF, "cloud.conf").unwrap();
        assert_eq!(
            conf,
            CloudConf {
                region: "eu-de".into(),
                resource_group_name: "demo-rg".into(),
                account_id: "0123abcd".into(),
            }
        );
    }

    #[test]
    fn every_missing_key_is_named() {
        let error = parse_cloud_conf(
            "[provider]\nregion = eu-de\ng2ResourceGroupName =\n",
            "key cloud.conf of ConfigMap x/y",
        )
        .unwrap_err();
        assert!(
            error.starts_with(
                "key cloud.conf of ConfigMap x/y has no g2ResourceGroupName, accountID"
            ),
            "{error}"
        );
    }

    #[test]
    fn the_toml_has_the_region_endpoint_group_and_key() {
        let toml = slclient_toml(&Endpoints::default(), "eu-de", "rg-1", "key\"with\\odd");
        assert_eq!(
            toml,
            "[vpc]\niam_client_id = \"bx\"\niam_client_secret = \"bx\"\ng2_token_exchange_endpoint_url = \"https://iam.cloud.ibm.com\"\ng2_riaas_endpoint_url = \"https://eu-de.iaas.cloud.ibm.com\"\ng2_resource_group_id = \"rg-1\"\ng2_api_key = \"key\\\"with\\\\odd\"\nprovider_type = \"g2\"\n"
        );
    }

    #[test]
    fn custom_endpoints_reach_the_toml() {
        let endpoints = Endpoints {
            iam: "https://private.iam.cloud.ibm.com".into(),
            resource_manager: "https://rm".into(),
            vpc: Some("https://eu-de.private.iaas.cloud.ibm.com".into()),
        };
        let toml = slclient_toml(&endpoints, "eu-de", "rg", "k");
        assert!(
            toml.contains(
                "g2_token_exchange_endpoint_url = \"https://private.iam.cloud.ibm.com\"\n"
            )
        );
        assert!(
            toml.contains("g2_riaas_endpoint_url = \"https://eu-de.private.iaas.cloud.ibm.com\"\n")
        );
    }
}
