"""The project's logs, read by an independent decoder written from the SPEC alone.

`spec_reader` knows nothing of `acp_server`; it checks every line of a log to the letter of
SPEC 2.1 and 2.2 and expands rows itself. A log the project writes (a long, realistic session,
flushed in many batches; packed and unpacked, plain and Zstandard) must read back through it as
exactly the JSON of the events written, `[json.loads(encode_event(e)) for e in events]`, and
every row must be a maximal run (within its flush batch) of at least 3 consecutive delta chunks
of one block.

The last section checks that the decoder has teeth: each rule it enforces rejects a bad line.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import pytest
import spec_reader  # tests/spec_reader.py: knows nothing of acp_server
import zstandard
from msgspec import UNSET

from acp_server.core.content import DiffContent, ImageContent, ResourceLink, TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    ErrorInfo,
    PlanEntry,
    PlanUpdate,
    PlanUpdateData,
    SessionEvent,
    SessionTitle,
    SessionTitleData,
    StepData,
    StepEnd,
    StepStart,
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCancelled,
    TurnEndReasonCompleted,
    TurnEndReasonError,
    TurnEndReasonMaxSteps,
    TurnEndReasonMaxTokens,
    TurnStart,
    TurnStartData,
    UnknownEvent,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
    encode_event,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, McpServerRecord, SessionHeader
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
from acp_server.storage.jsonl.lines import Compression
from acp_server.storage.jsonl.sessions import SessionStore

T0 = 1_760_000_000_000
WORDS = [
    "The",
    " file",
    " has",
    " 3",
    " lines",
    ".",
    " über",
    " 日本",
    "語",
    " 🙂",
    "\n",
    "",
    " ",
    '"q"',
    "\\",
]
ARG_PIECES = ['{"', "path", '": "', "src/", "main", ".py", '", "line', '": 12', "}"]

# ---------------------------------------------------------------------------------------------
# A realistic session, deterministic.


class Session:
    """Builds a long session the way the agent loop writes one, from a seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.events: list[SessionEvent] = []
        self.time = T0

    def add(self, event_type: type, data: Any, **envelope: Any) -> Any:
        event = event_type(len(self.events), self.time, data, **envelope)
        self.events.append(event)
        self.time += self.rng.choice([0, 1, 3, 8, 40, -2, 250])
        return event

    def chunk(self, turn: int, step: int, chunk: Any, **envelope: Any) -> AssistantChunk:
        return self.add(AssistantChunk, AssistantChunkData(turn, step, chunk), **envelope)

    def length(self) -> int:
        return self.rng.choice([1, 2, 3, 4, 9, 60, 200])

    def text_block(self, turn: int, step: int, index: int, delta: type) -> str:
        self.chunk(turn, step, BlockStart(index, "text" if delta is TextDelta else "reasoning"))
        pieces = [self.rng.choice(WORDS) for _ in range(self.length())]
        for piece in pieces:
            envelope = {"ignorable": True} if self.rng.random() < 0.02 else {}
            self.chunk(turn, step, delta(index, piece), **envelope)
        self.chunk(turn, step, BlockEnd(index))
        return "".join(pieces)

    def tool_block(self, turn: int, step: int, index: int, call_id: str) -> AssistantToolCall:
        """A streamed call, named on the first delta, on every delta, or on none."""
        naming = self.rng.choice(["first", "all", "none"])
        self.chunk(turn, step, BlockStart(index, "tool-call"))
        pieces = [ARG_PIECES[k % len(ARG_PIECES)] for k in range(self.length())]
        for k, piece in enumerate(pieces):
            name = "read_file" if naming == "all" or (naming == "first" and k == 0) else UNSET
            self.chunk(turn, step, ToolCallDelta(index, call_id, piece, name))
        self.chunk(turn, step, BlockEnd(index))
        return AssistantToolCall(call_id, "read_file", "".join(pieces))

    def interleaved_calls(self, turn: int, step: int) -> None:
        """Two tool calls streamed in alternation: runs of one delta each, never rows."""
        for k in range(6):
            self.chunk(turn, step, ToolCallDelta(7 + k % 2, f"par_{k % 2}", ARG_PIECES[k]))

    def step(self, turn: int, step: int, last: bool) -> None:
        self.add(StepStart, StepData(turn, step))
        first = len(self.events)
        blocks: list[Any] = []
        if self.rng.random() < 0.6:
            blocks.append(AssistantReasoning(self.text_block(turn, step, 0, ReasoningDelta)))
        blocks.append(AssistantText(self.text_block(turn, step, 1, TextDelta)))
        calls = (
            []
            if last
            else [
                self.tool_block(turn, step, 2 + k, f"call_{turn}_{step}_{k}")
                for k in range(self.rng.choice([1, 2]))
            ]
        )
        blocks.extend(calls)
        if self.rng.random() < 0.2:
            self.interleaved_calls(turn, step)
        usage = Usage(
            self.rng.randrange(10_000), self.rng.randrange(2_000), self.rng.choice([UNSET, 512])
        )
        self.chunk(turn, step, UsageChunk(usage))
        self.chunk(turn, step, Finish("stop" if last else "tool-calls"))
        self.add(
            AssistantMessageEvent,
            AssistantMessageData(turn, step, AssistantMessage(f"m-{turn}-{step}", blocks), usage),
            source_range=(first, len(self.events) - 1),
        )
        for call in calls:
            event = self.add(ToolCall, ToolCallData(turn, step, call.id, call.name, call.arguments))
            failed = self.rng.random() < 0.3
            content: list[Any] = [TextContent("no such file" if failed else "print('hi')\n")]
            if not failed and self.rng.random() < 0.5:
                content.append(
                    DiffContent("/w/main.py", "new\n", self.rng.choice([UNSET, None, "old\n"]))
                )
            self.add(
                ToolResult,
                ToolResultData(
                    turn,
                    step,
                    call.id,
                    content,
                    True if failed else UNSET,
                    {"exitCode": 1} if failed else UNSET,
                ),
                source_range=(event.seq, event.seq),
            )
        self.add(StepEnd, StepData(turn, step))

    def turn(self, turn: int) -> None:
        self.add(TurnStart, TurnStartData(turn))
        content: list[Any] = [TextContent(f"Request {turn}: fix the bug ✓")]
        if turn % 3 == 1:
            content.append(ResourceLink("file:///w/main.py", "main.py"))
        if turn % 4 == 2:
            content.append(ImageContent("aGVsbG8=", "image/png"))
        self.add(UserMessageEvent, UserMessageData(turn, UserMessage(f"u-{turn}", content)))
        steps = self.rng.choice([1, 2, 3])
        for step in range(steps):
            self.step(turn, step, last=step == steps - 1)
        if turn == 0:
            self.add(SessionTitle, SessionTitleData("Fix the bug"))
        if turn % 2 == 1:
            self.add(
                PlanUpdate,
                PlanUpdateData(
                    [
                        PlanEntry("Fix it", "high", "in_progress"),
                        PlanEntry("Test it", "low", "pending"),
                    ]
                ),
            )
        if turn == 2:
            self.add(SubagentStart, SubagentStartData(turn, 0, "call_2_0_0", "child-1", "one-shot"))
            self.events.append(
                UnknownEvent("future/event", len(self.events), self.time, {"x": [1]}, True)
            )
        reasons = [
            TurnEndReasonCompleted(),
            TurnEndReasonCancelled(),
            TurnEndReasonMaxTokens(),
            TurnEndReasonMaxSteps(),
            TurnEndReasonError(ErrorInfo("upstream 529", 529)),
        ]
        self.add(TurnEnd, TurnEndData(turn, reasons[turn % len(reasons)]))


