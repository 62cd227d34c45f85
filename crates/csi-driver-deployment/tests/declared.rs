#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is a failure
//! CSIDriverDeployment: the rendered objects of every example (snapshots, reviewed like
//! manifests), the Cinder example against the seed's hand-written objects, and one table row
//! per validation rule.

use std::path::{Path, PathBuf};

use api::csidriver_v1alpha1::CSIDriverDeployment;
use csi_driver_deployment::validate::{
    REASON_CSIDRIVER_EXISTS, REASON_DRIVER_NAME_CLAIMED, REASON_INVALID_SPEC,
    REASON_TEMPLATE_CONFLICT,
};
use csi_driver_deployment::{Claimant, ClusterFacts, DeclaredInputs, build_operands, validate};
use csi_kit::{ExistingStorageClass, Operand, Topology};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use rstest::rstest;
use serde_json::{Value, json};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/csidriverdeployment")
}

fn example(file: &str) -> CSIDriverDeployment {
    let text = std::fs::read_to_string(examples_dir().join(file)).unwrap();
    let mut cd: CSIDriverDeployment = serde_saphyr::from_str(&text).unwrap();
    // kubectl puts an object without a namespace into the current one.
    cd.metadata
        .namespace
        .get_or_insert_with(|| "default".to_owned());
    cd
}

fn deployment(objects: &[Operand]) -> &Deployment {
    objects
        .iter()
        .find_map(|o| match o {
            Operand::Deployment(d) => Some(d),
            _ => None,
        })
        .expect("a controller Deployment")
}

fn daemon_set(objects: &[Operand]) -> &DaemonSet {
    objects
        .iter()
        .find_map(|o| match o {
            Operand::DaemonSet(d) => Some(d),
            _ => None,
        })
        .expect("a node DaemonSet")
}

fn pod(template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> &PodSpec {
    template.spec.as_ref().unwrap()
}

#[rstest]
#[case::hostpath_2018("hostpath-2018.yaml", Topology::HighlyAvailable)]
#[case::cinder("cinder-3.11.yaml", Topology::HighlyAvailable)]
#[case::hostpath("hostpath.yaml", Topology::Kubernetes { control_plane_nodes: true })]
#[case::fuse("fuse-ondelete.yaml", Topology::SingleReplica)]
fn every_example_renders(#[case] file: &str, #[case] topology: Topology) {
    let cd = example(file);
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![], "{file}");
    let objects: Vec<Value> = build_operands(&cd, &DeclaredInputs::offline(topology))
        .iter()
        .map(Operand::to_value)
        .collect();
    insta::assert_yaml_snapshot!(
        format!("declared_{}_{topology}", file.trim_end_matches(".yaml")),
        objects
    );
}

