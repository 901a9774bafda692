#!/usr/bin/env python3
"""One table from score_repair.py --json-out files (see bench/corpus.sh).

Columns: exact-match rate overall and per group (syntax / envelope / schema),
throughput in records/s as the scorer measured it, and toolmend's throughput
ratio to each peer (ours / theirs: above 1 means toolmend is faster).
"Ours" is the result whose tool label starts with "cmd:" (toolmend mend --lines).

The scorer times Python peers in-process (only their loads() calls) and a command
as a whole subprocess run (start-up, decoding each record with its schema,
schema compilation, one flushed write per line), so the "cmd" throughput understates toolmend. With
--inprocess (default bench/results/inprocess.json if present) the in-process
numbers from bench/inprocess.py are added as a second table.

Usage: bench/compare.py RESULT.json... [--inprocess PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GROUPS = ("syntax", "envelope", "schema")


def pct(g: dict | None) -> str:
    return f"{100.0 * g['pass'] / g['n']:.1f}%" if g and g.get("n") else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Compare score_repair.py results.")
    ap.add_argument("results", nargs="+", type=Path)
    default_inproc = Path(__file__).resolve().parent / "results" / "inprocess.json"
    ap.add_argument("--inprocess", type=Path, default=default_inproc)
    args = ap.parse_args(argv)

    rows = []
    for p in args.results:
        if not p.exists():
            print(f"compare: missing {p}", file=sys.stderr)
            continue
        d = json.loads(p.read_text())
        is_ours = d["tool"].startswith("cmd:")
        label = "toolmend (cmd: mend --lines)" if is_ours else d["tool"]
        rows.append((is_ours, label, d))
    if not rows:
        return 1
    ours = next((d for o, _, d in rows if o), None)
    corpora = sorted({c for _, _, d in rows for c in d.get("corpus", [])})
    print(f"Corpus: {', '.join(corpora)}, {rows[0][2]['records']} records. Exact match per group; "
          "throughput as measured by score_repair.py.\n")
    print("| tool | overall | syntax | envelope | schema | records/s | toolmend / tool throughput |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for is_ours, label, d in sorted(rows, key=lambda r: (not r[0], r[1])):
        g = d.get("groups", {})
        ratio = "" if is_ours or not ours else f"{ours['records_per_s'] / d['records_per_s']:.2f}x"
        print(f"| {label} | {100.0 * d['rate']:.1f}% | " + " | ".join(pct(g.get(k)) for k in GROUPS)
              + f" | {d['records_per_s']:,.0f} | {ratio} |")
    if ours:
        print("\nNote: the toolmend row's throughput includes process start-up, decoding each JSON record "
              "(with its schema), compiling the schemas, mending, and a flushed write per line; "
              "peers are timed in-process on loads() only.")

    if args.inprocess.exists():
        d = json.loads(args.inprocess.read_text())
        rps = d["records_per_s"]
        mine = [k for k in rps if k.startswith("toolmend")]
        print(f"\nIn-process throughput ({d['records']} records, bench/inprocess.py; "
              "ratio = toolmend / peer records/s):\n")
        print("| function | records/s | " + " | ".join(f"{m.split()[1]} ratio" for m in mine) + " |")
        print("|---|---:|" + "---:|" * len(mine))
        for k, v in rps.items():
            cells = ["" if k.startswith("toolmend") else f"{rps[m] / v:.1f}x" for m in mine]
            print(f"| {k} | {v:,.0f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
