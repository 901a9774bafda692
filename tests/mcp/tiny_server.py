"""A tiny MCP server over stdio, raw JSON-RPC (no SDK: it starts in milliseconds), that
writes every line it reads to a log, so a test can tell what reached the server through
`toolmend mcp-proxy` and what did not.

Usage: python tiny_server.py LOG [--list-delay SECONDS]

    LOG             every line read from stdin is appended to it, as it came
    --list-delay    answer tools/list this much later (calls wait for the list)

Tools:
    add(a: integer, b: integer)   the sum as text; strict: anything but two integers is an
                                  isError result (it never coerces, as a strict server)
    slow(seconds: number)         answers after `seconds`, unless notifications/cancelled
                                  names it first (then never)
    huge(bytes: integer)          a text block of `bytes` bytes
    die()                         exits with status 3 at once, answering nothing
"""

import json
import os
import sys
import threading

TOOLS = [
    {
        "name": "add",
        "description": "Adds two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
    {
        "name": "slow",
        "description": "Answers after a while.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
    },
    {
        "name": "huge",
        "description": "A large answer.",
        "inputSchema": {
            "type": "object",
            "properties": {"bytes": {"type": "integer"}},
            "required": ["bytes"],
        },
    },
    {"name": "die", "description": "The server exits.", "inputSchema": {"type": "object"}},
]

out_lock = threading.Lock()
cancelled: set[str] = set()


def send(message: dict) -> None:
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def result(id_, value: dict) -> None:
    send({"jsonrpc": "2.0", "id": id_, "result": value})


def text(id_, s: str, is_error: bool = False) -> None:
    r = {"content": [{"type": "text", "text": s}]}
    if is_error:
        r["isError"] = True
    result(id_, r)


def call(id_, params: dict) -> None:
    name, args = params.get("name"), params.get("arguments")
    if name == "add":
        ok = (isinstance(args, dict) and set(args) == {"a", "b"}
              and all(type(args[k]) is int for k in "ab"))
        if ok:
            text(id_, str(args["a"] + args["b"]))
        else:
            text(id_, f"add: invalid arguments {json.dumps(args)}", is_error=True)
    elif name == "slow":
        def later() -> None:
            if json.dumps(id_) not in cancelled:
                text(id_, "slept")
        timer = threading.Timer(float(args["seconds"]), later)
        timer.daemon = True
        timer.start()
    elif name == "huge":
        text(id_, "x" * int(args["bytes"]))
    elif name == "die":
        sys.stdout.flush()
        os._exit(3)
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})


def main() -> None:
    log_path = sys.argv[1]
    list_delay = float(sys.argv[3]) if sys.argv[2:3] == ["--list-delay"] else 0.0
    with open(log_path, "a", encoding="utf-8") as log:
        for line in sys.stdin:
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
            try:
                m = json.loads(line)
            except ValueError:
                continue
            method, id_ = m.get("method"), m.get("id")
            params = m.get("params") or {}
            if method == "initialize":
                result(id_, {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "tiny", "version": "1"},
                })
            elif method == "tools/list":
                if list_delay:
                    timer = threading.Timer(list_delay, result, (id_, {"tools": TOOLS}))
                    timer.daemon = True
                    timer.start()
                else:
                    result(id_, {"tools": TOOLS})
            elif method == "tools/call":
                call(id_, params)
            elif method == "ping":
                result(id_, {})
            elif method == "notifications/cancelled":
                cancelled.add(json.dumps(params.get("requestId")))
            elif id_ is not None and method is not None:
                send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
