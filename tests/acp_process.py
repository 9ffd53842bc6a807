"""Drive the real `acp-server` in a subprocess with raw JSON lines (a test helper).

`AcpProcess` spawns `python -m acp_server serve --sessions-dir DIR ...` through the package's
`ServerProcess` (stdout and stderr drained by threads from the start, every stdout line kept in
`stdout_lines`), writes whatever bytes a test gives it, and reads JSON-RPC frames with timeouts
that fail the test. Its requests (their ids, the answers to the server's requests) are made by
the package's JSON-RPC peer, `acp_server.jsonrpc.peer.Peer`.

The session-setup updates of SPEC 4.4 (`available_commands_update` after `session/new`, and the
mode, options and commands a load or resume sends) are set aside as they are read, into
`setup_updates`, unless `keep_setup_updates` is set: most tests are about something else, and
the tests of modes and commands read them there. They stay in `stdout_lines`, where every frame
is checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msgspec import UNSET
from polling import TIMEOUT

from acp_server.client.process import ServerProcess, serve_command
from acp_server.jsonrpc.errors import ErrorObject
from acp_server.jsonrpc.peer import ErrorResponse, Peer, Request, Response

DEFAULT_TIMEOUT = TIMEOUT

SETUP_UPDATES = frozenset(
    {"available_commands_update", "current_mode_update", "config_option_update"}
)
"""The updates a session's setup sends (SPEC 4.4), set aside by `AcpProcess.read_line`."""
SETUP_KINDS = tuple(f'"{kind}"'.encode() for kind in SETUP_UPDATES)


@dataclass(frozen=True)
class RpcFailure:
    """An error answer to one of the server's requests."""

    code: int
    message: str


class ServerExited(AssertionError):
    """The server's stdout ended while a test was waiting for a frame."""


