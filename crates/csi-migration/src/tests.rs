//! Translation tables per plugin, error cases included. Objects are written as JSON, as an
//! admin would see them.

use k8s_openapi::api::core::v1::{PersistentVolume, Pod, Volume};
use k8s_openapi::api::storage::v1::StorageClass;
use rstest::rstest;
use serde_json::{Value, json};

use super::*;

fn sc(provisioner: &str, parameters: Value) -> StorageClass {
    serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "c"}, "provisioner": provisioner, "parameters": parameters,
    }))
    .expect("storage class")
}

fn pv(labels: Value, spec: Value) -> PersistentVolume {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv", "labels": labels}, "spec": spec,
    }))
    .expect("pv")
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("json")
}

fn fields(notes: &[Note]) -> Vec<&str> {
    notes.iter().map(|n| n.field.as_str()).collect()
}

#[test]
fn names_match_upstream() {
    let table: Vec<_> = Plugin::ALL
        .iter()
        .map(|p| (p.in_tree_name(), p.csi_driver(), p.topology_key()))
        .collect();
    assert_eq!(
        table,
        vec![
            (
                "kubernetes.io/aws-ebs",
                "ebs.csi.aws.com",
                Some("topology.ebs.csi.aws.com/zone")
            ),
            (
                "kubernetes.io/gce-pd",
                "pd.csi.storage.gke.io",
                Some("topology.gke.io/zone")
            ),
            (
                "kubernetes.io/azure-disk",
                "disk.csi.azure.com",
                Some("topology.disk.csi.azure.com/zone")
            ),
            ("kubernetes.io/azure-file", "file.csi.azure.com", None),
            (
                "kubernetes.io/cinder",
                "cinder.csi.openstack.org",
                Some("topology.cinder.csi.openstack.org/zone")
            ),
            (
                "kubernetes.io/vsphere-volume",
                "csi.vsphere.vmware.com",
                Some("topology.csi.vmware.com/zone")
            ),
            ("kubernetes.io/portworx-volume", "pxd.portworx.com", None),
        ]
    );
    for plugin in Plugin::ALL {
        assert_eq!(
            Plugin::from_in_tree_name(plugin.in_tree_name()),
            Some(plugin)
        );
        assert_eq!(Plugin::from_csi_driver(plugin.csi_driver()), Some(plugin));
    }
    assert_eq!(Plugin::from_in_tree_name("kubernetes.io/rbd"), None);
}

// StorageClasses.

#[rstest]
#[case::ebs(
    "kubernetes.io/aws-ebs",
    json!({"type": "io1", "iopsPerGB": "10", "fsType": "xfs", "zones": "us-east-1a,us-east-1b"}),
    json!({"type": "io1", "iopsPerGB": "10", "allowautoiopspergbincrease": "true", "csi.storage.k8s.io/fstype": "xfs"}),
    json!([{"matchLabelExpressions": [{"key": "topology.ebs.csi.aws.com/zone", "values": ["us-east-1a", "us-east-1b"]}]}]),
)]
#[case::gce(
    "kubernetes.io/gce-pd",
    json!({"type": "pd-ssd", "replication-type": "regional-pd", "zone": "us-central1-a"}),
    json!({"type": "pd-ssd", "replication-type": "regional-pd"}),
    json!([{"matchLabelExpressions": [{"key": "topology.gke.io/zone", "values": ["us-central1-a"]}]}]),
)]
#[case::azure_disk(
    "kubernetes.io/azure-disk",
    json!({"skuName": "Premium_LRS", "fsType": "ext4"}),
    json!({"skuName": "Premium_LRS", "fsType": "ext4"}),
    Value::Null,
)]
#[case::azure_file(
    "kubernetes.io/azure-file",
    json!({"skuName": "Standard_LRS", "secretNamespace": "ns"}),
    json!({"skuName": "Standard_LRS", "secretNamespace": "ns"}),
    Value::Null,
)]
#[case::cinder(
    "kubernetes.io/cinder",
    json!({"type": "fast", "availability": "nova", "fstype": "ext4"}),
    json!({"type": "fast", "availability": "nova", "csi.storage.k8s.io/fstype": "ext4"}),
    Value::Null,
)]
#[case::vsphere(
    "kubernetes.io/vsphere-volume",
    json!({"datastore": "ds1", "diskformat": "thin", "storagePolicyName": "gold", "hostFailuresToTolerate": "1", "fstype": "ext4", "vsanstorage": "x"}),
    json!({"datastore-migrationparam": "ds1", "diskformat-migrationparam": "thin", "storagepolicyname": "gold",
           "hostfailurestotolerate-migrationparam": "1", "csi.storage.k8s.io/fstype": "ext4", "csimigration": "true"}),
    Value::Null,
)]
#[case::portworx(
    "kubernetes.io/portworx-volume",
    json!({"repl": "2", "fs": "ext4"}),
    json!({"repl": "2", "fs": "ext4"}),
    Value::Null,
)]
fn storage_class_table(
    #[case] provisioner: &str,
    #[case] parameters: Value,
    #[case] expected: Value,
    #[case] topologies: Value,
) {
    let plugin = Plugin::from_in_tree_name(provisioner).expect("plugin");
    let out = translate_storage_class(&sc(provisioner, parameters.clone())).expect("translates");
    let json = to_json(&out.object);
    assert_eq!(json["provisioner"], plugin.csi_driver());
    assert_eq!(json["parameters"], expected);
    assert_eq!(json["allowedTopologies"], topologies);
    assert_eq!(out.notes[0].field, "provisioner");
    // Every input parameter that is not in the output under its own name has a note.
    for key in parameters.as_object().expect("map").keys() {
        if expected.get(key).is_none() {
            assert!(
                out.notes
                    .iter()
                    .any(|n| n.field == format!("parameters.{key}")),
                "no note for dropped or renamed {key}: {:?}",
                out.notes
            );
        }
    }
}

