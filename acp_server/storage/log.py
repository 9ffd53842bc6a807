"""The JSONL session log file (SPEC 2.2 to 2.5): reading, writing and recovering one log.

A log is a header line followed by storage records (plain events and chunk rows), either as
plain JSON lines (`session.jsonl`) or as a sequence of Zstandard frames, one per append batch,
each holding whole lines (`session.jsonl.zst`). Line numbers in errors count from 1, the
header being line 1, as editors and `sed -n` count them.

Reading never changes a file; only `LogWriter` (which holds an exclusive lock) does.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Final, Literal, cast

import msgspec
import zstandard

from ..core.chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    ChunkRowError,
    StorageRecord,
    decode_record_json,
    decode_storage_record,
    pack_chunk_runs,
    validate_row,
)
from ..core.events import EventError, SessionEvent
from ..core.header import SESSION_FORMAT_VERSION, SessionHeader
from ..core.paging import record_count, record_start

Compression = Literal["none", "zstd"]

PLAIN_LOG_NAME: Final = "session.jsonl"
ZSTD_LOG_NAME: Final = "session.jsonl.zst"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
ZSTD_MAX_BLOCK_SIZE: Final = 128 * 1024
"""RFC 8878, 3.1.1.2: no block is larger, whatever its type."""

_encoder: Final = msgspec.json.Encoder()
_json_decoder: Final = msgspec.json.Decoder()


class LogError(Exception):
    """A session log cannot be used; the message says why."""


class CorruptLog(LogError):
    """A log line is malformed, or the events have a seq gap; names the file and line."""

    def __init__(self, path: Path | str, line: int, reason: str) -> None:
        super().__init__(f"{path}: line {line}: {reason}")
        self.path = str(path)
        self.line = line
        self.reason = reason


class UnsupportedVersion(LogError):
    """The log was written in another format version than this build reads."""

    def __init__(self, path: Path | str, found: object) -> None:
        super().__init__(
            f"{path}: unsupported session format version {found!r} "
            f"(this build reads version {SESSION_FORMAT_VERSION})"
        )
        self.path = str(path)
        self.found = found
        self.supported = SESSION_FORMAT_VERSION


class LogLocked(LogError):
    """Another writer holds the log (SPEC 2.4: one writer at a time)."""


@dataclass
class LogContents:
    """What a read found: the header, the records (rows left packed), where content ends."""

    header: SessionHeader
    records: list[StorageRecord]
    """Every body line, decoded and checked; rows are not expanded."""
    event_count: int
    valid_size: int
    """Byte length of the complete content; anything after it is a torn tail."""
    torn_tail: bool

    @cached_property
    def events(self) -> list[SessionEvent]:
        """The logical events, every row expanded (built on first use)."""
        return [event for record in self.records for event in decode_storage_record(record)]


# ---------------------------------------------------------------------------------------------
# Reading.


def parse_header(path: Path | str, raw: bytes) -> SessionHeader:
    """Decode line 1. The version is checked before anything else, so that a log from another
    version reads as unsupported rather than corrupt."""
    try:
        value = _json_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise CorruptLog(path, 1, f"header is not valid JSON: {exc}") from None
    if not isinstance(value, dict) or value.get("type") != "session":
        raise CorruptLog(
            path, 1, 'the first line is not a session header ({"type": "session", ...})'
        )
    if "version" not in value:
        raise CorruptLog(path, 1, "the header has no version")
    version = value["version"]
    if type(version) is not int or version != SESSION_FORMAT_VERSION:
        raise UnsupportedVersion(path, version)
    try:
        return msgspec.convert(value, SessionHeader)
    except msgspec.ValidationError as exc:
        raise CorruptLog(path, 1, f"invalid header: {exc}") from None


def zstd_frame_end(data: memoryview, start: int) -> int | None:
    """The offset just past the Zstandard frame at `start`, or None if the frame is incomplete.

    Walks the frame's block headers (RFC 8878, section 3.1.1) instead of decompressing, so that
    frame boundaries cost nothing to find. Raises ValueError for bytes that are not a frame.
    """
    size = len(data)
    if size - start < 6:
        return None
    if bytes(data[start : start + 4]) != ZSTD_MAGIC:
        raise ValueError("not a Zstandard frame (bad magic number)")
    try:
        pos = start + zstandard.frame_header_size(bytes(data[start : start + 18]))
    except zstandard.ZstdError:
        return None
    has_checksum = data[start + 4] & 0x04
    while True:
        if pos + 3 > size:
            return None
        header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        last, block_type, block_size = header & 1, (header >> 1) & 3, header >> 3
        if block_type == 3:
            raise ValueError("reserved block type")
        if block_size > ZSTD_MAX_BLOCK_SIZE:
            # Corruption, not a torn write: it must not pass for an incomplete final frame.
            raise ValueError(f"block size {block_size} exceeds the format's 128 KiB maximum")
        pos += 3 + (1 if block_type == 1 else block_size)
        if pos > size:
            return None
        if last:
            break
    if has_checksum:
        pos += 4
    return pos if pos <= size else None


def complete_frame_after(data: memoryview, start: int) -> bool:
    """Whether a complete Zstandard frame starts somewhere after `start` (only asked once the
    frame at `start` looks incomplete, so the scan costs nothing on sound logs)."""
    tail = bytes(data[start + 1 :])
    at = tail.find(ZSTD_MAGIC)
    while at >= 0:
        try:
            if zstd_frame_end(data, start + 1 + at) is not None:
                return True
        except ValueError:
            pass
        at = tail.find(ZSTD_MAGIC, at + 1)
    return False


def plain_lines(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines, and the byte length they span (a final line without `\\n` is torn)."""
    end = data.rfind(b"\n") + 1
    return data[:end].split(b"\n")[:-1], end


