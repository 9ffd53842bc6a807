"""The packed chunk-row codec (SPEC 2.1): lossless, canonical packing and strict row decoding.

Property tests draw realistic event streams (see `strategies.py`); focused examples pin each
eligibility rule of packing and each rejection rule of decoding.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET
from strategies import batch_cuts, session_events, split

from acp_server.core.chunk_rows import (
    MIN_RUN,
    ChunkRowError,
    ReasoningChunks,
    StorageRecord,
    TextChunks,
    TextChunksData,
    ToolCallChunks,
    ToolCallChunksData,
    decode_record_json,
    decode_storage_record,
    pack_chunk_runs,
)
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    EventError,
    SessionEvent,
    StepData,
    StepStart,
    encode_event,
)
from acp_server.core.stream import BlockEnd, ReasoningDelta, TextDelta, ToolCallDelta
from acp_server.core.structs import MAX_SAFE_INTEGER

MAX = MAX_SAFE_INTEGER

# ---------------------------------------------------------------------------------------------
# Helpers.


def text(
    seq: int, time: int, fragment: str, *, turn: int = 0, step: int = 0, index: int = 0
) -> AssistantChunk:
    return AssistantChunk(seq, time, AssistantChunkData(turn, step, TextDelta(index, fragment)))


def reasoning(seq: int, time: int, fragment: str, *, index: int = 0) -> AssistantChunk:
    return AssistantChunk(seq, time, AssistantChunkData(0, 0, ReasoningDelta(index, fragment)))


def tool(
    seq: int, time: int, fragment: str, *, id: str = "call_1", name: Any = UNSET, index: int = 0
) -> AssistantChunk:
    chunk = ToolCallDelta(index, id, fragment, name)
    return AssistantChunk(seq, time, AssistantChunkData(0, 0, chunk))


def texts(count: int, *, seq0: int = 0, time0: int = 0) -> list[AssistantChunk]:
    """`count` text deltas of one block, one millisecond apart."""
    return [text(seq0 + k, time0 + k, f"t{k}") for k in range(count)]


def text_row(seq0: int, time0: int, dt: list[int], fragments: list[str]) -> TextChunks:
    return TextChunks(seq0, time0, TextChunksData(0, 0, 0, dt, fragments))


def decode_all(records: Iterable[Any]) -> list[SessionEvent]:
    return [event for record in records for event in decode_storage_record(record)]


def encoded(items: Iterable[Any]) -> list[bytes]:
    return [msgspec.json.encode(item) for item in items]


def members(events: Sequence[AssistantChunk], *positions: int) -> list[AssistantChunk]:
    return [events[p] for p in positions]


def replace_chunk(event: AssistantChunk, **changes: Any) -> AssistantChunk:
    chunk = msgspec.structs.replace(event.data.chunk, **changes)
    return msgspec.structs.replace(event, data=msgspec.structs.replace(event.data, chunk=chunk))


# ---------------------------------------------------------------------------------------------
# Properties.


@given(session_events())
def test_decoding_the_packed_records_gives_back_exactly_the_events(
    events: list[SessionEvent],
) -> None:
    decoded = decode_all(pack_chunk_runs(events))
    assert decoded == events
    assert encoded(decoded) == encoded(events)


@given(session_events())
def test_packed_records_round_trip_through_json_lines(events: list[SessionEvent]) -> None:
    lines = encoded(pack_chunk_runs(events))
    from_structs = decode_all(decode_record_json(line) for line in lines)
    from_dicts = decode_all(msgspec.json.decode(line) for line in lines)
    assert encoded(from_structs) == encoded(events)
    assert encoded(from_dicts) == encoded(events)
    assert from_structs == events


@given(session_events())
def test_packing_the_decoding_of_packed_records_gives_the_same_records(
    events: list[SessionEvent],
) -> None:
    records = pack_chunk_runs(events)
    assert pack_chunk_runs(decode_all(records)) == records
    assert encoded(pack_chunk_runs(decode_all(records))) == encoded(records)


@given(st.data())
def test_repacking_records_written_in_batches_gives_the_canonical_records(
    data: st.DataObject,
) -> None:
    events = data.draw(session_events())
    batches = split(events, data.draw(batch_cuts(len(events))))
    written = [record for batch in batches for record in pack_chunk_runs(batch)]
    assert decode_all(written) == events
    assert pack_chunk_runs(decode_all(written)) == pack_chunk_runs(events)


@given(st.data())
def test_repacking_rebatched_records_gives_the_canonical_records(data: st.DataObject) -> None:
    events = data.draw(session_events())
    records = pack_chunk_runs(events)
    batches = split(records, data.draw(batch_cuts(len(records))))
    rewritten = [record for batch in batches for record in pack_chunk_runs(decode_all(batch))]
    assert rewritten == records


@given(session_events())
def test_packing_is_idempotent(events: list[SessionEvent]) -> None:
    records = pack_chunk_runs(events)
    assert pack_chunk_runs(records) == records


@given(session_events())
def test_every_row_holds_at_least_min_run_members(events: list[SessionEvent]) -> None:
    for record in pack_chunk_runs(events):
        if isinstance(record, ToolCallChunks):
            assert len(record.data.args) >= MIN_RUN
        elif isinstance(record, (TextChunks, ReasoningChunks)):
            assert len(record.data.texts) >= MIN_RUN


# ---------------------------------------------------------------------------------------------
# Row shapes.


def test_a_run_of_three_text_deltas_becomes_one_row() -> None:
    events = [text(5, 100, "He"), text(6, 100, "llo"), text(7, 97, "")]
    [row] = pack_chunk_runs(events)
    assert row == TextChunks(5, 100, TextChunksData(0, 0, 0, [0, -3], ["He", "llo", ""]))
    assert msgspec.json.encode(row) == (
        b'{"type":"text-chunks","seq0":5,"time0":100,'
        b'"data":{"turn":0,"step":0,"index":0,"dt":[0,-3],"texts":["He","llo",""]}}'
    )


def test_a_run_of_three_reasoning_deltas_becomes_one_row() -> None:
    events = [reasoning(0, 0, " "), reasoning(1, 1, "\n"), reasoning(2, 2, "ü")]
    [row] = pack_chunk_runs(events)
    assert msgspec.json.encode(row) == (
        b'{"type":"reasoning-chunks","seq0":0,"time0":0,'
        b'"data":{"turn":0,"step":0,"index":0,"dt":[1,1],"texts":[" ","\\n","\xc3\xbc"]}}'
    )


def test_a_named_tool_call_run_keeps_its_name_in_the_row() -> None:
    events = [tool(k, 0, f, name="read_file") for k, f in enumerate(['{"', "a", '"}'])]
    [row] = pack_chunk_runs(events)
    assert msgspec.json.encode(row) == (
        b'{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,'
        b'"dt":[0,0],"id":"call_1","name":"read_file","args":["{\\"","a","\\"}"]}}'
    )
    assert encoded(decode_storage_record(row)) == encoded(events)


def test_an_unnamed_tool_call_run_has_no_name_key_in_the_row() -> None:
    events = [tool(k, 0, f) for k, f in enumerate(["{", "", "}"])]
    [row] = pack_chunk_runs(events)
    assert msgspec.json.encode(row) == (
        b'{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":0,"step":0,"index":0,'
        b'"dt":[0,0],"id":"call_1","args":["{","","}"]}}'
    )
    assert [e.data.chunk.name for e in decode_storage_record(row)] == [UNSET, UNSET, UNSET]


@pytest.mark.parametrize(
    ("make", "row_type"),
    [
        (lambda k: text(k, k // 7, "wörd "[k % 5]), TextChunks),
        (lambda k: reasoning(k, k // 7, " \n"[k % 2]), ReasoningChunks),
        (lambda k: tool(k, k // 7, '{"a":1}'[k % 7], name="read_file"), ToolCallChunks),
    ],
    ids=["text", "reasoning", "tool-call"],
)
def test_a_long_single_block_run_packs_to_exactly_one_record(
    make: Callable[[int], AssistantChunk], row_type: type
) -> None:
    events = [make(k) for k in range(20_000)]
    records = pack_chunk_runs(events)
    assert len(records) == 1
    assert type(records[0]) is row_type
    assert decode_all(records) == events


@pytest.mark.parametrize("count", [1, 2])
def test_runs_shorter_than_three_stay_plain(count: int) -> None:
    events = texts(count)
    assert pack_chunk_runs(events) == events


def test_short_runs_between_other_events_stay_plain_and_in_place() -> None:
    step = StepStart(2, 0, StepData(0, 0))
    events = [text(0, 0, "a"), text(1, 0, "b"), step, text(3, 0, "c")]
    assert pack_chunk_runs(events) == events


def test_packing_an_empty_stream_gives_no_records() -> None:
    assert pack_chunk_runs([]) == []


# ---------------------------------------------------------------------------------------------
# Eligibility and run boundaries.


@pytest.mark.parametrize(
    "envelope",
    [{"ignorable": True}, {"source_range": (0, 2)}],
    ids=["ignorable", "sourceRange"],
)
def test_a_delta_with_an_extra_envelope_key_stays_plain_and_splits_the_run(
    envelope: dict[str, Any],
) -> None:
    events = texts(7)
    events[3] = msgspec.structs.replace(events[3], **envelope)
    assert pack_chunk_runs(events) == [
        text_row(0, 0, [1, 1], ["t0", "t1", "t2"]),
        events[3],
        text_row(4, 4, [1, 1], ["t4", "t5", "t6"]),
    ]


def test_a_non_delta_chunk_stays_plain_and_splits_the_run() -> None:
    events: list[AssistantChunk] = texts(7)
    events[3] = AssistantChunk(3, 3, AssistantChunkData(0, 0, BlockEnd(0)))
    assert pack_chunk_runs(events) == [
        text_row(0, 0, [1, 1], ["t0", "t1", "t2"]),
        events[3],
        text_row(4, 4, [1, 1], ["t4", "t5", "t6"]),
    ]


def test_a_seq_jump_ends_the_run() -> None:
    events = texts(3) + texts(3, seq0=10, time0=3)
    assert pack_chunk_runs(events) == [
        text_row(0, 0, [1, 1], ["t0", "t1", "t2"]),
        text_row(10, 3, [1, 1], ["t0", "t1", "t2"]),
    ]


@pytest.mark.parametrize("field", ["turn", "step", "index"])
def test_a_different_turn_step_or_index_ends_the_run(field: str) -> None:
    first = [text(k, 0, "a") for k in range(3)]
    second = [text(k, 0, "b", **{field: 1}) for k in range(3, 6)]
    records = pack_chunk_runs(first + second)
    assert [(type(r), r.seq0) for r in records] == [(TextChunks, 0), (TextChunks, 3)]
    assert getattr(records[1].data, field) == 1


def test_a_different_chunk_type_ends_the_run() -> None:
    events = [text(0, 0, "a"), text(1, 0, "b"), text(2, 0, "c")]
    events += [reasoning(3, 0, "d"), reasoning(4, 0, "e"), reasoning(5, 0, "f")]
    assert [(type(r), r.seq0) for r in pack_chunk_runs(events)] == [  # type: ignore[union-attr]  # pack_chunk_runs gave rows here
        (TextChunks, 0),
        (ReasoningChunks, 3),
    ]


def test_a_different_tool_call_id_ends_the_run() -> None:
    events = [tool(k, 0, "x", id="call_1") for k in range(3)]
    events += [tool(k, 0, "y", id="call_2") for k in range(3, 6)]
    records = pack_chunk_runs(events)
    assert [r.data.id for r in records] == ["call_1", "call_2"]  # type: ignore[union-attr]  # pack_chunk_runs gave rows here


def test_a_name_present_on_some_members_only_ends_the_run() -> None:
    events = [tool(k, 0, "x", name="read_file") for k in range(3)]
    events += [tool(k, 0, "y") for k in range(3, 6)]
    records = pack_chunk_runs(events)
    assert [r.data.name for r in records] == ["read_file", UNSET]  # type: ignore[union-attr]  # pack_chunk_runs gave rows here


def test_a_name_on_the_first_delta_only_leaves_it_plain_before_the_row() -> None:
    events = [tool(0, 0, "{", name="read_file")] + [tool(k, 0, "x") for k in range(1, 5)]
    assert pack_chunk_runs(events) == [
        events[0],
        ToolCallChunks(
            1,
            0,
            ToolCallChunksData(turn=0, step=0, index=0, dt=[0, 0, 0], id="call_1", args=["x"] * 4),
        ),
    ]


def test_a_different_name_value_ends_the_run() -> None:
    events = [tool(k, 0, "x", name="read_file") for k in range(3)]
    events += [tool(k, 0, "y", name="write_file") for k in range(3, 6)]
    records = pack_chunk_runs(events)
    assert [r.data.name for r in records] == ["read_file", "write_file"]  # type: ignore[union-attr]  # pack_chunk_runs gave rows here


def test_a_time_gap_beyond_the_safe_range_ends_the_run() -> None:
    times = [-MAX, -MAX + 1, -MAX + 2, 3, 4, 5]
    events = [text(k, t, "a") for k, t in enumerate(times)]
    assert pack_chunk_runs(events) == [
        text_row(0, -MAX, [1, 1], ["a"] * 3),
        text_row(3, 3, [1, 1], ["a"] * 3),
    ]


def test_a_time_gap_of_exactly_the_safe_limit_continues_the_run() -> None:
    times = [-MAX, -MAX + 1, -MAX + 2, 2, 3]
    events = [text(k, t, "a") for k, t in enumerate(times)]
    assert pack_chunk_runs(events) == [text_row(0, -MAX, [1, 1, MAX, 1], ["a"] * 5)]


def test_negative_and_zero_time_gaps_continue_the_run() -> None:
    events = [text(k, t, "a") for k, t in enumerate([50, 50, 20, 21])]
    assert pack_chunk_runs(events) == [text_row(0, 50, [0, -30, 1], ["a"] * 4)]


# ---------------------------------------------------------------------------------------------
# Decoding: rejection rules. Each case runs on the parsed JSON object and on the JSON line.

TEXT_ROW: dict[str, Any] = {
    "type": "text-chunks",
    "seq0": 5,
    "time0": 100,
    "data": {"turn": 1, "step": 0, "index": 0, "dt": [1, 2], "texts": ["a", "b", "c"]},
}
REASONING_ROW: dict[str, Any] = {**copy.deepcopy(TEXT_ROW), "type": "reasoning-chunks"}
TOOL_ROW: dict[str, Any] = {
    "type": "tool-call-chunks",
    "seq0": 5,
    "time0": 100,
    "data": {
        "turn": 1,
        "step": 0,
        "index": 0,
        "dt": [1, 2],
        "id": "call_1",
        "name": "read_file",
        "args": ["{", "", "}"],
    },
}
ROWS = {"text": TEXT_ROW, "reasoning": REASONING_ROW, "tool-call": TOOL_ROW}
TEXT_ROWS = {"text": TEXT_ROW, "reasoning": REASONING_ROW}


def decode_parsed(value: dict[str, Any]) -> list[SessionEvent]:
    return decode_storage_record(value)


def decode_line(value: dict[str, Any]) -> list[SessionEvent]:
    return decode_storage_record(decode_record_json(msgspec.json.encode(value)))


Decoder = Callable[[dict[str, Any]], list[SessionEvent]]


@pytest.fixture(params=[decode_parsed, decode_line], ids=["parsed", "json-line"])
def decode(request: pytest.FixtureRequest) -> Decoder:
    return request.param  # type: ignore[no-any-return]  # params are Decoders


def changed(row: dict[str, Any], *path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `row` with the key at `path` set to `value`."""
    result = copy.deepcopy(row)
    target = result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return result


