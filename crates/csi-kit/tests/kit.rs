#![allow(clippy::unwrap_used)]
//! The kit on a driver unlike GCP PD: pod network, driver metrics, no attacher metrics,
//! inline volumes, no credentials, no snapshot classes, plus a driver hook. Shows what is
//! generic and what comes from the table.

use std::collections::BTreeMap;

use csi_kit::{DriverDef, Inputs, OptionalCrds, Topology};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, SecretVolumeSource, Volume};
use serde_json::{Value, json};

fn example() -> DriverDef {
    let image = |env: &str, default: &str| json!({"env": env, "default": default});
    serde_json::from_value(json!({
        "name": "example.csi.k8s.io",
        "shortName": "example",
        "conditionPrefix": "Example",
        "objectPrefix": "example-csi-driver",
        "clusterRolePrefix": "example",
        "removable": true,
        "images": {
            "driver": image("DRIVER_IMAGE", "example.com/driver:v1"),
            "provisioner": image("PROVISIONER_IMAGE", "example.com/provisioner:v1"),
            "attacher": image("ATTACHER_IMAGE", "example.com/attacher:v1"),
            "resizer": image("RESIZER_IMAGE", "example.com/resizer:v1"),
            "snapshotter": image("SNAPSHOTTER_IMAGE", "example.com/snapshotter:v1"),
            "nodeDriverRegistrar": image("NODE_DRIVER_REGISTRAR_IMAGE", "example.com/registrar:v1"),
            "livenessProbe": image("LIVENESS_PROBE_IMAGE", "example.com/probe:v1"),
            "kubeRbacProxy": image("KUBE_RBAC_PROXY_IMAGE", "example.com/proxy:v1"),
        },
        "controller": {
            "requiredScc": "restricted-v2",
            "driver": {
                "args": ["--endpoint=$(CSI_ENDPOINT)"],
                "healthzPort": 10401,
                "metrics": {"localPort": 8401, "exposedPort": 9401},
            },
            "sidecars": [
                {"kind": "Provisioner", "metrics": {"localPort": 8402, "exposedPort": 9402}},
                {"kind": "Attacher"},
            ],
        },
        "node": {
            "hostNetwork": false,
            "driver": {"args": ["--endpoint=$(CSI_ENDPOINT)"], "healthzPort": 10400, "privileged": true},
            "registrarHealthzPort": 10403,
        },
        "csiDriver": {
            "attachRequired": false,
            "podInfoOnMount": true,
            "fsGroupPolicy": "None",
            "volumeLifecycleModes": ["Persistent", "Ephemeral"],
            "tokenRequestAudiences": ["example-audience"],
            "ephemeralVolumeProfile": "privileged",
        },
        "storageClasses": [{"name": "example", "volumeBindingMode": "Immediate"}],
    }))
    .unwrap()
}

fn pod(d: &Deployment) -> &PodSpec {
    d.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn container<'a>(spec: &'a PodSpec, name: &str) -> &'a Container {
    spec.containers.iter().find(|c| c.name == name).unwrap()
}

