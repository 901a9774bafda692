"""One pipeline: the Python package plans every message as the Rust core does.

The cases of ``tests/equivalence/cases.jsonl`` (the same ones the Rust fronts are held to
by ``crates/toolmend-cli/tests/it/equivalence.rs``) go through ``toolmend.langgraph.ToolNode``
and through ``toolmend mend`` (the core plan, as the CLI runs it); both must give the same
call ids, names, arguments, dispositions (ran or answered with feedback) and remaining
content. LangChain splits a message's calls into ``tool_calls`` and ``invalid_tool_calls``,
so calls are compared by id, not by position.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, ToolMessage, convert_to_messages
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from langchain_core.tools import StructuredTool

from langgraph.runtime import Runtime

from toolmend.langgraph import ToolNode

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = [json.loads(line) for line in (ROOT / "tests/equivalence/cases.jsonl").read_text().splitlines() if line.strip()]
CONFIG = {"configurable": {"__pregel_runtime": Runtime()}}


def _binary() -> pathlib.Path:
    for candidate in (os.environ.get("TOOLMEND_BIN"), ROOT / "target/release/toolmend", ROOT / "target/debug/toolmend"):
        if candidate and pathlib.Path(candidate).exists():
            return pathlib.Path(candidate)
    raise AssertionError("no toolmend binary: run `cargo build --release -p toolmend-cli` (scripts/test does)")


def _core_plans() -> list[dict]:
    lines = "".join(
        json.dumps({"message": c["message"], "tools": c["tools"], "history": c["history"]}) + "\n" for c in CASES
    )
    out = subprocess.run(
        [str(_binary()), "mend", "--format", "json"],
        input=lines.encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    reports = [json.loads(line) for line in out.splitlines()]
    return [r for r in reports if "summary" not in r]


def _args(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _expected(report: dict) -> tuple[dict, str | None]:
    disposition = {c["id"]: c["disposition"] for c in report["calls"] if c.get("id")}
    msg = report["message"]
    calls = {
        tc["id"]: (tc["function"]["name"], _args(tc["function"]["arguments"]), disposition[tc["id"]])
        for tc in msg.get("tool_calls") or []
    }
    content = msg.get("content") or None
    return calls, content


def _tools(defs: list[dict]) -> list[StructuredTool]:
    def make(name: str):
        def run(**kwargs) -> str:
            return "ok"

        return StructuredTool.from_function(
            run, name=name, description=f["description"], args_schema=f["parameters"]
        )

    tools = []
    for d in defs:
        f = d["function"]
        tools.append(make(f["name"]))
    return tools


def _ai_message(d: dict) -> AIMessage:
    """An OpenAI assistant message as ``langchain_openai`` reads it: calls whose arguments
    parse go to ``tool_calls``, the others to ``invalid_tool_calls``."""
    tool_calls, invalid = [], []
    for raw in d.get("tool_calls") or []:
        try:
            tool_calls.append(parse_tool_call(raw, return_id=True))
        except OutputParserException as e:
            invalid.append(make_invalid_tool_call(raw, str(e)))
    return AIMessage(
        content=d.get("content") or "", tool_calls=tool_calls, invalid_tool_calls=invalid, id="ai-under-test"
    )


def _python(case: dict) -> tuple[dict, str | None]:
    history = convert_to_messages(case["history"])
    ai = _ai_message(case["message"])
    node = ToolNode(_tools(case["tools"]))
    out = node.invoke({"messages": [*history, ai]}, CONFIG)
    messages = out["messages"]
    sanitized = next((m for m in messages if isinstance(m, AIMessage)), ai)
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    calls = {}
    for tc in sanitized.tool_calls:
        r = results.get(tc["id"])
        disposition = "feedback" if r is None or r.status == "error" else "executed"
        calls[tc["id"]] = (tc["name"], tc["args"], disposition)
    for tc in sanitized.invalid_tool_calls:
        calls[tc["id"]] = (tc["name"], _args(tc["args"]), "feedback")
    content = sanitized.content if isinstance(sanitized.content, str) else None
    return calls, content or None


PLANS = None


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_the_python_package_plans_as_the_core(index: int) -> None:
    global PLANS
    if PLANS is None:
        PLANS = _core_plans()
    assert len(PLANS) == len(CASES)
    expected = _expected(PLANS[index])
    got = _python(CASES[index])
    assert got == expected, CASES[index]["name"]


GUARDED = [c for c in CASES if "guard" in c]


def _guard(table: dict):
    """The gateway's ``[guard]`` table as the Python package takes it: the rules, and
    (for a shared store) a ``Guard`` with its fail mode and Redis URL."""
    from toolmend import Guard

    keep = {"store", "redis_url", "fail", "timeout_ms", "on_flood", "session_from", "max_keys", "max_re_asks"}
    rules = {k: v for k, v in table.items() if k not in keep}
    if table.get("store") != "redis":
        return rules
    return Guard(rules, fail=table.get("fail", "open"), timeout_ms=table.get("timeout_ms", 20), redis_url=table["redis_url"])


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("index", range(len(GUARDED)), ids=[c["name"] for c in GUARDED])
def test_the_python_package_guards_as_every_front(index: int, asynchronous: bool) -> None:
    # The guard cases: each call's id, tool and outcome, as the Rust node and the gateway
    # give them (crates/toolmend-cli/tests/it/equivalence.rs holds those to `expect`).
    import asyncio

    case = GUARDED[index]
    stats: list[dict] = []
    node = ToolNode(_tools(case["tools"]), guard=_guard(case["guard"]), on_stats=stats.append)
    config = {"configurable": {"__pregel_runtime": Runtime()}}
    if case.get("session", True):
        config["configurable"]["thread_id"] = f"eq-py-{index}-{asynchronous}"
    state = {"messages": [*convert_to_messages(case["history"]), _ai_message(case["message"])]}
    if asynchronous:
        asyncio.run(node.ainvoke(state, config))
    else:
        node.invoke(state, config)
    # By id: LangChain puts a call whose arguments do not parse in invalid_tool_calls,
    # after the others, so the records' order is not the message's.
    got = {c["tool_call_id"]: (c["tool"], c["outcome"]) for c in stats[-1]["calls"]}
    assert got == {i: (tool, outcome) for i, tool, outcome in case["expect"]}, case["name"]


CORRECTED = [c for c in CASES if "correct" in c]


class _Corrector:
    """A correction model that answers every request with the case's arguments (JSON
    mode), as the Rust fronts' scripted corrector does; records the prompts."""

    def __init__(self, answer: str):
        self.answer = answer
        self.prompts: list[str] = []

    def invoke(self, prompt):
        self.prompts.append(prompt)
        return AIMessage(self.answer)

    async def ainvoke(self, prompt):
        import asyncio

        await asyncio.sleep(0)  # an answer that really awaits
        return self.invoke(prompt)


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("index", range(len(CORRECTED)), ids=[c["name"] for c in CORRECTED])
def test_the_python_package_corrects_as_every_front(index: int, asynchronous: bool) -> None:
    # The correction cases: the same outcome per id as the Rust node and the gateway
    # (crates/toolmend-cli/tests/it/equivalence.rs), the corrected arguments the answer's,
    # one `arguments_corrected` fix on a corrected call.
    import asyncio

    case = CORRECTED[index]
    stats: list[dict] = []
    model = _Corrector(case["correct"])
    node = ToolNode(
        _tools(case["tools"]), correction_model=model, correction_mode="json",
        max_correction_retries=1, on_stats=stats.append,
    )
    state = {"messages": [*convert_to_messages(case["history"]), _ai_message(case["message"])]}
    out = asyncio.run(node.ainvoke(state, CONFIG)) if asynchronous else node.invoke(state, CONFIG)
    calls = stats[-1]["calls"]
    got = {c["tool_call_id"]: (c["tool"], c["outcome"]) for c in calls}
    assert got == {i: (tool, outcome) for i, tool, outcome in case["expect"]}, case["name"]
    asked = [i for i, _, outcome in case["expect"] if outcome != "executed"]
    assert len(model.prompts) == len(asked), case["name"]
    sanitized = next((m for m in out["messages"] if isinstance(m, AIMessage)), None)
    for c in calls:
        kinds = [f["kind"] for f in c["fixes"]]
        assert kinds.count("arguments_corrected") == (c["outcome"] == "corrected"), case["name"]
        if c["outcome"] == "corrected":
            args = {tc["id"]: tc["args"] for tc in sanitized.tool_calls}
            assert args[c["tool_call_id"]] == json.loads(case["correct"]), case["name"]
