//! OpenStack Manila (`manila.csi.openstack.org`): the table in `openstack_manila.yaml` plus
//! - the precondition: the driver runs only where the cloud offers Manila share types. The
//!   operator asks the cloud through [`ShareTypes`] (a small trait, so tests use a fake) on
//!   every reconcile and every [`PROBE_INTERVAL`]; while there are none, or the cloud cannot be
//!   asked, it reports `ManilaDriverControllerServiceControllerDisabled` True with the
//!   reason and applies nothing, and cluster-storage-operator reports the driver Available with
//!   `DriverDisabled`. Operands applied while share types existed are left alone (volumes may
//!   still need unmounting), as OpenShift's Manila operator does;
//! - one StorageClass per share type, `csi-manila-<type>` (never deleted when a type goes
//!   away, a cloud hiccup must not take classes with it);
//! - the NFS plugin Manila forwards calls for NFS shares to, laid out as OpenShift lays it
//!   out: in the controller pod a second container (`csi-driver-nfs`) on a socket of the pod's
//!   emptyDir; on nodes a DaemonSet of its own ([`NFS_DAEMON_SET`], reported as
//!   `NFSDriverNodeServiceController`) with its socket on the host, which the node plugin's
//!   init container waits for.
//!
//! - the real cloud client, [`OpenStackShareTypes`]: at every check it reads the credentials
//!   Secret (`manila-cloud-credentials`, key `clouds.yaml`, cloud `openstack`, as
//!   cloud-credential-operator writes it; optional key `cacert` with the CA bundle of a
//!   self-signed cloud, else, when `clouds.yaml` names a `cacert` file, the CA bundle of
//!   ConfigMap `openshift-config/cloud-provider-config`) through the API, authenticates with Keystone v3 and lists the share
//!   types of the `sharev2` endpoint ([`crate::openstack_api`]). Every failure (missing Secret
//!   or key, a bad `clouds.yaml` field, a 401, no Manila in the catalog, Manila's HTTP status)
//!   is the Disabled message;
//! - Secret `csi-manila-secrets`, which the classes and the snapshot class reference: the
//!   `os-*` keys the Manila CSI driver reads, derived from the same `clouds.yaml`
//!   ([`csi_secret_data`], the keys OpenShift's Manila operator writes). The kit derives
//!   ConfigMaps only, and a derived Secret would need a new operand kind in every shared
//!   match, so the probe writes it ([`sync_csi_secret`]) once the cloud has answered with
//!   share types (nothing is written while Disabled): server-side apply under its own field
//!   manager (keys no longer derived, e.g. the password after a switch to an application
//!   credential, are removed), skipped when the data and its hash annotation already match
//!   (an idle cluster sees no write). A rotation of the credentials Secret triggers a
//!   reconcile, hence a check, hence the new Secret at once. A broken `clouds.yaml` is
//!   reported as Disabled naming the Secret and the key, and the last good
//!   `csi-manila-secrets` stays. The driver pods never mount it: the sidecars read it per
//!   call, so nothing rolls. (OpenShift's operator writes fixed keys instead, `os-useClouds`
//!   and the path of the mounted `clouds.yaml`, which manila-csi-plugin reads from v1.34 on;
//!   the keys written here work with every release.)

use crate::common::pod_spec;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use csi_kit::workloads::{field_env, host_path, mount, node_update_strategy};
use csi_kit::{
    DriverDef, ExtraDaemonSet, Hooks, Inputs, StorageClassDef, VolumeSnapshotClassDef, names,
};
use driver_operator::{Probe, ProbeConfig, Probed};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvVar, PodSpec, PodTemplateSpec, ResourceRequirements, Secret,
    SecurityContext, Toleration, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Api;

use crate::openstack_api::{self, Cloud, Tls};
use crate::table::DriverError;
use csi_kit::HookError;

