"""The session lifecycle driven by the official `agent-client-protocol` client
(`acp.spawn_agent_process`), with every frame the server writes validated by that package's
models.

The server runs behind a small tee, so that the test sees its stdout byte for byte (the SDK
would skip a line it cannot parse). Each frame must be a JSON-RPC response, request or
notification in `acp.schema`'s terms, and each result must validate against the model of the
method it answers and dump back to exactly what was sent (no stray or mistyped fields).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, spawn_agent_process
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentErrorMessage,
    AgentNotification,
    AgentRequest,
    AgentResponseMessage,
    AuthenticateResponse,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
)
from acp_models import AGENT_RESULTS, exact
from acp_process import SETUP_UPDATES

import acp_server

pytestmark = [pytest.mark.anyio, pytest.mark.process]


TEE = """
import os, subprocess, sys
log = open(sys.argv[1], "wb")
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)
while chunk := os.read(child.stdout.fileno(), 1 << 16):
    log.write(chunk)
    log.flush()
    view = memoryview(chunk)
    while view:
        view = view[os.write(1, view):]
sys.exit(child.wait())
"""


class RecordingClient:
    """An ACP client that expects nothing from the agent yet (no prompt turns in this issue)."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the server asked for a permission")

    def on_connect(self, conn: Any) -> None:
        pass


def validate_frames(raw: bytes, methods_by_id: dict[Any, str]) -> list[dict[str, Any]]:
    assert raw.endswith(b"\n"), "the last frame is not newline-terminated"
    frames = []
    for line in raw.split(b"\n")[:-1]:
        frame = json.loads(line)
        assert frame.pop("jsonrpc") == "2.0", line
        if "method" in frame:
            if "id" in frame:
                AgentRequest.model_validate(frame)
            else:
                AgentNotification.model_validate(frame)
        elif "error" in frame:
            AgentErrorMessage.model_validate(frame)
            assert set(frame) == {"id", "error"}
        else:
            AgentResponseMessage.model_validate(frame)
            assert set(frame) == {"id", "result"}
            method = methods_by_id[frame["id"]]
            exact(AGENT_RESULTS[method], frame["result"], f"the result of {method}")
        frames.append(frame)
    return frames


async def test_lifecycle_through_the_official_client(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    transcript = tmp_path / "stdout.jsonl"
    methods_by_id: dict[Any, str] = {}

    def observe(event: StreamEvent) -> None:
        if (
            event.direction is StreamDirection.OUTGOING
            and "id" in event.message
            and "method" in event.message
        ):
            methods_by_id[event.message["id"]] = event.message["method"]

    client = RecordingClient()
    command = [
        sys.executable,
        "-c",
        TEE,
        str(transcript),
        sys.executable,
        "-m",
        "acp_server",
        "serve",
        "--sessions-dir",
        str(root),
    ]
    with open(tmp_path / "stderr.log", "wb") as stderr:
        async with (
            spawn_agent_process(
                client,  # type: ignore[arg-type]  # implements only the Client methods the test uses
                command[0],
                *command[1:],
                env=dict(os.environ),
                transport_kwargs={"stderr": stderr.fileno()},  # a file, never a pipe nobody reads
                observers=[observe],
            ) as (conn, process)
        ):
            init = await conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
                client_info=Implementation(name="sdk-test", version="1.0"),
            )
            assert init.protocol_version == 1
            assert init.agent_info is not None and (
                init.agent_info.name,
                init.agent_info.version,
            ) == ("acp-server", acp_server.__version__)
            capabilities = init.agent_capabilities
            assert capabilities is not None and capabilities.load_session is True
            assert capabilities.prompt_capabilities is not None
            assert (
                capabilities.prompt_capabilities.image,
                capabilities.prompt_capabilities.audio,
                capabilities.prompt_capabilities.embedded_context,
            ) == (True, True, True)
            session_caps = capabilities.session_capabilities
            assert session_caps is not None
            assert all(
                getattr(session_caps, name) is not None
                for name in ("list", "resume", "close", "delete")
            )
            assert capabilities.field_meta == {
                "acp-server": {
                    "history": {
                        "page": "session.page",
                        "follow": "session.follow",
                        "search": "session.search",
                    },
                    "sessionList": {"follow": "session.list.follow"},
                }
            }
            assert init.auth_methods == []  # llm-replay takes no key

            assert isinstance(await conn.authenticate(method_id="agent"), AuthenticateResponse)

            work = str(tmp_path / "work")
            created = [await conn.new_session(cwd=work, mcp_servers=[]) for _ in range(3)]
            ids = [c.session_id for c in created]
            assert len(set(ids)) == 3

            listed = await conn.list_sessions(cwd=work)
            assert sorted(s.session_id for s in listed.sessions) == sorted(ids)
            assert all(s.cwd == work and s.updated_at for s in listed.sessions)
            assert listed.next_cursor is None
            assert (await conn.list_sessions(cwd="/elsewhere")).sessions == []

            await conn.close_session(session_id=ids[0])
            await conn.resume_session(session_id=ids[0], cwd=work, mcp_servers=[])
            await conn.cancel(session_id=ids[0])

            with pytest.raises(RequestError) as unknown:
                await conn.resume_session(session_id="no-such-session", cwd=work)
            assert unknown.value.code == -32002
            with pytest.raises(RequestError) as malformed:
                await conn.close_session(session_id="../escape")
            assert malformed.value.code == -32602
            with pytest.raises(RequestError) as relative:
                await conn.new_session(cwd="relative", mcp_servers=[])
            assert relative.value.code == -32602
            with pytest.raises(RequestError) as missing:
                await conn.ext_method("vendor/thing", {})
            assert missing.value.code == -32601

            # The SDK's client has no `session/delete` method yet; its connection sends it raw.
            assert await conn._conn.send_request("session/delete", {"sessionId": ids[1]}) == {}
            remaining = await conn.list_sessions()
            assert sorted(s.session_id for s in remaining.sessions) == sorted([ids[0], ids[2]])
        assert process.returncode == 0

    frames = validate_frames(transcript.read_bytes(), methods_by_id)
    answered = {f["id"] for f in frames if "id" in f}
    assert answered == set(methods_by_id)  # every request answered, nothing unasked
    # No conversation was replayed: only each session's setup (SPEC 4.4) was shown.
    assert client.updates
    assert {update.session_update for _, update in client.updates} <= SETUP_UPDATES
    assert not (root / ids[1]).exists() and (root / ids[0]).is_dir()


async def test_sdk_client_survives_what_the_server_says_about_garbage(tmp_path: Path) -> None:
    """A client that sends garbage still gets well-formed, schema-valid answers."""
    with anyio.fail_after(30):
        proc = await anyio.run_process(
            [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", str(tmp_path / "s")],
            input=b'{"jsonrpc":"2.0","id":1,\n[1,2]\n{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":3}}\n'
            b'{"jsonrpc":"2.0","id":3,"method":"nope"}\n{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":"zz"}}\n',
            check=False,
        )
    assert proc.returncode == 0
    frames = validate_frames(proc.stdout, {})
    # Requests run concurrently: answers to well-formed requests may come in any order.
    codes = [(f["id"], f["error"]["code"]) for f in frames]
    assert codes[:2] == [(None, -32700), (None, -32600)]
    assert sorted(codes[2:]) == [(2, -32602), (3, -32601), (4, -32002)]