#[test]
fn a_default_class_keeps_its_annotation_with_a_warning() {
    let mut class = sc("kubernetes.io/gce-pd", json!({}));
    class.metadata.annotations =
        Some([(DEFAULT_CLASS_ANNOTATION.to_string(), "true".to_string())].into());
    let out = translate_storage_class(&class).expect("translates");
    assert_eq!(
        to_json(&out.object)["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION],
        "true"
    );
    assert!(
        fields(&out.notes)
            .contains(&"metadata.annotations[storageclass.kubernetes.io/is-default-class]")
    );
    let plain =
        translate_storage_class(&sc("kubernetes.io/gce-pd", json!({}))).expect("translates");
    assert_eq!(fields(&plain.notes), vec!["provisioner"]);
}

#[test]
fn vsphere_drops_unsupported_parameter_with_a_note() {
    let out = translate_storage_class(&sc(
        "kubernetes.io/vsphere-volume",
        json!({"vsanstorage": "x"}),
    ))
    .expect("translates");
    let note = out
        .notes
        .iter()
        .find(|n| n.field == "parameters.vsanstorage")
        .expect("note");
    assert!(note.message.starts_with("dropped"), "{note}");
}

#[rstest]
#[case::gce("kubernetes.io/gce-pd", "topology.gke.io/zone")]
#[case::ebs("kubernetes.io/aws-ebs", "topology.ebs.csi.aws.com/zone")]
#[case::azure("kubernetes.io/azure-disk", "topology.disk.csi.azure.com/zone")]
#[case::cinder("kubernetes.io/cinder", "topology.cinder.csi.openstack.org/zone")]
fn allowed_topology_keys_are_rewritten(#[case] provisioner: &str, #[case] key: &str) {
    let mut class = sc(provisioner, json!({}));
    class.allowed_topologies = serde_json::from_value(json!([{"matchLabelExpressions": [
        {"key": "failure-domain.beta.kubernetes.io/zone", "values": ["z1"]},
        {"key": "example.com/rack", "values": ["r1"]},
    ]}]))
    .expect("terms");
    let out = translate_storage_class(&class).expect("translates");
    let json = to_json(&out.object);
    assert_eq!(
        json["allowedTopologies"][0]["matchLabelExpressions"][0]["key"],
        key
    );
    assert_eq!(
        json["allowedTopologies"][0]["matchLabelExpressions"][1]["key"],
        "example.com/rack"
    );
    assert!(fields(&out.notes).contains(&"allowedTopologies[0].matchLabelExpressions[0].key"));
}

#[test]
fn vsphere_rewrites_zone_topologies_and_keeps_regions() {
    let mut class = sc("kubernetes.io/vsphere-volume", json!({}));
    class.allowed_topologies = serde_json::from_value(json!([{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["z1"]},
        {"key": "topology.kubernetes.io/region", "values": ["r1"]},
    ]}]))
    .expect("terms");
    let json = to_json(&translate_storage_class(&class).expect("translates").object);
    let exprs = &json["allowedTopologies"][0]["matchLabelExpressions"];
    assert_eq!(exprs[0]["key"], "topology.csi.vmware.com/zone");
    // As upstream: only zone keys are rewritten in a class's topologies.
    assert_eq!(exprs[1]["key"], "topology.kubernetes.io/region");
}