/// The short name.
pub const SHORT_NAME: &str = "openstack-manila";
/// The operand namespace (the table's), which the generated StorageClasses name for the
/// driver's Secret.
pub const NAMESPACE: &str = "openshift-manila-csi-driver";
/// The CSI driver name.
pub const CSI_NAME: &str = "manila.csi.openstack.org";
/// The prefix of the StorageClasses, one per share type.
pub const STORAGE_CLASS_PREFIX: &str = "csi-manila-";
/// The Secret the classes reference for the driver's OpenStack credentials.
pub const CSI_SECRET: &str = "csi-manila-secrets";
/// The NFS plugin's container in the controller pod.
pub const NFS_CONTROLLER_CONTAINER: &str = "csi-driver-nfs";
/// The NFS plugin's socket in the controller pod (on the pod's socket emptyDir).
pub const NFS_CONTROLLER_ENDPOINT: &str = "unix://plugin/csi-nfs.sock";
/// The NFS plugin's node DaemonSet.
pub const NFS_DAEMON_SET: &str = "csi-nodeplugin-nfsplugin";
/// The controller of [`NFS_DAEMON_SET`] in conditions, as OpenShift's operator names it.
pub const NFS_CONTROLLER: &str = "NFSDriverNodeServiceController";
/// The NFS plugin's socket directory on the host, where the node plugin forwards to.
pub const NFS_HOST_DIR: &str = "/var/lib/kubelet/plugins/csi-nfsplugin";
/// How often the cloud is asked again for share types.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(60);

const TABLE: &str = include_str!("openstack_manila.yaml");

/// The ConfigMap HyperShift keeps in the control-plane namespace with the cloud's config and
/// CA bundle (standalone, the controller mounts the operand namespace's copy of the cluster's
/// cloud config).
pub const HOSTED_CLOUD_CONFIG: &str = "openstack-cloud-config";
/// The controller's volume of the cloud's CA bundle.
const CA_BUNDLE_VOLUME: &str = "cacert";

/// With a hosted control plane the controller reads the cloud's CA bundle from HyperShift's
/// ConfigMap ([`HOSTED_CLOUD_CONFIG`]), as OpenShift's pod does.
fn with_hosted_ca_bundle(inputs: &Inputs, deployment: &mut Deployment) {
    if inputs.hosted.is_none() {
        return;
    }
    let volume = pod_spec(deployment)
        .and_then(|spec| spec.volumes.as_mut())
        .and_then(|volumes| volumes.iter_mut().find(|v| v.name == CA_BUNDLE_VOLUME))
        .and_then(|v| v.config_map.as_mut());
    if let Some(config_map) = volume {
        config_map.name = HOSTED_CLOUD_CONFIG.to_owned();
    }
}

/// The Manila driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_nfs_controller_plugin, with_hosted_ca_bundle],
        daemon_set: vec![with_node_plugin_layout],
        extra_daemon_sets: vec![ExtraDaemonSet {
            controller: NFS_CONTROLLER,
            name: NFS_DAEMON_SET,
            build: nfs_daemon_set,
        }],
        ..Hooks::default()
    };
    def.storage_class_generator = Some(storage_classes);
    def.precondition = Some(precondition);
    Ok(def)
}

/// Why Manila cannot run: no share types found.
pub const NO_SHARE_TYPES: &str = "the OpenStack cloud offers no Manila share types: create one (openstack share type create) or leave Manila unused";

/// Manila runs only with at least one share type (the probe's facts).
pub fn precondition(inputs: &Inputs) -> Result<(), HookError> {
    if inputs.probe_facts.is_empty() {
        Err(HookError::unsupported(NO_SHARE_TYPES))
    } else {
        Ok(())
    }
}

/// A share type name as a StorageClass name suffix: lower case, `[a-z0-9-]`, other characters
/// as `-`, at most 253 characters in all; `None` when nothing usable is left.
pub fn class_name(share_type: &str) -> Option<String> {
    let mut suffix: String = share_type
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    suffix = suffix.trim_matches('-').to_owned();
    if suffix.is_empty() {
        return None;
    }
    let mut name = format!("{STORAGE_CLASS_PREFIX}{suffix}");
    name.truncate(253);
    Some(name.trim_end_matches('-').to_owned())
}

/// One StorageClass per share type, with the driver's secrets; types whose names collide
/// after sanitizing get one class (the first).
pub fn storage_classes(inputs: &Inputs) -> Vec<StorageClassDef> {
    let mut out: Vec<StorageClassDef> = Vec::new();
    for share_type in &inputs.probe_facts {
        let Some(name) = class_name(share_type) else {
            continue;
        };
        if out.iter().any(|c| c.name == name) {
            continue;
        }
        let ns = NAMESPACE;
        let mut parameters = BTreeMap::from([("type".to_owned(), share_type.clone())]);
        for role in [
            "provisioner",
            "controller-expand",
            "node-stage",
            "node-publish",
        ] {
            parameters.insert(
                format!("csi.storage.k8s.io/{role}-secret-name"),
                CSI_SECRET.to_owned(),
            );
            parameters.insert(
                format!("csi.storage.k8s.io/{role}-secret-namespace"),
                ns.to_owned(),
            );
        }
        out.push(StorageClassDef {
            name,
            default: false,
            parameters,
            volume_binding_mode: "Immediate".to_owned(),
            allow_volume_expansion: true,
            reclaim_policy: "Delete".to_owned(),
        });
    }
    out
}

