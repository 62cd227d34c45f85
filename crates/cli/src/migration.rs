//! `storage-operator migration translate`: shows, offline, what Kubernetes' in-memory in-tree
//! to CSI translation turns StorageClasses, PersistentVolumes and pods' inline volumes into,
//! and explains every parameter or field dropped, renamed or added.
//!
//! Input is multi-document YAML (a `List`, as `kubectl get -o yaml` prints, counts as its
//! items). StorageClasses of an in-tree provisioner and in-tree
//! PersistentVolumes are translated to CSI; CSI PersistentVolumes of a migration driver are
//! translated back to in-tree (as Kubernetes stores volumes provisioned for an in-tree class);
//! each migratable inline volume of a Pod becomes the PersistentVolume that stands in for it.
//! The output is multi-document YAML with the notes as comments above each object.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use csi_migration::{
    Note, Plugin, TranslateError, Translation, translate_pod_volumes, translate_pv_to_csi,
    translate_pv_to_in_tree, translate_storage_class,
};
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

/// A document that could not be translated.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The document is not an object this command reads.
    #[error("{at} ({what}): {reason}")]
    Unsupported {
        /// Where in the input: `document 2`, or `document 1, item 3` inside a List.
        at: String,
        /// `Kind/name` as far as known.
        what: String,
        /// Why.
        reason: String,
    },
    /// The translation refused the object.
    #[error("{at} ({what}): {cause}")]
    Translate {
        /// Where in the input: `document 2`, or `document 1, item 3` inside a List.
        at: String,
        /// `Kind/name`.
        what: String,
        /// The field and what is wrong with it.
        cause: Box<TranslateError>,
    },
}

/// Reads `file` (`-` for stdin), prints the translations; fails on the first bad document.
pub fn translate(file: &Path) -> anyhow::Result<ExitCode> {
    let input = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        text
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let output = translate_text(&input)?;
    print!("{output}");
    Ok(ExitCode::SUCCESS)
}

/// Translates every document of `input` and renders the result as multi-document YAML.
pub fn translate_text(input: &str) -> anyhow::Result<String> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(input).context("parsing the input as YAML")?;
    let mut out = Vec::new();
    for (position, mut document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        // `kubectl get ... -o yaml` prints a List: its items are translated one by one.
        let is_list = document["kind"] == "List" && document["items"].is_array();
        let items: Vec<(String, Value)> = if is_list {
            let items = document["items"].take();
            items
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, item)| {
                    let at = format!("document {}, item {}", position + 1, i + 1);
                    (at, item.clone())
                })
                .collect()
        } else {
            vec![(format!("document {}", position + 1), document)]
        };
        for (header, notes, object) in items
            .into_iter()
            .map(|(at, item)| translate_document(at, item))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
        {
            let mut text = String::new();
            writeln!(text, "# {header}")?;
            for note in &notes {
                writeln!(text, "#   {}", one_line(note))?;
            }
            text.push_str(&object);
            out.push(text);
        }
    }
    Ok(out.join("---\n"))
}

fn one_line(note: &Note) -> String {
    note.to_string().replace('\n', " ")
}

fn what(document: &Value) -> String {
    let kind = document["kind"].as_str().unwrap_or("<no kind>");
    match document["metadata"]["name"].as_str() {
        Some(name) => format!("{kind}/{name}"),
        None => kind.to_string(),
    }
}

type Rendered = (String, Vec<Note>, String);

fn translate_document(at: String, document: Value) -> Result<Vec<Rendered>, DocumentError> {
    let what = what(&document);
    let unsupported = |reason: String| DocumentError::Unsupported {
        at: at.clone(),
        what: what.clone(),
        reason,
    };
    let translate_error = |cause: TranslateError| DocumentError::Translate {
        at: at.clone(),
        what: what.clone(),
        cause: Box::new(cause),
    };
    let kind = document["kind"].as_str().unwrap_or_default().to_string();
    let api_version = document["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let parse_error = |e: api::yaml::Error| unsupported(format!("not a valid {kind}: {e}"));
    match (api_version.as_str(), kind.as_str()) {
        ("storage.k8s.io/v1", "StorageClass") => {
            let sc: StorageClass = api::yaml::from_value(&document).map_err(parse_error)?;
            let from = sc.provisioner.clone();
            let t = translate_storage_class(&sc).map_err(translate_error)?;
            let header = format!("{what}: {from} -> {}", t.object.provisioner);
            Ok(vec![render(header, t)?])
        }
        ("v1", "PersistentVolume") => {
            let pv: PersistentVolume = api::yaml::from_value(&document).map_err(parse_error)?;
            let csi_driver = pv
                .spec
                .as_ref()
                .and_then(|s| s.csi.as_ref())
                .map(|c| c.driver.clone());
            let (header, t) = match csi_driver {
                Some(driver) => {
                    let t = translate_pv_to_in_tree(&pv).map_err(translate_error)?;
                    let plugin = Plugin::from_csi_driver(&driver)
                        .map(|p| p.in_tree_name())
                        .unwrap_or_default();
                    (format!("{what}: CSI {driver} -> in-tree {plugin}"), t)
                }
                None => {
                    let t = translate_pv_to_csi(&pv).map_err(translate_error)?;
                    let driver = t
                        .object
                        .spec
                        .as_ref()
                        .and_then(|s| s.csi.as_ref())
                        .map(|c| c.driver.clone())
                        .unwrap_or_default();
                    (format!("{what}: in-tree -> CSI {driver}"), t)
                }
            };
            Ok(vec![render(header, t)?])
        }
        ("v1", "Pod") => {
            let pod: Pod = api::yaml::from_value(&document).map_err(parse_error)?;
            let translations = translate_pod_volumes(&pod).map_err(translate_error)?;
            if translations.is_empty() {
                return Err(unsupported(
                    "no inline volume of an in-tree plugin that migrates to CSI".to_string(),
                ));
            }
            translations
                .into_iter()
                .map(|t| {
                    let name = t.object.metadata.name.clone().unwrap_or_default();
                    render(
                        format!("{what}: inline volume as PersistentVolume {name}"),
                        t,
                    )
                })
                .collect()
        }
        _ => Err(unsupported(format!(
            "kind {kind:?} (apiVersion {api_version:?}) is not translated; give StorageClasses \
             (storage.k8s.io/v1), PersistentVolumes or Pods (v1)"
        ))),
    }
}

fn render<T: serde::Serialize>(
    header: String,
    t: Translation<T>,
) -> Result<Rendered, DocumentError> {
    // k8s-openapi objects always serialize (type metadata first).
    let yaml = api::yaml::to_string(&t.object).unwrap_or_default();
    Ok((header, t.notes, yaml))
}
