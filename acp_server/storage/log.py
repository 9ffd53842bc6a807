"""The JSONL session log file (SPEC 2.2 to 2.5): reading, writing and recovering one log.

A log is a header line followed by storage records (plain events and chunk rows), either as
plain JSON lines (`session.jsonl`) or as a sequence of Zstandard frames, one per append batch,
each holding whole lines (`session.jsonl.zst`). Line numbers in errors count from 1, the
header being line 1, as editors and `sed -n` count them.

Reading never changes a file; only `LogWriter` (which holds an exclusive lock) does. A writer
whose write or fsync fails cuts the file back to its last complete record and refuses every
later write until the log is reopened, so a full disk or an I/O error never leaves a record
written after a torn one.
"""

from __future__ import annotations

import errno
import fcntl
import io
import itertools
import logging
import mmap
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Literal, NoReturn, Protocol, cast

import msgspec
from msgspec import UNSET

from ..core.chunk_checks import (
    ChunkCheck,
    ChunkRuns,
    KeptRecord,
    Line,
    PackedChunks,
    encode_checks,
    packed_chunks,
    packed_text,
)
from ..core.chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    StorageRecord,
    decode_storage_record,
    pack_chunk_runs,
)
from ..core.events import AssistantChunk, SessionEvent
from ..core.header import SESSION_FORMAT_VERSION, SessionHeader
from ..core.paging import record_count
from .appends import QueuedAppends
from .collection import collection_paused
from .errors import CorruptLog as CorruptLog
from .errors import LogError as LogError
from .errors import LogLocked as LogLocked
from .errors import LogWriteFailed as LogWriteFailed
from .errors import UnsupportedVersion as UnsupportedVersion
from .records import RecordChecker, seq_problem

if TYPE_CHECKING:
    # Imported where a Zstandard log is read or written: most logs are plain.
    import zstandard

Compression = Literal["none", "zstd"]

PLAIN_LOG_NAME: Final = "session.jsonl"
ZSTD_LOG_NAME: Final = "session.jsonl.zst"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
ZSTD_MAX_BLOCK_SIZE: Final = 128 * 1024
"""RFC 8878, 3.1.1.2: no block is larger, whatever its type."""
ZSTD_FRAME_OVERHEAD: Final = 64 * 1024
"""More than a frame holding one line adds to it, compressed (headers, a stored block)."""
MAX_HEADER_LINE: Final = 1024 * 1024
"""The longest header line (line 1) a reader accepts: a longer one is not a session header."""
READ_BLOCK: Final = 1024 * 1024
"""Bytes read from a log file at a time by the readers that stream it."""
LONG_LINE: Final = 4 * READ_BLOCK
"""A plain line longer than this is not held while it is read, but read again once whole."""

_encoder: Final = msgspec.json.Encoder()
_json_decoder: Final = msgspec.json.Decoder()
log = logging.getLogger(__name__)


