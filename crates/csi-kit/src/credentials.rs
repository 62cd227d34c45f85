//! What the render and the inputs share about cloud-credential-operator's CredentialsRequests:
//! where the short-lived token is mounted and which environment variable holds a request's
//! role. The driver operator's CredentialsRequest controller (`driver_operator::credentials`)
//! decides when to apply a request and reports on it.

use crate::def::CredentialsRequestDef;

/// The annotation naming the environment variables that hold a request's short-lived token
/// role.
pub const ROLE_ARN_VARS_ANNOTATION: &str = "credentials.openshift.io/role-arns-vars";

/// Where a pod's bound ServiceAccount token for cloud-credential-operator's short-lived
/// credentials is (`spec.cloudTokenPath` of a request that asks for them; the drivers mount
/// the token there).
pub const CLOUD_TOKEN_PATH: &str = "/var/run/secrets/openshift/serviceaccount/token";

/// The environment variable holding `request`'s AWS STS role: the first its
/// `role-arns-vars` annotation names (e.g. the node's `NODE_ROLEARN`), else `ROLEARN`, as
/// OpenShift's AWS EFS operator reads it.
pub fn role_variable(request: &CredentialsRequestDef) -> &str {
    request
        .annotations
        .get(ROLE_ARN_VARS_ANNOTATION)
        .and_then(|vars| vars.split(',').map(str::trim).find(|v| !v.is_empty()))
        .unwrap_or("ROLEARN")
}
