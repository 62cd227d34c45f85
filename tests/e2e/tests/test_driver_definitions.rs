//! The test driver definitions of `test/e2e/<driver>/manifest.yaml`, checked by the storage
//! e2e suite that runs them (`e2e.test` v1.36.2, started through `../shared/k8s/e2e.sh`) and
//! against what each driver operator renders. None of these drivers can run here (cloud
//! drivers, no registry); this makes sure that running one on its cloud needs nothing but the
//! cluster's kubeconfig.
//!
//! For every directory of `test/e2e/` with a `manifest.yaml` (but `hostpath`, which is no
//! catalogue driver), the test runs
//! `e2e.sh --driver <manifest> -- --ginkgo.dry-run --ginkgo.v`, which loads the definition and
//! lists the specs that `e2e.sh --driver <manifest>` would run (its default skip) without
//! running any, in about two seconds. Then it checks:
//!
//! 1. **The definition loads, and every key means something.** `e2e.test` loads it while
//!    parsing its flags: a value of the wrong type (`persistence: maybe`) or a missing
//!    `DriverInfo.Name` makes it exit 2 naming the file, and the test repeats that message. Its
//!    decoder is not strict though: a key it does not know (a misspelling, a wrong case,
//!    `ShortName`) is dropped without a word, and of a key given twice the last wins. So the
//!    test compares the file's keys with the fields of the definition `e2e.test` logs as it loads
//!    it (`Driver loaded from path [...]: &{DriverInfo:{Name:... } StorageClass:{...} ...}`):
//!    that dump shows every field of every struct it filled, so a key of the file that is not a
//!    field there was ignored. Keys under maps (`Capabilities`, `SupportedFsType`, `Timeouts`,
//!    ...) are free, capabilities are checked next.
//! 2. **Every capability is one the suite knows.** `e2e.test` accepts any name under
//!    `DriverInfo.Capabilities` (`snapshotDatasource: true` loads fine and enables nothing).
//!    The names it knows are the `Capability` constants of upstream
//!    `test/e2e/storage/framework/testdriver.go` ([`KNOWN_CAPABILITIES`], read at
//!    kubernetes/kubernetes commit 7e4f25cb86bc, the newest copy we could read; v1.36.2's own
//!    file was not at hand), kept only if the `e2e.test` binary itself contains the name
//!    (`offlineSnapshotClone`, in that list, is not in v1.36.2's binary: that version never
//!    reads it). The test also checks that the capabilities `e2e.test` logged are those of the
//!    file (it adds `onlineExpansion`/`offlineExpansion` when `controllerExpansion` is true and
//!    they are unset), and that a driver claiming `snapshotDataSource` names a snapshot class
//!    (without one, every snapshot spec skips itself).
//! 3. **The classes are the driver's.** `DriverInfo.Name` is the driver's CSI name;
//!    `StorageClass.FromExistingClassName` is a StorageClass its operator creates and
//!    `SnapshotClass.FromExistingClassName` a VolumeSnapshotClass it creates, as
//!    `storage-operator render --driver <dir>` renders them (the same calls, in process).
//!    StorageClasses do not depend on the topology: the name must be rendered for each one.
//!    VolumeSnapshotClasses are rendered only where their CRD exists, which the OpenShift
//!    topologies assume and plain Kubernetes does not (there the operator creates them once the
//!    snapshot CRDs are installed), so the snapshot class is looked up in the OpenShift render.
//!    A `FromFile` class must be a path relative to the repository's root (where `e2e.sh` is run
//!    with `-- --repo-root "$PWD"`: `e2e.test` finds no test file without `--repo-root`), hold
//!    one StorageClass (or VolumeSnapshotClass) and name the driver.
//!
//! What the dry run shows, and what it cannot: specs are defined at start-up for every test
//! pattern whatever the definition claims (328 for aws-ebs without the default skip, snapshot
//! specs included for drivers with no snapshot class), and a spec that needs a capability the
//! definition lacks is skipped only when it runs (`e2eskipper.Skipf` in its setup). Only the
//! `block` capability changes the list (the volumeMode suite defines two more specs for drivers
//! without it). So the list proves that the definition loaded under its driver's name; that its
//! capabilities were read as written comes from the logged definition. The dry run contacts no
//! API server (it runs no suite setup), but `e2e.sh` wants `KUBECONFIG`, so the test needs
//! `E2E_KUBECONFIG` like the others.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use csi_kit::{Inputs, Topology};
use serde_json::Value;

