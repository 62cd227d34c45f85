//! The reasons of a CSIDriverDeployment's conditions that the controller sets itself (the ones
//! of validation are in [`mod@crate::validate`]).

/// Reason of Degraded when a StorageClass of a template's name exists and is not ours; the
/// class is left as it is ([`csi_kit::replace`]).
pub const REASON_STORAGE_CLASS_EXISTS: &str = "StorageClassExists";
/// Reason of Degraded when objects could not be written.
pub const REASON_SYNC_FAILED: &str = "SyncFailed";
/// Reason of Degraded while PersistentVolumes of the driver hold back its removal.
pub const REASON_VOLUMES_IN_USE: &str = "VolumesInUse";
/// Reason of the workload conditions when all is well.
pub const REASON_AS_EXPECTED: &str = "AsExpected";
/// Reason of Degraded when the controller Deployment rolls out for longer than the deadline.
pub const REASON_PROGRESSING_TOO_LONG: &str = "ProgressingTooLong";
/// Reason of Available when the driver is removed.
pub const REASON_REMOVED: &str = "Removed";
/// Reason of Degraded when VolumeSnapshotClass templates wait for the snapshot API.
pub const REASON_SNAPSHOT_API_MISSING: &str = "SnapshotAPIMissing";
