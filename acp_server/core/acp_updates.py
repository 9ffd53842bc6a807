"""ACP `session/update` payloads, and how session events are shown through them (SPEC 4.1, 4.2).

The live path (a prompt streaming) and the load projection (a session replayed) both present
events with the functions here, so a reloaded conversation looks the way it looked live.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType, field

from .content import ContentBlock, DiffContent, Meta_
from .events import NoticeSeverity, PlanEntry, ToolCallLocation, ToolResultData
from .modes import ConfigOption

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]


class Update(Struct, tag_field="sessionUpdate", rename="camel", omit_defaults=True, gc=False):
    """Base of the `SessionUpdate` union, tagged by `sessionUpdate`."""


class UserMessageChunk(Update, tag="user_message_chunk"):
    content: ContentBlock
    message_id: str | UnsetType = UNSET


class AgentMessageChunk(Update, tag="agent_message_chunk"):
    content: ContentBlock
    message_id: str | UnsetType = UNSET


class AgentThoughtChunk(Update, tag="agent_thought_chunk"):
    content: ContentBlock
    message_id: str | UnsetType = UNSET


class ToolContent(Struct, tag="content", tag_field="type", omit_defaults=True):
    """A content block inside a tool call (ACP `ToolCallContent` of type `content`)."""

    content: ContentBlock


class ToolDiff(Struct, tag="diff", tag_field="type", rename="camel", omit_defaults=True):
    path: str
    new_text: str
    old_text: str | UnsetType | None = UNSET


class ToolTerminal(Struct, tag="terminal", tag_field="type", rename="camel"):
    terminal_id: str


ToolCallContent = ToolContent | ToolDiff | ToolTerminal


class ToolCallStarted(Update, tag="tool_call"):
    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolCallStatus
    raw_input: Any | UnsetType = UNSET
    locations: list[ToolCallLocation] | UnsetType = UNSET
    name: str | UnsetType = UNSET
    """The registry's name of the tool called (ACP 1.22's `name`): `read_file`,
    `mcp__server__tool`..., the programmatic name beside the human `title`."""


class ToolCallUpdated(Update, tag="tool_call_update"):
    tool_call_id: str
    status: ToolCallStatus | UnsetType = UNSET
    content: list[ToolCallContent] | UnsetType = UNSET
    locations: list[ToolCallLocation] | UnsetType = UNSET
    raw_output: Any | UnsetType = UNSET
    name: str | UnsetType = UNSET
    """The tool's name again, as on the `tool_call`: a client that joins late, or shows
    updates alone, still knows which tool it was."""
    meta: Meta_ = field(default=UNSET, name="_meta")
    """`{"acp-server": {"cut": {seq, bytes}}}` on a replayed output that was cut (SPEC 4.2)."""


class PlanShown(Update, tag="plan"):
    entries: list[PlanEntry]


class SessionInfoUpdate(Update, tag="session_info_update"):
    title: str | UnsetType | None = UNSET


class CurrentModeUpdate(Update, tag="current_mode_update"):
    current_mode_id: str


class ConfigOptionUpdate(Update, tag="config_option_update"):
    config_options: list[ConfigOption]


class CommandInput(Struct, gc=False):
    hint: str


class AvailableCommand(Struct, omit_defaults=True, gc=False):
    name: str
    description: str
    input: CommandInput | UnsetType = UNSET


class AvailableCommandsUpdate(Update, tag="available_commands_update"):
    available_commands: list[AvailableCommand]


class Cost(Struct, gc=False):
    amount: float
    currency: str


class UsageShown(Update, tag="usage_update"):
    used: int
    size: int
    cost: Cost | UnsetType = UNSET


CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]


class CompactionShown(Update, tag="compaction_update"):
    """A compaction's state (ACP `compaction_update`), for clients that advertise
    `session.compaction`: the first one fixes its place in the timeline."""

    compaction_id: str
    status: CompactionStatus
    summary: list[ContentBlock] | UnsetType = UNSET
    error: str | UnsetType = UNSET


class CompactionSummaryChunk(Update, tag="compaction_summary_chunk"):
    """A piece of a compaction's summary as it streams (ACP `compaction_summary_chunk`)."""

    compaction_id: str
    content: ContentBlock


class NoticeShown(Update, tag="notice"):
    """A notice for the user (ACP `notice`), for clients that advertise `session.notices`."""

    severity: NoticeSeverity
    title: str
    description: str | UnsetType = UNSET


