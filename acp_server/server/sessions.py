"""Live sessions and the session lifecycle over the `SessionStore` (SPEC 2.2, 2.5, 4).

A `LiveSession` is a session this process has open for writing: it holds the log's
`LogWriter` (and so its exclusive lock) from `session/new`, `session/resume` or `session/load`
until `session/close`, `session/delete` or the end of the connection; a subagent's child session
is live for the one turn it runs. `SessionRegistry` owns them all
and runs the store's blocking work (fsyncs, recovery, directory scans) in worker threads, so
the event loop keeps serving other requests meanwhile. Lifecycle operations on one session id
are serialized; different sessions never wait for each other.

The `session/list` page logic (ordering, cursors, the cwd filter) is pure and lives in
`select_page` / `encode_cursor` / `decode_cursor`; `list_summary` reads only what a listed
session's entry shows (its last title and last event time), not its whole log.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import fcntl
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

import anyio
import msgspec
from msgspec import UNSET, UnsetType

from ..agent.recorder import SessionRecorder, now_ms
from ..core.chunk_rows import ChunkRowError, decode_record_json, decode_storage_record
from ..core.event_log import EventLog
from ..core.events import EventError, SessionEvent, SessionTitle, decode_event
from ..core.header import SESSION_FORMAT_VERSION, SessionHeader
from ..core.modes import Settings
from ..storage.log import (
    READ_BLOCK,
    LogError,
    LogLines,
    LogLocked,
    LogWriteFailed,
    LogWriter,
    log_compression,
)
from ..storage.store import ContinuedLog, SessionNotFound, SessionStore
from .errors import InvalidParams, UnknownSession, echoed
from .protocol import ListSessionsResponse, SessionInfo

if TYPE_CHECKING:  # the loop (and its tools) is imported by the first prompt
    from ..agent.loop import Turn

log = logging.getLogger(__name__)

LIST_PAGE_SIZE: Final = 50
"""Sessions per `session/list` page."""

PROCESS_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
"""Failures of this process rather than of one session's files."""

SHUTDOWN_WAIT: Final = 10.0
"""Seconds a closing session waits for its cancelled work to end."""


def new_session_id() -> str:
    """A fresh session id: 32 hex digits, which always matches the session id pattern."""
    return uuid.uuid4().hex


# ---------------------------------------------------------------------------------------------
# Live sessions.


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
        writer: LogWriter,
        log: EventLog,
        *,
        additional_directories: list[str],
        mcp_servers: list[dict[str, Any]],
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
        self.settings: Settings | None = None
        """Its mode, model and reasoning effort (SPEC 4.4), once folded from its log."""
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
    def writer(self) -> LogWriter:
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


# ---------------------------------------------------------------------------------------------
# session/list: pure paging.


@dataclass(frozen=True, slots=True)
class ListEntry:
    """What `session/list` needs of one session before reading its events."""

    session_id: str
    created_at: int
    cwd: str
    additional_directories: list[str] | UnsetType = UNSET


def encode_cursor(entry: ListEntry) -> str:
    """An opaque cursor: the (createdAt, id) of the last session of a page."""
    raw = msgspec.json.encode([entry.created_at, entry.session_id])
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The position a cursor names; `InvalidParams` for anything `encode_cursor` did not make."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, session_id = msgspec.json.decode(raw, type=tuple[int, str])
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise InvalidParams.at("$.cursor", "not a cursor returned by session/list") from None
    return created_at, session_id


def _order_key(entry: ListEntry) -> tuple[int, str]:
    return entry.created_at, entry.session_id


def select_page(
    entries: Sequence[ListEntry], *, cwd: str | None, after: tuple[int, str] | None, page_size: int
) -> tuple[list[ListEntry], bool]:
    """One page of sessions, newest first (by createdAt, then id), and whether more follow.

    The cursor is a position, not an offset: sessions created while a client pages do not
    shift later pages (they sort before the first one), and deleted ones leave no hole.
    """
    wanted = os.path.normpath(cwd) if cwd is not None else None
    chosen = [
        e
        for e in entries
        if (wanted is None or os.path.normpath(e.cwd) == wanted)
        and (after is None or _order_key(e) < after)
    ]
    chosen.sort(key=_order_key, reverse=True)
    return chosen[:page_size], len(chosen) > page_size


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC (`2025-01-02T03:04:05.678Z`)."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------------
# The registry.


