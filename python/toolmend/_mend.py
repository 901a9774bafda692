"""Mending an ``AIMessage``'s calls: the part the LangGraph node and the LangChain
middleware share. Imports ``langchain_core`` (both integrations need it), never
``langgraph`` or ``langchain``.

Per message, one Rust call plans it (``Toolbox.plan_message``: the core's
``toolmend::message`` plan, the same the Rust node, the gateway and ``toolmend mend`` use):
calls extracted, ids settled by the one rule, each call repaired and validated against
its tool's ``tool_call_schema`` (injected arguments excluded), what may be corrected.
Here: the mapping to LangChain's dicts, the answers LangGraph gives itself, per-tool
validators, the call of a correction model (prompt, rule and re-validation are the
core's, ``toolmend::correct``), and resolution of what stays invalid (feedback, raise, or
a hook). Every change is recorded.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool

from toolmend._core import MAY_RUN, Toolbox, ToolmendError, correctable, rename_reused, repair, replaced_fix
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


def compile_tools(tools: Sequence[BaseTool], *, coerce: Any, strip: bool, **plan: Any) -> Toolbox:
    """Compiles every tool's schema once, with the planning options (``plan``: passed to
    :class:`Toolbox`). A tool whose schema cannot be read or compiled gets an open one (any
    object): LangGraph still validates it as it always did. Tools whose arguments are a
    JSON Schema dict have no pydantic model behind them: with the pydantic-lax default
    they get every coercion."""
    defs = []
    for t in tools:
        try:
            d = tool_schema(t)
            Toolbox([d])
        except Exception:
            d = {"name": t.name, "description": t.description or "", "parameters": {"type": "object"}}
        defs.append(d)
    if coerce is PYDANTIC_LAX:
        open_tools = {t.name: True for t in tools if isinstance(getattr(t, "args_schema", None), dict)}
        plan.setdefault("tool_coerce", open_tools or None)
    return Toolbox(defs, coerce=coerce, strip_thinking=strip, **plan)


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


class Mender:
    """The shared pipeline. Built once per node / middleware."""

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
    ):
        self.tools = {t.name: t for t in tools}
        #: The flood guard (``None``: every valid call runs), with the limits the tools
        #: declare on themselves (``metadata={"toolmend_guard": {...}}``).
        self.guard = declare_tools(as_guard(guard), self.tools.values())
        self.toolbox = compile_tools(
            list(self.tools.values()),
            coerce=coerce,
            strip=strip_thinking,
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

    def _box(self, name: str) -> Toolbox:
        return self.toolbox

    # ---- planning -------------------------------------------------------------
    #
    # The plan itself is the core's (``Toolbox.plan_message``, one Rust call per message,
    # the GIL released): calls from ``tool_calls`` and ``invalid_tool_calls`` (or written
    # into the text), ids settled by the one rule, glued calls split, every call mended,
    # what may be corrected, thinking stripped from the content. Here the plan is mapped
    # to LangChain's dicts, and LangGraph's own answers are delegated to (``delegate``).

    def plan_message(
        self, messages: Sequence[BaseMessage], ai_index: int, *, state: Any = None
    ) -> tuple[Plan, list[dict[str, Any]]]:
        """Plans the calls of ``messages[ai_index]``. Returns the plan and the pending
        corrections / resolutions as ``work`` items (dicts)."""
        started = time.perf_counter()
        ai: AIMessage = messages[ai_index]  # type: ignore[assignment]
        tool_calls = ai.tool_calls
        invalid = ai.invalid_tool_calls
        sent = [*tool_calls, *invalid] if invalid else tool_calls
        answered = []
        if ai_index + 1 < len(messages):
            for m in messages[ai_index + 1 :]:
                if m.type != "tool":
                    break
                answered.append(m.tool_call_id)  # type: ignore[attr-defined]
        content = ai.content
        planned = self.toolbox.plan_message(
            content if isinstance(content, str) else None,
            sent,
            position=ai_index,
            earlier_ids=_history_ids(messages, ai_index) if ai_index else None,
            answered_ids=answered,
        )
        if planned is None:
            # Every call runs as sent: LangGraph gets the very dicts it would have run.
            plan = Plan(
                list(tool_calls),
                [CallRecord(c["id"], c["name"], "executed", "tool_calls") for c in tool_calls],
                None,
                started,
            )
            plan.record_of = plan.order = list(range(len(tool_calls)))
            plan.ai = ai
            plan.new_content = content
            return plan, []
        plan, work = self._from_core(planned, sent, len(tool_calls))
        plan.started = started
        plan.ai = ai
        plan.new_content = planned["content"] if "content" in planned else ai.content
        if plan.new_content is None:
            plan.new_content = ""
        return plan, work

    def plan_calls(self, calls: Sequence[dict[str, Any]]) -> tuple[Plan, list[dict[str, Any]]]:
        """Plans calls sent one by one (``Send`` payloads, a list of calls): no message to
        rewrite and no history, so each call is planned on its own and keeps the id it came
        with (its result must join the message that holds it); only a call without one
        gets one minted."""
        started = time.perf_counter()
        plan = Plan([], [], None, started)
        work: list[dict[str, Any]] = []
        for raw in calls:
            planned = self.toolbox.plan_message(None, [raw])
            if planned is None:
                plan.record_of.append(len(plan.records))
                plan.records.append(CallRecord(raw.get("id"), raw["name"], "executed", "tool_calls"))
                plan.calls.append(raw)
                continue
            if raw.get("id"):
                for c in planned["calls"]:
                    if c["id"] is not None and c["source"] == "tool_calls":
                        c["id"], c["original_id"] = raw["id"], None
                        c["fixes"] = [f for f in c["fixes"] if f["kind"] != "call_id_renamed"]
            one, items = self._from_core(planned, [raw], 1, keep=True)
            for item in items:
                item["index"] += len(plan.calls)
            plan.record_of += [r + len(plan.records) for r in one.record_of]
            plan.records += one.records
            plan.calls += one.calls
            work += items
        return plan, work

    def _from_core(
        self, planned: dict[str, Any], sent: Sequence[dict[str, Any]], parsed: int, keep: bool = False
    ) -> tuple[Plan, list[dict[str, Any]]]:
        """The core's plan as LangGraph calls. ``sent``: the calls planned from (the first
        ``parsed`` ones LangChain parsed); ``keep``: a changed call keeps the keys of its
        payload (``Send``)."""
        plan = Plan([], [])
        plan.message_fixes = planned["message_fixes"]
        plan.changed = planned["changed"]
        work: list[dict[str, Any]] = []
        text_calls = planned["text_calls"]
        if text_calls:
            sent = [{"name": name, "args": _args_dict(args), "id": None} for name, args in text_calls]
            parsed = 0
        answered = planned["answered"]
        if answered:
            # Answered already (a ToolMessage follows the message): not run again; each
            # keeps its place in the history, as parsed arguments.
            plan.already_answered = [i for _, i in answered]
            at = {k for k, _ in answered}
            order = sorted([(k, -1, None) for k in at] + [(c["index"], n, c) for n, c in enumerate(planned["calls"])])
            for k, _, c in order:
                if c is None:
                    raw = sent[k]
                    plan.order.append(raw if k < parsed else _answered_call(raw))
                else:
                    self._one(plan, work, c, sent[k], k < parsed, keep)
        else:
            for c in planned["calls"]:
                k = c["index"]
                self._one(plan, work, c, sent[k], k < parsed, keep)
        return plan, work

    def _one(
        self, plan: Plan, work: list[dict[str, Any]], c: dict[str, Any], raw: dict[str, Any],
        parsed_call: bool, keep: bool,
    ) -> None:
        call_id = c["id"]
        sent_id = raw.get("id")
        if call_id != sent_id:
            plan.changed = True  # a minted or renamed id: the history must carry it
        rec = CallRecord(
            call_id, c["tool"], c["outcome"], c["source"], c["fixes"], c["issues"],
            c["original_id"], 0, c["note"], c["mend_us"],
        )
        plan.records.append(rec)
        outcome = c["outcome"]
        if outcome == "dropped":
            return  # no id to answer under: it leaves the sanitized message
        mended = c["mended"]
        whole = parsed_call and not c["split"]
        if outcome == "executed":
            if whole and call_id == sent_id and mended == "valid":
                call = raw  # untouched: the very dict LangGraph would have run
            else:
                args = c["arguments"] if "arguments" in c else raw.get("args")
                call = {**raw, "args": args} if keep else {}
                call.update(name=c["tool"], args=_args_dict(args), id=call_id, type="tool_call")
            plan.record_of.append(len(plan.records) - 1)
            plan.order.append(len(plan.calls))
            plan.calls.append(call)
            return
        m = {
            "tool": c["tool"],
            # None: nothing mended it (an unknown tool): what the model sent stays.
            "arguments": c["arguments"] if c.get("arguments") is not None else raw.get("args"),
            "fixes": c["fixes"],
            "issues": c["issues"],
            "outcome": mended,
            "feedback": c.get("feedback", ""),
        }
        if whole:
            delegate = self.delegate(m, raw)
            if delegate is not None:
                # LangGraph answers it, with the call as sent (under its settled id).
                rec.outcome, rec.note = delegate
                plan.record_of.append(len(plan.records) - 1)
                plan.order.append(len(plan.calls))
                plan.calls.append(raw if call_id == sent_id else {**raw, "id": call_id})
                return
            m["feedback"] = self.framed(m, raw)
        if whole and call_id == sent_id:
            call = raw  # answered with feedback, it stays in the history as sent
        else:
            args = m["arguments"]
            call = dict(raw) if keep else {}
            call.update(name=c["tool"], args=_args_dict(args), id=call_id, type="tool_call")
        work.append({
            "index": len(plan.calls),
            "record": rec,
            "mended": m,
            "raw": raw,
            "call": call,
            "source": c["source"],
            "correctable": c["correctable"],
        })
        plan.record_of.append(len(plan.records) - 1)
        plan.order.append(len(plan.calls))
        plan.calls.append({**call, FEEDBACK_KEY: m["feedback"]})

    # ---- parsed calls that stay invalid ----------------------------------------------

    def delegate(self, m: dict[str, Any], raw: dict[str, Any]) -> tuple[str, str] | None:
        """Whether LangGraph answers this parsed call itself, as the stock node would:
        ``(outcome, note)``, or ``None`` when toolmend answers it.

        - an unknown tool: LangGraph's "is not a valid tool" answer (its exact text is
          part of the contract);
        - arguments the tool's own pydantic schema accepts (its lax mode, custom types):
          the tool runs, as it would without toolmend;
        - ``handle_tool_errors`` other than the default or ``True``: the user chose how
          argument errors are handled (``False`` raises ``ToolInvocationError``).
        """
        kinds = {i["kind"] for i in m.get("issues", [])}
        if "unknown_tool" in kinds:
            return "feedback", "unknown tool: answered by LangGraph"
        tool = self.tools.get(m["tool"])
        schema = getattr(tool, "tool_call_schema", None)
        validate = getattr(schema, "model_validate", None)
        if validate is not None:
            try:
                validate(raw.get("args") or {})
                return "executed", "accepted by the tool's own schema"
            except Exception:
                pass
        if not self.frame_errors:
            return "feedback", "argument errors left to handle_tool_errors"
        return None

    def framed(self, m: dict[str, Any], raw: dict[str, Any]) -> str:
        """Feedback for a parsed call in LangGraph's frame (``Error invoking tool … with
        kwargs … with error:``), so prompts and code that look for it still match, with
        toolmend's field-level lines inside."""
        lines = [ln for ln in m.get("feedback", "").splitlines() if ln.startswith("- ")]
        if not lines:
            lines = [m.get("feedback", "")]
        body = "\n".join(" " + ln[2:] if ln.startswith("- ") else " " + ln for ln in lines)
        return (
            f"Error invoking tool '{m['tool']}' with kwargs {raw.get('args')!r} with error:\n"
            f"{body}\n Please fix the error and try again."
        )

    # ---- validators ---------------------------------------------------------------

    def run_validators(self, plan: Plan, messages: list[BaseMessage], state: Any, phase: str = "initial") -> list[tuple[int, Any]]:
        """Per-tool validators on every runnable call; returns (call index, result) pairs
        whose result may be awaitable."""
        out = []
        for i, call in enumerate(plan.calls):
            if FEEDBACK_KEY in call:
                continue
            fn = self.validators.get(call["name"])
            if fn is None:
                continue
            ctx = ValidatorContext(call["name"], call["id"], phase, messages, state)  # type: ignore[arg-type]
            out.append((i, fn(call["args"], ctx)))
        return out

    def apply_validator(self, plan: Plan, work: list[dict[str, Any]], i: int, result: Any) -> None:
        problems = [result] if isinstance(result, str) else list(result or [])
        if not problems:
            return
        call = plan.calls[i]
        rec = plan.records[plan.record_of[i]]
        issues = [{"kind": "custom", "path": "", "message": p} for p in problems]
        text = f"{call['name']} was not called. Fix this and call it again:\n" + "\n".join(f"- {p}" for p in problems)
        rec.outcome = "feedback"
        rec.issues.extend(issues)
        m = {"tool": call["name"], "arguments": call["args"], "issues": issues, "feedback": text, "outcome": "feedback"}
        work.append({"index": i, "record": rec, "mended": m, "raw": call, "call": dict(call), "source": rec.source, "custom": True})
        plan.calls[i] = {**call, FEEDBACK_KEY: text}

    # ---- correction ---------------------------------------------------------------

    def correctable(self, item: dict[str, Any]) -> bool:
        """The core's one rule, when a model is set: as the plan decided it, or (a
        validator's refusal) ``toolmend._core.correctable`` on the new issues."""
        if self.correction_model is None or item["mended"]["tool"] not in self.tools:
            return False
        if "correctable" in item:
            return item["correctable"]
        m = item["mended"]
        return correctable(m.get("issues", []), m.get("fixes", []), self.correct_missing_fields)

    def correction_prompt(self, item: dict[str, Any], messages: list[BaseMessage], ai: AIMessage | None) -> str:
        """The core's one prompt (``Toolbox.correction_prompt``) for the call as it stands:
        its raw arguments, its current issues, the conversation before the message."""
        name = item["mended"]["tool"]
        n = self.correction_context_messages
        if "wire" not in item:
            item["wire"] = [wire_message(m) for m in messages] if n else []
        return self._box(name).correction_prompt(
            name,
            _dumps(item["raw"].get("args") or {}),
            item.get("retry_issues") or item["mended"].get("issues", []),
            item["wire"],
            _text(ai) if ai is not None else None,
            context_messages=n,
            ask_for_json=self.correction_mode == "json",
        )

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

    def _check_answer(self, item: dict[str, Any], value: Any) -> dict[str, Any] | None:
        """The answer read and re-validated by the core (phase ``correction``); values of
        the first call's lists the answer dropped make it feedback (``values_lost``)."""
        name = item["mended"]["tool"]
        first = item["mended"].get("arguments")
        return self._box(name).check_answer(name, value, first=first if isinstance(first, dict) else None)

    def _phase_check(self, item, checked, phase: str, messages, state) -> Any:
        """The tool's own validator on arguments a correction or a hook produced: the
        same rules as for the model's first call, with the phase. Returns the validator's
        result (maybe awaitable), or None when there is none to run."""
        if checked is None or checked["outcome"] == "feedback":
            return None
        fn = self.validators.get(checked["tool"])
        if fn is None:
            return None
        ctx = ValidatorContext(checked["tool"], item["call"]["id"], phase, list(messages), state)  # type: ignore[arg-type]
        return fn(checked["arguments"], ctx)

    @staticmethod
    def _refused(checked, result: Any) -> Any:
        """``checked`` turned into feedback when the validator found problems."""
        problems = [result] if isinstance(result, str) else list(result or [])
        if not problems or checked is None:
            return checked
        text = f"{checked['tool']} was not called. Fix this and call it again:\n" + "\n".join(f"- {p}" for p in problems)
        issues = [{"kind": "custom", "path": "", "message": p} for p in problems]
        return {**checked, "outcome": "feedback", "issues": issues, "feedback": text}

    # The loop is the core's (``toolmend::correct::correct_call``), run here around a
    # LangChain model: ask with the core's prompt; the answer read and re-validated by the
    # core (phase ``correction``), then by the tool's validator; a valid answer ends it, an
    # invalid one is asked about again with its issues, up to the retry limit; a model that
    # fails or gives up (no arguments in its answer) ends it. A call left unresolved keeps
    # its own issues: the feedback is about the call the agent sent, not the attempts.

    def correct_sync(self, item, messages, ai, state=None) -> None:
        rec: CallRecord = item["record"]
        t0 = time.perf_counter()
        for _ in range(self.max_correction_retries):
            rec.correction_attempts += 1
            prompt = self.correction_prompt(item, messages, ai)
            try:
                answer = self._correction_runnable(item["mended"]["tool"]).invoke(prompt)
            except Exception as e:  # a failing model degrades this call only
                rec.note = f"correction failed: {type(e).__name__}: {e}"
                break
            checked = self._check_answer(item, self._read_answer(answer))
            if checked is None:
                rec.note = "the corrector gave up"
                break
            checked = self._refused(checked, run_sync(self._phase_check(item, checked, "correction", messages, state)))
            if self._accept(item, checked):
                break
        rec.correct_us = (time.perf_counter() - t0) * 1e6

    async def correct_async(self, item, messages, ai, state=None) -> None:
        rec: CallRecord = item["record"]
        t0 = time.perf_counter()
        for _ in range(self.max_correction_retries):
            rec.correction_attempts += 1
            prompt = self.correction_prompt(item, messages, ai)
            try:
                answer = await self._correction_runnable(item["mended"]["tool"]).ainvoke(prompt)
            except Exception as e:
                rec.note = f"correction failed: {type(e).__name__}: {e}"
                break
            checked = self._check_answer(item, self._read_answer(answer))
            if checked is None:
                rec.note = "the corrector gave up"
                break
            checked = self._refused(
                checked, await maybe_await(self._phase_check(item, checked, "correction", messages, state))
            )
            if self._accept(item, checked):
                break
        rec.correct_us = (time.perf_counter() - t0) * 1e6

    @staticmethod
    def _replaced(kind: str, item: dict[str, Any], after: Any) -> dict[str, Any]:
        """The core's record of arguments replaced whole: ``before -> after``."""
        return replaced_fix(kind, item["mended"].get("arguments"), _dumps(item["raw"].get("args") or {}), after)

    def _accept(self, item, checked) -> bool:
        """Takes a valid corrected call; else keeps the new issues for the next attempt."""
        if checked["outcome"] == "feedback":
            item["retry_issues"] = checked.get("issues", [])
            return False
        call = {k: v for k, v in item["call"].items() if k != FEEDBACK_KEY}
        call["args"] = checked["arguments"]
        item["resolved"] = call
        rec: CallRecord = item["record"]
        rec.outcome = "corrected"
        rec.fixes.append(self._replaced("arguments_corrected", item, checked["arguments"]))
        rec.fixes.extend(checked.get("fixes", []))
        rec.issues = []
        return True

    # ---- resolution -----------------------------------------------------------------

    def unresolved(self, item, messages, state) -> UnresolvedToolCall:
        m = item["mended"]
        return UnresolvedToolCall(
            tool_name=m["tool"],
            tool_call_id=item["call"]["id"],
            original_args=item["raw"].get("args"),
            raw=item["raw"],
            issues=m.get("issues", []),
            error=m.get("feedback", ""),
            correction_attempted=item["record"].correction_attempts > 0,
            messages=list(messages),
            state=state,
        )

    def salvage_check(self, item, answer: Any) -> Any:
        """Hook arguments mended and validated (phase ``salvage``); None for a text."""
        if not isinstance(answer, dict):
            return None
        checked = self._box(item["mended"]["tool"]).mend(item["mended"]["tool"], answer, phase="salvage")
        return checked[0] if len(checked) == 1 else {**checked[0], "outcome": "feedback"}

    def apply_hook_answer(self, item, answer: Any, checked: Any = None) -> None:
        rec: CallRecord = item["record"]
        if isinstance(answer, dict):
            checked = [checked if checked is not None else self.salvage_check(item, answer)]
            if checked[0]["outcome"] != "feedback":
                call = {k: v for k, v in item["call"].items() if k != FEEDBACK_KEY}
                call["args"] = checked[0]["arguments"]
                item["resolved"] = call
                rec.outcome = "salvaged"
                rec.fixes.append(self._replaced("arguments_salvaged", item, checked[0]["arguments"]))
                rec.issues = []
                return
            rec.note = "the hook's arguments were invalid too"
            item["mended"] = {**item["mended"], "feedback": checked[0].get("feedback", item["mended"].get("feedback"))}
        elif isinstance(answer, str):
            item["text"] = answer
            rec.note = "answered by the hook"

    def finish_work(self, plan: Plan, work: list[dict[str, Any]]) -> None:
        """Writes corrections, salvages and hook texts back into the planned calls."""
        for item in work:
            i = item["index"]
            if "resolved" in item:
                plan.calls[i] = item["resolved"]
            else:
                text = item.get("text") or item["mended"].get("feedback", "")
                plan.calls[i] = {**plan.calls[i], FEEDBACK_KEY: text}
        if plan.ai is not None and (plan.changed or any("resolved" in w for w in work)):
            self._sanitize(plan)

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

    # ---- guard ------------------------------------------------------------------------
    #
    # The core's flood guard (``toolmend::guard::RuleGuard``), once per message with all
    # its calls that would run (mended, corrected or salvaged), as the Rust node's guard
    # stage: a refused call is answered with the guard's reason (outcome ``flooded``) and
    # not run; ``end``: no call of the message runs, every one is answered, the run ends;
    # ``error``: ToolCallLimitExceededError before anything runs.

    _RUNS = frozenset(MAY_RUN)

    def guard_plan(
        self, plan: Plan, history: Sequence[BaseMessage], session: str | None, *, rename: bool = True
    ) -> str | None:
        """Checks the runnable calls of ``plan``; returns the reason when the run ends.
        ``history``: the messages before the assistant message; ``rename``: a call whose
        id the guard's store saw earlier in the session gets a fresh one (only where the
        sanitized message can carry it)."""
        guard = self.guard
        if guard is None or not plan.calls or not guard.enabled:
            return None
        runnable = [
            i for i, c in enumerate(plan.calls)
            if FEEDBACK_KEY not in c
            and c.get("name") in self.tools
            and plan.records[plan.record_of[i]].outcome in self._RUNS
        ]
        if not runnable:
            return None
        calls = [
            {"id": plan.calls[i].get("id") or "", "name": plan.calls[i]["name"], "arguments": plan.calls[i].get("args")}
            for i in runnable
        ]
        verdicts = guard.check(session, guard_history(history), calls)
        stopped: str | None = None
        renamed = False
        for i, v in zip(runnable, verdicts):
            rec = plan.records[plan.record_of[i]]
            rec.guard = v["decisions"]
            for d in v["decisions"]:
                self.totals[f"guard:{d['rule']}:{'shadow' if d['shadow'] else d['action']}"] += 1
            if v["id_reused"] and rename and plan.ai is not None:
                old = plan.calls[i].get("id") or ""
                new, fix = rename_reused(old)
                plan.calls[i] = {**plan.calls[i], "id": new}
                rec.original_id = rec.original_id or old
                rec.tool_call_id = new
                rec.fixes.append(fix)
                renamed = True
            action = v["action"]
            if action == "allow":
                continue
            reason = v["reason"] or "the call was not run: refused by the guard"
            if action == "error":
                raise ToolCallLimitExceededError(
                    reason, tool=plan.calls[i]["name"], call_id=plan.calls[i].get("id"), decisions=v["decisions"]
                )
            if action == "end" and stopped is None:
                stopped = reason
            rec.outcome = "flooded"
            rec.note = reason
            plan.calls[i] = {**plan.calls[i], FEEDBACK_KEY: reason}
        if stopped is not None:
            # Ending the run: no call of the message runs, those LangGraph would answer
            # itself (an unknown tool …) included; each is answered.
            plan.stopped = stopped
            for i, c in enumerate(plan.calls):
                if FEEDBACK_KEY not in c:
                    plan.calls[i] = {**c, FEEDBACK_KEY: stopped}
        if renamed:
            plan.changed = True
            self._sanitize(plan)
        return stopped

    def resolve_sync(self, plan: Plan, work: list[dict[str, Any]], messages: list[BaseMessage], state: Any) -> None:
        """Validators, correction, ``raise`` and the hook, in that order (sync path)."""
        for i, result in self.run_validators(plan, messages, state):
            self.apply_validator(plan, work, i, run_sync(result))
        for item in work:
            if self.correctable(item):
                self.correct_sync(item, messages, plan.ai, state)
        self.raise_if_asked(work, messages, state)
        if callable(self.on_unresolved):
            for item in work:
                if "resolved" not in item:
                    answer = run_sync(self.on_unresolved(self.unresolved(item, messages, state)))
                    checked = self.salvage_check(item, answer)
                    checked = self._refused(checked, run_sync(self._phase_check(item, checked, "salvage", messages, state)))
                    self.apply_hook_answer(item, answer, checked)

    async def resolve_async(
        self,
        plan: Plan,
        work: list[dict[str, Any]],
        messages: list[BaseMessage],
        state: Any,
        concurrency: int,
    ) -> None:
        """The same on the async path; corrections run concurrently, at most
        ``concurrency`` at once."""
        for i, result in self.run_validators(plan, messages, state):
            self.apply_validator(plan, work, i, await maybe_await(result))
        fixable = [item for item in work if self.correctable(item)]
        if fixable:
            limit = asyncio.Semaphore(concurrency)

            async def one(item: dict[str, Any]) -> None:
                async with limit:
                    await self.correct_async(item, messages, plan.ai, state)

            await asyncio.gather(*(one(item) for item in fixable))
        self.raise_if_asked(work, messages, state)
        if callable(self.on_unresolved):
            for item in work:
                if "resolved" not in item:
                    answer = await maybe_await(self.on_unresolved(self.unresolved(item, messages, state)))
                    checked = self.salvage_check(item, answer)
                    checked = self._refused(
                        checked, await maybe_await(self._phase_check(item, checked, "salvage", messages, state))
                    )
                    self.apply_hook_answer(item, answer, checked)

    def raise_if_asked(self, work, messages, state) -> None:
        if self.on_unresolved == "raise":
            pending = [w for w in work if "resolved" not in w]
            if pending:
                raise ToolCallValidationError([self.unresolved(w, messages, state) for w in pending])

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
        if self.on_stats is not None:
            self.on_stats(plan.stats(node))


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


async def maybe_await(x: Any) -> Any:
    if inspect.isawaitable(x):
        return await x
    return x


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
