//! The [`Inputs`] of a driver before anything is observed: its images resolved from the
//! operator's environment, its CredentialsRequests' token roles, and for offline renders the
//! examples its table carries.

use std::collections::BTreeMap;

use api::config_v1::ProxyStatus;
use api::operator_v1::ClusterCSIDriverSpec;

use crate::credentials;
use crate::def::{DriverDef, ImageDef, Images};
use crate::inputs::{Inputs, OptionalCrds, ResolvedImages, SecretData, ServingTls, Topology};

/// An image from the operator's environment variable when set and not empty, else its default.
pub fn resolve(image: &ImageDef, env: &BTreeMap<String, String>) -> String {
    env.get(&image.env)
        .filter(|v| !v.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| image.default.clone())
}

impl ResolvedImages {
    /// Resolves every image of `images` from `env` (the operator's environment, passed in).
    pub fn from_env(images: &Images, env: &BTreeMap<String, String>) -> Self {
        let pick = |image: &ImageDef| resolve(image, env);
        Self {
            driver: pick(&images.driver),
            provisioner: pick(&images.provisioner),
            attacher: pick(&images.attacher),
            resizer: pick(&images.resizer),
            snapshotter: pick(&images.snapshotter),
            node_driver_registrar: pick(&images.node_driver_registrar),
            liveness_probe: pick(&images.liveness_probe),
            kube_rbac_proxy: pick(&images.kube_rbac_proxy),
        }
    }
}

impl Inputs {
    /// Inputs with nothing observed yet: default spec (Managed, Normal), no cluster ID, no
    /// proxy, no CA bundle, no hashes, no optional CRDs, no StorageClasses. Images come from
    /// `env`.
    pub fn new(def: &DriverDef, topology: Topology, env: &BTreeMap<String, String>) -> Self {
        Self {
            spec: ClusterCSIDriverSpec::default(),
            topology,
            cluster_id: None,
            platform_status: None,
            proxy: ProxyStatus::default(),
            trusted_ca_bundle: false,
            secret_hashes: BTreeMap::new(),
            credentials: SecretData::default(),
            config_map_hashes: BTreeMap::new(),
            images: ResolvedImages::from_env(&def.images, env),
            extra_images: def
                .extra_images
                .iter()
                .map(|(role, image)| (role.clone(), resolve(image, env)))
                .collect(),
            crds: OptionalCrds::default(),
            storage_classes: Vec::new(),
            csi_driver_ephemeral_profile: None,
            tls: ServingTls::default(),
            copied_config_maps: BTreeMap::new(),
            source_config_maps: BTreeMap::new(),
            probe_facts: Vec::new(),
            task_facts: BTreeMap::new(),
            platform_spec: None,
            host_fips: false,
            token_roles: def
                .credentials
                .iter()
                .chain(&def.node_credentials)
                .filter_map(|c| c.credentials_request.as_ref())
                .filter_map(|r| {
                    let role = env
                        .get(credentials::role_variable(r))
                        .filter(|v| !v.trim().is_empty())?;
                    Some((r.name.clone(), role.trim().to_owned()))
                })
                .collect(),
            hosted: None,
        }
    }

    /// Inputs for offline rendering: as [`Inputs::new`], plus every optional CRD on OpenShift
    /// topologies (none on plain Kubernetes) and the example sources of derived ConfigMaps.
    pub fn offline(def: &DriverDef, topology: Topology, env: &BTreeMap<String, String>) -> Self {
        let mut inputs = Self::new(def, topology, env);
        if topology.is_openshift() {
            inputs.crds = OptionalCrds::all();
        }
        inputs.probe_facts = def.probe_example.clone();
        inputs.task_facts = def.task_examples.clone();
        if let Some(credentials) = &def.credentials {
            inputs.credentials = SecretData(credentials.example.clone());
        }
        for derived in def.config_maps.iter().filter(|d| !d.example.is_empty()) {
            inputs
                .source_config_maps
                .entry(derived.source.id())
                .or_insert_with(|| derived.example.clone());
        }
        inputs
    }
}
