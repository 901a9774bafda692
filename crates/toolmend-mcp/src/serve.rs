//! Serving the aggregating server ([`crate::hub`]): over stdio (one client, on our stdin
//! and stdout) or over streamable HTTP (many clients, each its own session, at `/mcp`).
//!
//! Before the protocol library reads a client's message, two things are done here: a
//! message over the size bound is not held (over stdio, a request for its id that the
//! library answers with an error takes its place; over HTTP, `413`), and the arguments of
//! a `tools/call` that are not an object are stashed for the hub
//! ([`crate::hub::stash_text_arguments`]).

use std::{future::Future, io, net::SocketAddr, sync::Arc};

use rmcp::{
    ServiceExt,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use tokio::io::{AsyncWriteExt, BufReader};

use crate::{
    frame::{Frame, Lines, sniff_id},
    hub::{Hub, stash_text_arguments},
};

/// Serves `hub` to one client on stdin and stdout, until the client leaves; messages of
/// at most `max` bytes.
///
/// # Errors
///
/// The client's handshake failed, or the transport did.
pub async fn stdio(hub: Hub, max: usize) -> io::Result<()> {
    let (input, output) = crate::stdio::client_pipes();
    let (mut into_rmcp, rmcp_side) = tokio::io::duplex(1 << 16);
    // The client's lines, bounded and with arguments stashed, into the library's input.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        let mut lines = Lines::new(BufReader::new(input), max);
        while let Ok(Some(frame)) = lines.next().await {
            let line = match frame {
                Frame::Line(l) => stash_text_arguments(&l).unwrap_or(l),
                Frame::TooLong { len, head, tail } => {
                    tracing::warn!(target: "toolmend::mcp", len, max, "a client message over the size limit was dropped");
                    let Some(id) = sniff_id(&head, &tail) else {
                        continue;
                    };
                    // Answered by the library: "method not found: io.toolmend/…".
                    serde_json::json!({"jsonrpc": "2.0", "id": id,
                        "method": "io.toolmend/message-over-the-size-limit"})
                    .to_string()
                    .into_bytes()
                }
            };
            if into_rmcp.write_all(&line).await.is_err()
                || into_rmcp.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
    });
    let (rmcp_in, _) = tokio::io::split(rmcp_side);
    let running = hub
        .serve((rmcp_in, output))
        .await
        .map_err(|e| io::Error::other(format!("the MCP client's handshake failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| io::Error::other(format!("the MCP session ended abnormally: {e}")))?;
    Ok(())
}

/// A client's POST body read within `max` bytes (`413` past it), its call arguments
/// stashed for the hub.
async fn bounded(
    req: axum::extract::Request,
    next: axum::middleware::Next,
    max: usize,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max).await else {
        let error = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
            "message": format!("Invalid Request: the message is over toolmend mcp-proxy's limit of {max} bytes (--max-message-bytes)")}});
        return (axum::http::StatusCode::PAYLOAD_TOO_LARGE, axum::Json(error)).into_response();
    };
    let bytes = stash_text_arguments(&bytes).map_or(bytes, axum::body::Bytes::from);
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// Serves `hub` over streamable HTTP at `http://ADDR/mcp` until `shutdown` resolves;
/// request bodies of at most `max` bytes; `extra` routes beside it.
///
/// # Errors
///
/// The address cannot be bound.
pub async fn http(
    hub: Hub,
    addr: SocketAddr,
    max: usize,
    allowed_hosts: &[String],
    extra: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    http_on(hub, listener, max, allowed_hosts, extra, shutdown).await
}

/// rmcp's server settings: bodies up to `max` (its own default is 4 MiB), and the `Host`
/// headers accepted (loopback only by default, against DNS rebinding; a proxy served on
/// another address names its hosts).
fn http_config(max: usize, allowed_hosts: &[String]) -> StreamableHttpServerConfig {
    let mut config = StreamableHttpServerConfig::default();
    config.max_request_body_bytes = max;
    if !allowed_hosts.is_empty() {
        let mut hosts = config.allowed_hosts.clone();
        hosts.extend(allowed_hosts.iter().cloned());
        config = config.with_allowed_hosts(hosts);
    }
    config
}

/// [`http`] on a bound listener; `extra` routes are served beside `/mcp` (`/metrics`).
///
/// # Errors
///
/// The listener fails.
pub async fn http_on(
    hub: Hub,
    listener: tokio::net::TcpListener,
    max: usize,
    allowed_hosts: &[String],
    extra: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let service = StreamableHttpService::new(
        move || Ok(hub.clone()),
        Arc::new(LocalSessionManager::default()),
        http_config(max, allowed_hosts),
    );
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(move |req, next| {
            bounded(req, next, max)
        }))
        .merge(extra);
    let bound = listener.local_addr()?;
    tracing::info!(target: "toolmend::mcp", "MCP proxy serving on http://{bound}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
