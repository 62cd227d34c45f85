//! IBM Cloud VPC Block (`vpc.block.csi.ibm.io`): the table in `ibm_vpc_block.yaml` plus the
//! customer key of `driverConfig.ibmcloud.encryptionKeyCRN` on every class. The driver reads
//! its IBM Cloud configuration from the Secret `storage-secret-store`.

use csi::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "ibm-vpc-block";
/// The CSI driver name.
pub const CSI_NAME: &str = "vpc.block.csi.ibm.io";
/// The StorageClass parameter naming the Key Protect / Hyper Protect key of new volumes.
pub const ENCRYPTION_KEY_PARAMETER: &str = "encryptionKey";

const TABLE: &str = include_str!("ibm_vpc_block.yaml");

/// The IBM VPC Block driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        storage_class: vec![with_encryption_key],
        ..Hooks::default()
    };
    Ok(def)
}

/// Sets `encryptionKey` (and `encrypted: "true"`) from `driverConfig.ibmcloud.encryptionKeyCRN`
/// on every class, when set.
pub fn with_encryption_key(inputs: &Inputs, class: &mut StorageClass) {
    let crn = inputs
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.ibmcloud.as_ref())
        .map(|i| i.encryption_key_crn.as_str())
        .filter(|crn| !crn.is_empty());
    if let Some(crn) = crn {
        let parameters = class.parameters.get_or_insert_with(Default::default);
        parameters.insert(ENCRYPTION_KEY_PARAMETER.to_owned(), crn.to_owned());
        parameters.insert("encrypted".to_owned(), "true".to_owned());
    }
}