fn names(objects: &[Value]) -> Vec<String> {
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

#[test]
fn defaults_fill_in_what_the_table_leaves_out() {
    let def = example();
    assert_eq!(def.namespace, "openshift-cluster-csi-drivers");
    assert!(def.storage_classes[0].allow_volume_expansion);
    assert_eq!(def.storage_classes[0].reclaim_policy, "Delete");
    assert!(def.hooks.deployment.is_empty());
}

#[test]
fn the_cluster_id_placeholder_is_substituted_or_its_argument_left_out() {
    let mut def = example();
    def.controller.driver.args = vec![
        "--endpoint=$(CSI_ENDPOINT)".to_owned(),
        "--cluster=${CLUSTER_ID}".to_owned(),
        "--v=${LOG_LEVEL}".to_owned(),
    ];
    let args = |cluster_id: Option<&str>| {
        let mut i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
        i.cluster_id = cluster_id.map(str::to_owned);
        let d = csi_kit::build_controller_deployment(&def, &i);
        container(pod(&d), "csi-driver").args.clone().unwrap()
    };
    assert_eq!(
        args(Some("infra-7x")),
        ["--endpoint=$(CSI_ENDPOINT)", "--cluster=infra-7x", "--v=2"]
    );
    for none in [None, Some("")] {
        assert_eq!(
            args(none),
            ["--endpoint=$(CSI_ENDPOINT)", "--v=2"],
            "plain Kubernetes has no cluster ID"
        );
    }
}

#[test]
fn pod_network_health_endpoints_listen_on_the_pod_address() {
    let def = example();
    let i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    let d = csi_kit::build_controller_deployment(&def, &i);
    assert_eq!(pod(&d).host_network, None);
    let probe = container(pod(&d), "csi-liveness-probe");
    assert!(
        probe
            .args
            .as_ref()
            .unwrap()
            .contains(&"--health-port=10401".to_owned()),
        "listens on every address of the pod"
    );
    let driver = container(pod(&d), "csi-driver");
    let http = driver
        .liveness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(http.host, None, "the kubelet probes the pod IP");
    let annotations = d
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap();
    assert_eq!(annotations["openshift.io/required-scc"], "restricted-v2");
}

#[test]
fn driver_metrics_get_their_own_proxy_and_the_last_service_port() {
    let def = example();
    let i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    let d = csi_kit::build_controller_deployment(&def, &i);
    let order: Vec<&str> = pod(&d).containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "csi-driver",
            "kube-rbac-proxy-8401",
            "csi-provisioner",
            "provisioner-kube-rbac-proxy",
            "csi-attacher",
            "csi-liveness-probe"
        ]
    );
    let attacher = container(pod(&d), "csi-attacher").args.as_ref().unwrap();
    assert!(
        !attacher.iter().any(|a| a.starts_with("--http-endpoint")),
        "no metrics, no endpoint"
    );
    assert_eq!(
        metrics_ports(&def, &i),
        [
            ("provisioner-m".to_owned(), 9402),
            ("driver-m".to_owned(), 9401)
        ]
    );
}

#[test]
fn tls_profile_reaches_every_proxy() {
    let def = example();
    let mut i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    i.tls.min_version = Some("VersionTLS13".to_owned());
    i.tls.cipher_suites = vec![
        "TLS_AES_128_GCM_SHA256".to_owned(),
        "TLS_AES_256_GCM_SHA384".to_owned(),
    ];
    let d = csi_kit::build_controller_deployment(&def, &i);
    for c in pod(&d)
        .containers
        .iter()
        .filter(|c| c.name.contains("kube-rbac-proxy"))
    {
        let args = c.args.as_ref().unwrap();
        assert!(args.contains(&"--tls-min-version=VersionTLS13".to_owned()));
        assert!(args.contains(
            &"--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384".to_owned()
        ));
    }
}

#[test]
fn rbac_follows_the_table() {
    let def = example();
    let roles: Vec<String> = csi_kit::build_cluster_roles(&def)
        .into_iter()
        .map(|r| r.metadata.name.unwrap())
        .collect();
    assert_eq!(
        roles,
        ["example-kube-rbac-proxy-role", "example-privileged-role"],
        "no host network, no hostnetwork role"
    );
    let bindings: Vec<String> = csi_kit::build_cluster_role_bindings(&def)
        .into_iter()
        .map(|b| b.metadata.name.unwrap())
        .collect();
    assert_eq!(
        bindings,
        [
            "example-kube-rbac-proxy-binding",
            "example-node-privileged-binding",
            "example-csi-main-provisioner-binding",
            "example-csi-volumesnapshot-reader-provisioner-binding",
            "example-csi-volumeattributesclass-reader-provisioner-binding",
            "example-csi-main-attacher-binding",
        ]
    );
}

