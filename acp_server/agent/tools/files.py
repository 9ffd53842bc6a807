"""`read_file` and `write_file`: through the client's `fs/*` methods when it advertised them,
else on the server's own file system, confined to the session's directories.

Local I/O runs in worker threads (a slow disk must not stall the connection). `local_path` refuses
a path leading out before the call starts or a permission is asked; what is then opened is
opened beneath the roots' descriptors (`open_regular`, `confinement.open_local`), so a path
changed after that check still cannot lead out, with `O_NONBLOCK` (a FIFO swapped in does not
block the open), and its type is checked again on the open descriptor.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from msgspec import UNSET, Struct

from ...core.content import DiffContent, TextContent
from ...core.events import ToolCallLocation
from ..beneath import Changed
from ..confinement import (
    Directories,
    SessionRoots,
    absolute_path,
    client_path,
    local_path,
    local_roots,
    non_regular_kind,
    open_local,
)
from ..ports import ClientRequestError
from .arguments import ReadFileArgs, WriteFileArgs
from .base import (
    FileChange,
    ToolCallInfo,
    ToolContext,
    ToolError,
    ToolOutcome,
    decode_client_result,
)
from .excerpts import (
    complete_utf8_prefix,
    join_notes,
    read_excerpt,
    render_excerpt,
)
from .permission import ensure_permission
from .regular import read_capped

OnStarted = Callable[[], Awaitable[None]]

_OPEN_FLAGS = os.O_NONBLOCK | os.O_CLOEXEC


class _ReadTextFileResult(Struct):
    content: str


# ---------------------------------------------------------------------------------------------
# Local primitives (run in worker threads).


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _refuse_non_regular(mode: int, raw: str) -> None:
    kind = non_regular_kind(mode)
    if kind is not None:
        raise ToolError(f"refused: {raw} is {kind}, not a regular file")


def open_regular(
    roots: SessionRoots, raw: str, cwd: Path, flags: int, *, create: bool = False
) -> tuple[int, Path, bool]:
    """A descriptor for the regular file `raw` names, opened with `flags` beneath `roots`, the
    path it resolved to, and whether it existed (when `create` makes it, with its parents).

    The path is first opened `O_PATH` (which opens neither a FIFO nor a device) to refuse what
    is not a regular file, then opened for real, beneath the roots again, and taken only when
    it is still the same file: anything swapped in between is refused (`Changed`).
    `PathRefused`, `ToolError` or `OSError`.
    """
    try:
        probe, _ = open_local(roots, raw, cwd, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            raise
        fd, where = open_local(roots, raw, cwd, flags | os.O_CREAT | _OPEN_FLAGS, make_parents=True)
        probed = None
    else:
        try:
            probed = os.fstat(probe)
        finally:
            os.close(probe)
        _refuse_non_regular(probed.st_mode, raw)
        fd, where = open_local(roots, raw, cwd, flags | _OPEN_FLAGS)
    try:
        status = os.fstat(fd)
        _refuse_non_regular(status.st_mode, raw)
        if probed is not None and (status.st_dev, status.st_ino) != (
            probed.st_dev,
            probed.st_ino,
        ):
            raise Changed()
    except BaseException:
        os.close(fd)
        raise
    return fd, where, probed is not None


def _read_locally(
    raw: str,
    roots: Directories,
    line: int | None,
    limit: int | None,
    cap: int,
) -> tuple[str, bool, Path]:
    """The model's text for the file `raw`, whether the cap cut it, and the path it read."""
    cwd = roots[0]
    try:
        with local_roots(*roots) as opened:
            fd, where, _ = open_regular(opened, raw, cwd, os.O_RDONLY)
    except OSError as exc:
        raise ToolError(f"cannot read {raw}: {_reason(exc)}") from None
    with os.fdopen(fd, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        try:
            excerpt = read_excerpt(stream, line=line, limit=limit, cap=cap)
        except OSError as exc:
            raise ToolError(f"cannot read {raw}: {_reason(exc)}") from None
    whole = line is None and limit is None
    text = render_excerpt(excerpt, size=size, line=line, whole_file=whole)
    return text, excerpt.truncated, where


def read_capped_bytes(fd: int, raw: str, cap: int) -> bytes:
    """The bytes of the open file `fd`, refused when it is over `cap` bytes (for edits)."""
    size = os.fstat(fd).st_size
    if size > cap:
        raise ToolError(f"refused: {raw} is {size} bytes, over the {cap}-byte limit for edits")
    data = read_capped(fd, size, cap)
    if isinstance(data, int):  # it grew since the fstat
        raise ToolError(f"refused: {raw} is {data} bytes, over the {cap}-byte limit for edits")
    return data


def _old_bytes_locally(raw: str, roots: Directories, cap: int) -> bytes | None:
    """The current bytes of the file `write_file` replaces, or None when it does not exist."""
    try:
        with local_roots(*roots) as opened:
            fd, _, _ = open_regular(opened, raw, roots[0], os.O_RDONLY)
        try:
            return read_capped_bytes(fd, raw, cap)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot write {raw}: {_reason(exc)}") from None


def write_locally(raw: str, roots: Directories, content: bytes) -> None:
    """Write `content` to the file `raw` names, creating it and its missing parent directories
    beneath the roots; it is cut to `content`'s length only once it is known to be a regular
    file."""
    try:
        with local_roots(*roots) as opened:
            fd, _, _ = open_regular(opened, raw, roots[0], os.O_WRONLY, create=True)
        try:
            write_all(fd, content)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ToolError(f"cannot write {raw}: {_reason(exc)}") from None


def replace_locally(raw: str, roots: Directories, content: bytes, cap: int) -> bytes | None:
    """Make the file `raw` names hold `content`, as `write_locally`, and return the bytes it
    held (None when it was created), read through the descriptor that then writes it."""
    try:
        with local_roots(*roots) as opened:
            fd, _, existed = open_regular(opened, raw, roots[0], os.O_RDWR, create=True)
        try:
            old = read_capped_bytes(fd, raw, cap) if existed else None
            write_all(fd, content)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ToolError(f"cannot write {raw}: {_reason(exc)}") from None
    return old


def write_all(fd: int, content: bytes) -> None:
    """Make the regular file open as `fd` hold exactly `content`."""
    view = memoryview(content)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)
    os.ftruncate(fd, len(content))


