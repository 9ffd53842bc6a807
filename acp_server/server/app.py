"""`acp-server serve`: the stdio server put together, from process start to exit.

The server runs until its input ends, or until SIGTERM or SIGINT. Either way it shuts down the
same way: in-flight requests are given a moment to finish, every session log is flushed, fsynced
and unlocked, every frame already produced is written, and the logs are flushed. It exits 0,
unless a signal's shutdown could not finish (a session's work outlived the wait, a log could not
be written or closed): then 128 + the signal number (`lifetime.exit_status`).

Writing what was produced waits for the client to read it, however slowly; but once a signal has
come no write waits longer than the shutdown grace (the one requests get): a client that stopped
reading then has the rest dropped, so that nothing waits for it, and once every session is closed
the process exits at once, saying so in one line on stderr.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

import anyio

from ..core.replay_script import ReplayError
from ..providers.credentials import key_name
from ..providers.registry import live_provider, provider_spec
from ..providers.settings import ProviderSettings
from ..startup import handshake
from ..storage.api import Store
from ..storage.engines import StoreOptions
from ..storage.errors import LogError
from ..storage.redact import redact_url
from ..storage.url import open_store, store_url_for_dir
from ..transports.stdio import FdReader, FrameWriter, LineSink, Prefixed, lines
from ..transports.stdio_fds import StdioFds, claim_stdio
from .agent import AcpAgent
from .auth import Auth, KeyAuth, KeyHolder, NoAuth, is_local
from .config import ServeConfig
from .lifetime import exit_status, prepared, sessions_served
from .rpc import Connection

if TYPE_CHECKING:  # the provider modules are imported when a provider is set up
    from ..providers.base import Provider
    from .listen import ListenConfig

log = logging.getLogger("acp_server")


def configure_logging(level: str) -> None:
    """Logs go to stderr, always: stdout is the protocol's."""
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )


def load_provider(config: ServeConfig) -> Provider:
    """The model provider the flags name, built by its entry in the registry. Raises
    `ValueError` (or `ReplayError`, `OSError`) when it cannot be set up."""
    spec = provider_spec(config.provider)
    if spec.live and not config.model:
        raise ValueError(f"--provider {spec.name} needs --model")
    # ServeConfig names each provider setting as ProviderSettings does; a live provider's
    # variable defaults to the registry's.
    given = {name: getattr(config, name) for name in ProviderSettings.__struct_fields__}
    given.update(model=config.model or "", api_key_env=config.api_key_env or spec.api_key_env)
    return spec.build(ProviderSettings(**given))  # its module (httpx for a live one) loads now


def provider_auth(config: ServeConfig, provider: Provider) -> Auth:
    """Whether the provider needs a key (SPEC 4.4): a live one does, unless its endpoint is on
    this machine."""
    live = live_provider(config.provider)
    if live is None:
        return NoAuth()
    base_url = config.base_url or live.default_base_url
    return KeyAuth(
        cast(KeyHolder, provider),
        key_name(live.name, config.base_url),
        key_required=not is_local(base_url),
    )


class Handover(NamedTuple):
    """What the early handshake did before the connection started: the input it read and did
    not answer, and the params of the `initialize` it answered, if it did."""

    read: bytes
    initialized: dict[str, Any] | None


NOTHING_HANDED_OVER: Final = Handover(b"", None)


async def serve(
    config: ServeConfig,
    fds: StdioFds,
    provider: Provider,
    store: Store | None = None,
    handover: Handover = NOTHING_HANDED_OVER,
) -> int:
    """Serve one client over `fds` until its input ends; the exit status."""
    reader = FdReader(fds.input)
    writer = FrameWriter(fds.output)
    connection = Connection(LineSink(writer))
    if store is None:
        store = open_config_store(config)
    if not await prepared(store):
        return 2
    signalled: int | None = None

    async def watch_signals() -> None:
        # For the whole of serving, the final writing of the output included; the first signal
        # only, so that a second one (with the default action back in place) cuts the shutdown
        # short.
        nonlocal signalled
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: shutting down", signum)
                signalled = signum
                connection.stop()
                writer.hurry(connection.shutdown_grace)  # a client that stopped reading is left
                return

    async with anyio.create_task_group() as outer:
        outer.start_soon(writer.run)
        outer.start_soon(watch_signals)
        try:
            async with sessions_served(store, provider) as sessions:
                agent = AcpAgent(
                    connection,
                    sessions,
                    provider,
                    config,
                    provider_auth(config, provider),
                    turns_outlive=False,  # the process ends with its one client
                )
                agent.install()
                if handover.initialized is not None:
                    # Answered already: only what the client told us stays.
                    agent.answered_early(handover.initialized)

                async def watch_output() -> None:
                    await writer.broken.wait()
                    connection.stop()  # nobody can hear us any more

                async with anyio.create_task_group() as watchers:
                    watchers.start_soon(watch_output)
                    await connection.serve(
                        lines(Prefixed(handover.read, reader), config.max_line_bytes)
                    )
                    watchers.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await writer.aclose()  # the writer drains what is queued, then ends
                await writer.ended.wait()
            outer.cancel_scope.cancel()  # the signals are no longer watched
    status = exit_status(signalled, sessions.unfinished)
    log.info("served; exit status %d", status)
    if writer.abandoned:
        raise OutputNotRead(status)
    return status


