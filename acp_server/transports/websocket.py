"""WebSocket framing over a TCP stream (RFC 6455): one JSON-RPC message per text frame.

The protocol itself is the sans-I/O `ServerProtocol` of the `websockets` library (bytes in,
events and bytes out); this module is the thin anyio layer around it, so the server's I/O stays
anyio's like everything else (see docs/decisions/websocket-transport.md):

- `accept` reads the opening HTTP request and hands it to the caller, who answers it with a
  plain HTTP response (a page, a refusal) or lets the upgrade go ahead. It is bounded in time
  and size: a peer that never finishes its request is dropped.
- `WebSocketChannel` is an upgraded connection: `messages()` gives each text message received
  (fragments joined, at most `max_message_bytes`), `send` sends one text frame. Pings are
  answered and the closing handshake done by the protocol object; a binary message, a message
  too big (1009) or a protocol error closes the connection with the matching close code.

Every write goes through one lock, in the order the protocol produced the bytes, so frames of
concurrent senders never interleave. Every write has a deadline, kept by `watch` (which the
channel's owner runs beside it): a peer that takes nothing for `SEND_TIMEOUT` (or, once the
server is ending, for what `hurry` allows) has stopped reading, and its connection is closed as
if it had gone, so that no sender waits on it for ever.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Final

import anyio
from anyio.abc import ByteStream
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol

log = logging.getLogger(__name__)

_protocol_log: Final = logging.getLogger(f"{__name__}.protocol")
# The protocol object logs each request line at debug level, query string included, and a
# browser's token travels in the query string: it must never reach a log.
_protocol_log.setLevel(logging.WARNING)

READ_SIZE: Final = 256 * 1024
HANDSHAKE_TIMEOUT: Final = 10.0
"""Seconds a peer has to send its whole opening request."""
SEND_TIMEOUT: Final = 30.0
"""Seconds a peer has to take each `WRITE_CHUNK` we send before it counts as gone. A reading
peer takes 64 KiB in well under a second on any usable link; a link that stalls for a while (a
Wi-Fi handover, TCP's retransmission backoff after a few losses) comes back within seconds. A
longer wait costs little: only the stuck peer's own senders wait (the connection's lock), never
another connection's, and a shutdown cuts it short (`hurry`).

A watchdog (`watch`) keeps it rather than a cancel scope around each write: a deadline scope
costs a timer per frame sent, and the frames of a streamed turn are many and small."""
WRITE_CHUNK: Final = 64 * 1024
"""Bytes written under one deadline: a large page leaves in pieces, so that the deadline is on
the peer's progress, not on how long the whole page takes on a slow link."""
REFUSE_TIMEOUT: Final = 1.0
"""Seconds a refusal gets to leave: it is written in the accepting task, which must not wait on
a peer it is turning away."""
CLOSE_TIMEOUT: Final = 5.0
"""Seconds the last frames (a response, the closing handshake) get to leave, and the peer to
close its side."""


def _deflate() -> ServerPerMessageDeflateFactory:
    """permessage-deflate for what we send with zlib's full 32 KiB window at level 3: on the
    whole history paged back (benchmarks/websocket.py's session, 7.4 MB of frames) that is
    2.32 MB in 163 ms of compression, against 2.63 MB in 312 ms with the library's defaults
    (a 4 KiB window, level 6), for some 256 KiB of compressor state per connection. What
    clients send is small: their window stays at 4 KiB."""
    return ServerPerMessageDeflateFactory(client_max_window_bits=12, compress_settings={"level": 3})


Answer = Callable[[Request], Response | None]
"""Decides an opening request: an HTTP response to send instead of upgrading, or None to
accept the WebSocket upgrade."""


