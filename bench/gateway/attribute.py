#!/usr/bin/env python3
"""Where a gateway request's CPU goes: folded stacks (inferno-collapse-perf or
stackcollapse-perf output, one `frame;frame;... count` per line) attributed to the
gateway's stages and the libraries under them, as a share of every sample and, given
the CPU per request, in microseconds.

Usage: bench/gateway/attribute.py FOLDED [--cpu-us-per-request X] [--top N]

Each sample goes to the first rule (in the order below) one of its frames matches,
read from the root down, so a stage owns what its libraries do for it; what no stage
claims goes to the library or the kernel path at its leaf.
"""
import argparse
import collections
import re

# (name, pattern) in priority order: the first rule that matches any frame wins.
STAGES = [
    ("log line (access::Line::write, tracing fmt)", r"access::Line::write|toolmend-log|sink::LogWriter"),
    ("metrics", r"metrics::|metrics_exporter_prometheus"),
    ("request: body to JSON (http::json_object)", r"server::http::json_object"),
    ("request: messages, history, tools (exchange)", r"chat_completions::exchange\b|chat_completions::exchange::\{|wire::prepare|wire::toolbox|ToolCache"),
    ("answer: plan, guard (pipeline::answer, drive)", r"pipeline::answer|toolmend::drive"),
    ("answer: parse the completion", r"json::answer.*from_slice|from_slice<serde_json::value::Value>"),
    ("answer: write back, report, account", r"json::write_choice|report::Summary|json::splice|json::respond|set_headers"),
    ("upstream: reqwest request building (URL, headers)", r"Client::request|RequestBuilder|into_url|Upstream::post|Upstream::auth|pass_on"),
    ("upstream: reqwest/hyper client", r"reqwest::|hyper_util::client|hyper::client|hyper::proto::h1::role::Client|dispatch::Client"),
    ("server: hyper h1 + axum routing", r"hyper::proto::h1|axum::|hyper::server|access::access|http::read_body|http::request_id"),
    ("tokio scheduler, timers, io driver", r"tokio::runtime"),
]
LEAF = [
    ("kernel", r"\[k\]|_\[k\]|^(entry_SYSCALL|do_syscall|__x64|tcp_|ip_|sock_|__sys_|vfs_|ep_|schedule|finish_task)"),
    ("allocator", r"^_?mi_|mimalloc"),
    ("serde_json", r"serde_json|serde_core"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folded")
    ap.add_argument("--cpu-us-per-request", type=float)
    ap.add_argument("--top", type=int, default=0, help="also the N hottest leaf frames")
    a = ap.parse_args()
    stages = [(n, re.compile(p)) for n, p in STAGES]
    leaves = [(n, re.compile(p)) for n, p in LEAF]
    by = collections.Counter()
    kernel = collections.Counter()
    leaf = collections.Counter()
    total = 0
    for line in open(a.folded):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        n = int(n)
        total += n
        frames = stack.split(";")
        is_kernel = frames[-1].endswith("_[k]") or any(f.endswith("_[k]") for f in frames[-3:])
        leaf[frames[-1][:120]] += n
        name = next((s for s, rx in stages if any(rx.search(f) for f in frames)), None)
        if name is None:
            name = next((s for s, rx in leaves if rx.search(frames[-1])), "other (threads, libc)")
        by[name] += n
        if is_kernel:
            kernel[name] += n
    scale = a.cpu_us_per_request / total if a.cpu_us_per_request else None
    print(f"{'where':<52}{'share':>8}{'of it kernel':>14}" + (f"{'µs/request':>12}" if scale else ""))
    for name, n in by.most_common():
        row = f"{name:<52}{100 * n / total:>7.1f}%{100 * kernel[name] / n:>13.0f}%"
        if scale:
            row += f"{n * scale:>12.1f}"
        print(row)
    if a.top:
        print()
        for f, n in leaf.most_common(a.top):
            print(f"{100 * n / total:6.2f}%  {f}")


if __name__ == "__main__":
    main()
