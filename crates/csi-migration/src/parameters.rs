//! The StorageClass parameter rules shared by the plugins: the context a plugin's rules may
//! change, the builder that settles two inputs setting one output, and the `fstype` rename.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::TopologySelectorTerm;

use crate::differences::Difference;
use crate::types::Note;

/// The fsType StorageClass parameter the external-provisioner reads.
pub const CSI_FSTYPE_PARAMETER: &str = "csi.storage.k8s.io/fstype";

/// The StorageClass parts a plugin's parameter rules may change.
pub(crate) struct ScContext<'a> {
    pub(crate) allowed_topologies: Option<Vec<TopologySelectorTerm>>,
    pub(crate) notes: &'a mut Vec<Note>,
}

/// The note on StorageClass parameter `lost`, ignored because parameter `kept` sets `what` too
/// (the [`Difference::MapOrder`] rule).
pub(crate) fn map_order_note(lost: &str, kept: &str, what: &str) -> Note {
    Note::differs(
        format!("parameters.{lost}"),
        format!(
            "ignored: parameters.{kept} also sets {what} and is kept (csi-translation-lib \
             keeps either, by Go map order)"
        ),
        Difference::MapOrder,
    )
}

/// How a StorageClass parameter came to be in the output; when two inputs set the same output
/// parameter, the higher rank wins, and between equal ranks the input key later in byte order
/// (the [`Difference::MapOrder`] rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// Added by the translation because of another parameter.
    Derived,
    /// Renamed from an in-tree parameter.
    Renamed,
    /// Given under this very name.
    Explicit,
}

/// The parameters of a translated StorageClass, built one input parameter at a time. Inputs
/// arrive in byte order (a `BTreeMap`), so the outcome never depends on map order as
/// csi-translation-lib's does.
#[derive(Default)]
pub(crate) struct Params {
    out: BTreeMap<String, (String, String, Rank)>,
    notes: Vec<Note>,
}

impl Params {
    /// Sets output parameter `key` to `value` because of input parameter `from`.
    pub(crate) fn set(&mut self, key: &str, value: &str, from: &str, rank: Rank) {
        let new = (value.to_string(), from.to_string(), rank);
        match self.out.get(key) {
            Some((_, kept, old)) if *old > rank => {
                let note = map_order_note(from, kept, key);
                self.notes.push(note);
            }
            Some((_, old_from, _)) => {
                let note = map_order_note(old_from, from, key);
                self.notes.push(note);
                self.out.insert(key.to_string(), new);
            }
            None => {
                self.out.insert(key.to_string(), new);
            }
        }
    }

    /// Keeps input parameter `key` as it is.
    pub(crate) fn keep(&mut self, key: &str, value: &str) {
        self.set(key, value, key, Rank::Explicit);
    }

    /// The parameters, and the notes about inputs that lost to another.
    pub(crate) fn finish(self, notes: &mut Vec<Note>) -> BTreeMap<String, String> {
        notes.extend(self.notes);
        self.out
            .into_iter()
            .map(|(key, (value, _, _))| (key, value))
            .collect()
    }
}

/// The `fstype` StorageClass parameter, in any case, is renamed to the CSI one; returns whether
/// the key was handled.
pub(crate) fn rename_fstype(
    key: &str,
    value: &str,
    out: &mut Params,
    notes: &mut Vec<Note>,
) -> bool {
    if key.eq_ignore_ascii_case("fstype") {
        out.set(CSI_FSTYPE_PARAMETER, value, key, Rank::Renamed);
        notes.push(Note::new(
            format!("parameters.{key}"),
            format!(
                "renamed to {CSI_FSTYPE_PARAMETER}: the external-provisioner passes the fsType \
                 to the driver under that key"
            ),
        ));
        true
    } else {
        false
    }
}
