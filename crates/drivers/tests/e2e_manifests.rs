#![allow(clippy::unwrap_used)]
//! Every driver of the catalogue has a manifest for the Kubernetes external storage e2e suite
//! (`test/e2e/<driver>/manifest.yaml`), naming the driver and classes it really creates.

use std::path::PathBuf;

use serde_json::Value;

fn manifest(short_name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../test/e2e")
        .join(short_name)
        .join("manifest.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{short_name}: reading {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap()
}

#[test]
fn every_driver_has_a_manifest_naming_its_own_classes() {
    for short_name in drivers::short_names() {
        let def = drivers::by_name(short_name).unwrap();
        let m = manifest(short_name);
        assert_eq!(m["DriverInfo"]["Name"], def.name.as_str(), "{short_name}");
        match m["StorageClass"]["FromExistingClassName"].as_str() {
            Some(class) => assert!(
                def.storage_classes.iter().any(|c| c.name == class)
                    // Manila makes one class per share type the cloud offers.
                    || (short_name == "openstack-manila" && class.starts_with("csi-manila-")),
                "{short_name}: the driver creates no StorageClass {class}"
            ),
            // Drivers without a class of their own (each needs a file system or a server)
            // bring one for the test.
            None => {
                let file = m["StorageClass"]["FromFile"].as_str().unwrap_or_else(|| {
                    panic!("{short_name}: StorageClass needs FromExistingClassName or FromFile")
                });
                let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../..")
                    .join(file);
                let class: Value =
                    serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                assert_eq!(class["kind"], "StorageClass", "{short_name}");
                assert_eq!(class["provisioner"], def.name.as_str(), "{short_name}");
            }
        }
        let snapshots = m["DriverInfo"]["Capabilities"]["snapshotDataSource"] == true;
        match m["SnapshotClass"]["FromExistingClassName"].as_str() {
            Some(snapshot_class) => {
                assert!(
                    snapshots,
                    "{short_name}: a snapshot class without snapshots"
                );
                assert!(
                    def.volume_snapshot_classes
                        .iter()
                        .any(|c| c.name == snapshot_class),
                    "{short_name}: the driver creates no VolumeSnapshotClass {snapshot_class}"
                );
            }
            None => assert!(
                !snapshots,
                "{short_name}: snapshots without a snapshot class"
            ),
        }
        for capability in [
            "persistence",
            "block",
            "fsGroup",
            "exec",
            "topology",
            "multipods",
        ] {
            assert!(
                m["DriverInfo"]["Capabilities"][capability].is_boolean(),
                "{short_name}: capability {capability} is not stated"
            );
        }
    }
}

/// The directories of `test/e2e` that describe no catalogue driver: the hostpath driver of
/// `examples/csidriverdeployment/hostpath.yaml`, which `tests/e2e/tests/on_a_node.rs` runs the
/// suite against.
const NOT_CATALOGUE: &[&str] = &["hostpath"];

#[test]
fn every_manifest_directory_is_a_driver_of_the_catalogue() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test/e2e");
    let known = drivers::short_names();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(
            known.contains(&name.as_str()) || NOT_CATALOGUE.contains(&name.as_str()),
            "test/e2e/{name} is not a driver of the catalogue ({known:?})"
        );
    }
}
