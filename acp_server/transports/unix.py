"""JSON-RPC over a Unix socket connection: one message per line, as over stdio.

The shared server of `acp-server attach` serves each relay's connection this way; the relay
passes the editor's bytes through unchanged, so the framing is stdio's own (`stdio.lines` and
`stdio.line_batches`): `StreamReader` is the `ChunkSource` of a connected stream, and
`StreamLineSink` its `FrameSink`, one lock keeping the lines of concurrent senders whole.
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio
from anyio.abc import ByteStream

from .stdio import READ_SIZE, line_batches


class StreamReader:
    """The bytes a connection receives: `read()` gives what has arrived, b"" at its end (the
    peer closed it, or it broke)."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream

    async def read(self) -> bytes:
        try:
            return await self._stream.receive(READ_SIZE)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return b""


class StreamLineSink:
    """The protocol's `FrameSink` over a connection: each message leaves as one line."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream
        self._lock = anyio.Lock(fast_acquire=True)  # uncontended (the usual case): no yield

    async def send(self, message: bytes) -> None:
        async with self._lock:
            await self._stream.send(message + b"\n")

    async def send_frames(self, messages: Iterable[bytes]) -> None:
        async with self._lock:
            for batch in line_batches(messages):
                await self._stream.send(batch)

    def send_nowait(self, message: bytes) -> None:
        # A socket write may always have to wait: the caller sends from a task instead.
        raise anyio.WouldBlock

    async def aclose(self) -> None:
        """Close the connection: a send waiting on a peer that stopped reading ends too."""
        await self._stream.aclose()
