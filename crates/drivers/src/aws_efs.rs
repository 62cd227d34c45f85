//! AWS Elastic File System (`efs.csi.aws.com`): the table in `aws_efs.yaml` plus hooks shared
//! with AWS EBS (region and endpoint, credentials or the instance's identity) and its own
//! tags argument. Installed on request and removable; the table's `removalBlockedByVolumes`
//! makes the kit keep it installed while any of its PersistentVolumes is bound.

use csi::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::Deployment;

use crate::DriverError;
use crate::aws_ebs::with_region_and_endpoint;
use crate::common::{
    driver_container, drop_missing_credentials, from_secret, literal, pod_spec, set_arg, set_env,
};

/// The short name.
pub const SHORT_NAME: &str = "aws-efs";
/// The CSI driver name.
pub const CSI_NAME: &str = "efs.csi.aws.com";
/// The credentials Secret cloud-credential-operator writes.
pub const CREDENTIALS_SECRET: &str = "aws-efs-cloud-credentials";

const TABLE: &str = include_str!("aws_efs.yaml");

/// The AWS EFS driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::parse_table(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![with_tags, with_region_and_endpoint, with_credentials],
        ..Hooks::default()
    };
    Ok(def)
}

/// `--tags=` with `kubernetes.io/cluster/<infrastructureName>:owned` and the cluster's AWS
/// resource tags (the driver's `key:value` format, space-separated), put on every access point.
pub fn tags_arg(inputs: &Inputs) -> Option<String> {
    let mut tags = Vec::new();
    if let Some(id) = inputs.cluster_id.as_deref().filter(|id| !id.is_empty()) {
        tags.push(format!("kubernetes.io/cluster/{id}:owned"));
    }
    let resource_tags = inputs
        .platform_status
        .as_ref()
        .and_then(|p| p.aws.as_ref())
        .map(|a| a.resource_tags.as_slice())
        .unwrap_or_default();
    tags.extend(
        resource_tags
            .iter()
            .map(|t| format!("{}:{}", t.key, t.value)),
    );
    (!tags.is_empty()).then(|| format!("--tags={}", tags.join(" ")))
}

/// Adds [`tags_arg`] to the controller's driver container, before
/// `--delete-access-point-root-dir` as OpenShift's asset has it.
pub fn with_tags(inputs: &Inputs, deployment: &mut Deployment) {
    let Some(arg) = tags_arg(inputs) else {
        return;
    };
    if let Some(container) = pod_spec(deployment).and_then(driver_container) {
        set_arg(container, "--tags=", arg);
        let args = container.args.get_or_insert_with(Vec::new);
        let tags = args.iter().position(|a| a.starts_with("--tags="));
        let before = args
            .iter()
            .position(|a| a.starts_with("--delete-access-point-root-dir"));
        if let (Some(tags), Some(before)) = (tags, before)
            && tags > before
        {
            let tags = args.remove(tags);
            args.insert(before, tags);
        }
    }
}

/// The access keys of `aws-efs-cloud-credentials` (and its `credentials` file for STS), or on
/// plain Kubernetes without that Secret the instance's identity.
pub fn with_credentials(inputs: &Inputs, deployment: &mut Deployment) {
    const VARS: [&str; 3] = [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SHARED_CREDENTIALS_FILE",
    ];
    if let Some(container) = pod_spec(deployment).and_then(driver_container) {
        set_env(
            container,
            from_secret(VARS[0], CREDENTIALS_SECRET, "aws_access_key_id"),
        );
        set_env(
            container,
            from_secret(VARS[1], CREDENTIALS_SECRET, "aws_secret_access_key"),
        );
        set_env(container, literal(VARS[2], "/var/run/aws/keys/credentials"));
    }
    drop_missing_credentials(inputs, deployment, CREDENTIALS_SECRET, "aws-keys", &VARS);
}
