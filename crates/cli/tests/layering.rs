//! The workspace's layering, checked rather than described (ARCHITECTURE.md says why):
//! - No file-level import circles inside a crate: if `plan.rs` uses `observe.rs`, nothing
//!   `observe.rs` uses (directly or through other files) uses `plan.rs`. Each crate's files have
//!   an order, types and constants at the bottom and the controller at the top.
//! - The pure crates have no API client, runtime or I/O crate among their dependencies, and
//!   depend only on other pure crates of ours, so purity is the compiler's to check.
//!
//! A file's dependencies are the modules its non-test code names: `crate::a::b`, `super::a`,
//! `self::a`, brace groups (`use crate::{a, b}`), and child modules named directly (`observe::x`
//! in the file that declares `mod observe`). A path ends at the deepest module it names, so
//! `crate::def::DriverDef` is a use of `def.rs` and `super::Settings` of the parent's file.
//! Code under `#[cfg(test)]` is left out: tests may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crates with no I/O: what they may not depend on, and the only crates of ours they may.
const PURE: [&str; 4] = ["api", "csi-kit", "csi-migration", "diagnose"];
const NOT_IN_PURE: [&str; 12] = [
    "kube",
    "kube-client",
    "kube-runtime",
    "kube-lease-manager",
    "tokio",
    "futures",
    "hyper",
    "hyper-util",
    "hyper-rustls",
    "http-body-util",
    "reqwest",
    "tracing",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(workspace().join("crates"))
        .expect("crates/ is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.push(workspace().join("tests/e2e"));
    dirs.sort();
    dirs
}

/// A module path, e.g. `["operator", "plan"]`; the crate root is empty.
type ModPath = Vec<String>;

struct Crate {
    name: String,
    /// Module path -> its file (relative to the crate), production modules only.
    modules: BTreeMap<ModPath, PathBuf>,
}

fn read_crate(dir: &Path) -> Option<Crate> {
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml is readable");
    let name = manifest
        .lines()
        .find_map(|line| line.strip_prefix("name = "))
        .map(|quoted| quoted.trim_matches('"').to_owned())
        .expect("the package has a name");
    let src = dir.join("src");
    let root = ["lib.rs", "main.rs"]
        .into_iter()
        .map(|file| src.join(file))
        .find(|path| path.is_file())?;
    let mut modules = BTreeMap::new();
    collect_modules(&src, &root, Vec::new(), &mut modules);
    Some(Crate { name, modules })
}

/// Follows `mod x;` declarations (not under `#[cfg(test)]`) from `file`.
fn collect_modules(
    src: &Path,
    file: &Path,
    path: ModPath,
    modules: &mut BTreeMap<ModPath, PathBuf>,
) {
    let text = fs::read_to_string(file).expect("a source file is readable");
    let dir = if path.is_empty() || file.ends_with("mod.rs") {
        file.parent().expect("a file has a directory").to_path_buf()
    } else {
        file.with_extension("")
    };
    modules.insert(
        path.clone(),
        file.strip_prefix(src).unwrap_or(file).to_path_buf(),
    );
    for child in declared_modules(&production_code(&text)) {
        let flat = dir.join(format!("{child}.rs"));
        let nested = dir.join(&child).join("mod.rs");
        let child_file = if flat.is_file() { flat } else { nested };
        if child_file.is_file() {
            let mut child_path = path.clone();
            child_path.push(child);
            collect_modules(src, &child_file, child_path, modules);
        }
    }
}

/// The `mod x;` lines of a file (inline modules are part of the file).
fn declared_modules(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
            line.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(|name| name.trim().to_owned())
        })
        .collect()
}

