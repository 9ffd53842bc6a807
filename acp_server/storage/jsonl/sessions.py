"""The sessions root: one directory per session, holding its log (SPEC 2.2).

`SessionStore` maps validated session ids to log files and opens them for reading, for
creation, or for continuation (with the recovery of SPEC 2.5). It holds no session state.

A log that cannot be written (a read-only directory, a full disk) is still opened for
continuation, read-only: its writer starts failed, its events are exactly what the file holds,
and recovery's closers wait until it is reopened with write access (`reopen`).

Beside a log, `chunk-checks.jsonl` keeps the chunk checks of its long runs of chunk lines
(`acp_server.core.chunk_checks`): its writer appends them, and a continuation that found runs
without one (a log written elsewhere) writes the file anew. Only a continuation reads it; it is
a cache, and a missing or damaged one only makes a load slower. `seek-points.jsonl` is another
(`acp_server.core.seek_points`): its writer appends where records begin, every 256 KiB or so, and
the history index starts a page in the middle of the log from there.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import msgspec

from ...core.chunk_checks import ChunkCheck, decode_checks, encode_checks
from ...core.chunk_rows import StorageRecord
from ...core.event_log import EventLog
from ...core.events import SessionEvent
from ...core.header import SessionHeader
from ...core.ids import validate_session_id
from ...core.recovery import interrupted_turn_closers
from ...core.tail import NOT_PLAIN, TailPrefix, TailRead, fold_prefix, prefix_before
from ..collection import collection_paused
from ..errors import CorruptLog, LogError, LogWriteFailed
from ..errors import SessionExists as SessionExists
from ..errors import SessionNotFound as SessionNotFound
from .lines import (
    PLAIN_LOG_NAME,
    READ_ONLY_ERRNOS,
    SEEK_NAME,
    ZSTD_LOG_NAME,
    Compression,
    LogLines,
    MappedLines,
    read_header,
)
from .log import LogContents, read_kept_log, read_log
from .tail_prefix import PREFIX_NAME, read_prefix
from .writer import LogWriter

log = logging.getLogger(__name__)


class ContinuedLog(msgspec.Struct):
    """A log opened for continuation: its writer and its (recovered) events as records."""

    writer: LogWriter
    log: EventLog
    dropped_torn_tail: bool
    closers: list[SessionEvent]
    """Events recovery appended to close an interrupted turn (empty if none was needed)."""

    @property
    def events(self) -> list[SessionEvent]:
        return self.log.events()


class SessionStore:
    def __init__(
        self, root: Path | str, *, pack: bool = True, compression: Compression = "none"
    ) -> None:
        self.root = Path(root)
        self.pack = pack
        self.compression = compression

    def session_dir(self, session_id: str) -> Path:
        """The directory of a session; the id is validated before any path is built."""
        return self.root / validate_session_id(session_id)

    def log_path(self, session_id: str) -> Path:
        """The existing log of a session (plain or Zstandard); `SessionNotFound` if none."""
        directory = self.session_dir(session_id)
        for name in (PLAIN_LOG_NAME, ZSTD_LOG_NAME):
            candidate = directory / name
            if candidate.is_file():
                return candidate
        raise SessionNotFound(f"unknown session {session_id!r}")

    def exists(self, session_id: str) -> bool:
        try:
            self.log_path(session_id)
        except SessionNotFound:
            return False
        return True

    def create(self, header: SessionHeader) -> LogWriter:
        """Create a session's directory and log, with its header written and fsynced.

        On failure (a full disk, no file descriptors left...) nothing of the session is left
        behind: a half-made session would be listed, and warned about, forever.
        """
        directory = self.session_dir(header.id)
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            directory.mkdir()
        except FileExistsError:
            raise SessionExists(f"session {header.id!r} already exists") from None
        name = ZSTD_LOG_NAME if self.compression == "zstd" else PLAIN_LOG_NAME
        path = directory / name
        writer: LogWriter | None = None
        try:
            writer = LogWriter.open(path, header, next_seq=0, pack=self.pack, create=True)
            writer.checks_path = directory / CHECKS_NAME
            writer.prefix, writer.prefix_path = TailPrefix(), directory / PREFIX_NAME
            writer.seek_path = directory / SEEK_NAME
            fsync_dir(directory)
            fsync_dir(self.root)
        except BaseException:
            if writer is not None:
                with contextlib.suppress(LogError, OSError):
                    writer.close()
            _remove_new_session(directory, path)
            raise
        return writer

    def header(self, session_id: str) -> SessionHeader:
        """A session's header, reading no more of its log than line 1 (checked like `read`)."""
        path = self.log_path(session_id)
        header = read_header(path)
        check_header_id(path, header, session_id)
        return header

    def read(
        self, session_id: str, progress: Callable[[int, int], None] | None = None
    ) -> LogContents:
        """Read a session's log without changing it (a torn tail is ignored)."""
        path = self.log_path(session_id)
        contents = read_log(path, progress)
        check_header_id(path, contents.header, session_id)
        return contents

    def continue_session(self, session_id: str, now_ms: int) -> ContinuedLog:
        """Open a log to append to it, after the recovery of SPEC 2.5.

        Takes the writer's lock first, so that nothing changes under the read. A torn final
        line is truncated away; a turn left open by a dead process is closed with an error
        result for each unanswered tool call, the missing `step/end` and
        `turn/end {kind: "interrupted"}`, written and fsynced before this returns.

        A log that cannot be written (read-only, or the recovery's writes fail) is still
        opened: its writer's `failure` says why, and its events are what the file holds.
        """
        path = self.log_path(session_id)
        try:
            # The header is re-read below under the lock; a placeholder is enough to open.
            writer = LogWriter.open(
                path, _PLACEHOLDER_HEADER, next_seq=0, pack=self.pack, create=False
            )
        except OSError as exc:
            if exc.errno not in READ_ONLY_ERRNOS:
                raise
            writer = LogWriter.open_read_only(path, _PLACEHOLDER_HEADER, next_seq=0, failure=exc)
        try:
            return self._recover(writer, session_id, now_ms)
        except BaseException:
            writer.close()
            raise

    def reopen(self, writer: LogWriter, session_id: str, now_ms: int) -> ContinuedLog:
        """Continue a log again after its writer failed: re-read it, drop what a failed write
        left, close the interrupted turn (2.5). The lock is kept when the writer could write;
        a read-only one is closed and the log opened anew. The writer returned may still fail.
        """
        if not writer.writable:
            writer.close()
            return self.continue_session(session_id, now_ms)
        writer.reset()
        return self._recover(writer, session_id, now_ms)

    def _recover(self, writer: LogWriter, session_id: str, now_ms: int) -> ContinuedLog:
        path = writer.path
        checks_path = path.parent / CHECKS_NAME
        checks = _read_checks(checks_path)
        with collection_paused():
            lines = (
                MappedLines.open(path, writer.fd) if writer.compression == "none" else None
            ) or (LogLines(path, io.BufferedReader(_FdReader(writer.fd)), writer.compression))
            contents = read_kept_log(lines, checks)
            event_log = EventLog(contents.records)
        check_header_id(path, contents.header, session_id)
        writer.header = contents.header
        writer.next_seq = contents.event_count
        writer.count_lines(contents.lines)
        if not writer.writable:
            return ContinuedLog(writer, event_log, False, [])  # nothing can change on disk
        writer.checks_path = checks_path
        writer.seek_path = path.parent / SEEK_NAME
        if contents.new_checks or len(contents.used_checks) != len(checks):
            _write_checks(checks_path, [*contents.used_checks, *contents.new_checks])
        plain = list(event_log.plain_events())
        writer.prefix = fold_prefix(TailPrefix(), plain)
        writer.prefix_path = path.parent / PREFIX_NAME
        closers = interrupted_turn_closers(plain, event_log.length, now_ms)
        try:
            if contents.torn_tail:
                writer.truncate(contents.valid_size)
            if closers:
                writer.append(closers)
            if closers or contents.torn_tail:
                writer.sync()
        except LogWriteFailed:
            # The writer refuses writes from now on; the events stay what the file held.
            return ContinuedLog(writer, event_log, False, [])
        writer.keep_prefix()
        for event in closers:
            event_log.append(event)
        return ContinuedLog(writer, event_log, contents.torn_tail, closers)

    def continue_tail(self, session_id: str, now_ms: int, max_messages: int) -> ContinuedLog:
        """`continue_session` for a load of the newest `max_messages` messages: the log held
        from its base (`core.tail`), read backward from the end through an index, its prefix
        from `tail-prefix.jsonl`. A log without that file (or one that cannot be written) is
        continued whole."""
        from .index import LogIndex  # a load without a tail needs no index

        path = self.log_path(session_id)
        kept = read_prefix(path.parent / PREFIX_NAME)
        if kept is None:
            return self.continue_session(session_id, now_ms)
        try:
            writer = LogWriter.open(
                path, _PLACEHOLDER_HEADER, next_seq=0, pack=self.pack, create=False
            )
        except OSError as exc:
            if exc.errno not in READ_ONLY_ERRNOS:
                raise
            return self.continue_session(session_id, now_ms)
        try:
            with collection_paused():
                index = LogIndex.build(path)
                check_header_id(path, index.header, session_id)
                through, known = kept
                # Not this log's (a cache of another one); or a log without a compaction, whose
                # provider history is all of it: read whole, as fast as the checks make it.
                if through > index.length or (through == index.length and not known.compacted):
                    writer.close()
                    return self.continue_session(session_id, now_ms)
                read = TailRead(index.length, max_messages)
                cut, page = index.page(index.length, max_messages)
                read.took(page, cut.start)
                while (wanted := read.wanted()) is not None:
                    read.took(index.records_between(*wanted), wanted[0])
                base = read.base or 0
                lo, hi = min(through, base), max(through, base)
                between = (
                    read.between(lo, hi)
                    if lo >= read.lo
                    else [*_plain(index.records_between(lo, read.lo)), *read.between(read.lo, hi)]
                )
                prefix = prefix_before(known, through, base, between)
                event_log = EventLog(read.held(), base=base, prefix=prefix)
            return self._recover_tail(writer, index.header, event_log, index.indexed_bytes, now_ms)
        except BaseException:
            writer.close()
            raise

    def _recover_tail(
        self,
        writer: LogWriter,
        header: SessionHeader,
        event_log: EventLog,
        valid_size: int,
        now_ms: int,
    ) -> ContinuedLog:
        """`_recover` of a log held from its base. Its line count is unknown: no chunk checks
        are kept for what this writer appends (a later whole read makes them); seek points,
        which are byte offsets, are."""
        writer.header = header
        writer.next_seq = event_log.length
        writer.seek_path = writer.path.parent / SEEK_NAME
        torn_tail = os.fstat(writer.fd).st_size > valid_size
        plain = list(event_log.plain_events())
        writer.prefix = fold_prefix(event_log.prefix, event_log.plain_events(prefix=False))
        writer.prefix_path = writer.path.parent / PREFIX_NAME
        closers = interrupted_turn_closers(plain, event_log.length, now_ms)
        try:
            if torn_tail:
                writer.truncate(valid_size)
            if closers:
                writer.append(closers)
            if closers or torn_tail:
                writer.sync()
        except LogWriteFailed:
            return ContinuedLog(writer, event_log, False, [])
        writer.keep_prefix()
        for event in closers:
            event_log.append(event)
        return ContinuedLog(writer, event_log, torn_tail, closers)

    def delete(self, session_id: str) -> None:
        """Remove a session's directory and everything in it."""
        self.log_path(session_id)  # raises SessionNotFound
        shutil.rmtree(self.session_dir(session_id))

    def session_ids(self) -> list[str]:
        """Ids of the sessions under the root that have a log (invalid names are skipped)."""
        if not self.root.is_dir():
            return []
        ids = []
        for entry in self.root.iterdir():
            try:
                if self.exists(entry.name):
                    ids.append(entry.name)
            except ValueError:
                continue
        return sorted(ids)


