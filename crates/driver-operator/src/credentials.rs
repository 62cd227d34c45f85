//! The CredentialsRequest controllers' decisions (library-go's `credentialsrequestcontroller`):
//! whether each of the driver's CredentialsRequests is applied at all, and the
//! `<prefix>CredentialsRequestController{Available,Progressing}` conditions (the node
//! plugin's: `<prefix>NodeCredentialsRequestController...`, as csi-operator names them) from
//! cloud-credential-operator's answer (`status.provisioned`).
//!
//! In cloud-credential-operator's `Manual` mode nobody provisions a CredentialsRequest, so it is
//! applied only with short-lived token settings in the operator's environment: the variables
//! its `credentials.openshift.io/role-arns-vars` annotation names (e.g. `NODE_ROLEARN`), else
//! AWS STS `ROLEARN`, else GCP Workload Identity `POOL_ID`, `PROVIDER_ID`,
//! `SERVICE_ACCOUNT_EMAIL`, `PROJECT_NUMBER`; otherwise the controller reports
//! `CredentialsDisabled` and the admin provides the Secret. Apply errors degrade the static
//! resources controller, which applies them.

use std::collections::BTreeMap;

use api::operator_v1::{ConditionStatus, OperatorCondition};
use opkit::conditions::condition;
use serde_json::Value;

use csi_kit::def::DriverDef;
use csi_kit::status::REASON_AS_EXPECTED;

/// The controller's name, e.g. `AWSEFSCredentialsRequestController`.
pub fn controller(def: &DriverDef) -> String {
    format!("{}CredentialsRequestController", def.condition_prefix)
}

/// The node credentials' controller's name, e.g. `AWSEFSNodeCredentialsRequestController`.
pub fn node_controller(def: &DriverDef) -> String {
    format!("{}NodeCredentialsRequestController", def.condition_prefix)
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

/// Whether to apply a CredentialsRequest, given cloud-credential-operator's mode and the
/// request's `role-arns-vars` annotation (see
/// [`csi_kit::credentials::ROLE_ARN_VARS_ANNOTATION`]), if it has one.
pub fn should_apply(
    credentials_mode: Option<&str>,
    env: &BTreeMap<String, String>,
    role_arn_vars: Option<&str>,
) -> bool {
    if credentials_mode != Some("Manual") {
        return true;
    }
    let set = |name: &str| env.get(name).is_some_and(|v| !v.is_empty());
    if let Some(vars) = role_arn_vars.filter(|v| !v.trim().is_empty()) {
        return vars.split(',').map(str::trim).all(set);
    }
    TOKEN_SETTINGS.iter().any(|set| {
        set.iter()
            .all(|name| env.get(*name).is_some_and(|v| !v.is_empty()))
    })
}

/// The controller's conditions: `applied` says whether the CredentialsRequest is applied,
/// `observed` is its cached copy (with cloud-credential-operator's status).
pub fn conditions(name: &str, applied: bool, observed: Option<&Value>) -> Vec<OperatorCondition> {
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
        assert!(should_apply(None, &none, None));
        assert!(should_apply(Some(""), &none, None));
        assert!(should_apply(Some("Mint"), &none, None));
        assert!(!should_apply(Some("Manual"), &none, None));
        let sts = BTreeMap::from([("ROLEARN".to_owned(), "arn:aws:iam::1:role/x".to_owned())]);
        assert!(should_apply(Some("Manual"), &sts, None));
        let partial_wif = BTreeMap::from([("POOL_ID".to_owned(), "p".to_owned())]);
        assert!(!should_apply(Some("Manual"), &partial_wif, None));
        let empty = BTreeMap::from([("ROLEARN".to_owned(), String::new())]);
        assert!(!should_apply(Some("Manual"), &empty, None));
    }

    #[test]
    fn the_role_arn_annotation_names_the_variables_that_count() {
        let controller_role =
            BTreeMap::from([("ROLEARN".to_owned(), "arn:aws:iam::1:role/c".to_owned())]);
        // The node's request needs its own role, whatever ROLEARN says.
        assert!(!should_apply(
            Some("Manual"),
            &controller_role,
            Some("NODE_ROLEARN")
        ));
        let both = BTreeMap::from([
            ("ROLEARN".to_owned(), "arn:aws:iam::1:role/c".to_owned()),
            (
                "NODE_ROLEARN".to_owned(),
                "arn:aws:iam::1:role/n".to_owned(),
            ),
        ]);
        assert!(should_apply(Some("Manual"), &both, Some("NODE_ROLEARN")));
        assert!(!should_apply(
            Some("Manual"),
            &both,
            Some("NODE_ROLEARN, OTHER")
        ));
        // Outside Manual mode cloud-credential-operator provisions it anyway.
        assert!(should_apply(
            Some("Mint"),
            &BTreeMap::new(),
            Some("NODE_ROLEARN")
        ));
    }
}
