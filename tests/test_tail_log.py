"""A session held from a base (a tail open, SPEC 4.2): how far back it must be read, and that
what it holds continues it exactly as the whole log would."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import loop_logs

from acp_server.core.chunk_rows import decode_storage_record, pack_chunk_runs
from acp_server.core.content import TextContent
from acp_server.core.event_log import EventLog
from acp_server.core.events import (
    AssistantChunk,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    ContextCompaction,
    ContextCompactionData,
    SessionConfig,
    SessionConfigData,
    SessionEvent,
    SessionMode,
    SessionModeData,
    SessionRewind,
    SessionRewindData,
    SessionTitle,
    SessionTitleData,
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
from acp_server.core.messages import derive_messages
from acp_server.core.modes import Choices, default_settings, fold_settings
from acp_server.core.projection import tail_start
from acp_server.core.recovery import interrupted_turn_closers
from acp_server.core.stream import AssistantText
from acp_server.core.tail import (
    TailPrefix,
    TailRead,
    fold_prefix,
    prefix_before,
    tail_base,
)


def plain(events: list[SessionEvent]) -> list[SessionEvent]:
    return [e for e in events if type(e) is not AssistantChunk]


def read_back(events: list[SessionEvent], max_messages: int, lo: int) -> int:
    """What a store does: read back from `lo`, further each time, until the base is found."""
    read = TailRead(len(events), max_messages)
    read.took(pack_chunk_runs(events[lo:]), lo)
    while (wanted := read.wanted()) is not None:
        read.took(pack_chunk_runs(events[wanted[0] : wanted[1]]), wanted[0])
    assert read.base is not None
    assert (
        read.held() == pack_chunk_runs(events[read.base :])
        or [e for r in read.held() for e in decode_storage_record(r)] == events[read.base :]
    )
    return read.base


def held(events: list[SessionEvent], base: int) -> EventLog:
    prefix = fold_prefix(TailPrefix(), events[:base])
    return EventLog(pack_chunk_runs(events[base:]), base=base, prefix=prefix)


@given(loop_logs(max_turns=14), st.integers(1, 6), st.data())
def test_a_tail_base_holds_the_replay_and_the_whole_provider_history(
    events: list[SessionEvent], max_messages: int, data: st.DataObject
) -> None:
    lo = data.draw(st.integers(0, len(events)))
    base = read_back(events, max_messages, lo)
    whole = EventLog(pack_chunk_runs(events))
    assert base <= tail_start(whole, max_messages).start
    assert base == 0 or type(events[base]) is TurnStart
    assert derive_messages(plain(events[base:])) == derive_messages(plain(events))


@given(loop_logs(max_turns=14), st.integers(1, 6))
def test_a_log_held_from_its_base_continues_as_the_whole_log(
    events: list[SessionEvent], max_messages: int
) -> None:
    base = read_back(events, max_messages, len(events))
    tail, whole = held(events, base), EventLog(pack_chunk_runs(events))
    assert (tail.base, len(tail), tail.turns, tail.step_starts) == (
        base,
        len(whole),
        whole.turns,
        whole.step_starts,
    )
    assert tail_start(tail, max_messages) == tail_start(whole, max_messages)
    assert derive_messages(tail.plain_events()) == derive_messages(whole.plain_events())
    assert interrupted_turn_closers(list(tail.plain_events()), len(tail), 7) == (
        interrupted_turn_closers(list(whole.plain_events()), len(whole), 7)
    )
    assert tail.records_from(tail_start(tail, max_messages).start) == whole.records_from(
        tail_start(whole, max_messages).start
    )


@given(loop_logs(max_turns=10), st.integers(1, 4))
def test_a_hydrated_log_is_the_whole_log(events: list[SessionEvent], max_messages: int) -> None:
    base = read_back(events, max_messages, len(events))
    tail = held(events, base)
    tail.hydrate(pack_chunk_runs(events[:base]))
    whole = EventLog(pack_chunk_runs(events))
    assert (tail.base, tail.events(), tail.message_seqs, tail.turns) == (
        0,
        whole.events(),
        whole.message_seqs,
        whole.turns,
    )
    assert list(tail.plain_events()) == list(whole.plain_events())


def settings_session() -> list[SessionEvent]:
    return [
        SessionMode(0, 1, SessionModeData("plan")),
        SessionConfig(1, 1, SessionConfigData("model", "a")),
        SessionTitle(2, 1, SessionTitleData("first")),
        StepStart(3, 1, StepData(0, 0)),
        SessionConfig(4, 1, SessionConfigData("reasoning", "high")),
        SessionConfig(5, 1, SessionConfigData("model", "b")),
        SessionTitle(6, 1, SessionTitleData("second")),
        StepStart(7, 1, StepData(0, 1)),
    ]


def test_a_prefix_keeps_the_latest_of_each_setting_and_counts_the_model_calls() -> None:
    events = settings_session()
    prefix = fold_prefix(TailPrefix(), events)
    assert prefix == TailPrefix([events[0], events[4], events[5], events[6]], 2)


def test_a_prefix_folds_the_same_settings_as_the_whole_log() -> None:
    choices = Choices(models=("a", "b"), reasoning=("low", "high"))
    defaults = default_settings("default", choices)
    events = settings_session()
    prefix = fold_prefix(TailPrefix(), events)
    assert fold_settings(prefix.events, defaults, choices) == fold_settings(
        events, defaults, choices
    )


def test_a_prefix_known_to_an_earlier_seq_is_carried_to_the_base() -> None:
    events = settings_session()
    known = fold_prefix(TailPrefix(), events[:3])
    assert prefix_before(known, 3, 8, events[3:8]) == fold_prefix(TailPrefix(), events)


def test_a_prefix_known_past_the_base_keeps_what_came_before_it() -> None:
    events = settings_session()
    known = fold_prefix(TailPrefix(), events)
    # The older model and title are gone, but the held events from the base carry newer ones.
    assert prefix_before(known, 8, 4, events[4:8]) == TailPrefix([events[0]], 1)


def test_a_session_shorter_than_the_tail_is_read_whole() -> None:
    assert tail_base([], 0, 50) == 0


def turn(number: int, first_seq: int) -> list[SessionEvent]:
    """A completed one-step turn from `first_seq`."""
    events: list[SessionEvent] = [
        TurnStart(0, 0, TurnStartData(number)),
        UserMessageEvent(
            0, 0, UserMessageData(number, UserMessage(f"u{number}", [TextContent("q")]))
        ),
        StepStart(0, 0, StepData(number, 0)),
        AssistantMessageEvent(
            0,
            0,
            AssistantMessageData(number, 0, AssistantMessage(f"m{number}", [AssistantText("a")])),
        ),
        StepEnd(0, 0, StepData(number, 0)),
        TurnEnd(0, 0, TurnEndData(number, TurnEndReasonCompleted())),
    ]
    return [msgspec.structs.replace(e, seq=first_seq + k) for k, e in enumerate(events)]


def test_a_session_without_a_compaction_is_read_to_its_start() -> None:
    events = [e for n in range(5) for e in turn(n, 6 * n)]
    assert tail_base(events[18:], 18, 2) is None
    assert read_back(events, 2, 30) == 0


def test_a_compaction_lets_the_base_be_the_replays_first_turn() -> None:
    events = [e for n in range(5) for e in turn(n, 6 * n)]
    compacted = ContextCompaction(30, 0, ContextCompactionData(4, 0, 23))
    events = [*events, compacted, *turn(5, 31)]
    assert tail_base(events[12:], 12, 2) == 24
    assert read_back(events, 2, 37) == 24


def test_the_base_reaches_back_to_the_first_turn_after_a_compaction() -> None:
    events = [e for n in range(5) for e in turn(n, 6 * n)]
    compacted = ContextCompaction(30, 0, ContextCompactionData(4, 0, 11))
    events = [*events, compacted, *turn(5, 31)]
    assert read_back(events, 1, 37) == 12


def test_a_rewind_after_the_latest_compaction_reads_to_the_start() -> None:
    events = [e for n in range(5) for e in turn(n, 6 * n)]
    compacted = ContextCompaction(30, 0, ContextCompactionData(4, 0, 5))
    rewind = SessionRewind(31, 0, SessionRewindData("u3", [], []))
    events = [*events, compacted, rewind, *turn(5, 32)]
    assert tail_base(events[6:], 6, 1) is None
    assert read_back(events, 1, 38) == 0


def test_a_base_that_is_not_where_the_records_start_is_refused() -> None:
    with pytest.raises(ValueError, match="not at the base 3"):
        EventLog([StepStart(2, 0, StepData(0, 0))], base=3)
