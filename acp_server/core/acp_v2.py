"""How what the server shows (`acp_updates.SessionUpdate`) goes out over ACP v2 (SDK 2.4.0).

Everything the server shows is one `SessionUpdate`, whatever the version of the connection it
reaches; a v2 connection renders each into v2's own update shapes here, at one place (its
port): zero, one or more v2 updates. What differs from v1:

- every message chunk carries its `messageId` (the log's ids; a chunk that has none gets one
  derived from its content, the same each time it is shown);
- a tool call is `tool_call_update` from its first update (which carries its title, kind,
  status, input and name) to its last;
- plans are `plan_update` / `plan_removed` of the session's one plan (`PLAN_ID`);
- v2 has no modes: the mode is a config option, and `current_mode_update` renders to nothing
  (the change goes out as `config_option_update` where it is made);
- commands are `{"type": "command", ...}`, config options name their id `configId`;
- `subagent_update` and `session_message` only to a client shown subagents.

Agent-to-client requests have their v2 shapes here too (`permission_request`).
"""

from __future__ import annotations

import difflib
import hashlib
from typing import Any, Final, Literal, cast

import msgspec
from msgspec import UNSET, Struct, UnsetType, field

from .acp_updates import (
    PLAN_ID,
    AgentMessageChunk,
    AgentMessageShown,
    AgentThoughtChunk,
    AgentThoughtShown,
    AvailableCommandsUpdate,
    CompactionShown,
    CompactionSummaryChunk,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    NoticeShown,
    PlanItems,
    PlanRemoved,
    PlanShown,
    PlanUpdated,
    SessionInfoUpdate,
    SessionMessageShown,
    SessionUpdate,
    StateShown,
    SubagentUpdated,
    ToolCallContent,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolDiff,
    ToolKind,
    ToolTerminal,
    UsageShown,
    UserMessageChunk,
    UserMessageShown,
)
from .content import ContentBlock, Meta_
from .events import ToolCallLocation
from .modes import ConfigOption, ConfigSelectOption

V2ToolCallStatus = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
"""v2's tool call statuses the server uses (never the SDK's `paused`: the conformance kit's
draft has no such status)."""


class V2Update(Struct, tag_field="sessionUpdate", rename="camel", omit_defaults=True, gc=False):
    """Base of the v2-only shapes of v2's `SessionUpdate` union."""


class DiffChange(Struct, rename="camel", gc=False):
    """One file a v2 `diff` changes (v1's diff is one file, added or modified)."""

    operation: Literal["add", "modify"]
    path: str
    file_type: Literal["text"] = "text"


class DiffPatch(Struct, gc=False):
    format: Literal["git_patch"]
    text: str


class DiffV2(Struct, tag="diff", tag_field="type", gc=False):
    """v2 tool call content `diff`: the files changed, and the change as a git patch."""

    changes: list[DiffChange]
    patch: DiffPatch


ToolCallContentV2 = ToolContent | DiffV2 | ToolTerminal


class ToolCallUpdateV2(V2Update, tag="tool_call_update"):
    """v2 `tool_call_update`: a tool call created (its first one, with its title) or patched."""

    tool_call_id: str
    title: str | UnsetType = UNSET
    kind: ToolKind | UnsetType = UNSET
    status: V2ToolCallStatus | UnsetType = UNSET
    content: list[ToolCallContentV2] | UnsetType = UNSET
    locations: list[ToolCallLocation] | UnsetType = UNSET
    raw_input: Any | UnsetType = UNSET
    raw_output: Any | UnsetType = UNSET
    name: str | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class CommandInputV2(Struct, tag="text", tag_field="type", gc=False):
    hint: str


class CommandV2(Struct, tag="command", tag_field="type", omit_defaults=True, gc=False):
    """v2 `AvailableCommand` of type `command`."""

    name: str
    description: str
    input: CommandInputV2 | UnsetType = UNSET


class AvailableCommandsUpdateV2(V2Update, tag="available_commands_update"):
    available_commands: list[CommandV2]


class ConfigOptionV2(Struct, tag="select", tag_field="type", rename="camel", gc=False):
    """v2 `SessionConfigOption` of type `select` (v1's, its id named `configId`)."""

    config_id: str
    name: str
    category: str
    current_value: str
    options: list[ConfigSelectOption]


class ConfigOptionUpdateV2(V2Update, tag="config_option_update"):
    config_options: list[ConfigOptionV2]


V2SessionUpdate = (
    SessionUpdate | ToolCallUpdateV2 | AvailableCommandsUpdateV2 | ConfigOptionUpdateV2
)
"""What a v2 connection is sent: the kinds whose v1 shape v2 keeps (chunks with their ids,
usage, notices, compactions, session info, plan operations, the v2-only kinds), and v2's own."""


class V2Notification(Struct, rename="camel", gc=False):
    """The params of a v2 `session/update` notification."""

    session_id: str
    update: V2SessionUpdate


_PASSED: Final = frozenset(
    {
        UsageShown,
        NoticeShown,
        CompactionShown,
        CompactionSummaryChunk,
        SessionInfoUpdate,
        PlanUpdated,
        PlanRemoved,
        StateShown,
        UserMessageShown,
        AgentMessageShown,
        AgentThoughtShown,
    }
)
"""The kinds whose v1 shape is v2's."""

