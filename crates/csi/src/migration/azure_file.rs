//! Azure File (`kubernetes.io/azure-file` -> `file.csi.azure.com`). The in-tree plugin names the
//! storage account through its Secret (`azure-storage-account-<account>-secret`); the driver
//! takes a `<resource group>#<account>#<share>#` handle and the Secret as node-stage secret.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AzureFilePersistentVolumeSource, CSIPersistentVolumeSource, PersistentVolume, SecretReference,
    Volume,
};

use super::{Note, Plugin, Result, ScContext, TranslateError, csi_source, inline_pv, set_csi};

const SHARE_NAME: &str = "sharename";
const SECRET_NAME: &str = "secretname";
const SECRET_NAMESPACE: &str = "secretnamespace";
/// Annotation on in-tree PVs holding the share's resource group.
pub(crate) const RESOURCE_GROUP_ANNOTATION: &str = "kubernetes.io/azure-file-resource-group";
const DEFAULT_SECRET_NAMESPACE: &str = "default";
const PLUGIN: Plugin = Plugin::AzureFile;

pub(crate) fn storage_class(
    params: BTreeMap<String, String>,
    _ctx: &mut ScContext<'_>,
) -> Result<BTreeMap<String, String>> {
    // The driver accepts the in-tree parameters unchanged.
    Ok(params)
}

/// The account named by an `azure-storage-account-<account>-secret` Secret name.
pub(crate) fn account_from_secret(secret: &str) -> Option<&str> {
    secret
        .strip_prefix("azure-storage-account-")?
        .strip_suffix("-secret")
        .filter(|a| !a.is_empty())
}

/// The Secret name for an account.
pub(crate) fn secret_for_account(account: &str) -> String {
    format!("azure-storage-account-{account}-secret")
}

fn account(field: &str, secret: &str, notes: &mut Vec<Note>) -> Result<String> {
    if secret.is_empty() {
        return Err(TranslateError::unsupported(
            field,
            "the Secret holding the storage account key must be named",
        ));
    }
    Ok(match account_from_secret(secret) {
        Some(account) => account.to_string(),
        None => {
            notes.push(Note::new(
                field,
                "not of the form azure-storage-account-<account>-secret: the Secret name is \
                 used as the storage account name",
            ));
            secret.to_string()
        }
    })
}

fn require_share(field: &str, share: &str) -> Result<()> {
    if share.is_empty() {
        return Err(TranslateError::malformed(
            PLUGIN,
            field,
            share,
            "the share name is empty",
        ));
    }
    Ok(())
}

fn source(
    resource_group: &str,
    account: &str,
    share: &str,
    secret: &str,
    namespace: &str,
    read_only: Option<bool>,
) -> CSIPersistentVolumeSource {
    let mut csi = csi_source(
        PLUGIN,
        format!("{resource_group}#{account}#{share}#"),
        None,
        read_only,
        BTreeMap::from([(SHARE_NAME.to_string(), share.to_string())]),
    );
    csi.node_stage_secret_ref = Some(SecretReference {
        name: Some(secret.to_string()),
        namespace: Some(namespace.to_string()),
    });
    csi
}

pub(crate) fn pv_to_csi(pv: &mut PersistentVolume, notes: &mut Vec<Note>) -> Result<()> {
    let Some(file) = pv.spec.as_ref().and_then(|s| s.azure_file.clone()) else {
        return Ok(());
    };
    require_share("spec.azureFile.shareName", &file.share_name)?;
    let account = account("spec.azureFile.secretName", &file.secret_name, notes)?;
    let resource_group = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RESOURCE_GROUP_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    if resource_group.is_empty() {
        notes.push(Note::new(
            format!("metadata.annotations[{RESOURCE_GROUP_ANNOTATION}]"),
            "absent: the handle's resource group is empty, the driver uses the cluster's",
        ));
    }
    let namespace = file
        .secret_namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            notes.push(Note::new(
                "spec.azureFile.secretNamespace",
                format!("unset: the Secret is read from namespace {DEFAULT_SECRET_NAMESPACE}"),
            ));
            DEFAULT_SECRET_NAMESPACE.to_string()
        });
    let csi = source(
        &resource_group,
        &account,
        &file.share_name,
        &file.secret_name,
        &namespace,
        file.read_only,
    );
    notes.push(Note::new(
        "spec.azureFile.secretName",
        "becomes csi.nodeStageSecretRef; the account is part of the volumeHandle",
    ));
    if let Some(spec) = pv.spec.as_mut() {
        spec.azure_file = None;
    }
    notes.push(set_csi(pv, "azureFile", csi));
    Ok(())
}

