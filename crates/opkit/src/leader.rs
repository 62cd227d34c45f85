//! Leader election with a `coordination.k8s.io` Lease, so an operator can run two replicas and
//! only one writes. Built on kube-lease-manager (server-side apply on the Lease).
//!
//! OpenShift's operators hold a 137 s lease, give up after failing to renew for 107 s and retry
//! every 26 s. We keep the 137 s lease and renew 26 s after the last renewal, as they do: an
//! API server that is down for a minute at any moment then leaves the holder leading. The
//! renewal is due at most 26 s after the outage starts, kube-lease-manager retries with a
//! backoff of at most 30 s, and the lease lasts 137 s: 26 + 60 + 30 < 137. Renewing only near
//! the end of the lease would write less (once every 107 s) but lose the lease to any outage
//! that began shortly before the renewal.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerError, LeaseParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a lease is valid after its last renewal (OpenShift's LeaseDuration).
pub const LEASE_DURATION: Duration = Duration::from_secs(137);
/// When the holder renews, counted from its last renewal (OpenShift's RetryPeriod).
pub const RENEW_AFTER: Duration = Duration::from_secs(26);

/// Where the lease lives and who is asking.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease, e.g. `cluster-storage-operator-lock`.
    pub lease_name: String,
    /// This replica's identity, usually the pod name.
    pub identity: String,
    /// Lease validity.
    pub lease_duration: Duration,
    /// Renew this long after the last renewal; must be shorter than `lease_duration`.
    pub renew_after: Duration,
}

impl LeaderConfig {
    /// OpenShift's timings for the given lease and identity.
    pub fn new(
        namespace: impl Into<String>,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: LEASE_DURATION,
            renew_after: RENEW_AFTER,
        }
    }
}

/// Leader election failed to start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The timings cannot work.
    #[error(
        "invalid leader election timings for lease {lease}: the lease duration ({duration:?}) must be a whole number of seconds longer than the renewal interval ({renew:?}), both at least 1s"
    )]
    InvalidTimings {
        /// The lease.
        lease: String,
        /// The duration asked for.
        duration: Duration,
        /// The renewal interval asked for.
        renew: Duration,
    },
    /// The namespace the Lease lives in does not exist.
    #[error(
        "the namespace {namespace} of the leader election Lease {lease} does not exist: create it, or name an existing one with --namespace (POD_NAMESPACE)"
    )]
    NamespaceMissing {
        /// The namespace.
        namespace: String,
        /// The lease.
        lease: String,
    },
    /// The Lease could not be read or written.
    #[error("leader election on lease {lease}: {source}")]
    Lease {
        /// The lease.
        lease: String,
        /// What went wrong.
        #[source]
        source: LeaseManagerError,
    },
}

/// Starts competing for the lease. The receiver says whether this replica leads; it changes as
/// leadership is won or lost. Dropping every receiver releases the lease (a clean hand-over on
/// shutdown).
pub async fn elect(
    client: Client,
    config: &LeaderConfig,
) -> Result<
    (
        watch::Receiver<bool>,
        JoinHandle<Result<LeaseManager, LeaseManagerError>>,
    ),
    LeaderError,
> {
    let duration = config.lease_duration.as_secs();
    let renew = config.renew_after.as_secs();
    if renew == 0 || renew >= duration {
        return Err(LeaderError::InvalidTimings {
            lease: config.lease_name.clone(),
            duration: config.lease_duration,
            renew: config.renew_after,
        });
    }
    // kube-lease-manager's "grace" is how long before expiry the holder renews.
    let params =
        LeaseParams::new(config.identity.clone(), duration, duration - renew).with_field_manager(
            format!("{}/leader-election", crate::apply::FIELD_MANAGER_PREFIX),
        );
    let manager = LeaseManager::new(
        client,
        config.lease_name.clone(),
        config.namespace.clone(),
        params,
        LeaseCreateMode::AutoCreate,
    )
    .await
    .map_err(|source| match &source {
        LeaseManagerError::KubeError(kube::Error::Api(status))
            if status.code == 404
                && status
                    .details
                    .as_ref()
                    .is_some_and(|d| d.kind == "namespaces") =>
        {
            LeaderError::NamespaceMissing {
                namespace: config.namespace.clone(),
                lease: config.lease_name.clone(),
            }
        }
        _ => LeaderError::Lease {
            lease: config.lease_name.clone(),
            source,
        },
    })?;
    Ok(manager.watch().await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openshift_timings_are_the_default() {
        let config = LeaderConfig::new("ns", "lock", "me");
        assert_eq!(config.lease_duration, Duration::from_secs(137));
        assert_eq!(config.renew_after, Duration::from_secs(26));
    }
}
