//! The `storage-operator` binary under test, run as a process with a ServiceAccount's token.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The binary: `E2E_BIN`, else the workspace's debug build next to the test executable
/// (`cargo test --workspace` builds it for the cli tests).
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("E2E_BIN") {
        return PathBuf::from(path);
    }
    // target/debug/deps/<test> -> target/debug/storage-operator
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("the test executable: {e}"));
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("storage-operator"))
        .unwrap_or_else(|| panic!("no directory above {}", exe.display()));
    assert!(
        path.exists(),
        "{} not found: build it with `cargo build -p cli` (or name it with E2E_BIN)",
        path.display()
    );
    path
}

/// Writes the e2e cluster's kubeconfig with `token` as its only credential (and `namespace`
/// in its contexts, when given) into a directory of `purpose` under the temporary directory,
/// and returns its path.
pub fn kubeconfig_with_token(token: &str, namespace: Option<&str>, purpose: &str) -> PathBuf {
    let path = std::env::var(crate::KUBECONFIG_ENV)
        .unwrap_or_else(|_| panic!("{} is not set", crate::KUBECONFIG_ENV));
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let mut config: Value =
        serde_json::to_value(kubeconfig).unwrap_or_else(|e| panic!("a kubeconfig: {e}"));
    for user in config["users"].as_array_mut().into_iter().flatten() {
        user["user"] = json!({"token": token});
    }
    if let Some(namespace) = namespace {
        for context in config["contexts"].as_array_mut().into_iter().flatten() {
            context["context"]["namespace"] = json!(namespace);
        }
    }
    let dir = std::env::temp_dir().join(format!("e2e-{purpose}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let file = dir.join("kubeconfig");
    std::fs::write(&file, config.to_string())
        .unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    file
}
