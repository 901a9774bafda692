"""Tools behind the network as LangChain tools.

The tools file that feeds the Rust node and the gateway (``[[tools]]``: HTTP tool
services speaking the envelope; ``[[mcp]]``: MCP servers over stdio or streamable HTTP)
becomes one LangChain tool per network tool::

    from toolmend import load_tools
    from toolmend.langgraph import ToolNode

    tools = load_tools("tools.toml")          # or load_tools(toml_text, text=True)
    node = ToolNode(tools)                    # or create_agent(model, tools=tools, ...)

Each tool is a :class:`NetTool` (a ``BaseTool``) with the tool's JSON Schema as its
``args_schema`` and ``response_format="content_and_artifact"``:

- the **content** is what the model reads: the result shaped by the tool's template (or
  the generic summary), cut to its budget;
- the **artifact** is ``{"data": <the whole payload>, "metadata": {...}}``: the payload
  the service sent, never shown to the model, and how the result was made (service
  latency, attempts, which template shaped it, bytes left out, the trace id).

**The call id.** LangChain hands a tool the call's id when it is invoked with a
``ToolCall`` (``tool.invoke({"type": "tool_call", "id": ..., "name": ..., "args": ...})``,
which is what LangGraph's ``ToolNode`` and ``create_agent`` do): ``BaseTool.run`` and
``arun`` take it as ``tool_call_id``. :class:`NetTool` overrides both to keep it (and the
trace id, from ``config["metadata"]["trace_id"]`` when given) in a context variable that
its ``_run`` / ``_arun`` read, so the service gets exactly the id the ``ToolMessage``
answers as ``X-Tool-Call-ID``. Invoked with plain arguments (no call), a fresh id is
made for the request.

**Errors.** A call that fails its schema or a business rule (``x-business-rules``) is not
sent; a tool's own error, a dirty answer (another call's ``call_id``), a protocol
violation (no ``status``, not JSON), an unreachable service, a timeout: each raises
:class:`NetToolError` (a ``ToolException``) inside the tool, which ``handle_tool_error``
turns into a ``ToolMessage`` with ``status="error"`` whose content says what happened:
never data, and never another call's data.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping

from langchain_core.tools import BaseTool, ToolException
from pydantic import Field

from toolmend._core import NetTools, ToolsLoadError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = ["NetTool", "NetToolError", "NetTools", "ToolsLoadError", "load_tools"]

logger = logging.getLogger("toolmend.tools")


@dataclass(frozen=True)
class _Call:
    call_id: str | None
    trace_id: str | None


# The call in progress: set by `run` / `arun` (which LangChain gives the tool call's id),
# read by `_run` / `_arun` (which it does not). LangChain runs `_run` in a copy of the
# current context, so the value set here is the one seen there.
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("toolmend_net_call", default=None)


class NetToolError(ToolException):
    """A network tool's call that gave no result: ``kind`` is ``"invalid_arguments"``
    (not sent), ``"failed"`` (the tool's error, a dirty answer, a protocol violation, an
    unreachable service), ``"timeout"`` or ``"panicked"``; ``result`` is the whole
    answer of :meth:`NetTools.call`."""

    def __init__(self, message: str, *, kind: str, result: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.kind = kind
        self.result = dict(result)


def _trace_id(config: RunnableConfig | Mapping[str, Any] | None) -> str | None:
    if not config:
        return None
    for section in ("metadata", "configurable"):
        value = (config.get(section) or {}).get("trace_id")
        if value:
            return str(value)
    return None


def _strip_nulls(value: Any) -> Any:
    """The limits without the unset rules (serialized as nulls)."""
    if isinstance(value, Mapping):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    return value


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class NetTool(BaseTool):
    """One tool of a tools file: an HTTP tool service or an MCP server's tool.

    Made by :func:`load_tools`; every tool of one file shares one :class:`NetTools`
    (``net``), whose runtime holds the connections.
    """

    args_schema: dict[str, Any]  # type: ignore[assignment]
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: Any = True
    kind: Literal["http", "mcp"] = "http"
    """How it is served."""
    server_side: bool = False
    """``server_side = true`` in the file: the gateway runs it itself."""
    net: Any = Field(default=None, exclude=True, repr=False)
    """The loaded tools file this tool belongs to (:class:`NetTools`)."""

    # --- where LangChain passes the call id ---

    def run(  # type: ignore[override]
        self,
        tool_input: str | dict[str, Any],
        *args: Any,
        tool_call_id: str | None = None,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        token = _CALL.set(_Call(tool_call_id, _trace_id(config)))
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, config=config, **kwargs)
        finally:
            _CALL.reset(token)

    async def arun(  # type: ignore[override]
        self,
        tool_input: str | dict[str, Any],
        *args: Any,
        tool_call_id: str | None = None,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        token = _CALL.set(_Call(tool_call_id, _trace_id(config)))
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, config=config, **kwargs)
        finally:
            _CALL.reset(token)

    # --- the call ---

    def _request(self) -> tuple[str, str | None]:
        call = _CALL.get()
        call_id = call.call_id if call is not None and call.call_id else _new_call_id()
        return call_id, call.trace_id if call is not None else None

    def _answer(self, result: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        if result["status"] != "success":
            raise NetToolError(
                result.get("error") or "the tool gave no result",
                kind=result.get("error_kind") or "failed",
                result=result,
            )
        return result["content"], {"data": result["artifact"], "metadata": result["metadata"]}

    # Arguments arrive as keywords (LangChain spreads the dict); `self` is positional-only
    # so that a tool argument may be called anything.
    def _run(self, /, **arguments: Any) -> tuple[Any, dict[str, Any]]:
        call_id, trace_id = self._request()
        return self._answer(self.net.call(self.name, arguments, call_id, trace_id))

    async def _arun(self, /, **arguments: Any) -> tuple[Any, dict[str, Any]]:
        # The Rust call blocks (GIL released) on the tools' runtime; a worker thread
        # keeps the event loop free. A cancelled task leaves the call to finish within
        # its timeout.
        call_id, trace_id = self._request()
        result = await asyncio.to_thread(self.net.call, self.name, arguments, call_id, trace_id)
        return self._answer(result)


def load_tools(
    path_or_toml: str | os.PathLike[str],
    *,
    text: bool = False,
    env: Mapping[str, str] | None = None,
) -> list[NetTool]:
    """The tools of a tools file as LangChain tools, in file order.

    ``path_or_toml`` is the file's path, or with ``text=True`` the TOML itself. Secrets
    (``{ env = "VAR" }`` in headers and MCP environments) come from ``env``, by default
    ``os.environ``. MCP servers are started or connected, and listed, before this
    returns; what was left out (an MCP tool whose schema does not compile, a name taken
    twice) is logged on ``toolmend.tools`` and kept in ``tools[0].net.problems()``.

    Raises :class:`ToolsLoadError` (a ``ToolmendError``) naming the file, the line and
    the tool: a schema or template that does not compile, an endpoint that is not an
    http(s) URL, retries on a tool not safe to retry, a missing secret, an MCP server
    that cannot be reached.
    """
    if text:
        source, origin = str(path_or_toml), "<inline>"
    else:
        source = os.fspath(path_or_toml)
        origin = source
    net = NetTools(source, text=text, origin=origin, env=dict(os.environ if env is None else env))
    for problem in net.problems():
        logger.warning("%s: %s", origin, problem)
    return [
        NetTool(
            name=d["name"],
            description=d["description"],
            args_schema=d["parameters"],
            kind=d["kind"],
            server_side=d["server_side"],
            net=net,
            # `[tools.limits]` of the file: the guard of a ToolNode or middleware given
            # `guard=` merges them in, as for any tool that declares its own limits.
            metadata={"toolmend_guard": _strip_nulls(d["limits"])} if d.get("limits") else None,
        )
        for d in net.definitions()
    ]
