//! Derived ConfigMaps (and Secrets): operand objects the operator generates from a ConfigMap it
//! observes elsewhere (e.g. the driver's `cloud.conf` from the cluster's cloud config in
//! `openshift-config`). The table names the operand object and its source; the driver module
//! sets a generator hook that turns the source's data into the operand's data. A derived object
//! marked `secret` is written as a Secret: its generator may put the driver's credentials in it
//! (they are in [`Inputs::credentials`]), as OpenShift's vSphere operator does with the
//! driver's `csi-vsphere.conf`.
//!
//! The operator watches each source by name (`driver_operator::observe`), puts its data in
//! [`Inputs::source_config_maps`], and [`build_derived_config_maps`] and
//! [`build_derived_secrets`] run the generators. A generated object's hash goes on the pod
//! templates that mount it ([`with_derived_hashes`]), so a change of the source that changes
//! the generated data rolls the pods once, and a change that does not (a comment) rolls
//! nothing. A missing source, a missing key or a generator error is a
//! [`DerivedConfigMapError`] naming the source and key: the operator reports it as Degraded
//! and keeps the object it applied last (and its hash).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::def::{DerivedConfigMapDef, DriverDef};
use crate::hash;
use crate::inputs::Inputs;
use crate::names;

/// Why a derived ConfigMap could not be generated. The message names the source, the key and
/// what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DerivedConfigMapError {
    /// The source ConfigMap does not exist.
    #[error(
        "ConfigMap {source_id} does not exist: it is needed to generate {kind} {name}; create it with key {key}"
    )]
    MissingSource {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// The operand object.
        name: String,
        /// `namespace/name` of the source.
        source_id: String,
        /// The key the generator reads.
        key: String,
    },
    /// The source exists but has no such key.
    #[error("ConfigMap {source_id} has no key {key}: it is needed to generate {kind} {name}")]
    MissingKey {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// The operand object.
        name: String,
        /// `namespace/name` of the source.
        source_id: String,
        /// The missing key.
        key: String,
    },
    /// The generator rejected the source's content.
    #[error("key {key} of ConfigMap {source_id} is invalid: {message}")]
    Invalid {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// The operand object.
        name: String,
        /// `namespace/name` of the source.
        source_id: String,
        /// The key the generator read.
        key: String,
        /// What the generator said.
        message: String,
    },
}

impl DerivedConfigMapError {
    /// The operand object (ConfigMap or Secret) that could not be generated.
    pub fn config_map(&self) -> &str {
        match self {
            Self::MissingSource { name, .. }
            | Self::MissingKey { name, .. }
            | Self::Invalid { name, .. } => name,
        }
    }
}

/// Runs one derived object's generator on [`Inputs::source_config_maps`]: its data, or why
/// not.
fn generate(
    derived: &DerivedConfigMapDef,
    inputs: &Inputs,
) -> Result<BTreeMap<String, String>, DerivedConfigMapError> {
    let kind = derived.kind();
    let source_id = derived.source.id();
    let data = inputs.source_config_maps.get(&source_id).ok_or_else(|| {
        DerivedConfigMapError::MissingSource {
            kind,
            name: derived.name.clone(),
            source_id: source_id.clone(),
            key: derived.source.key.clone(),
        }
    })?;
    let text = data
        .get(&derived.source.key)
        .ok_or_else(|| DerivedConfigMapError::MissingKey {
            kind,
            name: derived.name.clone(),
            source_id: source_id.clone(),
            key: derived.source.key.clone(),
        })?;
    match derived.generate {
        Some(generate) => {
            generate(inputs, text, data).map_err(|message| DerivedConfigMapError::Invalid {
                kind,
                name: derived.name.clone(),
                source_id: source_id.clone(),
                key: derived.source.key.clone(),
                message,
            })
        }
        None => Ok(data.clone()),
    }
}

/// Generates one derived ConfigMap from [`Inputs::source_config_maps`].
pub fn build_derived_config_map(
    def: &DriverDef,
    derived: &DerivedConfigMapDef,
    inputs: &Inputs,
) -> Result<ConfigMap, DerivedConfigMapError> {
    Ok(ConfigMap {
        metadata: names::ns_meta(def, derived.name.clone()),
        data: Some(generate(derived, inputs)?),
        ..ConfigMap::default()
    })
}

