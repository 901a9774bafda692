"""toolmend.langgraph.ToolNode with real LangGraph: every behaviour it adds to the stock
node, and the stock node's failure modes shown fixed."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState
from langgraph.prebuilt import ToolNode as StockToolNode
from langgraph.runtime import Runtime
from langgraph.types import Send

from toolmend.langgraph import (
    ToolCallValidationError,
    ToolNode,
    UnresolvedToolCall,
    ValidatorContext,
    tools_condition,
)

CONFIG = {"configurable": {"__pregel_runtime": Runtime()}}


@tool
def get_weather(city: str, units: Literal["celsius", "fahrenheit"] = "celsius", days: int = 1) -> str:
    """Weather for a city."""
    return f"{city}: 21 {units}, {days} day(s)"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def whoami(name: str, state: Annotated[dict, InjectedState]) -> str:
    """Greets; sees the graph state."""
    return f"{name} ({len(state['messages'])} messages)"


TOOLS = [get_weather, add, whoami]


def answered_once(messages: list[BaseMessage]) -> None:
    """Every call id of every AIMessage is answered by exactly one ToolMessage, and every
    ToolMessage answers a call: what providers require of a history."""
    calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    calls += [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.invalid_tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(results), (calls, results)
    assert len(set(calls)) == len(calls), calls


def run(node, message: AIMessage, history: list[BaseMessage] | None = None) -> list[Any]:
    return node.invoke([*(history or [HumanMessage("hi")]), message], config=CONFIG)


def tool_messages(out: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out if isinstance(m, ToolMessage)}


def sanitized(out: list[Any]) -> AIMessage:
    (ai,) = [m for m in out if isinstance(m, AIMessage)]
    return ai


# ---- the stock node's failure modes, fixed ---------------------------------------------


def test_invalid_tool_calls_are_repaired_and_run_where_the_stock_node_answers_nothing():
    msg = AIMessage(
        "",
        id="ai1",
        invalid_tool_calls=[
            {"name": "get_weather", "args": "{'city': 'Paris', 'days': 2,}", "id": "c1", "error": "bad json", "type": "invalid_tool_call"},
            {"name": "add", "args": '<think>sum</think>```json\n{"a": 1, "b": 2}\n```', "id": "c2", "error": "bad json", "type": "invalid_tool_call"},
        ],
    )
    stock = StockToolNode(TOOLS).invoke([HumanMessage("hi"), msg], config=CONFIG)
    assert stock == []  # both ids unanswered: the next provider request fails

    out = run(ToolNode(TOOLS), msg)
    results = tool_messages(out)
    assert results["c1"].content == "Paris: 21 celsius, 2 day(s)"
    assert results["c2"].content == "3"
    # The history keeps the mended calls (same message id, valid JSON arguments).
    ai = sanitized(out)
    assert ai.id == "ai1" and ai.invalid_tool_calls == []
    assert [c["args"] for c in ai.tool_calls] == [{"city": "Paris", "days": 2}, {"a": 1, "b": 2}]
    answered_once([HumanMessage("hi"), ai, *results.values()])


def test_duplicate_missing_and_already_answered_ids():
    msg = AIMessage(
        "",
        id="ai1",
        tool_calls=[
            {"name": "add", "args": {"a": 1, "b": 1}, "id": "dup"},
            {"name": "add", "args": {"a": 2, "b": 2}, "id": "dup"},
            {"name": "add", "args": {"a": 3, "b": 3}, "id": "done"},
        ],
    )
    # The stock node runs "dup" twice under one id, and "done" again.
    stock = StockToolNode(TOOLS).invoke([HumanMessage("hi"), msg, ToolMessage("6", tool_call_id="done")], config=CONFIG)
    assert [m.tool_call_id for m in stock] == ["dup", "dup", "done"]

    out = ToolNode(TOOLS).invoke([HumanMessage("hi"), msg, ToolMessage("6", tool_call_id="done")], config=CONFIG)
    results = tool_messages(out)
    assert set(results) == {"dup", "dup_2"}
    assert results["dup"].content == "2" and results["dup_2"].content == "4"
    ai = sanitized(out)
    assert [c["id"] for c in ai.tool_calls] == ["dup", "dup_2", "done"]
    answered_once([HumanMessage("hi"), ai, ToolMessage("6", tool_call_id="done"), *results.values()])


def test_a_call_without_id_gets_one_instead_of_crashing_the_graph():
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": None}])
    with pytest.raises(TypeError):
        StockToolNode(TOOLS).invoke([HumanMessage("hi"), msg], config=CONFIG)
    out = run(ToolNode(TOOLS), msg)
    (result,) = tool_messages(out).values()
    assert result.content == "3"
    assert sanitized(out).tool_calls[0]["id"] == result.tool_call_id


# ---- mending ------------------------------------------------------------------------------


def test_schema_coercions_run_the_call_and_are_recorded():
    events: list[dict] = []
    node = ToolNode(TOOLS, on_stats=events.append)
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "get_weather", "args": {"town": "Oslo", "units": "Celsius", "days": "3"}, "id": "c1"}])
    out = run(node, msg)
    assert tool_messages(out)["c1"].content == "Oslo: 21 celsius, 3 day(s)"
    assert sanitized(out).tool_calls[0]["args"] == {"city": "Oslo", "units": "celsius", "days": 3}
    kinds = [f["kind"] for f in events[0]["calls"][0]["fixes"]]
    assert {"key_renamed", "enum_case_fixed", "string_to_integer"} <= set(kinds)
    assert node.stats["fix:key_renamed"] == 1


def test_a_valid_call_is_passed_through_untouched():
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}])
    out = run(ToolNode(TOOLS), msg)
    assert out == [ToolMessage("3", name="add", tool_call_id="c1")]  # no AIMessage rewrite


def test_a_missing_required_value_is_feedback_not_an_invention():
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "get_weather", "args": {"units": "celsius"}, "id": "c1"}])
    out = run(ToolNode(TOOLS), msg)
    result = tool_messages(out)["c1"]
    assert result.status == "error"
    # LangGraph's frame (what prompts and code look for), toolmend's field-level line.
    assert result.content.startswith("Error invoking tool 'get_weather' with kwargs {'units': 'celsius'} with error:\n")
    assert "city: required, missing" in result.content


def test_truncated_arguments_get_feedback_unless_the_tool_accepts_salvage():
    msg = AIMessage(
        "",
        id="ai1",
        invalid_tool_calls=[{"name": "get_weather", "args": '{"city": "Par', "id": "c1", "error": "x", "type": "invalid_tool_call"}],
    )
    result = tool_messages(run(ToolNode(TOOLS), msg))["c1"]
    assert result.status == "error" and "cut off" in result.content
    result = tool_messages(run(ToolNode(TOOLS, accept_truncated={"get_weather"}), msg))["c1"]
    assert result.content == "Par: 21 celsius, 1 day(s)"


def test_glued_calls_are_split_and_each_answered():
    msg = AIMessage(
        "",
        id="ai1",
        invalid_tool_calls=[{"name": "add", "args": '{"a": 1, "b": 2}{"a": 3, "b": 4}', "id": "c1", "error": "x", "type": "invalid_tool_call"}],
    )
    out = run(ToolNode(TOOLS), msg)
    results = tool_messages(out)
    assert (results["c1"].content, results["c1_2"].content) == ("3", "7")
    assert [c["id"] for c in sanitized(out).tool_calls] == ["c1", "c1_2"]


def test_a_merged_call_runs_as_one_call_per_value_each_answered():
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "get_weather", "args": {"city": ["Oslo", "Rome"]}, "id": "c1", "type": "tool_call"}])
    out = run(ToolNode(TOOLS), msg)
    results = tool_messages(out)
    assert set(results) == {"c1", "c1_2"}
    assert "Oslo" in results["c1"].content and "Rome" in results["c1_2"].content
    ai = sanitized(out)
    assert [(c["id"], c["args"]["city"]) for c in ai.tool_calls] == [("c1", "Oslo"), ("c1_2", "Rome")]
    answered_once([HumanMessage("hi"), ai, *results.values()])
    # The switch off: one call, answered with feedback.
    out = run(ToolNode(TOOLS, coerce={"split_merged_calls": False}), msg)
    results = tool_messages(out)
    assert set(results) == {"c1"}
    assert results["c1"].status == "error" and "one call per value" in results["c1"].content


def test_a_merged_call_sent_alone_cannot_split_and_is_feedback():
    # A Send payload is answered by one result under its own id (its message holds no
    # other): no call can be added, so the merged call asks for one call per value.
    node = ToolNode(TOOLS)
    out = node.invoke([{"name": "get_weather", "args": {"city": ["Oslo", "Rome"]}, "id": "c1", "type": "tool_call"}], config=CONFIG)
    (m,) = out["messages"]
    assert m.tool_call_id == "c1" and m.status == "error"
    assert "one call per value" in m.content, m.content


def test_stats_speak_the_rust_nodes_vocabulary():
    events: list[dict] = []
    node = ToolNode(TOOLS, on_stats=events.append)
    msg = AIMessage(
        "Sure: <tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 1}}</tool_call>", id="ai1"
    )
    run(node, msg)
    (rec,) = events[0]["calls"]
    assert (rec["outcome"], rec["source"]) == ("executed", "text")
    assert rec["tool_call_id"] == "call_tm_1_0"  # the one id rule: message 1, call 0
    assert [f["kind"] for f in events[0]["message_fixes"]] == ["calls_moved_from_text"]
    assert sanitized(run(ToolNode(TOOLS), msg)).content == "Sure:"  # the prose stays

    events.clear()
    glued = AIMessage("", id="ai2", tool_calls=[{"name": "add", "args": {"a": 1, "b": 1}, "id": "done"}], invalid_tool_calls=[
        {"name": "add", "args": '{"a": 1, "b": 2}{"a": 3, "b": 4}', "id": "c1", "error": "x", "type": "invalid_tool_call"},
    ])
    node.invoke([HumanMessage("hi"), glued, ToolMessage("2", tool_call_id="done")], config=CONFIG)
    calls = events[0]["calls"]
    assert [(c["tool_call_id"], c["outcome"], c["source"]) for c in calls] == [
        ("c1", "executed", "tool_calls"), ("c1_2", "executed", "glued"),
    ]
    assert events[0]["already_answered"] == ["done"]  # not run again, and no record
    assert node.stats["outcome:executed"] == 3 and "outcome:skipped" not in node.stats

    events.clear()
    repeat = AIMessage("", id="ai3", tool_calls=[
        {"name": "add", "args": {"a": 1, "b": 1}, "id": "c1"},
        {"name": "add", "args": {"a": 1, "b": 1}, "id": "c1"},
    ])
    out = run(node, repeat)
    assert [c["outcome"] for c in events[0]["calls"]] == ["executed", "dropped"]
    assert [m.tool_call_id for m in tool_messages(out).values()] == ["c1"]
    assert [c["id"] for c in sanitized(out).tool_calls] == ["c1"]


def test_calls_written_into_the_text_are_run():
    msg = AIMessage('<think>need weather</think><tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>', id="ai1")
    assert StockToolNode(TOOLS).invoke([HumanMessage("hi"), msg], config=CONFIG) == []
    out = run(ToolNode(TOOLS), msg)
    (result,) = tool_messages(out).values()
    assert result.content == "Lima: 21 celsius, 1 day(s)"
    ai = sanitized(out)
    assert ai.content == "" and ai.tool_calls[0]["id"] == result.tool_call_id


def test_calls_in_text_is_one_switch_and_its_earlier_name_still_reads_with_a_warning():
    msg = AIMessage('<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>', id="ai1")
    assert tool_messages(run(ToolNode(TOOLS, calls_in_text=False), msg)) == {}
    with pytest.warns(DeprecationWarning, match="calls_in_text"):
        node = ToolNode(TOOLS, calls_in_content=False)
    assert tool_messages(run(node, msg)) == {}
    assert len(tool_messages(run(ToolNode(TOOLS), msg))) == 1


def test_a_call_cut_off_in_the_text_is_not_run_and_says_so():
    # Issue 11: the fixes of reading a call out of the text used to be dropped, so a
    # cut-off call written into the content ran on a salvaged prefix as if whole.
    msg = AIMessage('<tool_call>{"name": "get_weather", "arguments": {"city": "Li', id="ai1")
    out = run(ToolNode(TOOLS), msg)
    (result,) = tool_messages(out).values()
    assert "cut off" in result.content, result.content
    assert "Li: " not in result.content


def test_an_unknown_tool_keeps_langgraphs_answer_and_a_near_name_is_fixed():
    msg = AIMessage("", id="ai1", tool_calls=[
        {"name": "get_forecast", "args": {}, "id": "c1"},
        {"name": "Get-Weather", "args": {"city": "Rome"}, "id": "c2"},
    ])
    results = tool_messages(run(ToolNode(TOOLS), msg))
    assert results["c1"].content == "Error: get_forecast is not a valid tool, try one of [get_weather, add, whoami]."
    assert results["c2"].content == "Rome: 21 celsius, 1 day(s)"


def test_injected_arguments_are_not_part_of_the_schema():
    node = ToolNode(TOOLS)
    graph = StateGraph(MessagesState)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "whoami", "args": {"name": "Ada"}, "id": "c1"}])
    out = app.invoke({"messages": [HumanMessage("hi"), msg]})
    assert out["messages"][-1].content == "Ada (2 messages)"


# ---- resolution ---------------------------------------------------------------------------


BAD = AIMessage("", id="ai1", tool_calls=[
    {"name": "add", "args": {"a": 1, "b": "two"}, "id": "c1"},
    {"name": "add", "args": {"a": 1, "b": 1}, "id": "c2"},
])


def test_raise_lists_every_unresolved_call_before_anything_runs():
    ran = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        ran.append((a, b))
        return a + b

    with pytest.raises(ToolCallValidationError) as e:
        run(ToolNode([add], on_unresolved="raise"), BAD)
    assert [c.tool_call_id for c in e.value.calls] == ["c1"]
    assert e.value.failures[0][:2] == ("add", "c1")
    assert ran == []


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_hook_salvages_or_answers(asynchronous):
    seen: list[UnresolvedToolCall] = []

    def salvage(call: UnresolvedToolCall):
        seen.append(call)
        return {"a": 1, "b": 2}

    async def salvage_async(call: UnresolvedToolCall):
        return salvage(call)

    node = ToolNode(TOOLS, on_unresolved=salvage_async if asynchronous else salvage)
    if asynchronous:
        out = asyncio.run(node.ainvoke([HumanMessage("hi"), BAD], config=CONFIG))
    else:
        out = run(node, BAD)
    assert tool_messages(out)["c1"].content == "3"
    if not asynchronous:
        assert seen[0].issues[0]["kind"] == "wrong_type" and seen[0].original_args == {"a": 1, "b": "two"}
        assert seen[0].messages[0].content == "hi"
    # Its own text goes to the agent as an error.
    out = run(ToolNode(TOOLS, on_unresolved=lambda c: "ask the user for b"), BAD)
    assert tool_messages(out)["c1"].content == "ask the user for b"
    # Invalid salvage: still feedback.
    out = run(ToolNode(TOOLS, on_unresolved=lambda c: {"a": "x"}), BAD)
    assert tool_messages(out)["c1"].status == "error"


def test_validators_see_phase_and_conversation():
    seen: list[ValidatorContext] = []

    def no_negatives(args, ctx: ValidatorContext):
        seen.append(ctx)
        return "a must not be negative" if args["a"] < 0 else None

    node = ToolNode(TOOLS, validators={"add": no_negatives})
    msg = AIMessage("", id="ai1", tool_calls=[
        {"name": "add", "args": {"a": -1, "b": 1}, "id": "c1"},
        {"name": "add", "args": {"a": 1, "b": 1}, "id": "c2"},
    ])
    results = tool_messages(run(node, msg))
    assert results["c1"].status == "error" and "a must not be negative" in results["c1"].content
    assert results["c2"].content == "2"
    assert seen[0].phase == "initial" and seen[0].messages[0].content == "hi"
    with pytest.raises(ValueError, match="no tool named 'nope'"):
        ToolNode(TOOLS, validators={"nope": no_negatives})


# ---- correction ---------------------------------------------------------------------------


class ScriptedChatModel(BaseChatModel):
    """A chat model answering from a script; records the prompts it got."""

    script: list[Any]
    prompts: list[str] = []
    bound: list[Any] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        self.bound.append((tools, tool_choice))
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.prompts.append(messages[-1].content)
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return ChatResult(generations=[ChatGeneration(message=step)])


def fix(args: dict) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "add", "args": args, "id": "fix"}])


def test_a_correction_model_fixes_what_rules_cannot_with_context_and_no_system_prompt():
    model = ScriptedChatModel(script=[fix({"a": 1, "b": 2})], prompts=[], bound=[])
    stats: list[dict] = []
    node = ToolNode(TOOLS, correction_model=model, on_stats=stats.append)
    history = [SystemMessage("SECRET"), HumanMessage("add one and two")]
    out = run(node, BAD, history)
    assert tool_messages(out)["c1"].content == "3"
    assert sanitized(out).tool_calls[0]["args"] == {"a": 1, "b": 2}
    # The core's record, word for word the Rust node's: the plan's reading -> the new one.
    (fixed,) = [f for f in stats[-1]["calls"][0]["fixes"] if f["kind"] == "arguments_corrected"]
    assert fixed["detail"] == '{"a":1,"b":"two"} -> {"a":1,"b":2}'
    prompt = model.prompts[0]
    assert "[user] add one and two" in prompt and "SECRET" not in prompt and '"two"' in prompt
    assert model.bound[0][1] == "add"  # the one tool bound and forced


def test_the_correction_prompt_is_the_cores_one_prompt():
    import toolmend

    # JSON mode: the answer is text, read by the core; the prompt asks for one object.
    model = ScriptedChatModel(script=[AIMessage('```json\n{"a": 1, "b": 2,}\n```')], prompts=[], bound=[])
    node = ToolNode(TOOLS, correction_model=model, correction_mode="json")
    earlier = AIMessage("", id="ai0", tool_calls=[{"name": "add", "args": {"a": 0, "b": 0}, "id": "c0"}])
    history = [SystemMessage("SECRET"), HumanMessage("add one and two"), earlier, ToolMessage("0", tool_call_id="c0")]
    msg = BAD.model_copy(update={"content": "<think>they want 1 + 2</think>Adding."})
    out = run(node, msg, history)
    assert tool_messages(out)["c1"].content == "3"
    (prompt,) = model.prompts
    # Word for word what the Rust core renders for the same call and conversation.
    from toolmend._mend import tool_schema

    expected = toolmend.Toolbox([tool_schema(add)]).correction_prompt(
        "add", '{"a":1,"b":"two"}',
        [{"kind": "wrong_type", "path": "/b", "message": "expected integer, got string \"two\"",
          "expected": "integer", "got": "two"}],
        [], None, context_messages=0, ask_for_json=True)
    assert prompt.split("What is wrong:")[0] == expected.split("What is wrong:")[0]
    assert "[user] add one and two\n[assistant] \n  -> add({\"a\": 0, \"b\": 0})\n" in prompt
    assert "[tool result c0] 0\n[assistant] Adding.\n" in prompt
    assert "SECRET" not in prompt and "they want" not in prompt
    assert prompt.endswith("Answer with the arguments as one JSON object and nothing else.")


def test_a_correction_model_that_gives_up_is_not_asked_again():
    events: list[dict] = []
    model = ScriptedChatModel(script=[AIMessage("I cannot tell."), fix({"a": 1, "b": 2})], prompts=[], bound=[])
    node = ToolNode(TOOLS, correction_model=model, max_correction_retries=2, on_stats=events.append)
    assert tool_messages(run(node, BAD))["c1"].status == "error"
    assert len(model.prompts) == 1  # as the Rust loop: no arguments in the answer ends it
    (rec,) = [c for c in events[0]["calls"] if c["tool_call_id"] == "c1"]
    assert (rec["correction_attempts"], rec["note"]) == (1, "the corrector gave up")


def test_correctable_is_the_cores_rule():
    import toolmend._core as core

    missing = [{"kind": "missing_required", "path": "/b", "message": "b is required"}]
    assert core.correctable([{"kind": "wrong_type", "path": "/b", "message": "x"}], [])
    assert not core.correctable(missing, []) and core.correctable(missing, [], True)
    assert core.correctable(missing, [{"kind": "unknown_key_dropped", "path": "/bb"}])
    assert not core.correctable([{"kind": "truncated", "path": "", "message": "cut off"}], [], True)


def test_correction_retries_run_out_and_failures_degrade_to_feedback():
    model = ScriptedChatModel(script=[fix({"a": 1}), fix({"a": "x", "b": 1})], prompts=[], bound=[])
    result = tool_messages(run(ToolNode(TOOLS, correction_model=model, max_correction_retries=2), BAD))["c1"]
    assert result.status == "error" and model.script == []
    model = ScriptedChatModel(script=[TimeoutError("slow")], prompts=[], bound=[])
    results = tool_messages(run(ToolNode(TOOLS, correction_model=model), BAD))
    assert results["c1"].status == "error" and results["c2"].content == "2"
    with pytest.raises(ValueError, match="at least 1"):
        ToolNode(TOOLS, correction_model=model, max_correction_retries=0)


def test_no_context_is_sent_with_zero_context_messages_and_missing_values_are_not_sent():
    model = ScriptedChatModel(script=[fix({"a": 1, "b": 2})], prompts=[], bound=[])
    run(ToolNode(TOOLS, correction_model=model, correction_context_messages=0), BAD, [HumanMessage("private")])
    assert "private" not in model.prompts[0]
    model = ScriptedChatModel(script=[], prompts=[], bound=[])
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c1"}])
    assert tool_messages(run(ToolNode(TOOLS, correction_model=model), msg))["c1"].status == "error"
    assert model.prompts == []


# ---- input forms, graphs, async -----------------------------------------------------------


def test_send_payloads_are_mended_too():
    node = ToolNode(TOOLS)
    out = node.invoke([{"name": "add", "args": {"a": "1", "b": 2}, "id": "c1", "type": "tool_call"}], config=CONFIG)
    assert out["messages"][0].content == "3"
    out = node.invoke(
        {"__type": "tool_call_with_context", "tool_call": {"name": "add", "args": {"a": 1}, "id": "c2", "type": "tool_call"}, "state": {"messages": []}},
        config=CONFIG,
    )
    assert out["messages"][0].status == "error" and "b: required" in out["messages"][0].content


def test_tools_condition_routes_invalid_only_messages_to_the_node():
    msg = AIMessage("", invalid_tool_calls=[{"name": "add", "args": "{", "id": "c1", "error": "x", "type": "invalid_tool_call"}])
    from langgraph.prebuilt import tools_condition as stock_condition

    assert stock_condition([msg]) == "__end__"
    assert tools_condition([msg]) == "tools"
    assert tools_condition({"messages": [AIMessage("done")]}) == "__end__"


class Script(BaseChatModel):
    """The agent's model: answers from a script."""

    script: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "agent-script"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