def realistic_session(seed: int = 7, turns: int = 16) -> list[SessionEvent]:
    session = Session(seed)
    for turn in range(turns):
        session.turn(turn)
    return session.events


EVENTS = realistic_session()
CUTS = sorted(random.Random(11).sample(range(1, len(EVENTS)), 40))
"""Flush points: forty batches, many cutting a run of deltas."""

HEADERS = {
    "minimal": SessionHeader(version=SESSION_FORMAT_VERSION, id="main-1", created_at=T0, cwd="/w"),
    "every key": SessionHeader(
        version=SESSION_FORMAT_VERSION,
        id="child-1",
        created_at=T0,
        cwd="/w",
        parent_session="main-1",
        origin="subagent",
        additional_directories=["/data"],
        mcp_servers=[McpServerRecord("fs", "stdio", command="mcp-fs")],
    ),
}


def write(root: Path, header: SessionHeader, pack: bool, compression: Compression) -> Path:
    writer = SessionStore(root, pack=pack, compression=compression).create(header)
    bounds = [0, *CUTS, len(EVENTS)]
    for a, b in pairwise(bounds):
        writer.append(EVENTS[a:b])
        writer.flush()
    writer.close()
    return writer.path


LAYOUTS = [
    pytest.param(True, "none", id="packed"),
    pytest.param(False, "none", id="unpacked"),
    pytest.param(True, "zstd", id="packed-zstd"),
    pytest.param(False, "zstd", id="unpacked-zstd"),
]