READ_ONLY_ERRNOS: Final = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""Opening a log for writing fails with these when it may still be read."""


class LogContents(msgspec.Struct, dict=True):
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


def parse_header(path: Path | str, raw: Line) -> SessionHeader:
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
    import zstandard

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


def zstd_lines(path: Path | str, data: bytes) -> tuple[list[bytes], int]:
    """Lines of every complete frame, and the byte length those frames span."""
    lines = LogLines(path, io.BytesIO(data), "zstd")
    return list(lines), lines.valid_size


class LogLines:
    """The complete lines of a log, read a block (plain) or a frame (Zstandard) at a time.

    Memory stays bounded by the longest line (plain) or the largest frame (Zstandard), not by
    the file: a reader that handles each line as it comes never holds the log. Line 1 (the
    header) longer than `MAX_HEADER_LINE` is a corrupt log, refused without reading the rest.
    Once iterated to the end, `valid_size` is the byte length the complete lines (or frames)
    span and `torn_tail` says whether anything follows them.
    """

    def __init__(
        self,
        path: Path | str,
        file: BinaryIO,
        compression: Compression,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.path = path
        self.file = file
        self.compression = compression
        self.progress = progress
        self.size = _stream_size(file)
        self.count = 0
        """Lines yielded so far."""
        self.valid_size = 0

    @property
    def torn_tail(self) -> bool:
        return self.valid_size != self.size

    def __iter__(self) -> Iterator[bytes]:
        return self._zstd() if self.compression == "zstd" else self._plain()

    def _plain(self) -> Iterator[bytes]:
        pending: list[bytes] | None = []
        """The start of the line being read; None once it is long enough to be read again
        from the file when its newline shows (a torn tail of any size then costs nothing)."""
        pending_size = 0
        done = 0
        while block := self.file.read(READ_BLOCK):
            done += len(block)
            pieces = block.split(b"\n")
            if len(pieces) > 1:
                if pending is None:
                    first = self._reread(self.valid_size, pending_size + len(pieces[0]))
                else:
                    first = b"".join([*pending, pieces[0]]) if pending else pieces[0]
                self._check_header_length(len(first))
                self.count += 1
                self.valid_size += len(first) + 1
                yield first
                for line in pieces[1:-1]:
                    self.count += 1
                    self.valid_size += len(line) + 1
                    yield line
                pending, pending_size = [pieces[-1]], len(pieces[-1])
            else:
                pending_size += len(block)
                if pending is not None:
                    pending.append(block)
                    if pending_size > LONG_LINE:
                        pending = None
            self._check_header_length(pending_size)
            if self.progress is not None:
                self.progress(done, self.size)

    def _reread(self, start: int, length: int) -> bytes:
        position = self.file.tell()
        self.file.seek(start)
        line = self.file.read(length)
        self.file.seek(position)
        return line

    def _zstd(self) -> Iterator[bytes]:
        buffer = bytearray()
        base = 0
        """The file offset of `buffer[0]`."""
        offset = 0
        """The file offset of the next frame."""
        eof = False
        import zstandard

        decompressor = zstandard.ZstdDecompressor()
        while True:
            view = memoryview(buffer)
            try:
                end = zstd_frame_end(view, offset - base)
            except ValueError as exc:
                view.release()
                raise CorruptLog(self.path, self.count + 1, f"at byte {offset}: {exc}") from None
            if end is None:
                if self.count == 0 and len(buffer) > MAX_HEADER_LINE + ZSTD_FRAME_OVERHEAD:
                    view.release()
                    raise CorruptLog(self.path, 1, _HEADER_TOO_LONG)
                if not eof:
                    view.release()
                    block = self.file.read(READ_BLOCK)
                    if not block:
                        eof = True
                        continue
                    del buffer[: offset - base]  # only the frame being read is kept
                    base = offset
                    buffer += block
                    continue
                if offset - base < len(buffer) and complete_frame_after(view, offset - base):
                    # Appends only ever add frames at the end, so a torn write is the last
                    # frame: an incomplete frame with a complete one after it is damage.
                    view.release()
                    raise CorruptLog(
                        self.path,
                        self.count + 1,
                        f"frame at byte {offset} is incomplete, but complete frames follow it",
                    )
                view.release()
                return  # a torn final frame, or the end
            frame = view[offset - base : end]
            try:
                if self.count == 0:
                    text = _first_frame_text(self.path, decompressor, frame)
                else:
                    text = decompressor.decompressobj().decompress(frame)
            except zstandard.ZstdError as exc:
                raise CorruptLog(
                    self.path, self.count + 1, f"frame at byte {offset}: {exc}"
                ) from None
            finally:
                frame.release()
                view.release()
            if text and not text.endswith(b"\n"):
                raise CorruptLog(
                    self.path, self.count + 1, f"frame at byte {offset} ends inside a line"
                )
            offset = base + end
            self.valid_size = offset
            for line in text.split(b"\n")[:-1]:
                self.count += 1
                yield line
            if self.progress is not None:
                self.progress(offset, self.size)

    def _check_header_length(self, length: int) -> None:
        if self.count == 0 and length > MAX_HEADER_LINE:
            raise CorruptLog(self.path, 1, _HEADER_TOO_LONG)


_HEADER_TOO_LONG: Final = (
    f"line 1 is longer than {MAX_HEADER_LINE // (1024 * 1024)} MiB: not a session header"
)


class MappedLines:
    """The complete lines of a plain log read through a read-only memory map of its file,
    each line a view of the map, never a copy: what a continuation reads of a long log.

    The views stay valid while anything holds them (a `PackedChunks` keeps its lines), and the
    log only grows while its writer's lock is held. A file cut shorter behind the lock's back
    would make reading a view past its new end fault, as with any memory-mapped file.
    """

    def __init__(self, path: Path | str, mapped: mmap.mmap) -> None:
        self.path = path
        self._map = mapped
        self.size = len(mapped)
        self.count = 0
        """Lines yielded (or skipped, `skip_run`) so far."""
        self.valid_size = 0
        self._line = 0
        """Where the line yielded last starts."""
        self._next = 0
        """Where the next line starts."""

    @classmethod
    def open(cls, path: Path | str, fd: int) -> MappedLines | None:
        """The lines of the log at `path`, open (and locked) as `fd`; None if it cannot be
        mapped (it is empty, say). The map is made through a descriptor of its own: a map
        holds its file open, and a lock lives as long as the open file it was taken on, so a
        map made through the writer's would keep the session locked after its writer closed."""
        try:
            own = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            mine, locked = os.fstat(own), os.fstat(fd)
            if (mine.st_dev, mine.st_ino) != (locked.st_dev, locked.st_ino) or not mine.st_size:
                return None  # replaced since it was opened, or empty
            return cls(path, mmap.mmap(own, mine.st_size, prot=mmap.PROT_READ))
        except (OSError, ValueError):
            return None
        finally:
            os.close(own)

    @property
    def torn_tail(self) -> bool:
        return self.valid_size != self.size

    def __iter__(self) -> Iterator[Line]:
        mapped, size = self._map, self.size
        view, find = memoryview(mapped), mapped.find
        first = find(b"\n", 0, MAX_HEADER_LINE + 1)
        if first < 0:
            if size > MAX_HEADER_LINE:
                raise CorruptLog(self.path, 1, _HEADER_TOO_LONG)
            return
        self.count, self.valid_size = 1, first + 1
        self._line, self._next = 0, first + 1
        yield view[:first]
        while self._next < size:
            start = self._next
            end = find(b"\n", start, start + LONG_LINE)
            scanned = start
            while end < 0 and scanned + LONG_LINE < size:
                # A long line, or a torn tail of any size: what was scanned leaves memory (the
                # map reads it from the file again if the line is used).
                self._drop(scanned, LONG_LINE)
                scanned += LONG_LINE
                end = find(b"\n", scanned, scanned + LONG_LINE)
            if end < 0:
                self._drop(scanned, size - scanned)
                return
            self.count += 1
            self.valid_size = end + 1
            self._line, self._next = start, end + 1
            yield view[start:end]

    def run_text(self, size: int) -> memoryview | None:
        """The `size` bytes from the start of the line yielded last, if the map holds them and
        they end in a newline: a run of lines, for its chunk check."""
        end = self._line + size
        if end > self.size or self._map[end - 1] != 0x0A:
            return None
        return memoryview(self._map)[self._line : end]

    def skip_run(self, size: int, lines: int) -> None:
        """Go on after the run `run_text(size)` gave, of `lines` lines (the first of which was
        yielded): the next line yielded is the one after it."""
        self._next = self.valid_size = self._line + size
        self.count += lines - 1

    def _drop(self, offset: int, length: int) -> None:
        aligned = offset - offset % mmap.PAGESIZE
        self._map.madvise(mmap.MADV_DONTNEED, aligned, length + offset - aligned)


