//! The driver registry: which CSI driver operator runs on which platform, as data. One entry per
//! driver of OpenShift's registry, plus the optional drivers an admin installs by creating their
//! ClusterCSIDriver. `select` decides, for a cluster, which to start and why the others are not.

use std::collections::{BTreeMap, BTreeSet};

use api::config_v1::{PlatformType, TopologyMode};
use serde::{Deserialize, Serialize};

use crate::platform::ClusterPlatform;

/// The namespace every driver operator and (most) operands run in.
pub const DRIVER_NAMESPACE: &str = "openshift-cluster-csi-drivers";

/// Annotation on a CSIDriver object that says OpenShift (we) provided it.
pub use csi_kit::names::MANAGED_CSIDRIVER_ANNOTATION;

/// A rule that keeps a driver from starting on a matching cluster unless its ClusterCSIDriver
/// already exists (so an upgrade never stops a running driver).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Skip {
    /// Not on Azure Stack Hub (Azure File is unsupported there).
    OnAzureStackHub,
    /// Not when the control plane is External (IBM VPC Block on ROKS is managed by IBM).
    OnExternalControlPlane,
}

/// Where a driver runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Platforms {
    /// On one platform.
    Only(PlatformType),
    /// On every platform (drivers for network storage such as SMB).
    All,
}

/// One driver of the registry. Static data compiled in: the registry is reviewed code, and a
/// typo in it fails to build rather than at start-up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DriverEntry {
    /// The CSI driver name, which is also the ClusterCSIDriver's name.
    pub csi_driver_name: &'static str,
    /// The short name used on the command line (`storage-operator driver gcp-pd`).
    pub short_name: &'static str,
    /// Where it runs.
    pub platforms: Platforms,
    /// The prefix of its conditions, e.g. `GCPPD` in `GCPPDCSIDriverOperatorCRAvailable`.
    pub condition_prefix: &'static str,
    /// The driver operator Deployment's name.
    pub operator_deployment: &'static str,
    /// The env var carrying the driver operator's image.
    pub operator_image_env: &'static str,
    /// The env var carrying the driver's image.
    pub driver_image_env: &'static str,
    /// Other driver-specific images passed to the driver operator: the env var
    /// cluster-storage-operator reads (as OpenShift's release payload sets it) and the one the
    /// driver operator reads (as OpenShift's driver operator names it, e.g. Manila's
    /// `NFS_DRIVER_IMAGE`).
    pub extra_image_envs: &'static [(&'static str, &'static str)],
    /// Whether the driver operator may report itself Disabled (the platform lacks the service),
    /// which then counts as Available.
    pub allow_disabled: bool,
    /// Whether `managementState: Removed` uninstalls it. Platform drivers are not removable.
    pub removable: bool,
    /// Optional drivers start only when an admin creates their ClusterCSIDriver.
    pub optional: bool,
    /// A feature gate that must be enabled for the driver to start (tech-preview drivers).
    pub required_feature_gate: Option<&'static str>,
    /// Clusters the driver skips unless already installed.
    pub skip: &'static [Skip],
    /// The OLM package this driver's operator was once installed from, if any: such an
    /// installation is adopted (its Subscription and CSV removed) before ours starts.
    pub olm: Option<OlmPackage>,
    /// Whether the driver operator itself talks to something outside the cluster (the cloud's
    /// API, vCenter), so its pod opts in to OpenShift's all-egress NetworkPolicy as OpenShift's
    /// operator pod of that driver does; the others reach only the API server and DNS.
    pub operator_all_egress: bool,
    /// Whether the driver operator gets a config ConfigMap (`<operator Deployment>-config`)
    /// with the cluster's TLS profile, as OpenShift's platform driver operators do.
    pub operator_config: bool,
    /// Whether OpenShift runs the driver with a hosted control plane (HyperShift's list: AWS
    /// EBS, Azure Disk, Azure File, OpenStack Cinder, Manila and PowerVS); its table has a
    /// `hosted` section exactly then.
    pub hosted: bool,
    /// Images passed to the driver operator only with a hosted control plane, as
    /// [`DriverEntry::extra_image_envs`] (AWS's HyperShift image, for its token minter).
    pub hosted_image_envs: &'static [(&'static str, &'static str)],
    /// With a hosted control plane, HyperShift's token minter beside the driver operator: the
    /// guest ServiceAccount (namespace, name) whose token it writes for the operator's cloud
    /// identity (AWS STS web identity), as OpenShift's AWS EBS operator has it.
    pub hosted_token_minter: Option<(&'static str, &'static str)>,
    /// Whether, with a hosted control plane, the management cluster's service-ca writes the
    /// driver operator's serving certificate (its metrics Service asks for it), as OpenShift
    /// has it; not for Azure's, whose management cluster (AKS) has no service-ca: its operator
    /// serves a self-signed certificate there.
    pub hosted_service_ca: bool,
}

