//! The translation tables: one file per migrated plugin in `tests/migration/`, each case an
//! input object and what k8s.io/csi-translation-lib makes of it, worked out from upstream's
//! rules (`plugins/<plugin>.go`) field by field. A case whose answer deliberately differs says
//! which [`Difference`] and what upstream gives instead, and the translation must mark exactly
//! those differences in its notes (or its error).
//!
//! Objects are compared as JSON without `apiVersion` and `kind` (upstream's inline volume
//! PersistentVolumes have none; k8s-openapi always writes them), in Go's `omitempty` spelling:
//! no `false`, no empty strings or maps where Go leaves them out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // an integration test crate

use std::collections::BTreeSet;
use std::path::Path;

use csi_migration::{
    Difference, Note, Plugin, TranslateError, Translation, translate_inline_volume,
    translate_pv_to_csi, translate_pv_to_in_tree, translate_storage_class,
};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    plugin: String,
    /// Every StorageClass parameter and source field upstream's translator reads, per
    /// direction; each must appear in some case's input.
    handles: Handles,
    cases: Vec<Case>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Handles {
    #[serde(default)]
    storage_class: Vec<String>,
    #[serde(default)]
    pv: Vec<String>,
    #[serde(default)]
    inline: Vec<String>,
    #[serde(default, rename = "csiPV")]
    csi_pv: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    storage_class: Option<Value>,
    pv: Option<Value>,
    inline: Option<Value>,
    #[serde(rename = "csiPV")]
    csi_pv: Option<Value>,
    /// The pod's namespace, for `inline`.
    namespace: Option<String>,
    expect: Option<Value>,
    /// A part of the error message.
    error: Option<String>,
    /// The field the error names.
    field: Option<String>,
    #[serde(default)]
    differs: Vec<String>,
    /// What upstream gives where `differs` is set (an object or an error), for the reader.
    upstream: Option<Value>,
}

enum Direction {
    StorageClass,
    Pv,
    Inline,
    CsiPv,
}

impl Case {
    fn input(&self) -> (Direction, &Value) {
        let inputs = [
            (Direction::StorageClass, &self.storage_class),
            (Direction::Pv, &self.pv),
            (Direction::Inline, &self.inline),
            (Direction::CsiPv, &self.csi_pv),
        ];
        let mut given: Vec<_> = inputs
            .into_iter()
            .filter_map(|(d, v)| v.as_ref().map(|v| (d, v)))
            .collect();
        assert_eq!(given.len(), 1, "{}: give exactly one input", self.name);
        given.remove(0)
    }
}

fn without_type(mut value: Value) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
    }
    value
}

fn differences(notes: &[Note]) -> BTreeSet<&'static str> {
    notes
        .iter()
        .filter_map(|n| n.difference)
        .map(Difference::id)
        .collect()
}

fn run<T: serde::Serialize>(
    result: Result<Translation<T>, TranslateError>,
) -> Result<(Value, BTreeSet<&'static str>, Vec<String>), TranslateError> {
    result.map(|t| {
        let notes = t.notes.iter().map(ToString::to_string).collect();
        (
            without_type(serde_json::to_value(&t.object).unwrap()),
            differences(&t.notes),
            notes,
        )
    })
}

