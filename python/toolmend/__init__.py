"""toolmend: mends the tool calls of language-model agents.

The core (this module) is the Rust engine and imports neither LangGraph nor LangChain:

- :class:`Toolbox`: tools compiled once; ``mend(name, arguments)`` repairs a call's text
  (or coerces parsed arguments) and validates it against the tool's JSON Schema, with
  every fix recorded and field-level feedback for what stays invalid;
- :func:`repair`: the tolerant JSON repair parser alone;
- :func:`history_check`, :func:`history_sanitize`, :func:`history_trim`: OpenAI-format
  histories with valid call/result pairing;
- :class:`Guard`: flood control and loop detection (the ``[guard]`` rules), given to the
  node or the middleware as ``guard=``; :class:`ToolCallLimitExceededError` is what a
  budget with ``exit_behavior="error"`` raises.

Integrations, imported only when used:

- ``toolmend.langgraph``: ``ToolNode``, a drop-in for ``langgraph.prebuilt.ToolNode``,
  and ``tools_condition``;
- ``toolmend.langchain``: ``MendMiddleware`` for ``langchain.agents.create_agent``.
"""

from toolmend._core import (
    Guard,
    Toolbox,
    ToolmendError,
    __version__,
    history_check,
    history_sanitize,
    history_trim,
    repair,
    strip_thinking,
)
from toolmend._guard import FLOOD_PREFIX, ToolCallLimitExceededError

__all__ = [
    "FLOOD_PREFIX",
    "Guard",
    "ToolCallLimitExceededError",
    "Toolbox",
    "ToolmendError",
    "__version__",
    "history_check",
    "history_sanitize",
    "history_trim",
    "repair",
    "strip_thinking",
]
