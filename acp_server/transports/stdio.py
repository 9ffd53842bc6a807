"""Newline-delimited framing over stdio: bounded line reading and ordered frame writing.

`LineFramer` is the sans-I/O part (`lines` drives it over a reader): bytes in, complete lines (or an "oversized" event) out, with
a hard bound on what it buffers. An oversized line is reported once, as soon as it crosses the
bound, then discarded up to its newline; the next line is read normally.

The I/O around it is thin:
- `FdReader` reads the protocol input. On a pipe, socket or terminal it waits for
  readability in the event loop and then calls `os.read` (which returns what is there without
  waiting for a full buffer, unlike anyio's `FileReadStream` on a pipe); on anything the
  event loop cannot poll (a regular file, Windows) it reads in a worker thread.
- `LineSink` is the protocol's side of it: each message it is given leaves as one line (the
  newline is added here, and stripped by `LineFramer`: the protocol never sees it).
- `FrameWriter` is the only writer of the protocol output, so frames never interleave and
  leave in the order they were produced. Small frames are written inline when the pipe has
  room (a write of at most PIPE_BUF bytes then cannot block), those of one burst together;
  anything else goes to a queue that one task drains, writing from a worker thread, so a slow
  reader on the other end never stalls the event loop.
- `stdio_fds.claim_stdio` (a module of its own, imported before the event loop's) moves the
  protocol streams off file descriptors 0 and 1, so that nothing else in the process (a stray
  `print`, a library, a child process) can write to the protocol output or read from the
  protocol input.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import math
import os
import select
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Final, Protocol, TypeVar, cast

import anyio

from ..jsonrpc.peer import MAX_MESSAGE_BYTES, Oversized

log = logging.getLogger(__name__)

_R = TypeVar("_R")

DEFAULT_MAX_LINE_BYTES: Final = MAX_MESSAGE_BYTES
"""Largest accepted line, without its newline (SPEC 0: one JSON message per line)."""

READ_SIZE: Final = 256 * 1024
_PIPE_BUF: Final = getattr(select, "PIPE_BUF", 512)
BURST_BYTES: Final = 64 * 1024
"""A producer that sends this much output in one turn of the event loop is made to yield."""
QUEUE_BYTES: Final = 1024 * 1024
"""Producers wait for room once this much output is queued for the writer task."""
PIPE_BYTES: Final = 1024 * 1024
"""What the protocol output pipe is asked to hold (Linux's default is 64 KiB, its unprivileged
maximum 1 MiB): a load's replay is megabytes, and a writer that can run ahead of the reader
makes the next frames while the client parses the first."""


# ---------------------------------------------------------------------------------------------
# Framing (sans-I/O).


class LineFramer:
    """Splits a byte stream into lines of at most `max_line` bytes (newline excluded).

    `feed` returns the complete lines in the data (without `\\n`) and, for a line that grows past
    the bound, one `Oversized` event at the moment it does. The buffer never holds more than
    `max_line` bytes plus one read.
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self._partial = bytearray()  # the start of a line whose newline has not come yet
        self._discarding = False  # inside an oversized line, dropping bytes up to its newline

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        limit = self.max_line
        start = 0
        if self._discarding:
            newline = data.find(b"\n")
            if newline < 0:
                return out
            self._discarding = False
            start = newline + 1
        partial = self._partial
        if partial:
            newline = data.find(b"\n", start)
            if newline < 0:
                if len(partial) + len(data) - start > limit:
                    self._overflow(out)
                else:
                    partial += memoryview(data)[start:]
                return out
            if len(partial) + newline - start > limit:
                out.append(Oversized(limit))
            else:
                partial += memoryview(data)[start:newline]
                out.append(bytes(partial))
            partial.clear()
            start = newline + 1
        # Whole lines straight from `data`: each search starts where the last line ended, so a
        # chunk is scanned once, however many lines it holds.
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            out.append(data[start:newline] if newline - start <= limit else Oversized(limit))
            start = newline + 1
        rest = len(data) - start
        if rest > limit:
            self._overflow(out)
        elif rest:
            partial += memoryview(data)[start:]
        return out

    def _overflow(self, out: list[bytes | Oversized]) -> None:
        # Report the line as soon as it is too long, rather than after buffering all of it.
        out.append(Oversized(self.max_line))
        self._partial.clear()
        self._discarding = True

    def eof(self) -> list[bytes | Oversized]:
        """At end of input: a final line without a newline still counts as a line."""
        self._discarding = False
        if not self._partial:
            return []
        line = bytes(self._partial)
        self._partial.clear()
        return [line]


