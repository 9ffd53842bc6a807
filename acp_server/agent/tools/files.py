"""`read_file` and `write_file`: through the client's `fs/*` methods when it advertised them,
else on the server's own file system, confined to the session's directories.

Local I/O runs in worker threads (a slow disk must not stall the connection), and opens only
what passed the checks: the resolved path, with `O_NOFOLLOW` (a symlink swapped in after the
check is not followed) and `O_NONBLOCK` (a FIFO swapped in does not block the open), and its
type is checked again on the open descriptor.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from msgspec import UNSET, Struct

from ...core.events import DiffContent, TextContent, ToolCallLocation
from ..confinement import absolute_path, client_path, local_path, non_regular_kind
from ..ports import ClientRequestError
from .arguments import ReadFileArgs, WriteFileArgs
from .base import ToolCallInfo, ToolContext, ToolError, ToolOutcome, decode_client_result
from .excerpts import (
    complete_utf8_prefix,
    join_notes,
    read_excerpt,
    render_excerpt,
)
from .permission import ensure_permission

OnStarted = Callable[[], Awaitable[None]]

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


def _open_regular(path: Path, raw: str, flags: int, verb: str) -> int:
    """A descriptor for the regular file at `path`; anything else is refused *before* opening."""
    try:
        _refuse_non_regular(os.stat(path).st_mode, raw)
        fd = os.open(path, flags | _OPEN_FLAGS, 0o666)
    except OSError as exc:
        raise ToolError(f"cannot {verb} {raw}: {_reason(exc)}") from None
    try:
        _refuse_non_regular(os.fstat(fd).st_mode, raw)  # it may have changed since the stat
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_locally(
    path: Path, raw: str, line: int | None, limit: int | None, cap: int
) -> tuple[str, bool]:
    """The model's text for the file at `path`, and whether the cap cut it."""
    with os.fdopen(_open_regular(path, raw, os.O_RDONLY, "read"), "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        try:
            excerpt = read_excerpt(stream, line=line, limit=limit, cap=cap)
        except OSError as exc:
            raise ToolError(f"cannot read {raw}: {_reason(exc)}") from None
    whole = line is None and limit is None
    return render_excerpt(excerpt, size=size, line=line, whole_file=whole), excerpt.truncated


def _old_text_locally(path: Path, raw: str, cap: int) -> str | None:
    """The current text of the file `write_file` replaces, or None when it does not exist."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot write {raw}: {_reason(exc)}") from None
    with os.fdopen(_open_regular(path, raw, os.O_RDONLY, "write"), "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > cap:
            raise ToolError(f"refused: {raw} is {size} bytes, over the {cap}-byte limit for edits")
        return stream.read().decode("utf-8", errors="replace")


def _write_locally(path: Path, raw: str, content: bytes) -> None:
    """Write `content` to `path`, creating missing parent directories (all inside the roots:
    `path` was resolved and checked, so every ancestor being created lies below a root)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _refuse_non_regular(os.stat(path).st_mode, raw)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ToolError(f"cannot write {raw}: {_reason(exc)}") from None
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        # The stream is buffered: a full disk may only show when it is flushed on closing.
        with os.fdopen(os.open(path, flags | _OPEN_FLAGS, 0o666), "wb") as stream:
            _refuse_non_regular(os.fstat(stream.fileno()).st_mode, raw)
            stream.write(content)
    except OSError as exc:
        raise ToolError(f"cannot write {raw}: {_reason(exc)}") from None


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
    roots = (ctx.cwd, ctx.additional_directories)
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
        path = await anyio.to_thread.run_sync(local_path, args.path, *roots)
        await on_started()
        text, truncated = await anyio.to_thread.run_sync(
            _read_locally, path, args.path, line, limit, ctx.limits.read_bytes
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


async def _old_text_via_client(ctx: ToolContext, path: Path) -> str | None:
    """The file's current text as the client sees it; a failed read means a new file."""
    try:
        result = await ctx.client.request(
            "fs/read_text_file", {"sessionId": ctx.session_id, "path": str(path)}
        )
    except ClientRequestError:
        return None
    return decode_client_result("fs/read_text_file", result, _ReadTextFileResult).content


def _write_summary(path: Path, old: str | None, new: bytes) -> str:
    if old is None:
        return f"Created {path} ({len(new)} bytes)."
    return f"Wrote {path}: {len(new)} bytes (was {len(old.encode('utf-8'))})."


async def write_file(
    ctx: ToolContext, call: ToolCallInfo, args: WriteFileArgs, on_started: OnStarted
) -> ToolOutcome:
    caps = ctx.client.capabilities
    roots = (ctx.cwd, ctx.additional_directories)
    # The path the user and the client see; local I/O uses the resolved `target` instead.
    shown = absolute_path(args.path, ctx.cwd)
    if caps.read_text_file and caps.write_text_file:
        target = await anyio.to_thread.run_sync(client_path, args.path, *roots)
    else:
        target = await anyio.to_thread.run_sync(local_path, args.path, *roots)
    # Refusals above come before the question: never ask to do what would be refused anyway.
    await ensure_permission(ctx, call)
    await on_started()
    if caps.read_text_file:
        old = await _old_text_via_client(ctx, shown)
    else:
        old = await anyio.to_thread.run_sync(
            _old_text_locally, target, args.path, ctx.limits.edit_bytes
        )
    new = args.content.encode("utf-8")
    if caps.write_text_file:
        await ctx.client.request(
            "fs/write_text_file",
            {"sessionId": ctx.session_id, "path": str(shown), "content": args.content},
        )
    else:
        await anyio.to_thread.run_sync(_write_locally, target, args.path, new)
    return ToolOutcome(
        [
            TextContent(_write_summary(shown, old, new)),
            DiffContent(path=str(shown), new_text=args.content, old_text=old),
        ],
        False,
        {"path": str(shown), "created": old is None, "bytes": len(new)},
        locations=[ToolCallLocation(str(shown))],
    )
