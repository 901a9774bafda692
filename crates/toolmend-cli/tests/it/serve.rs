//! `toolmend serve` as a process: what only the real binary can show (signals, the
//! startup banner, its memory), against upstreams run inside the test on 127.0.0.1.
//!
//! Every child runs under a guard that kills it on drop, so a failing assertion never
//! leaves a gateway behind. No test measures time: a wait is for a condition, and its
//! bound ([`PATIENCE`], [`HEAVY`]) only turns a hang into a failure, so it is generous (a
//! debug build on a loaded two-core machine); what must time out faces a peer that never
//! answers.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_toolmend");

/// What the test upstreams answer (a plain text completion).
const ANSWER: &str = "the slow upstream's answer";

/// The bound of a wait for something that must happen (a banner, an answer, an exit).
const PATIENCE: Duration = Duration::from_secs(120);

/// The bound for the requests of a hundred thousand calls (seconds, in a debug build).
const HEAVY: Duration = Duration::from_secs(600);

// ---------------------------------------------------------------- child processes

/// A child process that is killed (and reaped) when dropped.
struct Guard {
    child: Child,
}

impl Guard {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Polls until the child exits or `limit` passes.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `toolmend serve`.
struct Gateway {
    proc: Guard,
    addr: SocketAddr,
    banner: String,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The thread copying standard error into `stderr`; it ends at the pipe's end.
    stderr_reader: Option<thread::JoinHandle<()>>,
}

impl Gateway {
    /// Starts the gateway on a free port in front of `upstream`, with `env` on top of an
    /// environment cleared of `TOOLMEND_*` and `RUST_LOG`, and waits for its banner.
    fn start(upstream: &str, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_on("127.0.0.1:0", upstream, env)
    }

    /// [`start`](Self::start) listening on `listen`.
    fn start_on(listen: &str, upstream: &str, env: &[(&str, &str)]) -> Gateway {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--listen", listen, "--upstream", upstream]);
        for (k, _) in std::env::vars() {
            if k.starts_with("TOOLMEND_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut err_pipe = child.stderr.take().unwrap();
        let proc = Guard { child };
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = {
            let stderr = Arc::clone(&stderr);
            thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = err_pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    stderr.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let banner = match rx.recv_timeout(PATIENCE) {
            Ok(line) => line,
            Err(_) => panic!(
                "no banner from toolmend serve within {PATIENCE:?}; stderr: {}",
                String::from_utf8_lossy(&stderr.lock().unwrap())
            ),
        };
        // "toolmend gateway: http://127.0.0.1:PORT/v1 -> UPSTREAM; Ctrl-C stops it"
        let addr = banner
            .strip_prefix("toolmend gateway: http://")
            .and_then(|rest| rest.split_once("/v1"))
            .map(|(addr, _)| addr.parse().unwrap())
            .unwrap_or_else(|| panic!("unexpected banner: {banner}"));
        Gateway {
            proc,
            addr,
            banner,
            stderr,
            stderr_reader: Some(stderr_reader),
        }
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// All of standard error, once the gateway has exited: the copy read to the pipe's
    /// end, so no line written before the exit is missed.
    fn stderr_to_end(&mut self) -> String {
        if let Some(reader) = self.stderr_reader.take() {
            reader.join().unwrap();
        }
        self.stderr()
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.proc.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM failed");
    }
}

/// The peak resident set (`VmHWM`) of a live process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ---------------------------------------------------------------- HTTP on 127.0.0.1

#[derive(Debug)]
struct Response {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body[..self.body.len().min(2000)])
            )
        })
    }
}

/// Reads a request or response head (up to and including the blank line) and the rest
/// of what was read with it.
fn read_head(stream: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed before the end of the head",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Decodes a chunked body (the whole of it, already read).
fn unchunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        data = &data[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// One request on a fresh connection (`Connection: close`), the answer read to its end
/// within `timeout`.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, PATIENCE)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         authorization: Bearer sk-test\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let (head, mut rest) = read_head(&mut stream)?;
    stream.read_to_end(&mut rest)?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = if header(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        unchunk(&rest)
    } else {
        rest
    };
    Ok(Response { status, head, body })
}

fn chat(addr: SocketAddr, body: &[u8], timeout: Duration) -> std::io::Result<Response> {
    request(addr, "POST", "/v1/chat/completions", body, timeout)
}

/// A small chat request.
fn small_request() -> Vec<u8> {
    serde_json::json!({
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}]
    })
    .to_string()
    .into_bytes()
}

// ---------------------------------------------------------------- the test upstream

