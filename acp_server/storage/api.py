"""The store API: what the server, the tools and the tests ask of whatever holds session logs.

Nothing here is about files or databases. A `Store` creates sessions, opens them for writing
(the single-writer claim, then SPEC 2.5's recovery with the closers of `core.recovery`), reads
headers, records and pages, lists and deletes sessions. A `Writer` queues a live session's
events in memory (`append_one`, the hot path, never blocks) and writes them a batch at a time
(`flush`), durably at SPEC 2.4's points (`sync`: an fsync, or a COMMIT). A `HistorySource` is
one stored session read for the history API: a page or a seq range reads only what it returns.

Every method that touches storage is async: an engine runs its blocking work in its own worker
threads, never on the event loop, so a slow disk delays nobody but the session it writes.

`fork_stored` makes a fork of a stored session (SPEC 4.7), the same for every engine: the
parent's records through the fork point, as stored, then `session/forked`, written as one copy
(`write_copy`) and opened for writing.

Checkpoints (`put_blob`, `get_blob`, `blob_digests`): the contents of files as they were before
a tool changed them, kept with the session (its directory, or a table keyed by session and
digest), deduplicated by their SHA-256 digest and deleted with it; `copy_blobs` carries them
to a copy or a fork.

`follow_stored` is the cross-process half of `session.follow`, the same for every engine: it
waits on the store's `Watch` of the session (a short poll of the stored next seq for files and
SQLite, PostgreSQL's notifications) and reads what was appended by seq after every wake-up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Final, Literal, Protocol

import anyio
import msgspec

from ..core.chunk_rows import StorageRecord, decode_storage_record
from ..core.event_log import EventLog
from ..core.events import SessionEvent
from ..core.fork import fork_records
from ..core.header import SessionHeader
from ..core.paging import PageCut
from .errors import SessionNotFound

log = logging.getLogger(__name__)

FOLLOW_POLL_S: Final = 0.05
"""How often a follower of a session written by another process looks for appends."""


class Writer(Protocol):
    """The one writer of a session (holding its claim until `close`).

    A write that fails sets `failure`: from then on every append, flush and sync raises
    `LogWriteFailed` until the session is reopened (`reopen`).
    """

    @property
    def header(self) -> SessionHeader: ...

    @property
    def name(self) -> str:
        """What names the log in an error: a file path, or the store's URL and the session."""

    @property
    def next_seq(self) -> int: ...

    @property
    def failure(self) -> OSError | None: ...

    @property
    def writable(self) -> bool:
        """False for a session opened read-only: it can be read, never written."""

    @property
    def closed(self) -> bool: ...

    @property
    def has_pending(self) -> bool: ...

    def append(self, events: Sequence[SessionEvent]) -> None:
        """Queue events (their seqs continuing the log) for the next flush; no I/O."""

    def append_one(self, event: SessionEvent) -> None:
        """`append` for one event: the hot path while a model streams."""

    async def flush(self) -> None:
        """Write what is queued as one batch (a crash of this process then loses nothing)."""

    async def sync(self) -> None:
        """Flush durably (a crash of the machine then loses nothing)."""

    async def close(self) -> None:
        """Sync (unless writing failed) and give up the claim. Safe to call twice."""

    async def reopen(self, now_ms: int) -> Opened:
        """Continue the session again after this writer failed: re-read, recover (SPEC 2.5).
        The writer of the result may be this one or a new one (a lost claim is taken anew)."""


class Opened(msgspec.Struct):
    """A session opened for continuation: its writer and its (recovered) events."""

    writer: Writer
    log: EventLog
    dropped_torn_tail: bool
    closers: list[SessionEvent]
    """Events recovery appended to close an interrupted turn (empty if none was needed)."""

    @property
    def events(self) -> list[SessionEvent]:
        return self.log.events()


class StoredLog(msgspec.Struct):
    """A whole session read without changing it: header, records (rows left packed)."""

    header: SessionHeader
    records: list[StorageRecord]
    event_count: int

    @property
    def events(self) -> list[SessionEvent]:
        return [event for record in self.records for event in decode_storage_record(record)]


class SessionLines(Protocol):
    """A stored session as the lines of a JSONL log would hold them, header first: what the
    log tools (`log stats|verify|cat`) read of any engine. Iterating may block (a database read
    streams its rows): it is done in a thread, or outside the event loop."""

    @property
    def path(self) -> str:
        """What names the session in a report: a file path, or the store's URL and the id."""

    @property
    def count(self) -> int:
        """Lines yielded so far."""

    @property
    def torn_tail(self) -> bool:
        """Whether an incomplete line follows the complete ones (a database has none)."""

    @property
    def size(self) -> int:
        """Bytes the lines read so far take where they are stored."""

    def __iter__(self) -> Iterator[bytes]: ...