/// Directories of `test/e2e/` that are not catalogue drivers.
const NOT_CATALOGUE: &[&str] = &["hostpath"];

/// Where the capability names come from, for the messages.
const CAPABILITIES_SOURCE: &str = "the Capability constants of kubernetes/kubernetes \
    test/e2e/storage/framework/testdriver.go at commit 7e4f25cb86bc";

/// The `Capability` constants of upstream `test/e2e/storage/framework/testdriver.go` (see
/// [`CAPABILITIES_SOURCE`]). A name counts as known only if the `e2e.test` binary contains it
/// too. A capability newer than that commit (v1.36.2's group snapshot suites read one) is
/// added here once read in v1.36.2's testdriver.go.
const KNOWN_CAPABILITIES: &[&str] = &[
    "persistence",
    "block",
    "fsGroup",
    "volumeMountGroup",
    "exec",
    "snapshotDataSource",
    "pvcDataSource",
    "offlineSnapshotClone",
    "multipods",
    "RWX",
    "controllerExpansion",
    "nodeExpansion",
    "offlineExpansion",
    "onlineExpansion",
    "volumeLimits",
    "singleNodeVolume",
    "topology",
    "capacity",
    "FSResizeFromSourceNotSupported",
    "readWriteOncePod",
    "multiplePVsSameID",
    "capReadOnlyMany",
];

/// The capabilities `e2e.test` sets itself when `controllerExpansion` is true and they are not
/// in the file.
const EXPANSION_DEFAULTS: &[&str] = &["onlineExpansion", "offlineExpansion"];

/// The `e2e.test` binary `e2e.sh` runs: it unpacks it into `$K8S_BIN` (default
/// `~/.cache/k8s-v1.36.2`) on its first run.
fn e2e_test_binary() -> PathBuf {
    let dir = std::env::var_os("K8S_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/k8s-v1.36.2")
        });
    dir.join("e2e.test")
}

/// Whether `binary` contains `name` as bytes (`grep -F`: one pass over 110 MB takes a tenth of
/// a second, a naive search in a debug build would take seconds per name).
fn binary_contains(binary: &Path, name: &str) -> bool {
    let status = Command::new("grep")
        .args(["-q", "-a", "-F", "-e", name])
        .arg(binary)
        .status()
        .unwrap_or_else(|e| panic!("running grep on {}: {e}", binary.display()));
    match status.code() {
        Some(0) => true,
        Some(1) => false,
        _ => panic!("grep could not read {}: {status}", binary.display()),
    }
}

/// A value as Go's `%+v` prints it, as far as the key check needs.
#[derive(Debug)]
enum Dumped {
    /// `{Field:value ...}` or `&{...}`: the fields in order.
    Struct(Vec<(String, Dumped)>),
    /// `map[...]`: the text between the brackets.
    Map(String),
    /// `[a b ...]`.
    List(Vec<Dumped>),
    /// `<nil>` or a scalar.
    Leaf,
}

