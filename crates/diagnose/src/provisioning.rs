//! Why an unbound claim has no volume yet: a request the driver cannot meet (size, access mode,
//! volume mode), a class that waits for a pod that is missing or unschedulable, the
//! provisioner's own errors, or a provisioner that says nothing.

use csi_kit::quantity::{format_bytes, parse_bytes};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::evidence::{self, newest, scheduling_failure};
use crate::report::{Checked, Evidence, Finding, FindingKind, broken, ok};
use crate::snapshot::{
    DriverFacts, Snapshot, event_reporter, format_age, name_of, namespace_of, object_name,
};

/// After this long without a word from the provisioner, a claim is stuck rather than slow.
const STUCK_AFTER_SECONDS: i64 = 5 * 60;

/// What the Provisioning link reads about the claim.
pub struct Provisioning<'a> {
    /// The claim.
    pub claim: &'a PersistentVolumeClaim,
    /// Its class, when it has one that exists.
    pub class: Option<&'a StorageClass>,
    /// The CSI driver that provisions it, when there is one.
    pub csi_name: Option<&'a str>,
    /// The pods that use it and have not finished.
    pub consumers: &'a [&'a Pod],
    /// Evidence that the class was picked among several defaults.
    pub ambiguity: Option<Evidence>,
}

const LINK: &str = "Provisioning";

/// The Provisioning link of an unbound claim.
pub fn provisioning_link(snap: &Snapshot, p: &Provisioning<'_>) -> Checked {
    let namespace = namespace_of(&p.claim.metadata);
    let name = name_of(&p.claim.metadata);
    let claim_object = object_name("PersistentVolumeClaim", namespace, name);
    let events = snap.events_of("PersistentVolumeClaim", namespace, name);
    let failed = newest(&events, &["ProvisioningFailed"]);
    let failed_evidence: Vec<Evidence> = failed
        .map(|e| evidence::event(snap, e))
        .into_iter()
        .collect();
    let with_ambiguity = |mut evidence: Vec<Evidence>| {
        evidence.extend(p.ambiguity.clone());
        evidence
    };
    let object = Some(claim_object.clone());

    if let Some(facts) = p.csi_name.and_then(|csi| snap.driver_facts(csi))
        && let Some(checked) = request_checks(snap, p, facts, &claim_object, &failed_evidence)
    {
        return checked;
    }

    let wait_for_consumer = p
        .class
        .and_then(|class| class.volume_binding_mode.as_deref())
        == Some("WaitForFirstConsumer");
    if wait_for_consumer && p.consumers.is_empty() {
        let class = p.class.map(|c| name_of(&c.metadata)).unwrap_or_default();
        let mut evidence = vec![Evidence::new(
            object_name("StorageClass", "", class),
            "volumeBindingMode".to_owned(),
            "WaitForFirstConsumer".to_owned(),
        )];
        evidence
            .extend(newest(&events, &["WaitForFirstConsumer"]).map(|e| evidence::event(snap, e)));
        evidence.push(Evidence::new(
            format!("Pods in {namespace}"),
            "spec.volumes[].persistentVolumeClaim.claimName".to_owned(),
            format!("no pod uses claim {name}"),
        ));
        return broken(
            LINK,
            object,
            "waits for a pod; none uses the claim".to_owned(),
            Finding::new(
                FindingKind::WaitForFirstConsumerNoPod,
                format!(
                    "StorageClass {class} binds on first consumer, and no pod uses claim {name}"
                ),
                evidence,
                format!(
                    "create a pod that uses the claim (spec.volumes[].persistentVolumeClaim.\
                     claimName: {name}); the volume is provisioned when it is scheduled. This is \
                     not an error while no pod needs it"
                ),
            ),
        );
    }
    if wait_for_consumer {
        let unscheduled = p
            .consumers
            .iter()
            .find_map(|pod| scheduling_failure(snap, pod).map(|evidence| (pod, evidence)));
        if let Some((pod, evidence)) = unscheduled {
            let pod_name = name_of(&pod.metadata);
            return broken(
                LINK,
                object,
                format!("waits for pod {pod_name}, which cannot be scheduled"),
                Finding::new(
                    FindingKind::PodUnschedulable,
                    format!(
                        "the volume is created where pod {pod_name} is scheduled, and the \
                         scheduler finds no node for it"
                    ),
                    evidence,
                    format!(
                        "fix what the scheduler's message names: free resources or add nodes, or \
                         change pod {pod_name}'s spec.nodeSelector, affinity and tolerations (and \
                         the class's allowedTopologies, when volumes did not fit)"
                    ),
                ),
            );
        }
    }

    if let Some(failed) = failed {
        let reporter = event_reporter(failed);
        let from_driver = p
            .csi_name
            .is_some_and(|csi| reporter.starts_with(&format!("{csi}_")) || reporter == csi);
        let fix = if from_driver {
            let class = p.class.map(|c| name_of(&c.metadata)).unwrap_or("the class");
            format!(
                "the driver refused to create the volume: fix what its message names (the \
                 StorageClass {class}'s parameters, a quota, the permissions of the driver's \
                 cloud credentials); the provisioner retries on its own"
            )
        } else {
            "fix what the message names; the volume controller retries on its own".to_owned()
        };
        return broken(
            LINK,
            object,
            format!("ProvisioningFailed from {reporter}"),
            Finding::new(
                FindingKind::ProvisioningFailed,
                format!("provisioning the claim's volume failed ({reporter})"),
                with_ambiguity(failed_evidence),
                fix,
            ),
        );
    }
    if let Some(binding) = newest(&events, &["FailedBinding"])
        && p.class.is_none()
    {
        return broken(
            LINK,
            object,
            "no PersistentVolume matches and no class provisions one".to_owned(),
            Finding::new(
                FindingKind::ProvisioningFailed,
                "no PersistentVolume matches the claim, and no class can create one".to_owned(),
                vec![evidence::event(snap, binding)],
                format!(
                    "create a PersistentVolume that matches the claim (size, access modes, \
                     volumeMode, spec.claimRef to {namespace}/{name}), or recreate the claim with \
                     spec.storageClassName set to a class that provisions"
                ),
            ),
        );
    }

    let age = p
        .claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|time| snap.age_seconds(&time.0))
        .unwrap_or_default();
    if let Some(waiting) = newest(&events, &["ExternalProvisioning"])
        && age > STUCK_AFTER_SECONDS
    {
        let csi = p.csi_name.unwrap_or("the provisioner");
        let logs = p
            .csi_name
            .and_then(|csi| snap.driver_pods(csi))
            .and_then(|pods| pods.controller.first())
            .map(|pod| {
                format!(
                    "`kubectl logs -n {} {} -c csi-provisioner`",
                    namespace_of(&pod.metadata),
                    name_of(&pod.metadata)
                )
            })
            .unwrap_or_else(|| "the csi-provisioner container's logs".to_owned());
        return broken(
            LINK,
            object,
            format!("Pending for {} without a word from {csi}", format_age(age)),
            Finding::new(
                FindingKind::ProvisioningStuck,
                format!(
                    "the claim has waited {} for {csi}, which reported neither success nor error",
                    format_age(age)
                ),
                with_ambiguity(vec![evidence::event(snap, waiting)]),
                format!(
                    "read {logs}: the provisioner may not see the claim (its leader election, its \
                     --extra-create-metadata or RBAC), or may wait on the cloud"
                ),
            ),
        );
    }
    ok(
        LINK,
        object,
        format!("Pending for {}, no error reported yet", format_age(age)),
    )
}