def as_json(value: Any) -> Any:
    return json.loads(msgspec.json.encode(value))


def test_session_is_long_and_varied() -> None:
    """The generator really produces what the tests below rely on."""
    chunks = [e.data.chunk for e in EVENTS if isinstance(e, AssistantChunk)]
    named = {c.id: c.name for c in chunks if isinstance(c, ToolCallDelta)}
    assert len(EVENTS) > 2000
    assert max(n for _, _, n in expected_rows(EVENTS, [])) >= 200  # long runs
    assert UNSET in named.values() and "read_file" in named.values()
    assert {type(e).__name__ for e in EVENTS} >= {
        "TurnStart",
        "TurnEnd",
        "StepStart",
        "StepEnd",
        "UserMessageEvent",
        "AssistantChunk",
        "AssistantMessageEvent",
        "ToolCall",
        "ToolResult",
        "PlanUpdate",
        "SessionTitle",
        "SubagentStart",
        "UnknownEvent",
    }


@pytest.mark.parametrize(("pack", "compression"), LAYOUTS)
@pytest.mark.parametrize("header", HEADERS.values(), ids=HEADERS.keys())
def test_project_log_reads_back_to_the_letter(
    tmp_path: Path, header: SessionHeader, pack: bool, compression: Compression
) -> None:
    path = write(tmp_path, header, pack, compression)
    assert spec_reader.read_log(path) == (
        as_json(header),
        [json.loads(encode_event(e)) for e in EVENTS],
    )


# -- Rows.

_DELTA_ROWS = {
    TextDelta: "text-chunks",
    ReasoningDelta: "reasoning-chunks",
    ToolCallDelta: "tool-call-chunks",
}


def _block(event: SessionEvent) -> tuple[Any, ...] | None:
    """What a delta event shares with the rest of its run (SPEC 2.1), or None if ineligible."""
    if (
        type(event) is not AssistantChunk
        or event.ignorable is not UNSET
        or event.source_range is not UNSET
    ):
        return None
    chunk = event.data.chunk
    if type(chunk) not in _DELTA_ROWS:
        return None
    d = event.data
    if isinstance(chunk, ToolCallDelta):
        return (type(chunk), d.turn, d.step, chunk.index, chunk.id, chunk.name)
    return (type(chunk), d.turn, d.step, chunk.index)


def expected_rows(
    events: Sequence[SessionEvent], cuts: Sequence[int]
) -> list[tuple[str, int, int]]:
    """(row type, seq0, members) of every maximal run of at least 3, never across a flush."""
    rows = []
    start = 0
    boundaries = set(cuts)
    for k in range(1, len(events) + 1):
        run_continues = (
            k < len(events)
            and k not in boundaries
            and _block(events[k]) is not None
            and _block(events[k]) == _block(events[k - 1])
        )
        if run_continues:
            continue
        if _block(events[start]) is not None and k - start >= 3:
            rows.append((_DELTA_ROWS[type(events[start].data.chunk)], events[start].seq, k - start))  # type: ignore[union-attr]  # _block() said it is a chunk event
        start = k
    return rows


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_every_row_is_three_or_more_consecutive_deltas_of_one_block(
    tmp_path: Path, compression: Compression
) -> None:
    _, records = spec_reader.read_records(write(tmp_path, HEADERS["minimal"], True, compression))
    rows = [r for r in records if spec_reader.is_row(r)]
    assert len(rows) > 50
    for row in rows:
        members = EVENTS[row["seq0"] : row["seq0"] + len(spec_reader.expand_row(row))]
        assert len(members) >= 3
        assert [e.seq for e in members] == list(range(row["seq0"], row["seq0"] + len(members)))
        assert len({_block(e) for e in members}) == 1
        assert _block(members[0]) is not None


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_rows_are_the_maximal_runs_of_each_flush_batch(
    tmp_path: Path, compression: Compression
) -> None:
    _, records = spec_reader.read_records(write(tmp_path, HEADERS["minimal"], True, compression))
    rows = [
        (r["type"], r["seq0"], len(spec_reader.expand_row(r)))
        for r in records
        if spec_reader.is_row(r)
    ]
    assert rows == expected_rows(EVENTS, CUTS)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_no_pack_log_has_no_rows(tmp_path: Path, compression: Compression) -> None:
    _, records = spec_reader.read_records(write(tmp_path, HEADERS["minimal"], False, compression))
    assert [r["seq"] for r in records] == list(range(len(EVENTS)))


