"""``create_react_agent(model, tools=node, post_model_hook=node.post_model_hook)`` in both
versions of the prebuilt agent, sync and async: every call id answered exactly once, every
call written into the text run, for each broken-call kind."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from toolmend.langgraph import ToolNode

RAN: list[tuple[str, dict]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(("add", {"a": a, "b": b}))
    return a + b


@tool
def get_weather(city: str, days: int = 1) -> str:
    """The forecast."""
    RAN.append(("get_weather", {"city": city, "days": days}))
    return f"{city}: sunny, {days}d"


TOOLS = [add, get_weather]


class Script(BaseChatModel):
    """The agent's model: answers from a script."""

    script: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "react-script"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


def invalid(name: str, args: str, id: str) -> dict:
    return {"name": name, "args": args, "id": id, "error": "bad json", "type": "invalid_tool_call"}


TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": "5"}}\n</tool_call>'

#: kind -> (the model's first answer, what must have run, a text each result must hold)
CASES: dict[str, tuple[AIMessage, list, list[str]]] = {
    "invalid_json": (
        AIMessage("", invalid_tool_calls=[invalid("add", "{'a': 1, 'b': 2,}", "c1")]),
        [("add", {"a": 1, "b": 2})], ["3"]),
    "text_call_string": (AIMessage("Adding.\n" + TEXT), [("add", {"a": 2, "b": 5})], ["7"]),
    "text_call_blocks": (
        AIMessage([{"type": "text", "text": "Adding.\n"}, {"type": "text", "text": TEXT}]),
        [("add", {"a": 2, "b": 5})], ["7"]),
    "unknown_tool": (
        AIMessage("", tool_calls=[{"name": "launch", "args": {}, "id": "c1"}]),
        [], ["is not a valid tool"]),
    "parallel_one_broken": (
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1"}],
                  invalid_tool_calls=[invalid("add", '{"a": 1', "c2")]),
        [("get_weather", {"city": "Oslo", "days": 1})], ["Oslo: sunny, 1d", "add"]),
}


def answered_once(messages: list[BaseMessage]) -> None:
    """Every call id answered by exactly one ToolMessage after its message, every result
    answering a call: what providers require of a history."""
    pending: set[str] = set()
    seen: list[str] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in pending, f"orphan or second result: {m.tool_call_id}"
            pending.discard(m.tool_call_id)
            continue
        assert not pending, f"unanswered before {type(m).__name__}: {pending}"
        if isinstance(m, AIMessage):
            ids = [c["id"] for c in [*m.tool_calls, *m.invalid_tool_calls]]
            assert all(ids), ids
            seen += ids
            pending = set(ids)
    assert not pending, f"unanswered at the end: {pending}"
    assert len(set(seen)) == len(seen), seen


def react(model: BaseChatModel, node: ToolNode, version: str, hook: bool = True) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for create_agent
        return create_react_agent(model, tools=node, version=version,
                                  post_model_hook=node.post_model_hook if hook else None)


def invoke(app: Any, mode: str, text: str = "go") -> list[BaseMessage]:
    start = {"messages": [HumanMessage(text)]}
    out = app.invoke(start) if mode == "sync" else asyncio.run(app.ainvoke(start))
    return out["messages"]


@pytest.mark.parametrize("kind", list(CASES))
@pytest.mark.parametrize("version", ["v2"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_call_is_answered_once_and_run_where_it_can(kind, version, mode):
    first, ran, holds = CASES[kind]
    RAN.clear()
    model = Script(script=[first.model_copy(deep=True), AIMessage("Done.")])
    messages = invoke(react(model, ToolNode(TOOLS), version), mode)
    assert messages[-1].content == "Done."
    answered_once(messages)
    assert RAN == ran
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == len(holds)
    for text in holds:
        assert any(text in r for r in results), (text, results)
    # The history the model saw next holds the mended answer, nothing invalid.
    assert all(not m.invalid_tool_calls for m in messages if isinstance(m, AIMessage))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_without_the_hook_v2_leaves_invalid_calls_unanswered(version):
    # What the hook is for: the prebuilt agent routes on tool_calls only.
    RAN.clear()
    first = CASES["invalid_json"][0]
    model = Script(script=[first.model_copy(deep=True), AIMessage("Done.")])
    messages = invoke(react(model, ToolNode(TOOLS), version, hook=False), "sync")
    assert RAN == [] and not any(isinstance(m, ToolMessage) for m in messages)


@pytest.mark.parametrize("version", ["v2"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_loop_is_ended_by_the_guard_with_every_call_answered(version, mode):
    RAN.clear()
    same = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1, "b": 1}, "id": "x"}])
    # The model repeats the same call; the repeat rule ends the run at the fourth.
    model = Script(script=[same.model_copy(update={"tool_calls": [{**same.tool_calls[0], "id": f"c{i}"}]})
                           for i in range(8)])
    node = ToolNode(TOOLS, guard={"repeat": {"observe": 2, "block": 3, "stop": 4}})
    messages = invoke(react(model, node, version), mode)
    answered_once(messages)
    last = messages[-1]
    assert isinstance(last, AIMessage) and last.response_metadata.get("toolmend_stopped")
    # Written by toolmend, and marked so: a UI does not show it as the model's answer.
    assert last.name == "toolmend_guard" and last.response_metadata["author"] == "toolmend"
    assert len(RAN) < 8


