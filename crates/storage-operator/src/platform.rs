//! Which platform the cluster runs on, and how its control plane is laid out.
//!
//! On OpenShift the answer is `Infrastructure/cluster`: `status.platformStatus.type` only, as
//! cluster-storage-operator reads it. On plain Kubernetes there is no Infrastructure API, so we
//! infer the platform from the nodes' `spec.providerID` (`aws://`, `gce://`, ...) and the topology
//! from the control-plane nodes, and say in status that we did.

use std::collections::BTreeMap;

use api::config_v1::{AzureCloudEnvironment, Infrastructure, PlatformType, TopologyMode};
use k8s_openapi::api::core::v1::Node;

/// Labels that mark a control-plane node (current and legacy).
pub const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// Where the platform decision came from; reported in Storage status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `Infrastructure/cluster`.
    Infrastructure,
    /// Inferred from nodes' provider IDs on a cluster without the Infrastructure API.
    Nodes {
        /// How many nodes carried a recognised provider ID.
        agreeing: usize,
        /// How many nodes there are.
        total: usize,
    },
}

/// The facts about the cluster that decide which drivers run and how they are laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterPlatform {
    /// The platform; `Empty` when unknown (no driver starts), `None` for bare metal and friends.
    pub platform: PlatformType,
    /// Where the control plane runs.
    pub control_plane_topology: TopologyMode,
    /// Azure Stack Hub, where Azure File is not supported.
    pub azure_stack_hub: bool,
    /// The infrastructure name (cluster ID) drivers tag volumes with, when known.
    pub infrastructure_name: Option<String>,
    /// Where this came from.
    pub source: Source,
    /// Why the platform could not be decided, when it could not; for status.
    pub problem: Option<String>,
}

impl ClusterPlatform {
    /// A one-line description for status messages, e.g. "GCP (from Infrastructure/cluster)".
    pub fn describe(&self) -> String {
        let platform = if self.platform.as_str().is_empty() {
            "unknown"
        } else {
            self.platform.as_str()
        };
        match &self.source {
            Source::Infrastructure => format!("{platform} (from Infrastructure/cluster)"),
            Source::Nodes { agreeing, total } => {
                format!(
                    "{platform} (inferred from the provider ID of {agreeing} of {total} nodes; no Infrastructure API)"
                )
            }
        }
    }
}

/// The platform as OpenShift's cluster-storage-operator decides it from Infrastructure.
pub fn from_infrastructure(infrastructure: &Infrastructure) -> ClusterPlatform {
    let status = infrastructure.status.as_ref();
    let azure_stack_hub = status
        .and_then(|s| s.platform_status.as_ref())
        .and_then(|p| p.azure.as_ref())
        .and_then(|a| a.cloud_name.as_ref())
        == Some(&AzureCloudEnvironment::AzureStackCloud);
    let platform = infrastructure.platform();
    ClusterPlatform {
        problem: (platform == PlatformType::Empty)
            .then(|| "Infrastructure/cluster has no status.platformStatus.type yet".to_owned()),
        platform,
        control_plane_topology: infrastructure.control_plane_topology(),
        azure_stack_hub,
        infrastructure_name: status
            .and_then(|s| s.infrastructure_name.clone())
            .filter(|n| !n.is_empty()),
        source: Source::Infrastructure,
    }
}

/// The platform a provider ID names, if we know it.
pub fn platform_of_provider_id(provider_id: &str) -> Option<PlatformType> {
    let scheme = provider_id.split_once("://")?.0;
    Some(match scheme {
        "aws" => PlatformType::AWS,
        "gce" => PlatformType::GCP,
        "azure" => PlatformType::Azure,
        "openstack" => PlatformType::OpenStack,
        "vsphere" => PlatformType::VSphere,
        "ibm" => PlatformType::IBMCloud,
        "ibmpowervs" => PlatformType::PowerVS,
        "ovirt" => PlatformType::OVirt,
        "kubevirt" => PlatformType::KubeVirt,
        "nutanix" => PlatformType::Nutanix,
        "alicloud" => PlatformType::AlibabaCloud,
        "baremetalhost" | "metal3" => PlatformType::BareMetal,
        _ => return None,
    })
}

