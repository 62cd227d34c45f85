//! `storage-operator run`: the cluster storage operator as a process: admin server, leader
//! election, the controller, and a clean stop on SIGTERM.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context;
use opkit::admin::{AdminServer, Readiness};
use opkit::leader::{LeaderConfig, elect};
use opkit::metrics::Metrics;
use opkit::secure_metrics::{
    ApiReviewer, ProfileSource, SecureMetricsConfig, SecureMetricsServer, TlsProfile,
};
use storage_operator::plan::{LogLevelHook, Settings};

use std::future::Future;

use crate::cli::{ProcessArgs, RunArgs};

// The Lease the cluster storage operator's replicas compete for.
use storage_operator::names::LEASE;

/// `storage-operator run`.
pub fn run(args: RunArgs, log: crate::logging::LogControl) -> anyhow::Result<ExitCode> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let namespace = args
        .process
        .namespace
        .clone()
        .unwrap_or_else(|| storage_operator::plan::OPERATOR_NAMESPACE.to_owned());
    let guest = args
        .guest_kubeconfig
        .as_deref()
        .map(|path| -> anyhow::Result<_> {
            let (path, kubeconfig) = read_guest_kubeconfig(path)?;
            Ok((path, kubeconfig, hosted_control_plane(&namespace, &env)?))
        })
        .transpose()?;
    // Its /metrics follow the cluster's TLS profile, which the operator keeps in this cell
    // (Intermediate until it has read APIServer/cluster).
    let metrics_tls = opkit::secure_metrics::ProfileCell::default();
    metrics_tls.set(
        csi_kit::tls::serving_tls_of(None, "")
            .map(storage_operator::starter::metrics_profile)
            .unwrap_or_default(),
    );
    let settings = Settings {
        operator_image: args.operator_image,
        env,
        version: args.operator_version,
        operator_log_level: Some(LogLevelHook::new(move |level| log.set(level))),
        metrics_tls: Some(metrics_tls.clone()),
    };
    serve(
        &args.process,
        &namespace,
        LEASE,
        MetricsTls {
            profile: metrics_tls.get(),
            source: Some(metrics_tls.source()),
        },
        move |client, metrics, readiness, shutdown| async move {
            // With a hosted control plane this process's cluster is the management cluster;
            // the operator's own cluster, where it reports, is the guest.
            let (client, hosted) = match guest {
                Some((path, kubeconfig, control_plane)) => {
                    let guest = connect_to(&path, kubeconfig, LEASE).await?;
                    let hosted = storage_operator::operator::Hosted {
                        management: client,
                        control_plane,
                    };
                    (guest, Some(hosted))
                }
                None => (client, None),
            };
            storage_operator::operator::run_with(
                client, settings, hosted, metrics, readiness, shutdown,
            )
            .await
            .map_err(anyhow::Error::from)
        },
    )
}

