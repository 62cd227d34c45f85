//! The cluster storage operator's scenarios on a real cluster (see the crate docs for how to
//! run), as the ServiceAccount of `deploy/kubernetes/storage-operator.yaml`: converge, drift
//! restored, an admin's edit of the ClusterCSIDriver kept, a deleted ClusterCSIDriver
//! recreated, Unmanaged pausing. On a cluster without OpenShift's Infrastructure it declares
//! the platform GCP, so the scenarios run anywhere (the driver operator's pod need not run:
//! the operator's behaviour is about its objects). It removes what it created at the end.

#![allow(clippy::unwrap_used)] // a test crate: a panic is a test failure

#[path = "../../../crates/drivers/tests/openshift_parity/fixtures.rs"]
mod fixtures;

use api::operator_v1::{ClusterCSIDriver, Storage};
use e2e::{cleanup, cso, ensure_gcp, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

const NS: &str = "openshift-cluster-csi-drivers";
const OPERATOR: &str = "gcp-pd-csi-driver-operator";
const DRIVER: &str = "pd.csi.storage.gke.io";

#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn converge_drift_recreate_and_unmanaged() {
    let admin = e2e::admin().await;
    let declared = ensure_gcp(&admin).await;
    let identity = cso::prepare(&admin).await;
    let running = cso::start(&identity);
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let drivers: Api<ClusterCSIDriver> = Api::all(admin.clone());
    let storages: Api<Storage> = Api::all(admin.clone());

    // Converge.
    wait_for("the driver operator Deployment", async || {
        deployments.get_opt(OPERATOR).await.unwrap()
    })
    .await;
    wait_for("the ClusterCSIDriver", async || {
        drivers.get_opt(DRIVER).await.unwrap()
    })
    .await;

    // Drift: scaled to zero, restored.
    let scale = |replicas: i32| json!({"spec": {"replicas": replicas}});
    deployments
        .patch(OPERATOR, &PatchParams::default(), &Patch::Merge(scale(0)))
        .await
        .unwrap();
    wait_for("the scale restored", async || {
        (deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas
            == Some(1))
        .then_some(())
    })
    .await;

    // An admin's edit is kept; a deleted ClusterCSIDriver comes back.
    let passes = running.passes();
    drivers
        .patch(
            DRIVER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"logLevel": "Debug"}})),
        )
        .await
        .unwrap();
    running.settled_since(passes).await;
    assert_eq!(
        drivers
            .get(DRIVER)
            .await
            .unwrap()
            .spec
            .operator
            .log_level
            .unwrap()
            .as_str(),
        "Debug"
    );
    drivers
        .delete(DRIVER, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the ClusterCSIDriver recreated", async || {
        drivers
            .get_opt(DRIVER)
            .await
            .unwrap()
            .filter(|d| d.metadata.deletion_timestamp.is_none())
    })
    .await;

    // Unmanaged: hands off.
    let state = |s: &str| json!({"spec": {"managementState": s}});
    let passes = running.passes();
    storages
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(state("Unmanaged")),
        )
        .await
        .unwrap();
    running.settled_since(passes).await;
    let passes = running.passes();
    deployments
        .patch(OPERATOR, &PatchParams::default(), &Patch::Merge(scale(0)))
        .await
        .unwrap();
    running.settled_since(passes).await;
    assert_eq!(
        deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(0),
        "Unmanaged left it alone"
    );
    storages
        .patch(
            "cluster",
            &PatchParams::default(),
            &Patch::Merge(state("Managed")),
        )
        .await
        .unwrap();
    wait_for("Managed again restores it", async || {
        (deployments
            .get(OPERATOR)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas
            == Some(1))
        .then_some(())
    })
    .await;

    running.stop().await;
    cso::finish(&admin, &identity, "gcp-pd").await;
    cleanup::undeclare_platform(&admin, declared).await;
}

