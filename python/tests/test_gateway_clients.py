"""`toolmend serve` driven by the real clients: the `openai` SDK and LangChain's
`ChatOpenAI`, each pointed at the gateway, the gateway in front of the strict scripted
provider (`toolmend scripted-provider`), both started here as subprocesses of the release
binary on free 127.0.0.1 ports. No network beyond loopback.

Each test asserts what the CLIENT PARSES (the SDK's pydantic objects, LangChain's
`AIMessage.tool_calls`), not the raw JSON, and most show the same scripted answer
pointed at the provider directly beside it: what the client gets without the gateway.

The binary: `$TOOLMEND_BIN`, else `<repo>/target/release/toolmend` (build it with
`PYO3_BUILD_EXTENSION_MODULE=1 cargo build --release -p toolmend-cli`). A missing binary
fails the tests; it does not skip them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Literal

import openai
import pytest
from _servers import START_TIMEOUT, Server, binary, clean_env
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

CLIENT_TIMEOUT = 30.0

# ---------------------------------------------------------------------------------------
# The tools, as the openai SDK and LangChain each send them.

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@tool
def get_weather(city: str, days: int = 1, units: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Weather for a city."""
    return f"{city}: sunny for {days} day(s), 21 {units}"


class GetWeather(BaseModel):
    """Weather for a city."""

    city: str
    days: int


ASK = [{"role": "user", "content": "Weather in Paris for 3 days?"}]
BROKEN_ARGS = "{'city': 'Paris', 'days': '3',}"  # single quotes, a string int, a trailing comma
MENDED = {"city": "Paris", "days": 3}
TEXT = "Let me look that up for you."
HERMES = (
    'Checking.<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": "2"}}'
    "</tool_call>"
)

# ---------------------------------------------------------------------------------------
# Script steps (one JSON line each: what the provider answers to one request).


def call(call_id: str, arguments: str, name: str = "get_weather") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls(*tool_calls: dict, content: str | None = None) -> dict:
    return {"content": content, "tool_calls": list(tool_calls)}


def said(text: str) -> dict:
    return {"content": text}


# ---------------------------------------------------------------------------------------
# The subprocesses.


@dataclass
class Stack:
    """The scripted provider and the gateway in front of it."""

    provider: str  # the provider's base URL (…/v1): the client without the gateway
    gateway: str  # the gateway's base URL (…/v1)
    servers: list[Server] = field(default_factory=list)

    def url(self, direct: bool) -> str:
        return self.provider if direct else self.gateway

    def sdk(self, direct: bool = False) -> openai.OpenAI:
        # No retries: a retried request would consume the next scripted step.
        return openai.OpenAI(
            base_url=self.url(direct), api_key="x", max_retries=0, timeout=CLIENT_TIMEOUT
        )

    def chat(self, direct: bool = False, **kwargs: Any) -> ChatOpenAI:
        return ChatOpenAI(
            base_url=self.url(direct),
            api_key="x",
            model="m",
            max_retries=0,
            timeout=CLIENT_TIMEOUT,
            **kwargs,
        )

    def provider_is_exhausted(self) -> bool:
        """True when the provider has no scripted step left (it answers 500 then): proof
        of how many upstream requests the client's requests cost."""
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
    """`stack(*steps)`: a scripted provider answering `steps` in order (a temp script file)
    and the gateway in front of it, both stopped at teardown. A missing binary fails the
    test (in its body, so pytest reports FAILED, not a setup ERROR)."""
    started: list[Server] = []

    def start(*steps: dict, env_extra: dict[str, str] | None = None) -> Stack:
        exe = binary()
        script = tmp_path / f"script-{len(started)}.jsonl"
        script.write_text("".join(json.dumps(s) + "\n" for s in steps))
        env = clean_env() | (env_extra or {})
        provider = Server(
            "scripted-provider",
            [str(exe), "scripted-provider", str(script), "--port", "0"],
            r"scripted provider: (http://\S+/v1)",
            env,
        )
        started.append(provider)
        gateway = Server(
            "gateway",
            [str(exe), "serve", "--listen", "127.0.0.1:0", "--upstream", provider.url],
            r"toolmend gateway: (http://\S+/v1)",
            env,
        )
        started.append(gateway)
        return Stack(provider.url, gateway.url, [provider, gateway])

    yield start
    for server in reversed(started):
        server.stop()


