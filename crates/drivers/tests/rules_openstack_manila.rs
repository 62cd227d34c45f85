#![allow(clippy::unwrap_used)]
//! The OpenStack Manila hooks: StorageClass names and parameters per share type (table tests,
//! odd names included), the share-type precondition, the probe over a fake client, and the
//! NFS plugin's wiring (controller container, node DaemonSet).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use csi_kit::{DriverDef, Inputs, Topology};
use drivers::openstack_manila::{self, ShareTypes, class_name, precondition, storage_classes};
use rstest::rstest;

fn manila() -> DriverDef {
    drivers::by_name("openstack-manila").unwrap()
}

fn with_types(types: &[&str]) -> Inputs {
    let def = manila();
    let mut inputs = Inputs::new(&def, Topology::HighlyAvailable, &BTreeMap::new());
    inputs.probe_facts = types.iter().map(|t| (*t).to_owned()).collect();
    inputs
}

#[tokio::test]
async fn the_catalogue_has_manila_as_the_registry_names_it() {
    let def = drivers::by_name("manila.csi.openstack.org").unwrap();
    assert_eq!(def.short_name, "openstack-manila");
    assert_eq!(def.condition_prefix, "Manila");
    assert!(
        def.storage_classes.is_empty(),
        "classes come from share types"
    );
    assert!(def.storage_class_generator.is_some() && def.precondition.is_some());
    assert_eq!(def.extra_images["nfs"].env, "NFS_DRIVER_IMAGE");
    let cluster = testkit::Cluster::start().await;
    assert!(drivers::probe(&def, cluster.client()).is_some());
    let cinder = drivers::by_name("openstack-cinder").unwrap();
    assert!(drivers::probe(&cinder, cluster.client()).is_none());
}

#[rstest]
#[case("default", Some("csi-manila-default"))]
#[case("CephFS_Gold", Some("csi-manila-cephfs-gold"))]
#[case("  nfs.fast ", Some("csi-manila-nfs-fast"))]
#[case("___", None)]
#[case("", None)]
fn class_names(#[case] share_type: &str, #[case] want: Option<&str>) {
    assert_eq!(class_name(share_type).as_deref(), want);
}

#[test]
fn a_very_long_share_type_gives_a_valid_name() {
    let name = class_name(&"x".repeat(400)).unwrap();
    assert_eq!(name.len(), 253);
}

#[test]
fn one_class_per_share_type_with_the_driver_secrets() {
    let classes = storage_classes(&with_types(&["default", "gold", "Gold", "__"]));
    let names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["csi-manila-default", "csi-manila-gold"],
        "collisions and unusable names dropped"
    );
    let gold = &classes[1];
    assert_eq!(gold.parameters["type"], "gold");
    assert_eq!(
        gold.parameters["csi.storage.k8s.io/node-stage-secret-name"],
        "csi-manila-secrets"
    );
    assert!(!gold.default && gold.allow_volume_expansion);
    assert_eq!(gold.volume_binding_mode, "Immediate");
    // And the kit builds them, none as the cluster default.
    let built = csi_kit::build_storage_classes(&manila(), &with_types(&["default"]));
    assert_eq!(built.len(), 1);
    assert!(built[0].metadata.annotations.is_none());
}

#[rstest]
#[case::none(&[], false)]
#[case::some(&["default"], true)]
fn manila_runs_only_with_share_types(#[case] types: &[&str], #[case] runs: bool) {
    let result = precondition(&with_types(types));
    assert_eq!(result.is_ok(), runs);
    if let Err(reason) = result {
        assert!(
            reason.message().contains("no Manila share types"),
            "{reason}"
        );
        assert_eq!(reason.kind(), csi_kit::HookErrorKind::Unsupported);
    }
}

struct Fake(Result<Vec<&'static str>, &'static str>);

impl ShareTypes for Fake {
    fn share_types(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<String>, csi_kit::HookError>> + Send + '_>> {
        let answer = self
            .0
            .clone()
            .map(|t| t.into_iter().map(str::to_owned).collect())
            .map_err(csi_kit::HookError::cloud);
        Box::pin(async move { answer })
    }
}

