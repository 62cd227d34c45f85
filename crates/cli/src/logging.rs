//! Logging setup: tracing to standard error (standard output carries rendered YAML), plain or
//! JSON, filtered by `--log-level`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber. A filter that does not parse falls back to `info` and says so,
/// rather than refusing to start.
pub fn init(format: LogFormat, level: &str) {
    let (filter, bad_filter) = match EnvFilter::try_new(level) {
        Ok(filter) => (filter, None),
        Err(error) => (EnvFilter::new("info"), Some(error)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Plain => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    if let Some(error) = bad_filter {
        tracing::warn!(%error, log_level = level, "invalid --log-level, using info");
    }
}
