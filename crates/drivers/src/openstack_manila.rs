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
//! - the NFS node plugin Manila forwards node calls to, as a second container of the node
//!   DaemonSet (one DaemonSet, two plugins sharing a socket on the host).
//!
//! Not done here: OpenShift's operator converts the credentials Secret's `clouds.yaml` into
//! the `os-*` keys of Secret `csi-manila-secrets` that the classes reference; an admin creates
//! that Secret. The real [`ShareTypes`] client ([`OpenStackShareTypes`]) does not talk to the
//! OpenStack API yet and says so (the driver stays Disabled with that message).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use csi::operator::{Probe, ProbeConfig};
use csi::{DriverDef, Hooks, Inputs, StorageClassDef, VolumeSnapshotClassDef, names};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::VolumeMount;

use crate::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "openstack-manila";
/// The CSI driver name.
pub const CSI_NAME: &str = "manila.csi.openstack.org";
/// The prefix of the StorageClasses, one per share type.
pub const STORAGE_CLASS_PREFIX: &str = "csi-manila-";
/// The Secret the classes reference for the driver's OpenStack credentials.
pub const CSI_SECRET: &str = "csi-manila-secrets";
/// The NFS node plugin container.
pub const NFS_CONTAINER: &str = "csi-nfs-node";
/// The NFS plugin's socket, on the host so the controller reaches it too.
pub const NFS_ENDPOINT: &str = "unix:///var/lib/kubelet/plugins/csi-nfsplugin/csi.sock";
/// How often the cloud is asked again for share types.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(60);

const TABLE: &str = include_str!("openstack_manila.yaml");

/// The Manila driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: Vec::new(),
        daemon_set: vec![with_nfs_node_plugin],
        storage_class: Vec::new(),
        storage_class_filter: None,
        volume_snapshot_class: Vec::new(),
    };
    def.storage_class_generator = Some(storage_classes);
    def.precondition = Some(precondition);
    Ok(def)
}

/// Why Manila cannot run: no share types found.
pub const NO_SHARE_TYPES: &str = "the OpenStack cloud offers no Manila share types: create one (openstack share type create) or leave Manila unused";

/// Manila runs only with at least one share type (the probe's facts).
pub fn precondition(inputs: &Inputs) -> Result<(), String> {
    if inputs.probe_facts.is_empty() {
        Err(NO_SHARE_TYPES.to_owned())
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
        let ns = csi::def::DEFAULT_NAMESPACE;
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

/// Adds the NFS node plugin beside Manila's node plugin: a copy of the driver container's
/// settings (privileged, kubelet directory, the forward socket directory) running the NFS
/// image on the forward socket, without a registrar (kubelet never calls it directly).
pub fn with_nfs_node_plugin(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    let Some(spec) = daemon_set
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    else {
        return;
    };
    let Some(mut nfs) = spec
        .containers
        .iter()
        .find(|c| c.name == names::DRIVER_CONTAINER)
        .cloned()
    else {
        return;
    };
    nfs.name = NFS_CONTAINER.to_owned();
    nfs.image = inputs.extra_images.get("nfs").cloned();
    nfs.args = Some(vec![
        "--nodeid=$(NODE_ID)".to_owned(),
        format!("--endpoint={NFS_ENDPOINT}"),
        format!("--v={}", inputs.verbosity()),
    ]);
    nfs.ports = None;
    nfs.liveness_probe = None;
    if let Some(env) = nfs.env.as_mut() {
        env.retain(|e| e.name == "NODE_ID");
    }
    // Only what the NFS plugin uses: the kubelet directory (mounts) and its socket directory.
    let keep = |m: &VolumeMount| {
        m.name == "fwd-plugin-dir" || m.mount_path.starts_with("/var/lib/kubelet")
    };
    if let Some(mounts) = nfs.volume_mounts.as_mut() {
        mounts.retain(keep);
    }
    spec.containers.retain(|c| c.name != NFS_CONTAINER);
    spec.containers.push(nfs);
}

/// Asks the cloud which Manila share types it offers.
pub trait ShareTypes: Send + Sync {
    /// The share type names, or why the cloud could not be asked.
    fn share_types(&self)
    -> Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + '_>>;
}

/// The real client: not implemented in this build (it needs the OpenStack identity and
/// shared-file-system APIs); it says so, and the driver stays Disabled with that message.
#[derive(Clone, Debug, Default)]
pub struct OpenStackShareTypes;

impl ShareTypes for OpenStackShareTypes {
    fn share_types(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + '_>> {
        Box::pin(async {
            Err("asking the OpenStack cloud for Manila share types is not implemented in this build: the Manila driver cannot be enabled automatically yet".to_owned())
        })
    }
}

/// Turns a [`ShareTypes`] client into the driver operator's probe: its facts are the share
/// types; none is a reason to stay Disabled.
struct ShareTypesProbe<C>(C);

impl<C: ShareTypes> Probe for ShareTypesProbe<C> {
    fn check(&self) -> Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send + '_>> {
        Box::pin(async move {
            let mut types = self
                .0
                .share_types()
                .await
                .map_err(|e| format!("cannot list the Manila share types of the cloud: {e}"))?;
            types.sort();
            types.dedup();
            if types.is_empty() {
                return Err(NO_SHARE_TYPES.to_owned());
            }
            Ok(types)
        })
    }
}

/// The driver operator's probe over `client`, asked every `interval`.
pub fn probe(client: impl ShareTypes + 'static, interval: Duration) -> ProbeConfig {
    ProbeConfig {
        probe: Arc::new(ShareTypesProbe(client)),
        interval,
    }
}
