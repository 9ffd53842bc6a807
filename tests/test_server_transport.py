"""Framing and stdio: `LineFramer` fed whole, byte by byte and in arbitrary pieces; `FdReader`
and `FrameWriter` over real pipes; and the invariant that the real server's stdout carries
JSON-RPC frames only, whatever it is fed."""

from __future__ import annotations

import itertools
import json
import os
import random
import select
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from acp_process import AcpProcess, assert_jsonrpc_frame
from hypothesis import given
from hypothesis import strategies as st

from acp_server.jsonrpc.peer import Oversized
from acp_server.transports.stdio import FdReader, FrameWriter, LineFramer, lines

# ---------------------------------------------------------------------------------------------
# LineFramer.


def feed_all(framer: LineFramer, pieces: list[bytes]) -> list[bytes | Oversized]:
    out: list[bytes | Oversized] = []
    for piece in pieces:
        out += framer.feed(piece)
    return out + framer.eof()


def reference_split(data: bytes, limit: int) -> list[bytes | Oversized]:
    """What framing must give, computed the obvious way."""
    *lines, last = data.split(b"\n")
    if last:
        lines.append(last)
    return [line if len(line) <= limit else Oversized(limit) for line in lines]


def test_lines_whole_and_byte_by_byte() -> None:
    data = b'{"a":1}\n{"b":2}\n\n{"c":3}'
    expected = [b'{"a":1}', b'{"b":2}', b"", b'{"c":3}']
    assert feed_all(LineFramer(100), [data]) == expected
    assert feed_all(LineFramer(100), [bytes([b]) for b in data]) == expected


def test_oversized_line_is_reported_once_as_soon_as_it_is_too_long() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"0123456789") == []  # exactly the limit, no newline yet
    assert framer.feed(b"A") == [Oversized(10)]  # one byte over: reported at once
    assert framer.feed(b"more and more bytes") == []  # discarded, not reported again
    assert framer.feed(b"tail\nok\n") == [b"ok"]
    assert framer.feed(b"0123456789\n") == [b"0123456789"]  # exactly the limit is a line
    assert framer.feed(b"0123456789A\nnext\n") == [Oversized(10), b"next"]
    assert framer.eof() == []


def test_partial_line_completed_past_the_limit() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"01234") == []
    assert framer.feed(b"567890\nx\n") == [Oversized(10), b"x"]


def test_eof_inside_an_oversized_line_gives_nothing_more() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"123456") == [Oversized(4)]
    assert framer.eof() == []


def test_framer_memory_is_bounded() -> None:
    framer = LineFramer(1000)
    for _ in range(100):
        framer.feed(b"x" * 999)
    assert len(framer._partial) == 0  # the line went over the limit and was dropped


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    final_newline=st.booleans(),
    limit=st.integers(min_value=1, max_value=30),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=10),
)
def test_framing_does_not_depend_on_how_input_is_cut(
    lines: list[bytes], final_newline: bool, limit: int, cuts: list[int]
) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert feed_all(LineFramer(limit), pieces) == reference_split(data, limit)


def test_framer_rejects_a_zero_limit() -> None:
    with pytest.raises(ValueError):
        LineFramer(0)


# ---------------------------------------------------------------------------------------------
# FdReader.


@pytest.mark.anyio
async def test_reader_returns_what_is_there_without_waiting_for_a_full_buffer() -> None:
    read_end, write_end = os.pipe()
    try:
        reader = FdReader(read_end, size=1 << 20)
        os.write(write_end, b"first\n")
        with anyio.fail_after(5):
            assert await reader.read() == b"first\n"
        os.write(write_end, b"second")
        os.close(write_end)
        write_end = -1
        with anyio.fail_after(5):
            assert await reader.read() == b"second"
            assert await reader.read() == b""
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


