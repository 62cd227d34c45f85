//! Which optional APIs a cluster serves: OpenShift's config.openshift.io kinds, and the CRDs
//! that may or may not be installed. Asked once at start-up; absent APIs are not watched.

use std::collections::BTreeSet;

use kube::Client;

/// The resources (plurals) served under `group_version` (e.g. `config.openshift.io/v1`); empty
/// when the group is not served at all.
pub async fn served_resources(
    client: &Client,
    group_version: &str,
) -> Result<BTreeSet<String>, kube::Error> {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => Ok(list.resources.into_iter().map(|r| r.name).collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(BTreeSet::new()),
        Err(error) => Err(error),
    }
}
