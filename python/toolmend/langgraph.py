"""A drop-in for ``langgraph.prebuilt.ToolNode`` that mends calls before they run.

Change one import::

    from toolmend.langgraph import ToolNode, tools_condition

Same constructor, inputs, outputs and behaviour as the stock node (it *is* one: a
subclass whose execution, injection, ``Command`` handling, ``wrap_tool_call`` and
``handle_tool_errors`` are LangGraph's own), plus, before anything runs:

- repair of ``invalid_tool_calls`` (broken JSON, leaked ``<think>``, fences, glued calls)
  and of calls written into the message text, which the stock node leaves unanswered;
- coercion and validation against each tool's ``tool_call_schema`` (injected arguments
  excluded), field-level feedback for what stays invalid, never an invented value;
- a merged call (a list for a scalar field, ``{"city": ["Oslo", "Rome"]}``) run as one
  call per value, ids ``c1``, ``c1_2`` (``coerce={"split_merged_calls": False}``: feedback
  instead). ``Send`` payloads given to the node one by one cannot split (each is answered
  under its own id, which its message holds): there it is feedback; the
  ``post_model_hook`` splits it;
- ids settled: a missing id minted, a repeated id renamed, an already answered call not
  run again, so every call id gets exactly one ``ToolMessage``;
- per-tool ``validators``, a ``correction_model``, ``on_unresolved``
  (``"feedback"`` | ``"raise"`` | a hook), a truncation policy, stats;
- ``sanitize_messages``: the assistant message is replaced (same id) by its mended form,
  so the next request to the provider carries valid JSON arguments;
- ``guard``: flood control and loop detection (toolmend's ``[guard]`` rules) on the calls
  about to run: a refused call is answered (outcome ``flooded``), ``exit_behavior="end"``
  and the repeat ladder's ``stop`` end the run, ``"error"`` raises
  :class:`ToolCallLimitExceededError`.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

from langchain_core.messages import AIMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableBinding, RunnableLambda
from langgraph.graph import END
from langgraph.types import Command
from langgraph.prebuilt.tool_node import ToolNode as _StockToolNode
from langgraph.prebuilt.tool_node import _default_handle_tool_errors

from toolmend._mend import (
    FEEDBACK_KEY,
    PYDANTIC_LAX,
    Mender,
    Plan,
    ToolCallValidationError,
    UnresolvedToolCall,
    ValidatorContext,
    _calls_in_text,
    content_text,
    feedback_message,
)
from toolmend._guard import ToolCallLimitExceededError, end_message, session_of

if TYPE_CHECKING:
    # Annotations stay strings; LangGraph matches "RunnableConfig" and "Runtime" by name
    # to decide what it passes to `_func` / `_afunc`.
    from langchain_core.runnables import RunnableConfig
    from langgraph.runtime import Runtime

__all__ = [
    "MendingModel",
    "ToolCallLimitExceededError",
    "ToolCallValidationError",
    "ToolNode",
    "UnresolvedToolCall",
    "ValidatorContext",
    "calls_in_content",
    "ended_by_guard",
    "tools_condition",
]

#: ``response_metadata`` key of the AIMessage a guard that ends the run adds last.
STOPPED_KEY = "toolmend_stopped"
#: ``response_metadata`` key of an AIMessage the post-model hook resolved: the calls
#: LangGraph then sends to the node one by one run as they are.
RESOLVED_KEY = "toolmend_resolved"

# The plan of the invocation in progress: set by `_func` / `_afunc` around the stock
# execution, read by `_parse_input`. A context variable, so that one node serves
# concurrent invocations (threads and tasks) safely.
_PLAN: contextvars.ContextVar[Plan | None] = contextvars.ContextVar("toolmend_plan", default=None)
_LIMIT: contextvars.ContextVar[asyncio.Semaphore | None] = contextvars.ContextVar(
    "toolmend_limit", default=None
)


class ToolNode(_StockToolNode):
    """``langgraph.prebuilt.ToolNode`` with toolmend's mending in front.

    The first seven parameters are the stock node's. The rest keep SAIDEX's names where
    they mean the same:

    Args:
        correction_model: a LangChain chat model that fixes calls rules cannot (``None``:
            feedback only). It sees one prompt per attempt; its traffic never enters the
            agent's history.
        max_correction_retries: attempts per call (at least 1 with a model).
        correction_mode: ``"tool_calling"`` (the tool bound and forced) or ``"json"``.
        correction_context_messages: messages before the assistant message shown to the
            correction model (system messages left out, each cut to 2,000 characters);
            0 sends no conversation.
        correct_missing_fields: let the correction model see calls whose only problem is
            a missing required value (off: it would invent it).
        on_unresolved: ``"feedback"`` (default), ``"raise"``
            (:class:`ToolCallValidationError` before anything runs), or a sync/async hook
            receiving an :class:`UnresolvedToolCall` and returning new arguments (checked
            again), its own text for the agent, or ``None`` for the default feedback.
        validators: ``{tool_name: fn(args, ValidatorContext) -> str | list[str] | None}``,
            sync or async; run after the schema passes, a returned text is feedback.
        strip_thinking: remove ``<think>`` blocks from arguments and message text.
        sanitize_messages: replace the assistant message (same id) by its mended form.
        accept_truncated: run a cut-off call on what could be read (``True``, or a set
            of tool names); by default it gets feedback asking for the whole call.
        calls_in_text: read calls a model wrote into its text when it sent none
            (``calls_in_content``, its earlier name, is still read, with a warning).
        coerce: coerce what is safe (``"5"`` -> 5, enum case, ``town`` -> ``city``);
            ``False``: only repair runs and any mismatch is feedback; a dict switches
            single coercions (``{"split_merged_calls": False}``: a merged call is
            feedback, not one call per value). The default leaves out ``scalar_to_string`` (``5`` for a
            string field), which pydantic's lax mode refuses too, so a tool never runs
            on a reading its own schema would reject.
        on_stats: called after each invocation with a dict: per call its id, tool,
            outcome, fixes, issues, correction attempts and timings (µs).
        max_concurrency: most tool calls running at once, sync and async (the stock
            node bounds only the sync path, through the config).
        guard: flood control and loop detection: a :class:`toolmend.Guard`, or a dict
            of its rules (the ``[guard]`` table: ``session``, ``tools``, ``duplicate``,
            ``repeat``, ``ping_pong``, ``no_progress``, ``limits``); tools add their own
            with ``metadata={"toolmend_guard": {...}}``. The session is the run's
            ``thread_id``. A refused call is not run and is answered with an error
            ``ToolMessage`` beginning ``tool call cancelled because tool-call flooding
            was detected`` (outcome ``flooded``). When the guard ends the run, no call of
            the message runs, every call is answered, an ``AIMessage`` with the reason
            is added, and the node returns ``Command(goto=END, update=...)`` (see
            :func:`ended_by_guard` for graphs with a static edge out of the tool node).
            ``exit_behavior="error"`` raises :class:`ToolCallLimitExceededError` before
            any call runs.
    """

    def __init__(
        self,
        tools: Sequence[Any],
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: Any = _default_handle_tool_errors,
        messages_key: str = "messages",
        wrap_tool_call: Callable[..., Any] | None = None,
        awrap_tool_call: Callable[..., Any] | None = None,
        correction_model: Any = None,
        max_correction_retries: int = 2,
        correction_mode: Any = "tool_calling",
        correction_context_messages: int = 10,
        correct_missing_fields: bool = False,
        on_unresolved: Any = "feedback",
        validators: dict[str, Callable[..., Any]] | None = None,
        strip_thinking: bool = True,
        sanitize_messages: bool = True,
        accept_truncated: bool | Sequence[str] = False,
        calls_in_text: bool = True,
        calls_in_content: bool | None = None,
        coerce: bool | dict[str, bool] = PYDANTIC_LAX,
        on_stats: Callable[[dict[str, Any]], Any] | None = None,
        max_concurrency: int | None = None,
        guard: Any = None,
        broken_schema: Literal["raise", "open"] = "raise",
        correction_scope: Literal["issues", "unsafe"] = "issues",
    ) -> None:
        super().__init__(
            tools,
            name=name,
            tags=tags,
            handle_tool_errors=handle_tool_errors,
            messages_key=messages_key,
            wrap_tool_call=wrap_tool_call,
            awrap_tool_call=awrap_tool_call,
        )
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1 (or None for no bound)")
        self._mender = Mender(
            list(self.tools_by_name.values()),
            correction_model=correction_model,
            max_correction_retries=max_correction_retries,
            correction_mode=correction_mode,
            correction_context_messages=correction_context_messages,
            correct_missing_fields=correct_missing_fields,
            on_unresolved=on_unresolved,
            validators=validators,
            strip_thinking=strip_thinking,
            accept_truncated=accept_truncated,
            calls_in_text=_calls_in_text(calls_in_text, calls_in_content),
            coerce=coerce,
            on_stats=on_stats,
            # Argument errors in LangGraph's frame with toolmend's lines, unless the user
            # chose another handling (False raises ToolInvocationError, as stock).
            frame_errors=handle_tool_errors is _default_handle_tool_errors
            or handle_tool_errors is True,
            guard=guard,
            correction_concurrency=max_concurrency or 16,
            broken_schema=broken_schema,
            correction_scope=correction_scope,
        )
        self._sanitize_messages = sanitize_messages
        self._max_concurrency = max_concurrency
        if self._mender.calls_in_text:
            _READERS.add(self._mender)

    @property
    def stats(self) -> dict[str, int]:
        """Totals over the node's life: ``outcome:<o>``, ``fix:<kind>``, ``issue:<kind>``."""
        return dict(self._mender.totals)

    # ---- planning ----------------------------------------------------------------------

    @property
    def guard(self) -> Any:
        """The flood guard (a :class:`toolmend.Guard`), ``None`` without one."""
        return self._mender.guard

    def _read(self, input: Any) -> tuple[Any, Any, Any, Any]:
        """The input as LangGraph reads it: its calls, its form, the messages, the state."""
        # The stock parser first: its errors ("No AIMessage found in input" …) and its
        # reading of the input form are the contract.
        tool_calls, input_type = _StockToolNode._parse_input(self, input)
        if input_type == "tool_calls":
            state = input.get("state") if isinstance(input, dict) else None  # ToolCallWithContext
            messages = _messages_of(state, self._messages_key) or []
            return tool_calls, input_type, messages, state
        messages = input if isinstance(input, list) else _messages_of(input, self._messages_key)
        return tool_calls, input_type, messages, None if isinstance(input, list) else input

    @staticmethod
    def _before_last_ai(messages: Any) -> Any:
        """``Send`` payloads: the conversation before the message that holds them."""
        at = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
        return messages[:at] if at is not None else messages

    def _plan(self, input: Any, config: Any) -> Plan:
        """The message resolved by the core, one call (sync path)."""
        tool_calls, input_type, messages, state = self._read(input)
        m = self._mender
        session = session_of(config) if m.guard is not None else None
        resolved = self._resolved_plan(messages, tool_calls, input_type != "tool_calls")
        if resolved is not None:
            plan = resolved
        elif input_type == "tool_calls":
            plan = m.resolve_calls(tool_calls, self._before_last_ai(messages), state=state, session=session)
        else:
            at = _last_ai(messages)
            plan = m.resolve_message(messages, at, state=state, session=session, rename=self._sanitize_messages)
        plan.input_type = input_type
        return plan

    async def _aplan(self, input: Any, config: Any) -> Plan:
        tool_calls, input_type, messages, state = self._read(input)
        m = self._mender
        session = session_of(config) if m.guard is not None else None
        resolved = self._resolved_plan(messages, tool_calls, input_type != "tool_calls")
        if resolved is not None:
            plan = resolved
        elif input_type == "tool_calls":
            plan = await m.aresolve_calls(tool_calls, self._before_last_ai(messages), state=state, session=session)
        else:
            at = _last_ai(messages)
            plan = await m.aresolve_message(
                messages, at, state=state, session=session, rename=self._sanitize_messages
            )
        plan.input_type = input_type
        return plan

    def _report(self, plan: Plan) -> None:
        if not plan.resolved_before:
            self._mender.report(plan, self.name)

    # ---- the post-model hook -----------------------------------------------------------

    @property
    def post_model_hook(self) -> Any:
        """A ``post_model_hook`` for ``create_react_agent(model, tools=node,
        post_model_hook=node.post_model_hook)``: the model's answer resolved before
        LangGraph dispatches its calls, in both versions of the prebuilt agent (``v2``
        sends each call to the node on its own, so ``invalid_tool_calls`` and calls
        written into the text would never reach it).

        Its update replaces the answer (same id) with its mended form: every call that
        runs as a ``tool_call``, under its settled id; a call that cannot run answered at
        once with its feedback (a ``ToolMessage``: the agent then goes back to the model
        when nothing else runs); a run the guard ends answered whole, with the closing
        ``AIMessage``. The calls it sends on run as they are in the node, resolved,
        guarded and reported once."""
        return RunnableLambda(self._hook, afunc=self._ahook, name="toolmend_post_model_hook")

    def _hook(self, state: Any, config: RunnableConfig) -> Any:
        messages = _messages_of(state, self._messages_key) or []
        if not _answer_to_resolve(messages):
            return {}
        m = self._mender
        session = session_of(config) if m.guard is not None else None
        plan = m.resolve_message(messages, len(messages) - 1, state=state, session=session)
        return self._hook_update(plan)

    async def _ahook(self, state: Any, config: RunnableConfig) -> Any:
        messages = _messages_of(state, self._messages_key) or []
        if not _answer_to_resolve(messages):
            return {}
        m = self._mender
        session = session_of(config) if m.guard is not None else None
        plan = await m.aresolve_message(messages, len(messages) - 1, state=state, session=session)
        return self._hook_update(plan)

    def _hook_update(self, plan: Plan) -> Any:
        self._mender.report(plan, self.name)
        mended = self._mended_answer(plan, True)
        if mended is None:
            # No call, in the calls or in the text: the answer as it came (its thinking
            # stripped when the plan stripped it).
            return {self._messages_key: [plan.sanitized]} if plan.sanitized is not None else {}
        if plan.stopped is not None:
            final = end_message(plan.stopped)
            answers = [feedback_message(c) for c in plan.calls]
            return {self._messages_key: [mended, *answers, final]}
        answers = [feedback_message(c) for c in plan.calls if FEEDBACK_KEY in c]
        return {self._messages_key: [mended, *answers]}

    @staticmethod
    def _mended_answer(plan: Plan, mark: Any) -> AIMessage | None:
        """The answer with every call it holds as a ``tool_call`` under its settled id
        (``None`` when it holds none), marked resolved with ``mark``."""
        ai = plan.ai
        if ai is None or not plan.records:
            return None
        calls = [{"name": c["name"], "args": c.get("args") if isinstance(c.get("args"), dict) else {},
                  "id": c["id"], "type": "tool_call"} for c in plan.calls]
        return ai.model_copy(update={
            "content": plan.new_content if plan.new_content is not None else ai.content,
            "tool_calls": calls,
            "invalid_tool_calls": [],
            "response_metadata": {**(ai.response_metadata or {}), RESOLVED_KEY: mark},
        })

    # ---- the mending model -------------------------------------------------------------

    def bind_model(self, model: Any, **kwargs: Any) -> Any:
        """``model.bind_tools(<this node's tools>, **kwargs)``, whose answers come back
        resolved: every call, ``invalid_tool_calls`` and calls written into the text
        included, as a ``tool_call`` under its settled id. So any router that reads
        ``tool_calls`` sends every call to this node: ``create_react_agent`` in
        ``version="v1"`` (which takes no post-model hook), LangGraph's own
        ``tools_condition``, a hand-written edge::

            agent = create_react_agent(node.bind_model(model), tools=node, version="v1")

        The guard, correction and the report run here, once, on ``invoke`` and
        ``ainvoke`` (what an agent calls; ``stream`` gives the model's own chunks). A call
        that cannot run carries its feedback in the answer's ``response_metadata``
        (``toolmend_resolved``), and the node answers it with that text instead of
        running it; a run the guard ends is answered and closed by the node. Validators
        see no graph state here (a model is handed messages only)."""
        bound = model.bind_tools(list(self.tools_by_name.values()), **kwargs)
        if not isinstance(bound, RunnableBinding):
            raise TypeError(
                f"bind_model needs a chat model whose bind_tools returns a RunnableBinding "
                f"(every LangChain chat model's does); {type(model).__name__}.bind_tools "
                f"returned {type(bound).__name__}: use post_model_hook=node.post_model_hook instead"
            )
        return MendingModel(
            bound=bound.bound, kwargs=bound.kwargs, config=bound.config,
            config_factories=bound.config_factories, node=self,
        )

    def _model_answer(self, answer: Any, plan: Plan) -> Any:
        self._mender.report(plan, self.name)
        answers = {c["id"]: c[FEEDBACK_KEY] for c in plan.calls if FEEDBACK_KEY in c}
        mark: dict[str, Any] = {"answers": answers}
        if plan.stopped is not None:
            mark["stop"] = plan.stopped
        mended = self._mended_answer(plan, mark)
        if mended is not None:
            return mended
        return plan.sanitized if plan.sanitized is not None else answer

    def _mend_answer(self, input: Any, answer: Any, config: Any) -> Any:
        if not isinstance(answer, AIMessage):
            return answer
        messages = [*_model_input(input), answer]
        m = self._mender
        session = session_of(config) if m.guard is not None else None
        plan = m.resolve_message(messages, len(messages) - 1, session=session)
        return self._model_answer(answer, plan)

    async def _amend_answer(self, input: Any, answer: Any, config: Any) -> Any:
        if not isinstance(answer, AIMessage):
            return answer
        messages = [*_model_input(input), answer]
        m = self._mender
        session = session_of(config) if m.guard is not None else None
        plan = await m.aresolve_message(messages, len(messages) - 1, session=session)
        return self._model_answer(answer, plan)

    def _resolved_plan(self, messages: Any, calls: Any, whole: bool) -> Plan | None:
        """The plan of calls whose message was resolved before they came (by the hook or
        the mending model): they run as they are; a call that carries its feedback is
        answered with it; the calls the hook answered already are not answered again."""
        at = _last_ai_or_none(messages)
        mark = (messages[at].response_metadata or {}).get(RESOLVED_KEY) if at is not None else None
        if not mark:
            return None
        ai = messages[at]
        if not whole:
            ids = {c.get("id") for c in ai.tool_calls}
            if not all(c.get("id") in ids for c in calls):
                return None
        answers = mark.get("answers", {}) if isinstance(mark, dict) else {}
        if whole:
            done = {m.tool_call_id for m in messages[at + 1 :] if m.type == "tool"}
            calls = [c for c in calls if c.get("id") not in done]
        calls = [{**c, FEEDBACK_KEY: answers[c.get("id")]} if c.get("id") in answers else c for c in calls]
        plan = self._mender.as_resolved(calls)
        if whole and isinstance(mark, dict) and mark.get("stop") is not None:
            plan.stopped = mark["stop"]
        return plan

    def _parse_input(self, input: Any) -> Any:
        plan = _PLAN.get()
        if plan is not None:
            return plan.calls, plan.input_type
        return super()._parse_input(input)

    # ---- sync ------------------------------------------------------------------------

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime) -> Any:
        plan = self._plan(input, config)
        m = self._mender
        if plan.stopped is not None:
            self._report(plan)
            return self._stopped(plan)
        if self._max_concurrency is not None and "max_concurrency" not in (config or {}):
            config = {**(config or {}), "max_concurrency": self._max_concurrency}
        if _nothing_runs(plan):
            out = self._answer_only(plan)
        else:
            token = _PLAN.set(plan)
            try:
                out = super()._func(input, config, runtime)
            finally:
                _PLAN.reset(token)
        self._report(plan)
        return self._with_sanitized(out, plan)

    def _stopped(self, plan: Plan) -> Any:
        """The update when the guard ends the run: every call answered, then an
        ``AIMessage`` with the reason; as ``Command(goto=END)`` in a graph."""
        out = self._with_sanitized(self._answer_only(plan), plan)
        final = end_message(plan.stopped or "")
        if plan.input_type == "list":
            return [*out, final]
        update = {**out, self._messages_key: [*out[self._messages_key], final]}
        return Command(goto=END, update=update)

    def _answer_only(self, plan: Plan) -> Any:
        """The update when every call is answered with feedback: LangGraph's execution
        (runtimes, a thread pool or a gather) would only pass the answers through."""
        out = [feedback_message(c) for c in plan.calls]
        return out if plan.input_type == "list" else {self._messages_key: out}

    def _run_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        if FEEDBACK_KEY in call:
            return feedback_message(call)
        return super()._run_one(call, input_type, tool_runtime)

    # ---- async -----------------------------------------------------------------------

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime) -> Any:
        plan = await self._aplan(input, config)
        m = self._mender
        if plan.stopped is not None:
            self._report(plan)
            return self._stopped(plan)
        if _nothing_runs(plan):
            self._report(plan)
            return self._with_sanitized(self._answer_only(plan), plan)
        token = _PLAN.set(plan)
        limit_token = _LIMIT.set(
            asyncio.Semaphore(self._max_concurrency) if self._max_concurrency else None
        )
        try:
            out = await super()._afunc(input, config, runtime)
        finally:
            _PLAN.reset(token)
            _LIMIT.reset(limit_token)
        self._report(plan)
        return self._with_sanitized(out, plan)

    async def _arun_one(self, call: Any, input_type: Any, tool_runtime: Any) -> Any:
        if FEEDBACK_KEY in call:
            return feedback_message(call)
        limit = _LIMIT.get()
        if limit is None:
            return await super()._arun_one(call, input_type, tool_runtime)
        async with limit:
            return await super()._arun_one(call, input_type, tool_runtime)

    # ---- output --------------------------------------------------------------------------

    def _with_sanitized(self, out: Any, plan: Plan) -> Any:
        """Adds the mended assistant message (same id: the reducer replaces it) to the
        node's update, when something changed and the message can be replaced."""
        ai = plan.sanitized
        if not self._sanitize_messages or ai is None or not ai.id or plan.input_type == "tool_calls":
            return out
        key = self._messages_key
        if isinstance(out, dict) and key in out:
            return {**out, key: [ai, *out[key]]}
        if isinstance(out, list) and all(not isinstance(o, (list, dict)) for o in out) and not any(
            type(o).__name__ == "Command" for o in out
        ):
            return [ai, *out]
        if isinstance(out, list):  # a mix of Commands and updates
            return [[ai] if plan.input_type == "list" else {key: [ai]}, *out]
        return out