async def accept(
    stream: ByteStream,
    answer: Answer,
    *,
    max_message_bytes: int,
    compression: bool = True,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    send_timeout: float = SEND_TIMEOUT,
) -> WebSocketChannel | None:
    """Read the opening request on `stream` and answer it; the channel if it was upgraded.

    None when the request was answered over plain HTTP, was malformed, or did not come in
    time; the stream has then been closed. With `compression`, permessage-deflate is offered
    to clients that ask for it. The channel's writes wait at most `send_timeout` for the peer.
    """
    protocol = ServerProtocol(
        max_size=max_message_bytes,
        extensions=[_deflate()] if compression else None,
        logger=_protocol_log,
    )
    channel = WebSocketChannel(stream, protocol, send_timeout=send_timeout)
    try:
        request: Request | None = None
        with anyio.move_on_after(handshake_timeout):
            request = await channel._read_request()
        if request is None:
            await channel._finish()
            return None
        response = answer(request)
        if response is None:
            response = protocol.accept(request)
        protocol.send_response(response)
        if response.status_code != 101:
            await channel._finish()
            return None
        await channel._flush()
    except BaseException:
        # Whatever went wrong (a bug in `answer`, a cancelled handshake), the socket is not
        # left open behind it.
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return channel


async def refuse(stream: ByteStream, response: Response) -> None:
    """Answer a connection with `response` without reading its request, and close it.

    For a connection the server cannot take: it is answered at once (a new connection's send
    buffer is empty, so the write does not wait; `REFUSE_TIMEOUT` bounds it all the same) and
    holds nothing after."""
    with anyio.move_on_after(REFUSE_TIMEOUT):
        try:
            await stream.send(response.serialize())
            await stream.send_eof()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            log.debug("the peer went before it was refused")
    await stream.aclose()