class ListedSession(msgspec.Struct, frozen=True):
    """What `session/list` shows of a session: its header, last title, last event time, and
    whether it is archived."""

    header: SessionHeader
    title: str | None
    updated_at: int | None
    """The time of its last event; None when it has none."""
    summarized: bool = True
    """False when its title and last event could not be read (loading it says why)."""
    archived: bool = False
    """Whether its last `session/archived` event archived it (`session/list` leaves it out)."""


ArchiveFilter = Literal["exclude", "include", "only"]
"""Which sessions a list page holds by archive state (`session/list`'s unstable `archived`)."""

ListPosition = tuple[int, str]
"""A place in `session/list`'s order: a session's (createdAt, id). Newest first: a page after
a position holds the sessions that sort before it."""


class ListedPage(msgspec.Struct, frozen=True):
    """One page of `Store.list_page`: its sessions, newest first, and where the next page
    starts (None: no session follows)."""

    sessions: list[ListedSession]
    next_after: ListPosition | None


def listed_cwd(cwd: str) -> str:
    """A working directory as the list filter compares it (`/a/./b/` and `/a/b` are one)."""
    return os.path.normpath(cwd)


def archive_keeps(wanted: ArchiveFilter, archived: bool) -> bool:
    """Whether a session archived or not is listed under the filter."""
    return wanted == "include" or archived == (wanted == "only")


class HistorySource(Protocol):
    """One stored session, read for the history API (SPEC 3.1, 3.2)."""

    @property
    def header(self) -> SessionHeader: ...

    @property
    def last_seq(self) -> int:
        """The last stored seq as of the last `refresh` (or the opening)."""

    async def refresh(self) -> None:
        """Look again for appends (another process may be writing the session)."""

    async def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        """SPEC 3.1's page ending before `end`: its canonical records, reading only those."""

    async def records(self, lo: int, hi: int) -> list[StorageRecord]:
        """The canonical packing of the stored events in `[lo, hi)`."""

    async def has_child(self, child_id: str) -> bool:
        """Whether the log holds a `subagent/start` for `child_id`."""


class Watch(Protocol):
    """A follower's wake-ups for one session, registered before its first read: whatever is
    appended after that wakes a `wait` (or the poll does), so a read by seq after each wake
    misses nothing."""

    async def wait(self, poll: float) -> None:
        """Until the session may have grown: `poll` seconds for an engine that polls."""

    def close(self) -> None: ...


class PollingWatch:
    """The `Watch` of an engine with no notifications: every wait is the poll."""

    async def wait(self, poll: float) -> None:
        await anyio.sleep(poll)

    def close(self) -> None:
        pass


class BatchWrites:
    """`flush` and `sync` of a writer whose one `_write` takes its queued events as one batch."""

    async def _write(self, *, sync: bool) -> None:
        raise NotImplementedError

    async def flush(self) -> None:
        await self._write(sync=False)

    async def sync(self) -> None:
        await self._write(sync=True)


class PollingEngine:
    """What the engines without notifications share: followers poll, nothing is left to
    prepare once the store is built, and a delete, once started, finishes (shielded from
    cancellation) in a worker thread."""

    async def prepare(self) -> None:
        pass  # checked when the store was built

    def watch(self, session_id: str) -> PollingWatch:
        return PollingWatch()

    async def delete(self, session_id: str) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._delete, session_id)

    def _delete(self, session_id: str) -> None:
        raise NotImplementedError


