"""The gateway's account (`toolmend` in the completion and in a stream's last chunk) and
its reasoning policy, as the real `openai` SDK hands them to an application: the
`toolmend serve` binary in front of the strict scripted provider (`toolmend
scripted-provider`), both subprocesses on 127.0.0.1 (see test_gateway_clients.py for the
binary and the fixture).

The SDK ignores headers and SSE comments; what it keeps of an unknown member is in
pydantic's `model_extra`: `completion.model_extra["toolmend"]`,
`chunk.model_extra["toolmend"]`, `message.model_extra["reasoning_content"]`. Each test
also checks that nothing else about the objects changed: the typed fields parse as for
the provider's own answer, and the only extra member is the one we add.
"""

from __future__ import annotations

from test_gateway_clients import ASK, BROKEN_ARGS, MENDED, WEATHER, args_of, call, calls, said, stack  # noqa: F401

THOUGHT = "<think>\nThe user wants Paris.\n</think>\n\nChecking the weather."


def extras(obj) -> dict:
    return dict(obj.model_extra or {})


def test_sdk_completion_keeps_the_account_and_nothing_else_changes(stack):
    s = stack(
        calls(call("c1", '{"city": "Oslo"}'), call("c2", BROKEN_ARGS)),
        calls(call("c1", '{"city": "Oslo"}'), call("c2", BROKEN_ARGS)),
    )
    resp = s.sdk().chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    account = resp.model_extra["toolmend"]
    assert account["counts"]["valid"] == 1 and account["counts"]["repaired"] == 1
    by_id = {c["id"]: c for c in account["calls"]}
    assert by_id["c1"]["status"] == "valid"
    assert by_id["c2"]["status"] == "repaired"
    assert {"single_quotes", "trailing_comma", "string_to_integer"} <= set(by_id["c2"]["fixes"])
    assert account["re_asks"] == {"made": 0, "calls": [], "failed": None}
    assert args_of(resp.choices[0].message.tool_calls[1]) == MENDED

    # The strict wire shape otherwise: the provider's own answer parses to the same typed
    # fields, and `toolmend` is the only member the SDK does not know.
    direct = s.sdk(direct=True).chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    assert set(extras(resp)) == {"toolmend"}
    assert extras(direct) == {}
    assert extras(resp.choices[0]) == extras(direct.choices[0]) == {}
    assert extras(resp.choices[0].message) == extras(direct.choices[0].message) == {}
    ours = resp.model_dump(exclude={"toolmend", "id", "created"})
    theirs = direct.model_dump(exclude={"id", "created"})
    ours["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] = BROKEN_ARGS
    assert ours == theirs


def test_sdk_sees_a_re_ask_it_never_paid_for_in_the_account(stack):
    # The first answer misses the required `city`: the gateway asks again (one more
    # upstream request, invisible but for the account).
    s = stack(calls(call("c1", '{"days": 2}')), calls(call("c1b", '{"city": "Paris", "days": 2}')))
    resp = s.sdk().chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    assert s.provider_is_exhausted(), "two upstream requests for one create()"
    account = resp.model_extra["toolmend"]
    assert account["re_asks"] == {"made": 1, "calls": ["c1"], "failed": None}
    assert [c["id"] for c in account["calls"]] == ["c1b"]
    assert resp.choices[0].message.tool_calls[0].id == "c1b"


def test_sdk_stream_keeps_the_account_on_the_last_chunk(stack):
    s = stack(calls(call("c1", BROKEN_ARGS)))
    chunks = list(
        s.sdk().chat.completions.create(
            model="m",
            messages=ASK,
            tools=[WEATHER],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    with_account = [i for i, c in enumerate(chunks) if "toolmend" in extras(c)]
    assert with_account == [len(chunks) - 1]
    last = chunks[-1]
    assert last.usage is not None and last.choices == []  # the usage chunk, as OpenAI sends it
    account = last.model_extra["toolmend"]
    assert account["calls"][0]["id"] == "c1" and account["calls"][0]["status"] == "repaired"
    for c in chunks[:-1]:
        assert extras(c) == {}
        for choice in c.choices:
            assert extras(choice.delta) == {}


def test_sdk_reads_reasoning_moved_out_of_the_content(stack):
    s = stack(
        {"content": THOUGHT, "tool_calls": [call("c1", '{"city": "Paris"}')]},
        said(THOUGHT),
    )
    resp = s.sdk().chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
    message = resp.choices[0].message
    assert message.content == "Checking the weather."
    assert message.model_extra["reasoning_content"] == "The user wants Paris."
    assert resp.model_extra["toolmend"]["reasoning"] == "moved"

    # Streamed, without tools: the reasoning arrives as `delta.reasoning_content`.
    content, reasoning = "", ""
    for chunk in s.sdk().chat.completions.create(model="m", messages=ASK, stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += extras(choice.delta).get("reasoning_content") or ""
    assert content == "Checking the weather."
    assert reasoning.strip() == "The user wants Paris."
    assert "<think>" not in content


def test_the_stream_helper_keeps_the_reasoning_and_its_chunk_events_the_account(stack):
    # `client.chat.completions.stream()` accumulates the chunks into a completion. It
    # carries the message's unknown members (so `reasoning_content`), but not the
    # chunks' top-level ones: the account is on its last chunk event (`event.chunk`).
    s = stack(said(THOUGHT))
    with s.sdk().chat.completions.stream(model="m", messages=ASK) as stream:
        chunk_events = [e for e in stream if e.type == "chunk"]
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Checking the weather."
    assert message.model_extra["reasoning_content"] == "The user wants Paris."
    assert "toolmend" not in extras(final)  # the SDK's accumulation keeps no chunk extras
    assert chunk_events[-1].chunk.model_extra["toolmend"]["reasoning"] == "moved"
    assert all("toolmend" not in extras(e.chunk) for e in chunk_events[:-1])
