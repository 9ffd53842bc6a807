"""The server as a subprocess, driven line by line (the snapshot runner and the tests drive it so).

`ServerProcess(argv)` starts the command with three pipes. Threads drain stdout and stderr from
the start, so a chatty server never blocks on a full pipe. Every complete stdout line is kept
(`stdout_lines`, for checks over a whole transcript) and queued for `next_line`; the bytes
after the last newline when stdout ends are `stdout_tail` (a server that exits cleanly leaves
none). Writes go to stdin unbuffered, exactly as given. What the lines mean (JSON-RPC frames,
a transcript) is the caller's business.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Final, Self

SERVE_COMMAND: Final = (sys.executable, "-m", "acp_server", "serve")
"""`acp-server serve` in this interpreter."""

CLOSE_TIMEOUT: Final = 10.0
"""Seconds `close` gives the server to exit once its input is closed, before killing it."""


def serve_command(
    sessions_dir: Path | str | None = None, *args: str, program: Sequence[str] = SERVE_COMMAND
) -> list[str]:
    """`program` (default `acp-server serve`), then `--sessions-dir DIR` when given, then
    `args`."""
    command = list(program)
    if sessions_dir is not None:
        command += ["--sessions-dir", str(sessions_dir)]
    return [*command, *args]


class ServerProcess:
    """One server subprocess: bytes in, lines out, stderr kept."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        """Start `argv`; `preexec_fn` runs in the child before it executes (resource limits)."""
        self.argv = list(argv)
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            bufsize=0,
            preexec_fn=preexec_fn,
        )
        assert self.process.stdin is not None
        self._stdin: IO[bytes] = self.process.stdin
        self.stdout_lines: list[bytes] = []
        """Every complete line the server wrote to stdout, in order (without the newline)."""
        self.stdout_tail = b""
        """Bytes after the last newline when stdout ended."""
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = bytearray()
        self._threads = [
            threading.Thread(target=self._drain_stdout, daemon=True),
            threading.Thread(target=self._drain_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _drain_stdout(self) -> None:
        assert self.process.stdout is not None
        pending = b""
        while chunk := os.read(self.process.stdout.fileno(), 1 << 16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.stdout_lines.append(line)
                self._lines.put(line)
        self.stdout_tail = pending
        self._lines.put(None)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := os.read(self.process.stderr.fileno(), 1 << 16):
            self._stderr += chunk

    @property
    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        return self._stderr.decode("utf-8", "replace")

    # -- input ---------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write exactly these bytes to the server's stdin (`BrokenPipeError` once it is gone)."""
        self._stdin.write(data)

    @property
    def input_closed(self) -> bool:
        return self._stdin.closed

    def close_input(self) -> None:
        """Close the server's stdin: its end of input."""
        with contextlib.suppress(BrokenPipeError):
            self._stdin.close()

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
        code = self.process.wait(timeout=timeout)
        for thread in self._threads:
            thread.join(timeout=timeout)
        return code

    def kill(self) -> None:
        """Kill the server (if it still runs) and release its pipes."""
        self.close_input()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._release()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """End as an editor would: close the input, let the server exit (or kill it after
        `timeout` seconds), release its pipes."""
        self.close_input()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._release()

    def _release(self) -> None:
        for thread in self._threads:
            thread.join(timeout=CLOSE_TIMEOUT)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
