"""`toolmend.loads` / `toolmend.repair_json`: json_repair's one-liners, one import away.

The examples are json_repair's own, from its README (0.64); where json_repair is installed
(scripts/python-env.sh pins it for the benchmarks) the common cases are also compared with
it live. The documented differences are tested as differences.
"""

from __future__ import annotations

import io
import json
import logging
import random

import pytest

import toolmend
import toolmend as json_repair  # the one-import replacement this module promises

# json_repair's README: "Quick example".
QUICK = '{"users":[{"name":"Ada","role":"admin",}],"ok":true'
# json_repair's README: "Schema-guided repairs".
SCHEMA = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}


def test_the_readme_quick_example() -> None:
    assert json_repair.loads(QUICK) == {"users": [{"name": "Ada", "role": "admin"}], "ok": True}
    assert json_repair.repair_json(QUICK, return_objects=True) == json_repair.loads(QUICK)


def test_repair_json_returns_json_text_and_passes_json_dumps_arguments() -> None:
    # README, "Non-Latin characters": ensure_ascii defaults to True, as json.dumps's does.
    assert json_repair.repair_json("{'test_chinese_ascii':'统一码'}") == '{"test_chinese_ascii": "\\u7edf\\u4e00\\u7801"}'
    assert json_repair.repair_json("{'test_chinese_ascii':'统一码'}", ensure_ascii=False) == '{"test_chinese_ascii": "统一码"}'
    # README, "JSON dumps parameters": every json.dumps parameter passes through.
    assert json_repair.repair_json("{'a': 1, 'b': [2,]}", indent=2) == json.dumps({"a": 1, "b": [2]}, indent=2)


def test_nothing_to_read_is_an_empty_string() -> None:
    # README: "If the string was super broken this will return an empty string".
    for text in ("", "hello", "   "):
        assert json_repair.repair_json(text) == ""
        assert json_repair.loads(text) == ""
    # ... while valid JSON holding "" is JSON text.
    assert json_repair.repair_json('""') == '""'


def test_skip_json_loads_goes_straight_to_the_parser() -> None:
    bad = "{'a': 1, 'b': 'two',}"
    assert json_repair.repair_json(bad, skip_json_loads=True) == '{"a": 1, "b": "two"}'
    assert json_repair.repair_json(bad, return_objects=True, skip_json_loads=True) == {"a": 1, "b": "two"}
    assert json_repair.loads(bad, skip_json_loads=True) == {"a": 1, "b": "two"}
    # A valid array or scalar is still read.
    assert json_repair.loads("[1, 2]", skip_json_loads=True) == [1, 2]


def test_valid_json_of_any_shape_is_read_as_json_loads_reads_it() -> None:
    for text in ('{"a": [1, 2.5, null]}', "[1, 2]", "3", '"s"', "true", "null"):
        assert json_repair.loads(text) == json.loads(text)
        assert json_repair.repair_json(text) == json.dumps(json.loads(text))


def test_schema_guided_repair() -> None:
    # README, "Schema-guided repairs": '"1"' becomes 1 for an integer field.
    assert json_repair.repair_json('{"value": "1"}', schema=SCHEMA, return_objects=True) == {"value": 1}
    assert json_repair.loads("{'value': '1',}", schema=SCHEMA) == {"value": 1}
    assert json_repair.repair_json('{"value": "1"}', schema=SCHEMA) == '{"value": 1}'
    # A value that cannot fit: ValueError naming the field (json_repair raises too).
    with pytest.raises(ValueError, match="/value"):
        json_repair.loads('{"value": "many"}', schema=SCHEMA)
    with pytest.raises(ValueError, match="value"):
        json_repair.loads('{"x": 1}', schema={**SCHEMA, "additionalProperties": False})
    # A list for a scalar field is one value that does not fit (never several calls), as
    # a parsed object and as text alike.
    for text in ('{"value": [1, 2]}', "{'value': [1, 2],}"):
        with pytest.raises(ValueError, match="does not fit the schema: /value"):
            json_repair.loads(text, schema=SCHEMA)
    with pytest.raises(ValueError, match="schema and strict cannot be used together"):
        json_repair.loads("{}", schema=SCHEMA, strict=True)
    with pytest.raises(ValueError, match="invalid schema"):
        json_repair.loads("{}", schema={"type": "no-such-type"})


def test_schema_from_a_pydantic_model() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Payload(pydantic.BaseModel):
        value: int
        tags: list[str] = pydantic.Field(default_factory=list)

    # README's pydantic example. json_repair also fills in `tags` from the model's default;
    # toolmend leaves an absent optional field absent (the model fills it on validation).
    got = json_repair.repair_json('{"value": "1", "tags": }', schema=Payload, skip_json_loads=True, return_objects=True)
    assert got == {"value": 1}
    assert Payload.model_validate(got) == Payload(value=1, tags=[])


