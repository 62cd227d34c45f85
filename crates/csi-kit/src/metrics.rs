//! Metrics: the Service in front of the kube-rbac-proxies and the ServiceMonitor that makes
//! Prometheus scrape it over TLS.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::def::DriverDef;
use crate::inputs::Inputs;
use crate::names;

/// The controller's metrics ports (name, the Service's port): by default each sidecar's in
/// container order, then the driver's, then the hooks' endpoints (the order of OpenShift's
/// csi-operator Services and ServiceMonitors); in the table's `portOrder` where it has one.
pub(crate) fn metrics_ports(def: &DriverDef) -> Vec<(String, u16)> {
    let sidecars = def.controller.sidecars.iter().filter_map(|s| {
        s.metrics.map(|m| {
            (
                names::metrics_port(s.kind.short_name()),
                m.port_in_service(),
            )
        })
    });
    let driver = def
        .controller
        .driver
        .metrics
        .map(|m| (names::metrics_port("driver"), m.port_in_service()));
    let service = &def.controller.metrics_service;
    let hooks = service
        .hook_endpoints
        .iter()
        .map(|e| (e.port_name.clone(), e.port_in_service()));
    let mut ports: Vec<(String, u16)> = sidecars.chain(driver).chain(hooks).collect();
    // Stable: the ports the order does not name keep the kit's order, after the named ones.
    ports.sort_by_key(|(name, _)| {
        service
            .port_order
            .iter()
            .position(|o| o == name)
            .unwrap_or(usize::MAX)
    });
    ports
}

/// The node plugin's metrics port (name, the Service's port), if it serves any.
fn node_metrics_ports(def: &DriverDef) -> Vec<(String, u16)> {
    def.node
        .driver
        .metrics
        .map(|m| (names::metrics_port("driver"), m.port_in_service()))
        .into_iter()
        .collect()
}

/// The pods a metrics Service fronts: the controller's or the node plugin's.
#[derive(Clone, Copy)]
enum Pods {
    Controller,
    Node,
}

impl Pods {
    fn ports(self, def: &DriverDef) -> Vec<(String, u16)> {
        match self {
            Self::Controller => metrics_ports(def),
            Self::Node => node_metrics_ports(def),
        }
    }

    fn service(self, def: &DriverDef) -> String {
        match self {
            Self::Controller => names::metrics_service(def),
            Self::Node => names::node_metrics_service(def),
        }
    }

    fn serving_cert(self, def: &DriverDef) -> String {
        match self {
            Self::Controller => names::metrics_serving_cert(def),
            Self::Node => names::node_metrics_serving_cert(def),
        }
    }

    fn monitor(self, def: &DriverDef) -> String {
        match self {
            Self::Controller => names::service_monitor(def),
            Self::Node => names::node_service_monitor(def),
        }
    }

    fn selector(self, def: &DriverDef) -> std::collections::BTreeMap<String, String> {
        match self {
            Self::Controller => names::controller_selector(def),
            Self::Node => names::node_selector(def),
        }
    }
}

/// The metrics Service, when the controller has metrics endpoints. Each port has the name of
/// its kube-rbac-proxy's port and targets it by name; its number is the proxy's unless the
/// table gives the Service its own (as OpenShift's Service has them: an operator taking over
/// OpenShift's Service must not add ports next to its ones). On OpenShift
/// the service CA issues its serving certificate (the Secret the proxies mount), so the Service
/// is built whether or not a ServiceMonitor can be.
pub fn build_metrics_service(def: &DriverDef, inputs: &Inputs) -> Option<Service> {
    service(def, inputs, Pods::Controller)
}

/// The node plugin's metrics Service (`<objectPrefix>-node-metrics`), when it serves metrics
/// (`node.driver.metrics`): as [`build_metrics_service`], for the node pods.
pub fn build_node_metrics_service(def: &DriverDef, inputs: &Inputs) -> Option<Service> {
    service(def, inputs, Pods::Node)
}

/// The ServiceMonitor (`monitoring.coreos.com/v1`, no typed struct), only when its CRD
/// exists and there is something to scrape. On OpenShift it verifies the proxies' certificate
/// with the service CA; elsewhere the proxies serve a self-signed certificate.
pub fn build_service_monitor(def: &DriverDef, inputs: &Inputs) -> Option<Value> {
    service_monitor(def, inputs, Pods::Controller)
}

/// The node plugin's ServiceMonitor (`<objectPrefix>-node-monitor`), as
/// [`build_service_monitor`], for [`build_node_metrics_service`].
pub fn build_node_service_monitor(def: &DriverDef, inputs: &Inputs) -> Option<Value> {
    service_monitor(def, inputs, Pods::Node)
}

fn service(def: &DriverDef, inputs: &Inputs, pods: Pods) -> Option<Service> {
    let ports = pods.ports(def);
    if ports.is_empty() {
        return None;
    }
    let name = pods.service(def);
    let mut metadata = names::ns_meta(def, name.clone());
    if let Some(labels) = metadata.labels.as_mut() {
        labels.insert("app".to_owned(), name.clone());
    }
    if inputs.topology.is_openshift() {
        metadata.annotations = Some(
            [(
                names::SERVING_CERT_ANNOTATION.to_owned(),
                pods.serving_cert(def),
            )]
            .into(),
        );
    }
    Some(Service {
        metadata,
        spec: Some(ServiceSpec {
            ports: Some(
                ports
                    .iter()
                    .map(|(port, number)| ServicePort {
                        name: Some(port.clone()),
                        port: i32::from(*number),
                        protocol: Some("TCP".to_owned()),
                        target_port: Some(IntOrString::String(port.clone())),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            selector: Some(pods.selector(def)),
            session_affinity: Some("None".to_owned()),
            type_: Some("ClusterIP".to_owned()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    })
}

fn service_monitor(def: &DriverDef, inputs: &Inputs, pods: Pods) -> Option<Value> {
    let ports = pods.ports(def);
    if ports.is_empty() || !inputs.crds.service_monitor {
        return None;
    }
    let service = pods.service(def);
    let tls = if inputs.topology.is_openshift() {
        json!({
            "caFile": "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
            "serverName": format!("{service}.{}.svc", def.namespace),
        })
    } else {
        json!({ "insecureSkipVerify": true })
    };
    let endpoints: Vec<Value> = ports
        .iter()
        .map(|(port, _)| {
            json!({
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                "interval": "30s",
                "path": "/metrics",
                "port": port,
                "scheme": "https",
                "tlsConfig": tls,
            })
        })
        .collect();
    Some(json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": pods.monitor(def),
            "namespace": def.namespace,
            "labels": { names::OPERAND_LABEL: def.short_name },
        },
        "spec": {
            "endpoints": endpoints,
            "jobLabel": "component",
            "selector": { "matchLabels": { "app": service } },
        },
    }))
}
