#![allow(clippy::unwrap_used)]
//! Snapshots of every object rendered for vSphere, one file per topology, plus the
//! generated cloud.conf of a self-signed cloud. Review a change to these files as you would a
//! change to the manifests themselves.

use std::collections::BTreeMap;

use csi_kit::{Inputs, SecretData, Topology};
use rstest::rstest;
use serde_json::Value;

/// The objects as rendered, but Secrets' data decoded (`data` as text), so a reviewer reads the
/// generated config rather than its base64.
fn readable(objects: Vec<Value>) -> Vec<Value> {
    objects
        .into_iter()
        .map(|mut o| {
            if o["kind"] == "Secret" {
                let secret: k8s_openapi::api::core::v1::Secret =
                    serde_json::from_value(o.clone()).unwrap();
                o["data"] = serde_json::to_value(SecretData::of(&secret).0).unwrap();
            }
            o
        })
        .collect()
}

#[rstest]
#[case::highly_available(Topology::HighlyAvailable)]
#[case::single_replica(Topology::SingleReplica)]
#[case::external(Topology::External)]
#[case::kubernetes(Topology::Kubernetes { control_plane_nodes: true })]
#[case::kubernetes_without_control_plane(Topology::Kubernetes { control_plane_nodes: false })]
fn every_object_for_each_topology(#[case] topology: Topology) {
    let def = drivers::by_name("vsphere").unwrap();
    let mut inputs = Inputs::offline(&def, topology, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    let objects = readable(csi_kit::render(&def, &inputs));
    insta::assert_yaml_snapshot!(format!("vsphere_{topology}"), objects);
}

/// Every driverConfig.vSphere field set, a credentials Secret (a domain user, a password with a
/// quote and a backslash) and an explicit port: the generated config, the syncer, and the
/// node's volume limit.
#[test]
fn every_driver_config_field_set() {
    use api::operator_v1::{CSIDriverConfigSpec, CSIDriverType, VSphereCSIDriverConfigSpec};
    let def = drivers::by_name("vsphere").unwrap();
    let mut inputs = Inputs::offline(&def, Topology::HighlyAvailable, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    inputs.source_config_maps.insert(
        "openshift-config/cloud-provider-config".to_owned(),
        BTreeMap::from([(
            "config".to_owned(),
            "[Global]\ninsecure-flag = false\nport = 8443\n[VirtualCenter \"vc.example.com\"]\ndatacenters = dc1,dc2\n".to_owned(),
        )]),
    );
    inputs.secret_hashes.insert(
        "vmware-vsphere-cloud-credentials".to_owned(),
        "cReDs01=".to_owned(),
    );
    inputs.credentials = SecretData(BTreeMap::from([
        (
            "vc.example.com.username".to_owned(),
            r"CORP\svc-ocp".to_owned(),
        ),
        (
            "vc.example.com.password".to_owned(),
            r#"pa"ss\word"#.to_owned(),
        ),
    ]));
    inputs.spec.driver_config = Some(CSIDriverConfigSpec {
        driver_type: CSIDriverType::VSphere,
        aws: None,
        azure: None,
        gcp: None,
        ibmcloud: None,
        vsphere: Some(VSphereCSIDriverConfigSpec {
            topology_categories: Some(vec!["k8s-region".to_owned(), "k8s-zone".to_owned()]),
            global_max_snapshots_per_block_volume: Some(5),
            granular_max_snapshots_per_block_volume_in_vsan: Some(7),
            granular_max_snapshots_per_block_volume_in_vvol: Some(9),
            max_allowed_block_volumes_per_node: Some(100),
        }),
        secrets_store: None,
    });
    let hooked: Vec<serde_json::Value> = readable(csi_kit::render(&def, &inputs))
        .into_iter()
        .filter(|o| {
            matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet"))
                || o["metadata"]["name"] == "vsphere-csi-config-secret"
        })
        .collect();
    assert_eq!(hooked.len(), 3);
    insta::assert_yaml_snapshot!("vsphere_every_driver_config_field_set", hooked);
}
