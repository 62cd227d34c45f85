//! What every step of a reconcile works with: the client, the caches and what was found at
//! start.

use std::collections::BTreeMap;

use api::csidriver_v1alpha1::CSIDriverDeployment;
use kube::runtime::events::Recorder;
use kube::{Client, ResourceExt};
use opkit::apply::Applier;
use opkit::metrics::Metrics;

use crate::caches::Caches;
use csi_kit::inputs::Topology;

/// The controller's client, caches and settings, shared by every reconcile.
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) applier: Applier,
    pub(crate) recorder: Recorder,
    pub(crate) caches: Caches,
    pub(crate) topology: Topology,
    pub(crate) scc_api: bool,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) metrics: Metrics,
    /// How long a claim may wait on its driver before `StuckClaims` reports it.
    pub(crate) stuck_claims_after: std::time::Duration,
}

/// `namespace/name` of a CSIDriverDeployment, for messages and logs.
pub(crate) fn key(cd: &CSIDriverDeployment) -> String {
    format!("{}/{}", cd.namespace().unwrap_or_default(), cd.name_any())
}
