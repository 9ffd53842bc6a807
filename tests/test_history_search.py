"""`search_history` in the pure core (SPEC 4.3): matching lines of the session's own messages
and tool results, newest first, capped; command turns left out."""

from __future__ import annotations

import msgspec

from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    SessionEvent,
    ToolResult,
    ToolResultData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.history_search import Hit, render_hits, search_history
from acp_server.core.line_regex import LineRegex
from acp_server.core.stream import AssistantText


def numbered(*events: SessionEvent) -> list[SessionEvent]:
    return [msgspec.structs.replace(e, seq=k) for k, e in enumerate(events)]


def user(turn: int, text: str) -> UserMessageEvent:
    return UserMessageEvent(0, 0, UserMessageData(turn, UserMessage("u", [TextContent(text)])))


def assistant(turn: int, text: str) -> AssistantMessageEvent:
    message = AssistantMessage("a", [AssistantText(text)])
    return AssistantMessageEvent(0, 0, AssistantMessageData(turn, 0, message))


def result(turn: int, call_id: str, text: str) -> ToolResult:
    return ToolResult(0, 0, ToolResultData(turn, 0, call_id, [TextContent(text)]))


LOG = numbered(
    user(0, "The port is 8123."),
    assistant(0, "Noted: port 8123"),
    result(0, "call_1", "listen 8123\nhost example\nport 9000"),
    user(1, "/title port"),
    CommandResult(0, 0, CommandResultData(1, "title", [TextContent("Title set to: port")])),
)


def test_matching_lines_come_newest_first_with_their_source() -> None:
    hits, more = search_history(LOG, LineRegex("port"), 10)
    assert (hits, more) == (
        [
            Hit(2, 0, "tool result call_1", "port 9000"),
            Hit(1, 0, "assistant", "Noted: port 8123"),
            Hit(0, 0, "user", "The port is 8123."),
        ],
        False,
    )


def test_the_cap_keeps_the_newest_and_says_more_matched() -> None:
    hits, more = search_history(LOG, LineRegex("8123"), 2)
    assert [h.seq for h in hits] == [2, 1]
    assert more is True
    assert render_hits(hits, more).splitlines() == [
        "[seq 2, turn 0, tool result call_1] listen 8123",
        "[seq 1, turn 0, assistant] Noted: port 8123",
        "(only the newest 2 matches are shown; narrow the pattern)",
    ]


def test_no_match_says_so() -> None:
    assert render_hits(*search_history(LOG, LineRegex("absent"), 5)) == (
        "No earlier message or tool result matches."
    )