/// A chat-completions upstream on 127.0.0.1 that answers [`ANSWER`], at once or, if it
/// holds its answers, once released (never, if never released). Each request body it
/// receives is sent on `seen` as it arrives (before the answer is held back).
struct Upstream {
    addr: SocketAddr,
    seen: mpsc::Receiver<Vec<u8>>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Upstream {
    /// One that answers at once.
    fn start() -> Upstream {
        Upstream::with_gate(true)
    }

    /// One that holds every answer until [`release`](Self::release).
    fn holding() -> Upstream {
        Upstream::with_gate(false)
    }

    fn with_gate(released: bool) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, seen) = mpsc::channel();
        let gate = Arc::new((Mutex::new(released), Condvar::new()));
        let gate2 = Arc::clone(&gate);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let tx = tx.clone();
                let gate = Arc::clone(&gate2);
                thread::spawn(move || {
                    let _ = answer(stream, &tx, &gate);
                });
            }
        });
        Upstream { addr, seen, gate }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Lets every held answer go.
    fn release(&self) {
        let (lock, cvar) = &*self.gate;
        *lock.lock().unwrap() = true;
        cvar.notify_all();
    }
}

fn answer(
    mut stream: TcpStream,
    seen: &mpsc::Sender<Vec<u8>>,
    gate: &(Mutex<bool>, Condvar),
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(PATIENCE))?;
    let (head, mut body) = read_head(&mut stream)?;
    let len: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while body.len() < len {
        let mut chunk = vec![0u8; 1 << 16];
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let _ = seen.send(body);
    let (lock, cvar) = gate;
    let held = lock.lock().unwrap();
    drop(cvar.wait_while(held, |released| !*released).unwrap());
    let reply = serde_json::json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": ANSWER},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
    .to_string();
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{reply}",
        reply.len()
    )?;
    stream.flush()
}

/// A port on 127.0.0.1 with nothing listening (bound, then closed).
fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

// ---------------------------------------------------------------- 1. graceful shutdown

#[test]
fn sigterm_lets_the_request_in_flight_finish_and_refuses_new_connections() {
    // The upstream holds its answer until released; the grace period is far longer than
    // any wait below, so only a gateway that waits out its grace instead of exiting once
    // drained fails the exit's bound.
    let up = Upstream::holding();
    let mut gw = Gateway::start(
        &up.base_url(),
        &[("TOOLMEND_LIMITS__SHUTDOWN_GRACE_SECS", "3600")],
    );
    let addr = gw.addr;
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = done_tx.send(chat(addr, &small_request(), HEAVY));
    });
    // In flight: the upstream has it.
    up.seen
        .recv_timeout(PATIENCE)
        .expect("the request never reached the upstream");

    gw.sigterm();

    // The listener closes: a new connection is refused while the request is still being
    // answered (the upstream holds its answer until we see the refusal).
    let deadline = Instant::now() + PATIENCE;
    let refused = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break true,
            _ if Instant::now() > deadline => break false,
            _ => thread::sleep(Duration::from_millis(20)),
        }
    };
    assert!(
        done_rx.try_recv().is_err(),
        "the request in flight ended before the upstream answered"
    );
    assert!(
        refused,
        "a new connection was still accepted {PATIENCE:?} after SIGTERM"
    );
    assert!(
        gw.proc.child.try_wait().unwrap().is_none(),
        "the gateway exited with a request in flight"
    );

    up.release();
    let resp = done_rx
        .recv_timeout(PATIENCE)
        .expect("the request in flight got no answer")
        .expect("the request in flight was cut");
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(
        resp.json()["choices"][0]["message"]["content"],
        ANSWER,
        "{resp:?}"
    );

    // Then it exits, successfully, drained: long before its hour of grace is over.
    let status = gw.proc.wait_exit(PATIENCE).unwrap_or_else(|| {
        panic!(
            "still running {PATIENCE:?} after its last request was answered; stderr: {}",
            gw.stderr()
        )
    });
    assert!(status.success(), "{status}; stderr: {}", gw.stderr());
    let stderr = gw.stderr_to_end();
    assert!(!stderr.contains("grace period over"), "{stderr}");
}

