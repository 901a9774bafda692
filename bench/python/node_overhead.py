#!/usr/bin/env python3
"""Per-call cost of three LangGraph tool nodes on identical inputs, and what each answered.

Nodes (all built with the same three tools, defaults otherwise):
  toolmend  toolmend.langgraph.ToolNode (a stock-ToolNode subclass that mends first)
  stock     langgraph.prebuilt.ToolNode (langgraph-prebuilt)
  saidex    saidex.langgraph.SaidexToolNode (no correction model: feedback mode)

Method (as in /work/shared/research/saidex.md section 5 and bench/node_peers.py): each
node is invoked directly, not in a compiled graph, with the list-of-messages input
`[AIMessage(id=..., ...)]` and the hand-made config
{"configurable": {"__pregel_runtime": Runtime()}}; no callbacks, LangSmith tracing
variables removed. Modes: sync = node.invoke, async = node.ainvoke (one event loop per
mode). Per (mode, case) every node is first calibrated (which also warms it up) to a
batch of back-to-back invocations lasting at least --batch-seconds; then --batches
rounds run one timed batch per node in turn (interleaved, so that drift of the noisy VM
hits all nodes alike), timed with time.perf_counter. Reported: the median over batches
of µs per invocation / number of calls in the message (µs per call), and the spread
(min..max of the batch figures). Tool bodies are trivial (well under 1 µs) and are not
subtracted.

Workloads (one AIMessage per case):
  valid      1 and 8 valid calls per message: bench/node_peers.py's tools and calls
             (search_flights with an enum and a bounded int, add), reused as they are.
  malformed  one call per message to get_weather(city, units enum, days int):
             invalid_tool_calls with broken JSON text (single quotes, trailing comma,
             code fence, <think> leak, truncated string, two glued objects) and
             tool_calls with schema defects ("5" for int, enum case, misnamed key).

Before timing, each case's output is checked once and recorded per node: how many
calls were executed (and with what), answered with error feedback, or left
unanswered (an input call id with no ToolMessage). The stock node leaves
invalid_tool_calls unanswered, so its malformed-call time is the cost of doing nothing.

Malformed calls are also reported beyond execution: a node's batch minus, in the same
round, the stock node executing exactly the calls that node ran (recorded from the tool
body), so that a node is not charged for running a repaired call and not credited for
running none. toolmend's engine alone (the Mender's resolution of the message: the one Rust call per
message into the core's driver, with its conversions and the mapping back) is timed as well.

Ratios: toolmend / stock on valid calls (bar <= 1.1x); saidex / toolmend on malformed
calls (bar >= 10x), end to end and beyond execution, per case and over the whole
malformed set (sum of per-case medians). Beyond execution is also given on the CPU time
of the invoking thread (time.thread_time: the event loop's thread on the async path),
paired the same way: informational, free of the executor threads' wake-up latencies that
make the wall-clock differences noisy on a small VM.

Tools: plain functions by default, which LangChain runs in an executor thread on the
async path (a hop of about 1 ms on a small VM, the same for every node, that hides the
mending); --async-tools gives each tool a native coroutine as well, as an async agent's
tools have, so that the async path measures the nodes and not the hop.

Rerun:  .venv/bin/python bench/python/node_overhead.py [--batches 9] [--batch-seconds 0.05]
            [--mode sync|async]... [--async-tools] [--out bench/results/python_node.json]
        (or bench/python/run.sh). Defaults take about 75 s on 2 cores.
Writes the table to stdout and the full results (rows, answers, ratios) as JSON to --out.
No `from __future__ import annotations`: langchain-core would re-evaluate string
annotations on every tool call (see bench/node_peers.py).
"""

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

# node_peers removes the LangSmith tracing variables at import and defines the valid workload.
from node_peers import CONFIG_KEY_RUNTIME, TOOLS as PEER_TOOLS, make_calls  # noqa: E402

from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool, tool  # noqa: E402
from langgraph.prebuilt import ToolNode as StockToolNode  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from saidex.langgraph import SaidexToolNode  # noqa: E402

from toolmend.langgraph import ToolNode as ToolmendToolNode  # noqa: E402


#: Arguments get_weather actually ran with, for the execution baselines (see run_mode).
EXECUTED: list[dict] = []


