"""Interop with the official Python SDK (`agent-client-protocol`): a client built on
`acp.spawn_agent_process` / `ClientSideConnection` drives the real server over stdio.

One process: initialize (fs read/write advertised), session/new, a prompt that runs the demo's
tool calls (this client answers fs/read_text_file, session/request_permission and
fs/write_text_file), then a second prompt whose model call hangs until session/cancel. A fresh
process: session/load (every replay notification strictly before the response, checked on the
raw frame order the SDK's observers saw, not on handler state, which the SDK updates from
unordered tasks), session/list, session/close, session/resume, session/close.

Every frame the server wrote is validated by the SDK's models (`interop_support.check_agent_frames`).
The server runs behind a small tee, so the test also sees stdout byte for byte: each line must be
exactly one frame the observers reported (the SDK silently skips a line it cannot parse).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import pytest
from acp import spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from interop_support import (
    DEMO_TOOL_CALLS,
    HANG_TEXT,
    HELLO_AFTER,
    HELLO_BEFORE,
    PROMPT,
    build_scenario,
    check_agent_frames,
    check_replay_before_response,
    final_statuses,
    schema_validator,
    text_of,
    tool_calls,
)
from polling import TIMEOUT

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
"""Copies the server's stdout to a file and to our stdin, byte for byte."""


class InteropClient:
    """The editor's side: an in-memory file system, and every permission allowed once."""

    def __init__(self, workspace: Path) -> None:
        self.hello = str(workspace / "hello.py")
        self.files = {self.hello: HELLO_BEFORE}
        self.requests: list[tuple[str, str]] = []
        self.hanging = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if (
            isinstance(update, AgentMessageChunk)
            and getattr(update.content, "text", None) == HANG_TEXT
        ):
            self.hanging.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.requests.append(("session/request_permission", tool_call.tool_call_id))
        assert "allow_once" in [o.option_id for o in options]
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.requests.append(("fs/read_text_file", path))
        return ReadTextFileResponse(content=self.files[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.requests.append(("fs/write_text_file", path))
        self.files[path] = content
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass


class Wire:
    """What one server process said, as the SDK's observers saw it."""

    def __init__(self, transcript: Path) -> None:
        self.transcript = transcript
        self.incoming: list[dict[str, Any]] = []
        self.methods_by_id: dict[Any, str] = {}
        self.ids: dict[str, list[Any]] = {}

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction is StreamDirection.INCOMING:
            self.incoming.append(message)
        elif "id" in message and "method" in message:
            self.methods_by_id[message["id"]] = message["method"]
            self.ids.setdefault(message["method"], []).append(message["id"])

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        return [
            f["params"]["update"]
            for f in self.incoming
            if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
        ]

    def check(self) -> None:
        raw = self.transcript.read_bytes()
        assert raw.endswith(b"\n"), "the server's last frame is not newline-terminated"
        lines = [json.loads(line) for line in raw.split(b"\n")[:-1]]
        assert lines == self.incoming, (
            "the frames the SDK reported differ from the bytes the server wrote"
        )
        check_agent_frames(self.incoming, self.methods_by_id)
        answered = {f["id"] for f in self.incoming if "method" not in f}
        assert answered == set(self.methods_by_id), (
            "a request went unanswered, or an answer was unasked"
        )


def serve(
    tmp_path: Path,
    name: str,
    client: InteropClient,
    fixture: Path,
    sessions: Path,
    stderr: BinaryIO,
):
    """Spawn the server (behind the tee) for one SDK connection; its stderr goes to a file,
    never to a pipe nobody reads."""
    wire = Wire(tmp_path / f"{name}.stdout.jsonl")
    server = [
        sys.executable,
        "-m",
        "acp_server",
        "serve",
        "--sessions-dir",
        str(sessions),
        "--replay",
        str(fixture),
    ]
    spawned = spawn_agent_process(
        client,  # type: ignore[arg-type]  # implements only the Client methods the test uses
        sys.executable,
        "-c",
        TEE,
        str(wire.transcript),
        *server,
        env=dict(os.environ),
        transport_kwargs={"stderr": stderr.fileno()},
        observers=[wire.observe],
    )
    return wire, spawned


def assert_clean_exit(tmp_path: Path, name: str, returncode: int | None) -> None:
    stderr = (tmp_path / f"{name}.stderr.log").read_text()
    assert returncode == 0, stderr
    assert "Traceback" not in stderr, stderr


async def test_python_sdk_client_runs_the_whole_lifecycle(tmp_path: Path) -> None:
    fixture, workspace = build_scenario(tmp_path)
    sessions = tmp_path / "sessions"
    cwd = str(workspace)

    # -- first process: initialize, new, a prompt with tool calls, a cancelled prompt ----------
    client = InteropClient(workspace)
    with open(tmp_path / "first.stderr.log", "wb") as stderr, anyio.fail_after(TIMEOUT):
        wire, spawned = serve(tmp_path, "first", client, fixture, sessions, stderr)
        async with spawned as (conn, process):
            init = await conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
                ),
                client_info=Implementation(name="interop-python-sdk", version="1"),
            )
            assert init.protocol_version == 1
            assert (
                init.agent_capabilities is not None and init.agent_capabilities.load_session is True
            )
            assert init.agent_info is not None and init.agent_info.version == acp_server.__version__

            session_id = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id

            done = await conn.prompt(session_id=session_id, prompt=[text_block(PROMPT)])
            assert done.stop_reason == "end_turn"

            async with anyio.create_task_group() as tg:
                stops: list[str] = []

                async def second_prompt() -> None:
                    stops.append(
                        (
                            await conn.prompt(
                                session_id=session_id, prompt=[text_block("Check it again.")]
                            )
                        ).stop_reason
                    )

                tg.start_soon(second_prompt)
                await client.hanging.wait()  # the model call is streaming, then waits
                await conn.cancel(session_id=session_id)
            assert stops == ["cancelled"]

            page = await conn._conn.send_request(  # the history API, beside ACP
                "session.page",
                {"address": {"kind": "session", "sessionId": session_id}, "throughSeq": 0},
            )
            assert page["records"][0]["event"]["type"] == "turn/start"
        assert_clean_exit(tmp_path, "first", process.returncode)
    wire.check()

    hello = client.hello
    assert client.requests == [
        ("fs/read_text_file", hello),
        ("session/request_permission", "call_write_1"),
        ("fs/read_text_file", hello),
        ("fs/write_text_file", hello),
        ("session/request_permission", "call_run_1"),
    ]
    assert client.files[hello] == HELLO_AFTER
    assert (
        workspace / "hello.py"
    ).read_text() == HELLO_BEFORE  # the client's fs was used, not the disk
    live = wire.updates(session_id)
    assert tool_calls(live) == DEMO_TOOL_CALLS
    assert set(final_statuses(live).values()) == {"completed"}
    assert [u["entries"][0]["status"] for u in live if u["sessionUpdate"] == "plan"] == [
        "in_progress",
        "completed",
    ]
    assert text_of(live).endswith(HANG_TEXT)

    # -- a fresh process: load, list, close, resume, close --------------------------------------
    client = InteropClient(workspace)
    with open(tmp_path / "second.stderr.log", "wb") as stderr, anyio.fail_after(TIMEOUT):
        wire, spawned = serve(tmp_path, "second", client, fixture, sessions, stderr)
        async with spawned as (conn, process):
            await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
            await conn.load_session(cwd=cwd, session_id=session_id, mcp_servers=[])
            listed = await conn.list_sessions(cwd=cwd)
            assert [s.session_id for s in listed.sessions] == [session_id]
            await conn.close_session(session_id=session_id)
            await conn.resume_session(session_id=session_id, cwd=cwd, mcp_servers=[])
            await conn.close_session(session_id=session_id)
        assert_clean_exit(tmp_path, "second", process.returncode)
    wire.check()

    (load_id,) = wire.ids["session/load"]
    replayed = check_replay_before_response(wire.incoming, load_id, session_id)
    setup = [u["sessionUpdate"] for u in wire.updates(session_id) if u not in replayed]
    # Load and resume each restore the mode and options and list the commands; resume replays
    # nothing.
    assert setup == ["current_mode_update", "config_option_update", "available_commands_update"] * 2
    assert [
        u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"
    ] == [PROMPT, "Check it again."]
    assert tool_calls(replayed) == DEMO_TOOL_CALLS
    assert set(final_statuses(replayed).values()) == {"completed"}
    assert text_of(replayed) == text_of(live)  # whole blocks now, the same text
    assert client.requests == []


