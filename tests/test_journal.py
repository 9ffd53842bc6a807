"""The client's Journal (SPEC 3.3): pages, snapshots and live events stitched into one gapless log.

Property tests page real logs (`EventLog.page`, packed canonically as `session.page` sends
them, through JSON) and check that the journal ends up holding exactly the log; focused examples
pin each rule: covered records dropped, partial overlaps and broken joins refused, malformed
rows refused, gaps reported as values.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import session_events

from acp_server.client.journal import Gap, Journal
from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.content import TextContent
from acp_server.core.event_log import EventLog
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.history import HistoryProtocolError, to_history_records
from acp_server.core.stream import AssistantText, TextDelta

# ---------------------------------------------------------------------------------------------
# Helpers: logs, and pages as the server sends them.


def numbered(events: list[SessionEvent]) -> list[SessionEvent]:
    """The events as a session's log: seqs 0, 1, 2, ..."""
    return [msgspec.structs.replace(event, seq=seq) for seq, event in enumerate(events)]


def wire(events: list[SessionEvent]) -> list[Any]:
    """`events` as wire records: canonically packed, then through JSON."""
    return msgspec.json.decode(msgspec.json.encode(to_history_records(pack_chunk_runs(events))))


class Server:
    """Pages of one log, as `session.page` answers them."""

    def __init__(self, events: list[SessionEvent]) -> None:
        self.log = EventLog(pack_chunk_runs(events))

    def page(self, end: int, max_messages: int) -> tuple[list[Any], bool]:
        """The page ending before seq `end`: its wire records and `hasMore`."""
        cut, records = self.log.page(end, max_messages)
        return msgspec.json.decode(msgspec.json.encode(to_history_records(records))), cut.has_more

    def repair(
        self, journal: Journal, gap: Gap | None, max_messages: int, newer: list[Any] = ()
    ) -> None:
        """What a client does with a gap: page back from it until the pages reach the tail."""
        records = list(newer)
        while gap is not None:
            page, _ = self.page(gap.through_seq + 1, max_messages)
            records = page + records
            gap = journal.fill_gap(records)


def walk_older(server: Server, journal: Journal, max_messages: int) -> None:
    while journal.has_older:
        journal.prepend(*server.page(journal.first_seq, max_messages))


def held(journal: Journal) -> list[SessionEvent]:
    return list(journal.events)


# A small log: one turn whose step streams six text deltas (one row on the wire).
def _chunk(seq: int, text: str) -> AssistantChunk:
    return AssistantChunk(seq, 1000 + seq, AssistantChunkData(0, 0, TextDelta(0, text)))


LOG: list[SessionEvent] = [
    TurnStart(0, 1000, TurnStartData(0)),
    UserMessageEvent(1, 1001, UserMessageData(0, UserMessage("u0", [TextContent("Hi")]))),
    StepStart(2, 1002, StepData(0, 0)),
    *[
        _chunk(seq, text)
        for seq, text in zip(range(3, 9), ["He", "llo", ",", " wor", "ld", "!"], strict=True)
    ],
    AssistantMessageEvent(
        9,
        1009,
        AssistantMessageData(0, 0, AssistantMessage("a0", [AssistantText("Hello, world!")])),
        source_range=(3, 8),
    ),
    StepEnd(10, 1010, StepData(0, 0)),
    TurnEnd(11, 1011, TurnEndData(0, TurnEndReasonCompleted())),
]


def journal_of(first: int, last: int) -> Journal:
    """A journal holding `LOG[first..last]`."""
    return Journal(LOG[first : last + 1], has_older=first > 0)


# ---------------------------------------------------------------------------------------------
# Properties over real pages.


@given(session_events(), st.integers(1, 6))
def test_walking_every_page_newest_to_oldest_with_prepend_gives_the_log(
    events: list[SessionEvent], max_messages: int
) -> None:
    events = numbered(events)
    server = Server(events)
    journal = Journal.from_page(*server.page(len(events), max_messages))
    walk_older(server, journal, max_messages)
    assert held(journal) == events
    assert journal.first_seq == 0 and journal.last_seq == len(events) - 1
    assert journal.has_older is False


