"""A LangChain v1 agent middleware that mends tool calls: ``MendMiddleware`` for
``langchain.agents.create_agent``.

::

    from langchain.agents import create_agent
    from toolmend.langchain import MendMiddleware

    agent = create_agent(model, tools, middleware=[..., MendMiddleware()])  # last

``create_agent`` always builds its own stock ``ToolNode``, so the mending happens around
it, in the agent's hooks:

- ``after_model``: the assistant message just produced is planned by the same pipeline as
  ``toolmend.langgraph.ToolNode`` (repair of ``invalid_tool_calls``, calls written into
  the text, leaked ``<think>``; coercion and validation against each tool's
  ``tool_call_schema``; ids settled; validators, correction model, ``on_unresolved``).
  The message is replaced (same id) by its mended form, which keeps *every* call in
  ``tool_calls``, and each call that stays unresolved is answered right there by an error
  ``ToolMessage`` with field-level feedback. The agent's router sends to the tools only
  the calls that have no ``ToolMessage`` yet, so the answered ones never run; when every
  call is answered, the router goes back to the model by itself (rule 6 of
  ``create_agent``'s model-to-tools edge), so the model tries again.
- ``before_model``: the history sent to the model stays valid (every call id answered
  exactly once, no orphan results) and, if asked, is trimmed to a budget without ever
  splitting an assistant message from its tool results.

Where it goes: **last** in ``middleware=[...]``. ``after_model`` hooks run in reverse list
order, so the last middleware sees the model's message first: human-in-the-loop approval,
tool-call limits and the like then see mended calls (and calls recovered from
``invalid_tool_calls``, which they otherwise ignore). Its ``before_model`` then runs last
too, so the history it checks is the one the model will get, after e.g. summarization.

The tools: ``create_agent`` does not hand its tools to middleware. By default they are
learned from every ``ModelRequest`` (this middleware's ``wrap_model_call`` records the
tools bound to the model, and being last it is the innermost wrapper, so it sees the
final list). Pass ``tools=[...]`` to fix them instead (e.g. when another middleware
hides tools from some requests that may still be called).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any, Callable, Literal, Sequence

from langchain.agents.middleware.types import AgentMiddleware, hook_config
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from toolmend._core import history_sanitize, history_trim
from toolmend._mend import (
    FEEDBACK_KEY,
    PYDANTIC_LAX,
    Mender,
    Plan,
    ToolCallValidationError,
    UnresolvedToolCall,
    ValidatorContext,
    feedback_message,
    _calls_in_text,
)
from toolmend._guard import ToolCallLimitExceededError, as_guard, end_message, session_of

__all__ = [
    "PYDANTIC_LAX",
    "MendMiddleware",
    "ToolCallLimitExceededError",
    "ToolCallValidationError",
    "UnresolvedToolCall",
    "ValidatorContext",
]


#: Correction requests running at once for one assistant message (async path).
CORRECTION_CONCURRENCY = 16

#: Key of the rendering's back-reference to the LangChain message / call it came from.
#: An unknown field: the Rust history functions keep it on the round trip.
_REF = "_toolmend_ref"


class MendMiddleware(AgentMiddleware):
    """Mends the tool calls of a ``create_agent`` agent. Put it last in ``middleware``.

    Args:
        tools: the tools whose schemas calls are checked against. ``None`` (default):
            learned from the agent's model requests. Tools or plain functions.
        correction_model: a chat model that fixes calls rules cannot (``None``: feedback
            only). Its traffic never enters the agent's history.
        max_correction_retries: attempts per call (at least 1 with a model).
        correction_mode: ``"tool_calling"`` (the tool bound and forced) or ``"json"``.
        correction_context_messages: messages before the assistant message shown to the
            correction model (system messages left out); 0 sends none.
        correct_missing_fields: let the correction model see calls whose only problem is
            a missing required value (off: it would invent it).
        on_unresolved: ``"feedback"`` (default: an error ``ToolMessage`` and the model is
            asked again), ``"raise"`` (:class:`ToolCallValidationError` out of the agent,
            before any call of the message runs), or a sync/async hook receiving an
            :class:`UnresolvedToolCall` and returning new arguments (checked again), its
            own text for the agent, or ``None`` for the default feedback.
        validators: ``{tool_name: fn(args, ValidatorContext) -> str | list[str] | None}``,
            sync or async, run after the schema passes; a returned text is feedback. With
            learned tools, a validator waits until its tool has been seen.
        strip_thinking: remove ``<think>`` blocks from arguments and message text.
        accept_truncated: run a cut-off call on what could be read (``True``, or tool
            names); by default it gets feedback asking for the whole call.
        calls_in_text: read calls a model wrote into its text when it sent none
            (``calls_in_content``, its earlier name, is still read, with a warning).
        coerce: coerce what is safe (``"5"`` -> 5, enum case, ``town`` -> ``city``);
            ``False``: repair only; a dict switches single coercions. A merged call (a
            list for a scalar field) becomes one call per value in ``tool_calls`` (ids
            ``c1``, ``c1_2``); ``{"split_merged_calls": False}`` answers it with feedback.
        on_stats: called after each mended model turn with the node's stats dict (per
            call: id, tool, outcome, fixes, issues, correction attempts, timings in µs).
        sanitize_history: before each model call, make the history valid for providers:
            every call answered exactly once, orphan and duplicate results dropped,
            repeated or missing ids fixed. ``True`` drops a result found out of place
            (its call gets an error result); ``"rehome"`` moves it back to its call;
            ``False`` leaves the history alone.
        max_history_messages, max_history_tokens: trim the history (state included, as
            ``SummarizationMiddleware`` does) to at most this many messages / tokens,
            oldest turns first, never splitting an assistant message from its tool
            results; system messages and the first human message stay.
        history_encoding: the tokenizer for ``max_history_tokens``: ``"o200k_base"``,
            ``"cl100k_base"`` or ``"bytes"`` (an estimate).
        guard: flood control and loop detection on the calls about to run: a
            :class:`toolmend.Guard` or a dict of its rules (the ``[guard]`` table); tools
            add their own with ``metadata={"toolmend_guard": {...}}``. The session is the
            run's ``thread_id``. A refused call is answered here with an error
            ``ToolMessage`` (``tool call cancelled because tool-call flooding was
            detected: …``, outcome ``flooded``) and never reaches the tools; when the
            guard ends the run, every call is answered, an ``AIMessage`` with the reason
            is added and the agent jumps to its end (as ``ToolCallLimitMiddleware``'s
            ``exit_behavior="end"``); ``"error"`` raises
            :class:`ToolCallLimitExceededError`.
    """

    def __init__(
        self,
        *,
        tools: Sequence[Any] | None = None,
        correction_model: Any = None,
        max_correction_retries: int = 2,
        correction_mode: Any = "tool_calling",
        correction_context_messages: int = 10,
        correct_missing_fields: bool = False,
        on_unresolved: Any = "feedback",
        validators: dict[str, Callable[..., Any]] | None = None,
        strip_thinking: bool = True,
        accept_truncated: bool | Sequence[str] = False,
        calls_in_text: bool = True,
        calls_in_content: bool | None = None,
        coerce: bool | dict[str, bool] = PYDANTIC_LAX,
        on_stats: Callable[[dict[str, Any]], Any] | None = None,
        sanitize_history: bool | Literal["drop", "rehome"] = True,
        max_history_messages: int | None = None,
        max_history_tokens: int | None = None,
        history_encoding: Literal["o200k_base", "cl100k_base", "bytes"] = "o200k_base",
        guard: Any = None,
        broken_schema: Literal["raise", "open"] = "raise",
        correction_scope: Literal["issues", "unsafe"] = "issues",
    ) -> None:
        super().__init__()
        if max_history_messages is not None and max_history_tokens is not None:
            raise ValueError("give max_history_messages or max_history_tokens, not both")
        for label, n in (("max_history_messages", max_history_messages), ("max_history_tokens", max_history_tokens)):
            if n is not None and n < 1:
                raise ValueError(f"{label} must be at least 1 (or None for no trim)")
        if history_encoding not in ("o200k_base", "cl100k_base", "bytes"):
            raise ValueError(f"history_encoding={history_encoding!r}: use 'o200k_base', 'cl100k_base' or 'bytes'")
        if sanitize_history not in (True, False, "drop", "rehome"):
            raise ValueError(f"sanitize_history={sanitize_history!r}: use True, False, 'drop' or 'rehome'")
        self._options = dict(
            correction_model=correction_model,
            max_correction_retries=max_correction_retries,
            correction_mode=correction_mode,
            correction_context_messages=correction_context_messages,
            correct_missing_fields=correct_missing_fields,
            on_unresolved=on_unresolved,
            strip_thinking=strip_thinking,
            accept_truncated=accept_truncated,
            calls_in_text=_calls_in_text(calls_in_text, calls_in_content),
            # The shared default object itself: it tells the Mender to give tools with a
            # plain JSON Schema dict every coercion.
            coerce=coerce if coerce is PYDANTIC_LAX else (dict(coerce) if isinstance(coerce, dict) else coerce),
            on_stats=on_stats,
            # One guard for every Mender built (its counts are the middleware's).
            guard=as_guard(guard),
            correction_concurrency=CORRECTION_CONCURRENCY,
            broken_schema=broken_schema,
            correction_scope=correction_scope,
        )
        self._validators = dict(validators or {})
        #: Totals over the middleware's life, shared by every Mender it builds.
        self._totals: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._learned: dict[str, BaseTool] = {}
        self._built: tuple[Any, Mender] | None = None
        self._given: list[BaseTool] | None = None
        if tools is not None:
            from langchain_core.tools import tool as as_tool

            self._given = [t if isinstance(t, BaseTool) else as_tool(t) for t in tools]
            self._mender()  # fixed tools: every option is checked now
        else:
            # Tools come later; the options are checked now all the same.
            Mender([], **self._options)
        self._sanitize = sanitize_history
        self._max_messages = max_history_messages
        self._max_tokens = max_history_tokens
        self._encoding = history_encoding

    # NB: `self.tools` is AgentMiddleware's "extra tools this middleware registers": it
    # must stay unset, or create_agent would add the agent's tools a second time.

    @property
    def stats(self) -> dict[str, int]:
        """Totals over the middleware's life: ``outcome:<o>``, ``fix:<kind>``,
        ``issue:<kind>`` (as the node's), and ``history:<action>`` for what
        ``before_model`` changed (``history:trimmed`` counts messages dropped)."""
        return dict(self._totals)

    # ---- the tools ----------------------------------------------------------------------

    def _learn(self, request: Any) -> None:
        for t in getattr(request, "tools", None) or []:
            if isinstance(t, BaseTool) and self._learned.get(t.name) is not t:
                with self._lock:
                    self._learned[t.name] = t

    def _mender(self) -> Mender | None:
        """The Mender for the current tool set, built once per set."""
        tools = self._given if self._given is not None else list(self._learned.values())
        if not tools:
            return None
        key = tuple(sorted((t.name, id(t)) for t in tools))
        with self._lock:
            if self._built is None or self._built[0] != key:
                names = {t.name for t in tools}
                # Learned tools arrive as requests bind them; a validator for a tool not
                # seen yet waits (fixed tools: a misnamed validator is an error).
                validators = (
                    self._validators
                    if self._given is not None
                    else {k: v for k, v in self._validators.items() if k in names}
                )
                mender = Mender(tools, validators=validators, **self._options)
                mender.totals = self._totals
                if self._options["guard"] is None and mender.guard is not None:
                    # Made for limits a tool declares: kept for the next tool set.
                    self._options["guard"] = mender.guard
                self._built = (key, mender)
            return self._built[1]

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        # Only records the tools bound to the model; the request goes on unchanged.
        if self._given is None:
            self._learn(request)
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if self._given is None:
            self._learn(request)
        return await handler(request)

    # ---- after_model: the calls of the message just produced ----------------------------

    def _at(self, state: Any) -> tuple[Mender, int] | None:
        """The Mender and the last assistant message's index, when there is one to mend."""
        messages = state["messages"]
        at = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
        if at is None:
            return None
        mender = self._mender()
        if mender is None:  # no client-side tools: nothing a call could be checked against
            return None
        return mender, at

    @property
    def guard(self) -> Any:
        """The flood guard (a :class:`toolmend.Guard`), ``None`` without one (tools that
        declare limits get one when the tools are known)."""
        built = self._built
        return built[1].guard if built is not None else self._options["guard"]

    # `end` only: the jump a guard that ends the run makes (no jump otherwise).
    @hook_config(can_jump_to=["end"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        found = self._at(state)
        if found is None:
            return None
        m, at = found
        session = session_of(None) if m.guard is not None else None
        return self._finish(m, m.resolve_message(state["messages"], at, state=state, session=session))

    @hook_config(can_jump_to=["end"])
    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        found = self._at(state)
        if found is None:
            return None
        m, at = found
        session = session_of(None) if m.guard is not None else None
        plan = await m.aresolve_message(state["messages"], at, state=state, session=session)
        return self._finish(m, plan)

    def _finish(self, m: Mender, plan: Plan) -> dict[str, Any] | None:
        """The state update: the mended message (same id: the reducer replaces it), then an
        error ToolMessage per unresolved or refused call; ``None`` when nothing needed
        mending. When the guard ends the run: every call answered, an AIMessage with the
        reason, and a jump to the end."""
        stopped = plan.stopped
        if plan.records or plan.message_fixes:
            # As the node: one report per turn that had calls (or a mended text).
            m.report(plan, self.name)
        ai = plan.ai
        mended = plan.sanitized
        if mended is not None and ai is not None and _same_message(mended, ai):
            mended = None  # e.g. a call LangGraph answers itself (unknown tool) left as is
        answers = [feedback_message(c) for c in plan.calls if FEEDBACK_KEY in c]
        if stopped is not None:
            final = end_message(stopped)
            return {
                "messages": [*([mended] if mended is not None else []), *answers, final],
                "jump_to": "end",
            }
        if mended is None and not answers:
            return None
        # Every call stays in tool_calls and the unresolved ones are answered here. The
        # agent's router then sends only the unanswered calls to the tools, and when all
        # are answered it goes back to the model by itself. No `jump_to`: a jump would skip
        # the after_model hooks of the middleware listed before this one, and
        # ModelCallLimitMiddleware counts model calls there, so a model that keeps sending
        # bad calls would never hit its limit.
        return {"messages": [*([mended] if mended is not None else []), *answers]}

    # ---- before_model: the history ------------------------------------------------------

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not self._sanitize and self._max_messages is None and self._max_tokens is None:
            return None
        messages = list(state["messages"])
        if not messages:
            return None
        new = self._mend_history(messages)
        if len(new) == len(messages) and all(a is b for a, b in zip(new, messages)):
            return None  # valid and within budget: the state is left alone
        # Rewrite the whole list, as SummarizationMiddleware does.
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new]}

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        # CPU only (the Rust core releases the GIL): no await needed.
        return self.before_model(state, runtime)

    def _mend_history(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        rendered = [_render(i, msg) for i, msg in enumerate(messages)]
        if self._sanitize:
            orphans = "rehome" if self._sanitize == "rehome" else "drop"
            rendered, actions = history_sanitize(rendered, orphans=orphans)
            for a in actions:
                self._totals[f"history:{a['kind']}"] += 1
        if self._max_messages is not None or self._max_tokens is not None:
            # Synthesized results carry no reference yet: give them one so that they
            # survive the trim recognisably.
            for k, d in enumerate(rendered):
                d.setdefault(_REF, f"new{k}")
            before = len(rendered)
            rendered = history_trim(
                rendered,
                max_messages=self._max_messages,
                max_tokens=self._max_tokens,
                encoding=self._encoding,
            )
            if before > len(rendered):
                self._totals["history:trimmed"] += before - len(rendered)
        return _map_back(rendered, messages)


# ---- the OpenAI rendering of LangChain messages, and back --------------------------------


def _text(msg: BaseMessage) -> str:
    """The text a pairing check needs: empty only when the message holds nothing (a
    result of images only is not an empty result)."""
    if isinstance(msg.content, str):
        return msg.content
    text = msg.text
    if text.strip() or not msg.content:
        return text
    return "[non-text content]"


def _render(i: int, msg: BaseMessage) -> dict[str, Any]:
    """An OpenAI-format dict for ``msg``, with references back to it and its calls."""
    if isinstance(msg, AIMessage):
        calls = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name") or "", "arguments": json.dumps(c.get("args") or {}, default=str)},
                _REF: ["tool_calls", j],
            }
            for j, c in enumerate(msg.tool_calls)
        ]
        # Invalid calls are calls too: providers get them (langchain-openai sends them),
        # and create_agent answers them, so their results are not orphans.
        calls += [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name") or "", "arguments": c.get("args") or ""},
                _REF: ["invalid_tool_calls", j],
            }
            for j, c in enumerate(msg.invalid_tool_calls)
        ]
        d: dict[str, Any] = {"role": "assistant", "content": _text(msg), _REF: i}
        if calls:
            d["tool_calls"] = calls
        return d
    if isinstance(msg, ToolMessage):
        return {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": _text(msg), _REF: i}
    if isinstance(msg, SystemMessage):
        return {"role": "system", "content": _text(msg), _REF: i}
    # Human and any other kind: only its place in the sequence matters here.
    return {"role": "user", "content": _text(msg), _REF: i}


def _map_back(rendered: list[dict[str, Any]], originals: list[BaseMessage]) -> list[BaseMessage]:
    """LangChain messages for the mended rendering: the original object wherever nothing
    changed, a copy (same id) where ids or contents did, a new error ToolMessage for a
    synthesized result."""
    names = {}
    out: list[BaseMessage] = []
    for d in rendered:
        ref = d.get(_REF)
        if not isinstance(ref, int):  # synthesized by sanitize
            out.append(
                ToolMessage(
                    content=_content_text(d.get("content")),
                    tool_call_id=d["tool_call_id"],
                    name=names.get(d["tool_call_id"]),
                    status="error",
                )
            )
            continue
        msg = originals[ref]
        if isinstance(msg, AIMessage):
            msg = _mapped_ai(msg, d)
            for c in msg.tool_calls:
                names[c["id"]] = c["name"]
        elif isinstance(msg, ToolMessage):
            update: dict[str, Any] = {}
            if d["tool_call_id"] != msg.tool_call_id:
                update["tool_call_id"] = d["tool_call_id"]
            if not _text(msg).strip():  # an empty result got a placeholder
                update["content"] = _content_text(d.get("content"))
            if update:
                msg = msg.model_copy(update=update)
        out.append(msg)
    return out


def _mapped_ai(msg: AIMessage, d: dict[str, Any]) -> AIMessage:
    tool_calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in d.get("tool_calls") or []:
        where, j = call[_REF]
        if where == "tool_calls":
            orig = msg.tool_calls[j]
            name = call["function"]["name"]
            # Arguments were a dict: sanitize never needs to change them.
            tool_calls.append({**orig, "id": call.get("id"), "name": name})
        else:
            # A historical invalid call stays invalid (it is answered as such); only its
            # id may change.
            invalid.append({**msg.invalid_tool_calls[j], "id": call.get("id")})
    if tool_calls == list(msg.tool_calls) and invalid == list(msg.invalid_tool_calls):
        return msg
    return msg.model_copy(update={"tool_calls": tool_calls, "invalid_tool_calls": invalid})


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return ""


def _same_message(a: AIMessage, b: AIMessage) -> bool:
    return a.content == b.content and a.tool_calls == b.tool_calls and a.invalid_tool_calls == b.invalid_tool_calls
