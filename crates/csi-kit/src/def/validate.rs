//! The checks of a driver table that serde cannot make: names, ports, volumes and containers
//! unique within a pod, the pod layout after OpenShift's assets, RBAC without wildcards, at most
//! one default class of each kind, sizes and modes of what the driver provisions. Every problem
//! is collected, so one round of fixes is enough.

use std::collections::BTreeMap;

use crate::def::{
    ACCESS_MODES, ControllerDef, DriverDef, MetricsDef, StaticConfigMapDef, VOLUME_MODES,
    VolumeSourceDef,
};
use crate::quantity::parse_bytes;
use crate::{metrics, names, rbac};

impl DriverDef {
    /// Problems of `staticConfigMaps` and of the driver containers' `envFrom`.
    fn validate_static_config_maps(&self, problems: &mut Vec<String>) {
        let names = |c: &StaticConfigMapDef| c.name.clone();
        for c in &self.static_config_maps {
            if !is_dns_subdomain(&c.name) {
                problems.push(format!(
                    "staticConfigMaps: {:?} is not a valid object name",
                    c.name
                ));
            }
            if c.data.is_empty() {
                problems.push(format!("staticConfigMaps: {} has no data", c.name));
            }
        }
        let derived: Vec<&str> = self.config_maps.iter().map(|d| d.name.as_str()).collect();
        let copied: Vec<&str> = self.copied_config_maps.iter().map(|c| c.target()).collect();
        for name in duplicates(self.static_config_maps.iter().map(|c| c.name.as_str())) {
            problems.push(format!("staticConfigMaps: {name} is listed twice"));
        }
        for c in &self.static_config_maps {
            if derived.contains(&c.name.as_str()) || copied.contains(&c.name.as_str()) {
                problems.push(format!(
                    "staticConfigMaps: {} is also a derived or copied ConfigMap: use another name",
                    c.name
                ));
            }
        }
        for (pod, driver, kit_endpoint) in [
            (
                "controller",
                &self.controller.driver,
                names::CONTROLLER_ENDPOINT,
            ),
            ("node", &self.node.driver, names::NODE_ENDPOINT),
        ] {
            let endpoint = driver.endpoint.as_deref().unwrap_or(kit_endpoint);
            for name in &driver.env_from {
                let Some(c) = self.static_config_maps.iter().find(|c| &c.name == name) else {
                    problems.push(format!(
                        "{pod}.driver.envFrom: {name} is not one of staticConfigMaps ({})",
                        self.static_config_maps
                            .iter()
                            .map(names)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    continue;
                };
                if let Some(value) = c.data.get("CSI_ENDPOINT")
                    && value != endpoint
                {
                    problems.push(format!(
                        "{pod}.driver.envFrom: CSI_ENDPOINT of {name} is {value:?}, but the driver's socket is {endpoint:?}: make them the same (or set {pod}.driver.endpoint)"
                    ));
                }
            }
            for name in duplicates(driver.env_from.iter().map(String::as_str)) {
                problems.push(format!("{pod}.driver.envFrom: {name} is listed twice"));
            }
        }
    }
}

impl DriverDef {
    /// Problems of `volumes`: sizes that are not sizes or are in the wrong order, volume and
    /// access modes the API does not have, a mode listed twice or a volume mode listing none.
    fn validate_volumes(&self, problems: &mut Vec<String>) {
        let Some(volumes) = &self.volumes else {
            return;
        };
        let mut size = |field: &str, size: Option<&str>| -> Option<u64> {
            let size = size?;
            let problem = match parse_bytes(size).map(u64::try_from) {
                Ok(Ok(0)) => format!(
                    "{field} {size:?} is zero bytes: write a size such as 1Gi, or leave {field} out"
                ),
                Ok(Ok(bytes)) => return Some(bytes),
                Ok(Err(_)) => format!(
                    "{field} {size:?} is larger than any volume (above 16Ei): write a size such \
                     as 64Ti"
                ),
                Err(e) => {
                    format!("{field}: {e}: write a size as Kubernetes does, such as 1Gi or 64Ti")
                }
            };
            problems.push(problem);
            None
        };
        let min = size("volumes.minSize", volumes.min_size.as_deref());
        let max = size("volumes.maxSize", volumes.max_size.as_deref());
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            problems.push(format!(
                "volumes.minSize {} is larger than volumes.maxSize {}: swap them, or correct \
                 the one that is wrong",
                volumes.min_size.as_deref().unwrap_or_default(),
                volumes.max_size.as_deref().unwrap_or_default()
            ));
        }
        for (volume_mode, access_modes) in &volumes.access_modes {
            let field = format!("volumes.accessModes.{volume_mode}");
            if !VOLUME_MODES.contains(&volume_mode.as_str()) {
                problems.push(format!(
                    "volumes.accessModes: {volume_mode:?} is not a volume mode: key the access \
                     modes by {}",
                    VOLUME_MODES.join(" or ")
                ));
            }
            if access_modes.is_empty() {
                problems.push(format!(
                    "{field} lists no access mode: list those the driver accepts with it, or \
                     leave {volume_mode} out if the driver does not offer it"
                ));
            }
            for mode in access_modes
                .iter()
                .filter(|m| !ACCESS_MODES.contains(&m.as_str()))
            {
                problems.push(format!(
                    "{field}: {mode:?} is not an access mode ({})",
                    ACCESS_MODES.join(", ")
                ));
            }
            for mode in duplicates(access_modes.iter().map(String::as_str)) {
                problems.push(format!("{field} lists {mode} twice: list it once"));
            }
        }
    }
}

/// A driver table that parses but cannot work: every problem found, so one fix round is
/// enough.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid table of CSI driver {driver:?}: {}", problems.join("; "))]
pub struct InvalidDef {
    /// The driver's name.
    pub driver: String,
    /// What is wrong, one entry per problem.
    pub problems: Vec<String>,
}

/// Volume names the kit itself uses in the pods.
const RESERVED_CONTROLLER_VOLUMES: &[&str] = &[
    "socket-dir",
    "metrics-serving-cert",
    "non-standard-root-system-trust-ca-bundle",
];
/// The node pod's own volumes (the kit's metrics certificate is the controller's only).
const RESERVED_NODE_VOLUMES: &[&str] = &[
    "socket-dir",
    "kubelet-dir",
    "registration-dir",
    "non-standard-root-system-trust-ca-bundle",
];

/// A DNS-1123 subdomain: what a ServiceAccount's name must be.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// A resource quantity as requests are written: a decimal number with an optional suffix
/// (`10m`, `0.5`, `50Mi`, `1G`).
fn is_quantity(value: &str) -> bool {
    const SUFFIXES: [&str; 14] = [
        "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    let number_end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, suffix) = value.split_at(number_end);
    number.parse::<f64>().is_ok_and(|n| n >= 0.0)
        && !number.starts_with('.')
        && !number.ends_with('.')
        && SUFFIXES.contains(&suffix)
}

/// A DNS-1123 label: what a workload's name must be (its pods' names derive from it).
fn is_dns_label(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-')
}

fn duplicates<T: Ord + Clone + std::fmt::Display>(
    items: impl IntoIterator<Item = T>,
) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut dups = std::collections::BTreeSet::new();
    for item in items {
        if !seen.insert(item.clone()) {
            dups.insert(item);
        }
    }
    dups.into_iter().map(|d| d.to_string()).collect()
}

impl ControllerDef {
    /// What is wrong with the table's layout of the pod after OpenShift's asset: sidecars'
    /// and the livenessprobe's whole argument lists, requests, container names and the
    /// explicit security settings.
    fn layout_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let socket = self.socket();
        if let Some(dir) = &self.sidecar_socket_dir
            && (!dir.starts_with('/') || dir.contains(char::is_whitespace))
        {
            problems.push(format!(
                "controller.sidecarSocketDir {dir:?} is not an absolute path"
            ));
        }
        for s in &self.sidecars {
            let field = format!("controller.sidecars[{}]", s.kind.short_name());
            for (what, quantity) in [("cpu", &s.requests.cpu), ("memory", &s.requests.memory)] {
                if let Some(q) = quantity.as_deref().filter(|q| !is_quantity(q)) {
                    problems.push(format!(
                        "{field}.requests.{what} {q:?} is not a quantity (e.g. 10m, 50Mi)"
                    ));
                }
            }
            if s.full_args.is_empty() {
                continue;
            }
            if !s.extra_args.is_empty() {
                problems.push(format!(
                    "{field} has both fullArgs and extraArgs: fullArgs is the whole list"
                ));
            }
            let address = if s.address_env {
                "$(ADDRESS)".to_owned()
            } else {
                socket.clone()
            };
            let addresses: Vec<&String> = s
                .full_args
                .iter()
                .filter(|a| a.starts_with("--csi-address="))
                .collect();
            if addresses != [&format!("--csi-address={address}")] {
                problems.push(format!(
                    "{field}.fullArgs must pass --csi-address={address} once (the driver's \
                     socket{})",
                    if s.address_env {
                        ", through ADDRESS with addressEnv"
                    } else {
                        " in socket-dir"
                    }
                ));
            }
            if let Some(m) = s.metrics {
                let local = [
                    format!("localhost:{}", m.local_port),
                    format!("127.0.0.1:{}", m.local_port),
                ];
                if !s.full_args.iter().any(|a| {
                    a.split_once('=')
                        .is_some_and(|(_, v)| local.iter().any(|l| l == v))
                }) {
                    problems.push(format!(
                        "{field}.fullArgs serve no metrics on localhost:{} (its metrics' \
                         localPort, where kube-rbac-proxy scrapes)",
                        m.local_port
                    ));
                }
            }
            let elects = s.full_args.iter().any(|a| a == "--leader-election")
                || s.full_args.iter().any(|a| a == "--leader-election=true");
            if !elects || s.full_args.iter().any(|a| a == "--leader-election=false") {
                problems.push(format!(
                    "{field}.fullArgs do not elect a leader (--leader-election): the \
                     controller runs two replicas on HA clusters"
                ));
            }
        }
        let p = &self.liveness_probe_requests;
        for (what, quantity) in [("cpu", &p.cpu), ("memory", &p.memory)] {
            if let Some(q) = quantity.as_deref().filter(|q| !is_quantity(q)) {
                problems.push(format!(
                    "controller.livenessProbeRequests.{what} {q:?} is not a quantity (e.g. 5m, \
                     10Mi)"
                ));
            }
        }
        if !self.liveness_probe_full_args.is_empty() {
            let args = &self.liveness_probe_full_args;
            if !self.liveness_probe_args.is_empty() {
                problems.push(
                    "controller has both livenessProbeFullArgs and livenessProbeArgs: \
                     livenessProbeFullArgs is the whole list"
                        .to_owned(),
                );
            }
            if !args.iter().any(|a| a == "--csi-address=/csi/csi.sock") {
                problems.push(
                    "controller.livenessProbeFullArgs must pass --csi-address=/csi/csi.sock \
                     (the livenessprobe mounts socket-dir at /csi)"
                        .to_owned(),
                );
            }
            let ports: Vec<&str> = args
                .iter()
                .filter_map(|a| a.strip_prefix("--health-port="))
                .collect();
            // The livenessprobe's default port.
            let port = self.driver.healthz_port.to_string();
            let serves = match ports.as_slice() {
                [] => port == "9808",
                [p] => *p == port,
                _ => false,
            };
            if !serves {
                problems.push(format!(
                    "controller.livenessProbeFullArgs do not serve the driver's healthzPort \
                     {port} (--health-port={port} once, or nothing for the default 9808)"
                ));
            }
        }
        let kit = self.container_names();
        let mut final_names: Vec<String> = kit
            .iter()
            .map(|n| self.container_names.get(n).unwrap_or(n).clone())
            .collect();
        final_names.sort();
        for (from, to) in &self.container_names {
            if from == names::DRIVER_CONTAINER {
                problems.push(format!(
                    "controller.containerNames renames {from}: hooks and the proxy annotations \
                     find the driver by that name"
                ));
            } else if !kit.contains(from) {
                problems.push(format!(
                    "controller.containerNames names {from}, not a container of the pod ({})",
                    kit.join(", ")
                ));
            }
            if !is_dns_label(to) {
                problems.push(format!(
                    "controller.containerNames gives {from} the name {to:?}, not a valid \
                     container name (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        for name in duplicates(final_names) {
            problems.push(format!(
                "controller.containerNames gives two containers the name {name}"
            ));
        }
        if self.explicitly_unprivileged
            && (self.privileged
                || self.driver.privileged
                || self.driver.allow_privilege_escalation == Some(true))
        {
            problems.push(
                "controller.explicitlyUnprivileged states privileged: false and \
                 allowPrivilegeEscalation: false, but the table makes the driver privileged or \
                 lets it escalate"
                    .to_owned(),
            );
        }
        problems
    }
}

impl DriverDef {
    /// Checks what serde cannot: names set, ports and volume names unique within a pod, at most
    /// one default class of each kind, a profile for inline volumes, images with defaults.
    pub fn validate(&self) -> Result<(), InvalidDef> {
        let mut problems = Vec::new();
        for (field, value) in [
            ("name", &self.name),
            ("shortName", &self.short_name),
            ("conditionPrefix", &self.condition_prefix),
            ("namespace", &self.namespace),
            ("objectPrefix", &self.object_prefix),
            ("clusterRolePrefix", &self.cluster_role_prefix),
        ] {
            if value.trim().is_empty() {
                problems.push(format!("{field} is empty"));
            }
        }
        for (field, name) in [
            ("controller.name", &self.controller.name),
            ("node.name", &self.node.name),
        ] {
            if let Some(name) = name.as_deref().filter(|n| !is_dns_label(n)) {
                problems.push(format!(
                    "{field} {name:?} is not a valid object name (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        if self.controller.name.is_some() && self.controller.name == self.node.name {
            problems.push("controller.name and node.name are the same".to_owned());
        }
        for (field, selector) in [
            ("controller.selector", &self.controller.selector),
            ("node.selector", &self.node.selector),
        ] {
            if selector
                .iter()
                .any(|(k, v)| k.trim().is_empty() || v.trim().is_empty())
            {
                problems.push(format!("{field} has an empty label key or value"));
            }
        }
        self.validate_node_layout(&mut problems);
        let i = &self.images;
        for (role, image) in [
            ("driver", &i.driver),
            ("provisioner", &i.provisioner),
            ("attacher", &i.attacher),
            ("resizer", &i.resizer),
            ("snapshotter", &i.snapshotter),
            ("nodeDriverRegistrar", &i.node_driver_registrar),
            ("livenessProbe", &i.liveness_probe),
            ("kubeRbacProxy", &i.kube_rbac_proxy),
        ] {
            if image.env.trim().is_empty() || image.default.trim().is_empty() {
                problems.push(format!("image {role} needs both env and default"));
            }
        }

        let ctl = &self.controller;
        let mut controller_ports = vec![ctl.driver.healthz_port];
        let metrics = ctl
            .driver
            .metrics
            .iter()
            .chain(ctl.sidecars.iter().filter_map(|s| s.metrics.as_ref()));
        for m in metrics {
            controller_ports.extend([m.local_port, m.exposed_port]);
        }
        controller_ports.extend(
            ctl.metrics_service
                .hook_endpoints
                .iter()
                .map(|e| e.exposed_port),
        );
        for port in duplicates(controller_ports) {
            problems.push(format!("controller port {port} is used twice"));
        }
        for kind in duplicates(ctl.sidecars.iter().map(|s| s.kind.short_name())) {
            problems.push(format!("sidecar {kind} is listed twice"));
        }
        let mut node_ports = vec![
            self.node.driver.healthz_port,
            self.node.registrar_healthz_port,
        ];
        if let Some(m) = self.node.driver.metrics {
            node_ports.extend([m.local_port, m.exposed_port]);
            // The kit's, as in the controller pod.
            if self
                .node
                .driver
                .volumes
                .iter()
                .any(|v| v.name == "metrics-serving-cert")
            {
                problems.push(
                    "node volume metrics-serving-cert is the kit's when node.driver.metrics is set"
                        .to_owned(),
                );
            }
        }
        for port in duplicates(node_ports) {
            problems.push(format!("node port {port} is used twice"));
        }
        for (pod, volumes, reserved) in [
            (
                "controller",
                &ctl.driver.volumes,
                RESERVED_CONTROLLER_VOLUMES,
            ),
            ("node", &self.node.driver.volumes, RESERVED_NODE_VOLUMES),
        ] {
            for name in duplicates(volumes.iter().map(|v| v.name.as_str())) {
                problems.push(format!("{pod} volume {name} is listed twice"));
            }
            for v in volumes.iter().filter(|v| {
                !v.roll_on_change
                    && !matches!(
                        v.source,
                        VolumeSourceDef::Secret { .. } | VolumeSourceDef::ConfigMap { .. }
                    )
            }) {
                problems.push(format!(
                    "{pod} volume {} has rollOnChange false but is no Secret or ConfigMap: only their changes roll pods",
                    v.name
                ));
            }
            for v in volumes
                .iter()
                .filter(|v| reserved.contains(&v.name.as_str()))
            {
                problems.push(format!("{pod} volume {} is reserved by the kit", v.name));
            }
            for v in volumes.iter().filter(|v| v.mount_path.is_none()) {
                if v.read_only || v.mount_propagation.is_some() || !v.also_mounted_in.is_empty() {
                    problems.push(format!(
                        "{pod} volume {} has no mountPath but mount settings \
                         (readOnly, mountPropagation, alsoMountedIn)",
                        v.name
                    ));
                }
            }
        }
        let derived: Vec<&str> = self.config_maps.iter().map(|c| c.name.as_str()).collect();
        for (pod, driver) in [("controller", &ctl.driver), ("node", &self.node.driver)] {
            for e in &driver.env {
                let sources = usize::from(e.value.is_some())
                    + usize::from(e.field_path.is_some())
                    + usize::from(e.config_map_key_ref.is_some());
                if sources > 1 {
                    problems.push(format!(
                        "{pod} env {} has more than one of value, fieldPath and configMapKeyRef",
                        e.name
                    ));
                }
                if let Some(key) = &e.config_map_key_ref
                    && !derived.contains(&key.name.as_str())
                {
                    problems.push(format!(
                        "{pod} env {} reads ConfigMap {}, which is not one of the table's \
                         configMaps ({}): only those roll the pods when they change",
                        e.name,
                        key.name,
                        derived.join(", ")
                    ));
                }
            }
        }
        for (pod, driver, kit_mounts, socket_dir) in [
            (
                "controller",
                &ctl.driver,
                &["socket-dir"][..],
                names::CONTROLLER_SOCKET_DIR,
            ),
            (
                "node",
                &self.node.driver,
                &["socket-dir", "kubelet-dir"][..],
                names::NODE_SOCKET_DIR,
            ),
        ] {
            for name in driver.mount_paths.keys() {
                if !kit_mounts.contains(&name.as_str()) {
                    problems.push(format!(
                        "{pod} driver mountPaths names {name}, not one of the kit's mounts ({})",
                        kit_mounts.join(", ")
                    ));
                }
            }
            let dir = driver
                .mount_paths
                .get("socket-dir")
                .map_or(socket_dir, String::as_str);
            if let Some(endpoint) = &driver.endpoint {
                let path = endpoint
                    .trim_start_matches("unix://")
                    .trim_start_matches("unix:");
                // The sidecars and the livenessprobe find the socket as csi.sock in socket-dir.
                let want = format!("{}/csi.sock", dir.trim_end_matches('/'));
                if path.trim_start_matches('/') != want.trim_start_matches('/') {
                    problems.push(format!(
                        "{pod} driver endpoint {endpoint} is not csi.sock in socket-dir ({dir}): \
                         the sidecars connect to {want}"
                    ));
                }
            }
            if let Some(p) = driver.liveness_probe
                && (p.initial_delay_seconds < 0 || p.period_seconds < 1 || p.timeout_seconds < 1)
            {
                problems.push(format!(
                    "{pod} driver livenessProbe needs initialDelaySeconds >= 0 and \
                     periodSeconds, timeoutSeconds >= 1"
                ));
            }
        }

        // Containers named in the table must be containers of the pod.
        let controller_containers = ctl.container_names();
        let mut node_containers = vec![
            names::DRIVER_CONTAINER.to_owned(),
            names::REGISTRAR_CONTAINER.to_owned(),
            names::LIVENESS_PROBE_CONTAINER.to_owned(),
        ];
        node_containers.extend(
            self.node
                .driver
                .metrics
                .map(MetricsDef::driver_proxy_container_name),
        );
        for (pod, volumes, containers) in [
            (
                "controller",
                &ctl.driver.volumes,
                &controller_containers[..],
            ),
            ("node", &self.node.driver.volumes, &node_containers[..]),
        ] {
            for v in volumes {
                for name in v.also_mounted_in.iter().filter(|n| !containers.contains(n)) {
                    problems.push(format!(
                        "{pod} volume {} alsoMountedIn names {name}, not a container of the pod ({})",
                        v.name,
                        containers.join(", ")
                    ));
                }
            }
        }
        for (pod, order, containers) in [
            (
                "controller",
                &ctl.container_order,
                &controller_containers[..],
            ),
            ("node", &self.node.container_order, &node_containers[..]),
        ] {
            for name in order.iter().filter(|n| !containers.contains(n)) {
                problems.push(format!(
                    "{pod} containerOrder names {name}, not a container of the pod ({})",
                    containers.join(", ")
                ));
            }
        }
        problems.extend(ctl.layout_problems());
        for (field, name) in [
            ("controller.serviceAccountName", &ctl.service_account_name),
            ("node.serviceAccountName", &self.node.service_account_name),
        ] {
            if let Some(name) = name.as_deref().filter(|n| !is_dns_subdomain(n)) {
                problems.push(format!(
                    "{field} {name:?} is not a valid ServiceAccount name (lower-case letters, \
                     digits, '-' and '.', at most 253 characters)"
                ));
            }
        }
        if names::controller_sa(self) == names::node_sa(self) {
            problems.push(
                "controller.serviceAccountName and node.serviceAccountName are the same: each \
                 pod has its own ServiceAccount and grants"
                    .to_owned(),
            );
        }
        for (field, quantity) in [
            ("controller.driver.cpuRequest", &ctl.driver.cpu_request),
            (
                "controller.driver.memoryRequest",
                &ctl.driver.memory_request,
            ),
            ("node.driver.cpuRequest", &self.node.driver.cpu_request),
            (
                "node.driver.memoryRequest",
                &self.node.driver.memory_request,
            ),
        ] {
            if let Some(q) = quantity.as_deref().filter(|q| !is_quantity(q)) {
                problems.push(format!("{field} {q:?} is not a quantity (e.g. 10m, 50Mi)"));
            }
        }
        for (pod, rules) in [
            ("controller", &ctl.extra_rules),
            ("node", &self.node.extra_rules),
        ] {
            for r in rules {
                if r.resources
                    .iter()
                    .chain(&r.verbs)
                    .chain(&r.api_groups)
                    .any(|x| x == "*")
                {
                    problems.push(format!(
                        "{pod} extraRules use a wildcard ({:?} {:?} {:?}): name each API group, \
                         resource and verb (the operator must hold every permission it grants)",
                        r.api_groups, r.resources, r.verbs
                    ));
                }
            }
        }
        for copied in &self.copied_config_maps {
            if copied.namespace.trim().is_empty() || copied.name.trim().is_empty() {
                problems.push("a copied ConfigMap needs both namespace and name".to_owned());
            }
        }
        for name in duplicates(self.copied_config_maps.iter().map(|c| c.target())) {
            problems.push(format!("copied ConfigMap {name} is listed twice"));
        }
        self.validate_static_config_maps(&mut problems);
        for p in &self.network_policies {
            if !is_dns_subdomain(&p.name) {
                problems.push(format!(
                    "networkPolicies: {:?} is not a valid object name",
                    p.name
                ));
            }
            let selects_all = p.spec.pod_selector.as_ref().is_none_or(|s| {
                s.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
                    && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
            });
            if selects_all {
                problems.push(format!(
                    "networkPolicies: {} selects every pod of the namespace (an empty podSelector), other drivers' too: select this driver's pods by a label",
                    p.name
                ));
            }
        }
        for name in duplicates(self.network_policies.iter().map(|p| p.name.as_str())) {
            problems.push(format!("networkPolicies: {name} is listed twice"));
        }
        for name in duplicates(self.storage_classes.iter().map(|c| c.name.as_str())) {
            problems.push(format!("StorageClass {name} is listed twice"));
        }
        // With a filter, the classes that can be selected together are the driver's business.
        if self.hooks.storage_class_filter.is_none()
            && self.storage_classes.iter().filter(|c| c.default).count() > 1
        {
            problems.push("more than one StorageClass is marked default".to_owned());
        }
        for name in duplicates(self.volume_snapshot_classes.iter().map(|c| c.name.as_str())) {
            problems.push(format!("VolumeSnapshotClass {name} is listed twice"));
        }
        if self
            .volume_snapshot_classes
            .iter()
            .filter(|c| c.default)
            .count()
            > 1
        {
            problems.push("more than one VolumeSnapshotClass is marked default".to_owned());
        }
        let d = &self.csi_driver;
        if d.volume_lifecycle_modes.iter().any(|m| m == "Ephemeral")
            && d.ephemeral_volume_profile.is_none()
        {
            problems.push(
                "csiDriver supports Ephemeral volumes but has no ephemeralVolumeProfile".to_owned(),
            );
        }

        if self.removal_blocked_by_volumes && !self.removable {
            problems.push("removalBlockedByVolumes needs removable".to_owned());
        }
        self.validate_metrics_service(&mut problems);
        self.validate_rbac(&mut problems);
        self.validate_volumes(&mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidDef {
                driver: self.name.clone(),
                problems,
            })
        }
    }
}

impl DriverDef {
    /// The metrics Services: port names and numbers unique, hook endpoints named as ports,
    /// `portOrder` naming the Service's ports.
    fn validate_metrics_service(&self, problems: &mut Vec<String>) {
        let service = &self.controller.metrics_service;
        for e in &service.hook_endpoints {
            if !is_port_name(&e.port_name) {
                problems.push(format!(
                    "controller.metricsService.hookEndpoints port name {:?} is not a port name \
                     (at most 15 lower-case letters, digits and '-', with a letter)",
                    e.port_name
                ));
            }
        }
        let ports = metrics::metrics_ports(self);
        let node_port = self.node.driver.metrics.map(|m| m.port_in_service());
        // Two proxies on one port are reported as such; their Service ports then collide too.
        let ctl = &self.controller;
        let proxies_twice = duplicates(
            ctl.driver
                .metrics
                .iter()
                .chain(ctl.sidecars.iter().filter_map(|s| s.metrics.as_ref()))
                .map(|m| m.exposed_port)
                .chain(service.hook_endpoints.iter().map(|e| e.exposed_port)),
        );
        for (pod, numbers) in [
            (
                "controller",
                ports.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
            ),
            ("node", node_port.into_iter().collect()),
        ] {
            if numbers.contains(&0) {
                problems.push(format!("{pod} metrics Service port 0 is not a port"));
            }
            for port in duplicates(numbers)
                .into_iter()
                .filter(|p| !proxies_twice.contains(p))
            {
                problems.push(format!("{pod} metrics Service port {port} is used twice"));
            }
        }
        for name in duplicates(ports.iter().map(|(n, _)| n.as_str())) {
            problems.push(format!(
                "controller metrics Service port name {name} is used twice"
            ));
        }
        let names: Vec<&str> = ports.iter().map(|(n, _)| n.as_str()).collect();
        for name in service
            .port_order
            .iter()
            .filter(|n| !names.contains(&n.as_str()))
        {
            problems.push(format!(
                "controller.metricsService.portOrder names {name}, not a port of the metrics \
                 Service ({})",
                names.join(", ")
            ));
        }
        for name in duplicates(service.port_order.iter().map(String::as_str)) {
            problems.push(format!(
                "controller.metricsService.portOrder names {name} twice"
            ));
        }
    }

    /// The table's roles, shared role bindings and binding names: prefixed names of the
    /// driver's, rules without wildcards, only the kit's shared roles, no name used twice.
    fn validate_rbac(&self, problems: &mut Vec<String>) {
        let cluster_prefixes: Vec<String> = std::iter::once(&self.cluster_role_prefix)
            .chain(&self.former_cluster_role_prefixes)
            .map(|p| format!("{p}-"))
            .collect();
        let namespaced_prefixes = vec![
            format!("{}-", self.object_prefix),
            format!("{}-", self.cluster_role_prefix),
        ];
        let mut check_name = |field: String, name: &str, namespaced: bool| {
            let prefixes = if namespaced {
                &namespaced_prefixes
            } else {
                &cluster_prefixes
            };
            if !is_dns_subdomain(name) {
                problems.push(format!(
                    "{field} {name:?} is not a valid object name (lower-case letters, digits, \
                     '-' and '.', at most 253 characters)"
                ));
            } else if !prefixes.iter().any(|p| name.starts_with(p.as_str())) {
                problems.push(format!(
                    "{field} {name:?} does not start with one of the driver's prefixes ({}): \
                     a table names only the driver's own objects",
                    prefixes.join(", ")
                ));
            }
        };
        let shared: Vec<String> = rbac::build_shared_opt_in_cluster_roles()
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        let mut other_problems = Vec::new();
        for (pod, roles, shared_roles) in [
            (
                "controller",
                &self.controller.roles,
                &self.controller.shared_roles,
            ),
            ("node", &self.node.roles, &self.node.shared_roles),
        ] {
            for role in roles {
                check_name(format!("{pod}.roles name"), &role.name, role.namespaced);
                check_name(
                    format!("{pod}.roles binding"),
                    &role.binding,
                    role.namespaced,
                );
                if role.rules.is_empty() {
                    other_problems.push(format!("{pod} role {} has no rules", role.name));
                }
                for r in role.rules.iter().filter(|r| r.has_wildcard()) {
                    other_problems.push(format!(
                        "{pod} role {} uses a wildcard ({:?} {:?} {:?}): name each API group, \
                         resource and verb (the operator must hold every permission it grants)",
                        role.name, r.api_groups, r.resources, r.verbs
                    ));
                }
            }
            for binding in shared_roles {
                check_name(
                    format!("{pod}.sharedRoles binding"),
                    &binding.binding,
                    false,
                );
                if !shared.contains(&binding.role) {
                    other_problems.push(format!(
                        "{pod}.sharedRoles names {}, not a shared role the kit knows ({})",
                        binding.role,
                        shared.join(", ")
                    ));
                }
            }
        }
        let kit_bindings = rbac::kit_cluster_role_binding_names(self);
        for (kit, name) in &self.cluster_role_binding_names {
            check_name(format!("clusterRoleBindingNames {kit}"), name, false);
            if !kit_bindings.contains(kit) {
                other_problems.push(format!(
                    "clusterRoleBindingNames renames {kit}, not a ClusterRoleBinding of the \
                     kit's ({})",
                    kit_bindings.join(", ")
                ));
            }
        }
        problems.extend(other_problems);

        // Every name once per kind: a second object of a name would overwrite the first.
        let name_of = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.name.clone().unwrap_or_default()
        };
        let table_namespaced = || {
            self.controller
                .roles
                .iter()
                .chain(&self.node.roles)
                .filter(|r| r.namespaced)
        };
        let kit_roles = [
            rbac::lease_role_name(self),
            rbac::prometheus_role_name(self),
        ];
        for (kind, names) in [
            (
                "ClusterRole",
                rbac::build_cluster_roles(self)
                    .iter()
                    .map(|r| name_of(&r.metadata))
                    .collect::<Vec<_>>(),
            ),
            (
                "ClusterRoleBinding",
                rbac::build_cluster_role_bindings(self)
                    .iter()
                    .map(|b| name_of(&b.metadata))
                    .collect(),
            ),
            (
                "Role",
                kit_roles
                    .iter()
                    .cloned()
                    .chain(table_namespaced().map(|r| r.name.clone()))
                    .collect(),
            ),
            (
                "RoleBinding",
                kit_roles
                    .iter()
                    .cloned()
                    .chain(table_namespaced().map(|r| r.binding.clone()))
                    .collect(),
            ),
        ] {
            for name in duplicates(names) {
                problems.push(format!("{kind} {name} is rendered twice"));
            }
        }
    }
}

/// A port name (IANA service name): at most 15 lower-case letters, digits and '-', with a
/// letter, no '-' at either end or twice in a row.
fn is_port_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.chars().any(|c| c.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

impl DriverDef {
    /// The node pod's fields where it follows OpenShift's layout rather than the kit's:
    /// labels, nodeSelector, names of the kit's volumes and containers, the sidecars'
    /// arguments and environment.
    fn validate_node_layout(&self, problems: &mut Vec<String>) {
        let node = &self.node;
        // Shared labels are fine for the workloads (each owns its pods) and the kit's
        // PodDisruptionBudget and anti-affinity (see `names::controller_pods_selector`), but a
        // metrics Service selects by labels only and would send scrapes to the other pods.
        if node.driver.metrics.is_some()
            && (names::node_pods_match_controller_selector(self)
                || names::controller_pods_match_node_selector(self))
        {
            problems.push(
                "node.driver.metrics needs node pods and controller pods that no one selector \
                 matches both of (node.selector, node.podLabels, controller.selector): each \
                 metrics Service would select the other's pods"
                    .to_owned(),
            );
        }
        let selector = names::node_selector(self);
        for (field, labels) in [
            ("node.podLabels", &node.pod_labels),
            (
                "node.nodeSelector",
                node.node_selector.as_ref().unwrap_or(&BTreeMap::new()),
            ),
        ] {
            if labels.keys().any(|k| k.trim().is_empty()) {
                problems.push(format!("{field} has an empty label key"));
            }
        }
        for k in node.pod_labels.keys().filter(|k| selector.contains_key(*k)) {
            problems.push(format!(
                "node.podLabels sets {k}, a label of the node's selector: set it in node.selector"
            ));
        }
        if node.pod_labels.values().any(|v| v.trim().is_empty()) {
            problems.push("node.podLabels has an empty label value".to_owned());
        }

        const KIT_VOLUMES: [&str; 3] = ["socket-dir", "kubelet-dir", "registration-dir"];
        // A table volume of a kit name is reported as reserved already.
        let mut volume_names: Vec<&str> = node
            .driver
            .volumes
            .iter()
            .map(|v| v.name.as_str())
            .filter(|n| !RESERVED_NODE_VOLUMES.contains(n))
            .collect();
        for kit in KIT_VOLUMES {
            volume_names.push(node.volume_names.get(kit).map_or(kit, String::as_str));
        }
        for (kit, name) in &node.volume_names {
            if !KIT_VOLUMES.contains(&kit.as_str()) {
                problems.push(format!(
                    "node.volumeNames renames {kit}, not one of the kit's volumes ({})",
                    KIT_VOLUMES.join(", ")
                ));
            }
            if !is_dns_label(name) {
                problems.push(format!(
                    "node.volumeNames gives {kit} the name {name:?}, not a valid volume name \
                     (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        for name in duplicates(volume_names) {
            problems.push(format!(
                "node volume name {name} is used twice (node.volumeNames and node.driver.volumes)"
            ));
        }

        const KIT_SIDECARS: [&str; 2] =
            [names::REGISTRAR_CONTAINER, names::LIVENESS_PROBE_CONTAINER];
        let mut container_names = vec![names::DRIVER_CONTAINER];
        for kit in KIT_SIDECARS {
            container_names.push(node.container_names.get(kit).map_or(kit, String::as_str));
        }
        for (kit, name) in &node.container_names {
            if !KIT_SIDECARS.contains(&kit.as_str()) {
                problems.push(format!(
                    "node.containerNames renames {kit}, not one of the kit's sidecars ({})",
                    KIT_SIDECARS.join(", ")
                ));
            }
            if !is_dns_label(name) {
                problems.push(format!(
                    "node.containerNames gives {kit} the name {name:?}, not a valid container \
                     name (lower-case letters, digits and '-', at most 63 characters)"
                ));
            }
        }
        for name in duplicates(container_names) {
            problems.push(format!("node container name {name} is used twice"));
        }

        if !node.liveness_probe.pre_stop.is_empty() {
            problems.push(
                "node.livenessProbe.preStop is set: only the registrar has a preStop command"
                    .to_owned(),
            );
        }
        if !node.liveness_probe.full_args.is_empty() && !node.liveness_probe_args.is_empty() {
            problems.push(
                "node.livenessProbe.fullArgs and node.livenessProbeArgs are both set: fullArgs \
                 is the whole list"
                    .to_owned(),
            );
        }
        for (field, sidecar, port, flags) in [
            (
                "node.registrar",
                &node.registrar,
                node.registrar_healthz_port,
                &["--csi-address=", "--kubelet-registration-path="][..],
            ),
            (
                "node.livenessProbe",
                &node.liveness_probe,
                node.driver.healthz_port,
                &["--csi-address="][..],
            ),
        ] {
            for e in &sidecar.env {
                let sources = usize::from(e.value.is_some())
                    + usize::from(e.field_path.is_some())
                    + usize::from(e.config_map_key_ref.is_some());
                if sources != 1 {
                    problems.push(format!(
                        "{field}.env {} needs exactly one of value, fieldPath and configMapKeyRef",
                        e.name
                    ));
                }
            }
            for (what, quantity) in [
                ("cpu", &sidecar.requests.cpu),
                ("memory", &sidecar.requests.memory),
            ] {
                if quantity.as_deref().is_some_and(|q| q.trim().is_empty()) {
                    problems.push(format!("{field}.requests.{what} is empty"));
                }
            }
            let args = &sidecar.full_args;
            if args.is_empty() {
                continue;
            }
            for flag in flags {
                if !args.iter().any(|a| a.starts_with(flag)) {
                    problems.push(format!("{field}.fullArgs has no {flag}"));
                }
            }
            let served = args.iter().find_map(|a| {
                a.strip_prefix("--http-endpoint=")
                    .and_then(|e| e.rsplit(':').next())
                    .or_else(|| a.strip_prefix("--health-port="))
            });
            // Without a flag the livenessprobe serves its default port; the registrar none.
            let served = match (served, field) {
                (Some(p), _) => p.parse::<u16>().ok(),
                (None, "node.livenessProbe") => Some(9808),
                (None, _) => None,
            };
            if served != Some(port) {
                problems.push(format!(
                    "{field}.fullArgs serve /healthz on {}, not on {port} where the kubelet \
                     probes it",
                    served.map_or_else(|| "no port".to_owned(), |p| p.to_string())
                ));
            }
            for a in args {
                for var in env_references(a) {
                    if !sidecar.env.iter().any(|e| e.name == var) {
                        problems.push(format!(
                            "{field}.fullArgs use $({var}), which {field}.env does not set"
                        ));
                    }
                }
            }
        }
    }
}

/// The variables an argument refers to as `$(NAME)`.
fn env_references(arg: &str) -> Vec<&str> {
    let mut vars = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        vars.push(&after[..end]);
        rest = &after[end + 1..];
    }
    vars
}