#[test]
fn sigterm_cuts_a_request_that_outlives_the_grace_period() {
    // The upstream never answers; the grace period is 1 s.
    let up = Upstream::holding();
    let mut gw = Gateway::start(
        &up.base_url(),
        &[("TOOLMEND_LIMITS__SHUTDOWN_GRACE_SECS", "1")],
    );
    let addr = gw.addr;
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = done_tx.send(chat(addr, &small_request(), HEAVY));
    });
    up.seen
        .recv_timeout(PATIENCE)
        .expect("the request never reached the upstream");

    gw.sigterm();
    let status = gw.proc.wait_exit(PATIENCE).unwrap_or_else(|| {
        panic!(
            "still running {PATIENCE:?} after SIGTERM with a grace period of 1 s; stderr: {}",
            gw.stderr()
        )
    });
    assert!(status.success(), "{status}; stderr: {}", gw.stderr());
    // The client's request was cut, not answered.
    let got = done_rx
        .recv_timeout(PATIENCE)
        .expect("the client never saw its connection end");
    // Closed or reset (an error here) is the cut; an answer must not be a success.
    if let Ok(resp) = got {
        assert_ne!(resp.status, 200, "answered after the cut: {resp:?}");
    }
    // The grace period was given, then ran out: the warning is written only when the
    // wait for the requests in flight times out (an immediate exit never writes it).
    let stderr = gw.stderr_to_end();
    assert!(
        stderr.contains("grace period over"),
        "no warning about the cut; stderr: {stderr}"
    );
}

// ---------------------------------------------------------------- 2. the banner

#[test]
fn banner_and_startup_logs_never_show_url_credentials() {
    let up = Upstream::start();
    let url = format!("http://user:secret@{}/v1", up.addr);
    let gw = Gateway::start(&url, &[("RUST_LOG", "debug")]);
    assert!(
        gw.banner
            .contains(&format!("-> http://127.0.0.1:{}/v1", up.addr.port())),
        "{}",
        gw.banner
    );
    assert!(!gw.banner.contains("secret"), "{}", gw.banner);
    assert!(!gw.banner.contains("user"), "{}", gw.banner);
    // Up and serving (so startup is over), then nothing on stderr names the secret.
    let health = request(gw.addr, "GET", "/healthz", b"", PATIENCE).unwrap();
    assert_eq!(health.status, 200);
    let stderr = gw.stderr();
    assert!(!stderr.contains("secret"), "{stderr}");
}

// ---------------------------------------------------------------- 3. the memory bar

/// A request whose history has one assistant message with `n` calls and no results.
fn unanswered_calls_request(n: usize) -> Vec<u8> {
    let mut body = String::with_capacity(n * 80 + 200);
    body.push_str(
        r#"{"model":"m","messages":[{"role":"user","content":"call everything"},{"role":"assistant","content":null,"tool_calls":["#,
    );
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!(
            r#"{{"id":"c{i}","type":"function","function":{{"name":"noop","arguments":"{{}}"}}}}"#
        ));
    }
    body.push_str("]}]}");
    body.into_bytes()
}

const CALLS: usize = 100_000;
const DEFAULT_MAX_BODY: usize = 8 * 1024 * 1024;
const RSS_BAR_KIB: u64 = 1024 * 1024; // 1 GiB

#[test]
fn a_hundred_thousand_unanswered_calls_are_sanitized_within_bounded_memory() {
    let body = unanswered_calls_request(CALLS);
    let size = body.len();
    // It fits the default body limit (about 7.3 MiB), so no limit is raised.
    assert!(
        body.len() < DEFAULT_MAX_BODY,
        "{} bytes, over the default limit",
        body.len()
    );
    let up = Upstream::start();
    let gw = Gateway::start(&up.base_url(), &[]);
    let before = peak_rss_kib(gw.proc.pid()).unwrap();

    let addr = gw.addr;
    let started = Instant::now();
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = done_tx.send(chat(addr, &body, HEAVY));
    });
    // Wait for the answer, watching the gateway's peak memory (a runaway fails fast).
    // About 15 s in a debug build on a loaded 2-core machine; the bound only ends a hang.
    let deadline = started + HEAVY;
    let resp = loop {
        if let Ok(r) = done_rx.recv_timeout(Duration::from_millis(50)) {
            break r.expect("the request failed");
        }
        let peak = peak_rss_kib(gw.proc.pid()).unwrap_or(0);
        assert!(
            peak < RSS_BAR_KIB,
            "the gateway's peak RSS reached {peak} KiB ({:?} in)",
            started.elapsed()
        );
        assert!(
            Instant::now() < deadline,
            "no answer within {HEAVY:?}; peak RSS {peak} KiB"
        );
    };
    let took = started.elapsed();
    let peak = peak_rss_kib(gw.proc.pid()).unwrap();
    eprintln!(
        "{CALLS} unanswered calls ({size} bytes) through the gateway: {took:?}, \
         peak RSS {} MiB (at start {} MiB)",
        peak / 1024,
        before / 1024
    );
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    assert_eq!(resp.json()["choices"][0]["message"]["content"], ANSWER);
    assert!(peak < RSS_BAR_KIB, "peak RSS {peak} KiB");

    // The upstream got a result for every call, each answering its own.
    let sent: Value = serde_json::from_slice(&up.seen.try_recv().unwrap()).unwrap();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2 + CALLS);
    assert!(messages[2..].iter().enumerate().all(|(i, m)| {
        m["role"] == "tool" && m["tool_call_id"].as_str() == Some(&format!("c{i}"))
    }));
    assert!(
        header(&resp.head, "x-toolmend-history").is_some(),
        "{}",
        resp.head
    );
}