def _first_frame_text(
    path: Path | str, decompressor: zstandard.ZstdDecompressor, frame: memoryview
) -> bytes:
    """The text of the frame holding the header, decompressed only as far as the header
    line's bound until its newline shows (a small frame can decompress to gigabytes)."""
    reader = decompressor.stream_reader(bytes(frame), read_across_frames=False)
    head = b""
    while b"\n" not in head and len(head) <= MAX_HEADER_LINE:
        piece = reader.read(READ_BLOCK)
        if not piece:
            break
        head += piece
    newline = head.find(b"\n")
    if newline > MAX_HEADER_LINE or (newline < 0 and len(head) > MAX_HEADER_LINE):
        raise CorruptLog(path, 1, _HEADER_TOO_LONG)
    return head + reader.readall()


def _stream_size(file: BinaryIO) -> int:
    position = file.tell()
    size = file.seek(0, os.SEEK_END)
    file.seek(position)
    return size


def read_header(path: Path) -> SessionHeader:
    """A log's header (line 1), reading no more of the log than the header's bound (a plain
    log's no more than the header line and a buffer)."""
    with open(path, "rb") as file:
        if log_compression(path) == "none":
            line = file.readline(MAX_HEADER_LINE + 2)
            first = line[:-1] if line.endswith(b"\n") else None
            if len(line if first is None else first) > MAX_HEADER_LINE:
                raise CorruptLog(path, 1, _HEADER_TOO_LONG)
        else:
            first = next(iter(LogLines(path, file, "zstd")), None)
    if first is None:
        raise CorruptLog(path, 1, "the log has no complete header line")
    return parse_header(path, first)


