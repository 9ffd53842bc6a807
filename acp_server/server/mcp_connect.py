"""A live session's MCP servers, connected in the background when it goes live on a connection
(SPEC 4.5), and what is said of those that could not be.

`connect_mcp` starts the connections in the registry's services and returns at once: the
`session/new` (load, resume, fork) answer never waits for a server. The servers settle when
each has connected or failed, or `--mcp-connect-timeout` has passed; every model call of the
session waits for that first (`McpServers.wait_settled`), so their tools are offered.

Each server that could not be connected is reported once. The moment the servers settle, a
`session/notice` event per failure is appended to the log (synchronously, so it can never land
among a step's chunks: no step streams before the servers have settled); once the session's
answer has gone out, `McpReport.settled` gives the failures to show the client. `mcp_statuses`
is what `/mcp` shows. The MCP SDK is imported only for a session that has servers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..agent.mcp_config import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
from ..core.events import SessionNotice, SessionNoticeData
from ..core.mcp_status import McpServerStatus
from ..storage.errors import LogWriteFailed
from .live import LiveSession, close_mcp

if TYPE_CHECKING:
    from ..agent.tools.mcp import McpServers
    from .config import ServeConfig
    from .sessions import SessionRegistry

log = logging.getLogger(__name__)

NOT_HERE = "MCP servers are not connected here"
"""Why a registry not run by `serve` (tests) has every server failed: nowhere to run them."""


class McpReport:
    """What a session going live has to say of its MCP servers once they have settled (a
    plain class: this module is imported before a server's first answer)."""

    def __init__(self) -> None:
        self.servers: McpServers | None = None
        """The connections started now; None when nothing was started (none configured,
        the same ones kept from before, or nowhere to run them)."""
        self.failures: list[tuple[str, str]] = []
        """(name, why) for each server that could not be connected, once they have settled."""

    async def settled(self) -> list[tuple[str, str]]:
        """The failures, once the servers have settled (at once when none were started)."""
        if self.servers is not None:
            await self.servers.wait_settled()
        return self.failures


async def connect_mcp(
    sessions: SessionRegistry, session: LiveSession, config: ServeConfig | None
) -> McpReport:
    """Start connecting the session's MCP servers (SPEC 4.5), unless they are connected
    already; returns at once."""
    wanted = session.mcp_servers
    report = McpReport()
    if session.mcp is not None and session.mcp.configs == wanted:
        return report  # a resume or load of a session live here, with the same servers
    await close_mcp(session)
    if not wanted:
        return report
    services = sessions.services
    if services is None:
        _failed(sessions, session, report, [(server.name, NOT_HERE) for server in wanted])
        return report
    from ..agent.tools.mcp import McpServers  # the SDK: only for sessions that have servers

    servers = McpServers(
        wanted,
        cwd=session.cwd,
        connect_timeout=config.mcp_connect_timeout if config else DEFAULT_CONNECT_TIMEOUT,
        call_timeout=config.mcp_timeout if config else DEFAULT_CALL_TIMEOUT,
        on_settled=lambda failures: _failed(sessions, session, report, failures),
    )
    await services.start(servers.run)  # started at once: the servers connect in the background
    session.mcp = report.servers = servers
    if sessions.live.get(session.id) is not session:
        await close_mcp(session)  # closed or deleted meanwhile: nothing may keep them open
    return report


def _failed(
    sessions: SessionRegistry,
    session: LiveSession,
    report: McpReport,
    failures: list[tuple[str, str]],
) -> None:
    """The servers have settled: keep the failures for the client and log each as a notice,
    while the session is live here and its log can take them."""
    report.failures = failures
    writer = session.writer
    if not failures or sessions.live.get(session.id) is not session:
        return
    if writer.closed or writer.failure is not None:
        return  # a read-only log: the notices are only shown
    try:
        for name, why in failures:
            session.recorder.append(SessionNotice, unavailable(name, why))
    except LogWriteFailed as exc:  # the next prompt reopens the log and says why
        log.info("session %s: its MCP notices were not written: %s", session.id, exc)


def unavailable(name: str, why: str) -> SessionNoticeData:
    """The notice of an MCP server that could not be connected."""
    return SessionNoticeData("warning", f"MCP server {name} is not available", why)


def mcp_statuses(session: LiveSession) -> list[McpServerStatus]:
    """Where each of the session's MCP servers is now (`/mcp`), in the client's order."""
    if session.mcp is not None:
        return session.mcp.statuses()
    return [
        McpServerStatus(server.name, server.transport, "failed", reason=NOT_HERE)
        for server in session.mcp_servers
    ]
