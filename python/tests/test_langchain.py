"""toolmend.langchain.MendMiddleware with real ``langchain.agents.create_agent``: scripted
models, no network. Each behaviour it adds, and the stock agent's failure modes shown
beside the fix."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from toolmend.langchain import (
    MendMiddleware,
    ToolCallValidationError,
    UnresolvedToolCall,
    ValidatorContext,
)

RAN: list[tuple[str, dict]] = []  # every tool execution, in order


@tool
def get_weather(city: str, units: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Weather for a city."""
    RAN.append(("get_weather", {"city": city, "units": units}))
    return f"{city}: 21 {units}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(("add", {"a": a, "b": b}))
    return a + b


TOOLS = [get_weather, add]


@pytest.fixture(autouse=True)
def _clear_ran():
    RAN.clear()


class Script(BaseChatModel):
    """The agent's model: answers from a script and records what it was sent."""

    script: list[Any]
    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "agent-script"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return ChatResult(generations=[ChatGeneration(message=step)])


class Corrector(Script):
    """A correction model: records the prompts and the tool it was bound to."""

    bound: list[Any] = []

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        self.bound.append(tool_choice)
        return self


def script(*steps: Any) -> Script:
    return Script(script=list(steps), seen=[])


def invalid(name: str, args: str, id: str) -> dict:
    return {"name": name, "args": args, "id": id, "error": "bad json", "type": "invalid_tool_call"}


def call(name: str, args: dict, id: str | None) -> dict:
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def answered_once(messages: list[BaseMessage]) -> None:
    """Every call id of every AIMessage is answered by exactly one ToolMessage, directly
    after its message, and every ToolMessage answers a call: what providers require."""
    pending: set[str] = set()
    seen_calls: list[str] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in pending, f"orphan or second result: {m.tool_call_id}"
            pending.discard(m.tool_call_id)
            continue
        assert not pending, f"unanswered before {type(m).__name__}: {pending}"
        if isinstance(m, AIMessage):
            ids = [c["id"] for c in [*m.tool_calls, *m.invalid_tool_calls]]
            assert all(ids), ids
            seen_calls += ids
            pending = set(ids)
    assert not pending, f"unanswered at the end: {pending}"
    assert len(set(seen_calls)) == len(seen_calls), seen_calls


def run(model: Script, mw: MendMiddleware | None, *history: BaseMessage, middleware: list | None = None) -> list[BaseMessage]:
    chain = [*(middleware or []), *([mw] if mw is not None else [])]
    agent = create_agent(model, TOOLS, middleware=chain)
    out = agent.invoke({"messages": list(history) or [HumanMessage("hi")]})
    return out["messages"]