class Lines(Protocol):
    """Complete lines of a log, header first, as `LogLines` or `MappedLines` give them (or a
    database's rows)."""

    @property
    def path(self) -> Path | str: ...

    @property
    def count(self) -> int:
        """Lines yielded so far."""

    @property
    def torn_tail(self) -> bool: ...

    def __iter__(self) -> Iterator[Line]: ...


class LogRecords:
    """A log's header, then its records one at a time, each checked as it is read.

    Every body line is decoded and type-checked, its rows validated, its seq checked against
    the chain and its `sourceRange` against SPEC 1.1; the first problem raises `CorruptLog`
    naming the line. `event_count` counts the events of the records read so far.
    """

    def __init__(self, lines: Lines) -> None:
        self.lines = lines
        iterator = iter(lines)
        first = next(iterator, None)
        if first is None:
            raise CorruptLog(lines.path, 1, "the log has no complete header line")
        self.header = parse_header(lines.path, first)
        self._checked = CheckedRecords(
            lines.path, iterator, lines if isinstance(lines, MappedLines) else None
        )

    @property
    def event_count(self) -> int:
        return self._checked.event_count

    @property
    def torn_tail(self) -> bool:
        return self.lines.torn_tail

    def __iter__(self) -> Iterator[StorageRecord]:
        return iter(self._checked)

    def kept(self, checks: Mapping[int, ChunkCheck]) -> Iterator[KeptRecord]:
        """The records read with the writers' chunk checks (see `CheckedRecords.kept`)."""
        return self._checked.kept(checks)

    @property
    def used_checks(self) -> list[ChunkCheck]:
        return self._checked.used_checks

    @property
    def new_checks(self) -> list[ChunkCheck]:
        return self._checked.new_checks


