"""`toolmend mcp-proxy -- COMMAND` between real MCP clients and real MCP servers (issue 30).

Clients: the official Python SDK (`mcp` 2.x: `Client` over `stdio_client`), the
Inspector's CLI (`mcp-inspector-cli --cli`), and raw JSON-RPC lines over a subprocess
pipe (for what no SDK lets a client send: arguments as a JSON string, broken JSON text,
a cancel mid-call, a 17 MiB line, invalid JSON, fifty pipelined requests).

Servers: the reference servers `mcp-server-everything` and `mcp-server-filesystem`
(TypeScript SDK), the Python SDK's own server (crates/toolmend-tools/tests/mcp_server.py:
add, echo, boom) and tests/mcp/tiny_server.py (raw, logs every line it reads: what the
server saw; a tool that exits the server mid-call; a 17 MiB answer).

Each behaviour is checked through the proxy and, where it differs, directly against the
same server: what the proxy mends succeeds through it and fails directly; what it passes
through is the same either way.

Environment: TOOLMEND_BIN (default <repo>/target/debug/toolmend: `cargo build -p
toolmend-cli`), TOOLMEND_MCP_DIR (default <repo>/.tools/mcp: scripts/mcp-env.sh installs
the npm packages there at pinned versions). A missing binary or package fails the tests;
it does not skip them.

Run: .venv/bin/python -m pytest tests/mcp -q -p no:cacheprovider
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pydantic
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOOLMEND = Path(os.environ.get("TOOLMEND_BIN", ROOT / "target/debug/toolmend"))
MCP_DIR = Path(os.environ.get("TOOLMEND_MCP_DIR", ROOT / ".tools/mcp"))
PY_SERVER = ROOT / "crates/toolmend-tools/tests/mcp_server.py"
TINY = HERE / "tiny_server.py"

META = "io.toolmend/mend"
TIMEOUT = 15.0
BIG = 17 << 20  # over the proxy's default --max-message-bytes (16 MiB)


# --- what the tests run -------------------------------------------------------------


def toolmend() -> str:
    if not (TOOLMEND.is_file() and os.access(TOOLMEND, os.X_OK)):
        pytest.fail(f"toolmend is missing: {TOOLMEND}; build it with `cargo build -p toolmend-cli` "
                    "or point TOOLMEND_BIN at one.", pytrace=False)
    return str(TOOLMEND)


def npm_bin(name: str) -> str:
    path = MCP_DIR / "node_modules/.bin" / name
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.fail(f"{name} is missing: {path}; install it with scripts/mcp-env.sh "
                    "or point TOOLMEND_MCP_DIR at a directory it installed.", pytrace=False)
    return str(path)


def proxied(server: list[str]) -> list[str]:
    return [toolmend(), "mcp-proxy", "--", *server]


def everything() -> list[str]:
    return [npm_bin("mcp-server-everything")]


def filesystem(root: Path) -> list[str]:
    return [npm_bin("mcp-server-filesystem"), str(root)]


def python_server() -> list[str]:
    if not PY_SERVER.is_file():
        pytest.fail(f"the Python SDK's test server is missing: {PY_SERVER}", pytrace=False)
    return [sys.executable, str(PY_SERVER), "stdio"]


def tiny(log: Path, *options: str) -> list[str]:
    return [sys.executable, str(TINY), str(log), *options]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- a raw JSON-RPC client over a pipe ----------------------------------------------


class Pipe:
    """A server (or the proxy) as a subprocess; lines in, lines out, nothing hidden."""

    def __init__(self, cmd: list[str]) -> None:
        self.cmd = cmd
        self.errors = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errors)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.seen: list[dict] = []  # messages read while waiting for another one
        self.ended = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def __enter__(self) -> Pipe:
        return self

    def __exit__(self, *_: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)

    def stderr(self) -> str:
        self.errors.seek(0)
        return self.errors.read().decode(errors="replace")[-4000:]

    def send(self, message: dict | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = TIMEOUT) -> bytes | None:
        """The next line (`None`: stdout ended)."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing came from {self.cmd} in {timeout} s; "
                                 f"its stderr:\n{self.stderr()}") from None
        if line is None:
            self.ended = True
        return line

    def response(self, id_: Any, timeout: float = TIMEOUT) -> dict:
        """The response to request `id_`; what comes before it is kept in `seen`."""
        for m in self.seen:
            if self._answers(m, id_):
                self.seen.remove(m)
                return m
        end = time.monotonic() + timeout
        while True:
            line = self.line(max(0.01, end - time.monotonic()))
            assert line is not None, f"{self.cmd} ended before answering {id_!r}:\n{self.stderr()}"
            m = json.loads(line)
            m["_raw"] = line
            if self._answers(m, id_):
                return m
            self.seen.append(m)

    @staticmethod
    def _answers(m: dict, id_: Any) -> bool:
        return "method" not in m and "id" in m and m["id"] == id_ and type(m["id"]) is type(id_)

    def request(self, id_: Any, method: str, params: dict | None = None) -> dict:
        message: dict = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(id_)

    def call(self, id_: Any, name: str, arguments: Any, meta: dict | None = None) -> dict:
        params: dict = {"name": name, "arguments": arguments}
        if meta is not None:
            params["_meta"] = meta
        return self.request(id_, "tools/call", params)

    def initialize(self, capabilities: dict | None = None) -> dict:
        r = self.request("init", "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": capabilities or {},
            "clientInfo": {"name": "toolmend-tests", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def quiet_for(self, seconds: float) -> list[dict]:
        """Every message that comes in the next `seconds`."""
        got, end = [], time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.ended = True
                break
            got.append(json.loads(line))
        return got

    def close(self, timeout: float = 10) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout)


def result_of(r: dict) -> dict:
    assert "result" in r, f"expected a result, got {r}"
    return r["result"]


def text_of(result: dict) -> str:
    return "\n".join(b.get("text", "") for b in result.get("content", []))


def failed(r: dict) -> bool:
    """The call failed: a JSON-RPC error or an isError result."""
    return "error" in r or r.get("result", {}).get("isError") is True


def without_record(result: dict) -> dict:
    """The result as the server sent it: the proxy's record taken out of `_meta`."""
    out = json.loads(json.dumps(result))
    meta = out.get("_meta", {})
    meta.pop(META, None)
    if "_meta" in out and not meta:
        del out["_meta"]
    return out


def check_record(result: dict, tool: str, kinds: list[str], outcome: str = "executed") -> dict:
    """`_meta["io.toolmend/mend"]`: the tool, the outcome, and a fix of each kind."""
    record = result.get("_meta", {}).get(META)
    assert record is not None, f"no {META} record in {result}"
    assert record["tool"] == tool, record
    assert record["outcome"] == outcome, record
    if outcome == "executed":
        assert record["mend"] == "repaired", record
    fixes = record.get("fixes", [])
    for f in fixes:
        assert f["kind"] and f["safety"] in ("safe", "unsafe", "lossy"), f
        if "path" in f:  # a field's fix says what changed; a text fix says where (offset)
            assert "detail" in f, f
    assert [k for k in kinds if k not in {f["kind"] for f in fixes}] == [], \
        f"fixes {[f['kind'] for f in fixes]} lack some of {kinds}"
    return record


# --- a Python SDK client ------------------------------------------------------------


@contextlib.asynccontextmanager
async def connect(cmd: list[str], mode: str = "auto", **callbacks: Any):
    """The Python SDK's `Client` over stdio (`auto`: it probes `server/discover`, then
    falls back to `initialize` on a handshake-era server), no response cache."""
    errlog = tempfile.TemporaryFile(mode="w+")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:])
    async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None,
                      read_timeout_seconds=TIMEOUT, **callbacks) as client:
        yield client


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# The only thing that differs run to run in what these servers send: server-everything's
# dynamic resources (and the prompt embedding one) say when they were made
# (`toLocaleTimeString()`, e.g. "12:37:00 AM"), in text and inside base64 blobs.
CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\s?[AP]M)?")