def _answer_to_resolve(messages: Any) -> bool:
    """The hook's input ends with the model's answer, not yet resolved."""
    last = messages[-1] if messages else None
    return isinstance(last, AIMessage) and not (last.response_metadata or {}).get(RESOLVED_KEY)


def _nothing_runs(plan: Plan) -> bool:
    return bool(plan.calls) and all(FEEDBACK_KEY in c for c in plan.calls)


def _last_ai_or_none(messages: Any) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)


def _model_input(input: Any) -> list[Any]:
    """The conversation a chat model was handed, as messages."""
    if isinstance(input, PromptValue):
        return input.to_messages()
    if isinstance(input, str):
        return [HumanMessage(input)]
    if isinstance(input, Sequence):
        return convert_to_messages(input)
    return []


class MendingModel(RunnableBinding):
    """A chat model with tools bound whose answers come back resolved by a toolmend
    ``ToolNode``: made by :meth:`ToolNode.bind_model`. It is the ``RunnableBinding``
    that ``bind_tools`` returns (LangGraph's prebuilt agent sees the tools bound and
    does not bind them again), with the node's mending after ``invoke``/``ainvoke``."""

    node: Any = None

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        answer = super().invoke(input, config, **kwargs)
        return self.node._mend_answer(input, answer, config) if self.node is not None else answer

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        answer = await super().ainvoke(input, config, **kwargs)
        if self.node is None:
            return answer
        return await self.node._amend_answer(input, answer, config)

    def batch(self, inputs: Any, config: Any = None, *, return_exceptions: bool = False, **kwargs: Any) -> Any:
        # One invoke per input (the binding's own batch would skip the mending).
        return Runnable.batch(self, inputs, config, return_exceptions=return_exceptions, **kwargs)

    async def abatch(self, inputs: Any, config: Any = None, *, return_exceptions: bool = False, **kwargs: Any) -> Any:
        return await Runnable.abatch(self, inputs, config, return_exceptions=return_exceptions, **kwargs)

    # The binding's copies (`bind`, `with_config` …) are made by `self.__class__(...)`
    # without the node: each gets it back.
    def _kept(self, out: Any) -> Any:
        if isinstance(out, MendingModel):
            out.node = self.node
        return out

    def bind(self, **kwargs: Any) -> Any:
        return self._kept(super().bind(**kwargs))

    def with_config(self, config: Any = None, **kwargs: Any) -> Any:
        return self._kept(super().with_config(config, **kwargs))

    def with_listeners(self, **kwargs: Any) -> Any:
        return self._kept(super().with_listeners(**kwargs))

    def with_types(self, **kwargs: Any) -> Any:
        return self._kept(super().with_types(**kwargs))

    def with_retry(self, **kwargs: Any) -> Any:
        return self._kept(super().with_retry(**kwargs))


