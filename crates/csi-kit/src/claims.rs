//! Claims stuck Pending: which PersistentVolumeClaims have waited on a CSI driver for longer
//! than provisioning takes, as the driver's operator reports them on its own status (the
//! ClusterCSIDriver's `<Prefix>StuckClaims`, a CSIDriverDeployment's `StuckClaims`). Pure: the
//! controllers watch the claims, keep of each Pending one only a [`PendingClaim`]
//! ([`pending_claim`], [`may_wait_on`]), and ask [`stuck_claims`] with the time of the pass,
//! which also says when to look again (no polling while nothing is pending).
//!
//! A claim is the driver's when its `volume.kubernetes.io/storage-provisioner` annotation (or
//! the beta one, which kube-controller-manager sets on the claims it leaves to an external
//! provisioner) names the driver, or when its StorageClass's provisioner is the driver. It
//! waits on the driver while it is Pending and not being deleted, unless its class binds on
//! first consumer and no pod of it has been scheduled yet (no
//! `volume.kubernetes.io/selected-node`): such a claim waits for a pod, which is not an error
//! (`storage-operator diagnose` says the same). It is stuck once it has waited longer than
//! [`STUCK_AFTER`] since its creation: a claim is Pending from its creation until it binds, and
//! never Pending again.
//!
//! The condition is informational: True while some claims are stuck, with their number, the
//! first few names and the command that says why. Its type ends in none of the suffixes the
//! roll-ups read (`Available`, `Progressing`, `Degraded`, `Upgradeable`), so it never makes the
//! driver, `Storage/cluster` or `ClusterOperator/storage` Degraded: a user's claim of a
//! misspelt class is not the operator's failure, and a condition that followed users' claims
//! would make the cluster's health flap. Its message names claims, never ages, so it changes
//! only when the set of stuck claims does.

use std::time::Duration;

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How long a claim may wait on its driver before it is reported.
pub const STUCK_AFTER: Duration = Duration::from_secs(5 * 60);
/// How many claims a message names before "and N more".
pub const NAMES_SHOWN: usize = 5;
/// The claim's provisioner, as kube-controller-manager's volume binder sets it.
pub const STORAGE_PROVISIONER_ANNOTATION: &str = "volume.kubernetes.io/storage-provisioner";
/// The same, under its older name (still set beside it).
pub const BETA_STORAGE_PROVISIONER_ANNOTATION: &str =
    "volume.beta.kubernetes.io/storage-provisioner";
/// The node the scheduler picked for a pod of the claim (classes that bind on first consumer).
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// Reason of the condition while some claims are stuck.
pub const REASON_STUCK: &str = "ClaimsStuckPending";
/// Reason of the condition while none is.
pub const REASON_NONE: &str = "NoStuckClaims";
/// The condition of a CSIDriverDeployment.
pub const STUCK_CLAIMS: &str = "StuckClaims";

/// `<prefix>StuckClaims`, the condition of a ClusterCSIDriver.
pub fn stuck_claims_type(prefix: &str) -> String {
    format!("{prefix}{STUCK_CLAIMS}")
}

/// `<prefix>StuckClaimsController`, the field manager of that condition.
pub fn stuck_claims_controller(prefix: &str) -> String {
    format!("{prefix}{STUCK_CLAIMS}Controller")
}

/// What a controller keeps of a Pending claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingClaim {
    /// `spec.storageClassName`, when set and not empty.
    pub class: Option<String>,
    /// The storage-provisioner annotation, when set.
    pub provisioner: Option<String>,
    /// Whether the scheduler picked a node for a pod of the claim.
    pub selected_node: bool,
    /// When the claim was created.
    pub created: Option<Timestamp>,
}

/// The claim as a [`PendingClaim`] when it is Pending (a claim without a phase yet counts) and
/// not being deleted; `None` otherwise.
pub fn pending_claim(claim: &PersistentVolumeClaim) -> Option<PendingClaim> {
    if claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase.is_some_and(|phase| phase != "Pending") {
        return None;
    }
    let annotations = claim.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key));
    Some(PendingClaim {
        class: claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .filter(|class| !class.is_empty()),
        provisioner: annotation(STORAGE_PROVISIONER_ANNOTATION)
            .or_else(|| annotation(BETA_STORAGE_PROVISIONER_ANNOTATION))
            .cloned(),
        selected_node: annotation(SELECTED_NODE_ANNOTATION).is_some(),
        created: claim.metadata.creation_timestamp.as_ref().map(|t| t.0),
    })
}

