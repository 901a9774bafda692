#!/usr/bin/env python3
"""Tool-node overhead per tool call of the Python peers, tool body excluded, for one
assistant message carrying N parallel tool calls (N = 1, 8, 64 by default), so that the
Rust tool node's overhead can be put beside theirs (ratio).

Peers (versions pinned by scripts/python-env.sh):
  langgraph_toolnode  langgraph.prebuilt.ToolNode (langgraph-prebuilt), stock
  saidex              saidex.langgraph.SaidexToolNode, defaults (no correction model,
                      feedback mode); it validates, then runs the calls on a stock ToolNode

Both are invoked outside a graph with the list-of-messages input `[AIMessage]` (which
returns a list of ToolMessages) and the config {"configurable": {"__pregel_runtime":
Runtime()}}: without a runtime in the config ToolNode raises "Missing required config
key 'N/A' for 'tools'". Modes: sync = node.invoke (the main figure), async =
node.ainvoke (each case runs in one event loop). The config carries no callbacks and
LangSmith tracing variables are removed from the environment.

Workload: two tools with trivial bodies, `add(a: int, b: int) -> int` and
`search_flights(origin, destination, date, cabin: Cabin enum, passengers: int 1..9,
max_price: float | None) -> str`; the AIMessage holds N valid calls with distinct ids,
alternating search_flights, add, search_flights, ... (so N=1 is one search_flights call).
`--dump-workload` prints the tools (OpenAI function format) and the calls as JSON, for the
Rust side to run the same message.

Timing: per case (peer, mode, N) the outputs are checked once (N ToolMessages, in call
order, status success, expected content), then warm-up for --warmup seconds, then
single invocations timed with time.perf_counter_ns for --seconds seconds (at least
--min-samples). The tool body alone (the N raw functions called directly with the
arguments the tool receives, in a loop) is timed separately and subtracted:
  body_us              median body time per call
  per_invoke_us_*      invocation time minus N * body_us (overhead per invocation)
  per_call_us_*        per_invoke_us_* / N (overhead per tool call)
The argument validation langchain-core does inside BaseTool.invoke counts as overhead
(the Rust node validates too). GC stays on (gc.collect() before each case).
This module deliberately has no `from __future__ import annotations`: with string
annotations langchain-core re-evaluates them (get_type_hints) on every tool call, which
makes the peers look slower than in the usual style.

Usage (with the venv from scripts/python-env.sh; bench/node.sh does both):
  .venv/bin/python bench/node_peers.py [--peer P]... [--mode sync|async]...
      [--calls 1,8,64] [--seconds 2.5] [--warmup 0.3] [--json] [--dump-workload]
  --json   one JSON object per (peer, mode, N) on stdout:
           {"peer","mode","calls","per_invoke_us_median","per_call_us_median",
            "per_call_us_p90","body_us"}; the human table then goes to stderr
Defaults keep each peer's run near 17 s (2 modes x 3 sizes x ~2.8 s).
"""

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from enum import Enum
from importlib.metadata import version
from typing import Annotated, Optional

for _var in ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
    os.environ.pop(_var, None)

try:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.prebuilt import ToolNode
    from langgraph.runtime import Runtime
    from pydantic import Field
except ImportError as e:  # pragma: no cover
    sys.exit(f"node_peers: {e} (run scripts/python-env.sh first)")

try:
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME
except ImportError:  # private module; the key has been this string since langgraph 1.0
    CONFIG_KEY_RUNTIME = "__pregel_runtime"


# --- workload ----------------------------------------------------------------------

class Cabin(str, Enum):
    ECONOMY = "economy"
    PREMIUM_ECONOMY = "premium_economy"
    BUSINESS = "business"
    FIRST = "first"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def search_flights(
    origin: Annotated[str, Field(description="IATA code of the departure airport")],
    destination: Annotated[str, Field(description="IATA code of the arrival airport")],
    date: Annotated[str, Field(description="departure date, YYYY-MM-DD")],
    cabin: Cabin = Cabin.ECONOMY,
    passengers: Annotated[int, Field(ge=1, le=9)] = 1,
    max_price: Optional[float] = None,
) -> str:
    """Search flights between two airports on a date."""
    return f"{origin}-{destination} {date} {cabin.value} x{passengers}"


