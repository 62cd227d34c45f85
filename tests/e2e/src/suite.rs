//! Kubernetes' external storage e2e suite (`e2e.test` v1.36.2), run through
//! `../shared/k8s/e2e.sh` beside the repository, as `.ci/run` finds it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root (test driver definitions name files relative to it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("the repository's root: {e}"))
}

/// `../shared/k8s/e2e.sh`, beside the repository `root`.
pub fn e2e_sh(root: &Path) -> PathBuf {
    let path = root.join("../shared/k8s/e2e.sh");
    assert!(
        path.is_file(),
        "{} not found: the script that runs e2e.test (../shared/k8s beside the repository)",
        path.display()
    );
    path
}

/// Runs `e2e.sh --driver <definition> [--focus F] [--skip S] -- <extra>` from the repository's
/// root against the cluster of `kubeconfig`, with its reports in `reports`.
pub fn run(
    kubeconfig: &Path,
    reports: &Path,
    definition: &Path,
    focus: Option<&str>,
    skip: Option<&str>,
    extra: &[&str],
) -> Output {
    let root = repo_root();
    let script = e2e_sh(&root);
    let mut command = Command::new(&script);
    command
        .current_dir(&root)
        .env("KUBECONFIG", kubeconfig)
        .env("E2E_REPORT_DIR", reports)
        .arg("--driver")
        .arg(definition);
    if let Some(focus) = focus {
        command.args(["--focus", focus]);
    }
    if let Some(skip) = skip {
        command.args(["--skip", skip]);
    }
    command
        .arg("--")
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()))
}
