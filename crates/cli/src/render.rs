//! `storage-operator render`: what would be installed, offline, as multi-document YAML.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use api::config_v1::{PlatformType, TopologyMode};
use api::csidriver_v1alpha1::CSIDriverDeployment;
use api::operator_v1::LogLevel;
use csi_kit::{Inputs, Topology};
use storage_operator::plan::{decide, starter_objects};
use storage_operator::platform::{ClusterPlatform, Source};
use storage_operator::registry::ClusterDrivers;
use storage_operator::starter::{OPERATOR_IMAGE_ENV, StarterInputs, build_cluster_csi_driver};

use crate::cli::DEFAULT_IMAGE;

/// Renders one driver's operands.
pub fn driver(name: &str, topology: Topology) -> anyhow::Result<ExitCode> {
    let def = drivers::by_name(name)?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let objects = csi_kit::render(&def, &Inputs::offline(&def, topology, &env));
    print!("{}", to_yaml(&objects)?);
    Ok(ExitCode::SUCCESS)
}

/// Renders one driver's operands with a hosted control plane, each marked with its cluster.
pub fn hosted_driver(
    name: &str,
    topology: Topology,
    control_plane_namespace: &str,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        topology == Topology::External,
        "--hosted needs --topology External: a hosted cluster's control plane runs outside it (Infrastructure's controlPlaneTopology is External), not {topology}"
    );
    let def = drivers::by_name(name)?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut inputs = Inputs::offline(&def, topology, &env);
    inputs.hosted = Some(
        csi_kit::HostedControlPlane::from_env(control_plane_namespace, &env)
            .context("reading the hosted control plane's settings from the environment")?,
    );
    let sides = csi_kit::hosted::render_hosted(&def, &inputs)?;
    let marked: Vec<(&str, serde_json::Value)> = sides
        .iter()
        .map(|(side, operand)| (side.as_str(), operand.to_value()))
        .collect();
    print_marked(&marked)?;
    Ok(ExitCode::SUCCESS)
}