#[rstest]
#[case::zone_and_topologies("kubernetes.io/gce-pd", json!({"zone": "a"}), true, "parameters.zone")]
#[case::zones_and_topologies("kubernetes.io/aws-ebs", json!({"zones": "a,b"}), true, "parameters.zones")]
#[case::csi_provisioner("pd.csi.storage.gke.io", json!({}), false, "provisioner")]
#[case::unknown_provisioner("example.com/nfs", json!({}), false, "provisioner")]
fn storage_class_errors(
    #[case] provisioner: &str,
    #[case] parameters: Value,
    #[case] with_topologies: bool,
    #[case] field: &str,
) {
    let mut class = sc(provisioner, parameters);
    if with_topologies {
        class.allowed_topologies = serde_json::from_value(json!([{"matchLabelExpressions": [
            {"key": "topology.kubernetes.io/zone", "values": ["z"]}]}]))
        .expect("terms");
    }
    let error = translate_storage_class(&class).expect_err("fails");
    assert_eq!(error.field(), field, "{error}");
}

// PersistentVolumes, in-tree -> CSI.

#[test]
fn ebs_pv_strips_the_aws_url_and_moves_the_zone() {
    let input = pv(
        json!({"topology.kubernetes.io/zone": "us-east-1a"}),
        json!({"accessModes": ["ReadWriteOnce"], "awsElasticBlockStore": {
            "volumeID": "aws://us-east-1a/vol-0123456789abcdef0", "fsType": "ext4", "partition": 2, "readOnly": true}}),
    );
    let out = translate_pv_to_csi(&input).expect("translates");
    let spec = &to_json(&out.object)["spec"];
    assert_eq!(
        spec["csi"],
        json!({"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123456789abcdef0", "fsType": "ext4",
               "readOnly": true, "volumeAttributes": {"partition": "2"}})
    );
    assert!(spec.get("awsElasticBlockStore").is_none());
    assert_eq!(
        spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
        json!({"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1a"]})
    );
    assert!(fields(&out.notes).contains(&"spec.awsElasticBlockStore.volumeID"));
}

#[rstest]
#[case::bare("vol-abc", Some("vol-abc"))]
#[case::url("aws://us-east-1a/vol-abc", Some("vol-abc"))]
#[case::url_without_zone("aws:///vol-abc", Some("vol-abc"))]
#[case::url_not_a_volume("aws://us-east-1a/snap-abc", None)]
#[case::url_nested("aws://us-east-1a/x/vol-abc", None)]
#[case::empty("", None)]
fn ebs_volume_ids(#[case] id: &str, #[case] expected: Option<&str>) {
    let input = pv(json!({}), json!({"awsElasticBlockStore": {"volumeID": id}}));
    match (translate_pv_to_csi(&input), expected) {
        (Ok(out), Some(handle)) => assert_eq!(
            out.object
                .spec
                .and_then(|s| s.csi)
                .map(|c| c.volume_handle)
                .as_deref(),
            Some(handle)
        ),
        (Err(e), None) => {
            assert!(
                matches!(e.cause(), TranslateError::MalformedVolumeId { .. }),
                "{e}"
            );
            assert_eq!(e.field(), "spec.awsElasticBlockStore.volumeID");
        }
        (other, _) => panic!("{id:?}: unexpected {other:?}"),
    }
}

