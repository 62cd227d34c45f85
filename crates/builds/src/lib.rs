//! Build CSI volumes (seed 000): builds using the Docker and Source strategies can mount CSI
//! ephemeral volumes, Secrets and ConfigMaps, read only. This crate holds the pure parts:
//! validation with OpenShift's rules and messages plus the checks OpenShift leaves to run time
//! ([`validation`]), the wiring of volumes into the build pod ([`pod`]), and the build's
//! phase from its pod, the feature gate and stuck mounts ([`phase`]). [`plan`] decides, per
//! build, what the controller does; [`controller`] (`storage-operator builds`) does it against
//! the API server.

pub mod controller;
pub mod manifests;
pub mod phase;
pub mod plan;
pub mod pod;
pub mod validation;