@tool
def get_weather(city: str, units: Literal["celsius", "fahrenheit"] = "celsius", days: int = 1) -> str:
    """Get the weather forecast for a city."""
    EXECUTED.append({"city": city, "units": units, "days": days})
    return f"{city}: sunny, {units}, {days}d"


TOOLS = [*PEER_TOOLS, get_weather]


def with_coroutine(t):
    """The same tool with a native coroutine beside its function: on the async path
    LangChain awaits it on the event loop instead of hopping to an executor thread
    (what an async agent's tools do; --async-tools)."""
    f = t.func

    async def run(**kwargs):
        return f(**kwargs)

    return StructuredTool.from_function(func=f, coroutine=run, name=t.name,
                                        description=t.description, args_schema=t.args_schema)


ASYNC_TOOLS = [with_coroutine(t) for t in TOOLS]
NODES = {
    "toolmend": lambda tools: ToolmendToolNode(tools),
    "stock": lambda tools: StockToolNode(tools),
    "saidex": lambda tools: SaidexToolNode(tools),
}

# --- workload ---------------------------------------------------------------------------

# name -> (raw argument text, what a faithful node does with it)
BROKEN_TEXT = {
    "single_quotes": ("{'city': 'Paris', 'days': 3}", "run city=Paris days=3"),
    "trailing_comma": ('{"city": "Paris", "days": 3,}', "run city=Paris days=3"),
    "code_fence": ('```json\n{"city": "Paris", "days": 3}\n```', "run city=Paris days=3"),
    "think_leak": ('<think>The user wants Paris, 3 days.</think>{"city": "Paris", "days": 3}',
                   "run city=Paris days=3"),
    "truncated_string": ('{"city": "Par', "feedback (cut off; do not run on 'Par')"),
    "glued_objects": ('{"city": "Paris"}{"city": "London"}', "run twice: Paris, London"),
}
# name -> (parsed arguments, what a faithful node does with them)
SCHEMA_DEFECTS = {
    "str_for_int": ({"city": "Paris", "days": "5"}, "run days=5"),
    "enum_case": ({"city": "Paris", "units": "Celsius"}, "run units=celsius"),
    "misnamed_key": ({"town": "Paris"}, "run city=Paris"),
}


def cases() -> list[dict]:
    out = []
    for n in (1, 8):
        out.append({"workload": "valid", "case": f"valid_{n}", "calls": n,
                    "message": AIMessage(content="", id=f"ai-valid-{n}", tool_calls=make_calls(n)),
                    "expect": f"run all {n}"})
    for name, (raw, expect) in BROKEN_TEXT.items():
        msg = AIMessage(content="", id=f"ai-{name}", invalid_tool_calls=[{
            "type": "invalid_tool_call", "name": "get_weather", "args": raw, "id": "call_m1",
            "error": "Function get_weather arguments are not valid JSON."}])
        out.append({"workload": "malformed", "case": name, "calls": 1, "message": msg,
                    "expect": expect, "source": "invalid_tool_calls"})
    for name, (args, expect) in SCHEMA_DEFECTS.items():
        msg = AIMessage(content="", id=f"ai-{name}",
                        tool_calls=[{"name": "get_weather", "args": args, "id": "call_m1"}])
        out.append({"workload": "malformed", "case": name, "calls": 1, "message": msg,
                    "expect": expect, "source": "tool_calls"})
    return out


def config() -> dict:
    return {"configurable": {CONFIG_KEY_RUNTIME: Runtime()}}


def answers(out, msg: AIMessage) -> dict:
    """What a node answered: executed / feedback / unanswered input ids, and the texts."""
    tms = [m for m in (out or []) if isinstance(m, ToolMessage)]
    ids = [c["id"] for c in msg.tool_calls] + [c["id"] for c in msg.invalid_tool_calls]
    answered = {m.tool_call_id for m in tms}
    return {
        "executed": sum(m.status == "success" for m in tms),
        "feedback": sum(m.status == "error" for m in tms),
        "unanswered": sum(i not in answered for i in ids),
        "results": [f"{m.status}: {str(m.content)[:70]}" for m in tms],
    }


def summary(a: dict) -> str:
    parts = [f"{a[k]} {k}" for k in ("executed", "feedback", "unanswered") if a[k]]
    ran = [r[len("success: "):] for r in a["results"] if r.startswith("success")]
    return ", ".join(parts) + (f" ({' | '.join(ran)})" if ran else "")