/// `storage-operator driver <name>`.
pub fn driver(
    name: &str,
    config: Option<&std::path::Path>,
    guest_kubeconfig: Option<&std::path::Path>,
    process: ProcessArgs,
    log: crate::logging::LogControl,
) -> anyhow::Result<ExitCode> {
    let def = drivers::by_name(name)?;
    let profile = MetricsTls {
        profile: config
            .and_then(read_operator_config)
            .map(storage_operator::starter::metrics_profile)
            .unwrap_or_default(),
        source: config.map(|path| {
            let path = path.to_owned();
            ProfileSource(std::sync::Arc::new(move || {
                std::fs::read_to_string(&path)
                    .map_err(|error| format!("{}: {error}", path.display()))
                    .and_then(|text| storage_operator::starter::parse_operator_config(&text))
                    .map(storage_operator::starter::metrics_profile)
            }))
        }),
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    // The Lease OpenShift's driver operator holds, in the namespace it runs in (its pod's, from
    // the starter's Deployment), where the starter's Role allows it. That is the driver
    // namespace, also for a driver whose operands live in another one (Manila); with a hosted
    // control plane, the control-plane namespace of the management cluster.
    let lease = csi_kit::names::operator_lease(&def);
    let namespace = process
        .namespace
        .clone()
        .unwrap_or_else(|| storage_operator::registry::DRIVER_NAMESPACE.to_owned());
    let control_plane = match guest_kubeconfig {
        None => None,
        Some(_) if def.hosted.is_none() => anyhow::bail!(
            "--guest-kubeconfig: driver {} does not run with a hosted control plane (HyperShift runs AWS EBS, Azure Disk, Azure File, OpenStack Cinder, OpenStack Manila and IBM PowerVS Block)",
            def.short_name
        ),
        Some(_) => Some(hosted_control_plane(&namespace, &env)?),
    };
    let guest_kubeconfig = guest_kubeconfig.map(read_guest_kubeconfig).transpose()?;
    let guest_agent = lease.clone();
    let settings = driver_operator::Settings {
        env,
        instance: Some(process.identity.clone()),
        operator_log_level: Some(LogLevelHook::new(move |level| log.set(level))),
        host_fips: driver_operator::host_fips(),
        hosted: None,
        stuck_claims_after: None,
    };
    serve(
        &process,
        &namespace,
        &lease,
        profile,
        move |client, metrics, readiness, shutdown| async move {
            // With a hosted control plane this process's cluster is the management cluster;
            // the driver operator's own cluster, where it reports, is the guest.
            let (client, settings) = match (guest_kubeconfig, control_plane) {
                (Some((path, kubeconfig)), Some(control_plane)) => {
                    let guest = connect_to(&path, kubeconfig, &guest_agent).await?;
                    let hosted = driver_operator::Hosted {
                        management: client,
                        control_plane,
                    };
                    (
                        guest,
                        driver_operator::Settings {
                            hosted: Some(hosted),
                            ..settings
                        },
                    )
                }
                _ => (client, settings),
            };
            let extras = drivers::extras(&def, client.clone(), settings.hosted.is_some());
            driver_operator::run_with_extras(
                client, def, settings, extras, metrics, readiness, shutdown,
            )
            .await
            .map_err(anyhow::Error::from)
        },
    )
}

/// Reads the driver operator's config file (the cluster's TLS profile, from the cluster
/// storage operator's `<operator>-config` ConfigMap), as OpenShift's driver operators take it:
/// its `/metrics` over HTTPS (--metrics-address) follow it. (Its operands' metrics proxies follow
/// `APIServer/cluster` directly.) The file is read once: the cluster storage operator rolls the
/// Deployment when the profile changes. A missing or unreadable file is logged and does not
/// stop the operator, which then serves with rustls' defaults.
fn read_operator_config(path: &std::path::Path) -> Option<csi_kit::inputs::ServingTls> {
    let read = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| storage_operator::starter::parse_operator_config(&text));
    match read {
        Ok(tls) => {
            tracing::info!(
                file = %path.display(),
                min_tls_version = tls.min_version.as_deref().unwrap_or_default(),
                cipher_suites = tls.cipher_suites.len(),
                "read the operator config (TLS profile)"
            );
            Some(tls)
        }
        Err(error) => {
            tracing::warn!(
                file = %path.display(),
                %error,
                "cannot read the operator config; continuing without it"
            );
            None
        }
    }
}

/// `storage-operator builds`.
pub fn builds(
    settings: builds::controller::Settings,
    process: ProcessArgs,
) -> anyhow::Result<ExitCode> {
    let namespace = process
        .namespace
        .clone()
        .unwrap_or_else(|| builds::manifests::NAME.to_owned());
    serve(
        &process,
        &namespace,
        builds::manifests::LEASE,
        MetricsTls::default(),
        move |client, metrics, readiness, shutdown| async move {
            builds::controller::run(client, settings, metrics, readiness, shutdown)
                .await
                .map_err(anyhow::Error::from)
        },
    )
}

/// `storage-operator csidriverdeployments`: the CSIDriverDeployment controller alone.
pub fn csi_driver_deployments(process: ProcessArgs) -> anyhow::Result<ExitCode> {
    let namespace = process
        .namespace
        .clone()
        .unwrap_or_else(|| storage_operator::plan::OPERATOR_NAMESPACE.to_owned());
    let settings = csi_driver_deployment::controller::Settings {
        instance: Some(process.identity.clone()),
        env: std::env::vars().collect(),
        stuck_claims_after: None,
    };
    serve(
        &process,
        &namespace,
        DECLARED_LEASE,
        MetricsTls::default(),
        move |client, metrics, readiness, shutdown| async move {
            csi_driver_deployment::controller::run(
                client,
                settings,
                metrics,
                Some(readiness),
                shutdown,
            )
            .await
            .map_err(anyhow::Error::from)
        },
    )
}

