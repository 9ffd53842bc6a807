"""What a v2 connection is sent for each update the server shows (`core.acp_v2`): every kind
rendered, each result held to the SDK 2.4.0 v2 schema (`UpdateSessionNotification`); and the
one place that renders them per connection (`server.port.ConnectionPort`)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from sdk_schema import check_v2

from acp_server.core.acp_updates import (
    PLAN_ID,
    AgentMessageChunk,
    AgentMessageShown,
    AgentThoughtChunk,
    AgentThoughtShown,
    AvailableCommand,
    AvailableCommandsUpdate,
    CommandInput,
    CompactionShown,
    CompactionSummaryChunk,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    ErrorObject,
    IdleState,
    NoticeShown,
    PlanItems,
    PlanRemoved,
    PlanShown,
    PlanUpdated,
    SessionInfoUpdate,
    SessionMessageShown,
    SessionNotification,
    SessionUpdate,
    StateShown,
    SubagentUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolDiff,
    UsageShown,
    UserMessageChunk,
    UserMessageShown,
)
from acp_server.core.acp_v2 import (
    V2Notification,
    content_message_id,
    permission_request,
    render,
)
from acp_server.core.content import ResourceLink, TextContent
from acp_server.core.events import PlanEntry, ToolCallLocation
from acp_server.core.modes import ConfigOption, ConfigSelectOption
from acp_server.server.port import ConnectionPort
from acp_server.server.protocol import ClientCapabilities, ClientSessionCapabilities

SESSION = "sess_v2"


def wire(update: SessionUpdate, *, subagents: bool = False) -> list[dict[str, Any]]:
    """`update` as v2 sends it: each `session/update` params, checked against the v2 schema."""
    shown = []
    for rendered in render(update, subagents=subagents):
        params = msgspec.to_builtins(V2Notification(SESSION, rendered))
        check_v2("UpdateSessionNotification", params)
        assert params["sessionId"] == SESSION
        shown.append(params["update"])
    return shown


def test_a_user_chunk_keeps_its_message_id() -> None:
    update = UserMessageChunk(TextContent("hi"), "user-0")
    assert wire(update) == [
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "hi"},
            "messageId": "user-0",
        }
    ]


def test_agent_message_and_thought_chunks_keep_their_message_ids() -> None:
    message = AgentMessageChunk(TextContent("Hello"), "assistant-0-0")
    thought = AgentThoughtChunk(TextContent("hmm"), "assistant-0-0")
    assert wire(message)[0]["messageId"] == "assistant-0-0"
    assert wire(thought) == [
        {
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "hmm"},
            "messageId": "assistant-0-0",
        }
    ]


def test_a_chunk_without_an_id_gets_one_derived_from_its_content() -> None:
    note = AgentMessageChunk(TextContent("MCP server 'x' is not available: gone\n\n"))
    first, again = wire(note), wire(note)
    assert first == again
    assert first[0]["messageId"] == content_message_id(note.content)
    assert first[0]["messageId"].startswith("note-")
    other = AgentMessageChunk(TextContent("another note"))
    assert wire(other)[0]["messageId"] != first[0]["messageId"]


def test_whole_messages_and_thoughts_go_out_as_they_are() -> None:
    link = ResourceLink("file:///tmp/a.txt", "a.txt")
    assert wire(UserMessageShown("user-3", [TextContent("look"), link])) == [
        {
            "sessionUpdate": "user_message",
            "messageId": "user-3",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "resource_link", "uri": "file:///tmp/a.txt", "name": "a.txt"},
            ],
        }
    ]
    assert wire(AgentMessageShown("assistant-3-0", []))[0] == {
        "sessionUpdate": "agent_message",
        "messageId": "assistant-3-0",
        "content": [],
    }
    assert wire(AgentThoughtShown("assistant-3-0", [TextContent("so")]))[0]["content"] == [
        {"type": "text", "text": "so"}
    ]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (StateShown("running"), {"sessionUpdate": "state_update", "state": "running"}),
        (
            StateShown("requires_action"),
            {"sessionUpdate": "state_update", "state": "requires_action"},
        ),
        (
            StateShown("idle", "end_turn"),
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"},
        ),
        (
            StateShown("idle", "cancelled"),
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"},
        ),
        (
            StateShown("idle", "error", ErrorObject(-32603, "the model request failed")),
            {
                "sessionUpdate": "state_update",
                "state": "idle",
                "stopReason": "error",
                "error": {"code": -32603, "message": "the model request failed"},
            },
        ),
    ],
)
def test_state_updates_go_out_as_they_are(state: StateShown, expected: dict[str, Any]) -> None:
    assert wire(state) == [expected]


def test_a_tool_call_becomes_its_first_tool_call_update_with_title_and_name() -> None:
    started = ToolCallStarted(
        "call_1",
        "Read a.txt",
        "read",
        "pending",
        {"path": "/tmp/a.txt"},
        [ToolCallLocation("/tmp/a.txt", 3)],
        "read_file",
    )
    assert wire(started) == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "title": "Read a.txt",
            "kind": "read",
            "status": "pending",
            "locations": [{"path": "/tmp/a.txt", "line": 3}],
            "rawInput": {"path": "/tmp/a.txt"},
            "name": "read_file",
        }
    ]


def test_a_tool_call_update_keeps_its_content_output_and_name() -> None:
    finished = ToolCallUpdated(
        "call_1",
        "completed",
        [ToolContent(TextContent("done")), ToolDiff("/tmp/a.txt", "new\n", "old\n")],
        raw_output={"ok": True},
        name="write_file",
    )
    assert wire(finished) == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "status": "completed",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "done"}},
                {
                    "type": "diff",
                    "changes": [{"operation": "modify", "path": "/tmp/a.txt", "fileType": "text"}],
                    "patch": {
                        "format": "git_patch",
                        "text": "diff --git a/tmp/a.txt b/tmp/a.txt\n"
                        "--- a/tmp/a.txt\n+++ b/tmp/a.txt\n@@ -1 +1 @@\n-old\n+new\n",
                    },
                },
            ],
            "rawOutput": {"ok": True},
            "name": "write_file",
        }
    ]


def test_a_new_file_is_an_added_change_patched_from_dev_null() -> None:
    [update] = wire(ToolCallUpdated("call_3", "completed", [ToolDiff("/tmp/n.txt", "one")]))
    assert update["content"] == [
        {
            "type": "diff",
            "changes": [{"operation": "add", "path": "/tmp/n.txt", "fileType": "text"}],
            "patch": {
                "format": "git_patch",
                "text": "diff --git a/tmp/n.txt b/tmp/n.txt\nnew file mode 100644\n"
                "--- /dev/null\n+++ b/tmp/n.txt\n@@ -0,0 +1 @@\n+one\n"
                "\\ No newline at end of file\n",
            },
        }
    ]


def test_a_failed_tool_call_is_failed() -> None:
    assert wire(ToolCallUpdated("call_2", "failed"))[0]["status"] == "failed"


def test_a_plan_is_the_sessions_one_plan_update() -> None:
    entries = [PlanEntry("Read the code", "high", "in_progress")]
    expected = {
        "sessionUpdate": "plan_update",
        "plan": {
            "type": "items",
            "planId": PLAN_ID,
            "entries": [{"content": "Read the code", "priority": "high", "status": "in_progress"}],
        },
    }
    assert wire(PlanShown(entries)) == [expected]
    assert wire(PlanUpdated(PlanItems(PLAN_ID, entries))) == [expected]


def test_an_empty_plan_and_a_removed_plan_are_plan_removed() -> None:
    removed = {"sessionUpdate": "plan_removed", "planId": PLAN_ID}
    assert wire(PlanShown([])) == [removed]
    assert wire(PlanRemoved(PLAN_ID)) == [removed]


def test_a_mode_change_is_not_sent_v2_has_no_modes() -> None:
    assert wire(CurrentModeUpdate("plan")) == []


def test_config_options_name_their_id_config_id() -> None:
    option = ConfigOption(
        "mode", "Mode", "mode", "ask", [ConfigSelectOption("ask", "Ask", "Asks first")]
    )
    assert wire(ConfigOptionUpdate([option])) == [
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {
                    "type": "select",
                    "configId": "mode",
                    "name": "Mode",
                    "category": "mode",
                    "currentValue": "ask",
                    "options": [{"value": "ask", "name": "Ask", "description": "Asks first"}],
                }
            ],
        }
    ]


def test_commands_are_typed_command() -> None:
    update = AvailableCommandsUpdate(
        [
            AvailableCommand("stats", "Show the session's figures"),
            AvailableCommand("compact", "Compact the context", CommandInput("instructions")),
        ]
    )
    assert wire(update) == [
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"type": "command", "name": "stats", "description": "Show the session's figures"},
                {
                    "type": "command",
                    "name": "compact",
                    "description": "Compact the context",
                    "input": {"type": "text", "hint": "instructions"},
                },
            ],
        }
    ]


def test_usage_notice_session_info_and_compactions_go_out_as_they_are() -> None:
    assert wire(UsageShown(120, 1000)) == [
        {"sessionUpdate": "usage_update", "used": 120, "size": 1000}
    ]
    assert wire(NoticeShown("warning", "Prompt queued", "It runs next.")) == [
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Prompt queued",
            "description": "It runs next.",
        }
    ]
    assert wire(SessionInfoUpdate("A title")) == [
        {"sessionUpdate": "session_info_update", "title": "A title"}
    ]
    assert wire(CompactionShown("compaction-1-0", "in_progress")) == [
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "compaction-1-0",
            "status": "in_progress",
        }
    ]
    assert wire(CompactionSummaryChunk("compaction-1-0", TextContent("so far"))) == [
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "compaction-1-0",
            "content": {"type": "text", "text": "so far"},
        }
    ]


def test_subagent_kinds_only_to_a_client_shown_subagents() -> None:
    announced = SubagentUpdated("sess_child", IdleState("end_turn"))
    message = SessionMessageShown("user-0", content=[TextContent("do it")])
    assert wire(announced) == []
    assert wire(message) == []
    assert wire(announced, subagents=True) == [
        {
            "sessionUpdate": "subagent_update",
            "sessionId": "sess_child",
            "state": {"state": "idle", "stopReason": "end_turn"},
        }
    ]
    assert wire(message, subagents=True)[0]["messageId"] == "user-0"


def test_a_permission_request_has_the_calls_title_and_the_call_as_its_subject() -> None:
    v1 = {
        "sessionId": SESSION,
        "toolCall": {
            "toolCallId": "call_1",
            "title": "Write a.txt",
            "kind": "edit",
            "status": "pending",
            "rawInput": {"path": "/tmp/a.txt"},
        },
        "options": [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"}],
    }
    v2 = permission_request(v1)
    check_v2("RequestPermissionRequest", v2)
    assert v2 == {
        "sessionId": SESSION,
        "title": "Write a.txt",
        "subject": {"type": "tool_call", "toolCall": v1["toolCall"]},
        "options": v1["options"],
    }


def test_a_form_elicitation_is_already_v2_shaped() -> None:
    # What `agent.tools.elicitation.elicit` sends: the session (and call) it belongs to.
    params = {
        "sessionId": SESSION,
        "toolCallId": "call_1",
        "message": "Which colour?",
        "mode": "form",
        "requestedSchema": {
            "type": "object",
            "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
        },
    }
    check_v2("CreateElicitationRequest", params)


class FakeConnection:
    """What the port writes to: each (method, params) sent, as plain JSON values."""

    def __init__(self, version: int) -> None:
        self.protocol_version = version
        self.sent: list[tuple[str, Any]] = []
        self.asked: list[tuple[str, Any]] = []

    async def notify(self, method: str, params: Any) -> None:
        self.sent.append((method, msgspec.to_builtins(params)))

    async def notify_all(self, method: str, params: Any) -> None:
        for one in params:
            await self.notify(method, one)

    async def request(self, method: str, params: Any) -> Any:
        self.asked.append((method, params))
        return {}


class FakeAgent:
    def __init__(self, version: int) -> None:
        self.connection = FakeConnection(version)
        self.client_capabilities = ClientCapabilities()
        self.client_session_capabilities = ClientSessionCapabilities()


def port(version: int) -> tuple[ConnectionPort, FakeConnection]:
    agent = FakeAgent(version)
    return ConnectionPort(agent), agent.connection  # type: ignore[arg-type]


STREAM = [
    SessionNotification(SESSION, StateShown("running")),
    SessionNotification(SESSION, AgentMessageChunk(TextContent("Hi"), "assistant-0-0")),
    SessionNotification(SESSION, CurrentModeUpdate("ask")),
    SessionNotification(SESSION, StateShown("idle", "end_turn")),
]


@pytest.mark.anyio
async def test_a_v1_connection_is_never_sent_the_v2_only_kinds() -> None:
    v1, wire_ = port(1)
    await v1.notify("session/update", STREAM[0])
    await v1.notify_all("session/update", STREAM)

    assert [params["update"]["sessionUpdate"] for _, params in wire_.sent] == [
        "agent_message_chunk",
        "current_mode_update",
    ]


@pytest.mark.anyio
async def test_a_v2_connection_is_sent_each_update_in_v2s_shape() -> None:
    v2, wire_ = port(2)
    await v2.notify("session/update", STREAM[0])
    await v2.notify_all("session/update", STREAM[1:])

    for _, params in wire_.sent:
        check_v2("UpdateSessionNotification", params)
    assert [params["update"]["sessionUpdate"] for _, params in wire_.sent] == [
        "state_update",
        "agent_message_chunk",
        "state_update",
    ]


@pytest.mark.anyio
async def test_a_v2_connection_is_asked_permission_in_v2s_shape_and_v1_as_before() -> None:
    v1_params = {
        "sessionId": SESSION,
        "toolCall": {"toolCallId": "call_1", "title": "Write a.txt"},
        "options": [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"}],
    }
    v1, v1_wire = port(1)
    v2, v2_wire = port(2)
    await v1.request("session/request_permission", v1_params)
    await v2.request("session/request_permission", v1_params)

    assert v1_wire.asked == [("session/request_permission", v1_params)]
    assert v2_wire.asked == [("session/request_permission", permission_request(v1_params))]


def test_only_a_v2_connection_shows_state_and_whole_messages() -> None:
    assert (port(1)[0].capabilities.shows_state, port(2)[0].capabilities.shows_state) == (
        False,
        True,
    )
