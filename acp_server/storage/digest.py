"""Decoding and digesting a run of stored lines for history pages, whatever the engine.

Every line is decoded once and checked (`RecordChecker`); what a page and an index need is kept
(each record's first seq, the message index, the children started) and the rows that continue
one another are joined (the flushes of a long stream write many short rows of one run). The
JSONL index reads a log's lines through this, a database engine the rows of a page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import msgspec

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
)
from ..core.events import EventError, KnownEvent, SubagentStart
from ..core.paging import message_cut
from ..core.structs import MAX_SAFE_INTEGER
from .errors import CorruptLog
from .records import LineNumber, RecordChecker

PIECE: Final = 64 * 1024
"""Bytes of lines decoded at a time (then digested while their objects are in the caches)."""

_records_decoder: Final = msgspec.json.Decoder(KnownEvent | ChunkRow)


@dataclass
class Region:
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


# ---------------------------------------------------------------------------------------------
# Decoding and digesting lines.


def joined_records(
    name: Path | str, data: bytes, first_line: int
) -> tuple[list[StorageRecord], list[int]]:
    """The records of consecutive stored lines (joined by newlines, the first being line
    `first_line`), decoded and checked as a page's lines are, the rows that continue one
    another joined; and the first seq of each. What a database engine reads a page through."""
    region = digest_lines(Path(name), data, lambda k: first_line + k)
    return region.records, region.record_starts


def digest_lines(path: Path, data: bytes, where: LineNumber) -> Region:
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

    def region(self) -> Region:
        self._close_run()
        end = self.check.expected
        return Region(
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
        check = self.check
        head, dts, fragments, last_time = self.head, self.dts, self.fragments, self.last_time
        joined, joined_starts, add_start = self.joined, self.joined_starts, self.starts.append
        for k, record in enumerate(records, position):
            expected = check.expected
            check.record(k, record)  # it fails fast
            start = check.start
            add_start(start)
            kind = type(record)
            if kind is TextChunks or kind is ReasoningChunks or kind is ToolCallChunks:
                d, time0 = record.data, record.time0
                is_tool = kind is ToolCallChunks
                members = d.args if is_tool else d.texts
                if (
                    head is not None
                    and kind is type(head)
                    and start == expected
                    and d.turn == head.data.turn
                    and d.step == head.data.step
                    and d.index == head.data.index
                    and (not is_tool or (d.id == head.data.id and d.name == head.data.name))
                    and -MAX_SAFE_INTEGER <= time0 - last_time <= MAX_SAFE_INTEGER
                ):
                    if dts is None:
                        dts = list(head.data.dt)
                        fragments = list(head.data.args if is_tool else head.data.texts)
                    dts.append(time0 - last_time)
                    dts.extend(d.dt)
                    cast(list[str], fragments).extend(members)  # set with dts, just above
                else:
                    if head is not None:
                        joined.append(_joined(head, dts, fragments))
                        dts = fragments = None
                    head = record
                    joined_starts.append(start)
                last_time = time0 + sum(d.dt)
                continue
            if head is not None:
                joined.append(_joined(head, dts, fragments))
                head = dts = fragments = None
            joined.append(record)
            joined_starts.append(start)
            if kind is SubagentStart:
                self.children.add(record.data.child_session_id)
            else:
                cut = message_cut(record, start)
                if cut is not None:
                    self.message_seqs.append(start)
                    self.message_cuts.append(cut)
        self.head, self.dts, self.fragments, self.last_time = head, dts, fragments, last_time

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


def _shifted(where: LineNumber, lines_before: int) -> LineNumber:
    return lambda k: where(lines_before + k)
