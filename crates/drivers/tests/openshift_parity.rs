#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Our operands against OpenShift's, driver by driver.
//!
//! The reference is OpenShift's operator's generated assets, committed under
//! `tests/fixtures/openshift/<driver>/` (see the README there for where each set comes from).
//! We render the same driver for the inputs those assets assume (an HA OpenShift cluster, log
//! level Normal, the Intermediate TLS profile, images from the same environment variables) and
//! compare field by field. Every difference must be listed, with its reason, in the driver's
//! `src/<module>.openshift-differences.yaml`; the test fails when a difference is not listed
//! and when a listed one no longer exists.
//!
//! Only what cannot match is normalised: placeholders OpenShift substitutes at run time are
//! substituted with the values our inputs use (images are fed to us as the literal
//! `${..._IMAGE}` strings, so both sides carry the same text), hash annotations are dropped,
//! and empty lists are dropped as Go's encoder drops them. Secrets' data is compared as text
//! (decoded), so a listed difference reads as the file it is.

#[path = "openshift_parity/diff.rs"]
mod diff;
#[path = "openshift_parity/fixtures.rs"]
mod fixtures;

use std::collections::BTreeMap;
use std::path::PathBuf;

use csi_kit::{Inputs, Topology};
use diff::{Difference, ExpectedList};
use rstest::rstest;
use serde_json::Value;

const CIPHERS: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
];
const MIN_TLS: &str = "VersionTLS12";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// OpenShift's objects for a driver, with its run-time placeholders substituted.
fn openshift_objects(fixture: &str, namespace: &str) -> Vec<Value> {
    let ciphers: Vec<String> = CIPHERS.iter().map(|c| (*c).to_owned()).collect();
    let substitutions = fixtures::common_substitutions(namespace, &ciphers, MIN_TLS);
    fixtures::load(fixture, &substitutions)
        .into_iter()
        .map(|mut v| {
            diff::drop_hash_annotations(&mut v);
            decode_secret_data(&mut v);
            v
        })
        .collect()
}

/// A Secret's `data` as text rather than base64.
fn decode_secret_data(v: &mut Value) {
    if v["kind"] != "Secret" || !v["data"].is_object() {
        return;
    }
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(v.clone()).unwrap();
    v["data"] = serde_json::to_value(csi_kit::SecretData::of(&secret).0).unwrap();
}

/// The inputs OpenShift's assets assume, for `topology`.
fn our_inputs(def: &csi_kit::DriverDef, topology: Topology) -> Inputs {
    let i = &def.images;
    let mut env = BTreeMap::new();
    for image in [
        &i.driver,
        &i.provisioner,
        &i.attacher,
        &i.resizer,
        &i.snapshotter,
        &i.node_driver_registrar,
        &i.liveness_probe,
        &i.kube_rbac_proxy,
    ]
    .into_iter()
    .chain(def.extra_images.values())
    {
        env.insert(image.env.clone(), format!("${{{}}}", image.env));
    }
    let mut inputs = Inputs::offline(def, topology, &env);
    inputs.cluster_id = Some("${CLUSTER_ID}".to_owned());
    inputs.tls.min_version = Some(MIN_TLS.to_owned());
    inputs.tls.cipher_suites = CIPHERS.iter().map(|c| (*c).to_owned()).collect();
    inputs
}

/// An operand as the comparison sees it.
fn comparable(operand: &csi_kit::render::Operand) -> Value {
    let mut v = operand.to_value();
    fixtures::normalise(&mut v);
    diff::drop_hash_annotations(&mut v);
    decode_secret_data(&mut v);
    v
}

/// Our objects for the inputs OpenShift's assets assume.
fn our_objects(short_name: &str) -> (Vec<Value>, String) {
    let def = drivers::by_name(short_name).unwrap();
    let inputs = our_inputs(&def, Topology::HighlyAvailable);
    let objects = csi_kit::render::render_operands(&def, &inputs)
        .iter()
        .map(comparable)
        .collect();
    (objects, def.namespace.clone())
}

