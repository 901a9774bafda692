"""The gateway's round trip through server-side tools, driven by the real `openai` SDK:
`toolmend serve` in front of the strict scripted provider (`toolmend scripted-provider`,
which refuses any history OpenAI would refuse), both subprocesses of the release binary,
and two HTTP tool services speaking the envelope, served by a Python `http.server`
thread. A three-round agent (model -> lookup -> model -> weather -> model) costs the
client ONE `client.chat.completions.create` call, JSON and `stream=True`. No network
beyond loopback.

The binary: `$TOOLMEND_BIN`, else `<repo>/target/release/toolmend` (build it with
`PYO3_BUILD_EXTENSION_MODULE=1 cargo build --release -p toolmend-cli`). A missing binary
fails the tests; it does not skip them.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from _servers import START_TIMEOUT, Server, binary, clean_env

CLIENT_TIMEOUT = 30.0

ASK = [{"role": "user", "content": "How many people live in Paris, and how warm is it?"}]
FINAL = "Paris: 2.1 million people, 21 °C."


def call(call_id: str, name: str, arguments: dict) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


# What the provider answers, request after request: lookup, then weather, then the answer.
THREE_ROUNDS = [
    {"content": None, "tool_calls": [call("c1", "lookup", {"q": "Paris"})]},
    {"content": None, "tool_calls": [call("c2", "weather", {"city": "Paris"})]},
    {"content": FINAL},
]

# ---------------------------------------------------------------------------------------
# The tool services: the envelope in, the envelope out.


class ToolServices:
    """`POST /lookup` and `POST /weather` on 127.0.0.1, answering
    `{"status": "success", "data": …, "call_id": <X-Tool-Call-ID>, "timestamp": ms}`;
    every call they get is kept (route, headers, body)."""

    def __init__(self) -> None:
        self.hits: list[dict] = []
        services = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                route = self.path.strip("/")
                services.hits.append(
                    {
                        "route": route,
                        "call_id": self.headers.get("x-tool-call-id"),
                        "trace_id": self.headers.get("x-trace-id"),
                        "timestamp": self.headers.get("x-request-timestamp"),
                        "body": body,
                    }
                )
                args = body.get("arguments", {})
                if route == "lookup":
                    data = {"city": args.get("q"), "population": 2_100_000}
                elif route == "weather":
                    data = {"city": args.get("city"), "temp_c": 21}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                answer = json.dumps(
                    {
                        "status": "success",
                        "data": data,
                        "call_id": self.headers.get("x-tool-call-id"),
                        "timestamp": int(time.time() * 1000),
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tools_toml(base: str) -> str:
    schema = lambda props, required: json.dumps(  # noqa: E731
        {"type": "object", "properties": props, "required": required}
    )
    return f"""
[[tools]]
name = "lookup"
description = "Facts about a city."
endpoint = "{base}/lookup"
server_side = true
parameters_json = '{schema({"q": {"type": "string"}}, ["q"])}'

