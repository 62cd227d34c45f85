//! With a hosted control plane, the controller's input hashes are those of the objects it
//! mounts in the control-plane namespace, never of the guest's objects of the same names (as
//! OpenShift's operator hashes the control-plane namespace's Secrets for the controller and
//! the guest's for the node plugin).

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::collections::BTreeMap;

use csi_kit::hash::{HashedKind, annotation_key};
use csi_kit::hosted::render_hosted;
use csi_kit::{HostedControlPlane, Inputs, Operand, Topology};

const CP: &str = "clusters-demo";
const CREDENTIALS: &str = "ebs-cloud-credentials";

fn annotations(operand: &Operand) -> BTreeMap<String, String> {
    let value = operand.to_value();
    serde_json::from_value(value["spec"]["template"]["metadata"]["annotations"].clone())
        .unwrap_or_default()
}

#[test]
fn the_controller_rolls_with_the_control_planes_credentials_not_the_guests() {
    let def = drivers::by_name("aws-ebs").unwrap();
    let mut inputs = Inputs::offline(&def, Topology::External, &BTreeMap::new());
    inputs
        .secret_hashes
        .insert(CREDENTIALS.to_owned(), "guest-hash".to_owned());
    let mut control_plane = HostedControlPlane {
        namespace: CP.to_owned(),
        ..HostedControlPlane::default()
    };
    control_plane
        .secret_hashes
        .insert(CREDENTIALS.to_owned(), "control-plane-hash".to_owned());
    inputs.hosted = Some(control_plane);
    let sides = render_hosted(&def, &inputs).unwrap();
    let controller = sides
        .management
        .iter()
        .find(|o| matches!(o, Operand::Deployment(_)))
        .unwrap();
    let hashes = annotations(controller);
    assert_eq!(
        hashes
            .get(&annotation_key(CP, CREDENTIALS, HashedKind::Secret))
            .map(String::as_str),
        Some("control-plane-hash"),
        "{hashes:?}"
    );
    let guests = annotation_key(&def.namespace, CREDENTIALS, HashedKind::Secret);
    assert!(
        !hashes.contains_key(&guests) && !hashes.values().any(|h| h == "guest-hash"),
        "no hash of the guest's objects on the controller: {hashes:?}"
    );

    // Not known in the control-plane namespace (yet): no hash, rather than the guest's.
    inputs.hosted.as_mut().unwrap().secret_hashes.clear();
    let sides = render_hosted(&def, &inputs).unwrap();
    let controller = sides
        .management
        .iter()
        .find(|o| matches!(o, Operand::Deployment(_)))
        .unwrap();
    let hashes = annotations(controller);
    assert!(
        !hashes.contains_key(&annotation_key(CP, CREDENTIALS, HashedKind::Secret))
            && !hashes.contains_key(&guests),
        "{hashes:?}"
    );
}
