"""A live session's MCP servers connected when it goes live on a connection (SPEC 4.5): in the
registry's services, bounded by `--mcp-connect-timeout`, each that could not be named with why.
The MCP SDK is imported only for a session that has servers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..agent.mcp_config import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
from .live import LiveSession, close_mcp

if TYPE_CHECKING:
    from .config import ServeConfig
    from .sessions import SessionRegistry


async def connect_mcp(
    sessions: SessionRegistry, session: LiveSession, config: ServeConfig | None
) -> list[tuple[str, str]]:
    """Connect the session's MCP servers (SPEC 4.5), unless they are connected already;
    (name, why) for each that could not be. Bounded by `--mcp-connect-timeout`."""
    wanted = session.mcp_servers
    if session.mcp is not None and session.mcp.configs == wanted:
        return []  # a resume or load of a session live here, with the same servers
    await close_mcp(session)
    if not wanted:
        return []
    services = sessions.services
    if services is None:  # a registry not run by `serve` (tests): nowhere to run them
        return [(server.name, "MCP servers are not connected here") for server in wanted]
    from ..agent.tools.mcp import McpServers  # the SDK: only for sessions that have servers

    servers = McpServers(
        wanted,
        cwd=session.cwd,
        connect_timeout=config.mcp_connect_timeout if config else DEFAULT_CONNECT_TIMEOUT,
        call_timeout=config.mcp_timeout if config else DEFAULT_CALL_TIMEOUT,
    )
    await services.start(servers.run)
    session.mcp = servers
    if sessions.live.get(session.id) is not session:
        await close_mcp(session)  # closed or deleted meanwhile: nothing may keep them open
    return servers.failures
