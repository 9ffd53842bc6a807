"""Paging over storage records (SPEC 3.1): page cuts, row clipping, canonical packing."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from strategies import batch_cuts, session_events, split

from acp_server.core.chunk_rows import TextChunks, TextChunksData, pack_chunk_runs
from acp_server.core.events import SessionEvent
from acp_server.core.paging import PageCut, clip_records, clip_row, page_cut, record_start

encode = msgspec.json.encode


def test_page_cut_takes_the_newest_messages_and_starts_at_the_lowest_source_range() -> None:
    # messages at seqs 3, 10, 20; the message at 20 was built from chunks 12..19
    assert page_cut([3, 10, 20], [3, 10, 12], end=25, max_messages=1) == PageCut(12, 25)
    assert page_cut([3, 10, 20], [3, 10, 12], end=25, max_messages=2) == PageCut(10, 25)


def test_page_cut_with_fewer_messages_than_asked_reaches_seq_zero() -> None:
    assert page_cut([3, 10, 20], [3, 10, 12], end=25, max_messages=4) == PageCut(0, 25)
    assert page_cut([3, 10, 20], [3, 10, 12], end=25, max_messages=4).has_more is False


def test_page_cut_with_exactly_the_messages_asked_cuts_at_the_oldest() -> None:
    assert page_cut([3, 10, 20], [3, 10, 12], end=25, max_messages=3) == PageCut(3, 25)
    assert page_cut([3, 10, 20], [3, 10, 12], end=25, max_messages=3).has_more is True


def test_page_cut_counts_only_messages_before_end() -> None:
    assert page_cut([3, 10, 20], [3, 10, 12], end=20, max_messages=1) == PageCut(10, 20)


def test_page_cut_of_a_log_without_messages_is_everything() -> None:
    assert page_cut([], [], end=7, max_messages=50) == PageCut(0, 7)


def _row(seq0: int, texts: list[str]) -> TextChunks:
    return TextChunks(seq0, 100, TextChunksData(0, 0, 0, list(range(1, len(texts))), texts))


def test_clip_row_keeps_members_inside_the_range_with_their_times() -> None:
    row = _row(10, ["a", "b", "c", "d", "e"])  # times 100, 101, 103, 106, 110
    assert clip_row(row, 12, 14) == TextChunks(12, 103, TextChunksData(0, 0, 0, [3], ["c", "d"]))


def test_clip_row_of_a_row_wholly_inside_is_the_row_itself() -> None:
    row = _row(10, ["a", "b", "c"])
    assert clip_row(row, 0, 99) is row


def test_clip_records_of_an_empty_range_is_empty() -> None:
    row = _row(10, ["a", "b", "c"])
    assert clip_records([row], [10], 11, 11) == []


@given(session_events(), st.data())
def test_packing_stored_records_equals_packing_their_events(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    cuts = data.draw(batch_cuts(len(events)))
    stored = [record for batch in split(events, cuts) for record in pack_chunk_runs(batch)]
    assert encode(pack_chunk_runs(stored)) == encode(pack_chunk_runs(events))


@given(session_events(), st.data())
def test_clipped_stored_records_pack_to_the_canonical_packing_of_the_range(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    if not events:
        return
    cuts = data.draw(batch_cuts(len(events)))
    stored = [record for batch in split(events, cuts) for record in pack_chunk_runs(batch)]
    starts = [record_start(r) for r in stored]
    lo = data.draw(st.integers(events[0].seq, events[-1].seq))
    hi = data.draw(st.integers(lo, events[-1].seq + 1))
    in_range = [e for e in events if lo <= e.seq < hi]
    assert encode(pack_chunk_runs(clip_records(stored, starts, lo, hi))) == encode(
        pack_chunk_runs(in_range)
    )
