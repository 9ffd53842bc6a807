"""`/rewind [N]` of a live session: the I/O around `core.rewind`'s plan.

Without N it lists the messages. With N it reads the digests of the files the plan names,
asks permission (always, whatever the session's mode: a rewind changes files and what the
model remembers), asks again naming the files changed outside the agent when there are any,
restores what it may (the contents from the store's blobs, written by `agent.checkpoints`
beneath the session's directories) and appends `session/rewind`. The command's turn (its
`command/result`) is the caller's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread

from ..agent.checkpoints import current_digests, restore_file
from ..agent.confinement import Directories, PathRefused
from ..agent.ports import ClientPort
from ..agent.tools.base import ToolError
from ..agent.tools.permission import permission_answer
from ..core.events import RestoredFile, SessionRewind, SessionRewindData
from ..core.rewind import (
    FileRestore,
    RewindPoint,
    overwrite_question,
    plan_rewind,
    rewind_listing,
    rewind_points,
    rewind_question,
    rewind_summary,
    split_changed,
)
from ..storage.api import Store
from .live import LiveSession

REWIND_OPTIONS = [
    {"optionId": "allow_once", "name": "Rewind", "kind": "allow_once"},
    {"optionId": "reject_once", "name": "Cancel", "kind": "reject_once"},
]
OVERWRITE_OPTIONS = [
    {"optionId": "allow_once", "name": "Restore them too", "kind": "allow_once"},
    {"optionId": "reject_once", "name": "Leave them", "kind": "reject_once"},
]


async def run_rewind(
    session: LiveSession,
    store: Store,
    client: ClientPort,
    argument: str,
    turn: int,
    credentials: Path | None,
) -> tuple[str, bool]:
    """`/rewind`'s answer, and whether it failed."""
    events = list(session.log.plain_events())
    points = rewind_points(events)
    if not argument:
        return rewind_listing(points), False
    if not argument.isdecimal() or not 1 <= int(argument) <= len(points):
        if not points:
            return "There is no message to rewind to.", True
        return f"Usage: /rewind [N], N a message's number from 1 to {len(points)}", True
    point = points[int(argument) - 1]
    plan = plan_rewind(events, point)
    roots = Directories(
        Path(session.cwd), [Path(d) for d in session.additional_directories], credentials
    )
    paths = [file.path for file in plan.files]
    current = await anyio.to_thread.run_sync(current_digests, paths, roots)
    ours, changed = split_changed(plan, current)
    asked = _request(session.id, turn, rewind_question(point, ours, len(changed)), point, ours)
    try:
        if await permission_answer(client, asked | {"options": REWIND_OPTIONS}) != "allow_once":
            return "Rewind cancelled: nothing was changed.", False
        if changed:
            again = _request(session.id, turn, overwrite_question(changed), point, changed)
            again["toolCall"]["toolCallId"] += "-changed"
            if await permission_answer(client, again | {"options": OVERWRITE_OPTIONS}) == (
                "allow_once"
            ):
                ours, changed = [*ours, *changed], []
    except ToolError as exc:
        return f"Rewind cancelled: {exc}", True
    restored, failures = await _restore(store, session.id, ours, roots)
    skipped = [file.path for file in changed] + [path for path, _ in failures]
    session.recorder.append(
        SessionRewind,
        SessionRewindData(
            point.message_id, [RestoredFile(f.path, f.sha256) for f in restored], skipped
        ),
    )
    reasons = [f"{path} ({reason})" for path, reason in failures]
    left = [file.path for file in changed]
    return rewind_summary(point, restored, left, plan.commands, reasons), False


def _request(
    session_id: str, turn: int, title: str, point: RewindPoint, files: list[FileRestore]
) -> dict[str, Any]:
    return {
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": f"rewind-{turn}",
            "title": title,
            "kind": "edit",
            "status": "pending",
            "rawInput": {"message": point.number},
            "locations": [{"path": file.path} for file in files],
        },
    }


async def _restore(
    store: Store, session_id: str, files: list[FileRestore], roots: Directories
) -> tuple[list[FileRestore], list[tuple[str, str]]]:
    """Put each file back: those restored, and each one that could not be with why."""
    restored: list[FileRestore] = []
    failures: list[tuple[str, str]] = []
    for file in files:
        content = None
        if file.sha256 is not None:
            content = await store.get_blob(session_id, file.sha256)
            if content is None:
                failures.append((file.path, "its content is not in the store"))
                continue
        try:
            await anyio.to_thread.run_sync(restore_file, file.path, content, roots)
        except (OSError, PathRefused, ToolError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            failures.append((file.path, reason))
            continue
        restored.append(file)
    return restored, failures
