//! Figures for the cluster storage operator (`run`) and the GCP PD driver operator (`driver
//! gcp-pd`) on a real control plane: kube-apiserver and kube-controller-manager v1.36.2 from
//! `../shared/k8s`, started here with an audit log. The operators run as processes of the
//! release binary, each as the ServiceAccount it has in a cluster (the RBAC of
//! `deploy/kubernetes/` and of the starter). A bench, not a test: it prints numbers and asserts
//! nothing about time. Printed:
//! - start -> all operands: from the process's start to its last write before it settles, as
//!   the API server's audit log has them, with the requests and writes that took;
//! - idle requests per minute once settled;
//! - resident memory (VmRSS, and its peak VmHWM) on the empty cluster and with N
//!   PersistentVolumes and as many claims (half in-tree gcePersistentDisk, half CSI), with
//!   Nodes and CSINodes (one per 40 volumes) and one Pod per 4 claims, added while the
//!   operators run; 12 claims of the driver's class stay Pending (no provisioner runs), so
//!   its report of stuck claims is active once they are 5 minutes old;
//! - after the API server was down for 60 s and is back: how long each operator takes to undo a
//!   deletion of one of its operands;
//! - volumes first: both operators started anew on the cluster that now holds the volumes (as
//!   after an upgrade or a lease takeover): the time until their caches synced (`/readyz`), the
//!   requests until they are quiet, their resident memory right after the sync, 20 s after
//!   their start and after the idle window, with its peak, and the driver's report of the
//!   stuck claims;
//! - with hosted control planes (HyperShift), this control plane as the management cluster of
//!   10 guests (each a kube-apiserver and etcd of its own): one hosted cluster's storage
//!   operators (start, idle requests to the management API server, resident memory), then all
//!   of them together.
//!
//! Run with `cargo bench -p cli --bench real_cluster` (about 8 minutes; needs `../shared/k8s`,
//! which it starts and stops). `BENCH_VOLUMES=1000,4000`, `BENCH_IDLE_SECS=60` and
//! `BENCH_OUTAGE_SECS=60` change the sizes, `BENCH_HOSTED_GUESTS=10` the guests (0: none); `BENCH_BINARY=<path>` runs another build of
//! `storage-operator` (say, one with symbols, for a profiler).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench: a panic is a failed run

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{Value, json};

const CONTROL_PLANE_ENV: &str = "BENCH_CONTROL_PLANE";
const DRIVERS_NAMESPACE: &str = "openshift-cluster-csi-drivers";

fn main() {
    // `cargo bench` passes `--bench`; nothing else is expected.
    if std::env::var_os(CONTROL_PLANE_ENV).is_some() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(bench());
        return;
    }
    let k8s = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/k8s");
    if !k8s.join("start.sh").exists() {
        println!(
            "skipped: no control plane at {} (../shared/k8s)",
            k8s.display()
        );
        return;
    }
    // The control plane with an audit log of every request: metadata only, and the bodies of
    // the operators' writes to their own API groups (to say what an unexpected write changed).
    let work = std::env::temp_dir().join(format!("storage-operator-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let policy = work.join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: Request\n  verbs: [create, update, patch]\n  \
         resources: [{group: operator.openshift.io}, {group: config.openshift.io}]\n\
         - level: Metadata\n",
    )
    .unwrap();
    let audit = work.join("audit.log");
    let started = Command::new(k8s.join("start.sh"))
        .arg("--kcm")
        .env(
            "KUBE_APISERVER_EXTRA_ARGS",
            format!(
                "--audit-policy-file={} --audit-log-path={} --audit-log-maxsize=0",
                policy.display(),
                audit.display()
            ),
        )
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(started.status.success(), "start.sh --kcm failed");
    let kubeconfig = String::from_utf8(started.stdout).unwrap().trim().to_owned();
    let dir = Path::new(&kubeconfig).parent().unwrap().to_owned();
    // The bench itself runs in a child process, so that the control plane is stopped whatever
    // happens to it.
    let status = Command::new(std::env::current_exe().unwrap())
        .env(CONTROL_PLANE_ENV, &dir)
        .env("E2E_KUBECONFIG", &kubeconfig)
        .env("BENCH_AUDIT_LOG", &audit)
        .status();
    let _ = Command::new(k8s.join("stop.sh"))
        .arg("--clean")
        .arg(&dir)
        .status();
    let _ = std::fs::remove_dir_all(&work);
    assert!(status.unwrap().success(), "the bench failed");
}

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name).map_or_else(
        |_| default.to_vec(),
        |v| v.split(',').map(|n| n.trim().parse().unwrap()).collect(),
    )
}

fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// One request of the audit log.
#[derive(Debug)]
struct Event {
    at: SystemTime,
    user_agent: String,
    /// The user (a ServiceAccount's `system:serviceaccount:<namespace>:<name>`).
    user: String,
    verb: String,
    uri: String,
    /// The body of a write the audit policy records it for.
    request: Option<Value>,
}

