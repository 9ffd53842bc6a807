"""The ACP v2 methods of one connection (`AcpAgent` routes them when `initialize` agrees on
version 2): v2's shapes around the handlers v1 shares where the meaning is the same."""

from __future__ import annotations

from typing import Any, Protocol

from ...startup import handshake
from ..protocol import InitializeRequest
from ..rpc import Connection
from . import resume

VERSION = 2


class Agent(Protocol):
    """What the v2 methods use of their connection's `AcpAgent` (whose v1 handlers they
    share)."""

    connection: Connection


class V2Methods:
    """The v2 method table of `agent`'s connection."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def install(self) -> None:
        """Route the methods v2 has in shapes of its own (on v2 connections only)."""
        resume.install(self)

    def initialize(self, request: InitializeRequest) -> dict[str, Any]:
        """The v2 `initialize` answer: `info`, object capability markers, `authMethods`."""
        return handshake.initialize_result_v2()
