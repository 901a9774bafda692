//! A closed-loop HTTP load generator for the gateway benchmark (`bench/gateway/run.sh`).
//!
//! `--concurrency` workers share one keep-alive connection pool; each sends the same
//! request body (`POST`, `content-type: application/json`) again as soon as its previous
//! response has been read to the end, until `--requests` have been sent or
//! `--max-seconds` have passed. Each request's latency runs from just before the send to
//! the last byte of the response body (and, as `ttfb_*`, to its first byte: for a
//! stream, the first event). `--warmup` requests run first, with the same
//! concurrency, and are not counted (connections opened, caches warm).
//!
//! Prints one JSON object: the percentiles (nearest rank, microseconds), the mean, the
//! throughput, the status counts, errors (transport failures and non-2xx answers, whose
//! latencies are left out) and mismatches (2xx bodies without the `--expect` bytes).
//!
//! ```sh
//! cargo run --release -p toolmend-gateway --example loadgen -- \
//!     --url http://127.0.0.1:8790/v1/chat/completions --concurrency 16 \
//!     --requests 20000 --body bench/gateway/request.json
//! ```

use std::{
    collections::BTreeMap,
    io::Write as _,
    path::PathBuf,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use serde_json::{Value, json};

const USAGE: &str = "\
loadgen: closed-loop HTTP load generator (POSTs one fixed JSON body)

Usage: loadgen --url URL --body FILE [options]

  --url URL            the endpoint, e.g. http://127.0.0.1:8790/v1/chat/completions
  --body FILE          the request body (sent as is, content-type: application/json)
  --concurrency N      workers, each with one request in flight (default 1)
  --requests N         measured requests (default 10000)
  --warmup N           requests sent first and not counted (default: min(1000, requests/10),
                       at least 2 per worker)
  --max-seconds S      stop the measured phase after S seconds (default 60)
  --timeout S          per-request timeout (default 30)
  --threads N          runtime threads (default 1: a current-thread runtime)
  --header 'K: V'      an extra request header (repeatable)
  --expect STRING      count 2xx bodies that do not contain STRING as mismatches
  --save-first FILE    write the first measured 2xx response (status, headers, body)
  --sample-pid PID[,PID...]
                       read VmRSS/VmHWM of /proc/PID/status every --sample-ms (default
                       20) during the measured phase (peak and end values in the JSON),
                       and the CPU time of its threads over that phase (per request);
                       several processes (a server's workers) are added up
  --label NAME         copied into the JSON (default: the URL)
  --out FILE           also write the JSON there
";

#[derive(Debug, Clone)]
struct Args {
    url: String,
    body: PathBuf,
    concurrency: usize,
    requests: u64,
    warmup: Option<u64>,
    max_seconds: f64,
    timeout: f64,
    threads: usize,
    headers: Vec<(String, String)>,
    expect: Option<String>,
    save_first: Option<PathBuf>,
    label: Option<String>,
    out: Option<PathBuf>,
    sample_pids: Vec<u32>,
    sample_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut url = None;
    let mut body = None;
    let mut a = Args {
        url: String::new(),
        body: PathBuf::new(),
        concurrency: 1,
        requests: 10_000,
        warmup: None,
        max_seconds: 60.0,
        timeout: 30.0,
        threads: 1,
        headers: Vec::new(),
        expect: None,
        save_first: None,
        label: None,
        out: None,
        sample_pids: Vec::new(),
        sample_ms: 20,
    };
    fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse()
            .map_err(|_| format!("{flag}: not a valid number: {v}"))
    }
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--url" => url = it.next(),
            "--body" => body = it.next().map(PathBuf::from),
            "--concurrency" | "-c" => a.concurrency = num(&flag, it.next())?,
            "--requests" | "-n" => a.requests = num(&flag, it.next())?,
            "--warmup" => a.warmup = Some(num(&flag, it.next())?),
            "--max-seconds" => a.max_seconds = num(&flag, it.next())?,
            "--timeout" => a.timeout = num(&flag, it.next())?,
            "--threads" => a.threads = num(&flag, it.next())?,
            "--header" | "-H" => {
                let h = it.next().ok_or("--header needs a value")?;
                let (k, v) = h
                    .split_once(':')
                    .ok_or_else(|| format!("--header: expected 'Name: value', got {h}"))?;
                a.headers.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            "--expect" => a.expect = Some(it.next().ok_or("--expect needs a value")?),
            "--save-first" => {
                a.save_first = Some(it.next().ok_or("--save-first needs a value")?.into());
            }
            "--label" => a.label = Some(it.next().ok_or("--label needs a value")?),
            "--sample-pid" => {
                let v = it.next().ok_or("--sample-pid needs a value")?;
                for pid in v.split(',').filter(|p| !p.trim().is_empty()) {
                    a.sample_pids.push(num(&flag, Some(pid.trim().to_owned()))?);
                }
            }
            "--sample-ms" => a.sample_ms = num(&flag, it.next())?,
            "--out" => a.out = Some(it.next().ok_or("--out needs a value")?.into()),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    a.url = url.ok_or("--url is required")?;
    a.body = body.ok_or("--body is required")?;
    if a.concurrency == 0 || a.requests == 0 {
        return Err("--concurrency and --requests must be at least 1".to_owned());
    }
    Ok(a)
}

/// What one worker saw.
#[derive(Debug, Default)]
struct Tally {
    /// Latencies of the 2xx responses, in nanoseconds.
    latencies: Vec<u64>,
    /// Their times to the first body byte, in nanoseconds.
    first_byte: Vec<u64>,
    statuses: BTreeMap<u16, u64>,
    transport_errors: u64,
    mismatches: u64,
    first_error: Option<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.first_byte.extend(other.first_byte);
        for (s, n) in other.statuses {
            *self.statuses.entry(s).or_default() += n;
        }
        self.transport_errors += other.transport_errors;
        self.mismatches += other.mismatches;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// What every worker shares.
#[derive(Debug)]
struct Shared {
    client: reqwest::Client,
    url: reqwest::Url,
    body: Bytes,
    headers: reqwest::header::HeaderMap,
    expect: Option<Vec<u8>>,
    save_first: Option<PathBuf>,
    saved: AtomicBool,
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

async fn worker(
    shared: Arc<Shared>,
    next: Arc<AtomicU64>,
    limit: u64,
    deadline: Instant,
    measured: bool,
) -> Tally {
    let mut tally = Tally {
        latencies: Vec::with_capacity(if measured { 4096 } else { 0 }),
        ..Tally::default()
    };
    while next.fetch_add(1, Ordering::Relaxed) < limit && Instant::now() < deadline {
        let started = Instant::now();
        let sent = shared
            .client
            .post(shared.url.clone())
            .headers(shared.headers.clone())
            .body(shared.body.clone())
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                tally.transport_errors += 1;
                tally.first_error.get_or_insert_with(|| e.to_string());
                continue;
            }
        };
        let status = resp.status();
        let headers =
            (measured && shared.save_first.is_some() && !shared.saved.load(Ordering::Relaxed))
                .then(|| resp.headers().clone());
        // Read chunk by chunk: the first one's arrival is the time to first byte (for a
        // stream, its first event: what a user of a streaming client waits for).
        let mut resp = resp;
        let mut body = bytes::BytesMut::new();
        let mut first: Option<Duration> = None;
        let read = loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    first.get_or_insert_with(|| started.elapsed());
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = read {
            tally.transport_errors += 1;
            tally.first_error.get_or_insert_with(|| e.to_string());
            continue;
        }
        let body = body.freeze();
        let elapsed = started.elapsed();
        let first = first.unwrap_or(elapsed);
        *tally.statuses.entry(status.as_u16()).or_default() += 1;
        if !status.is_success() {
            tally.first_error.get_or_insert_with(|| {
                format!(
                    "HTTP {}: {}",
                    status.as_u16(),
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                )
            });
            continue;
        }
        if let Some(expect) = &shared.expect
            && !contains(&body, expect)
        {
            tally.mismatches += 1;
        }
        if measured {
            tally
                .latencies
                .push(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
            tally
                .first_byte
                .push(u64::try_from(first.as_nanos()).unwrap_or(u64::MAX));
            if let (Some(path), Some(headers)) = (&shared.save_first, &headers)
                && !shared.saved.swap(true, Ordering::Relaxed)
            {
                save_response(path, status.as_u16(), headers, &body);
            }
        }
    }
    tally
}

fn save_response(path: &PathBuf, status: u16, headers: &reqwest::header::HeaderMap, body: &[u8]) {
    let headers: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()),
            )
        })
        .collect();
    let body = serde_json::from_slice::<Value>(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    let saved = json!({"status": status, "headers": headers, "body": body});
    let text = serde_json::to_string_pretty(&saved).unwrap_or_default();
    if let Err(e) = std::fs::write(path, text) {
        let _ = writeln!(
            std::io::stderr(),
            "loadgen: writing {}: {e}",
            path.display()
        );
    }
}

