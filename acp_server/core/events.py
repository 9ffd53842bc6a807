"""The session event model (SPEC 1): every event a session log holds, as msgspec types.

An event is a tagged struct: the tag (`type`) names the event, `seq` and `time` form the
envelope, `data` carries the per-type payload, and `ignorable` / `sourceRange` are optional
envelope fields. Optional fields default to `UNSET`, so "absent" and "null" stay distinct and
an encoded event carries exactly the keys it was given.

Every struct forbids unknown fields: a record this model cannot represent exactly is refused
rather than silently trimmed, since the log must round-trip losslessly. An event of an unknown
type is kept as an `UnknownEvent` only when it says `ignorable: true` (see `decode_event`).

Structs are created with `gc=False`: events never form reference cycles, and long logs hold
hundreds of thousands of them, which would otherwise keep the cycle collector busy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, cast, get_args

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Seqs and times must survive a trip through a JavaScript number."""

SafeInt = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
Seq = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]

# ---------------------------------------------------------------------------------------------
# Shared struct configurations.


class Model(Struct, rename="camel", omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """Base of every payload struct: camelCase keys, absent optionals omitted, strict keys."""


class Tagged(
    Model, tag_field="type", rename="camel", omit_defaults=True, forbid_unknown_fields=True
):
    """Base of every struct in a union tagged by `type`."""


# ---------------------------------------------------------------------------------------------
# ACP content blocks (the `ContentBlock` union of the ACP v1 schema).

Meta_ = dict[str, Any] | None | UnsetType
"""ACP's `_meta`: an object or null, kept exactly as given."""


class TextContent(Tagged, tag="text"):
    text: str
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ImageContent(Tagged, tag="image"):
    data: str
    mime_type: str
    uri: str | UnsetType | None = UNSET
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class AudioContent(Tagged, tag="audio"):
    data: str
    mime_type: str
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ResourceLink(Tagged, tag="resource_link"):
    uri: str
    name: str
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    mime_type: str | UnsetType | None = UNSET
    size: int | UnsetType | None = UNSET
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class ResourceContents(Model):
    """ACP's text or blob resource contents (exactly one of `text` and `blob` is set)."""

    uri: str
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    mime_type: str | UnsetType | None = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


class EmbeddedResource(Tagged, tag="resource"):
    resource: ResourceContents
    annotations: Any | UnsetType = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


class DiffContent(Tagged, tag="diff"):
    """A file change in a tool result (ACP's `Diff` tool call content)."""

    path: str
    new_text: str
    old_text: str | UnsetType | None = UNSET
    meta: Meta_ = field(default=UNSET, name="_meta")


ToolResultContent = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | DiffContent
)

# ---------------------------------------------------------------------------------------------
# Stream chunks: what a provider yields, one per streamed fragment.

BlockType = Literal["text", "reasoning", "tool-call"]
FinishReason = Literal["stop", "tool-calls", "length", "content-filter"]


class BlockStart(Tagged, tag="block-start"):
    index: int
    block_type: BlockType


class TextDelta(Tagged, tag="text-delta"):
    index: int
    text: str


class ReasoningDelta(Tagged, tag="reasoning-delta"):
    index: int
    text: str


class ReasoningSignature(Tagged, tag="reasoning-signature"):
    """The provider's signature over a reasoning block's text (Anthropic's thinking blocks):
    opaque, sent back with the block in later requests so that the provider accepts it."""

    index: int
    signature: str


class ToolCallDelta(Tagged, tag="tool-call-delta"):
    index: int
    id: str
    arguments_delta: str
    name: str | UnsetType = UNSET


class BlockEnd(Tagged, tag="block-end"):
    index: int


class Usage(Model):
    input_tokens: int
    """Every input token of the call, cached ones included."""
    output_tokens: int
    cached_input_tokens: int | UnsetType = UNSET
    """Of `input_tokens`, those read from the provider's prompt cache."""
    cache_write_input_tokens: int | UnsetType = UNSET
    """Of `input_tokens`, those written to the provider's prompt cache (where it says)."""


class UsageChunk(Tagged, tag="usage"):
    usage: Usage


class Finish(Tagged, tag="finish"):
    reason: FinishReason


StreamChunk = (
    BlockStart
    | TextDelta
    | ReasoningDelta
    | ReasoningSignature
    | ToolCallDelta
    | BlockEnd
    | UsageChunk
    | Finish
)

# ---------------------------------------------------------------------------------------------
# Assembled assistant content.


class AssistantText(Tagged, tag="text"):
    text: str


class AssistantReasoning(Tagged, tag="reasoning"):
    text: str
    signature: str | UnsetType = UNSET
    """The provider's signature over `text`, when it signs its reasoning (see
    `ReasoningSignature`); a signed block goes back to the provider as it came."""


class AssistantToolCall(Tagged, tag="tool-call"):
    id: str
    name: str
    arguments: str
    """The raw JSON text the model produced, unparsed."""


AssistantBlock = AssistantText | AssistantReasoning | AssistantToolCall

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


class InstructionFile(Model):
    """A project instruction file read into the system prompt: where, its digest, its size."""

    path: str
    sha256: str
    bytes: int


SystemPromptMode = Literal["append", "override"]
"""How the client's system prompt meets the server's own: after it, or instead of it."""


class SessionContextData(Model):
    instructions: list[InstructionFile]
    system_prompt_mode: SystemPromptMode | UnsetType = UNSET
    system_prompt: list[ContentBlock] | UnsetType = UNSET
    """The client's `systemPrompt` content (ACP content blocks), as it was given."""


class SessionForkedData(Model):
    from_session_id: str
    """The session this one was forked from."""
    through_seq: Annotated[int, Meta(ge=-1, le=MAX_SAFE_INTEGER)]
    """The last seq copied from it (-1: none); this event's own seq is the next one (SPEC 4.7)."""


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
    | SessionContext
    | SessionForked
    | SessionArchived
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