@given(session_events(), st.integers(1, 6), st.data())
def test_live_events_with_duplicates_and_drops_are_repaired_by_paging_to_exactly_the_log(
    events: list[SessionEvent], max_messages: int, data: st.DataObject
) -> None:
    events = numbered(events)
    if not events:
        return
    server = Server(events)
    cursor = data.draw(st.integers(-1, len(events) - 1), label="cursor")
    records, has_more = server.page(cursor + 1, max_messages)
    journal = Journal.from_snapshot(records, cursor, has_more)
    # Live delivery after the cursor: each event dropped, sent once, or sent again later; the
    # last is always sent, so the journal can tell it is behind.
    sent: list[SessionEvent] = []
    for event in events[cursor + 1 :]:
        action = data.draw(st.sampled_from(["send", "drop", "twice", "resend-older"]))
        if action != "drop" or event is events[-1]:
            sent.append(event)
        if action == "twice":
            sent.append(event)
        if action == "resend-older" and sent:
            sent.append(data.draw(st.sampled_from(sent)))
    for event in sent:
        gap = journal.apply_live(copy.deepcopy(event))
        if gap is not None:
            assert gap == Gap(journal.last_seq, event.seq)
            server.repair(journal, gap, max_messages)
            assert journal.apply_live(event) is None
    assert held(journal) == events[journal.first_seq :]
    walk_older(server, journal, max_messages)
    assert held(journal) == events


