"""ACP `session/update` payloads (SPEC 4.1, 4.2): exact wire shapes, checked against the
official `agent-client-protocol` models so a shape mistake fails here.
"""

from __future__ import annotations

from typing import Any

import acp.schema
import msgspec
import pytest
from acp_models import exact

from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.acp_updates import (
    AgentMessageChunk,
    AgentThoughtChunk,
    PlanShown,
    SessionInfoUpdate,
    SessionNotification,
    SessionUpdate,
    ToolCallUpdated,
    ToolContent,
    ToolTerminal,
    UserMessageChunk,
    assistant_message_id,
    tool_call_finished,
    tool_call_in_progress,
    tool_call_started,
    user_message_id,
)
from acp_server.core.content import (
    DiffContent,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    ResourceLink,
    TextContent,
)
from acp_server.core.events import PlanEntry, ToolCallLocation, ToolResultData


def wire(update: SessionUpdate) -> dict[str, Any]:
    """The update's JSON as sent, after checking that the official ACP models accept it and
    read back exactly the same keys (pydantic ignores unknown keys, so a misspelt one would
    otherwise pass; a field newer than those models is held to the SDK 2.4.0 schema)."""
    params = msgspec.json.decode(msgspec.json.encode(SessionNotification("sess-1", update)))
    exact(acp.schema.SessionNotification, params, "the notification")
    return params["update"]


def test_notification_params_carry_the_session_id_and_the_update() -> None:
    params = msgspec.to_builtins(
        SessionNotification("sess-1", AgentMessageChunk(TextContent("hi"), "m1"))
    )

    assert params == {
        "sessionId": "sess-1",
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"},
            "messageId": "m1",
        },
    }


# ---------------------------------------------------------------------------------------------
# Message chunks.


def test_user_message_chunk_shape() -> None:
    assert wire(UserMessageChunk(TextContent("read a.txt"), "user-0")) == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "read a.txt"},
        "messageId": "user-0",
    }


def test_user_message_chunk_carries_any_acp_content_block() -> None:
    blocks = [
        ImageContent("aGk=", "image/png"),
        ResourceLink("file:///w/a.txt", "a.txt", mime_type="text/plain"),
        EmbeddedResource(ResourceContents("file:///w/b.txt", text="bee")),
    ]

    assert [wire(UserMessageChunk(b, "user-0"))["content"] for b in blocks] == [
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
        {
            "type": "resource_link",
            "uri": "file:///w/a.txt",
            "name": "a.txt",
            "mimeType": "text/plain",
        },
        {"type": "resource", "resource": {"uri": "file:///w/b.txt", "text": "bee"}},
    ]


def test_agent_message_and_thought_chunk_shapes() -> None:
    assert wire(AgentMessageChunk(TextContent("Hello"), "assistant-0-0")) == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Hello"},
        "messageId": "assistant-0-0",
    }
    assert wire(AgentThoughtChunk(TextContent("Hmm"), "assistant-0-0")) == {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": "Hmm"},
        "messageId": "assistant-0-0",
    }


def test_message_chunk_without_an_id_omits_message_id() -> None:
    assert wire(AgentMessageChunk(TextContent("x"))) == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "x"},
    }


def test_message_ids_are_stable_per_turn_and_step() -> None:
    assert (assistant_message_id(2, 3), user_message_id(2)) == ("assistant-2-3", "user-2")


# ---------------------------------------------------------------------------------------------
# Tool calls, presented as the built-in tools' registry says.

present = BUILTIN_TOOLS.present


def test_tool_call_started_is_pending_with_kind_title_raw_input_and_location() -> None:
    assert wire(
        tool_call_started("call-1", "read_file", '{"path": "/w/src/app.py", "line": 3}', present)
    ) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-1",
        "title": "Read /w/src/app.py",
        "kind": "read",
        "status": "pending",
        "rawInput": {"path": "/w/src/app.py", "line": 3},
        "locations": [{"path": "/w/src/app.py", "line": 3}],
        "name": "read_file",
    }


def test_a_relative_path_is_left_to_the_results_locations() -> None:
    # ACP locations are absolute; the result names the file once the cwd has made it so.
    shown = wire(tool_call_started("c", "read_file", '{"path": "src/app.py"}', present))
    assert "locations" not in shown


def test_an_absolute_location_is_folded_lexically() -> None:
    shown = wire(tool_call_started("c", "edit_file", '{"path": "/w/a/../b.txt"}', present))
    assert shown["locations"] == [{"path": "/w/b.txt"}]


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "title"),
    [
        ("write_file", '{"path": "out.txt", "content": "x"}', "edit", "Write out.txt"),
        ("run_command", '{"command": "ls", "args": ["-l", "src"]}', "execute", "Run ls -l src"),
        ("todo_write", '{"todos": []}', "think", "Update the plan"),
        ("task", '{"prompt": "summarise the repo"}', "other", "Subagent: summarise the repo"),
        ("edit_file", '{"path": "a.py", "oldText": "x", "newText": "y"}', "edit", "Edit a.py"),
        ("list_directory", '{"path": "src"}', "read", "List src"),
        ("glob", '{"pattern": "**/*.py"}', "search", "Find **/*.py"),
        ("grep", '{"pattern": "TODO", "path": "src"}', "search", "Search TODO in src"),
        ("web_search", '{"q": "x"}', "other", "web_search"),
    ],
)
def test_tool_call_kind_and_title_follow_the_tool(
    name: str, arguments: str, kind: str, title: str
) -> None:
    shown = wire(tool_call_started("c", name, arguments, present))

    assert (shown["kind"], shown["title"]) == (kind, title)