@dataclass
class _IdLock:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0


class SessionRegistry:
    """Every live session of a connection, and the lifecycle operations on sessions."""

    def __init__(
        self,
        store: SessionStore,
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
        self._locks: dict[str, _IdLock] = {}
        self.event_listeners: list[Callable[[str, SessionEvent], None]] = []
        """Called with (session id, event) for every event any live session appends."""
        self.deletion_listeners: list[Callable[[str], None]] = []
        """Called with the session id once `delete` has removed a session."""
        self.rewind_listeners: list[Callable[[str, int], None]] = []
        """Called with (session id, kept) when a live session whose log failed to write is
        re-read and drops its events from seq `kept` on: they were never stored."""

    def _register(self, session: LiveSession) -> None:
        self.live[session.id] = session
        session_id = session.id
        session.recorder.listeners.append(lambda event: self._announce(session_id, event))

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
        if session.header.origin == "subagent":
            raise child_refused(session_id)
        return session

    async def create(
        self,
        cwd: str,
        *,
        additional_directories: list[str] | UnsetType,
        mcp_servers: list[dict[str, Any]] | UnsetType,
    ) -> LiveSession:
        """`session/new`: a new log, its header written and fsynced before this returns."""
        header = SessionHeader(
            version=SESSION_FORMAT_VERSION,
            id=self.new_id(),
            created_at=self.clock(),
            cwd=cwd,
            additional_directories=additional_directories,
            mcp_servers=mcp_servers,
        )
        # Shielded: once the log exists, the session must be registered, even if the request
        # is cancelled meanwhile (otherwise its writer, and lock, would leak).
        with anyio.CancelScope(shield=True):
            writer = await anyio.to_thread.run_sync(self.store.create, header)
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

    def create_child(self, header: SessionHeader) -> LiveSession:
        """A subagent's child session: created and registered live for the one turn it runs."""
        writer = self.store.create(header)
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
        mcp_servers: list[dict[str, Any]] | UnsetType,
    ) -> LiveSession:
        """`session/resume`: open a log for continuation (with recovery), without replay.

        Resuming a session that is already live here only updates its directories and MCP
        servers. The request's cwd must be the session's: tools resolve paths against it.
        """
        async with self._locked(session_id):
            session = self.live.get(session_id)
            if session is not None and session.header.origin == "subagent":
                raise child_refused(session_id)
            if session is None:
                with anyio.CancelScope(shield=True):
                    continued = await anyio.to_thread.run_sync(self._continue, session_id, cwd)
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
                    await anyio.to_thread.run_sync(writer.sync)  # keep what is still queued
            continued = await anyio.to_thread.run_sync(
                self.store.reopen, writer, session.id, self.clock()
            )
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
            raise LogWriteFailed(continued.writer.path, failure)

    def _continue(self, session_id: str, cwd: str) -> ContinuedLog:
        try:
            # The header first: a child or a wrong cwd is refused before recovery writes anything.
            header = self.store.header(session_id)
            if header.origin == "subagent":
                raise child_refused(session_id)
            if not _same_path(header.cwd, cwd):
                raise _cwd_mismatch(header.cwd)
            return self.store.continue_session(session_id, self.clock())
        except SessionNotFound:
            raise UnknownSession(session_id) from None

    async def close(self, session_id: str) -> None:
        """`session/close`: cancel what runs, flush and fsync the log, release its lock.

        Closing a session that exists but is not open here does nothing.
        """
        async with self._locked(session_id):
            session = self.live.pop(session_id, None)
            if session is None:
                if not await anyio.to_thread.run_sync(self.store.exists, session_id):
                    raise UnknownSession(session_id)
                return
            await self._shut(session)

    async def delete(self, session_id: str) -> None:
        """`session/delete`: close it if it is open here, then remove its directory.

        A session another process holds open for writing is refused (`LogLocked`). A
        well-formed id that names no session succeeds: there is nothing left to delete (SPEC 4).
        """
        async with self._locked(session_id):
            session = self.live.get(session_id)
            if session is not None and session.header.origin == "subagent":
                raise child_refused(session_id)
            session = self.live.pop(session_id, None)
            if session is not None:
                await self._shut(session)
            with anyio.CancelScope(shield=True):
                deleted = await anyio.to_thread.run_sync(self._delete_unlocked, session_id)
            if not deleted:
                log.info("session/delete of %s: no such session, nothing to delete", session_id)
                return
            log.info("session %s deleted", session_id)
            for listener in self.deletion_listeners:
                listener(session_id)

    def _delete_unlocked(self, session_id: str) -> bool:
        """Remove the session's directory; False if there was no such session."""
        try:
            path = self.store.log_path(session_id)
        except SessionNotFound:
            return False
        try:
            origin = self.store.header(session_id).origin
        except LogError:
            origin = UNSET  # an unreadable log can still be deleted: that is how it goes away
        if origin == "subagent":
            raise child_refused(session_id)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LogLocked(
                    f"{path}: the session is open for writing in another process"
                ) from None
            self.store.delete(session_id)
        finally:
            os.close(fd)
        return True

    async def _shut(self, session: LiveSession) -> None:
        session.cancel()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(SHUTDOWN_WAIT) as waited:
                await session.wait_idle()  # a cancelled turn still logs how it ended
            if waited.cancelled_caught:
                log.warning(
                    "session %s: work still running after %ss; closing its log anyway",
                    session.id,
                    SHUTDOWN_WAIT,
                )
            await anyio.to_thread.run_sync(session.writer.close)
        log.info("session %s closed", session.id)

    def cancel(self, session_id: str) -> bool:
        """`session/cancel`: False when no live session has that id."""
        session = self.live.get(session_id)
        if session is None:
            return False
        session.cancel()
        return True

    def cancel_all(self) -> None:
        for session in list(self.live.values()):
            session.cancel()

    async def close_all(self) -> None:
        """At the end of the connection: every log flushed, fsynced and unlocked."""
        sessions, self.live = list(self.live.values()), {}
        for session in sessions:
            try:
                await self._shut(session)
            except Exception:
                log.exception("could not close session %s", session.id)

    async def list(self, cwd: str | None, cursor: str | None) -> ListSessionsResponse:
        """`session/list`: one page, newest first, optionally only sessions in `cwd`."""
        after = decode_cursor(cursor) if cursor is not None else None
        if self._root_is_empty():
            return ListSessionsResponse(sessions=[])  # nothing to read: no worker thread needed
        return await anyio.to_thread.run_sync(self._list, cwd, after)

    def _root_is_empty(self) -> bool:
        # One directory read at most (the first entry), cheap enough for the event loop.
        try:
            with os.scandir(self.store.root) as entries:
                return next(entries, None) is None
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:
            return False  # let the full listing say what is wrong

    def _list(self, cwd: str | None, after: tuple[int, str] | None) -> ListSessionsResponse:
        entries = []
        for session_id in self.store.session_ids():
            try:
                header = self.store.header(session_id)
            except (LogError, OSError) as exc:
                if isinstance(exc, OSError) and exc.errno in PROCESS_ERRNOS:
                    raise  # not this session's fault: every other one would fail the same way
                log.warning("session/list: skipped session %s: %s", session_id, exc)
                continue
            if header.origin == "subagent":
                continue  # subagent children belong to their parent's conversation
            entries.append(
                ListEntry(session_id, header.created_at, header.cwd, header.additional_directories)
            )
        page, more = select_page(entries, cwd=cwd, after=after, page_size=self.page_size)
        infos = [self._info(entry) for entry in page]
        return ListSessionsResponse(
            sessions=infos, next_cursor=encode_cursor(page[-1]) if more else UNSET
        )

    def _info(self, entry: ListEntry) -> SessionInfo:
        info = SessionInfo(
            session_id=entry.session_id,
            cwd=entry.cwd,
            additional_directories=entry.additional_directories or UNSET,
        )
        try:
            title, last_time = list_summary(self.store.log_path(entry.session_id))
        except (LogError, EventError, ChunkRowError, OSError, ValueError) as exc:
            # Still listed: the client can see it and delete it; loading it will say what broke.
            log.warning("session/list: session %s: %s", entry.session_id, exc)
            return info
        if title is not None:
            info.title = title
        info.updated_at = iso_time(last_time if last_time is not None else entry.created_at)
        return info


