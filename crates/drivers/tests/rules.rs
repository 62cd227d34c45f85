#![allow(clippy::unwrap_used)]
//! The pure rules of the kit, exercised through the GCP PD table: topology placement, log
//! level, images, cluster ID, proxy, CA bundle, input hashes, default StorageClass,
//! storageClassState, KMS key, optional CRDs.

use std::collections::BTreeMap;

use api::config_v1::{ProxyStatus, TopologyMode};
use api::operator_v1::{
    CSIDriverConfigSpec, CSIDriverType, GCPCSIDriverConfigSpec, GCPKMSKeyReference, LogLevel,
    StorageClassStateName,
};
use csi_kit::hash::{HashedKind, annotation_key};
use csi_kit::{DriverDef, ExistingStorageClass, Inputs, OptionalCrds, Topology};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use rstest::rstest;
use serde_json::Value;

const NS: &str = "openshift-cluster-csi-drivers";

fn gcp_pd() -> DriverDef {
    drivers::by_name("gcp-pd").unwrap()
}

fn inputs(def: &DriverDef, topology: Topology) -> Inputs {
    Inputs::new(def, topology, &BTreeMap::new())
}

fn pod(d: &Deployment) -> &PodSpec {
    d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn ds_pod(d: &DaemonSet) -> &PodSpec {
    d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn container<'a>(spec: &'a PodSpec, name: &str) -> &'a Container {
    spec.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn args(c: &Container) -> &[String] {
    c.args.as_deref().unwrap_or_default()
}

fn env_names(c: &Container) -> Vec<&str> {
    c.env.iter().flatten().map(|e| e.name.as_str()).collect()
}

fn kinds(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Catalogue

#[rstest]
#[case("gcp-pd")]
#[case("pd.csi.storage.gke.io")]
fn by_name_accepts_the_short_and_the_csi_name(#[case] name: &str) {
    let def = drivers::by_name(name).unwrap();
    assert_eq!(def.name, "pd.csi.storage.gke.io");
    assert_eq!(def.condition_prefix, "GCPPD");
    assert_eq!(def.namespace, NS);
    assert!(!def.removable);
    assert_eq!(def.hooks.deployment.len(), 2);
    assert_eq!(def.hooks.storage_class.len(), 1);
}

#[test]
fn an_unknown_driver_is_an_error_naming_the_known_ones() {
    let err = drivers::by_name("ebs").unwrap_err().to_string();
    assert!(err.contains("\"ebs\"") && err.contains("gcp-pd"), "{err}");
}

#[test]
fn the_table_is_data_a_json_round_trip_renders_the_same() {
    let def = gcp_pd();
    let json = serde_json::to_string(&def).unwrap();
    let mut back: DriverDef = serde_json::from_str(&json).unwrap();
    back.hooks = def.hooks.clone();
    let i = Inputs::offline(&def, Topology::HighlyAvailable, &BTreeMap::new());
    assert_eq!(csi_kit::render(&def, &i), csi_kit::render(&back, &i));
}

#[test]
fn a_table_with_an_unknown_field_is_refused() {
    let def = gcp_pd();
    let mut json = serde_json::to_value(&def).unwrap();
    json["replicaCount"] = 3.into();
    assert!(serde_json::from_value::<DriverDef>(json).is_err());
}

// ---------------------------------------------------------------------------------------------
// Topology

#[rstest]
#[case::ha(Topology::HighlyAvailable, 2, Some("node-role.kubernetes.io/master"))]
#[case::sno(Topology::SingleReplica, 1, Some("node-role.kubernetes.io/master"))]
#[case::hypershift(Topology::External, 1, None)]
#[case::k8s(Topology::Kubernetes { control_plane_nodes: true }, 1, Some("node-role.kubernetes.io/control-plane"))]
#[case::k8s_no_cp(Topology::Kubernetes { control_plane_nodes: false }, 1, None)]
fn topology_decides_replicas_and_placement(
    #[case] topology: Topology,
    #[case] replicas: i32,
    #[case] node_label: Option<&str>,
) {
    let def = gcp_pd();
    let d = csi_kit::build_controller_deployment(&def, &inputs(&def, topology));
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(replicas));
    let strategy = spec
        .strategy
        .as_ref()
        .unwrap()
        .rolling_update
        .as_ref()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&strategy.max_surge).unwrap(),
        0,
        "a rollout never needs an extra node"
    );
    let pod = pod(&d);
    let selector: Option<Vec<String>> = pod
        .node_selector
        .as_ref()
        .map(|s| s.keys().cloned().collect());
    assert_eq!(selector, node_label.map(|l| vec![l.to_owned()]));
    if let Some(label) = node_label {
        assert_eq!(pod.node_selector.as_ref().unwrap()[label], "");
        assert!(
            pod.tolerations
                .iter()
                .flatten()
                .any(|t| t.key.as_deref() == Some(label)
                    && t.effect.as_deref() == Some("NoSchedule")),
            "tolerates the control-plane taint it selects"
        );
    }
    let anti = pod
        .affinity
        .as_ref()
        .unwrap()
        .pod_anti_affinity
        .as_ref()
        .unwrap();
    let term = &anti
        .preferred_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()[0];
    assert_eq!(term.weight, 100);
    assert_eq!(
        term.pod_affinity_term.topology_key,
        "kubernetes.io/hostname"
    );
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
}

#[rstest]
#[case(TopologyMode::HighlyAvailable, Topology::HighlyAvailable)]
#[case(TopologyMode::SingleReplica, Topology::SingleReplica)]
#[case(TopologyMode::External, Topology::External)]
#[case(TopologyMode::HighlyAvailableArbiter, Topology::SingleReplica)]
#[case(TopologyMode::DualReplica, Topology::SingleReplica)]
#[case(TopologyMode::Other("Future".into()), Topology::SingleReplica)]
fn openshift_topology_modes_map_as_library_go_does(
    #[case] mode: TopologyMode,
    #[case] want: Topology,
) {
    assert_eq!(Topology::from_openshift(&mode), want);
}

#[test]
fn topology_names_round_trip_and_unknown_ones_are_refused() {
    for t in Topology::ALL {
        assert_eq!(t.as_str().parse::<Topology>().unwrap(), t);
    }
    assert_eq!(
        "kubernetes".parse::<Topology>().unwrap(),
        Topology::Kubernetes {
            control_plane_nodes: true
        }
    );
    assert!(
        "Dual"
            .parse::<Topology>()
            .unwrap_err()
            .to_string()
            .contains("Dual")
    );
}

#[rstest]
fn every_container_has_requests_and_sidecars_elect_with_openshift_timings(
    #[values(
        Topology::HighlyAvailable,
        Topology::SingleReplica,
        Topology::External,
        Topology::Kubernetes { control_plane_nodes: true },
        Topology::Kubernetes { control_plane_nodes: false }
    )]
    topology: Topology,
) {
    let def = gcp_pd();
    let i = inputs(&def, topology);
    let d = csi_kit::build_controller_deployment(&def, &i);
    let n = csi_kit::build_node_daemon_set(&def, &i);
    for c in pod(&d).containers.iter().chain(&ds_pod(&n).containers) {
        let requests = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .unwrap();
        assert!(
            requests.contains_key("cpu") && requests.contains_key("memory"),
            "{}",
            c.name
        );
    }
    let sidecars = [
        "csi-provisioner",
        "csi-attacher",
        "csi-resizer",
        "csi-snapshotter",
    ];
    for name in sidecars {
        let a = args(container(pod(&d), name));
        for want in [
            "--leader-election",
            "--leader-election-lease-duration=137s",
            "--leader-election-renew-deadline=107s",
            "--leader-election-retry-period=26s",
            "--leader-election-namespace=openshift-cluster-csi-drivers",
            "--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock",
        ] {
            assert!(a.contains(&want.to_owned()), "{name} lacks {want}");
        }
    }
    // One kube-rbac-proxy per metrics endpoint, and the socket on an emptyDir.
    let proxies: Vec<_> = pod(&d)
        .containers
        .iter()
        .filter(|c| c.name.contains("kube-rbac-proxy"))
        .collect();
    assert_eq!(proxies.len(), 4);
    let socket = pod(&d)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "socket-dir")
        .unwrap();
    assert!(socket.empty_dir.is_some());
}

