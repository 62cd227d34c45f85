//! The config observer: what library-go's CSI config observer writes into the ClusterCSIDriver's
//! `spec.observedConfig.targetcsiconfig`: `servingInfo` (`minTLSVersion`, `cipherSuites`) from
//! `APIServer/cluster`'s TLS security profile, and `proxy` (`HTTP_PROXY`, `HTTPS_PROXY`,
//! `NO_PROXY`) from `Proxy/cluster`'s status. Its condition is `ConfigObservationDegraded`.
//!
//! Where this differs from library-go on purpose: the operands do not wait for the observed
//! config to round-trip through the ClusterCSIDriver. The builders read the profile straight from
//! the APIServer cache in the same pass, so a profile change rolls the metrics proxies at once;
//! `observedConfig` is written for the tools and people who read it. The APIServer is watched
//! (library-go only caches it and notices changes on its 1-minute resync). An invalid Custom
//! profile keeps the last good `servingInfo` and says why in the condition.

use api::operator_v1::{ConditionStatus, OperatorCondition};
use opkit::conditions::condition;
use serde_json::{Map, Value, json};

use crate::observe::Observed;
use csi_kit::inputs::ServingTls;

/// The controller's name (its status field manager is `storage-operator/ConfigObserver`).
pub const CONFIG_OBSERVER: &str = "ConfigObserver";
/// Its condition (no driver prefix, as library-go's).
pub const CONFIG_OBSERVATION_DEGRADED: &str = "ConfigObservationDegraded";
/// The key under `spec.observedConfig` the observer owns.
pub const TARGET: &str = "targetcsiconfig";

/// The TLS settings of the metrics proxies for the observed cluster: from `APIServer/cluster`
/// when that API is served (no object or no profile: Intermediate), else from `observedConfig`.
pub fn serving_tls(observed: &Observed, observed_config: Option<&Value>) -> ServingTls {
    let from_config = || csi_kit::inputs::from_objects::serving_tls(observed_config);
    if !observed.apis.api_server {
        return from_config();
    }
    let profile = observed
        .cluster
        .api_server
        .as_ref()
        .and_then(|a| a.spec.tls_security_profile.as_ref());
    csi_kit::tls::serving_tls(profile).unwrap_or_else(|_| from_config())
}

/// What the observer finds: the `targetcsiconfig` to have (`None` on a cluster without these
/// APIs: nothing to observe) and the condition.
pub fn observe(observed: &Observed, current: Option<&Value>) -> (Option<Value>, OperatorCondition) {
    if !observed.apis.api_server && !observed.apis.proxy {
        return (None, ok());
    }
    let current_target = current.and_then(|c| c.get(TARGET));
    let mut target = Map::new();
    let mut error = None;
    if observed.apis.api_server {
        let profile = observed
            .cluster
            .api_server
            .as_ref()
            .and_then(|a| a.spec.tls_security_profile.as_ref());
        match csi_kit::tls::serving_tls(profile) {
            Ok(tls) => {
                target.insert(
                    "servingInfo".into(),
                    json!({"minTLSVersion": tls.min_version, "cipherSuites": tls.cipher_suites}),
                );
            }
            Err(message) => {
                if let Some(kept) = current_target.and_then(|t| t.get("servingInfo")) {
                    target.insert("servingInfo".into(), kept.clone());
                }
                error = Some(message);
            }
        }
    }
    if let Some(status) = observed
        .cluster
        .proxy
        .as_ref()
        .and_then(|p| p.status.as_ref())
    {
        let env: Map<String, Value> = status
            .env()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), Value::from(value)))
            .collect();
        if !env.is_empty() {
            target.insert("proxy".into(), Value::Object(env));
        }
    }
    let condition = match error {
        None => ok(),
        Some(message) => condition(
            CONFIG_OBSERVATION_DEGRADED,
            ConditionStatus::True,
            "Error",
            &message,
        ),
    };
    (Some(Value::Object(target)), condition)
}

fn ok() -> OperatorCondition {
    condition(
        CONFIG_OBSERVATION_DEGRADED,
        ConditionStatus::False,
        csi_kit::status::REASON_AS_EXPECTED,
        "",
    )
}

/// The JSON merge patch (RFC 7386) that turns `current` into `target`: changed and new keys
/// set, keys no longer wanted removed (null); equal keys left out.
pub fn merge_patch(current: Option<&Value>, target: &Value) -> Value {
    match (current, target) {
        (Some(Value::Object(current)), Value::Object(target)) => {
            let mut out = Map::new();
            for (key, want) in target {
                match current.get(key) {
                    Some(have) if have == want => {}
                    have => {
                        out.insert(key.clone(), merge_patch(have, want));
                    }
                }
            }
            for key in current.keys().filter(|k| !target.contains_key(*k)) {
                out.insert(key.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => target.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_merge_patch_sets_changes_and_removes_stale_keys() {
        let current = json!({"servingInfo": {"minTLSVersion": "VersionTLS12", "cipherSuites": ["A", "B"]},
                             "proxy": {"HTTP_PROXY": "http://p:3128"}});
        let target =
            json!({"servingInfo": {"minTLSVersion": "VersionTLS13", "cipherSuites": ["A", "B"]}});
        assert_eq!(
            merge_patch(Some(&current), &target),
            json!({"servingInfo": {"minTLSVersion": "VersionTLS13"}, "proxy": null})
        );
        assert_eq!(merge_patch(None, &target), target);
        assert_eq!(merge_patch(Some(&target), &target), json!({}));
    }
}
