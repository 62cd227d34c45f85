//! The generic operator runtime shared by every controller of the stack: conditions and their
//! union, management state as a strategy, the ClusterOperator roll-up, and (with later issues)
//! the server-side-apply applier, the status writer, leader election and the admin server.

pub mod admin;
pub mod apply;
pub mod backoff;
pub mod cluster_operator;
pub mod conditions;
pub mod controller;
pub mod discovery;
pub mod install;
pub mod leader;
pub mod log_level;
pub mod management;
pub mod metrics;
pub mod rbac;
pub mod runtime;
pub mod status;
