"""Mending an ``AIMessage``'s calls: the part the LangGraph node and the LangChain
middleware share. Imports ``langchain_core`` (both integrations need it), never
``langgraph`` or ``langchain``.

Per message, one Rust call resolves it (``Resolver.resolve``: the core's driver,
``toolmend::drive``, the same the Rust node and the gateway run): the plan (calls
extracted, ids settled by the one rule, each call repaired and validated against its
tool's ``tool_call_schema``), the calls LangGraph answers itself, the per-tool
validators, correction (the core's prompt, rule, re-validation and retries), raise or the
``on_unresolved`` hook, and the guard, in the core's one order. Python hands in its pieces
as callbacks (LangGraph's own schema check, the validators, the correction model's
request, the hook); one that answers with an awaitable pauses the driver until Python has
awaited it. Here: those callbacks and the mapping of the answer to LangChain's dicts.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool

from toolmend._core import Pending, Resolver, Toolbox, ToolmendError, repair
from toolmend._guard import ToolCallLimitExceededError, as_guard, declare_tools

#: Attribute of a planned call dict holding its feedback: the call is answered with it
#: instead of running. Never reaches a tool or a wrapper.
FEEDBACK_KEY = "__toolmend_feedback__"

#: The default coercions: every safe one, except a number or boolean for a string field,
#: which a tool's own pydantic validation (lax mode) refuses as well. Tools whose schema is
#: a plain JSON Schema dict (nothing validates them but toolmend) get every coercion.
PYDANTIC_LAX: dict[str, bool] = {"scalar_to_string": False}

class ToolCallValidationError(Exception):
    """Raised with ``on_unresolved="raise"`` before any call runs; ``calls`` holds every
    unresolved call (:class:`UnresolvedToolCall`)."""

    def __init__(self, calls: list[UnresolvedToolCall]):
        self.calls = calls
        lines = [f"Tool-call validation failed for {len(calls)} call(s):"]
        lines += [f"- {c.tool_name} (id={c.tool_call_id}): {c.error}" for c in calls]
        super().__init__("\n".join(lines))

    @property
    def failures(self) -> list[tuple[str, str, str]]:
        """``(tool name, call id, error text)`` per call, as SAIDEX names it."""
        return [(c.tool_name, c.tool_call_id, c.error) for c in self.calls]


@dataclass
class UnresolvedToolCall:
    """What an ``on_unresolved`` hook receives."""

    tool_name: str
    tool_call_id: str
    #: The arguments as the model sent them (a dict, or the raw text of an invalid call).
    original_args: Any
    #: The raw payload: the ``tool_calls`` / ``invalid_tool_calls`` entry.
    raw: dict[str, Any]
    #: Structured issues (``kind``, ``path``, ``message``, ``expected``, ``suggestion``).
    issues: list[dict[str, Any]]
    #: The feedback text the agent would get.
    error: str
    #: Whether a correction model tried.
    correction_attempted: bool
    #: The conversation before the assistant message.
    messages: list[BaseMessage]
    #: The graph state (``None`` outside a graph or for a message list).
    state: Any = None


@dataclass
class ValidatorContext:
    """What a per-tool validator receives besides the arguments."""

    tool_name: str
    tool_call_id: str
    phase: Literal["initial", "correction", "salvage"]
    messages: list[BaseMessage]
    state: Any = None


class CallRecord:
    """One call's stats, in the vocabulary of the Rust node's ``CallStats``. (A plain
    class: one is built per call, on the path every call takes.)"""

    __slots__ = (
        "tool_call_id", "tool", "outcome", "source", "fixes", "issues", "original_id",
        "correction_attempts", "note", "mend_us", "correct_us", "guard",
    )

    def __init__(
        self,
        tool_call_id: str | None,
        tool: str,
        outcome: str,
        source: str,
        fixes: list[dict[str, Any]] | None = None,
        issues: list[dict[str, Any]] | None = None,
        original_id: str | None = None,
        correction_attempts: int = 0,
        note: str | None = None,
        mend_us: float = 0.0,
        correct_us: float = 0.0,
    ):
        self.tool_call_id = tool_call_id
        self.tool = tool
        #: executed | corrected | salvaged | feedback | dropped | flooded
        self.outcome = outcome
        #: tool_calls (LangChain's ``tool_calls`` and ``invalid_tool_calls``, and ``Send``
        #: payloads) | text (written into the content) | glued (split off another call)
        self.source = source
        self.fixes: list[dict[str, Any]] = [] if fixes is None else fixes
        self.issues: list[dict[str, Any]] = [] if issues is None else issues
        self.original_id = original_id
        self.correction_attempts = correction_attempts
        self.note = note
        self.mend_us = mend_us
        self.correct_us = correct_us
        #: The guard's decisions on the call (rule, action, shadow, count, limit,
        #: window_ms, retry_after_ms): refusals, observations and shadow decisions.
        self.guard: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return "CallRecord(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__) + ")"


class Plan:
    """The calls of one invocation, in order, ready for LangGraph's execution. (A plain
    class: built once per invocation, on the path every call takes.)"""

    __slots__ = (
        "calls", "records", "sanitized", "started", "record_of", "message_fixes", "ai",
        "order", "new_content", "changed", "input_type", "already_answered", "stopped",
        "resolved_before",
    )

    def __init__(
        self,
        calls: list[dict[str, Any]],
        records: list[CallRecord],
        sanitized: AIMessage | None = None,
        started: float = 0.0,
    ):
        self.calls = calls
        self.records = records
        #: The assistant message with mended calls (same id), when anything changed.
        self.sanitized = sanitized
        self.started = started
        #: Per planned call: its position in ``records``.
        self.record_of: list[int] = []
        #: Fixes of the message itself (thinking stripped, calls moved from the text).
        self.message_fixes: list[dict[str, Any]] = []
        #: The assistant message planned from, if any.
        self.ai: AIMessage | None = None
        #: Its calls in the order the sanitized message keeps them: an index into
        #: ``calls``, or a call kept as it was (already answered).
        self.order: list[Any] = []
        self.new_content: Any = None
        self.changed = False
        self.input_type = "list"
        #: Ids of calls the tool messages after the assistant message answer already: not
        #: run again, and not in ``records`` (as the Rust node's ``already_answered``).
        self.already_answered: list[str] = []
        #: The guard ended the run: the reason (as the Rust node's ``NodeStats.stopped``).
        self.stopped: str | None = None
        #: The calls were resolved (and reported) already, by the post-model hook: they
        #: run as sent, and are not reported twice.
        self.resolved_before = False

    def stats(self, node: str) -> dict[str, Any]:
        return {
            "node": node,
            "calls": [{f: getattr(r, f) for f in r.__slots__} for r in self.records],
            "already_answered": self.already_answered,
            "message_fixes": self.message_fixes,
            "stopped": self.stopped,
            "elapsed_us": (time.perf_counter() - self.started) * 1e6,
        }


def tool_schema(tool: BaseTool) -> dict[str, Any]:
    """The JSON Schema the model fills: ``tool_call_schema`` (injected arguments left out)."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        params = dict(schema)
    else:
        params = schema.model_json_schema()
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    # langchain-core's tool_call_schema drops the tool's `extra="forbid"`; the model must
    # still learn that unknown keys are refused (and toolmend may then drop or rename them).
    config = getattr(getattr(tool, "args_schema", None), "model_config", None) or {}
    if isinstance(config, dict) and config.get("extra") == "forbid":
        params.setdefault("additionalProperties", False)
    # Titles are pydantic's, not the model's; they only make feedback noisier.
    params.pop("title", None)
    params.pop("description", None)
    return {"name": tool.name, "description": tool.description or "", "parameters": params}


