"""Type stubs for the Rust extension ``toolmend._core``."""

from typing import Any, Literal, Sequence, TypedDict

__version__: str
MAY_RUN: list[str]
"""The call outcomes whose call may run (the guard checks them): the core's list."""

class ToolmendError(Exception):
    """Bad input to toolmend; the message says what is wrong and what to do."""

class Fix(TypedDict, total=False):
    kind: str
    path: str
    detail: str
    offset: int

class Issue(TypedDict, total=False):
    kind: str
    path: str
    message: str
    expected: Any
    got: Any
    suggestion: str

class MendedCall(TypedDict, total=False):
    tool: str
    arguments: dict[str, Any] | None
    fixes: list[Fix]
    issues: list[Issue]
    outcome: Literal["valid", "repaired", "feedback"]
    lossy: bool
    feedback: str
    error: str

class PlannedCall(TypedDict, total=False):
    index: int
    id: str | None
    original_id: str | None
    source: Literal["tool_calls", "text", "glued"]
    split: bool
    tool: str
    outcome: Literal["executed", "feedback", "dropped"]
    mended: Literal["valid", "repaired", "feedback"]
    arguments: dict[str, Any] | None
    fixes: list[Fix]
    issues: list[Issue]
    correctable: bool
    note: str | None
    mend_us: float
    feedback: str

class MessagePlan(TypedDict, total=False):
    calls: list[PlannedCall]
    answered: list[tuple[int, str]]
    text_calls: list[tuple[str, str]]
    content: str | None
    message_fixes: list[Fix]
    changed: bool

class Toolbox:
    def __init__(
        self,
        tools: Sequence[dict[str, Any]],
        *,
        coerce: bool | dict[str, bool] | None = None,
        strip_thinking: bool = True,
        calls_in_text: bool = True,
        accept_truncated: bool | Sequence[str] | None = None,
        correct_missing_fields: bool = False,
        tool_coerce: dict[str, bool | dict[str, bool]] | None = None,
    ) -> None: ...
    def plan_message(
        self,
        content: str | None,
        calls: Sequence[dict[str, Any]],
        *,
        position: int = 0,
        earlier_ids: Sequence[str] | None = None,
        answered_ids: Sequence[str] | None = None,
    ) -> MessagePlan | None: ...
    def names(self) -> list[str]: ...
    def mend(
        self,
        name: str,
        arguments: str | dict[str, Any],
        *,
        phase: Literal["initial", "correction", "salvage"] = "initial",
        accept_truncated: bool = False,
        read_fixes: list[dict[str, Any]] | None = None,
    ) -> list[MendedCall]: ...
    def passes(self, name: str, arguments: Any) -> bool: ...
    def validate(self, name: str, arguments: Any) -> list[Issue]: ...
    def calls_in_text(self, text: str) -> list[dict[str, Any]]: ...
    def correction_prompt(
        self,
        name: str,
        raw_arguments: str,
        issues: Sequence[Issue],
        messages: Sequence[dict[str, Any]],
        assistant_text: str | None = None,
        *,
        context_messages: int = 10,
        ask_for_json: bool = False,
    ) -> str: ...
    def check_answer(
        self,
        name: str,
        answer: str | dict[str, Any] | None,
        *,
        phase: Literal["initial", "correction", "salvage"] = "correction",
        first: dict[str, Any] | None = None,
    ) -> MendedCall | None: ...

def repair(text: str, *, strip_thinking: bool = True, strict: bool = False) -> dict[str, Any]: ...
def run_cli(args: Sequence[str]) -> int: ...
def strip_thinking(text: str) -> str | None: ...
def rename_reused(old: str) -> tuple[str, Fix]: ...
def replaced_fix(kind: Literal["arguments_corrected", "arguments_salvaged"], before: Any, raw: str, after: Any) -> Fix:
    """The core's record of arguments replaced whole: detail ``before -> after``."""
    ...
def correctable(
    issues: Sequence[Issue], fixes: Sequence[Fix], correct_missing_fields: bool = False
) -> bool: ...
def history_check(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]: ...
def history_sanitize(
    messages: Sequence[dict[str, Any]],
    *,
    orphans: Literal["drop", "rehome"] = "drop",
    missing_ids: Literal["mint", "remove"] = "mint",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]: ...
def history_trim(
    messages: Sequence[dict[str, Any]],
    *,
    max_messages: int | None = None,
    max_tokens: int | None = None,
    encoding: Literal["o200k_base", "cl100k_base", "bytes"] = "o200k_base",
    model: str | None = None,
) -> list[dict[str, Any]]: ...

class GuardDecision(TypedDict):
    rule: Literal[
        "session_window", "tool_window", "tool_global_window", "duplicate", "repeat",
        "ping_pong", "no_progress", "thread_limit", "run_limit", "store_unavailable", "custom",
    ]
    action: Literal["allow", "deny", "end", "error"]
    shadow: bool
    count: int
    limit: int
    window_ms: int | None
    retry_after_ms: int | None

class GuardVerdict(TypedDict):
    action: Literal["allow", "deny", "end", "error"]
    reason: str | None
    retry_after_ms: int | None
    decisions: list[GuardDecision]
    id_reused: bool

class Guard:
    """Flood control and loop detection: the ``[guard]`` rules over an in-memory store,
    or Redis with ``redis_url``."""

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        *,
        fail: Literal["open", "closed"] = "open",
        timeout_ms: float = 20.0,
        redis_url: str | None = None,
        **rules: Any,
    ) -> None: ...
    def declare_tool(self, name: str, rules: dict[str, Any]) -> None: ...
    def check(
        self,
        session: str | None,
        history: Sequence[dict[str, Any]] | None,
        calls: Sequence[dict[str, Any]],
    ) -> list[GuardVerdict]: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def store(self) -> str | None: ...
    def store_stats(self) -> dict[str, int | bool] | None: ...
    def wait_connected(self, timeout_s: float = 2.0) -> bool: ...

class ToolsLoadError(ToolmendError):
    """A tools file that cannot be loaded; the message names the file, line and tool."""

    origin: str
    line: int | None
    tool: str | None
    reason: str

class NetToolDefinition(TypedDict):
    name: str
    description: str
    parameters: dict[str, Any]
    kind: Literal["http", "mcp"]
    server_side: bool

class NetToolResult(TypedDict):
    status: Literal["success", "error"]
    content: str | list[dict[str, Any]] | None
    artifact: Any
    metadata: dict[str, Any] | None
    error: str | None
    error_kind: Literal["invalid_arguments", "failed", "timeout", "panicked"] | None

class NetTools:
    """The tools of a tools file (``[[tools]]``, ``[[mcp]]``), loaded on a runtime of
    their own; ``call`` blocks with the GIL released."""

    def __init__(
        self,
        source: str,
        *,
        text: bool = False,
        origin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None: ...
    @property
    def origin(self) -> str: ...
    def definitions(self) -> list[NetToolDefinition]: ...
    def problems(self) -> list[str]: ...
    def server_side(self, name: str) -> bool: ...
    def call(
        self, name: str, args: dict[str, Any] | None, call_id: str, trace_id: str | None = None
    ) -> NetToolResult: ...
    def close(self) -> None: ...
