"""The client's errors: a JSON-RPC error answer, and a connection that has ended."""

from __future__ import annotations

from typing import Any, Final

METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603


class RpcError(Exception):
    """A JSON-RPC error: the server's answer to a request, or ours to one of its requests."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConnectionClosed(Exception):
    """The server's output has ended (or its input is closed): no answer will come."""
