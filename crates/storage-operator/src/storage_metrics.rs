//! The storage metrics OpenShift's storage operator exports, under OpenShift's names because its
//! alerts read them: `default_storage_class_count` (the alert MultipleDefaultStorageClasses
//! fires above 1) and `openshift_cluster_storage_vac_mismatch_parameters{driver}` (1 when the
//! VolumeAttributesClasses of a driver do not all have the same parameter names, which the
//! alert VolumeAttributesClassParameterMismatch reports). Computed from the caches on every
//! pass; the computation is pure.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// The annotation that makes a StorageClass a default one.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The label of the mismatch metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriverLabel {
    /// The CSI driver of the VolumeAttributesClasses.
    pub driver: String,
}

/// The gauges, registered once.
#[derive(Clone, Debug, Default)]
pub struct StorageGauges {
    default_classes: Gauge,
    mismatch: Family<DriverLabel, Gauge>,
}

impl StorageGauges {
    /// Registers the gauges in `metrics` under OpenShift's names.
    pub fn register(metrics: &opkit::metrics::Metrics) -> Self {
        let gauges = Self::default();
        metrics.register_unprefixed(
            "default_storage_class_count",
            "Number of default storage classes currently configured.",
            gauges.default_classes.clone(),
        );
        metrics.register_unprefixed(
            "openshift_cluster_storage_vac_mismatch_parameters",
            "Whether the VolumeAttributesClasses of a driver have mismatching parameters: 0 when all of them have the same parameter names, 1 otherwise.",
            gauges.mismatch.clone(),
        );
        gauges
    }

    /// Sets the gauges from the classes as observed.
    pub fn set(&self, classes: &[StorageClass], attribute_classes: &[VolumeAttributesClass]) {
        self.default_classes
            .set(i64::try_from(default_classes(classes)).unwrap_or(i64::MAX));
        self.mismatch.clear();
        for (driver, mismatched) in mismatching_drivers(attribute_classes) {
            self.mismatch
                .get_or_create(&DriverLabel { driver })
                .set(i64::from(mismatched));
        }
    }
}

/// How many StorageClasses are marked default (`"true"`, as Kubernetes reads it).
pub fn default_classes(classes: &[StorageClass]) -> usize {
    classes
        .iter()
        .filter(|sc| {
            sc.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true")
        })
        .count()
}

/// For every driver with VolumeAttributesClasses, whether they disagree on the set of
/// parameter names.
pub fn mismatching_drivers(classes: &[VolumeAttributesClass]) -> BTreeMap<String, bool> {
    let mut sets: BTreeMap<String, BTreeSet<Vec<&str>>> = BTreeMap::new();
    for class in classes {
        let mut names: Vec<&str> = class
            .parameters
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        names.sort_unstable();
        sets.entry(class.driver_name.clone())
            .or_default()
            .insert(names);
    }
    sets.into_iter()
        .map(|(driver, kinds)| (driver, kinds.len() > 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn default_classes_and_mismatching_parameters_are_counted_as_openshift_does() {
        let class = |name: &str, default: Option<&str>| -> StorageClass {
            let mut value = json!({"metadata": {"name": name}, "provisioner": "p"});
            if let Some(d) = default {
                value["metadata"]["annotations"] = json!({DEFAULT_CLASS_ANNOTATION: d});
            }
            serde_json::from_value(value).unwrap()
        };
        assert_eq!(
            default_classes(&[
                class("a", Some("true")),
                class("b", Some("false")),
                class("c", None),
                class("d", Some("true")),
                class("e", Some("True")),
            ]),
            2
        );
        let vac = |driver: &str, params: serde_json::Value| -> VolumeAttributesClass {
            serde_json::from_value(
                json!({"metadata": {"name": "x"}, "driverName": driver, "parameters": params}),
            )
            .unwrap()
        };
        let found = mismatching_drivers(&[
            vac("same.csi", json!({"iops": "1", "throughput": "2"})),
            vac("same.csi", json!({"throughput": "9", "iops": "3"})),
            vac("mixed.csi", json!({"iops": "1"})),
            vac("mixed.csi", json!({"throughput": "1"})),
            vac("alone.csi", json!({})),
        ]);
        assert_eq!(
            found,
            BTreeMap::from([
                ("alone.csi".to_owned(), false),
                ("mixed.csi".to_owned(), true),
                ("same.csi".to_owned(), false),
            ])
        );
        let metrics = opkit::metrics::Metrics::new();
        let gauges = StorageGauges::register(&metrics);
        gauges.set(&[class("a", Some("true")), class("b", Some("true"))], &[]);
        let text = metrics.encode();
        assert!(text.contains("\ndefault_storage_class_count 2\n"), "{text}");
    }
}
