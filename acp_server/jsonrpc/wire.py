"""JSON-RPC 2.0 messages as bytes: the top-level probe and the encoders of every frame we send.

A frame here is one whole message followed by a newline; msgspec escapes newlines inside
strings, so the message is one line. (Where that newline belongs is the transport's business;
the WebSocket transport leaves it out.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

import msgspec
from msgspec import UNSET

from .errors import ErrorObject, RpcError

NO_RAW: Final = msgspec.Raw()


class Envelope(msgspec.Struct, gc=False):
    """The top level of any JSON-RPC message; member values are decoded lazily."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: msgspec.Raw = NO_RAW
    result: msgspec.Raw = NO_RAW
    error: msgspec.Raw = NO_RAW


class _Response(msgspec.Struct, gc=False):
    jsonrpc: str
    id: Any
    result: Any


class _ErrorResponse(msgspec.Struct, gc=False):
    jsonrpc: str
    id: Any
    error: ErrorObject


class _Request(msgspec.Struct, omit_defaults=True, gc=False):
    jsonrpc: str
    id: int
    method: str
    params: Any = UNSET


class _Notification(msgspec.Struct, omit_defaults=True, gc=False):
    jsonrpc: str
    method: str
    params: Any = UNSET


envelope_decoder: Final = msgspec.json.Decoder(Envelope)
any_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


def encode_frame(message: Any) -> bytes:
    """One message as a protocol line. msgspec escapes newlines in strings: it is one line."""
    buffer = bytearray()
    _encoder.encode_into(message, buffer)
    buffer += b"\n"
    return bytes(buffer)


def request_frame(request_id: int, method: str, params: Any = UNSET) -> bytes:
    return encode_frame(_Request("2.0", request_id, method, params))


def result_frame(request_id: Any, result: Any) -> bytes:
    return encode_frame(_Response("2.0", request_id, result))


def error_frame(request_id: Any, error: RpcError | ErrorObject) -> bytes:
    wire = error.to_wire() if isinstance(error, RpcError) else error
    return encode_frame(_ErrorResponse("2.0", request_id, wire))


_notification_heads: dict[str, bytes] = {}
"""Per method, the bytes of a notification before its params (`session/update` above all)."""


def notification_frame(method: str, params: Any = UNSET) -> bytes:
    """`encode_frame` of a notification, the same bytes, with the fixed head encoded once per
    method: the hot path while a model streams."""
    if params is UNSET:
        return encode_frame(_Notification("2.0", method))
    return _notification_head(method) + _encoder.encode(params) + b"}\n"


def _notification_head(method: str) -> bytes:
    head = _notification_heads.get(method)
    if head is None:
        head = b'{"jsonrpc":"2.0","method":' + _encoder.encode(method) + b',"params":'
        if len(_notification_heads) < 64:
            _notification_heads[method] = head
    return head


FRAMES_BATCH: Final = 256 * 1024
"""Bytes of notifications `notification_frames` encodes into one buffer before handing it on:
enough to make a write worth its cost, few enough that the client reads the first while the
rest are encoded."""


def notification_frames(method: str, params: Iterable[Any]) -> Iterator[bytes]:
    """The frames of one notification per params, as `notification_frame` encodes each, in
    buffers of about `FRAMES_BATCH` bytes (a load's replay is megabytes of them).

    Each params is encoded on its own and a buffer joined once: `encode_into` a growing
    buffer would resize it, and so copy all of it, for every params it holds."""
    head = _notification_head(method)
    encode = _encoder.encode
    parts: list[bytes] = []
    size = 0
    for value in params:
        body = encode(value)
        parts += (head, body, b"}\n")
        size += len(head) + len(body) + 2
        if size >= FRAMES_BATCH:
            yield b"".join(parts)
            parts.clear()
            size = 0
    if parts:
        yield b"".join(parts)


def valid_id(value: Any) -> bool:
    """ACP's RequestId: null, an integer or a string. Booleans are ints in Python; not here."""
    kind = type(value)
    return kind is str or kind is int or value is None