/// Generates one derived Secret (a [`DerivedConfigMapDef`] marked `secret`).
pub fn build_derived_secret(
    def: &DriverDef,
    derived: &DerivedConfigMapDef,
    inputs: &Inputs,
) -> Result<Secret, DerivedConfigMapError> {
    let data = generate(derived, inputs)?
        .into_iter()
        .map(|(k, v)| (k, ByteString(v.into_bytes())))
        .collect();
    Ok(Secret {
        metadata: names::ns_meta(def, derived.name.clone()),
        data: Some(data),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    })
}

/// Every derived ConfigMap of the driver (not the Secrets), in table order: the generated
/// object or why not.
pub fn build_derived_config_maps(
    def: &DriverDef,
    inputs: &Inputs,
) -> Vec<Result<ConfigMap, DerivedConfigMapError>> {
    def.config_maps
        .iter()
        .filter(|d| !d.secret)
        .map(|d| build_derived_config_map(def, d, inputs))
        .collect()
}

/// Every derived Secret of the driver, in table order: the generated object or why not.
pub fn build_derived_secrets(
    def: &DriverDef,
    inputs: &Inputs,
) -> Vec<Result<Secret, DerivedConfigMapError>> {
    def.config_maps
        .iter()
        .filter(|d| d.secret)
        .map(|d| build_derived_secret(def, d, inputs))
        .collect()
}

/// `inputs` with the hash of every derived ConfigMap and Secret that could be generated, so
/// the workloads that mount it carry the hash of what is applied in this same pass. Objects
/// that could not be generated keep the hash `inputs` already had (that of the object applied
/// last, filled in by `observe`), so a broken source does not roll the pods.
pub fn with_derived_hashes(def: &DriverDef, inputs: &Inputs) -> Inputs {
    let mut out = inputs.clone();
    for config_map in build_derived_config_maps(def, inputs).into_iter().flatten() {
        let name = config_map.metadata.name.clone().unwrap_or_default();
        out.config_map_hashes
            .insert(name, hash::config_map_hash(&config_map));
    }
    for secret in build_derived_secrets(def, inputs).into_iter().flatten() {
        let name = secret.metadata.name.clone().unwrap_or_default();
        out.secret_hashes.insert(name, hash::secret_hash(&secret));
    }
    out
}

/// The derivation errors of this pass, one line each, for the Degraded message.
pub fn derived_config_map_errors(def: &DriverDef, inputs: &Inputs) -> Vec<String> {
    def.config_maps
        .iter()
        .filter_map(|d| generate(d, inputs).err())
        .map(|e| e.to_string())
        .collect()
}

/// A minimal INI reader for the cloud configs drivers derive theirs from (gcfg / Python
/// `configparser` style): `[Section]` or `[Section "name"]` headers, `key = value` or
/// `key: value` lines, `#` and `;` comments, surrounding double quotes removed from values.
/// Keys before any header belong to the section `""`. Section and key names keep their case;
/// later duplicates win.
pub mod ini {
    use std::collections::BTreeMap;

    /// The sections of an INI text, each a map of keys to values.
    pub type Sections = BTreeMap<String, BTreeMap<String, String>>;

    /// Parses `text`; an error names the line number and what is wrong with it.
    pub fn parse(text: &str) -> Result<Sections, String> {
        Ok(sections(&parse_ordered(text)?))
    }

    /// The sections of an ordered parse ([`parse_ordered`]), as [`parse`] returns them.
    pub fn sections(ordered: &Ordered) -> Sections {
        let mut sections = Sections::new();
        for (name, entries) in ordered {
            sections
                .entry(name.clone())
                .or_default()
                .extend(entries.iter().cloned());
        }
        sections
    }

    /// Sections and keys in the order they first appear in a text (a later duplicate
    /// replaces the value in place).
    pub type Ordered = Vec<(String, Vec<(String, String)>)>;

