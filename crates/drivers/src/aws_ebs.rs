//! AWS Elastic Block Store (`ebs.csi.aws.com`): the table in `aws_ebs.yaml` plus hooks: the
//! cluster-ID tag and the cluster's AWS resource tags on every volume, the region and a custom
//! EC2 endpoint from `Infrastructure`, the access keys of the credentials Secret (or the
//! instance's identity on plain Kubernetes), the custom CA bundle of `kube-cloud-config`
//! when it has one, and the KMS key of `driverConfig.aws.kmsKeyARN` as a StorageClass
//! parameter. With a hosted control plane, HyperShift's token minter next to the controller.

use csi_kit::{DriverDef, Hooks, Inputs};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, SecurityContext, Volume, VolumeMount};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::common::{
    add_volume, driver_container, drop_missing_credentials, from_secret, literal, memory_volume,
    pod_spec, put_volume, set_arg, set_env,
};
use crate::table::DriverError;

/// The short name.
pub const SHORT_NAME: &str = "aws-ebs";
/// The CSI driver name.
pub const CSI_NAME: &str = "ebs.csi.aws.com";
/// The StorageClass parameter naming the KMS key that encrypts new volumes.
pub const KMS_KEY_PARAMETER: &str = "kmsKeyId";
/// The credentials Secret cloud-credential-operator writes.
pub const CREDENTIALS_SECRET: &str = "ebs-cloud-credentials";
/// The installer's cloud config, copied from `openshift-config-managed`.
pub const CLOUD_CONFIG: &str = "kube-cloud-config";
/// The key of the custom CA bundle in [`CLOUD_CONFIG`].
pub const CA_BUNDLE_KEY: &str = "ca-bundle.pem";
/// Where the driver finds the custom CA bundle.
pub const CA_BUNDLE_PATH: &str = "/etc/ca/ca-bundle.pem";

const TABLE: &str = include_str!("aws_ebs.yaml");
const CREDENTIALS_VOLUME: &str = "aws-keys";
const KEY_ID_ENV: &str = "AWS_ACCESS_KEY_ID";
const SECRET_KEY_ENV: &str = "AWS_SECRET_ACCESS_KEY";
const CA_BUNDLE_VOLUME: &str = "ca-bundle";

/// The AWS EBS driver with its hooks.
pub fn def() -> Result<DriverDef, DriverError> {
    let mut def = crate::table::parse(SHORT_NAME, TABLE)?;
    def.hooks = Hooks {
        deployment: vec![
            with_tags,
            with_region_and_endpoint,
            with_credentials,
            with_custom_ca_bundle,
            with_hosted_token_minter,
        ],
        daemon_set: Vec::new(),
        storage_class: vec![with_kms_key],
        ..Hooks::default()
    };
    Ok(def)
}

/// The controller's volume of the web identity token.
const TOKEN_VOLUME: &str = "bound-sa-token";
/// HyperShift's token minter container.
pub use csi_kit::hosted::TOKEN_MINTER_CONTAINER;

/// With a hosted control plane the controller runs in the management cluster, where the
/// kubelet cannot issue tokens of the guest's ServiceAccount: HyperShift's token minter asks
/// the guest for them (through the guest kubeconfig) and writes them to a tmpfs the driver reads,
/// as OpenShift's pod has it.
fn with_hosted_token_minter(inputs: &Inputs, deployment: &mut Deployment) {
    if inputs.hosted.is_none() {
        return;
    }
    // The ServiceAccount and namespace are the guest's, as the Deployment has them before
    // it moves to the control-plane namespace.
    let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
    let Some(spec) = pod_spec(deployment) else {
        return;
    };
    let service_account = spec.service_account_name.clone().unwrap_or_default();
    put_volume(spec, memory_volume(TOKEN_VOLUME));
    let mut minter = csi_kit::hosted::token_minter(
        inputs.extra_images.get("tokenMinter").cloned(),
        &namespace,
        &service_account,
        TOKEN_VOLUME,
    );
    minter.security_context = Some(SecurityContext {
        read_only_root_filesystem: Some(true),
        ..SecurityContext::default()
    });
    // Last, as OpenShift's pod has it.
    spec.containers.retain(|c| c.name != TOKEN_MINTER_CONTAINER);
    spec.containers.push(minter);
}

fn aws(inputs: &Inputs) -> Option<&api::config_v1::AWSPlatformStatus> {
    inputs.platform_status.as_ref().and_then(|p| p.aws.as_ref())
}

/// The tag arguments: `--k8s-tag-cluster-id=<infrastructureName>` (the driver tags every
/// volume and snapshot `kubernetes.io/cluster/<id>=owned`, so the installer can find and
/// destroy them) and `--extra-tags=` with the cluster's AWS resource tags.
pub fn tag_args(inputs: &Inputs) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(id) = inputs.cluster_id.as_deref().filter(|id| !id.is_empty()) {
        args.push(format!("{CLUSTER_ID_ARG}{id}"));
    }
    let tags: Vec<String> = aws(inputs)
        .map(|a| a.resource_tags.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}={}", t.key, t.value))
        .collect();
    if !tags.is_empty() {
        args.push(format!("--extra-tags={}", tags.join(",")));
    }
    args
}