@pytest.mark.anyio
async def test_reader_on_a_regular_file_and_dev_null(tmp_path: Path) -> None:
    path = tmp_path / "input"
    path.write_bytes(b"a\nb\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        reader = FdReader(fd)
        with anyio.fail_after(5):
            assert await reader.read() == b"a\nb\n"
            assert await reader.read() == b""
    finally:
        os.close(fd)
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        with anyio.fail_after(5):
            assert await FdReader(fd).read() == b""
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# FrameWriter.


def drain(fd: int, into: bytearray, delay: float = 0.0) -> None:
    while chunk := os.read(fd, 1 << 16):
        into += chunk
        if delay:
            time.sleep(delay)


async def sent_through_a_pipe(
    frames: list[bytes], make: Callable[[int], FrameWriter], delay: float = 0.0
) -> tuple[FrameWriter, bytes]:
    """`frames` sent one by one through the writer `make` makes for a pipe's end, to a reader
    that reads everything (pausing `delay` seconds between reads); the writer and what was read."""
    read_end, write_end = os.pipe()
    received = bytearray()
    thread = threading.Thread(target=drain, args=(read_end, received, delay))
    thread.start()
    writer = make(write_end)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for frame in frames:
            await writer.send(frame)
        await writer.aclose()
    os.close(write_end)
    thread.join(10)
    os.close(read_end)
    return writer, bytes(received)


@pytest.mark.anyio
async def test_writer_keeps_order_across_small_and_large_frames() -> None:
    frames = []
    rng = random.Random(3)
    for n in range(300):
        size = rng.choice([10, 100, 5000, 200_000])
        frames.append(json.dumps({"n": n, "pad": "x" * size}).encode() + b"\n")
    _, received = await sent_through_a_pipe(
        frames, lambda fd: FrameWriter(fd, buffer_size=8), delay=0.001
    )
    assert received == b"".join(frames)


@pytest.mark.anyio
async def test_batches_sent_with_send_frames_keep_their_place_among_the_other_frames() -> None:
    read_end, write_end = os.pipe()
    received = bytearray()
    thread = threading.Thread(target=drain, args=(read_end, received, 0.001))
    thread.start()
    made_in: list[int] = []

    def batches() -> Iterator[bytes]:
        for n in range(3):
            made_in.append(threading.get_ident())
            yield b"".join(b'{"batch":%d,"k":%d}\n' % (n, k) for k in range(2000))

    writer = FrameWriter(write_end, buffer_size=8)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await writer.send(b'{"before":1}\n')
        await writer.send(b'{"large":"' + b"x" * 100_000 + b'"}\n')
        await writer.send_frames(batches())
        await writer.send(b'{"after":1}\n')
        await writer.aclose()
    os.close(write_end)
    thread.join(10)
    os.close(read_end)

    expected = b"".join(
        [
            b'{"before":1}\n',
            b'{"large":"' + b"x" * 100_000 + b'"}\n',
            *(b'{"batch":%d,"k":%d}\n' % (n, k) for n in range(3) for k in range(2000)),
            b'{"after":1}\n',
        ]
    )
    assert bytes(received) == expected
    assert len(made_in) == 3
    assert threading.get_ident() not in made_in  # made in the writer's worker thread


@pytest.mark.anyio
async def test_a_slow_reader_does_not_stall_the_event_loop() -> None:
    read_end, write_end = os.pipe()
    received = bytearray()
    other_work = anyio.Event()

    async def other_task() -> None:
        for _ in range(100):
            await anyio.lowlevel.checkpoint()
        other_work.set()

    writer = FrameWriter(write_end)
    frame = b"y" * (1 << 20) + b"\n"  # larger than a pipe's buffer
    thread = threading.Thread(target=drain, args=(read_end, received, 0.05))
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        try:
            # Nobody reads yet, so these writes cannot complete; they wait in a worker thread
            # while the event loop goes on running other tasks.
            await writer.send(frame)
            await writer.send(frame)
            tg.start_soon(other_task)
            with anyio.fail_after(10):
                await other_work.wait()
            assert received == bytearray()
        finally:
            thread.start()  # a failure above must not leave the writer's thread stuck forever
        await writer.aclose()
    os.close(write_end)
    thread.join(10)
    os.close(read_end)
    assert bytes(received) == frame + frame


@pytest.mark.anyio
async def test_broken_output_drops_frames_without_raising() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    writer = FrameWriter(write_end)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await writer.send(b"{}\n")
        assert writer.broken.is_set()
        await writer.send(b"x" * 100_000 + b"\n")
        writer.send_nowait(b"{}\n")
        await writer.aclose()
    os.close(write_end)


STUCK = b"s" * (4 << 20) + b"\n"
"""More than a pipe holds: its write waits for a reader."""


@asynccontextmanager
async def writing_a_stuck_frame(received: bytearray) -> AsyncIterator[FrameWriter]:
    """A running writer whose write of `STUCK` has begun and waits for a reader that has
    stopped reading; on leaving, once the writer has ended, the reader is back and reads
    everything written into `received`."""
    read_end, write_end = os.pipe()
    writer = FrameWriter(write_end)
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.run)
                await writer.send(STUCK)
                await anyio.wait_readable(read_end)  # the stuck frame's write has begun
                yield writer
    finally:
        while len(received) < len(STUCK):  # the reader is back: the stuck write completes
            received += os.read(read_end, 1 << 16)
        os.close(write_end)
        drain(read_end, received)
        os.close(read_end)