#[test]
fn history_check_of_a_hundred_thousand_unanswered_calls_is_bounded() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("serve-history-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("history.json");
    std::fs::write(&file, unanswered_calls_request(CALLS)).unwrap();

    let mut child = Command::new(BIN)
        .args(["history", "check", "--format", "json"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let mut proc = Guard { child };
    let pid = proc.pid();
    // Count the report's lines without keeping them.
    let unanswered = Arc::new(AtomicUsize::new(0));
    let lines = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (unanswered, lines) = (Arc::clone(&unanswered), Arc::clone(&lines));
        thread::spawn(move || {
            let mut bytes = 0usize;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                bytes += line.len() + 1;
                lines.fetch_add(1, Ordering::Relaxed);
                if line.contains(r#""kind":"unanswered_call""#) {
                    unanswered.fetch_add(1, Ordering::Relaxed);
                }
            }
            bytes
        })
    };
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });

    // About 12 s in a debug build on a loaded 2-core machine; the bound only ends a hang.
    let started = Instant::now();
    let deadline = started + HEAVY;
    let mut peak = 0u64;
    let status = loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = proc.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            peak < RSS_BAR_KIB,
            "history check's peak RSS reached {peak} KiB ({:?} in)",
            started.elapsed()
        );
        assert!(
            Instant::now() < deadline,
            "history check still running after {HEAVY:?}; peak RSS {peak} KiB"
        );
        thread::sleep(Duration::from_millis(5));
    };
    let took = started.elapsed();
    let bytes = reader.join().unwrap();
    let err = err_reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "history check of {CALLS} unanswered calls: {took:?}, peak RSS {} MiB, report {} MiB",
        peak / 1024,
        bytes / (1024 * 1024)
    );
    assert_eq!(status.code(), Some(1), "{status}; stderr: {err}");
    assert_eq!(unanswered.load(Ordering::Relaxed), CALLS);
    assert!(peak > 0, "no memory reading was taken");
    assert!(peak < RSS_BAR_KIB, "peak RSS {peak} KiB");
}

// ---------------------------------------------------------------- 4. unreachable upstream

#[test]
fn an_unreachable_upstream_is_a_502_naming_the_cause_without_credentials() {
    let port = dead_port();
    let url = format!("http://user:secret@127.0.0.1:{port}/v1");
    let gw = Gateway::start(&url, &[]);
    let resp = chat(gw.addr, &small_request(), PATIENCE).unwrap();
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    assert_eq!(resp.status, 502, "{text}");
    let body = resp.json();
    let err = &body["error"];
    let message = err["message"].as_str().unwrap_or_else(|| panic!("{text}"));
    assert!(err["type"].is_string(), "{text}");
    assert!(err.get("param").is_some(), "{text}");
    assert!(err["code"].is_string(), "{text}");
    assert!(
        message.to_lowercase().contains("connection refused"),
        "the message does not name the cause: {message}"
    );
    assert!(!text.contains("secret"), "{text}");
    assert!(!resp.head.contains("secret"), "{}", resp.head);
    assert!(!gw.stderr().contains("secret"), "{}", gw.stderr());
}

// ---------------------------------------------------------------- 5. the start, as a new user meets it

/// Runs `toolmend serve ARGS` with `env` (on an environment cleared of `TOOLMEND_*`) and
/// expects it to refuse to start: exit status 2, the reason on standard error.
fn refused_start(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve").args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("TOOLMEND_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    let mut proc = Guard {
        child: cmd
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    };
    let status = proc
        .wait_exit(PATIENCE)
        .expect("toolmend serve neither started nor stopped");
    let mut stderr = String::new();
    proc.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(2), "{status}; stderr: {stderr}");
    stderr
}