#[rstest]
#[case::zonal(json!({"topology.kubernetes.io/zone": "us-central1-a"}), Ok("projects/UNSPECIFIED/zones/us-central1-a/disks/d1"))]
#[case::beta(json!({"failure-domain.beta.kubernetes.io/zone": "us-central1-b"}), Ok("projects/UNSPECIFIED/zones/us-central1-b/disks/d1"))]
#[case::regional(json!({"topology.kubernetes.io/zone": "us-central1-a__us-central1-b"}), Ok("projects/UNSPECIFIED/regions/us-central1/disks/d1"))]
#[case::none(json!({}), Ok("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d1"))]
#[case::two_regions(json!({"topology.kubernetes.io/zone": "us-central1-a__europe-west1-b"}), Err("metadata.labels[topology.kubernetes.io/zone]"))]
#[case::bad_zone(json!({"topology.kubernetes.io/zone": "a__b"}), Err("metadata.labels[topology.kubernetes.io/zone]"))]
fn gce_pv_handles(#[case] labels: Value, #[case] expected: Result<&str, &str>) {
    let input = pv(
        labels,
        json!({"accessModes": ["ReadWriteOnce"], "gcePersistentDisk": {"pdName": "d1"}}),
    );
    match (translate_pv_to_csi(&input), expected) {
        (Ok(out), Ok(handle)) => {
            let csi = out.object.spec.and_then(|s| s.csi).expect("csi");
            assert_eq!(csi.volume_handle, handle);
            assert_eq!(csi.volume_attributes.expect("attrs")["partition"], "");
        }
        (Err(e), Err(field)) => assert_eq!(e.field(), field, "{e}"),
        (other, _) => panic!("unexpected {other:?}"),
    }
}

#[rstest]
#[case(&["ReadWriteMany"], &["ReadWriteOnce"])]
#[case(&["ReadWriteOnce", "ReadOnlyMany"], &["ReadWriteOnce"])]
#[case(&["ReadOnlyMany"], &["ReadOnlyMany"])]
#[case(&["ReadWriteOnce"], &["ReadWriteOnce"])]
fn gce_access_modes(#[case] input: &[&str], #[case] expected: &[&str]) {
    let out = translate_pv_to_csi(&pv(
        json!({}),
        json!({"accessModes": input, "gcePersistentDisk": {"pdName": "d1"}}),
    ))
    .expect("translates");
    assert_eq!(to_json(&out.object)["spec"]["accessModes"], json!(expected));
    assert_eq!(
        fields(&out.notes).contains(&"spec.accessModes"),
        input != expected,
        "{:?}",
        out.notes
    );
}

#[test]
fn gce_pv_affinity_and_beta_region() {
    let input = pv(
        json!({}),
        json!({"gcePersistentDisk": {"pdName": "d1"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [
            {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["us-central1-a"]},
            {"key": "failure-domain.beta.kubernetes.io/region", "operator": "In", "values": ["us-central1"]},
        ]}]}}}),
    );
    let out = translate_pv_to_csi(&input).expect("translates");
    let exprs = &to_json(&out.object)["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"];
    assert_eq!(exprs[0]["key"], "topology.gke.io/zone");
    assert_eq!(exprs[1]["key"], "topology.kubernetes.io/region");
}

#[rstest]
#[case::managed(
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1",
    true
)]
#[case::unmanaged("https://acct.blob.core.windows.net/vhds/d1.vhd", true)]
#[case::no_disk(
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/",
    false
)]
#[case::garbage("d1", false)]
#[case::blob_without_vhds("https://acct.blob.core.windows.net/d1.vhd", false)]
fn azure_disk_pv(#[case] uri: &str, #[case] ok: bool) {
    let input = pv(
        json!({}),
        json!({"azureDisk": {"diskName": "d1", "diskURI": uri, "cachingMode": "ReadOnly", "fsType": "xfs"}}),
    );
    match translate_pv_to_csi(&input) {
        Ok(out) => {
            assert!(ok, "{uri} accepted");
            assert_eq!(
                to_json(&out.object)["spec"]["csi"],
                json!({"driver": "disk.csi.azure.com", "volumeHandle": uri, "fsType": "xfs",
                       "volumeAttributes": {"cachingmode": "ReadOnly", "fstype": "xfs", "kind": "Managed"}})
            );
        }
        Err(e) => {
            assert!(!ok, "{uri} refused: {e}");
            assert_eq!(e.field(), "spec.azureDisk.diskURI");
        }
    }
}

