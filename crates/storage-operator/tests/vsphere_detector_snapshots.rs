//! Every object of the vSphere problem detector as the operator renders it, committed as a
//! reviewable snapshot (compare with OpenShift's `assets/vsphere_problem_detector/`; the
//! remaining differences are listed in `vsphere_detector`'s module docs).

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use csi_kit::Topology;
use serde_json::Value;
use storage_operator::vsphere_detector::{self as d, DeploymentInputs, InputHashes};

fn value<T: serde::Serialize>(object: T) -> Value {
    serde_json::to_value(object).unwrap()
}

#[test]
fn every_object_of_the_detector() {
    let deployment = d::build_deployment(&DeploymentInputs {
        image: "quay.io/openshift/origin-vsphere-problem-detector:latest".into(),
        verbosity: 2,
        topology: Topology::HighlyAvailable,
        proxy: Default::default(),
        hashes: InputHashes {
            credentials: Some("credentials-hash".into()),
            serving_cert: Some("serving-cert-hash".into()),
            cloud_config: Some("cloud-config-hash".into()),
        },
    });
    let objects = vec![
        value(d::build_service_account()),
        value(d::build_role()),
        value(d::build_role_binding()),
        value(d::build_cluster_role()),
        value(d::build_cluster_role_binding()),
        value(d::build_trusted_ca_bundle()),
        value(d::build_operator_config(None).unwrap()),
        value(d::build_service()),
        value(deployment),
        d::build_service_monitor(),
        d::build_prometheus_rule(),
        d::build_credentials_request(),
    ];
    insta::assert_yaml_snapshot!("vsphere_problem_detector", objects);
}
