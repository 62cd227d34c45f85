//! Every fixture, shaped like an object of a real OpenShift cluster, decodes into our types and
//! encodes back without losing or changing a field, and is accepted by our generated CRD.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

mod common;

use api::config_v1::{
    ClusterOperator, FeatureGate, GateState, Infrastructure, PlatformType, Proxy, TopologyMode,
};
use api::csidriver_v1alpha1::CSIDriverDeployment;
use api::operator_v1::{
    CSIDriverType, ClusterCSIDriver, LogLevel, ManagementState, Storage, StorageClassStateName,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn round_trip<T: DeserializeOwned + Serialize>(name: &str, original: &Value) -> T {
    let typed: T = serde_json::from_value(original.clone())
        .unwrap_or_else(|e| panic!("{name} does not decode: {e}"));
    let encoded = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        common::without_nulls(&encoded),
        common::without_nulls(original),
        "{name} changed in a round trip"
    );
    typed
}

#[test]
fn every_fixture_round_trips_and_is_schema_valid() {
    for (name, object) in common::valid_fixtures() {
        match object["kind"].as_str().unwrap() {
            "ClusterCSIDriver" => drop(round_trip::<ClusterCSIDriver>(&name, &object)),
            "Storage" => drop(round_trip::<Storage>(&name, &object)),
            "ClusterOperator" => drop(round_trip::<ClusterOperator>(&name, &object)),
            "Infrastructure" => drop(round_trip::<Infrastructure>(&name, &object)),
            "Proxy" => drop(round_trip::<Proxy>(&name, &object)),
            "FeatureGate" => drop(round_trip::<FeatureGate>(&name, &object)),
            "CSIDriverDeployment" => drop(round_trip::<CSIDriverDeployment>(&name, &object)),
            "Build" => drop(round_trip::<api::build_v1::Build>(&name, &object)),
            other => panic!("{name}: no type for kind {other}"),
        }
        let errors = common::validate(&object, None);
        assert!(
            errors.is_empty(),
            "{name} is rejected by its CRD: {errors:#?}"
        );
    }
}

fn fixture(name: &str) -> Value {
    common::read_yaml(&common::fixtures_dir().join("valid").join(name))
}

#[test]
fn cluster_csi_driver_fields_land_in_the_right_places() {
    let driver: ClusterCSIDriver =
        serde_json::from_value(fixture("clustercsidriver-gcp-pd.yaml")).unwrap();
    assert_eq!(
        driver.spec.operator.management_state,
        ManagementState::Managed
    );
    assert_eq!(
        driver.spec.storage_class_state(),
        StorageClassStateName::Managed
    );
    let config = driver.spec.driver_config.as_ref().unwrap();
    assert_eq!(config.driver_type, CSIDriverType::GCP);
    let key = config.gcp.as_ref().unwrap().kms_key.as_ref().unwrap();
    assert_eq!(
        key.resource_name(),
        "projects/my-project-123/locations/europe-west4/keyRings/ring-1/cryptoKeys/cluster-disks"
    );
    let status = driver.status.as_ref().unwrap();
    assert_eq!(status.generations.len(), 2);
    assert_eq!(
        status
            .condition("GCPPDDriverControllerServiceControllerAvailable")
            .unwrap()
            .reason
            .as_deref(),
        Some("AsExpected")
    );
    assert!(status.condition("NoSuchCondition").is_none());

    let ebs: ClusterCSIDriver =
        serde_json::from_value(fixture("clustercsidriver-aws-ebs.yaml")).unwrap();
    assert_eq!(ebs.spec.operator.log_level(), LogLevel::Debug);
    assert_eq!(ebs.spec.operator.log_level().klog_verbosity(), 4);
    assert_eq!(
        ebs.spec.operator.operator_log_level(),
        LogLevel::Normal,
        "unset means Normal"
    );
    assert_eq!(
        ebs.spec
            .operator
            .unsupported_config_overrides
            .as_ref()
            .unwrap()["anything"]["nested"][2],
        3
    );
}

#[rstest::rstest]
#[case(None, 2)]
#[case(Some(""), 2)]
#[case(Some("Normal"), 2)]
#[case(Some("Debug"), 4)]
#[case(Some("Trace"), 6)]
#[case(Some("TraceAll"), 8)]
#[case(Some("Chatty"), 2)]
fn log_levels_map_to_klog_verbosity(#[case] level: Option<&str>, #[case] verbosity: u8) {
    let spec: api::operator_v1::OperatorSpec =
        serde_json::from_value(json!({"managementState": "Managed", "logLevel": level})).unwrap();
    assert_eq!(spec.log_level().klog_verbosity(), verbosity);
}