/// The snapshot class of the table (for tests that want to compare).
pub fn snapshot_class(def: &DriverDef) -> Option<&VolumeSnapshotClassDef> {
    def.volume_snapshot_classes.first()
}

/// Requests of every NFS plugin container, as OpenShift's.
fn nfs_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity("10m".to_owned())),
            ("memory".to_owned(), Quantity("50Mi".to_owned())),
        ])),
        ..ResourceRequirements::default()
    }
}

fn node_id_env() -> EnvVar {
    field_env("NODE_ID", "spec.nodeName")
}

/// Adds the NFS plugin to the controller pod, after the driver: it serves the driver's
/// forwarded calls on [`NFS_CONTROLLER_ENDPOINT`] in the socket emptyDir, unprivileged.
pub fn with_nfs_controller_plugin(inputs: &Inputs, deployment: &mut Deployment) {
    let Some(spec) = crate::common::pod_spec(deployment) else {
        return;
    };
    let nfs = Container {
        name: NFS_CONTROLLER_CONTAINER.to_owned(),
        image: inputs.extra_images.get("nfs").cloned(),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(vec![
            "--nodeid=$(NODE_ID)".to_owned(),
            format!("--endpoint={NFS_CONTROLLER_ENDPOINT}"),
            "--mount-permissions=0777".to_owned(),
        ]),
        env: Some(vec![node_id_env()]),
        resources: Some(nfs_resources()),
        security_context: Some(SecurityContext {
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        volume_mounts: Some(vec![mount("socket-dir", "/plugin")]),
        ..Container::default()
    };
    spec.containers
        .retain(|c| c.name != NFS_CONTROLLER_CONTAINER);
    let at = spec
        .containers
        .iter()
        .position(|c| c.name == names::DRIVER_CONTAINER)
        .map_or(spec.containers.len(), |i| i + 1);
    spec.containers.insert(at, nfs);
}

/// The node plugin as OpenShift runs it: its driver container mounts nothing of the kubelet's
/// (the NFS plugin mounts the shares; the socket directory is its `plugin-dir`), and an init
/// container waits for the NFS plugin's socket on the host before the driver starts.
pub fn with_node_plugin_layout(_inputs: &Inputs, daemon_set: &mut DaemonSet) {
    let Some(spec) = crate::common::ds_pod_spec(daemon_set) else {
        return;
    };
    let Some(driver) = crate::common::driver_container(spec) else {
        return;
    };
    if let Some(mounts) = driver.volume_mounts.as_mut() {
        mounts.retain(|m| m.name != "kubelet-dir" && m.name != "socket-dir");
    }
    let image = driver.image.clone();
    let wait = Container {
        name: "wait-for-nfs-plugin".to_owned(),
        image,
        command: Some(vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!(
                "until [ -S {NFS_HOST_DIR}/csi.sock ]; do\n  echo \"Waiting for NFS CSI plugin socket...\"\n  sleep 2\ndone\n"
            ),
        ]),
        resources: Some(nfs_resources()),
        security_context: Some(SecurityContext {
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        volume_mounts: Some(vec![mount("fwd-plugin-dir", NFS_HOST_DIR)]),
        ..Container::default()
    };
    spec.init_containers = Some(vec![wait]);
}

/// The NFS plugin's node DaemonSet ([`NFS_DAEMON_SET`]): privileged on the host network on
/// every node, serving on its socket directory on the host, mounting shares into the kubelet's
/// pods directory.
pub fn nfs_daemon_set(def: &DriverDef, inputs: &Inputs) -> DaemonSet {
    let selector = BTreeMap::from([
        ("app".to_owned(), "openstack-manila-csi".to_owned()),
        ("component".to_owned(), "nfs-nodeplugin".to_owned()),
    ]);
    let container = Container {
        name: names::DRIVER_CONTAINER.to_owned(),
        image: inputs.extra_images.get("nfs").cloned(),
        args: Some(vec![
            format!("--v={}", inputs.verbosity()),
            "--nodeid=$(NODE_ID)".to_owned(),
            "--endpoint=unix://plugin/csi.sock".to_owned(),
            "--mount-permissions=0777".to_owned(),
        ]),
        env: Some(vec![node_id_env()]),
        resources: Some(nfs_resources()),
        security_context: Some(SecurityContext {
            privileged: Some(true),
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        volume_mounts: Some(vec![
            mount("plugin-dir", "/plugin"),
            VolumeMount {
                mount_propagation: Some("Bidirectional".to_owned()),
                ..mount("pods-mount-dir", "/var/lib/kubelet/pods")
            },
            mount("etc-selinux", "/etc/selinux"),
            mount("sys-fs", "/sys/fs"),
        ]),
        ..Container::default()
    };
    DaemonSet {
        metadata: names::ns_meta(def, NFS_DAEMON_SET),
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(selector),
                    annotations: Some(BTreeMap::from([
                        (
                            names::REQUIRED_SCC_ANNOTATION.to_owned(),
                            "privileged".to_owned(),
                        ),
                        (
                            names::WORKLOAD_MANAGEMENT_ANNOTATION.to_owned(),
                            names::WORKLOAD_MANAGEMENT_VALUE.to_owned(),
                        ),
                    ])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    dns_policy: Some("ClusterFirstWithHostNet".to_owned()),
                    host_network: Some(true),
                    priority_class_name: Some("system-node-critical".to_owned()),
                    service_account_name: Some(names::node_sa(def)),
                    tolerations: Some(vec![Toleration {
                        operator: Some("Exists".to_owned()),
                        ..Toleration::default()
                    }]),
                    volumes: Some(vec![
                        host_path("plugin-dir", NFS_HOST_DIR, "DirectoryOrCreate"),
                        host_path(
                            "pods-mount-dir",
                            "/var/lib/kubelet/pods",
                            "DirectoryOrCreate",
                        ),
                        host_path("etc-selinux", "/etc/selinux", "DirectoryOrCreate"),
                        host_path("sys-fs", "/sys/fs", "Directory"),
                    ]),
                    ..PodSpec::default()
                }),
            },
            update_strategy: Some(node_update_strategy()),
            ..DaemonSetSpec::default()
        }),
        ..DaemonSet::default()
    }
}

/// Asks the cloud which Manila share types it offers.
pub trait ShareTypes: Send + Sync {
    /// The share type names, or why the cloud could not be asked.
    fn share_types(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, HookError>> + Send + '_>>;
}

/// The credentials Secret's key with `clouds.yaml` (written by cloud-credential-operator).
pub const CLOUDS_KEY: &str = "clouds.yaml";
/// The credentials Secret's optional key with the cloud's CA bundle (PEM), for a cloud with a
/// self-signed certificate.
pub const CA_KEY: &str = "cacert";
/// The cloud's name in `clouds.yaml`.
pub const CLOUD_NAME: &str = crate::openstack_cinder::CLOUD_NAME;
/// The field manager of [`CSI_SECRET`].
pub const SECRET_FIELD_MANAGER: &str = "storage-operator/openstack-manila-secret";
/// The controller writing [`CSI_SECRET`] (its field manager is [`SECRET_FIELD_MANAGER`]).
pub const SECRET_CONTROLLER: &str = "openstack-manila-secret";
/// The annotation on [`CSI_SECRET`] with the hash of its data, so an unchanged Secret is
/// recognised without comparing every key (and without a write).
pub const SECRET_HASH_ANNOTATION: &str = crate::secrets::HASH_ANNOTATION;

/// What the credentials Secret says about the cloud.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The cloud [`CLOUD_NAME`] of `clouds.yaml`.
    pub cloud: Cloud,
    /// The CA bundle of key [`CA_KEY`], when the Secret has one.
    pub ca: Option<String>,
}

impl Credentials {
    /// How to check the cloud's certificates: `verify: false` turns checks off; a CA bundle
    /// is added to the system roots.
    pub fn tls(&self) -> Tls {
        match (&self.ca, self.cloud.verify) {
            (_, Some(false)) => Tls::Insecure,
            (Some(ca), _) => Tls::WithCa(ca.clone()),
            (None, _) => Tls::System,
        }
    }
}

/// Reads the credentials from the data of Secret `secret` (`namespace/name`, for messages);
/// an error names the Secret, the key and the field to fix.
pub fn credentials_from(
    secret: &str,
    data: &BTreeMap<String, ByteString>,
) -> Result<Credentials, String> {
    let text = |key: &str| -> Result<Option<String>, String> {
        data.get(key)
            .map(|v| {
                String::from_utf8(v.0.clone())
                    .map_err(|_| format!("key {key} of Secret {secret} is not UTF-8 text"))
            })
            .transpose()
    };
    let Some(clouds) = text(CLOUDS_KEY)? else {
        return Err(format!(
            "Secret {secret} has no key {CLOUDS_KEY}: cloud-credential-operator writes it; check the CredentialsRequest of the driver"
        ));
    };
    let cloud = openstack_api::parse_cloud(&clouds, CLOUD_NAME)
        .map_err(|e| format!("key {CLOUDS_KEY} of Secret {secret} is invalid: {e}"))?;
    openstack_api::auth_request(&cloud)
        .map_err(|e| format!("key {CLOUDS_KEY} of Secret {secret} is invalid: {e}"))?;
    let ca = text(CA_KEY)?.filter(|ca| !ca.trim().is_empty());
    Ok(Credentials { cloud, ca })
}

/// The cluster's cloud config, which holds the CA bundle of a self-signed cloud (keys
/// [`crate::openstack_cinder::SOURCE_CA_KEYS`]) when `clouds.yaml` names a `cacert` file.
pub const CLOUD_CONFIG: (&str, &str) = ("openshift-config", "cloud-provider-config");

/// Reads the credentials Secret through the API (at every check, so a rotation is seen at
/// once); an error names the Secret. When `clouds.yaml` names a `cacert` file and the Secret
/// has no CA of its own, the CA bundle of the cluster's cloud config ([`CLOUD_CONFIG`]) is
/// used, as OpenShift's operators do; without one the system roots are used.
pub async fn fetch_credentials(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Credentials, HookError> {
    let id = format!("{namespace}/{name}");
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| HookError::api(format!("reading Secret {id} failed: {e}")))?
        .ok_or_else(|| {
            HookError::config(format!(
                "Secret {id} does not exist: cloud-credential-operator creates it from the driver's CredentialsRequest (or create it with key {CLOUDS_KEY})"
            ))
        })?;
    let mut credentials =
        credentials_from(&id, &secret.data.unwrap_or_default()).map_err(HookError::config)?;
    if credentials.ca.is_none() && credentials.cloud.cacert.is_some() {
        credentials.ca = cloud_config_ca(client).await;
    }
    Ok(credentials)
}

/// The CA bundle of the cluster's cloud config, if it has one and can be read (a cloud
/// whose certificate the system roots accept needs none, so its absence is no error).
async fn cloud_config_ca(client: &kube::Client) -> Option<String> {
    let (namespace, name) = CLOUD_CONFIG;
    match Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(config) => {
            let data = config?.data?;
            crate::openstack_cinder::SOURCE_CA_KEYS
                .iter()
                .find_map(|k| data.get(*k).filter(|v| !v.trim().is_empty()).cloned())
        }
        Err(error) => {
            tracing::debug!(%error, "cannot read the cloud config's CA bundle");
            None
        }
    }
}