/// The TLS profile of a process's `/metrics` over HTTPS, and where it is read again.
#[derive(Default)]
struct MetricsTls {
    profile: TlsProfile,
    source: Option<ProfileSource>,
}

/// The Lease of the standalone CSIDriverDeployment controller.
const DECLARED_LEASE: &str = "csidriverdeployment-controller-lock";

/// Runs an operator as a process: the async runtime, the admin server, leader election on
/// `lease` in `namespace`, `operator` while leading, and a clean stop on SIGTERM.
fn serve<F, Fut>(
    process: &ProcessArgs,
    namespace: &str,
    lease: &str,
    metrics_tls: MetricsTls,
    operator: F,
) -> anyhow::Result<ExitCode>
where
    F: FnOnce(
        kube::Client,
        Metrics,
        Readiness,
        std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    ) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    // One thread: an operator waits on the API server almost all the time, and each worker
    // thread costs a stack and a malloc arena of resident memory.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let client = connect(lease).await?;
        let metrics = Metrics::new();
        let readiness = Readiness::default();
        let mut admin =
            AdminServer::bind(process.admin_address, readiness.clone(), metrics.clone())
                .await
                .with_context(|| {
                    format!("binding the admin server to {}", process.admin_address)
                })?;
        if let Some(address) = process.metrics_address {
            let config = SecureMetricsConfig {
                profile_source: metrics_tls.source,
                self_signed_names: vec![process.identity.clone(), "localhost".to_owned()],
                ..SecureMetricsConfig::new(
                    address,
                    process.serving_cert_dir.clone(),
                    metrics_tls.profile,
                )
            };
            let reviewer = std::sync::Arc::new(ApiReviewer(client.clone()));
            let secure =
                SecureMetricsServer::bind(config, metrics.clone(), readiness.clone(), reviewer)
                    .await
                    .context("--metrics-address")?;
            tracing::info!(
                %address,
                cert_dir = %process.serving_cert_dir.display(),
                "serving /metrics over HTTPS"
            );
            tokio::spawn(secure.serve());
            admin = admin.metrics_served_at(address);
        }
        tokio::spawn(admin.serve());

        // Only the leader reconciles; losing the lease stops the process so it restarts clean.
        let mut election = if process.no_leader_election {
            None
        } else {
            let config = LeaderConfig {
                lease_duration: std::time::Duration::from_secs(process.lease_duration),
                renew_after: std::time::Duration::from_secs(process.lease_renew_after),
                ..LeaderConfig::new(namespace, lease, &process.identity)
            };
            Some(elect(client.clone(), &config).await?)
        };
        if let Some((receiver, _)) = election.as_mut() {
            tracing::info!(
                lease,
                namespace,
                identity = process.identity,
                "waiting for leadership"
            );
            let leading = tokio::select! {
                waited = receiver.wait_for(|leading| *leading) => {
                    waited.context("leader election stopped")?;
                    true
                }
                () = terminated() => false,
            };
            if !leading {
                tracing::info!("stopping before leading");
                release(election).await;
                return Ok(ExitCode::SUCCESS);
            }
            tracing::info!("leading");
        }
        // Stop on SIGTERM, or when leadership is lost.
        let lost_leadership = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let watcher = {
            let mut leading = election.as_ref().map(|(receiver, _)| receiver.clone());
            let lost_leadership = lost_leadership.clone();
            tokio::spawn(async move {
                let lost = async {
                    match leading.as_mut() {
                        Some(receiver) => {
                            let _ = receiver.wait_for(|leading| !*leading).await;
                        }
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = terminated() => tracing::info!("stopping"),
                    () = lost => {
                        tracing::error!("lost leadership; exiting");
                        lost_leadership.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                let _ = stop.send(());
            })
        };
        let shutdown = Box::pin(async move {
            let _ = stopped.await;
        });
        let result = operator(client, metrics, readiness, shutdown).await;
        watcher.abort();
        result?;
        let lost_leadership = lost_leadership.load(std::sync::atomic::Ordering::SeqCst);
        // Hand the lease over at once rather than making the next replica wait for it to expire.
        release(election).await;
        Ok(if lost_leadership {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    })
}

type Election = (
    tokio::sync::watch::Receiver<bool>,
    tokio::task::JoinHandle<
        Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>,
    >,
);

/// Releases the lease: closing the receiver makes the election task release it and end.
async fn release(election: Option<Election>) {
    let Some((receiver, task)) = election else {
        return;
    };
    drop(receiver);
    match tokio::time::timeout(std::time::Duration::from_secs(10), task).await {
        Ok(Ok(Ok(_))) => tracing::info!("released the leader lease"),
        Ok(Ok(Err(error))) => {
            tracing::warn!(%error, "could not release the leader lease; it will expire")
        }
        Ok(Err(error)) => tracing::warn!(%error, "leader election task failed"),
        Err(_) => tracing::warn!("releasing the leader lease timed out; it will expire"),
    }
}

/// SIGTERM (what the kubelet sends) or Ctrl-C.
async fn terminated() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        ) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the operator");
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The hosted control plane in `namespace`, with what HyperShift sets in the environment.
fn hosted_control_plane(
    namespace: &str,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<csi_kit::HostedControlPlane> {
    csi_kit::HostedControlPlane::from_env(namespace, env)
        .context("reading the hosted control plane's settings from the environment")
}

/// The guest kubeconfig of `--guest-kubeconfig`, read before anything connects, so that a
/// wrong path is said first.
fn read_guest_kubeconfig(
    path: &std::path::Path,
) -> anyhow::Result<(std::path::PathBuf, kube::config::Kubeconfig)> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("--guest-kubeconfig: reading {}", path.display()))?;
    Ok((path.to_path_buf(), kubeconfig))
}