/// Adds [`tag_args`] to the controller's driver container: the cluster ID right after
/// `--endpoint`, where OpenShift's asset has it, the extra tags last.
pub fn with_tags(inputs: &Inputs, deployment: &mut Deployment) {
    let Some(container) = pod_spec(deployment).and_then(driver_container) else {
        return;
    };
    for arg in tag_args(inputs) {
        let prefix = arg
            .split_inclusive('=')
            .next()
            .unwrap_or_default()
            .to_owned();
        set_arg(container, &prefix, arg);
    }
    let args = container.args.get_or_insert_with(Vec::new);
    if let Some(at) = args.iter().position(|a| a.starts_with(CLUSTER_ID_ARG))
        && let Some(endpoint) = args.iter().position(|a| a.starts_with("--endpoint="))
        && at > endpoint + 1
    {
        let arg = args.remove(at);
        args.insert(endpoint + 1, arg);
    }
}

const CLUSTER_ID_ARG: &str = "--k8s-tag-cluster-id=";

/// The EC2 endpoint of `Infrastructure.status.platformStatus.aws.serviceEndpoints`, if set.
pub fn ec2_endpoint(inputs: &Inputs) -> Option<String> {
    service_endpoint(inputs, "ec2")
}

/// The endpoint of `service` (`ec2`, `sts`) of
/// `Infrastructure.status.platformStatus.aws.serviceEndpoints`, if set.
pub fn service_endpoint(inputs: &Inputs, service: &str) -> Option<String> {
    aws(inputs)?
        .extra
        .get("serviceEndpoints")?
        .as_array()?
        .iter()
        .filter(|e| e["name"] == service)
        .find_map(|e| {
            e["url"]
                .as_str()
                .filter(|u| !u.is_empty())
                .map(str::to_owned)
        })
}

/// Sets `AWS_REGION` (from `Infrastructure`) and `AWS_EC2_ENDPOINT` (a custom endpoint, when
/// the cluster has one) on the controller's driver container.
pub fn with_region_and_endpoint(inputs: &Inputs, deployment: &mut Deployment) {
    let region = aws(inputs)
        .and_then(|a| a.region.clone())
        .filter(|r| !r.is_empty());
    let endpoint = ec2_endpoint(inputs);
    let Some(container) = pod_spec(deployment).and_then(driver_container) else {
        return;
    };
    if let Some(region) = region {
        set_env(container, literal("AWS_REGION", &region));
    }
    if let Some(endpoint) = endpoint {
        set_env(container, literal("AWS_EC2_ENDPOINT", &endpoint));
    }
}

/// The access keys of `ebs-cloud-credentials` as the SDK's variables, and
/// `AWS_SHARED_CREDENTIALS_FILE` pointing at its `credentials` file (written for STS). On
/// plain Kubernetes without that Secret, neither: the driver uses the instance's identity.
pub fn with_credentials(inputs: &Inputs, deployment: &mut Deployment) {
    if let Some(container) = pod_spec(deployment).and_then(driver_container) {
        set_env(
            container,
            from_secret(KEY_ID_ENV, CREDENTIALS_SECRET, "aws_access_key_id"),
        );
        set_env(
            container,
            from_secret(SECRET_KEY_ENV, CREDENTIALS_SECRET, "aws_secret_access_key"),
        );
        set_env(
            container,
            literal(
                "AWS_SHARED_CREDENTIALS_FILE",
                "/var/run/aws/keys/credentials",
            ),
        );
    }
    drop_missing_credentials(
        inputs,
        deployment,
        CREDENTIALS_SECRET,
        CREDENTIALS_VOLUME,
        &[KEY_ID_ENV, SECRET_KEY_ENV, "AWS_SHARED_CREDENTIALS_FILE"],
    );
}

/// Whether the copy of `kube-cloud-config` has a custom CA bundle.
pub fn has_custom_ca_bundle(inputs: &Inputs) -> bool {
    inputs
        .copied_config_maps
        .get(CLOUD_CONFIG)
        .is_some_and(|data| data.contains_key(CA_BUNDLE_KEY))
}

/// Mounts the copy of `kube-cloud-config` at `/etc/ca` of the controller's driver container
/// and points `AWS_CA_BUNDLE` at its `ca-bundle.pem`, when it has one. The kit's input hash
/// then covers the ConfigMap, so a changed bundle rolls the pods.
pub fn with_custom_ca_bundle(inputs: &Inputs, deployment: &mut Deployment) {
    if !has_custom_ca_bundle(inputs) {
        return;
    }
    let Some(spec) = pod_spec(deployment) else {
        return;
    };
    add_volume(
        spec,
        Volume {
            name: CA_BUNDLE_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: CLOUD_CONFIG.to_owned(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
    );
    let Some(container) = driver_container(spec) else {
        return;
    };
    set_env(container, literal("AWS_CA_BUNDLE", CA_BUNDLE_PATH));
    let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
    mounts.retain(|m| m.name != CA_BUNDLE_VOLUME);
    mounts.push(VolumeMount {
        name: CA_BUNDLE_VOLUME.to_owned(),
        mount_path: "/etc/ca".to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
}

/// Sets `kmsKeyId` (and `encrypted: "true"`) from `driverConfig.aws.kmsKeyARN` on every
/// class, when set.
pub fn with_kms_key(inputs: &Inputs, class: &mut StorageClass) {
    let key = inputs
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.aws.as_ref())
        .and_then(|a| a.kms_key_arn.as_deref())
        .filter(|k| !k.is_empty());
    if let Some(key) = key {
        let parameters = class.parameters.get_or_insert_with(Default::default);
        parameters.insert(KMS_KEY_PARAMETER.to_owned(), key.to_owned());
        parameters.insert("encrypted".to_owned(), "true".to_owned());
    }
}