def _plain(records: list[StorageRecord]) -> list[SessionEvent]:
    return [cast(SessionEvent, r) for r in records if type(r) not in NOT_PLAIN]


def check_header_id(path: Path, header: SessionHeader, session_id: str) -> None:
    """A log is its directory's session: a header naming another id is a corrupt log, for
    every reader (load, resume, list, the history API)."""
    if header.id != session_id:
        raise CorruptLog(
            path, 1, f"header id {header.id!r} does not match the session {session_id!r}"
        )


CHECKS_NAME = "chunk-checks.jsonl"


def _read_checks(path: Path) -> dict[int, ChunkCheck]:
    try:
        return decode_checks(path.read_bytes())
    except OSError:
        return {}  # none yet, or unreadable: every run is decoded


def _write_checks(path: Path, checks: list[ChunkCheck]) -> None:
    """Replace the check file (a cache: a failure is only logged, nothing is fsynced)."""
    checks.sort(key=lambda check: check.line)
    temporary = path.with_name(path.name + ".new")
    try:
        temporary.write_bytes(encode_checks(checks))
        os.replace(temporary, path)
    except OSError as exc:
        log.debug("%s: chunk checks not kept: %s", path, exc)
        with contextlib.suppress(OSError):
            temporary.unlink()


_PLACEHOLDER_HEADER = SessionHeader(version=0, id="", created_at=0, cwd="")


class _FdReader(io.RawIOBase):
    """A file read with `pread` through the writer's descriptor, leaving its offset alone
    (the writer appends at it)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = os.pread(self.fd, len(buffer), self.position)
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_END:
            offset += os.fstat(self.fd).st_size
        elif whence == os.SEEK_CUR:
            offset += self.position
        self.position = offset
        return offset

    def tell(self) -> int:
        return self.position


def _remove_new_session(directory: Path, path: Path) -> None:
    # No directory walk: it would need a file descriptor, and running out of them is one of
    # the failures this cleans up after. A new session's directory holds its log at most.
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    with contextlib.suppress(OSError):
        directory.rmdir()


def fsync_dir(path: Path) -> None:
    """Make the entries of directory `path` (a file created, renamed or removed) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
