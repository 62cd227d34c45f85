#![allow(clippy::unwrap_used)]
//! The vSphere hooks: csi-vsphere.conf from the cloud config and driverConfig.vSphere (table
//! tests, malformed input included), the vCenter credentials in it, the precondition that
//! refuses with a reason, the syncer, topology, the node's volume limit, and the Disabled status
//! it produces.

use std::collections::BTreeMap;

use api::operator_v1::{CSIDriverConfigSpec, CSIDriverType, VSphereCSIDriverConfigSpec};
use csi_kit::derived::ini;
use csi_kit::{DriverDef, Inputs, Operand, SecretData, Topology};
use drivers::vsphere::{generate_config, precondition};
use drivers::vsphere_cloud_config::vcenters;
use rstest::rstest;

const SOURCE: &str = "openshift-config/cloud-provider-config";
const BASIC: &str =
    "[Global]\ninsecure-flag = 1\n[VirtualCenter \"vc.example.com\"]\ndatacenters = dc1\n";

fn vsphere() -> DriverDef {
    drivers::by_name("vsphere").unwrap()
}

fn inputs(
    config: Option<&str>,
    secret: bool,
    config_spec: Option<VSphereCSIDriverConfigSpec>,
) -> Inputs {
    let def = vsphere();
    let mut inputs = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    inputs.cluster_id = Some("demo-x7k2p".to_owned());
    if let Some(config) = config {
        inputs.source_config_maps.insert(
            SOURCE.to_owned(),
            BTreeMap::from([("config".to_owned(), config.to_owned())]),
        );
    }
    if secret {
        inputs.secret_hashes.insert(
            "vmware-vsphere-cloud-credentials".to_owned(),
            "h1=".to_owned(),
        );
        inputs.credentials = credentials("admin@vsphere.local", "s3cret");
    }
    inputs.spec.driver_config = config_spec.map(|v| CSIDriverConfigSpec {
        driver_type: CSIDriverType::VSphere,
        aws: None,
        azure: None,
        gcp: None,
        ibmcloud: None,
        vsphere: Some(v),
        secrets_store: None,
    });
    inputs
}

fn credentials(user: &str, password: &str) -> SecretData {
    SecretData(BTreeMap::from([
        ("vc.example.com.username".to_owned(), user.to_owned()),
        ("vc.example.com.password".to_owned(), password.to_owned()),
    ]))
}

fn conf(
    config: &str,
    vsphere: Option<VSphereCSIDriverConfigSpec>,
) -> Result<ini::Sections, String> {
    let i = inputs(Some(config), true, vsphere);
    generate_config(&i, config, &BTreeMap::new()).map(|d| ini::parse(&d["cloud.conf"]).unwrap())
}

#[test]
fn the_catalogue_has_vsphere_as_the_registry_names_it() {
    let def = drivers::by_name("csi.vsphere.vmware.com").unwrap();
    assert_eq!(def.short_name, "vsphere");
    assert_eq!(def.condition_prefix, "VMwareVSphere");
    assert!(def.precondition.is_some());
    assert_eq!(
        def.extra_images["syncer"].env,
        "VMWARE_VSPHERE_SYNCER_IMAGE"
    );
    assert_eq!(def.storage_classes[0].name, "thin-csi");
    assert!(def.storage_classes[0].default);
}

#[rstest]
#[case::virtual_center_section(BASIC, "vc.example.com", "dc1", true, None)]
#[case::workspace_only(
    "[Workspace]\nserver = ws.example.com\ndatacenter = dcw\n",
    "ws.example.com",
    "dcw",
    false,
    None
)]
#[case::port_and_insecure_off(
    "[Global]\nport = 8443\n[VirtualCenter \"a\"]\ndatacenters = d\ninsecure-flag = false\n",
    "a",
    "d",
    false,
    Some("8443")
)]
fn the_vcenter_is_read_from_either_layout(
    #[case] config: &str,
    #[case] server: &str,
    #[case] datacenters: &str,
    #[case] insecure: bool,
    #[case] port: Option<&str>,
) {
    let [vc] = <[_; 1]>::try_from(vcenters(&ini::parse(config).unwrap()).unwrap()).unwrap();
    assert_eq!(vc.server, server);
    assert_eq!(vc.datacenters, datacenters);
    assert_eq!(vc.insecure, insecure);
    assert_eq!(vc.port.as_deref(), port);
}