def removed(row: dict[str, Any], *path: str) -> dict[str, Any]:
    """A deep copy of `row` without the key at `path`."""
    result = copy.deepcopy(row)
    target = result
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return result


def assert_rejected(decode: Decoder, row: dict[str, Any], detail: str) -> None:
    """The row is refused with a `ChunkRowError` naming it (type and seq0) and saying why."""
    before = copy.deepcopy(row)
    with pytest.raises(ChunkRowError) as info:
        decode(row)
    name = f"{row['type']} row (seq0={row.get('seq0', '?')!r})"
    message = str(info.value)
    assert message.startswith(f"{name}: "), message
    assert detail in message, message
    assert row == before


@pytest.mark.parametrize("kind", ROWS)
def test_a_valid_row_decodes_to_its_members(decode: Decoder, kind: str) -> None:
    events = decode(ROWS[kind])
    assert [(e.seq, e.time) for e in events] == [(5, 100), (6, 101), (7, 103)]
    assert pack_chunk_runs(events) == [decode_record_json(msgspec.json.encode(ROWS[kind]))]


def test_a_tool_call_row_without_name_decodes_to_unnamed_members(decode: Decoder) -> None:
    events = decode(removed(TOOL_ROW, "data", "name"))
    assert [e.data.chunk.name for e in events] == [UNSET, UNSET, UNSET]  # type: ignore[union-attr]  # the members of a tool-call row


