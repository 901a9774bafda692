#!/usr/bin/env python3
"""Tool-node overhead per call: toolmend beside LangGraph's ToolNode and SAIDEX's node.

Reads criterion's medians of `node/invoke/N` and `node/body/N` (crates/toolmend/benches/
node.rs) and the peers' JSON lines (bench/node_peers.py --json), and prints a Markdown
table: overhead per call in microseconds, tool body excluded, and how many times more
each peer costs than toolmend.

toolmend's overhead per call = (median invoke - median body) / N, where `body` runs the
same tool bodies directly under the same block_on; the peers subtract their body time
the same way (see bench/node_peers.py).

Usage: bench/node_compare.py --peers FILE [--criterion-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_ns(crit: Path, func: str, n: int) -> float:
    path = crit / "node" / func / str(n) / "new" / "estimates.json"
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", required=True, help="bench/node_peers.py --json output")
    default_crit = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "criterion"
    ap.add_argument("--criterion-dir", type=Path, default=default_crit)
    args = ap.parse_args()

    peers: dict[tuple[str, str, int], dict] = {}
    with open(args.peers) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                peers[(r["peer"], r["mode"], int(r["calls"]))] = r
    columns = sorted({(p, m) for p, m, _ in peers})

    head = ["calls", "toolmend µs/call", "toolmend spawn_tools µs/call"]
    head += [f"{p} {m} µs/call" for p, m in columns]
    head += [f"{p} {m} / toolmend" for p, m in columns]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n in (1, 8, 64):
        try:
            ours = (median_ns(args.criterion_dir, "invoke", n)
                    - median_ns(args.criterion_dir, "body", n)) / n / 1000.0
        except FileNotFoundError as e:
            print(f"node_compare.py: no criterion result ({e.filename}); run "
                  "`cargo bench -p toolmend --bench node` first", file=sys.stderr)
            return 2
        try:
            spawned = (median_ns(args.criterion_dir, "invoke_spawned", n)
                       - median_ns(args.criterion_dir, "body", n)) / n / 1000.0
            spawned_cell = f"{spawned:.2f}"
        except FileNotFoundError:
            spawned_cell = "–"
        row = [str(n), f"{ours:.2f}", spawned_cell]
        ratios = []
        for p, m in columns:
            r = peers.get((p, m, n))
            if r is None:
                row.append("–")
                ratios.append("–")
                continue
            row.append(f"{r['per_call_us_median']:,.0f}")
            ratios.append(f"{r['per_call_us_median'] / ours:,.0f}x")
        print("| " + " | ".join(row + ratios) + " |")
    print()
    print("Overhead per valid call, tool body excluded (medians). Bar: toolmend <= 5 µs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
