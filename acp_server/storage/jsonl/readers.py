"""Where a JSONL log's lines are, and reading them backwards for its history index.

`PlainReader` steps back through a plain log in blocks of bytes; `ZstdReader` walks a Zstandard
log's frame boundaries (one frame per append batch) from the block headers alone and steps back
frame by frame, decompressing only the frames a page needs. Each hands the lines it read to the
index as `IndexedLines`, with where each of them is (`Entry`).
"""

from __future__ import annotations

import copy
import itertools
import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import BinaryIO, Final

import msgspec
import zstandard

from ..errors import CorruptLog
from ..records import LineNumber, parse_header
from .lines import READ_BLOCK, complete_frame_after, log_compression, zstd_frame_end

MIN_BLOCK: Final = 64 * 1024
"""Bytes of a plain log read by the first backward step (later steps are sized to need)."""
MIN_FRAMES: Final = 8
"""Frames of a Zstandard log read by the first backward step."""
_NEWLINE: Final = re.compile(b"\n")


class Entry(msgspec.Struct, frozen=True, gc=False):
    """One indexed record: its first seq, and where its line is."""

    start: int
    frame: int
    """Zstandard logs: the frame holding the line (plain logs: 0)."""
    offset: int
    """Plain logs: the byte offset of the line. Zstandard: its offset in its frame's text."""
    length: int
    """The line's length in bytes, without its newline."""


entry_start: Final = attrgetter("start")


@dataclass
class IndexedLines:
    """A run of consecutive complete lines a reader read, and where each of them is."""

    data: bytes
    """The lines, each followed by a newline (the last may lack it)."""
    frames: Iterable[int]
    offsets: Sequence[int]
    lengths: Sequence[int]
    where: LineNumber

    def entries(self, starts: Iterable[int]) -> list[Entry]:
        """The entries of these lines, given the first seq of each line's record."""
        return list(map(Entry, starts, self.frames, self.offsets, self.lengths))


IndexLines = Callable[[IndexedLines], None]
"""Indexes the lines a reader hands over (raising `CorruptLog` if they are not a valid run)."""


# ---------------------------------------------------------------------------------------------
# Readers: where a log's lines are, and reading them.


class PlainReader:
    """A plain log: lines are found by byte offset; steps back read blocks of bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            head = b""
            newline = -1
            while newline < 0 and len(head) < size:
                head += file.read(max(MIN_BLOCK, len(head)))
                newline = head.find(b"\n")
            if newline < 0:
                raise CorruptLog(path, 1, "the log has no complete header line")
            self.header = parse_header(path, head[:newline])
            end = size
            while end > newline + 1:  # the end of the last complete line
                lo = max(newline + 1, end - MIN_BLOCK)
                file.seek(lo)
                last = file.read(end - lo).rfind(b"\n")
                if last >= 0:
                    end = lo + last + 1
                    break
                end = lo
        self.body_start = newline + 1
        """The byte offset of line 2 (the first record)."""
        self.indexed_bytes = max(end, self.body_start)
        """How far into the file the complete lines reach: any torn tail starts there."""
        self.covered_from = self.indexed_bytes
        """The byte offset where the indexed lines begin (they run to `indexed_bytes`)."""

    @property
    def complete(self) -> bool:
        return self.covered_from == self.body_start

    def covered(self) -> tuple[int, int]:
        """How much is indexed, and the least step back, both in bytes."""
        return self.indexed_bytes - self.covered_from, MIN_BLOCK

    def step_back(self, amount: int, index: IndexLines) -> None:
        """Index the whole lines of about `amount` bytes before what is indexed."""
        while True:
            lo = max(self.body_start, self.covered_from - amount)
            with open(self.path, "rb") as file:
                file.seek(lo)
                data = file.read(self.covered_from - lo)
            if lo > self.body_start:
                cut = data.find(b"\n") + 1  # the first line may have begun before `lo`
                if cut == 0 or cut == len(data):
                    amount *= 2  # no whole line in the block: a longer step
                    continue
                data, lo = data[cut:], lo + cut
            index(self._lines(data, lo))
            self.covered_from = lo
            return

    def append(self, tail: bytes, index: IndexLines) -> None:
        """Index the complete lines of `tail`, what was appended after `indexed_bytes`."""
        end = tail.rfind(b"\n") + 1
        if end:
            index(self._lines(tail[:end], self.indexed_bytes))
            self.indexed_bytes += end

    def _lines(self, data: bytes, base: int) -> IndexedLines:
        """The complete lines in `data`, which starts at byte `base`."""
        newlines = [match.start() for match in _NEWLINE.finditer(data)]
        # Line k runs from just after newline k - 1 to newline k.
        lengths = array("q", map(int.__sub__, newlines, [-1, *newlines[:-1]]))
        lengths = array("q", map((-1).__add__, lengths))
        offsets = array("q", [base])
        offsets.extend(map((base + 1).__add__, newlines[:-1]))
        path = self.path

        def where(k: int) -> int:
            return plain_line_number(path, offsets[k])

        return IndexedLines(data, itertools.repeat(0), offsets, lengths, where)

    @property
    def covered_offset(self) -> int:
        """The byte offset where the indexed lines begin."""
        return self.covered_from

    def seek_offset(self, entry: Entry) -> int | None:
        """Where a read may start to reach `entry`'s line: the line's offset."""
        return entry.offset

    def seeked(self, offset: int) -> PlainReader | None:
        """A reader of the lines before byte `offset`, which must begin a line after the first
        record's and before what is indexed (else None): the lines from there on left out."""
        if not self.body_start < offset < self.covered_from:
            return None
        with open(self.path, "rb") as file:
            file.seek(offset - 1)
            if file.read(1) != b"\n":
                return None
        reader = copy.copy(self)
        reader.indexed_bytes = reader.covered_from = offset
        return reader

    def load(self, entries: Sequence[Entry]) -> bytes:
        """The lines of `entries` (consecutive), joined by newlines."""
        lo = entries[0].offset
        with open(self.path, "rb") as file:
            file.seek(lo)
            return file.read(entries[-1].offset + entries[-1].length - lo)

    def line_number(self, entry: Entry) -> int:
        return plain_line_number(self.path, entry.offset)


