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
}
