"""A serving process's sessions, from a prepared store to a closed one: the part of start-up and
shutdown that the stdio server and `serve --listen` share.

`prepared` readies the store (or says on stderr why it cannot be used). `sessions_served` is the
registry for as long as the process serves: the live sessions' own work (their MCP connections)
runs in a task group that outlives every request; at the end every session is closed (its log
flushed, fsynced and unlocked), whatever work is left is cancelled, then the provider's client
and the store are closed. What could not be finished on the way is noted in the registry's
`unfinished`, and `exit_status` turns it into the process's exit status: a shutdown asked for by
SIGTERM or SIGINT that completed exits 0 (service managers and container runtimes read
128 + the signal as a failure), one that could not finish exits 128 + the signal.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from ..storage.api import Store
from ..storage.errors import LogError
from .sessions import SessionRegistry

if TYPE_CHECKING:
    from ..providers.base import Provider

log = logging.getLogger(__name__)


async def prepared(store: Store) -> bool:
    """Ready `store` for serving; False (said on stderr, the store closed) if it cannot be."""
    try:
        await store.prepare()
    except (LogError, OSError) as exc:
        sys.stderr.write(f"acp-server serve: error: {exc}\n")
        await store.aclose()
        return False
    return True


@asynccontextmanager
async def sessions_served(store: Store, provider: Provider) -> AsyncIterator[SessionRegistry]:
    """The process's session registry over the prepared `store`, closed with everything it
    holds on the way out."""
    sessions = SessionRegistry(store)
    try:
        async with anyio.create_task_group() as services:
            sessions.services = services
            try:
                yield sessions
            finally:
                with anyio.CancelScope(shield=True):
                    await sessions.close_all()
                # Closing the sessions closed their work; anything left ends here.
                services.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            close_provider = getattr(provider, "aclose", None)  # a live one's HTTP client
            try:
                if close_provider is not None:
                    await close_provider()
            except Exception as exc:
                log.exception("could not close the provider")
                sessions.unfinished.append(f"the provider: could not close: {type(exc).__name__}")
            try:
                await store.aclose()
            except Exception as exc:
                log.exception("could not close the store")
                sessions.unfinished.append(f"the store: could not close: {type(exc).__name__}")


def exit_status(signum: int | None, unfinished: Sequence[str]) -> int:
    """The exit status of a server that stopped at the end of its input (`signum` None) or on a
    signal: 0, unless a signal's shutdown could not finish (`unfinished` names what), then
    128 + the signal, as if the signal had ended the process."""
    if signum is None:
        return 0
    if unfinished:
        log.warning("shutdown did not finish cleanly: %s", "; ".join(unfinished))
        return 128 + signum
    return 0
