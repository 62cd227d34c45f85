#![allow(clippy::unwrap_used)]
//! The test manifests for the Kubernetes external storage e2e suite
//! (`test/e2e/<short name>/manifest.yaml` at the repository root) agree with the catalogue:
//! the directory is a driver's short name, `DriverInfo.Name` is its CSI name, and the
//! StorageClass and VolumeSnapshotClass they name are ones the driver creates.

use std::path::PathBuf;

use serde_json::Value;

fn e2e_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test/e2e")
}

#[test]
fn every_manifest_names_a_driver_and_classes_it_creates() {
    let Ok(entries) = std::fs::read_dir(e2e_dir()) else {
        panic!("no test/e2e directory at the repository root");
    };
    let mut checked = 0;
    for entry in entries {
        let dir = entry.unwrap().path();
        let short_name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(dir.join("manifest.yaml"))
            .unwrap_or_else(|e| panic!("test/e2e/{short_name}/manifest.yaml: {e}"));
        let manifest: Value = serde_saphyr::from_str(&text)
            .unwrap_or_else(|e| panic!("test/e2e/{short_name}/manifest.yaml: {e}"));
        let Ok(def) = drivers::by_name(&short_name) else {
            // A driver another change adds; its own tests check it.
            continue;
        };
        assert_eq!(
            manifest["DriverInfo"]["Name"],
            def.name.as_str(),
            "{short_name}"
        );
        let class = manifest["StorageClass"]["FromExistingClassName"]
            .as_str()
            .unwrap_or_default();
        assert!(
            def.storage_classes.iter().any(|c| c.name == class) || class.starts_with("csi-manila-"),
            "{short_name}: StorageClass {class:?} is not one the driver creates"
        );
        if let Some(snapshot) = manifest["SnapshotClass"]["FromExistingClassName"].as_str() {
            assert!(
                def.volume_snapshot_classes
                    .iter()
                    .any(|c| c.name == snapshot),
                "{short_name}: VolumeSnapshotClass {snapshot:?} is not one the driver creates"
            );
            assert_eq!(
                manifest["DriverInfo"]["Capabilities"]["snapshotDataSource"], true,
                "{short_name}"
            );
        }
        assert!(
            manifest["DriverInfo"]["Capabilities"]["persistence"] == true,
            "{short_name}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no manifest of a catalogue driver was checked");
}
