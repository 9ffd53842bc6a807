"""`acp-server serve --listen HOST:PORT`: the same JSON-RPC over WebSocket (SPEC 3.4).

One process, many connections, one `SessionRegistry`: a session prompted on one connection can
be followed and paged from any other. Each connection gets its own `Connection` and `AcpAgent`
(what the client told us in `initialize`, its follow subscriptions); every connection that
creates, resumes or loads a live session is attached to it and drives it, and a turn goes on
when its connection goes (`attached`).

The same address serves the session viewer: `/` (the store's sessions), `/sessions/<id>` (one
session) and the files of `acp_server/web/` (the browser client module at `/client.js`). The
WebSocket is at `/acp` and needs the bearer token (`Authorization: Bearer <token>`, or the
`token` query parameter for browsers) and, from a browser, an `Origin` this server allows: its
own, or one given with `--allow-origin`. The pages need no token: they hold no data, and ask
for the token the user opened them with.

`route` is the pure part (a request in, a response or "upgrade" out); `WebSocketServer` is the
I/O around it. Whoever can reach the address can open connections, so the server bounds what
they hold: `max_opening` connections still sending their opening request and `max_connections`
in all (a connection past either is answered 503 and closed at once), and running out of file
descriptors only pauses accepting (each accept failure is retried after a growing pause).
"""

from __future__ import annotations

import email.utils
import errno
import hmac
import ipaddress
import logging
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, urlsplit

import anyio
from anyio.abc import ByteStream, SocketAttribute, SocketListener, SocketStream, TaskGroup
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from ..providers.secret import Secret
from ..storage.api import Store
from ..transports.websocket import Answer, WebSocketChannel, accept, refuse
from .auth import Auth
from .config import ServeConfig
from .lifetime import exit_status, prepared, sessions_served
from .per_connection import agent_serving
from .rpc import Connection
from .sessions import SessionRegistry

if TYPE_CHECKING:
    from ..providers.base import Provider

log = logging.getLogger(__name__)

WEB_DIR: Final = Path(__file__).resolve().parent.parent / "web"
"""The viewer's static files and the browser client module, shipped in the package."""

CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
ACP_PATH: Final = "/acp"
SINGLE_HEADERS: Final = ("Host", "Origin", "Authorization")
"""The request headers routing reads. Each is one value (RFC 9110 allows no list in any of
them): a request that repeats one is ambiguous, and refused with 400 before anything reads it."""
DEFAULT_MAX_PENDING_REQUESTS: Final = 64
DEFAULT_MAX_CONNECTIONS: Final = 256
"""Connections open at once. Each holds a descriptor (a live session holds a few more: its log,
its lock, its MCP servers' pipes), and a process usually may open 1024: a quarter for peers
leaves the rest to the sessions, and is far more than the clients and viewer tabs of one user."""
DEFAULT_MAX_OPENING: Final = 64
"""Connections still sending their opening request. A client's request comes in its first
packet and a browser opens about six connections per server: only a peer that connects and
says nothing holds a place for long (up to `HANDSHAKE_TIMEOUT`), and 64 such cannot take the
places of the connections that are served."""

ACCEPT_PAUSE: Final = 0.1
"""Seconds accepting pauses after a failure that is not one connection's (no descriptor or
memory left), doubled at each failure in a row up to `ACCEPT_PAUSE_MAX`: the connections that
end meanwhile give their descriptors back, and the failing accept does not spin."""
ACCEPT_PAUSE_MAX: Final = 1.0
_ONE_CONNECTIONS_FAILURE: Final = frozenset(
    {errno.ECONNABORTED, errno.ECONNRESET, errno.EPROTO, errno.EPERM, errno.ETIMEDOUT}
)
"""What accept(2) reports of the connection it was taking (gone before it was taken, refused
by a firewall rule): the next one is taken at once."""