#[rstest]
#[case::types(Ok(vec!["b", "a", "b"]), Ok(vec!["a", "b"]))]
#[case::none(Ok(vec![]), Err(("no Manila share types", "unsupported")))]
#[case::cloud_error(
    Err("401 Unauthorized"),
    Err(("cannot list the Manila share types of the cloud: 401 Unauthorized", "cloud"))
)]
#[tokio::test]
async fn the_probe_turns_share_types_into_facts_or_a_reason(
    #[case] answer: Result<Vec<&'static str>, &'static str>,
    #[case] want: Result<Vec<&str>, (&str, &str)>,
) {
    let probe = openstack_manila::probe(Fake(answer), Duration::from_secs(5));
    assert_eq!(probe.interval, Duration::from_secs(5));
    match (probe.probe.check().await, want) {
        (Ok(got), Ok(want)) => {
            assert_eq!(got.facts, want);
            assert!(!got.wrote, "a probe without a client writes nothing");
        }
        (Err(got), Err((message, category))) => {
            assert!(got.message().contains(message), "{got}");
            assert_eq!(got.category(), category, "{got}");
        }
        (got, want) => panic!("got {got:?}, want {want:?}"),
    }
}

fn env_value(c: &k8s_openapi::api::core::v1::Container, name: &str) -> String {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
        .unwrap_or_else(|| panic!("{}: no env {name}", c.name))
}

fn mount_path(c: &k8s_openapi::api::core::v1::Container, volume: &str) -> Option<String> {
    c.volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume)
        .map(|m| m.mount_path.clone())
}

fn host_path(spec: &k8s_openapi::api::core::v1::PodSpec, volume: &str) -> String {
    spec.volumes
        .iter()
        .flatten()
        .find(|v| v.name == volume)
        .and_then(|v| v.host_path.as_ref())
        .map(|h| h.path.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| panic!("no hostPath volume {volume}"))
}

#[test]
fn in_the_controller_pod_the_nfs_plugin_serves_the_socket_the_driver_forwards_to() {
    let def = manila();
    let env = BTreeMap::from([(
        "NFS_DRIVER_IMAGE".to_owned(),
        "example.com/nfs:9".to_owned(),
    )]);
    let inputs = Inputs::new(&def, Topology::HighlyAvailable, &env);
    let deployment = csi_kit::build_controller_deployment(&def, &inputs);
    let spec = deployment.spec.unwrap().template.spec.unwrap();
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names[..2], ["csi-driver", "csi-driver-nfs"], "{names:?}");
    let (driver, nfs) = (&spec.containers[0], &spec.containers[1]);
    assert_eq!(nfs.image.as_deref(), Some("example.com/nfs:9"));
    // Both see the socket emptyDir at the same path, so the NFS plugin's socket is the one
    // the driver forwards to.
    assert_eq!(
        mount_path(driver, "socket-dir"),
        mount_path(nfs, "socket-dir")
    );
    let forward = env_value(driver, "FWD_CSI_ENDPOINT");
    let served = arg(nfs, "--endpoint=");
    let path = |endpoint: &str| {
        format!(
            "/{}",
            endpoint.trim_start_matches("unix:").trim_start_matches('/')
        )
    };
    assert_eq!(path(&forward), path(served));
    assert!(path(served).starts_with(&mount_path(nfs, "socket-dir").unwrap()));
    // Nothing of the host: restricted-v2 is enough.
    assert!(spec.volumes.iter().flatten().all(|v| v.host_path.is_none()));
    assert!(nfs.security_context.as_ref().unwrap().privileged.is_none());
}

