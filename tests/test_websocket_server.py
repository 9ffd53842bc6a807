"""`serve --listen` (SPEC 3.4): the same JSON-RPC over WebSocket, one session registry shared by
every connection, a bearer token and an Origin check, limits per connection, and a clean end on
SIGTERM. Each test runs a real server process and talks to it as a raw WebSocket client."""

from __future__ import annotations

import json
import os
import resource
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from polling import TIMEOUT, wait_until
from spec_reader import read_log
from websockets.exceptions import ConnectionClosed, InvalidStatus
from ws_server import Listening, Peer, PeerError, listening, plain, send_text

import acp_server
from acp_server.storage.jsonl.sessions import SessionStore

pytestmark = pytest.mark.process

PROMPT = [{"type": "text", "text": "hello"}]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Listening]:
    with listening(tmp_path / "sessions") as running:
        yield running


def refused_status(server: Listening, **options: object) -> int:
    with pytest.raises(InvalidStatus) as refused:
        server.connect(**options)  # type: ignore[arg-type]
    return refused.value.response.status_code


# -- who may connect -----------------------------------------------------------------------------


def test_a_client_without_the_token_is_refused_with_401(server: Listening) -> None:
    assert refused_status(server, query_token=False) == 401


def test_a_client_with_a_wrong_token_is_refused_with_401(server: Listening) -> None:
    assert refused_status(server, token="not-the-token") == 401


def test_the_token_may_come_as_a_bearer_authorization_header(server: Listening) -> None:
    peer = server.connect(query_token=False, headers={"Authorization": f"Bearer {server.token}"})
    assert peer.initialize()["protocolVersion"] == 1
    peer.close()


def test_a_page_of_a_foreign_origin_is_refused_with_403(server: Listening) -> None:
    assert refused_status(server, origin="http://evil.example") == 403


def test_a_page_of_the_servers_own_origin_may_connect(server: Listening) -> None:
    peer = server.connect(origin=server.origin)
    assert peer.initialize()["protocolVersion"] == 1
    peer.close()


def test_an_origin_given_with_allow_origin_may_connect(tmp_path: Path) -> None:
    with listening(tmp_path / "s", "--allow-origin", "https://Viewer.Example") as server:
        peer = server.connect(origin="https://viewer.example")
        assert peer.initialize()["protocolVersion"] == 1
        peer.close()
        assert refused_status(server, origin="https://other.example") == 403


def test_the_token_never_reaches_stdout_or_the_log(tmp_path: Path) -> None:
    with listening(tmp_path / "s", "--log-level", "debug") as server:
        server.connect().initialize()
        assert server.terminate() == 0
        assert server.process.stdout is not None
        assert server.process.stdout.read() == b""
    # Only the announcement shows it, so that the user can open the viewer.
    assert [line for line in server.stderr if server.token in line] == [
        f"acp-server: session viewer at http://{server.address}/?token={server.token}\n"
    ]


@pytest.mark.parametrize("name", ["Authorization", "Origin"])
def test_an_opening_request_with_a_header_given_twice_is_answered_400_and_closed(
    server: Listening, name: str
) -> None:
    value = f"Bearer {server.token}" if name == "Authorization" else server.origin
    sock = server.raw()
    sock.sendall(
        f"GET /acp HTTP/1.1\r\nHost: {server.address}\r\n"
        f"{name}: {value}\r\n{name}: {value}\r\n\r\n".encode()
    )
    answer = received_until_closed(sock)
    assert answer.split(b"\r\n", 1)[0] == b"HTTP/1.1 400 Bad Request"
    assert answer.endswith(f"\r\n\r\nThe {name} header is given more than once\n".encode())
    assert server.terminate() == 0
    assert not [line for line in server.stderr if "Traceback" in line]


def received_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends on `sock` until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


# -- one registry for every connection -----------------------------------------------------------


def test_a_follower_on_another_connection_sees_the_prompting_connections_events(
    server: Listening, workspace: Path
) -> None:
    prompting, following = server.connect(), server.connect()
    prompting.initialize()
    following.initialize()
    session_id = prompting.new_session(workspace)
    address = {"kind": "session", "sessionId": session_id}
    cursor = following.request("session.follow", {"address": address})["cursor"]

    stop = prompting.request("session/prompt", {"sessionId": session_id, "prompt": PROMPT})

    history = prompting.history(session_id)
    wait_until(
        lambda: (
            bool(following.frame())
            and [e["seq"] for e in _followed(following)][-1:] == [history[-1].seq]
        ),
        "the follower has the last event",
    )
    events = _followed(following)
    assert stop == {"stopReason": "end_turn"}
    assert events == [plain(e) for e in history if e.seq > cursor]


def _followed(peer: Peer) -> list[dict[str, Any]]:
    """The events `peer` was sent as `session.event` notifications, in order."""
    return [n["params"]["event"] for n in peer.notifications if n["method"] == "session.event"]


def test_a_session_open_on_one_connection_can_be_prompted_from_another(
    server: Listening, workspace: Path
) -> None:
    opener, other = server.connect(), server.connect()
    opener.initialize()
    other.initialize()
    session_id = opener.new_session(workspace)
    stop = other.request("session/prompt", {"sessionId": session_id, "prompt": PROMPT})
    assert stop == {"stopReason": "end_turn"}


