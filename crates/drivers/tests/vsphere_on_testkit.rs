//! The vSphere driver operator on testkit, with its real vCenter client against a fake vCenter
//! (tests/fake_vcenter) over HTTPS:
//! - without the vCenter credentials it refuses (Disabled with the reason, nothing applied, no
//!   pods to crash-loop), also while the Secret lacks the password; once both keys exist it
//!   converges, writes csi-vsphere.conf with them into its Secret, enforces topology from the
//!   cloud config, makes the storage policy in vCenter (tag category, tag on the datastore,
//!   tag-based policy) and the StorageClass naming it, and then writes nothing, neither to the
//!   API server nor to vCenter; a new password rolls the controller pods once, and one vCenter
//!   refuses is reported by `VMwareVSphereDriverStorageClassControllerDegraded` while the class
//!   stays;
//! - a vCenter user that may not create storage policies: the class waits, Degraded says why,
//!   and once the privilege is granted the next try makes the policy and the class.

#![allow(clippy::unwrap_used)]

mod driver_testkit;
mod fake_vcenter;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use driver_testkit::*;
use fake_vcenter::{FakeVCenter, Inventory};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use serde_json::json;

const DRIVER: &str = "csi.vsphere.vmware.com";
const PREFIX: &str = "VMwareVSphere";
const WORKLOADS: &str = "vmware-vsphere-csi-driver";
const DISABLED: &str = "VMwareVSphereDriverControllerServiceControllerDisabled";
const POLICY_DEGRADED: &str = "VMwareVSphereDriverStorageClassControllerDegraded";
/// The fake vCenter's address, as the cloud config names it.
const SERVER: &str = "127.0.0.1";
/// The policy of the cluster (`Infrastructure.status.infrastructureName` is demo-x7k2p).
const POLICY: &str = "openshift-storage-policy-demo-x7k2p";

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A vCenter with datacenter dc1 and its datastores ds1 and ds2.
async fn vcenter() -> FakeVCenter {
    FakeVCenter::start_https(Inventory {
        datacenters: vec![("dc1".into(), vec!["ds1".into(), "ds2".into()])],
    })
    .await
}

/// The installer's cloud config for `vcenter`: self-signed (insecure-flag), topology on, the
/// default datastore ds1 (no failure domains in the Infrastructure).
fn cloud_config(vcenter: &FakeVCenter) -> String {
    format!(
        "[Global]\ninsecure-flag = 1\nport = {}\n[Workspace]\nserver = {SERVER}\ndatacenter = dc1\ndefault-datastore = ds1\n[VirtualCenter \"{SERVER}\"]\ndatacenters = dc1\n[Labels]\nregion = openshift-region\nzone = openshift-zone\n",
        vcenter.port()
    )
}

