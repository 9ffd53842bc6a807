"""The server as a subprocess: one driver for the client, the snapshot runner and the tests.

`ServerPipes` is the driver (anyio). It starts the command with three pipes, reads stdout line
by line (bounded: a longer line fails loudly), keeps stderr (all of it, or a bounded tail),
writes bytes to stdin exactly as given, and ends the process as an editor would: input closed,
a grace period, then a kill. What the lines mean (JSON-RPC frames, a transcript) is the
caller's business: the async client (`AcpClient`) reads its frames from it.

`ServerProcess` is the same driver for blocking code (the snapshot runner, the tests): it runs
`ServerPipes` on an event loop in a thread of its own. Stdout is drained from the start, so a
chatty server never blocks on a full pipe; every complete line is kept (`stdout_lines`, for
checks over a whole transcript) and queued for `next_line`; the bytes after the last newline
when stdout ends are `stdout_tail` (a server that exits cleanly leaves none).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import queue
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import anyio
from anyio.abc import Process
from anyio.from_thread import start_blocking_portal
from anyio.streams.buffered import BufferedByteReceiveStream

log = logging.getLogger(__name__)

SERVE_COMMAND: Final = (sys.executable, "-m", "acp_server", "serve")
"""`acp-server serve` in this interpreter."""

CLOSE_TIMEOUT: Final = 10.0
"""Seconds the server is given to exit once its input is closed, before it is killed."""

MAX_LINE_BYTES: Final = 256 * 1024 * 1024
"""The longest line accepted from the server (a page of a huge log is one line)."""

PIPE_GONE: Final = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
"""What writing to a server that has closed its input raises."""


def serve_command(
    sessions_dir: Path | str | None = None, *args: str, program: Sequence[str] = SERVE_COMMAND
) -> list[str]:
    """`program` (default `acp-server serve`), then `--sessions-dir DIR` when given, then
    `args`."""
    command = list(program)
    if sessions_dir is not None:
        command += ["--sessions-dir", str(sessions_dir)]
    return [*command, *args]


class ServerPipes:
    """One server subprocess, driven from async code. Make one with `ServerPipes.open`."""

    def __init__(self, process: Process, *, max_line_bytes: int, stderr_limit: int | None) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.max_line_bytes = max_line_bytes
        self.stdout_tail = b""
        """Bytes after the last newline when stdout ended."""
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._stderr = bytearray()
        self._stderr_limit = stderr_limit
        self._stderr_ended = anyio.Event()
        self._write_lock = anyio.Lock()
        self.input_closed = False

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
        stderr_limit: int | None = None,
        grace: float = CLOSE_TIMEOUT,
    ) -> AsyncIterator[Self]:
        """Start `argv` (with `env` over this process's environment); on exit, end it as
        `shut_down(grace)` does. `stderr_limit` keeps only that many bytes of stderr's tail."""
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        error: Exception | None = None
        async with process, anyio.create_task_group() as task_group:
            pipes = cls(process, max_line_bytes=max_line_bytes, stderr_limit=stderr_limit)
            task_group.start_soon(pipes._drain_stderr)
            try:
                yield pipes
            except Exception as exc:
                error = exc  # re-raised below as itself, not wrapped in the task group's group
            finally:
                with anyio.CancelScope(shield=True):
                    await pipes.shut_down(grace)
                    # A grandchild may hold stderr open after the server has gone.
                    with anyio.move_on_after(grace):
                        await pipes._stderr_ended.wait()
                task_group.cancel_scope.cancel()
        if error is not None:
            raise error

    # -- input ---------------------------------------------------------------------------------

    async def send(self, data: bytes) -> None:
        """Write exactly these bytes to the server's stdin (`anyio.BrokenResourceError`,
        `anyio.ClosedResourceError` or `OSError` once it is gone)."""
        assert self.process.stdin is not None
        async with self._write_lock:
            await self.process.stdin.send(data)

    async def close_input(self) -> None:
        """Close the server's stdin: its end of input."""
        assert self.process.stdin is not None
        async with self._write_lock:
            self.input_closed = True
            with contextlib.suppress(*PIPE_GONE):
                await self.process.stdin.aclose()

    # -- output --------------------------------------------------------------------------------

    async def receive_line(self) -> bytes | None:
        """The next stdout line, without its newline; None once stdout has ended."""
        try:
            return await self._stdout.receive_until(b"\n", self.max_line_bytes)
        except (anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.stdout_tail = self._stdout.buffer
            return None

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        try:
            async for chunk in self.process.stderr:
                self._stderr += chunk
                if self._stderr_limit is not None:
                    del self._stderr[: max(len(self._stderr) - self._stderr_limit, 0)]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._stderr_ended.set()

    @property
    def stderr(self) -> str:
        """What the server wrote to stderr so far (its tail when bounded)."""
        return bytes(self._stderr).decode("utf-8", "replace")

    # -- ending --------------------------------------------------------------------------------

    async def wait(self) -> int:
        """The exit status, once the server has exited and its stderr is drained."""
        code = await self.process.wait()
        await self._stderr_ended.wait()
        return code

    async def kill(self) -> None:
        """Kill the server if it still runs, and reap it."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()

    async def shut_down(self, grace: float = CLOSE_TIMEOUT) -> None:
        """Close the server's input and give it `grace` seconds to exit, then kill it."""
        await self.close_input()
        with anyio.move_on_after(grace):
            await self.process.wait()
            return
        log.warning("the server did not exit within %ss of its input ending: killing it", grace)
        await self.kill()


class ServerProcess:
    """One server subprocess, driven from blocking code: bytes in, lines out, stderr kept."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        """Start `argv` (with `env` over this process's environment)."""
        self.argv = list(argv)
        self.stdout_lines: list[bytes] = []
        """Every complete line the server wrote to stdout, in order (without the newline)."""
        self.stdout_tail = b""
        """Bytes after the last newline when stdout ended."""
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._resources = contextlib.ExitStack()
        try:
            self._portal = self._resources.enter_context(start_blocking_portal())
            self.pipes = self._resources.enter_context(
                self._portal.wrap_async_context_manager(ServerPipes.open(self.argv, env=env))
            )
            self._pumped = self._portal.start_task_soon(self._pump)
        except BaseException:
            self._resources.close()
            raise
        self.process = self.pipes.process
        self._released = False

    async def _pump(self) -> None:
        try:
            while (line := await self.pipes.receive_line()) is not None:
                self.stdout_lines.append(line)
                self._lines.put(line)
        finally:
            self.stdout_tail = self.pipes.stdout_tail
            self._lines.put(None)

    @property
    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        return self.pipes.stderr

    # -- input ---------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write exactly these bytes to the server's stdin (`BrokenPipeError` once it is gone)."""
        try:
            self._portal.call(self.pipes.send, data)
        except PIPE_GONE as exc:
            raise BrokenPipeError(f"the server's input is closed: {exc!r}") from None

    @property
    def input_closed(self) -> bool:
        return self.pipes.input_closed

    def close_input(self) -> None:
        """Close the server's stdin: its end of input."""
        if not self._released:
            self._portal.call(self.pipes.close_input)

    # -- output --------------------------------------------------------------------------------

    def next_line(self, timeout: float) -> bytes | None:
        """The next stdout line (without its newline), waiting at most `timeout` seconds
        (0: only one already there); None once stdout has ended, `TimeoutError` if no line
        came in time."""
        try:
            line = self._lines.get(timeout=timeout) if timeout > 0 else self._lines.get_nowait()
        except queue.Empty:
            raise TimeoutError(f"no line from the server within {timeout}s") from None
        if line is None:
            self._lines.put(None)  # stay at the end for later reads
        return line

    # -- ending --------------------------------------------------------------------------------

    def wait(self, timeout: float) -> int:
        """The exit status, once the server has exited and its output is drained
        (`subprocess.TimeoutExpired` if it does not exit within `timeout` seconds)."""
        try:
            code = self._portal.call(_within, timeout, self.pipes.wait)
        except TimeoutError:
            raise subprocess.TimeoutExpired(self.argv, timeout) from None
        concurrent.futures.wait([self._pumped], timeout=timeout)
        return code

    def kill(self) -> None:
        """Kill the server (if it still runs) and release its pipes. Its input stays open
        until it is dead: an end of input would start a clean shutdown that could race the
        kill."""
        if not self._released:
            self._portal.call(self.pipes.kill)
        self._release()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """End as an editor would: close the input, let the server exit (or kill it after
        `timeout` seconds), release its pipes."""
        if not self._released:
            self._portal.call(self.pipes.shut_down, timeout)
        self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._resources.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _within(seconds: float, wait: Callable[[], Awaitable[int]]) -> int:
    with anyio.fail_after(seconds):
        return await wait()
