//! The generic operator runtime shared by every controller of the stack: watch caches and the
//! reconcile loops ([`runtime`] for controllers of one object, [`controller`] for per-object
//! ones on kube-runtime's applier), server-side apply ([`apply`]), conditions and their union,
//! management state as a strategy, status and the ClusterOperator roll-up, leader election,
//! metrics and the admin server.
pub mod admin;
pub mod apply;
pub mod backoff;
pub mod cluster_operator;
pub mod conditions;
pub mod controller;
pub mod discovery;
pub mod events;
pub mod install;
pub mod leader;
pub mod log_level;
pub mod management;
pub mod metrics;
pub mod ownership;
pub mod rbac;
pub mod runtime;
pub mod secure_metrics;
pub mod status;
pub mod tls;
