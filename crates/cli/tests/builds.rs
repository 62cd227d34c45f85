//! `storage-operator builds` as a process against the in-process API server served on
//! loopback: it runs a build's pod when the Build CRD is served, and refuses to start, saying
//! what to install, when it is not.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use api::build_v1::Build;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

fn command(kubeconfig: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_storage-operator"));
    command
        .args([
            "builds",
            "--no-leader-election",
            "--admin-address",
            "127.0.0.1:0",
            "--builder-image",
            "example.com/builder:1",
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("LOG_LEVEL", "warn")
        .env_remove("BUILD_SELECTOR")
        .env_remove("WATCH_NAMESPACE");
    command
}

#[tokio::test]
async fn without_the_build_crd_it_exits_saying_what_to_install() {
    let cluster = testkit::Cluster::start().await;
    let kubeconfig = cluster.kubeconfig().await.unwrap();
    let output = tokio::task::spawn_blocking(move || {
        let output = command(kubeconfig.path()).output().unwrap();
        drop(kubeconfig);
        output
    })
    .await
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("deploy/crds/build.openshift.io_builds.yaml"),
        "{stderr}"
    );
}

#[tokio::test]
async fn with_the_build_crd_it_creates_the_build_pod() {
    let cluster = testkit::Cluster::start().await;
    let admin = cluster.client();
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(
            &PostParams::default(),
            &<Build as kube::CustomResourceExt>::crd(),
        )
        .await
        .unwrap();
    let namespace: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let build: Build = serde_json::from_value(json!({
        "apiVersion": "build.openshift.io/v1", "kind": "Build",
        "metadata": {"name": "app", "namespace": "team"},
        "spec": {"strategy": {"type": "Source", "sourceStrategy": {
            "from": {"kind": "DockerImage", "name": "registry.example.com/ubi9/python"},
            "volumes": [{"name": "certs", "source": {"type": "CSI", "csi": {"driver": "secrets-store.csi.k8s.io",
                          "volumeAttributes": {"secretProviderClass": "vault-certs"}}},
                          "mounts": [{"destinationPath": "/opt/certs"}]}]}}},
    }))
    .unwrap();
    Api::<Build>::namespaced(admin.clone(), "team")
        .create(&PostParams::default(), &build)
        .await
        .unwrap();

    let kubeconfig = cluster.kubeconfig().await.unwrap();
    let mut child = command(kubeconfig.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team");
    let pod = testkit::eventually("the build pod", Duration::from_secs(60), async || {
        pods.get_opt("app-build").await.unwrap()
    })
    .await;
    let spec = pod.spec.unwrap();
    assert_eq!(spec.containers[0].name, "sti-build");
    let volume = &spec.volumes.unwrap()[0];
    assert_eq!(volume.name, "certs-user-build-volume");
    assert_eq!(
        volume.csi.as_ref().unwrap().read_only,
        Some(true),
        "build volumes are read only"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
