//! OpenShift's `DefaultStorageClassController`, as its conditions on `Storage/cluster` say
//! today: the default StorageClass of every platform OpenShift's storage operator knows is the
//! CSI driver's (its driver operator creates it), so the controller creates none and says so;
//! on any other platform there is no default StorageClass at all, and it says it is Disabled.
//! Pure: the conditions follow from the platform as observed and the previous conditions.
//!
//! The platforms are OpenShift's list (AWS, GCP, VSphere, Azure, IBMCloud, OpenStack), not the
//! drivers of our catalogue: PowerVS, for one, gets a CSI driver but OpenShift reports no
//! default StorageClass controller there, and tooling reads these conditions as OpenShift
//! writes them.

use api::config_v1::PlatformType;
use api::operator_v1::{ConditionStatus, OperatorCondition};
use opkit::conditions::condition;

use crate::platform::ClusterPlatform;

/// The controller's name, the prefix of its condition types.
pub const CONTROLLER: &str = "DefaultStorageClassController";
/// Available's message where the CSI driver provides the default StorageClass.
pub const PROVIDED_BY_CSI: &str =
    "StorageClass provided by supplied CSI Driver instead of the cluster-storage-operator";
/// Available's message where there is no default StorageClass.
pub const NO_DEFAULT: &str = "No default StorageClass for this platform";
/// Disabled's reason on such a platform.
pub const REASON_UNSUPPORTED_PLATFORM: &str = "UnsupportedPlatform";

/// Whether OpenShift's CSI driver for `platform` provides its default StorageClass.
fn provided_by_csi(platform: &PlatformType) -> bool {
    matches!(
        platform.as_str(),
        "AWS" | "GCP" | "VSphere" | "Azure" | "IBMCloud" | "OpenStack"
    )
}

/// The controller's conditions for `platform`; `infrastructure_missing` when the cluster serves
/// the Infrastructure API but `Infrastructure/cluster` does not exist (OpenShift's sync fails
/// then), and `previous` Storage's current conditions (a failed sync keeps Available True if it
/// was, as OpenShift does, so that an API hiccup does not flap it). An Infrastructure without a
/// platform type is an unsupported platform, as in OpenShift.
pub fn conditions(
    platform: &ClusterPlatform,
    infrastructure_missing: bool,
    previous: &[OperatorCondition],
) -> Vec<OperatorCondition> {
    let type_ = |suffix: &str| format!("{CONTROLLER}{suffix}");
    let degraded_false = condition(type_("Degraded"), ConditionStatus::False, "AsExpected", "");
    let progressing_false = condition(type_("Progressing"), ConditionStatus::False, "", "");
    if infrastructure_missing {
        let message = platform
            .problem
            .clone()
            .unwrap_or_else(|| "Infrastructure/cluster does not exist".into());
        let was_available = previous
            .iter()
            .any(|c| c.type_ == type_("Available") && c.status == ConditionStatus::True);
        let available = if was_available {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        return vec![
            condition(type_("Available"), available, "SyncError", message.clone()),
            condition(
                type_("Progressing"),
                ConditionStatus::True,
                "SyncError",
                message.clone(),
            ),
            condition(
                type_("Degraded"),
                ConditionStatus::True,
                "SyncError",
                message,
            ),
        ];
    }
    if provided_by_csi(&platform.platform) {
        return vec![
            condition(
                type_("Available"),
                ConditionStatus::True,
                "",
                PROVIDED_BY_CSI,
            ),
            progressing_false,
            degraded_false,
        ];
    }
    vec![
        condition(
            type_("Disabled"),
            ConditionStatus::True,
            REASON_UNSUPPORTED_PLATFORM,
            "unsupported platform",
        ),
        condition(type_("Available"), ConditionStatus::True, "", NO_DEFAULT),
        progressing_false,
        condition(type_("Upgradeable"), ConditionStatus::True, "", ""),
        degraded_false,
    ]
}

#[cfg(test)]
mod tests {
    use api::config_v1::TopologyMode;

    use super::*;
    use crate::platform::Source;

    fn on(platform: &str, source: Source, problem: Option<&str>) -> ClusterPlatform {
        ClusterPlatform {
            platform: PlatformType::from(platform),
            control_plane_topology: TopologyMode::HighlyAvailable,
            azure_stack_hub: false,
            infrastructure_name: None,
            source,
            problem: problem.map(str::to_owned),
        }
    }

    fn summary(conditions: &[OperatorCondition]) -> Vec<(String, String, String, String)> {
        conditions
            .iter()
            .map(|c| {
                (
                    c.type_.trim_start_matches(CONTROLLER).to_owned(),
                    c.status.to_string(),
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn row(t: &str, s: &str, r: &str, m: &str) -> (String, String, String, String) {
        (t.into(), s.into(), r.into(), m.into())
    }

    #[test]
    fn openshifts_csi_platforms_get_their_class_from_the_driver_the_rest_none() {
        for platform in ["AWS", "GCP", "VSphere", "Azure", "IBMCloud", "OpenStack"] {
            assert_eq!(
                summary(&conditions(
                    &on(platform, Source::Infrastructure, None),
                    false,
                    &[]
                )),
                [
                    row("Available", "True", "", PROVIDED_BY_CSI),
                    row("Progressing", "False", "", ""),
                    row("Degraded", "False", "AsExpected", ""),
                ],
                "{platform}"
            );
        }
        // "": an Infrastructure without status.platformStatus.
        for platform in ["None", "BareMetal", "PowerVS", "Nutanix", ""] {
            assert_eq!(
                summary(&conditions(
                    &on(platform, Source::Infrastructure, None),
                    false,
                    &[]
                )),
                [
                    row(
                        "Disabled",
                        "True",
                        "UnsupportedPlatform",
                        "unsupported platform"
                    ),
                    row("Available", "True", "", NO_DEFAULT),
                    row("Progressing", "False", "", ""),
                    row("Upgradeable", "True", "", ""),
                    row("Degraded", "False", "AsExpected", ""),
                ],
                "{platform:?}"
            );
        }
        // Plain Kubernetes: the platform the nodes say, by the same list.
        let nodes = Source::Nodes {
            agreeing: 3,
            total: 3,
        };
        assert_eq!(
            conditions(&on("GCP", nodes.clone(), None), false, &[])[0]
                .message
                .as_deref(),
            Some(PROVIDED_BY_CSI)
        );
        assert_eq!(
            conditions(&on("None", nodes, None), false, &[])[0].type_,
            "DefaultStorageClassControllerDisabled"
        );
    }

    #[test]
    fn without_infrastructure_it_is_a_sync_error_that_keeps_available() {
        let missing = on(
            "",
            Source::Infrastructure,
            Some("Infrastructure/cluster does not exist yet"),
        );
        let first = conditions(&missing, true, &[]);
        assert_eq!(
            summary(&first),
            [
                row(
                    "Available",
                    "False",
                    "SyncError",
                    "Infrastructure/cluster does not exist yet"
                ),
                row(
                    "Progressing",
                    "True",
                    "SyncError",
                    "Infrastructure/cluster does not exist yet"
                ),
                row(
                    "Degraded",
                    "True",
                    "SyncError",
                    "Infrastructure/cluster does not exist yet"
                ),
            ]
        );
        let was = conditions(&on("GCP", Source::Infrastructure, None), false, &[]);
        assert_eq!(
            conditions(&missing, true, &was)[0].status,
            ConditionStatus::True,
            "Available stays True on an error"
        );
    }
}