#[test]
fn azure_file_pv() {
    let mut input = pv(
        json!({}),
        json!({"accessModes": ["ReadWriteMany"], "azureFile": {"secretName": "azure-storage-account-acct1-secret", "shareName": "share1"},
               "claimRef": {"namespace": "ns1", "name": "claim1"}}),
    );
    input.metadata.annotations = Some(
        [(
            "kubernetes.io/azure-file-resource-group".to_string(),
            "rg1".to_string(),
        )]
        .into(),
    );
    let out = translate_pv_to_csi(&input).expect("translates");
    assert_eq!(
        to_json(&out.object)["spec"]["csi"],
        json!({"driver": "file.csi.azure.com", "volumeHandle": "rg1#acct1#share1#pv#ns1",
               "volumeAttributes": {"sharename": "share1"},
               "nodeStageSecretRef": {"name": "azure-storage-account-acct1-secret", "namespace": "ns1"}})
    );
    assert!(fields(&out.notes).contains(&"spec.azureFile.secretNamespace"));
}

#[rstest]
#[case::odd_secret_name(json!({"secretName": "mysecret", "shareName": "s", "secretNamespace": "ns"}), Ok("#mysecret#s#pv#ns"))]
#[case::no_share(json!({"secretName": "azure-storage-account-a-secret", "shareName": "", "secretNamespace": "ns"}), Err("spec.azureFile.shareName"))]
#[case::no_secret(json!({"secretName": "", "shareName": "s", "secretNamespace": "ns"}), Err("spec.azureFile.secretName"))]
#[case::no_namespace(json!({"secretName": "azure-storage-account-a-secret", "shareName": "s"}), Err("spec.azureFile.secretNamespace"))]
fn azure_file_pv_cases(#[case] source: Value, #[case] expected: Result<&str, &str>) {
    let input = pv(json!({}), json!({"azureFile": source}));
    match (translate_pv_to_csi(&input), expected) {
        (Ok(out), Ok(handle)) => {
            assert_eq!(
                out.object
                    .spec
                    .and_then(|s| s.csi)
                    .expect("csi")
                    .volume_handle,
                handle
            );
            assert!(fields(&out.notes).contains(&"spec.azureFile.secretName"));
        }
        (Err(e), Err(field)) => assert_eq!(e.field(), field, "{e}"),
        (other, _) => panic!("unexpected {other:?}"),
    }
}

#[test]
fn cinder_pv_drops_secret_and_moves_zone() {
    let input = pv(
        json!({"topology.kubernetes.io/zone": "nova"}),
        json!({"cinder": {"volumeID": "uuid-1", "fsType": "ext4", "secretRef": {"name": "s"}}}),
    );
    let out = translate_pv_to_csi(&input).expect("translates");
    let spec = &to_json(&out.object)["spec"];
    assert_eq!(
        spec["csi"],
        json!({"driver": "cinder.csi.openstack.org", "volumeHandle": "uuid-1", "fsType": "ext4"})
    );
    assert_eq!(
        spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["key"],
        "topology.cinder.csi.openstack.org/zone"
    );
    assert!(fields(&out.notes).contains(&"spec.cinder.secretRef"));
    let error = translate_pv_to_csi(&pv(json!({}), json!({"cinder": {"volumeID": " "}})))
        .expect_err("empty id");
    assert_eq!(error.field(), "spec.cinder.volumeID");
}

#[test]
fn vsphere_pv() {
    let input = pv(
        json!({"topology.kubernetes.io/zone": "z1"}),
        json!({"vsphereVolume": {"volumePath": "[ds1] kubevols/v1.vmdk", "fsType": "ext4",
            "storagePolicyName": "gold", "storagePolicyID": "id"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["r1"]}]}]}}}),
    );
    let out = translate_pv_to_csi(&input).expect("translates");
    let spec = &to_json(&out.object)["spec"];
    assert_eq!(
        spec["csi"],
        json!({"driver": "csi.vsphere.vmware.com", "volumeHandle": "[ds1] kubevols/v1.vmdk",
               "fsType": "ext4", "volumeAttributes": {"storagepolicyname": "gold"}})
    );
    let exprs = &spec["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"];
    assert_eq!(exprs[0]["key"], "topology.csi.vmware.com/region");
    assert_eq!(exprs[1]["key"], "topology.csi.vmware.com/zone");
    assert!(fields(&out.notes).contains(&"spec.vsphereVolume.storagePolicyID"));
}

