"""A small MCP server written with the SDK's `MCPServer` (formerly FastMCP), for the tests.

    python tests/mcp_servers/demo.py stdio
    python tests/mcp_servers/demo.py http TOKEN
    python tests/mcp_servers/demo.py sse TOKEN

Over stdio it serves on its stdin and stdout. Over HTTP (streamable HTTP at `/mcp`, or the
older SSE transport at `/sse`) it listens on 127.0.0.1 on a free
port, prints `port <n>` on its stdout once it accepts connections, and answers 401 to any
request whose `Authorization` header is not `Bearer TOKEN`, so a working connection proves the
header reached it.

Its tools cover what a client of MCP meets: plain text, an answer of any size, every kind of
content, a tool error, a server that dies mid-call, a call that never ends, the server's
pid (so a test can check that the process is gone), and a question to the user (elicitation).
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    DeclinedElicitation,
    MCPServer,
)
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

server = MCPServer("demo")


@server.tool(description="Say the text back, prefixed with `echo: `.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Whether an environment variable is set (never its value).")
def env_set(name: str) -> str:
    return "set" if os.environ.get(name) else "unset"


@server.tool(description="The server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="`unit` repeated `count` times: an answer as large as asked.")
def repeat(unit: str, count: int) -> str:
    return unit * count


@server.tool(description="One content block of each kind.")
def kinds() -> list[Any]:
    return [
        types.TextContent(type="text", text="a text"),
        types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="file:///notes.txt", text="the notes", mime_type="text/plain"
            ),
        ),
        types.ResourceLink(type="resource_link", uri="file:///big.bin", name="big.bin"),
    ]


@server.tool(description="Always fails with `message`.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="Exits the server in the middle of the call.")
def die() -> str:
    os._exit(3)


@server.tool(description="Never answers.")
async def hang() -> str:
    await anyio.sleep_forever()
    return ""


class Name(BaseModel):
    name: str = Field(description="Your name")
    formal: bool = Field(default=False, description="Say it formally")


@server.tool(description="Asks the user their name (an elicitation), then greets them.")
async def greet(ctx: Context) -> str:
    answer = await ctx.elicit("What is your name?", Name)
    if isinstance(answer, AcceptedElicitation):
        greeting = "Good day" if answer.data.formal else "Hello"
        return f"{greeting}, {answer.data.name}!"
    return "declined" if isinstance(answer, DeclinedElicitation) else "cancelled"


def serve_http(token: str, transport: str) -> None:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

    app = server.streamable_http_app() if transport == "http" else server.sse_app()

    def guarded(inner: ASGIApp) -> ASGIApp:
        async def call(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b""})
                    return
            await inner(scope, receive, send)

        return call

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    # Listening already: connections wait in the backlog until uvicorn serves them.
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(guarded(app), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        serve_http(sys.argv[2], sys.argv[1])