def results(messages: list[BaseMessage]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def ais(messages: list[BaseMessage]) -> list[AIMessage]:
    return [m for m in messages if isinstance(m, AIMessage)]


# ---- repair of what the stock agent drops -------------------------------------------------


def test_broken_json_in_invalid_tool_calls_is_repaired_and_run_where_the_stock_agent_ends():
    broken = AIMessage("", invalid_tool_calls=[invalid("get_weather", "{'city': 'Paris', 'units': 'celsius',}", "c1")])

    # Stock: a message whose calls are all invalid ends the run; nothing is answered.
    stock = run(script(broken.model_copy(), AIMessage("never reached")), None)
    assert [type(m).__name__ for m in stock] == ["HumanMessage", "AIMessage"]
    assert RAN == []

    out = run(script(broken, AIMessage("21 degrees in Paris.")), MendMiddleware())
    assert RAN == [("get_weather", {"city": "Paris", "units": "celsius"})]
    assert results(out)["c1"].content == "Paris: 21 celsius"
    assert out[-1].content == "21 degrees in Paris."
    first = ais(out)[0]
    # The history keeps the mended call: same message, valid arguments, nothing invalid.
    assert first.invalid_tool_calls == [] and first.tool_calls[0]["args"] == {"city": "Paris", "units": "celsius"}
    answered_once(out)


def test_leaked_thinking_and_a_fenced_call_are_cleaned():
    msg = AIMessage(
        "<think>The user wants a sum.</think>Adding now.",
        invalid_tool_calls=[invalid("add", '<think>1 and 2</think>```json\n{"a": 1, "b": 2}\n```', "c1")],
    )
    model = script(msg, AIMessage("3"))
    out = run(model, MendMiddleware())
    assert RAN == [("add", {"a": 1, "b": 2})]
    first = ais(out)[0]
    assert first.content == "Adding now."  # the leak is gone from the history
    # ... and from what the model is sent on its next turn.
    assert all("<think>" not in str(m.content) for m in model.seen[1])
    answered_once(out)


def test_kimi_k3_reply_tokens_leave_the_content():
    # The template's tokens around the reply are no prose (docs/formats.md, Kimi K3).
    msg = AIMessage(
        "<|open|>response<|sep|>Adding now.<|close|>response<|sep|>",
        invalid_tool_calls=[invalid("add", '{"a": 1, "b": 2}', "c1")],
    )
    out = run(script(msg, AIMessage("3")), MendMiddleware())
    assert RAN == [("add", {"a": 1, "b": 2})]
    assert ais(out)[0].content == "Adding now."
    answered_once(out)


def test_a_call_written_into_the_text_is_run():
    msg = AIMessage('<think>hmm</think><tool_call>{"name": "add", "arguments": {"a": 2, "b": 2}}</tool_call>')
    out = run(script(msg, AIMessage("4")), MendMiddleware())
    assert RAN == [("add", {"a": 2, "b": 2})]
    first = ais(out)[0]
    assert first.content == "" and first.tool_calls[0]["name"] == "add"
    answered_once(out)
    # Without the middleware the text is the final answer.
    stock = run(script(msg.model_copy(), AIMessage("4")), None)
    assert len(stock) == 2 and RAN == [("add", {"a": 2, "b": 2})]


def test_a_call_written_into_content_blocks_is_run_and_the_other_blocks_stay():
    image = {"type": "image", "source_type": "url", "url": "https://example.test/a.png"}
    msg = AIMessage([image, {"type": "text", "text": 'Adding.<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'}])
    out = run(script(msg, AIMessage("5")), MendMiddleware())
    assert RAN == [("add", {"a": 2, "b": 3})]
    first = ais(out)[0]
    assert first.content == [image, {"type": "text", "text": "Adding."}]
    assert first.tool_calls[0]["name"] == "add"
    answered_once(out)


def test_a_misnamed_key_and_an_enum_case_are_fixed_and_recorded():
    events: list[dict] = []
    msg = AIMessage("", tool_calls=[call("get_weather", {"town": "Oslo", "units": "Celsius"}, "c1")])
    mw = MendMiddleware(on_stats=events.append)
    out = run(script(msg, AIMessage("ok")), mw)
    assert RAN == [("get_weather", {"city": "Oslo", "units": "celsius"})]
    assert ais(out)[0].tool_calls[0]["args"] == {"city": "Oslo", "units": "celsius"}
    (stats,) = events  # the final answer has no calls: nothing to report
    (rec,) = stats["calls"]
    assert stats["node"] == "MendMiddleware" and rec["outcome"] == "executed"
    assert {f["kind"] for f in rec["fixes"]} >= {"key_renamed", "enum_case_fixed"}
    assert mw.stats["fix:key_renamed"] == 1 and mw.stats["outcome:executed"] == 1

    # Stock: the tool's own validation rejects both; the model gets pydantic's error.
    stock = run(script(msg.model_copy(), AIMessage("ok")), None)
    assert RAN == [("get_weather", {"city": "Oslo", "units": "celsius"})]  # only the mended run
    assert results(stock)["c1"].status == "error"


# ---- what stays invalid --------------------------------------------------------------------


def test_a_missing_value_gets_feedback_and_the_model_is_asked_again():
    model = script(
        AIMessage("", tool_calls=[call("get_weather", {}, "c1"), call("add", {"a": 1, "b": 2}, "c2")]),
        AIMessage("", tool_calls=[call("get_weather", {}, "c3")]),
        AIMessage("", tool_calls=[call("get_weather", {"city": "Rome"}, "c4")]),
        AIMessage("Rome: 21."),
    )
    out = run(model, MendMiddleware())
    # Only the valid calls ran; the invalid ones were answered and never executed.
    assert RAN == [("add", {"a": 1, "b": 2}), ("get_weather", {"city": "Rome", "units": "celsius"})]
    res = results(out)
    assert res["c1"].status == "error" and "city: required" in res["c1"].content
    assert res["c1"].content.startswith("Error invoking tool 'get_weather'")  # LangGraph's frame
    assert res["c2"].content == "3"
    # A turn whose only call was answered with feedback goes back to the model.
    assert res["c3"].status == "error"
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "c3" for m in model.seen[2])
    assert out[-1].content == "Rome: 21."
    answered_once(out)


