//! A throwaway API server for trying the binary or the e2e tests by hand:
//! `cargo run -p testkit --example serve` prints a kubeconfig path and serves until stopped
//! (with simulated workloads and three ready nodes).

#![allow(clippy::unwrap_used)] // a developer tool: a panic is a clear enough failure

use std::time::Duration;

#[tokio::main]
async fn main() {
    let cluster = testkit::Cluster::start().await;
    cluster.simulate_workloads(testkit::SimConfig::default());
    for node in ["node-a", "node-b", "node-c"] {
        cluster.add_node(node, true);
    }
    let kubeconfig = cluster.kubeconfig().await.unwrap();
    println!("{}", kubeconfig.path().display());
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = tokio::time::sleep(Duration::from_secs(3600)) => {}
    }
}