/// A file in a fresh temporary directory, its path.
fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "toolmend-serve-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_key_variable_that_is_not_set_stops_the_start_naming_it_and_its_key() {
    let up = format!("http://127.0.0.1:{}/v1", dead_port());
    let config = temp_file(
        "gateway.toml",
        &format!("[upstream]\nbase_url = \"{up}\"\napi_key_env = \"TM_SERVE_TEST_UNSET_KEY\"\n"),
    );
    let err = refused_start(&["--config", config.to_str().unwrap()], &[]);
    assert!(
        err.contains(&format!(
            "upstream.api_key_env (at {}:3) names the environment variable \
             TM_SERVE_TEST_UNSET_KEY, which is not set",
            config.display()
        )),
        "{err}"
    );
    // Set but empty is no key either.
    let err = refused_start(
        &["--config", config.to_str().unwrap()],
        &[("TM_SERVE_TEST_UNSET_KEY", "")],
    );
    assert!(err.contains("which is set but empty"), "{err}");
    // The opt-out, from the environment: the gateway starts, the client's key passed on.
    let up = Upstream::start();
    let gw = Gateway::start(&up.base_url(), &[("TOOLMEND_UPSTREAM__API_KEY_ENV", "")]);
    let resp = chat(gw.addr, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200);
    wait_for_message(&gw, "the client's own Authorization");
    let _ = std::fs::remove_dir_all(config.parent().unwrap());
}

#[test]
fn a_config_error_names_its_file_and_line_or_its_variable_or_its_flag() {
    let up = format!("http://127.0.0.1:{}/v1", dead_port());
    let config = temp_file(
        "gateway.toml",
        &format!("upstream.base_url = \"{up}\"\n\n[history]\npolicy = \"rejct\"\n"),
    );
    let path = config.to_str().unwrap();
    let err = refused_start(&["--config", path], &[]);
    assert!(
        err.starts_with(&format!("toolmend: configuration: {path}:4: ")),
        "{err}"
    );
    assert!(err.contains("rejct"), "{err}");
    // The file is fine; the variable is not: the variable is named, not the file.
    std::fs::write(&config, format!("upstream.base_url = \"{up}\"\n")).unwrap();
    let err = refused_start(
        &["--config", path],
        &[("TOOLMEND_HISTORY__POLICY", "rejct")],
    );
    assert!(
        err.starts_with("toolmend: configuration: TOOLMEND_HISTORY__POLICY: "),
        "{err}"
    );
    assert!(err.contains("history.policy"), "{err}");
    assert!(!err.contains(path), "{err}");
    // The flag.
    let err = refused_start(&["--upstream", "localhost:8000"], &[]);
    assert!(
        err.contains("--upstream: upstream.base_url must be an http(s) URL"),
        "{err}"
    );
    assert!(err.contains("did you mean http://localhost:8000"), "{err}");
    let err = refused_start(
        &["--upstream", "http://127.0.0.1:8000/v1/chat/completions"],
        &[],
    );
    assert!(err.contains("use http://127.0.0.1:8000/v1"), "{err}");
    // A TOOLMEND_ variable of the scripts (no `__`, no top-level key) is no override: the
    // gateway starts and says it ignored it. With `__`, an unknown section still stops it.
    let err = refused_start(&["--upstream", &up], &[("TOOLMEND_SHARED__PATH", "/x")]);
    assert!(
        err.starts_with("toolmend: configuration: TOOLMEND_SHARED__PATH: "),
        "{err}"
    );
    let upstream = Upstream::start();
    let gw = Gateway::start(&upstream.base_url(), &[("TOOLMEND_SHARED", "/srv/shared")]);
    let resp = chat(gw.addr, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200);
    assert!(
        gw.stderr()
            .contains("TOOLMEND_SHARED: not configuration overrides"),
        "{}",
        gw.stderr()
    );
    let _ = std::fs::remove_dir_all(config.parent().unwrap());
}

/// The JSON log lines of standard error.
fn log_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The gateway's standard error once its JSON lines satisfy `done` (the log is written by
/// a thread of its own, a moment after what it tells); fails naming `what` if they still
/// do not after [`PATIENCE`].
fn wait_for_log(gw: &Gateway, what: &str, done: impl Fn(&[Value]) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let stderr = gw.stderr();
        if done(&log_lines(&stderr)) {
            return stderr;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} in the log within {PATIENCE:?}: {stderr}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// The gateway's standard error once a line's message holds `needle` (see [`wait_for_log`]).
fn wait_for_message(gw: &Gateway, needle: &str) -> String {
    wait_for_log(gw, needle, |lines| {
        lines.iter().any(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(needle))
        })
    })
}

#[test]
fn an_upstream_without_v1_gets_it_and_the_log_says_so() {
    let up = Upstream::start();
    let bare = format!("http://{}", up.addr);
    let gw = Gateway::start(&bare, &[]);
    assert!(
        gw.banner.contains(&format!("-> {bare}/v1;")),
        "{}",
        gw.banner
    );
    let resp = chat(gw.addr, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let stderr = wait_for_message(&gw, &format!("requests go to {bare}/v1"));
    assert!(
        log_lines(&stderr).iter().any(|l| l["level"] == "INFO"
            && l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("requests go to {bare}/v1")))),
        "{stderr}"
    );
}