def normalised(v: Any) -> Any:
    if isinstance(v, str):
        return CLOCK.sub("<time>", v)
    if isinstance(v, list):
        return [normalised(x) for x in v]
    if isinstance(v, dict):
        out = {k: normalised(x) for k, x in v.items()}
        if isinstance(v.get("blob"), str):
            out["blob"] = "base64 of " + normalised(base64.b64decode(v["blob"]).decode())
        return out
    return v


async def survey(cmd: list[str], kind: str) -> dict:
    """Everything a client reads of a server, each answer or error as it came."""
    seen: dict[str, Any] = {}

    async def take(what: str, call: Any) -> None:
        try:
            seen[what] = dump(await call)
        except MCPError as e:
            seen[what] = {"error": e.code, "message": e.message}

    async with connect(cmd) as c:
        seen["initialize"] = dump(c.session.initialize_result)
        seen["protocol"] = c.protocol_version
        await take("tools", c.list_tools())
        await take("resources", c.list_resources())
        await take("templates", c.list_resource_templates())
        await take("prompts", c.list_prompts())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await take("ping", c.send_ping())
        if kind == "everything":
            for uri in ("demo://resource/static/document/architecture.md",
                        "demo://resource/dynamic/text/1", "demo://resource/dynamic/blob/2"):
                await take(f"read {uri}", c.read_resource(uri))
            await take("simple-prompt", c.get_prompt("simple-prompt"))
            await take("args-prompt", c.get_prompt("args-prompt", {"city": "Oslo", "state": "N"}))
            await take("resource-prompt", c.get_prompt(
                "resource-prompt", {"resourceType": "Text", "resourceId": "3"}))
            await take("complete prompt", c.complete(
                types.PromptReference(name="completable-prompt"),
                {"name": "department", "value": "S"}))
            await take("complete prompt in context", c.complete(
                types.PromptReference(name="completable-prompt"), {"name": "name", "value": ""},
                context_arguments={"department": "Sales"}))
            await take("complete template", c.complete(
                types.ResourceTemplateReference(uri="demo://resource/dynamic/text/{resourceId}"),
                {"name": "resourceId", "value": "4"}))
            await take("no such prompt", c.get_prompt("no-such-prompt"))
            # Calls that need no mending pass as sent, and their results as answered.
            await take("get-sum", c.call_tool("get-sum", {"a": 2, "b": 3}))
            await take("get-tiny-image", c.call_tool("get-tiny-image", {}))
            await take("get-structured-content",
                       c.call_tool("get-structured-content", {"location": "Chicago"}))
        else:
            await take("complete", c.complete(types.PromptReference(name="x"),
                                              {"name": "y", "value": ""}))
            await take("list_allowed_directories", c.call_tool("list_allowed_directories", {}))
            await take("list_directory", c.call_tool("list_directory", {"path": cmd[-1]}))
    return seen


