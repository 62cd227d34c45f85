//! The EBS volume tags controller of OpenShift's AWS EBS driver operator with a hosted control
//! plane (HyperShift), `AWSEBSEBSVolumeTagsController` ([`CONTROLLER`]): it puts the cluster's
//! AWS resource tags (`Infrastructure.status.platformStatus.aws.resourceTags`) on the EBS
//! volumes of existing PersistentVolumes, which the driver created before the tags were set or
//! changed (it tags new volumes itself, `--extra-tags`).
//!
//! What it does, as OpenShift's: with resource tags set, it hashes them ([`tags_hash`], the
//! same hash as OpenShift's, so PVs its operator annotated are not tagged again) and takes the
//! PVs of `ebs.csi.aws.com` whose annotation [`HASH_ANNOTATION`] differs; in batches of
//! [`BATCH_SIZE`], EC2 `DescribeTags` leaves out the volumes that carry every tag already,
//! `CreateTags` tags the others (the volume IDs are the PVs' `spec.csi.volumeHandle`), then
//! each PV of the batch gets the new hash. A batch `CreateTags` refuses is tried again volume by
//! volume; a volume that no longer exists (`InvalidVolume.NotFound`) is skipped. Every failure
//! to tag is a Warning Event `EBSVolumeTagsUpdateFailed` on the ClusterCSIDriver, and the run's
//! failures are its condition `AWSEBSEBSVolumeTagsControllerDegraded`.
//!
//! Its AWS identity is the web identity of the guest's Secret
//! `openshift-cluster-csi-drivers/ebs-cloud-credentials` (key `credentials`: `role_arn` and
//! `web_identity_token_file` of `[default]`): STS `AssumeRoleWithWebIdentity` with the token
//! HyperShift's token minter writes beside the operator (session `aws-ebs-csi-driver-operator`),
//! again once the token's `exp` or the credentials' expiry has passed. Region and custom
//! endpoints (`ec2`, `sts`) are the Infrastructure's; the custom CA bundle of
//! `kube-cloud-config`, when it has one, is trusted.
//!
//! Where it differs from OpenShift's on purpose: no cache of every PV (OpenShift's watches them
//! all) — it remembers the hash of its last complete run, and only when the tags' hash differs
//! from it lists the PVs through the API, [`BATCH_SIZE`] at a time, keeping the names and volume
//! IDs of those to tag; a PV gets the hash by a merge patch of that one annotation. So a PV
//! made after a complete run is not looked at until the tags change (the driver tags its volume
//! when it creates it). After a failed run it tries again after [`Timing::first_retry`],
//! doubling up to [`Timing::max_retry`], and says the failure meanwhile (a run stops at the
//! first call EC2 does not answer, rather than wait for every batch in turn); at once when the tags,
//! the credentials Secret, the region, the endpoints or the CA bundle change. It runs only with a
//! hosted control plane, as OpenShift's.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::config_v1::{AWSPlatformStatus, ResourceTag};
use csi_kit::{DriverDef, HookError, Inputs};
use driver_operator::{Task, TaskConfig};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::aws_api::{self, Credentials, Ec2, Endpoint};
use crate::aws_ebs;
use crate::http::{Tls, http_client};

/// The controller's name, OpenShift's (`cfg.GetControllerName("EBSVolumeTagsController")` with
/// the AWS EBS prefix `AWSEBS`): its condition is `AWSEBSEBSVolumeTagsControllerDegraded`.
pub const CONTROLLER: &str = "AWSEBSEBSVolumeTagsController";
/// The PV annotation with the hash of the tags its volume has.
pub const HASH_ANNOTATION: &str = "ebs.openshift.io/volume-tags-hash";
/// The volumes of one `CreateTags` call, and the PVs of one list page.
pub const BATCH_SIZE: usize = 50;
/// The reason of the Warning Events of a failure to tag.
pub const FAILED_REASON: &str = "EBSVolumeTagsUpdateFailed";
/// The role session name of the STS call.
pub const SESSION_NAME: &str = "aws-ebs-csi-driver-operator";
/// The key of the credentials Secret with the credentials file.
pub const CREDENTIALS_KEY: &str = "credentials";
/// AWS's code for a volume that does not exist.
pub const VOLUME_NOT_FOUND: &str = "InvalidVolume.NotFound";
/// How many failures the condition lists (the Events have every one).
const LISTED_FAILURES: usize = 5;
/// How long before STS's expiry the credentials are renewed.
const RENEW_BEFORE: i64 = 60;

