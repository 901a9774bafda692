//! Latency SLAs. Four histograms per tool (Prometheus, through the `metrics` facade):
//!
//! | metric | from -> to |
//! | --- | --- |
//! | `toolmend_tool_call_initiation_seconds{tool}` | the model's answer received -> the tool request sent |
//! | `toolmend_tool_service_seconds{tool}` | request sent -> answer received (every attempt) |
//! | `toolmend_tool_result_injection_seconds{tool}` | answer received -> the result ready for the model (verified, shaped) |
//! | `toolmend_tool_round_trip_seconds{tool}` | the model's answer received -> the result ready (the gateway's round trip adds its own, per round) |
//!
//! A tool with `sla_ms` and a `backup` degrades when the p95 of its last
//! [`SlaPolicy::window`] service latencies (at least [`SlaPolicy::min_samples`]) passes
//! `sla_ms`: its calls go to the backup. While degraded, one call in
//! [`SlaPolicy::probe_every`] still goes to the primary as a probe; after
//! [`SlaPolicy::recover_after`] probes in a row within the SLA it recovers. Each change
//! is a log line at warn and `toolmend_tool_degraded{tool}` (0 or 1),
//! `toolmend_tool_sla_transitions_total{tool,to}`. A failed or timed-out call counts with
//! the time it took (a timeout breaches any SLA below it).

use std::{collections::VecDeque, sync::Mutex, time::Duration};

/// How the SLA of one tool is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaPolicy {
    /// The p95 the tool must keep.
    pub p95: Duration,
    /// How many recent latencies the p95 is taken over.
    pub window: usize,
    /// No decision before this many.
    pub min_samples: usize,
    /// While degraded, every n-th call probes the primary.
    pub probe_every: u32,
    /// Probes in a row within the SLA that recover the primary.
    pub recover_after: u32,
}

impl SlaPolicy {
    /// `p95` with the default window (20 calls, at least 5), a probe every 5th call, and
    /// 3 good probes to recover.
    pub fn new(p95: Duration) -> Self {
        SlaPolicy {
            p95,
            window: 20,
            min_samples: 5,
            probe_every: 5,
            recover_after: 3,
        }
    }
}

/// Where a call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The tool itself.
    Primary,
    /// The tool itself, while degraded: its latency decides recovery.
    Probe,
    /// The backup tool.
    Backup,
}

/// A change of state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The p95 passed the SLA: calls go to the backup.
    Degraded {
        /// The p95 that breached it.
        p95: Duration,
    },
    /// Probes kept the SLA: calls go to the primary again.
    Recovered,
}

#[derive(Debug, Default)]
struct State {
    samples: VecDeque<Duration>,
    degraded: bool,
    since_probe: u32,
    good_probes: u32,
}

/// The SLA state of one tool.
#[derive(Debug)]
pub struct Sla {
    policy: SlaPolicy,
    state: Mutex<State>,
}

impl Sla {
    /// Watches `policy`.
    pub fn new(policy: SlaPolicy) -> Self {
        Sla {
            policy,
            state: Mutex::new(State::default()),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &SlaPolicy {
        &self.policy
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True while calls go to the backup.
    pub fn degraded(&self) -> bool {
        self.state().degraded
    }

    /// Where the next call goes.
    pub fn route(&self) -> Route {
        let mut s = self.state();
        if !s.degraded {
            return Route::Primary;
        }
        s.since_probe += 1;
        if s.since_probe >= self.policy.probe_every.max(1) {
            s.since_probe = 0;
            Route::Probe
        } else {
            Route::Backup
        }
    }

    /// Records the primary's latency for a call routed `route`; returns a change of
    /// state, if any.
    pub fn record(&self, route: Route, latency: Duration) -> Option<Transition> {
        let mut s = self.state();
        match route {
            Route::Backup => None,
            Route::Probe => {
                if latency <= self.policy.p95 {
                    s.good_probes += 1;
                    if s.good_probes >= self.policy.recover_after.max(1) {
                        *s = State::default();
                        return Some(Transition::Recovered);
                    }
                } else {
                    s.good_probes = 0;
                }
                None
            }
            Route::Primary => {
                if s.samples.len() >= self.policy.window.max(1) {
                    s.samples.pop_front();
                }
                s.samples.push_back(latency);
                if s.degraded || s.samples.len() < self.policy.min_samples.max(1) {
                    return None;
                }
                let p95 = p95(&s.samples);
                (p95 > self.policy.p95).then(|| {
                    s.degraded = true;
                    s.since_probe = 0;
                    s.good_probes = 0;
                    Transition::Degraded { p95 }
                })
            }
        }
    }
}

/// The 95th percentile (nearest rank) of a small window.
fn p95(samples: &VecDeque<Duration>) -> Duration {
    let mut v: Vec<Duration> = samples.iter().copied().collect();
    v.sort_unstable();
    let rank = (v.len() * 95).div_ceil(100).max(1);
    v[rank - 1]
}

/// Records the SLA histograms of one call (seconds).
pub(crate) fn observe(metric: &'static str, tool: &str, d: Duration) {
    metrics::histogram!(metric, "tool" => tool.to_owned()).record(d.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_slow_tool_degrades_and_recovers() {
        let sla = Sla::new(SlaPolicy::new(ms(100)));
        for _ in 0..4 {
            assert_eq!(sla.route(), Route::Primary);
            assert_eq!(
                sla.record(Route::Primary, ms(300)),
                None,
                "no decision before 5 samples"
            );
        }
        assert_eq!(
            sla.record(Route::Primary, ms(300)),
            Some(Transition::Degraded { p95: ms(300) })
        );
        assert!(sla.degraded());
        let routes: Vec<Route> = (0..10).map(|_| sla.route()).collect();
        assert_eq!(routes.iter().filter(|r| **r == Route::Probe).count(), 2);
        assert_eq!(routes.iter().filter(|r| **r == Route::Backup).count(), 8);
        // A slow probe resets the count; three good ones in a row recover.
        assert_eq!(sla.record(Route::Probe, ms(50)), None);
        assert_eq!(sla.record(Route::Probe, ms(500)), None);
        assert_eq!(sla.record(Route::Probe, ms(50)), None);
        assert_eq!(sla.record(Route::Probe, ms(50)), None);
        assert_eq!(
            sla.record(Route::Probe, ms(50)),
            Some(Transition::Recovered)
        );
        assert!(!sla.degraded());
        assert_eq!(sla.route(), Route::Primary);
    }

    #[test]
    fn one_slow_call_in_twenty_is_within_p95() {
        let sla = Sla::new(SlaPolicy::new(ms(100)));
        for i in 0..40 {
            let l = if i % 20 == 19 { ms(900) } else { ms(10) };
            assert_eq!(sla.record(Route::Primary, l), None, "call {i}");
        }
        assert!(!sla.degraded());
    }
}
