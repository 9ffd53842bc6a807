"""The client's errors: a JSON-RPC error answer, and a connection that has ended."""

from __future__ import annotations

from ..core.rpc_error import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError

__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "METHOD_NOT_FOUND", "ConnectionClosed", "RpcError"]


class ConnectionClosed(Exception):
    """The server's output has ended (or its input is closed): no answer will come."""