/// When a failed run is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// After a failure: this, then twice as long after each failure with the same tags.
    pub first_retry: Duration,
    /// The longest time between two tries.
    pub max_retry: Duration,
}

impl Default for Timing {
    /// A minute doubling to 30 (OpenShift's queue starts at 10 seconds per volume, and
    /// resyncs every 30 minutes).
    fn default() -> Self {
        Self {
            first_retry: Duration::from_secs(60),
            max_retry: Duration::from_secs(30 * 60),
        }
    }
}

/// OpenShift's hash of the tags: SHA-256 (lowercase hex) of `key=value;` for each tag, sorted
/// by key.
pub fn tags_hash(tags: &[ResourceTag]) -> String {
    let mut sorted: Vec<&ResourceTag> = tags.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let text: String = sorted
        .iter()
        .map(|t| format!("{}={};", t.key, t.value))
        .collect();
    aws_api::hex_sha256(text.as_bytes())
}

/// What a run depends on besides the PVs and AWS: the tags' hash, the credentials Secret, the
/// region, endpoints and CA bundle.
fn attempt(inputs: &Inputs, hash: &str) -> String {
    let aws = inputs.platform_status.as_ref().and_then(|p| p.aws.as_ref());
    serde_json::json!([
        hash,
        inputs.secret_hashes.get(aws_ebs::CREDENTIALS_SECRET),
        aws.and_then(|a| a.region.as_ref()),
        aws_ebs::service_endpoint(inputs, "ec2"),
        aws_ebs::service_endpoint(inputs, "sts"),
        inputs
            .copied_config_maps
            .get(aws_ebs::CLOUD_CONFIG)
            .and_then(|data| data.get(aws_ebs::CA_BUNDLE_KEY)),
    ])
    .to_string()
}

/// Temporary credentials and when to renew them (seconds since the epoch).
struct Session {
    credentials: Credentials,
    renew_at: i64,
}

/// The last failure: for which inputs ([`attempt`]), what it said, when to try again, the
/// delay it waited.
struct Failure {
    attempt: String,
    error: HookError,
    retry_at: Instant,
    delay: Duration,
}

#[derive(Default)]
struct State {
    /// The hash of the tags of the last complete run.
    done: Option<String>,
    session: Option<Session>,
    failure: Option<Failure>,
}

/// A PV whose volume may need the tags.
struct Pending {
    name: String,
    volume_id: String,
}

/// Why tagging a batch failed.
enum BatchError {
    /// `DescribeTags` failed: nothing was tagged.
    Describe(aws_api::AwsError),
    /// `CreateTags` failed.
    Create(aws_api::AwsError),
}

/// The controller (see the module docs).
pub struct VolumeTags {
    client: kube::Client,
    namespace: String,
    recorder: Recorder,
    regarding: ObjectReference,
    timing: Timing,
    state: tokio::sync::Mutex<State>,
}

impl std::fmt::Debug for VolumeTags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeTags")
            .field("namespace", &self.namespace)
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

fn names(batch: &[Pending]) -> String {
    let names: Vec<&str> = batch.iter().map(|p| p.name.as_str()).collect();
    format!("[{}]", names.join(" "))
}

