"""`run_command`: in a client terminal when the client advertised `terminal`, else as a child
process of the server. Either way: no shell, the session's cwd, output capped, killed at the
timeout. A local child's environment is the server's without any provider's key variable.

Outcome policy: the model always gets the output followed by one status line. The call is an
error (`isError`, shown as `failed`) when the program exited non-zero, died from a signal or
timed out: the user sees at a glance that the command did not succeed, and the model reads
why. Commands whose non-zero exit is an answer (`grep` finding nothing) are shown as failed
too; the output and the status line let the model tell the difference.

Cleanup is unconditional: a terminal is always released (also when the turn is cancelled
while it runs, from a shielded scope with its own deadline), and a local child is killed with
its whole process tree (`process_tree`: descendants that left its session or lost their parent
too) when the call ends early for any reason, or at the latest when the server exits.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass

import anyio
from anyio.abc import Process
from msgspec import UNSET, Struct

from ...core.acp_updates import ToolTerminal
from ...core.content import TextContent
from ..ports import ClientRequestError
from .arguments import RunCommandArgs
from .base import ToolCallInfo, ToolContext, ToolError, ToolOutcome, decode_client_result
from .excerpts import complete_utf8_suffix
from .permission import ensure_permission
from .process_tree import MARK_ENV, kill_tree, new_mark
from .registry import OnStarted


@dataclass(frozen=True)
class CommandResult:
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None
    timed_out: bool
    timeout_ms: int


def render_result(result: CommandResult, *, output_note: str | None) -> ToolOutcome:
    """The outcome for a finished (or killed) command: output, notes, one status line."""
    if result.timed_out:
        status = f"[timed out after {result.timeout_ms} ms; the command was killed]"
    elif result.signal is not None:
        status = f"[terminated by signal {result.signal}]"
    elif result.exit_code is not None:
        status = f"[exit code {result.exit_code}]"
    else:
        status = "[exit status unknown]"
    lines = [output_note] if output_note else []
    if result.output:
        lines.append(result.output.removesuffix("\n"))
    else:
        lines.append("(no output)")
    lines.append(status)
    failed = result.timed_out or result.signal is not None or result.exit_code not in (0, None)
    raw = {
        "exitCode": result.exit_code,
        "signal": result.signal,
        "truncated": result.truncated,
        "timedOut": result.timed_out,
    }
    return ToolOutcome([TextContent("\n".join(lines))], failed, raw)


async def run_command(
    ctx: ToolContext, call: ToolCallInfo, args: RunCommandArgs, on_started: OnStarted
) -> ToolOutcome:
    timeout_ms = ctx.limits.default_timeout_ms if args.timeout_ms is UNSET else args.timeout_ms
    await ensure_permission(ctx, call)
    if ctx.client.capabilities.terminal:
        return await _run_in_terminal(ctx, args, timeout_ms, on_started)
    await on_started()
    return await _run_locally(ctx, args, timeout_ms)


# ---------------------------------------------------------------------------------------------
# In a client terminal.


class _CreateTerminalResult(Struct):
    terminalId: str


class _ExitStatus(Struct):
    exitCode: int | None = None
    signal: str | None = None


class _TerminalOutputResult(Struct):
    output: str
    truncated: bool
    exitStatus: _ExitStatus | None = None


async def _run_in_terminal(
    ctx: ToolContext, args: RunCommandArgs, timeout_ms: int, on_started: OnStarted
) -> ToolOutcome:
    client = ctx.client
    limit = ctx.limits.output_bytes
    created = await client.request(
        "terminal/create",
        {
            "sessionId": ctx.session_id,
            "command": args.command,
            "args": list(args.args),
            "cwd": str(ctx.cwd),
            "outputByteLimit": limit,
        },
    )
    terminal_id = decode_client_result("terminal/create", created, _CreateTerminalResult).terminalId
    ids = {"sessionId": ctx.session_id, "terminalId": terminal_id}
    try:
        # Embedded in the call while it runs, so the editor shows the output live; it must be
        # added before the release (ACP), and the result's text replaces it at the end.
        await on_started([ToolTerminal(terminal_id)])
        exit_status: _ExitStatus | None = None
        with anyio.move_on_after(timeout_ms / 1000) as deadline:
            waited = await client.request("terminal/wait_for_exit", ids)
            exit_status = decode_client_result("terminal/wait_for_exit", waited, _ExitStatus)
        timed_out = deadline.cancelled_caught
        if timed_out:
            await client.request("terminal/kill", ids)
        shown = await client.request("terminal/output", ids)
        output = decode_client_result("terminal/output", shown, _TerminalOutputResult)
    finally:
        await _release(ctx, ids)
    final = output.exitStatus or exit_status or _ExitStatus()
    result = CommandResult(
        output.output, output.truncated, final.exitCode, final.signal, timed_out, timeout_ms
    )
    note = (
        f"[output truncated by the client to its last {limit} bytes]" if output.truncated else None
    )
    return render_result(result, output_note=note)


async def _release(ctx: ToolContext, ids: dict[str, str]) -> None:
    """Release the terminal whatever happened; shielded so a cancelled turn still frees it, and
    bounded so a client that never answers cannot hold the turn forever."""
    with anyio.move_on_after(ctx.limits.cleanup_timeout_s, shield=True):
        # A failed release leaves nothing to do; the outcome already says what happened.
        with contextlib.suppress(ClientRequestError):
            await ctx.client.request("terminal/release", ids)


# ---------------------------------------------------------------------------------------------
# As a child process of the server.


class _Tail:
    """The last `cap` bytes of a stream, and how many bytes went through."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > self.cap:
            del self.data[: len(self.data) - self.cap]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self) -> str:
        data = complete_utf8_suffix(bytes(self.data)) if self.truncated else bytes(self.data)
        # Program output has no promised encoding; replacement keeps it readable.
        return data.decode("utf-8", errors="replace")