# --- timing -----------------------------------------------------------------------------
# An entry is (label, node, input). Every entry of a case is calibrated, then timed once
# per round, round after round, so that entries of one round ran under the same load.

def calibrate_sync(node, inp, cfg, batch_s: float) -> int:
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            node.invoke(inp, cfg)
        if time.perf_counter() - t0 >= batch_s:
            return reps
        reps *= 2


async def calibrate_async(node, inp, cfg, batch_s: float) -> int:
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            await node.ainvoke(inp, cfg)
        if time.perf_counter() - t0 >= batch_s:
            return reps
        reps *= 2


def time_entries_sync(entries: list, batches: int, batch_s: float) -> dict:
    """label -> (µs per invocation of each round, invocations per batch, CPU µs of the
    invoking thread per invocation of each round)."""
    cfg = config()
    reps = {label: calibrate_sync(n, inp, cfg, batch_s) for label, n, inp in entries}
    gc.collect()
    per_invoke = {label: [] for label, _, _ in entries}
    cpu = {label: [] for label, _, _ in entries}
    for _ in range(batches):
        for label, n, inp in entries:
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(reps[label]):
                n.invoke(inp, cfg)
            per_invoke[label].append((time.perf_counter() - t0) * 1e6 / reps[label])
            cpu[label].append((time.thread_time() - c0) * 1e6 / reps[label])
    return {label: (per_invoke[label], reps[label], cpu[label]) for label in per_invoke}


async def time_entries_async(entries: list, batches: int, batch_s: float) -> dict:
    cfg = config()
    reps = {label: await calibrate_async(n, inp, cfg, batch_s) for label, n, inp in entries}
    gc.collect()
    per_invoke = {label: [] for label, _, _ in entries}
    cpu = {label: [] for label, _, _ in entries}
    for _ in range(batches):
        for label, n, inp in entries:
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(reps[label]):
                await n.ainvoke(inp, cfg)
            per_invoke[label].append((time.perf_counter() - t0) * 1e6 / reps[label])
            cpu[label].append((time.thread_time() - c0) * 1e6 / reps[label])
    return {label: (per_invoke[label], reps[label], cpu[label]) for label in per_invoke}


def baseline_message(executed: list[dict]) -> AIMessage:
    """The calls a node ran, as valid calls: what the stock node spends executing them."""
    calls = [{"name": "get_weather", "args": kw, "id": f"call_b{i}"} for i, kw in enumerate(executed)]
    return AIMessage(content="", id="ai-baseline", tool_calls=calls)


def entries_for(c: dict, nodes: dict, ran: dict) -> list:
    """The nodes on the case's message, plus for a malformed case one execution baseline
    per distinct set of calls the nodes ran (the stock node running exactly those)."""
    entries = [(p, n, [c["message"]]) for p, n in nodes.items()]
    if c["workload"] == "malformed":
        for sig in sorted({json.dumps(ran[p], sort_keys=True) for p in nodes if ran[p]}):
            entries.append((f"exec:{sig}", nodes["stock"], [baseline_message(json.loads(sig))]))
    return entries


def run_mode(mode: str, nodes: dict, all_cases: list[dict], args) -> tuple[list[dict], dict]:
    """Checks and times every case in one mode; returns the rows and the answers per
    (case, node)."""
    rows, seen = [], {}

    def record(c, p, out):
        seen[(c["case"], p)] = {**answers(out, c["message"]), "ran": list(EXECUTED)}

    async def run_async():
        for c in all_cases:
            for p, n in nodes.items():
                EXECUTED.clear()
                record(c, p, await n.ainvoke([c["message"]], config()))
            ran = {p: seen[(c["case"], p)]["ran"] for p in nodes}
            timed = await time_entries_async(entries_for(c, nodes, ran), args.batches, args.batch_seconds)
            rows.extend(make_rows(mode, c, timed, ran))

    if mode == "sync":
        for c in all_cases:
            for p, n in nodes.items():
                EXECUTED.clear()
                record(c, p, n.invoke([c["message"]], config()))
            ran = {p: seen[(c["case"], p)]["ran"] for p in nodes}
            timed = time_entries_sync(entries_for(c, nodes, ran), args.batches, args.batch_seconds)
            rows.extend(make_rows(mode, c, timed, ran))
    else:
        asyncio.run(run_async())
    EXECUTED.clear()
    return rows, seen


