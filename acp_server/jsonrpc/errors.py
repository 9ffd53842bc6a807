"""The JSON-RPC 2.0 errors both ends share: the error object, `RpcError` and its protocol codes.

Each protocol error is an `RpcError` subclass with a `CODE` and a default `MESSAGE`
(pygls-style); the server adds its own codes beside them (`acp_server.server.errors`), and the
client raises `RpcError` with the code a peer answered (`code=`). `ConnectionClosed` is what a
waiter for an answer gets once the peer can no longer give one, on either end.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec
from msgspec import UNSET, UnsetType

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
MAX_MESSAGE_CHARS: Final = 1000
"""No error message is longer: its middle is cut, so that a closing `` - at `$.path` `` stays."""


class ErrorObject(msgspec.Struct, omit_defaults=True, gc=False):
    """A JSON-RPC error object as it goes on the wire."""

    code: int
    message: str
    data: Any | UnsetType = UNSET


class RpcError(Exception):
    """An error the peer may see: a code, a one-sentence message, optional structured `data`."""

    CODE: ClassVar[int] = INTERNAL_ERROR
    MESSAGE: ClassVar[str] = "Internal error"

    def __init__(
        self,
        message: str | None = None,
        data: Any | UnsetType = UNSET,
        *,
        code: int | None = None,
    ) -> None:
        self.message = _bounded(message) if message is not None else self.MESSAGE
        self.data = data
        self.code = code if code is not None else self.CODE
        super().__init__(self.message)

    def to_wire(self) -> ErrorObject:
        return ErrorObject(self.code, self.message, self.data)


def _bounded(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    tail = MAX_MESSAGE_CHARS // 10
    return message[: MAX_MESSAGE_CHARS - tail - 3] + "..." + message[-tail:]


class ParseError(RpcError):
    CODE = PARSE_ERROR
    MESSAGE = "Parse error"


class InvalidRequest(RpcError):
    CODE = INVALID_REQUEST
    MESSAGE = "Invalid request"


class InvalidParams(RpcError):
    CODE = INVALID_PARAMS
    MESSAGE = "Invalid params"

    @classmethod
    def at(cls, path: str, problem: str) -> InvalidParams:
        """An error about one field, phrased like msgspec's (`... - at `$.cwd``)."""
        return cls(f"Invalid params: {problem} - at `{path}`", {"path": path})


class InternalError(RpcError):
    CODE = INTERNAL_ERROR
    MESSAGE = "Internal error"


class RequestCancelled(RpcError):
    """The request was cancelled by `$/cancel_request` or by the connection's end."""

    CODE = -32800
    MESSAGE = "Request cancelled"


class ConnectionClosed(Exception):
    """The peer is gone: an outbound request can no longer be answered."""
