"""The JSONL engine of the store API: one directory of session logs (SPEC 2.2), unchanged.

`JsonlStore` puts the API's async face on `SessionStore` (the sessions root), `LogWriter` (one
log's writer and its lock) and `LogIndex` (a log read backwards, as far as a page needs): their
blocking work runs in anyio's worker threads. A writer's flushes and syncs take their batch on
the event loop and write it in a thread, one at a time, so batches keep their order.

`session/list` pages through the root's list index (`list_index`), reading the logs of the
page's sessions only.

The history indexes are kept per session id, the most recently used `INDEX_CACHE` of them,
and forgotten when their session is deleted.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final

import anyio

from ...core.chunk_rows import StorageRecord, decode_record_json, decode_storage_record
from ...core.events import SessionArchived, SessionEvent, SessionTitle, decode_event
from ...core.header import SessionHeader
from ...core.paging import PageCut
from ..api import (
    ArchiveFilter,
    BatchWrites,
    ListedPage,
    ListedSession,
    ListPosition,
    Opened,
    PollingEngine,
    StoredLog,
    archive_keeps,
)
from ..errors import LogError, LogLocked, SessionNotFound
from . import blobs
from .lines import READ_BLOCK, Compression, LogLines, log_compression
from .list_index import Created, Deleted, ListIndex, created_line
from .sessions import ContinuedLog, SessionStore
from .writer import LogWriter

if TYPE_CHECKING:
    # Imported by the first history request: a start and a session/load need no page index.
    from .index import LogIndex

log = logging.getLogger(__name__)

INDEX_CACHE: Final = 64
"""History indexes kept for sessions that are not live (each holds one entry per record)."""


class JsonlWriter(BatchWrites):
    """The store API's `Writer` over a `LogWriter`."""

    def __init__(self, raw: LogWriter, files: SessionStore, list_index: ListIndex) -> None:
        self.raw = raw
        self.files = files
        self.list_index = list_index
        self._lock = anyio.Lock()

    @property
    def header(self) -> SessionHeader:
        return self.raw.header

    @property
    def name(self) -> str:
        return str(self.raw.path)

    @property
    def next_seq(self) -> int:
        return self.raw.next_seq

    @property
    def failure(self) -> OSError | None:
        return self.raw.failure

    @property
    def writable(self) -> bool:
        return self.raw.writable

    @property
    def closed(self) -> bool:
        return self.raw.closed

    @property
    def has_pending(self) -> bool:
        return self.raw.has_pending

    def append(self, events: Sequence[SessionEvent]) -> None:
        self.raw.append(events)

    def append_one(self, event: SessionEvent) -> None:
        self.raw.append_one(event)

    async def _write(self, *, sync: bool) -> None:
        async with self._lock:
            batch = self.raw.take_pending()
            if batch or sync:
                await anyio.to_thread.run_sync(self._write_batch, batch, sync)

    def _write_batch(self, batch: list[SessionEvent], sync: bool) -> None:
        self.raw.write_events(batch, sync=sync)
        archived = last_archive_state(batch)
        if archived is not None:
            self.list_index.archived(self.header.id, archived)

    async def close(self) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self.raw.close)

    async def reopen(self, now_ms: int) -> Opened:
        with anyio.CancelScope(shield=True):
            continued = await anyio.to_thread.run_sync(
                self.files.reopen, self.raw, self.header.id, now_ms
            )
        return _opened(continued, self.files, self.list_index)


class JsonlHistory:
    """The store API's `HistorySource` over a `LogIndex`."""

    def __init__(self, index: LogIndex, session_id: str) -> None:
        self.index = index
        self.session_id = session_id

    @property
    def header(self) -> SessionHeader:
        return self.index.header

    @property
    def last_seq(self) -> int:
        return self.index.last_seq

    async def refresh(self) -> None:
        await anyio.to_thread.run_sync(self._refresh)

    def _refresh(self) -> None:
        try:
            self.index.refresh()
        except FileNotFoundError:
            raise SessionNotFound(f"unknown session {self.session_id!r}") from None

    async def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        try:
            return await anyio.to_thread.run_sync(self.index.page, end, max_messages)
        except FileNotFoundError:  # deleted meanwhile
            raise SessionNotFound(f"unknown session {self.session_id!r}") from None

    async def records(self, lo: int, hi: int) -> list[StorageRecord]:
        try:
            return await anyio.to_thread.run_sync(self.index.records_between, lo, hi)
        except FileNotFoundError:
            raise SessionNotFound(f"unknown session {self.session_id!r}") from None

    async def has_child(self, child_id: str) -> bool:
        children = await anyio.to_thread.run_sync(lambda: self.index.subagent_children)
        return child_id in children