# --- transparency -------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["everything", "filesystem"])
async def test_a_client_reads_the_same_server_through_the_proxy(kind, tmp_path):
    # The Python SDK's client, the same requests directly and through the proxy, side by
    # side: the handshake, every listing, reads, prompts, completions, ping, calls that
    # need no mending (and the errors of what the server lacks): the same answers.
    (tmp_path / "f.txt").write_text("x")
    server = everything() if kind == "everything" else filesystem(tmp_path)
    through_proxy = proxied(server)
    found: dict[str, dict] = {}

    async def run(name: str, cmd: list[str]) -> None:
        found[name] = await survey(cmd, kind)

    with anyio.fail_after(40):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "direct", server)
            tg.start_soon(run, "proxied", through_proxy)
    direct, through = normalised(found["direct"]), normalised(found["proxied"])
    # Not vacuous: the server answered what was asked.
    assert len(direct["tools"]["tools"]) >= 10
    if kind == "everything":
        assert direct["resources"]["resources"] and direct["prompts"]["prompts"]
        assert direct["complete prompt"]["completion"]["values"] == ["Sales", "Support"]
        assert direct["get-sum"]["content"][0]["text"] == "The sum of 2 and 3 is 5."
    else:
        assert direct["resources"]["error"] == -32601  # the server has none (its own error)
        assert "[FILE] f.txt" in direct["list_directory"]["content"][0]["text"]
    for what in direct:
        assert through[what] == direct[what], f"{kind}: {what} differs through the proxy"
    assert through.keys() == direct.keys()


def test_what_is_not_mended_passes_byte_for_byte():
    # Raw lines, the same session directly and through the proxy: every answer's bytes
    # are the server's (timestamps of dynamic resources aside), a call that needs no
    # mending included (no _meta added), and the notifications too.
    script: list[tuple[Any, str, dict | None]] = [
        (1, "tools/list", None),
        (2, "resources/list", None),
        (3, "resources/templates/list", None),
        (4, "prompts/list", None),
        ("r5", "resources/read", {"uri": "demo://resource/dynamic/text/7"}),
        (6, "prompts/get", {"name": "args-prompt", "arguments": {"city": "Oslo"}}),
        (7, "completion/complete", {"ref": {"type": "ref/prompt", "name": "completable-prompt"},
                                    "argument": {"name": "department", "value": "E"}}),
        (8, "ping", None),
        (9, "logging/setLevel", {"level": "error"}),
        (10, "tools/call", {"name": "echo", "arguments": {"message": "héllo \"x\"\n"}}),
        (11, "tools/call", {"name": "get-annotated-message",
                            "arguments": {"messageType": "success", "includeImage": True}}),
        (12, "no/such/method", {}),
        (13, "resources/read", {"uri": "demo://no/such/resource"}),
    ]

    def session(cmd: list[str]) -> tuple[dict, list]:
        answers: dict = {}
        with Pipe(cmd) as p:
            answers["init"] = p.initialize()["_raw"]
            for id_, method, params in script:
                answers[id_] = p.request(id_, method, params)["_raw"]
            notes = [{k: v for k, v in n.items() if k != "_raw"} for n in p.seen]
            notes += p.quiet_for(0.2)
            assert p.close() == 0
        return answers, sorted(json.dumps(n, sort_keys=True) for n in notes)

    direct, direct_notes = session(everything())
    through, through_notes = session(proxied(everything()))
    assert b'"Echo: h\\u00e9llo' in direct[10] or "Echo: héllo".encode() in direct[10]
    for id_ in direct:
        assert CLOCK.sub("<t>", through[id_].decode()) == CLOCK.sub("<t>", direct[id_].decode()), \
            f"answer {id_!r} differs through the proxy"
    assert META.encode() not in b"".join(through.values())
    assert through_notes == direct_notes
    assert any("notifications/tools/list_changed" in n for n in direct_notes)


@pytest.mark.anyio
async def test_the_python_sdk_server_reads_the_same_in_both_eras_and_is_mended_in_both():
    # The Python SDK's server: once over the 2026-07-28 revision (`server/discover`, every
    # request stamped in `_meta`, no initialize: the proxy's own tools/list goes out with
    # the stamps) and once with the initialize handshake. Listings and calls that need no
    # mending: the same through the proxy. A key in the wrong case (the SDK's server
    # coerces "5" to 5 itself, so a number as a string is no broken call for it): mended
    # through the proxy, an isError result directly.
    found: dict[tuple[str, str], Any] = {}

    async def run(mode: str, how: str, cmd: list[str]) -> None:
        async with connect(cmd, mode=mode) as c:
            found[mode, how] = {
                "protocol": c.protocol_version,
                "broken": dump(await c.call_tool("add", {"a": 5, "B": 3})),
                "tools": dump(await c.list_tools()),
                "add": dump(await c.call_tool("add", {"a": 20, "b": 22})),
                "echo": dump(await c.call_tool("echo", {"text": "same"})),
                "boom": dump(await c.call_tool("boom", {})),
            }

    server, through_proxy = python_server(), proxied(python_server())
    with anyio.fail_after(40):
        async with anyio.create_task_group() as tg:
            for mode in ("auto", "legacy"):
                tg.start_soon(run, mode, "direct", server)
                tg.start_soon(run, mode, "proxied", through_proxy)
    assert found["auto", "direct"]["protocol"] == "2026-07-28"
    assert found["legacy", "direct"]["protocol"] != "2026-07-28"
    for mode in ("auto", "legacy"):
        direct, through = found[mode, "direct"], found[mode, "proxied"]
        assert direct["add"]["structuredContent"] == {"result": 42}
        assert direct["boom"]["isError"] is True
        assert direct.pop("broken")["isError"] is True, mode
        broken = through.pop("broken")
        assert broken["isError"] is False and broken["structuredContent"] == {"result": 8}, mode
        check_record(broken, "add", ["key_case_fixed"])
        assert through == direct, mode