@given(session_events(), st.data())
def test_records_wholly_covered_by_the_journal_are_dropped_and_the_rest_appended(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    events = numbered(events)
    if not events:
        return
    first = data.draw(st.integers(0, len(events) - 1))
    last = data.draw(st.integers(first, len(events) - 1))
    journal = Journal(events[first : last + 1], has_older=first > 0)
    covered_from = data.draw(st.integers(first, last + 1))
    new_through = data.draw(st.integers(last, len(events) - 1))
    # Covered records, then new ones, meeting at a record boundary (right after `last`).
    records = wire(events[covered_from : last + 1]) + wire(events[last + 1 : new_through + 1])
    assert journal.apply_records(records) is None
    assert held(journal) == events[first : max(last, new_through) + 1]


@given(session_events(), st.integers(1, 6), st.data())
def test_a_page_that_does_not_reach_back_to_the_tail_reports_the_gap_and_changes_nothing(
    events: list[SessionEvent], max_messages: int, data: st.DataObject
) -> None:
    events = numbered(events)
    if len(events) < 2:
        return
    server = Server(events)
    last = data.draw(st.integers(0, len(events) - 2))
    journal = Journal(events[: last + 1])
    records, _ = server.page(len(events), max_messages)
    start = server.log.page(len(events), max_messages)[0].start
    outcome = journal.fill_gap(records)
    if start > last + 1:
        assert outcome == Gap(last, start)
        assert held(journal) == events[: last + 1]
    else:
        assert outcome is None
        assert held(journal) == events


# ---------------------------------------------------------------------------------------------
# Starting.


def test_a_snapshot_holds_its_page_and_has_older_events_when_it_starts_after_seq_0() -> None:
    journal = Journal.from_snapshot(wire(LOG[9:]), cursor=11, has_more=True)
    assert (journal.first_seq, journal.last_seq, journal.has_older) == (9, 11, True)
    assert held(journal) == LOG[9:]


def test_the_snapshot_of_an_empty_session_is_an_empty_journal_at_seq_0() -> None:
    journal = Journal.from_snapshot([], cursor=-1, has_more=False)
    assert (journal.first_seq, journal.last_seq, journal.has_older, len(journal)) == (
        0,
        -1,
        False,
        0,
    )


def test_a_snapshot_that_does_not_end_at_its_cursor_is_refused() -> None:
    with pytest.raises(HistoryProtocolError, match="ends at seq 10, not at its cursor 11"):
        Journal.from_snapshot(wire(LOG[9:11]), cursor=11, has_more=True)


def test_a_page_that_starts_after_seq_0_but_says_nothing_is_before_it_is_refused() -> None:
    with pytest.raises(
        HistoryProtocolError, match="starts at seq 9 but says there is nothing before it"
    ):
        Journal.from_page(wire(LOG[9:]), has_more=False)


def test_a_page_that_starts_at_seq_0_but_says_there_is_more_is_refused() -> None:
    with pytest.raises(
        HistoryProtocolError, match="starts at seq 0 but says there is more before it"
    ):
        Journal.from_page(wire(LOG), has_more=True)


def test_an_empty_page_with_more_before_it_is_refused() -> None:
    with pytest.raises(HistoryProtocolError, match="empty page"):
        Journal.from_page([], has_more=True)


# ---------------------------------------------------------------------------------------------
# Live events.


def test_the_next_live_event_is_appended() -> None:
    journal = journal_of(0, 9)
    assert journal.apply_live(msgspec.to_builtins(LOG[10])) is None
    assert held(journal) == LOG[:11]


def test_a_live_event_already_held_is_dropped() -> None:
    journal = journal_of(0, 9)
    assert journal.apply_live(msgspec.to_builtins(LOG[4])) is None
    assert held(journal) == LOG[:10]


def test_a_live_event_after_a_gap_is_reported_and_not_appended() -> None:
    journal = journal_of(0, 5)
    assert journal.apply_live(LOG[9]) == Gap(after_seq=5, before_seq=9)
    assert held(journal) == LOG[:6]


def test_a_gap_is_repaired_by_the_page_through_the_seq_before_the_live_event() -> None:
    journal = journal_of(0, 5)
    gap = journal.apply_live(LOG[10])
    assert gap is not None and gap.through_seq == 9
    # The page through seq 9 is message-aligned: it starts at seq 3, inside what is held.
    assert journal.fill_gap(wire(LOG[3:10])) is None
    assert journal.apply_live(LOG[10]) is None
    assert held(journal) == LOG[:11]


def test_a_live_event_that_differs_from_the_one_held_under_its_seq_is_refused() -> None:
    journal = journal_of(0, 9)
    with pytest.raises(HistoryProtocolError, match="seq 4 was sent again as a different event"):
        journal.apply_live(_chunk(4, "Hé"))


def test_a_live_event_older_than_the_journal_is_refused() -> None:
    journal = journal_of(9, 11)
    with pytest.raises(
        HistoryProtocolError, match="live event seq 4 is older than the journal's first seq 9"
    ):
        journal.apply_live(LOG[4])


def test_dropping_after_a_seq_keeps_the_events_through_it_and_the_next_one_continues() -> None:
    journal = journal_of(3, 9)
    journal.drop_after(6)
    assert (held(journal), journal.apply_live(_chunk(7, "again"))) == (LOG[3:7], None)
    assert journal.last_seq == 7 and journal.event_at(7) == _chunk(7, "again")


def test_dropping_after_the_seq_before_the_first_empties_the_journal() -> None:
    journal = journal_of(3, 9)
    journal.drop_after(2)
    assert (held(journal), journal.first_seq, journal.last_seq) == ([], 3, 2)


def test_dropping_after_a_seq_older_than_the_journal_is_refused() -> None:
    journal = journal_of(3, 9)
    with pytest.raises(
        HistoryProtocolError, match="cannot drop the events after seq 1: the journal starts at 3"
    ):
        journal.drop_after(1)
    assert held(journal) == LOG[3:10]


def test_a_malformed_live_event_is_refused() -> None:
    journal = journal_of(0, 9)
    with pytest.raises(HistoryProtocolError, match="live event"):
        journal.apply_live({"type": "turn/end", "seq": 10, "time": 0, "data": {"turn": 0}})
    assert held(journal) == LOG[:10]


# ---------------------------------------------------------------------------------------------
# Records at the tail.


def test_records_after_the_tail_are_appended() -> None:
    journal = journal_of(0, 2)
    assert journal.apply_records(wire(LOG[3:])) is None
    assert held(journal) == LOG


def test_records_wholly_covered_are_dropped() -> None:
    journal = journal_of(0, 9)
    assert journal.apply_records(wire(LOG[3:9])) is None  # one row, inside
    assert held(journal) == LOG[:10]


def test_a_row_overlapping_the_tail_in_part_is_a_protocol_error() -> None:
    journal = journal_of(0, 5)  # holds chunks 3..5 of the row 3..8
    with pytest.raises(
        HistoryProtocolError,
        match=r"records\[0\] \(seqs 3..8\) overlaps the journal \(0..5\) in part",
    ):
        journal.apply_records(wire(LOG[3:]))
    assert held(journal) == LOG[:6]


def test_records_starting_after_a_gap_report_it_and_change_nothing() -> None:
    journal = journal_of(0, 2)
    assert journal.apply_records(wire(LOG[9:])) == Gap(after_seq=2, before_seq=9)
    assert held(journal) == LOG[:3]


def test_records_older_than_the_journal_are_refused() -> None:
    journal = journal_of(9, 11)
    with pytest.raises(HistoryProtocolError, match="older than the journal's first seq 9"):
        journal.apply_records(wire(LOG[:2]))


def test_records_that_are_not_contiguous_are_refused() -> None:
    journal = journal_of(0, 2)
    with pytest.raises(HistoryProtocolError, match="seq 10 follows seq 8"):
        journal.apply_records(wire(LOG[3:9]) + wire(LOG[10:]))
    assert held(journal) == LOG[:3]


# ---------------------------------------------------------------------------------------------
# Repairing gaps.


def test_fill_gap_takes_a_page_event_by_event_where_records_would_overlap_in_part() -> None:
    journal = journal_of(0, 5)
    assert journal.fill_gap(wire(LOG[3:])) is None
    assert held(journal) == LOG


def test_fill_gap_with_a_page_that_does_not_reach_the_tail_reports_the_gap() -> None:
    journal = journal_of(0, 2)
    assert journal.fill_gap(wire(LOG[9:])) == Gap(after_seq=2, before_seq=9)
    assert held(journal) == LOG[:3]


def test_fill_gap_with_older_pages_first_reaches_the_tail() -> None:
    journal = journal_of(0, 1)
    assert journal.fill_gap(wire(LOG[2:9]) + wire(LOG[9:])) is None
    assert held(journal) == LOG


def test_fill_gap_refuses_a_page_that_differs_from_what_is_held() -> None:
    journal = journal_of(0, 5)
    changed = [*LOG[3:5], _chunk(5, "X"), *LOG[6:]]
    with pytest.raises(HistoryProtocolError, match="seq 5 was sent again as a different event"):
        journal.fill_gap(wire(changed))
    assert held(journal) == LOG[:6]


# ---------------------------------------------------------------------------------------------
# Older pages at the head.


def test_an_older_page_that_joins_the_head_is_prepended() -> None:
    journal = journal_of(9, 11)
    journal.prepend(wire(LOG[3:9]), has_more=True)
    assert (journal.first_seq, journal.has_older) == (3, True)
    journal.prepend(wire(LOG[:3]), has_more=False)
    assert held(journal) == LOG
    assert journal.has_older is False


def test_an_older_page_overlapping_the_head_is_refused() -> None:
    journal = journal_of(9, 11)
    with pytest.raises(
        HistoryProtocolError, match="ends at seq 9: it overlaps the journal's first seq 9"
    ):
        journal.prepend(wire(LOG[3:10]), has_more=True)
    assert held(journal) == LOG[9:]


def test_an_older_page_leaving_a_gap_before_the_head_is_refused() -> None:
    journal = journal_of(9, 11)
    with pytest.raises(
        HistoryProtocolError,
        match="ends at seq 7: it leaves a gap before the journal's first seq 9",
    ):
        journal.prepend(wire(LOG[3:8]), has_more=True)
    assert held(journal) == LOG[9:]


def test_a_last_older_page_that_does_not_start_at_seq_0_is_refused() -> None:
    journal = journal_of(9, 11)
    with pytest.raises(
        HistoryProtocolError, match="starts at seq 3 but says there is nothing before it"
    ):
        journal.prepend(wire(LOG[3:9]), has_more=False)
    assert held(journal) == LOG[9:]


def test_an_older_page_when_nothing_is_older_is_refused() -> None:
    journal = journal_of(0, 11)
    with pytest.raises(HistoryProtocolError, match="nothing is older than seq 0"):
        journal.prepend(wire(LOG[:1]), has_more=False)


def test_an_empty_older_page_is_refused() -> None:
    journal = journal_of(9, 11)
    with pytest.raises(HistoryProtocolError, match="empty older page"):
        journal.prepend([], has_more=False)


# ---------------------------------------------------------------------------------------------
# Malformed records.


def _row(**changes: Any) -> dict[str, Any]:
    """LOG[3:9] as its one wire row, with `changes` applied to the row."""
    [record] = wire(LOG[3:9])
    record["chunks"].update(changes)
    return record


MALFORMED = {
    "neither event nor chunks": {"rows": [1]},
    "both event and chunks": {**wire(LOG[3:4])[0], **wire(LOG[3:9])[0]},
    "not an object": ["event"],
    "row with too few dt": _row(data={**_row()["chunks"]["data"], "dt": [1]}),
    "row with a negative seq0": _row(seq0=-1),
    "row with an extra key": _row(extra=1),
    "row with empty texts": _row(data={**_row()["chunks"]["data"], "texts": [], "dt": []}),
    "row with an unknown tag": _row(type="text/chunks"),
    "event without a seq": {"event": {"type": "turn/start", "time": 0, "data": {"turn": 0}}},
    "unknown event not ignorable": {"event": {"type": "future/x", "seq": 3, "time": 0, "data": {}}},
}


@pytest.mark.parametrize("record", MALFORMED.values(), ids=MALFORMED.keys())
@pytest.mark.parametrize("method", ["apply_records", "fill_gap", "from_page", "prepend"])
def test_a_malformed_record_is_a_protocol_error_and_changes_nothing(
    method: str, record: Any
) -> None:
    journal = journal_of(9, 11) if method == "prepend" else journal_of(0, 2)
    before = held(journal)
    with pytest.raises(HistoryProtocolError, match=r"records\[1\]"):
        if method == "from_page":
            Journal.from_page([*wire(LOG[2:3]), record], has_more=True)
        elif method == "prepend":
            journal.prepend([*wire(LOG[2:3]), record], has_more=True)
        else:
            getattr(journal, method)([*wire(LOG[2:3]), record])
    assert held(journal) == before
