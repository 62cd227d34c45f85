#![allow(clippy::unwrap_used)]
//! Snapshots of every object rendered for GCP PD, one file per topology. Review a change to
//! these files as you would a change to the manifests themselves.

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
    let def = drivers::by_name("gcp-pd").unwrap();
    let mut inputs = Inputs::offline(&def, topology, &BTreeMap::new());
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    let objects = csi_kit::render(&def, &inputs);
    insta::assert_yaml_snapshot!(format!("gcp_pd_{topology}"), objects);
}

/// The objects that hooks touch, with every input set: proxy, CA bundle, hashes, Debug,
/// a KMS key, a TLS profile, and another default StorageClass already in the cluster.
#[test]
fn hooked_objects_with_every_input_set() {
    use api::config_v1::ProxyStatus;
    use api::operator_v1::{
        CSIDriverConfigSpec, CSIDriverType, GCPCSIDriverConfigSpec, GCPKMSKeyReference, LogLevel,
    };
    use csi_kit::ExistingStorageClass;

    let def = drivers::by_name("gcp-pd").unwrap();
    let env = BTreeMap::from([
        (
            "DRIVER_IMAGE".to_owned(),
            "quay.io/openshift/origin-gcp-pd-csi-driver:4.21".to_owned(),
        ),
        (
            "KUBE_RBAC_PROXY_IMAGE".to_owned(),
            "quay.io/openshift/origin-kube-rbac-proxy:4.21".to_owned(),
        ),
    ]);
    let mut inputs = Inputs::offline(&def, Topology::HighlyAvailable, &env);
    inputs.cluster_id = Some("ci-op-x1y2z".to_owned());
    inputs.spec.operator.log_level = Some(LogLevel::Debug);
    inputs.proxy = ProxyStatus {
        http_proxy: Some("http://proxy.example.com:3128".to_owned()),
        https_proxy: Some("http://proxy.example.com:3128".to_owned()),
        no_proxy: Some(".cluster.local,.svc,10.0.0.0/16".to_owned()),
    };
    inputs.trusted_ca_bundle = true;
    inputs.config_map_hashes.insert(
        "gcp-pd-csi-driver-trusted-ca-bundle".to_owned(),
        "cAbUnDl=".to_owned(),
    );
    inputs
        .secret_hashes
        .insert("gcp-pd-cloud-credentials".to_owned(), "cReDs01=".to_owned());
    inputs.secret_hashes.insert(
        "gcp-pd-csi-driver-controller-metrics-serving-cert".to_owned(),
        "cErTs01=".to_owned(),
    );
    inputs.tls.min_version = Some("VersionTLS12".to_owned());
    inputs.tls.cipher_suites = vec![
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_owned(),
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned(),
    ];
    inputs.storage_classes = vec![ExistingStorageClass {
        name: "admins-choice".to_owned(),
        default_annotation: Some("true".to_owned()),
    }];
    inputs.spec.driver_config = Some(CSIDriverConfigSpec {
        driver_type: CSIDriverType::GCP,
        aws: None,
        azure: None,
        gcp: Some(GCPCSIDriverConfigSpec {
            kms_key: Some(GCPKMSKeyReference {
                name: "disks".to_owned(),
                key_ring: "cluster".to_owned(),
                project_id: "my-project".to_owned(),
                location: Some("us-central1".to_owned()),
            }),
        }),
        ibmcloud: None,
        vsphere: None,
        secrets_store: None,
    });
    let hooked: Vec<serde_json::Value> = csi_kit::render(&def, &inputs)
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("Deployment" | "DaemonSet" | "StorageClass")
            )
        })
        .collect();
    assert_eq!(hooked.len(), 4);
    insta::assert_yaml_snapshot!("gcp_pd_every_input_set", hooked);
}