# --- mending ------------------------------------------------------------------------

# (id, tool, arguments as sent, the arguments meant, the fix kinds expected)
EVERYTHING_BROKEN: list[tuple[str, str, Any, dict, list[str]]] = [
    ("number-as-string", "get-sum", {"a": "5", "b": 3}, {"a": 5, "b": 3}, ["string_to_number"]),
    ("decimal-as-string", "get-sum", {"a": 2.5, "b": "0.25"}, {"a": 2.5, "b": 0.25},
     ["string_to_number"]),
    ("misnamed-key", "echo", {"mesage": "hi there"}, {"message": "hi there"},
     ["key_spelling_fixed"]),
    ("key-case", "get-sum", {"A": 1, "b": 2}, {"a": 1, "b": 2}, ["key_case_fixed"]),
    ("enum-case", "get-annotated-message", {"messageType": "ERROR"}, {"messageType": "error"},
     ["enum_case_fixed"]),
    ("enum-case-structured", "get-structured-content", {"location": "los angeles"},
     {"location": "Los Angeles"}, ["enum_case_fixed"]),
    ("number-for-string", "echo", {"message": 5}, {"message": "5"}, ["scalar_to_string"]),
    # The arguments as JSON text where the object belongs: decoded (and recorded so).
    ("object-as-string", "get-sum", '{"a": 5, "b": 3}', {"a": 5, "b": 3},
     ["double_encoded_decoded"]),
    ("string-args-with-a-fix", "get-sum", '{"a": "7", "b": 3}', {"a": 7, "b": 3},
     ["double_encoded_decoded", "string_to_number"]),
    # Broken JSON text: repaired.
    ("single-quoted-text", "get-sum", "{'a': 1, 'b': 41}", {"a": 1, "b": 41},
     ["double_encoded_decoded", "single_quotes"]),
    ("unquoted-keys", "get-sum", "{a: 4, b: 5}", {"a": 4, "b": 5},
     ["double_encoded_decoded", "unquoted_key"]),
    ("unclosed-text", "get-sum", '{"a": 10, "b": 20', {"a": 10, "b": 20},
     ["double_encoded_decoded", "closing_braces_added"]),
]


def test_broken_calls_succeed_through_the_proxy_and_fail_directly():
    # Raw JSON-RPC (arguments as a JSON string or broken JSON text: no SDK sends those).
    # Through the proxy each call succeeds with the answer the meant arguments get from the
    # server directly, and says what was fixed; sent directly as they are, each one fails.
    with Pipe(proxied(everything())) as through, Pipe(everything()) as direct:
        through.initialize()
        direct.initialize()
        for id_, tool, sent, meant, kinds in EVERYTHING_BROKEN:
            r = result_of(through.call(id_, tool, sent))
            assert r.get("isError") is not True, (id_, r)
            check_record(r, tool, kinds)
            assert without_record(r) == result_of(direct.call(id_ + "/meant", tool, meant)), id_
            assert failed(direct.call(id_ + "/as-sent", tool, sent)), f"{id_}: works directly"
        # A misspelled tool name: the tool meant.
        r = result_of(through.call("tool-name", "Echo", {"message": "m"}))
        record = check_record(r, "echo", ["tool_name_fixed"])
        assert text_of(r) == "Echo: m" and record["tool"] == "echo"
        assert failed(direct.call("tool-name", "Echo", {"message": "m"}))
        assert through.close() == 0


@pytest.mark.anyio
async def test_the_python_client_s_broken_calls_are_mended():
    # The Python SDK's client sends the arguments object as given: wrong types, a key's
    # case, an enum's case. Through the proxy: the right result and the record; directly:
    # an isError result.
    with anyio.fail_after(40):
        async with connect(proxied(everything())) as through, connect(everything()) as direct:
            r = await through.call_tool("get-sum", {"a": "40", "b": "2.5"})
            assert not r.is_error and r.content[0].text == "The sum of 40 and 2.5 is 42.5."
            record = check_record(dump(r), "get-sum", ["string_to_number"])
            assert {f["path"] for f in record["fixes"]} == {"/a", "/b"}
            assert (await direct.call_tool("get-sum", {"a": "40", "b": "2.5"})).is_error
            r = await through.call_tool("get-annotated-message", {"MessageType": "Debug"})
            assert not r.is_error and "Debug" in r.content[0].text
            check_record(dump(r), "get-annotated-message", ["key_case_fixed", "enum_case_fixed"])
            assert (await direct.call_tool("get-annotated-message",
                                           {"MessageType": "Debug"})).is_error