impl Event {
    fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The audit log, read as it grows.
struct Audit {
    reader: BufReader<std::fs::File>,
    events: Vec<Event>,
}

impl Audit {
    fn open(path: &Path) -> Self {
        Self {
            reader: BufReader::new(std::fs::File::open(path).unwrap()),
            events: Vec::new(),
        }
    }

    fn read(&mut self) {
        let mut line = String::new();
        while self.reader.read_line(&mut line).unwrap() > 0 {
            if !line.ends_with('\n') {
                // A line still being written: read it whole next time.
                break;
            }
            let event: Value = serde_json::from_str(&line).unwrap();
            line.clear();
            let stage = event["stage"].as_str().unwrap_or_default();
            if stage != "ResponseComplete" && stage != "Panic" {
                continue;
            }
            let at = event["requestReceivedTimestamp"]
                .as_str()
                .unwrap_or_default();
            self.events.push(Event {
                at: parse_time(at),
                user_agent: event["userAgent"].as_str().unwrap_or_default().to_owned(),
                user: event["user"]["username"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                verb: event["verb"].as_str().unwrap_or_default().to_owned(),
                uri: event["requestURI"].as_str().unwrap_or_default().to_owned(),
                request: event.get("requestObject").cloned(),
            });
        }
    }

    /// The requests of an operator: `agent` is part of its User-Agent, or its user.
    fn of<'a>(&'a self, agent: &'a str) -> impl Iterator<Item = &'a Event> + 'a {
        self.events
            .iter()
            .filter(move |e| e.user_agent.contains(agent) || e.user == agent)
    }
}

/// `2026-11-25T06:30:00.123456Z` as a time.
fn parse_time(text: &str) -> SystemTime {
    let at: k8s_openapi::jiff::Timestamp = text.parse().unwrap();
    SystemTime::from(at)
}

async fn admin_config() -> Config {
    let path = std::env::var("E2E_KUBECONFIG").unwrap();
    Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&path).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap()
}

/// A kubeconfig for ServiceAccount `namespace/name`, with a fresh token.
async fn service_account_kubeconfig(admin: &Client, namespace: &str, name: &str) -> PathBuf {
    let admin_path = PathBuf::from(std::env::var("E2E_KUBECONFIG").unwrap());
    service_account_kubeconfig_of(admin, &admin_path, namespace, name).await
}

/// A kubeconfig for ServiceAccount `namespace/name` of the cluster whose admin kubeconfig is
/// `admin_path` (and client `admin`), with a fresh token, beside it.
async fn service_account_kubeconfig_of(
    admin: &Client,
    admin_path: &Path,
    namespace: &str,
    name: &str,
) -> PathBuf {
    let token = e2e::identity::service_account_token(admin, namespace, name, 7200).await;
    let mut kubeconfig: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(admin_path).unwrap()).unwrap();
    let user = kubeconfig["contexts"][0]["context"]["user"].clone();
    kubeconfig["users"] = json!([{"name": user, "user": {"token": token}}]);
    let path = admin_path
        .parent()
        .unwrap()
        .join(format!("bench-{namespace}-{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
    path
}

/// An operator process of the release binary.
struct Operator {
    name: &'static str,
    /// What its User-Agent contains.
    agent: String,
    child: Child,
    started: SystemTime,
}

impl Operator {
    fn start(name: &'static str, agent: &str, kubeconfig: &Path, args: &[&str]) -> Self {
        let mut args = args.to_vec();
        args.push("--no-leader-election");
        Self::start_with(name, agent, kubeconfig, &args, &[])
    }

    /// [`Operator::start`] with these arguments (leader election unless they say otherwise)
    /// and environment.
    fn start_with(
        name: &'static str,
        agent: &str,
        kubeconfig: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn(name, agent, kubeconfig, args, env, "127.0.0.1:0")
    }

    /// [`Operator::start`] with its admin server on a free port of its own, for
    /// [`Operator::wait_ready`]; the port.
    fn start_serving(
        name: &'static str,
        agent: &str,
        kubeconfig: &Path,
        args: &[&str],
    ) -> (Self, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut args = args.to_vec();
        args.push("--no-leader-election");
        let address = format!("127.0.0.1:{port}");
        (
            Self::spawn(name, agent, kubeconfig, &args, &[], &address),
            port,
        )
    }

    fn spawn(
        name: &'static str,
        agent: &str,
        kubeconfig: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        admin_address: &str,
    ) -> Self {
        let started = SystemTime::now();
        // `BENCH_BINARY` runs another build of the binary (one with symbols, to profile it).
        let binary = std::env::var_os("BENCH_BINARY").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_storage-operator")),
            PathBuf::from,
        );
        // As deployed: the install manifests and the starter serve /metrics over HTTPS (a
        // self-signed certificate here, made at the first connection; none is made, nor any
        // review asked, while nothing scrapes), but not the hosted cluster storage operator.
        let hosted_operator = args.first() == Some(&"run") && args.contains(&"--guest-kubeconfig");
        let metrics = if hosted_operator {
            &[][..]
        } else {
            &["--metrics-address", "127.0.0.1:0"][..]
        };
        let child = Command::new(binary)
            .args(args)
            .args(metrics)
            .args(["--admin-address", admin_address])
            .envs(env.iter().copied())
            .env("KUBECONFIG", kubeconfig)
            .env("LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Self {
            name,
            agent: agent.to_owned(),
            child,
            started,
        }
    }

    /// A figure of `/proc/<pid>/<file>` (a `<key>` line in kB), in MiB.
    fn proc_mib(&self, file: &str, key: &str) -> f64 {
        let text = std::fs::read_to_string(format!("/proc/{}/{file}", self.child.id())).unwrap();
        let kib: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap()
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .unwrap();
        kib / 1024.0
    }

    /// Resident memory (VmRSS), in MiB.
    fn rss(&self) -> f64 {
        self.proc_mib("status", "VmRSS:")
    }

    /// The peak of resident memory (VmHWM) since the start, in MiB.
    fn peak(&self) -> f64 {
        self.proc_mib("status", "VmHWM:")
    }

    /// Resident memory, in MiB: total (VmRSS), and its heap and other anonymous part.
    fn rss_mib(&self) -> String {
        format!(
            "{:.1} MiB ({:.1} anonymous, peak {:.1})",
            self.rss(),
            self.proc_mib("smaps_rollup", "Anonymous:"),
            self.peak()
        )
    }

    fn stop(self) {
        drop(self);
    }
}