def compile_tools(
    tools: Sequence[BaseTool], *, coerce: Any, strip: bool, broken_schema: str = "raise", **plan: Any
) -> Toolbox:
    """Compiles every tool's schema once, with the planning options (``plan``: passed to
    :class:`Toolbox`). A tool whose schema cannot be read or compiled raises
    ``ValueError``, as :class:`Toolbox` does; with ``broken_schema="open"`` it gets an open
    one (any object) and a warning: toolmend then checks nothing of its arguments, and
    LangGraph still validates them as it always did. Tools whose arguments are a JSON
    Schema dict have no pydantic model behind them: with the pydantic-lax default they
    get every coercion."""
    if broken_schema not in ("raise", "open"):
        raise ValueError(f"broken_schema={broken_schema!r}: use 'raise' or 'open'")
    defs = []
    for t in tools:
        try:
            d = tool_schema(t)
            Toolbox([d])
        except Exception as e:
            if broken_schema == "raise":
                raise ValueError(
                    f"tool {t.name!r}: its argument schema cannot be compiled ({e}); fix the "
                    "schema, or pass broken_schema='open' to run it with any object as its "
                    "arguments (toolmend then checks none of them; LangGraph still validates)"
                ) from e
            warnings.warn(
                f"tool {t.name!r}: its argument schema cannot be compiled ({e}); opened up "
                "(broken_schema='open'): toolmend checks none of its arguments",
                stacklevel=4,
            )
            d = {"name": t.name, "description": t.description or "", "parameters": {"type": "object"}}
        defs.append(d)
    if coerce is PYDANTIC_LAX:
        open_tools = {t.name: True for t in tools if isinstance(getattr(t, "args_schema", None), dict)}
        plan.setdefault("tool_coerce", open_tools or None)
    return Toolbox(defs, coerce=coerce, strip_thinking=strip, **plan)


