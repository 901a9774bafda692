"""json_repair's one-liners on toolmend's parser: ``loads``, ``repair_json``, ``load``,
``from_file``, with json_repair's signatures for the common cases, so that replacing it
is one import::

    import toolmend as json_repair          # or: from toolmend import loads, repair_json

What matches json_repair (and ``tests/test_json_repair.py`` holds it to its documented
examples): valid JSON is read by ``json.loads`` first (any value), broken text is
repaired (quotes, commas, Python literals, fences, ``<think>``, a cut-off text
completed), several glued values come back as a list, text with nothing to read gives
``""``, ``repair_json`` returns ``json.dumps`` text (its extra keyword arguments, such
as ``ensure_ascii=False``, go to ``json.dumps``), ``logging=True`` returns
``(value, log)`` (when nothing could be read, ``("", [{"kind": "gave_up", "detail":
why}])``, and the reason is logged at INFO on the ``toolmend`` logger), and ``schema=`` (a JSON Schema or a pydantic v2 model) coerces
(``"1"`` -> ``1``) and validates, raising ``ValueError`` when the value cannot fit.

Where it differs, on purpose:

- the log entries are toolmend's fix records (``kind``, ``offset`` or ``path``,
  ``detail``), not json_repair's text lines;
- with ``schema=``, a missing required value is never filled in: it raises
  ``ValueError`` naming the field (json_repair raises too, in its standard mode);
- the repair reads objects, as tool arguments are: a broken text whose top-level
  value is an array or a scalar (``[1, 2``) gives ``""`` where json_repair completes
  it (a *valid* array or scalar is read by ``json.loads``, as json_repair reads it);
- ``stream_stable=True``, ``json_fd=``, ``chunk_length=`` and
  ``schema_repair_mode="salvage"`` are not supported and raise ``ValueError``.

For tool calls, prefer :class:`toolmend.Toolbox`: it validates against the tool's
schema, gives field-level feedback, and refuses a call cut off mid-text (these
one-liners complete it, as json_repair does).
"""

from __future__ import annotations

import json
import logging as _logging
from pathlib import Path
from typing import Any, TextIO

from toolmend._core import Toolbox, ToolmendError
from toolmend._core import json_loads_reads as _json_loads_reads
from toolmend._core import repair as _repair
from toolmend._core import schema_digest as _schema_digest

__all__ = ["from_file", "load", "loads", "repair_json"]

_log = _logging.getLogger("toolmend")

# The tool name a schema is compiled under (it is in no answer: errors are ValueErrors).
_NAME = "json"
# Compiled schemas, by their JSON text: compiling costs far more than reading a value.
_TOOLBOXES: dict[str, Toolbox] = {}
# The same, by the schema's digest (`_core.schema_digest`): (the schema compiled, its
# Toolbox); and pydantic models by their class.
_BY_DIGEST: dict[int, tuple[dict, Toolbox]] = {}
_BY_MODEL: dict[type, Toolbox] = {}
_MAX_TOOLBOXES = 64


def repair_json(
    json_str: str = "",
    return_objects: bool = False,
    skip_json_loads: bool = False,
    logging: bool = False,
    json_fd: TextIO | None = None,
    chunk_length: int = 0,
    stream_stable: bool = False,
    strict: bool = False,
    schema: Any | None = None,
    schema_repair_mode: str = "standard",
    **json_dumps_args: Any,
) -> Any:
    """Repairs ``json_str`` and returns it as JSON text (``json.dumps``, with
    ``json_dumps_args``), or the value with ``return_objects=True``; ``""`` when the
    text holds nothing to read. ``logging=True`` returns ``(value, fixes)``.

    ``skip_json_loads`` skips the ``json.loads`` attempt (toolmend's parser has its own
    fast path for valid JSON). ``strict=True`` repairs nothing: text that is not valid
    JSON raises ``ValueError``. ``schema`` (a JSON Schema dict or a pydantic v2 model)
    coerces and validates the value; a value that cannot fit raises ``ValueError``.
    """
    _unsupported(json_fd, chunk_length, stream_stable, schema_repair_mode)
    if schema is not None and strict:
        raise ValueError("schema and strict cannot be used together.")
    if not isinstance(json_str, str):
        raise TypeError(f"json_str must be a str, not {type(json_str).__name__}")
    value, log = _read(json_str, skip_json_loads, strict)
    if schema is not None:
        value, log = _fit(value, json_str, log, schema)
    if logging:
        return value, log or []
    if return_objects:
        return value
    if value == "" and _gave_up(log):
        return ""
    return json.dumps(value, **json_dumps_args)


