//! The vSphere cloud config and credentials as both the driver's config ([`crate::vsphere`])
//! and its storage policy ([`crate::vsphere_policy`]) read them: where the cloud config is,
//! the vCenters it names, and each vCenter's user and password from the credentials Secret.
//! Both read them, so they sit below both.

use std::collections::BTreeMap;

use csi_kit::Inputs;
use csi_kit::derived::ini;

/// The credentials Secret (cloud-credential-operator's).
pub const CREDENTIALS_SECRET: &str = "vmware-vsphere-cloud-credentials";
/// The cloud config: `namespace/name` of its ConfigMap.
pub const SOURCE_ID: &str = "openshift-config/cloud-provider-config";
/// The cloud config's key in its ConfigMap.
pub const SOURCE_KEY: &str = "config";

/// What the driver's config says about the vCenter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VCenter {
    /// Its host name or address.
    pub server: String,
    /// Datacenters, comma-separated.
    pub datacenters: String,
    /// Whether its certificate is not verified.
    pub insecure: bool,
    /// Its port, when not 443.
    pub port: Option<String>,
}

fn parse_bool(field: &str, value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "true" | "yes" | "on" | "1" => Ok(true),
        "false" | "no" | "off" | "0" => Ok(false),
        _ => Err(format!(
            "{field} = {value:?} is not a boolean: use true or false"
        )),
    }
}

/// The vCenters of the cloud config, ordered by server: every `[VirtualCenter "<server>"]`
/// section, else `[Workspace] server`. Each gets its own credentials in the driver's config
/// (keys `<server>.username` and `<server>.password` of the credentials Secret).
pub fn vcenters(sections: &ini::Sections) -> Result<Vec<VCenter>, String> {
    let workspace = sections.get("Workspace").cloned().unwrap_or_default();
    let global = sections.get("Global").cloned().unwrap_or_default();
    let named: Vec<(&String, &BTreeMap<String, String>)> = sections
        .iter()
        .filter(|(name, _)| name.starts_with("VirtualCenter"))
        .collect();
    if named.is_empty() {
        let Some(server) = workspace.get("server").filter(|s| !s.is_empty()) else {
            return Err(
                "it names no vCenter: add a [VirtualCenter \"<server>\"] section or [Workspace] server"
                    .to_owned(),
            );
        };
        return Ok(vec![vcenter_of(
            server.clone(),
            &BTreeMap::new(),
            &workspace,
            &global,
        )?]);
    }
    let mut out = named
        .into_iter()
        .map(|(name, section)| {
            let server = name
                .trim_start_matches("VirtualCenter")
                .trim()
                .trim_matches('"')
                .to_owned();
            if server.is_empty() {
                return Err(
                    "[VirtualCenter] has no server: write [VirtualCenter \"<server>\"]".to_owned(),
                );
            }
            vcenter_of(server, section, &workspace, &global)
        })
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(|a, b| a.server.cmp(&b.server));
    Ok(out)
}

/// One vCenter's settings: its section's, else `[Workspace]`'s and `[Global]`'s.
fn vcenter_of(
    server: String,
    section: &BTreeMap<String, String>,
    workspace: &BTreeMap<String, String>,
    global: &BTreeMap<String, String>,
) -> Result<VCenter, String> {
    let datacenters = section
        .get("datacenters")
        .or_else(|| workspace.get("datacenter"))
        .filter(|d| !d.trim().is_empty())
        .cloned()
        .ok_or_else(|| {
            format!("vCenter {server} has no datacenters: set datacenters in its [VirtualCenter] section or [Workspace] datacenter")
        })?;
    let insecure = match section.get("insecure-flag").or(global.get("insecure-flag")) {
        Some(v) => parse_bool("insecure-flag", v)?,
        None => false,
    };
    let port = section
        .get("port")
        .or(global.get("port"))
        .filter(|p| !p.is_empty())
        .cloned();
    if let Some(p) = &port
        && p.parse::<u16>().is_err()
    {
        return Err(format!("port = {p:?} is not a port number"));
    }
    Ok(VCenter {
        server,
        datacenters,
        insecure,
        port,
    })
}

/// The vCenter `server`'s `username` or `password` (`what`) from the credentials Secret (key
/// `<server>.<what>`), or an error naming the missing key.
pub fn credential<'a>(inputs: &'a Inputs, server: &str, what: &str) -> Result<&'a str, String> {
    let key = format!("{server}.{what}");
    inputs
        .credentials
        .get(&key)
        .filter(|value| !value.is_empty())
        .ok_or_else(|| {
            format!(
                "Secret {}/{CREDENTIALS_SECRET} has no key {key}: cloud-credential-operator writes it for each vCenter of the cloud config; elsewhere add it",
                csi_kit::def::DEFAULT_NAMESPACE
            )
        })
}