# ---------------------------------------------------------------------------------------------
# Reading the protocol input (its descriptor claimed by `stdio_fds.claim_stdio`).


def _pollable(fd: int) -> bool:
    if sys.platform == "win32":
        return False
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class ChunkSource(Protocol):
    """The input: `read()` returns the next bytes, b"" at the end (an `FdReader` in production)."""

    async def read(self) -> bytes: ...


class Prefixed:
    """A `ChunkSource` that gives `first` (what was read before it existed), then `rest`'s."""

    def __init__(self, first: bytes, rest: ChunkSource) -> None:
        self._first = first
        self._rest = rest

    async def read(self) -> bytes:
        if self._first:
            data, self._first = self._first, b""
            return data
        return await self._rest.read()


async def lines(
    source: ChunkSource, max_line: int = DEFAULT_MAX_LINE_BYTES
) -> AsyncIterator[bytes | Oversized]:
    """The messages of a newline-delimited stream: each line (without its newline), and an
    `Oversized` for each line longer than `max_line`, which is skipped."""
    framer = LineFramer(max_line)
    while True:
        chunk = await source.read()
        for line in framer.feed(chunk) if chunk else framer.eof():
            yield line
        if not chunk:
            return


class FdReader:
    """Reads the protocol input: `read()` gives the bytes that have arrived, b"" at the end."""

    def __init__(self, fd: int, size: int = READ_SIZE) -> None:
        self.fd = fd
        # One reusable buffer: `os.read(fd, size)` would allocate `size` bytes per call, and an
        # allocation that large is an mmap/munmap pair (page faults, TLB shootdowns) per message.
        self._buffer = bytearray(size)
        self._view = memoryview(self._buffer)
        self._pollable = _pollable(fd)

    async def read(self) -> bytes:
        while self._pollable:
            try:
                await anyio.wait_readable(self.fd)
            except OSError:  # e.g. /dev/null: a character device that epoll refuses
                self._pollable = False
                break
            try:
                count = os.readv(self.fd, [self._buffer])
            except BlockingIOError:  # someone set O_NONBLOCK on it; wait again
                continue
            return self._view[:count].tobytes()
        data: bytes = await anyio.to_thread.run_sync(
            os.read, self.fd, READ_SIZE, abandon_on_cancel=True
        )
        return data


# ---------------------------------------------------------------------------------------------
# Writing.


