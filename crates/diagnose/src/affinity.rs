//! A PersistentVolume's node affinity evaluated against a Node, as the scheduler's
//! VolumeBinding plugin does: the terms are ORed, the expressions of a term ANDed, and the
//! operators are In, NotIn, Exists, DoesNotExist, Gt and Lt (`matchFields` knows
//! `metadata.name`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume,
};

/// The required terms of a volume's node affinity; empty when it has none (any node will do).
pub fn required_terms(volume: &PersistentVolume) -> &[NodeSelectorTerm] {
    volume
        .spec
        .as_ref()
        .and_then(|spec| spec.node_affinity.as_ref())
        .and_then(|affinity| affinity.required.as_ref())
        .map(|selector| selector.node_selector_terms.as_slice())
        .unwrap_or_default()
}

/// Whether `node` satisfies the terms. No terms at all match every node; a term with no
/// expressions matches none (as in Kubernetes).
pub fn matches(terms: &[NodeSelectorTerm], node: &Node) -> bool {
    if terms.is_empty() {
        return true;
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let fields = BTreeMap::from([("metadata.name".to_owned(), name.to_owned())]);
    terms.iter().any(|term| {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let field_expressions = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && field_expressions.is_empty() {
            return false;
        }
        expressions
            .iter()
            .all(|requirement| satisfies(requirement, labels))
            && field_expressions
                .iter()
                .all(|requirement| satisfies(requirement, &fields))
    })
}

fn satisfies(requirement: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&requirement.key);
    let values = requirement.values.as_deref().unwrap_or_default();
    let as_number = |text: &str| text.trim().parse::<i64>().ok();
    let compare = |want: fn(i64, i64) -> bool| match (value.and_then(|v| as_number(v)), values) {
        (Some(have), [bound]) => as_number(bound).is_some_and(|bound| want(have, bound)),
        _ => false,
    };
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|value| values.contains(value)),
        "NotIn" => value.is_none_or(|value| !values.contains(value)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compare(|have, bound| have > bound),
        "Lt" => compare(|have, bound| have < bound),
        _ => false,
    }
}

/// The terms as a person reads them: `zone In [a, b] and disk Exists, or ...`.
pub fn describe(terms: &[NodeSelectorTerm]) -> String {
    terms
        .iter()
        .map(|term| {
            term.match_expressions
                .iter()
                .flatten()
                .chain(term.match_fields.iter().flatten())
                .map(|requirement| {
                    let values = requirement.values.as_deref().unwrap_or_default();
                    if values.is_empty() {
                        format!("{} {}", requirement.key, requirement.operator)
                    } else {
                        format!(
                            "{} {} [{}]",
                            requirement.key,
                            requirement.operator,
                            values.join(", ")
                        )
                    }
                })
                .collect::<Vec<_>>()
                .join(" and ")
        })
        .collect::<Vec<_>>()
        .join(", or ")
}

/// The node's labels the terms name: `key=value`, or `key unset`.
pub fn relevant_labels(terms: &[NodeSelectorTerm], node: &Node) -> String {
    let mut keys: Vec<&str> = terms
        .iter()
        .flat_map(|term| term.match_expressions.iter().flatten())
        .map(|requirement| requirement.key.as_str())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let labels = node.metadata.labels.as_ref();
    keys.iter()
        .map(|key| match labels.and_then(|labels| labels.get(*key)) {
            Some(value) => format!("{key}={value}"),
            None => format!("{key} unset"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn term(requirements: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(requirements),
            match_fields: None,
        }
    }

    #[test]
    fn each_operator() {
        let n = node("n1", &[("zone", "a"), ("disks", "4")]);
        let cases = [
            (req("zone", "In", &["a", "b"]), true),
            (req("zone", "In", &["b"]), false),
            (req("zone", "NotIn", &["b"]), true),
            (req("zone", "NotIn", &["a"]), false),
            (req("rack", "NotIn", &["a"]), true),
            (req("zone", "Exists", &[]), true),
            (req("rack", "Exists", &[]), false),
            (req("rack", "DoesNotExist", &[]), true),
            (req("zone", "DoesNotExist", &[]), false),
            (req("disks", "Gt", &["3"]), true),
            (req("disks", "Gt", &["4"]), false),
            (req("disks", "Lt", &["5"]), true),
            (req("disks", "Lt", &["4"]), false),
            (req("zone", "Gt", &["1"]), false),
            (req("disks", "Gt", &["x"]), false),
            (req("zone", "Near", &["a"]), false),
        ];
        for (requirement, want) in cases {
            let described = describe(&[term(vec![requirement.clone()])]);
            assert_eq!(matches(&[term(vec![requirement])], &n), want, "{described}");
        }
    }

    #[test]
    fn terms_are_ored_and_expressions_anded() {
        let n = node("n1", &[("zone", "a"), ("arch", "arm64")]);
        let and = term(vec![
            req("zone", "In", &["a"]),
            req("arch", "In", &["amd64"]),
        ]);
        assert!(!matches(std::slice::from_ref(&and), &n));
        let other = term(vec![req("arch", "In", &["arm64"])]);
        assert!(matches(&[and, other], &n));
        assert!(matches(&[], &n));
        assert!(!matches(&[term(Vec::new())], &n));
    }

    #[test]
    fn match_fields_name_the_node() {
        let by_name = NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![req("metadata.name", "In", &["n1"])]),
        };
        assert!(matches(std::slice::from_ref(&by_name), &node("n1", &[])));
        assert!(!matches(&[by_name], &node("n2", &[])));
    }

    #[test]
    fn describes_terms_and_the_nodes_labels() {
        let terms = [
            term(vec![
                req("zone", "In", &["a", "b"]),
                req("ssd", "Exists", &[]),
            ]),
            term(vec![req("rack", "NotIn", &["r1"])]),
        ];
        assert_eq!(
            describe(&terms),
            "zone In [a, b] and ssd Exists, or rack NotIn [r1]"
        );
        assert_eq!(
            relevant_labels(&terms, &node("n", &[("zone", "c")])),
            "rack unset, ssd unset, zone=c"
        );
    }
}
