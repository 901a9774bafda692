#!/usr/bin/env python3
"""The engine's schema path through the Python binding, against json_repair's schema mode,
in one process, over the same records (issue 31, item 5).

Each side is timed over whole passes of the tool-call corpus (660 records of 14 tools),
one warm-up pass, then --passes passes; the median pass is reported.

  toolmend.Toolbox.mend   tools compiled once (as a tool node keeps them); per record:
                          repair, validate, coerce, and the record back as Python objects
  toolmend.repair         the tolerant parser alone (no schema)
  toolmend.repair_json    json_repair's signature with schema= (compiled schemas cached)
  json_repair.repair_json(schema=..., return_objects=True)   json_repair's schema mode
  json_repair.loads       json_repair without a schema

An exception counts as an outcome and is not re-raised (as in score_repair.py).

Usage (the venv of scripts/python-env.sh, toolmend installed in it):
  .venv/bin/python bench/python/schema_path.py [--corpus PATH] [--passes N] [--profile]
--profile: cProfile of the Toolbox.mend pass only (where the Python side spends it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def default_corpus() -> Path:
    shared = Path(os.environ.get("TOOLMEND_SHARED", ROOT.parent / "shared"))
    return shared / "corpus" / "tool_calls_dev.jsonl"


def median_pass(fn, recs, passes: int) -> float:
    def one() -> float:
        t0 = time.perf_counter()
        for r in recs:
            try:
                fn(r)
            except Exception:  # noqa: BLE001 - an outcome, as in score_repair.py
                pass
        return time.perf_counter() - t0

    one()
    return statistics.median(one() for _ in range(passes))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=default_corpus())
    ap.add_argument("--passes", type=int, default=15)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import json_repair
    import toolmend

    recs = [json.loads(line) for line in args.corpus.open(encoding="utf-8") if line.strip()]
    tools = {}
    for r in recs:
        tools.setdefault(r["tool"]["name"], r["tool"])
    box = toolmend.Toolbox(list(tools.values()))

    sides = {
        "toolmend Toolbox.mend": lambda r: box.mend(r["tool"]["name"], r["raw_arguments"]),
        "toolmend.repair_json(schema=)": lambda r: toolmend.repair_json(
            r["raw_arguments"], schema=r["tool"]["parameters"], return_objects=True),
        "toolmend.repair": lambda r: toolmend.repair(r["raw_arguments"]),
        "json_repair schema mode": lambda r: json_repair.repair_json(
            r["raw_arguments"], schema=r["tool"]["parameters"], return_objects=True),
        "json_repair.loads": lambda r: json_repair.loads(r["raw_arguments"]),
    }
    if args.profile:
        import cProfile
        import pstats

        mend = sides["toolmend Toolbox.mend"]
        median_pass(mend, recs, 1)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.passes):
            for r in recs:
                try:
                    mend(r)
                except Exception:  # noqa: BLE001
                    pass
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        return 0

    secs = {name: median_pass(fn, recs, args.passes) for name, fn in sides.items()}
    n = len(recs)
    print(f"{n} records, {len(tools)} tools, median of {args.passes} passes "
          f"(toolmend {toolmend.__version__}, json_repair {json_repair.__version__ if hasattr(json_repair, '__version__') else '?'})\n")
    print("| function | µs per record | records/s |")
    print("| --- | ---: | ---: |")
    for name, s in secs.items():
        print(f"| {name} | {s / n * 1e6:.2f} | {n / s:,.0f} |")
    schema = secs["json_repair schema mode"]
    plain = secs["json_repair.loads"]
    print()
    print(f"Toolbox.mend against json_repair's schema mode: {schema / secs['toolmend Toolbox.mend']:.1f}x")
    print(f"toolmend.repair_json(schema=) against it: {schema / secs['toolmend.repair_json(schema=)']:.1f}x")
    print(f"toolmend.repair against json_repair.loads: {plain / secs['toolmend.repair']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