def test_logging_returns_the_value_and_what_was_fixed() -> None:
    value, log = json_repair.repair_json("{'a': 1,}", logging=True)
    assert value == {"a": 1}
    assert [f["kind"] for f in log] == ["single_quotes", "trailing_comma"]
    assert json_repair.loads('{"a": 1}', logging=True) == ({"a": 1}, [])
    value, log = json_repair.loads("nothing", logging=True)
    assert value == "" and [f["kind"] for f in log] == ["gave_up"]
    # With a schema, the coercions are in the log too.
    _, log = json_repair.loads("{'value': '1'}", schema=SCHEMA, logging=True)
    assert [f["kind"] for f in log] == ["single_quotes", "string_to_integer"]


def test_strict_repairs_nothing() -> None:
    assert json_repair.loads('{"a": 1}', strict=True) == {"a": 1}
    with pytest.raises(ValueError):
        json_repair.loads("{'a': 1}", strict=True)
    with pytest.raises(ValueError):
        json_repair.repair_json("{'a': 1}", strict=True, skip_json_loads=True)


def test_load_and_from_file(tmp_path) -> None:
    assert json_repair.load(io.StringIO(QUICK)) == json_repair.loads(QUICK)
    path = tmp_path / "bad.json"
    path.write_text("{'name': 'Ada', 'tags': ['x',],}", encoding="utf-8")
    assert json_repair.from_file(path) == {"name": "Ada", "tags": ["x"]}
    assert json_repair.from_file(str(path), logging=True)[0] == {"name": "Ada", "tags": ["x"]}


def test_what_is_not_supported_says_so() -> None:
    with pytest.raises(ValueError, match="stream_stable"):
        json_repair.loads('{"a": "b', stream_stable=True)
    with pytest.raises(ValueError, match="salvage"):
        json_repair.loads("{}", schema=SCHEMA, schema_repair_mode="salvage")
    with pytest.raises(ValueError, match="json_fd"):
        json_repair.repair_json(json_fd=io.StringIO("{}"))
    with pytest.raises(TypeError, match="json_str must be a str"):
        json_repair.loads(b"{}")  # type: ignore[arg-type]


def test_the_names_are_exported() -> None:
    from toolmend import from_file, load, loads, repair_json  # noqa: F401

    assert {"loads", "repair_json", "load", "from_file"} <= set(toolmend.__all__)


# The common cases, compared with json_repair itself where it is installed.
COMMON = [
    QUICK,
    "{'a': 1, 'b': True, 'c': None,}",
    '{"a": 1,}',
    '```json\n{"a": 1}\n```',
    '<think>the user wants Paris</think>{"city": "Paris"}',
    '{"city": "Par',
    '{"a": 1, "b": [1, 2',
    '{"a": 1}{"b": 2}',
    '{"a": 1} and some prose after it',
    'Sure! Here it is: {"a": 1}',
    '{a: 1, b: "two"}',
    '{"nested": {"x": [1, 2, {"y": "z"}]}, "n": 3}',
    '{"s": "line\nbreak"}',
    "[1, 2, 3]",
    "",
    "not json at all",
]


@pytest.mark.parametrize("text", COMMON)
def test_the_same_answer_as_json_repair_on_the_common_cases(text: str) -> None:
    real = pytest.importorskip("json_repair")
    assert toolmend.loads(text) == real.loads(text)
    assert toolmend.repair_json(text) == real.repair_json(text)


