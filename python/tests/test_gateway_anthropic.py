"""The Messages front (`POST /v1/messages`) driven by the real `anthropic` SDK, the
gateway in front of the strict scripted provider speaking Chat Completions: the request
translated, the answer mended and translated back, plain and streamed. Each test asserts
what the SDK PARSES (its content blocks), not the raw JSON."""

from __future__ import annotations

import anthropic
import pytest
from test_gateway_clients import BROKEN_ARGS, CLIENT_TIMEOUT, HERMES, call, calls, said, stack  # noqa: F401

TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
ASK = [{"role": "user", "content": "Weather in Oslo for 2 days?"}]


def client(s) -> anthropic.Anthropic:
    # The SDK appends /v1/messages to its base URL; no retries (each would take a step).
    return anthropic.Anthropic(
        base_url=s.gateway.removesuffix("/v1"), api_key="x", max_retries=0, timeout=CLIENT_TIMEOUT
    )


def tool_uses(message) -> list:
    return [b for b in message.content if b.type == "tool_use"]


@pytest.mark.parametrize("api", ["chat_completions", "messages"])
def test_a_call_written_into_the_text_comes_back_as_a_tool_use_block(stack, api):
    s = stack(said(HERMES), env_extra={"TOOLMEND_UPSTREAM__API": api})
    raw = client(s).messages.with_raw_response.create(
        model="m", max_tokens=100, messages=ASK, tools=[TOOL]
    )
    assert raw.headers["x-toolmend-calls"] == "valid=0 repaired=1 unresolved=0 from_text=1"
    msg = raw.parse()
    assert msg.stop_reason == "tool_use"
    (use,) = tool_uses(msg)
    assert (use.name, use.input) == ("get_weather", {"city": "Oslo", "days": 2})
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert msg.content[0].text == "Checking."
    # The account rides in the body, where an SDK that ignores headers keeps it.
    account = msg.model_extra["toolmend"]
    assert account["counts"]["from_text"] == 1
    assert account["translation"]["to"] == api


@pytest.mark.parametrize("api", ["chat_completions", "messages"])
def test_broken_arguments_are_mended_into_the_input_object(stack, api):
    s = stack(calls(call("call_1", BROKEN_ARGS)), env_extra={"TOOLMEND_UPSTREAM__API": api})
    msg = client(s).messages.create(model="m", max_tokens=100, messages=ASK, tools=[TOOL])
    (use,) = tool_uses(msg)
    # Toward a Messages upstream the provider could not give the call (its input is no
    # object): it wrote it into its text, and the gateway gave it an id.
    assert use.id == ("call_1" if api == "chat_completions" else "call_tm_1_0")
    assert use.input == {"city": "Paris", "days": 3}
    assert msg.stop_reason == "tool_use"


@pytest.mark.parametrize("api", ["chat_completions", "messages"])
def test_the_stream_gives_the_same_mended_message(stack, api):
    s = stack(said(HERMES), env_extra={"TOOLMEND_UPSTREAM__API": api})
    with client(s).messages.stream(model="m", max_tokens=100, messages=ASK, tools=[TOOL]) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    (use,) = tool_uses(final)
    assert use.input == {"city": "Oslo", "days": 2}
    assert final.stop_reason == "tool_use"
    assert final.content[0].text == "Checking."


@pytest.mark.parametrize("api", ["chat_completions", "messages"])
def test_a_tool_turn_round_trips_through_the_strict_provider(stack, api):
    # The second request carries the tool_use and its tool_result: translated into a
    # chat history the strict provider accepts (it refuses an unanswered call).
    s = stack(calls(call("call_1", '{"city": "Oslo"}')), said("Sunny in Oslo."), env_extra={"TOOLMEND_UPSTREAM__API": api})
    c = client(s)
    first = c.messages.create(model="m", max_tokens=100, messages=ASK, tools=[TOOL])
    (use,) = tool_uses(first)
    history = [
        *ASK,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
    ]
    second = c.messages.create(model="m", max_tokens=100, messages=history, tools=[TOOL])
    assert second.stop_reason == "end_turn"
    assert [b.text for b in second.content if b.type == "text"] == ["Sunny in Oslo."]


