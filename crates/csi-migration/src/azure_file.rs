//! Azure File (`kubernetes.io/azure-file` -> `file.csi.azure.com`). The in-tree plugin names the
//! storage account through its Secret (`azure-storage-account-<account>-secret`); the driver
//! takes a `<resource group>#<account>#<share>#<PV or volume name>#<secret namespace>` handle
//! and the Secret as node-stage secret.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AzureFilePersistentVolumeSource, CSIPersistentVolumeSource, PersistentVolume, SecretReference,
    Volume,
};

use crate::differences::Difference;
use crate::parameters::ScContext;
use crate::types::{Note, Plugin, Result, TranslateError};
use crate::volume::{attribute_spellings, csi_source, inline_pv, set_csi};

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

/// The account named by an `azure-storage-account-<account>-secret` Secret name, found as
/// upstream's unanchored pattern finds it (the first `azure-storage-account-`, then everything
/// up to the last `-secret`).
pub(crate) fn account_from_secret(secret: &str) -> Option<&str> {
    const PREFIX: &str = "azure-storage-account-";
    let mut from = 0;
    while let Some(i) = secret[from..].find(PREFIX) {
        let rest = &secret[from + i + PREFIX.len()..];
        if let Some(end) = rest.rfind("-secret").filter(|end| *end > 0) {
            return Some(&rest[..end]);
        }
        from += i + 1;
    }
    None
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
        )
        .differs(Difference::AzureFileShare));
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
        return Err(
            TranslateError::malformed(PLUGIN, field, share, "the share name is empty")
                .differs(Difference::AzureFileShare),
        );
    }
    Ok(())
}

/// The driver's volume handle: `<resource group>#<account>#<share>#<unique>#<secret namespace>`;
/// the unique part (the PV's or inline volume's name) keeps two volumes of one share apart.
fn handle(
    resource_group: &str,
    account: &str,
    share: &str,
    unique: &str,
    namespace: &str,
) -> String {
    format!("{resource_group}#{account}#{share}#{unique}#{namespace}")
}

fn source(
    handle: String,
    share: &str,
    secret: &str,
    namespace: &str,
    read_only: Option<bool>,
) -> CSIPersistentVolumeSource {
    let mut csi = csi_source(
        PLUGIN,
        handle,
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
    // As upstream: the source's secretNamespace when set (even empty), else the claim's.
    let namespace = match file.secret_namespace.clone() {
        Some(namespace) => namespace,
        None => {
            let claim = pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|c| c.namespace.clone())
                .unwrap_or_default();
            if !claim.is_empty() {
                notes.push(Note::new(
                    "spec.azureFile.secretNamespace",
                    format!("unset: the Secret is read from the claim's namespace {claim}"),
                ));
            }
            claim
        }
    };
    if namespace.is_empty() {
        return Err(TranslateError::unsupported(
            "spec.azureFile.secretNamespace",
            "no namespace for the Secret: set secretNamespace, or bind the volume to a claim \
             (spec.claimRef.namespace)",
        ));
    }
    let name = pv.metadata.name.clone().unwrap_or_default();
    let csi = source(
        handle(
            &resource_group,
            &account,
            &file.share_name,
            &name,
            &namespace,
        ),
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
    let id = handle("", &account, &file.share_name, &volume.name, namespace);
    let csi = source(
        id.clone(),
        &file.share_name,
        &file.secret_name,
        namespace,
        file.read_only,
    );
    let mut pv = inline_pv(PLUGIN, "", csi, "ReadWriteMany");
    // As upstream: named by the volume handle, unique per pod namespace and volume.
    pv.metadata.name = Some(id);
    Ok(pv)
}

pub(crate) fn pv_to_in_tree(
    csi: &CSIPersistentVolumeSource,
    pv: &mut PersistentVolume,
    notes: &mut Vec<Note>,
) -> Result<()> {
    let mut file = AzureFilePersistentVolumeSource {
        read_only: csi.read_only.filter(|r| *r),
        ..Default::default()
    };
    attribute_spellings(
        csi.volume_attributes.as_ref(),
        &[SHARE_NAME, SECRET_NAME, SECRET_NAMESPACE],
        false,
        notes,
    );
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
        file.secret_namespace = Some(secret.namespace.clone().unwrap_or_default());
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
        )
        .differs(Difference::AzureFileShare));
    }
    if file.secret_namespace.is_none() {
        file.secret_namespace = Some(DEFAULT_SECRET_NAMESPACE.to_string());
    }
    pv.spec.get_or_insert_with(Default::default).azure_file = Some(file);
    Ok(())
}
