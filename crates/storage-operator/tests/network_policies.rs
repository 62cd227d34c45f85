#![allow(clippy::unwrap_used)]
//! Every pod we run in the operator's namespace and in the driver namespaces, for every driver
//! and topology, can still do its job under the NetworkPolicies we install there (ours, from
//! `deploy/`, and the ones the drivers render): reach the API server and the cluster DNS,
//! reach its cloud when it talks to one, and be scraped on every metrics port.
//!
//! Neither the e2e cluster nor the test node enforces NetworkPolicies, so this is where a
//! missing opt-in label is caught. The policies are evaluated here as the NetworkPolicy API
//! defines them: a pod is isolated in a direction when a policy of its namespace selects it
//! with that policy type, and then allowed only what some selecting policy's rules allow.

use std::collections::BTreeMap;

use csi_kit::{Operand, Topology};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PodTemplateSpec, Service};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use storage_operator::manifests::Flavour;
use storage_operator::network_policy;
use storage_operator::plan::OPERATOR_NAMESPACE;
use storage_operator::registry::{DRIVER_NAMESPACE, registry};
use storage_operator::starter::{StarterInputs, build_deployment};

type Labels = BTreeMap<String, String>;

/// Where a connection goes or comes from.
enum Peer<'a> {
    /// Outside the pod network (the API server's endpoints, a cloud API, the node): matched
    /// only by a rule without peers (or an ipBlock, which none of ours use).
    Outside,
    /// A pod of a namespace.
    Pod {
        namespace_labels: &'a Labels,
        pod_labels: &'a Labels,
    },
}

fn selects(selector: &LabelSelector, labels: &Labels) -> bool {
    assert!(
        selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty),
        "the evaluator understands matchLabels only"
    );
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value))
}

fn peer_matches(peers: Option<&Vec<NetworkPolicyPeer>>, peer: &Peer) -> bool {
    let Some(peers) = peers.filter(|p| !p.is_empty()) else {
        return true;
    };
    peers.iter().any(|rule| {
        assert!(
            rule.ip_block.is_none(),
            "the evaluator understands no ipBlock"
        );
        match peer {
            Peer::Outside => false,
            Peer::Pod {
                namespace_labels,
                pod_labels,
            } => {
                // A peer with only a podSelector means pods of the policy's own namespace,
                // which is never where DNS or Prometheus run in these tests.
                rule.namespace_selector
                    .as_ref()
                    .is_some_and(|s| selects(s, namespace_labels))
                    && rule
                        .pod_selector
                        .as_ref()
                        .is_none_or(|s| selects(s, pod_labels))
            }
        }
    })
}

fn port_matches(ports: Option<&Vec<NetworkPolicyPort>>, protocol: &str, port: i32) -> bool {
    let Some(ports) = ports.filter(|p| !p.is_empty()) else {
        return true;
    };
    ports.iter().any(|rule| {
        let proto = rule.protocol.as_deref().unwrap_or("TCP");
        let start = match &rule.port {
            None => return proto == protocol,
            Some(IntOrString::Int(port)) => *port,
            Some(IntOrString::String(name)) => panic!("named port {name} in a policy"),
        };
        let end = rule.end_port.unwrap_or(start);
        proto == protocol && (start..=end).contains(&port)
    })
}

fn has_type(policy: &NetworkPolicy, kind: &str) -> bool {
    let spec = policy.spec.as_ref().unwrap();
    match &spec.policy_types {
        Some(types) => types.iter().any(|t| t == kind),
        // The API's default: Ingress always, Egress when there are egress rules.
        None => kind == "Ingress" || spec.egress.is_some(),
    }
}

/// The policies of `namespace` that select a pod with `labels` and restrict its traffic of
/// `kind` (`Ingress` or `Egress`).
fn selecting<'a>(
    policies: &'a [NetworkPolicy],
    namespace: &str,
    labels: &Labels,
    kind: &str,
) -> Vec<&'a NetworkPolicy> {
    policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .filter(|p| {
            selects(
                p.spec.as_ref().unwrap().pod_selector.as_ref().unwrap(),
                labels,
            )
        })
        .filter(|p| has_type(p, kind))
        .collect()
}

