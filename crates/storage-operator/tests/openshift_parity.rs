#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What the cluster storage operator applies, against what OpenShift's does.
//!
//! The reference is OpenShift's cluster-storage-operator's assets, committed under
//! `tests/fixtures/openshift/` (the README there names the commit and paths): each driver
//! operator's objects and the volume data source validator's. We build the same objects for
//! the inputs those assets assume (an HA OpenShift cluster, log level Normal, images from the
//! same environment variables, given as the asset's placeholders) and compare them field by
//! field with the drivers' comparison (`crates/drivers/tests/openshift_parity/`). Every
//! difference must be listed, with its reason, in `src/starter.openshift-differences.yaml`
//! (driver operators) or `src/validator.openshift-differences.yaml`; the test fails on a
//! difference that is not listed and on a listed one that no longer exists in any driver.

#[path = "../../drivers/tests/openshift_parity/diff.rs"]
mod diff;
#[path = "../../drivers/tests/openshift_parity/fixtures.rs"]
mod fixtures;

use std::collections::BTreeMap;
use std::path::PathBuf;

use api::operator_v1::LogLevel;
use csi_kit::Topology;
use diff::{Difference, ExpectedList};
use serde_json::Value;
use storage_operator::plan::{Desired, starter_objects};
use storage_operator::registry::{DRIVER_NAMESPACE, find};
use storage_operator::starter::{self, STARTER_LABEL, StarterInputs};
use storage_operator::validator;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// OpenShift's objects of one fixture directory, with the placeholders that do not name an
/// image substituted (images stay placeholders on both sides).
fn openshift_objects(fixture: &str) -> Vec<Value> {
    let substitutions: Vec<(String, String)> = [
        ("${LOG_LEVEL}", "2"),
        ("${LEADER_ELECTION_LEASE_DURATION}", "137s"),
        ("${LEADER_ELECTION_RENEW_DEADLINE}", "107s"),
        ("${LEADER_ELECTION_RETRY_PERIOD}", "26s"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    fixtures::load_from(
        &manifest_dir().join("tests/fixtures/openshift"),
        fixture,
        &substitutions,
    )
    .into_iter()
    .map(|mut v| {
        diff::drop_hash_annotations(&mut v);
        rules_by_resource(&mut v);
        v
    })
    .collect()
}

/// A role's rules as what they allow, by `group/resource` (with `:name` when limited to
/// names) and the sorted verbs on it: how rules are split and ordered allows nothing, so only
/// what is allowed is compared.
fn rules_by_resource(v: &mut Value) {
    if !matches!(v["kind"].as_str(), Some("ClusterRole" | "Role")) {
        return;
    }
    let mut allowed: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    let strings = |x: &Value| -> Vec<String> {
        x.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    for rule in v["rules"].as_array().cloned().unwrap_or_default() {
        let verbs = strings(&rule["verbs"]);
        let mut keys = Vec::new();
        for url in strings(&rule["nonResourceURLs"]) {
            keys.push(format!("url:{url}"));
        }
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                let names = strings(&rule["resourceNames"]);
                if names.is_empty() {
                    keys.push(format!("{group}/{resource}"));
                }
                keys.extend(names.iter().map(|n| format!("{group}/{resource}:{n}")));
            }
        }
        for key in keys {
            allowed
                .entry(key)
                .or_default()
                .extend(verbs.iter().cloned());
        }
    }
    v["rules"] = serde_json::to_value(allowed).unwrap();
}

/// Every image variable a driver operator may be given, as the cluster storage operator's
/// environment, each set to the placeholder OpenShift's asset has where it lands.
fn placeholder_env(short_name: &str) -> BTreeMap<String, String> {
    let entry = find(short_name).unwrap();
    let mut env = BTreeMap::new();
    env.insert(
        entry.driver_image_env.to_owned(),
        "${DRIVER_IMAGE}".to_owned(),
    );
    for (from, to) in entry.extra_image_envs {
        env.insert((*from).to_owned(), format!("${{{to}}}"));
    }
    for name in storage_operator::registry::SIDECAR_IMAGE_ENVS {
        env.insert(name.to_owned(), format!("${{{name}}}"));
    }
    env
}

fn inputs(env: BTreeMap<String, String>) -> StarterInputs {
    StarterInputs {
        topology: Topology::HighlyAvailable,
        log_level: LogLevel::Normal,
        proxy: Default::default(),
        env,
        operator_image: "${OPERATOR_IMAGE}".to_owned(),
        // The assets assume the default profile (Intermediate).
        tls_profile: None,
    }
}

fn value(desired: &Desired) -> Value {
    let mut v = desired.to_value();
    fixtures::normalise(&mut v);
    diff::drop_hash_annotations(&mut v);
    rules_by_resource(&mut v);
    v
}

/// Whether `desired` is one of a driver's assets: not the driver namespace and not a shared
/// sidecar role, which are OpenShift's `manifests/`.
fn a_drivers_asset(desired: &Desired) -> bool {
    match desired {
        Desired::Namespace(n) => n.metadata.name.as_deref() != Some(DRIVER_NAMESPACE),
        Desired::ClusterRole(r) => r
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(STARTER_LABEL))
            .is_none_or(|owner| owner != "shared"),
        _ => true,
    }
}