def agent(model: BaseChatModel, node: Any):
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", "__end__": END})
    graph.add_edge("tools", "model")
    return graph.compile()


def test_a_hand_built_graph_runs_broken_turns_to_an_answer_with_a_valid_history():
    model = Script(script=[
        AIMessage("", invalid_tool_calls=[{"name": "add", "args": "{'a': 1, 'b': 2,}", "id": "c1", "error": "x", "type": "invalid_tool_call"}]),
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 3}, "id": "c2"}, {"name": "add", "args": {"a": 3, "b": 3}, "id": "c2"}]),
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 3, "b": "4"}, "id": "c3"}]),
        AIMessage("The sums are 3, 6 and 7."),
    ])
    out = agent(model, ToolNode(TOOLS)).invoke({"messages": [HumanMessage("sums please")]})
    messages = out["messages"]
    assert messages[-1].content == "The sums are 3, 6 and 7."
    answered_once(messages)
    assert all(m.invalid_tool_calls == [] for m in messages if isinstance(m, AIMessage))
    contents = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert contents[0] == "3" and "b: required" in contents[1] and contents[2:] == ["6", "7"]


TEXT_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": "5"}}\n</tool_call>'


@pytest.mark.parametrize("blocks", [False, True], ids=["string", "blocks"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hand_built_graph_runs_a_call_written_into_the_content(blocks, mode):
    # Content as a string, or as the blocks ChatAnthropic and multimodal models return
    # (an image beside the text stays where it was).
    image = {"type": "image", "source_type": "url", "url": "https://example.test/a.png"}
    content: Any = [image, {"type": "text", "text": "Let me add.\n"}, {"type": "text", "text": TEXT_CALL}] if blocks else "Let me add.\n" + TEXT_CALL
    model = Script(script=[AIMessage(content, id="ai1"), AIMessage("2 + 5 = 7.")])
    app = agent(model, ToolNode(TOOLS))
    start = {"messages": [HumanMessage("2+5")]}
    out = app.invoke(start) if mode == "sync" else asyncio.run(app.ainvoke(start))
    messages = out["messages"]
    assert messages[-1].content == "2 + 5 = 7."
    answered_once(messages)
    (result,) = [m for m in messages if isinstance(m, ToolMessage)]
    assert result.content == "7"
    (calling,) = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert calling.tool_calls[0]["args"] == {"a": 2, "b": 5}
    # The call left the text; the prose and the image stayed.
    if blocks:
        assert calling.content == [image, {"type": "text", "text": "Let me add."}]
    else:
        assert calling.content == "Let me add."


def test_tools_condition_reads_the_content_with_the_nodes_tools():
    from langgraph.prebuilt import tools_condition as stock_condition

    ToolNode(TOOLS)  # a live node: its tools are the ones a text call must name
    called = AIMessage("Sure. " + TEXT_CALL)
    assert stock_condition([called]) == "__end__"
    assert tools_condition([called]) == "tools"
    assert tools_condition([AIMessage([{"type": "text", "text": TEXT_CALL}])]) == "tools"
    # JSON quoted in an answer, a call to a tool no node has, a node that reads no text.
    assert tools_condition([AIMessage('The payload was {"a": 2, "b": 5}. Done.')]) == "__end__"
    unknown = TEXT_CALL.replace('"add"', '"launch_rockets"')
    assert tools_condition([AIMessage(unknown)]) == "__end__"


def test_create_react_agent_accepts_the_node():
    import warnings

    from langgraph.prebuilt import create_react_agent

    model = Script(script=[AIMessage("", tool_calls=[{"name": "add", "args": {"a": "2", "b": 2}, "id": "c1"}]), AIMessage("4")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = create_react_agent(model, tools=ToolNode(TOOLS))
    out = app.invoke({"messages": [HumanMessage("2+2")]})
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["4"]


def test_async_path_bounds_concurrency():
    running = 0
    peak = 0
    target = 0
    full: asyncio.Event | None = None
    deadline = 0.0

    @tool
    async def slow(x: int) -> int:
        """Holds its slot until `target` calls ran at once."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        assert full is not None
        if running >= target:
            full.set()
        # A condition, not a sleep: a call ends only once as many as the node should allow
        # ran together, so the peak is reached however slow the box. The bound (30 s for
        # the whole run) is there for a node that allows fewer: the peak assertion then
        # names the shortfall.
        try:
            await asyncio.wait_for(full.wait(), max(0.0, deadline - asyncio.get_running_loop().time()))
        except TimeoutError:
            pass
        await asyncio.sleep(0)  # one pass of the loop: a call admitted beyond the bound starts
        running -= 1
        return x

    async def run(node: ToolNode, at_once: int) -> list:
        nonlocal peak, target, full, deadline
        peak, target, full = 0, at_once, asyncio.Event()
        deadline = asyncio.get_running_loop().time() + 30
        return await node.ainvoke([HumanMessage("hi"), msg], config=CONFIG)

    msg = AIMessage("", id="ai1", tool_calls=[{"name": "slow", "args": {"x": i}, "id": f"c{i}"} for i in range(6)])
    out = asyncio.run(run(ToolNode([slow], max_concurrency=2), 2))
    assert [m.content for m in out] == [str(i) for i in range(6)]
    assert peak == 2
    asyncio.run(run(ToolNode([slow]), 6))
    assert peak == 6


def test_one_node_serves_concurrent_invocations():
    node = ToolNode(TOOLS)

    async def one(i: int):
        msg = AIMessage("", id=f"ai{i}", invalid_tool_calls=[{"name": "add", "args": f"{{'a': {i}, 'b': 1}}", "id": f"c{i}", "error": "x", "type": "invalid_tool_call"}])
        return await node.ainvoke([HumanMessage("hi"), msg], config=CONFIG)

    async def main():
        return await asyncio.gather(*(one(i) for i in range(20)))

    for i, out in enumerate(asyncio.run(main())):
        assert tool_messages(out)[f"c{i}"].content == str(i + 1)


# ---- the core API -------------------------------------------------------------------------


def test_core_functions():
    import toolmend

    box = toolmend.Toolbox([{"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}])
    (call,) = box.mend("f", "{'n': '3',}")
    assert call["arguments"] == {"n": 3} and call["outcome"] == "repaired"
    assert [f["kind"] for f in call["fixes"]] == ["single_quotes", "trailing_comma", "string_to_integer"]
    with pytest.raises(toolmend.ToolmendError, match="coerce: unknown coercion"):
        toolmend.Toolbox([], coerce={"nope": True})
    with pytest.raises(toolmend.ToolmendError):
        toolmend.Toolbox([{"name": "f", "parameters": {"type": "wrong"}}])
    assert box.validate("f", {"n": 3}) == []
    assert [i["kind"] for i in box.validate("f", {"n": "3"})] == ["wrong_type"]
    assert [i["kind"] for i in box.validate("g", {})] == ["unknown_tool"]
    assert toolmend.repair("{a: 1}")["calls"][0]["arguments"] == {"a": 1}
    broken = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
    ]
    kinds = {v["kind"] for v in toolmend.history_check(broken)}
    assert kinds == {"unanswered_call", "orphan_result"}
    fixed, actions = toolmend.history_sanitize(broken)
    assert toolmend.history_check(fixed) == [] and actions
    assert toolmend.history_trim(fixed, max_messages=1)[0]["role"] == "user"


def test_nan_and_infinity_never_reach_a_tool():
    # Python's json reads NaN, so a LangChain app gets it in parsed tool_calls.
    seen = []

    @tool
    def price(amount: float | None = None, cap: float | None = None) -> str:
        """Price."""
        seen.append((amount, cap))
        return "ok"

    msg = AIMessage("", id="ai1", tool_calls=[{"name": "price", "args": {"amount": float("nan"), "cap": float("inf")}, "id": "c1"}])
    events: list[dict] = []
    out = run(ToolNode([price], on_stats=events.append), msg)
    assert tool_messages(out)["c1"].content == "ok"
    assert seen == [(None, None)]
    assert "non_finite_number" in [f["kind"] for f in events[0]["calls"][0]["fixes"]]


def test_a_tools_extra_forbid_is_honoured():
    from pydantic import BaseModel, ConfigDict
    from langchain_core.tools import StructuredTool

    class Args(BaseModel):
        model_config = ConfigDict(extra="forbid")
        city: str

    strict = StructuredTool.from_function(lambda city: city, name="strict", description="d", args_schema=Args)
    msg = AIMessage("", id="ai1", tool_calls=[{"name": "strict", "args": {"city": "Oslo", "mood": "happy"}, "id": "c1"}])
    stock = StockToolNode([strict]).invoke([HumanMessage("hi"), msg], config=CONFIG)
    assert stock[0].status == "error"  # the extra key fails the tool's own validation
    out = run(ToolNode([strict]), msg)
    assert tool_messages(out)["c1"].content == "Oslo"
    assert sanitized(out).tool_calls[0]["args"] == {"city": "Oslo"}


def test_a_call_wrapper_parsed_as_arguments_is_unwrapped():
    msg = AIMessage("", id="ai1", tool_calls=[
        {"name": "add", "args": {"name": "add", "parameters": {"a": 1, "b": 2}}, "id": "c1"},
        {"name": "add", "args": {"type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}, "id": "c2"},
    ])
    results = tool_messages(run(ToolNode(TOOLS), msg))
    assert (results["c1"].content, results["c2"].content) == ("3", "4")


def test_a_number_for_a_string_is_coerced_only_where_no_pydantic_model_would_refuse_it():
    from langchain_core.tools import StructuredTool

    schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    open_tool = StructuredTool.from_function(lambda **kw: repr(kw["code"]), name="lookup", description="d", args_schema=schema)

    @tool
    def typed(code: str) -> str:
        """Typed."""
        return repr(code)

    msg = AIMessage("", id="ai1", tool_calls=[
        {"name": "lookup", "args": {"code": 42}, "id": "c1"},
        {"name": "typed", "args": {"code": 42}, "id": "c2"},
    ])
    results = tool_messages(run(ToolNode([open_tool, typed]), msg))
    assert results["c1"].content == "'42'"  # nothing but toolmend validates a dict schema
    assert results["c2"].status == "error"  # pydantic refuses 42 for str, so does the node


def test_validators_also_judge_corrected_and_salvaged_arguments():
    phases: list[str] = []

    def small_sums(args, ctx: ValidatorContext):
        phases.append(ctx.phase)
        return "a and b must be below 100" if args["a"] + args["b"] >= 100 else None

    # The correction model's answer fits the schema but not the validator: not run. The
    # agent's feedback is about the call it sent (as the Rust node's: the corrector's
    # attempts are not the agent's), and the next attempt is asked with the refusal.
    # (The answers keep `a`, which had no problem: a correction changes only what the
    # issues name.)
    model = ScriptedChatModel(script=[fix({"a": 1, "b": 99}), fix({"a": 1, "b": 100})], prompts=[], bound=[])
    node = ToolNode(TOOLS, correction_model=model, max_correction_retries=2, validators={"add": small_sums})
    results = tool_messages(run(node, BAD))
    assert results["c1"].status == "error" and 'b: expected integer, got "two"' in results["c1"].content
    assert "below 100" not in results["c1"].content
    assert "below 100" in model.prompts[1] and "below 100" not in model.prompts[0]
    assert results["c2"].content == "2"
    assert "correction" in phases

    # The same for a hook's salvage.
    phases.clear()
    node = ToolNode(TOOLS, on_unresolved=lambda c: {"a": 50, "b": 50}, validators={"add": small_sums})
    results = tool_messages(run(node, BAD))
    assert results["c1"].status == "error"
    assert "salvage" in phases
    node = ToolNode(TOOLS, on_unresolved=lambda c: {"a": 5, "b": 5}, validators={"add": small_sums})
    assert tool_messages(run(node, BAD))["c1"].content == "10"


def test_async_corrections_of_one_message_are_awaited_together_and_each_is_revalidated():
    # The core's driver asks for every correction of the message before awaiting any
    # (bounded by max_concurrency); the answers come back into the core, which
    # re-validates them (a second, still invalid answer is asked about again).
    in_flight = peak = 0
    prompts: list[str] = []

    class Model:
        async def ainvoke(self, prompt):
            nonlocal in_flight, peak
            prompts.append(prompt)
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            # The first answer for "b" is still a string; later ones are good.
            if "three" in prompt and sum("three" in p for p in prompts) == 1:
                return AIMessage('{"a": 1, "b": "three"}')
            return AIMessage('{"a": 1, "b": 3}')

    msg = AIMessage("", id="ai1", tool_calls=[
        {"name": "add", "args": {"a": 1, "b": w}, "id": f"c{i}"} for i, w in enumerate(["two", "three", "four"])
    ])
    node = ToolNode(TOOLS, correction_model=Model(), correction_mode="json", max_correction_retries=2)
    out = asyncio.run(node.ainvoke([HumanMessage("hi"), msg], config=CONFIG))
    assert {k: m.content for k, m in tool_messages(out).items()} == {"c0": "4", "c1": "4", "c2": "4"}
    assert peak == 3, peak
    assert len(prompts) == 4  # three first attempts, one retry
    node = ToolNode(TOOLS, correction_model=Model(), correction_mode="json", max_concurrency=1)
    peak = 0
    asyncio.run(node.ainvoke([HumanMessage("hi"), msg], config=CONFIG))
    assert peak == 1


def test_an_async_validator_on_the_sync_path_is_run_to_completion():
    async def small(args: dict, ctx) -> str | None:
        await asyncio.sleep(0)
        return "too big" if args["a"] + args["b"] > 10 else None

    msg = AIMessage("", id="ai1", tool_calls=[
        {"name": "add", "args": {"a": 9, "b": 9}, "id": "big"},
        {"name": "add", "args": {"a": 1, "b": 2}, "id": "ok"},
    ])
    out = run(ToolNode(TOOLS, validators={"add": small}), msg)
    got = tool_messages(out)
    assert got["ok"].content == "3"
    assert got["big"].status == "error" and "too big" in got["big"].content


def test_a_corrector_that_rewrites_a_field_with_no_problem_never_changes_what_runs():
    # `units` is wrong; `city` is fine. A corrector that also moves the city is asked
    # again (told what it changed); one that keeps to its scope is taken.
    ran: list[dict] = []

    @tool
    def weather(city: str, units: Literal["celsius", "fahrenheit"] = "celsius") -> str:
        """Weather for a city."""
        ran.append({"city": city, "units": units})
        return city

    class Model:
        def __init__(self, answers):
            self.answers, self.prompts = list(answers), []

        def invoke(self, prompt):
            self.prompts.append(prompt)
            return AIMessage(self.answers.pop(0))

    msg = AIMessage("", id="ai1", tool_calls=[{"name": "weather", "args": {"city": "Oslo", "units": "kelvin"}, "id": "w"}])
    paris = '{"city": "Paris", "units": "celsius"}'
    model = Model([paris, paris])
    out = run(ToolNode([weather], correction_model=model, correction_mode="json", max_correction_retries=2), msg)
    assert ran == [] and tool_messages(out)["w"].status == "error"
    assert "had no problem" in model.prompts[1]
    model = Model([paris, '{"city": "Oslo", "units": "celsius"}'])
    out = run(ToolNode([weather], correction_model=model, correction_mode="json", max_correction_retries=2), msg)
    assert ran == [{"city": "Oslo", "units": "celsius"}]
    # By option, a trusted corrector's rewrite is kept, and said: an unsafe fix.
    ran.clear()
    stats: list[dict] = []
    model = Model([paris])
    node = ToolNode([weather], correction_model=model, correction_mode="json", correction_scope="unsafe",
                    on_stats=stats.append)
    run(node, msg)
    assert ran == [{"city": "Paris", "units": "celsius"}]
    (beyond,) = [f for f in stats[-1]["calls"][0]["fixes"] if f["kind"] == "correction_beyond_issues"]
    assert beyond["path"] == "/city" and "no problem" in beyond["detail"], beyond
    with pytest.raises(ValueError, match="correction_scope"):
        ToolNode([weather], correction_scope="loose")


def test_a_tool_whose_schema_cannot_compile_raises_unless_opened_up():
    from langchain_core.tools import StructuredTool

    broken = StructuredTool.from_function(
        func=lambda **kw: "ran", name="broken", description="A broken schema.",
        args_schema={"type": "object", "properties": {"a": {"type": "no-such-type"}}},
    )
    with pytest.raises(ValueError, match="tool 'broken': its argument schema cannot be compiled"):
        ToolNode([broken, add])
    with pytest.warns(UserWarning, match="tool 'broken'.*opened up"):
        node = ToolNode([broken, add], broken_schema="open")
    msg = AIMessage("", tool_calls=[{"name": "add", "args": {"a": "1", "b": 2}, "id": "c1"}])
    assert tool_messages(run(node, msg))["c1"].content == "3"
    with pytest.raises(ValueError, match="broken_schema='maybe'"):
        ToolNode([add], broken_schema="maybe")


def test_keys_no_argument_takes_are_renamed_or_named_never_dropped():
    @tool
    def route(origin: str, destination: str) -> str:
        """A route between two cities."""
        return f"{origin} -> {destination}"

    node = ToolNode([route, get_weather])
    # A plain @tool's model ignores other keys: stock LangGraph would run get_weather
    # for one day, the 3 the model sent lost. toolmend renames the key it names.
    msg = AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo", "dayz": 3}, "id": "w"}])
    assert tool_messages(run(node, msg))["w"].content == "Oslo: 21 celsius, 3 day(s)"
    # Keys that name nothing: the call is not run on a guess; the feedback names them,
    # beside a valid call too (stock LangGraph would run it without them).
    msg = AIMessage("", tool_calls=[{"name": "route", "args": {"from_city": "Oslo", "to_city": "Rome"}, "id": "r"}])
    answer = tool_messages(run(node, msg))["r"]
    assert answer.status == "error"
    assert "from_city: unknown key" in answer.content and "to_city: unknown key" in answer.content, answer.content
    msg = AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo", "zzz_mode": "fast"}, "id": "z"}])
    answer = tool_messages(run(node, msg))["z"]
    assert answer.status == "error" and "zzz_mode: unknown key" in answer.content, answer.content



class Address(BaseModel):
    city: str
    postcode: str = ""


@tool
def ship(to: Address) -> str:
    """Ship to an address."""
    return f"to {to.city} {to.postcode}".strip()


def test_a_nested_key_no_field_takes_is_named_in_a_valid_call():
    node = ToolNode([ship])
    # Valid for pydantic, which ignores `floor`: the 3 the model sent would be lost.
    msg = AIMessage("", tool_calls=[{"name": "ship", "args": {"to": {"city": "Oslo", "floor": 3}}, "id": "s"}])
    answer = tool_messages(run(node, msg))["s"]
    assert answer.status == "error" and "to.floor: unknown key" in answer.content, answer.content
    # A nested key that names a field is renamed there, and the call runs.
    msg = AIMessage("", tool_calls=[{"name": "ship", "args": {"to": {"city": "Oslo", "post_code": "0150"}}, "id": "p"}])
    assert tool_messages(run(node, msg))["p"].content == "to Oslo 0150"
    msg = AIMessage("", tool_calls=[{"name": "ship", "args": {"to": {"city": "Oslo"}}, "id": "c"}])
    assert tool_messages(run(node, msg))["c"].content == "to Oslo"

def _invalid(name: str, args: str, id: str) -> dict:
    return {"name": name, "args": args, "id": id, "error": "bad json", "type": "invalid_tool_call"}


#: kind -> (the model's first answer, the texts the results hold, one per call)
GRAPH_KINDS: dict[str, tuple[AIMessage, list[str]]] = {
    "invalid_json": (AIMessage("", invalid_tool_calls=[_invalid("add", "{'a': 1, 'b': 2,}", "c1")]), ["3"]),
    "text_call_string": (AIMessage("Adding.\n" + TEXT_CALL), ["7"]),
    "text_call_blocks": (AIMessage([{"type": "text", "text": TEXT_CALL}]), ["7"]),
    "unknown_tool": (AIMessage("", tool_calls=[{"name": "launch", "args": {}, "id": "c1"}]), ["is not a valid tool"]),
    "parallel_one_broken": (AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1"}],
                                      invalid_tool_calls=[_invalid("add", '{"a": 1', "c2")]),
                            ["Oslo: 21 celsius, 1 day(s)", "add"]),
}


@pytest.mark.parametrize("kind", list(GRAPH_KINDS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hand_built_graph_answers_every_broken_kind_once(kind, mode):
    first, holds = GRAPH_KINDS[kind]
    app = agent(Script(script=[first.model_copy(deep=True), AIMessage("Done.")]), ToolNode(TOOLS))
    start = {"messages": [HumanMessage("go")]}
    out = app.invoke(start) if mode == "sync" else asyncio.run(app.ainvoke(start))
    messages = out["messages"]
    assert messages[-1].content == "Done."
    answered_once(messages)
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == len(holds), results
    for text in holds:
        assert any(text in r for r in results), (text, results)
