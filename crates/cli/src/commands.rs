//! What each subcommand does.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Command, MigrationCommand};
use crate::render;

/// Runs one subcommand.
pub fn run(command: Command, log: crate::logging::LogControl) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => crate::run::run(args, log),
        Command::Driver {
            name,
            config,
            guest_kubeconfig,
            process,
        } => crate::run::driver(
            &name,
            config.as_deref(),
            guest_kubeconfig.as_deref(),
            process,
            log,
        ),
        Command::Builds {
            selector,
            watch_namespace,
            builder_image,
            release_version,
            process,
        } => crate::run::builds(
            builds::controller::Settings {
                builder_image,
                selector,
                namespace: watch_namespace,
                version: release_version,
            },
            process,
        ),
        Command::CsiDriverDeployments { process } => crate::run::csi_driver_deployments(process),
        Command::Render {
            driver: Some(name),
            topology,
            hosted: true,
            control_plane_namespace,
            ..
        } => render::hosted_driver(&name, topology, &control_plane_namespace),
        Command::Render {
            driver: Some(name),
            topology,
            ..
        } => render::driver(&name, topology),
        Command::Render {
            platform: Some(platform),
            topology,
            hosted,
            control_plane_namespace,
            ..
        } => render::platform(
            &platform,
            topology,
            hosted.then_some(control_plane_namespace.as_str()),
        ),
        Command::Render {
            csidriverdeployment: Some(file),
            topology,
            ..
        } => render::csi_driver_deployment(&file, topology),
        Command::Render { .. } => {
            anyhow::bail!("render needs --driver, --platform or --csidriverdeployment")
        }
        Command::Crds {
            out_dir: Some(dir), ..
        } => write_crds(&dir),
        Command::Crds {
            check: Some(dir), ..
        } => check_crds(&dir),
        Command::Crds { .. } => print_crds(),
        Command::Manifests {
            hosted_control_plane_namespace: Some(namespace),
            image,
            ..
        } => print_hosted_manifests(&namespace, &image),
        Command::Manifests {
            out_dir: Some(dir),
            image,
            ..
        } => write_manifests(&dir, &image),
        Command::Manifests {
            check: Some(dir),
            image,
            ..
        } => check_manifests(&dir, &image),
        Command::Manifests { .. } => {
            anyhow::bail!("manifests needs --out-dir, --check or --hosted-control-plane-namespace")
        }
        Command::Migration {
            command: MigrationCommand::Translate { file },
        } => crate::migration::translate(&file),
        Command::Diagnose(args) => crate::diagnose::run(args),
    }
}

/// The exit code of a subcommand that failed: 2 for `diagnose`, where 1 means that it found a
/// problem; 1 for the others.
pub fn failure_code(command: &Command) -> ExitCode {
    match command {
        Command::Diagnose(_) => ExitCode::from(crate::diagnose::EXIT_ERROR),
        _ => ExitCode::FAILURE,
    }
}

fn print_crds() -> anyhow::Result<ExitCode> {
    let rendered = api::crds::rendered().context("rendering the CRDs as YAML")?;
    let documents: Vec<&str> = rendered.iter().map(|(_, yaml)| yaml.as_str()).collect();
    print!("{}", documents.join("---\n"));
    Ok(ExitCode::SUCCESS)
}

fn crd_files() -> anyhow::Result<Vec<(String, String)>> {
    api::crds::rendered().context("rendering the CRDs as YAML")
}

fn write_crds(dir: &Path) -> anyhow::Result<ExitCode> {
    write_files(dir, &crd_files()?)
}

fn check_crds(dir: &Path) -> anyhow::Result<ExitCode> {
    check_files(
        dir,
        &crd_files()?,
        &format!("storage-operator crds --out-dir {}", dir.display()),
    )
}

