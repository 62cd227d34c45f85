//! AWS Elastic File System (`efs.csi.aws.com`): the table in `aws_efs.yaml` plus hooks shared
//! with AWS EBS (region and endpoint, credentials or the instance's identity), its own tags
//! argument, and the node plugin's own credentials (Secret `node-aws-efs-cloud-credentials`,
//! from the node CredentialsRequest, for mounts across availability zones; optional, as on
//! OpenShift: without it zonal mounts fail and the rest works). Installed on request and
//! removable; the table's `removalBlockedByVolumes` makes the kit keep it installed while any
//! of its PersistentVolumes is bound.

use csi_kit::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{SecretVolumeSource, Volume, VolumeMount};

use crate::aws_ebs::with_region_and_endpoint;
use crate::common::{
    driver_container, drop_missing_credentials, ds_pod_spec, from_secret, literal, pod_spec,
    set_arg, set_env,
};
use crate::table::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "aws-efs";
/// The CSI driver name.
pub const CSI_NAME: &str = "efs.csi.aws.com";
/// The credentials Secret cloud-credential-operator writes.
pub const CREDENTIALS_SECRET: &str = "aws-efs-cloud-credentials";
/// The node plugin's credentials Secret cloud-credential-operator writes.
pub const NODE_CREDENTIALS_SECRET: &str = "node-aws-efs-cloud-credentials";
/// The node pod's volume of [`NODE_CREDENTIALS_SECRET`], as OpenShift names it.
pub const NODE_CREDENTIALS_VOLUME: &str = "aws-keys";
/// Where the node's driver container sees it.
pub const NODE_CREDENTIALS_PATH: &str = "/var/run/aws/keys";

const TABLE: &str = include_str!("aws_efs.yaml");

/// The AWS EFS driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![
            with_tags,
            with_region_and_endpoint,
            with_credentials,
            with_fips_mode,
        ],
        daemon_set: vec![with_node_credentials, with_fips_mode_on_nodes],
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

/// The node plugin's own credentials: the optional Secret [`NODE_CREDENTIALS_SECRET`] mounted
/// at [`NODE_CREDENTIALS_PATH`] (after `efs-utils-config-legacy`, where OpenShift's pod has
/// it), its access keys as environment (unset while the Secret or a key is missing), and, once
/// the Secret exists, its `credentials` file (what cloud-credential-operator writes for STS: a
/// role and the bound token's path). The Secret's hash rolls the node pods when it rotates.
pub fn with_node_credentials(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    let Some(spec) = ds_pod_spec(daemon_set) else {
        return;
    };
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    volumes.retain(|v| v.name != NODE_CREDENTIALS_VOLUME);
    let at = volumes
        .iter()
        .position(|v| v.name == "efs-utils-config-legacy")
        .map_or(volumes.len(), |i| i + 1);
    volumes.insert(
        at,
        Volume {
            name: NODE_CREDENTIALS_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(NODE_CREDENTIALS_SECRET.to_owned()),
                optional: Some(true),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
    );
    let Some(container) = driver_container(spec) else {
        return;
    };
    let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
    mounts.retain(|m| m.name != NODE_CREDENTIALS_VOLUME);
    mounts.push(VolumeMount {
        name: NODE_CREDENTIALS_VOLUME.to_owned(),
        mount_path: NODE_CREDENTIALS_PATH.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
    set_env(
        container,
        from_secret(
            "AWS_ACCESS_KEY_ID",
            NODE_CREDENTIALS_SECRET,
            "aws_access_key_id",
        ),
    );
    set_env(
        container,
        from_secret(
            "AWS_SECRET_ACCESS_KEY",
            NODE_CREDENTIALS_SECRET,
            "aws_secret_access_key",
        ),
    );
    if inputs.secret_hashes.contains_key(NODE_CREDENTIALS_SECRET) {
        set_env(
            container,
            literal(
                "AWS_SHARED_CREDENTIALS_FILE",
                &format!("{NODE_CREDENTIALS_PATH}/credentials"),
            ),
        );
    } else if let Some(env) = container.env.as_mut() {
        env.retain(|e| e.name != "AWS_SHARED_CREDENTIALS_FILE");
    }
}

/// `FIPS_ENABLED` (`true` or `false`) on a driver container, as OpenShift's FIPS hooks set it:
/// the driver's mount helper then runs its TLS tunnel in FIPS mode on a FIPS cluster.
fn set_fips(inputs: &Inputs, spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    if let Some(container) = driver_container(spec) {
        set_env(
            container,
            literal(
                "FIPS_ENABLED",
                if inputs.host_fips { "true" } else { "false" },
            ),
        );
    }
}

/// `set_fips` on the controller.
pub fn with_fips_mode(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(spec) = pod_spec(deployment) {
        set_fips(inputs, spec);
    }
}

/// `set_fips` on the nodes, which mount the volumes.
pub fn with_fips_mode_on_nodes(inputs: &Inputs, daemon_set: &mut DaemonSet) {
    if let Some(spec) = ds_pod_spec(daemon_set) {
        set_fips(inputs, spec);
    }
}
