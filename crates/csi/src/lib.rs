//! The CSI driver kit: DriverDef, operand builders, hooks and driver-operator controllers
//!
//! Work on this crate arrives in a later issue; see ARCHITECTURE.md for what it will own.