impl Dumped {
    fn field(&self, name: &str) -> Option<&Dumped> {
        match self {
            Dumped::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    fn field_names(&self) -> Vec<&str> {
        match self {
            Dumped::Struct(fields) => fields.iter().map(|(n, _)| n.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    /// The entries of a map of scalars (`map[a:true b:false]`), split at each entry's last
    /// colon.
    fn map_entries(&self) -> Option<BTreeMap<String, String>> {
        let Dumped::Map(inner) = self else {
            return None;
        };
        Some(
            inner
                .split(' ')
                .filter(|entry| !entry.is_empty())
                .filter_map(|entry| entry.rsplit_once(':'))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        )
    }
}

/// Parses Go's `%+v` of the loaded definition. Scalars must not contain spaces or brackets
/// (none of the definitions' values do); anything else is an error saying where.
struct GoDump<'a> {
    text: &'a [u8],
    at: usize,
}

impl GoDump<'_> {
    fn parse(text: &str) -> Result<Dumped, String> {
        let mut parser = GoDump {
            text: text.as_bytes(),
            at: 0,
        };
        let value = parser.value()?;
        if parser.at != parser.text.len() {
            return Err(parser.error("text after the definition"));
        }
        Ok(value)
    }

    fn error(&self, what: &str) -> String {
        let from = self.at.saturating_sub(40);
        let to = (self.at + 40).min(self.text.len());
        format!(
            "{what} at byte {} (…{}…)",
            self.at,
            String::from_utf8_lossy(&self.text[from..to])
        )
    }

    fn rest(&self) -> &[u8] {
        &self.text[self.at..]
    }

    fn value(&mut self) -> Result<Dumped, String> {
        let rest = self.rest();
        if rest.starts_with(b"&{") {
            self.at += 1;
            self.structure()
        } else if rest.starts_with(b"{") {
            self.structure()
        } else if rest.starts_with(b"map[") {
            self.at += 4;
            let start = self.at;
            let mut depth = 1;
            while depth > 0 {
                match self.text.get(self.at) {
                    Some(b'[' | b'{') => depth += 1,
                    Some(b']' | b'}') => depth -= 1,
                    Some(_) => {}
                    None => return Err(self.error("unclosed map")),
                }
                self.at += 1;
            }
            let inner = String::from_utf8_lossy(&self.text[start..self.at - 1]).into_owned();
            Ok(Dumped::Map(inner))
        } else if rest.starts_with(b"[") {
            self.at += 1;
            let mut items = Vec::new();
            loop {
                match self.text.get(self.at) {
                    Some(b']') => {
                        self.at += 1;
                        return Ok(Dumped::List(items));
                    }
                    Some(b' ') if !items.is_empty() => self.at += 1,
                    Some(_) if items.is_empty() => {}
                    _ => return Err(self.error("expected ' ' or ']' in a list")),
                }
                items.push(self.value()?);
            }
        } else {
            while let Some(&c) = self.text.get(self.at) {
                if matches!(c, b' ' | b'}' | b']' | b'{' | b'[') {
                    break;
                }
                self.at += 1;
            }
            Ok(Dumped::Leaf)
        }
    }

    fn structure(&mut self) -> Result<Dumped, String> {
        self.at += 1; // '{'
        let mut fields = Vec::new();
        loop {
            match self.text.get(self.at) {
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Dumped::Struct(fields));
                }
                Some(b' ') if !fields.is_empty() => self.at += 1,
                Some(_) if fields.is_empty() => {}
                _ => return Err(self.error("expected ' ' or '}' in a struct")),
            }
            let start = self.at;
            while let Some(&c) = self.text.get(self.at) {
                if !(c.is_ascii_alphanumeric() || c == b'_') {
                    break;
                }
                self.at += 1;
            }
            if self.at == start || self.text.get(self.at) != Some(&b':') {
                return Err(self.error("expected a field name and ':'"));
            }
            let name = String::from_utf8_lossy(&self.text[start..self.at]).into_owned();
            self.at += 1;
            fields.push((name, self.value()?));
        }
    }
}

/// What one dry run of `e2e.sh` said.
struct DryRun {
    /// The definition as `e2e.test` logged it after loading.
    loaded: Dumped,
    /// The names of the specs it listed for the driver.
    specs: Vec<String>,
}

/// Runs `e2e.sh --driver <manifest> -- --ginkgo.dry-run --ginkgo.v`; an error is the message
/// for the test's failure.
fn dry_run(
    kubeconfig: &str,
    reports: &Path,
    manifest: &Path,
    driver_name: &str,
) -> Result<DryRun, String> {
    let output = e2e::suite::run(
        Path::new(kubeconfig),
        reports,
        manifest,
        None,
        None,
        &["--ginkgo.dry-run", "--ginkgo.v"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let all = format!("{stdout}\n{stderr}");
    if !output.status.success() {
        // A definition e2e.test refuses fails the flag: "invalid value FILE for flag
        // -storage.testdriver: WHY".
        let refusal = all
            .lines()
            .find(|l| l.contains("for flag -storage.testdriver"))
            .map(str::trim);
        return Err(match refusal {
            Some(line) => format!(
                "e2e.test refused to load it ({}): {line}\n  fix: correct the field it names (see test/e2e/storage/external/README.md upstream for the format)",
                output.status
            ),
            None => format!(
                "e2e.sh failed ({}); its output ends with:\n{}",
                output.status,
                tail(&all, 30)
            ),
        });
    }
    const LOADED: &str = "Driver loaded from path [";
    let line = all
        .lines()
        .find(|l| l.contains(LOADED))
        .ok_or_else(|| format!("e2e.test did not log the loaded definition ({LOADED}...)"))?;
    let dump = line
        .split_once("]: ")
        .map(|(_, d)| d.trim())
        .ok_or_else(|| format!("unexpected log line: {line}"))?;
    let loaded = GoDump::parse(dump)
        .map_err(|e| format!("could not read the definition e2e.test logged: {e}"))?;
    let prefix = format!("External Storage [Driver: {driver_name}]");
    let specs = stdout
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_owned)
        .collect();
    Ok(DryRun { loaded, specs })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The keys of `file` that are no field of what `e2e.test` loaded: it ignored them.
fn unknown_keys(file: &Value, loaded: &Dumped, path: &str, problems: &mut Vec<String>) {
    match (file, loaded) {
        (Value::Object(entries), Dumped::Struct(_)) => {
            for (key, value) in entries {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match loaded.field(key) {
                    Some(field) => unknown_keys(value, field, &here, problems),
                    None => {
                        let known = loaded.field_names();
                        let hint = known
                            .iter()
                            .find(|k| k.eq_ignore_ascii_case(key))
                            .map(|k| format!(" (keys are case-sensitive: did you mean {k}?)"))
                            .unwrap_or_default();
                        problems.push(format!(
                            "{here}: e2e.test does not know this key and ignores it without a word{hint}; \
                             the keys it reads here are {}\n  fix: remove {here} or correct its name",
                            known.join(", ")
                        ));
                    }
                }
            }
        }
        (Value::Array(items), Dumped::List(dumped)) => {
            for (i, (item, d)) in items.iter().zip(dumped).enumerate() {
                unknown_keys(item, d, &format!("{path}[{i}]"), problems);
            }
        }
        // Maps (free keys), scalars and nil.
        _ => {}
    }
}

/// The closest known capability to a misspelt one, compared without case, else one that
/// contains it or is contained in it.
fn closest_capability<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    known
        .iter()
        .find(|k| k.eq_ignore_ascii_case(name))
        .or_else(|| {
            known.iter().find(|k| {
                let k = k.to_ascii_lowercase();
                k.contains(&lower) || lower.contains(&k)
            })
        })
        .copied()
}

/// The StorageClass and VolumeSnapshotClass names the driver's operator renders, per topology.
struct Rendered {
    csi_name: String,
    storage_classes: Vec<(Topology, BTreeSet<String>)>,
    snapshot_classes: Vec<(Topology, BTreeSet<String>)>,
}

fn render(dir: &str) -> Result<Rendered, String> {
    let def = drivers::by_name(dir).map_err(|e| {
        format!(
            "the directory names no catalogue driver: {e}\n  fix: name the directory after the driver's short name"
        )
    })?;
    let env = BTreeMap::new();
    let mut storage_classes = Vec::new();
    let mut snapshot_classes = Vec::new();
    for topology in Topology::ALL {
        let objects = csi_kit::render(&def, &Inputs::offline(&def, topology, &env));
        let names = |kind: &str| -> BTreeSet<String> {
            objects
                .iter()
                .filter(|o| o["kind"] == kind)
                .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        };
        storage_classes.push((topology, names("StorageClass")));
        snapshot_classes.push((topology, names("VolumeSnapshotClass")));
    }
    Ok(Rendered {
        csi_name: def.name.clone(),
        storage_classes,
        snapshot_classes,
    })
}

fn list(names: &BTreeSet<String>) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Checks a class named by `FromExistingClassName`: rendered in every topology that must have
/// it.
fn check_existing_class(
    dir: &str,
    field: &str,
    kind: &str,
    name: &str,
    rendered: &[(Topology, BTreeSet<String>)],
    needed_in: impl Fn(Topology) -> bool,
    problems: &mut Vec<String>,
) {
    for (topology, names) in rendered {
        if needed_in(*topology) && !names.contains(name) {
            problems.push(format!(
                "{field}: {name} is not a {kind} the {dir} driver operator creates \
                 (`storage-operator render --driver {dir} --topology {topology}` creates {})\n  \
                 fix: name one of those, or give a class of your own with {}.FromFile",
                list(names),
                field.split('.').next().unwrap_or(field)
            ));
            return;
        }
    }
}

/// Checks a class given by `FromFile`: a repository-relative path to one object of `kind`
/// naming the driver in `driver_field`.
fn check_class_file(
    root: &Path,
    field: &str,
    file: &str,
    kind: &str,
    driver_field: &str,
    csi_name: &str,
    problems: &mut Vec<String>,
) {
    if Path::new(file).is_absolute() {
        problems.push(format!(
            "{field}: {file} is absolute: it holds only on this machine\n  fix: give it relative to the repository's root (e2e.sh runs with -- --repo-root \"$PWD\" there)"
        ));
        return;
    }
    let path = root.join(file);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            problems.push(format!(
                "{field}: {file} cannot be read from the repository's root ({e})\n  fix: give the class file's path relative to the repository's root"
            ));
            return;
        }
    };
    let documents: Vec<Value> = match api::yaml::from_multiple(&text) {
        Ok(docs) => docs.into_iter().filter(|d| !d.is_null()).collect(),
        Err(e) => {
            problems.push(format!("{field}: {file} is not YAML: {e}"));
            return;
        }
    };
    match documents.as_slice() {
        [class] if class["kind"] == kind => {
            if class[driver_field] != csi_name {
                problems.push(format!(
                    "{field}: {file} has {driver_field} {}, not the driver's CSI name {csi_name}\n  fix: set {driver_field}: {csi_name} there",
                    class[driver_field]
                ));
            }
        }
        _ => problems.push(format!(
            "{field}: {file} must hold exactly one {kind} (e2e.test loads one object from it)\n  fix: keep one {kind} in it"
        )),
    }
}