class Store(Protocol):
    """Every session of one store (a directory of JSONL logs, a database...)."""

    @property
    def url(self) -> str:
        """The store's URL as it may be shown: a password in it is `***`."""

    async def prepare(self) -> None:
        """Check that the store can be used (a database: connect, create or check its tables)
        before serving, so that one that cannot says why at once (`LogError`, `OSError`)."""

    async def create(self, header: SessionHeader) -> Writer:
        """A new session, its header stored durably before this returns (`SessionExists`)."""

    async def open(self, session_id: str, now_ms: int) -> Opened:
        """Claim the session's writer (`LogLocked` if another holds it), then recover it."""

    async def open_tail(self, session_id: str, now_ms: int, max_messages: int) -> Opened:
        """`open` for a load that replays the newest `max_messages` messages: the log is held
        from its base (`core.tail`), read from the end; the rest stays in the store."""

    async def header(self, session_id: str) -> SessionHeader:
        """A session's header (`SessionNotFound`), reading nothing else of it."""

    async def exists(self, session_id: str) -> bool: ...

    async def read(self, session_id: str) -> StoredLog:
        """A whole session, without changing it (a torn tail is ignored)."""

    async def history(self, session_id: str) -> HistorySource:
        """The session for paging and following, refreshed (`SessionNotFound`)."""

    async def list_sessions(self) -> list[ListedSession]:
        """Every readable session (an unreadable one is left out, with a warning)."""

    async def list_page(
        self, cwd: str | None, after: ListPosition | None, limit: int, archived: ArchiveFilter
    ) -> ListedPage:
        """Up to `limit` sessions of `session/list`, newest first (by createdAt, then id):
        those before `after`, in `cwd` (compared as `listed_cwd` makes it) when given, kept by
        `archived`; subagent children are never listed. Reads only the page's sessions (and the
        store's list index), however many the store holds. An unreadable session is left out,
        with a warning; the page's `next_after` still moves past it."""

    async def session_ids(self) -> list[str]:
        """The id of every session the store holds, readable or not, sorted."""

    async def lines(self, session_id: str) -> SessionLines:
        """The session as lines (`SessionNotFound`, maybe only once they are read)."""

    async def damage(self) -> list[str]:
        """What the engine's own check of the whole store finds wrong, a line each (SQLite's
        `quick_check`): nothing when it is whole or the engine has no such check."""

    def watch(self, session_id: str) -> Watch:
        """Wake-ups for the appends to a session from now on (`close` it when done)."""

    async def delete(self, session_id: str) -> None:
        """Remove a session (`LogLocked` while another process writes it)."""

    async def write_copy(self, header: SessionHeader, records: Sequence[StorageRecord]) -> None:
        """Store a session as given, record for record (`SessionExists` if it is there)."""

    async def put_blob(self, session_id: str, data: bytes) -> str:
        """Keep `data` with the session under its SHA-256 digest (lowercase hex), which is
        returned; putting the same bytes again changes nothing. Durable before it returns."""

    async def get_blob(self, session_id: str, sha256: str) -> bytes | None:
        """The bytes kept under `sha256` for the session; None when there are none
        (`ValueError` for what is not a digest)."""

    async def blob_digests(self, session_id: str) -> list[str]:
        """The digests of every blob kept for the session, sorted."""

    async def aclose(self) -> None:
        """Release what the store holds (connections, threads)."""


async def copy_blobs(source: Store, source_id: str, target: Store, target_id: str) -> None:
    """Keep every blob of session `source_id` of `source` for `target_id` in `target` too."""
    for sha256 in await source.blob_digests(source_id):
        data = await source.get_blob(source_id, sha256)
        if data is not None:
            await target.put_blob(target_id, data)


async def follow_stored(
    store: Store, session_id: str, next_seq: int, interval: float = FOLLOW_POLL_S
) -> AsyncIterator[list[SessionEvent]]:
    """The events appended to a stored session from `next_seq` on, a batch per look, in
    order, gapless: whoever writes it, in this process or another. Ends with
    `SessionNotFound` once the session is deleted."""
    watch = store.watch(session_id)
    try:
        source = await store.history(session_id)
        unreadable = False
        while True:
            try:
                events = await _appended(store, source, next_seq)
            except OSError as exc:
                # The store cannot be read for now (a database failing over or restarting):
                # the next wake-up or poll reads again from the same seq.
                if not unreadable:
                    log.warning("following %s: the store cannot be read: %s", session_id, exc)
                unreadable, events = True, []
            else:
                unreadable = False
            if events:
                next_seq = events[-1].seq + 1
                yield events
                continue
            await watch.wait(interval)
    finally:
        watch.close()


async def _appended(store: Store, source: HistorySource, next_seq: int) -> list[SessionEvent]:
    """What the session holds from `next_seq` on (`SessionNotFound` once it is deleted)."""
    await source.refresh()
    if source.last_seq >= next_seq:
        records = await source.records(next_seq, source.last_seq + 1)
        events = [e for record in records for e in decode_storage_record(record)]
        if events:
            return events
    if not await store.exists(source.header.id):
        raise SessionNotFound(f"unknown session {source.header.id!r}")
    return []


async def fork_stored(
    store: Store, parent: StoredLog, through_seq: int, header: SessionHeader, now_ms: int
) -> Opened:
    """A new session `header` whose log starts with `parent`'s events `0..through_seq` (kept
    with their seqs, a row the cut falls inside clipped), then `session/forked` and what closes
    a turn the cut leaves open: stored in one copy, then opened for writing (its claim held).
    What the parent stores is copied as it is, its checkpoints' blobs too (a rewind in the
    fork restores what the copied turns changed); nothing waits for a turn running in it."""
    records = fork_records(parent.records, parent.header.id, through_seq, now_ms)
    # Shielded: once the copy exists, its writer (and claim) must reach the caller.
    with anyio.CancelScope(shield=True):
        await store.write_copy(header, records)
        await copy_blobs(store, parent.header.id, store, header.id)
        opened = await store.open(header.id, now_ms)
    return opened
