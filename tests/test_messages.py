"""Provider history (SPEC 1.2): `derive_messages` reads only user/assistant messages and results.

Chunks never reach the history: a completed step is represented by its `assistant/message`, an
interrupted one by its partial message, and a failed stream (chunks only) by nothing at all.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from strategies import session_events

from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    ContextCompaction,
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
    TurnEndReasonCompleted,
    TurnEndReasonError,
    TurnEndReasonInterrupted,
    TurnStart,
    TurnStartData,
    UnknownEvent,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.messages import (
    UNANSWERED_CALL_TEXT,
    AssistantTurn,
    ToolTurn,
    UserTurn,
    derive_messages,
)
from acp_server.core.stream import (
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    Finish,
    TextDelta,
    ToolCallDelta,
)

READ_ARGS = '{"path":"a.txt"}'


def numbered(*events: SessionEvent) -> list[SessionEvent]:
    """The events laid out on contiguous seqs from 0, one millisecond apart."""
    return [msgspec.structs.replace(e, seq=k, time=k) for k, e in enumerate(events)]


def user(turn: int, text: str) -> UserMessageEvent:
    return UserMessageEvent(
        0, 0, UserMessageData(turn, UserMessage(f"u{turn}", [TextContent(text)]))
    )


def assistant(
    turn: int, step: int, *blocks: Any, interrupted: Any = msgspec.UNSET
) -> AssistantMessageEvent:
    message = AssistantMessage(f"m{turn}.{step}", list(blocks))
    return AssistantMessageEvent(
        0, 0, AssistantMessageData(turn, step, message, interrupted=interrupted)
    )


def delta(turn: int, step: int, text: str) -> AssistantChunk:
    return AssistantChunk(0, 0, AssistantChunkData(turn, step, TextDelta(0, text)))


def finish(turn: int, step: int) -> AssistantChunk:
    return AssistantChunk(0, 0, AssistantChunkData(turn, step, Finish("stop")))


def result(
    turn: int, step: int, call_id: str, text: str, is_error: Any = msgspec.UNSET
) -> ToolResult:
    return ToolResult(0, 0, ToolResultData(turn, step, call_id, [TextContent(text)], is_error))


def tool_turn() -> list[SessionEvent]:
    """A turn of two steps: a tool call, its result, then a text answer."""
    call = AssistantToolCall("call_1", "read_file", READ_ARGS)
    return numbered(
        TurnStart(0, 0, TurnStartData(0)),
        user(0, "Read a.txt"),
        StepStart(0, 0, StepData(0, 0)),
        AssistantChunk(
            0, 0, AssistantChunkData(0, 0, ToolCallDelta(0, "call_1", READ_ARGS, "read_file"))
        ),
        assistant(0, 0, call),
        StepEnd(0, 0, StepData(0, 0)),
        ToolCall(0, 0, ToolCallData(0, 0, "call_1", "read_file", READ_ARGS)),
        result(0, 0, "call_1", "hello"),
        StepStart(0, 0, StepData(0, 1)),
        delta(0, 1, "It says "),
        delta(0, 1, "hello."),
        finish(0, 1),
        assistant(0, 1, AssistantText("It says hello.")),
        StepEnd(0, 0, StepData(0, 1)),
        TurnEnd(0, 0, TurnEndData(0, TurnEndReasonCompleted())),
    )


def test_user_assistant_and_tool_results_come_in_log_order() -> None:
    assert derive_messages(tool_turn()) == [
        UserTurn([TextContent("Read a.txt")]),
        AssistantTurn([AssistantToolCall("call_1", "read_file", READ_ARGS)]),
        ToolTurn("call_1", [TextContent("hello")]),
        AssistantTurn([AssistantText("It says hello.")]),
    ]


def test_the_history_encodes_with_roles_and_camel_case_keys() -> None:
    call = AssistantToolCall("call_1", "read_file", READ_ARGS)
    events = numbered(user(0, "Hi"), assistant(0, 0, call), result(0, 0, "call_1", "no", True))
    assert msgspec.json.encode(derive_messages(events)) == (
        b'[{"role":"user","content":[{"type":"text","text":"Hi"}]},'
        b'{"role":"assistant","content":[{"type":"tool-call","id":"call_1","name":"read_file",'
        b'"arguments":"{\\"path\\":\\"a.txt\\"}"}]},'
        b'{"role":"tool","callId":"call_1","content":[{"type":"text","text":"no"}],"isError":true}]'
    )


def test_chunks_are_ignored() -> None:
    events = tool_turn()
    without_chunks = [e for e in events if not isinstance(e, AssistantChunk)]
    assert derive_messages(events) == derive_messages(without_chunks)


def test_tool_calls_and_bookkeeping_events_add_nothing() -> None:
    events = numbered(
        TurnStart(0, 0, TurnStartData(0)),
        StepStart(0, 0, StepData(0, 0)),
        ToolCall(0, 0, ToolCallData(0, 0, "call_1", "read_file", READ_ARGS)),
        PlanUpdate(0, 0, PlanUpdateData([PlanEntry("Read", "high", "pending")])),
        SessionTitle(0, 0, SessionTitleData("Reading")),
        SubagentStart(0, 0, SubagentStartData(0, 0, "call_2", "child-1", "one-shot")),
        UnknownEvent("future/event", 0, 0, {}, True),
        StepEnd(0, 0, StepData(0, 0)),
        TurnEnd(0, 0, TurnEndData(0, TurnEndReasonCompleted())),
    )
    assert derive_messages(events) == []


def test_an_interrupted_message_is_kept_with_what_it_received() -> None:
    events = numbered(
        user(0, "Think"),
        StepStart(0, 0, StepData(0, 0)),
        delta(0, 0, "Half"),
        assistant(0, 0, AssistantReasoning("hmm"), AssistantText("Half"), interrupted=True),
    )
    assert derive_messages(events) == [
        UserTurn([TextContent("Think")]),
        AssistantTurn([AssistantReasoning("hmm"), AssistantText("Half")]),
    ]


def test_an_empty_assistant_message_is_left_out() -> None:
    events = numbered(user(0, "Hi"), assistant(0, 0, interrupted=True), user(1, "Again"))
    assert derive_messages(events) == [
        UserTurn([TextContent("Hi")]),
        UserTurn([TextContent("Again")]),
    ]


def test_a_failed_stream_adds_nothing() -> None:
    events = numbered(
        TurnStart(0, 0, TurnStartData(0)),
        user(0, "Hi"),
        StepStart(0, 0, StepData(0, 0)),
        delta(0, 0, "Partial "),
        delta(0, 0, "output"),
        StepEnd(0, 0, StepData(0, 0)),
        TurnEnd(0, 0, TurnEndData(0, TurnEndReasonError(ErrorInfo("provider failed")))),
    )
    assert derive_messages(events) == [UserTurn([TextContent("Hi")])]


def test_a_tool_error_result_keeps_its_flag() -> None:
    call = AssistantToolCall("call_9", "write_file", "{}")
    events = numbered(assistant(0, 0, call), result(0, 0, "call_9", "denied", is_error=True))
    assert derive_messages(events)[1:] == [ToolTurn("call_9", [TextContent("denied")], True)]


def test_a_call_left_without_a_result_gets_an_error_result_saying_so() -> None:
    call = AssistantToolCall("call_1", "read_file", READ_ARGS)
    events = numbered(
        TurnStart(0, 0, TurnStartData(0)),
        user(0, "Read a.txt"),
        StepStart(0, 0, StepData(0, 0)),
        assistant(0, 0, call),
        TurnEnd(0, 0, TurnEndData(0, TurnEndReasonInterrupted())),
        user(1, "Again"),
    )
    assert derive_messages(events) == [
        UserTurn([TextContent("Read a.txt")]),
        AssistantTurn([call]),
        ToolTurn("call_1", [TextContent(UNANSWERED_CALL_TEXT)], True),
        UserTurn([TextContent("Again")]),
    ]


def test_a_result_without_its_call_is_left_out() -> None:
    events = numbered(user(0, "Hi"), result(0, 0, "call_9", "stray"))
    assert derive_messages(events) == [UserTurn([TextContent("Hi")])]


def test_results_follow_their_calls_in_call_order() -> None:
    first = AssistantToolCall("call_1", "read_file", READ_ARGS)
    second = AssistantToolCall("call_2", "read_file", READ_ARGS)
    events = numbered(
        user(0, "Read twice"),
        assistant(0, 0, first, second),
        result(0, 0, "call_2", "two"),
        result(0, 0, "call_1", "one"),
    )
    assert derive_messages(events)[2:] == [
        ToolTurn("call_1", [TextContent("one")]),
        ToolTurn("call_2", [TextContent("two")]),
    ]


def test_no_events_give_no_history() -> None:
    assert derive_messages([]) == []


@given(session_events())
def test_derive_messages_is_deterministic(events: list[SessionEvent]) -> None:
    first = derive_messages(events)
    assert derive_messages(iter(events)) == first
    assert msgspec.json.encode(derive_messages(events)) == msgspec.json.encode(first)


@given(session_events())
def test_only_user_assistant_and_tool_result_events_matter(events: list[SessionEvent]) -> None:
    # ... and command results, which leave their turn's messages out (SPEC 4.4), and
    # compactions, where the history restarts (SPEC 1.2).
    kinds = (UserMessageEvent, AssistantMessageEvent, ToolResult, CommandResult, ContextCompaction)
    kept = [e for e in events if isinstance(e, kinds)]
    assert derive_messages(events) == derive_messages(kept)
