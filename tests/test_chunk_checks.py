"""Chunk checks: a run of chunk lines whose check matches is kept packed, and reads as exactly
the records its lines hold; a run whose bytes changed is decoded (and refused if malformed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET
from strategies import batch_cuts, loop_logs, split, streamed_turn

from acp_server.core.chunk_checks import (
    MIN_CHECKED_EVENTS,
    ChunkCheck,
    ChunkRuns,
    KeptRecord,
    PackedChunks,
    decode_checks,
    encode_checks,
    packed_chunks,
)
from acp_server.core.chunk_rows import StorageRecord, pack_chunk_runs
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
from acp_server.core.projection import project_load
from acp_server.core.stream import AssistantText, ReasoningDelta, TextDelta, ToolCallDelta
from acp_server.storage.checked import CheckedRecords
from acp_server.storage.errors import CorruptLog

encode = msgspec.json.encode


@st.composite
def streamed_logs(draw: st.DrawFn) -> list[SessionEvent]:
    """Valid logs from seq 0: turns of steps streaming text, reasoning and tool-call deltas,
    each step ending with or without its message (a failed stream)."""
    events: list[Any] = []

    def add(cls: type, data: Any) -> None:
        events.append(cls(len(events), draw(st.integers(0, 50)) + 10 * len(events), data))

    for turn in range(draw(st.integers(0, 3))):
        add(TurnStart, TurnStartData(turn))
        add(UserMessageEvent, UserMessageData(turn, UserMessage(f"u{turn}", [TextContent("q")])))
        for step in range(draw(st.integers(0, 2))):
            add(StepStart, StepData(turn, step))
            for index in range(draw(st.integers(0, 3))):
                kind = draw(st.sampled_from(["text", "reasoning", "tool"]))
                for k in range(draw(st.integers(0, 90))):
                    chunk: Any = (
                        TextDelta(index, f"t{k}")
                        if kind == "text"
                        else ReasoningDelta(index, f"r{k}")
                        if kind == "reasoning"
                        else ToolCallDelta(index, f"c{index}", f"{k},", "edit" if k else UNSET)
                    )
                    add(AssistantChunk, AssistantChunkData(turn, step, chunk))
            if draw(st.booleans()):
                message = AssistantMessage(f"a{turn}-{step}", [AssistantText("done")])
                add(AssistantMessageEvent, AssistantMessageData(turn, step, message))
            add(StepEnd, StepData(turn, step))
        add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
    return events


def written(events: list[SessionEvent], cuts: list[int] = []) -> list[StorageRecord]:  # noqa: B006
    """The records a writer flushing at `cuts` writes: each batch packed on its own."""
    return [r for batch in split(events, cuts) for r in pack_chunk_runs(batch)]


def checks_of(records: list[StorageRecord], min_events: int = 1) -> dict[int, ChunkCheck]:
    """The checks a writer keeps for `records` written from line 2 on."""
    lines = [encode(r) for r in records]
    return {c.line: c for c in ChunkRuns(min_events).feed_all(2, lines, records)}


def kept_read(
    lines: list[bytes], checks: dict[int, ChunkCheck]
) -> tuple[list[KeptRecord], CheckedRecords]:
    reader = CheckedRecords("log", lines)
    return list(reader.kept(checks)), reader


def packed(records: list[StorageRecord], checks: dict[int, ChunkCheck]) -> list[KeptRecord]:
    """`records` (written from line 2 on) with each checked run as its `PackedChunks`, as a
    kept read gives them, without the read's checks of each line."""
    lines = [encode(r) for r in records]
    out: list[KeptRecord] = []
    index = 0
    while index < len(records):
        check = checks.get(index + 2)
        if check is None:
            out.append(records[index])
            index += 1
            continue
        run = packed_chunks(check, lines[index : index + check.lines])
        assert run is not None
        out.append(run)
        index += check.lines
    return out


