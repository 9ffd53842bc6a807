"""`todo_write`: the model's plan, shown to the user as an ACP `plan` and logged as
`plan/update` by the loop (the outcome carries the entries; the tool itself touches nothing)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from ...core.content import TextContent
from ...core.events import PlanEntry
from .arguments import TodoWriteArgs
from .base import ToolCallInfo, ToolContext, ToolOutcome

_MARKS: Final = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def plan_summary(entries: list[PlanEntry]) -> str:
    """A short text the model reads back: the plan as a checklist."""
    if not entries:
        return "Plan cleared."
    lines = [f"Plan updated ({len(entries)} item{'' if len(entries) == 1 else 's'}):"]
    for entry in entries:
        priority = "" if entry.priority == "medium" else f" ({entry.priority} priority)"
        lines.append(f"{_MARKS[entry.status]} {entry.content}{priority}")
    return "\n".join(lines)


async def todo_write(
    ctx: ToolContext,
    call: ToolCallInfo,
    args: TodoWriteArgs,
    on_started: Callable[[], Awaitable[None]],
) -> ToolOutcome:
    await on_started()
    entries = [PlanEntry(item.content, item.priority, item.status) for item in args.todos]
    return ToolOutcome([TextContent(plan_summary(entries))], False, plan=entries)
