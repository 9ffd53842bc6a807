"""A real HTTP server on 127.0.0.1 that speaks Anthropic's streaming Messages API (a test helper).

`FakeAnthropic` is a `sse_server.LoopbackServer` (a script of canned responses, `Sse` streams
and `Status` answers, one per request) that sends each event as `event: <type>` and
`data: <json>`, as the API does; a stream ends with its `message_stop` event.

The event builders below (`message_start`, `text_block`, `thinking_block`, `tool_block`,
`message_delta`, ...) give the API's event payloads.
"""

from __future__ import annotations

import json
from typing import Any

from sse_server import LoopbackServer, Request, Response, Sse, Status

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


class FakeAnthropic(LoopbackServer):
    def frame(self, event: Event | str) -> str:
        """`event: <type>` and `data: <json>`, as the API sends them (a raw string: data only)."""
        if isinstance(event, str):
            return f"data: {event}\n\n"
        return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"

    def exhausted(self) -> Response:
        return Status(500, error_body("api_error", "the test script is exhausted"))


__all__ = [
    "Event",
    "FakeAnthropic",
    "Request",
    "Response",
    "Sse",
    "Status",
    "block_start",
    "block_stop",
    "delta",
    "error_body",
    "error_event",
    "message_delta",
    "message_start",
    "message_stop",
    "ping",
    "reply",
    "text_block",
    "thinking_block",
    "tool_block",
]
