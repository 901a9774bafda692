"""toolmend.load_tools: a tools file's tools as LangChain tools, against real services on
127.0.0.1 (an ``http.server`` speaking the envelope; the Python ``mcp`` SDK's server over
stdio), through ``tool.invoke``, LangGraph's ``StateGraph`` with toolmend's ``ToolNode``,
and ``create_agent`` with ``MendMiddleware``."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph

import toolmend
from toolmend import ToolsLoadError, load_tools
from toolmend.langchain import MendMiddleware
from toolmend.langgraph import ToolNode
from toolmend.tools import NetTool

OTHER = "DATA OF ANOTHER CALL"
READINGS = [{"hour": h, "temp_c": 10 + h % 7, "note": "x" * 40} for h in range(200)]


class Service(BaseHTTPRequestHandler):
    """A tool service speaking the envelope; the path picks how it answers."""

    seen: list[dict[str, Any]] = []  # every request: path, headers (lower-cased), body
    # /slow answers only once this is set: a peer that never answers while a call waits.
    release = threading.Event()
    slow_answered: set[str] = set()  # the call ids /slow answered (late)

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, body: bytes, status: int = 200, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        call_id = self.headers.get("X-Tool-Call-ID")
        Service.seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        args = body["arguments"]
        now = int(time.time() * 1000)

        def envelope(**fields: Any) -> bytes:
            return json.dumps({"call_id": call_id, "timestamp": now, **fields}).encode()

        if self.path == "/weather":
            data = {"city": args["city"], "temp_c": 21, "days": args.get("days", 1), "readings": READINGS}
            self._send(envelope(status="success", data=data, message="fresh"))
        elif self.path == "/dirty":
            self._send(json.dumps({"status": "success", "data": {"secret": OTHER}, "call_id": "call_someone_else", "timestamp": now}).encode())
        elif self.path == "/no-status":
            self._send(envelope(data={"secret": OTHER}))
        elif self.path == "/not-json":
            self._send(b"<html>502 Bad Gateway</html>", kind="text/html")
        elif self.path == "/slow":
            # Bounded only so that a client without a timeout fails the test, not hangs it.
            Service.release.wait(60)
            Service.slow_answered.add(call_id)
            self._send(envelope(status="success", data={"late": OTHER}))
        elif self.path == "/tool-error":
            self._send(envelope(status="error", message=f"no such city: {args.get('city')}"))
        else:
            self._send(b"{}", status=404)


@pytest.fixture(scope="module")
def port():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    Service.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _clear_seen():
    Service.seen.clear()


WEATHER_SCHEMA = """
parameters_json = '''{"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"],
  "additionalProperties": false}'''
"""


def tools_toml(port: int) -> str:
    base = f"http://127.0.0.1:{port}"
    one = lambda name, path, extra="": f"""