def loads(
    json_str: str,
    skip_json_loads: bool = False,
    logging: bool = False,
    stream_stable: bool = False,
    strict: bool = False,
    schema: Any | None = None,
    schema_repair_mode: str = "standard",
) -> Any:
    """Like ``json.loads``, mending the text first: :func:`repair_json` with
    ``return_objects=True``."""
    return repair_json(
        json_str,
        return_objects=True,
        skip_json_loads=skip_json_loads,
        logging=logging,
        stream_stable=stream_stable,
        strict=strict,
        schema=schema,
        schema_repair_mode=schema_repair_mode,
    )


def load(
    fd: TextIO,
    skip_json_loads: bool = False,
    logging: bool = False,
    chunk_length: int = 0,
    strict: bool = False,
    schema: Any | None = None,
    schema_repair_mode: str = "standard",
) -> Any:
    """Like ``json.load``: :func:`loads` on the whole of ``fd``."""
    return loads(
        fd.read(),
        skip_json_loads=skip_json_loads,
        logging=logging,
        strict=strict,
        schema=schema,
        schema_repair_mode=schema_repair_mode,
    )


def from_file(
    filename: str | Path,
    skip_json_loads: bool = False,
    logging: bool = False,
    chunk_length: int = 0,
    strict: bool = False,
    schema: Any | None = None,
    schema_repair_mode: str = "standard",
) -> Any:
    """:func:`load` on the file ``filename`` (read as UTF-8)."""
    with open(filename, encoding="utf-8") as fd:
        return load(
            fd,
            skip_json_loads=skip_json_loads,
            logging=logging,
            strict=strict,
            schema=schema,
            schema_repair_mode=schema_repair_mode,
        )


def _unsupported(json_fd: Any, chunk_length: int, stream_stable: bool, mode: str) -> None:
    if json_fd is not None or chunk_length:
        raise ValueError("json_fd= and chunk_length= are not supported: use toolmend.load(fd)")
    if stream_stable:
        raise ValueError(
            "stream_stable=True is not supported: toolmend repairs a whole text "
            "(a cut-off text is completed, but not kept stable as it grows)"
        )
    if mode != "standard":
        raise ValueError(
            f"schema_repair_mode={mode!r} is not supported: only 'standard' "
            "(toolmend never fills in or drops values to fit a schema)"
        )


def _read(text: str, skip_json_loads: bool, strict: bool) -> tuple[Any, list[dict] | None]:
    """The value and its fixes; ``("", [{"kind": "gave_up", "detail": why}])`` when
    nothing could be read."""
    # `json.loads` first, as json_repair reads, unless the text is plainly no JSON.
    if not skip_json_loads and (strict or _may_be_json(text)):
        try:
            return json.loads(text), []
        except (json.JSONDecodeError, TypeError, ValueError):
            if strict:
                raise
        except RecursionError:  # nested deeper than Python's stack: the repair says why
            if strict:
                raise ValueError("JSON nested too deeply to read") from None
    try:
        repaired = _repair(text, strict=strict)
    except ToolmendError as e:
        # The parser reads objects; a valid array or scalar is still JSON.
        try:
            return json.loads(text), []
        except (json.JSONDecodeError, ValueError, RecursionError):
            pass
        if strict:
            raise ValueError(str(e)) from None
        # Never a silent "": the reason goes to the log (and, with logging=True, back).
        _log.info("toolmend.loads read no JSON value: %s", e)
        return "", [{"kind": "gave_up", "detail": str(e)}]
    calls = repaired["calls"]
    log = [fix for call in calls for fix in call["fixes"]]
    if len(calls) == 1:
        return calls[0]["arguments"], log
    return [call["arguments"] for call in calls], log


