"""A JSON-RPC 2.0 error, as the server and the client both raise and send it.

The server subclasses `RpcError` once per code (`acp_server.server.errors`, each with a `CODE`
and a default `MESSAGE`); the client raises it with the code a peer answered (`code=`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec
from msgspec import UNSET, UnsetType

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