@dataclass(frozen=True)
class ListenConfig:
    """Where and for whom to listen."""

    host: str
    port: int
    token: Secret
    token_generated: bool = True
    """Made at start (and shown on stderr), rather than read from `--token-file`."""
    allowed_origins: frozenset[str] = frozenset()
    """Origins besides the server's own whose pages may open the WebSocket."""
    max_pending_requests: int = DEFAULT_MAX_PENDING_REQUESTS
    compression: bool = True
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Connections open at once, whatever they are doing; one more is answered 503."""
    max_opening: int = DEFAULT_MAX_OPENING
    """Connections whose opening request has not all come in; one more is answered 503."""


# ---------------------------------------------------------------------------------------------
# Routing (pure).


def route(request: Request, config: ListenConfig, own_origins: frozenset[str]) -> Response | None:
    """The answer to an opening request: a response, or None to upgrade it to the WebSocket."""
    repeated = next((h for h in SINGLE_HEADERS if len(request.headers.get_all(h)) > 1), None)
    if repeated is not None:
        return text_response(400, f"The {repeated} header is given more than once\n")
    url = urlsplit(request.path)
    path = url.path
    if path == ACP_PATH:
        origin = request.headers.get("Origin")
        if origin is not None and normalized_origin(origin) not in (
            own_origins | config.allowed_origins
        ):
            return text_response(403, f"Origin {origin} is not allowed to connect\n")
        if not _token_matches(request, url.query, config.token):
            response = text_response(401, "A bearer token is required (Authorization or ?token=)\n")
            response.headers["WWW-Authenticate"] = 'Bearer realm="acp-server"'
            return response
        return None  # upgrade; the protocol checks the WebSocket headers themselves
    if path == "/" or (path.startswith("/sessions/") and "/" not in path[len("/sessions/") :]):
        return page_response("index.html", request)
    name = path[1:]
    if "/" not in name and name in web_files():
        return page_response(name, request)
    return text_response(404, "Not found\n")


def _token_matches(request: Request, query: str, token: Secret) -> bool:
    authorization = request.headers.get("Authorization", "")
    scheme, _, given = authorization.partition(" ")
    candidates = [given.strip()] if scheme.lower() == "bearer" else []
    candidates += parse_qs(query).get("token", [])
    expected = token.reveal().encode()
    return any(hmac.compare_digest(c.encode(), expected) for c in candidates)


def normalized_origin(origin: str) -> str:
    """An origin as compared: scheme and host in lower case, no trailing slash."""
    return origin.strip().rstrip("/").lower()


def own_origins(host: str, port: int) -> frozenset[str]:
    """The origins of this server's own pages, by every name its address answers to."""
    names = {host}
    if _is_loopback(host):
        names |= {"127.0.0.1", "localhost", "::1"}
    return frozenset(
        normalized_origin(f"http://{f'[{name}]' if ':' in name else name}:{port}") for name in names
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@cache
def web_files() -> dict[str, bytes]:
    """The files the viewer is made of, by name, read once."""
    if not WEB_DIR.is_dir():
        return {}
    return {
        path.name: path.read_bytes()
        for path in sorted(WEB_DIR.iterdir())
        if path.is_file() and path.suffix in CONTENT_TYPES
    }


def page_response(name: str, request: Request) -> Response:
    body = web_files().get(name)
    if body is None:
        return text_response(404, f"{name} is not part of this installation\n")
    host = request.headers.get("Host", "")
    headers = _headers(CONTENT_TYPES[Path(name).suffix], len(body))
    headers["Content-Security-Policy"] = (
        "default-src 'self'; "
        f"connect-src 'self' ws://{host}; "
        "img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
    return Response(200, "OK", headers, body)


def text_response(status: int, text: str) -> Response:
    body = text.encode()
    reasons = {
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        503: "Service Unavailable",
    }
    return Response(
        status, reasons.get(status, "Error"), _headers("text/plain; charset=utf-8", len(body)), body
    )


def _headers(content_type: str, length: int) -> Headers:
    return Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Type", content_type),
            ("Content-Length", str(length)),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            # The page's address carries the token: it must not travel on in a Referer.
            ("Referrer-Policy", "no-referrer"),
        ]
    )


# ---------------------------------------------------------------------------------------------
# The server.