#[test]
fn on_nodes_the_nfs_daemon_set_serves_the_host_socket_the_node_plugin_forwards_to() {
    let def = manila();
    let env = BTreeMap::from([(
        "NFS_DRIVER_IMAGE".to_owned(),
        "example.com/nfs:9".to_owned(),
    )]);
    let inputs = Inputs::new(&def, Topology::HighlyAvailable, &env);
    let node = csi_kit::build_node_daemon_set(&def, &inputs);
    let node_spec = node.spec.unwrap().template.spec.unwrap();
    let driver = node_spec
        .containers
        .iter()
        .find(|c| c.name == "csi-driver")
        .unwrap();
    // The node plugin mounts no volume itself: nothing of the kubelet's directory.
    assert_eq!(mount_path(driver, "kubelet-dir"), None);
    assert_eq!(mount_path(driver, "socket-dir"), None);
    let forward = env_value(driver, "FWD_CSI_ENDPOINT");
    let fwd_dir = host_path(&node_spec, "fwd-plugin-dir");
    assert_eq!(forward, format!("unix://{fwd_dir}/csi.sock"));
    // Its own socket is where the registrar tells the kubelet it is.
    let endpoint = env_value(driver, "CSI_ENDPOINT");
    let registrar = node_spec
        .containers
        .iter()
        .find(|c| c.name == "csi-node-driver-registrar")
        .unwrap();
    let registered = arg(registrar, "--kubelet-registration-path=");
    assert_eq!(endpoint, format!("unix://{registered}"));
    assert_eq!(
        mount_path(driver, "plugin-dir").as_deref(),
        Some(host_path(&node_spec, "plugin-dir").as_str())
    );
    // It starts once the NFS plugin's socket is there.
    let init = node_spec.init_containers.as_ref().unwrap();
    assert_eq!(init.len(), 1);
    let command = init[0].command.as_ref().unwrap().join(" ");
    assert!(
        command.contains(&format!("-S {fwd_dir}/csi.sock")),
        "{command}"
    );
    assert_eq!(
        mount_path(&init[0], "fwd-plugin-dir").as_deref(),
        Some(fwd_dir.as_str())
    );

    // The NFS DaemonSet: an operand of its own, serving on that host directory and mounting
    // shares into the kubelet's pods directory.
    let operands = csi_kit::render_operands(&def, &inputs);
    let nfs_ds = daemon_set(&operands, "csi-nodeplugin-nfsplugin");
    assert_eq!(
        nfs_ds.metadata.namespace.as_deref(),
        Some("openshift-manila-csi-driver")
    );
    assert_eq!(
        nfs_ds.metadata.labels.as_ref().unwrap()["csi.storage.openshift.io/driver"],
        "openstack-manila"
    );
    let nfs_spec = nfs_ds.spec.unwrap().template.spec.unwrap();
    let nfs = &nfs_spec.containers[0];
    assert_eq!(nfs.image.as_deref(), Some("example.com/nfs:9"));
    assert_eq!(host_path(&nfs_spec, "plugin-dir"), fwd_dir);
    let served = arg(nfs, "--endpoint=");
    let plugin_mount = mount_path(nfs, "plugin-dir").unwrap();
    assert_eq!(
        format!(
            "/{}",
            served.trim_start_matches("unix:").trim_start_matches('/')
        ),
        format!("{plugin_mount}/csi.sock")
    );
    let pods = nfs
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "pods-mount-dir")
        .unwrap();
    assert_eq!(pods.mount_path, "/var/lib/kubelet/pods");
    assert_eq!(pods.mount_propagation.as_deref(), Some("Bidirectional"));
    assert_eq!(
        nfs.security_context.as_ref().unwrap().privileged,
        Some(true)
    );
    // Its pods are told apart from the node plugin's.
    let selector = |name| {
        daemon_set(&operands, name)
            .spec
            .unwrap()
            .selector
            .match_labels
    };
    assert_ne!(
        selector("csi-nodeplugin-nfsplugin"),
        selector("openstack-manila-csi-nodeplugin")
    );
}