#[test]
fn csi_driver_fields_and_default_ephemeral_profile() {
    let def = example();
    let i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    let driver = csi_kit::build_csi_driver(&def, &i);
    assert_eq!(
        driver.metadata.labels.as_ref().unwrap()["security.openshift.io/csi-ephemeral-volume-profile"],
        "privileged"
    );
    assert_eq!(driver.spec.attach_required, Some(false));
    assert_eq!(driver.spec.pod_info_on_mount, Some(true));
    assert_eq!(
        driver.spec.token_requests.unwrap()[0].audience,
        "example-audience"
    );
}

fn add_secret_volume(_: &Inputs, d: &mut Deployment) {
    let spec = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: "extra".to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some("added-by-hook".to_owned()),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
}

#[test]
fn driver_hooks_run_before_input_hashes() {
    let mut def = example();
    def.hooks.deployment.push(add_secret_volume);
    let mut i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    i.secret_hashes
        .insert("added-by-hook".to_owned(), "h1".to_owned());
    let d = csi_kit::build_controller_deployment(&def, &i);
    let key = csi_kit::hash::annotation_key(
        &def.namespace,
        "added-by-hook",
        csi_kit::hash::HashedKind::Secret,
    );
    assert_eq!(
        d.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(&key)
            .map(String::as_str),
        Some("h1")
    );
}

#[test]
fn nothing_optional_without_crds_or_data() {
    let def = example();
    let mut i = Inputs::new(
        &def,
        Topology::Kubernetes {
            control_plane_nodes: false,
        },
        &BTreeMap::new(),
    );
    i.crds = OptionalCrds::all();
    let rendered = names(&csi_kit::render(&def, &i));
    assert!(
        !rendered
            .iter()
            .any(|n| n.starts_with("VolumeSnapshotClass/")),
        "the table has none"
    );
    assert!(
        !rendered
            .iter()
            .any(|n| n.starts_with("CredentialsRequest/")),
        "the table has none"
    );
    assert!(rendered.contains(&"ServiceMonitor/example-csi-driver-controller-monitor".to_owned()));
    assert!(
        !rendered.contains(&"Role/example-csi-driver-prometheus".to_owned()),
        "OpenShift's prometheus-k8s does not exist on plain Kubernetes"
    );
}

#[test]
fn shared_sidecar_roles_never_grant_wildcards_or_secrets() {
    for role in csi_kit::build_shared_sidecar_cluster_roles() {
        for rule in role.rules.unwrap() {
            assert!(!rule.verbs.contains(&"*".to_owned()));
            let resources = rule.resources.unwrap();
            assert!(!resources.contains(&"*".to_owned()));
            assert!(
                !resources.contains(&"secrets".to_owned()),
                "{:?}",
                role.metadata.name
            );
        }
    }
}

#[test]
fn a_sound_table_validates() {
    example().validate().unwrap();
}

#[test]
fn validation_lists_every_problem() {
    let mut def = example();
    def.short_name = " ".to_owned();
    def.controller.sidecars[0].metrics = def.controller.driver.metrics;
    def.node.registrar_healthz_port = def.node.driver.healthz_port;
    def.storage_classes.push(def.storage_classes[0].clone());
    def.storage_classes[0].default = true;
    def.storage_classes[1].default = true;
    def.csi_driver.ephemeral_volume_profile = None;
    def.node.driver.volumes.push(serde_json::from_value(json!({
        "name": "socket-dir", "mountPath": "/x", "source": {"hostPath": {"path": "/x", "type": "Directory"}}
    })).unwrap());
    let err = def.validate().unwrap_err();
    assert_eq!(
        err.problems,
        [
            "shortName is empty",
            "controller port 8401 is used twice",
            "controller port 9401 is used twice",
            "node port 10400 is used twice",
            "node volume socket-dir is reserved by the kit",
            "StorageClass example is listed twice",
            "more than one StorageClass is marked default",
            "csiDriver supports Ephemeral volumes but has no ephemeralVolumeProfile",
        ]
    );
    assert!(
        err.to_string().starts_with(
            "invalid table of CSI driver \"example.csi.k8s.io\": shortName is empty; "
        )
    );
}

