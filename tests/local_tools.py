"""Calling a built-in tool as the server does when the client offers nothing: every file and
command is handled locally, and the client is never asked anything (the tool is allowed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from acp_server.agent.ports import ClientCapabilities
from acp_server.agent.tools import BUILTIN_TOOLS, ToolContext, ToolOutcome, run_tool
from acp_server.server.turns import kept_from_tools


class NoClient:
    """A client that advertises nothing and is never asked anything."""

    capabilities = ClientCapabilities()

    async def request(self, method: str, params: Any) -> Any:
        raise AssertionError(f"unexpected client request {method}")

    async def notify(self, method: str, params: Any) -> None:
        raise AssertionError(f"unexpected client notification {method}")

    async def notify_all(self, method: str, params: Any) -> None:
        raise AssertionError(f"unexpected client notification {method}")


async def started(content: Any = None) -> None:
    pass


async def call_locally(cwd: Path, name: str, args: dict[str, Any]) -> ToolOutcome:
    """`name(args)` in a session whose cwd is `cwd`, allowed without asking, kept from what
    the server keeps its tools from."""
    ctx = ToolContext("sess-1", cwd, [], NoClient(), {name}, kept=kept_from_tools())
    return await run_tool(
        BUILTIN_TOOLS,
        ctx,
        "call-1",
        name,
        msgspec.json.encode(args).decode(),
        title=name,
        kind=BUILTIN_TOOLS.present(name, {}).kind,
        on_started=started,
    )
