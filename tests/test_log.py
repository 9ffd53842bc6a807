"""The session log contract (SPEC 2.2 to 2.5), one suite run over every on-disk layout.

The `layout` fixture, in the spirit of msgspec's `proto` and anyio's `anyio_backend` fixtures,
runs each contract test over five layouts of the same logical events: packed and unpacked plain
JSONL, a mixed file (batches alternately packed and not), and packed and unpacked Zstandard
logs. Whatever the layout, a log gives back exactly the events written to it, a torn tail is
ignored by readers and cut away by the next writer, any other damage is a `CorruptLog` naming
its line, and a turn left open by a dead process is closed exactly once.

Store rules that do not depend on a layout (ids, `create`, `delete`, `session_ids`, how one
flush batch is packed) follow the layout suite.
"""

from __future__ import annotations

import io
import random
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zstandard
from spec_reader import zstd_frames  # tests/spec_reader.py

from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    PlanEntry,
    PlanUpdate,
    PlanUpdateData,
    SessionEvent,
    SessionTitle,
    SessionTitleData,
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
    UnknownEvent,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
    encode_event,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.ids import InvalidSessionId
from acp_server.core.stream import (
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from acp_server.storage.errors import (
    CorruptLog,
    LogLocked,
    SessionExists,
    SessionNotFound,
    UnsupportedVersion,
)
from acp_server.storage.jsonl.lines import Compression
from acp_server.storage.jsonl.sessions import SessionStore

T0 = 1_750_000_000_000
NOW = T0 + 3_600_000
SID = "s-01"
TIME_GAPS = (7, 0, 12, -3, 25)
"""Gaps between consecutive event times, cycled: zero and negative gaps are data too."""

# ---------------------------------------------------------------------------------------------
# Events.


def header(session_id: Any = SID) -> SessionHeader:
    return SessionHeader(
        version=SESSION_FORMAT_VERSION, id=session_id, created_at=T0, cwd="/work/project"
    )


class Script:
    """Builds a session's events in order: contiguous seqs from 0, times from `T0`."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self.time = T0

    def add(self, kind: type, data: Any, **envelope: Any) -> Any:
        event = kind(len(self.events), self.time, data, **envelope)
        self.events.append(event)
        self.time += TIME_GAPS[len(self.events) % len(TIME_GAPS)]
        return event

    def unknown(self, kind: str, data: Any) -> UnknownEvent:
        """An event of a type this build does not know, marked ignorable."""
        event = UnknownEvent(kind, len(self.events), self.time, data, True)
        self.events.append(event)
        self.time += TIME_GAPS[len(self.events) % len(TIME_GAPS)]
        return event

    def chunk(self, turn: int, step: int, chunk: Any, **envelope: Any) -> AssistantChunk:
        return self.add(AssistantChunk, AssistantChunkData(turn, step, chunk), **envelope)

    def block(self, turn: int, step: int, index: int, deltas: Sequence[Any]) -> None:
        block_type = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}
        self.chunk(turn, step, BlockStart(index, block_type[type(deltas[0])]))  # type: ignore[arg-type]  # the dict maps delta classes to block-type literals
        for delta in deltas:
            self.chunk(turn, step, delta)
        self.chunk(turn, step, BlockEnd(index))

    def tool_call(self, turn: int, step: int, call_id: str, arguments: str) -> ToolCall:
        return self.add(ToolCall, ToolCallData(turn, step, call_id, "read_file", arguments))

    def tool_result(self, call: ToolCall, text: str) -> ToolResult:
        d = call.data
        return self.add(
            ToolResult,
            ToolResultData(d.turn, d.step, d.call_id, [TextContent(text)]),
            source_range=(call.seq, call.seq),
        )


def text_deltas(kind: type, text: str) -> list[Any]:
    return [kind(0 if kind is ReasoningDelta else 1, piece) for piece in text.split("|")]


def conversation() -> list[SessionEvent]:
    """Two completed turns: reasoning, text and a streamed tool call, long and short runs."""
    s = Script()
    s.add(TurnStart, TurnStartData(0))
    s.add(
        UserMessageEvent,
        UserMessageData(0, UserMessage("u-0", [TextContent("Summarize notes.txt")])),
    )
    s.add(StepStart, StepData(0, 0))
    first = len(s.events)
    s.block(0, 0, 0, text_deltas(ReasoningDelta, "The| user| wants| a| summary|."))
    s.block(0, 0, 1, text_deltas(TextDelta, "Let| me| read| the| file| first|.| "))
    args = ['{"', "path", '": "', "notes.txt", '"}']
    s.block(
        0,
        0,
        2,
        [ToolCallDelta(2, "call_a", args[0], "read_file")]
        + [ToolCallDelta(2, "call_a", piece) for piece in args[1:]],
    )
    s.chunk(0, 0, UsageChunk(Usage(1200, 45, 1024)))
    s.chunk(0, 0, Finish("tool-calls"))
    message = AssistantMessage(
        "m-0-0",
        [
            AssistantReasoning("The user wants a summary."),
            AssistantText("Let me read the file first. "),
            AssistantToolCall("call_a", "read_file", '{"path": "notes.txt"}'),
        ],
    )
    s.add(
        AssistantMessageEvent,
        AssistantMessageData(0, 0, message, Usage(1200, 45, 1024)),
        source_range=(first, len(s.events) - 1),
    )
    call = s.tool_call(0, 0, "call_a", '{"path": "notes.txt"}')
    s.tool_result(call, "- buy milk\n- write tests ✓")
    s.add(StepEnd, StepData(0, 0))
    s.add(StepStart, StepData(0, 1))
    first = len(s.events)
    s.chunk(0, 1, TextDelta(0, "You"), ignorable=True)  # ineligible for a row: stays plain
    s.block(0, 1, 0, text_deltas(TextDelta, " need| to| buy| milk| and| write| tests|."))
    s.chunk(0, 1, Finish("stop"))
    s.add(
        AssistantMessageEvent,
        AssistantMessageData(
            0,
            1,
            AssistantMessage("m-0-1", [AssistantText("You need to buy milk and write tests.")]),
        ),
        source_range=(first, len(s.events) - 1),
    )
    s.add(StepEnd, StepData(0, 1))
    s.add(SessionTitle, SessionTitleData("Notes summary"))
    s.unknown("future/event", {"note": "from a newer build"})
    s.add(TurnEnd, TurnEndData(0, TurnEndReasonCompleted()))
    s.add(TurnStart, TurnStartData(1))
    s.add(
        UserMessageEvent, UserMessageData(1, UserMessage("u-1", [TextContent("Thanks, plan it.")]))
    )
    s.add(StepStart, StepData(1, 0))
    first = len(s.events)
    s.block(1, 0, 0, text_deltas(TextDelta, "Sure|.| Done"))
    s.chunk(1, 0, Finish("stop"))
    s.add(
        AssistantMessageEvent,
        AssistantMessageData(1, 0, AssistantMessage("m-1-0", [AssistantText("Sure. Done")])),
        source_range=(first, len(s.events) - 1),
    )
    s.add(StepEnd, StepData(1, 0))
    s.add(PlanUpdate, PlanUpdateData([PlanEntry("Buy milk", "high", "pending")]))
    s.add(TurnEnd, TurnEndData(1, TurnEndReasonCompleted()))
    return s.events


EVENTS = conversation()
CUTS = (2, 9, 20, 31, len(EVENTS) - 4)
"""Flush points; several fall inside a run of deltas."""


def batches(events: Sequence[SessionEvent], cuts: Sequence[int] = CUTS) -> list[list[SessionEvent]]:
    bounds = [0, *cuts, len(events)]
    return [list(events[a:b]) for a, b in pairwise(bounds)]


def next_turn(start: int) -> list[SessionEvent]:
    """A short completed turn continuing a log of `start` events (plain events only)."""
    return [
        TurnStart(start, NOW, TurnStartData(2)),
        UserMessageEvent(
            start + 1, NOW + 1, UserMessageData(2, UserMessage("u-2", [TextContent("Again")]))
        ),
        TurnEnd(start + 2, NOW + 2, TurnEndData(2, TurnEndReasonCompleted())),
    ]


# ---------------------------------------------------------------------------------------------
# Layouts.


@dataclass(frozen=True)
class Layout:
    """One way of putting events on disk: which batches are packed, and the compression."""

    name: str
    packs: tuple[bool, ...]
    """Whether batch k is packed is `packs[k % len(packs)]`."""
    compression: Compression

    def store(self, root: Path) -> SessionStore:
        return SessionStore(root, pack=self.packs[0], compression=self.compression)

    def write(
        self, store: SessionStore, events: Sequence[SessionEvent], session_id: str = SID
    ) -> Path:
        """Create a session and write `events` in the flush batches cut at `CUTS`."""
        writer = store.create(header(session_id))
        try:
            for k, batch in enumerate(batches(events)):
                writer.pack = self.packs[k % len(self.packs)]
                writer.append(batch)
                writer.flush()
        finally:
            writer.close()
        return writer.path

    def frame(self, text: bytes) -> bytes:
        """Bytes as one append batch of this layout writes them."""
        if self.compression == "zstd":
            return zstandard.ZstdCompressor(write_checksum=True).compress(text)
        return text

    def lines(self, data: bytes) -> list[bytes]:
        """The lines that complete batches hold."""
        if self.compression == "zstd":
            reader = zstandard.ZstdDecompressor().stream_reader(
                io.BytesIO(data), read_across_frames=True
            )
            data = reader.read()
        assert data.endswith(b"\n") or not data
        return data.split(b"\n")[:-1]

    def rewrite(self, path: Path, lines: Sequence[bytes]) -> None:
        """Replace a log with these lines, one batch per line."""
        path.write_bytes(b"".join(self.frame(line + b"\n") for line in lines))


LAYOUTS = [
    Layout("packed", (True,), "none"),
    Layout("unpacked", (False,), "none"),
    Layout("mixed", (True, False), "none"),
    Layout("packed-zstd", (True,), "zstd"),
    Layout("unpacked-zstd", (False,), "zstd"),
]


@pytest.fixture(params=LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def layout(request: pytest.FixtureRequest) -> Layout:
    return request.param


@pytest.fixture
def store(tmp_path: Path, layout: Layout) -> SessionStore:
    return layout.store(tmp_path / "sessions")


@pytest.fixture
def log(store: SessionStore, layout: Layout) -> Path:
    """The path of session `SID`, holding `EVENTS` in this layout."""
    return layout.write(store, EVENTS)


def encoded(events: Sequence[SessionEvent]) -> list[bytes]:
    return [encode_event(e) for e in events]


# ---------------------------------------------------------------------------------------------
# The contract, per layout.


PACKED_ROWS = [
    ("reasoning-chunks", 4),
    ("text-chunks", 12),
    ("tool-call-chunks", 23),
    ("text-chunks", 37),
    ("text-chunks", 56),
]
LAYOUT_SHAPES = {
    "packed": (PACKED_ROWS, 42),
    "unpacked": ([], 65),
    "mixed": ([("text-chunks", 12), ("text-chunks", 37), ("text-chunks", 56)], 49),
    "packed-zstd": (PACKED_ROWS, 42),
    "unpacked-zstd": ([], 65),
}


def test_layouts_really_differ(layout: Layout, log: Path) -> None:
    """The fixture is not five names for one file: (rows as (type, seq0), body lines) differ.

    The run at seq 4 is cut by the flush after seq 8 (its last member stays plain); the named
    first delta of the tool call at seq 22 stays plain; the ignorable delta at 35 stays plain.
    """
    values = [msgspec.json.decode(line) for line in layout.lines(log.read_bytes())[1:]]
    rows = [(v["type"], v["seq0"]) for v in values if "seq0" in v]
    assert (rows, len(values)) == LAYOUT_SHAPES[layout.name]


def test_events_load_back_exactly(store: SessionStore, log: Path) -> None:
    contents = store.read(SID)
    assert contents.header == header()
    assert contents.events == EVENTS
    assert contents.torn_tail is False


def test_continuing_a_complete_log_changes_nothing(store: SessionStore, log: Path) -> None:
    before = log.read_bytes()
    continued = store.continue_session(SID, NOW)
    continued.writer.close()
    assert continued.events == EVENTS
    assert continued.closers == []
    assert continued.dropped_torn_tail is False
    assert log.read_bytes() == before


def test_appends_after_continuing_load_back(store: SessionStore, layout: Layout, log: Path) -> None:
    continued = store.continue_session(SID, NOW)
    continued.writer.append(next_turn(len(EVENTS)))
    continued.writer.close()
    assert store.read(SID).events == EVENTS + next_turn(len(EVENTS))


def torn(layout: Layout, cut: str) -> bytes:
    """The start of a batch whose write was cut short: a few bytes, half, or all but one."""
    whole = layout.frame(encode_event(next_turn(len(EVENTS))[0]) + b"\n")
    keep = {"start": 3, "middle": len(whole) // 2, "end": len(whole) - 1}[cut]
    return whole[:keep]


@pytest.mark.parametrize("cut", ["start", "middle", "end"])
def test_torn_tail_is_ignored_by_read_without_changing_the_file(
    store: SessionStore, layout: Layout, log: Path, cut: str
) -> None:
    damaged = log.read_bytes() + torn(layout, cut)
    log.write_bytes(damaged)
    contents = store.read(SID)
    assert contents.events == EVENTS
    assert contents.torn_tail is True
    assert log.read_bytes() == damaged


@pytest.mark.parametrize("cut", ["start", "middle", "end"])
def test_torn_tail_is_truncated_before_the_next_append(
    store: SessionStore, layout: Layout, log: Path, cut: str
) -> None:
    prefix = log.read_bytes()
    log.write_bytes(prefix + torn(layout, cut))
    continued = store.continue_session(SID, NOW)
    try:
        assert continued.dropped_torn_tail is True
        assert continued.events == EVENTS
        assert log.read_bytes() == prefix
        continued.writer.append(next_turn(len(EVENTS)))
    finally:
        continued.writer.close()
    after = log.read_bytes()
    assert after[: len(prefix)] == prefix
    assert layout.lines(after[len(prefix) :]) == encoded(next_turn(len(EVENTS)))


MIDDLE = 5
"""The body line that the damage tests break (0-based, so the 6th line of the file)."""


BROKEN_LINES = {
    "cut short": lambda line: line[: len(line) // 2],
    "empty": lambda line: b"",
    "not json": lambda line: b"hello",
    "invalid utf-8": lambda line: b'{"type": "\xff"}',
    "unknown type, not ignorable": lambda line: (
        b'{"type":"future/thing","seq":5,"time":0,"data":{}}'
    ),
    "known type, bad data": lambda line: b'{"type":"turn/start","seq":5,"time":0,"data":{}}',
}


@pytest.mark.parametrize("damage", BROKEN_LINES.values(), ids=BROKEN_LINES.keys())
def test_broken_middle_line_is_corrupt_log_naming_its_line(
    store: SessionStore, layout: Layout, log: Path, damage: Any
) -> None:
    lines = layout.lines(log.read_bytes())
    lines[MIDDLE] = damage(lines[MIDDLE])
    layout.rewrite(log, lines)
    with pytest.raises(CorruptLog) as caught:
        store.read(SID)
    assert caught.value.line == MIDDLE + 1
    assert caught.value.path == str(log)


def test_broken_middle_line_makes_the_session_unloadable_never_truncated(
    store: SessionStore, layout: Layout, log: Path
) -> None:
    lines = layout.lines(log.read_bytes())
    lines[MIDDLE] = b"{"
    layout.rewrite(log, lines)
    damaged = log.read_bytes()
    for _ in range(2):  # the failed attempt releases the lock: the second fails the same way
        with pytest.raises(CorruptLog) as caught:
            store.continue_session(SID, NOW)
        assert caught.value.line == MIDDLE + 1
    assert log.read_bytes() == damaged


def _row(**data: Any) -> bytes:
    base: dict[str, Any] = {
        "turn": 0,
        "step": 0,
        "index": 0,
        "dt": [1, 1],
        "texts": ["a", "b", "c"],
    }
    base.update(data)
    return msgspec.json.encode({"type": "text-chunks", "seq0": 4, "time0": T0, "data": base})


MALFORMED_ROWS = {
    "dt too short": _row(dt=[1]),
    "dt too long": _row(dt=[1, 1, 1]),
    "dt not integers": _row(dt=[1, 0.5]),
    "no fragments": _row(texts=[], dt=[]),
    "a fragment not a string": _row(texts=["a", 2, "c"]),
    "unknown data key": _row(extra=1),
    "tool-call keys on a text row": _row(id="call_a"),
    "missing data key": msgspec.json.encode(
        {
            "type": "reasoning-chunks",
            "seq0": 4,
            "time0": 0,
            "data": {"turn": 0, "step": 0, "dt": [], "texts": ["a"]},
        }
    ),
    "unknown row key": msgspec.json.encode(
        {
            "type": "text-chunks",
            "seq0": 4,
            "time0": 0,
            "seq": 4,
            "data": {"turn": 0, "step": 0, "index": 0, "dt": [], "texts": ["a"]},
        }
    ),
    "negative seq0": msgspec.json.encode(
        {
            "type": "text-chunks",
            "seq0": -1,
            "time0": 0,
            "data": {"turn": 0, "step": 0, "index": 0, "dt": [], "texts": ["a"]},
        }
    ),
    "tool row id not a string": msgspec.json.encode(
        {
            "type": "tool-call-chunks",
            "seq0": 4,
            "time0": 0,
            "data": {"turn": 0, "step": 0, "index": 0, "dt": [], "id": 7, "args": ["{"]},
        }
    ),
    "member time leaves the safe range": msgspec.json.encode(
        {
            "type": "text-chunks",
            "seq0": 4,
            "time0": 2**53 - 2,
            "data": {"turn": 0, "step": 0, "index": 0, "dt": [5], "texts": ["a", "b"]},
        }
    ),
}


@pytest.mark.parametrize("row", MALFORMED_ROWS.values(), ids=MALFORMED_ROWS.keys())
def test_malformed_middle_row_is_corrupt_log_naming_its_line(
    store: SessionStore, layout: Layout, log: Path, row: bytes
) -> None:
    lines = layout.lines(log.read_bytes())
    lines[MIDDLE] = row
    layout.rewrite(log, lines)
    with pytest.raises(CorruptLog) as caught:
        store.read(SID)
    assert caught.value.line == MIDDLE + 1


@pytest.mark.parametrize(
    ("edit", "bad_line"),
    [
        (lambda lines: lines[:MIDDLE] + lines[MIDDLE + 1 :], MIDDLE + 1),  # a line lost
        (lambda lines: lines[: MIDDLE + 1] + lines[MIDDLE:], MIDDLE + 2),  # a line repeated
        (lambda lines: lines[:1] + lines[2:], 2),  # the log does not start at seq 0
    ],
    ids=["line lost", "line repeated", "first record lost"],
)
def test_seq_gap_is_corrupt_log_naming_its_line(
    store: SessionStore, layout: Layout, log: Path, edit: Any, bad_line: int
) -> None:
    layout.rewrite(log, edit(layout.lines(log.read_bytes())))
    with pytest.raises(CorruptLog) as caught:
        store.read(SID)
    assert caught.value.line == bad_line
    assert "seq gap" in caught.value.reason


def test_rewritten_log_is_still_valid(store: SessionStore, layout: Layout, log: Path) -> None:
    """The damage tests' rewriting alone (one batch per line) keeps a log readable."""
    layout.rewrite(log, layout.lines(log.read_bytes()))
    assert store.read(SID).events == EVENTS


# -- Recovery of a crashed turn.


def _completed_turn(s: Script) -> None:
    s.add(TurnStart, TurnStartData(0))
    s.add(UserMessageEvent, UserMessageData(0, UserMessage("u-0", [TextContent("Hi")])))
    s.add(StepStart, StepData(0, 0))
    s.block(0, 0, 0, text_deltas(TextDelta, "Hello|!| How| can| I| help|?"))
    s.chunk(0, 0, Finish("stop"))
    s.add(
        AssistantMessageEvent,
        AssistantMessageData(
            0, 0, AssistantMessage("m-0", [AssistantText("Hello! How can I help?")])
        ),
        source_range=(3, len(s.events) - 1),
    )
    s.add(StepEnd, StepData(0, 0))
    s.add(TurnEnd, TurnEndData(0, TurnEndReasonCompleted()))


def _open_turn(s: Script) -> None:
    s.add(TurnStart, TurnStartData(1))
    s.add(
        UserMessageEvent, UserMessageData(1, UserMessage("u-1", [TextContent("Read a, b and c")]))
    )


def crash_with_unanswered_tool_calls() -> tuple[list[SessionEvent], list[SessionEvent]]:
    s = Script()
    _completed_turn(s)
    _open_turn(s)
    s.add(StepStart, StepData(1, 0))
    s.block(
        1,
        0,
        0,
        [ToolCallDelta(0, "call_a", '{"path"', "read_file"), ToolCallDelta(0, "call_a", ': "a"}')],
    )
    s.chunk(1, 0, Finish("tool-calls"))
    call_a = s.tool_call(1, 0, "call_a", '{"path": "a"}')
    s.tool_result(call_a, "contents of a")
    call_b = s.tool_call(1, 0, "call_b", '{"path": "b"}')
    call_c = s.tool_call(1, 0, "call_c", '{"path": "c"}')
    n = len(s.events)
    closers: list[SessionEvent] = [
        ToolResult(
            n,
            NOW,
            ToolResultData(1, 0, "call_b", [TextContent("interrupted")], True),
            source_range=(call_b.seq, call_b.seq),
        ),
        ToolResult(
            n + 1,
            NOW,
            ToolResultData(1, 0, "call_c", [TextContent("interrupted")], True),
            source_range=(call_c.seq, call_c.seq),
        ),
        StepEnd(n + 2, NOW, StepData(1, 0)),
        TurnEnd(n + 3, NOW, TurnEndData(1, TurnEndReasonInterrupted())),
    ]
    return s.events, closers


def crash_mid_stream() -> tuple[list[SessionEvent], list[SessionEvent]]:
    s = Script()
    _completed_turn(s)
    _open_turn(s)
    s.add(StepStart, StepData(1, 0))
    s.chunk(1, 0, BlockStart(0, "text"))
    for piece in ["Reading", " a", ",", " b", " and"]:
        s.chunk(1, 0, TextDelta(0, piece))
    n = len(s.events)
    return s.events, [
        StepEnd(n, NOW, StepData(1, 0)),
        TurnEnd(n + 1, NOW, TurnEndData(1, TurnEndReasonInterrupted())),
    ]


def crash_between_steps() -> tuple[list[SessionEvent], list[SessionEvent]]:
    s = Script()
    _completed_turn(s)
    _open_turn(s)
    s.add(StepStart, StepData(1, 0))
    s.add(StepEnd, StepData(1, 0))
    n = len(s.events)
    return s.events, [TurnEnd(n, NOW, TurnEndData(1, TurnEndReasonInterrupted()))]


CRASHES = {
    "unanswered tool calls": crash_with_unanswered_tool_calls,
    "mid-stream": crash_mid_stream,
    "between steps": crash_between_steps,
}


@pytest.mark.parametrize("crash", CRASHES.values(), ids=CRASHES.keys())
def test_crashed_turn_gets_its_closers_written_and_durable(
    store: SessionStore, layout: Layout, crash: Any
) -> None:
    events, closers = crash()
    log = layout.write(store, events)
    continued = store.continue_session(SID, NOW)
    try:
        assert continued.closers == closers
        assert continued.events == events + closers
        # On disk before `continue_session` returned, while its writer is still open:
        assert store.read(SID).events == events + closers
        assert layout.lines(log.read_bytes())[-len(closers) :] == encoded(closers)
    finally:
        continued.writer.close()


@pytest.mark.parametrize("crash", CRASHES.values(), ids=CRASHES.keys())
def test_second_continue_adds_no_closers(store: SessionStore, layout: Layout, crash: Any) -> None:
    events, closers = crash()
    log = layout.write(store, events)
    store.continue_session(SID, NOW).writer.close()
    recovered = log.read_bytes()
    again = store.continue_session(SID, NOW + 1)
    again.writer.close()
    assert again.closers == []
    assert again.events == events + closers
    assert log.read_bytes() == recovered


def test_torn_turn_end_is_cut_away_and_the_turn_closed_as_interrupted(
    store: SessionStore, layout: Layout
) -> None:
    """The process died while writing the last `turn/end`: recovery drops it and closes the turn."""
    *events, turn_end = EVENTS
    log = layout.write(store, events)
    prefix = log.read_bytes()
    log.write_bytes(prefix + layout.frame(encode_event(turn_end) + b"\n")[:-2])
    continued = store.continue_session(SID, NOW)
    continued.writer.close()
    closers = [TurnEnd(turn_end.seq, NOW, TurnEndData(1, TurnEndReasonInterrupted()))]
    assert continued.closers == closers
    assert continued.dropped_torn_tail is True
    after = log.read_bytes()
    assert after[: len(prefix)] == prefix
    assert layout.lines(after[len(prefix) :]) == encoded(closers)


# -- One writer at a time.


def test_second_writer_in_process_is_refused(store: SessionStore, log: Path) -> None:
    first = store.continue_session(SID, NOW)
    try:
        with pytest.raises(LogLocked):
            store.continue_session(SID, NOW)
    finally:
        first.writer.close()
    store.continue_session(SID, NOW).writer.close()  # free again once the first is closed


def test_new_session_is_locked_by_its_creator(store: SessionStore) -> None:
    writer = store.create(header())
    try:
        with pytest.raises(LogLocked):
            store.continue_session(SID, NOW)
    finally:
        writer.close()


CONTINUE_IN_CHILD = """
import sys
from acp_server.storage.jsonl.sessions import SessionStore
try:
    SessionStore(sys.argv[1]).continue_session(sys.argv[2], 0).writer.close()
except Exception as exc:
    print(type(exc).__name__)
else:
    print("opened")
"""


def continue_in_child(store: SessionStore) -> str:
    done = subprocess.run(
        [sys.executable, "-c", CONTINUE_IN_CHILD, str(store.root), SID],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.mark.process
def test_second_writer_in_another_process_is_refused(store: SessionStore, log: Path) -> None:
    held = store.continue_session(SID, NOW)
    try:
        assert continue_in_child(store) == "LogLocked\n"
    finally:
        held.writer.close()
    assert continue_in_child(store) == "opened\n"


# -- Header checks.

VERSION_999_HEADERS = {
    "otherwise valid": b'{"type":"session","version":999,"id":"s-01","createdAt":0,"cwd":"/w"}',
    "missing fields": b'{"type":"session","version":999}',
    "malformed fields": (
        b'{"type":"session","version":999,"id":7,"createdAt":"soon","cwd":null,"colour":"blue"}'
    ),
}


@pytest.mark.parametrize("raw", VERSION_999_HEADERS.values(), ids=VERSION_999_HEADERS.keys())
def test_other_version_is_unsupported_not_corrupt(
    store: SessionStore, layout: Layout, log: Path, raw: bytes
) -> None:
    layout.rewrite(log, [raw, *layout.lines(log.read_bytes())[1:]])
    before = log.read_bytes()
    for attempt in (lambda: store.read(SID), lambda: store.continue_session(SID, NOW)):
        with pytest.raises(UnsupportedVersion) as caught:
            attempt()
        assert caught.value.found == 999
        assert caught.value.supported == SESSION_FORMAT_VERSION
    assert log.read_bytes() == before


def test_header_id_differing_from_its_directory_is_corrupt_line_1(
    store: SessionStore, layout: Layout, log: Path
) -> None:
    log.parent.rename(store.root / "s-02")
    for attempt in (lambda: store.read("s-02"), lambda: store.continue_session("s-02", NOW)):
        with pytest.raises(CorruptLog) as caught:
            attempt()
        assert caught.value.line == 1


# -- Flushing.


def test_flushed_batch_is_readable_before_sync(store: SessionStore) -> None:
    writer = store.create(header())
    try:
        writer.append(EVENTS[:20])
        assert store.read(SID).events == []  # appended, not yet flushed
        writer.flush()
        assert store.read(SID).events == EVENTS[:20]
        assert not writer.closed
    finally:
        writer.close()


def test_out_of_order_append_is_refused_whole(store: SessionStore) -> None:
    writer = store.create(header())
    try:
        with pytest.raises(ValueError, match="expected seq 1, got 2"):
            writer.append([EVENTS[0], EVENTS[2]])
        writer.append(EVENTS[:3])
        writer.flush()
        assert store.read(SID).events == EVENTS[:3]
    finally:
        writer.close()


# ---------------------------------------------------------------------------------------------
# Zstandard framing: each frame is checked whole, and named by the first line it holds.


def _zstd_log(tmp_path: Path, frames: Sequence[bytes]) -> SessionStore:
    """A zstd session `SID` whose file is exactly `frames`, concatenated."""
    (tmp_path / SID).mkdir()
    (tmp_path / SID / "session.jsonl.zst").write_bytes(b"".join(frames))
    return SessionStore(tmp_path, compression="zstd")


ZSTD = Layout("zstd", (True,), "zstd")
LINES = [msgspec.json.encode(header()), *encoded(EVENTS[:6])]


def _batch(*lines: bytes) -> bytes:
    return ZSTD.frame(b"".join(line + b"\n" for line in lines))


def test_zstd_frames_hold_any_number_of_lines(tmp_path: Path) -> None:
    store = _zstd_log(
        tmp_path, [_batch(LINES[0]), _batch(*LINES[1:3]), _batch(LINES[3]), _batch(*LINES[4:])]
    )
    assert store.read(SID).events == EVENTS[:6]


def test_zstd_frame_failing_its_checksum_is_corrupt_naming_its_first_line(tmp_path: Path) -> None:
    third = bytearray(_batch(LINES[3], LINES[4]))
    third[-1] ^= 0xFF  # the checksum's last byte
    store = _zstd_log(
        tmp_path, [_batch(LINES[0]), _batch(*LINES[1:3]), bytes(third), _batch(*LINES[5:])]
    )
    with pytest.raises(CorruptLog) as caught:
        store.read(SID)
    assert caught.value.line == 4


def test_zstd_bytes_that_are_not_a_frame_are_corrupt_not_torn(tmp_path: Path) -> None:
    store = _zstd_log(
        tmp_path, [_batch(LINES[0]), _batch(*LINES[1:3]), b"garbage!", _batch(*LINES[3:])]
    )
    with pytest.raises(CorruptLog) as caught:
        store.read(SID)
    assert caught.value.line == 4


def _inflate_first_block_size(frame: bytes) -> bytes:
    """The frame with its first block claiming 2**21 - 1 bytes: past any file's end here."""
    damaged = bytearray(frame)
    at = zstandard.frame_header_size(frame)
    damaged[at] |= 0xF8
    damaged[at + 1] = damaged[at + 2] = 0xFF
    return bytes(damaged)


def test_zstd_middle_frame_with_an_impossible_block_size_is_corrupt_not_torn(
    tmp_path: Path,
) -> None:
    """A damaged size must not make the rest of the log pass for a torn tail (and be cut away)."""
    frames = [
        _batch(LINES[0]),
        _batch(*LINES[1:3]),
        _inflate_first_block_size(_batch(LINES[3])),
        _batch(*LINES[4:]),
    ]
    store = _zstd_log(tmp_path, frames)
    before = b"".join(frames)
    for attempt in (lambda: store.read(SID), lambda: store.continue_session(SID, NOW)):
        with pytest.raises(CorruptLog) as caught:
            attempt()
        assert caught.value.line == 4
    assert (tmp_path / SID / "session.jsonl.zst").read_bytes() == before


def test_zstd_batch_spanning_many_blocks_reads_back(tmp_path: Path) -> None:
    """A 400 kB batch is one frame of several blocks (each regenerates at most 128 KiB)."""
    rng = random.Random(5)
    text = "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789 ") for _ in range(400_000)
    )
    events = [
        AssistantChunk(k, T0, AssistantChunkData(0, 0, TextDelta(0, text[k::4]))) for k in range(4)
    ]
    writer = SessionStore(tmp_path, compression="zstd").create(header())
    writer.append(events)
    writer.close()
    assert SessionStore(tmp_path).read(SID).events == events