class AcpProcess(ServerProcess):
    def __init__(
        self,
        sessions_dir: Path | str | None,
        *args: str,
        command: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        argv = serve_command(sessions_dir) if command is None else list(command)
        self.command = [*argv, *args]
        super().__init__(self.command, env=env)
        self.peer = Peer(first_id=1001)
        self.keep_setup_updates = False
        self.setup_updates: list[dict[str, Any]] = []
        """The `session/update` params of the setup updates read so far, in order."""

    # -- writing ------------------------------------------------------------------------------

    def send(self, message: Any) -> None:
        """One message as one line: a dict/list is JSON-encoded, bytes/str are sent as given."""
        if isinstance(message, bytes):
            line = message
        elif isinstance(message, str):
            line = message.encode()
        else:
            line = json.dumps(message, separators=(",", ":")).encode()
        self.send_raw(line + b"\n")

    def send_request(self, method: str, params: Any = None, *, id: Any = None) -> Any:
        """Send a request (params omitted when None); returns its id (the peer's next one
        unless `id` is given)."""
        if id is None:
            request_id, frame = self.peer.request(method, UNSET if params is None else params)
            self.send_raw(frame + b"\n")
            return request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return id

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def close_stdin(self) -> None:
        self.close_input()

    # -- reading ------------------------------------------------------------------------------

    def read_line(self, timeout: float = DEFAULT_TIMEOUT) -> bytes:
        while True:
            try:
                line = self.next_line(timeout)
            except TimeoutError:
                raise AssertionError(
                    f"no frame within {timeout}s; stderr:\n{self.stderr}"
                ) from None
            if line is None:
                raise ServerExited(f"the server's stdout ended; stderr:\n{self.stderr}")
            if self.keep_setup_updates or not self._set_aside(line):
                return line

    def _set_aside(self, line: bytes) -> bool:
        """Keep `line` in `setup_updates` if it is a session-setup update."""
        if b'"session/update"' not in line or not any(kind in line for kind in SETUP_KINDS):
            return False
        frame = json.loads(line)
        params = frame.get("params") if frame.get("method") == "session/update" else None
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict) or update.get("sessionUpdate") not in SETUP_UPDATES:
            return False
        self.setup_updates.append(params)
        return True

    def poll_line(self, timeout: float) -> bytes | None:
        """The next stdout line, or None if none arrives within `timeout` seconds (which may
        be 0); `ServerExited` once stdout has ended."""
        while True:
            try:
                line = self.next_line(timeout)
            except TimeoutError:
                return None
            if line is None:
                raise ServerExited(f"the server's stdout ended; stderr:\n{self.stderr}")
            if self.keep_setup_updates or not self._set_aside(line):
                return line

    def read_frame(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        frame = json.loads(self.read_line(timeout))
        assert isinstance(frame, dict), frame
        return frame

    def response(self, request_id: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The next frame, which must be the response to `request_id`."""
        frame = self.read_frame(timeout)
        assert frame.get("id") == request_id and "method" not in frame, (
            f"expected the answer to {request_id!r}, got {frame}"
        )
        return frame

    def exchange(
        self,
        method: str,
        params: Any = None,
        *,
        answer: Callable[[dict[str, Any]], Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Send a request and read until its response, like a client would.

        Returns the response and every frame before it (notifications and the server's own
        requests, in wire order). The server's requests are answered with `answer(frame)`:
        a result value, or an `RpcFailure` to answer with an error.
        """
        request_id = self.send_request(method, params)
        before: list[dict[str, Any]] = []
        while True:
            line = self.read_line(timeout)
            frame = json.loads(line)
            event = self.peer.receive(line)
            if isinstance(event, Response | ErrorResponse) and event.id == request_id:
                return frame, before
            before.append(frame)
            if isinstance(event, Request):
                if answer is None:
                    raise AssertionError(f"unexpected request from the server: {frame}")
                reply = answer(frame)
                if isinstance(reply, RpcFailure):
                    self.send(self.peer.fail(event.id, ErrorObject(reply.code, reply.message)))
                else:
                    self.send(self.peer.answer(event.id, reply))

    def request(
        self, method: str, params: Any = None, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """Send a request and return its whole response frame."""
        return self.response(self.send_request(method, params), timeout)

    def result(self, method: str, params: Any = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Send a request and return its result (failing on an error response)."""
        frame = self.request(method, params, timeout)
        assert "result" in frame, f"{method} failed: {frame}"
        return frame["result"]

    def error(
        self, method: str, params: Any = None, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """Send a request and return its error object (failing on a success)."""
        frame = self.request(method, params, timeout)
        assert "error" in frame, f"{method} should have failed: {frame}"
        return frame["error"]

    def initialize(self) -> dict[str, Any]:
        return self.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    # -- ending -------------------------------------------------------------------------------

    def wait(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        return super().wait(timeout)

    def finish(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Close stdin and wait for the exit status."""
        self.close_input()
        return self.wait(timeout)

    def close(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().close(timeout)


def assert_jsonrpc_frame(line: bytes) -> dict[str, Any]:
    """`line` is one JSON-RPC 2.0 message: a response (result or error) or a request/notification."""
    frame = json.loads(line)
    assert isinstance(frame, dict), line
    assert frame.get("jsonrpc") == "2.0", line
    if "method" in frame:
        assert isinstance(frame["method"], str), line
        assert set(frame) <= {"jsonrpc", "method", "params", "id"}, line
    else:
        assert "id" in frame and (type(frame["id"]) in (int, str) or frame["id"] is None), line
        assert ("result" in frame) != ("error" in frame), line
        assert set(frame) == {"jsonrpc", "id", "result"} or set(frame) == {
            "jsonrpc",
            "id",
            "error",
        }, line
        if "error" in frame:
            error = frame["error"]
            assert type(error["code"]) is int and isinstance(error["message"], str), line
            assert set(error) <= {"code", "message", "data"}, line
    return frame