/// Infers the platform on a cluster without the Infrastructure API. Every node with a
/// recognised provider ID must agree; nodes without one (kind, k3s, bare metal) count as `None`.
/// The topology follows the control-plane nodes: none visible (a managed control plane, as on
/// EKS or GKE) is External, one is SingleReplica, more is HighlyAvailable.
pub fn infer_from_nodes(nodes: &[Node]) -> ClusterPlatform {
    let mut votes: BTreeMap<String, usize> = BTreeMap::new();
    for node in nodes {
        let provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        if let Some(platform) = platform_of_provider_id(provider_id) {
            *votes.entry(platform.as_str().to_owned()).or_default() += 1;
        }
    }
    let control_planes = nodes
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|labels| CONTROL_PLANE_LABELS.iter().any(|l| labels.contains_key(*l)))
        })
        .count();
    let control_plane_topology = match control_planes {
        0 => TopologyMode::External,
        1 => TopologyMode::SingleReplica,
        _ => TopologyMode::HighlyAvailable,
    };
    let (platform, agreeing, problem) = match votes.len() {
        0 if nodes.is_empty() => (
            PlatformType::Empty,
            0,
            Some("no nodes yet to infer the platform from".to_owned()),
        ),
        0 => (PlatformType::None, 0, None),
        1 => {
            let (platform, count) = votes.into_iter().next().unwrap_or_default();
            (PlatformType::from(platform.as_str()), count, None)
        }
        _ => {
            let seen: Vec<String> = votes
                .iter()
                .map(|(p, n)| format!("{p} ({n} nodes)"))
                .collect();
            (
                PlatformType::Empty,
                0,
                Some(format!(
                    "nodes disagree about the platform: {}; create Infrastructure/cluster to say which one",
                    seen.join(", ")
                )),
            )
        }
    };
    ClusterPlatform {
        platform,
        control_plane_topology,
        azure_stack_hub: false,
        infrastructure_name: None,
        source: Source::Nodes {
            agreeing,
            total: nodes.len(),
        },
        problem,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeSpec;
    use kube::api::ObjectMeta;
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn node(name: &str, provider_id: Option<&str>, control_plane: bool) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: control_plane.then(|| {
                    [(
                        "node-role.kubernetes.io/control-plane".to_owned(),
                        String::new(),
                    )]
                    .into()
                }),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(Into::into),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[rstest]
    #[case("aws:///us-east-1a/i-0abc", Some(PlatformType::AWS))]
    #[case("gce://my-project/europe-west4-a/node-1", Some(PlatformType::GCP))]
    #[case(
        "azure:///subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachines/z",
        Some(PlatformType::Azure)
    )]
    #[case("openstack:///4f9a", Some(PlatformType::OpenStack))]
    #[case("vsphere://4204a0b5-1111", Some(PlatformType::VSphere))]
    #[case("ibm://acct///cluster/instance", Some(PlatformType::IBMCloud))]
    #[case("ibmpowervs://syd/syd05/svc/instance", Some(PlatformType::PowerVS))]
    #[case("kind://docker/kind/kind-control-plane", None)]
    #[case("k3s://node-1", None)]
    #[case("", None)]
    #[case("no-scheme", None)]
    fn provider_ids_name_platforms(
        #[case] provider_id: &str,
        #[case] expected: Option<PlatformType>,
    ) {
        assert_eq!(platform_of_provider_id(provider_id), expected);
    }

    #[test]
    fn nodes_that_agree_decide_the_platform_and_topology() {
        let nodes = [
            node("cp-1", Some("gce://p/z/cp-1"), true),
            node("cp-2", Some("gce://p/z/cp-2"), true),
            node("w-1", Some("gce://p/z/w-1"), false),
            node("w-2", None, false),
        ];
        let inferred = infer_from_nodes(&nodes);
        assert_eq!(inferred.platform, PlatformType::GCP);
        assert_eq!(
            inferred.control_plane_topology,
            TopologyMode::HighlyAvailable
        );
        assert_eq!(
            inferred.source,
            Source::Nodes {
                agreeing: 3,
                total: 4
            }
        );
        assert_eq!(inferred.problem, None);
        assert!(
            inferred
                .describe()
                .contains("inferred from the provider ID of 3 of 4 nodes"),
            "{}",
            inferred.describe()
        );
    }

    #[rstest]
    #[case::managed_control_plane(0, TopologyMode::External)]
    #[case::single_node(1, TopologyMode::SingleReplica)]
    #[case::three_masters(3, TopologyMode::HighlyAvailable)]
    fn topology_follows_control_plane_nodes(
        #[case] control_planes: usize,
        #[case] expected: TopologyMode,
    ) {
        let mut nodes: Vec<Node> = (0..control_planes)
            .map(|i| node(&format!("cp-{i}"), Some("aws:///a/i"), true))
            .collect();
        nodes.push(node("worker", Some("aws:///a/i"), false));
        assert_eq!(infer_from_nodes(&nodes).control_plane_topology, expected);
    }

    #[test]
    fn disagreeing_nodes_decide_nothing_and_say_why() {
        let nodes = [
            node("a", Some("aws:///a/i"), true),
            node("b", Some("gce://p/z/b"), false),
        ];
        let inferred = infer_from_nodes(&nodes);
        assert_eq!(inferred.platform, PlatformType::Empty);
        let problem = inferred.problem.unwrap();
        assert!(
            problem.contains("AWS (1 nodes)") && problem.contains("GCP (1 nodes)"),
            "{problem}"
        );
        assert!(
            problem.contains("create Infrastructure/cluster"),
            "{problem}"
        );
    }

    #[test]
    fn nodes_without_provider_ids_are_platform_none_and_no_nodes_is_unknown() {
        assert_eq!(
            infer_from_nodes(&[node("kind", Some("kind://docker/kind/x"), true)]).platform,
            PlatformType::None
        );
        let empty = infer_from_nodes(&[]);
        assert_eq!(empty.platform, PlatformType::Empty);
        assert!(empty.problem.is_some());
    }

    #[test]
    fn infrastructure_is_read_like_openshift_does() {
        let infra: Infrastructure = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
            "spec": {},
            "status": {"infrastructureName": "ash-1", "controlPlaneTopology": "SingleReplica",
                       "platformStatus": {"type": "Azure", "azure": {"cloudName": "AzureStackCloud"}}}
        }))
        .unwrap();
        let platform = from_infrastructure(&infra);
        assert_eq!(platform.platform, PlatformType::Azure);
        assert!(platform.azure_stack_hub);
        assert_eq!(platform.control_plane_topology, TopologyMode::SingleReplica);
        assert_eq!(platform.infrastructure_name.as_deref(), Some("ash-1"));
        assert_eq!(platform.problem, None);
        assert_eq!(platform.describe(), "Azure (from Infrastructure/cluster)");

        let pending: Infrastructure = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"}, "spec": {}
        }))
        .unwrap();
        let platform = from_infrastructure(&pending);
        assert_eq!(platform.platform, PlatformType::Empty);
        assert!(
            platform
                .problem
                .unwrap()
                .contains("no status.platformStatus.type")
        );
    }
}