@pytest.mark.parametrize("key", ["ignorable", "seq", "sourceRange"])
def test_a_row_with_an_extra_key_is_rejected(decode: Decoder, key: str) -> None:
    assert_rejected(decode, changed(TEXT_ROW, key, value=True), f"unknown field `{key}`")


@pytest.mark.parametrize("key", ["seq0", "time0", "data"])
def test_a_row_missing_a_key_is_rejected(decode: Decoder, key: str) -> None:
    assert_rejected(decode, removed(TEXT_ROW, key), f"missing required field `{key}`")


@pytest.mark.parametrize("seq0", [-1, -MAX], ids=["minus-one", "minus-max"])
def test_a_negative_seq0_is_rejected(decode: Decoder, seq0: int) -> None:
    assert_rejected(decode, changed(TEXT_ROW, "seq0", value=seq0), "`$.seq0`")


@pytest.mark.parametrize("seq0", [5.0, 5.5, "5", True, None], ids=repr)
def test_a_non_integer_seq0_is_rejected(decode: Decoder, seq0: Any) -> None:
    assert_rejected(decode, changed(TEXT_ROW, "seq0", value=seq0), "`$.seq0`")


def test_a_seq0_beyond_the_safe_range_is_rejected(decode: Decoder) -> None:
    assert_rejected(decode, changed(TEXT_ROW, "seq0", value=MAX + 1), "`$.seq0`")


