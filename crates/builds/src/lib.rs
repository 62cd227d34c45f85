//! Build CSI volumes (seed 000): builds using the Docker and Source strategies can mount CSI
//! ephemeral volumes, Secrets and ConfigMaps, read only. This crate holds the pure parts:
//! validation with OpenShift's rules and messages plus the checks OpenShift leaves to run time
//! ([`validation`]), the wiring of volumes into the build pod ([`pod`]), and the build's
//! phase from its pod, the feature gate and stuck mounts ([`phase`]). [`plan`] decides, per
//! build, what the controller does; [`controller`] (`storage-operator builds`) does it against
//! the API server.
//!
//! The files, bottom to top (a file uses only those below it): `names.rs` (the names they
//! share), `validation.rs`, `pod.rs`, `phase.rs`, `plan.rs`, then `controller.rs`, the only one
//! that talks to the API server. `manifests.rs` (what `deploy/` holds for the controller) uses
//! only `names.rs`.

pub mod controller;
pub mod manifests;
pub mod names;
pub mod phase;
pub mod plan;
pub mod pod;
pub mod validation;
