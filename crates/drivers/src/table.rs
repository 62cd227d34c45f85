//! A driver's embedded table (its `<driver>.yaml`, a `DriverDef`): parsing it, and the error
//! when a driver cannot be produced. Every driver module reads its table through [`parse`], so
//! this sits below them all.

use csi_kit::DriverDef;

/// A driver could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// No driver has that name.
    #[error("unknown CSI driver {name:?}: known drivers are {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The known short names, comma-separated.
        known: String,
    },
    /// The embedded table does not parse (a bug caught by this crate's tests).
    #[error("the built-in table of driver {driver} is invalid: {source}")]
    InvalidTable {
        /// The driver's short name.
        driver: &'static str,
        /// What the parser said.
        #[source]
        source: Box<api::yaml::Error>,
    },
    /// The embedded table parses but does not validate (a bug caught by this crate's tests).
    #[error(transparent)]
    Invalid(#[from] csi_kit::def::InvalidDef),
}

/// Parses an embedded driver table ([`crate::by_name`] validates it once the hooks are set).
pub fn parse(driver: &'static str, yaml: &str) -> Result<DriverDef, DriverError> {
    api::yaml::from_str(yaml).map_err(|source| DriverError::InvalidTable {
        driver,
        source: Box::new(source),
    })
}
