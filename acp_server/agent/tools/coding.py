"""The runners of `edit_file`, `list_directory`, `glob` and `grep` (SPEC 4.3).

The engines (`edit`, `listing`, `search`) do the work and are blocking; here they meet the
session: worker threads, the client's `fs/*` methods, permission and the call's outcome.

An edit is worked out completely before the user is asked, so that a refusal (a path outside
the roots, a missing or ambiguous `oldText`) never comes after a permission the user gave. The
file is read again after the answer: a change the user made while asked is kept (the edit is
made again on it, `edit.edit_again`), or the call fails, writing nothing, when the edit no
longer applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio.to_thread
from msgspec import Struct

from ...core.content import TextContent
from ..confinement import client_path, local_path
from .base import FileChange, ToolCallInfo, ToolContext, ToolOutcome, decode_client_result
from .edit import (
    Edit,
    EditFileArgs,
    apply_edit,
    edit_again,
    edit_content,
    edit_locations,
    prepare_local_edit,
    write_local_edit,
)
from .permission import ensure_permission
from .registry import OnStarted
from .tree import TreeResult


class _ReadTextFileResult(Struct):
    content: str


def _edit_outcome(shown: str, old_text: str, edit: Edit) -> ToolOutcome:
    return ToolOutcome(
        edit_content(shown, old_text, edit),
        False,
        {"path": shown, "replacements": edit.count, "lines": edit.lines},
        locations=edit_locations(shown, edit),
        changes=[FileChange(shown, old_text.encode("utf-8"), edit.text.encode("utf-8"))],
    )


async def edit_file(
    ctx: ToolContext, call: ToolCallInfo, args: EditFileArgs, on_started: OnStarted
) -> ToolOutcome:
    caps = ctx.client.capabilities
    if caps.read_text_file and caps.write_text_file:
        # The editor's buffer is the file: unsaved changes are what gets edited.
        path = await anyio.to_thread.run_sync(client_path, args.path, *ctx.directories)
        shown = str(path)
        read = await _client_text(ctx, shown)
        edit = apply_edit(read, args, shown)
        await ensure_permission(ctx, call)
        await on_started()
        # The user may have changed the buffer while they were asked: read it again.
        current = await _client_text(ctx, shown)
        edit = edit_again(current, read, edit, args, shown)
        await ctx.client.request(
            "fs/write_text_file",
            {"sessionId": ctx.session_id, "path": shown, "content": edit.text},
        )
        return _edit_outcome(shown, current, edit)
    prepared = await anyio.to_thread.run_sync(
        prepare_local_edit,
        args,
        ctx.cwd,
        ctx.additional_directories,
        ctx.limits.edit_bytes,
        ctx.kept.credentials,
    )
    await ensure_permission(ctx, call)
    await on_started()
    old_text, edit = await anyio.to_thread.run_sync(write_local_edit, prepared, args.path)
    return _edit_outcome(str(prepared.shown), old_text, edit)


async def _client_text(ctx: ToolContext, path: str) -> str:
    result = await ctx.client.request(
        "fs/read_text_file", {"sessionId": ctx.session_id, "path": path}
    )
    return decode_client_result("fs/read_text_file", result, _ReadTextFileResult).content


class _PathArgs(Protocol):
    @property
    def path(self) -> str: ...


A = TypeVar("A", bound=_PathArgs)
A_contra = TypeVar("A_contra", bound=_PathArgs, contravariant=True)


class TreeEngine(Protocol[A_contra]):
    """`listing.list_directory`, `search.glob`, `search.grep`: blocking, confined walks."""

    def __call__(
        self,
        args: A_contra,
        cwd: Path,
        additional_directories: Sequence[Path],
        /,
        *,
        credentials: Path | None,
    ) -> TreeResult: ...


def tree_runner(engine: TreeEngine[A]) -> Any:
    """The runner of a read-only tree tool: the engine in a worker thread, its text as the
    result, its places (grep's hits) as the call's locations."""

    async def run(
        ctx: ToolContext, call: ToolCallInfo, args: A, on_started: OnStarted
    ) -> ToolOutcome:
        # A path outside the session is refused before the call shows as started, as
        # read_file's is; the engine confines it again, on what it actually opens.
        await anyio.to_thread.run_sync(local_path, args.path, *ctx.directories)
        await on_started()
        cwd, additional_directories, credentials = ctx.directories

        def walk() -> TreeResult:
            return engine(args, cwd, additional_directories, credentials=credentials)

        found = await anyio.to_thread.run_sync(walk)
        return ToolOutcome(
            [TextContent(found.text)],
            False,
            found.raw_output,
            locations=found.locations or None,
        )

    return run
