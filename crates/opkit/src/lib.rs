//! Generic operator runtime: server-side apply, conditions, status, leader election, admin server
//!
//! Work on this crate arrives in a later issue; see ARCHITECTURE.md for what it will own.