/// An OLM-installed predecessor of a driver operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OlmPackage {
    /// The package name (a Subscription's `spec.name`).
    pub package: &'static str,
    /// The Deployment OLM ran the operator as, which OLM removes with the CSV.
    pub operator_deployment: &'static str,
}

/// Sidecar image env vars passed through to every driver operator.
pub const SIDECAR_IMAGE_ENVS: [&str; 7] = [
    "PROVISIONER_IMAGE",
    "ATTACHER_IMAGE",
    "RESIZER_IMAGE",
    "SNAPSHOTTER_IMAGE",
    "NODE_DRIVER_REGISTRAR_IMAGE",
    "LIVENESS_PROBE_IMAGE",
    "KUBE_RBAC_PROXY_IMAGE",
];

const fn platform_driver(
    csi_driver_name: &'static str,
    short_name: &'static str,
    platform: PlatformType,
    condition_prefix: &'static str,
    operator_deployment: &'static str,
    images: (&'static str, &'static str),
) -> DriverEntry {
    DriverEntry {
        csi_driver_name,
        short_name,
        platforms: Platforms::Only(platform),
        condition_prefix,
        operator_deployment,
        operator_image_env: images.0,
        driver_image_env: images.1,
        extra_image_envs: &[],
        allow_disabled: false,
        removable: false,
        optional: false,
        required_feature_gate: None,
        skip: &[],
        olm: None,
        operator_all_egress: false,
        operator_config: true,
        hosted: false,
        hosted_image_envs: &[],
        hosted_token_minter: None,
        hosted_service_ca: true,
    }
}

