"""A real HTTP server on 127.0.0.1 that speaks Anthropic's streaming Messages API (a test helper).

`FakeAnthropic` serves a script of canned responses, one per request, in order: server-sent
event streams (`Sse`, each event sent as `event: <type>` and `data: <json>`, as the API does)
and plain error answers (`Status`). It records every request (path, headers, JSON body, and
the client's port, which tells whether a connection was reused). It binds port 0 on loopback
only, runs in a daemon thread, and stops itself after `lifetime` seconds even if a test
forgets to (and at the end of its `with` block).

`Sse` streams use chunked transfer encoding; `cut=True` aborts the connection after the events
(the client sees an incomplete chunked body).

The event builders below (`message_start`, `text_block`, `thinking_block`, `tool_block`,
`message_delta`, ...) give the API's event payloads.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Event = dict[str, Any]


def message_start(
    input_tokens: int = 10, *, cache_read: int | None = None, cache_write: int | None = None
) -> Event:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    return {
        "type": "message_start",
        "message": {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    }


def block_start(index: int, block: dict[str, Any]) -> Event:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, value: dict[str, Any]) -> Event:
    return {"type": "content_block_delta", "index": index, "delta": value}


def block_stop(index: int) -> Event:
    return {"type": "content_block_stop", "index": index}


def text_block(index: int, *pieces: str) -> list[Event]:
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(delta(index, {"type": "text_delta", "text": p}) for p in pieces),
        block_stop(index),
    ]


def thinking_block(index: int, *pieces: str, signature: str) -> list[Event]:
    return [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        *(delta(index, {"type": "thinking_delta", "thinking": p}) for p in pieces),
        delta(index, {"type": "signature_delta", "signature": signature}),
        block_stop(index),
    ]


def tool_block(index: int, id: str, name: str, *parts: str) -> list[Event]:
    return [
        block_start(index, {"type": "tool_use", "id": id, "name": name, "input": {}}),
        delta(index, {"type": "input_json_delta", "partial_json": ""}),
        *(delta(index, {"type": "input_json_delta", "partial_json": p}) for p in parts),
        block_stop(index),
    ]


def message_delta(stop_reason: str, output_tokens: int = 5) -> Event:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


def message_stop() -> Event:
    return {"type": "message_stop"}


def ping() -> Event:
    return {"type": "ping"}


def error_event(kind: str, message: str) -> Event:
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def reply(*blocks: list[Event], stop: str = "end_turn", output_tokens: int = 5) -> list[Event]:
    """A whole answer: `message_start`, the blocks, `message_delta` and `message_stop`."""
    events: list[Event] = [message_start()]
    for block in blocks:
        events.extend(block)
    return [*events, message_delta(stop, output_tokens), message_stop()]


@dataclass
class Sse:
    events: list[Event | str]
    """Each an event payload, or a raw `data:` payload string (for malformed events)."""
    cut: bool = False


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


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-stream (as the provider does after an error) is normal


class FakeAnthropic:
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
                        Request(
                            self.path,
                            dict(self.headers),
                            json.loads(raw),
                            raw,
                            self.client_address[1],
                        )
                    )
                    response = (
                        owner.script.pop(0)
                        if owner.script
                        else Status(500, error_body("api_error", "the test script is exhausted"))
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
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in response.events:
                    if isinstance(event, str):
                        frame = f"data: {event}\n\n"
                    else:
                        frame = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                    data = frame.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                if response.cut:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b"0\r\n\r\n")

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
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