# ---------------------------------------------------------------------------------------
# Helpers over what the clients yield.


@dataclass
class Streamed:
    """What a plain `stream=True` iteration of the SDK yielded, accumulated the way an
    application does it."""

    events: list[str]  # "text" / "call" / "finish" / "usage", in arrival order
    text_deltas: list[str]
    calls: dict[int, dict]  # by index: id, type, name, arguments
    finish_reason: str | None
    usage: Any
    last_chunk: Any


def accumulate(stream) -> Streamed:
    out = Streamed([], [], {}, None, None, None)
    for chunk in stream:
        out.last_chunk = chunk
        if chunk.usage is not None:
            out.usage = chunk.usage
            out.events.append("usage")
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                out.text_deltas.append(delta.content)
                out.events.append("text")
            for tc in delta.tool_calls or []:
                out.events.append("call")
                slot = out.calls.setdefault(
                    tc.index, {"id": None, "type": None, "name": "", "arguments": ""}
                )
                slot["id"] = tc.id or slot["id"]
                slot["type"] = tc.type or slot["type"]
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
            if choice.finish_reason is not None:
                out.finish_reason = choice.finish_reason
                out.events.append("finish")
    return out


def args_of(tool_call) -> dict:
    """A tool call's arguments as the application reads them: `json.loads` of the string."""
    return json.loads(tool_call.function.arguments)


def langchain_stream(model, prompt) -> AIMessageChunk:
    merged = None
    for chunk in model.stream(prompt):
        merged = chunk if merged is None else merged + chunk
    assert merged is not None
    return merged


# ---------------------------------------------------------------------------------------
# The openai SDK.


def test_sdk_non_streaming_parses_the_mended_arguments_and_sees_the_headers(stack):
    s = stack(calls(call("c1", BROKEN_ARGS)), calls(call("c1", BROKEN_ARGS)))

    raw = s.sdk().chat.completions.with_raw_response.create(
        model="m", messages=ASK, tools=[WEATHER]
    )
    assert raw.status_code == 200
    assert raw.headers["x-toolmend-calls"] == "valid=0 repaired=1 unresolved=0 from_text=0"
    fixes = raw.headers["x-toolmend-fixes"].split(",")
    for kind in ["single_quotes", "trailing_comma", "string_to_integer"]:
        assert kind in fixes, fixes
    assert "x-toolmend-unresolved" not in raw.headers
    resp = raw.parse()
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    (tc,) = choice.message.tool_calls
    assert (tc.id, tc.type, tc.function.name) == ("c1", "function", "get_weather")
    assert args_of(tc) == MENDED

    # The same answer without the gateway: the SDK hands the application unparseable text.
    direct = s.sdk(direct=True).chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    assert direct.choices[0].message.tool_calls[0].function.arguments == BROKEN_ARGS
    with pytest.raises(json.JSONDecodeError):
        args_of(direct.choices[0].message.tool_calls[0])


