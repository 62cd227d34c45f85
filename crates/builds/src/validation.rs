//! Validation of build volumes: OpenShift's rules and messages (openshift-apiserver's
//! `validateBuildVolume`), plus what OpenShift only finds out while the build runs (duplicate
//! names, duplicate or nested destinations, paths the builder mounts itself, writable CSI
//! volumes), so a bad build fails at once with the field named instead of minutes later.

use std::fmt;

use api::build_v1::{BuildVolume, BuildVolumeSourceType};

/// Paths the builder itself mounts into every build (OpenShift's builder image): a build
/// volume there would collide with them.
pub const BUILDER_PATHS: [&str; 4] = [
    "/run/secrets/etc-pki-entitlement",
    "/run/secrets/redhat.repo",
    "/run/secrets/rhsm",
    "/etc/pki/ca-trust",
];

/// One problem with one field, worded like the Kubernetes API server's field errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, e.g. `spec.strategy.dockerStrategy.volumes[0].name`.
    pub field: String,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// The kinds of field errors, with what each carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A value is missing.
    Required(String),
    /// A value is wrong.
    Invalid {
        /// The value.
        value: String,
        /// Why it is wrong.
        detail: String,
    },
    /// A value repeats one that must be unique.
    Duplicate(String),
    /// A value is longer than allowed.
    TooLong(usize),
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Required(detail) if detail.is_empty() => {
                write!(f, "{}: Required value", self.field)
            }
            ErrorKind::Required(detail) => write!(f, "{}: Required value: {detail}", self.field),
            ErrorKind::Invalid { value, detail } => {
                write!(f, "{}: Invalid value: {value:?}: {detail}", self.field)
            }
            ErrorKind::Duplicate(value) => write!(f, "{}: Duplicate value: {value:?}", self.field),
            ErrorKind::TooLong(max) => write!(
                f,
                "{}: Too long: may not be more than {max} bytes",
                self.field
            ),
        }
    }
}

fn required(field: String, detail: &str) -> FieldError {
    FieldError {
        field,
        kind: ErrorKind::Required(detail.to_owned()),
    }
}

fn invalid(field: String, value: &str, detail: impl Into<String>) -> FieldError {
    FieldError {
        field,
        kind: ErrorKind::Invalid {
            value: value.to_owned(),
            detail: detail.into(),
        },
    }
}

const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Kubernetes' `IsDNS1123Label` messages for `value`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if value.len() > 63 {
        messages.push("must be no more than 63 characters".to_owned());
    }
    if !is_label(value) {
        messages.push(DNS1123_LABEL.to_owned());
    }
    messages
}

/// Kubernetes' `IsDNS1123Subdomain` messages for `value`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if value.len() > 253 {
        messages.push("must be no more than 253 characters".to_owned());
    }
    if !value.split('.').all(is_label) {
        messages.push(DNS1123_SUBDOMAIN.to_owned());
    }
    messages
}