/// What our cluster storage operator applies for one driver operator: its objects (not the
/// driver namespace and the shared sidecar roles, which are OpenShift's `manifests/`, not a
/// driver's assets) and the ClusterCSIDriver it creates.
fn our_driver_objects(short_name: &str) -> Vec<Value> {
    let entry = find(short_name).unwrap();
    let def = drivers::by_name(short_name).unwrap();
    let inputs = inputs(placeholder_env(short_name));
    let mut objects: Vec<Value> = starter_objects(&[(entry.clone(), def)], &inputs)
        .iter()
        .filter(|d| a_drivers_asset(d))
        .map(value)
        .collect();
    let mut cr = serde_json::to_value(starter::build_cluster_csi_driver(&entry, &inputs)).unwrap();
    fixtures::normalise(&mut cr);
    objects.push(cr);
    objects
}

fn expected_list(file: &str) -> (PathBuf, ExpectedList) {
    let path = manifest_dir().join("src").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let list =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    (path, list)
}

fn shown(v: &Option<Value>) -> String {
    match v {
        None => "(absent)".to_owned(),
        Some(v) => serde_json::to_string(v).unwrap(),
    }
}

/// Checks `actual` (the differences of every compared set, by set) against the list in `file`:
/// every difference is listed, every listed one exists in some set, and has a reason.
fn check(file: &str, actual: &[(&str, Vec<Difference>)]) {
    check_beside(file, None, actual);
}

/// [`check`], where the entries of `inherited` (another list, checked where it is used) explain
/// differences too.
fn check_beside(file: &str, inherited: Option<&str>, actual: &[(&str, Vec<Difference>)]) {
    let (path, expected) = expected_list(file);
    let inherited = inherited
        .map(|f| expected_list(f).1.differences)
        .unwrap_or_default();
    assert!(!expected.reference.trim().is_empty());
    let mut report = String::new();
    for (set, differences) in actual {
        for d in differences.iter().filter(|d| {
            !expected
                .differences
                .iter()
                .chain(&inherited)
                .any(|e| e.matches(d))
        }) {
            report.push_str(&format!(
                "  {set}: unlisted: {}\n      ours:      {}\n      openshift: {}\n",
                d.at,
                shown(&d.ours),
                shown(&d.openshift)
            ));
        }
    }
    for e in expected
        .differences
        .iter()
        .filter(|e| !actual.iter().any(|(_, ds)| ds.iter().any(|d| e.matches(d))))
    {
        report.push_str(&format!(
            "  listed ({:?}) but not found: {} (ours: {}, openshift: {}, only: {:?})\n",
            e.kind,
            e.at,
            shown(&e.ours),
            shown(&e.openshift),
            e.only
        ));
    }
    assert!(
        report.is_empty(),
        "ours and OpenShift's differ other than as {} lists:\n{report}",
        path.display()
    );
    for e in &expected.differences {
        assert!(
            !e.why.trim().is_empty() && !e.why.starts_with('*'),
            "{}: {} has no reason",
            path.display(),
            e.at
        );
        assert!(
            !(e.any_value && e.only.is_some()),
            "{}: {} has both anyValue and only",
            path.display(),
            e.at
        );
    }
}