/// Every driver we know, platform drivers first in OpenShift's order, then the optional ones.
pub fn registry() -> Vec<DriverEntry> {
    vec![
        DriverEntry {
            extra_image_envs: &[(
                "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE",
                "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE",
            )],
            hosted: true,
            hosted_service_ca: false,
            ..platform_driver(
                "disk.csi.azure.com",
                "azure-disk",
                PlatformType::Azure,
                "AzureDisk",
                "azure-disk-csi-driver-operator",
                (
                    "AZURE_DISK_DRIVER_OPERATOR_IMAGE",
                    "AZURE_DISK_DRIVER_IMAGE",
                ),
            )
        },
        DriverEntry {
            extra_image_envs: &[(
                "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE",
                "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE",
            )],
            skip: &[Skip::OnAzureStackHub],
            hosted: true,
            hosted_service_ca: false,
            ..platform_driver(
                "file.csi.azure.com",
                "azure-file",
                PlatformType::Azure,
                "AzureFile",
                "azure-file-csi-driver-operator",
                (
                    "AZURE_FILE_DRIVER_OPERATOR_IMAGE",
                    "AZURE_FILE_DRIVER_IMAGE",
                ),
            )
        },
        DriverEntry {
            olm: Some(OlmPackage {
                package: "aws-ebs-csi-driver-operator",
                operator_deployment: "aws-ebs-csi-driver-operator",
            }),
            hosted: true,
            hosted_image_envs: &[("HYPERSHIFT_IMAGE", "HYPERSHIFT_IMAGE")],
            hosted_token_minter: Some((
                "openshift-cluster-csi-drivers",
                "aws-ebs-csi-driver-controller-sa",
            )),
            ..platform_driver(
                "ebs.csi.aws.com",
                "aws-ebs",
                PlatformType::AWS,
                "AWSEBS",
                "aws-ebs-csi-driver-operator",
                ("AWS_EBS_DRIVER_OPERATOR_IMAGE", "AWS_EBS_DRIVER_IMAGE"),
            )
        },
        platform_driver(
            "pd.csi.storage.gke.io",
            "gcp-pd",
            PlatformType::GCP,
            "GCPPD",
            "gcp-pd-csi-driver-operator",
            ("GCP_PD_DRIVER_OPERATOR_IMAGE", "GCP_PD_DRIVER_IMAGE"),
        ),
        DriverEntry {
            skip: &[Skip::OnExternalControlPlane],
            operator_all_egress: true,
            ..platform_driver(
                "vpc.block.csi.ibm.io",
                "ibm-vpc-block",
                PlatformType::IBMCloud,
                "IBMVPCBlock",
                "ibm-vpc-block-csi-driver-operator",
                (
                    "IBM_VPC_BLOCK_DRIVER_OPERATOR_IMAGE",
                    "IBM_VPC_BLOCK_DRIVER_IMAGE",
                ),
            )
        },
        DriverEntry {
            extra_image_envs: &[("MANILA_NFS_DRIVER_IMAGE", "NFS_DRIVER_IMAGE")],
            allow_disabled: true,
            operator_all_egress: true,
            olm: Some(OlmPackage {
                package: "manila-csi-driver-operator",
                operator_deployment: "csi-driver-manila-operator",
            }),
            hosted: true,
            ..platform_driver(
                "manila.csi.openstack.org",
                "openstack-manila",
                PlatformType::OpenStack,
                "Manila",
                "manila-csi-driver-operator",
                ("MANILA_DRIVER_OPERATOR_IMAGE", "MANILA_DRIVER_IMAGE"),
            )
        },
        DriverEntry {
            operator_all_egress: true,
            hosted: true,
            ..platform_driver(
                "cinder.csi.openstack.org",
                "openstack-cinder",
                PlatformType::OpenStack,
                "OpenStackCinder",
                "openstack-cinder-csi-driver-operator",
                (
                    "OPENSTACK_CINDER_DRIVER_OPERATOR_IMAGE",
                    "OPENSTACK_CINDER_DRIVER_IMAGE",
                ),
            )
        },
        DriverEntry {
            hosted: true,
            ..platform_driver(
                "powervs.csi.ibm.com",
                "powervs-block",
                PlatformType::PowerVS,
                "PowerVSBlock",
                "powervs-block-csi-driver-operator",
                (
                    "POWERVS_BLOCK_CSI_DRIVER_OPERATOR_IMAGE",
                    "POWERVS_BLOCK_CSI_DRIVER_IMAGE",
                ),
            )
        },
        DriverEntry {
            extra_image_envs: &[("VMWARE_VSPHERE_SYNCER_IMAGE", "VMWARE_VSPHERE_SYNCER_IMAGE")],
            allow_disabled: true,
            operator_all_egress: true,
            ..platform_driver(
                "csi.vsphere.vmware.com",
                "vsphere",
                PlatformType::VSphere,
                "VSphere",
                "vmware-vsphere-csi-driver-operator",
                (
                    "VMWARE_VSPHERE_DRIVER_OPERATOR_IMAGE",
                    "VMWARE_VSPHERE_DRIVER_IMAGE",
                ),
            )
        },
        DriverEntry {
            removable: true,
            optional: true,
            operator_config: false,
            olm: Some(OlmPackage {
                package: "aws-efs-csi-driver-operator",
                operator_deployment: "aws-efs-csi-driver-operator",
            }),
            ..platform_driver(
                "efs.csi.aws.com",
                "aws-efs",
                PlatformType::AWS,
                "AWSEFS",
                "aws-efs-csi-driver-operator",
                ("AWS_EFS_DRIVER_OPERATOR_IMAGE", "AWS_EFS_DRIVER_IMAGE"),
            )
        },
        DriverEntry {
            platforms: Platforms::All,
            removable: true,
            optional: true,
            operator_config: false,
            olm: Some(OlmPackage {
                package: "smb-csi-driver-operator",
                operator_deployment: "smb-csi-driver-operator",
            }),
            ..platform_driver(
                "smb.csi.k8s.io",
                "smb",
                PlatformType::None,
                "SMB",
                "smb-csi-driver-operator",
                ("SMB_DRIVER_OPERATOR_IMAGE", "SMB_DRIVER_IMAGE"),
            )
        },
    ]
}

