//! Latency and throughput of the mending pipeline (criterion).
//!
//! Groups (run one with `cargo bench -p toolmend --bench mend -- <group>`):
//!
//! - `valid_fast_path`: valid arguments (~200 B, ~1 KB, ~20 KB) that fit their schema.
//!   `baseline` is the least any caller pays (`serde_json::from_str` + `is_valid`);
//!   `repair` and `mend_call` are what toolmend adds on top. The ratio
//!   mend_call/baseline is the cost of the fast path (`bench/latency.sh` prints it).
//! - `repair_path`: broken arguments (single quotes + trailing commas + Python literals at
//!   each size, a truncated one, a think-leak + code-fence one) via `repair` and `mend_call`.
//! - `validate`: `is_valid` vs `validate` vs `check` (all coercions on) on schema-broken
//!   arguments (`is_valid` may stop at the first error), and `is_valid` vs `check` on valid
//!   ones (`*_on_valid`: the cost of `check` when there is nothing to coerce).
//! - `corpus`: every `raw_arguments` of the tool-call corpus (env `CORPUS`, else
//!   `$TOOLMEND_SHARED/corpus/tool_calls_dev.jsonl`, else `../shared/...` beside the repo)
//!   through `repair`, through `mend_call` with its tool compiled once, and through
//!   `mend_call_compiling` (the tool's schema compiled for every call, as when tools arrive
//!   with each request); throughput in records.
//!   Skipped when no corpus file is found.
//!
//! All inputs except the corpus are built here, programmatically and deterministically.
#![allow(clippy::expect_used, clippy::unwrap_used)] // a bench may stop loudly on bad setup

use std::collections::HashMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

// The allocator toolmend's binaries ship with (toolmend-cli); baselines use it too.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Map, Value, json};
use toolmend::mend::{MendOptions, mend_call};
use toolmend::repair::repair;
use toolmend::schema::{Coercions, CompiledTool, Phase, ValidationContext};

// ---------------------------------------------------------------------------
// realistic tools and arguments
// ---------------------------------------------------------------------------

fn email_tool() -> CompiledTool {
    let email = json!({"type": "string", "format": "email"});
    CompiledTool::compile(
        "send_email",
        "Send an email on the user's behalf.",
        &json!({
            "type": "object",
            "properties": {
                "to": {"type": "array", "items": email, "minItems": 1},
                "cc": {"type": "array", "items": email},
                "subject": {"type": "string", "maxLength": 200},
                "body": {"type": "string"},
                "priority": {"type": "string", "enum": ["low", "normal", "high"]},
                "html": {"type": "boolean"},
                "thread_id": {"type": ["string", "null"]},
                "send_at": {"type": "string", "format": "date-time"}
            },
            "required": ["to", "subject", "body"],
            "additionalProperties": false
        }),
    )
    .expect("email schema compiles")
}

fn issue_tool() -> CompiledTool {
    CompiledTool::compile(
        "create_github_issue",
        "Open an issue in a GitHub repository.",
        &json!({
            "type": "object",
            "properties": {
                "repo": {"type": "string", "pattern": "^[\\w.-]+/[\\w.-]+$"},
                "title": {"type": "string", "minLength": 1},
                "body": {"type": "string"},
                "labels": {"type": "array", "items": {"type": "string"}},
                "assignees": {"type": "array", "items": {"type": "string"}},
                "milestone": {"type": ["integer", "null"], "minimum": 1},
                "draft": {"type": "boolean"}
            },
            "required": ["repo", "title"],
            "additionalProperties": false
        }),
    )
    .expect("issue schema compiles")
}

fn invoice_tool() -> CompiledTool {
    CompiledTool::compile(
        "create_invoice",
        "Create a customer invoice with line items.",
        &invoice_schema(),
    )
    .expect("invoice schema compiles")
}

