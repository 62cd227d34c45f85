//! Two replicas competing for one Lease on the in-process API server: one leads, and when it
//! goes away the other takes over.

#![allow(clippy::unwrap_used)] // an integration test crate: a panic is a test failure

use std::time::Duration;

use opkit::leader::{LeaderConfig, LeaderError, elect};
use tokio::time::timeout;

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: Duration::from_secs(10),
        renew_after: Duration::from_secs(2),
        // Long enough that a stalled test machine does not expire the lease by itself.
        ..LeaderConfig::new("default", "storage-operator-lock", identity)
    }
}

async fn wait_for(receiver: &mut tokio::sync::watch::Receiver<bool>, leading: bool) {
    timeout(
        Duration::from_secs(60),
        receiver.wait_for(|l| *l == leading),
    )
    .await
    .expect("leadership did not change in time")
    .unwrap();
}

#[tokio::test]
async fn one_replica_leads_and_the_other_takes_over_when_it_leaves() {
    let cluster = testkit::Cluster::start().await;
    let (mut first, first_task) = elect(cluster.client(), &config("replica-a")).await.unwrap();
    wait_for(&mut first, true).await;

    let (mut second, _second_task) = elect(cluster.client(), &config("replica-b")).await.unwrap();
    // While the first holds the lease, the second must not lead.
    assert!(
        timeout(Duration::from_secs(2), second.wait_for(|l| *l))
            .await
            .is_err(),
        "two leaders at once"
    );
    assert!(*first.borrow());

    // The first replica shuts down: dropping its receiver releases the lease.
    drop(first);
    first_task.await.unwrap().unwrap();
    wait_for(&mut second, true).await;

    let lease = cluster
        .object(
            "coordination.k8s.io",
            "leases",
            "default",
            "storage-operator-lock",
        )
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-b");
}

#[tokio::test]
async fn impossible_timings_are_refused_with_a_clear_error() {
    let cluster = testkit::Cluster::start().await;
    let bad = LeaderConfig {
        renew_after: Duration::from_secs(200),
        ..LeaderConfig::new("default", "lock", "me")
    };
    let error = elect(cluster.client(), &bad).await.unwrap_err();
    assert!(matches!(error, LeaderError::InvalidTimings { .. }));
    assert!(
        error
            .to_string()
            .contains("must be a whole number of seconds longer"),
        "{error}"
    );
}