#[test]
fn node_daemon_set_tolerates_everything_and_rolls_10_percent() {
    let def = gcp_pd();
    let n = csi_kit::build_node_daemon_set(&def, &inputs(&def, Topology::HighlyAvailable));
    let spec = n.spec.as_ref().unwrap();
    let rolling = spec
        .update_strategy
        .as_ref()
        .unwrap()
        .rolling_update
        .as_ref()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&rolling.max_unavailable).unwrap(),
        "10%"
    );
    let pod = ds_pod(&n);
    let tolerations = pod.tolerations.as_ref().unwrap();
    assert_eq!(tolerations.len(), 1);
    assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
    assert_eq!(tolerations[0].key, None);
    let driver = container(pod, "csi-driver");
    let kubelet = driver
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "kubelet-dir")
        .unwrap();
    assert_eq!(kubelet.mount_propagation.as_deref(), Some("Bidirectional"));
    assert_eq!(
        driver.security_context.as_ref().unwrap().privileged,
        Some(true)
    );
    let registrar = container(pod, "csi-node-driver-registrar");
    assert!(
        args(registrar).contains(
            &"--kubelet-registration-path=/var/lib/kubelet/plugins/pd.csi.storage.gke.io/csi.sock"
                .to_owned()
        )
    );
}

// ---------------------------------------------------------------------------------------------
// Log level, images, cluster ID

#[rstest]
#[case(None, 2)]
#[case(Some(LogLevel::Empty), 2)]
#[case(Some(LogLevel::Normal), 2)]
#[case(Some(LogLevel::Debug), 4)]
#[case(Some(LogLevel::Trace), 6)]
#[case(Some(LogLevel::TraceAll), 8)]
fn log_level_sets_v_on_every_csi_container(#[case] level: Option<LogLevel>, #[case] v: u8) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.spec.operator.log_level = level;
    let want = format!("--v={v}");
    let d = csi_kit::build_controller_deployment(&def, &i);
    let n = csi_kit::build_node_daemon_set(&def, &i);
    let mut checked = 0;
    for c in pod(&d).containers.iter().chain(&ds_pod(&n).containers) {
        let vs: Vec<_> = args(c).iter().filter(|a| a.starts_with("--v=")).collect();
        if c.name.contains("kube-rbac-proxy") {
            assert!(vs.is_empty(), "{} is not a klog binary", c.name);
        } else {
            assert_eq!(vs, vec![&want], "{}", c.name);
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        6 + 3,
        "driver, 4 sidecars, livenessprobe; driver, registrar, livenessprobe"
    );
}

#[rstest]
#[case::unset(None, "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0")]
#[case::empty(Some(""), "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0")]
#[case::set(
    Some("quay.io/openshift/origin-csi-external-provisioner:4.21"),
    "quay.io/openshift/origin-csi-external-provisioner:4.21"
)]
fn images_come_from_env_with_upstream_defaults(#[case] env: Option<&str>, #[case] want: &str) {
    let def = gcp_pd();
    let mut vars = BTreeMap::from([("DRIVER_IMAGE".to_owned(), "example.com/pd:1".to_owned())]);
    if let Some(v) = env {
        vars.insert("PROVISIONER_IMAGE".to_owned(), v.to_owned());
    }
    let i = Inputs::new(&def, Topology::HighlyAvailable, &vars);
    let d = csi_kit::build_controller_deployment(&def, &i);
    assert_eq!(
        container(pod(&d), "csi-provisioner").image.as_deref(),
        Some(want)
    );
    assert_eq!(
        container(pod(&d), "csi-driver").image.as_deref(),
        Some("example.com/pd:1")
    );
    let n = csi_kit::build_node_daemon_set(&def, &i);
    assert_eq!(
        container(ds_pod(&n), "csi-driver").image.as_deref(),
        Some("example.com/pd:1")
    );
    assert_eq!(
        container(ds_pod(&n), "csi-node-driver-registrar")
            .image
            .as_deref(),
        Some("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0")
    );
}

#[test]
fn every_image_has_its_openshift_env_var() {
    let i = &gcp_pd().images;
    let envs = [
        &i.driver.env,
        &i.provisioner.env,
        &i.attacher.env,
        &i.resizer.env,
        &i.snapshotter.env,
        &i.node_driver_registrar.env,
        &i.liveness_probe.env,
        &i.kube_rbac_proxy.env,
    ];
    assert_eq!(
        envs.map(String::as_str),
        [
            "DRIVER_IMAGE",
            "PROVISIONER_IMAGE",
            "ATTACHER_IMAGE",
            "RESIZER_IMAGE",
            "SNAPSHOTTER_IMAGE",
            "NODE_DRIVER_REGISTRAR_IMAGE",
            "LIVENESS_PROBE_IMAGE",
            "KUBE_RBAC_PROXY_IMAGE"
        ]
    );
}

#[rstest]
#[case(
    Some("mycluster-x7k2p"),
    Some("--extra-labels=kubernetes-io-cluster-mycluster-x7k2p=owned")
)]
#[case(Some(""), None)]
#[case(None, None)]
fn cluster_id_becomes_the_volume_label_argument(
    #[case] id: Option<&str>,
    #[case] want: Option<&str>,
) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.cluster_id = id.map(str::to_owned);
    let d = csi_kit::build_controller_deployment(&def, &i);
    let labels: Vec<_> = args(container(pod(&d), "csi-driver"))
        .iter()
        .filter(|a| a.starts_with("--extra-labels="))
        .map(String::as_str)
        .collect();
    assert_eq!(labels, want.into_iter().collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// Proxy, CA bundle, hashes

#[rstest]
#[case::all(Some("http://p:3128"), Some("https://p:3129"), Some(".cluster.local"), vec!["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"])]
#[case::empty_values_skipped(Some("http://p:3128"), Some(""), None, vec!["HTTP_PROXY"])]
#[case::none(None, None, None, vec![])]
fn proxy_env_goes_to_the_driver_containers_only(
    #[case] http: Option<&str>,
    #[case] https: Option<&str>,
    #[case] no: Option<&str>,
    #[case] want: Vec<&str>,
) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.proxy = ProxyStatus {
        http_proxy: http.map(str::to_owned),
        https_proxy: https.map(str::to_owned),
        no_proxy: no.map(str::to_owned),
    };
    let d = csi_kit::build_controller_deployment(&def, &i);
    let n = csi_kit::build_node_daemon_set(&def, &i);
    for spec in [pod(&d), ds_pod(&n)] {
        for c in &spec.containers {
            let proxy: Vec<_> = env_names(c)
                .into_iter()
                .filter(|e| e.ends_with("_PROXY"))
                .collect();
            if c.name == "csi-driver" {
                assert_eq!(proxy, want);
            } else {
                assert!(proxy.is_empty(), "{}", c.name);
            }
        }
    }
    let http_value = container(pod(&d), "csi-driver")
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "HTTP_PROXY")
        .and_then(|e| e.value.clone());
    assert_eq!(http_value.as_deref(), http);
}

/// A driver without the cluster proxy (`clusterProxy: false`, SMB) gets neither the proxy nor
/// the trusted CA bundle, even when the cluster has both: no annotations, no ConfigMap, no
/// proxy variables, no CA mount.
#[test]
fn a_driver_without_the_cluster_proxy_gets_neither_proxy_nor_ca_bundle() {
    let def = drivers::by_name("smb").unwrap();
    assert!(!def.cluster_proxy);
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.proxy = ProxyStatus {
        http_proxy: Some("http://p:3128".to_owned()),
        https_proxy: Some("https://p:3129".to_owned()),
        no_proxy: None,
    };
    i.trusted_ca_bundle = true;
    let d = csi_kit::build_controller_deployment(&def, &i);
    let n = csi_kit::build_node_daemon_set(&def, &i);
    assert_eq!(d.metadata.annotations, None);
    assert_eq!(n.metadata.annotations, None);
    for spec in [pod(&d), ds_pod(&n)] {
        for c in &spec.containers {
            assert!(
                env_names(c).iter().all(|e| !e.ends_with("_PROXY")),
                "{}",
                c.name
            );
            assert!(
                c.volume_mounts
                    .iter()
                    .flatten()
                    .all(|m| m.name != "non-standard-root-system-trust-ca-bundle"),
                "{}",
                c.name
            );
        }
    }
    let rendered = csi_kit::render(&def, &i);
    assert!(
        rendered
            .iter()
            .all(|o| o["metadata"]["name"] != "smb-csi-driver-trusted-ca-bundle"),
        "no trusted CA bundle ConfigMap"
    );
    // The same inputs give GCP PD's driver both.
    let gcp = gcp_pd();
    let d = csi_kit::build_controller_deployment(&gcp, &i);
    assert!(env_names(container(pod(&d), "csi-driver")).contains(&"HTTPS_PROXY"));
}

