"""An index of a session log on disk, so history pages read only what they show.

The index is built from the end of the file, lazily. `LogIndex.build` reads the header and the
last block of the log (which gives the session's last seq) and nothing more. A page then
indexes backwards, block by block, only as far as its messages reach: the newest page of a
long session reads the end of the file, not the whole of it. Every line indexed is decoded
once, type-checked, its rows validated and its seq checked against its neighbours', and the
records decoded for a page are used for that page directly. What stays is, per record, its
first seq and where its line is, and per message its seq and the lowest seq of its chunks: a
later page reads and decodes exactly its own lines. A row is split only where a page boundary
cuts it, the short rows the flushes wrote are joined, and the page's records are packed
canonically. The index grows with the file: `refresh()` indexes only what was appended.

A Zstandard log is indexed frame by frame (one frame per append batch): the frame boundaries
are walked at build from the block headers alone, and a page decompresses only its frames.

Reading never changes the file. A torn final line (or frame) is left out until it is complete.
"""

from __future__ import annotations

import os
import re
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
import zstandard

from ..core.chunk_rows import (
    ChunkRow,
    ChunkRowError,
    ReasoningChunks,
    StorageRecord,
    TextChunks,
    TextChunksData,
    ToolCallChunks,
    ToolCallChunksData,
    decode_record_json,
    pack_chunk_runs,
    validate_row,
)
from ..core.events import (
    MAX_SAFE_INTEGER,
    AssistantMessageEvent,
    EventError,
    KnownEvent,
    SubagentStart,
    UserMessageEvent,
)
from ..core.header import SessionHeader
from ..core.paging import PageCut, clip_records, page_cut
from ..core.source_range import source_range_problem
from .log import CorruptLog, complete_frame_after, log_compression, parse_header, zstd_frame_end

MIN_BLOCK: Final = 64 * 1024
"""Bytes of a plain log read by the first backward step (later steps are sized to need)."""
MIN_FRAMES: Final = 8
"""Frames of a Zstandard log read by the first backward step."""
PIECE: Final = 64 * 1024
"""Bytes of lines decoded at a time (then digested while their objects are in the caches)."""

_records_decoder: Final = msgspec.json.Decoder(KnownEvent | ChunkRow)
_NEWLINE: Final = re.compile(b"\n")


@dataclass
class _Region:
    """What a run of consecutive lines holds, digested for the index and for pages."""

    starts: array
    """The first seq of each line's record."""
    message_seqs: array
    message_cuts: array
    children: set[str]
    end: int
    """One past the last seq the region's records stand for."""
    records: list[StorageRecord]
    """The records, with the rows that continue one another joined (the flushes of a long
    stream write many short rows of one run)."""
    record_starts: array
    """The first seq of each of `records`."""