@pytest.mark.parametrize("api", ["chat_completions", "messages"])
def test_an_unanswered_tool_use_is_answered_in_the_history(stack, api):
    # A history whose tool_use has no tool_result: the request path answers it (the
    # provider would refuse the request), and says so.
    s = stack(said("Done."), env_extra={"TOOLMEND_UPSTREAM__API": api})
    history = [
        *ASK,
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "get_weather",
                                           "input": {"city": "Oslo"}}]},
        {"role": "user", "content": "Never mind."},
    ]
    raw = client(s).messages.with_raw_response.create(model="m", max_tokens=100, messages=history, tools=[TOOL])
    assert "x-toolmend-history" in raw.headers
    assert raw.parse().content[0].text == "Done."


def test_errors_come_in_anthropics_shape(stack):
    s = stack(said("unused"))
    c = client(s)
    with pytest.raises(anthropic.BadRequestError) as e:
        c.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}])
    body = e.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "document" in body["error"]["message"]


def test_count_tokens_answers_an_estimate(stack):
    s = stack(said("unused"))
    n = client(s).messages.count_tokens(model="m", messages=ASK, tools=[TOOL])
    assert n.input_tokens > 0


def test_hosted_tools_are_left_out_and_named(stack):
    s = stack(said("Hello."))
    raw = client(s).messages.with_raw_response.create(
        model="m", max_tokens=100, messages=ASK,
        tools=[TOOL, {"type": "web_search_20250305", "name": "web_search"}],
    )
    assert "tool web_search (web_search_20250305)" in raw.headers["x-toolmend-left-out"]
    msg = raw.parse()
    assert msg.content[0].text == "Hello."
    assert "tool web_search (web_search_20250305)" in msg.model_extra["toolmend"]["translation"]["left_out"]


def test_text_streams_as_it_comes(stack):
    text = "The weather in Oslo is sunny and mild today, with a light breeze from the west."
    s = stack(said(text))
    with client(s).messages.stream(model="m", max_tokens=100, messages=ASK) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
    # The provider sends it in pieces of about 8 bytes: they go out as they come.
    assert len(deltas) > 3 and "".join(deltas) == text
    assert final.stop_reason == "end_turn" and final.content[0].text == text


@pytest.mark.parametrize("api", ["chat_completions", "messages"])
def test_a_streamed_text_call_with_broken_json_is_a_mended_tool_use(stack, api):
    broken = "Running it.\n<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Oslo', 'days': '2',}}\n</tool_call>"
    s = stack(said(broken), env_extra={"TOOLMEND_UPSTREAM__API": api})
    with client(s).messages.stream(model="m", max_tokens=100, messages=ASK, tools=[TOOL]) as stream:
        final = stream.get_final_message()
    (use,) = tool_uses(final)
    assert use.input == {"city": "Oslo", "days": 2}
    assert final.stop_reason == "tool_use"
    # The call's markup never reached the client as text.
    assert all("<tool_call>" not in b.text for b in final.content if b.type == "text")


# ---------------------------------------------------------------------------------------
# LangChain's ChatAnthropic.


def chat_anthropic(s):
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(base_url=s.gateway.removesuffix("/v1"), api_key="x", model="m",
                         max_retries=0, timeout=CLIENT_TIMEOUT, max_tokens=100)


@pytest.mark.parametrize("api", ["chat_completions", "messages"])
def test_chat_anthropic_gets_the_mended_call_as_a_tool_call(stack, api):
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str, days: int = 1) -> str:
        """Weather for a city."""
        return f"{city}: sunny"

    s = stack(said(HERMES), said(HERMES), env_extra={"TOOLMEND_UPSTREAM__API": api})
    model = chat_anthropic(s).bind_tools([get_weather])
    ai = model.invoke("Weather in Oslo for 2 days?")
    (tc,) = ai.tool_calls
    assert (tc["name"], tc["args"]) == ("get_weather", {"city": "Oslo", "days": 2})
    assert not ai.invalid_tool_calls
    # Streamed too: the chunks merge into the same call.
    merged = None
    for chunk in model.stream("Weather in Oslo for 2 days?"):
        merged = chunk if merged is None else merged + chunk
    (tc,) = merged.tool_calls
    assert (tc["name"], tc["args"]) == ("get_weather", {"city": "Oslo", "days": 2})
