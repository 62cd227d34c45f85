//! The API types of the storage operator stack, wire-identical to openshift/api.
//!
//! - [`operator_v1`]: `operator.openshift.io/v1` ClusterCSIDriver and Storage, which our
//!   operators own.
//! - [`config_v1`]: `config.openshift.io/v1` Infrastructure, Proxy, FeatureGate (read) and
//!   ClusterOperator (written).
//! - [`build_v1`]: `build.openshift.io/v1` build volumes (Secret, ConfigMap, CSI).
//! - [`csidriver_v1alpha1`]: `csidriver.storage.openshift.io/v1alpha1` CSIDriverDeployment,
//!   any CSI driver declared (seed 004).
//! - [`infrastructure_schema`]: the Infrastructure fields our types keep unmodelled, declared
//!   for its CRD.
//! - [`crds`]: the CustomResourceDefinitions generated from these types, as installed on plain
//!   Kubernetes and committed under `deploy/crds/`.
//! - [`yaml`]: YAML in and out through one JSON tree (small code, the API server's meaning).
//! - [`testdata`]: the table of bad inputs the CRDs refuse, for the tests offline and on a real
//!   API server.
//!
//! This crate makes no API calls. Every enum keeps values it does not know (see
//! [`string_enum`](mod@string_enum)), so objects from a newer cluster never fail to decode.

pub mod build_v1;
pub mod config_v1;
pub mod crds;
pub mod csidriver_v1alpha1;
pub mod infrastructure_schema;
pub mod operator_v1;
pub mod schema;
pub mod string_enum;
pub mod testdata;
pub mod yaml;
