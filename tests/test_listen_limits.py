"""`serve --listen`'s connection caps (`ListenConfig.max_connections`, `max_opening`): a
connection past either is answered 503 and closed at once, and the server serves on. The server
runs in process, with caps small enough to reach; its peers are raw TCP streams."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ByteStream
from polling import TIMEOUT

from acp_server.providers.secret import Secret
from acp_server.server.app import load_provider, open_config_store, provider_auth
from acp_server.server.config import ServeConfig
from acp_server.server.lifetime import prepared, sessions_served
from acp_server.server.listen import ListenConfig, WebSocketServer

TOKEN = "t0ken"

pytestmark = [pytest.mark.anyio, pytest.mark.process]


@asynccontextmanager
async def serving(tmp_path: Path, **limits: Any) -> AsyncIterator[int]:
    """A `WebSocketServer` on a free loopback port with `limits`; the port."""
    config = ServeConfig(sessions_dir=tmp_path / "sessions")
    provider = load_provider(config)
    store = open_config_store(config)
    assert await prepared(store)
    async with sessions_served(store, provider) as sessions:
        listen = ListenConfig("127.0.0.1", 0, Secret(TOKEN), **limits)
        auth = provider_auth(config, provider)
        server = WebSocketServer(config, listen, sessions, provider, auth)
        async with anyio.create_task_group() as running:
            port = await running.start(server.serve)
            try:
                yield port
            finally:
                server.stop()


async def received_until_closed(stream: ByteStream) -> bytes:
    """Everything the server sends on `stream` until it closes the connection."""
    received = b""
    with anyio.fail_after(TIMEOUT):
        try:
            while True:
                received += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return received


async def upgraded(port: int) -> ByteStream:
    """A connection whose WebSocket handshake has been answered 101."""
    stream = await anyio.connect_tcp("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    await stream.send(
        f"GET /acp?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    with anyio.fail_after(TIMEOUT):
        answer = await stream.receive()
    if not answer.startswith(b"HTTP/1.1 101 Switching Protocols\r\n"):
        await stream.aclose()
        raise AssertionError(f"not upgraded: {answer!r}")
    return stream


def refusal(text: str) -> tuple[bytes, bytes]:
    """The status line and the body of a 503 refusal saying `text`."""
    return b"HTTP/1.1 503 Service Unavailable", text.encode()


def status_and_body(answer: bytes) -> tuple[bytes, bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], body


async def test_a_connection_past_the_opening_cap_is_answered_503_and_closed(
    tmp_path: Path,
) -> None:
    async with (
        serving(tmp_path, max_opening=1) as port,
        await anyio.connect_tcp("127.0.0.1", port),  # no bytes: it stays opening
        await anyio.connect_tcp("127.0.0.1", port) as extra,
    ):
        answer = await received_until_closed(extra)

    assert status_and_body(answer) == refusal(
        "Too many connections are still sending their request: try again later\n"
    )


async def test_the_opening_cap_counts_a_connection_until_its_request_is_in(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, max_opening=1) as port, await upgraded(port):
        second = await upgraded(port)
        await second.aclose()


async def test_a_connection_past_the_connection_cap_is_answered_503_and_closed(
    tmp_path: Path,
) -> None:
    async with (
        serving(tmp_path, max_connections=1) as port,
        await upgraded(port),
        await anyio.connect_tcp("127.0.0.1", port) as extra,
    ):
        answer = await received_until_closed(extra)

    assert status_and_body(answer) == refusal("Too many connections are open: try again later\n")