def test_sdk_streaming_plain_iterator_accumulates_the_mended_calls(stack):
    answer = calls(
        call("c1", BROKEN_ARGS),
        call("c2", '{"city": "Oslo", "units": "Fahrenheit"}'),  # enum case
        content=TEXT,
    )
    s = stack(answer, answer)
    client = s.sdk()

    got = accumulate(
        client.chat.completions.create(
            model="m",
            messages=ASK,
            tools=[WEATHER],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    # The text streams through as deltas (several, not one buffered block) …
    assert "".join(got.text_deltas) == TEXT
    assert len(got.text_deltas) > 1
    # … then the mended calls, then the finish, then the usage chunk.
    assert got.events[-2:] == ["finish", "usage"]
    first_call = got.events.index("call")
    assert set(got.events[:first_call]) == {"text"}
    assert set(got.events[first_call:-2]) == {"call"}
    assert got.finish_reason == "tool_calls"
    assert got.last_chunk.choices == []
    assert got.usage.total_tokens == got.usage.prompt_tokens + got.usage.completion_tokens > 0

    assert sorted(got.calls) == [0, 1]
    assert {k: v for k, v in got.calls[0].items() if k != "arguments"} == {
        "id": "c1", "type": "function", "name": "get_weather"
    }
    assert json.loads(got.calls[0]["arguments"]) == MENDED
    assert got.calls[1]["id"] == "c2"
    assert json.loads(got.calls[1]["arguments"]) == {"city": "Oslo", "units": "fahrenheit"}

    # Without the gateway the accumulated arguments are the broken text.
    direct = accumulate(
        s.sdk(direct=True).chat.completions.create(
            model="m", messages=ASK, tools=[WEATHER], stream=True
        )
    )
    assert direct.calls[0]["arguments"] == BROKEN_ARGS
    with pytest.raises(json.JSONDecodeError):
        json.loads(direct.calls[0]["arguments"])


def test_sdk_stream_helper_parses_strict_tool_arguments(stack):
    """`client.chat.completions.stream` (the SDK's helper, `client.beta.chat.completions.
    stream` in older releases) parses a strict tool's arguments into its pydantic model."""
    s = stack(calls(call("c1", BROKEN_ARGS), content=TEXT), calls(call("c1", BROKEN_ARGS)))
    weather = openai.pydantic_function_tool(GetWeather, name="get_weather")

    with s.sdk().chat.completions.stream(
        model="m",
        messages=ASK,
        tools=[weather],
        stream_options={"include_usage": True},
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    text = "".join(e.delta for e in events if e.type == "content.delta")
    assert text == TEXT
    (done,) = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert done.name == "get_weather"
    assert json.loads(done.arguments) == MENDED
    assert done.parsed_arguments == GetWeather(**MENDED)
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == TEXT
    (tc,) = choice.message.tool_calls
    assert tc.id == "c1"
    assert tc.function.parsed_arguments == GetWeather(**MENDED)
    assert final.usage is not None and final.usage.total_tokens > 0

    # Without the gateway the helper cannot parse the arguments: it raises mid-stream
    # (jiter's "key must be a string": the single quotes).
    with pytest.raises(ValueError):
        with s.sdk(direct=True).chat.completions.stream(
            model="m", messages=ASK, tools=[weather]
        ) as stream:
            list(stream)


def test_a_call_written_into_the_content_reaches_the_sdk_as_a_tool_call(stack):
    s = stack(said(HERMES), said(HERMES), said(HERMES))
    client = s.sdk()

    resp = client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    (tc,) = choice.message.tool_calls
    assert tc.function.name == "get_weather"
    assert tc.id
    assert args_of(tc) == {"city": "Oslo", "days": 2}

    got = accumulate(
        client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True)
    )
    assert "".join(got.text_deltas) == "Checking."
    assert got.finish_reason == "tool_calls"
    (streamed,) = got.calls.values()
    assert streamed["name"] == "get_weather" and streamed["id"]
    assert json.loads(streamed["arguments"]) == {"city": "Oslo", "days": 2}

    # Without the gateway: no tool call at all, the call is prose.
    direct = s.sdk(direct=True).chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    assert direct.choices[0].message.tool_calls is None
    assert direct.choices[0].finish_reason == "stop"
    assert "<tool_call>" in direct.choices[0].message.content


def test_sdk_agent_loop_sends_its_own_message_back_through_the_gateway(stack):
    """The usual loop: the SDK's assistant message goes back into `messages` as the SDK
    returned it, with the tool result; the gateway forwards it and the strict provider
    takes it."""
    s = stack(calls(call("c1", BROKEN_ARGS)), said("Sunny in Paris."))
    client = s.sdk()
    first = client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    message = first.choices[0].message
    (tc,) = message.tool_calls
    result = get_weather.invoke(args_of(tc))
    raw = client.chat.completions.with_raw_response.create(
        model="m",
        messages=[*ASK, message, {"role": "tool", "tool_call_id": tc.id, "content": result}],
        tools=[WEATHER],
    )
    assert "x-toolmend-history" not in raw.headers  # nothing to sanitize
    assert raw.parse().choices[0].message.content == "Sunny in Paris."


# ---------------------------------------------------------------------------------------
# LangChain ChatOpenAI.


def test_langchain_invoke_gets_tool_calls_not_invalid_tool_calls(stack):
    s = stack(
        calls(call("c1", BROKEN_ARGS)),
        said("Sunny in Paris."),
        calls(call("c1", BROKEN_ARGS)),
    )
    model = s.chat().bind_tools([get_weather])
    msg = model.invoke(ASK[0]["content"])
    assert isinstance(msg, AIMessage)
    assert msg.invalid_tool_calls == []
    assert msg.tool_calls == [
        {"name": "get_weather", "args": MENDED, "id": "c1", "type": "tool_call"}
    ]
    assert msg.response_metadata["finish_reason"] == "tool_calls"

    # The loop goes on: the tool runs on the mended args, its result goes back.
    result = get_weather.invoke(msg.tool_calls[0])
    assert isinstance(result, ToolMessage)
    final = model.invoke([HumanMessage(ASK[0]["content"]), msg, result])
    assert final.content == "Sunny in Paris."

    # Without the gateway the same answer lands in invalid_tool_calls.
    direct = s.chat(direct=True).bind_tools([get_weather]).invoke(ASK[0]["content"])
    assert direct.tool_calls == []
    (bad,) = direct.invalid_tool_calls
    assert (bad["name"], bad["args"], bad["id"]) == ("get_weather", BROKEN_ARGS, "c1")


def test_langchain_stream_gets_tool_calls_not_invalid_tool_calls(stack):
    answer = calls(call("c1", BROKEN_ARGS), content=TEXT)
    s = stack(answer, answer)
    msg = langchain_stream(s.chat(stream_usage=True).bind_tools([get_weather]), ASK[0]["content"])
    assert msg.content == TEXT
    assert msg.invalid_tool_calls == []
    assert msg.tool_calls == [
        {"name": "get_weather", "args": MENDED, "id": "c1", "type": "tool_call"}
    ]
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    assert msg.usage_metadata is not None and msg.usage_metadata["total_tokens"] > 0

    direct = langchain_stream(s.chat(direct=True).bind_tools([get_weather]), ASK[0]["content"])
    assert direct.tool_calls == []
    (bad,) = direct.invalid_tool_calls
    assert (bad["name"], bad["args"], bad["id"]) == ("get_weather", BROKEN_ARGS, "c1")


def test_langchain_hermes_call_in_content_becomes_a_tool_call(stack):
    s = stack(said(HERMES), said(HERMES))
    model = s.chat().bind_tools([get_weather])
    for msg in [model.invoke("Weather in Oslo?"), langchain_stream(model, "Weather in Oslo?")]:
        assert msg.content == "Checking."
        assert msg.invalid_tool_calls == []
        (tc,) = msg.tool_calls
        assert (tc["name"], tc["args"]) == ("get_weather", {"city": "Oslo", "days": 2})
        assert tc["id"]


# ---------------------------------------------------------------------------------------
# Broken histories.

BROKEN_HISTORY = [
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("a", '{"city": "Rome"}')],  # unanswered
    },
    {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},  # answers nothing
    {"role": "user", "content": "and Paris?"},
]


