//! Command-line arguments of `storage-operator`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// The version line: crate version and the git commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("STORAGE_OPERATOR_GIT_COMMIT"),
    ")"
);

/// The image the committed install manifests deploy: a locally built image, until the project
/// publishes one (`kubectl set image` or `manifests --image` to use another).
pub const DEFAULT_IMAGE: &str = "localhost/storage-operator:latest";

/// Installs the right CSI driver for the platform a Kubernetes or OpenShift cluster runs on,
/// keeps it healthy and reports its status.
#[derive(Debug, Parser)]
#[command(name = "storage-operator", version = VERSION, propagate_version = true)]
pub struct Cli {
    /// Log line format.
    #[arg(long, global = true, value_enum, env = "LOG_FORMAT", default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,

    /// Log filter: a level (error, warn, info, debug, trace) or a tracing directive such as
    /// `info,storage_operator=debug`.
    #[arg(long, global = true, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written (always to standard error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object per line.
    Json,
}

/// Options of the cluster storage operator.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The image of this binary, which the driver operators run too.
    #[arg(long, env = "OPERATOR_IMAGE")]
    pub operator_image: String,

    /// The version reported in ClusterOperator status (the release version on OpenShift).
    #[arg(long, env = "OPERATOR_IMAGE_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
    pub operator_version: String,

    /// With a hosted control plane (HyperShift): the guest cluster's kubeconfig (as HyperShift's
    /// `service-network-admin-kubeconfig` Secret mounts it). Storage, the ClusterOperator and
    /// the ClusterCSIDrivers are then the guest's, and the driver operators run in this
    /// process's cluster, in the control-plane namespace (the pod's, or --namespace); only the
    /// drivers OpenShift runs hosted are started.
    #[arg(long, value_name = "FILE")]
    pub guest_kubeconfig: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub process: ProcessArgs,
}

/// Options every long-running operator process shares.
#[derive(Debug, clap::Args)]
pub struct ProcessArgs {
    /// Where /healthz, /readyz and /metrics are served.
    #[arg(long, env = "ADMIN_ADDRESS", default_value = "0.0.0.0:8080")]
    pub admin_address: std::net::SocketAddr,

    /// Serve /metrics over HTTPS on this address (OpenShift's operators: 0.0.0.0:8443), to
    /// callers the API server allows to `get` the URL `/metrics` (a bearer token or a client
    /// certificate of its client CA), instead of over HTTP on the admin address.
    #[arg(long, value_name = "ADDRESS")]
    pub metrics_address: Option<std::net::SocketAddr>,

    /// The serving certificate of --metrics-address: a directory with tls.crt and tls.key (as
    /// service-ca's Secret is mounted), read again as it changes; a self-signed certificate is
    /// served while it has none.
    #[arg(long, value_name = "DIR", default_value = opkit::secure_metrics::DEFAULT_CERT_DIR)]
    pub serving_cert_dir: std::path::PathBuf,

    /// Namespace of the leader election Lease (the pod's namespace in a cluster).
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,

    /// This replica's identity in leader election.
    #[arg(long, env = "POD_NAME", default_value = "storage-operator")]
    pub identity: String,

    /// Run without leader election (only one replica may run).
    #[arg(long)]
    pub no_leader_election: bool,

    /// How long the leader's lease lasts without renewal, in seconds (OpenShift: 137).
    #[arg(long, value_name = "SECONDS", default_value_t = 137)]
    pub lease_duration: u64,

    /// When the leader renews its lease, in seconds after the last renewal (OpenShift's retry
    /// period: 26, so that an API server outage of a minute keeps the leader). Must be shorter
    /// than the lease duration.
    #[arg(long, value_name = "SECONDS", default_value_t = 26)]
    pub lease_renew_after: u64,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the cluster storage operator: detect the platform, start its CSI driver operators and
    /// report status in Storage/cluster and ClusterOperator/storage. Connects with the
    /// in-cluster service account, or KUBECONFIG outside a cluster.
    Run(RunArgs),

    /// Run the operator of one CSI driver (as the cluster storage operator starts it).
    Driver {
        /// The driver: a short name such as `gcp-pd` or its CSI name such as
        /// `pd.csi.storage.gke.io`.
        name: String,

        /// The driver operator's config (`GenericOperatorConfig` YAML with the cluster's TLS
        /// profile), as the cluster storage operator mounts it from `<operator>-config`.
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,

        /// With a hosted control plane (HyperShift): the guest cluster's kubeconfig (as
        /// HyperShift's `service-network-admin-kubeconfig` Secret mounts it). The driver's
        /// controller then runs in this process's cluster, in the control-plane namespace (the
        /// pod's, or --namespace), and everything else goes to the guest, where the
        /// ClusterCSIDriver reports. Only for the drivers OpenShift runs hosted.
        #[arg(long, value_name = "FILE")]
        guest_kubeconfig: Option<std::path::PathBuf>,

        #[command(flatten)]
        process: ProcessArgs,
    },

