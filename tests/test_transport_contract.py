"""One protocol behind every transport: the same messages get the same answers over stdio lines,
over WebSocket text frames (SPEC 0, 3.4) and over the Unix socket of `acp-server attach`'s shared
server (through the relay). Each case runs over both, against a real server
process, and the answers must be equal frame for frame."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from attach_support import ATTACH, Places, places
from polling import TIMEOUT
from ws_server import listening

pytestmark = pytest.mark.process

INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'


class Wire:
    """Messages out one at a time; frames in, in order."""

    def __init__(self, send: Callable[[bytes], None], frame: Callable[[], Any]) -> None:
        self.send = send
        self.frame = frame

    def exchange(self, message: bytes) -> dict[str, Any]:
        """Send one message; the next frame, which answers it."""
        self.send(message)
        frame = self.frame()
        assert isinstance(frame, dict)
        return frame


__all__ = ["places"]  # the fixture


@pytest.fixture(params=["stdio", "websocket", "unix"])
def wire(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Wire]:
    if request.param == "stdio":
        with AcpProcess(tmp_path / "sessions") as process:
            yield Wire(process.send, lambda: process.read_frame(TIMEOUT))
    elif request.param == "unix":
        attached: Places = request.getfixturevalue("places")
        command = [*ATTACH, "--sessions-dir", str(tmp_path / "sessions")]
        with AcpProcess(None, command=command, env=attached.env) as process:
            yield Wire(process.send, lambda: process.read_frame(TIMEOUT))
    else:
        with listening(tmp_path / "sessions") as server:
            ws = server.connect().ws
            yield Wire(
                lambda message: ws.send(message.decode()),
                lambda: json.loads(ws.recv(timeout=TIMEOUT)),
            )


def test_initialize_answers_the_same_capabilities(wire: Wire) -> None:
    result = wire.exchange(INITIALIZE)["result"]
    assert (result["protocolVersion"], result["agentCapabilities"]["loadSession"]) == (1, True)
    assert result["agentCapabilities"]["_meta"] == {
        "acp-server": {
            "history": {
                "page": "session.page",
                "follow": "session.follow",
                "search": "session.search",
            },
            "sessionList": {"follow": "session.list.follow"},
        }
    }


def test_a_parse_error_is_answered_and_the_connection_serves_on(wire: Wire) -> None:
    assert wire.exchange(b'{"jsonrpc":"2.0","id":1,') == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: Input data was truncated"},
    }
    assert wire.exchange(INITIALIZE)["id"] == 1


def test_a_batch_is_refused_as_an_invalid_request(wire: Wire) -> None:
    assert wire.exchange(b"[" + INITIALIZE + b"]") == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid request: batch requests are not supported"},
    }


def test_an_unknown_method_is_32601(wire: Wire) -> None:
    assert wire.exchange(b'{"jsonrpc":"2.0","id":"x","method":"no/such"}') == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {"code": -32601, "message": "Method not found", "data": "no/such"},
    }


def test_a_notification_gets_no_answer(wire: Wire) -> None:
    # The unknown notification is ignored: the next frame answers the request after it.
    wire.send(b'{"jsonrpc":"2.0","method":"no/such"}')
    assert wire.exchange(INITIALIZE)["id"] == 1


def test_bad_params_name_the_field(wire: Wire) -> None:
    wire.exchange(INITIALIZE)
    answer = wire.exchange(
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"rel"}}'
    )
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"].endswith("at `$.cwd`")