# ---------------------------------------------------------------------------------------------
# read_file


def cap_client_text(content: str, cap: int) -> tuple[str, bool]:
    """The client's file text, cut to `cap` UTF-8 bytes with a note when it is longer."""
    data = content.encode("utf-8")
    if len(data) <= cap:
        return content, False
    shown = complete_utf8_prefix(data[:cap])
    note = f"[truncated: the client returned {len(data)} bytes, showing the first {len(shown)}]"
    return join_notes(shown.decode("utf-8"), [note]), True


async def read_file(
    ctx: ToolContext, call: ToolCallInfo, args: ReadFileArgs, on_started: OnStarted
) -> ToolOutcome:
    line = None if args.line is UNSET else args.line
    limit = None if args.limit is UNSET else args.limit
    roots = ctx.directories
    if ctx.client.capabilities.read_text_file:
        path = await anyio.to_thread.run_sync(client_path, args.path, *roots)
        await on_started()
        params: dict[str, Any] = {"sessionId": ctx.session_id, "path": str(path)}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        result = await ctx.client.request("fs/read_text_file", params)
        content = decode_client_result("fs/read_text_file", result, _ReadTextFileResult).content
        text, truncated = cap_client_text(content, ctx.limits.read_bytes)
    else:
        await anyio.to_thread.run_sync(local_path, args.path, *roots)
        await on_started()
        text, truncated, path = await anyio.to_thread.run_sync(
            _read_locally, args.path, roots, line, limit, ctx.limits.read_bytes
        )
    shown = str(absolute_path(args.path, ctx.cwd))
    location = ToolCallLocation(shown) if line is None else ToolCallLocation(shown, line)
    return ToolOutcome(
        [TextContent(text)],
        False,
        {"path": str(path), "truncated": truncated},
        locations=[location],
    )


# ---------------------------------------------------------------------------------------------
# write_file


async def _old_bytes_via_client(ctx: ToolContext, path: Path) -> bytes | None:
    """The file's current text as the client sees it, encoded; a failed read means a new
    file."""
    try:
        result = await ctx.client.request(
            "fs/read_text_file", {"sessionId": ctx.session_id, "path": str(path)}
        )
    except ClientRequestError:
        return None
    text = decode_client_result("fs/read_text_file", result, _ReadTextFileResult).content
    return text.encode("utf-8")


def _write_summary(path: Path, old: bytes | None, new: bytes) -> str:
    if old is None:
        return f"Created {path} ({len(new)} bytes)."
    return f"Wrote {path}: {len(new)} bytes (was {len(old)})."


async def write_file(
    ctx: ToolContext, call: ToolCallInfo, args: WriteFileArgs, on_started: OnStarted
) -> ToolOutcome:
    caps = ctx.client.capabilities
    roots = ctx.directories
    # The path the user and the client see; local I/O opens `args.path` beneath the roots.
    shown = absolute_path(args.path, ctx.cwd)
    if caps.read_text_file and caps.write_text_file:
        await anyio.to_thread.run_sync(client_path, args.path, *roots)
    else:
        await anyio.to_thread.run_sync(local_path, args.path, *roots)
    # Refusals above come before the question: never ask to do what would be refused anyway.
    await ensure_permission(ctx, call)
    await on_started()
    new = args.content.encode("utf-8")
    if not caps.read_text_file and not caps.write_text_file:
        # Read and written through one descriptor: the diff's old text is what was replaced.
        old = await anyio.to_thread.run_sync(
            replace_locally, args.path, roots, new, ctx.limits.edit_bytes
        )
    else:
        if caps.read_text_file:
            old = await _old_bytes_via_client(ctx, shown)
        else:
            old = await anyio.to_thread.run_sync(
                _old_bytes_locally, args.path, roots, ctx.limits.edit_bytes
            )
        if caps.write_text_file:
            await ctx.client.request(
                "fs/write_text_file",
                {"sessionId": ctx.session_id, "path": str(shown), "content": args.content},
            )
        else:
            await anyio.to_thread.run_sync(write_locally, args.path, roots, new)
    old_text = None if old is None else old.decode("utf-8", errors="replace")
    return ToolOutcome(
        [
            TextContent(_write_summary(shown, old, new)),
            DiffContent(path=str(shown), new_text=args.content, old_text=old_text),
        ],
        False,
        {"path": str(shown), "created": old is None, "bytes": len(new)},
        locations=[ToolCallLocation(str(shown))],
        changes=[FileChange(str(shown), old, new)],
    )
