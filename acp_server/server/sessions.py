"""The session lifecycle over the store API (SPEC 2.5, 2.6, 4): `SessionRegistry`.

The registry owns every live session of the process (a `LiveSession`, `live`'s: a session open
for writing, from `session/new`, `session/resume` or `session/load` until `session/close`,
`session/delete`, or until the last client attached to it has gone while it is idle; a subagent's child session is live for the one
turn it runs). The store runs its blocking work (fsyncs, recovery, scans) in its own worker
threads, so the event loop keeps serving other requests meanwhile. Lifecycle operations on one
session id are serialized; different sessions never wait for each other.

The `session/list` page logic (ordering, cursors, the cwd filter) is pure and lives in
`listing`; the store lists each session's header, last title and last event time without
reading its whole log.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec
from msgspec import UNSET, UnsetType

from ..agent.ports import ClientPort
from ..agent.recorder import now_ms
from ..core.event_log import EventLog
from ..core.events import SessionEvent
from ..core.fork import ForkPointError, default_point, message_point, seq_point
from ..core.header import SESSION_FORMAT_VERSION, SessionHeader
from ..storage.api import ArchiveFilter, ListedSession, Opened, Store, fork_stored
from ..storage.errors import LogError, LogWriteFailed, SessionNotFound
from .errors import InvalidParams, SessionInUse, UnknownSession, echoed
from .listing import (
    LIST_PAGE_SIZE,
    ListEntry,
    cursor_at,
    decode_cursor,
    list_entry,
    session_info,
)
from .live import LiveSession, check_not_child, close_mcp
from .protocol import ListSessionsResponse

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from ..agent.mcp_config import McpServerConfig

log = logging.getLogger(__name__)

SHUTDOWN_WAIT: Final = 10.0
"""Seconds a closing session waits for its cancelled work to end."""


Listing = list[tuple[ListEntry, ListedSession]]
"""Sessions as the store lists them, each with what `session/list` orders and filters by."""


def new_session_id() -> str:
    """A fresh session id: 32 hex digits, which always matches the session id pattern."""
    return uuid.uuid4().hex


class _IdLock(msgspec.Struct):
    lock: anyio.Lock = msgspec.field(default_factory=anyio.Lock)
    users: int = 0


class SessionRegistry:
    """Every live session of the process, whichever connection opened it, and the lifecycle
    operations on sessions."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], int] = now_ms,
        new_id: Callable[[], str] = new_session_id,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        self.store = store
        self.clock = clock
        self.new_id = new_id
        self.page_size = page_size
        self.live: dict[str, LiveSession] = {}
        self.prompts_accepted: dict[str, int] = {}
        """Session id -> the v2 prompts accepted for it in this process (their receipt ids)."""
        self._locks: dict[str, _IdLock] = {}
        self.event_listeners: list[Callable[[str, SessionEvent], None]] = []
        """Called with (session id, event) for every event any live session appends."""
        self.deletion_listeners: list[Callable[[str], None]] = []
        """Called with the session id once `delete` has removed a session."""
        self.services: TaskGroup | None = None
        """Where live sessions' long-running work (their MCP connections) runs: a task group
        that outlives every request, closed after `close_all`."""
        self.rewind_listeners: list[Callable[[str, int], None]] = []
        """Called with (session id, kept) when a live session whose log failed to write is
        re-read and drops its events from seq `kept` on: they were never stored."""
        self.change_listeners: list[Callable[[str], None]] = []
        """Called with a session id by `changed`: the session went live here, or its turn
        ended (the live session list looks again)."""
        self.unfinished: list[str] = []
        """What closing the sessions of a connection that went, or of the whole process, could
        not finish, one line each (a session's work outliving the wait, a log that could not be
        written or closed): the process's exit status tells it (`lifetime`)."""

    def _register(self, session: LiveSession) -> None:
        self.live[session.id] = session
        session.rest = functools.partial(self.whole, session)
        session_id = session.id
        session.recorder.listeners.append(lambda event: self._announce(session_id, event))
        self.changed(session_id)

    def _announce(self, session_id: str, event: SessionEvent) -> None:
        for listener in self.event_listeners:
            listener(session_id, event)

    @contextlib.asynccontextmanager
    async def _locked(self, session_id: str) -> AsyncIterator[None]:
        entry = self._locks.get(session_id)
        if entry is None:
            entry = self._locks[session_id] = _IdLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[session_id]

    def get(self, session_id: str) -> LiveSession:
        """The live session by that id, or `UnknownSession`."""
        session = self.live.get(session_id)
        if session is None:
            raise UnknownSession(session_id)
        check_not_child(session.header)
        return session

    async def create(
        self,
        cwd: str,
        *,
        additional_directories: list[str] | UnsetType,
        mcp_servers: list[McpServerConfig] | UnsetType,
    ) -> LiveSession:
        """`session/new`: a new log, its header written and fsynced before this returns.

        The header keeps each MCP server's name, transport and command or URL, never its
        secrets (SPEC 4.5).
        """
        header = self._new_header(cwd, additional_directories, mcp_servers)
        # Shielded: once the log exists, the session must be registered, even if the request
        # is cancelled meanwhile (otherwise its writer, and claim, would leak).
        with anyio.CancelScope(shield=True):
            writer = await self.store.create(header)
        session = LiveSession(
            header,
            writer,
            EventLog(),
            additional_directories=list(additional_directories or []),
            mcp_servers=list(mcp_servers or []),
        )
        self._register(session)
        log.info("session %s created in %s", header.id, cwd)
        return session

    async def fork(
        self,
        parent_id: str,
        cwd: str,
        *,
        additional_directories: list[str] | UnsetType,
        mcp_servers: list[McpServerConfig] | UnsetType,
        seq: int | None = None,
        message_id: str | None = None,
    ) -> tuple[LiveSession, int]:
        """`session/fork` (SPEC 4.7): a new live session whose log starts with the parent's
        events through the fork point (`seq`, `message_id`, or by default its last completed
        turn), then `session/forked`; its header has the request's own directories and MCP
        servers, as `create` writes them. Returns it and the last seq copied.

        The parent is read as it is stored, whoever writes it: a turn running in it is not
        waited for. A subagent's child is refused, as every method refuses it.
        """
        try:
            check_not_child(await self.store.header(parent_id))
            parent = await self.store.read(parent_id)
        except SessionNotFound:
            raise UnknownSession(parent_id) from None
        try:
            if seq is not None:
                through = seq_point(parent.records, seq)
            elif message_id is not None:
                through = message_point(parent.records, message_id)
            else:
                through = default_point(parent.records)
        except ForkPointError as exc:
            raise InvalidParams.at(f'$._meta["acp-server"].forkAt.{exc.field}', str(exc)) from None
        header = self._new_header(cwd, additional_directories, mcp_servers)
        opened = await fork_stored(self.store, parent, through, header, self.clock())
        session = LiveSession(
            header,
            opened.writer,
            opened.log,
            additional_directories=list(additional_directories or []),
            mcp_servers=list(mcp_servers or []),
        )
        self._register(session)
        log.info("session %s forked from %s through seq %d", header.id, parent_id, through)
        return session, through

    def _new_header(
        self,
        cwd: str,
        additional_directories: list[str] | UnsetType,
        mcp_servers: list[McpServerConfig] | UnsetType,
    ) -> SessionHeader:
        """The header of a new top-level session (`create`, `fork`)."""
        return SessionHeader(
            version=SESSION_FORMAT_VERSION,
            id=self.new_id(),
            created_at=self.clock(),
            cwd=cwd,
            additional_directories=additional_directories,
            mcp_servers=(
                [server.record() for server in mcp_servers]
                if not isinstance(mcp_servers, UnsetType)
                else UNSET
            ),
        )

    async def create_child(self, header: SessionHeader) -> LiveSession:
        """A subagent's child session: created and registered live for the one turn it runs."""
        with anyio.CancelScope(shield=True):
            writer = await self.store.create(header)
        session = LiveSession(
            header,
            writer,
            EventLog(),
            additional_directories=list(header.additional_directories or []),
            mcp_servers=[],
        )
        self._register(session)
        return session

    def release_child(self, session_id: str) -> None:
        """Forget a child session whose turn is over (its writer is already closed)."""
        self.live.pop(session_id, None)

    async def resume(
        self,
        session_id: str,
        cwd: str,
        *,
        additional_directories: list[str] | UnsetType,
        mcp_servers: list[McpServerConfig] | UnsetType,
        tail: int | None = None,
    ) -> LiveSession:
        """`session/resume`: open a log for continuation (with recovery), without replay.

        Resuming a session that is already live here only updates its directories and MCP
        servers. The request's cwd must be the session's: tools resolve paths against it. The
        caller attaches its client to the session returned. With `tail` (a load replaying that
        many messages) a session opened here holds only what the replay and continuing need
        (`core.tail`); `whole` reads the rest when something needs it.
        """
        async with self._locked(session_id):
            session = self.live.get(session_id)
            if session is not None:
                check_not_child(session.header)
            if session is None:
                with anyio.CancelScope(shield=True):
                    continued = await self._continue(session_id, cwd, tail)
                session = LiveSession(
                    continued.writer.header,
                    continued.writer,
                    continued.log,
                    additional_directories=[],
                    mcp_servers=[],
                )
                if continued.closers:
                    log.info("session %s: recovery closed an interrupted turn", session_id)
                if continued.writer.failure is not None:
                    log.info(
                        "session %s opened, but its log cannot be written: %s",
                        session_id,
                        continued.writer.failure,
                    )
                self._register(session)
                # Recovery appended these before the session was live: announced now, so that
                # a follower of the cold session gets them without waiting for a later event.
                for event in continued.closers:
                    self._announce(session_id, event)
            elif not _same_path(session.cwd, cwd):
                raise _cwd_mismatch(session.cwd)
            elif session.writer.failure is not None:
                try:
                    await self._reopen(session)
                except (LogError, OSError) as exc:
                    # Still loadable: its events are what the log holds; writes say why not.
                    log.info("session %s: its log still cannot be written: %s", session_id, exc)
            # ACP: the list given is the complete list of additional roots; none if omitted.
            session.additional_directories = list(additional_directories or [])
            session.mcp_servers = list(mcp_servers or [])
            return session

    async def reopen(self, session: LiveSession) -> None:
        """Make a live session whose log failed to write usable again (see `_reopen`)."""
        async with self._locked(session.id):
            await self._reopen(session)

    async def _reopen(self, session: LiveSession) -> None:
        """Re-read a live session's log and continue it, as a load would (SPEC 2.5): what a
        failed write left is dropped, an interrupted turn closed, and the session's events
        become what the file holds. `LogWriteFailed` if it still cannot be written (the
        events are then those of the file, and the writer still refuses writes)."""
        writer = session.writer
        with anyio.CancelScope(shield=True):
            if writer.failure is None and not writer.closed:
                with contextlib.suppress(LogWriteFailed):
                    await writer.sync()  # keep what is still queued
            continued = await writer.reopen(self.clock())
        held = session.recorder.log.length
        kept = continued.log.length - len(continued.closers)
        session.recorder.writer = continued.writer
        session.recorder.log = continued.log
        if held > kept:
            for listener in self.rewind_listeners:
                listener(session.id, kept)
        if continued.closers:
            log.info("session %s: recovery closed an interrupted turn", session.id)
        for event in continued.closers:
            self._announce(session.id, event)
        failure = continued.writer.failure
        if failure is not None:
            raise LogWriteFailed(continued.writer.name, failure)

    async def _continue(self, session_id: str, cwd: str, tail: int | None) -> Opened:
        try:
            # The header first: a child or a wrong cwd is refused before recovery writes anything.
            header = await self.store.header(session_id)
            check_not_child(header)
            if not _same_path(header.cwd, cwd):
                raise _cwd_mismatch(header.cwd)
            if tail is not None:
                return await self.store.open_tail(session_id, self.clock(), tail)
            return await self.store.open(session_id, self.clock())
        except SessionNotFound:
            raise UnknownSession(session_id) from None

    async def whole(self, session: LiveSession) -> None:
        """Make a live session loaded for a tail hold its whole log: what `/stats`, `/rewind`,
        `search_history` and a load without a tail read. The events before its base are read
        from the store (its writer is this process: they are there, and do not change)."""
        log_ = session.log
        if not log_.base:
            return
        source = await self.store.history(session.id)
        earlier = await source.records(0, log_.base)
        if session.log is log_:  # not re-read meanwhile (`_reopen`)
            log_.hydrate(earlier)

    async def close(self, session_id: str, client: ClientPort | None = None) -> None:
        """`session/close` from `client`: it is detached from the session; when no other
        client is attached, the session is closed: what runs cancelled, the log flushed and
        fsynced, its lock released.

        Closing a session that exists but is not open here does nothing; a subagent's child is
        refused, running or not (its turn is its parent's to end).
        """
        async with self._locked(session_id):
            session = self.live.get(session_id)
            if session is None:
                await self._check_stored(session_id)
                return
            check_not_child(session.header)
            session.detach(client)
            if session.clients:
                return
            del self.live[session_id]
            await self._shut(session)

    async def _check_stored(self, session_id: str) -> None:
        """`UnknownSession` when the store has no such session, the child refusal when it is a
        subagent's child; an unreadable log passes (it exists, and is not open here)."""
        try:
            check_not_child(await self.store.header(session_id))
        except SessionNotFound:
            raise UnknownSession(session_id) from None
        except LogError:
            pass

    async def delete(self, session_id: str) -> None:
        """`session/delete`: close it if it is open here (for every client attached), then
        remove it from the store.

        A session another process holds open for writing is refused (`LogLocked`). A
        well-formed id that names no session succeeds: there is nothing left to delete (SPEC 4).
        """
        async with self._locked(session_id):
            session = self.live.get(session_id)
            if session is not None:
                check_not_child(session.header)
            session = self.live.pop(session_id, None)
            if session is not None:
                await self._shut(session)
            with anyio.CancelScope(shield=True):
                deleted = await self._delete_stored(session_id)
            if not deleted:
                log.info("session/delete of %s: no such session, nothing to delete", session_id)
                return
            log.info("session %s deleted", session_id)
            for listener in self.deletion_listeners:
                listener(session_id)

    async def _delete_stored(self, session_id: str) -> bool:
        """Remove the session from the store; False if there was no such session."""
        try:
            check_not_child(await self.store.header(session_id))
        except SessionNotFound:
            return False
        except LogError:
            pass  # an unreadable log can still be deleted: that is how it goes away
        try:
            await self.store.delete(session_id)
        except SessionNotFound:
            return False
        return True

    async def _shut(self, session: LiveSession) -> str | None:
        """Cancel the session's work, wait for it, close its log and its MCP servers; what
        could not be finished (None: nothing)."""
        unfinished = None
        for queued in session.queue.drain():  # answered `cancelled`: nothing runs after this
            queued.withdrawn = True
            queued.go.set()
        session.cancel()
        if session.titling is not None:
            session.titling.cancel()  # its title falls back to the prompt's line
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(SHUTDOWN_WAIT) as waited:
                await session.wait_idle()  # a cancelled turn still logs how it ended
            if waited.cancelled_caught:
                log.warning(
                    "session %s: work still running after %ss; closing its log anyway",
                    session.id,
                    SHUTDOWN_WAIT,
                )
                unfinished = f"session {session.id}: its work outlived the wait"
            await session.writer.close()
            if session.writer.failure is not None:  # closed without what it failed to write
                unfinished = f"session {session.id}: its log failed to write"
            await close_mcp(session)
        log.info("session %s closed", session.id)
        return unfinished

    def cancel(self, session_id: str, client: ClientPort | None = None) -> bool:
        """`session/cancel` from `client`: the running turn is cancelled, and every prompt of
        `client` waiting behind it is withdrawn (answered `cancelled`). False when no live
        session `client` is attached to has that id; a subagent's child is refused (its turn
        ends with its parent's, which the parent's id cancels)."""
        session = self.live.get(session_id)
        if session is not None:
            check_not_child(session.header)
        if session is None or (client is not None and client not in session.clients):
            return False
        for queued in session.queue.withdraw(client):
            queued.withdrawn = True
            queued.go.set()
        session.cancel()
        return True

    def cancel_owned(self, client: ClientPort) -> None:
        """A client's input ended and its turns end with it (the stdio server, whose process
        ends with its one client): the turns it prompted end promptly."""
        for session in list(self.live.values()):
            if session.prompter is client:
                session.cancel()

    async def close_owned(self, client: ClientPort) -> None:
        """A connection has gone: it (its agent's port) is detached from its sessions; each left with no client
        attached and no work running is closed (log flushed, fsynced, unlocked). A turn goes
        on without its client; its session closes when it ends (`release_if_unused`)."""
        for session in [s for s in self.live.values() if client in s.clients]:
            session.detach(client)
            await self.release_if_unused(session)

    async def release_if_unused(self, session: LiveSession) -> None:
        """Close `session` if no client is attached to it and no work keeps it live."""
        async with self._locked(session.id):
            if session.clients or session.busy or self.live.get(session.id) is not session:
                return
            del self.live[session.id]
            await self._shut_noting(session)

    async def close_all(self) -> None:
        """At the end of the connection: every log flushed, fsynced and unlocked."""
        sessions, self.live = list(self.live.values()), {}
        for session in sessions:
            await self._shut_noting(session)

    async def _shut_noting(self, session: LiveSession) -> None:
        """`_shut`, what it could not finish noted in `unfinished`."""
        try:
            unfinished = await self._shut(session)
        except Exception as exc:
            log.exception("could not close session %s", session.id)
            unfinished = f"session {session.id}: could not close: {type(exc).__name__}"
        if unfinished is not None:
            self.unfinished.append(unfinished)

    async def amend(
        self,
        session_id: str,
        make: type[Any],
        change: Callable[[Iterable[SessionEvent]], Any | None],
        *,
        close_live: bool = False,
    ) -> SessionEvent | None:
        """Append one event of type `make` to a stored session, live here or not
        (`session/set_title`, `session/archive`, `session/unarchive`): its data is what
        `change` makes of the session's events, nothing when it gives None. Durable before this
        returns; the event (or None) is returned.

        A live session is written through its recorder, unless `close_live`: it is then closed
        first, for every client attached to it (its turn cancelled). A live session whose turn runs is refused: the event would
        land among the running step's chunks. A session not live here is opened for writing
        (claimed, recovered as a load would) just for the one append, and released.
        """
        async with self._locked(session_id):
            session = self.live.get(session_id)
            if session is not None:
                check_not_child(session.header)
                if close_live:
                    del self.live[session_id]
                    await self._shut(session)
                else:
                    if session.turn is not None:
                        raise SessionInUse(
                            f"Session in use: a prompt turn is running in session {session_id}",
                            {"reason": "prompt-running"},
                        )
                    data = change(session.log.plain_events())
                    if data is None:
                        return None
                    with session.activity():
                        event: SessionEvent = session.recorder.append(make, data)
                        await session.recorder.sync()
                    return event
            try:
                check_not_child(await self.store.header(session_id))
            except SessionNotFound:
                raise UnknownSession(session_id) from None
            with anyio.CancelScope(shield=True):  # appended and released, or not at all
                opened = await self.store.open(session_id, self.clock())
                appended: list[SessionEvent] = []
                try:
                    data = change(opened.log.plain_events())
                    if data is not None:
                        appended.append(make(opened.log.length, self.clock(), data))
                        opened.writer.append(appended)
                        await opened.writer.sync()
                finally:
                    await opened.writer.close()
            # For this process's followers of the session (its stored events reach them too:
            # they take each seq once).
            for new in [*opened.closers, *appended]:
                self._announce(session_id, new)
            return appended[0] if appended else None

    async def status(self, session_id: str) -> LiveSession | None:
        """`session/status`, without side effects: the session if it is live here (`open`),
        None if it is only stored (`saved`); `UnknownSession` if there is no such session."""
        session = self.live.get(session_id)
        if session is not None:
            check_not_child(session.header)
            return session
        try:
            check_not_child(await self.store.header(session_id))
        except SessionNotFound:
            raise UnknownSession(session_id) from None
        return None

    async def list(
        self, cwd: str | None, cursor: str | None, archived: ArchiveFilter = "exclude"
    ) -> ListSessionsResponse:
        """`session/list`: one page, newest first, optionally only sessions in `cwd`; archived
        sessions only when `archived` asks for them (the filter applies before paging). The
        store reads that page only (`Store.list_page`)."""
        after = decode_cursor(cursor) if cursor is not None else None
        page = await self.store.list_page(cwd, after, self.page_size, archived)
        infos = [session_info(list_entry(item.header), item) for item in page.sessions]
        return ListSessionsResponse(
            sessions=infos,
            next_cursor=cursor_at(page.next_after) if page.next_after is not None else UNSET,
        )

    async def list_all(self) -> Listing:
        """Every session `session/list` may list, archived or not, in the store's order."""
        listed: Listing = []
        for item in await self.store.list_sessions():
            header = item.header
            if header.origin == "subagent":
                continue  # subagent children belong to their parent's conversation
            listed.append((list_entry(header), item))
        return listed

    def changed(self, session_id: str) -> None:
        """Tell `change_listeners` that what a session list shows of the session may have
        changed without an event saying so (it went live, its turn ended)."""
        for listener in self.change_listeners:
            listener(session_id)


def _same_path(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def _cwd_mismatch(session_cwd: str) -> InvalidParams:
    return InvalidParams.at(
        "$.cwd", f"does not match the session's working directory {echoed(session_cwd)}"
    )