_TITLE_LINE: Final = b'{"type":"session/title"'


def list_summary(path: Path) -> tuple[str | None, int | None]:
    """A session's latest title and the time of its last event, for `session/list`.

    Listing must stay cheap however long the logs are, so nothing is validated here and only
    two lines are decoded: the last one, and the last title (found by a byte search for the
    line prefix the writer produces). Memory stays bounded whatever the file holds: a plain log
    is searched backwards a block at a time, a Zstandard one read a frame at a time. Loading
    the session checks everything.
    """
    with open(path, "rb") as file:
        if log_compression(path) == "zstd":
            return _zstd_summary(path, file)
        return _plain_summary(file.fileno())


def _zstd_summary(path: Path, file: BinaryIO) -> tuple[str | None, int | None]:
    lines = iter(LogLines(path, file, "zstd"))
    next(lines, None)  # the header
    last = title_line = None
    for line in lines:
        last = line
        if line.startswith(_TITLE_LINE):
            title_line = line
    return _title(title_line), _last_time(last)


def _plain_summary(fd: int) -> tuple[str | None, int | None]:
    size = os.fstat(fd).st_size
    end = _rfind(fd, b"\n", size)  # a torn final line is not an event yet
    start = _rfind(fd, b"\n", end) + 1 if end > 0 else 0
    last = _line_at(fd, start) if start > 0 else None  # start 0: only the header
    at = _rfind(fd, b"\n" + _TITLE_LINE, end) if end > 0 else -1
    return _title(_line_at(fd, at + 1) if at >= 0 else None), _last_time(last)