/// The seed's hand-written Cinder install (OKD 3.11): attacher + provisioner + driver in the
/// controller pod, registrar + driver on nodes, the socket at /csi/csi.sock in every container,
/// the kubelet pods directory with Bidirectional propagation, the `cinder` default class and
/// the `privileged` SCC for the node pods.
#[test]
fn cinder_matches_the_seed_install() {
    let cd = example("cinder-3.11.yaml");
    let objects = build_operands(&cd, &DeclaredInputs::offline(Topology::HighlyAvailable));

    let controller = pod(&deployment(&objects).spec.as_ref().unwrap().template);
    let names: Vec<&str> = controller
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "cinder-driver",
            "csi-provisioner",
            "csi-attacher",
            "csi-liveness-probe"
        ]
    );
    let driver = &controller.containers[0];
    assert!(
        driver
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "socket-dir" && m.mount_path == "/csi"),
        "the driver listens on /csi/csi.sock, in the shared socket volume"
    );
    let socket_dir = controller
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "socket-dir")
        .unwrap();
    assert!(
        socket_dir.empty_dir.is_some(),
        "an emptyDir, as in the seed"
    );
    for sidecar in &controller.containers[1..] {
        assert!(
            sidecar
                .args
                .iter()
                .flatten()
                .any(|a| a.starts_with("--csi-address=") && a.ends_with("/csi.sock")),
            "{} talks to the driver's socket",
            sidecar.name
        );
    }
    assert_eq!(
        deployment(&objects).spec.as_ref().unwrap().replicas,
        Some(2)
    );

    let node = pod(&daemon_set(&objects).spec.as_ref().unwrap().template);
    let names: Vec<&str> = node.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cinder-driver",
            "csi-node-driver-registrar",
            "csi-liveness-probe"
        ]
    );
    let kubelet = "/var/lib/origin/openshift.local.volumes";
    let bidirectional = node.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_propagation.as_deref() == Some("Bidirectional"))
        .unwrap();
    assert!(
        format!("{kubelet}/pods/").starts_with(&bidirectional.mount_path),
        "the pods directory {kubelet}/pods/ is under the Bidirectional mount {}",
        bidirectional.mount_path
    );
    let host = |name: &str| {
        node.volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .and_then(|v| v.host_path.as_ref())
            .map(|h| h.path.clone())
            .unwrap()
    };
    assert_eq!(host(&bidirectional.name), kubelet);
    assert_eq!(
        host("socket-dir"),
        format!("{kubelet}/plugins/csi-cinderplugin/")
    );
    assert_eq!(
        host("registration-dir"),
        format!("{kubelet}/plugins_registry/")
    );
    let registrar = &node.containers[1];
    assert!(registrar.args.iter().flatten().any(|a| a
        == &format!("--kubelet-registration-path={kubelet}/plugins/csi-cinderplugin/csi.sock")));
    // The user's volumes are kept.
    for name in ["cloudconfig", "cloud-metadata", "dev"] {
        assert!(
            node.volumes.iter().flatten().any(|v| v.name == name),
            "{name}"
        );
    }

    let class = objects
        .iter()
        .find_map(|o| match o {
            Operand::StorageClass(c) => Some(c),
            _ => None,
        })
        .unwrap();
    assert_eq!(class.metadata.name.as_deref(), Some("cinder"));
    assert_eq!(class.provisioner, "csi-cinderplugin");
    assert_eq!(
        class.metadata.annotations.as_ref().unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    let privileged_grant = objects.iter().any(|o| match o {
        Operand::ClusterRole(r) => r.rules.iter().flatten().any(|rule| {
            rule.resource_names.as_deref() == Some(&["privileged".to_owned()][..])
                && rule.verbs == ["use"]
        }),
        _ => false,
    });
    assert!(
        privileged_grant,
        "the node ServiceAccount may use the privileged SCC"
    );
}

#[test]
fn no_scc_grant_without_the_scc_api_and_only_the_sidecars_in_use() {
    let cd = example("fuse-ondelete.yaml");
    let mut inputs = DeclaredInputs::offline(Topology::SingleReplica);
    inputs.scc_api = false;
    let objects = build_operands(&cd, &inputs);
    let roles: Vec<String> = objects
        .iter()
        .filter_map(|o| match o {
            Operand::ClusterRole(r) => r.metadata.name.clone(),
            _ => None,
        })
        .collect();
    // attachRequired: false, no resizer or snapshotter: the provisioner alone.
    assert_eq!(roles, ["ru.yandex.s3.csi-csi-provisioner-role"]);
    let ds = daemon_set(&objects);
    assert_eq!(
        ds.spec
            .as_ref()
            .unwrap()
            .update_strategy
            .as_ref()
            .unwrap()
            .type_
            .as_deref(),
        Some("OnDelete")
    );
}

#[test]
fn a_default_class_yields_to_an_admins_default() {
    let cd = example("cinder-3.11.yaml");
    let mut inputs = DeclaredInputs::offline(Topology::HighlyAvailable);
    inputs.storage_classes = vec![ExistingStorageClass {
        name: "standard".to_owned(),
        default_annotation: Some("true".to_owned()),
    }];
    let objects = build_operands(&cd, &inputs);
    let class = objects
        .iter()
        .find_map(|o| match o {
            Operand::StorageClass(c) => Some(c),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        class.metadata.annotations.as_ref().unwrap()["storageclass.kubernetes.io/is-default-class"],
        "false"
    );
}

#[test]
fn namespaced_operands_are_owned_and_cluster_scoped_ones_labelled() {
    let mut cd = example("hostpath.yaml");
    cd.metadata.uid = Some("6b1c7a4e-0000-4000-8000-000000000001".to_owned());
    for o in build_operands(&cd, &DeclaredInputs::offline(Topology::HighlyAvailable)) {
        let v = o.to_value();
        let labels = &v["metadata"]["labels"];
        assert_eq!(
            labels["csidriver.storage.openshift.io/owner-name"],
            "hostpath",
            "{}",
            o.key()
        );
        assert_eq!(
            labels["csidriver.storage.openshift.io/owner-namespace"],
            "csi-hostpath"
        );
        let owners = &v["metadata"]["ownerReferences"];
        if v["metadata"]["namespace"].is_string() {
            assert_eq!(owners[0]["kind"], "CSIDriverDeployment", "{}", o.key());
            assert_eq!(owners[0]["controller"], true);
        } else {
            assert!(owners.is_null(), "{} is cluster-scoped", o.key());
        }
    }
}

fn base() -> Value {
    json!({
        "apiVersion": "csidriver.storage.openshift.io/v1alpha1",
        "kind": "CSIDriverDeployment",
        "metadata": {"name": "mine", "namespace": "csi", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "managementState": "Managed",
            "driverName": "mine.csi.example.com",
            "driverSocket": "/csi/csi.sock",
            "driverControllerTemplate": {"spec": {"containers": [{"name": "driver", "image": "d"}]}},
            "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver", "image": "d"}]}},
            "storageClassTemplates": [{"metadata": {"name": "mine"}, "default": true}],
        }
    })
}

