"""Compaction in the pure core (SPEC 1.2, 4.6): the history restarts at the latest
`context/compaction`, and it is a history a provider accepts whatever the log went through.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from strategies import loop_logs

from acp_server.core.compaction import SUMMARY_PREAMBLE, due, summary_request
from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    ContextCompaction,
    ContextCompactionData,
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.messages import (
    AssistantTurn,
    ModelMessage,
    ToolTurn,
    UserTurn,
    derive_messages,
)
from acp_server.core.stream import AssistantText, AssistantToolCall, Usage


def numbered(*events: SessionEvent) -> list[SessionEvent]:
    return [msgspec.structs.replace(e, seq=k) for k, e in enumerate(events)]


def user(turn: int, text: str) -> UserMessageEvent:
    return UserMessageEvent(
        0, 0, UserMessageData(turn, UserMessage(f"u{turn}", [TextContent(text)]))
    )


def assistant(turn: int, step: int, *blocks: Any, usage: Any = msgspec.UNSET) -> Any:
    message = AssistantMessage(f"m{turn}.{step}", list(blocks))
    return AssistantMessageEvent(0, 0, AssistantMessageData(turn, step, message, usage))


def compaction(turn: int, step: int, through: int) -> ContextCompaction:
    return ContextCompaction(0, 0, ContextCompactionData(turn, step, through))


def completed_turn(turn: int, prompt: str, answer: str) -> list[SessionEvent]:
    return [
        TurnStart(0, 0, TurnStartData(turn)),
        user(turn, prompt),
        StepStart(0, 0, StepData(turn, 0)),
        assistant(turn, 0, AssistantText(answer), usage=Usage(900, 10)),
        StepEnd(0, 0, StepData(turn, 0)),
        TurnEnd(0, 0, TurnEndData(turn, TurnEndReasonCompleted())),
    ]


def compact_turn(turn: int, through: int, summary: str) -> list[SessionEvent]:
    """A `/compact` turn as the loop writes it."""
    return [
        TurnStart(0, 0, TurnStartData(turn)),
        user(turn, "/compact"),
        StepStart(0, 0, StepData(turn, 0)),
        assistant(turn, 0, AssistantText(summary), usage=Usage(950, 40)),
        StepEnd(0, 0, StepData(turn, 0)),
        compaction(turn, 0, through),
        CommandResult(0, 0, CommandResultData(turn, "compact", [TextContent("Compacted.")])),
        TurnEnd(0, 0, TurnEndData(turn, TurnEndReasonCompleted())),
    ]


def summary(text: str) -> UserTurn:
    return UserTurn([TextContent(SUMMARY_PREAMBLE + text)])


def test_after_a_compaction_the_history_is_the_summary_and_what_followed() -> None:
    first = completed_turn(0, "My name is Ada.", "Hello Ada.")
    events = numbered(
        *first,
        *compact_turn(1, len(first) - 1, "The user is Ada."),
        *completed_turn(2, "Who am I?", "Ada."),
    )
    assert derive_messages(events) == [
        summary("The user is Ada."),
        UserTurn([TextContent("Who am I?")]),
        AssistantTurn([AssistantText("Ada.")]),
    ]


def test_the_latest_compaction_wins() -> None:
    first = completed_turn(0, "one", "1")
    body = [*first, *compact_turn(1, len(first) - 1, "S1")]
    body += completed_turn(2, "two", "2")
    body += compact_turn(3, len(body) - 1, "S2")
    events = numbered(*body, *completed_turn(4, "three", "3"))
    assert derive_messages(events) == [
        summary("S2"),
        UserTurn([TextContent("three")]),
        AssistantTurn([AssistantText("3")]),
    ]


def test_a_compaction_between_steps_keeps_the_steps_after_it() -> None:
    call = AssistantToolCall("call_1", "read_file", "{}")
    events = numbered(
        TurnStart(0, 0, TurnStartData(0)),
        user(0, "Read it"),
        StepStart(0, 0, StepData(0, 0)),
        assistant(0, 0, call),
        ToolResult(0, 0, ToolResultData(0, 0, "call_1", [TextContent("the text")])),
        StepEnd(0, 0, StepData(0, 0)),
        StepStart(0, 0, StepData(0, 1)),
        assistant(0, 1, AssistantText("Read it; it holds the text.")),
        StepEnd(0, 0, StepData(0, 1)),
        compaction(0, 1, 5),
        StepStart(0, 0, StepData(0, 2)),
        assistant(0, 2, AssistantText("Done.")),
    )
    assert derive_messages(events) == [
        summary("Read it; it holds the text."),
        AssistantTurn([AssistantText("Done.")]),
    ]


def test_a_summarising_call_asks_with_the_users_instructions() -> None:
    assert summary_request("keep the file names").endswith(
        "The user's instructions for the summary: keep the file names"
    )


def test_compaction_is_due_when_the_last_usage_reaches_the_limit() -> None:
    events = numbered(*completed_turn(0, "hi", "hello"))  # 900 + 10 tokens
    assert (due(events, 910), due(events, 911), due(events, None)) == (True, False, False)


def test_compaction_is_not_due_again_right_after_one() -> None:
    first = completed_turn(0, "hi", "hello")
    events = numbered(*first, *compact_turn(1, len(first) - 1, "S"))
    assert due(events, 10) is False


def assert_valid_history(history: list[ModelMessage]) -> None:
    """What providers require: the first message the user's, no two assistant turns in a row,
    none empty, and each assistant turn's tool calls answered right after it, in order."""
    assert not history or type(history[0]) is UserTurn
    pending: list[str] = []
    previous: ModelMessage | None = None
    for message in history:
        if type(message) is ToolTurn:
            assert pending and message.call_id == pending.pop(0), history
        else:
            assert not pending, history
            if type(message) is AssistantTurn:
                assert message.content and type(previous) is not AssistantTurn, history
                pending = [b.id for b in message.content if type(b) is AssistantToolCall]
                assert len(pending) == len(set(pending)), history
        previous = message
    assert not pending, history


@given(loop_logs())
def test_the_history_is_valid_for_any_log_the_loop_writes(events: list[SessionEvent]) -> None:
    assert_valid_history(derive_messages(events))


@given(loop_logs())
def test_after_a_compaction_only_later_prompts_are_sent(events: list[SessionEvent]) -> None:
    history = derive_messages(events)
    marks = [e for e in events if type(e) is ContextCompaction]
    commands = {e.data.turn for e in events if type(e) is CommandResult}
    later = [
        UserTurn(list(e.data.message.content))
        for e in events
        if type(e) is UserMessageEvent
        and e.data.turn not in commands
        and (not marks or e.seq > marks[-1].data.through_seq)
    ]
    sent = [m for m in history if type(m) is UserTurn]
    if marks:
        assert type(sent[0].content[0]) is TextContent
        assert sent[0].content[0].text.startswith(SUMMARY_PREAMBLE)
        sent = sent[1:]
    assert sent == later