/// Finds a driver by its short name or its CSI driver name.
pub fn find(name: &str) -> Option<DriverEntry> {
    registry()
        .into_iter()
        .find(|d| d.short_name == name || d.csi_driver_name == name)
}

/// Every namespace the starter puts objects in, derived from the catalogue:
/// [`DRIVER_NAMESPACE`] first (the driver operators and most operands), then, sorted, the
/// operand namespaces of the drivers whose operands live apart from their operator (OpenShift's
/// Manila). The cluster storage operator watches its objects in each and holds a Role in each.
pub fn driver_namespaces() -> Vec<String> {
    let separate: BTreeSet<String> = registry()
        .iter()
        .filter_map(|entry| drivers::by_name(entry.short_name).ok())
        .map(|def| def.namespace)
        .filter(|namespace| namespace != DRIVER_NAMESPACE)
        .collect();
    std::iter::once(DRIVER_NAMESPACE.to_owned())
        .chain(separate)
        .collect()
}

/// What the cluster says about drivers, besides its platform.
#[derive(Clone, Debug, Default)]
pub struct ClusterDrivers {
    /// Names of the ClusterCSIDrivers that exist.
    pub installed: BTreeSet<String>,
    /// CSIDriver objects someone else made (`opkit::ownership`), by name, with who made them.
    pub foreign_csidrivers: BTreeMap<String, opkit::ownership::Installer>,
    /// Enabled feature gates.
    pub enabled_gates: BTreeSet<String>,
}

/// The decision for one driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start its operator.
    Start,
    /// Not for this cluster; the reason is for logs and status.
    Skip(String),
    /// It should run but must not: the message tells the admin what to do.
    Blocked(String),
}

/// Decides, for every registry entry, whether its operator starts on this cluster.
pub fn select(
    platform: &ClusterPlatform,
    cluster: &ClusterDrivers,
) -> Vec<(DriverEntry, Decision)> {
    registry()
        .into_iter()
        .map(|entry| {
            let decision = decide(&entry, platform, cluster);
            (entry, decision)
        })
        .collect()
}