/// Names the operator in the API server's audit log and request metrics:
/// `storage-operator/<version> (<who>)`.
fn with_agent(config: &mut kube::Config, who: &str) {
    let agent = format!("storage-operator/{} ({who})", env!("CARGO_PKG_VERSION"));
    if let Ok(value) = http::HeaderValue::from_str(&agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
}

/// A client of the cluster `kubeconfig` (read from `path`) names: the guest of a hosted control
/// plane. Its User-Agent is [`connect`]'s, marked `guest`.
pub async fn connect_to(
    path: &std::path::Path,
    kubeconfig: kube::config::Kubeconfig,
    lease: &str,
) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .with_context(|| format!("using the guest kubeconfig {}", path.display()))?;
    with_agent(&mut config, &format!("{lease}, guest"));
    kube::Client::try_from(config)
        .with_context(|| format!("connecting to the guest cluster of {}", path.display()))
}

/// A client of the cluster's API server: the pod's ServiceAccount in a cluster, else the
/// kubeconfig (`KUBECONFIG`, or `~/.kube/config`). Says which is missing when neither is there.
/// Its User-Agent names the operator by its `lease` (`storage-operator/<version> (<lease>)`),
/// as the API server's audit log and request metrics show it.
pub async fn connect(lease: &str) -> anyhow::Result<kube::Client> {
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::home_dir().map(|home| home.join(".kube").join("config")));
    if !in_cluster && !kubeconfig.as_ref().is_some_and(|path| path.exists()) {
        let where_ = kubeconfig.map_or_else(
            || "no kubeconfig (KUBECONFIG is unset and there is no home directory)".to_owned(),
            |path| format!("no kubeconfig at {}", path.display()),
        );
        anyhow::bail!(
            "no Kubernetes API to connect to: not in a pod (KUBERNETES_SERVICE_HOST is unset) and {where_}: set KUBECONFIG to a kubeconfig file, or run the operator in the cluster"
        );
    }
    let mut config = kube::Config::infer()
        .await
        .context("connecting to the Kubernetes API (in-cluster service account, or KUBECONFIG)")?;
    with_agent(&mut config, lease);
    kube::Client::try_from(config)
        .context("connecting to the Kubernetes API (in-cluster service account, or KUBECONFIG)")
}
