"""An MCP server's secrets stay out of the log and off the wire (SPEC 4.5).

A stdio server's `env` values and an HTTP server's header values are what it authenticates
with. The session log keeps each server's name, transport and command or URL only, so the
secrets are found nowhere under the sessions directory, in no frame the server sends (the
header a follower receives included), in no exported fixture, in no `log cat` output, and not
on the server's stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from acp_process import AcpProcess
from mcp_support import http_demo, http_server, stdio_server

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


def test_mcp_secrets_reach_no_file_frame_fixture_or_stderr(tmp_path: Path) -> None:
    sessions, workspace = tmp_path / "sessions", tmp_path / "work"
    workspace.mkdir()
    with http_demo(HEADER_SECRET) as url:
        servers = [
            stdio_server("local", env={"DEMO_TOKEN": ENV_SECRET}),
            http_server(
                "remote",
                url.replace("http://", f"http://user:{URL_SECRET}@") + f"?key={URL_SECRET}",
                {"Authorization": f"Bearer {HEADER_SECRET}"},
            ),
        ]
        with AcpProcess(sessions) as server:
            server.initialize()
            session_id = server.result(
                "session/new", {"cwd": str(workspace), "mcpServers": servers}
            )["sessionId"]
            followed = server.result(
                "session.follow", {"address": {"kind": "session", "sessionId": session_id}}
            )
            server.result("session/close", {"sessionId": session_id})
            assert server.finish() == 0
            wire, stderr = b"\n".join(server.stdout_lines), server.stderr
    assert followed["header"]["mcpServers"] == [
        {"name": "local", "transport": "stdio", "command": sys.executable},
        {"name": "remote", "transport": "http", "url": url},
    ]
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