/// Whether a pod with `labels` in `namespace` may connect to `peer` on `protocol`/`port`.
fn egress_allowed(
    policies: &[NetworkPolicy],
    namespace: &str,
    labels: &Labels,
    peer: &Peer,
    protocol: &str,
    port: i32,
) -> bool {
    let selecting = selecting(policies, namespace, labels, "Egress");
    selecting.is_empty()
        || selecting.iter().any(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .egress
                .iter()
                .flatten()
                .any(|rule| {
                    peer_matches(rule.to.as_ref(), peer)
                        && port_matches(rule.ports.as_ref(), protocol, port)
                })
        })
}

/// Whether `peer` may connect to a pod with `labels` in `namespace` on TCP `port`.
fn ingress_allowed(
    policies: &[NetworkPolicy],
    namespace: &str,
    labels: &Labels,
    peer: &Peer,
    port: i32,
) -> bool {
    let selecting = selecting(policies, namespace, labels, "Ingress");
    selecting.is_empty()
        || selecting.iter().any(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .ingress
                .iter()
                .flatten()
                .any(|rule| {
                    peer_matches(rule.from.as_ref(), peer)
                        && port_matches(rule.ports.as_ref(), "TCP", port)
                })
        })
}

/// One pod template we run, and what it must be able to do.
struct Pod {
    what: String,
    namespace: String,
    template: PodTemplateSpec,
    /// It talks to something outside the cluster (a cloud API, vCenter) on any port.
    reaches_outside: bool,
    /// Ports scraped from outside its namespace (metrics).
    scraped: Vec<i32>,
}

impl Pod {
    fn labels(&self) -> Labels {
        self.template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default()
    }

    fn host_network(&self) -> bool {
        self.template
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false)
    }

    /// Ports by name, and every port named for metrics or our admin server.
    fn ports(&self) -> Vec<(String, i32)> {
        self.template
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
            .collect()
    }
}

fn topologies(flavour: Flavour) -> Vec<Topology> {
    match flavour {
        Flavour::OpenShift => vec![
            Topology::HighlyAvailable,
            Topology::SingleReplica,
            Topology::External,
        ],
        Flavour::Kubernetes => vec![
            Topology::Kubernetes {
                control_plane_nodes: true,
            },
            Topology::Kubernetes {
                control_plane_nodes: false,
            },
        ],
    }
}