class OutputNotRead(Exception):
    """Serving ended (every session closed) with output the client never read: a write of it
    is still blocked in a worker thread, which nothing can end, so the process must exit
    without waiting for its threads (`_run` does)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def open_config_store(config: ServeConfig) -> Store:
    """The store `config` names (`LogError` or `OSError` when it cannot be used)."""
    url = config.store if config.store is not None else store_url_for_dir(config.sessions_dir)
    options = StoreOptions(read_url=config.store_read, retry_seconds=config.store_retry)
    return open_store(url, pack=config.pack, compression=config.compression, options=options)


def _have_uvloop() -> bool:
    """uvloop (a dependency where it builds) makes every event loop turn cheaper: a JSON-RPC
    round trip costs noticeably less CPU. Without it, asyncio's own loop serves the same."""
    return importlib.util.find_spec("uvloop") is not None


def run_server(config: ServeConfig) -> int:
    """Take over stdio and serve; the process exit status."""
    configure_logging(config.log_level)
    try:
        provider = load_provider(config)
    except (ReplayError, OSError, ValueError) as exc:
        sys.stderr.write(f"acp-server serve: error: {exc}\n")
        return 2
    try:
        store = open_config_store(config)
    except (LogError, OSError) as exc:
        sys.stderr.write(f"acp-server serve: error: {exc}\n")
        return 2
    source = f" ({config.store_source})" if config.store_source else ""
    log.info("sessions are stored in %s%s", store.url, source)
    if config.store_read is not None:
        log.info("reads go first to %s", redact_url(config.store_read))
    if config.socket is not None:
        return _run(serve_on_socket, config, provider, store)
    if config.listen is not None:
        return _run(serve_listening, config, provider, store)
    try:
        fds = claim_stdio()
    except OSError as exc:  # e.g. started with stdin or stdout closed
        sys.stderr.write(
            f"acp-server serve: error: cannot use stdin/stdout for the protocol: {exc}\n"
        )
        return 2
    # Everything loaded so far lives as long as the process: keep it out of the cycle
    # collector's way, so that each collection only walks what requests allocate. No collection
    # first: at this point one finds a few dozen unreachable objects and delays the first answer.
    gc.freeze()
    early = handshake.started()
    if early is None:
        return _run(serve, config, fds, provider, store)
    read = early.finish()  # the connection reads from here on
    if early.answered is not None:
        log.info("initialize answered while the server started")
    return _run(serve, config, fds, provider, store, Handover(read, early.answered))


def _run(main: Callable[..., Awaitable[int]], *args: Any) -> int:
    try:
        return anyio.run(main, *args, backend_options={"use_uvloop": _have_uvloop()})
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        return 130
    except OutputNotRead as ended:
        sys.stderr.write(
            "acp-server serve: the client was not reading its output;"
            " what was left to write is dropped\n"
        )
        logging.shutdown()
        sys.stderr.flush()
        os._exit(ended.status)  # the thread stuck writing would hold up a normal exit forever
    finally:
        logging.shutdown()


async def serve_listening(config: ServeConfig, provider: Provider, store: Store) -> int:
    """`serve --listen`: the WebSocket server (imported only then)."""
    from .listen import serve_websocket

    listen = listen_config(config)
    assert listen is not None
    return await serve_websocket(config, listen, provider, provider_auth(config, provider), store)


async def serve_on_socket(config: ServeConfig, provider: Provider, store: Store) -> int:
    """`serve --socket`: the shared server on a Unix socket, with `--listen` WebSocket too."""
    from .unix import serve_shared

    auth = provider_auth(config, provider)
    return await serve_shared(config, provider, auth, store, listen_config(config))


def listen_config(config: ServeConfig) -> ListenConfig | None:
    """Where and for whom `--listen` serves WebSocket (a new token unless `--token-file`)."""
    if config.listen is None:
        return None
    import secrets

    from ..providers.secret import Secret
    from .listen import ListenConfig

    host, port = config.listen
    generated = config.token is None
    return ListenConfig(
        host,
        port,
        Secret(secrets.token_urlsafe(32)) if config.token is None else config.token,
        token_generated=generated,
        allowed_origins=frozenset(config.allowed_origins),
        max_pending_requests=config.max_pending_requests,
    )