class WebSocketChannel:
    """One upgraded WebSocket connection: text messages in, text frames out."""

    def __init__(
        self, stream: ByteStream, protocol: ServerProtocol, *, send_timeout: float = SEND_TIMEOUT
    ) -> None:
        self._stream = stream
        self._protocol = protocol
        self._out: deque[bytes] = deque()
        self._lock = anyio.Lock(fast_acquire=True)  # uncontended (the usual case): no yield
        self._broken = False
        self._send_timeout = send_timeout
        self._write_deadline: float | None = None
        """When the write under way, if one is, must have been taken by the peer."""
        self._hurried = anyio.Event()

    async def watch(self) -> None:
        """Close the connection once a write has waited past its deadline; run it in a task of
        its own for as long as the channel is used (it returns once it has closed it)."""
        while True:
            deadline = self._write_deadline
            now = anyio.current_time()
            if deadline is not None and now >= deadline:
                log.info("the peer stopped reading what we send: closing its connection")
                self._broken = True
                await self._stream.aclose()  # the write fails, and messages() ends
                return
            # Until the deadline of the write under way, or until one started now would end.
            wait = self._send_timeout if deadline is None else deadline - now
            with anyio.move_on_after(wait):
                await self._hurried.wait()
            if self._hurried.is_set():
                self._hurried = anyio.Event()

    def hurry(self, timeout: float) -> None:
        """From now on, no write waits more than `timeout` seconds for the peer, the one under
        way included (a shutdown's grace: a peer that stopped reading must not hold it up)."""
        self._send_timeout = min(self._send_timeout, timeout)
        if self._write_deadline is not None:
            self._write_deadline = min(self._write_deadline, anyio.current_time() + timeout)
        self._hurried.set()

    async def messages(self) -> AsyncIterator[bytes]:
        """Each text message received, until the peer closes or the connection fails."""
        protocol = self._protocol
        fragments: list[bytes] = []
        while protocol.state is State.OPEN:
            if not await self._receive():
                return
            for frame in protocol.events_received():
                if not isinstance(frame, Frame):
                    continue
                opcode = frame.opcode
                if opcode is Opcode.TEXT or (opcode is Opcode.CONT and fragments):
                    fragments.append(bytes(frame.data))
                    if frame.fin:
                        message = b"".join(fragments)
                        fragments = []
                        yield message
                elif opcode is Opcode.BINARY or opcode is Opcode.CONT:
                    protocol.fail(
                        CloseCode.UNSUPPORTED_DATA, "send JSON-RPC messages as text frames"
                    )
                    await self._flush_if_heard()
                    return
            if not await self._flush_if_heard():  # pongs, and the echo of a close
                return

    async def send(self, frame: bytes) -> None:
        """Send one message as a text frame."""
        self._send_text(frame)
        await self._flush()

    async def send_frames(self, frames: Iterable[bytes]) -> None:
        """Send each message as its own text frame, in writes of about `WRITE_CHUNK` bytes."""
        size = 0
        for frame in frames:
            self._send_text(frame)
            size += len(frame)
            if size >= WRITE_CHUNK:
                await self._flush()
                size = 0
        await self._flush()

    def send_nowait(self, frame: bytes) -> None:
        """Queue a text frame without waiting: it leaves with the next write, in order."""
        self._send_text(frame)
        self._out.extend(self._protocol.data_to_send())

    def _send_text(self, frame: bytes) -> None:
        if self._protocol.state is not State.OPEN:
            raise anyio.ClosedResourceError
        self._protocol.send_text(frame)

    async def close(self, code: int = CloseCode.NORMAL_CLOSURE, reason: str = "") -> None:
        """Start the closing handshake, if it has not happened, and close the stream."""
        if self._protocol.state is State.OPEN:
            self._protocol.send_close(code, reason)
        await self._finish()

    async def _read_request(self) -> Request | None:
        while True:
            if not await self._receive():
                return None
            for event in self._protocol.events_received():
                if isinstance(event, Request):
                    return event
            if self._protocol.handshake_exc is not None:
                return None

    async def _receive(self) -> bool:
        """Feed the protocol what arrives; False at the end of the stream."""
        try:
            data = await self._stream.receive(READ_SIZE)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._protocol.receive_eof()
            return False
        self._protocol.receive_data(data)
        return True

    async def _flush_if_heard(self) -> bool:
        """`_flush`; False once the peer can no longer be sent anything."""
        try:
            await self._flush()
        except anyio.BrokenResourceError:
            log.debug("the peer went while we answered its frames")
        return not self._broken

    async def _flush(self) -> None:
        self._out.extend(self._protocol.data_to_send())
        async with self._lock:
            while self._out:
                data = self._out.popleft()
                if self._broken:
                    continue
                try:
                    if data:
                        await self._write(data)
                    else:  # the protocol's end of output
                        await self._stream.send_eof()
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    self._broken = True
                    self._out.clear()
                    raise anyio.BrokenResourceError from None

    async def _write(self, data: bytes) -> None:
        """Send `data`, each `WRITE_CHUNK` of it before the send timeout (which `watch` keeps
        by closing the stream: the send then fails)."""
        if len(data) <= WRITE_CHUNK:
            await self._write_chunk(data)
            return
        # Shielded: a sender cancelled between two chunks must not leave its frame cut short,
        # which would garble every frame after it. The deadline bounds each chunk all the same.
        with anyio.CancelScope(shield=True):
            for start in range(0, len(data), WRITE_CHUNK):
                await self._write_chunk(data[start : start + WRITE_CHUNK])

    async def _write_chunk(self, chunk: bytes) -> None:
        self._write_deadline = anyio.current_time() + self._send_timeout
        try:
            await self._stream.send(chunk)
        finally:
            self._write_deadline = None

    async def _finish(self) -> None:
        """Send what is left, then wait for the peer to close its side before closing ours:
        closing a socket with unsent data would throw that data away."""
        # Shielded, so that a shutdown still closes the connection; bounded, so that a peer
        # that stopped reading (or never closes) cannot hold the shutdown up.
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            try:
                await self._flush()
                while await self._receive():  # the peer's closing frame, then its end
                    self._protocol.events_received()
                    await self._flush()
            except anyio.BrokenResourceError:
                log.debug("the peer went before the connection was closed")
        await self._stream.aclose()
