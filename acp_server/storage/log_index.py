"""An index of a session log on disk, so history pages read only what they show.

The index is built from the end of the file, lazily. `LogIndex.build` reads the header and the
last block of the log (which gives the session's last seq) and nothing more. A page then
indexes backwards, block by block, only as far as its messages reach: the newest page of a
long session reads the end of the file, not the whole of it. Every line indexed is decoded
once, type-checked, its rows validated and its seq checked against its neighbours', and the
records decoded for a page are used for that page directly. What stays is one `_Entry` per
record (its first seq and where its line is) and, per message, its seq and the lowest seq of
its chunks: a later page reads and decodes exactly its own lines. A row is split only where a
page boundary cuts it, the short rows the flushes wrote are joined, and the page's records are
packed canonically. The index grows with the file: `refresh()` indexes only what was appended.

Where lines are and how they are read is a reader's business, chosen once when the log is
opened: `_PlainReader` steps back through a plain log in blocks of bytes; `_ZstdReader` walks a
Zstandard log's frame boundaries (one frame per append batch) from the block headers alone and
steps back frame by frame, decompressing only the frames a page needs.

Reading never changes the file. A torn final line (or frame) is left out until it is complete.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, BinaryIO, Final, cast

import msgspec
import zstandard

from ..core.chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    ChunkRowError,
    StorageRecord,
    TextChunksData,
    ToolCallChunks,
    ToolCallChunksData,
    decode_record_json,
    pack_chunk_runs,
)
from ..core.events import MAX_SAFE_INTEGER, EventError, KnownEvent, SubagentStart
from ..core.header import SessionHeader
from ..core.paging import PageCut, clip_records, message_cut, page_cut
from .log import (
    READ_BLOCK,
    CorruptLog,
    complete_frame_after,
    log_compression,
    parse_header,
    zstd_frame_end,
)
from .records import LineNumber, RecordChecker, seq_problem

MIN_BLOCK: Final = 64 * 1024
"""Bytes of a plain log read by the first backward step (later steps are sized to need)."""
MIN_FRAMES: Final = 8
"""Frames of a Zstandard log read by the first backward step."""
PIECE: Final = 64 * 1024
"""Bytes of lines decoded at a time (then digested while their objects are in the caches)."""

_records_decoder: Final = msgspec.json.Decoder(KnownEvent | ChunkRow)
_NEWLINE: Final = re.compile(b"\n")


class _Entry(msgspec.Struct, frozen=True, gc=False):
    """One indexed record: its first seq, and where its line is."""

    start: int
    frame: int
    """Zstandard logs: the frame holding the line (plain logs: 0)."""
    offset: int
    """Plain logs: the byte offset of the line. Zstandard: its offset in its frame's text."""
    length: int
    """The line's length in bytes, without its newline."""


_start: Final = attrgetter("start")


@dataclass
class _Lines:
    """A run of consecutive complete lines a reader read, and where each of them is."""

    data: bytes
    """The lines, each followed by a newline (the last may lack it)."""
    frames: Iterable[int]
    offsets: Sequence[int]
    lengths: Sequence[int]
    where: LineNumber

    def entries(self, starts: Iterable[int]) -> list[_Entry]:
        """The entries of these lines, given the first seq of each line's record."""
        return list(map(_Entry, starts, self.frames, self.offsets, self.lengths))


@dataclass
class _Region:
    """What a run of consecutive lines holds, digested for the index and for pages."""

    starts: list[int]
    """The first seq of each line's record."""
    message_seqs: list[int]
    message_cuts: list[int]
    children: set[str]
    end: int
    """One past the last seq the region's records stand for."""
    records: list[StorageRecord]
    """The records, with the rows that continue one another joined (the flushes of a long
    stream write many short rows of one run)."""
    record_starts: list[int]
    """The first seq of each of `records`."""


IndexLines = Callable[[_Lines], None]
"""Indexes the lines a reader hands over (raising `CorruptLog` if they are not a valid run)."""


# ---------------------------------------------------------------------------------------------
# Readers: where a log's lines are, and reading them.