def test_a_broken_history_is_accepted_through_the_gateway_and_refused_directly(stack):
    s = stack(said("ok"), said("ok, Paris"))

    # Directly, the strict provider refuses it the way OpenAI does (before any step is used).
    with pytest.raises(openai.BadRequestError) as refused:
        s.sdk(direct=True).chat.completions.create(
            model="m", messages=BROKEN_HISTORY, tools=[WEATHER]
        )
    assert refused.value.status_code == 400
    assert "tool_call_ids did not have response messages: a" in refused.value.message

    raw = s.sdk().chat.completions.with_raw_response.create(
        model="m", messages=BROKEN_HISTORY, tools=[WEATHER]
    )
    assert raw.status_code == 200
    assert raw.headers["x-toolmend-history"].startswith("sanitized; actions=")
    assert raw.parse().choices[0].message.content == "ok"

    # LangChain: an AIMessage whose call was never answered (an interrupted agent).
    history = [
        HumanMessage("Weather in Rome?"),
        AIMessage(
            content="",
            tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "a"}],
        ),
        HumanMessage("Never mind. And Paris?"),
    ]
    with pytest.raises(openai.BadRequestError):
        s.chat(direct=True).bind_tools([get_weather]).invoke(history)
    assert s.chat().bind_tools([get_weather]).invoke(history).content == "ok, Paris"
    assert s.provider_is_exhausted()


# ---------------------------------------------------------------------------------------
# The re-ask: an answer that cannot be mended is sent back to the model, unseen.

MISSING_CITY = calls(call("c1", '{"days": 2}'))  # `city` is required: no mend can invent it
LYON = {"city": "Lyon", "days": 2}
ANSWER_AGAIN = calls(call("c9", json.dumps(LYON)))