def zstd_lines(path: Path | str, data: bytes) -> tuple[list[bytes], int]:
    """Lines of every complete frame, and the byte length those frames span."""
    view = memoryview(data)
    decompressor = zstandard.ZstdDecompressor()
    lines: list[bytes] = []
    offset = 0
    while offset < len(data):
        try:
            end = zstd_frame_end(view, offset)
        except ValueError as exc:
            raise CorruptLog(path, len(lines) + 1, f"at byte {offset}: {exc}") from None
        if end is None:
            if complete_frame_after(view, offset):
                # Appends only ever add frames at the end, so a torn write is the last frame:
                # an incomplete frame with a complete one after it is damage, not a torn write.
                raise CorruptLog(
                    path,
                    len(lines) + 1,
                    f"frame at byte {offset} is incomplete, but complete frames follow it",
                )
            break  # a torn final frame
        try:
            text = decompressor.decompressobj().decompress(view[offset:end])
        except zstandard.ZstdError as exc:
            raise CorruptLog(path, len(lines) + 1, f"frame at byte {offset}: {exc}") from None
        if text and not text.endswith(b"\n"):
            raise CorruptLog(path, len(lines) + 1, f"frame at byte {offset} ends inside a line")
        lines.extend(text.split(b"\n")[:-1])
        offset = end
    return lines, offset


def parse_log(
    path: Path | str,
    data: bytes,
    compression: Compression,
    progress: Callable[[int, int], None] | None = None,
) -> LogContents:
    """Decode a whole log from its bytes, checking every record and the seq chain."""
    lines, valid_size = zstd_lines(path, data) if compression == "zstd" else plain_lines(data)
    if not lines:
        raise CorruptLog(path, 1, "the log has no complete header line")
    header = parse_header(path, lines[0])
    records: list[StorageRecord] = []
    expected = 0
    total = len(lines)
    for number, raw in enumerate(lines[1:], start=2):
        try:
            record = decode_record_json(raw)
            if type(record) in ROW_CLASSES:
                validate_row(cast(ChunkRow, record))
        except (ChunkRowError, EventError) as exc:
            raise CorruptLog(path, number, str(exc)) from None
        first = record_start(record)
        if first != expected:
            raise CorruptLog(path, number, f"seq gap: expected seq {expected}, found {first}")
        expected += record_count(record)
        records.append(record)
        if progress is not None and number % 4096 == 0:
            progress(number, total)
    return LogContents(header, records, expected, valid_size, valid_size != len(data))