def test_filesystem_writes_exactly_what_was_meant(tmp_path):
    # server-filesystem in a temporary directory: broken writes, reads and listings through
    # the proxy do what was meant, and the files on disk hold exactly the intended text;
    # the same calls sent directly fail and write nothing.
    root_p, root_d = tmp_path / "proxied", tmp_path / "direct"
    root_p.mkdir()
    root_d.mkdir()
    tricky = 'it\'s "quoted"\nsecond line ü ✓\n\ttab\\backslash'

    def calls(root: Path) -> list[tuple[str, str, Any, list[str]]]:
        a, b, c = (str(root / n) for n in ("a.txt", "b.txt", "c.txt"))
        return [
            ("w-renamed", "write_file", {"path": a, "contents": tricky}, ["key_renamed"]),
            ("w-case", "write_file", {"Path": b, "content": "B\n"}, ["key_case_fixed"]),
            # The arguments as Python-literal text, as a model writes them.
            ("w-text", "write_file", "{'path': %s, 'content': %s}" % (
                json.dumps(c), json.dumps("single 'q' and \"dq\"\n")), ["single_quotes"]),
            ("r-head", "read_text_file", {"path": a, "head": "1"}, ["string_to_number"]),
            ("r-many", "read_multiple_files", {"paths": a}, ["wrapped_in_array"]),
            ("ls-sizes", "list_directory_with_sizes", {"path": str(root), "sortBy": "NAME"},
             ["enum_case_fixed"]),
            ("ls-case", "list_directory", {"PATH": str(root)}, ["key_case_fixed"]),
        ]

    with Pipe(proxied(filesystem(root_p))) as through:
        through.initialize()
        through.request("list", "tools/list")  # the client's own listing: what is mended against
        got = {}
        for id_, tool, args, kinds in calls(root_p):
            r = result_of(through.call(id_, tool, args))
            assert r.get("isError") is not True, (id_, r)
            check_record(r, tool, kinds)
            got[id_] = text_of(r)
        assert through.close() == 0
    assert (root_p / "a.txt").read_text() == tricky
    assert (root_p / "b.txt").read_text() == "B\n"
    assert (root_p / "c.txt").read_text() == "single 'q' and \"dq\"\n"
    assert got["r-head"] == "it's \"quoted\""
    assert tricky in got["r-many"]
    assert got["ls-sizes"].startswith("[FILE] a.txt") and "Total: 3 files" in got["ls-sizes"]
    assert got["ls-case"] == "[FILE] a.txt\n[FILE] b.txt\n[FILE] c.txt"

    (root_d / "a.txt").write_text(tricky)  # so that the reads have a file to fail on
    with Pipe(filesystem(root_d)) as direct:
        direct.initialize()
        for id_, tool, args, _ in calls(root_d):
            assert failed(direct.call(id_, tool, args)), f"{id_} works directly"
    assert sorted(p.name for p in root_d.iterdir()) == ["a.txt"]


# --- refusal ------------------------------------------------------------------------


def test_a_call_that_cannot_be_mended_is_answered_by_the_proxy(tmp_path):
    # A missing required field, a value of the wrong type that reads as nothing else, an
    # unknown tool, cut-off arguments: answered by the proxy (isError, feedback naming the
    # field, the record), never seen by the server, which logs every line it reads. A
    # mended call reaches it with exactly the mended arguments.
    log = tmp_path / "server.log"
    with Pipe(proxied(tiny(log))) as p:
        p.initialize()
        refused = {
            "missing": ({"a": 1}, ["b", "required"], "missing_required"),
            "wrong-type": ({"a": "five", "b": 1}, ["a", "expected integer"], "wrong_type"),
            "cut-off": ('{"a": 1, "b', ["cut off", "b"], None),
        }
        for id_, (args, words, issue) in refused.items():
            r = result_of(p.call(id_, "add", args))
            assert r["isError"] is True, r
            text = text_of(r)
            assert all(w in text for w in words), text
            record = r["_meta"][META]
            assert record["outcome"] == "feedback" and record["tool"] == "add", record
            if issue:
                assert issue in {i["kind"] for i in record["issues"]}, record
        r = result_of(p.call("unknown", "subtract", {"a": 1, "b": 2}))
        assert r["isError"] is True and "No tool named subtract" in text_of(r), r
        assert "add" in text_of(r)  # the tools it could have been
        r = result_of(p.call("mended", "add", {"a": "1", "b": 2}))
        assert text_of(r) == "3", r
        assert p.request("last", "ping")["result"] == {}  # the log holds all before it
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [m for m in seen if m.get("method") == "tools/call"]
    assert [(m["id"], m["params"]["arguments"]) for m in calls] == [("mended", {"a": 1, "b": 2})]
    # The proxy listed the tools itself (the client never did), with an id of its own.
    lists = [m for m in seen if m.get("method") == "tools/list"]
    assert len(lists) == 1 and str(lists[0]["id"]).startswith("io.toolmend/")