    /// Parses `text` as [`parse`] does, keeping the order of sections and keys.
    pub fn parse_ordered(text: &str) -> Result<Ordered, String> {
        let mut sections: Ordered = Vec::new();
        let mut current = String::new();
        let position =
            |sections: &mut Ordered, name: &str| match sections.iter().position(|(n, _)| n == name)
            {
                Some(index) => index,
                None => {
                    sections.push((name.to_owned(), Vec::new()));
                    sections.len() - 1
                }
            };
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(rest) = line.strip_prefix('[') {
                let Some(header) = rest.strip_suffix(']') else {
                    return Err(format!(
                        "line {}: section header {line:?} has no closing ']'",
                        index + 1
                    ));
                };
                let header = header.trim();
                if header.is_empty() {
                    return Err(format!("line {}: empty section header", index + 1));
                }
                // `[VirtualCenter "10.0.0.1"]` is section `VirtualCenter "10.0.0.1"`.
                current = header.to_owned();
                position(&mut sections, &current);
                continue;
            }
            let Some((key, value)) = line
                .split_once('=')
                .or_else(|| line.split_once(':'))
                .filter(|(k, _)| !k.trim().is_empty())
            else {
                return Err(format!(
                    "line {}: {line:?} is neither a [section] nor key = value",
                    index + 1
                ));
            };
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            let at = position(&mut sections, &current);
            let entries = &mut sections[at].1;
            let key = key.trim();
            match entries.iter_mut().find(|(k, _)| k == key) {
                Some(entry) => entry.1 = value.to_owned(),
                None => entries.push((key.to_owned(), value.to_owned())),
            }
        }
        Ok(sections)
    }

    /// Writes sections back as INI text, in the given order, `key = value` per line.
    pub fn render(sections: &[(String, Vec<(String, String)>)]) -> String {
        let mut out = String::new();
        for (i, (name, entries)) in sections.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&format!("[{name}]\n"));
            for (k, v) in entries {
                out.push_str(&format!("{k} = {v}\n"));
            }
        }
        out
    }

    /// Writes sections in the layout OpenShift's operators write their INI files in (go-ini's
    /// pretty format), so that a file both would write is the same byte for byte (and so is
    /// its hash on the pod templates): `=` aligned under each section's longest key, a blank
    /// line between sections, a value holding `#` or `;` in backquotes (else it would read as
    /// a comment), one with a line break or a backquote in triple double quotes.
    pub fn render_aligned(sections: &[(String, Vec<(String, String)>)]) -> String {
        let mut out = String::new();
        for (i, (name, entries)) in sections.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&format!("[{name}]\n"));
            let width = entries.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (k, v) in entries {
                let v = if v.contains(['\n', '`']) {
                    format!("\"\"\"{v}\"\"\"")
                } else if v.contains(['#', ';']) {
                    format!("`{v}`")
                } else {
                    v.clone()
                };
                out.push_str(&format!("{k:<width$} = {v}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::def::ConfigMapSourceDef;
    use crate::inputs::Topology;

    fn def() -> DriverDef {
        let mut def = crate::def::test_def();
        def.config_maps = vec![DerivedConfigMapDef {
            name: "demo-config".into(),
            source: ConfigMapSourceDef {
                namespace: "openshift-config".into(),
                name: "cloud-provider-config".into(),
                key: "config".into(),
            },
            secret: false,
            example: BTreeMap::new(),
            generate: Some(|_, text, _| {
                let sections = ini::parse(text)?;
                let zone = sections
                    .get("Global")
                    .and_then(|g| g.get("zone"))
                    .ok_or("[Global] has no zone")?;
                Ok(BTreeMap::from([("zone".to_owned(), zone.clone())]))
            }),
        }];
        def
    }

    fn inputs_with(def: &DriverDef, source: Option<&[(&str, &str)]>) -> Inputs {
        let mut inputs = Inputs::new(def, Topology::HighlyAvailable, &BTreeMap::new());
        if let Some(data) = source {
            inputs.source_config_maps.insert(
                "openshift-config/cloud-provider-config".into(),
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
        }
        inputs
    }

    #[test]
    fn generates_from_the_source_and_names_what_is_missing_or_wrong() {
        let def = def();
        let ok = inputs_with(&def, Some(&[("config", "[Global]\nzone = a\n")]));
        let cm = build_derived_config_map(&def, &def.config_maps[0], &ok).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("demo-config"));
        assert_eq!(cm.data.unwrap()["zone"], "a");

        let missing = build_derived_config_maps(&def, &inputs_with(&def, None));
        let message = missing[0].as_ref().unwrap_err().to_string();
        assert!(message.contains("openshift-config/cloud-provider-config does not exist"));
        assert!(message.contains("key config"), "{message}");

        let no_key = inputs_with(&def, Some(&[("other", "x")]));
        assert_eq!(
            derived_config_map_errors(&def, &no_key),
            [
                "ConfigMap openshift-config/cloud-provider-config has no key config: it is needed to generate ConfigMap demo-config"
            ]
        );

        let bad = inputs_with(&def, Some(&[("config", "[Global\n")]));
        let errors = derived_config_map_errors(&def, &bad);
        assert!(
            errors[0].starts_with(
                "key config of ConfigMap openshift-config/cloud-provider-config is invalid: line 1"
            ),
            "{errors:?}"
        );
        let no_zone = inputs_with(&def, Some(&[("config", "[Global]\n")]));
        assert!(derived_config_map_errors(&def, &no_zone)[0].ends_with("[Global] has no zone"));
    }

    #[test]
    fn hashes_follow_the_generated_data_not_the_source_text() {
        let def = def();
        let a = with_derived_hashes(
            &def,
            &inputs_with(&def, Some(&[("config", "[Global]\nzone = a\n")])),
        );
        let a_comment = with_derived_hashes(
            &def,
            &inputs_with(&def, Some(&[("config", "# edited\n[Global]\nzone = a\n")])),
        );
        let b = with_derived_hashes(
            &def,
            &inputs_with(&def, Some(&[("config", "[Global]\nzone = b\n")])),
        );
        assert_eq!(
            a.config_map_hashes["demo-config"],
            a_comment.config_map_hashes["demo-config"]
        );
        assert_ne!(
            a.config_map_hashes["demo-config"],
            b.config_map_hashes["demo-config"]
        );

        // A broken source keeps the hash observed for the ConfigMap applied last.
        let mut broken = inputs_with(&def, Some(&[("config", "garbage")]));
        broken
            .config_map_hashes
            .insert("demo-config".into(), "last=".into());
        assert_eq!(
            with_derived_hashes(&def, &broken).config_map_hashes["demo-config"],
            "last="
        );
    }

    #[test]
    fn ini_reads_sections_comments_quotes_and_rejects_garbage() {
        let text = "top = 1\n# c\n; c\n[Global]\nsecret-name = \"x\"\nregion: r1\n[VirtualCenter \"10.0.0.1\"]\ndatacenters = dc\n";
        let s = ini::parse(text).unwrap();
        assert_eq!(s[""]["top"], "1");
        assert_eq!(s["Global"]["secret-name"], "x");
        assert_eq!(s["Global"]["region"], "r1");
        assert_eq!(s["VirtualCenter \"10.0.0.1\""]["datacenters"], "dc");
        for bad in ["[Global", "[]", "just words", "= value"] {
            assert!(ini::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(
            ini::render(&[
                ("A".into(), vec![("k".into(), "v".into())]),
                ("B".into(), vec![]),
            ]),
            "[A]\nk = v\n\n[B]\n"
        );
    }

    #[test]
    fn ini_keeps_the_order_and_writes_go_inis_layout() {
        let text = "[B]\nzeta = 1\nalpha = 2\n[A]\nk = v\n[B]\nzeta = 3\nmid = 4\n";
        let ordered = ini::parse_ordered(text).unwrap();
        assert_eq!(
            ordered,
            [
                (
                    "B".to_owned(),
                    vec![
                        ("zeta".to_owned(), "3".to_owned()),
                        ("alpha".to_owned(), "2".to_owned()),
                        ("mid".to_owned(), "4".to_owned()),
                    ]
                ),
                ("A".to_owned(), vec![("k".to_owned(), "v".to_owned())]),
            ],
            "first appearance decides the place, the last value wins"
        );
        assert_eq!(ini::parse(text).unwrap()["B"]["zeta"], "3");
        assert_eq!(
            ini::render_aligned(&[
                (
                    "Global".into(),
                    vec![
                        ("use-clouds".into(), "true".into()),
                        ("clouds-file".into(), "/x".into()),
                        ("tag".into(), "a#b".into()),
                        ("multi".into(), "a\nb".into()),
                    ]
                ),
                ("Empty".into(), vec![]),
            ]),
            "[Global]\nuse-clouds  = true\nclouds-file = /x\ntag         = `a#b`\nmulti       = \"\"\"a\nb\"\"\"\n\n[Empty]\n"
        );
    }
}
