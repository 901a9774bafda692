//! The floor of the gateway benchmark: a proxy on the gateway's own HTTP stack that does
//! no work. It takes `POST /v1/chat/completions`, sends the body to the upstream with the
//! same pooled hyper client and connection settings as `toolmend serve`, and passes the
//! answer's head and bytes back as they came: no JSON read, no route table beyond one
//! path, no log, no metrics.
//!
//! What `toolmend serve` spends per request above this proxy is its own work (parsing,
//! mending, the history check, the log, the metrics); what this proxy spends is what
//! hyper's server and client and the kernel's loopback cost on the machine, the part no
//! gateway on this stack goes under.
//!
//! Its command line is `serve`'s, so `bench/gateway/kinds.py` takes it as a gateway:
//!
//! ```sh
//! cargo build --release -p toolmend-gateway --example floor --example loadgen
//! bench/gateway/kinds.py target/release/examples/floor target/release/toolmend \
//!     --kinds plain,valid,stream,stream-calls --loadgen target/release/examples/loadgen
//! ```
//!
//! (Not `mend` or `guard`: the floor forwards the broken arguments as they are, and the
//! kind's check of the answer's bytes would fail it.)

use std::{
    convert::Infallible, io::Write as _, net::SocketAddr, process::ExitCode, time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderValue, Request, Response, StatusCode, header},
    routing::post,
};
use http_body_util::Full;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioIo, TokioTimer},
    service::TowerToHyperService,
};

const USAGE: &str = "\
floor: a proxy on toolmend's HTTP stack that does no work (the benchmark's floor)

Usage: floor [serve] --listen ADDR --upstream URL

  --listen ADDR     where to listen (127.0.0.1:0 picks a port; the URL is printed)
  --upstream URL    the model server's base URL, http:// only (e.g. http://127.0.0.1:8000/v1)
";

// The allocator of the `toolmend` binary, so that the floor differs from it only in work.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone)]
struct Upstream {
    client: Client<HttpConnector, Full<Bytes>>,
    completions: String,
}

fn main() -> ExitCode {
    let mut listen: Option<String> = None;
    let mut upstream: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "serve" => {}
            "--listen" => listen = args.next(),
            "--upstream" => upstream = args.next(),
            "-h" | "--help" => {
                let _ = write!(std::io::stdout(), "{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("floor: unknown argument {other:?}\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let (Some(listen), Some(upstream)) = (listen, upstream) else {
        eprintln!("floor: --listen and --upstream are required\n\n{USAGE}");
        return ExitCode::from(2);
    };
    let Ok(addr) = listen.parse::<SocketAddr>() else {
        eprintln!("floor: --listen {listen:?} is not an address such as 127.0.0.1:0");
        return ExitCode::from(2);
    };
    let base = upstream.trim_end_matches('/');
    if !base.starts_with("http://") {
        eprintln!("floor: --upstream must be an http:// URL, not {upstream:?}");
        return ExitCode::from(2);
    }
    let completions = if base.ends_with("/v1") {
        format!("{base}/chat/completions")
    } else {
        format!("{base}/v1/chat/completions")
    };
    // The same runtime shape as `toolmend serve`: one worker per core.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("floor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(addr, completions))
}

async fn run(addr: SocketAddr, completions: String) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("floor: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Ok(local) = listener.local_addr() else {
        eprintln!("floor: the listener has no address");
        return ExitCode::FAILURE;
    };
    let upstream = Upstream {
        client: client(),
        completions,
    };
    let router = Router::new()
        .route("/v1/chat/completions", post(forward))
        .with_state(upstream);
    let mut out = std::io::stdout();
    let _ = writeln!(out, "floor listening on http://{local}/v1");
    let _ = out.flush();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        // A connection's task ends with its connection; the process ends with a signal.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(async move {
            // The connection settings of the gateway's `server::listen::serve_one`.
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .max_buf_size(64 * 1024)
                .keep_alive(true);
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The gateway's direct client (`server::upstream::direct_client`), its settings alike.
fn client() -> Client<HttpConnector, Full<Bytes>> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    http.set_keepalive(Some(Duration::from_secs(15)));
    http.set_keepalive_interval(Some(Duration::from_secs(15)));
    http.set_keepalive_retries(Some(3));
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .build(http)
}

async fn forward(
    State(upstream): State<Upstream>,
    body: Bytes,
) -> Result<Response<Body>, Infallible> {
    let request = Request::post(upstream.completions.as_str())
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )
        .body(Full::new(body));
    let Ok(request) = request else {
        return Ok(bad_gateway());
    };
    match upstream.client.request(request).await {
        Ok(answer) => {
            let (parts, incoming) = answer.into_parts();
            let mut out = Response::new(Body::new(incoming));
            *out.status_mut() = parts.status;
            for name in [header::CONTENT_TYPE, header::CACHE_CONTROL] {
                if let Some(v) = parts.headers.get(&name) {
                    out.headers_mut().insert(name, v.clone());
                }
            }
            Ok(out)
        }
        Err(_) => Ok(bad_gateway()),
    }
}

fn bad_gateway() -> Response<Body> {
    let mut out = Response::new(Body::from(
        r#"{"error":{"message":"upstream unreachable","type":"upstream_error"}}"#,
    ));
    *out.status_mut() = StatusCode::BAD_GATEWAY;
    out
}
