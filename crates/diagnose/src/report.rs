//! What a diagnosis says: the subject, the first broken link as a [`Finding`] (cause, evidence,
//! fix) and every link of the chain as checked. The same data serves `-o json`/`-o yaml`
//! (serde, camelCase) and the plain text ([`Report`]'s `Display`).

use std::fmt;

use serde::Serialize;

/// What was diagnosed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `PersistentVolumeClaim`, `Pod` or `CSIDriver`.
    pub kind: String,
    /// Absent for a CSI driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name; a driver's CSI name.
    pub name: String,
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// The stable machine name of a finding: scripts and tests match on it, so a variant is never
/// renamed. Serialized as the variant's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum FindingKind {
    /// The claim named on the command line does not exist.
    NoSuchClaim,
    /// The pod named on the command line does not exist.
    NoSuchPod,
    /// No CSIDriver object, node registration or catalogue entry has this name.
    NoSuchDriver,
    /// The claim is being deleted and waits for the pods that use it (`kubernetes.io/pvc-protection`).
    ClaimInUseWhileDeleting,
    /// The claim names a StorageClass that does not exist.
    NoSuchStorageClass,
    /// The claim names no class and no class is marked default.
    NoDefaultStorageClass,
    /// The class's provisioner is a CSI name that no CSIDriver or node serves.
    NoSuchCSIDriver,
    /// The driver's controller pods are not running or not ready.
    DriverControllerNotRunning,
    /// The driver's node pod on the pod's node is not running or not ready.
    DriverNodeNotRunning,
    /// The driver is not registered in the CSINode of the pod's node.
    DriverNotRegistered,
    /// The pod's node is not Ready.
    NodeNotReady,
    /// The class binds on first consumer and no pod uses the claim.
    WaitForFirstConsumerNoPod,
    /// A pod that uses the claim cannot be scheduled.
    PodUnschedulable,
    /// The provisioner reported an error for the claim.
    ProvisioningFailed,
    /// The provisioner has said nothing for a long time.
    ProvisioningStuck,
    /// The requested size is outside what the driver provisions.
    SizeOutOfRange,
    /// The claim asks for an access mode the driver does not offer with its volume mode.
    AccessModeUnsupported,
    /// The claim asks for a volume mode (Block, Filesystem) the driver does not offer.
    VolumeModeUnsupported,
    /// The claim's PersistentVolume is gone or bound to another claim.
    VolumeMissing,
    /// The PersistentVolume's node affinity excludes the pod's node (or every node).
    VolumeNodeAffinityConflict,
    /// The volume could not be attached to the pod's node.
    AttachFailed,
    /// The volume is attached to another node and can be attached to one only.
    MultiAttach,
    /// The kubelet could not mount the volume.
    MountFailed,
    /// The operator that installed the driver reports it Degraded or not Available.
    OperatorDegraded,
}

impl FindingKind {
    /// The machine name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSuchClaim => "NoSuchClaim",
            Self::NoSuchPod => "NoSuchPod",
            Self::NoSuchDriver => "NoSuchDriver",
            Self::ClaimInUseWhileDeleting => "ClaimInUseWhileDeleting",
            Self::NoSuchStorageClass => "NoSuchStorageClass",
            Self::NoDefaultStorageClass => "NoDefaultStorageClass",
            Self::NoSuchCSIDriver => "NoSuchCSIDriver",
            Self::DriverControllerNotRunning => "DriverControllerNotRunning",
            Self::DriverNodeNotRunning => "DriverNodeNotRunning",
            Self::DriverNotRegistered => "DriverNotRegistered",
            Self::NodeNotReady => "NodeNotReady",
            Self::WaitForFirstConsumerNoPod => "WaitForFirstConsumerNoPod",
            Self::PodUnschedulable => "PodUnschedulable",
            Self::ProvisioningFailed => "ProvisioningFailed",
            Self::ProvisioningStuck => "ProvisioningStuck",
            Self::SizeOutOfRange => "SizeOutOfRange",
            Self::AccessModeUnsupported => "AccessModeUnsupported",
            Self::VolumeModeUnsupported => "VolumeModeUnsupported",
            Self::VolumeMissing => "VolumeMissing",
            Self::VolumeNodeAffinityConflict => "VolumeNodeAffinityConflict",
            Self::AttachFailed => "AttachFailed",
            Self::MultiAttach => "MultiAttach",
            Self::MountFailed => "MountFailed",
            Self::OperatorDegraded => "OperatorDegraded",
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fact behind a finding: which object said it, where, and its exact words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
    pub object: String,
    /// Where on the object: a field path, a condition, an Event's reason and source, a
    /// container.
    pub source: String,
    /// The text as the object carries it, unchanged.
    pub message: String,
}