[[tools]]
name = "weather"
description = "Weather for a city."
endpoint = "{base}/weather"
server_side = true
parameters_json = '{schema({"city": {"type": "string"}}, ["city"])}'
"""


# ---------------------------------------------------------------------------------------
# The subprocesses.


class Stack:
    def __init__(self, provider: Server, gateway: Server, services: ToolServices):
        self.provider = provider.url
        self.gateway = gateway.url
        self.services = services

    def sdk(self) -> openai.OpenAI:
        # No retries: a retried request would consume the next scripted step.
        return openai.OpenAI(
            base_url=self.gateway, api_key="x", max_retries=0, timeout=CLIENT_TIMEOUT
        )

    def provider_is_exhausted(self) -> bool:
        """True when the provider has no scripted step left (it answers 500): every step
        was used by an accepted request (a refused one would have failed the client's)."""
        req = urllib.request.Request(
            f"{self.provider}/chat/completions",
            data=json.dumps({"model": "m", "messages": ASK}).encode(),
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT):
                return False
        except urllib.error.HTTPError as e:
            return e.code == 500 and b"exhausted" in e.read()


@pytest.fixture
def stack(tmp_path):
    """`stack(steps, inline=…)`: the scripted provider answering `steps`, the tool
    services, and `toolmend serve` with the tools in a `--tools` file (or, `inline`, in
    its `--config` beside `[round_trip]`); all stopped at teardown."""
    started: list = []

    def start(steps: list[dict], inline: bool = False) -> Stack:
        exe = binary()
        services = ToolServices()
        started.append(services)
        script = tmp_path / "script.jsonl"
        script.write_text("".join(json.dumps(s) + "\n" for s in steps))
        provider = Server(
            "scripted-provider",
            [str(exe), "scripted-provider", str(script), "--port", "0"],
            r"scripted provider: (http://\S+/v1)",
        )
        started.append(provider)
        argv = [str(exe), "serve", "--listen", "127.0.0.1:0", "--upstream", provider.url]
        if inline:
            config = tmp_path / "gateway.toml"
            config.write_text("[round_trip]\nmax_rounds = 4\nmax_secs = 30\n" + tools_toml(services.base))
            argv += ["--config", str(config)]
        else:
            tools = tmp_path / "tools.toml"
            tools.write_text(tools_toml(services.base))
            argv += ["--tools", str(tools)]
        gateway = Server("gateway", argv, r"toolmend gateway: (http://\S+/v1)")
        started.append(gateway)
        return Stack(provider, gateway, services)

    yield start
    for thing in reversed(started):
        thing.stop()


def assert_the_tools_ran_once_each_with_the_trace(services: ToolServices, trace: str) -> None:
    seen = [(h["route"], h["call_id"], h["trace_id"]) for h in services.hits]
    assert seen == [("lookup", "c1", trace), ("weather", "c2", trace)], services.hits
    assert services.hits[0]["body"] == {"function": "lookup", "arguments": {"q": "Paris"}}
    assert services.hits[1]["timestamp"].isdigit()


# ---------------------------------------------------------------------------------------
# The tests.


def test_one_create_call_runs_a_three_round_agent(stack):
    s = stack(THREE_ROUNDS)
    raw = s.sdk().chat.completions.with_raw_response.create(model="m", messages=ASK)
    assert raw.status_code == 200
    assert raw.headers["x-toolmend-round-trip"] == "rounds=3; server_calls=2; errors=0"
    resp = raw.parse()
    choice = resp.choices[0]
    assert choice.message.content == FINAL
    assert not choice.message.tool_calls
    assert choice.finish_reason == "stop"
    assert resp.usage is not None and resp.usage.total_tokens > 0
    assert_the_tools_ran_once_each_with_the_trace(s.services, raw.headers["x-request-id"])
    # Three upstream answers for one client call, none refused (a refusal would have
    # reached the SDK as a BadRequestError).
    assert s.provider_is_exhausted()


def test_one_streamed_create_call_runs_a_three_round_agent(stack):
    s = stack(THREE_ROUNDS, inline=True)
    stream = s.sdk().chat.completions.create(
        model="m", messages=ASK, stream=True, stream_options={"include_usage": True}
    )
    text: list[str] = []
    finish = []
    usage = None
    roles = []
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            if c.delta.content:
                text.append(c.delta.content)
            assert not c.delta.tool_calls
            if c.finish_reason is not None:
                finish.append(c.finish_reason)
    assert "".join(text) == FINAL
    assert roles == ["assistant"]
    assert finish == ["stop"]
    assert usage is not None and usage.total_tokens > 0
    assert len(s.services.hits) == 2
    assert s.provider_is_exhausted()


def test_a_tools_file_that_does_not_load_stops_the_start_naming_the_line(tmp_path):
    exe = binary()
    tools = tmp_path / "bad.toml"
    tools.write_text('[[tools]]\nname = "x"\nendpoint = "not a url"\nparameters = { type = "object" }\n')
    out = subprocess.run(
        [str(exe), "serve", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9/v1",
         "--tools", str(tools)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=START_TIMEOUT,
    )
    assert out.returncode != 0
    assert f"{tools}:1: tool \"x\": " in out.stderr, out.stderr
    assert "not a URL" in out.stderr, out.stderr