TOOLS = [add, search_flights]
CABINS = list(Cabin)


def make_calls(n: int) -> list[dict]:
    calls = []
    for i in range(n):
        if i % 2 == 0:
            args = {"origin": "FRA", "destination": "JFK", "date": f"2025-12-{1 + i % 28:02d}",
                    "cabin": CABINS[i % 4].value, "passengers": 1 + i % 4}
            if i % 4 == 0:
                args["max_price"] = 850.0
            calls.append({"name": "search_flights", "args": args, "id": f"call_{i:03d}"})
        else:
            calls.append({"name": "add", "args": {"a": i, "b": 2 * i}, "id": f"call_{i:03d}"})
    return calls


def body_plan(calls: list[dict]) -> list[tuple]:
    """(raw function, kwargs as the tool body receives them) per call."""
    plan = []
    for c in calls:
        kw = dict(c["args"])
        if c["name"] == "search_flights":
            kw["cabin"] = Cabin(kw["cabin"])
            plan.append((search_flights.func, kw))
        else:
            plan.append((add.func, kw))
    return plan


def expected_contents(calls: list[dict]) -> list[str]:
    out = []
    for fn, kw in body_plan(calls):
        r = fn(**kw)
        out.append(r if isinstance(r, str) else json.dumps(r))
    return out


# --- peers -------------------------------------------------------------------------

def make_peers() -> dict:
    peers = {"langgraph_toolnode": lambda: ToolNode(TOOLS)}
    try:
        from saidex.langgraph import SaidexToolNode

        peers["saidex"] = lambda: SaidexToolNode(TOOLS)
    except ImportError as e:
        print(f"node_peers: saidex not importable ({e}); skipped", file=sys.stderr)
    return peers


def config() -> dict:
    return {"configurable": {CONFIG_KEY_RUNTIME: Runtime()}}


def check(out, calls: list[dict], peer: str, mode: str) -> None:
    want = expected_contents(calls)
    ok = (isinstance(out, list) and len(out) == len(calls)
          and all(isinstance(m, ToolMessage) for m in out))
    if ok:
        ok = all(m.tool_call_id == c["id"] and m.status == "success" and m.content == w
                 for m, c, w in zip(out, calls, want))
    if not ok:
        sys.exit(f"node_peers: {peer}/{mode} N={len(calls)}: unexpected output {out!r:.400}")


# --- timing ------------------------------------------------------------------------

