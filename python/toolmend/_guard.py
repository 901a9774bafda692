"""Flood control and loop detection for the Python fronts: what the LangGraph node and the
LangChain middleware share around ``toolmend._core.Guard`` (the core's ``RuleGuard``).
Imports neither LangChain nor LangGraph at module level.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from toolmend._core import Guard

#: How every refusal's tool message begins (the core's ``FLOOD_PREFIX``).
FLOOD_PREFIX = "tool call cancelled because tool-call flooding was detected"
#: How a refusal begins when the guard could not decide (its store did not answer and it
#: fails closed: rule ``store_unavailable``): an outage, not a flood (the core's
#: ``UNCHECKED_PREFIX``).
UNCHECKED_PREFIX = "tool call cancelled because the flood guard could not check it"

#: The key of a LangChain tool's ``metadata`` holding limits it declares on itself
#: (``{"session", "global", "limits", "duplicate", "repeat"}``, as
#: ``[guard.tools.<name>]``).
METADATA_KEY = "toolmend_guard"


class ToolCallLimitExceededError(Exception):
    """A call went over a budget whose ``exit_behavior`` is ``"error"`` (LangChain's
    ``ToolCallLimitMiddleware`` raises its own error of this name in that case). Raised
    before any call of the message runs. ``reason``: the guard's message (rule, count,
    limit); ``tool``, ``call_id``: the call; ``decisions``: the guard's decisions on it."""

    def __init__(
        self,
        reason: str,
        *,
        tool: str | None = None,
        call_id: str | None = None,
        decisions: list[dict[str, Any]] | None = None,
    ):
        self.reason = reason
        self.tool = tool
        self.call_id = call_id
        self.decisions = list(decisions or [])
        super().__init__(reason)


def as_guard(guard: Any) -> Guard | None:
    """``guard=`` as a :class:`Guard`: a ``Guard`` as is, a dict (the ``[guard]`` table)
    built into one, ``None`` for none."""
    if guard is None:
        return None
    if isinstance(guard, Guard):
        return guard
    if isinstance(guard, Mapping):
        return Guard(dict(guard))
    raise TypeError(
        f"guard={guard!r}: give a toolmend.Guard, a dict of [guard] rules, or None"
    )


def declare_tools(guard: Guard | None, tools: Any) -> Guard | None:
    """Limits tools declare on themselves (``metadata={"toolmend_guard": {...}}``)
    added to ``guard`` (an empty one is made when there is none and a tool declares
    some). The guard's own entry for a tool wins key by key."""
    for t in tools:
        meta = getattr(t, "metadata", None) or {}
        rules = meta.get(METADATA_KEY) if isinstance(meta, Mapping) else None
        if not rules:
            continue
        if guard is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # empty only until the next line fills it
                guard = Guard()
        guard.declare_tool(t.name, dict(rules))
    return guard


def session_of(config: Any) -> str | None:
    """The session the calls belong to: LangGraph's ``thread_id`` from a
    ``RunnableConfig``, else from the config of the run in progress (a middleware hook
    has no config argument); ``None`` outside a thread."""
    thread = _thread_id(config)
    if thread is None:
        try:
            from langgraph.config import get_config

            thread = _thread_id(get_config())
        except Exception:  # outside a runnable context
            thread = None
    return thread


def _thread_id(config: Any) -> str | None:
    if not isinstance(config, Mapping):
        return None
    configurable = config.get("configurable")
    if not isinstance(configurable, Mapping):
        return None
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)




#: The ``name`` of the ``AIMessage`` a guard that ends the run adds last: written by
#: toolmend, not by the model, and shown as such by LangGraph's UIs (which show a
#: message's name).
ENDED_BY = "toolmend_guard"


def end_message(reason: str) -> Any:
    """The closing ``AIMessage`` of a run the guard ended: the reason, marked as
    toolmend's (``name``, ``response_metadata={"toolmend_stopped": True, "author":
    "toolmend"}``), so that no UI shows it as the model's answer."""
    from langchain_core.messages import AIMessage

    return AIMessage(
        content=reason,
        name=ENDED_BY,
        response_metadata={"toolmend_stopped": True, "author": "toolmend"},
    )