#[rstest]
#[case::no_vcenter("[Global]\n", "names no vCenter")]
#[case::two_vcenters_without_topology(
    "[VirtualCenter \"a\"]\ndatacenters = d\n[VirtualCenter \"b\"]\ndatacenters = d\n",
    "it names 2 vCenters, and the driver serves several vCenters only with topology"
)]
#[case::no_datacenters("[VirtualCenter \"a\"]\n", "has no datacenters")]
#[case::bad_insecure(
    "[VirtualCenter \"a\"]\ndatacenters = d\ninsecure-flag = perhaps\n",
    "insecure-flag = \"perhaps\" is not a boolean"
)]
#[case::bad_port(
    "[VirtualCenter \"a\"]\ndatacenters = d\nport = https\n",
    "is not a port number"
)]
#[case::yaml(
    "global:\n  insecureFlag: true\nvcenter:\n  a:\n    datacenters: [d]\n",
    "YAML format"
)]
#[case::not_ini("just some words\n", "is neither a [section] nor key = value")]
#[case::unclosed("[VirtualCenter \"a\"\n", "no closing")]
fn malformed_cloud_configs_are_refused_with_the_reason(#[case] config: &str, #[case] want: &str) {
    let error = conf(config, None).unwrap_err();
    assert!(error.contains(want), "{error}");
}

#[test]
fn the_generated_config_has_the_cluster_and_defaults() {
    let c = conf(BASIC, None).unwrap();
    assert_eq!(c["Global"]["cluster-id"], "demo-x7k2p");
    assert_eq!(c["Global"]["cluster-distribution"], "OpenShift");
    assert_eq!(
        c["VirtualCenter \"vc.example.com\""]["insecure-flag"],
        "true"
    );
    assert_eq!(c["Snapshot"]["global-max-snapshots-per-block-volume"], "3");
    assert!(!c.contains_key("Labels"), "no categories, no topology");
    assert_eq!(
        c["VirtualCenter \"vc.example.com\""]["user"],
        "admin@vsphere.local"
    );
    assert_eq!(c["VirtualCenter \"vc.example.com\""]["password"], "s3cret");
}

#[rstest]
#[case::plain(
    "admin@vsphere.local",
    "s3cret",
    "\"admin@vsphere.local\"",
    "\"s3cret\""
)]
#[case::domain_user(r"CORP\admin", "pw", r#""CORP\\admin""#, "\"pw\"")]
#[case::quotes_and_backslashes("u", r#"a"b\c;d#e"#, "\"u\"", r#""a\"b\\c;d#e""#)]
fn the_credentials_are_written_as_the_driver_reads_them(
    #[case] user: &str,
    #[case] password: &str,
    #[case] want_user: &str,
    #[case] want_password: &str,
) {
    let mut i = inputs(Some(BASIC), true, None);
    i.credentials = credentials(user, password);
    let text = generate_config(&i, BASIC, &BTreeMap::new()).unwrap()["cloud.conf"].clone();
    assert!(text.contains(&format!("\nuser = {want_user}\n")), "{text}");
    assert!(
        text.contains(&format!("\npassword = {want_password}\n")),
        "{text}"
    );
}