def _may_be_json(text: str) -> bool:
    """False when ``json.loads`` would refuse ``text`` (checked in Rust: its
    ``JSONDecodeError`` costs more than the repair)."""
    try:
        return _json_loads_reads(text) is not False
    except UnicodeError:  # a lone surrogate as a character: only json.loads can tell
        return True


def _gave_up(log: list[dict] | None) -> bool:
    """The reading gave up: its log is the one ``gave_up`` record."""
    return bool(log) and log[0].get("kind") == "gave_up"


def _fit(value: Any, text: str, log: list[dict] | None, schema: Any) -> tuple[Any, list[dict]]:
    """``value`` coerced to ``schema`` and validated, with the coercions' fixes."""
    box = _toolbox(schema)
    if _gave_up(log):
        raise ValueError(f"no JSON value could be read from the text: {log[0]['detail']}")
    # A parsed object is coerced and validated; anything else is mended from its text
    # (a glued pair of objects, say, is two calls: more than one value for one schema).
    arguments = value if isinstance(value, dict) else text
    calls = box.mend(_NAME, arguments, accept_truncated=True)
    if len(calls) != 1:
        raise ValueError(f"the text holds {len(calls)} values; the schema describes one")
    call = calls[0]
    if call["outcome"] == "feedback":
        problems = "; ".join(
            f"{i['path']}: {i['message']}" if i.get("path") else i["message"]
            for i in call["issues"]
        )
        raise ValueError(f"the JSON does not fit the schema: {problems}")
    fixes = call.get("fixes", [])
    if isinstance(value, dict):
        fixes = log + fixes
    return call["arguments"], fixes


def _toolbox(schema: Any) -> Toolbox:
    given = schema
    if isinstance(schema, type):
        box = _BY_MODEL.get(schema)
        if box is not None:
            return box
    # A dict is found by a digest of its content (any key order), and the schema it was
    # compiled from compared on a hit: no sorted JSON text written per call.
    digest = _schema_digest(schema)
    if digest is not None:
        seen = _BY_DIGEST.get(digest)
        if seen is not None and seen[0] == schema:
            return seen[1]
    if hasattr(schema, "model_json_schema"):  # a pydantic v2 model
        schema = schema.model_json_schema()
    if not isinstance(schema, dict):
        raise ValueError(
            f"schema must be a JSON Schema dict or a pydantic v2 model, not {type(schema).__name__}"
        )
    key = json.dumps(schema, sort_keys=True)
    box = _TOOLBOXES.get(key)
    if box is None:
        try:
            # One value for one schema: a list for a scalar field is not read as several
            # calls here (it does not fit the schema).
            box = Toolbox(
                [{"name": _NAME, "parameters": schema}], coerce={"split_merged_calls": False}
            )
        except ToolmendError as e:
            raise ValueError(f"invalid schema: {e}") from None
        _bounded_put(_TOOLBOXES, key, box)
    if isinstance(given, type):
        _bounded_put(_BY_MODEL, given, box)
    elif digest is not None:
        # A copy, taken from the JSON text compiled: a dict changed in place later no
        # longer equals it, and is compiled again under its new digest.
        _bounded_put(_BY_DIGEST, digest, (json.loads(key), box))
    return box


def _bounded_put(cache: dict, key: Any, value: Any) -> None:
    if key not in cache and len(cache) >= _MAX_TOOLBOXES:
        # Another thread may evict at the same time: the oldest may be gone already.
        try:
            cache.pop(next(iter(cache)), None)
        except (StopIteration, RuntimeError):
            pass
    cache[key] = value