fn set(object: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let parent = object.pointer_mut(parent).unwrap();
    match parent {
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
        }
        _ => panic!("{pointer}"),
    }
}

#[test]
fn the_base_object_is_valid() {
    let cd: CSIDriverDeployment = serde_json::from_value(base()).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
}

#[rstest]
#[case::long_name("/metadata/name", json!("x".repeat(53)), "metadata.name", REASON_INVALID_SPEC)]
#[case::upper_case_driver("/spec/driverName", json!("Mine.CSI"), "spec.driverName", REASON_INVALID_SPEC)]
#[case::driver_name_too_long("/spec/driverName", json!("a".repeat(64)), "spec.driverName", REASON_INVALID_SPEC)]
#[case::driver_name_ends_badly("/spec/driverName", json!("mine.csi-"), "spec.driverName", REASON_INVALID_SPEC)]
#[case::unknown_state("/spec/managementState", json!("Force-ish"), "spec.managementState", REASON_INVALID_SPEC)]
#[case::unknown_strategy("/spec/nodeUpdateStrategy", json!("Sometimes"), "spec.nodeUpdateStrategy", REASON_INVALID_SPEC)]
#[case::relative_socket("/spec/driverSocket", json!("csi/csi.sock"), "spec.driverSocket", REASON_INVALID_SPEC)]
#[case::socket_is_a_directory("/spec/driverSocket", json!("/csi/"), "spec.driverSocket", REASON_INVALID_SPEC)]
#[case::no_node_container("/spec/driverPerNodeTemplate/spec/containers", json!([]), "spec.driverPerNodeTemplate.spec.containers", REASON_INVALID_SPEC)]
#[case::no_node_spec("/spec/driverPerNodeTemplate", json!({}), "spec.driverPerNodeTemplate.spec.containers", REASON_INVALID_SPEC)]
#[case::no_controller_container("/spec/driverControllerTemplate/spec/containers", json!([]), "spec.driverControllerTemplate.spec.containers", REASON_INVALID_SPEC)]
#[case::injected_volume_name(
    "/spec/driverPerNodeTemplate/spec/volumes",
    json!([{"name": "socket-dir", "emptyDir": {}}]),
    "spec.driverPerNodeTemplate.spec.volumes[0].name",
    REASON_TEMPLATE_CONFLICT
)]
#[case::injected_container_name(
    "/spec/driverControllerTemplate/spec/containers",
    json!([{"name": "driver"}, {"name": "csi-provisioner"}]),
    "spec.driverControllerTemplate.spec.containers[1].name",
    REASON_TEMPLATE_CONFLICT
)]
#[case::mount_over_the_socket(
    "/spec/driverPerNodeTemplate/spec/containers",
    json!([{"name": "driver", "volumeMounts": [{"name": "x", "mountPath": "/csi"}]}]),
    "spec.driverPerNodeTemplate.spec.containers[0].volumeMounts[0].mountPath",
    REASON_TEMPLATE_CONFLICT
)]
#[case::bidirectional_outside_kubelet(
    "/spec/driverPerNodeTemplate/spec",
    json!({
        "containers": [{"name": "driver", "volumeMounts": [{"name": "pods", "mountPath": "/var/lib/origin/openshift.local.volumes/pods/", "mountPropagation": "Bidirectional"}]}],
        "volumes": [{"name": "pods", "hostPath": {"path": "/var/lib/origin/openshift.local.volumes/pods/"}}],
    }),
    "spec.driverPerNodeTemplate.spec.containers[0].volumeMounts[0]",
    REASON_TEMPLATE_CONFLICT
)]
#[case::resizer_without_controller(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "sidecars": {"resizer": true},
    }),
    "spec.sidecars.resizer",
    REASON_INVALID_SPEC
)]
#[case::relative_kubelet_dir("/spec/kubeletRootDir", json!("var/lib/kubelet"), "spec.kubeletRootDir", REASON_INVALID_SPEC)]
#[case::snapshotter_without_controller(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "sidecars": {"snapshotter": true},
    }),
    "spec.sidecars.snapshotter",
    REASON_INVALID_SPEC
)]
#[case::class_with_a_bad_name("/spec/storageClassTemplates/0", json!({"metadata": {"name": "Fast_SSD"}}), "spec.storageClassTemplates[0].metadata.name", REASON_INVALID_SPEC)]
#[case::class_without_name("/spec/storageClassTemplates/0", json!({"metadata": {}}), "spec.storageClassTemplates[0].metadata.name", REASON_INVALID_SPEC)]
#[case::class_listed_twice(
    "/spec/storageClassTemplates",
    json!([{"metadata": {"name": "a"}}, {"metadata": {"name": "a"}}]),
    "spec.storageClassTemplates[1].metadata.name",
    REASON_INVALID_SPEC
)]
#[case::two_defaults(
    "/spec/storageClassTemplates",
    json!([{"metadata": {"name": "a"}, "default": true}, {"metadata": {"name": "b"}, "default": true}]),
    "spec.storageClassTemplates[1].default",
    REASON_INVALID_SPEC
)]
#[case::class_reclaim_typo("/spec/storageClassTemplates/0/reclaimPolicy", json!("Deleet"), "spec.storageClassTemplates[0].reclaimPolicy", REASON_INVALID_SPEC)]
#[case::class_binding_typo("/spec/storageClassTemplates/0/volumeBindingMode", json!("Later"), "spec.storageClassTemplates[0].volumeBindingMode", REASON_INVALID_SPEC)]
#[case::class_empty_parameter_key("/spec/storageClassTemplates/0/parameters", json!({"": "x"}), "spec.storageClassTemplates[0].parameters", REASON_INVALID_SPEC)]
#[case::unknown_provisioning("/spec/provisioning", json!("Everywhere"), "spec.provisioning", REASON_INVALID_SPEC)]
#[case::attach_without_controller(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "csiDriver": {"attachRequired": true},
    }),
    "spec.csiDriver.attachRequired",
    REASON_INVALID_SPEC
)]
#[case::distributed_with_immediate_binding(
    "/spec/provisioning",
    json!("Distributed"),
    "spec.storageClassTemplates[0].volumeBindingMode",
    REASON_INVALID_SPEC
)]
#[case::snapshot_classes_without_snapshotter(
    "/spec/volumeSnapshotClassTemplates",
    json!([{"metadata": {"name": "snap"}}]),
    "spec.volumeSnapshotClassTemplates",
    REASON_INVALID_SPEC
)]
#[case::snapshot_class_policy_typo(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverControllerTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "sidecars": {"snapshotter": true},
        "volumeSnapshotClassTemplates": [{"metadata": {"name": "snap"}, "deletionPolicy": "Keep"}],
    }),
    "spec.volumeSnapshotClassTemplates[0].deletionPolicy",
    REASON_INVALID_SPEC
)]
#[case::snapshot_class_listed_twice(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverControllerTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "sidecars": {"snapshotter": true},
        "volumeSnapshotClassTemplates": [{"metadata": {"name": "snap"}}, {"metadata": {"name": "snap"}}],
    }),
    "spec.volumeSnapshotClassTemplates[1].metadata.name",
    REASON_INVALID_SPEC
)]
#[case::snapshot_class_without_name(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverControllerTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "sidecars": {"snapshotter": true},
        "volumeSnapshotClassTemplates": [{"metadata": {}}],
    }),
    "spec.volumeSnapshotClassTemplates[0].metadata.name",
    REASON_INVALID_SPEC
)]
#[case::two_default_snapshot_classes(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverControllerTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "sidecars": {"snapshotter": true},
        "volumeSnapshotClassTemplates": [
            {"metadata": {"name": "a"}, "default": true},
            {"metadata": {"name": "b"}, "default": true},
        ],
    }),
    "spec.volumeSnapshotClassTemplates[1].default",
    REASON_INVALID_SPEC
)]
#[case::snapshot_class_empty_parameter_key(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverControllerTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "sidecars": {"snapshotter": true},
        "volumeSnapshotClassTemplates": [{"metadata": {"name": "snap"}, "parameters": {"": "x"}}],
    }),
    "spec.volumeSnapshotClassTemplates[0].parameters",
    REASON_INVALID_SPEC
)]
#[case::capacity_without_provisioner(
    "/spec",
    json!({
        "driverName": "mine.csi.example.com", "driverSocket": "/csi/csi.sock",
        "driverPerNodeTemplate": {"spec": {"containers": [{"name": "driver"}]}},
        "csiDriver": {"storageCapacity": true},
    }),
    "spec.csiDriver.storageCapacity",
    REASON_INVALID_SPEC
)]
fn each_rule_names_its_field(
    #[case] pointer: &str,
    #[case] value: Value,
    #[case] field: &str,
    #[case] reason: &str,
) {
    let mut object = base();
    set(&mut object, pointer, value);
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    let problems = validate(&cd, &ClusterFacts::default());
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].field, field);
    assert_eq!(problems[0].reason, reason);
    assert!(
        problems[0].message.contains(':'),
        "says how to fix it: {}",
        problems[0]
    );
}