def test_a_broken_top_level_array_is_the_documented_difference() -> None:
    # The parser reads objects (tool arguments are objects): a broken array gives "".
    assert toolmend.loads("[1, 2") == ""
    real = pytest.importorskip("json_repair")
    assert real.loads("[1, 2") == [1, 2]


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"a": "' + "x" * (5 << 20), "more than the limit of 4194304 bytes"),
        ("{'a': " * 200 + "1", "nesting deeper than 128"),
        ("nothing to read", "no JSON object"),
    ],
    ids=["over_4_mib", "nested_over_128", "no_object"],
)
def test_giving_up_is_never_silent(text, why, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="toolmend"):
        assert json_repair.loads(text) == ""
    assert any(why in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    value, log = json_repair.loads(text, logging=True)
    assert value == "" and log[0]["kind"] == "gave_up" and why in log[0]["detail"]
    with pytest.raises(ValueError, match=why):
        json_repair.loads(text, schema=SCHEMA)


# ---- json.loads first, without paying for its JSONDecodeError --------------------------


def _same(a, b) -> bool:
    """Equal as json.loads gives them, NaN equal to NaN and 1 not equal to True."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _texts() -> list[str]:
    """Valid JSON, the texts json.loads reads but serde_json refuses, and mutations of
    both (a character dropped, doubled or replaced), deterministic."""
    seeds = [
        '{"city": "Paris", "days": 3, "tags": ["a", "b"], "ok": true, "none": null}',
        '{"a": [1, 2.5, -0, 1e5, 12345678901234567890123], "b": {"c": "\\u00e9\\n"}}',
        '{"x": NaN, "y": Infinity, "z": -Infinity}',
        '{"s": "\\ud800"}',
        '{"s": "\\udc00 tail"}',
        '{"s": "\\ud83d\\ude00"}',
        '{"n": 1e400}',
        '{"n": -1E+999}',
        '{"n": ' + "9" * 400 + "}",
        "[" * 200 + "]" * 200,
        '{"d": ' + "[" * 130 + "]" * 130 + "}",
        "[1, 2]",
        '"text"',
        "3.25",
        "  {\"a\": 1}\n",
    ]
    rng = random.Random(31)
    out = list(seeds)
    alphabet = '{}[],:"\\ NaInfity0123456789eE+-.tfnul\n\tu'
    for _ in range(4000):
        t = list(rng.choice(seeds))
        i = rng.randrange(len(t) + 1)
        op = rng.randrange(3)
        if op == 0 and i < len(t):
            del t[i]
        elif op == 1:
            t.insert(i, rng.choice(alphabet))
        elif i < len(t):
            t[i] = rng.choice(alphabet)
        out.append("".join(t))
    return out


def test_every_text_json_loads_reads_is_read_as_json_loads_reads_it() -> None:
    # `loads` asks the Rust side whether json.loads could read a text before trying it
    # (a JSONDecodeError costs more than the repair). A text json.loads reads must never
    # be taken for broken: it is returned as json.loads returns it, with an empty log.
    from toolmend._json_repair import _may_be_json

    read = 0
    for text in _texts():
        try:
            expected = json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError):
            continue
        read += 1
        assert _may_be_json(text), text[:80]
        value, log = json_repair.loads(text, logging=True)
        assert _same(value, expected) and log == [], text[:80]
    assert read > 100


def test_a_schema_changed_in_place_is_compiled_again() -> None:
    # Compiled schemas are found by a digest of their content: the same dict changed in
    # place is another schema, and the same schema with its keys in another order is not.
    from toolmend import _json_repair

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert json_repair.loads('{"n": "5"}', schema=schema) == {"n": 5}
    schema["properties"]["n"]["type"] = "string"
    assert json_repair.loads('{"n": "5"}', schema=schema) == {"n": "5"}
    reordered = {"properties": {"n": {"type": "string"}}, "type": "object"}
    compiled = len(_json_repair._TOOLBOXES)
    assert json_repair.loads('{"n": 5}', schema=reordered) == {"n": "5"}
    assert len(_json_repair._TOOLBOXES) == compiled


def test_valid_parsed_arguments_come_back_as_the_callers_object() -> None:
    box = toolmend.Toolbox([{"name": "f", "parameters": SCHEMA}])
    args = {"value": 1}
    [call] = box.mend("f", args)
    assert call["outcome"] == "valid" and call["arguments"] is args
    # Coerced: a new object. Holding a tuple (no JSON type): converted, never aliased.
    [call] = box.mend("f", {"value": "1"})
    assert call["arguments"] == {"value": 1}
    tupled = {"value": 1, "extra": (1, 2)}
    [call] = toolmend.Toolbox([{"name": "f", "parameters": {"type": "object"}}]).mend("f", tupled)
    assert call["arguments"] == {"value": 1, "extra": [1, 2]} and call["arguments"] is not tupled


def test_json_nested_past_pythons_stack_is_given_up_with_its_reason() -> None:
    text = "[" * 100_000 + "]" * 100_000
    value, log = json_repair.loads(text, logging=True)
    assert value == "" and log[0]["kind"] == "gave_up"
    with pytest.raises(ValueError):
        json_repair.loads(text, strict=True)


def test_subclasses_and_big_integers_are_never_handed_back_as_sent() -> None:
    import enum

    class Unit(enum.StrEnum):
        C = "celsius"

    box = toolmend.Toolbox([{"name": "f", "parameters": {"type": "object"}}])
    for args in ({"unit": Unit.C}, {"n": 2**64 + 5}):
        [call] = box.mend("f", args)
        assert call["arguments"] is not args
    [call] = box.mend("f", {"unit": Unit.C})
    assert type(call["arguments"]["unit"]) is str


def test_the_schema_caches_keep_at_most_64_schemas() -> None:
    # Each distinct schema compiles once; the caches that find them again stay bounded.
    from toolmend import _json_repair

    for n in range(80):
        schema = {"type": "object", "properties": {f"f{n}": {"type": "integer"}}}
        assert json_repair.loads(f'{{"f{n}": "1"}}', schema=schema) == {f"f{n}": 1}
    assert len(_json_repair._TOOLBOXES) <= 64
    assert len(_json_repair._BY_DIGEST) <= 64