@pytest.mark.parametrize("time0", [MAX + 1, -MAX - 1, 2**64, 1.5, "100"], ids=repr)
def test_a_time0_that_is_not_a_safe_integer_is_rejected(decode: Decoder, time0: Any) -> None:
    assert_rejected(decode, changed(TEXT_ROW, "time0", value=time0), "`$.time0`")


@pytest.mark.parametrize(
    ("kind", "key"),
    [
        ("text", "name"),
        ("text", "args"),
        ("reasoning", "id"),
        ("tool-call", "texts"),
        ("tool-call", "extra"),
    ],
)
def test_row_data_with_an_extra_key_is_rejected(decode: Decoder, kind: str, key: str) -> None:
    row = changed(ROWS[kind], "data", key, value="x")
    assert_rejected(decode, row, f"unknown field `{key}`")


@pytest.mark.parametrize(
    ("kind", "key"),
    [(kind, key) for kind in TEXT_ROWS for key in ["turn", "step", "index", "dt", "texts"]]
    + [("tool-call", key) for key in ["turn", "step", "index", "dt", "id", "args"]],
)
def test_row_data_missing_a_key_is_rejected(decode: Decoder, kind: str, key: str) -> None:
    assert_rejected(decode, removed(ROWS[kind], "data", key), f"missing required field `{key}`")