def make_rows(mode: str, c: dict, timed: dict, ran: dict) -> list[dict]:
    rows = []
    for p in NODES:
        samples, reps, cpu = timed[p]
        per_call = sorted(s / c["calls"] for s in samples)
        row = {
            "node": p, "mode": mode, "workload": c["workload"], "case": c["case"],
            "calls": c["calls"], "us_per_call": round(statistics.median(per_call), 2),
            "us_per_call_min": round(per_call[0], 2), "us_per_call_max": round(per_call[-1], 2),
            "batches": len(samples), "invokes_per_batch": reps,
        }
        if c["workload"] == "malformed":
            # Beyond execution: this node's batch minus, in the same round, the stock
            # node executing the very calls this node ran (0 when it ran none).
            # The same on the CPU time of the invoking thread (the event loop's on the async
            # path): what the node costs that thread, without the wake-up latencies of the
            # executor's threads that make the wall-clock figures noisy.
            if ran[p]:
                base, _, base_cpu = timed[f"exec:{json.dumps(ran[p], sort_keys=True)}"]
                diffs = sorted((s - b) / c["calls"] for s, b in zip(samples, base))
                cpu_diffs = sorted((s - b) / c["calls"] for s, b in zip(cpu, base_cpu))
                row["exec_baseline_us"] = round(statistics.median(base), 2)
            else:
                diffs = per_call
                cpu_diffs = sorted(s / c["calls"] for s in cpu)
                row["exec_baseline_us"] = 0.0
            row["beyond_exec_us_per_call"] = round(statistics.median(diffs), 2)
            row["cpu_beyond_exec_us_per_call"] = round(statistics.median(cpu_diffs), 2)
        rows.append(row)
    return rows


def time_engine(node, all_cases: list[dict], batch_s: float, batches: int = 5) -> dict:
    """µs per call of toolmend's engine alone: the Mender's resolution of the case's
    message (one Rust call into the core's driver, `Resolver.resolve`, and the mapping of
    its answer to LangGraph's calls; a package before the driver: `plan_message` and
    `finish_work`), without LangGraph's execution, divided by the calls in the message."""
    m = node._mender
    out = {}
    for c in all_cases:
        msg = c["message"]

        if hasattr(m, "resolve_message"):
            def plan():
                m.resolve_message([msg], 0)
        else:
            def plan():
                p, work = m.plan_message([msg], 0)
                m.finish_work(p, work)

        reps = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(reps):
                plan()
            if time.perf_counter() - t0 >= batch_s:
                break
            reps *= 2
        per = []
        for _ in range(batches):
            t0 = time.perf_counter()
            for _ in range(reps):
                plan()
            per.append((time.perf_counter() - t0) * 1e6 / (reps * c["calls"]))
        out[c["case"]] = round(statistics.median(per), 2)
    return out


# --- report -----------------------------------------------------------------------------

def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for dist in ("toolmend", "langgraph", "langgraph-prebuilt", "langchain-core", "pydantic", "saidex",
                 "json-repair"):
        try:
            out[dist] = version(dist)
        except Exception:
            out[dist] = None
    return out


def _ratio(a: float, b: float, nd: int = 2):
    return round(a / b, nd) if b > 0 else None


def ratios(rows: list[dict], modes: list[str], all_cases: list[dict]) -> dict:
    by = {(r["mode"], r["case"], r["node"]): r for r in rows}
    malformed = [c["case"] for c in all_cases if c["workload"] == "malformed"]
    out = {"toolmend_over_stock_valid": {}, "saidex_over_toolmend_malformed": {},
           "saidex_over_toolmend_malformed_beyond_exec": {},
           "saidex_over_toolmend_malformed_cpu_beyond_exec": {}}
    for m in modes:
        for c in ("valid_1", "valid_8"):
            out["toolmend_over_stock_valid"][f"{m}/{c}"] = _ratio(
                by[(m, c, "toolmend")]["us_per_call"], by[(m, c, "stock")]["us_per_call"], 3)
        for key, field in (("saidex_over_toolmend_malformed", "us_per_call"),
                           ("saidex_over_toolmend_malformed_beyond_exec", "beyond_exec_us_per_call"),
                           ("saidex_over_toolmend_malformed_cpu_beyond_exec", "cpu_beyond_exec_us_per_call")):
            for c in malformed:
                out[key][f"{m}/{c}"] = _ratio(by[(m, c, "saidex")][field], by[(m, c, "toolmend")][field])
            out[key][f"{m}/all"] = _ratio(sum(by[(m, c, "saidex")][field] for c in malformed),
                                          sum(by[(m, c, "toolmend")][field] for c in malformed))
    return out