def _rfind(fd: int, needle: bytes, end: int) -> int:
    """The offset of the last `needle` that ends at or before byte `end`, or -1."""
    overlap = len(needle) - 1
    hi = end
    while hi > overlap:
        lo = max(0, hi - READ_BLOCK)
        at = os.pread(fd, hi - lo, lo).rfind(needle)
        if at >= 0:
            return lo + at
        hi = lo + overlap
        if lo == 0:
            break
    return -1


def _line_at(fd: int, start: int) -> bytes:
    """The line starting at byte `start`, up to its newline."""
    pieces: list[bytes] = []
    while block := os.pread(fd, READ_BLOCK, start):
        newline = block.find(b"\n")
        if newline >= 0:
            pieces.append(block[:newline])
            break
        pieces.append(block)
        start += len(block)
    return b"".join(pieces)


def child_refused(session_id: str) -> InvalidParams:
    """A subagent's child addressed as a session of its own (SPEC 3: refused as the history
    API refuses it): it is part of its parent's conversation, read through the parent."""
    return InvalidParams(
        f"Invalid params: session {session_id} is a subagent's child: it is read through its "
        'parent, with the history address {"kind": "subagent", "parentSessionId", '
        '"childSessionId"} - at `$.sessionId`',
        {"path": "$.sessionId", "check": "origin"},
    )


def _title(line: bytes | None) -> str | None:
    if line is None:
        return None
    event = decode_event(line)
    return event.data.title if isinstance(event, SessionTitle) else None


def _last_time(line: bytes | None) -> int | None:
    if line is None:
        return None
    return decode_storage_record(decode_record_json(line))[-1].time


def _same_path(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def _cwd_mismatch(session_cwd: str) -> InvalidParams:
    return InvalidParams.at(
        "$.cwd", f"does not match the session's working directory {echoed(session_cwd)}"
    )
