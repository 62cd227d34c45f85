//! Per-object retry backoff: a transient failure of one object is retried sooner than a
//! persistent one, and a failing object never makes others wait. Used as the error policy of
//! every controller (kube-runtime asks it how long to wait before the next attempt).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Exponential backoff per object key, doubling from `base` up to `cap`.
#[derive(Debug)]
pub struct PerObjectBackoff {
    base: Duration,
    cap: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Default for PerObjectBackoff {
    /// 1 s doubling to 5 minutes, like client-go's default controller rate limiter (whose cap is
    /// longer; a storage outage should be noticed within minutes).
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(300))
    }
}

impl PerObjectBackoff {
    /// A backoff from `base` doubling up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `key` and returns how long to wait before retrying it.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(key.to_owned()).or_insert(0);
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow(*count))
            .min(self.cap);
        *count = count.saturating_add(1);
        delay
    }

    /// Records a success of `key`: its next failure starts from `base` again.
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_object_up_to_the_cap_and_resets_on_success() {
        let backoff = PerObjectBackoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let delays: Vec<u64> = (0..6).map(|_| backoff.failed("a").as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        assert_eq!(
            backoff.failed("b"),
            Duration::from_secs(1),
            "objects do not share a backoff"
        );
        backoff.succeeded("a");
        assert_eq!(backoff.failed("a"), Duration::from_secs(1));
    }

    #[test]
    fn many_failures_do_not_overflow() {
        let backoff = PerObjectBackoff::default();
        for _ in 0..100 {
            assert!(backoff.failed("x") <= Duration::from_secs(300));
        }
    }
}