def _last_ai(messages: Any) -> int:
    return next(i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage))


def _messages_of(state: Any, key: str) -> list[Any] | None:
    if state is None:
        return None
    if isinstance(state, dict):
        return state.get(key)
    return getattr(state, key, None)


def ended_by_guard(state: list[Any] | dict[str, Any] | Any, messages_key: str = "messages") -> bool:
    """True when the tool node's guard ended the run (the last message is the
    ``AIMessage`` it adds). A node's ``Command(goto=END)`` does not cancel a static edge
    out of it: route out of the tool node with this instead, e.g.
    ``builder.add_conditional_edges("tools", lambda s: END if ended_by_guard(s) else "agent")``."""
    if isinstance(state, list):
        messages = state
    elif isinstance(state, dict):
        messages = state.get(messages_key, [])
    else:
        messages = getattr(state, messages_key, [])
    last = messages[-1] if messages else None
    return isinstance(last, AIMessage) and bool((last.response_metadata or {}).get(STOPPED_KEY))


#: The menders of the live toolmend ``ToolNode``s that read calls written into the text:
#: ``tools_condition`` reads an answer's content with their tools (a router is handed
#: the state only, never the node it routes to).
_READERS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def calls_in_content(ai: Any) -> bool:
    """True when ``ai``'s content (a string, or a list of content blocks) holds a call
    written into the text that a toolmend ``ToolNode`` of this process would run: the
    core's reading (every model dialect the node reads), against that node's tools, so
    an answer that merely quotes JSON, or calls a tool no node has, is not a call."""
    text = content_text(getattr(ai, "content", None))
    if not text:
        return False
    return any(m.toolbox.calls_in_text(text) for m in list(_READERS))


def tools_condition(
    state: list[Any] | dict[str, Any] | Any,
    messages_key: str = "messages",
) -> Literal["tools", "__end__"]:
    """``langgraph.prebuilt.tools_condition``, that routes to the tool node every
    assistant message a toolmend ``ToolNode`` would run a call of: ``tool_calls``, only
    ``invalid_tool_calls`` (the stock one ends the run and leaves those unanswered), or
    calls written into the content, as a string or as content blocks
    (:func:`calls_in_content`: read with the tools of this process's toolmend nodes that
    have ``calls_in_text`` on)."""
    if isinstance(state, list):
        ai = state[-1] if state else None
    elif isinstance(state, dict):
        messages = state.get(messages_key, [])
        ai = messages[-1] if messages else None
    else:
        messages = getattr(state, messages_key, [])
        ai = messages[-1] if messages else None
    if ai is None:
        raise ValueError(f"No messages found in input state to tool_edge: {state}")
    if getattr(ai, "tool_calls", None) or getattr(ai, "invalid_tool_calls", None):
        return "tools"
    if isinstance(ai, AIMessage) and calls_in_content(ai):
        return "tools"
    return "__end__"
