//! Every validation rule of build volumes, with its exact message.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use api::build_v1::BuildVolume;
use builds::validation::validate_volumes;
use rstest::rstest;
use serde_json::{Value, json};

const PATH: &str = "spec.strategy.dockerStrategy.volumes";

fn messages(volumes: Value) -> Vec<String> {
    let volumes: Vec<BuildVolume> = serde_json::from_value(volumes).unwrap();
    validate_volumes(&volumes, PATH)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn csi(name: &str, destination: &str) -> Value {
    json!({"name": name, "source": {"type": "CSI", "csi": {"driver": "csi.sharedresource.openshift.io", "readOnly": true,
            "volumeAttributes": {"sharedSecret": "my-share"}}},
           "mounts": [{"destinationPath": destination}]})
}

#[test]
fn valid_volumes_of_every_type_pass() {
    let volumes = json!([
        csi("entitlement", "/etc/pki/entitlement"),
        {"name": "settings", "source": {"type": "ConfigMap", "configMap": {"name": "maven-settings"}},
         "mounts": [{"destinationPath": "/home/build/.m2"}]},
        {"name": "token", "source": {"type": "Secret", "secret": {"secretName": "repo-token"}},
         "mounts": [{"destinationPath": "/var/run/token"}, {"destinationPath": "/opt/token"}]},
        {"name": "no-readonly", "source": {"type": "CSI", "csi": {"driver": "secrets-store.csi.k8s.io"}},
         "mounts": [{"destinationPath": "/mnt/secrets"}]}
    ]);
    assert_eq!(messages(volumes), Vec::<String>::new());
}

#[rstest]
// OpenShift's rules, OpenShift's messages.
// An absent name does not decode (the CRD requires it); an empty one is refused here.
#[case::name_empty(json!([{"name": "", "source": {"type": "CSI", "csi": {"driver": "d.example.com"}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].name: Required value")]
#[case::name_not_a_label(json!([csi("My_Volume", "/a")]),
    "spec.strategy.dockerStrategy.volumes[0].name: Invalid value: \"My_Volume\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")]
#[case::name_too_long(json!([csi(&"a".repeat(64), "/a")]),
    "spec.strategy.dockerStrategy.volumes[0].name: Invalid value: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": must be no more than 63 characters")]
#[case::type_blank(json!([{"name": "v", "source": {"csi": {"driver": "d.example.com"}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.type: Required value: must not be blank")]
#[case::no_source(json!([{"name": "v", "source": {"type": "CSI"}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source: Invalid value: \"\": must specify one volume source")]
#[case::two_sources(json!([{"name": "v", "source": {"type": "CSI", "csi": {"driver": "d.example.com"}, "secret": {"secretName": "s"}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source: Invalid value: \"\": only one volume source is allowed")]
#[case::type_mismatch(json!([{"name": "v", "source": {"type": "Secret", "csi": {"driver": "d.example.com"}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.type: Invalid value: \"Secret\": source type and specified type must match")]
#[case::secret_name_missing(json!([{"name": "v", "source": {"type": "Secret", "secret": {}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.secret.secretName: Required value")]
#[case::config_map_name_invalid(json!([{"name": "v", "source": {"type": "ConfigMap", "configMap": {"name": "Bad_Name"}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.configMap.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")]
#[case::csi_driver_missing(json!([{"name": "v", "source": {"type": "CSI", "csi": {"driver": ""}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.csi.driver: Required value")]
#[case::csi_driver_too_long(json!([{"name": "v", "source": {"type": "CSI", "csi": {"driver": format!("{}.io", "a".repeat(62))}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.csi.driver: Too long: may not be more than 63 bytes")]
#[case::csi_driver_not_a_subdomain(json!([{"name": "v", "source": {"type": "CSI", "csi": {"driver": "not a driver"}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.csi.driver: Invalid value: \"not a driver\": a lowercase RFC 1123 subdomain")]
#[case::no_mounts(json!([{"name": "v", "source": {"type": "CSI", "csi": {"driver": "d.example.com"}}, "mounts": []}]),
    "spec.strategy.dockerStrategy.volumes[0].mounts: Required value: must supply at least one mount")]
#[case::destination_blank(json!([csi("v", "")]),
    "spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath: Required value: must not be blank")]
#[case::destination_colon(json!([csi("v", "/a:b")]),
    "spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath: Invalid value: \"/a:b\": must not contain ':'")]
#[case::destination_relative(json!([csi("v", "relative/path")]),
    "spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath: Invalid value: \"relative/path\": must be an absolute path")]
#[case::destination_dotdot_start(json!([csi("v", "../etc")]),
    "spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath: Invalid value: \"../etc\": must not start with '..'")]
// What OpenShift only finds out at run time.
#[case::destination_dotdot_inside(json!([csi("v", "/opt/../etc")]),
    "spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath: Invalid value: \"/opt/../etc\": must not contain '..'")]
#[case::destination_root(json!([csi("v", "/")]),
    "spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath: Invalid value: \"/\": must not be the root of the image")]
#[case::duplicate_name(json!([csi("v", "/a"), csi("v", "/b")]),
    "spec.strategy.dockerStrategy.volumes[1].name: Duplicate value: \"v\"")]
#[case::duplicate_destination(json!([csi("v", "/a"), csi("w", "/a/")]),
    "spec.strategy.dockerStrategy.volumes[1].mounts[0].destinationPath: Duplicate value: \"/a/\"")]
#[case::nested_destination(json!([csi("v", "/opt/app"), csi("w", "/opt/app/config")]),
    "spec.strategy.dockerStrategy.volumes[1].mounts[0].destinationPath: Invalid value: \"/opt/app/config\": overlaps spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath (/opt/app) of volume \"v\"; a build cannot mount one volume inside another")]
#[case::builder_path(json!([csi("v", "/run/secrets/rhsm")]),
    "spec.strategy.dockerStrategy.volumes[0].mounts[0].destinationPath: Invalid value: \"/run/secrets/rhsm\": collides with /run/secrets/rhsm, which the builder mounts itself; choose another destinationPath")]
#[case::inside_builder_path(json!([csi("v", "/etc/pki/ca-trust/source/anchors")]),
    "collides with /etc/pki/ca-trust, which the builder mounts itself")]
#[case::writable_csi(json!([{"name": "v", "source": {"type": "CSI", "csi": {"driver": "d.example.com", "readOnly": false}}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.csi.readOnly: Invalid value: \"false\": builds mount volumes read only: remove readOnly or set it to true")]
#[case::unknown_type(json!([{"name": "v", "source": {"type": "NFS"}, "mounts": [{"destinationPath": "/a"}]}]),
    "spec.strategy.dockerStrategy.volumes[0].source.type: Invalid value: \"NFS\": supported values: \"Secret\", \"ConfigMap\", \"CSI\"")]
fn each_rule_names_the_field_and_the_fix(#[case] volumes: Value, #[case] expected: &str) {
    let found = messages(volumes);
    assert!(
        found
            .iter()
            .any(|m| m.starts_with(expected) || m.contains(expected)),
        "expected {expected:?} in {found:#?}"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let found = messages(json!([
        {"name": "Bad", "source": {}, "mounts": []},
        csi("ok", "relative")
    ]));
    assert_eq!(found.len(), 4, "{found:#?}");
}
