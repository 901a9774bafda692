"""The Responses front (`POST /v1/responses`) driven by the real `openai` SDK's
`responses.create`, plain and streamed, the gateway in front of the strict scripted
provider speaking Chat Completions: what the SDK PARSES (its output items)."""

from __future__ import annotations

import json

import pytest
from test_gateway_clients import BROKEN_ARGS, HERMES, call, calls, said, stack  # noqa: F401

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
ASK = "Weather in Oslo for 2 days?"


def function_calls(response) -> list:
    return [o for o in response.output if o.type == "function_call"]


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_a_call_written_into_the_text_comes_back_as_a_function_call_item(stack, api):
    s = stack(said(HERMES), env_extra={"TOOLMEND_UPSTREAM__API": api})
    raw = s.sdk().responses.with_raw_response.create(model="m", input=ASK, tools=[TOOL])
    assert raw.headers["x-toolmend-calls"] == "valid=0 repaired=1 unresolved=0 from_text=1"
    r = raw.parse()
    (fc,) = function_calls(r)
    assert fc.name == "get_weather" and json.loads(fc.arguments) == {"city": "Oslo", "days": 2}
    assert r.output_text == "Checking."
    assert r.status == "completed"
    account = r.model_extra["toolmend"]
    assert account["counts"]["from_text"] == 1
    assert account["translation"]["from"] == "responses"


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_broken_arguments_are_mended(stack, api):
    s = stack(calls(call("call_1", BROKEN_ARGS)), env_extra={"TOOLMEND_UPSTREAM__API": api})
    r = s.sdk().responses.create(model="m", input=ASK, tools=[TOOL])
    (fc,) = function_calls(r)
    assert fc.call_id == "call_1" and json.loads(fc.arguments) == {"city": "Paris", "days": 3}


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_the_stream_gives_the_same_mended_response(stack, api):
    s = stack(said(HERMES), env_extra={"TOOLMEND_UPSTREAM__API": api})
    events = list(s.sdk().responses.create(model="m", input=ASK, tools=[TOOL], stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    (fc,) = function_calls(final)
    assert json.loads(fc.arguments) == {"city": "Oslo", "days": 2}
    assert final.output_text == "Checking."
    # The text went out as deltas before the call.
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Checking."


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_the_sdk_stream_helper_accumulates_it(stack, api):
    s = stack(said(HERMES), env_extra={"TOOLMEND_UPSTREAM__API": api})
    with s.sdk().responses.stream(model="m", input=ASK, tools=[TOOL]) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    (fc,) = function_calls(final)
    assert json.loads(fc.arguments) == {"city": "Oslo", "days": 2}


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_a_tool_turn_round_trips_through_the_strict_provider(stack, api):
    s = stack(calls(call("call_1", '{"city": "Oslo"}')), said("Sunny in Oslo."), env_extra={"TOOLMEND_UPSTREAM__API": api})
    c = s.sdk()
    first = c.responses.create(model="m", input=ASK, tools=[TOOL], store=False)
    (fc,) = function_calls(first)
    items = [{"role": "user", "content": ASK},
             {"type": "function_call", "call_id": fc.call_id, "name": fc.name, "arguments": fc.arguments},
             {"type": "function_call_output", "call_id": fc.call_id, "output": "sunny"}]
    second = c.responses.create(model="m", input=items, tools=[TOOL], instructions="Be brief.")
    assert second.output_text == "Sunny in Oslo."
    assert second.instructions == "Be brief."


@pytest.mark.parametrize("streamed", [False, True])
def test_previous_response_id_continues_the_conversation(stack, streamed):
    # The second request sends only the output of the first one's call: the gateway
    # rebuilds the conversation it kept, so the chat upstream gets the call before its
    # result (alone, the result would be an orphan the request path has to drop).
    s = stack(calls(call("call_1", '{"city": "Oslo"}')), said("Sunny in Oslo."))
    c = s.sdk()
    if streamed:
        events = list(c.responses.create(model="m", input=ASK, tools=[TOOL], stream=True))
        first = events[-1].response
    else:
        first = c.responses.create(model="m", input=ASK, tools=[TOOL])
    (fc,) = function_calls(first)
    raw = c.responses.with_raw_response.create(
        model="m", previous_response_id=first.id, tools=[TOOL],
        input=[{"type": "function_call_output", "call_id": fc.call_id, "output": "sunny"}])
    assert "x-toolmend-history" not in raw.headers, raw.headers.get("x-toolmend-history")
    second = raw.parse()
    assert second.output_text == "Sunny in Oslo."
    assert second.id != first.id and second.id.startswith("resp_")


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_an_unanswered_function_call_is_answered_in_the_history(stack, api):
    s = stack(said("Done."), env_extra={"TOOLMEND_UPSTREAM__API": api})
    items = [{"role": "user", "content": ASK},
             {"type": "function_call", "call_id": "call_x", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
             {"role": "user", "content": "Never mind."}]
    raw = s.sdk().responses.with_raw_response.create(model="m", input=items, tools=[TOOL])
    assert "x-toolmend-history" in raw.headers
    assert raw.parse().output_text == "Done."


def test_hosted_tools_are_left_out_and_named_and_bad_input_refused(stack):
    import openai

    s = stack(said("Hello."))
    raw = s.sdk().responses.with_raw_response.create(
        model="m", input="hi", tools=[TOOL, {"type": "web_search"}])
    assert "tool (web_search)" in raw.headers["x-toolmend-left-out"]
    assert raw.parse().output_text == "Hello."
    with pytest.raises(openai.NotFoundError) as e:
        s.sdk().responses.create(model="m", input="hi", previous_response_id="resp_1")
    assert "resp_1" in e.value.message and e.value.code == "previous_response_not_found"


# ---------------------------------------------------------------------------------------
# The OpenAI Agents SDK: a two-tool agent on the Responses model.

TWO_CALLS = (
    'Looking both up.<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": "2"}}</tool_call>'
    "<tool_call>{'name': 'get_time', 'arguments': {'zone': 'CET',}}</tool_call>"
)


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_an_agents_sdk_agent_runs_both_mended_calls_and_finishes(stack, streamed, api):
    import asyncio

    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    ran: list[tuple[str, dict]] = []

    @function_tool
    def get_weather(city: str, days: int) -> str:
        """Weather for a city."""
        ran.append(("get_weather", {"city": city, "days": days}))
        return f"{city}: sunny for {days} days"

    @function_tool
    def get_time(zone: str) -> str:
        """Time in a zone."""
        ran.append(("get_time", {"zone": zone}))
        return "12:00"

    s = stack(said(TWO_CALLS), said("Oslo is sunny; it is noon in CET."), env_extra={"TOOLMEND_UPSTREAM__API": api})
    client = AsyncOpenAI(base_url=s.gateway, api_key="x", max_retries=0)
    agent = Agent(name="helper", instructions="Use the tools.", tools=[get_weather, get_time],
                  model=OpenAIResponsesModel(model="m", openai_client=client))

    async def run():
        if not streamed:
            return (await Runner.run(agent, "Weather in Oslo for 2 days, and the time in CET?")).final_output
        result = Runner.run_streamed(agent, "Weather in Oslo for 2 days, and the time in CET?")
        async for _ in result.stream_events():
            pass
        return result.final_output

    final = asyncio.run(run())
    assert sorted(ran) == [("get_time", {"zone": "CET"}), ("get_weather", {"city": "Oslo", "days": 2})]
    assert final == "Oslo is sunny; it is noon in CET."