#[rstest]
#[case(false)]
#[case(true)]
fn trusted_ca_bundle_is_mounted_only_when_it_has_the_key(#[case] has_key: bool) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.trusted_ca_bundle = has_key;
    i.config_map_hashes.insert(
        "gcp-pd-csi-driver-trusted-ca-bundle".to_owned(),
        "QUJDRA==".to_owned(),
    );
    let key = annotation_key(
        NS,
        "gcp-pd-csi-driver-trusted-ca-bundle",
        HashedKind::ConfigMap,
    );
    let d = csi_kit::build_controller_deployment(&def, &i);
    let n = csi_kit::build_node_daemon_set(&def, &i);
    for (spec, template_annotations) in [
        (
            pod(&d),
            d.spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .as_ref()
                .unwrap()
                .annotations
                .clone(),
        ),
        (
            ds_pod(&n),
            n.spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .as_ref()
                .unwrap()
                .annotations
                .clone(),
        ),
    ] {
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "non-standard-root-system-trust-ca-bundle");
        assert_eq!(volume.is_some(), has_key);
        if let Some(v) = volume {
            let cm = v.config_map.as_ref().unwrap();
            assert_eq!(cm.name, "gcp-pd-csi-driver-trusted-ca-bundle");
            let item = &cm.items.as_ref().unwrap()[0];
            assert_eq!(
                (item.key.as_str(), item.path.as_str()),
                ("ca-bundle.crt", "tls-ca-bundle.pem")
            );
        }
        for c in &spec.containers {
            let mounted = c.volume_mounts.iter().flatten().any(|m| {
                m.name == "non-standard-root-system-trust-ca-bundle"
                    && m.mount_path == "/etc/pki/ca-trust/extracted/pem"
                    && m.read_only == Some(true)
            });
            assert_eq!(mounted, has_key && c.name == "csi-driver", "{}", c.name);
        }
        let hashed = template_annotations.unwrap_or_default().get(&key).cloned();
        assert_eq!(
            hashed,
            has_key.then(|| "QUJDRA==".to_owned()),
            "the CA hash rolls pods only when mounted"
        );
    }
}

#[rstest]
#[case::known("gcp-pd-cloud-credentials", true)]
#[case::metrics_cert("gcp-pd-csi-driver-controller-metrics-serving-cert", true)]
#[case::not_mounted("some-other-secret", false)]
fn a_mounted_secret_hash_is_on_the_deployment_and_its_pods(
    #[case] secret: &str,
    #[case] annotated: bool,
) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.secret_hashes
        .insert(secret.to_owned(), "v1hash==".to_owned());
    let key = annotation_key(NS, secret, HashedKind::Secret);
    let d = csi_kit::build_controller_deployment(&def, &i);
    let on_pods = d
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()
        .get(&key);
    let on_deployment = d.metadata.annotations.as_ref().unwrap().get(&key);
    assert_eq!(on_pods.is_some(), annotated);
    assert_eq!(on_deployment.is_some(), annotated);
    // The node pods do not mount the credentials: no restart there on rotation.
    let n = csi_kit::build_node_daemon_set(&def, &i);
    let node_annotations = n
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .clone()
        .unwrap();
    assert!(!node_annotations.contains_key(&key));
}

#[test]
fn rotating_the_credentials_changes_the_pod_template() {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.secret_hashes
        .insert("gcp-pd-cloud-credentials".to_owned(), "aaaa".to_owned());
    let before = csi_kit::build_controller_deployment(&def, &i);
    i.secret_hashes
        .insert("gcp-pd-cloud-credentials".to_owned(), "bbbb".to_owned());
    let after = csi_kit::build_controller_deployment(&def, &i);
    assert_ne!(
        before.spec.as_ref().unwrap().template,
        after.spec.as_ref().unwrap().template
    );
    assert_eq!(
        before.spec.as_ref().unwrap().selector,
        after.spec.as_ref().unwrap().selector
    );
}

/// The hash annotations of a pod template.
fn template_hashes(template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Vec<String> {
    template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .filter(|k| k.starts_with(csi_kit::hash::HASH_ANNOTATION_PREFIX))
        .collect()
}

#[rstest]
#[case::left_to_the_kubelet(false, 0)]
#[case::rolling(true, 2)]
fn a_volume_that_does_not_roll_on_change_puts_no_hash_on_the_pods(
    #[case] roll: bool,
    #[case] hashes: usize,
) {
    // Manila's clouds.yaml and CA bundle mounts (both pods): files the kubelet refreshes.
    let mut def = drivers::by_name("openstack-manila").unwrap();
    for volume in def
        .controller
        .driver
        .volumes
        .iter_mut()
        .chain(def.node.driver.volumes.iter_mut())
        .filter(|v| v.name == "cloud-credentials" || v.name == "cacert")
    {
        assert!(!volume.roll_on_change, "{} rolls", volume.name);
        volume.roll_on_change = roll;
    }
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.secret_hashes
        .insert("manila-cloud-credentials".to_owned(), "aaaa".to_owned());
    i.config_map_hashes
        .insert("cloud-provider-config".to_owned(), "bbbb".to_owned());
    let controller = csi_kit::build_controller_deployment(&def, &i);
    let node = csi_kit::build_node_daemon_set(&def, &i);
    assert_eq!(
        template_hashes(&controller.spec.unwrap().template).len(),
        hashes
    );
    assert_eq!(template_hashes(&node.spec.unwrap().template).len(), hashes);
}

#[rstest]
#[case::bad_controller_name(|d: &mut DriverDef| d.controller.name = Some("Controller_1".into()), "controller.name \"Controller_1\" is not a valid object name")]
#[case::bad_node_name(|d: &mut DriverDef| d.node.name = Some("-node".into()), "node.name \"-node\" is not a valid object name")]
#[case::same_names(|d: &mut DriverDef| { d.controller.name = Some("plugin".into()); d.node.name = Some("plugin".into()); }, "controller.name and node.name are the same")]
#[case::empty_label(|d: &mut DriverDef| { d.node.selector.insert("app".into(), String::new()); }, "node.selector has an empty label key or value")]
#[case::shared_selector_with_node_metrics(|d: &mut DriverDef| {
    let labels: BTreeMap<String, String> = [("app".to_owned(), "x".to_owned())].into();
    d.controller.selector = labels.clone();
    d.node.selector = labels;
    d.node.driver.metrics =
        serde_json::from_value(serde_json::json!({"localPort": 8301, "exposedPort": 9301}))
            .unwrap();
}, "node.driver.metrics needs node pods and controller pods that no one selector matches both of")]
#[case::roll_on_a_host_path(|d: &mut DriverDef| {
    let v = d.node.driver.volumes.iter_mut().find(|v| v.name == "device-dir").unwrap();
    v.roll_on_change = false;
}, "node volume device-dir has rollOnChange false but is no Secret or ConfigMap")]
fn workload_names_and_selectors_are_checked(
    #[case] change: fn(&mut DriverDef),
    #[case] want: &str,
) {
    let mut def = gcp_pd();
    change(&mut def);
    let error = def.validate().unwrap_err();
    assert!(error.problems.iter().any(|p| p.contains(want)), "{error}");
}

#[test]
fn workloads_are_named_and_selected_by_the_table_or_by_the_prefix() {
    // GCP PD: `<objectPrefix>-controller` / `-node`, selected by `app`.
    let def = gcp_pd();
    let i = inputs(&def, Topology::HighlyAvailable);
    let d = csi_kit::build_controller_deployment(&def, &i);
    assert_eq!(
        d.metadata.name.as_deref(),
        Some("gcp-pd-csi-driver-controller")
    );
    let app = BTreeMap::from([("app".to_owned(), "gcp-pd-csi-driver-controller".to_owned())]);
    assert_eq!(d.spec.unwrap().selector.match_labels.unwrap(), app);
    // Manila: its own names; the Deployment, its pods, the PDB, the metrics Service and the
    // anti-affinity all use the table's selector.
    let def = drivers::by_name("openstack-manila").unwrap();
    let i = inputs(&def, Topology::HighlyAvailable);
    let selector = def.controller.selector.clone();
    let d = csi_kit::build_controller_deployment(&def, &i);
    assert_eq!(
        d.metadata.name.as_deref(),
        Some("openstack-manila-csi-controllerplugin")
    );
    let spec = d.spec.unwrap();
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&selector));
    let pod_labels = spec.template.metadata.unwrap().labels.unwrap();
    assert!(selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
    let anti = spec
        .template
        .spec
        .unwrap()
        .affinity
        .unwrap()
        .pod_anti_affinity
        .unwrap();
    let term = &anti
        .preferred_during_scheduling_ignored_during_execution
        .unwrap()[0];
    assert_eq!(
        term.pod_affinity_term
            .label_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref(),
        Some(&selector)
    );
    let pdb = csi_kit::build_pod_disruption_budget(&def);
    assert_eq!(
        pdb.metadata.name.as_deref(),
        Some("openstack-manila-csi-controllerplugin-pdb")
    );
    assert_eq!(
        pdb.spec.unwrap().selector.unwrap().match_labels,
        Some(selector.clone())
    );
    let service = csi_kit::build_metrics_service(&def, &i).unwrap();
    assert_eq!(service.spec.unwrap().selector, Some(selector));
    let ds = csi_kit::build_node_daemon_set(&def, &i);
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("openstack-manila-csi-nodeplugin")
    );
    assert_eq!(
        ds.spec.unwrap().selector.match_labels,
        Some(def.node.selector.clone())
    );
}