/// The invoice as a pydantic model writes it: its line items say nothing of other keys,
/// so a valid call is walked for keys no field takes.
fn silent_invoice_tool() -> CompiledTool {
    let mut schema = invoice_schema();
    schema["properties"]["line_items"]["items"]
        .as_object_mut()
        .expect("an object schema")
        .remove("additionalProperties");
    CompiledTool::compile("create_invoice", "Create a customer invoice.", &schema)
        .expect("invoice schema compiles")
}

fn invoice_schema() -> Value {
    json!({
            "type": "object",
            "properties": {
                "customer_id": {"type": "string", "pattern": "^C-[0-9]+$"},
                "currency": {"type": "string", "enum": ["EUR", "USD", "GBP", "JPY"]},
                "issue_date": {"type": "string", "format": "date"},
                "due_date": {"type": "string", "format": "date"},
                "notes": {"type": ["string", "null"]},
                "send": {"type": "boolean"},
                "line_items": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "sku": {"type": "string"},
                            "description": {"type": "string"},
                            "quantity": {"type": "integer", "minimum": 1},
                            "unit_price": {"type": "number", "minimum": 0},
                            "tax_rate": {"type": "number", "minimum": 0, "maximum": 1},
                            "discount": {"type": ["number", "null"]},
                            "taxable": {"type": "boolean"}
                        },
                        "required": ["sku", "quantity", "unit_price"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["customer_id", "currency", "line_items"],
            "additionalProperties": false
    })
}

/// ~200 B: a short email.
fn email_args() -> Value {
    json!({
        "to": ["ana.souza@example.com"],
        "subject": "Lunch on Friday?",
        "body": "Hi Ana,\n\nare you free for lunch on Friday at 12:30? There's a new ramen place.\n\nBest,\nOmar",
        "priority": "normal",
        "html": false,
        "thread_id": null
    })
}

/// ~1 KB: a bug report with a Markdown body holding code, quotes and backslashes.
fn issue_args() -> Value {
    let body = concat!(
        "## What happens\n\nThe login button does nothing on Safari 17 after the \"remember me\" box is ticked.\n\n",
        "## Steps\n\n1. Open `/login`\n2. Tick 'remember me'\n3. Click **Sign in**\n\n",
        "## Code\n\n```ts\nconst onSubmit = async (e: Event) => {\n  e.preventDefault();\n",
        "  const res = await fetch(\"/api/session\", { method: \"POST\", body: form });\n",
        "  if (!res.ok) throw new Error(`login failed: ${res.status}`);\n};\n```\n\n",
        "Path on Windows: C:\\Users\\dev\\app\\src\\login.ts\n\n",
        "## Expected\n\nThe session starts and the user lands on /dashboard.\n\n",
        "## Environment\n\n- Safari 17.4 on macOS 14.4 (Chrome and Firefox work)\n",
        "- App 3.12.0, build 4711; reproduced by three users, see the \"Login broken?\" forum thread\n"
    );
    json!({
        "repo": "acme/web-frontend",
        "title": "Login button unresponsive on Safari when 'remember me' is ticked",
        "body": body,
        "labels": ["bug", "safari", "auth", "p1"],
        "assignees": ["omar-haddad", "chiara.mensah"],
        "milestone": 12,
        "draft": false
    })
}

/// ~20 KB: an invoice with many line items (deterministic pseudo-random values).
fn invoice_args(target_bytes: usize) -> Value {
    const PRODUCTS: [&str; 8] = [
        "Ergonomic office chair, mesh back, black",
        "Standing desk frame, dual motor, 140 cm",
        "USB-C docking station with 2x HDMI",
        "Noise-cancelling headset \"Pro\" edition",
        "27\" 4K monitor, height-adjustable stand",
        "Mechanical keyboard, ISO-DE layout",
        "Cable tray, steel, 120 cm",
        "Annual support plan (per seat)",
    ];
    let mut seed: u64 = 0x5eed;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let mut items = Vec::new();
    let mut args = json!({
        "customer_id": "C-10492",
        "currency": "EUR",
        "issue_date": "2026-03-01",
        "due_date": "2026-03-31",
        "notes": "Delivery to the Berlin office, 3rd floor; call +49 30 1234567 on arrival.",
        "send": true,
        "line_items": []
    });
    while serde_json::to_string(&args).expect("serialise").len() < target_bytes {
        let n = next();
        let discount = if n % 3 == 0 {
            Value::Null
        } else {
            json!(((n % 15) as f64) / 100.0)
        };
        items.push(json!({
            "sku": format!("SKU-{:05}", n % 100_000),
            "description": PRODUCTS[(n % PRODUCTS.len() as u64) as usize],
            "quantity": 1 + n % 12,
            "unit_price": ((n % 100_000) as f64) / 100.0 + 0.99,
            "tax_rate": if n % 4 == 0 { 0.07 } else { 0.19 },
            "discount": discount,
            "taxable": n % 5 != 0
        }));
        args["line_items"] = Value::Array(items.clone());
    }
    args
}

// ---------------------------------------------------------------------------
// broken variants
// ---------------------------------------------------------------------------

/// Writes a value the way a small model writing Python might: single-quoted strings,
/// `True`/`False`/`None`, and a trailing comma after every last member and element.
fn sloppy(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => single_quoted(s, out),
        Value::Array(items) => {
            out.push('[');
            for item in items {
                sloppy(item, out);
                out.push_str(", ");
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (k, v) in map {
                single_quoted(k, out);
                out.push_str(": ");
                sloppy(v, out);
                out.push_str(", ");
            }
            out.push('}');
        }
    }
}

fn single_quoted(s: &str, out: &mut String) {
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
}

fn sloppy_text(value: &Value) -> String {
    let mut out = String::new();
    sloppy(value, &mut out);
    out
}

/// Cuts valid JSON text inside a string value at about `fraction` of its length.
fn truncated(text: &str, fraction: f64) -> String {
    let mut cut = (text.len() as f64 * fraction) as usize;
    // move forward to a point inside a string value: just after a letter
    while cut < text.len()
        && !(text.is_char_boundary(cut) && text.as_bytes()[cut - 1].is_ascii_alphabetic())
    {
        cut += 1;
    }
    text[..cut].to_owned()
}

fn think_fence(text: &str) -> String {
    format!(
        "<think>\nThe user wants a bug report filed. The repo is acme/web-frontend; I should include the \
         code snippet and label it as a bug. I'll call create_github_issue with {{\"repo\": ...}}.\n</think>\n\n\
         Here is the tool call:\n```json\n{text}\n```\nLet me know if anything should change."
    )
}

/// Schema-broken (but syntactically valid) arguments that `check` can coerce.
fn issue_schema_broken() -> Value {
    let mut v = issue_args();
    let m = v.as_object_mut().expect("object");
    m.insert("milestone".into(), json!("12")); // string for integer
    m.insert("draft".into(), json!("False")); // string for boolean
    m.insert("labels".into(), json!("bug, safari, auth")); // csv string for array
    let assignees = m.remove("assignees").expect("assignees");
    m.insert("Assignees".into(), assignees); // key case
    m.insert("priority".into(), json!("high")); // unknown key
    v
}

fn invoice_schema_broken(target_bytes: usize) -> Value {
    let mut v = invoice_args(target_bytes);
    v["currency"] = json!("eur"); // enum case
    v["issue_date"] = json!("03/01/2026"); // date format
    for item in v["line_items"].as_array_mut().expect("items") {
        let q = item["quantity"].as_u64().expect("quantity");
        item["quantity"] = json!(q.to_string()); // numeric string
    }
    v
}

// ---------------------------------------------------------------------------
// groups
// ---------------------------------------------------------------------------

struct Case {
    id: &'static str,
    tool: CompiledTool,
    text: String,
}

fn valid_cases() -> Vec<Case> {
    vec![
        Case {
            id: "200B",
            tool: email_tool(),
            text: email_args().to_string(),
        },
        Case {
            id: "1KB",
            tool: issue_tool(),
            text: issue_args().to_string(),
        },
        Case {
            id: "20KB",
            tool: invoice_tool(),
            text: invoice_args(20_000).to_string(),
        },
        Case {
            id: "20KB-silent-items",
            tool: silent_invoice_tool(),
            text: invoice_args(20_000).to_string(),
        },
    ]
}

fn bench_valid_fast_path(c: &mut Criterion) {
    let opts = MendOptions::default();
    let mut g = c.benchmark_group("valid_fast_path");
    for case in valid_cases() {
        let parsed: Value = serde_json::from_str(&case.text).expect("valid JSON");
        assert!(
            case.tool.is_valid(&parsed),
            "{}: the valid case must fit its schema",
            case.id
        );
        eprintln!("valid_fast_path/{}: {} bytes", case.id, case.text.len());
        g.throughput(Throughput::Bytes(case.text.len() as u64));
        g.bench_with_input(BenchmarkId::new("baseline", case.id), &case, |b, case| {
            b.iter(|| {
                let v: Value = serde_json::from_str(black_box(&case.text)).expect("valid JSON");
                black_box(case.tool.is_valid(&v))
            });
        });
        g.bench_with_input(BenchmarkId::new("repair", case.id), &case, |b, case| {
            b.iter(|| black_box(repair(black_box(&case.text), &opts.repair)));
        });
        g.bench_with_input(BenchmarkId::new("mend_call", case.id), &case, |b, case| {
            b.iter(|| black_box(mend_call(black_box(&case.text), &case.tool, &opts)));
        });
    }
    g.finish();
}

fn bench_repair_path(c: &mut Criterion) {
    let opts = MendOptions::default();
    let issue_text = issue_args().to_string();
    let cases = vec![
        Case {
            id: "sloppy_200B",
            tool: email_tool(),
            text: sloppy_text(&email_args()),
        },
        Case {
            id: "sloppy_1KB",
            tool: issue_tool(),
            text: sloppy_text(&issue_args()),
        },
        Case {
            id: "sloppy_20KB",
            tool: invoice_tool(),
            text: sloppy_text(&invoice_args(20_000)),
        },
        Case {
            id: "truncated_1KB",
            tool: issue_tool(),
            text: truncated(&issue_text, 0.7),
        },
        Case {
            id: "think_fence_1KB",
            tool: issue_tool(),
            text: think_fence(&issue_text),
        },
    ];
    let mut g = c.benchmark_group("repair_path");
    for case in &cases {
        match repair(&case.text, &opts.repair) {
            Ok(r) => {
                let fixes: usize = r.calls.iter().map(|c| c.fixes.len()).sum();
                eprintln!(
                    "repair_path/{}: {} bytes, {fixes} fixes",
                    case.id,
                    case.text.len()
                );
            }
            Err(e) => eprintln!(
                "repair_path/{}: {} bytes, repair error: {e}",
                case.id,
                case.text.len()
            ),
        }
        g.throughput(Throughput::Bytes(case.text.len() as u64));
        g.bench_with_input(BenchmarkId::new("repair", case.id), case, |b, case| {
            b.iter(|| black_box(repair(black_box(&case.text), &opts.repair)));
        });
        g.bench_with_input(BenchmarkId::new("mend_call", case.id), case, |b, case| {
            b.iter(|| black_box(mend_call(black_box(&case.text), &case.tool, &opts)));
        });
    }
    g.finish();
}

fn bench_validate(c: &mut Criterion) {
    let coercions = Coercions::default();
    let cases = [
        (
            "issue_1KB",
            issue_tool(),
            issue_schema_broken(),
            issue_args(),
        ),
        (
            "invoice_20KB",
            invoice_tool(),
            invoice_schema_broken(20_000),
            invoice_args(20_000),
        ),
    ];
    let mut g = c.benchmark_group("validate");
    for (id, tool, broken, valid) in &cases {
        let ctx = ValidationContext::new(tool.name(), Phase::Initial);
        let issues = tool.validate(broken).len();
        let checked = tool.check(broken.clone(), &coercions, &ctx);
        eprintln!(
            "validate/{id}: broken input has {issues} issues; check applied {} fixes, left {} issues",
            checked.fixes.len(),
            checked.issues.len()
        );
        g.bench_with_input(BenchmarkId::new("is_valid", id), broken, |b, v| {
            b.iter(|| black_box(tool.is_valid(black_box(v))));
        });
        g.bench_with_input(BenchmarkId::new("validate", id), broken, |b, v| {
            b.iter(|| black_box(tool.validate(black_box(v))));
        });
        // `check` takes the value by value: the clone is in setup, not in the timing.
        g.bench_with_input(BenchmarkId::new("check", id), broken, |b, v| {
            b.iter_batched(
                || v.clone(),
                |v| black_box(tool.check(v, &coercions, &ctx)),
                BatchSize::SmallInput,
            );
        });
        g.bench_with_input(BenchmarkId::new("is_valid_on_valid", id), valid, |b, v| {
            b.iter(|| black_box(tool.is_valid(black_box(v))));
        });
        g.bench_with_input(BenchmarkId::new("check_on_valid", id), valid, |b, v| {
            b.iter_batched(
                || v.clone(),
                |v| black_box(tool.check(v, &coercions, &ctx)),
                BatchSize::SmallInput,
            );
        });
    }
    g.finish();
}

/// The corpus file, if one is found.
fn corpus_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CORPUS") {
        return Some(PathBuf::from(p));
    }
    let shared = std::env::var_os("TOOLMEND_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let p = shared.join("corpus/tool_calls_dev.jsonl");
    p.exists().then_some(p)
}

