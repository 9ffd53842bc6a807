"""Newline-delimited framing over stdio: bounded line reading and ordered frame writing.

`LineFramer` is the sans-I/O part: bytes in, complete lines (or an "oversized" event) out, with
a hard bound on what it buffers. An oversized line is reported once, as soon as it crosses the
bound, then discarded up to its newline; the next line is read normally.

The I/O around it is thin:
- `FdReader` reads the protocol input. On a pipe, socket or terminal it waits for
  readability in the event loop and then calls `os.read` (which returns what is there without
  waiting for a full buffer, unlike anyio's `FileReadStream` on a pipe); on anything the
  event loop cannot poll (a regular file, Windows) it reads in a worker thread.
- `FrameWriter` is the only writer of the protocol output: one task drains a memory object
  stream, so frames never interleave and leave in the order they were produced. Small batches
  are written inline when the pipe has room (a write of at most PIPE_BUF bytes then cannot
  block); anything else is written from a worker thread, so a slow reader on the other end
  never stalls the event loop.
- `claim_stdio` moves the protocol streams off file descriptors 0 and 1, so that nothing else
  in the process (a stray `print`, a library, a child process) can write to the protocol
  output or read from the protocol input.
"""

from __future__ import annotations

import logging
import os
import select
import stat
import sys
from dataclasses import dataclass
from typing import Final

import anyio

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""Largest accepted line, without its newline (SPEC 0: one JSON message per line)."""

READ_SIZE: Final = 256 * 1024
_PIPE_BUF: Final = getattr(select, "PIPE_BUF", 512)


# ---------------------------------------------------------------------------------------------
# Framing (sans-I/O).


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line crossed the size bound; it is being discarded up to its newline."""

    limit: int


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
# The process's stdio.


@dataclass(frozen=True, slots=True)
class StdioFds:
    """The protocol's private input and output file descriptors."""

    input: int
    output: int


def claim_stdio() -> StdioFds:
    """Take the protocol streams for ourselves (call once, before anything else runs).

    The protocol input and output are duplicated to private descriptors. Descriptor 1 is then
    pointed at stderr and descriptor 0 at /dev/null: stdout carries protocol frames only, and a
    child process started later (a tool, a terminal) cannot eat the client's messages.
    """
    sys.stdout.flush()
    fds = StdioFds(input=os.dup(0), output=os.dup(1))
    os.set_inheritable(fds.input, False)
    os.set_inheritable(fds.output, False)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return fds


def _pollable(fd: int) -> bool:
    if sys.platform == "win32":
        return False
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


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
        data: bytes = await anyio.to_thread.run_sync(os.read, self.fd, READ_SIZE, abandon_on_cancel=True)
        return data


# ---------------------------------------------------------------------------------------------
# Writing.


class FrameWriter:
    """The single writer of the protocol output; a `FrameSink`.

    `send` takes one complete frame (bytes ending in `\\n`). When nothing is queued and the
    frame fits in one atomic pipe write that the pipe has room for, it is written at once (the
    common case: no task switch); otherwise it joins a queue that `run` drains in order, writing
    from a worker thread whenever a write might block. Either way frames leave whole, in the
    order `send` was called. If the output is gone (EPIPE), frames are dropped from then on,
    so no producer blocks forever, and `broken` is set.
    """

    def __init__(self, fd: int, buffer_size: int = 256) -> None:
        self.fd = fd
        self._send, self._receive = anyio.create_memory_object_stream[bytes](buffer_size)
        self._queued = 0  # frames handed to the queue and not yet written
        self._recount = False  # a producer was interrupted: `_queued` may be off by one
        self.broken = anyio.Event()
        self._poll = select.poll() if hasattr(select, "poll") else None
        if self._poll is not None:
            self._poll.register(fd, select.POLLOUT)

    async def send(self, frame: bytes) -> None:
        if not self._write_now(frame):
            # Counted before it is queued: from now on no frame may be written ahead of it.
            self._queued += 1
            try:
                await self._send.send(frame)
            except BaseException:
                # Cancelled (or closed) while waiting for room: the frame may or may not have
                # been taken. `run` recounts after its next write; until then the count errs
                # high, which only sends frames through the queue.
                self._recount = True
                raise

    def send_nowait(self, frame: bytes) -> None:
        if not self._write_now(frame):
            self._send.send_nowait(frame)  # raises WouldBlock when the queue is full
            self._queued += 1

    async def aclose(self) -> None:
        """No more frames: `run` ends once the queue is written."""
        await self._send.aclose()

    def _write_now(self, frame: bytes) -> bool:
        if self.broken.is_set():
            return True  # dropped
        if self._queued or len(frame) > _PIPE_BUF or not self._writable_now():
            return False
        try:
            _write_all(self.fd, frame)
        except OSError as exc:
            self._break(exc)
        return True

    async def run(self) -> None:
        """Write queued frames until `aclose` and the queue is drained."""
        receive = self._receive
        async with receive:
            async for frame in receive:
                batch = [frame]
                # Coalesce what is already queued into one write: fewer syscalls under load.
                while True:
                    try:
                        batch.append(receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                data = b"".join(batch) if len(batch) > 1 else frame
                try:
                    if self.broken.is_set():
                        pass
                    elif len(data) <= _PIPE_BUF and self._writable_now():
                        _write_all(self.fd, data)
                    else:
                        with anyio.CancelScope(shield=True):  # a frame is never half written
                            await anyio.to_thread.run_sync(_write_all, self.fd, data)
                except OSError as exc:
                    self._break(exc)
                finally:
                    self._queued -= len(batch)
                    if self._recount:
                        # Here the writer holds no frame, so the queue is everything unwritten.
                        stats = self._send.statistics()
                        self._queued = stats.current_buffer_used + stats.tasks_waiting_send
                        self._recount = False

    def _break(self, exc: OSError) -> None:
        log.warning("protocol output closed (%s); dropping further frames", exc)
        self.broken.set()

    def _writable_now(self) -> bool:
        if self._poll is None:
            return False
        return bool(self._poll.poll(0))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