fn decide(entry: &DriverEntry, platform: &ClusterPlatform, cluster: &ClusterDrivers) -> Decision {
    let installed = cluster.installed.contains(entry.csi_driver_name);
    match &entry.platforms {
        Platforms::Only(p) if *p != platform.platform => {
            return Decision::Skip(format!(
                "runs on {p}, the cluster is on {}",
                platform.describe()
            ));
        }
        _ => {}
    }
    if entry.optional && !installed {
        return Decision::Skip(format!(
            "optional: create ClusterCSIDriver {} to install it",
            entry.csi_driver_name
        ));
    }
    if !installed {
        for rule in entry.skip {
            match rule {
                Skip::OnAzureStackHub if platform.azure_stack_hub => {
                    return Decision::Skip("not supported on Azure Stack Hub".into());
                }
                Skip::OnExternalControlPlane
                    if platform.control_plane_topology == TopologyMode::External =>
                {
                    return Decision::Skip("not run when the control plane is External".into());
                }
                _ => {}
            }
        }
    }
    if let Some(gate) = entry.required_feature_gate
        && !cluster.enabled_gates.contains(gate)
    {
        return Decision::Skip(format!("feature gate {gate} is not enabled"));
    }
    if let Some(installer) = cluster.foreign_csidrivers.get(entry.csi_driver_name) {
        return Decision::Blocked(format!(
            "detected CSI driver {name} that is not provided by this operator (installed by {who}): \
             remove CSIDriver {name} and the driver that installed it ({removal}) before this \
             operator can install its own",
            name = entry.csi_driver_name,
            who = installer.description,
            removal = installer.removal,
        ));
    }
    Decision::Start
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::platform::Source;

    #[test]
    fn driver_namespaces_are_the_catalogues_once_each_driver_namespace_first() {
        let namespaces = driver_namespaces();
        assert_eq!(namespaces[0], DRIVER_NAMESPACE);
        let unique: BTreeSet<&String> = namespaces.iter().collect();
        assert_eq!(unique.len(), namespaces.len(), "{namespaces:?}");
        for entry in registry() {
            let def = drivers::by_name(entry.short_name).unwrap();
            assert!(
                namespaces.contains(&def.namespace),
                "{}: {}",
                entry.short_name,
                def.namespace
            );
        }
    }

    fn cluster_on(platform: PlatformType) -> ClusterPlatform {
        ClusterPlatform {
            platform,
            control_plane_topology: TopologyMode::HighlyAvailable,
            azure_stack_hub: false,
            infrastructure_name: Some("c-1".into()),
            source: Source::Infrastructure,
            problem: None,
        }
    }

    fn started(platform: &ClusterPlatform, cluster: &ClusterDrivers) -> Vec<&'static str> {
        select(platform, cluster)
            .into_iter()
            .filter(|(_, d)| *d == Decision::Start)
            .map(|(e, _)| e.short_name)
            .collect()
    }

    #[rstest]
    #[case(PlatformType::AWS, &["aws-ebs"])]
    #[case(PlatformType::GCP, &["gcp-pd"])]
    #[case(PlatformType::Azure, &["azure-disk", "azure-file"])]
    #[case(PlatformType::OpenStack, &["openstack-manila", "openstack-cinder"])]
    #[case(PlatformType::VSphere, &["vsphere"])]
    #[case(PlatformType::IBMCloud, &["ibm-vpc-block"])]
    #[case(PlatformType::PowerVS, &["powervs-block"])]
    #[case(PlatformType::None, &[])]
    #[case(PlatformType::BareMetal, &[])]
    #[case(PlatformType::Empty, &[])]
    fn each_platform_starts_its_drivers(#[case] platform: PlatformType, #[case] expected: &[&str]) {
        assert_eq!(
            started(&cluster_on(platform), &ClusterDrivers::default()),
            expected
        );
    }

    #[test]
    fn azure_file_is_skipped_on_azure_stack_hub_unless_installed() {
        let hub = ClusterPlatform {
            azure_stack_hub: true,
            ..cluster_on(PlatformType::Azure)
        };
        assert_eq!(started(&hub, &ClusterDrivers::default()), ["azure-disk"]);
        let decisions = select(&hub, &ClusterDrivers::default());
        let file = decisions
            .iter()
            .find(|(e, _)| e.short_name == "azure-file")
            .unwrap();
        assert_eq!(
            file.1,
            Decision::Skip("not supported on Azure Stack Hub".into())
        );

        let installed = ClusterDrivers {
            installed: ["file.csi.azure.com".to_owned()].into(),
            ..Default::default()
        };
        assert_eq!(started(&hub, &installed), ["azure-disk", "azure-file"]);
    }

    #[test]
    fn ibm_vpc_is_skipped_on_external_control_planes_unless_installed() {
        let roks = ClusterPlatform {
            control_plane_topology: TopologyMode::External,
            ..cluster_on(PlatformType::IBMCloud)
        };
        assert!(started(&roks, &ClusterDrivers::default()).is_empty());
        let installed = ClusterDrivers {
            installed: ["vpc.block.csi.ibm.io".to_owned()].into(),
            ..Default::default()
        };
        assert_eq!(started(&roks, &installed), ["ibm-vpc-block"]);
    }

    #[test]
    fn optional_drivers_start_when_their_cluster_csi_driver_exists() {
        let aws = cluster_on(PlatformType::AWS);
        let requested = ClusterDrivers {
            installed: ["efs.csi.aws.com".to_owned(), "smb.csi.k8s.io".to_owned()].into(),
            ..Default::default()
        };
        assert_eq!(started(&aws, &requested), ["aws-ebs", "aws-efs", "smb"]);
        // SMB runs anywhere; EFS only on AWS.
        assert_eq!(
            started(&cluster_on(PlatformType::GCP), &requested),
            ["gcp-pd", "smb"]
        );
        let (_, efs) = select(&aws, &ClusterDrivers::default())
            .into_iter()
            .find(|(e, _)| e.short_name == "aws-efs")
            .unwrap();
        assert_eq!(
            efs,
            Decision::Skip(
                "optional: create ClusterCSIDriver efs.csi.aws.com to install it".into()
            )
        );
    }

    #[test]
    fn a_foreign_csi_driver_blocks_ours_with_instructions() {
        let installer = opkit::ownership::Installer {
            description: "Helm release pd in namespace kube-system".into(),
            removal: "helm uninstall pd --namespace kube-system".into(),
        };
        let cluster = ClusterDrivers {
            foreign_csidrivers: [("pd.csi.storage.gke.io".to_owned(), installer)].into(),
            ..Default::default()
        };
        let decisions = select(&cluster_on(PlatformType::GCP), &cluster);
        let (_, gcp) = decisions
            .iter()
            .find(|(e, _)| e.short_name == "gcp-pd")
            .unwrap();
        let Decision::Blocked(message) = gcp else {
            panic!("expected Blocked, got {gcp:?}")
        };
        assert!(
            message.contains("(installed by Helm release pd in namespace kube-system)")
                && message.contains("remove CSIDriver pd.csi.storage.gke.io")
                && message.contains("(helm uninstall pd --namespace kube-system)"),
            "{message}"
        );
    }

    #[test]
    fn feature_gated_drivers_wait_for_their_gate() {
        let entry = DriverEntry {
            required_feature_gate: Some("CSIDriverFancy"),
            ..find("gcp-pd").unwrap()
        };
        let gcp = cluster_on(PlatformType::GCP);
        assert_eq!(
            decide(&entry, &gcp, &ClusterDrivers::default()),
            Decision::Skip("feature gate CSIDriverFancy is not enabled".into())
        );
        let gates = ClusterDrivers {
            enabled_gates: ["CSIDriverFancy".to_owned()].into(),
            ..Default::default()
        };
        assert_eq!(decide(&entry, &gcp, &gates), Decision::Start);
    }

    #[test]
    fn registry_entries_are_unique_and_findable() {
        let entries = registry();
        let names: BTreeSet<_> = entries.iter().map(|e| e.csi_driver_name).collect();
        let shorts: BTreeSet<_> = entries.iter().map(|e| e.short_name).collect();
        let prefixes: BTreeSet<_> = entries.iter().map(|e| e.condition_prefix).collect();
        assert_eq!(names.len(), entries.len());
        assert_eq!(shorts.len(), entries.len());
        assert_eq!(prefixes.len(), entries.len());
        for entry in &entries {
            assert!(
                api::operator_v1::CSIDriverName::from(entry.csi_driver_name).is_known(),
                "{} must be an allowed ClusterCSIDriver name",
                entry.csi_driver_name
            );
            assert_eq!(find(entry.short_name).as_ref(), Some(entry));
            assert_eq!(find(entry.csi_driver_name).as_ref(), Some(entry));
            assert!(entry.operator_image_env.ends_with("_OPERATOR_IMAGE"));
        }
        assert!(find("nfs").is_none());
    }
}
