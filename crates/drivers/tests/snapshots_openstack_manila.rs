#![allow(clippy::unwrap_used)]
//! Snapshots of every object rendered for OpenStack Manila, one file per topology, plus the
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
    let def = drivers::by_name("openstack-manila").unwrap();
    let mut inputs = Inputs::offline(&def, topology, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    let objects = csi_kit::render(&def, &inputs);
    insta::assert_yaml_snapshot!(format!("openstack_manila_{topology}"), objects);
}

/// Two share types found by the probe, one needing its name cleaned: one class each; and the
/// node DaemonSets, Manila's and the NFS plugin's.
#[test]
fn share_types_and_the_node_plugins() {
    let def = drivers::by_name("openstack-manila").unwrap();
    let mut inputs = Inputs::offline(&def, Topology::HighlyAvailable, &BTreeMap::new());
    inputs.probe_facts = vec!["default".to_owned(), "CephFS_Gold".to_owned()];
    let hooked: Vec<serde_json::Value> = csi_kit::render(&def, &inputs)
        .into_iter()
        .filter(|o| matches!(o["kind"].as_str(), Some("DaemonSet" | "StorageClass")))
        .collect();
    assert_eq!(hooked.len(), 4);
    insta::assert_yaml_snapshot!("openstack_manila_share_types_and_node_plugins", hooked);
}