@pytest.mark.anyio
async def test_refusals_reach_the_python_client_with_feedback(tmp_path):
    # Through the Python SDK's client: server-everything's get-sum without "b", and
    # server-filesystem's write_file without "content" (no file appears).
    target = tmp_path / "never.txt"
    with anyio.fail_after(30):
        async with connect(proxied(everything())) as c:
            r = await c.call_tool("get-sum", {"a": 1})
            assert r.is_error and "- b: required, missing" in r.content[0].text
            record = dump(r)["_meta"][META]
            assert record["outcome"] == "feedback"
            assert record["issues"][0]["kind"] == "missing_required"
            assert record["issues"][0]["path"] == "/b"
        async with connect(proxied(filesystem(tmp_path))) as c:
            r = await c.call_tool("write_file", {"path": str(target)})
            assert r.is_error and '"content"' in r.content[0].text, r
            assert dump(r)["_meta"][META]["tool"] == "write_file"
    assert not target.exists()


@pytest.mark.anyio
async def test_a_refusal_reads_as_a_result_on_a_2026_07_28_connection():
    got: Any = None
    with anyio.fail_after(30):
        async with connect(proxied(python_server()), mode="auto") as c:
            assert c.protocol_version == "2026-07-28"
            try:
                got = await c.call_tool("add", {"a": 2})
            except pydantic.ValidationError as e:  # asserted outside the client's task group
                got = e
    assert isinstance(got, types.CallToolResult), f"the client could not read the answer: {got}"
    assert got.is_error and "- b: required, missing" in got.content[0].text


# --- progress and cancellation ------------------------------------------------------


def test_progress_reaches_the_client_with_each_call_s_token():
    # Two long-running calls at once (one mended, one not), each with its own progress
    # token: each token's notifications arrive, in order, and each call ends.
    with Pipe(proxied(everything())) as p:
        p.initialize()
        p.send({"jsonrpc": "2.0", "id": "long-a", "method": "tools/call", "params": {
            "name": "trigger-long-running-operation", "arguments": {"duration": "0.6", "steps": 3},
            "_meta": {"progressToken": "tok-a"}}})
        p.send({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {
            "name": "trigger-long-running-operation", "arguments": {"duration": 0.4, "steps": 2},
            "_meta": {"progressToken": 4242}}})
        a, b = p.response("long-a"), p.response(77)
        notes = p.seen + p.quiet_for(0.1)
        assert p.close() == 0
    progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
    assert [(x["progress"], x["total"]) for x in progress if x["progressToken"] == "tok-a"] == \
        [(1, 3), (2, 3), (3, 3)]
    assert [(x["progress"], x["total"]) for x in progress if x["progressToken"] == 4242] == \
        [(1, 2), (2, 2)]
    assert len(progress) == 5
    assert "Duration: 0.6 seconds, Steps: 3." in text_of(result_of(a))
    check_record(result_of(a), "trigger-long-running-operation", ["string_to_number"])
    assert META not in result_of(b).get("_meta", {})


@pytest.mark.anyio
async def test_progress_reaches_the_python_client():
    seen: list[tuple[float, float | None]] = []

    async def progress(p: float, total: float | None, message: str | None) -> None:
        seen.append((p, total))

    with anyio.fail_after(20):
        async with connect(proxied(everything())) as c:
            r = await c.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": "3"},
                                  progress_callback=progress)
    assert not r.is_error and "Steps: 3." in r.content[0].text
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_a_cancel_reaches_the_server_and_the_proxy_keeps_serving():
    # Two identical long calls; one is cancelled after its first progress. The server
    # (TypeScript SDK) then never answers it, while the other one's answer comes: the
    # cancel reached it. The proxy goes on serving.
    with Pipe(proxied(everything())) as p:
        p.initialize()
        for id_, token in (("doomed", "t-doomed"), ("kept", "t-kept")):
            p.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {
                "name": "trigger-long-running-operation",
                "arguments": {"duration": 1.2, "steps": "3"}, "_meta": {"progressToken": token}}})
        while not any(n.get("params", {}).get("progressToken") == "t-doomed" for n in p.seen):
            m = json.loads(p.line() or b"null")
            assert m is not None and "result" not in m and "error" not in m, m
            p.seen.append(m)
        p.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "doomed", "reason": "the user changed their mind"}})
        assert "Steps: 3." in text_of(result_of(p.response("kept")))
        late = p.quiet_for(0.6)
        assert [m for m in p.seen + late if m.get("id") == "doomed"] == []
        assert p.request("after", "ping")["result"] == {}
        assert p.close() == 0


def test_cancels_reach_the_server_or_drop_a_call_that_never_left(tmp_path):
    # The logging server: a cancel of a call the server has is forwarded as sent; a call
    # that still waits for the proxy's own tool listing (the server lists slowly) and is
    # cancelled never reaches the server, and neither does its cancel.
    log = tmp_path / "server.log"
    with Pipe(proxied(tiny(log, "--list-delay", "0.8"))) as p:
        p.initialize()
        p.send({"jsonrpc": "2.0", "id": "never", "method": "tools/call",  # waits for the list
                "params": {"name": "slow", "arguments": {"seconds": 0.1}}})
        p.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "never"}})
        # A call after it waits for the same list: once it is answered, the list came.
        assert text_of(result_of(p.call("sync", "add", {"a": 1, "b": 1}))) == "2"
        p.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": "0.5"}}})
        time.sleep(0.1)
        p.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 5, "reason": "r"}})
        after = p.quiet_for(0.8)
        assert p.request("sync2", "ping")["result"] == {}
        assert [m for m in p.seen + after if m.get("id") in ("never", 5)] == []
        assert p.close() == 0
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [m for m in seen if m.get("method") == "tools/call"]
    assert [(m["id"], m["params"]["arguments"]) for m in calls] == \
        [("sync", {"a": 1, "b": 1}), (5, {"seconds": 0.5})]
    cancels = [m["params"] for m in seen if m.get("method") == "notifications/cancelled"]
    assert cancels == [{"requestId": 5, "reason": "r"}]


