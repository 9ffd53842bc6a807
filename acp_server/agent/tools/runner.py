"""`run_tool`: one tool call, from the model's raw arguments to a `ToolOutcome`.

This is the tools' single error boundary: every failure the model should read about
(arguments that do not fit, a refused path, a rejected permission, a client error) becomes an
error outcome here, and nothing else is caught. Cancellation in particular passes through
untouched, so a cancelled turn stops at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from ..confinement import PathRefused
from ..ports import ClientRequestError
from .arguments import ARGUMENT_TYPES
from .base import (
    ToolCallInfo,
    ToolContext,
    ToolError,
    ToolOutcome,
    error_outcome,
    invalid_arguments,
)
from .commands import run_command
from .files import read_file, write_file
from .plan import todo_write

OnStarted = Callable[[], Awaitable[None]]
Runner = Callable[[ToolContext, ToolCallInfo, Any, OnStarted], Awaitable[ToolOutcome]]

_RUNNERS: Final[dict[str, Runner]] = {
    "read_file": read_file,
    "write_file": write_file,
    "run_command": run_command,
    "todo_write": todo_write,
}


async def run_tool(
    ctx: ToolContext,
    call_id: str,
    name: str,
    arguments: str,
    *,
    title: str,
    kind: str,
    on_started: OnStarted,
) -> ToolOutcome:
    """Run the call `name(arguments)`; never raises for anything the model could cause.

    `on_started` is awaited once, right before the tool's real work (after any permission was
    granted), and not at all for a call refused before that point. `title` and `kind` are the
    call's presentation, repeated in the permission request.
    """
    if name == "task":
        # The loop runs subagents itself; reaching here means it cannot in this session.
        return error_outcome("the task tool is not available in this session")
    runner = _RUNNERS.get(name)
    if runner is None:
        return error_outcome(f"unknown tool {name!r}; the tools are: {', '.join(ARGUMENT_TYPES)}")
    try:
        args = msgspec.json.decode(arguments, type=ARGUMENT_TYPES[name])
    except msgspec.DecodeError as exc:
        return invalid_arguments(name, exc)
    call = ToolCallInfo(call_id, name, arguments, title, kind)
    try:
        return await runner(ctx, call, args, on_started)
    except (ToolError, PathRefused) as exc:
        return error_outcome(str(exc))
    except ClientRequestError as exc:
        return error_outcome(str(exc))
