//! Following an operator CR's `operatorLogLevel` at run time (library-go's LoggingSyncer): the
//! process gives the operator a hook that changes its log filter, and the operator calls it once
//! per change, saying so in the log.

use std::sync::{Arc, Mutex, PoisonError};

use api::operator_v1::LogLevel;

/// A way to change the process's log level at run time.
#[derive(Clone)]
pub struct LogLevelHook(Arc<dyn Fn(&LogLevel) + Send + Sync>);

impl LogLevelHook {
    /// Wraps `apply`.
    pub fn new(apply: impl Fn(&LogLevel) + Send + Sync + 'static) -> Self {
        Self(Arc::new(apply))
    }

    /// Applies `level`.
    pub fn apply(&self, level: &LogLevel) {
        (self.0)(level);
    }
}

impl std::fmt::Debug for LogLevelHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogLevelHook")
    }
}

/// Remembers the level last applied, and applies a new one only when it differs.
#[derive(Debug, Default)]
pub struct LogLevelSync {
    current: Mutex<Option<LogLevel>>,
}

impl LogLevelSync {
    /// Applies `level` through `hook` if it is not the level already in force.
    pub fn sync(&self, hook: Option<&LogLevelHook>, level: LogLevel) {
        let Some(hook) = hook else { return };
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref() == Some(&level) {
            return;
        }
        hook.apply(&level);
        if let Some(previous) = current.as_ref() {
            tracing::info!(from = %previous, to = %level, "operator log level changed");
        }
        *current = Some(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_once_per_change() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hook = {
            let seen = seen.clone();
            LogLevelHook::new(move |level| seen.lock().unwrap().push(level.clone()))
        };
        let sync = LogLevelSync::default();
        sync.sync(Some(&hook), LogLevel::Normal);
        sync.sync(Some(&hook), LogLevel::Normal);
        sync.sync(Some(&hook), LogLevel::Debug);
        sync.sync(None, LogLevel::Trace);
        assert_eq!(*seen.lock().unwrap(), [LogLevel::Normal, LogLevel::Debug]);
    }
}
