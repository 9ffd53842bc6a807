"""`ConnectionPort`: how the agent loop and its tools reach the client over one connection
(the `ClientPort` of `agent.ports`): outbound requests and notifications, and the capabilities
the client advertised in `initialize`, read from the connection's agent as they are now.

It is the one place the server's updates reach a connection, so it renders them for the
version the connection speaks: a v1 connection is sent every `SessionUpdate` as it is but the
kinds only v2 has (`V2_ONLY`); a v2 connection is sent each in v2's shapes (`core.acp_v2`), and
its permission requests in v2's shape. The capabilities are what `initialize` kept of the
client, whatever its version (v2's `initialize` keeps them in v1's terms: no `fs/*` or
`terminal/*` methods, v2's baseline updates), and whether it is shown v2's own kinds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from ..agent import ports
from ..core.acp_updates import V2_ONLY, SessionNotification
from ..core.acp_v2 import SUBAGENT_KINDS, V2Notification, permission_request, render
from .protocol import (
    ClientCapabilities,
    ClientSessionCapabilities,
    form_elicitation,
    marker_advertised,
)
from .rpc import Connection

UPDATE = "session/update"
_V2_ONLY = frozenset(V2_ONLY)
PERMISSION = "session/request_permission"


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
            shows_state=self._v2,
        )

    @property
    def _v2(self) -> bool:
        return self._agent.connection.protocol_version >= 2

    async def request(self, method: str, params: Any) -> Any:
        if method == PERMISSION and self._v2 and isinstance(params, dict):
            params = permission_request(params)
        return await self._agent.connection.request(method, params)

    async def notify(self, method: str, params: Any) -> None:
        connection = self._agent.connection
        if method == UPDATE and isinstance(params, SessionNotification):
            if connection.protocol_version < 2:  # every streamed chunk: kept short
                if type(params.update) not in _V2_ONLY:
                    await connection.notify(method, params)
                return
            update = params.update
            subagents = type(update) in SUBAGENT_KINDS and self.capabilities.subagents
            shown = render(update, subagents=subagents)
            if len(shown) == 1:
                await connection.notify(method, V2Notification(params.session_id, shown[0]))
            elif shown:
                await connection.notify_all(
                    method, [V2Notification(params.session_id, u) for u in shown]
                )
            return
        await connection.notify(method, params)

    async def notify_all(self, method: str, params: Iterable[Any]) -> None:
        if method == UPDATE:
            params = self._rendered(params)
        await self._agent.connection.notify_all(method, params)

    def _rendered(self, notes: Iterable[Any]) -> Iterable[Any]:
        """`session/update` params as this connection's version shows them (read lazily, maybe
        in the writer's thread: what they depend on is read now)."""
        if self._v2:
            return _v2_notes(notes, self.capabilities.subagents)
        return (
            n
            for n in notes
            if not (isinstance(n, SessionNotification) and type(n.update) in _V2_ONLY)
        )


def _v2_notes(notes: Iterable[Any], subagents: bool) -> Iterator[Any]:
    for note in notes:
        if not isinstance(note, SessionNotification):
            yield note
            continue
        for update in render(note.update, subagents=subagents):
            yield V2Notification(note.session_id, update)