impl VolumeTags {
    /// The controller of `def` (its namespace has the credentials Secret), reading and writing
    /// through `client` (the guest's, with a hosted control plane).
    pub fn new(client: kube::Client, def: &DriverDef, timing: Timing) -> Self {
        let reporter = Reporter {
            controller: driver_operator::operator_name(def),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            namespace: def.namespace.clone(),
            regarding: ObjectReference {
                api_version: Some("operator.openshift.io/v1".to_owned()),
                kind: Some("ClusterCSIDriver".to_owned()),
                name: Some(def.name.clone()),
                ..ObjectReference::default()
            },
            timing,
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    async fn run(&self, inputs: &Inputs) -> Result<bool, HookError> {
        if inputs.hosted.is_none() {
            return Ok(false);
        }
        let Some(aws) = inputs
            .platform_status
            .as_ref()
            .and_then(|p| p.aws.as_ref())
            .filter(|a| !a.resource_tags.is_empty())
        else {
            return Ok(false);
        };
        let hash = tags_hash(&aws.resource_tags);
        let mut state = self.state.lock().await;
        if state.done.as_deref() == Some(hash.as_str()) {
            return Ok(false);
        }
        // A failure is tried again at once when what it depends on changed.
        let attempt = attempt(inputs, &hash);
        let previous = state.failure.take().filter(|f| f.attempt == attempt);
        if let Some(failure) = previous.as_ref().filter(|f| Instant::now() < f.retry_at) {
            let error = failure.error.clone();
            state.failure = previous;
            return Err(error);
        }
        match self.update(inputs, aws, &hash, &mut state).await {
            Ok(wrote) => {
                tracing::info!(
                    hash,
                    "the EBS volumes have the Infrastructure's resource tags"
                );
                state.done = Some(hash);
                Ok(wrote)
            }
            Err(error) => {
                let delay = previous.map_or(self.timing.first_retry, |f| {
                    (f.delay * 2).clamp(self.timing.first_retry, self.timing.max_retry)
                });
                state.failure = Some(Failure {
                    attempt,
                    error: error.clone(),
                    retry_at: Instant::now() + delay,
                    delay,
                });
                Err(error)
            }
        }
    }

    /// Tags the volumes of the PVs without `hash`; whether it wrote.
    async fn update(
        &self,
        inputs: &Inputs,
        aws: &AWSPlatformStatus,
        hash: &str,
        state: &mut State,
    ) -> Result<bool, HookError> {
        let pending = self.pending(hash).await?;
        if pending.is_empty() {
            return Ok(false);
        }
        tracing::info!(
            volumes = pending.len(),
            hash,
            "tagging EBS volumes with the Infrastructure's resource tags"
        );
        let ec2 = self.ec2(inputs, aws, state).await?;
        let tags: Vec<(String, String)> = aws
            .resource_tags
            .iter()
            .map(|t| (t.key.clone(), t.value.clone()))
            .collect();
        let mut failures = Vec::new();
        let mut wrote = false;
        let mut tried = 0;
        for batch in pending.chunks(BATCH_SIZE) {
            tried += batch.len();
            // Whether EC2 gave no answer (unreachable, timed out): the run stops there rather
            // than wait for every batch in turn.
            let unanswered = match tag(&ec2, &tags, batch).await {
                Ok(tagged) => {
                    wrote |= tagged;
                    for pv in batch {
                        wrote |= self.annotate(pv, hash, &mut failures).await;
                    }
                    false
                }
                Err(BatchError::Describe(error)) => {
                    failures.push(format!(
                        "reading the tags of the volumes of PersistentVolumes {} (EC2 DescribeTags) failed: {error}",
                        names(batch)
                    ));
                    error.code().is_none()
                }
                Err(BatchError::Create(error)) => {
                    self.warn(
                        "TagBatch",
                        &batch[0],
                        format!(
                            "failed to update tags for batch {}: {error}; trying volume by volume",
                            names(batch)
                        ),
                    )
                    .await;
                    let mut unanswered = false;
                    for pv in batch {
                        let (tagged, no_answer) =
                            self.one(&ec2, &tags, pv, hash, &mut failures).await;
                        wrote |= tagged;
                        if no_answer {
                            unanswered = true;
                            break;
                        }
                    }
                    unanswered
                }
            };
            if unanswered {
                if tried < pending.len() {
                    failures.push(format!(
                        "{} more PersistentVolumes not tried (EC2 did not answer)",
                        pending.len() - tried
                    ));
                }
                break;
            }
        }
        if failures.is_empty() {
            return Ok(wrote);
        }
        let count = failures.len();
        let mut listed: Vec<String> = failures.into_iter().take(LISTED_FAILURES).collect();
        if count > LISTED_FAILURES {
            listed.push(format!("and {} more", count - LISTED_FAILURES));
        }
        Err(HookError::cloud(format!(
            "tagging the EBS volumes with the Infrastructure's resource tags failed: {} (see the {FAILED_REASON} Events; it is tried again)",
            listed.join("; ")
        )))
    }

    /// One volume after its batch failed: whether it wrote, and whether EC2 gave no answer.
    async fn one(
        &self,
        ec2: &Ec2,
        tags: &[(String, String)],
        pv: &Pending,
        hash: &str,
        failures: &mut Vec<String>,
    ) -> (bool, bool) {
        match tag(ec2, tags, std::slice::from_ref(pv)).await {
            Ok(tagged) => (tagged | self.annotate(pv, hash, failures).await, false),
            Err(BatchError::Describe(error) | BatchError::Create(error))
                if error.code() == Some(VOLUME_NOT_FOUND) =>
            {
                tracing::warn!(pv = %pv.name, volume = %pv.volume_id, %error, "the volume does not exist; skipped");
                (false, false)
            }
            Err(BatchError::Describe(error) | BatchError::Create(error)) => {
                let message = format!(
                    "volume {} of PersistentVolume {}: {error}",
                    pv.volume_id, pv.name
                );
                self.warn(
                    "TagVolume",
                    pv,
                    format!("failed to update tags for {message}"),
                )
                .await;
                failures.push(message);
                (false, error.code().is_none())
            }
        }
    }

    /// The EBS PVs whose hash annotation is not `hash`, listed [`BATCH_SIZE`] at a time.
    async fn pending(&self, hash: &str) -> Result<Vec<Pending>, HookError> {
        let api = Api::<PersistentVolume>::all(self.client.clone());
        let mut params = ListParams::default().limit(BATCH_SIZE as u32);
        let mut pending = Vec::new();
        loop {
            let page = api.list(&params).await.map_err(|e| {
                HookError::api(format!(
                    "listing PersistentVolumes to tag their EBS volumes failed: {e}"
                ))
            })?;
            for pv in page.items {
                let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
                    continue;
                };
                let annotated = pv
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(HASH_ANNOTATION));
                if csi.driver != aws_ebs::CSI_NAME
                    || annotated.map(String::as_str) == Some(hash)
                    || csi.volume_handle.is_empty()
                {
                    continue;
                }
                pending.push(Pending {
                    name: pv.metadata.name.clone().unwrap_or_default(),
                    volume_id: csi.volume_handle.clone(),
                });
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(pending),
            }
        }
    }