@dataclass(eq=False)
class LogIndex:
    path: Path
    header: SessionHeader
    compressed: bool
    body_start: int
    """Plain logs: the byte offset of line 2 (the first record)."""
    indexed_bytes: int
    """How far into the file the complete lines (or frames) reach: any torn tail starts there."""
    covered_from: int
    """Where the indexed records begin: a byte offset (plain logs) or a frame index (Zstandard).
    The index covers a suffix of the log's records, from here to `indexed_bytes`."""
    length: int = 0
    """How many events the log's complete records stand for."""
    starts: array = field(default_factory=lambda: array("q"))
    """First seq of each indexed record."""
    offsets: array = field(default_factory=lambda: array("q"))
    """Plain logs: the byte offset of each record's line. Zstandard: its offset in its frame."""
    lengths: array = field(default_factory=lambda: array("q"))
    frames: array = field(default_factory=lambda: array("q"))
    """Zstandard logs: the frame (index into `frame_offsets`) holding each record."""
    frame_offsets: array = field(default_factory=lambda: array("q"))
    frame_ends: array = field(default_factory=lambda: array("q"))
    message_seqs: array = field(default_factory=lambda: array("q"))
    message_cuts: array = field(default_factory=lambda: array("q"))
    _children: set[str] = field(default_factory=set)
    _fresh: _Region | None = None
    """What the backward steps of `build` and of the current page decoded (the first indexed
    records, up to `_fresh.end`), so that the page need not read them again."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    """Pages and refreshes grow the index: one at a time (the server runs them in threads)."""

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def build(cls, path: Path) -> LogIndex:
        """Read the header and index the last block; the rest is indexed as pages need it."""
        compressed = log_compression(path) == "zstd"
        if compressed:
            index = cls._open_zstd(path)
        else:
            index = cls._open_plain(path)
        step = MIN_FRAMES if compressed else MIN_BLOCK
        while not index.starts and not index.complete:  # the last record gives the last seq
            index._step_back(step, keep=True)
            step *= 2
        return index

    @classmethod
    def _open_plain(cls, path: Path) -> LogIndex:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            head = b""
            newline = -1
            while newline < 0 and len(head) < size:
                head += file.read(max(MIN_BLOCK, len(head)))
                newline = head.find(b"\n")
            if newline < 0:
                raise CorruptLog(path, 1, "the log has no complete header line")
            header = parse_header(path, head[:newline])
            end = size
            while end > newline + 1:  # the end of the last complete line
                lo = max(newline + 1, end - MIN_BLOCK)
                file.seek(lo)
                last = file.read(end - lo).rfind(b"\n")
                if last >= 0:
                    end = lo + last + 1
                    break
                end = lo
            end = max(end, newline + 1)
        return cls(path, header, False, newline + 1, end, covered_from=end)

    @classmethod
    def _open_zstd(cls, path: Path) -> LogIndex:
        data = path.read_bytes()
        view = memoryview(data)
        frame_offsets, frame_ends = array("q"), array("q")
        offset = 0
        while offset < len(data):
            try:
                end = zstd_frame_end(view, offset)
            except ValueError as exc:
                raise CorruptLog(
                    path, _zstd_lines_before(path, frame_ends), f"at byte {offset}: {exc}"
                ) from None
            if end is None:
                if complete_frame_after(view, offset):  # damage, not a torn final write
                    raise CorruptLog(
                        path,
                        _zstd_lines_before(path, frame_ends),
                        f"frame at byte {offset} is incomplete, but complete frames follow it",
                    )
                break  # a torn final frame
            frame_offsets.append(offset)
            frame_ends.append(end)
            offset = end
        if not frame_offsets:
            raise CorruptLog(path, 1, "the log has no complete header line")
        try:
            first = zstandard.ZstdDecompressor().decompressobj().decompress(view[: frame_ends[0]])
        except zstandard.ZstdError as exc:
            raise CorruptLog(path, 1, f"frame at byte 0: {exc}") from None
        newline = first.find(b"\n")
        if newline < 0:
            raise CorruptLog(path, 1, "the log has no complete header line")
        header = parse_header(path, first[:newline])
        index = cls(path, header, True, 0, offset, covered_from=len(frame_offsets))
        index.frame_offsets, index.frame_ends = frame_offsets, frame_ends
        return index

    @property
    def last_seq(self) -> int:
        return self.length - 1

    @property
    def complete(self) -> bool:
        """Whether every record of the log (up to `indexed_bytes`) is indexed."""
        return self.covered_from == (0 if self.compressed else self.body_start)

    @property
    def first_indexed_seq(self) -> int:
        return self.starts[0] if self.starts else self.length

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
            self._refresh()

    def _refresh(self) -> None:
        size = self.path.stat().st_size
        if size == self.indexed_bytes:
            return
        if size < self.indexed_bytes:  # not an append: the file was replaced
            rebuilt = LogIndex.build(self.path)
            rebuilt._lock = self._lock
            self.__dict__.update(rebuilt.__dict__)
            return
        with open(self.path, "rb") as file:
            file.seek(self.indexed_bytes)
            tail = file.read(size - self.indexed_bytes)
        if self.compressed:
            self._append_frames(tail)
        else:
            end = tail.rfind(b"\n") + 1
            if end:
                self._index_lines(tail[:end], self.indexed_bytes, prepend=False, keep=False)
                self.indexed_bytes += end

    # -- indexing ------------------------------------------------------------------------------

    def _step_back(self, amount: int, *, keep: bool) -> None:
        """Index about `amount` more bytes (plain) or frames (Zstandard) before what is indexed."""
        if self.compressed:
            first = max(0, self.covered_from - amount)
            self._index_frames(first, self.covered_from, prepend=True, keep=keep)
            self.covered_from = first
        else:
            self._step_back_lines(amount, keep=keep)
        if self.complete and self.starts and self.starts[0] != 0:
            raise CorruptLog(self.path, 2, f"seq gap: expected seq 0, found {self.starts[0]}")

    def _step_back_lines(self, amount: int, *, keep: bool) -> None:
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
            self._index_lines(data, lo, prepend=True, keep=keep)
            self.covered_from = lo
            return

    def _next_step(self, messages: int, seqs: int, stalled: int = 0) -> int:
        """How far to step back for `messages` more messages, or else `seqs` more seqs.

        Sized from how densely what is indexed holds them, a little over (a step decodes only
        lines not yet indexed, so falling short costs one more small step, going too far
        costs decoding lines nobody asked for); at least twice `stalled`, the size of a
        previous step that found none of the messages needed.
        """
        if self.compressed:
            covered, least = len(self.frame_offsets) - self.covered_from, MIN_FRAMES
        else:
            covered, least = self.indexed_bytes - self.covered_from, MIN_BLOCK
        if messages > 0:
            known = len(self.message_seqs)
            # A handful of messages says little about their density: grow at most 8-fold then.
            guess = covered * messages // known if known else 2 * covered
            if known < 8:
                guess = min(guess, 8 * covered)
        else:
            guess = covered * seqs // max(self.length - self.first_indexed_seq, 1)
        return max(least, guess + guess // 16, 2 * stalled)

    def _index_lines(self, data: bytes, base: int, *, prepend: bool, keep: bool) -> None:
        """Index the complete lines of a plain log in `data` (which starts at byte `base`)."""
        newlines = [match.start() for match in _NEWLINE.finditer(data)]
        # Line k runs from just after newline k - 1 to newline k.
        lengths = array("q", map(int.__sub__, newlines, [-1, *newlines[:-1]]))
        lengths = array("q", map((-1).__add__, lengths))
        offsets = array("q", [base])
        offsets.extend(map((base + 1).__add__, newlines[:-1]))
        region = self._read(data, lambda k: _plain_line_number(self.path, offsets[k]))
        self._add(region, offsets, lengths, None, prepend=prepend, keep=keep)

    def _index_frames(self, first: int, last: int, *, prepend: bool, keep: bool) -> None:
        """Index the lines of frames `[first, last)` of a Zstandard log."""
        if first >= last:
            return
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
                number = _zstd_lines_before(self.path, self.frame_ends[:frame])
                raise CorruptLog(
                    self.path,
                    number,
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
        region = self._read(
            b"".join(texts), lambda k: _zstd_line_number(self, frames[k], offsets[k])
        )
        self._add(region, offsets, lengths, frames, prepend=prepend, keep=keep)

    def _append_frames(self, tail: bytes) -> None:
        view = memoryview(tail)
        base = self.indexed_bytes
        offset = 0
        first = len(self.frame_offsets)
        while offset < len(tail):
            try:
                end = zstd_frame_end(view, offset)
            except ValueError as exc:
                lines = _zstd_lines_before(self.path, self.frame_ends)
                raise CorruptLog(self.path, lines, f"at byte {base + offset}: {exc}") from None
            if end is None:
                if complete_frame_after(view, offset):  # damage, not a torn final write
                    lines = _zstd_lines_before(self.path, self.frame_ends)
                    raise CorruptLog(
                        self.path,
                        lines,
                        f"frame at byte {base + offset} is incomplete, but complete frames follow it",
                    )
                break
            self.frame_offsets.append(base + offset)
            self.frame_ends.append(base + end)
            offset = end
        try:
            self._index_frames(first, len(self.frame_offsets), prepend=False, keep=False)
        except BaseException:
            del self.frame_offsets[first:], self.frame_ends[first:]
            raise
        self.indexed_bytes = base + offset

    def _read(self, data: bytes, where: Callable[[int], int]) -> _Region:
        """Decode and digest the lines of `data` (joined by newlines; `where(k)` is the line
        number of line k), a piece of about `PIECE` bytes at a time: the objects a piece
        decodes are still in the CPU's caches when the digest walks them."""
        digest = _Digest(self.path, where)
        view = memoryview(data)
        size = len(data)
        start = position = 0
        while start < size:
            end = data.find(b"\n", start + PIECE)
            end = size if end < 0 else end + 1
            count = data.count(b"\n", start, end) + (data[end - 1] != 10)  # a last line without \n
            records = self._decode(view[start:end], count, _shifted(where, position))
            digest.feed(records, position)
            start, position = end, position + count
        return digest.region()

    def _decode(self, text: memoryview, count: int, where: Callable[[int], int]) -> list[Any]:
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
                raise CorruptLog(self.path, where(k), str(exc)) from None
        return records

    def _add(
        self,
        region: _Region,
        offsets: array,
        lengths: array,
        frames: array | None,
        *,
        prepend: bool,
        keep: bool,
    ) -> None:
        if not region.starts:
            return
        first = region.starts[0]
        if prepend:
            if self.starts and region.end != self.starts[0]:
                raise CorruptLog(
                    self.path,
                    self._line_of(0),
                    f"seq gap: expected seq {region.end}, found {self.starts[0]}",
                )
            if not self.starts:
                self.length = region.end
            self.starts = region.starts + self.starts
            self.offsets = offsets + self.offsets
            self.lengths = lengths + self.lengths
            if frames is not None:
                self.frames = frames + self.frames
            self.message_seqs = region.message_seqs + self.message_seqs
            self.message_cuts = region.message_cuts + self.message_cuts
            fresh = self._fresh
            if not keep:
                self._fresh = None
            elif fresh is None:
                self._fresh = region
            else:  # the rows a step boundary split stay split: packing joins them
                fresh.records = region.records + fresh.records
                fresh.record_starts = region.record_starts + fresh.record_starts
        else:
            if first != self.length:
                line = (
                    _plain_line_number(self.path, offsets[0])
                    if frames is None
                    else _zstd_line_number(self, frames[0], offsets[0])
                )
                raise CorruptLog(
                    self.path, line, f"seq gap: expected seq {self.length}, found {first}"
                )
            self.starts.extend(region.starts)
            self.offsets.extend(offsets)
            self.lengths.extend(lengths)
            if frames is not None:
                self.frames.extend(frames)
            self.message_seqs.extend(region.message_seqs)
            self.message_cuts.extend(region.message_cuts)
            self.length = region.end
        self._children |= region.children

    def _frame_text(self, raw: bytes | memoryview, frame: int) -> bytes:
        try:
            return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        except zstandard.ZstdError as exc:
            line = _zstd_lines_before(self.path, self.frame_ends[:frame])
            raise CorruptLog(
                self.path, line, f"frame at byte {self.frame_offsets[frame]}: {exc}"
            ) from None

    def _line_of(self, position: int) -> int:
        if self.compressed:
            return _zstd_line_number(self, self.frames[position], self.offsets[position])
        return _plain_line_number(self.path, self.offsets[position])

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
            loaded = self._load(
                max(bisect_right(self.starts, lo) - 1, 0), bisect_left(self.starts, hi)
            )
            records += clip_records(loaded.records, loaded.record_starts, lo, hi)
        return pack_chunk_runs(records)

    def _load(self, first: int, last: int) -> _Region:
        """Indexed records `[first, last)` read again from the file, and checked against the index."""
        with open(self.path, "rb") as file:
            if self.compressed:
                data = self._frame_lines(file, first, last)
            else:
                lo = self.offsets[first]
                file.seek(lo)
                data = file.read(self.offsets[last - 1] + self.lengths[last - 1] - lo)
        where = lambda k: self._line_of(first + k)
        region = self._read(data, where)
        following = self.starts[last] if last < len(self.starts) else self.length
        if region.starts != self.starts[first:last] or region.end != following:
            raise CorruptLog(
                self.path, where(0), "the log changed under its index (it is append-only)"
            )
        return region

    def _frame_lines(self, file: object, first: int, last: int) -> bytes:
        lines: list[bytes] = []
        frame, text = -1, b""
        for i in range(first, last):
            if self.frames[i] != frame:
                frame = self.frames[i]
                file.seek(self.frame_offsets[frame])  # type: ignore[attr-defined]
                raw = file.read(self.frame_ends[frame] - self.frame_offsets[frame])  # type: ignore[attr-defined]
                text = self._frame_text(raw, frame)
            offset = self.offsets[i]
            lines.append(text[offset : offset + self.lengths[i]])
        return b"\n".join(lines)