def test_zstd_frame_ending_inside_a_line_is_corrupt(tmp_path: Path) -> None:
    split = LINES[2] + b"\n" + LINES[3]
    store = _zstd_log(
        tmp_path,
        [
            _batch(LINES[0]),
            _batch(LINES[1]),
            ZSTD.frame(split[:40]),
            ZSTD.frame(split[40:] + b"\n"),
        ],
    )
    with pytest.raises(CorruptLog) as caught:
        store.read(SID)
    assert caught.value.line == 3


# ---------------------------------------------------------------------------------------------
# Store rules that do not depend on the layout.

INVALID_IDS: list[Any] = ["../x", "a/b", "", ".hidden", "a" * 129, "-lead", "a b", "ü", 5, None]


@pytest.mark.parametrize("session_id", INVALID_IDS, ids=repr)
def test_invalid_id_is_refused_before_touching_the_file_system(
    tmp_path: Path, session_id: Any
) -> None:
    store = SessionStore(tmp_path / "sessions")
    attempts = [
        lambda: store.create(header(session_id)),
        lambda: store.read(session_id),
        lambda: store.continue_session(session_id, NOW),
        lambda: store.delete(session_id),
        lambda: store.log_path(session_id),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidSessionId):
            attempt()
    assert list(tmp_path.iterdir()) == []