/// The first broken link of the chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Stable machine name.
    pub kind: FindingKind,
    /// What is wrong, in a sentence.
    pub cause: String,
    /// The objects and their messages that show it.
    pub evidence: Vec<Evidence>,
    /// What to change, naming the field or the command.
    pub fix: String,
}

/// How a link of the chain came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum LinkState {
    /// Checked and fine.
    Ok,
    /// Checked and broken; the first broken link is the report's finding.
    Broken,
    /// Could not be checked: an earlier link broke, or an object was not read.
    NotChecked,
    /// Does not apply here (e.g. attachment for a driver that needs none).
    NotApplicable,
}

impl LinkState {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Broken => "BROKEN",
            Self::NotChecked => "not checked",
            Self::NotApplicable => "n/a",
        }
    }
}

/// One step of the chain a volume goes through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Link {
    /// The step, e.g. `StorageClass`, `Controller`, `VolumeAttachment`.
    pub name: String,
    /// The object checked, `Kind namespace/name`, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// How it came out.
    pub state: LinkState,
    /// What was seen.
    pub detail: String,
}

impl Link {
    /// A link on `object`, when there is one.
    pub fn new(name: &str, object: Option<String>, state: LinkState, detail: String) -> Self {
        Link {
            name: name.to_owned(),
            object,
            state,
            detail,
        }
    }
}

/// A link as checked, with the finding it broke with.
pub type Checked = (Link, Option<Finding>);

/// A link checked and fine.
pub fn ok(name: &str, object: Option<String>, detail: String) -> Checked {
    (Link::new(name, object, LinkState::Ok, detail), None)
}

/// A link checked and broken, and why.
pub fn broken(name: &str, object: Option<String>, detail: String, finding: Finding) -> Checked {
    (
        Link::new(name, object, LinkState::Broken, detail),
        Some(finding),
    )
}

/// A link that could not be checked.
pub fn not_checked(name: &str, object: Option<String>, detail: String) -> Checked {
    (Link::new(name, object, LinkState::NotChecked, detail), None)
}

/// A link that does not apply.
pub fn not_applicable(name: &str, object: Option<String>, detail: String) -> Checked {
    (
        Link::new(name, object, LinkState::NotApplicable, detail),
        None,
    )
}

impl Finding {
    /// A finding.
    pub fn new(kind: FindingKind, cause: String, evidence: Vec<Evidence>, fix: String) -> Self {
        Finding {
            kind,
            cause,
            evidence,
            fix,
        }
    }
}

impl Evidence {
    /// `message`, as `object` carries it at `source`.
    pub fn new(object: String, source: String, message: String) -> Self {
        Evidence {
            object,
            source,
            message,
        }
    }
}

/// A diagnosis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What was diagnosed.
    pub subject: Subject,
    /// The first broken link; `None` when every link checked is fine.
    pub finding: Option<Finding>,
    /// Every link, in the order a volume goes through them.
    pub chain: Vec<Link>,
}

impl Report {
    /// The report from the links in order, each with the finding it broke with, if any: the
    /// first finding is the report's.
    pub fn from_links(subject: Subject, links: Vec<Checked>) -> Self {
        let mut finding = None;
        let mut chain = Vec::with_capacity(links.len());
        for (link, broken) in links {
            if finding.is_none() {
                finding = broken;
            }
            chain.push(link);
        }
        Report {
            subject,
            finding,
            chain,
        }
    }
}

/// Writes `text` indented by `indent`, continuation lines too.
fn write_indented(f: &mut fmt::Formatter<'_>, indent: &str, text: &str) -> fmt::Result {
    for line in text.lines() {
        writeln!(f, "{indent}{line}")?;
    }
    Ok(())
}