fn check_case(file: &str, case: &Case, plugin: Plugin) -> Vec<String> {
    let at = format!("{file}: {}", case.name);
    let (direction, input) = case.input();
    let mut wanted: BTreeSet<&str> = case.differs.iter().map(String::as_str).collect();
    let is_class = matches!(direction, Direction::StorageClass);
    let result = match direction {
        Direction::StorageClass => {
            let mut input = input.clone();
            if input.get("provisioner").is_none() {
                input["provisioner"] = plugin.in_tree_name().into();
            }
            run(translate_storage_class(
                &serde_json::from_value(input).expect("a StorageClass"),
            ))
        }
        Direction::Pv => run(translate_pv_to_csi(
            &serde_json::from_value(input.clone()).expect("a PersistentVolume"),
        )),
        Direction::CsiPv => run(translate_pv_to_in_tree(
            &serde_json::from_value(input.clone()).expect("a PersistentVolume"),
        )),
        Direction::Inline => run(translate_inline_volume(
            &serde_json::from_value(input.clone()).expect("a Volume"),
            case.namespace.as_deref().unwrap_or_default(),
        )),
    };
    let mut failures = Vec::new();
    if !wanted.is_empty() && case.upstream.is_none() {
        failures.push(format!("{at}: says `differs` without `upstream`"));
    }
    match (result, &case.expect, &case.error) {
        (Ok((mut got, marked, notes)), Some(expect), None) => {
            // Tables write classes as upstream gives them, whose provisioner stays the
            // in-tree one (Portworx's excepted): ours names the driver and says so.
            if is_class {
                let provisioner = got
                    .as_object_mut()
                    .and_then(|o| o.remove("provisioner"))
                    .unwrap_or_default();
                if provisioner != plugin.csi_driver() {
                    failures.push(format!("{at}: provisioner {provisioner}"));
                }
                if plugin != Plugin::Portworx {
                    wanted.insert(Difference::ClassProvisioner.id());
                }
            }
            if &got != expect {
                failures.push(format!(
                    "{at}:\n  expected {}\n  got      {}",
                    serde_json::to_string(expect).unwrap(),
                    serde_json::to_string(&got).unwrap()
                ));
            }
            if marked != wanted {
                failures.push(format!(
                    "{at}: differences marked {marked:?}, the table says {wanted:?}; notes: \
                     {notes:#?}"
                ));
            }
        }
        (Err(error), None, Some(part)) => {
            let message = error.to_string();
            if !message.contains(part.as_str()) {
                failures.push(format!("{at}: error {message:?} lacks {part:?}"));
            }
            if let Some(field) = &case.field
                && error.field() != field
            {
                failures.push(format!("{at}: error names {}, not {field}", error.field()));
            }
            let marked: BTreeSet<&str> =
                error.difference().map(Difference::id).into_iter().collect();
            if marked != wanted {
                failures.push(format!(
                    "{at}: error marks {marked:?}, the table says {wanted:?}: {message}"
                ));
            }
        }
        (Ok((got, _, _)), None, Some(part)) => failures.push(format!(
            "{at}: expected an error with {part:?}, got {}",
            serde_json::to_string(&got).unwrap()
        )),
        (Err(error), Some(_), None) => failures.push(format!("{at}: failed: {error}")),
        _ => failures.push(format!("{at}: give exactly one of `expect` and `error`")),
    }
    failures
}

/// Whether `key` is a key anywhere in `value` (any case).
fn has_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case(key) || has_key(v, key)),
        Value::Array(items) => items.iter().any(|v| has_key(v, key)),
        _ => false,
    }
}

fn tables() -> Vec<(String, Table)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/migration");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let table: Table =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, table)
        })
        .collect()
}

#[test]
fn every_plugin_has_a_table_and_every_case_holds() {
    let tables = tables();
    let plugins: BTreeSet<&str> = tables.iter().map(|(_, t)| t.plugin.as_str()).collect();
    let all: BTreeSet<&str> = Plugin::ALL.iter().map(|p| p.in_tree_name()).collect();
    let mut failures = Vec::new();
    for missing in all.difference(&plugins) {
        failures.push(format!("no table for {missing}"));
    }
    let mut exercised = BTreeSet::new();
    for (file, table) in &tables {
        let plugin = Plugin::from_in_tree_name(&table.plugin).expect("an in-tree plugin");
        for case in &table.cases {
            failures.extend(check_case(file, case, plugin));
            exercised.extend(case.differs.iter().cloned());
            if case.storage_class.is_some() && plugin != Plugin::Portworx {
                exercised.insert(Difference::ClassProvisioner.id().to_string());
            }
        }
        // Every parameter and field upstream reads is in some input of its direction.
        for (direction, keys) in [
            ("storageClass", &table.handles.storage_class),
            ("pv", &table.handles.pv),
            ("inline", &table.handles.inline),
            ("csiPV", &table.handles.csi_pv),
        ] {
            let inputs: Vec<&Value> = table
                .cases
                .iter()
                .filter_map(|c| match direction {
                    "storageClass" => c.storage_class.as_ref(),
                    "pv" => c.pv.as_ref(),
                    "inline" => c.inline.as_ref(),
                    _ => c.csi_pv.as_ref(),
                })
                .collect();
            if inputs.is_empty() {
                failures.push(format!("{file}: no {direction} case"));
            }
            for key in keys {
                if !inputs.iter().any(|i| has_key(i, key)) {
                    failures.push(format!("{file}: no {direction} case has {key}"));
                }
            }
        }
    }
    for difference in Difference::ALL {
        if !exercised.contains(difference.id()) {
            failures.push(format!("no case shows the difference {difference}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_module_docs_list_every_difference() {
    let docs = include_str!("../src/lib.rs");
    for difference in Difference::ALL {
        assert!(
            docs.contains(&format!("//! - `{}`:", difference.id())),
            "{difference} is not listed in crate::migration's docs"
        );
        assert!(!difference.upstream().is_empty() && !difference.ours().is_empty());
        assert!(!difference.why().is_empty());
    }
}
