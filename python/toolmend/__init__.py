"""toolmend: mends the tool calls of language-model agents.

The core (this module) is the Rust engine and imports neither LangGraph nor LangChain:

- :class:`Toolbox`: tools compiled once; ``mend(name, arguments)`` repairs a call's text
  (or coerces parsed arguments) and validates it against the tool's JSON Schema, with
  every fix recorded and field-level feedback for what stays invalid;
- :func:`repair`: the tolerant JSON repair parser alone;
- :func:`history_check`, :func:`history_sanitize`, :func:`history_trim`: OpenAI-format
  histories with valid call/result pairing.

Integrations, imported only when used:

- ``toolmend.langgraph``: ``ToolNode``, a drop-in for ``langgraph.prebuilt.ToolNode``,
  and ``tools_condition``;
- ``toolmend.langchain``: ``MendMiddleware`` for ``langchain.agents.create_agent``.
"""

from toolmend._core import (
    Toolbox,
    ToolmendError,
    __version__,
    history_check,
    history_sanitize,
    history_trim,
    repair,
    strip_thinking,
)

__all__ = [
    "Toolbox",
    "ToolmendError",
    "__version__",
    "history_check",
    "history_sanitize",
    "history_trim",
    "repair",
    "strip_thinking",
]
