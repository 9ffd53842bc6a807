"""Compactions and notices in the protocol's newer shapes, through the real server (SPEC 4.6,
4.7): to a client that advertised `session.compaction` and `session.notices`, and as the log
keeps them. Every frame is held to the TypeScript SDK's schema (`PromptServer` does it for the
newer updates; the others are checked here with `sdk_schema`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sdk_schema
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step
from openai_server import FakeOpenAI, Sse, Status, chunk, text, usage
from prompt_harness import PromptServer

pytestmark = pytest.mark.process

NEWER = {"session": {"compaction": {}, "notices": {}}}
SLOW = 30.0
LIVE_STATE = ("available_commands_update", "current_mode_update", "config_option_update")


def shown(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The updates but those that announce the session's commands, mode and options."""
    return [u for u in updates if u["sessionUpdate"] not in LIVE_STATE]


def test_compact_streams_a_compaction_and_a_load_replays_it_at_its_place(tmp_path: Path) -> None:
    scenario = Scenario(
        [("My name is Ada.", [Step(text="Hello Ada.")]), ("/compact", [Step(text="Ada.")])]
    )
    with PromptServer(tmp_path, scenario, capabilities=NEWER) as server:
        session_id = server.new_session()
        server.prompt(session_id, "My name is Ada.")
        compacted = server.prompt(session_id, "/compact")
        assert shown(compacted.updates) == [
            {
                "sessionUpdate": "compaction_update",
                "compactionId": "compaction-1-0",
                "status": "in_progress",
            },
            {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": "compaction-1-0",
                "content": {"type": "text", "text": "Ada"},
            },
            {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": "compaction-1-0",
                "content": {"type": "text", "text": "."},
            },
            {
                "sessionUpdate": "compaction_update",
                "compactionId": "compaction-1-0",
                "status": "completed",
                "summary": [{"type": "text", "text": "Ada."}],
            },
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "The conversation was compacted."},
                "messageId": "command-1",
            },
        ]

    with PromptServer(tmp_path, scenario, capabilities=NEWER) as server:
        params = {"sessionId": session_id, "cwd": str(server.workspace), "mcpServers": []}
        loaded = server.request("session/load", params)
        assert shown(loaded.updates) == [
            {
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": "My name is Ada."},
                "messageId": "user-0",
            },
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Hello Ada."},
                "messageId": "assistant-0-0",
            },
            {
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": "/compact"},
                "messageId": "user-1",
            },
            {
                "sessionUpdate": "compaction_update",
                "compactionId": "compaction-1-0",
                "status": "completed",
                "summary": [{"type": "text", "text": "Ada."}],
            },
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "The conversation was compacted."},
                "messageId": "command-1",
            },
        ]


def test_an_mcp_server_that_did_not_connect_is_a_notice_the_log_keeps_and_a_load_does_not_replay(
    tmp_path: Path,
) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    scenario = Scenario([("hello", [Step(text="hi there")])])
    with PromptServer(tmp_path, scenario, capabilities=NEWER) as server:
        session_id = server.new_session([broken], timeout=SLOW)
        update = server.read_update(SLOW)
        while update["sessionUpdate"] in LIVE_STATE:
            update = server.read_update(SLOW)
        page = server.request(
            "session.page",
            {"address": {"kind": "session", "sessionId": session_id}, "throughSeq": 0},
        ).result
        params = {"sessionId": session_id, "cwd": str(server.workspace), "mcpServers": []}
        loaded = server.request("session/load", params)
        log = server.log(session_id)

    assert (update["sessionUpdate"], update["severity"], update["title"]) == (
        "notice",
        "warning",
        "MCP server broken is not available",
    )
    notice = {
        "type": "session/notice",
        "data": {k: update[k] for k in ("severity", "title", "description")},
    }
    assert log == [notice]
    assert [
        {k: r["event"][k] for k in ("type", "data")} for r in page["records"]
    ] == server.normalize([notice])
    assert shown(loaded.updates) == []


def test_a_client_without_notices_is_told_of_a_missing_mcp_server_as_before(
    tmp_path: Path,
) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    scenario = Scenario([("hello", [Step(text="hi there")])])
    with PromptServer(tmp_path, scenario) as server:
        session_id = server.new_session([broken], timeout=SLOW)
        update = server.read_update(SLOW)
        while update["sessionUpdate"] in LIVE_STATE:
            update = server.read_update(SLOW)
        log = server.log(session_id)

    assert update["sessionUpdate"] == "agent_message_chunk"
    assert update["content"]["text"] == (
        f"MCP server 'broken' is not available: {log[0]['data']['description']}\n\n"
    )
    assert [event["type"] for event in log] == ["session/notice"]


def test_a_retried_model_request_is_a_notice_to_the_client_and_in_the_log(tmp_path: Path) -> None:
    overloaded = Status(503, {"error": {"message": "overloaded"}}, {"retry-after-ms": "10"})
    answer = Sse([text("Hi."), chunk(finish="stop"), usage(10, 2)])
    with FakeOpenAI([overloaded, answer]) as model:
        flags = (
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--titles",
            "off",
            "--base-url",
            model.base_url,
        )
        with AcpProcess(tmp_path / "sessions", *flags) as server:
            server.result("initialize", {"protocolVersion": 1, "clientCapabilities": NEWER})
            session_id = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})[
                "sessionId"
            ]
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
            response, before = server.exchange("session/prompt", prompt)

    assert response["result"] == {"stopReason": "end_turn"}
    notices = [
        f for f in before if f.get("params", {}).get("update", {}).get("sessionUpdate") == "notice"
    ]
    for frame in notices:
        sdk_schema.check("SessionNotification", frame["params"])
    url = f"{model.base_url}/chat/completions"
    assert [f["params"]["update"] for f in notices] == [
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Model request failed (503); retrying",
            "description": f"openai: HTTP 503 Service Unavailable from {url}: overloaded. "
            "Attempt 2 of 4 in 0.01 s.",
        }
    ]