_RUNNING: dict[str, Process] = {}
"""The local commands running now, by mark. A call that ends early kills its command's tree
itself; what is left of them when the server exits without that (a second Ctrl-C, say) is
killed then."""


def _root(process: Process) -> int | None:
    """The child's pid while it is ours; None once reaped (the pid may be another's by now)."""
    return process.pid if process.returncode is None else None


@atexit.register
def _kill_running() -> None:
    for mark, process in list(_RUNNING.items()):
        kill_tree(_root(process), mark)


async def _kill(process: Process, mark: str) -> None:
    """SIGKILL the child and everything it started, wherever it went (`process_tree`)."""
    await anyio.to_thread.run_sync(kill_tree, _root(process), mark)


def child_environment(mark: str, hidden: frozenset[str]) -> dict[str, str]:
    """The server's environment without the `hidden` variables (the server's
    `KeptFromTools.variables`: every provider's key variable), with the command's mark: the
    active provider's key was taken out at start-up, but another provider's (say
    `$ANTHROPIC_API_KEY` while the server talks to OpenAI) may still be there, and what a
    command prints reaches the log."""
    hidden = hidden | {MARK_ENV}
    environment = {name: value for name, value in os.environ.items() if name not in hidden}
    environment[MARK_ENV] = mark
    return environment


async def _spawn(ctx: ToolContext, args: RunCommandArgs, mark: str) -> Process:
    argv = [args.command, *args.args]  # a list: never a shell
    try:
        return await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one pipe: nothing left unread to fill up and deadlock
            cwd=ctx.cwd,
            env=child_environment(mark, ctx.kept.variables),
            start_new_session=True,  # its own group, which most of its tree stays in
        )
    except FileNotFoundError:
        if not await anyio.to_thread.run_sync(os.path.isdir, ctx.cwd):
            # The child could not enter the session's cwd (uvloop does not say which path was
            # missing): the program is not what is missing.
            raise ToolError(
                f"cannot run {args.command}: the working directory {ctx.cwd} does not exist"
            ) from None
        raise ToolError(f"command not found: {args.command}") from None
    except PermissionError:
        raise ToolError(f"cannot run {args.command}: permission denied") from None
    except OSError as exc:
        raise ToolError(f"cannot run {args.command}: {exc.strerror or exc}") from None


async def _drain(process: Process, tail: _Tail) -> None:
    assert process.stdout is not None
    async for chunk in process.stdout:
        tail.add(chunk)


async def _run_locally(ctx: ToolContext, args: RunCommandArgs, timeout_ms: int) -> ToolOutcome:
    tail = _Tail(ctx.limits.output_bytes)
    mark = new_mark()
    process = await _spawn(ctx, args, mark)
    _RUNNING[mark] = process
    settled = False
    try:
        with anyio.move_on_after(timeout_ms / 1000) as deadline:
            await _drain(process, tail)
            await process.wait()
        if deadline.cancelled_caught:
            await _kill(process, mark)
            # Collect what the killed tree wrote last, without trusting it to close the pipe.
            with anyio.move_on_after(ctx.limits.kill_grace_s):
                await _drain(process, tail)
        settled = True
    finally:
        # Shielded so a cancelled turn still kills and reaps its command; bounded in case it
        # cannot be. Unsettled, the tree may be running even when the child has exited: a
        # descendant can still hold the output pipe.
        with anyio.move_on_after(ctx.limits.cleanup_timeout_s, shield=True):
            if not settled:
                await _kill(process, mark)
            await process.aclose()
        del _RUNNING[mark]
    code = process.returncode
    assert code is not None
    result = CommandResult(
        tail.text(),
        tail.truncated,
        code if code >= 0 else None,
        _signal_name(-code) if code < 0 else None,
        deadline.cancelled_caught,
        timeout_ms,
    )
    note = (
        f"[output truncated: showing the last {len(tail.data)} of {tail.total} bytes]"
        if tail.truncated
        else None
    )
    return render_result(result, output_note=note)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
