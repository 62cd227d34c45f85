//! Retry backoffs. [`PerObjectBackoff`]: a transient failure of one object is retried sooner
//! than a persistent one, and a failing object never makes others wait; the reconcile loops
//! ([`crate::runtime::run`]) ask it how long to wait before the next attempt. [`WatchBackoff`]:
//! how long a failed watch waits before it lists and watches again.

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

/// The backoff of every watch: 200 ms doubling to a cap of 1 s, with up to 20% jitter, reset
/// by any event the watch delivers.
///
/// The cap is the point. kube-runtime's default doubles to 30 s, so after an API server outage
/// a watch could sleep half a minute before noticing the server is back, and the operator
/// would act on nothing meanwhile. With a 1 s cap every watch is re-established within about a
/// second of the server answering again, at the cost, while it is down, of one refused
/// connection per watch per second (an operator has a few dozen watches). The jitter spreads
/// the re-lists of many operators that lost the same server at the same moment.
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    base: Duration,
    cap: Duration,
    next: Duration,
    seed: u64,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(200), Duration::from_secs(1))
    }
}

impl WatchBackoff {
    /// A backoff from `base` doubling to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        // Seeded per instance so watches that failed together do not retry in lockstep.
        static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let instance = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::from(d.subsec_nanos()))
            ^ instance.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Self {
            base,
            cap,
            next: base,
            seed: seed | 1,
        }
    }

    /// A pseudo-random fraction in [0, 1) (xorshift; quality is irrelevant, spread is not).
    fn fraction(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.cap);
        // Up to 20% shorter, never longer than the cap.
        Some(delay.mul_f64(1.0 - 0.2 * self.fraction()))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = self.base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_retries_within_a_second_however_long_the_outage() {
        use kube::runtime::utils::Backoff;
        let mut backoff = WatchBackoff::default();
        let delays: Vec<Duration> = backoff.by_ref().take(50).collect();
        let ms = |d: &Duration| d.as_millis();
        assert!((160..=200).contains(&ms(&delays[0])), "{delays:?}");
        assert!((320..=400).contains(&ms(&delays[1])), "{delays:?}");
        assert!((640..=800).contains(&ms(&delays[2])), "{delays:?}");
        assert!(
            delays[3..].iter().all(|d| (800..=1000).contains(&ms(d))),
            "capped at 1 s: {delays:?}"
        );
        assert!(
            delays.windows(2).any(|w| w[0] != w[1]),
            "jittered: {delays:?}"
        );
        backoff.reset();
        assert!(ms(&backoff.next().unwrap()) <= 200, "an event resets it");
    }

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