#[test]
fn each_request_is_one_info_line_and_the_http_stack_stays_quiet_at_debug() {
    let up = Upstream::start();
    // Default level: one line per request, with its route and status.
    let gw = Gateway::start(&up.base_url(), &[]);
    let resp = chat(gw.addr, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200);
    let missing = request(gw.addr, "GET", "/v1/nothing", b"", PATIENCE).unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "unknown_route");
    let is_request = |l: &Value| l["target"] == "toolmend::request";
    let stderr = wait_for_log(&gw, "two request lines", |lines| {
        lines.iter().filter(|l| is_request(l)).count() >= 2
    });
    let lines: Vec<Value> = log_lines(&stderr).into_iter().filter(is_request).collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(lines[0]["level"], "INFO");
    assert_eq!(lines[0]["fields"]["route"], "/v1/chat/completions");
    assert_eq!(lines[0]["fields"]["status"], 200);
    assert_eq!(lines[0]["fields"]["upstream_status"], 200);
    assert_eq!(
        Some(lines[0]["fields"]["request_id"].as_str().unwrap()),
        header(&resp.head, "x-request-id")
    );
    assert_eq!(lines[1]["fields"]["status"], 404);
    assert!(
        !gw.stderr().contains("sk-test"),
        "the client's key is never logged"
    );
    drop(gw);

    // RUST_LOG=debug: our debug lines, none of hyper's connection and pool events.
    let gw = Gateway::start(&up.base_url(), &[("RUST_LOG", "debug")]);
    let resp = chat(gw.addr, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200);
    // The request's line is written once it is answered: what the HTTP stack would log
    // for it is written by then.
    let stderr = wait_for_log(&gw, "the request's line", |lines| {
        lines.iter().any(is_request)
    });
    let targets: Vec<String> = log_lines(&stderr)
        .iter()
        .filter_map(|l| l["target"].as_str().map(str::to_owned))
        .collect();
    assert!(targets.iter().any(|t| t == "toolmend::request"), "{stderr}");
    assert!(
        !targets
            .iter()
            .any(|t| t.starts_with("hyper") || t.starts_with("reqwest") || t.starts_with("h2")),
        "{targets:?}"
    );
    drop(gw);
    // Named, they are there (the filter does not hide what is asked for).
    let gw = Gateway::start(&up.base_url(), &[("RUST_LOG", "info,hyper_util=debug")]);
    let resp = chat(gw.addr, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200);
    wait_for_log(&gw, "a line of hyper_util", |lines| {
        lines.iter().any(|l| {
            l["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("hyper_util"))
        })
    });
}

// ---------------------------------------------------------------- 6. serve --help

