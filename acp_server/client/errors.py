"""The client's errors: a JSON-RPC error answer, and a connection that has ended."""

from __future__ import annotations

from ..jsonrpc.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ConnectionClosed,
    RpcError,
)

__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "METHOD_NOT_FOUND", "ConnectionClosed", "RpcError"]
