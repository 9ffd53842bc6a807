"""One client connection of a server that serves many over one `SessionRegistry`.

`serve --listen` (WebSocket) and the shared server of `acp-server attach` (Unix socket) give
each connection its own `Connection` and `AcpAgent` (what the client told us in `initialize`,
its follow subscriptions) over the process's registry; when the connection ends, the sessions
it opened are closed, those of the other connections live on. `agent_serving` is that part,
the same for both transports.
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
    """The agent of `connection`, installed on it; on the way out the sessions it opened are
    closed (shielded: a cancelled server still closes their logs)."""
    agent = AcpAgent(connection, sessions, provider, config, auth)
    agent.install()
    try:
        yield agent
    finally:
        with anyio.CancelScope(shield=True):
            await sessions.close_owned(agent)