/// On OpenStack the cluster storage operator starts Manila, whose operands live apart from its
/// operator: as the ServiceAccount of the install manifests, it makes their namespace and gives
/// the driver operator a Role there and in the driver namespace, which the API server allows
/// only if it holds every permission it grants in each (it is never refused a request).
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn manila_gets_its_operand_namespace_and_roles_there() {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let admin = e2e::admin().await;
    let declared = e2e::ensure_platform(&admin, json!({"type": "OpenStack"})).await;
    let identity = cso::prepare(&admin).await;
    let running = cso::start(&identity);

    let def = drivers::by_name("openstack-manila").unwrap();
    let operator = storage_operator::registry::find("openstack-manila")
        .unwrap()
        .operator_deployment;
    let apart = def.namespace.as_str();
    assert_ne!(apart, NS, "Manila's operands live apart from its operator");
    let namespace = wait_for("Manila's operand namespace", async || {
        Api::<Namespace>::all(admin.clone())
            .get_opt(apart)
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        namespace.metadata.labels.unwrap()["openshift.io/cluster-monitoring"],
        "true"
    );
    for ns in [apart, NS] {
        wait_for(&format!("the driver operator's Role in {ns}"), async || {
            Api::<Role>::namespaced(admin.clone(), ns)
                .get_opt(&format!("{operator}-role"))
                .await
                .unwrap()
        })
        .await;
        wait_for(
            &format!("the driver operator's RoleBinding in {ns}"),
            async || {
                Api::<RoleBinding>::namespaced(admin.clone(), ns)
                    .get_opt(&format!("{operator}-rolebinding"))
                    .await
                    .unwrap()
            },
        )
        .await;
    }
    wait_for("Manila's driver operator Deployment", async || {
        Api::<Deployment>::namespaced(admin.clone(), NS)
            .get_opt(operator)
            .await
            .unwrap()
    })
    .await;

    running.stop().await;
    for short in ["openstack-cinder", "openstack-manila"] {
        cso::finish(&admin, &identity, short).await;
    }
    cleanup::undeclare_platform(&admin, declared).await;
}

/// Taking over from OpenShift's cluster-storage-operator on the real API server, as the
/// operator's own ServiceAccount: the GCP PD driver operator Deployment the Go operator made
/// (with Update under its field manager, `strategy: {}` defaulted to RollingUpdate) is
/// adopted whole as our `Recreate` one; before, kube-apiserver refused every apply with
/// `spec.strategy.rollingUpdate: Forbidden` and no condition said so. Then a write the server
/// refuses (a ValidatingAdmissionPolicy denies the operator's updates of that Deployment) shows
/// in the same pass as `GCPPDCSIDriverOperatorDeploymentDegraded=True` with the server's
/// answer, and clears once the server accepts it again.
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn takes_over_openshifts_driver_operator_and_reports_a_refused_write() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
    let admin = e2e::admin().await;
    let declared = ensure_gcp(&admin).await;
    let identity = cso::prepare(&admin).await;
    e2e::install::ensure_namespace(&admin, NS).await;
    // As OpenShift's operator wrote them: created under its field manager.
    let former = PostParams {
        field_manager: Some(storage_operator::operator::FORMER_OPERATOR.into()),
        ..PostParams::default()
    };
    Api::<ServiceAccount>::namespaced(admin.clone(), NS)
        .create(
            &former,
            &serde_json::from_value(json!({"metadata": {"name": OPERATOR, "namespace": NS}}))
                .unwrap(),
        )
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    deployments
        .create(
            &former,
            &serde_json::from_value(json!({
                "metadata": {"name": OPERATOR, "namespace": NS},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"name": OPERATOR}},
                    "strategy": {},
                    "template": {"metadata": {"labels": {"name": OPERATOR}},
                        "spec": {"serviceAccountName": OPERATOR,
                            "containers": [{"name": OPERATOR,
                                "image": "quay.io/openshift/gcp-pd-csi-driver-operator:4.22",
                                "args": ["start", "-v=2"]}]}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();

    // Its metrics Service, as OpenShift's asset has it.
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(admin.clone(), NS);
    services
        .create(
            &former,
            &serde_json::from_value(json!({
                "metadata": {"name": format!("{OPERATOR}-metrics"), "namespace": NS,
                    "labels": {"app": OPERATOR},
                    "annotations": {"service.beta.openshift.io/serving-cert-secret-name":
                        format!("{OPERATOR}-serving-cert")}},
                "spec": {"selector": {"name": OPERATOR}, "sessionAffinity": "None",
                    "type": "ClusterIP",
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                        "targetPort": 8443}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();

    // The volume data source validator as OpenShift's operator made it: its ServiceAccount
    // and its Deployment (RollingUpdate by default, with OpenShift's arguments).
    let validators: Api<Deployment> =
        Api::namespaced(admin.clone(), storage_operator::plan::OPERATOR_NAMESPACE);
    {
        use storage_operator::plan::OPERATOR_NAMESPACE;
        use storage_operator::validator::NAME;
        Api::<ServiceAccount>::namespaced(admin.clone(), OPERATOR_NAMESPACE)
            .create(
                &former,
                &serde_json::from_value(json!({"metadata": {"name": NAME}})).unwrap(),
            )
            .await
            .unwrap();
        validators
            .create(
                &former,
                &serde_json::from_value(json!({
                    "metadata": {"name": NAME},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"name": NAME}},
                        "template": {"metadata": {"labels": {"name": NAME}},
                            "spec": {"serviceAccountName": NAME,
                                "containers": [{"name": NAME,
                                    "image": "quay.io/openshift/volume-data-source-validator:4.22",
                                    "args": ["--v=2", "--http-endpoint=127.0.0.1:8443"]}]}}}
                }))
                .unwrap(),
            )
            .await
            .unwrap();
    }

    // Storage/cluster as OpenShift left it: a condition of a controller ours has no
    // counterpart for, written by the former operator, is removed once ours runs.
    let storages: Api<Storage> = Api::all(admin.clone());
    if storages.get_opt("cluster").await.unwrap().is_none() {
        storages
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "cluster"},
                    "spec": {"managementState": "Managed"}}))
                .unwrap(),
            )
            .await
            .unwrap();
    }
    storages
        .patch_status(
            "cluster",
            &PatchParams {
                field_manager: Some(storage_operator::operator::FORMER_OPERATOR.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "VSphereProblemDetectorDeploymentControllerAvailable", "status": "True",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await
        .unwrap();

    // OpenShift's library-go controllers apply their conditions under their own field
    // managers (`<controller>-reportDegraded`, ...): a Degraded=True one left by a controller
    // ours has no counterpart for here (AWS EBS's, on this GCP cluster) must not linger.
    storages
        .patch_status(
            "cluster",
            &PatchParams::apply("AWSEBSCSIDriverOperator-reportDegraded"),
            &Patch::Apply(
                json!({"apiVersion": "operator.openshift.io/v1", "kind": "Storage",
                "status": {"conditions": [{"type": "AWSEBSCSIDriverOperatorDegraded",
                    "status": "True", "reason": "SyncError", "message": "left behind",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
            ),
        )
        .await
        .unwrap();

    let running = cso::start(&identity);
    wait_for(
        "the stale condition of a library-go controller removed",
        async || {
            cso::storage_condition(&admin, "AWSEBSCSIDriverOperatorDegraded")
                .await
                .is_none()
                .then_some(())
        },
    )
    .await;
    wait_for(
        "the former operator's stale condition removed",
        async || {
            cso::storage_condition(
                &admin,
                "VSphereProblemDetectorDeploymentControllerAvailable",
            )
            .await
            .is_none()
            .then_some(())
        },
    )
    .await;
    let adopted = wait_for("the Deployment adopted", async || {
        let d = deployments.get(OPERATOR).await.unwrap();
        let spec = d.spec.clone()?;
        let args = spec.template.spec.as_ref()?.containers[0].args.clone()?;
        (args
            == [
                "driver",
                "gcp-pd",
                "--config=/var/run/configmaps/config/config.yaml",
                "--metrics-address=0.0.0.0:8443",
            ])
        .then_some(d)
    })
    .await;
    let strategy = adopted.spec.unwrap().strategy.unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("Recreate"));
    assert!(strategy.rolling_update.is_none(), "{strategy:?}");
    assert!(
        adopted
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .all(|e| e.manager.as_deref() != Some(storage_operator::operator::FORMER_OPERATOR)),
        "no field is left to the former operator"
    );
    // The metrics Service: taken over in place, the same ports, no field left to the former
    // operator.
    let service =
        wait_for("the metrics Service adopted", async || {
            let service = services.get(&format!("{OPERATOR}-metrics")).await.unwrap();
            let ours = service
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(storage_operator::starter::STARTER_LABEL));
            let former_left =
                service.metadata.managed_fields.iter().flatten().any(|e| {
                    e.manager.as_deref() == Some(storage_operator::operator::FORMER_OPERATOR)
                });
            (ours && !former_left).then_some(service)
        })
        .await;
    let ports = service.spec.unwrap().ports.unwrap();
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].port),
        (Some("https"), 443)
    );
    wait_for("the Deployment's Degraded False", async || {
        cso::storage_condition(&admin, "GCPPDCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    // The validator's objects were OpenShift's operator's: adopted in place, not reported as
    // someone else's.
    let validator = wait_for("the validator's Deployment adopted", async || {
        let d = validators
            .get(storage_operator::validator::NAME)
            .await
            .unwrap();
        opkit::ownership::applied_by_us(&d.metadata).then_some(d)
    })
    .await;
    assert!(
        validator
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .all(|e| e.manager.as_deref() != Some(storage_operator::operator::FORMER_OPERATOR)),
        "no field of the validator is left to the former operator"
    );
    for type_ in [
        "VolumeDataSourceValidatorStaticControllerDegraded",
        "VolumeDataSourceValidatorDeploymentControllerDegraded",
    ] {
        wait_for(&format!("{type_} False"), async || {
            cso::storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == "False")
        })
        .await;
    }

    // The API server refuses the operator's next write of that Deployment.
    let policy_resource = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            plural,
        )
    };
    let policies: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &policy_resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    );
    let bindings: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &policy_resource(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    );
    let name = "e2e-refuse-driver-operator-writes";
    policies
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": {"failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                        "operations": ["UPDATE"], "resources": ["deployments"]}]},
                    "validations": [{
                        "expression": format!("object.metadata.name != '{OPERATOR}' || request.userInfo.username != '{}'", identity.user),
                        "message": "e2e: this write is refused on purpose",
                        "reason": "Invalid"}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {"policyName": name, "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // The policy takes a moment to be enforced: keep asking for a change of the Deployment
    // (its log level) until a pass is refused and says so.
    let mut level = 0;
    let (_, reason, message) = wait_for("the Deployment's Degraded True", async || {
        level += 1;
        let log_level = if level % 2 == 0 { "Normal" } else { "Debug" };
        storages
            .patch(
                "cluster",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"logLevel": log_level}})),
            )
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        cso::storage_condition(&admin, "GCPPDCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(reason, "SyncError");
    assert!(
        message.contains(&format!("Deployment {NS}/{OPERATOR}"))
            && message.contains("e2e: this write is refused on purpose"),
        "{message}"
    );

    bindings
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    policies
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the Deployment's Degraded False again", async || {
        cso::storage_condition(&admin, "GCPPDCSIDriverOperatorDeploymentDegraded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;

    running.stop().await;
    cso::finish(&admin, &identity, "gcp-pd").await;
    cleanup::undeclare_platform(&admin, declared).await;
}

/// The namespace-label ValidatingAdmissionPolicy of `deploy/openshift` on the real API
/// server: a namespace whose storage policy label has a value it does not take is refused,
/// naming the label and the values; valid values and other namespaces are accepted.
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn the_namespace_label_policy_refuses_unknown_storage_policies() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
    let admin = e2e::admin().await;
    let resource = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            plural,
        )
    };
    let mut applied = Vec::new();
    for object in storage_operator::manifests::namespace_label_policy() {
        let (kind, plural) = match object["kind"].as_str().unwrap() {
            "ValidatingAdmissionPolicy" => {
                ("ValidatingAdmissionPolicy", "validatingadmissionpolicies")
            }
            _ => (
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
            ),
        };
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource(kind, plural));
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        api.patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
        applied.push((api, name));
    }
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace = |name: &str, value: &str| -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name,
            "labels": {"storage.openshift.io/fsgroup-change-policy": value}}}))
        .unwrap()
    };
    // The policy is enforced a moment after it is created.
    let message = wait_for("the bad label refused", async || {
        match namespaces
            .create(
                &PostParams::default(),
                &namespace("e2e-bad-fsgroup-policy", "Sometimes"),
            )
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 422 => Some(status.message),
            Ok(_) => {
                cleanup::delete_and_wait(&namespaces, "e2e-bad-fsgroup-policy").await;
                None
            }
            Err(error) => panic!("{error}"),
        }
    })
    .await;
    assert!(
        message.contains(
            "Invalid value 'Sometimes' for label storage.openshift.io/fsgroup-change-policy. Valid values are: Always, OnRootMismatch"
        ),
        "{message}"
    );
    namespaces
        .create(
            &PostParams::default(),
            &namespace("e2e-good-fsgroup-policy", "OnRootMismatch"),
        )
        .await
        .unwrap();
    cleanup::delete_and_wait(&namespaces, "e2e-good-fsgroup-policy").await;
    for (api, name) in applied.into_iter().rev() {
        api.delete(&name, &DeleteParams::default()).await.unwrap();
    }
}

