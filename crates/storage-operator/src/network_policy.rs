//! The NetworkPolicies of the operator's namespace and of the driver namespace, and the pod
//! labels they select by.
//!
//! OpenShift's payload denies all traffic in `openshift-cluster-storage-operator` and, in both
//! namespaces, lets a pod through by opt-in labels (`openshift.storage.network-policy.<what>:
//! allow`): to the API server (TCP 6443), to the cluster DNS (`openshift-dns` pods, 5353), to
//! anywhere (every TCP port), and into metrics ports (8443-8444 for the operator, 8443-8445
//! for driver operators, 9201-9223 for the drivers' metrics proxies). The driver namespace has
//! no deny-all: a pod there is isolated only in the directions of the policies its labels make
//! select it, so a label given without its companions (the API server without DNS, metrics
//! ingress for a pod serving elsewhere) cuts a pod off.
//!
//! Our operators serve `/metrics` over HTTPS on 8443, as OpenShift's, inside those ranges; their
//! admin port ([`opkit::install::ADMIN_PORT`]) serves only health, to the kubelet's probes,
//! which come from the node and no policy here needs to admit.
//!
//! On plain Kubernetes only the ingress half is shipped: the deny-all of the operator's
//! namespace for ingress and the ingress allowances. The egress half names what differs between
//! distributions: the API server's port behind the `kubernetes` Service (6443 on kubeadm and
//! kind, 443 on several managed clusters) and the DNS pods (`kube-system` `k8s-app: kube-dns`
//! on port 53, or a node-local cache). A wrong guess would silently cut the operator off from
//! the API server on clusters whose CNI enforces policies, and nothing in our CI enforces them
//! to notice; so egress stays open there.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::names::{Flavour, NAME, OPERATOR_NAMESPACE};
use crate::registry::DRIVER_NAMESPACE;

/// The value of every opt-in label.
pub const ALLOW: &str = "allow";
/// Egress to the cluster DNS.
pub const DNS: &str = "openshift.storage.network-policy.dns";
/// Egress to the API server.
pub const API_SERVER: &str = "openshift.storage.network-policy.api-server";
/// Egress to every TCP port (cloud APIs, vCenter, a proxy).
pub const ALL_EGRESS: &str = "openshift.storage.network-policy.all-egress";
/// Ingress to the operator's metrics ports (its namespace).
pub const OPERATOR_METRICS: &str = "openshift.storage.network-policy.operator-metrics";
/// Ingress to a driver operator's metrics ports (the driver namespace).
pub const OPERATOR_METRICS_RANGE: &str = "openshift.storage.network-policy.operator-metrics-range";
/// Ingress to the drivers' metrics proxies (the driver namespace).
pub const METRICS_RANGE: &str = "openshift.storage.network-policy.metrics-range";

/// The labels of a pod that opts in to `keys`.
pub fn labels(keys: &[&str]) -> BTreeMap<String, String> {
    keys.iter()
        .map(|key| ((*key).to_owned(), ALLOW.to_owned()))
        .collect()
}

/// The cluster storage operator's pod labels: DNS, the API server and its metrics, as
/// OpenShift's operator pod carries them.
pub fn operator_pod_labels() -> BTreeMap<String, String> {
    labels(&[DNS, API_SERVER, OPERATOR_METRICS])
}

fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        labels: Some([("app.kubernetes.io/name".to_owned(), NAME.to_owned())].into()),
        ..Default::default()
    }
}

fn selecting(label: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(&[label])),
        ..Default::default()
    }
}

fn tcp(port: i32, end_port: Option<i32>) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some("TCP".into()),
        port: Some(IntOrString::Int(port)),
        end_port,
    }
}

fn egress(
    name: &str,
    namespace: &str,
    label: &str,
    rule: NetworkPolicyEgressRule,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata: meta(name, namespace),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selecting(label)),
            egress: Some(vec![rule]),
            policy_types: Some(vec!["Egress".into()]),
            ..Default::default()
        }),
    }
}

fn ingress(
    name: &str,
    namespace: &str,
    label: &str,
    ports: Vec<NetworkPolicyPort>,
) -> NetworkPolicy {
    NetworkPolicy {
        metadata: meta(name, namespace),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selecting(label)),
            ingress: Some(vec![NetworkPolicyIngressRule {
                ports: Some(ports),
                ..Default::default()
            }]),
            policy_types: Some(vec!["Ingress".into()]),
            ..Default::default()
        }),
    }
}

/// The egress allowances OpenShift gives a namespace: anywhere, the API server, DNS.
fn egress_policies(namespace: &str) -> Vec<NetworkPolicy> {
    let dns_port = |protocol: &str| NetworkPolicyPort {
        protocol: Some(protocol.into()),
        port: Some(IntOrString::Int(5353)),
        end_port: None,
    };
    vec![
        egress(
            "allow-all-egress",
            namespace,
            ALL_EGRESS,
            NetworkPolicyEgressRule {
                ports: Some(vec![tcp(1, Some(65535))]),
                to: None,
            },
        ),
        egress(
            "allow-egress-to-api-server",
            namespace,
            API_SERVER,
            NetworkPolicyEgressRule {
                ports: Some(vec![tcp(6443, None)]),
                to: None,
            },
        ),
        egress(
            "allow-to-dns",
            namespace,
            DNS,
            NetworkPolicyEgressRule {
                ports: Some(vec![dns_port("TCP"), dns_port("UDP")]),
                to: Some(vec![NetworkPolicyPeer {
                    namespace_selector: Some(LabelSelector {
                        match_labels: Some(
                            [(
                                "kubernetes.io/metadata.name".to_owned(),
                                "openshift-dns".to_owned(),
                            )]
                            .into(),
                        ),
                        ..Default::default()
                    }),
                    pod_selector: Some(LabelSelector {
                        match_labels: Some(
                            [(
                                "dns.operator.openshift.io/daemonset-dns".to_owned(),
                                "default".to_owned(),
                            )]
                            .into(),
                        ),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
            },
        ),
    ]
}

/// The NetworkPolicies of both namespaces for `flavour`, in apply order (after the namespaces).
pub fn build(flavour: Flavour) -> Vec<NetworkPolicy> {
    let openshift = flavour == Flavour::OpenShift;
    let mut policies = vec![NetworkPolicy {
        metadata: meta("default-deny", OPERATOR_NAMESPACE),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            policy_types: Some(if openshift {
                vec!["Ingress".into(), "Egress".into()]
            } else {
                vec!["Ingress".into()]
            }),
            ..Default::default()
        }),
    }];
    // The operator's namespace.
    if openshift {
        policies.extend(egress_policies(OPERATOR_NAMESPACE));
    }
    policies.push(ingress(
        "allow-ingress-to-operator-metrics",
        OPERATOR_NAMESPACE,
        OPERATOR_METRICS,
        vec![tcp(8443, None), tcp(8444, None)],
    ));
    // The driver namespace.
    if openshift {
        policies.extend(egress_policies(DRIVER_NAMESPACE));
    }
    policies.push(ingress(
        "allow-ingress-to-metrics-range",
        DRIVER_NAMESPACE,
        METRICS_RANGE,
        vec![tcp(9201, Some(9223))],
    ));
    // The driver operators serve their metrics over HTTPS on 8443, in this range; their admin
    // port serves only health, to the kubelet.
    policies.push(ingress(
        "allow-ingress-to-operator-metrics-range",
        DRIVER_NAMESPACE,
        OPERATOR_METRICS_RANGE,
        vec![tcp(8443, Some(8445))],
    ));
    policies
}