def test_a_session_of_a_connection_that_went_can_be_loaded_elsewhere(
    server: Listening, workspace: Path
) -> None:
    first = server.connect()
    first.initialize()
    session_id = first.new_session(workspace)
    first.request("session/prompt", {"sessionId": session_id, "prompt": PROMPT})
    first.close()
    second = server.connect()
    second.initialize()
    second.request(
        "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
    )
    texts = [
        n["params"]["update"]["content"]["text"]
        for n in second.notifications
        if n["method"] == "session/update"
        and n["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]
    assert texts == ["hello"]


# -- limits --------------------------------------------------------------------------------------


def test_a_message_over_the_size_limit_closes_the_connection_with_1009(tmp_path: Path) -> None:
    with listening(tmp_path / "s", "--max-line-bytes", "1000") as server:
        peer = server.connect()
        peer.ws.send(json.dumps({"jsonrpc": "2.0", "method": "x", "params": "a" * 2000}))
        with pytest.raises(ConnectionClosed) as closed:
            peer.ws.recv(timeout=TIMEOUT)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


def test_a_binary_message_closes_the_connection_with_1003(server: Listening) -> None:
    peer = server.connect()
    peer.ws.send(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}')
    with pytest.raises(ConnectionClosed) as closed:
        peer.ws.recv(timeout=TIMEOUT)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003


def test_a_request_past_the_pending_limit_is_refused(tmp_path: Path, workspace: Path) -> None:
    with listening(tmp_path / "s", "--max-pending-requests", "1") as server:
        peer = server.connect()
        peer.answer_server = False  # the prompt stays in flight, waiting for a permission
        peer.initialize()
        session_id = peer.new_session(workspace)
        peer.start("session/prompt", {"sessionId": session_id, "prompt": PROMPT})
        wait_until(lambda: bool(peer.frame()) and bool(peer.server_requests), "a permission ask")
        with pytest.raises(PeerError) as refused:
            peer.request("session/list", {})
        assert (refused.value.code, refused.value.data) == (-32014, {"maxPendingRequests": 1})


def test_a_server_out_of_descriptors_serves_on_once_idle_connections_go(server: Listening) -> None:
    pid = server.process.pid
    old = leave_descriptors(pid, 2)
    idle = [server.raw() for _ in range(16)]  # no token, no bytes: more than it can accept
    wait_until(
        lambda: (
            any("Too many open files" in line for line in server.stderr)
            or server.process.poll() is not None
        ),
        "the server runs out of descriptors",
    )
    assert server.process.poll() is None, "".join(server.stderr)
    for sock in idle:
        sock.close()

    peer = server.connect()

    assert peer.initialize()["protocolVersion"] == 1
    resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
    assert server.terminate() == 0


def leave_descriptors(pid: int, spare: int) -> tuple[int, int]:
    """Lower the process's RLIMIT_NOFILE so that only `spare` descriptors above its highest
    open one are left; returns the old limits."""
    highest = max(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
    old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (highest + 1 + spare, old[1]))
    return old


# -- the end -------------------------------------------------------------------------------------


def test_sigterm_ends_the_running_turn_and_syncs_its_log(tmp_path: Path, workspace: Path) -> None:
    with listening(tmp_path / "sessions", "--pace-ms", "200") as server:
        peer = server.connect()
        peer.initialize()
        session_id = peer.new_session(workspace)
        peer.start("session/prompt", {"sessionId": session_id, "prompt": PROMPT})
        wait_until(
            lambda: bool(peer.frame()) and any(_is_chunk(n) for n in peer.notifications),
            "the turn streams",
        )
        assert server.terminate() == 0
    _, events = read_log(SessionStore(tmp_path / "sessions").log_path(session_id))
    assert (events[-1]["type"], events[-1]["data"]["reason"]) == ("turn/end", {"kind": "cancelled"})


def test_sigterm_ends_a_follower_that_stopped_reading(server: Listening, workspace: Path) -> None:
    prompting = server.connect()
    prompting.initialize()
    session_id = prompting.new_session(workspace)
    follower = server.raw_websocket(receive_buffer=4096)
    address = {"kind": "session", "sessionId": session_id}
    send_text(
        follower,
        {"jsonrpc": "2.0", "id": 1, "method": "session.follow", "params": {"address": address}},
    )
    # The prompt's user message reaches the follower: 8 MB, more than the follower's receive
    # buffer and the server's send buffer (at most 4 MiB: net.ipv4.tcp_wmem) can hold.
    big = [{"type": "text", "text": "x" * 8_000_000}]
    prompting.request("session/prompt", {"sessionId": session_id, "prompt": big})

    assert server.terminate() == 0


def _is_chunk(notification: dict[str, object]) -> bool:
    params = notification.get("params")
    return (
        isinstance(params, dict)
        and isinstance(params.get("update"), dict)
        and params["update"].get("sessionUpdate") == "agent_message_chunk"
    )


# -- pages ---------------------------------------------------------------------------------------


def test_an_unknown_path_is_404(server: Listening) -> None:
    status, _, body = server.get("/nothing-here")
    assert (status, body) == (404, b"Not found\n")


@pytest.mark.parametrize(
    "name", ["client.js", "decode.js", "journal.js", "connection.js", "follow.js", "fold.js"]
)
def test_the_browser_modules_are_served_as_shipped(server: Listening, name: str) -> None:
    status, headers, body = server.get(f"/{name}")
    shipped = (Path(acp_server.__file__).parent / "web" / name).read_bytes()
    assert (status, headers["Content-Type"], body) == (
        200,
        "text/javascript; charset=utf-8",
        shipped,
    )
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_a_path_outside_the_web_files_is_404(server: Listening) -> None:
    assert server.get("/web/client.js")[0] == 404
    assert server.get("/..%2Fcli.py")[0] == 404