def test_only_file_tools_carry_locations() -> None:
    assert wire(
        tool_call_started("c", "write_file", '{"path": "/w/o.txt", "content": ""}', present)
    )["locations"] == [{"path": "/w/o.txt"}]
    assert "locations" not in wire(
        tool_call_started("c", "run_command", '{"command": "ls"}', present)
    )


def test_tool_call_with_invalid_json_arguments_shows_the_raw_text() -> None:
    assert wire(tool_call_started("c", "read_file", '{"path": ', present)) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c",
        "title": "read_file",
        "kind": "read",
        "status": "pending",
        "rawInput": '{"path": ',
        "name": "read_file",
    }


def test_tool_title_collapses_whitespace_and_clips_at_80_characters() -> None:
    title = present("task", {"prompt": "do\n  this " + "x" * 100}).title

    assert len(title) == 80
    assert title == "Subagent: do this " + "x" * 61 + "…"


def test_tool_title_with_a_missing_or_mistyped_argument_is_the_tool_name() -> None:
    assert present("read_file", {"path": 3}).title == "read_file"
    assert present("run_command", ["ls"]).title == "run_command"


def test_tool_call_in_progress_shape() -> None:
    assert wire(tool_call_in_progress("call-1", "read_file")) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "in_progress",
        "name": "read_file",
    }


def test_tool_result_becomes_a_completed_update_with_content_and_raw_output() -> None:
    result = ToolResultData(0, 0, "call-1", [TextContent("file text")], raw_output={"bytes": 9})

    assert wire(tool_call_finished(result, "read_file")) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "file text"}}],
        "rawOutput": {"bytes": 9},
        "name": "read_file",
    }


def test_tool_call_in_progress_embeds_a_terminal() -> None:
    assert wire(tool_call_in_progress("call-1", "run_command", [ToolTerminal("term-1")])) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "in_progress",
        "content": [{"type": "terminal", "terminalId": "term-1"}],
        "name": "run_command",
    }


def test_tool_result_locations_become_the_updates_locations() -> None:
    result = ToolResultData(
        0,
        0,
        "call-1",
        [TextContent("a.py:3:x")],
        locations=[ToolCallLocation("/w/a.py", 3), ToolCallLocation("/w/b.py")],
    )

    assert wire(tool_call_finished(result, "grep")) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "a.py:3:x"}}],
        "locations": [{"path": "/w/a.py", "line": 3}, {"path": "/w/b.py"}],
        "name": "grep",
    }


def test_error_tool_result_becomes_a_failed_update() -> None:
    result = ToolResultData(0, 0, "call-2", [TextContent("permission denied")], is_error=True)

    assert wire(tool_call_finished(result, "write_file")) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-2",
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": "permission denied"}}],
        "name": "write_file",
    }


def test_diff_in_a_tool_result_becomes_acp_diff_content() -> None:
    result = ToolResultData(
        0, 0, "c", [DiffContent("/w/a.txt", "new\n", "old\n"), DiffContent("/w/b.txt", "made\n")]
    )

    assert wire(tool_call_finished(result, "edit_file"))["content"] == [
        {"type": "diff", "path": "/w/a.txt", "newText": "new\n", "oldText": "old\n"},
        {"type": "diff", "path": "/w/b.txt", "newText": "made\n"},
    ]


def test_an_mcp_tool_call_is_named_as_the_registry_names_it() -> None:
    started = wire(tool_call_started("c", "mcp__docs__search", '{"q": "x"}', present))
    finished = wire(tool_call_finished(ToolResultData(0, 0, "c", []), "mcp__docs__search"))

    assert (started["name"], finished["name"]) == ("mcp__docs__search", "mcp__docs__search")


def test_terminal_tool_content_shape() -> None:
    update = ToolCallUpdated(
        "c", "in_progress", [ToolTerminal("term-1"), ToolContent(TextContent("x"))]
    )

    assert wire(update)["content"] == [
        {"type": "terminal", "terminalId": "term-1"},
        {"type": "content", "content": {"type": "text", "text": "x"}},
    ]


# ---------------------------------------------------------------------------------------------
# Plan and title.


def test_plan_shape() -> None:
    entries = [
        PlanEntry("Read the code", "high", "completed"),
        PlanEntry("Write tests", "medium", "in_progress"),
    ]

    assert wire(PlanShown(entries)) == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "Read the code", "priority": "high", "status": "completed"},
            {"content": "Write tests", "priority": "medium", "status": "in_progress"},
        ],
    }


def test_session_info_update_shape() -> None:
    assert wire(SessionInfoUpdate("Fix the parser")) == {
        "sessionUpdate": "session_info_update",
        "title": "Fix the parser",
    }
