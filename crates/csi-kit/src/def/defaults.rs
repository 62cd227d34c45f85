//! What the kit fills in where a table is silent, and the facts it reads off a table: the
//! sidecars' socket, the containers it puts in the controller pod, which roles and metrics a
//! driver gets. Builders and validation both use these.

use crate::def::{ControllerDef, DriverDef, RuleDef};
use crate::names;

impl ControllerDef {
    /// Where the CSI sidecars mount `socket-dir`: `sidecarSocketDir`, else the kit's
    /// `/var/lib/csi/sockets/pluginproxy/`.
    pub fn socket_dir(&self) -> &str {
        self.sidecar_socket_dir
            .as_deref()
            .unwrap_or(names::CONTROLLER_SOCKET_DIR)
    }

    /// The driver's socket as the sidecars see it: `csi.sock` in [`Self::socket_dir`].
    pub fn socket(&self) -> String {
        format!("{}/csi.sock", self.socket_dir().trim_end_matches('/'))
    }

    /// The names of the containers the kit puts in the pod, in its order: the driver and its
    /// kube-rbac-proxy, each sidecar followed by its own, the livenessprobe (a driver's hooks
    /// may add more after them).
    pub fn container_names(&self) -> Vec<String> {
        let mut names = vec![names::DRIVER_CONTAINER.to_owned()];
        if let Some(m) = self.driver.metrics {
            names.push(m.driver_proxy_container_name());
        }
        for sidecar in &self.sidecars {
            names.push(sidecar.kind.container_name());
            if sidecar.metrics.is_some() {
                names.push(sidecar.kind.proxy_container_name());
            }
        }
        names.push(names::LIVENESS_PROBE_CONTAINER.to_owned());
        names
    }

    /// Whether the controller's ServiceAccount is bound to `<prefix>-privileged-role` (the
    /// node's, which grants the privileged SCC), with the controller's extra rules in it: for a
    /// `privileged` controller and for any that requires the privileged SCC. Otherwise a
    /// host-network controller gets `<prefix>-hostnetwork-role` for its SCC and extra rules.
    pub fn uses_privileged_role(&self) -> bool {
        self.privileged || self.required_scc == "privileged"
    }
}

impl DriverDef {
    /// Whether the controller has any metrics endpoint (and so kube-rbac-proxies, a metrics
    /// Service and their RBAC).
    pub fn has_metrics(&self) -> bool {
        self.controller.driver.metrics.is_some()
            || self.controller.sidecars.iter().any(|s| s.metrics.is_some())
            || !self.controller.metrics_service.hook_endpoints.is_empty()
    }
}

impl RuleDef {
    /// Whether the rule names `*` as an API group, resource or verb.
    pub fn has_wildcard(&self) -> bool {
        self.resources
            .iter()
            .chain(&self.verbs)
            .chain(&self.api_groups)
            .any(|x| x == "*")
    }
}