/// An operator the bench started is stopped (SIGTERM, then waited for) however the bench ends,
/// a failed assertion included.
impl Drop for Operator {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// Waits until `operator` has written nothing for `quiet` (a bench may use a window; tests may
/// not), and returns its last write's time, its requests and writes until then.
async fn settle(
    audit: &mut Audit,
    operator: &Operator,
    quiet: Duration,
) -> (SystemTime, usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        audit.read();
        let last_write = audit
            .of(&operator.agent)
            .filter(|e| e.is_write())
            .map(|e| e.at)
            .max();
        if let Some(last) = last_write
            && SystemTime::now().duration_since(last).unwrap_or_default() >= quiet
        {
            let requests = audit.of(&operator.agent).filter(|e| e.at <= last).count();
            let writes = audit
                .of(&operator.agent)
                .filter(|e| e.at <= last && e.is_write())
                .count();
            return (last, requests, writes);
        }
        assert!(
            Instant::now() < deadline,
            "{} did not settle in 3 minutes",
            operator.name
        );
    }
}

/// Prints how long `operator` took from its start to its last write before it settled, and
/// the requests and writes until then.
async fn report_start(audit: &mut Audit, operator: &Operator) {
    let (last, requests, writes) = settle(audit, operator, Duration::from_secs(5)).await;
    let first = audit.of(&operator.agent).map(|e| e.at).min().unwrap();
    println!(
        "{}: start -> all operands {} (first request after {}), {requests} requests ({writes} writes)",
        operator.name,
        seconds(last.duration_since(operator.started).unwrap()),
        seconds(first.duration_since(operator.started).unwrap()),
    );
}

