"""A JSONL session log file's lines (SPEC 2.2, 2.3): plain lines, or Zstandard frames each
holding whole lines, read a block or a frame at a time; and the file format's constants.

Line numbers in errors count from 1, the header being line 1, as editors and `sed -n` count
them. Reading never changes a file.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final, Literal

from ...core.chunk_checks import (
    Line,
)
from ...core.header import SessionHeader
from ..errors import CorruptLog
from ..records import parse_header

if TYPE_CHECKING:
    # Imported where a Zstandard log is read or written: most logs are plain.
    import zstandard

Compression = Literal["none", "zstd"]

PLAIN_LOG_NAME: Final = "session.jsonl"
ZSTD_LOG_NAME: Final = "session.jsonl.zst"
SEEK_NAME: Final = "seek-points.jsonl"
"""Beside a log: where its records begin, a hint for reading it from the middle."""
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


READ_ONLY_ERRNOS: Final = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""Opening a log for writing fails with these when it may still be read."""


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


def log_compression(path: Path) -> Compression:
    return "zstd" if path.name.endswith(".zst") else "none"
