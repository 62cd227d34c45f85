//! Every rule a CSIDriverDeployment must meet before anything is applied. Each problem names
//! the field and the fix; all problems are reported at once so one edit can fix them all.

use std::collections::BTreeSet;
use std::fmt;

use api::csidriver_v1alpha1::{CSIDriverDeployment, NodeUpdateStrategy, Provisioning};
use api::operator_v1::ManagementState;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Reason of a field that breaks a rule of the object itself.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// Reason of a pod template that collides with what the operator injects.
pub const REASON_TEMPLATE_CONFLICT: &str = "TemplateConflict";
/// Reason of a driver name another CSIDriverDeployment already installs.
pub const REASON_DRIVER_NAME_CLAIMED: &str = "DriverNameClaimed";
/// Reason of a CSIDriver object of that name that no CSIDriverDeployment created.
pub const REASON_CSIDRIVER_EXISTS: &str = "CSIDriverExists";

/// The longest object name: `<name>-controller` must fit a label value (63).
pub const MAX_NAME_LENGTH: usize = 52;

/// Volume names the operator adds to the pods.
pub const INJECTED_VOLUMES: &[&str] = &["socket-dir", "kubelet-dir", "registration-dir"];
/// Container names the operator adds to the pods.
pub const INJECTED_CONTAINERS: &[&str] = &[
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
    "csi-node-driver-registrar",
    "csi-liveness-probe",
];

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// The field, as a path from the object's root (`spec.driverSocket`).
    pub field: String,
    /// The condition reason (one of the `REASON_*` constants).
    pub reason: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A CSIDriverDeployment that names a driver.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimant {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// When it was created; the oldest claimant keeps the name.
    pub created: Option<Time>,
}

/// What the cluster holds that bears on one CSIDriverDeployment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterFacts {
    /// Every CSIDriverDeployment (this one included or not) that names the same driver and is
    /// not being deleted.
    pub claimants: Vec<Claimant>,
    /// The existing CSIDriver of that name: `None` when there is none, `Some(None)` when it
    /// carries no owner labels (somebody else made it), `Some(Some((ns, name)))` when a
    /// CSIDriverDeployment's controller made it.
    pub csi_driver_owner: Option<Option<(String, String)>>,
    /// Who made that CSIDriver when no CSIDriverDeployment did, as far as it tells
    /// ([`opkit::ownership::installer`]).
    pub csi_driver_installer: Option<opkit::ownership::Installer>,
}

fn invalid(field: impl Into<String>, reason: &'static str, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        reason,
        message: message.into(),
    }
}

/// Whether `name` is a valid CSI driver name that can also name a CSIDriver object: at most 63
/// characters, lower-case alphanumerics, `-` and `.`, beginning and ending with an
/// alphanumeric.
pub fn is_driver_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

/// The directory of the socket path and its file name, when the path is usable.
pub fn split_socket(path: &str) -> Option<(&str, &str)> {
    if !path.starts_with('/') || path.ends_with('/') || path.split('/').any(|s| s == "..") {
        return None;
    }
    let (dir, file) = path.rsplit_once('/')?;
    Some((if dir.is_empty() { "/" } else { dir }, file))
}

fn under(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    let path = path.trim_end_matches('/');
    path == dir || path.starts_with(&format!("{dir}/"))
}