impl fmt::Display for Report {
    /// The plain text: the finding first (cause, evidence, fix), then the chain as checked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.finding {
            Some(finding) => {
                writeln!(f, "{}: {} ({})", self.subject, finding.cause, finding.kind)?;
                writeln!(f)?;
                writeln!(f, "Evidence:")?;
                if finding.evidence.is_empty() {
                    writeln!(f, "  (none recorded)")?;
                }
                for evidence in &finding.evidence {
                    writeln!(f, "  {} ({}):", evidence.object, evidence.source)?;
                    write_indented(f, "    ", &evidence.message)?;
                }
                writeln!(f)?;
                writeln!(f, "Fix:")?;
                write_indented(f, "  ", &finding.fix)?;
            }
            None => writeln!(f, "{}: no problem found", self.subject)?,
        }
        writeln!(f)?;
        writeln!(f, "Chain:")?;
        for link in &self.chain {
            // `StorageClass gp3` reads as is; another kind goes in parentheses.
            let object = match link.object.as_deref() {
                None => String::new(),
                Some(object) => match object.strip_prefix(&format!("{} ", link.name)) {
                    Some(name) => format!(" {name}"),
                    None => format!(" ({object})"),
                },
            };
            let state = format!("[{}]", link.state.label());
            writeln!(f, "  {state:<13} {}{object}: {}", link.name, link.detail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str, state: LinkState) -> Link {
        Link {
            name: name.to_owned(),
            object: Some(format!("{name} x")),
            state,
            detail: format!("{name} detail"),
        }
    }

    fn finding(kind: FindingKind) -> Finding {
        Finding {
            kind,
            cause: format!("{kind} cause"),
            evidence: vec![Evidence {
                object: "Event ns/e".to_owned(),
                source: "reason X".to_owned(),
                message: "line one\nline two".to_owned(),
            }],
            fix: "do this".to_owned(),
        }
    }

    fn subject() -> Subject {
        Subject {
            kind: "PersistentVolumeClaim".to_owned(),
            namespace: Some("app".to_owned()),
            name: "data".to_owned(),
        }
    }

    #[test]
    fn the_first_finding_is_the_reports() {
        let report = Report::from_links(
            subject(),
            vec![
                (link("A", LinkState::Ok), None),
                (
                    link("B", LinkState::Broken),
                    Some(finding(FindingKind::NoSuchStorageClass)),
                ),
                (
                    link("C", LinkState::Broken),
                    Some(finding(FindingKind::MountFailed)),
                ),
            ],
        );
        assert_eq!(
            report.finding.map(|f| f.kind),
            Some(FindingKind::NoSuchStorageClass)
        );
        assert_eq!(report.chain.len(), 3);
    }

    #[test]
    fn text_has_the_finding_then_the_chain() {
        let report = Report::from_links(
            subject(),
            vec![
                (link("A", LinkState::Ok), None),
                (
                    link("B", LinkState::Broken),
                    Some(finding(FindingKind::MountFailed)),
                ),
                (
                    Link {
                        object: Some("Pod ns/c".to_owned()),
                        ..link("C", LinkState::NotApplicable)
                    },
                    None,
                ),
            ],
        );
        assert_eq!(
            report.to_string(),
            "PersistentVolumeClaim app/data: MountFailed cause (MountFailed)\n\
             \n\
             Evidence:\n  Event ns/e (reason X):\n    line one\n    line two\n\
             \n\
             Fix:\n  do this\n\
             \n\
             Chain:\n  [ok]          A x: A detail\n  [BROKEN]      B x: B detail\n  \
             [n/a]         C (Pod ns/c): C detail\n"
        );
    }

    #[test]
    fn text_without_a_finding_says_so() {
        let report = Report::from_links(subject(), vec![(link("A", LinkState::Ok), None)]);
        assert!(
            report
                .to_string()
                .starts_with("PersistentVolumeClaim app/data: no problem found\n\nChain:\n")
        );
    }

    #[test]
    fn json_is_camel_case_with_machine_names() {
        let report = Report::from_links(
            subject(),
            vec![(
                link("B", LinkState::NotChecked),
                Some(finding(FindingKind::MultiAttach)),
            )],
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "subject": {"kind": "PersistentVolumeClaim", "namespace": "app", "name": "data"},
                "finding": {
                    "kind": "MultiAttach",
                    "cause": "MultiAttach cause",
                    "evidence": [{"object": "Event ns/e", "source": "reason X", "message": "line one\nline two"}],
                    "fix": "do this"
                },
                "chain": [{"name": "B", "object": "B x", "state": "NotChecked", "detail": "B detail"}]
            })
        );
    }
}
