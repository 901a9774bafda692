//! The guard's Redis store as the probes and the start see it: `/readyz`'s body and
//! status, and the one WARN at start when Redis cannot be reached.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolmend::guard::FailMode;
use toolmend_redis::{RedisStore, StoreState};

/// The guard's Redis store and its fail mode, for `/readyz`.
#[derive(Debug, Clone)]
pub(crate) struct StoreHealth {
    pub(crate) store: RedisStore,
    pub(crate) fail: FailMode,
}

fn fail_name(fail: FailMode) -> &'static str {
    match fail {
        FailMode::Open => "open",
        FailMode::Closed => "closed",
    }
}

/// What the decisions do while the store is not there, in words.
fn meanwhile(fail: FailMode) -> &'static str {
    match fail {
        FailMode::Open => {
            "its decisions take guard.fail = \"open\": calls are admitted without the shared \
             limits (the history rules still apply)"
        }
        FailMode::Closed => {
            "its decisions take guard.fail = \"closed\": every call a shared limit counts is \
             refused (rule store_unavailable)"
        }
    }
}

/// A store error's cause in our words: `connection refused`, `name not resolved`, `auth
/// failed`, `timed out`, `TLS failed`, `host unreachable`, `connection lost`, `not a
/// single Redis` or, for what none of these says, `unreachable`.
pub(crate) fn cause_words(detail: &str) -> &'static str {
    let d = detail.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| d.contains(w));
    if has(&["redis cluster node"]) {
        "not a single Redis (a cluster node: write redis+cluster://)"
    } else if has(&["refused"]) {
        "connection refused"
    } else if has(&[
        "lookup address",
        "name or service not known",
        "nodename nor servname",
        "no such host",
        "name resolution",
        "temporary failure in name",
        "no address associated",
    ]) {
        "name not resolved"
    } else if has(&[
        "wrongpass",
        "noauth",
        "authentication",
        "auth failed",
        "noperm",
    ]) {
        "auth failed"
    } else if has(&["no answer within", "timed out", "timeout"]) {
        "timed out"
    } else if has(&["certificate", "tls", "handshake", "rustls"]) {
        "TLS failed"
    } else if has(&["unreachable", "no route"]) {
        "host unreachable"
    } else if has(&[
        "reset",
        "broken pipe",
        "dropped",
        "connection lost",
        "closed",
    ]) {
        "connection lost"
    } else {
        "unreachable"
    }
}

/// The state's name in probes: `up`, `connecting` (the first attempt under way), `down`
/// (an attempt failed and none succeeded yet, or marked down since) or `misconfigured`.
fn state_name(state: &StoreState) -> &'static str {
    match state {
        StoreState::Up => "up",
        StoreState::Connecting { cause: None } => "connecting",
        StoreState::Connecting { cause: Some(_) } | StoreState::Down { .. } => "down",
        StoreState::Misconfigured { .. } => "misconfigured",
    }
}

fn detail(state: &StoreState) -> Option<&str> {
    match state {
        StoreState::Up | StoreState::Connecting { cause: None } => None,
        StoreState::Connecting { cause: Some(c) }
        | StoreState::Down { cause: c }
        | StoreState::Misconfigured { cause: c } => Some(c),
    }
}

impl StoreHealth {
    /// `/readyz`'s status and body: 200 `ready` while the store is up; otherwise 200
    /// `degraded` when the guard fails open, 503 `not_ready` when it fails closed (it
    /// would refuse every counted call).
    pub(crate) fn report(&self) -> (StatusCode, Value) {
        let state = self.store.state();
        let mut store = json!({
            "store": "redis",
            "state": state_name(&state),
            "address": self.store.address(),
            "since_s": self.store.time_in_state().as_secs(),
            "fail": fail_name(self.fail),
        });
        if let Some(d) = detail(&state) {
            store["cause"] = json!(cause_words(d));
            store["detail"] = json!(d);
        }
        if state == StoreState::Up {
            return (
                StatusCode::OK,
                json!({"status": "ready", "guard_store": store}),
            );
        }
        let (status, name, then) = match self.fail {
            FailMode::Open => (
                StatusCode::OK,
                "degraded",
                "guard.fail = \"open\" admits the calls without the shared limits meanwhile",
            ),
            FailMode::Closed => (
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "guard.fail = \"closed\" refuses every call meanwhile",
            ),
        };
        let reason = format!(
            "the guard's Redis store is not connected ({}), and {then}",
            state_name(&state)
        );
        (
            status,
            json!({"status": name, "reason": reason, "guard_store": store}),
        )
    }
}

/// Says once, when the store's first connection attempt has failed, that Redis cannot be
/// reached: the redacted address, the cause in our words (and the store's), and what the
/// decisions do meanwhile. Nothing when it connects (the store says so at info), nor when
/// it is misconfigured (the store says so at error). Runs in the background: the start
/// does not wait for Redis.
pub(crate) fn warn_at_start(health: &StoreHealth) {
    let StoreHealth { store, fail } = health.clone();
    let within = store.options().connect_timeout + Duration::from_millis(500);
    // Answers no call, and ends within `within`: the store's first attempt is bounded.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        let state = match store.first_attempt(within).await {
            Ok(()) | Err(StoreState::Misconfigured { .. } | StoreState::Up) => return,
            Err(state) => state,
        };
        let detail = detail(&state).unwrap_or("no answer to the first attempt yet");
        let cause = cause_words(detail);
        tracing::warn!(
            target: "toolmend::start",
            store = "redis",
            address = store.address(),
            cause,
            fail = fail_name(fail),
            "guard store {} unreachable at start: {cause} ({detail}); the gateway serves \
             anyway and keeps trying in the background; until it connects, {}; /readyz says {}",
            store.address(),
            meanwhile(fail),
            match fail {
                FailMode::Open => "\"degraded\" (200)",
                FailMode::Closed => "\"not_ready\" (503)",
            }
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_in_our_words() {
        for (detail, words) in [
            ("Connection refused (os error 111)", "connection refused"),
            (
                "failed to lookup address information: Name or service not known",
                "name not resolved",
            ),
            (
                "WRONGPASS: invalid username-password pair or user is disabled.",
                "auth failed",
            ),
            ("Password authentication failed", "auth failed"),
            ("no answer within 1000 ms", "timed out"),
            ("probe failed: no answer within 1000 ms", "timed out"),
            ("invalid peer certificate: UnknownIssuer", "TLS failed"),
            ("Network is unreachable (os error 101)", "host unreachable"),
            (
                "redis://h:1/ is a Redis Cluster node: write the URL as redis+cluster://",
                "not a single Redis (a cluster node: write redis+cluster://)",
            ),
            ("something else", "unreachable"),
        ] {
            assert_eq!(cause_words(detail), words, "{detail}");
        }
    }
}
