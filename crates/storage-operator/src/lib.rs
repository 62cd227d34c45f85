//! The cluster storage operator: platform detection, driver registry, starter and status roll-up
//!
//! Work on this crate arrives in a later issue; see ARCHITECTURE.md for what it will own.