class FrameWriter:
    """The single writer of the protocol output; a `FrameSink`.

    `send` takes one complete frame (bytes ending in `\\n`); frames leave whole, in the order
    `send` was called, and never wait for more than the current turn of the event loop:

    - A small frame (at most PIPE_BUF bytes) that finds nothing pending and room in the pipe is
      written at once (one atomic write that cannot block): a lone notification or response
      costs no task switch and no delay.
    - The small frames that follow it in the same turn of the event loop (a burst: a model
      streaming, a replay) are collected and written together, PIPE_BUF bytes per write while
      the pipe has room, and whatever is left when the producer yields. A burst of thousands of
      chunks thus costs a few hundred writes, not one per chunk, and the reader on the other end
      is woken as rarely. A producer that keeps sending without yielding is made to yield after
      `BURST_BYTES`, so the event loop (input, timers) keeps running under any load.
    - Everything else (a large frame, a batch the pipe has no room for) joins a queue that `run`
      drains in order, writing from a worker thread whenever a write might block, so a slow
      reader never stalls the event loop. A producer waits for room when `buffer_size` items
      (frames or batches) or `QUEUE_BYTES` bytes are queued.

    If the output is gone (EPIPE), frames are dropped from then on, so no producer blocks
    forever, and `broken` is set. `abandon` does the same for an output that is still there but
    no longer read: `run` ends at once, and the write stuck in its worker thread is left to it,
    the last thing ever written, so no frame is interleaved. After `hurry(timeout)` (a shutdown's
    grace) a write that takes longer than `timeout` abandons the writer that way.
    """

    def __init__(self, fd: int, buffer_size: int = 256) -> None:
        self.fd = fd
        self.buffer_size = max(1, buffer_size)
        self.broken = anyio.Event()
        self._broken = False  # `broken` is set (a plain flag for the per-frame checks)
        self._items: deque[bytes | _Batches] = deque()  # waiting for `run`: large frames,
        # batches, and the `send_frames` batches made as they are written
        self._items_bytes = 0
        self._queued = 0  # items handed to `run` and not yet written (waiting or being written)
        self._batch: list[bytes] = []  # small frames of this burst, not yet written nor queued
        self._batch_bytes = 0
        self._burst = False  # a small frame was sent in this turn of the event loop
        self._burst_bytes = 0  # bytes sent in this turn of the event loop
        self._closed = False  # `aclose` was called
        self._finished = False  # `run` has ended
        self.ended = anyio.Event()  # set when `run` has ended
        self.abandoned = False  # `abandon` was called
        self._writing: anyio.CancelScope | None = None  # around a write in the worker thread
        self._write_timeout = math.inf  # how long a write may take (`hurry`)
        self._work = anyio.Event()  # set when `_items` gets something, or at close
        self._room = anyio.Event()  # set when `run` takes items
        self._poll = select.poll() if hasattr(select, "poll") else None
        if self._poll is not None:
            self._poll.register(fd, select.POLLOUT)
        _grow_pipe(fd)

    async def send(self, frame: bytes) -> None:
        if self._broken:
            return  # dropped
        size = len(frame)
        if size > _PIPE_BUF or self._closed or self._finished:
            await self._send_queued(frame)
            return
        items = self._items
        if (self._burst and self._burst_bytes >= BURST_BYTES) or (
            items
            and (
                len(items) >= self.buffer_size or self._items_bytes >= QUEUE_BYTES
            )  # `not _has_room()`
        ):
            # A long burst, or a queue at its bounds: let the event loop run first (the burst's
            # end hands its batch on), and wait while the queue is full.
            await anyio.lowlevel.checkpoint()
            await self._wait_for_room()
            if self._broken:
                return
            if self._closed or self._finished:
                await self._send_queued(frame)
                return
        if not self._burst:
            if not self._start_burst():  # no end-of-turn callback here: one frame at a time
                if not self._queued and self._writable_now():
                    self._write_inline(frame)
                else:
                    await self._send_queued(frame)
                return
            if not self._queued and self._writable_now():
                self._write_inline(frame)  # the burst's first frame: no delay
                self._burst_bytes = size
                return
        elif (
            self._batch_bytes + size > _PIPE_BUF >= self._batch_bytes
            and self._batch
            and not self._queued
            and self._writable_now()
        ):
            self._write_inline(
                b"".join(self._batch)
            )  # one full atomic write; the frame starts the next
            self._batch.clear()
            self._batch_bytes = 0
        self._batch.append(frame)
        self._batch_bytes += size
        self._burst_bytes += size

    async def send_frames(self, batches: Iterable[bytes]) -> None:
        """Send batches of whole frames, in order, after every frame sent before: they join
        the queue as one item, and `run`'s worker thread takes each batch from `batches` as
        it writes them, so whatever produces them (encoding a replay) runs off the event loop,
        and the reader gets the first batch while the next is made."""
        if not await self._room_to_queue():
            return
        if self._closed or self._finished:
            raise anyio.ClosedResourceError if self._closed else anyio.BrokenResourceError
        self._flush_batch()
        self._enqueue(_Batches(iter(batches)))

    def send_nowait(self, frame: bytes) -> None:
        """Send without waiting; raises `anyio.WouldBlock` when the queue is full."""
        if self._broken:
            return
        self._flush_batch()
        if not self._queued and len(frame) <= _PIPE_BUF and self._writable_now():
            self._write_inline(frame)
        elif self._closed:
            raise anyio.ClosedResourceError
        elif self._finished:
            raise anyio.BrokenResourceError
        elif self._has_room():
            self._enqueue(frame)
        else:
            raise anyio.WouldBlock

    async def aclose(self) -> None:
        """No more frames: `run` ends once everything sent is written."""
        self._flush_batch()
        self._closed = True
        self._work.set()

    async def run(self) -> None:
        """Write queued frames until `aclose` and everything is written."""
        try:
            await self._drain()
        finally:
            self._finished = True
            self._room.set()
            self.ended.set()

    def hurry(self, timeout: float) -> None:
        """From now on, a write that waits more than `timeout` seconds for the reader, the one
        under way included, abandons the writer."""
        self._write_timeout = min(self._write_timeout, timeout)
        if self._writing is not None:
            self._writing.deadline = min(self._writing.deadline, anyio.current_time() + timeout)

    def abandon(self) -> None:
        """Write nothing more: whatever is queued is dropped, and `run` stops waiting for the
        write under way, which its worker thread finishes only if the reader ever reads again
        (after it, nothing is written: the frame it holds cannot be interleaved)."""
        if self.abandoned:
            return
        self.abandoned = True
        log.info("protocol output not being read; dropping what is left to write")
        self._broken = True
        self.broken.set()
        self._batch.clear()
        self._batch_bytes = 0
        self._items.clear()
        self._items_bytes = 0
        self._room.set()
        self._work.set()
        if self._writing is not None:
            self._writing.cancel()

    async def _drain(self) -> None:
        items = self._items
        while not self.abandoned:
            if not items:
                if self._closed:
                    return
                if self._work.is_set():
                    self._work = anyio.Event()
                await self._work.wait()
                continue
            head = items[0]
            if type(head) is _Batches:
                items.popleft()
                self._room.set()
                try:
                    failure = await self._in_thread(self._write_batches, head)
                    if failure is not None:
                        self._break(failure)
                finally:
                    self._queued -= 1
                continue
            # Coalesce what is queued into one write, up to any `send_frames` item: fewer
            # syscalls under load.
            count = 0
            for item in items:
                if type(item) is _Batches:
                    break
                count += 1
            taken = [cast(bytes, items.popleft()) for _ in range(count)]
            data = taken[0] if count == 1 else b"".join(taken)
            self._items_bytes -= len(data)
            self._room.set()
            try:
                if self._broken:
                    pass
                elif len(data) <= _PIPE_BUF and self._writable_now():
                    _write_all(self.fd, data)
                else:
                    await self._in_thread(_write_all, self.fd, data)
            except OSError as exc:
                self._break(exc)
            finally:
                self._queued -= count

    # -- internals -----------------------------------------------------------------------------

    async def _in_thread(self, write: Callable[..., _R], *args: object) -> _R | None:
        """`write(*args)` in a worker thread, waited for whole whatever is cancelled (a frame is
        never half written), unless the writer is abandoned, or the write outlives `hurry`'s
        timeout (which abandons it): then None at once."""
        if self.abandoned:
            return None
        deadline = anyio.current_time() + self._write_timeout
        try:
            with anyio.CancelScope(shield=True, deadline=deadline) as self._writing:
                return await anyio.to_thread.run_sync(write, *args, abandon_on_cancel=True)
        finally:
            self._writing = None
        self.abandon()  # cancelled: abandoned, or past its deadline
        return None

    def _write_batches(self, batches: _Batches) -> OSError | None:
        """Make and write each batch (in `run`'s worker thread); the write error, if any."""
        try:
            for data in batches.source:
                if self._broken:
                    return None  # dropped
                _write_all(self.fd, data)
        except OSError as exc:
            return exc
        except Exception:
            # A producer's bug: its frames are lost, the connection keeps serving.
            log.exception("protocol writer: frames could not be made; dropped")
        return None

    def _start_burst(self) -> bool:
        """Mark the rest of this turn of the event loop as a burst; False if it cannot be."""
        try:
            call_soon = asyncio.get_running_loop().call_soon
        except RuntimeError:  # not on asyncio: no end-of-turn callback, so no batching
            return False
        call_soon(self._end_burst)
        self._burst = True
        return True

    def _end_burst(self) -> None:
        """The producer has yielded: the burst is over, its batch goes out now."""
        self._burst = False
        self._burst_bytes = 0
        self._flush_batch()

    def _flush_batch(self) -> None:
        """Write the batch now if that cannot block, else queue it (even past the bounds: it
        holds frames already accepted)."""
        if not self._batch:
            return
        data = b"".join(self._batch) if len(self._batch) > 1 else self._batch[0]
        self._batch.clear()
        self._batch_bytes = 0
        if self._broken:
            return
        if not self._queued and len(data) <= _PIPE_BUF and self._writable_now():
            self._write_inline(data)
        elif self._finished:
            log.debug("protocol writer has ended; dropping %d bytes", len(data))
        else:
            self._enqueue(data)

    async def _send_queued(self, frame: bytes) -> None:
        """The queue's path: wait for room, then queue the frame after whatever is batched."""
        if not await self._room_to_queue():
            return
        if self._closed or self._finished:
            # After `aclose` (or once `run` has ended) nothing is queued any more; what can be
            # written at once still is.
            self._flush_batch()
            if not self._queued and len(frame) <= _PIPE_BUF and self._writable_now():
                self._write_inline(frame)
                return
            raise anyio.ClosedResourceError if self._closed else anyio.BrokenResourceError
        self._flush_batch()
        self._enqueue(frame)

    async def _room_to_queue(self) -> bool:
        """Yield, then wait for room in the queue (unless nothing is queued any more); False
        once frames are dropped."""
        await anyio.lowlevel.checkpoint()
        if not self._closed and not self._finished:
            await self._wait_for_room()
        return not self._broken

    def _has_room(self) -> bool:
        items = self._items
        return not items or (len(items) < self.buffer_size and self._items_bytes < QUEUE_BYTES)

    async def _wait_for_room(self) -> None:
        while not self._has_room() and not self._broken and not self._finished:
            if self._room.is_set():
                self._room = anyio.Event()
            await self._room.wait()

    def _enqueue(self, data: bytes | _Batches) -> None:
        self._items.append(data)
        if not isinstance(data, _Batches):  # a `send_frames` item's size is not known
            self._items_bytes += len(data)
        self._queued += 1
        self._work.set()

    def _write_inline(self, data: bytes) -> None:
        try:
            _write_all(self.fd, data)
        except OSError as exc:
            self._break(exc)

    def _break(self, exc: OSError) -> None:
        log.warning("protocol output closed (%s); dropping further frames", exc)
        self._broken = True
        self.broken.set()
        self._batch.clear()
        self._batch_bytes = 0
        self._room.set()

    def _writable_now(self) -> bool:
        if self._poll is None:
            return False
        return bool(self._poll.poll(0))


