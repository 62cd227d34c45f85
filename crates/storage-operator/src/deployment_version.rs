//! With a hosted control plane: the version HyperShift reads off each driver's controller
//! Deployment in the control-plane namespace, as OpenShift's `DeploymentVersionController`
//! (library-go) writes it. The driver operator asks for a release in the Deployment's
//! `release.openshift.io/desired-version` annotation; once the Deployment has rolled out (its
//! latest generation observed and `Progressing` with reason `NewReplicaSetAvailable`), and
//! when that release is this operator's own, the `release.openshift.io/version` annotation
//! says it is there. HyperShift reports the hosted cluster's control plane as updated from
//! these annotations.
//!
//! The cluster storage operator watches only those Deployments, projected to what this needs
//! ([`project`]); a failed write is `DeploymentVersionControllerDegraded` in the guest's
//! Storage, as OpenShift reports it.

use k8s_openapi::api::apps::v1::Deployment;

/// The annotation with the release the controller Deployment is rolled out for.
pub const VERSION_ANNOTATION: &str = "release.openshift.io/version";
/// The annotation with the release it is asked to run (see `csi_kit::hosted`).
pub const DESIRED_VERSION_ANNOTATION: &str = csi_kit::hosted::DESIRED_VERSION_ANNOTATION;
/// OpenShift's controller name, and so its condition's prefix and our field manager's suffix.
pub const CONTROLLER: &str = "DeploymentVersionController";

/// What is kept of a driver's controller Deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverController {
    /// Its name.
    pub name: String,
    /// `release.openshift.io/desired-version`.
    pub desired_version: Option<String>,
    /// `release.openshift.io/version`.
    pub version: Option<String>,
    /// Whether it has rolled out (see the module doc).
    pub rolled_out: bool,
}

/// Keeps what [`DriverController`] says of a Deployment named in `names`; nothing of others.
pub fn project(deployment: &Deployment, names: &[String]) -> Option<DriverController> {
    let name = deployment.metadata.name.as_deref()?;
    if !names.iter().any(|n| n == name) {
        return None;
    }
    let annotation = |key: &str| {
        deployment
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    let status = deployment.status.as_ref();
    let observed = status.and_then(|s| s.observed_generation) == deployment.metadata.generation;
    let progressed = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Progressing"))
        .is_some_and(|c| {
            c.status == "True" && c.reason.as_deref() == Some("NewReplicaSetAvailable")
        });
    Some(DriverController {
        name: name.to_owned(),
        desired_version: annotation(DESIRED_VERSION_ANNOTATION),
        version: annotation(VERSION_ANNOTATION),
        rolled_out: observed && progressed,
    })
}

/// The version to write on `controller` for an operator of version `operator_version`, when
/// one is due: it asks for this operator's release, has rolled out, and does not say so yet.
pub fn due(controller: &DriverController, operator_version: &str) -> Option<String> {
    let desired = controller.desired_version.as_deref()?;
    (desired == operator_version
        && controller.version.as_deref() != Some(desired)
        && controller.rolled_out)
        .then(|| desired.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(
        annotations: serde_json::Value,
        generation: i64,
        observed: i64,
        reason: &str,
    ) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "aws-ebs-csi-driver-controller", "namespace": "clusters-demo",
                         "generation": generation, "annotations": annotations},
            "status": {"observedGeneration": observed,
                       "conditions": [{"type": "Progressing", "status": "True", "reason": reason}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_version_is_due_once_the_asked_release_has_rolled_out() {
        let names = vec!["aws-ebs-csi-driver-controller".to_owned()];
        let asked = serde_json::json!({DESIRED_VERSION_ANNOTATION: "4.22.0"});
        let rolled = project(
            &deployment(asked.clone(), 2, 2, "NewReplicaSetAvailable"),
            &names,
        )
        .unwrap();
        assert_eq!(due(&rolled, "4.22.0").as_deref(), Some("4.22.0"));
        // Another release than this operator's, or not rolled out yet: not due.
        assert_eq!(due(&rolled, "4.21.0"), None);
        let rolling = project(
            &deployment(asked.clone(), 3, 2, "NewReplicaSetAvailable"),
            &names,
        )
        .unwrap();
        assert_eq!(due(&rolling, "4.22.0"), None);
        let progressing = project(&deployment(asked, 2, 2, "ReplicaSetUpdated"), &names).unwrap();
        assert_eq!(due(&progressing, "4.22.0"), None);
        // Said already: nothing to write.
        let said = project(
            &deployment(
                serde_json::json!({DESIRED_VERSION_ANNOTATION: "4.22.0", VERSION_ANNOTATION: "4.22.0"}),
                2,
                2,
                "NewReplicaSetAvailable",
            ),
            &names,
        )
        .unwrap();
        assert_eq!(due(&said, "4.22.0"), None);
        // Another Deployment of the namespace is not kept.
        assert!(project(&deployment(serde_json::json!({}), 1, 1, ""), &[]).is_none());
    }
}
