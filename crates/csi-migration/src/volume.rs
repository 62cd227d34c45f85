//! The PersistentVolume pieces shared by the plugins: the CSI source and the PersistentVolume
//! standing in for an inline volume, and the checks of volume IDs and attributes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::differences::Difference;
use crate::types::{Note, Plugin, Result, TranslateError};

/// A CSI source with the common fields set.
pub(crate) fn csi_source(
    plugin: Plugin,
    handle: String,
    fs_type: Option<String>,
    read_only: Option<bool>,
    attributes: BTreeMap<String, String>,
) -> CSIPersistentVolumeSource {
    CSIPersistentVolumeSource {
        driver: plugin.csi_driver().to_string(),
        volume_handle: handle,
        fs_type: fs_type.filter(|s| !s.is_empty()),
        read_only: read_only.filter(|r| *r),
        volume_attributes: (!attributes.is_empty()).then_some(attributes),
        ..Default::default()
    }
}

/// The PersistentVolume standing in for an inline volume: named `<driver>-<unique id>`, as the
/// staging path is derived from it.
pub(crate) fn inline_pv(
    plugin: Plugin,
    unique: &str,
    csi: CSIPersistentVolumeSource,
    access_mode: &str,
) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("{}-{unique}", plugin.csi_driver())),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            csi: Some(csi),
            access_modes: Some(vec![access_mode.to_string()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Moves the in-tree source out: sets the CSI source and a note.
pub(crate) fn set_csi(
    pv: &mut PersistentVolume,
    source_field: &str,
    csi: CSIPersistentVolumeSource,
) -> Note {
    let driver = csi.driver.clone();
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.csi = Some(csi);
    Note::new(
        format!("spec.{source_field}"),
        format!("replaced by a csi source of driver {driver}"),
    )
}

/// Fails on an empty volume ID.
pub(crate) fn require_id(plugin: Plugin, field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(
            TranslateError::malformed(plugin, field, value, "the volume ID is empty")
                .differs(Difference::EmptyVolumeId),
        );
    }
    Ok(())
}

/// The `partition` volume attribute of an EBS or GCE PD CSI volume: a decimal integer (an
/// empty value is one only when `empty_is_error`); 0, the whole disk, is no partition.
pub(crate) fn parse_partition(value: &str, empty_is_error: bool) -> Result<Option<i32>> {
    let field = "spec.csi.volumeAttributes.partition";
    if value.is_empty() && !empty_is_error {
        return Ok(None);
    }
    let wide: i64 = value
        .parse()
        .map_err(|_| TranslateError::invalid(field, value, "not an integer"))?;
    let narrow = i32::try_from(wide).map_err(|_| {
        TranslateError::invalid(
            field,
            value,
            "out of the 32-bit range of a partition number",
        )
        .differs(Difference::PartitionRange)
    })?;
    Ok((narrow != 0).then_some(narrow))
}

/// Notes, for each of `known` (lower-case attribute names read in any case) given in several
/// spellings, that the one last in byte order is read: upstream reads whichever its map order
/// visits last. With `skip_empty`, empty values do not count (the reader ignores them).
pub(crate) fn attribute_spellings(
    attributes: Option<&BTreeMap<String, String>>,
    known: &[&str],
    skip_empty: bool,
    notes: &mut Vec<Note>,
) {
    for name in known {
        let spellings: Vec<&String> = attributes
            .into_iter()
            .flatten()
            .filter(|(k, v)| k.eq_ignore_ascii_case(name) && !(skip_empty && v.is_empty()))
            .map(|(k, _)| k)
            .collect();
        if let [lost @ .., kept] = spellings.as_slice() {
            for key in lost {
                notes.push(Note::differs(
                    format!("spec.csi.volumeAttributes.{key}"),
                    format!(
                        "ignored: volumeAttributes.{kept} is read instead (csi-translation-lib \
                         reads either, by Go map order)"
                    ),
                    Difference::MapOrder,
                ));
            }
        }
    }
}
