//! Who may call (`[access]`), end to end on 127.0.0.1: a request without a valid client
//! key is a 401 in OpenAI's error shape and never reaches the upstream (the strict
//! scripted provider receives nothing); a valid key passes, and only the gateway's own
//! key goes upstream; the client's name scopes its guard sessions, labels its metrics
//! and marks its events; `/metrics` on the admin listener or behind the admin key; and
//! a gateway that holds a key refuses to serve a public address without client keys.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{Router, body::Bytes, http::HeaderMap, response::IntoResponse, routing::post};
use serde_json::{Value, json};
use toolmend::conversation::ToolCall;
use toolmend_gateway::{Config, Gateway, sha256_hex};
use toolmend_scripted::{Script, ScriptedProvider};

use crate::common::{WAIT, calls, eventually, serve, weather_tools};

const CI_KEY: &str = "tmk_ci_0123456789abcdef";
const WEB_KEY: &str = "tmk_web_0123456789abcde";
/// As long as `CI_KEY`, one character off.
const WRONG_KEY: &str = "tmk_ci_0123456789abcdeF";
const ADMIN_KEY: &str = "tmk_admin_secret_42";

/// `[access]` with the clients `ci` and `web`, and `extra` after it.
fn access(extra: &str) -> String {
    format!(
        "[access]\n{extra}\n[[access.clients]]\nname = \"ci\"\nkey_sha256 = \"{}\"\n\
         [[access.clients]]\nname = \"web\"\nkey_sha256 = \"{}\"\n",
        sha256_hex(CI_KEY.as_bytes()),
        sha256_hex(WEB_KEY.as_bytes())
    )
}

/// A harmless environment variable that cargo and nextest set for every test run, as a
/// stand-in provider key for `upstream.api_key_env` (tests cannot set one: `set_var` is
/// unsafe and this workspace forbids unsafe code).
fn some_env_key() -> (String, String) {
    ["CARGO_PKG_NAME", "CARGO_PKG_VERSION", "CARGO_MANIFEST_DIR"]
        .into_iter()
        .find_map(|k| {
            let v = std::env::var(k).ok()?;
            (!v.is_empty() && v.bytes().all(|b| (0x21..0x7f).contains(&b)))
                .then(|| (k.to_owned(), v))
        })
        .expect("run under cargo or nextest: no CARGO_PKG_NAME in the environment")
}

fn gateway(toml: &str) -> Arc<Gateway> {
    let config = Config::from_toml_and_env(toml, Vec::new()).unwrap();
    let metrics = toolmend_gateway::metrics::install().ok();
    Arc::new(Gateway::new(config, metrics).unwrap())
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(WAIT)
        .no_proxy()
        .build()
        .unwrap()
}

fn ask() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": weather_tools()})
}

/// An upstream that answers every chat request with a plain completion and keeps the
/// headers it received. Its base URL.
async fn recording_upstream() -> (String, Arc<Mutex<Vec<HeaderMap>>>) {
    let seen: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let kept = Arc::clone(&seen);
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: HeaderMap, _body: Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                kept.lock().unwrap().push(headers);
                let body = json!({"id": "chatcmpl-a", "object": "chat.completion",
                    "created": 1, "model": "m", "choices": [{"index": 0, "message":
                    {"role": "assistant", "content": "ok"}, "logprobs": null,
                    "finish_reason": "stop"}]});
                ([("content-type", "application/json")], body.to_string()).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), seen)
}

/// The value of the series `name{labels}` (labels as Prometheus renders them, sorted).
fn series(metrics: &str, name_and_labels: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
}

fn assert_401(status: reqwest::StatusCode, headers: &HeaderMap, body: &Value, what: &str) {
    assert_eq!(status, 401, "{what}: {body}");
    let e = &body["error"];
    assert_eq!(e["type"], "invalid_request_error", "{what}: {body}");
    assert_eq!(e["code"], "invalid_api_key", "{what}: {body}");
    assert!(e["param"].is_null(), "{what}: {body}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{body}"
    );
    assert_eq!(
        headers.get("www-authenticate").unwrap(),
        "Bearer realm=\"toolmend\"",
        "{what}"
    );
}