class _Digest:
    """Checks consecutive records (rows valid, seqs contiguous), takes what the index keeps,
    and joins the rows that continue one another, fed a piece at a time.

    This runs once per stored line a page needs, and a long stream leaves thousands of short
    rows: so it is one pass, which touches each row once (its lists are joined while they are
    at hand), and checks SPEC 2.1's row rules in full only where a quick bound does not already
    pass them.
    """

    def __init__(self, path: Path, where: Callable[[int], int]) -> None:
        self.path = path
        self.where = where
        self.starts, self.message_seqs, self.message_cuts = array("q"), array("q"), array("q")
        self.children: set[str] = set()
        self.joined: list[StorageRecord] = []
        self.joined_starts = array("q")
        self.head: Any = None
        """The first row of the run being joined (None: no run is open)."""
        self.dts: list[int] | None = None
        self.fragments: list[str] | None = None
        """The joined lists of the open run, once a second row joins it."""
        self.block: tuple[Any, ...] = ()
        """The open run's turn, step, index (and tool-call id and name)."""
        self.last_time = 0
        self.expected = -1

    def region(self) -> _Region:
        if self.head is not None:
            self.joined.append(_joined(self.head, self.dts, self.fragments))
            self.head = self.dts = self.fragments = None
        return _Region(
            self.starts,
            self.message_seqs,
            self.message_cuts,
            self.children,
            self.expected,
            self.joined,
            self.joined_starts,
        )

    def feed(self, records: list[Any], position: int) -> None:
        """Digest the next records; `position` is the number of lines fed before them."""
        head, dts, fragments, last_time, expected = (
            self.head,
            self.dts,
            self.fragments,
            self.last_time,
            self.expected,
        )
        if head is not None:
            turn, step, index, id_, name = self.block
        joined, joined_starts, add_start = self.joined, self.joined_starts, self.starts.append
        for record in records:
            kind = type(record)
            if kind is TextChunks or kind is ReasoningChunks or kind is ToolCallChunks:
                d = record.data  # type: ignore[union-attr]
                start, time0 = record.seq0, record.time0  # type: ignore[union-attr]
                dt = d.dt
                is_tool = kind is ToolCallChunks
                members = d.args if is_tool else d.texts
                count = len(members)
                total = sum(dt)
                # With no negative gap, a row's member times lie between its first and last.
                if (
                    len(dt) + 1 != count
                    or start + count > MAX_SAFE_INTEGER + 1
                    or time0 < -MAX_SAFE_INTEGER
                    or time0 + total > MAX_SAFE_INTEGER
                    or (dt and min(dt) < 0)
                ):
                    try:
                        validate_row(record)  # type: ignore[arg-type]
                    except ChunkRowError as exc:
                        raise self._corrupt(records, record, position, str(exc)) from None
                if (
                    head is not None
                    and kind is type(head)
                    and start == expected
                    and d.turn == turn
                    and d.step == step
                    and d.index == index
                    and (not is_tool or (d.id == id_ and d.name == name))
                    and -MAX_SAFE_INTEGER <= time0 - last_time <= MAX_SAFE_INTEGER
                ):
                    if dts is None:
                        dts, fragments = (
                            list(head.data.dt),
                            list(head.data.args if is_tool else head.data.texts),
                        )
                    dts.append(time0 - last_time)
                    dts.extend(dt)
                    fragments.extend(members)  # type: ignore[union-attr]
                else:
                    if head is not None:
                        joined.append(_joined(head, dts, fragments))
                        dts = fragments = None
                    head = record
                    joined_starts.append(start)
                    turn, step, index = d.turn, d.step, d.index
                    id_, name = (d.id, d.name) if is_tool else (None, None)
                last_time = time0 + total
            else:
                start = record.seq  # type: ignore[union-attr]
                count = 1
                if type(record.source_range) is tuple:
                    problem = source_range_problem(record, start, None)
                    if problem is not None:
                        raise self._corrupt(records, record, position, problem)
                if head is not None:
                    joined.append(_joined(head, dts, fragments))
                    head = dts = fragments = None
                joined.append(record)
                joined_starts.append(start)
                if kind is UserMessageEvent or kind is AssistantMessageEvent:
                    source = record.source_range  # type: ignore[union-attr]
                    self.message_seqs.append(start)
                    self.message_cuts.append(
                        min(start, source[0]) if type(source) is tuple else start
                    )
                elif kind is SubagentStart:
                    self.children.add(record.data.child_session_id)  # type: ignore[union-attr]
            if start != expected and expected >= 0:
                raise self._corrupt(
                    records, record, position, f"seq gap: expected seq {expected}, found {start}"
                )
            add_start(start)
            expected = start + count
        self.head, self.dts, self.fragments, self.last_time, self.expected = (
            head,
            dts,
            fragments,
            last_time,
            expected,
        )
        if head is not None:
            self.block = (turn, step, index, id_, name)

    def _corrupt(self, records: list[Any], record: Any, position: int, reason: str) -> CorruptLog:
        k = next(k for k, candidate in enumerate(records) if candidate is record)
        return CorruptLog(self.path, self.where(position + k), reason)