@pytest.mark.parametrize("kind", TEXT_ROWS)
def test_empty_texts_are_rejected(decode: Decoder, kind: str) -> None:
    assert_rejected(decode, changed(ROWS[kind], "data", "texts", value=[]), "`$.data.texts`")


@pytest.mark.parametrize("kind", TEXT_ROWS)
@pytest.mark.parametrize("item", [1, None, ["a"], {"text": "a"}], ids=repr)
def test_texts_holding_a_non_string_are_rejected(decode: Decoder, kind: str, item: Any) -> None:
    row = changed(ROWS[kind], "data", "texts", value=["a", item, "c"])
    assert_rejected(decode, row, "`$.data.texts[1]`")


def test_empty_args_are_rejected(decode: Decoder) -> None:
    assert_rejected(decode, changed(TOOL_ROW, "data", "args", value=[]), "`$.data.args`")


@pytest.mark.parametrize("item", [1, None, False], ids=repr)
def test_args_holding_a_non_string_are_rejected(decode: Decoder, item: Any) -> None:
    row = changed(TOOL_ROW, "data", "args", value=["{", "", item])
    assert_rejected(decode, row, "`$.data.args[2]`")


@pytest.mark.parametrize("value", [7, None, ["call_1"]], ids=repr)
def test_a_tool_call_id_that_is_not_a_string_is_rejected(decode: Decoder, value: Any) -> None:
    assert_rejected(decode, changed(TOOL_ROW, "data", "id", value=value), "`$.data.id`")


