"""A `task` call's child as ACP subagent updates (`subagent_update`, `session_message`) for a
client that advertised `clientCapabilities.subagents` (SPEC 4.7), derived from the parent's log
alone, so that a load shows what the live turn showed.

Frames are held to the schema of the TypeScript SDK 2.4.0 (`sdk_schema`). A client without the
capability gets today's updates (tests/test_prompt_subagent.py holds those byte for byte).
"""

from __future__ import annotations

from typing import Any

import msgspec
from sdk_schema import check
from test_projection import Log, text, user_chunk

from acp_server.agent.loop import CANCELLED_RESULT_TEXT
from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.acp_updates import (
    AgentMessageChunk,
    SessionNotification,
    SessionUpdate,
    UserMessageChunk,
)
from acp_server.core.content import TextContent
from acp_server.core.events import (
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
)
from acp_server.core.projection import project_load
from acp_server.core.recovery import INTERRUPTED_RESULT_TEXT
from acp_server.core.stream import AssistantToolCall, Finish
from acp_server.core.subagent_updates import (
    CANCELLED_TEXT,
    MODEL_REQUEST_FAILED,
    child_replay,
    prompt_received,
    subagent_finished,
    subagent_started,
    task_prompt,
    with_children,
)
from acp_server.server.errors import ModelRequestError
from acp_server.server.protocol import marker_advertised

PARENT = "sess-1"
CHILD = "child-1"
RUNNING = {"sessionUpdate": "subagent_update", "sessionId": CHILD, "state": {"state": "running"}}
PROMPT = {
    "sessionUpdate": "session_message",
    "messageId": f"subagent-{CHILD}-prompt",
    "senderSessionId": PARENT,
    "recipientSessionId": CHILD,
    "recipientMessageId": "user-0",
    "content": [text("Count the files")],
}
ANSWER = {
    "sessionUpdate": "session_message",
    "messageId": f"subagent-{CHILD}-answer",
    "senderSessionId": CHILD,
    "recipientSessionId": PARENT,
    "content": [text("There are 2 files.")],
}


def idle(**state: Any) -> dict[str, Any]:
    return {
        "sessionUpdate": "subagent_update",
        "sessionId": CHILD,
        "state": {"state": "idle", **state},
    }


def wire(updates: list[SessionUpdate]) -> list[dict[str, Any]]:
    """The updates as the client receives them, each held to the SDK's `SessionNotification`."""
    values = []
    for update in updates:
        params = msgspec.to_builtins(SessionNotification(PARENT, update))
        check("SessionNotification", params)
        values.append(params["update"])
    return values


def result(*content: TextContent, raw: Any = msgspec.UNSET, error: bool = False) -> ToolResultData:
    return ToolResultData(0, 0, "call_task", list(content), True if error else msgspec.UNSET, raw)


def test_a_started_child_is_announced_running_then_sent_its_prompt() -> None:
    assert wire(subagent_started(PARENT, CHILD, "Count the files")) == [RUNNING, PROMPT]


def test_a_child_that_answered_sends_its_answer_then_goes_idle_with_its_stop_reason() -> None:
    done = result(
        TextContent("There are 2 files."), raw={"childSessionId": CHILD, "stopReason": "end_turn"}
    )

    assert wire(subagent_finished(PARENT, CHILD, done)) == [ANSWER, idle(stopReason="end_turn")]


def test_a_child_whose_turn_ended_without_text_goes_idle_without_a_message() -> None:
    raw = {"childSessionId": CHILD, "stopReason": "max_turn_requests"}
    stopped = result(TextContent(""), raw=raw, error=True)

    assert wire(subagent_finished(PARENT, CHILD, stopped)) == [idle(stopReason="max_turn_requests")]


def test_a_child_whose_model_request_failed_goes_idle_with_the_error() -> None:
    failed = result(
        TextContent("the subagent failed: rate limited"),
        raw={"childSessionId": CHILD, "error": "rate limited"},
        error=True,
    )

    assert wire(subagent_finished(PARENT, CHILD, failed)) == [
        idle(
            stopReason="error",
            error={
                "code": -32012,
                "message": "Model request failed: rate limited",
                "data": {"message": "rate limited"},
            },
        )
    ]


def test_the_error_code_of_a_failed_child_is_the_servers_model_request_error() -> None:
    assert MODEL_REQUEST_FAILED == ModelRequestError.CODE


def test_a_child_cancelled_with_its_parents_turn_goes_idle_cancelled() -> None:
    cancelled = result(TextContent(CANCELLED_RESULT_TEXT), error=True)

    assert CANCELLED_TEXT == CANCELLED_RESULT_TEXT
    assert wire(subagent_finished(PARENT, CHILD, cancelled)) == [idle(stopReason="cancelled")]


def test_a_child_whose_process_died_goes_idle_with_no_stop_reason_reported() -> None:
    interrupted = result(TextContent(INTERRUPTED_RESULT_TEXT), error=True)

    assert wire(subagent_finished(PARENT, CHILD, interrupted)) == [idle()]