#[test]
fn validation_checks_the_pod_template_settings() {
    let mut def = example();
    // A volume no container mounts cannot have mount settings.
    def.node.driver.volumes.push(serde_json::from_value(json!({
        "name": "dev", "readOnly": true, "source": {"hostPath": {"path": "/dev", "type": "Directory"}}
    })).unwrap());
    // Only the kit's own mounts can be moved; the socket must be inside socket-dir.
    def.node.driver.mount_paths =
        BTreeMap::from([("registration-dir".to_owned(), "/r".to_owned())]);
    def.controller.driver.mount_paths =
        BTreeMap::from([("socket-dir".to_owned(), "/csi".to_owned())]);
    def.controller.driver.endpoint =
        Some("unix:///var/lib/csi/sockets/pluginproxy/csi.sock".to_owned());
    // Containers a table names must be the pod's.
    def.node.driver.volumes.push(serde_json::from_value(json!({
        "name": "tmp", "mountPath": "/tmp", "alsoMountedIn": ["csi-provisioner"], "source": {"emptyDir": {}}
    })).unwrap());
    def.controller.container_order = vec!["csi-driver".to_owned(), "sidecar".to_owned()];
    let controller_containers = def.controller.container_names().join(", ");
    def.node.extra_rules.push(
        serde_json::from_value(json!({
            "apiGroups": ["example.com"], "resources": ["*"], "verbs": ["get"]
        }))
        .unwrap(),
    );
    def.node.driver.liveness_probe = Some(csi_kit::def::ProbeTimingsDef {
        initial_delay_seconds: 10,
        period_seconds: 0,
        timeout_seconds: 3,
    });
    // An environment variable has one source, and reads only the table's own ConfigMaps.
    def.controller.driver.env.push(
        serde_json::from_value(json!({
            "name": "TWICE", "value": "x", "configMapKeyRef": {"name": "cloud-conf", "key": "k"}
        }))
        .unwrap(),
    );
    def.node.driver.env.push(
        serde_json::from_value(json!({
            "name": "FOREIGN", "configMapKeyRef": {"name": "someone-elses", "key": "k"}
        }))
        .unwrap(),
    );
    def.config_maps.push(serde_json::from_value(json!({
        "name": "cloud-conf", "source": {"namespace": "openshift-config", "name": "cloud-provider-config", "key": "config"}
    })).unwrap());
    let err = def.validate().unwrap_err();
    assert_eq!(
        err.problems,
        [
            "node volume dev has no mountPath but mount settings (readOnly, mountPropagation, alsoMountedIn)".to_owned(),
            "controller env TWICE has more than one of value, fieldPath and configMapKeyRef".to_owned(),
            "node env FOREIGN reads ConfigMap someone-elses, which is not one of the table's configMaps (cloud-conf): only those roll the pods when they change".to_owned(),
            "controller driver endpoint unix:///var/lib/csi/sockets/pluginproxy/csi.sock is not csi.sock in socket-dir (/csi): the sidecars connect to /csi/csi.sock".to_owned(),
            "node driver mountPaths names registration-dir, not one of the kit's mounts (socket-dir, kubelet-dir)".to_owned(),
            "node driver livenessProbe needs initialDelaySeconds >= 0 and periodSeconds, timeoutSeconds >= 1".to_owned(),
            "node volume tmp alsoMountedIn names csi-provisioner, not a container of the pod (csi-driver, csi-node-driver-registrar, csi-liveness-probe)".to_owned(),
            format!("controller containerOrder names sidecar, not a container of the pod ({controller_containers})"),
            "node extraRules use a wildcard ([\"example.com\"] [\"*\"] [\"get\"]): name each API group, resource and verb (the operator must hold every permission it grants)".to_owned(),
        ]
    );
    assert!(
        controller_containers.starts_with("csi-driver, kube-rbac-proxy-"),
        "{controller_containers}"
    );
}

