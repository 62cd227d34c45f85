//! The table of bad inputs the CRDs refuse (`tests/fixtures/bad-inputs.yaml`), for the tests
//! that check it offline (this crate's `tests/schema.rs`) and on a real API server
//! (`tests/e2e/tests/bad_inputs.rs`). Reads the files of this crate's source tree; the check on
//! an API server is `testkit::refusal::try_refused` (this crate has no client).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// One bad input: a valid fixture with one field set to a value the CRD refuses.
#[derive(Clone, Debug, Deserialize)]
pub struct BadInput {
    /// A name for failure messages.
    pub name: String,
    /// The valid fixture it starts from, under `tests/fixtures/valid`.
    pub fixture: String,
    /// The JSON pointer of the field.
    pub path: String,
    /// The value set there; null removes the field.
    pub value: Value,
    /// What the offline validation's errors contain.
    pub offline: String,
    /// The field the real API server's message names.
    pub field: String,
}

impl BadInput {
    /// Whether the bad field is under `status` (written by a status patch, not on create).
    pub fn in_status(&self) -> bool {
        self.path.starts_with("/status")
    }

    /// The valid fixture it starts from.
    pub fn valid(&self) -> Result<Value, String> {
        read_yaml(&fixtures_dir().join("valid").join(&self.fixture))
    }

    /// The fixture with the bad value set (or the field removed).
    pub fn broken(&self) -> Result<Value, String> {
        let mut object = self.valid()?;
        let (parent, field) = self
            .path
            .rsplit_once('/')
            .ok_or_else(|| format!("{}: path {:?} is not a JSON pointer", self.name, self.path))?;
        let parent = object
            .pointer_mut(parent)
            .ok_or_else(|| format!("{}: {} has no {parent}", self.name, self.fixture))?;
        match (parent, self.value.is_null()) {
            (Value::Object(map), true) => {
                map.remove(field);
            }
            (Value::Object(map), false) => {
                map.insert(field.to_owned(), self.value.clone());
            }
            (Value::Array(items), _) => {
                let index: usize = field
                    .parse()
                    .map_err(|_| format!("{}: {field} is not an index", self.name))?;
                let item = items
                    .get_mut(index)
                    .ok_or_else(|| format!("{}: no item {index}", self.name))?;
                *item = self.value.clone();
            }
            _ => {
                return Err(format!(
                    "{}: {} is not an object or a list",
                    self.name, self.path
                ));
            }
        }
        Ok(object)
    }
}

/// The directory of this crate's test fixtures.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every bad input of the table.
pub fn bad_inputs() -> Result<Vec<BadInput>, String> {
    let path = fixtures_dir().join("bad-inputs.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_yaml(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
