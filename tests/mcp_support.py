"""MCP servers for the tests: the demo server of `tests/mcp_servers/demo.py` over stdio, or
over HTTP on 127.0.0.1, and the `mcpServers` entries a client would send for them."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEMO = Path(__file__).parent / "mcp_servers" / "demo.py"


def stdio_server(name: str = "demo", env: dict[str, str] | None = None) -> dict[str, Any]:
    """The ACP `McpServerStdio` entry that starts the demo server."""
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(DEMO), "stdio"],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }


def http_server(
    name: str, url: str, headers: dict[str, str], transport: str = "http"
) -> dict[str, Any]:
    """The ACP `McpServerHttp` (or, with transport "sse", `McpServerSse`) entry for `url`."""
    return {
        "type": transport,
        "name": name,
        "url": url,
        "headers": [{"name": k, "value": v} for k, v in headers.items()],
    }


@contextlib.contextmanager
def http_demo(token: str, transport: str = "http") -> Iterator[str]:
    """The demo server over HTTP (streamable, or "sse") for as long as the block runs; yields
    its MCP URL. It answers only requests that carry `Authorization: Bearer <token>`."""
    process = subprocess.Popen(
        [sys.executable, str(DEMO), transport, token],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until it listens (or exits: empty line)
        assert line.startswith("port "), f"the HTTP demo server did not start: {line!r}"
        path = "/mcp" if transport == "http" else "/sse"
        yield f"http://127.0.0.1:{int(line.split()[1])}{path}"
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close() if process.stdout is not None else None
