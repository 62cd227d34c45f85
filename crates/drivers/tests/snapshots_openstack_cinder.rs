#![allow(clippy::unwrap_used)]
//! Snapshots of every object rendered for OpenStack Cinder, one file per topology, plus the
//! generated cloud.conf of a self-signed cloud. Review a change to these files as you would a
//! change to the manifests themselves.

use std::collections::BTreeMap;

use csi_kit::{Inputs, Topology};
use rstest::rstest;

#[rstest]
#[case::highly_available(Topology::HighlyAvailable)]
#[case::single_replica(Topology::SingleReplica)]
#[case::external(Topology::External)]
#[case::kubernetes(Topology::Kubernetes { control_plane_nodes: true })]
#[case::kubernetes_without_control_plane(Topology::Kubernetes { control_plane_nodes: false })]
fn every_object_for_each_topology(#[case] topology: Topology) {
    let def = drivers::by_name("openstack-cinder").unwrap();
    let mut inputs = Inputs::offline(&def, topology, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    let objects = csi_kit::render(&def, &inputs);
    insta::assert_yaml_snapshot!(format!("openstack_cinder_{topology}"), objects);
}

/// A self-signed cloud without usable zones: the CA is copied and named, topology is off,
/// and the hashes of the generated ConfigMap and the credentials are on the pods.
#[test]
fn self_signed_cloud_without_zones() {
    let def = drivers::by_name("openstack-cinder").unwrap();
    let mut inputs = Inputs::offline(&def, Topology::HighlyAvailable, &BTreeMap::new());
    inputs.source_config_maps.insert(
        "openshift-config/cloud-provider-config".to_owned(),
        BTreeMap::from([
            (
                "config".to_owned(),
                "[Global]\nsecret-name = openstack-credentials\nca-file = /etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem\n[BlockStorage]\nignore-volume-az = yes\nnode-volume-attach-limit = 25\n"
                    .to_owned(),
            ),
            (
                "ca-bundle.pem".to_owned(),
                "-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n".to_owned(),
            ),
        ]),
    );
    inputs.secret_hashes.insert(
        "openstack-cloud-credentials".to_owned(),
        "cReDs01=".to_owned(),
    );
    let hooked: Vec<serde_json::Value> = csi_kit::render(&def, &inputs)
        .into_iter()
        .filter(|o| {
            matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet"))
                || o["metadata"]["name"] == "cloud-conf"
        })
        .collect();
    assert_eq!(hooked.len(), 3);
    insta::assert_yaml_snapshot!("openstack_cinder_self_signed_without_zones", hooked);
}
