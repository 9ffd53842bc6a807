"""The shared test vectors of the history decoder (SPEC 2.1, 3.1): `tests/vectors/chunk_rows.json`.

Both clients decode `session.page` records with their own code: the Python codec
(`acp_server.core.history.expand_history_records`) and the browser module
(`acp_server/web/decode.js`, `decodeRecords`). This file's vectors are what keeps them equal:

- `decodes`: records as the server sends them (events packed canonically by `pack_chunk_runs`,
  and a few hand-made rows), with the exact events they stand for;
- `paged`: a session's log and every page of it, newest first, cut and packed by the server's
  own paging (`EventLog.page`, rows clipped at page boundaries): a journal that starts from the
  first and prepends the others holds the log;
- `refuses`: malformed records, each with the `HistoryProtocolError` message it must raise;
- `beyondJavaScript`: rows the Python codec accepts whose integers a JavaScript number cannot
  hold exactly (beyond 2**53 - 1), which the browser client refuses instead of rounding;
- `knownEventTypes`: the event types a reader knows (SPEC 1.2): any other type must be ignorable.

The outputs are computed with the Python codec; `tests/test_chunk_row_vectors.py` checks that the
file is what this script makes. Regenerate with `python tests/chunk_row_vectors.py`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec

from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.event_log import EventLog
from acp_server.core.events import KNOWN_EVENT_TYPES, SessionEvent, convert_event
from acp_server.core.history import (
    HistoryProtocolError,
    expand_history_records,
    to_history_records,
)
from acp_server.core.structs import MAX_SAFE_INTEGER

VECTORS = Path(__file__).parent / "vectors" / "chunk_rows.json"

Json = Any


# ---------------------------------------------------------------------------------------------
# Events, as parsed JSON.


def event(type_: str, seq: int, time: int, data: Json, **extra: Json) -> Json:
    return {"type": type_, "seq": seq, "time": time, "data": data, **extra}


def delta(kind: str, seq: int, time: int, text: str, index: int = 0, turn: int = 0) -> Json:
    chunk = {"type": kind, "index": index, "text": text}
    return event("assistant/chunk", seq, time, {"turn": turn, "step": 0, "chunk": chunk})


def tool_delta(seq: int, time: int, args: str, name: str | None = None) -> Json:
    chunk: Json = {"type": "tool-call-delta", "index": 1, "id": "call-1", "argumentsDelta": args}
    if name is not None:
        chunk["name"] = name
    return event("assistant/chunk", seq, time, {"turn": 0, "step": 0, "chunk": chunk})


def deltas(kind: str, seq0: int, times: list[int], texts: list[str], index: int = 0) -> list[Json]:
    return [
        delta(kind, seq0 + k, time, text, index)
        for k, (time, text) in enumerate(zip(times, texts, strict=True))
    ]


def packed(events: list[Json]) -> list[Json]:
    """The events as `session.page` sends them: canonically packed, through JSON."""
    typed = [convert_event(value) for value in events]
    return msgspec.json.decode(msgspec.json.encode(to_history_records(pack_chunk_runs(typed))))


def chunk_record(kind: str, seq0: int, time0: int, data: Json) -> Json:
    return {"chunks": {"type": kind, "seq0": seq0, "time0": time0, "data": data}}


# ---------------------------------------------------------------------------------------------
# Records that decode.

TURN = [
    event("turn/start", 0, 1_000, {"turn": 0}),
    event(
        "user/message",
        1,
        1_001,
        {"turn": 0, "message": {"id": "u0", "content": [{"type": "text", "text": "Hi"}]}},
    ),
    event("step/start", 2, 1_002, {"turn": 0, "step": 0}),
    event(
        "assistant/chunk",
        3,
        1_003,
        {
            "turn": 0,
            "step": 0,
            "chunk": {"type": "block-start", "index": 0, "blockType": "reasoning"},
        },
    ),
    *deltas(
        "reasoning-delta", 4, [1_010, 1_011, 1_011, 1_030], ["The user", " greets", " me", "."]
    ),
    event(
        "assistant/chunk",
        8,
        1_031,
        {"turn": 0, "step": 0, "chunk": {"type": "block-end", "index": 0}},
    ),
    *deltas(
        "text-delta",
        9,
        [1_040, 1_041, 1_045, 1_046, 1_050, 1_052],
        ["He", "llo", ",", " wor", "ld", "!"],
        index=1,
    ),
    event(
        "assistant/chunk",
        15,
        1_053,
        {"turn": 0, "step": 0, "chunk": {"type": "finish", "reason": "stop"}},
    ),
    event(
        "assistant/message",
        16,
        1_054,
        {
            "turn": 0,
            "step": 0,
            "message": {
                "id": "a0",
                "content": [
                    {"type": "reasoning", "text": "The user greets me."},
                    {"type": "text", "text": "Hello, world!"},
                ],
            },
        },
        sourceRange=[3, 15],
    ),
    event("step/end", 17, 1_055, {"turn": 0, "step": 0}),
    event("turn/end", 18, 1_056, {"turn": 0, "reason": {"kind": "completed"}}),
]

TOOL_CALL = [
    tool_delta(40, 5_000, '{"pa', name="read"),
    tool_delta(41, 5_001, 'th": ', name="read"),
    tool_delta(42, 5_001, '"a.txt"', name="read"),
    tool_delta(43, 5_002, "}", name="read"),
    # The same call's deltas without a name: a run of their own (name presence differs).
    tool_delta(44, 5_003, ""),
    tool_delta(45, 5_004, " "),
    tool_delta(46, 5_009, "\n"),
]

UNICODE = deltas(
    "text-delta",
    60,
    [7_000, 7_001, 7_002, 7_003, 7_004, 7_005, 7_006, 7_007],
    ["😀", "𝄞 clef", "e\u0301", "日本語", "", "\u2028\u2029", 'quote " and \\', "\x00\x1f\u00ff"],
)

SAFE_LIMITS = [
    delta("text-delta", MAX_SAFE_INTEGER - 2, -MAX_SAFE_INTEGER, "first"),
    delta("text-delta", MAX_SAFE_INTEGER - 1, 0, "second"),
    delta("text-delta", MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, "last"),
]

DECODES: list[tuple[str, list[Json]]] = [
    ("no records", []),
    ("a turn: a reasoning row and a text row between plain events", packed(TURN)),
    ("tool-call deltas: a named row, then a row without a name", packed(TOOL_CALL)),
    (
        "time gaps that go back and stay",
        packed(deltas("text-delta", 20, [900, 800, 800, 1_200, 1_199], ["a", "b", "c", "d", "e"])),
    ),
    (
        "a run of exactly three members is a row",
        packed(deltas("reasoning-delta", 30, [1, 2, 3], ["x", "y", "z"])),
    ),
    (
        "a run of two members stays plain events",
        packed(deltas("text-delta", 30, [1, 2], ["x", "y"])),
    ),
    (
        "runs of two blocks interleaved stay apart",
        packed(
            [
                *deltas("text-delta", 50, [1, 2, 3], ["a", "b", "c"], index=0),
                *deltas("text-delta", 53, [4, 5, 6], ["d", "e", "f"], index=1),
            ]
        ),
    ),
    ("astral characters, combining marks, empty and escaped fragments", packed(UNICODE)),
    ("seqs and times at the ends of the safe-integer range", packed(SAFE_LIMITS)),
    (
        "a hand-made row whose gaps the packer would not join is still decoded",
        [
            chunk_record(
                "text-chunks",
                5,
                -MAX_SAFE_INTEGER,
                {
                    "turn": 2,
                    "step": 3,
                    "index": 4,
                    "dt": [MAX_SAFE_INTEGER, MAX_SAFE_INTEGER],
                    "texts": ["a", "b", "c"],
                },
            )
        ],
    ),
    (
        "plain events with ignorable and unknown-but-ignorable types pass through",
        [
            {"event": event("turn/start", 0, 0, {"turn": 0}, ignorable=True)},
            {"event": event("future/thing", 1, 0, {"anything": [1, "two"]}, ignorable=True)},
            {"event": event("future/thing", 2, 0, None, ignorable=True, sourceRange=[0, 1])},
        ],
    ),
]


# ---------------------------------------------------------------------------------------------
# A session's log paged by the server's own paging, newest page first.


def _turn(turn: int) -> list[Json]:
    """One turn's events, seqs and times to be given: a step that thinks, says and calls a
    tool, then a step that answers."""
    call_id, arguments = f"call-{turn}", '{"path": "a.txt"}'
    thinking = ["Let", " me", " read", " the", " file", " 😀"]
    saying = ["I", "'ll", " look", "."]
    argument_parts = ['{"pa', 'th":', ' "a.', 'txt"}']
    answer = ["It", " says", " hé", "llo", "!"]
    chunk = lambda step, value: ("assistant/chunk", {"turn": turn, "step": step, "chunk": value})  # noqa: E731
    events: list[tuple[str, Json]] = [
        ("turn/start", {"turn": turn}),
        (
            "user/message",
            {
                "turn": turn,
                "message": {
                    "id": f"u{turn}",
                    "content": [{"type": "text", "text": "What is in a.txt?"}],
                },
            },
        ),
        ("step/start", {"turn": turn, "step": 0}),
        *[chunk(0, {"type": "reasoning-delta", "index": 0, "text": text}) for text in thinking],
        *[chunk(0, {"type": "text-delta", "index": 1, "text": text}) for text in saying],
        *[
            chunk(
                0,
                {
                    "type": "tool-call-delta",
                    "index": 2,
                    "id": call_id,
                    "argumentsDelta": part,
                    "name": "read",
                },
            )
            for part in argument_parts
        ],
        chunk(0, {"type": "finish", "reason": "tool-calls"}),
    ]
    first_chunk = len(events) - len(thinking) - len(saying) - len(argument_parts) - 1
    return [
        *events,
        (
            "assistant/message",
            {
                "turn": turn,
                "step": 0,
                "message": {
                    "id": f"a{turn}.0",
                    "content": [
                        {"type": "reasoning", "text": "".join(thinking)},
                        {"type": "text", "text": "".join(saying)},
                        {
                            "type": "tool-call",
                            "id": call_id,
                            "name": "read",
                            "arguments": arguments,
                        },
                    ],
                },
            },
            [first_chunk, len(events) - 1],
        ),
        (
            "tool/call",
            {"turn": turn, "step": 0, "callId": call_id, "name": "read", "arguments": arguments},
        ),
        (
            "tool/result",
            {
                "turn": turn,
                "step": 0,
                "callId": call_id,
                "content": [{"type": "text", "text": "hello"}],
            },
            [len(events) + 1, len(events) + 1],
        ),
        ("step/end", {"turn": turn, "step": 0}),
        ("step/start", {"turn": turn, "step": 1}),
        *[chunk(1, {"type": "text-delta", "index": 0, "text": text}) for text in answer],
        (
            "assistant/message",
            {
                "turn": turn,
                "step": 1,
                "message": {
                    "id": f"a{turn}.1",
                    "content": [{"type": "text", "text": "".join(answer)}],
                },
            },
            [len(events) + 5, len(events) + 9],
        ),
        ("step/end", {"turn": turn, "step": 1}),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
    ]


def session_log(turns: int) -> list[Json]:
    """A session of `turns` turns, as parsed JSON events (source ranges made absolute)."""
    log: list[Json] = []
    for turn in range(turns):
        base = len(log)
        for type_, data, *source_range in _turn(turn):
            extra = (
                {"sourceRange": [base + source_range[0][0], base + source_range[0][1]]}
                if source_range
                else {}
            )
            log.append(
                event(type_, len(log), 10_000 + 7 * len(log) - (len(log) % 3), data, **extra)
            )
    return log


def pages(events: list[Json], max_messages: int) -> list[Json]:
    """Every `session.page` of the log, newest first, as the server cuts and sends them."""
    log = EventLog(pack_chunk_runs([convert_event(value) for value in events]))
    out: list[Json] = []
    end = len(events)
    while True:
        cut, records = log.page(end, max_messages)
        wire = msgspec.json.decode(msgspec.json.encode(to_history_records(records)))
        out.append({"records": wire, "hasMore": cut.has_more})
        if not cut.has_more:
            return out
        end = cut.start


PAGED = [("three turns, one message a page", 3, 1), ("three turns, three messages a page", 3, 3)]


# ---------------------------------------------------------------------------------------------
# Records that are refused.

TEXT_ROW = chunk_record(
    "text-chunks",
    3,
    1_000,
    {"turn": 0, "step": 0, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]},
)
TOOL_ROW = chunk_record(
    "tool-call-chunks",
    3,
    1_000,
    {
        "turn": 0,
        "step": 0,
        "index": 1,
        "dt": [1, 1],
        "id": "c1",
        "name": "read",
        "args": ["{", '"a"', "}"],
    },
)
PLAIN = {"event": event("turn/start", 1, 0, {"turn": 0})}


def changed(record: Json, where: str, **changes: Json) -> Json:
    """`record` with `changes` set in its row (`where="row"`), its row's data, or its event;
    a change to `...` removes the key."""
    record = copy.deepcopy(record)
    target = {
        "row": record.get("chunks"),
        "data": (record.get("chunks") or {}).get("data"),
        "event": record.get("event"),
    }[where]
    for key, value in changes.items():
        key = key.rstrip("_")
        if value is ...:
            del target[key]
        else:
            target[key] = value
    return record


REFUSES: list[tuple[str, Json]] = [
    ("a record that is not an object", 1),
    ("a record with neither event nor chunks", {"rows": []}),
    ("a record with both event and chunks", {**PLAIN, **TEXT_ROW}),
    ("a row that is not an object", {"chunks": 5}),
    ("a row that is an array", {"chunks": []}),
    ("a row without a type", changed(TEXT_ROW, "row", type_=...)),
    ("a row with an unknown type", changed(TEXT_ROW, "row", type_="text/chunks")),
    ("a row whose type is not a string", changed(TEXT_ROW, "row", type_=5)),
    ("a row with an extra key", changed(TEXT_ROW, "row", extra=1)),
    ("a row without seq0", changed(TEXT_ROW, "row", seq0=...)),
    ("a row without data", changed(TEXT_ROW, "row", data=...)),
    ("a negative seq0", changed(TEXT_ROW, "row", seq0=-1)),
    ("a fractional seq0", changed(TEXT_ROW, "row", seq0=1.5)),
    ("a boolean seq0", changed(TEXT_ROW, "row", seq0=True)),
    ("a string seq0", changed(TEXT_ROW, "row", seq0="3")),
    ("a seq0 beyond the safe-integer range", changed(TEXT_ROW, "row", seq0=MAX_SAFE_INTEGER + 1)),
    ("a time0 above the safe-integer range", changed(TEXT_ROW, "row", time0=MAX_SAFE_INTEGER + 1)),
    ("a time0 below the safe-integer range", changed(TEXT_ROW, "row", time0=-MAX_SAFE_INTEGER - 1)),
    ("a null time0", changed(TEXT_ROW, "row", time0=None)),
    ("data that is not an object", changed(TEXT_ROW, "row", data=[])),
    ("data with an extra key", changed(TEXT_ROW, "data", extra=1)),
    ("text data with a tool call's args", changed(TEXT_ROW, "data", args=["x"])),
    ("data without dt", changed(TEXT_ROW, "data", dt=...)),
    ("data without texts", changed(TEXT_ROW, "data", texts=...)),
    ("data without a turn", changed(TEXT_ROW, "data", turn=...)),
    ("a string turn", changed(TEXT_ROW, "data", turn="0")),
    ("a fractional step", changed(TEXT_ROW, "data", step=0.5)),
    ("a null index", changed(TEXT_ROW, "data", index=None)),
    ("empty texts", changed(TEXT_ROW, "data", texts=[], dt=[])),
    ("texts holding a number", changed(TEXT_ROW, "data", texts=["a", 1, "c"])),
    ("texts holding null", changed(TEXT_ROW, "data", texts=["a", "b", None])),
    ("texts that are a string", changed(TEXT_ROW, "data", texts="abc")),
    ("dt with too few entries", changed(TEXT_ROW, "data", dt=[1])),
    ("dt with too many entries", changed(TEXT_ROW, "data", dt=[1, 1, 1])),
    ("dt with entries for a single member", changed(TEXT_ROW, "data", texts=["a"], dt=[1])),
    ("dt holding a fraction", changed(TEXT_ROW, "data", dt=[1, 1.5])),
    ("dt holding null", changed(TEXT_ROW, "data", dt=[1, None])),
    ("dt that is a string", changed(TEXT_ROW, "data", dt="11")),
    (
        "the last member's seq beyond the safe-integer range",
        changed(TEXT_ROW, "row", seq0=MAX_SAFE_INTEGER - 1),
    ),
    (
        "the last member's time above the safe-integer range",
        changed(TEXT_ROW, "row", time0=MAX_SAFE_INTEGER - 1),
    ),
    (
        "a middle member's time below the safe-integer range",
        changed(changed(TEXT_ROW, "row", time0=-MAX_SAFE_INTEGER), "data", dt=[-1, 1]),
    ),
    (
        "a middle member's time above the range, the last back inside",
        changed(changed(TEXT_ROW, "row", time0=MAX_SAFE_INTEGER), "data", dt=[1, -5]),
    ),
    (
        "a reasoning row with an extra key",
        changed(changed(TEXT_ROW, "row", type_="reasoning-chunks"), "data", id="x"),
    ),
    ("a tool-call row without an id", changed(TOOL_ROW, "data", id=...)),
    ("a tool-call row with a numeric id", changed(TOOL_ROW, "data", id=7)),
    ("a tool-call row with a null name", changed(TOOL_ROW, "data", name=None)),
    ("a tool-call row with texts", changed(TOOL_ROW, "data", texts=["a"])),
    ("a tool-call row with empty args", changed(TOOL_ROW, "data", args=[], dt=[])),
    ("a tool-call row with an object in args", changed(TOOL_ROW, "data", args=["a", "b", {}])),
    ("a tool-call row with too few dt", changed(TOOL_ROW, "data", dt=[])),
    ("an event that is not an object", {"event": 3}),
    ("an event without a type", changed(PLAIN, "event", type_=...)),
    ("an event whose type is not a string", changed(PLAIN, "event", type_=3)),
    ("an event without a seq", changed(PLAIN, "event", seq=...)),
    ("an event without a time", changed(PLAIN, "event", time=...)),
    ("an event without data", changed(PLAIN, "event", data=...)),
    ("an event with a negative seq", changed(PLAIN, "event", seq=-1)),
    ("an event with a fractional seq", changed(PLAIN, "event", seq=1.5)),
    (
        "an event with a time beyond the safe-integer range",
        changed(PLAIN, "event", time=MAX_SAFE_INTEGER + 1),
    ),
    ("an event with a string time", changed(PLAIN, "event", time="0")),
    ("an event with an extra key", changed(PLAIN, "event", x=1)),
    ("a known event whose data is not an object", changed(PLAIN, "event", data=3)),
    ("an event with ignorable false", changed(PLAIN, "event", ignorable=False)),
    ("an event with a numeric ignorable", changed(PLAIN, "event", ignorable=1)),
    ("an event whose sourceRange is not an array", changed(PLAIN, "event", sourceRange=3)),
    ("an event whose sourceRange has one seq", changed(PLAIN, "event", sourceRange=[1])),
    ("an event whose sourceRange has three seqs", changed(PLAIN, "event", sourceRange=[1, 2, 3])),
    (
        "an event whose sourceRange holds a negative seq",
        changed(PLAIN, "event", sourceRange=[1, -1]),
    ),
    ("an event whose sourceRange holds a string", changed(PLAIN, "event", sourceRange=[1, "a"])),
    ("an unknown event type not marked ignorable", changed(PLAIN, "event", type_="future/x")),
    (
        "an unknown event type marked ignorable false",
        changed(PLAIN, "event", type_="future/x", ignorable=False),
    ),
    ("a row's tag as an event type", {"event": TEXT_ROW["chunks"]}),
    (
        "an ignorable unknown event with an extra key",
        changed(PLAIN, "event", type_="future/x", ignorable=True, zz=1),
    ),
    (
        "an ignorable unknown event without a seq",
        changed(PLAIN, "event", type_="future/x", ignorable=True, seq=...),
    ),
]


# ---------------------------------------------------------------------------------------------
# Rows whose integers only Python holds exactly.

BEYOND_JAVASCRIPT: list[tuple[str, Json]] = [
    ("a turn beyond the safe-integer range", changed(TEXT_ROW, "data", turn=2**60 + 1)),
    (
        "an index beyond the safe-integer range",
        changed(TOOL_ROW, "data", index=MAX_SAFE_INTEGER + 2),
    ),
    (
        "a time gap beyond the safe-integer range, the members' times inside it",
        changed(
            changed(TEXT_ROW, "row", time0=-MAX_SAFE_INTEGER), "data", dt=[MAX_SAFE_INTEGER + 2, 0]
        ),
    ),
]


def as_json(events: list[SessionEvent]) -> list[Json]:
    """Events as parsed JSON values."""
    return msgspec.json.decode(msgspec.json.encode(events))


def _decoded(records: list[Json]) -> list[Json]:
    return as_json(expand_history_records(records))


def _refusal(record: Json) -> str:
    try:
        expand_history_records([PLAIN, record])
    except HistoryProtocolError as exc:
        return str(exc)
    raise AssertionError(f"the Python codec accepts {record!r}")


def build() -> Json:
    """The vectors, their outputs computed by the Python codec."""
    return {
        "knownEventTypes": sorted(KNOWN_EVENT_TYPES),
        "decodes": [
            {"name": name, "records": records, "events": _decoded(records)}
            for name, records in DECODES
        ],
        # Each malformed record is the second of its page, after a good one: the error names
        # its position, and nothing of the page is returned.
        "refuses": [
            {"name": name, "records": [PLAIN, record], "error": _refusal(record)}
            for name, record in REFUSES
        ],
        # Pages of one log: the first a journal starts from, each next one prepended.
        "paged": [
            {"name": name, "events": session_log(turns), "pages": pages(session_log(turns), size)}
            for name, turns, size in PAGED
        ],
        "beyondJavaScript": [
            {"name": name, "records": [record], "events": _decoded([record])}
            for name, record in BEYOND_JAVASCRIPT
        ],
    }


def render(vectors: Json) -> str:
    """The file's text: one line per record, event or page record, so that diffs stay legible."""

    def one(value: Json) -> str:
        return json.dumps(value, ensure_ascii=False)

    def items(values: list[Json], indent: str) -> str:
        if not values:
            return "[]"
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + one(v) for v in values) + "\n" + indent + "]"

    def vector(value: Json) -> str:
        fields = []
        for key, field in value.items():
            if key == "pages":
                pages = ",\n".join(
                    f'      {{"hasMore": {one(page["hasMore"])}, "records": {items(page["records"], "      ")}}}'
                    for page in field
                )
                fields.append(f'    "pages": [\n{pages}\n    ]')
            elif isinstance(field, list):
                fields.append(f"    {one(key)}: {items(field, '    ')}")
            else:
                fields.append(f"    {one(key)}: {one(field)}")
        return "  {\n" + ",\n".join(fields) + "\n  }"

    sections = []
    for key, value in vectors.items():
        if key == "knownEventTypes":
            sections.append(f" {one(key)}: {one(value)}")
        else:
            body = ",\n".join(vector(v) for v in value)
            sections.append(f" {one(key)}: [\n{body}\n ]")
    return "{\n" + ",\n".join(sections) + "\n}\n"


def main() -> None:
    VECTORS.parent.mkdir(exist_ok=True)
    VECTORS.write_text(render(build()), encoding="utf-8")
    print(f"wrote {VECTORS}")


if __name__ == "__main__":
    main()