// ---------------------------------------------------------------------------------------------
// StorageClasses

fn sc(name: &str, default: Option<&str>) -> ExistingStorageClass {
    ExistingStorageClass {
        name: name.to_owned(),
        default_annotation: default.map(str::to_owned),
    }
}

#[rstest]
#[case::empty_cluster(vec![], "true")]
#[case::other_default(vec![sc("gp3", Some("true"))], "false")]
#[case::other_not_default(vec![sc("gp3", Some("false"))], "true")]
#[case::other_without_annotation(vec![sc("gp3", None)], "true")]
#[case::admin_unset_ours(vec![sc("standard-csi", Some("false"))], "false")]
#[case::admin_emptied_ours(vec![sc("standard-csi", Some(""))], "")]
#[case::admin_choice_wins_over_other_default(vec![sc("standard-csi", Some("true")), sc("gp3", Some("true"))], "true")]
#[case::admin_removed_annotation_and_no_other_default(vec![sc("standard-csi", None)], "true")]
#[case::our_own_other_class_is_not_default(vec![sc("ssd-csi", None), sc("standard-csi", Some("true"))], "true")]
fn default_class_rule(#[case] existing: Vec<ExistingStorageClass>, #[case] want: &str) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.storage_classes = existing;
    let classes = csi_kit::build_storage_classes(&def, &i);
    let annotation = |name: &str| {
        classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap()
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| {
                a.get("storageclass.kubernetes.io/is-default-class")
                    .cloned()
            })
    };
    assert_eq!(annotation("standard-csi").as_deref(), Some(want));
    assert_eq!(
        annotation("ssd-csi"),
        None,
        "only one class is proposed as default"
    );
}

#[rstest]
#[case(None, 2)]
#[case(Some(StorageClassStateName::Empty), 2)]
#[case(Some(StorageClassStateName::Managed), 2)]
#[case(Some(StorageClassStateName::Unmanaged), 0)]
#[case(Some(StorageClassStateName::Removed), 0)]
fn storage_class_state_decides_whether_classes_are_desired(
    #[case] state: Option<StorageClassStateName>,
    #[case] count: usize,
) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.spec.storage_class_state = state.clone();
    assert_eq!(csi_kit::build_storage_classes(&def, &i).len(), count);
    let deleted = csi_kit::storage_classes_to_delete(&def, &i);
    if state == Some(StorageClassStateName::Removed) {
        assert_eq!(deleted, ["standard-csi", "ssd-csi"]);
    } else {
        assert!(
            deleted.is_empty(),
            "Managed applies, Unmanaged leaves alone"
        );
    }
    let rendered = kinds(&csi_kit::render(&def, &i));
    assert_eq!(
        rendered
            .iter()
            .filter(|k| k.starts_with("StorageClass/"))
            .count(),
        count
    );
}

#[rstest]
#[case::with_location(
    Some("us-east1"),
    "projects/my-project-1/locations/us-east1/keyRings/ring/cryptoKeys/key"
)]
#[case::global(
    None,
    "projects/my-project-1/locations/global/keyRings/ring/cryptoKeys/key"
)]
fn kms_key_becomes_a_parameter_of_every_class(#[case] location: Option<&str>, #[case] want: &str) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.spec.driver_config = Some(CSIDriverConfigSpec {
        driver_type: CSIDriverType::GCP,
        aws: None,
        azure: None,
        gcp: Some(GCPCSIDriverConfigSpec {
            kms_key: Some(GCPKMSKeyReference {
                name: "key".into(),
                key_ring: "ring".into(),
                project_id: "my-project-1".into(),
                location: location.map(str::to_owned),
            }),
        }),
        ibmcloud: None,
        vsphere: None,
        secrets_store: None,
    });
    for class in csi_kit::build_storage_classes(&def, &i) {
        let params = class.parameters.unwrap();
        assert_eq!(params["disk-encryption-kms-key"], want);
        assert_eq!(
            params["replication-type"], "none",
            "table parameters are kept"
        );
    }
}

#[test]
fn without_a_kms_key_there_is_no_kms_parameter() {
    let def = gcp_pd();
    for class in csi_kit::build_storage_classes(&def, &inputs(&def, Topology::HighlyAvailable)) {
        assert!(
            !class
                .parameters
                .unwrap()
                .contains_key("disk-encryption-kms-key")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// CSIDriver

#[rstest]
#[case(None, None)]
#[case(Some("restricted"), Some("restricted"))]
fn an_admins_ephemeral_profile_label_is_kept(
    #[case] admin: Option<&str>,
    #[case] want: Option<&str>,
) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.csi_driver_ephemeral_profile = admin.map(str::to_owned);
    let driver = csi_kit::build_csi_driver(&def, &i);
    let label = driver
        .metadata
        .labels
        .as_ref()
        .unwrap()
        .get("security.openshift.io/csi-ephemeral-volume-profile")
        .map(String::as_str);
    assert_eq!(label, want);
    let spec = driver.spec;
    assert_eq!(spec.attach_required, Some(true));
    assert_eq!(spec.fs_group_policy.as_deref(), Some("File"));
    assert_eq!(spec.se_linux_mount, Some(true));
    assert_eq!(
        spec.volume_lifecycle_modes,
        Some(vec!["Persistent".to_owned()])
    );
}

// ---------------------------------------------------------------------------------------------
// Optional CRDs

#[rstest]
fn optional_kinds_are_built_only_when_their_crd_exists(
    #[values(false, true)] vsc: bool,
    #[values(false, true)] monitor: bool,
    #[values(false, true)] credentials: bool,
) {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.crds = OptionalCrds {
        volume_snapshot_class: vsc,
        service_monitor: monitor,
        credentials_request: credentials,
    };
    let rendered = kinds(&csi_kit::render(&def, &i));
    let has = |k: &str| rendered.iter().any(|r| r == k);
    assert_eq!(has("VolumeSnapshotClass/csi-gce-pd-vsc"), vsc);
    assert_eq!(has("VolumeSnapshotClass/csi-gce-pd-vsc-images"), vsc);
    assert_eq!(
        has("ServiceMonitor/gcp-pd-csi-driver-controller-monitor"),
        monitor
    );
    assert_eq!(has("Role/gcp-pd-csi-driver-prometheus"), monitor);
    assert_eq!(has("RoleBinding/gcp-pd-csi-driver-prometheus"), monitor);
    assert_eq!(
        has("CredentialsRequest/openshift-gcp-pd-csi-driver-operator"),
        credentials
    );
    // The Service is what makes the service CA issue the proxies' certificate: always there.
    assert!(has("Service/gcp-pd-csi-driver-controller-metrics"));
}

#[test]
fn render_is_stable_and_has_no_duplicates() {
    let def = gcp_pd();
    let i = Inputs::offline(&def, Topology::HighlyAvailable, &BTreeMap::new());
    let first = kinds(&csi_kit::render(&def, &i));
    assert_eq!(first, kinds(&csi_kit::render(&def, &i)));
    let mut unique = first.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), first.len());
    assert_eq!(first.len(), 32);
}

#[test]
fn every_bound_cluster_role_exists() {
    for short in ["gcp-pd", "aws-ebs", "aws-efs", "azure-disk", "azure-file"] {
        let def = drivers::by_name(short).unwrap();
        let own: Vec<String> = csi_kit::build_cluster_roles(&def)
            .into_iter()
            .chain(csi_kit::build_shared_sidecar_cluster_roles())
            .map(|r| r.metadata.name.unwrap())
            .collect();
        for binding in csi_kit::build_cluster_role_bindings(&def) {
            assert!(
                own.contains(&binding.role_ref.name),
                "{short}: {} is not built",
                binding.role_ref.name
            );
        }
    }
    let def = gcp_pd();
    let i = Inputs::offline(&def, Topology::HighlyAvailable, &BTreeMap::new());
    let roles: Vec<String> = csi_kit::build_roles(&def, &i)
        .into_iter()
        .map(|r| r.metadata.name.unwrap())
        .collect();
    for binding in csi_kit::build_role_bindings(&def, &i) {
        assert!(roles.contains(&binding.role_ref.name));
    }
}

#[test]
fn plain_kubernetes_has_no_service_ca_so_proxies_self_sign() {
    let def = gcp_pd();
    let topology = Topology::Kubernetes {
        control_plane_nodes: true,
    };
    let mut i = inputs(&def, topology);
    i.crds.service_monitor = true;
    let d = csi_kit::build_controller_deployment(&def, &i);
    let proxy = container(pod(&d), "provisioner-kube-rbac-proxy");
    assert!(!args(proxy).iter().any(|a| a.starts_with("--tls-cert-file")));
    assert!(
        !pod(&d)
            .volumes
            .iter()
            .flatten()
            .any(|v| v.name == "metrics-serving-cert")
    );
    let monitor = csi_kit::build_service_monitor(&def, &i).unwrap();
    assert_eq!(
        monitor["spec"]["endpoints"][0]["tlsConfig"]["insecureSkipVerify"],
        true
    );
    let service = csi_kit::build_metrics_service(&def, &i).unwrap();
    assert!(service.metadata.annotations.is_none());
}