#[test]
fn infrastructure_platform_follows_openshift_rules() {
    let gcp: Infrastructure = serde_json::from_value(fixture("infrastructure-gcp.yaml")).unwrap();
    assert_eq!(gcp.platform(), PlatformType::GCP);
    assert_eq!(
        gcp.status.as_ref().unwrap().infrastructure_name.as_deref(),
        Some("demo-x7k2p")
    );
    let extra = &gcp
        .status
        .as_ref()
        .unwrap()
        .platform_status
        .as_ref()
        .unwrap()
        .gcp
        .as_ref()
        .unwrap()
        .extra;
    assert!(
        extra.contains_key("cloudLoadBalancerConfig"),
        "unmodelled fields are kept"
    );

    let ash: Infrastructure =
        serde_json::from_value(fixture("infrastructure-azure-stack.yaml")).unwrap();
    assert_eq!(ash.control_plane_topology(), TopologyMode::SingleReplica);
    let azure = ash.status.unwrap().platform_status.unwrap().azure.unwrap();
    assert_eq!(
        azure.cloud_name.unwrap(),
        api::config_v1::AzureCloudEnvironment::AzureStackCloud
    );

    // An unknown platform decodes, is kept verbatim, and counts as None.
    let future: Infrastructure = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
        "metadata": {"name": "cluster"}, "spec": {},
        "status": {"platformStatus": {"type": "MarsCloud", "marscloud": {"crater": "gale"}}}
    }))
    .unwrap();
    assert_eq!(future.platform(), PlatformType::None);
    assert_eq!(
        serde_json::to_value(&future).unwrap()["status"]["platformStatus"]["type"],
        "MarsCloud"
    );

    // No platform status: no platform (CSO starts no driver), and topology defaults to HA.
    let bare: Infrastructure = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
        "metadata": {"name": "cluster"}, "spec": {}, "status": {"platform": "AWS"}
    }))
    .unwrap();
    assert_eq!(
        bare.platform(),
        PlatformType::Empty,
        "the deprecated status.platform is not read"
    );
    assert_eq!(bare.control_plane_topology(), TopologyMode::HighlyAvailable);
}

#[test]
fn unknown_driver_type_decodes_instead_of_failing() {
    let driver: ClusterCSIDriver = serde_json::from_value(json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
        "metadata": {"name": "pd.csi.storage.gke.io"},
        "spec": {"managementState": "Managed", "driverConfig": {"driverType": "FutureCloud"}}
    }))
    .unwrap();
    let driver_type = driver.spec.driver_config.unwrap().driver_type;
    assert!(!driver_type.is_known());
    assert_eq!(driver_type.as_str(), "FutureCloud");
}

#[test]
fn proxy_env_skips_unset_and_empty_values() {
    let proxy: Proxy = serde_json::from_value(fixture("proxy.yaml")).unwrap();
    let status = proxy.status.unwrap();
    let env = status.env();
    assert_eq!(env.len(), 3);
    assert_eq!(env[0], ("HTTP_PROXY", "http://proxy.example.com:3128"));
    let partial = api::config_v1::ProxyStatus {
        https_proxy: Some(String::new()),
        no_proxy: Some("x".into()),
        ..Default::default()
    };
    assert_eq!(partial.env(), vec![("NO_PROXY", "x")]);
}

#[test]
fn feature_gates_are_read_per_version() {
    let gates: FeatureGate = serde_json::from_value(fixture("featuregate.yaml")).unwrap();
    assert_eq!(
        gates.feature_set(),
        api::config_v1::FeatureSet::TechPreviewNoUpgrade
    );
    assert_eq!(gates.gate("4.20.0", "BuildCSIVolumes"), GateState::Enabled);
    assert_eq!(
        gates.gate("4.20.0", "SELinuxMountGAReadiness"),
        GateState::Disabled
    );
    assert_eq!(gates.gate("4.20.0", "NotAGate"), GateState::Unknown);
    assert_eq!(
        gates.gate("4.19.0", "BuildCSIVolumes"),
        GateState::Unknown,
        "other versions do not count"
    );
}

#[test]
fn cluster_operator_keeps_related_objects_and_versions() {
    let co: ClusterOperator =
        serde_json::from_value(fixture("clusteroperator-storage.yaml")).unwrap();
    let status = co.status.unwrap();
    assert_eq!(status.versions[0].name, "operator");
    assert_eq!(status.related_objects.len(), 4);
    assert_eq!(
        status.related_objects[3].namespace.as_deref(),
        Some("openshift-cluster-csi-drivers")
    );
    assert_eq!(
        status
            .condition("EvaluationConditionsDetected")
            .unwrap()
            .status,
        api::operator_v1::ConditionStatus::Unknown
    );
}

#[test]
fn a_2018_csidriverdeployment_decodes_with_its_defaults() {
    let deployment: CSIDriverDeployment =
        serde_json::from_value(fixture("csidriverdeployment-hostpath-2018.yaml")).unwrap();
    assert_eq!(deployment.spec.driver_name, "csi-hostpath");
    assert_eq!(deployment.spec.kubelet_root_dir(), "/var/lib/kubelet");
    assert!(
        deployment.spec.driver_controller_template.is_none(),
        "no controller part"
    );
    let node = deployment
        .spec
        .driver_per_node_template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(node.containers[0].name, "csi-driver");
    assert_eq!(
        deployment.spec.storage_class_templates[0].default,
        Some(true)
    );
}

#[test]
fn a_build_exposes_its_strategy_volumes() {
    let build: api::build_v1::Build =
        serde_json::from_value(fixture("build-docker-csi-volume.yaml")).unwrap();
    assert_eq!(build.volumes().len(), 1);
    assert_eq!(build.volumes_path(), "spec.strategy.dockerStrategy.volumes");
    assert!(
        build
            .status
            .as_ref()
            .unwrap()
            .phase
            .as_ref()
            .unwrap()
            .is_complete()
    );
    assert!(
        build.spec.extra.contains_key("triggeredBy"),
        "unmodelled fields are kept"
    );
}
