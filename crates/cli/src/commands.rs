//! What each subcommand does.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::Command;
use crate::render;

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => crate::run::run(args),
        Command::Driver { name } => not_implemented(
            &format!("driver {name}"),
            "the CSI driver operators (issues #4 and #6)",
        ),
        Command::Render {
            driver: Some(name),
            topology,
            ..
        } => render::driver(&name, topology),
        Command::Render {
            platform: Some(platform),
            topology,
            ..
        } => render::platform(&platform, topology),
        Command::Render { .. } => anyhow::bail!("render needs --driver or --platform"),
        Command::Crds {
            out_dir: Some(dir), ..
        } => write_crds(&dir),
        Command::Crds {
            check: Some(dir), ..
        } => check_crds(&dir),
        Command::Crds { .. } => print_crds(),
    }
}

/// Subcommands whose logic has not landed yet say so and fail, never pretend to work.
fn not_implemented(command: &str, arrives_with: &str) -> anyhow::Result<ExitCode> {
    eprintln!(
        "error: `storage-operator {command}` is not implemented yet; it arrives with {arrives_with}"
    );
    Ok(ExitCode::from(2))
}

fn print_crds() -> anyhow::Result<ExitCode> {
    let rendered = api::crds::rendered().context("rendering the CRDs as YAML")?;
    let documents: Vec<&str> = rendered.iter().map(|(_, yaml)| yaml.as_str()).collect();
    print!("{}", documents.join("---\n"));
    Ok(ExitCode::SUCCESS)
}

fn write_crds(dir: &Path) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, yaml) in api::crds::rendered().context("rendering the CRDs as YAML")? {
        let path = dir.join(&name);
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(file = %path.display(), "wrote CRD");
    }
    Ok(ExitCode::SUCCESS)
}

fn check_crds(dir: &Path) -> anyhow::Result<ExitCode> {
    let mut stale = Vec::new();
    for (name, yaml) in api::crds::rendered().context("rendering the CRDs as YAML")? {
        let path = dir.join(&name);
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == yaml => {}
            Ok(_) => stale.push(format!("{} differs from the generated CRD", path.display())),
            Err(error) => stale.push(format!("{} cannot be read: {error}", path.display())),
        }
    }
    if stale.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for line in &stale {
        eprintln!("stale: {line}");
    }
    eprintln!(
        "error: the committed CRDs are stale; run `storage-operator crds --out-dir {}` and commit the result",
        dir.display()
    );
    Ok(ExitCode::FAILURE)
}
