//! SMB / CIFS (`smb.csi.k8s.io`): the table in `smb.yaml`, no hooks. Runs on every platform,
//! installed on request; removable once none of its volumes is bound.

use csi_kit::DriverDef;

use crate::table::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "smb";
/// The CSI driver name.
pub const CSI_NAME: &str = "smb.csi.k8s.io";

const TABLE: &str = include_str!("smb.yaml");

/// The SMB driver (data only).
pub fn def() -> Result<DriverDef, DriverError> {
    crate::table::parse(SHORT_NAME, TABLE)
}
