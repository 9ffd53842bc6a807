"""A real HTTP server on 127.0.0.1 that answers each POST with the next canned response of a
script: a server-sent event stream (`Sse`) or a plain answer (`Status`) (a test helper).

`LoopbackServer` is what every provider's fake shares; a fake (`openai_server.FakeOpenAI`,
`anthropic_server.FakeAnthropic`) gives only how one event is framed, what ends a stream and
the API root. It records every request (path, headers, JSON body, raw bytes, the client's port,
which tells whether a connection was reused, and its arrival time). It binds port 0 on loopback
only, runs in a daemon thread, and stops itself after `lifetime` seconds even if a test forgets
to (and at the end of its `with` block).

`Sse` streams use chunked transfer encoding; `cut=True` aborts the connection after the events
(the client sees an incomplete chunked body), `close_delimited=True` sends the body without
chunking and ends it by closing the connection (a clean end of body that simply stops early).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Sse:
    events: list[Any]
    """Each an event payload, or a raw `data:` payload string (for malformed events)."""
    done: bool = True
    """Send the wire's end marker after the events (a wire that has one: OpenAI's `[DONE]`)."""
    cut: bool = False
    close_delimited: bool = False
    delay: float = 0.0
    """Seconds to wait before each event."""
    first_delay: float = 0.0
    """Seconds to wait before the response headers."""
    gate: threading.Event | None = None
    """Held until this is set, before the response headers: the test says when it answers."""


@dataclass
class Status:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Response = Sse | Status


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    peer_port: int
    at: float


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-stream (as the provider does after an error) is normal


class LoopbackServer:
    root = ""
    """The API root's path, after the host."""
    end_marker: str | None = None
    """The payload that ends a stream, if the wire has one."""

    def __init__(self, script: list[Response] | None = None, *, lifetime: float = 60.0) -> None:
        self.lifetime = lifetime
        self.script: list[Response] = list(script or [])
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._closed = False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10  # a stuck client cannot hold a handler thread for long

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                request = Request(
                    self.path,
                    dict(self.headers),
                    json.loads(raw),
                    raw,
                    self.client_address[1],
                    time.monotonic(),
                )
                with owner._lock:
                    owner.requests.append(request)
                    response = owner.script.pop(0) if owner.script else owner.exhausted()
                if isinstance(response, Status):
                    self._status(response)
                else:
                    self._sse(response)

            def _status(self, response: Status) -> None:
                data = json.dumps(response.body).encode() if response.body is not None else b""
                self.send_response(response.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, response: Sse) -> None:
                if response.gate is not None:
                    response.gate.wait(owner.lifetime)
                time.sleep(response.first_delay)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-cache")
                if response.close_delimited:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                frames = [owner.frame(event) for event in response.events]
                if owner.end_marker is not None and response.done and not response.cut:
                    frames.append(f"data: {owner.end_marker}\n\n")
                for frame in frames:
                    time.sleep(response.delay)
                    data = frame.encode()
                    if not response.close_delimited:
                        data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
                    self.wfile.write(data)
                    self.wfile.flush()
                if response.cut:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if not response.close_delimited:
                    self.wfile.write(b"0\r\n\r\n")

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}{self.root}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()

    def frame(self, event: Any) -> str:
        """One event as the wire sends it."""
        return f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n"

    def exhausted(self) -> Response:
        """The answer once the script has run out."""
        return Status(500, {"error": {"message": "the test script is exhausted"}})

    def add(self, *responses: Response) -> None:
        with self._lock:
            self.script.extend(responses)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