[[tools]]
name = "{name}"
description = "{name} of a city."
endpoint = "{base}{path}"
{WEATHER_SCHEMA}{extra}
"""
    return "".join(
        [
            one("get_weather", "/weather", 'template = "{{ city }}: {{ temp_c }} °C over {{ days }} days ({{ readings|length }} readings, {{ message }})"\n'),
            one("dirty_weather", "/dirty"),
            one("no_status", "/no-status"),
            one("not_json", "/not-json"),
            one("slow_weather", "/slow", "timeout_ms = 200\n"),
            one("failing_weather", "/tool-error", "server_side = true\n"),
            one("plain_weather", "/weather"),
        ]
    )


@pytest.fixture(scope="module")
def tools(port):
    return {t.name: t for t in load_tools(tools_toml(port), text=True)}


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "args": args}


def requests_for(call_id: str) -> list[dict[str, Any]]:
    return [r for r in Service.seen if r["headers"].get("x-tool-call-id") == call_id]


# --- loading ---


def test_each_network_tool_becomes_a_langchain_tool_with_its_schema(tools):
    assert list(tools) == ["get_weather", "dirty_weather", "no_status", "not_json", "slow_weather", "failing_weather", "plain_weather"]
    t = tools["get_weather"]
    assert isinstance(t, NetTool)
    assert t.response_format == "content_and_artifact"
    assert t.description == "get_weather of a city."
    assert t.args_schema["required"] == ["city"]
    assert t.args_schema["properties"]["days"] == {"type": "integer", "minimum": 1, "maximum": 14}
    assert t.kind == "http"
    assert (t.server_side, tools["failing_weather"].server_side) == (False, True)
    assert t.net.server_side("failing_weather") is True
    assert t.net.problems() == []
    assert [d["name"] for d in t.net.definitions()] == list(tools)


def test_a_file_is_loaded_from_its_path(port, tmp_path: Path):
    path = tmp_path / "tools.toml"
    path.write_text(tools_toml(port))
    (tool,) = [t for t in load_tools(path) if t.name == "get_weather"]
    msg = tool.invoke(call("get_weather", {"city": "Oslo"}, "call_path"))
    assert msg.status == "success" and msg.content.startswith("Oslo: 21 °C")
    assert tool.net.origin == str(path)


def test_a_bad_endpoint_fails_the_load_naming_the_line_and_the_tool():
    text = '\n[[tools]]\nname = "ok"\nendpoint = "http://127.0.0.1:9/x"\nparameters = { type = "object" }\n\n[[tools]]\nname = "broken"\nendpoint = "not a url"\nparameters = { type = "object" }\n'
    with pytest.raises(ToolsLoadError) as e:
        load_tools(text, text=True)
    assert (e.value.origin, e.value.line, e.value.tool) == ("<inline>", 7, "broken")
    assert str(e.value).startswith('<inline>:7: tool "broken": endpoint "not a url" is not a URL')
    assert isinstance(e.value, toolmend.ToolmendError)


def test_a_template_that_does_not_compile_fails_the_load_naming_the_line(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text('[[tools]]\nname = "t"\nendpoint = "http://127.0.0.1:9/x"\nparameters = { type = "object" }\ntemplate = "{{ data.city "\n')
    with pytest.raises(ToolsLoadError) as e:
        load_tools(path)
    assert e.value.line == 1 and e.value.tool == "t"
    assert str(e.value).startswith(f'{path}:1: tool "t": the template does not compile')


def test_a_missing_file_and_a_missing_secret_are_load_errors(tmp_path: Path):
    with pytest.raises(ToolsLoadError, match="cannot read the tools file"):
        load_tools(tmp_path / "nowhere.toml")
    text = '[[tools]]\nname = "t"\nendpoint = "http://127.0.0.1:9/x"\nparameters = { type = "object" }\nheaders = { Authorization = { env = "TM_TEST_TOKEN", prefix = "Bearer " } }\n'
    with pytest.raises(ToolsLoadError, match="TM_TEST_TOKEN"):
        load_tools(text, text=True, env={})
    assert [t.name for t in load_tools(text, text=True, env={"TM_TEST_TOKEN": "s3cret"})] == ["t"]


# --- one call ---


def test_the_langchain_call_id_reaches_the_service_as_x_tool_call_id(tools):
    before = int(time.time() * 1000)
    msg = tools["get_weather"].invoke(call("get_weather", {"city": "Oslo", "days": 3}, "call_lc_1"))
    after = int(time.time() * 1000) + 1
    assert isinstance(msg, ToolMessage)
    assert (msg.tool_call_id, msg.name, msg.status) == ("call_lc_1", "get_weather", "success")
    (req,) = Service.seen
    assert req["headers"]["x-tool-call-id"] == "call_lc_1"
    assert req["headers"]["x-trace-id"] == "call_lc_1"  # no trace given: the call's id
    # The time the request was sent, in ms since the epoch: within the call.
    assert before <= int(req["headers"]["x-request-timestamp"]) <= after
    assert req["body"] == {"function": "get_weather", "arguments": {"city": "Oslo", "days": 3}}


def test_a_trace_id_in_the_run_config_is_sent_as_x_trace_id(tools):
    tools["get_weather"].invoke(call("get_weather", {"city": "Oslo"}, "call_tr"), config={"metadata": {"trace_id": "trace-42"}})
    assert requests_for("call_tr")[0]["headers"]["x-trace-id"] == "trace-42"


def test_the_template_shapes_the_content_and_the_artifact_keeps_the_whole_payload(tools):
    msg = tools["get_weather"].invoke(call("get_weather", {"city": "Oslo", "days": 3}, "call_shape"))
    assert msg.content == "Oslo: 21 °C over 3 days (200 readings, fresh)"
    assert msg.artifact["data"] == {"city": "Oslo", "temp_c": 21, "days": 3, "readings": READINGS}
    meta = msg.artifact["metadata"]
    assert (meta["tool"], meta["kind"], meta["shaped_by"], meta["attempts"], meta["trace_id"]) == ("get_weather", "http", "template", 1, "call_shape")
    assert meta["service_latency_ms"] >= 0 and meta["response_bytes"] > 10_000


def test_without_a_template_a_large_payload_is_summarised_within_the_budget(tools):
    msg = tools["plain_weather"].invoke(call("plain_weather", {"city": "Oslo"}, "call_plain"))
    assert msg.status == "success"
    assert len(msg.content.encode()) <= 4_000 < len(json.dumps(msg.artifact["data"]))
    assert '"Oslo"' in msg.content and msg.artifact["metadata"]["shaped_by"] == "summary"
    assert len(msg.artifact["data"]["readings"]) == 200


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("dirty_weather", 'answered for call "call_someone_else", not this one; the answer was dropped'),
        ("no_status", "has no `status`"),
        ("not_json", "not JSON"),
        ("slow_weather", "did not finish within 200 ms"),
        ("failing_weather", "failing_weather failed: no such city: Oslo"),
    ],
)
def test_a_bad_answer_is_an_error_tool_message_never_data(tools, name, says):
    Service.release.clear()
    try:
        msg = tools[name].invoke(call(name, {"city": "Oslo"}, f"call_{name}"))
        # The slow one is cut at its timeout: the call is over while its service still
        # holds the answer back.
        assert f"call_{name}" not in Service.slow_answered
    finally:
        Service.release.set()
    assert isinstance(msg, ToolMessage)
    assert (msg.tool_call_id, msg.status) == (f"call_{name}", "error")
    assert says in msg.content
    assert OTHER not in msg.content and msg.artifact is None
    assert len(requests_for(f"call_{name}")) == 1


def test_arguments_that_fail_the_schema_are_not_sent(tools):
    msg = tools["get_weather"].invoke(call("get_weather", {"city": "Oslo", "days": "5"}, "call_str"))
    assert msg.status == "error"
    assert msg.content == 'get_weather was not called. Fix this and call it again:\n- days: expected integer, got "5".'
    assert Service.seen == []


def test_the_async_path_sends_the_call_id_too(tools):
    async def both():
        return await asyncio.gather(
            tools["get_weather"].ainvoke(call("get_weather", {"city": "Oslo"}, "call_a1")),
            tools["dirty_weather"].ainvoke(call("dirty_weather", {"city": "Oslo"}, "call_a2")),
        )

    good, dirty = asyncio.run(both())
    assert (good.tool_call_id, good.status, dirty.tool_call_id, dirty.status) == ("call_a1", "success", "call_a2", "error")
    assert good.content.startswith("Oslo: 21") and OTHER not in dirty.content
    assert {r["headers"]["x-tool-call-id"] for r in Service.seen} == {"call_a1", "call_a2"}


def test_invoked_without_a_tool_call_the_request_gets_an_id_of_its_own(tools):
    content = tools["get_weather"].invoke({"city": "Oslo"})
    assert content.startswith("Oslo: 21")  # LangChain returns the content alone
    (req,) = Service.seen
    assert req["headers"]["x-tool-call-id"].startswith("call_")


def test_the_core_call_answers_a_dict(tools):
    net = tools["get_weather"].net
    r = net.call("dirty_weather", {"city": "Oslo"}, "call_core")
    assert (r["status"], r["error_kind"], r["content"], r["artifact"]) == ("error", "failed", None, None)
    # An error keeps how the call went for the caller, never the dirty answer's data.
    assert r["metadata"]["served_by"] == "dirty_weather" and r["metadata"]["service_latency_ms"] >= 0
    assert OTHER not in str(r["metadata"])
    r = net.call("get_weather", {"city": "Oslo"}, "call_core2", "trace-7")
    assert (r["status"], r["error"], r["metadata"]["trace_id"]) == ("success", None, "trace-7")
    r = net.call("failing_weather", {"city": "Oslo"}, "call_core3")
    assert (r["status"], r["error_kind"], r["metadata"]["attempts"]) == ("error", "failed", 1)
    with pytest.raises(KeyError, match="no tool named 'nope'|no tool named \"nope\""):
        net.call("nope", {}, "call_x")


# --- in a graph, and in an agent ---


def three_calls() -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"id": "call_good", "name": "get_weather", "args": {"city": "Oslo"}},
            {"id": "call_dirty", "name": "dirty_weather", "args": {"city": "Bergen"}},
            {"id": "call_days", "name": "get_weather", "args": {"city": "Tromsø", "days": "5"}},
        ],
    )


def tool_graph(tools: list[NetTool]):
    """START -> toolmend's ToolNode -> END."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_state_graph_with_the_tool_node_answers_each_call_id_once(tools, asynchronous):
    app = tool_graph(list(tools.values()))
    state = {"messages": [HumanMessage("weather?"), three_calls()]}
    out = asyncio.run(app.ainvoke(state)) if asynchronous else app.invoke(state)
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    by_id = {m.tool_call_id: m for m in answers}
    assert sorted(by_id) == ["call_days", "call_dirty", "call_good"] and len(answers) == 3
    assert by_id["call_good"].status == "success" and by_id["call_good"].content.startswith("Oslo: 21")
    dirty = by_id["call_dirty"]
    assert dirty.status == "error" and "the answer was dropped" in dirty.content
    assert OTHER not in dirty.content and "Oslo" not in dirty.content and "Tromsø" not in dirty.content
    # "5" for an integer: coerced by the node, sent as 5, under the call's own id.
    assert by_id["call_days"].status == "success"
    assert by_id["call_days"].content == "Tromsø: 21 °C over 5 days (200 readings, fresh)"
    assert requests_for("call_days")[0]["body"]["arguments"] == {"city": "Tromsø", "days": 5}
    assert {r["headers"]["x-tool-call-id"] for r in Service.seen} == {"call_good", "call_dirty", "call_days"}


