#![allow(clippy::unwrap_used)] // tests: a panic is a failure
//! Every example under `examples/` decodes into its typed API and is accepted by the committed
//! CRD, as an API server would accept it.

mod common;

use std::path::Path;

use api::csidriver_v1alpha1::CSIDriverDeployment;

#[test]
fn every_csidriverdeployment_example_decodes_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/csidriverdeployment");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "examples found: {files:?}");
    for file in files {
        let object = common::read_yaml(&file);
        let errors = common::validate(&object, None);
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
        let decoded: Result<CSIDriverDeployment, _> = serde_json::from_value(object);
        assert!(decoded.is_ok(), "{}: {:?}", file.display(), decoded.err());
    }
}
