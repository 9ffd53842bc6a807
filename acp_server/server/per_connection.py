"""One client connection of a server that serves many over one `SessionRegistry`.

`serve --listen` (WebSocket) and the shared server of `acp-server attach` (Unix socket) give
each connection its own `Connection` and `AcpAgent` (what the client told us in `initialize`,
its follow subscriptions) over the process's registry; when the connection ends, it is
detached from the sessions it was attached to (a session no other client holds and no turn
runs in is closed; a running turn goes on). `agent_serving` is that part, the same for both
transports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from .agent import AcpAgent
from .auth import Auth
from .config import ServeConfig
from .rpc import Connection
from .sessions import SessionRegistry

if TYPE_CHECKING:
    from ..providers.base import Provider


@asynccontextmanager
async def agent_serving(
    connection: Connection,
    sessions: SessionRegistry,
    provider: Provider,
    config: ServeConfig,
    auth: Auth,
) -> AsyncIterator[AcpAgent]:
    """The agent of `connection`, installed on it; on the way out it is detached from its
    sessions (shielded: a cancelled server still closes the logs of those it alone held)."""
    agent = AcpAgent(connection, sessions, provider, config, auth)
    agent.install()
    try:
        yield agent
    finally:
        with anyio.CancelScope(shield=True):
            await sessions.close_owned(agent.port)