# -- The decoder has teeth.

GOOD_HEADER = b'{"type":"session","version":2,"id":"s1","createdAt":0,"cwd":"/w"}'
GOOD_BODY = [
    b'{"type":"turn/start","seq":0,"time":5,"data":{"turn":0}}',
    b'{"type":"text-chunks","seq0":1,"time0":6,"data":{"turn":0,"step":0,"index":0,"dt":[1,-1],"texts":["a","","c"]}}',
    b'{"type":"tool-call-chunks","seq0":4,"time0":9,"data":{"turn":0,"step":0,"index":1,"dt":[0,0],"id":"c","name":"n","args":["{","}",""]}}',
    b'{"type":"tool/result","seq":7,"time":9,"data":{"turn":0,"step":0,"callId":"c","content":[],"isError":true},"sourceRange":[4,4]}',
    b'{"type":"future/x","seq":8,"time":9,"data":null,"ignorable":true}',
]


def _read(tmp_path: Path, lines: Sequence[bytes]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return spec_reader.read_log(path)


def test_handwritten_log_expands_as_the_spec_says(tmp_path: Path) -> None:
    header, events = _read(tmp_path, [GOOD_HEADER, *GOOD_BODY])
    assert header == json.loads(GOOD_HEADER)
    assert events[1:7] == [
        {
            "type": "assistant/chunk",
            "seq": 1,
            "time": 6,
            "data": {
                "turn": 0,
                "step": 0,
                "chunk": {"type": "text-delta", "index": 0, "text": "a"},
            },
        },
        {
            "type": "assistant/chunk",
            "seq": 2,
            "time": 7,
            "data": {"turn": 0, "step": 0, "chunk": {"type": "text-delta", "index": 0, "text": ""}},
        },
        {
            "type": "assistant/chunk",
            "seq": 3,
            "time": 6,
            "data": {
                "turn": 0,
                "step": 0,
                "chunk": {"type": "text-delta", "index": 0, "text": "c"},
            },
        },
        {
            "type": "assistant/chunk",
            "seq": 4,
            "time": 9,
            "data": {
                "turn": 0,
                "step": 0,
                "chunk": {
                    "type": "tool-call-delta",
                    "index": 1,
                    "id": "c",
                    "argumentsDelta": "{",
                    "name": "n",
                },
            },
        },
        {
            "type": "assistant/chunk",
            "seq": 5,
            "time": 9,
            "data": {
                "turn": 0,
                "step": 0,
                "chunk": {
                    "type": "tool-call-delta",
                    "index": 1,
                    "id": "c",
                    "argumentsDelta": "}",
                    "name": "n",
                },
            },
        },
        {
            "type": "assistant/chunk",
            "seq": 6,
            "time": 9,
            "data": {
                "turn": 0,
                "step": 0,
                "chunk": {
                    "type": "tool-call-delta",
                    "index": 1,
                    "id": "c",
                    "argumentsDelta": "",
                    "name": "n",
                },
            },
        },
    ]
    assert [e["seq"] for e in events] == list(range(9))


def _swap(line: int, raw: bytes) -> list[bytes]:
    lines = [GOOD_HEADER, *GOOD_BODY]
    lines[line - 1] = raw
    return lines


BAD_LOGS = {
    "header with an unknown key": (
        1,
        GOOD_HEADER[:-1] + b',"title":"x"}',
        "unknown keys ['title']",
    ),
    "header without cwd": (
        1,
        b'{"type":"session","version":2,"id":"s1","createdAt":0}',
        "missing keys ['cwd']",
    ),
    "header with a bad id": (
        1,
        b'{"type":"session","version":2,"id":"../s","createdAt":0,"cwd":"/w"}',
        "not a valid session id",
    ),
    "header with a float version": (
        1,
        b'{"type":"session","version":2.0,"id":"s1","createdAt":0,"cwd":"/w"}',
        "version is not an integer",
    ),
    "event with an unknown key": (
        2,
        b'{"type":"turn/start","seq":0,"time":5,"data":{"turn":0},"x":1}',
        "unknown keys ['x']",
    ),
    "event without time": (
        2,
        b'{"type":"turn/start","seq":0,"data":{"turn":0}}',
        "missing keys ['time']",
    ),
    "event with a duplicate key": (
        2,
        b'{"type":"turn/start","seq":0,"seq":0,"time":5,"data":{"turn":0}}',
        "duplicate key",
    ),
    "event with ignorable false": (
        2,
        b'{"type":"turn/start","seq":0,"time":5,"data":{"turn":0},"ignorable":false}',
        "ignorable is present but not true",
    ),
    "event with an unsafe time": (
        2,
        b'{"type":"turn/start","seq":0,"time":9007199254740992,"data":{"turn":0}}',
        "time is not a safe integer",
    ),
    "event with NaN": (
        2,
        b'{"type":"turn/start","seq":0,"time":NaN,"data":{"turn":0}}',
        "NaN is not JSON",
    ),
    "event data with an unknown key": (
        2,
        b'{"type":"turn/start","seq":0,"time":5,"data":{"turn":0,"step":0}}',
        "unknown keys ['step']",
    ),
    "unknown type not ignorable": (
        6,
        b'{"type":"future/x","seq":8,"time":9,"data":null}',
        "not ignorable",
    ),
    "row with a short dt": (
        3,
        GOOD_BODY[1].replace(b"[1,-1]", b"[1]"),
        "dt has 1 entries for 3 members",
    ),
    "row with no fragments": (
        3,
        GOOD_BODY[1].replace(b'"dt":[1,-1],"texts":["a","","c"]', b'"dt":[],"texts":[]'),
        "fragments are not a non-empty list",
    ),
    "row with a non-string fragment": (
        3,
        GOOD_BODY[1].replace(b'"c"]', b"3]"),
        "a fragment is not a string",
    ),
    "text row with a name": (
        3,
        GOOD_BODY[1].replace(b'"index":0', b'"index":0,"name":"n"'),
        "unknown keys ['name']",
    ),
    "tool row without an id": (
        4,
        GOOD_BODY[2].replace(b'"id":"c",', b""),
        "missing keys ['id']",
    ),
    "row with seq instead of seq0": (
        3,
        GOOD_BODY[1].replace(b'"seq0"', b'"seq"'),
        "missing keys ['seq0']",
    ),
    "seq gap after a row": (
        5,
        GOOD_BODY[3].replace(b'"seq":7', b'"seq":8'),
        "seq 8 where 7 was due",
    ),
    "sourceRange after the event": (
        5,
        GOOD_BODY[3].replace(b"[4,4]", b"[4,7]"),
        "sourceRange is not",
    ),
}


@pytest.mark.parametrize(("line", "raw", "reason"), BAD_LOGS.values(), ids=BAD_LOGS.keys())
def test_decoder_rejects_each_broken_rule(
    tmp_path: Path, line: int, raw: bytes, reason: str
) -> None:
    """Line `line` of the good log replaced by `raw` is refused, naming that line and rule."""
    with pytest.raises(spec_reader.SpecViolation) as caught:
        _read(tmp_path, _swap(line, raw))
    assert caught.value.line == line
    assert reason in caught.value.reason


def test_decoder_rejects_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(GOOD_HEADER + b"\n" + GOOD_BODY[0])
    with pytest.raises(spec_reader.SpecViolation) as caught:
        spec_reader.read_log(path)
    assert caught.value.line == 2


def test_decoder_rejects_a_zstd_frame_without_checksum(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor(write_checksum=False).compress(GOOD_HEADER + b"\n"))
    with pytest.raises(spec_reader.SpecViolation, match="without a checksum"):
        spec_reader.read_log(path)
