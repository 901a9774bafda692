#!/usr/bin/env python3
"""In-process throughput on the tool-call corpus: toolmend (Rust, criterion) vs the
Python peers, over the same raw_arguments strings, measured in the same run.

Why: score_repair.py times peers in-process (only their loads() calls) but times a
command-line tool as a whole subprocess (process start-up, decoding each JSON
record with its schema, schema compilation, one flushed write per line). This script removes
that asymmetry: each side runs its repair function in a loop over the corpus,
in its own process, and nothing else is timed.

  toolmend     `cargo bench -p toolmend --bench mend -- corpus` (criterion median of a
               whole corpus pass): repair(), mend_call() with tools compiled once,
               mend_call_compiling (schema compiled per call)
  peers        a whole-corpus pass of json_repair.loads, json_repair.repair_json(schema=...),
               fast_json_repair.loads, jsonrepair.loads (json-repair-engine): one warm-up
               pass, then --passes passes, median; an exception counts as an outcome
               (as in score_repair.py) and is not re-raised

Usage (with the venv from scripts/python-env.sh):
  .venv/bin/python bench/inprocess.py [--corpus PATH] [--passes N] [--no-rust]
                                      [--json-out bench/results/inprocess.json]
  --no-rust   do not run cargo bench; read the last criterion results instead
Prints a Markdown table: records/s per function and toolmend's ratio to each peer.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def default_corpus() -> Path:
    if os.environ.get("CORPUS"):
        return Path(os.environ["CORPUS"])
    shared = Path(os.environ.get("TOOLMEND_SHARED", ROOT.parent / "shared"))
    return shared / "corpus" / "tool_calls_dev.jsonl"


def load(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def peers() -> dict:
    """name -> fn(record); only the peers that import."""
    out = {}
    try:
        import json_repair

        out["json_repair"] = lambda r: json_repair.loads(r["raw_arguments"])
        out["json_repair_schema"] = lambda r: json_repair.repair_json(
            r["raw_arguments"], schema=r["tool"]["parameters"], return_objects=True)
    except ImportError:
        print("inprocess: json_repair not importable (run scripts/python-env.sh)", file=sys.stderr)
    try:
        import fast_json_repair

        out["fast_json_repair"] = lambda r: fast_json_repair.loads(r["raw_arguments"])
    except ImportError:
        print("inprocess: fast_json_repair not importable", file=sys.stderr)
    try:
        import jsonrepair  # PyPI json-repair-engine

        out["json_repair_engine"] = lambda r: jsonrepair.loads(r["raw_arguments"])
    except ImportError:
        print("inprocess: jsonrepair (json-repair-engine) not importable", file=sys.stderr)
    return out


def time_pass(fn, recs) -> float:
    t0 = time.perf_counter()
    for r in recs:
        try:
            fn(r)
        except Exception:  # noqa: BLE001 - a failed repair is an outcome, like in score_repair.py
            pass
    return time.perf_counter() - t0


def rust_medians(corpus: Path, run: bool) -> dict:
    """function -> median seconds per corpus pass, from criterion's `corpus` group."""
    if run:
        env = dict(os.environ, CORPUS=str(corpus))
        subprocess.run(["cargo", "bench", "-p", "toolmend", "--bench", "mend", "--", "^corpus/"],
                       cwd=ROOT, env=env, check=True, stdout=sys.stderr)
    crit = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "criterion" / "corpus"
    out = {}
    for func in ("repair", "mend_call", "mend_call_compiling"):
        est = crit / func / "new" / "estimates.json"
        if est.exists():
            out[func] = json.loads(est.read_text())["median"]["point_estimate"] / 1e9
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="In-process corpus throughput: toolmend vs Python peers.")
    ap.add_argument("--corpus", type=Path, default=default_corpus())
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--no-rust", action="store_true")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    recs = load(args.corpus)
    n = len(recs)

    rust = {f"toolmend {k}": v for k, v in rust_medians(args.corpus, not args.no_rust).items()}
    if not rust:
        print("inprocess: no criterion results for the corpus group", file=sys.stderr)

    py = {}
    for name, fn in peers().items():
        time_pass(fn, recs)  # warm-up (imports, caches)
        times = [time_pass(fn, recs) for _ in range(args.passes)]
        py[name] = statistics.median(times)
        print(f"inprocess: {name}: {n / py[name]:,.0f} records/s", file=sys.stderr)

    rps = {k: n / v for k, v in {**rust, **py}.items() if v > 0}
    ours = [k for k in rps if k.startswith("toolmend")]
    print(f"In-process throughput over {n} corpus records ({args.corpus.name}); "
          f"ratio = toolmend records/s / peer records/s\n")
    print("| function | records/s | " + " | ".join(f"{o.split()[1]} ratio" for o in ours) + " |")
    print("|---|---:|" + "---:|" * len(ours))
    for k, v in rps.items():
        cells = [f"{rps[o] / v:.1f}x" if not k.startswith("toolmend") else "" for o in ours]
        print(f"| {k} | {v:,.0f} | " + " | ".join(cells) + " |")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps({
            "corpus": args.corpus.name, "records": n, "passes": args.passes,
            "seconds_per_pass": {**rust, **py}, "records_per_s": rps,
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