fn check_template(
    field: &str,
    template: &PodTemplateSpec,
    socket_dir: Option<&str>,
    kubelet_dir: &str,
    out: &mut Vec<Invalid>,
) {
    let Some(spec) = template
        .spec
        .as_ref()
        .filter(|spec| !spec.containers.is_empty())
    else {
        out.push(invalid(
            format!("{field}.spec.containers"),
            REASON_INVALID_SPEC,
            "has no container: add the driver as the first container",
        ));
        return;
    };
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        if INJECTED_VOLUMES.contains(&v.name.as_str()) {
            out.push(invalid(
                format!("{field}.spec.volumes[{i}].name"),
                REASON_TEMPLATE_CONFLICT,
                format!(
                    "{:?} is the name of a volume the operator adds: rename the volume (and its mounts)",
                    v.name
                ),
            ));
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        if INJECTED_CONTAINERS.contains(&c.name.as_str()) {
            out.push(invalid(
                format!("{field}.spec.containers[{i}].name"),
                REASON_TEMPLATE_CONFLICT,
                format!(
                    "{:?} is the name of a sidecar the operator adds: rename the container",
                    c.name
                ),
            ));
        }
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            if i == 0
                && socket_dir.is_some_and(|d| under(&m.mount_path, d) || under(d, &m.mount_path))
            {
                out.push(invalid(
                    format!("{field}.spec.containers[0].volumeMounts[{j}].mountPath"),
                    REASON_TEMPLATE_CONFLICT,
                    format!(
                        "{} overlaps the directory of spec.driverSocket, where the operator mounts the socket volume: mount it elsewhere or move the socket",
                        m.mount_path
                    ),
                ));
            }
            if m.mount_propagation.as_deref() != Some("Bidirectional") {
                continue;
            }
            let host = volumes
                .iter()
                .find(|v| v.name == m.name)
                .and_then(|v| v.host_path.as_ref());
            if let Some(host) = host.filter(|h| !under(&h.path, kubelet_dir)) {
                out.push(invalid(
                    format!("{field}.spec.containers[{i}].volumeMounts[{j}]"),
                    REASON_TEMPLATE_CONFLICT,
                    format!(
                        "mounts hostPath {} with Bidirectional propagation outside the kubelet directory {kubelet_dir}: set spec.kubeletRootDir to your nodes' kubelet directory, or drop the mount (the operator mounts the kubelet directory)",
                        host.path
                    ),
                ));
            }
        }
    }
}