/// Every key and every value a policy takes in docs/gateway.md's configuration block
/// (`policy = "sanitize"  # | "reject" | "pass"`) is in `toolmend serve --help`, the
/// commented-out ones (`# limit = 5`, `# [guard]`) included.
#[test]
fn serve_help_lists_every_key_and_policy_of_the_docs() {
    let out = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gateway.md"),
    )
    .unwrap();
    let section = &docs[docs.find("## Configuration").unwrap()..];
    let start = section.find("```toml\n").unwrap() + "```toml\n".len();
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let mut checked = 0;
    // `name = …` with a bare lowercase name: a key, where a comment of prose is not one.
    let is_key = |s: &str| {
        s.split_once(" = ").is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        })
    };
    for line in block.lines() {
        let line = match line.trim().strip_prefix("# ") {
            Some(key) if key.starts_with('[') || is_key(key) => key,
            Some(_) => continue,
            None => line.trim(),
        };
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (code, comment) = line.split_once('#').unwrap_or((line, ""));
        let code = code.trim();
        let wanted: Vec<String> = if code.starts_with('[') {
            // `[guard.session]`: the last name; `[[tools]]` as it is.
            let name = code.trim_matches(['[', ']']);
            vec![match name.rsplit_once('.') {
                Some((_, last)) => format!("{last} = "),
                None => code.to_owned(),
            }]
        } else {
            let (key, value) = code.split_once('=').unwrap();
            let mut wanted = vec![format!("{} = ", key.trim())];
            // A policy: the value and each alternative of the comment, quoted.
            if comment.trim_start().starts_with('|') {
                wanted.push(value.trim().to_owned());
                wanted.extend(comment.split('|').filter_map(|alt| {
                    let alt = alt.trim();
                    alt.starts_with('"')
                        .then(|| alt[..alt[1..].find('"').unwrap() + 2].to_owned())
                }));
            }
            wanted
        };
        for w in wanted {
            assert!(
                help.contains(&w),
                "`{w}` (docs: {line}) is not in serve --help"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 60,
        "only {checked} items read from the docs' block"
    );
    // And it teaches: an example line for a policy from the environment.
    assert!(
        help.contains("TOOLMEND_HISTORY__POLICY=reject toolmend serve"),
        "{help}"
    );
}

// ---------------------------------------------------------------- 7. a log nobody reads

/// Issue 24: the log is written through a bounded queue by a thread of its own, so a
/// reader that stalls (a supervisor, a container's log driver, a paused terminal) never
/// holds a request. Both of the gateway's pipes are left unread after the banner: the
/// 64 KiB pipe buffer is full after a few hundred lines, and before the queue every
/// worker then blocked in `write` (207 of 3,000 answered). At trace level for the HTTP
/// stack the queue overflows too: what does not fit is dropped and counted.
#[test]
fn i24_a_gateway_whose_pipes_nobody_reads_answers_every_request() {
    let up = Upstream::start();
    let mut cmd = Command::new(BIN);
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &up.base_url(),
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("TOOLMEND_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.env("RUST_LOG", "debug,hyper=trace,hyper_util=trace")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // Held open, never read.
    let _stderr = child.stderr.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let proc = Guard { child };
    let mut banner = String::new();
    stdout.read_line(&mut banner).unwrap();
    let addr: SocketAddr = banner
        .strip_prefix("toolmend gateway: http://")
        .and_then(|rest| rest.split_once("/v1"))
        .map(|(addr, _)| addr.parse().unwrap())
        .unwrap_or_else(|| panic!("unexpected banner: {banner}"));

    let body = small_request();
    let mut answered = 0;
    for i in 0..3000 {
        match chat(addr, &body, PATIENCE) {
            Ok(r) if r.status == 200 => answered += 1,
            Ok(r) => panic!("request {i}: status {}", r.status),
            Err(e) => panic!("request {i} unanswered after {answered} answered: {e}"),
        }
    }
    assert_eq!(answered, 3000);
    let health = request(addr, "GET", "/healthz", b"", PATIENCE).unwrap();
    assert_eq!(health.status, 200);
    let metrics = request(addr, "GET", "/metrics", b"", PATIENCE).unwrap();
    let text = String::from_utf8_lossy(&metrics.body);
    let dropped: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("toolmend_log_lines_dropped_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no toolmend_log_lines_dropped_total in /metrics:\n{text}"));
    assert!(dropped > 0, "the queue never overflowed: {dropped}");
    drop(proc);
}

// ---------------------------------------------------------------- 7. who may call

/// The SHA-256 of `key` as `toolmend key hash` prints it.
fn key_hash(key: &str) -> String {
    let mut child = Command::new(BIN)
        .args(["key", "hash"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // With its newline, as `echo` gives it: ignored.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{key}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn key_hash_and_key_new_print_what_access_takes() {
    // FIPS 180-2's "abc".
    assert_eq!(
        key_hash("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let out = Command::new(BIN)
        .args(["key", "new", "ci"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // "# tmk_…" then the entry, whose hash is the key's.
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("# tmk_"))
        .map(|k| format!("tmk_{k}"))
        .unwrap_or_else(|| panic!("no key in {text}"));
    assert_eq!(key.len(), 4 + 64, "{key}");
    assert!(
        text.contains(&format!(
            "[[access.clients]]\nname = \"ci\"\nkey_sha256 = \"{}\"",
            key_hash(&key)
        )),
        "{text}"
    );
    // Two keys are never the same.
    let again = Command::new(BIN)
        .args(["key", "new", "ci"])
        .output()
        .unwrap();
    assert!(!String::from_utf8(again.stdout).unwrap().contains(&key));
    // A name that cannot be a label.
    let bad = Command::new(BIN)
        .args(["key", "new", "a b"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_start_on_a_public_address_with_a_key_and_no_client_keys_is_refused_saying_how_to_fix_it() {
    let up = format!("http://127.0.0.1:{}/v1", dead_port());
    let key = [
        ("TOOLMEND_UPSTREAM__API_KEY_ENV", "TM_SERVE_TEST_KEY"),
        ("TM_SERVE_TEST_KEY", "sk-provider-secret"),
    ];
    let err = refused_start(&["--listen", "0.0.0.0:0", "--upstream", &up], &key);
    for what in [
        "refusing to serve 0.0.0.0:0",
        "TM_SERVE_TEST_KEY (upstream.api_key_env)",
        "toolmend key hash",
        "[[access.clients]]",
        "--listen 127.0.0.1:",
        "access.allow_unauthenticated = true",
        "TOOLMEND_ACCESS__ALLOW_UNAUTHENTICATED=true",
    ] {
        assert!(err.contains(what), "`{what}` not in: {err}");
    }
    assert!(!err.contains("sk-provider-secret"), "{err}");
    // Anything beyond loopback is public: an interface's own address too.
    let err = refused_start(&["--listen", "[::]:0", "--upstream", &up], &key);
    assert!(err.contains("refusing to serve [::]:0"), "{err}");
}

#[test]
fn the_explicit_opt_in_starts_on_a_public_address() {
    let up = Upstream::start();
    let gw = Gateway::start_on(
        "0.0.0.0:0",
        &up.base_url(),
        &[
            ("TOOLMEND_UPSTREAM__API_KEY_ENV", "TM_SERVE_TEST_KEY"),
            ("TM_SERVE_TEST_KEY", "sk-provider-secret"),
            ("TOOLMEND_ACCESS__ALLOW_UNAUTHENTICATED", "true"),
        ],
    );
    let local = SocketAddr::from(([127, 0, 0, 1], gw.addr.port()));
    let resp = chat(local, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200);
    // Said at start, at warn.
    let stderr = wait_for_message(&gw, "access.allow_unauthenticated = true");
    assert!(
        log_lines(&stderr).iter().any(|l| l["level"] == "WARN"
            && l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("access.allow_unauthenticated = true"))),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-provider-secret"), "{stderr}");
}

#[test]
fn client_keys_on_a_public_address_admit_their_clients_only_and_metrics_go_to_the_admin_listener() {
    let up = Upstream::start();
    // `request` sends `Authorization: Bearer sk-test`: a client key here, first.
    let clients = format!(
        "[{{name = \"ci\", key_sha256 = \"{}\"}}]",
        key_hash("sk-test")
    );
    let env = [
        ("TOOLMEND_UPSTREAM__API_KEY_ENV", "TM_SERVE_TEST_KEY"),
        ("TM_SERVE_TEST_KEY", "sk-provider-secret"),
        ("TOOLMEND_ACCESS__ADMIN_LISTEN", "127.0.0.1:0"),
    ];
    let mut with_clients = env.to_vec();
    with_clients.push(("TOOLMEND_ACCESS__CLIENTS", &clients));
    let gw = Gateway::start_on("0.0.0.0:0", &up.base_url(), &with_clients);
    let local = SocketAddr::from(([127, 0, 0, 1], gw.addr.port()));
    let resp = chat(local, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    assert!(up.seen.recv_timeout(PATIENCE).is_ok());
    // "…; metrics: http://127.0.0.1:PORT/metrics; Ctrl-C stops it"
    let admin: SocketAddr = gw
        .banner
        .split("metrics: http://")
        .nth(1)
        .and_then(|r| r.split_once("/metrics"))
        .map(|(a, _)| a.parse().unwrap())
        .unwrap_or_else(|| panic!("no admin address in the banner: {}", gw.banner));
    let metrics = request(admin, "GET", "/metrics", b"", PATIENCE).unwrap();
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(
        text.contains("toolmend_client_requests_total{client=\"ci\"} 1"),
        "{text}"
    );
    let main = request(local, "GET", "/metrics", b"", PATIENCE).unwrap();
    assert_eq!(main.status, 404);
    let stderr = wait_for_message(&gw, "the keys of 1 client(s): ci;");
    assert!(
        !stderr.contains("sk-test") && !stderr.contains("sk-provider-secret"),
        "{stderr}"
    );
    drop(gw);

    // Another client's key only: `sk-test` is refused, and nothing goes upstream.
    let other = format!(
        "[{{name = \"web\", key_sha256 = \"{}\"}}]",
        key_hash("sk-web")
    );
    let mut with_other = env.to_vec();
    with_other.push(("TOOLMEND_ACCESS__CLIENTS", &other));
    let gw = Gateway::start_on("0.0.0.0:0", &up.base_url(), &with_other);
    let local = SocketAddr::from(([127, 0, 0, 1], gw.addr.port()));
    let resp = chat(local, &small_request(), PATIENCE).unwrap();
    assert_eq!(resp.status, 401);
    let body: Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key", "{body}");
    // The upstream reports a request before it answers it, so one passed on would be
    // in the channel by the time the refusal came back.
    assert!(
        up.seen.try_recv().is_err(),
        "a refused request went upstream"
    );
    let health = request(local, "GET", "/healthz", b"", PATIENCE).unwrap();
    assert_eq!(health.status, 200);
}