def test_model_call_limits_still_count_turns_of_bad_calls():
    # The middleware answers bad calls without jumping (a jump would skip the other
    # after_model hooks, where ModelCallLimitMiddleware counts), so the limit holds.
    model = script(*[AIMessage("", tool_calls=[call("get_weather", {}, f"c{i}")]) for i in range(10)])
    out = run(model, MendMiddleware(), middleware=[ModelCallLimitMiddleware(run_limit=3)])
    assert len(model.seen) == 3 and RAN == []
    assert "limit" in out[-1].content
    answered_once(out)


def test_a_truncated_call_gets_feedback_unless_truncation_is_accepted():
    def cut() -> AIMessage:
        return AIMessage("", invalid_tool_calls=[invalid("get_weather", '{"units": "celsius", "city": "Par', "c1")])

    out = run(script(cut(), AIMessage("sorry")), MendMiddleware())
    assert RAN == []
    assert "cut off" in results(out)["c1"].content
    answered_once(out)

    out = run(script(cut(), AIMessage("done")), MendMiddleware(accept_truncated=["get_weather"]))
    assert RAN == [("get_weather", {"city": "Par", "units": "celsius"})]  # what could be read
    answered_once(out)


def test_raise_stops_the_agent_before_any_call_runs():
    msg = AIMessage("", tool_calls=[call("add", {"a": 1, "b": 1}, "ok"), call("add", {"a": 1}, "bad")])
    with pytest.raises(ToolCallValidationError) as err:
        run(script(msg), MendMiddleware(on_unresolved="raise"))
    assert RAN == []
    assert [(f[0], f[1]) for f in err.value.failures] == [("add", "bad")]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_hook_salvages_arguments(asynchronous):
    seen: list[UnresolvedToolCall] = []

    def salvage(u: UnresolvedToolCall) -> Any:
        seen.append(u)
        return {"a": 1, "b": 41} if u.tool_call_id == "c1" else "Use add with two integers."

    async def asalvage(u: UnresolvedToolCall) -> Any:
        return salvage(u)

    msg = AIMessage("", invalid_tool_calls=[invalid("add", '{"a": "one"', "c1"), invalid("add", "{}", "c2")])
    model = script(msg, AIMessage("42"))
    agent = create_agent(model, TOOLS, middleware=[MendMiddleware(on_unresolved=asalvage if asynchronous else salvage)])
    request = {"messages": [HumanMessage("the answer")]}
    out = (asyncio.run(agent.ainvoke(request)) if asynchronous else agent.invoke(request))["messages"]
    assert RAN == [("add", {"a": 1, "b": 41})]
    res = results(out)
    assert res["c1"].content == "42"
    assert res["c2"].content == "Use add with two integers." and res["c2"].status == "error"
    assert seen[0].original_args == '{"a": "one"' and seen[0].messages[0].content == "the answer"
    assert seen[0].state is not None and "messages" in seen[0].state
    answered_once(out)


def test_validators_answer_calls_the_schema_accepts():
    seen: list[ValidatorContext] = []

    def no_negatives(args: dict, ctx: ValidatorContext) -> str | None:
        seen.append(ctx)
        return "a must not be negative" if args["a"] < 0 else None

    msg = AIMessage("", tool_calls=[call("add", {"a": -1, "b": 1}, "c1"), call("add", {"a": 1, "b": 1}, "c2")])
    out = run(script(msg, AIMessage("2")), MendMiddleware(validators={"add": no_negatives}))
    assert RAN == [("add", {"a": 1, "b": 1})]
    assert "a must not be negative" in results(out)["c1"].content
    assert {c.tool_call_id for c in seen} == {"c1", "c2"} and seen[0].phase == "initial"
    answered_once(out)


def test_a_correction_model_fixes_what_rules_cannot():
    corrector = Corrector(
        script=[AIMessage("", tool_calls=[call("add", {"a": 1, "b": 2}, "fix")])], seen=[], bound=[]
    )
    msg = AIMessage("", tool_calls=[call("add", {"a": "one", "b": "two"}, "c1")])
    model = script(msg, AIMessage("3"))
    events: list[dict] = []
    out = run(
        model,
        MendMiddleware(correction_model=corrector, on_stats=events.append),
        SystemMessage("SECRET"),
        HumanMessage("add one and two"),
    )
    assert RAN == [("add", {"a": 1, "b": 2})]
    assert ais(out)[0].tool_calls[0]["args"] == {"a": 1, "b": 2}
    prompt = corrector.seen[0][-1].content
    assert "[user] add one and two" in prompt and "SECRET" not in prompt
    assert corrector.bound == ["add"]
    assert events[0]["calls"][0]["outcome"] == "corrected"
    # The correction traffic never enters the agent's history.
    assert all("Invalid arguments" not in str(m.content) for m in out)
    answered_once(out)


