"""`WebSocketChannel`'s write deadline, kept by its `watch`: a peer that takes nothing of what
is sent for the send timeout (or, once `hurry` is called, for the time it allows) counts as
gone. The write fails as on a broken connection and the connection is closed, so no sender
waits on it for ever; a frame is never left cut short. Each test upgrades a real loopback TCP
connection whose client end reads nothing until the test says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import pytest
from anyio.abc import SocketListener, SocketStream
from polling import TIMEOUT
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri

from acp_server.transports.websocket import WebSocketChannel, accept

pytestmark = [pytest.mark.anyio, pytest.mark.process]

MORE_THAN_BUFFERED = b"x" * 16_000_000
"""More than the sockets' buffers hold (a send buffer grows to 4 MiB at most, net.ipv4.tcp_wmem;
a receive buffer that is never read from stays small)."""


@dataclass
class Client:
    """The client end: its stream, read by nobody until a test says so, and its protocol."""

    stream: SocketStream
    protocol: ClientProtocol

    async def frames(self, count: int) -> list[Frame]:
        """Read until `count` frames have come; they, in order."""
        frames: list[Frame] = []
        with anyio.fail_after(TIMEOUT):
            while len(frames) < count:
                self.protocol.receive_data(await self.stream.receive())
                frames += [e for e in self.protocol.events_received() if isinstance(e, Frame)]
        return frames


@asynccontextmanager
async def unread_channel(send_timeout: float) -> AsyncIterator[tuple[WebSocketChannel, Client]]:
    """A channel whose peer sent its opening request and reads nothing after, and the peer."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        server = listener.listeners[0]
        assert isinstance(server, SocketListener)
        port = server.extra(anyio.abc.SocketAttribute.local_port)
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            client = Client(
                stream, ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/"), max_size=None)
            )
            client.protocol.send_request(client.protocol.connect())
            for data in client.protocol.data_to_send():
                await stream.send(data)
            async with await server.accept() as accepted, anyio.create_task_group() as watched:
                channel = await accept(
                    accepted,
                    lambda request: None,
                    max_message_bytes=1024,
                    send_timeout=send_timeout,
                )
                assert channel is not None
                watched.start_soon(channel.watch)
                yield channel, client
                watched.cancel_scope.cancel()


async def test_a_write_the_peer_does_not_take_within_the_send_timeout_fails() -> None:
    async with unread_channel(send_timeout=0.5) as (channel, _):
        with anyio.fail_after(TIMEOUT), pytest.raises(anyio.BrokenResourceError):
            await channel.send(MORE_THAN_BUFFERED)

        assert [message async for message in channel.messages()] == []


async def test_hurry_cuts_short_the_write_under_way() -> None:
    async with unread_channel(send_timeout=TIMEOUT) as (channel, _):
        failed = anyio.Event()

        async def write() -> None:
            with pytest.raises(anyio.BrokenResourceError):
                await channel.send(MORE_THAN_BUFFERED)
            failed.set()

        with anyio.fail_after(TIMEOUT / 2):
            async with anyio.create_task_group() as writing:
                writing.start_soon(write)
                await anyio.wait_all_tasks_blocked()
                channel.hurry(0.1)
                await failed.wait()


async def test_a_sender_cancelled_during_its_write_leaves_its_frame_whole() -> None:
    async with unread_channel(send_timeout=TIMEOUT) as (channel, client):
        sender = anyio.CancelScope()

        async def write() -> None:
            with sender:
                await channel.send(MORE_THAN_BUFFERED)

        async with anyio.create_task_group() as writing:
            writing.start_soon(write)
            await anyio.wait_all_tasks_blocked()
            sender.cancel()  # while the peer reads nothing
            frames = await client.frames(1)
        await channel.send(b"after")
        frames += await client.frames(1)

    assert [(f.opcode, len(f.data)) for f in frames] == [
        (Opcode.TEXT, len(MORE_THAN_BUFFERED)),
        (Opcode.TEXT, len(b"after")),
    ]
    assert frames[1].data == b"after"