/// A driver's list of differences: `src/<module>.<list>-differences.yaml`.
fn expected_list(module: &str, list: &str) -> (PathBuf, ExpectedList) {
    let path = manifest_dir().join(format!("src/{module}.{list}-differences.yaml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let list =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    (path, list)
}

/// The differences in `actual` that no entry of `lists` explains.
fn unlisted(actual: &[Difference], lists: &[&[diff::Expected]]) -> String {
    actual
        .iter()
        .filter(|d| !lists.iter().any(|l| l.iter().any(|e| e.matches(d))))
        .map(|d| {
            format!(
                "  unlisted: {}\n      ours:      {}\n      openshift: {}\n",
                d.at,
                yaml(&d.ours),
                yaml(&d.openshift)
            )
        })
        .collect()
}

/// The entries of `list` that match no difference in `actual` (an entry must go when its
/// difference does).
fn stale(actual: &[Difference], list: &[diff::Expected]) -> String {
    list.iter()
        .filter(|e| !actual.iter().any(|d| e.matches(d)))
        .map(|e| {
            format!(
                "  listed ({:?}) but not found: {} (ours: {}, openshift: {}, only: {:?})\n",
                e.kind,
                e.at,
                yaml(&e.ours),
                yaml(&e.openshift),
                e.only
            )
        })
        .collect()
}

fn yaml(v: &Option<Value>) -> String {
    match v {
        None => "(absent)".to_owned(),
        Some(v) => serde_json::to_string(v).unwrap(),
    }
}

#[rstest]
#[case::gcp_pd("gcp-pd", "gcp-pd")]
#[case::aws_ebs("aws-ebs", "aws-ebs")]
#[case::aws_efs("aws-efs", "aws-efs")]
#[case::smb("smb", "samba")]
#[case::openstack_cinder("openstack-cinder", "openstack-cinder")]
#[case::openstack_manila("openstack-manila", "openstack-manila")]
#[case::azure_disk("azure-disk", "azure-disk")]
#[case::azure_file("azure-file", "azure-file")]
#[case::ibm_vpc_block("ibm-vpc-block", "ibm-vpc-block")]
#[case::powervs_block("powervs-block", "powervs-block")]
#[case::vsphere("vsphere", "vsphere")]
fn operands_match_openshift_but_for_the_listed_differences(
    #[case] short_name: &str,
    #[case] fixture: &str,
) {
    let (ours, namespace) = our_objects(short_name);
    let openshift = openshift_objects(fixture, &namespace);
    let actual: Vec<Difference> = diff::diff_objects(&ours, &openshift);
    let module = short_name.replace('-', "_");
    let (path, expected) = expected_list(&module, "openshift");
    assert!(!expected.reference.trim().is_empty());

    let report =
        unlisted(&actual, &[&expected.differences]) + &stale(&actual, &expected.differences);
    assert!(
        report.is_empty(),
        "{short_name}: our operands and OpenShift's differ other than as {} lists:\n{report}",
        path.display()
    );
    for e in &expected.differences {
        assert!(
            !e.why.trim().is_empty(),
            "{}: {} has no reason",
            path.display(),
            e.at
        );
    }
}

/// The control-plane namespace of the hosted cluster in the HyperShift comparison.
const CONTROL_PLANE_NAMESPACE: &str = "clusters-hosted";
/// The release the hosted cluster runs, in the HyperShift comparison.
const RELEASE_VERSION: &str = "4.22.0";

/// OpenShift's objects for one side (`mgmt` or `guest`) of a driver with a hosted control
/// plane: `${NAMESPACE}` is the control-plane namespace there, `${NODE_NAMESPACE}` the guest's.
fn openshift_hosted_objects(fixture: &str, side: &str, guest_namespace: &str) -> Vec<Value> {
    let ciphers: Vec<String> = CIPHERS.iter().map(|c| (*c).to_owned()).collect();
    let mut substitutions: Vec<(String, String)> = [
        ("${NAMESPACE}", CONTROL_PLANE_NAMESPACE),
        ("${NODE_NAMESPACE}", guest_namespace),
        ("${RELEASE_VERSION}", RELEASE_VERSION),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    substitutions.extend(fixtures::common_substitutions(
        guest_namespace,
        &ciphers,
        MIN_TLS,
    ));
    fixtures::load_from(
        &manifest_dir().join("tests/fixtures/openshift-hypershift"),
        &format!("{fixture}/{side}"),
        &substitutions,
    )
    .into_iter()
    .map(|mut v| {
        diff::drop_hash_annotations(&mut v);
        decode_secret_data(&mut v);
        v
    })
    .collect()
}

/// With a hosted control plane each operand must be on the side OpenShift puts it, and match
/// OpenShift's there but for the differences listed. What differs as it does standalone is
/// not listed again: the standalone list applies too (checked for staleness by the test
/// above); `src/<module>.openshift-hypershift-differences.yaml` lists the rest.
#[rstest]
#[case::aws_ebs("aws-ebs", "aws-ebs")]
#[case::azure_disk("azure-disk", "azure-disk")]
#[case::azure_file("azure-file", "azure-file")]
#[case::openstack_cinder("openstack-cinder", "openstack-cinder")]
#[case::openstack_manila("openstack-manila", "openstack-manila")]
fn hosted_operands_are_where_openshift_puts_them_and_match_but_for_the_listed_differences(
    #[case] short_name: &str,
    #[case] fixture: &str,
) {
    let def = drivers::by_name(short_name).unwrap();
    let mut inputs = our_inputs(&def, Topology::External);
    inputs.hosted = Some(csi_kit::HostedControlPlane {
        namespace: CONTROL_PLANE_NAMESPACE.to_owned(),
        release_version: RELEASE_VERSION.to_owned(),
        ..csi_kit::HostedControlPlane::default()
    });
    let sides = csi_kit::hosted::render_hosted(&def, &inputs).unwrap();
    let module = short_name.replace('-', "_");
    let (_, standalone) = expected_list(&module, "openshift");
    let (path, expected) = expected_list(&module, "openshift-hypershift");
    assert!(!expected.reference.trim().is_empty());
    let mut actual = Vec::new();
    let mut report = String::new();
    for (side, ours) in [("mgmt", &sides.management), ("guest", &sides.guest)] {
        let ours: Vec<Value> = ours.iter().map(comparable).collect();
        let openshift = openshift_hosted_objects(fixture, side, &def.namespace);
        let on_side = diff::diff_objects(&ours, &openshift);
        let lines = unlisted(&on_side, &[&standalone.differences, &expected.differences]);
        if !lines.is_empty() {
            report.push_str(&format!("  on the {side} side:\n{lines}"));
        }
        actual.extend(on_side);
    }
    report.push_str(&stale(&actual, &expected.differences));
    assert!(
        report.is_empty(),
        "{short_name} with a hosted control plane: our operands and OpenShift's differ other than as {} (and the standalone list) list:\n{report}",
        path.display()
    );
    for e in &expected.differences {
        assert!(
            !e.why.trim().is_empty(),
            "{}: {} has no reason",
            path.display(),
            e.at
        );
    }
}