/// The driver operators the cluster storage operator starts, by our short name and the
/// fixture directory of OpenShift's assets.
const DRIVERS: [(&str, &str); 8] = [
    ("aws-ebs", "aws-ebs"),
    ("azure-disk", "azure-disk"),
    ("azure-file", "azure-file"),
    ("gcp-pd", "gcp-pd"),
    ("ibm-vpc-block", "ibm-vpc-block"),
    ("openstack-cinder", "openstack-cinder"),
    ("openstack-manila", "openstack-manila"),
    ("vsphere", "vsphere"),
];

#[test]
fn driver_operators_match_openshift_but_for_the_listed_differences() {
    let actual: Vec<(&str, Vec<Difference>)> = DRIVERS
        .iter()
        .map(|(short_name, fixture)| {
            (
                *short_name,
                diff::diff_objects(&our_driver_objects(short_name), &openshift_objects(fixture)),
            )
        })
        .collect();
    check("starter.openshift-differences.yaml", &actual);
}

#[test]
fn the_volume_data_source_validator_matches_openshift_but_for_the_listed_differences() {
    let ours: Vec<Value> = [
        Desired::ServiceAccount(validator::build_service_account()),
        Desired::ClusterRole(validator::build_cluster_role()),
        Desired::ClusterRoleBinding(validator::build_cluster_role_binding()),
        Desired::Deployment(validator::build_deployment(
            "${VOLUME_DATA_SOURCE_VALIDATOR_IMAGE}",
            2,
            Topology::HighlyAvailable,
        )),
        Desired::CustomResourceDefinition(validator::build_crd()),
    ]
    .iter()
    .map(value)
    .collect();
    let actual = diff::diff_objects(&ours, &openshift_objects("volume-data-source-validator"));
    check(
        "validator.openshift-differences.yaml",
        &[("volume-data-source-validator", actual)],
    );
}

/// Every object of a multi-document YAML file, normalised as the fixtures are.
fn load_all(path: &std::path::Path, substitutions: &[(&str, &str)]) -> Vec<Value> {
    let mut text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    for (from, to) in substitutions {
        text = text.replace(from, to);
    }
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    docs.into_iter()
        .filter(|v| v.is_object())
        .map(|mut v| {
            fixtures::normalise(&mut v);
            diff::drop_hash_annotations(&mut v);
            rules_by_resource(&mut v);
            name_by_namespace(&mut v);
            v
        })
        .collect()
}

/// NetworkPolicies of one name exist in both namespaces: the comparison, which matches objects
/// by kind and name, names them `<namespace>.<name>`.
fn name_by_namespace(v: &mut Value) {
    if v["kind"] == "NetworkPolicy" {
        let qualified = format!(
            "{}.{}",
            v["metadata"]["namespace"].as_str().unwrap_or_default(),
            v["metadata"]["name"].as_str().unwrap_or_default()
        );
        v["metadata"]["name"] = qualified.into();
    }
}

