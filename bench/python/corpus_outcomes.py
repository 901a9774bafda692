#!/usr/bin/env python3
"""What three LangGraph tool nodes do with the external tool-call corpus, record by record.

Nodes (defaults, no correction model):
  toolmend  toolmend.langgraph.ToolNode
  stock     langgraph.prebuilt.ToolNode (langgraph-prebuilt)
  saidex    saidex.langgraph.SaidexToolNode (feedback mode)

Corpus: /work/shared/corpus/tool_calls_dev.jsonl (660 records, see its README.md; read in
place, never copied). Per record:

1. Tools. The record's JSON Schema becomes a LangChain tool whose body returns the
   arguments it received as JSON (`StructuredTool.from_function`). Two ways, --schemas:
     dict      args_schema = the JSON Schema dict (langchain-core 1.8.3 accepts it and
               does no validation: how MCP-adapter tools look)
     pydantic  args_schema = a pydantic model built from the JSON Schema (how `@tool`
               tools look): enum -> Literal, format date / date-time -> date / datetime,
               pattern, min/max, minItems, nested objects as models, optional fields
               `Optional[T] = None` unless the schema gives a default, extra="forbid"
               (every schema says additionalProperties: false). Other formats (email)
               stay str. pydantic's lax mode applies ("5" -> 5 in the tool).
   All nodes get the same 14 tools (one per tool name in the corpus).
2. Message. The raw argument text goes through langchain-core's own parser, as
   langchain-openai does: `parse_tool_call({"id", "function": {"name", "arguments":
   raw}}, return_id=True)`, and on failure `make_invalid_tool_call` — so valid JSON lands
   in `tool_calls` and broken JSON in `invalid_tool_calls`. JSON that parses to a
   non-object (double-encoded arguments: a string) would make AIMessage itself fail to
   build in a real app (pydantic rejects a str `args`); those records are fed as
   invalid_tool_calls and flagged `parser: non_object`.
3. Invocation: `node.invoke([AIMessage(id=..., ...)], {"configurable":
   {"__pregel_runtime": Runtime()}})`, outside a graph, one call id per record.
4. Outcome per record and node (the reference is what the tool body receives when the
   tool is invoked directly with `expected_arguments`; for dict tools that is
   `expected_arguments` itself, for pydantic tools the validated form, defaults filled):
     executed_ok     ran, with exactly the reference arguments (split: both calls)
     feedback        answered with error ToolMessage(s), nothing ran
     executed_wrong  ran with other arguments, or ran when the expected outcome is
                     feedback, or ran a truncated (lossy) record at all, or ran one call
                     of a split pair
     unanswered      the record's call id got no ToolMessage (or the node raised)
   "right" = executed_ok, or feedback where the corpus expects feedback or the record
   is lossy (truncated: the faithful answer is to ask for the whole call).
   Bars (the issue's): toolmend leaves 0 ids unanswered; toolmend runs nothing wrongly
   where saidex runs a truncated or merged call; toolmend executes more records
   correctly than saidex.

Rerun:  .venv/bin/python bench/python/corpus_outcomes.py [--corpus PATH]
            [--schemas dict,pydantic] [--out bench/results/python_corpus.json] [--details]
        (or bench/python/run.sh). Takes about 12 s on 2 cores (both schema kinds).
Prints tables per schema kind (overall, per group, the categories where toolmend is not
always right — all categories with --details — and the records where toolmend runs
wrongly or leaves an id unanswered); writes every per-record outcome as JSON to --out.
"""

import argparse
import datetime as dt
import json
import logging
import math
import os
import sys
import time
import warnings
from collections import Counter, defaultdict
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

for _var in ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
    os.environ.pop(_var, None)

from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langgraph.prebuilt import ToolNode as StockToolNode  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from pydantic import ConfigDict, Field, create_model  # noqa: E402
from pydantic_core import to_jsonable_python  # noqa: E402
from saidex.langgraph import SaidexToolNode  # noqa: E402