# --- server-to-client requests ------------------------------------------------------


@pytest.mark.anyio
async def test_sampling_elicitation_and_roots_go_through_to_the_client(tmp_path):
    # server-everything asks the client (sampling/createMessage, elicitation/create,
    # roots/list) in the middle of a call; through the proxy the client's callbacks
    # answer, and the call's result carries their answers.
    asked: dict[str, Any] = {}

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams):
        asked["sampling"] = params
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text="sampled ok"))

    async def elicitation(ctx: Any, params: types.ElicitRequestParams):
        asked["elicitation"] = params
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async def roots(ctx: Any):
        asked["roots"] = True
        return types.ListRootsResult(roots=[types.Root(uri=tmp_path.as_uri(), name="the tmp")])

    with anyio.fail_after(30):
        async with connect(proxied(everything()), sampling_callback=sampling,
                           elicitation_callback=elicitation, list_roots_callback=roots) as c:
            r = await c.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": "7"})
            assert not r.is_error and "sampled ok" in r.content[0].text, r
            check_record(dump(r), "trigger-sampling-request", ["string_to_number"])
            # The mended argument is what the server put in its request to the client.
            assert asked["sampling"].max_tokens == 7
            assert "context: hi" in asked["sampling"].messages[0].content.text
            r = await c.call_tool("trigger-elicitation-request", {})
            assert not r.is_error and "- Name: Ada" in r.content[1].text, r
            assert "name" in asked["elicitation"].requested_schema["properties"]
            r = await c.call_tool("get-roots-list", {})
            assert not r.is_error and tmp_path.as_uri() in r.content[0].text, r
            assert asked["roots"]


# --- the Inspector's CLI ------------------------------------------------------------


def test_the_inspector_cli_lists_the_same_and_its_broken_calls_are_mended():
    cli = npm_bin("mcp-inspector-cli")
    server = npm_bin("mcp-server-everything")
    # The Inspector's launcher and its CLI each take the first `--` for themselves (the
    # proxy needs one before the server's command): three reach it as one. Its CLI finds
    # its own package.json relative to the working directory: run it in its build dir.
    cwd = MCP_DIR / "node_modules/@modelcontextprotocol/inspector-cli/build"

    def direct(*method: str) -> list[str]:
        return [cli, "--cli", server, *method]

    def through(*method: str) -> list[str]:
        return [cli, "--cli", toolmend(), "mcp-proxy", *method, "--", "--", "--", server]

    # The Inspector converts a string to the schema's type itself, but sends a number as
    # a number (echo's message) and an enum as typed.
    runs = {
        "list-direct": direct("--method", "tools/list"),
        "list-through": through("--method", "tools/list"),
        "echo-direct": direct("--method", "tools/call", "--tool-name", "echo",
                              "--tool-arg", "message=5"),
        "echo-through": through("--method", "tools/call", "--tool-name", "echo",
                                "--tool-arg", "message=5"),
        "enum-through": through("--method", "tools/call", "--tool-name",
                                "get-annotated-message", "--tool-arg", "messageType=SUCCESS"),
    }
    procs = {k: subprocess.Popen(v, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for k, v in runs.items()}
    out = {}
    for k, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=40)
        assert proc.returncode == 0, f"{k}: {stderr.decode()[-2000:]}"
        out[k] = json.loads(stdout)
    assert len(out["list-direct"]["tools"]) >= 10
    assert out["list-through"] == out["list-direct"]
    assert out["echo-direct"]["isError"] is True
    assert text_of(out["echo-through"]) == "Echo: 5"
    check_record(out["echo-through"], "echo", ["scalar_to_string"])
    assert text_of(out["enum-through"]) == "Operation completed successfully"
    check_record(out["enum-through"], "get-annotated-message", ["enum_case_fixed"])


# --- faults -------------------------------------------------------------------------


def test_oversized_and_invalid_lines_are_answered_and_the_proxy_keeps_serving(tmp_path):
    with Pipe(proxied(everything())) as p:
        p.initialize()
        # A 17 MiB request (its id first, then its id last): an error, not forwarded.
        p.send({"jsonrpc": "2.0", "id": "big", "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": "x" * BIG}}})
        r = p.response("big")
        assert r["error"]["code"] == -32600 and "over toolmend mcp-proxy's limit" in \
            r["error"]["message"], r
        p.send(('{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":'
                '{"message":"' + "y" * BIG + '"}},"id":"tail"}').encode())
        assert p.response("tail")["error"]["code"] == -32600
        assert p.request(1, "ping")["result"] == {}
        # Invalid JSON: -32700 (id null); not a JSON-RPC message: -32600.
        p.send(b'{"jsonrpc":"2.0","id":2,"method":"ping"')
        r = json.loads(p.line() or b"null")
        assert r["id"] is None and r["error"]["code"] == -32700, r
        p.send(b"[1, 2")
        assert json.loads(p.line() or b"null")["error"]["code"] == -32700
        p.send(b"42")
        assert json.loads(p.line() or b"null")["error"]["code"] == -32600
        r = p.call(3, "echo", {"message": "still here"})
        assert text_of(result_of(r)) == "Echo: still here"
        assert p.close() == 0
    # An answer over the limit (from the logging server): its request gets -32603.
    with Pipe(proxied(tiny(tmp_path / "log"))) as p:
        p.initialize()
        r = p.call("huge", "huge", {"bytes": BIG})
        assert r["error"]["code"] == -32603 and "over toolmend mcp-proxy's limit" in \
            r["error"]["message"], r
        assert text_of(result_of(p.call("next", "add", {"a": 1, "b": 1}))) == "2"
        assert p.close() == 0


