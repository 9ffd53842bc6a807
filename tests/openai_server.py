"""A real HTTP server on 127.0.0.1 that speaks OpenAI's streaming chat completions (a test helper).

`FakeOpenAI` serves a script of canned responses, one per request, in order: server-sent event
streams (`Sse`) and plain error answers (`Status`). It records every request (path, headers,
JSON body, arrival time). It binds port 0 on loopback only, runs in a daemon thread, and stops
itself after `lifetime` seconds even if a test forgets to (and at the end of its `with` block).

`Sse` streams use chunked transfer encoding; `cut=True` aborts the connection mid-body (the
client sees an incomplete chunked body), `close_delimited=True` sends the body without chunking
and ends it by closing the connection (a clean end of body that simply stops early).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`, as OpenAI sends it."""
    value: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test",
        "choices": [],
    }
    if delta is not None or finish is not None:
        value["choices"] = [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}
        ]
    if usage is not None:
        value["usage"] = usage
    return value


def text(t: str) -> dict[str, Any]:
    return chunk({"content": t})


def reasoning(t: str, key: str = "reasoning_content") -> dict[str, Any]:
    return chunk({key: t})


def call(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    """A `tool_calls` delta: id and name only on the first delta of a call, like OpenAI."""
    entry: dict[str, Any] = {"index": index}
    if id is not None:
        entry["id"] = id
        entry["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        entry["function"] = function
    return chunk({"tool_calls": [entry]})


def usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        value["prompt_tokens_details"] = {"cached_tokens": cached}
    return chunk(usage=value)


@dataclass
class Sse:
    events: list[dict[str, Any] | str]
    """Each a JSON chunk, or a raw `data:` payload string (for malformed events)."""
    done: bool = True
    cut: bool = False
    close_delimited: bool = False
    delay: float = 0.0
    """Seconds to wait before each event."""
    first_delay: float = 0.0
    """Seconds to wait before the response headers."""


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
    at: float


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-stream (as the provider does after an error) is normal


class FakeOpenAI:
    def __init__(self, script: list[Response] | None = None, *, lifetime: float = 60.0) -> None:
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
                with owner._lock:
                    owner.requests.append(
                        Request(self.path, dict(self.headers), json.loads(raw), time.monotonic())
                    )
                    response = (
                        owner.script.pop(0)
                        if owner.script
                        else Status(500, {"error": {"message": "the test script is exhausted"}})
                    )
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
                payloads = [e if isinstance(e, str) else json.dumps(e) for e in response.events]
                if response.done and not response.cut:
                    payloads.append("[DONE]")
                for payload in payloads:
                    time.sleep(response.delay)
                    self._write(f"data: {payload}\n\n".encode(), response)
                if response.cut:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if not response.close_delimited:
                    self.wfile.write(b"0\r\n\r\n")

            def _write(self, data: bytes, response: Sse) -> None:
                if response.close_delimited:
                    self.wfile.write(data)
                else:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()

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