#[test]
fn portworx_pv_loses_read_only_as_upstream_does() {
    let out = translate_pv_to_csi(&pv(
        json!({}),
        json!({"portworxVolume": {"volumeID": "px1", "readOnly": true}}),
    ))
    .expect("translates");
    assert_eq!(
        to_json(&out.object)["spec"]["csi"],
        json!({"driver": "pxd.portworx.com", "volumeHandle": "px1"})
    );
    assert!(fields(&out.notes).contains(&"spec.portworxVolume.readOnly"));
    let volume: Volume = serde_json::from_value(
        json!({"name": "v", "portworxVolume": {"volumeID": "p1", "readOnly": true}}),
    )
    .expect("volume");
    let inline = translate_inline_volume(&volume, "ns").expect("translates");
    assert_eq!(
        to_json(&inline.object)["spec"]["accessModes"],
        json!(["ReadOnlyMany"])
    );
}

#[test]
fn portworx_pv_and_non_migratable_pv() {
    let out = translate_pv_to_csi(&pv(
        json!({}),
        json!({"portworxVolume": {"volumeID": "px1"}}),
    ))
    .expect("translates");
    assert_eq!(
        to_json(&out.object)["spec"]["csi"],
        json!({"driver": "pxd.portworx.com", "volumeHandle": "px1"})
    );
    let error = translate_pv_to_csi(&pv(json!({}), json!({"nfs": {"server": "s", "path": "/"}})))
        .expect_err("nfs does not migrate");
    assert_eq!(error.field(), "spec");
}

// Inline volumes.

#[rstest]
#[case::ebs(json!({"name": "v", "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}), "ebs.csi.aws.com-vol-1", "vol-1", "ReadWriteOnce")]
#[case::gce(json!({"name": "v", "gcePersistentDisk": {"pdName": "d1"}}), "pd.csi.storage.gke.io-d1", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d1", "ReadWriteOnce")]
#[case::gce_ro(json!({"name": "v", "gcePersistentDisk": {"pdName": "d1", "readOnly": true}}), "pd.csi.storage.gke.io-d1", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d1", "ReadOnlyMany")]
#[case::azure_disk(json!({"name": "v", "azureDisk": {"diskName": "d1", "diskURI": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1"}}), "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1", "ReadWriteOnce")]
#[case::azure_file(json!({"name": "v", "azureFile": {"secretName": "azure-storage-account-a-secret", "shareName": "s1"}}), "#a#s1#v#ns1", "#a#s1#v#ns1", "ReadWriteMany")]
#[case::cinder(json!({"name": "v", "cinder": {"volumeID": "c1"}}), "cinder.csi.openstack.org-c1", "c1", "ReadWriteOnce")]
#[case::vsphere(json!({"name": "v", "vsphereVolume": {"volumePath": "[ds] v.vmdk"}}), "csi.vsphere.vmware.com-[ds] v.vmdk", "[ds] v.vmdk", "ReadWriteOnce")]
#[case::portworx(json!({"name": "v", "portworxVolume": {"volumeID": "p1"}}), "pxd.portworx.com-p1", "p1", "ReadWriteOnce")]
fn inline_volumes(
    #[case] volume: Value,
    #[case] name: &str,
    #[case] handle: &str,
    #[case] mode: &str,
) {
    let volume: Volume = serde_json::from_value(volume).expect("volume");
    let out = translate_inline_volume(&volume, "ns1").expect("translates");
    let json = to_json(&out.object);
    assert_eq!(json["metadata"]["name"], name);
    assert_eq!(json["spec"]["csi"]["volumeHandle"], handle);
    assert_eq!(json["spec"]["accessModes"], json!([mode]));
    assert_eq!(json["spec"]["volumeMode"], "Filesystem");
    if volume.azure_file.is_some() {
        assert_eq!(
            json["spec"]["csi"]["nodeStageSecretRef"]["namespace"],
            "ns1"
        );
    }
}

#[test]
fn pod_volumes_are_named_by_index() {
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
        "containers": [],
        "volumes": [
            {"name": "cfg", "configMap": {"name": "c"}},
            {"name": "data", "cinder": {"volumeID": "c1", "secretRef": {"name": "s"}}},
            {"name": "bad", "awsElasticBlockStore": {"volumeID": "aws://z/nope"}},
        ]}}),
    )
    .expect("pod");
    let error = translate_pod_volumes(&pod).expect_err("third volume is malformed");
    assert_eq!(
        error.field(),
        "spec.volumes[2].awsElasticBlockStore.volumeID"
    );
    let mut pod = pod;
    if let Some(volumes) = pod.spec.as_mut().and_then(|s| s.volumes.as_mut()) {
        volumes.pop();
    }
    let out = translate_pod_volumes(&pod).expect("translates");
    assert_eq!(out.len(), 1);
    assert_eq!(
        fields(&out[0].notes),
        vec!["spec.volumes[1].cinder.secretRef"]
    );
}