/// One phase: `count` requests over `concurrency` workers.
async fn phase(
    shared: &Arc<Shared>,
    concurrency: usize,
    count: u64,
    max: Duration,
    measured: bool,
) -> (Tally, Duration) {
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + max;
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        // The workers are joined below, before their results are read: none outlives main.
        #[allow(clippy::disallowed_methods)]
        workers.push(tokio::spawn(worker(
            Arc::clone(shared),
            Arc::clone(&next),
            count,
            deadline,
            measured,
        )));
    }
    let mut tally = Tally::default();
    for w in workers {
        match w.await {
            Ok(t) => tally.merge(t),
            Err(e) => {
                tally.transport_errors += 1;
                tally
                    .first_error
                    .get_or_insert_with(|| format!("worker failed: {e}"));
            }
        }
    }
    (tally, started.elapsed())
}

/// VmRSS and VmHWM (kB) of processes, from /proc/PID/status, added up.
fn memory_kb(pids: &[u32]) -> Option<(u64, u64)> {
    let (mut rss, mut hwm) = (0, 0);
    for &pid in pids {
        let (r, h) = memory_kb_one(pid)?;
        rss += r;
        hwm += h;
    }
    Some((rss, hwm))
}

fn memory_kb_one(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time (ns) of processes' live threads: the sum of /proc/PID/task/*/schedstat.
fn cpu_ns(pids: &[u32]) -> Option<u64> {
    let mut total = 0;
    for &pid in pids {
        total += cpu_ns_one(pid)?;
    }
    Some(total)
}

fn cpu_ns_one(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(task) = task else { continue };
        if let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat"))
            && let Some(ns) = stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        {
            total += ns;
        }
    }
    Some(total)
}