/// Several vCenters (failure domains across vCenters), each with its own credentials, in
/// server order as OpenShift writes them.
#[test]
fn several_vcenters_each_get_their_credentials() {
    let config = "[Global]\ninsecure-flag = 1\n[VirtualCenter \"vc2.example.com\"]\ndatacenters = dc2\n[VirtualCenter \"vc1.example.com\"]\ndatacenters = dc1\n[Labels]\nregion = openshift-region\nzone = openshift-zone\n";
    let mut i = inputs(Some(config), true, None);
    i.credentials = SecretData(BTreeMap::from([
        ("vc1.example.com.username".to_owned(), "u1".to_owned()),
        ("vc1.example.com.password".to_owned(), "p1".to_owned()),
        ("vc2.example.com.username".to_owned(), "u2".to_owned()),
        ("vc2.example.com.password".to_owned(), "p2".to_owned()),
    ]));
    let text = generate_config(&i, config, &BTreeMap::new()).unwrap()["cloud.conf"].clone();
    let first = text.find("[VirtualCenter \"vc1.example.com\"]").unwrap();
    let second = text.find("[VirtualCenter \"vc2.example.com\"]").unwrap();
    assert!(first < second, "{text}");
    let c = ini::parse(&text).unwrap();
    assert_eq!(c["VirtualCenter \"vc1.example.com\""]["user"], "u1");
    assert_eq!(c["VirtualCenter \"vc2.example.com\""]["password"], "p2");
    assert_eq!(c["VirtualCenter \"vc2.example.com\""]["datacenters"], "dc2");

    // The second vCenter's password missing: named.
    i.credentials.0.remove("vc2.example.com.password");
    let error = generate_config(&i, config, &BTreeMap::new()).unwrap_err();
    assert!(
        error.contains("has no key vc2.example.com.password"),
        "{error}"
    );
}

#[rstest]
#[case::no_user("vc.example.com.username")]
#[case::no_password("vc.example.com.password")]
fn missing_credentials_are_named(#[case] missing: &str) {
    let mut i = inputs(Some(BASIC), true, None);
    i.credentials.0.remove(missing);
    let error = generate_config(&i, BASIC, &BTreeMap::new()).unwrap_err();
    assert!(
        error.contains(&format!(
            "Secret openshift-cluster-csi-drivers/vmware-vsphere-cloud-credentials has no key {missing}"
        )),
        "{error}"
    );
    let refused = precondition(&i).unwrap_err();
    assert!(refused.message().contains(missing), "{refused}");
}

#[rstest]
#[case::none(None, "", None)]
#[case::from_cloud_config(
    None,
    "[Labels]\nregion = openshift-region\nzone = openshift-zone\n",
    Some("openshift-region,openshift-zone")
)]
#[case::driver_config_wins(Some(vec!["r", "z"]), "[Labels]\nregion = openshift-region\n", Some("r,z"))]
#[case::empty_driver_config_falls_back(Some(vec![]), "[Labels]\nzone = z1\n", Some("z1"))]
fn topology_categories(
    #[case] configured: Option<Vec<&str>>,
    #[case] labels: &str,
    #[case] want: Option<&str>,
) {
    let spec = configured.map(|c| VSphereCSIDriverConfigSpec {
        topology_categories: Some(c.into_iter().map(str::to_owned).collect()),
        ..Default::default()
    });
    let config = format!("{BASIC}{labels}");
    let c = conf(&config, spec.clone()).unwrap();
    assert_eq!(
        c.get("Labels").map(|l| l["topology-categories"].as_str()),
        want
    );
    // The provisioner enforces topology exactly when there are categories.
    let i = inputs(Some(&config), true, spec);
    let d = csi_kit::build_controller_deployment(&vsphere(), &i);
    let args = d
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers
        .into_iter()
        .find(|c| c.name == "csi-provisioner")
        .unwrap()
        .args
        .unwrap();
    assert_eq!(
        args.contains(&"--strict-topology".to_owned()),
        want.is_some()
    );
    assert!(args.contains(&format!("--feature-gates=Topology={}", want.is_some())));
}

