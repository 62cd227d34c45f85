#![allow(clippy::unwrap_used)]
//! The OpenStack Cinder hooks: cloud.conf generation from the cluster's cloud config (table
//! tests, malformed input included), the CA of a self-signed cloud, topology on and off, and
//! what the kit does with a missing or broken source.

use std::collections::BTreeMap;

use csi_kit::derived::{derived_config_map_errors, ini};
use csi_kit::{DriverDef, Inputs, Topology};
use drivers::openstack_cinder::{self, generate_cloud_conf, parse_bool};
use rstest::rstest;

const SOURCE: &str = "openshift-config/cloud-provider-config";

fn cinder() -> DriverDef {
    drivers::by_name("openstack-cinder").unwrap()
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn inputs_with(source: Option<&[(&str, &str)]>) -> Inputs {
    let def = cinder();
    let mut inputs = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    if let Some(pairs) = source {
        inputs
            .source_config_maps
            .insert(SOURCE.to_owned(), data(pairs));
    }
    inputs
}

fn generate(config: &str, extra: &[(&str, &str)]) -> Result<BTreeMap<String, String>, String> {
    let mut d = data(extra);
    d.insert("config".to_owned(), config.to_owned());
    generate_cloud_conf(&inputs_with(None), config, &d)
}

#[test]
fn the_catalogue_has_cinder_as_the_registry_names_it() {
    let def = drivers::by_name("cinder.csi.openstack.org").unwrap();
    assert_eq!(def.short_name, "openstack-cinder");
    assert_eq!(def.condition_prefix, "OpenStackCinder");
    assert!(!def.removable);
    assert_eq!(def.config_maps.len(), 1);
    assert!(def.config_maps[0].generate.is_some());
    assert_eq!(
        def.credentials.unwrap().secret_name,
        "openstack-cloud-credentials"
    );
}

#[test]
fn auth_always_comes_from_the_credentials_secret() {
    let out = generate(
        "[Global]\nauth-url = https://keystone:5000\nusername = admin\npassword = hunter2\nregion = r1\n",
        &[],
    )
    .unwrap();
    let conf = ini::parse(&out["cloud.conf"]).unwrap();
    assert_eq!(
        conf["Global"],
        data(&[
            ("use-clouds", "true"),
            ("clouds-file", "/etc/kubernetes/secret/clouds.yaml"),
            ("cloud", "openstack"),
        ])
    );
    assert!(
        !out["cloud.conf"].contains("hunter2"),
        "no password is copied"
    );
    assert_eq!(
        out.keys().collect::<Vec<_>>(),
        ["cloud.conf", "enable_topology"],
        "no CA without one in the cloud config"
    );
}

#[rstest]
#[case::bundle_key("ca-bundle.pem")]
#[case::cert_key("ca-cert.pem")]
fn a_self_signed_clouds_ca_is_copied_and_named(#[case] key: &str) {
    let out = generate("[Global]\n", &[(key, "PEM")]).unwrap();
    assert_eq!(out["ca-bundle.pem"], "PEM");
    let conf = ini::parse(&out["cloud.conf"]).unwrap();
    assert_eq!(
        conf["Global"]["ca-file"],
        "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
        "where both pods mount the CA"
    );
}

#[rstest]
#[case::options_kept(
    "[BlockStorage]\nrescan-on-resize = true\nnode-volume-attach-limit = 25\n[Metadata]\nsearch-order = configDrive\n",
    Some(
        "[BlockStorage]\nrescan-on-resize         = true\nnode-volume-attach-limit = 25\n\n[Global]\nuse-clouds  = true\nclouds-file = /etc/kubernetes/secret/clouds.yaml\ncloud       = openstack\n\n[Metadata]\nsearch-order = configDrive\n"
    )
)]
#[case::empty_config(
    "",
    Some(
        "[Global]\nuse-clouds  = true\nclouds-file = /etc/kubernetes/secret/clouds.yaml\ncloud       = openstack\n"
    )
)]
#[case::legacy_option_dropped(
    "[BlockStorage]\ntrust-device-path = false\n",
    Some(
        "[Global]\nuse-clouds  = true\nclouds-file = /etc/kubernetes/secret/clouds.yaml\ncloud       = openstack\n"
    )
)]
#[case::installer_config(
    "[Global]\nsecret-name = openstack-credentials\nsecret-namespace = kube-system\nregion = regionOne\n[BlockStorage]\nignore-volume-az = false\n",
    // Byte for byte what OpenShift's operator writes for the same cloud config.
    Some(
        "[BlockStorage]\nignore-volume-az = false\n\n[Global]\nuse-clouds  = true\nclouds-file = /etc/kubernetes/secret/clouds.yaml\ncloud       = openstack\n"
    )
)]
#[case::not_ini("this is not a cloud config", None)]
#[case::unclosed_section("[Global\nregion = r1\n", None)]
#[case::bad_bool("[BlockStorage]\nignore-volume-az = maybe\n", None)]
#[case::limit_zero("[BlockStorage]\nnode-volume-attach-limit = 0\n", None)]
#[case::limit_text("[BlockStorage]\nnode-volume-attach-limit = many\n", None)]
#[case::ca_file_without_ca("[Global]\nca-file = /etc/ca.pem\n", None)]
fn cloud_conf_table(#[case] config: &str, #[case] want: Option<&str>) {
    match (generate(config, &[]), want) {
        (Ok(out), Some(want)) => assert_eq!(out["cloud.conf"], want),
        (Err(message), None) => assert!(!message.is_empty()),
        (got, want) => panic!("config {config:?}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn errors_name_the_option_and_the_fix() {
    let e = generate("[BlockStorage]\nignore-volume-az = maybe\n", &[]).unwrap_err();
    assert_eq!(
        e,
        "[BlockStorage] ignore-volume-az = \"maybe\" is not a boolean: use true or false"
    );
    let e = generate("[Global]\nca-file = /x\n", &[]).unwrap_err();
    assert!(e.contains("ca-bundle.pem or ca-cert.pem"), "{e}");
}

#[rstest]
#[case::missing_source(
    None,
    "ConfigMap openshift-config/cloud-provider-config does not exist: it is needed to generate ConfigMap cloud-conf; create it with key config"
)]
#[case::missing_key(Some(&[("other", "x")][..]), "ConfigMap openshift-config/cloud-provider-config has no key config: it is needed to generate ConfigMap cloud-conf")]
#[case::garbage(Some(&[("config", "garbage")][..]), "key config of ConfigMap openshift-config/cloud-provider-config is invalid: line 1: \"garbage\" is neither a [section] nor key = value")]
fn the_kit_reports_a_broken_source_precisely(
    #[case] source: Option<&[(&str, &str)]>,
    #[case] want: &str,
) {
    assert_eq!(
        derived_config_map_errors(&cinder(), &inputs_with(source)),
        [want]
    );
    // Nothing is rendered from a broken source, and nothing panics.
    let objects = csi_kit::render(&cinder(), &inputs_with(source));
    assert!(
        !objects
            .iter()
            .any(|o| o["metadata"]["name"] == "cloud-conf")
    );
}