def pct(sorted_vals: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    k = max(0, min(len(sorted_vals) - 1, round(q * (len(sorted_vals) - 1))))
    return sorted_vals[k]


def time_body(calls: list[dict], batches: int = 15, min_batch_ns: int = 2_000_000) -> float:
    """Median µs per call of the raw tool bodies."""
    plan = body_plan(calls)
    reps = 1
    while True:  # calibrate the batch so that timer resolution does not matter
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            for fn, kw in plan:
                fn(**kw)
        if time.perf_counter_ns() - t0 >= min_batch_ns:
            break
        reps *= 2
    per_call = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            for fn, kw in plan:
                fn(**kw)
        per_call.append((time.perf_counter_ns() - t0) / 1000 / (reps * len(plan)))
    per_call.sort()
    return pct(per_call, 0.5)


def time_sync(node, msg_in, cfg, warmup: float, seconds: float, min_samples: int) -> list[float]:
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        node.invoke(msg_in, cfg)
    gc.collect()
    samples = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(samples) < min_samples:
        t0 = time.perf_counter_ns()
        node.invoke(msg_in, cfg)
        samples.append((time.perf_counter_ns() - t0) / 1000)
    return samples


def time_async(node, msg_in, cfg, warmup: float, seconds: float, min_samples: int) -> list[float]:
    async def run():
        end = time.perf_counter() + warmup
        while time.perf_counter() < end:
            await node.ainvoke(msg_in, cfg)
        gc.collect()
        samples = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(samples) < min_samples:
            t0 = time.perf_counter_ns()
            await node.ainvoke(msg_in, cfg)
            samples.append((time.perf_counter_ns() - t0) / 1000)
        return samples

    return asyncio.run(run())


def run_case(peer: str, make, mode: str, n: int, args) -> dict:
    calls = make_calls(n)
    msg_in = [AIMessage(content="", tool_calls=calls)]
    node = make()
    cfg = config()
    out = node.invoke(msg_in, cfg) if mode == "sync" else asyncio.run(node.ainvoke(msg_in, cfg))
    check(out, calls, peer, mode)
    gc.collect()
    timer = time_sync if mode == "sync" else time_async
    samples = sorted(timer(node, msg_in, cfg, args.warmup, args.seconds, args.min_samples))
    body = time_body(calls)
    inv_med, inv_p90 = pct(samples, 0.5), pct(samples, 0.9)
    return {
        "peer": peer, "mode": mode, "calls": n,
        "per_invoke_us_median": round(inv_med - n * body, 2),
        "per_call_us_median": round((inv_med - n * body) / n, 2),
        "per_call_us_p90": round((inv_p90 - n * body) / n, 2),
        "body_us": round(body, 3),
        # for the human table only
        "_samples": len(samples), "_invoke_med": inv_med, "_invoke_p90": inv_p90,
    }


def table(rows: list[dict]) -> str:
    head = ("| peer | mode | calls | invokes | invoke median µs | invoke p90 µs | body µs/call "
            "| overhead µs/invoke | overhead µs/call median | overhead µs/call p90 |")
    lines = [head, "|" + " --- |" * 10]
    for r in rows:
        lines.append(
            f"| {r['peer']} | {r['mode']} | {r['calls']} | {r['_samples']} "
            f"| {r['_invoke_med']:,.1f} | {r['_invoke_p90']:,.1f} | {r['body_us']:.3f} "
            f"| {r['per_invoke_us_median']:,.1f} | {r['per_call_us_median']:,.1f} "
            f"| {r['per_call_us_p90']:,.1f} |")
    return "\n".join(lines)


def versions() -> str:
    parts = [f"python {sys.version.split()[0]}"]
    for dist in ("langgraph", "langgraph-prebuilt", "langchain-core", "pydantic", "saidex"):
        try:
            parts.append(f"{dist} {version(dist)}")
        except Exception:
            pass
    return ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", action="append", help="langgraph_toolnode, saidex (default: all)")
    ap.add_argument("--mode", action="append", choices=["sync", "async"], help="default: both")
    ap.add_argument("--calls", default="1,8,64", help="comma-separated N (default 1,8,64)")
    ap.add_argument("--seconds", type=float, default=2.5, help="measurement per case (default 2.5)")
    ap.add_argument("--warmup", type=float, default=0.3, help="warm-up per case (default 0.3)")
    ap.add_argument("--min-samples", type=int, default=30)
    ap.add_argument("--json", action="store_true", help="JSON lines on stdout, table on stderr")
    ap.add_argument("--dump-workload", action="store_true",
                    help="print the tools and the calls per N as JSON and exit")
    args = ap.parse_args()
    sizes = [int(x) for x in args.calls.split(",") if x.strip()]

    if args.dump_workload:
        json.dump({"tools": [convert_to_openai_tool(t) for t in TOOLS],
                   "calls": {str(n): make_calls(n) for n in sizes}}, sys.stdout, indent=1)
        print()
        return

    peers = make_peers()
    chosen = args.peer or list(peers)
    for p in chosen:
        if p not in peers:
            sys.exit(f"node_peers: unknown or unavailable peer {p!r} (have: {', '.join(peers)})")
    modes = args.mode or ["sync", "async"]
    human = sys.stderr if args.json else sys.stdout

    print(f"node_peers: {versions()}; {os.cpu_count()} cores", file=sys.stderr)
    rows = []
    for peer in chosen:
        t0 = time.perf_counter()
        for mode in modes:
            for n in sizes:
                r = run_case(peer, peers[peer], mode, n, args)
                rows.append(r)
                if args.json:
                    print(json.dumps({k: v for k, v in r.items() if not k.startswith("_")}), flush=True)
        print(f"node_peers: {peer}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(f"## Tool-node overhead per tool call (Python peers), {versions()}\n", file=human)
    print(table(rows), file=human)


if __name__ == "__main__":
    main()