/// Every pod template we run for `flavour`, and every NetworkPolicy installed beside them.
fn everything(flavour: Flavour) -> (Vec<Pod>, Vec<NetworkPolicy>) {
    let mut pods = Vec::new();
    let mut policies = network_policy::build(flavour);
    // The ports named for metrics; where there is none, our admin server's, which then serves
    // them (a process without --metrics-address).
    let admin_scraped = |template: &PodTemplateSpec| -> Vec<i32> {
        let ports: Vec<&k8s_openapi::api::core::v1::ContainerPort> = template
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .collect();
        let named = |wanted: &dyn Fn(&str) -> bool| -> Vec<i32> {
            ports
                .iter()
                .filter(|p| wanted(p.name.as_deref().unwrap_or_default()))
                .map(|p| p.container_port)
                .collect()
        };
        let metrics = named(&|name| name.contains("metrics"));
        if metrics.is_empty() {
            named(&|name| name == "admin")
        } else {
            metrics
        }
    };
    // The operator itself, from the install manifests.
    let operator: Deployment = storage_operator::manifests::build(flavour, "example.com/so:1")
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .map(|o| serde_json::from_value(o).unwrap())
        .unwrap();
    let template = operator.spec.unwrap().template;
    pods.push(Pod {
        what: "the cluster storage operator".into(),
        namespace: OPERATOR_NAMESPACE.into(),
        scraped: admin_scraped(&template),
        template,
        reaches_outside: false,
    });
    let env: BTreeMap<String, String> = BTreeMap::new();
    for topology in topologies(flavour) {
        // The volume data source validator (it serves nothing OpenShift lets in either).
        let validator =
            storage_operator::validator::build_deployment("example.com/v:1", 2, topology);
        pods.push(Pod {
            what: format!("the volume data source validator ({topology:?})"),
            namespace: validator.metadata.namespace.clone().unwrap(),
            template: validator.spec.unwrap().template,
            reaches_outside: false,
            scraped: Vec::new(),
        });
        // The vSphere problem detector (OpenShift on vSphere only; it calls vCenter, and its
        // metrics port is scraped).
        if flavour == Flavour::OpenShift {
            let detector = storage_operator::vsphere_detector::build_deployment(
                &storage_operator::vsphere_detector::DeploymentInputs {
                    image: "example.com/d:1".into(),
                    verbosity: 2,
                    topology,
                    proxy: Default::default(),
                    hashes: Default::default(),
                },
            );
            let template = detector.spec.unwrap().template;
            pods.push(Pod {
                what: format!("the vSphere problem detector ({topology:?})"),
                namespace: detector.metadata.namespace.clone().unwrap(),
                scraped: admin_scraped(&template),
                template,
                reaches_outside: true,
            });
        }
        let inputs = StarterInputs {
            topology,
            log_level: api::operator_v1::LogLevel::Normal,
            proxy: Default::default(),
            env: env.clone(),
            operator_image: "example.com/so:1".into(),
            tls_profile: None,
        };
        for entry in registry() {
            // The driver operator.
            let deployment = build_deployment(&entry, &inputs);
            let template = deployment.spec.unwrap().template;
            pods.push(Pod {
                what: format!("the {} driver operator ({topology:?})", entry.short_name),
                namespace: deployment.metadata.namespace.unwrap(),
                scraped: admin_scraped(&template),
                template,
                reaches_outside: entry.operator_all_egress,
            });
            // Its operands, with every optional CRD present (ServiceMonitors, snapshots).
            let def = drivers::by_name(entry.short_name).unwrap();
            let mut driver_inputs = csi_kit::Inputs::offline(&def, topology, &env);
            driver_inputs.crds = csi_kit::OptionalCrds::all();
            driver_inputs.trusted_ca_bundle = true;
            let operands = csi_kit::render_operands(&def, &driver_inputs);
            let services: Vec<&Service> = operands
                .iter()
                .filter_map(|o| match o {
                    Operand::Service(s) => Some(s),
                    _ => None,
                })
                .collect();
            for operand in &operands {
                let (kind, meta, template) = match operand {
                    Operand::Deployment(d) => (
                        "Deployment",
                        &d.metadata,
                        d.spec.as_ref().unwrap().template.clone(),
                    ),
                    Operand::DaemonSet(d) => (
                        "DaemonSet",
                        &d.metadata,
                        d.spec.as_ref().unwrap().template.clone(),
                    ),
                    Operand::NetworkPolicy(p) => {
                        policies.push(p.clone());
                        continue;
                    }
                    _ => continue,
                };
                let namespace = meta.namespace.clone().unwrap();
                let mut pod = Pod {
                    what: format!(
                        "{} {kind} {} ({topology:?})",
                        entry.short_name,
                        meta.name.as_deref().unwrap()
                    ),
                    namespace: namespace.clone(),
                    // Drivers' pods talk to their cloud (or storage) on any port.
                    reaches_outside: true,
                    scraped: Vec::new(),
                    template,
                };
                // Every port a Service of the namespace sends to this pod is scraped.
                let labels = pod.labels();
                let ports = pod.ports();
                for service in &services {
                    let spec = service.spec.as_ref().unwrap();
                    let selector = spec.selector.clone().unwrap_or_default();
                    if service.metadata.namespace.as_deref() != Some(namespace.as_str())
                        || selector.is_empty()
                        || !selector.iter().all(|(k, v)| labels.get(k) == Some(v))
                    {
                        continue;
                    }
                    for port in spec.ports.iter().flatten() {
                        // A pod without the named port is no endpoint of it (IBM's Service
                        // selects the node pods too, by the driver's shared app label).
                        let target = match &port.target_port {
                            None => Some(port.port),
                            Some(IntOrString::Int(p)) => Some(*p),
                            Some(IntOrString::String(name)) => {
                                ports.iter().find(|(n, _)| n == name).map(|(_, p)| *p)
                            }
                        };
                        pod.scraped.extend(target);
                    }
                }
                pod.scraped.extend(admin_scraped(&pod.template));
                pods.push(pod);
            }
        }
    }
    (pods, policies)
}