def dying_session(log: Path) -> Pipe:
    """The logging server through the proxy, two calls pending, then the server exits
    (status 3) mid-call."""
    p = Pipe(proxied(tiny(log)))
    p.initialize()
    p.request("list", "tools/list")
    p.send({"jsonrpc": "2.0", "id": "pending", "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 30}}})
    p.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "die", "arguments": {}}})
    return p


def test_a_server_that_dies_mid_call_leaves_no_call_waiting(tmp_path):
    # Each call the server had gets a JSON-RPC error (-32000) naming its exit status.
    with dying_session(tmp_path / "log") as p:
        for id_ in ("pending", 9):
            r = p.response(id_, timeout=10)
            assert r["error"]["code"] == -32000, r
            assert "exited with status 3" in r["error"]["message"], r


def test_a_server_that_dies_mid_call_ends_the_proxy(tmp_path):
    with dying_session(tmp_path / "log") as p:
        p.response(9, timeout=10)
        p.response("pending", timeout=10)
        assert p.line(timeout=2) is None, "the proxy's stdout is still open"
        assert p.proc.wait(2) == 3  # the server's status


# --- one answer per request ---------------------------------------------------------


def test_fifty_pipelined_requests_get_one_answer_each():
    # One write of 50 mixed requests, right after the handshake, before any tools/list of
    # the client's: calls wait while the proxy lists the tools itself (and again after
    # the server's list_changed), the rest passes. Every request gets exactly one answer,
    # the invalid lines one error each, notifications none, and no answer to the proxy's
    # own requests leaks out.
    reqs: list[dict] = []
    expect: dict[Any, Any] = {}

    def add(id_: Any, method: str, params: dict | None = None, check: Any = None) -> None:
        m: dict = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            m["params"] = params
        reqs.append(m)
        expect[id_] = check

    def call(id_: Any, name: str, arguments: Any, check: Any) -> None:
        add(id_, "tools/call", {"name": name, "arguments": arguments}, check)

    def summed(a: Any, b: Any, mended: bool) -> Any:
        def check(r: dict) -> None:
            res = result_of(r)
            assert text_of(res) == f"The sum of {a} and {b} is {a + b}.", r
            assert (META in res.get("_meta", {})) == mended, r
        return check

    def refused(r: dict) -> None:
        assert result_of(r)["isError"] is True and META in r["result"]["_meta"], r

    def ok(r: dict) -> None:
        assert "result" in r, r

    for i in range(10):
        call(f"sum-{i}", "get-sum", {"a": str(i), "b": i}, summed(i, i, True))
        add(100 + i, "ping", None, ok)
        call(f"ok-{i}", "get-sum", {"a": i, "b": 1}, summed(i, 1, False))
        call(200 + i, "get-sum", {"a": i}, refused)
        add(f"misc-{i}", ["resources/list", "prompts/list", "resources/templates/list",
                          "tools/list", "completion/complete"][i % 5],
            {"ref": {"type": "ref/prompt", "name": "completable-prompt"},
             "argument": {"name": "department", "value": ""}} if i % 5 == 4 else None, ok)
    assert len(reqs) == 50
    lines = [json.dumps(m) for m in reqs]
    lines[7:7] = ['{"jsonrpc": "2.0", "id": "broken", "method": "ping"']  # invalid JSON
    lines[30:30] = [json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": "nobody"}})]
    lines[40:40] = ["not json at all"]
    with Pipe(proxied(everything())) as p:
        p.initialize()
        p.send("\n".join(lines).encode())
        answers: dict[str, list[dict]] = {}
        nulls = 0
        deadline = time.monotonic() + 20
        while len(answers) < len(expect) and time.monotonic() < deadline:
            m = json.loads(p.line(timeout=max(0.01, deadline - time.monotonic())) or b"null")
            assert m is not None, "the proxy ended"
            if "method" in m:
                continue
            if m.get("id") is None:
                nulls += 1
            else:
                answers.setdefault(json.dumps(m["id"]), []).append(m)
        for m in p.quiet_for(0.5):  # anything more is one answer too many
            if "method" not in m:
                if m.get("id") is None:
                    nulls += 1
                else:
                    answers.setdefault(json.dumps(m["id"]), []).append(m)
        assert p.close() == 0
    assert sorted(answers) == sorted(json.dumps(i) for i in expect), \
        "answered ids differ from the requests' ids"
    assert {k: len(v) for k, v in answers.items() if len(v) != 1} == {}
    assert nulls == 2  # one -32700 per invalid line
    for id_, check in expect.items():
        check(answers[json.dumps(id_)][0])
