//! Small helpers for writing RBAC rules in code: operators here derive their roles from what
//! they install, so rules are built, merged and checked programmatically.

use k8s_openapi::api::rbac::v1::PolicyRule;

/// Read-only verbs.
pub const READ: &[&str] = &["get", "list", "watch"];
/// Every verb an operator needs to own objects of a kind.
pub const MANAGE: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// A rule for `verbs` on `resources` of `groups` (`""` is the core group).
pub fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |items: &[&str]| Some(items.iter().map(|s| (*s).to_owned()).collect());
    PolicyRule {
        api_groups: strings(groups),
        resources: strings(resources),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..Default::default()
    }
}

/// Drops rules that repeat an earlier one exactly, keeping the first's position.
pub fn dedupe(rules: &mut Vec<PolicyRule>) {
    let mut seen: Vec<PolicyRule> = Vec::with_capacity(rules.len());
    rules.retain(|r| {
        let new = !seen.contains(r);
        if new {
            seen.push(r.clone());
        }
        new
    });
}

/// Whether `rules` allow `verb` on `resource` of `group` (wildcards included), ignoring
/// `resourceNames` restrictions.
pub fn allows(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups
            .iter()
            .flatten()
            .any(|g| g == group || g == "*")
            && r.resources
                .iter()
                .flatten()
                .any(|x| x == resource || x == "*")
            && r.verbs.iter().any(|v| v == verb || v == "*")
    })
}

/// Whether `rules` allow `verb` on the object `name` of `resource` in `group`, as the API
/// server's RBAC authorizer decides it: a rule with `resourceNames` allows only those names.
/// Pass the name the server authorizes with (for a server-side apply, the object's; for
/// `escalate`, the role's; for `bind`, the role a binding refers to).
pub fn allows_name(
    rules: &[PolicyRule],
    group: &str,
    resource: &str,
    verb: &str,
    name: &str,
) -> bool {
    rules.iter().any(|r| {
        allows(std::slice::from_ref(r), group, resource, verb)
            && r.resource_names
                .as_ref()
                .is_none_or(|names| names.is_empty() || names.iter().any(|n| n == name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_dedupe_and_answer_questions() {
        let mut rules = vec![
            rule(&["apps"], &["deployments"], MANAGE),
            rule(&[""], &["nodes"], READ),
            rule(&["apps"], &["deployments"], MANAGE),
        ];
        dedupe(&mut rules);
        assert_eq!(rules.len(), 2);
        assert!(allows(&rules, "apps", "deployments", "patch"));
        assert!(allows(&rules, "", "nodes", "watch"));
        assert!(!allows(&rules, "", "nodes", "delete"));
        assert!(!allows(&rules, "", "secrets", "get"));
        assert!(allows(&[rule(&["*"], &["*"], &["*"])], "x", "y", "z"));
    }

    #[test]
    fn resource_names_limit_a_rule_to_those_objects() {
        let named = PolicyRule {
            resource_names: Some(vec!["a".into()]),
            ..rule(
                &["rbac.authorization.k8s.io"],
                &["clusterroles"],
                &["escalate"],
            )
        };
        let rules = [named, rule(&[""], &["nodes"], READ)];
        let rbac = "rbac.authorization.k8s.io";
        assert!(allows_name(&rules, rbac, "clusterroles", "escalate", "a"));
        assert!(!allows_name(&rules, rbac, "clusterroles", "escalate", "b"));
        assert!(!allows_name(&rules, rbac, "clusterroles", "bind", "a"));
        // Without resourceNames, every name; `allows` ignores names.
        assert!(allows_name(&rules, "", "nodes", "get", "any"));
        assert!(allows(&rules, rbac, "clusterroles", "escalate"));
    }
}
