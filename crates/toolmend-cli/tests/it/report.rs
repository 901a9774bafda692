//! `toolmend mend --events` and `toolmend report`, end to end: a real event log (the
//! README's examples mended by the binary), its page rendered in headless Chromium
//! driven over WebDriver (`chromedriver`), and what the browser lays out checked: every
//! chart present with bars of real size, the worst tool first, the counts the log holds,
//! no request outside the page.
//!
//! Chromium and chromedriver (Debian: `chromium`, `chromium-driver`; `scripts/test`
//! installs them) are required: without them this test fails, unless
//! `TOOLMEND_SKIP_CHROMIUM=1` says to skip the browser part (local runs only; the event
//! log and the page's text are checked either way). `CHROMIUM` and `CHROMEDRIVER` name
//! other binaries.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

/// The bound of a wait on chromedriver or Chromium (a start, a page, a screenshot): it
/// only ends a hang, so it leaves room for a browser on a loaded two-core machine.
const PATIENCE: Duration = Duration::from_secs(300);

fn toolmend(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_toolmend"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Every string (keys and values) of the mended arguments of the README's examples, and
/// every fix detail: none of them may reach the event log.
fn sent_strings() -> BTreeSet<String> {
    let out = toolmend(&["mend", "--format", "json", "examples/broken_calls.jsonl"]);
    let mut found = BTreeSet::new();
    fn walk(v: &Value, found: &mut BTreeSet<String>) {
        match v {
            Value::String(s) => {
                found.insert(s.clone());
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, found)),
            Value::Object(o) => o.iter().for_each(|(k, x)| {
                found.insert(k.clone());
                walk(x, found);
            }),
            _ => {}
        }
    }
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        for call in v["calls"].as_array().into_iter().flatten() {
            if let Some(args) = call.get("arguments") {
                walk(args, &mut found);
            }
            for f in call["fixes"].as_array().into_iter().flatten() {
                if let Some(d) = f["detail"].as_str() {
                    found.insert(d.to_owned());
                }
            }
        }
    }
    found
}

