//! YAML in and out, through one JSON tree.
//!
//! Every YAML document this stack reads (the embedded driver tables, a CSIDriverDeployment
//! given to `render`, a file given to `migrate`) is parsed into a [`serde_json::Value`] first
//! and only then decoded into its type; every YAML document it writes is encoded from a
//! `Value`. So the YAML parser and printer are compiled for one type, not once more for every
//! Kubernetes type a document can hold (which the operators' binary would otherwise carry:
//! about a megabyte of machine code, resident in every operator). It also makes YAML mean what
//! the API server makes of it: a document is decoded exactly as the same JSON would be
//! (`cpu: 1` is a number, as in `kubectl apply`'s JSON, and a string field refuses it).

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why a YAML document could not be read as a `T`.
#[derive(Debug)]
pub enum Error {
    /// Not YAML (the parser's message has the line and column).
    Syntax(Box<serde_saphyr::Error>),
    /// YAML, but not the shape of the type: the decoder's message, and the field it is about
    /// (`spec.driverName`, `spec.storageClasses[0]`) where it could be found.
    Shape {
        /// Where in the document, as a field path; empty for the document itself.
        field: Option<String>,
        /// What the decoder said.
        source: serde_json::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The parser's message starts with its own "error: ".
            Self::Syntax(e) => {
                let message = e.to_string();
                f.write_str(message.strip_prefix("error: ").unwrap_or(&message))
            }
            // The position is in the JSON made from the document, not in the document: the
            // field path replaces it.
            Self::Shape { field, source } => {
                let message = source.to_string();
                let position = format!(" at line {} column {}", source.line(), source.column());
                let message = message.strip_suffix(&position).unwrap_or(&message);
                match field.as_deref() {
                    Some(field) if !field.is_empty() => write!(f, "{field}: {message}"),
                    _ => f.write_str(message),
                }
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Syntax(e) => Some(e.as_ref()),
            Self::Shape { source, .. } => Some(source),
        }
    }
}

/// Parses one YAML document as a `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| Error::Syntax(Box::new(e)))?;
    from_value(&value)
}

/// Decodes a JSON tree as a `T`, from its bytes, as objects from the API server are decoded:
/// `serde_json::from_value` would compile every type's decoder once more, for the tree. Errors
/// are [`Error::Shape`], naming the field instead of a position in the bytes.
pub fn from_value<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, Error> {
    let shape = |source: serde_json::Error| Error::Shape {
        field: None,
        source,
    };
    // Pretty-printed, one key or item per line: the decoder's line number says which.
    let json = serde_json::to_vec_pretty(value).map_err(shape)?;
    serde_json::from_slice(&json).map_err(|source| {
        let mut line = 1;
        let mut found = None;
        field_at_line(
            value,
            &mut String::new(),
            &mut line,
            source.line(),
            &mut found,
        );
        Error::Shape {
            field: found,
            source,
        }
    })
}

/// Walks `value` as `serde_json`'s pretty printer lays it out (an object's or a list's entries
/// one per line after its opening line, its closing bracket on a line of its own, empty ones
/// inline) and records the path of what is on line `target`: the entry that starts there, or
/// the object or list that closes there (a missing field is reported at the closing brace).
fn field_at_line(
    value: &serde_json::Value,
    path: &mut String,
    line: &mut usize,
    target: usize,
    found: &mut Option<String>,
) {
    let entries: Vec<(String, &serde_json::Value)> = match value {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let sep = if path.is_empty() { "" } else { "." };
                (format!("{sep}{k}"), v)
            })
            .collect(),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("[{i}]"), v))
            .collect(),
        _ => return,
    };
    if entries.is_empty() {
        return;
    }
    for (segment, child) in entries {
        *line += 1;
        let len = path.len();
        path.push_str(&segment);
        if *line == target {
            *found = Some(path.clone());
        }
        field_at_line(child, path, line, target, found);
        path.truncate(len);
    }
    *line += 1;
    if *line == target {
        *found = Some(path.clone());
    }
}

