//! The translation's vocabulary: the migrated [`Plugin`]s, the [`Note`]s a translation makes,
//! the [`Translation`] it returns and the [`TranslateError`] it fails with. Every other file of
//! the crate uses these; this file uses only [`Difference`].

use std::fmt;

use k8s_openapi::api::core::v1::{PersistentVolumeSpec, Volume};

use crate::differences::Difference;

/// An in-tree volume plugin that Kubernetes migrates to a CSI driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plugin {
    /// `kubernetes.io/aws-ebs` -> `ebs.csi.aws.com`.
    AwsEbs,
    /// `kubernetes.io/gce-pd` -> `pd.csi.storage.gke.io`.
    GcePd,
    /// `kubernetes.io/azure-disk` -> `disk.csi.azure.com`.
    AzureDisk,
    /// `kubernetes.io/azure-file` -> `file.csi.azure.com`.
    AzureFile,
    /// `kubernetes.io/cinder` -> `cinder.csi.openstack.org`.
    Cinder,
    /// `kubernetes.io/vsphere-volume` -> `csi.vsphere.vmware.com`.
    VSphere,
    /// `kubernetes.io/portworx-volume` -> `pxd.portworx.com`.
    Portworx,
}

impl Plugin {
    /// Every migrated plugin.
    pub const ALL: [Plugin; 7] = [
        Plugin::AwsEbs,
        Plugin::GcePd,
        Plugin::AzureDisk,
        Plugin::AzureFile,
        Plugin::Cinder,
        Plugin::VSphere,
        Plugin::Portworx,
    ];

    /// The in-tree plugin name (a StorageClass `provisioner`).
    pub fn in_tree_name(self) -> &'static str {
        match self {
            Plugin::AwsEbs => "kubernetes.io/aws-ebs",
            Plugin::GcePd => "kubernetes.io/gce-pd",
            Plugin::AzureDisk => "kubernetes.io/azure-disk",
            Plugin::AzureFile => "kubernetes.io/azure-file",
            Plugin::Cinder => "kubernetes.io/cinder",
            Plugin::VSphere => "kubernetes.io/vsphere-volume",
            Plugin::Portworx => "kubernetes.io/portworx-volume",
        }
    }

    /// The name of the CSI driver that replaces it.
    pub fn csi_driver(self) -> &'static str {
        match self {
            Plugin::AwsEbs => "ebs.csi.aws.com",
            Plugin::GcePd => "pd.csi.storage.gke.io",
            Plugin::AzureDisk => "disk.csi.azure.com",
            Plugin::AzureFile => "file.csi.azure.com",
            Plugin::Cinder => "cinder.csi.openstack.org",
            Plugin::VSphere => "csi.vsphere.vmware.com",
            Plugin::Portworx => "pxd.portworx.com",
        }
    }

    /// The plugin with this in-tree name.
    pub fn from_in_tree_name(name: &str) -> Option<Plugin> {
        Plugin::ALL.into_iter().find(|p| p.in_tree_name() == name)
    }

    /// The plugin this CSI driver replaces.
    pub fn from_csi_driver(driver: &str) -> Option<Plugin> {
        Plugin::ALL.into_iter().find(|p| p.csi_driver() == driver)
    }

    /// The plugin of an in-tree PersistentVolume source, if the spec has one that migrates.
    pub fn of_pv_spec(spec: &PersistentVolumeSpec) -> Option<Plugin> {
        if spec.aws_elastic_block_store.is_some() {
            Some(Plugin::AwsEbs)
        } else if spec.gce_persistent_disk.is_some() {
            Some(Plugin::GcePd)
        } else if spec.azure_disk.is_some() {
            Some(Plugin::AzureDisk)
        } else if spec.azure_file.is_some() {
            Some(Plugin::AzureFile)
        } else if spec.cinder.is_some() {
            Some(Plugin::Cinder)
        } else if spec.vsphere_volume.is_some() {
            Some(Plugin::VSphere)
        } else if spec.portworx_volume.is_some() {
            Some(Plugin::Portworx)
        } else {
            None
        }
    }

    /// The plugin of an inline pod volume, if it is of a migrated in-tree plugin.
    pub fn of_volume(volume: &Volume) -> Option<Plugin> {
        if volume.aws_elastic_block_store.is_some() {
            Some(Plugin::AwsEbs)
        } else if volume.gce_persistent_disk.is_some() {
            Some(Plugin::GcePd)
        } else if volume.azure_disk.is_some() {
            Some(Plugin::AzureDisk)
        } else if volume.azure_file.is_some() {
            Some(Plugin::AzureFile)
        } else if volume.cinder.is_some() {
            Some(Plugin::Cinder)
        } else if volume.vsphere_volume.is_some() {
            Some(Plugin::VSphere)
        } else if volume.portworx_volume.is_some() {
            Some(Plugin::Portworx)
        } else {
            None
        }
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.in_tree_name())
    }
}

