//! The cluster storage operator (`storage-operator run`): decides which platform the cluster runs
//! on, which CSI driver operators to start, and rolls their status up into `Storage/cluster` and
//! `ClusterOperator/storage`. The pure decisions ([`plan`], [`platform`], [`registry`],
//! [`starter`], [`driver_status`]) are separate from the controller that observes the cluster
//! and applies them ([`operator`], [`observe`]).

pub mod default_storage_class;
pub mod driver_status;
pub mod manifests;
pub mod monitoring;
pub mod network_policy;
pub mod observe;
pub mod olm;
pub mod operator;
pub mod plan;
pub mod platform;
pub mod registry;
pub mod selinux;
pub mod starter;
pub mod storage_metrics;
pub mod validator;
pub mod vsphere_detector;