def _x(v, nd=1) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}x"


def print_tables(rows: list[dict], modes: list[str], all_cases: list[dict], answers_by: dict,
                 rat: dict, engine: dict) -> None:
    by = {(r["mode"], r["case"], r["node"]): r for r in rows}
    nodes = list(NODES)
    malformed = [c["case"] for c in all_cases if c["workload"] == "malformed"]

    print("End to end: µs per call (invocation / calls in the message), median over batches\n")
    head = ["case"] + [f"{n} {m}" for m in modes for n in nodes]
    head += [f"toolmend/stock {m}" for m in modes] + [f"saidex/toolmend {m}" for m in modes]
    print("| " + " | ".join(head) + " |")
    print("| --- |" + " ---: |" * (len(head) - 1))
    for c in all_cases:
        cells = [c["case"]] + [f"{by[(m, c['case'], n)]['us_per_call']:,.1f}" for m in modes for n in nodes]
        cells += [_x(rat["toolmend_over_stock_valid"].get(f"{m}/{c['case']}"), 2)
                  if c["workload"] == "valid" else "" for m in modes]
        cells += [_x(rat["saidex_over_toolmend_malformed"].get(f"{m}/{c['case']}"))
                  if c["workload"] == "malformed" else "" for m in modes]
        print("| " + " | ".join(cells) + " |")
    cells = ["malformed, sum of 9"]
    cells += [f"{sum(by[(m, c, n)]['us_per_call'] for c in malformed):,.1f}" for m in modes for n in nodes]
    cells += [""] * len(modes) + [_x(rat["saidex_over_toolmend_malformed"][f"{m}/all"]) for m in modes]
    print("| " + " | ".join(cells) + " |")

    head = ["case"] + [f"{n} {m}" for m in modes for n in nodes] + [f"saidex/toolmend {m}" for m in modes]
    for title, field, key in (
        ("Malformed calls beyond execution: µs per call minus what the stock node spends "
         "executing the calls that node ran (paired per round; 0 executed = whole time)",
         "beyond_exec_us_per_call", "saidex_over_toolmend_malformed_beyond_exec"),
        ("The same on the CPU time of the invoking thread (time.thread_time; the event loop's "
         "thread on the async path), µs per call",
         "cpu_beyond_exec_us_per_call", "saidex_over_toolmend_malformed_cpu_beyond_exec"),
    ):
        print(f"\n{title}\n")
        print("| " + " | ".join(head) + " |")
        print("| --- |" + " ---: |" * (len(head) - 1))
        for c in malformed:
            cells = [c] + [f"{by[(m, c, n)][field]:,.1f}" for m in modes for n in nodes]
            cells += [_x(rat[key][f"{m}/{c}"]) for m in modes]
            print("| " + " | ".join(cells) + " |")
        cells = ["sum of 9"]
        cells += [f"{sum(by[(m, c, n)][field] for c in malformed):,.1f}" for m in modes for n in nodes]
        cells += [_x(rat[key][f"{m}/all"]) for m in modes]
        print("| " + " | ".join(cells) + " |")

    print("\ntoolmend's engine alone (the Mender's resolution of each message: the one Rust "
          "call into the core's driver, conversions and mapping; no execution), µs per call: "
          + ", ".join(f"{c} {v:,.1f}" for c, v in engine.items()))

    print(f"\nWhat each node answered ({modes[0]}; other modes only listed where they differ)\n")
    print("| case | expected | " + " | ".join(nodes) + " |")
    print("| --- |" + " --- |" * (1 + len(nodes)))
    for c in all_cases:
        if c["workload"] == "malformed":
            print(f"| {c['case']} ({c['source']}) | {c['expect']} | "
                  + " | ".join(summary(answers_by[(modes[0], c['case'], n)]) for n in nodes) + " |")
    for m in modes[1:]:
        for c in all_cases:
            for n in nodes:
                a, b = answers_by[(modes[0], c["case"], n)], answers_by[(m, c["case"], n)]
                if summary(a) != summary(b):
                    print(f"  differs: {c['case']} {n}: {modes[0]} {summary(a)} / {m} {summary(b)}")

    print("\nBars:")
    for k, v in rat["toolmend_over_stock_valid"].items():
        print(f"  toolmend / stock, {k}: {_x(v, 2)}  {'ok' if v is not None and v <= 1.1 else 'OVER the 1.1x bar'}")
    for key, what in (("saidex_over_toolmend_malformed", "end to end"),
                      ("saidex_over_toolmend_malformed_beyond_exec", "beyond execution")):
        for m in modes:
            v = rat[key][f"{m}/all"]
            low = [k.split("/")[1] for k, x in rat[key].items()
                   if k.startswith(m + "/") and not k.endswith("/all") and (x is None or x < 10)]
            print(f"  saidex / toolmend, malformed {m}, {what} (sum of 9): {_x(v)}  "
                  f"{'ok' if v is not None and v >= 10 else 'UNDER the 10x bar'}"
                  + (f"; cases under 10x: {', '.join(low)}" if low else ""))
    for m in modes:
        v = rat["saidex_over_toolmend_malformed_cpu_beyond_exec"][f"{m}/all"]
        print(f"  (informational) saidex / toolmend, malformed {m}, CPU of the invoking thread beyond "
              f"execution (sum of 9): {_x(v)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=9, help="timed batches per node and case (default 9)")
    ap.add_argument("--batch-seconds", type=float, default=0.05,
                    help="calibrated length of one batch (default 0.05 s)")
    ap.add_argument("--mode", action="append", choices=["sync", "async"], help="default: both")
    ap.add_argument("--async-tools", action="store_true",
                    help="tools with a native coroutine (no executor-thread hop on the async path); "
                         "default out: bench/results/python_node_async_tools.json")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    tools = ASYNC_TOOLS if args.async_tools else TOOLS
    if args.out is None:
        name = "python_node_async_tools.json" if args.async_tools else "python_node.json"
        args.out = ROOT / "bench" / "results" / name
    modes = args.mode or ["sync", "async"]

    t_start = time.perf_counter()
    all_cases = cases()
    rows, answers_by, seconds = [], {}, {}
    for m in modes:
        t0 = time.perf_counter()
        nodes = {p: make(tools) for p, make in NODES.items()}  # fresh nodes per mode
        r, seen = run_mode(m, nodes, all_cases, args)
        rows += r
        answers_by.update({(m, c, n): a for (c, n), a in seen.items()})
        seconds[m] = round(time.perf_counter() - t0, 1)

    engine = time_engine(NODES["toolmend"](tools), all_cases, args.batch_seconds)
    rat = ratios(rows, modes, all_cases)
    meta = {"versions": versions(), "cores": os.cpu_count(), "batches": args.batches,
            "batch_seconds": args.batch_seconds, "seconds": seconds,
            "tools": "coroutine" if args.async_tools else "function",
            "total_seconds": round(time.perf_counter() - t_start, 1),
            "input": "[AIMessage] list, config {'configurable': {'__pregel_runtime': Runtime()}}"}
    print(f"node_overhead: {', '.join(f'{k} {v}' for k, v in meta['versions'].items())}; "
          f"{meta['cores']} cores; {args.batches} batches of >= {args.batch_seconds} s\n")
    print_tables(rows, modes, all_cases, answers_by, rat, engine)
    print(f"\nnode_overhead: {meta['total_seconds']} s ({', '.join(f'{m} {s} s' for m, s in seconds.items())})")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "meta": meta,
        "rows": rows,
        "answers": [{"mode": m, "case": c, "node": n, **a} for (m, c, n), a in answers_by.items()],
        "cases": [{k: v for k, v in c.items() if k != "message"}
                  | {"message": {"tool_calls": c["message"].tool_calls,
                                 "invalid_tool_calls": c["message"].invalid_tool_calls}}
                  for c in all_cases],
        "ratios": rat,
        "toolmend_engine_us_per_call": engine,
        "bars": {
            "toolmend_over_stock_valid_max": max(rat["toolmend_over_stock_valid"].values()),
            "toolmend_over_stock_valid_ok": all(v <= 1.1 for v in rat["toolmend_over_stock_valid"].values()),
            **{f"{key}_ok": all((rat[key][f"{m}/all"] or 0) >= 10 for m in modes)
               for key in ("saidex_over_toolmend_malformed", "saidex_over_toolmend_malformed_beyond_exec")},
        },
    }
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"node_overhead: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