#[tokio::test]
async fn refuses_without_credentials_then_converges_once_they_exist() {
    let vcenter = vcenter().await;
    let (cluster, admin) = openshift(json!({"type": "VSphere"})).await;
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({ "config": cloud_config(&vcenter) }),
    )
    .await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    // The driver operator as it runs: its probe and tasks, with the real vCenter client.
    let def = drivers::by_name("vsphere").unwrap();
    let running = start_with_extras(&cluster, def.clone(), move |client| {
        drivers::extras(&def, client, false)
    });

    let (reason, message) = condition_becomes(&admin, DRIVER, DISABLED, "True").await;
    assert_eq!(reason, "PreConditionNotSatisfied");
    assert!(
        message.contains("vmware-vsphere-cloud-credentials"),
        "{message}"
    );
    quiet(&cluster, &running).await;
    let deployments = Api::<Deployment>::namespaced(admin.clone(), NS);
    assert!(
        deployments
            .get_opt(&format!("{WORKLOADS}-controller"))
            .await
            .unwrap()
            .is_none(),
        "a refused driver starts no pods"
    );
    assert!(
        Api::<DaemonSet>::namespaced(admin.clone(), NS)
            .get_opt(&format!("{WORKLOADS}-node"))
            .await
            .unwrap()
            .is_none()
    );
    for degraded in [
        "VMwareVSphereDriverControllerServiceControllerDegraded",
        "VMwareVSphereDriverStaticResourcesControllerDegraded",
    ] {
        assert_eq!(
            condition(&admin, DRIVER, degraded).await.unwrap().0,
            "False"
        );
    }

    // A Secret without the password: still refused, and the message names the key.
    create_secret(
        &admin,
        "vmware-vsphere-cloud-credentials",
        &format!("{SERVER}.username"),
        &b64(fake_vcenter::USER),
    )
    .await;
    eventually("the missing password named", async || {
        let (status, _, message) = condition(&admin, DRIVER, DISABLED).await?;
        (status == "True" && message.contains(&format!("has no key {SERVER}.password")))
            .then_some(())
    })
    .await;

    // cloud-credential-operator completes the Secret: the driver starts.
    set_password(&admin, &b64(fake_vcenter::PASSWORD)).await;
    condition_becomes(&admin, DRIVER, DISABLED, "False").await;
    healthy(&admin, DRIVER, PREFIX).await;
    let deployment = deployments
        .get(&format!("{WORKLOADS}-controller"))
        .await
        .unwrap();
    let containers = deployment.spec.unwrap().template.spec.unwrap().containers;
    assert!(containers.iter().any(|c| c.name == "vsphere-syncer"));
    let provisioner = containers
        .iter()
        .find(|c| c.name == "csi-provisioner")
        .unwrap();
    assert!(
        provisioner
            .args
            .as_ref()
            .unwrap()
            .contains(&"--strict-topology".to_owned())
    );
    let conf = generated_config(&admin).await;
    assert!(conf.contains("topology-categories = openshift-region,openshift-zone"));
    assert!(
        conf.contains(&format!(
            "user = \"{}\"\npassword = {}",
            fake_vcenter::USER,
            drivers::vsphere::quoted(fake_vcenter::PASSWORD)
        )),
        "{conf}"
    );
    // The storage policy, made in vCenter as OpenShift's operator makes it, and the class
    // naming it.
    let class = eventually("thin-csi", async || {
        Api::<StorageClass>::all(admin.clone())
            .get_opt("thin-csi")
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        class.metadata.annotations.unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    assert_eq!(class.parameters.unwrap()["StoragePolicyName"], POLICY);
    assert_eq!(
        condition(&admin, DRIVER, POLICY_DEGRADED).await.unwrap().0,
        "False"
    );
    {
        let state = vcenter.state();
        let category = state
            .categories
            .iter()
            .find(|c| c.name == "openshift-demo-x7k2p")
            .expect("the category");
        assert_eq!(category.cardinality, "SINGLE");
        assert!(
            category
                .associable_types
                .contains(&"urn:vim25:Datastore".to_owned())
        );
        let tag = state
            .tags
            .iter()
            .find(|t| t.name == "demo-x7k2p")
            .expect("the tag");
        assert_eq!(tag.category_id, category.id);
        let tagged: Vec<&String> = state
            .attached
            .iter()
            .filter(|(t, kind, _)| *t == tag.id && kind == "Datastore")
            .map(|(_, _, id)| id)
            .collect();
        assert_eq!(tagged.len(), 1, "only the default datastore: {tagged:?}");
        let profile = state
            .profiles
            .iter()
            .find(|p| p.name == POLICY)
            .expect("the policy");
        assert_eq!(
            (profile.category.as_str(), profile.resource_type.as_str()),
            ("REQUIREMENT", "STORAGE")
        );
        assert_eq!(
            profile.rules,
            [(
                "http://www.vmware.com/storage/tag".to_owned(),
                "openshift-demo-x7k2p".to_owned(),
                "com.vmware.storage.tag.openshift-demo-x7k2p.property".to_owned(),
                vec!["demo-x7k2p".to_owned()],
            )]
        );
    }

    // Idle: a second pass writes nothing, to the API server or to vCenter.
    quiet(&cluster, &running).await;
    cluster.clear_requests();
    vcenter.clear_calls();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.count_writes(AGENT), 0);
    assert!(vcenter.writes().is_empty(), "{:?}", vcenter.writes());

    // A new password: the config Secret follows, and its hash rolls the controller pods.
    let template = |d: Deployment| d.spec.unwrap().template.metadata.unwrap().annotations;
    let before = template(
        deployments
            .get(&format!("{WORKLOADS}-controller"))
            .await
            .unwrap(),
    );
    set_password(&admin, &b64("n3w")).await;
    eventually("the new password in the config", async || {
        generated_config(&admin)
            .await
            .contains("password = \"n3w\"")
            .then_some(())
    })
    .await;
    // vCenter refuses it: the policy check says so, and the class stays as it is.
    let (status, reason, message) = eventually("the refusal reported", async || {
        condition(&admin, DRIVER, POLICY_DEGRADED)
            .await
            .filter(|(status, _, _)| status == "True")
    })
    .await;
    assert_eq!(status, "True");
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains(&format!(
            "vCenter {SERVER}:{} refused user {}",
            vcenter.port(),
            fake_vcenter::USER
        )),
        "{message}"
    );
    assert!(!message.contains("n3w"), "no password in status: {message}");
    assert!(
        Api::<StorageClass>::all(admin.clone())
            .get_opt("thin-csi")
            .await
            .unwrap()
            .is_some()
    );
    eventually("the controller pods rolled", async || {
        let now = template(
            deployments
                .get(&format!("{WORKLOADS}-controller"))
                .await
                .ok()?,
        );
        (now != before).then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_user_who_may_not_make_policies_is_told_and_the_class_waits_for_the_privilege() {
    let vcenter = vcenter().await;
    vcenter.state().deny.push("PbmCreate".to_owned());
    let (cluster, admin) = openshift(json!({"type": "VSphere"})).await;
    put_config_map(
        &admin,
        "openshift-config",
        "cloud-provider-config",
        json!({ "config": cloud_config(&vcenter) }),
    )
    .await;
    create_secret(
        &admin,
        "vmware-vsphere-cloud-credentials",
        &format!("{SERVER}.username"),
        &b64(fake_vcenter::USER),
    )
    .await;
    set_password(&admin, &b64(fake_vcenter::PASSWORD)).await;
    create_cluster_csi_driver(&admin, DRIVER).await;
    // The operator's task, retrying after a tenth of a second rather than 30.
    let timing = drivers::vsphere_policy::Timing {
        first_recheck: Duration::from_secs(3600),
        max_recheck: Duration::from_secs(3600),
        first_retry: Duration::from_millis(100),
        max_retry: Duration::from_millis(100),
    };
    let running = start_with_extras(&cluster, drivers::by_name("vsphere").unwrap(), move |_| {
        driver_operator::Extras {
            probe: None,
            tasks: vec![drivers::vsphere_policy::task_with(
                Arc::new(drivers::vsphere_policy::VCenterPolicyMaker),
                timing,
            )],
        }
    });

    let (reason, message) = condition_becomes(&admin, DRIVER, POLICY_DEGRADED, "True").await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains(&format!("the storage policy {POLICY} cannot be made"))
            && message.contains("creating storage policy")
            && message.contains("NoPermission"),
        "{message}"
    );
    // The driver runs meanwhile; only its class waits (its parameters could not change later).
    healthy(&admin, DRIVER, PREFIX).await;
    let classes = Api::<StorageClass>::all(admin.clone());
    assert!(classes.get_opt("thin-csi").await.unwrap().is_none());
    // The tags are in place already: a retry does not make them again.
    assert_eq!(vcenter.state().tags.len(), 1);

    // The admin grants the privilege: the next try makes the policy, then the class.
    vcenter.state().deny.clear();
    let class = eventually("thin-csi", async || {
        classes.get_opt("thin-csi").await.unwrap()
    })
    .await;
    assert_eq!(class.parameters.unwrap()["StoragePolicyName"], POLICY);
    condition_becomes(&admin, DRIVER, POLICY_DEGRADED, "False").await;
    {
        let state = vcenter.state();
        assert_eq!(state.tags.len(), 1);
        assert_eq!(
            state.profiles.iter().filter(|p| p.name == POLICY).count(),
            1
        );
    }
    running.stop().await;
}

/// Sets the password (base64) in the credentials Secret, as cloud-credential-operator would.
async fn set_password(admin: &kube::Client, base64: &str) {
    Api::<Secret>::namespaced(admin.clone(), NS)
        .patch(
            "vmware-vsphere-cloud-credentials",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"data": {format!("{SERVER}.password"): base64}})),
        )
        .await
        .unwrap();
}

/// csi-vsphere.conf as the operator wrote it into its Secret.
async fn generated_config(admin: &kube::Client) -> String {
    let secret = Api::<Secret>::namespaced(admin.clone(), NS)
        .get("vsphere-csi-config-secret")
        .await
        .unwrap();
    String::from_utf8(secret.data.unwrap()["cloud.conf"].0.clone()).unwrap()
}
