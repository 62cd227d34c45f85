//! Deterministic fault injection: per verb and resource, a rate of HTTP errors (409/429/500/503)
//! or hangs; whole-server unavailability windows. Decisions come from a seeded generator and a
//! per-rule counter, so a test run with the same request sequence fails the same requests.

use std::time::Duration;

use crate::util::splitmix;

/// What a matching rule does to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this HTTP status and an apiserver-shaped `Status` body.
    Status(u16),
    /// Hold the request this long, then answer 504.
    Hang(Duration),
}

/// One injection rule. `verb`/`resource` of `None` match anything.
#[derive(Clone, Debug)]
pub struct FaultRule {
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub fault: Fault,
    /// Probability in `[0, 1]` that a matching request is hit.
    pub rate: f64,
    /// Stop after this many hits (`None`: unlimited).
    pub max_hits: Option<u64>,
    seen: u64,
    hits: u64,
}

impl FaultRule {
    /// A rule failing every matching request with `code`.
    pub fn status(verb: Option<&str>, resource: Option<&str>, code: u16) -> FaultRule {
        FaultRule {
            verb: verb.map(str::to_string),
            resource: resource.map(str::to_string),
            fault: Fault::Status(code),
            rate: 1.0,
            max_hits: None,
            seen: 0,
            hits: 0,
        }
    }

    /// A rule hanging every matching request for `d`.
    pub fn hang(verb: Option<&str>, resource: Option<&str>, d: Duration) -> FaultRule {
        FaultRule {
            fault: Fault::Hang(d),
            ..FaultRule::status(verb, resource, 0)
        }
    }

    pub fn with_rate(mut self, rate: f64) -> FaultRule {
        self.rate = rate;
        self
    }

    pub fn with_max_hits(mut self, n: u64) -> FaultRule {
        self.max_hits = Some(n);
        self
    }

    /// How many requests this rule has failed so far.
    pub fn hits(&self) -> u64 {
        self.hits
    }
}

#[derive(Debug)]
pub enum FaultAction {
    None,
    Fail(u16),
    Hang(Duration),
}

#[derive(Debug)]
pub struct Faults {
    seed: u64,
    pub rules: Vec<FaultRule>,
    /// Server answers 503 to everything until this instant (offset since start).
    pub unavailable_until: Option<Duration>,
}

impl Faults {
    pub fn new(seed: u64) -> Faults {
        Faults {
            seed,
            rules: Vec::new(),
            unavailable_until: None,
        }
    }

    pub fn decide(&mut self, verb: &str, resource: &str, now: Duration) -> FaultAction {
        if self.unavailable_until.is_some_and(|u| now < u) {
            return FaultAction::Fail(503);
        }
        for (i, r) in self.rules.iter_mut().enumerate() {
            if r.verb.as_deref().is_some_and(|v| v != verb)
                || r.resource.as_deref().is_some_and(|x| x != resource)
                || r.max_hits.is_some_and(|m| r.hits >= m)
            {
                continue;
            }
            r.seen += 1;
            let roll = splitmix(self.seed ^ (i as u64).rotate_left(32) ^ r.seen);
            let hit = (roll as f64 / u64::MAX as f64) < r.rate;
            if hit {
                r.hits += 1;
                return match &r.fault {
                    Fault::Status(c) => FaultAction::Fail(*c),
                    Fault::Hang(d) => FaultAction::Hang(*d),
                };
            }
        }
        FaultAction::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(seed: u64) -> Vec<bool> {
        let mut f = Faults::new(seed);
        f.rules
            .push(FaultRule::status(Some("get"), Some("configmaps"), 500).with_rate(0.5));
        (0..64)
            .map(|_| {
                matches!(
                    f.decide("get", "configmaps", Duration::ZERO),
                    FaultAction::Fail(500)
                )
            })
            .collect()
    }

    #[test]
    fn decisions_are_deterministic_per_seed() {
        assert_eq!(outcomes(42), outcomes(42));
        assert_ne!(outcomes(42), outcomes(43));
        let hits = outcomes(42).iter().filter(|h| **h).count();
        assert!(
            hits > 10 && hits < 54,
            "a 0.5 rate fails some, not all: {hits}"
        );
    }

    #[test]
    fn rules_match_verb_and_resource_and_stop_after_max_hits() {
        let mut f = Faults::new(1);
        f.rules
            .push(FaultRule::status(Some("list"), Some("pods"), 429).with_max_hits(2));
        let d = |f: &mut Faults, v, r| f.decide(v, r, Duration::ZERO);
        assert!(matches!(d(&mut f, "get", "pods"), FaultAction::None));
        assert!(matches!(d(&mut f, "list", "configmaps"), FaultAction::None));
        assert!(matches!(d(&mut f, "list", "pods"), FaultAction::Fail(429)));
        assert!(matches!(d(&mut f, "list", "pods"), FaultAction::Fail(429)));
        assert!(matches!(d(&mut f, "list", "pods"), FaultAction::None));
        f.unavailable_until = Some(Duration::from_secs(5));
        assert!(matches!(
            f.decide("get", "pods", Duration::from_secs(1)),
            FaultAction::Fail(503)
        ));
        assert!(matches!(
            f.decide("get", "pods", Duration::from_secs(6)),
            FaultAction::None
        ));
    }
}