/// Where the driver's OpenStack credentials come from: the table's credentials Secret in
/// the driver namespace.
fn credentials_secret(def: &DriverDef) -> (String, String) {
    let name = def
        .credentials
        .as_ref()
        .map_or("manila-cloud-credentials", |c| c.secret_name.as_str());
    (def.namespace.clone(), name.to_owned())
}

/// The real client: reads the credentials Secret, authenticates with Keystone and lists the
/// share types of the cloud's Manila ([`openstack_api::list_share_types`]).
#[derive(Clone)]
pub struct OpenStackShareTypes {
    client: kube::Client,
    namespace: String,
    secret: String,
}

impl std::fmt::Debug for OpenStackShareTypes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStackShareTypes")
            .field("secret", &format!("{}/{}", self.namespace, self.secret))
            .finish_non_exhaustive()
    }
}

impl OpenStackShareTypes {
    /// The client of `def`'s cloud, with its credentials Secret read through `client`.
    pub fn new(client: kube::Client, def: &DriverDef) -> Self {
        let (namespace, secret) = credentials_secret(def);
        Self {
            client,
            namespace,
            secret,
        }
    }
}

impl ShareTypes for OpenStackShareTypes {
    fn share_types(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, HookError>> + Send + '_>> {
        Box::pin(async move {
            let credentials =
                fetch_credentials(&self.client, &self.namespace, &self.secret).await?;
            let tls = credentials.tls();
            openstack_api::list_share_types(&credentials.cloud, &tls)
                .await
                .map_err(|e| {
                    let secret = format!("{}/{}", self.namespace, self.secret);
                    HookError::cloud(with_ca_hint(e, &tls, &secret))
                })
        })
    }
}