class WebSocketServer:
    """Every connection of one `serve --listen` process, over one session registry."""

    def __init__(
        self,
        config: ServeConfig,
        listen: ListenConfig,
        sessions: SessionRegistry,
        provider: Provider,
        auth: Auth,
    ) -> None:
        self.config = config
        self.listen = listen
        self.sessions = sessions
        self.provider = provider
        self.auth = auth
        self._own_origins = own_origins(listen.host, listen.port)
        self._accepting = anyio.CancelScope()
        self._connections: dict[Connection, WebSocketChannel] = {}
        self._handshakes: set[anyio.CancelScope] = set()
        self._stopping = False
        self._open = 0
        """Connections accepted and not yet closed."""
        self._opening = 0
        """Of those, the ones whose opening request has not all come in."""

    def answer(self, request: Request) -> Response | None:
        return route(request, self.listen, self._own_origins)

    async def serve(
        self, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Accept connections until `stop()`; reports the bound port once listening."""
        listener = await anyio.create_tcp_listener(
            local_host=self.listen.host, local_port=self.listen.port
        )
        async with listener:
            port = listener.listeners[0].extra(SocketAttribute.local_port)
            self._own_origins = own_origins(self.listen.host, port)
            task_status.started(port)
            async with anyio.create_task_group() as connections:
                with self._accepting:
                    async with anyio.create_task_group() as accepting:
                        for one in listener.listeners:  # one per address family of the host
                            assert isinstance(one, SocketListener)  # as create_tcp_listener makes
                            accepting.start_soon(self._accept_all, one, connections)

    def stop(self) -> None:
        """Stop accepting, drop the connections still opening, and end every other as if its
        peer had closed it, within its `shutdown_grace`: what it runs gets that long, and so
        does each write to a peer that has stopped reading."""
        self._stopping = True
        self._accepting.cancel()
        for handshake in list(self._handshakes):
            handshake.cancel()
        for connection, channel in list(self._connections.items()):
            self._end(connection, channel)

    @staticmethod
    def _end(connection: Connection, channel: WebSocketChannel) -> None:
        connection.stop()
        channel.hurry(connection.shutdown_grace)

    async def _accept_all(self, listener: SocketListener, connections: TaskGroup) -> None:
        """Take each connection `listener` accepts into `connections`, or refuse it."""
        async for stream in accepted(listener):
            refusal = self._refusal()
            if refusal is not None:
                await refuse(stream, text_response(503, refusal))
                continue
            self._open += 1
            self._opening += 1
            connections.start_soon(self._serve_one, stream)

    def _refusal(self) -> str | None:
        """Why one more connection cannot be taken now, if it cannot."""
        if self._open >= self.listen.max_connections:
            return "Too many connections are open: try again later\n"
        if self._opening >= self.listen.max_opening:
            return "Too many connections are still sending their request: try again later\n"
        return None

    async def _serve_one(self, stream: ByteStream) -> None:
        opening = True

        def answer(request: Request) -> Response | None:
            # Called once the request is all in: the connection no longer counts as opening,
            # before anything is answered.
            nonlocal opening
            opening = False
            self._opening -= 1
            return self.answer(request)

        try:
            await self._connection(stream, answer)
        except Exception:
            # One connection's failure must never end the others.
            log.exception("WebSocket connection failed")
        finally:
            self._open -= 1
            if opening:
                self._opening -= 1

    async def _connection(self, stream: ByteStream, answer: Answer) -> None:
        channel: WebSocketChannel | None = None
        with anyio.CancelScope() as handshake:
            self._handshakes.add(handshake)
            if self._stopping:
                handshake.cancel()
            try:
                channel = await accept(
                    stream,
                    answer,
                    max_message_bytes=self.config.max_line_bytes,
                    compression=self.listen.compression,
                )
            finally:
                self._handshakes.discard(handshake)
        if channel is None:
            return
        connection = Connection(channel, max_inflight=self.listen.max_pending_requests)
        try:
            async with agent_serving(
                connection, self.sessions, self.provider, self.config, self.auth
            ):
                self._connections[connection] = channel
                if self._stopping:
                    self._end(connection, channel)
                try:
                    async with anyio.create_task_group() as watched:
                        watched.start_soon(channel.watch)
                        await connection.serve(channel.messages())
                        watched.cancel_scope.cancel()
                finally:
                    del self._connections[connection]
        finally:
            with anyio.CancelScope(shield=True):
                await channel.close(1001 if self._stopping else 1000)


async def serve_websocket(
    config: ServeConfig, listen: ListenConfig, provider: Provider, auth: Auth, store: Store
) -> int:
    """Serve over WebSocket until SIGTERM or SIGINT; the exit status (`exit_status`: 0 once
    the shutdown completed)."""
    if not await prepared(store):
        return 2
    signalled: int | None = None
    async with sessions_served(store, provider) as sessions:
        server = WebSocketServer(config, listen, sessions, provider, auth)
        async with anyio.create_task_group() as main:
            try:
                port = await main.start(server.serve)
            except OSError as exc:
                sys.stderr.write(
                    f"acp-server serve: error: cannot listen on "
                    f"{listen.host}:{listen.port}: {exc.strerror or exc}\n"
                )
                return 2
            announce(listen, port)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("signal %d: shutting down", signum)
                    signalled = signum
                    server.stop()
                    break
    status = exit_status(signalled, sessions.unfinished)
    log.info("served; exit status %d", status)
    return status


async def accepted(listener: SocketListener) -> AsyncIterator[SocketStream]:
    """Each connection `listener` accepts: nothing an accept fails with ends the server. A
    connection that went before it was accepted is skipped; a failure that is not one
    connection's (no descriptor or memory left) pauses accepting (`ACCEPT_PAUSE`)."""
    pause = ACCEPT_PAUSE
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno in _ONE_CONNECTIONS_FAILURE:
                log.debug("a connection went before it was accepted: %s", exc)
                continue
            if pause == ACCEPT_PAUSE:  # once for each run of failures
                log.warning(
                    "cannot accept connections: %s; trying again in a while",
                    exc.strerror or exc,
                )
            await anyio.sleep(pause)
            pause = min(2 * pause, ACCEPT_PAUSE_MAX)
            continue
        pause = ACCEPT_PAUSE
        yield stream


def address(listen: ListenConfig, port: int) -> str:
    """`HOST:PORT` of `--listen` as a URL holds it (an IPv6 host in brackets)."""
    host = f"[{listen.host}]" if ":" in listen.host else listen.host
    return f"{host}:{port}"


def announce(listen: ListenConfig, port: int) -> None:
    """Where to connect, on stderr (stdout stays quiet)."""
    base = address(listen, port)
    sys.stderr.write(f"acp-server: ACP over WebSocket at ws://{base}{ACP_PATH}\n")
    if listen.token_generated:
        viewer = f"http://{base}/?token={listen.token.reveal()}"
    else:
        viewer = f"http://{base}/?token=<the token of --token-file>"
    sys.stderr.write(f"acp-server: session viewer at {viewer}\n")
    sys.stderr.flush()
