"""Flood control and loop detection (``guard=``) in the LangGraph ToolNode and the
LangChain middleware, with the real packages and scripted models (no network): the
core's ``RuleGuard`` through ``toolmend._core.Guard``."""

from __future__ import annotations

import asyncio
import itertools
import re
import shutil
import socket
import subprocess
from typing import Any

import pytest
from _servers import wait_until
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from toolmend import FLOOD_PREFIX, UNCHECKED_PREFIX, Guard, ToolCallLimitExceededError
from toolmend.langchain import MendMiddleware
from toolmend.langgraph import ToolNode, ended_by_guard, tools_condition

RAN: list[tuple[str, dict]] = []
POLLS = itertools.count()


@pytest.fixture(autouse=True)
def _clear():
    RAN.clear()


@tool
def get_weather(city: str, days: int = 1) -> str:
    """Weather for a city."""
    RAN.append(("get_weather", {"city": city, "days": days}))
    return f"{city}: sunny for {days} day(s)"


@tool
def search(q: str) -> str:
    """Search the web."""
    RAN.append(("search", {"q": q}))
    return "no results"  # the same answer every time: a loop makes no progress


@tool
def poll(job: int) -> str:
    """The status of a job."""
    RAN.append(("poll", {"job": job}))
    return f"job {job}: {next(POLLS)}% done"  # a new answer every time: progress


TOOLS = [get_weather, search, poll]


class Script(BaseChatModel):
    """The agent's model: answers from a script; counts its calls."""

    script: list[Any]
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "agent-script"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


def thread(t: str) -> dict[str, Any]:
    """A run of thread ``t`` (the node invoked on its own needs a runtime too)."""
    return {"configurable": {"thread_id": t, "__pregel_runtime": Runtime()}}