@pytest.mark.anyio
async def test_an_abandoned_writer_ends_and_writes_nothing_after_the_frame_it_was_writing() -> None:
    received = bytearray()
    async with writing_a_stuck_frame(received) as writer:
        await writer.send(b'{"queued":1}\n')  # waits behind it
        await writer.aclose()
        writer.abandon()
        await writer.ended.wait()  # `run` ends although the write has not
        await writer.send(b'{"after":1}\n')  # dropped
    assert (writer.abandoned, writer.broken.is_set()) == (True, True)
    assert bytes(received) == STUCK


@pytest.mark.anyio
async def test_a_hurried_writer_abandons_a_write_that_outlives_its_timeout() -> None:
    received = bytearray()
    async with writing_a_stuck_frame(received) as writer:
        writer.hurry(0)
        await writer.ended.wait()
    assert writer.abandoned
    assert bytes(received) == STUCK


@pytest.mark.anyio
async def test_a_hurried_writer_still_writes_everything_to_a_reader_that_reads() -> None:
    frames = [b'{"n":%d,"pad":"%s"}\n' % (n, b"x" * 300_000) for n in range(20)]

    def hurried(fd: int) -> FrameWriter:
        writer = FrameWriter(fd)
        writer.hurry(60)
        return writer

    writer, received = await sent_through_a_pipe(frames, hurried)
    assert not writer.abandoned
    assert received == b"".join(frames)


@pytest.mark.anyio
async def test_small_frames_are_written_at_once() -> None:
    read_end, write_end = os.pipe()
    try:
        writer = FrameWriter(write_end)
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.run)
            await writer.send(b'{"a":1}\n')  # written inline, before this returns
            writer.send_nowait(b'{"b":2}\n')
            ready, _, _ = select.select([read_end], [], [], 0)
            assert ready
            assert os.read(read_end, 100) == b'{"a":1}\n{"b":2}\n'
            await writer.aclose()
    finally:
        os.close(read_end)
        os.close(write_end)


# ---------------------------------------------------------------------------------------------
# The invariant: nothing but JSON-RPC frames on stdout, whatever the input.


GARBAGE: list[bytes] = [
    b"",
    b" ",
    b"\x00",
    b"\x00\x01\x02\xff",
    b"\xef\xbb\xbf{}",
    b"{",
    b"}",
    b"[",
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 2000,
    b"1e999999",
    b"-0",
    b'"\\ud800"',
    b'"\\u0000"',
    b"true",
    b"NaN",
    b"Infinity",
    b'{"jsonrpc":"2.0"}',
    b'{"jsonrpc":"2.0","id":null}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1e400}}',
    b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"initialize"}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":-1}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":70000}}',
    b'{"jsonrpc":"2.0","id":"\\n","method":"session/list","params":{"cwd":"/\\n\\u2028"}}',
    b'{"jsonrpc":"2.0","id":"\xff","method":"x"}',
    b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/\\u0000"}}',
    b'{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/w","mcpServers":[1,2]}}',
    b'{"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"\xf0\x9f\x98\x80","cwd":"/w"}}',
    b'{"jsonrpc":"2.0","id":5,"method":"session/list","params":{"cursor":"' + b"A" * 300 + b'"}}',
    b'{"jsonrpc":"2.0","id":6,"method":"session/list","params":{"cursor":"WzEsMiwzXQ"}}',
    b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"cursor":"bnVsbA"}}',
    b'{"jsonrpc":"2.0","id":8,"result":{},"error":{}}',
    b'{"jsonrpc":"2.0","id":9,"error":"not an object"}',
    b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":{"x":[]}}}',
    b'{"jsonrpc":"2.0","method":"session/cancel","params":"x"}',
    b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"\xff"}}',
    b'{"jsonrpc":"2.0","id":10,"method":"session/list","params":{"_meta":'
    + b"[" * 3000
    + b"]" * 3000
    + b"}}",
    '{"jsonrpc":"2.0","id":11,"method":"session/new","params":{"cwd":"/\u00e9\u4e2d\U0001f600","mcpServers":[]}}'.encode(),
]


