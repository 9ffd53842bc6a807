"""Rewind (`/rewind`): which turns are rewound, which messages can be rewound to, and which
files a rewind restores to which content, from the log alone (no I/O).

A `session/rewind` event rewinds the turn of its user message and every turn before the event
(the `/rewind` command's own turn aside): they stay in the log, and the model's history leaves
them out (`live_events`). Turns after the event are live, and a later rewind may rewind to an
earlier message again.

What the files held comes from the checkpoints of the `tool/result`s (`FileCheckpoint`: the
digest of a file's content before the call, None when it did not exist, and after): a rewind to
message N restores each file a live turn from N on changed to its content before the first of
those changes (removing a file that did not exist). What the agent last left in a file is the
`after` of its last checkpoint, or what a rewind restored: a file whose content on disk is
neither that nor the content to restore was changed outside the agent, and is left alone unless
the user allows it too (`split_changed`). A command's changes are not checkpointed: a rewind
counts the commands run in the turns it rewinds, and says their changes stay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from msgspec import Struct

from .content import TextContent
from .events import (
    CommandResult,
    SessionEvent,
    SessionRewind,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

COMMAND_TOOL: Final = "run_command"
"""The tool whose changes to files are not checkpointed (any file, any way)."""
SHOWN_CHARS: Final = 80
"""The most characters of a message's first line a listing shows."""


class RewindPoint(Struct, frozen=True):
    """A user message that can be rewound to: its number in the listing (from 1), its turn and
    id, and the first line of its text."""

    number: int
    turn: int
    message_id: str
    text: str


class FileRestore(Struct, frozen=True):
    """A file a rewind restores: the digest of the content to restore (None: remove the file)
    and of what the agent last left in it (None: it was absent)."""

    path: str
    sha256: str | None
    written: str | None


class RewindPlan(Struct, frozen=True):
    point: RewindPoint
    files: list[FileRestore]
    """Every file a live turn from the point on changed, in the order of their first change."""
    commands: int
    """The commands run in those turns: what they changed is not restored."""


def rewound_turns(events: Iterable[SessionEvent]) -> set[int]:
    """The turns some `session/rewind` rewound: from its message's turn to the last one before
    it (its own, a command's, aside)."""
    message_turns: dict[str, int] = {}
    seen: list[int] = []
    open_turn: int | None = None
    rewound: set[int] = set()
    for event in events:
        if type(event) is TurnStart:
            open_turn = event.data.turn
            seen.append(open_turn)
        elif type(event) is TurnEnd:
            open_turn = None
        elif type(event) is UserMessageEvent:
            message_turns[event.data.message.id] = event.data.turn
        elif type(event) is SessionRewind:
            first = message_turns.get(event.data.to_message_id)
            if first is not None:
                rewound.update(t for t in seen if t >= first and t != open_turn)
    return rewound


def live_events(events: Iterable[SessionEvent]) -> list[SessionEvent]:
    """The events without those of rewound turns (events between turns are all kept)."""
    events = list(events)
    rewound = rewound_turns(events)
    if not rewound:
        return events
    live: list[SessionEvent] = []
    current: int | None = None
    for event in events:
        if type(event) is TurnStart:
            current = event.data.turn
        if current is None or current not in rewound:
            live.append(event)
        if type(event) is TurnEnd:
            current = None
    return live


def rewind_points(events: Iterable[SessionEvent]) -> list[RewindPoint]:
    """The user messages of the live turns that ran the model and ended (a command's are not,
    nor the running `/rewind`'s own), numbered from 1: what `/rewind` lists and `/rewind N`
    takes."""
    live = live_events(events)
    commands = {e.data.turn for e in live if type(e) is CommandResult}
    ended = {e.data.turn for e in live if type(e) is TurnEnd}
    points: list[RewindPoint] = []
    for event in live:
        if type(event) is not UserMessageEvent:
            continue
        turn, message = event.data.turn, event.data.message
        if turn in ended and turn not in commands:
            text = next((b.text for b in message.content if type(b) is TextContent), "")
            points.append(RewindPoint(len(points) + 1, turn, message.id, _first_line(text)))
    return points


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    if not line:
        return "(no text)"
    return line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 1] + "…"


