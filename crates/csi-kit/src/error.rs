//! The error a driver's own code returns to the kit: a precondition
//! ([`crate::def::Precondition`]), a probe (`driver_operator::Probe`) or a task
//! (`driver_operator::Task`).

/// Why a driver's own code could not do its part. The message names what is wrong and how to
/// fix it, and goes into the status as it is; the kind says where the fault lies and is the
/// metrics category.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    kind: HookErrorKind,
    message: String,
}

/// Where a [`HookError`] lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookErrorKind {
    /// Configuration in the cluster is missing or wrong (a credentials Secret, a cloud config):
    /// an admin fixes it.
    Config,
    /// The cloud's API failed, refused, or could not be reached.
    Cloud,
    /// The Kubernetes API server failed or refused a request.
    Api,
    /// The cloud offers nothing the driver can use here (e.g. no Manila share types).
    Unsupported,
}

impl HookError {
    /// Configuration in the cluster is missing or wrong.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(HookErrorKind::Config, message)
    }

    /// The cloud's API failed.
    pub fn cloud(message: impl Into<String>) -> Self {
        Self::new(HookErrorKind::Cloud, message)
    }

    /// The Kubernetes API server failed.
    pub fn api(message: impl Into<String>) -> Self {
        Self::new(HookErrorKind::Api, message)
    }

    /// The cloud offers nothing the driver can use.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(HookErrorKind::Unsupported, message)
    }

    fn new(kind: HookErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Where the fault lies.
    pub fn kind(&self) -> HookErrorKind {
        self.kind
    }

    /// The message, for the status.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error, its message prefixed with `context` (`context: message`).
    #[must_use]
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        Self {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }

    /// A stable category for metrics: `config`, `cloud`, `api` or `unsupported`.
    pub fn category(&self) -> &'static str {
        match self.kind {
            HookErrorKind::Config => "config",
            HookErrorKind::Cloud => "cloud",
            HookErrorKind::Api => "api",
            HookErrorKind::Unsupported => "unsupported",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_display_and_context_keeps_the_kind() {
        let error = HookError::cloud("IAM answered 401").context("reading the resource group");
        assert_eq!(
            error.to_string(),
            "reading the resource group: IAM answered 401"
        );
        assert_eq!(error.kind(), HookErrorKind::Cloud);
        assert_eq!(error.category(), "cloud");
        let categories: Vec<&str> = [
            HookError::config(""),
            HookError::cloud(""),
            HookError::api(""),
            HookError::unsupported(""),
        ]
        .iter()
        .map(HookError::category)
        .collect();
        assert_eq!(categories, ["config", "cloud", "api", "unsupported"]);
    }
}