/// A CRD of a Prometheus operator kind accepting any object, as a cluster without Prometheus'
/// operator gets it in this test.
fn monitoring_crd(
    kind: storage_operator::monitoring::Kind,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    fixtures::open_crd("monitoring.coreos.com", kind.kind(), kind.plural(), true)
}

/// The operator's ServiceMonitor and PrometheusRule on the real API server, as the
/// ServiceAccount of the install manifests: with Prometheus' CRDs installed after the operator
/// started, both objects appear (the operator watches the CRDs by name, then each object by
/// name, and applies it), under its field manager, with nothing refused by the RBAC it ships;
/// `StorageOperatorMonitoringControllerDegraded` is False throughout. The CRDs this test
/// installed are removed at the end (with the objects).
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn the_service_monitor_and_rules_appear_once_prometheus_crds_exist() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::DynamicObject;
    use storage_operator::monitoring::{Kind, build_prometheus_rule, build_service_monitor};
    use storage_operator::plan::OPERATOR_NAMESPACE;

    let admin = e2e::admin().await;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut installed = Vec::new();
    for kind in Kind::ALL {
        if crds.get_opt(kind.crd_name()).await.unwrap().is_none() {
            installed.push(kind);
        }
    }
    let declared = ensure_gcp(&admin).await;
    let identity = cso::prepare(&admin).await;
    let running = cso::start(&identity);
    let degraded = "StorageOperatorMonitoringControllerDegraded";
    wait_for("monitoring not Degraded", async || {
        cso::storage_condition(&admin, degraded)
            .await
            .filter(|c| c.0 == "False")
    })
    .await;

    for kind in &installed {
        e2e::apply_crd(&admin, &monitoring_crd(*kind)).await;
    }
    let api = |kind: Kind| -> Api<DynamicObject> {
        Api::namespaced_with(admin.clone(), OPERATOR_NAMESPACE, &kind.api_resource())
    };
    for (kind, built) in [
        (Kind::ServiceMonitor, build_service_monitor(true)),
        (Kind::PrometheusRule, build_prometheus_rule()),
    ] {
        let object = wait_for(&format!("the {}", kind.kind()), async || {
            api(kind)
                .get_opt(kind.object_name())
                .await
                .unwrap()
                .filter(|o| o.data["spec"] == built["spec"])
        })
        .await;
        assert!(
            object.metadata.managed_fields.iter().flatten().any(|e| {
                e.manager.as_deref() == Some("storage-operator/StorageOperatorMonitoringController")
                    && e.operation.as_deref() == Some("Apply")
            }),
            "{:?}",
            object.metadata.managed_fields
        );
    }
    assert_eq!(
        cso::storage_condition(&admin, degraded).await.map(|c| c.0),
        Some("False".into())
    );

    running.stop().await;
    for kind in Kind::ALL {
        cleanup::delete_and_wait(&api(kind), kind.object_name()).await;
    }
    for kind in installed {
        cleanup::delete_and_wait(&crds, kind.crd_name()).await;
    }
    cso::finish(&admin, &identity, "gcp-pd").await;
    cleanup::undeclare_platform(&admin, declared).await;
}

