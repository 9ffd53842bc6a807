"""`run_tool`: one tool call, from the model's raw arguments to a `ToolOutcome`.

This is the tools' single error boundary: every failure the model should read about
(an unknown tool, arguments that do not fit, a refused path, a rejected permission, a client
error) becomes an error outcome here, and nothing else is caught. Cancellation in particular
passes through untouched, so a cancelled turn stops at once.
"""

from __future__ import annotations

import msgspec

from ..confinement import PathRefused
from ..ports import ClientRequestError
from .base import (
    ToolCallInfo,
    ToolContext,
    ToolError,
    ToolOutcome,
    error_outcome,
    invalid_arguments,
)
from .registry import OnStarted, ToolRegistry


async def run_tool(
    tools: ToolRegistry,
    ctx: ToolContext,
    call_id: str,
    name: str,
    arguments: str,
    *,
    title: str,
    kind: str,
    on_started: OnStarted,
) -> ToolOutcome:
    """Run the call `name(arguments)` with the session's `tools`; never raises for anything
    the model could cause.

    `on_started` is awaited once, right before the tool's real work (after any permission was
    granted), and not at all for a call refused before that point. `title` and `kind` are the
    call's presentation, repeated in the permission request.
    """
    tool = tools.get(name)
    if tool is None:
        return error_outcome(f"unknown tool {name!r}; the tools are: {', '.join(tools.names)}")
    try:
        args = tool.decode(arguments)
    except msgspec.DecodeError as exc:
        return invalid_arguments(name, exc)
    call = ToolCallInfo(call_id, name, arguments, title, kind)
    try:
        return await tool.run(ctx, call, args, on_started)
    except (ToolError, PathRefused) as exc:
        return error_outcome(str(exc))
    except ClientRequestError as exc:
        return error_outcome(str(exc))
