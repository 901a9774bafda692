//! The accept loop: what no single request may take away from the others. Each
//! accepted socket gets `TCP_NODELAY` (small SSE writes go out at once, not after a
//! delayed ACK), a bounded time to send its request head (which also bounds an idle
//! kept-alive connection), a bounded head size, and a place under the connection cap;
//! one connection past the cap is answered 503 and closed. On shutdown the listener
//! closes (new connections are refused), requests in flight get the grace period to
//! finish, and then whatever is left is cut.

use std::{future::Future, io, sync::Arc, time::Duration};

use axum::Router;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{Semaphore, watch},
    task::JoinSet,
};

use crate::{config::Limits, metrics as m, server::error::GatewayError};

/// The answer to a connection past `limits.max_connections`.
fn busy() -> Vec<u8> {
    let body = GatewayError::TooManyConnections.body().to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         connection: close\r\nretry-after: 1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains (see the module
/// docs). Returns once every connection has ended or the grace period is over.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
            // Reap finished connection tasks so the set stays as small as what is open.
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let (stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: wait a little, do not spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            m::connection_refused();
            conns.spawn(refuse(stream));
            continue;
        };
        let router = router.clone();
        let mut stop = stop_rx.clone();
        let header_timeout = limits.header_timeout();
        let max_header = limits.max_header_bytes;
        conns.spawn(async move {
            let _permit = permit;
            serve_one(stream, router, &mut stop, header_timeout, max_header).await;
        });
    }
    // No new connections from here (the listener is dropped); tell the open ones to
    // finish their request in flight and close.
    drop(listener);
    let _ = stop_tx.send(true);
    let grace = limits.shutdown_grace();
    let drained =
        tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            left = conns.len(),
            grace_secs = grace.as_secs_f64(),
            "shutdown grace period over; closing the connections left"
        );
        conns.shutdown().await;
    }
    Ok(())
}

async fn serve_one(
    stream: TcpStream,
    router: Router,
    stop: &mut watch::Receiver<bool>,
    header_timeout: Duration,
    max_header: usize,
) {
    let service = TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        // hyper refuses (panics on) less than 8 KiB; Config::check says so first.
        .max_buf_size(max_header.max(8192))
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Answers a connection past the cap with 503 and closes it (bounded: a client that
/// does not send its request head, or does not read, gets a second, then it is dropped).
/// The head is read first: an HTTP client takes bytes that arrive before it has sent its
/// request as a broken connection, not as an answer. What it sends after (a body) is read
/// and dropped until it closes: closing on unread bytes would reset the connection, and
/// the 503 could be lost with it.
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = stream.write_all(&busy()).await;
        let _ = stream.shutdown().await;
        while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
}
