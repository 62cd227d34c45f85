//! Topology rewrites shared by the plugins: the `zone`/`zones` StorageClass parameters, allowed
//! topologies, and a PersistentVolume's zone labels and node affinity, between the Kubernetes
//! well-known labels and a CSI driver's topology keys.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume,
    TopologySelectorLabelRequirement, TopologySelectorTerm, VolumeNodeAffinity,
};

use crate::differences::Difference;
use crate::parameters::{ScContext, map_order_note};
use crate::types::{Note, Result, TranslateError};

/// GA zone label.
pub(crate) const ZONE_GA: &str = "topology.kubernetes.io/zone";
/// Beta zone label.
pub(crate) const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// GA region label.
pub(crate) const REGION_GA: &str = "topology.kubernetes.io/region";
/// Beta region label.
pub(crate) const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
/// Several zones in one PV label value are joined with this.
pub(crate) const MULTI_ZONE_DELIMITER: &str = "__";

/// Derives the region from a volume's zones; the error says why it cannot.
pub(crate) type RegionFn = fn(&[String]) -> std::result::Result<String, String>;

/// Handles the `zone` and `zones` parameters of a StorageClass (any case): they become allowed
/// topologies on `key`. Returns whether the parameter was handled. When several are given,
/// `zones` wins over `zone`, and between spellings of one the later in byte order (upstream
/// keeps whichever its map order visits last).
pub(crate) fn zone_parameter(
    key: &str,
    value: &str,
    topology_key: &str,
    generated: &mut Option<(String, Vec<String>)>,
    notes: &mut Vec<Note>,
) -> bool {
    let lower = key.to_ascii_lowercase();
    let raw: Vec<&str> = match lower.as_str() {
        "zone" => vec![value],
        "zones" => value.split(',').collect(),
        _ => return false,
    };
    let zones: Vec<String> = raw.iter().map(|z| z.trim().to_string()).collect();
    notes.push(Note::new(
        format!("parameters.{key}"),
        format!("dropped: expressed as allowedTopologies on {topology_key}"),
    ));
    if raw.iter().zip(&zones).any(|(raw, zone)| raw != zone) {
        notes.push(Note::differs(
            format!("parameters.{key}"),
            "spaces around the zones trimmed (csi-translation-lib keeps them)",
            Difference::ZonesTrimmed,
        ));
    }
    let ignored = |lost: &str, kept: &str| map_order_note(lost, kept, "the zones");
    match generated.take() {
        Some(old) if old.0.eq_ignore_ascii_case("zones") && lower == "zone" => {
            notes.push(ignored(key, &old.0));
            *generated = Some(old);
        }
        Some(old) => {
            notes.push(ignored(&old.0, key));
            *generated = Some((key.to_string(), zones));
        }
        None => *generated = Some((key.to_string(), zones)),
    }
    true
}

/// Finishes the StorageClass topology: generated terms from `zone`/`zones`, or the existing
/// allowed topologies with their zone keys (GA or beta) rewritten to the driver's; other keys,
/// regions included, pass unchanged.
pub(crate) fn finish_storage_class(
    ctx: &mut ScContext<'_>,
    generated: Option<(String, Vec<String>)>,
    zone_key: &str,
) -> Result<()> {
    if ctx.allowed_topologies.as_ref().is_some_and(Vec::is_empty) {
        ctx.allowed_topologies = None;
    }
    match generated {
        Some((param, _)) if ctx.allowed_topologies.is_some() => Err(TranslateError::unsupported(
            format!("parameters.{param}"),
            "cannot set both allowedTopologies and the zone/zones parameters; keep one of them",
        )),
        Some((_, zones)) => {
            ctx.allowed_topologies = Some(vec![TopologySelectorTerm {
                match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                    key: zone_key.to_string(),
                    values: zones,
                }]),
            }]);
            Ok(())
        }
        None => {
            for (at, expr) in label_expressions_mut(&mut ctx.allowed_topologies) {
                if expr.key == ZONE_GA || expr.key == ZONE_BETA {
                    ctx.notes.push(Note::new(
                        format!("{at}.key"),
                        format!(
                            "{} -> {zone_key}: the driver reports zones under its own key",
                            expr.key
                        ),
                    ));
                    expr.key = zone_key.to_string();
                }
            }
            Ok(())
        }
    }
}

/// Every label expression of a class's allowed topologies, with its place
/// (`allowedTopologies[t].matchLabelExpressions[e]`).
pub(crate) fn label_expressions_mut(
    terms: &mut Option<Vec<TopologySelectorTerm>>,
) -> impl Iterator<Item = (String, &mut TopologySelectorLabelRequirement)> {
    terms
        .iter_mut()
        .flatten()
        .enumerate()
        .flat_map(|(t, term)| {
            term.match_label_expressions
                .iter_mut()
                .flatten()
                .enumerate()
                .map(move |(e, expr)| {
                    (
                        format!("allowedTopologies[{t}].matchLabelExpressions[{e}]"),
                        expr,
                    )
                })
        })
}

