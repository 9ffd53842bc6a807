"""Drive the real `acp-server` in a subprocess with raw JSON lines (a test helper).

`AcpProcess` spawns `python -m acp_server serve --sessions-dir DIR ...`, writes whatever bytes a
test gives it, and reads stdout line by line with timeouts. Both stdout and stderr are drained by
threads from the start, so a chatty server can never block on a full pipe, and every stdout line
is kept (`stdout_lines`) for checks over the whole transcript.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class RpcFailure:
    """An error answer to one of the server's requests."""

    code: int
    message: str


class ServerExited(AssertionError):
    """The server's stdout ended while a test was waiting for a frame."""


class AcpProcess:
    def __init__(
        self,
        sessions_dir: Path | str | None,
        *args: str,
        command: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        if command is None:
            command = [sys.executable, "-m", "acp_server", "serve"]
            if sessions_dir is not None:
                command += ["--sessions-dir", str(sessions_dir)]
        self.command = [*command, *args]
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            bufsize=0,
            preexec_fn=preexec_fn,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self.stdout_lines: list[bytes] = []
        """Every complete line the server wrote to stdout, in order (without the newline)."""
        self.stdout_tail = b""
        """Bytes after the last newline when stdout ended (must stay empty)."""
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = bytearray()
        self._next_id = 1000
        self._threads = [
            threading.Thread(target=self._drain_stdout, daemon=True),
            threading.Thread(target=self._drain_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- plumbing -----------------------------------------------------------------------------

    def _drain_stdout(self) -> None:
        assert self.process.stdout is not None
        pending = b""
        while chunk := os.read(self.process.stdout.fileno(), 1 << 16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.stdout_lines.append(line)
                self._lines.put(line)
        self.stdout_tail = pending
        self._lines.put(None)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := os.read(self.process.stderr.fileno(), 1 << 16):
            self._stderr += chunk

    @property
    def stderr(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    # -- writing ------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write exactly these bytes to the server's stdin."""
        self._stdin.write(data)

    def send(self, message: Any) -> None:
        """One message as one line: a dict/list is JSON-encoded, bytes/str are sent as given."""
        if isinstance(message, bytes):
            line = message
        elif isinstance(message, str):
            line = message.encode()
        else:
            line = json.dumps(message, separators=(",", ":")).encode()
        self.send_raw(line + b"\n")

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def send_request(self, method: str, params: Any = None, *, id: Any = None) -> Any:
        """Send a request (params omitted when None); returns its id."""
        request_id = self.new_id() if id is None else id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def close_stdin(self) -> None:
        self._stdin.close()

    # -- reading ------------------------------------------------------------------------------

    def read_line(self, timeout: float = DEFAULT_TIMEOUT) -> bytes:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame within {timeout}s; stderr:\n{self.stderr}") from None
        if line is None:
            self._lines.put(None)  # stay at end of output for later reads
            raise ServerExited(f"the server's stdout ended; stderr:\n{self.stderr}")
        return line

    def poll_line(self, timeout: float) -> bytes | None:
        """The next stdout line, or None if none arrives within `timeout` seconds (which may
        be 0); `ServerExited` once stdout has ended."""
        try:
            line = self._lines.get(timeout=timeout) if timeout > 0 else self._lines.get_nowait()
        except queue.Empty:
            return None
        if line is None:
            self._lines.put(None)
            raise ServerExited(f"the server's stdout ended; stderr:\n{self.stderr}")
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
            frame = self.read_frame(timeout)
            if frame.get("id") == request_id and "method" not in frame:
                return frame, before
            before.append(frame)
            if "method" in frame and "id" in frame:
                if answer is None:
                    raise AssertionError(f"unexpected request from the server: {frame}")
                reply = answer(frame)
                if isinstance(reply, RpcFailure):
                    self.send(
                        {
                            "jsonrpc": "2.0",
                            "id": frame["id"],
                            "error": {"code": reply.code, "message": reply.message},
                        }
                    )
                else:
                    self.send({"jsonrpc": "2.0", "id": frame["id"], "result": reply})

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

    def assert_silent(self, timeout: float = 0.3) -> None:
        """No frame arrives within `timeout` seconds."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return
        if line is None:
            self._lines.put(None)
            return
        raise AssertionError(f"unexpected frame: {line!r}")

    def initialize(self) -> dict[str, Any]:
        return self.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    # -- ending -------------------------------------------------------------------------------

    def wait(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        code = self.process.wait(timeout=timeout)
        for thread in self._threads:
            thread.join(timeout=timeout)
        return code

    def finish(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Close stdin and wait for the exit status."""
        if not self._stdin.closed:
            self._stdin.close()
        return self.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.wait()

    def __enter__(self) -> AcpProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if not self._stdin.closed:
                self._stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.process.wait(timeout=DEFAULT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for thread in self._threads:
            thread.join(timeout=DEFAULT_TIMEOUT)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


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