    /// Sets the hash annotation of `pv` (a merge patch of that annotation only); whether it
    /// wrote. A PV deleted meanwhile is skipped.
    async fn annotate(&self, pv: &Pending, hash: &str, failures: &mut Vec<String>) -> bool {
        let api = Api::<PersistentVolume>::all(self.client.clone());
        let patch = serde_json::json!({"metadata": {"annotations": {HASH_ANNOTATION: hash}}});
        let params = PatchParams {
            field_manager: Some(format!(
                "{}/{CONTROLLER}",
                opkit::apply::FIELD_MANAGER_PREFIX
            )),
            ..PatchParams::default()
        };
        match api.patch(&pv.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => true,
            Err(kube::Error::Api(status)) if status.code == 404 => false,
            Err(error) => {
                failures.push(format!(
                    "the volume {} is tagged, but annotating PersistentVolume {} with {HASH_ANNOTATION} failed: {error}",
                    pv.volume_id, pv.name
                ));
                false
            }
        }
    }

    /// A Warning Event [`FAILED_REASON`] of `action` (`TagBatch`, `TagVolume`) on the
    /// ClusterCSIDriver, related to PV `pv` (the first of a batch): kube's recorder counts the
    /// repeats of an Event of the same action and objects as one.
    async fn warn(&self, action: &str, pv: &Pending, note: String) {
        tracing::warn!("{note}");
        let event = Event {
            type_: EventType::Warning,
            reason: FAILED_REASON.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("PersistentVolume".to_owned()),
                name: Some(pv.name.clone()),
                ..ObjectReference::default()
            }),
        };
        if let Err(error) = self.recorder.publish(&event, &self.regarding).await {
            tracing::warn!(pv = %pv.name, %error, "recording an Event failed");
        }
    }

    /// The EC2 client: the Infrastructure's region and endpoints, the cluster's custom CA
    /// bundle, and the session's credentials.
    async fn ec2(
        &self,
        inputs: &Inputs,
        aws: &AWSPlatformStatus,
        state: &mut State,
    ) -> Result<Ec2, HookError> {
        let region = aws
            .region
            .as_deref()
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                HookError::config(
                    "Infrastructure cluster has no status.platformStatus.aws.region: the volumes' region is needed to tag them",
                )
            })?;
        let tls = match inputs
            .copied_config_maps
            .get(aws_ebs::CLOUD_CONFIG)
            .and_then(|data| data.get(aws_ebs::CA_BUNDLE_KEY))
        {
            Some(pem) => Tls::WithCa(pem.clone()),
            None => Tls::System,
        };
        let http = http_client(&tls).map_err(|e| {
            HookError::config(format!(
                "key {} of ConfigMap {}/{}: {e}",
                aws_ebs::CA_BUNDLE_KEY,
                self.namespace,
                aws_ebs::CLOUD_CONFIG
            ))
        })?;
        let endpoint = |service: &str| {
            match aws_ebs::service_endpoint(inputs, service) {
            Some(url) => Endpoint::parse(&url).map_err(|e| {
                HookError::config(format!(
                    "the {service} endpoint of Infrastructure cluster (status.platformStatus.aws.serviceEndpoints) is unusable: {e}"
                ))
            }),
            None => Endpoint::regional(service, region).map_err(|e| {
                HookError::config(format!(
                    "no {service} endpoint for region {region:?} of Infrastructure cluster: {e}"
                ))
            }),
        }
        };
        let ec2_endpoint = endpoint("ec2")?;
        let now = Timestamp::now().as_second();
        let credentials = match state.session.as_ref().filter(|s| now < s.renew_at) {
            Some(session) => session.credentials.clone(),
            None => {
                let session = self.assume(&http, &endpoint("sts")?).await?;
                let credentials = session.credentials.clone();
                state.session = Some(session);
                credentials
            }
        };
        Ok(Ec2::new(http, ec2_endpoint, region, credentials))
    }

    /// New temporary credentials: the role and token file of the credentials Secret, STS.
    async fn assume(
        &self,
        http: &crate::http::HttpClient,
        sts: &Endpoint,
    ) -> Result<Session, HookError> {
        let id = format!("Secret {}/{}", self.namespace, aws_ebs::CREDENTIALS_SECRET);
        let secret = Api::<Secret>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(aws_ebs::CREDENTIALS_SECRET)
            .await
            .map_err(|e| HookError::api(format!("reading {id} failed: {e}")))?
            .ok_or_else(|| {
                HookError::config(format!(
                    "{id} does not exist: it names the AWS role the operator assumes to tag the EBS volumes (HyperShift creates it in the hosted cluster)"
                ))
            })?;
        let text = secret
            .data
            .as_ref()
            .and_then(|d| d.get(CREDENTIALS_KEY))
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .ok_or_else(|| {
                HookError::config(format!(
                    "{id} has no key {CREDENTIALS_KEY}: it must hold an AWS credentials file with role_arn and web_identity_token_file in its [default] section"
                ))
            })?;
        let identity =
            aws_api::parse_web_identity(&text, &format!("key {CREDENTIALS_KEY} of {id}"))
                .map_err(HookError::config)?;
        let path = &identity.token_file;
        // A few hundred bytes on a memory volume: read at once.
        let token = std::fs::read_to_string(path).map_err(|e| {
            HookError::config(format!(
                "cannot read the web identity token file {path} that key {CREDENTIALS_KEY} of {id} names: {e} (HyperShift's token minter writes it beside the operator)"
            ))
        })?;
        let token = token.trim();
        let expiry = aws_api::token_expiry(token)
            .map_err(|e| HookError::config(format!("the web identity token file {path}: {e}")))?;
        let sts_answer =
            aws_api::assume_role_with_web_identity(http, sts, &identity.role_arn, SESSION_NAME, token)
                .await
                .map_err(|e| {
                    HookError::cloud(format!(
                        "assuming role {} with the web identity token of {path} (STS AssumeRoleWithWebIdentity) failed: {e}",
                        identity.role_arn
                    ))
                })?;
        let renew_at = sts_answer
            .expiration
            .map_or(expiry, |e| expiry.min(e.as_second() - RENEW_BEFORE));
        tracing::info!(role = %identity.role_arn, renew_at, "assumed the role to tag EBS volumes");
        Ok(Session {
            credentials: sts_answer.credentials,
            renew_at,
        })
    }
}