def test_128_character_id_is_accepted(tmp_path: Path) -> None:
    session_id = "a" * 128
    store = SessionStore(tmp_path)
    store.create(header(session_id)).close()
    assert store.read(session_id).header.id == session_id
    assert store.session_ids() == [session_id]


def test_create_on_an_existing_id_raises_session_exists(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    writer = store.create(header())
    writer.append(EVENTS[:3])
    writer.close()
    before = (tmp_path / SID / "session.jsonl").read_bytes()
    with pytest.raises(SessionExists):
        store.create(header())
    assert (tmp_path / SID / "session.jsonl").read_bytes() == before


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, compression="zstd")
    store.create(header()).close()
    store.create(header("s-02")).close()
    store.delete(SID)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s-02"]
    with pytest.raises(SessionNotFound):
        store.read(SID)


def test_delete_of_an_unknown_session_raises_session_not_found(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound):
        SessionStore(tmp_path).delete(SID)


def test_session_ids_lists_only_valid_session_dirs_with_a_log(tmp_path: Path) -> None:
    SessionStore(tmp_path).create(header("b")).close()
    SessionStore(tmp_path, compression="zstd").create(header("a")).close()
    for stray in (".hidden", "bad id", "-dash"):
        (tmp_path / stray).mkdir()
        (tmp_path / stray / "session.jsonl").write_bytes(b"")
    (tmp_path / "no-log").mkdir()
    (tmp_path / "file").write_bytes(b"")
    (tmp_path / "dir-named-log").mkdir()
    (tmp_path / "dir-named-log" / "session.jsonl").mkdir()
    assert SessionStore(tmp_path).session_ids() == ["a", "b"]


