//! The stdio wrapper: the MCP server a child process, the client on the other end of
//! our stdin and stdout. A client's config changes one line (the command); the server
//! gets the environment and arguments it would have had, and its stderr is ours (the
//! client logs it as before).
//!
//! ```text
//! client ─stdin─► Lines ─► Relay::from_client ─► [writer] ─► child stdin
//! client ◄stdout─ [writer] ◄─ Relay::from_server ◄─ Lines ◄─ child stdout
//! ```
//!
//! How it ends, and nothing waits forever:
//! - the client closes our stdin: the child's stdin is closed; its answers still pass
//!   for [`StdioOptions::grace`], then it is killed; we exit with its status;
//! - the child's stdout ends (it exited or crashed): every request it had is answered
//!   with a `-32000` error naming its exit status; we exit with that status.

use std::{ffi::OsString, io, process::Stdio, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    process::{Child, Command},
    sync::mpsc,
    time::Instant,
};

use crate::{
    frame::{Frame, Lines},
    relay::{Dropped, Out, Relay},
};

/// The default size limit of one message, either way (MCP's SDKs read far larger
/// messages than a call needs; a tool result over it is refused, not held).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

/// How long the server may take to exit after the client went away.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Messages queued toward each side before the relay waits for the pipe.
const QUEUE: usize = 1024;

/// The server to start and the limits.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// The server's command.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The size limit of one message, either way.
    pub max_message_bytes: usize,
    /// How long the server may take to exit once the client is gone.
    pub grace: Duration,
}

/// Starts the server and relays between it and the client (`client_in`, `client_out`)
/// until one side ends; gives the server's exit status.
///
/// # Errors
///
/// The server could not be started (the message says which command).
pub async fn run<I, O>(
    opts: &StdioOptions,
    mut relay: Relay,
    client_in: I,
    client_out: O,
) -> io::Result<i32>
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let mut child = Command::new(&opts.program)
        .args(&opts.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "could not start the MCP server {:?}: {e} (check the command after `--`)",
                    opts.program
                ),
            )
        })?;
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other("the MCP server's pipes were not opened"));
    };
    let max = opts.max_message_bytes;
    let mut from_client = reader(client_in, max);
    let mut from_server = reader(child_out, max);
    let mut to_server = Some(writer(child_in));
    let to_client = writer(client_out);

    let mut out = Vec::new();
    let mut client_open = true;
    let mut deadline = Instant::now();
    let status = loop {
        tokio::select! {
            frame = from_client.recv(), if client_open => match frame {
                Some(Frame::Line(line)) => relay.from_client(line, &mut out).await,
                Some(Frame::TooLong { len, head, tail }) => {
                    relay.client_too_long(&Dropped::of(len, &head, &tail), max, &mut out);
                }
                None => {
                    client_open = false;
                    deadline = Instant::now() + opts.grace;
                }
            },
            frame = from_server.recv() => match frame {
                Some(Frame::Line(line)) => relay.from_server(line, &mut out).await,
                Some(Frame::TooLong { len, head, tail }) => {
                    relay.server_too_long(&Dropped::of(len, &head, &tail), max, &mut out).await;
                }
                None => break exit_status(&mut child).await,
            },
            () = tokio::time::sleep_until(deadline), if !client_open => {
                tracing::warn!(target: "toolmend::mcp", grace_ms = opts.grace.as_millis() as u64, "the MCP server did not exit after the client left; killing it");
                let _ = child.start_kill();
                break exit_status(&mut child).await;
            }
        }
        dispatch(&mut out, to_server.as_ref(), &to_client).await;
        // The client is gone and nothing of its waits to be sent (a call held for the
        // tool list): the server's stdin closes, the way MCP asks a stdio server to end.
        if !client_open && !relay.holds_unsent() {
            to_server = None;
        }
    };
    // Whatever the server had is answered (to a client that may be gone: harmless).
    let why = match status {
        Some(code) => format!("it exited with status {code}"),
        None => "it was ended by a signal".to_owned(),
    };
    relay.server_gone(&why, &mut out);
    dispatch(&mut out, None, &to_client).await;
    drop(to_server);
    // Everything queued for the client is written before we exit.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let _ = to_client.send(Write::Flush(done_tx)).await;
    drop(to_client);
    let _ = done_rx.await;
    Ok(status.unwrap_or(1))
}

/// Our standard input and output as async pipes: read and written on the runtime's own
/// thread (epoll) when they are pipes, as MCP clients start their servers; otherwise
/// (a terminal, a file) tokio's standard streams, which read and write on a thread of
/// their own (a thread hand-off per line: most of the CPU a relayed call costs).
pub fn client_pipes() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use tokio::net::unix::pipe;
        let input = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok());
        let output = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok());
        let input: Box<dyn AsyncRead + Unpin + Send> = match input {
            Some(p) => Box::new(p),
            None => Box::new(tokio::io::stdin()),
        };
        let output: Box<dyn AsyncWrite + Unpin + Send> = match output {
            Some(p) => Box::new(p),
            None => Box::new(tokio::io::stdout()),
        };
        (input, output)
    }
    #[cfg(not(unix))]
    {
        (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
    }
}

/// The child's exit status once its stdout ended (killed if it lingers).
async fn exit_status(child: &mut Child) -> Option<i32> {
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(s)) => s.code(),
        _ => {
            let _ = child.start_kill();
            child.wait().await.ok().and_then(|s| s.code())
        }
    }
}

async fn dispatch(
    out: &mut Vec<Out>,
    to_server: Option<&mpsc::Sender<Write>>,
    to_client: &mpsc::Sender<Write>,
) {
    for o in out.drain(..) {
        match o {
            Out::Server(b) => {
                if let Some(tx) = to_server {
                    let _ = tx.send(Write::Line(b)).await;
                }
            }
            Out::Client(b) => {
                let _ = to_client.send(Write::Line(b)).await;
            }
        }
    }
}

/// What a writer task is asked to do.
#[derive(Debug)]
enum Write {
    Line(Vec<u8>),
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Lines of `r`, read on their own task.
fn reader<R: AsyncRead + Unpin + Send + 'static>(r: R, max: usize) -> mpsc::Receiver<Frame> {
    let (tx, rx) = mpsc::channel(QUEUE);
    // A pipe's reader, not a tool body: it ends with its pipe.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        let mut lines = Lines::new(BufReader::with_capacity(64 << 10, r), max);
        while let Ok(Some(f)) = lines.next().await {
            if tx.send(f).await.is_err() {
                break;
            }
        }
    });
    rx
}

/// A task writing lines to `w`, each followed by a line break; flushed when nothing
/// more is queued.
fn writer<W: AsyncWrite + Unpin + Send + 'static>(mut w: W) -> mpsc::Sender<Write> {
    let (tx, mut rx) = mpsc::channel::<Write>(QUEUE);
    // A pipe's writer, not a tool body: it ends when its sender drops.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            match m {
                Write::Line(mut b) => {
                    b.push(b'\n');
                    if w.write_all(&b).await.is_err() {
                        break;
                    }
                    if rx.is_empty() && w.flush().await.is_err() {
                        break;
                    }
                }
                Write::Flush(done) => {
                    let _ = w.flush().await;
                    let _ = done.send(());
                }
            }
        }
        let _ = w.shutdown().await;
    });
    tx
}