/// The metrics Service layout (`servicePort`, `metricsService`) and the tables' own RBAC
/// (`roles`, `sharedRoles`, `clusterRoleBindingNames`): each bad value is reported, naming the
/// field.
#[test]
fn validation_checks_the_metrics_service_and_rbac_fields() {
    let mut def: DriverDef = {
        let mut value = serde_json::to_value(example()).unwrap();
        let controller = &mut value["controller"];
        controller["sidecars"][0]["metrics"]["servicePort"] = json!(9401);
        controller["metricsService"] = json!({
            "portOrder": ["driver-m", "nope-m", "driver-m"],
            "hookEndpoints": [{"portName": "Syncer_M", "exposedPort": 9402, "servicePort": 0}],
        });
        controller["roles"] = json!([
            {"name": "cluster-admin", "binding": "example-admin-binding", "rules": []},
            {"name": "example-all-role", "binding": "example-all-binding",
             "rules": [{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}]},
        ]);
        controller["sharedRoles"] =
            json!([{"role": "cluster-admin", "binding": "example-shared-binding"}]);
        value["node"]["roles"] = json!([{"name": "Bad_Name", "binding": "example-node-binding",
            "namespaced": true, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}]);
        value["clusterRoleBindingNames"] = json!({
            "example-nope-binding": "example-x-binding",
            "example-node-privileged-binding": "example-kube-rbac-proxy-binding",
        });
        serde_json::from_value(value).unwrap()
    };
    let err = def.validate().unwrap_err();
    let kit_bindings = "example-kube-rbac-proxy-binding, example-node-privileged-binding, \
        example-csi-main-provisioner-binding, \
        example-csi-volumesnapshot-reader-provisioner-binding, \
        example-csi-volumeattributesclass-reader-provisioner-binding, \
        example-csi-main-attacher-binding";
    assert_eq!(
        err.problems,
        [
            "controller port 9402 is used twice".to_owned(),
            "controller.metricsService.hookEndpoints port name \"Syncer_M\" is not a port name (at most 15 lower-case letters, digits and '-', with a letter)".to_owned(),
            "controller metrics Service port 0 is not a port".to_owned(),
            "controller metrics Service port 9401 is used twice".to_owned(),
            "controller.metricsService.portOrder names nope-m, not a port of the metrics Service (driver-m, provisioner-m, Syncer_M)".to_owned(),
            "controller.metricsService.portOrder names driver-m twice".to_owned(),
            "controller.roles name \"cluster-admin\" does not start with one of the driver's prefixes (example-): a table names only the driver's own objects".to_owned(),
            "node.roles name \"Bad_Name\" is not a valid object name (lower-case letters, digits, '-' and '.', at most 253 characters)".to_owned(),
            "controller role cluster-admin has no rules".to_owned(),
            "controller role example-all-role uses a wildcard ([\"\"] [\"*\"] [\"get\"]): name each API group, resource and verb (the operator must hold every permission it grants)".to_owned(),
            "controller.sharedRoles names cluster-admin, not a shared role the kit knows (openshift-csi-provisioner-configmap-and-secret-reader-role)".to_owned(),
            format!("clusterRoleBindingNames renames example-nope-binding, not a ClusterRoleBinding of the kit's ({kit_bindings})"),
            "ClusterRoleBinding example-kube-rbac-proxy-binding is rendered twice".to_owned(),
        ]
    );
    // Sound values validate, and each is used.
    def = example();
    def.controller.sidecars[0]
        .metrics
        .as_mut()
        .unwrap()
        .service_port = Some(443);
    def.controller.metrics_service.port_order = vec!["driver-m".to_owned()];
    def.validate().unwrap();
    let i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    assert_eq!(
        metrics_ports(&def, &i),
        [
            ("driver-m".to_owned(), 9401),
            ("provisioner-m".to_owned(), 443)
        ]
    );
}