/// Every generated file under `deploy/`: the CRDs and the operator's install manifests for
/// each flavour.
fn manifest_files(image: &str) -> anyhow::Result<Vec<(String, String)>> {
    use storage_operator::manifests::{Flavour, build};
    let mut files: Vec<(String, String)> = crd_files()?
        .into_iter()
        .map(|(name, yaml)| (format!("crds/{name}"), yaml))
        .collect();
    for flavour in [
        builds::manifests::Flavour::Kubernetes,
        builds::manifests::Flavour::OpenShift,
    ] {
        let dir = match flavour {
            builds::manifests::Flavour::Kubernetes => Flavour::Kubernetes.dir(),
            builds::manifests::Flavour::OpenShift => Flavour::OpenShift.dir(),
        };
        let documents = builds::manifests::build(flavour, image)
            .iter()
            .map(|object| api::yaml::to_string(object).context("rendering a manifest as YAML"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        files.push((
            format!("{dir}/builds.yaml"),
            format!(
                "{}{}",
                api::crds::GENERATED_HEADER
                    .replace("crds --out-dir deploy/crds", "manifests --out-dir deploy"),
                documents.join("---\n")
            ),
        ));
    }
    for flavour in [Flavour::Kubernetes, Flavour::OpenShift] {
        let documents = build(flavour, image)
            .iter()
            .map(|object| api::yaml::to_string(object).context("rendering a manifest as YAML"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        files.push((
            format!("{}/storage-operator.yaml", flavour.dir()),
            format!(
                "{}{}",
                api::crds::GENERATED_HEADER
                    .replace("crds --out-dir deploy/crds", "manifests --out-dir deploy"),
                documents.join("---\n")
            ),
        ));
    }
    // The management side of a hosted control plane, with HyperShift's placeholder for the
    // control-plane namespace (`manifests --hosted-control-plane-namespace NS` fills it in).
    files.push((
        "hypershift/management.yaml".to_owned(),
        format!(
            "{}{}",
            api::crds::GENERATED_HEADER
                .replace("crds --out-dir deploy/crds", "manifests --out-dir deploy"),
            hosted_manifests(
                storage_operator::hosted_install::CONTROL_PLANE_PLACEHOLDER,
                image
            )?
        ),
    ));
    Ok(files)
}

/// The management side of a hosted control plane, for the control-plane namespace
/// `namespace`, as multi-document YAML.
fn hosted_manifests(namespace: &str, image: &str) -> anyhow::Result<String> {
    let documents = storage_operator::hosted_install::build_management(namespace, image)
        .iter()
        .map(|object| api::yaml::to_string(object).context("rendering a manifest as YAML"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(documents.join("---\n"))
}

fn print_hosted_manifests(namespace: &str, image: &str) -> anyhow::Result<ExitCode> {
    if namespace.trim().is_empty() {
        anyhow::bail!(
            "--hosted-control-plane-namespace is empty: give the hosted cluster's control-plane namespace (e.g. clusters-demo)"
        );
    }
    print!("{}", hosted_manifests(namespace, image)?);
    Ok(ExitCode::SUCCESS)
}

pub fn write_manifests(dir: &Path, image: &str) -> anyhow::Result<ExitCode> {
    write_files(dir, &manifest_files(image)?)
}

pub fn check_manifests(dir: &Path, image: &str) -> anyhow::Result<ExitCode> {
    check_files(
        dir,
        &manifest_files(image)?,
        &format!("storage-operator manifests --out-dir {}", dir.display()),
    )
}

fn write_files(dir: &Path, files: &[(String, String)]) -> anyhow::Result<ExitCode> {
    for (name, content) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(file = %path.display(), "wrote generated file");
    }
    Ok(ExitCode::SUCCESS)
}

fn check_files(
    dir: &Path,
    files: &[(String, String)],
    regenerate: &str,
) -> anyhow::Result<ExitCode> {
    let mut stale = Vec::new();
    for (name, content) in files {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == *content => {}
            Ok(_) => stale.push(format!(
                "{} differs from the generated file",
                path.display()
            )),
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
        "error: committed generated files are stale; run `{regenerate}` and commit the result"
    );
    Ok(ExitCode::FAILURE)
}