#[test]
fn without_a_controller_volumes_are_not_attached_unless_asked() {
    let mut object = base();
    object["spec"]
        .as_object_mut()
        .unwrap()
        .remove("driverControllerTemplate");
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
    assert!(!csi_driver_deployment::build::attach_required(&cd));
    let cd: CSIDriverDeployment = serde_json::from_value(base()).unwrap();
    assert!(
        csi_driver_deployment::build::attach_required(&cd),
        "Kubernetes' default"
    );
}

#[test]
fn a_bidirectional_mount_inside_the_kubelet_dir_is_fine() {
    let mut object = base();
    set(
        &mut object,
        "/spec/kubeletRootDir",
        json!("/var/lib/origin/openshift.local.volumes"),
    );
    set(
        &mut object,
        "/spec/driverPerNodeTemplate/spec",
        json!({
            "containers": [{"name": "driver", "volumeMounts": [{"name": "pods", "mountPath": "/var/lib/origin/openshift.local.volumes/pods/", "mountPropagation": "Bidirectional"}]}],
            "volumes": [{"name": "pods", "hostPath": {"path": "/var/lib/origin/openshift.local.volumes/pods/"}}],
        }),
    );
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
}

fn at(seconds: i64) -> Option<Time> {
    Some(Time(Timestamp::from_second(seconds).unwrap()))
}

