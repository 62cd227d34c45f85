#![allow(clippy::unwrap_used)]
//! Snapshots of every object rendered for GCP PD, one file per topology. Review a change to
//! these files as you would a change to the manifests themselves.

use std::collections::BTreeMap;

use csi::{Inputs, Topology};
use rstest::rstest;

#[rstest]
#[case::highly_available(Topology::HighlyAvailable)]
#[case::single_replica(Topology::SingleReplica)]
#[case::external(Topology::External)]
#[case::kubernetes(Topology::Kubernetes { control_plane_nodes: true })]
#[case::kubernetes_without_control_plane(Topology::Kubernetes { control_plane_nodes: false })]
fn every_object_for_each_topology(#[case] topology: Topology) {
    let def = drivers::by_name("gcp-pd").unwrap();
    let mut inputs = Inputs::offline(&def, topology, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    let objects = csi::render(&def, &inputs);
    insta::assert_yaml_snapshot!(format!("gcp_pd_{topology}"), objects);
}