/// Requests per minute of `operator` over `window`, and the writes and non-watch requests
/// among them.
async fn idle(
    audit: &mut Audit,
    operator: &Operator,
    window: Duration,
) -> (f64, usize, Vec<String>) {
    audit.read();
    let from = SystemTime::now();
    tokio::time::sleep(window).await;
    audit.read();
    let during: Vec<&Event> = audit.of(&operator.agent).filter(|e| e.at >= from).collect();
    let writes = during.iter().filter(|e| e.is_write()).count();
    for write in during.iter().filter(|e| e.is_write()) {
        println!(
            "  {} {}: {}",
            write.verb,
            write.uri.split('?').next().unwrap_or_default(),
            what_changed(audit, write)
        );
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for e in &during {
        let path = e.uri.split('?').next().unwrap_or_default();
        *seen.entry(format!("{} {path}", e.verb)).or_default() += 1;
    }
    let per_minute = during.len() as f64 * 60.0 / window.as_secs_f64();
    (
        per_minute,
        writes,
        seen.into_iter().map(|(k, n)| format!("{n}x {k}")).collect(),
    )
}

/// What `write` changed in the conditions its body carries, against the operator's write
/// before it to the same object.
fn what_changed(audit: &Audit, write: &Event) -> String {
    fn conditions(body: &Value) -> BTreeMap<String, String> {
        body["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["type"].as_str().unwrap_or_default().to_owned(),
                    format!(
                        "{} {}: {}",
                        c["status"].as_str().unwrap_or_default(),
                        c["reason"].as_str().unwrap_or_default(),
                        c["message"].as_str().unwrap_or_default()
                    ),
                )
            })
            .collect()
    }
    let Some(now) = &write.request else {
        return "(body not recorded)".to_owned();
    };
    let path = |e: &Event| e.uri.split('?').next().unwrap_or_default().to_owned();
    let before = audit
        .events
        .iter()
        .filter(|e| {
            e.user == write.user && e.is_write() && e.at < write.at && path(e) == path(write)
        })
        .filter_map(|e| e.request.as_ref())
        .next_back();
    let (old, new) = (before.map(conditions).unwrap_or_default(), conditions(now));
    let changed: Vec<String> = new
        .iter()
        .filter(|(kind, text)| old.get(*kind) != Some(*text))
        .map(|(kind, text)| match old.get(kind) {
            Some(was) => format!("{kind} {was} -> {text}"),
            None => format!("{kind} -> {text}"),
        })
        .chain(
            old.keys()
                .filter(|kind| !new.contains_key(*kind))
                .map(|kind| format!("{kind} removed")),
        )
        .collect();
    // What another client wrote just before: what the operator answered, most likely.
    let cause = audit
        .events
        .iter()
        .rfind(|e| {
            e.user != write.user
                && e.is_write()
                && e.at <= write.at
                && write.at.duration_since(e.at).unwrap_or_default() < Duration::from_secs(2)
        })
        .map_or(String::new(), |e| {
            format!(
                " (after {} {} {})",
                e.user,
                e.verb,
                e.uri.split('?').next().unwrap_or_default()
            )
        });
    if changed.is_empty() {
        format!("no condition changed{cause}")
    } else {
        format!("{}{cause}", changed.join("; "))
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

async fn bench() {
    let admin = Client::try_from(admin_config().await).unwrap();
    let mut audit = Audit::open(Path::new(&std::env::var("BENCH_AUDIT_LOG").unwrap()));
    let idle_window = env_secs("BENCH_IDLE_SECS", 60);
    let outage = env_secs("BENCH_OUTAGE_SECS", 60);
    let sizes = env_list("BENCH_VOLUMES", &[1000, 4000]);
    println!("# storage-operator on kube-apiserver v1.36.2 (../shared/k8s), release build");

    // The cluster storage operator, as the ServiceAccount of deploy/kubernetes/.
    e2e::install::storage_operator(&admin).await;
    e2e::ensure_gcp(&admin).await;
    // Claims of the driver's class that a pod waits for and no provisioner serves: stuck
    // Pending, reported once 5 minutes old (before the volumes-first phase starts).
    stuck_claims(&admin, STUCK_CLAIMS).await;
    let cso_kubeconfig = service_account_kubeconfig(
        &admin,
        "openshift-cluster-storage-operator",
        "cluster-storage-operator",
    )
    .await;
    let cso = Operator::start(
        "cluster storage operator",
        "(cluster-storage-operator-lock)",
        &cso_kubeconfig,
        &[
            "run",
            "--operator-image",
            "localhost/storage-operator:bench",
        ],
    );
    report_start(&mut audit, &cso).await;

    // The GCP PD driver operator, as the ServiceAccount the starter made for it.
    let driver_kubeconfig =
        service_account_kubeconfig(&admin, DRIVERS_NAMESPACE, "gcp-pd-csi-driver-operator").await;
    let driver = Operator::start(
        "GCP PD driver operator",
        "(gcp-pd-csi-driver-operator-lock)",
        &driver_kubeconfig,
        &["driver", "gcp-pd"],
    );
    report_start(&mut audit, &driver).await;

    for operator in [&cso, &driver] {
        let (per_minute, writes, requests) = idle(&mut audit, operator, idle_window).await;
        println!(
            "{}: idle {per_minute:.1} requests/min ({writes} writes) over {}: {}",
            operator.name,
            seconds(idle_window),
            if requests.is_empty() {
                "none".to_owned()
            } else {
                requests.join(", ")
            }
        );
    }
    println!(
        "resident memory, empty cluster: {} {}, {} {}",
        cso.name,
        cso.rss_mib(),
        driver.name,
        driver.rss_mib()
    );

    let mut created = 0;
    for size in sizes {
        populate(&admin, created, size).await;
        created = size;
        // Let the watches deliver and the operators act on what they saw.
        tokio::time::sleep(Duration::from_secs(20)).await;
        println!(
            "resident memory with {size} PVs + {size} PVCs ({} Nodes and CSINodes, {} Pods): {} {}, {} {}",
            size / 40,
            size / 4,
            cso.name,
            cso.rss_mib(),
            driver.name,
            driver.rss_mib()
        );
    }

    // An outage: the API server stops for `outage`, then comes back; an operand of each
    // operator is deleted and the time until it is back is measured.
    let dir = PathBuf::from(std::env::var(CONTROL_PLANE_ENV).unwrap());
    restart_api_server(&dir, outage).await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), DRIVERS_NAMESPACE);
    for (operator, name) in [
        (&cso, "gcp-pd-csi-driver-operator"),
        (&driver, "gcp-pd-csi-driver-controller"),
    ] {
        let before = deployments.get(name).await.unwrap().metadata.uid;
        let deleted = Instant::now();
        deployments
            .delete(name, &DeleteParams::background())
            .await
            .unwrap();
        loop {
            if let Some(now) = deployments.get_opt(name).await.unwrap()
                && now.metadata.uid != before
            {
                break;
            }
            assert!(
                deleted.elapsed() < Duration::from_secs(300),
                "{} never recreated Deployment {name} after the outage",
                operator.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!(
            "{}: after a {} API server outage, Deployment {name} deleted -> recreated in {}",
            operator.name,
            seconds(outage),
            seconds(deleted.elapsed())
        );
    }
    cso.stop();
    driver.stop();

    volumes_first(&admin, &mut audit, idle_window).await;

    let guests = env_list("BENCH_HOSTED_GUESTS", &[10])[0];
    if guests > 0 {
        hosted(&admin, &mut audit, guests, idle_window).await;
    }
}

/// How many claims stay Pending on the GCP PD driver.
const STUCK_CLAIMS: usize = 12;

/// Creates `count` claims of the GCP PD driver's class `standard-csi` (which binds on first
/// consumer) with a node selected for their pod, in namespace `bench-stuck`: no provisioner
/// runs here, so they stay Pending on the driver.
async fn stuck_claims(admin: &Client, count: usize) {
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
    let namespace = "bench-stuck";
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if namespaces.get_opt(namespace).await.unwrap().is_none() {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
            )
            .await
            .unwrap();
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), namespace);
    for i in 0..count {
        claims
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": format!("stuck-{i:02}"),
                                 "annotations": {"volume.kubernetes.io/selected-node": "node-0"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard-csi",
                             "resources": {"requests": {"storage": "1Gi"}}},
                }))
                .unwrap(),
            )
            .await
            .unwrap();
    }
}