def log_compression(path: Path) -> Compression:
    return "zstd" if path.name.endswith(".zst") else "none"


def read_log(path: Path | str, progress: Callable[[int, int], None] | None = None) -> LogContents:
    """Read a log without changing it; a torn final line (or frame) is ignored."""
    path = Path(path)
    return parse_log(path, path.read_bytes(), log_compression(path), progress)


# ---------------------------------------------------------------------------------------------
# Writing.


def encode_records(records: Sequence[Any]) -> bytes:
    """Records as JSON lines, each ending in `\\n`."""
    encode = _encoder.encode
    return b"".join([encode(r) + b"\n" for r in records])


@dataclass
class LogWriter:
    """The one writer of a log: buffers appended events, writes them as one batch per flush.

    `flush()` hands the batch to the OS (a crash of this process then loses nothing);
    `sync()` also fsyncs it (a crash of the machine then loses nothing). When to call which is
    the loop's policy (SPEC 2.4); this class only makes each call cheap and atomic per batch.
    """

    path: Path
    fd: int
    header: SessionHeader
    next_seq: int
    pack: bool = True
    compression: Compression = "none"
    _pending: list[SessionEvent] = field(default_factory=list)
    _compressor: zstandard.ZstdCompressor | None = None

    @classmethod
    def open(
        cls, path: Path, header: SessionHeader, *, next_seq: int, pack: bool = True, create: bool
    ) -> LogWriter:
        """Open and lock the log at `path`; with `create`, write its header (it must not exist).

        Raises `LogLocked` when another writer holds it, `FileExistsError` when `create` finds
        a log already there.
        """
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogLocked(f"{path}: the session is open for writing in another process") from None
        os.lseek(fd, 0, os.SEEK_END)
        writer = cls(path, fd, header, next_seq, pack, log_compression(path))
        if writer.compression == "zstd":
            writer._compressor = zstandard.ZstdCompressor(write_checksum=True)
        if create:
            writer._write(encode_records([header]))
            writer.sync()
        return writer

    @property
    def closed(self) -> bool:
        return self.fd < 0

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def truncate(self, size: int) -> None:
        """Cut the file to `size` bytes (recovery drops a torn tail before the next append)."""
        os.ftruncate(self.fd, size)
        os.lseek(self.fd, 0, os.SEEK_END)

    def append(self, events: Sequence[SessionEvent]) -> None:
        """Queue events for the next flush; their seqs must continue the log without a gap.

        An out-of-order batch is refused whole: nothing of it is queued.
        """
        for offset, event in enumerate(events):
            if event.seq != self.next_seq + offset:
                raise ValueError(
                    f"append out of order: expected seq {self.next_seq + offset}, got {event.seq}"
                )
        self.next_seq += len(events)
        self._pending.extend(events)

    def append_one(self, event: SessionEvent) -> None:
        """`append` for a single event: the hot path while a model streams."""
        if event.seq != self.next_seq:
            raise ValueError(f"append out of order: expected seq {self.next_seq}, got {event.seq}")
        self.next_seq += 1
        self._pending.append(event)

    def flush(self) -> None:
        """Write the queued events as one batch (packed unless `pack` is off)."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        records = pack_chunk_runs(batch) if self.pack else batch
        self._write(encode_records(records))

    def sync(self) -> None:
        """Flush, then fsync: what was appended is on disk when this returns."""
        self.flush()
        os.fsync(self.fd)

    def close(self) -> None:
        """Sync and release the lock. Safe to call twice."""
        if self.closed:
            return
        try:
            self.sync()
        finally:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = -1

    def _write(self, payload: bytes) -> None:
        if self._compressor is not None:
            payload = self._compressor.compress(payload)
        view = memoryview(payload)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