/// Renders the operands of every driver the cluster storage operator starts on `platform`; with
/// `hosted` (a control-plane namespace), for a hosted control plane, each object marked with its
/// cluster.
pub fn platform(
    platform: &str,
    topology: Topology,
    hosted: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let platform_type = PlatformType::KNOWN
        .iter()
        .find(|known| !known.is_empty() && known.eq_ignore_ascii_case(platform))
        .map(|known| PlatformType::from(*known))
        .with_context(|| {
            let known: Vec<&str> = PlatformType::KNOWN
                .iter()
                .copied()
                .filter(|p| !p.is_empty())
                .collect();
            format!(
                "unknown platform {platform:?}: expected one of {}",
                known.join(", ")
            )
        })?;
    let cluster = ClusterPlatform {
        platform: platform_type.clone(),
        control_plane_topology: match topology {
            Topology::HighlyAvailable
            | Topology::Kubernetes {
                control_plane_nodes: true,
            } => TopologyMode::HighlyAvailable,
            Topology::SingleReplica => TopologyMode::SingleReplica,
            Topology::External
            | Topology::Kubernetes {
                control_plane_nodes: false,
            } => TopologyMode::External,
        },
        azure_stack_hub: false,
        infrastructure_name: None,
        source: Source::Infrastructure,
        problem: None,
    };
    let (mut started, blocked, _) = decide(&cluster, &ClusterDrivers::default());
    if !blocked.is_empty() {
        eprintln!(
            "error: platform {platform_type} cannot be rendered completely:\n  {}\ndrivers available now: {}",
            blocked.join("\n  "),
            drivers::short_names().join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    if started.is_empty() {
        eprintln!(
            "no CSI driver is installed on platform {platform_type} with topology {topology}"
        );
        return Ok(ExitCode::SUCCESS);
    }
    if hosted.is_some() {
        anyhow::ensure!(
            topology == Topology::External,
            "--hosted needs --topology External: a hosted cluster's control plane runs outside it (Infrastructure's controlPlaneTopology is External), not {topology}"
        );
        for (entry, _) in started.iter().filter(|(entry, _)| !entry.hosted) {
            eprintln!(
                "{} is not started with a hosted control plane (OpenShift does not run it there)",
                entry.short_name
            );
        }
        started.retain(|(entry, _)| entry.hosted);
        if started.is_empty() {
            eprintln!(
                "no CSI driver is installed on platform {platform_type} with a hosted control plane"
            );
            return Ok(ExitCode::SUCCESS);
        }
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let inputs = StarterInputs {
        topology,
        log_level: LogLevel::Normal,
        proxy: Default::default(),
        env: env.clone(),
        operator_image: env
            .get(OPERATOR_IMAGE_ENV)
            .cloned()
            .unwrap_or_else(|| DEFAULT_IMAGE.to_owned()),
        tls_profile: None,
    };
    if let Some(namespace) = hosted {
        return hosted_platform(&started, &inputs, namespace, &env);
    }
    // What the cluster storage operator creates, then what each driver operator creates.
    let mut objects: Vec<serde_json::Value> = starter_objects(&started, &inputs)
        .iter()
        .map(|o| o.to_value())
        .collect();
    for (entry, def) in &started {
        objects.extend(serde_json::to_value(build_cluster_csi_driver(entry, &inputs)).ok());
        objects.extend(csi_kit::render(def, &Inputs::offline(def, topology, &env)));
    }
    print!("{}", to_yaml(&objects)?);
    Ok(ExitCode::SUCCESS)
}

/// [`platform`] with a hosted control plane in `namespace`.
fn hosted_platform(
    started: &[(storage_operator::registry::DriverEntry, csi_kit::DriverDef)],
    inputs: &StarterInputs,
    namespace: &str,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let hcp = csi_kit::HostedControlPlane::from_env(namespace, env)
        .context("reading the hosted control plane's settings from the environment")?;
    let starter = storage_operator::hosted::hosted_starter_objects(started, inputs, &hcp);
    let mut marked: Vec<(&str, serde_json::Value)> = Vec::new();
    marked.extend(
        starter
            .management
            .iter()
            .map(|o| ("management", o.to_value())),
    );
    marked.extend(starter.guest.iter().map(|o| ("guest", o.to_value())));
    for (entry, def) in started {
        marked.extend(
            serde_json::to_value(build_cluster_csi_driver(entry, inputs))
                .ok()
                .map(|cr| ("guest", cr)),
        );
        let mut driver_inputs = Inputs::offline(def, Topology::External, env);
        driver_inputs.hosted = Some(hcp.clone());
        let sides = csi_kit::hosted::render_hosted(def, &driver_inputs)?;
        marked.extend(sides.iter().map(|(side, o)| (side.as_str(), o.to_value())));
    }
    print_marked(&marked)?;
    Ok(ExitCode::SUCCESS)
}

/// Multi-document YAML, each document preceded by `# cluster: <side>`.
fn print_marked(objects: &[(&str, serde_json::Value)]) -> anyhow::Result<()> {
    let documents = objects
        .iter()
        .map(|(side, object)| {
            let yaml = api::yaml::to_string(object).context("rendering an object as YAML")?;
            Ok(format!("# cluster: {side}\n{yaml}"))
        })
        .collect::<anyhow::Result<Vec<String>>>()?;
    print!("{}", documents.join("---\n"));
    Ok(())
}

/// Renders every object the CSIDriverDeployment controller creates for the object in `file`.
/// An object that breaks a rule is not rendered: each problem is printed, naming its field.
pub fn csi_driver_deployment(file: &Path, topology: Topology) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut cd: CSIDriverDeployment = match api::yaml::from_str(&text) {
        Ok(cd) => cd,
        Err(error) => {
            eprintln!(
                "error: {} is not a CSIDriverDeployment: {error}",
                file.display()
            );
            return Ok(ExitCode::from(2));
        }
    };
    cd.metadata
        .namespace
        .get_or_insert_with(|| "default".to_owned());
    let problems = csi_driver_deployment::validate(&cd, &Default::default());
    if !problems.is_empty() {
        eprintln!(
            "error: CSIDriverDeployment {} cannot be installed:",
            file.display()
        );
        for problem in &problems {
            eprintln!("  {problem}");
        }
        return Ok(ExitCode::from(2));
    }
    let mut inputs = csi_driver_deployment::DeclaredInputs::offline(topology);
    inputs.env = std::env::vars().collect();
    let objects: Vec<serde_json::Value> = csi_driver_deployment::build_operands(&cd, &inputs)
        .iter()
        .map(csi_kit::Operand::to_value)
        .collect();
    print!("{}", to_yaml(&objects)?);
    Ok(ExitCode::SUCCESS)
}

fn to_yaml(objects: &[serde_json::Value]) -> anyhow::Result<String> {
    let documents = objects
        .iter()
        .map(|object| api::yaml::to_string(object).context("rendering an object as YAML"))
        .collect::<anyhow::Result<Vec<String>>>()?;
    Ok(documents.join("---\n"))
}