@pytest.mark.process
def test_stdout_carries_only_frames_whatever_the_input(tmp_path: Path) -> None:
    rng = random.Random(20240601)
    lines = list(GARBAGE)
    for _ in range(150):
        lines.append(
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b"")
        )
    valid = b'{"jsonrpc":"2.0","id":"probe","method":"session/list","params":{}}'
    fragments = [valid[:n] for n in range(1, len(valid))]
    lines += fragments
    with AcpProcess(
        tmp_path / "sessions", "--max-line-bytes", "100000", "--log-level", "debug"
    ) as server:
        for line in lines:
            server.send(line)
        server.send(b"x" * 150_000)  # oversized
        server.send(valid)
        while json.loads(server.read_line(timeout=20)).get("id") != "probe":
            pass
        assert server.finish() == 0
    assert server.stdout_tail == b""
    frames = [assert_jsonrpc_frame(line) for line in server.stdout_lines]
    # Every frame is an answer, but for the commands a session created by the garbage lists
    # (SPEC 4.4): the server sends nothing else unasked on this connection.
    assert all(
        "method" not in f or f["params"]["update"]["sessionUpdate"] == "available_commands_update"
        for f in frames
    )
    probe = next(f for f in frames if f.get("id") == "probe")
    assert probe["result"]["sessions"] == [] or [s["cwd"] for s in probe["result"]["sessions"]] == [
        "/\u00e9\u4e2d\U0001f600"
    ]
    codes = [f["error"]["code"] for f in frames if "error" in f]
    assert set(codes) <= {-32700, -32600, -32601, -32602}
    assert -32700 in codes and -32600 in codes and -32602 in codes
    assert "Traceback" not in server.stderr


@given(st.lists(st.binary(min_size=1, max_size=60), min_size=1, max_size=20))
def test_garbage_in_memory_gets_frames_only(chunks: list[bytes]) -> None:
    """The same invariant, in-process and property-based: any bytes, any cut."""
    from acp_server.server.rpc import Connection

    class Sink:
        def __init__(self) -> None:
            self.frames: list[bytes] = []

        async def send(self, frame: bytes) -> None:
            self.frames.append(frame)

        def send_nowait(self, frame: bytes) -> None:
            self.frames.append(frame)

    class Source:
        def __init__(self) -> None:
            self.chunks = list(chunks)

        async def read(self) -> bytes:
            return self.chunks.pop(0) if self.chunks else b""

    sink = Sink()

    async def main() -> None:
        connection = Connection(sink)

        async def echo(params: object) -> object:
            return params

        connection.route("echo", echo)
        await connection.serve(lines(Source(), max_line=50))

    anyio.run(main)
    for frame in sink.frames:
        assert b"\n" not in frame  # one message, which the transport frames
        assert_jsonrpc_frame(frame)


@pytest.mark.anyio
async def test_a_producer_cancelled_while_queued_does_not_break_ordering() -> None:
    read_end, write_end = os.pipe()
    received = bytearray()
    thread = threading.Thread(target=drain, args=(read_end, received))
    thread.start()
    big = b"B" * 10_000 + b"\n"  # too big for the inline path: always queued
    writer = FrameWriter(write_end, buffer_size=1)
    await writer.send(big)  # fills the queue (no writer task yet)
    with anyio.move_on_after(0.05) as scope:
        await writer.send(b"C" * 10_000 + b"\n")  # waits for room, then is cancelled
    assert scope.cancelled_caught
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await writer.send(b'{"small":1}\n')
        await writer.send(b'{"small":2}\n')
        await writer.aclose()
    os.close(write_end)
    thread.join(10)
    os.close(read_end)
    assert bytes(received) == big + b'{"small":1}\n{"small":2}\n'
    assert writer._queued == 0