def test_re_ask_the_client_only_ever_sees_the_valid_call(stack):
    s = stack(*[MISSING_CITY, ANSWER_AGAIN] * 4)
    client = s.sdk()

    raw = client.chat.completions.with_raw_response.create(model="m", messages=ASK, tools=[WEATHER])
    assert raw.headers["x-toolmend-calls"] == "valid=1 repaired=0 unresolved=0 from_text=0"
    assert "x-toolmend-unresolved" not in raw.headers
    (tc,) = raw.parse().choices[0].message.tool_calls
    assert (tc.id, args_of(tc)) == ("c9", LYON)

    got = accumulate(
        client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True)
    )
    assert [(c["id"], json.loads(c["arguments"])) for c in got.calls.values()] == [("c9", LYON)]
    assert got.finish_reason == "tool_calls"

    model = s.chat().bind_tools([get_weather])
    for msg in [model.invoke("Weather in Lyon?"), langchain_stream(model, "Weather in Lyon?")]:
        assert msg.invalid_tool_calls == []
        assert [(c["id"], c["args"]) for c in msg.tool_calls] == [("c9", LYON)]

    # Four client requests took all eight scripted answers: two upstream calls each.
    assert s.provider_is_exhausted()


# ---------------------------------------------------------------------------------------
# Gateway bugs these tests found (fixed): a re-ask answered with text, ids minted anew in
# every response.


def test_re_ask_answered_with_text_reaches_the_client_as_text(stack):
    question = "Which city do you mean?"
    s = stack(MISSING_CITY, said(question), MISSING_CITY, said(question))
    client = s.sdk()

    choice = client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER]).choices[0]
    assert (choice.finish_reason == "tool_calls") == bool(choice.message.tool_calls)
    assert choice.message.tool_calls or choice.message.content == question

    got = accumulate(
        client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True)
    )
    assert (got.finish_reason == "tool_calls") == bool(got.calls)
    assert got.calls or "".join(got.text_deltas) == question


def test_minted_call_ids_stay_unique_across_an_agent_loop(stack):
    oslo = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    rome = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'
    s = stack(said(oslo), said(rome), said("Sunny in both."))
    client = s.sdk()
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo, then in Rome?"}]
    ids = []
    for _ in range(2):
        message = client.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER]
        ).choices[0].message
        (tc,) = message.tool_calls
        ids.append(tc.id)
        messages += [message, {"role": "tool", "tool_call_id": tc.id, "content": "sunny"}]
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=messages, tools=[WEATHER]
    )
    assert raw.parse().choices[0].message.content == "Sunny in both."
    assert len(set(ids)) == 2, ids
    assert "x-toolmend-history" not in raw.headers, raw.headers["x-toolmend-history"]


# ---------------------------------------------------------------------------------------
# The guard's refusal and the SDK's retries (docs/guard.md, "Retries").


def test_a_guard_refusal_is_raised_at_once_not_retried_by_the_sdk(stack):
    """The default `on_flood = "feedback"`: the model repeats a call, is told, repeats it
    again; the gateway answers 429 with `Retry-After: 60` and `x-should-retry: false`. The
    SDK at its default `max_retries = 2` raises at once: no retry reached the provider
    (without the header it would sleep 60 s and send the request again, a paid call)."""
    rome = call("c1", '{"city": "Rome"}')
    s = stack(
        calls(rome),
        calls(call("c2", '{"city": "Rome"}')),
        calls(call("c3", '{"city": "Rome"}')),
        said("spare"),
        env_extra={"TOOLMEND_GUARD__DUPLICATE__WINDOW_SECS": "60"},
    )
    sdk = openai.OpenAI(base_url=s.gateway, api_key="x", timeout=CLIENT_TIMEOUT)
    assert sdk.max_retries == 2
    session = {"x-toolmend-session": "s"}
    first = sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], extra_headers=session)
    assert first.choices[0].message.tool_calls[0].id == "c1"
    with pytest.raises(openai.RateLimitError) as refused:
        sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], extra_headers=session)
    headers = refused.value.response.headers
    assert headers["x-should-retry"] == "false"
    assert headers["retry-after"] == "60"
    assert "refused=2" in headers["x-toolmend-guard"] and "re_asks=1" in headers["x-toolmend-guard"]
    assert refused.value.response.json()["error"]["code"] == "toolmend_tool_flood"
    # The spare step is still there: the SDK sent no second request.
    assert not s.provider_is_exhausted()
    assert s.provider_is_exhausted()
