"""A `serve --listen` server in a subprocess, and a blocking JSON-RPC peer over its WebSocket
(or over any connection that sends and receives whole messages, such as an attach relay's lines).

`listening(sessions_dir, *flags)` starts the server on a free loopback port and reads where it
listens, and its token, from its stderr. `Listening.connect` opens a `Peer` (closed at the end
at the latest): requests wait for
their answer, server requests are answered as `acp_server.client.default_answer` does, and
notifications are kept in order.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

import msgspec
from polling import TIMEOUT, wait_until
from websockets.frames import Frame, Opcode
from websockets.sync.client import connect

from acp_server.cli.demo import recorded_prompt
from acp_server.client import Journal, default_answer
from acp_server.client.errors import RpcError
from acp_server.client.process import serve_command
from acp_server.core.events import SessionEvent
from acp_server.providers.bundled import DEMO_PROJECT

_ANNOUNCE = re.compile(r"acp-server: session viewer at http://([^/]+)/\?token=(\S+)")


class PeerError(Exception):
    """The server answered a request with an error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error['code']}: {error['message']}")
        self.code: int = error["code"]
        self.message: str = error["message"]
        self.data: Any = error.get("data")


class Connection(Protocol):
    """What a `Peer` speaks through: one JSON-RPC message per `send` and per `recv`."""

    def send(self, message: str | bytes) -> None: ...

    def recv(self, timeout: float | None = None) -> str | bytes: ...

    def close(self) -> None: ...


@dataclass
class Peer:
    """One connection to the server (a WebSocket unless told), driven from blocking code."""

    ws: Connection
    notifications: list[dict[str, Any]] = field(default_factory=list)
    server_requests: list[dict[str, Any]] = field(default_factory=list)
    answer_server: bool = True
    """Answer the server's requests as `default_answer` does (else only keep them)."""
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def send(self, message: dict[str, Any]) -> None:
        self.ws.send(json.dumps(message))

    def start(self, method: str, params: Any) -> int:
        """Send a request without waiting; its id."""
        request_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def request(self, method: str, params: Any) -> Any:
        """The result of a request (`PeerError` for an error answer)."""
        return self.answer(self.start(method, params))

    def answer(self, request_id: int) -> Any:
        """Read frames until the answer to `request_id`; its result."""
        while True:
            frame = self.frame()
            if frame.get("id") == request_id and "method" not in frame:
                if "error" in frame:
                    raise PeerError(frame["error"])
                return frame["result"]

    def frame(self) -> dict[str, Any]:
        """The next frame, after handling it: a notification is kept, a server request kept and
        (if `answer_server`) answered."""
        frame = json.loads(self.ws.recv(timeout=TIMEOUT))
        assert isinstance(frame, dict)
        if "method" in frame and "id" in frame:
            self.server_requests.append(frame)
            if self.answer_server:
                self._answer(frame)
        elif "method" in frame:
            self.notifications.append(frame)
        return frame

    def _answer(self, request: dict[str, Any]) -> None:
        try:
            result = default_answer(request["method"], request.get("params"))
        except RpcError as exc:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": exc.code, "message": exc.message},
                }
            )
            return
        self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def initialize(self) -> Any:
        return self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def new_session(self, cwd: Path) -> str:
        """A new session in `cwd`, which is given the files the demo recording works on."""
        for name, content in DEMO_PROJECT.items():
            (cwd / name).write_bytes(content)
        session_id: str = self.request("session/new", {"cwd": str(cwd), "mcpServers": []})[
            "sessionId"
        ]
        return session_id

    def prompt_demo(self, session_id: str) -> Any:
        """The bundled recording's own prompt; the result once its turn has ended."""
        prompt = [{"type": "text", "text": recorded_prompt()}]
        return self.request("session/prompt", {"sessionId": session_id, "prompt": prompt})

    def history(self, session_id: str) -> list[SessionEvent]:
        """Every event of the session, from a follow snapshot as large as the session."""
        address = {"kind": "session", "sessionId": session_id}
        snapshot = self.request("session.follow", {"address": address, "maxMessages": 100_000})
        self.request("session.unfollow", {"subscriptionId": snapshot["subscriptionId"]})
        assert snapshot["hasMore"] is False
        return list(Journal.from_page(snapshot["records"], False).events)

    def events(self, session_id: str) -> list[dict[str, Any]]:
        """`history` as the plain JSON of SPEC 1."""
        return [plain(event) for event in self.history(session_id)]

    def close(self) -> None:
        self.ws.close()