def unpacked(records: list[KeptRecord]) -> list[StorageRecord]:
    out: list[StorageRecord] = []
    for record in records:
        out.extend(record.decode() if isinstance(record, PackedChunks) else [record])
    return out


def test_the_check_of_a_run_names_its_first_line_its_lines_and_its_figures() -> None:
    records = written(streamed_turn(0, 0, MIN_CHECKED_EVENTS))
    lines = [encode(r) for r in records]

    [check] = ChunkRuns().feed_all(2, lines, records)

    # Line 1 is the header; the run is block-start, the row, block-end (lines 5 to 7).
    assert (check.line, check.lines, check.seq0, check.count, check.turn, check.step) == (
        5,
        3,
        3,
        MIN_CHECKED_EVENTS + 2,
        0,
        0,
    )
    assert check.size == sum(len(line) + 1 for line in lines[3:6])


def test_a_run_shorter_than_the_minimum_gets_no_check() -> None:
    records = written(streamed_turn(0, 0, MIN_CHECKED_EVENTS - 3))
    lines = [encode(r) for r in records]

    assert ChunkRuns().feed_all(2, lines, records) == []


def test_a_run_still_open_at_the_end_gets_no_check() -> None:
    events = streamed_turn(0, 0, 200)[
        :-4
    ]  # the stream was cut: no block end, message, step or turn end
    records = written(events)

    assert checks_of(records) == {}


@given(st.data())
def test_a_kept_read_gives_back_exactly_the_records_of_a_full_read(data: st.DataObject) -> None:
    events = data.draw(streamed_logs())
    records = written(events, data.draw(batch_cuts(len(events))))
    lines = [encode(r) for r in records]
    checks = checks_of(records)

    kept, reader = kept_read(lines, checks)

    assert unpacked(kept) == list(CheckedRecords("log", lines))
    assert sum(type(r) is PackedChunks for r in kept) == len(checks)
    assert reader.used_checks == list(checks.values())
    assert reader.new_checks == []


@given(st.data())
def test_a_read_without_checks_makes_the_checks_a_writer_keeps(data: st.DataObject) -> None:
    events = data.draw(streamed_logs())
    records = written(events, data.draw(batch_cuts(len(events))))
    lines = [encode(r) for r in records]
    reader = CheckedRecords("log", lines)

    list(reader.kept({}))

    assert reader.new_checks == list(checks_of(records, MIN_CHECKED_EVENTS).values())


@given(st.data())
def test_a_read_without_checks_keeps_each_run_it_checked_packed(
    data: st.DataObject,
) -> None:
    events = data.draw(streamed_logs())
    records = written(events, data.draw(batch_cuts(len(events))))
    lines = [encode(r) for r in records]
    reader = CheckedRecords("log", lines)

    kept = list(reader.kept({}))

    assert [(r.seq0, r.count, r.number) for r in kept if type(r) is PackedChunks] == [
        (c.seq0, c.count, c.line) for c in reader.new_checks
    ]
    assert unpacked(kept) == list(CheckedRecords("log", lines))


@given(st.data())
def test_any_changed_byte_in_a_checked_run_makes_it_decoded(data: st.DataObject) -> None:
    records = written(streamed_turn(0, 0, 100))
    lines = [encode(r) for r in records]
    [check] = checks_of(records).values()
    run = lines[check.line - 2 : check.line - 2 + check.lines]
    which = data.draw(st.integers(0, len(run) - 1))
    at = data.draw(st.integers(0, len(run[which]) - 1))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != run[which][at]))
    changed = [*run]
    changed[which] = run[which][:at] + bytes([byte]) + run[which][at + 1 :]

    assert packed_chunks(check, changed) is None
    assert isinstance(packed_chunks(check, run), PackedChunks)


@pytest.mark.parametrize("figure", ["seq0", "count", "turn", "step", "lines", "size"])
def test_a_check_whose_figures_are_not_the_runs_does_not_match(figure: str) -> None:
    records = written(streamed_turn(0, 0, 100))
    lines = [encode(r) for r in records]
    [check] = checks_of(records).values()
    run = lines[check.line - 2 : check.line - 2 + check.lines]
    changed = msgspec.structs.replace(check, **{figure: getattr(check, figure) + 1})

    assert packed_chunks(changed, run) is None