/// The claimant that keeps the driver name: the one whose controller made the existing
/// CSIDriver, else the oldest (then by namespace and name).
pub fn claim_holder<'a>(facts: &'a ClusterFacts, me: &'a Claimant) -> &'a Claimant {
    let all: Vec<&Claimant> = facts.claimants.iter().chain(std::iter::once(me)).collect();
    if let Some(Some((ns, name))) = &facts.csi_driver_owner
        && let Some(owner) = all.iter().find(|c| &c.namespace == ns && &c.name == name)
    {
        return owner;
    }
    all.into_iter()
        .min_by(|a, b| {
            let key = |c: &Claimant| {
                (
                    c.created.as_ref().map(|t| t.0),
                    c.namespace.clone(),
                    c.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        })
        .unwrap_or(me)
}

/// Every broken rule of `cd` given what the cluster holds; empty when it may be applied.
pub fn validate(cd: &CSIDriverDeployment, facts: &ClusterFacts) -> Vec<Invalid> {
    let mut out = Vec::new();
    let spec = &cd.spec;
    let name = cd.metadata.name.clone().unwrap_or_default();
    if name.len() > MAX_NAME_LENGTH {
        out.push(invalid(
            "metadata.name",
            REASON_INVALID_SPEC,
            format!(
                "is {} characters long: use at most {MAX_NAME_LENGTH} (operand names and labels add a suffix)",
                name.len()
            ),
        ));
    }
    if !is_driver_name(&spec.driver_name) {
        out.push(invalid(
            "spec.driverName",
            REASON_INVALID_SPEC,
            format!(
                "{:?} is not a valid CSI driver name: use at most 63 lower-case alphanumerics, '-' or '.', beginning and ending with an alphanumeric (the name the driver returns from GetPluginInfo, e.g. hostpath.csi.k8s.io)",
                spec.driver_name
            ),
        ));
    }
    if let ManagementState::Other(value) = &spec.management_state {
        out.push(invalid(
            "spec.managementState",
            REASON_INVALID_SPEC,
            format!("{value:?} is not a management state: use Managed, Unmanaged or Removed"),
        ));
    }
    if let Some(NodeUpdateStrategy::Other(value)) = &spec.node_update_strategy {
        out.push(invalid(
            "spec.nodeUpdateStrategy",
            REASON_INVALID_SPEC,
            format!("{value:?} is not an update strategy: use Rolling or OnDelete"),
        ));
    }
    let socket = split_socket(&spec.driver_socket);
    if socket.is_none() {
        out.push(invalid(
            "spec.driverSocket",
            REASON_INVALID_SPEC,
            format!(
                "{:?} is not an absolute path of a file: give the socket's path inside the driver container, e.g. /csi/csi.sock",
                spec.driver_socket
            ),
        ));
    }
    let kubelet_dir = spec.kubelet_root_dir();
    if !kubelet_dir.starts_with('/') {
        out.push(invalid(
            "spec.kubeletRootDir",
            REASON_INVALID_SPEC,
            format!("{kubelet_dir:?} is not an absolute path: use e.g. /var/lib/kubelet"),
        ));
    }
    let socket_dir = socket.map(|(dir, _)| dir);
    check_template(
        "spec.driverPerNodeTemplate",
        &spec.driver_per_node_template,
        socket_dir,
        kubelet_dir,
        &mut out,
    );
    if let Some(template) = &spec.driver_controller_template {
        check_template(
            "spec.driverControllerTemplate",
            template,
            socket_dir,
            kubelet_dir,
            &mut out,
        );
    } else {
        let sidecars = spec.sidecars.clone().unwrap_or_default();
        // With Distributed provisioning the snapshotter runs in the node pods.
        let snapshotter_in_controller = spec.provisioning != Some(Provisioning::Distributed);
        for (field, on) in [
            ("spec.sidecars.resizer", sidecars.resizer == Some(true)),
            (
                "spec.sidecars.snapshotter",
                sidecars.snapshotter == Some(true) && snapshotter_in_controller,
            ),
        ] {
            if on {
                out.push(invalid(
                    field,
                    REASON_INVALID_SPEC,
                    "runs in the controller pod, and there is none: add spec.driverControllerTemplate or turn the sidecar off",
                ));
            }
        }
    }
    if let Some(Provisioning::Other(value)) = &spec.provisioning {
        out.push(invalid(
            "spec.provisioning",
            REASON_INVALID_SPEC,
            format!("{value:?} is not a provisioning mode: use Central or Distributed"),
        ));
    }
    let attach = spec.csi_driver.as_ref().and_then(|d| d.attach_required);
    if attach == Some(true) && spec.driver_controller_template.is_none() {
        out.push(invalid(
            "spec.csiDriver.attachRequired",
            REASON_INVALID_SPEC,
            "is true, but external-attacher runs in the controller pod and there is none: unset it or set it to false if the driver has no ControllerPublishVolume, or add spec.driverControllerTemplate",
        ));
    }
    let distributed = spec.provisioning == Some(Provisioning::Distributed);
    let capacity = spec.csi_driver.as_ref().and_then(|d| d.storage_capacity);
    if capacity == Some(true) && !distributed && spec.driver_controller_template.is_none() {
        out.push(invalid(
            "spec.csiDriver.storageCapacity",
            REASON_INVALID_SPEC,
            "is true, but external-provisioner, which publishes the capacity, runs in the controller pod and there is none (the scheduler would find no capacity and place no pod): unset it, add spec.driverControllerTemplate, or use Distributed provisioning",
        ));
    }
    let mut class_names = BTreeSet::new();
    let mut defaults = 0;
    for (i, class) in spec.storage_class_templates.iter().enumerate() {
        // The CRD's enums refuse these; an object stored before them still gets a message.
        if let Some(policy) = class.reclaim_policy.as_deref()
            && !["Delete", "Retain"].contains(&policy)
        {
            out.push(invalid(
                format!("spec.storageClassTemplates[{i}].reclaimPolicy"),
                REASON_INVALID_SPEC,
                format!("{policy:?} is not a reclaim policy: use Delete or Retain"),
            ));
        }
        if let Some(mode) = class.volume_binding_mode.as_deref()
            && !["Immediate", "WaitForFirstConsumer"].contains(&mode)
        {
            out.push(invalid(
                format!("spec.storageClassTemplates[{i}].volumeBindingMode"),
                REASON_INVALID_SPEC,
                format!("{mode:?} is not a binding mode: use Immediate or WaitForFirstConsumer"),
            ));
        }
        if class.parameters.keys().any(String::is_empty) {
            out.push(invalid(
                format!("spec.storageClassTemplates[{i}].parameters"),
                REASON_INVALID_SPEC,
                "has an empty key: give every parameter a name",
            ));
        }
        let field = format!("spec.storageClassTemplates[{i}].metadata.name");
        match class.metadata.name.as_deref() {
            None | Some("") => out.push(invalid(
                field,
                REASON_INVALID_SPEC,
                "is missing: name the StorageClass",
            )),
            Some(n) if !is_dns_subdomain(n) => out.push(invalid(
                field,
                REASON_INVALID_SPEC,
                format!(
                    "{n:?} is not a valid object name: use lower-case alphanumerics, '-' or '.'"
                ),
            )),
            Some(n) if !class_names.insert(n.to_owned()) => out.push(invalid(
                field,
                REASON_INVALID_SPEC,
                format!("StorageClass {n:?} is listed twice: rename or remove one"),
            )),
            Some(_) => {}
        }
        if distributed && class.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
            out.push(invalid(
                format!("spec.storageClassTemplates[{i}].volumeBindingMode"),
                REASON_INVALID_SPEC,
                "must be WaitForFirstConsumer with spec.provisioning Distributed (a volume is provisioned by the node its first pod is scheduled to): set it, or use Central provisioning",
            ));
        }
        if class.default == Some(true) {
            defaults += 1;
            if defaults == 2 {
                out.push(invalid(
                    format!("spec.storageClassTemplates[{i}].default"),
                    REASON_INVALID_SPEC,
                    "a second StorageClass is marked default: mark at most one",
                ));
            }
        }
    }
    check_snapshot_classes(cd, &mut out);

    let me = Claimant {
        namespace: cd.metadata.namespace.clone().unwrap_or_default(),
        name,
        created: cd.metadata.creation_timestamp.clone(),
    };
    let holder = claim_holder(facts, &me);
    if holder != &me {
        out.push(invalid(
            "spec.driverName",
            REASON_DRIVER_NAME_CLAIMED,
            format!(
                "driver {:?} is already installed by CSIDriverDeployment {}/{}: delete one of the two or pick another driverName",
                spec.driver_name, holder.namespace, holder.name
            ),
        ));
    } else if facts.csi_driver_owner == Some(None) {
        let (who, removal) = match &facts.csi_driver_installer {
            Some(installer) => (
                format!(" (installed by {})", installer.description),
                installer.removal.clone(),
            ),
            None => (String::new(), "remove what installed it".to_owned()),
        };
        out.push(invalid(
            "spec.driverName",
            REASON_CSIDRIVER_EXISTS,
            format!(
                "a CSIDriver named {:?} exists that no CSIDriverDeployment created{who}: {removal} (then the CSIDriver) or pick another driverName",
                spec.driver_name
            ),
        ));
    }
    out
}

/// The rules of `spec.volumeSnapshotClassTemplates`.
fn check_snapshot_classes(cd: &CSIDriverDeployment, out: &mut Vec<Invalid>) {
    let spec = &cd.spec;
    if spec.volume_snapshot_class_templates.is_empty() {
        return;
    }
    let snapshotter = spec.sidecars.as_ref().and_then(|s| s.snapshotter) == Some(true);
    if !snapshotter {
        out.push(invalid(
            "spec.volumeSnapshotClassTemplates",
            REASON_INVALID_SPEC,
            "needs the snapshotter sidecar, which takes the snapshots: set spec.sidecars.snapshotter to true, or remove the templates",
        ));
    }
    let mut names = BTreeSet::new();
    let mut defaults = 0;
    for (i, class) in spec.volume_snapshot_class_templates.iter().enumerate() {
        let at = format!("spec.volumeSnapshotClassTemplates[{i}]");
        // The CRD's enum refuses it; an object stored before it still gets a message.
        if let Some(policy) = class.deletion_policy.as_deref()
            && !["Delete", "Retain"].contains(&policy)
        {
            out.push(invalid(
                format!("{at}.deletionPolicy"),
                REASON_INVALID_SPEC,
                format!("{policy:?} is not a deletion policy: use Delete or Retain"),
            ));
        }
        if class.parameters.keys().any(String::is_empty) {
            out.push(invalid(
                format!("{at}.parameters"),
                REASON_INVALID_SPEC,
                "has an empty key: give every parameter a name",
            ));
        }
        let field = format!("{at}.metadata.name");
        match class.metadata.name.as_deref() {
            None | Some("") => out.push(invalid(
                field,
                REASON_INVALID_SPEC,
                "is missing: name the VolumeSnapshotClass",
            )),
            Some(n) if !is_dns_subdomain(n) => out.push(invalid(
                field,
                REASON_INVALID_SPEC,
                format!(
                    "{n:?} is not a valid object name: use lower-case alphanumerics, '-' or '.'"
                ),
            )),
            Some(n) if !names.insert(n.to_owned()) => out.push(invalid(
                field,
                REASON_INVALID_SPEC,
                format!("VolumeSnapshotClass {n:?} is listed twice: rename or remove one"),
            )),
            Some(_) => {}
        }
        if class.default == Some(true) {
            defaults += 1;
            if defaults == 2 {
                out.push(invalid(
                    format!("{at}.default"),
                    REASON_INVALID_SPEC,
                    "a second VolumeSnapshotClass is marked default: mark at most one",
                ));
            }
        }
    }
}
