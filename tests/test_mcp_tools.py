"""MCP tools through the real server (SPEC 4.3, 4.5): the demo MCP server of
`tests/mcp_servers/demo.py`, over stdio and over HTTP on 127.0.0.1, called by llm-replay
fixtures that script `mcp__demo__<tool>` calls like any other tool call.

Every frame is checked against the official ACP models when a server closes (`PromptServer`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args
from mcp_support import http_demo, http_server, stdio_server
from prompt_harness import FakeClient, PromptServer

pytestmark = pytest.mark.process

TOKEN = "tok-5Jd8Wq2Zr7Lp4Xn1"

SLOW = 120.0
"""Seconds a Python MCP server may take to start and a request to be answered: the SDK's
imports take seconds of CPU on a busy machine. No test waits for them to pass."""
FLAGS = ("--mcp-connect-timeout", str(SLOW))


def one_call(name: str, arguments: str = "{}", *, then: str = "done") -> Scenario:
    """A turn whose first step calls `name` and whose second answers `then`."""
    return Scenario([("go", [Step(calls=[ToolUse("c1", name, arguments)]), Step(text=then)])])


def finished(updates: list[dict[str, Any]], call_id: str = "c1") -> dict[str, Any]:
    """The `tool_call_update` that closed the call."""
    [closing] = [
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update"
        and u["toolCallId"] == call_id
        and u["status"] in ("completed", "failed")
    ]
    return closing


def results(server: PromptServer, session_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in server.log(session_id) if e["type"] == "tool/result"]


def text(value: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": value}}


def test_a_scripted_mcp_call_reaches_the_server_and_its_result_the_client_and_the_log(
    tmp_path: Path,
) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(
        tmp_path, one_call("mcp__demo__echo", args(text="hi")), client=client
    ) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert answered.stop_reason == "end_turn"
        assert answered.updates[:3] == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "demo: echo",
                "kind": "other",
                "status": "pending",
                "rawInput": {"text": "hi"},
                "name": "mcp__demo__echo",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "status": "in_progress",
                "name": "mcp__demo__echo",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "status": "completed",
                "content": [text("echo: hi")],
                "rawOutput": {"result": "echo: hi"},
                "name": "mcp__demo__echo",
            },
        ]
        assert answered.text() == "done"
        assert [r["method"] for r in answered.requests] == ["session/request_permission"]
        assert answered.requests[0]["params"]["toolCall"]["title"] == "demo: echo"
        assert results(server, session_id) == [
            {
                "turn": 0,
                "step": 0,
                "callId": "c1",
                "content": [{"type": "text", "text": "echo: hi"}],
                "rawOutput": {"result": "echo: hi"},
            }
        ]


def test_mcp_content_of_every_kind_becomes_acp_content(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_call("mcp__demo__kinds"), *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert [item["content"] for item in finished(answered.updates)["content"]] == [
            {"type": "text", "text": "a text"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///notes.txt",
                    "text": "the notes",
                    "mimeType": "text/plain",
                },
            },
            {"type": "resource_link", "uri": "file:///big.bin", "name": "big.bin"},
        ]
        [result] = results(server, session_id)
        assert [item["type"] for item in result["content"]] == [
            "text",
            "image",
            "resource",
            "resource_link",
        ]


HUGE_NOTE = (
    "[truncated: the MCP server's result is 6291469 bytes, over the 1048576-byte limit; "
    "left out: 2097153 bytes of text, the structured content of 3145741 bytes]"
)
"""What is left out of 3 MiB of text (1 Mi three-byte characters) and its structured copy
`{"result": ...}` (3 MiB and 13 bytes as JSON) under the 1 MiB cap."""


@pytest.mark.process
def test_a_huge_mcp_result_is_cut_to_the_cap_with_a_note_on_the_wire_and_in_the_log(
    tmp_path: Path,
) -> None:
    client = FakeClient(permissions=["allow_once"])
    scenario = one_call("mcp__demo__repeat", args(unit="€", count=1 << 20))
    with PromptServer(tmp_path, scenario, *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert (answered.stop_reason, answered.text()) == ("end_turn", "done")
        shown = finished(answered.updates)
        [result] = results(server, session_id)

    # The kept text is compared by its characters and length: a failing diff of megabytes
    # would take longer than the test.
    assert "rawOutput" not in shown
    assert [item["content"]["text"][:1] for item in shown["content"]] == ["€", "["]
    assert [len(item["content"]["text"]) for item in shown["content"]] == [349525, len(HUGE_NOTE)]
    assert set(shown["content"][0]["content"]["text"]) == {"€"}
    assert shown["content"][1] == text(HUGE_NOTE)
    assert "rawOutput" not in result
    assert [item["text"] for item in result["content"]][1:] == [HUGE_NOTE]
    assert result["content"][0] == shown["content"][0]["content"]


def test_an_mcp_tool_error_is_a_failed_result_and_the_turn_goes_on(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    scenario = one_call("mcp__demo__fail", args(message="boom"))
    with PromptServer(tmp_path, scenario, *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert (answered.stop_reason, answered.text()) == ("end_turn", "done")
        assert finished(answered.updates) == {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "failed",
            "content": [text("Error executing tool fail: boom")],
            "name": "mcp__demo__fail",
        }
        assert results(server, session_id)[0]["isError"] is True


def test_a_server_that_dies_mid_call_gives_an_error_result_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_call("mcp__demo__die"), *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert (answered.stop_reason, answered.text()) == ("end_turn", "done")
        closing = finished(answered.updates)
        assert closing["status"] == "failed"
        assert closing["content"][0]["content"]["text"].startswith("the MCP server 'demo' failed: ")


def test_a_call_past_the_mcp_timeout_is_an_error_result(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    scenario = one_call("mcp__demo__hang")
    with PromptServer(tmp_path, scenario, *FLAGS, "--mcp-timeout", "0.2", client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert (answered.stop_reason, answered.text()) == ("end_turn", "done")
        assert finished(answered.updates)["content"] == [
            text("the MCP server 'demo' did not answer within 0.2 s")
        ]


def test_cancelling_the_turn_cancels_the_mcp_call(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_call("mcp__demo__hang"), *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        prompt = server.send_request("session/prompt", server.prompt_params(session_id, "go"))
        while True:  # answer the permission request, then wait for the call to start
            frame = server.process.read_frame(SLOW)
            if "id" in frame and "method" in frame:
                server.reply(frame["id"], client.answer(frame))
            elif frame.get("params", {}).get("update", {}).get("status") == "in_progress":
                break
        server.cancel(session_id)
        answered = server.read_until_response(prompt, timeout=SLOW)
        assert answered.stop_reason == "cancelled"
        assert finished(answered.updates)["content"] == [text("cancelled")]
        assert results(server, session_id)[0]["content"] == [{"type": "text", "text": "cancelled"}]


def test_allow_always_holds_for_that_mcp_tool_for_the_rest_of_the_session(tmp_path: Path) -> None:
    calls = [Step(calls=[ToolUse(f"c{n}", "mcp__demo__echo", args(text=str(n)))]) for n in (1, 2)]
    scenario = Scenario([("go", [*calls, Step(text="done")])])
    client = FakeClient(permissions=["allow_always"])
    with PromptServer(tmp_path, scenario, *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert [r["method"] for r in answered.requests] == ["session/request_permission"]
        assert finished(answered.updates, "c2")["content"] == [text("echo: 2")]


def test_a_rejected_mcp_call_is_an_error_result_and_never_reaches_the_server(
    tmp_path: Path,
) -> None:
    client = FakeClient(permissions=["reject_once"])
    with PromptServer(tmp_path, one_call("mcp__demo__die"), *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert finished(answered.updates)["content"] == [text("the user rejected this tool call")]


def test_a_server_that_cannot_start_leaves_the_session_usable_and_is_reported_once(
    tmp_path: Path,
) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    scenario = Scenario([("hello", [Step(text="hi there")])])
    with PromptServer(tmp_path, scenario) as server:
        session_id = server.new_session([broken], timeout=SLOW)
        report = server.read_update(SLOW)
        answered = server.prompt(session_id, "hello", timeout=SLOW)
        assert (answered.stop_reason, answered.text()) == ("end_turn", "hi there")
        stderr = server.process.stderr
    assert report["sessionUpdate"] == "agent_message_chunk"
    assert report["content"]["text"].startswith("MCP server 'broken' is not available: ")
    assert "MCP server 'broken' could not be connected" in stderr


def test_a_server_that_never_answers_is_left_out_after_the_connect_timeout(
    tmp_path: Path,
) -> None:
    # It reads what it is sent and never answers.
    reader = "import sys; sys.stdin.read()"
    silent = {"name": "silent", "command": sys.executable, "args": ["-c", reader], "env": []}
    scenario = Scenario([("hello", [Step(text="hi there")])])
    flags = ("--mcp-connect-timeout", "0.5")
    with PromptServer(tmp_path, scenario, *flags) as server:
        session_id = server.new_session([silent], timeout=SLOW)
        report = server.read_update(SLOW)
        answered = server.prompt(session_id, "hello", timeout=SLOW)
        assert answered.stop_reason == "end_turn"
    assert report["content"] == {
        "type": "text",
        "text": "MCP server 'silent' is not available: it did not connect within 0.5 s\n\n",
    }


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_an_mcp_tool_over_http_gets_the_headers_and_answers(tmp_path: Path, transport: str) -> None:
    client = FakeClient(permissions=["allow_once"])
    scenario = one_call("mcp__remote__echo", args(text="over http"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        http_demo(TOKEN, transport) as url,
        PromptServer(tmp_path, scenario, *FLAGS, client=client) as server,
    ):
        session_id = server.new_session(
            [http_server("remote", url, headers, transport)], timeout=SLOW
        )
        answered = server.prompt(session_id, "go", timeout=SLOW)
        assert finished(answered.updates)["content"] == [text("echo: over http")]


def test_an_http_server_refusing_the_headers_is_reported(tmp_path: Path) -> None:
    scenario = Scenario([("hello", [Step(text="hi")])])
    with http_demo(TOKEN) as url, PromptServer(tmp_path, scenario) as server:
        remote = http_server("remote", url, {"Authorization": "Bearer wrong-token"})
        server.new_session([remote], timeout=SLOW)
        report = server.read_update(SLOW)
    assert report["content"]["text"].startswith("MCP server 'remote' is not available: ")
    assert "wrong-token" not in report["content"]["text"]


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("ending", ["session/close", "end of input"])
def test_no_mcp_server_process_outlives_its_session(tmp_path: Path, ending: str) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(tmp_path, one_call("mcp__demo__pid"), *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        answered = server.prompt(session_id, "go", timeout=SLOW)
        pid = int(finished(answered.updates)["content"][0]["content"]["text"])
        assert not process_gone(pid)
        if ending == "session/close":
            closed = server.request("session/close", {"sessionId": session_id}, timeout=SLOW)
            assert closed.result == {}
            assert process_gone(pid)
    assert process_gone(pid)


def test_a_load_shows_mcp_calls_as_they_were_shown_live(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    scenario = one_call("mcp__demo__echo", args(text="hi"))
    with PromptServer(tmp_path, scenario, *FLAGS, client=client) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        live = server.prompt(session_id, "go", timeout=SLOW).updates
        loaded = server.request(
            "session/load",
            {"sessionId": session_id, "cwd": str(server.workspace), "mcpServers": [stdio_server()]},
            timeout=SLOW,
        ).updates
    [live_call] = [u for u in live if u["sessionUpdate"] == "tool_call"]
    [loaded_call] = [u for u in loaded if u["sessionUpdate"] == "tool_call"]
    assert loaded_call == live_call
    assert finished(loaded) == finished(live)
