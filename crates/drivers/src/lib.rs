//! The driver catalogue: one DriverDef per platform CSI driver
//!
//! Work on this crate arrives in a later issue; see ARCHITECTURE.md for what it will own.