#[tokio::test]
async fn a_request_without_a_valid_client_key_is_a_401_and_never_reaches_the_upstream() {
    // The script would answer; it must never be asked.
    let provider = ScriptedProvider::start(Script::new().then(calls(vec![ToolCall::new(
        "c1",
        "get_weather",
        r#"{"city": "Paris"}"#,
    )])))
    .await
    .unwrap();
    let (env, _) = some_env_key();
    let gw = gateway(&format!(
        "upstream.base_url = \"{}\"\nupstream.api_key_env = \"{env}\"\n{}",
        provider.base_url(),
        access("")
    ));
    let addr = serve(gw).await;
    let http = http();
    let base = format!("http://{addr}");
    let exec = json!({"message": {"role": "assistant", "tool_calls": [{"id": "c1",
        "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}});
    for (method, path, body) in [
        ("POST", "/v1/chat/completions", ask()),
        ("POST", "/chat/completions", ask()),
        ("POST", "/v1/tools/execute", exec.clone()),
        ("GET", "/v1/models", Value::Null),
        ("GET", "/models", Value::Null),
        // The wrong method still asks for the key first (no route listing to strangers
        // beyond the 405 a keyed client would get).
        ("GET", "/v1/chat/completions", Value::Null),
    ] {
        for (how, key) in [
            ("no key", None),
            (
                "a wrong key of the same length",
                Some(("authorization", format!("Bearer {WRONG_KEY}"))),
            ),
            (
                "a wrong x-api-key",
                Some(("x-api-key", WRONG_KEY.to_owned())),
            ),
            ("a wrong api-key", Some(("api-key", WRONG_KEY.to_owned()))),
            // The gateway's own provider key is no client key.
            (
                "the provider key",
                Some(("authorization", format!("Bearer {}", some_env_key().1))),
            ),
            (
                "an empty bearer",
                Some(("authorization", "Bearer ".to_owned())),
            ),
            (
                "a key in Basic",
                Some(("authorization", format!("Basic {CI_KEY}"))),
            ),
        ] {
            let mut req = if method == "POST" {
                http.post(format!("{base}{path}")).json(&body)
            } else {
                http.get(format!("{base}{path}"))
            };
            if let Some((h, v)) = key {
                req = req.header(h, v);
            }
            let resp = req.send().await.unwrap();
            let (status, headers) = (resp.status(), resp.headers().clone());
            let body: Value = resp.json().await.unwrap();
            let what = format!("{method} {path} with {how}");
            assert_401(status, &headers, &body, &what);
            assert!(
                !body.to_string().contains(WRONG_KEY),
                "{what}: the key echoed"
            );
            assert!(headers.get("x-request-id").is_some(), "{what}");
        }
    }
    assert!(provider.requests().is_empty(), "the upstream was reached");
    assert_eq!(provider.remaining(), 1, "the upstream answered something");

    // The probes stay open (load balancers have no key).
    for path in ["/healthz", "/readyz"] {
        let resp = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    // /metrics asks for a client key (no admin key, no admin listener)...
    let resp = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    // ... and counts the refusals by route and reason.
    let metrics = http
        .get(format!("{base}/metrics"))
        .bearer_auth(CI_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let invalid = series(
        &metrics,
        "toolmend_auth_refused_total{route=\"/v1/chat/completions\",reason=\"invalid\"}",
    )
    .unwrap_or_else(|| panic!("no refusal series in {metrics}"));
    // Per route (aliases included): 4 invalid keys of the 7 tries, for 3 requests to
    // that route (`/v1/…`, its alias, the wrong method); 3 missing for 2 to /v1/models.
    assert!(invalid >= 12.0, "{invalid}");
    let missing = series(
        &metrics,
        "toolmend_auth_refused_total{route=\"/v1/models\",reason=\"missing\"}",
    )
    .unwrap();
    assert!(missing >= 6.0, "{missing}");
    assert!(
        series(
            &metrics,
            "toolmend_auth_refused_total{route=\"/metrics\",reason=\"missing\"}"
        )
        .is_some(),
        "{metrics}"
    );
    // The right key, now: the call goes through.
    let resp = http
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(CI_KEY)
        .json(&ask())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test]
async fn a_valid_key_passes_and_only_the_gateways_own_key_goes_upstream() {
    let (url, seen) = recording_upstream().await;
    let (env, provider_key) = some_env_key();
    let addr = serve(gateway(&format!(
        "upstream.base_url = \"{url}\"\nupstream.api_key_env = \"{env}\"\n{}",
        access("")
    )))
    .await;
    let http = http();
    for (h, v) in [
        ("authorization", format!("Bearer {CI_KEY}")),
        ("x-api-key", WEB_KEY.to_owned()),
        ("api-key", CI_KEY.to_owned()),
    ] {
        let resp = http
            .post(format!("http://{addr}/v1/chat/completions"))
            .header(h, &v)
            .json(&ask())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{h}");
        let got = seen.lock().unwrap().pop().unwrap();
        assert_eq!(
            got.get("authorization").unwrap().to_str().unwrap(),
            format!("Bearer {provider_key}"),
            "{h}"
        );
        for name in ["x-api-key", "api-key"] {
            assert!(got.get(name).is_none(), "{h}: {name} went upstream");
        }
        let all = format!("{got:?}");
        assert!(
            !all.contains(CI_KEY) && !all.contains(WEB_KEY),
            "{h}: {all}"
        );
    }
    // The admitted requests, by client.
    let metrics = http
        .get(format!("http://{addr}/metrics"))
        .header("x-api-key", WEB_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        series(&metrics, "toolmend_client_requests_total{client=\"ci\"}").unwrap() >= 2.0,
        "{metrics}"
    );
    assert!(
        series(&metrics, "toolmend_client_requests_total{client=\"web\"}").unwrap() >= 1.0,
        "{metrics}"
    );
}

#[tokio::test]
async fn without_a_provider_key_a_client_key_is_never_passed_on() {
    // No api_key_env: the clients' keys are the gateway's, so nothing goes upstream.
    let (url, seen) = recording_upstream().await;
    let addr = serve(gateway(&format!(
        "upstream.base_url = \"{url}\"\n{}",
        access("")
    )))
    .await;
    let resp = http()
        .post(format!("http://{addr}/v1/chat/completions"))
        .bearer_auth(CI_KEY)
        .header("x-api-key", CI_KEY)
        .json(&ask())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let got = seen.lock().unwrap().pop().unwrap();
    for name in ["authorization", "x-api-key", "api-key"] {
        assert!(got.get(name).is_none(), "{name} went upstream: {got:?}");
    }
}

#[tokio::test]
async fn two_clients_naming_the_same_session_never_share_its_counts() {
    // One call per session; each request answers one call.
    let call = || {
        calls(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"city": "Paris"}"#,
        )])
    };
    let provider = ScriptedProvider::start(Script::new().then(call()).then(call()).then(call()))
        .await
        .unwrap();
    let events = std::env::temp_dir().join(format!(
        "toolmend-access-events-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&events);
    let gw = gateway(&format!(
        "upstream.base_url = \"{}\"\nevents.path = \"{}\"\n\
         [guard]\non_flood = \"reject\"\n[guard.session]\nlimit = 1\nwindow_secs = 600\n{}",
        provider.base_url(),
        events.display(),
        access("")
    ));
    let addr = serve(gw).await;
    let http = http();
    let chat = |key: &'static str| {
        http.post(format!("http://{addr}/v1/chat/completions"))
            .bearer_auth(key)
            .header("x-toolmend-session", "shared")
            .json(&ask())
            .send()
    };
    let a = chat(CI_KEY).await.unwrap();
    assert_eq!(a.status(), 200);
    let guard = a.headers()["x-toolmend-guard"].to_str().unwrap().to_owned();
    assert!(guard.contains("session=header"), "{guard}");
    // Another client, the same session name: its own count.
    let b = chat(WEB_KEY).await.unwrap();
    assert_eq!(b.status(), 200, "{}", b.text().await.unwrap());
    // The first client again: its session's one call is spent.
    let a2 = chat(CI_KEY).await.unwrap();
    assert_eq!(a2.status(), 429, "{}", a2.text().await.unwrap());

    // Each event names its client; the two clients' "shared" sessions hash apart (the
    // session is hashed; no key anywhere).
    let text = eventually("two events written", || {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        if text.lines().count() >= 2 {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await;
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "{text}");
    assert_eq!(lines[0]["client"], "ci", "{text}");
    assert_eq!(lines[1]["client"], "web", "{text}");
    assert_ne!(lines[0]["session"], lines[1]["session"], "{text}");
    assert!(lines[0]["session"].is_string(), "{text}");
    assert!(!text.contains(CI_KEY) && !text.contains(WEB_KEY), "{text}");
    let _ = std::fs::remove_file(&events);
}

#[tokio::test]
async fn without_another_session_the_client_is_the_session() {
    let call = || {
        calls(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"city": "Paris"}"#,
        )])
    };
    let provider = ScriptedProvider::start(Script::new().then(call()).then(call()))
        .await
        .unwrap();
    let addr = serve(gateway(&format!(
        "upstream.base_url = \"{}\"\n[guard]\non_flood = \"reject\"\n\
         [guard.session]\nlimit = 1\nwindow_secs = 600\n{}",
        provider.base_url(),
        access("")
    )))
    .await;
    let http = http();
    let chat = || {
        http.post(format!("http://{addr}/v1/chat/completions"))
            .header("api-key", CI_KEY)
            .json(&ask())
            .send()
    };
    let first = chat().await.unwrap();
    assert_eq!(first.status(), 200);
    let guard = first.headers()["x-toolmend-guard"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(guard.contains("session=client"), "{guard}");
    assert_eq!(chat().await.unwrap().status(), 429);
}

async fn get(url: String, key: Option<(&str, &str)>) -> (u16, String) {
    let mut req = http().get(url);
    if let Some((h, v)) = key {
        req = req.header(h, v);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test]
async fn metrics_on_the_admin_listener_and_not_on_the_main_one() {
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    // The address in the configuration only tells the main listener that /metrics is
    // elsewhere; the test binds the admin listener itself.
    let gw = gateway(&format!(
        "upstream.base_url = \"{}\"\n{}",
        provider.base_url(),
        access("admin_listen = \"127.0.0.1:9790\"")
    ));
    let main = serve(Arc::clone(&gw)).await;
    let admin = serve_admin(gw).await;
    let (status, body) = get(
        format!("http://{main}/metrics"),
        Some(("x-api-key", CI_KEY)),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("access.admin_listen"), "{body}");
    // Something to count: a request without a key.
    assert_eq!(get(format!("http://{main}/v1/models"), None).await.0, 401);
    // Open there (no admin key): the listener is the boundary.
    let (status, body) = get(format!("http://{admin}/metrics"), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("toolmend_auth_refused_total"), "{body}");
    for path in ["/healthz", "/readyz"] {
        assert_eq!(get(format!("http://{admin}{path}"), None).await.0, 200);
        assert_eq!(get(format!("http://{main}{path}"), None).await.0, 200);
    }
    // The API is not served on the admin listener.
    let (status, _) = get(
        format!("http://{admin}/v1/models"),
        Some(("x-api-key", CI_KEY)),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn metrics_behind_the_admin_key_whichever_listener() {
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    let admin_hash = sha256_hex(ADMIN_KEY.as_bytes());
    // On the main listener: the admin key, not a client's.
    let gw = gateway(&format!(
        "upstream.base_url = \"{}\"\n{}",
        provider.base_url(),
        access(&format!("admin_key_sha256 = \"{admin_hash}\""))
    ));
    let main = serve(gw).await;
    let url = format!("http://{main}/metrics");
    assert_eq!(get(url.clone(), None).await.0, 401);
    assert_eq!(get(url.clone(), Some(("x-api-key", CI_KEY))).await.0, 401);
    let (status, body) = get(
        url.clone(),
        Some(("authorization", &format!("Bearer {ADMIN_KEY}"))),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The admin key opens no API route.
    let (status, _) = get(
        format!("http://{main}/v1/models"),
        Some(("x-api-key", ADMIN_KEY)),
    )
    .await;
    assert_eq!(status, 401);

    // On an admin listener of its own, with no client keys at all: still the admin key.
    let gw = gateway(&format!(
        "upstream.base_url = \"{}\"\n[access]\nadmin_listen = \"127.0.0.1:9790\"\n\
         admin_key_sha256 = \"{admin_hash}\"\n",
        provider.base_url(),
    ));
    let admin = serve_admin(gw).await;
    let url = format!("http://{admin}/metrics");
    assert_eq!(get(url.clone(), None).await.0, 401);
    assert_eq!(get(url.clone(), Some(("api-key", ADMIN_KEY))).await.0, 200);
}

/// Serves `gw`'s admin routes on a free 127.0.0.1 port; its address.
async fn serve_admin(gw: Arc<Gateway>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(toolmend_gateway::serve_admin(
        listener,
        gw,
        std::future::pending(),
    ));
    addr
}

#[tokio::test]
async fn a_gateway_holding_a_key_refuses_a_public_address_without_client_keys() {
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    let (env, _) = some_env_key();
    let base = format!(
        "upstream.base_url = \"{}\"\nupstream.api_key_env = \"{env}\"\n",
        provider.base_url()
    );
    let public: SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let err = gateway(&base)
        .check_exposure(public)
        .unwrap_err()
        .to_string();
    for what in [
        "0.0.0.0:8080",
        env.as_str(),
        "upstream.api_key_env",
        "toolmend key hash",
        "[[access.clients]]",
        "TOOLMEND_ACCESS__CLIENTS",
        "--listen 127.0.0.1:8080",
        "access.allow_unauthenticated = true",
        "TOOLMEND_ACCESS__ALLOW_UNAUTHENTICATED=true",
    ] {
        assert!(err.contains(what), "`{what}` not in: {err}");
    }
    // Named, never shown.
    assert!(!err.contains(&some_env_key().1), "{err}");
    // An IPv6 wildcard is as public.
    assert!(
        gateway(&base)
            .check_exposure("[::]:8080".parse().unwrap())
            .is_err()
    );
    // Each way out.
    let loopback = [
        "127.0.0.1:8080".parse::<SocketAddr>().unwrap(),
        "[::1]:8080".parse().unwrap(),
    ];
    for addr in loopback {
        gateway(&base).check_exposure(addr).unwrap();
    }
    gateway(&format!("{base}{}", access("")))
        .check_exposure(public)
        .unwrap();
    gateway(&format!("{base}[access]\nallow_unauthenticated = true\n"))
        .check_exposure(public)
        .unwrap();
    let opt_in = Config::from_toml_and_env(
        &base,
        vec![(
            "TOOLMEND_ACCESS__ALLOW_UNAUTHENTICATED".to_owned(),
            "true".to_owned(),
        )],
    )
    .unwrap();
    Gateway::new(opt_in, None)
        .unwrap()
        .check_exposure(public)
        .unwrap();
    // No key of its own and no tools: a caller spends only what it brings.
    gateway(&format!(
        "upstream.base_url = \"{}\"\n",
        provider.base_url()
    ))
    .check_exposure(public)
    .unwrap();

    // `serve` itself refuses such a listener, before any connection.
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let err = tokio::time::timeout(
        WAIT,
        toolmend_gateway::serve(listener, gateway(&base), std::future::pending()),
    )
    .await
    .expect("serve did not refuse")
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("toolmend key hash"), "{err}");
}

#[test]
fn client_keys_are_hashes_with_names_of_their_own() {
    let base = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n";
    let load = |extra: &str| Config::from_toml_and_env(&format!("{base}{extra}"), Vec::new());
    // The key itself where its hash belongs.
    let e = load("[[access.clients]]\nname = \"ci\"\nkey_sha256 = \"tmk_ci_0123\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("toolmend key hash"), "{e}");
    assert!(e.contains(":4:") || e.contains("access.clients"), "{e}");
    let h = sha256_hex(b"k");
    let e = load(&format!(
        "[[access.clients]]\nname = \"ci\"\nkey_sha256 = \"{h}\"\n\
         [[access.clients]]\nname = \"ci\"\nkey_sha256 = \"{}\"\n",
        sha256_hex(b"other")
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("given twice"), "{e}");
    let e = load(&format!(
        "[[access.clients]]\nname = \"a\"\nkey_sha256 = \"{h}\"\n\
         [[access.clients]]\nname = \"b\"\nkey_sha256 = \"{}\"\n",
        h.to_uppercase()
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("the same key"), "{e}");
    let e = load(&format!(
        "[[access.clients]]\nname = \"a b\"\nkey_sha256 = \"{h}\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("not 1 to 64"), "{e}");
    let e = load("[access]\nclient = []\n").unwrap_err().to_string();
    assert!(e.contains("client"), "{e}");
    // From the environment, as an inline array of tables.
    let c = Config::from_toml_and_env(
        base,
        vec![(
            "TOOLMEND_ACCESS__CLIENTS".to_owned(),
            format!("[{{name = \"ci\", key_sha256 = \"{h}\"}}]"),
        )],
    )
    .unwrap();
    assert_eq!(c.access.clients[0].name, "ci");

    // From a file of `[[clients]]`, joined to those of the configuration.
    let path = std::env::temp_dir().join(format!("toolmend-clients-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        format!(
            "[[clients]]\nname = \"web\"\nkey_sha256 = \"{}\"\n",
            sha256_hex(b"w")
        ),
    )
    .unwrap();
    let file = format!("[access]\nclients_file = \"{}\"\n", path.display());
    let c = load(&format!(
        "{file}[[access.clients]]\nname = \"ci\"\nkey_sha256 = \"{h}\"\n"
    ))
    .unwrap();
    let gw = Gateway::new(c, None).unwrap();
    let names: Vec<&str> = gw.clients().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["ci", "web"]);
    // The same name in both: refused at start, naming the file.
    let c = load(&format!(
        "{file}[[access.clients]]\nname = \"web\"\nkey_sha256 = \"{h}\"\n"
    ))
    .unwrap();
    let e = Gateway::new(c, None).unwrap_err().to_string();
    assert!(
        e.contains("given twice") && e.contains("clients_file"),
        "{e}"
    );
    std::fs::write(&path, "[[client]]\nname = \"x\"\n").unwrap();
    let e = Gateway::new(load(&file).unwrap(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("clients_file") && e.contains("client"), "{e}");
    let _ = std::fs::remove_file(&path);
    let e = Gateway::new(load(&file).unwrap(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("clients_file"), "{e}");
}

#[tokio::test]
async fn the_messages_routes_ask_for_a_client_key_and_refuse_in_anthropics_shape() {
    let (url, seen) = recording_upstream().await;
    let (env, provider_key) = some_env_key();
    let addr = serve(gateway(&format!(
        "upstream.base_url = \"{url}\"\nupstream.api_key_env = \"{env}\"\n{}",
        access("")
    )))
    .await;
    let http = http();
    let body = json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]});
    for route in ["/v1/messages", "/v1/messages/count_tokens"] {
        for key in [None, Some(WRONG_KEY)] {
            let mut req = http.post(format!("http://{addr}{route}")).json(&body);
            if let Some(k) = key {
                req = req.header("x-api-key", k);
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 401, "{route} {key:?}");
            let got: Value = resp.json().await.unwrap();
            assert_eq!(got["type"], "error", "{got}");
            assert_eq!(got["error"]["type"], "authentication_error", "{got}");
            assert_eq!(got["error"]["code"], "invalid_api_key", "{got}");
            assert!(
                got["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("x-api-key"),
                "{got}"
            );
        }
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "a refused request went upstream"
    );
    // The client's key admits it, and only the gateway's own key goes upstream.
    let resp = http
        .post(format!("http://{addr}/v1/messages"))
        .header("x-api-key", CI_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let message: Value = resp.json().await.unwrap();
    assert_eq!(message["content"][0]["text"], "ok", "{message}");
    let got = seen.lock().unwrap().pop().unwrap();
    assert_eq!(
        got.get("authorization").unwrap().to_str().unwrap(),
        format!("Bearer {provider_key}")
    );
    assert!(!format!("{got:?}").contains(CI_KEY));
}
