//! The table of bad inputs the CRDs refuse (`tests/fixtures/bad-inputs.yaml`), for the tests
//! that check it offline (this crate's `tests/schema.rs`) and on a real API server
//! (`tests/e2e/tests/bad_inputs.rs`). Reads the files of this crate's source tree.

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

/// What trying a [`BadInput`] on an API server found ([`BadInput::try_on`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tried {
    /// Why the answer was not the one wanted (422 Invalid naming the field); `None` when it was.
    pub wrong: Option<String>,
    /// The valid object created on the way (a field under `status` needs one), to delete.
    pub created: Option<String>,
}

impl BadInput {
    /// Tries the bad input on an API server through `api` (its kind's): the broken object is
    /// created with `dryRun=All`; for a field under `status`, the valid object is created when
    /// absent and the broken status patched with `dryRun=All`. The answer must be 422 Invalid
    /// naming [`BadInput::field`]. An error says what could not be done on the way.
    pub async fn try_on(&self, api: &kube::Api<kube::api::DynamicObject>) -> Result<Tried, String> {
        use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
        let failed = |what: &str, e: &dyn std::fmt::Display| format!("{}: {what}: {e}", self.name);
        let valid = self.valid()?;
        let broken = self.broken()?;
        let mut created = None;
        let answer = if self.path.starts_with("/status") {
            // Status is not written on create: the object must exist, its status is patched.
            let name = valid["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let existing = api
                .get_opt(&name)
                .await
                .map_err(|e| failed("reading the valid object", &e))?;
            if existing.is_none() {
                let mut object: DynamicObject = serde_json::from_value(valid.clone())
                    .map_err(|e| failed("decoding the valid object", &e))?;
                object.metadata.resource_version = None;
                api.create(&PostParams::default(), &object)
                    .await
                    .map_err(|e| failed("creating the valid object", &e))?;
                created = Some(name.clone());
            }
            let params = PatchParams {
                dry_run: true,
                ..PatchParams::default()
            };
            let patch = Patch::Merge(serde_json::json!({"status": broken["status"]}));
            api.patch_status(&name, &params, &patch).await.map(drop)
        } else {
            let object: DynamicObject = serde_json::from_value(broken)
                .map_err(|e| failed("decoding the broken object", &e))?;
            let params = PostParams {
                dry_run: true,
                field_manager: None,
            };
            api.create(&params, &object).await.map(drop)
        };
        let wrong = match answer {
            Err(kube::Error::Api(status)) if status.code == 422 => {
                (!status.message.contains(&self.field)).then(|| {
                    format!(
                        "{}: 422 without naming {}: {}",
                        self.name, self.field, status.message
                    )
                })
            }
            Err(other) => Some(format!("{}: refused otherwise: {other}", self.name)),
            Ok(()) => Some(format!("{}: accepted", self.name)),
        };
        Ok(Tried { wrong, created })
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