/// `error` with what to do when it says the cloud's certificate is signed by a CA the client
/// does not trust (rustls' `UnknownIssuer`), where the CA bundle comes from: the credentials
/// Secret `secret` (key [`CA_KEY`]) or the cluster's cloud config ([`CLOUD_CONFIG`]).
pub fn with_ca_hint(error: String, tls: &Tls, secret: &str) -> String {
    if !error.contains("UnknownIssuer") {
        return error;
    }
    let (namespace, name) = CLOUD_CONFIG;
    let source = format!(
        "key {CA_KEY} of Secret {secret}, or key ca-bundle.pem of ConfigMap {namespace}/{name} when clouds.yaml names a cacert file"
    );
    match tls {
        Tls::System => format!(
            "{error}: the cloud's certificate is signed by a CA the system does not trust: put the cloud's CA bundle (PEM) in {source}"
        ),
        Tls::WithCa(_) => format!(
            "{error}: the cloud's certificate is signed by none of the CAs of the CA bundle: check the bundle in {source}"
        ),
        Tls::Insecure => error,
    }
}

/// The data of [`CSI_SECRET`] for `credentials`: the `os-*` keys the Manila CSI driver reads
/// (as OpenShift's Manila operator derives them): auth URL and region; the application
/// credential, or the user, password, project and domains (IDs win over names; the user's
/// domain is also the default `os-domain*`); the CA as `os-certAuthority` (contents) when one
/// was found ([`fetch_credentials`]), else `clouds.yaml`'s `cacert` path as
/// `os-certAuthorityPath`;
/// `os-TLSInsecure` for `verify: false`.
pub fn csi_secret_data(credentials: &Credentials) -> BTreeMap<String, String> {
    let cloud = &credentials.cloud;
    let auth = &cloud.auth;
    let mut data = BTreeMap::new();
    let mut put = |key: &str, value: &Option<String>| -> bool {
        match value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => {
                data.insert(key.to_owned(), v.to_owned());
                true
            }
            None => false,
        }
    };
    put("os-authURL", &Some(auth.auth_url.clone()));
    put("os-region", &cloud.region_name);
    if auth.is_application_credential(cloud.auth_type.as_deref()) {
        if !put(
            "os-applicationCredentialID",
            &auth.application_credential_id,
        ) {
            put(
                "os-applicationCredentialName",
                &auth.application_credential_name,
            );
        }
        put(
            "os-applicationCredentialSecret",
            &auth.application_credential_secret,
        );
    } else {
        put("os-password", &auth.password);
        if !put("os-projectID", &auth.project_id) {
            put("os-projectName", &auth.project_name);
        }
        if !put("os-projectDomainID", &auth.project_domain_id) {
            put("os-projectDomainName", &auth.project_domain_name);
        }
    }
    if !put("os-userID", &auth.user_id) {
        put("os-userName", &auth.username);
    }
    if !put("os-domainID", &auth.domain_id) {
        put("os-domainName", &auth.domain_name);
    }
    if put("os-userDomainID", &auth.user_domain_id) {
        put("os-domainID", &auth.user_domain_id);
    } else if put("os-userDomainName", &auth.user_domain_name) {
        put("os-domainName", &auth.user_domain_name);
    }
    if credentials.ca.is_none() {
        put("os-certAuthorityPath", &cloud.cacert);
    }
    if cloud.verify == Some(false) {
        put("os-TLSInsecure", &Some("true".to_owned()));
    }
    if let Some(ca) = &credentials.ca {
        // The PEM as it is (the plugin reads it whole).
        data.insert("os-certAuthority".to_owned(), ca.clone());
    }
    data
}

