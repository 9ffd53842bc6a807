"""Paging history (SPEC 3.1) over storage records, without expanding chunk rows.

A page is chosen on logical events first and packed second: `page_cut` finds where the page
starts from the message index alone, `clip_records` cuts the stored records to the page's seq
range (splitting a row only where a page boundary falls inside it), and `pack_chunk_runs` over
those records merges what the flushes split, so the page is exactly the canonical packing of
its events whatever layout the log had on disk.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import cast

import msgspec

from .chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    ReasoningChunks,
    StorageRecord,
    TextChunks,
    TextChunksData,
    ToolCallChunks,
    ToolCallChunksData,
)
from .events import AssistantMessageEvent, KnownEvent, UnknownEvent, UserMessageEvent


def record_count(record: StorageRecord) -> int:
    """How many events a record stands for."""
    # `type() in` / `is` rather than isinstance: far cheaper for msgspec structs, and these run
    # for every record.
    if type(record) is ToolCallChunks:
        return len(record.data.args)
    if type(record) in ROW_CLASSES:
        return len(cast("TextChunks | ReasoningChunks", record).data.texts)
    return 1


def record_start(record: StorageRecord) -> int:
    if type(record) in ROW_CLASSES:
        return cast(ChunkRow, record).seq0
    return cast("KnownEvent | UnknownEvent", record).seq


# ---------------------------------------------------------------------------------------------
# Choosing a page.


class PageCut(msgspec.Struct, frozen=True):
    start: int
    """The first seq of the page."""
    end: int
    """One past the last seq of the page."""

    @property
    def has_more(self) -> bool:
        return self.start > 0


def message_cut(record: object, seq: int) -> int | None:
    """For a `user/message` or `assistant/message` at `seq`: the lowest of `seq` and its
    `sourceRange` start, where a page holding it must begin (so that a message and its chunks
    land on one page). None for any other record.

    What `page_cut` is given, per message, by everything that indexes messages.
    """
    if type(record) is UserMessageEvent or type(record) is AssistantMessageEvent:
        source = record.source_range
        return min(seq, source[0]) if type(source) is tuple else seq
    return None


def page_cut(
    message_seqs: Sequence[int],
    message_cuts: Sequence[int],
    end: int,
    max_messages: int,
) -> PageCut:
    """The page ending before `end` that holds the newest `max_messages` messages.

    `message_seqs` are the seqs of the `user/message` and `assistant/message` events, ascending;
    `message_cuts[i]` is the lowest of `message_seqs[i]` and its `sourceRange` start, so that a
    message and its chunks land on one page. With fewer messages than asked for, the page
    reaches back to seq 0.
    """
    newest = bisect_left(message_seqs, end)
    oldest = newest - max_messages
    if oldest < 0:
        return PageCut(0, end)
    start = min(message_cuts[oldest:newest], default=end)
    return PageCut(start, end)


# ---------------------------------------------------------------------------------------------
# Cutting records to a seq range.


def clip_row(row: ChunkRow, lo: int, hi: int) -> ChunkRow:
    """The members of `row` with seqs in `[lo, hi)`, as a row (possibly shorter than MIN_RUN)."""
    d = row.data
    first = max(lo - row.seq0, 0)
    count = record_count(row)
    last = min(hi - row.seq0, count)
    if first == 0 and last == count:
        return row
    seq0 = row.seq0 + first
    time0 = row.time0 + sum(d.dt[:first])
    dt = d.dt[first : last - 1]
    if isinstance(row, ToolCallChunks):
        calls = row.data
        return ToolCallChunks(
            seq0,
            time0,
            ToolCallChunksData(
                turn=calls.turn,
                step=calls.step,
                index=calls.index,
                dt=dt,
                id=calls.id,
                name=calls.name,
                args=calls.args[first:last],
            ),
        )
    texts = row.data
    return type(row)(
        seq0,
        time0,
        TextChunksData(texts.turn, texts.step, texts.index, dt, texts.texts[first:last]),
    )


def clip_records(
    records: Sequence[StorageRecord], starts: Sequence[int], lo: int, hi: int
) -> list[StorageRecord]:
    """The records covering seqs `[lo, hi)`; `starts[i]` is record i's first seq.

    The records hold contiguous seqs, so only the first and the last of those covering the
    range can reach outside it: a row there is clipped, an event before `lo` left out.
    """
    if lo >= hi:
        return []
    first = max(bisect_right(starts, lo) - 1, 0)
    last = bisect_left(starts, hi)
    clipped = list(records[first:last])
    if not clipped:
        return clipped
    head = clipped[0]
    if isinstance(head, ROW_CLASSES):
        start = head.seq0
        if start < lo or start + record_count(head) > hi:
            clipped[0] = clip_row(head, lo, hi)
    elif head.seq < lo:
        del clipped[0]
    if clipped:
        tail = clipped[-1]
        if isinstance(tail, ROW_CLASSES) and tail.seq0 + record_count(tail) > hi:
            clipped[-1] = clip_row(tail, lo, hi)
    return clipped