class ZstdReader:
    """A Zstandard log: lines are found by frame and offset in the frame's text; steps back
    decompress whole frames."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.frame_offsets: list[int] = []
        self.frame_ends: list[int] = []
        with open(path, "rb") as file:
            self.indexed_bytes = self._scan(file)
            """How far into the file the complete frames reach: any torn tail starts there."""
            if not self.frame_offsets:
                raise CorruptLog(path, 1, "the log has no complete header line")
            file.seek(0)
            first = self._frame_text(file.read(self.frame_ends[0]), 0)
        newline = first.find(b"\n")
        if newline < 0:
            raise CorruptLog(path, 1, "the log has no complete header line")
        self.header = parse_header(path, first[:newline])
        self.covered_from = len(self.frame_offsets)
        """The first indexed frame (the indexed lines run from it to the last frame)."""

    def _scan(self, file: BinaryIO) -> int:
        """Add the frames of the whole file, reading a block at a time (only the frame being
        walked is held, never the file); where the complete frames end."""
        buffer = bytearray()
        base = 0
        """The file offset of `buffer[0]`."""
        while True:
            block = file.read(READ_BLOCK)
            buffer += block
            view = memoryview(buffer)
            try:
                end = self._walk_frames(view, base, at_end=not block)
            finally:
                view.release()
            if not block:
                return end
            del buffer[: end - base]
            base = end

    def _walk_frames(self, view: memoryview, base: int, *, at_end: bool = True) -> int:
        """Add the complete frames of `view` (which starts at byte `base`); where they end.
        Unless `at_end`, an incomplete last frame is only one whose rest is still to be read."""
        offset = 0
        while offset < len(view):
            try:
                end = zstd_frame_end(view, offset)
            except ValueError as exc:
                lines = zstd_lines_before(self.path, self.frame_ends)
                raise CorruptLog(self.path, lines, f"at byte {base + offset}: {exc}") from None
            if end is None:
                if not at_end:
                    break
                if complete_frame_after(view, offset):  # damage, not a torn final write
                    raise CorruptLog(
                        self.path,
                        zstd_lines_before(self.path, self.frame_ends),
                        f"frame at byte {base + offset} is incomplete, "
                        "but complete frames follow it",
                    )
                break  # a torn final frame
            self.frame_offsets.append(base + offset)
            self.frame_ends.append(base + end)
            offset = end
        return base + offset

    @property
    def complete(self) -> bool:
        return self.covered_from == 0

    def covered(self) -> tuple[int, int]:
        """How much is indexed, and the least step back, both in frames."""
        return len(self.frame_offsets) - self.covered_from, MIN_FRAMES

    def step_back(self, amount: int, index: IndexLines) -> None:
        """Index the lines of about `amount` frames before what is indexed."""
        first = max(0, self.covered_from - amount)
        if first < self.covered_from:
            index(self._lines(first, self.covered_from))
        self.covered_from = first

    def append(self, tail: bytes, index: IndexLines) -> None:
        """Index the complete frames of `tail`, what was appended after `indexed_bytes`."""
        first = len(self.frame_offsets)
        try:
            end = self._walk_frames(memoryview(tail), self.indexed_bytes)
            if first < len(self.frame_offsets):
                index(self._lines(first, len(self.frame_offsets)))
        except BaseException:
            del self.frame_offsets[first:], self.frame_ends[first:]
            raise
        self.indexed_bytes = end

    def _lines(self, first: int, last: int) -> IndexedLines:
        """The lines of frames `[first, last)`."""
        with open(self.path, "rb") as file:
            file.seek(self.frame_offsets[first])
            raw = file.read(self.frame_ends[last - 1] - self.frame_offsets[first])
        view = memoryview(raw)
        base = self.frame_offsets[first]
        texts: list[bytes] = []
        offsets, lengths, frames = array("q"), array("q"), array("q")
        for frame in range(first, last):
            text = self._frame_text(
                view[self.frame_offsets[frame] - base : self.frame_ends[frame] - base], frame
            )
            if text and not text.endswith(b"\n"):
                raise CorruptLog(
                    self.path,
                    zstd_lines_before(self.path, self.frame_ends[:frame]),
                    f"frame at byte {self.frame_offsets[frame]} ends inside a line",
                )
            position = text.find(b"\n") + 1 if frame == 0 else 0  # frame 0 begins with the header
            body = text[position:]
            if not body:
                continue
            texts.append(body)
            for line in body.split(b"\n")[:-1]:
                offsets.append(position)
                lengths.append(len(line))
                frames.append(frame)
                position += len(line) + 1

        def where(k: int) -> int:
            return self._line_number(frames[k], offsets[k])

        return IndexedLines(b"".join(texts), frames, offsets, lengths, where)

    @property
    def covered_offset(self) -> int:
        """The byte offset where the indexed frames begin."""
        if self.covered_from < len(self.frame_offsets):
            return self.frame_offsets[self.covered_from]
        return self.indexed_bytes

    def seek_offset(self, entry: Entry) -> int | None:
        """Where a read may start to reach `entry`'s line: its frame's offset, if the line
        begins the frame (frame 0 begins with the header: never)."""
        return self.frame_offsets[entry.frame] if entry.offset == 0 and entry.frame else None

    def seeked(self, offset: int) -> ZstdReader | None:
        """A reader of the frames before the one at byte `offset`, which must begin a frame
        after the first and before what is indexed (else None): the frames from there on
        left out."""
        frame = bisect_left(self.frame_offsets, offset)
        if not 0 < frame < self.covered_from or self.frame_offsets[frame] != offset:
            return None
        reader = copy.copy(self)
        reader.frame_offsets = self.frame_offsets[:frame]
        reader.frame_ends = self.frame_ends[:frame]
        reader.covered_from = frame
        reader.indexed_bytes = offset
        return reader

    def load(self, entries: Sequence[Entry]) -> bytes:
        """The lines of `entries` (consecutive), joined by newlines."""
        lines: list[bytes] = []
        frame, text = -1, b""
        with open(self.path, "rb") as file:
            for entry in entries:
                if entry.frame != frame:
                    frame = entry.frame
                    file.seek(self.frame_offsets[frame])
                    raw = file.read(self.frame_ends[frame] - self.frame_offsets[frame])
                    text = self._frame_text(raw, frame)
                lines.append(text[entry.offset : entry.offset + entry.length])
        return b"\n".join(lines)

    def line_number(self, entry: Entry) -> int:
        return self._line_number(entry.frame, entry.offset)

    def _line_number(self, frame: int, offset: int) -> int:
        """The number of the line at `offset` in the text of `frame`."""
        before = zstd_lines_before(self.path, self.frame_ends[:frame])
        data = self.path.read_bytes()[self.frame_offsets[frame] : self.frame_ends[frame]]
        text = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        return before + text[:offset].count(b"\n")

    def _frame_text(self, raw: bytes | memoryview, frame: int) -> bytes:
        try:
            return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        except zstandard.ZstdError as exc:
            line = zstd_lines_before(self.path, self.frame_ends[:frame])
            raise CorruptLog(
                self.path, line, f"frame at byte {self.frame_offsets[frame]}: {exc}"
            ) from None


def open_reader(path: Path) -> PlainReader | ZstdReader:
    return ZstdReader(path) if log_compression(path) == "zstd" else PlainReader(path)


# ---------------------------------------------------------------------------------------------
# Line numbers (1-based, the header being line 1), counted only for an error.


def plain_line_number(path: Path, offset: int) -> int:
    """The number of the line starting at byte `offset`."""
    with open(path, "rb") as file:
        return file.read(offset).count(b"\n") + 1


def zstd_lines_before(path: Path, frame_ends: Sequence[int]) -> int:
    """1 + the number of lines in the first frames, which end at `frame_ends`."""
    data = path.read_bytes()
    lines, start = 0, 0
    for end in frame_ends:
        try:
            lines += (
                zstandard.ZstdDecompressor()
                .decompressobj()
                .decompress(data[start:end])
                .count(b"\n")
            )
        except zstandard.ZstdError:
            break
        start = end
    return lines + 1