/// [`CSI_SECRET`] in the driver namespace for `credentials`, with the hash of its data.
pub fn build_csi_secret(def: &DriverDef, credentials: &Credentials) -> Secret {
    crate::secrets::build(def, CSI_SECRET, &csi_secret_data(credentials))
}

/// Writes [`CSI_SECRET`] from the credentials Secret when it differs (server-side apply
/// under [`SECRET_FIELD_MANAGER`], so keys it wrote before and no longer derives, e.g. the
/// password after a switch to an application credential, are removed). Returns whether it
/// wrote; an error names the Secret and what failed.
pub async fn sync_csi_secret(client: &kube::Client, def: &DriverDef) -> Result<bool, HookError> {
    let (namespace, name) = credentials_secret(def);
    let credentials = fetch_credentials(client, &namespace, &name)
        .await
        .map_err(|e| e.context(format!("cannot generate Secret {namespace}/{CSI_SECRET}")))?;
    crate::secrets::apply(
        client,
        &build_csi_secret(def, &credentials),
        SECRET_CONTROLLER,
        &def.adopt_from,
    )
    .await
    .map_err(HookError::api)
}

/// Turns a [`ShareTypes`] client into the driver operator's probe: its facts are the share
/// types; none is a reason to stay Disabled. With a kube client, an enabled driver also gets
/// its [`CSI_SECRET`] ([`sync_csi_secret`]); failing that is a reason too.
struct ShareTypesProbe<C> {
    cloud: C,
    secret: Option<(kube::Client, DriverDef)>,
}

