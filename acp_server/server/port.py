"""`ConnectionPort`: how the agent loop and its tools reach the client over one connection
(the `ClientPort` of `agent.ports`): outbound requests and notifications, and the capabilities
the client advertised in `initialize`, read from the connection's agent as they are now.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..agent import ports
from .protocol import (
    ClientCapabilities,
    ClientSessionCapabilities,
    form_elicitation,
    marker_advertised,
)
from .rpc import Connection


class PortOwner(Protocol):
    """What the port reads of its connection's agent (`AcpAgent`)."""

    connection: Connection
    client_capabilities: ClientCapabilities
    client_session_capabilities: ClientSessionCapabilities


class ConnectionPort:
    """The agent loop's `ClientPort` over this connection: outbound requests and notifications,
    and the capabilities the client advertised in `initialize`."""

    def __init__(self, agent: PortOwner) -> None:
        self._agent = agent

    @property
    def capabilities(self) -> ports.ClientCapabilities:
        advertised = self._agent.client_capabilities
        session = self._agent.client_session_capabilities
        return ports.ClientCapabilities(
            read_text_file=advertised.fs.read_text_file,
            write_text_file=advertised.fs.write_text_file,
            terminal=advertised.terminal,
            compaction=marker_advertised(session.compaction),
            notices=marker_advertised(session.notices),
            plan_operations=marker_advertised(advertised.plan),
            subagents=marker_advertised(advertised.subagents),
            elicitation_form=form_elicitation(advertised),
        )

    async def request(self, method: str, params: Any) -> Any:
        return await self._agent.connection.request(method, params)

    async def notify(self, method: str, params: Any) -> None:
        await self._agent.connection.notify(method, params)

    async def notify_all(self, method: str, params: Iterable[Any]) -> None:
        await self._agent.connection.notify_all(method, params)
