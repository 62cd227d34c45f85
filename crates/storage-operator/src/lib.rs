//! The cluster storage operator (`storage-operator run`): decides which platform the cluster runs
//! on, which CSI driver operators to start, and rolls their status up into `Storage/cluster` and
//! `ClusterOperator/storage`. The pure decisions ([`plan`], [`platform`], [`registry`],
//! [`starter`], [`driver_status`]) are separate from the controller that observes the cluster
//! and applies them ([`operator`], [`observe`]).
//!
//! The files, bottom to top; a file uses only files listed before it:
//! 1. [`names`]: the shared names (the operator's namespace, its controllers', the operator it
//!    replaces) and [`names::Flavour`], the kind of cluster the manifests are for.
//! 2. [`ownership`] (whether an object is ours to apply over or to delete) and [`failure`] (the
//!    reconcile's error, failed writes, and the Degraded conditions made of them).
//! 3. The catalogue and small decisions: [`platform`], [`registry`], [`selinux`],
//!    [`storage_metrics`], [`default_storage_class`], [`driver_status`].
//! 4. The parts' pure builders: [`network_policy`], [`starter`], [`monitoring`], [`validator`],
//!    [`vsphere_detector`].
//! 5. Observing: [`observe`] (the caches and what they hold), [`olm`] (adopting an OLM-installed
//!    driver operator).
//! 6. What is applied: [`desired`] (one type for every object, and the starter's objects), then
//!    [`hosted`] (the same with a hosted control plane, by cluster); then planning: [`plan`].
//! 7. At the top: [`operator`], the controller that applies the plan, and [`manifests`], the
//!    operator's own install manifests, rendered from the same builders and plan.

pub mod default_storage_class;
pub mod deployment_version;
pub mod desired;
pub mod driver_status;
pub mod failure;
pub mod hosted;
pub mod hosted_install;
pub mod manifests;
pub mod monitoring;
pub mod names;
pub mod network_policy;
pub mod observe;
pub mod olm;
pub mod operator;
pub mod ownership;
pub mod plan;
pub mod platform;
pub mod registry;
pub mod selinux;
pub mod starter;
pub mod storage_metrics;
pub mod validator;
pub mod vsphere_detector;
