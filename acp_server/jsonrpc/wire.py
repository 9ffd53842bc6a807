"""JSON-RPC 2.0 messages as bytes: the top-level probe and the encoders of every frame we send.

A frame here is one whole message and nothing else: how messages are delimited is the
transport's business (stdio ends each with a newline, which msgspec never writes inside one, as
it escapes newlines in strings; a WebSocket text frame needs no delimiter).
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
    """One message as its JSON text."""
    return _encoder.encode(message)


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
    return _notification_head(method) + _encoder.encode(params) + b"}"


def _notification_head(method: str) -> bytes:
    head = _notification_heads.get(method)
    if head is None:
        head = b'{"jsonrpc":"2.0","method":' + _encoder.encode(method) + b',"params":'
        if len(_notification_heads) < 64:
            _notification_heads[method] = head
    return head


def notification_frames(method: str, params: Iterable[Any]) -> Iterator[bytes]:
    """The frames of one notification per params, as `notification_frame` encodes each, made
    as they are taken (a load's replay is megabytes of them: the transport takes them in its
    own time, and joins them into writes of its own size)."""
    head = _notification_head(method)
    encode = _encoder.encode
    for value in params:
        yield head + encode(value) + b"}"


def valid_id(value: Any) -> bool:
    """ACP's RequestId: null, an integer or a string. Booleans are ints in Python; not here."""
    kind = type(value)
    return kind is str or kind is int or value is None
