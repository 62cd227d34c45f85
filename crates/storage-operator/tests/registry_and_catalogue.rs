#![allow(clippy::unwrap_used)]
//! The registry (what CSO starts) and the driver catalogue (what each driver operator runs)
//! describe the same drivers: names, condition prefixes and removability agree.

use storage_operator::registry::registry;

#[test]
fn every_catalogue_driver_agrees_with_its_registry_entry() {
    for short_name in drivers::short_names() {
        let def = drivers::by_name(short_name).unwrap();
        let entry = registry()
            .into_iter()
            .find(|e| e.short_name == short_name)
            .unwrap_or_else(|| panic!("{short_name} is in the catalogue but not the registry"));
        assert_eq!(def.name, entry.csi_driver_name, "{short_name}: CSI name");
        assert_eq!(def.short_name, entry.short_name, "{short_name}: short name");
        // OpenShift's vSphere driver operator names its own conditions `VMwareVSphere...`,
        // while cluster-storage-operator's conditions about it say `VSphere...`; every other
        // driver uses one prefix for both.
        let expected_prefix = match short_name {
            "vsphere" => "VMwareVSphere",
            _ => entry.condition_prefix,
        };
        assert_eq!(
            def.condition_prefix, expected_prefix,
            "{short_name}: condition prefix"
        );
        assert_eq!(def.removable, entry.removable, "{short_name}: removable");
        // OpenShift runs every driver operator in the driver namespace, and the operands there
        // too, but Manila's, which live in a namespace of their own.
        let expected_namespace = match short_name {
            "openstack-manila" => "openshift-manila-csi-driver",
            _ => storage_operator::registry::DRIVER_NAMESPACE,
        };
        assert_eq!(def.namespace, expected_namespace, "{short_name}: namespace");
        assert_eq!(
            def.images.driver.env, "DRIVER_IMAGE",
            "{short_name}: CSO passes the driver image as DRIVER_IMAGE"
        );
    }
}

/// Every extra image a driver's hooks use (Manila's NFS plugin, vSphere's syncer, the Azure
/// credentials injector, AWS's token minter with a hosted control plane) comes from an env var
/// CSO passes to its driver operator.
#[test]
fn cso_passes_every_extra_image_env_the_catalogue_reads() {
    for short_name in drivers::short_names() {
        let def = drivers::by_name(short_name).unwrap();
        let entry = storage_operator::registry::find(short_name).unwrap();
        for (role, image) in &def.extra_images {
            assert!(
                entry
                    .extra_image_envs
                    .iter()
                    .chain(entry.hosted_image_envs)
                    .any(|(_, passed_as)| *passed_as == image.env),
                "{short_name}: the {role} image's {} is not passed by CSO",
                image.env
            );
        }
    }
}

/// The drivers OpenShift runs with a hosted control plane are those whose table says how.
#[test]
fn the_hosted_drivers_are_openshifts_and_each_has_a_hosted_section() {
    let hosted: Vec<&str> = storage_operator::registry::registry()
        .iter()
        .filter(|e| e.hosted)
        .map(|e| e.short_name)
        .collect();
    assert_eq!(
        hosted,
        [
            "azure-disk",
            "azure-file",
            "aws-ebs",
            "openstack-manila",
            "openstack-cinder",
            "powervs-block"
        ]
    );
    for entry in storage_operator::registry::registry() {
        let def = drivers::by_name(entry.short_name).unwrap();
        assert_eq!(
            def.hosted.is_some(),
            entry.hosted,
            "{}: the table's hosted section and the registry disagree",
            entry.short_name
        );
        assert!(entry.hosted || entry.hosted_image_envs.is_empty());
    }
}

#[rstest::rstest]
#[case::azure_disk("azure-disk")]
#[case::azure_file("azure-file")]
fn azure_driver_operators_get_the_credentials_injector_image(#[case] driver: &str) {
    use storage_operator::starter::{StarterInputs, build_deployment};
    let entry = storage_operator::registry::find(driver).unwrap();
    let inputs = StarterInputs {
        topology: csi_kit::Topology::HighlyAvailable,
        log_level: api::operator_v1::LogLevel::Normal,
        proxy: Default::default(),
        env: [(
            "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE".to_owned(),
            "example.com/ccm-operator:1".to_owned(),
        )]
        .into(),
        operator_image: "example.com/operator:1".to_owned(),
        tls_profile: None,
    };
    let deployment = build_deployment(&entry, &inputs);
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let passed = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE");
    assert_eq!(
        passed.and_then(|e| e.value.as_deref()),
        Some("example.com/ccm-operator:1")
    );
    // What the driver operator then runs the injector with.
    let def = drivers::by_name(driver).unwrap();
    let env = [(
        "CLUSTER_CLOUD_CONTROLLER_MANAGER_OPERATOR_IMAGE".to_owned(),
        "example.com/ccm-operator:1".to_owned(),
    )]
    .into();
    let operands = csi_kit::Inputs::offline(&def, csi_kit::Topology::HighlyAvailable, &env);
    assert_eq!(
        operands.extra_images["credentialsInjector"],
        "example.com/ccm-operator:1"
    );
}

#[test]
fn the_registry_names_each_catalogue_driver_by_both_names() {
    for entry in registry() {
        if let Ok(def) = drivers::by_name(entry.short_name) {
            assert_eq!(
                drivers::by_name(entry.csi_driver_name).unwrap().short_name,
                def.short_name
            );
        }
    }
}

/// A driver operator may read the ConfigMaps its driver copies from other namespaces (by
/// name only), and no others outside its namespace but the API server's client CA (`get`, by
/// name, for its `/metrics` over HTTPS).
#[rstest::rstest]
#[case::aws_ebs("aws-ebs", &["kube-cloud-config"])]
#[case::azure_disk("azure-disk", &["cloud-provider-config"])]
#[case::gcp_pd("gcp-pd", &[])]
fn driver_operators_read_the_config_maps_they_copy_by_name(
    #[case] driver: &str,
    #[case] names: &[&str],
) {
    use storage_operator::starter::{StarterInputs, build_rbac};
    let entry = storage_operator::registry::find(driver).unwrap();
    let def = drivers::by_name(driver).unwrap();
    let inputs = StarterInputs {
        topology: csi_kit::Topology::HighlyAvailable,
        log_level: api::operator_v1::LogLevel::Normal,
        proxy: Default::default(),
        env: Default::default(),
        operator_image: "example.com/operator:1".to_owned(),
        tls_profile: None,
    };
    let (cluster_role, _) = build_rbac(&entry, &def, &inputs);
    let (client_ca, config_map_rules): (Vec<_>, Vec<_>) = cluster_role
        .rules
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.resources.iter().flatten().any(|r| r == "configmaps"))
        .partition(|r| {
            r.resource_names.as_deref() == Some(&["extension-apiserver-authentication".to_owned()])
        });
    assert_eq!(client_ca.len(), 1, "{client_ca:?}");
    assert_eq!(client_ca[0].verbs, ["get"]);
    if names.is_empty() {
        assert!(config_map_rules.is_empty(), "{config_map_rules:?}");
    } else {
        assert_eq!(config_map_rules.len(), 1, "{config_map_rules:?}");
        assert_eq!(
            config_map_rules[0].resource_names.clone().unwrap(),
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()
        );
        assert_eq!(config_map_rules[0].verbs, ["get", "list", "watch"]);
    }
}