/// The file without comments and without the items under `#[cfg(test)]`.
fn production_code(text: &str) -> String {
    let mut code = String::new();
    let mut skipping = false;
    let mut depth = 0i64;
    let mut opened = false;
    for line in text.lines() {
        let line = strip_comment(line);
        let trimmed = line.trim();
        if !skipping && trimmed == "#[cfg(test)]" {
            skipping = true;
            depth = 0;
            opened = false;
            continue;
        }
        if skipping {
            for c in line.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let item_ended = if opened {
                depth <= 0
            } else {
                trimmed.ends_with(';') && !trimmed.starts_with("#[")
            };
            if item_ended {
                skipping = false;
            }
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The line up to a `//` comment that is not inside a string.
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            '/' if !in_string && previous == '/' => return &line[..i - 1],
            _ => {}
        }
        previous = if previous == '\\' && c == '\\' {
            ' '
        } else {
            c
        };
    }
    line
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path the code names that starts with one of `starts` (`crate`, `super`, `self`, or a
/// child module), as its segments; a brace group gives one path per member.
fn paths(code: &str, starts: &BTreeSet<String>) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if is_ident(chars[i]) && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if starts.contains(&word)
                && chars.get(i) == Some(&':')
                && chars.get(i + 1) == Some(&':')
            {
                let (tails, end) = path_tail(&chars, i);
                for tail in tails {
                    let mut path = vec![word.clone()];
                    path.extend(tail);
                    found.push(path);
                }
                i = end;
            }
        } else {
            i += 1;
        }
    }
    found
}

/// The segments after `::` at `i` (several when a brace group follows), and where they end.
fn path_tail(chars: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    while chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
        i += 2;
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i) == Some(&'{') {
            let mut depth = 0;
            let start = i + 1;
            let mut members = Vec::new();
            let mut member_start = start;
            while i < chars.len() {
                match chars[i] {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            members.push(chars[member_start..i].iter().collect::<String>());
                            break;
                        }
                    }
                    ',' if depth == 1 => {
                        members.push(chars[member_start..i].iter().collect::<String>());
                        member_start = i + 1;
                    }
                    _ => {}
                }
                i += 1;
            }
            let tails = members
                .iter()
                .map(|member| member.trim())
                .filter(|member| !member.is_empty())
                .map(|member| {
                    let member: Vec<char> = member.chars().collect();
                    let end = member.iter().take_while(|c| is_ident(**c)).count();
                    let first: String = member[..end].iter().collect();
                    let (rest, _) = path_tail(&member, end);
                    let rest = rest.into_iter().next().unwrap_or_default();
                    let mut tail = segments.clone();
                    tail.push(first);
                    tail.extend(rest);
                    tail
                })
                .collect();
            return (tails, i + 1);
        }
        let start = i;
        while chars.get(i).is_some_and(|c| is_ident(*c)) {
            i += 1;
        }
        if start == i {
            break;
        }
        segments.push(chars[start..i].iter().collect());
    }
    (vec![segments], i)
}

/// The deepest module of `krate` that `path`, named in module `current`, refers to.
fn resolve(krate: &Crate, current: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut base: ModPath = current.clone();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => {}
    }
    for segment in rest {
        let mut deeper = base.clone();
        deeper.push(segment.clone());
        if krate.modules.contains_key(&deeper) {
            base = deeper;
        } else {
            break;
        }
    }
    Some(base)
}

