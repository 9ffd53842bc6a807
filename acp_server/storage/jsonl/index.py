"""An index of a session log on disk, so history pages read only what they show.

The index is built from the end of the file, lazily. `LogIndex.build` reads the header and the
last block of the log (which gives the session's last seq) and nothing more. A page then
indexes backwards, block by block, only as far as its messages reach: the newest page of a
long session reads the end of the file, not the whole of it. Every line indexed is decoded
once, type-checked, its rows validated and its seq checked against its neighbours', and the
records decoded for a page are used for that page directly. What stays is one `Entry` per
record (its first seq and where its line is) and, per message, its seq and the lowest seq of
its chunks: a later page reads and decodes exactly its own lines. A row is split only where a
page boundary cuts it, the short rows the flushes wrote are joined, and the page's records are
packed canonically. The index grows with the file: `refresh()` indexes only what was appended.

Where lines are and how they are read is a reader's business, chosen once when the log is
opened: `PlainReader` steps back through a plain log in blocks of bytes; `ZstdReader` walks a
Zstandard log's frame boundaries (one frame per append batch) from the block headers alone and
steps back frame by frame, decompressing only the frames a page needs.

A page far before what is indexed starts from a seek point instead (`acp_server.core.seek_points`,
kept beside the log by its writer): the nearest line (or frame) start at or after the page's end.
A second index, of the records before that point only, steps back from there as this one steps
back from the end, so a page in the middle of a huge log reads about what it shows. The point is
checked by that very index: the offset must begin a line (or be a frame's), and the lines read
before it must end exactly at the point's seq; a point the log does not bear out, or none near,
and the page is read by walking back from what is indexed, as without points, and the points of
what that walk read are written anew (they are a cache: a write that fails is ignored).

Reading never changes the file. A torn final line (or frame) is left out until it is complete.
"""

from __future__ import annotations

import contextlib
import os
import threading
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Final

from ...core.chunk_rows import (
    StorageRecord,
    pack_chunk_runs,
)
from ...core.header import SessionHeader
from ...core.paging import PageCut, clip_records, page_cut
from ...core.seek_points import (
    SEEK_SPACING,
    SeekPoint,
    choose_point,
    decode_points,
    encode_points,
    merge_points,
    points_missing,
    sparse_points,
)
from ..digest import Region, digest_lines
from ..errors import CorruptLog
from ..records import seq_problem
from .lines import SEEK_NAME
from .readers import Entry, IndexedLines, PlainReader, ZstdReader, entry_start, open_reader

REPAIR_WALK: Final = 4 * SEEK_SPACING
"""Bytes of lines a walk back must read before the seek points of what it read are checked
(and, if too few, written anew)."""


class _StalePoint(Exception):
    """The lines before a seek point do not end at its seq."""


# ---------------------------------------------------------------------------------------------
# The index.