@pytest.mark.parametrize("value", [7, None, True, {"name": "x"}], ids=repr)
def test_a_tool_name_that_is_not_a_string_is_rejected(decode: Decoder, value: Any) -> None:
    assert_rejected(decode, changed(TOOL_ROW, "data", "name", value=value), "`$.data.name`")


@pytest.mark.parametrize("kind", ROWS)
@pytest.mark.parametrize("entry", [1.5, 1.0, "1", None, True], ids=repr)
def test_a_non_integer_dt_entry_is_rejected(decode: Decoder, kind: str, entry: Any) -> None:
    row = changed(ROWS[kind], "data", "dt", value=[1, entry])
    assert_rejected(decode, row, "`$.data.dt[1]`")


@pytest.mark.parametrize("kind", ROWS)
@pytest.mark.parametrize("dt", [[], [1], [1, 2, 3]], ids=repr)
def test_a_dt_of_the_wrong_length_is_rejected(decode: Decoder, kind: str, dt: list[int]) -> None:
    row = changed(ROWS[kind], "data", "dt", value=dt)
    assert_rejected(decode, row, f"dt has {len(dt)} entries, expected 2")


@pytest.mark.parametrize("kind", ROWS)
def test_a_last_member_seq_beyond_the_safe_range_is_rejected(decode: Decoder, kind: str) -> None:
    row = changed(ROWS[kind], "seq0", value=MAX - 1)
    assert_rejected(decode, row, "last member's seq leaves the safe-integer range")


def test_a_last_member_seq_at_the_safe_limit_is_accepted(decode: Decoder) -> None:
    events = decode(changed(TEXT_ROW, "seq0", value=MAX - 2))
    assert [e.seq for e in events] == [MAX - 2, MAX - 1, MAX]


@pytest.mark.parametrize(
    ("time0", "dt"),
    [(MAX - 1, [1, 1]), (-MAX + 1, [-1, -1]), (0, [MAX, 1]), (0, [-MAX, -1]), (100, [MAX, -MAX])],
    ids=["last-above", "last-below", "middle-above", "middle-below", "middle-above-then-back"],
)
def test_a_member_time_beyond_the_safe_range_is_rejected(
    decode: Decoder, time0: int, dt: list[int]
) -> None:
    row = changed(changed(TEXT_ROW, "time0", value=time0), "data", "dt", value=dt)
    assert_rejected(decode, row, "a member's time leaves the safe-integer range")


def test_member_times_at_the_safe_limits_are_accepted(decode: Decoder) -> None:
    row = changed(changed(TEXT_ROW, "time0", value=-MAX), "data", "dt", value=[2 * MAX, -MAX])
    assert [e.time for e in decode(row)] == [-MAX, MAX, 0]


@pytest.mark.parametrize("tag", [["text-chunks"], {"x": 1}, 3, None], ids=repr)
def test_a_record_whose_type_is_not_a_string_is_refused_as_an_event(
    decode: Decoder, tag: Any
) -> None:
    with pytest.raises(EventError, match=r"`\$\.type`"):
        decode({"type": tag, "seq0": 0, "time0": 0, "data": {}})


# ---------------------------------------------------------------------------------------------
# Decoding plain events.


def test_a_plain_event_record_decodes_to_itself(decode: Decoder) -> None:
    event = StepStart(9, -4, StepData(1, 2))
    assert decode(msgspec.json.decode(encode_event(event))) == [event]


def test_decode_record_json_keeps_rows_packed() -> None:
    record: StorageRecord = decode_record_json(msgspec.json.encode(TEXT_ROW))
    assert record == TextChunks(5, 100, TextChunksData(1, 0, 0, [1, 2], ["a", "b", "c"]))