_CHUNKS: Final = frozenset({UserMessageChunk, AgentMessageChunk, AgentThoughtChunk})

SUBAGENT_KINDS: Final = frozenset({SubagentUpdated, SessionMessageShown})
"""The kinds only a client shown subagents is sent (the `subagents` of `render`)."""


def render(update: SessionUpdate, *, subagents: bool = False) -> list[V2SessionUpdate]:
    """`update` as a v2 connection is sent it: zero, one or more v2 updates. `subagents`:
    whether the client is shown a `task` call's child as a session of its own."""
    kind = type(update)
    if kind in _PASSED:
        return [update]
    if kind in _CHUNKS:
        update = cast("UserMessageChunk | AgentMessageChunk | AgentThoughtChunk", update)
        if update.message_id is UNSET:
            return [type(update)(update.content, content_message_id(update.content))]
        return [update]
    if isinstance(update, ToolCallStarted):
        return [
            ToolCallUpdateV2(
                update.tool_call_id,
                title=update.title,
                kind=update.kind,
                status=update.status,
                locations=update.locations,
                raw_input=update.raw_input,
                name=update.name,
            )
        ]
    if isinstance(update, ToolCallUpdated):
        return [
            ToolCallUpdateV2(
                update.tool_call_id,
                status=update.status,
                content=(
                    [_content_v2(c) for c in update.content]
                    if update.content is not UNSET
                    else UNSET
                ),
                locations=update.locations,
                raw_output=update.raw_output,
                name=update.name,
                meta=update.meta,
            )
        ]
    if isinstance(update, PlanShown):
        if not update.entries:
            return [PlanRemoved(PLAN_ID)]
        return [PlanUpdated(PlanItems(PLAN_ID, update.entries))]
    if isinstance(update, AvailableCommandsUpdate):
        return [
            AvailableCommandsUpdateV2(
                [
                    CommandV2(
                        c.name,
                        c.description,
                        CommandInputV2(c.input.hint) if c.input is not UNSET else UNSET,
                    )
                    for c in update.available_commands
                ]
            )
        ]
    if isinstance(update, ConfigOptionUpdate):
        return [ConfigOptionUpdateV2(config_options_v2(update.config_options))]
    if isinstance(update, CurrentModeUpdate):
        return []
    if isinstance(update, (SubagentUpdated, SessionMessageShown)):
        return [update] if subagents else []
    raise TypeError(f"no v2 rendering of {kind.__name__}")  # pragma: no cover - every kind is


def _content_v2(content: ToolCallContent) -> ToolCallContentV2:
    if isinstance(content, ToolDiff):
        return diff_v2(content)
    return content


def diff_v2(diff: ToolDiff) -> DiffV2:
    """A v1 diff (one file's old and new text) as v2's: its change and a git patch of it."""
    added = diff.old_text is UNSET or diff.old_text is None
    old = "" if added else str(diff.old_text)
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        diff.new_text.splitlines(keepends=True),
        "/dev/null" if added else f"a{diff.path}",
        f"b{diff.path}",
    )
    body = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    header = f"diff --git a{diff.path} b{diff.path}\n"
    if added:
        header += "new file mode 100644\n"
    return DiffV2(
        [DiffChange("add" if added else "modify", diff.path)], DiffPatch("git_patch", header + body)
    )


def config_options_v2(options: list[ConfigOption]) -> list[ConfigOptionV2]:
    """A session's config options in v2's shape (`configId` for v1's `id`)."""
    return [ConfigOptionV2(o.id, o.name, o.category, o.current_value, o.options) for o in options]


def content_message_id(content: ContentBlock) -> str:
    """The id of a one-chunk message the server shows without one of the log's (a note of
    MCP servers missing): derived from its content, so it is the same each time."""
    digest = hashlib.sha256(msgspec.json.encode(content)).hexdigest()[:16]
    return f"note-{digest}"


def permission_request(params: dict[str, Any]) -> dict[str, Any]:
    """v1 `session/request_permission` params (`toolCall`, `options`) as v2's: a `title`
    (the call's), and the call as the request's `tool_call` subject."""
    call = params.get("toolCall")
    if not isinstance(call, dict):
        return params
    title = call.get("title") or call.get("toolCallId") or "Tool call"
    v2: dict[str, Any] = {
        "sessionId": params["sessionId"],
        "title": title,
        "subject": {"type": "tool_call", "toolCall": call},
        "options": params["options"],
    }
    if "_meta" in params:
        v2["_meta"] = params["_meta"]
    return v2


__all__ = [
    "SUBAGENT_KINDS",
    "AvailableCommandsUpdateV2",
    "CommandInputV2",
    "CommandV2",
    "ConfigOptionUpdateV2",
    "ConfigOptionV2",
    "DiffChange",
    "DiffPatch",
    "DiffV2",
    "ToolCallUpdateV2",
    "V2Notification",
    "V2SessionUpdate",
    "config_options_v2",
    "content_message_id",
    "diff_v2",
    "permission_request",
    "render",
]
