//! The binary as a user runs it: exit codes, what goes to stdout and stderr.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::path::Path;
use std::process::{Command, Output};

fn storage_operator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_storage-operator"))
        .args(args)
        .env_remove("LOG_LEVEL")
        .env_remove("LOG_FORMAT")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn deploy_crds() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/crds"))
}

#[test]
fn version_names_version_and_commit() {
    let output = storage_operator(&["--version"]);
    assert!(output.status.success());
    let line = stdout(&output);
    assert!(
        line.starts_with(&format!(
            "storage-operator {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
}

#[test]
fn help_lists_every_subcommand() {
    let output = storage_operator(&["--help"]);
    assert!(output.status.success());
    let help = stdout(&output);
    for subcommand in ["run", "driver", "render", "crds"] {
        assert!(
            help.contains(&format!("\n  {subcommand} ")),
            "{subcommand} missing from:\n{help}"
        );
    }
    assert!(help.contains("--log-format"));
}

#[test]
fn crds_prints_every_crd_as_multi_document_yaml() {
    let output = storage_operator(&["crds"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let yaml = stdout(&output);
    let documents: Vec<serde_json::Value> = yaml
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .collect();
    let names: Vec<&str> = documents
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "clustercsidrivers.operator.openshift.io",
            "storages.operator.openshift.io",
            "clusteroperators.config.openshift.io",
            "infrastructures.config.openshift.io",
            "proxies.config.openshift.io",
            "featuregates.config.openshift.io",
        ]
    );
    assert!(
        documents
            .iter()
            .all(|d| d["kind"] == "CustomResourceDefinition")
    );
    assert!(!yaml.contains('\u{1b}'), "no terminal colours in the YAML");
}

#[test]
fn crds_check_passes_on_the_committed_files_and_names_stale_ones() {
    let output = storage_operator(&["crds", "--check", deploy_crds().to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));

    let dir = std::env::temp_dir().join(format!("crds-check-{}", std::process::id()));
    let written = storage_operator(&["crds", "--out-dir", dir.to_str().unwrap()]);
    assert!(written.status.success(), "{}", stderr(&written));
    let edited = dir.join("config.openshift.io_proxies.yaml");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, text.replace("Proxy", "Proxxy")).unwrap();

    let output = storage_operator(&["crds", "--check", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("config.openshift.io_proxies.yaml differs"),
        "{message}"
    );
    assert!(
        !message.contains("clustercsidrivers"),
        "only the stale file is named: {message}"
    );
    assert!(
        message.contains("storage-operator crds --out-dir"),
        "says how to fix it: {message}"
    );
}

#[test]
fn unfinished_subcommands_say_so_and_fail() {
    for args in [&["run"][..], &["driver", "gcp-pd"], &["render"]] {
        let output = storage_operator(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains("is not implemented yet"),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty());
    }
}

#[test]
fn a_bad_log_filter_warns_and_carries_on() {
    let output = storage_operator(&["--log-level", "info,=[", "crds"]);
    assert!(output.status.success());
    assert!(
        stderr(&output).contains("invalid --log-level"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn json_logs_are_json_lines() {
    let dir = std::env::temp_dir().join(format!("crds-json-{}", std::process::id()));
    let output = storage_operator(&[
        "--log-format",
        "json",
        "crds",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(output.status.success());
    let logs = stderr(&output);
    assert!(!logs.is_empty());
    for line in logs.lines() {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(entry["fields"]["message"], "wrote CRD");
    }
}
