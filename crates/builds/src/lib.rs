//! Build CSI volumes: validation, build-pod wiring, feature gate and status
//!
//! Work on this crate arrives in a later issue; see ARCHITECTURE.md for what it will own.