// CSI -> in-tree.

fn csi_pv(labels: Value, csi: Value, affinity: Value) -> PersistentVolume {
    let mut spec = json!({"csi": csi});
    if !affinity.is_null() {
        spec["nodeAffinity"] =
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": affinity}]}});
    }
    pv(labels, spec)
}

#[test]
fn ebs_back_to_in_tree_derives_region() {
    let input = csi_pv(
        json!({}),
        json!({"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1", "fsType": "ext4", "volumeAttributes": {"partition": "3"}}),
        json!([{"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-west-2a"]}]),
    );
    let out = translate_pv_to_in_tree(&input).expect("translates");
    let json = to_json(&out.object);
    assert_eq!(
        json["spec"]["awsElasticBlockStore"],
        json!({"volumeID": "vol-1", "fsType": "ext4", "partition": 3})
    );
    assert!(json["spec"].get("csi").is_none());
    assert_eq!(
        json["metadata"]["labels"],
        json!({"topology.kubernetes.io/zone": "us-west-2a", "topology.kubernetes.io/region": "us-west-2"})
    );
    let exprs =
        &json["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"];
    assert_eq!(exprs[0]["key"], "topology.kubernetes.io/zone");
    assert_eq!(
        exprs[1],
        json!({"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-west-2"]})
    );
}

#[rstest]
#[case::aws_local_zone(&["us-west-2-lax-1a"], Ok("us-west-2"))]
#[case::aws_gov(&["us-gov-east-1a"], Ok("us-gov-east-1"))]
#[case::aws_two(&["us-west-2a", "us-east-1a"], Err(()))]
#[case::aws_wavelength(&["us-east-1-wl1-bos-wlz-1"], Ok("us-east-1"))]
#[case::aws_six_parts(&["us-east-1-wl1-bos-1"], Err(()))]
#[case::aws_garbage(&["nowhere"], Err(()))]
fn aws_regions(#[case] zones: &[&str], #[case] expected: Result<&str, ()>) {
    let zones: Vec<String> = zones.iter().map(|z| z.to_string()).collect();
    assert_eq!(
        aws_ebs::region_from_zones(&zones).map_err(|_| ()),
        expected.map(str::to_string)
    );
}

#[rstest]
#[case::zonal("projects/p/zones/us-central1-a/disks/d1", Some("d1"))]
#[case::regional("projects/p/regions/us-central1/disks/d1", Some("d1"))]
#[case::short("projects/p/disks/d1", None)]
#[case::wrong_kind("projects/p/buckets/x/disks/d1", None)]
#[case::name_only("d1", None)]
fn gce_back_to_in_tree(#[case] handle: &str, #[case] name: Option<&str>) {
    let input = csi_pv(
        json!({}),
        json!({"driver": "pd.csi.storage.gke.io", "volumeHandle": handle, "volumeAttributes": {"partition": ""}}),
        json!([{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-a"]}]),
    );
    match (translate_pv_to_in_tree(&input), name) {
        (Ok(out), Some(name)) => {
            let json = to_json(&out.object);
            assert_eq!(json["spec"]["gcePersistentDisk"], json!({"pdName": name}));
            assert_eq!(
                json["metadata"]["labels"]["topology.kubernetes.io/region"],
                "us-central1"
            );
        }
        (Err(e), None) => {
            assert!(matches!(
                e.cause(),
                TranslateError::MalformedVolumeId {
                    plugin: Plugin::GcePd,
                    ..
                }
            ));
            assert_eq!(e.field(), "spec.csi.volumeHandle");
        }
        (other, _) => panic!("{handle}: unexpected {other:?}"),
    }
}

#[test]
fn gce_bad_partition_names_the_attribute() {
    let input = csi_pv(
        json!({}),
        json!({"driver": "pd.csi.storage.gke.io", "volumeHandle": "projects/p/zones/z/disks/d", "volumeAttributes": {"partition": "one"}}),
        Value::Null,
    );
    let error = translate_pv_to_in_tree(&input).expect_err("bad partition");
    assert_eq!(error.field(), "spec.csi.volumeAttributes.partition");
}

#[test]
fn azure_disk_back_to_in_tree() {
    let uri = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1";
    let out = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": "disk.csi.azure.com", "volumeHandle": uri, "volumeAttributes": {"cachingmode": "None", "skuname": "x"}}),
        Value::Null,
    ))
    .expect("translates");
    assert_eq!(
        to_json(&out.object)["spec"]["azureDisk"],
        json!({"diskName": "d1", "diskURI": uri, "cachingMode": "None", "kind": "Managed", "fsType": "", "readOnly": false})
    );
    assert!(fields(&out.notes).contains(&"spec.csi.volumeAttributes.skuname"));
    let error = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": "disk.csi.azure.com", "volumeHandle": "d1"}),
        Value::Null,
    ))
    .expect_err("not a URI");
    assert_eq!(error.field(), "spec.csi.volumeHandle");
}

