"""EventLog: a session's events held as records, and SPEC 3.1 paging over them."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st
from strategies import batch_cuts, session_events, split

from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.event_log import EventLog
from acp_server.core.events import AssistantMessageEvent, SessionEvent, UserMessageEvent

encode = msgspec.json.encode


def reference_page(
    events: list[SessionEvent], through: int, before: int | None, max_messages: int
) -> tuple[list[SessionEvent], bool]:
    """SPEC 3.1 to the letter, on expanded events: walk back counting messages, cut lowest."""
    end = through + 1 if before is None else min(through + 1, before)
    cut = 0
    counted = 0
    lowest = end
    for event in reversed(events[:end]):
        if type(event) in (UserMessageEvent, AssistantMessageEvent):
            counted += 1
            source = event.source_range
            lowest = min(lowest, event.seq, source[0] if isinstance(source, tuple) else event.seq)
            if counted == max_messages:
                cut = lowest
                break
    page = events[cut:end]
    return page, cut > 0


def stored(events: list[SessionEvent], cuts: list[int]) -> list:
    return [record for batch in split(events, cuts) for record in pack_chunk_runs(batch)]


@given(session_events(), st.data())
def test_events_of_a_log_held_as_records_are_the_events_written(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    events = [msgspec.structs.replace(e, seq=i) for i, e in enumerate(events)]
    log = EventLog(stored(events, data.draw(batch_cuts(len(events)))))
    assert log.events() == events
    assert len(log) == len(events)


@given(session_events(), st.data())
def test_every_page_is_the_canonical_packing_of_the_reference_page(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    events = [msgspec.structs.replace(e, seq=i) for i, e in enumerate(events)]
    log = EventLog(stored(events, data.draw(batch_cuts(len(events)))))
    max_messages = data.draw(st.integers(1, 6))
    through = len(events) - 1
    before: int | None = None
    walked: list[SessionEvent] = []
    while True:
        expected, expected_more = reference_page(events, through, before, max_messages)
        end = through + 1 if before is None else min(through + 1, before)
        cut, records = log.page(end, max_messages)
        assert encode(records) == encode(pack_chunk_runs(expected))
        assert cut.has_more == expected_more
        walked[:0] = expected
        if not cut.has_more:
            break
        before = cut.start
    assert walked == events


def test_seal_packs_the_chunks_appended_since_the_last_seal() -> None:
    from acp_server.core.events import AssistantChunk, AssistantChunkData, TurnStart, TurnStartData
    from acp_server.core.stream import TextDelta

    log = EventLog()
    log.append(TurnStart(0, 0, TurnStartData(0)))
    for i in range(1, 5):
        log.append(AssistantChunk(i, 0, AssistantChunkData(0, 0, TextDelta(0, str(i)))))
    log.seal()
    assert [type(r).__name__ for r in log.records] == ["TurnStart", "TextChunks"]
    assert log.starts == [0, 1]
    assert [e.seq for e in log.events()] == [0, 1, 2, 3, 4]
