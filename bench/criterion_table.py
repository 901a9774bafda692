#!/usr/bin/env python3
"""Summarise criterion results of the `mend` bench as Markdown tables.

Reads <target>/criterion/**/new/{benchmark,estimates}.json (criterion writes them
on every run) and prints, per group, the median time of each function per case
with its throughput, then the ratios that matter:

  valid_fast_path   mend_call / baseline and repair / baseline per size, where
                    baseline = serde_json::from_str + CompiledTool::is_valid
  repair_path       mend_call / repair per case (what the schema step adds)
  validate          on broken input validate / is_valid and check / is_valid (is_valid
                    may stop at the first error); on valid input check / is_valid
  corpus            records/s of repair and mend_call over the corpus

Usage: bench/criterion_table.py [--criterion-dir DIR] [--json-out PATH]
  --criterion-dir  default: $CARGO_TARGET_DIR/criterion, else <repo>/target/criterion
  --json-out       also write the medians as JSON (used by bench/inprocess.py)
Only stdlib; results of benches not run in the last invocation are still
listed (criterion keeps them), so run the groups you want to compare together.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

# group -> functions, in column order (results of other, older function ids are ignored)
FUNCTIONS = {
    "valid_fast_path": ["baseline", "repair", "mend_call"],
    "repair_path": ["repair", "mend_call"],
    "validate": ["is_valid", "validate", "check", "is_valid_on_valid", "check_on_valid"],
    "corpus": ["repair", "mend_call", "mend_call_compiling"],
}
GROUPS = list(FUNCTIONS)


def fmt_time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def fmt_tput(tp: dict | None, ns: float) -> str:
    if not tp:
        return ""
    if "Bytes" in tp:
        return f"{tp['Bytes'] / (ns / 1e9) / 1e6:,.1f} MB/s"
    if "Elements" in tp:
        return f"{tp['Elements'] / (ns / 1e9):,.0f} records/s"
    return ""


def load(crit: Path) -> dict:
    """{group: {case: {function: {"median_ns", "throughput"}}}}"""
    out: dict = {}
    for bj in crit.rglob("new/benchmark.json"):
        try:
            bench = json.loads(bj.read_text())
            est = json.loads((bj.parent / "estimates.json").read_text())
        except (OSError, ValueError):
            continue
        group = bench.get("group_id")
        if group not in GROUPS:
            continue
        func = bench.get("function_id") or bench.get("value_str") or "?"
        case = bench.get("value_str") or ("all" if group == "corpus" else "-")
        if func not in FUNCTIONS[group]:
            continue
        out.setdefault(group, {}).setdefault(case, {})[func] = {
            "median_ns": est["median"]["point_estimate"],
            "throughput": bench.get("throughput"),
        }
    return out


def case_key(case: str):
    """Order cases by the size in their name (200B < 1KB < 20KB), then by name."""
    m = re.search(r"(\d+)(K?B)\b", case)
    size = int(m.group(1)) * (1000 if m.group(2) == "KB" else 1) if m else 0
    return (re.sub(r"_?\d+K?B$", "", case), size, case)


def ratio(a: dict, b: dict, num: str, den: str) -> str:
    if num in a and den in b and b[den]["median_ns"] > 0:
        return f"{a[num]['median_ns'] / b[den]['median_ns']:.2f}x"
    return "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = Path(__file__).resolve().parent.parent
    default = Path(os.environ.get("CARGO_TARGET_DIR", root / "target")) / "criterion"
    ap.add_argument("--criterion-dir", type=Path, default=default)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    if not args.criterion_dir.is_dir():
        print(f"no criterion results under {args.criterion_dir}; run bench/latency.sh first", file=sys.stderr)
        return 1
    data = load(args.criterion_dir)
    if not data:
        print(f"no results of the mend bench under {args.criterion_dir}", file=sys.stderr)
        return 1

    for group in GROUPS:
        cases = data.get(group)
        if not cases:
            continue
        present = {f for c in cases.values() for f in c}
        funcs = [f for f in FUNCTIONS[group] if f in present]
        print(f"### {group}\n")
        print("| case | " + " | ".join(funcs) + " |")
        print("|---|" + "---:|" * len(funcs))
        for case in sorted(cases, key=case_key):
            row = []
            for f in funcs:
                r = cases[case].get(f)
                row.append(f"{fmt_time(r['median_ns'])} ({fmt_tput(r['throughput'], r['median_ns'])})".replace(" ()", "")
                           if r else "-")
            print(f"| {case} | " + " | ".join(row) + " |")
        print()
        if group == "valid_fast_path":
            print("| size | mend_call / baseline | repair / baseline |")
            print("|---|---:|---:|")
            for case in sorted(cases, key=case_key):
                c = cases[case]
                print(f"| {case} | {ratio(c, c, 'mend_call', 'baseline')} | {ratio(c, c, 'repair', 'baseline')} |")
            print()
        elif group == "repair_path":
            print("| case | mend_call / repair |")
            print("|---|---:|")
            for case in sorted(cases, key=case_key):
                print(f"| {case} | {ratio(cases[case], cases[case], 'mend_call', 'repair')} |")
            print()
        elif group == "validate":
            print("| case | broken: validate / is_valid | broken: check / is_valid "
                  "| valid: check / is_valid |")
            print("|---|---:|---:|---:|")
            for case in sorted(cases):
                c = cases[case]
                print(f"| {case} | {ratio(c, c, 'validate', 'is_valid')} | {ratio(c, c, 'check', 'is_valid')} "
                      f"| {ratio(c, c, 'check_on_valid', 'is_valid_on_valid')} |")
            print()
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