/// What the driver provisions (`volumes`): each mistake is reported on its own, naming the
/// field and the fix.
#[rstest::rstest]
#[case::not_a_quantity(
    json!({"maxSize": "64TB"}),
    "volumes.maxSize: \"64TB\" is not a quantity: write a size as Kubernetes does, such as 1Gi or 64Ti"
)]
#[case::negative(
    json!({"minSize": "-1Gi"}),
    "volumes.minSize: \"-1Gi\" is negative: write a size as Kubernetes does, such as 1Gi or 64Ti"
)]
#[case::zero(
    json!({"minSize": "0"}),
    "volumes.minSize \"0\" is zero bytes: write a size such as 1Gi, or leave volumes.minSize out"
)]
#[case::above_any_volume(
    json!({"maxSize": "17Ei"}),
    "volumes.maxSize \"17Ei\" is larger than any volume (above 16Ei): write a size such as 64Ti"
)]
#[case::min_above_max(
    json!({"minSize": "2Ti", "maxSize": "1Ti"}),
    "volumes.minSize 2Ti is larger than volumes.maxSize 1Ti: swap them, or correct the one that is wrong"
)]
#[case::unknown_volume_mode(
    json!({"accessModes": {"Raw": ["ReadWriteOnce"]}}),
    "volumes.accessModes: \"Raw\" is not a volume mode: key the access modes by Filesystem or Block"
)]
#[case::unknown_access_mode(
    json!({"accessModes": {"Filesystem": ["ReadWriteOnce", "ReadWriteAll"]}}),
    "volumes.accessModes.Filesystem: \"ReadWriteAll\" is not an access mode (ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod)"
)]
#[case::access_mode_twice(
    json!({"accessModes": {"Block": ["ReadWriteOnce", "ReadWriteMany", "ReadWriteOnce"]}}),
    "volumes.accessModes.Block lists ReadWriteOnce twice: list it once"
)]
#[case::no_access_mode(
    json!({"accessModes": {"Filesystem": ["ReadWriteOnce"], "Block": []}}),
    "volumes.accessModes.Block lists no access mode: list those the driver accepts with it, or leave Block out if the driver does not offer it"
)]
fn validation_checks_what_the_driver_provisions(#[case] volumes: Value, #[case] problem: &str) {
    let mut value = serde_json::to_value(example()).unwrap();
    value["volumes"] = volumes;
    let def: DriverDef = serde_json::from_value(value).unwrap();
    assert_eq!(def.validate().unwrap_err().problems, [problem]);
}

/// A sound `volumes` validates and reads as bytes and modes in the API's order; any part of it
/// may be left out (not known), and a volume mode can be keyed only once.
#[test]
fn what_the_driver_provisions_reads_as_bytes_and_modes() {
    let table = |volumes: &str| -> Result<DriverDef, String> {
        let mut value = serde_json::to_value(example()).unwrap();
        value["volumes"] = api::yaml::from_str(volumes).map_err(|e| e.to_string())?;
        serde_json::from_value(value).map_err(|e| e.to_string())
    };
    let def = table(
        "minSize: 1Gi\nmaxSize: 64Ti\naccessModes:\n  Block: [ReadWriteMany, ReadWriteOnce]\n  \
         Filesystem: [ReadWriteOncePod, ReadWriteOnce]\n",
    )
    .unwrap();
    def.validate().unwrap();
    let volumes = def.volumes.unwrap();
    assert_eq!(volumes.min_bytes(), Some(1 << 30));
    assert_eq!(volumes.max_bytes(), Some(64 << 40));
    assert_eq!(volumes.volume_modes(), ["Filesystem", "Block"]);
    assert_eq!(
        volumes.all_access_modes(),
        ["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"]
    );

    for partial in [
        "{}",
        "maxSize: 16Ti",
        "accessModes: {Filesystem: [ReadWriteMany]}",
    ] {
        table(partial).unwrap().validate().unwrap();
    }
    let unknown = table("{}").unwrap().volumes.unwrap();
    assert_eq!(
        (unknown.min_bytes(), unknown.max_bytes()),
        (None, None),
        "not known"
    );
    assert!(unknown.volume_modes().is_empty() && unknown.all_access_modes().is_empty());
    assert!(example().volumes.is_none());

    let twice =
        table("accessModes:\n  Block: [ReadWriteOnce]\n  Block: [ReadWriteMany]\n").unwrap_err();
    assert!(twice.contains("Block"), "{twice}");
    assert!(
        table("maxsize: 1Gi").is_err(),
        "a misspelt field is refused"
    );
}