/// Waits until the operator on admin `port` is ready (`/readyz`: its caches synced).
async fn wait_ready(operator: &Operator, port: u16) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            let _ = stream
                .write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .await;
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            if answer.starts_with(b"HTTP/1.1 200") || answer.starts_with(b"HTTP/1.0 200") {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} was not ready in 3 minutes",
            operator.name
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `operator` has sent no request for `quiet`; its requests and writes since its
/// start until then, and the time of its last write (if it wrote).
async fn quiet_since_start(
    audit: &mut Audit,
    operator: &Operator,
    quiet: Duration,
) -> (usize, usize, Option<SystemTime>) {
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        audit.read();
        let mine: Vec<&Event> = audit
            .of(&operator.agent)
            .filter(|e| e.at >= operator.started)
            .collect();
        let last = mine.iter().map(|e| e.at).max();
        if last
            .is_some_and(|last| SystemTime::now().duration_since(last).unwrap_or_default() >= quiet)
        {
            let writes: Vec<&&Event> = mine.iter().filter(|e| e.is_write()).collect();
            return (mine.len(), writes.len(), writes.iter().map(|e| e.at).max());
        }
    }
}

/// Volumes first: both operators started anew on the cluster that holds the volumes (an
/// upgrade, a restart, a lease taken over), their start and resident memory at several
/// moments, with its peak; then the driver's report of the stuck claims.
async fn volumes_first(admin: &Client, audit: &mut Audit, idle_window: Duration) {
    use api::operator_v1::ClusterCSIDriver;
    let volumes = env_list("BENCH_VOLUMES", &[1000, 4000])
        .into_iter()
        .max()
        .unwrap_or_default();
    println!(
        "# volumes first: the operators started on the cluster holding {volumes} PVs + {volumes} PVCs, {STUCK_CLAIMS} of them stuck Pending on the driver"
    );
    let cso_kubeconfig = service_account_kubeconfig(
        admin,
        "openshift-cluster-storage-operator",
        "cluster-storage-operator",
    )
    .await;
    let driver_kubeconfig =
        service_account_kubeconfig(admin, DRIVERS_NAMESPACE, "gcp-pd-csi-driver-operator").await;
    audit.read();
    let (cso, cso_port) = Operator::start_serving(
        "cluster storage operator",
        "(cluster-storage-operator-lock)",
        &cso_kubeconfig,
        &[
            "run",
            "--operator-image",
            "localhost/storage-operator:bench",
        ],
    );
    let (driver, driver_port) = Operator::start_serving(
        "GCP PD driver operator",
        "(gcp-pd-csi-driver-operator-lock)",
        &driver_kubeconfig,
        &["driver", "gcp-pd"],
    );
    for (operator, port) in [(&cso, cso_port), (&driver, driver_port)] {
        wait_ready(operator, port).await;
        println!(
            "{}: caches synced (ready) {} after its start, resident memory then {}",
            operator.name,
            seconds(SystemTime::now().duration_since(operator.started).unwrap()),
            operator.rss_mib()
        );
    }
    let twenty = driver.started + Duration::from_secs(20);
    if let Ok(left) = twenty.duration_since(SystemTime::now()) {
        tokio::time::sleep(left).await;
    }
    println!(
        "resident memory 20 s after the start: {} {}, {} {}",
        cso.name,
        cso.rss_mib(),
        driver.name,
        driver.rss_mib()
    );
    for operator in [&cso, &driver] {
        let (requests, writes, last_write) =
            quiet_since_start(audit, operator, Duration::from_secs(5)).await;
        println!(
            "{}: from its start until quiet, {requests} requests ({writes} writes{})",
            operator.name,
            last_write.map_or(String::new(), |last| format!(
                ", the last {} after its start",
                seconds(last.duration_since(operator.started).unwrap_or_default())
            )),
        );
    }
    for operator in [&cso, &driver] {
        let (per_minute, writes, requests) = idle(audit, operator, idle_window).await;
        println!(
            "{}: idle {per_minute:.1} requests/min ({writes} writes) over {}: {}",
            operator.name,
            seconds(idle_window),
            requests.join(", ")
        );
    }
    println!(
        "resident memory after the idle window: {} {}, {} {}",
        cso.name,
        cso.rss_mib(),
        driver.name,
        driver.rss_mib()
    );
    let reported = Api::<ClusterCSIDriver>::all(admin.clone())
        .get("pd.csi.storage.gke.io")
        .await
        .unwrap()
        .status
        .and_then(|s| s.condition("GCPPDStuckClaims").cloned());
    println!(
        "GCPPDStuckClaims: {}",
        reported.map_or("not reported".to_owned(), |c| format!(
            "{} {}: {}",
            c.status,
            c.reason.unwrap_or_default(),
            c.message.unwrap_or_default()
        ))
    );
    cso.stop();
    driver.stop();
}

