"""The session event model (SPEC 1): exact JSON round trips, camelCase keys, strict decoding.

Every event type encodes to camelCase JSON and decodes back to an equal struct with the same
bytes. Decoding refuses unknown keys, unknown event types (unless `ignorable: true`) and seqs or
times outside the safe-integer range.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from strategies import session_events

from acp_server.core.content import (
    AudioContent,
    DiffContent,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
)
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    ErrorInfo,
    EventError,
    PlanEntry,
    PlanUpdate,
    PlanUpdateData,
    SessionConfig,
    SessionConfigData,
    SessionContext,
    SessionContextData,
    SessionEvent,
    SessionForked,
    SessionForkedData,
    SessionMode,
    SessionModeData,
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
    TurnEndReasonInterrupted,
    TurnEndReasonMaxSteps,
    TurnEndReasonMaxTokens,
    TurnEndReasonRefusal,
    TurnStart,
    TurnStartData,
    UnknownEvent,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
    convert_event,
    decode_event,
    encode_event,
    event_type,
)
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
from acp_server.core.structs import MAX_SAFE_INTEGER

MAX = MAX_SAFE_INTEGER


def chunk(c: Any, seq: int = 4) -> AssistantChunk:
    return AssistantChunk(seq, 10, AssistantChunkData(1, 0, c))


EXAMPLES: dict[str, SessionEvent] = {
    "turn/start": TurnStart(0, 1_700_000_000_000, TurnStartData(1)),
    "turn/end completed": TurnEnd(9, 5, TurnEndData(1, TurnEndReasonCompleted())),
    "turn/end cancelled": TurnEnd(9, 5, TurnEndData(1, TurnEndReasonCancelled())),
    "turn/end max-tokens": TurnEnd(9, 5, TurnEndData(1, TurnEndReasonMaxTokens())),
    "turn/end refusal": TurnEnd(9, 5, TurnEndData(1, TurnEndReasonRefusal())),
    "turn/end max-steps": TurnEnd(9, 5, TurnEndData(1, TurnEndReasonMaxSteps())),
    "turn/end interrupted": TurnEnd(9, 5, TurnEndData(1, TurnEndReasonInterrupted())),
    "turn/end error": TurnEnd(9, 5, TurnEndData(1, TurnEndReasonError(ErrorInfo("boom", -32603)))),
    "step/start": StepStart(2, 0, StepData(1, 0)),
    "step/end": StepEnd(8, 0, StepData(1, 0)),
    "user/message": UserMessageEvent(
        1,
        0,
        UserMessageData(
            1,
            UserMessage(
                "u1",
                [
                    TextContent("Hi ü 🙂"),
                    ImageContent("aGk=", "image/png", uri=None),
                    AudioContent("aGk=", "audio/wav"),
                    ResourceLink("file:///a.txt", "a.txt", size=3),
                    EmbeddedResource(ResourceContents("file:///b.txt", text="b")),
                ],
            ),
        ),
    ),
    "assistant/chunk block-start": chunk(BlockStart(0, "text")),
    "assistant/chunk text-delta": chunk(TextDelta(0, "")),
    "assistant/chunk reasoning-delta": chunk(ReasoningDelta(0, " \n")),
    "assistant/chunk tool-call-delta": chunk(ToolCallDelta(1, "call_1", '{"', "read_file")),
    "assistant/chunk block-end": chunk(BlockEnd(0)),
    "assistant/chunk usage": chunk(UsageChunk(Usage(10, 20, 5))),
    "assistant/chunk finish": chunk(Finish("tool-calls")),
    "assistant/message": AssistantMessageEvent(
        7,
        11,
        AssistantMessageData(
            1,
            0,
            AssistantMessage(
                "m1",
                [
                    AssistantReasoning("hmm"),
                    AssistantText("Hello"),
                    AssistantToolCall("call_1", "read_file", '{"path":"a"}'),
                ],
            ),
            usage=Usage(10, 20),
            interrupted=True,
        ),
        source_range=(3, 6),
    ),
    "tool/call": ToolCall(8, 12, ToolCallData(1, 0, "call_1", "read_file", '{"path":"a"}')),
    "tool/result": ToolResult(
        9,
        13,
        ToolResultData(
            1,
            0,
            "call_1",
            [TextContent("no"), DiffContent("/a.txt", "new", old_text=None)],
            is_error=True,
            raw_output={"exitCode": 1},
        ),
        source_range=(8, 8),
    ),
    "plan/update": PlanUpdate(10, 14, PlanUpdateData([PlanEntry("Read", "high", "in_progress")])),
    "session/title": SessionTitle(11, 15, SessionTitleData("Fix the ü bug")),
    "subagent/start": SubagentStart(
        12, 16, SubagentStartData(1, 0, "call_2", "child-1", "one-shot")
    ),
    "unknown ignorable": UnknownEvent("future/event", 13, 17, {"anything": [1, None]}, True),
    "session/mode": SessionMode(14, 18, SessionModeData("plan")),
    "session/config": SessionConfig(15, 19, SessionConfigData("model", "gpt-4o")),
    "command/result": CommandResult(
        16, 20, CommandResultData(2, "mode", [TextContent("unknown mode")], is_error=True)
    ),
    "session/context": SessionContext(
        17, 21, SessionContextData([], "append", [TextContent("Answer in French.")])
    ),
    "session/forked": SessionForked(17, 21, SessionForkedData("parent-1", 16)),
}


@pytest.mark.parametrize("event", EXAMPLES.values(), ids=EXAMPLES.keys())
def test_every_event_type_round_trips_exactly(event: SessionEvent) -> None:
    raw = encode_event(event)
    decoded = decode_event(raw)
    assert decoded == event
    assert type(decoded) is type(event)
    assert encode_event(decoded) == raw


@pytest.mark.parametrize("event", EXAMPLES.values(), ids=EXAMPLES.keys())
def test_convert_event_agrees_with_decode_event(event: SessionEvent) -> None:
    raw = encode_event(event)
    assert convert_event(msgspec.json.decode(raw)) == decode_event(raw)


@given(session_events())
def test_generated_events_round_trip_exactly(events: list[SessionEvent]) -> None:
    for event in events:
        raw = encode_event(event)
        assert encode_event(decode_event(raw)) == raw
        assert decode_event(raw) == event


def test_event_type_names_known_and_unknown_events() -> None:
    assert [
        event_type(EXAMPLES[k]) for k in ("turn/start", "tool/result", "unknown ignorable")
    ] == [
        "turn/start",
        "tool/result",
        "future/event",
    ]


# ---------------------------------------------------------------------------------------------
# Exact JSON.


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("turn/start", b'{"type":"turn/start","seq":0,"time":1700000000000,"data":{"turn":1}}'),
        (
            "turn/end error",
            b'{"type":"turn/end","seq":9,"time":5,"data":{"turn":1,'
            b'"reason":{"kind":"error","error":{"message":"boom","code":-32603}}}}',
        ),
        (
            "assistant/chunk tool-call-delta",
            b'{"type":"assistant/chunk","seq":4,"time":10,"data":{"turn":1,"step":0,'
            b'"chunk":{"type":"tool-call-delta","index":1,"id":"call_1",'
            b'"argumentsDelta":"{\\"","name":"read_file"}}}',
        ),
        (
            "assistant/chunk block-start",
            b'{"type":"assistant/chunk","seq":4,"time":10,"data":{"turn":1,"step":0,'
            b'"chunk":{"type":"block-start","index":0,"blockType":"text"}}}',
        ),
        (
            "assistant/chunk usage",
            b'{"type":"assistant/chunk","seq":4,"time":10,"data":{"turn":1,"step":0,"chunk":'
            b'{"type":"usage","usage":{"inputTokens":10,"outputTokens":20,'
            b'"cachedInputTokens":5}}}}',
        ),
        (
            "tool/result",
            b'{"type":"tool/result","seq":9,"time":13,"data":{"turn":1,"step":0,"callId":"call_1",'
            b'"content":[{"type":"text","text":"no"},'
            b'{"type":"diff","path":"/a.txt","newText":"new","oldText":null}],'
            b'"isError":true,"rawOutput":{"exitCode":1}},"sourceRange":[8,8]}',
        ),
        (
            "subagent/start",
            b'{"type":"subagent/start","seq":12,"time":16,"data":{"turn":1,"step":0,'
            b'"callId":"call_2","childSessionId":"child-1","mode":"one-shot"}}',
        ),
        (
            "unknown ignorable",
            b'{"type":"future/event","seq":13,"time":17,"data":{"anything":[1,null]},'
            b'"ignorable":true}',
        ),
        (
            "session/mode",
            b'{"type":"session/mode","seq":14,"time":18,"data":{"modeId":"plan"}}',
        ),
        (
            "session/config",
            b'{"type":"session/config","seq":15,"time":19,'
            b'"data":{"configId":"model","value":"gpt-4o"}}',
        ),
        (
            "command/result",
            b'{"type":"command/result","seq":16,"time":20,"data":{"turn":2,"command":"mode",'
            b'"content":[{"type":"text","text":"unknown mode"}],"isError":true}}',
        ),
        (
            "session/context",
            b'{"type":"session/context","seq":17,"time":21,"data":{"instructions":[],'
            b'"systemPromptMode":"append","systemPrompt":[{"type":"text","text":"Answer in French."}]}}',
        ),
        (
            "session/forked",
            b'{"type":"session/forked","seq":17,"time":21,'
            b'"data":{"fromSessionId":"parent-1","throughSeq":16}}',
        ),
    ],
)
def test_events_encode_to_exact_camel_case_json(key: str, raw: bytes) -> None:
    assert encode_event(EXAMPLES[key]) == raw
    assert decode_event(raw) == EXAMPLES[key]


def test_a_tool_call_delta_without_name_has_no_name_key() -> None:
    raw = encode_event(chunk(ToolCallDelta(0, "call_1", "")))
    assert raw == (
        b'{"type":"assistant/chunk","seq":4,"time":10,"data":{"turn":1,"step":0,'
        b'"chunk":{"type":"tool-call-delta","index":0,"id":"call_1","argumentsDelta":""}}}'
    )


def test_null_and_absent_optional_fields_stay_distinct() -> None:
    absent = b'{"type":"image","data":"aGk=","mimeType":"image/png"}'
    null = b'{"type":"image","data":"aGk=","mimeType":"image/png","uri":null}'
    template = (
        b'{"type":"user/message","seq":1,"time":0,'
        b'"data":{"turn":1,"message":{"id":"u1","content":[%s]}}}'
    )
    for block in (absent, null):
        assert encode_event(decode_event(template % block)) == template % block


def test_a_source_range_is_kept() -> None:
    raw = (
        b'{"type":"assistant/message","seq":7,"time":0,"data":{"turn":1,"step":0,'
        b'"message":{"id":"m1","content":[{"type":"text","text":"Hi"}]}},"sourceRange":[3,6]}'
    )
    event = decode_event(raw)
    assert event.source_range == (3, 6)
    assert encode_event(event) == raw


def test_an_ignorable_known_event_keeps_its_flag() -> None:
    raw = b'{"type":"step/start","seq":3,"time":0,"data":{"turn":0,"step":0},"ignorable":true}'
    event = decode_event(raw)
    assert event == StepStart(3, 0, StepData(0, 0), ignorable=True)
    assert encode_event(event) == raw


def test_decode_event_accepts_text() -> None:
    assert decode_event('{"type":"turn/start","seq":0,"time":0,"data":{"turn":0}}') == TurnStart(
        0, 0, TurnStartData(0)
    )


# ---------------------------------------------------------------------------------------------
# Refusals.


def test_an_unknown_event_type_without_ignorable_is_refused() -> None:
    with pytest.raises(EventError) as info:
        decode_event(b'{"type":"future/event","seq":0,"time":0,"data":{}}')
    assert str(info.value) == "unknown event type 'future/event' (not marked ignorable)"


@pytest.mark.parametrize("flag", [b"false", b'"true"', b"1", b"null"])
def test_an_unknown_event_type_with_ignorable_other_than_true_is_refused(flag: bytes) -> None:
    raw = b'{"type":"future/event","seq":0,"time":0,"data":{},"ignorable":%s}' % flag
    with pytest.raises(EventError, match="unknown event type 'future/event'"):
        decode_event(raw)
    with pytest.raises(EventError, match="unknown event type 'future/event'"):
        convert_event(msgspec.json.decode(raw))


def test_an_ignorable_unknown_event_is_kept_verbatim() -> None:
    raw = (
        b'{"type":"future/event","seq":5,"time":-2,"data":[1,"x"],'
        b'"ignorable":true,"sourceRange":[1,4]}'
    )
    event = decode_event(raw)
    assert event == UnknownEvent("future/event", 5, -2, [1, "x"], True, (1, 4))
    assert encode_event(event) == raw


def test_an_ignorable_unknown_event_with_an_unknown_envelope_key_is_refused() -> None:
    raw = b'{"type":"future/event","seq":5,"time":0,"data":{},"ignorable":true,"extra":1}'
    with pytest.raises(EventError, match="unknown field `extra`"):
        decode_event(raw)


def test_ignorable_does_not_excuse_a_malformed_known_event() -> None:
    raw = b'{"type":"turn/start","seq":0,"time":0,"data":{"turn":"one"},"ignorable":true}'
    with pytest.raises(EventError, match=r"`\$\.data\.turn`"):
        decode_event(raw)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"type":"turn/start","seq":0,"time":0,"data":{"turn":0},"extra":1}', "extra"),
        (b'{"type":"turn/start","seq":0,"time":0,"data":{"turn":0,"step":0}}', "step"),
        (
            b'{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":0,"step":0,'
            b'"chunk":{"type":"text-delta","index":0,"text":"a","logprob":0}}}',
            "logprob",
        ),
        (
            b'{"type":"tool/call","seq":0,"time":0,"data":{"turn":0,"step":0,'
            b'"call_id":"c","name":"n","arguments":"{}"}}',
            "call_id",
        ),
        (
            b'{"type":"user/message","seq":0,"time":0,"data":{"turn":0,'
            b'"message":{"id":"u","content":[{"type":"text","text":"a","lang":"en"}]}}}',
            "lang",
        ),
    ],
    ids=["envelope", "data", "chunk", "snake-case", "content-block"],
)
def test_unknown_keys_are_refused(raw: bytes, field: str) -> None:
    with pytest.raises(EventError, match=f"unknown field `{field}`"):
        decode_event(raw)
    with pytest.raises(EventError, match=f"unknown field `{field}`"):
        convert_event(msgspec.json.decode(raw))


@pytest.mark.parametrize(
    "chunk_json",
    [b'{"type":"text-chunks","index":0,"text":"a"}', b'{"type":"delta","index":0}'],
    ids=["row-tag", "unknown"],
)
def test_an_unknown_chunk_type_is_refused(chunk_json: bytes) -> None:
    raw = b'{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":0,"step":0,"chunk":%s}}'
    with pytest.raises(EventError, match=r"`\$\.data\.chunk\.type`"):
        decode_event(raw % chunk_json)


def test_invalid_json_is_refused() -> None:
    with pytest.raises(EventError, match="invalid JSON"):
        decode_event(b'{"type":"turn/start",')


@pytest.mark.parametrize("raw", [b"[]", b"3", b'"turn/start"', b"null"])
def test_a_non_object_is_refused(raw: bytes) -> None:
    with pytest.raises(EventError, match="Expected `object`"):
        decode_event(raw)


# ---------------------------------------------------------------------------------------------
# Safe-integer bounds.


def _turn_start(seq: Any, time: Any) -> bytes:
    return msgspec.json.encode(
        {"type": "turn/start", "seq": seq, "time": time, "data": {"turn": 0}}
    )


@pytest.mark.parametrize("seq", [0, 1, MAX])
def test_a_seq_within_bounds_is_accepted(seq: int) -> None:
    assert decode_event(_turn_start(seq, 0)).seq == seq


@pytest.mark.parametrize("seq", [-1, MAX + 1, 2**64, 1.0, "1", True], ids=repr)
def test_a_seq_that_is_not_a_non_negative_safe_integer_is_refused(seq: Any) -> None:
    with pytest.raises(EventError, match=r"`\$\.seq`"):
        decode_event(_turn_start(seq, 0))


@pytest.mark.parametrize("time", [-MAX, 0, MAX])
def test_a_time_within_bounds_is_accepted(time: int) -> None:
    assert decode_event(_turn_start(0, time)).time == time


@pytest.mark.parametrize("time", [-MAX - 1, MAX + 1, 1.5, "0"], ids=repr)
def test_a_time_that_is_not_a_safe_integer_is_refused(time: Any) -> None:
    with pytest.raises(EventError, match=r"`\$\.time`"):
        decode_event(_turn_start(0, time))


@pytest.mark.parametrize("source_range", [[-1, 2], [0, MAX + 1], [1, 2, 3], [1]], ids=repr)
def test_a_malformed_source_range_is_refused(source_range: list[int]) -> None:
    raw = msgspec.json.encode(
        {
            "type": "step/end",
            "seq": 0,
            "time": 0,
            "data": {"turn": 0, "step": 0},
            "sourceRange": source_range,
        }
    )
    with pytest.raises(EventError, match=r"`\$\.sourceRange"):
        decode_event(raw)