@pytest.mark.parametrize("version", ["v2"])
def test_the_guard_counts_each_call_once_through_the_hook_and_the_node(version):
    RAN.clear()
    calls = [{"name": "add", "args": {"a": i, "b": 1}, "id": f"c{i}"} for i in range(2)]
    model = Script(script=[AIMessage("", tool_calls=calls), AIMessage("Done.")])
    # Two calls, a run limit of two: counted twice, the second would be refused.
    node = ToolNode(TOOLS, guard={"limits": {"run_limit": 2}})
    stats: list[dict] = []
    node._mender.on_stats = stats.append
    messages = invoke(react(model, node, version), "sync")
    answered_once(messages)
    assert sorted(r[1]["a"] for r in RAN) == [0, 1]
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == ["1", "2"]
    assert len(stats) == 1 and [c["outcome"] for c in stats[0]["calls"]] == ["executed", "executed"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_v1_sends_the_whole_message_so_the_node_answers_its_invalid_calls_too(mode):
    # v1 has no post-model hook (LangGraph: "Only available with version='v2'"); it hands
    # the node the whole message whenever it holds a tool_call, and the node resolves all
    # of it: the valid call runs, the broken one beside it gets its feedback.
    RAN.clear()
    first, ran, holds = CASES["parallel_one_broken"]
    model = Script(script=[first.model_copy(deep=True), AIMessage("Done.")])
    messages = invoke(react(model, ToolNode(TOOLS), "v1", hook=False), mode)
    answered_once(messages)
    assert RAN == ran
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert all(any(t in r for r in results) for t in holds), results


# ---- node.bind_model: the answers resolved in the model, for every router ---------------


class BindingScript(Script):
    """A scripted model whose bind_tools binds, as every LangChain chat model's does."""

    def bind_tools(self, tools, **kwargs):
        from langchain_core.utils.function_calling import convert_to_openai_tool

        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


def react_bound(model: BaseChatModel, node: ToolNode, version: str) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(node.bind_model(model), tools=node, version=version)


@pytest.mark.parametrize("kind", list(CASES))
@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bind_model_answers_every_call_once_in_both_versions(kind, version, mode):
    first, ran, holds = CASES[kind]
    RAN.clear()
    model = BindingScript(script=[first.model_copy(deep=True), AIMessage("Done.")])
    node = ToolNode(TOOLS)
    stats: list[dict] = []
    node._mender.on_stats = stats.append
    messages = invoke(react_bound(model, node, version), mode)
    assert messages[-1].content == "Done."
    answered_once(messages)
    assert RAN == ran
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == len(holds)
    for text in holds:
        assert any(text in r for r in results), (text, results)
    assert all(not m.invalid_tool_calls for m in messages if isinstance(m, AIMessage))
    # Reported once, by the model's mending; the node runs what it was handed.
    assert len(stats) == 1, stats


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bind_model_feeds_langgraphs_own_tools_condition(mode):
    # A hand-built graph with LangGraph's stock router: it reads tool_calls only, and the
    # mending model leaves no call anywhere else.
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition as stock_condition

    RAN.clear()
    node = ToolNode(TOOLS)
    model = node.bind_model(BindingScript(script=[AIMessage("Adding.\n" + TEXT), AIMessage("Done.")]))

    def agent(state):
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state):
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent if mode == "sync" else aagent)
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", stock_condition)
    g.add_edge("tools", "agent")
    messages = invoke(g.compile(), mode)
    answered_once(messages)
    assert RAN == [("add", {"a": 2, "b": 5})]
    assert messages[-1].content == "Done."


def test_bind_model_copies_keep_the_mending():
    node = ToolNode(TOOLS)
    first = CASES["invalid_json"][0]
    for m in (node.bind_model(BindingScript(script=[first.model_copy(deep=True)])).with_config(tags=["x"]),
              node.bind_model(BindingScript(script=[first.model_copy(deep=True)])).bind(stop=["\n\n"])):
        answer = m.invoke([HumanMessage("go")])
        assert answer.tool_calls and answer.tool_calls[0]["args"] == {"a": 1, "b": 2}
        assert not answer.invalid_tool_calls


def test_bind_model_needs_a_binding():
    with pytest.raises(TypeError, match="post_model_hook"):
        ToolNode(TOOLS).bind_model(Script(script=[]))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_bind_model_guard_counts_each_call_once(version):
    RAN.clear()
    calls = [{"name": "add", "args": {"a": i, "b": 1}, "id": f"c{i}"} for i in range(2)]
    model = BindingScript(script=[AIMessage("", tool_calls=calls), AIMessage("Done.")])
    node = ToolNode(TOOLS, guard={"limits": {"run_limit": 2}})
    messages = invoke(react_bound(model, node, version), "sync")
    answered_once(messages)
    assert sorted(r[1]["a"] for r in RAN) == [0, 1]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bind_model_v1_guard_stop_answers_every_call_and_closes(mode):
    # The guard ends the run in the model's mending; the v1 node answers each call with
    # the reason and adds the closing message.
    RAN.clear()
    same = {"name": "add", "args": {"a": 1, "b": 1}}
    script = [AIMessage("", tool_calls=[{**same, "id": f"c{i}"}]) for i in range(4)] + [AIMessage("Done.")]
    node = ToolNode(TOOLS, guard={"repeat": {"observe": 2, "block": 3, "stop": 4}})
    messages = invoke(react_bound(BindingScript(script=script), node, "v1"), mode)
    answered_once(messages)
    stopped = [m for m in messages if isinstance(m, AIMessage) and m.response_metadata.get("toolmend_stopped")]
    assert len(stopped) == 1 and stopped[0].name == "toolmend_guard"
    assert len(RAN) < 4