def test_session_ids_of_a_missing_root_is_empty(tmp_path: Path) -> None:
    assert SessionStore(tmp_path / "nowhere").session_ids() == []


# -- How the writer packs each flush batch (SPEC 2.2).


def _run(length: int) -> list[SessionEvent]:
    s = Script()
    for k in range(length):
        s.chunk(0, 0, TextDelta(0, f"t{k}"))
    return s.events


def _shape(lines: list[bytes]) -> list[tuple[str, int]]:
    """Each body line as (record type, events it holds)."""
    shape = []
    for line in lines[1:]:
        value = msgspec.json.decode(line)
        members = len(value["data"]["texts"]) if value["type"] == "text-chunks" else 1
        shape.append((value["type"], members))
    return shape


CHUNK = ("assistant/chunk", 1)


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize(
    ("sizes", "pack", "expected"),
    [
        ((7,), True, [("text-chunks", 7)]),
        ((4, 3), True, [("text-chunks", 4), ("text-chunks", 3)]),
        ((5, 2), True, [("text-chunks", 5), CHUNK, CHUNK]),
        ((2, 2, 3), True, [CHUNK, CHUNK, CHUNK, CHUNK, ("text-chunks", 3)]),
        ((4, 3), False, [CHUNK] * 7),
    ],
    ids=[
        "one batch",
        "split into two rows",
        "split leaving a remainder",
        "split below the minimum",
        "no-pack",
    ],
)
def test_each_flush_batch_is_packed_on_its_own(
    tmp_path: Path,
    compression: Compression,
    sizes: tuple[int, ...],
    pack: bool,
    expected: list[tuple[str, int]],
) -> None:
    events = _run(sum(sizes))
    store = SessionStore(tmp_path, pack=pack, compression=compression)
    writer = store.create(header())
    start = 0
    for size in sizes:
        writer.append(events[start : start + size])
        writer.flush()
        start += size
    writer.close()
    layout = Layout("", (pack,), compression)
    assert _shape(layout.lines(writer.path.read_bytes())) == expected
    assert store.read(SID).events == events


def test_zstd_log_is_one_checksummed_frame_per_flush_batch(tmp_path: Path) -> None:
    events = _run(5)
    writer = SessionStore(tmp_path, compression="zstd").create(header())
    writer.append(events[:2])
    writer.flush()
    writer.flush()  # nothing pending: no empty frame
    writer.append(events[2:])
    writer.close()
    frames = zstd_frames(writer.path.read_bytes())  # each one complete and checksummed
    assert frames == [
        msgspec.json.encode(header()) + b"\n",
        encode_event(events[0]) + b"\n" + encode_event(events[1]) + b"\n",
        b'{"type":"text-chunks","seq0":2,"time0":1750000000012,'
        b'"data":{"turn":0,"step":0,"index":0,"dt":[-3,25],"texts":["t2","t3","t4"]}}\n',
    ]