/// Guest control planes of the bench, stopped when dropped.
struct Guests {
    k8s: PathBuf,
    kubeconfigs: Vec<PathBuf>,
}

impl Drop for Guests {
    fn drop(&mut self) {
        for kubeconfig in &self.kubeconfigs {
            let _ = Command::new(self.k8s.join("stop.sh"))
                .arg("--clean")
                .arg(kubeconfig.parent().unwrap())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Hosted control planes (HyperShift): `guests` guest control planes (kube-apiserver and etcd
/// each, from `../shared/k8s`), all served from this bench's control plane as their management
/// cluster, each with its own control-plane namespace there, where its cluster storage
/// operator (`run --guest-kubeconfig`) and its AWS EBS driver operator (`driver aws-ebs
/// --guest-kubeconfig`) run as processes, leader-elected as in a cluster, as the identities of
/// their management-side install and, in the guest, those of `deploy/kubernetes/` and of the
/// starter. Printed: one hosted cluster's operators (start, idle requests to the management API
/// server, resident memory), then all of them together.
async fn hosted(admin: &Client, audit: &mut Audit, guests: usize, idle_window: Duration) {
    use e2e::install;
    println!(
        "# hosted control planes: {guests} guests, this control plane their management cluster"
    );
    let k8s = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/k8s");
    let mut planes = Guests {
        k8s: k8s.clone(),
        kubeconfigs: Vec::new(),
    };
    let management_path = PathBuf::from(std::env::var("E2E_KUBECONFIG").unwrap());
    install::hypershift_priority_class(admin).await;
    let mut operators: Vec<(Operator, Operator)> = Vec::new();
    for i in 0..guests {
        let started = Command::new(k8s.join("start.sh"))
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(started.status.success(), "start.sh failed for guest {i}");
        let guest_path = PathBuf::from(String::from_utf8(started.stdout).unwrap().trim());
        planes.kubeconfigs.push(guest_path.clone());
        let guest = Client::try_from(
            Config::from_custom_kubeconfig(
                Kubeconfig::read_from(&guest_path).unwrap(),
                &KubeConfigOptions::default(),
            )
            .await
            .unwrap(),
        )
        .unwrap();
        // The guest: a hosted cluster on AWS, with the operator's install of deploy/kubernetes.
        for crd in api::crds::all() {
            e2e::apply_crd(&guest, &crd).await;
        }
        e2e::ensure_infrastructure(
            &guest,
            json!({"infrastructureName": format!("bench-{i}"), "controlPlaneTopology": "External",
                   "platformStatus": {"type": "AWS", "aws": {"region": "us-east-1"}}}),
        )
        .await;
        install::storage_operator_manifests(&guest).await;
        // Its control-plane namespace, with the operator's management-side install.
        let namespace = format!("clusters-bench-{i}");
        install::ensure_namespace(admin, &namespace).await;
        install::hosted_storage_operator(admin, &namespace).await;
        let on_management = service_account_kubeconfig_of(
            admin,
            &management_path,
            &namespace,
            "cluster-storage-operator",
        )
        .await;
        let on_guest = service_account_kubeconfig_of(
            &guest,
            &guest_path,
            "openshift-cluster-storage-operator",
            "cluster-storage-operator",
        )
        .await;
        let user = format!("system:serviceaccount:{namespace}:cluster-storage-operator");
        let cso = Operator::start_with(
            "hosted cluster storage operator",
            &user,
            &on_management,
            &[
                "run",
                "--guest-kubeconfig",
                on_guest.to_str().unwrap(),
                "--operator-image",
                "localhost/storage-operator:bench",
            ],
            &[("POD_NAMESPACE", &namespace), ("POD_NAME", "bench")],
        );
        // The AWS EBS driver operator, once the storage operator made its identities.
        let driver_sa = "aws-ebs-csi-driver-operator";
        let deadline = Instant::now() + Duration::from_secs(120);
        for (client, namespace) in [(&guest, DRIVERS_NAMESPACE), (admin, namespace.as_str())] {
            let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
                Api::namespaced(client.clone(), namespace);
            while accounts.get_opt(driver_sa).await.unwrap().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "no driver operator ServiceAccount in {namespace} for guest {i}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let driver_on_management =
            service_account_kubeconfig_of(admin, &management_path, &namespace, driver_sa).await;
        let driver_on_guest =
            service_account_kubeconfig_of(&guest, &guest_path, DRIVERS_NAMESPACE, driver_sa).await;
        let driver_user = format!("system:serviceaccount:{namespace}:{driver_sa}");
        let driver = Operator::start_with(
            "hosted AWS EBS driver operator",
            &driver_user,
            &driver_on_management,
            &[
                "driver",
                "aws-ebs",
                "--guest-kubeconfig",
                driver_on_guest.to_str().unwrap(),
            ],
            &[("POD_NAMESPACE", &namespace), ("POD_NAME", "bench")],
        );
        if i == 0 {
            // One hosted cluster on its own.
            report_start(audit, &cso).await;
            report_start(audit, &driver).await;
            for operator in [&cso, &driver] {
                let (per_minute, writes, requests) = idle(audit, operator, idle_window).await;
                println!(
                    "{}: idle {per_minute:.1} requests/min to the management API server ({writes} writes) over {}: {}",
                    operator.name,
                    seconds(idle_window),
                    if requests.is_empty() {
                        "none".to_owned()
                    } else {
                        requests.join(", ")
                    }
                );
            }
            println!(
                "one hosted cluster, resident memory: {} {}, {} {}",
                cso.name,
                cso.rss_mib(),
                driver.name,
                driver.rss_mib()
            );
        }
        operators.push((cso, driver));
    }
    if guests > 1 {
        // All of them: settled, then idle together.
        for (cso, driver) in &operators {
            settle(audit, cso, Duration::from_secs(5)).await;
            settle(audit, driver, Duration::from_secs(5)).await;
        }
        audit.read();
        let from = SystemTime::now();
        tokio::time::sleep(idle_window).await;
        audit.read();
        let mut lease = 0;
        let mut other = 0;
        for (cso, driver) in &operators {
            for operator in [cso, driver] {
                for e in audit.of(&operator.agent).filter(|e| e.at >= from) {
                    if e.uri.contains("/leases/") {
                        lease += 1;
                    } else {
                        other += 1;
                    }
                }
            }
        }
        let minutes = idle_window.as_secs_f64() / 60.0;
        let rss: Vec<f64> = operators
            .iter()
            .flat_map(|(c, d)| [c.rss(), d.rss()])
            .collect();
        let total: f64 = rss.iter().sum();
        let max = rss.iter().copied().fold(0.0, f64::max);
        println!(
            "{guests} hosted clusters ({} processes): idle {:.1} requests/min to the management API server ({:.1} of them Lease renewals), resident memory {total:.1} MiB in all, {:.1} MiB per process on average, {max:.1} MiB at most",
            rss.len(),
            (lease + other) as f64 / minutes,
            lease as f64 / minutes,
            total / rss.len() as f64
        );
    }
    for (cso, driver) in operators {
        cso.stop();
        driver.stop();
    }
    drop(planes);
}

/// Creates volumes `from..to`: PersistentVolumes bound to claims (even ones in-tree GCE PD,
/// odd ones CSI), and Nodes, CSINodes and Pods in the stated ratios.
async fn populate(admin: &Client, from: usize, to: usize) {
    use k8s_openapi::api::core::v1::{
        Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    };
    use k8s_openapi::api::storage::v1::CSINode;
    let namespace = "bench-volumes";
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if namespaces.get_opt(namespace).await.unwrap().is_none() {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
            )
            .await
            .unwrap();
    }
    let pvs: Api<PersistentVolume> = Api::all(admin.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let nodes: Api<Node> = Api::all(admin.clone());
    let csinodes: Api<CSINode> = Api::all(admin.clone());
    let pp = PostParams::default();
    let mut tasks = Vec::new();
    for i in from..to {
        let (pvs, pvcs, pods, nodes, csinodes, pp) = (
            pvs.clone(),
            pvcs.clone(),
            pods.clone(),
            nodes.clone(),
            csinodes.clone(),
            pp.clone(),
        );
        tasks.push(async move {
            let source = if i % 2 == 0 {
                json!({"gcePersistentDisk": {"pdName": format!("disk-{i}"), "fsType": "ext4"}})
            } else {
                json!({"csi": {"driver": "pd.csi.storage.gke.io",
                               "volumeHandle": format!("projects/p/zones/us-central1-a/disks/disk-{i}")}})
            };
            let mut spec = json!({
                "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                "claimRef": {"namespace": "bench-volumes", "name": format!("claim-{i}")},
            });
            spec.as_object_mut()
                .unwrap()
                .extend(source.as_object().unwrap().clone());
            pvs.create(
                &pp,
                &serde_json::from_value(json!({
                    "metadata": {"name": format!("pv-{i}"),
                                 "labels": {"topology.kubernetes.io/zone": "us-central1-a"}},
                    "spec": spec,
                }))
                .unwrap(),
            )
            .await
            .unwrap();
            pvcs.create(
                &pp,
                &serde_json::from_value(json!({
                    "metadata": {"name": format!("claim-{i}")},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                             "volumeName": format!("pv-{i}"),
                             "resources": {"requests": {"storage": "10Gi"}}},
                }))
                .unwrap(),
            )
            .await
            .unwrap();
            if i % 40 == 0 {
                let node = format!("node-{}", i / 40);
                nodes
                    .create(
                        &pp,
                        &serde_json::from_value(json!({"metadata": {"name": node,
                            "labels": {"topology.kubernetes.io/zone": "us-central1-a"}}}))
                        .unwrap(),
                    )
                    .await
                    .unwrap();
                csinodes
                    .create(
                        &pp,
                        &serde_json::from_value(json!({"metadata": {"name": node,
                            "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/gce-pd"}},
                            "spec": {"drivers": [{"name": "pd.csi.storage.gke.io", "nodeID": node,
                                                  "topologyKeys": ["topology.gke.io/zone"]}]}}))
                        .unwrap(),
                    )
                    .await
                    .unwrap();
            }
            if i % 4 == 0 {
                let volumes: Vec<Value> = (i..i + 4)
                    .map(|c| json!({"name": format!("v{c}"), "persistentVolumeClaim": {"claimName": format!("claim-{c}")}}))
                    .collect();
                pods.create(
                    &pp,
                    &serde_json::from_value(json!({
                        "metadata": {"name": format!("app-{i}")},
                        "spec": {"containers": [{"name": "app", "image": "localhost/busybox:dev"}],
                                 "volumes": volumes},
                    }))
                    .unwrap(),
                )
                .await
                .unwrap();
            }
        });
    }
    // Sixteen volumes at a time.
    use futures::StreamExt as _;
    futures::stream::iter(tasks)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// Stops kube-apiserver, waits `outage`, starts it again with the same arguments and waits
/// until it is ready.
async fn restart_api_server(dir: &Path, outage: Duration) {
    let pid_file = dir.join("pids/kube-apiserver.pid");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Command::new("kill").arg(&pid).status().unwrap();
    while Path::new(&format!("/proc/{pid}")).exists() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let down = Instant::now();
    tokio::time::sleep(outage).await;
    let log = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("logs/kube-apiserver.log"))
        .unwrap();
    // Stopped by stop.sh, as the first one was (its pid file is rewritten below); the bench
    // process ends before it, so it is never waited for here.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0)
        .spawn()
        .unwrap();
    std::fs::write(&pid_file, child.id().to_string()).unwrap();
    let admin = Client::try_from(admin_config().await).unwrap();
    loop {
        if admin
            .request_text(http::Request::get("/readyz").body(vec![]).unwrap())
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "kube-apiserver down for {} (back and ready after {})",
        seconds(outage),
        seconds(down.elapsed())
    );
}