#[rstest]
#[case::openshift_waits_for_cco(Topology::HighlyAvailable, false, true)]
#[case::openshift_with_secret(Topology::SingleReplica, true, true)]
#[case::kubernetes_without_secret(Topology::Kubernetes { control_plane_nodes: true }, false, false)]
#[case::kubernetes_with_secret(Topology::Kubernetes { control_plane_nodes: false }, true, true)]
fn credentials_secret_is_mounted_unless_kubernetes_has_none(
    #[case] topology: Topology,
    #[case] secret_exists: bool,
    #[case] mounted: bool,
) {
    let def = gcp_pd();
    let mut i = inputs(&def, topology);
    if secret_exists {
        i.secret_hashes
            .insert("gcp-pd-cloud-credentials".to_owned(), "h".to_owned());
    }
    let d = csi_kit::build_controller_deployment(&def, &i);
    let has_volume = pod(&d)
        .volumes
        .iter()
        .flatten()
        .any(|v| v.name == "cloud-sa-volume");
    let driver = container(pod(&d), "csi-driver");
    let has_mount = driver
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.name == "cloud-sa-volume");
    let has_env = env_names(driver).contains(&"GOOGLE_APPLICATION_CREDENTIALS");
    assert_eq!(
        (has_volume, has_mount, has_env),
        (mounted, mounted, mounted)
    );
}

#[rstest]
#[case::labels_then_cluster(Some("c-1"), vec![("team", "storage"), ("env", "prod")], Some("--extra-labels=team=storage,env=prod,kubernetes-io-cluster-c-1=owned"))]
#[case::labels_only(None, vec![("team", "storage")], Some("--extra-labels=team=storage"))]
#[case::nothing(None, vec![], None)]
fn gcp_resource_labels_join_the_cluster_label(
    #[case] id: Option<&str>,
    #[case] labels: Vec<(&str, &str)>,
    #[case] want: Option<&str>,
) {
    use api::config_v1::{GCPPlatformStatus, PlatformStatus, ResourceTag};
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.cluster_id = id.map(str::to_owned);
    i.platform_status = Some(PlatformStatus {
        gcp: Some(GCPPlatformStatus {
            resource_labels: labels
                .iter()
                .map(|(k, v)| ResourceTag {
                    key: (*k).to_owned(),
                    value: (*v).to_owned(),
                })
                .collect(),
            ..GCPPlatformStatus::default()
        }),
        ..PlatformStatus::default()
    });
    assert_eq!(drivers::gcp_pd::extra_labels_arg(&i).as_deref(), want);
    let d = csi_kit::build_controller_deployment(&def, &i);
    let got: Vec<_> = args(container(pod(&d), "csi-driver"))
        .iter()
        .filter(|a| a.starts_with("--extra-labels="))
        .map(String::as_str)
        .collect();
    assert_eq!(got, want.into_iter().collect::<Vec<_>>());
}

#[rstest]
fn rendered_objects_are_complete_and_labelled(
    #[values(
        Topology::HighlyAvailable,
        Topology::SingleReplica,
        Topology::External,
        Topology::Kubernetes { control_plane_nodes: true },
        Topology::Kubernetes { control_plane_nodes: false }
    )]
    topology: Topology,
) {
    let def = gcp_pd();
    let i = Inputs::offline(&def, topology, &BTreeMap::new());
    for object in csi_kit::render(&def, &i) {
        let text = object.to_string();
        assert!(!text.contains("${"), "a placeholder leaked: {text}");
        let meta = &object["metadata"];
        let name = meta["name"].as_str().unwrap();
        assert!(!name.is_empty() && name.len() <= 253);
        if let Some(ns) = meta["namespace"].as_str() {
            let cco = object["kind"] == "CredentialsRequest"
                && ns == "openshift-cloud-credential-operator";
            assert!(ns == NS || cco, "{name} in {ns}");
        }
        let shared = name.starts_with("openshift-csi-");
        assert_eq!(
            meta["labels"]["csi.storage.openshift.io/driver"].as_str(),
            (!shared).then_some("gcp-pd"),
            "{name}"
        );
    }
}

#[rstest]
#[case::regular(Some("us-central1"), vec!["standard-csi", "ssd-csi"])]
#[case::no_platform_status(None, vec!["standard-csi", "ssd-csi"])]
#[case::dedicated(Some("u-germany-northeast1"), vec!["hyperdisk-balanced"])]
fn gcp_dedicated_regions_get_only_hyperdisk(#[case] region: Option<&str>, #[case] want: Vec<&str>) {
    use api::config_v1::{GCPPlatformStatus, PlatformStatus};
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.platform_status = region.map(|r| PlatformStatus {
        gcp: Some(GCPPlatformStatus {
            region: Some(r.to_owned()),
            ..GCPPlatformStatus::default()
        }),
        ..PlatformStatus::default()
    });
    let classes = csi_kit::build_storage_classes(&def, &i);
    let names: Vec<&str> = classes
        .iter()
        .map(|c| c.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, want);
    let defaults: Vec<&str> = classes
        .iter()
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
                == Some(&"true".to_owned())
        })
        .map(|c| c.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(defaults, want[..1], "exactly one default either way");
    i.spec.storage_class_state = Some(StorageClassStateName::Removed);
    assert_eq!(
        csi_kit::storage_classes_to_delete(&def, &i),
        want,
        "never deletes a class it would not create"
    );
}

#[test]
fn without_a_filter_two_default_classes_are_refused() {
    let mut def = gcp_pd();
    def.hooks.storage_class_filter = None;
    let err = def.validate().unwrap_err();
    assert_eq!(
        err.problems,
        ["more than one StorageClass is marked default"]
    );
}

#[test]
fn an_unknown_storage_class_state_is_reported_and_nothing_happens() {
    let def = gcp_pd();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    csi_kit::validate_storage_class_state(&i).unwrap();
    i.spec.storage_class_state = Some(StorageClassStateName::Other("Sometimes".into()));
    let err = csi_kit::validate_storage_class_state(&i).unwrap_err();
    assert!(err.contains("\"Sometimes\""), "{err}");
    assert!(csi_kit::build_storage_classes(&def, &i).is_empty());
    assert!(csi_kit::storage_classes_to_delete(&def, &i).is_empty());
}

/// `requiredScc: privileged` (AWS EFS): the controller's ServiceAccount is bound to the
/// driver's privileged role, not a host-network role, and every container but the metrics
/// proxies is privileged, the driver's root file system writable.
#[test]
fn a_privileged_controller_runs_as_openshift_runs_it() {
    let def = drivers::by_name("aws-efs").unwrap();
    assert!(def.controller.privileged);
    let roles: Vec<String> = csi_kit::build_cluster_roles(&def)
        .into_iter()
        .map(|r| r.metadata.name.unwrap())
        .collect();
    assert!(
        !roles.iter().any(|r| r.ends_with("hostnetwork-role")),
        "{roles:?}"
    );
    let binding = csi_kit::build_cluster_role_bindings(&def)
        .into_iter()
        .find(|b| b.metadata.name.as_deref() == Some("efs-controller-privileged-binding"))
        .expect("the controller's privileged binding");
    assert_eq!(binding.role_ref.name, "efs-privileged-role");
    assert_eq!(
        binding.subjects.unwrap()[0].name,
        "aws-efs-csi-driver-controller-sa"
    );

    let i = Inputs::offline(&def, Topology::HighlyAvailable, &BTreeMap::new());
    let d = csi_kit::build_controller_deployment(&def, &i);
    let spec = d.spec.unwrap().template.spec.unwrap();
    assert_eq!(spec.host_network, Some(true));
    for c in spec.containers {
        let sc = c.security_context.unwrap();
        let proxy = c.name.contains("kube-rbac-proxy");
        assert_eq!(sc.privileged, (!proxy).then_some(true), "{}", c.name);
        let writable = c.name == "csi-driver";
        assert_eq!(
            sc.read_only_root_filesystem,
            (!writable).then_some(true),
            "{}",
            c.name
        );
    }
}

#[rstest]
#[case::port_twice(|d: &mut DriverDef| {
    d.node.driver.metrics = Some(csi_kit::MetricsDef { local_port: 8206, exposed_port: 10304, service_port: None });
}, "node port 10304 is used twice")]
#[case::own_certificate_volume(|d: &mut DriverDef| {
    let mut v = d.node.driver.volumes[0].clone();
    v.name = "metrics-serving-cert".into();
    d.node.driver.volumes.push(v);
}, "node volume metrics-serving-cert is the kit's when node.driver.metrics is set")]
fn node_metrics_are_checked(#[case] change: fn(&mut DriverDef), #[case] want: &str) {
    // Azure Disk serves node metrics (8206 behind 9206); its registrar is on 10304.
    let mut def = drivers::by_name("azure-disk").unwrap();
    def.validate().unwrap();
    change(&mut def);
    let error = def.validate().unwrap_err();
    assert!(error.problems.iter().any(|p| p.contains(want)), "{error}");
}