pub(crate) fn inline_to_csi(
    volume: &Volume,
    pod_namespace: &str,
    notes: &mut Vec<Note>,
) -> Result<PersistentVolume> {
    let Some(file) = volume.azure_file.as_ref() else {
        return Err(TranslateError::unsupported("azureFile", "missing"));
    };
    require_share("azureFile.shareName", &file.share_name)?;
    let account = account("azureFile.secretName", &file.secret_name, notes)?;
    let namespace = if pod_namespace.is_empty() {
        DEFAULT_SECRET_NAMESPACE
    } else {
        pod_namespace
    };
    notes.push(Note::new(
        "azureFile.secretName",
        format!("becomes csi.nodeStageSecretRef in the pod's namespace {namespace}"),
    ));
    let csi = source(
        "",
        &account,
        &file.share_name,
        &file.secret_name,
        namespace,
        file.read_only,
    );
    Ok(inline_pv(PLUGIN, &file.share_name, csi, "ReadWriteMany"))
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    let mut file = AzureFilePersistentVolumeSource {
        read_only: csi.read_only,
        ..Default::default()
    };
    for (key, value) in csi.volume_attributes.iter().flatten() {
        match key.to_ascii_lowercase().as_str() {
            SHARE_NAME => file.share_name = value.clone(),
            SECRET_NAME => file.secret_name = value.clone(),
            SECRET_NAMESPACE => file.secret_namespace = Some(value.clone()),
            _ => notes.push(Note::new(
                format!("spec.csi.volumeAttributes.{key}"),
                "dropped: the in-tree source has no such field",
            )),
        }
    }
    if let Some(secret) = csi
        .node_stage_secret_ref
        .as_ref()
        .filter(|s| s.name.as_ref().is_some_and(|n| !n.is_empty()))
    {
        file.secret_name = secret.name.clone().unwrap_or_default();
        file.secret_namespace = secret.namespace.clone();
    }
    if file.share_name.is_empty() || file.secret_name.is_empty() {
        let parts: Vec<&str> = csi.volume_handle.split('#').collect();
        if parts.len() < 3 {
            return Err(TranslateError::malformed(
                PLUGIN,
                "spec.csi.volumeHandle",
                &csi.volume_handle,
                "expected <resource group>#<account>#<share>[#...]",
            ));
        }
        if file.share_name.is_empty() {
            file.share_name = parts[2].to_string();
        }
        if file.secret_name.is_empty() {
            file.secret_name = secret_for_account(parts[1]);
            notes.push(Note::new(
                "spec.azureFile.secretName",
                format!(
                    "derived from the account in the volumeHandle: {}",
                    file.secret_name
                ),
            ));
        }
        if !parts[0].is_empty() {
            pv.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(RESOURCE_GROUP_ANNOTATION.to_string(), parts[0].to_string());
            notes.push(Note::new(
                format!("metadata.annotations[{RESOURCE_GROUP_ANNOTATION}]"),
                "added: the resource group from the volumeHandle",
            ));
        }
    }
    if file.share_name.is_empty() {
        return Err(TranslateError::malformed(
            PLUGIN,
            "spec.csi.volumeHandle",
            &csi.volume_handle,
            "no share name in the volumeHandle or volumeAttributes.sharename",
        ));
    }
    if file.secret_namespace.as_ref().is_none_or(|n| n.is_empty()) {
        file.secret_namespace = Some(DEFAULT_SECRET_NAMESPACE.to_string());
    }
    pv.spec.get_or_insert_with(Default::default).azure_file = Some(file);
    Ok(())
}