from toolmend.langgraph import ToolNode as ToolmendToolNode  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "tool_calls_dev.jsonl"
CONFIG = {"configurable": {"__pregel_runtime": Runtime()}}
MARK = "RAN "  # the tool bodies' answer: MARK + the arguments received, as JSON

NODES = {
    "toolmend": ToolmendToolNode,
    "stock": StockToolNode,
    "saidex": SaidexToolNode,
}
CLASSES = ("executed_ok", "feedback", "executed_wrong", "unanswered")

# --- tools --------------------------------------------------------------------------------


def _annotated(name: str, prop: dict) -> Any:
    """A JSON Schema property as a pydantic type (constraints in Annotated)."""
    t = prop.get("type")
    c: dict[str, Any] = {}
    if t == "string":
        if "enum" in prop:
            return Literal[tuple(prop["enum"])]
        fmt = prop.get("format")
        if fmt == "date":
            return dt.date
        if fmt == "date-time":
            return dt.datetime
        base = str
        if "pattern" in prop:
            c["pattern"] = prop["pattern"]
    elif t in ("integer", "number"):
        base = int if t == "integer" else float
        for js, py in (("minimum", "ge"), ("maximum", "le"), ("exclusiveMinimum", "gt"),
                       ("exclusiveMaximum", "lt")):
            if js in prop:
                c[py] = prop[js]
    elif t == "boolean":
        base = bool
    elif t == "array":
        base = list[_annotated(name + "_item", prop.get("items", {}))]
        if "minItems" in prop:
            c["min_length"] = prop["minItems"]
    elif t == "object":
        return pydantic_model(name, prop)
    else:
        base = Any
    return Annotated[base, Field(**c)] if c else base


def pydantic_model(name: str, schema: dict) -> type:
    required = set(schema.get("required", []))
    fields = {}
    for key, prop in schema.get("properties", {}).items():
        typ = _annotated(f"{name}_{key}", prop)
        extra = {"description": prop["description"]} if "description" in prop else {}
        if key in required:
            fields[key] = (typ, Field(..., **extra))
        elif "default" in prop:
            fields[key] = (typ, Field(prop["default"], **extra))
        else:
            fields[key] = (Optional[typ], Field(None, **extra))
    extra_mode = "forbid" if schema.get("additionalProperties") is False else "ignore"
    camel = "".join(p.capitalize() for p in name.split("_"))
    return create_model(camel, __config__=ConfigDict(extra=extra_mode), **fields)


def make_tool(spec: dict, kind: str) -> StructuredTool:
    def body(**kwargs: Any) -> str:
        return MARK + json.dumps(to_jsonable_python(kwargs), sort_keys=True, ensure_ascii=False)

    schema = spec["parameters"] if kind == "dict" else pydantic_model(spec["name"], spec["parameters"])
    return StructuredTool.from_function(func=body, name=spec["name"], description=spec["description"],
                                        args_schema=schema)


def reference(tool: StructuredTool, expected: dict) -> tuple[Any, str | None]:
    """What the tool body receives for the expected arguments (the tool's own validation
    applied), or the expected arguments and an error note when the tool refuses them."""
    try:
        out = tool.invoke({"type": "tool_call", "name": tool.name, "args": expected, "id": "ref"})
        return json.loads(out.content[len(MARK):]), None
    except Exception as e:  # the harness's schema conversion refused the expected value
        return expected, f"{type(e).__name__}: {str(e)[:200]}"


# --- messages and outcomes ----------------------------------------------------------------


def message_for(rec: dict, n: int) -> tuple[AIMessage, str, str]:
    """The AIMessage langchain-core's parser makes of the raw text; its call id; and how
    the parser took it (tool_calls / invalid / non_object)."""
    call_id = f"call_{n:04d}"
    raw = {"id": call_id, "type": "function",
           "function": {"name": rec["tool"]["name"], "arguments": rec["raw_arguments"]}}
    try:
        parsed = parse_tool_call(raw, return_id=True)
    except Exception as e:
        return (AIMessage(content="", id=f"ai-{n}", invalid_tool_calls=[make_invalid_tool_call(raw, str(e))]),
                call_id, "invalid")
    if not isinstance(parsed["args"], dict):
        err = f"arguments parsed to a JSON {type(parsed['args']).__name__}, not an object"
        return (AIMessage(content="", id=f"ai-{n}", invalid_tool_calls=[make_invalid_tool_call(raw, err)]),
                call_id, "non_object")
    return AIMessage(content="", id=f"ai-{n}", tool_calls=[parsed]), call_id, "tool_calls"