class LogIndex:
    """The index of one log file (see the module docstring); pages and refreshes lock it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        """Pages and refreshes grow the index: one at a time (the server runs them in threads)."""
        self._points: tuple[tuple[int, int], list[SeekPoint]] = ((-1, -1), [])
        """The seek file's points, and its size and mtime when they were read."""
        self._stale_points = False
        """Whether a seek point was found wrong since the points were last written anew."""
        self._open()

    @classmethod
    def build(cls, path: Path) -> LogIndex:
        """Read the header and index the last block; the rest is indexed as pages need it."""
        return cls(path)

    @classmethod
    def _before_point(
        cls, path: Path, reader: PlainReader | ZstdReader, point: SeekPoint
    ) -> LogIndex:
        """An index of the records before `point` (`reader` reads only those), to read one page
        or range from: it is not refreshed, and raises `_StalePoint` if the point is wrong."""
        index = cls.__new__(cls)
        index.path = path
        index._start(reader, point.seq)
        return index

    def _open(self) -> None:
        """Start from nothing: read the header and index back to the log's last record."""
        self._start(open_reader(self.path), None)
        step = self.reader.covered()[1]
        while not self.entries and not self.reader.complete:  # the last record: the last seq
            self._step_back(step, keep=True)
            step *= 2

    def _start(self, reader: PlainReader | ZstdReader, anchor: int | None) -> None:
        self.reader = reader
        self.header: SessionHeader = self.reader.header
        self.entries: list[Entry] = []
        """One per indexed record, in seq order: the index covers a suffix of the log's
        records (all of them once the reader is `complete`), or of those before a point."""
        self._anchor = anchor
        """The seq of the seek point this index ends at (None: it ends where the log does)."""
        self.length = anchor or 0
        """How many events the log's complete records stand for (or those before the point)."""
        self.message_seqs: list[int] = []
        self.message_cuts: list[int] = []
        self._children: set[str] = set()
        self._fresh: Region | None = None
        """What the backward steps of `build` and of the current page decoded (the first
        indexed records, up to `_fresh.end`), so that the page need not read them again."""

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

    def _prepend(self, lines: IndexedLines, *, keep: bool) -> None:
        """Index `lines`, which end where the indexed records begin."""
        region = digest_lines(self.path, lines.data, lines.where)
        if not region.starts:
            return
        if self.entries and region.end != self.entries[0].start:
            raise CorruptLog(
                self.path,
                self.reader.line_number(self.entries[0]),
                seq_problem(region.end, self.entries[0].start),
            )
        if not self.entries:
            if self._anchor is None:
                self.length = region.end
            elif region.end != self._anchor:
                raise _StalePoint
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

    def _appended(self, lines: IndexedLines) -> None:
        """Index `lines`, which follow the last indexed record."""
        region = digest_lines(self.path, lines.data, lines.where)
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
            island = self._from_point(end)
            if island is not None:
                try:
                    return island._page(end, max_messages)
                except (_StalePoint, CorruptLog):
                    self._stale_points = True  # read it as if there were no points
            walked_from = self.reader.covered_offset, len(self.entries)
            try:
                return self._page(end, max_messages)
            finally:
                self._walked(*walked_from)

    def records_between(self, lo: int, hi: int) -> list[StorageRecord]:
        """The canonical packing of the events in `[lo, hi)`, decoding only their lines."""
        with self._lock:
            island = self._from_point(hi) if lo < hi else None
            if island is not None:
                try:
                    return island._records(lo, hi)
                except (_StalePoint, CorruptLog):
                    self._stale_points = True
            walked_from = self.reader.covered_offset, len(self.entries)
            try:
                return self._records(lo, hi)
            finally:
                self._walked(*walked_from)

    def _page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        try:
            cut = self._cover(end, max_messages)
            return cut, self._records_between(cut.start, cut.end)
        finally:
            self._fresh = None

    def _records(self, lo: int, hi: int) -> list[StorageRecord]:
        try:
            while lo < hi and lo < self.first_indexed_seq and not self.complete:
                self._step_back(self._next_step(0, self.first_indexed_seq - lo), keep=True)
            return self._records_between(lo, hi)
        finally:
            self._fresh = None

    # -- seek points ---------------------------------------------------------------------------

    def _from_point(self, end: int) -> LogIndex | None:
        """An index of the records before the seek point nearest at or after seq `end`, if
        there is one before what this index covers (None: walk back from there instead)."""
        if self.complete or end >= self.first_indexed_seq:
            return None
        point = choose_point(self._seek_points(), end, self.reader.covered_offset)
        if point is None:
            return None
        reader = self.reader.seeked(point.offset)
        if reader is None or point.seq >= self.first_indexed_seq:
            self._stale_points = True
            return None
        return LogIndex._before_point(self.path, reader, point)

    def _seek_points(self) -> list[SeekPoint]:
        """The points of the seek file beside the log (read again only once it changed)."""
        try:
            stat = (self.path.parent / SEEK_NAME).stat()
            version = (stat.st_size, stat.st_mtime_ns)
            if version != self._points[0]:
                data = (self.path.parent / SEEK_NAME).read_bytes()
                self._points = (version, decode_points(data))
        except OSError:
            self._points = ((-1, -1), [])
        return self._points[1]

    def _walked(self, walked_from: int, entries_before: int) -> None:
        """After a walk back from byte `walked_from` (when `entries_before` records were
        indexed): write the seek points anew if the walk was long and the seek file had too few
        points for what it read (or a wrong one)."""
        read = self.entries[: len(self.entries) - entries_before]
        text = sum(entry.length + 1 for entry in read)
        if text < REPAIR_WALK:
            return
        points = self._seek_points()
        walked_to = self.reader.covered_offset
        if not self._stale_points and not points_missing(points, walked_to, walked_from, text):
            return
        seek_offset = self.reader.seek_offset
        walked = sparse_points((e.start, seek_offset(e), e.length + 1) for e in self.entries)
        path = self.path.parent / SEEK_NAME
        temporary = path.with_name(path.name + ".new")
        try:
            # Points before the walk are kept as hints, unless one was found wrong.
            kept = [] if self._stale_points else points
            temporary.write_bytes(encode_points(merge_points(kept, walked)))
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            return
        self._stale_points = False

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
            first = max(bisect_right(self.entries, lo, key=entry_start) - 1, 0)
            loaded = self._load(first, bisect_left(self.entries, hi, key=entry_start))
            records += clip_records(loaded.records, loaded.record_starts, lo, hi)
        return pack_chunk_runs(records)

    def _load(self, first: int, last: int) -> Region:
        """Indexed records `[first, last)` read again from the file, and checked against the index."""
        entries = self.entries[first:last]
        line_number = self.reader.line_number

        def where(k: int) -> int:
            return line_number(entries[k])

        region = digest_lines(self.path, self.reader.load(entries), where)
        following = self.entries[last].start if last < len(self.entries) else self.length
        if region.starts != [entry.start for entry in entries] or region.end != following:
            raise CorruptLog(
                self.path, where(0), "the log changed under its index (it is append-only)"
            )
        return region