def test_a_malformed_row_in_a_run_whose_check_no_longer_matches_is_refused_naming_its_line() -> (
    None
):
    records = written(streamed_turn(0, 0, 100))
    lines = [encode(r) for r in records]
    checks = checks_of(records)
    lines[4] = lines[4].replace(b'"dt":[', b'"dt":[0,', 1)  # line 6, the row: a gap too many

    with pytest.raises(CorruptLog) as caught:
        kept_read(lines, checks)

    assert caught.value.line == 6
    assert "dt has 100 entries, expected 99" in caught.value.reason


def test_a_check_file_keeps_the_last_check_of_each_line_and_skips_what_is_not_a_check() -> None:
    first = ChunkCheck(5, 3, 900, 1, 3, 102, 0, 0)
    second = ChunkCheck(5, 3, 900, 2, 3, 102, 0, 0)
    other = ChunkCheck(9, 1, 400, 3, 200, 64, 1, 0)
    data = encode_checks([first, other]) + b"[5,3,torn\n" + b"{}\n" + encode_checks([second])

    assert decode_checks(data + b"[9,1") == {5: second, 9: other}


@given(loop_logs())
def test_an_event_log_holding_packed_chunks_reads_as_the_decoded_one(
    events: list[SessionEvent],
) -> None:
    records = written(events)
    kept = packed(records, checks_of(records))
    held, decoded = EventLog(kept), EventLog(records)

    assert list(held.plain_events()) == list(decoded.plain_events())
    assert held.message_seqs == decoded.message_seqs
    assert len(held) == len(decoded)
    assert list(held.records_from(0)) == kept
    assert held.page(len(held), 3) == decoded.page(len(decoded), 3)
    assert held.events() == decoded.events()
    assert held.records == decoded.records


@given(loop_logs())
def test_the_load_projection_of_packed_chunks_is_that_of_their_records(
    events: list[SessionEvent],
) -> None:
    records = written(events)
    kept = packed(records, checks_of(records))

    assert any(type(r) is PackedChunks for r in kept) or not checks_of(records)
    assert project_load(kept) == project_load(records)


def test_a_step_without_its_message_shows_the_text_of_its_packed_chunks() -> None:
    events = streamed_turn(0, 0, 100)
    cut = [e for e in events if type(e) is not AssistantMessageEvent]  # a failed stream
    records = written([msgspec.structs.replace(e, seq=k) for k, e in enumerate(cut)])
    lines = [encode(r) for r in records]
    kept, _ = kept_read(lines, checks_of(records))

    assert any(type(r) is PackedChunks for r in kept)
    assert project_load(kept) == project_load(records)
    assert project_load(kept)[-1].content.text == "".join(f"{k} " for k in range(100))


def test_a_run_decoded_just_before_a_packed_one_gets_its_check() -> None:
    events = streamed_turn(0, 0, 3 * MIN_CHECKED_EVENTS)
    records = written(events, [4 + 2 * MIN_CHECKED_EVENTS])  # two rows: the flush cut the run
    lines = [encode(r) for r in records]
    assert [type(r).__name__ for r in records[3:6]] == [
        "AssistantChunk",
        "TextChunks",
        "TextChunks",
    ]
    # A check for the second row alone (line 7 on), as a stale check file might hold.
    second = ChunkRuns().feed_all(7, lines[5:], records[5:])

    kept, reader = kept_read(lines, {check.line: check for check in second})

    assert [type(r) for r in kept].count(PackedChunks) == 2  # the decoded run is kept packed too
    assert [(c.line, c.lines, c.seq0, c.count) for c in reader.new_checks] == [
        (5, 2, 3, 1 + 2 * MIN_CHECKED_EVENTS)
    ]