/// Samples processes' memory until `stop` is set: (samples, peak VmRSS kB, added up).
async fn sample_memory(pids: Vec<u32>, every: Duration, stop: Arc<AtomicBool>) -> (u64, u64) {
    let (mut n, mut peak) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        if let Some((rss, _)) = memory_kb(&pids) {
            n += 1;
            peak = peak.max(rss);
        }
        tokio::time::sleep(every).await;
    }
    (n, peak)
}

/// The nearest-rank percentile of sorted `v`, in microseconds.
fn pct(v: &[u64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    let i = rank.clamp(1, v.len()) - 1;
    #[allow(clippy::cast_precision_loss)]
    let us = v[i] as f64 / 1000.0;
    round1(us)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

async fn run(args: Args) -> Result<Value, String> {
    let body = std::fs::read(&args.body)
        .map_err(|e| format!("reading the body {}: {e}", args.body.display()))?;
    let url = reqwest::Url::parse(&args.url).map_err(|e| format!("--url: {e}"))?;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        reqwest::header::HeaderValue::from_static("application/json"),
    );
    for (k, v) in &args.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("--header {k}: {e}"))?;
        let value =
            reqwest::header::HeaderValue::from_str(v).map_err(|e| format!("--header {k}: {e}"))?;
        headers.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs_f64(args.timeout.max(0.001)))
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let shared = Arc::new(Shared {
        client,
        url,
        body: Bytes::from(body),
        headers,
        expect: args.expect.as_ref().map(|s| s.as_bytes().to_vec()),
        save_first: args.save_first.clone(),
        saved: AtomicBool::new(false),
    });
    let warmup = args.warmup.unwrap_or_else(|| {
        (args.requests / 10)
            .min(1000)
            .max(2 * args.concurrency as u64)
    });
    let max = Duration::from_secs_f64(args.max_seconds.max(0.001));
    let (warm, _) = if warmup > 0 {
        phase(&shared, args.concurrency, warmup, max, false).await
    } else {
        (Tally::default(), Duration::ZERO)
    };
    let warm_errors = warm.transport_errors
        + warm
            .statuses
            .iter()
            .filter(|(s, _)| !(200..300).contains(*s))
            .map(|(_, n)| n)
            .sum::<u64>();
    let stop = Arc::new(AtomicBool::new(false));
    let pids = args.sample_pids.clone();
    let sampler = (!pids.is_empty()).then(|| {
        // Stopped and joined right after the measured phase.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(sample_memory(
            pids.clone(),
            Duration::from_millis(args.sample_ms.max(1)),
            Arc::clone(&stop),
        ))
    });
    let cpu_start = cpu_ns(&pids).filter(|_| !pids.is_empty());
    let (mut tally, elapsed) = phase(&shared, args.concurrency, args.requests, max, true).await;
    let cpu_end = cpu_ns(&pids).filter(|_| !pids.is_empty());
    stop.store(true, Ordering::Relaxed);
    let memory = match sampler {
        Some(task) => {
            let (samples, peak) = task.await.unwrap_or((0, 0));
            let (rss_end, hwm) = memory_kb(&pids).unwrap_or((0, 0));
            let cpu = cpu_start.zip(cpu_end).map(|(a, b)| b.saturating_sub(a));
            #[allow(clippy::cast_precision_loss)]
            let cpu_us_per_request = cpu.map(|ns| {
                round1(ns as f64 / 1000.0 / (tally.statuses.values().sum::<u64>().max(1)) as f64)
            });
            #[allow(clippy::cast_precision_loss)]
            let cpu_cores = cpu.map(|ns| {
                (ns as f64 / 1e9 / elapsed.as_secs_f64().max(1e-9) * 100.0).round() / 100.0
            });
            json!({"pids": pids, "samples": samples, "vmrss_peak_kb": peak.max(rss_end),
                   "vmrss_end_kb": rss_end, "vmhwm_kb": hwm,
                   "cpu_us_per_request": cpu_us_per_request, "cpu_cores": cpu_cores})
        }
        None => Value::Null,
    };
    tally.latencies.sort_unstable();
    tally.first_byte.sort_unstable();
    let f = &tally.first_byte;
    let v = &tally.latencies;
    let ok = v.len() as u64;
    let sent = tally.statuses.values().sum::<u64>() + tally.transport_errors;
    let errors = sent - ok;
    #[allow(clippy::cast_precision_loss)]
    let mean_us = if v.is_empty() {
        0.0
    } else {
        round1(v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64 / 1000.0)
    };
    #[allow(clippy::cast_precision_loss)]
    let rps = sent as f64 / elapsed.as_secs_f64().max(1e-9);
    let statuses: serde_json::Map<String, Value> = tally
        .statuses
        .iter()
        .map(|(s, n)| (s.to_string(), json!(n)))
        .collect();
    Ok(json!({
        "label": args.label.clone().unwrap_or_else(|| args.url.clone()),
        "url": args.url,
        "concurrency": args.concurrency,
        "threads": args.threads,
        "warmup": warmup,
        "warmup_errors": warm_errors,
        "requests": sent,
        "ok": ok,
        "errors": errors,
        "transport_errors": tally.transport_errors,
        "mismatches": tally.mismatches,
        "statuses": statuses,
        "first_error": tally.first_error.or(warm.first_error),
        "elapsed_s": (elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
        "throughput_rps": rps.round(),
        "truncated_by_time": sent < args.requests,
        "min_us": pct(v, 0.0),
        "mean_us": mean_us,
        "p50_us": pct(v, 50.0),
        "p90_us": pct(v, 90.0),
        "p99_us": pct(v, 99.0),
        "p999_us": pct(v, 99.9),
        "max_us": pct(v, 100.0),
        "ttfb_p50_us": pct(f, 50.0),
        "ttfb_p99_us": pct(f, 99.0),
        "memory": memory,
    }))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            let mut err = std::io::stderr();
            if e.is_empty() {
                let _ = write!(std::io::stdout(), "{USAGE}");
                return ExitCode::SUCCESS;
            }
            let _ = writeln!(err, "loadgen: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "loadgen: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = args.out.clone();
    match runtime.block_on(run(args)) {
        Ok(report) => {
            let line = report.to_string();
            if let Some(path) = out
                && let Err(e) = std::fs::write(&path, format!("{line}\n"))
            {
                let _ = writeln!(
                    std::io::stderr(),
                    "loadgen: writing {}: {e}",
                    path.display()
                );
                return ExitCode::FAILURE;
            }
            let _ = writeln!(std::io::stdout(), "{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}