def test_a_merged_call_runs_as_one_call_per_value():
    msg = AIMessage("", tool_calls=[call("get_weather", {"city": ["Paris", "Rome"]}, "c1")])
    events: list[dict] = []
    out = run(script(msg, AIMessage("ok")), MendMiddleware(on_stats=events.append))
    assert sorted(r[1]["city"] for r in RAN) == ["Paris", "Rome"]
    assert [(c["id"], c["args"]["city"]) for c in ais(out)[0].tool_calls] == [("c1", "Paris"), ("c1_2", "Rome")]
    assert set(results(out)) == {"c1", "c1_2"}
    assert all("merged_call_split" in [f["kind"] for f in c["fixes"]] for c in events[0]["calls"]), events
    answered_once(out)


def test_a_correction_that_drops_values_the_model_sent_is_not_taken():
    # A merged call (two cities for one), with splitting off, "corrected" by dropping one:
    # never run as clean.
    drop = AIMessage("", tool_calls=[call("get_weather", {"city": "Paris"}, "fix")])
    corrector = Corrector(script=[drop, drop], seen=[], bound=[])
    msg = AIMessage("", tool_calls=[call("get_weather", {"city": ["Paris", "Rome"]}, "c1")])
    events: list[dict] = []
    out = run(
        script(msg, AIMessage("ok")),
        MendMiddleware(
            correction_model=corrector, on_stats=events.append, coerce={"split_merged_calls": False}
        ),
        HumanMessage("weather in Paris and Rome"),
    )
    assert RAN == []
    assert len(corrector.seen) == 2, "the dropping answer was asked about again"
    text = results(out)["c1"].content
    assert "one call per value" in text, text
    assert events[0]["calls"][0]["outcome"] != "corrected"
    answered_once(out)


def test_check_answer_flags_values_the_first_call_sent():
    from toolmend import Toolbox

    box = Toolbox([{"name": "quote", "parameters": {"type": "object",
        "properties": {"symbols": {"type": "array", "items": {"type": "string"}}}, "required": ["symbols"]}}])
    first = {"symbols": ["AAPL", "GOOGL", "MSFT"]}
    lost = box.check_answer("quote", {"symbols": ["AAPL"]}, first=first)
    assert lost["outcome"] == "feedback"
    assert sorted(i["path"] for i in lost["issues"] if i["kind"] == "values_lost") == ["/symbols/1", "/symbols/2"]
    kept = box.check_answer("quote", {"symbols": ["MSFT", "AAPL", "GOOGL"]}, first=first)
    assert kept["outcome"] == "valid"
    # Without the first reading nothing is compared (the old contract).
    assert box.check_answer("quote", {"symbols": ["AAPL"]})["outcome"] == "valid"


def test_ids_are_settled_before_the_router_sends_anything():
    msg = AIMessage(
        "",
        tool_calls=[call("add", {"a": 1, "b": 1}, "dup"), call("add", {"a": 2, "b": 2}, "dup"), call("add", {"a": 3, "b": 3}, None)],
    )
    out = run(script(msg, AIMessage("", tool_calls=[call("add", {"a": 4, "b": 4}, "dup")]), AIMessage("done")), MendMiddleware())
    assert sorted(RAN, key=lambda r: r[1]["a"]) == [("add", {"a": n, "b": n}) for n in (1, 2, 3, 4)]
    ids = [c["id"] for m in ais(out) for c in m.tool_calls]
    assert ids[:2] == ["dup", "dup_2"] and ids[2] and ids[3] not in ids[:3]
    answered_once(out)


def test_an_unknown_tool_keeps_the_agents_own_answer():
    msg = AIMessage("", tool_calls=[call("search", {"q": "x"}, "c1")])
    out = run(script(msg, AIMessage("ok")), MendMiddleware())
    assert "is not a valid tool" in results(out)["c1"].content
    answered_once(out)


