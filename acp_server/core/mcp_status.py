"""What `/mcp` answers (SPEC 4.5): each MCP server of a live session, its state and its tools,
as text, without I/O. The states are the connection's as the session holds it now.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from msgspec import Struct

McpState = Literal["connecting", "connected", "failed", "disconnected"]
"""`connecting` until the server answers its tool list or the connect timeout passes;
`failed` when it never connected (the reason says why); `disconnected` when a connection that
was made has ended since."""


class McpServerStatus(Struct, frozen=True):
    name: str
    transport: str
    state: McpState
    tools: tuple[str, ...] = ()
    """The server's tool names as it calls them (the model sees `mcp__<server>__<tool>`)."""
    reason: str | None = None
    """Why it failed or disconnected (secrets already taken out)."""


NO_MCP_SERVERS = "No MCP servers: the client configured none for this session."


def mcp_text(servers: Sequence[McpServerStatus]) -> str:
    """`/mcp`: one line per server, in the client's order."""
    if not servers:
        return NO_MCP_SERVERS
    lines = [f"MCP servers ({len(servers)}):"]
    for server in servers:
        line = f"- {server.name} ({server.transport}): {server.state}"
        if server.state == "connected":
            count = len(server.tools)
            line += (
                f"; {count} tool{'' if count == 1 else 's'}: {', '.join(server.tools)}"
                if count
                else "; no tools"
            )
        if server.reason is not None:
            line += f": {server.reason}"
        lines.append(line)
    return "\n".join(lines)
