//! Logging setup: tracing to standard error (standard output carries rendered YAML), plain or
//! JSON, filtered by `--log-level`, and raised at run time when an operator CR asks for more
//! (`operatorLogLevel`).

use std::io::IsTerminal;

use api::operator_v1::LogLevel;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, fmt, reload};

use crate::cli::LogFormat;

/// Changes the log filter of the running process.
#[derive(Clone)]
pub struct LogControl {
    handle: reload::Handle<EnvFilter, Registry>,
    base: String,
}

impl LogControl {
    /// Applies an OpenShift log level: Normal keeps `--log-level`; Debug, Trace and TraceAll
    /// raise it for this crate's code.
    pub fn set(&self, level: &LogLevel) {
        let filter = match level.klog_verbosity() {
            0..=3 => self.base.clone(),
            4..=5 => "debug,hyper=info,tower=info,kube_client=info".to_owned(),
            _ => "trace".to_owned(),
        };
        match EnvFilter::try_new(&filter) {
            Ok(filter) => {
                if let Err(error) = self.handle.reload(filter) {
                    tracing::warn!(%error, "could not change the log level");
                }
            }
            Err(error) => tracing::warn!(%error, filter, "invalid log filter"),
        }
    }
}

/// Installs the global subscriber. A filter that does not parse falls back to `info` and says so,
/// rather than refusing to start.
pub fn init(format: LogFormat, level: &str) -> LogControl {
    let (filter, bad_filter, base) = match EnvFilter::try_new(level) {
        Ok(filter) => (filter, None, level.to_owned()),
        Err(error) => (EnvFilter::new("info"), Some(error), "info".to_owned()),
    };
    let (filter, handle) = reload::Layer::new(filter);
    let output = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let output = match format {
        LogFormat::Plain => output.boxed(),
        LogFormat::Json => output.json().boxed(),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .init();
    if let Some(error) = bad_filter {
        tracing::warn!(%error, log_level = level, "invalid --log-level, using info");
    }
    LogControl { handle, base }
}
