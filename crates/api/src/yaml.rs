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
    /// YAML, but not the shape of the type (the decoder's message names the field or value).
    Shape(serde_json::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(e) => write!(f, "{e}"),
            // The position is in the JSON made from the document, not in the document.
            Self::Shape(e) => {
                let message = e.to_string();
                let position = format!(" at line {} column {}", e.line(), e.column());
                f.write_str(message.strip_suffix(&position).unwrap_or(&message))
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Syntax(e) => Some(e.as_ref()),
            Self::Shape(e) => Some(e),
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
/// are [`Error::Shape`], without the meaningless position in the bytes.
pub fn from_value<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, Error> {
    let json = serde_json::to_vec(value).map_err(Error::Shape)?;
    serde_json::from_slice(&json).map_err(Error::Shape)
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
        assert!(matches!(shape, Error::Shape(_)), "{shape}");
        assert_eq!(shape.to_string(), "missing field `name`");
        // A YAML number is a number, as in the JSON the API server reads.
        let number = from_str::<Class>("name: 1\n").unwrap_err();
        assert!(number.to_string().contains("expected a string"), "{number}");
    }

    #[test]
    fn output_is_yaml_with_sorted_keys() {
        let yaml = to_string(&serde_json::json!({"kind": "A", "apiVersion": "v1"})).unwrap();
        assert_eq!(yaml, "apiVersion: v1\nkind: A\n");
    }
}