fn check(flavour: Flavour) -> usize {
    let (pods, policies) = everything(flavour);
    let dns_namespace: Labels = [(
        "kubernetes.io/metadata.name".to_owned(),
        "openshift-dns".to_owned(),
    )]
    .into();
    let dns_pod: Labels = [(
        "dns.operator.openshift.io/daemonset-dns".to_owned(),
        "default".to_owned(),
    )]
    .into();
    let dns = Peer::Pod {
        namespace_labels: &dns_namespace,
        pod_labels: &dns_pod,
    };
    let monitoring_namespace: Labels = [(
        "kubernetes.io/metadata.name".to_owned(),
        "openshift-monitoring".to_owned(),
    )]
    .into();
    let prometheus_pod: Labels =
        [("app.kubernetes.io/name".to_owned(), "prometheus".to_owned())].into();
    let prometheus = Peer::Pod {
        namespace_labels: &monitoring_namespace,
        pod_labels: &prometheus_pod,
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    for pod in &pods {
        if pod.host_network() {
            // NetworkPolicies do not apply to pods on the node's network.
            continue;
        }
        checked += 1;
        let labels = pod.labels();
        let ns = pod.namespace.as_str();
        let egress = |peer: &Peer, protocol: &str, port: i32| {
            egress_allowed(&policies, ns, &labels, peer, protocol, port)
        };
        if !egress(&Peer::Outside, "TCP", 6443) {
            problems.push(format!(
                "{} cannot reach the API server (TCP 6443)",
                pod.what
            ));
        }
        for protocol in ["UDP", "TCP"] {
            if !egress(&dns, protocol, 5353) {
                problems.push(format!("{} cannot reach DNS ({protocol} 5353)", pod.what));
            }
        }
        if pod.reaches_outside && !egress(&Peer::Outside, "TCP", 443) {
            problems.push(format!("{} cannot reach its cloud (TCP 443)", pod.what));
        }
        for port in &pod.scraped {
            if !ingress_allowed(&policies, ns, &labels, &prometheus, *port) {
                problems.push(format!("{} cannot be scraped on port {port}", pod.what));
            }
        }
    }
    assert!(problems.is_empty(), "{flavour:?}:\n{}", problems.join("\n"));
    checked
}

#[test]
fn every_pod_on_openshift_reaches_the_api_server_dns_its_cloud_and_its_scraper() {
    assert!(check(Flavour::OpenShift) > 0);
}

#[test]
fn every_pod_on_kubernetes_reaches_the_api_server_dns_its_cloud_and_its_scraper() {
    assert!(check(Flavour::Kubernetes) > 0);
}

/// The evaluator itself: a pod without the labels is cut off where a deny-all applies, and a
/// label without its companion isolates a pod of the driver namespace.
#[test]
fn the_evaluator_sees_a_missing_label() {
    let policies = network_policy::build(Flavour::OpenShift);
    let outside = Peer::Outside;
    let none = Labels::new();
    assert!(!egress_allowed(
        &policies,
        OPERATOR_NAMESPACE,
        &none,
        &outside,
        "TCP",
        6443
    ));
    let operator = network_policy::operator_pod_labels();
    assert!(egress_allowed(
        &policies,
        OPERATOR_NAMESPACE,
        &operator,
        &outside,
        "TCP",
        6443
    ));
    assert!(!egress_allowed(
        &policies,
        OPERATOR_NAMESPACE,
        &operator,
        &outside,
        "TCP",
        443
    ));
    // The driver namespace has no deny-all: an unlabelled pod is not isolated, one with only
    // the API server label reaches nothing else.
    assert!(egress_allowed(
        &policies,
        DRIVER_NAMESPACE,
        &none,
        &outside,
        "TCP",
        443
    ));
    let api_only = network_policy::labels(&[network_policy::API_SERVER]);
    assert!(!egress_allowed(
        &policies,
        DRIVER_NAMESPACE,
        &api_only,
        &outside,
        "TCP",
        443
    ));
    // Metrics ingress to a driver's proxy range, not to another port.
    let metrics = network_policy::labels(&[network_policy::METRICS_RANGE]);
    assert!(ingress_allowed(
        &policies,
        DRIVER_NAMESPACE,
        &metrics,
        &outside,
        9202
    ));
    assert!(!ingress_allowed(
        &policies,
        DRIVER_NAMESPACE,
        &metrics,
        &outside,
        9300
    ));
}

/// The driver operators whose own code calls outside the cluster (OpenStack's Manila probe,
/// vSphere's storage policy task, IBM's secret sync and the Cinder operator as OpenShift's)
/// opt in to all-egress, as OpenShift's pods of those operators do.
#[test]
fn driver_operators_that_call_their_cloud_opt_in_to_all_egress() {
    let opted: Vec<_> = registry()
        .into_iter()
        .filter(|e| e.operator_all_egress)
        .map(|e| e.short_name)
        .collect();
    assert_eq!(
        opted,
        [
            "ibm-vpc-block",
            "openstack-manila",
            "openstack-cinder",
            "vsphere"
        ]
    );
}