class CheckedRecords:
    """The records of consecutive body lines (line 2 on), each decoded and checked as
    `LogRecords` checks them: every engine reads its stored records through this.

    `kept(checks)` reads them with the chunk checks of the log's writers: a run of chunk lines
    that matches its check is kept packed (`PackedChunks`), not decoded; the lines of a run
    without a matching check are decoded and checked, and the run's check made
    (`new_checks`). A run that gets a check is then kept packed too: its records are dropped
    once checked, as a later read would not have decoded them."""

    def __init__(
        self, path: Path | str, lines: Iterable[Line], mapped: MappedLines | None = None
    ) -> None:
        self.path = path
        self.lines = lines
        self.mapped = mapped
        """The map `lines` come from, if they do: a matching run is then taken at once."""
        self.event_count = 0
        self._check = RecordChecker(path)
        self.used_checks: list[ChunkCheck] = []
        """The checks that matched (`kept`)."""
        self.new_checks: list[ChunkCheck] = []
        """The checks made for runs that had none that matched (`kept`)."""

    def __iter__(self) -> Iterator[StorageRecord]:
        # Without checks, no line is kept packed.
        return cast(Iterator[StorageRecord], self._records(enumerate(self.lines, start=2), None))

    def kept(self, checks: Mapping[int, ChunkCheck]) -> Iterator[KeptRecord]:
        lines = self._packed(checks) if checks else enumerate(self.lines, start=2)
        return self._records(lines, ChunkRuns())

    def _packed(
        self, checks: Mapping[int, ChunkCheck]
    ) -> Iterator[tuple[int, Line] | PackedChunks]:
        """The numbered lines, each run that matches its check as one `PackedChunks`."""
        mapped = self.mapped
        lines = iter(self.lines)
        number = 1
        for raw in lines:
            number += 1
            check = checks.get(number)
            if check is None:
                yield number, raw
                continue
            if mapped is not None:
                # The run's bytes at once, from the map: its lines are never split.
                text = mapped.run_text(check.size)
                packed = packed_text(check, text) if text is not None else None
                if packed is None:
                    yield number, raw  # the run's other lines follow one by one
                    continue
                mapped.skip_run(check.size, check.lines)
            else:
                run = [raw, *itertools.islice(lines, check.lines - 1)]
                packed = packed_chunks(check, run)
                if packed is None:
                    yield from enumerate(run, start=number)
                    number += len(run) - 1
                    continue
            number += check.lines - 1
            self.used_checks.append(check)
            yield packed

    def _records(
        self, items: Iterable[tuple[int, Line] | PackedChunks], runs: ChunkRuns | None
    ) -> Iterator[KeptRecord]:
        check = self._check
        # With `runs`, the records and lines of the open run of chunk lines, held until the run
        # ends: a run that gets a check is yielded as its `PackedChunks` instead.
        run_records: list[StorageRecord] = []
        run_lines: list[Line] = []
        for item in items:
            if type(item) is PackedChunks:
                if item.seq0 != check.expected:
                    check.fail(item.number, seq_problem(self.event_count, item.seq0))
                if runs is not None:
                    # The packed run is a run of its own.
                    yield from self._ended_run(runs.end(), run_records, run_lines)
                check.expected = self.event_count = item.seq0 + item.count
                yield item
                continue
            number, raw = item
            record = cast(StorageRecord, check.line(number, raw))  # it fails fast
            first, expected = check.start, cast(int, check.expected)
            self.event_count = expected
            if runs is None:
                yield record
                continue
            # `ChunkRuns.feed`, with what the checker knows of the record already.
            kind = type(record)
            if kind in ROW_CLASSES:
                data = cast(ChunkRow, record).data
                made = runs.feed_chunk(number, raw, first, expected - first, data.turn, data.step)
            elif (
                kind is AssistantChunk
                and cast(AssistantChunk, record).source_range is UNSET
                and cast(AssistantChunk, record).ignorable is UNSET
            ):
                chunk = cast(AssistantChunk, record).data
                made = runs.feed_chunk(number, raw, first, 1, chunk.turn, chunk.step)
            else:
                yield from self._ended_run(runs.end(), run_records, run_lines)
                yield record
                continue
            if runs.open_lines == 1:  # the record starts a run: the one before it has ended
                yield from self._ended_run(made, run_records, run_lines)
            run_records.append(record)
            run_lines.append(raw)
        # A run still open at the end of the log is a step still streaming: it gets no check.
        yield from run_records

    def _ended_run(
        self, check: ChunkCheck | None, records: list[StorageRecord], lines: list[Line]
    ) -> Iterator[KeptRecord]:
        """The records of a run of chunk lines that has ended, then empties `records` and
        `lines`: as one `PackedChunks` when `check` (made from those lines) is its check."""
        packed = None
        if check is not None:
            self.new_checks.append(check)
            packed = packed_chunks(check, lines)
        if packed is not None:
            yield packed
        else:
            yield from records
        records.clear()
        lines.clear()


