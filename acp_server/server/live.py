"""A live session: one this process has open for writing (SPEC 2.5, 4), and the checks every
method makes of the session it addresses.

A `LiveSession` holds the store's `Writer` (and so the session's single-writer claim) from
`session/new`, `session/resume` or `session/load` until `session/close`, `session/delete` or the
last client attached to it has gone while it is idle; a subagent's child session is live for
the one turn it runs. The registry that opens, closes and owns them all is `sessions`'. Any
number of connections may be attached to it (`attached`' `Attached`): each drives it and is
sent its updates. Here too: the refusal of a subagent's child addressed as a session of its
own (`check_not_child`), and closing a session's MCP connections (`close_mcp`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import anyio
from msgspec import UNSET, UnsetType

from ..agent.ports import ClientPort
from ..agent.recorder import SessionRecorder
from ..core.acp_updates import (
    SessionNotification,
    SessionUpdate,
    UserMessageChunk,
    UserMessageShown,
)
from ..core.event_log import EventLog
from ..core.events import (
    SessionContextData,
    SessionEvent,
    SessionTitleData,
    ToolCall,
    UserMessageEvent,
)
from ..core.header import SessionHeader
from ..core.modes import Settings
from ..core.prompt_queue import PromptQueue
from ..core.prompt_render import InstructionText
from ..storage.api import Writer
from .attached import Attached
from .errors import InvalidParams

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
        self.waiting_for_user = 0
        """How many of the running turn's requests wait for the user (a permission, an
        elicitation): while any does, its state is `requires_action`."""
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
        self.clients: dict[ClientPort, Attached] = {}
        """The connections attached to it (keyed by their port), in the order they came: each
        may drive it, and each is sent its updates."""
        self.attached = anyio.Event()
        """Set when a client attaches (then replaced): what a request waiting for a client
        waits on."""
        self.prompter: ClientPort | None = None
        """The client whose prompt holds the turn (its turn running or about to): its stream
        is the turn's own, the other attached clients get it mirrored (`mirror`)."""
        self.cancelled_early = False
        """A cancel came for the prompt holding the turn before its turn began: it begins
        cancelled (`begin`)."""
        self.queue: PromptQueue[Place] = PromptQueue()
        """The prompts waiting for the running turn to end (SPEC 4)."""
        self.rest: Callable[[], Awaitable[None]] | None = None
        """Reads into its log what a load for a tail left in the store (`log.base`), for what
        needs every event (`SessionRegistry.whole`); None until it is registered."""
        self.recorder.listeners.append(self._logged)
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
        """Cancel the running prompt turn, if any (`session/cancel`, and closing the session);
        a prompt holding the turn whose turn has not begun yet begins it cancelled."""
        if self.turn is not None:
            self.turn.cancel()
        elif self.prompter is not None:
            self.cancelled_early = True

    def begin(self, turn: Turn) -> None:
        """`turn` is the running turn from now; cancelled at once if a cancel came first."""
        self.turn = turn
        if self.cancelled_early:
            turn.cancel()

    def attach(self, client: ClientPort, link: Attached) -> None:
        """`client` is attached: it drives the session and is sent its updates from now on."""
        self.clients[client] = link
        self.attached.set()
        self.attached = anyio.Event()

    def detach(self, client: ClientPort | None) -> bool:
        """`client` is no longer attached; whether it was."""
        return client is not None and self.clients.pop(client, None) is not None

    @property
    def busy(self) -> bool:
        """Whether work keeps it live without a client: a prompt holding the turn (its turn
        running or about to) or prompts queued."""
        return (
            self.prompter is not None
            or self.turn is not None
            or len(self.queue) > 0
            or self._active > 0
        )

    def mirror(self, notes: Iterable[SessionNotification], source: ClientPort | None) -> None:
        """Send `notes` to every attached client but `source` (whose own stream has them)."""
        shown = list(notes)
        for client, link in list(self.clients.items()):
            if client is not source:
                link.post(shown, self.id)

    def show_all(self, update: SessionUpdate, source: ClientPort | None = None) -> None:
        """`update` of this session to every attached client but `source`."""
        self.mirror([SessionNotification(self.id, update)], source)

    def _logged(self, event: SessionEvent) -> None:
        # A prompt is not echoed to the client that sent it; the others are shown it, at its
        # place in the log (the same instant: no other update can come between): whole to a
        # client that shows whole messages (v2), else as chunks.
        if type(event) is UserMessageEvent and self.prompter is not None:
            message = event.data.message
            whole = [SessionNotification(self.id, UserMessageShown(message.id, message.content))]
            chunks = [
                SessionNotification(self.id, UserMessageChunk(block, message.id))
                for block in message.content
            ]
            for client, link in list(self.clients.items()):
                if client is not self.prompter:
                    link.post(whole if link.port.capabilities.shows_state else chunks, self.id)

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

    async def mcp_settled_for(self, records: Iterable[object]) -> None:
        """Wait, when `records` call an MCP server's tool (`mcp__<server>__<tool>`), for the
        session's MCP servers to settle, so that a replay shows those calls as they were live
        (their servers' titles); bounded by the servers' connect timeout."""
        mcp = self.mcp
        if mcp is None or mcp.settled.is_set():
            return
        if any(type(r) is ToolCall and r.data.name.startswith("mcp__") for r in records):
            await mcp.wait_settled()


async def close_mcp(session: LiveSession) -> None:
    """Close the session's MCP connections, if it has any (their processes are gone after)."""
    servers, session.mcp = session.mcp, None
    if servers is not None:
        await servers.aclose()


class Place:
    """A prompt's place in its session's turn order, taken as the prompt is received: it
    holds the turn (`go` set at once) or waits in the queue until woken, or is told it was
    withdrawn (`session/cancel` from its client, the session closing)."""

    def __init__(self, client: ClientPort) -> None:
        self.client = client
        self.go = anyio.Event()
        self.withdrawn = False


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