def test_nothing_changes_when_nothing_needs_mending():
    mw = MendMiddleware(tools=TOOLS)
    good = AIMessage("", id="ai1", tool_calls=[call("add", {"a": 1, "b": 2}, "c1")])
    assert mw.after_model({"messages": [HumanMessage("hi", id="h1"), good]}, None) is None
    done = {"messages": [HumanMessage("hi", id="h1"), good, ToolMessage("3", tool_call_id="c1", id="t1")]}
    assert mw.before_model(done, None) is None
    assert mw.after_model({"messages": [HumanMessage("hi", id="h1"), AIMessage("plain", id="a2")]}, None) is None
    # Calls are planned as the node plans them: a valid call is the very dict it was.
    out = run(script(good.model_copy(), AIMessage("3")), mw)
    assert ais(out)[0].tool_calls == good.tool_calls and RAN == [("add", {"a": 1, "b": 2})]


def test_the_update_replaces_the_message_by_id_and_answers_in_place():
    mw = MendMiddleware(tools=TOOLS)
    msg = AIMessage("", id="ai1", tool_calls=[call("add", {"a": "1", "b": 2}, "c1"), call("add", {"a": 1}, "c2")])
    update = mw.after_model({"messages": [HumanMessage("hi", id="h1"), msg]}, None)
    mended, answer = update["messages"]
    assert mended.id == "ai1" and [c["id"] for c in mended.tool_calls] == ["c1", "c2"]
    assert mended.tool_calls[0]["args"] == {"a": 1, "b": 2}
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "c2" and answer.status == "error"
    assert "jump_to" not in update  # the router goes back to the model by itself


# ---- beside other middleware ---------------------------------------------------------------


def test_listed_last_human_approval_sees_the_repaired_calls():
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    def turn() -> AIMessage:
        return AIMessage("", invalid_tool_calls=[invalid("add", "{'a': 1, 'b': 2,}", "c1")])

    hitl = HumanInTheLoopMiddleware(interrupt_on={"add": True})
    cfg = {"configurable": {"thread_id": "t"}}
    # Stock: an invalid call is never put up for approval; the run just ends.
    stock = create_agent(script(turn()), TOOLS, middleware=[hitl], checkpointer=InMemorySaver())
    assert "__interrupt__" not in stock.invoke({"messages": [HumanMessage("hi")]}, cfg)

    agent = create_agent(script(turn(), AIMessage("3")), TOOLS, middleware=[hitl, MendMiddleware()], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("hi")]}, cfg)
    (request,) = out["__interrupt__"][0].value["action_requests"]
    assert request["args"] == {"a": 1, "b": 2}  # what will run, as it will run
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    assert RAN == [("add", {"a": 1, "b": 2})]
    answered_once(out["messages"])


def test_a_second_answer_from_a_later_hook_is_dropped_before_the_model_sees_it():
    # ToolCallLimitMiddleware's after_model runs after this one's and answers a call that
    # already has feedback: two results for one id. before_model repairs that.
    from langchain.agents.middleware import ToolCallLimitMiddleware

    def turn() -> AIMessage:
        return AIMessage("", tool_calls=[call("add", {"a": 1, "b": 1}, "c1"), call("add", {"a": 1}, "c2")])

    limit = ToolCallLimitMiddleware(run_limit=1)
    model = script(turn(), AIMessage("done"))
    run(model, MendMiddleware(sanitize_history=False), middleware=[limit])
    with pytest.raises(AssertionError, match="second result: c2"):
        answered_once(model.seen[1])

    model = script(turn(), AIMessage("done"))
    out = run(model, MendMiddleware(), middleware=[limit])
    answered_once(model.seen[1])
    answered_once(out)
    assert "b: required" in results(out)["c2"].content  # the first answer stays


# ---- the history -------------------------------------------------------------------------------


