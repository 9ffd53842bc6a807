"""ACP v2 `session/resume` with `replayFrom`: the session reopened on this connection as v1's
resume does (`AcpAgent.reopen`), its history replayed from the cursor, whole messages only,
then its current state (`state_update`), then the answer.

The replay is read from the session's log in pages (`REPLAY_PAGE` events each), each cut at a
turn's start (`core.v2_replay.turn_cut`), projected (`core.projection.project_load`, folded
into whole messages) and sent before the next is read: what is held is a page, never the whole
history. A session live here is read from memory for what it holds and from the store for what
it left there (`HeldHistory`), as the history API reads it.

This client's updates of the session are held from the moment it is attached until the answer
has gone: a turn running in the session is replayed up to the replay's last event, and its live
updates after that event follow the answer, with no gap and no repeat (as v1's `session/load`
does). Without `replayFrom` nothing is replayed, and the held live updates still follow the
answer: nothing of the history comes before it.

`REPLAY_PAGE` is 200 events, or the value of the environment variable
`ACP_SERVER_REPLAY_PAGE` (a positive integer), read once when this module is imported; it
exists so that tests can replay a session bigger than a page without a huge one.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from msgspec import UNSET, UnsetType, field

from ...core.acp_updates import SessionNotification, SessionUpdate, StateShown, ToolPresenter
from ...core.chunk_checks import KeptRecord
from ...core.chunk_rows import StorageRecord
from ...core.commands import COMMANDS
from ...core.content import Meta_
from ...core.events import TurnEnd
from ...core.projection import project_load
from ...core.structs import Model
from ...core.v2_replay import (
    AfterMessage,
    Cursor,
    CursorError,
    after_message,
    last_stop_reason,
    replay_cursor,
    turn_cut,
    whole_messages,
)
from ..attached import Attached
from ..errors import InvalidParams
from ..held_history import HeldHistory
from ..live import LiveSession
from ..protocol import Inbound, SystemPrompt
from ..rpc import Connection, Then
from ..tunables import env_int
from . import host
from .protocol import Command, SessionConfigSelect, commands, config_options

if TYPE_CHECKING:
    from ..port import ConnectionPort
    from ..sessions import SessionRegistry
    from ..surface import Surface
    from ..turns import Conversations


log = logging.getLogger(__name__)

VERSION: Final = 2

REPLAY_PAGE_ENV: Final = "ACP_SERVER_REPLAY_PAGE"
DEFAULT_REPLAY_PAGE: Final = 200


REPLAY_PAGE: Final = env_int(REPLAY_PAGE_ENV, DEFAULT_REPLAY_PAGE, minimum=1)
"""How many events a replay reads at a time (a page may carry more: a turn is never cut)."""


class Reopened(Protocol):
    """A session reopened on this connection (`AcpAgent.reopen`'s `Reopened`)."""

    @property
    def session(self) -> LiveSession: ...

    @property
    def link(self) -> Attached: ...

    @property
    def notice(self) -> Any: ...

    @property
    def mcp(self) -> Any: ...


class Agent(Protocol):
    """What `session/resume` uses of its connection's `AcpAgent` (v1's resume path, which it
    shares)."""

    connection: Connection
    port: ConnectionPort
    sessions: SessionRegistry
    surface: Surface
    conversations: Conversations

    async def reopen(
        self, request: Any, *, tail: int | None = None, hold: bool = False
    ) -> Reopened: ...

    async def reporter(
        self, session: LiveSession, mcp: Any, notice: Any = None
    ) -> Callable[[], None]: ...


Read = Callable[[int, int], Awaitable[list[StorageRecord]]]


def install(agent: host.Agent) -> None:
    """Route v2's `session/resume` on `agent`'s connection."""
    resume = Resume(cast(Agent, agent))
    agent.connection.route("session/resume", resume.resume, ResumeSessionRequest, version=VERSION)


class ResumeSessionRequest(Inbound):
    """v2 `session/resume` params (SDK 2.4.0's schema; `systemPrompt` from its unstable one,
    taken as v1 takes it). `mcpServers` and `additionalDirectories` may be null (the schema's
    default on null: none); `replayFrom` is plain JSON, checked by `replay_cursor`."""

    session_id: str
    cwd: str
    additional_directories: list[str] | UnsetType | None = UNSET
    mcp_servers: list[dict[str, Any]] | UnsetType | None = UNSET
    replay_from: Any = UNSET
    system_prompt: SystemPrompt | UnsetType | None = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ResumeSessionResponse(Model):
    """v2's answer to `session/resume`: the session's options and commands (sent as no
    update after it: nothing but notices may follow the answer)."""

    config_options: list[SessionConfigSelect] | UnsetType = UNSET
    available_commands: list[Command] | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class Resume:
    """`session/resume` on one v2 connection."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def resume(self, request: ResumeSessionRequest) -> Then:
        """`session/resume`: the replay `replayFrom` asks for (none without it), one
        `state_update`, then the answer; this client's live updates of the session after it."""
        try:
            cursor = replay_cursor(request.replay_from)
        except CursorError as exc:
            raise InvalidParams.at(exc.path, exc.problem) from None
        agent = self.agent
        # What a replay and continuing need; with prices every model call's cost is read.
        tail = 1 if agent.surface.config.prices is None else None
        reopened = await agent.reopen(request, tail=tail, hold=True)
        session, link = reopened.session, reopened.link
        try:
            await self._replay_and_state(session, link, cursor)
            surface = agent.surface
            surface.restore(session)
            response = ResumeSessionResponse(
                config_options=config_options(surface.options(session)),
                available_commands=commands(COMMANDS),
            )
            report = await agent.reporter(session, reopened.mcp, reopened.notice)
        except BaseException:
            link.release()
            raise

        def then() -> None:
            link.release()  # the live updates it held follow the answer
            report()

        return Then(response, then)

    async def _replay_and_state(
        self, session: LiveSession, link: Attached, cursor: Cursor | None
    ) -> None:
        """Send the replay, then the state: everything held for this client so far is
        dropped at the instant the replay's end is read, so the live updates held after it
        are those of events after the replay's last."""
        end = session.log.last_seq + 1
        # Its state now: the live updates from `end` on, held, say what changes after.
        running = session.turn is not None
        waiting = session.waiting_for_user > 0
        link.restart()  # no await since `end` was read
        stop_reason: str | None = None
        if cursor is not None:
            stop_reason = await self._replay(session, link, cursor, end)
        elif not running:
            stop_reason = await self._last_stop_reason(session, end)
        if not running:
            state = StateShown("idle", UNSET if stop_reason is None else stop_reason)
        else:
            state = StateShown("requires_action" if waiting else "running")
        await self.agent.port.notify("session/update", SessionNotification(session.id, state))

    async def _reader(self, session: LiveSession) -> Read:
        """Reads the session's records `[lo, hi)`: from memory what its log holds, from the
        store what a load for a tail left there."""
        if not session.log.base:
            log_ = session.log

            async def held(lo: int, hi: int) -> list[StorageRecord]:
                return log_.records_between(lo, hi)

            return held
        stored = await self.agent.sessions.store.history(session.id)
        return HeldHistory(session.header, lambda: session.log, stored).records

    async def _pages(self, session: LiveSession, end: int) -> AsyncIterator[list[StorageRecord]]:
        """The records of `[0, end)`, in pages of whole turns (the last may hold a turn still
        going on)."""
        read = await self._reader(session)
        carried: list[StorageRecord] = []
        lo = 0
        while lo < end:
            hi = min(lo + REPLAY_PAGE, end)
            records = [*carried, *await read(lo, hi)]
            lo = hi
            cut = turn_cut(records) if lo < end else len(records)
            carried = records[cut:]
            if cut:
                yield records[:cut]
        if carried:
            yield carried

    async def _last_stop_reason(self, session: LiveSession, end: int) -> str | None:
        """The stop reason of the session's last turn, read backwards from its end."""
        read = await self._reader(session)
        hi = end
        while hi > 0:
            lo = max(0, hi - REPLAY_PAGE)
            records = await read(lo, hi)
            reason = last_stop_reason(records, None)
            if reason is not None or any(type(r) is TurnEnd for r in records):
                return reason
            hi = lo
        return None

    async def _replay(
        self, session: LiveSession, link: Attached, cursor: Cursor, end: int
    ) -> str | None:
        """Send the replay of `[0, end)` from `cursor`, page by page; the stop reason of the
        last turn it read. A message the log does not have is refused before anything is
        sent."""
        present = self.agent.conversations.presenter(session)
        found = not isinstance(cursor, AfterMessage)
        stop_reason: str | None = None
        async for page in self._pages(session, end):
            stop_reason = last_stop_reason(page, stop_reason)
            await session.mcp_settled_for(page)
            updates = _projected(page, present)
            if not found:
                assert isinstance(cursor, AfterMessage)
                start = after_message(updates, cursor.message_id)
                if start is None:
                    continue
                found = True
                updates = updates[start:]
            link.replayed(updates)
            if updates:
                await self.agent.port.notify_all(
                    "session/update",
                    [SessionNotification(session.id, u) for u in whole_messages(updates)],
                )
        if not found:
            assert isinstance(cursor, AfterMessage)
            raise InvalidParams.at(
                "$.replayFrom.messageId",
                f"session {session.id} has no message {cursor.message_id[:80]!r}",
            )
        return stop_reason


def _projected(page: list[StorageRecord], present: ToolPresenter) -> list[SessionUpdate]:
    records: list[KeptRecord] = list(page)
    return project_load(records, present)