/// One change a translation made that a reader of the result would not guess.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The field of the input (or, for additions, of the output) the note is about, in the
    /// object's YAML spelling (`parameters.zone`, `spec.gcePersistentDisk.pdName`).
    pub field: String,
    /// What happened to it and why.
    pub message: String,
    /// Set when csi-translation-lib would do otherwise here.
    pub difference: Option<Difference>,
}

impl Note {
    /// A note on something csi-translation-lib does too.
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Note {
            field: field.into(),
            message: message.into(),
            difference: None,
        }
    }

    /// A note about a deliberate difference from csi-translation-lib.
    pub(crate) fn differs(
        field: impl Into<String>,
        message: impl Into<String>,
        why: Difference,
    ) -> Self {
        Note {
            difference: Some(why),
            ..Note::new(field, message)
        }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)?;
        if let Some(difference) = self.difference {
            write!(f, " [differs from csi-translation-lib: {difference}]")?;
        }
        Ok(())
    }
}

/// A translated object and the notes explaining the translation.
#[derive(Clone, Debug, PartialEq)]
pub struct Translation<T> {
    /// The translated object.
    pub object: T,
    /// Every parameter or field dropped, renamed, added or rewritten, in the order done.
    pub notes: Vec<Note>,
}

/// A translation failed; `field` names the offending field of the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// A volume ID or handle is not in the format the plugin or driver uses.
    #[error("{field}: malformed {plugin} volume ID {value:?}: {reason}")]
    MalformedVolumeId {
        /// The plugin whose format was expected.
        plugin: Plugin,
        /// The field holding the ID.
        field: String,
        /// The ID as given.
        value: String,
        /// What is wrong and the expected format.
        reason: String,
    },
    /// A field's value cannot be translated.
    #[error("{field}: invalid value {value:?}: {reason}")]
    InvalidValue {
        /// The offending field.
        field: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The object uses something the translation does not support.
    #[error("{field}: {reason}")]
    Unsupported {
        /// The offending field.
        field: String,
        /// What is not supported and what to do instead.
        reason: String,
    },
    /// Refused here where csi-translation-lib would translate it (a deliberate [`Difference`]).
    #[error("{cause} [differs from csi-translation-lib: {difference}]")]
    Differs {
        /// Which difference.
        difference: Difference,
        /// The refusal.
        cause: Box<TranslateError>,
    },
}

impl TranslateError {
    /// The field the error is about.
    pub fn field(&self) -> &str {
        match self {
            TranslateError::MalformedVolumeId { field, .. }
            | TranslateError::InvalidValue { field, .. }
            | TranslateError::Unsupported { field, .. } => field,
            TranslateError::Differs { cause, .. } => cause.field(),
        }
    }

    /// The refusal itself, without the [`TranslateError::Differs`] mark.
    pub fn cause(&self) -> &TranslateError {
        match self {
            TranslateError::Differs { cause, .. } => cause.cause(),
            other => other,
        }
    }

    /// The deliberate difference from csi-translation-lib this refusal is, if any.
    pub fn difference(&self) -> Option<Difference> {
        match self {
            TranslateError::Differs { difference, .. } => Some(*difference),
            _ => None,
        }
    }

    /// The same error with its field put under `prefix` (`spec.volumes[2]`).
    pub fn under(self, prefix: &str) -> Self {
        match self {
            TranslateError::Differs { difference, cause } => TranslateError::Differs {
                difference,
                cause: Box::new(cause.under(prefix)),
            },
            mut other => {
                if let TranslateError::MalformedVolumeId { field, .. }
                | TranslateError::InvalidValue { field, .. }
                | TranslateError::Unsupported { field, .. } = &mut other
                {
                    *field = format!("{prefix}.{field}");
                }
                other
            }
        }
    }

    /// Marks this refusal as a deliberate difference from csi-translation-lib.
    pub(crate) fn differs(self, difference: Difference) -> Self {
        TranslateError::Differs {
            difference,
            cause: Box::new(self),
        }
    }

    pub(crate) fn unsupported(field: impl Into<String>, reason: impl Into<String>) -> Self {
        TranslateError::Unsupported {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(
        field: impl Into<String>,
        value: &str,
        reason: impl Into<String>,
    ) -> Self {
        TranslateError::InvalidValue {
            field: field.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn malformed(
        plugin: Plugin,
        field: impl Into<String>,
        value: &str,
        reason: impl Into<String>,
    ) -> Self {
        TranslateError::MalformedVolumeId {
            plugin,
            field: field.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Result of a translation step.
pub type Result<T, E = TranslateError> = std::result::Result<T, E>;