/// The claim's request against what the driver offers: access modes, volume mode, size.
fn request_checks(
    snap: &Snapshot,
    p: &Provisioning<'_>,
    facts: &DriverFacts,
    claim_object: &str,
    failed: &[Evidence],
) -> Option<Checked> {
    let csi = &facts.csi_name;
    let spec = p.claim.spec.as_ref()?;
    let object = Some(claim_object.to_owned());
    let catalogue = format!("catalogue of {csi}");

    let volume_mode = spec.volume_mode.as_deref().unwrap_or("Filesystem");
    let modes = spec.access_modes.as_deref().unwrap_or_default();
    let offered = facts.access_modes_with(volume_mode);
    let missing: Vec<&str> = modes
        .iter()
        .filter(|mode| !offered.is_empty() && !offered.contains(mode))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        // Where the driver's access modes depend on the volume mode, the volume mode is said.
        let with = if facts.access_modes_by_volume_mode.contains_key(volume_mode) {
            format!(" with volumeMode {volume_mode}")
        } else {
            String::new()
        };
        let offered = offered.join(", ");
        let others = classes_offering(snap, modes, |f| f.access_modes_with(volume_mode));
        let mut evidence = vec![
            Evidence::new(
                claim_object.to_owned(),
                "spec.accessModes".to_owned(),
                modes.join(", "),
            ),
            Evidence::new(
                catalogue.clone(),
                "access modes".to_owned(),
                format!("{csi} offers{with}: {offered}"),
            ),
        ];
        evidence.extend(failed.iter().cloned());
        let missing = missing.join(", ");
        // The same driver may offer them with the other volume mode (AWS EBS: ReadWriteMany
        // of a raw block device).
        let other_volume_mode = facts
            .access_modes_by_volume_mode
            .iter()
            .find(|(other, access)| {
                other.as_str() != volume_mode && modes.iter().all(|mode| access.contains(mode))
            })
            .map(|(other, _)| {
                format!(
                    "; or with spec.volumeMode {other}, with which {csi} offers {missing} (the \
                     pods then use it through volumeDevices)"
                )
            })
            .unwrap_or_default();
        return Some(broken(
            LINK,
            object,
            format!("{csi} does not offer {missing}{with}"),
            Finding::new(
                FindingKind::AccessModeUnsupported,
                format!("the claim asks for {missing}, which {csi} does not offer{with}"),
                evidence,
                format!(
                    "recreate the claim with spec.accessModes from: {offered}{other_volume_mode}; \
                     or, for {missing}, with spec.storageClassName set to a class whose driver \
                     offers it: {others}"
                ),
            ),
        ));
    }

    if !facts.volume_modes.is_empty() && !facts.volume_modes.iter().any(|m| m == volume_mode) {
        let offered = facts.volume_modes.join(", ");
        let mut evidence = vec![
            Evidence::new(
                claim_object.to_owned(),
                "spec.volumeMode".to_owned(),
                volume_mode.to_owned(),
            ),
            Evidence::new(
                catalogue.clone(),
                "volume modes".to_owned(),
                format!("{csi} offers: {offered}"),
            ),
        ];
        evidence.extend(failed.iter().cloned());
        let others = classes_offering(snap, &[volume_mode.to_owned()], |f| &f.volume_modes);
        return Some(broken(
            LINK,
            object,
            format!("{csi} does not offer volumeMode {volume_mode}"),
            Finding::new(
                FindingKind::VolumeModeUnsupported,
                format!("the claim asks for volumeMode {volume_mode}, which {csi} does not offer"),
                evidence,
                format!(
                    "recreate the claim with spec.volumeMode from: {offered}; or with \
                     spec.storageClassName set to a class whose driver offers {volume_mode}: \
                     {others}"
                ),
            ),
        ));
    }

    let requested = spec
        .resources
        .as_ref()
        .and_then(|resources| resources.requests.as_ref())
        .and_then(|requests| requests.get("storage"))?;
    let bytes = parse_bytes(&requested.0).ok()?;
    let min = facts.min_bytes.map(u128::from);
    let max = facts.max_bytes.map(u128::from);
    let below = min.is_some_and(|min| bytes < min);
    let above = max.is_some_and(|max| bytes > max);
    if !(below || above) {
        return None;
    }
    let range = match (min, max) {
        (Some(min), Some(max)) => format!("from {} to {}", format_bytes(min), format_bytes(max)),
        (Some(min), None) => format!("of at least {}", format_bytes(min)),
        (None, Some(max)) => format!("of at most {}", format_bytes(max)),
        (None, None) => String::new(),
    };
    let mut evidence = vec![
        Evidence::new(
            claim_object.to_owned(),
            "spec.resources.requests.storage".to_owned(),
            requested.0.clone(),
        ),
        Evidence::new(
            catalogue,
            "volume sizes".to_owned(),
            format!("{csi} creates volumes {range}"),
        ),
    ];
    evidence.extend(failed.iter().cloned());
    let direction = if below { "below" } else { "above" };
    Some(broken(
        LINK,
        object,
        format!("{} is {direction} what {csi} creates", requested.0),
        Finding::new(
            FindingKind::SizeOutOfRange,
            format!(
                "the claim requests {}, {direction} the volumes {csi} creates ({range})",
                requested.0
            ),
            evidence,
            format!(
                "recreate the claim with spec.resources.requests.storage {range} (the request of \
                 an unbound claim cannot change)"
            ),
        ),
    ))
}

/// The classes whose driver offers every one of `wanted`, by the catalogue.
fn classes_offering(
    snap: &Snapshot,
    wanted: &[String],
    offered: impl Fn(&DriverFacts) -> &[String],
) -> String {
    let mut names: Vec<&str> = snap
        .storage_classes
        .iter()
        .filter(|class| {
            snap.driver_facts(&class.provisioner)
                .is_some_and(|facts| wanted.iter().all(|mode| offered(facts).contains(mode)))
        })
        .map(|class| name_of(&class.metadata))
        .collect();
    names.sort_unstable();
    if names.is_empty() {
        "(none on this cluster)".to_owned()
    } else {
        names.join(", ")
    }
}