# The unstable schema's plan operations, for a client that advertised `plan`.


class PlanItems(Struct, tag="items", tag_field="type", rename="camel", gc=False):
    """A plan of structured entries, named by its id (ACP `PlanUpdateContent` `items`)."""

    plan_id: str
    entries: list[PlanEntry]


class PlanUpdated(Update, tag="plan_update"):
    plan: PlanItems


class PlanRemoved(Update, tag="plan_removed"):
    plan_id: str


# The unstable schema's subagent sessions, for a client that advertised `subagents`.


class RunningState(Struct, tag="running", tag_field="state", gc=False):
    """A child's foreground work is in progress."""


class ErrorObject(Struct, omit_defaults=True, gc=False):
    """A JSON-RPC error object: why a child's work ended in failure."""

    code: int
    message: str
    data: Any | UnsetType = UNSET


class IdleState(Struct, tag="idle", tag_field="state", rename="camel", omit_defaults=True):
    """A child's foreground work stopped: why (a `StopReason` or "error"), when known."""

    stop_reason: str | UnsetType = UNSET
    error: ErrorObject | UnsetType = UNSET


class SubagentUpdated(Update, tag="subagent_update"):
    """Sent on the parent session: announces its child `session_id`, or patches its state."""

    session_id: str
    state: RunningState | IdleState | UnsetType = UNSET


class SessionMessageShown(Update, tag="session_message"):
    """A message between two sessions, as the enclosing session's transcript holds it."""

    message_id: str
    sender_session_id: str | UnsetType = UNSET
    recipient_session_id: str | UnsetType = UNSET
    sender_message_id: str | UnsetType = UNSET
    recipient_message_id: str | UnsetType = UNSET
    content: list[ContentBlock] | UnsetType = UNSET


# What ACP v2 shows and v1 has no update for: a v1 connection is never sent these (v2 renders
# them, with everything else, in `acp_v2`).


class StateShown(Update, tag="state_update"):
    """The session's foreground work (v2 `state_update`): `running` when a turn starts,
    `requires_action` while it waits for the user (a permission, an elicitation), `idle` when
    it ends, with its stop reason (and, for `error`, the error)."""

    state: Literal["running", "idle", "requires_action"]
    stop_reason: str | UnsetType = UNSET
    error: ErrorObject | UnsetType = UNSET


class UserMessageShown(Update, tag="user_message"):
    """A whole user message (v2 `user_message`): the prompt inserted, or replayed."""

    message_id: str
    content: list[ContentBlock]


class AgentMessageShown(Update, tag="agent_message"):
    """A whole agent message (v2 `agent_message`), as a replay shows it."""

    message_id: str
    content: list[ContentBlock]


class AgentThoughtShown(Update, tag="agent_thought"):
    """A whole agent thought (v2 `agent_thought`), as a replay shows it."""

    message_id: str
    content: list[ContentBlock]


V2_ONLY: Final = (StateShown, UserMessageShown, AgentMessageShown, AgentThoughtShown)
"""The update kinds only a v2 connection is sent."""


SessionUpdate = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStarted
    | ToolCallUpdated
    | PlanShown
    | SessionInfoUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | AvailableCommandsUpdate
    | UsageShown
    | CompactionShown
    | CompactionSummaryChunk
    | NoticeShown
    | PlanUpdated
    | PlanRemoved
    | SubagentUpdated
    | SessionMessageShown
    | StateShown
    | UserMessageShown
    | AgentMessageShown
    | AgentThoughtShown
)


class SessionNotification(Struct, rename="camel", gc=False):
    """The params of a `session/update` notification."""

    session_id: str
    update: SessionUpdate


# ---------------------------------------------------------------------------------------------
# Presenting tool calls.
#
# What a call is shown as (its title, kind and locations) belongs to the tool: the session's
# tool registry says it, through a `ToolPresenter`, both live and when a log is replayed.

_TITLE_LIMIT: Final = 80


class ToolPresentation(Struct, frozen=True, gc=False):
    """How one tool call is shown: its title, ACP kind and the places it touches."""

    title: str
    kind: ToolKind
    locations: list[ToolCallLocation] | UnsetType = UNSET


ToolPresenter = Callable[[str, Any], ToolPresentation]
"""The presentation of a call of the named tool with these arguments (parsed JSON, or the raw
text when they were not valid JSON)."""