class Script(BaseChatModel):
    """The agent's model: answers from a script."""

    script: list[Any]

    @property
    def _llm_type(self) -> str:
        return "tools-script"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


def test_create_agent_with_the_middleware_runs_network_tools(tools):
    agent = create_agent(Script(script=[three_calls(), AIMessage("done")]), list(tools.values()), middleware=[MendMiddleware()])
    out = agent.invoke({"messages": [HumanMessage("weather?")]})
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert {k: m.status for k, m in answers.items()} == {"call_good": "success", "call_dirty": "error", "call_days": "success"}
    assert OTHER not in answers["call_dirty"].content
    assert answers["call_days"].artifact["data"]["days"] == 5
    assert out["messages"][-1].content == "done"


# --- MCP ---

MCP_SERVER = Path(__file__).resolve().parents[2] / "crates" / "toolmend-tools" / "tests" / "mcp_server.py"


@pytest.fixture(scope="module")
def mcp_tools():
    assert MCP_SERVER.exists(), f"{MCP_SERVER}: the Python SDK's test server"
    # A generous timeout (not the default 10 s): the child imports the whole SDK before its
    # handshake, which a loaded two-core box can take that long to do.
    text = (
        f'[[mcp]]\nname = "py"\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(str(MCP_SERVER))}, "stdio"]\ntimeout_ms = 60000\n'
    )
    tools = {t.name: t for t in load_tools(text, text=True)}
    yield tools
    next(iter(tools.values())).net.close()


