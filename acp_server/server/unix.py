"""`acp-server serve --socket PATH`: the user's shared server, which `acp-server attach` relays to.

One process, many connections, one `SessionRegistry`, as `serve --listen` serves them: each
connection of the Unix socket at PATH gets its own `Connection` and `AcpAgent`
(`per_connection`), its lines framed as over stdio (`transports.unix`). With `--listen` the same
registry is also served over WebSocket, with the viewer (`listen.WebSocketServer`).

Only the user may connect: the socket is made 0600 in a directory that must be the user's alone
(`startup.attach_places.private_dir`), and a peer of another uid (`SO_PEERCRED`) is refused, its
connection closed and one line logged. A socket that already answers is another server's: this
one does not start. Once it listens the server writes `KEY.json` beside its socket (its pid,
store and viewer address, for `attach --status`); at the end both files go.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup

from ..startup.attach_places import PlaceError, connect, private_dir
from ..storage.api import Store
from ..transports.stdio import lines
from ..transports.unix import StreamLineSink, StreamReader
from .auth import Auth
from .config import ServeConfig
from .lifetime import exit_status, prepared, sessions_served
from .listen import ListenConfig, WebSocketServer, accepted, address, announce
from .per_connection import agent_serving
from .rpc import Connection
from .sessions import SessionRegistry

if TYPE_CHECKING:
    from ..providers.base import Provider

log = logging.getLogger(__name__)


class SocketTaken(Exception):
    """Another server answers on the socket's path."""


def peer_uid(stream: SocketStream) -> int:
    """The uid of the process at the other end of `stream` (`SO_PEERCRED`)."""
    raw = stream.extra(SocketAttribute.raw_socket)
    credentials = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", credentials)[1]
    return uid


class UnixServer:
    """Every connection of the socket at `path`, over one session registry."""

    def __init__(
        self,
        path: Path,
        config: ServeConfig,
        sessions: SessionRegistry,
        provider: Provider,
        auth: Auth,
    ) -> None:
        self.path = path
        self.config = config
        self.sessions = sessions
        self.provider = provider
        self.auth = auth
        self._accepting = anyio.CancelScope()
        self._connections: set[Connection] = set()
        self._stopping = False

    async def serve(
        self, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Accept connections until `stop()`; reports once listening. `PlaceError` for a
        directory others may enter, `SocketTaken` for a socket another server answers on."""
        await anyio.to_thread.run_sync(_check_place, self.path)
        listener = await anyio.create_unix_listener(self.path, mode=0o600)
        async with listener:
            task_status.started()
            async with anyio.create_task_group() as connections:
                with self._accepting:
                    await self._accept_all(listener, connections)

    def stop(self) -> None:
        """Stop accepting, and end every connection as if its peer had closed it."""
        self._stopping = True
        self._accepting.cancel()
        for connection in list(self._connections):
            connection.stop()

    async def _accept_all(self, listener: SocketListener, connections: TaskGroup) -> None:
        async for stream in accepted(listener):
            uid = peer_uid(stream)
            if uid != os.getuid():
                log.warning("refused a connection of uid %d: not this server's user", uid)
                await stream.aclose()
                continue
            connections.start_soon(self._serve_one, stream)

    async def _serve_one(self, stream: SocketStream) -> None:
        sink = StreamLineSink(stream)
        # The user's own editor, as over stdio: its requests in flight are not bounded.
        connection = Connection(sink)
        try:
            async with agent_serving(
                connection, self.sessions, self.provider, self.config, self.auth
            ):
                self._connections.add(connection)
                if self._stopping:
                    connection.stop()
                try:
                    await connection.serve(lines(StreamReader(stream), self.config.max_line_bytes))
                finally:
                    self._connections.discard(connection)
        except Exception:
            # One connection's failure must never end the others.
            log.exception("Unix socket connection failed")
        finally:
            with anyio.CancelScope(shield=True):
                await sink.aclose()


async def serve_shared(
    config: ServeConfig,
    provider: Provider,
    auth: Auth,
    store: Store,
    listen: ListenConfig | None,
) -> int:
    """Serve on the Unix socket of `config.socket` (and over WebSocket with `listen`) until
    SIGTERM or SIGINT; the exit status (`exit_status`; 2 when it cannot start)."""
    assert config.socket is not None
    path = config.socket
    if not await prepared(store):
        return 2
    signalled: int | None = None
    about = path.with_suffix(".json")
    async with sessions_served(store, provider) as sessions:
        server = UnixServer(path, config, sessions, provider, auth)
        web = None if listen is None else WebSocketServer(config, listen, sessions, provider, auth)
        async with anyio.create_task_group() as main:
            try:
                await main.start(server.serve)
            except (OSError, PlaceError, SocketTaken) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                sys.stderr.write(f"acp-server serve: error: --socket: {reason}\n")
                return 2
            try:
                viewer = None
                if web is not None and listen is not None:
                    try:
                        port = await main.start(web.serve)
                    except OSError as exc:
                        sys.stderr.write(
                            f"acp-server serve: error: cannot listen on "
                            f"{listen.host}:{listen.port}: {exc.strerror or exc}\n"
                        )
                        server.stop()
                        return 2
                    announce(listen, port)
                    viewer = f"http://{address(listen, port)}/"
                await anyio.to_thread.run_sync(
                    _write_about, about, {"pid": os.getpid(), "store": store.url, "viewer": viewer}
                )
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        log.info("signal %d: shutting down", signum)
                        signalled = signum
                        break
            finally:
                server.stop()
                if web is not None:
                    web.stop()
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_remove, about, path)
    status = exit_status(signalled, sessions.unfinished)
    log.info("served; exit status %d", status)
    return status


def _check_place(path: Path) -> None:
    """`PlaceError` or `SocketTaken` when this server must not listen at `path`."""
    private_dir(str(path.parent))
    other = connect(str(path))
    if other is not None:
        other.close()
        raise SocketTaken(f"another server answers on {path}")


def _write_about(path: Path, about: dict[str, int | str | None]) -> None:
    """`KEY.json`, 0600, whole or not at all."""
    partial = path.with_suffix(".json.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(about, file)
    os.replace(partial, path)


def _remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