/// Every check of one definition; each problem names the field and the fix.
fn check_definition(
    root: &Path,
    dir: &str,
    file: &Value,
    run: &DryRun,
    binary: &Path,
    capability_in_binary: &mut BTreeMap<String, bool>,
) -> Vec<String> {
    let mut problems = Vec::new();

    // 1. Every key is one e2e.test reads.
    unknown_keys(file, &run.loaded, "", &mut problems);
    if run.specs.is_empty() {
        problems.push(format!(
            "e2e.test listed no spec for driver {} in its dry run\n  fix: check DriverInfo.Name and that e2e.sh's default selection leaves specs",
            file["DriverInfo"]["Name"]
        ));
    }

    // 2. Capabilities.
    let loaded_caps = run
        .loaded
        .field("DriverInfo")
        .and_then(|d| d.field("Capabilities"))
        .and_then(Dumped::map_entries)
        .unwrap_or_default();
    let empty = serde_json::Map::new();
    let file_caps = file["DriverInfo"]["Capabilities"]
        .as_object()
        .unwrap_or(&empty);
    for (name, value) in file_caps {
        let field = format!("DriverInfo.Capabilities.{name}");
        let listed = KNOWN_CAPABILITIES.contains(&name.as_str());
        let in_binary = listed
            && *capability_in_binary
                .entry(name.clone())
                .or_insert_with(|| binary_contains(binary, name));
        if !listed {
            let hint = closest_capability(name, KNOWN_CAPABILITIES)
                .map(|k| format!(" Did you mean {k}?"))
                .unwrap_or_default();
            problems.push(format!(
                "{field}: not a capability the storage suite knows: e2e.test accepts any name here and never reads this one, \
                 so the specs it was meant to enable skip themselves.{hint} The known names are {CAPABILITIES_SOURCE}: {}\n  \
                 fix: use one of them or remove {name} (if v1.36.2's testdriver.go has it, add it to KNOWN_CAPABILITIES in this test)",
                KNOWN_CAPABILITIES.join(", ")
            ));
        } else if !in_binary {
            problems.push(format!(
                "{field}: {name} is one of {CAPABILITIES_SOURCE}, but e2e.test v1.36.2 ({}) contains no such name: that version never reads it\n  \
                 fix: remove {name}",
                binary.display()
            ));
        }
        let written = value.as_bool().map(|b| b.to_string());
        let read = loaded_caps.get(name);
        if written.is_none() || read != written.as_ref() {
            problems.push(format!(
                "{field}: the file says {value}, e2e.test read {}\n  fix: write true or false",
                read.map_or("nothing", String::as_str)
            ));
        }
    }
    for (name, value) in &loaded_caps {
        if !file_caps.contains_key(name) && !EXPANSION_DEFAULTS.contains(&name.as_str()) {
            problems.push(format!(
                "DriverInfo.Capabilities: e2e.test read {name}: {value}, which the file does not say (is a key misplaced?)"
            ));
        }
    }
    let source = |section: &str| {
        ["FromName", "FromFile", "FromExistingClassName"]
            .iter()
            .any(|k| match &file[section][k] {
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                _ => false,
            })
    };
    if file_caps.get("snapshotDataSource") == Some(&Value::Bool(true)) && !source("SnapshotClass") {
        problems.push(
            "DriverInfo.Capabilities.snapshotDataSource is true but no SnapshotClass is given: \
             every snapshot spec skips itself (\"does not support snapshotting\")\n  \
             fix: name the driver's VolumeSnapshotClass in SnapshotClass.FromExistingClassName, or set snapshotDataSource: false"
                .to_owned(),
        );
    }

    // 3. The driver's name and classes.
    let rendered = match render(dir) {
        Ok(rendered) => rendered,
        Err(e) => {
            problems.push(e);
            return problems;
        }
    };
    let name = file["DriverInfo"]["Name"].as_str().unwrap_or_default();
    if name != rendered.csi_name {
        problems.push(format!(
            "DriverInfo.Name: {name} is not the {dir} driver's CSI name {} (its CSIDriver, the provisioner of its classes)\n  \
             fix: set DriverInfo.Name: {}",
            rendered.csi_name, rendered.csi_name
        ));
    }
    if let Some(class) = file["StorageClass"]["FromExistingClassName"].as_str() {
        check_existing_class(
            dir,
            "StorageClass.FromExistingClassName",
            "StorageClass",
            class,
            &rendered.storage_classes,
            |_| true,
            &mut problems,
        );
    }
    if let Some(class) = file["SnapshotClass"]["FromExistingClassName"].as_str() {
        check_existing_class(
            dir,
            "SnapshotClass.FromExistingClassName",
            "VolumeSnapshotClass",
            class,
            &rendered.snapshot_classes,
            Topology::is_openshift,
            &mut problems,
        );
    }
    if let Some(path) = file["StorageClass"]["FromFile"].as_str() {
        check_class_file(
            root,
            "StorageClass.FromFile",
            path,
            "StorageClass",
            "provisioner",
            &rendered.csi_name,
            &mut problems,
        );
    }
    if let Some(path) = file["SnapshotClass"]["FromFile"].as_str() {
        check_class_file(
            root,
            "SnapshotClass.FromFile",
            path,
            "VolumeSnapshotClass",
            "driver",
            &rendered.csi_name,
            &mut problems,
        );
    }
    problems
}