/// Whether `claim` waits for a pod rather than for its driver: its class (`class`, when known)
/// binds on first consumer and no node was picked for it.
fn waits_for_consumer(claim: &PendingClaim, class: Option<&StorageClass>) -> bool {
    !claim.selected_node
        && class.is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
}

/// Whether `claim` waits on `driver`; `class` is its StorageClass, when it exists.
pub fn waits_on(claim: &PendingClaim, driver: &str, class: Option<&StorageClass>) -> bool {
    let ours = claim.provisioner.as_deref() == Some(driver)
        || class.is_some_and(|c| c.provisioner == driver);
    ours && !waits_for_consumer(claim, class)
}

/// Whether a watch should keep `claim` for `driver` (`None`: for any driver), as far as the
/// classes known now tell; `class` is its StorageClass when known. A claim of a class not
/// known yet is kept unless its annotation names another driver (each pass decides again
/// with [`waits_on`]). Nothing else is kept, so the memory follows the claims that may be
/// stuck on the driver, not the claims of the cluster.
pub fn may_wait_on(
    claim: &PendingClaim,
    driver: Option<&str>,
    class: Option<&StorageClass>,
) -> bool {
    if waits_for_consumer(claim, class) {
        return false;
    }
    let named = |provisioner: &str| driver.is_none_or(|driver| provisioner == driver);
    match (&claim.provisioner, class) {
        (Some(provisioner), _) if named(provisioner) => true,
        (_, Some(class)) => named(&class.provisioner),
        // The class is not known yet (or the claim has none): only an annotation says.
        (None, None) => claim.class.is_some(),
        (Some(_), None) => false,
    }
}

/// The claims stuck on a driver, and when the next one would be.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stuck {
    /// `(namespace, name)` of each stuck claim, the oldest first.
    pub claims: Vec<(String, String)>,
    /// How long until a claim that waits on the driver now becomes stuck (the earliest).
    pub next: Option<Duration>,
}

/// The claims of `pending` (each under its `namespace/name`) that have waited on `driver` for
/// longer than `after` at `now`; `class_of` finds a StorageClass by name.
pub fn stuck_claims<'a>(
    driver: &str,
    pending: impl IntoIterator<Item = (&'a str, &'a PendingClaim)>,
    class_of: impl Fn(&str) -> Option<&'a StorageClass>,
    now: Timestamp,
    after: Duration,
) -> Stuck {
    let after = SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX);
    let mut stuck: Vec<(Timestamp, &str)> = Vec::new();
    let mut next: Option<SignedDuration> = None;
    for (key, claim) in pending {
        let class = claim.class.as_deref().and_then(&class_of);
        let Some(created) = claim.created else {
            continue;
        };
        if !waits_on(claim, driver, class) {
            continue;
        }
        let waited = now.duration_since(created);
        if waited > after {
            stuck.push((created, key));
        } else {
            // Just past the threshold: creation times have whole seconds.
            let left = after - waited + SignedDuration::from_secs(1);
            next = Some(next.map_or(left, |next| next.min(left)));
        }
    }
    stuck.sort();
    Stuck {
        claims: stuck
            .into_iter()
            .map(|(_, key)| match key.split_once('/') {
                Some((namespace, name)) => (namespace.to_owned(), name.to_owned()),
                None => (String::new(), key.to_owned()),
            })
            .collect(),
        next: next.and_then(|next| Duration::try_from(next).ok()),
    }
}

/// `5 minutes`, `90 seconds`.
fn said(after: Duration) -> String {
    let secs = after.as_secs();
    match (secs % 60, secs / 60) {
        (0, 1) => "1 minute".to_owned(),
        (0, minutes) if minutes > 0 => format!("{minutes} minutes"),
        _ => format!("{secs} seconds"),
    }
}