#[test]
fn node_metrics_get_a_proxy_a_service_a_monitor_and_a_proxy_role() {
    let def = drivers::by_name("azure-disk").unwrap();
    let mut i = inputs(&def, Topology::HighlyAvailable);
    i.crds = OptionalCrds::all();
    let objects = csi_kit::render(&def, &i);
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .clone()
    };
    let service = find("Service", "azure-disk-csi-driver-node-metrics");
    assert_eq!(
        service["spec"]["selector"],
        serde_json::json!({"app": "azure-disk-csi-driver-node"})
    );
    assert_eq!(service["spec"]["ports"][0]["port"], 9206);
    assert_eq!(
        service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
        "azure-disk-csi-driver-node-metrics-serving-cert"
    );
    let monitor = find("ServiceMonitor", "azure-disk-csi-driver-node-monitor");
    assert_eq!(
        monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"],
        "azure-disk-csi-driver-node-metrics.openshift-cluster-csi-drivers.svc"
    );
    let binding = find(
        "ClusterRoleBinding",
        "azure-disk-node-kube-rbac-proxy-binding",
    );
    assert_eq!(
        binding["subjects"][0]["name"],
        "azure-disk-csi-driver-node-sa"
    );
    find("ClusterRole", "azure-disk-node-kube-rbac-proxy-role");
    // The proxy in the node pod serves 9206 from the driver's 8206 with the node certificate.
    let ds = csi_kit::build_node_daemon_set(&def, &i);
    let spec = ds_pod(&ds);
    let proxy = container(spec, "kube-rbac-proxy-8206");
    assert!(args(proxy).contains(&"--upstream=http://127.0.0.1:8206/".to_owned()));
    let cert = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "metrics-serving-cert")
        .unwrap();
    assert_eq!(
        cert.secret.as_ref().unwrap().secret_name.as_deref(),
        Some("azure-disk-csi-driver-node-metrics-serving-cert")
    );
    // GCP PD serves none: nothing of the kind.
    let gcp = gcp_pd();
    let objects = csi_kit::render(&gcp, &inputs(&gcp, Topology::HighlyAvailable));
    assert!(objects.iter().all(|o| {
        !o["metadata"]["name"]
            .as_str()
            .unwrap()
            .contains("node-metrics")
    }));
}

/// The node DaemonSet of GCP PD laid out as OpenShift's IBM assets lay theirs out.
fn gcp_pd_in_ibm_layout() -> DriverDef {
    let mut def = gcp_pd();
    let node: csi_kit::def::NodeDef = serde_json::from_value(serde_json::json!({
        "selector": {"app": "gcp-pd-csi-driver-controller"},
        "podLabels": {"policy": "allow"},
        "hostNetwork": true,
        "nodeSelector": {"kubernetes.io/arch": "ppc64le"},
        "volumeNames": {"socket-dir": "plugin-dir", "kubelet-dir": "kubelet-data-dir"},
        "containerNames": {"csi-liveness-probe": "liveness-probe"},
        "runAsRoot": true,
        "driver": {"args": [], "healthzPort": 9808, "privileged": true},
        "registrarHealthzPort": 10304,
        "registrar": {
            "fullArgs": ["--csi-address=$(ADDRESS)", "--kubelet-registration-path=$(REG)",
                         "--http-endpoint=:10304", "--v=${LOG_LEVEL}"],
            "env": [{"name": "ADDRESS", "value": "/csi/csi.sock"},
                    {"name": "REG", "value": "/var/lib/kubelet/plugins/x/csi.sock"},
                    {"name": "NODE", "fieldPath": "spec.nodeName"}],
            "requests": {"cpu": "5m", "memory": "20Mi"},
            "preStop": ["/bin/sh", "-c", "rm -rf /registration/x-reg.sock"],
        },
        "livenessProbe": {"fullArgs": ["--csi-address=/csi/csi.sock", "--v=${LOG_LEVEL}"]},
    }))
    .unwrap();
    def.node = node;
    def.validate().unwrap();
    def
}

#[test]
fn node_pods_may_share_the_controllers_selector_but_the_pdb_and_anti_affinity_do_not() {
    let def = gcp_pd_in_ibm_layout();
    let i = inputs(&def, Topology::HighlyAvailable);
    let ds = csi_kit::build_node_daemon_set(&def, &i);
    let labels = ds
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    assert_eq!(
        labels,
        BTreeMap::from([
            ("app".to_owned(), "gcp-pd-csi-driver-controller".to_owned()),
            ("policy".to_owned(), "allow".to_owned()),
        ])
    );
    // What counts the controller's pods only also asks for the label only a Deployment's pods
    // carry.
    let only_controller = serde_json::json!({
        "matchExpressions": [{"key": "pod-template-hash", "operator": "Exists"}],
        "matchLabels": {"app": "gcp-pd-csi-driver-controller"},
    });
    let pdb = csi_kit::build_pod_disruption_budget(&def);
    assert_eq!(
        serde_json::to_value(pdb.spec.unwrap().selector).unwrap(),
        only_controller
    );
    let d = csi_kit::build_controller_deployment(&def, &i);
    let affinity = pod(&d).affinity.clone().unwrap().pod_anti_affinity.unwrap();
    let term = &affinity
        .preferred_during_scheduling_ignored_during_execution
        .unwrap()[0];
    assert_eq!(
        serde_json::to_value(&term.pod_affinity_term.label_selector).unwrap(),
        only_controller
    );
    // The Deployment still selects by its labels alone (its selector is immutable).
    assert_eq!(
        serde_json::to_value(&d.spec.unwrap().selector).unwrap(),
        serde_json::json!({"matchLabels": {"app": "gcp-pd-csi-driver-controller"}})
    );
    // Without shared labels, the kit's selectors are the plain ones.
    let def = gcp_pd();
    let pdb = csi_kit::build_pod_disruption_budget(&def);
    assert_eq!(pdb.spec.unwrap().selector.unwrap().match_expressions, None);
}

#[test]
fn the_node_pod_follows_the_tables_layout() {
    let def = gcp_pd_in_ibm_layout();
    let i = inputs(&def, Topology::HighlyAvailable);
    let ds = csi_kit::build_node_daemon_set(&def, &i);
    let spec = ds_pod(&ds);
    assert_eq!(
        spec.node_selector,
        Some(BTreeMap::from([(
            "kubernetes.io/arch".to_owned(),
            "ppc64le".to_owned()
        )]))
    );
    let volumes: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert!(volumes.contains(&"plugin-dir") && volumes.contains(&"kubelet-data-dir"));
    assert!(!volumes.contains(&"socket-dir") && !volumes.contains(&"kubelet-dir"));
    for c in &spec.containers {
        for m in c.volume_mounts.iter().flatten() {
            assert!(
                volumes.contains(&m.name.as_str()),
                "{} mounts {}",
                c.name,
                m.name
            );
        }
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!((sc.run_as_user, sc.run_as_non_root), (Some(0), Some(false)));
    }

    let registrar = container(spec, "csi-node-driver-registrar");
    assert_eq!(
        args(registrar),
        [
            "--csi-address=$(ADDRESS)",
            "--kubelet-registration-path=$(REG)",
            "--http-endpoint=:10304",
            "--v=2"
        ]
    );
    assert_eq!(env_names(registrar), ["ADDRESS", "REG", "NODE"]);
    let node_env = &registrar.env.as_ref().unwrap()[2];
    assert_eq!(
        node_env
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "spec.nodeName"
    );
    let requests = registrar
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert_eq!(
        (requests["cpu"].0.as_str(), requests["memory"].0.as_str()),
        ("5m", "20Mi")
    );
    assert_eq!(
        registrar.security_context.as_ref().unwrap().privileged,
        Some(false)
    );
    // It listens on every address: the kubelet probes the pod's.
    let probe = registrar
        .liveness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(probe.host, None);
    assert_eq!(
        registrar
            .lifecycle
            .as_ref()
            .unwrap()
            .pre_stop
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap()
            .command,
        Some(vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "rm -rf /registration/x-reg.sock".to_owned()
        ])
    );

    let liveness = container(spec, "liveness-probe");
    assert_eq!(args(liveness), ["--csi-address=/csi/csi.sock", "--v=2"]);
    let driver = container(spec, "csi-driver");
    assert_eq!(driver.ports.as_ref().unwrap()[0].container_port, 9808);
    let probe = driver
        .liveness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(probe.host, None);
    assert_eq!(
        driver.security_context.as_ref().unwrap().privileged,
        Some(true)
    );

    // The kit's layout: on the host network, health endpoints and probes on loopback, every
    // Linux node.
    let def = gcp_pd();
    let ds = csi_kit::build_node_daemon_set(&def, &inputs(&def, Topology::HighlyAvailable));
    let spec = ds_pod(&ds);
    assert_eq!(
        spec.node_selector,
        Some(BTreeMap::from([(
            "kubernetes.io/os".to_owned(),
            "linux".to_owned()
        )]))
    );
    let registrar = container(spec, "csi-node-driver-registrar");
    let probe = registrar
        .liveness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(probe.host.as_deref(), Some("127.0.0.1"));
}