#[rstest]
#[case::in_range(Some(5), Some(7), Some(9), None)]
#[case::global_too_many(
    Some(33),
    None,
    None,
    Some("globalMaxSnapshotsPerBlockVolume = 33 is out of range")
)]
#[case::vsan_zero(
    None,
    Some(0),
    None,
    Some("granularMaxSnapshotsPerBlockVolumeInVSAN = 0")
)]
#[case::negative(
    Some(-1),
    None,
    None,
    Some("globalMaxSnapshotsPerBlockVolume = -1 is out of range")
)]
#[case::vvol_too_many(
    None,
    None,
    Some(40),
    Some("granularMaxSnapshotsPerBlockVolumeInVVOL = 40")
)]
fn snapshot_limits(
    #[case] global: Option<i32>,
    #[case] vsan: Option<i32>,
    #[case] vvol: Option<i32>,
    #[case] error: Option<&str>,
) {
    let spec = VSphereCSIDriverConfigSpec {
        global_max_snapshots_per_block_volume: global,
        granular_max_snapshots_per_block_volume_in_vsan: vsan,
        granular_max_snapshots_per_block_volume_in_vvol: vvol,
        ..Default::default()
    };
    match (conf(BASIC, Some(spec)), error) {
        (Ok(c), None) => {
            assert_eq!(c["Snapshot"]["global-max-snapshots-per-block-volume"], "5");
            assert_eq!(
                c["Snapshot"]["granular-max-snapshots-per-block-volume-vsan"],
                "7"
            );
            assert_eq!(
                c["Snapshot"]["granular-max-snapshots-per-block-volume-vvol"],
                "9"
            );
        }
        (Err(e), Some(want)) => assert!(e.contains(want), "{e}"),
        (got, want) => panic!("got {got:?}, want error {want:?}"),
    }
}

#[rstest]
#[case::default(None, "59")]
#[case::set(Some(100), "100")]
fn max_volumes_per_node(#[case] max: Option<i32>, #[case] want: &str) {
    let spec = VSphereCSIDriverConfigSpec {
        max_allowed_block_volumes_per_node: max,
        ..Default::default()
    };
    let ds = csi_kit::build_node_daemon_set(&vsphere(), &inputs(Some(BASIC), true, Some(spec)));
    let driver = ds.spec.unwrap().template.spec.unwrap().containers[0].clone();
    let env = driver.env.unwrap();
    let var = env
        .iter()
        .find(|e| e.name == "MAX_VOLUMES_PER_NODE")
        .unwrap();
    assert_eq!(var.value.as_deref(), Some(want));
}

#[rstest]
#[case::ready(Some(BASIC), true, None)]
#[case::no_secret(
    Some(BASIC),
    false,
    Some(
        "Secret openshift-cluster-csi-drivers/vmware-vsphere-cloud-credentials with the vCenter credentials does not exist"
    )
)]
#[case::no_cloud_config(
    None,
    true,
    Some(
        "ConfigMap openshift-config/cloud-provider-config with the vSphere cloud config does not exist"
    )
)]
#[case::broken_cloud_config(Some("[Global]\n"), true, Some("cannot be used: it names no vCenter"))]
fn the_precondition_refuses_with_a_reason(
    #[case] config: Option<&str>,
    #[case] secret: bool,
    #[case] want: Option<&str>,
) {
    match (precondition(&inputs(config, secret, None)), want) {
        (Ok(()), None) => {}
        (Err(e), Some(want)) => {
            assert!(e.message().contains(want), "{e}");
            assert_eq!(
                e.kind(),
                csi_kit::HookErrorKind::Config,
                "an admin fixes it"
            );
        }
        (got, want) => panic!("got {got:?}, want {want:?}"),
    }
}