#[test]
fn the_event_log_and_its_report_show_what_went_wrong_in_a_browser() {
    let events = tmp("events.jsonl");
    let page = tmp("report.html");
    let out = toolmend(&[
        "mend",
        "examples/broken_calls.jsonl",
        "--events",
        events.to_str().unwrap(),
        "--events-model",
        "example-model",
    ]);
    // 1: the examples hold a malformed line on purpose; the events are written anyway.
    assert_ne!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&events).unwrap();
    let log: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = String::from_utf8(out.stdout).unwrap();
    let calls: usize = summary
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|c| c.strip_suffix(" call(s)"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(log.len(), calls, "one event per call mended");

    // The log names tools, kinds and schema paths; never a value, a key the model wrote
    // or a fix's detail.
    for s in sent_strings().iter().filter(|s| s.len() >= 4) {
        let quoted = serde_json::to_string(s).unwrap();
        let known = log.iter().any(|e| {
            e["tool"] == json!(s)
                || e["fields"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f["path"].as_str().unwrap().split('/').any(|p| p == s))
        });
        assert!(
            known || !text.contains(&quoted),
            "{quoted} reached the event log"
        );
    }
    for e in &log {
        assert_eq!(e["v"], 1);
        assert_eq!(e["front"], "cli");
        assert_eq!(e["model"], "example-model");
        assert!(e["ts"].as_str().unwrap().ends_with('Z'));
        for f in e["fields"].as_array().unwrap() {
            let p = f["path"].as_str().unwrap();
            assert!(p.is_empty() || p.starts_with('/'), "{p}");
        }
    }

    // What the page must show, counted here from the log, independently.
    let mut problems: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut kinds = BTreeSet::new();
    for e in &log {
        let clean = e["outcome"] == "executed"
            && e["mend"] == "valid"
            && e["fields"].as_array().unwrap().is_empty();
        let t = problems
            .entry(e["tool"].as_str().unwrap().to_owned())
            .or_default();
        t.0 += u64::from(!clean);
        t.1 += 1;
        for f in e["fields"].as_array().unwrap() {
            for k in f["fixes"]
                .as_array()
                .unwrap()
                .iter()
                .chain(f["issues"].as_array().unwrap())
            {
                kinds.insert(k.as_str().unwrap().to_owned());
            }
        }
    }
    let mut worst: Vec<(&String, &(u64, u64))> = problems.iter().filter(|t| t.1.0 > 0).collect();
    worst.sort_by(|a, b| b.1.0.cmp(&a.1.0).then_with(|| a.0.cmp(b.0)));
    let worst: Vec<&str> = worst.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        worst[0], "get_weather",
        "the examples are mostly get_weather calls"
    );

    let out = toolmend(&[
        "report",
        events.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(&format!("{calls} event(s), 0 bad line(s)")),
        "{stderr}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for outside in ["http://", "https://", "<script", "<link", "@import", "url("] {
        assert!(
            !html.contains(outside),
            "the page refers outside: {outside}"
        );
    }
    // The same log, the same page.
    let again = tmp("again.html");
    toolmend(&[
        "report",
        events.to_str().unwrap(),
        "-o",
        again.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&again).unwrap(), html);

    let Some(browser) = Browser::start() else {
        return;
    };
    let shot = tmp("report.png");
    let seen = browser.render(&page, &shot);
    eprintln!("screenshot: {}", shot.display());

    assert_eq!(seen["resources"], 0, "the page loaded something: {seen}");
    assert_eq!(seen["kpis"]["calls"], json!(calls.to_string()));
    let charts = &seen["charts"];
    for chart in ["tools", "fields", "fixes", "issues", "models", "time"] {
        let c = &charts[chart];
        let rows = c["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("no {chart} chart: {seen}"));
        assert!(!rows.is_empty(), "the {chart} chart is empty");
        assert!(c["width"].as_f64().unwrap() > 300.0, "{chart}: {c}");
        let mut last_top = f64::MIN;
        for r in rows {
            let rects = r["rects"].as_array().unwrap();
            assert!(!rects.is_empty(), "{chart}: a row without a bar: {r}");
            for b in rects {
                assert!(
                    b["w"].as_f64().unwrap() >= 1.0 && b["h"].as_f64().unwrap() >= 1.0,
                    "{chart}: {b}"
                );
            }
            if chart != "time" {
                // Ranked charts: laid out top to bottom, labels inside the chart.
                let top = r["top"].as_f64().unwrap();
                assert!(top > last_top, "{chart}: rows out of order");
                last_top = top;
                assert!(
                    r["labelLeft"].as_f64().unwrap() >= c["left"].as_f64().unwrap() - 1.0,
                    "{chart}: label cut: {r}"
                );
            }
        }
    }
    // The tools chart: one bar per tool that needed anything, the worst first, and the
    // first bar the longest.
    let tools = charts["tools"]["rows"].as_array().unwrap();
    let labels: Vec<&str> = tools.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, worst, "{seen}");
    assert_eq!(tools[0]["labelText"], json!(worst[0]));
    let bar = |r: &Value| -> f64 {
        r["rects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["w"].as_f64().unwrap())
            .sum()
    };
    assert!(tools.iter().all(|r| bar(r) <= bar(&tools[0]) + 0.5));
    for r in tools {
        let (p, _) = problems[r["label"].as_str().unwrap()];
        assert_eq!(r["value"], json!(p), "{r}");
    }
    // Every call is in the time chart; every kind has its line in the legend.
    let in_time: u64 = charts["time"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_u64().unwrap())
        .sum();
    assert_eq!(in_time, calls as u64);
    let legend: BTreeSet<String> = seen["legend"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(legend, kinds);
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 20_000,
        "a blank screenshot"
    );
}

/// What the page looks like once Chromium laid it out.
const INSPECT: &str = r"
const charts = {};
for (const svg of document.querySelectorAll('svg.chart')) {
  const box = svg.getBoundingClientRect();
  const rows = [...svg.querySelectorAll('g.row, g.col')].map(g => {
    const label = g.querySelector('text.label');
    const lb = label ? label.getBoundingClientRect() : null;
    return {
      label: g.dataset.label || g.dataset.bucket,
      value: Number(g.dataset.value),
      top: g.getBoundingClientRect().top,
      labelText: label ? label.textContent : null,
      labelLeft: lb ? lb.left : null,
      rects: [...g.querySelectorAll('rect.bar')].map(r => {
        const b = r.getBoundingClientRect();
        return {w: b.width, h: b.height, count: Number(r.dataset.count)};
      }),
    };
  });
  charts[svg.dataset.chart] = {rows, width: box.width, left: box.left};
}
return {
  charts,
  kpis: Object.fromEntries([...document.querySelectorAll('[data-kpi]')]
    .map(k => [k.dataset.kpi, k.querySelector('b').textContent])),
  legend: [...document.querySelectorAll('#legend tr[data-kind]')].map(t => t.dataset.kind),
  resources: performance.getEntriesByType('resource').length,
};
";

/// Headless Chromium behind chromedriver, on a loopback port; both stopped on drop.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

impl Browser {
    /// None (skipped) only when `TOOLMEND_SKIP_CHROMIUM=1` and a binary is missing.
    fn start() -> Option<Browser> {
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let driver =
            std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        let missing: Vec<&str> = [chromium.as_str(), driver.as_str()]
            .into_iter()
            .filter(|p| !Path::new(p).exists())
            .collect();
        if !missing.is_empty() {
            if std::env::var("TOOLMEND_SKIP_CHROMIUM").as_deref() == Ok("1") {
                eprintln!(
                    "skipped the browser check: {missing:?} missing (TOOLMEND_SKIP_CHROMIUM=1)"
                );
                return None;
            }
            panic!(
                "{missing:?} missing: install the Debian packages chromium and chromium-driver \
                 (scripts/test does), or set TOOLMEND_SKIP_CHROMIUM=1 to skip the browser check locally"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut b = Browser {
            driver: child,
            port,
            session: String::new(),
        };
        let deadline = Instant::now() + PATIENCE;
        while b
            .call("GET", "/status", None)
            .map(|v| v["value"]["ready"] == true)
            != Some(true)
        {
            assert!(
                Instant::now() < deadline,
                "chromedriver not ready within {PATIENCE:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tmp("chromium-profile");
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                "--window-size=1200,1600", format!("--user-data-dir={}", profile.display())]}}}});
        let v = b
            .call("POST", "/session", Some(&caps))
            .expect("no answer to a new session");
        b.session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        Some(b)
    }

    /// Opens `page`, returns what [`INSPECT`] sees, saves a screenshot to `shot`.
    fn render(&self, page: &Path, shot: &Path) -> Value {
        let s = format!("/session/{}", self.session);
        let url = format!("file://{}", page.canonicalize().unwrap().display());
        self.call("POST", &format!("{s}/url"), Some(&json!({"url": url})))
            .unwrap();
        let seen = self
            .call(
                "POST",
                &format!("{s}/execute/sync"),
                Some(&json!({"script": INSPECT, "args": []})),
            )
            .unwrap();
        let png = self.call("GET", &format!("{s}/screenshot"), None).unwrap();
        std::fs::write(shot, base64(png["value"].as_str().unwrap())).unwrap();
        seen["value"].clone()
    }

    /// One WebDriver request (HTTP/1.1 on loopback, the connection closed after it).
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Option<Value> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(PATIENCE)).ok()?;
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .ok()?;
        // chromedriver keeps the connection open after its answer: read the head, then
        // as many bytes as it says (or chunks up to the last one).
        let mut raw = Vec::new();
        let mut buf = [0u8; 65536];
        let (split, head) = loop {
            if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break (i, String::from_utf8_lossy(&raw[..i]).to_ascii_lowercase());
            }
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            raw.extend_from_slice(&buf[..n]);
        };
        let length = head.lines().find_map(|l| {
            l.strip_prefix("content-length:")
                .and_then(|v| v.trim().parse::<usize>().ok())
        });
        let done = |raw: &[u8]| match length {
            Some(n) => raw.len() >= split + 4 + n,
            None => raw.ends_with(b"0\r\n\r\n"),
        };
        while !done(&raw) {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
        }
        let mut payload = raw[split + 4..].to_vec();
        if length.is_none() && head.contains("transfer-encoding: chunked") {
            payload = unchunk(&payload);
        }
        serde_json::from_slice(&payload).ok()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(tmp("chromium-profile"));
    }
}

fn unchunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 4 + size..];
    }
    out
}

fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s
        .bytes()
        .filter(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, c)| n | (u32::from(val(*c)) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
