"""The session event model (SPEC 1): every event a session log holds, as msgspec types.

An event is a tagged struct: the tag (`type`) names the event, `seq` and `time` form the
envelope, `data` carries the per-type payload, and `ignorable` / `sourceRange` are optional
envelope fields. Optional fields default to `UNSET`, so "absent" and "null" stay distinct and
an encoded event carries exactly the keys it was given.

Every struct forbids unknown fields (see `core.structs`): a record this model cannot represent
exactly is refused rather than silently trimmed, since the log must round-trip losslessly. An
event of an unknown type is kept as an `UnknownEvent` only when it says `ignorable: true` (see
`decode_event`).

The payloads are built of the ACP content blocks of `core.content` and of the model's stream
chunks and assistant blocks of `core.stream`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, cast, get_args

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from .content import ContentBlock, Meta_, ToolResultContent
from .stream import AssistantBlock, StreamChunk, Usage
from .structs import MAX_SAFE_INTEGER, Model, SafeInt, Seq, Tagged

# ---------------------------------------------------------------------------------------------
# Event payloads.


class TurnEndReasonCompleted(Tagged, tag="completed", tag_field="kind"):
    pass


class TurnEndReasonCancelled(Tagged, tag="cancelled", tag_field="kind"):
    pass


class TurnEndReasonMaxTokens(Tagged, tag="max-tokens", tag_field="kind"):
    pass


class TurnEndReasonRefusal(Tagged, tag="refusal", tag_field="kind"):
    pass


class TurnEndReasonMaxSteps(Tagged, tag="max-steps", tag_field="kind"):
    pass


class ErrorInfo(Model):
    message: str
    code: int | str | UnsetType = UNSET


class TurnEndReasonError(Tagged, tag="error", tag_field="kind"):
    error: ErrorInfo


class TurnEndReasonInterrupted(Tagged, tag="interrupted", tag_field="kind"):
    """Written only by recovery, for a turn whose process died."""


TurnEndReason = (
    TurnEndReasonCompleted
    | TurnEndReasonCancelled
    | TurnEndReasonMaxTokens
    | TurnEndReasonRefusal
    | TurnEndReasonMaxSteps
    | TurnEndReasonError
    | TurnEndReasonInterrupted
)


class TurnStartData(Model):
    turn: int


class TurnEndData(Model):
    turn: int
    reason: TurnEndReason


class StepData(Model):
    turn: int
    step: int


class UserMessage(Model):
    id: str
    content: list[ContentBlock]


class UserMessageData(Model):
    turn: int
    message: UserMessage


class AssistantChunkData(Model):
    turn: int
    step: int
    chunk: StreamChunk


class AssistantMessage(Model):
    id: str
    content: list[AssistantBlock]


class AssistantMessageData(Model):
    turn: int
    step: int
    message: AssistantMessage
    usage: Usage | UnsetType = UNSET
    interrupted: Literal[True] | UnsetType = UNSET


class ToolCallData(Model):
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolCallLocation(Model):
    """A place a tool call touched (ACP's `ToolCallLocation`): an absolute path, and a line."""

    path: str
    line: int | UnsetType = UNSET


class FileCheckpoint(Model):
    """A file a tool call changed: its content before (kept in the store under that digest;
    None: the file did not exist) and the digest of what the call left in it."""

    path: str
    before: str | None
    after: str


class ToolResultData(Model):
    turn: int
    step: int
    call_id: str
    content: list[ToolResultContent]
    is_error: Literal[True] | UnsetType = UNSET
    raw_output: Any | UnsetType = UNSET
    locations: list[ToolCallLocation] | UnsetType = UNSET
    """Where the call found out what it touched (an edit's lines, grep's hits); shown as the
    closing update's `locations`, which replace those of the `tool_call`."""
    checkpoints: list[FileCheckpoint] | UnsetType = UNSET
    """The files the call changed (`write_file`, `edit_file`), for `/rewind`; never shown."""


PlanPriority = Literal["high", "medium", "low"]
PlanStatus = Literal["pending", "in_progress", "completed"]


class PlanEntry(Model):
    content: str
    priority: PlanPriority
    status: PlanStatus
    meta: Meta_ = field(default=UNSET, name="_meta")


class PlanUpdateData(Model):
    entries: list[PlanEntry]


class SessionTitleData(Model):
    title: str
    usage: Usage | UnsetType = UNSET
    """An automatic title made by a model call (`core.titles`): that call's usage, which is
    not a step's (the turns' steps are the model calls llm-replay counts)."""


class SubagentStartData(Model):
    turn: int
    step: int
    call_id: str
    child_session_id: str
    mode: Literal["one-shot"]


class SessionModeData(Model):
    mode_id: str


class SessionConfigData(Model):
    config_id: str
    value: str | bool


class ContextCompactionData(Model):
    turn: int
    step: int
    through_seq: Seq
    """The last seq the summary stands for: the provider history restarts after it."""


class CommandResultData(Model):
    turn: int
    command: str
    content: list[ContentBlock]
    is_error: Literal[True] | UnsetType = UNSET


NoticeSeverity = Literal["info", "warning", "error"]


class SessionNoticeData(Model):
    """A notice shown to the user (ACP `notice`): live, never replayed by a load."""

    severity: NoticeSeverity
    title: Annotated[str, Meta(min_length=1)]
    description: str | UnsetType = UNSET


PermissionOutcome = Literal["selected", "cancelled", "timeout"]
"""How a permission request ended: an option chosen, the request cancelled (the client
answered `cancelled`, or the turn was cancelled before it answered), or no answer in time."""


class PermissionDecisionData(Model):
    """The answer to the `session/request_permission` of the tool call `callId`."""

    turn: int
    step: int
    call_id: str
    outcome: PermissionOutcome
    option_id: str | UnsetType = UNSET
    """The option chosen (`outcome: "selected"` only), as the client sent it."""


class InstructionFile(Model):
    """A project instruction file read into the system prompt: where, its digest, its size."""

    path: str
    sha256: str
    bytes: int


SystemPromptMode = Literal["append", "override"]
"""How the client's system prompt meets the server's own: after it, or instead of it."""


class PromptSettings(Model):
    """What shaped the server's own system prompt besides the session's header, its mode and
    tools, and the instruction files: enough to render it again, never an environment value
    beyond the shell's name."""

    prompt: str
    """Its fixed text: `acp-server:<name>` for a text of the package (`agent/prompts`), else
    the path of the `--system-prompt-file` it was read from."""
    prompt_sha256: str
    """The SHA-256 of that fixed text, UTF-8 encoded."""
    platform: str
    """The operating system's name (`Linux`, `Darwin`, `Windows`)."""
    date: str
    """The local date the prompt gave, ISO 8601 (`2026-12-03`)."""
    shell: str | UnsetType = UNSET
    """The user's shell's name (the last part of `$SHELL`, or of `%COMSPEC%` on Windows),
    when there is one."""


class SessionContextData(Model):
    instructions: list[InstructionFile]
    """The project instruction files read, farthest from the working directory first."""
    system_prompt_mode: SystemPromptMode | UnsetType = UNSET
    system_prompt: list[ContentBlock] | UnsetType = UNSET
    """The client's `systemPrompt` content (ACP content blocks), as it was given."""
    settings: PromptSettings | UnsetType = UNSET
    """What else shaped the server's own system prompt; absent when the server sends none
    (llm-replay without `--system-prompt-file`)."""


class SessionForkedData(Model):
    from_session_id: str
    """The session this one was forked from."""
    through_seq: Annotated[int, Meta(ge=-1, le=MAX_SAFE_INTEGER)]
    """The last seq copied from it (-1: none); this event's own seq is the next one (SPEC 4.7)."""


class RestoredFile(Model):
    path: str
    sha256: str | None
    """The digest of the content restored; None: the file was removed (it did not exist)."""


class SessionRewindData(Model):
    to_message_id: str
    """The user message rewound to: its turn and every later one are left out of the model's
    history (up to this event; later turns count again)."""
    restored: list[RestoredFile]
    skipped: list[str]
    """Files changed outside the agent since it last wrote them, left as they were."""


class SessionArchivedData(Model):
    archived: bool
    """True from `session/archive` on (left out of `session/list`), False from `unarchive`."""


# ---------------------------------------------------------------------------------------------
# Events.

SourceRange = tuple[Seq, Seq]


class Event(Tagged):
    """The envelope shared by every event type; subclasses narrow `data`."""

    seq: Seq
    time: SafeInt
    data: Any
    ignorable: Literal[True] | UnsetType = UNSET
    source_range: SourceRange | UnsetType = UNSET


class TurnStart(Event, tag="turn/start"):
    data: TurnStartData


class TurnEnd(Event, tag="turn/end"):
    data: TurnEndData


class StepStart(Event, tag="step/start"):
    data: StepData


class StepEnd(Event, tag="step/end"):
    data: StepData


class UserMessageEvent(Event, tag="user/message"):
    data: UserMessageData


class AssistantChunk(Event, tag="assistant/chunk"):
    data: AssistantChunkData


class AssistantMessageEvent(Event, tag="assistant/message"):
    data: AssistantMessageData


class ToolCall(Event, tag="tool/call"):
    data: ToolCallData


class ToolResult(Event, tag="tool/result"):
    data: ToolResultData


class PlanUpdate(Event, tag="plan/update"):
    data: PlanUpdateData


class SessionTitle(Event, tag="session/title"):
    data: SessionTitleData


class SubagentStart(Event, tag="subagent/start"):
    data: SubagentStartData


class SessionMode(Event, tag="session/mode"):
    data: SessionModeData


class SessionConfig(Event, tag="session/config"):
    data: SessionConfigData


class ContextCompaction(Event, tag="context/compaction"):
    """The `assistant/message` of step `(turn, step)` summarises every event up to
    `throughSeq` (SPEC 4.6)."""

    data: ContextCompactionData


class CommandResult(Event, tag="command/result"):
    data: CommandResultData


class SessionNotice(Event, tag="session/notice"):
    data: SessionNoticeData


class PermissionDecision(Event, tag="permission/decision"):
    """The answer to a permission request (the request itself is shown by its tool call)."""

    data: PermissionDecisionData


class SessionContext(Event, tag="session/context"):
    """What shapes the system prompt from here on: the client's `systemPrompt`, the project
    instruction files read."""

    data: SessionContextData


class SessionForked(Event, tag="session/forked"):
    """The first event after a fork's copied prefix: the parent's events `0..throughSeq`,
    kept with their seqs (SPEC 4.7)."""

    data: SessionForkedData


class SessionArchived(Event, tag="session/archived"):
    data: SessionArchivedData


class SessionRewind(Event, tag="session/rewind"):
    """Files restored to their content before a user message, whose turn and every later one
    are rewound: still in the log, left out of the model's history."""

    data: SessionRewindData


KnownEvent = (
    TurnStart
    | TurnEnd
    | StepStart
    | StepEnd
    | UserMessageEvent
    | AssistantChunk
    | AssistantMessageEvent
    | ToolCall
    | ToolResult
    | PlanUpdate
    | SessionTitle
    | SubagentStart
    | SessionMode
    | SessionConfig
    | ContextCompaction
    | CommandResult
    | SessionNotice
    | PermissionDecision
    | SessionContext
    | SessionForked
    | SessionArchived
    | SessionRewind
)

KNOWN_EVENT_TYPES: Final[frozenset[str]] = frozenset(
    t.__struct_config__.tag for t in get_args(KnownEvent)
)


class UnknownEvent(Model):
    """An event of a type this build does not know, kept verbatim because it is ignorable."""

    type: str
    seq: Seq
    time: SafeInt
    data: Any
    ignorable: Literal[True]
    source_range: SourceRange | UnsetType = UNSET


SessionEvent = KnownEvent | UnknownEvent


class EventError(ValueError):
    """A value is not a valid session event."""


class _EnvelopeProbe(Struct):
    """Just enough of an envelope to tell an unknown event type from a malformed event."""

    type: str | UnsetType = UNSET
    ignorable: Any = None


_encoder: Final = msgspec.json.Encoder()
_known_decoder: Final[msgspec.json.Decoder[KnownEvent]] = msgspec.json.Decoder(KnownEvent)
_unknown_decoder: Final = msgspec.json.Decoder(UnknownEvent)
_probe_decoder: Final = msgspec.json.Decoder(_EnvelopeProbe)


def encode_event(event: SessionEvent) -> bytes:
    """One event as compact JSON."""
    return _encoder.encode(event)


def decode_event(raw: bytes | str) -> SessionEvent:
    """Decode one event from JSON, keeping an unknown type only when it is ignorable.

    Raises `EventError` with msgspec's explanation (which names the offending field).
    """
    try:
        return _known_decoder.decode(raw)
    except msgspec.ValidationError as exc:
        return _decode_unknown(raw, exc, _probe_decoder.decode, _unknown_decoder.decode)
    except msgspec.DecodeError as exc:
        raise EventError(f"invalid JSON: {exc}") from None


def convert_event(value: Any) -> SessionEvent:
    """Like `decode_event`, for an already parsed JSON value."""
    try:
        known: KnownEvent = msgspec.convert(value, KnownEvent)
        return known
    except msgspec.ValidationError as exc:
        return _decode_unknown(
            value,
            exc,
            lambda v: msgspec.convert(v, _EnvelopeProbe),
            lambda v: msgspec.convert(v, UnknownEvent),
        )


def _decode_unknown(
    raw: Any,
    exc: Exception,
    probe: Callable[[Any], _EnvelopeProbe],
    decode_unknown: Callable[[Any], UnknownEvent],
) -> SessionEvent:
    try:
        envelope = probe(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise EventError(str(exc)) from None
    if envelope.type is UNSET or envelope.type in KNOWN_EVENT_TYPES:
        # No type at all: msgspec's own message says so ("missing required field `type`").
        raise EventError(str(exc)) from None
    if envelope.ignorable is not True:
        raise EventError(f"unknown event type {envelope.type!r} (not marked ignorable)") from None
    try:
        return decode_unknown(raw)
    except msgspec.ValidationError as inner:
        raise EventError(str(inner)) from None


def event_type(event: SessionEvent) -> str:
    """The wire `type` of an event."""
    if isinstance(event, UnknownEvent):
        return event.type
    # Every known event class is declared with a string tag.
    return cast(str, event.__struct_config__.tag)
