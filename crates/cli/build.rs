//! Records the git commit the binary was built from, for `--version`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GIT_COMMIT");
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    println!("cargo:rerun-if-changed=../../.git/refs/heads");
    // An explicit GIT_COMMIT wins: container builds often have no .git directory.
    let commit = std::env::var("GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        });
    println!(
        "cargo:rustc-env=STORAGE_OPERATOR_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}
