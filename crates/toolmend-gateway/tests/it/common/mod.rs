//! What the gateway's test modules share: a gateway served on a free loopback port in
//! front of the strict scripted provider, and the weather tool most of them call.

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, ToolCall};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

/// The bound on any single wait of these tests (an answer, a condition polled for): far
/// above what a loaded machine needs, so that only a wait that would never end reaches it.
pub const WAIT: Duration = Duration::from_secs(30);

/// Polls `check` until it gives a value (every 20 ms, at most [`WAIT`]); panics with
/// `what` and the last `Err` of `check` otherwise. For what happens in the
/// background (a log line, an event written, a span exported): waited for, never timed.
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let until = Instant::now() + WAIT;
    loop {
        match check() {
            Ok(v) => return v,
            Err(last) if Instant::now() >= until => {
                panic!("{what}: not within {WAIT:?}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Serves `gateway` on a free 127.0.0.1 port for the rest of the test; its address.
pub async fn serve(gateway: Arc<Gateway>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(toolmend_gateway::serve(
        listener,
        gateway,
        std::future::pending(),
    ));
    addr
}

/// A gateway in front of a scripted provider.
pub struct Running {
    /// The gateway's base URL, up to `/v1`.
    pub url: String,
    /// The gateway's root (`/metrics`, `/healthz`).
    pub root: String,
    pub provider: ScriptedProvider,
    pub http: reqwest::Client,
}

/// A gateway (metrics installed) whose upstream is a provider playing `script`, with
/// `extra_toml` after the upstream's line.
pub async fn start(script: Script, extra_toml: &str) -> Running {
    start_with_env(script, extra_toml, Vec::new()).await
}

/// [`start`] with `TOOLMEND_*` overrides from `env`.
pub async fn start_with_env(
    script: Script,
    extra_toml: &str,
    env: Vec<(String, String)>,
) -> Running {
    let provider = ScriptedProvider::start(script).await.unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\n{extra_toml}",
        provider.base_url()
    );
    let config = Config::from_toml_and_env(&toml, env).unwrap();
    let metrics = toolmend_gateway::metrics::install().ok();
    let gateway = Arc::new(Gateway::new(config, metrics).unwrap());
    let addr = serve(gateway).await;
    Running {
        url: format!("http://{addr}/v1"),
        root: format!("http://{addr}"),
        provider,
        http: reqwest::Client::new(),
    }
}

/// The request's `tools`: `get_weather` (city required, days, units as an enum).
pub fn weather_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"], "additionalProperties": false}}}])
}

/// A provider step that answers with `list` as its tool calls.
pub fn calls(list: Vec<ToolCall>) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(list),
        ..Default::default()
    })
}