/// The rendered DaemonSet `name`.
fn daemon_set(operands: &[csi_kit::Operand], name: &str) -> k8s_openapi::api::apps::v1::DaemonSet {
    operands
        .iter()
        .find_map(|o| match o {
            csi_kit::Operand::DaemonSet(ds) if ds.metadata.name.as_deref() == Some(name) => {
                Some(ds.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no DaemonSet {name} is rendered"))
}

/// The value of a container's `<prefix>...` argument.
fn arg<'a>(c: &'a k8s_openapi::api::core::v1::Container, prefix: &str) -> &'a str {
    c.args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("{}: no argument {prefix}", c.name))
}

fn credentials(clouds: &str, ca: Option<&str>) -> Result<openstack_manila::Credentials, String> {
    let mut data = BTreeMap::from([(
        "clouds.yaml".to_owned(),
        k8s_openapi::ByteString(clouds.as_bytes().to_vec()),
    )]);
    if let Some(ca) = ca {
        data.insert(
            "cacert".to_owned(),
            k8s_openapi::ByteString(ca.as_bytes().to_vec()),
        );
    }
    openstack_manila::credentials_from("ns/creds", &data)
}

#[test]
fn csi_secret_keys_from_ids_ca_path_and_insecure() {
    let clouds = "clouds:\n  openstack:\n    auth:\n      auth_url: https://k:5000/v3\n      user_id: u1\n      password: p\n      project_id: p1\n      user_domain_id: d1\n    cacert: /etc/pki/ca.pem\n    verify: false\n";
    let creds = credentials(clouds, None).unwrap();
    assert_eq!(creds.tls(), drivers::openstack_api::Tls::Insecure);
    let data = openstack_manila::csi_secret_data(&creds);
    let want: BTreeMap<String, String> = [
        ("os-authURL", "https://k:5000/v3"),
        ("os-userID", "u1"),
        ("os-password", "p"),
        ("os-projectID", "p1"),
        ("os-userDomainID", "d1"),
        ("os-domainID", "d1"),
        ("os-certAuthorityPath", "/etc/pki/ca.pem"),
        ("os-TLSInsecure", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(data, want);
}

#[test]
fn a_ca_in_the_credentials_secret_is_trusted_and_passed_on() {
    let clouds = "clouds:\n  openstack:\n    auth:\n      auth_url: https://k\n      application_credential_id: a\n      application_credential_secret: s\n    cacert: /etc/pki/ca.pem\n";
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let creds = credentials(clouds, Some(pem)).unwrap();
    assert_eq!(
        creds.tls(),
        drivers::openstack_api::Tls::WithCa(pem.to_owned())
    );
    let data = openstack_manila::csi_secret_data(&creds);
    assert_eq!(data["os-certAuthority"], pem);
    assert!(!data.contains_key("os-certAuthorityPath"));
    assert_eq!(data["os-applicationCredentialID"], "a");
    assert_eq!(data["os-applicationCredentialSecret"], "s");

    let def = manila();
    let secret = openstack_manila::build_csi_secret(&def, &creds);
    assert_eq!(secret.metadata.name.as_deref(), Some("csi-manila-secrets"));
    assert_eq!(
        secret.metadata.namespace.as_deref(),
        Some("openshift-manila-csi-driver")
    );
    let hash = &secret.metadata.annotations.unwrap()[openstack_manila::SECRET_HASH_ANNOTATION];
    assert!(!hash.is_empty());
}

#[rstest]
#[case::no_key(None, "Secret ns/creds has no key clouds.yaml")]
#[case::no_cloud(
    Some("clouds: {}\n"),
    "key clouds.yaml of Secret ns/creds is invalid: clouds.yaml has no cloud \"openstack\""
)]
#[case::no_password(
    Some(
        "clouds:\n  openstack:\n    auth: {auth_url: https://k, username: a, user_domain_name: D}\n"
    ),
    "auth.password is missing"
)]
#[case::not_yaml(Some("clouds: ["), "does not parse as YAML")]
fn bad_credentials_name_the_secret_key_and_field(#[case] clouds: Option<&str>, #[case] want: &str) {
    let data = clouds
        .map(|c| {
            BTreeMap::from([(
                "clouds.yaml".to_owned(),
                k8s_openapi::ByteString(c.as_bytes().to_vec()),
            )])
        })
        .unwrap_or_default();
    let error = openstack_manila::credentials_from("ns/creds", &data).unwrap_err();
    assert!(error.contains(want), "{error}");
}

#[test]
fn the_manila_operator_may_write_its_csi_secret_and_no_other() {
    let rules = drivers::extra_namespace_rules(&manila());
    let named: Vec<_> = rules
        .iter()
        .filter(|r| r.resource_names.is_some())
        .collect();
    assert_eq!(
        named[0].resource_names.as_deref(),
        Some(&["csi-manila-secrets".to_owned()][..])
    );
    assert!(
        drivers::extra_namespace_rules(&drivers::by_name("openstack-cinder").unwrap()).is_empty()
    );
}

#[test]
fn the_classes_name_the_driver_secret_in_the_operand_namespace() {
    let def = manila();
    assert_eq!(openstack_manila::NAMESPACE, def.namespace);
    let classes = storage_classes(&with_types(&["default"]));
    for (key, value) in &classes[0].parameters {
        if key.ends_with("-secret-namespace") {
            assert_eq!(value, &def.namespace, "{key}");
        }
    }
    let snapshot = openstack_manila::snapshot_class(&def).unwrap();
    assert_eq!(
        snapshot.parameters["csi.storage.k8s.io/snapshotter-secret-namespace"],
        def.namespace
    );
}

#[test]
fn the_operator_holds_the_lease_openshifts_manila_operator_holds() {
    // library-go's lease of `openstack-manila-csi-driver-operator`, although the operands are
    // named `manila-csi-driver-*`: both operators never run at once during a handover.
    assert_eq!(
        csi_kit::names::operator_lease(&manila()),
        "openstack-manila-csi-driver-operator-lock"
    );
    let gcp = drivers::by_name("gcp-pd").unwrap();
    assert_eq!(
        csi_kit::names::operator_lease(&gcp),
        "gcp-pd-csi-driver-operator-lock"
    );
}
