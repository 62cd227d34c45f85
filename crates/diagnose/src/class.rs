//! The claim's StorageClass: named and missing, none named and no default, or two defaults
//! (Kubernetes gives an unclassed claim the newest).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;

use crate::report::{Checked, Evidence, Finding, FindingKind, broken, not_applicable, ok};
use crate::snapshot::{DEFAULT_CLASS_ANNOTATION, Snapshot, name_of, namespace_of, object_name};

/// The class a claim gets, and what the link said about it.
pub struct ClassOutcome<'a> {
    /// The link.
    pub checked: Checked,
    /// The class the claim has or will get, when it exists.
    pub class: Option<&'a StorageClass>,
    /// When the class is the newest of several defaults: the evidence to add to a finding that
    /// the class caused.
    pub ambiguity: Option<Evidence>,
}

fn class_names(snap: &Snapshot) -> String {
    let mut names: Vec<&str> = snap
        .storage_classes
        .iter()
        .map(|class| name_of(&class.metadata))
        .collect();
    names.sort_unstable();
    if names.is_empty() {
        "(no StorageClass exists)".to_owned()
    } else {
        names.join(", ")
    }
}

fn describe(snap: &Snapshot, class: &StorageClass) -> String {
    let default = snap
        .default_classes()
        .iter()
        .any(|default| default.metadata.name == class.metadata.name);
    format!(
        "provisioner {}, volumeBindingMode {}, default {}",
        class.provisioner,
        class.volume_binding_mode.as_deref().unwrap_or("Immediate"),
        if default { "yes" } else { "no" }
    )
}

/// The evidence that several classes are default and which one Kubernetes picks, when `class`
/// is that one.
fn ambiguity(snap: &Snapshot, class: &StorageClass) -> Option<Evidence> {
    let defaults = snap.default_classes();
    let newest = defaults.first()?;
    if defaults.len() < 2 || newest.metadata.name != class.metadata.name {
        return None;
    }
    let names: Vec<&str> = defaults
        .iter()
        .map(|default| name_of(&default.metadata))
        .collect();
    Some(Evidence::new(
        "StorageClasses".to_owned(),
        format!("annotation {DEFAULT_CLASS_ANNOTATION}=true"),
        format!(
            "{} are all marked default; Kubernetes gives a claim without a class the newest, {}",
            names.join(", "),
            name_of(&newest.metadata)
        ),
    ))
}

/// The StorageClass link of `claim`. A bound claim no longer needs its class.
pub fn class_link<'a>(
    snap: &'a Snapshot,
    claim: &PersistentVolumeClaim,
    bound: bool,
) -> ClassOutcome<'a> {
    let claim_object = object_name(
        "PersistentVolumeClaim",
        namespace_of(&claim.metadata),
        name_of(&claim.metadata),
    );
    let named = claim
        .spec
        .as_ref()
        .and_then(|spec| spec.storage_class_name.as_deref());
    match named {
        Some("") => ClassOutcome {
            checked: not_applicable(
                "StorageClass",
                None,
                "spec.storageClassName is \"\": the claim binds only to a PersistentVolume made \
                 beforehand"
                    .to_owned(),
            ),
            class: None,
            ambiguity: None,
        },
        Some(name) => {
            let object = Some(object_name("StorageClass", "", name));
            match snap.storage_class(name) {
                Some(class) => ClassOutcome {
                    checked: ok("StorageClass", object, describe(snap, class)),
                    class: Some(class),
                    ambiguity: ambiguity(snap, class),
                },
                None if bound => ClassOutcome {
                    checked: ok(
                        "StorageClass",
                        object,
                        "no longer exists; the claim is bound and does not need it".to_owned(),
                    ),
                    class: None,
                    ambiguity: None,
                },
                None => ClassOutcome {
                    checked: broken(
                        "StorageClass",
                        object,
                        "not found".to_owned(),
                        Finding::new(
                            FindingKind::NoSuchStorageClass,
                            format!("the claim's StorageClass {name} does not exist"),
                            vec![
                                Evidence::new(
                                    claim_object,
                                    "spec.storageClassName".to_owned(),
                                    name.to_owned(),
                                ),
                                Evidence::new(
                                    object_name("StorageClass", "", name),
                                    "GET".to_owned(),
                                    format!("storageclasses.storage.k8s.io \"{name}\" not found"),
                                ),
                            ],
                            format!(
                                "create StorageClass {name}, or recreate the claim with \
                                 spec.storageClassName set to one of: {} (the field cannot \
                                 change on an existing claim)",
                                class_names(snap)
                            ),
                        ),
                    ),
                    class: None,
                    ambiguity: None,
                },
            }
        }
        None => {
            let defaults = snap.default_classes();
            match defaults.first() {
                _ if bound => ClassOutcome {
                    checked: not_applicable(
                        "StorageClass",
                        None,
                        "the claim names no class and is bound".to_owned(),
                    ),
                    class: None,
                    ambiguity: None,
                },
                Some(newest) => {
                    let also = if defaults.len() > 1 {
                        format!(
                            " ({} classes are marked default; Kubernetes picks the newest)",
                            defaults.len()
                        )
                    } else {
                        String::new()
                    };
                    ClassOutcome {
                        checked: ok(
                            "StorageClass",
                            Some(object_name("StorageClass", "", name_of(&newest.metadata))),
                            format!(
                                "the claim names no class; Kubernetes assigns the default{also}: \
                                 {}",
                                describe(snap, newest)
                            ),
                        ),
                        class: Some(newest),
                        ambiguity: ambiguity(snap, newest),
                    }
                }
                None => ClassOutcome {
                    checked: broken(
                        "StorageClass",
                        None,
                        "none named, no default".to_owned(),
                        Finding::new(
                            FindingKind::NoDefaultStorageClass,
                            "the claim names no StorageClass and no class is marked default"
                                .to_owned(),
                            vec![
                                Evidence::new(
                                    claim_object,
                                    "spec.storageClassName".to_owned(),
                                    "(unset)".to_owned(),
                                ),
                                Evidence::new(
                                    "StorageClasses".to_owned(),
                                    format!("annotation {DEFAULT_CLASS_ANNOTATION}"),
                                    format!(
                                        "no class has it set to \"true\"; classes: {}",
                                        class_names(snap)
                                    ),
                                ),
                            ],
                            format!(
                                "mark one class default with the annotation \
                                 {DEFAULT_CLASS_ANNOTATION}=true (`kubectl annotate \
                                 storageclass NAME {DEFAULT_CLASS_ANNOTATION}=true`); the claim \
                                 then gets it. Or recreate the claim with spec.storageClassName \
                                 set to one of: {}",
                                class_names(snap)
                            ),
                        ),
                    ),
                    class: None,
                    ambiguity: None,
                },
            }
        }
    }
}