@dataclass
class Listening:
    process: subprocess.Popen[bytes]
    address: str
    token: str
    stderr: list[str]
    connections: ExitStack
    """Every peer's connection, closed when the server is ended."""

    @property
    def url(self) -> str:
        return f"ws://{self.address}/acp"

    @property
    def origin(self) -> str:
        return f"http://{self.address}"

    base_url = origin
    """The viewer's address."""

    def viewer_url(self, path: str = "/", token: str | None = None, **query: object) -> str:
        """The viewer's page at `path`, with the token (or `token`) and `query` in its query."""
        params = urlencode({"token": self.token if token is None else token, **query})
        return f"{self.base_url}{path}?{params}"

    def connect(
        self,
        *,
        token: str | None = None,
        query_token: bool = True,
        origin: str | None = None,
        headers: dict[str, str] | None = None,
        **options: Any,
    ) -> Peer:
        """A peer; the token goes in the query string unless `query_token` is false."""
        given = self.token if token is None else token
        url = f"{self.url}?token={given}" if query_token else self.url
        ws = self.connections.enter_context(
            connect(
                url,
                origin=origin,  # type: ignore[arg-type]
                additional_headers=headers,
                open_timeout=TIMEOUT,
                **options,
            )
        )
        return Peer(ws)

    def raw(self, *, receive_buffer: int | None = None) -> socket.socket:
        """A plain TCP connection to the server (closed when the server is ended), for what no
        proper client sends: nothing at all, repeated headers, a follow it never reads.
        `receive_buffer` fixes the socket's receive buffer, so that it fills."""
        host, port = self.address.rsplit(":", 1)
        sock = self.connections.enter_context(socket.socket())
        if receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(TIMEOUT)
        sock.connect((host, int(port)))
        return sock

    def raw_websocket(self, *, receive_buffer: int | None = None) -> socket.socket:
        """`raw`, upgraded to a WebSocket (no extension): send it messages with `send_text`."""
        sock = self.raw(receive_buffer=receive_buffer)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET /acp?token={self.token} HTTP/1.1\r\nHost: {self.address}\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(1)  # no further: what follows is for whoever reads frames
        assert answer.startswith(b"HTTP/1.1 101 "), answer
        return sock

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """A plain HTTP GET: status, headers, body."""
        try:
            with urllib.request.urlopen(f"http://{self.address}{path}", timeout=TIMEOUT) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def terminate(self) -> int:
        """SIGTERM, then the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=TIMEOUT)


@contextmanager
def listening(sessions_dir: Path, *flags: str) -> Iterator[Listening]:
    """A `serve --listen 127.0.0.1:0` process, ended (SIGKILL if need be) on the way out."""
    process = subprocess.Popen(
        serve_command(sessions_dir, "--listen", "127.0.0.1:0", *flags),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: list[str] = []

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.decode(errors="replace"))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        wait_until(
            lambda: any(_ANNOUNCE.search(line) for line in lines) or process.poll() is not None,
            "the server says where it listens",
        )
        match = next((m for m in map(_ANNOUNCE.search, lines) if m), None)
        assert match is not None, "".join(lines)
        with ExitStack() as connections:
            yield Listening(process, match[1], match[2], lines, connections)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
        for stream in (process.stdout, process.stderr):
            assert stream is not None
            stream.close()


def send_text(sock: socket.socket, message: dict[str, Any]) -> None:
    """One JSON-RPC message as a masked text frame, as a client sends it, on a raw WebSocket."""
    sock.sendall(Frame(Opcode.TEXT, json.dumps(message).encode()).serialize(mask=True))


def plain(event: SessionEvent) -> Any:
    """An event as the JSON value it is on the wire."""
    return msgspec.json.decode(msgspec.json.encode(event))