fn terms_mut(pv: &mut PersistentVolume) -> Option<&mut Vec<NodeSelectorTerm>> {
    pv.spec
        .as_mut()?
        .node_affinity
        .as_mut()?
        .required
        .as_mut()
        .map(|r| &mut r.node_selector_terms)
}

fn terms(pv: &PersistentVolume) -> &[NodeSelectorTerm] {
    pv.spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
}

fn affinity_has(pv: &PersistentVolume, key: &str) -> bool {
    terms(pv)
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .any(|r| r.key == key)
}

/// Sorted unique values of `key` across the node affinity terms.
pub(crate) fn affinity_values(pv: &PersistentVolume, key: &str) -> Vec<String> {
    terms(pv)
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .filter(|r| r.key == key)
        .flat_map(|r| r.values.iter().flatten().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn label<'a>(pv: &'a PersistentVolume, key: &str) -> Option<&'a String> {
    pv.metadata.labels.as_ref()?.get(key)
}

/// The zone and region labels the PV uses: GA unless only beta ones are present (node
/// affinity first, then labels).
pub(crate) fn zone_region_labels(pv: &PersistentVolume) -> (&'static str, &'static str) {
    if affinity_has(pv, ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if affinity_has(pv, ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else if label(pv, ZONE_GA).is_some() {
        (ZONE_GA, REGION_GA)
    } else if label(pv, ZONE_BETA).is_some() {
        (ZONE_BETA, REGION_BETA)
    } else {
        (ZONE_GA, REGION_GA)
    }
}

/// Renames `old` to `new` in every node affinity expression; returns how many were renamed.
fn replace_key(pv: &mut PersistentVolume, old: &str, new: &str) -> usize {
    let mut count = 0;
    if let Some(terms) = terms_mut(pv) {
        for expr in terms
            .iter_mut()
            .flat_map(|t| t.match_expressions.iter_mut().flatten())
        {
            if expr.key == old {
                expr.key = new.to_string();
                count += 1;
            }
        }
    }
    count
}

/// Adds `key In values` to every node affinity term (creating one if there is none).
fn add_requirement(pv: &mut PersistentVolume, key: &str, values: Vec<String>) {
    let spec = pv.spec.get_or_insert_with(Default::default);
    let affinity = spec
        .node_affinity
        .get_or_insert_with(VolumeNodeAffinity::default);
    let required = affinity.required.get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        term.match_expressions
            .get_or_insert_with(Vec::new)
            .push(NodeSelectorRequirement {
                key: key.to_string(),
                operator: "In".to_string(),
                values: Some(values.clone()),
            });
    }
}

/// The zones of a PV's zone label (`a__b` holds several), trimmed, without empties, sorted.
fn label_zones(value: &str) -> Vec<String> {
    value
        .split(MULTI_ZONE_DELIMITER)
        .map(|z| z.trim().to_string())
        .filter(|z| !z.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// In-tree to CSI: zone affinity moves to the driver's key; a PV with only a zone label gets an
/// affinity term on the driver's key; a beta region affinity becomes GA.
pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, zone_key: &str, notes: &mut Vec<Note>) {
    let (zone_label, region_label) = zone_region_labels(pv);
    if !affinity_values(pv, zone_label).is_empty() {
        replace_key(pv, zone_label, zone_key);
        notes.push(Note::new(
            "spec.nodeAffinity",
            format!("{zone_label} -> {zone_key}: the driver's nodes report their zone under it"),
        ));
    } else if let Some(value) = label(pv, zone_label).cloned() {
        let zones = label_zones(&value);
        if !zones.is_empty() {
            add_requirement(pv, zone_key, zones);
            notes.push(Note::new(
                format!("metadata.labels[{zone_label}]"),
                format!("added as node affinity on {zone_key} (the PV had a zone label only)"),
            ));
        }
    }
    if region_label == REGION_BETA && replace_key(pv, REGION_BETA, REGION_GA) > 0 {
        notes.push(Note::new(
            "spec.nodeAffinity",
            format!("{REGION_BETA} -> {REGION_GA}: new nodes carry only the GA region label"),
        ));
    }
}

/// vSphere's in-tree to CSI rewrite: zone and region affinity move to the driver's zone and
/// region keys; a PV with only zone or region labels gets affinity on the driver's keys.
pub(crate) fn pv_to_csi_zone_region(
    pv: &mut PersistentVolume,
    zone_key: &str,
    region_key: &str,
    notes: &mut Vec<Note>,
) {
    let (zone_label, region_label) = zone_region_labels(pv);
    for (label_key, key) in [(zone_label, zone_key), (region_label, region_key)] {
        if !affinity_values(pv, label_key).is_empty() {
            replace_key(pv, label_key, key);
            notes.push(Note::new(
                "spec.nodeAffinity",
                format!("{label_key} -> {key}: the driver's nodes report their topology under it"),
            ));
            continue;
        }
        let Some(value) = label(pv, label_key).cloned() else {
            continue;
        };
        let values = if label_key == zone_label {
            label_zones(&value)
        } else {
            Some(value.trim().to_string())
                .filter(|v| !v.is_empty())
                .into_iter()
                .collect()
        };
        if values.is_empty() {
            continue;
        }
        if values.len() > 1 {
            notes.push(Note::differs(
                format!("metadata.labels[{label_key}]"),
                format!(
                    "{value:?} holds {} zones: any of them is required (csi-translation-lib \
                     requires the one zone {value:?})",
                    values.len()
                ),
                Difference::VsphereZoneLabel,
            ));
        }
        add_requirement(pv, key, values);
        notes.push(Note::new(
            format!("metadata.labels[{label_key}]"),
            format!("added as node affinity on {key} (the PV had the label only)"),
        ));
    }
}

/// CSI to in-tree: the driver's zone key becomes the Kubernetes zone label (in affinity and,
/// when missing, as a PV label); with `region`, a region requirement and label are derived from
/// the zones of each term that lacks one.
pub(crate) fn pv_to_in_tree(
    pv: &mut PersistentVolume,
    zone_key: &str,
    region: Option<RegionFn>,
    notes: &mut Vec<Note>,
) -> Result<()> {
    let (zone_label, region_label) = zone_region_labels(pv);
    if replace_key(pv, zone_key, zone_label) > 0 {
        notes.push(Note::new(
            "spec.nodeAffinity",
            format!("{zone_key} -> {zone_label}: in-tree volumes use the Kubernetes zone label"),
        ));
    }
    if let Some(region_fn) = region
        && let Some(terms) = terms_mut(pv)
    {
        for (index, term) in terms.iter_mut().enumerate() {
            let exprs = term.match_expressions.get_or_insert_with(Vec::new);
            if exprs.iter().any(|r| r.key == region_label) {
                continue;
            }
            let zones: Vec<String> = exprs
                .iter()
                .filter(|r| r.key == zone_label)
                .flat_map(|r| r.values.iter().flatten().cloned())
                .collect();
            if zones.is_empty() {
                notes.push(Note::differs(
                    format!("spec.nodeAffinity.required.nodeSelectorTerms[{index}]"),
                    "no zone: left without a region (csi-translation-lib fails with \
                     \"no zones specified\")",
                    Difference::TermWithoutZones,
                ));
                continue;
            }
            let value = region_fn(&zones).map_err(|reason| {
                TranslateError::invalid(
                    format!("spec.nodeAffinity.required.nodeSelectorTerms[{index}]"),
                    &zones.join(","),
                    reason,
                )
            })?;
            exprs.push(NodeSelectorRequirement {
                key: region_label.to_string(),
                operator: "In".to_string(),
                values: Some(vec![value]),
            });
            notes.push(Note::new(
                format!("spec.nodeAffinity.required.nodeSelectorTerms[{index}]"),
                format!("added {region_label}, derived from the zones"),
            ));
        }
        let regions = affinity_values(pv, region_label);
        if let [only] = regions.as_slice() {
            set_label_if_missing(pv, region_label, only.clone(), notes);
        }
    }
    let zones = affinity_values(pv, zone_label);
    if !zones.is_empty() {
        set_label_if_missing(pv, zone_label, zones.join(MULTI_ZONE_DELIMITER), notes);
    }
    Ok(())
}

fn set_label_if_missing(
    pv: &mut PersistentVolume,
    key: &str,
    value: String,
    notes: &mut Vec<Note>,
) {
    let labels = pv.metadata.labels.get_or_insert_with(BTreeMap::new);
    if !labels.contains_key(key) {
        notes.push(Note::new(
            format!("metadata.labels[{key}]"),
            format!("added {value:?} from the node affinity"),
        ));
        labels.insert(key.to_string(), value);
    }
}

/// vSphere's CSI to in-tree rewrite: both the driver's zone and region keys go back to the
/// Kubernetes labels; the first value of each (in byte order) becomes the PV's label when it
/// has none.
pub(crate) fn pv_to_in_tree_zone_region(
    pv: &mut PersistentVolume,
    zone_key: &str,
    region_key: &str,
    notes: &mut Vec<Note>,
) {
    let (zone_label, region_label) = zone_region_labels(pv);
    for (from, to) in [(zone_key, zone_label), (region_key, region_label)] {
        if replace_key(pv, from, to) > 0 {
            notes.push(Note::new(
                "spec.nodeAffinity",
                format!("{from} -> {to}: in-tree volumes use the Kubernetes topology labels"),
            ));
        }
        // As upstream: the first value only, not all of them joined.
        if let Some(first) = affinity_values(pv, to).into_iter().next() {
            set_label_if_missing(pv, to, first, notes);
        }
    }
}