def test_before_model_makes_a_broken_history_valid():
    history = [
        HumanMessage("hi", id="h1"),
        AIMessage("", id="a1", tool_calls=[call("add", {"a": 1, "b": 1}, "x1"), call("add", {"a": 2, "b": 2}, "x2")]),
        ToolMessage("2", tool_call_id="x1", id="t1"),
        # x2 was never answered
        HumanMessage("and now?", id="h2"),
        ToolMessage("stale", tool_call_id="nobody", id="t2"),  # an orphan
        AIMessage("", id="a2", invalid_tool_calls=[invalid("add", "{'a': 1", "x3")]),
        ToolMessage("could not run", tool_call_id="x3", id="t3"),  # answers an invalid call: kept
        HumanMessage("go on", id="h3"),
    ]
    mw = MendMiddleware(tools=TOOLS)
    update = mw.before_model({"messages": history}, None)
    remove, *new = update["messages"]
    assert isinstance(remove, RemoveMessage)
    answered_once(new)
    assert [m.id for m in new if m.id] == ["h1", "a1", "t1", "h2", "a2", "t3", "h3"]
    synth = next(m for m in new if isinstance(m, ToolMessage) and m.tool_call_id == "x2")
    assert synth.status == "error" and synth.name == "add" and "never answered" in synth.content
    assert new[0] is history[0] and new[1] is history[1]  # unchanged messages are the same objects
    assert mw.stats["history:result_synthesized"] == 1 and mw.stats["history:result_dropped"] == 1
    # A valid history is left alone.
    assert mw.before_model({"messages": new}, None) is None

    # In the agent: the model is sent the valid history, and the state keeps it.
    model = script(AIMessage("fine"))
    out = run(model, MendMiddleware(), *history)
    answered_once(model.seen[0])
    answered_once(out)
    # Stock: the orphan and the unanswered call go to the provider as they are.
    stock_model = script(AIMessage("fine"))
    run(stock_model, None, *history)
    with pytest.raises(AssertionError):
        answered_once(stock_model.seen[0])


def test_repeated_ids_and_misplaced_results_in_the_history():
    history = [
        HumanMessage("hi", id="h1"),
        AIMessage("", id="a1", tool_calls=[call("add", {"a": 1, "b": 1}, "x")]),
        ToolMessage("2", tool_call_id="x", id="t1"),
        AIMessage("", id="a2", tool_calls=[call("add", {"a": 2, "b": 2}, "x")]),  # id reused
        HumanMessage("hurry", id="h2"),
        ToolMessage("4", tool_call_id="x", id="t2"),  # out of place
    ]
    update = MendMiddleware(tools=TOOLS, sanitize_history="rehome").before_model({"messages": history}, None)
    new = update["messages"][1:]
    answered_once(new)
    a2 = next(m for m in new if m.id == "a2")
    assert a2.tool_calls[0]["id"] == "x_2" and a2.tool_calls[0]["args"] == {"a": 2, "b": 2}
    moved = next(m for m in new if m.id == "t2")
    assert moved.tool_call_id == "x_2" and new.index(moved) == new.index(a2) + 1


def test_trim_keeps_the_system_and_first_human_message_and_whole_groups():
    history: list[BaseMessage] = [SystemMessage("be brief", id="s"), HumanMessage("first", id="h0")]
    for n in range(5):
        history += [
            AIMessage("", id=f"a{n}", tool_calls=[call("add", {"a": n, "b": n}, f"c{n}"), call("add", {"a": n, "b": 0}, f"d{n}")]),
            ToolMessage(str(2 * n), tool_call_id=f"c{n}", id=f"tc{n}"),
            ToolMessage(str(n), tool_call_id=f"d{n}", id=f"td{n}"),
        ]
    history.append(HumanMessage("last", id="hl"))
    mw = MendMiddleware(tools=TOOLS, max_history_messages=8)
    new = mw.before_model({"messages": history}, None)["messages"][1:]
    # The group a3 (3 messages) would make 9: it goes whole, never half of it.
    assert [m.id for m in new] == ["s", "h0", "a4", "tc4", "td4", "hl"]
    assert mw.stats["history:trimmed"] == len(history) - len(new)
    new = MendMiddleware(tools=TOOLS, max_history_messages=4).before_model({"messages": history}, None)["messages"][1:]
    assert [m.id for m in new] == ["s", "h0", "hl"]
    new = MendMiddleware(tools=TOOLS, max_history_tokens=120).before_model({"messages": history}, None)["messages"][1:]
    assert [m.id for m in new] == ["s", "h0", "a3", "tc3", "td3", "a4", "tc4", "td4", "hl"]

    # By tokens, in the agent: the model never sees a split group.
    model = script(AIMessage("ok"))
    run(model, MendMiddleware(max_history_tokens=60, history_encoding="bytes"), *history)
    sent = model.seen[0]
    answered_once(sent)
    assert sent[0].content == "be brief" and sent[1].content == "first" and len(sent) < len(history)