def call(name: str, args: dict, id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def ai(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=list(calls))


def answers(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def graph(model: BaseChatModel, node: ToolNode, checkpointer: Any = None):
    """The usual agent loop; out of the tool node by a condition (a static edge would
    still fire after the node's Command(goto=END))."""
    g = StateGraph(MessagesState)
    g.add_node("model", lambda s: {"messages": [model.invoke(s["messages"])]})
    g.add_node("tools", node)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition, {"tools": "tools", "__end__": END})
    g.add_conditional_edges("tools", lambda s: END if ended_by_guard(s) else "model")
    return g.compile(checkpointer=checkpointer)


def agent(model: BaseChatModel, mw: MendMiddleware, checkpointer: Any = None):
    return create_agent(model, TOOLS, middleware=[mw], checkpointer=checkpointer)


# ---- the Guard itself ----------------------------------------------------------------


def test_configuration_errors_name_the_key():
    with pytest.raises(ValueError, match=r"guard\.sesion: unknown field"):
        Guard({"sesion": {"limit": 2, "window_secs": 60}})
    with pytest.raises(ValueError, match=r"^guard\.session\.limit: must be between 1"):
        Guard(session={"limit": 0, "window_secs": 60})
    with pytest.raises(ValueError, match=r"guard\.tools\.pay\.limits\.exit_behavior: unknown variant `stop`"):
        Guard(tools={"pay": {"limits": {"thread_limit": 1, "exit_behavior": "stop"}}})
    with pytest.raises(ValueError, match=r"^guard\.repeat: the steps must grow"):
        Guard(repeat={"observe": 3, "block": 2})
    with pytest.raises(ValueError, match=r"^fail="):
        Guard(session={"limit": 1, "window_secs": 1}, fail="maybe")
    with pytest.raises(ValueError, match=r"guard\.tools\.pay\.limits: set thread_limit, run_limit or both"):
        Guard(repeat={"block": 3}).declare_tool("pay", {"limits": {}})
    with pytest.raises(TypeError, match="guard="):
        ToolNode(TOOLS, guard=5)
    g = Guard({"session": {"limit": 5, "window_secs": 60}}, repeat={"block": 3, "stop": 6}, fail="closed", timeout_ms=50)
    assert g.enabled and g.store == "memory"
    assert g.config["session"]["limit"] == 5 and g.config["repeat"]["stop"] == 6
    # A guard that checks nothing is never silently off: it says so where it is made.
    with pytest.warns(UserWarning, match=r"without any rule checks nothing"):
        assert not Guard().enabled


# ---- windows -------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_session_window_refuses_the_call_past_the_limit(asynchronous):
    stats: list[dict] = []
    node = ToolNode(TOOLS, guard={"session": {"limit": 2, "window_secs": 60}}, on_stats=stats.append)
    msg = ai(*(call("get_weather", {"city": c}, f"c{i}") for i, c in enumerate(["Rome", "Paris", "Oslo"])))
    run = (lambda m, cfg: asyncio.run(node.ainvoke(m, config=cfg))) if asynchronous else (
        lambda m, cfg: node.invoke(m, config=cfg)
    )
    out = run([HumanMessage("weather"), msg], thread("t1"))
    got = answers(out)
    assert [got[f"c{i}"].status for i in range(3)] == ["success", "success", "error"]
    refusal = got["c2"].content
    assert refusal.startswith(FLOOD_PREFIX) and "rule session_window" in refusal, refusal
    assert "2 calls admitted in this session within 60 s, limit 2; this one is refused." in refusal
    assert "Retry after" in refusal
    assert sorted(a["city"] for _, a in RAN) == ["Paris", "Rome"]
    rec = stats[-1]["calls"][2]
    assert rec["outcome"] == "flooded" and rec["note"] == refusal
    assert rec["guard"][0]["rule"] == "session_window" and rec["guard"][0]["retry_after_ms"] == 60000
    assert node.stats["outcome:flooded"] == 1
    # The window is the thread's: another thread has its own; past the limit in t1 still.
    two = ai(*msg.tool_calls[:2])
    assert all(m.status == "success" for m in answers(run([HumanMessage("w"), two], thread("t2"))).values())
    assert all(m.status == "error" for m in answers(run([HumanMessage("w"), two], thread("t1"))).values())


def test_duplicate_calls_collapse_after_mending():
    # Reordered keys and a number sent as a string are one call once mended.
    node = ToolNode(TOOLS, guard={"duplicate": {"window_secs": 60}})
    msg = ai(
        call("get_weather", {"city": "Rome", "days": 3}, "a"),
        call("get_weather", {"days": "3", "city": "Rome"}, "b"),
        call("get_weather", {"city": "Rome", "days": 4}, "c"),
    )
    got = answers(node.invoke([HumanMessage("hi"), msg], config=thread("t")))
    assert got["a"].status == "success" and got["c"].status == "success"
    assert got["b"].status == "error" and got["b"].content.startswith(FLOOD_PREFIX)
    assert "rule duplicate" in got["b"].content
    assert RAN == [("get_weather", {"city": "Rome", "days": 3}), ("get_weather", {"city": "Rome", "days": 4})]


def test_the_middleware_refuses_duplicates_before_the_tools():
    model = Script(script=[
        ai(call("get_weather", {"city": "Rome", "days": 3}, "a"), call("get_weather", {"days": "3", "city": "Rome"}, "b")),
        AIMessage("Sunny."),
    ])
    mw = MendMiddleware(guard=Guard(duplicate={"window_secs": 60}))
    out = agent(model, mw).invoke({"messages": [HumanMessage("weather")]}, config=thread("m"))
    got = answers(out["messages"])
    assert got["a"].status == "success"
    assert got["b"].status == "error" and got["b"].content.startswith(FLOOD_PREFIX + ": rule duplicate")
    assert len(RAN) == 1 and out["messages"][-1].content == "Sunny."
    assert mw.stats["outcome:flooded"] == 1


# ---- a guard that breaks --------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("front", ["node", "middleware"])
@pytest.mark.parametrize("kind", ["panics", "hangs", "short"])
def test_a_broken_guard_refuses_the_calls_it_left_unjudged(kind, front, asynchronous):
    # The core's guard stage: a store that panics, a local one that never answers, one
    # that answers for the first call only (judged by fail = "closed"): no call runs.
    from toolmend._core import _broken_guard

    guard = _broken_guard(kind, {"session": {"limit": 100, "window_secs": 60}}, fail="closed")
    msg = ai(call("get_weather", {"city": "Rome"}, "a"), call("search", {"q": "x"}, "b"))
    model = Script(script=[msg, AIMessage("done")])
    stats: list[dict] = []
    if front == "node":
        app = graph(model, ToolNode(TOOLS, guard=guard, on_stats=stats.append))
    else:
        app = agent(model, MendMiddleware(guard=guard, on_stats=stats.append))
    start = {"messages": [HumanMessage("go")]}
    cfg = thread(f"broken-{kind}")
    out = asyncio.run(app.ainvoke(start, config=cfg)) if asynchronous else app.invoke(start, config=cfg)
    got = answers(out["messages"])
    assert RAN == []
    assert sorted(got) == ["a", "b"] and all(m.status == "error" for m in got.values())
    expected = {
        "panics": "the call was not run: the flood guard failed",
        "hangs": "the call was not run: the flood guard did not answer in time",
        "short": "rule store_unavailable",
    }[kind]
    assert all(expected in m.content for m in got.values()), [m.content for m in got.values()]
    assert [c["outcome"] for c in stats[-1]["calls"]] == ["flooded", "flooded"]


# ---- loops ---------------------------------------------------------------------------


LADDER = {"repeat": {"observe": 2, "block": 3, "stop": 6}}


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("front", ["node", "middleware"])
def test_a_loop_of_one_call_is_stopped_at_the_ladders_stop(front, asynchronous):
    model = Script(script=[ai(call("search", {"q": "x"}, f"s{i}")) for i in range(20)] + [AIMessage("done")])
    stats: list[dict] = []
    if front == "node":
        app = graph(model, ToolNode(TOOLS, guard=LADDER, on_stats=stats.append))
    else:
        app = agent(model, MendMiddleware(guard=LADDER, on_stats=stats.append))
    start = {"messages": [HumanMessage("find x")]}
    if asynchronous:
        out = asyncio.run(app.ainvoke(start, config=thread("loop")))
    else:
        out = app.invoke(start, config=thread("loop"))
    messages = out["messages"]
    # Calls 1 and 2 run, 3 to 5 are refused, the 6th ends the run: six model turns.
    assert model.calls == 6
    assert RAN == [("search", {"q": "x"})] * 2
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == 6
    assert all(m.content.startswith(FLOOD_PREFIX + ": rule repeat") for m in results[2:])
    assert "The run is ended." in results[5].content
    last = messages[-1]
    assert isinstance(last, AIMessage) and not last.tool_calls and "rule repeat" in last.content
    assert stats[-1]["stopped"] == results[5].content
    assert [s["calls"][0]["outcome"] for s in stats] == ["executed"] * 2 + ["flooded"] * 4


def test_polling_a_result_that_changes_is_not_stopped():
    model = Script(script=[ai(call("poll", {"job": 7}, f"p{i}")) for i in range(20)] + [AIMessage("done")])
    app = graph(model, ToolNode(TOOLS, guard=LADDER))
    out = app.invoke({"messages": [HumanMessage("wait for job 7")]}, config=thread("poll"))
    assert len(RAN) == 20 and out["messages"][-1].content == "done"
    assert not any(FLOOD_PREFIX in str(m.content) for m in out["messages"])


# ---- budgets -------------------------------------------------------------------------


def test_thread_limit_counts_across_invocations_of_one_thread():
    model = Script(script=[
        ai(call("get_weather", {"city": "Rome"}, "a1"), call("get_weather", {"city": "Oslo"}, "a2")),
        AIMessage("one"),
        ai(call("get_weather", {"city": "Lima"}, "b1"), call("get_weather", {"city": "Pisa"}, "b2")),
        AIMessage("two"),
        ai(call("get_weather", {"city": "Bern"}, "c1")),
        AIMessage("three"),
    ])
    app = graph(model, ToolNode(TOOLS, guard={"limits": {"thread_limit": 3}}), InMemorySaver())
    app.invoke({"messages": [HumanMessage("first")]}, config=thread("T"))
    out = app.invoke({"messages": [HumanMessage("second")]}, config=thread("T"))
    got = answers(out["messages"])
    assert got["b1"].status == "success"
    assert got["b2"].content.startswith(FLOOD_PREFIX + ": rule thread_limit: 3 calls admitted in this thread, limit 3")
    assert [a["city"] for _, a in RAN] == ["Rome", "Oslo", "Lima"]
    # Another thread starts from zero.
    out = app.invoke({"messages": [HumanMessage("third")]}, config=thread("U"))
    assert answers(out["messages"])["c1"].status == "success"


def test_run_limit_starts_again_with_each_user_message():
    node = ToolNode(TOOLS, guard={"limits": {"run_limit": 1}})
    first = [HumanMessage("one"), ai(call("search", {"q": "a"}, "a"), call("search", {"q": "b"}, "b"))]
    got = answers(node.invoke(first, config=thread("R")))
    assert got["a"].status == "success" and "rule run_limit" in got["b"].content
    second = [*first, *got.values(), AIMessage("ok"), HumanMessage("two"), ai(call("search", {"q": "c"}, "c"))]
    assert answers(node.invoke(second, config=thread("R")))["c"].status == "success"


@pytest.mark.parametrize("front", ["node", "middleware"])
def test_exit_behavior_error_raises_before_anything_runs(front):
    rules = {"limits": {"run_limit": 1, "exit_behavior": "error"}}
    msg = ai(call("search", {"q": "a"}, "a"), call("search", {"q": "b"}, "b"))
    with pytest.raises(ToolCallLimitExceededError) as err:
        if front == "node":
            ToolNode(TOOLS, guard=rules).invoke({"messages": [HumanMessage("go"), msg]}, config=thread("E"))
        else:
            model = Script(script=[msg, AIMessage("done")])
            agent(model, MendMiddleware(guard=rules)).invoke({"messages": [HumanMessage("go")]}, config=thread("E"))
    assert RAN == []
    assert err.value.reason.startswith(FLOOD_PREFIX + ": rule run_limit") and err.value.tool == "search"
    assert err.value.call_id == "b" and err.value.decisions[0]["action"] == "error"


def test_exit_behavior_end_answers_every_call_and_ends_with_a_command():
    node = ToolNode(TOOLS, guard={"limits": {"run_limit": 1, "exit_behavior": "end"}})
    msg = ai(call("search", {"q": "a"}, "a"), call("get_weather", {"city": "Rome"}, "b"), call("nope", {}, "c"))
    out = node.invoke({"messages": [HumanMessage("go"), msg]}, config=thread("X"))
    assert isinstance(out, Command) and out.goto == END
    messages = out.update["messages"]
    got = answers(messages)
    assert set(got) == {"a", "b", "c"} and all(m.status == "error" for m in got.values())
    assert all(m.content.startswith(FLOOD_PREFIX) for m in got.values())
    assert "rule run_limit" in got["b"].content and "ended the run" in got["a"].content
    assert RAN == [] and ended_by_guard(messages)
    assert messages[-1].name == "toolmend_guard" and messages[-1].response_metadata["author"] == "toolmend"


# ---- shadow mode, declared limits -----------------------------------------------------


def test_shadow_mode_refuses_nothing_but_reports_decisions():
    stats: list[dict] = []
    node = ToolNode(TOOLS, guard={"session": {"limit": 1, "window_secs": 60, "shadow": True}}, on_stats=stats.append)
    msg = ai(*(call("search", {"q": q}, q) for q in "abc"))
    got = answers(node.invoke([HumanMessage("hi"), msg], config=thread("S")))
    assert all(m.status == "success" for m in got.values()) and len(RAN) == 3
    recs = stats[-1]["calls"]
    assert [r["outcome"] for r in recs] == ["executed"] * 3
    assert recs[0]["guard"] == []
    for r in recs[1:]:
        (d,) = r["guard"]
        assert d["rule"] == "session_window" and d["action"] == "deny" and d["shadow"] is True
    assert node.stats["guard:session_window:shadow"] == 2


def test_limits_a_tool_declares_in_its_metadata_apply():
    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        RAN.append(("pay", {"amount": amount}))
        return "paid"

    pay.metadata = {"toolmend_guard": {"limits": {"run_limit": 1}}}

    node = ToolNode([pay, search])  # no guard= at all: the tool's own limit is enough
    assert node.guard is not None and node.guard.config["tools"]["pay"]["limits"]["run_limit"] == 1
    msg = ai(call("pay", {"amount": 1}, "p1"), call("pay", {"amount": 2}, "p2"),
             call("search", {"q": "a"}, "s1"), call("search", {"q": "b"}, "s2"))
    got = answers(node.invoke([HumanMessage("pay twice"), msg], config=thread("P")))
    assert got["p1"].status == "success" and got["s1"].status == "success" and got["s2"].status == "success"
    assert got["p2"].content.startswith(FLOOD_PREFIX + ": rule run_limit")
    assert RAN == [("pay", {"amount": 1}), ("search", {"q": "a"}), ("search", {"q": "b"})]
    # The guard's own entry for the tool wins over the declaration.
    node = ToolNode([pay], guard={"tools": {"pay": {"limits": {"run_limit": 2}}}})
    got = answers(node.invoke([HumanMessage("pay twice"), msg], config=thread("Q")))
    assert got["p2"].status == "success"


def test_the_middleware_applies_declared_limits_of_learned_tools():
    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        RAN.append(("pay", {"amount": amount}))
        return "paid"

    pay.metadata = {"toolmend_guard": {"limits": {"run_limit": 1}}}

    model = Script(script=[ai(call("pay", {"amount": 1}, "p1"), call("pay", {"amount": 2}, "p2")), AIMessage("done")])
    mw = MendMiddleware()
    out = create_agent(model, [pay], middleware=[mw]).invoke({"messages": [HumanMessage("pay")]}, config=thread("L"))
    got = answers(out["messages"])
    assert got["p1"].status == "success" and "rule run_limit" in got["p2"].content
    assert RAN == [("pay", {"amount": 1})]


def test_a_refusal_is_no_result_to_the_history_rules():
    # Two real results, three refusals (their texts differ by count): the next is the 6th.
    guard = Guard(LADDER)
    call_x = {"id": "", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    history: list[dict] = [{"role": "user", "content": "find x"}]
    for i, result in enumerate(["no results"] * 2 + [f"{FLOOD_PREFIX}: rule repeat: {n} times" for n in (3, 4, 5)]):
        history += [
            {"role": "assistant", "content": "", "tool_calls": [{**call_x, "id": f"s{i}"}]},
            {"role": "tool", "tool_call_id": f"s{i}", "content": result},
        ]
    (v,) = guard.check(None, history, [{"id": "s5", "name": "search", "arguments": {"q": "x"}}])
    assert v["action"] == "end" and v["decisions"][0]["count"] == 6
    # A result that changed is progress: the streak starts again.
    history[4]["content"] = "one result"
    (v,) = guard.check(None, history, [{"id": "s5", "name": "search", "arguments": {"q": "x"}}])
    assert v["action"] == "deny" and v["decisions"][0]["count"] == 5


def test_an_id_the_thread_used_before_is_renamed():
    stats: list[dict] = []
    node = ToolNode(TOOLS, guard={"session": {"limit": 10, "window_secs": 60}}, on_stats=stats.append)
    first = AIMessage("", tool_calls=[call("search", {"q": "a"}, "call_1")], id="m1")
    node.invoke([HumanMessage("one"), first], config=thread("I"))
    # A new history in the same thread (e.g. trimmed) whose model reuses the id.
    again = AIMessage("", tool_calls=[call("search", {"q": "b"}, "call_1")], id="m2")
    out = node.invoke([HumanMessage("two"), again], config=thread("I"))
    mended = [m for m in out if isinstance(m, AIMessage)]
    (result,) = [m for m in out if isinstance(m, ToolMessage)]
    assert len(mended) == 1 and mended[0].id == "m2"
    new_id = mended[0].tool_calls[0]["id"]
    assert new_id != "call_1" and new_id.startswith("call_tm_") and result.tool_call_id == new_id
    rec = stats[-1]["calls"][0]
    assert rec["tool_call_id"] == new_id and rec["original_id"] == "call_1"
    assert any(f["kind"] == "call_id_renamed" for f in rec["fixes"])


def test_under_create_react_agent_an_ended_run_runs_no_tool_again():
    import warnings

    from langgraph.prebuilt import create_react_agent

    model = Script(script=[ai(call("search", {"q": "x"}, f"s{i}")) for i in range(10)] + [AIMessage("done")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = create_react_agent(model, tools=ToolNode(TOOLS, guard=LADDER))
    out = app.invoke({"messages": [HumanMessage("x")]}, config=thread("react"))
    # Its static tools -> agent edge asks the model again after the end (documented);
    # every call from the 6th on is answered, none runs.
    assert RAN == [("search", {"q": "x"})] * 2 and out["messages"][-1].content == "done"
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert all("The run is ended." in m.content for m in results[5:])


# ---- Redis: the counts shared between processes ---------------------------------------


def _redis_pid(port: int) -> int | None:
    """The process id the redis-server on `port` reports (INFO server), None if nothing
    answers there yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"INFO server\r\n")
            reply = b""
            while (found := re.search(rb"process_id:(\d+)\r\n", reply)) is None:
                chunk = conn.recv(65536)
                if not chunk:
                    return None
                reply += chunk
    except OSError:
        return None
    return int(found.group(1))


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    # A real server or a failure, never a skip: scripts/test installs Debian's package.
    assert server is not None, "no redis-server on PATH: install Debian's redis-server (scripts/test does)"
    # redis-server cannot pick its own port (0 turns TCP off), so one is picked free here;
    # another process may bind it first (redis-server then exits), so up to 5 ports are
    # tried. The server is ours when the one answering there reports our process id.
    log = tmp_path / "redis.log"
    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with log.open("w") as out:
            proc = subprocess.Popen(
                [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
            )
        try:
            wait_until(
                lambda: proc.poll() is not None or _redis_pid(port) == proc.pid,
                f"redis-server to answer on port {port}",
            )
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if proc.poll() is None:
            break
    else:
        pytest.fail(f"redis-server did not start on any of 5 free ports; its last log:\n{log.read_text()}")
    try:
        yield f"redis://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_two_guards_on_one_redis_share_the_counts(redis_url):
    rules = {"session": {"limit": 2, "window_secs": 60}}
    # Every store call must answer here (a timeout would admit: fail open): generous bounds.
    a, b = (Guard(rules, redis_url=redis_url, timeout_ms=30_000) for _ in range(2))
    assert a.wait_connected(30.0) and b.wait_connected(30.0)
    assert a.store == "redis"
    node_a, node_b = ToolNode(TOOLS, guard=a), ToolNode(TOOLS, guard=b)
    one = lambda i: ai(call("search", {"q": str(i)}, f"r{i}"))  # noqa: E731
    assert answers(node_a.invoke([HumanMessage("x"), one(1)], config=thread("shared")))["r1"].status == "success"
    assert answers(node_b.invoke([HumanMessage("x"), one(2)], config=thread("shared")))["r2"].status == "success"
    third = answers(node_a.invoke([HumanMessage("x"), one(3)], config=thread("shared")))["r3"]
    assert third.content.startswith(
        FLOOD_PREFIX + ": rule session_window: 2 calls admitted in this session within 60 s, limit 2;"
    )
    assert a.store_stats()["admissions"] >= 2 and a.store_stats()["connected"]
    with pytest.raises(ValueError, match="redis_url"):
        Guard(rules, redis_url="http://not-redis")


def test_a_down_redis_fails_as_configured():
    rules = {"session": {"limit": 2, "window_secs": 60}}
    url = "redis://127.0.0.1:1/"  # nothing listens there
    msg = ai(call("search", {"q": "a"}, "a"))
    open_ = ToolNode(TOOLS, guard=Guard(rules, redis_url=url, fail="open"))
    assert answers(open_.invoke([HumanMessage("x"), msg], config=thread("d")))["a"].status == "success"
    closed = ToolNode(TOOLS, guard=Guard(rules, redis_url=url, fail="closed"))
    refused = answers(closed.invoke([HumanMessage("x"), msg], config=thread("d")))["a"]
    assert refused.status == "error" and "rule store_unavailable" in refused.content
    # An outage is told as one: the model is not told it flooded.
    assert refused.content.startswith(UNCHECKED_PREFIX) and "flooding" not in refused.content