#[test]
fn plain_kubernetes_renders_bring_the_shared_sidecar_roles() {
    let def = example();
    let shared = csi_kit::build_shared_sidecar_cluster_roles().len();
    let count = |t: Topology| {
        let i = Inputs::new(&def, t, &BTreeMap::new());
        names(&csi_kit::render(&def, &i))
            .iter()
            .filter(|n| n.starts_with("ClusterRole/openshift-csi-"))
            .count()
    };
    assert_eq!(
        count(Topology::HighlyAvailable),
        0,
        "cluster-storage-operator ships them on OpenShift"
    );
    assert_eq!(
        count(Topology::Kubernetes {
            control_plane_nodes: true
        }),
        shared
    );
    assert_eq!(shared, 8);
}

mod observe_helpers {
    use std::collections::BTreeMap;

    use csi_kit::inputs::from_objects;
    use csi_kit::{ServingTls, Topology};
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
    use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect()
            })
        };
        ObjectMeta {
            name: Some("x".to_owned()),
            labels: map(labels),
            annotations: map(annotations),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn existing_storage_class_keeps_an_empty_annotation_value() {
        let class = |annotations: &[(&str, &str)]| StorageClass {
            metadata: meta(&[], annotations),
            ..StorageClass::default()
        };
        let key = "storageclass.kubernetes.io/is-default-class";
        assert_eq!(
            from_objects::existing_storage_class(&class(&[(key, "")]))
                .default_annotation
                .as_deref(),
            Some("")
        );
        assert_eq!(
            from_objects::existing_storage_class(&class(&[])).default_annotation,
            None
        );
    }

    #[test]
    fn ca_bundle_counts_only_with_its_key() {
        let cm = |data: Option<&[(&str, &str)]>| ConfigMap {
            data: data.map(|d| {
                d.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect()
            }),
            ..ConfigMap::default()
        };
        assert!(!from_objects::has_ca_bundle(&cm(None)));
        assert!(!from_objects::has_ca_bundle(&cm(Some(&[("other", "x")]))));
        assert!(from_objects::has_ca_bundle(&cm(Some(&[(
            "ca-bundle.crt",
            "pem"
        )]))));
    }

    #[test]
    fn ephemeral_profile_comes_from_the_label() {
        let driver = CSIDriver {
            metadata: meta(
                &[(
                    "security.openshift.io/csi-ephemeral-volume-profile",
                    "baseline",
                )],
                &[],
            ),
            ..CSIDriver::default()
        };
        assert_eq!(
            from_objects::ephemeral_profile(&driver).as_deref(),
            Some("baseline")
        );
        assert_eq!(from_objects::ephemeral_profile(&CSIDriver::default()), None);
    }

    #[test]
    fn serving_tls_from_observed_config() {
        let config = json!({"targetcsiconfig": {"servingInfo": {
            "minTLSVersion": "VersionTLS12",
            "cipherSuites": ["TLS_AES_128_GCM_SHA256"],
        }}});
        assert_eq!(
            from_objects::serving_tls(Some(&config)),
            ServingTls {
                min_version: Some("VersionTLS12".to_owned()),
                cipher_suites: vec!["TLS_AES_128_GCM_SHA256".to_owned()],
            }
        );
        assert_eq!(from_objects::serving_tls(None), ServingTls::default());
        assert_eq!(
            from_objects::serving_tls(Some(&json!({"targetcsiconfig": {}}))),
            ServingTls::default()
        );
    }

    #[test]
    fn kubernetes_topology_from_node_labels() {
        let node = |labels: &[(&str, &str)]| Node {
            metadata: meta(labels, &[]),
            ..Node::default()
        };
        let workers = [node(&[("node-role.kubernetes.io/worker", "")]), node(&[])];
        assert_eq!(
            from_objects::kubernetes_topology(&workers),
            Topology::Kubernetes {
                control_plane_nodes: false
            }
        );
        let with_cp = [
            node(&[]),
            node(&[("node-role.kubernetes.io/control-plane", "")]),
        ];
        assert_eq!(
            from_objects::kubernetes_topology(&with_cp),
            Topology::Kubernetes {
                control_plane_nodes: true
            }
        );
        assert_eq!(
            from_objects::kubernetes_topology(&[node(&[("node-role.kubernetes.io/master", "")])]),
            Topology::Kubernetes {
                control_plane_nodes: true
            }
        );
    }

    #[test]
    fn secret_and_config_map_hashes_track_their_data() {
        let secret = |v: &[u8]| Secret {
            data: Some(BTreeMap::from([(
                "service_account.json".to_owned(),
                ByteString(v.to_vec()),
            )])),
            ..Secret::default()
        };
        assert_eq!(
            csi_kit::hash::secret_hash(&secret(b"a")),
            csi_kit::hash::secret_hash(&secret(b"a"))
        );
        assert_ne!(
            csi_kit::hash::secret_hash(&secret(b"a")),
            csi_kit::hash::secret_hash(&secret(b"b"))
        );
        let cm = ConfigMap {
            data: Some(BTreeMap::from([(
                "ca-bundle.crt".to_owned(),
                "pem".to_owned(),
            )])),
            ..ConfigMap::default()
        };
        assert_ne!(
            csi_kit::hash::config_map_hash(&cm),
            csi_kit::hash::config_map_hash(&ConfigMap::default())
        );
    }
}

