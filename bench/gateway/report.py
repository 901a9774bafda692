#!/usr/bin/env python3
"""Summarise the gateway benchmark (bench/gateway/run.sh): the loadgen runs -> medians,
added latency, the LiteLLM/toolmend ratios, the bars, as JSON and a Markdown table.

Each run is one loadgen JSON object with `rep`, `target` (direct | toolmend | litellm) and
`concurrency`. Added latency at a percentile = the target's percentile minus direct's at
the same percentile, concurrency and repetition (they run back to back); the table gives
the median over the repetitions of each figure.

Usage: report.py --runs RUNS.jsonl --meta META.json --json OUT.json --md OUT.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

TARGETS = ("direct", "toolmend", "litellm")
RSS_BAR_KB = 64 * 1024  # 64 MiB
ADDED_P99_BAR_US = 1000.0
RATIO_BAR = 10.0


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ms(us, digits=3):
    return "–" if us is None else f"{us / 1000:.{digits}f}"


def ratio(litellm_added, toolmend_added):
    if litellm_added is None or toolmend_added is None:
        return None
    if toolmend_added <= 0:
        return float("inf")
    return litellm_added / toolmend_added


def fmt_ratio(r):
    if r is None:
        return "–"
    if r == float("inf"):
        return "∞ (toolmend added ≤ 0)"
    return f"{r:.0f}x" if r >= 10 else f"{r:.1f}x"


def summarise(runs):
    by = {}
    for r in runs:
        by.setdefault((r["target"], r["concurrency"]), []).append(r)
    concurrencies = sorted({r["concurrency"] for r in runs})
    reps = sorted({r["rep"] for r in runs})
    direct_by = {(r["rep"], r["concurrency"]): r for r in runs if r["target"] == "direct"}
    rows = []
    for c in concurrencies:
        for t in TARGETS:
            rs = by.get((t, c))
            if not rs:
                continue
            row = {
                "target": t,
                "concurrency": c,
                "reps": len(rs),
                "requests": sum(r["ok"] for r in rs),
                "errors": sum(r["errors"] for r in rs),
                "mismatches": sum(r["mismatches"] for r in rs),
                "throughput_rps": median(r["throughput_rps"] for r in rs),
            }
            for p in ("p50", "p90", "p99", "max"):
                row[f"{p}_us"] = median(r[f"{p}_us"] for r in rs)
            if t != "direct":
                for p in ("p50", "p90", "p99"):
                    added = []
                    for r in rs:
                        d = direct_by.get((r["rep"], c))
                        if d is not None:
                            added.append(round(r[f"{p}_us"] - d[f"{p}_us"], 1))
                    row[f"added_{p}_us"] = median(added)
                    row[f"added_{p}_us_per_rep"] = added
            mem = [r["memory"] for r in rs if r.get("memory")]
            if mem:
                row["rss_peak_kb"] = max(m["vmrss_peak_kb"] for m in mem)
                row["vmhwm_kb"] = max(m["vmhwm_kb"] for m in mem)
                row["cpu_us_per_request"] = median(m.get("cpu_us_per_request") for m in mem)
                row["cpu_cores"] = median(m.get("cpu_cores") for m in mem)
            rows.append(row)
    # ratios litellm added / toolmend added, per concurrency
    for c in concurrencies:
        tm = next((r for r in rows if r["target"] == "toolmend" and r["concurrency"] == c), None)
        ll = next((r for r in rows if r["target"] == "litellm" and r["concurrency"] == c), None)
        if tm and ll:
            for p in ("p50", "p99"):
                ll[f"ratio_{p}"] = ratio(ll.get(f"added_{p}_us"), tm.get(f"added_{p}_us"))
    return rows, concurrencies, reps


def bars(rows, meta):
    def row(t, c):
        return next((r for r in rows if r["target"] == t and r["concurrency"] == c), None)

    out = []
    tm16 = row("toolmend", 16)
    ll16 = row("litellm", 16)
    if tm16:
        a = tm16.get("added_p99_us")
        out.append({
            "bar": "p99 added latency <= 1 ms at concurrency 16 (mending on)",
            "value": f"{ms(a)} ms",
            "met": a is not None and a <= ADDED_P99_BAR_US,
        })
    if tm16 and ll16:
        for p in ("p50", "p99"):
            r = ll16.get(f"ratio_{p}")
            out.append({
                "bar": f">= 10x less added latency than LiteLLM's proxy (c16, {p})",
                "value": fmt_ratio(r),
                "met": r is not None and r >= RATIO_BAR,
            })
    rss = (tm16 or {}).get("rss_peak_kb")
    if rss is not None:
        out.append({
            "bar": "gateway resident memory <= 64 MB under the c16 load (peak VmRSS)",
            "value": f"{rss / 1024:.1f} MiB",
            "met": rss <= RSS_BAR_KB,
        })
    hwm = meta.get("gateway_vmhwm_kb_end")
    if hwm:
        out.append({
            "bar": "(info) gateway VmHWM over the whole run, c64 included",
            "value": f"{hwm / 1024:.1f} MiB",
            "met": hwm <= RSS_BAR_KB,
        })
    return out


def markdown(rows, bar_list, meta, reps):
    lines = []
    lines.append(
        f"## Gateway added latency — {meta.get('date', '')}, {meta.get('cores', '?')} cores, "
        f"{meta.get('mode', '')}, median of {len(reps)} repetition(s)"
    )
    lines.append("")
    lines.append(
        "Closed loop on 127.0.0.1, one fixed request with `tools` and a broken tool call in "
        "every upstream answer (`{'city': 'Paris', 'days': '3',}` → toolmend returns "
        "`{\"city\":\"Paris\",\"days\":3}`). Times in ms. *added* = target − direct at the same "
        "percentile, concurrency and repetition; *ratio* = LiteLLM added / toolmend added. "
        "*CPU µs/req*: CPU time of the process in the path (direct: the scripted provider; "
        "toolmend: the gateway alone; litellm: LiteLLM's proxy alone) per request. *RSS "
        "peak*: that process's peak VmRSS sampled every 20 ms during the runs."
    )
    lines.append("")
    lines.append(
        "| concurrency | target | p50 | p99 | added p50 | added p99 | req/s | "
        "ratio p50 | ratio p99 | CPU µs/req | RSS peak |"
    )
    lines.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        rss = r.get("rss_peak_kb")
        lines.append(
            "| {c} | {t} | {p50} | {p99} | {a50} | {a99} | {rps} | {r50} | {r99} | {cpu} | {rss} |".format(
                c=r["concurrency"],
                t=r["target"],
                p50=ms(r["p50_us"]),
                p99=ms(r["p99_us"]),
                a50=ms(r.get("added_p50_us")) if r["target"] != "direct" else "",
                a99=ms(r.get("added_p99_us")) if r["target"] != "direct" else "",
                rps=f"{r['throughput_rps']:.0f}" if r["throughput_rps"] is not None else "–",
                r50=fmt_ratio(r.get("ratio_p50")) if r["target"] == "litellm" else "",
                r99=fmt_ratio(r.get("ratio_p99")) if r["target"] == "litellm" else "",
                cpu=f"{r['cpu_us_per_request']:.0f}" if r.get("cpu_us_per_request") is not None
                else "",
                rss=f"{rss / 1024:.1f} MiB" if rss is not None and r["target"] != "direct" else "",
            )
        )
    lines.append("")
    lines.append("| bar | value | met |")
    lines.append("| --- | ---: | :---: |")
    for b in bar_list:
        lines.append(f"| {b['bar']} | {b['value']} | {'yes' if b['met'] else '**no**'} |")
    lines.append("")
    bad = [r for r in rows if r["errors"] or r["mismatches"]]
    for r in bad:
        lines.append(
            f"- {r['target']} c{r['concurrency']}: {r['errors']} error(s), "
            f"{r['mismatches']} mismatch(es)"
        )
    if meta.get("litellm_workers") and any(r["target"] == "litellm" for r in rows):
        lines.append(
            f"- LiteLLM's proxy ran {meta['litellm_workers']} uvicorn worker(s); its CPU and RSS "
            "add up all its processes"
        )
    env = meta.get("gateway_env")
    lines.append(
        "- gateway: embedded defaults"
        + (", " + ", ".join(f"{k}={v}" for k, v in env.items()) if env else
           " (info-level JSON log line per request, to a file)")
    )
    prss = meta.get("provider_direct_rss_kb")
    if prss:
        lines.append(
            f"- scripted provider (direct), {meta.get('provider_steps_direct')} script steps: "
            f"RSS {prss['start'] / 1024:.0f} MiB after loading, {prss['end'] / 1024:.0f} MiB at "
            "the end (it keeps every request body it receives)"
        )
    if meta.get("gateway_error_log_lines"):
        lines.append(f"- gateway log: {meta['gateway_error_log_lines']} ERROR line(s)")
    if lines[-1].startswith("- "):
        lines.append("")
    v = meta.get("versions", {})
    if v:
        lines.append("Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".")
    if meta.get("command"):
        lines.append("")
        lines.append(f"Reproduce: `{meta['command']}`")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args(argv)
    with open(a.runs) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    with open(a.meta) as f:
        meta = json.load(f)
    rows, _, reps = summarise(runs)
    bar_list = bars(rows, meta)
    md = markdown(rows, bar_list, meta, reps)

    def clean(x):  # JSON has no infinity
        if isinstance(x, float) and x == float("inf"):
            return "inf"
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    with open(a.json, "w") as f:
        json.dump(clean({"meta": meta, "summary": rows, "bars": bar_list, "runs": runs}), f,
                  indent=1)
        f.write("\n")
    with open(a.md, "w") as f:
        f.write(md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
