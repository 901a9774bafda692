"""toolmend: mends the tool calls of language-model agents.

The core (this module) is the Rust engine and imports neither LangGraph nor LangChain:

- :class:`Toolbox`: tools compiled once; ``mend(name, arguments)`` repairs a call's text
  (or coerces parsed arguments) and validates it against the tool's JSON Schema, with
  every fix recorded and field-level feedback for what stays invalid;
- :func:`repair`: the tolerant JSON repair parser alone;
- :func:`loads`, :func:`repair_json`, :func:`load`, :func:`from_file`: json_repair's
  one-liners with its signatures, on this parser (``import toolmend as json_repair``);
- :func:`history_check`, :func:`history_sanitize`, :func:`history_trim`: OpenAI-format
  histories with valid call/result pairing;
- :class:`Guard`: flood control and loop detection (the ``[guard]`` rules), given to the
  node or the middleware as ``guard=``; :class:`ToolCallLimitExceededError` is what a
  budget with ``exit_behavior="error"`` raises;
- :class:`NetTools`: the tools of a tools file (``[[tools]]`` HTTP tool services,
  ``[[mcp]]`` servers), called from Python; :class:`ToolsLoadError` names the line of a
  file that cannot be loaded.

Integrations, imported only when used:

- ``toolmend.langgraph``: ``ToolNode``, a drop-in for ``langgraph.prebuilt.ToolNode``,
  and ``tools_condition``;
- ``toolmend.langchain``: ``MendMiddleware`` for ``langchain.agents.create_agent``;
- ``toolmend.tools`` (also as :func:`load_tools`): a tools file's tools as LangChain tools.
"""

from typing import Any

from toolmend._core import (
    Guard,
    NetTools,
    Toolbox,
    ToolmendError,
    ToolsLoadError,
    __version__,
    history_check,
    history_sanitize,
    history_trim,
    repair,
    strip_thinking,
)
from toolmend._guard import FLOOD_PREFIX, UNCHECKED_PREFIX, ToolCallLimitExceededError
from toolmend._json_repair import from_file, load, loads, repair_json

__all__ = [
    "FLOOD_PREFIX",
    "UNCHECKED_PREFIX",
    "Guard",
    "NetTools",
    "ToolCallLimitExceededError",
    "Toolbox",
    "ToolmendError",
    "ToolsLoadError",
    "__version__",
    "from_file",
    "history_check",
    "history_sanitize",
    "history_trim",
    "load",
    "load_tools",
    "loads",
    "repair",
    "repair_json",
    "strip_thinking",
]


def __getattr__(name: str) -> Any:
    # `load_tools` makes LangChain tools: imported on first use, so that `import toolmend`
    # stays free of langchain-core.
    if name == "load_tools":
        from toolmend.tools import load_tools

        return load_tools
    raise AttributeError(f"module 'toolmend' has no attribute {name!r}")