#[test]
fn azure_file_back_to_in_tree() {
    let out = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": "file.csi.azure.com", "volumeHandle": "rg1#acct1#share1#"}),
        Value::Null,
    ))
    .expect("translates");
    let json = to_json(&out.object);
    assert_eq!(
        json["spec"]["azureFile"],
        json!({"secretName": "azure-storage-account-acct1-secret", "secretNamespace": "default", "shareName": "share1"})
    );
    assert_eq!(
        json["metadata"]["annotations"]["kubernetes.io/azure-file-resource-group"],
        "rg1"
    );
    let error = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": "file.csi.azure.com", "volumeHandle": "acct1#share1"}),
        Value::Null,
    ))
    .expect_err("too few parts");
    assert!(
        matches!(error, TranslateError::MalformedVolumeId { .. }),
        "{error}"
    );
}

#[test]
fn vsphere_back_to_in_tree_needs_the_initial_path() {
    let out = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": "csi.vsphere.vmware.com", "volumeHandle": "uuid", "volumeAttributes": {
            "initialvolumefilepath": "[ds] kubevols/v.vmdk", "storagepolicyname": "gold"}}),
        json!([{"key": "topology.csi.vmware.com/zone", "operator": "In", "values": ["z1"]}]),
    ))
    .expect("translates");
    let json = to_json(&out.object);
    assert_eq!(
        json["spec"]["vsphereVolume"],
        json!({"volumePath": "[ds] kubevols/v.vmdk"})
    );
    assert_eq!(
        json["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "z1"
    );
    let error = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": "csi.vsphere.vmware.com", "volumeHandle": "uuid"}),
        Value::Null,
    ))
    .expect_err("no path");
    assert_eq!(
        error.field(),
        "spec.csi.volumeAttributes.initialvolumefilepath"
    );
}

#[rstest]
#[case::cinder("cinder.csi.openstack.org", "cinder")]
#[case::portworx("pxd.portworx.com", "portworxVolume")]
fn id_handle_plugins_back_to_in_tree(#[case] driver: &str, #[case] source: &str) {
    let out = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": driver, "volumeHandle": "id1", "fsType": "ext4"}),
        Value::Null,
    ))
    .expect("translates");
    assert_eq!(
        to_json(&out.object)["spec"][source],
        json!({"volumeID": "id1", "fsType": "ext4"})
    );
}

#[test]
fn round_trip_keeps_the_in_tree_source() {
    let input = pv(
        json!({"topology.kubernetes.io/zone": "us-central1-a"}),
        json!({"accessModes": ["ReadWriteOnce"], "gcePersistentDisk": {"pdName": "d1", "fsType": "ext4"}}),
    );
    let csi = translate_pv_to_csi(&input).expect("to csi").object;
    let back = translate_pv_to_in_tree(&csi).expect("back").object;
    assert_eq!(
        to_json(&back)["spec"]["gcePersistentDisk"],
        to_json(&input)["spec"]["gcePersistentDisk"]
    );
}

#[test]
fn back_translation_errors() {
    let error = translate_pv_to_in_tree(&pv(
        json!({}),
        json!({"gcePersistentDisk": {"pdName": "d"}}),
    ))
    .expect_err("not csi");
    assert_eq!(error.field(), "spec.csi");
    let error = translate_pv_to_in_tree(&csi_pv(
        json!({}),
        json!({"driver": "efs.csi.aws.com", "volumeHandle": "fs-1"}),
        Value::Null,
    ))
    .expect_err("no in-tree plugin");
    assert_eq!(error.field(), "spec.csi.driver");
}