def test_a_child_with_no_prompt_in_its_arguments_is_sent_a_message_without_content() -> None:
    assert task_prompt("{not json") is None
    assert wire(subagent_started(PARENT, CHILD, None))[1] == {
        k: v for k, v in PROMPT.items() if k != "content"
    }


def delegated_log() -> Log:
    """A turn whose one step calls `task`, which ran the child `CHILD` and got its answer."""
    arguments = '{"prompt": "Count the files"}'
    log = (
        Log()
        .user(TextContent("delegate"))
        .chunks(Finish("tool-calls"))
        .message(AssistantToolCall("call_task", "task", arguments))
    )
    log._add(ToolCall, ToolCallData(0, 0, "call_task", "task", arguments))
    call_seq = len(log.events) - 1
    log._add(SubagentStart, SubagentStartData(0, 0, "call_task", CHILD, "one-shot"))
    done = result(
        TextContent("There are 2 files."), raw={"childSessionId": CHILD, "stopReason": "end_turn"}
    )
    log._add(ToolResult, done, source_range=(call_seq, call_seq))
    return log.step_end().answer("Two files.").turn_end()


TOOL_CALL = {
    "sessionUpdate": "tool_call",
    "toolCallId": "call_task",
    "title": "Subagent: Count the files",
    "kind": "other",
    "status": "pending",
    "rawInput": {"prompt": "Count the files"},
    "name": "task",
}
TOOL_RESULT = {
    "sessionUpdate": "tool_call_update",
    "toolCallId": "call_task",
    "status": "completed",
    "content": [{"type": "content", "content": text("There are 2 files.")}],
    "rawOutput": {"childSessionId": CHILD, "stopReason": "end_turn"},
    "name": "task",
}


def test_a_load_shows_the_child_between_the_task_call_and_its_result() -> None:
    updates = project_load(
        delegated_log().events, BUILTIN_TOOLS.present, subagents=True, session_id=PARENT
    )

    assert wire(updates) == [
        user_chunk("delegate", "u0"),
        TOOL_CALL,
        RUNNING,
        PROMPT,
        ANSWER,
        idle(stopReason="end_turn"),
        TOOL_RESULT,
        {
            "sessionUpdate": "agent_message_chunk",
            "content": text("Two files."),
            "messageId": "a0-1",
        },
    ]


def test_a_load_without_the_capability_shows_the_task_call_alone() -> None:
    updates = project_load(delegated_log().events, BUILTIN_TOOLS.present)

    assert [u["sessionUpdate"] for u in wire(updates)] == [
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]


def test_the_capability_is_advertised_by_an_object_only() -> None:
    assert [marker_advertised(v) for v in ({}, {"_meta": {}}, None, True, "yes", [])] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]


RECEIVED = {
    "sessionUpdate": "session_message",
    "messageId": "user-0",
    "senderSessionId": PARENT,
    "recipientSessionId": CHILD,
    "senderMessageId": f"subagent-{CHILD}-prompt",
    "content": [text("Count the files")],
}


def test_the_childs_own_stream_holds_the_prompt_as_its_first_message_received_from_the_parent() -> (
    None
):
    assert wire([prompt_received(PARENT, CHILD, [TextContent("Count the files")])]) == [RECEIVED]


def test_a_childs_replay_shows_its_user_message_as_the_message_received_from_the_parent() -> None:
    replayed = [
        UserMessageChunk(TextContent("Count the files"), "user-0"),
        AgentMessageChunk(TextContent("There are 2 files."), "assistant-0-0"),
    ]

    assert wire(child_replay(PARENT, CHILD, replayed)) == [
        RECEIVED,
        {
            "sessionUpdate": "agent_message_chunk",
            "content": text("There are 2 files."),
            "messageId": "assistant-0-0",
        },
    ]


def test_a_load_puts_each_childs_replay_after_the_prompt_its_parent_sent_it() -> None:
    parent = project_load(
        delegated_log().events, BUILTIN_TOOLS.present, subagents=True, session_id=PARENT
    )
    child = [prompt_received(PARENT, CHILD, [TextContent("Count the files")])]

    notifications = with_children(PARENT, parent, {CHILD: child})

    assert [(n.session_id, n.update) for n in notifications] == [
        *[(PARENT, u) for u in parent[:4]],
        (CHILD, child[0]),
        *[(PARENT, u) for u in parent[4:]],
    ]


def test_a_load_without_a_childs_replay_shows_the_parents_updates_alone() -> None:
    parent = project_load(
        delegated_log().events, BUILTIN_TOOLS.present, subagents=True, session_id=PARENT
    )

    notifications = with_children(PARENT, parent, {})

    assert [(n.session_id, n.update) for n in notifications] == [(PARENT, u) for u in parent]


def test_a_load_shows_a_child_whose_log_names_another_parent_as_a_plain_task_call() -> None:
    updates = project_load(
        delegated_log().events,
        BUILTIN_TOOLS.present,
        subagents=True,
        session_id=PARENT,
        foreign_children={CHILD},
    )

    assert wire(updates)[1:3] == [TOOL_CALL, TOOL_RESULT]