def parse_arguments(arguments: str) -> Any:
    """The model's arguments as JSON, or the raw text if they are not valid JSON."""
    try:
        return msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return arguments


def clip_title(text: str) -> str:
    """A title on one line, at most 80 characters (cut with an ellipsis)."""
    text = " ".join(text.split())
    return text if len(text) <= _TITLE_LIMIT else text[: _TITLE_LIMIT - 1] + "…"


def unknown_tool_presentation(name: str, args: Any) -> ToolPresentation:
    """A call of a tool nobody registered: its name, kind `other`."""
    return ToolPresentation(clip_title(name), "other")


def tool_call_started(
    call_id: str, name: str, arguments: str, present: ToolPresenter
) -> ToolCallStarted:
    """The `tool_call` update announcing a call (status `pending`) of the tool `name`."""
    args = parse_arguments(arguments)
    shown = present(name, args)
    return ToolCallStarted(call_id, shown.title, shown.kind, "pending", args, shown.locations, name)


def tool_call_in_progress(
    call_id: str, name: str, content: list[ToolCallContent] | UnsetType = UNSET
) -> ToolCallUpdated:
    """The update saying a call of the tool `name` has started, with what it shows while it
    runs (a terminal)."""
    return ToolCallUpdated(call_id, "in_progress", content, name=name)


def tool_call_finished(result: ToolResultData, name: str) -> ToolCallUpdated:
    """The `tool_call_update` that closes a call of the tool `name`: `completed` or `failed`,
    with its content."""
    content: list[ToolCallContent] = []
    for item in result.content:
        if isinstance(item, DiffContent):
            content.append(ToolDiff(item.path, item.new_text, item.old_text))
        else:
            content.append(ToolContent(item))
    status: ToolCallStatus = "failed" if result.is_error is True else "completed"
    return ToolCallUpdated(
        result.call_id, status, content, result.locations, result.raw_output, name
    )


PLAN_ID: Final = "todo"
"""The id of a session's one plan, the one `todo_write` replaces whole, in `plan_update`."""


def plan_shown(entries: list[PlanEntry], operations: bool) -> SessionUpdate:
    """How a `plan/update` is shown: the legacy `plan`, or, to a client that advertised
    `plan`, `plan_update` of the session's plan (`plan_removed` once its list is empty)."""
    if not operations:
        return PlanShown(entries)
    if not entries:
        return PlanRemoved(PLAN_ID)
    return PlanUpdated(PlanItems(PLAN_ID, entries))


def assistant_message_id(turn: int, step: int) -> str:
    """The id of a step's assistant message: stable, so that load shows what live showed."""
    return f"assistant-{turn}-{step}"


def user_message_id(turn: int) -> str:
    return f"user-{turn}"


def command_message_id(turn: int) -> str:
    """The id of the agent message that shows a command's answer (SPEC 4.4)."""
    return f"command-{turn}"


def compaction_id(turn: int, step: int) -> str:
    """The id of the compaction whose summarising step is `(turn, step)`: the same live and
    in a load's replay."""
    return f"compaction-{turn}-{step}"


__all__ = [
    "PLAN_ID",
    "V2_ONLY",
    "AgentMessageChunk",
    "AgentMessageShown",
    "AgentThoughtChunk",
    "AgentThoughtShown",
    "AvailableCommandsUpdate",
    "CompactionShown",
    "CompactionSummaryChunk",
    "ConfigOptionUpdate",
    "CurrentModeUpdate",
    "ErrorObject",
    "IdleState",
    "NoticeShown",
    "PlanItems",
    "PlanRemoved",
    "PlanShown",
    "PlanUpdated",
    "RunningState",
    "SessionInfoUpdate",
    "SessionMessageShown",
    "SessionNotification",
    "SessionUpdate",
    "StateShown",
    "SubagentUpdated",
    "ToolCallLocation",
    "ToolCallStarted",
    "ToolCallUpdated",
    "ToolContent",
    "ToolDiff",
    "ToolPresentation",
    "ToolPresenter",
    "UsageShown",
    "UserMessageChunk",
    "UserMessageShown",
    "assistant_message_id",
    "clip_title",
    "command_message_id",
    "compaction_id",
    "plan_shown",
    "tool_call_finished",
    "tool_call_in_progress",
    "tool_call_started",
    "unknown_tool_presentation",
    "user_message_id",
]