    /// Run the build controller: create the pods of Docker and Source builds with their build
    /// volumes (CSI ephemeral volumes, Secrets, ConfigMaps) wired read only, and keep each
    /// build's phase in step with its pod. On OpenShift, whose controller manager runs builds
    /// too, it starts only with --selector.
    Builds {
        /// Only builds matching this label selector (required on OpenShift), e.g.
        /// `builds.storage.openshift.io/controller=storage-operator`.
        #[arg(long, env = "BUILD_SELECTOR", value_name = "SELECTOR")]
        selector: Option<String>,

        /// Only builds in this namespace (all namespaces when unset).
        #[arg(long, env = "WATCH_NAMESPACE", value_name = "NAMESPACE")]
        watch_namespace: Option<String>,

        /// The image of the build pods, which reads the build from its BUILD variable.
        #[arg(long, env = "BUILDER_IMAGE", default_value = builds::controller::DEFAULT_BUILDER_IMAGE)]
        builder_image: String,

        /// The release version whose FeatureGate status decides BuildCSIVolumes.
        #[arg(long, env = "OPERATOR_IMAGE_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
        release_version: String,

        #[command(flatten)]
        process: ProcessArgs,
    },

    /// Run only the CSIDriverDeployment controller: any CSI driver, declared by its pod
    /// templates (`csidriver.storage.openshift.io/v1alpha1`), for clusters that want just this.
    /// `run` includes it when the CRD is served.
    #[command(name = "csidriverdeployments")]
    CsiDriverDeployments {
        #[command(flatten)]
        process: ProcessArgs,
    },

    /// Print, offline, every object that would be installed for a platform or driver, as
    /// multi-document YAML. Images come from the OpenShift image env vars (DRIVER_IMAGE,
    /// PROVISIONER_IMAGE, ...) when set, else the upstream defaults.
    #[command(group(clap::ArgGroup::new("what").required(true).args(["driver", "platform", "csidriverdeployment"])))]
    Render {
        /// One driver: a short name such as `gcp-pd` or its CSI name.
        #[arg(long, value_name = "NAME")]
        driver: Option<String>,

        /// Every driver the cluster storage operator starts on this platform, named as in
        /// Infrastructure's `platformStatus.type` (AWS, GCP, Azure, OpenStack, VSphere, ...).
        #[arg(long, value_name = "PLATFORM")]
        platform: Option<String>,

        /// A CSIDriverDeployment manifest (YAML): every object the operator creates for it.
        /// Without a namespace it renders into `default`, as kubectl would apply it.
        #[arg(long, value_name = "FILE")]
        csidriverdeployment: Option<PathBuf>,

        /// Cluster layout: HighlyAvailable, SingleReplica, External (OpenShift), Kubernetes or
        /// KubernetesWithoutControlPlane (plain Kubernetes).
        #[arg(long, value_name = "TOPOLOGY", default_value = "HighlyAvailable")]
        topology: csi_kit::Topology,

        /// With --driver or --platform: for a hosted control plane (HyperShift; needs
        /// `--topology External`): each object is preceded by `# cluster: management` (the
        /// control-plane namespace of the management cluster) or `# cluster: guest`. The
        /// environment gives what HyperShift would (RELEASE_VERSION, HYPERSHIFT_IMAGE,
        /// RUN_AS_USER, the *_CONTROL_PLANE_IMAGE variables).
        #[arg(long, conflicts_with = "csidriverdeployment")]
        hosted: bool,

        /// With --hosted: the control-plane namespace of the hosted cluster.
        #[arg(
            long,
            value_name = "NAMESPACE",
            default_value = "clusters-hosted",
            requires = "hosted"
        )]
        control_plane_namespace: String,
    },

    /// Write (or check) every generated file under deploy/: the CRDs and this operator's
    /// install manifests for plain Kubernetes and for OpenShift.
    Manifests {
        /// Write the files under this directory (normally `deploy`).
        #[arg(long, value_name = "DIR", conflicts_with = "check")]
        out_dir: Option<PathBuf>,

        /// Compare the files under this directory with what would be generated and fail,
        /// naming the stale files, when they differ.
        #[arg(long, value_name = "DIR")]
        check: Option<PathBuf>,

        /// The operator image the manifests deploy.
        #[arg(long, default_value = DEFAULT_IMAGE)]
        image: String,

        /// Print the operator's install on the management side of a hosted control plane
        /// (HyperShift): its ServiceAccount, Role, RoleBinding and Deployment in this
        /// control-plane namespace (e.g. `clusters-demo`), ready to apply.
        #[arg(long, value_name = "NS", conflicts_with_all = ["out_dir", "check"])]
        hosted_control_plane_namespace: Option<String>,
    },

    /// Print the CustomResourceDefinitions this project defines, as multi-document YAML.
    Crds {
        /// Write one file per CRD into this directory instead of printing them.
        #[arg(long, value_name = "DIR", conflicts_with = "check")]
        out_dir: Option<PathBuf>,

        /// Compare the files in this directory with what would be generated and fail, naming
        /// the stale files, when they differ.
        #[arg(long, value_name = "DIR")]
        check: Option<PathBuf>,
    },

    /// Say why a volume does not come up: walk the chain a PersistentVolumeClaim, a Pod or a
    /// CSI driver goes through (class, driver, its pods, node registration, provisioning,
    /// volume, attachment, mount, operator) and print the first broken link with its
    /// evidence and fix, then every link as checked. Read-only. Exit code 0: no problem
    /// found; 1: a problem found; 2: the diagnosis failed.
    Diagnose(DiagnoseArgs),

    /// In-tree to CSI volume migration tools.
    Migration {
        #[command(subcommand)]
        command: MigrationCommand,
    },
}