#[test]
fn the_oldest_claimant_keeps_the_driver_name() {
    let cd: CSIDriverDeployment = serde_json::from_value(base()).unwrap();
    let older = Claimant {
        namespace: "other".to_owned(),
        name: "theirs".to_owned(),
        created: at(0),
    };
    let facts = ClusterFacts {
        claimants: vec![older.clone()],
        csi_driver_owner: None,
        csi_driver_installer: None,
    };
    let problems = validate(&cd, &facts);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].reason, REASON_DRIVER_NAME_CLAIMED);
    assert!(
        problems[0].message.contains("other/theirs"),
        "{}",
        problems[0]
    );

    // The younger one does not block the holder.
    let younger = Claimant {
        created: at(2_000_000_000),
        ..older
    };
    let facts = ClusterFacts {
        claimants: vec![younger.clone()],
        csi_driver_owner: None,
        csi_driver_installer: None,
    };
    assert_eq!(validate(&cd, &facts), vec![]);
    // Unless the existing CSIDriver is the younger one's: it keeps what it installed.
    let facts = ClusterFacts {
        claimants: vec![younger],
        csi_driver_owner: Some(Some(("other".to_owned(), "theirs".to_owned()))),
        csi_driver_installer: None,
    };
    assert_eq!(validate(&cd, &facts)[0].reason, REASON_DRIVER_NAME_CLAIMED);
}

#[test]
fn a_csidriver_we_did_not_create_blocks_the_name() {
    let cd: CSIDriverDeployment = serde_json::from_value(base()).unwrap();
    let facts = ClusterFacts {
        claimants: Vec::new(),
        csi_driver_owner: Some(None),
        csi_driver_installer: Some(opkit::ownership::Installer {
            description: "Helm release s3 in namespace kube-system".into(),
            removal: "helm uninstall s3 --namespace kube-system".into(),
        }),
    };
    let problems = validate(&cd, &facts);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].field, "spec.driverName");
    assert_eq!(problems[0].reason, REASON_CSIDRIVER_EXISTS);
    assert!(
        problems[0].message.contains(
            "no CSIDriverDeployment created (installed by Helm release s3 in namespace kube-system): helm uninstall s3 --namespace kube-system (then the CSIDriver)"
        ),
        "the installer is named: {}",
        problems[0]
    );
    // One we created is ours to keep.
    let facts = ClusterFacts {
        claimants: Vec::new(),
        csi_driver_owner: Some(Some(("csi".to_owned(), "mine".to_owned()))),
        csi_driver_installer: None,
    };
    assert_eq!(validate(&cd, &facts), vec![]);
}