#[rstest]
#[case::default("[Global]\n", &[], Some("true"))]
#[case::ignored("[BlockStorage]\nignore-volume-az = true\n", &[], Some("false"))]
#[case::ignored_yes("[BlockStorage]\nignore-volume-az = yes\n", &[], Some("false"))]
#[case::not_ignored("[BlockStorage]\nignore-volume-az = false\n", &[], Some("true"))]
#[case::override_off("[Global]\n", &[("enable_topology", "false")], Some("false"))]
#[case::override_on(
    "[BlockStorage]\nignore-volume-az = true\n",
    &[("enable_topology", "true")],
    Some("true")
)]
#[case::override_broken("[Global]\n", &[("enable_topology", "sometimes")], None)]
fn topology_follows_the_override_then_ignore_volume_az(
    #[case] config: &str,
    #[case] extra: &[(&str, &str)],
    #[case] want: Option<&str>,
) {
    match (generate(config, extra), want) {
        (Ok(out), Some(want)) => assert_eq!(out["enable_topology"], want),
        (Err(message), None) => assert_eq!(
            message,
            "enable_topology = \"sometimes\" is not a boolean: use \"true\" or \"false\""
        ),
        (got, want) => panic!("got {got:?}, want {want:?}"),
    }
}

#[test]
fn both_driver_containers_read_topology_from_the_generated_config_map() {
    let def = cinder();
    let inputs = inputs_with(Some(&[("config", "[Global]\n")]));
    let deployment = csi_kit::build_controller_deployment(&def, &inputs);
    let node = csi_kit::build_node_daemon_set(&def, &inputs);
    let controller_containers = deployment.spec.unwrap().template.spec.unwrap().containers;
    let node_containers = node.spec.unwrap().template.spec.unwrap().containers;
    for containers in [&controller_containers, &node_containers] {
        let driver = containers.iter().find(|c| c.name == "csi-driver").unwrap();
        assert!(
            driver
                .args
                .as_ref()
                .unwrap()
                .contains(&"--with-topology=$(ENABLE_TOPOLOGY)".to_owned())
        );
        let env = driver
            .env
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.name == "ENABLE_TOPOLOGY")
            .unwrap();
        let key = env
            .value_from
            .as_ref()
            .unwrap()
            .config_map_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("cloud-conf", "enable_topology")
        );
    }
    let provisioner = controller_containers
        .iter()
        .find(|c| c.name == "csi-provisioner")
        .unwrap();
    assert!(
        !provisioner
            .args
            .as_ref()
            .unwrap()
            .iter()
            .any(|a| a.starts_with("--feature-gates")),
        "csi-provisioner's Topology is on by default (GA)"
    );
}

#[rstest]
#[case("true", Some(true))]
#[case("Yes", Some(true))]
#[case("", Some(true))]
#[case("0", Some(false))]
#[case("off", Some(false))]
#[case("maybe", None)]
fn gcfg_booleans(#[case] value: &str, #[case] want: Option<bool>) {
    assert_eq!(parse_bool(value), want);
}

#[test]
fn a_cloud_config_change_changes_the_pod_templates_and_a_comment_does_not() {
    let def = cinder();
    let templates = |config: &str| -> Vec<serde_json::Value> {
        let inputs = inputs_with(Some(&[("config", config)]));
        csi_kit::render(&def, &inputs)
            .into_iter()
            .filter(|o| matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet")))
            .map(|o| o["spec"]["template"]["metadata"]["annotations"].clone())
            .collect()
    };
    let before = templates(
        "[BlockStorage]
rescan-on-resize = false
",
    );
    assert_eq!(before.len(), 2);
    assert!(
        before[0]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("operator.openshift.io/dep-"))
    );
    assert_eq!(
        before,
        templates("# reviewed\n[BlockStorage]\nrescan-on-resize = false\n")
    );
    assert_ne!(
        before,
        templates("[BlockStorage]\nrescan-on-resize = true\n")
    );
}

#[test]
fn offline_render_uses_the_tables_example_cloud_config() {
    let def = cinder();
    let inputs = Inputs::offline(&def, Topology::SingleReplica, &BTreeMap::new());
    assert!(inputs.source_config_maps.contains_key(SOURCE));
    assert!(derived_config_map_errors(&def, &inputs).is_empty());
    assert_eq!(openstack_cinder::CONFIG_MAP, def.config_maps[0].name);
}