/// The vSphere problem detector on a real API server, as the ServiceAccount of
/// `deploy/kubernetes/storage-operator.yaml`: on a cluster that says it is vSphere (an
/// Infrastructure), with the detector's image given, the operator installs the detector's
/// objects (its Role and ClusterRole grant reading Secrets, which the operator itself may not:
/// `escalate` by name), puts the hashes of the credentials and cloud config on the pod template,
/// and rolls it when the credentials change, without a single refused request.
#[tokio::test]
#[ignore = "needs a real cluster: set E2E_KUBECONFIG and pass --ignored"]
async fn runs_the_vsphere_problem_detector_with_what_its_rbac_allows() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::PostParams;
    use storage_operator::plan::OPERATOR_NAMESPACE;
    use storage_operator::vsphere_detector as d;
    let admin = e2e::admin().await;
    let declared = e2e::ensure_platform(&admin, json!({"type": "VSphere"})).await;
    if declared {
        // As the installer names the cloud config.
        Api::<api::config_v1::Infrastructure>::all(admin.clone())
            .patch(
                "cluster",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"cloudConfig": {"name": d::CLOUD_CONFIG, "key": "config"}}}),
                ),
            )
            .await
            .unwrap();
    }
    let identity = cso::prepare(&admin).await;
    e2e::install::ensure_namespace(&admin, d::CLOUD_CONFIG_NAMESPACE).await;
    let cloud_configs: Api<ConfigMap> = Api::namespaced(admin.clone(), d::CLOUD_CONFIG_NAMESPACE);
    if cloud_configs
        .get_opt(d::CLOUD_CONFIG)
        .await
        .unwrap()
        .is_none()
    {
        cloud_configs
            .create(
                &PostParams::default(),
                &serde_json::from_value(
                    json!({"metadata": {"name": d::CLOUD_CONFIG}, "data": {"config": "[Global]\n"}}),
                )
                .unwrap(),
            )
            .await
            .unwrap();
    }
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    if secrets.get_opt(d::CREDENTIALS).await.unwrap().is_none() {
        secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": d::CREDENTIALS},
                    "stringData": {"vc.example.com.username": "u", "vc.example.com.password": "p"}}))
                .unwrap(),
            )
            .await
            .unwrap();
    }
    // Prometheus' CRDs, for the detector's ServiceMonitor and PrometheusRule.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(admin.clone());
    let mut installed = Vec::new();
    for kind in storage_operator::monitoring::Kind::ALL {
        if crds.get_opt(kind.crd_name()).await.unwrap().is_none() {
            crds.create(&PostParams::default(), &monitoring_crd(kind))
                .await
                .unwrap();
            installed.push(kind);
        }
    }
    let running = cso::start_with_env(
        &identity,
        [(
            d::IMAGE_ENV.to_owned(),
            "quay.io/openshift/origin-vsphere-problem-detector:latest".to_owned(),
        )]
        .into(),
    );
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    let credentials_key = csi_kit::hash::annotation_key(
        OPERATOR_NAMESPACE,
        d::CREDENTIALS,
        csi_kit::hash::HashedKind::Secret,
    );
    let cloud_key = csi_kit::hash::annotation_key(
        d::CLOUD_CONFIG_NAMESPACE,
        d::CLOUD_CONFIG,
        csi_kit::hash::HashedKind::ConfigMap,
    );
    let hash_of = async |key: &str| {
        let deployment = deployments.get_opt(d::NAME).await.unwrap()?;
        deployment
            .spec?
            .template
            .metadata?
            .annotations?
            .get(key)
            .cloned()
    };
    let first = wait_for(
        "the detector's Deployment with the credentials hash",
        async || hash_of(&credentials_key).await,
    )
    .await;
    assert!(hash_of(&cloud_key).await.is_some(), "the cloud config hash");
    for type_ in [
        "VSphereProblemDetectorStarterDegraded",
        "VSphereProblemDetectorStarterStaticControllerDegraded",
        "VSphereProblemDetectorDeploymentControllerDegraded",
    ] {
        wait_for(&format!("{type_}=False"), async || {
            cso::storage_condition(&admin, type_)
                .await
                .filter(|c| c.0 == "False")
        })
        .await;
    }
    secrets
        .patch(
            d::CREDENTIALS,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"vc.example.com.password": "rotated"}})),
        )
        .await
        .unwrap();
    wait_for("the credentials hash changed", async || {
        hash_of(&credentials_key).await.filter(|h| *h != first)
    })
    .await;

    // Its monitoring objects, and the admin's switch of its alerts (delete, by name only).
    let monitoring = |kind: storage_operator::monitoring::Kind| {
        Api::<kube::api::DynamicObject>::namespaced_with(
            admin.clone(),
            OPERATOR_NAMESPACE,
            &kind.api_resource(),
        )
    };
    for kind in storage_operator::monitoring::Kind::ALL {
        wait_for(&format!("the detector's {}", kind.kind()), async || {
            monitoring(kind).get_opt(d::MONITORING_NAME).await.unwrap()
        })
        .await;
    }
    let switch: Api<ConfigMap> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    switch
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": d::USER_CONFIG},
                "data": {"config.yaml": "alertsDisabled: true\n"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    wait_for("the detector's rule removed", async || {
        monitoring(storage_operator::monitoring::Kind::PrometheusRule)
            .get_opt(d::MONITORING_NAME)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    wait_for("its alerts disabled", async || {
        cso::storage_condition(
            &admin,
            "VSphereProblemDetectorMonitoringControllerAvailable",
        )
        .await
        .filter(|c| c.2.contains("disabled"))
    })
    .await;

    running.stop().await;
    cleanup::delete_and_wait(&switch, d::USER_CONFIG).await;
    for kind in storage_operator::monitoring::Kind::ALL {
        cleanup::delete_and_wait(&monitoring(kind), d::MONITORING_NAME).await;
    }
    for kind in installed {
        cleanup::delete_and_wait(&crds, kind.crd_name()).await;
    }
    cso::remove_vsphere_detector(&admin).await;
    cso::finish(&admin, &identity, "vsphere").await;
    cleanup::undeclare_platform(&admin, declared).await;
}