#[rstest]
#[case::pod_label_of_the_selector(|d: &mut DriverDef| { d.node.pod_labels.insert("app".into(), "y".into()); }, "node.podLabels sets app, a label of the node's selector")]
#[case::empty_pod_label(|d: &mut DriverDef| { d.node.pod_labels.insert("policy".into(), " ".into()); }, "node.podLabels has an empty label value")]
#[case::empty_node_selector_key(|d: &mut DriverDef| { d.node.node_selector = Some([(String::new(), "x".to_owned())].into()); }, "node.nodeSelector has an empty label key")]
#[case::unknown_volume(|d: &mut DriverDef| { d.node.volume_names.insert("device-dir".into(), "dev".into()); }, "node.volumeNames renames device-dir, not one of the kit's volumes")]
#[case::bad_volume_name(|d: &mut DriverDef| { d.node.volume_names.insert("socket-dir".into(), "Plugin_Dir".into()); }, "not a valid volume name")]
#[case::volume_name_taken(|d: &mut DriverDef| { d.node.volume_names.insert("socket-dir".into(), "device-dir".into()); }, "node volume name device-dir is used twice")]
#[case::unknown_container(|d: &mut DriverDef| { d.node.container_names.insert("csi-driver".into(), "driver".into()); }, "node.containerNames renames csi-driver, not one of the kit's sidecars")]
#[case::container_name_taken(|d: &mut DriverDef| { d.node.container_names.insert("csi-liveness-probe".into(), "csi-driver".into()); }, "node container name csi-driver is used twice")]
#[case::both_probe_args(|d: &mut DriverDef| { d.node.liveness_probe.full_args = vec!["--csi-address=/csi/csi.sock".into(), "--health-port=10300".into()]; d.node.liveness_probe_args = vec!["--probe-timeout=3s".into()]; }, "node.livenessProbe.fullArgs and node.livenessProbeArgs are both set")]
#[case::probe_port(|d: &mut DriverDef| { d.node.liveness_probe.full_args = vec!["--csi-address=/csi/csi.sock".into()]; }, "node.livenessProbe.fullArgs serve /healthz on 9808, not on")]
#[case::registrar_socket(|d: &mut DriverDef| { d.node.registrar.full_args = vec!["--http-endpoint=:10303".into()]; }, "node.registrar.fullArgs has no --csi-address=")]
#[case::registrar_port(|d: &mut DriverDef| { d.node.registrar.full_args = vec!["--csi-address=/csi/csi.sock".into(), "--kubelet-registration-path=/x".into()]; }, "node.registrar.fullArgs serve /healthz on no port")]
#[case::registrar_variable(|d: &mut DriverDef| { d.node.registrar.full_args = vec!["--csi-address=$(ADDRESS)".into(), "--kubelet-registration-path=/x".into(), format!("--http-endpoint=:{}", d.node.registrar_healthz_port)]; }, "node.registrar.fullArgs use $(ADDRESS), which node.registrar.env does not set")]
#[case::registrar_env_source(|d: &mut DriverDef| { d.node.registrar.env = vec![serde_json::from_value(serde_json::json!({"name": "ADDRESS"})).unwrap()]; }, "node.registrar.env ADDRESS needs exactly one of value, fieldPath and configMapKeyRef")]
#[case::empty_request(|d: &mut DriverDef| { d.node.liveness_probe.requests.cpu = Some(String::new()); }, "node.livenessProbe.requests.cpu is empty")]
#[case::probe_pre_stop(|d: &mut DriverDef| { d.node.liveness_probe.pre_stop = vec!["true".into()]; }, "node.livenessProbe.preStop is set")]
fn the_node_layout_is_checked(#[case] change: fn(&mut DriverDef), #[case] want: &str) {
    let mut def = gcp_pd();
    change(&mut def);
    let error = def.validate().unwrap_err();
    assert!(error.problems.iter().any(|p| p.contains(want)), "{error}");
}

// ---------------------------------------------------------------------------------------------
// A controller laid out as an OpenShift asset has it (IBM's operators' layout)

/// GCP PD's table with every layout field of the controller set, as IBM VPC Block's table
/// uses them.
fn gcp_pd_in_openshift_layout() -> DriverDef {
    let mut def = gcp_pd();
    let ctl = &mut def.controller;
    ctl.service_account_name = Some("gcp-pd-controller-sa".to_owned());
    ctl.placement = csi_kit::ControllerPlacement::AnyNode;
    ctl.explicitly_unprivileged = true;
    ctl.sidecar_socket_dir = Some("/csi".to_owned());
    ctl.container_names =
        BTreeMap::from([("csi-liveness-probe".to_owned(), "liveness-probe".to_owned())]);
    ctl.liveness_probe_args.clear();
    ctl.liveness_probe_full_args = vec![
        "--csi-address=/csi/csi.sock".to_owned(),
        format!("--health-port={}", ctl.driver.healthz_port),
        "--v=${LOG_LEVEL}".to_owned(),
    ];
    ctl.liveness_probe_requests = csi_kit::RequestsDef {
        cpu: Some("5m".to_owned()),
        memory: Some("10Mi".to_owned()),
    };
    ctl.driver.cpu_request = Some("50m".to_owned());
    let provisioner = ctl
        .sidecars
        .iter_mut()
        .find(|s| s.kind == csi_kit::SidecarKind::Provisioner)
        .unwrap();
    provisioner.extra_args.clear();
    provisioner.address_env = true;
    provisioner.full_args = [
        "--http-endpoint=localhost:8202",
        "--v=${LOG_LEVEL}",
        "--csi-address=$(ADDRESS)",
        "--leader-election",
        "--leader-election-lease-duration=${LEADER_ELECTION_LEASE_DURATION}",
        "--leader-election-renew-deadline=${LEADER_ELECTION_RENEW_DEADLINE}",
        "--leader-election-retry-period=${LEADER_ELECTION_RETRY_PERIOD}",
    ]
    .map(str::to_owned)
    .to_vec();
    provisioner.requests = csi_kit::RequestsDef {
        cpu: None,
        memory: Some("20Mi".to_owned()),
    };
    def.node.service_account_name = Some("gcp-pd-node-sa".to_owned());
    def
}

fn requests_of(c: &Container) -> Value {
    serde_json::to_value(&c.resources.as_ref().unwrap().requests).unwrap()
}