#[test]
fn the_syncer_runs_beside_the_driver_with_the_config_secret_and_a_rotation_rolls_them() {
    let def = vsphere();
    let i = inputs(Some(BASIC), true, None);
    let d = deployment(&def, &i);
    let spec = d.spec.clone().unwrap().template.spec.unwrap();
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    // OpenShift's order: the syncer and its metrics proxy come last.
    assert_eq!(names[0], "csi-driver");
    assert_eq!(
        &names[names.len() - 2..],
        ["vsphere-syncer", "syncer-kube-rbac-proxy"]
    );
    let syncer_at = names.len() - 2;
    // Both read the generated config, credentials included, from the Secret; none comes
    // through the environment.
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "vsphere-csi-config-volume")
        .unwrap();
    assert_eq!(
        volume.secret.clone().unwrap().secret_name.as_deref(),
        Some("vsphere-csi-config-secret")
    );
    for c in [&spec.containers[0], &spec.containers[syncer_at]] {
        assert!(
            c.volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == "vsphere-csi-config-volume"),
            "{}",
            c.name
        );
        assert!(
            !c.env
                .iter()
                .flatten()
                .any(|e| e.name.starts_with("VSPHERE_") && e.name != "VSPHERE_CSI_CONFIG"),
            "{}",
            c.name
        );
    }
    let syncer = &spec.containers[syncer_at];
    assert_eq!(
        syncer.image.as_deref(),
        Some("registry.k8s.io/csi-vsphere/syncer:v3.3.1")
    );
    assert!(syncer.liveness_probe.is_none() && syncer.ports.is_none());
    assert!(
        !syncer
            .env
            .clone()
            .unwrap()
            .iter()
            .any(|e| e.name == "CSI_ENDPOINT")
    );

    // A new password changes the generated Secret, whose hash rolls the pods.
    let mut rotated = i.clone();
    rotated.credentials = credentials("admin@vsphere.local", "n3w");
    let after = deployment(&def, &rotated);
    assert_ne!(
        d.spec.unwrap().template.metadata,
        after.spec.unwrap().template.metadata
    );
}

/// The controller Deployment as the operator renders it (with the generated Secret's hash).
fn deployment(def: &DriverDef, inputs: &Inputs) -> k8s_openapi::api::apps::v1::Deployment {
    csi_kit::render_operands(def, inputs)
        .into_iter()
        .find_map(|o| match o {
            Operand::Deployment(d) => Some(d),
            _ => None,
        })
        .unwrap()
}

#[test]
fn the_config_secret_is_rendered_and_no_config_map_holds_credentials() {
    let def = vsphere();
    let operands = csi_kit::render_operands(&def, &inputs(Some(BASIC), true, None));
    let secret = operands
        .iter()
        .find_map(|o| match o {
            Operand::Secret(s) => Some(s),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        secret.metadata.name.as_deref(),
        Some("vsphere-csi-config-secret")
    );
    let text = String::from_utf8(secret.data.clone().unwrap()["cloud.conf"].0.clone()).unwrap();
    assert!(text.contains("password = \"s3cret\""), "{text}");
    for o in &operands {
        if let Operand::ConfigMap(c) = o {
            let data = serde_json::to_string(&c.data).unwrap();
            assert!(
                !data.contains("s3cret"),
                "{:?} holds the password",
                c.metadata.name
            );
        }
    }
}

#[test]
fn a_refused_driver_plans_no_operands_and_says_disabled() {
    use driver_operator::observe::{Apis, Observed};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    let def = vsphere();
    let observed = Observed {
        apis: Apis {
            infrastructure: true,
            proxy: false,
            api_server: false,
            cloud_credential: false,
        },
        cluster_csi_driver: Some(
            serde_json::from_value(json!({
                "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                "metadata": {"name": "csi.vsphere.vmware.com", "generation": 1},
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
                                   "platformStatus": {"type": "VSphere"}}
                    }))
                    .unwrap(),
                ),
                ..Default::default()
            },
        ..Observed::default()
    };
    let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap());
    let plan = driver_operator::plan::plan(&def, &BTreeMap::new(), &observed, &now);
    assert!(plan.steps.is_empty() && plan.deletions.is_empty());
    let disabled = plan
        .status
        .iter()
        .flat_map(|p| &p.part.conditions)
        .find(|c| c.type_ == "VMwareVSphereDriverControllerServiceControllerDisabled")
        .unwrap();
    assert_eq!(disabled.status.to_string(), "True");
    assert_eq!(disabled.reason.as_deref(), Some("PreConditionNotSatisfied"));
    assert!(
        disabled
            .message
            .as_deref()
            .unwrap()
            .contains("vmware-vsphere-cloud-credentials")
    );
    assert!(
        plan.status
            .iter()
            .flat_map(|p| &p.part.conditions)
            .filter(|c| c.type_.ends_with("Degraded"))
            .all(|c| c.status.to_string() == "False")
    );
}