def _joined(head: Any, dt: list[int] | None, fragments: list[str] | None) -> StorageRecord:
    """The row a run of rows joined into: `head` with the joined lists (None: `head` alone)."""
    if dt is None:
        return head  # type: ignore[no-any-return]
    d = head.data
    data: Any
    if type(head) is ToolCallChunks:
        data = ToolCallChunksData(
            turn=d.turn, step=d.step, index=d.index, dt=dt, id=d.id, name=d.name, args=fragments
        )  # type: ignore[arg-type]
    else:
        data = TextChunksData(d.turn, d.step, d.index, dt, fragments)  # type: ignore[arg-type]
    return type(head)(head.seq0, head.time0, data)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------
# Line numbers (1-based, the header being line 1), counted only for an error.


def _shifted(where: Callable[[int], int], lines_before: int) -> Callable[[int], int]:
    return lambda k: where(lines_before + k)


def _plain_line_number(path: Path, offset: int) -> int:
    """The number of the line starting at byte `offset`."""
    with open(path, "rb") as file:
        return file.read(offset).count(b"\n") + 1


def _zstd_lines_before(path: Path, frame_ends: array) -> int:
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


def _zstd_line_number(index: LogIndex, frame: int, offset: int) -> int:
    """The number of the line at `offset` in the text of `frame`."""
    before = _zstd_lines_before(index.path, index.frame_ends[:frame])
    data = index.path.read_bytes()[index.frame_offsets[frame] : index.frame_ends[frame]]
    text = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return before + text[:offset].count(b"\n")
