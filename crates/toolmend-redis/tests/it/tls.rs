//! `rediss://` against a real `redis-server` that speaks TLS only (`--port 0`), with a CA
//! and a server certificate made at test time by the `openssl` command line: the guard
//! enforces its limits through it as over plain Redis, and a store that does not trust the
//! server's issuer fails its decisions for that reason, saying so without the password.

use crate::common::{PATIENCE, TlsRedis};
use toolmend::guard::{
    Action, FailMode, Guard, GuardConfig, GuardContext, GuardRequest, GuardStore, Rule, RuleGuard,
    Window,
    store::{Admission, AdmitCall, Check, Scope, StoreErrorKind},
};
use toolmend_redis::{RedisOptions, RedisStore, StoreState, redis_guard_store};

/// In the URL's userinfo: it must reach the server (`requirepass`) and never an error text.
const PASSWORD: &str = "tls-Pa55word-9c1e";

fn opts(ca: Option<Vec<u8>>) -> RedisOptions {
    RedisOptions {
        // Bounds no answer of a live server reaches, however loaded the machine: these
        // tests are about TLS (`connect_timeout` bounds the handshake, and each answer).
        timeout: PATIENCE,
        connect_timeout: PATIENCE,
        tls_ca_pem: ca,
        ..RedisOptions::default()
    }
}

fn guard(store: impl GuardStore + 'static) -> RuleGuard {
    RuleGuard::new(GuardConfig {
        session: Some(Window::new(3, 600.0)),
        ..GuardConfig::default()
    })
    .expect("config")
    .with_store(store)
    .fail_mode(FailMode::Closed)
    .timeout(PATIENCE)
}

/// One call of `search` in session `s`: its decisions.
async fn check(guard: &RuleGuard, id: &str) -> toolmend::guard::Verdict {
    let args = serde_json::json!({"q": id});
    let calls = [GuardRequest {
        call_id: id,
        tool: "search",
        arguments: &args,
    }];
    let mut v = guard
        .check(
            GuardContext {
                session: Some("s"),
                history: &[],
            },
            &calls,
        )
        .await;
    v.remove(0)
}

fn refused_by(v: &toolmend::guard::Verdict) -> Vec<Rule> {
    v.decisions
        .iter()
        .filter(|d| d.action != Action::Allow && !d.shadow)
        .map(|d| d.rule)
        .collect()
}

#[tokio::test]
async fn a_rediss_store_trusting_the_servers_ca_enforces_a_window_over_tls() {
    let redis = TlsRedis::start(PASSWORD);
    // TLS only: no plain port a test could have talked to by mistake.
    assert_eq!(redis.cli(&["CONFIG", "GET", "port"]), "port\n0");
    let front = redis_guard_store(&redis.url(), opts(Some(redis.ca_pem()))).expect("url");
    let store = front.inner().clone();
    assert!(store.wait_connected(PATIENCE).await, "{:?}", store.state());
    assert_eq!(
        store.address(),
        format!("rediss://127.0.0.1:{}/", redis.port)
    );
    let guard = guard(front);
    let mut allowed = Vec::new();
    for i in 0..4 {
        let v = check(&guard, &format!("c{i}")).await;
        assert!(
            v.decisions.iter().all(|d| d.rule != Rule::StoreUnavailable),
            "call {i} was not decided by Redis: {v:?}"
        );
        if i == 3 {
            assert_eq!(refused_by(&v), [Rule::SessionWindow], "{v:?}");
        }
        allowed.push(v.is_allowed());
    }
    assert_eq!(allowed, [true, true, true, false]);
    let st = store.stats();
    assert_eq!((st.round_trips, st.unavailable, st.timeouts), (4, 0, 0));

    // The records are on the TLS server (read back by redis-cli, a client of its own):
    // one session hash whose window holds its expiry and exactly three admissions.
    assert!(
        redis.cli(&["INFO", "keyspace"]).contains("db0:keys=1,"),
        "{}",
        redis.cli(&["INFO", "keyspace"])
    );
    let key = redis.cli(&["KEYS", "tm:v2:*"]);
    assert!(
        key.starts_with("tm:v2:{") && key.ends_with('}') && !key.contains('\n'),
        "{key}"
    );
    let window = redis.cli(&["HGET", &key, "s"]);
    assert!(
        window.len() == 13 * 4 && window.bytes().all(|b| b.is_ascii_digit()),
        "a window of three admissions: {window:?}"
    );
}

#[tokio::test]
async fn a_rediss_store_that_does_not_trust_the_issuer_fails_its_decisions_saying_why() {
    let redis = TlsRedis::start(PASSWORD);
    let address = format!("rediss://127.0.0.1:{}/", redis.port);
    let calls = [AdmitCall {
        call_id: "a".to_owned(),
        checks: vec![Check {
            rule: Rule::SessionWindow,
            scope: Scope::Session,
            limit: 3,
            window_ms: Some(60_000),
            shadow: false,
        }],
    }];
    for (what, ca) in [
        ("an unrelated CA", Some(redis.other_ca_pem())),
        ("no CA (the system's roots)", None),
    ] {
        let s = RedisStore::connect(&redis.url(), opts(ca)).expect("url");
        let st = s
            .first_attempt(PATIENCE)
            .await
            .expect_err("the handshake must fail");
        let StoreState::Connecting { cause: Some(cause) } = &st else {
            panic!("{what}: the first attempt should have failed with a cause: {st:?}");
        };
        // The TLS handshake refused the server's certificate (not a refused connection,
        // a timeout or the password: the server is up and the password right, see below).
        assert!(
            cause.contains("invalid peer certificate") && cause.contains("UnknownIssuer"),
            "{what}: {cause}"
        );
        let e = s
            .admit(Admission {
                session: Some("s"),
                ttl_ms: 60_000,
                calls: &calls,
            })
            .await
            .expect_err("no decision through an untrusted server");
        assert_eq!(e.kind, StoreErrorKind::Unavailable, "{what}: {e}");
        assert!(
            e.message
                .starts_with(&format!("not connected yet to {address}: ")),
            "{what}: {e}"
        );
        assert!(e.message.contains("UnknownIssuer"), "{what}: {e}");
        for text in [&e.message, cause, &format!("{s:?}")] {
            assert!(!text.contains(PASSWORD), "{what}: the password in {text}");
        }
        // Through the guard: failing closed, every call refused as store_unavailable.
        let guard = guard(s.clone());
        let v = check(&guard, "c0").await;
        assert!(!v.is_allowed(), "{what}: {v:?}");
        assert_eq!(refused_by(&v), [Rule::StoreUnavailable], "{what}: {v:?}");
        assert!(!s.is_connected(), "{what}");
        assert_eq!(s.stats().round_trips, 0, "{what}");
    }
    // Nothing reached the keyspace, and the same server and URL with its CA do work: the
    // failures above are the issuer's, not the server's or the password's.
    assert_eq!(redis.cli(&["DBSIZE"]), "0");
    let s = RedisStore::connect(&redis.url(), opts(Some(redis.ca_pem()))).expect("url");
    assert!(s.wait_connected(PATIENCE).await, "{:?}", s.state());
}