def rewind_listing(points: Sequence[RewindPoint]) -> str:
    """`/rewind`'s answer: the messages, numbered."""
    if not points:
        return "There is no message to rewind to."
    lines = ["Messages to rewind to (`/rewind N` restores the files as they were before N):"]
    lines.extend(f"{p.number}. {p.text}" for p in points)
    return "\n".join(lines)


def last_written(events: Iterable[SessionEvent]) -> dict[str, str | None]:
    """Each file's content as the agent last left it: the digest a tool call wrote, or a
    rewind restored (None: it removed the file)."""
    written: dict[str, str | None] = {}
    for event in events:
        if type(event) is ToolResult and event.data.checkpoints:
            for checkpoint in event.data.checkpoints:
                written[checkpoint.path] = checkpoint.after
        elif type(event) is SessionRewind:
            for restored in event.data.restored:
                written[restored.path] = restored.sha256
    return written


def plan_rewind(events: Iterable[SessionEvent], point: RewindPoint) -> RewindPlan:
    """What rewinding to `point` restores: every file changed by a live turn from it on, to
    its content before the first such change."""
    events = list(events)
    before: dict[str, str | None] = {}
    commands = 0
    for event in live_events(events):
        if type(event) is ToolResult and event.data.turn >= point.turn:
            for checkpoint in event.data.checkpoints or ():
                before.setdefault(checkpoint.path, checkpoint.before)
        elif (
            type(event) is ToolCall
            and event.data.turn >= point.turn
            and event.data.name == COMMAND_TOOL
        ):
            commands += 1
    written = last_written(events)
    files = [FileRestore(path, sha256, written.get(path)) for path, sha256 in before.items()]
    return RewindPlan(point, files, commands)


def split_changed(
    plan: RewindPlan, current: Mapping[str, str | None]
) -> tuple[list[FileRestore], list[FileRestore]]:
    """The plan's files as the agent left them (or already restored), and those changed
    outside it since, given each file's digest on disk now (None: absent)."""
    ours: list[FileRestore] = []
    changed: list[FileRestore] = []
    for file in plan.files:
        now = current.get(file.path)
        (ours if now in (file.written, file.sha256) else changed).append(file)
    return ours, changed


def rewind_question(point: RewindPoint, ours: Sequence[FileRestore], changed: int) -> str:
    """The permission request's title before a rewind: what it restores and removes."""
    title = f"Rewind to message {point.number} ({point.text})"
    written = [f.path for f in ours if f.sha256 is not None]
    removed = [f.path for f in ours if f.sha256 is None]
    if written:
        title += "; restore " + ", ".join(written)
    if removed:
        title += "; remove " + ", ".join(removed)
    if changed:
        title += f"; {changed} file{'s' if changed != 1 else ''} changed outside the agent"
        title += " left alone unless allowed next"
    return title


def overwrite_question(changed: Sequence[FileRestore]) -> str:
    """The second request's title: the files changed outside the agent, named."""
    names = ", ".join(f.path for f in changed)
    return f"Also restore files changed outside the agent since it last wrote them: {names}"


def rewind_summary(
    point: RewindPoint,
    restored: Sequence[FileRestore],
    skipped: Sequence[str],
    commands: int,
    failures: Sequence[str] = (),
) -> str:
    """`/rewind N`'s answer once done (`failures`: why a file could not be restored)."""
    lines = [f"Rewound to message {point.number}: {point.text}"]
    written = [f.path for f in restored if f.sha256 is not None]
    removed = [f.path for f in restored if f.sha256 is None]
    if written:
        lines.append("Restored: " + ", ".join(written))
    if removed:
        lines.append("Removed (created after that message): " + ", ".join(removed))
    if skipped:
        lines.append("Left alone (changed outside the agent): " + ", ".join(skipped))
    lines.extend(f"Not restored: {failure}" for failure in failures)
    if not restored and not skipped and not failures:
        lines.append("No file to restore.")
    if commands:
        lines.append(
            f"Not undone: what the {commands} command{'s' if commands != 1 else ''} run since "
            "changed."
        )
    return "\n".join(lines)
