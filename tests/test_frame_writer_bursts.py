"""`FrameWriter` under bursts: many small frames sent in one turn of the event loop, as a model
stream produces them. They are written together (few writes, in order), the event loop keeps
running however long the burst, and a cancelled producer loses nothing it was told was sent."""

from __future__ import annotations

import os
import random
import threading

import anyio
import pytest

from acp_server.transports import stdio as transport
from acp_server.transports.stdio import BURST_BYTES, FrameWriter


def drain(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 1 << 16):
        into += chunk


def frames(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    return [b'{"n":%d,"text":"%s"}\n' % (n, b"x" * rng.randint(1, 200)) for n in range(count)]


class Reader:
    """A thread reading the pipe's other end until it closes."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.received = bytearray()
        self.thread = threading.Thread(target=drain, args=(self.read_end, self.received))
        self.thread.start()

    def finish(self) -> bytes:
        os.close(self.write_end)
        self.thread.join(10)
        os.close(self.read_end)
        return bytes(self.received)


@pytest.mark.anyio
async def test_a_burst_is_written_in_order_in_few_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[int] = []
    write_all = transport._write_all

    def counting(fd: int, data: bytes) -> None:
        writes.append(len(data))
        write_all(fd, data)

    monkeypatch.setattr(transport, "_write_all", counting)
    reader = Reader()
    sent = frames(5000)
    writer = FrameWriter(reader.write_end)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for frame in sent:
            await writer.send(frame)
        await writer.aclose()
    assert reader.finish() == b"".join(sent)
    assert len(writes) < len(sent) / 10


@pytest.mark.anyio
async def test_the_frames_of_a_burst_are_out_once_the_producer_yields() -> None:
    read_end, write_end = os.pipe()
    try:
        writer = FrameWriter(write_end)
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.run)
            sent = frames(20)
            for frame in sent:
                await writer.send(frame)
            await anyio.lowlevel.checkpoint()
            assert os.read(read_end, 1 << 16) == b"".join(sent)
            await writer.aclose()
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.anyio
async def test_a_producer_that_never_yields_still_lets_the_event_loop_run() -> None:
    reader = Reader()
    writer = FrameWriter(reader.write_end)
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    sent = frames(20_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        before = ticks
        for frame in sent:
            await writer.send(frame)  # nothing else awaited
        assert ticks - before >= sum(map(len, sent)) // BURST_BYTES // 2
        done = True
        await writer.aclose()
    assert reader.finish() == b"".join(sent)


@pytest.mark.anyio
async def test_a_cancelled_producer_loses_none_of_the_frames_it_sent() -> None:
    reader = Reader()
    writer = FrameWriter(reader.write_end, buffer_size=4)
    sent: list[bytes] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        with anyio.move_on_after(0.2):
            n = 0
            while True:
                frame = b'{"n":%d,"pad":"%s"}\n' % (n, b"p" * (n % 300))
                await writer.send(frame)
                sent.append(frame)  # only once `send` has returned
                n += 1
        await writer.send(b'{"after":"cancel"}\n')
        await writer.aclose()
    assert reader.finish() == b"".join(sent) + b'{"after":"cancel"}\n'
    assert writer._queued == 0


@pytest.mark.anyio
async def test_small_and_large_frames_of_one_burst_keep_their_order() -> None:
    reader = Reader()
    rng = random.Random(11)
    sent = [
        b'{"n":%d,"pad":"%s"}\n' % (n, b"z" * rng.choice([1, 50, 3000, 5000, 70_000]))
        for n in range(400)
    ]
    writer = FrameWriter(reader.write_end, buffer_size=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for frame in sent:
            await writer.send(frame)
        await writer.aclose()
    assert reader.finish() == b"".join(sent)


@pytest.mark.anyio
async def test_a_reader_gone_mid_burst_drops_frames_without_raising() -> None:
    read_end, write_end = os.pipe()
    writer = FrameWriter(write_end)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for frame in frames(50):
            await writer.send(frame)
        os.close(read_end)
        for frame in frames(20_000):
            await writer.send(frame)
        assert writer.broken.is_set()
        await writer.aclose()
    os.close(write_end)