/// The condition `type_` for the claims `stuck` on `driver` (see the module's documentation).
pub fn stuck_claims_condition(
    type_: String,
    driver: &str,
    stuck: &Stuck,
    after: Duration,
) -> OperatorCondition {
    let Some((namespace, name)) = stuck.claims.first() else {
        return OperatorCondition {
            type_,
            status: ConditionStatus::False,
            last_transition_time: None,
            reason: Some(REASON_NONE.to_owned()),
            message: Some(String::new()),
        };
    };
    let count = stuck.claims.len();
    let names: Vec<String> = stuck
        .claims
        .iter()
        .take(NAMES_SHOWN)
        .map(|(namespace, name)| format!("{namespace}/{name}"))
        .collect();
    let more = match count.saturating_sub(NAMES_SHOWN) {
        0 => String::new(),
        more => format!(" and {more} more"),
    };
    let message = format!(
        "{count} PersistentVolumeClaim{} of {driver} {} been Pending for more than {}: {}{more}; \
         run `storage-operator diagnose pvc -n {namespace} {name}` to see why",
        if count == 1 { "" } else { "s" },
        if count == 1 { "has" } else { "have" },
        said(after),
        names.join(", "),
    );
    OperatorCondition {
        type_,
        status: ConditionStatus::True,
        last_transition_time: None,
        reason: Some(REASON_STUCK.to_owned()),
        message: Some(message),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use serde_json::json;

    const DRIVER: &str = "pd.csi.storage.gke.io";

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn claim(value: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(value).unwrap()
    }

    fn class(name: &str, provisioner: &str, mode: &str) -> StorageClass {
        serde_json::from_value(json!({
            "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode
        }))
        .unwrap()
    }

    fn pending(class: Option<&str>, provisioner: Option<&str>, created: &str) -> PendingClaim {
        PendingClaim {
            class: class.map(str::to_owned),
            provisioner: provisioner.map(str::to_owned),
            selected_node: false,
            created: Some(at(created)),
        }
    }

    #[test]
    fn only_pending_claims_are_kept_with_what_the_rule_reads() {
        let kept = pending_claim(&claim(json!({
            "metadata": {"name": "a", "namespace": "n", "creationTimestamp": "2026-11-28T10:00:00Z",
                         "annotations": {BETA_STORAGE_PROVISIONER_ANNOTATION: DRIVER,
                                         SELECTED_NODE_ANNOTATION: "node-1"}},
            "spec": {"storageClassName": "fast"},
            "status": {"phase": "Pending"}
        })));
        assert_eq!(
            kept,
            Some(PendingClaim {
                class: Some("fast".into()),
                provisioner: Some(DRIVER.into()),
                selected_node: true,
                created: Some(at("2026-11-28T10:00:00Z")),
            })
        );
        let bound = claim(json!({"metadata": {"name": "b"}, "status": {"phase": "Bound"}}));
        assert_eq!(pending_claim(&bound), None);
        let deleting = claim(json!({"metadata": {"name": "c",
            "deletionTimestamp": "2026-11-28T10:00:00Z"}, "status": {"phase": "Pending"}}));
        assert_eq!(pending_claim(&deleting), None);
        // No class, no phase yet: Pending, classless.
        let fresh = pending_claim(&claim(json!({"metadata": {"name": "d"},
            "spec": {"storageClassName": ""}})))
        .unwrap();
        assert_eq!(fresh.class, None);
    }

    #[test]
    fn a_claim_is_the_drivers_by_annotation_or_by_class() {
        let ours = class("standard-csi", DRIVER, "Immediate");
        let theirs = class("other", "ebs.csi.aws.com", "Immediate");
        let created = "2026-11-28T10:00:00Z";
        assert!(waits_on(
            &pending(Some("standard-csi"), None, created),
            DRIVER,
            Some(&ours)
        ));
        assert!(waits_on(
            &pending(Some("gone"), Some(DRIVER), created),
            DRIVER,
            None
        ));
        assert!(!waits_on(
            &pending(Some("other"), None, created),
            DRIVER,
            Some(&theirs)
        ));
        assert!(!waits_on(
            &pending(Some("gone"), None, created),
            DRIVER,
            None
        ));
        assert!(!waits_on(&pending(None, None, created), DRIVER, None));
    }

    #[test]
    fn a_claim_waiting_for_its_first_pod_is_not_stuck_until_one_is_scheduled() {
        let wffc = class("standard-csi", DRIVER, "WaitForFirstConsumer");
        let mut claim = pending(Some("standard-csi"), None, "2026-11-28T10:00:00Z");
        assert!(!waits_on(&claim, DRIVER, Some(&wffc)));
        assert!(!may_wait_on(&claim, Some(DRIVER), Some(&wffc)));
        claim.selected_node = true;
        assert!(waits_on(&claim, DRIVER, Some(&wffc)));
        assert!(may_wait_on(&claim, Some(DRIVER), Some(&wffc)));
    }

    #[test]
    fn a_watch_keeps_only_what_may_be_stuck_on_its_driver() {
        let created = "2026-11-28T10:00:00Z";
        let theirs = class("other", "ebs.csi.aws.com", "Immediate");
        // A class not known yet: kept, unless the annotation names another driver.
        assert!(may_wait_on(
            &pending(Some("later"), None, created),
            Some(DRIVER),
            None
        ));
        assert!(!may_wait_on(
            &pending(Some("later"), Some("ebs.csi.aws.com"), created),
            Some(DRIVER),
            None
        ));
        assert!(!may_wait_on(
            &pending(Some("other"), None, created),
            Some(DRIVER),
            Some(&theirs)
        ));
        // Without a driver (a controller of many), any driver's.
        assert!(may_wait_on(
            &pending(Some("other"), None, created),
            None,
            Some(&theirs)
        ));
        // Neither a class nor an annotation: nobody provisions it.
        assert!(!may_wait_on(&pending(None, None, created), None, None));
    }

    #[test]
    fn claims_are_stuck_after_the_threshold_oldest_first_and_the_next_one_is_timed() {
        let ours = class("standard-csi", DRIVER, "Immediate");
        let claims = [
            (
                "app/young",
                pending(Some("standard-csi"), None, "2026-11-28T10:03:00Z"),
            ),
            (
                "app/old",
                pending(Some("standard-csi"), None, "2026-11-28T09:50:00Z"),
            ),
            (
                "db/older",
                pending(None, Some(DRIVER), "2026-11-28T09:40:00Z"),
            ),
            (
                "other/theirs",
                pending(Some("x"), Some("ebs.csi.aws.com"), "2026-11-28T09:00:00Z"),
            ),
        ];
        let now = at("2026-11-28T10:05:00Z");
        let stuck = stuck_claims(
            DRIVER,
            claims.iter().map(|(k, c)| (*k, c)),
            |name| (name == "standard-csi").then_some(&ours),
            now,
            STUCK_AFTER,
        );
        assert_eq!(
            stuck.claims,
            [("db".into(), "older".into()), ("app".into(), "old".into())]
        );
        // app/young was created 2 minutes ago: stuck 3 minutes (and a second) from now.
        assert_eq!(stuck.next, Some(Duration::from_secs(181)));
        // Exactly at the threshold: not yet.
        let at_threshold = stuck_claims(
            DRIVER,
            claims.iter().map(|(k, c)| (*k, c)),
            |name| (name == "standard-csi").then_some(&ours),
            at("2026-11-28T10:08:00Z"),
            STUCK_AFTER,
        );
        assert_eq!(at_threshold.claims.len(), 2);
        assert_eq!(at_threshold.next, Some(Duration::from_secs(1)));
        // Nothing pending: nothing to wait for.
        let none = stuck_claims(DRIVER, [], |_| None, now, STUCK_AFTER);
        assert_eq!(none, Stuck::default());
    }

    #[test]
    fn the_condition_counts_names_the_first_few_and_says_what_to_run() {
        let type_ = stuck_claims_type("GCPPD");
        assert_eq!(type_, "GCPPDStuckClaims");
        let none = stuck_claims_condition(type_.clone(), DRIVER, &Stuck::default(), STUCK_AFTER);
        assert_eq!(none.status, ConditionStatus::False);
        assert_eq!(none.reason.as_deref(), Some(REASON_NONE));
        let one = Stuck {
            claims: vec![("shop".into(), "orders-db".into())],
            next: None,
        };
        assert_eq!(
            stuck_claims_condition(type_.clone(), DRIVER, &one, STUCK_AFTER)
                .message
                .unwrap(),
            "1 PersistentVolumeClaim of pd.csi.storage.gke.io has been Pending for more than 5 \
             minutes: shop/orders-db; run `storage-operator diagnose pvc -n shop orders-db` to \
             see why"
        );
        let many = Stuck {
            claims: (0..7).map(|i| ("app".into(), format!("c{i}"))).collect(),
            next: Some(Duration::from_secs(10)),
        };
        let condition = stuck_claims_condition(type_, DRIVER, &many, Duration::from_secs(90));
        assert_eq!(condition.status, ConditionStatus::True);
        assert_eq!(condition.reason.as_deref(), Some(REASON_STUCK));
        assert_eq!(
            condition.message.unwrap(),
            "7 PersistentVolumeClaims of pd.csi.storage.gke.io have been Pending for more than \
             90 seconds: app/c0, app/c1, app/c2, app/c3, app/c4 and 2 more; run `storage-operator \
             diagnose pvc -n app c0` to see why"
        );
    }

    #[test]
    fn the_condition_is_read_by_no_roll_up() {
        for suffix in [
            "Available",
            "Progressing",
            "Degraded",
            "Upgradeable",
            "Disabled",
        ] {
            assert!(!stuck_claims_type("GCPPD").ends_with(suffix));
            assert!(!STUCK_CLAIMS.ends_with(suffix));
        }
    }
}
