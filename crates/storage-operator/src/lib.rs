//! The cluster storage operator (`storage-operator run`): decides which platform the cluster runs
//! on, which CSI driver operators to start, and rolls their status up into `Storage/cluster` and
//! `ClusterOperator/storage`. This crate holds the pure decisions; the controllers that observe
//! the cluster and apply them arrive with issue #5.

pub mod driver_status;
pub mod manifests;
pub mod observe;
pub mod olm;
pub mod operator;
pub mod plan;
pub mod platform;
pub mod registry;
pub mod starter;