#[test]
fn a_2018_manifest_decodes_unchanged() {
    let text = std::fs::read_to_string(examples_dir().join("hostpath-2018.yaml")).unwrap();
    let raw: Value = serde_saphyr::from_str(&text).unwrap();
    assert!(
        raw["spec"].get("managementState").is_none(),
        "written without it, as in 2018"
    );
    let cd = example("hostpath-2018.yaml");
    assert_eq!(
        cd.spec.management_state,
        api::operator_v1::ManagementState::Managed
    );
    assert_eq!(cd.spec.kubelet_root_dir(), "/var/lib/kubelet");
}

/// A socket that is not `csi.sock`, in a directory that is not `/csi`: every injected container
/// and the kubelet registration follow it.
#[test]
fn the_sidecars_follow_the_declared_socket() {
    let mut object = base();
    set(&mut object, "/spec/driverSocket", json!("/run/csi/socket"));
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
    let objects = build_operands(&cd, &DeclaredInputs::offline(Topology::SingleReplica));

    let controller = pod(&deployment(&objects).spec.as_ref().unwrap().template);
    assert!(
        controller.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "socket-dir" && m.mount_path == "/run/csi")
    );
    let args = |c: &k8s_openapi::api::core::v1::Container| c.args.clone().unwrap_or_default();
    for sidecar in &controller.containers[1..] {
        let address = args(sidecar)
            .into_iter()
            .find(|a| a.starts_with("--csi-address="))
            .unwrap();
        assert!(address.ends_with("/socket"), "{}: {address}", sidecar.name);
    }

    let node = pod(&daemon_set(&objects).spec.as_ref().unwrap().template);
    let registrar = node
        .containers
        .iter()
        .find(|c| c.name == "csi-node-driver-registrar")
        .unwrap();
    assert!(args(registrar).contains(&"--csi-address=/csi/socket".to_owned()));
    assert!(
        args(registrar).contains(
            &"--kubelet-registration-path=/var/lib/kubelet/plugins/mine.csi.example.com/socket"
                .to_owned()
        )
    );
    let pre_stop = registrar
        .lifecycle
        .as_ref()
        .unwrap()
        .pre_stop
        .as_ref()
        .unwrap();
    let command = pre_stop.exec.as_ref().unwrap().command.clone().unwrap();
    assert!(command[2].ends_with("/csi/socket"), "{command:?}");
    let probe = node
        .containers
        .iter()
        .find(|c| c.name == "csi-liveness-probe")
        .unwrap();
    assert!(args(probe).contains(&"--csi-address=/csi/socket".to_owned()));
}

fn containers(template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Vec<String> {
    pod(template)
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect()
}

fn container<'a>(
    template: &'a k8s_openapi::api::core::v1::PodTemplateSpec,
    name: &str,
) -> &'a k8s_openapi::api::core::v1::Container {
    pod(template)
        .containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("container {name}"))
}

