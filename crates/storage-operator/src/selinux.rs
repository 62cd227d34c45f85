//! OpenShift's `SELinuxMountGAReadinessController`: before an upgrade to the release where
//! SELinux mount labelling is on for every volume (SELinuxMount GA), pods that share a volume
//! with different SELinux contexts would break. kube-controller-manager's SELinux warning
//! controller finds them, and a component of OpenShift records the verdict in ConfigMap
//! `openshift-config/selinux-conflicts` (`conflictsPresent: "True"`). While it says so, the
//! cluster is not Upgradeable. Only with the `SELinuxMountGAReadiness` feature gate, as in
//! OpenShift. Pure: the conditions follow from the gate and the ConfigMap.

use api::operator_v1::{ConditionStatus, OperatorCondition};
use k8s_openapi::api::core::v1::ConfigMap;
use opkit::conditions::condition;

/// The controller's name, the prefix of its conditions.
pub const CONTROLLER: &str = "SELinuxMountGAReadinessController";
/// The feature gate that turns it on.
pub const FEATURE_GATE: &str = "SELinuxMountGAReadiness";
/// The ConfigMap it reads, in [`NAMESPACE`].
pub const CONFIG_MAP: &str = "selinux-conflicts";
/// Where [`CONFIG_MAP`] lives.
pub const NAMESPACE: &str = "openshift-config";
/// Its key: `"True"` when conflicting workloads were found.
pub const KEY: &str = "conflictsPresent";
/// Upgradeable's reason while conflicts are present.
pub const REASON: &str = "SELinuxMountIncompatibleWorkloads";
/// Where the remediation is described (OpenShift's link).
pub const REMEDIATION: &str = "https://github.com/openshift/enhancements/blob/master/enhancements/storage/selinuxmount-ga-block-upgrade.md";

/// Whether `config_map` says conflicting workloads are present (a missing key counts as none).
fn conflicts_present(config_map: Option<&ConfigMap>) -> bool {
    config_map
        .and_then(|cm| cm.data.as_ref())
        .and_then(|data| data.get(KEY))
        .is_some_and(|value| value == "True")
}

/// The controller's conditions: none without the gate; else Upgradeable (False while
/// conflicts are present, saying what to do) and its Degraded (never, it cannot fail).
pub fn conditions(gate_enabled: bool, config_map: Option<&ConfigMap>) -> Vec<OperatorCondition> {
    if !gate_enabled {
        return Vec::new();
    }
    let upgradeable = if conflicts_present(config_map) {
        condition(
            format!("{CONTROLLER}Upgradeable"),
            ConditionStatus::False,
            REASON,
            format!(
                "Workloads incompatible with SELinuxMount GA were detected and could break after upgrade to the next release. See metric selinux_warning_controller_selinux_volume_conflict to list all affected pods. See {REMEDIATION} for remediation."
            ),
        )
    } else {
        condition(
            format!("{CONTROLLER}Upgradeable"),
            ConditionStatus::True,
            "",
            "",
        )
    };
    vec![
        upgradeable,
        condition(
            format!("{CONTROLLER}Degraded"),
            ConditionStatus::False,
            "AsExpected",
            "",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_map(value: Option<&str>) -> ConfigMap {
        ConfigMap {
            data: value.map(|v| [(KEY.to_owned(), v.to_owned())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn conflicts_block_the_upgrade_only_with_the_gate() {
        let upgradeable = |gate: bool, cm: Option<&ConfigMap>| {
            conditions(gate, cm)
                .into_iter()
                .find(|c| c.type_ == "SELinuxMountGAReadinessControllerUpgradeable")
                .map(|c| (c.status, c.reason.unwrap_or_default()))
        };
        let present = config_map(Some("True"));
        assert_eq!(
            upgradeable(false, Some(&present)),
            None,
            "no gate, no condition"
        );
        assert_eq!(
            upgradeable(true, Some(&present)),
            Some((ConditionStatus::False, REASON.to_owned()))
        );
        for none in [
            None,
            Some(config_map(None)),
            Some(config_map(Some("False"))),
            Some(config_map(Some("true"))),
        ] {
            assert_eq!(
                upgradeable(true, none.as_ref()),
                Some((ConditionStatus::True, String::new())),
                "{none:?}"
            );
        }
        let message = conditions(true, Some(&present))[0].message.clone().unwrap();
        assert!(message.contains(REMEDIATION), "{message}");
    }
}