impl<C: ShareTypes> Probe for ShareTypesProbe<C> {
    fn check(&self) -> Pin<Box<dyn Future<Output = Result<Probed, HookError>> + Send + '_>> {
        Box::pin(async move {
            let mut types = self
                .cloud
                .share_types()
                .await
                .map_err(|e| e.context("cannot list the Manila share types of the cloud"))?;
            types.sort();
            types.dedup();
            if types.is_empty() {
                return Err(HookError::unsupported(NO_SHARE_TYPES));
            }
            let wrote = match &self.secret {
                Some((client, def)) => sync_csi_secret(client, def).await?,
                None => false,
            };
            Ok(Probed {
                facts: types,
                wrote,
            })
        })
    }
}

/// The driver operator's probe over `client`, asked every `interval` (share types only; the
/// [`CSI_SECRET`] is left to an admin).
pub fn probe(client: impl ShareTypes + 'static, interval: Duration) -> ProbeConfig {
    ProbeConfig {
        probe: Arc::new(ShareTypesProbe {
            cloud: client,
            secret: None,
        }),
        interval,
    }
}

/// The driver operator's probe over `cloud`, asked every `interval`, that also keeps
/// [`CSI_SECRET`] in step with the credentials Secret of `def` through `client`.
pub fn probe_with_secret(
    cloud: impl ShareTypes + 'static,
    client: kube::Client,
    def: &DriverDef,
    interval: Duration,
) -> ProbeConfig {
    ProbeConfig {
        probe: Arc::new(ShareTypesProbe {
            cloud,
            secret: Some((client, def.clone())),
        }),
        interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_issuer_says_where_the_ca_goes() {
        let error = "authenticating at Keystone https://k/v3/auth/tokens failed: client error (Connect): invalid peer certificate: UnknownIssuer".to_owned();
        let hinted = with_ca_hint(error.clone(), &Tls::System, "ns/creds");
        assert!(hinted.starts_with(&error), "{hinted}");
        assert!(
            hinted.contains("put the cloud's CA bundle (PEM) in key cacert of Secret ns/creds"),
            "{hinted}"
        );
        assert!(
            hinted.contains("ConfigMap openshift-config/cloud-provider-config"),
            "{hinted}"
        );
        let hinted = with_ca_hint(error.clone(), &Tls::WithCa("PEM".into()), "ns/creds");
        assert!(
            hinted.contains("none of the CAs of the CA bundle"),
            "{hinted}"
        );
        assert_eq!(
            with_ca_hint(error.clone(), &Tls::Insecure, "ns/creds"),
            error
        );
        let other = "Keystone at https://k/v3/auth/tokens rejected the credentials (HTTP 401)";
        assert_eq!(
            with_ca_hint(other.to_owned(), &Tls::System, "ns/creds"),
            other
        );
    }
}