/// Options of `diagnose`.
#[derive(Debug, clap::Args)]
#[command(arg_required_else_help = true, args_conflicts_with_subcommands = true)]
pub struct DiagnoseArgs {
    /// Print the ClusterRole that allows every read of diagnose (get and list, nothing else)
    /// as YAML, to bind to whoever runs it.
    #[arg(long)]
    pub print_rbac: bool,

    #[command(subcommand)]
    pub target: Option<DiagnoseTarget>,
}

/// What `diagnose` looks at.
#[derive(Debug, Subcommand)]
pub enum DiagnoseTarget {
    /// A PersistentVolumeClaim: why it is not bound, or why its volume is not mounted where a
    /// pod uses it.
    Pvc {
        /// The claim's namespace (default: the kubeconfig context's, else `default`).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// The claim.
        name: String,
        #[command(flatten)]
        common: DiagnoseCommon,
    },
    /// A Pod: the chain of every claim it uses, then its scheduling.
    Pod {
        /// The pod's namespace (default: the kubeconfig context's, else `default`).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// The pod.
        name: String,
        #[command(flatten)]
        common: DiagnoseCommon,
    },
    /// A CSI driver: its CSIDriver, controller and node pods, registration on every node and
    /// its operator's conditions.
    Driver {
        /// Its CSI name (`ebs.csi.aws.com`) or a catalogue short name (`aws-ebs`).
        name: String,
        #[command(flatten)]
        common: DiagnoseCommon,
    },
}

/// Options every `diagnose` subject takes.
#[derive(Debug, clap::Args)]
pub struct DiagnoseCommon {
    /// How to print the report: plain text, or the same as data.
    #[arg(short = 'o', long, value_enum, default_value_t = DiagnoseOutput::Text)]
    pub output: DiagnoseOutput,

    /// The kubeconfig to use (default: as kubectl finds it: KUBECONFIG, ~/.kube/config, or
    /// the pod's ServiceAccount).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// The formats of a diagnosis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiagnoseOutput {
    /// The finding (cause, evidence, fix), then the chain.
    Text,
    /// The report as JSON.
    Json,
    /// The report as YAML.
    Yaml,
}

/// Subcommands of `migration`.
#[derive(Debug, Subcommand)]
pub enum MigrationCommand {
    /// Print, offline, what Kubernetes' in-tree to CSI translation makes of StorageClasses,
    /// PersistentVolumes and Pods' inline volumes (CSI PersistentVolumes of a migration driver
    /// are translated back to in-tree), as multi-document YAML; every dropped, renamed or added
    /// parameter is explained in comments.
    Translate {
        /// Multi-document YAML to translate; `-` reads standard input.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn arguments_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn version_names_the_commit() {
        assert!(VERSION.contains("(commit "), "{VERSION}");
    }

    #[test]
    fn log_flags_parse() {
        let cli = Cli::try_parse_from([
            "storage-operator",
            "--log-format",
            "json",
            "--log-level",
            "debug",
            "crds",
        ])
        .unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        assert_eq!(cli.log_level, "debug");
        assert!(matches!(
            cli.command,
            Command::Crds {
                out_dir: None,
                check: None
            }
        ));
    }

    #[test]
    fn unknown_log_format_is_refused() {
        assert!(Cli::try_parse_from(["storage-operator", "--log-format", "xml", "crds"]).is_err());
    }
}
