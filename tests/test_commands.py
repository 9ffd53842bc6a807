"""Slash commands in the core (SPEC 4.4, 1.2): parsing a prompt, `/stats`, and command turns
left out of the provider history but shown on load."""

from __future__ import annotations

import msgspec
import pytest
from acp import schema
from acp_models import exact

from acp_server.core.acp_updates import AgentMessageChunk, AvailableCommandsUpdate
from acp_server.core.chunk_rows import StorageRecord
from acp_server.core.commands import COMMANDS, CommandCall, parse_command, session_stats
from acp_server.core.content import ContentBlock, ImageContent, TextContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    SessionEvent,
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
from acp_server.core.messages import AssistantTurn, UserTurn, derive_messages
from acp_server.core.projection import project_load
from acp_server.core.stream import AssistantText, Usage


def text(value: str) -> list[ContentBlock]:
    return [TextContent(value)]


@pytest.mark.parametrize(
    ("prompt", "call"),
    [
        ("/title A new title", CommandCall("title", "A new title")),
        ("/stats", CommandCall("stats", "")),
        ("  /mode plan  ", CommandCall("mode", "plan")),
        ("/model\ngpt-4o", CommandCall("model", "gpt-4o")),
    ],
)
def test_a_prompt_starting_with_a_listed_command_runs_it(prompt: str, call: CommandCall) -> None:
    assert parse_command(text(prompt)) == call


@pytest.mark.parametrize("prompt", ["/helpme", "/titles x", "title x", "please /stats", "/"])
def test_any_other_prompt_goes_to_the_model(prompt: str) -> None:
    assert parse_command(text(prompt)) is None


def test_a_prompt_opening_with_an_image_is_not_a_command() -> None:
    prompt: list[ContentBlock] = [ImageContent("AAAA", "image/png"), TextContent("/stats")]
    assert parse_command(prompt) is None


def test_the_commands_update_fits_the_acp_model() -> None:
    value = msgspec.json.decode(msgspec.json.encode(AvailableCommandsUpdate(list(COMMANDS))))
    exact(schema.AvailableCommandsUpdate, value, "available_commands_update")
    assert [c["name"] for c in value["availableCommands"]] == [
        "mode",
        "model",
        "title",
        "stats",
        "compact",
        "init",
        "rewind",
        "mcp",
        "help",
    ]


def command_turn(turn: int, seq: int, prompt: str, answer: str) -> list[SessionEvent]:
    return [
        TurnStart(seq, 0, TurnStartData(turn)),
        UserMessageEvent(
            seq + 1, 0, UserMessageData(turn, UserMessage(f"user-{turn}", text(prompt)))
        ),
        SessionTitle(seq + 2, 0, SessionTitleData("Named")),
        CommandResult(seq + 3, 0, CommandResultData(turn, "title", text(answer))),
        TurnEnd(seq + 4, 0, TurnEndData(turn, TurnEndReasonCompleted())),
    ]


def model_turn(turn: int, seq: int, prompt: str, answer: str, usage: Usage) -> list[SessionEvent]:
    message = AssistantMessage(f"assistant-{turn}-0", [AssistantText(answer)])
    return [
        TurnStart(seq, 0, TurnStartData(turn)),
        UserMessageEvent(
            seq + 1, 0, UserMessageData(turn, UserMessage(f"user-{turn}", text(prompt)))
        ),
        StepStart(seq + 2, 0, StepData(turn, 0)),
        AssistantMessageEvent(seq + 3, 0, AssistantMessageData(turn, 0, message, usage)),
        StepEnd(seq + 4, 0, StepData(turn, 0)),
        TurnEnd(seq + 5, 0, TurnEndData(turn, TurnEndReasonCompleted())),
    ]


LOG: list[SessionEvent] = [
    *model_turn(0, 0, "hello", "Hi.", Usage(100, 20)),
    *command_turn(1, 6, "/title Named", "Title set to: Named"),
    *model_turn(2, 11, "again", "Sure.", Usage(150, 30)),
]


def test_derive_messages_leaves_command_turns_out() -> None:
    assert derive_messages(LOG) == [
        UserTurn(text("hello")),
        AssistantTurn([AssistantText("Hi.")]),
        UserTurn(text("again")),
        AssistantTurn([AssistantText("Sure.")]),
    ]


def test_load_shows_a_command_result_as_an_agent_message() -> None:
    records: list[StorageRecord] = list(LOG[6:11])
    shown = [u for u in project_load(records) if isinstance(u, AgentMessageChunk)]
    assert shown == [AgentMessageChunk(TextContent("Title set to: Named"), "command-1")]


def test_session_stats_counts_the_log() -> None:
    assert session_stats(LOG).splitlines() == [
        "Events: 17",
        "Turns: 3",
        "Messages: 5",
        "Model calls: 2",
        "Tool calls: 0",
        "Tokens: 250 in, 50 out",
        "By type: assistant/message 2, command/result 1, session/title 1, step/end 2, "
        "step/start 2, turn/end 3, turn/start 3, user/message 3",
    ]