class JsonlStore(PollingEngine):
    """The store API over a sessions root of JSONL logs."""

    def __init__(
        self, root: Path | str, *, pack: bool = True, compression: Compression = "none"
    ) -> None:
        self.files = SessionStore(root, pack=pack, compression=compression)
        self.list_index = ListIndex(self.files.root, self._scan)
        self._indexes: OrderedDict[str, LogIndex] = OrderedDict()
        self._cache_lock = threading.Lock()

    @property
    def root(self) -> Path:
        return self.files.root

    @property
    def url(self) -> str:
        return str(self.files.root)

    async def create(self, header: SessionHeader) -> JsonlWriter:
        # Shielded: once the log exists its writer (and lock) must reach the caller.
        with anyio.CancelScope(shield=True):
            raw = await anyio.to_thread.run_sync(self._create, header)
        return JsonlWriter(raw, self.files, self.list_index)

    def _create(self, header: SessionHeader) -> LogWriter:
        with self.list_index.change() as record:
            raw = self.files.create(header)
            record(created_line(header, False))
        return raw

    async def open(self, session_id: str, now_ms: int) -> Opened:
        with anyio.CancelScope(shield=True):
            continued = await anyio.to_thread.run_sync(
                self.files.continue_session, session_id, now_ms
            )
        return _opened(continued, self.files, self.list_index)

    async def open_tail(self, session_id: str, now_ms: int, max_messages: int) -> Opened:
        with anyio.CancelScope(shield=True):
            continued = await anyio.to_thread.run_sync(
                self.files.continue_tail, session_id, now_ms, max_messages
            )
        return _opened(continued, self.files, self.list_index)

    async def header(self, session_id: str) -> SessionHeader:
        return await anyio.to_thread.run_sync(self.files.header, session_id)

    async def exists(self, session_id: str) -> bool:
        return await anyio.to_thread.run_sync(self.files.exists, session_id)

    async def read(self, session_id: str) -> StoredLog:
        contents = await anyio.to_thread.run_sync(self.files.read, session_id)
        return StoredLog(contents.header, contents.records, contents.event_count)

    async def history(self, session_id: str) -> JsonlHistory:
        return JsonlHistory(await anyio.to_thread.run_sync(self._index, session_id), session_id)

    def _index(self, session_id: str) -> LogIndex:
        path = self.files.log_path(session_id)
        with self._cache_lock:  # worker threads of several requests share the cache
            index = self._indexes.get(session_id)
            if index is not None:
                self._indexes.move_to_end(session_id)
        try:
            if index is None or index.path != path:
                # The header is checked as every reader checks it (its bound, its id) first.
                self.files.header(session_id)
                from .index import LogIndex

                index = LogIndex.build(path)
                with self._cache_lock:
                    self._indexes[session_id] = index
                    while len(self._indexes) > INDEX_CACHE:
                        self._indexes.popitem(last=False)
            else:
                index.refresh()
        except FileNotFoundError:  # deleted since it was found
            self._forget(session_id)
            raise SessionNotFound(f"unknown session {session_id!r}") from None
        return index

    def _forget(self, session_id: str) -> None:
        with self._cache_lock:
            self._indexes.pop(session_id, None)

    async def list_sessions(self) -> list[ListedSession]:
        if self._root_is_empty():
            return []  # nothing to read: no worker thread needed
        return await anyio.to_thread.run_sync(self._list)

    def _root_is_empty(self) -> bool:
        # One directory read at most (the first entry), cheap enough for the event loop.
        try:
            with os.scandir(self.files.root) as entries:
                return next(entries, None) is None
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:
            return False  # let the full listing say what is wrong

    def _list(self) -> list[ListedSession]:
        listed = []
        for session_id in self.files.session_ids():
            item = self._listed(session_id)
            if item is not None:
                listed.append(item)
        return listed

    def _listed(self, session_id: str) -> ListedSession | None:
        """One session as a list shows it; None (with a warning) when its header cannot be
        read, or (silently) when it is gone."""
        try:
            header = self.files.header(session_id)
        except SessionNotFound:
            return None  # deleted since it was found
        except (LogError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno in PROCESS_ERRNOS:
                raise  # not this session's fault: every other one would fail the same way
            log.warning("session/list: skipped session %s: %s", session_id, exc)
            return None
        try:
            title, last_time, archived = summarize(self.files.log_path(session_id))
        except (LogError, OSError, ValueError) as exc:
            # Still listed: the client can see it and delete it; loading it says what broke.
            log.warning("session/list: session %s: %s", session_id, exc)
            return ListedSession(header, None, None, summarized=False)
        return ListedSession(header, title, last_time, archived=archived)

    async def list_page(
        self,
        cwd: str | None,
        after: ListPosition | None,
        limit: int,
        archived: ArchiveFilter,
    ) -> ListedPage:
        return await anyio.to_thread.run_sync(self._list_page, cwd, after, limit, archived)

    def _list_page(
        self, cwd: str | None, after: ListPosition | None, limit: int, archived: ArchiveFilter
    ) -> ListedPage:
        """The page's sessions from the list index, then each one's log read (its header, its
        last title, event and archive change): a session the index wrongly holds (unreadable,
        gone, or archived otherwise) is passed over, and the page goes on past it."""
        listed: list[ListedSession] = []
        position = after
        while True:
            wanted = limit + 1 - len(listed)  # one more: whether a session follows the page
            candidates = self.list_index.candidates(cwd, position, archived, wanted)
            for candidate in candidates:
                if len(listed) == limit:
                    return ListedPage(listed, position)
                position = candidate.position
                item = self._listed(candidate.id)
                if item is None:
                    continue
                if item.summarized and item.archived != candidate.archived:
                    self.list_index.archived(candidate.id, item.archived)
                    if not archive_keeps(archived, item.archived):
                        continue
                listed.append(item)
            if len(candidates) < wanted:
                return ListedPage(listed, None)

    def _scan(self) -> Iterator[Created]:
        """The list index's lines for every session in the root whose header can be read."""
        for session_id in self.files.session_ids():
            try:
                header = self.files.header(session_id)
            except (LogError, OSError):
                continue  # a page would leave it out anyway (saying why)
            try:
                archived = summarize(self.files.log_path(session_id))[2]
            except (LogError, OSError, ValueError):
                archived = False  # listed unsummarized, as unarchived
            yield created_line(header, archived)

    async def session_ids(self) -> list[str]:
        return await anyio.to_thread.run_sync(self.files.session_ids)

    async def lines(self, session_id: str) -> FileLines:
        return FileLines(await anyio.to_thread.run_sync(self.files.log_path, session_id))

    async def damage(self) -> list[str]:
        return []  # each log is checked on its own

    async def prepare(self) -> None:
        await anyio.to_thread.run_sync(self._prepare)

    def _prepare(self) -> None:
        # Made now rather than by the first session/new: a directory that cannot be made (a
        # typo, /proc/..., a file in its place) or read is refused before serving. One that
        # cannot be written is served: its sessions load read-only, and a prompt says so.
        root = self.files.root
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LogError(f"{root}: cannot make the sessions directory: {_said(exc)}") from None
        if not os.access(root, os.R_OK | os.X_OK):
            raise LogError(f"{root}: the sessions directory cannot be read")

    def _delete(self, session_id: str) -> None:
        path = self.files.log_path(session_id)  # raises SessionNotFound
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LogLocked(
                    f"{path}: the session is open for writing in another process"
                ) from None
            with self.list_index.change() as record:
                self.files.delete(session_id)
                record(Deleted(session_id))
        finally:
            os.close(fd)
        self._forget(session_id)

    async def write_copy(self, header: SessionHeader, records: Sequence[StorageRecord]) -> None:
        await anyio.to_thread.run_sync(self._write_copy, header, records)

    def _write_copy(self, header: SessionHeader, records: Sequence[StorageRecord]) -> None:
        with self.list_index.change() as record:
            writer = self.files.create(header)
            record(created_line(header, last_archive_state(records) or False))
        try:
            writer.write_records(records)
            writer.sync()
        finally:
            writer.close()

    async def put_blob(self, session_id: str, data: bytes) -> str:
        directory = self.files.session_dir(session_id)
        with anyio.CancelScope(shield=True):  # once started, the blob is written whole
            sha256 = await anyio.to_thread.run_sync(blobs.put_blob, directory, data)
        return sha256

    async def get_blob(self, session_id: str, sha256: str) -> bytes | None:
        directory = self.files.session_dir(session_id)
        return await anyio.to_thread.run_sync(blobs.get_blob, directory, sha256)

    async def blob_digests(self, session_id: str) -> list[str]:
        directory = self.files.session_dir(session_id)
        return await anyio.to_thread.run_sync(blobs.blob_digests, directory)

    async def aclose(self) -> None:
        self._indexes.clear()


PROCESS_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
"""Failures of this process rather than of one session's files."""


def _opened(continued: ContinuedLog, files: SessionStore, list_index: ListIndex) -> Opened:
    return Opened(
        JsonlWriter(continued.writer, files, list_index),
        continued.log,
        continued.dropped_torn_tail,
        continued.closers,
    )


class FileLines:
    """The store API's `SessionLines` of one log file, read as they are iterated."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.count = 0
        self.torn_tail = False
        self.size = 0
        self._path = path

    def __iter__(self) -> Iterator[bytes]:
        with open(self._path, "rb") as file:
            lines = LogLines(self._path, file, log_compression(self._path))
            for line in lines:
                self.count = lines.count
                self.size = lines.valid_size
                yield line
            self.torn_tail = lines.torn_tail


# ---------------------------------------------------------------------------------------------
# session/list summaries.

_TITLE_LINE: Final = b'{"type":"session/title"'
_ARCHIVED_LINE: Final = b'{"type":"session/archived"'


def list_summary(path: Path) -> tuple[str | None, int | None]:
    """A session's latest title and the time of its last event (`summarize`'s first two)."""
    title, last_time, _ = summarize(path)
    return title, last_time


def summarize(path: Path) -> tuple[str | None, int | None, bool]:
    """A session's latest title, the time of its last event, and whether its last
    `session/archived` event archived it, for `session/list`.

    Listing must stay cheap however long the logs are, so nothing is validated here and only
    three lines are decoded: the last one, the last title and the last archive change (found
    by a byte search for the line prefix the writer produces). Memory stays bounded whatever
    the file holds: a plain log is searched backwards a block at a time, a Zstandard one read a
    frame at a time. Loading the session checks everything.
    """
    with open(path, "rb") as file:
        if log_compression(path) == "zstd":
            return _zstd_summary(path, file)
        return _plain_summary(file.fileno())


def _zstd_summary(path: Path, file: BinaryIO) -> tuple[str | None, int | None, bool]:
    lines = iter(LogLines(path, file, "zstd"))
    next(lines, None)  # the header
    last = title_line = archived_line = None
    for line in lines:
        last = line
        if line.startswith(_TITLE_LINE):
            title_line = line
        elif line.startswith(_ARCHIVED_LINE):
            archived_line = line
    return _title(title_line), _last_time(last), _archived(archived_line)


def _plain_summary(fd: int) -> tuple[str | None, int | None, bool]:
    size = os.fstat(fd).st_size
    end = _rfind(fd, b"\n", size)  # a torn final line is not an event yet
    start = _rfind(fd, b"\n", end) + 1 if end > 0 else 0
    last = _line_at(fd, start) if start > 0 else None  # start 0: only the header
    at = _rfind(fd, b"\n" + _TITLE_LINE, end) if end > 0 else -1
    archived_at = _rfind(fd, b"\n" + _ARCHIVED_LINE, end) if end > 0 else -1
    return (
        _title(_line_at(fd, at + 1) if at >= 0 else None),
        _last_time(last),
        _archived(_line_at(fd, archived_at + 1) if archived_at >= 0 else None),
    )


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


def last_archive_state(records: Sequence[StorageRecord]) -> bool | None:
    """Whether the last `session/archived` among `records` archived the session (None: they
    hold none)."""
    for record in reversed(records):
        if isinstance(record, SessionArchived):
            return record.data.archived
    return None


def _title(line: bytes | None) -> str | None:
    if line is None:
        return None
    event = decode_event(line)
    return event.data.title if isinstance(event, SessionTitle) else None


def _archived(line: bytes | None) -> bool:
    if line is None:
        return False
    event = decode_event(line)
    return event.data.archived if isinstance(event, SessionArchived) else False


def _last_time(line: bytes | None) -> int | None:
    if line is None:
        return None
    return decode_storage_record(decode_record_json(line))[-1].time


def _said(exc: OSError) -> str:
    """What the system said, as a clause: "no such file or directory"."""
    said = exc.strerror or str(exc)
    return said[:1].lower() + said[1:]
