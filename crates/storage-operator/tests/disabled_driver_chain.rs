#![allow(clippy::unwrap_used)]
//! A driver that cannot run here says Disabled, and cluster-storage-operator turns that into
//! Available with reason `DriverDisabled` (for drivers the registry allows to disable
//! themselves): the driver operator's planned status fed to the roll-up, no cluster needed.
//! The same conditions on a driver that may not disable itself do not count.

use std::collections::BTreeMap;

use api::operator_v1::{ConditionStatus, OperatorStatus};
use driver_operator::observe::{Apis, Observed};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use storage_operator::driver_status::{REASON_DRIVER_DISABLED, storage_conditions};
use storage_operator::registry::find;

fn observed(name: &str, platform: &str) -> Observed {
    Observed {
        apis: Apis {
            infrastructure: true,
            proxy: false,
            api_server: false,
            cloud_credential: false,
        },
        cluster_csi_driver: Some(
            serde_json::from_value(json!({
                "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": name, "generation": 1},
                "spec": {"managementState": "Managed"}
            }))
            .unwrap(),
        ),
        cluster: driver_operator::observe::ObservedCluster {
            infrastructure: Some(
                serde_json::from_value(json!({
                    "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
                    "metadata": {"name": "cluster"}, "spec": {},
                    "status": {"infrastructureName": "demo", "controlPlaneTopology": "HighlyAvailable",
                               "platformStatus": {"type": platform}}
                }))
                .unwrap(),
            ),
            ..Default::default()
        },
        ..Observed::default()
    }
}

fn planned_status(short_name: &str, observed: &Observed) -> OperatorStatus {
    let def = drivers::by_name(short_name).unwrap();
    let now = Time(Timestamp::from_second(1_800_000_000).unwrap());
    let plan = driver_operator::plan::plan(&def, &BTreeMap::new(), observed, &now);
    assert!(plan.steps.is_empty(), "a disabled driver applies nothing");
    OperatorStatus {
        conditions: plan
            .status
            .into_iter()
            .flat_map(|p| p.part.conditions)
            .collect(),
        ..OperatorStatus::default()
    }
}

#[test]
fn vsphere_without_credentials_is_available_as_disabled() {
    let status = planned_status("vsphere", &observed("csi.vsphere.vmware.com", "VSphere"));
    let entry = find("vsphere").unwrap();
    assert!(entry.allow_disabled);
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let conditions = storage_conditions(&entry, Some(&status), now);
    let available = &conditions[0];
    assert_eq!(available.type_, "VSphereCSIDriverOperatorCRAvailable");
    assert_eq!(available.status, ConditionStatus::True);
    assert_eq!(available.reason.as_deref(), Some(REASON_DRIVER_DISABLED));
    assert!(
        available
            .message
            .as_deref()
            .unwrap()
            .contains("vmware-vsphere-cloud-credentials"),
        "{available:?}"
    );
    for c in &conditions[1..3] {
        assert_eq!(c.status, ConditionStatus::False, "{c:?}");
    }

    // A driver the registry does not let disable itself is not Available for saying so.
    let mut strict = entry.clone();
    strict.allow_disabled = false;
    let conditions = storage_conditions(&strict, Some(&status), now);
    assert_ne!(
        conditions[0].reason.as_deref(),
        Some(REASON_DRIVER_DISABLED)
    );
}

#[test]
fn manila_without_share_types_is_available_as_disabled_and_enabled_once_they_exist() {
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let entry = find("openstack-manila").unwrap();
    assert!(entry.allow_disabled);
    for answer in [
        Ok(vec![]),
        Err(csi_kit::HookError::cloud(
            "cannot list the Manila share types: 503",
        )),
    ] {
        let mut observed = observed("manila.csi.openstack.org", "OpenStack");
        observed.probe = Some(answer);
        let status = planned_status("openstack-manila", &observed);
        let conditions = storage_conditions(&entry, Some(&status), now);
        assert_eq!(conditions[0].type_, "ManilaCSIDriverOperatorCRAvailable");
        assert_eq!(conditions[0].status, ConditionStatus::True);
        assert_eq!(
            conditions[0].reason.as_deref(),
            Some(REASON_DRIVER_DISABLED)
        );
    }

    // Share types appear: the driver plans its operands and Disabled turns False.
    let def = drivers::by_name("openstack-manila").unwrap();
    let mut observed = observed("manila.csi.openstack.org", "OpenStack");
    observed.probe = Some(Ok(vec!["default".to_owned()]));
    let plan = driver_operator::plan::plan(
        &def,
        &BTreeMap::new(),
        &observed,
        &Time(Timestamp::from_second(1_800_000_000).unwrap()),
    );
    assert!(
        plan.steps
            .iter()
            .any(|s| s.operand.key() == "StorageClass/csi-manila-default")
    );
    let disabled = plan
        .status
        .iter()
        .flat_map(|p| &p.part.conditions)
        .find(|c| c.type_ == "ManilaDriverControllerServiceControllerDisabled")
        .unwrap();
    assert_eq!(disabled.status, ConditionStatus::False);
}