/// The code without its `pub use` statements (which may span lines): re-exports make a facade,
/// not a dependency.
fn without_re_exports(code: &str) -> String {
    let mut kept = String::new();
    let mut in_re_export = false;
    for line in code.lines() {
        let trimmed = line.trim_start();
        if !in_re_export
            && (trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use "))
        {
            in_re_export = true;
        }
        if in_re_export {
            in_re_export = !line.trim_end().ends_with(';');
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

/// File -> the files it uses, inside one crate.
fn file_graph(dir: &Path, krate: &Crate) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut graph = BTreeMap::new();
    for (module, file) in &krate.modules {
        let text = fs::read_to_string(dir.join("src").join(file)).expect("readable");
        let code = production_code(&text);
        let mut starts: BTreeSet<String> = ["crate", "super", "self"].map(String::from).into();
        starts.extend(
            krate
                .modules
                .keys()
                .filter(|other| other.len() == module.len() + 1 && other.starts_with(module))
                .filter_map(|child| child.last().cloned()),
        );
        let mut uses = BTreeSet::new();
        for path in paths(&without_re_exports(&code), &starts) {
            if let Some(target) = resolve(krate, module, &path)
                && &target != module
            {
                uses.insert(krate.modules[&target].clone());
            }
        }
        graph.insert(file.clone(), uses);
    }
    graph
}

/// The strongly connected components with more than one file (Tarjan's algorithm).
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        graph: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a PathBuf) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        for target in state.graph.get(node).into_iter().flatten() {
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// One edge of each circle, to say where to look.
fn describe(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>, circle: &[PathBuf]) -> String {
    let members: BTreeSet<&PathBuf> = circle.iter().collect();
    circle
        .iter()
        .map(|file| {
            let inside: Vec<String> = graph[file]
                .iter()
                .filter(|target| members.contains(target))
                .map(|target| target.display().to_string())
                .collect();
            format!("    {} -> {}", file.display(), inside.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_crate_has_file_level_import_circles() {
    let mut problems = Vec::new();
    for dir in crate_dirs() {
        let Some(krate) = read_crate(&dir) else {
            continue;
        };
        let graph = file_graph(&dir, &krate);
        for circle in circles(&graph) {
            problems.push(format!(
                "{}: these files use each other in a circle:\n{}",
                krate.name,
                describe(&graph, &circle)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "give each circle an order (types and constants at the bottom, the controller at the \
         top) by moving what the lower files need out of the upper ones:\n{}",
        problems.join("\n")
    );
}

/// `[dependencies]` of a manifest: the names of the crates.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut in_section = false;
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == "[dependencies]";
            continue;
        }
        if in_section && !line.is_empty() && !line.starts_with('#') {
            let name = line
                .split(['=', '.', ' '])
                .next()
                .unwrap_or_default()
                .trim_matches('"');
            found.push(name.to_owned());
        }
    }
    found
}

#[test]
fn pure_crates_depend_on_no_client_runtime_or_io() {
    let ours: BTreeSet<String> = crate_dirs()
        .iter()
        .filter_map(|dir| read_crate(dir).map(|krate| krate.name))
        .collect();
    let mut checked = 0;
    let mut problems = Vec::new();
    for dir in crate_dirs() {
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).expect("readable");
        let Some(krate) = read_crate(&dir) else {
            continue;
        };
        if !PURE.contains(&krate.name.as_str()) {
            continue;
        }
        checked += 1;
        for dependency in dependencies(&manifest) {
            if NOT_IN_PURE.contains(&dependency.as_str()) {
                problems.push(format!(
                    "{} depends on {dependency}, which does I/O",
                    krate.name
                ));
            }
            if ours.contains(&dependency) && !PURE.contains(&dependency.as_str()) {
                problems.push(format!(
                    "{} depends on {dependency}, which is not one of the pure crates",
                    krate.name
                ));
            }
        }
    }
    assert_eq!(checked, PURE.len(), "every pure crate was found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_find_circles_and_brace_groups() {
    let starts: BTreeSet<String> = ["crate", "super", "self", "child"].map(String::from).into();
    let code = production_code(
        "use crate::{a, b::c, d::{E, F}};\nuse super::g::H; // crate::z\nchild::f();\n\
         pub use crate::facade::{\n    X,\n};\nuse crate::{\n    multi,\n    line::Y,\n};\n\
         #[cfg(test)]\nmod tests {\n    use crate::t;\n}\nlet s = \"//\"; crate::after::X;\n",
    );
    let found = paths(&without_re_exports(&code), &starts);
    let found: Vec<String> = found.iter().map(|path| path.join("::")).collect();
    assert_eq!(
        found,
        [
            "crate::a",
            "crate::b::c",
            "crate::d::E",
            "super::g::H",
            "child::f",
            "crate::multi",
            "crate::line::Y",
            "crate::after::X"
        ]
    );
    let graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("a.rs", vec!["b.rs"]),
        ("b.rs", vec!["c.rs"]),
        ("c.rs", vec!["a.rs"]),
        ("d.rs", vec!["a.rs"]),
    ]
    .into_iter()
    .map(|(file, uses)| (file.into(), uses.into_iter().map(PathBuf::from).collect()))
    .collect();
    let found = circles(&graph);
    assert_eq!(
        found,
        [vec![PathBuf::from("a.rs"), "b.rs".into(), "c.rs".into()]]
    );
}