/// Lexically cleans an absolute or relative path (Go's `path.Clean`).
fn clean(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Whether `inner` is `outer` or lies below it.
fn within(inner: &str, outer: &str) -> bool {
    inner == outer
        || outer == "/"
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Validates the volumes of a build strategy at `path` (e.g.
/// `spec.strategy.dockerStrategy.volumes`). Returns every problem found, none when valid.
pub fn validate_volumes(volumes: &[BuildVolume], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    // (clean destination, field, volume name) of every mount seen so far.
    let mut destinations: Vec<(String, String, &str)> = Vec::new();
    for (i, volume) in volumes.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let name_field = format!("{at}.name");
        if volume.name.is_empty() {
            errors.push(required(name_field, ""));
        } else {
            errors.extend(
                dns1123_label(&volume.name)
                    .into_iter()
                    .map(|m| invalid(name_field.clone(), &volume.name, m)),
            );
            if names.contains(&volume.name.as_str()) {
                errors.push(FieldError {
                    field: name_field,
                    kind: ErrorKind::Duplicate(volume.name.clone()),
                });
            }
            names.push(&volume.name);
        }
        errors.extend(validate_source(volume, &format!("{at}.source")));
        errors.extend(validate_mounts(
            volume,
            &format!("{at}.mounts"),
            &mut destinations,
        ));
    }
    errors
}

fn validate_source(volume: &BuildVolume, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let source = &volume.source;
    let Some(type_) = &source.type_ else {
        errors.push(required(format!("{at}.type"), "must not be blank"));
        return errors;
    };
    let set: Vec<BuildVolumeSourceType> = [
        source
            .secret
            .as_ref()
            .map(|_| BuildVolumeSourceType::Secret),
        source
            .config_map
            .as_ref()
            .map(|_| BuildVolumeSourceType::ConfigMap),
        source.csi.as_ref().map(|_| BuildVolumeSourceType::CSI),
    ]
    .into_iter()
    .flatten()
    .collect();
    match set.as_slice() {
        [] => errors.push(invalid(at.to_owned(), "", "must specify one volume source")),
        [only] if only != type_ => {
            errors.push(invalid(
                format!("{at}.type"),
                type_.as_str(),
                "source type and specified type must match",
            ));
        }
        [_] => {}
        _ => errors.push(invalid(
            at.to_owned(),
            "",
            "only one volume source is allowed",
        )),
    }
    if !type_.is_known() {
        errors.push(invalid(
            format!("{at}.type"),
            type_.as_str(),
            "supported values: \"Secret\", \"ConfigMap\", \"CSI\"",
        ));
    }
    if let Some(secret) = &source.secret {
        let field = format!("{at}.secret.secretName");
        match secret.secret_name.as_deref().unwrap_or_default() {
            "" => errors.push(required(field, "")),
            name => errors.extend(
                dns1123_subdomain(name)
                    .into_iter()
                    .map(|m| invalid(field.clone(), name, m)),
            ),
        }
    }
    if let Some(config_map) = &source.config_map {
        let field = format!("{at}.configMap.name");
        match config_map.name.as_str() {
            "" => errors.push(required(field, "")),
            name => errors.extend(
                dns1123_subdomain(name)
                    .into_iter()
                    .map(|m| invalid(field.clone(), name, m)),
            ),
        }
    }
    if let Some(csi) = &source.csi {
        let field = format!("{at}.csi.driver");
        let driver = csi.driver.as_str();
        if driver.is_empty() {
            errors.push(required(field.clone(), ""));
        }
        if driver.len() > 63 {
            errors.push(FieldError {
                field: field.clone(),
                kind: ErrorKind::TooLong(63),
            });
        }
        if !driver.is_empty() {
            errors.extend(
                dns1123_subdomain(&driver.to_lowercase())
                    .into_iter()
                    .map(|m| invalid(field.clone(), driver, m)),
            );
        }
        if csi.read_only == Some(false) {
            errors.push(invalid(
                format!("{at}.csi.readOnly"),
                "false",
                "builds mount volumes read only: remove readOnly or set it to true",
            ));
        }
    }
    errors
}

fn validate_mounts<'a>(
    volume: &'a BuildVolume,
    at: &str,
    destinations: &mut Vec<(String, String, &'a str)>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if volume.mounts.is_empty() {
        errors.push(required(at.to_owned(), "must supply at least one mount"));
    }
    for (j, mount) in volume.mounts.iter().enumerate() {
        let field = format!("{at}[{j}].destinationPath");
        let path = mount.destination_path.as_str();
        if path.is_empty() {
            errors.push(required(field, "must not be blank"));
            continue;
        }
        let mut valid = true;
        if path.contains(':') {
            errors.push(invalid(field.clone(), path, "must not contain ':'"));
            valid = false;
        }
        if !path.starts_with('/') {
            errors.push(invalid(field.clone(), path, "must be an absolute path"));
            valid = false;
        }
        let cleaned = clean(path);
        if cleaned.starts_with("..") {
            errors.push(invalid(field.clone(), path, "must not start with '..'"));
            valid = false;
        } else if path.split('/').any(|part| part == "..") {
            errors.push(invalid(field.clone(), path, "must not contain '..'"));
            valid = false;
        }
        if !valid {
            continue;
        }
        if cleaned == "/" {
            errors.push(invalid(
                field.clone(),
                path,
                "must not be the root of the image",
            ));
            continue;
        }
        if let Some(builder) = BUILDER_PATHS
            .iter()
            .find(|b| within(&cleaned, b) || within(b, &cleaned))
        {
            errors.push(invalid(
                field.clone(),
                path,
                format!("collides with {builder}, which the builder mounts itself; choose another destinationPath"),
            ));
        }
        for (other, other_field, other_volume) in destinations.iter() {
            if *other == cleaned {
                errors.push(FieldError {
                    field: field.clone(),
                    kind: ErrorKind::Duplicate(path.to_owned()),
                });
            } else if within(&cleaned, other) || within(other, &cleaned) {
                errors.push(invalid(
                    field.clone(),
                    path,
                    format!(
                        "overlaps {other_field} ({other}) of volume {other_volume:?}; a build cannot mount one volume inside another"
                    ),
                ));
            }
        }
        destinations.push((cleaned, field, &volume.name));
    }
    errors
}