async def test_history_results_through_the_sdk_connection_fit_the_schemas(tmp_path: Path) -> None:
    """`session.page` and `session.follow` sent through the SDK's raw connection (as any ACP
    client can) answer with what `schemas/` describes."""
    fixture, workspace = build_scenario(tmp_path)
    client = InteropClient(workspace)
    with open(tmp_path / "history.stderr.log", "wb") as stderr, anyio.fail_after(TIMEOUT):
        wire, spawned = serve(tmp_path, "history", client, fixture, tmp_path / "sessions", stderr)
        async with spawned as (conn, process):
            await conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
                ),
            )
            session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            await conn.prompt(session_id=session_id, prompt=[text_block(PROMPT)])
            address = {"kind": "session", "sessionId": session_id}
            followed = await conn._conn.send_request(
                "session.follow", {"address": address, "maxMessages": 2}
            )
            page = await conn._conn.send_request(
                "session.page",
                {
                    "address": address,
                    "throughSeq": followed["cursor"],
                    "beforeSeq": _first_seq(followed["records"][0]),
                },
            )
            await conn._conn.send_request(
                "session.unfollow", {"subscriptionId": followed["subscriptionId"]}
            )
        assert_clean_exit(tmp_path, "history", process.returncode)
    wire.check()  # the results are validated against schemas/ here
    assert followed["hasMore"] is True and page["records"]
    assert not list(schema_validator("session-page.result.schema.json").iter_errors(page))


def _first_seq(record: dict[str, Any]) -> int:
    return record["event"]["seq"] if "event" in record else record["chunks"]["seq0"]