def test_an_mcp_servers_tools_run_as_langchain_tools(mcp_tools):
    assert {"add", "echo", "boom"} <= set(mcp_tools)
    add = mcp_tools["add"]
    assert add.kind == "mcp" and add.description == "Adds two integers."
    assert add.args_schema["required"] == ["a", "b"]
    msg = add.invoke(call("add", {"a": 2, "b": 3}, "call_mcp_add"))
    assert (msg.tool_call_id, msg.status) == ("call_mcp_add", "success")
    assert "5" in msg.content and msg.artifact["data"] == {"result": 5}
    assert msg.artifact["metadata"]["kind"] == "mcp"
    boom = mcp_tools["boom"].invoke(call("boom", {}, "call_mcp_boom"))
    assert boom.status == "error" and "failed on purpose" in boom.content
    # Through the node: "7" for an integer is mended before it reaches the server.
    out = tool_graph([add]).invoke({"messages": [AIMessage("", tool_calls=[{"id": "call_mcp_n", "name": "add", "args": {"a": "7", "b": 1}}])]})
    answer = out["messages"][-1]
    assert answer.status == "success" and answer.artifact["data"] == {"result": 8}


def test_closed_tools_refuse_calls(port):
    (tool, *_) = load_tools(tools_toml(port), text=True)
    tool.net.close()
    with pytest.raises(RuntimeError, match="closed"):
        tool.net.call("get_weather", {"city": "Oslo"}, "call_closed")
    assert "closed" in repr(tool.net)


def test_the_files_flood_limits_reach_the_tool_node(port):
    """`[tools.limits]` in the file: the ToolNode's guard applies them per thread."""
    base = f"http://127.0.0.1:{port}"
    toml = f"""
[[tools]]
name = "get_weather"
endpoint = "{base}/weather"
{WEATHER_SCHEMA}
[tools.limits]
session = {{ limit = 1, window_secs = 60 }}
"""
    (weather,) = load_tools(toml, text=True)
    session = weather.metadata["toolmend_guard"]["session"]
    assert (session["limit"], session["window_secs"]) == (1, 60.0)
    app = tool_graph([weather])

    def ask(call_id: str, thread: str) -> ToolMessage:
        msg = AIMessage("", tool_calls=[{"id": call_id, "name": "get_weather", "args": {"city": "Oslo"}}])
        out = app.invoke({"messages": [HumanMessage("weather?"), msg]}, {"configurable": {"thread_id": thread}})
        return [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]

    assert ask("call_l1", "t1").status == "success"
    second = ask("call_l2", "t1")
    assert second.status == "error" and "flood" in second.content, second.content
    assert ask("call_l3", "t2").status == "success", "another thread has its own count"
    assert [r["headers"]["x-tool-call-id"] for r in Service.seen] == ["call_l1", "call_l3"]
