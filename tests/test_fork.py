"""Forking a session (SPEC 4.7), the pure half: where a fork is cut, and what its log holds.

The parent's records through the fork point are copied as stored (a row the cut falls inside
clipped to what it keeps, expanded when fewer than a row's minimum remain), then come
`session/forked` and what recovery writes to close a turn the cut leaves open.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import batch_cuts, loop_logs, split, streamed_turn

from acp_server.core.chunk_rows import (
    MIN_RUN,
    ROW_CLASSES,
    StorageRecord,
    TextChunks,
    TextChunksData,
    decode_storage_record,
    pack_chunk_runs,
)
from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    CommandResult,
    CommandResultData,
    SessionEvent,
    SessionForked,
    SessionForkedData,
    SessionMode,
    SessionModeData,
    StepData,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnEndReasonInterrupted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.fork import (
    ForkPointError,
    default_point,
    fork_prefix,
    fork_records,
    fork_tail,
    message_point,
    seq_point,
)
from acp_server.core.paging import record_count, record_start
from acp_server.core.recovery import interrupted_turn_closers
from acp_server.core.stream import TextDelta


def decoded(records: list[StorageRecord]) -> list[SessionEvent]:
    return [event for record in records for event in decode_storage_record(record)]


def two_turns() -> list[SessionEvent]:
    """Turn 0 streams 6 deltas (seqs 4..9), turn 1 is a command; 19 events."""
    events = streamed_turn(0, 0, 6)  # seqs 0..13
    events += [
        TurnStart(14, 0, TurnStartData(1)),
        UserMessageEvent(14 + 1, 0, UserMessageData(1, UserMessage("u1", []))),
        CommandResult(16, 0, CommandResultData(1, "title", [TextContent("Title set")])),
        TurnEnd(17, 0, TurnEndData(1, TurnEndReasonCompleted())),
        SessionMode(18, 0, SessionModeData("plan")),
    ]
    return events


def running() -> list[SessionEvent]:
    """`two_turns`, then turn 2 running: its prompt, a step, two chunks (seqs 19..24)."""
    return [
        *two_turns(),
        TurnStart(19, 0, TurnStartData(2)),
        UserMessageEvent(20, 0, UserMessageData(2, UserMessage("u2", []))),
        StepStart(21, 0, StepData(2, 0)),
        AssistantChunk(22, 0, AssistantChunkData(2, 0, TextDelta(0, "a"))),
        AssistantChunk(23, 0, AssistantChunkData(2, 0, TextDelta(0, "b"))),
    ]


# -- where a fork is cut -----------------------------------------------------------------------


def test_by_default_a_fork_of_an_idle_session_holds_every_event() -> None:
    assert default_point(pack_chunk_runs(two_turns())) == 18


def test_by_default_a_fork_stops_before_the_turn_that_has_no_end() -> None:
    assert default_point(pack_chunk_runs(running())) == 18


def test_by_default_a_fork_of_a_session_without_events_holds_none() -> None:
    assert default_point([]) == -1


def test_a_fork_at_a_seq_goes_through_that_event() -> None:
    assert seq_point(pack_chunk_runs(two_turns()), 7) == 7


def test_a_fork_at_a_seq_past_the_stored_events_is_refused_naming_the_last() -> None:
    with pytest.raises(
        ForkPointError, match=r"^19 is past the session's last stored event \(seq 18\)$"
    ) as caught:
        seq_point(pack_chunk_runs(two_turns()), 19)
    assert caught.value.field == "seq"


@pytest.mark.parametrize(
    ("message_id", "seq"), [("u0", 1), ("a0", 11), ("u1", 15), ("command-1", 16)]
)
def test_a_fork_at_a_message_goes_through_the_event_that_holds_it(
    message_id: str, seq: int
) -> None:
    assert message_point(pack_chunk_runs(two_turns()), message_id) == seq


def test_a_fork_at_an_unknown_message_is_refused_naming_it() -> None:
    with pytest.raises(ForkPointError, match=r"^the session has no message 'a9'$") as caught:
        message_point(pack_chunk_runs(two_turns()), "a9")
    assert caught.value.field == "messageId"


# -- the copied prefix -------------------------------------------------------------------------


def test_a_row_the_cut_falls_inside_is_clipped_to_the_members_it_keeps() -> None:
    records = pack_chunk_runs(two_turns())
    assert [type(r).__name__ for r in records[:5]] == [
        "TurnStart",
        "UserMessageEvent",
        "StepStart",
        "AssistantChunk",
        "TextChunks",
    ]
    prefix = fork_prefix(records, 7)  # deltas 4..7 of the row 4..9
    assert prefix[:4] == records[:4]
    assert prefix[4:] == [
        TextChunks(4, 0, TextChunksData(0, 0, 0, [1, 1, 1], ["0 ", "1 ", "2 ", "3 "]))
    ]


def test_a_row_cut_to_fewer_members_than_a_row_holds_becomes_plain_events() -> None:
    records = pack_chunk_runs(two_turns())
    prefix = fork_prefix(records, 5)  # deltas 4 and 5 only
    assert prefix[4:] == two_turns()[4:6]
    assert all(type(r) is AssistantChunk for r in prefix[4:])


def test_a_cut_at_a_row_s_end_keeps_the_row_itself() -> None:
    records = pack_chunk_runs(two_turns())
    assert fork_prefix(records, 9)[4] is records[4]


@st.composite
def stored_logs(draw: st.DrawFn) -> tuple[list[SessionEvent], list[StorageRecord]]:
    """A loop-shaped log ending in a streamed turn, stored in append batches as a writer
    packs them (each batch on its own, so flushes split rows)."""
    events = draw(loop_logs(max_turns=4))
    turns = sum(type(e) is TurnStart for e in events)
    events += streamed_turn(turns, len(events), draw(st.integers(0, 9)))
    records = [
        record
        for batch in split(events, draw(batch_cuts(len(events))))
        for record in pack_chunk_runs(batch)
    ]
    return events, records


@given(stored_logs(), st.data())
def test_a_prefix_holds_exactly_the_events_through_the_cut_as_stored(
    log: tuple[list[SessionEvent], list[StorageRecord]], data: st.DataObject
) -> None:
    events, records = log
    through = data.draw(st.integers(-1, len(events) - 1))
    prefix = fork_prefix(records, through)
    assert decoded(prefix) == events[: through + 1]
    # The records wholly before the cut are the parent's own; the one it falls inside is cut.
    whole = sum(record_start(r) + record_count(r) - 1 <= through for r in records)
    assert all(a is b for a, b in zip(prefix[:whole], records[:whole], strict=True))
    assert all(record_count(r) >= MIN_RUN for r in prefix if type(r) in ROW_CLASSES)


@given(stored_logs(), st.data())
def test_a_fork_s_log_is_the_prefix_then_session_forked_and_no_open_turn(
    log: tuple[list[SessionEvent], list[StorageRecord]], data: st.DataObject
) -> None:
    events, records = log
    through = data.draw(st.integers(-1, len(events) - 1))
    forked = decoded(fork_records(records, "parent", through, 77))
    assert forked[: through + 1] == events[: through + 1]
    assert forked[through + 1] == SessionForked(
        through + 1, 77, SessionForkedData("parent", through)
    )
    assert [e.seq for e in forked] == list(range(len(forked)))
    assert interrupted_turn_closers(forked, len(forked), 0) == []


# -- what follows the prefix -------------------------------------------------------------------


def test_a_cut_between_turns_is_followed_by_session_forked_alone() -> None:
    prefix = fork_prefix(pack_chunk_runs(two_turns()), 13)
    assert fork_tail(prefix, "p1", 13, 500) == [SessionForked(14, 500, SessionForkedData("p1", 13))]


def test_a_step_cut_mid_stream_is_closed_as_recovery_closes_a_torn_step() -> None:
    prefix = fork_prefix(pack_chunk_runs(two_turns()), 7)
    assert fork_tail(prefix, "p1", 7, 500) == [
        SessionForked(8, 500, SessionForkedData("p1", 7)),
        StepEnd(9, 500, StepData(0, 0)),
        TurnEnd(10, 500, TurnEndData(0, TurnEndReasonInterrupted())),
    ]


def test_a_call_the_cut_leaves_without_result_is_answered_interrupted() -> None:
    events: list[Any] = [
        TurnStart(0, 0, TurnStartData(0)),
        StepStart(1, 0, StepData(0, 0)),
        ToolCall(2, 0, ToolCallData(0, 0, "c1", "read_file", "{}")),
        ToolResult(3, 0, ToolResultData(0, 0, "c1", [TextContent("ok")]), source_range=(2, 2)),
    ]
    assert fork_tail(events[:3], "p1", 2, 9) == [
        SessionForked(3, 9, SessionForkedData("p1", 2)),
        ToolResult(
            4,
            9,
            ToolResultData(0, 0, "c1", [TextContent("interrupted")], True),
            source_range=(2, 2),
        ),
        StepEnd(5, 9, StepData(0, 0)),
        TurnEnd(6, 9, TurnEndData(0, TurnEndReasonInterrupted())),
    ]


def test_a_fork_record_round_trips_as_json() -> None:
    event = SessionForked(3, 9, SessionForkedData("p1", -1))
    assert msgspec.json.encode(event) == (
        b'{"type":"session/forked","seq":3,"time":9,"data":{"fromSessionId":"p1","throughSeq":-1}}'
    )
