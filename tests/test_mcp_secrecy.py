"""An MCP server's secrets stay out of the log and off the wire (SPEC 4.5).

A stdio server's `env` values and an HTTP server's header values are what it authenticates
with. The session log keeps each server's name, transport and command or URL only, so the
secrets are found nowhere under the sessions directory, in no frame the server sends (the
header a follower receives included), in no exported fixture, in no `log cat` output, and not
on the server's stderr, while the servers get them and work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args
from mcp_support import http_demo, http_server, stdio_server
from prompt_harness import FakeClient, PromptServer

pytestmark = pytest.mark.process

ENV_SECRET = "env-7Qh2Kd9LwZx4Rb6Tn"
HEADER_SECRET = "hdr-3Vm8Pj5YcFs1Ge0Ua"
URL_SECRET = "url-6Nb4Xr2Hq9Wt7Lk1Z"


def everything_under(root: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


def acp_server(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", *args], capture_output=True, text=True, check=True
    )
    return done.stdout + done.stderr


def test_mcp_secrets_reach_the_servers_and_no_file_frame_fixture_or_stderr(
    tmp_path: Path,
) -> None:
    calls = [
        ToolUse("c1", "mcp__local__env_set", args(name="DEMO_TOKEN")),
        ToolUse("c2", "mcp__remote__echo", args(text="hello")),
    ]
    scenario = Scenario([("go", [Step(calls=calls), Step(text="done")])])
    client = FakeClient(permissions=["allow_once", "allow_once"])
    flags = ("--mcp-connect-timeout", "120")
    with (
        http_demo(HEADER_SECRET) as url,
        PromptServer(tmp_path, scenario, *flags, client=client) as server,
    ):
        servers = [
            stdio_server("local", env={"DEMO_TOKEN": ENV_SECRET}),
            http_server(
                "remote",
                f"{url}?key={URL_SECRET}#{URL_SECRET}",
                {"Authorization": f"Bearer {HEADER_SECRET}"},
            ),
        ]
        session_id = server.new_session(servers, timeout=120)
        answered = server.prompt(session_id, "go", timeout=120)
        followed = server.request(
            "session.follow", {"address": {"kind": "session", "sessionId": session_id}}
        ).result
        server.request("session/close", {"sessionId": session_id})
    wire, stderr = b"\n".join(server.process.stdout_lines), server.process.stderr
    # The secrets did their work: the stdio server has its env, the HTTP server took the header.
    shown = [u["content"] for u in answered.updates if u.get("status") == "completed"]
    assert shown == [
        [{"type": "content", "content": {"type": "text", "text": "set"}}],
        [{"type": "content", "content": {"type": "text", "text": "echo: hello"}}],
    ]
    assert followed["header"]["mcpServers"] == [
        {"name": "local", "transport": "stdio", "command": sys.executable},
        {"name": "remote", "transport": "http", "url": url},
    ]
    sessions = server.sessions_dir
    exported = acp_server("fixture", "export", str(sessions / session_id), str(tmp_path / "fx"))
    exported += everything_under(tmp_path / "fx").decode()
    printed = acp_server("log", "cat", str(sessions / session_id))
    for secret in (ENV_SECRET, HEADER_SECRET, URL_SECRET):
        assert secret.encode() not in everything_under(sessions)
        assert secret.encode() not in wire
        assert secret not in stderr
        assert secret not in exported
        assert secret not in printed
    header = json.loads((sessions / session_id / "session.jsonl").read_bytes().split(b"\n")[0])
    assert header["mcpServers"] == followed["header"]["mcpServers"]