def test_given_tools_are_checked_at_construction():
    with pytest.raises(ValueError, match="no tool named"):
        MendMiddleware(tools=TOOLS, validators={"ad": lambda a, c: None})
    with pytest.raises(ValueError, match="on_unresolved"):
        MendMiddleware(on_unresolved="ignore")
    with pytest.raises(ValueError, match="not both"):
        MendMiddleware(max_history_messages=5, max_history_tokens=100)
    # Plain functions are accepted, as create_agent accepts them.

    def mul(a: int, b: int) -> int:
        """Multiply."""
        return a * b

    mw = MendMiddleware(tools=[mul])
    update = mw.after_model({"messages": [HumanMessage("hi"), AIMessage("", id="a", tool_calls=[call("mul", {"a": "2", "b": 3}, "c")])]}, None)
    assert update["messages"][0].tool_calls[0]["args"] == {"a": 2, "b": 3}


def test_the_async_agent_mends_too():
    async def checks(args: dict, ctx: ValidatorContext) -> None:
        await asyncio.sleep(0)
        return None

    corrector = Corrector(script=[AIMessage("", tool_calls=[call("add", {"a": 5, "b": 5}, "f")])], seen=[], bound=[])
    model = script(
        AIMessage("", invalid_tool_calls=[invalid("add", "{'a': 'five', 'b': 'five'}", "c1")]),
        AIMessage("", tool_calls=[call("get_weather", {"town": "Lima"}, "c2")]),
        AIMessage("done"),
    )
    mw = MendMiddleware(correction_model=corrector, validators={"add": checks})
    agent = create_agent(model, TOOLS, middleware=[mw])
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}))["messages"]
    assert RAN == [("add", {"a": 5, "b": 5}), ("get_weather", {"city": "Lima", "units": "celsius"})]
    assert mw.stats["outcome:corrected"] == 1
    answered_once(out)


TEXT_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": "5"}}\n</tool_call>'

#: kind -> (the model's first answer, what must have run, a text each result must hold)
KINDS: dict[str, tuple[AIMessage, list, list[str]]] = {
    "invalid_json": (AIMessage("", invalid_tool_calls=[invalid("add", "{'a': 1, 'b': 2,}", "c1")]),
                     [("add", {"a": 1, "b": 2})], ["3"]),
    "text_call_string": (AIMessage("Adding.\n" + TEXT_CALL), [("add", {"a": 2, "b": 5})], ["7"]),
    "text_call_blocks": (AIMessage([{"type": "text", "text": "Adding.\n"}, {"type": "text", "text": TEXT_CALL}]),
                         [("add", {"a": 2, "b": 5})], ["7"]),
    "unknown_tool": (AIMessage("", tool_calls=[call("launch", {}, "c1")]), [], ["launch"]),
    "parallel_one_broken": (AIMessage("", tool_calls=[call("get_weather", {"city": "Oslo"}, "c1")],
                                      invalid_tool_calls=[invalid("add", '{"a": 1', "c2")]),
                            [("get_weather", {"city": "Oslo", "units": "celsius"})], ["Oslo: 21 celsius", "add"]),
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_create_agent_with_the_middleware_answers_every_broken_kind_once(kind, mode):
    first, ran, holds = KINDS[kind]
    agent = create_agent(script(first.model_copy(deep=True), AIMessage("Done.")), TOOLS, middleware=[MendMiddleware()])
    start = {"messages": [HumanMessage("go")]}
    out = agent.invoke(start) if mode == "sync" else asyncio.run(agent.ainvoke(start))
    messages = out["messages"]
    assert messages[-1].content == "Done."
    answered_once(messages)
    assert RAN == ran
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == len(holds)
    for text in holds:
        assert any(text in r for r in results), (text, results)


def test_the_middleware_takes_the_nodes_schema_and_scope_options():
    from langchain_core.tools import StructuredTool

    broken = StructuredTool.from_function(
        func=lambda **kw: "ran", name="broken", description="A broken schema.",
        args_schema={"type": "object", "properties": {"a": {"type": "no-such-type"}}},
    )
    with pytest.raises(ValueError, match="tool 'broken': its argument schema cannot be compiled"):
        MendMiddleware(tools=[broken, add])
    with pytest.warns(UserWarning, match="tool 'broken'.*opened up"):
        MendMiddleware(tools=[broken, add], broken_schema="open")
    with pytest.raises(ValueError, match="correction_scope"):
        MendMiddleware(correction_scope="loose")