/// What OpenShift's release payload installs beside its cluster storage operator (`manifests/`,
/// the standalone profile: not the HyperShift and IBM Cloud variants, and not the
/// CredentialsRequests, which the drivers' comparison covers), against what ours installs in
/// their place: `deploy/openshift/storage-operator.yaml`, and what ours applies itself at run
/// time (the shared sidecar roles, the ServiceMonitor and PrometheusRule, Storage/cluster).
#[test]
fn the_payload_matches_openshift_but_for_the_listed_differences() {
    let dir = manifest_dir().join("tests/fixtures/openshift/manifests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let openshift: Vec<Value> = files
        .iter()
        .flat_map(|path| {
            load_all(
                path,
                &[
                    ("${OPERATOR_IMAGE}", "${OPERATOR_IMAGE}"),
                    (
                        "quay.io/openshift/origin-cluster-storage-operator:latest",
                        "${OPERATOR_IMAGE}",
                    ),
                ],
            )
        })
        .collect();
    let mut ours = load_all(
        &manifest_dir().join("../../deploy/openshift/storage-operator.yaml"),
        &[],
    );
    let runtime = csi_kit::build_shared_cluster_roles()
        .into_iter()
        .map(|mut role| {
            role.metadata
                .labels
                .get_or_insert_default()
                .insert(STARTER_LABEL.into(), "shared".into());
            Desired::ClusterRole(role).to_value()
        })
        .chain([
            storage_operator::monitoring::build_service_monitor(true),
            storage_operator::monitoring::build_prometheus_rule(),
        ]);
    for mut v in runtime {
        fixtures::normalise(&mut v);
        rules_by_resource(&mut v);
        ours.push(v);
    }
    let actual = diff::diff_objects(&ours, &openshift);
    check(
        "manifests.openshift-differences.yaml",
        &[("manifests", actual)],
    );
}

/// The control-plane namespace of the hosted cluster in the HyperShift comparison.
const CONTROL_PLANE_NAMESPACE: &str = "clusters-hosted";

/// The drivers OpenShift runs with a hosted control plane, by our short name and the fixture
/// directory of its HyperShift assets.
const HOSTED_DRIVERS: [(&str, &str); 6] = [
    ("aws-ebs", "aws-ebs"),
    ("azure-disk", "azure-disk"),
    ("azure-file", "azure-file"),
    ("openstack-cinder", "openstack-cinder"),
    ("openstack-manila", "openstack-manila"),
    ("powervs-block", "powervs-block"),
];

/// OpenShift's objects of one side (`mgmt` or `guest`) of a driver operator with a hosted
/// control plane.
fn openshift_hosted_objects(fixture: &str, side: &str) -> Vec<Value> {
    let substitutions: Vec<(String, String)> = [
        ("${CONTROLPLANE_NAMESPACE}", CONTROL_PLANE_NAMESPACE),
        ("${RELEASE_VERSION}", "4.22.0"),
        ("${LOG_LEVEL}", "2"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    fixtures::load_from(
        &manifest_dir().join("tests/fixtures/openshift-hypershift"),
        &format!("{fixture}/{side}"),
        &substitutions,
    )
    .into_iter()
    .map(|mut v| {
        diff::drop_hash_annotations(&mut v);
        rules_by_resource(&mut v);
        v
    })
    .collect()
}

/// What ours applies for one driver operator with a hosted control plane, by side.
fn our_hosted_objects(short_name: &str) -> (Vec<Value>, Vec<Value>) {
    let entry = find(short_name).unwrap();
    let def = drivers::by_name(short_name).unwrap();
    let mut env = placeholder_env(short_name);
    for (from, to) in entry.hosted_image_envs {
        env.insert((*from).to_owned(), format!("${{{to}}}"));
    }
    env.insert(
        storage_operator::hosted::control_plane_image_env(entry.driver_image_env),
        "${DRIVER_CONTROL_PLANE_IMAGE}".to_owned(),
    );
    for name in storage_operator::hosted::CONTROL_PLANE_IMAGE_ENVS {
        env.insert(name.to_owned(), format!("${{{name}}}"));
    }
    let mut inputs = inputs(env);
    inputs.topology = Topology::External;
    let hcp = csi_kit::HostedControlPlane {
        namespace: CONTROL_PLANE_NAMESPACE.to_owned(),
        release_version: "4.22.0".to_owned(),
        ..csi_kit::HostedControlPlane::default()
    };
    let objects =
        storage_operator::hosted::hosted_starter_objects(&[(entry.clone(), def)], &inputs, &hcp);
    let management = objects.management.iter().map(value).collect();
    let mut guest: Vec<Value> = objects
        .guest
        .iter()
        .filter(|d| a_drivers_asset(d))
        .map(value)
        .collect();
    let mut cr = serde_json::to_value(starter::build_cluster_csi_driver(&entry, &inputs)).unwrap();
    fixtures::normalise(&mut cr);
    guest.push(cr);
    (management, guest)
}

#[test]
fn hosted_driver_operators_are_where_openshift_puts_them_and_match_but_for_the_listed_differences()
{
    let mut actual: Vec<(String, Vec<Difference>)> = Vec::new();
    for (short_name, fixture) in HOSTED_DRIVERS {
        let (management, guest) = our_hosted_objects(short_name);
        actual.push((
            format!("{short_name} (management)"),
            diff::diff_objects(&management, &openshift_hosted_objects(fixture, "mgmt")),
        ));
        actual.push((
            format!("{short_name} (guest)"),
            diff::diff_objects(&guest, &openshift_hosted_objects(fixture, "guest")),
        ));
    }
    let actual: Vec<(&str, Vec<Difference>)> = actual
        .iter()
        .map(|(set, ds)| (set.as_str(), ds.clone()))
        .collect();
    // What differs as it does standalone is not listed again.
    check_beside(
        "starter.openshift-hypershift-differences.yaml",
        Some("starter.openshift-differences.yaml"),
        &actual,
    );
}