fn bench_corpus(c: &mut Criterion) {
    let Some(path) = corpus_path() else {
        eprintln!("corpus: no corpus file (set CORPUS or TOOLMEND_SHARED); group skipped");
        return;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("corpus: cannot read {}: {e}; group skipped", path.display());
            return;
        }
    };
    // Compile each distinct tool once, as a caller would.
    let mut tools: Vec<CompiledTool> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut records: Vec<(usize, String)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let rec: Map<String, Value> =
            serde_json::from_str(line).expect("corpus line is a JSON object");
        let tool = &rec["tool"];
        let key = tool.to_string();
        let i = *index.entry(key).or_insert_with(|| {
            let name = tool["name"].as_str().unwrap_or("tool");
            let description = tool["description"].as_str().unwrap_or("");
            tools.push(
                CompiledTool::compile(name, description, &tool["parameters"])
                    .expect("corpus schema compiles"),
            );
            tools.len() - 1
        });
        let raw = rec["raw_arguments"]
            .as_str()
            .expect("raw_arguments is a string")
            .to_owned();
        records.push((i, raw));
    }
    let bytes: usize = records.iter().map(|(_, r)| r.len()).sum();
    eprintln!(
        "corpus: {} records, {} tools, {bytes} bytes from {}",
        records.len(),
        tools.len(),
        path.display()
    );

    let opts = MendOptions::default();
    let mut g = c.benchmark_group("corpus");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(records.len() as u64));
    g.bench_function("repair", |b| {
        b.iter(|| {
            for (_, raw) in &records {
                black_box(repair(black_box(raw), &opts.repair).ok());
            }
        });
    });
    g.bench_function("mend_call", |b| {
        b.iter(|| {
            for (i, raw) in &records {
                black_box(mend_call(black_box(raw), &tools[*i], &opts));
            }
        });
    });
    // As a gateway meets calls: the tool arrives with the request, so its schema is
    // compiled for every call (json_repair's schema mode also takes the schema per call).
    let sources: Vec<(String, String, Value)> = tools
        .iter()
        .map(|t| {
            (
                t.name().to_owned(),
                t.description().to_owned(),
                t.parameters().clone(),
            )
        })
        .collect();
    g.bench_function("mend_call_compiling", |b| {
        b.iter(|| {
            for (i, raw) in &records {
                let (name, description, parameters) = &sources[*i];
                let tool = CompiledTool::compile(name, description, parameters).expect("compiles");
                black_box(mend_call(black_box(raw), &tool, &opts));
            }
        });
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_valid_fast_path,
    bench_repair_path,
    bench_validate,
    bench_corpus
);
criterion_main!(benches);