def same(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (3 == 3.0), booleans never equal to numbers,
    NaN equal to nothing."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return not (isinstance(a, float) and math.isnan(a)) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def drop_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [drop_nulls(x) for x in v]
    return v


def classify(rec: dict, refs: list, call_id: str, out: Any, error: str | None) -> dict:
    """One record's outcome for one node."""
    tms = [m for m in (out or []) if isinstance(m, ToolMessage)]
    ran = [json.loads(str(m.content)[len(MARK):]) for m in tms
           if m.status == "success" and str(m.content).startswith(MARK)]
    other_ok = [m for m in tms if m.status == "success" and not str(m.content).startswith(MARK)]
    fb = [m for m in tms if m.status == "error"]
    ids = Counter(m.tool_call_id for m in tms)
    res = {"ran": ran, "feedback": len(fb), "ids": sorted(ids),
           "feedback_text": [str(m.content)[:300] for m in fb]}
    if other_ok:  # a success without running the tool body: not expected from any node
        res["other_success"] = [str(m.content)[:200] for m in other_ok]
    if any(v > 1 for v in ids.values()):
        res["duplicate_answers"] = [i for i, v in ids.items() if v > 1]
    if error is not None or call_id not in ids:
        res["class"] = "unanswered"
        res["reason"] = f"node raised {error}" if error else "no ToolMessage for the call id"
        return res
    expected = rec["expected_outcome"]
    if not ran:
        res["class"] = "feedback"
        res["right"] = expected == "feedback" or rec["lossy"]
        return res
    res["class"] = "executed_wrong"
    if expected == "feedback":
        res["reason"] = "ran a call the corpus answers with feedback"
    elif rec["lossy"]:
        match = len(ran) == 1 and same(ran[0], refs[0])
        res["reason"] = "ran a truncated call (" + ("the corpus's best salvage" if match else "not even the best salvage") + ")"
    elif expected == "split":
        hits = sum(any(same(r, x) for x in refs) for r in ran)
        if len(ran) == 2 and same(ran[0], refs[0]) and same(ran[1], refs[1]):
            res["class"] = "executed_ok"
        elif len(ran) == 1:
            res["reason"] = "ran one call of a glued pair (" + ("one of the two" if hits else "a merged/other object") + ")"
        else:
            res["reason"] = f"ran {len(ran)} calls, {hits} of them expected"
    elif len(ran) == 1 and same(ran[0], refs[0]):
        res["class"] = "executed_ok"
    elif len(ran) == 1 and same(drop_nulls(ran[0]), drop_nulls(refs[0])):
        res["reason"] = "ran with other arguments: only null members differ (omitted vs null)"
    else:
        res["reason"] = "ran with other arguments" if len(ran) == 1 else f"ran {len(ran)} calls"
    res["right"] = res["class"] == "executed_ok"
    return res


# --- run ----------------------------------------------------------------------------------


def run_kind(kind: str, records: list[dict]) -> dict:
    specs = {}
    for r in records:
        specs.setdefault(r["tool"]["name"], r["tool"])
    tools = {name: make_tool(spec, kind) for name, spec in specs.items()}
    prepared = []
    for n, rec in enumerate(records):
        tool = tools[rec["tool"]["name"]]
        exp = rec["expected_arguments"]
        pairs = [reference(tool, e) for e in (exp if rec["expected_outcome"] == "split" else [exp])] \
            if rec["expected_outcome"] != "feedback" else []
        msg, call_id, parser = message_for(rec, n)
        prepared.append((rec, msg, call_id, parser, [p[0] for p in pairs], [p[1] for p in pairs if p[1]]))
    results = {}
    for node_name, cls in NODES.items():
        node = cls(list(tools.values()))
        t0 = time.perf_counter()
        per = []
        for rec, msg, call_id, parser, refs, ref_errors in prepared:
            out, err = None, None
            try:
                out = node.invoke([msg], CONFIG)
            except Exception as e:
                err = f"{type(e).__name__}: {str(e)[:200]}"
            res = classify(rec, refs, call_id, out, err)
            res.update(id=rec["id"], group=rec["group"], category=rec["category"], parser=parser)
            if ref_errors:
                res["reference_error"] = ref_errors
            per.append(res)
        results[node_name] = {"seconds": round(time.perf_counter() - t0, 2), "records": per}
    return results


def counts(per: list[dict]) -> dict:
    c = Counter(r["class"] for r in per)
    out = {k: c.get(k, 0) for k in CLASSES}
    out["right"] = sum(bool(r.get("right")) for r in per)
    out["calls_executed_ok"] = sum(len(r["ran"]) for r in per if r["class"] == "executed_ok")
    out["records"] = len(per)
    return out


def bars(res: dict) -> dict:
    tm, sx = res["toolmend"]["records"], res["saidex"]["records"]
    # saidex running a truncated or glued (concatenated) call with the wrong arguments
    risky = [(a, b) for a, b in zip(tm, sx) if b["class"] == "executed_wrong"
             and b["category"].startswith(("truncated", "concatenated"))]
    tm_c, sx_c = counts(tm), counts(sx)
    return {
        "toolmend_unanswered": tm_c["unanswered"],
        "toolmend_unanswered_ok": tm_c["unanswered"] == 0,
        "saidex_truncated_or_merged_runs": len(risky),
        "toolmend_wrong_on_those": [a["id"] for a, _ in risky if a["class"] == "executed_wrong"],
        "toolmend_wrong_on_those_ok": not any(a["class"] == "executed_wrong" for a, _ in risky),
        "executed_ok": {"toolmend": tm_c["executed_ok"], "saidex": sx_c["executed_ok"]},
        "executed_ok_more_than_saidex": tm_c["executed_ok"] > sx_c["executed_ok"],
    }


# --- report -------------------------------------------------------------------------------


def row(cells: list) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def print_kind(kind: str, res: dict, details: bool) -> None:
    nodes = list(res)
    print(f"\n## args_schema = {kind}\n")
    head = ["node", *CLASSES, "right", "calls run ok", "seconds"]
    print(row(head))
    print("| --- |" + " ---: |" * (len(head) - 1))
    for n in nodes:
        c = counts(res[n]["records"])
        print(row([n, *(c[k] for k in CLASSES), c["right"], c["calls_executed_ok"], res[n]["seconds"]]))

    print("\nPer group (ok / feedback / wrong / unanswered; right)\n")
    groups = sorted({r["group"] for r in res[nodes[0]]["records"]})
    print(row(["group", "records", *nodes]))
    print("| --- | ---: |" + " --- |" * len(nodes))
    for g in groups:
        cells = [g, sum(r["group"] == g for r in res[nodes[0]]["records"])]
        for n in nodes:
            c = counts([r for r in res[n]["records"] if r["group"] == g])
            cells.append(f"{c['executed_ok']} / {c['feedback']} / {c['executed_wrong']} / {c['unanswered']}; {c['right']}")
        print(row(cells))

    which = "All categories" if details else "Categories where toolmend is not always right"
    print(f"\n{which} (ok / feedback / wrong / unanswered)\n")
    print(row(["category", "group", "expected", *nodes]))
    print("| --- | --- | --- |" + " --- |" * len(nodes))
    by_cat = defaultdict(lambda: defaultdict(list))
    for n in nodes:
        for r in res[n]["records"]:
            by_cat[r["category"]][n].append(r)
    for cat, per_node in by_cat.items():
        if not details and all(r.get("right") for r in per_node["toolmend"]):
            continue
        first = per_node[nodes[0]][0]
        cells = [cat, first["group"], first.get("_expected", "")]
        for n in nodes:
            c = counts(per_node[n])
            cells.append(f"{c['executed_ok']} / {c['feedback']} / {c['executed_wrong']} / {c['unanswered']}")
        print(row(cells))

    bad = [r for r in res["toolmend"]["records"] if r["class"] in ("executed_wrong", "unanswered")]
    print(f"\ntoolmend: {len(bad)} records run wrongly or left unanswered")
    for r in bad[: None if details else 40]:
        ran = json.dumps(r["ran"], ensure_ascii=False)
        print(f"  {r['id']} [{r['parser']}] {r['class']}: {r.get('reason', '')}; ran {ran[:160]}")
    if not details and len(bad) > 40:
        print(f"  ... {len(bad) - 40} more (--details, or the JSON)")
    b = bars(res)
    print(f"\nBars ({kind}): toolmend unanswered = {b['toolmend_unanswered']} "
          f"({'ok' if b['toolmend_unanswered_ok'] else 'FAILS'}); "
          f"saidex runs {b['saidex_truncated_or_merged_runs']} truncated/merged calls, toolmend runs "
          f"{len(b['toolmend_wrong_on_those'])} of those wrongly ({'ok' if b['toolmend_wrong_on_those_ok'] else 'FAILS'}); "
          f"executed ok toolmend {b['executed_ok']['toolmend']} vs saidex {b['executed_ok']['saidex']} "
          f"({'ok' if b['executed_ok_more_than_saidex'] else 'FAILS'})")


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for dist in ("toolmend", "langgraph", "langgraph-prebuilt", "langchain-core", "pydantic", "saidex", "json-repair"):
        try:
            out[dist] = version(dist)
        except Exception:
            out[dist] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                    help=f"JSONL corpus (default {DEFAULT_CORPUS})")
    ap.add_argument("--schemas", default="dict,pydantic", help="dict, pydantic or both (default)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "python_corpus.json")
    ap.add_argument("--details", action="store_true",
                    help="all categories, and every toolmend record run wrongly (default: first 40)")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.schemas.split(",") if k.strip()]
    if any(k not in ("dict", "pydantic") for k in kinds):
        ap.error("--schemas takes dict and/or pydantic")

    # SAIDEX and LangGraph log a warning per repaired or dropped call; keep the tables readable.
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    t_start = time.perf_counter()
    records = [json.loads(line) for line in args.corpus.read_text().splitlines() if line.strip()]
    parser_counts = Counter(message_for(r, i)[2] for i, r in enumerate(records))
    print(f"corpus_outcomes: {args.corpus} ({len(records)} records; langchain-core's parser: "
          + ", ".join(f"{v} {k}" for k, v in sorted(parser_counts.items())) + ")")
    print("corpus_outcomes: " + ", ".join(f"{k} {v}" for k, v in versions().items()))

    all_results = {}
    for kind in kinds:
        res = run_kind(kind, records)
        for n in res:
            for r, rec in zip(res[n]["records"], records):
                r["_expected"] = rec["expected_outcome"] + (" (lossy)" if rec["lossy"] else "")
        all_results[kind] = res
        print_kind(kind, res, args.details)

    total = round(time.perf_counter() - t_start, 1)
    print(f"\ncorpus_outcomes: {total} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "meta": {"corpus": str(args.corpus), "records": len(records), "versions": versions(),
                 "parser": dict(parser_counts), "seconds": total},
        "kinds": {
            kind: {
                "bars": bars(res),
                "nodes": {n: {"seconds": res[n]["seconds"], "counts": counts(res[n]["records"]),
                              "by_group": {g: counts([r for r in res[n]["records"] if r["group"] == g])
                                           for g in sorted({r["group"] for r in res[n]["records"]})},
                              "by_category": {c: counts([r for r in res[n]["records"] if r["category"] == c])
                                              for c in sorted({r["category"] for r in res[n]["records"]})},
                              "records": [{k: v for k, v in r.items() if k != "_expected"}
                                          for r in res[n]["records"]]}
                          for n in res},
            }
            for kind, res in all_results.items()
        },
    }
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False, default=str) + "\n")
    print(f"corpus_outcomes: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