/// The table decides where the kit's pieces go in lists whose order is part of the pod
/// template: `--v`, `CSI_ENDPOINT`, the mounts and the volumes.
#[test]
fn the_table_places_verbosity_endpoint_mounts_and_volumes() {
    let mut def = example();
    let mut i = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    i.spec.operator.log_level = Some(api::operator_v1::LogLevel::Debug);

    // Without placeholders: --v last, CSI_ENDPOINT first, the kit's mounts and volumes first.
    let d = csi_kit::build_controller_deployment(&def, &i);
    let driver = container(pod(&d), "csi-driver");
    assert_eq!(
        driver.args.as_deref().unwrap(),
        ["--endpoint=$(CSI_ENDPOINT)", "--v=4"]
    );

    let table = &mut def.controller.driver;
    table.args = ["--endpoint=$(CSI_ENDPOINT)", "--v=${LOG_LEVEL}", "--late"]
        .map(str::to_owned)
        .to_vec();
    table.env = serde_json::from_value(json!([
        {"name": "A", "value": "1"},
        {"name": "CSI_ENDPOINT"},
        {"name": "B", "value": "2"},
    ]))
    .unwrap();
    table.volumes = serde_json::from_value(json!([
        {"name": "keys", "mountPath": "/keys", "source": {"secret": {"secretName": "k"}}},
    ]))
    .unwrap();
    table.mount_order = vec!["keys".to_owned()];
    table.volume_order = vec!["keys".to_owned(), "socket-dir".to_owned()];
    let d = csi_kit::build_controller_deployment(&def, &i);
    let driver = container(pod(&d), "csi-driver");
    assert_eq!(
        driver.args.as_deref().unwrap(),
        ["--endpoint=$(CSI_ENDPOINT)", "--v=4", "--late"]
    );
    let env: Vec<(&str, &str)> = driver
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap()))
        .collect();
    assert_eq!(
        env,
        [
            ("A", "1"),
            (
                "CSI_ENDPOINT",
                "unix:///var/lib/csi/sockets/pluginproxy/csi.sock"
            ),
            ("B", "2")
        ]
    );
    let mounts: Vec<&str> = driver
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(mounts, ["keys", "socket-dir"]);
    let volumes: Vec<&str> = pod(&d)
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    // Volumes the order does not name keep their relative order, after the named ones.
    assert_eq!(volumes, ["keys", "socket-dir", "metrics-serving-cert"]);
}

/// The (name, port) pairs of the driver's metrics Service, in order.
fn metrics_ports(def: &csi_kit::DriverDef, inputs: &Inputs) -> Vec<(String, i32)> {
    csi_kit::build_metrics_service(def, inputs)
        .unwrap()
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap(), p.port))
        .collect()
}