#[test]
fn a_controller_can_be_laid_out_as_openshifts_asset() {
    let def = gcp_pd_in_openshift_layout();
    def.validate().unwrap();
    let i = inputs(&def, Topology::HighlyAvailable);
    let d = csi_kit::build_controller_deployment(&def, &i);
    let spec = pod(&d);

    // The provisioner: the socket through ADDRESS in /csi, its arguments in the table's order
    // with the placeholders replaced, its own requests.
    let provisioner = container(spec, "csi-provisioner");
    assert_eq!(
        args(provisioner),
        [
            "--http-endpoint=localhost:8202",
            "--v=2",
            "--csi-address=$(ADDRESS)",
            "--leader-election",
            "--leader-election-lease-duration=137s",
            "--leader-election-renew-deadline=107s",
            "--leader-election-retry-period=26s",
        ]
    );
    assert_eq!(
        serde_json::to_value(&provisioner.env).unwrap(),
        serde_json::json!([{"name": "ADDRESS", "value": "/csi/csi.sock"}])
    );
    assert_eq!(
        provisioner.volume_mounts.as_ref().unwrap()[0].mount_path,
        "/csi"
    );
    assert_eq!(
        requests_of(provisioner),
        serde_json::json!({"cpu": "10m", "memory": "20Mi"})
    );
    // The other sidecars keep the kit's arguments, with the socket in /csi.
    let attacher = container(spec, "csi-attacher");
    assert_eq!(args(attacher)[0], "--csi-address=/csi/csi.sock");
    assert!(attacher.env.is_none());
    assert_eq!(
        attacher.volume_mounts.as_ref().unwrap()[0].mount_path,
        "/csi"
    );

    // The livenessprobe under OpenShift's name, arguments and requests.
    assert!(
        !spec
            .containers
            .iter()
            .any(|c| c.name == "csi-liveness-probe")
    );
    let probe = container(spec, "liveness-probe");
    assert_eq!(
        args(probe),
        [
            "--csi-address=/csi/csi.sock",
            &format!("--health-port={}", def.controller.driver.healthz_port),
            "--v=2",
        ]
    );
    assert_eq!(
        requests_of(probe),
        serde_json::json!({"cpu": "5m", "memory": "10Mi"})
    );
    assert_eq!(
        requests_of(container(spec, "csi-driver")),
        serde_json::json!({"cpu": "50m", "memory": "50Mi"})
    );

    // privileged: false and allowPrivilegeEscalation: false stated on the CSI containers,
    // not on the kube-rbac-proxies.
    for c in &spec.containers {
        let sc = c.security_context.as_ref().unwrap();
        if c.name.contains("kube-rbac-proxy") {
            assert_eq!((sc.privileged, sc.allow_privilege_escalation), (None, None));
        } else {
            assert_eq!(
                (sc.privileged, sc.allow_privilege_escalation),
                (Some(false), Some(false)),
                "{}",
                c.name
            );
        }
    }

    // Any node: no nodeSelector, no tolerations; still spread.
    assert_eq!(spec.node_selector, None);
    assert_eq!(spec.tolerations, None);
    assert!(spec.affinity.is_some());

    // The table's ServiceAccounts, in the pods and in every grant.
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("gcp-pd-controller-sa")
    );
    assert_eq!(
        ds_pod(&csi_kit::build_node_daemon_set(&def, &i))
            .service_account_name
            .as_deref(),
        Some("gcp-pd-node-sa")
    );
    let objects = csi_kit::render(&def, &i);
    let accounts: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(accounts.len(), 2, "{accounts:?}");
    assert!(accounts.contains(&"gcp-pd-controller-sa") && accounts.contains(&"gcp-pd-node-sa"));
    let subjects: Vec<&str> = objects
        .iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("RoleBinding" | "ClusterRoleBinding")
            )
        })
        .flat_map(|o| o["subjects"].as_array().unwrap())
        .filter(|s| s["kind"] == "ServiceAccount" && s["namespace"] == NS)
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(subjects.contains(&"gcp-pd-controller-sa"));
    assert!(subjects.contains(&"gcp-pd-node-sa"));
    assert!(
        subjects
            .iter()
            .all(|s| *s == "gcp-pd-controller-sa" || *s == "gcp-pd-node-sa"),
        "{subjects:?}"
    );
}

#[test]
fn without_layout_fields_the_controller_is_the_kits() {
    // GCP PD as csi-operator lays it out: control-plane nodes, the kit's socket and names.
    let def = gcp_pd();
    let d = csi_kit::build_controller_deployment(&def, &inputs(&def, Topology::HighlyAvailable));
    let spec = pod(&d);
    assert!(spec.node_selector.is_some() && spec.tolerations.is_some());
    let provisioner = container(spec, "csi-provisioner");
    assert_eq!(
        args(provisioner)[0],
        "--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock"
    );
    assert!(provisioner.env.is_none());
    let sc = provisioner.security_context.as_ref().unwrap();
    assert_eq!((sc.privileged, sc.allow_privilege_escalation), (None, None));
    container(spec, "csi-liveness-probe");
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("gcp-pd-csi-driver-controller-sa")
    );
}

#[rstest]
#[case::full_and_extra_args(|d: &mut DriverDef| {
    provisioner(d).extra_args = vec!["--timeout=1s".into()];
}, "controller.sidecars[provisioner] has both fullArgs and extraArgs")]
#[case::no_socket(|d: &mut DriverDef| {
    provisioner(d).full_args.retain(|a| !a.starts_with("--csi-address="));
}, "controller.sidecars[provisioner].fullArgs must pass --csi-address=$(ADDRESS) once")]
#[case::path_with_address_env(|d: &mut DriverDef| {
    for a in &mut provisioner(d).full_args {
        if a.starts_with("--csi-address=") {
            *a = "--csi-address=/csi/csi.sock".into();
        }
    }
}, "must pass --csi-address=$(ADDRESS) once (the driver's socket, through ADDRESS")]
#[case::wrong_socket_dir(|d: &mut DriverDef| {
    let p = provisioner(d);
    p.address_env = false;
    for a in &mut p.full_args {
        if a.starts_with("--csi-address=") {
            *a = "--csi-address=/var/lib/csi/sockets/pluginproxy/csi.sock".into();
        }
    }
}, "must pass --csi-address=/csi/csi.sock once (the driver's socket in socket-dir)")]
#[case::no_metrics(|d: &mut DriverDef| {
    provisioner(d).full_args.retain(|a| !a.starts_with("--http-endpoint="));
}, "controller.sidecars[provisioner].fullArgs serve no metrics on localhost:8202")]
#[case::no_election(|d: &mut DriverDef| {
    let p = provisioner(d);
    p.full_args.retain(|a| !a.starts_with("--leader-election"));
    p.full_args.push("--leader-election=false".into());
}, "controller.sidecars[provisioner].fullArgs do not elect a leader")]
#[case::sidecar_request(|d: &mut DriverDef| {
    provisioner(d).requests.memory = Some("20 Mi".into());
}, "controller.sidecars[provisioner].requests.memory \"20 Mi\" is not a quantity")]
#[case::driver_cpu(|d: &mut DriverDef| {
    d.controller.driver.cpu_request = Some("fast".into());
}, "controller.driver.cpuRequest \"fast\" is not a quantity")]
#[case::probe_request(|d: &mut DriverDef| {
    d.controller.liveness_probe_requests.cpu = Some("-5m".into());
}, "controller.livenessProbeRequests.cpu \"-5m\" is not a quantity")]
#[case::probe_port(|d: &mut DriverDef| {
    d.controller.liveness_probe_full_args.retain(|a| !a.starts_with("--health-port="));
}, "controller.livenessProbeFullArgs do not serve the driver's healthzPort")]
#[case::probe_socket(|d: &mut DriverDef| {
    d.controller.liveness_probe_full_args[0] = "--csi-address=/plugin/csi.sock".into();
}, "controller.livenessProbeFullArgs must pass --csi-address=/csi/csi.sock")]
#[case::probe_both(|d: &mut DriverDef| {
    d.controller.liveness_probe_args = vec!["--probe-timeout=3s".into()];
}, "controller has both livenessProbeFullArgs and livenessProbeArgs")]
#[case::rename_driver(|d: &mut DriverDef| {
    d.controller.container_names.insert("csi-driver".into(), "driver".into());
}, "controller.containerNames renames csi-driver")]
#[case::rename_unknown(|d: &mut DriverDef| {
    d.controller.container_names.insert("csi-snapshot".into(), "snap".into());
}, "controller.containerNames names csi-snapshot, not a container of the pod")]
#[case::rename_invalid(|d: &mut DriverDef| {
    d.controller.container_names.insert("csi-attacher".into(), "Attacher".into());
}, "controller.containerNames gives csi-attacher the name \"Attacher\", not a valid container name")]
#[case::rename_collision(|d: &mut DriverDef| {
    d.controller.container_names.insert("csi-attacher".into(), "liveness-probe".into());
}, "controller.containerNames gives two containers the name liveness-probe")]
#[case::service_account(|d: &mut DriverDef| {
    d.controller.service_account_name = Some("Controller SA".into());
}, "controller.serviceAccountName \"Controller SA\" is not a valid ServiceAccount name")]
#[case::same_service_account(|d: &mut DriverDef| {
    d.node.service_account_name = Some("gcp-pd-controller-sa".into());
}, "controller.serviceAccountName and node.serviceAccountName are the same")]
#[case::unprivileged_but_privileged(|d: &mut DriverDef| {
    d.controller.driver.privileged = true;
}, "controller.explicitlyUnprivileged states privileged: false")]
#[case::relative_socket_dir(|d: &mut DriverDef| {
    d.controller.sidecar_socket_dir = Some("csi".into());
}, "controller.sidecarSocketDir \"csi\" is not an absolute path")]
fn the_controller_layout_fields_are_checked(
    #[case] change: fn(&mut DriverDef),
    #[case] want: &str,
) {
    let mut def = gcp_pd_in_openshift_layout();
    def.validate().unwrap();
    change(&mut def);
    let error = def.validate().unwrap_err();
    assert!(error.problems.iter().any(|p| p.contains(want)), "{error}");
}

fn provisioner(def: &mut DriverDef) -> &mut csi_kit::SidecarDef {
    def.controller
        .sidecars
        .iter_mut()
        .find(|s| s.kind == csi_kit::SidecarKind::Provisioner)
        .unwrap()
}

#[test]
fn an_unknown_placement_is_refused_naming_the_known_ones() {
    let mut json = serde_json::to_value(gcp_pd()).unwrap();
    json["controller"]["placement"] = "Anywhere".into();
    let error = serde_json::from_value::<DriverDef>(json)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Anywhere") && error.contains("ControlPlane") && error.contains("AnyNode"),
        "{error}"
    );
}