#[test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
fn every_driver_definition_loads_in_the_storage_suite_and_names_the_drivers_classes() {
    let kubeconfig = std::env::var(e2e::KUBECONFIG_ENV).unwrap_or_else(|_| {
        panic!(
            "set {} to a kubeconfig (e2e.sh wants one; the dry run does not contact it)",
            e2e::KUBECONFIG_ENV
        )
    });
    let root = e2e::suite::repo_root();
    let reports = std::env::temp_dir().join(format!("e2e-definitions-{}", std::process::id()));
    std::fs::create_dir_all(&reports).unwrap();

    let mut dirs: Vec<String> = std::fs::read_dir(root.join("test/e2e"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("manifest.yaml").is_file())
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|dir| !NOT_CATALOGUE.contains(&dir.as_str()))
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no test/e2e/<driver>/manifest.yaml found");

    let binary = e2e_test_binary();
    let mut capability_in_binary = BTreeMap::new();
    let mut failures = String::new();
    for dir in &dirs {
        let started = Instant::now();
        let relative = format!("test/e2e/{dir}/manifest.yaml");
        let manifest = root.join(&relative);
        let text = std::fs::read_to_string(&manifest).unwrap();
        let file: Value = match api::yaml::from_str(&text) {
            Ok(value) => value,
            Err(e) => {
                let _ = writeln!(failures, "{relative}: not YAML: {e}");
                continue;
            }
        };
        let driver_name = file["DriverInfo"]["Name"].as_str().unwrap_or_default();
        let problems = match dry_run(&kubeconfig, &reports, &manifest, driver_name) {
            Ok(run) => {
                eprintln!(
                    "{relative}: loaded by e2e.test, {} specs listed for {driver_name} ({:.1}s)",
                    run.specs.len(),
                    started.elapsed().as_secs_f64()
                );
                check_definition(&root, dir, &file, &run, &binary, &mut capability_in_binary)
            }
            Err(e) => vec![e],
        };
        for problem in problems {
            let _ = writeln!(failures, "{relative}: {problem}");
        }
    }
    let _ = std::fs::remove_dir_all(&reports);
    assert!(
        failures.is_empty(),
        "test driver definitions that e2e.test would not run as meant:\n{failures}"
    );
}
