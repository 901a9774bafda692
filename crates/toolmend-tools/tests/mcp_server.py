"""An MCP server of the official Python SDK (`mcp`, 2.x: `MCPServer`, FastMCP's new
name), the independent implementation `tests/it/mcp.rs` checks toolmend's client against.

Usage:
    python mcp_server.py stdio        serve on stdin/stdout
    python mcp_server.py http PORT    streamable HTTP on 127.0.0.1:PORT at /mcp; PORT 0
                                      picks a free port. Prints `PORT <n>` on stdout once
                                      it listens.

Tools: `add(a, b)` (structured: `{"result": a + b}`, with an outputSchema), `echo(text)`
(unstructured: one text block), `boom()` (raises: an `isError` result).
"""

import socket
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("toolmend-test-python", log_level="WARNING")


@server.tool(description="Adds two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Answers its text.", structured_output=False)
def echo(text: str) -> str:
    return text


@server.tool(description="Always fails.")
def boom() -> str:
    raise ToolError("boom: the tool failed on purpose")


def serve_http(port: int) -> None:
    import anyio
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def main() -> None:
    match sys.argv[1:]:
        case ["stdio"]:
            server.run("stdio")
        case ["http", port]:
            serve_http(int(port))
        case _:
            sys.exit(__doc__)


if __name__ == "__main__":
    main()
