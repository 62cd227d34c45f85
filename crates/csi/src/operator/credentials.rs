//! The CredentialsRequest controller's decisions (library-go's `credentialsrequestcontroller`):
//! whether the driver's CredentialsRequest is applied at all, and the
//! `<prefix>DriverCredentialsRequestController{Available,Progressing}` conditions from
//! cloud-credential-operator's answer (`status.provisioned`).
//!
//! In cloud-credential-operator's `Manual` mode nobody provisions a CredentialsRequest, so it is
//! applied only with short-lived token settings in the operator's environment (AWS STS
//! `ROLEARN`; GCP Workload Identity `POOL_ID`, `PROVIDER_ID`, `SERVICE_ACCOUNT_EMAIL`,
//! `PROJECT_NUMBER`); otherwise the controller reports `CredentialsDisabled` and the admin
//! provides the Secret. Its apply errors degrade the static resources controller, which applies
//! it.

use std::collections::BTreeMap;

use api::operator_v1::{ConditionStatus, OperatorCondition};
use opkit::conditions::condition;
use serde_json::Value;

use crate::def::DriverDef;
use crate::status::REASON_AS_EXPECTED;

/// The controller's name, e.g. `GCPPDDriverCredentialsRequestController`.
pub fn controller(def: &DriverDef) -> String {
    format!("{}DriverCredentialsRequestController", def.condition_prefix)
}

/// The reason when the CredentialsRequest is not applied in Manual mode.
pub const REASON_DISABLED: &str = "CredentialsDisabled";
/// The reason while cloud-credential-operator has not provisioned the Secret.
pub const REASON_NOT_PROVISIONED: &str = "CredentialsNotProvisionedYet";

/// The environment variables that give short-lived token settings, any one set of which makes a
/// Manual-mode cluster apply the CredentialsRequest.
const TOKEN_SETTINGS: [&[&str]; 2] = [
    &["ROLEARN"],
    &[
        "POOL_ID",
        "PROVIDER_ID",
        "SERVICE_ACCOUNT_EMAIL",
        "PROJECT_NUMBER",
    ],
];

/// Whether to apply the CredentialsRequest, given cloud-credential-operator's mode.
pub fn should_apply(credentials_mode: Option<&str>, env: &BTreeMap<String, String>) -> bool {
    if credentials_mode != Some("Manual") {
        return true;
    }
    TOKEN_SETTINGS.iter().any(|set| {
        set.iter()
            .all(|name| env.get(*name).is_some_and(|v| !v.is_empty()))
    })
}

/// The controller's conditions: `applied` says whether the CredentialsRequest is applied,
/// `observed` is its cached copy (with cloud-credential-operator's status).
pub fn conditions(
    def: &DriverDef,
    applied: bool,
    observed: Option<&Value>,
) -> Vec<OperatorCondition> {
    let name = controller(def);
    let available = format!("{name}Available");
    let progressing = format!("{name}Progressing");
    if !applied {
        return vec![
            condition(
                &available,
                ConditionStatus::True,
                REASON_DISABLED,
                "No role for short time token provided",
            ),
            condition(&progressing, ConditionStatus::False, REASON_AS_EXPECTED, ""),
        ];
    }
    let provisioned = observed
        .and_then(|o| o.get("status"))
        .and_then(|s| s.get("provisioned"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if provisioned {
        vec![
            condition(&available, ConditionStatus::True, REASON_AS_EXPECTED, ""),
            condition(&progressing, ConditionStatus::False, REASON_AS_EXPECTED, ""),
        ]
    } else {
        vec![
            condition(
                &available,
                ConditionStatus::False,
                REASON_NOT_PROVISIONED,
                "Credentials not yet provisioned by cloud-credential-operator",
            ),
            condition(
                &progressing,
                ConditionStatus::True,
                REASON_NOT_PROVISIONED,
                "Waiting for cloud-credential-operator to provision the credentials",
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_mode_needs_token_settings() {
        let none = BTreeMap::new();
        assert!(should_apply(None, &none));
        assert!(should_apply(Some(""), &none));
        assert!(should_apply(Some("Mint"), &none));
        assert!(!should_apply(Some("Manual"), &none));
        let sts = BTreeMap::from([("ROLEARN".to_owned(), "arn:aws:iam::1:role/x".to_owned())]);
        assert!(should_apply(Some("Manual"), &sts));
        let partial_wif = BTreeMap::from([("POOL_ID".to_owned(), "p".to_owned())]);
        assert!(!should_apply(Some("Manual"), &partial_wif));
        let empty = BTreeMap::from([("ROLEARN".to_owned(), String::new())]);
        assert!(!should_apply(Some("Manual"), &empty));
    }
}