/// Tags the volumes of `batch` that lack some of `tags`; whether it called `CreateTags`.
async fn tag(ec2: &Ec2, tags: &[(String, String)], batch: &[Pending]) -> Result<bool, BatchError> {
    let ids: Vec<String> = batch.iter().map(|p| p.volume_id.clone()).collect();
    let existing = ec2
        .describe_tags(&ids)
        .await
        .map_err(BatchError::Describe)?;
    let needing: Vec<String> = ids
        .into_iter()
        .filter(|id| {
            let has = existing.get(id);
            !tags
                .iter()
                .all(|(k, v)| has.and_then(|h| h.get(k)) == Some(v))
        })
        .collect();
    if needing.is_empty() {
        return Ok(false);
    }
    ec2.create_tags(&needing, tags)
        .await
        .map_err(BatchError::Create)?;
    Ok(true)
}

impl Task for VolumeTags {
    fn sync<'a>(
        &'a self,
        inputs: &'a Inputs,
    ) -> Pin<Box<dyn Future<Output = Result<bool, HookError>> + Send + 'a>> {
        Box::pin(self.run(inputs))
    }
}

/// The controller of `def` over `client`, with `timing`: it runs on every reconcile (the kit
/// watches the Infrastructure and the credentials Secret) and at least every
/// `timing.first_retry`, so a retry is never late.
pub fn task_with(client: kube::Client, def: &DriverDef, timing: Timing) -> TaskConfig {
    TaskConfig {
        name: CONTROLLER.to_owned(),
        task: Arc::new(VolumeTags::new(client, def, timing)),
        interval: timing.first_retry,
        config_maps: Vec::new(),
    }
}

/// [`task_with`] OpenShift's timing ([`Timing::default`]).
pub fn task(client: kube::Client, def: &DriverDef) -> TaskConfig {
    task_with(client, def, Timing::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(key: &str, value: &str) -> ResourceTag {
        ResourceTag {
            key: key.into(),
            value: value.into(),
        }
    }

    /// OpenShift's `computeTagsHash` of these tags hashes `env=prod;team=storage;` (sorted by
    /// key): `printf 'env=prod;team=storage;' | sha256sum`.
    #[test]
    fn the_hash_is_openshifts() {
        let want = "eac4e15b800d925af0ac501b3171820039e86c5db461df77995dbe2bb47a5dde";
        assert_eq!(
            tags_hash(&[tag("team", "storage"), tag("env", "prod")]),
            want
        );
        assert_eq!(
            tags_hash(&[tag("env", "prod"), tag("team", "storage")]),
            want
        );
        assert_ne!(tags_hash(&[tag("env", "prod"), tag("team", "other")]), want);
    }
}