def parse_log(
    path: Path | str,
    data: bytes,
    compression: Compression,
    progress: Callable[[int, int], None] | None = None,
) -> LogContents:
    """Decode a whole log from its bytes, checking every record and the seq chain."""
    return _contents(LogLines(path, io.BytesIO(data), compression, progress))


def log_compression(path: Path) -> Compression:
    return "zstd" if path.name.endswith(".zst") else "none"


def read_log(path: Path | str, progress: Callable[[int, int], None] | None = None) -> LogContents:
    """Read a log without changing it; a torn final line (or frame) is ignored.

    `progress`, if given, is called now and then with the bytes read so far and the file's size.
    """
    path = Path(path)
    with open(path, "rb") as file:
        return read_log_file(path, file, progress)


def read_log_file(
    path: Path, file: BinaryIO, progress: Callable[[int, int], None] | None = None
) -> LogContents:
    """`read_log` from an open file (read from its start)."""
    return _contents(LogLines(path, file, log_compression(path), progress))


class KeptLog(msgspec.Struct):
    """What `read_kept_log` found: as `LogContents`, but the runs of chunk lines that matched
    their check are kept packed, and the long runs that had none have one made."""

    header: SessionHeader
    records: list[KeptRecord]
    event_count: int
    valid_size: int
    torn_tail: bool
    lines: int
    """Complete lines read, the header included."""
    used_checks: list[ChunkCheck]
    """The checks that matched."""
    new_checks: list[ChunkCheck]
    """Checks for the long runs that were decoded: what the check file lacked."""


def read_kept_log(lines: LogLines | MappedLines, checks: Mapping[int, ChunkCheck]) -> KeptLog:
    """`read_log_file` for a log about to be continued, with the chunk checks its writers
    recorded (`acp_server.core.chunk_checks`)."""
    reader = LogRecords(lines)
    with collection_paused():
        records = list(reader.kept(checks))
    return KeptLog(
        reader.header,
        records,
        reader.event_count,
        lines.valid_size,
        lines.torn_tail,
        lines.count,
        reader.used_checks,
        reader.new_checks,
    )


def _contents(lines: LogLines) -> LogContents:
    reader = LogRecords(lines)
    with collection_paused():
        records = list(reader)
    return LogContents(
        reader.header, records, reader.event_count, lines.valid_size, lines.torn_tail
    )


# ---------------------------------------------------------------------------------------------
# Writing.


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
        self.lines = 0
        """Lines in the file up to `_size` (the header is line 1)."""
        self._synced_lines = 0
        self._runs = ChunkRuns()

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
        if sync:
            self._fsync()

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
        finally:
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = -1

    def _location(self) -> Path:
        return self.path

    def _write_records(self, records: Sequence[StorageRecord]) -> None:
        """Write records as one batch, then keep the checks of the chunk runs it ended."""
        encode = _encoder.encode
        lines = [encode(record) for record in records]
        self._write_batch(b"\n".join([*lines, b""]))
        first = self.lines + 1
        self.lines += len(lines)
        if self.checks_path is not None:
            checks = self._runs.feed_all(first, lines, records)
            if checks:
                self._keep_checks(self.checks_path, checks)

    def _keep_checks(self, path: Path, checks: list[ChunkCheck]) -> None:
        """Append checks to the check file. They are a cache: a write that fails costs the
        next load time, nothing else, so it is not retried and nothing is fsynced."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, encode_checks(checks))
            finally:
                os.close(fd)
        except OSError as exc:
            log.debug("%s: chunk checks not kept: %s", path, exc)

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
