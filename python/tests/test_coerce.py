"""`coerce=` takes the fix ids a report shows as well as the coercion switch names."""

from __future__ import annotations

import pytest

import toolmend

TOOL = {
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "units": {"enum": ["celsius", "fahrenheit"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
}


def mend(coerce, args: dict) -> dict:
    return toolmend.Toolbox([TOOL], coerce=coerce).mend("get_weather", args)[0]


def test_a_fix_id_switches_the_coercion_that_makes_it() -> None:
    call = mend(True, {"city": "Oslo", "days": "3"})
    assert [f["kind"] for f in call["fixes"]] == ["string_to_integer"]
    # The id seen in that report switches it off, as the switch's own name does.
    for coerce in ({"string_to_integer": False}, {"numeric_strings": False}):
        call = mend(coerce, {"city": "Oslo", "days": "3"})
        assert call["outcome"] == "feedback", coerce
        assert call["issues"][0]["path"] == "/days"
    # One per switch, each turning only its own off.
    cases = {
        "enum_case_fixed": {"city": "Oslo", "units": "Celsius"},
        "key_renamed": {"town": "Oslo"},
        "key_case_fixed": {"City": "Oslo"},
        "wrapped_in_array": {"city": "Oslo", "tags": "x"},
        "csv_split": {"city": "Oslo", "tags": "a, b"},
        "scalar_to_string": {"city": 5},
    }
    for fix_id, args in cases.items():
        on = mend(True, args)
        assert fix_id in [f["kind"] for f in on["fixes"]], (fix_id, on)
        off = mend({fix_id: False}, args)
        assert fix_id not in [f["kind"] for f in off.get("fixes", [])], (fix_id, off)
        if fix_id == "csv_split":
            # Another coercion may still read it: "a, b" becomes ["a, b"], not split.
            assert off["arguments"]["tags"] == ["a, b"], off
        else:
            assert off["outcome"] == "feedback", (fix_id, off)


def test_a_merged_call_is_one_call_per_value_by_default() -> None:
    box = toolmend.Toolbox([TOOL])
    merged = {"city": ["Oslo", "Bergen", "Tromso"], "days": 2}
    for args in (merged, '{"city": ["Oslo", "Bergen", "Tromso"], "days": 2}'):
        calls = box.mend("get_weather", args)
        assert [c["arguments"] for c in calls] == [
            {"city": "Oslo", "days": 2},
            {"city": "Bergen", "days": 2},
            {"city": "Tromso", "days": 2},
        ], calls
        for c in calls:
            assert c["outcome"] == "repaired"
            assert "merged_call_split" in [f["kind"] for f in c["fixes"]]
    # The switch (or the fix id, or no coercion at all): one call, feedback.
    for coerce in ({"split_merged_calls": False}, {"merged_call_split": False}, False):
        (call,) = toolmend.Toolbox([TOOL], coerce=coerce).mend("get_weather", merged)
        assert call["outcome"] == "feedback", coerce
        assert "one call per value" in call["feedback"], call["feedback"]
    # Two fields given lists, or one value that is not valid alone: feedback, no split.
    (call,) = box.mend("get_weather", {"city": ["Oslo", "Bergen"], "days": [1, 2]})
    assert call["outcome"] == "feedback"
    (call,) = box.mend("get_weather", {"city": ["Oslo", "Bergen"], "days": "many"})
    assert call["outcome"] == "feedback"


def test_a_fix_id_switches_its_whole_switch() -> None:
    # key_case_fixed and key_renamed are both made by `rename_keys`.
    call = mend({"key_case_fixed": False}, {"town": "Oslo"})
    assert call["outcome"] == "feedback"


def test_names_of_one_switch_must_agree() -> None:
    with pytest.raises(toolmend.ToolmendError, match="contradict"):
        toolmend.Toolbox([TOOL], coerce={"string_to_integer": False, "string_to_number": True})
    # Agreeing names are fine.
    toolmend.Toolbox([TOOL], coerce={"string_to_integer": False, "numeric_strings": False})


def test_an_unknown_name_lists_switches_and_fix_ids() -> None:
    with pytest.raises(toolmend.ToolmendError) as e:
        toolmend.Toolbox([TOOL], coerce={"string_to_int": False})
    message = str(e.value)
    assert '"string_to_int"' in message
    assert "numeric_strings" in message and "string_to_integer" in message and "enum_case_fixed" in message


def test_the_node_takes_fix_ids_too() -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.runtime import Runtime

    from toolmend.langgraph import ToolNode

    config = {"configurable": {"__pregel_runtime": Runtime()}}

    @tool
    def get_weather(city: str, units: str = "celsius") -> str:
        """Weather for a city."""
        return f"{city}: sunny ({units})"

    msg = AIMessage(
        "",
        tool_calls=[],
        invalid_tool_calls=[{"id": "c1", "name": "get_weather", "args": "{'City': 'Oslo'}", "error": None}],
    )
    on = ToolNode([get_weather]).invoke({"messages": [msg]}, config=config)["messages"]
    assert on[-1].content == "Oslo: sunny (celsius)"
    off = ToolNode([get_weather], coerce={"key_case_fixed": False}).invoke({"messages": [msg]}, config=config)[
        "messages"
    ]
    assert off[-1].status == "error", off[-1]
