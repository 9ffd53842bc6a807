"""A live session: one this process has open for writing (SPEC 2.5, 4), and the checks every
method makes of the session it addresses.

A `LiveSession` holds the store's `Writer` (and so the session's single-writer claim) from
`session/new`, `session/resume` or `session/load` until `session/close`, `session/delete` or the
end of the connection; a subagent's child session is live for the one turn it runs. The
registry that opens, closes and owns them all is `sessions`'. Here too: which connection may
drive a live session (`check_owner`), the refusal of a subagent's child addressed as a session
of its own (`check_not_child`), and closing a session's MCP connections (`close_mcp`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import anyio
from msgspec import UNSET, UnsetType

from ..agent.recorder import SessionRecorder
from ..core.event_log import EventLog
from ..core.events import SessionContextData, SessionTitleData
from ..core.header import SessionHeader
from ..core.modes import Settings
from ..core.prompt_render import InstructionText
from ..storage.api import Writer
from .errors import InvalidParams, SessionInUse

if TYPE_CHECKING:  # the loop (and its tools) is imported by the first prompt
    from ..agent.loop import Turn
    from ..agent.mcp_config import McpServerConfig
    from ..agent.tools.mcp import McpServers


class LiveSession:
    """A session open for writing in this process: its recorder (the log's writer and events),
    the prompt turn running in it, and what the client said for it (directories, MCP servers,
    tools allowed for the rest of the session).

    `cancel()` is what `session/cancel` and closing pull: it cancels the running prompt turn,
    which ends its model stream and any request it is waiting on the client for.

    Work that writes to the log (a prompt turn) runs inside `activity()`: closing the session
    cancels it and waits for it to end (`wait_idle`) before the writer is closed.
    """

    def __init__(
        self,
        header: SessionHeader,
        writer: Writer,
        log: EventLog,
        *,
        additional_directories: list[str],
        mcp_servers: list[McpServerConfig],
    ) -> None:
        self.header = header
        self.recorder = SessionRecorder(writer, log)
        """The session's log: its writer, its events so far (rows kept packed), its listeners."""
        self.turn: Turn | None = None
        """The prompt turn running now, if any: at most one at a time."""
        self.allowed_always: set[str] = set()
        """Tools the user allowed for the rest of the session (`allow_always`)."""
        self.parent_id: str | None = (
            header.parent_session if isinstance(header.parent_session, str) else None
        )
        self.additional_directories = additional_directories
        self.mcp_servers = mcp_servers
        """The MCP servers the client configured, secrets included (never written anywhere)."""
        self.mcp: McpServers | None = None
        """Their connections while the session is live, if it has any."""
        self.settings: Settings | None = None
        """Its mode, model and reasoning effort (SPEC 4.4), once folded from its log."""
        self.context: SessionContextData | UnsetType | None = UNSET
        """Its latest `session/context` (the client's system prompt), once folded from its
        log; None when it has none."""
        self.instructions: list[InstructionText] = []
        """The project instructions its system prompt holds, as last read (`refresh_context`)."""
        self.titling: anyio.CancelScope | None = None
        """The automatic title's model call running in the background, if one is
        (`server.titles`): the session's closing cancels it."""
        self.pending_title: SessionTitleData | None = None
        """An automatic title that arrived while a turn ran: written when that turn ends."""
        self.owner: object | None = None
        """The connection that opened it (its agent): the one its updates and client requests
        go to. Other connections of the process may page and follow it, not drive it."""
        self._active = 0
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def cwd(self) -> str:
        return self.header.cwd

    @property
    def writer(self) -> Writer:
        return self.recorder.writer

    @property
    def log(self) -> EventLog:
        return self.recorder.log

    def cancel(self) -> None:
        """Cancel the running prompt turn, if any (`session/cancel`, and closing the session)."""
        if self.turn is not None:
            self.turn.cancel()

    @contextlib.contextmanager
    def activity(self) -> Iterator[None]:
        """Mark work that writes to this session's log; `wait_idle` waits for it to end."""
        self._active += 1
        if self._active == 1:
            self._idle = anyio.Event()
        try:
            yield
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()


async def close_mcp(session: LiveSession) -> None:
    """Close the session's MCP connections, if it has any (their processes are gone after)."""
    servers, session.mcp = session.mcp, None
    if servers is not None:
        await servers.aclose()


def check_owner(session: LiveSession, owner: object | None) -> None:
    """`SessionInUse` when another connection than `owner` has the live `session` open."""
    if owner is not None and session.owner is not None and session.owner is not owner:
        raise SessionInUse(
            f"Session in use: session {session.id} is open on another connection; "
            "it can be paged and followed from here, not driven",
            {"reason": "open-elsewhere"},
        )


def check_not_child(header: SessionHeader) -> None:
    """The refusal of a subagent's child addressed as a session of its own, by any method."""
    if header.origin == "subagent":
        raise child_refused(header.id)


def child_refused(session_id: str) -> InvalidParams:
    """A subagent's child addressed as a session of its own (SPEC 3: refused as the history
    API refuses it): it is part of its parent's conversation, read through the parent."""
    return InvalidParams(
        f"Invalid params: session {session_id} is a subagent's child: it is read through its "
        'parent, with the history address {"kind": "subagent", "parentSessionId", '
        '"childSessionId"} - at `$.sessionId`',
        {"path": "$.sessionId", "check": "origin"},
    )