class _PlainReader:
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

    def _lines(self, data: bytes, base: int) -> _Lines:
        """The complete lines in `data`, which starts at byte `base`."""
        newlines = [match.start() for match in _NEWLINE.finditer(data)]
        # Line k runs from just after newline k - 1 to newline k.
        lengths = array("q", map(int.__sub__, newlines, [-1, *newlines[:-1]]))
        lengths = array("q", map((-1).__add__, lengths))
        offsets = array("q", [base])
        offsets.extend(map((base + 1).__add__, newlines[:-1]))
        path = self.path

        def where(k: int) -> int:
            return _plain_line_number(path, offsets[k])

        return _Lines(data, itertools.repeat(0), offsets, lengths, where)

    def load(self, entries: Sequence[_Entry]) -> bytes:
        """The lines of `entries` (consecutive), joined by newlines."""
        lo = entries[0].offset
        with open(self.path, "rb") as file:
            file.seek(lo)
            return file.read(entries[-1].offset + entries[-1].length - lo)

    def line_number(self, entry: _Entry) -> int:
        return _plain_line_number(self.path, entry.offset)


class _ZstdReader:
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
                lines = _zstd_lines_before(self.path, self.frame_ends)
                raise CorruptLog(self.path, lines, f"at byte {base + offset}: {exc}") from None
            if end is None:
                if not at_end:
                    break
                if complete_frame_after(view, offset):  # damage, not a torn final write
                    raise CorruptLog(
                        self.path,
                        _zstd_lines_before(self.path, self.frame_ends),
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

    def _lines(self, first: int, last: int) -> _Lines:
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
                    _zstd_lines_before(self.path, self.frame_ends[:frame]),
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

        return _Lines(b"".join(texts), frames, offsets, lengths, where)

    def load(self, entries: Sequence[_Entry]) -> bytes:
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

    def line_number(self, entry: _Entry) -> int:
        return self._line_number(entry.frame, entry.offset)

    def _line_number(self, frame: int, offset: int) -> int:
        """The number of the line at `offset` in the text of `frame`."""
        before = _zstd_lines_before(self.path, self.frame_ends[:frame])
        data = self.path.read_bytes()[self.frame_offsets[frame] : self.frame_ends[frame]]
        text = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        return before + text[:offset].count(b"\n")

    def _frame_text(self, raw: bytes | memoryview, frame: int) -> bytes:
        try:
            return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        except zstandard.ZstdError as exc:
            line = _zstd_lines_before(self.path, self.frame_ends[:frame])
            raise CorruptLog(
                self.path, line, f"frame at byte {self.frame_offsets[frame]}: {exc}"
            ) from None


def _open_reader(path: Path) -> _PlainReader | _ZstdReader:
    return _ZstdReader(path) if log_compression(path) == "zstd" else _PlainReader(path)


# ---------------------------------------------------------------------------------------------
# The index.


class LogIndex:
    """The index of one log file (see the module docstring); pages and refreshes lock it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        """Pages and refreshes grow the index: one at a time (the server runs them in threads)."""
        self._open()

    @classmethod
    def build(cls, path: Path) -> LogIndex:
        """Read the header and index the last block; the rest is indexed as pages need it."""
        return cls(path)

    def _open(self) -> None:
        """Start from nothing: read the header and index back to the log's last record."""
        self.reader = _open_reader(self.path)
        self.header: SessionHeader = self.reader.header
        self.entries: list[_Entry] = []
        """One per indexed record, in seq order: the index covers a suffix of the log's
        records (all of them once the reader is `complete`)."""
        self.length = 0
        """How many events the log's complete records stand for."""
        self.message_seqs: list[int] = []
        self.message_cuts: list[int] = []
        self._children: set[str] = set()
        self._fresh: _Region | None = None
        """What the backward steps of `build` and of the current page decoded (the first
        indexed records, up to `_fresh.end`), so that the page need not read them again."""
        step = self.reader.covered()[1]
        while not self.entries and not self.reader.complete:  # the last record: the last seq
            self._step_back(step, keep=True)
            step *= 2

    @property
    def last_seq(self) -> int:
        return self.length - 1

    @property
    def indexed_bytes(self) -> int:
        """How far into the file the complete lines (or frames) reach."""
        return self.reader.indexed_bytes

    @property
    def complete(self) -> bool:
        """Whether every record of the log (up to `indexed_bytes`) is indexed."""
        return self.reader.complete

    @property
    def first_indexed_seq(self) -> int:
        return self.entries[0].start if self.entries else self.length

    @property
    def subagent_children(self) -> set[str]:
        """The child session ids of every `subagent/start` in the log (indexes all of it)."""
        with self._lock:
            while not self.complete:
                self._step_back(self._next_step(0, self.first_indexed_seq), keep=False)
            return set(self._children)

    def refresh(self) -> None:
        """Index what was appended to the file since the last look."""
        with self._lock:
            size = self.path.stat().st_size
            indexed = self.reader.indexed_bytes
            if size == indexed:
                return
            if size < indexed:  # not an append: the file was replaced
                self._open()
                return
            with open(self.path, "rb") as file:
                file.seek(indexed)
                tail = file.read(size - indexed)
            self.reader.append(tail, self._appended)

    # -- indexing ------------------------------------------------------------------------------

    def _step_back(self, amount: int, *, keep: bool) -> None:
        """Index about `amount` more of the log (bytes or frames) before what is indexed."""
        self.reader.step_back(amount, lambda lines: self._prepend(lines, keep=keep))
        if self.complete and self.entries and self.entries[0].start != 0:
            raise CorruptLog(self.path, 2, seq_problem(0, self.entries[0].start))

    def _next_step(self, messages: int, seqs: int, stalled: int = 0) -> int:
        """How far to step back for `messages` more messages, or else `seqs` more seqs.

        Sized from how densely what is indexed holds them, a little over (a step decodes only
        lines not yet indexed, so falling short costs one more small step, going too far
        costs decoding lines nobody asked for); at least twice `stalled`, the size of a
        previous step that found none of the messages needed.
        """
        covered, least = self.reader.covered()
        if messages > 0:
            known = len(self.message_seqs)
            # A handful of messages says little about their density: grow at most 8-fold then.
            guess = covered * messages // known if known else 2 * covered
            if known < 8:
                guess = min(guess, 8 * covered)
        else:
            guess = covered * seqs // max(self.length - self.first_indexed_seq, 1)
        return max(least, guess + guess // 16, 2 * stalled)

    def _prepend(self, lines: _Lines, *, keep: bool) -> None:
        """Index `lines`, which end where the indexed records begin."""
        region = _read(self.path, lines.data, lines.where)
        if not region.starts:
            return
        if self.entries and region.end != self.entries[0].start:
            raise CorruptLog(
                self.path,
                self.reader.line_number(self.entries[0]),
                seq_problem(region.end, self.entries[0].start),
            )
        if not self.entries:
            self.length = region.end
        self.entries[:0] = lines.entries(region.starts)
        self.message_seqs[:0] = region.message_seqs
        self.message_cuts[:0] = region.message_cuts
        self._children |= region.children
        fresh = self._fresh
        if not keep:
            self._fresh = None
        elif fresh is None:
            self._fresh = region
        else:  # the rows a step boundary split stay split: packing joins them
            fresh.records[:0] = region.records
            fresh.record_starts[:0] = region.record_starts

    def _appended(self, lines: _Lines) -> None:
        """Index `lines`, which follow the last indexed record."""
        region = _read(self.path, lines.data, lines.where)
        if not region.starts:
            return
        entries = lines.entries(region.starts)
        if region.starts[0] != self.length:
            raise CorruptLog(
                self.path,
                self.reader.line_number(entries[0]),
                seq_problem(self.length, region.starts[0]),
            )
        self.entries += entries
        self.message_seqs += region.message_seqs
        self.message_cuts += region.message_cuts
        self._children |= region.children
        self.length = region.end

    # -- reading pages -------------------------------------------------------------------------

    def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        """SPEC 3.1's page ending before `end`, read from disk: its canonical records."""
        with self._lock:
            try:
                cut = self._cover(end, max_messages)
                return cut, self._records_between(cut.start, cut.end)
            finally:
                self._fresh = None

    def records_between(self, lo: int, hi: int) -> list[StorageRecord]:
        """The canonical packing of the events in `[lo, hi)`, decoding only their lines."""
        with self._lock:
            try:
                while lo < hi and lo < self.first_indexed_seq and not self.complete:
                    self._step_back(self._next_step(0, self.first_indexed_seq - lo), keep=True)
                return self._records_between(lo, hi)
            finally:
                self._fresh = None

    def _cover(self, end: int, max_messages: int) -> PageCut:
        """The page's cut, once the index reaches back to it."""
        step = found = 0
        while end > 0:
            newest = bisect_left(self.message_seqs, end)
            missing = max_messages - newest
            if missing <= 0:
                start = min(self.message_cuts[newest - max_messages : newest])
                if start >= self.first_indexed_seq:
                    return PageCut(start, end)
            if self.complete:
                break
            stalled = step if missing > 0 and newest == found else 0
            step = self._next_step(
                missing, self.first_indexed_seq - start if missing <= 0 else 0, stalled
            )
            found = newest
            self._step_back(step, keep=True)
        return page_cut(self.message_seqs, self.message_cuts, end, max_messages)

    def _records_between(self, lo: int, hi: int) -> list[StorageRecord]:
        if lo >= hi:
            return []
        records: list[StorageRecord] = []
        fresh = self._fresh
        if fresh is not None and lo < fresh.end:
            records = clip_records(fresh.records, fresh.record_starts, lo, min(hi, fresh.end))
            lo = fresh.end
        if lo < hi:
            first = max(bisect_right(self.entries, lo, key=_start) - 1, 0)
            loaded = self._load(first, bisect_left(self.entries, hi, key=_start))
            records += clip_records(loaded.records, loaded.record_starts, lo, hi)
        return pack_chunk_runs(records)

    def _load(self, first: int, last: int) -> _Region:
        """Indexed records `[first, last)` read again from the file, and checked against the index."""
        entries = self.entries[first:last]
        line_number = self.reader.line_number

        def where(k: int) -> int:
            return line_number(entries[k])

        region = _read(self.path, self.reader.load(entries), where)
        following = self.entries[last].start if last < len(self.entries) else self.length
        if region.starts != [entry.start for entry in entries] or region.end != following:
            raise CorruptLog(
                self.path, where(0), "the log changed under its index (it is append-only)"
            )
        return region


# ---------------------------------------------------------------------------------------------
# Decoding and digesting lines.


def joined_records(
    name: Path | str, data: bytes, first_line: int
) -> tuple[list[StorageRecord], list[int]]:
    """The records of consecutive stored lines (joined by newlines, the first being line
    `first_line`), decoded and checked as a page's lines are, the rows that continue one
    another joined; and the first seq of each. What a database engine reads a page through."""
    region = _read(Path(name), data, lambda k: first_line + k)
    return region.records, region.record_starts


def _read(path: Path, data: bytes, where: LineNumber) -> _Region:
    """Decode and digest the lines of `data` (joined by newlines; `where(k)` is the line
    number of line k), a piece of about `PIECE` bytes at a time: the objects a piece
    decodes are still in the CPU's caches when the digest walks them."""
    digest = _Digest(path, where)
    view = memoryview(data)
    size = len(data)
    start = position = 0
    while start < size:
        end = data.find(b"\n", start + PIECE)
        end = size if end < 0 else end + 1
        count = data.count(b"\n", start, end) + (data[end - 1] != 10)  # a last line without \n
        records = _decode(path, view[start:end], count, _shifted(where, position))
        digest.feed(records, position)
        start, position = end, position + count
    return digest.region()


def _decode(path: Path, text: memoryview, count: int, where: LineNumber) -> list[Any]:
    """The records of the `count` lines of `text`, type-checked.

    Falls back to one line at a time for the exact error of a bad line, an ignorable
    unknown event, or a blank line (which `decode_lines` would skip).
    """
    try:
        records: list[Any] = _records_decoder.decode_lines(text)
        if len(records) == count:
            return records
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    lines = bytes(text).split(b"\n")
    if text[-1] == 10:
        lines.pop()
    records = []
    for k, line in enumerate(lines):
        try:
            records.append(decode_record_json(line))
        except (ChunkRowError, EventError) as exc:
            raise CorruptLog(path, where(k), str(exc)) from None
    return records


class _Digest:
    """Checks consecutive records (`RecordChecker`: rows valid, seqs contiguous, ranges), takes
    what the index keeps, and joins the rows that continue one another, fed a piece at a time.

    This runs once per stored line a page needs, and a long stream leaves thousands of short
    rows: so it is one pass, which touches each row once (its lists are joined while they are
    at hand).
    """

    def __init__(self, path: Path, where: LineNumber) -> None:
        self.check = RecordChecker(path, expected=None, calls=False, where=where)
        self.starts: list[int] = []
        self.message_seqs: list[int] = []
        self.message_cuts: list[int] = []
        self.children: set[str] = set()
        self.joined: list[StorageRecord] = []
        self.joined_starts: list[int] = []
        self.head: Any = None
        """The first row of the run being joined (None: no run is open)."""
        self.dts: list[int] | None = None
        self.fragments: list[str] | None = None
        """The joined lists of the open run, once a second row joins it."""
        self.last_time = 0

    def region(self) -> _Region:
        self._close_run()
        end = self.check.expected
        return _Region(
            self.starts,
            self.message_seqs,
            self.message_cuts,
            self.children,
            -1 if end is None else end,
            self.joined,
            self.joined_starts,
        )

    def feed(self, records: list[Any], position: int) -> None:
        """Digest the next records; `position` is the number of lines fed before them."""
        check, add_start = self.check, self.starts.append
        for k, record in enumerate(records, position):
            expected = check.expected
            check.record(k, record)  # it fails fast
            add_start(check.start)
            if type(record) in ROW_CLASSES:
                self._row(record, expected)
                continue
            self._close_run()
            start = check.start
            self.joined.append(record)
            self.joined_starts.append(start)
            if type(record) is SubagentStart:
                self.children.add(record.data.child_session_id)
            else:
                cut = message_cut(record, start)
                if cut is not None:
                    self.message_seqs.append(start)
                    self.message_cuts.append(cut)

    def _row(self, row: Any, expected: int | None) -> None:
        """Join `row` to the open run if it continues it (`expected`: the seq it had to start
        at), or open a run with it."""
        d, head, time0 = row.data, self.head, row.time0
        is_tool = type(row) is ToolCallChunks
        members = d.args if is_tool else d.texts
        if (
            head is not None
            and type(row) is type(head)
            and row.seq0 == expected
            and d.turn == head.data.turn
            and d.step == head.data.step
            and d.index == head.data.index
            and (not is_tool or (d.id == head.data.id and d.name == head.data.name))
            and -MAX_SAFE_INTEGER <= time0 - self.last_time <= MAX_SAFE_INTEGER
        ):
            if self.dts is None:
                self.dts = list(head.data.dt)
                self.fragments = list(head.data.args if is_tool else head.data.texts)
            self.dts.append(time0 - self.last_time)
            self.dts.extend(d.dt)
            cast(list[str], self.fragments).extend(members)  # set with dts, just above
        else:
            self._close_run()
            self.head = row
            self.joined_starts.append(row.seq0)
        self.last_time = time0 + sum(d.dt)

    def _close_run(self) -> None:
        if self.head is not None:
            self.joined.append(_joined(self.head, self.dts, self.fragments))
            self.head = self.dts = self.fragments = None


def _joined(head: Any, dt: list[int] | None, fragments: list[str] | None) -> StorageRecord:
    """The row a run of rows joined into: `head` with the joined lists (None: `head` alone)."""
    if dt is None or fragments is None:  # set together, when a second row joins the first
        return cast(StorageRecord, head)
    d = head.data
    data: Any
    if type(head) is ToolCallChunks:
        data = ToolCallChunksData(
            turn=d.turn, step=d.step, index=d.index, dt=dt, id=d.id, name=d.name, args=fragments
        )
    else:
        data = TextChunksData(d.turn, d.step, d.index, dt, fragments)
    return cast(StorageRecord, type(head)(head.seq0, head.time0, data))


# ---------------------------------------------------------------------------------------------
# Line numbers (1-based, the header being line 1), counted only for an error.


def _shifted(where: LineNumber, lines_before: int) -> LineNumber:
    return lambda k: where(lines_before + k)


def _plain_line_number(path: Path, offset: int) -> int:
    """The number of the line starting at byte `offset`."""
    with open(path, "rb") as file:
        return file.read(offset).count(b"\n") + 1


def _zstd_lines_before(path: Path, frame_ends: Sequence[int]) -> int:
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
