"""Writing a JSONL session log: its one writer, holding an exclusive lock (SPEC 2.4).

A writer whose write or fsync fails cuts the file back to its last complete record and refuses
every later write until the log is reopened, so a full disk or an I/O error never leaves a
record written after a torn one.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

import msgspec

from ...core.chunk_checks import (
    ChunkRuns,
    encode_checks,
)
from ...core.chunk_rows import (
    StorageRecord,
    pack_chunk_runs,
)
from ...core.events import SessionEvent
from ...core.header import SessionHeader
from ...core.paging import record_count, record_start
from ...core.seek_points import SEEK_SPACING, batch_points, encode_points
from ...core.tail import PREFIX_KINDS, TailPrefix, fold_prefix
from ..appends import QueuedAppends
from ..errors import LogLocked, LogWriteFailed
from .lines import Compression, log_compression
from .tail_prefix import write_prefix

if TYPE_CHECKING:
    # Imported where a Zstandard log is read or written: most logs are plain.
    import zstandard


_encoder: Final = msgspec.json.Encoder()
log = logging.getLogger(__name__)


def encode_records(records: Sequence[Any]) -> bytes:
    """Records as JSON lines, each ending in `\\n`."""
    encode = _encoder.encode
    return b"".join([encode(r) + b"\n" for r in records])


class LogWriter(QueuedAppends):
    """The one writer of a log: buffers appended events, writes them as one batch per flush.

    `flush()` hands the batch to the OS (a crash of this process then loses nothing);
    `sync()` also fsyncs it (a crash of the machine then loses nothing). When to call which is
    the loop's policy (SPEC 2.4); this class only makes each call cheap and atomic per batch.

    A write that fails (ENOSPC, EFBIG, EIO...) cuts the file back to where the batch began, a
    failed fsync back to the last successful one, and sets `failure`: from then on every
    append, flush and sync raises `LogWriteFailed` (nothing is ever written after a torn
    record) until `reset()` after the log was re-read. A writer opened `read_only` starts failed.
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        header: SessionHeader,
        next_seq: int,
        pack: bool = True,
        compression: Compression = "none",
    ) -> None:
        self.path = path
        self.fd = fd
        self.header = header
        self.next_seq = next_seq
        self.pack = pack
        self.compression = compression
        self.failure: OSError | None = None
        """Why the log cannot be written now, or None."""
        self.writable = True
        """False for a log opened read-only (its directory or file cannot be written)."""
        self._pending: list[SessionEvent] = []
        self._compressor: zstandard.ZstdCompressor | None = None
        self._size = 0
        """Where the last complete batch ends: a failed write is cut back to it."""
        self._synced_size = 0
        """Where the last successful fsync left the file: a failed fsync is cut back to it."""
        self.checks_path: Path | None = None
        """Where the chunk checks of the runs this writer writes are kept (None: nowhere)."""
        self.seek_path: Path | None = None
        """Where the seek points of this log are kept (None: nowhere)."""
        self._since_point = SEEK_SPACING
        """Bytes of lines written since the last seek point (a reopened writer keeps one first)."""
        self.lines = 0
        """Lines in the file up to `_size` (the header is line 1)."""
        self._synced_lines = 0
        self._runs = ChunkRuns()
        self.prefix: TailPrefix | None = None
        """What a tail open keeps of the events written so far (`core.tail`); None: unknown."""
        self.prefix_path: Path | None = None
        """Where `prefix` is kept when the writer closes (None: nowhere)."""

    @classmethod
    def open(
        cls, path: Path, header: SessionHeader, *, next_seq: int, pack: bool = True, create: bool
    ) -> LogWriter:
        """Open and lock the log at `path`; with `create`, write its header (it must not exist).

        Raises `LogLocked` when another writer holds it, `FileExistsError` when `create` finds
        a log already there, `LogWriteFailed` when the header cannot be written.
        """
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if create else 0)
        writer = cls._locked(path, os.open(path, flags, 0o644), header, next_seq, pack)
        if create:
            try:
                writer._write_batch(encode_records([header]))
                writer.lines = 1
                writer.sync()
            except LogWriteFailed:
                writer.close()
                raise
        return writer

    @classmethod
    def open_read_only(
        cls, path: Path, header: SessionHeader, *, next_seq: int, failure: OSError
    ) -> LogWriter:
        """Open and lock an existing log that cannot be written (`failure` says why): it can be
        read through `fd` and holds the writer's lock, but every write raises `LogWriteFailed`."""
        writer = cls._locked(path, os.open(path, os.O_RDONLY | os.O_CLOEXEC), header, next_seq)
        writer.writable = False
        writer.failure = failure
        return writer

    @classmethod
    def _locked(
        cls, path: Path, fd: int, header: SessionHeader, next_seq: int, pack: bool = True
    ) -> LogWriter:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogLocked(f"{path}: the session is open for writing in another process") from None
        size = os.lseek(fd, 0, os.SEEK_END)
        writer = cls(path, fd, header, next_seq, pack, log_compression(path))
        writer._size = writer._synced_size = size
        if writer.compression == "zstd":
            import zstandard

            writer._compressor = zstandard.ZstdCompressor(write_checksum=True)
        return writer

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def count_lines(self, lines: int) -> None:
        """The file holds `lines` complete lines, as the read that continues it found: the
        number of the next line written, for its chunk checks."""
        self.lines = self._synced_lines = lines

    def reset(self) -> None:
        """Accept writes again after a failure: only once the log has been re-read and
        `next_seq` set from what the file holds."""
        self.failure = None
        self._pending = []
        self._size = self._synced_size = os.lseek(self.fd, 0, os.SEEK_END)

    def truncate(self, size: int) -> None:
        """Cut the file to `size` bytes (recovery drops a torn tail before the next append)."""
        self._check()
        try:
            os.ftruncate(self.fd, size)
        except OSError as exc:
            self.failure = exc
            raise LogWriteFailed(self.path, exc) from exc
        self._size = os.lseek(self.fd, 0, os.SEEK_END)
        self._synced_size = min(self._synced_size, self._size)

    def flush(self) -> None:
        """Write the queued events as one batch (packed unless `pack` is off)."""
        self.write_events(self.take_pending())

    def take_pending(self) -> list[SessionEvent]:
        """The queued events, handed over to be written (`write_events`), in the caller's
        thread: appends go on queueing meanwhile. Raises `LogWriteFailed` once writing failed."""
        self._check()
        batch, self._pending = self._pending, []
        return batch

    def write_events(self, batch: Sequence[SessionEvent], *, sync: bool = False) -> None:
        """Write a batch taken by `take_pending` (then fsync, with `sync`): the blocking half of
        `flush` and `sync`, which may run in a worker thread."""
        self._check()
        if batch:
            self._write_records(pack_chunk_runs(batch) if self.pack else batch)
            self._fold_prefix(batch)
        if sync:
            self._fsync()

    def _fold_prefix(self, records: Sequence[StorageRecord]) -> None:
        if self.prefix is not None and any(type(r) in PREFIX_KINDS for r in records):
            self.prefix = fold_prefix(self.prefix, records)

    def keep_prefix(self) -> None:
        """Write `prefix` beside the log, covering what the writer has written."""
        if self.prefix is not None and self.prefix_path is not None and self.failure is None:
            write_prefix(self.prefix_path, self.next_seq - len(self._pending), self.prefix)

    def sync(self) -> None:
        """Flush, then fsync: what was appended is on disk when this returns."""
        self.flush()
        self._fsync()

    def write_records(self, records: Sequence[StorageRecord]) -> None:
        """Write records as given (a copy of another store's session), one batch."""
        self._check()
        if self._pending:
            raise ValueError("write_records with events queued")
        self.next_seq += sum(record_count(r) for r in records)
        if records:
            self._write_records(records)
            self._fold_prefix(records)

    def _fsync(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as exc:
            # What the kernel kept of the unsynced pages is unknown: keep only what was synced.
            self.lines = self._synced_lines
            self._fail(exc, self._synced_size)
        self._synced_size = self._size
        self._synced_lines = self.lines

    def close(self) -> None:
        """Sync (unless writing failed) and release the lock. Safe to call twice."""
        if self.closed:
            return
        try:
            if self.failure is None:
                self.sync()
                self.keep_prefix()
        finally:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = -1

    def _location(self) -> Path:
        return self.path

    def _write_records(self, records: Sequence[StorageRecord]) -> None:
        """Write records as one batch, then keep the checks of the chunk runs it ended."""
        encode = _encoder.encode
        lines = [encode(record) for record in records]
        offset = self._size
        self._write_batch(b"\n".join([*lines, b""]))
        if self.seek_path is not None:
            points, self._since_point = batch_points(
                [record_start(record) for record in records],
                [len(line) + 1 for line in lines],
                offset,
                self._since_point,
                any_line=self._compressor is None,
            )
            if points:
                self._keep_cache(self.seek_path, encode_points(points))
        first = self.lines + 1
        self.lines += len(lines)
        if self.checks_path is not None:
            checks = self._runs.feed_all(first, lines, records)
            if checks:
                self._keep_cache(self.checks_path, encode_checks(checks))

    def _keep_cache(self, path: Path, data: bytes) -> None:
        """Append to a file kept beside the log (chunk checks, seek points). Both are caches: a
        write that fails costs a later read time, nothing else, so it is not retried and
        nothing is fsynced."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            log.debug("%s: not kept: %s", path, exc)

    def _write_batch(self, payload: bytes) -> None:
        if self._compressor is not None:
            payload = self._compressor.compress(payload)
        view = memoryview(payload)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError as exc:
            self._fail(exc, self._size)
        self._size += len(payload)

    def _fail(self, exc: OSError, keep: int) -> NoReturn:
        """Refuse writes from now on, cut the file back to `keep` bytes, raise."""
        self.failure = exc
        self._pending = []
        self._runs.end()  # its lines may be cut: no check for it
        try:
            os.ftruncate(self.fd, keep)
            os.lseek(self.fd, keep, os.SEEK_SET)
            self._size = self._synced_size = keep
        except OSError:
            pass  # the torn tail stays; reopening the log drops it (SPEC 2.5)
        raise LogWriteFailed(self.path, exc) from exc