/// Parses every document of a multi-document YAML stream (empty documents are `Null`).
pub fn from_multiple(text: &str) -> Result<Vec<serde_json::Value>, Error> {
    serde_saphyr::from_multiple(text).map_err(|e| Error::Syntax(Box::new(e)))
}

/// Renders `object` as one YAML document. Mapping keys come out sorted, as `serde_json`
/// orders them.
pub fn to_string<T: Serialize>(object: &T) -> Result<String, ToYamlError> {
    let value = serde_json::to_value(object).map_err(ToYamlError::Json)?;
    serde_saphyr::to_string(&value).map_err(ToYamlError::Yaml)
}

/// Why an object could not be rendered as YAML.
#[derive(Debug)]
pub enum ToYamlError {
    /// The object has no JSON form (a map with non-string keys).
    Json(serde_json::Error),
    /// The printer failed.
    Yaml(serde_saphyr::SerializeError),
}

impl fmt::Display for ToYamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json(e) => write!(f, "{e}"),
            Self::Yaml(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ToYamlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Json(e) => Some(e),
            Self::Yaml(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Class {
        name: String,
        #[serde(rename = "reclaimPolicy")]
        reclaim_policy: Option<String>,
    }

    #[test]
    fn a_document_decodes_as_its_json_would() {
        let class: Class = from_str("name: fast\nreclaimPolicy: Retain\n").unwrap();
        assert_eq!(class.name, "fast");
        assert_eq!(class.reclaim_policy.as_deref(), Some("Retain"));
    }

    #[test]
    fn syntax_errors_have_a_location_and_shape_errors_name_the_field() {
        let syntax = from_str::<Class>("name: [unclosed\n").unwrap_err();
        assert!(matches!(syntax, Error::Syntax(_)), "{syntax}");
        assert!(syntax.to_string().contains("line"), "{syntax}");
        let shape = from_str::<Class>("reclaimPolicy: Retain\n").unwrap_err();
        assert!(matches!(shape, Error::Shape { .. }), "{shape}");
        assert_eq!(shape.to_string(), "missing field `name`");
        // A YAML number is a number, as in the JSON the API server reads.
        let number = from_str::<Class>("name: 1\n").unwrap_err();
        assert_eq!(
            number.to_string(),
            "name: invalid type: integer `1`, expected a string"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)] // read by the decoder only
    struct Doc {
        kind: String,
        spec: Spec,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Spec {
        classes: Vec<Class>,
        mode: Mode,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(Debug, serde::Deserialize)]
    enum Mode {
        Fast,
        Slow,
    }

    #[test]
    fn shape_errors_name_the_field_at_any_depth() {
        let cases = [
            // A wrong type in a list item after an empty list and a nested object.
            (
                "kind: K\nspec:\n  tags: []\n  mode: Fast\n  classes:\n  - name: a\n  - name: [1]\n",
                "spec.classes[1].name: invalid type: sequence, expected a string",
            ),
            // A field missing from a list item: reported where the item closes.
            (
                "kind: K\nspec:\n  mode: Slow\n  classes:\n  - name: a\n  - reclaimPolicy: Retain\n",
                "spec.classes[1]: missing field `name`",
            ),
            // A value outside an enum.
            (
                "kind: K\nspec:\n  mode: Medium\n  classes: []\n",
                "spec.mode: unknown variant `Medium`, expected `Fast` or `Slow`",
            ),
            // A field missing from the document itself.
            ("spec: {mode: Fast, classes: []}\n", "missing field `kind`"),
        ];
        for (yaml, want) in cases {
            let error = from_str::<Doc>(yaml).unwrap_err();
            assert_eq!(error.to_string(), want, "{yaml}");
        }
    }

    #[test]
    fn output_is_yaml_with_sorted_keys() {
        let yaml = to_string(&serde_json::json!({"kind": "A", "apiVersion": "v1"})).unwrap();
        assert_eq!(yaml, "apiVersion: v1\nkind: A\n");
    }
}
