"""MCP servers connecting in the background, through the real server (SPEC 4.5): `session/new`
answers while a server is still connecting, a prompt's model calls wait for it (bounded by
`--mcp-connect-timeout`) so its tools are offered, and `/mcp` says where each server is.

The held server of `tests/mcp_servers/held.py` answers nothing until the test creates its
release file: what the test sees before that happened while the server was held, so the
order is proven without a clock.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, ToolUse
from mcp_support import stdio_server
from polling import wait_until
from prompt_harness import FakeClient, PromptServer, decision

from acp_server.core.commands import help_text

pytestmark = pytest.mark.process

HELD = Path(__file__).parent / "mcp_servers" / "held.py"
SLOW = 120.0
"""Seconds a Python MCP server may take to start (the SDK's imports are slow on a busy
machine); no test waits for them to pass."""
FLAGS = ("--mcp-connect-timeout", str(SLOW))


def held_server(release: Path) -> dict[str, Any]:
    return {"name": "held", "command": sys.executable, "args": [str(HELD), str(release)], "env": []}


def test_session_new_answers_while_a_server_connects_and_a_prompt_waits_for_its_tools(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    ping = ToolUse("c1", "mcp__held__ping", "{}")
    scenario = Scenario([("go", [Step(calls=[ping]), Step(text="done")])])
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, scenario, *FLAGS, client=client) as server:
        # The server is held until `release` exists: this answer cannot have waited for it.
        session_id = server.new_session([held_server(release)])
        connecting = server.prompt(session_id, "/mcp").text()
        release.touch()
        answered = server.prompt(session_id, "go", timeout=SLOW)
        connected = server.prompt(session_id, "/mcp").text()
        log = server.log(session_id)

    assert connecting == "MCP servers (1):\n- held (stdio): connecting"
    assert answered.stop_reason == "end_turn"
    [closing] = [u for u in answered.updates if u.get("status") == "completed"]
    assert closing["content"] == [{"type": "content", "content": {"type": "text", "text": "pong"}}]
    assert connected == "MCP servers (1):\n- held (stdio): connected; 1 tool: ping"
    assert [e["type"] for e in log if e["type"].startswith("session/")] == []
    assert decision("c1", "allow_once", turn=1) in log


def test_mcp_lists_a_connected_server_with_its_tools_and_a_failed_one_with_why(
    tmp_path: Path,
) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    scenario = Scenario([("hello", [Step(text="hi")])])
    with PromptServer(tmp_path, scenario, *FLAGS) as server:
        session_id = server.new_session([stdio_server(), broken])
        report = server.read_update(SLOW)  # sent once both have settled
        listed = server.prompt(session_id, "/mcp").text()
        log = server.log(session_id)

    why = log[0]["data"]["description"]
    assert report["content"]["text"] == f"MCP server 'broken' is not available: {why}\n\n"
    assert listed == (
        "MCP servers (2):\n"
        "- demo (stdio): connected; 9 tools: echo, env_set, pid, repeat, kinds, fail, die, "
        "hang, greet\n"
        f"- broken (stdio): failed: {why}"
    )


def test_mcp_without_servers_says_so(tmp_path: Path) -> None:
    with PromptServer(tmp_path, Scenario([("hello", [Step(text="hi")])])) as server:
        session_id = server.new_session()
        listed = server.prompt(session_id, "/mcp")
    assert listed.text() == "No MCP servers: the client configured none for this session."


def test_help_lists_the_commands_and_is_a_command_turn_in_the_log(tmp_path: Path) -> None:
    with PromptServer(tmp_path, Scenario([("hello", [Step(text="hi")])])) as server:
        session_id = server.new_session()
        answered = server.prompt(session_id, "/help")
        log = server.log(session_id)
    assert answered.text() == help_text()
    assert [e["type"] for e in log] == [
        "turn/start",
        "user/message",
        "command/result",
        "turn/end",
    ]
    assert log[2]["data"] == {
        "turn": 0,
        "command": "help",
        "content": [{"type": "text", "text": help_text()}],
    }


def test_a_prompt_waiting_for_a_connecting_server_can_be_cancelled(tmp_path: Path) -> None:
    release = tmp_path / "release"
    scenario = Scenario([("go", [Step(text="never asked")])])
    with PromptServer(tmp_path, scenario, *FLAGS) as server:
        session_id = server.new_session([held_server(release)])
        prompt = server.send_request("session/prompt", server.prompt_params(session_id, "go"))
        # The turn has begun (its prompt is in the log) and waits for the held server.
        wait_until(lambda: len(server.log(session_id)) == 2, "the turn's user/message")
        server.cancel(session_id)
        answered = server.read_until_response(prompt)
        log = server.log(session_id)
        release.touch()  # let it go, so it is closed with the session like any server

    assert answered.stop_reason == "cancelled"
    assert [e["type"] for e in log] == ["turn/start", "user/message", "turn/end"]
    assert log[2]["data"] == {"turn": 0, "reason": {"kind": "cancelled"}}


def test_a_load_in_a_fresh_process_shows_mcp_calls_as_they_were_shown_live(
    tmp_path: Path,
) -> None:
    echo = ToolUse("c1", "mcp__demo__echo", '{"text": "hi"}')
    scenario = Scenario([("go", [Step(calls=[echo]), Step(text="done")])])
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, scenario, *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()])
        live = server.prompt(session_id, "go", timeout=SLOW).updates
    # A new process: the load's answer comes while its servers may still be connecting.
    with PromptServer(tmp_path, scenario, *FLAGS) as server:
        params = {"sessionId": session_id, "cwd": str(server.workspace)}
        loaded = server.request(
            "session/load", {**params, "mcpServers": [stdio_server()]}, timeout=SLOW
        ).updates
    [live_call] = [u for u in live if u["sessionUpdate"] == "tool_call"]
    [loaded_call] = [u for u in loaded if u["sessionUpdate"] == "tool_call"]
    assert (loaded_call, loaded_call["title"]) == (live_call, "demo: echo")