FRAMES_BATCH: Final = 256 * 1024
"""Bytes of lines `line_batches` joins into one buffer before handing it on: enough to make a
write worth its cost, few enough that the client reads the first while the rest are made."""


def line_batches(messages: Iterable[bytes]) -> Iterator[bytes]:
    """`messages` as lines, in buffers of about `FRAMES_BATCH` bytes (a load's replay is
    megabytes of them). Each buffer is joined once: appending to a growing buffer would copy
    all of it for every message it holds."""
    parts: list[bytes] = []
    size = 0
    for message in messages:
        parts += (message, b"\n")
        size += len(message) + 1
        if size >= FRAMES_BATCH:
            yield b"".join(parts)
            parts.clear()
            size = 0
    if parts:
        yield b"".join(parts)


class LineSink:
    """The protocol's `FrameSink` over stdio: each message leaves as one line, through the
    process's one `FrameWriter`."""

    __slots__ = ("writer",)

    def __init__(self, writer: FrameWriter) -> None:
        self.writer = writer

    async def send(self, message: bytes) -> None:
        await self.writer.send(message + b"\n")

    async def send_frames(self, messages: Iterable[bytes]) -> None:
        # Lazily: the writer's worker thread makes (and encodes) the lines as it writes them.
        await self.writer.send_frames(line_batches(messages))

    def send_nowait(self, message: bytes) -> None:
        self.writer.send_nowait(message + b"\n")


def _grow_pipe(fd: int) -> None:
    """Ask for a `PIPE_BYTES` pipe, if `fd` is a pipe that holds less (Linux only)."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    get_size = getattr(fcntl, "F_GETPIPE_SZ", None)
    if set_size is None or get_size is None:
        return
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode) or fcntl.fcntl(fd, get_size) >= PIPE_BYTES:
            return
        fcntl.fcntl(fd, set_size, PIPE_BYTES)
    except OSError as exc:  # over the user's pipe limits, say: the default size works too
        log.debug("protocol output pipe left at its size: %s", exc)


class _Batches:
    """A `send_frames` item: batches of frames, made as `run` writes them."""

    __slots__ = ("source",)

    def __init__(self, source: Iterator[bytes]) -> None:
        self.source = source


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