def _injected(tool: Any) -> set[str]:
    """The arguments LangGraph injects into ``tool`` (state, store, runtime, the call id):
    in its input schema, not in the one the model fills."""
    try:
        full = set(getattr(tool.get_input_schema(), "model_fields", {}) or {})
        filled = set(getattr(tool.tool_call_schema, "model_fields", {}) or {})
    except Exception:
        return set()
    return full - filled


def content_text(content: Any) -> str | None:
    """The text of a message's content: the string, or the text of its content blocks
    (``{"type": "text", "text": …}`` and bare strings, joined as the core joins content
    parts); ``None`` when there is none."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [
        b if isinstance(b, str) else b.get("text")
        for b in content
        if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
    ]
    texts = [p for p in parts if isinstance(p, str)]
    return "".join(texts) if texts else None


def with_text(content: Any, text: str) -> Any:
    """``content`` with its text replaced by ``text`` (the calls and thinking taken out
    of it): a string is replaced; in a list of blocks the text blocks become one, where
    the first one was (none when ``text`` is empty), and every other block (an image, a
    ``tool_use``) stays as it was."""
    if not isinstance(content, list):
        return text
    out: list[Any] = []
    placed = False
    for b in content:
        if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text"):
            if not placed and text:
                out.append({"type": "text", "text": text})
            placed = True
        else:
            out.append(b)
    return out


def _text(msg: BaseMessage) -> str:
    content = msg.content
    return content if isinstance(content, str) else str(msg.text)


def _dumps(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def wire_message(msg: BaseMessage) -> dict[str, Any]:
    """A LangChain message as an OpenAI chat message dict (role, text, an assistant's
    calls, a result's call id): what the Rust correction prompt renders as context."""
    kind = msg.type
    if kind == "human":
        return {"role": "user", "content": _text(msg)}
    if kind == "ai":
        calls = [
            {"id": c.get("id"), "type": "function",
             "function": {"name": c.get("name") or "", "arguments": _dumps(c.get("args") or {})}}
            for c in [*msg.tool_calls, *msg.invalid_tool_calls]  # type: ignore[attr-defined]
        ]
        out: dict[str, Any] = {"role": "assistant", "content": _text(msg)}
        if calls:
            out["tool_calls"] = calls
        return out
    if kind == "tool":
        return {"role": "tool", "content": _text(msg), "tool_call_id": str(msg.tool_call_id)}  # type: ignore[attr-defined]
    if kind in ("system", "developer"):
        return {"role": "system", "content": _text(msg)}
    if kind == "function":
        return {"role": "function", "name": str(getattr(msg, "name", "") or ""), "content": _text(msg)}
    return {"role": "user", "content": _text(msg)}


def _args_dict(args: Any) -> dict[str, Any]:
    """Arguments as LangChain keeps them (a dict): a call read from the text that no tool
    mended (an unknown tool) still carries what the model wrote, as the core's sanitized
    message does, when that text is a JSON object."""
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def guard_history(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The history as the guard reads it: OpenAI-format dicts (calls with their mended
    arguments as JSON text, results as text). A refused call's answer begins with the
    flood prefix: the core's history rules read it as no result (no progress, and no
    break of the streak it answers)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        d = wire_message(m)
        for c in d.get("tool_calls") or ():
            if c.get("id") is None:
                c["id"] = ""
        out.append(d)
    return out


def _history_ids(messages: Sequence[BaseMessage], end: int) -> list[str]:
    """Every call and result id of ``messages[:end]``: a call reusing one gets a new id."""
    ids: list[str] = []
    for m in messages[:end]:
        kind = m.type
        if kind == "tool":
            ids.append(m.tool_call_id)  # type: ignore[attr-defined]
        elif kind == "ai":
            ids.extend(c["id"] for c in m.tool_calls if c.get("id"))  # type: ignore[attr-defined]
            ids.extend(c["id"] for c in m.invalid_tool_calls if c.get("id"))  # type: ignore[attr-defined]
    return ids


def _replaced(ai: AIMessage, **fields: Any) -> AIMessage:
    """``ai.model_copy(update=fields)`` at a third of its cost: a shallow copy whose fields
    are set as they are (they come from the message itself or from the plan, already in
    the shape the message holds)."""
    new = copy.copy(ai)
    vars(new).update(fields)
    new.__pydantic_fields_set__.update(fields)
    return new


def _answered_call(raw: dict[str, Any]) -> dict[str, Any]:
    """An answered ``invalid_tool_calls`` entry as a ``tool_calls`` one (its arguments
    read, or ``{}``), so the sanitized message keeps it beside its result."""
    args: Any = {}
    try:
        calls = repair(raw.get("args") or "")["calls"]
        if len(calls) == 1 and isinstance(calls[0]["arguments"], dict):
            args = calls[0]["arguments"]
    except ToolmendError:
        pass
    return {"name": raw.get("name") or "", "args": args, "id": raw.get("id"), "type": "tool_call"}


class _Turn:
    """What the callbacks of one resolution see: the message's calls as sent and the
    conversation around it. (A plain class: one per resolved message.)"""

    __slots__ = ("messages", "state", "ai", "sent", "parsed", "is_async")

    def __init__(self, messages, state, ai, sent, parsed, is_async):
        #: The conversation before the assistant message (LangChain messages).
        self.messages = messages
        self.state = state
        self.ai = ai
        #: The calls as sent: ``tool_calls``, then ``invalid_tool_calls``.
        self.sent = sent
        #: How many of ``sent`` LangChain parsed (``tool_calls``).
        self.parsed = parsed
        self.is_async = is_async

    def raw(self, index: int, tool: str, raw_arguments: str) -> dict[str, Any]:
        """The call as sent; for a call read from the text, its reading."""
        if self.sent:
            return self.sent[index]
        return {"name": tool, "args": _args_dict(raw_arguments), "id": None}


class Mender:
    """What the LangGraph node and the LangChain middleware share: one message resolved
    by the core's driver (``toolmend._core.Resolver``: plan, the calls LangGraph answers
    itself, validators, correction, raise or the hook, the guard, in the core's one order),
    with LangChain's pieces handed in as callbacks; the answer mapped to LangGraph's
    calls. Built once per node / middleware."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        correction_model: Any = None,
        max_correction_retries: int = 2,
        correction_mode: str = "tool_calling",
        correction_context_messages: int = 10,
        correct_missing_fields: bool = False,
        on_unresolved: Any = "feedback",
        validators: dict[str, Callable[..., Any]] | None = None,
        strip_thinking: bool = True,
        accept_truncated: bool | Sequence[str] = False,
        calls_in_text: bool = True,
        coerce: Any = True,
        on_stats: Callable[[dict[str, Any]], Any] | None = None,
        frame_errors: bool = True,
        totals: Counter[str] | None = None,
        guard: Any = None,
        correction_concurrency: int = 16,
        broken_schema: str = "raise",
        correction_scope: str = "issues",
    ):
        self.tools = {t.name: t for t in tools}
        #: The flood guard (``None``: every valid call runs), with the limits the tools
        #: declare on themselves (``metadata={"toolmend_guard": {...}}``).
        self.guard = declare_tools(as_guard(guard), self.tools.values())
        self.toolbox = compile_tools(
            list(self.tools.values()),
            coerce=coerce,
            strip=strip_thinking,
            broken_schema=broken_schema,
            calls_in_text=calls_in_text,
            accept_truncated=accept_truncated if isinstance(accept_truncated, bool) else list(accept_truncated),
            correct_missing_fields=correct_missing_fields,
        )
        if correction_model is not None and max_correction_retries < 1:
            raise ValueError(
                "max_correction_retries must be at least 1 when a correction_model is set "
                "(0 would never ask it); remove the model or raise the limit"
            )
        mode = getattr(correction_mode, "value", correction_mode)
        mode = str(mode).lower()
        if mode not in ("tool_calling", "json"):
            raise ValueError(f"correction_mode={correction_mode!r}: use 'tool_calling' or 'json'")
        if on_unresolved not in ("feedback", "raise") and not callable(on_unresolved):
            raise ValueError(
                f"on_unresolved={on_unresolved!r}: use 'feedback', 'raise' or a callable"
            )
        for name in validators or {}:
            if name not in self.tools:
                raise ValueError(f"validators: no tool named {name!r} (tools: {', '.join(self.tools)})")
        self.correction_model = correction_model
        self.max_correction_retries = max_correction_retries
        self.correction_mode = mode
        self.correction_context_messages = correction_context_messages
        self.correct_missing_fields = correct_missing_fields
        self.on_unresolved = on_unresolved
        self.validators = dict(validators or {})
        self.strip_thinking = strip_thinking
        self.accept_truncated = accept_truncated
        self.calls_in_text = calls_in_text
        self.on_stats = on_stats
        self.frame_errors = frame_errors
        #: Totals over the node's life: outcomes, fixes and issue kinds.
        self.totals: Counter[str] = totals if totals is not None else Counter()
        self._bound: dict[str, Any] = {}
        self.resolver = Resolver(
            self.toolbox,
            accept=self._accept,
            validate=self._validate if self.validators else None,
            validated=set(self.validators),
            correct=self._correct if correction_model is not None else None,
            settle=self._settle if callable(on_unresolved) else None,
            raise_unresolved=on_unresolved == "raise",
            guard=self.guard,
            max_retries=max_correction_retries,
            concurrency=correction_concurrency,
            context_messages=correction_context_messages,
            ask_for_json=mode == "json",
            correction_scope=correction_scope,
        )

    # ---- one message, one call into the core ------------------------------------------
    #
    # ``resolve_message`` (an assistant message in a conversation) and ``resolve_calls``
    # (``Send`` payloads: calls without a message) start the core's driver; a callback
    # that answers with an awaitable pauses it, and the sync or async loop below awaits
    # and resumes. The answer is mapped to LangGraph's calls by ``_plan``.

    def _start_message(
        self, messages: Sequence[BaseMessage], ai_index: int, *, state: Any, session: str | None,
        rename: bool, is_async: bool,
    ) -> tuple[Any, _Turn, float]:
        started = time.perf_counter()
        ai: AIMessage = messages[ai_index]  # type: ignore[assignment]
        tool_calls = ai.tool_calls
        invalid = ai.invalid_tool_calls
        sent = [*tool_calls, *invalid] if invalid else tool_calls
        answered = []
        for m in messages[ai_index + 1 :]:
            if m.type != "tool":
                break
            answered.append(m.tool_call_id)  # type: ignore[attr-defined]
        history = messages[:ai_index]
        turn = _Turn(history, state, ai, sent, len(tool_calls), is_async)
        step = self.resolver.resolve(
            content_text(ai.content),
            sent,
            position=ai_index,
            earlier_ids=_history_ids(messages, ai_index) if ai_index else None,
            answered_ids=answered,
            history=self._wire_history(history),
            session=session,
            rename_reused=rename,
            context=turn,
        )
        return step, turn, started

    def _wire_history(self, history: Sequence[BaseMessage]) -> list[dict[str, Any]] | None:
        """The history in the core's terms, only for the stages that read it: the guard's
        rules, the correction prompt's context."""
        guarded = self.guard is not None and self.guard.enabled
        shown = self.correction_model is not None and self.correction_context_messages > 0
        return guard_history(history) if (guarded or shown) and history else None

    def resolve_message(
        self, messages: Sequence[BaseMessage], ai_index: int, *, state: Any = None,
        session: str | None = None, rename: bool = True,
    ) -> Plan:
        """Resolves the calls of ``messages[ai_index]`` (sync path)."""
        step, turn, started = self._start_message(
            messages, ai_index, state=state, session=session, rename=rename, is_async=False
        )
        return self._plan(_drive_sync(step), turn, started)

    async def aresolve_message(
        self, messages: Sequence[BaseMessage], ai_index: int, *, state: Any = None,
        session: str | None = None, rename: bool = True,
    ) -> Plan:
        """The same on the async path: the callbacks' awaitables awaited together."""
        step, turn, started = self._start_message(
            messages, ai_index, state=state, session=session, rename=rename, is_async=True
        )
        return self._plan(await _drive_async(step), turn, started)

    def _start_calls(self, raw: dict[str, Any], history: Sequence[BaseMessage], state: Any,
                     session: str | None, is_async: bool) -> tuple[Any, _Turn]:
        turn = _Turn(list(history), state, None, [raw], 1, is_async)
        # A payload is answered by one result under its own id, which its message holds:
        # no call can be added, so a merged call is feedback here (split=False); the
        # post-model hook, which rewrites the message, splits it.
        step = self.resolver.resolve(
            None, [raw], history=self._wire_history(history), session=session,
            rename_reused=False, context=turn, split=False,
        )
        return step, turn

    def as_resolved(self, calls: Sequence[dict[str, Any]]) -> Plan:
        """Calls resolved already (the post-model hook resolved their message): they run
        as sent; nothing is planned, corrected or guarded twice."""
        plan = self._plan(None, _Turn([], None, None, list(calls), len(calls), False), time.perf_counter())
        plan.resolved_before = True
        return plan

    def resolve_calls(
        self, calls: Sequence[dict[str, Any]], history: Sequence[BaseMessage] = (),
        *, state: Any = None, session: str | None = None,
    ) -> Plan:
        """Resolves calls sent one by one (``Send`` payloads): no message to rewrite, so
        each call is resolved on its own and keeps the id it came with (its result must
        join the message that holds it); only a call without one gets one minted.
        ``history``: the conversation before the message that holds them."""
        started = time.perf_counter()
        parts = []
        for raw in calls:
            step, turn = self._start_calls(raw, history, state, session, False)
            parts.append(self._plan(_drive_sync(step), turn, started, keep=True))
        return _joined(parts, started)

    async def aresolve_calls(
        self, calls: Sequence[dict[str, Any]], history: Sequence[BaseMessage] = (),
        *, state: Any = None, session: str | None = None,
    ) -> Plan:
        started = time.perf_counter()
        parts = []
        for raw in calls:
            step, turn = self._start_calls(raw, history, state, session, True)
            parts.append(self._plan(await _drive_async(step), turn, started, keep=True))
        return _joined(parts, started)

    # ---- the core's answer as LangGraph's calls -----------------------------------------

    def _plan(self, out: Any, turn: _Turn, started: float, keep: bool = False) -> Plan:
        """The driver's answer as the calls LangGraph runs or answers. ``keep``: a changed
        call keeps the keys of its payload and the id it came with (``Send``)."""
        ai = turn.ai
        if out is None:
            # Every call runs as sent: LangGraph gets the very dicts it would have run.
            calls = list(turn.sent)
            plan = Plan(
                calls,
                [CallRecord(c.get("id"), c["name"], "executed", "tool_calls") for c in calls],
                None,
                started,
            )
            plan.record_of = plan.order = list(range(len(calls)))
            plan.ai = ai
            plan.new_content = ai.content if ai is not None else None
            return plan
        if "unresolved" in out:
            raise ToolCallValidationError([self._unresolved(turn, c) for c in out["unresolved"]])
        if "rejected" in out:
            r = out["rejected"]
            raise ToolCallLimitExceededError(
                r["reason"], tool=r["tool"], call_id=r["call_id"], decisions=r["decisions"]
            )
        plan = Plan([], [], None, started)
        plan.ai = ai
        plan.message_fixes = out["message_fixes"]
        plan.changed = out["changed"]
        plan.stopped = out["stopped"]
        sent, parsed = turn.sent, turn.parsed
        if out["text_calls"]:
            sent = [{"name": name, "args": _args_dict(args), "id": None} for name, args in out["text_calls"]]
            parsed = 0
        kinds = {f["kind"] for f in plan.message_fixes}
        if ai is not None:
            # (`special_tokens_stripped` on the message: the template tokens that frame
            # a reply, Kimi K3's, taken out of the content.)
            text_changed = bool(
                kinds & {"thinking_stripped", "calls_moved_from_text", "special_tokens_stripped"}
            )
            plan.new_content = (
                with_text(ai.content, out["content"] or "") if text_changed else ai.content
            )
        answered = out["answered"]
        if answered:
            # Answered already (a ToolMessage follows the message): not run again; each
            # keeps its place in the history, as parsed arguments.
            plan.already_answered = [i for _, i in answered]
            at = {k for k, _ in answered}
            order = sorted([(k, -1, None) for k in at] + [(c["index"], n, c) for n, c in enumerate(out["calls"])])
            for k, _, c in order:
                if c is None:
                    raw = sent[k]
                    plan.order.append(raw if k < parsed else _answered_call(raw))
                else:
                    self._one(plan, c, sent[k], k < parsed, keep)
        else:
            for c in out["calls"]:
                k = c["index"]
                self._one(plan, c, sent[k], k < parsed, keep)
        if keep:
            for i, c in enumerate(plan.calls):
                raw = turn.sent[0]
                if raw.get("id") and c.get("id") != raw["id"] and plan.records[plan.record_of[i]].source == "tool_calls":
                    # A payload keeps the id its message gave it.
                    rec = plan.records[plan.record_of[i]]
                    rec.tool_call_id, rec.original_id = raw["id"], None
                    rec.fixes = [f for f in rec.fixes if f["kind"] != "call_id_renamed"]
                    plan.calls[i] = {**c, "id": raw["id"]}
        elif ai is not None and plan.changed:
            self._sanitize(plan)
        return plan

    def _one(self, plan: Plan, c: dict[str, Any], raw: dict[str, Any], parsed_call: bool, keep: bool) -> None:
        call_id = c["id"]
        sent_id = raw.get("id")
        if call_id != sent_id:
            plan.changed = True  # a minted or renamed id: the history must carry it
        outcome = c["outcome"]
        rec = CallRecord(
            call_id, c["tool"], outcome, c["source"], c["fixes"], c["issues"],
            c["original_id"], c["correction_attempts"], c["note"], c["mend_us"], c["correct_us"],
        )
        rec.guard = c["guard"]
        plan.records.append(rec)
        if outcome == "dropped":
            return  # no id to answer under: it leaves the sanitized message
        whole = parsed_call and not c["split"]
        as_sent = whole and call_id == sent_id
        if outcome != "flooded" and (c["front_answers"] or (outcome == "executed" and c["mended"] == "feedback")):
            # LangGraph runs it (its tool's own schema accepts it) or answers it itself (an
            # unknown tool), with the call as sent under its settled id.
            self._add(plan, raw if as_sent else {**raw, "id": call_id})
            return
        if outcome in ("executed", "corrected", "salvaged"):
            if as_sent and outcome == "executed" and c["mended"] == "valid":
                call = raw  # untouched: the very dict LangGraph would have run
            else:
                args = c["arguments"] if "arguments" in c else raw.get("args")
                call = {**raw, "args": args} if (keep or as_sent) else {}
                call.update(name=c["tool"], args=_args_dict(args), id=call_id, type="tool_call")
            self._add(plan, call)
            return
        # Not run: answered with its feedback, the hook's text or the guard's reason.
        text = c["feedback"] or ""
        if outcome == "feedback" and whole and not c["hook_text"]:
            text = self.framed(c["tool"], text, raw)
        if as_sent:
            call = raw  # it stays in the history as sent
        else:
            args = c["arguments"] if c.get("arguments") is not None else raw.get("args")
            call = dict(raw) if keep else {}
            call.update(name=c["tool"], args=_args_dict(args), id=call_id, type="tool_call")
        self._add(plan, {**call, FEEDBACK_KEY: text})

    @staticmethod
    def _add(plan: Plan, call: dict[str, Any]) -> None:
        plan.record_of.append(len(plan.records) - 1)
        plan.order.append(len(plan.calls))
        plan.calls.append(call)

    @staticmethod
    def _sanitize(plan: Plan) -> None:
        """The assistant message with the planned calls (same id)."""
        if plan.ai is not None:
            calls = []
            for o in plan.order:
                c = plan.calls[o] if isinstance(o, int) else o
                args = c.get("args")
                calls.append({"name": c["name"], "args": args if isinstance(args, dict) else {}, "id": c["id"], "type": "tool_call"})
            plan.sanitized = _replaced(
                plan.ai, content=plan.new_content, tool_calls=calls, invalid_tool_calls=[]
            )

    # ---- the callbacks the core's driver asks -------------------------------------------

    def _accept(self, turn: _Turn, index: int, tool: str, issues: list[dict[str, Any]]) -> Any:
        """Whether LangGraph takes this invalid call as it was sent, as the stock node
        would: ``(runs, note)``, or ``None`` when toolmend answers it.

        - an unknown tool: LangGraph's "is not a valid tool" answer (its exact text is
          part of the contract);
        - arguments the tool's own pydantic schema accepts (its lax mode, custom types):
          the tool runs, as it would without toolmend;
        - ``handle_tool_errors`` other than the default or ``True``: the user chose how
          argument errors are handled (``False`` raises ``ToolInvocationError``).
        """
        if index >= turn.parsed:
            return None  # an entry of invalid_tool_calls: LangGraph never runs those
        if any(i["kind"] == "unknown_tool" for i in issues):
            return (False, "unknown tool: answered by LangGraph")
        schema = getattr(self.tools.get(tool), "tool_call_schema", None)
        validate = getattr(schema, "model_validate", None)
        # A key no argument takes: the model would accept it by ignoring it, and the
        # value the model sent would be lost without a word. Never taken as sent (an
        # argument LangGraph injects is no such key: its value overwrites the model's).
        stray = [i for i in issues if i["kind"] == "unknown_key" and i["path"][1:] not in _injected(self.tools.get(tool))]
        if validate is not None and not stray:
            try:
                validate(turn.sent[index].get("args") or {})
                return (True, "accepted by the tool's own schema")
            except Exception:
                pass
        if not self.frame_errors:
            return (False, "argument errors left to handle_tool_errors")
        return None

    def framed(self, tool: str, feedback: str, raw: dict[str, Any]) -> str:
        """Feedback for a parsed call in LangGraph's frame (``Error invoking tool … with
        kwargs … with error:``), so prompts and code that look for it still match, with
        toolmend's field-level lines inside."""
        lines = [ln for ln in feedback.splitlines() if ln.startswith("- ")]
        if not lines:
            lines = [feedback]
        body = "\n".join(" " + ln[2:] if ln.startswith("- ") else " " + ln for ln in lines)
        return (
            f"Error invoking tool '{tool}' with kwargs {raw.get('args')!r} with error:\n"
            f"{body}\n Please fix the error and try again."
        )

    def _validate(self, turn: _Turn, tool: str, call_id: str, arguments: Any, phase: str) -> Any:
        ctx = ValidatorContext(tool, call_id, phase, list(turn.messages), turn.state)  # type: ignore[arg-type]
        return self.validators[tool](arguments, ctx)

    def _correction_runnable(self, tool_name: str) -> Any:
        if self.correction_mode == "json":
            return self.correction_model
        if tool_name not in self._bound:
            self._bound[tool_name] = self.correction_model.bind_tools(
                [self.tools[tool_name]], tool_choice=tool_name
            )
        return self._bound[tool_name]

    def _read_answer(self, answer: Any) -> Any:
        if self.correction_mode == "tool_calling":
            calls = getattr(answer, "tool_calls", None) or []
            if calls:
                return calls[0]["args"]
            invalid = getattr(answer, "invalid_tool_calls", None) or []
            return invalid[0].get("args") if invalid else None
        return answer.content if isinstance(answer.content, str) else getattr(answer, "text", None)

    def _correct(self, turn: _Turn, tool: str, prompt: str) -> Any:
        """One request to the correction model with the core's prompt; the core reads and
        re-validates the answer and decides whether to ask again."""
        runnable = self._correction_runnable(tool)
        if turn.is_async:
            async def ask() -> Any:
                return self._read_answer(await runnable.ainvoke(prompt))

            return ask()
        return self._read_answer(runnable.invoke(prompt))

    def _unresolved(self, turn: _Turn, call: dict[str, Any]) -> UnresolvedToolCall:
        raw = turn.raw(call["index"], call["tool"], call["raw_arguments"])
        error = call["feedback"]
        if turn.sent and call["index"] < turn.parsed and not call["split"]:
            error = self.framed(call["tool"], error, raw)
        return UnresolvedToolCall(
            tool_name=call["tool"],
            tool_call_id=call["call_id"],
            original_args=raw.get("args"),
            raw=raw,
            issues=call["issues"],
            error=error,
            correction_attempted=call["correction_attempts"] > 0,
            messages=list(turn.messages),
            state=turn.state,
        )

    def _settle(self, turn: _Turn, call: dict[str, Any]) -> Any:
        return self.on_unresolved(self._unresolved(turn, call))

    def report(self, plan: Plan, node: str) -> None:
        if not plan.records and not plan.already_answered:
            return  # a turn with no calls: nothing to report
        for f in plan.message_fixes:
            self.totals[f"fix:{f['kind']}"] += 1
        for r in plan.records:
            self.totals[f"outcome:{r.outcome}"] += 1
            for f in r.fixes:
                self.totals[f"fix:{f['kind']}"] += 1
            for i in r.issues:
                self.totals[f"issue:{i['kind']}"] += 1
            for d in r.guard:
                self.totals[f"guard:{d['rule']}:{'shadow' if d['shadow'] else d['action']}"] += 1
        if self.on_stats is not None:
            self.on_stats(plan.stats(node))


def _joined(parts: list[Plan], started: float) -> Plan:
    """The plans of calls resolved one by one, as one."""
    plan = Plan([], [], None, started)
    for p in parts:
        plan.record_of += [r + len(plan.records) for r in p.record_of]
        plan.records += p.records
        plan.calls += p.calls
        plan.message_fixes += p.message_fixes
        if p.stopped is not None and plan.stopped is None:
            plan.stopped = p.stopped
    return plan


def _settled_sync(awaitable: Any) -> Any:
    try:
        return run_sync(awaitable)
    except Exception as e:  # handed back: the core decides what a failure means
        return e


def _drive_sync(step: Any) -> Any:
    """Runs a paused resolution to its end on the sync path: each awaitable to
    completion, in order."""
    while isinstance(step, Pending):
        step = step.resume([_settled_sync(a) for a in step.awaitables])
    return step


async def _drive_async(step: Any) -> Any:
    """The same on the async path: the awaitables of one pause awaited together."""
    while isinstance(step, Pending):
        step = step.resume(await asyncio.gather(*step.awaitables, return_exceptions=True))
    return step


def feedback_message(call: dict[str, Any]) -> ToolMessage:
    return ToolMessage(
        content=call[FEEDBACK_KEY],
        name=call.get("name"),
        tool_call_id=call["id"],
        status="error",
    )


def _calls_in_text(calls_in_text: bool, calls_in_content: bool | None) -> bool:
    """The one switch, under its one name; ``calls_in_content`` (its earlier name) still
    read, with a warning."""
    if calls_in_content is None:
        return calls_in_text
    import warnings

    warnings.warn(
        "calls_in_content is now calls_in_text (one name across the gateway, the core and "
        "Python); pass calls_in_text",
        DeprecationWarning,
        stacklevel=3,
    )
    return calls_in_content


def run_sync(x: Any) -> Any:
    """A sync caller met an async hook or validator: run it to completion."""
    if inspect.isawaitable(x):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(_await(x))
        raise RuntimeError(
            "an async hook or validator was called on the sync path inside a running event "
            "loop: use ainvoke, or give a sync function"
        )
    return x


async def _await(x: Any) -> Any:
    return await x
