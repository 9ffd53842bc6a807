"""ACP v2 resume's replay, its pure parts (`core.v2_replay`): the `replayFrom` cursor, a
replay's pages cut at turn starts, the load projection's chunks folded into whole messages,
the position after a message, and the last turn's stop reason."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from sdk_schema import check_v2
from test_projection import Log

from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.acp_updates import (
    AgentMessageChunk,
    AgentMessageShown,
    AgentThoughtChunk,
    AgentThoughtShown,
    PlanShown,
    SessionNotification,
    SessionUpdate,
    UserMessageChunk,
    UserMessageShown,
)
from acp_server.core.content import TextContent
from acp_server.core.events import (
    ErrorInfo,
    TurnEndReasonCancelled,
    TurnEndReasonError,
    TurnStart,
)
from acp_server.core.projection import project_load
from acp_server.core.stream import AssistantReasoning, AssistantText, Finish, TextDelta
from acp_server.core.v2_replay import (
    AfterMessage,
    CursorError,
    FromStart,
    after_message,
    last_stop_reason,
    replay_cursor,
    turn_cut,
    whole_messages,
)


def three_turns() -> Log:
    log = Log()
    log.user(TextContent("one")).answer("One.").turn_end()
    log.user(TextContent("two")).chunks(TextDelta(0, "Tw"), Finish("stop"))
    log.message(AssistantReasoning("Hm."), AssistantText("Two."), AssistantReasoning("So."))
    log.step_end().turn_end(TurnEndReasonCancelled())
    log.user(TextContent("three")).answer("Three.").turn_end()
    return log


def wire(updates: list[SessionUpdate]) -> list[dict[str, Any]]:
    """The updates as v2 JSON, each checked against the SDK's v2 `UpdateSessionNotification`."""
    shown = []
    for update in updates:
        params = msgspec.to_builtins(SessionNotification("s-1", update))
        check_v2("UpdateSessionNotification", params)
        shown.append(params["update"])
    return shown


# -- replayFrom ------------------------------------------------------------------------------


@pytest.mark.parametrize("absent", [msgspec.UNSET, None])
def test_no_replay_from_is_no_cursor(absent: Any) -> None:
    assert replay_cursor(absent) is None


def test_start_is_the_whole_history() -> None:
    assert replay_cursor({"type": "start"}) == FromStart()


def test_after_message_names_its_message() -> None:
    cursor = {"type": "_after_message", "messageId": "user-3"}
    assert replay_cursor(cursor) == AfterMessage("user-3")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"type": "end"}, "$.replayFrom.type"),
        ({"type": "_other"}, "$.replayFrom.type"),
        ({}, "$.replayFrom.type"),
        ({"type": None}, "$.replayFrom.type"),
        ({"type": "_after_message"}, "$.replayFrom.messageId"),
        ({"type": "_after_message", "messageId": ""}, "$.replayFrom.messageId"),
        ({"type": "_after_message", "messageId": 4}, "$.replayFrom.messageId"),
        ("start", "$.replayFrom"),
    ],
)
def test_an_unsupported_cursor_is_refused_naming_the_field(value: Any, path: str) -> None:
    with pytest.raises(CursorError) as caught:
        replay_cursor(value)
    assert caught.value.path == path


# -- pages -----------------------------------------------------------------------------------


def test_a_page_is_cut_before_its_last_turn_start() -> None:
    events = three_turns().events
    starts = [i for i, e in enumerate(events) if type(e) is TurnStart]
    assert turn_cut(events) == starts[-1]
    assert turn_cut(events[: starts[-1]]) == starts[1]


def test_a_page_inside_one_turn_is_carried_whole() -> None:
    events = three_turns().events
    starts = [i for i, e in enumerate(events) if type(e) is TurnStart]
    assert turn_cut(events[starts[1] : starts[2]]) == 0
    assert turn_cut(events[starts[1] + 1 : starts[2]]) == 0
    assert turn_cut([]) == 0


def test_pages_cut_at_turns_project_as_the_whole_log_does() -> None:
    events = three_turns().events
    whole = project_load(events, BUILTIN_TOOLS.present)
    paged: list[SessionUpdate] = []
    carried: list[Any] = []
    for lo in range(0, len(events), 4):
        records = [*carried, *events[lo : lo + 4]]
        cut = turn_cut(records) if lo + 4 < len(events) else len(records)
        carried = records[cut:]
        paged.extend(project_load(records[:cut], BUILTIN_TOOLS.present))
    assert carried == []
    assert paged == whole


# -- whole messages --------------------------------------------------------------------------


def test_each_message_is_folded_whole_where_its_first_chunk_was() -> None:
    updates = project_load(three_turns().events, BUILTIN_TOOLS.present)
    assert wire(whole_messages(updates)) == [
        {"sessionUpdate": "user_message", "messageId": "u0", "content": [text("one")]},
        {"sessionUpdate": "agent_message", "messageId": "a0-0", "content": [text("One.")]},
        {"sessionUpdate": "user_message", "messageId": "u1", "content": [text("two")]},
        {
            "sessionUpdate": "agent_thought",
            "messageId": "a1-0",
            "content": [text("Hm."), text("So.")],
        },
        {"sessionUpdate": "agent_message", "messageId": "a1-0", "content": [text("Two.")]},
        {"sessionUpdate": "user_message", "messageId": "u2", "content": [text("three")]},
        {"sessionUpdate": "agent_message", "messageId": "a2-0", "content": [text("Three.")]},
    ]


def test_a_message_is_not_merged_across_another_update() -> None:
    plan = PlanShown([])
    updates: list[SessionUpdate] = [
        AgentMessageChunk(TextContent("a"), "m"),
        plan,
        AgentMessageChunk(TextContent("b"), "n"),
        UserMessageChunk(TextContent("c"), "u"),
        AgentThoughtChunk(TextContent("d"), "n"),
    ]
    assert whole_messages(updates) == [
        AgentMessageShown("m", [TextContent("a")]),
        plan,
        AgentMessageShown("n", [TextContent("b")]),
        UserMessageShown("u", [TextContent("c")]),
        AgentThoughtShown("n", [TextContent("d")]),
    ]


# -- after a message, stop reasons -----------------------------------------------------------


def test_after_a_message_is_just_after_its_last_update() -> None:
    updates = project_load(three_turns().events, BUILTIN_TOOLS.present)
    start = after_message(updates, "a1-0")
    assert start is not None
    assert [u.message_id for u in whole_messages(updates[start:])] == ["u2", "a2-0"]  # type: ignore[union-attr]
    assert after_message(updates, "u9") is None


def test_the_last_stop_reason_is_the_last_turn_ends() -> None:
    events = three_turns().events
    assert last_stop_reason(events, None) == "end_turn"
    assert last_stop_reason(events[:-8], None) == "cancelled"
    assert last_stop_reason([], "refusal") == "refusal"


def test_a_turn_that_failed_has_no_stop_reason() -> None:
    log = Log()
    log.user(TextContent("one")).answer("One.").turn_end()
    log.user(TextContent("two")).turn_end(TurnEndReasonError(ErrorInfo("down")))
    assert last_stop_reason(log.events, None) is None


def text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}