fn binding_subject(objects: &[Operand], name: &str) -> String {
    objects
        .iter()
        .find_map(|o| match o {
            Operand::ClusterRoleBinding(b) if b.metadata.name.as_deref() == Some(name) => {
                Some(b.subjects.clone().unwrap()[0].name.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("ClusterRoleBinding {name}"))
}

/// With Distributed provisioning the snapshotter runs next to the driver in every node pod
/// (`--node-deployment`, the node's name, no leader election) with its role bound to the node
/// ServiceAccount, and needs no controller pod; the resizer stays in the controller pod.
#[test]
fn distributed_snapshots_are_taken_on_the_node_and_resizes_centrally() {
    let mut object = base();
    set(&mut object, "/spec/provisioning", json!("Distributed"));
    set(
        &mut object,
        "/spec/storageClassTemplates/0/volumeBindingMode",
        json!("WaitForFirstConsumer"),
    );
    set(
        &mut object,
        "/spec/sidecars",
        json!({"resizer": true, "snapshotter": true}),
    );
    let cd: CSIDriverDeployment = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
    let objects = build_operands(&cd, &DeclaredInputs::offline(Topology::SingleReplica));

    let controller = &deployment(&objects).spec.as_ref().unwrap().template;
    assert_eq!(
        containers(controller),
        [
            "driver",
            "csi-attacher",
            "csi-resizer",
            "csi-liveness-probe"
        ]
    );
    let node = &daemon_set(&objects).spec.as_ref().unwrap().template;
    let snapshotter = container(node, "csi-snapshotter");
    let args = snapshotter.args.clone().unwrap();
    assert!(
        args.contains(&"--node-deployment=true".to_owned()),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a.starts_with("--leader-election")));
    assert!(
        snapshotter
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "NODE_NAME")
    );
    assert_eq!(
        binding_subject(&objects, "mine.csi.example.com-csi-snapshotter-binding"),
        "mine-node-sa"
    );
    assert_eq!(
        binding_subject(&objects, "mine.csi.example.com-csi-resizer-binding"),
        "mine-controller-sa"
    );

    // No controller pod: still valid, the snapshotter needs none.
    object["spec"]
        .as_object_mut()
        .unwrap()
        .remove("driverControllerTemplate");
    object["spec"]["sidecars"] = json!({"snapshotter": true});
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
    let objects = build_operands(&cd, &DeclaredInputs::offline(Topology::SingleReplica));
    assert!(!objects.iter().any(|o| matches!(o, Operand::Deployment(_))));
    container(
        &daemon_set(&objects).spec.as_ref().unwrap().template,
        "csi-snapshotter",
    );
}

/// `storageCapacity: true` turns capacity tracking on wherever external-provisioner runs, with
/// the owner its workload gives and the Role upstream's RBAC has for it.
#[rstest]
#[case::central(false, "--capacity-ownerref-level=2", "mine-controller-sa")]
#[case::distributed(true, "--capacity-ownerref-level=1", "mine-node-sa")]
fn capacity_tracking_follows_the_provisioner(
    #[case] distributed: bool,
    #[case] level: &str,
    #[case] sa: &str,
) {
    let mut object = base();
    set(
        &mut object,
        "/spec/csiDriver",
        json!({"storageCapacity": true}),
    );
    if distributed {
        set(&mut object, "/spec/provisioning", json!("Distributed"));
        set(
            &mut object,
            "/spec/storageClassTemplates/0/volumeBindingMode",
            json!("WaitForFirstConsumer"),
        );
    }
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
    let objects = build_operands(&cd, &DeclaredInputs::offline(Topology::SingleReplica));
    let template = if distributed {
        &daemon_set(&objects).spec.as_ref().unwrap().template
    } else {
        &deployment(&objects).spec.as_ref().unwrap().template
    };
    let provisioner = container(template, "csi-provisioner");
    let args = provisioner.args.clone().unwrap();
    assert!(args.contains(&"--enable-capacity".to_owned()), "{args:?}");
    assert!(args.contains(&level.to_owned()), "{args:?}");
    let env: Vec<String> = provisioner
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .collect();
    assert!(env.contains(&"POD_NAME".to_owned()) && env.contains(&"NAMESPACE".to_owned()));

    let role = objects
        .iter()
        .find_map(|o| match o {
            Operand::Role(r)
                if r.metadata.name.as_deref() == Some("mine-csi-provisioner-capacity") =>
            {
                Some(r)
            }
            _ => None,
        })
        .expect("the capacity Role");
    let resources: Vec<String> = role
        .rules
        .iter()
        .flatten()
        .flat_map(|r| r.resources.clone().unwrap_or_default())
        .collect();
    assert!(resources.contains(&"csistoragecapacities".to_owned()));
    assert!(resources.contains(&"pods".to_owned()));
    assert_eq!(resources.contains(&"replicasets".to_owned()), !distributed);
    let binding = objects
        .iter()
        .find_map(|o| match o {
            Operand::RoleBinding(b)
                if b.metadata.name.as_deref() == Some("mine-csi-provisioner-capacity") =>
            {
                Some(b)
            }
            _ => None,
        })
        .expect("the capacity RoleBinding");
    assert_eq!(binding.subjects.clone().unwrap()[0].name, sa);
    assert_eq!(
        binding.metadata.owner_references, role.metadata.owner_references,
        "owned like the other namespaced operands"
    );
}

/// Without `storageCapacity` nothing of capacity tracking is rendered.
#[test]
fn no_capacity_tracking_unless_asked() {
    let cd: CSIDriverDeployment = serde_json::from_value(base()).unwrap();
    let objects = build_operands(&cd, &DeclaredInputs::offline(Topology::SingleReplica));
    let provisioner = container(
        &deployment(&objects).spec.as_ref().unwrap().template,
        "csi-provisioner",
    );
    assert!(
        !provisioner
            .args
            .iter()
            .flatten()
            .any(|a| a.contains("capacity"))
    );
    assert!(!objects.iter().any(|o| o.name().contains("capacity")));
}

/// VolumeSnapshotClasses: only once their CRD is served; `driver` is the driver, the template's
/// labels and annotations kept, the owner labels added, and only `default` decides the default
/// annotation.
#[test]
fn snapshot_classes_wait_for_their_api_and_carry_the_owner_labels() {
    let mut object = base();
    set(&mut object, "/spec/sidecars", json!({"snapshotter": true}));
    set(
        &mut object,
        "/spec/volumeSnapshotClassTemplates",
        json!([
            {
                "metadata": {
                    "name": "snap",
                    "labels": {"team": "storage"},
                    "annotations": {
                        "note": "kept",
                        "snapshot.storage.kubernetes.io/is-default-class": "true",
                    },
                },
                "parameters": {"p": "v"},
            },
            {"metadata": {"name": "snap-retain"}, "default": true, "deletionPolicy": "Retain"},
        ]),
    );
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    assert_eq!(validate(&cd, &ClusterFacts::default()), vec![]);
    let mut inputs = DeclaredInputs::offline(Topology::SingleReplica);
    inputs.snapshot_classes = false;
    assert!(
        !build_operands(&cd, &inputs)
            .iter()
            .any(|o| matches!(o, Operand::Dynamic(_)))
    );

    inputs.snapshot_classes = true;
    let classes: Vec<Value> = build_operands(&cd, &inputs)
        .into_iter()
        .filter_map(|o| match o {
            Operand::Dynamic(v) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(
        classes[0],
        json!({
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshotClass",
            "metadata": {
                "name": "snap",
                "labels": {
                    "team": "storage",
                    "csi.storage.openshift.io/driver": "mine.csi.example.com",
                    "csidriver.storage.openshift.io/owner-namespace": "csi",
                    "csidriver.storage.openshift.io/owner-name": "mine",
                },
                "annotations": {"note": "kept"},
            },
            "driver": "mine.csi.example.com",
            "deletionPolicy": "Delete",
            "parameters": {"p": "v"},
        })
    );
    assert_eq!(classes[1]["deletionPolicy"], "Retain");
    assert_eq!(
        classes[1]["metadata"]["annotations"]["snapshot.storage.kubernetes.io/is-default-class"],
        "true"
    );
}

/// The sidecar images: `containerImages` first, then the process environment, then upstream.
#[test]
fn images_come_from_the_object_then_the_environment_then_upstream() {
    let mut object = base();
    set(
        &mut object,
        "/spec/sidecars",
        json!({"resizer": true, "snapshotter": true}),
    );
    set(
        &mut object,
        "/spec/containerImages",
        json!({"attacherImage": "mine/attacher"}),
    );
    let cd: CSIDriverDeployment = serde_json::from_value(object).unwrap();
    let mut inputs = DeclaredInputs::offline(Topology::SingleReplica);
    inputs.env = [
        ("ATTACHER_IMAGE", "env/attacher"),
        ("PROVISIONER_IMAGE", "env/provisioner"),
        ("RESIZER_IMAGE", "env/resizer"),
        ("SNAPSHOTTER_IMAGE", "env/snapshotter"),
        ("NODE_DRIVER_REGISTRAR_IMAGE", "env/registrar"),
        ("LIVENESS_PROBE_IMAGE", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let objects = build_operands(&cd, &inputs);
    let controller = &deployment(&objects).spec.as_ref().unwrap().template;
    let node = &daemon_set(&objects).spec.as_ref().unwrap().template;
    let image = |t, name| container(t, name).image.clone().unwrap();
    assert_eq!(image(controller, "csi-attacher"), "mine/attacher");
    assert_eq!(image(controller, "csi-provisioner"), "env/provisioner");
    assert_eq!(image(controller, "csi-resizer"), "env/resizer");
    assert_eq!(image(controller, "csi-snapshotter"), "env/snapshotter");
    assert_eq!(image(node, "csi-node-driver-registrar"), "env/registrar");
    // Empty is unset.
    assert_eq!(
        image(node, "csi-liveness-probe"),
        csi_driver_deployment::build::LIVENESS_PROBE_IMAGE
    );
}
