"""The llm-replay script (SPEC 5), pure: fixture lines in, model-call entries out.

Fixtures may be projected (no seqs or times) or complete, never both; the script is derived from
their chunks, grouped by (turn, step) and split at each finish; the override sidecar replaces or
patches it; `{{fromRequest:<regex>}}` placeholders are filled from the request's text.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from acp_server.core.content import TextContent
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
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.replay_script import (
    ChunksEntry,
    HangEntry,
    Patch,
    PatchSet,
    ReplayError,
    ThrowEntry,
    Underivable,
    apply_override,
    count_model_calls,
    derive_script,
    fill_placeholders,
    parse_fixture,
    parse_override,
)
from acp_server.core.stream import (
    AssistantText,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)

HEADER = {"type": "session", "version": 2, "id": "s1", "createdAt": 0, "cwd": "/work"}


def lines(*records: dict[str, Any]) -> list[bytes]:
    return [json.dumps(r).encode() for r in (HEADER, *records)]


def chunk(turn: int, step: int, chunk: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant/chunk", "data": {"turn": turn, "step": step, "chunk": chunk}}


def complete(seq: int, record: dict[str, Any], time: int = 0) -> dict[str, Any]:
    return {
        "type": record["type"],
        "seq": seq,
        "time": time,
        **{k: v for k, v in record.items() if k != "type"},
    }


TURN_START = {"type": "turn/start", "data": {"turn": 0}}
STEP_START = {"type": "step/start", "data": {"turn": 0, "step": 0}}
TEXT_ROW = {
    "type": "text-chunks",
    "data": {"turn": 0, "step": 0, "index": 0, "dt": [5, -2], "texts": ["Hel", "lo", "!"]},
}
FINISH = chunk(0, 0, {"type": "finish", "reason": "stop"})
STEP_END = {"type": "step/end", "data": {"turn": 0, "step": 0}}


def events_of(*chunks: tuple[int, int, StreamChunk]) -> list[SessionEvent]:
    """Assistant chunk events on contiguous seqs, each given as (turn, step, chunk)."""
    return [AssistantChunk(i, 0, AssistantChunkData(t, s, c)) for i, (t, s, c) in enumerate(chunks)]


# ---------------------------------------------------------------------------------------------
# Fixtures.


def test_projected_fixture_restores_contiguous_seqs_and_time_zero() -> None:
    fixture = parse_fixture("f.jsonl", lines(TURN_START, STEP_START, FINISH, STEP_END))

    assert fixture.projected is True
    assert fixture.header.id == "s1"
    assert [(e.seq, e.time) for e in fixture.events] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert fixture.events[2] == AssistantChunk(2, 0, AssistantChunkData(0, 0, Finish("stop")))


def test_projected_row_starts_at_the_next_seq_and_time_zero_keeping_its_dt() -> None:
    fixture = parse_fixture("f.jsonl", lines(TURN_START, TEXT_ROW, FINISH))

    assert fixture.events[1:] == [
        AssistantChunk(1, 0, AssistantChunkData(0, 0, TextDelta(0, "Hel"))),
        AssistantChunk(2, 5, AssistantChunkData(0, 0, TextDelta(0, "lo"))),
        AssistantChunk(3, 3, AssistantChunkData(0, 0, TextDelta(0, "!"))),
        AssistantChunk(4, 0, AssistantChunkData(0, 0, Finish("stop"))),
    ]


def test_projected_and_complete_fixtures_parse_to_the_same_events() -> None:
    row = {"type": "text-chunks", "seq0": 2, "time0": 0, "data": TEXT_ROW["data"]}
    complete_lines = lines(
        complete(0, TURN_START),
        complete(1, STEP_START),
        row,
        complete(5, FINISH),
        complete(6, STEP_END),
    )

    projected = parse_fixture("p.jsonl", lines(TURN_START, STEP_START, TEXT_ROW, FINISH, STEP_END))
    full = parse_fixture("c.jsonl", complete_lines)

    assert full.projected is False
    assert projected.events == full.events
    assert [e.seq for e in full.events] == [0, 1, 2, 3, 4, 5, 6]


def test_complete_fixture_keeps_its_times() -> None:
    fixture = parse_fixture(
        "f.jsonl", lines(complete(0, TURN_START, time=1700), complete(1, STEP_START, time=1750))
    )

    assert [(e.seq, e.time) for e in fixture.events] == [(0, 1700), (1, 1750)]


def test_fixture_mixing_projected_and_complete_records_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", lines(TURN_START, complete(1, STEP_START)))

    assert str(exc.value) == "f.jsonl: line 3: projected and complete records are mixed in one file"


def test_fixture_mixing_a_complete_record_and_a_projected_row_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", lines(complete(0, TURN_START), TEXT_ROW))

    assert str(exc.value) == "f.jsonl: line 3: projected and complete records are mixed in one file"


def test_projected_record_with_a_time_but_no_seq_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", lines({**TURN_START, "time": 3}))

    assert str(exc.value) == "f.jsonl: line 2: a projected record has 'time' but no 'seq'"


def test_projected_row_with_a_time0_but_no_seq0_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", lines({**TEXT_ROW, "time0": 3}))

    assert str(exc.value) == "f.jsonl: line 2: a projected record has 'time0' but no 'seq0'"


def test_complete_fixture_with_a_seq_gap_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", lines(complete(0, TURN_START), complete(2, STEP_START)))

    assert str(exc.value) == "f.jsonl: line 3: seq gap: expected seq 1, found 2"


def test_blank_lines_are_skipped_and_errors_name_the_real_line() -> None:
    raw = [b"", *lines(TURN_START), b"   ", b"{not json"]

    assert [e.seq for e in parse_fixture("f.jsonl", raw[:-1]).events] == [0]
    with pytest.raises(ReplayError, match=r"^f\.jsonl: line 5: invalid JSON: "):
        parse_fixture("f.jsonl", raw)


def test_empty_fixture_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", [b"", b"\n"])

    assert str(exc.value) == "f.jsonl: the fixture is empty"


def test_fixture_without_a_session_header_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", [json.dumps(TURN_START).encode()])

    assert str(exc.value).startswith("f.jsonl: line 1: not a session header: ")


def test_fixture_record_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", [*lines(), b"[1, 2]"])

    assert str(exc.value) == "f.jsonl: line 2: a record must be a JSON object"


def test_fixture_with_an_unknown_event_type_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        parse_fixture("f.jsonl", lines({"type": "wat", "data": {}}))

    assert str(exc.value) == "f.jsonl: line 2: unknown event type 'wat' (not marked ignorable)"


def test_fixture_with_a_malformed_row_is_refused_naming_the_line() -> None:
    bad_row = {"type": "text-chunks", "data": {**TEXT_ROW["data"], "dt": [1]}}

    with pytest.raises(ReplayError, match=r"^f\.jsonl: line 2: .*dt"):
        parse_fixture("f.jsonl", lines(bad_row))


# ---------------------------------------------------------------------------------------------
# Deriving the script.

TOOL_STEP: list[StreamChunk] = [
    BlockStart(0, "reasoning"),
    ReasoningDelta(0, "Look at "),
    ReasoningDelta(0, "the file."),
    BlockEnd(0),
    BlockStart(1, "text"),
    TextDelta(1, "Reading it."),
    BlockEnd(1),
    BlockStart(2, "tool-call"),
    ToolCallDelta(2, "call-1", '{"path":', "read_file"),
    ToolCallDelta(2, "call-1", '"a.txt"}'),
    BlockEnd(2),
    UsageChunk(Usage(120, 30)),
    Finish("tool-calls"),
]
ANSWER_STEP: list[StreamChunk] = [
    TextDelta(0, "It says hi."),
    UsageChunk(Usage(160, 5)),
    Finish("stop"),
]


def realistic_turn() -> list[SessionEvent]:
    """A user turn of two steps (a tool call, then an answer) with the surrounding events."""
    events: list[SessionEvent] = [
        TurnStart(0, 0, TurnStartData(0)),
        UserMessageEvent(1, 0, UserMessageData(0, UserMessage("u0", [TextContent("read a.txt")]))),
        StepStart(2, 0, StepData(0, 0)),
    ]
    for c in TOOL_STEP:
        events.append(AssistantChunk(len(events), 0, AssistantChunkData(0, 0, c)))
    events.append(StepEnd(len(events), 0, StepData(0, 0)))
    events.append(StepStart(len(events), 0, StepData(0, 1)))
    for c in ANSWER_STEP:
        events.append(AssistantChunk(len(events), 0, AssistantChunkData(0, 1, c)))
    events.append(
        AssistantMessageEvent(
            len(events),
            0,
            AssistantMessageData(0, 1, AssistantMessage("a", [AssistantText("It says hi.")])),
        )
    )
    events.append(StepEnd(len(events), 0, StepData(0, 1)))
    return events


def test_each_step_of_a_realistic_turn_is_one_model_call() -> None:
    assert derive_script(realistic_turn()) == [ChunksEntry(TOOL_STEP), ChunksEntry(ANSWER_STEP)]


def test_two_finishes_in_one_step_are_two_model_calls() -> None:
    events = events_of(
        (0, 0, TextDelta(0, "a")),
        (0, 0, Finish("stop")),
        (0, 0, TextDelta(0, "b")),
        (0, 0, Finish("length")),
    )

    assert derive_script(events) == [
        ChunksEntry([TextDelta(0, "a"), Finish("stop")]),
        ChunksEntry([TextDelta(0, "b"), Finish("length")]),
    ]


def test_chunks_after_the_last_finish_of_a_step_are_underivable() -> None:
    events = events_of(
        (0, 0, TextDelta(0, "a")), (0, 0, Finish("stop")), (0, 0, TextDelta(0, "partial"))
    )

    assert derive_script(events) == [
        ChunksEntry([TextDelta(0, "a"), Finish("stop")]),
        Underivable(0, 0),
    ]


def test_a_step_without_finish_is_underivable_in_its_place() -> None:
    events = events_of(
        (0, 0, TextDelta(0, "a")),
        (0, 0, Finish("stop")),
        (1, 0, TextDelta(0, "failed")),
        (2, 0, TextDelta(0, "b")),
        (2, 0, Finish("stop")),
    )

    assert derive_script(events) == [
        ChunksEntry([TextDelta(0, "a"), Finish("stop")]),
        Underivable(1, 0),
        ChunksEntry([TextDelta(0, "b"), Finish("stop")]),
    ]


def test_script_of_a_log_without_chunks_is_empty() -> None:
    assert derive_script([TurnStart(0, 0, TurnStartData(0))]) == []


def test_count_model_calls_counts_step_starts() -> None:
    assert count_model_calls(realistic_turn()) == 2
    assert count_model_calls([]) == 0


# ---------------------------------------------------------------------------------------------
# Override sidecar: forms.

TEXT_CALL = {
    "kind": "chunks",
    "chunks": [
        {"type": "text-delta", "index": 0, "text": "hi"},
        {"type": "finish", "reason": "stop"},
    ],
}


def override(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_bare_array_override_decodes_every_entry_kind() -> None:
    raw = override(
        [
            TEXT_CALL,
            {
                "kind": "throw",
                "chunks": [{"type": "text-delta", "index": 0, "text": "par"}],
                "message": "overloaded",
                "code": 529,
            },
            {"kind": "throw", "chunks": [], "message": "rate limited", "code": "rate_limit"},
            {"kind": "throw", "chunks": [], "message": "boom"},
            {
                "kind": "hang",
                "chunks": [{"type": "text-delta", "index": 0, "text": "wait"}],
                "readyFile": "ready.txt",
            },
            {"kind": "hang"},
        ]
    )

    assert parse_override("o.json", raw) == [
        ChunksEntry([TextDelta(0, "hi"), Finish("stop")]),
        ThrowEntry([TextDelta(0, "par")], "overloaded", 529),
        ThrowEntry([], "rate limited", "rate_limit"),
        ThrowEntry([], "boom"),
        HangEntry([TextDelta(0, "wait")], "ready.txt"),
        HangEntry(),
    ]


def test_patch_override_decodes_to_a_patch_set() -> None:
    raw = override(
        {"patches": [{"at": 1, "entry": {"kind": "hang"}}, {"at": 0, "entry": TEXT_CALL}]}
    )

    assert parse_override("o.json", raw) == PatchSet(
        [Patch(1, HangEntry()), Patch(0, ChunksEntry([TextDelta(0, "hi"), Finish("stop")]))]
    )


def test_every_chunk_type_is_accepted_in_an_override() -> None:
    chunks = [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "c1",
            "argumentsDelta": "{}",
            "name": "todo_write",
        },
        {"type": "block-end", "index": 0},
        {"type": "reasoning-delta", "index": 1, "text": "hm"},
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2, "cachedInputTokens": 0}},
        {"type": "finish", "reason": "tool-calls"},
    ]

    [entry] = parse_override("o.json", override([{"kind": "chunks", "chunks": chunks}]))

    assert msgspec.to_builtins(entry) == {"kind": "chunks", "chunks": chunks}


# ---------------------------------------------------------------------------------------------
# Override sidecar: refusals.


def refusal(raw: bytes) -> str:
    with pytest.raises(ReplayError) as exc:
        parse_override("o.json", raw)
    return str(exc.value)


def test_override_with_malformed_json_is_refused() -> None:
    assert refusal(b'[{"kind": "chunks"') == "o.json: Input data was truncated"


def test_override_that_is_neither_array_nor_object_is_refused() -> None:
    assert refusal(b"5") == "o.json: Expected `object | array`, got `int`"


def test_override_entry_of_unknown_kind_is_refused() -> None:
    assert (
        refusal(override([{"kind": "explode"}]))
        == "o.json: Invalid value 'explode' - at `$[0].kind`"
    )


def test_override_chunk_of_unknown_type_is_refused() -> None:
    raw = override(
        [
            {
                "kind": "chunks",
                "chunks": [{"type": "text-delta", "index": 0, "text": "a"}, {"type": "sparkle"}],
            }
        ]
    )

    assert refusal(raw) == "o.json: Invalid value 'sparkle' - at `$[0].chunks[1].type`"


def test_override_chunk_missing_a_field_is_refused() -> None:
    raw = override([{"kind": "chunks", "chunks": [{"type": "text-delta", "index": 0}]}])

    assert refusal(raw) == "o.json: Object missing required field `text` - at `$[0].chunks[0]`"


def test_override_chunk_with_an_unknown_field_is_refused() -> None:
    raw = override([{"kind": "chunks", "chunks": [{"type": "block-end", "index": 0, "extra": 1}]}])

    assert refusal(raw) == "o.json: Object contains unknown field `extra` - at `$[0].chunks[0]`"


def test_override_finish_with_an_unknown_reason_is_refused() -> None:
    raw = override([{"kind": "chunks", "chunks": [{"type": "finish", "reason": "done"}]}])

    assert refusal(raw) == "o.json: Invalid enum value 'done' - at `$[0].chunks[0].reason`"


def test_override_throw_with_a_non_string_message_is_refused() -> None:
    raw = override([{"kind": "throw", "chunks": [], "message": 5}])

    assert refusal(raw) == "o.json: Expected `str`, got `int` - at `$[0].message`"


def test_override_throw_without_chunks_is_refused() -> None:
    assert refusal(override([{"kind": "throw", "message": "x"}])) == (
        "o.json: Object missing required field `chunks` - at `$[0]`"
    )


def test_override_hang_with_a_non_string_ready_file_is_refused() -> None:
    raw = override([{"kind": "hang", "readyFile": 3}])

    assert refusal(raw) == "o.json: Expected `str`, got `int` - at `$[0].readyFile`"


def test_override_patch_at_a_negative_index_is_refused() -> None:
    raw = override({"patches": [{"at": -1, "entry": {"kind": "hang"}}]})

    assert refusal(raw) == "o.json: Expected `int` >= 0 - at `$.patches[0].at`"


def test_override_patch_set_with_an_unknown_key_is_refused() -> None:
    assert (
        refusal(override({"patches": [], "replace": True}))
        == "o.json: Object contains unknown field `replace`"
    )


def test_override_patching_one_index_twice_is_refused() -> None:
    raw = override(
        {
            "patches": [
                {"at": 2, "entry": {"kind": "hang"}},
                {"at": 0, "entry": {"kind": "hang"}},
                {"at": 2, "entry": TEXT_CALL},
            ]
        }
    )

    assert refusal(raw) == "o.json: patches[2].at: index 2 is patched twice"


# ---------------------------------------------------------------------------------------------
# Applying the override.

A = ChunksEntry([TextDelta(0, "a"), Finish("stop")])
B = ChunksEntry([TextDelta(0, "b"), Finish("stop")])
THROW = ThrowEntry([TextDelta(0, "par")], "overloaded", 529)


def test_no_override_keeps_the_derived_script() -> None:
    assert apply_override("f.jsonl", [A, B], None) == [A, B]


def test_bare_array_replaces_the_script_even_an_underivable_one() -> None:
    assert apply_override("f.jsonl", [A, Underivable(0, 1)], [B, THROW]) == [B, THROW]


def test_patch_replaces_the_entry_at_its_index() -> None:
    assert apply_override("f.jsonl", [A, Underivable(0, 1), B], PatchSet([Patch(1, THROW)])) == [
        A,
        THROW,
        B,
    ]


def test_patch_at_the_script_length_appends() -> None:
    assert apply_override("f.jsonl", [A], PatchSet([Patch(1, B)])) == [A, B]


def test_patches_apply_in_index_order_so_consecutive_appends_work() -> None:
    patches = PatchSet([Patch(2, THROW), Patch(1, B), Patch(0, B)])

    assert apply_override("f.jsonl", [A], patches) == [B, B, THROW]


def test_patch_past_the_end_of_the_script_is_refused() -> None:
    with pytest.raises(ReplayError) as exc:
        apply_override("f.jsonl", [A], PatchSet([Patch(2, B)]))

    assert str(exc.value) == (
        "f.jsonl: a patch at 2 is past the end of the script (1 entries; `at` equal to the length appends)"
    )


def test_underivable_call_left_unpatched_is_refused_naming_its_index_turn_and_step() -> None:
    with pytest.raises(ReplayError) as exc:
        apply_override("f.jsonl", [A, B, Underivable(3, 1)], PatchSet([Patch(0, B)]))

    assert str(exc.value) == (
        "f.jsonl: script entry 2 (turn 3, step 1) has no finish chunk: it is a failed stream, so the scenario "
        "must say what happened in an override (a `throw` or `hang` entry patched at that index)"
    )


def test_parsed_override_applies_end_to_end() -> None:
    derived = derive_script(
        events_of((0, 0, TextDelta(0, "a")), (0, 0, Finish("stop")), (1, 0, TextDelta(0, "par")))
    )
    patch = parse_override(
        "o.json",
        override(
            {
                "patches": [
                    {
                        "at": 1,
                        "entry": {
                            "kind": "throw",
                            "chunks": [{"type": "text-delta", "index": 0, "text": "par"}],
                            "message": "overloaded",
                        },
                    }
                ]
            }
        ),
    )

    assert apply_override("f.jsonl", derived, patch) == [
        A,
        ThrowEntry([TextDelta(0, "par")], "overloaded"),
    ]


# ---------------------------------------------------------------------------------------------
# Placeholders.


def test_chunk_without_placeholder_is_returned_unchanged() -> None:
    delta = TextDelta(0, "plain {{text}}")

    assert fill_placeholders(delta, "anything") is delta


def test_placeholder_without_a_group_is_replaced_by_the_whole_match() -> None:
    assert fill_placeholders(
        TextDelta(3, "see {{fromRequest:id-\\d+}}."), "about id-12"
    ) == TextDelta(3, "see id-12.")


def test_placeholder_with_a_group_is_replaced_by_its_first_group() -> None:
    filled = fill_placeholders(TextDelta(0, "{{fromRequest:id-(\\d+)-(\\w+)}}"), "id-12-ab")

    assert filled == TextDelta(0, "12")


def test_placeholder_takes_the_last_match_in_the_request() -> None:
    assert fill_placeholders(
        TextDelta(0, "{{fromRequest:id-(\\d+)}}"), "id-1\nid-2 then id-3"
    ) == TextDelta(0, "3")


def test_several_placeholders_in_one_string_are_all_filled() -> None:
    filled = fill_placeholders(
        ReasoningDelta(0, "{{fromRequest:a=(\\w+)}} and {{fromRequest:b=(\\w+)}}"), "a=x b=y"
    )

    assert filled == ReasoningDelta(0, "x and y")


def test_placeholder_without_a_match_is_an_error() -> None:
    with pytest.raises(ReplayError) as exc:
        fill_placeholders(TextDelta(0, "{{fromRequest:id-(\\d+)}}"), "no ids here")

    assert str(exc.value) == "{{fromRequest:id-(\\d+)}} found no match in the request"


def test_placeholder_with_an_invalid_regex_is_an_error() -> None:
    with pytest.raises(ReplayError) as exc:
        fill_placeholders(TextDelta(0, "{{fromRequest:(unclosed}}"), "text")

    assert str(exc.value) == (
        "{{fromRequest:(unclosed}}: invalid regex: missing ), unterminated subpattern at position 0"
    )


def test_placeholders_in_tool_call_arguments_are_filled() -> None:
    delta = ToolCallDelta(0, "call-1", '{"path": "{{fromRequest:file (\\S+)}}"}', "read_file")

    assert fill_placeholders(delta, "please open file src/app.py") == ToolCallDelta(
        0, "call-1", '{"path": "src/app.py"}', "read_file"
    )


def test_placeholder_ends_at_the_first_closing_braces_so_json_may_close_right_after() -> None:
    delta = ToolCallDelta(0, "call-1", '{"line":{{fromRequest:line (\\d+)}}}')

    assert fill_placeholders(delta, "go to line 42") == ToolCallDelta(0, "call-1", '{"line":42}')


def test_a_step_without_chunks_is_an_underivable_entry_in_its_place() -> None:
    from acp_server.core.events import StepData, StepStart

    events = [
        StepStart(0, 0, StepData(0, 0)),
        StepStart(1, 0, StepData(0, 1)),
        *[
            AssistantChunk(2 + i, 0, AssistantChunkData(0, 1, chunk))
            for i, chunk in enumerate([TextDelta(0, "hi"), Finish("stop")])
        ],
    ]
    assert derive_script(events) == [
        Underivable(0, 0),
        ChunksEntry([TextDelta(0, "hi"), Finish("stop")]),
    ]
